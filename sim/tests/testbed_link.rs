//! The testbed's link calibration against the runs it was measured from: iperf3 with 1, 2, 4
//! and 8 parallel TCP streams from host 0 to host 1 on every testbed topology, and every other
//! host sending to host 1 at once through one 200 Mbit/s link of
//! `testbed/topologies/star4_200mbit.toml`. The
//! profile's link efficiency must give the total each run received, within 3%, whatever the
//! number of flows sharing the link; and its FIFO head bytes the order and times of two sends
//! host 0 posts at once (`testbed/workloads/fanout.py`).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use sim::collective::play::{play, PlayOptions, PlayOutcome};
use sim::collective::{Collective, OpKind, Phase, Schedule};
use sim::net::flow::FlowModel;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Total rate (bits/s) a logged iperf3 run received.
fn received_bps(log: &Path) -> f64 {
    let text = std::fs::read_to_string(log).unwrap_or_else(|e| panic!("{}: {e}", log.display()));
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    v["end"]["sum_received"]["bits_per_second"]
        .as_f64()
        .unwrap_or_else(|| panic!("{}: no end.sum_received", log.display()))
}

/// The testbed topologies whose profile (`data/profiles/testbed_<stem>.json`) `suite.py link`
/// measured from host 0 to host 1.
const MEASURED: [&str; 4] = [
    "star4_200mbit",
    "two_level_2to1",
    "three_leaf_100mbit_uplinks",
    "two_leaf_150mbit",
];

/// Plays `s` on the testbed topology `stem` with its profile (flow model).
fn play_on(stem: &str, s: &Schedule) -> PlayOutcome {
    let r = root();
    let topo = Arc::new(
        sim::topology::file::load(&r.join(format!("testbed/topologies/{stem}.toml"))).unwrap(),
    );
    let profile =
        sim::profile::Profile::load(&r.join(format!("data/profiles/testbed_{stem}.json"))).unwrap();
    let mut model = FlowModel::new(topo.clone(), profile.efficiency_factors(), 0);
    let endpoints = topo.gpus()[..s.ranks as usize].to_vec();
    play(
        s,
        &endpoints,
        &mut model,
        PlayOptions {
            reduce_bytes_per_s: None,
            shared_cores: None,
        },
    )
    .unwrap()
}

/// Plays `s` on the testbed's 4-host star with the testbed profile (flow model).
fn play_on_the_star(s: &Schedule) -> PlayOutcome {
    play_on("star4_200mbit", s)
}

/// Total payload rate dtsim gives `pairs` (hosts of the testbed topology `stem`, repeated for
/// parallel streams) all sending at once, with its profile.
fn simulated_bps_on(stem: &str, pairs: &[(u32, u32)]) -> f64 {
    let bytes: u64 = 100_000_000;
    let mut s = Schedule::new(Collective::AllToAll, "streams", 4, bytes);
    let pattern = s.push_pattern(pairs.to_vec());
    s.push(
        OpKind::Transfer { pattern, bytes },
        vec![],
        Phase::SendRecv,
        0,
        0,
    );
    let out = play_on(stem, &s);
    pairs.len() as f64 * bytes as f64 * 8.0 / (out.end.as_ps() as f64 * 1e-12)
}

/// As [`simulated_bps_on`], on the star.
fn simulated_bps(pairs: &[(u32, u32)]) -> f64 {
    simulated_bps_on("star4_200mbit", pairs)
}

fn assert_within_3_percent(what: &str, simulated: f64, measured: f64) {
    let e = simulated / measured - 1.0;
    assert!(
        e.abs() <= 0.03,
        "{what}: simulated {:.2} Mbit/s, measured {:.2} Mbit/s ({:+.1}%)",
        simulated / 1e6,
        measured / 1e6,
        e * 100.0
    );
}

