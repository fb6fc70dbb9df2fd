//! A profile's compute section from GEMM timings, however they were measured (`calibrate gpu`
//! through cuBLAS, or PyTorch-measured timings imported from elsewhere): no CUDA here.
//!
//! The workload layer times a matmul layer of F FLOPs as `(F + F½) / (peak × η)`
//! (`sim::workload::compute`). That is a straight line in F, so per dtype a least-squares line
//! of time against FLOPs (weighted 1/time², i.e. relative error, [`crate::fit::fit`]) gives the
//! achieved peak as 1/slope and F½ as intercept / slope; η is then 1. GEMMs of the catalog
//! models' layer shapes (timings with a [`GemmLayer`]) are preferred over a synthetic grid,
//! because they are the sizes the workload actually runs. Those timings also go into the
//! profile as they are (`gemm_times`): the simulator times every layer product it finds there
//! from its own measurement, and only the others from the line.

use std::collections::BTreeMap;

use serde::Serialize;
use sim::engine::SimTime;
use sim::profile::{Calibrated, ComputeCalibration, GemmTime, MeasuredGemms, Provenance};
use sim::units::{Bandwidth, Bytes, Duration};

use crate::fit::{self, Point, Weighting};

/// Which layer a GEMM stands for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GemmLayer {
    /// A catalog model name (`resnet50`).
    pub model: String,
    /// The layer's name in the catalog (`layer1.0.conv2`).
    pub layer: String,
    pub batch: u64,
    /// `forward`, `input_grad` or `weight_grad`.
    pub pass: String,
}

/// One timed GEMM: `count` products `(m×k)·(k×n)`, median seconds over repetitions.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GemmTiming {
    /// `fp32`, `tf32`, `fp16`, `bf16`: the profile's `peak_flops_per_s` keys.
    pub dtype: String,
    pub m: u64,
    pub n: u64,
    pub k: u64,
    pub count: u64,
    pub median_secs: f64,
    /// `Some` for a catalog layer's GEMM, `None` for a grid shape.
    pub layer: Option<GemmLayer>,
}

impl GemmTiming {
    /// `2·m·n·k·count`.
    pub fn flops(&self) -> f64 {
        2.0 * self.m as f64 * self.n as f64 * self.k as f64 * self.count as f64
    }
}

/// Which timings a dtype's line was fitted to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum GemmSource {
    LayerShapes,
    Grid,
}

/// The line `time = (F + F½) / peak` fitted to one dtype's GEMMs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DtypeFit {
    pub dtype: String,
    pub source: GemmSource,
    /// 1 / slope, FLOP/s.
    pub peak_flops_per_s: f64,
    /// intercept / slope, FLOPs; may be negative when small GEMMs run faster than the line.
    pub half_efficiency_flops: f64,
    pub r_squared: f64,
    pub points: usize,
    /// The models whose layers were timed (layer shapes only), sorted.
    pub models: Vec<String>,
}

impl DtypeFit {
    pub fn describe(&self) -> String {
        let what = match self.source {
            GemmSource::LayerShapes => format!(
                "{} GEMMs of the layer shapes of {}",
                self.points,
                self.models.join(", ")
            ),
            GemmSource::Grid => format!("{} GEMMs of the shape grid", self.points),
        };
        format!(
            "{} {what}: least-squares line of time vs FLOPs (weights 1/time^2), R2 {:.4}",
            self.dtype, self.r_squared
        )
    }
}

fn fit_points(dtype: &str, source: GemmSource, ts: &[&GemmTiming]) -> Option<DtypeFit> {
    let pts: Vec<Point> = ts
        .iter()
        .filter(|t| t.median_secs.is_finite() && t.median_secs > 0.0 && t.flops() > 0.0)
        .map(|t| Point {
            bytes: t.flops(),
            secs: t.median_secs,
        })
        .collect();
    let line = fit::fit(&pts, Weighting::Relative).ok()?;
    let mut models: Vec<String> = ts
        .iter()
        .filter_map(|t| t.layer.as_ref().map(|l| l.model.clone()))
        .collect();
    models.sort();
    models.dedup();
    Some(DtypeFit {
        dtype: dtype.to_string(),
        source,
        peak_flops_per_s: line.beta_bytes_per_s,
        half_efficiency_flops: line.alpha_secs * line.beta_bytes_per_s,
        r_squared: line.r_squared,
        points: pts.len(),
        models,
    })
}

/// One line per dtype (in order of first appearance): fitted to its layer-shape GEMMs when it
/// has at least three of distinct size, else to its grid GEMMs; a dtype with neither is left out.
pub fn fit_gemms(gemms: &[GemmTiming]) -> Vec<DtypeFit> {
    let mut dtypes: Vec<&str> = Vec::new();
    for g in gemms {
        if !dtypes.contains(&g.dtype.as_str()) {
            dtypes.push(&g.dtype);
        }
    }
    dtypes
        .into_iter()
        .filter_map(|dt| {
            let of = |layer: bool| -> Vec<&GemmTiming> {
                gemms
                    .iter()
                    .filter(|g| g.dtype == dt && g.layer.is_some() == layer)
                    .collect()
            };
            fit_points(dt, GemmSource::LayerShapes, &of(true))
                .or_else(|| fit_points(dt, GemmSource::Grid, &of(false)))
        })
        .collect()
}

