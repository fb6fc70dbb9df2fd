//! The FIFO queues' specification: sends posted together leave in the order posted, a send waits
//! behind another connection's standing queue, behind what a slower link has queued, and
//! behind the packet another connection has in service at a shaped link.

#![cfg(test)]
use std::sync::Arc;

use crate::engine::SimTime;
use crate::net::factors::EfficiencyFactors;
use crate::net::flow::tests::{run, secs, star};
use crate::net::testing::{schedule, GBPS};
use crate::topology::{LinkClass, Topology};

/// g0 posts two 1.25 GB sends at once, to g1 then g2, over its 100 Gb/s link (0.1 s
/// each alone); g1 posts one to g2 at the same instant. Op end times with head bytes `h`.
fn posted_together(h: Option<f64>) -> Vec<f64> {
    let t = star(3, 100.0 * GBPS, SimTime::ZERO);
    let s = 1_250_000_000;
    let sched = schedule(
        3,
        &[
            (vec![(0, 1)], s, vec![]),
            (vec![(0, 2)], s, vec![]),
            (vec![(1, 0)], s, vec![]),
        ],
    );
    let factors = EfficiencyFactors {
        fifo_head: h.map(|h| (LinkClass::Ethernet, h)).into_iter().collect(),
        ..Default::default()
    };
    let (out, _) = run(&t, &sched, factors);
    out.ops.iter().map(|o| secs(o.end)).collect()
}

#[test]
fn sends_posted_together_on_a_fifo_egress_leave_in_the_order_posted() {
    let close =
        |got: &[f64], want: [f64; 3]| got.iter().zip(want).all(|(g, w)| (g - w).abs() < 1e-9);
    // Fair sharing: both of g0's sends end at 0.2 s; g1's has its link to itself.
    let fair = posted_together(None);
    assert!(close(&fair, [0.2, 0.2, 0.1]), "{fair:?}");
    // Head 0.625 GB: the first send goes alone for 0.05 s, then they share: it ends at
    // 0.05 + 0.625 GB / 6.25 GB/s = 0.15 s, the second at 0.2 s. g1's send, the only one
    // posted on its own link, does not wait.
    let half = posted_together(Some(625e6));
    assert!(close(&half, [0.15, 0.2, 0.1]), "{half:?}");
    // A head as large as the sends: one after the other.
    let whole = posted_together(Some(2e9));
    assert!(close(&whole, [0.1, 0.2, 0.1]), "{whole:?}");
    // The flows of one batch (one op to both) start together and share the link.
    let t = star(3, 100.0 * GBPS, SimTime::ZERO);
    let one_op = schedule(3, &[(vec![(0, 1), (0, 2)], 1_250_000_000, vec![])]);
    let factors = EfficiencyFactors {
        fifo_head: vec![(LinkClass::Ethernet, 625e6)],
        ..Default::default()
    };
    let (out, _) = run(&t, &one_op, factors);
    assert!((secs(out.end) - 0.2).abs() < 1e-9, "{}", out.end);
}

/// g0 sends 1.25 GB to g1 from the start (0.1 s alone at 100 Gb/s); g1's 125 MB to g2 ends at
/// 10 ms, and then g0 posts a 1 kB message to g2 (an acknowledgement, say). Its end time with
/// head bytes `h`.
fn posted_behind_a_send(h: Option<f64>) -> f64 {
    let t = star(3, 100.0 * GBPS, SimTime::ZERO);
    let sched = schedule(
        3,
        &[
            (vec![(0, 1)], 1_250_000_000, vec![]),
            (vec![(1, 2)], 125_000_000, vec![]),
            (vec![(0, 2)], 1_000, vec![1]),
        ],
    );
    let factors = EfficiencyFactors {
        fifo_head: h.map(|h| (LinkClass::Ethernet, h)).into_iter().collect(),
        ..Default::default()
    };
    let (out, _) = run(&t, &sched, factors);
    secs(out.ops[2].end)
}

#[test]
fn a_send_posted_while_another_connection_sends_waits_behind_its_standing_queue() {
    // No head: the message shares g0's link at once (1 kB at 50 Gb/s).
    let free = posted_behind_a_send(None);
    assert!((free - (0.010 + 1.6e-7)).abs() < 1e-9, "{free}");
    // Head 62.5 MB: it waits behind the bulk's 62.5 MB (5 ms at the link's rate) first.
    let behind = posted_behind_a_send(Some(62.5e6));
    assert!((behind - (0.015 + 1.6e-7)).abs() < 1e-9, "{behind}");
    // A head larger than what the bulk has left (1.125 GB at 10 ms): behind all of it.
    let all = posted_behind_a_send(Some(2e9));
    assert!((all - (0.100 + 8e-8)).abs() < 1e-9, "{all}");
}

