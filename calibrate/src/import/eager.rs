//! What an eager PyTorch step costs, from `torch_bench.py`'s `device.json`: the host's cost per
//! layer kind (`eager_host`, `--host-costs`) into a profile's `compute.eager_host.<dtype>`, and
//! the GPU's rate of the memory-bound kinds (`eager_kernels`, `--kernel-rates`) into
//! `compute.eager_kernels.<dtype>`.
//!
//! The script timed, for each kind, steps of chains of N tiny layers (N = 8, 24, 72) behind a
//! stem layer, every phase (forward, backward, optimizer) on the host's clock, and fitted a line
//! over N per phase: its slope is one layer's cost, which is what the profile keeps. The step's
//! own cost (zero_grad, the loss, starting autograd, the optimizer's fixed part) is each
//! chain's intercept less its stem's slope (a 1×1 convolution with a bias before image
//! layers, a linear layer before token layers), the median over kinds: intercepts of single
//! kinds swing by milliseconds on a loaded VM, their median does not. Negative fits (a phase a
//! kind does not use, within noise) are kept as 0.
//!
//! The kernel rates are the script's own division: one layer's GPU seconds (the difference of
//! chains of 4 and 12, timed between CUDA events) over its elements read plus written.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;
use sim::engine::SimTime;
use sim::profile::{EagerHostCosts, EagerKernelRates, HostPhases, KernelRate, Provenance};
use sim::units::Duration;

use crate::error::{read_text, ImportError};

#[derive(Debug, Deserialize)]
struct DeviceJson {
    dtype: String,
    device_name: String,
    #[serde(default)]
    machine: String,
    #[serde(default)]
    torch: String,
    #[serde(default)]
    date_utc: String,
    eager_host: Option<Measured>,
    eager_kernels: Option<MeasuredKernels>,
    eager_blocks: Option<MeasuredKernels>,
}

#[derive(Debug, Deserialize)]
struct MeasuredKernels {
    kinds: BTreeMap<String, KernelFit>,
}

#[derive(Debug, Deserialize)]
struct KernelFit {
    forward_secs_per_element: f64,
    backward_secs_per_element: f64,
    #[serde(default)]
    forward_secs_per_score_element: f64,
    #[serde(default)]
    backward_secs_per_score_element: f64,
}

/// What one device.json holds for eager steps, in its number format.
#[derive(Debug, Clone, PartialEq)]
pub struct Eager {
    pub dtype: String,
    pub host: Option<EagerHostCosts>,
    pub kernels: Option<EagerKernelRates>,
}

#[derive(Debug, Deserialize)]
struct Measured {
    counts: Vec<u32>,
    reps: u32,
    kinds: BTreeMap<String, BTreeMap<String, PhaseFit>>,
}

#[derive(Debug, Deserialize)]
struct PhaseFit {
    secs_per_layer: f64,
    fixed_secs: f64,
}

/// The phases a profile keeps, as torch_bench.py names them.
const PHASES: [&str; 3] = ["forward", "backward", "optimizer"];

/// The layer before each chain: torch_bench.py's HOST_KINDS builds image kinds behind a 1×1
/// convolution with a bias and token kinds behind a linear layer.
fn stem_of(kind: &str) -> &'static str {
    match kind {
        "conv" | "conv_bias" | "norm" | "activation" | "pool" | "add" => "conv_bias",
        _ => "linear",
    }
}

/// One device.json's eager costs.
pub fn load(path: &Path) -> Result<Eager, ImportError> {
    parse(&read_text(path)?, &path.display().to_string())
}

