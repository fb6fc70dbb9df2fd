//! What a training-step run reports: the summary (step time, throughput, compute vs
//! communication, memory, epoch time, traffic per epoch), the GPU×GPU traffic matrix split
//! into reduce-scatter and all-gather traffic, and study tables (speedup, scaling efficiency).

use std::collections::BTreeMap;
use std::fmt::{self, Write as _};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Serialize;

use super::output::write_atomic;
use crate::topology::Topology;
use crate::units::fmt_bytes;
use crate::workload::memory::MemoryUse;
use crate::workload::metrics::StepMetrics;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WorkloadSummary {
    pub scenario: String,
    pub topology: String,
    pub profile: String,
    pub model: String,
    pub params: u64,
    pub forward_gflops_per_sample: f64,
    pub parallelism: String,
    pub algorithm: String,
    pub ranks: u32,
    pub data_parallel: u32,
    pub tensor_parallel: u32,
    pub pipeline_parallel: u32,
    /// Model chunks per pipeline stage (interleaved 1F1B; 1 and omitted otherwise).
    #[serde(skip_serializing_if = "is_one")]
    pub virtual_stages: u32,
    /// Context-parallel group size (1 and omitted without context parallelism).
    #[serde(skip_serializing_if = "is_one")]
    pub context_parallel: u32,
    /// The mesh's axes innermost first, when not the default "tp-cp-dp-pp" (omitted then).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rank_order: Option<String>,
    /// Expert-parallel group size (mixture-of-experts models; 1 and omitted otherwise).
    #[serde(skip_serializing_if = "is_one")]
    pub expert_parallel: u32,
    pub microbatches: u32,
    pub batch_per_gpu: u64,
    pub global_batch: u64,
    pub dtype: String,
    pub buckets: usize,
    /// Bytes of each gradient bucket, in the order they are sent.
    pub bucket_bytes: Vec<u64>,
    /// Layer ranges [start, end) of the pipeline stages.
    pub stages: Vec<(usize, usize)>,
    pub metrics: StepMetrics,
    pub memory: MemoryUse,
    pub memory_capacity_bytes: u64,
    pub largest_batch_per_gpu: u64,
    pub steps_per_epoch: u64,
    pub epochs: u64,
    /// Bytes sent per epoch by traffic class (reduce-scatter, all-gather, point-to-point).
    pub traffic_per_epoch_bytes: BTreeMap<String, f64>,
    pub ops: usize,
    pub events: u64,
    /// A replayed trace: what it was and what it recorded (absent for catalog models).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trace: Option<TraceFacts>,
}

/// What a replayed trace recorded, beside what the replay predicts.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TraceFacts {
    /// The trace directory as the scenario names it.
    pub path: String,
    /// `pytorch` or `chakra`.
    pub format: String,
    pub collectives: usize,
    pub point_to_point: usize,
    /// The longest rank's recorded step, when the trace has it.
    pub recorded_step_secs: Option<f64>,
    /// Recorded compute (the busiest rank's compute nodes).
    pub recorded_compute_secs: f64,
}

impl WorkloadSummary {
    pub fn epoch_secs(&self) -> f64 {
        self.metrics.step_secs * self.steps_per_epoch as f64
    }
}

#[derive(Debug, Clone)]
pub struct WorkloadReport {
    pub summary: WorkloadSummary,
    /// Bytes per step (src endpoint, dst endpoint, class).
    pub traffic_per_step: BTreeMap<(u32, u32, &'static str), u128>,
    /// Device name of each endpoint.
    pub endpoints: Vec<String>,
    pub topology: Arc<Topology>,
    /// One step per rank as a Chrome / Perfetto trace.
    pub trace: super::trace::Trace,
    /// Utilization (and buffer occupancy) over the step of the busiest links.
    pub link_series: Option<crate::net::series::LinkSeries>,
}

/// One variant of a study with its speedup over the first.
#[derive(Debug, Clone)]
pub struct StudyRow {
    pub label: String,
    pub report: WorkloadReport,
    /// samples/s over the first variant's samples/s.
    pub speedup: f64,
    /// speedup / (ranks / first variant's ranks): weak scaling when the batch per GPU is
    /// fixed, strong scaling when the global batch is.
    pub scaling_efficiency: f64,
}

fn ms(s: f64) -> f64 {
    s * 1e3
}

impl WorkloadReport {
    pub fn summary_json(&self) -> String {
        serde_json::to_string_pretty(&self.summary).expect("the summary serializes") + "\n"
    }

    /// The traffic of one epoch as a matrix: `class` = "all" or one traffic class.
    pub fn epoch_matrix(&self, class: &str) -> Vec<Vec<f64>> {
        let n = self.endpoints.len();
        let mut m = vec![vec![0.0; n]; n];
        for (&(s, d, c), &b) in &self.traffic_per_step {
            if class == "all" || class == c {
                m[s as usize][d as usize] += b as f64 * self.summary.steps_per_epoch as f64;
            }
        }
        m
    }

