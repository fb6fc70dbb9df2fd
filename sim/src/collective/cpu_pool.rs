//! The cores that hosts share: processor sharing of their libraries' work.
//!
//! Where every host of a topology runs on one machine (the testbed's namespaces on a 2-core
//! machine), the CPU work of their libraries ([`OpKind::HostWork`](super::OpKind::HostWork):
//! waking a thread for a message, the system calls, the kernel's network stack, gloo's staging
//! copies) and their reductions ([`OpKind::Reduce`](super::OpKind::Reduce)) share that
//! machine's cores. While `J` jobs run (an op of `k` endpoints is `k` jobs), each advances at
//! `min(1, cores / J)` core-seconds per second: a job uses one core at most, and when there
//! are fewer cores than jobs every job gets an equal share. An op finishes when its jobs have
//! received their core time.
//!
//! What makes it cheap: every running job advances at the same rate, so the pool keeps one
//! virtual clock (the core-seconds each running job has received since the pool started) and
//! each op's finish as a point on that clock, in a heap. Starting or finishing an op costs
//! O(log n) and the next finish is the heap's top, however many ops run. [`reference()`] steps
//! every job explicitly, and the pool is tested against it.

use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;

use crate::engine::SimTime;

/// Core-seconds within which two finishes are one (below the clock's picosecond at any rate
/// this model gives).
const EPS_CORE_SECS: f64 = 1e-12;

/// An op's finish on the virtual clock; ties go to the lower op id (determinism).
#[derive(Debug, Clone, Copy)]
struct Finish {
    at_core_secs: f64,
    op: u32,
    jobs: u32,
}

impl PartialEq for Finish {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Finish {}
impl PartialOrd for Finish {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Finish {
    fn cmp(&self, other: &Self) -> Ordering {
        self.at_core_secs
            .total_cmp(&other.at_core_secs)
            .then(self.op.cmp(&other.op))
    }
}

/// Host work sharing `cores` cores.
#[derive(Debug)]
pub struct CpuPool {
    cores: f64,
    /// Core-seconds every running job has received since the pool started.
    virtual_core_secs: f64,
    /// When `virtual_core_secs` was last brought up to date.
    updated: SimTime,
    /// Jobs running now.
    jobs: u64,
    running: BinaryHeap<Reverse<Finish>>,
}

impl CpuPool {
    /// A pool of `cores` cores (at least one: the profile checks it), idle.
    pub fn new(cores: f64) -> CpuPool {
        CpuPool {
            cores: cores.max(1.0),
            virtual_core_secs: 0.0,
            updated: SimTime::ZERO,
            jobs: 0,
            running: BinaryHeap::new(),
        }
    }

    /// Core-seconds per second each running job gets.
    fn rate(&self) -> f64 {
        if self.jobs == 0 {
            1.0
        } else {
            (self.cores / self.jobs as f64).min(1.0)
        }
    }

    fn advance(&mut self, now: SimTime) {
        debug_assert!(now >= self.updated, "the pool's clock only moves forward");
        if self.jobs > 0 {
            self.virtual_core_secs += (now - self.updated).as_secs_f64() * self.rate();
        }
        self.updated = now;
    }

    /// Op `op` starts `jobs` jobs of `core_secs` each at `now`.
    pub fn start(&mut self, now: SimTime, op: u32, jobs: u32, core_secs: f64) {
        self.advance(now);
        self.running.push(Reverse(Finish {
            at_core_secs: self.virtual_core_secs + core_secs.max(0.0),
            op,
            jobs,
        }));
        self.jobs += u64::from(jobs);
    }

    /// When the next op finishes if nothing else starts (`None` when the pool is idle).
    pub fn next_finish(&self) -> Option<SimTime> {
        let Reverse(first) = self.running.peek()?;
        let left = (first.at_core_secs - self.virtual_core_secs).max(0.0);
        Some(self.updated + SimTime::from_secs_f64(left / self.rate()))
    }

