#![cfg(test)]

use super::*;
use crate::collective::play::{play, PlayOptions, PlayOutcome};
use crate::collective::{OpId, OpKind, Phase, Schedule};

use crate::net::testing::{assert_series_matches_traffic, schedule, star, GBPS};

fn run(topo: &Arc<Topology>, s: &Schedule, config: PacketConfig) -> (PlayOutcome, PortReport) {
    let mut m = PacketModel::new(topo.clone(), config, 0).unwrap();
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
    let report = m.port_stats().unwrap();
    (out, report)
}

fn port(t: &Topology, from: &str, to: &str) -> usize {
    let (a, b) = (t.find(from).unwrap(), t.find(to).unwrap());
    t.out_links(a)
        .iter()
        .find(|&&l| t.link(l).to == b)
        .unwrap()
        .index()
}

#[test]
fn a_single_flow_takes_size_over_bandwidth_plus_hops_latency_plus_store_and_forward() {
    // g0 → sw → g1 at 100 Gb/s, 1 us per hop, 1500 B packets: 1.5 MB takes
    // 120 us + 2 us + one packet's 120 ns at the switch.
    let t = star(
        2,
        100.0 * GBPS,
        SimTime::from_us(1),
        1 << 20,
        LinkClass::Ethernet,
    );
    let (out, ports) = run(
        &t,
        &schedule(2, &[(vec![(0, 1)], 1_500_000, vec![])]),
        PacketConfig::default(),
    );
    assert_eq!(out.end.as_ps(), 120_000_000 + 2_000_000 + 120_000);
    assert_eq!(ports.packets, 1000);
    assert_eq!(ports.packet_hops, 2000);
}

#[test]
fn the_last_packet_is_the_remainder_and_an_empty_transfer_takes_the_latency() {
    // 1600 B = 1500 + 100: 128 ns at the source; the 100 B packet then waits at the switch
    // behind the first one, so the end is still size/B + 2 latencies + one full packet.
    let t = star(
        2,
        100.0 * GBPS,
        SimTime::from_us(1),
        1 << 20,
        LinkClass::Ethernet,
    );
    let (out, _) = run(
        &t,
        &schedule(
            2,
            &[(vec![(0, 1)], 1600, vec![]), (vec![(0, 1)], 0, vec![0])],
        ),
        PacketConfig::default(),
    );
    assert_eq!(out.ops[0].end.as_ps(), 128_000 + 2_000_000 + 120_000);
    assert_eq!(out.ops[1].end.as_ps() - out.ops[1].start.as_ps(), 2_000_000);
}

#[test]
fn two_flows_into_one_port_get_half_each() {
    // g0 → g2 and g1 → g2 share sw → g2: 2 × 1.5 MB at 100 Gb/s ≈ 240 us. The queue at
    // the switch grows to 1.5 MB, within its 4 MiB.
    let t = star(3, 100.0 * GBPS, SimTime::ZERO, 4 << 20, LinkClass::Ethernet);
    let (out, ports) = run(
        &t,
        &schedule(3, &[(vec![(0, 2), (1, 2)], 1_500_000, vec![])]),
        PacketConfig::default(),
    );
    let secs = out.end.as_secs_f64();
    assert!((secs - 240e-6).abs() / 240e-6 < 1e-3, "{secs}");
    // The switch port queued packets from both senders but never dropped or paused.
    let p = &ports.ports[port(&t, "sw", "g2")];
    assert!(p.max_occupancy_bytes > 1500);
    assert_eq!((p.drops, p.pause_events), (0, 0));
}

/// 7 senders into g7 of an 8-GPU star at 100 Gb/s: the star (switch ports of `buffer` bytes)
/// and 1 MB from each sender at once.
fn incast(buffer: u64) -> (Arc<Topology>, Schedule) {
    let t = star(
        8,
        100.0 * GBPS,
        SimTime::from_ns(500),
        buffer,
        LinkClass::Ethernet,
    );
    let pairs: Vec<(u32, u32)> = (0..7).map(|i| (i, 7)).collect();
    (t, schedule(8, &[(pairs, 1_000_000, vec![])]))
}

