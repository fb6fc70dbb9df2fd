//! The flow-level (fluid) network model.
//!
//! Every transfer is a fluid flow over its routed path. At any moment the rates of the live
//! flows are the max-min fair allocation over the links' capacities, with per-flow caps from
//! the calibration factors. A flow's last byte arrives its path latency after it finished
//! transmitting; a batch is done when its last flow's data has arrived.
//!
//! What makes it fast at scale (see DESIGN.md, "Speed"):
//! - flows live in batches (one collective step): per-flow state is a few flat `f64` arrays
//!   indexed by the flow's position in its pattern, routes are computed once per pattern;
//! - rates are re-solved only for the connected component of batches that share links with the
//!   batch that changed (components at batch granularity: a superset of the flow-level
//!   component, which gives the same rates); with few active batches it is found by testing
//!   each against the members (pattern overlaps cached), with many through a link → patterns →
//!   active batches index (the two are checked against each other in debug builds);
//! - a component's solution is cached under the exact state that produced it (which patterns,
//!   which of their flows are live, which caps), so the second step of a ring, and every step
//!   after it, reuses the first step's solutions instead of solving again;
//! - one completion event per batch (its earliest finishing flows), rescheduled when rates
//!   change;
//! - rates are re-solved once per instant, not once per event: batches that start, lose flows
//!   or end are noted, and their components are re-solved when the event loop settles the
//!   instant (several steps of a pipelined tree end together; each used to re-solve alone);
//! - a component's problem is split into link-disjoint parts, and each part is looked up among
//!   the parts solved before ([`SplitSolver`]): the same collective fused over eight rails is
//!   one part solved once, and parts that a change elsewhere in the component left as they were
//!   are not solved again: a part that crosses no link where a flow finished during the instant
//!   and has no new flow keeps its rates without even being looked up (module `changed`);
//! - a batch that runs alone (no other active batch shares its links) from start to end is
//!   recorded as a *trajectory*: the solutions in force and for how long. The next batch of the
//!   same pattern, size and factors that starts alone replays it with one event instead of one
//!   event per group of finishing flows; if another batch starts on its links mid-way, the
//!   replay is materialized (per-flow state rebuilt at that moment) and simulation goes on
//!   normally. A replaying batch never fills its per-flow state (bytes left, live flows, caps):
//!   it is filled on activation other than as a replay, or when a replay is materialized;
//! - a batch whose flows all end at once (the common case) is retired in one step, from its
//!   pattern's link set and longest latencies, not flow by flow;
//! - link traffic is integrated per solution (rate × time the solution was in force), not per
//!   flow per event, from loads summed by position in the pattern's link set.
//!
//! Sends and FIFO queues: where a profile gives a link class FIFO head bytes (a shaper's FIFO
//! queue in front of TCP connections) or a packet wait (a shaper's packet in service), a batch
//! may wait before it starts, behind what other connections keep queued on its links or have
//! in service there (module `fifo`).
//!
//! Layout: this file holds the model's state and the life of a batch (start, activation,
//! re-solve, finishing flows, completion), which read and write the same per-batch state and
//! are easiest to follow together (~1,140 lines); `fifo` says how long a batch waits behind
//! FIFO queues when it is posted (and, for one that waited at its first links, when it
//! reaches the next), `component` finds which
//! batches share links, `changed` flags the links a re-solve must look at, `replay` records
//! and replays trajectories, `traffic` integrates what links carried, `burst` gives transfers
//! that start on idle shaped links their token buckets' bytes at once (and one-packet messages
//! all of theirs, leaving the links in debt, which a batch waits out before it starts), `window`
//! keeps each TCP connection's congestion window, which a message must fit to pass whole,
//! `push` says when a batch's bytes have all left their senders' hosts.

use std::collections::BTreeMap;
use std::sync::Arc;

mod burst;
mod changed;
mod component;
mod fifo;
mod push;
mod replay;
mod traffic;
mod window;

use self::burst::Buckets;
use self::changed::ChangedLinks;
use self::replay::{Recording, Trajectory, TrajectoryKey};
pub(crate) use self::traffic::utilization;
use self::window::Windows;
use super::factors::EfficiencyFactors;
use super::maxmin::{Problem, SplitSolver};
use super::series::{IntervalLog, LinkSeries, SeriesOptions};
use super::{LinkTraffic, NetContext, NetCounters, NetEvent, NetPatternId, NetworkModel};
use crate::engine::{EventHandle, SimTime};
use crate::topology::routing::Router;
use crate::topology::{DeviceId, LinkClass, Topology, TopologyError};

/// Routed flows of one pattern: flat tables indexed by flow position.
#[derive(Debug)]
struct RoutedPattern {
    /// Flow f crosses `links[offsets[f]..offsets[f+1]]`.
    offsets: Vec<u32>,
    links: Vec<u32>,
    latency_ps: Vec<u64>,
    bottleneck_bps: Vec<f64>,
    bottleneck_class: Vec<LinkClass>,
    /// Distinct links used by any flow, sorted (to find which batches share links).
    link_set: Vec<u32>,
    /// Per entry of `links`, that link's position in `link_set`: a solution's link loads
    /// are summed straight into a table by position.
    link_pos: Vec<u32>,
    /// XOR of `flow_key(f)` over all flows: the signature of "every flow live".
    full_signature: u64,
    /// Per link class, the longest path latency of the flows whose bottleneck is of that
    /// class (`None`: no such flow): when every flow ends at once, the batch's delivery.
    max_latency_ps: [Option<u64>; LinkClass::ALL.len()],
}

