//! gloo's isend/irecv exchanges between two ranks: what the testbed measured
//! (`suite.py gloo_p2p`, `data/runs/calibration/testbed_two_level_2to1.gloo_p2p_cross_leaf.json`)
//! and what dtsim plays (`sim::library::gloo::p2p`): a pair whose ranks post far enough apart
//! runs its exchange one way after the other, because the late rank's notification leaves
//! behind its own payload on their one connection; posting the receive first, as gloo's own
//! all_reduce does, runs both ways at once.

use std::path::{Path, PathBuf};

use sim::library::gloo::p2p::ENTRY_LAG;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Per repetition of `pattern` at `bytes`: (|post time of one rank − its peer's| in seconds,
/// seconds from the first post to the last finish) for each of `pairs` pairs.
fn repetitions(
    log: &serde_json::Value,
    pattern: &str,
    bytes: u64,
    pairs: usize,
) -> Vec<(f64, f64)> {
    let pair_ranks: Vec<(usize, usize)> = log["pairs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p[0].as_u64().unwrap() as usize,
                p[1].as_u64().unwrap() as usize,
            )
        })
        .collect();
    let r = log["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["pattern"] == pattern && r["bytes"].as_u64() == Some(bytes))
        .unwrap_or_else(|| panic!("no {pattern} at {bytes} B in the log"));
    let mut out = Vec::new();
    for rep in r["start_end_secs_per_rank"].as_array().unwrap() {
        let t = |rank: usize, i: usize| rep[rank][i].as_f64().unwrap();
        for &(a, b) in pair_ranks.iter().take(pairs) {
            let skew = (t(a, 0) - t(b, 0)).abs();
            let secs = t(a, 1).max(t(b, 1)) - t(a, 0).min(t(b, 0));
            out.push((skew, secs));
        }
    }
    out
}

fn log() -> serde_json::Value {
    let path = root().join("data/runs/calibration/testbed_two_level_2to1.gloo_p2p_cross_leaf.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap()
}

const SIZES: [u64; 3] = [256 << 10, 1 << 20, 4 << 20];

#[test]
fn the_entry_lag_is_the_median_skew_of_a_pairs_posts_after_a_barrier() {
    let log = log();
    let mut skews: Vec<f64> = Vec::new();
    for bytes in SIZES {
        skews.extend(
            repetitions(&log, "exchange_one_pair", bytes, 1)
                .iter()
                .map(|r| r.0),
        );
        for p in ["exchange", "exchange_recv_first"] {
            skews.extend(repetitions(&log, p, bytes, 2).iter().map(|r| r.0));
        }
    }
    assert_eq!(skews.len(), 150);
    skews.sort_by(f64::total_cmp);
    let median = (skews[74] + skews[75]) / 2.0;
    assert!(
        (median - ENTRY_LAG.as_secs_f64()).abs() < 1e-6,
        "median skew {median:.6} s, ENTRY_LAG {}",
        ENTRY_LAG
    );
}

#[test]
fn on_the_testbed_a_pair_far_apart_exchanged_one_way_after_the_other() {
    let log = log();
    for bytes in SIZES {
        // One pair's send alone: half the two pairs' one-way time through the shared uplink
        // (the pairs do not share it evenly, so the slower pair's time).
        let one_way: Vec<f64> = repetitions(&log, "one_way", bytes, 2)
            .chunks(2)
            .map(|pairs| pairs[0].1.max(pairs[1].1))
            .collect();
        let mut t: Vec<f64> = one_way.iter().map(|secs| secs / 2.0).collect();
        t.sort_by(f64::total_cmp);
        let single = t[t.len() / 2];
        for (skew, secs) in repetitions(&log, "exchange_one_pair", bytes, 1) {
            let ratio = secs / single;
            if skew > 160e-6 {
                assert!(
                    ratio > 1.6,
                    "{bytes} B, ranks {skew:.6} s apart: {ratio:.2}x one way"
                );
            }
            if skew < 110e-6 {
                assert!(
                    ratio < 1.4,
                    "{bytes} B, ranks {skew:.6} s apart: {ratio:.2}x one way"
                );
            }
        }
        // Receives posted first: every repetition both ways at once (both pairs, 2 flows each
        // way through the uplink, about the two pairs' one-way time; one way after the other
        // would take twice that).
        let both = one_way.iter().copied().fold(0.0, f64::max);
        for (_, secs) in repetitions(&log, "exchange_recv_first", bytes, 1) {
            assert!(
                secs < 1.25 * both,
                "{bytes} B recv first: {secs} s, one way {both} s"
            );
        }
    }
}

/// `library = "gloo"` all-reduce of `bytes` on two hosts of one 200 Mbit/s switch, with the
/// testbed star's measured profile (its link rate, latency and reduction rate): seconds.
fn two_hosts(bytes: &str, extra: &str) -> f64 {
    let dir = std::env::temp_dir().join(format!("dtsim-gloo-pair-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let topo = dir.join("pair.toml");
    std::fs::write(
        &topo,
        "name = \"pair\"\nlibrary = \"gloo\"\n[generator]\nkind = \"star\"\nn = 2\n\
         [generator.link]\nbandwidth = \"200Mbps\"\nlatency = \"25us\"\nclass = \"ethernet\"\n",
    )
    .unwrap();
    let text = format!(
        "name = \"t\"\nprofile = {:?}\n[topology]\nfile = {:?}\n[collective]\n\
         op = \"all_reduce\"\nbytes = \"{bytes}\"\n{extra}",
        root()
            .join("data/profiles/testbed_star4_200mbit.json")
            .display()
            .to_string(),
        topo.display().to_string()
    );
    let s = sim::scenario::parse(&text, Path::new("t.toml"), &[]).unwrap();
    let summary = sim::scenario::run::run(&s).unwrap().summary;
    summary.time_ps as f64 * 1e-12
}

#[test]
fn dtsim_plays_a_hand_written_exchange_one_way_after_the_other_and_gloos_own_both_ways() {
    // A 4 MiB all-reduce on two ranks sends 2 MiB each way per step (reduce-scatter, then
    // all-gather). gloo's own ring posts its receives first: both ways at once, each step
    // about 2 MiB at the link's rate. The send/recv ring posts isend first and rank 0 is
    // late: its reduce-scatter runs one way, then the other; so does its all-gather, whose
    // notification from the rank done first arrives right behind that rank's last bytes,
    // before the other has added them and posts. Twice as long.
    let step = (2u64 << 20) as f64 * 8.0 / 200e6;
    let own = two_hosts("4MiB", "");
    let rings = two_hosts("4MiB", "orders = [[0, 1]]\n");
    assert!(
        (own / (2.0 * step) - 1.0).abs() < 0.1,
        "gloo's ring {own} s, 2 steps of {step} s on the wire"
    );
    assert!(
        (rings / own - 2.0).abs() < 0.1,
        "send/recv ring {rings} s, gloo's {own} s"
    );
}

#[test]
fn hierarchical_over_gloo_groups_the_testbeds_leaves() {
    let text = format!(
        "name = \"t\"\n[topology]\nfile = {:?}\n[collective]\nop = \"all_reduce\"\n\
         bytes = \"1MiB\"\nlibrary = \"gloo\"\nalgorithm = \"hierarchical\"\n",
        root()
            .join("testbed/topologies/two_level_2to1.toml")
            .display()
            .to_string()
    );
    let s = sim::scenario::parse(&text, Path::new("t.toml"), &[]).unwrap();
    let summary = sim::scenario::run::run(&s).unwrap().summary;
    assert!(
        summary.library.contains("2 nodes of 2"),
        "{}",
        summary.library
    );
}