#[test]
fn lossless_incast_pauses_senders_and_never_drops_or_overflows() {
    // 7 senders into g7 through a 64 KiB switch port.
    let (t, s) = incast(64 << 10);
    let (out, ports) = run(&t, &s, PacketConfig::default());
    let p = &ports.ports[port(&t, "sw", "g7")];
    assert!(p.pause_events > 0 && p.paused_ps > 0);
    assert!(p.max_occupancy_bytes <= p.capacity_bytes);
    assert!(ports.ports.iter().all(|p| p.drops == 0));
    let blocked: u64 = (0..7)
        .map(|i| ports.ports[port(&t, &format!("g{i}"), "sw")].blocked_ps)
        .sum();
    assert!(blocked > 0, "senders were held back");
    // Still the port's full rate: 7 MB at 100 Gb/s = 560 us, plus a little.
    let secs = out.end.as_secs_f64();
    assert!(secs > 560e-6 && secs < 570e-6, "{secs}");
    let fill = p.fill.as_ref().unwrap();
    assert_eq!(fill.causes.len(), 7, "{fill:?}");
    assert_eq!(ports.deadlocks_broken, 0);
}

#[test]
fn lossy_incast_drops_and_retransmits_until_everything_arrives() {
    let (t, s) = incast(64 << 10);
    let config = PacketConfig {
        mode: SwitchMode::Lossy,
        retransmit_timeout: SimTime::from_us(20),
        ..Default::default()
    };
    let (out, ports) = run(&t, &s, config);
    let p = &ports.ports[port(&t, "sw", "g7")];
    assert!(p.drops > 0);
    assert_eq!(p.retransmitted_bytes, p.dropped_bytes);
    assert!(p.max_occupancy_bytes <= p.capacity_bytes);
    assert_eq!(p.pause_events, 0);
    // Every byte arrived exactly once: the port into g7 carried 7 MB.
    assert_eq!(
        ports.ports[port(&t, "sw", "g7")].packets,
        7 * 1_000_000u64.div_ceil(1500)
    );
    assert!(out.end.as_secs_f64() > 560e-6);
}

#[test]
fn aimd_senders_lose_less_than_line_rate_senders() {
    let (t, s) = incast(64 << 10);
    let lossy = PacketConfig {
        mode: SwitchMode::Lossy,
        retransmit_timeout: SimTime::from_us(20),
        ..Default::default()
    };
    let aimd = PacketConfig {
        congestion_control: CongestionControl::Aimd,
        window_bytes: Some(16 << 10),
        ..lossy.clone()
    };
    let (_, plain) = run(&t, &s, lossy);
    let (_, controlled) = run(&t, &s, aimd);
    let drops = |r: &PortReport| r.ports.iter().map(|p| p.drops).sum::<u64>();
    assert!(drops(&controlled) < drops(&plain));
}

#[test]
fn bigger_buffers_make_the_pauses_disappear() {
    let (t, s) = incast(16 << 20);
    let (_, ports) = run(&t, &s, PacketConfig::default());
    assert!(ports.ports.iter().all(|p| p.pause_events == 0));
}

#[test]
fn a_buffer_smaller_than_a_packet_is_refused() {
    let t = star(2, 100.0 * GBPS, SimTime::ZERO, 1000, LinkClass::Ethernet);
    let err = PacketModel::new(t, PacketConfig::default(), 0)
        .err()
        .unwrap();
    assert!(err.expected.contains("1500 B"), "{err}");
}

