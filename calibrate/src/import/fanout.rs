//! `testbed/workloads/fanout.py` logs (one host sending the same message to two others at once,
//! as gloo's TCP transport writes), and the FIFO head bytes fitted from them.
//!
//! The log: `{"flows": 2, "runs": [{"bytes": S, "secs": [t1, t2]}, ...]}`, `t_i` the time from
//! posting both sends to receiver i's answer, receiver 1's send posted first.
//!
//! The fit. With a FIFO egress queue where each connection keeps up to `H` bytes queued, the
//! first-posted send has its first `min(S, H)` bytes sent alone, then both share the link
//! (`sim::net::flow`, "Sends posted together"): `t1 = (2S − min(S, H)) / C`, `t2 = 2S / C`, for
//! the link's payload rate `C`. The log gives `C` itself: both sends together move `2S` by the
//! last answer, so `C = 2S / t2` at the largest size (median over its repetitions). Each
//! repetition where the first-posted send finished first and `t1` says `H < S` gives
//! `H = 2S − t1 · C`; the fit is their median, with the interquartile range. Only sizes at
//! which the first-posted send finished first in every repetition are used: at larger sizes
//! either send may finish first (TCP's own unfairness takes over), and a repetition picked
//! because it happened to keep the order would bias the fit. Repetitions where the first send
//! went entirely alone (`H ≥ S`: small messages) say only that `H` is at least `S`; they are
//! counted and left out.

use std::path::Path;

use serde::Deserialize;

use crate::error::{read_text, ImportError};

/// One repetition: the message size and each receiver's answer time, in the order posted.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct FanoutRun {
    pub bytes: u64,
    pub secs: Vec<f64>,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct FanoutLog {
    pub flows: u32,
    pub runs: Vec<FanoutRun>,
    #[serde(default)]
    pub topology: Option<String>,
}

pub fn load(path: &Path) -> Result<FanoutLog, ImportError> {
    parse(&read_text(path)?, &path.display().to_string())
}

pub fn parse(text: &str, file: &str) -> Result<FanoutLog, ImportError> {
    let log: FanoutLog = serde_json::from_str(text).map_err(|e| {
        ImportError::at(
            file,
            e.line(),
            format!("the JSON of testbed/workloads/fanout.py ({e})"),
        )
    })?;
    if log.flows != 2 {
        return Err(ImportError::whole(
            file,
            format!(
                "flows = 2 (the fit reads one host sending to two at once), got {}",
                log.flows
            ),
        ));
    }
    for (i, r) in log.runs.iter().enumerate() {
        if r.bytes == 0 || r.secs.len() != 2 || !r.secs.iter().all(|t| *t > 0.0 && t.is_finite()) {
            return Err(ImportError::whole(
                file,
                format!("runs[{i}]: bytes > 0 and secs = [t1, t2], two positive times"),
            ));
        }
    }
    if log.runs.is_empty() {
        return Err(ImportError::whole(file, "at least one run in `runs`"));
    }
    Ok(log)
}