impl RoutedPattern {
    fn flows(&self) -> usize {
        self.latency_ps.len()
    }
    fn path(&self, f: usize) -> &[u32] {
        &self.links[self.offsets[f] as usize..self.offsets[f + 1] as usize]
    }
}

fn flow_key(f: u32) -> u64 {
    let mut x = (f as u64).wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// Rates of one batch's flows under one component state, and the link loads they make.
#[derive(Debug)]
struct BatchSolution {
    /// Indexed by flow position in the pattern; zero for flows not live in that state.
    rates_bps: Vec<f64>,
    /// Live flows when it was solved (the others' rates are zero).
    live_count: usize,
    /// Index into `FlowModel::records` where the time this solution was in force accumulates.
    record: usize,
}

/// Link loads of one batch solution and how long it was in force.
#[derive(Debug)]
struct SolutionRecord {
    /// The batch's pattern, whose `link_set[i]` carries `loads_bps[i]`.
    pattern: u32,
    loads_bps: Vec<f64>,
    in_force_ps: u64,
}

/// The state of one batch as a cache key part.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct BatchState {
    pattern: u32,
    live_signature: u64,
    live_count: u32,
    factor_signature: u64,
}

#[derive(Debug, Default)]
struct Batch {
    in_use: bool,
    generation: u32,
    pattern: u32,
    tag: u64,
    bytes: u64,
    /// Bytes left to transmit per flow (pattern position), valid at `last_update`.
    remaining: Vec<f64>,
    /// Live flow positions, in a deterministic order.
    live: Vec<u32>,
    live_signature: u64,
    cap_bps: Vec<f64>,
    /// Where links have FIFO queues (module `fifo`) and some flow's path slows after its first
    /// link, per flow: the pace its sender pushes at beyond its rate (the slowest link before
    /// its path's slowest, where that is faster than the flow; 0 elsewhere: it pushes at its
    /// rate), and the bytes it has yet to push, valid at `last_update` (module `push`). Empty
    /// otherwise: the batch is pushed when it is sent.
    push_ahead_bps: Vec<f64>,
    push_left: Vec<f64>,
    /// The pending [`NetEvent::Pushed`], and whether the batch's push was told.
    push_event: Option<EventHandle>,
    push_told: bool,
    /// Whether `remaining`, `live` and `cap_bps` are filled: not while the batch replays a
    /// trajectory, which needs none of them (see `init_flows`).
    flows_ready: bool,
    /// What the caps are made from: the bandwidth factor per link class and the transport's
    /// per-flow ceiling.
    bw_factor: [f64; LinkClass::ALL.len()],
    max_flow_bps: f64,
    latency_factor: [f64; LinkClass::ALL.len()],
    factor_signature: u64,
    solution: Option<Arc<BatchSolution>>,
    last_update: SimTime,
    tx_event: Option<EventHandle>,
    deliver_at: SimTime,
    started: SimTime,
    /// When the batch was posted (`started` is when it began to send).
    posted: SimTime,
    /// What it waited at its first links' FIFO queues (module `fifo`) while the forwarded
    /// queues of connections started since it was posted are still to be looked at; zero
    /// once they were (or when it waited nothing there).
    first_wait: SimTime,
    /// Shaped links the batch has already passed while it waits for a debt further along its
    /// paths (module `burst`): a debt left there later, by a message behind it, is not its.
    debt_passed: Vec<u32>,
    /// Segments so far while the batch has run alone since its start.
    recording: Option<Recording>,
    /// Set while the batch replays a recorded trajectory (per-flow state not maintained).
    replay: Option<Arc<Trajectory>>,
    /// Scratch mark for component search.
    mark: bool,
    /// The settle pass that last re-solved this batch's component.
    settled_in: u64,
}

/// The fluid model over one topology.
pub struct FlowModel {
    topo: Arc<Topology>,
    router: Router,
    factors: EfficiencyFactors,
    link_capacity_bps: Vec<f64>,
    /// Per link, bytes a connection keeps queued ahead in its FIFO egress queue (0: none; see
    /// module `fifo`), and the head bytes posted on it at the latest instant.
    fifo_head_bytes: Vec<f64>,
    fifo_posted: Vec<(SimTime, f64)>,
    /// Per link, the mean seconds a message waits there behind another connection's packet
    /// in service (0: none; see module `fifo`).
    packet_wait_secs: Vec<f64>,
    patterns: Vec<RoutedPattern>,
    /// Whether two patterns share a link, keyed (smaller id, larger id).
    overlap: BTreeMap<(u32, u32), bool>,
    /// Per link, the patterns routed over it; per pattern, its active batches.
    link_patterns: Vec<Vec<u32>>,
    active_by_pattern: Vec<Vec<u32>>,
    pattern_mark: Vec<bool>,
    batches: Vec<Batch>,
    free_slots: Vec<u32>,
    active: Vec<u32>,
    /// Batches whose components must be re-solved before time moves (in the order noted).
    unsettled: Vec<u32>,
    settle_pass: u64,
    cache: BTreeMap<Vec<BatchState>, Vec<Arc<BatchSolution>>>,
    trajectories: BTreeMap<TrajectoryKey, Arc<Trajectory>>,
    /// Rates the kept trajectories hold (see [`MAX_TRAJECTORY_RATES`]).
    trajectory_rates: usize,
    /// The bounds in force ([`MAX_RECORDED_RATES`], [`MAX_TRAJECTORY_RATES`] unless a test
    /// set others).
    max_recorded_rates: usize,
    max_trajectory_rates: usize,
    replay_enabled: bool,
    cached_rates: usize,
    records: Vec<SolutionRecord>,
    /// When each record was in force, for link utilization over time.
    series_log: IntervalLog,
    link_bytes: Vec<f64>,
    solver: SplitSolver,
    counters: NetCounters,
    /// Links where a flow finished during this instant (see `changed`), and whether large
    /// components re-solve only the parts that crossed one (or that have new flows).
    changed: ChangedLinks,
    changed_parts_only: bool,
    /// Shapers' token buckets (module `burst`), and the head starts of a starting batch.
    buckets: Buckets,
    /// Batches posted and waiting for their links' shaper debt to be paid (module `burst`):
    /// their bytes are queued on their first links already.
    debt_waiting: Vec<u32>,
    head_bytes: Vec<f64>,
    /// Per connection, TCP's congestion window (module `window`): what a shaper may pass
    /// whole. Kept where links pass one-packet messages whole.
    windows: Windows,
    /// Scratch: per live flow of a starting batch, the most it may pass whole.
    whole_max: Vec<f64>,
    // Scratch for building problems.
    p_offsets: Vec<u32>,
    p_links: Vec<u32>,
    p_caps: Vec<f64>,
    p_rates: Vec<f64>,
    p_previous: Vec<f64>,
}

