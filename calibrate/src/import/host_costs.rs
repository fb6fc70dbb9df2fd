//! `testbed/workloads/host_costs.py` logs: the host work gloo does around its transfers, timed
//! in one process on the machine that runs the ranks, and the two rates fitted from them.
//!
//! The log: `{"copy": [{"gathered_bytes", "copied_bytes", "secs", "prime_bytes", "prime_secs",
//! "out_secs"}, ...], "reduce": [{"segment_bytes", "secs"}, ...], ...}`. `copy` rows time what
//! ProcessGroupGloo's all_gather copies on every call: its rank's block into a fresh flat
//! buffer (`prime_*`), then the whole buffer out to the caller's tensors (`out_secs`), and the
//! two together (`secs`; logs before 2026-11-29 have only these). `reduce` rows time a float32
//! sum of one received segment into the local one.
//!
//! The fit: each rate is all the bytes over all the time (`Σ bytes / Σ secs`), which weighs
//! the large sizes, where the time is, most: a copy that stays in cache is faster per byte
//! (11.6 GB/s at 320 KB on the testbed's machine, 3.5 GB/s at 20 MB), but what it saves is
//! a few tens of microseconds against milliseconds on the wire. Where every row times the two
//! copies apart, they get a rate each: priming pays the first touch of fresh pages, 2.9-3.3
//! GB/s from 4 MiB on the testbed's machine on 2026-11-29, where copying out to warm tensors ran
//! at 20-40 GB/s; one rate for both made the copy out cost 7 times what it does.

use std::path::Path;

use serde::Deserialize;