/// The fitted head bytes and what they rest on.
#[derive(Debug, Clone, PartialEq)]
pub struct HeadFit {
    pub head_bytes: f64,
    /// Interquartile range of the per-repetition values.
    pub head_iqr: (f64, f64),
    /// The link's payload rate, bytes/s, from the largest size.
    pub rate_bytes_per_s: f64,
    /// Repetitions used, and the sizes they came from.
    pub used: usize,
    pub sizes_used: Vec<u64>,
    /// Repetitions where the first send went alone entirely (H ≥ S), and repetitions of
    /// sizes at which the second-posted send finished first at least once.
    pub alone: usize,
    pub reordered: usize,
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn quantile(sorted: &[f64], q: f64) -> f64 {
    sorted[((sorted.len() - 1) as f64 * q).round() as usize]
}

/// Fits the FIFO head bytes (module doc); an error says which repetitions were missing.
pub fn fit(log: &FanoutLog) -> Result<HeadFit, String> {
    let largest = log.runs.iter().map(|r| r.bytes).max().unwrap_or(0);
    let mut rates: Vec<f64> = log
        .runs
        .iter()
        .filter(|r| r.bytes == largest)
        .map(|r| 2.0 * r.bytes as f64 / r.secs[0].max(r.secs[1]))
        .collect();
    let rate = median(&mut rates);
    let (mut heads, mut sizes) = (Vec::new(), Vec::new());
    let (mut alone, mut reordered) = (0, 0);
    let ordered = |bytes: u64| {
        log.runs
            .iter()
            .filter(|r| r.bytes == bytes)
            .all(|r| r.secs[0] < r.secs[1])
    };
    for r in &log.runs {
        let s = r.bytes as f64;
        if !ordered(r.bytes) {
            reordered += 1;
            continue;
        }
        let h = 2.0 * s - r.secs[0] * rate;
        if h >= s {
            alone += 1;
        } else if h > 0.0 {
            heads.push(h);
            if !sizes.contains(&r.bytes) {
                sizes.push(r.bytes);
            }
        }
    }
    if heads.is_empty() {
        return Err(format!(
            "repetitions of sizes at which the first-posted send always finished first, but not \
             alone: none of {} ({alone} went alone, {reordered} of sizes where the second \
             finished first at least once); add sizes between the queue depth and a few times \
             it (256 KiB to 2 MiB at 200 Mbit/s)",
            log.runs.len()
        ));
    }
    heads.sort_by(f64::total_cmp);
    sizes.sort_unstable();
    Ok(HeadFit {
        head_bytes: quantile(&heads, 0.5),
        head_iqr: (quantile(&heads, 0.25), quantile(&heads, 0.75)),
        rate_bytes_per_s: rate,
        used: heads.len(),
        sizes_used: sizes,
        alone,
        reordered,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the flow model predicts for head `h` at rate `c`, as a log.
    fn modelled(h: f64, c: f64, sizes: &[u64]) -> FanoutLog {
        let runs = sizes
            .iter()
            .map(|&s| {
                let s_f = s as f64;
                FanoutRun {
                    bytes: s,
                    secs: vec![(2.0 * s_f - h.min(s_f)) / c, 2.0 * s_f / c],
                }
            })
            .collect();
        FanoutLog {
            flows: 2,
            runs,
            topology: None,
        }
    }

    #[test]
    fn the_fit_recovers_the_head_the_model_was_played_with() {
        let c = 191.3e6 / 8.0;
        let log = modelled(330_000.0, c, &[65_536, 262_144, 524_288, 1 << 20, 16 << 20]);
        let f = fit(&log).unwrap();
        assert!((f.rate_bytes_per_s - c).abs() / c < 1e-9);
        assert!((f.head_bytes - 330_000.0).abs() < 1.0, "{f:?}");
        // 64 and 256 KiB went alone (H >= S); 512 KiB, 1 and 16 MiB tell H.
        assert_eq!((f.used, f.alone, f.reordered), (3, 2, 0));
    }

    #[test]
    fn sizes_where_the_second_send_ever_finished_first_are_left_out() {
        let c = 25e6;
        let mut log = modelled(300_000.0, c, &[1 << 20, 1 << 20, 4 << 20, 4 << 20]);
        // At 4 MiB the second-posted send finished first once: both 4 MiB repetitions go.
        log.runs[2].secs.swap(0, 1);
        let f = fit(&log).unwrap();
        assert_eq!((f.used, f.reordered), (2, 2));
        assert!((f.head_bytes - 300_000.0).abs() < 1.0);
    }

    #[test]
    fn a_log_that_cannot_tell_the_head_is_an_error_saying_why() {
        let log = modelled(1e9, 25e6, &[65_536, 262_144]);
        let e = fit(&log).unwrap_err();
        assert!(e.contains("2 went alone"), "{e}");
    }

    #[test]
    fn bad_logs_name_the_file_and_what_was_expected() {
        let e = parse(r#"{"flows": 3, "runs": []}"#, "f.json").unwrap_err();
        assert!(e.to_string().contains("f.json: expected flows = 2"), "{e}");
        let e = parse(
            r#"{"flows": 2, "runs": [{"bytes": 8, "secs": [1.0]}]}"#,
            "f.json",
        )
        .unwrap_err();
        assert!(e.to_string().contains("runs[0]"), "{e}");
        let e = parse("{", "f.json").unwrap_err();
        assert!(
            e.to_string().starts_with("f.json:1: expected the JSON"),
            "{e}"
        );
    }
}