/// Two leaves joined by one 100 Gb/s link, g0 and g1 on the first, g2 and g3 on the second,
/// every host link 300 Gb/s, no latency: a host sends three times faster than the uplink
/// drains.
fn two_leaves() -> Arc<Topology> {
    use crate::topology::{DeviceKind, LinkSpec};
    let mut b = Topology::builder("two-leaves");
    let gpus: Vec<_> = (0..4)
        .map(|i| b.add_device(format!("g{i}"), DeviceKind::Gpu, Some(i / 2)))
        .collect();
    let leaves = [
        b.add_device("leaf0", DeviceKind::Switch, None),
        b.add_device("leaf1", DeviceKind::Switch, None),
    ];
    let link = |gbps: f64| LinkSpec {
        bandwidth_bps: gbps * GBPS,
        latency: SimTime::ZERO,
        buffer_bytes: 1 << 20,
        class: LinkClass::Ethernet,
    };
    for (i, &g) in gpus.iter().enumerate() {
        b.add_link(g, leaves[i / 2], link(300.0));
    }
    b.add_link(leaves[0], leaves[1], link(100.0));
    Arc::new(b.build().unwrap())
}

/// g0 sends 1.25 GB to g2 from the start (0.1 s at the uplink's 100 Gb/s); g1 sends 1.125 GB
/// to g0 (30 ms on the host links), then `from` posts a 1 kB message to `to` (an
/// acknowledgement, say).
/// The message's end time, with FIFO heads of `h` bytes on the Ethernet links or none.
fn posted_behind_a_forwarded_queue(from: u32, to: u32, h: Option<f64>) -> f64 {
    let sched = schedule(
        4,
        &[
            (vec![(0, 2)], 1_250_000_000, vec![]),
            (vec![(1, 0)], 1_125_000_000, vec![]),
            (vec![(from, to)], 1_000, vec![1]),
        ],
    );
    let factors = EfficiencyFactors {
        fifo_head: h.map(|h| (LinkClass::Ethernet, h)).into_iter().collect(),
        ..Default::default()
    };
    let (out, _) = run(&two_leaves(), &sched, factors);
    secs(out.ops[2].end)
}

#[test]
fn a_message_crossing_a_slower_link_waits_behind_what_other_connections_queued_there() {
    // Max-min alone: the message shares the uplink at once (1 kB at 50 Gb/s).
    let shared = posted_behind_a_forwarded_queue(1, 3, None);
    assert!((shared - (0.030 + 1.6e-7)).abs() < 1e-9, "{shared}");
    // FIFO links: in 30 ms g0 put 1.125 GB on the uplink at 300 Gb/s and the uplink passed
    // 0.375 GB, so 0.75 GB wait there, 60 ms at 100 Gb/s, before the message starts (then
    // sharing the uplink with the bulk's rest); g1's own link is idle, nothing waits there.
    let behind = posted_behind_a_forwarded_queue(1, 3, Some(1.0));
    assert!((behind - (0.090 + 1.6e-7)).abs() < 1e-9, "{behind}");
    // The same connection's bytes are its own order (the libraries play it), not a queue to
    // wait behind: g0's message to g2 shares the uplink with g0's bulk at once.
    let own = {
        let sched = schedule(
            4,
            &[
                (vec![(0, 2)], 1_250_000_000, vec![]),
                (vec![(1, 3)], 375_000_000, vec![]),
                (vec![(0, 2)], 1_000, vec![1]),
            ],
        );
        let factors = EfficiencyFactors {
            fifo_head: vec![(LinkClass::Ethernet, 1.0)],
            ..Default::default()
        };
        let (out, _) = run(&two_leaves(), &sched, factors);
        (secs(out.ops[1].end), secs(out.ops[2].end))
    };
    assert!(own.1 - own.0 < 1e-6, "{own:?}");
}

