//! Criterion benchmarks of whole training steps (see `sim::bench`, case (c)): GPT-1.3B with
//! TP 8 x PP 4 x DP under NCCL on the rail-optimized H100 cluster at 1,024 / 4,096 / 16,384
//! GPUs, and Llama-3.1 405B (TP 8 x PP 16 x DP 128) at 16,384. The 131,072-GPU step takes
//! about a minute a run, too long for criterion's samples: `dtsim bench` times it once.
//!
//! `cargo bench -p sim --bench steps`

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use std::hint::black_box;

use sim::bench::{StepCase, GPT_1_3B_STEP, LLAMA3_405B_STEP};
use sim::collective::play::Watch;
use sim::scenario::workload::run_workload;

fn step(c: &mut Criterion) {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut g = c.benchmark_group("training_step");
    g.sample_size(10);
    let cases: [(StepCase, u32); 4] = [
        (GPT_1_3B_STEP, 1024),
        (GPT_1_3B_STEP, 4096),
        (GPT_1_3B_STEP, 16384),
        (LLAMA3_405B_STEP, 16384),
    ];
    for (case, gpus) in cases {
        let s = case.scenario(&root, gpus).expect("bundled bench scenario");
        g.bench_with_input(BenchmarkId::new(case.name, gpus), &s, |b, s| {
            b.iter(|| black_box(run_workload(s, Watch::default()).expect("runs").summary.ops))
        });
    }
    g.finish();
}

criterion_group!(benches, step);
criterion_main!(benches);
