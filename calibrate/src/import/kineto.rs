//! PyTorch profiler (Kineto) Chrome traces, gzip or not: per-kernel and per-layer GPU time,
//! NCCL collectives with their size and process group, and `ProfilerStep#N` iterations.
//!
//! Format (pytorch/kineto `libkineto/src/output_json.cpp`; PyTorch `torch.profiler`
//! `export_chrome_trace`): `{"traceEvents": [...]}` of complete events `{"ph": "X", "cat", "name",
//! "pid", "tid", "ts" (us), "dur" (us), "args"}`. Categories used: `kernel` (GPU kernels, with
//! `args.correlation`), `cuda_runtime` / `cuda_driver` (the launch, same `correlation`),
//! `cpu_op` (ATen ops; `record_param_comms` carries `Collective name`, `In msg nelems`, `dtype`,
//! `Group size`, `Process Group Name`), `user_annotation` (`record_function` ranges and
//! `ProfilerStep#N`), `python_function` (`nn.Module: Conv2d_0` with `with_modules`). PyTorch
//! 1.8's capitalized categories (`Kernel`, `Runtime`, `Operator`) are accepted too.
//!
//! A kernel's layer is the range that was open on the launching thread when it was launched:
//! the outermost user annotation other than a profiler step, else the outermost `nn.Module`,
//! else the outermost ATen op.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Serialize;
use serde_json::Value;

