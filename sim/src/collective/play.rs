//! Plays a [`Schedule`] on a network model: the event loop of a collective.
//!
//! Ops start as soon as all their dependencies have finished, in op order among those ready at
//! the same time; an op marked in order also waits for its connections ([`super::in_order`]).
//! Transfer ops become batches of the network model (after their transport's setup time, with
//! its per-flow rate ceiling, when a library set one); reduce ops take `bytes / reduce rate`;
//! compute ops are delays of their duration; host work, and reductions, share the machine's
//! cores where endpoints share some ([`super::cpu_pool`]), else are delays. The loop
//! owns the event queue; the network model schedules its own events through [`NetContext`]
//! and never sees the loop's event type. When no event is left at the current time and
//! nothing more is ready, the loop lets the model settle ([`NetworkModel::settle`]) before
//! time moves on.
//!
//! The loop stops with an error, never a wrapped clock, when an event lands on the horizon of
//! simulated time ([`SimTime::MAX`], where sums saturate), or when a [`Watch`]'s event budget is
//! spent; a watch also reports progress to whoever shows it.

use std::collections::{HashMap, VecDeque};

use super::cpu_pool::CpuPool;
use super::in_order::Connections;
use super::{OpKind, Schedule};
use crate::engine::{EventHandle, EventQueue, SimTime};
use crate::net::{FlowLoad, NetContext, NetCounters, NetEvent, NetPatternId, NetworkModel};
use crate::topology::{DeviceId, TopologyError};

/// When each op ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub struct OpTiming {
    pub start: SimTime,
    pub end: SimTime,
}

/// The result of playing a schedule.
#[derive(Debug, Clone)]
pub struct PlayOutcome {
    /// When the last op finished.
    pub end: SimTime,
    pub ops: Vec<OpTiming>,
    /// Bytes each pattern's pairs sent in total (per pair), indexed by pattern.
    pub pattern_bytes: Vec<u128>,
    /// Events the loop delivered (network and reduce events).
    pub events: u64,
    pub net: NetCounters,
}

/// How local reductions and host work are timed.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct PlayOptions {
    /// Bytes per second one endpoint reduces; `None` means reductions are fused into the
    /// transfers (as NCCL's kernels do) and take no extra time.
    pub reduce_bytes_per_s: Option<f64>,
    /// Cores that every endpoint's host work shares (hosts on one machine: the testbed);
    /// `None`: each endpoint has its own cores, and host work is a delay.
    pub shared_cores: Option<f64>,
}

/// Why a schedule could not be played to its end.
#[derive(Debug, thiserror::Error)]
pub enum PlayError {
    #[error(transparent)]
    Topology(#[from] TopologyError),
    #[error(
        "simulated time exceeds {days} days at 1 ps resolution (after {events} events): \
         the traffic is too large for its links",
        days = SimTime::HORIZON_DAYS
    )]
    Horizon { events: u64 },
    #[error(
        "stopped after {budget} events (the event budget) at simulated time {at}; \
         raise --max-events or make the run smaller"
    )]
    EventBudget { budget: u64, at: SimTime },
    /// The watch asked for the estimate only (`--dry-run`): nothing was played.
    #[error("not played (estimate only): {0}")]
    EstimateOnly(Box<Estimate>),
    /// The estimate is over a limit of the watch; nothing was played.
    #[error("refused before simulating: {estimate}; that is more than {limit}. {advice}")]
    TooBig {
        estimate: Box<Estimate>,
        limit: String,
        /// What would make the run smaller, from the network model that would play it.
        advice: &'static str,
    },
}

/// What playing a schedule will cost, estimated before it starts from the schedule and the
/// network model, with the process's memory at that point measured.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Estimate {
    pub ops: u64,
    pub transfers: u64,
    /// Flows: the pairs of every transfer op.
    pub flows: u64,
    /// The pairs of every distinct pattern: what the network model routes and keeps.
    pub routed_pairs: u64,
    pub events: u64,
    /// Resident memory when the schedule was ready (topology, schedule, routes so far).
    pub resident_bytes: u64,
    /// Resident memory at the end of the run, estimated from above.
    pub peak_bytes: u64,
}

