//! The flow model's specification: rates, sharing, FIFO heads, replay, caching, traffic and
//! utilization series.

#![cfg(test)]
use super::*;
use crate::collective::play::{play, PlayOptions};
use crate::collective::Schedule;
use crate::net::factors::FactorRow;

use crate::net::testing::{assert_series_matches_traffic, schedule, OpSpec, GBPS};

/// `n` GPUs on one Ethernet switch, every link `bw` bits/s and `lat` per hop.
fn star(n: u32, bw: f64, lat: SimTime) -> Arc<Topology> {
    crate::net::testing::star(n, bw, lat, 1 << 20, LinkClass::Ethernet)
}

fn run(
    topo: &Arc<Topology>,
    s: &Schedule,
    factors: EfficiencyFactors,
) -> (crate::collective::play::PlayOutcome, Vec<LinkTraffic>) {
    let mut m = FlowModel::new(topo.clone(), factors, 0);
    let eps: Vec<DeviceId> = topo.gpus()[..s.endpoints() as usize].to_vec();
    let out = play(
        s,
        &eps,
        &mut m,
        PlayOptions {
            reduce_bytes_per_s: None,
            shared_cores: None,
        },
    )
    .unwrap();
    let traffic = m.link_traffic();
    (out, traffic)
}

fn secs(t: SimTime) -> f64 {
    t.as_secs_f64()
}

#[test]
fn a_single_flow_takes_size_over_bandwidth_plus_path_latency() {
    // g0 ─1us─ sw ─1us─ g1, 100 Gb/s: 1 GB takes 80 ms + 2 us.
    let t = star(2, 100.0 * GBPS, SimTime::from_us(1));
    let (out, _) = run(
        &t,
        &schedule(2, &[(vec![(0, 1)], 1_000_000_000, vec![])]),
        Default::default(),
    );
    assert_eq!(out.end.as_ps(), 80_000_000_000 + 2_000_000);
}

#[test]
fn rates_are_solved_once_per_instant_however_many_batches_change_in_it() {
    // g0, g1, g2 → g3, one batch each, all over sw → g3 (100 Gb/s): a third each. g1's and
    // g2's 0.5 GB end together at 120 ms; g0's last 0.5 GB then runs alone, ending at
    // 160 ms. Three batches starting at 0 are one solve, two ending at 120 ms another.
    let t = star(4, 100.0 * GBPS, SimTime::ZERO);
    let (out, _) = run(
        &t,
        &schedule(
            4,
            &[
                (vec![(0, 3)], 1_000_000_000, vec![]),
                (vec![(1, 3)], 500_000_000, vec![]),
                (vec![(2, 3)], 500_000_000, vec![]),
            ],
        ),
        Default::default(),
    );
    assert!(
        (secs(out.ops[1].end) - 0.120).abs() < 1e-9,
        "{}",
        out.ops[1].end
    );
    assert_eq!(out.ops[1].end, out.ops[2].end);
    assert!((secs(out.end) - 0.160).abs() < 1e-9, "{}", out.end);
    assert_eq!(out.net.solves, 2);
}

#[test]
fn two_flows_on_one_link_get_half_each() {
    // g0 → g2 and g1 → g2 share sw → g2: each gets 50 Gb/s, so 1 GB each takes 160 ms.
    let t = star(3, 100.0 * GBPS, SimTime::ZERO);
    let (out, traffic) = run(
        &t,
        &schedule(3, &[(vec![(0, 2), (1, 2)], 1_000_000_000, vec![])]),
        Default::default(),
    );
    assert!((secs(out.end) - 0.160).abs() < 1e-9, "{}", out.end);
    // The shared link carried both gigabytes.
    let into_g2 = t
        .out_links(t.find("sw").unwrap())
        .iter()
        .find(|&&l| t.link(l).to == t.find("g2").unwrap())
        .unwrap();
    assert!((traffic[into_g2.index()].bytes - 2e9).abs() < 1.0);
}

