//! Compute time of each layer's forward and backward pass, from a profile's compute section.
//!
//! A measured per-layer time (profile `compute.layer_times`, matched on model, layer and
//! batch) wins. Otherwise a pass of F FLOPs moving B bytes takes, for matmul-class layers,
//! `max((F + F½) / (peak × η) + E / (bw × η_mem), B / (bw × η_mem)) + overhead`, and for the
//! others `B / (bw × η_mem) + overhead` (see [`ComputeCalibration`]). F½ makes efficiency grow
//! with the work per kernel, so small batches underuse the GPU. E is the traffic of a block's
//! kernels besides its GEMMs (`Layer::elementwise_elems`: norms, activations, dropout and
//! residual adds, the softmax of stored scores, the loss), which run after the GEMMs, not under
//! them: on an H100 and an H200 it is 8-13% of a compiled GPT step.
//!
//! The backward pass of a matmul layer is two kernels (input gradient and weight gradient), each
//! as large as the forward: 2F FLOPs, 2B bytes, two overheads. The backward pass of a
//! memory-bound layer moves 2B bytes with one overhead. A layer's bytes are its input and
//! output activations for the batch plus its parameters, in the workload's dtype.
//!
//! Where the profile carries GEMMs timed at the layers' own shapes (`compute.gemm_times`,
//! written by `calibrate gpu`), a matmul layer's forward is the sum of its forward products as
//! measured and its backward the sum of its input- and weight-gradient products as measured
//! ([`super::gemm_table`]), plus the layer's non-GEMM FLOPs at the line's rate and E as above;
//! a product the table lacks keeps the line. Backward products differ from the forward in shape
//! and speed (GPT 1.3B at batch 2 on an H200 in bf16: forward 703 TFLOP/s, backward 552).
//!
//! That is a fused step, the GPU's time. A model made `executing` eager (`execution = "eager"`)
//! times a step through [`ComputeModel::step_times`] as [`super::eager`] plays it: the host
//! issuing each pass beside the GPU, memory-bound layers and transformer blocks at their
//! measured eager rates.

use std::collections::BTreeMap;

use serde::Deserialize;

use super::catalog::{Layer, Model};
use super::eager::{self, Execution, HostCosts, KernelRates};
use super::gemm_table::{GemmTable, Pass, Roofline};
use crate::engine::SimTime;
use crate::profile::{ComputeCalibration, Profile};

/// The number format a workload computes and communicates in.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Dtype {
    #[default]
    Fp32,
    /// fp32 storage with TF32 tensor-core matmuls and convolutions (PyTorch's default for
    /// convolutions on Ampere and later): fp32 bytes, the profile's `tf32` peak.
    Tf32,
    /// Mixed precision: fp16 activations, gradients and communication, fp32 master weights.
    Fp16,
    Bf16,
    /// FP8 tensor-core matmuls (Transformer Engine's recipe): the profile's `fp8` peak, with
    /// bf16 activations, gradients and communication and fp32 master weights.
    Fp8,
}

impl Dtype {
    pub fn bytes(self) -> u64 {
        match self {
            Dtype::Fp32 | Dtype::Tf32 => 4,
            Dtype::Fp16 | Dtype::Bf16 | Dtype::Fp8 => 2,
        }
    }
    pub fn as_str(self) -> &'static str {
        match self {
            Dtype::Fp32 => "fp32",
            Dtype::Tf32 => "tf32",
            Dtype::Fp16 => "fp16",
            Dtype::Bf16 => "bf16",
            Dtype::Fp8 => "fp8",
        }
    }
}

/// The optimizer, which decides its state per parameter and the bytes its update moves.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Optimizer {
    Sgd,
    /// SGD with momentum (torchvision's training recipes).
    #[default]
    Momentum,
    Adam,
}