impl Estimate {
    /// Memory per op while playing and reporting (per-op timings, ready lists), per timeline
    /// event (a send, a receive, a rank's compute: the report's trace keeps up to
    /// [`crate::metrics::trace::MAX_TRACE_EVENTS`], built per track and then joined), and for
    /// the report's tables, on top of the network model's own estimates of its state and of
    /// what it keeps per flow ([`NetworkModel::estimate_state_bytes`],
    /// [`NetworkModel::estimate_flow_bytes`]): read off the peak resident memory of GPT-1.3B
    /// steps at 1,024, 4,096 and 16,384 GPUs (89, 106 and 296 MB) and of the bundled
    /// scenarios, release build, 2026-11-25 (see the closing note of issue 12).
    pub const BYTES_PER_OP: f64 = 200.0;
    pub const BYTES_PER_TRACE_EVENT: f64 = 160.0;
    pub const REPORT_BYTES: f64 = 4e6;

    pub fn of(schedule: &Schedule, net: &dyn NetworkModel) -> Estimate {
        let mut transfers = 0u64;
        let mut flows = 0u64;
        let mut pair_bytes = 0u128;
        let mut others = 0u64;
        let mut trace_events = 0u64;
        let mut solution_rates = 0u64;
        for op in &schedule.ops {
            match op.kind {
                OpKind::Transfer { pattern, bytes } => {
                    let pairs = schedule.patterns[pattern.0 as usize].pairs.len() as u64;
                    transfers += 1;
                    flows += pairs;
                    solution_rates = solution_rates.saturating_add(pairs.saturating_mul(pairs));
                    pair_bytes += bytes as u128 * pairs as u128;
                    trace_events += 2 * pairs;
                }
                OpKind::Compute { endpoints, .. }
                | OpKind::Reduce { endpoints, .. }
                | OpKind::HostWork { endpoints, .. } => {
                    others += 1;
                    trace_events += endpoints as u64;
                }
            }
        }
        let trace_events = trace_events.min(crate::metrics::trace::MAX_TRACE_EVENTS as u64);
        let ops = schedule.ops.len() as u64;
        let routed_pairs: u64 = schedule.patterns.iter().map(|p| p.pairs.len() as u64).sum();
        let resident_bytes = resident_bytes();
        let peak = resident_bytes as f64
            + net.estimate_state_bytes() as f64
            + Self::REPORT_BYTES
            + ops as f64 * Self::BYTES_PER_OP
            + net.estimate_flow_bytes(&FlowLoad {
                flows,
                routed_pairs,
                solution_rates,
            }) as f64
            + trace_events as f64 * Self::BYTES_PER_TRACE_EVENT;
        Estimate {
            ops,
            transfers,
            flows,
            routed_pairs,
            events: net
                .estimate_events(transfers, pair_bytes)
                .saturating_add(others),
            resident_bytes,
            peak_bytes: peak as u64,
        }
    }
}

impl std::fmt::Display for Estimate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "about {} events, {} ops ({} transfers, {} flows over {} routed pairs), {:.0} MB peak \
             memory ({:.0} MB now)",
            self.events,
            self.ops,
            self.transfers,
            self.flows,
            self.routed_pairs,
            self.peak_bytes as f64 / 1e6,
            self.resident_bytes as f64 / 1e6
        )
    }
}

/// This process's resident memory (Linux `/proc/self/statm`; 0 where there is none).
pub fn resident_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|t| t.split_whitespace().nth(1)?.parse::<u64>().ok())
        .map_or(0, |pages| pages * 4096)
}

/// Memory the machine can still give (Linux `MemAvailable`), if known.
pub fn available_bytes() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// What the loop reports while it runs, and the budgets it checks before and while it runs.
#[derive(Default, Clone, Copy)]
pub struct Watch<'a> {
    /// Refuse a run estimated above this many events, and stop one that gets there.
    pub max_events: Option<u64>,
    /// Refuse a run whose estimated peak memory is above this.
    pub max_bytes: Option<u64>,
    /// Estimate only: return [`PlayError::EstimateOnly`] instead of playing.
    pub estimate_only: bool,
    /// Called every [`Watch::EVERY`] events with the simulated time and the events so far.
    pub progress: Option<&'a dyn Fn(SimTime, u64)>,
}

impl Watch<'_> {
    /// Events between two progress reports (a report costs a clock read at most).
    pub const EVERY: u64 = 1 << 14;
}

#[derive(Debug, Clone, Copy)]
enum Event {
    Net(NetEvent),
    ReduceDone(u32),
    ComputeDone(u32),
    /// The shared cores' next op is due.
    CpuDue,
    /// A transfer op's transport setup is over: its batch starts now.
    SetupDone(u32),
}

