//! FIFO queues in front of TCP connections: how long a batch waits before it starts.
//!
//! Sends posted together. Where a profile gives a link class's FIFO head bytes `H` (a shaper's
//! FIFO egress queue in front of TCP connections that each keep at most about `H` bytes queued:
//! TCP small queues), batches posted at the same instant whose flows enter such a link first
//! leave in the order posted: each waits until the ones posted before it have had their first
//! `min(bytes, H)` bytes sent at the link's rate, then all share it. So a sender posting two
//! 256 KiB sends finishes the first after 256 KiB and the second after 512 KiB, not both after
//! 512 KiB (measured on the testbed: `testbed/workloads/fanout.py`). The wait is per batch (its
//! longest flow's); flows of one batch start together.
//!
//! Sends posted behind a standing queue. A batch posted while other connections already send
//! on such a link waits behind what each keeps queued there, `min(bytes left, H)` per live
//! flow, drained at the link's rate, then shares the link. This is what holds OpenMPI's
//! rendezvous acknowledgements: in a capture of back-to-back ring exchanges of 1 MiB on the
//! testbed (TCP cubic, 200 Mbit/s), a rank's acknowledgement left 6.8 ms (163 KB at the
//! link's rate; `H` = 173 KB there, a host's ping behind its own stream: `calibrate import
//! own-egress`) after the request it answers had arrived, because its own
//! send to the next rank had started first; the ring's steps each took about that much more
//! than their bytes (`data/runs/calibration/testbed_mpi_ring_capture_1MiB.txt`;
//! `testbed_mpi_p2p_4ranks.json` beside it: 6.7-7.5 ms from
//! 1 MiB, 2.9 ms for 128 KiB messages, whose 64 KiB after the request cap the queue). Under
//! TCP bbr bulk sends posted 20 ms after a first one waited 0.5-1.1 MB behind it
//! (`data/runs/testbed_bbr/calibration/*.fanout_stagger*.json`): bbr's queue follows its
//! congestion window, which `H` alone does not describe. A trajectory recorded under one
//! queue does not stand for a batch that starts behind another, so replay is off where links
//! have FIFO heads.
//!
//! Sends posted behind a forwarded queue. On such links a connection whose slowest link comes
//! after a faster one sends at the faster link's pace (TCP with its window open) and the excess
//! waits in the slower link's queue: `min(bytes left, (upstream − rate) × time sent)`, at the
//! slowest capacity before it. A batch posted while others queue so on a link its flows cross
//! further on waits behind them there too, after its wait at its first link; its own
//! connection's bytes (the same path) are not counted, since a library orders its own messages
//! (in-order connections, OpenMPI's exchange modes). This is what holds OpenMPI's answers
//! between the three-leaf testbed's leaves (`suite.py capture_mpi`, every host and switch port
//! captured over eleven 1 MiB ring all_gathers,
//! `testbed_three_leaf_100mbit_uplinks.capture_mpi_ring_1m.json`): of 142 answers between
//! leaves, half left their 100 Mbit/s uplink 0-5.9 ms after they were sent and half 5.9-9.1 ms
//! after (behind another ring connection's block), and the sender's data followed its answer
//! by 0.03-0.09 ms: the ring's steps wait for queues, not for the hosts. The same answers
//! waited a further median 3.5 ms (up to 5.4) at the next leaf's downlink, which runs at the
//! uplink's rate but receives its traffic in whole 64 KB segments from the shaper before it.
//! A queue of one whole segment at every such link, tried on 2026-11-27, moved the star's
//! rings off (OpenMPI's ring all-reduce to 15.2% at worst, its ring all_gather to 23.2%,
//! gloo's send/recv multiring to 43.5%); since 2026-11-29 the measured wait below plays it.
//! A message that first waited at its own link (behind its sender's standing queue) reaches
//! the links further on later than it was posted, and meets there the connections that
//! started meanwhile too: it is looked at again when it would start
//! ([`FlowModel::late_forwarded_wait`]). On the two leaves with a slow leaf
//! (`testbed_two_leaf_mixed.capture_mpi_ring_ar_4m.json`) rank 4's answers to rank 3 crossed
//! rank 3's 100 Mbit/s downlink in a median 18.6 ms, behind what rank 2's connection from the
//! 200 Mbit/s leaf had queued there; held 7 ms behind rank 4's own stream, two of the ten
//! answers dtsim plays now find rank 2's next block started meanwhile and wait 4.8 and 11.8 ms
//! more, and the 4 MiB ring all-reduce plays 679.4 ms instead of 600.9 (measured 720.8, its
//! launches 670.0-729.3).
//!
//! Sends crossing a link behind another connection's packet. A shaper (htb, tbf) lets a
//! packet go whenever its level is not below zero and charges all of it, and TCP hands it GSO
//! packets of a few milliseconds of the connection's rate: on the testbed's switch ports,
//! 65,160 B every 2.72 ms for a stream at 200 Mbit/s, 33,304 B every 2.78 ms at 100 Mbit/s
//! (tcpdump of an iperf3 stream, 2026-11-29). A message reaching such a link while another
//! connection streams through it waits until that connection's packet in service is paid off,
//! and behind the next one when it was already queued there. Where a profile gives a link
//! class a packet wait `W` (the mean of that, measured as a 1-byte ping's round trip through a
//! stream less beside one: `suite.py packet_wait`, `calibrate import packet-wait`; 2.1 ms at
//! 200 Mbit/s on the star), every link of a batch's path after its first (the first link's
//! queue is the FIFO head's) where other connections fill the link adds `W` to its wait, at
//! most what the longest of them has left at the link's rate. Both are judged at the instant
//! the message reaches the link, after what it waited before it (its own link's queue): a
//! connection whose last bytes have gone by then has no packet there to wait for (an answer
//! held 3.5 ms behind its own 131 KB block does not wait at the next link for a block that
//! started with its own and is done). Only where they fill it: a
//! shaper holds packets only while in debt, and a link carrying less than its rate is not
//! (measured on the three leaves: a ping through a 300 Mbit/s host link that a 100 Mbit/s
//! stream crosses waits 0.01 ms, against 3.10 ms through the 100 Mbit/s link it fills). The
//! others fill the link when the most each could take there (its even share of the most
//! crowded other link of its path) reaches the link's rate. A connection met on several links
//! of the path is waited for once, at the first of them it fills with the others: its packets
//! pass the next links in step with this one. The rings are what it moves: each step's answer
//! or notification crosses the receiver's downlink while the ring's previous rank streams into
//! it (OpenMPI's ring all_gather of 512 KiB on the three leaves: 47.8 ms measured, 40.4
//! predicted without the wait, 47.1 with it; the two leaves' ring all-reduce of 1 MiB 171.7,
//! 151.0 and 170.6).
//!

