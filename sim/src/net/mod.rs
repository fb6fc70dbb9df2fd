//! Network models: how transfers share links over time.
//!
//! A model is handed *batches*: every (source, destination) pair of a registered pattern sends
//! the same number of bytes starting now, and the model reports when all of them have been
//! delivered. Batches are the unit a collective step is made of (see `collective`), and they
//! let a model do per-step work once instead of once per transfer.
//!
//! - [`maxmin`]: the bandwidth-sharing math (max-min fairness by progressive filling), a fast
//!   solver and a deliberately simple reference solver it must match.
//! - [`flow`]: the fluid model: max-min fair rates over link capacities, re-solved per
//!   connected component when batches start and finish, solutions reused when a state repeats.
//! - [`packet`]: packets with store-and-forward hops, finite output buffers, lossless
//!   (backpressure) or lossy (drop + retransmit) switches; reports buffer occupancy, pauses,
//!   drops.
//! - [`series`]: link utilization and buffer occupancy over time (recorded during a run,
//!   binned after it).
//! - [`factors`]: size-dependent bandwidth and latency factors per link class (calibration).
//!
//! Models know nothing about training or collectives: only devices, links and bytes.

pub mod factors;
pub mod flow;
pub mod maxmin;
pub mod packet;
pub mod series;
#[cfg(test)]
pub(crate) mod testing;

use crate::engine::{EventHandle, SimTime};
use crate::topology::{DeviceId, LinkClass, TopologyError};

/// A registered set of (source, destination) device pairs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct NetPatternId(pub u32);

/// An event a network model scheduled for itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NetEvent {
    /// A batch posted behind other sends on a FIFO egress queue starts sending.
    Start { slot: u32, generation: u32 },
    /// Some flows of a batch finish transmitting (the earliest of its live flows).
    TxDone { slot: u32, generation: u32 },
    /// A batch replaying a recorded trajectory has finished transmitting.
    ReplayEnd { slot: u32, generation: u32 },
    /// The last byte of a batch has arrived at its destinations.
    Delivered { slot: u32, generation: u32 },
    /// Every byte of a batch has left its senders' hosts (before it finishes transmitting:
    /// see [`NetContext::batch_pushed`]).
    Pushed { slot: u32, generation: u32 },
    /// A packet-model event: `id` is a port (directed link) or a packet slot, per `kind`.
    Packet { kind: PacketEventKind, id: u32 },
}

/// What a [`NetEvent::Packet`] means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PacketEventKind {
    /// Port `id` finished serializing its current packet.
    TxEnd,
    /// Packet `id` reached the far end of the link it was sent on.
    Arrive,
    /// Packet `id`, dropped earlier, is sent again by its source.
    Retransmit,
    /// The last packet of flow `id` has arrived (flows without a window are not told of
    /// their other packets' arrivals: nothing depends on them).
    FlowDelivered,
}

/// What a model may do to the simulation it lives in: the owner of the event queue
/// implements it (so the model never sees the owner's event type).
pub trait NetContext {
    fn now(&self) -> SimTime;
    fn schedule(&mut self, at: SimTime, event: NetEvent) -> EventHandle;
    fn cancel(&mut self, handle: EventHandle);
    /// The batch started with `tag` has been delivered completely.
    fn batch_done(&mut self, tag: u64);
    /// Every byte of the batch started with `tag` has left its senders (the last ones are on
    /// the wire, a path latency from delivery): what a sender writes after it on the same
    /// connection may leave now. A model that does not tell it leaves it at the delivery.
    fn batch_sent(&mut self, _tag: u64) {}
    /// Every byte of the batch started with `tag` has left its senders' hosts, though some
    /// may still queue further on: where a flow's slowest link comes after a faster one its
    /// sender pushes at the faster pace and the excess waits in the slower link's queue. A
    /// model that does not tell it leaves it at [`Self::batch_sent`].
    fn batch_pushed(&mut self, _tag: u64) {}
}

/// Traffic a directed link carried over a run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LinkTraffic {
    pub bytes: f64,
}