#[test]
fn parallel_streams_share_the_link_as_measured() {
    // On every testbed topology, the held-out two-leaf one included.
    let logs = root().join("data/runs/calibration");
    for stem in MEASURED {
        for p in [1usize, 2, 4, 8] {
            let measured = received_bps(&logs.join(format!("testbed_{stem}.iperf3_P{p}.json")));
            let simulated = simulated_bps_on(stem, &vec![(0, 1); p]);
            assert_within_3_percent(
                &format!("{stem}: {p} stream(s) host0 -> host1"),
                simulated,
                measured,
            );
        }
    }
}

#[test]
fn an_incast_into_one_link_gets_that_link_as_measured() {
    let logs = root().join("data/runs/calibration");
    let measured: f64 = [0, 2, 3]
        .iter()
        .map(|h| {
            received_bps(&logs.join(format!(
                "testbed_star4_200mbit.iperf3_incast_from_h{h}.json"
            )))
        })
        .sum();
    let simulated = simulated_bps(&[(0, 1), (2, 1), (3, 1)]);
    assert_within_3_percent("hosts 0, 2, 3 -> host 1", simulated, measured);
}

/// Host 0 posts two sends of `bytes` at once, to hosts 1 then 2 (as `fanout.py` does), on the
/// star with the testbed profile: when each ends (seconds).
fn simulated_fanout(bytes: u64) -> [f64; 2] {
    let mut s = Schedule::new(Collective::SendRecv, "fanout", 4, bytes);
    for dst in [1, 2] {
        let pattern = s.push_pattern(vec![(0, dst)]);
        s.push(
            OpKind::Transfer { pattern, bytes },
            vec![],
            Phase::SendRecv,
            0,
            0,
        );
    }
    let out = play_on_the_star(&s);
    [out.ops[0].end.as_secs_f64(), out.ops[1].end.as_secs_f64()]
}

/// The recorded fanout runs (`data/runs/calibration/testbed_star4_200mbit.fanout.json`, TCP
/// cubic): at the sizes where the send posted first always finished first, dtsim finishes it
/// first too, each send within 10% of the measured median, and the two together within 4%
/// (the shapers' 50 KB buckets, which let the pair finish 2.2-4.1 ms sooner than its bytes
/// take at the link's rate, are in the profile; without them the pair was up to 8% late).
#[test]
fn sends_posted_together_finish_in_the_order_posted_as_measured() {
    let log = root().join("data/runs/calibration/testbed_star4_200mbit.fanout.json");
    let text = std::fs::read_to_string(&log).unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let runs = v["runs"].as_array().unwrap();
    for bytes in [393_216u64, 524_288, 786_432, 1_048_576] {
        let mut first = Vec::new();
        let mut second = Vec::new();
        for r in runs.iter().filter(|r| r["bytes"].as_u64() == Some(bytes)) {
            first.push(r["secs"][0].as_f64().unwrap());
            second.push(r["secs"][1].as_f64().unwrap());
        }
        let median = |v: &mut Vec<f64>| {
            v.sort_by(f64::total_cmp);
            v[v.len() / 2]
        };
        let measured = [median(&mut first), median(&mut second)];
        let simulated = simulated_fanout(bytes);
        assert!(simulated[0] < simulated[1], "{bytes} B: {simulated:?}");
        for i in 0..2 {
            let err = (simulated[i] - measured[i]) / measured[i];
            assert!(
                err.abs() < 0.10,
                "{bytes} B, send {}: simulated {:.2} ms, measured {:.2} ms",
                i + 1,
                simulated[i] * 1e3,
                measured[i] * 1e3
            );
        }
        // Both done: the byte time of the pair, less what the shapers' buckets let through.
        let err = (simulated[1] - measured[1]) / measured[1];
        assert!(err.abs() < 0.04, "{bytes} B both: {err:+.3}");
    }
}

