//! Alpha-beta fitting: `time = alpha + bytes / beta` by weighted least squares, with R²,
//! residuals and t-distribution confidence intervals (statrs), size-dependent efficiency
//! factors where a line does not fit, and hold-out validation on sizes left out of the fit.
//!
//! Weights are `1 / time²` by default, so the fit minimizes relative error: an nccl-tests sweep
//! spans 8 B to GiB and an unweighted fit would let the largest sizes decide alpha alone.

use serde::Serialize;
use statrs::distribution::{ContinuousCDF, StudentsT};

use sim::net::factors::FactorRow;

/// One measured point: a message of `bytes` took `secs`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Point {
    pub bytes: f64,
    pub secs: f64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Weighting {
    /// Minimize squared relative error (weights 1/time²).
    Relative,
    /// Ordinary least squares on seconds.
    Absolute,
}

/// A fitted line with its statistics.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AlphaBeta {
    pub alpha_secs: f64,
    /// 95% confidence interval of alpha.
    pub alpha_ci95_secs: [f64; 2],
    pub beta_bytes_per_s: f64,
    /// 95% confidence interval of beta; the upper end is infinite when the slope's interval
    /// reaches zero.
    pub beta_ci95_bytes_per_s: [f64; 2],
    /// Weighted coefficient of determination.
    pub r_squared: f64,
    /// `(measured - fitted) / measured` per point, in input order.
    pub rel_residuals: Vec<f64>,
    pub points: usize,
}

impl AlphaBeta {
    pub fn predict_secs(&self, bytes: f64) -> f64 {
        self.alpha_secs + bytes / self.beta_bytes_per_s
    }
    pub fn max_abs_rel_residual(&self) -> f64 {
        self.rel_residuals.iter().fold(0.0, |m, r| m.max(r.abs()))
    }
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum FitError {
    #[error("a fit needs at least 3 points with distinct sizes, got {0}")]
    TooFewPoints(usize),
    #[error("point {index}: expected a positive size and time, got {bytes} B in {secs} s")]
    BadPoint { index: usize, bytes: f64, secs: f64 },
    #[error("the fitted time does not grow with size (slope {slope_secs_per_byte:e} s/B): no bandwidth can be read from these points")]
    NoBandwidth { slope_secs_per_byte: f64 },
}

/// Fits `secs = alpha + bytes / beta`.
pub fn fit(points: &[Point], weighting: Weighting) -> Result<AlphaBeta, FitError> {
    for (index, p) in points.iter().enumerate() {
        if !(p.bytes >= 0.0 && p.secs > 0.0 && p.bytes.is_finite() && p.secs.is_finite()) {
            return Err(FitError::BadPoint {
                index,
                bytes: p.bytes,
                secs: p.secs,
            });
        }
    }
    let n = points.len();
    let distinct = {
        let mut s: Vec<u64> = points.iter().map(|p| p.bytes.to_bits()).collect();
        s.sort_unstable();
        s.dedup();
        s.len()
    };
    if n < 3 || distinct < 2 {
        return Err(FitError::TooFewPoints(n));
    }
    let w: Vec<f64> = points
        .iter()
        .map(|p| match weighting {
            Weighting::Relative => 1.0 / (p.secs * p.secs),
            Weighting::Absolute => 1.0,
        })
        .collect();
    let sw: f64 = w.iter().sum();
    let xm = points.iter().zip(&w).map(|(p, w)| w * p.bytes).sum::<f64>() / sw;
    let ym = points.iter().zip(&w).map(|(p, w)| w * p.secs).sum::<f64>() / sw;
    let sxx: f64 = points
        .iter()
        .zip(&w)
        .map(|(p, w)| w * (p.bytes - xm).powi(2))
        .sum();
    let sxy: f64 = points
        .iter()
        .zip(&w)
        .map(|(p, w)| w * (p.bytes - xm) * (p.secs - ym))
        .sum();
    let syy: f64 = points
        .iter()
        .zip(&w)
        .map(|(p, w)| w * (p.secs - ym).powi(2))
        .sum();
    let slope = sxy / sxx;
    let intercept = ym - slope * xm;
    if slope.partial_cmp(&0.0) != Some(std::cmp::Ordering::Greater) {
        return Err(FitError::NoBandwidth {
            slope_secs_per_byte: slope,
        });
    }
    let ss_res: f64 = points
        .iter()
        .zip(&w)
        .map(|(p, w)| w * (p.secs - intercept - slope * p.bytes).powi(2))
        .sum();
    let r_squared = if syy > 0.0 { 1.0 - ss_res / syy } else { 1.0 };
    let dof = (n - 2) as f64;
    let s2 = ss_res / dof.max(1.0);
    let se_slope = (s2 / sxx).sqrt();
    let se_intercept = (s2 * (1.0 / sw + xm * xm / sxx)).sqrt();
    let t = if n > 2 {
        StudentsT::new(0.0, 1.0, dof)
            .map(|d| d.inverse_cdf(0.975))
            .unwrap_or(f64::NAN)
    } else {
        f64::NAN
    };
    let slope_lo = slope - t * se_slope;
    let slope_hi = slope + t * se_slope;
    Ok(AlphaBeta {
        alpha_secs: intercept,
        alpha_ci95_secs: [intercept - t * se_intercept, intercept + t * se_intercept],
        beta_bytes_per_s: 1.0 / slope,
        beta_ci95_bytes_per_s: [
            1.0 / slope_hi,
            if slope_lo > 0.0 {
                1.0 / slope_lo
            } else {
                f64::INFINITY
            },
        ],
        r_squared,
        rel_residuals: points
            .iter()
            .map(|p| (p.secs - (intercept + slope * p.bytes)) / p.secs)
            .collect(),
        points: n,
    })
}

/// Which sizes to hold back from the fit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Holdout {
    /// Every k-th point (by size order, starting with the second) is held back.
    EveryKth(usize),
    /// Points of at least this many bytes are held back (extrapolation to large sizes).
    Above(u64),
    /// Points below this many bytes are held back (extrapolation to small sizes).
    Below(u64),
}