use super::FlowModel;
use crate::engine::SimTime;

/// Relative shortfall within which other connections still count as filling a link (rates
/// are sums of floating-point shares).
const FILL_TOLERANCE: f64 = 1e-9;

#[cfg(test)]
mod tests;

/// Bytes flow `f` of batch `b` has left to send at `at` (not before its last update),
/// projected at its rate in force `rate_bps`; negative once it would have sent them all.
fn bytes_left_at(b: &super::Batch, f: usize, rate_bps: f64, at: SimTime) -> f64 {
    b.remaining[f] - rate_bps / 8.0 * (at - b.last_update).as_secs_f64()
}

impl FlowModel {
    /// How long a batch posted now waits (the longest wait over its flows): behind the sends
    /// posted before it, at this same instant or standing, on the FIFO egress queues its flows
    /// enter first, then behind the forwarded queues of the FIFO links further on and the
    /// packets other connections have in service there; notes its own head bytes at its
    /// first links for the sends posted after it.
    /// Returns the wait, and the part of it spent at the first links (when the message
    /// reaches the links further on, where [`Self::late_forwarded_wait`] looks again).
    pub(super) fn fifo_wait(
        &mut self,
        pattern: usize,
        bytes: u64,
        now: SimTime,
    ) -> (SimTime, SimTime) {
        if self.fifo_posted.is_empty() {
            return (SimTime::ZERO, SimTime::ZERO);
        }
        let pat = &self.patterns[pattern];
        let first_links = || (0..pat.flows()).filter_map(|f| pat.path(f).first().copied());
        // What was posted before this batch decides its wait; its own flows do not wait for
        // each other.
        let mut wait_secs: f64 = 0.0;
        let mut first_wait_secs: f64 = 0.0;
        for f in 0..pat.flows() {
            let path = pat.path(f);
            let Some(&first) = path.first() else { continue };
            let l = first as usize;
            let mut w = 0.0;
            if self.fifo_head_bytes[l] > 0.0 {
                let (at, posted_now) = self.fifo_posted[l];
                let queued = if at == now { posted_now } else { 0.0 };
                let ahead = queued + self.standing_queue_bytes(l, now);
                w += ahead * 8.0 / self.link_capacity_bps[l];
            }
            first_wait_secs = first_wait_secs.max(w);
            // The other connections whose packet this flow waited for, at an earlier link.
            let mut met: Vec<(u32, usize)> = Vec::new();
            for &l in &path[1..] {
                let l = l as usize;
                if self.fifo_head_bytes[l] > 0.0 {
                    let at = now + SimTime::from_secs_f64(w);
                    w += self.forwarded_queue_bytes(l, path, now, at) * 8.0
                        / self.link_capacity_bps[l];
                }
                if self.packet_wait_secs[l] > 0.0 {
                    let at = now + SimTime::from_secs_f64(w);
                    w += self.packet_in_service_secs(l, path, now, at, &mut met);
                }
            }
            wait_secs = wait_secs.max(w);
        }
        for l in first_links().map(|l| l as usize) {
            let head = self.fifo_head_bytes[l];
            if head <= 0.0 {
                continue;
            }
            let (at, queued) = &mut self.fifo_posted[l];
            if *at != now {
                (*at, *queued) = (now, 0.0);
            }
            *queued += head.min(bytes as f64);
        }
        (
            SimTime::from_secs_f64(wait_secs),
            SimTime::from_secs_f64(first_wait_secs),
        )
    }