/// g1 streams 1.25 GB to g2 from the start (0.1 s alone at 100 Gb/s); g0's 125 MB to g1 ends
/// at 10 ms, and then `from` posts a 1 kB message to g2 (an acknowledgement, say), whose way
/// in is g2's downlink, where g1's stream flows. The message's end time with a packet wait of
/// `w` seconds on the Ethernet links.
fn posted_across_a_stream(from: u32, w: Option<f64>) -> f64 {
    let t = star(3, 100.0 * GBPS, SimTime::ZERO);
    let sched = schedule(
        3,
        &[
            (vec![(1, 2)], 1_250_000_000, vec![]),
            (vec![(0, 1)], 125_000_000, vec![]),
            (vec![(from, 2)], 1_000, vec![1]),
        ],
    );
    let factors = EfficiencyFactors {
        shaper_packet_wait_secs: w.map(|w| (LinkClass::Ethernet, w)).into_iter().collect(),
        ..Default::default()
    };
    let (out, _) = run(&t, &sched, factors);
    secs(out.ops[2].end)
}

#[test]
fn a_message_crossing_a_link_another_connection_streams_through_waits_for_its_packet() {
    // No packet wait: the message shares g2's downlink with the stream at once (1 kB at 50
    // Gb/s).
    let free = posted_across_a_stream(0, None);
    assert!((free - (0.010 + 1.6e-7)).abs() < 1e-9, "{free}");
    // A wait of 2 ms: the message starts 2 ms later, then shares the link.
    let behind = posted_across_a_stream(0, Some(0.002));
    assert!((behind - (0.012 + 1.6e-7)).abs() < 1e-9, "{behind}");
    // No longer than the stream has left (1.125 GB at 10 ms: 90 ms at the link's rate); the
    // message starts as the stream ends (1 kB alone or shared at that instant).
    let capped = posted_across_a_stream(0, Some(0.5));
    assert!(capped > 0.100 && capped < 0.100 + 2e-7, "{capped}");
    // The stream's own connection does not wait for its own packets (in order on it).
    let own = posted_across_a_stream(1, Some(0.002));
    assert!((own - (0.010 + 1.6e-7)).abs() < 1e-9, "{own}");
}

#[test]
fn a_connection_met_on_several_links_of_a_path_is_waited_for_once() {
    // g0 streams 1.25 GB to g2 across the leaves (0.1 s at the uplink's 100 Gb/s); once g1's
    // 375 MB to g0 has ended (10 ms), g1 posts 1 kB to g3. Its path meets g0's stream on the
    // uplink, not on g3's downlink; g1's own link has no one else: one wait of 2 ms, then it
    // shares the uplink (1 kB at 50 Gb/s).
    let sched = |to: u32| {
        schedule(
            4,
            &[
                (vec![(0, 2)], 1_250_000_000, vec![]),
                (vec![(1, 0)], 375_000_000, vec![]),
                (vec![(1, to)], 1_000, vec![1]),
            ],
        )
    };
    let factors = || EfficiencyFactors {
        shaper_packet_wait_secs: vec![(LinkClass::Ethernet, 0.002)],
        ..Default::default()
    };
    let (out, _) = run(&two_leaves(), &sched(3), factors());
    let to_g3 = secs(out.ops[2].end);
    assert!((to_g3 - (0.012 + 1.6e-7)).abs() < 1e-9, "{to_g3}");
    // To g2 it meets the stream on the uplink and again on g2's downlink: still one wait.
    let (out, _) = run(&two_leaves(), &sched(2), factors());
    let to_g2 = secs(out.ops[2].end);
    assert!((to_g2 - (0.012 + 1.6e-7)).abs() < 1e-9, "{to_g2}");
}

/// g0 streams 1.25 GB to g2 across the leaves (100 Gb/s: the uplink's rate, a third of g2's
/// 300 Gb/s downlink), with g3 streaming 1.25 GB to g2 beside it or not; once g1's 375 MB to
/// g0 has ended (10 ms), `from` posts 1 kB to g2. The message's end time with a packet wait of
/// 2 ms on the Ethernet links.
fn posted_into_a_link_others_share(from: u32, g3_streams: bool) -> f64 {
    let mut transfers = vec![
        (vec![(0, 2)], 1_250_000_000, vec![]),
        (vec![(1, 0)], 375_000_000, vec![]),
    ];
    if g3_streams {
        transfers.push((vec![(3, 2)], 1_250_000_000, vec![]));
    }
    transfers.push((vec![(from, 2)], 1_000, vec![1]));
    let factors = EfficiencyFactors {
        shaper_packet_wait_secs: vec![(LinkClass::Ethernet, 0.002)],
        ..Default::default()
    };
    let (out, _) = run(&two_leaves(), &schedule(4, &transfers), factors);
    secs(out.ops.last().unwrap().end)
}