#[test]
fn a_flow_that_finishes_early_frees_its_share() {
    // Flows of 0.5 GB and 1 GB into g2: both at 50 Gb/s until the small one ends at 80 ms,
    // then the big one alone at 100 Gb/s for its remaining 0.5 GB: 40 ms more.
    let t = star(3, 100.0 * GBPS, SimTime::ZERO);
    let s = schedule(
        3,
        &[
            (vec![(0, 2)], 500_000_000, vec![]),
            (vec![(1, 2)], 1_000_000_000, vec![]),
        ],
    );
    let (out, _) = run(&t, &s, Default::default());
    assert!((secs(out.ops[0].end) - 0.080).abs() < 1e-9);
    assert!(
        (secs(out.ops[1].end) - 0.120).abs() < 1e-9,
        "{}",
        out.ops[1].end
    );
}

#[test]
fn a_capped_flow_frees_capacity_for_the_others() {
    // Ethernet transfers get 20% of the bandwidth by calibration; one capped batch of two flows
    // into g2 then takes 20 Gb/s each (caps) instead of 50.
    let t = star(3, 100.0 * GBPS, SimTime::ZERO);
    let factors = EfficiencyFactors {
        tables: vec![(
            LinkClass::Ethernet,
            vec![FactorRow {
                min_bytes: 0,
                bandwidth_factor: 0.2,
                latency_factor: 1.0,
            }],
        )],
        ..Default::default()
    };
    let (out, _) = run(
        &t,
        &schedule(3, &[(vec![(0, 2), (1, 2)], 1_000_000_000, vec![])]),
        factors,
    );
    assert!((secs(out.end) - 0.400).abs() < 1e-9, "{}", out.end);
}

#[test]
fn gpus_without_p2p_behind_one_switch_share_its_uplink_only_when_both_directions_send() {
    // g0, g1 ─ sw ═ host, every link 100 Gb/s, no P2P: g0 → g1 goes g0 → sw → host → sw →
    // g1. Alone it has the uplink each way to itself: 1 GB in 80 ms. A 2-GPU ring step
    // (g0 → g1 and g1 → g0 at once) puts both flows on sw → host and on host → sw: 50 Gb/s
    // each, 160 ms, though every GPU's own link carries one flow each way.
    use crate::topology::generators::{LinkParams, PcieBox};
    let pcie = LinkParams {
        bandwidth: crate::units::Bandwidth(100.0 * GBPS),
        latency: Default::default(),
        buffer: None,
        class: LinkClass::Pcie,
    };
    let generator = PcieBox {
        gpus: 2,
        pcie: pcie.clone(),
        switch_uplink: Some(pcie),
        p2p: false,
    };
    let t = Arc::new(generator.build("box").unwrap());
    let (one_way, traffic) = run(
        &t,
        &schedule(2, &[(vec![(0, 1)], 1_000_000_000, vec![])]),
        Default::default(),
    );
    assert!((secs(one_way.end) - 0.080).abs() < 1e-9, "{}", one_way.end);
    let crossed = traffic.iter().filter(|l| l.bytes > 0.0).count();
    assert_eq!(
        crossed, 4,
        "up and down its own link, up and down the uplink"
    );
    let (both_ways, _) = run(
        &t,
        &schedule(2, &[(vec![(0, 1), (1, 0)], 1_000_000_000, vec![])]),
        Default::default(),
    );
    assert!(
        (secs(both_ways.end) - 0.160).abs() < 1e-9,
        "{}",
        both_ways.end
    );
}