struct Ctx<'a> {
    queue: &'a mut EventQueue<Event>,
    finished: &'a mut VecDeque<u32>,
    /// Transfer ops whose bytes have all left their senders (for ordered connections).
    sent: &'a mut VecDeque<u32>,
    /// Transfer ops whose bytes have all left their senders' hosts (for `Op::pushed_of`).
    pushed: &'a mut VecDeque<u32>,
}

impl NetContext for Ctx<'_> {
    fn now(&self) -> SimTime {
        self.queue.now()
    }
    fn schedule(&mut self, at: SimTime, event: NetEvent) -> EventHandle {
        self.queue
            .schedule(at, Event::Net(event))
            .expect("network models schedule at or after now")
    }
    fn cancel(&mut self, handle: EventHandle) {
        self.queue.cancel(handle);
    }
    fn batch_done(&mut self, tag: u64) {
        self.finished.push_back(tag as u32);
    }
    fn batch_sent(&mut self, tag: u64) {
        self.sent.push_back(tag as u32);
    }
    fn batch_pushed(&mut self, tag: u64) {
        self.pushed.push_back(tag as u32);
    }
}

/// Which transfer ops' bytes have all left their senders' hosts, and the ops waiting for that
/// ([`super::Op::pushed_of`]): nothing at all for a schedule without such ops.
struct Pushes {
    done: Vec<bool>,
    waiting: HashMap<u32, Vec<u32>>,
}

impl Pushes {
    fn new(schedule: &Schedule) -> Self {
        let any = schedule.ops.iter().any(|op| op.pushed_of.is_some());
        Pushes {
            done: if any {
                vec![false; schedule.ops.len()]
            } else {
                Vec::new()
            },
            waiting: HashMap::new(),
        }
    }

    /// Op `op` waits for transfer `of`'s push: done now if it was pushed.
    fn wait(&mut self, of: u32, op: u32, finished: &mut VecDeque<u32>) {
        if self.done[of as usize] {
            finished.push_back(op);
        } else {
            self.waiting.entry(of).or_default().push(op);
        }
    }

    /// Transfer `op`'s bytes have left (or arrived): what waited for that is done.
    fn pushed(&mut self, op: u32, finished: &mut VecDeque<u32>) {
        if let Some(done) = self.done.get_mut(op as usize).filter(|d| !**d) {
            *done = true;
            finished.extend(self.waiting.remove(&op).unwrap_or_default());
        }
    }
}

/// Moves the shared cores' one pending event to their next finish.
fn reschedule_cpu(
    pool: &CpuPool,
    queue: &mut EventQueue<Event>,
    pending: &mut Option<EventHandle>,
) {
    if let Some(h) = pending.take() {
        queue.cancel(h);
    }
    if let Some(at) = pool.next_finish() {
        *pending = Some(
            queue
                .schedule(at.max(queue.now()), Event::CpuDue)
                .expect("the shared cores finish at or after now"),
        );
    }
}

/// Plays `schedule` with endpoint `e` placed on device `endpoints[e]`.
pub fn play(
    schedule: &Schedule,
    endpoints: &[DeviceId],
    net: &mut dyn NetworkModel,
    options: PlayOptions,
) -> Result<PlayOutcome, PlayError> {
    play_watched(schedule, endpoints, net, options, Watch::default())
}