#[test]
fn a_message_waits_for_packets_only_where_other_connections_fill_the_link() {
    // g3's message crosses g2's downlink, where g0's stream leaves two thirds of the rate:
    // the shaper is never in debt there, and the message goes at once (1 kB at 200 Gb/s).
    let below_rate = posted_into_a_link_others_share(3, false);
    assert!((below_rate - (0.010 + 4e-8)).abs() < 1e-9, "{below_rate}");
    // g1's crosses the uplink the stream fills (one wait of 2 ms, then 1 kB at 50 Gb/s there),
    // then g2's downlink: nothing more while the stream alone crosses it ...
    let one_wait = posted_into_a_link_others_share(1, false);
    assert!((one_wait - (0.012 + 1.6e-7)).abs() < 1e-9, "{one_wait}");
    // ... but once g3 streams into g2 as well, the two can take all of the downlink (100 Gb/s
    // from the uplink, up to 300 from g3), and the message waits there for g3's packet too.
    let two_waits = posted_into_a_link_others_share(1, true);
    assert!((two_waits - (0.014 + 1.6e-7)).abs() < 1e-9, "{two_waits}");
}

#[test]
fn a_connection_whose_sharer_just_ended_counts_at_the_rate_it_takes_next() {
    // g1 sends g2 125 MB and 1.25 GB at once (50 Gb/s each on the 100 Gb/s star); the first
    // ends at 20 ms and g0 then posts 1 kB to g2. The second stream takes all of g2's downlink
    // from that instant (its rate in force, re-solved only when the instant settles, is still
    // half): the link is full, and the message waits 2 ms for its packet.
    let t = star(3, 100.0 * GBPS, SimTime::ZERO);
    let sched = schedule(
        3,
        &[
            (vec![(1, 2)], 125_000_000, vec![]),
            (vec![(1, 2)], 1_250_000_000, vec![]),
            (vec![(0, 2)], 1_000, vec![0]),
        ],
    );
    let factors = EfficiencyFactors {
        shaper_packet_wait_secs: vec![(LinkClass::Ethernet, 0.002)],
        ..Default::default()
    };
    let (out, _) = run(&t, &sched, factors);
    let end = secs(out.ops[2].end);
    assert!((end - (0.022 + 1.6e-7)).abs() < 1e-9, "{end}");
}

/// g1 streams 250 MB to g2 from the start (20 ms alone at 100 Gb/s) while g0 sends 1.25 GB to
/// g1; once g2's 125 MB to g0 has ended (10 ms), g0 posts 1 kB to g2: it waits behind its own
/// link's standing queue (FIFO head `h` bytes of g0's bulk), then reaches g2's downlink, where
/// g1's stream flows while it lasts. Its end time, with a packet wait of 2 ms.
fn held_at_its_first_link(h: f64) -> f64 {
    let t = star(3, 100.0 * GBPS, SimTime::ZERO);
    let sched = schedule(
        3,
        &[
            (vec![(1, 2)], 250_000_000, vec![]),
            (vec![(0, 1)], 1_250_000_000, vec![]),
            (vec![(2, 0)], 125_000_000, vec![]),
            (vec![(0, 2)], 1_000, vec![2]),
        ],
    );
    let factors = EfficiencyFactors {
        fifo_head: vec![(LinkClass::Ethernet, h)],
        shaper_packet_wait_secs: vec![(LinkClass::Ethernet, 0.002)],
        ..Default::default()
    };
    let (out, _) = run(&t, &sched, factors);
    secs(out.ops[3].end)
}

#[test]
fn a_message_waits_for_the_packets_of_a_link_as_it_reaches_it() {
    // Behind 62.5 MB of its own link's queue (5 ms), the message reaches g2's downlink at 15
    // ms, while g1's stream still flows there (to 20 ms): it waits 2 ms for its packet, then
    // shares g0's link (1 kB at 50 Gb/s).
    let streaming = held_at_its_first_link(62.5e6);
    assert!((streaming - (0.017 + 1.6e-7)).abs() < 1e-9, "{streaming}");
    // Behind 150 MB (12 ms), it reaches the downlink at 22 ms, after the stream's last packet
    // has gone: nothing in service there to wait for, though the stream was sending when the
    // message was posted.
    let after = held_at_its_first_link(150e6);
    assert!((after - (0.022 + 1.6e-7)).abs() < 1e-9, "{after}");
}