#[test]
fn the_series_integrates_to_each_ports_bytes_and_shows_the_incast_queue() {
    let (t, s) = incast(64 << 10);
    let mut m = PacketModel::new(t.clone(), PacketConfig::default(), 0).unwrap();
    let eps: Vec<DeviceId> = t.gpus().to_vec();
    let out = play(
        &s,
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
                bins: 40,
                top_links: 16,
            },
        )
        .unwrap();
    let traffic = m.link_traffic();
    let stats = m.port_stats().unwrap();
    let into_g7 = port(&t, "sw", "g7") as u32;
    // Serialization is rounded to whole picoseconds: within a part in 10^5.
    assert_series_matches_traffic(&t, &series, &traffic, 1e-5);
    let g7 = series.links.iter().find(|e| e.link == into_g7).unwrap();
    let occ = g7.occupancy.as_ref().unwrap();
    let p = &stats.ports[into_g7 as usize];
    assert_eq!(*occ.max_bytes.iter().max().unwrap(), p.max_occupancy_bytes);
    // The per-bin averages integrate to the run's average occupancy.
    let area: f64 = occ
        .avg_bytes
        .iter()
        .enumerate()
        .map(|(i, a)| a * (series.edges_ps[i + 1] - series.edges_ps[i]) as f64)
        .sum();
    // (port statistics average over the time of the model's last event)
    let want = p.avg_occupancy_bytes * m.now_ps as f64;
    assert!((area - want).abs() <= 1e-9 * want, "{area} vs {want}");
    // The port into g7 is busy nearly all the run.
    assert!(
        g7.utilization[5..35].iter().all(|&u| u > 0.95),
        "{:?}",
        g7.utilization
    );
}

fn cubic() -> PacketConfig {
    PacketConfig {
        congestion_control: CongestionControl::Cubic,
        ..Default::default()
    }
}

/// Appends to `s` a wait of `wait_us` after `deps`, then a transfer of `bytes`
/// from `pair.0` to `pair.1` once the wait is over.
fn transfer_after(s: &mut Schedule, deps: Vec<OpId>, wait_us: u64, pair: (u32, u32), bytes: u64) {
    let wait = s.push(
        OpKind::Compute {
            endpoints: 1,
            duration: SimTime::from_us(wait_us),
        },
        deps,
        Phase::SendRecv,
        0,
        0,
    );
    let p = s.add_pattern(vec![pair]);
    s.push(
        OpKind::Transfer { pattern: p, bytes },
        vec![wait],
        Phase::SendRecv,
        0,
        0,
    );
}

/// g0 → g1 over a star of 1 Gb/s links and 1 ms per hop: a round trip of 4 ms holds 500 KB,
/// fifty times TCP's initial window.
fn slow_start_star() -> Arc<Topology> {
    star(
        2,
        GBPS,
        SimTime::from_us(1000),
        16 << 20,
        LinkClass::Ethernet,
    )
}

#[test]
fn cubic_acknowledgements_travel_back_through_the_reverse_ports() {
    let t = slow_start_star();
    let (_, ports) = run(
        &t,
        &schedule(2, &[(vec![(0, 1)], 1_500_000, vec![])]),
        cubic(),
    );
    // 1000 data packets one way, 1000 acknowledgements of 64 B the other.
    assert_eq!(ports.ports[port(&t, "g0", "sw")].packets, 1000);
    assert_eq!(ports.ports[port(&t, "sw", "g1")].packets, 1000);
    assert_eq!(ports.ports[port(&t, "g1", "sw")].packets, 1000);
    assert_eq!(ports.ports[port(&t, "sw", "g0")].packets, 1000);
    // (the report's packet count is what senders sent: data)
    assert_eq!(ports.packets, 1000);
}