    /// Appends to `done` the ops whose jobs have all received their time by `now`, in order
    /// of finish, and takes them out of the pool.
    pub fn finish_due(&mut self, now: SimTime, done: &mut Vec<u32>) {
        self.advance(now);
        while let Some(&Reverse(first)) = self.running.peek() {
            if first.at_core_secs > self.virtual_core_secs + EPS_CORE_SECS {
                break;
            }
            self.running.pop();
            self.jobs -= u64::from(first.jobs);
            done.push(first.op);
        }
        if self.jobs == 0 {
            // Idle: restart the clock from zero so that it keeps its precision.
            self.virtual_core_secs = 0.0;
        }
    }
}

/// The slow reference: every job's remaining core time, stepped from one finish to the
/// next. `ops[i] = (start_secs, jobs, core_secs)`; returns each op's finish in seconds.
pub fn reference(cores: f64, ops: &[(f64, u32, f64)]) -> Vec<f64> {
    let mut order: Vec<usize> = (0..ops.len()).collect();
    order.sort_by(|&a, &b| ops[a].0.total_cmp(&ops[b].0).then(a.cmp(&b)));
    let mut remaining: Vec<Option<f64>> = vec![None; ops.len()];
    let mut finish = vec![f64::NAN; ops.len()];
    let mut now = 0.0f64;
    let mut next_arrival = 0usize;
    loop {
        let jobs: u32 = (0..ops.len())
            .filter(|&i| remaining[i].is_some())
            .map(|i| ops[i].1)
            .sum();
        let rate = if jobs == 0 {
            1.0
        } else {
            (cores / f64::from(jobs)).min(1.0)
        };
        let to_finish = (0..ops.len())
            .filter_map(|i| remaining[i].map(|r| r / rate))
            .fold(f64::INFINITY, f64::min);
        let to_arrival = order
            .get(next_arrival)
            .map_or(f64::INFINITY, |&i| ops[i].0 - now);
        if to_finish.is_infinite() && to_arrival.is_infinite() {
            return finish;
        }
        let dt = to_finish.min(to_arrival);
        now += dt;
        for i in 0..ops.len() {
            if let Some(r) = remaining[i].as_mut() {
                *r -= dt * rate;
                if *r <= 1e-15 {
                    remaining[i] = None;
                    finish[i] = now;
                }
            }
        }
        while let Some(&i) = order.get(next_arrival) {
            if ops[i].0 > now {
                break;
            }
            remaining[i] = Some(ops[i].2);
            if ops[i].2 <= 0.0 {
                remaining[i] = None;
                finish[i] = now;
            }
            next_arrival += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Plays `ops` through a pool as the play loop does: starts at their times, finishes at
    /// the pool's next finish.
    fn pool_finishes(cores: f64, ops: &[(f64, u32, f64)]) -> Vec<f64> {
        let mut pool = CpuPool::new(cores);
        let mut order: Vec<usize> = (0..ops.len()).collect();
        order.sort_by(|&a, &b| ops[a].0.total_cmp(&ops[b].0).then(a.cmp(&b)));
        let mut finish = vec![f64::NAN; ops.len()];
        let mut next = 0;
        let mut done = Vec::new();
        loop {
            let arrival = order.get(next).map(|&i| SimTime::from_secs_f64(ops[i].0));
            let due = pool.next_finish();
            let now = match (arrival, due) {
                (None, None) => return finish,
                (Some(a), None) => a,
                (None, Some(d)) => d,
                (Some(a), Some(d)) => a.min(d),
            };
            pool.finish_due(now, &mut done);
            for op in done.drain(..) {
                finish[op as usize] = now.as_secs_f64();
            }
            while let Some(&i) = order.get(next) {
                if SimTime::from_secs_f64(ops[i].0) > now {
                    break;
                }
                pool.start(now, i as u32, ops[i].1, ops[i].2);
                next += 1;
            }
            pool.finish_due(now, &mut done);
            for op in done.drain(..) {
                finish[op as usize] = now.as_secs_f64();
            }
        }
    }

    #[test]
    fn work_within_the_cores_runs_at_full_speed() {
        // Two jobs of 1 ms on two cores: both done at 1 ms.
        assert_eq!(pool_finishes(2.0, &[(0.0, 2, 1e-3)]), vec![1e-3]);
    }

    #[test]
    fn more_jobs_than_cores_share_them_equally() {
        // Four jobs of 1 ms on two cores take 2 ms; a later job of 1 ms on one core alone with
        // one other that has 0.5 ms left shares until that one ends.
        let f = pool_finishes(2.0, &[(0.0, 4, 1e-3)]);
        assert!((f[0] - 2e-3).abs() < 1e-12, "{f:?}");
        let f = pool_finishes(1.0, &[(0.0, 1, 1e-3), (0.5e-3, 1, 1e-3)]);
        // 0.5 ms alone, then 0.5 ms left shared at half speed: done at 1.5 ms; the second then
        // has 0.5 ms left alone: done at 2.0 ms.
        assert!((f[0] - 1.5e-3).abs() < 1e-12, "{f:?}");
        assert!((f[1] - 2.0e-3).abs() < 1e-12, "{f:?}");
    }

    #[test]
    fn an_op_without_work_finishes_when_it_starts() {
        assert_eq!(pool_finishes(1.0, &[(1e-3, 3, 0.0)]), vec![1e-3]);
    }

    proptest! {
        #[test]
        fn the_pool_matches_the_reference(
            cores in 1u32..4,
            ops in prop::collection::vec((0u32..20, 1u32..5, 1u32..50), 1..30),
        ) {
            let ops: Vec<(f64, u32, f64)> = ops
                .into_iter()
                .map(|(at, jobs, work)| (f64::from(at) * 1e-4, jobs, f64::from(work) * 1e-5))
                .collect();
            let fast = pool_finishes(f64::from(cores), &ops);
            let slow = reference(f64::from(cores), &ops);
            for (f, s) in fast.iter().zip(&slow) {
                prop_assert!((f - s).abs() < 1e-9, "pool {fast:?}\nreference {slow:?}");
            }
        }
    }
}

#[cfg(test)]
mod play_tests {
    //! The play loop runs host work and reductions on the shared cores, and as plain delays
    //! without them.
    use crate::collective::play::{play, PlayOptions};
    use crate::collective::{Collective, OpKind, Phase, Schedule};
    use crate::engine::SimTime;
    use crate::net::flow::FlowModel;
    use crate::topology::LinkClass;

    /// Four ranks each spend 1 ms of host work, then rank 0 sends rank 1 a message that
    /// waits for all of it; returns when the work ended and when everything did.
    fn four_ranks_of_work(shared_cores: Option<f64>) -> (f64, f64) {
        let mut s = Schedule::new(Collective::SendRecv, "test", 4, 1000);
        let work = s.push(
            OpKind::HostWork {
                endpoints: 4,
                core_time: SimTime::from_secs_f64(1e-3),
            },
            vec![],
            Phase::SendRecv,
            0,
            0,
        );
        let p = s.add_pattern(vec![(0, 1)]);
        s.push(
            OpKind::Transfer {
                pattern: p,
                bytes: 1000,
            },
            vec![work],
            Phase::SendRecv,
            0,
            1,
        );
        let out = play_on_four(&s, None, shared_cores);
        (out.ops[0].end.as_secs_f64(), out.end.as_secs_f64())
    }

    /// Plays `s` on a star of 4 ranks at 1 Gbit/s.
    fn play_on_four(
        s: &Schedule,
        reduce_bytes_per_s: Option<f64>,
        shared_cores: Option<f64>,
    ) -> crate::collective::play::PlayOutcome {
        let topo = crate::net::testing::star(4, 1e9, SimTime::ZERO, 1 << 20, LinkClass::Ethernet);
        let mut m = FlowModel::new(topo.clone(), Default::default(), 0);
        let options = PlayOptions {
            reduce_bytes_per_s,
            shared_cores,
        };
        play(s, &topo.gpus()[..4], &mut m, options).unwrap()
    }

    #[test]
    fn host_work_shares_the_cores_the_hosts_share() {
        // 4 ms of work on 2 cores: 2 ms; on 1 core: 4 ms; with a core each: 1 ms.
        assert!((four_ranks_of_work(Some(2.0)).0 - 2e-3).abs() < 1e-9);
        assert!((four_ranks_of_work(Some(1.0)).0 - 4e-3).abs() < 1e-9);
        assert!((four_ranks_of_work(None).0 - 1e-3).abs() < 1e-9);
        // What waits for the work starts after it: the message's 1000 B at 1 Gbit/s.
        let (work_end, end) = four_ranks_of_work(Some(2.0));
        assert!(end > work_end + 7e-6, "{work_end} {end}");
    }

    /// Four ranks each reduce 1 MB at 1 GB/s: when the reduction ends.
    fn four_ranks_reduce(shared_cores: Option<f64>) -> f64 {
        let mut s = Schedule::new(Collective::AllReduce, "test", 4, 1_000_000);
        s.push(
            OpKind::Reduce {
                endpoints: 4,
                bytes: 1_000_000,
            },
            vec![],
            Phase::ReduceScatter,
            0,
            0,
        );
        play_on_four(&s, Some(1e9), shared_cores).ops[0]
            .end
            .as_secs_f64()
    }

    #[test]
    fn reductions_share_the_cores_the_hosts_share() {
        // 1 ms each at the reduction rate: 2 ms on 2 shared cores, 1 ms with a core each.
        assert!((four_ranks_reduce(Some(2.0)) - 2e-3).abs() < 1e-9);
        assert!((four_ranks_reduce(None) - 1e-3).abs() < 1e-9);
    }
}