/// The fit F½ comes from: among the layer-shape fits if there are any, else among the grid
/// fits, the `fp32` one, else the first.
pub fn half_efficiency_fit(fits: &[DtypeFit]) -> Option<&DtypeFit> {
    let source = if fits.iter().any(|f| f.source == GemmSource::LayerShapes) {
        GemmSource::LayerShapes
    } else {
        GemmSource::Grid
    };
    let of_source = || fits.iter().filter(move |f| f.source == source);
    of_source()
        .find(|f| f.dtype == "fp32")
        .or_else(|| of_source().next())
}

/// A profile's compute section from GEMM timings.
///
/// Contract:
/// - `gemms`: any mix of grid GEMMs (`layer: None`) and layer-shape GEMMs (`layer: Some`), any
///   dtypes; timings that are not positive and finite are ignored. Per dtype,
///   `peak_flops_per_s[dtype]` = 1/slope of the line fitted by [`fit_gemms`] (layer shapes
///   preferred); `half_efficiency_flops` = intercept/slope of [`half_efficiency_fit`]'s line,
///   clamped at 0; `matmul_efficiency` = 1 (the peaks are achieved rates already).
/// - `copy_bytes_per_s`: bytes per second of a large device-to-device copy (each byte read once
///   and written once), so `memory_bandwidth` = 2 × this; `memory_efficiency` = 1.
/// - `memory_bytes`: the GPU's memory capacity. `layer_overhead` = 0 (the fixed cost per
///   kernel is in F½); no DDP overhead, no measured layer times.
/// - `gemm_times`: every layer-shape GEMM of `gemms`, one per dtype and shape (`None` without
///   any), which the simulator uses in place of the line for the products it covers.
/// - `prov(detail)` makes each value's provenance from a sentence about how it was derived.
///
/// `None` when no dtype has three GEMMs of distinct size or there is no copy rate.
pub fn compute_section(
    gemms: &[GemmTiming],
    copy_bytes_per_s: Option<f64>,
    device: &str,
    memory_bytes: u64,
    prov: &dyn Fn(String) -> Provenance,
) -> Option<ComputeCalibration> {
    let copy = copy_bytes_per_s.filter(|c| c.is_finite() && *c > 0.0)?;
    let fits = fit_gemms(gemms);
    let half = half_efficiency_fit(&fits)?;
    let peaks: BTreeMap<String, Calibrated<f64>> = fits
        .iter()
        .map(|f| {
            (
                f.dtype.clone(),
                Calibrated {
                    value: f.peak_flops_per_s,
                    provenance: prov(format!(
                        "1/slope of {}; the achieved peak, not the datasheet's",
                        f.describe()
                    )),
                },
            )
        })
        .collect();
    let clamped = if half.half_efficiency_flops < 0.0 {
        " (negative intercept, clamped to 0)"
    } else {
        ""
    };
    Some(ComputeCalibration {
        device: device.to_string(),
        peak_flops_per_s: peaks,
        matmul_efficiency: Calibrated {
            value: 1.0,
            provenance: prov("1: the peaks are already the measured GEMM rates".into()),
        },
        half_efficiency_flops: Calibrated {
            value: half.half_efficiency_flops.max(0.0),
            provenance: prov(format!(
                "intercept/slope of {}{clamped}: the FLOPs a kernel's fixed cost is worth",
                half.describe()
            )),
        },
        memory_bandwidth: Calibrated {
            value: Bandwidth(2.0 * copy * 8.0),
            provenance: prov(
                "device-to-device copy rate, read plus write bytes (2 x the copy rate)".into(),
            ),
        },
        memory_efficiency: Calibrated {
            value: 1.0,
            provenance: prov("1: memory_bandwidth is already the measured copy rate".into()),
        },
        memory_capacity: Calibrated {
            value: Bytes(memory_bytes),
            provenance: prov("the device's total memory".into()),
        },
        layer_overhead: Calibrated {
            value: Duration(SimTime::from_secs_f64(0.0)),
            provenance: prov("0: the fixed cost per kernel is in half_efficiency_flops".into()),
        },
        ddp_overhead_per_tensor: None,
        layer_times: Vec::new(),
        gemm_times: layer_gemm_times(gemms, prov),
        eager_host: Default::default(),
        eager_kernels: Default::default(),
    })
}