/// Work a model did, for benchmarks and `--json` output.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct NetCounters {
    pub batches: u64,
    pub flows: u64,
    pub events: u64,
    pub solves: u64,
    pub solution_reuses: u64,
    /// Batches that replayed a recorded trajectory instead of being simulated event by event.
    pub replays: u64,
    /// Replays that another batch interrupted (rebuilt and simulated on from there).
    pub replays_interrupted: u64,
}

/// The flows of a schedule, counted for a model's memory estimate
/// ([`NetworkModel::estimate_flow_bytes`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FlowLoad {
    /// The pairs of every transfer op.
    pub flows: u64,
    /// The pairs of every distinct pattern (what is routed and kept once).
    pub routed_pairs: u64,
    /// The most rates the ops' max-min solutions could hold: an op is re-solved at most
    /// once per flow that finishes, so at most the square of its pairs (saturating).
    pub solution_rates: u64,
}

/// The interface every network model implements.
pub trait NetworkModel {
    /// Routes the pairs once; later batches refer to the pattern by id.
    fn add_pattern(
        &mut self,
        pairs: &[(DeviceId, DeviceId)],
    ) -> Result<NetPatternId, TopologyError>;
    /// Every pair of `pattern` starts sending `bytes` now, no flow faster than `max_flow_bps`
    /// (`f64::INFINITY`: only links limit it); `ctx.batch_done(tag)` when all arrived.
    fn start_batch(
        &mut self,
        ctx: &mut dyn NetContext,
        pattern: NetPatternId,
        bytes: u64,
        max_flow_bps: f64,
        tag: u64,
    );
    /// Handles an event the model scheduled.
    fn on_event(&mut self, ctx: &mut dyn NetContext, event: NetEvent);
    /// Whether the model deferred work to the end of the current instant (see [`settle`]).
    ///
    /// [`settle`]: NetworkModel::settle
    fn unsettled(&self) -> bool {
        false
    }
    /// The owner of the event queue calls this once no event is left at the current time and
    /// every batch that becomes ready at it has started: a model that deferred work (rates
    /// re-solved once per instant instead of once per event) does it now. It may schedule
    /// events at the current time and report batches done; the owner then goes on as after
    /// any event, and settles again before time moves.
    fn settle(&mut self, _ctx: &mut dyn NetContext) {}
    /// Per directed link (indexed by `LinkId`), what it carried so far.
    fn link_traffic(&mut self) -> Vec<LinkTraffic>;
    fn counters(&self) -> NetCounters;
    /// Bottleneck bandwidth (bits/s) and link class of the routed path on an idle network.
    fn path_bottleneck(
        &mut self,
        src: DeviceId,
        dst: DeviceId,
    ) -> Result<(f64, LinkClass), TopologyError>;
    /// About how many events the model will schedule for `batches` batches that move
    /// `pair_bytes` bytes in all (summed over every pair of every batch): for the estimate a
    /// run prints and checks before it starts ([`crate::collective::play::Estimate`]).
    fn estimate_events(&self, batches: u64, pair_bytes: u128) -> u64;
    /// Bytes the model's own state (routes, searches) will grow to, for the same estimate.
    fn estimate_state_bytes(&self) -> u64 {
        0
    }
    /// What to change when a run is refused as too large for this model.
    fn smaller_run_advice(&self) -> &'static str {
        "Use fewer ranks or smaller sizes"
    }
    /// Bytes the model keeps for a schedule's flows, for the same estimate. By default 8 bytes
    /// per flow of every op.
    fn estimate_flow_bytes(&self, load: &FlowLoad) -> u64 {
        load.flows.saturating_mul(8)
    }
    /// Per-port buffer statistics, for models that have buffers.
    fn port_stats(&mut self) -> Option<packet::PortReport> {
        None
    }
    /// Utilization (and buffer occupancy, for models with buffers) over `[0, end]` in bins,
    /// for the busiest links; `None` for models that do not record it.
    fn link_series(
        &mut self,
        _end: SimTime,
        _options: series::SeriesOptions,
    ) -> Option<series::LinkSeries> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_network_event_fits_in_twelve_bytes() {
        assert!(std::mem::size_of::<NetEvent>() <= 12);
    }
}
