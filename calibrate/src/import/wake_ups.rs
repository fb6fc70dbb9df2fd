//! `suite.py wakeup_load` logs (testbed/workloads/wakeup_load.py): how much later than usual a
//! host's thread runs when a message wakes it, where every host runs on one machine's cores.
//!
//! The log: `{"ranks", "results": [{"load_pairs", "busy_cores", "calls", "secs": [...]}, ...],
//! ...}`: two hosts timed `calls` 4-byte gloo all-reduces (every step a message, its
//! notification and a thread woken to take it) while `load_pairs` pairs of the other hosts
//! streamed. Only the level without load is taken (`load_pairs` 0: the machine busy with the
//! probe alone): a collective's own messages are the load there.
//!
//! A call's extra delay is its time less the median call's of its log (0 for every call at or
//! below it): what the usual call does not wait. Several logs pool their extra delays (each
//! against its own median); the profile keeps [`QUANTILES`] evenly spaced quantiles of them.

use std::path::Path;

use serde::Deserialize;

use crate::error::{read_text, ImportError};

/// Quantiles the profile keeps: the 99th percentile and beyond (where the milliseconds are)
/// stay 2 points each.
pub const QUANTILES: usize = 200;

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct WakeUpLevel {
    pub load_pairs: u32,
    pub busy_cores: f64,
    pub secs: Vec<f64>,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct WakeUpLog {
    pub ranks: u32,
    pub results: Vec<WakeUpLevel>,
    /// Which of `results` is the level without load (found by [`parse`]).
    #[serde(skip)]
    pub unloaded: usize,
}

pub fn load(path: &Path) -> Result<WakeUpLog, ImportError> {
    parse(&read_text(path)?, &path.display().to_string())
}

pub fn parse(text: &str, file: &str) -> Result<WakeUpLog, ImportError> {
    let mut log: WakeUpLog = serde_json::from_str(text).map_err(|e| {
        ImportError::at(
            file,
            e.line(),
            format!("the JSON of testbed/workloads/wakeup_load.py ({e})"),
        )
    })?;
    let Some(i) = log.results.iter().position(|l| l.load_pairs == 0) else {
        return Err(ImportError::whole(
            file,
            "`results` with a level of `load_pairs` 0 (the probe alone)",
        ));
    };
    log.unloaded = i;
    let calls = &log.results[i].secs;
    if calls.len() < 100 {
        return Err(ImportError::whole(
            file,
            format!(
                "results[{i}].secs: at least 100 calls to take a tail from, got {}",
                calls.len()
            ),
        ));
    }
    if let Some(k) = calls.iter().position(|s| !(s.is_finite() && *s > 0.0)) {
        return Err(ImportError::whole(
            file,
            format!("results[{i}].secs[{k}]: a call's seconds, > 0"),
        ));
    }
    Ok(log)
}

/// The calls of `log`'s level without load, and each one's extra delay over their median.
pub fn extra_delays(log: &WakeUpLog) -> (Vec<f64>, f64) {
    let level = &log.results[log.unloaded];
    let mut sorted = level.secs.clone();
    sorted.sort_by(f64::total_cmp);
    let median = sorted[sorted.len() / 2];
    let extra = level.secs.iter().map(|s| (s - median).max(0.0)).collect();
    (extra, median)
}

/// `n` evenly spaced quantiles of `values` (the k-th the `(k + 0.5) / n` quantile, the nearest
/// value below), ascending.
pub fn quantiles(values: &[f64], n: usize) -> Vec<f64> {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    (0..n)
        .map(|k| {
            let at = ((k as f64 + 0.5) / n as f64 * sorted.len() as f64) as usize;
            sorted[at.min(sorted.len() - 1)]
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn log(levels: &str) -> String {
        format!(r#"{{"ranks": 8, "results": [{levels}], "cpus": 2}}"#)
    }

    fn calls(secs: &[f64]) -> String {
        secs.iter()
            .map(f64::to_string)
            .collect::<Vec<_>>()
            .join(", ")
    }

    #[test]
    fn the_extra_delay_is_each_call_over_the_median_of_the_level_without_load() {
        // 100 calls: 90 of 0.25 ms, 9 of 0.40 ms, one of 4 ms; a loaded level that is ignored.
        let mut secs = vec![0.25e-3; 90];
        secs.extend([0.4e-3; 9]);
        secs.push(4e-3);
        let text = log(&format!(
            r#"{{"load_pairs": 1, "busy_cores": 1.4, "secs": [0.009, 0.009]}},
               {{"load_pairs": 0, "busy_cores": 1.26, "secs": [{}]}}"#,
            calls(&secs)
        ));
        let parsed = parse(&text, "w.json").unwrap();
        let (extra, median) = extra_delays(&parsed);
        assert_eq!(median, 0.25e-3);
        assert_eq!(extra.iter().filter(|&&e| e == 0.0).count(), 90);
        assert!((extra[99] - 3.75e-3).abs() < 1e-12);
        let q = quantiles(&extra, 10);
        assert_eq!(q.len(), 10);
        assert_eq!(q[0], 0.0);
        assert!(
            (q[9] - 0.15e-3).abs() < 1e-12,
            "the 95th percentile: {}",
            q[9]
        );
        assert!(q.windows(2).all(|w| w[0] <= w[1]));
    }

    #[test]
    fn a_log_without_an_unloaded_level_or_with_too_few_calls_is_refused_by_name() {
        let loaded = log(r#"{"load_pairs": 1, "busy_cores": 1.4, "secs": [0.001]}"#);
        let e = parse(&loaded, "w.json").unwrap_err().to_string();
        assert!(e.contains("w.json") && e.contains("load_pairs"), "{e}");
        let few = log(r#"{"load_pairs": 0, "busy_cores": 1.2, "secs": [0.001, 0.002]}"#);
        let e = parse(&few, "w.json").unwrap_err().to_string();
        assert!(e.contains("at least 100 calls"), "{e}");
        let e = parse("{", "w.json").unwrap_err().to_string();
        assert!(e.contains("wakeup_load.py"), "{e}");
    }
}