use crate::error::{read_text, ImportError};

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Step {
    pub number: u64,
    pub cpu_secs: f64,
    /// Sum of the durations of kernels launched during the step.
    pub gpu_kernel_secs: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TimeStat {
    pub name: String,
    pub count: u64,
    pub total_secs: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CommKernel {
    /// `all_reduce`, `all_gather`, `reduce_scatter`, `broadcast`, `reduce`, `sendrecv`, ...
    pub collective: String,
    pub bytes: Option<u64>,
    pub group: Option<String>,
    pub group_size: Option<u32>,
    pub start_us: f64,
    pub secs: f64,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct KinetoSummary {
    pub steps: Vec<Step>,
    /// GPU time per kernel name, largest first.
    pub kernels: Vec<TimeStat>,
    /// GPU time per layer (range open at launch), largest first.
    pub layers: Vec<TimeStat>,
    pub collectives: Vec<CommKernel>,
}

pub fn load(path: &Path) -> Result<KinetoSummary, ImportError> {
    parse(&read_text(path)?, &path.display().to_string())
}

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    Step,
    Annotation,
    Module,
    Op,
    CommParams,
}

struct Range<'a> {
    start: f64,
    end: f64,
    kind: Kind,
    name: &'a str,
    args: Option<&'a Value>,
}

/// The collective in an NCCL kernel's name: `ncclDevKernel_AllReduce_Sum_f32_RING_LL` or
/// `ncclKernel_AllGather_RING_LL_Sum_int8_t` → `all_reduce` / `all_gather`.
pub fn nccl_kernel_collective(name: &str) -> Option<String> {
    let rest = name
        .strip_prefix("ncclDevKernel_")
        .or_else(|| name.strip_prefix("ncclKernel_"))?;
    let op = rest.split(['_', '(']).next()?;
    Some(
        match op {
            "AllReduce" => "all_reduce",
            "AllGather" => "all_gather",
            "ReduceScatter" => "reduce_scatter",
            "Broadcast" => "broadcast",
            "Reduce" => "reduce",
            "SendRecv" | "Send" | "Recv" => "sendrecv",
            "AllToAll" | "AlltoAll" => "alltoall",
            other => return Some(other.to_ascii_lowercase()),
        }
        .to_string(),
    )
}

fn dtype_bytes(dtype: &str) -> Option<u64> {
    Some(match dtype.to_ascii_lowercase().as_str() {
        "float" | "float32" | "int" | "int32" => 4,
        "half" | "float16" | "bfloat16" | "short" => 2,
        "double" | "float64" | "long" | "int64" => 8,
        "byte" | "char" | "bool" | "int8" | "uint8" => 1,
        _ => return None,
    })
}

fn collective_from_args(a: &Value) -> Option<String> {
    let c = a
        .get("Collective name")?
        .as_str()?
        .to_ascii_lowercase()
        .replace(['-', ' '], "_");
    Some(match c.as_str() {
        "allreduce" | "all_reduce_coalesced" | "allreduce_coalesced" => "all_reduce".into(),
        "allgather"
        | "_allgather_base"
        | "allgather_into_tensor_coalesced"
        | "all_gather_into_tensor" => "all_gather".into(),
        "reduce_scatter"
        | "_reduce_scatter_base"
        | "reducescatter"
        | "reduce_scatter_tensor_coalesced" => "reduce_scatter".into(),
        _ => c,
    })
}

/// The message size of a collective's arguments: `None` where they do not say, an error where
/// they say more than [`sim::limits::BYTES_MAX`].
fn comm_bytes(a: &Value) -> Result<Option<u64>, String> {
    let Some(n) = a
        .get("In msg nelems")
        .or_else(|| a.get("In msg size"))
        .and_then(Value::as_u64)
    else {
        return Ok(None);
    };
    let Some(size) = a.get("dtype").and_then(Value::as_str).and_then(dtype_bytes) else {
        return Ok(None);
    };
    let bytes = n.saturating_mul(size);
    sim::limits::bytes(bytes)
        .map(Some)
        .map_err(|e| format!("`In msg nelems` x dtype size: {e}"))
}

pub fn parse(text: &str, file: &str) -> Result<KinetoSummary, ImportError> {
    let v: Value = serde_json::from_str(text).map_err(|e| {
        ImportError::at(
            file,
            e.line(),
            format!("a Chrome trace (JSON) from the PyTorch profiler ({e})"),
        )
    })?;
    let events = v
        .get("traceEvents")
        .and_then(Value::as_array)
        .ok_or_else(|| {
            ImportError::whole(
                file,
                "a PyTorch profiler trace: a JSON object with a `traceEvents` list",
            )
        })?;
    let mut kernels: Vec<(&str, f64, f64, Option<u64>, &Value)> = Vec::new();
    let mut launches: BTreeMap<u64, ((u64, u64), f64)> = BTreeMap::new();
    let mut ranges: BTreeMap<(u64, u64), Vec<Range>> = BTreeMap::new();
    let id = |x: Option<&Value>| match x {
        Some(Value::Number(n)) => n.as_u64().unwrap_or(0),
        Some(Value::String(s)) => s
            .bytes()
            .fold(0u64, |h, b| h.wrapping_mul(31).wrapping_add(b as u64)),
        _ => 0,
    };
    static NULL: Value = Value::Null;
    for (i, e) in events.iter().enumerate() {
        if e.get("ph").and_then(Value::as_str) != Some("X") {
            continue;
        }
        let (Some(ts), Some(dur)) = (
            e.get("ts").and_then(Value::as_f64),
            e.get("dur").and_then(Value::as_f64),
        ) else {
            continue;
        };
        if !(dur.is_finite() && dur >= 0.0 && ts.is_finite()) {
            return Err(ImportError::whole(
                file,
                format!(
                    "traceEvents[{i}]: a finite `ts` and a `dur` of 0 or more (us), \
                     got ts {ts}, dur {dur}"
                ),
            ));
        }
        let cat = e
            .get("cat")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_ascii_lowercase();
        let name = e.get("name").and_then(Value::as_str).unwrap_or("");
        let args = e.get("args");
        let thread = (id(e.get("pid")), id(e.get("tid")));
        let corr = args
            .and_then(|a| a.get("correlation"))
            .and_then(Value::as_u64);
        match cat.as_str() {
            "kernel" => kernels.push((name, ts, dur, corr, args.unwrap_or(&NULL))),
            "cuda_runtime" | "runtime" | "cuda_driver" => {
                if let Some(c) = corr {
                    launches.insert(c, (thread, ts));
                }
            }
            "cpu_op" | "operator" | "user_annotation" | "python_function" => {
                let kind = if name.starts_with("ProfilerStep#") {
                    Kind::Step
                } else if name == "record_param_comms" {
                    Kind::CommParams
                } else if cat == "user_annotation" {
                    Kind::Annotation
                } else if cat == "python_function" {
                    if !name.starts_with("nn.Module:") {
                        continue;
                    }
                    Kind::Module
                } else {
                    Kind::Op
                };
                ranges.entry(thread).or_default().push(Range {
                    start: ts,
                    end: ts + dur,
                    kind,
                    name,
                    args,
                });
            }
            _ => {}
        }
    }
    for r in ranges.values_mut() {
        // Outer ranges first when two start together.
        r.sort_by(|a, b| a.start.total_cmp(&b.start).then(b.end.total_cmp(&a.end)));
    }
    // For each kernel: the ranges open on its launching thread at launch time.
    let mut by_thread: BTreeMap<(u64, u64), Vec<(f64, usize)>> = BTreeMap::new();
    for (k, kern) in kernels.iter().enumerate() {
        if let Some((thread, ts)) = kern.3.and_then(|c| launches.get(&c)) {
            by_thread.entry(*thread).or_default().push((*ts, k));
        }
    }
    let mut layer_of: Vec<Option<&str>> = vec![None; kernels.len()];
    let mut step_of: Vec<Option<u64>> = vec![None; kernels.len()];
    let mut comm_args_of: Vec<Option<&Value>> = vec![None; kernels.len()];
    for (thread, mut ls) in by_thread {
        ls.sort_by(|a, b| a.0.total_cmp(&b.0));
        let rs = ranges.get(&thread).map(Vec::as_slice).unwrap_or(&[]);
        let mut open: Vec<&Range> = Vec::new();
        let mut next = 0;
        for (ts, k) in ls {
            while next < rs.len() && rs[next].start <= ts {
                open.push(&rs[next]);
                next += 1;
            }
            open.retain(|r| r.end > ts);
            let outermost = |kind: Kind| open.iter().find(|r| r.kind == kind).map(|r| r.name);
            layer_of[k] = outermost(Kind::Annotation)
                .or_else(|| outermost(Kind::Module))
                .or_else(|| outermost(Kind::Op));
            comm_args_of[k] = open
                .iter()
                .rev()
                .find(|r| r.kind == Kind::CommParams)
                .and_then(|r| r.args);
        }
    }
    // A kernel's step is the `ProfilerStep#N` range open at its launch on any thread: the
    // backward pass launches from autograd's own thread, where no step range is open (the
    // training thread waits inside `backward()` meanwhile).
    let mut step_ranges: Vec<(f64, f64, u64)> = ranges
        .values()
        .flatten()
        .filter(|r| r.kind == Kind::Step)
        .filter_map(|r| {
            let n = r.name.trim_start_matches("ProfilerStep#").parse().ok()?;
            Some((r.start, r.end, n))
        })
        .collect();
    step_ranges.sort_by(|a, b| a.0.total_cmp(&b.0));
    for (k, kern) in kernels.iter().enumerate() {
        if let Some((_, ts)) = kern.3.and_then(|c| launches.get(&c)) {
            let at = step_ranges.partition_point(|r| r.0 <= *ts);
            step_of[k] = at
                .checked_sub(1)
                .map(|i| step_ranges[i])
                .filter(|r| *ts < r.1)
                .map(|r| r.2);
        }
    }
    let mut summary = KinetoSummary::default();
    let mut kstat: BTreeMap<&str, (u64, f64)> = BTreeMap::new();
    let mut lstat: BTreeMap<&str, (u64, f64)> = BTreeMap::new();
    let mut step_gpu: BTreeMap<u64, f64> = BTreeMap::new();
    for (k, (name, ts, dur, _, args)) in kernels.iter().enumerate() {
        let secs = dur * 1e-6;
        let e = kstat.entry(name).or_default();
        e.0 += 1;
        e.1 += secs;
        let l = lstat
            .entry(layer_of[k].unwrap_or("(launched outside any op)"))
            .or_default();
        l.0 += 1;
        l.1 += secs;
        if let Some(s) = step_of[k] {
            *step_gpu.entry(s).or_default() += secs;
        }
        if let Some(coll) = nccl_kernel_collective(name) {
            let src = if args.get("Collective name").is_some() {
                Some(*args)
            } else {
                comm_args_of[k]
            };
            let bytes = match src.map(comm_bytes).transpose() {
                Ok(b) => b.flatten(),
                Err(e) => {
                    return Err(ImportError::whole(file, format!("kernel {name:?}: {e}")));
                }
            };
            summary.collectives.push(CommKernel {
                collective: src.and_then(collective_from_args).unwrap_or(coll),
                bytes,
                group: src
                    .and_then(|a| a.get("Process Group Name"))
                    .and_then(Value::as_str)
                    .map(str::to_string),
                group_size: src
                    .and_then(|a| a.get("Group size"))
                    .and_then(Value::as_u64)
                    .map(|g| g as u32),
                start_us: *ts,
                secs,
            });
        }
    }
    let stats = |m: BTreeMap<&str, (u64, f64)>| {
        let mut v: Vec<TimeStat> = m
            .into_iter()
            .map(|(n, (c, t))| TimeStat {
                name: n.to_string(),
                count: c,
                total_secs: t,
            })
            .collect();
        v.sort_by(|a, b| {
            b.total_secs
                .total_cmp(&a.total_secs)
                .then(a.name.cmp(&b.name))
        });
        v
    };
    summary.kernels = stats(kstat);
    summary.layers = stats(lstat);
    let mut steps: Vec<Step> = ranges
        .values()
        .flatten()
        .filter(|r| r.kind == Kind::Step)
        .filter_map(|r| {
            r.name
                .trim_start_matches("ProfilerStep#")
                .parse()
                .ok()
                .map(|n| Step {
                    number: n,
                    cpu_secs: (r.end - r.start) * 1e-6,
                    gpu_kernel_secs: step_gpu.get(&n).copied().unwrap_or(0.0),
                })
        })
        .collect();
    steps.sort_by_key(|s| s.number);
    summary.steps = steps;
    if summary.kernels.is_empty() && summary.steps.is_empty() {
        return Err(ImportError::whole(file, "GPU kernels (`cat: kernel`) or `ProfilerStep#N` ranges in `traceEvents`; was the profiler run with ProfilerActivity.CUDA?"));
    }
    Ok(summary)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One step on the training thread (tid 1): a forward kernel launched there, and a backward
    /// kernel launched from autograd's thread (tid 2) while the step waits in `backward()`;
    /// a kernel launched after the step belongs to none.
    const TWO_THREADS: &str = r#"{"traceEvents": [
      {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#7", "pid": 1, "tid": 1, "ts": 0, "dur": 1000},
      {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 10, "dur": 20},
      {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 12, "dur": 5, "args": {"correlation": 1}},
      {"ph": "X", "cat": "cpu_op", "name": "autograd::engine::evaluate_function: MmBackward0", "pid": 1, "tid": 2, "ts": 400, "dur": 50},
      {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 2, "ts": 410, "dur": 5, "args": {"correlation": 2}},
      {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 1500, "dur": 5, "args": {"correlation": 3}},
      {"ph": "X", "cat": "kernel", "name": "fwd_gemm", "pid": 0, "tid": 7, "ts": 20, "dur": 100, "args": {"correlation": 1}},
      {"ph": "X", "cat": "kernel", "name": "bwd_gemm", "pid": 0, "tid": 7, "ts": 420, "dur": 300, "args": {"correlation": 2}},
      {"ph": "X", "cat": "kernel", "name": "later", "pid": 0, "tid": 7, "ts": 1510, "dur": 50, "args": {"correlation": 3}}
    ]}"#;

    #[test]
    fn kernels_launched_from_autograds_thread_count_in_their_step() {
        let s = parse(TWO_THREADS, "t.json").unwrap();
        assert_eq!(s.steps.len(), 1);
        assert_eq!(s.steps[0].number, 7);
        assert!(
            (s.steps[0].gpu_kernel_secs - 400e-6).abs() < 1e-12,
            "{:?}",
            s.steps
        );
        // Layers still come from the launching thread's own ranges.
        let bwd = s
            .layers
            .iter()
            .find(|l| l.name.contains("MmBackward0"))
            .unwrap();
        assert!((bwd.total_secs - 300e-6).abs() < 1e-12);
    }
}
