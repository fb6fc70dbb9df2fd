//! `testbed/workloads/host_costs.py` logs: the host work gloo does around its transfers, timed
//! in one process on the machine that runs the ranks, and the two rates fitted from them.
//!
//! The log: `{"copy": [{"gathered_bytes", "copied_bytes", "secs"}, ...], "reduce":
//! [{"segment_bytes", "secs"}, ...], ...}`. `copy` rows time what ProcessGroupGloo's
//! all_gather copies on every call (its rank's block into a fresh flat buffer, then the whole
//! buffer out to the caller's tensors); `reduce` rows time a float32 sum of one received
//! segment into the local one.
//!
//! The fit: each rate is all the bytes over all the time (`Σ bytes / Σ secs`), which weighs
//! the large sizes, where the time is, most: a copy that stays in cache is faster per byte
//! (11.6 GB/s at 320 KB on the testbed's machine, 3.5 GB/s at 20 MB), but what it saves is
//! a few tens of microseconds against milliseconds on the wire.

use std::path::Path;

use serde::Deserialize;

use crate::error::{read_text, ImportError};

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct CopyRow {
    pub gathered_bytes: u64,
    pub copied_bytes: u64,
    pub secs: f64,
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
    pub copy_bytes_per_s: f64,
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
    let bad = log
        .copy
        .iter()
        .position(|r| !positive(r.copied_bytes, r.secs))
        .map(|i| format!("copy[{i}]: copied_bytes > 0 and secs > 0"))
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
    HostRates {
        copy_bytes_per_s: rate(&mut log.copy.iter().map(|r| (r.copied_bytes, r.secs))),
        reduce_bytes_per_s: rate(&mut log.reduce.iter().map(|r| (r.segment_bytes, r.secs))),
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
        assert!((r.reduce_bytes_per_s - 2e10).abs() < 10.0);
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
