//! Event-queue speed: the classic "hold" model, for the radix-heap `EventQueue` and the
//! binary-heap reference it replaced.
//!
//! A queue is pre-filled with `pending` events at random increments after time zero and run
//! through `pending` warm-up holds; then each measured iteration is one hold: pop the next event
//! and schedule one at its time plus a random increment, so the queue size stays constant.
//! Increments are exponential or uniform with a mean of 1 µs, drawn from a seeded generator into
//! a table beforehand, so the random-number cost is not measured. `reschedule` adds to each hold
//! the pattern of a flow model: cancel one random pending event and schedule it again later.
//!
//! Run: `cargo bench -p sim --bench event_queue -- --warm-up-time 1 --measurement-time 5`.
//! Criterion's time per iteration is the time per hold.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use sim::engine::queue_reference::{BinaryHeapQueue, Handle};
use sim::engine::{EventHandle, EventQueue, SimRng, SimTime};

const MEAN_INCREMENT_PS: f64 = 1e6;
const INCREMENT_TABLE_LEN: usize = 1 << 16;
const SEED: u64 = 0x5eed;

#[derive(Debug, Clone, Copy)]
enum Increments {
    Exponential,
    Uniform,
}

impl Increments {
    fn name(self) -> &'static str {
        match self {
            Increments::Exponential => "exponential",
            Increments::Uniform => "uniform",
        }
    }

    fn table(self) -> Vec<u64> {
        let mut rng = SimRng::new(SEED, 0).fork(self.name());
        (0..INCREMENT_TABLE_LEN)
            .map(|_| match self {
                Increments::Exponential => {
                    (-(1.0 - rng.unit_f64()).ln() * MEAN_INCREMENT_PS).round() as u64
                }
                Increments::Uniform => rng.below(2 * MEAN_INCREMENT_PS as u64),
            })
            .collect()
    }
}

/// The operations the benchmark needs, over both queue implementations.
trait BenchQueue: Default {
    type Handle: Copy;
    fn put(&mut self, at: SimTime, event: u32) -> Self::Handle;
    fn take(&mut self) -> (SimTime, u32);
    fn remove(&mut self, handle: Self::Handle) -> bool;
}

impl BenchQueue for EventQueue<u32> {
    type Handle = EventHandle;
    fn put(&mut self, at: SimTime, event: u32) -> EventHandle {
        self.schedule(at, event)
            .expect("hold never schedules in the past")
    }
    fn take(&mut self) -> (SimTime, u32) {
        self.pop().expect("hold keeps the queue non-empty")
    }
    fn remove(&mut self, handle: EventHandle) -> bool {
        self.cancel(handle)
    }
}

impl BenchQueue for BinaryHeapQueue<u32> {
    type Handle = Handle;
    fn put(&mut self, at: SimTime, event: u32) -> Handle {
        self.schedule(at, event)
            .expect("hold never schedules in the past")
    }
    fn take(&mut self) -> (SimTime, u32) {
        self.pop().expect("hold keeps the queue non-empty")
    }
    fn remove(&mut self, handle: Handle) -> bool {
        self.cancel(handle)
    }
}

/// A queue in the hold steady state. Event `k` (payload `k`) is always pending exactly once;
/// `handles[k]` is its current handle.
struct Hold<Q: BenchQueue> {
    queue: Q,
    handles: Vec<Q::Handle>,
    increments: Vec<u64>,
    next_increment: usize,
}

impl<Q: BenchQueue> Hold<Q> {
    fn new(pending: usize, increments: Increments) -> Self {
        let increments = increments.table();
        let mut queue = Q::default();
        let handles = (0..pending)
            .map(|k| {
                let at = SimTime::from_ps(increments[k % INCREMENT_TABLE_LEN]);
                queue.put(at, k as u32)
            })
            .collect();
        let mut hold = Hold {
            queue,
            handles,
            increments,
            next_increment: pending,
        };
        for _ in 0..pending {
            hold.hold_tracked();
        }
        hold
    }

    fn increment(&mut self) -> SimTime {
        let ps = self.increments[self.next_increment % INCREMENT_TABLE_LEN];
        self.next_increment = self.next_increment.wrapping_add(1);
        SimTime::from_ps(ps)
    }

    /// Pops the next event and schedules it again a random increment later.
    fn hold(&mut self) -> SimTime {
        let (now, k) = self.queue.take();
        let at = now + self.increment();
        let _ = self.queue.put(at, k);
        now
    }

    /// A hold that keeps the new event's handle.
    fn hold_tracked(&mut self) -> SimTime {
        let (now, k) = self.queue.take();
        let at = now + self.increment();
        self.handles[k as usize] = self.queue.put(at, k);
        now
    }

    /// A tracked hold, plus moving one pseudo-randomly chosen pending event to a new time.
    fn hold_and_reschedule(&mut self) -> SimTime {
        let now = self.hold_tracked();
        let victim = (self.next_increment.wrapping_mul(0x9e37_79b9) >> 7) % self.handles.len();
        let cancelled = self.queue.remove(self.handles[victim]);
        debug_assert!(cancelled);
        let at = now + self.increment();
        self.handles[victim] = self.queue.put(at, victim as u32);
        now
    }
}

fn bench_queue<Q: BenchQueue>(c: &mut Criterion, queue_name: &str) {
    // Queues are built on first use, so that a filtered run builds only what it measures.
    let mut group = c.benchmark_group("hold");
    for pending in [1_000usize, 1_000_000] {
        for increments in [Increments::Exponential, Increments::Uniform] {
            let mut hold = None;
            let id = format!("{queue_name}/{}", increments.name());
            group.bench_function(BenchmarkId::new(id, pending), |b| {
                let hold = hold.get_or_insert_with(|| Hold::<Q>::new(pending, increments));
                b.iter(|| hold.hold())
            });
        }
    }
    group.finish();

    let mut group = c.benchmark_group("reschedule");
    let pending = 1_000_000;
    let mut hold = None;
    group.bench_function(BenchmarkId::new(queue_name, pending), |b| {
        let hold = hold.get_or_insert_with(|| Hold::<Q>::new(pending, Increments::Exponential));
        b.iter(|| hold.hold_and_reschedule())
    });
    group.finish();
}

fn radix_heap(c: &mut Criterion) {
    bench_queue::<EventQueue<u32>>(c, "radix_heap");
}

fn binary_heap_reference(c: &mut Criterion) {
    bench_queue::<BinaryHeapQueue<u32>>(c, "binary_heap");
}

criterion_group!(benches, radix_heap, binary_heap_reference);
criterion_main!(benches);
