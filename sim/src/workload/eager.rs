//! Eager execution: a training step as PyTorch runs it without compiling, op by op.
//!
//! The host issues every op (Python, the module, autocast, autograd's bookkeeping, dispatch,
//! the kernel launch) and the GPU runs the kernels in the order they were issued, as soon as
//! they are issued and the kernel before them is done. Two resources, one after the other:
//!
//! ```text
//! host_done += host(op)
//! gpu_done   = max(gpu_done + gpu(op), host_done)
//! ```
//!
//! A layer's pass is the op here (its host cost measured per layer kind, its GPU time the
//! compute model's); the step is zero_grad and the forward in layer order, autograd's backward
//! in reverse, then the optimizer. The host never waits for the GPU inside a step, so a step of
//! many small kernels takes the host's time (ResNet-50 in bf16 at batch 8 on an H200: 19.2 ms
//! measured, where the fused model's GPU work is 3.5 ms) and one of large kernels the GPU's.
//! Each pass is charged what it adds to the GPU's finishing time, so the passes still sum to
//! the step.
//!
//! On the GPU side, a pass is the compute model's time, except where the profile measured eager
//! rates ([`KernelRates`]): the memory-bound layers eager PyTorch runs with kernels of its own
//! far below the copy rate (a BatchNorm, a max-pool) take their elements at them, and a
//! transformer block adds its unfused kernels (casts, norms, scale, mask and softmax of stored
//! scores) per element and per score.
//!
//! Both are measured, not fitted: `torch_bench.py --host-costs` times steps of chains of 8, 24
//! and 72 tiny layers of one kind, whose kernels do almost nothing, and the slope is one layer's
//! host cost in each phase; `--kernel-rates` and `--block-rates` time chains of large layers
//! and blocks between CUDA events (`calibrate import eager`).

use std::collections::BTreeMap;

use serde::Deserialize;

use super::catalog::{Layer, LayerKind, Model};
use super::compute::{PassTimes, StepTimes};
use crate::engine::SimTime;
use crate::profile::{EagerHostCosts, EagerKernelRates, HostPhases, KernelRate};

/// How the framework runs a step.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Execution {
    /// Each layer's elementwise work fused into few kernels and issued ahead of the GPU
    /// (`torch.compile`, CUDA graphs, Megatron's fused kernels): the step is the GPU's time.
    #[default]
    Fused,
    /// PyTorch eager: the host issues every op, and small kernels wait for it.
    Eager,
}

impl Execution {
    pub fn as_str(self) -> &'static str {
        match self {
            Execution::Fused => "fused",
            Execution::Eager => "eager",
        }
    }
}

/// Host seconds of one piece of a step, by phase.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct HostSecs {
    pub forward: f64,
    pub backward: f64,
    pub optimizer: f64,
}

impl From<&HostPhases> for HostSecs {
    fn from(p: &HostPhases) -> HostSecs {
        HostSecs {
            forward: p.forward.0.as_secs_f64(),
            backward: p.backward.0.as_secs_f64(),
            optimizer: p.optimizer.0.as_secs_f64(),
        }
    }
}

/// A profile's host costs for one number format, ready to look layers up.
#[derive(Debug, Clone, PartialEq)]
pub struct HostCosts {
    step: HostSecs,
    layers: BTreeMap<String, HostSecs>,
}

impl HostCosts {
    pub fn new(c: &EagerHostCosts) -> HostCosts {
        HostCosts {
            step: (&c.step).into(),
            layers: c
                .layers
                .iter()
                .map(|(k, v)| (k.clone(), v.into()))
                .collect(),
        }
    }