/// Cached rate values kept before the cache is emptied (about 256 MiB of `f64`).
const MAX_CACHED_RATES: usize = 32 << 20;

/// Rates a batch's recording may hold (its distinct solutions' flows summed, about 32 MiB of
/// `f64`) before it is given up: a batch that runs alone through thousands of solutions (a
/// direct all-to-all, re-solved at every group of finishing flows) would otherwise keep every
/// one of them, whatever the cache drops (576 ranks: 1,911 solutions of 331,200 flows, 5.2 GB).
/// Such a batch is simulated again, not replayed, when its pattern comes back.
const MAX_RECORDED_RATES: usize = 4 << 20;

/// Rates all kept trajectories may hold together (about 256 MiB of `f64`); past it, a
/// finished recording is not kept.
const MAX_TRAJECTORY_RATES: usize = 32 << 20;

impl FlowModel {
    pub fn new(topo: Arc<Topology>, factors: EfficiencyFactors, ecmp_salt: u64) -> Self {
        let router = Router::new(&topo, ecmp_salt);
        let link_capacity_bps: Vec<f64> = topo
            .links()
            .iter()
            .map(|l| l.bandwidth_bps * factors.link_efficiency(l.class))
            .collect();
        let nl = topo.links().len();
        let burst_secs: Vec<f64> = topo
            .links()
            .iter()
            .map(|l| factors.shaper_burst_secs(l.class))
            .collect();
        let packet_bytes: Vec<f64> = topo
            .links()
            .iter()
            .map(|l| factors.shaper_packet_bytes(l.class))
            .collect();
        let windows = Windows::new(factors.tcp_windows);
        let buckets = Buckets::new(&burst_secs, &packet_bytes, &link_capacity_bps);
        let fifo_head_bytes: Vec<f64> = topo
            .links()
            .iter()
            .map(|l| factors.fifo_head_bytes(l.class))
            .collect();
        let packet_wait_secs: Vec<f64> = topo
            .links()
            .iter()
            .map(|l| factors.shaper_packet_wait_secs(l.class))
            .collect();
        let queued = |v: &[f64]| v.iter().any(|&x| x > 0.0);
        let fifo_posted = if queued(&fifo_head_bytes) || queued(&packet_wait_secs) {
            vec![(SimTime::ZERO, 0.0); nl]
        } else {
            Vec::new()
        };
        // A batch's FIFO wait depends on what is queued when it is posted (module `fifo`): no
        // recorded trajectory stands for another.
        let replay_enabled = fifo_posted.is_empty();
        FlowModel {
            topo,
            router,
            factors,
            link_capacity_bps,
            fifo_head_bytes,
            fifo_posted,
            packet_wait_secs,
            patterns: Vec::new(),
            overlap: BTreeMap::new(),
            link_patterns: vec![Vec::new(); nl],
            active_by_pattern: Vec::new(),
            pattern_mark: Vec::new(),
            batches: Vec::new(),
            free_slots: Vec::new(),
            active: Vec::new(),
            unsettled: Vec::new(),
            settle_pass: 0,
            cache: BTreeMap::new(),
            trajectories: BTreeMap::new(),
            trajectory_rates: 0,
            max_recorded_rates: MAX_RECORDED_RATES,
            max_trajectory_rates: MAX_TRAJECTORY_RATES,
            replay_enabled,
            cached_rates: 0,
            records: Vec::new(),
            series_log: IntervalLog::new(),
            link_bytes: vec![0.0; nl],
            solver: SplitSolver::new(),
            counters: NetCounters::default(),
            changed: ChangedLinks::new(nl),
            changed_parts_only: true,
            buckets,
            head_bytes: Vec::new(),
            windows,
            whole_max: Vec::new(),
            debt_waiting: Vec::new(),
            p_offsets: Vec::new(),
            p_links: Vec::new(),
            p_caps: Vec::new(),
            p_rates: Vec::new(),
            p_previous: Vec::new(),
        }
    }

    /// Turns trajectory replay off (every batch simulated event by event), for tests that
    /// check replay changes nothing.
    pub fn without_replay(mut self) -> Self {
        self.replay_enabled = false;
        self
    }

    /// Replay's memory bounds set lower (rates one batch's recording may hold, and all kept
    /// trajectories together), for tests that check what happens past them.
    pub fn with_replay_bounds(mut self, recorded_rates: usize, trajectory_rates: usize) -> Self {
        self.max_recorded_rates = recorded_rates;
        self.max_trajectory_rates = trajectory_rates;
        self
    }

    /// Solves every component's parts afresh (looked up among the parts solved before), never
    /// keeping the rates of parts no change reached, for tests that check keeping them changes
    /// nothing.
    pub fn without_kept_parts(mut self) -> Self {
        self.changed_parts_only = false;
        self
    }

