//! `suite.py shaper_gap` logs (testbed/workloads/fanout.py with one receiver): how many bytes a
//! link's shaper lets through at once after an idle gap, its token bucket's depth.
//!
//! The log: `{"runs": [{"gap_secs", "probe_bytes", "bytes", "secs"}, ...], ...}`: one host
//! sent `bytes` to another after `gap_secs` idle (and, with `probe_bytes` > 0, after a small
//! message of that size sent and answered first); `secs` runs from the send to the
//! receiver's one-byte answer once it had everything.
//!
//! The fit, on the runs without a probe. A token bucket of depth `B` refilled at the link's
//! payload rate `C` while the link idles lets `min(B, C × idle)` bytes through at once, then
//! holds the rest to `C`: a send of `S > B` after a long gap takes `T0 + (S − B) / C`, with
//! `T0` the round trip of the answer.
//!
//! - `C`: back to back (the smallest gap, 0 in the suite) the link idles only while the answer
//!   comes back and the sender loops, about `2 × T0`, and the largest size takes
//!   `T0 + (S − 2 × T0 × C) / C`: `C = S / (t + T0)`. On the testbed this is within 0.3% of
//!   iperf3's 10-second rate on each of the four topologies (190.9 against 191.3 Mbit/s on
//!   the star).
//! - Full gaps: those at which the largest size's median is within 2% of its median at the
//!   longest gap (the bucket was full before the send).
//! - `T0`: the smallest size's median over the full gaps (it goes through at once).
//! - `B`: per run of the largest size at the full gaps, `S − C × (t − T0)`; the fit is their
//!   median, with the interquartile range. Only the largest size: TCP hands the shaper
//!   packets of up to 64 KiB (GSO), which a shaper lets go whole while it has any tokens, so
//!   a send of a few such packets can get up to one packet more through at once than the
//!   bucket holds (on the testbed's 150 Mbit/s links, 64 and 128 KiB sends got 45 and 54 KB
//!   through at once after a full gap where the largest got 36 KB, the setting's depth).
//!
//! The runs with a probe are reported, not fitted: how long the sizes took after a small
//! message against without one, at the full gaps (a message that spends the bucket makes
//! the next one slower by its bytes over `C`).

use std::collections::BTreeSet;
use std::path::Path;

use serde::Deserialize;

use crate::error::{read_text, ImportError};

/// One send: its idle gap before, the probe before it (0: none), its size and time.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct GapRun {
    pub gap_secs: f64,
    #[serde(default)]
    pub probe_bytes: u64,
    pub bytes: u64,
    pub secs: f64,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct ShaperGapLog {
    pub runs: Vec<GapRun>,
}

pub fn load(path: &Path) -> Result<ShaperGapLog, ImportError> {
    parse(&read_text(path)?, &path.display().to_string())
}

pub fn parse(text: &str, file: &str) -> Result<ShaperGapLog, ImportError> {
    let log: ShaperGapLog = serde_json::from_str(text).map_err(|e| {
        ImportError::at(
            file,
            e.line(),
            format!("the JSON of testbed/workloads/suite.py shaper_gap ({e})"),
        )
    })?;
    if let Some(i) = log.runs.iter().position(|r| {
        r.bytes == 0
            || !(r.secs.is_finite() && r.secs > 0.0)
            || !(r.gap_secs.is_finite() && r.gap_secs >= 0.0)
    }) {
        return Err(ImportError::whole(
            file,
            format!("runs[{i}]: bytes > 0, secs > 0 and gap_secs >= 0"),
        ));
    }
    let plain: Vec<&GapRun> = log.runs.iter().filter(|r| r.probe_bytes == 0).collect();
    let gaps: BTreeSet<u64> = plain.iter().map(|r| r.gap_secs.to_bits()).collect();
    let sizes: BTreeSet<u64> = plain.iter().map(|r| r.bytes).collect();
    if gaps.len() < 2 || sizes.len() < 2 {
        return Err(ImportError::whole(
            file,
            "runs without a probe (probe_bytes 0) at two or more gaps and two or more sizes",
        ));
    }
    Ok(log)
}