/// [`play`] under a [`Watch`]: an event budget and progress reports.
pub fn play_watched(
    schedule: &Schedule,
    endpoints: &[DeviceId],
    net: &mut dyn NetworkModel,
    options: PlayOptions,
    watch: Watch<'_>,
) -> Result<PlayOutcome, PlayError> {
    assert_eq!(
        endpoints.len(),
        schedule.endpoints() as usize,
        "one device per endpoint"
    );
    if watch.estimate_only || watch.max_events.is_some() || watch.max_bytes.is_some() {
        let estimate = Box::new(Estimate::of(schedule, net));
        if watch.estimate_only {
            return Err(PlayError::EstimateOnly(estimate));
        }
        if let Some(max) = watch.max_events.filter(|&m| estimate.events > m) {
            return Err(PlayError::TooBig {
                estimate,
                limit: format!("the event budget ({max}, --max-events)"),
                advice: net.smaller_run_advice(),
            });
        }
        if let Some(max) = watch.max_bytes.filter(|&m| estimate.peak_bytes > m) {
            return Err(PlayError::TooBig {
                estimate,
                limit: format!("the memory available ({:.0} MB)", max as f64 / 1e6),
                advice: net.smaller_run_advice(),
            });
        }
    }
    let n_ops = schedule.ops.len();

    // Successors in CSR form, and how many deps each op still waits for.
    let mut waiting: Vec<u32> = schedule.ops.iter().map(|op| op.deps.len() as u32).collect();
    let mut succ_offsets = vec![0u32; n_ops + 1];
    for op in &schedule.ops {
        for d in &op.deps {
            succ_offsets[d.0 as usize + 1] += 1;
        }
    }
    for i in 0..n_ops {
        succ_offsets[i + 1] += succ_offsets[i];
    }
    let mut fill = succ_offsets.clone();
    let mut succ = vec![0u32; succ_offsets[n_ops] as usize];
    for (i, op) in schedule.ops.iter().enumerate() {
        for d in &op.deps {
            succ[fill[d.0 as usize] as usize] = i as u32;
            fill[d.0 as usize] += 1;
        }
    }

    let mut connections = Connections::new(schedule);
    let mut patterns = Patterns::new(schedule, endpoints);
    let mut timings = vec![OpTiming::default(); n_ops];
    let mut queue: EventQueue<Event> = EventQueue::new();
    let mut finished: VecDeque<u32> = VecDeque::new();
    let mut sent: VecDeque<u32> = VecDeque::new();
    let mut pushed: VecDeque<u32> = VecDeque::new();
    let mut pushes = Pushes::new(schedule);
    let mut ready: VecDeque<u32> = (0..n_ops as u32)
        .filter(|&i| waiting[i as usize] == 0)
        .collect();
    let mut events = 0u64;
    let mut completed = 0usize;
    let mut cpu = options.shared_cores.map(CpuPool::new);
    let mut cpu_due: Option<EventHandle> = None;
    let mut cpu_done: Vec<u32> = Vec::new();

    loop {
        // Start everything that is ready, then propagate completions, until quiet.
        loop {
            if let Some(op) = ready.pop_front() {
                if !connections.admit(op) {
                    continue;
                }
                let now = queue.now();
                timings[op as usize].start = now;
                if let Some(of) = schedule.ops[op as usize].pushed_of {
                    pushes.wait(of.0, op, &mut finished);
                    continue;
                }
                match schedule.ops[op as usize].kind {
                    OpKind::Transfer { .. } => {
                        let setup = schedule.ops[op as usize]
                            .transport
                            .map_or(SimTime::ZERO, |t| t.setup);
                        if setup == SimTime::ZERO {
                            patterns.start(
                                net,
                                &mut queue,
                                &mut finished,
                                &mut sent,
                                &mut pushed,
                                op,
                            )?;
                        } else {
                            let _ = queue.schedule_in(setup, Event::SetupDone(op));
                        }
                    }
                    OpKind::Compute { duration, .. } => {
                        if duration == SimTime::ZERO {
                            finished.push_back(op);
                        } else {
                            let _ = queue.schedule_in(duration, Event::ComputeDone(op));
                        }
                    }
                    OpKind::HostWork {
                        endpoints,
                        core_time,
                    } => match cpu.as_mut() {
                        Some(pool) => {
                            pool.start(now, op, endpoints, core_time.as_secs_f64());
                            reschedule_cpu(pool, &mut queue, &mut cpu_due);
                        }
                        None if core_time == SimTime::ZERO => finished.push_back(op),
                        None => {
                            let _ = queue.schedule_in(core_time, Event::ComputeDone(op));
                        }
                    },
                    OpKind::Reduce { endpoints, bytes } => {
                        let secs = match options.reduce_bytes_per_s {
                            Some(rate) if rate > 0.0 => bytes as f64 / rate,
                            _ => 0.0,
                        };
                        if secs == 0.0 {
                            finished.push_back(op);
                        } else if let Some(pool) = cpu.as_mut() {
                            // A reduction on hosts that share cores is their work too.
                            pool.start(now, op, endpoints, secs);
                            reschedule_cpu(pool, &mut queue, &mut cpu_due);
                        } else {
                            let _ = queue
                                .schedule_in(SimTime::from_secs_f64(secs), Event::ReduceDone(op));
                        }
                    }
                }
                continue;
            }
            if let Some(op) = pushed.pop_front() {
                pushes.pushed(op, &mut finished);
                continue;
            }
            if let Some(op) = sent.pop_front() {
                connections.sent(op, &mut ready);
                // Sent is pushed too, for a model that does not tell pushes apart.
                pushed.push_back(op);
                continue;
            }
            if let Some(op) = finished.pop_front() {
                // Arrived is pushed too.
                pushes.pushed(op, &mut finished);
                timings[op as usize].end = queue.now();
                completed += 1;
                connections.finished(op, &mut ready);
                for &s in &succ
                    [succ_offsets[op as usize] as usize..succ_offsets[op as usize + 1] as usize]
                {
                    waiting[s as usize] -= 1;
                    if waiting[s as usize] == 0 {
                        ready.push_back(s);
                    }
                }
                continue;
            }
            break;
        }
        // The instant is over (nothing else is due now): the network settles its rates once
        // for everything that started and ended during it.
        if net.unsettled() && queue.peek_time().is_none_or(|t| t > queue.now()) {
            net.settle(&mut Ctx {
                queue: &mut queue,
                finished: &mut finished,
                sent: &mut sent,
                pushed: &mut pushed,
            });
            continue;
        }
        let Some((at, event)) = queue.pop() else {
            break;
        };
        events += 1;
        if at == SimTime::MAX {
            return Err(PlayError::Horizon { events });
        }
        if watch.max_events.is_some_and(|budget| events > budget) {
            return Err(PlayError::EventBudget {
                budget: events - 1,
                at,
            });
        }
        if events.is_multiple_of(Watch::EVERY) {
            if let Some(report) = watch.progress {
                report(at, events);
            }
        }
        match event {
            Event::Net(e) => {
                let mut ctx = Ctx {
                    queue: &mut queue,
                    finished: &mut finished,
                    sent: &mut sent,
                    pushed: &mut pushed,
                };
                net.on_event(&mut ctx, e);
            }
            Event::ReduceDone(op) | Event::ComputeDone(op) => finished.push_back(op),
            Event::CpuDue => {
                cpu_due = None;
                if let Some(pool) = cpu.as_mut() {
                    pool.finish_due(at, &mut cpu_done);
                    finished.extend(cpu_done.drain(..));
                    reschedule_cpu(pool, &mut queue, &mut cpu_due);
                }
            }
            Event::SetupDone(op) => {
                patterns.start(net, &mut queue, &mut finished, &mut sent, &mut pushed, op)?
            }
        }
    }
    debug_assert_eq!(completed, n_ops, "every op of a valid schedule runs");
    let end = timings.iter().map(|t| t.end).max().unwrap_or(SimTime::ZERO);
    Ok(PlayOutcome {
        end,
        ops: timings,
        pattern_bytes: patterns.bytes,
        events,
        net: net.counters(),
    })
}