    /// Parts of re-solved components that kept their rates, so far.
    pub fn parts_kept(&self) -> u64 {
        self.solver.parts_kept
    }

    /// Coarsens the utilization log past `entries` entries instead of the default, for tests
    /// of the coarsened log.
    pub fn with_series_log_limit(mut self, entries: usize) -> Self {
        self.series_log = IntervalLog::with_capacity_limit(entries);
        self
    }

    pub fn topology(&self) -> &Topology {
        &self.topo
    }

    /// Fills a batch's per-flow state (bytes left, live flows, caps) if it is not yet: when it
    /// is activated other than as a replay, or when its replay is materialized.
    fn init_flows(&mut self, slot: u32) {
        let b = &mut self.batches[slot as usize];
        if b.flows_ready {
            return;
        }
        b.flows_ready = true;
        let pat = &self.patterns[b.pattern as usize];
        let n = pat.flows();
        b.remaining.resize(n, b.bytes as f64);
        b.live.extend(0..n as u32);
        if !self.fifo_posted.is_empty() {
            b.push_ahead_bps
                .extend((0..n).map(|f| push::ahead_bps(&self.link_capacity_bps, pat.path(f))));
            // A batch none of whose flows slows further on is pushed when it is sent: no state.
            if b.push_ahead_bps.iter().all(|&a| a == 0.0) {
                b.push_ahead_bps.clear();
            } else {
                b.push_left.resize(n, b.bytes as f64);
            }
        }
        let (bw_factor, max_flow_bps) = (b.bw_factor, b.max_flow_bps);
        b.cap_bps.extend((0..n).map(|f| {
            let k = bw_factor[class_index(pat.bottleneck_class[f])];
            let factored = if k == 1.0 {
                f64::INFINITY
            } else {
                k * pat.bottleneck_bps[f]
            };
            factored.min(max_flow_bps)
        }));
    }

    /// Moves a batch's per-flow progress forward to `now` at its current rates, and credits
    /// the time to its current solution.
    fn advance(&mut self, slot: u32, now: SimTime) {
        let b = &mut self.batches[slot as usize];
        let dt_ps = now.as_ps() - b.last_update.as_ps();
        if dt_ps == 0 {
            return;
        }
        if let Some(sol) = &b.solution {
            let dt = dt_ps as f64 * 1e-12;
            for &f in &b.live {
                let f = f as usize;
                b.remaining[f] -= sol.rates_bps[f] / 8.0 * dt;
            }
            if !b.push_left.is_empty() {
                push::advance(
                    &mut b.push_left,
                    &b.push_ahead_bps,
                    &b.live,
                    &sol.rates_bps,
                    dt,
                );
            }
            self.records[sol.record].in_force_ps += dt_ps;
            self.series_log
                .push(b.last_update.as_ps(), dt_ps, sol.record);
            if let Some(rec) = &mut b.recording {
                if rec.push(sol, dt_ps) > self.max_recorded_rates {
                    b.recording = None;
                }
            }
        }
        b.last_update = now;
    }

    /// Puts a started batch among the active ones: from now on it sends.
    fn activate(&mut self, ctx: &mut dyn NetContext, slot: u32) {
        let now = ctx.now();
        let b = &self.batches[slot as usize];
        let (pattern, bytes, factor_signature) = (b.pattern, b.bytes, b.factor_signature);
        // A batch that waited at its first links meets, further on, the connections that
        // started meanwhile (module `fifo`).
        if b.first_wait > SimTime::ZERO {
            let (posted, first_wait) = (b.posted, b.first_wait);
            self.batches[slot as usize].first_wait = SimTime::ZERO;
            let late = self.late_forwarded_wait(pattern as usize, posted, first_wait, now);
            if late > SimTime::ZERO {
                let generation = self.batches[slot as usize].generation;
                let _ = ctx.schedule(now + late, NetEvent::Start { slot, generation });
                return;
            }
        }
        if self.buckets.enabled() {
            let pat = &self.patterns[pattern as usize];
            let b = &mut self.batches[slot as usize];
            let paid = self.buckets.debt_paid_at(
                now,
                (0..pat.flows()).map(|f| pat.path(f)),
                &mut b.debt_passed,
            );
            if let Some(at) = paid.filter(|&at| at > now) {
                if !self.debt_waiting.contains(&slot) {
                    self.debt_waiting.push(slot);
                }
                let generation = self.batches[slot as usize].generation;
                let _ = ctx.schedule(at, NetEvent::Start { slot, generation });
                return;
            }
            self.debt_waiting.retain(|&s| s != slot);
        }
        let b = &mut self.batches[slot as usize];
        b.last_update = now;
        b.deliver_at = now;
        b.started = now;
        self.active.push(slot);
        self.active_by_pattern[pattern as usize].push(slot);
        // A batch's head start from idle links' buckets depends on when it starts: no
        // trajectory of it stands for another (replay is off where links have buckets).
        if self.buckets.enabled() {
            self.init_flows(slot);
            self.take_head_start(slot, now);
        }
        if self.replay_enabled && !self.buckets.enabled() && self.component(slot).len() == 1 {
            let key = (pattern, bytes, factor_signature);
            if let Some(trajectory) = self.trajectories.get(&key).cloned() {
                let at = now + SimTime::from_ps(trajectory.tx_end_ps);
                let b = &mut self.batches[slot as usize];
                b.replay = Some(trajectory);
                self.counters.replays += 1;
                b.tx_event = Some(ctx.schedule(
                    at,
                    NetEvent::ReplayEnd {
                        slot,
                        generation: b.generation,
                    },
                ));
                return;
            }
            self.batches[slot as usize].recording = Some(Recording::default());
        }
        self.init_flows(slot);
        self.unsettled.push(slot);
    }