#[test]
fn a_link_efficiency_is_shared_by_the_flows_on_the_link() {
    // 8 Gbit of payload into g2 over its 100 Gb/s link: a link efficiency of 0.8 leaves 80
    // Gb/s of payload for the two flows together (0.1 s), where the same number as a
    // bandwidth factor caps each flow at 80 and the pair still fills the link (0.08 s).
    let t = star(3, 100.0 * GBPS, SimTime::ZERO);
    let sched = schedule(3, &[(vec![(0, 2), (1, 2)], 500_000_000, vec![])]);
    let shared = EfficiencyFactors {
        link: vec![(LinkClass::Ethernet, 0.8)],
        ..Default::default()
    };
    let (out, _) = run(&t, &sched, shared);
    assert!((secs(out.end) - 0.100).abs() < 1e-9, "{}", out.end);
    let per_flow = EfficiencyFactors {
        tables: vec![(
            LinkClass::Ethernet,
            vec![FactorRow {
                min_bytes: 0,
                bandwidth_factor: 0.8,
                latency_factor: 1.0,
            }],
        )],
        ..Default::default()
    };
    let (out, _) = run(&t, &sched, per_flow);
    assert!((secs(out.end) - 0.080).abs() < 1e-9, "{}", out.end);
}

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

#[test]
fn dependent_ops_run_back_to_back_and_repeated_states_reuse_solutions() {
    // A ring step pattern played 6 times in a chain: 6 × (size/B + 2 hops latency).
    let t = star(4, 100.0 * GBPS, SimTime::from_us(1));
    let ring: Vec<(u32, u32)> = (0..4).map(|i| (i, (i + 1) % 4)).collect();
    let ops: Vec<_> = (0..6)
        .map(|k| {
            (
                ring.clone(),
                1_000_000,
                if k == 0 { vec![] } else { vec![k - 1] },
            )
        })
        .collect();
    let (out, _) = run(&t, &schedule(4, &ops), Default::default());
    let step_ps = 80_000_000 + 2_000_000;
    assert_eq!(out.end.as_ps(), 6 * step_ps);
    assert_eq!(out.net.solves, 1);
    assert_eq!(
        out.net.replays, 5,
        "steps 2..6 replay the first step's trajectory"
    );
}

#[test]
fn bytes_are_conserved_on_every_hop() {
    // Sum over links of carried bytes = bytes × hops for every flow.
    let t = star(5, 40.0 * GBPS, SimTime::from_ns(300));
    let s = schedule(
        5,
        &[
            (
                vec![(0, 1), (1, 2), (2, 3), (3, 4), (4, 0)],
                3_000_000,
                vec![],
            ),
            (vec![(0, 4), (2, 4)], 7_000_000, vec![]),
            (vec![(3, 1)], 5_000_000, vec![0]),
        ],
    );
    let (_, traffic) = run(&t, &s, Default::default());
    let total: f64 = traffic.iter().map(|l| l.bytes).sum();
    let expected = 2.0 * (5.0 * 3e6 + 2.0 * 7e6 + 5e6);
    assert!(
        (total - expected).abs() / expected < 1e-9,
        "{total} vs {expected}"
    );
}