/// A probe size, and per message size the median seconds after it and without it over the
/// full gaps.
pub type ProbeEffect = (u64, Vec<(u64, f64, f64)>);

/// The fitted bucket and what it rests on.
#[derive(Debug, Clone, PartialEq)]
pub struct BucketFit {
    /// Bytes the bucket lets through at once when full, and its interquartile range.
    pub depth_bytes: f64,
    pub depth_iqr: (f64, f64),
    /// The link's payload rate, bytes/s, and the answer's round trip, seconds.
    pub rate_bytes_per_s: f64,
    pub round_trip_secs: f64,
    /// The gaps taken as full (seconds), and the runs the depth comes from (the largest
    /// size's at those gaps).
    pub full_gaps: Vec<f64>,
    pub used: usize,
    /// Per probe size, per message size: median seconds after the probe and without one,
    /// over the full gaps.
    pub probes: Vec<ProbeEffect>,
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn quantile(sorted: &[f64], q: f64) -> f64 {
    sorted[((sorted.len() - 1) as f64 * q).round() as usize]
}

/// Fits the bucket (module doc); an error says what the log lacked.
pub fn fit(log: &ShaperGapLog) -> Result<BucketFit, String> {
    let times = |probe: u64, gap: f64, bytes: u64| -> Vec<f64> {
        log.runs
            .iter()
            .filter(|r| r.probe_bytes == probe && r.gap_secs == gap && r.bytes == bytes)
            .map(|r| r.secs)
            .collect()
    };
    let plain: Vec<&GapRun> = log.runs.iter().filter(|r| r.probe_bytes == 0).collect();
    let mut gaps: Vec<f64> = plain.iter().map(|r| r.gap_secs).collect();
    gaps.sort_by(f64::total_cmp);
    gaps.dedup();
    let (smallest, largest) = (
        plain.iter().map(|r| r.bytes).min().unwrap_or(0),
        plain.iter().map(|r| r.bytes).max().unwrap_or(0),
    );
    let med = |probe: u64, gap: f64, bytes: u64| {
        let v = times(probe, gap, bytes);
        (!v.is_empty()).then(|| median(v))
    };
    let longest = *gaps.last().ok_or("runs without a probe")?;
    let settled = med(0, longest, largest).ok_or("the largest size at the longest gap")?;
    let full_gaps: Vec<f64> = gaps
        .iter()
        .copied()
        .filter(|&g| med(0, g, largest).is_some_and(|t| (t - settled).abs() <= 0.02 * settled))
        .collect();
    if full_gaps.len() == gaps.len() {
        return Err(format!(
            "a gap at which the bucket had not refilled (the largest size, {largest} B, took \
             the same at every gap): the suite's gap 0"
        ));
    }
    let smallest_full: Vec<f64> = full_gaps
        .iter()
        .flat_map(|&g| times(0, g, smallest))
        .collect();
    if smallest_full.is_empty() {
        return Err(format!(
            "runs of the smallest size ({smallest} B) at the gaps that fill the bucket: none"
        ));
    }
    let round_trip = median(smallest_full);
    let back_to_back = med(0, gaps[0], largest).ok_or("the largest size at the smallest gap")?;
    let rate = largest as f64 / (back_to_back + round_trip);
    let mut depths: Vec<f64> = plain
        .iter()
        .filter(|r| full_gaps.contains(&r.gap_secs) && r.bytes == largest)
        .map(|r| r.bytes as f64 - rate * (r.secs - round_trip))
        .collect();
    if depths.is_empty() {
        return Err(format!(
            "runs of the largest size at the full gaps ({} s): none",
            full_gaps
                .iter()
                .map(|g| g.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    depths.sort_by(f64::total_cmp);
    let mut probe_sizes: Vec<u64> = log
        .runs
        .iter()
        .map(|r| r.probe_bytes)
        .filter(|&p| p > 0)
        .collect();
    probe_sizes.sort_unstable();
    probe_sizes.dedup();
    let mut sizes: Vec<u64> = plain.iter().map(|r| r.bytes).collect();
    sizes.sort_unstable();
    sizes.dedup();
    let over_full = |probe: u64, bytes: u64| {
        let v: Vec<f64> = full_gaps
            .iter()
            .flat_map(|&g| times(probe, g, bytes))
            .collect();
        (!v.is_empty()).then(|| median(v))
    };
    let probes = probe_sizes
        .iter()
        .map(|&p| {
            let rows = sizes
                .iter()
                .filter_map(|&b| Some((b, over_full(p, b)?, over_full(0, b)?)))
                .collect();
            (p, rows)
        })
        .collect();
    Ok(BucketFit {
        depth_bytes: median(depths.clone()),
        depth_iqr: (quantile(&depths, 0.25), quantile(&depths, 0.75)),
        rate_bytes_per_s: rate,
        round_trip_secs: round_trip,
        full_gaps,
        used: depths.len(),
        probes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs of a shaper with a `depth` bucket at `rate` bytes/s and a `rtt` answer, the bucket
    /// refilled by `(gap + 2 × rtt) × rate` since the last send (which left it empty).
    fn shaper(depth: f64, rate: f64, rtt: f64, probe: u64) -> ShaperGapLog {
        let mut runs = Vec::new();
        for gap in [0.0, 0.5e-3, 1e-3, 3e-3, 20e-3] {
            for bytes in [16384u64, 65536, 262144] {
                let tokens = depth.min(rate * (gap + 2.0 * rtt)) - probe as f64;
                let secs = rtt + (bytes as f64 - tokens.max(0.0)).max(0.0) / rate;
                for _ in 0..5 {
                    runs.push(GapRun {
                        gap_secs: gap,
                        probe_bytes: 0,
                        bytes,
                        secs,
                    });
                    if probe > 0 {
                        runs.push(GapRun {
                            gap_secs: gap,
                            probe_bytes: probe,
                            bytes,
                            secs: secs + probe as f64 / rate,
                        });
                    }
                }
            }
        }
        ShaperGapLog { runs }
    }

    #[test]
    fn the_fit_finds_the_depth_and_rate_of_a_bucket_that_refills_while_idle() {
        let (depth, rate, rtt) = (48_000.0, 24e6, 60e-6);
        let fit = fit(&shaper(depth, rate, rtt, 0)).unwrap();
        assert!((fit.rate_bytes_per_s / rate - 1.0).abs() < 0.01, "{fit:?}");
        assert!((fit.depth_bytes / depth - 1.0).abs() < 0.02, "{fit:?}");
        assert_eq!(fit.full_gaps, vec![3e-3, 20e-3]);
        assert!(fit.probes.is_empty());
    }

    #[test]
    fn a_probe_that_spends_the_bucket_shows_as_the_sizes_taking_longer_after_it() {
        let fit = fit(&shaper(48_000.0, 24e6, 60e-6, 16384)).unwrap();
        let (probe, rows) = &fit.probes[0];
        assert_eq!(*probe, 16384);
        let (bytes, after, without) = rows[2];
        assert_eq!(bytes, 262144);
        assert!((after - without - 16384.0 / 24e6).abs() < 1e-6, "{rows:?}");
    }

    #[test]
    fn a_log_whose_largest_size_never_waited_for_the_bucket_is_refused() {
        let mut log = shaper(48_000.0, 24e6, 60e-6, 0);
        log.runs.retain(|r| r.gap_secs >= 3e-3);
        let e = fit(&log).unwrap_err();
        assert!(e.contains("gap 0"), "{e}");
    }

    #[test]
    fn a_log_without_the_smallest_size_after_full_gaps_is_refused() {
        let mut log = shaper(48_000.0, 24e6, 60e-6, 0);
        log.runs.retain(|r| r.bytes != 16384 || r.gap_secs < 3e-3);
        let e = fit(&log).unwrap_err();
        assert!(e.contains("smallest size"), "{e}");
    }

    #[test]
    fn a_run_without_a_time_is_refused_naming_it() {
        let text = r#"{"runs": [{"gap_secs": 0, "bytes": 16384, "secs": 0}]}"#;
        let e = parse(text, "log.json").unwrap_err().to_string();
        assert!(e.contains("log.json") && e.contains("runs[0]"), "{e}");
    }
}
