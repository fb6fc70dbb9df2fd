//! A profile's compute section: how fast one GPU computes ([`ComputeCalibration`]), with the
//! layer times, GEMM times and eager-execution costs measured on it.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{Calibrated, Provenance};
use crate::units::{Bandwidth, Bytes, Duration};

/// A layer's measured forward and backward time at one batch size.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MeasuredLayerTime {
    pub model: String,
    pub layer: String,
    pub batch: u64,
    /// The number format it was measured in (`fp32`, `tf32`, `bf16`, `fp16`); a workload in
    /// another format does not use it. Absent: any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dtype: Option<String>,
    pub forward: Duration,
    pub backward: Duration,
    pub provenance: Provenance,
}

/// One GEMM timed alone on the device: `count` products of `m × k` by `k × n` (column-major,
/// as cuBLAS runs them), the median of its repetitions.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GemmTime {
    /// `fp32`, `tf32`, `fp16`, `bf16`.
    pub dtype: String,
    pub m: u64,
    pub n: u64,
    pub k: u64,
    pub count: u64,
    pub secs: f64,
}

/// GEMMs timed at the shapes of layers (`calibrate gpu`'s layer GEMMs: each layer's forward,
/// input-gradient and weight-gradient products), one provenance for the table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MeasuredGemms {
    pub provenance: Provenance,
    pub times: Vec<GemmTime>,
}

/// Host seconds of one piece of an eager training step, by phase: what issuing it costs the
/// host in the forward pass, in the backward pass (autograd's engine) and in the optimizer.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostPhases {
    pub forward: Duration,
    pub backward: Duration,
    pub optimizer: Duration,
}

/// What an eager training step costs the host in one number format (PyTorch issuing each op:
/// Python, modules, autocast, autograd, dispatch, kernel launch), measured on tiny layers whose
/// kernels do almost nothing (`torch_bench.py --host-costs`, imported by `calibrate import
/// eager`). The host and the GPU run side by side; `workload::eager` plays them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EagerHostCosts {
    /// The step's own work besides its layers: zero_grad and the loss (forward), starting
    /// autograd (backward), the optimizer's fixed cost.
    pub step: HostPhases,
    /// One layer's cost, by kind: the catalog's layer kinds (`conv`, `norm`, `activation`,
    /// `pool`, `add`, `linear`, `embedding`, `attention_block`, `mlp_block`) and the variants
    /// torch issues differently (`conv_bias`, `layer_norm`, `attention_block_fused`).
    pub layers: BTreeMap<String, HostPhases>,
    pub provenance: Provenance,
}

/// The GPU's time per element (read plus written, as a layer's bytes count them) of a layer
/// kind eager PyTorch runs as memory-bound kernels of its own; for a transformer block, of its
/// kernels besides the matrix products.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KernelRate {
    pub forward_secs_per_element: f64,
    pub backward_secs_per_element: f64,
    /// A transformer block's: per attention score it stores (scaled, masked, softmaxed and
    /// cast as kernels of their own); its per-element rates are then those of its kernels
    /// besides the matrix products, per element of its input plus output.
    #[serde(default, skip_serializing_if = "is_zero_f64")]
    pub forward_secs_per_score_element: f64,
    #[serde(default, skip_serializing_if = "is_zero_f64")]
    pub backward_secs_per_score_element: f64,
}

fn is_zero_f64(x: &f64) -> bool {
    *x == 0.0
}

/// What the memory-bound layers of an eager step, and the kernels of its transformer blocks
/// besides their matrix products, cost the GPU in one number format, measured on chains of
/// large layers of each kind (`torch_bench.py --kernel-rates`, `--block-rates`): PyTorch's own
/// kernels for a BatchNorm or a max-pool run far below the copy rate the fused model assumes
/// (an H200's BatchNorm at 0.55 TB/s in bf16 against a 4 TB/s copy), and an eager attention
/// block moves its scores through memory several times over, with casts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EagerKernelRates {
    /// By layer kind, named as in [`EagerHostCosts::layers`].
    pub layers: BTreeMap<String, KernelRate>,
    pub provenance: Provenance,
}

/// How fast one GPU computes: what turns a layer's FLOPs and bytes into time.
///
/// A matmul-class layer (convolution, linear, attention, MLP) of F FLOPs moving B bytes takes
/// `max((F + half_efficiency_flops) / (peak × matmul_efficiency), B / (memory_bandwidth ×
/// memory_efficiency)) + layer_overhead`: its efficiency rises with the work per kernel and is
/// half of `matmul_efficiency` at F = `half_efficiency_flops`, so small batches underuse the
/// GPU. Other layers are memory-bound. Measured per-layer times, when present, win; measured
/// GEMM times (`gemm_times`) replace the line for each product of a layer they cover.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ComputeCalibration {
    /// The GPU, e.g. "Tesla V100-SXM2-16GB".
    pub device: String,
    /// Peak FLOP/s per dtype ("fp32", "fp16", "bf16").
    pub peak_flops_per_s: BTreeMap<String, Calibrated<f64>>,
    /// Largest fraction of peak that matmul-class layers reach.
    pub matmul_efficiency: Calibrated<f64>,
    /// Work per kernel (FLOPs) at which a matmul layer reaches half of `matmul_efficiency`.
    pub half_efficiency_flops: Calibrated<f64>,
    pub memory_bandwidth: Calibrated<Bandwidth>,
    /// Fraction of `memory_bandwidth` that memory-bound layers reach.
    pub memory_efficiency: Calibrated<f64>,
    /// GPU memory.
    pub memory_capacity: Calibrated<Bytes>,
    /// Fixed cost per layer and pass (kernel launches, framework dispatch).
    pub layer_overhead: Calibrated<Duration>,
    /// DDP's cost per gradient tensor (autograd hook, copy into the bucket), added to the
    /// backward pass.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ddp_overhead_per_tensor: Option<Calibrated<Duration>>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub layer_times: Vec<MeasuredLayerTime>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gemm_times: Option<MeasuredGemms>,
    /// The host's cost of eager steps, by number format (`bf16` under autocast, `tf32`, ...):
    /// what `execution = "eager"` plays beside the GPU.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub eager_host: BTreeMap<String, EagerHostCosts>,
    /// The GPU's rate of eager memory-bound layers, by number format: what `execution =
    /// "eager"` times those layers at instead of the copy rate.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub eager_kernels: BTreeMap<String, EagerKernelRates>,
}