impl std::str::FromStr for Holdout {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let bytes = |v: &str| sim::units::parse_bytes(v).map_err(|e| e.to_string());
        if let Some(k) = s.strip_prefix("every:") {
            match k.parse::<usize>() {
                Ok(k) if k >= 2 => Ok(Holdout::EveryKth(k)),
                _ => Err(format!("`every:K` with K >= 2, got {s:?}")),
            }
        } else if let Some(v) = s.strip_prefix("above:") {
            Ok(Holdout::Above(bytes(v)?))
        } else if let Some(v) = s.strip_prefix("below:") {
            Ok(Holdout::Below(bytes(v)?))
        } else {
            Err(format!(
                "`every:K`, `above:SIZE` or `below:SIZE` (e.g. every:3, above:64MiB), got {s:?}"
            ))
        }
    }
}

/// The error of a fit on the points it did not see.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HoldoutReport {
    pub fit: AlphaBeta,
    /// (bytes, measured secs, predicted secs, relative error) per held-back point.
    pub held_back: Vec<(f64, f64, f64, f64)>,
    pub mean_abs_rel_error: f64,
    pub max_abs_rel_error: f64,
}

/// Fits on the points `holdout` keeps and reports the error on the others.
pub fn fit_with_holdout(
    points: &[Point],
    holdout: Holdout,
    weighting: Weighting,
) -> Result<HoldoutReport, FitError> {
    let mut sorted = points.to_vec();
    sorted.sort_by(|a, b| a.bytes.total_cmp(&b.bytes));
    let held = |i: usize, p: &Point| match holdout {
        Holdout::EveryKth(k) => i % k == 1,
        Holdout::Above(b) => p.bytes >= b as f64,
        Holdout::Below(b) => p.bytes < b as f64,
    };
    let (mut train, mut test) = (Vec::new(), Vec::new());
    for (i, p) in sorted.iter().enumerate() {
        if held(i, p) {
            test.push(*p)
        } else {
            train.push(*p)
        }
    }
    let f = fit(&train, weighting)?;
    let held_back: Vec<(f64, f64, f64, f64)> = test
        .iter()
        .map(|p| {
            let pred = f.predict_secs(p.bytes);
            (p.bytes, p.secs, pred, (pred - p.secs) / p.secs)
        })
        .collect();
    let n = held_back.len().max(1) as f64;
    Ok(HoldoutReport {
        mean_abs_rel_error: held_back.iter().map(|h| h.3.abs()).sum::<f64>() / n,
        max_abs_rel_error: held_back.iter().fold(0.0, |m, h| m.max(h.3.abs())),
        held_back,
        fit: f,
    })
}