    fn state_of(&self, slot: u32) -> BatchState {
        let b = &self.batches[slot as usize];
        BatchState {
            pattern: b.pattern,
            live_signature: b.live_signature,
            live_count: b.live.len() as u32,
            factor_signature: b.factor_signature,
        }
    }

    /// Re-solves the component of `seed` (which must be active), reschedules its batches and
    /// returns them.
    fn resolve(&mut self, ctx: &mut dyn NetContext, seed: u32) -> Vec<u32> {
        let now = ctx.now();
        let mut comp = self.component(seed);
        for &b in &comp {
            if self.batches[b as usize].replay.is_some() {
                self.materialize(ctx, b);
            }
        }
        // A batch that has run alone may not be alone any more.
        comp.retain(|&b| {
            self.batches[b as usize].in_use && !self.batches[b as usize].live.is_empty()
        });
        if comp.len() > 1 {
            for &b in &comp {
                self.batches[b as usize].recording = None;
            }
        }
        if comp.is_empty() {
            return comp;
        }
        // Canonical order: by state, so that the same state found in other slots hits the
        // cache (batches with equal states are interchangeable).
        comp.sort_by_cached_key(|&b| (self.state_of(b), b));
        for &b in &comp {
            self.advance(b, now);
        }
        let key: Vec<BatchState> = comp.iter().map(|&b| self.state_of(b)).collect();
        let solutions = match self.cache.get(&key) {
            Some(s) => {
                self.counters.solution_reuses += 1;
                s.clone()
            }
            None => {
                let s = self.solve(&comp);
                self.cached_rates += s.iter().map(|x| x.rates_bps.len()).sum::<usize>();
                if self.cached_rates > MAX_CACHED_RATES {
                    self.cache.clear();
                    self.cached_rates = 0;
                }
                self.cache.insert(key, s.clone());
                s
            }
        };
        for (&b, sol) in comp.iter().zip(solutions) {
            self.batches[b as usize].solution = Some(sol);
            self.reschedule(ctx, b);
        }
        comp
    }

    fn solve(&mut self, comp: &[u32]) -> Vec<Arc<BatchSolution>> {
        self.counters.solves += 1;
        // Below SplitSolver's split size a problem is solved whole: no rates to keep.
        let live: usize = comp
            .iter()
            .map(|&b| self.batches[b as usize].live.len())
            .sum();
        let keep_parts = self.changed_parts_only && live >= SplitSolver::MIN_FLOWS;
        self.p_offsets.clear();
        self.p_links.clear();
        self.p_caps.clear();
        self.p_offsets.push(0);
        self.p_previous.clear();
        for &b in comp {
            let batch = &self.batches[b as usize];
            let pat = &self.patterns[batch.pattern as usize];
            for &f in &batch.live {
                self.p_links.extend_from_slice(pat.path(f as usize));
                self.p_offsets.push(self.p_links.len() as u32);
                self.p_caps.push(batch.cap_bps[f as usize]);
            }
            if keep_parts {
                let previous = batch.solution.as_ref().map(|s| &s.rates_bps);
                self.p_previous.extend(
                    batch
                        .live
                        .iter()
                        .map(|&f| previous.map_or(f64::NAN, |r| r[f as usize])),
                );
            }
        }
        self.p_rates.clear();
        self.p_rates.resize(self.p_caps.len(), 0.0);
        let problem = Problem {
            link_capacity_bps: &self.link_capacity_bps,
            flow_offsets: &self.p_offsets,
            flow_links: &self.p_links,
            flow_cap_bps: &self.p_caps,
        };
        if keep_parts {
            self.solver.solve_changed(
                &problem,
                &self.p_previous,
                self.changed.flags(),
                &mut self.p_rates,
            );
        } else {
            self.solver.solve(&problem, &mut self.p_rates);
        }

        let mut out = Vec::with_capacity(comp.len());
        let mut k = 0;
        // A batch's link loads are summed by position in its pattern's link set: the same
        // additions in the same order as per link, with no scratch to sort or clear.
        for &b in comp {
            let batch = &self.batches[b as usize];
            let pat = &self.patterns[batch.pattern as usize];
            // A batch whose rates this solve leaves as they were (a component re-solved for
            // a change far from it) keeps its solution and record: records are what a run's
            // memory grows with.
            if let Some(current) = &batch.solution {
                let unchanged = current.live_count == batch.live.len()
                    && batch
                        .live
                        .iter()
                        .enumerate()
                        .all(|(i, &f)| current.rates_bps[f as usize] == self.p_rates[k + i]);
                if unchanged {
                    k += batch.live.len();
                    out.push(current.clone());
                    continue;
                }
            }
            let mut rates = vec![0.0; pat.flows()];
            let mut loads_bps = vec![0.0; pat.link_set.len()];
            for &f in &batch.live {
                let r = self.p_rates[k];
                k += 1;
                rates[f as usize] = r;
                if r.is_finite() {
                    let hops =
                        pat.offsets[f as usize] as usize..pat.offsets[f as usize + 1] as usize;
                    for &at in &pat.link_pos[hops] {
                        loads_bps[at as usize] += r;
                    }
                }
            }
            self.records.push(SolutionRecord {
                pattern: batch.pattern,
                loads_bps,
                in_force_ps: 0,
            });
            out.push(Arc::new(BatchSolution {
                rates_bps: rates,
                live_count: batch.live.len(),
                record: self.records.len() - 1,
            }));
        }
        out
    }