#[test]
fn a_new_connection_slow_starts_and_a_warm_one_sends_at_once() {
    // Two 1.5 MB transfers on the same pair, the second 50 ms after the first (under the
    // 200 ms idle restart) or 1 s after (past it).
    let t = slow_start_star();
    let gap = |ms: u64| {
        let mut s = schedule(2, &[(vec![(0, 1)], 1_500_000, vec![])]);
        transfer_after(&mut s, vec![OpId(0)], ms * 1000, (0, 1), 1_500_000);
        let (out, _) = run(&t, &s, cubic());
        let secs = |i: usize| (out.ops[i].end - out.ops[i].start).as_secs_f64();
        (secs(0), secs(2))
    };
    let wire = 1.5e6 * 8.0 / GBPS + 2e-3;
    let (cold, warm) = gap(50);
    // Slow start from 10 packets doubles per 4 ms round trip: the first transfer takes
    // several round trips more than its bytes; the second finds the window open.
    assert!(cold > wire + 10e-3, "{cold} vs {wire}");
    assert!(warm < wire * 1.1, "{warm} vs {wire}");
    let (cold2, restarted) = gap(1000);
    assert_eq!(cold, cold2);
    assert!(restarted > wire + 5e-3, "{restarted}");
}

#[test]
fn cubic_senders_into_one_port_share_it_and_lossy_drops_are_recovered() {
    let (t, s) = incast(64 << 10);
    let lossy = PacketConfig {
        mode: SwitchMode::Lossy,
        retransmit_timeout: SimTime::from_us(200),
        ..cubic()
    };
    let (out, ports) = run(&t, &s, lossy);
    let into_g7 = &ports.ports[port(&t, "sw", "g7")];
    // Every byte arrived (drops retransmitted), at no more than the port's rate.
    assert!(into_g7.packets >= 7 * 1_000_000u64.div_ceil(1500));
    assert!(out.end.as_secs_f64() > 7e6 * 8.0 / (100.0 * GBPS));
    let (lossless, _) = run(&t, &s, cubic());
    assert!(lossless.end.as_secs_f64() > 7e6 * 8.0 / (100.0 * GBPS));
}

#[test]
fn a_receiver_sending_delays_the_acknowledgements_it_sends() {
    // g1 → g2 streams 40 MB from t = 0; g0 → g1 sends 4 MB from t = 50 ms, when g1's window
    // keeps its host queue (up to 128 KiB, 1.05 ms at 1 Gb/s) full at its link: every
    // acknowledgement of g0's data waits behind most of it, so g0's connection never sees a
    // round trip under 0.7 ms, where alone it sees 0.04 ms.
    let t = star(3, GBPS, SimTime::from_us(10), 16 << 20, LinkClass::Ethernet);
    let min_rtt_of_g0 = |g1_sends: bool| {
        let mut s = schedule(3, &[(vec![(1, 2)], 40_000_000, vec![])]);
        transfer_after(&mut s, vec![], 50_000, (0, 1), 4_000_000);
        if !g1_sends {
            s = schedule(3, &[(vec![(0, 1)], 4_000_000, vec![])]);
        }
        let mut m = PacketModel::new(t.clone(), cubic(), 0).unwrap();
        let eps = t.gpus().to_vec();
        let opts = PlayOptions {
            reduce_bytes_per_s: None,
            shared_cores: None,
        };
        play(&s, &eps, &mut m, opts).unwrap();
        let c = m.tcp_connections();
        let g0 = c.iter().find(|c| c.0 == eps[0]).unwrap();
        g0.2.min_rtt_ps() as f64 * 1e-12
    };
    let alone = min_rtt_of_g0(false);
    let behind = min_rtt_of_g0(true);
    assert!(alone < 0.1e-3, "{alone}");
    assert!(behind > 0.7e-3, "{behind}");
}

/// `PacketConfig::default()` with a shaper on every Ethernet link whose bucket holds 0.1 ms of
/// its rate: 12,500 B at 1 Gb/s.
fn shaped() -> PacketConfig {
    let mut c = PacketConfig::default();
    c.set_shaper_burst_secs(LinkClass::Ethernet, 100e-6);
    c
}

/// g0 → sw → g1 at 1 Gb/s, 1 us per hop, 1500 B packets (12 us each at the rate).
fn gigabit_pair() -> Arc<Topology> {
    star(2, GBPS, SimTime::from_us(1), 1 << 20, LinkClass::Ethernet)
}