    /// Writes traffic_per_epoch.csv (src, dst, class, bytes), trace.json, link_series.csv and,
    /// last, summary.json.
    pub fn write_dir(&self, dir: &Path) -> std::io::Result<Vec<PathBuf>> {
        let mut written = Vec::new();
        let mut s = String::from("src,src_device,dst,dst_device,class,bytes_per_epoch\n");
        for (&(a, b, c), &bytes) in &self.traffic_per_step {
            let _ = writeln!(
                s,
                "{a},{},{b},{},{c},{}",
                self.endpoints[a as usize],
                self.endpoints[b as usize],
                bytes * self.summary.steps_per_epoch as u128
            );
        }
        let p = dir.join("traffic_per_epoch.csv");
        write_atomic(&p, s.as_bytes())?;
        written.push(p);
        let p = dir.join("trace.json");
        write_atomic(&p, self.trace.to_json().as_bytes())?;
        written.push(p);
        if let Some(series) = &self.link_series {
            let topo = &self.topology;
            let name = |l: u32| {
                let link = topo.link(crate::topology::LinkId(l));
                (
                    topo.device(link.from).name.clone(),
                    topo.device(link.to).name.clone(),
                )
            };
            let p = dir.join("link_series.csv");
            write_atomic(&p, super::output::link_series_csv(series, name).as_bytes())?;
            written.push(p);
        }
        // The summary last: a folder with summary.json holds every other file too.
        let p = dir.join("summary.json");
        write_atomic(&p, self.summary_json().as_bytes())?;
        written.push(p);
        Ok(written)
    }
}

impl fmt::Display for WorkloadReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = &self.summary;
        let m = &s.metrics;
        writeln!(f, "scenario   {}", s.scenario)?;
        writeln!(f, "topology   {}  (profile {})", s.topology, s.profile)?;
        if let Some(t) = &s.trace {
            return self.fmt_trace(f, t);
        }
        writeln!(
            f,
            "model      {}  ({} parameters, {:.2} GFLOPs forward per sample, {})",
            s.model, s.params, s.forward_gflops_per_sample, s.dtype
        )?;
        writeln!(
            f,
            "training   {} ranks = DP {} x TP {} x PP {}{}{}{}, {}, collectives {}, batch {}/GPU ({} global){}{}",
            s.ranks,
            s.data_parallel,
            s.tensor_parallel,
            s.pipeline_parallel,
            if s.context_parallel > 1 { format!(" x CP {}", s.context_parallel) } else { String::new() },
            if s.expert_parallel > 1 { format!(" (EP {} within DP)", s.expert_parallel) } else { String::new() },
            s.rank_order.as_ref().map(|o| format!(", ranks ordered {o}")).unwrap_or_default(),
            s.parallelism,
            s.algorithm,
            s.batch_per_gpu,
            s.global_batch,
            if s.pipeline_parallel > 1 { format!(", {} micro-batches", s.microbatches) } else { String::new() },
            if s.virtual_stages > 1 { format!(", interleaved 1F1B over {} chunks per stage", s.virtual_stages) } else { String::new() }
        )?;
        writeln!(f)?;
        writeln!(f, "  step time            {:>10.3} ms", ms(m.step_secs))?;
        write!(
            f,
            "  throughput           {:>10.1} samples/s",
            m.samples_per_s
        )?;
        if let Some(t) = m.tokens_per_s {
            write!(f, "  ({t:.0} tokens/s)")?;
        }
        writeln!(f)?;
        writeln!(f, "  compute (busiest GPU){:>10.3} ms", ms(m.compute_secs))?;
        fmt_communication(f, m)?;
        if m.bubble_fraction_per_stage.len() > 1 {
            let b: Vec<String> = m
                .bubble_fraction_per_stage
                .iter()
                .map(|x| format!("{:.1}%", x * 100.0))
                .collect();
            // What the schedule alone leaves idle with equal stages and free communication:
            // (p - 1) / (v m + p - 1) of the step; the rest is communication the stage waits
            // on (tensor-parallel collectives, activations, gradients) and unequal stages.
            let (p, m) = (s.pipeline_parallel.max(1), s.microbatches.max(1));
            let v = s.virtual_stages.max(1);
            let bubble = (p - 1) as f64 / (v * m + p - 1) as f64;
            writeln!(
                f,
                "  idle per stage       {}  (no compute running; the schedule's own bubble is \
                 {:.1}%, the rest waits on communication or on unequal stages)",
                b.join(" "),
                bubble * 100.0
            )?;
        }
        if s.buckets > 0 {
            writeln!(f, "  gradient buckets     {}", s.buckets)?;
        }
        let mem = &s.memory;
        writeln!(
            f,
            "  memory per GPU       {} (params {}, grads {}, optimizer {}, activations {}) of {}; largest batch that fits: {}",
            fmt_bytes(mem.total_bytes() as f64),
            fmt_bytes(mem.params_bytes as f64),
            fmt_bytes(mem.grads_bytes as f64),
            fmt_bytes(mem.optimizer_bytes as f64),
            fmt_bytes(mem.activation_bytes as f64),
            fmt_bytes(s.memory_capacity_bytes as f64),
            s.largest_batch_per_gpu
        )?;
        writeln!(
            f,
            "  epoch ({} steps)     {:>10.3} s; {} epochs {:.3} s",
            s.steps_per_epoch,
            s.epoch_secs(),
            s.epochs,
            s.epoch_secs() * s.epochs as f64
        )?;
        let classes: Vec<String> = s
            .traffic_per_epoch_bytes
            .iter()
            .map(|(c, b)| format!("{c} {}", fmt_bytes(*b)))
            .collect();
        writeln!(f, "  traffic per epoch    {}", classes.join(", "))?;
        let n = self.endpoints.len();
        if (2..=16).contains(&n) {
            for class in ["reduce-scatter", "all-gather"] {
                if !s.traffic_per_epoch_bytes.contains_key(class) {
                    continue;
                }
                writeln!(f, "\n  {class} traffic per epoch (GB, row sends to column)")?;
                let mat = self.epoch_matrix(class);
                write!(f, "  {:>6}", "")?;
                for j in 0..n {
                    write!(f, " {:>6}", j)?;
                }
                writeln!(f)?;
                for (i, row) in mat.iter().enumerate() {
                    write!(f, "  {:>6}", i)?;
                    for v in row {
                        write!(f, " {:>6.2}", v / 1e9)?;
                    }
                    writeln!(f)?;
                }
            }
        }
        write!(f, "\n  {} ops, {} events", s.ops, s.events)
    }
}