    /// Schedules the batch's next transmission completion under its current rates.
    fn reschedule(&mut self, ctx: &mut dyn NetContext, slot: u32) {
        let now = ctx.now();
        let b = &mut self.batches[slot as usize];
        if let Some(h) = b.tx_event.take() {
            ctx.cancel(h);
        }
        let sol = b
            .solution
            .as_ref()
            .expect("a scheduled batch has a solution");
        let mut earliest = f64::INFINITY;
        for &f in &b.live {
            let f = f as usize;
            let r = sol.rates_bps[f];
            let t = if r.is_infinite() || b.remaining[f] <= 0.0 {
                0.0
            } else {
                b.remaining[f] * 8.0 / r
            };
            earliest = earliest.min(t);
        }
        self.reschedule_push(ctx, slot);
        let b = &mut self.batches[slot as usize];
        if earliest.is_finite() {
            let at = secs_after(now, earliest);
            b.tx_event = Some(ctx.schedule(
                at,
                NetEvent::TxDone {
                    slot,
                    generation: b.generation,
                },
            ));
        }
    }

    fn alloc_slot(&mut self) -> u32 {
        if let Some(s) = self.free_slots.pop() {
            return s;
        }
        self.batches.push(Batch::default());
        self.batches.len() as u32 - 1
    }

    /// Removes the flows of a batch that have finished by `now` (its progress must already be
    /// advanced to `now`); returns how many.
    fn finish_flows(&mut self, slot: u32, now: SimTime) -> usize {
        let b = &mut self.batches[slot as usize];
        let pat = &self.patterns[b.pattern as usize];
        let sol = b
            .solution
            .clone()
            .expect("a transmitting batch has a solution");
        // A flow is done when what is left would take under a picosecond (the event time
        // was rounded up to whole picoseconds), or is a rounding residue of its size.
        let residue = b.bytes as f64 * 1e-12;
        let done = |f: usize| {
            let r = sol.rates_bps[f];
            r.is_infinite() || b.remaining[f] <= r / 8.0 * 1e-12 + residue
        };
        // Every flow of the pattern ending at once (most batches of a large step): the same
        // state as one flow at a time, from the pattern's link set and longest latencies.
        if b.live.len() == pat.flows()
            && !self.buckets.enabled()
            && b.live.iter().all(|&f| done(f as usize))
        {
            for &f in &b.live {
                b.remaining[f as usize] = 0.0;
            }
            self.changed.flag(&pat.link_set);
            // The XOR of every flow's key taken out of the XOR of them all.
            b.live_signature = 0;
            for (c, max) in pat.max_latency_ps.iter().enumerate() {
                if let Some(max) = max {
                    let lat = *max as f64 * b.latency_factor[c];
                    b.deliver_at = b.deliver_at.max(now + SimTime::from_ps(lat.round() as u64));
                }
            }
            let finished = b.live.len();
            b.live.clear();
            return finished;
        }
        let mut i = 0;
        let mut finished = 0;
        while i < b.live.len() {
            let f = b.live[i] as usize;
            let r = sol.rates_bps[f];
            if r.is_infinite() || b.remaining[f] <= r / 8.0 * 1e-12 + residue {
                b.remaining[f] = 0.0;
                self.changed.flag(pat.path(f));
                if self.buckets.enabled() {
                    self.buckets.finish(pat.path(f), now);
                }
                self.windows.sent(
                    pat.path(f),
                    b.bytes as f64,
                    pat.bottleneck_bps[f],
                    b.posted,
                    now,
                );
                b.live_signature ^= flow_key(f as u32);
                let lat = pat.latency_ps[f] as f64
                    * b.latency_factor[class_index(pat.bottleneck_class[f])];
                b.deliver_at = b.deliver_at.max(now + SimTime::from_ps(lat.round() as u64));
                b.live.swap_remove(i);
                finished += 1;
            } else {
                i += 1;
            }
        }
        finished
    }

    fn on_tx_done(&mut self, ctx: &mut dyn NetContext, slot: u32) {
        let now = ctx.now();
        self.batches[slot as usize].tx_event = None;
        self.advance(slot, now);
        if self.finish_flows(slot, now) == 0 {
            // Rounding left a sliver; wait for it.
            self.reschedule(ctx, slot);
        } else if self.batches[slot as usize].live.is_empty() {
            self.complete(ctx, slot);
        } else {
            self.unsettled.push(slot);
        }
    }

    /// Every flow of the batch has been transmitted: schedule its delivery, leave the active
    /// set, keep its trajectory if it ran alone, and give its capacity to its neighbours.
    fn complete(&mut self, ctx: &mut dyn NetContext, slot: u32) {
        let now = ctx.now();
        let b = &mut self.batches[slot as usize];
        let at = b.deliver_at.max(now);
        let generation = b.generation;
        b.solution = None;
        if let Some(tx) = b.tx_event.take() {
            ctx.cancel(tx);
        }
        if let Some(Recording { segments, rates }) = b.recording.take() {
            let key = (b.pattern, b.bytes, b.factor_signature);
            if self.trajectory_rates + rates <= self.max_trajectory_rates
                && !self.trajectories.contains_key(&key)
            {
                self.trajectory_rates += rates;
                let trajectory = Trajectory {
                    segments,
                    tx_end_ps: (now - b.started).as_ps(),
                    deliver_ps: (at - b.started).as_ps(),
                };
                self.trajectories.insert(key, Arc::new(trajectory));
            }
        }
        // The event handle is not kept: a delivery is never cancelled.
        let _ = ctx.schedule(at, NetEvent::Delivered { slot, generation });
        let b = &mut self.batches[slot as usize];
        if let Some(h) = b.push_event.take() {
            ctx.cancel(h);
        }
        // Sent is pushed (the play loop takes it so).
        b.push_told = true;
        ctx.batch_sent(b.tag);
        let neighbours = self.component(slot);
        self.active.retain(|&a| a != slot);
        let p = self.batches[slot as usize].pattern as usize;
        self.active_by_pattern[p].retain(|&a| a != slot);
        // The batches that shared links with it get its capacity when the instant settles;
        // removing it may have split their component in several.
        self.unsettled
            .extend(neighbours.into_iter().filter(|&n| n != slot));
    }
}

