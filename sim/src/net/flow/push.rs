//! When a batch's bytes have all left their senders' hosts: what a sender that writes into a
//! socket sees, earlier than their arrival where a flow's slowest link comes after a faster one.
//!
//! A TCP sender pushes as fast as its window lets it, and where the path's slowest link comes
//! after a faster one the window fills that link's queue: the bytes leave the sender at the
//! faster link's pace and wait there. Captured on the testbed's star with one host at half the
//! others' rate (`testbed_star4_slow_host.capture_gloo_reduce_4m.json`): host 0's 3 MiB of
//! gloo reduce-scatter segments to the slow host left host 0's 200 Mbit/s link in 203-260 ms,
//! where the slow host's 100 Mbit/s port needs 263 ms to pass them. The model, per flow: it
//! pushes at its rate, or at the slowest link before its path's slowest where that is faster
//! (the pace `fifo`'s forwarded queues grow by); the batch is pushed once every flow is, and
//! the model tells it ([`super::NetContext::batch_pushed`]). Not modelled: the TCP window
//! bounding the queue (the capture's grew to about 750 KB), and a faster link shared with other
//! flows slowing the push.
//! Kept only where links have FIFO queues (the testbed's profiles) and for batches with a flow
//! whose path slows after its first link; elsewhere a batch is pushed when it is sent.

use super::{secs_after, FlowModel, NetContext, NetEvent};

/// The pace a flow over `path` pushes at beyond its rate: the slowest capacity before the
/// path's slowest link (its first occurrence), where there is a link before it; 0 elsewhere.
pub(super) fn ahead_bps(capacity_bps: &[f64], path: &[u32]) -> f64 {
    let cap = |l: &u32| capacity_bps[*l as usize];
    let slowest = path.iter().map(cap).fold(f64::INFINITY, f64::min);
    match path.iter().position(|l| cap(l) == slowest) {
        Some(k) if k > 0 => path[..k].iter().map(cap).fold(f64::INFINITY, f64::min),
        _ => 0.0,
    }
}

/// Moves the live flows' bytes yet to push forward by `dt_secs` at their pace (their rate, or
/// faster: [`ahead_bps`]).
pub(super) fn advance(
    left: &mut [f64],
    ahead_bps: &[f64],
    live: &[u32],
    rates_bps: &[f64],
    dt_secs: f64,
) {
    for &f in live {
        let f = f as usize;
        let pace = rates_bps[f].max(ahead_bps[f]);
        left[f] = (left[f] - pace / 8.0 * dt_secs).max(0.0);
    }
}

impl FlowModel {
    /// (Re)schedules when batch `slot` will have pushed every byte at the rates just solved;
    /// tells it at once where that is now.
    pub(super) fn reschedule_push(&mut self, ctx: &mut dyn NetContext, slot: u32) {
        let now = ctx.now();
        let b = &mut self.batches[slot as usize];
        if b.push_told || b.push_left.is_empty() {
            return;
        }
        if let Some(h) = b.push_event.take() {
            ctx.cancel(h);
        }
        let Some(sol) = b.solution.as_ref() else {
            return;
        };
        let mut latest: f64 = 0.0;
        for &f in &b.live {
            let f = f as usize;
            let pace = sol.rates_bps[f].max(b.push_ahead_bps[f]);
            if b.push_left[f] > 0.0 {
                latest = latest.max(if pace > 0.0 {
                    b.push_left[f] * 8.0 / pace
                } else {
                    f64::INFINITY
                });
            }
        }
        if !latest.is_finite() {
            return;
        }
        b.push_event = Some(ctx.schedule(
            secs_after(now, latest),
            NetEvent::Pushed {
                slot,
                generation: b.generation,
            },
        ));
    }
}