/// The step's communication lines: all of it, and what compute does not hide.
fn fmt_communication(f: &mut fmt::Formatter<'_>, m: &StepMetrics) -> fmt::Result {
    writeln!(
        f,
        "  communication        {:>10.3} ms",
        ms(m.communication_secs)
    )?;
    writeln!(
        f,
        "  exposed communication{:>10.3} ms  ({:.1}% of the step)",
        ms(m.exposed_communication_secs),
        m.communication_overhead_pct
    )
}

impl WorkloadReport {
    /// A replayed trace: what it recorded beside what the replay predicts.
    fn fmt_trace(&self, f: &mut fmt::Formatter<'_>, t: &TraceFacts) -> fmt::Result {
        let s = &self.summary;
        let m = &s.metrics;
        writeln!(
            f,
            "trace      {} ({} {}: {} ranks, {} collectives, {} point-to-point), collectives {}",
            s.model, t.format, t.path, s.ranks, t.collectives, t.point_to_point, s.algorithm
        )?;
        writeln!(f)?;
        write!(f, "  step time            {:>10.3} ms", ms(m.step_secs))?;
        if let Some(r) = t.recorded_step_secs.filter(|&r| r > 0.0) {
            write!(
                f,
                "  (recorded {:.3} ms, {:+.1}%)",
                ms(r),
                100.0 * (m.step_secs - r) / r
            )?;
        }
        writeln!(f)?;
        if s.global_batch > 0 {
            writeln!(
                f,
                "  throughput           {:>10.1} samples/s",
                m.samples_per_s
            )?;
        }
        writeln!(
            f,
            "  compute (busiest rank){:>9.3} ms  (as recorded)",
            ms(m.compute_secs)
        )?;
        fmt_communication(f, m)?;
        let classes: Vec<String> = s
            .traffic_per_epoch_bytes
            .iter()
            .map(|(c, b)| format!("{c} {}", fmt_bytes(*b / s.steps_per_epoch.max(1) as f64)))
            .collect();
        writeln!(f, "  traffic per step     {}", classes.join(", "))?;
        write!(f, "\n  {} ops, {} events", s.ops, s.events)
    }
}

/// A study as a table, one row per variant.
pub fn study_table(rows: &[StudyRow]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<28} {:>5} {:>7} {:>7} {:>10} {:>11} {:>10} {:>10} {:>10} {:>7} {:>8} {:>6}",
        "variant",
        "ranks",
        "b/GPU",
        "global",
        "step ms",
        "samples/s",
        "compute ms",
        "comm ms",
        "exposed ms",
        "ovh %",
        "speedup",
        "eff"
    );
    for r in rows {
        let s = &r.report.summary;
        let m = &s.metrics;
        let _ = writeln!(
            out,
            "{:<28} {:>5} {:>7} {:>7} {:>10.3} {:>11.1} {:>10.3} {:>10.3} {:>10.3} {:>7.1} {:>8.2} {:>5.0}%",
            r.label,
            s.ranks,
            s.batch_per_gpu,
            s.global_batch,
            ms(m.step_secs),
            m.samples_per_s,
            ms(m.compute_secs),
            ms(m.communication_secs),
            ms(m.exposed_communication_secs),
            m.communication_overhead_pct,
            r.speedup,
            r.scaling_efficiency * 100.0
        );
    }
    out
}

fn is_one(x: &u32) -> bool {
    *x == 1
}