pub fn parse(text: &str, file: &str) -> Result<Eager, ImportError> {
    let d: DeviceJson = serde_json::from_str(text)
        .map_err(|e| ImportError::whole(file, format!("torch_bench.py's device.json ({e})")))?;
    if d.eager_host.is_none() && d.eager_kernels.is_none() && d.eager_blocks.is_none() {
        return Err(ImportError::whole(
            file,
            "a field `eager_host`, `eager_kernels` or `eager_blocks` (torch_bench.py \
             --host-costs, --kernel-rates or --block-rates writes them)",
        ));
    }
    let machine = if d.machine.is_empty() {
        d.device_name.clone()
    } else {
        d.machine.clone()
    };
    let date = d.date_utc.get(..10).map(str::to_string);
    // Memory-bound layers (--kernel-rates) and transformer blocks (--block-rates): one map of
    // rates by kind, each source in the provenance.
    let mut layers = BTreeMap::new();
    let mut sources = Vec::new();
    for (field, measured, how) in [
        (
            "eager_kernels",
            &d.eager_kernels,
            "--kernel-rates: chains of 4 and 12 large layers of each kind, forward and backward \
             between CUDA events, one layer's seconds over its elements read plus written",
        ),
        (
            "eager_blocks",
            &d.eager_blocks,
            "--block-rates: chains of 2 and 6 GPT attention (scores stored) and MLP blocks of \
             hidden 1024 at 96 x 256 and 32 x 768 tokens between CUDA events, less their \
             matrix products timed alone, per element of input plus output and per stored score",
        ),
    ] {
        let Some(k) = measured else { continue };
        for (kind, f) in &k.kinds {
            let rates = [
                f.forward_secs_per_element,
                f.backward_secs_per_element,
                f.forward_secs_per_score_element,
                f.backward_secs_per_score_element,
            ];
            if !(rates.iter().all(|x| x.is_finite() && *x >= 0.0) && rates[0] + rates[2] > 0.0) {
                return Err(ImportError::whole(
                    file,
                    format!(
                        "`{field}.kinds.{kind}` seconds per element (and per score element) \
                         >= 0, forward > 0"
                    ),
                ));
            }
            layers.insert(
                kind.clone(),
                KernelRate {
                    forward_secs_per_element: f.forward_secs_per_element,
                    backward_secs_per_element: f.backward_secs_per_element,
                    forward_secs_per_score_element: f.forward_secs_per_score_element,
                    backward_secs_per_score_element: f.backward_secs_per_score_element,
                },
            );
        }
        sources.push(how);
    }
    let kernels = (!layers.is_empty()).then(|| EagerKernelRates {
        layers,
        provenance: Provenance {
            source: "measured".into(),
            detail: format!(
                "torch_bench.py on {machine} ({}, torch {}, {}): {} ({file})",
                d.dtype,
                d.torch,
                d.date_utc,
                sources.join("; ")
            ),
            date: date.clone(),
        },
    });
    let Some(m) = d.eager_host else {
        return Ok(Eager {
            dtype: d.dtype,
            host: None,
            kernels,
        });
    };
    let phase = |kind: &str, p: &str| -> Result<&PhaseFit, ImportError> {
        let fit =
            m.kinds.get(kind).and_then(|k| k.get(p)).ok_or_else(|| {
                ImportError::whole(file, format!("`eager_host.kinds.{kind}.{p}`"))
            })?;
        if !(fit.secs_per_layer.is_finite() && fit.fixed_secs.is_finite()) {
            return Err(ImportError::whole(
                file,
                format!("`eager_host.kinds.{kind}.{p}` finite seconds"),
            ));
        }
        Ok(fit)
    };
    let secs = |s: f64| Duration(SimTime::from_secs_f64(s.max(0.0)));
    let mut layers = BTreeMap::new();
    let mut fixed: [Vec<f64>; 3] = Default::default();
    for kind in m.kinds.keys() {
        let mut per = [0.0; 3];
        for (i, p) in PHASES.iter().enumerate() {
            let fit = phase(kind, p)?;
            per[i] = fit.secs_per_layer;
            fixed[i].push(fit.fixed_secs - phase(stem_of(kind), p)?.secs_per_layer);
        }
        layers.insert(
            kind.clone(),
            HostPhases {
                forward: secs(per[0]),
                backward: secs(per[1]),
                optimizer: secs(per[2]),
            },
        );
    }
    if layers.is_empty() {
        return Err(ImportError::whole(
            file,
            "at least one kind in `eager_host.kinds`",
        ));
    }
    let step = HostPhases {
        forward: secs(median(&mut fixed[0])),
        backward: secs(median(&mut fixed[1])),
        optimizer: secs(median(&mut fixed[2])),
    };
    let counts: Vec<String> = m.counts.iter().map(u32::to_string).collect();
    let provenance = Provenance {
        source: "measured".into(),
        detail: format!(
            "torch_bench.py --host-costs on {machine} ({}, torch {}, {}): steps of {} tiny \
             layers of each kind, median of {} steps, each phase on the host's clock; per layer \
             the slope over the chain's length, per step the median intercept less the stem's \
             slope ({file})",
            d.dtype,
            d.torch,
            d.date_utc,
            counts.join(", "),
            m.reps
        ),
        date,
    };
    Ok(Eager {
        dtype: d.dtype,
        host: Some(EagerHostCosts {
            step,
            layers,
            provenance,
        }),
        kernels,
    })
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => 0.0,
        n if n % 2 == 1 => v[n / 2],
        n => 0.5 * (v[n / 2 - 1] + v[n / 2]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kind(slope_us: f64, fixed_us: f64) -> String {
        let phase = |s: f64, f: f64| {
            format!(
                "{{\"secs_per_layer\": {}, \"fixed_secs\": {}}}",
                s * 1e-6,
                f * 1e-6
            )
        };
        format!(
            "{{\"forward\": {}, \"backward\": {}, \"optimizer\": {}, \"step_synchronized\": {}}}",
            phase(slope_us, fixed_us),
            phase(2.0 * slope_us, fixed_us),
            phase(-0.3, fixed_us),
            phase(3.0 * slope_us, 3.0 * fixed_us)
        )
    }

    fn device_json(kinds: &[(&str, f64, f64)]) -> String {
        let body: Vec<String> = kinds
            .iter()
            .map(|(k, s, f)| format!("\"{k}\": {}", kind(*s, *f)))
            .collect();
        format!(
            "{{\"dtype\": \"bf16\", \"device_name\": \"NVIDIA H200\", \"machine\": \"h200 (vm)\", \
             \"torch\": \"2.11.0\", \"date_utc\": \"2026-11-27T18:00:00Z\", \"eager_host\": \
             {{\"counts\": [8, 24, 72], \"reps\": 20, \"attention\": \"plain\", \"kinds\": {{{}}}}}}}",
            body.join(", ")
        )
    }

    #[test]
    fn slopes_are_the_layers_costs_and_the_step_cost_is_the_median_intercept_less_the_stem() {
        let text = device_json(&[
            ("conv_bias", 50.0, 300.0),
            ("norm", 70.0, 250.0),
            ("linear", 60.0, 400.0),
            ("mlp_block", 200.0, 500.0),
        ]);
        let e = parse(&text, "device.json").unwrap();
        assert_eq!(e.dtype, "bf16");
        assert_eq!(e.kernels, None);
        let c = e.host.unwrap();
        let us = |d: Duration| (d.0.as_secs_f64() * 1e6 * 1000.0).round() / 1000.0;
        assert_eq!(us(c.layers["norm"].forward), 70.0);
        assert_eq!(us(c.layers["norm"].backward), 140.0);
        // A phase a kind does not use, fitted below zero within noise, costs nothing.
        assert_eq!(us(c.layers["norm"].optimizer), 0.0);
        // Forward intercepts less their stems' slopes: conv_bias 300 - 50, norm 250 - 50,
        // linear 400 - 60, mlp_block 500 - 60: median of 200, 250, 340, 440 = 295.
        assert_eq!(us(c.step.forward), 295.0);
        assert!(c.provenance.detail.contains("h200 (vm)"));
        assert_eq!(c.provenance.date.as_deref(), Some("2026-11-27"));
    }

    #[test]
    fn a_file_without_host_costs_names_the_field_and_the_option() {
        let e = parse(
            "{\"dtype\": \"bf16\", \"device_name\": \"x\"}",
            "runs/device.json",
        )
        .unwrap_err();
        assert!(e.to_string().contains("runs/device.json"), "{e}");
        assert!(e.to_string().contains("--host-costs"), "{e}");
    }

    #[test]
    fn kernel_rates_are_kept_per_element_as_measured() {
        let text = "{\"dtype\": \"bf16\", \"device_name\": \"NVIDIA H200\", \"eager_kernels\": \
                    {\"counts\": [4, 12], \"reps\": 10, \"kinds\": {\"norm\": \
                    {\"forward_secs_per_element\": 3.6e-12, \"backward_secs_per_element\": 5.2e-12}}}}";
        let e = parse(text, "k.json").unwrap();
        assert!(e.host.is_none());
        let k = e.kernels.unwrap();
        assert_eq!(k.layers["norm"].forward_secs_per_element, 3.6e-12);
        assert_eq!(k.layers["norm"].backward_secs_per_element, 5.2e-12);
        let bad = text.replace("3.6e-12", "-1.0");
        let err = parse(&bad, "k.json").unwrap_err().to_string();
        assert!(err.contains("eager_kernels.kinds.norm"), "{err}");
    }

    #[test]
    fn block_rates_keep_their_rate_per_stored_score() {
        let text = "{\"dtype\": \"bf16\", \"device_name\": \"NVIDIA H200\", \"eager_blocks\": \
                    {\"kinds\": {\"attention_block\": {\"forward_secs_per_element\": 1.2e-11, \
                    \"backward_secs_per_element\": 2.2e-11, \"forward_secs_per_score_element\": \
                    1.1e-11, \"backward_secs_per_score_element\": 1.4e-11}}}}";
        let k = parse(text, "b.json").unwrap().kernels.unwrap();
        let a = &k.layers["attention_block"];
        assert_eq!(a.forward_secs_per_score_element, 1.1e-11);
        assert_eq!(a.backward_secs_per_score_element, 1.4e-11);
        assert!(k.provenance.detail.contains("--block-rates"));
        // A fit below zero (a block the host, not the GPU, set the pace of) is refused.
        let bad = text.replace("1.2e-11", "-7.3e-12");
        let err = parse(&bad, "b.json").unwrap_err().to_string();
        assert!(err.contains("eager_blocks.kinds.attention_block"), "{err}");
    }

    #[test]
    fn a_kind_missing_its_stem_is_an_error_naming_it() {
        let e = parse(&device_json(&[("norm", 70.0, 250.0)]), "d.json").unwrap_err();
        assert!(
            e.to_string().contains("eager_host.kinds.conv_bias.forward"),
            "{e}"
        );
    }
}
