//! OpenMPI's four-rank pairwise exchanges on the testbed against the constants dtsim plays them
//! with (`sim::library::mpi`): the logs of `suite.py mpi_p2p --ranks 4` over ten launches
//! (`data/runs/calibration/testbed_mpi_p2p_4ranks.json`, `..._launch2` to `..._launch10.json`)
//! must say what the constants say: how many repetitions ran the slow way, of how many, and
//! what the first way still had to deliver when the way back started.

use std::path::{Path, PathBuf};

use sim::library::mpi::{EXCHANGES, SLOW_EXCHANGES, SLOW_EXCHANGE_TAIL_BYTES};

fn logs() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../data/runs/calibration");
    let mut logs = vec![dir.join("testbed_mpi_p2p_4ranks.json")];
    logs.extend((2..=10).map(|k| dir.join(format!("testbed_mpi_p2p_4ranks_launch{k}.json"))));
    logs
}

#[test]
fn the_exchange_constants_are_what_the_ten_launches_measured() {
    let tail = SLOW_EXCHANGE_TAIL_BYTES as f64;
    let (mut slow, mut total) = (0u32, 0u32);
    let mut tails = Vec::new();
    for log in logs() {
        let text =
            std::fs::read_to_string(&log).unwrap_or_else(|e| panic!("{}: {e}", log.display()));
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        for r in v["results"].as_array().unwrap() {
            let m = r["bytes"].as_u64().unwrap() as f64;
            if m <= 65536.0 {
                continue; // eager: both ways at once
            }
            let one_way = r["oneway_secs"].as_f64().unwrap();
            for t in r["pairwise_all_secs"].as_array().unwrap() {
                let ratio = t.as_f64().unwrap() / one_way;
                total += 1;
                // Slow: above the midpoint between both ways at once (1.0) and the slow
                // mode's 2 - tail / m.
                if ratio > 1.0 + 0.5 * (m - tail) / m {
                    slow += 1;
                    if m <= 4.0 * 1048576.0 {
                        tails.push(m * (2.0 - ratio));
                    }
                }
            }
        }
    }
    assert_eq!((slow, total), (SLOW_EXCHANGES, EXCHANGES));
    tails.sort_by(f64::total_cmp);
    let median = (tails[tails.len() / 2 - 1] + tails[tails.len() / 2]) / 2.0;
    assert!(
        (median - tail).abs() < 1000.0,
        "median tail of {} slow repetitions {median:.0} B, the constant {tail} B",
        tails.len()
    );
}