/// Median of `v`.
fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// How long the shaper held a send of `bytes` from host 0 to host 1 of the testbed topology
/// `stem` that followed an earlier one after its links had idled `idle_secs` (dtsim with the
/// topology's profile: the second send's time less its path latency), seconds.
fn simulated_hold_after_idle(stem: &str, bytes: u64, idle_secs: f64) -> f64 {
    let mut s = Schedule::new(Collective::SendRecv, "gap", 2, bytes);
    let pattern = s.push_pattern(vec![(0, 1)]);
    let first = s.push(
        OpKind::Transfer { pattern, bytes },
        vec![],
        Phase::SendRecv,
        0,
        0,
    );
    let idle = s.push(
        OpKind::Compute {
            endpoints: 1,
            duration: sim::engine::SimTime::from_secs_f64(idle_secs),
        },
        vec![first],
        Phase::SendRecv,
        0,
        0,
    );
    let second = s.push(
        OpKind::Transfer { pattern, bytes },
        vec![idle],
        Phase::SendRecv,
        0,
        1,
    );
    // Then a 1-byte send: it takes the path latency alone.
    let tiny = s.push(
        OpKind::Transfer { pattern, bytes: 1 },
        vec![second],
        Phase::SendRecv,
        0,
        2,
    );
    let out = play_on(stem, &s);
    let latency = out.ops[tiny.0 as usize].end - out.ops[tiny.0 as usize].start;
    let second = &out.ops[second.0 as usize];
    (second.end - second.start - latency).as_secs_f64()
}

/// The recorded shaper gap runs (`data/runs/calibration/testbed_<stem>.shaper_gap.json`,
/// `suite.py shaper_gap`): one 256 KiB send at a time from host 0 to host 1 after idle gaps
/// of 0-20 ms, each answered once it has arrived. On every testbed topology, dtsim with the
/// profile's measured bucket holds each send at the shaper as long as the runs did (their
/// median less the answer's round trip), within 3%, at every gap: back to back (the link idle
/// only for the answer's round trip and the sender's loop, about twice the round trip), part
/// refilled, full.
#[test]
fn a_send_after_an_idle_gap_waits_at_the_shaper_as_measured() {
    let logs = root().join("data/runs/calibration");
    for stem in MEASURED {
        let log = logs.join(format!("testbed_{stem}.shaper_gap.json"));
        let text = std::fs::read_to_string(&log).unwrap();
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        let runs: Vec<(f64, u64, u64, f64)> = v["runs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                (
                    r["gap_secs"].as_f64().unwrap(),
                    r["probe_bytes"].as_u64().unwrap(),
                    r["bytes"].as_u64().unwrap(),
                    r["secs"].as_f64().unwrap(),
                )
            })
            .filter(|r| r.1 == 0)
            .collect();
        let times = |gap: f64, bytes: u64| -> Vec<f64> {
            runs.iter()
                .filter(|r| r.0 == gap && r.2 == bytes)
                .map(|r| r.3)
                .collect()
        };
        let mut gaps: Vec<f64> = runs.iter().map(|r| r.0).collect();
        gaps.sort_by(f64::total_cmp);
        gaps.dedup();
        // The answer's round trip: the smallest size after the longest gaps, which goes
        // through at once.
        let round_trip = median(
            gaps.iter()
                .filter(|&&g| g >= 3e-3)
                .flat_map(|&g| times(g, 16384))
                .collect(),
        );
        for &gap in &gaps {
            let measured = median(times(gap, 262144)) - round_trip;
            let simulated = simulated_hold_after_idle(stem, 262144, gap + 2.0 * round_trip);
            let e = simulated / measured - 1.0;
            assert!(
                e.abs() <= 0.03,
                "{stem}, 256 KiB after {:.1} ms idle: simulated {:.3} ms, measured {:.3} ms \
                 ({:+.1}%)",
                gap * 1e3,
                simulated * 1e3,
                measured * 1e3,
                e * 100.0
            );
        }
    }
}