/// Size-dependent factors relative to `nominal_bytes_per_s` (the rate the simulator's link
/// gives) and `nominal_latency_secs`: at each measured size the bandwidth factor is the rate
/// the transfer part reached, `bytes / (secs - alpha)`, over the nominal rate (the fitted rate
/// for latency-bound sizes, where `secs - alpha` is under 5% of `secs`; `bytes / secs` when no
/// nominal latency is given, so the factor carries the whole measured time); the latency
/// factor is the fitted alpha over the nominal latency (1 when none is given). Neighbouring
/// sizes whose factors differ by less than `merge_rel` share a row.
///
/// A size that ran faster than the nominal rate is an error (the nominal rate is wrong, and a
/// factor above 1 would be a link faster than its datasheet), not a factor clamped to 1.
pub fn efficiency_factors(
    points: &[Point],
    fit: &AlphaBeta,
    nominal_bytes_per_s: f64,
    nominal_latency_secs: Option<f64>,
    merge_rel: f64,
) -> Result<Vec<FactorRow>, String> {
    let mut sorted = points.to_vec();
    sorted.sort_by(|a, b| a.bytes.total_cmp(&b.bytes));
    let latency_factor = match nominal_latency_secs {
        Some(l) if l > 0.0 => (fit.alpha_secs / l).max(0.0),
        _ => 1.0,
    };
    let alpha = fit.alpha_secs.max(0.0);
    let mut rows: Vec<FactorRow> = Vec::new();
    for p in &sorted {
        // Where the transfer part is under 5% of the time the size is latency-bound and its
        // rate cannot be read from it: the fitted asymptotic rate stands in.
        // Without a nominal latency the whole measured time goes into the bandwidth factor, so
        // that nominal latency + bytes / (factor x nominal rate) stays close to what was measured.
        let transfer = if nominal_latency_secs.is_some_and(|l| l > 0.0) {
            p.secs - alpha
        } else {
            p.secs
        };
        let rate = if transfer >= 0.05 * p.secs {
            p.bytes / transfer
        } else {
            fit.beta_bytes_per_s
        };
        let bf = (rate / nominal_bytes_per_s).max(1e-6);
        if bf > 1.0 + 1e-9 {
            return Err(format!(
                "at {} B the measured rate {} is above the nominal {} (factor {bf:.3}): \
                 the nominal bandwidth given is lower than the link delivered",
                p.bytes,
                sim::units::fmt_gbytes_per_s(rate),
                sim::units::fmt_gbytes_per_s(nominal_bytes_per_s)
            ));
        }
        let bf = bf.min(1.0);
        let min_bytes = if rows.is_empty() { 0 } else { p.bytes as u64 };
        match rows.last() {
            Some(last)
                if (bf - last.bandwidth_factor).abs() <= merge_rel * last.bandwidth_factor => {}
            _ => rows.push(FactorRow {
                min_bytes,
                bandwidth_factor: bf,
                latency_factor,
            }),
        }
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(alpha: f64, beta: f64) -> Vec<Point> {
        (3..34)
            .map(|k| {
                let b = (1u64 << k) as f64;
                Point {
                    bytes: b,
                    secs: alpha + b / beta,
                }
            })
            .collect()
    }

    #[test]
    fn a_perfect_line_is_recovered_exactly() {
        for w in [Weighting::Relative, Weighting::Absolute] {
            let f = fit(&line(5e-6, 100e9), w).unwrap();
            assert!((f.alpha_secs - 5e-6).abs() < 1e-15, "{f:?}");
            assert!((f.beta_bytes_per_s / 100e9 - 1.0).abs() < 1e-9, "{f:?}");
            assert!((f.r_squared - 1.0).abs() < 1e-12);
            assert!(f.max_abs_rel_residual() < 1e-9);
        }
    }

    #[test]
    fn confidence_intervals_contain_the_truth_and_shrink_with_less_noise() {
        let noisy = |amp: f64| -> Vec<Point> {
            line(10e-6, 20e9)
                .into_iter()
                .enumerate()
                .map(|(i, p)| Point {
                    bytes: p.bytes,
                    secs: p.secs * (1.0 + amp * if i % 2 == 0 { 1.0 } else { -1.0 }),
                })
                .collect()
        };
        let wide = fit(&noisy(0.05), Weighting::Relative).unwrap();
        let narrow = fit(&noisy(0.005), Weighting::Relative).unwrap();
        assert!(
            wide.alpha_ci95_secs[0] < 10e-6 && 10e-6 < wide.alpha_ci95_secs[1],
            "{wide:?}"
        );
        assert!(
            wide.beta_ci95_bytes_per_s[0] < 20e9 && 20e9 < wide.beta_ci95_bytes_per_s[1],
            "{wide:?}"
        );
        let width = |f: &AlphaBeta| f.alpha_ci95_secs[1] - f.alpha_ci95_secs[0];
        assert!(width(&narrow) < width(&wide) / 5.0);
        assert!(wide.r_squared < narrow.r_squared);
    }

    #[test]
    fn holdout_on_a_line_predicts_held_back_sizes_exactly() {
        let r =
            fit_with_holdout(&line(2e-6, 50e9), Holdout::EveryKth(3), Weighting::Relative).unwrap();
        assert_eq!(r.held_back.len(), 10);
        assert!(r.max_abs_rel_error < 1e-9);
        let r = fit_with_holdout(
            &line(2e-6, 50e9),
            Holdout::Above(1 << 30),
            Weighting::Relative,
        )
        .unwrap();
        assert_eq!(r.held_back.len(), 4);
        assert!(r.max_abs_rel_error < 1e-9);
    }

    #[test]
    fn too_few_points_and_flat_data_are_errors() {
        assert_eq!(
            fit(&line(1e-6, 1e9)[..2], Weighting::Relative),
            Err(FitError::TooFewPoints(2))
        );
        let flat: Vec<Point> = (0..5)
            .map(|i| Point {
                bytes: (i + 1) as f64,
                secs: 1e-5,
            })
            .collect();
        assert!(matches!(
            fit(&flat, Weighting::Relative),
            Err(FitError::NoBandwidth { .. })
        ));
        let bad = [
            Point {
                bytes: 1.0,
                secs: 0.0,
            },
            Point {
                bytes: 2.0,
                secs: 1.0,
            },
            Point {
                bytes: 3.0,
                secs: 1.0,
            },
        ];
        assert!(matches!(
            fit(&bad, Weighting::Relative),
            Err(FitError::BadPoint { index: 0, .. })
        ));
    }

    #[test]
    fn factors_of_a_perfect_line_are_one_row_at_the_fitted_rate() {
        let pts = line(5e-6, 100e9);
        let f = fit(&pts, Weighting::Relative).unwrap();
        let rows = efficiency_factors(&pts, &f, 200e9, Some(2.5e-6), 0.05).unwrap();
        assert_eq!(rows.len(), 1, "{rows:?}");
        assert!((rows[0].bandwidth_factor - 0.5).abs() < 1e-6);
        assert!((rows[0].latency_factor - 2.0).abs() < 1e-6);
    }

    #[test]
    fn without_a_nominal_latency_the_factor_carries_the_whole_time() {
        let pts = line(5e-6, 100e9);
        let f = fit(&pts, Weighting::Relative).unwrap();
        let rows = efficiency_factors(&pts, &f, 200e9, None, 0.0).unwrap();
        for p in pts.iter().skip(1) {
            let r = rows
                .iter()
                .rev()
                .find(|r| p.bytes as u64 >= r.min_bytes)
                .unwrap();
            let predicted = p.bytes / (r.bandwidth_factor * 200e9);
            assert!(
                (predicted / p.secs - 1.0).abs() < 1e-9 || r.bandwidth_factor == 1e-6,
                "{p:?} {r:?}"
            );
            assert_eq!(r.latency_factor, 1.0);
        }
    }

    #[test]
    fn holdout_spec_parses_and_rejects_nonsense() {
        assert_eq!("every:3".parse::<Holdout>(), Ok(Holdout::EveryKth(3)));
        assert_eq!(
            "above:64MiB".parse::<Holdout>(),
            Ok(Holdout::Above(64 << 20))
        );
        assert!("every:1".parse::<Holdout>().is_err());
        assert!("sometimes"
            .parse::<Holdout>()
            .unwrap_err()
            .contains("every:K"));
    }
}