#[test]
fn a_replay_interrupted_by_a_new_batch_continues_exactly_as_a_simulated_one() {
    // A: three ring steps over g0..g3 (the second and third replay the first). C: a small
    // transfer g4 → g5 elsewhere that ends during A's second step. B: starts when C ends,
    // g0 → g2, sharing g0's uplink and g2's downlink with A: A's replay must be rebuilt at
    // that moment and shared from then on.
    let t = star(6, 100.0 * GBPS, SimTime::from_us(1));
    let ring: Vec<(u32, u32)> = (0..4).map(|i| (i, (i + 1) % 4)).collect();
    let s = schedule(
        6,
        &[
            (ring.clone(), 4_000_000, vec![]),
            (ring.clone(), 4_000_000, vec![0]),
            (ring, 4_000_000, vec![1]),
            (vec![(4, 5)], 6_000_000, vec![]),
            (vec![(0, 2)], 3_000_000, vec![3]),
        ],
    );
    let eps: Vec<DeviceId> = t.gpus().to_vec();
    let mut with = FlowModel::new(t.clone(), Default::default(), 0);
    let a = play(
        &s,
        &eps,
        &mut with,
        PlayOptions {
            reduce_bytes_per_s: None,
            shared_cores: None,
        },
    )
    .unwrap();
    let mut without = FlowModel::new(t.clone(), Default::default(), 0).without_replay();
    let b = play(
        &s,
        &eps,
        &mut without,
        PlayOptions {
            reduce_bytes_per_s: None,
            shared_cores: None,
        },
    )
    .unwrap();
    assert!(
        a.ops[3].end > a.ops[1].start && a.ops[3].end < a.ops[1].end,
        "C ends inside A's second step"
    );
    assert_eq!(a.ops, b.ops, "same op times with and without replay");
    let (la, lb) = (with.link_traffic(), without.link_traffic());
    for (x, y) in la.iter().zip(&lb) {
        assert!(
            (x.bytes - y.bytes).abs() <= 1e-6 * y.bytes.max(1.0),
            "{} vs {}",
            x.bytes,
            y.bytes
        );
    }
    assert_eq!(
        (a.net.replays, a.net.replays_interrupted),
        (1, 1),
        "A's second step replayed, then was interrupted"
    );
    assert_eq!(b.net.replays, 0);
    // B slowed A down: the shared step took longer than the unshared first one.
    let step = |o: &crate::collective::play::PlayOutcome, i: usize| {
        o.ops[i].end.as_ps() - o.ops[i].start.as_ps()
    };
    assert!(step(&a, 1) > step(&a, 0));
}

#[test]
fn a_recording_past_its_memory_bound_is_given_up_and_the_batch_simulated_again() {
    // g0 sends to g1, g2, g3 while g4 sends to g1: g0's uplink gives its three flows a third
    // each, g4 → g1 takes the rest of g1's downlink and finishes first; then the three share
    // g0's uplink alone. Two solutions of 4 rates: the recording holds 8 rates. The same op
    // again, after the first, replays the recording if it was kept; past the bound it is
    // simulated again, at the same times.
    let t = star(5, 100.0 * GBPS, SimTime::from_us(1));
    let pairs = vec![(0, 1), (0, 2), (0, 3), (4, 1)];
    let s = schedule(
        5,
        &[
            (pairs.clone(), 10_000_000, vec![]),
            (pairs, 10_000_000, vec![0]),
        ],
    );
    let eps: Vec<DeviceId> = t.gpus().to_vec();
    let play_with = |m: &mut FlowModel| {
        play(
            &s,
            &eps,
            m,
            PlayOptions {
                reduce_bytes_per_s: None,
                shared_cores: None,
            },
        )
        .unwrap()
    };
    let kept = play_with(&mut FlowModel::new(t.clone(), Default::default(), 0));
    assert_eq!(kept.net.solves, 2, "two solutions, then replayed");
    assert_eq!(kept.net.replays, 1);
    let over = play_with(
        &mut FlowModel::new(t.clone(), Default::default(), 0).with_replay_bounds(7, 1 << 20),
    );
    assert_eq!(over.net.replays, 0, "8 rates are past a bound of 7");
    assert_eq!(
        over.ops, kept.ops,
        "the same op times, simulated instead of replayed"
    );
    let within = play_with(
        &mut FlowModel::new(t.clone(), Default::default(), 0).with_replay_bounds(8, 1 << 20),
    );
    assert_eq!(within.net.replays, 1, "8 rates are within a bound of 8");
    let none_kept = play_with(
        &mut FlowModel::new(t.clone(), Default::default(), 0).with_replay_bounds(1 << 20, 7),
    );
    assert_eq!(
        none_kept.net.replays, 0,
        "no room among the kept trajectories for its 8 rates"
    );
    assert_eq!(none_kept.ops, kept.ops);
}