/// The layer-shape GEMMs of `gemms` (those with a [`GemmLayer`]), one per dtype and shape, as the
/// profile's `gemm_times`: the simulator times each layer product it covers from it.
fn layer_gemm_times(
    gemms: &[GemmTiming],
    prov: &dyn Fn(String) -> Provenance,
) -> Option<MeasuredGemms> {
    let mut by_shape: BTreeMap<(String, u64, u64, u64, u64), f64> = BTreeMap::new();
    let mut models: Vec<&str> = Vec::new();
    for g in gemms {
        let Some(layer) = &g.layer else { continue };
        if !(g.median_secs.is_finite() && g.median_secs > 0.0) {
            continue;
        }
        if !models.contains(&layer.model.as_str()) {
            models.push(&layer.model);
        }
        by_shape.insert((g.dtype.clone(), g.m, g.n, g.k, g.count), g.median_secs);
    }
    if by_shape.is_empty() {
        return None;
    }
    let times: Vec<GemmTime> = by_shape
        .into_iter()
        .map(|((dtype, m, n, k, count), secs)| GemmTime {
            dtype,
            m,
            n,
            k,
            count,
            secs,
        })
        .collect();
    Some(MeasuredGemms {
        provenance: prov(format!(
            "{} distinct GEMMs timed alone at the layer shapes of {} (forward, input and weight \
             gradient products; median of the repetitions)",
            times.len(),
            models.join(", ")
        )),
        times,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prov(detail: String) -> Provenance {
        Provenance {
            source: "test".into(),
            detail,
            date: None,
        }
    }

    /// GEMMs timed exactly on `(F + half) / peak`.
    fn synthetic(dtype: &str, peak: f64, half: f64, layer: bool) -> Vec<GemmTiming> {
        let shapes = [
            (64u64, 64u64, 64u64, 1u64),
            (512, 256, 128, 1),
            (100352, 64, 576, 1),
            (3136, 4, 36, 32),
            (2048, 2048, 2048, 1),
        ];
        let passes = ["forward", "input_grad", "weight_grad"];
        shapes
            .iter()
            .zip(passes.iter().cycle())
            .map(|(&(m, n, k, count), pass)| {
                let f = 2.0 * (m * n * k * count) as f64;
                GemmTiming {
                    dtype: dtype.into(),
                    m,
                    n,
                    k,
                    count,
                    median_secs: (f + half) / peak,
                    layer: layer.then(|| GemmLayer {
                        model: "resnet50".into(),
                        layer: "layer1.0.conv2".into(),
                        batch: 32,
                        pass: pass.to_string(),
                    }),
                }
            })
            .collect()
    }

    fn rel(a: f64, b: f64) -> f64 {
        (a - b).abs() / b.abs()
    }

    #[test]
    fn a_known_peak_and_half_efficiency_work_are_recovered() {
        let mut g = synthetic("fp32", 50e12, 4e9, true);
        g.extend(synthetic("bf16", 400e12, 2e10, true));
        let c = compute_section(&g, Some(1.5e12), "H100", 80 << 30, &prov).unwrap();
        assert!(rel(c.peak_flops_per_s["fp32"].value, 50e12) < 1e-6);
        assert!(rel(c.peak_flops_per_s["bf16"].value, 400e12) < 1e-6);
        // F½ from fp32, not bf16.
        assert!(rel(c.half_efficiency_flops.value, 4e9) < 1e-6);
        assert_eq!(c.memory_bandwidth.value.bytes_per_s(), 3e12);
        assert_eq!(c.memory_capacity.value, Bytes(80 << 30));
        assert_eq!(c.matmul_efficiency.value, 1.0);
        assert!(c.peak_flops_per_s["fp32"]
            .provenance
            .detail
            .contains("layer shapes of resnet50"));
        assert!(c.half_efficiency_flops.provenance.detail.contains("fp32"));
    }

    #[test]
    fn layer_shapes_win_over_the_grid_for_the_same_dtype() {
        let mut g = synthetic("fp32", 10e12, 1e9, false);
        g.extend(synthetic("fp32", 40e12, 3e9, true));
        g.extend(synthetic("fp16", 200e12, 1e9, false));
        let fits = fit_gemms(&g);
        assert_eq!(fits.len(), 2);
        assert_eq!(fits[0].source, GemmSource::LayerShapes);
        assert!(rel(fits[0].peak_flops_per_s, 40e12) < 1e-6);
        // fp16 has only grid GEMMs: its peak still comes from them.
        assert_eq!(fits[1].source, GemmSource::Grid);
        assert!(rel(fits[1].peak_flops_per_s, 200e12) < 1e-6);
        let c = compute_section(&g, Some(1e12), "x", 1, &prov).unwrap();
        assert!(rel(c.half_efficiency_flops.value, 3e9) < 1e-6);
    }

    #[test]
    fn without_fp32_the_first_dtype_gives_the_half_efficiency_work() {
        let mut g = synthetic("tf32", 100e12, 5e9, true);
        g.extend(synthetic("bf16", 300e12, 7e9, true));
        let c = compute_section(&g, Some(1e12), "x", 1, &prov).unwrap();
        assert!(rel(c.half_efficiency_flops.value, 5e9) < 1e-6);
    }

    #[test]
    fn too_few_gemms_or_no_copy_rate_give_no_section() {
        let g = synthetic("fp32", 50e12, 4e9, false);
        assert!(compute_section(&g[..2], Some(1e12), "x", 1, &prov).is_none());
        assert!(compute_section(&g, None, "x", 1, &prov).is_none());
        assert!(compute_section(&g, Some(1e12), "x", 1, &prov).is_some());
    }
}
