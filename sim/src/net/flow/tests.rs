//! The flow model's specification: rates, sharing, replay, caching, traffic and utilization
//! series (the FIFO queues' is in `fifo/tests.rs`).

#![cfg(test)]
use super::*;
use crate::collective::play::{play, PlayOptions};
use crate::collective::Schedule;
use crate::net::factors::FactorRow;

use crate::net::testing::{assert_series_matches_traffic, schedule, OpSpec, GBPS};

/// `n` GPUs on one Ethernet switch, every link `bw` bits/s and `lat` per hop.
pub(super) fn star(n: u32, bw: f64, lat: SimTime) -> Arc<Topology> {
    crate::net::testing::star(n, bw, lat, 1 << 20, LinkClass::Ethernet)
}

pub(super) fn run(
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

pub(super) fn secs(t: SimTime) -> f64 {
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
    with_shapers(
        EfficiencyFactors {
            shaper_burst_secs: vec![(LinkClass::Ethernet, burst_secs)],
            ..Default::default()
        },
        ops,
    )
}

/// As [`with_buckets`], with the shapers (and queues) `factors` gives.
fn with_shapers(factors: EfficiencyFactors, ops: &[OpSpec]) -> (Vec<f64>, Vec<LinkTraffic>) {
    let t = star(3, 8e9, SimTime::from_us(1));
    let (out, traffic) = run(&t, &schedule(3, ops), factors);
    (out.ops.iter().map(|o| secs(o.end)).collect(), traffic)
}

/// Buckets of 1 ms (1 MB) whose shapers pass messages of up to 1.5 MB whole, and FIFO
/// heads of `fifo_head_bytes` (0: none).
fn one_packet_shapers(fifo_head_bytes: f64) -> EfficiencyFactors {
    EfficiencyFactors {
        shaper_burst_secs: vec![(LinkClass::Ethernet, 1e-3)],
        shaper_packet_bytes: vec![(LinkClass::Ethernet, 1.5e6)],
        fifo_head: vec![(LinkClass::Ethernet, fifo_head_bytes)],
        ..Default::default()
    }
}

#[test]
fn a_message_of_one_packet_passes_whole_and_the_links_next_message_waits_out_its_debt() {
    // 1.2 MB from full 1 MB buckets: one packet, so it leaves whole (delivered after the two
    // hops' 2 us) and leaves its links 0.2 MB in debt. The 40-byte answer that follows on
    // the same links waits until they are paid (0.2 ms less the 2 us they refilled), then
    // passes. Without the packet rule the 1.2 MB streams its last 0.2 MB at the rate and
    // the answer passes at once.
    let ops = [
        (vec![(0, 1)], 1_200_000, vec![]),
        (vec![(0, 1)], 40, vec![0]),
    ];
    let (ends, _) = with_shapers(one_packet_shapers(0.0), &ops);
    assert!((ends[0] - 2e-6).abs() < 1e-9, "{ends:?}");
    assert!((ends[1] - (0.2e-3 + 2e-6)).abs() < 1e-9, "{ends:?}");
    let (plain, _) = with_buckets(1e-3, &ops);
    assert!((plain[0] - (0.2e-3 + 2e-6)).abs() < 1e-9, "{plain:?}");
    assert!((plain[1] - (0.2e-3 + 4e-6)).abs() < 1e-9, "{plain:?}");
}

#[test]
fn with_tcp_windows_a_message_passes_whole_only_once_its_connection_has_grown_a_window_for_it() {
    // The same 1.2 MB twice on one connection, the second once the first arrived. A new
    // connection's window is 10 segments, so the first streams as a message beyond a packet
    // does (the 1 MB bucket at once, 0.2 MB at the rate); slow start grows the window by what
    // it sent, and the second passes whole (2 us after it is posted).
    let ops = [
        (vec![(0, 1)], 1_200_000, vec![]),
        (vec![(0, 1)], 1_200_000, vec![0]),
    ];
    let factors = EfficiencyFactors {
        tcp_windows: true,
        ..one_packet_shapers(0.0)
    };
    let (ends, _) = with_shapers(factors, &ops);
    assert!((ends[0] - (0.2e-3 + 2e-6)).abs() < 1e-9, "{ends:?}");
    assert!((ends[1] - (ends[0] + 2e-6)).abs() < 1e-9, "{ends:?}");
    // Without windows the first passes whole and the second waits out its debt.
    let (plain, _) = with_shapers(one_packet_shapers(0.0), &ops);
    assert!((plain[0] - 2e-6).abs() < 1e-9, "{plain:?}");
    assert!(plain[1] > plain[0] + 0.15e-3, "{plain:?}");
}

#[test]
fn a_message_larger_than_a_packet_streams_from_the_bucket_as_before() {
    let ops = [(vec![(0, 1)], 1_600_000, vec![])];
    let (ends, _) = with_shapers(one_packet_shapers(0.0), &ops);
    assert!((ends[0] - (0.6e-3 + 2e-6)).abs() < 1e-9, "{ends:?}");
}

#[test]
fn of_messages_starting_together_on_a_link_the_second_passes_whole_once_the_first_is_paid() {
    // gpu0 sends 1.2 MB to gpu1 and to gpu2 at the same instant, as two messages: the first
    // passes whole and puts gpu0's link 0.2 MB in debt; the second waits that out (0.2 ms),
    // then passes whole in turn. Flows of one batch instead start together: one passes whole
    // and the other streams from what the link has left (none), 1.2 ms at the rate.
    let apart = [
        (vec![(0, 1)], 1_200_000, vec![]),
        (vec![(0, 2)], 1_200_000, vec![]),
    ];
    let (ends, _) = with_shapers(one_packet_shapers(0.0), &apart);
    assert!((ends[0] - 2e-6).abs() < 1e-9, "{ends:?}");
    assert!((ends[1] - (0.2e-3 + 2e-6)).abs() < 1e-9, "{ends:?}");
    let together = [(vec![(0, 1), (0, 2)], 1_200_000, vec![])];
    let (ends, _) = with_shapers(one_packet_shapers(0.0), &together);
    assert!((ends[0] - (1.2e-3 + 2e-6)).abs() < 1e-9, "{ends:?}");
}

#[test]
fn a_message_waiting_out_a_debt_is_queued_ahead_of_sends_posted_after_it() {
    // gpu0's 1.2 MB to gpu1 passes whole; its 1.2 MB to gpu2, posted once that arrived, waits
    // out the debt (0.2 ms) in gpu0's queue. A 40-byte message gpu0 posts 2 us later (after
    // gpu1's answer) finds it queued there: it waits behind it and behind the debt it leaves
    // (1.2 ms), not only for the first debt.
    let ops = [
        (vec![(0, 1)], 1_200_000, vec![]),
        (vec![(0, 2)], 1_200_000, vec![0]),
        (vec![(1, 2)], 40, vec![0]),
        (vec![(0, 1)], 40, vec![2]),
    ];
    let (ends, _) = with_shapers(one_packet_shapers(100_000.0), &ops);
    assert!((ends[1] - (0.2e-3 + 2e-6)).abs() < 1e-9, "{ends:?}");
    assert!(ends[3] >= ends[1] + 1.2e-3 - 1e-9, "{ends:?}");
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

#[test]
fn a_message_posted_with_one_that_waits_out_a_debt_counts_it_once() {
    // 1.01 MB passes whole (10 kB of debt). Once it arrived gpu0 posts 1.2 MB to gpu2, which
    // waits out the rest of that debt, and 40 bytes to gpu1 at the same instant, behind it in
    // gpu0's queue (its FIFO head covers all 1.2 MB): the 40 bytes wait for the 1.2 MB's bytes
    // once (1.2 ms, by which its debt is paid too), not once as posted together and again as
    // waiting.
    let ops = [
        (vec![(0, 1)], 1_010_000, vec![]),
        (vec![(0, 2)], 1_200_000, vec![0]),
        (vec![(0, 1)], 40, vec![0]),
    ];
    let (ends, _) = with_shapers(one_packet_shapers(10e6), &ops);
    assert!((ends[1] - (10e-6 + 2e-6)).abs() < 1e-9, "{ends:?}");
    let debt_paid = ends[1] - 2e-6 + 1.2e-3;
    assert!((ends[2] - (debt_paid + 2e-6)).abs() < 1e-8, "{ends:?}");
}

#[test]
fn messages_waiting_out_one_debt_pass_in_the_order_posted() {
    // 1.2 MB passes whole (0.2 ms of debt on gpu0's link). Once it arrived gpu0 posts 40
    // bytes to gpu2; 2 us later (after gpu2's answer to it) another 1.2 MB to gpu1. Both
    // wait out the debt; the 40 bytes, posted first, pass first, and the 1.2 MB after them
    // (it waits their 40 bytes' debt, 0.04 us), not the other way round, which would hold the
    // 40 bytes another 1.2 ms.
    let ops = [
        (vec![(0, 1)], 1_200_000, vec![]),
        (vec![(0, 2)], 40, vec![0]),
        (vec![(2, 0)], 40, vec![0]),
        (vec![(0, 1)], 1_200_000, vec![2]),
    ];
    let (ends, _) = with_shapers(one_packet_shapers(0.0), &ops);
    assert!((ends[1] - (0.2e-3 + 2e-6)).abs() < 1e-9, "{ends:?}");
    assert!(
        (ends[3] - (0.2e-3 + 0.04e-6 + 2e-6)).abs() < 1e-9,
        "{ends:?}"
    );
}

#[test]
fn a_message_waiting_at_a_later_link_is_not_held_by_a_debt_left_behind_it() {
    // gpu2's 1.2 MB to gpu1 passes whole: gpu1's downlink owes 0.2 MB (paid at 0.2 ms). gpu0's
    // 40 bytes to gpu1, posted next, pass gpu0's idle uplink and wait at gpu1's downlink.
    // gpu0's 1.5 MB to gpu2, posted after them, passes whole and leaves gpu0's uplink 0.5 MB
    // in debt: behind the 40 bytes, which left that link before it, so they go at 0.2 ms and
    // not at 0.5 (what waiting until every link of the path is out of debt at once gives).
    let ops = [
        (vec![(2, 1)], 1_200_000, vec![]),
        (vec![(0, 1)], 40, vec![]),
        (vec![(0, 2)], 1_500_000, vec![]),
    ];
    let (ends, _) = with_shapers(one_packet_shapers(0.0), &ops);
    assert!((ends[0] - 2e-6).abs() < 1e-9, "{ends:?}");
    assert!((ends[2] - 2e-6).abs() < 1e-9, "{ends:?}");
    assert!((ends[1] - (0.2e-3 + 2e-6)).abs() < 1e-9, "{ends:?}");
}