    /// What a batch posted at `posted`, which waited `first_wait` at its first links, waits
    /// further on behind the forwarded queues of connections that started sending after it
    /// was posted and before it reached them (see "Sends posted behind a forwarded queue"):
    /// [`Self::fifo_wait`] saw only the connections sending when it was posted. Judged when
    /// the batch would start (`now`), from the batches known then.
    pub(super) fn late_forwarded_wait(
        &self,
        pattern: usize,
        posted: SimTime,
        first_wait: SimTime,
        now: SimTime,
    ) -> SimTime {
        let pat = &self.patterns[pattern];
        let mut wait_secs: f64 = 0.0;
        for f in 0..pat.flows() {
            let path = pat.path(f);
            let mut w = 0.0;
            for &l in path.iter().skip(1) {
                let l = l as usize;
                if self.fifo_head_bytes[l] > 0.0 {
                    let at = posted + first_wait + SimTime::from_secs_f64(w);
                    let since = |b: &super::Batch| b.started > posted && b.started <= at;
                    w += self.forwarded_queue_bytes_of(l, path, now, at, since) * 8.0
                        / self.link_capacity_bps[l];
                }
            }
            wait_secs = wait_secs.max(w);
        }
        SimTime::from_secs_f64(wait_secs)
    }

    /// The flows crossing `link` in batches posted before `now` that send (solved, flows
    /// ready): each as (batch slot, batch, its path, flow position, rate in bits/s).
    fn sending_on(
        &self,
        link: usize,
        now: SimTime,
    ) -> impl Iterator<Item = (u32, &super::Batch, &[u32], usize, f64)> + '_ {
        self.link_patterns[link].iter().flat_map(move |&p| {
            let pat = &self.patterns[p as usize];
            self.active_by_pattern[p as usize]
                .iter()
                .map(|&slot| (slot, &self.batches[slot as usize]))
                .filter(move |(_, b)| b.posted != now && b.flows_ready)
                .filter_map(|(slot, b)| b.solution.as_ref().map(|sol| (slot, b, sol)))
                .flat_map(move |(slot, b, sol)| {
                    b.live.iter().map(move |&f| {
                        let f = f as usize;
                        (slot, b, pat.path(f), f, sol.rates_bps[f])
                    })
                })
                .filter(move |(_, _, path, _, _)| path.contains(&(link as u32)))
        })
    }

    /// How long a message on path `own` posted `now` waits at `link`, which it reaches `at`,
    /// behind the packet other connections have in service there (see "Sends crossing a link
    /// behind another connection's packet"): the link's packet wait, at most the longest of
    /// them has left at the link's rate by then; none when they do not fill the link, when
    /// they have sent their last bytes by then (projected at the rates in force), or when
    /// every connection sending there was waited for at an earlier link (`met`, to which this
    /// link's are added once they fill it).
    ///
    /// They fill it when together they can take its whole rate: a shaper holds packets only
    /// while it is in debt, and a link that carries less than its rate keeps tokens enough for
    /// them (measured: a 100 Mbit/s stream through a 300 Mbit/s host link leaves a ping 0.01
    /// ms of wait). Each counts for [`Self::most_it_takes`] there, met at an earlier link or
    /// not.
    fn packet_in_service_secs(
        &self,
        link: usize,
        own: &[u32],
        now: SimTime,
        at: SimTime,
        met: &mut Vec<(u32, usize)>,
    ) -> f64 {
        let capacity = self.link_capacity_bps[link];
        let mut takes_bps = 0.0;
        let mut left_most: f64 = 0.0;
        let mut here = Vec::new();
        for (slot, b, path, f, rate) in self.sending_on(link, now) {
            if path == own {
                continue;
            }
            // Its bytes left when the message gets here: none, and it has no packet here.
            let left = bytes_left_at(b, f, rate, at);
            if left <= 0.0 {
                continue;
            }
            takes_bps += self.most_it_takes(link, path, now, at);
            if met.contains(&(slot, f)) {
                continue;
            }
            here.push((slot, f));
            left_most = left_most.max(left);
        }
        if takes_bps < capacity * (1.0 - FILL_TOLERANCE) {
            return 0.0;
        }
        met.extend(here);
        let left_secs = left_most.max(0.0) * 8.0 / capacity;
        self.packet_wait_secs[link].min(left_secs)
    }

    /// The most a flow on `path` can take at `link` when a message reaches it `at`: its even
    /// share of the most crowded other link of its path (all of `link` where it has no other),
    /// among the flows still sending there then (projected at the rates in force). Not its
    /// rate in force: rates are re-solved once the instant settles, so a flow whose sharer
    /// ended at this very instant still shows its old share.
    fn most_it_takes(&self, link: usize, path: &[u32], now: SimTime, at: SimTime) -> f64 {
        let still_sending = |l: usize| {
            self.sending_on(l, now)
                .filter(|&(_, b, _, f, rate)| bytes_left_at(b, f, rate, at) > 0.0)
                .count()
        };
        path.iter()
            .map(|&l| l as usize)
            .filter(|&l| l != link)
            .map(|l| self.link_capacity_bps[l] / still_sending(l).max(1) as f64)
            .fold(self.link_capacity_bps[link], f64::min)
    }

    /// Bytes the connections sending on `link` (flows that enter their path there, in batches
    /// posted before `now`) keep queued in its FIFO egress queue: `min(bytes left, H)` each,
    /// those of batches waiting there for a shaper's debt to be paid (module `burst`) included.
    fn standing_queue_bytes(&self, link: usize, now: SimTime) -> f64 {
        let head = self.fifo_head_bytes[link];
        let sending: f64 = self
            .sending_on(link, now)
            .filter(|(_, _, path, _, _)| path.first() == Some(&(link as u32)))
            .map(|(_, b, _, f, rate)| {
                let left = bytes_left_at(b, f, rate, now);
                left.clamp(0.0, head)
            })
            .sum();
        let waiting: f64 = self
            .debt_waiting
            .iter()
            .map(|&slot| &self.batches[slot as usize])
            // Those posted at this instant are counted as posted together, above.
            .filter(|b| b.posted != now)
            .map(|b| {
                let pat = &self.patterns[b.pattern as usize];
                let entering = (0..pat.flows())
                    .filter(|&f| pat.path(f).first() == Some(&(link as u32)))
                    .count();
                entering as f64 * (b.bytes as f64).min(head)
            })
            .sum();
        sending + waiting
    }

    /// Bytes queued at `link` at time `at` (projected from `now` at the rates in force) by the
    /// flows that reach it as their slowest link behind a faster one, other than those on the
    /// path `own` (see "Sends posted behind a forwarded queue"). Upstream is the slowest
    /// capacity before the link, not the flow's share of it.
    fn forwarded_queue_bytes(&self, link: usize, own: &[u32], now: SimTime, at: SimTime) -> f64 {
        self.forwarded_queue_bytes_of(link, own, now, at, |_| true)
    }

    /// [`Self::forwarded_queue_bytes`] of the batches `counted` selects.
    fn forwarded_queue_bytes_of(
        &self,
        link: usize,
        own: &[u32],
        now: SimTime,
        at: SimTime,
        counted: impl Fn(&super::Batch) -> bool,
    ) -> f64 {
        let cap = self.link_capacity_bps[link];
        let slowest = |links: &[u32]| {
            links
                .iter()
                .map(|&x| self.link_capacity_bps[x as usize])
                .fold(f64::INFINITY, f64::min)
        };
        let mut queued = 0.0;
        for (_, b, path, f, rate) in self.sending_on(link, now) {
            let k = path.iter().position(|&x| x as usize == link).unwrap_or(0);
            if path == own || k == 0 || !counted(b) {
                continue;
            }
            let upstream = slowest(&path[..k]);
            if upstream <= cap || slowest(&path[k..]) < cap {
                continue;
            }
            let left = bytes_left_at(b, f, rate, at);
            let sent_secs = (at - b.started).as_secs_f64().max(0.0);
            let ahead = (upstream - rate).max(0.0) / 8.0 * sent_secs;
            queued += left.min(ahead).max(0.0);
        }
        queued
    }
}
