//! Criterion benchmarks of the flow model at scale (see `sim::bench` for the cases):
//! one max-min solve of a 16,384-GPU ring step, and ring all-reduces of 1 GiB over
//! 1,024 / 4,096 / 16,384 GPUs, rank-ordered and random.
//!
//! `cargo bench -p sim --bench collectives`

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use std::hint::black_box;

use sim::bench::{fat_tree, fat_tree_k_for, place, ring_all_reduce, Placement, RingStep};
use sim::net::maxmin::MaxMinSolver;

fn ring_step_solve(c: &mut Criterion) {
    let topo = fat_tree(32, 16384, Some(32));
    let mut g = c.benchmark_group("maxmin_ring_step_16384");
    for placement in [Placement::RankOrdered, Placement::Random] {
        let step = RingStep::new(&topo, &place(&topo, 16384, placement));
        let mut solver = MaxMinSolver::new();
        let mut rates = Vec::new();
        g.bench_function(format!("{placement:?}"), |b| {
            b.iter(|| black_box(step.solve(&mut solver, &mut rates)))
        });
    }
    g.finish();
}

fn ring_all_reduce_1gib(c: &mut Criterion) {
    let mut g = c.benchmark_group("ring_all_reduce_1GiB");
    g.sample_size(10);
    for (n, placement) in [
        (1024, Placement::RankOrdered),
        (4096, Placement::RankOrdered),
        (4096, Placement::Random),
        (16384, Placement::RankOrdered),
        (16384, Placement::Random),
    ] {
        let topo = fat_tree(fat_tree_k_for(n), n, None);
        let ranks = place(&topo, n, placement);
        g.bench_with_input(
            BenchmarkId::new(format!("{placement:?}"), n),
            &ranks,
            |b, ranks| b.iter(|| black_box(ring_all_reduce(&topo, ranks, 1 << 30).outcome.end)),
        );
    }
    g.finish();
}

criterion_group!(benches, ring_step_solve, ring_all_reduce_1gib);
criterion_main!(benches);