/// Ring steps (replayed), a contending batch and a dependent one, with latency.
fn mixed_schedule() -> Schedule {
    let ring: Vec<(u32, u32)> = (0..4).map(|i| (i, (i + 1) % 4)).collect();
    schedule(
        6,
        &[
            (ring.clone(), 4_000_000, vec![]),
            (ring.clone(), 4_000_000, vec![0]),
            (ring, 4_000_000, vec![1]),
            (vec![(4, 5)], 6_000_000, vec![]),
            (vec![(0, 2), (5, 2)], 3_000_000, vec![3]),
        ],
    )
}

fn play_series(
    m: &mut FlowModel,
    t: &Arc<Topology>,
    s: &Schedule,
    bins: usize,
) -> (SimTime, LinkSeries, Vec<LinkTraffic>) {
    let eps: Vec<DeviceId> = t.gpus()[..s.endpoints() as usize].to_vec();
    let out = play(
        s,
        &eps,
        m,
        PlayOptions {
            reduce_bytes_per_s: None,
            shared_cores: None,
        },
    )
    .unwrap();
    let options = SeriesOptions {
        bins,
        top_links: 64,
    };
    let series = m.link_series(out.end, options).unwrap();
    (out.end, series, m.link_traffic())
}

#[test]
fn the_utilization_series_integrates_to_every_links_bytes_and_never_exceeds_one() {
    let t = star(6, 100.0 * GBPS, SimTime::from_us(1));
    let mut m = FlowModel::new(t.clone(), Default::default(), 0);
    let (_, series, traffic) = play_series(&mut m, &t, &mixed_schedule(), 200);
    assert!(m.counters.replays > 0, "the replay path is covered");
    assert_eq!(series.bins(), 200);
    let used = traffic.iter().filter(|l| l.bytes > 0.0).count();
    assert_eq!(
        series.links.len(),
        used,
        "every used link is among the top 64"
    );
    assert_series_matches_traffic(&t, &series, &traffic, 1e-6);
    // The bottleneck into g2 is full at some point.
    assert!(series
        .links
        .iter()
        .any(|e| e.utilization.iter().any(|&u| u > 0.99)));
}

#[test]
fn a_coarsened_log_still_integrates_to_every_links_bytes() {
    let t = star(6, 100.0 * GBPS, SimTime::from_us(1));
    // 40 chained ring steps, then a contending pair: many more intervals than 32.
    let ring: Vec<(u32, u32)> = (0..4).map(|i| (i, (i + 1) % 4)).collect();
    let mut ops: Vec<OpSpec> = (0..40)
        .map(|k| {
            (
                ring.clone(),
                1_000_000 + 1000 * k as u64,
                if k == 0 { vec![] } else { vec![k - 1] },
            )
        })
        .collect();
    ops.push((vec![(4, 5)], 6_000_000, vec![]));
    ops.push((vec![(0, 2), (5, 2)], 3_000_000, vec![40]));
    let mut m = FlowModel::new(t.clone(), Default::default(), 0)
        .without_replay()
        .with_series_log_limit(32);
    let (_, series, traffic) = play_series(&mut m, &t, &schedule(6, &ops), 50);
    assert!(m.series_log.slot_ps() > 0, "the log was coarsened");
    assert_series_matches_traffic(&t, &series, &traffic, 1e-6);
}

#[test]
fn only_the_busiest_links_are_kept() {
    let t = star(6, 100.0 * GBPS, SimTime::from_us(1));
    let mut m = FlowModel::new(t.clone(), Default::default(), 0);
    let eps: Vec<DeviceId> = t.gpus().to_vec();
    let out = play(
        &mixed_schedule(),
        &eps,
        &mut m,
        PlayOptions {
            reduce_bytes_per_s: None,
            shared_cores: None,
        },
    )
    .unwrap();
    let series = m
        .link_series(
            out.end,
            SeriesOptions {
                bins: 10,
                top_links: 3,
            },
        )
        .unwrap();
    let traffic = m.link_traffic();
    assert_eq!(series.links.len(), 3);
    let least_kept = series
        .links
        .iter()
        .map(|e| traffic[e.link as usize].bytes)
        .fold(f64::INFINITY, f64::min);
    let most_left = (0..traffic.len())
        .filter(|l| !series.links.iter().any(|e| e.link as usize == *l))
        .map(|l| traffic[l].bytes)
        .fold(0.0, f64::max);
    assert!(least_kept >= most_left, "{least_kept} vs {most_left}");
}