impl Optimizer {
    /// fp32 state bytes per parameter (momentum 4; Adam's two moments 8).
    pub fn state_bytes_per_param(self) -> u64 {
        match self {
            Optimizer::Sgd => 0,
            Optimizer::Momentum => 4,
            Optimizer::Adam => 8,
        }
    }
    /// fp32 bytes the update reads and writes per parameter: SGD reads p, g and writes p;
    /// momentum also reads and writes the buffer; Adam reads and writes two moments.
    pub fn update_bytes_per_param(self) -> u64 {
        match self {
            Optimizer::Sgd => 12,
            Optimizer::Momentum => 20,
            Optimizer::Adam => 28,
        }
    }
}

/// Forward and backward time of one layer at one batch size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PassTimes {
    pub forward: SimTime,
    pub backward: SimTime,
}

/// A layer's GEMM products at one batch: forward seconds, backward (input plus weight
/// gradient) seconds, and the forward FLOPs they cover.
#[derive(Debug, Clone, Copy, Default)]
struct LayerProducts {
    forward_secs: f64,
    backward_secs: f64,
    flops: f64,
}

/// The profile's compute rates, ready to time layers.
#[derive(Debug, Clone)]
pub struct ComputeModel {
    pub peak_flops_per_s: f64,
    pub matmul_efficiency: f64,
    pub half_efficiency_flops: f64,
    /// Memory bandwidth × memory efficiency, bytes/s.
    pub memory_bytes_per_s: f64,
    pub memory_capacity_bytes: u64,
    pub layer_overhead_secs: f64,
    pub ddp_overhead_per_tensor_secs: f64,
    pub dtype: Dtype,
    /// (model, layer) → measured times by batch.
    measured: BTreeMap<(String, String), BTreeMap<u64, PassTimes>>,
    /// GEMMs measured alone in this number format, by shape.
    gemms: GemmTable,
    /// The host's costs when the step runs eager ([`Execution::Eager`]); `None`: fused.
    host: Option<HostCosts>,
    /// The GPU's rates of eager memory-bound layers, where measured (eager only).
    kernels: KernelRates,
}

/// One step's compute on one GPU, as [`ComputeModel::step_times`] times it: each layer's passes
/// in the model's order and the optimizer's update.
#[derive(Debug, Clone, PartialEq)]
pub struct StepTimes {
    pub passes: Vec<PassTimes>,
    pub optimizer: SimTime,
}

impl ComputeModel {
    /// Reads the profile's compute section for `dtype`; `Err(expected)` when the profile has no
    /// compute section or no peak for the dtype.
    pub fn from_profile(p: &Profile, dtype: Dtype) -> Result<ComputeModel, String> {
        let c = p.compute.as_ref().ok_or_else(|| {
            format!(
                "a profile with a compute section for training workloads; profile {:?} has none \
                 (see data/profiles/v100_dgx1_public.json)",
                p.name
            )
        })?;
        Self::from_calibration(c, dtype)
    }

    /// This model for steps run as `execution` says; eager needs `p`'s host costs in this
    /// model's number format (`compute.eager_host`), and Err says which profile field it lacks.
    pub fn executing(mut self, p: &Profile, execution: Execution) -> Result<ComputeModel, String> {
        self.host = None;
        self.kernels = KernelRates::default();
        if execution == Execution::Eager {
            let dtype = self.dtype.as_str();
            let compute = p.compute.as_ref();
            let costs = compute
                .and_then(|c| c.eager_host.get(dtype))
                .ok_or_else(|| {
                    let measured: Vec<&str> = compute
                        .map(|c| c.eager_host.keys().map(String::as_str).collect())
                        .unwrap_or_default();
                    format!(
                        "execution = \"eager\" needs the host's costs in {dtype} \
                         (compute.eager_host.{dtype}) in profile {:?}, which has {}; measure \
                         them with calibrate/scripts/torch_bench.py --host-costs and `calibrate \
                         import eager`, or run the step fused",
                        p.name,
                        if measured.is_empty() {
                            "none".to_string()
                        } else {
                            measured.join(", ")
                        }
                    )
                })?;
            self.host = Some(HostCosts::new(costs));
            if let Some(rates) = compute.and_then(|c| c.eager_kernels.get(dtype)) {
                self.kernels = KernelRates::new(rates);
            }
        }
        Ok(self)
    }