#[test]
fn a_message_within_a_full_bucket_crosses_shaped_links_in_their_latency_alone() {
    // 12,000 B: eight packets, all let through at once by each hop's full bucket.
    let t = gigabit_pair();
    let one = schedule(2, &[(vec![(0, 1)], 12_000, vec![])]);
    let (out, _) = run(&t, &one, shaped());
    assert_eq!(out.end.as_ps(), 2_000_000);
    // Unshaped: 96 us of bytes, 2 us of latency, one packet's store and forward.
    let (out, _) = run(&t, &one, PacketConfig::default());
    assert_eq!(out.end.as_ps(), 96_000_000 + 2_000_000 + 12_000_000);
}

#[test]
fn a_shaped_stream_leaves_at_the_rate_after_its_first_bucket() {
    // 1.5 MB = 1000 packets. At g0's port the full bucket lets 9 packets go at once (htb
    // lets a packet go while its level is not below zero: 12,500 B covers 8 and a ninth
    // starts at 500 B), the tenth waits 8 us for the level to come back to zero and every
    // later one 12 us: the last leaves at 8 + 990 × 12 us. The switch's port receives them
    // at its own rate after a burst its bucket covered, so it holds none: 1 us later the last
    // reaches the switch and 1 us after that g1.
    let t = gigabit_pair();
    let (out, _) = run(
        &t,
        &schedule(2, &[(vec![(0, 1)], 1_500_000, vec![])]),
        shaped(),
    );
    let want_ps: u64 = (8 + 990 * 12 + 2) * 1_000_000;
    assert!(
        out.end.as_ps().abs_diff(want_ps) <= 10,
        "{}",
        out.end.as_ps()
    );
}

#[test]
fn a_shaped_links_bucket_refills_at_the_rate_while_it_idles() {
    // 12,000 B leave g0's bucket 500 B; 48 us of idle refill 6,000 B more. The second
    // 12,000 B message then sends five packets at once (6,500 B of level), the sixth after
    // 8 us (its 1,000 B of debt), the seventh and eighth 12 us apart: the last leaves 32 us
    // after the message started and reaches g1 2 us later (the switch's bucket refilled
    // alike and holds none of them).
    let t = gigabit_pair();
    let mut s = schedule(2, &[(vec![(0, 1)], 12_000, vec![])]);
    transfer_after(&mut s, vec![], 48, (0, 1), 12_000);
    let (out, _) = run(&t, &s, shaped());
    let second = out.ops[2].end - out.ops[2].start;
    assert!(second.as_ps().abs_diff(34_000_000) <= 10, "{second:?}");
}

#[test]
fn a_receiver_that_gets_whole_gso_packets_acknowledges_once_per_packet_of_them() {
    // 1.5 MB in 1500 B packets, the receiver acknowledging every 15,000 B (ten packets), at
    // the message's end and whenever all its sender has sent is in: far fewer
    // acknowledgements than packets, every byte still delivered, the same bytes sent.
    let t = slow_start_star();
    let one = schedule(2, &[(vec![(0, 1)], 1_500_000, vec![])]);
    let coalesced = PacketConfig {
        ack_every_bytes: 15_000,
        ..cubic()
    };
    let (out, ports) = run(&t, &one, coalesced);
    let acks = ports.ports[port(&t, "g1", "sw")].packets;
    assert!((100..200).contains(&acks), "{acks} acknowledgements");
    assert_eq!(ports.ports[port(&t, "sw", "g1")].packets, 1000);
    // Slow start grows by the bytes acknowledged, not by the acknowledgements: the transfer
    // takes about as long as with one acknowledgement per packet.
    let (every, _) = run(&t, &one, cubic());
    let (a, b) = (out.end.as_secs_f64(), every.end.as_secs_f64());
    assert!((a - b).abs() / b < 0.05, "{a} vs {b}");
}