/// The schedule's traffic patterns as the network model knows them (each registered the first
/// time an op uses it), and the bytes sent on each.
struct Patterns<'a> {
    schedule: &'a Schedule,
    endpoints: &'a [DeviceId],
    ids: Vec<Option<NetPatternId>>,
    bytes: Vec<u128>,
}

impl<'a> Patterns<'a> {
    fn new(schedule: &'a Schedule, endpoints: &'a [DeviceId]) -> Self {
        Patterns {
            schedule,
            endpoints,
            ids: vec![None; schedule.patterns.len()],
            bytes: vec![0; schedule.patterns.len()],
        }
    }

    /// Hands transfer op `op` to the network model as a batch.
    fn start(
        &mut self,
        net: &mut dyn NetworkModel,
        queue: &mut EventQueue<Event>,
        finished: &mut VecDeque<u32>,
        sent: &mut VecDeque<u32>,
        pushed: &mut VecDeque<u32>,
        op: u32,
    ) -> Result<(), TopologyError> {
        let o = &self.schedule.ops[op as usize];
        let OpKind::Transfer { pattern, bytes } = o.kind else {
            unreachable!("only transfer ops are started as batches")
        };
        let p = pattern.0 as usize;
        let id = match self.ids[p] {
            Some(id) => id,
            None => {
                let pairs: Vec<(DeviceId, DeviceId)> = self.schedule.patterns[p]
                    .pairs
                    .iter()
                    .map(|&(s, d)| (self.endpoints[s as usize], self.endpoints[d as usize]))
                    .collect();
                let id = net.add_pattern(&pairs)?;
                self.ids[p] = Some(id);
                id
            }
        };
        self.bytes[p] += bytes as u128;
        let max_flow_bps = o.transport.map_or(f64::INFINITY, |t| t.max_flow_bps);
        let mut ctx = Ctx {
            queue,
            finished,
            sent,
            pushed,
        };
        net.start_batch(&mut ctx, id, bytes, max_flow_bps, op as u64);
        Ok(())
    }
}