/// g0 sends 1.25 GB to `to` on the two leaves, and an op waits for its bytes to have left g0
/// (`Schedule::push_pushed`): (that op's end, the transfer's end), with FIFO heads of `h`.
fn pushed_and_arrived(to: u32, h: Option<f64>) -> (f64, f64) {
    use crate::collective::{OpId, Phase};
    let mut sched = schedule(4, &[(vec![(0, to)], 1_250_000_000, vec![])]);
    sched.push_pushed(OpId(0), Phase::SendRecv, 0);
    let factors = EfficiencyFactors {
        fifo_head: h.map(|h| (LinkClass::Ethernet, h)).into_iter().collect(),
        ..Default::default()
    };
    let (out, _) = run(&two_leaves(), &sched, factors);
    (secs(out.ops[1].end), secs(out.ops[0].end))
}

#[test]
fn a_sender_whose_path_slows_further_on_has_pushed_its_bytes_before_they_arrive() {
    // Across the leaves the uplink (100 Gb/s) holds the flow: 0.1 s to arrive, but g0's
    // 300 Gb/s link lets its bytes out in a third of that, the rest queued at the uplink.
    let (pushed, arrived) = pushed_and_arrived(2, Some(1.0));
    assert!((arrived - 0.1).abs() < 1e-9, "{arrived}");
    assert!((pushed - 0.1 / 3.0).abs() < 1e-9, "{pushed}");
    // Within a leaf nothing slower comes after g0's link: pushed as it is sent.
    let (pushed, arrived) = pushed_and_arrived(1, Some(1.0));
    assert!((pushed - arrived).abs() < 1e-9, "{pushed} {arrived}");
    // A model without FIFO queues keeps no push: pushed once sent.
    let (pushed, arrived) = pushed_and_arrived(2, None);
    assert!((pushed - arrived).abs() < 1e-9, "{pushed} {arrived}");
}

/// On the two leaves, with FIFO heads of 750 MB: g1 streams 1.5 GB to g0 (40 ms alone); at 10
/// ms g1 posts 1 kB to g3, which waits 20 ms behind g1's standing queue before it reaches the
/// uplink; g0 starts 1.25 GB to g2 across the uplink once its `lead_bytes` to g1 have gone (12
/// ms for 450 MB at 300 Gb/s). The message's end time.
fn posted_before_a_connection_starts_forwarding(lead_bytes: u64) -> f64 {
    let sched = schedule(
        4,
        &[
            (vec![(1, 0)], 1_500_000_000, vec![]),
            (vec![(2, 3)], 375_000_000, vec![]),
            (vec![(0, 1)], lead_bytes, vec![]),
            (vec![(1, 3)], 1_000, vec![1]),
            (vec![(0, 2)], 1_250_000_000, vec![2]),
        ],
    );
    let factors = EfficiencyFactors {
        fifo_head: vec![(LinkClass::Ethernet, 0.75e9)],
        ..Default::default()
    };
    let (out, _) = run(&two_leaves(), &sched, factors);
    secs(out.ops[3].end)
}

#[test]
fn a_message_meets_further_on_the_connections_that_started_while_it_waited() {
    // g0's bulk starts at 12 ms, while the message still waits on g1's link, and pushes at
    // 300 Gb/s into the 100 Gb/s uplink: when the message gets there at 30 ms, 18 ms x 200
    // Gb/s = 450 MB stand queued, 36 ms at the uplink's rate; then it shares the uplink with
    // the bulk (1 kB at 50 Gb/s).
    let met = posted_before_a_connection_starts_forwarding(450_000_000);
    assert!((met - (0.066 + 1.6e-7)).abs() < 1e-9, "{met}");
    // Started at 32 ms, after the message reached the uplink: nothing to wait behind there
    // (1 kB alone on the uplink at 100 Gb/s).
    let passed = posted_before_a_connection_starts_forwarding(1_200_000_000);
    assert!((passed - (0.030 + 8e-8)).abs() < 1e-9, "{passed}");
}
