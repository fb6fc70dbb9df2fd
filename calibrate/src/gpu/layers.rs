//! The catalog models' layers as the GEMMs `calibrate gpu` times: for each layer GEMM
//! ([`sim::workload::catalog::GemmShape`]) at each batch size, the forward product and the two
//! backward products, with identical shapes measured once.
//!
//! For a forward product `C (M×N) = A (M×K) · W (K×N)` (`count` of them): the input gradient
//! `dA = dC · Wᵀ` is `M × K` from `N`, and the weight gradient `dWᵀ = dCᵀ · A` is `N × K` over
//! `M`. All three run as plain column-major GEMMs without transposes: these are GEMM
//! equivalents of the layers (cuDNN's convolution kernels are not GEMM calls), sized exactly.

use std::collections::BTreeMap;

use serde::Serialize;
use sim::workload::catalog::Model;

use super::measure::Stat;
use crate::compute::{GemmLayer, GemmTiming};

/// The three products of a layer GEMM in training.
pub const PASSES: [&str; 3] = ["forward", "input_grad", "weight_grad"];

/// `(m, n, k, count)` of `pass` for a forward product `fwd`.
pub fn pass_shape(fwd: (u64, u64, u64, u64), pass: &str) -> (u64, u64, u64, u64) {
    let (m, n, k, c) = fwd;
    match pass {
        "input_grad" => (m, k, n, c),
        "weight_grad" => (n, k, m, c),
        _ => (m, n, k, c),
    }
}

/// One GEMM to time: a pass of one layer GEMM at one batch in one dtype.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PlannedGemm {
    pub model: String,
    pub layer: String,
    /// Which of the layer's GEMMs (0 for convolutions and linear layers).
    pub gemm: usize,
    pub batch: u64,
    pub dtype: String,
    pub pass: &'static str,
    pub m: u64,
    pub n: u64,
    pub k: u64,
    pub count: u64,
}

impl PlannedGemm {
    /// What a measurement is keyed on: identical keys are timed once.
    pub fn key(&self) -> (String, u64, u64, u64, u64) {
        (self.dtype.clone(), self.m, self.n, self.k, self.count)
    }
    pub fn flops(&self) -> f64 {
        2.0 * self.m as f64 * self.n as f64 * self.k as f64 * self.count as f64
    }
}

/// Every pass of every layer GEMM of `models` at each of `batches` in each of `dtypes`, in the
/// order model, batch, dtype, layer, GEMM, pass.
pub fn plan(models: &[Model], batches: &[u64], dtypes: &[String]) -> Vec<PlannedGemm> {
    let mut out = Vec::new();
    for model in models {
        for &batch in batches {
            for dtype in dtypes {
                for (li, layer) in model.layers.iter().enumerate() {
                    for (gi, g) in layer.gemms.iter().enumerate() {
                        for pass in PASSES {
                            // The model's input needs no gradient: training never computes the
                            // first layer's input gradient.
                            if li == 0 && pass == "input_grad" {
                                continue;
                            }
                            let (m, n, k, count) = pass_shape(g.at_batch(batch), pass);
                            out.push(PlannedGemm {
                                model: model.name.clone(),
                                layer: layer.name.clone(),
                                gemm: gi,
                                batch,
                                dtype: dtype.clone(),
                                pass,
                                m,
                                n,
                                k,
                                count,
                            });
                        }
                    }
                }
            }
        }
    }
    out
}

/// The distinct `(dtype, m, n, k, count)` of a plan, sorted.
pub fn distinct_shapes(plan: &[PlannedGemm]) -> Vec<(String, u64, u64, u64, u64)> {
    let mut v: Vec<_> = plan.iter().map(PlannedGemm::key).collect();
    v.sort();
    v.dedup();
    v
}

/// A timed [`PlannedGemm`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LayerGemmTime {
    #[serde(flatten)]
    pub gemm: PlannedGemm,
    pub time: Stat,
}

impl LayerGemmTime {
    pub fn timing(&self) -> GemmTiming {
        let g = &self.gemm;
        GemmTiming {
            dtype: g.dtype.clone(),
            m: g.m,
            n: g.n,
            k: g.k,
            count: g.count,
            median_secs: self.time.median_secs,
            layer: Some(GemmLayer {
                model: g.model.clone(),
                layer: g.layer.clone(),
                batch: g.batch,
                pass: g.pass.to_string(),
            }),
        }
    }
}

/// Sums over the layers of one model at one batch in one dtype.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LayerSummary {
    pub model: String,
    pub batch: u64,
    pub dtype: String,
    pub gemms: usize,
    pub forward_secs: f64,
    pub forward_flops: f64,
    /// Input plus weight gradients.
    pub backward_secs: f64,
    pub backward_flops: f64,
}