use crate::error::{read_text, ImportError};

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct CopyRow {
    pub gathered_bytes: u64,
    pub copied_bytes: u64,
    pub secs: f64,
    /// The priming copy alone: its bytes (one rank's block) and time.
    #[serde(default)]
    pub prime_bytes: Option<u64>,
    #[serde(default)]
    pub prime_secs: Option<f64>,
    /// The copy out alone (`gathered_bytes`).
    #[serde(default)]
    pub out_secs: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct ReduceRow {
    pub segment_bytes: u64,
    pub secs: f64,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct HostCostsLog {
    pub copy: Vec<CopyRow>,
    pub reduce: Vec<ReduceRow>,
    #[serde(default)]
    pub cpus: Option<u32>,
}

/// The rates fitted from a log, bytes per second.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HostRates {
    /// Both staging copies' rate, or the priming copy's alone where `copy_out_bytes_per_s` is
    /// known.
    pub copy_bytes_per_s: f64,
    /// The copy out's rate, where every row timed it apart.
    pub copy_out_bytes_per_s: Option<f64>,
    pub reduce_bytes_per_s: f64,
}

pub fn load(path: &Path) -> Result<HostCostsLog, ImportError> {
    parse(&read_text(path)?, &path.display().to_string())
}

pub fn parse(text: &str, file: &str) -> Result<HostCostsLog, ImportError> {
    let log: HostCostsLog = serde_json::from_str(text).map_err(|e| {
        ImportError::at(
            file,
            e.line(),
            format!("the JSON of testbed/workloads/host_costs.py ({e})"),
        )
    })?;
    if log.copy.is_empty() || log.reduce.is_empty() {
        return Err(ImportError::whole(
            file,
            "at least one `copy` and one `reduce` row",
        ));
    }
    // The first row of each list whose bytes or time is not positive, by field.
    let positive = |bytes: u64, secs: f64| bytes > 0 && secs.is_finite() && secs > 0.0;
    let split_ok = |r: &CopyRow| match (r.prime_bytes, r.prime_secs, r.out_secs) {
        (None, None, None) => true,
        (Some(b), Some(p), Some(o)) => positive(b, p) && positive(r.gathered_bytes, o),
        _ => false,
    };
    let bad = log
        .copy
        .iter()
        .position(|r| !positive(r.copied_bytes, r.secs))
        .map(|i| format!("copy[{i}]: copied_bytes > 0 and secs > 0"))
        .or_else(|| {
            log.copy.iter().position(|r| !split_ok(r)).map(|i| {
                format!(
                    "copy[{i}]: prime_bytes, prime_secs and out_secs all positive, or none of \
                     them"
                )
            })
        })
        .or_else(|| {
            log.reduce
                .iter()
                .position(|r| !positive(r.segment_bytes, r.secs))
                .map(|i| format!("reduce[{i}]: segment_bytes > 0 and secs > 0"))
        });
    if let Some(expected) = bad {
        return Err(ImportError::whole(file, expected));
    }
    Ok(log)
}

/// Σ bytes / Σ secs for the copies and for the reductions.
pub fn fit(log: &HostCostsLog) -> HostRates {
    let rate = |rows: &mut dyn Iterator<Item = (u64, f64)>| {
        let (bytes, secs) = rows.fold((0.0, 0.0), |(b, s), (rb, rs)| (b + rb as f64, s + rs));
        bytes / secs
    };
    let split: Option<Vec<(u64, f64, f64)>> = log
        .copy
        .iter()
        .map(|r| Some((r.prime_bytes?, r.prime_secs?, r.out_secs?)))
        .collect();
    let reduce_bytes_per_s = rate(&mut log.reduce.iter().map(|r| (r.segment_bytes, r.secs)));
    match split {
        Some(rows) => HostRates {
            copy_bytes_per_s: rate(&mut rows.iter().map(|&(b, p, _)| (b, p))),
            copy_out_bytes_per_s: Some(rate(
                &mut log
                    .copy
                    .iter()
                    .zip(&rows)
                    .map(|(r, s)| (r.gathered_bytes, s.2)),
            )),
            reduce_bytes_per_s,
        },
        None => HostRates {
            copy_bytes_per_s: rate(&mut log.copy.iter().map(|r| (r.copied_bytes, r.secs))),
            copy_out_bytes_per_s: None,
            reduce_bytes_per_s,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_rate_is_all_the_bytes_over_all_the_time() {
        let log = parse(
            r#"{"copy": [{"gathered_bytes": 4, "copied_bytes": 1000, "secs": 1e-6},
                         {"gathered_bytes": 16, "copied_bytes": 3000, "secs": 3e-6}],
                "reduce": [{"segment_bytes": 2000, "secs": 1e-7}]}"#,
            "h.json",
        )
        .unwrap();
        let r = fit(&log);
        assert!((r.copy_bytes_per_s - 1e9).abs() < 1.0);
        assert_eq!(r.copy_out_bytes_per_s, None);
        assert!((r.reduce_bytes_per_s - 2e10).abs() < 10.0);
    }

    #[test]
    fn copies_timed_apart_get_a_priming_rate_and_a_copy_out_rate() {
        // 4 ranks: the block is a quarter of what is gathered. Priming 1 GB/s (fresh pages),
        // the copy out 10 GB/s.
        let log = parse(
            r#"{"copy": [{"gathered_bytes": 4000, "copied_bytes": 5000, "secs": 1.4e-6,
                          "prime_bytes": 1000, "prime_secs": 1e-6, "out_secs": 4e-7},
                         {"gathered_bytes": 16000, "copied_bytes": 20000, "secs": 5.6e-6,
                          "prime_bytes": 4000, "prime_secs": 4e-6, "out_secs": 1.6e-6}],
                "reduce": [{"segment_bytes": 2000, "secs": 1e-7}]}"#,
            "h.json",
        )
        .unwrap();
        let r = fit(&log);
        assert!((r.copy_bytes_per_s - 1e9).abs() < 1.0, "{r:?}");
        assert!(
            (r.copy_out_bytes_per_s.unwrap() - 1e10).abs() < 10.0,
            "{r:?}"
        );
    }

    #[test]
    fn a_copy_row_with_half_a_split_is_refused_by_field() {
        let e = parse(
            r#"{"copy": [{"gathered_bytes": 4, "copied_bytes": 5, "secs": 1, "prime_secs": 1}],
                "reduce": [{"segment_bytes": 4, "secs": 1}]}"#,
            "h.json",
        )
        .unwrap_err();
        assert!(e.to_string().contains("copy[0]: prime_bytes"), "{e}");
    }

    #[test]
    fn a_log_without_rows_or_with_a_zero_time_is_refused_by_field() {
        let e = parse(r#"{"copy": [], "reduce": []}"#, "h.json").unwrap_err();
        assert!(e.to_string().contains("h.json"), "{e}");
        assert!(e.to_string().contains("copy"), "{e}");
        let e = parse(
            r#"{"copy": [{"gathered_bytes": 4, "copied_bytes": 10, "secs": 0}],
                "reduce": [{"segment_bytes": 4, "secs": 1}]}"#,
            "h.json",
        )
        .unwrap_err();
        assert!(e.to_string().contains("copy[0]"), "{e}");
        let e = parse("{", "h.json").unwrap_err();
        assert!(e.to_string().contains("host_costs.py"), "{e}");
    }
}