/// `secs` after `now`, rounded up to the next picosecond (saturating).
fn secs_after(now: SimTime, secs: f64) -> SimTime {
    now.saturating_add(SimTime::from_ps((secs * 1e12).ceil() as u64))
}

fn class_index(c: LinkClass) -> usize {
    LinkClass::ALL.iter().position(|&x| x == c).unwrap_or(0)
}

impl NetworkModel for FlowModel {
    /// A batch starts, changes rate a few times as others come and go, and ends: measured over
    /// the bundled scenarios, 1.3 to 1.7 events per op (2026-11-24).
    fn estimate_state_bytes(&self) -> u64 {
        self.router.estimate_cache_bytes(&self.topo)
    }
    fn estimate_events(&self, batches: u64, _pair_bytes: u128) -> u64 {
        batches.saturating_mul(2)
    }
    fn smaller_run_advice(&self) -> &'static str {
        "Use fewer ranks or smaller sizes, or an algorithm with fewer steps (a hierarchical \
         or tree all-reduce, several rings); --dry-run prints the estimate"
    }
    /// What the model keeps grows with the pairs of distinct patterns, not with every op's:
    /// a pattern's routes and per-flow state are kept once however many ops use it. The
    /// solutions cached or recorded for replay are bounded (`MAX_CACHED_RATES`,
    /// `MAX_TRAJECTORY_RATES`, `MAX_RECORDED_RATES`), and never more than the ops could
    /// produce. Per routed pair: read off a direct all-to-all of 2,048 GPUs (4.19 M pairs in
    /// one pattern, 1.4 GB resident). An upper estimate: against peak resident memory, release
    /// build, 2026-11-27, the whole run's estimate is 1.5-2.3 times it for an NCCL tree
    /// all-reduce on 16,384 GPUs and all-to-alls of 576 and 2,048 GPUs (314-1,408 MB),
    /// 2.0-4.4 times for ring all-reduces of 16,384-131,072 GPUs (one pattern solved once:
    /// 175-865 MB), 1.6-7.2 times for GPT-1.3B and Llama-3 405B steps on 1,024-16,384 GPUs
    /// (93-557 MB; the smaller the step, the more of it is the solutions' bound, never
    /// filled).
    fn estimate_flow_bytes(&self, load: &super::FlowLoad) -> u64 {
        const BYTES_PER_ROUTED_PAIR: u64 = 330;
        let solutions_bound =
            ((MAX_CACHED_RATES + self.max_trajectory_rates + self.max_recorded_rates) * 8) as u64;
        load.routed_pairs
            .saturating_mul(BYTES_PER_ROUTED_PAIR)
            .saturating_add(load.solution_rates.saturating_mul(8).min(solutions_bound))
    }
    fn add_pattern(
        &mut self,
        pairs: &[(DeviceId, DeviceId)],
    ) -> Result<NetPatternId, TopologyError> {
        let mut offsets = Vec::with_capacity(pairs.len() + 1);
        let mut links = Vec::new();
        let mut latency_ps = Vec::with_capacity(pairs.len());
        let mut bottleneck_bps = Vec::with_capacity(pairs.len());
        let mut bottleneck_class = Vec::with_capacity(pairs.len());
        let mut full_signature = 0u64;
        offsets.push(0u32);
        for (f, &(src, dst)) in pairs.iter().enumerate() {
            let path = self.router.path(&self.topo, src, dst)?;
            let mut lat = 0u64;
            let mut bn = f64::INFINITY;
            let mut class = LinkClass::Other;
            for &l in path {
                let link = self.topo.link(l);
                lat += link.latency.as_ps();
                if link.bandwidth_bps < bn {
                    bn = link.bandwidth_bps;
                    class = link.class;
                }
                links.push(l.0);
            }
            offsets.push(links.len() as u32);
            latency_ps.push(lat);
            bottleneck_bps.push(bn);
            bottleneck_class.push(class);
            full_signature ^= flow_key(f as u32);
        }
        let mut link_set = links.clone();
        link_set.sort_unstable();
        link_set.dedup();
        let link_pos = links
            .iter()
            .map(|l| link_set.partition_point(|x| x < l) as u32)
            .collect();
        let mut max_latency_ps = [None; LinkClass::ALL.len()];
        for (&lat, &class) in latency_ps.iter().zip(&bottleneck_class) {
            let max = &mut max_latency_ps[class_index(class)];
            *max = Some(max.map_or(lat, |m: u64| m.max(lat)));
        }
        let id = self.patterns.len() as u32;
        for &l in &link_set {
            self.link_patterns[l as usize].push(id);
        }
        self.active_by_pattern.push(Vec::new());
        self.pattern_mark.push(false);
        self.patterns.push(RoutedPattern {
            offsets,
            links,
            latency_ps,
            bottleneck_bps,
            bottleneck_class,
            link_set,
            link_pos,
            full_signature,
            max_latency_ps,
        });
        Ok(NetPatternId(self.patterns.len() as u32 - 1))
    }

    fn start_batch(
        &mut self,
        ctx: &mut dyn NetContext,
        pattern: NetPatternId,
        bytes: u64,
        max_flow_bps: f64,
        tag: u64,
    ) {
        let now = ctx.now();
        let slot = self.alloc_slot();
        let pat = &self.patterns[pattern.0 as usize];
        let n = pat.flows();
        self.counters.batches += 1;
        self.counters.flows += n as u64;

        // Calibration factors for this size, per class.
        let mut bw_factor = [1.0; LinkClass::ALL.len()];
        let mut latency_factor = [1.0; LinkClass::ALL.len()];
        let mut factor_signature = 0u64;
        for (i, &c) in LinkClass::ALL.iter().enumerate() {
            let (bw, lat) = self.factors.lookup(c, bytes);
            bw_factor[i] = bw;
            latency_factor[i] = lat;
            factor_signature =
                factor_signature.rotate_left(11) ^ bw.to_bits() ^ lat.to_bits().rotate_left(7);
        }
        factor_signature = factor_signature.rotate_left(13) ^ max_flow_bps.to_bits();
        let b = &mut self.batches[slot as usize];
        b.in_use = true;
        b.generation = b.generation.wrapping_add(1);
        b.pattern = pattern.0;
        b.tag = tag;
        b.bytes = bytes;
        // Per-flow state waits for `activate`: most batches of a large step replay a
        // trajectory and never need it (a Llama-3 405B step on 16,384 GPUs starts 450 M flows,
        // 89% of them in replayed batches).
        b.flows_ready = false;
        b.remaining.clear();
        b.live.clear();
        b.cap_bps.clear();
        b.push_left.clear();
        b.push_ahead_bps.clear();
        b.push_event = None;
        b.push_told = false;
        b.live_signature = pat.full_signature;
        b.bw_factor = bw_factor;
        b.max_flow_bps = max_flow_bps;
        b.latency_factor = latency_factor;
        b.factor_signature = factor_signature;
        b.solution = None;
        b.last_update = now;
        b.tx_event = None;
        b.deliver_at = now;
        b.started = now;
        b.posted = now;
        b.first_wait = SimTime::ZERO;
        b.debt_passed.clear();
        b.recording = None;
        b.replay = None;
        b.mark = false;
        if n == 0 {
            let _ = ctx.schedule(
                now,
                NetEvent::Delivered {
                    slot,
                    generation: b.generation,
                },
            );
            return;
        }
        let (wait, first_wait) = self.fifo_wait(pattern.0 as usize, bytes, now);
        self.batches[slot as usize].first_wait = first_wait;
        if wait > SimTime::ZERO {
            let generation = self.batches[slot as usize].generation;
            let _ = ctx.schedule(now + wait, NetEvent::Start { slot, generation });
            return;
        }
        self.activate(ctx, slot);
    }

    fn on_event(&mut self, ctx: &mut dyn NetContext, event: NetEvent) {
        self.counters.events += 1;
        match event {
            NetEvent::TxDone { slot, generation } => {
                let b = &self.batches[slot as usize];
                if b.in_use && b.generation == generation {
                    self.on_tx_done(ctx, slot);
                }
            }
            NetEvent::ReplayEnd { slot, generation } => {
                let b = &self.batches[slot as usize];
                if b.in_use && b.generation == generation && b.replay.is_some() {
                    self.on_replay_end(ctx, slot);
                }
            }
            NetEvent::Start { slot, generation } => {
                let b = &self.batches[slot as usize];
                if b.in_use && b.generation == generation {
                    self.activate(ctx, slot);
                }
            }
            NetEvent::Delivered { slot, generation } => {
                let b = &mut self.batches[slot as usize];
                if b.in_use && b.generation == generation {
                    b.in_use = false;
                    let tag = b.tag;
                    self.free_slots.push(slot);
                    ctx.batch_done(tag);
                }
            }
            NetEvent::Pushed { slot, generation } => {
                let b = &mut self.batches[slot as usize];
                if b.in_use && b.generation == generation && !b.push_told {
                    b.push_told = true;
                    b.push_event = None;
                    ctx.batch_pushed(b.tag);
                }
            }
            // Packet-model events never reach this model.
            NetEvent::Packet { .. } => {}
        }
    }

    fn link_traffic(&mut self) -> Vec<LinkTraffic> {
        self.traffic_totals()
    }

    fn unsettled(&self) -> bool {
        !self.unsettled.is_empty()
    }

    /// Re-solves, once each, the components of the batches noted during the instant that are
    /// still transmitting.
    fn settle(&mut self, ctx: &mut dyn NetContext) {
        self.settle_pass += 1;
        let pass = self.settle_pass;
        let mut i = 0;
        // Re-solving may complete a batch (a replay materialized at its very end), which notes
        // its neighbours: the list can grow while it is walked.
        while i < self.unsettled.len() {
            let seed = self.unsettled[i];
            i += 1;
            // Still transmitting (a completed batch has no live flows left).
            let b = &self.batches[seed as usize];
            if !b.in_use || b.live.is_empty() || b.settled_in == pass {
                continue;
            }
            for c in self.resolve(ctx, seed) {
                self.batches[c as usize].settled_in = pass;
            }
        }
        self.unsettled.clear();
        self.changed.clear();
    }

    fn counters(&self) -> NetCounters {
        self.counters
    }

    fn path_bottleneck(
        &mut self,
        src: DeviceId,
        dst: DeviceId,
    ) -> Result<(f64, LinkClass), TopologyError> {
        let path = self.router.path(&self.topo, src, dst)?;
        Ok(self.topo.bottleneck(path))
    }

    fn link_series(&mut self, end: SimTime, options: SeriesOptions) -> Option<LinkSeries> {
        self.series(end, options)
    }
}

#[cfg(test)]
mod tests;