#[test]
fn a_two_phase_schedule_moves_the_load_from_one_link_to_another_when_the_phase_changes() {
    // Phase 1: g0 → g1 (1 GB at 100 Gb/s: 0–80 ms); phase 2, after it: g2 → g0 (80–160 ms).
    let t = star(3, 100.0 * GBPS, SimTime::ZERO);
    let s = schedule(
        3,
        &[
            (vec![(0, 1)], 1_000_000_000, vec![]),
            (vec![(2, 0)], 1_000_000_000, vec![0]),
        ],
    );
    let mut m = FlowModel::new(t.clone(), Default::default(), 0);
    let (end, series, _) = play_series(&mut m, &t, &s, 16);
    assert_eq!(end.as_ps(), 160_000_000_000);
    let link = |from: &str, to: &str| {
        let (a, b) = (t.find(from).unwrap(), t.find(to).unwrap());
        let l = t
            .out_links(a)
            .iter()
            .find(|&&l| t.link(l).to == b)
            .unwrap()
            .index() as u32;
        series.links.iter().find(|e| e.link == l).unwrap()
    };
    let (first, second) = (link("sw", "g1"), link("sw", "g0"));
    for i in 0..16 {
        let (a, b) = if i < 8 { (1.0, 0.0) } else { (0.0, 1.0) };
        assert!(
            (first.utilization[i] - a).abs() < 1e-9,
            "bin {i}: {:?}",
            first.utilization
        );
        assert!(
            (second.utilization[i] - b).abs() < 1e-9,
            "bin {i}: {:?}",
            second.utilization
        );
    }
}

/// Shapers with buckets of `burst_secs` on every link of a 3-GPU star of 8 Gbit/s (1 GB/s)
/// links with 1 us hops: the end of every op, in seconds.
fn with_buckets(burst_secs: f64, ops: &[OpSpec]) -> (Vec<f64>, Vec<LinkTraffic>) {
    let t = star(3, 8e9, SimTime::from_us(1));
    let factors = EfficiencyFactors {
        shaper_burst_secs: vec![(LinkClass::Ethernet, burst_secs)],
        ..Default::default()
    };
    let (out, traffic) = run(&t, &schedule(3, ops), factors);
    (out.ops.iter().map(|o| secs(o.end)).collect(), traffic)
}

#[test]
fn a_transfer_from_idle_links_sends_the_shapers_bucket_at_once() {
    // 3 MB over two links with 1 ms (1 MB) buckets: the first MB leaves at once, the other
    // two take 2 ms; without buckets 3 ms. Every byte still counts on both links.
    let ops = [(vec![(0, 1)], 3_000_000, vec![])];
    let (ends, traffic) = with_buckets(1e-3, &ops);
    assert!((ends[0] - (2e-3 + 2e-6)).abs() < 1e-9, "{ends:?}");
    let (plain, _) = with_buckets(0.0, &ops);
    assert!((plain[0] - (3e-3 + 2e-6)).abs() < 1e-9, "{plain:?}");
    let carried: Vec<f64> = traffic
        .iter()
        .map(|t| t.bytes)
        .filter(|&b| b > 0.0)
        .collect();
    assert_eq!(carried.len(), 2);
    assert!(
        carried.iter().all(|b| (b - 3e6).abs() < 1e-3),
        "{carried:?}"
    );
}

