//! Trajectory replay: a batch that runs alone from start to end is recorded (the solutions in
//! force and for how long), and the next batch of the same pattern, size and factors that
//! starts alone replays the recording with one event instead of one per group of finishing
//! flows. When another batch starts on its links mid-way, the replay is materialized: its
//! per-flow state is rebuilt at that moment and it goes on as a simulated batch.

use std::sync::Arc;

use super::{BatchSolution, FlowModel};
use crate::engine::SimTime;
use crate::net::NetContext;

/// How a batch that ran alone unfolded: the solutions in force, in order, for how long each
/// (each segment ends with some flows finishing), and when it finished relative to its start.
#[derive(Debug)]
pub(super) struct Trajectory {
    pub(super) segments: Vec<(Arc<BatchSolution>, u64)>,
    pub(super) tx_end_ps: u64,
    pub(super) deliver_ps: u64,
}

/// The segments of a batch running alone, recorded as it goes, and the rates its distinct
/// solutions hold (their flows summed), which bound what a recording may keep.
#[derive(Debug, Default)]
pub(super) struct Recording {
    pub(super) segments: Vec<(Arc<BatchSolution>, u64)>,
    pub(super) rates: usize,
}

impl Recording {
    /// Adds `dt_ps` under `solution`; returns the rates held now.
    pub(super) fn push(&mut self, solution: &Arc<BatchSolution>, dt_ps: u64) -> usize {
        if self
            .segments
            .last()
            .is_none_or(|(last, _)| !Arc::ptr_eq(last, solution))
        {
            self.rates += solution.rates_bps.len();
        }
        self.segments.push((solution.clone(), dt_ps));
        self.rates
    }
}

/// What identifies a batch's trajectory when it runs alone: pattern, bytes and factors.
pub(super) type TrajectoryKey = (u32, u64, u64);

impl FlowModel {
    /// Rebuilds the per-flow state of a replaying batch at `now` by playing its trajectory's
    /// segments up to `now`, exactly as the events would have; the batch then goes on as a
    /// normal one (the caller re-solves its component).
    pub(super) fn materialize(&mut self, ctx: &mut dyn NetContext, slot: u32) {
        let now = ctx.now();
        let b = &mut self.batches[slot as usize];
        let Some(trajectory) = b.replay.take() else {
            return;
        };
        self.counters.replays_interrupted += 1;
        if let Some(h) = b.tx_event.take() {
            ctx.cancel(h);
        }
        let mut t = b.started;
        self.init_flows(slot);
        for (sol, dur) in &trajectory.segments {
            let end = t + SimTime::from_ps(*dur);
            self.batches[slot as usize].solution = Some(sol.clone());
            if end <= now {
                self.advance(slot, end);
                self.finish_flows(slot, end);
                t = end;
            } else {
                self.advance(slot, now);
                return;
            }
        }
        // The whole trajectory lies before `now` (its end event is due at this very time).
        if self.batches[slot as usize].live.is_empty() {
            self.complete(ctx, slot);
        }
    }

    /// The end of a replayed batch: credit its segments to their solutions and complete it.
    pub(super) fn on_replay_end(&mut self, ctx: &mut dyn NetContext, slot: u32) {
        let b = &mut self.batches[slot as usize];
        b.tx_event = None;
        let trajectory = b
            .replay
            .take()
            .expect("a replay end belongs to a replaying batch");
        let mut t = self.batches[slot as usize].started.as_ps();
        for (sol, dur) in &trajectory.segments {
            self.records[sol.record].in_force_ps += dur;
            self.series_log.push(t, *dur, sol.record);
            t += dur;
        }
        let b = &mut self.batches[slot as usize];
        b.live.clear();
        // Its links are not flagged as changed: a replaying batch runs alone (another on its
        // links would have rebuilt it), so no component with rates to keep crosses them.
        // Flagging them cost a Llama-3 405B step on 16,384 GPUs a tenth of its time (390,000
        // replays of ~1,000 links each).
        b.deliver_at = b.started + SimTime::from_ps(trajectory.deliver_ps);
        self.complete(ctx, slot);
    }
}