    /// The measured kind a layer is issued as. Convolutions with a bias issue one more op; a
    /// transformer's norm is a LayerNorm, a CNN's a BatchNorm; attention that never stores its
    /// scores is torch's one fused op where stored scores are five.
    pub fn kind_of(layer: &Layer, in_transformer: bool) -> &'static str {
        match layer.kind {
            LayerKind::Conv if layer.param_tensors > 1 => "conv_bias",
            LayerKind::Conv => "conv",
            LayerKind::Norm if in_transformer => "layer_norm",
            LayerKind::Norm => "norm",
            LayerKind::Activation => "activation",
            LayerKind::Pool => "pool",
            LayerKind::Add => "add",
            // A head is the output projection; its loss is the step's own cost.
            LayerKind::Linear | LayerKind::Head => "linear",
            LayerKind::Embedding => "embedding",
            LayerKind::AttentionBlock if layer.flash_attention => "attention_block_fused",
            LayerKind::AttentionBlock => "attention_block",
            LayerKind::MlpBlock => "mlp_block",
            LayerKind::MoeBlock => "moe_block",
        }
    }

    /// Each layer's host cost, in the model's order; `Err(kind)` names the first kind the
    /// profile did not measure.
    pub fn of_model(&self, model: &Model) -> Result<Vec<HostSecs>, &'static str> {
        let transformer = model
            .layers
            .iter()
            .any(|l| l.kind == LayerKind::AttentionBlock);
        model
            .layers
            .iter()
            .map(|l| {
                let kind = Self::kind_of(l, transformer);
                self.layers.get(kind).copied().ok_or(kind)
            })
            .collect()
    }

    pub fn step(&self) -> HostSecs {
        self.step
    }
}

/// The GPU's measured rates of eager memory-bound layers, by kind.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct KernelRates {
    layers: BTreeMap<String, KernelRate>,
}

impl KernelRates {
    pub fn new(c: &EagerKernelRates) -> KernelRates {
        KernelRates {
            layers: c.layers.clone(),
        }
    }

    /// `gpu` with the eager rates where measured and longer: each memory-bound layer of
    /// `model` takes its elements (input plus output, for `batch` samples) at its kind's rate;
    /// a transformer block (attention storing its scores, MLP) adds what its kernels besides
    /// the matrix products take at the measured rates, per element and per stored score, over
    /// `fused_elementwise(layer)`, the forward seconds the fused model already gave them (twice
    /// that backward).
    pub fn apply(
        &self,
        model: &Model,
        batch: u64,
        gpu: &mut [PassTimes],
        fused_elementwise: impl Fn(&Layer) -> f64,
    ) {
        let transformer = model
            .layers
            .iter()
            .any(|l| l.kind == LayerKind::AttentionBlock);
        for (l, t) in model.layers.iter().zip(gpu.iter_mut()) {
            let Some(r) = self.layers.get(HostCosts::kind_of(l, transformer)) else {
                continue;
            };
            let elems = ((l.input_elems + l.output_elems) * batch) as f64;
            let scores = (l.stored_score_elems * batch) as f64;
            let secs = |per_elem: f64, per_score: f64| elems * per_elem + scores * per_score;
            let (f, b) = (
                secs(r.forward_secs_per_element, r.forward_secs_per_score_element),
                secs(
                    r.backward_secs_per_element,
                    r.backward_secs_per_score_element,
                ),
            );
            if l.kind.is_matmul() {
                let fused = fused_elementwise(l);
                let more = |t: SimTime, eager: f64, fused: f64| {
                    t.saturating_add(SimTime::from_secs_f64((eager - fused).max(0.0)))
                };
                t.forward = more(t.forward, f, fused);
                t.backward = more(t.backward, b, 2.0 * fused);
            } else {
                t.forward = t.forward.max(SimTime::from_secs_f64(f));
                t.backward = t.backward.max(SimTime::from_secs_f64(b));
            }
        }
    }
}