/// One [`LayerSummary`] per (model, batch, dtype), in the order the timings first name them.
pub fn summarize(times: &[LayerGemmTime]) -> Vec<LayerSummary> {
    let mut order: Vec<(String, u64, String)> = Vec::new();
    let mut sums: BTreeMap<(String, u64, String), LayerSummary> = BTreeMap::new();
    for t in times {
        let g = &t.gemm;
        let key = (g.model.clone(), g.batch, g.dtype.clone());
        let s = sums.entry(key.clone()).or_insert_with(|| {
            order.push(key);
            LayerSummary {
                model: g.model.clone(),
                batch: g.batch,
                dtype: g.dtype.clone(),
                gemms: 0,
                forward_secs: 0.0,
                forward_flops: 0.0,
                backward_secs: 0.0,
                backward_flops: 0.0,
            }
        });
        s.gemms += 1;
        if g.pass == "forward" {
            s.forward_secs += t.time.median_secs;
            s.forward_flops += g.flops();
        } else {
            s.backward_secs += t.time.median_secs;
            s.backward_flops += g.flops();
        }
    }
    order.into_iter().filter_map(|k| sums.remove(&k)).collect()
}

/// The summaries as a table for people.
pub fn summary_table(rows: &[LayerSummary]) -> String {
    let mut s = String::from(
        "layer GEMMs (cuBLAS equivalents of the conv/linear layers, summed over layers):\n  model              batch dtype  GEMMs  forward ms  TFLOP/s  backward ms  TFLOP/s\n",
    );
    for r in rows {
        let tf = |f: f64, t: f64| if t > 0.0 { f / t / 1e12 } else { f64::NAN };
        s += &format!(
            "  {:<18} {:>5} {:<5} {:>6} {:>11.3} {:>8.1} {:>12.3} {:>8.1}\n",
            r.model,
            r.batch,
            r.dtype,
            r.gemms,
            r.forward_secs * 1e3,
            tf(r.forward_flops, r.forward_secs),
            r.backward_secs * 1e3,
            tf(r.backward_flops, r.backward_secs)
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use sim::workload::catalog;

    #[test]
    fn resnet50_layer1_conv2_has_a_forward_and_two_backward_gemms() {
        let m = catalog::resnet(50, 1000);
        let p = plan(&[m], &[32], &["fp32".to_string()]);
        let conv2: Vec<&PlannedGemm> = p.iter().filter(|g| g.layer == "layer1.0.conv2").collect();
        let shapes: Vec<(u64, u64, u64, u64)> =
            conv2.iter().map(|g| (g.m, g.n, g.k, g.count)).collect();
        let rows = 32 * 56 * 56;
        assert_eq!(
            shapes,
            vec![(rows, 64, 576, 1), (rows, 576, 64, 1), (64, 576, rows, 1)]
        );
        // Each backward product is as much work as the forward.
        assert!(conv2.iter().all(|g| g.flops() == conv2[0].flops()));
    }

    #[test]
    fn repeated_blocks_are_timed_once() {
        let m = catalog::resnet(50, 1000);
        let layers_with_gemms = m.layers.iter().filter(|l| !l.gemms.is_empty()).count();
        assert_eq!(layers_with_gemms, 54);
        let dtypes = vec!["fp32".to_string(), "bf16".to_string()];
        let p = plan(&[m], &[1, 32], &dtypes);
        // Three products per layer, less the first layer's input gradient.
        assert_eq!(p.len(), (54 * 3 - 1) * 2 * 2);
        let distinct = distinct_shapes(&p);
        // layer1.1 and layer1.2 repeat layer1.0's convolutions, and so on.
        assert!(
            distinct.len() < p.len() / 2,
            "{} of {}",
            distinct.len(),
            p.len()
        );
        assert!(distinct.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn summaries_add_forward_and_backward_separately() {
        let m = catalog::alexnet();
        let p = plan(std::slice::from_ref(&m), &[8], &["tf32".to_string()]);
        let times: Vec<LayerGemmTime> = p
            .into_iter()
            .map(|gemm| LayerGemmTime {
                time: Stat {
                    median_secs: gemm.flops() / 1e14,
                    min_secs: 0.0,
                    max_secs: 0.0,
                },
                gemm,
            })
            .collect();
        let s = summarize(&times);
        assert_eq!(s.len(), 1);
        assert_eq!(s[0].gemms, 8 * 3 - 1);
        assert_eq!(s[0].forward_flops, 8.0 * m.forward_macs() as f64 * 2.0);
        // Two backward products per layer, one for the first (no input gradient).
        let first = 8.0 * m.layers[0].forward_flops as f64;
        assert_eq!(s[0].backward_flops, 2.0 * s[0].forward_flops - first);
        assert!((s[0].forward_flops / s[0].forward_secs / 1e14 - 1.0).abs() < 1e-9);
        let table = summary_table(&s);
        assert!(table.contains("alexnet"), "{table}");
        assert!(table.contains("100.0"), "{table}");
        assert_eq!(times[0].timing().layer.unwrap().pass, "forward");
    }
}