    /// How this model runs steps.
    pub fn execution(&self) -> Execution {
        if self.host.is_some() {
            Execution::Eager
        } else {
            Execution::Fused
        }
    }

    pub fn from_calibration(c: &ComputeCalibration, dtype: Dtype) -> Result<ComputeModel, String> {
        let peak = c.peak_flops_per_s.get(dtype.as_str()).ok_or_else(|| {
            format!(
                "a peak FLOP/s for dtype {:?} in compute.peak_flops_per_s (it has {})",
                dtype.as_str(),
                c.peak_flops_per_s
                    .keys()
                    .cloned()
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        })?;
        let mut measured: BTreeMap<(String, String), BTreeMap<u64, PassTimes>> = BTreeMap::new();
        // Times measured in another number format do not apply.
        for t in c
            .layer_times
            .iter()
            .filter(|t| t.dtype.as_deref().is_none_or(|d| d == dtype.as_str()))
        {
            measured
                .entry((t.model.clone(), t.layer.clone()))
                .or_default()
                .insert(
                    t.batch,
                    PassTimes {
                        forward: t.forward.0,
                        backward: t.backward.0,
                    },
                );
        }
        let memory_bytes_per_s = c.memory_bandwidth.value.bytes_per_s() * c.memory_efficiency.value;
        let roofline = Roofline {
            peak_flops_per_s: peak.value * c.matmul_efficiency.value,
            memory_bytes_per_s,
            element_bytes: dtype.bytes(),
        };
        Ok(ComputeModel {
            peak_flops_per_s: peak.value,
            matmul_efficiency: c.matmul_efficiency.value,
            half_efficiency_flops: c.half_efficiency_flops.value,
            memory_bytes_per_s,
            memory_capacity_bytes: c.memory_capacity.value.0,
            layer_overhead_secs: c.layer_overhead.value.0.as_secs_f64(),
            ddp_overhead_per_tensor_secs: c
                .ddp_overhead_per_tensor
                .as_ref()
                .map(|d| d.value.0.as_secs_f64())
                .unwrap_or(0.0),
            dtype,
            measured,
            gemms: c
                .gemm_times
                .as_ref()
                .map(|g| GemmTable::new(&g.times, dtype.as_str(), roofline))
                .unwrap_or_default(),
            host: None,
            kernels: KernelRates::default(),
        })
    }

    /// Time of `layer` of `model` for `batch` samples; `split` divides the layer's work (tensor
    /// parallelism splits matmul blocks across the group).
    pub fn layer_times(&self, model: &str, layer: &Layer, batch: u64, split: u64) -> PassTimes {
        self.layer_times_split(model, layer, batch, split, 1)
    }

    /// [`Self::layer_times`] with the work also split over `sequence_split` ranks by tokens
    /// (context parallelism): FLOPs and activations divide by both splits, the parameters a
    /// rank reads by the tensor split only. Attention's quadratic part divides by the
    /// sequence split too, as Megatron's load-balanced causal ring gives each rank an equal
    /// share of it.
    pub fn layer_times_split(
        &self,
        model: &str,
        layer: &Layer,
        batch: u64,
        split: u64,
        sequence_split: u64,
    ) -> PassTimes {
        let (split, sequence_split) = (split.max(1), sequence_split.max(1));
        if let Some(by_batch) = self.measured.get(&(model.to_string(), layer.name.clone())) {
            // Exact batch, else the nearest measured batch scaled linearly.
            let (&b, t) = by_batch
                .range(batch..)
                .next()
                .or_else(|| by_batch.range(..batch).next_back())
                .expect("a measured layer has at least one batch");
            let scale = batch as f64 / b as f64 / (split * sequence_split) as f64;
            return PassTimes {
                forward: SimTime::from_secs_f64(t.forward.as_secs_f64() * scale),
                backward: SimTime::from_secs_f64(t.backward.as_secs_f64() * scale),
            };
        }
        let (fwd, bwd) = self.modelled_secs_split(layer, batch, split, sequence_split);
        PassTimes {
            forward: SimTime::from_secs_f64(fwd),
            backward: SimTime::from_secs_f64(bwd),
        }
    }

    /// Forward and backward seconds from FLOPs and bytes.
    pub fn modelled_secs(&self, layer: &Layer, batch: u64, split: u64) -> (f64, f64) {
        self.modelled_secs_split(layer, batch, split, 1)
    }

    /// [`Self::modelled_secs`] with the tokens also split `sequence_split` ways.
    fn modelled_secs_split(
        &self,
        layer: &Layer,
        batch: u64,
        split: u64,
        sequence_split: u64,
    ) -> (f64, f64) {
        let split = split.max(1) as f64;
        let tokens = sequence_split.max(1) as f64;
        let e = self.dtype.bytes() as f64;
        let flops = layer.forward_flops as f64 * batch as f64 / split / tokens;
        let bytes = ((layer.input_elems + layer.output_elems) as f64 * batch as f64 / tokens
            + layer.params as f64)
            * e
            / split;
        let mem = bytes / self.memory_bytes_per_s;
        let ov = self.layer_overhead_secs;
        if layer.kind.is_matmul() {
            let rate = self.peak_flops_per_s * self.matmul_efficiency;
            // The kernels besides the GEMMs (norms, activations, residual adds, the loss) run
            // after them at the memory's rate, twice the traffic backward.
            let elementwise = layer.elementwise_elems as f64 * batch as f64 / tokens * e
                / split
                / self.memory_bytes_per_s;
            if let Some(g) = self.measured_products(layer, batch, rate) {
                // Each product as it was timed; the layer's other FLOPs (softmax, bias,
                // activation) at the matmul rate, as below. Splits divide the measured time.
                let parts = split * tokens;
                let rest =
                    (layer.forward_flops as f64 * batch as f64 - g.flops).max(0.0) / parts / rate;
                let f = (g.forward_secs / parts + rest + elementwise).max(mem);
                let b = (g.backward_secs / parts + 2.0 * (rest + elementwise)).max(2.0 * mem);
                return (f + ov, b + 2.0 * ov);
            }
            let f = ((flops + self.half_efficiency_flops) / rate + elementwise).max(mem);
            (f + ov, 2.0 * f + 2.0 * ov)
        } else {
            (mem + ov, 2.0 * mem + ov)
        }
    }

    /// The products of `layer`'s GEMMs at `batch`, each from the measured GEMM table where it
    /// has the shape and otherwise from the line `(FLOPs + F½) / rate`; `None` when the table
    /// has none of them (the layer is then timed as a whole, as without a table).
    fn measured_products(&self, layer: &Layer, batch: u64, rate: f64) -> Option<LayerProducts> {
        if self.gemms.is_empty() {
            return None;
        }
        let mut out = LayerProducts::default();
        let mut measured = 0;
        for g in &layer.gemms {
            let flops = g.flops_per_sample() as f64 * batch as f64;
            out.flops += flops;
            for pass in Pass::ALL {
                let secs = match self.gemms.pass_secs(g, pass, batch) {
                    Some(s) => {
                        measured += 1;
                        s
                    }
                    None => (flops + self.half_efficiency_flops) / rate,
                };
                match pass {
                    Pass::Forward => out.forward_secs += secs,
                    _ => out.backward_secs += secs,
                }
            }
        }
        (measured > 0).then_some(out)
    }

    /// The optimizer update of `params` parameters in `tensors` tensors (memory-bound; one
    /// kernel per tensor, as PyTorch's per-parameter optimizers launch).
    pub fn optimizer_time(&self, params: u64, tensors: u32, optimizer: Optimizer) -> SimTime {
        let bytes = params as f64 * optimizer.update_bytes_per_param() as f64;
        SimTime::from_secs_f64(
            bytes / self.memory_bytes_per_s + tensors as f64 * self.layer_overhead_secs,
        )
    }

    /// Every layer's passes and the optimizer of one data-parallel replica's step at `batch`:
    /// each as the GPU runs it when fused, and eager as the host lets it, memory-bound layers
    /// at their measured eager rates ([`eager::play`]: a pass is charged what it adds to the
    /// GPU's finishing time). Err names a layer kind whose host cost the profile lacks.
    pub fn step_times(
        &self,
        model: &Model,
        batch: u64,
        optimizer: Optimizer,
    ) -> Result<StepTimes, String> {
        let mut gpu = StepTimes {
            passes: model
                .layers
                .iter()
                .map(|l| self.layer_times(&model.name, l, batch, 1))
                .collect(),
            optimizer: self.optimizer_time(model.params(), model.param_tensors(), optimizer),
        };
        let Some(host) = &self.host else {
            return Ok(gpu);
        };
        let hosts = host.of_model(model).map_err(|kind| {
            format!(
                "compute.eager_host.{}.layers.{kind}: the host's cost of a {kind} layer (model \
                 {}), which the profile did not measure",
                self.dtype.as_str(),
                model.name
            )
        })?;
        let e = self.dtype.bytes() as f64;
        self.kernels.apply(model, batch, &mut gpu.passes, |l| {
            (l.elementwise_elems * batch) as f64 * e / self.memory_bytes_per_s
        });
        Ok(eager::play(&hosts, host.step(), &gpu))
    }

    /// DDP's per-tensor cost for `tensors` gradient tensors.
    pub fn ddp_overhead(&self, tensors: u32) -> SimTime {
        SimTime::from_secs_f64(tensors as f64 * self.ddp_overhead_per_tensor_secs)
    }

    /// Forward + backward + optimizer of the whole model on one GPU (no communication).
    pub fn single_gpu_step_secs(&self, model: &Model, batch: u64, optimizer: Optimizer) -> f64 {
        let passes: f64 = model
            .layers
            .iter()
            .map(|l| {
                let t = self.layer_times(&model.name, l, batch, 1);
                t.forward.as_secs_f64() + t.backward.as_secs_f64()
            })
            .sum();
        passes
            + self
                .optimizer_time(model.params(), model.param_tensors(), optimizer)
                .as_secs_f64()
    }
}

/// The largest matmul efficiency accepted. Above 1 because FLOPs are counted as direct
/// convolution: cuDNN's Winograd and FFT kernels do fewer multiplications than that count, so
/// their *effective* rate can exceed the peak.
pub const MAX_MATMUL_EFFICIENCY: f64 = 2.0;

/// Fits `matmul_efficiency` and `memory_efficiency` of `base` so that two measured
/// single-GPU steps (model, batch, seconds; forward + backward + optimizer, no communication)
/// are reproduced: for each memory efficiency the matmul efficiency that matches the first row
/// is found by bisection, then the memory efficiency that matches the second row. Returns
/// (matmul efficiency, memory efficiency), or `None` when no pair in (0, 1] fits.
pub fn fit_efficiencies(
    base: &ComputeCalibration,
    dtype: Dtype,
    rows: [(&Model, u64, f64); 2],
    optimizer: Optimizer,
) -> Option<(f64, f64)> {
    let step = |eff: f64, mem: f64, (m, b, _): (&Model, u64, f64)| {
        let mut c = base.clone();
        c.matmul_efficiency.value = eff;
        c.memory_efficiency.value = mem;
        c.layer_times.clear();
        ComputeModel::from_calibration(&c, dtype)
            .ok()
            .map(|cm| cm.single_gpu_step_secs(m, b, optimizer))
            .unwrap_or(f64::NAN)
    };
    // Step time falls as either efficiency rises: bisect on the sign of (time - measured).
    let bisect = |f: &dyn Fn(f64) -> f64| -> Option<f64> {
        let (mut lo, mut hi) = (1e-3, MAX_MATMUL_EFFICIENCY);
        if f(lo) < 0.0 || f(hi) > 0.0 {
            return None;
        }
        for _ in 0..60 {
            let mid = 0.5 * (lo + hi);
            if f(mid) > 0.0 {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        Some(0.5 * (lo + hi))
    };
    let eff_for = |mem: f64| bisect(&|eff| step(eff, mem, rows[0]) - rows[0].2);
    // Raising the memory efficiency (with the matmul efficiency refitted to row 0) shifts time
    // from memory-bound to matmul layers, which changes row 1.
    let residual = |mem: f64| match eff_for(mem) {
        Some(eff) => step(eff, mem, rows[1]) - rows[1].2,
        None => f64::NAN,
    };
    // Scan for a bracket (some memory efficiencies admit no matmul efficiency), then bisect.
    let grid: Vec<f64> = (1..=100).map(|i| i as f64 / 100.0).collect();
    let vals: Vec<f64> = grid.iter().map(|&m| residual(m)).collect();
    let k = (1..grid.len()).find(|&i| {
        vals[i - 1].is_finite() && vals[i].is_finite() && vals[i - 1].signum() != vals[i].signum()
    })?;
    let (mut lo, mut hi, rl) = (grid[k - 1], grid[k], vals[k - 1]);
    for _ in 0..60 {
        let mid = 0.5 * (lo + hi);
        if residual(mid).signum() == rl.signum() {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    let mem = 0.5 * (lo + hi);
    eff_for(mem).map(|eff| (eff, mem))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::{Calibrated, Provenance};
    use crate::units::{Bandwidth, Bytes, Duration};
    use crate::workload::catalog;

    fn prov() -> Provenance {
        Provenance {
            source: "nominal".into(),
            detail: "test".into(),
            date: None,
        }
    }
    fn cal<T>(value: T) -> Calibrated<T> {
        Calibrated {
            value,
            provenance: prov(),
        }
    }
    pub(crate) fn calibration() -> ComputeCalibration {
        ComputeCalibration {
            device: "test".into(),
            peak_flops_per_s: [
                ("fp32".to_string(), cal(10e12)),
                ("bf16".to_string(), cal(40e12)),
            ]
            .into_iter()
            .collect(),
            matmul_efficiency: cal(0.5),
            half_efficiency_flops: cal(1e9),
            memory_bandwidth: cal(Bandwidth(8.0 * 500e9)),
            memory_efficiency: cal(1.0),
            memory_capacity: cal(Bytes(16 << 30)),
            layer_overhead: cal(Duration(SimTime::from_us(10))),
            ddp_overhead_per_tensor: None,
            layer_times: Vec::new(),
            gemm_times: None,
            eager_host: Default::default(),
            eager_kernels: Default::default(),
        }
    }

    #[test]
    fn measured_gemms_time_each_product_of_a_layer_and_the_rest_keeps_the_line() {
        use crate::profile::{GemmTime, MeasuredGemms};
        let model = catalog::transformer(&catalog::TransformerConfig::gpt2());
        let mlp = model.layers.iter().find(|l| l.name == "h.0.mlp").unwrap();
        // GPT-2's MLP at batch 1: 1024 tokens, 768 -> 3072 -> 768. A product's time depends
        // on its shape alone (the down projection's input gradient is the up projection's
        // forward shape).
        let (up, down) = (mlp.gemms[0], mlp.gemms[1]);
        let secs = |(m, n, k, _): (u64, u64, u64, u64)| 1e-8 * (m + 2 * n + 3 * k) as f64;
        let mut times = Vec::new();
        for g in [up, down] {
            for pass in Pass::ALL {
                let (m, n, k, count) = pass.shape(g.at_batch(1));
                times.push(GemmTime {
                    dtype: "bf16".into(),
                    m,
                    n,
                    k,
                    count,
                    secs: secs((m, n, k, count)),
                });
            }
        }
        let product = |g: catalog::GemmShape, pass: Pass| secs(pass.shape(g.at_batch(1)));
        let mut c = calibration();
        let line = ComputeModel::from_calibration(&c, Dtype::Bf16).unwrap();
        c.gemm_times = Some(MeasuredGemms {
            provenance: prov(),
            times,
        });
        let cm = ComputeModel::from_calibration(&c, Dtype::Bf16).unwrap();
        let t = cm.layer_times("gpt2", mlp, 1, 1);
        // The activation's FLOPs (8 per hidden element) at the line's rate, 20 TFLOP/s.
        let rest =
            (mlp.forward_flops - up.flops_per_sample() - down.flops_per_sample()) as f64 / 20e12;
        let ov = 10e-6;
        // Its norm, activation, dropout and residual traffic at the memory's rate.
        let ew = mlp.elementwise_elems as f64 * 2.0 / cm.memory_bytes_per_s;
        let close = |a: SimTime, b: f64| (a.as_secs_f64() - b).abs() < 1e-9;
        let fwd = product(up, Pass::Forward) + product(down, Pass::Forward);
        let bwd: f64 = [up, down]
            .into_iter()
            .map(|g| product(g, Pass::InputGrad) + product(g, Pass::WeightGrad))
            .sum();
        assert!(close(t.forward, fwd + rest + ew + ov), "{:?}", t.forward);
        assert!(
            close(t.backward, bwd + 2.0 * (rest + ew) + 2.0 * ov),
            "{:?}",
            t.backward
        );
        // Not the line's time: the products are what was measured.
        assert!((line.layer_times("gpt2", mlp, 1, 1).forward.as_secs_f64() - fwd).abs() > 1e-6);
        // Another number format has no measurements: the line, as without a table.
        let fp32 = ComputeModel::from_calibration(&c, Dtype::Fp32).unwrap();
        let plain = ComputeModel::from_calibration(&calibration(), Dtype::Fp32).unwrap();
        assert_eq!(
            fp32.layer_times("gpt2", mlp, 1, 1),
            plain.layer_times("gpt2", mlp, 1, 1)
        );
        // A layer none of whose products were measured keeps the line too.
        let attn = model.layers.iter().find(|l| l.name == "h.0.attn").unwrap();
        assert_eq!(
            cm.layer_times("gpt2", attn, 1, 1),
            line.layer_times("gpt2", attn, 1, 1)
        );
    }

    #[test]
    fn a_blocks_kernels_besides_its_gemms_add_their_traffic_at_the_memory_rate() {
        let m = ComputeModel::from_calibration(&calibration(), Dtype::Bf16).unwrap();
        let model = catalog::transformer(&catalog::TransformerConfig::gpt2());
        for name in ["h.0.attn", "h.0.mlp", "lm_head"] {
            let layer = model.layers.iter().find(|l| l.name == name).unwrap();
            let bare = Layer {
                elementwise_elems: 0,
                ..layer.clone()
            };
            let (with, without) = (
                m.layer_times("gpt2", layer, 8, 1),
                m.layer_times("gpt2", &bare, 8, 1),
            );
            let secs = (layer.elementwise_elems * 8 * 2) as f64 / m.memory_bytes_per_s;
            assert!(secs > 0.0, "{name}");
            let added = |a: SimTime, b: SimTime| a.as_secs_f64() - b.as_secs_f64();
            assert!(
                (added(with.forward, without.forward) - secs).abs() < 1e-9,
                "{name}"
            );
            assert!(
                (added(with.backward, without.backward) - 2.0 * secs).abs() < 1e-9,
                "{name}"
            );
        }
    }

    #[test]
    fn small_batches_use_the_gpu_less_efficiently() {
        let m = ComputeModel::from_calibration(&calibration(), Dtype::Fp32).unwrap();
        let model = catalog::resnet(50, 1000);
        let per_sample = |b: u64| m.single_gpu_step_secs(&model, b, Optimizer::Momentum) / b as f64;
        assert!(per_sample(1) > 2.0 * per_sample(256));
        assert!(per_sample(64) > per_sample(256));
    }

    #[test]
    fn a_large_matmul_runs_at_the_calibrated_efficiency() {
        let m = ComputeModel::from_calibration(&calibration(), Dtype::Fp32).unwrap();
        let layer = Layer {
            name: "fc".into(),
            kind: catalog::LayerKind::Linear,
            params: 0,
            param_tensors: 0,
            forward_flops: 1_000_000_000_000,
            input_elems: 1,
            output_elems: 1,
            saved_elems: 1,
            gemms: Vec::new(),
            elementwise_elems: 0,
            kv_elems: 0,
            kv_heads: 0,
            flash_attention: false,
            stored_score_elems: 0,
        };
        let (f, b) = m.modelled_secs(&layer, 1, 1);
        // (1e12 + 1e9) / (10e12 × 0.5) + 10 us
        assert!((f - (1.001e12 / 5e12 + 10e-6)).abs() < 1e-12, "{f}");
        assert!((b - 2.0 * f).abs() < 1e-12);
    }

    #[test]
    fn measured_layer_times_win_over_the_model() {
        let mut c = calibration();
        c.layer_times.push(crate::profile::MeasuredLayerTime {
            model: "resnet50".into(),
            layer: "fc".into(),
            batch: 32,
            dtype: Some("fp32".into()),
            forward: Duration(SimTime::from_us(100)),
            backward: Duration(SimTime::from_us(250)),
            provenance: prov(),
        });
        let m = ComputeModel::from_calibration(&c, Dtype::Fp32).unwrap();
        let model = catalog::resnet(50, 1000);
        let fc = model.layers.last().unwrap();
        let t = m.layer_times("resnet50", fc, 32, 1);
        assert_eq!(t.forward, SimTime::from_us(100));
        assert_eq!(t.backward, SimTime::from_us(250));
        assert_eq!(
            m.layer_times("resnet50", fc, 64, 1).forward,
            SimTime::from_us(200)
        );
        // Measured in fp32: a bf16 workload is modelled instead.
        let bf16 = ComputeModel::from_calibration(&c, Dtype::Bf16).unwrap();
        let (f, _) = bf16.modelled_secs(fc, 32, 1);
        assert_eq!(
            bf16.layer_times("resnet50", fc, 32, 1).forward,
            SimTime::from_secs_f64(f)
        );
    }

    fn data_profile(name: &str) -> Profile {
        let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../data/profiles")
            .join(name);
        Profile::load(&p).unwrap()
    }

    #[test]
    fn calibrated_v100_profile_reproduces_the_one_gpu_rows_it_was_fitted_on() {
        let p = data_profile("v100_dgx1_ddp_calibrated.json");
        let cm = ComputeModel::from_profile(&p, Dtype::Fp32).unwrap();
        for (depth, measured) in [(50, 0.097), (101, 0.162)] {
            let m = catalog::resnet(depth, 1000);
            let t = cm.single_gpu_step_secs(&m, 32, Optimizer::Momentum);
            assert!((t / measured - 1.0).abs() < 0.002, "resnet{depth}: {t}");
        }
    }

    #[test]
    fn the_fit_recovers_the_profile_values() {
        let p = data_profile("v100_dgx1_ddp_calibrated.json");
        let c = p.compute.unwrap();
        let (r50, r101) = (catalog::resnet(50, 1000), catalog::resnet(101, 1000));
        let (eff, mem) = fit_efficiencies(
            &c,
            Dtype::Fp32,
            [(&r50, 32, 0.097), (&r101, 32, 0.162)],
            Optimizer::Momentum,
        )
        .unwrap();
        assert!((eff - c.matmul_efficiency.value).abs() < 1e-3, "{eff}");
        assert!((mem - c.memory_efficiency.value).abs() < 1e-3, "{mem}");
    }

    #[test]
    fn a_dtype_without_a_peak_is_an_error_naming_the_field() {
        let e = ComputeModel::from_calibration(&calibration(), Dtype::Fp16).unwrap_err();
        assert!(e.contains("peak_flops_per_s") && e.contains("fp16"), "{e}");
    }
}