#[test]
fn flows_starting_together_share_a_links_bucket() {
    // Two senders into gpu2: its link's 1 MB of tokens is shared, 0.5 MB each (their own
    // links have 1 MB each, more than that); the other 3 MB share 1 GB/s: 3 ms, not 4.
    let ops = [(vec![(0, 2), (1, 2)], 2_000_000, vec![])];
    let (ends, _) = with_buckets(1e-3, &ops);
    assert!((ends[0] - (3e-3 + 2e-6)).abs() < 1e-9, "{ends:?}");
}

#[test]
fn a_link_that_just_carried_traffic_has_no_tokens_and_refills_at_its_rate() {
    // The second 3 MB starts when the first has been delivered: its links were idle only for
    // the path latency (2 us: 2 kB of tokens), so it takes 3 ms less 2 us. The first got the
    // whole 1 MB.
    let ops = [
        (vec![(0, 1)], 3_000_000, vec![]),
        (vec![(0, 1)], 3_000_000, vec![0]),
    ];
    let (ends, _) = with_buckets(1e-3, &ops);
    let second = ends[1] - ends[0];
    assert!((second - (3e-3 - 2e-6 + 2e-6)).abs() < 1e-9, "{ends:?}");
}

#[test]
fn a_small_message_takes_only_its_bytes_of_the_bucket() {
    // A 40-byte request from idle links, then 3 MB once it is delivered (2 us later): the
    // request took 40 bytes of each link's 1 MB, refilled long before the data starts, which
    // leaves with the whole 1 MB: as if no request had gone.
    let ops = [
        (vec![(0, 1)], 40, vec![]),
        (vec![(0, 1)], 3_000_000, vec![0]),
    ];
    let (ends, _) = with_buckets(1e-3, &ops);
    let data = ends[1] - ends[0];
    let expected = (3_000_000.0 - 1_000_000.0) / 1e9 + 2e-6;
    assert!((data - expected).abs() < 1e-9, "{ends:?}");
}

#[test]
fn flows_take_what_they_send_of_a_shared_bucket_and_the_rest_goes_to_the_others() {
    // Into gpu2 at the same instant, as two ops: 100 kB from gpu0 and 3 MB from gpu1. The
    // small one takes its 100 kB of gpu2's 1 MB, the large one the other 900 kB (an even
    // split would give it 500 kB, and the link being busy none). The rest, 2.1 MB, then
    // takes 2.1 ms at 1 GB/s.
    let ops = [
        (vec![(0, 2)], 100_000, vec![]),
        (vec![(1, 2)], 3_000_000, vec![]),
    ];
    let (ends, _) = with_buckets(1e-3, &ops);
    assert!((ends[1] - (2.1e-3 + 2e-6)).abs() < 1e-9, "{ends:?}");
}

#[test]
fn the_memory_estimate_follows_the_pairs_routed_not_every_ops_flows() {
    // A 65,536-GPU ring all-reduce: 131,070 ops of one 65,536-pair pattern, 8.6 G flows; it
    // ran in 676 MB. Counted at 8 bytes per flow of every op it was refused as 69 GB.
    let m = FlowModel::new(star(2, 100.0 * GBPS, SimTime::ZERO), Default::default(), 0);
    let ring = crate::net::FlowLoad {
        flows: 8_589_803_520,
        routed_pairs: 65_536,
        solution_rates: u64::MAX,
    };
    let bytes = m.estimate_flow_bytes(&ring);
    assert!(bytes < 1_000_000_000, "{bytes}");
    // A direct all-to-all of 2,048 GPUs, one op of 4.19 M pairs: 1.4 GB resident.
    let a2a = crate::net::FlowLoad {
        flows: 4_192_256,
        routed_pairs: 4_192_256,
        solution_rates: 4_192_256u64 * 4_192_256,
    };
    let bytes = m.estimate_flow_bytes(&a2a);
    assert!(bytes > 1_400_000_000 - 42_000_000, "{bytes}");
}