/// A step's passes as the GPU runs them once the host issues them: `gpu` is the step as the
/// GPU alone would run it, `host[i]` layer i's host cost and `step` the step's own; each pass
/// (and the optimizer) is charged what it adds to the GPU's finishing time.
pub fn play(host: &[HostSecs], step: HostSecs, gpu: &StepTimes) -> StepTimes {
    let (optimizer_gpu, gpu) = (gpu.optimizer, &gpu.passes[..]);
    debug_assert_eq!(host.len(), gpu.len());
    let mut issued = 0.0f64;
    let mut done = 0.0f64;
    // The GPU's finishing time after an op the host issued `host_secs` after the last one.
    let mut run = |host_secs: f64, gpu_secs: f64| -> f64 {
        issued += host_secs;
        let before = done;
        done = (done + gpu_secs).max(issued);
        done - before
    };
    let secs = |t: SimTime| t.as_secs_f64();
    // zero_grad and the loss are issued with the forward; starting autograd with the backward.
    let mut forward: Vec<f64> = Vec::with_capacity(gpu.len());
    for (i, (h, g)) in host.iter().zip(gpu).enumerate() {
        let own = if i == 0 { step.forward } else { 0.0 };
        forward.push(run(own + h.forward, secs(g.forward)));
    }
    let mut backward = vec![0.0; gpu.len()];
    for i in (0..gpu.len()).rev() {
        let own = if i + 1 == gpu.len() {
            step.backward
        } else {
            0.0
        };
        backward[i] = run(own + host[i].backward, secs(gpu[i].backward));
    }
    let optimizer_host = step.optimizer + host.iter().map(|h| h.optimizer).sum::<f64>();
    let optimizer = run(optimizer_host, secs(optimizer_gpu));
    StepTimes {
        passes: forward
            .into_iter()
            .zip(backward)
            .map(|(f, b)| PassTimes {
                forward: SimTime::from_secs_f64(f),
                backward: SimTime::from_secs_f64(b),
            })
            .collect(),
        optimizer: SimTime::from_secs_f64(optimizer),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(x: f64) -> SimTime {
        SimTime::from_secs_f64(x * 1e-3)
    }
    fn pass(f: f64, b: f64) -> PassTimes {
        PassTimes {
            forward: ms(f),
            backward: ms(b),
        }
    }
    fn host(f: f64, b: f64, o: f64) -> HostSecs {
        HostSecs {
            forward: f * 1e-3,
            backward: b * 1e-3,
            optimizer: o * 1e-3,
        }
    }
    fn gpu_step(passes: &[PassTimes], optimizer: SimTime) -> StepTimes {
        StepTimes {
            passes: passes.to_vec(),
            optimizer,
        }
    }
    fn total(s: &StepTimes) -> f64 {
        s.passes
            .iter()
            .map(|p| p.forward.as_secs_f64() + p.backward.as_secs_f64())
            .sum::<f64>()
            + s.optimizer.as_secs_f64()
    }

    #[test]
    fn a_step_of_small_kernels_takes_the_hosts_time() {
        // 10 layers the host needs 1 ms each to issue (0.4 forward, 0.5 backward, 0.1 in the
        // optimizer) and the GPU 0.05 ms to run: the host sets the pace.
        let s = play(
            &[host(0.4, 0.5, 0.1); 10],
            host(0.2, 0.1, 0.3),
            &gpu_step(&[pass(0.02, 0.03); 10], ms(0.01)),
        );
        // Every pass ends when the host has issued it (a layer's kernels run while the host
        // issues the rest of it): the step is the host's 10 × 1 ms plus its own 0.6 ms.
        assert!(
            (total(&s) - (10.0 + 0.6) * 1e-3).abs() < 1e-9,
            "{}",
            total(&s)
        );
    }

    #[test]
    fn a_step_of_large_kernels_takes_the_gpus_time() {
        let s = play(
            &[host(0.05, 0.05, 0.0); 10],
            host(0.1, 0.1, 0.1),
            &gpu_step(&[pass(2.0, 4.0); 10], ms(1.0)),
        );
        // The host is always ahead: the step is the GPU's 10 × 6 ms plus the update's 1 ms.
        assert!((total(&s) - 61.0e-3).abs() < 1e-9, "{}", total(&s));
    }

    #[test]
    fn a_mixed_step_lies_between_the_larger_side_and_the_sum_of_both() {
        // Alternating GPU-heavy (a convolution) and host-heavy (a norm) layers: the host runs
        // ahead while the GPU is on a long kernel, so the step is far below the per-layer
        // maxima's sum and at least each side's total.
        let hosts: Vec<HostSecs> = (0..20)
            .map(|i| {
                if i % 2 == 0 {
                    host(0.05, 0.1, 0.0)
                } else {
                    host(0.3, 0.3, 0.0)
                }
            })
            .collect();
        let gpus: Vec<PassTimes> = (0..20)
            .map(|i| {
                if i % 2 == 0 {
                    pass(0.5, 1.0)
                } else {
                    pass(0.01, 0.02)
                }
            })
            .collect();
        let s = play(&hosts, HostSecs::default(), &gpu_step(&gpus, SimTime::ZERO));
        let host_sum: f64 = hosts.iter().map(|h| h.forward + h.backward).sum();
        let gpu_sum: f64 = gpus
            .iter()
            .map(|g| g.forward.as_secs_f64() + g.backward.as_secs_f64())
            .sum();
        let per_layer_max: f64 = hosts
            .iter()
            .zip(&gpus)
            .map(|(h, g)| {
                h.forward.max(g.forward.as_secs_f64()) + h.backward.max(g.backward.as_secs_f64())
            })
            .sum();
        let t = total(&s);
        assert!(
            t >= host_sum.max(gpu_sum) - 1e-12,
            "{t} vs {host_sum} / {gpu_sum}"
        );
        assert!(t < per_layer_max, "{t} vs {per_layer_max}");
    }

    #[test]
    fn without_host_costs_the_step_is_the_fused_one() {
        let gpus = [pass(1.0, 2.0), pass(0.5, 1.5), pass(3.0, 6.0)];
        let s = play(
            &[HostSecs::default(); 3],
            HostSecs::default(),
            &gpu_step(&gpus, ms(0.7)),
        );
        assert_eq!(&s.passes[..], &gpus[..]);
        assert_eq!(s.optimizer, ms(0.7));
    }

    #[test]
    fn a_measured_kernel_rate_slows_only_the_memory_bound_layers_of_its_kind() {
        let resnet = crate::workload::catalog::by_name("resnet50").unwrap();
        let fast = pass(0.001, 0.002);
        let mut gpu = vec![fast; resnet.layers.len()];
        let rates = KernelRates {
            layers: [(
                "norm".to_string(),
                KernelRate {
                    forward_secs_per_element: 1e-12,
                    backward_secs_per_element: 2e-12,
                    forward_secs_per_score_element: 0.0,
                    backward_secs_per_score_element: 0.0,
                },
            )]
            .into(),
        };
        rates.apply(&resnet, 32, &mut gpu, |_| 0.0);
        for (l, t) in resnet.layers.iter().zip(&gpu) {
            if l.kind == LayerKind::Norm {
                let elems = ((l.input_elems + l.output_elems) * 32) as f64;
                assert_eq!(
                    t.forward,
                    SimTime::from_secs_f64(elems * 1e-12),
                    "{}",
                    l.name
                );
                assert_eq!(
                    t.backward,
                    SimTime::from_secs_f64(elems * 2e-12),
                    "{}",
                    l.name
                );
            } else {
                assert_eq!(*t, fast, "{}", l.name);
            }
        }
    }

    #[test]
    fn an_attention_block_adds_its_eager_kernels_over_the_fused_elementwise_time() {
        let gpt = crate::workload::catalog::by_name("gpt2").unwrap();
        let base = pass(1.0, 2.0);
        let mut gpu = vec![base; gpt.layers.len()];
        let rates = KernelRates {
            layers: [(
                "attention_block".to_string(),
                KernelRate {
                    forward_secs_per_element: 1e-11,
                    backward_secs_per_element: 2e-11,
                    forward_secs_per_score_element: 1e-11,
                    backward_secs_per_score_element: 1e-11,
                },
            )]
            .into(),
        };
        // The fused model gave the block's elementwise work 0.1 ms forward, 0.2 ms backward.
        rates.apply(&gpt, 8, &mut gpu, |_| 1e-4);
        let attn = &gpt.layers[1];
        assert_eq!(attn.stored_score_elems, 12 * 1024 * 1024);
        let (e, s) = (
            ((attn.input_elems + attn.output_elems) * 8) as f64,
            (attn.stored_score_elems * 8) as f64,
        );
        let f = e * 1e-11 + s * 1e-11;
        let b = e * 2e-11 + s * 1e-11;
        let close = |t: SimTime, x: f64| (t.as_secs_f64() - x).abs() < 1e-9;
        assert!(close(gpu[1].forward, 1e-3 + f - 1e-4), "{:?}", gpu[1]);
        assert!(close(gpu[1].backward, 2e-3 + b - 2e-4), "{:?}", gpu[1]);
        // The MLP blocks have no rate here and keep their time.
        assert_eq!(gpu[2], base);
    }

    #[test]
    fn layers_are_issued_as_the_kind_torch_runs() {
        let gpt = crate::workload::catalog::by_name("gpt2").unwrap();
        let kinds: Vec<&str> = gpt
            .layers
            .iter()
            .map(|l| HostCosts::kind_of(l, true))
            .collect();
        assert_eq!(kinds[0], "embedding");
        assert_eq!(kinds[1], "attention_block");
        assert_eq!(kinds[2], "mlp_block");
        assert_eq!(kinds[kinds.len() - 2..], ["layer_norm", "linear"]);
        let resnet = crate::workload::catalog::by_name("resnet50").unwrap();
        let first: Vec<&str> = resnet.layers[..4]
            .iter()
            .map(|l| HostCosts::kind_of(l, false))
            .collect();
        assert_eq!(first, ["conv", "norm", "activation", "pool"]);
    }
}
