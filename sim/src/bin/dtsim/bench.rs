//! `dtsim bench`: runs the benchmark cases of `sim::bench` and prints what they did and how
//! fast (the same cases as `cargo bench -p sim`, as one table a person reads). Each case runs
//! once, except the training steps: the median of seven runs up to 4,096 GPUs and of three at
//! 16,384, each run in a fresh process of its own.

use sim::bench::{StepCase, GPT_1_3B_STEP, LLAMA3_405B_STEP};
use sim::collective::play::Watch;
use sim::scenario;

/// The step cases a child process can be asked to run, by short name.
const STEP_CASES: [(&str, StepCase); 2] = [("gpt", GPT_1_3B_STEP), ("llama", LLAMA3_405B_STEP)];

/// The override that forces the ring on the data-parallel all-reduce.
const RING: &str = "workload.allreduce.algorithm=\"ring\"";

/// What one run of a step case did, as a child process reports it on its last line.
#[derive(Debug, Clone, Copy)]
struct StepRun {
    wall_s: f64,
    ops: u64,
    events: u64,
    step_ms: f64,
    peak_bytes: u64,
}

/// Runs one step case in this process and prints it as one line for the parent
/// (`dtsim bench --step-case NAME --gpus N [--ring]`, hidden from `--help`).
pub fn run_step_case(name: &str, gpus: u32, ring: bool) -> Result<(), String> {
    let case = STEP_CASES
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, c)| c)
        .ok_or_else(|| format!("--step-case: unknown case `{name}` (expected gpt or llama)"))?;
    let set: &[&str] = if ring { &[RING] } else { &[] };
    let s = case
        .scenario_with(std::path::Path::new("."), gpus, set)
        .map_err(|e| e.to_string())?;
    let t = std::time::Instant::now();
    let r = scenario::workload::run_workload(&s, Watch::default()).map_err(|e| e.to_string())?;
    let wall_s = t.elapsed().as_secs_f64();
    println!(
        "step-run {wall_s} {} {} {} {}",
        r.summary.ops,
        r.summary.events,
        r.summary.metrics.step_secs * 1e3,
        sim::bench::peak_memory_bytes().unwrap_or(0)
    );
    Ok(())
}

/// Runs a step case `repeats` times, each in a fresh `dtsim` process (as a user runs a
/// scenario: a process that ran other cases first has a heap already faulted in, which made a
/// 1,024-GPU step 0.09 s instead of 0.19 s), and keeps the median wall time and the largest
/// peak memory.
fn step_case_in_child(
    name: &str,
    gpus: u32,
    ring: bool,
    repeats: usize,
) -> Result<StepRun, String> {
    let exe = std::env::current_exe().map_err(|e| format!("finding dtsim itself: {e}"))?;
    let mut runs = Vec::new();
    for _ in 0..repeats {
        let mut cmd = std::process::Command::new(&exe);
        cmd.args(["bench", "--step-case", name, "--gpus", &gpus.to_string()]);
        if ring {
            cmd.arg("--ring");
        }
        let out = cmd
            .output()
            .map_err(|e| format!("running {}: {e}", exe.display()))?;
        let stdout = String::from_utf8_lossy(&out.stdout);
        let line = stdout.lines().find_map(|l| l.strip_prefix("step-run "));
        let fields: Vec<&str> = line.map(|l| l.split(' ').collect()).unwrap_or_default();
        let parsed = (fields.len() == 5).then(|| -> Option<StepRun> {
            Some(StepRun {
                wall_s: fields[0].parse().ok()?,
                ops: fields[1].parse().ok()?,
                events: fields[2].parse().ok()?,
                step_ms: fields[3].parse().ok()?,
                peak_bytes: fields[4].parse().ok()?,
            })
        });
        match parsed.flatten() {
            Some(r) => runs.push(r),
            None => {
                let err = String::from_utf8_lossy(&out.stderr);
                return Err(format!("{name} at {gpus} GPUs: {}", err.trim()));
            }
        }
    }
    runs.sort_by(|a, b| a.wall_s.total_cmp(&b.wall_s));
    let peak_bytes = runs.iter().map(|r| r.peak_bytes).max().unwrap_or(0);
    Ok(StepRun {
        peak_bytes,
        ..runs[runs.len() / 2]
    })
}

/// Bench (c): training steps at growing GPU counts, each with its wall time, events and peak
/// memory (each case in its own process), the growth exponent between consecutive sizes and
/// the least-squares exponent over all of them (issue 12 tracks these towards near-linear).
fn step_bench(gpus_max: u32) {
    use sim::bench::growth_exponent;
    let root = std::path::Path::new(".");
    if !root.join("topologies/h100_rail_cluster.toml").is_file() {
        println!("    skipped: run from the repository root (it reads topologies/ and data/)");
        return;
    }
    println!(
        "    {:<21} {:>7} {:>9} {:>8} {:>9} {:>11} {:>10} {:>17}",
        "case", "GPUs", "wall s", "ops", "events", "step ms", "peak mem", "growth (t, m)"
    );
    let cases = [
        ("gpt", 1024u32),
        ("gpt", 4096),
        ("gpt", 16384),
        ("gpt", 131072),
        ("llama", 16384),
    ];
    let mut series: Vec<(f64, f64, f64)> = Vec::new();
    for (name, n) in cases {
        if n > gpus_max {
            continue;
        }
        // Short cases are timed several times and the median kept: a 1,024-GPU step takes a
        // fifth of a second, where one disturbed run moves the growth ratio most (0.14-0.22 s
        // from one median of three to the next on this machine).
        let same_case = name == "gpt";
        let repeats = match n {
            _ if !same_case => 1,
            0..=4096 => 7,
            4097..=16_384 => 3,
            _ => 1,
        };
        let r = match step_case_in_child(name, n, false, repeats) {
            Ok(r) => r,
            Err(e) => {
                println!("    {e}");
                return;
            }
        };
        let (wall, mem) = (r.wall_s, r.peak_bytes as f64);
        let growth = match (same_case, series.last()) {
            (true, Some(&(n0, w0, m0))) => {
                let k = (n as f64 / n0).ln();
                format!(
                    "N^{:.2}, N^{:.2}",
                    (wall / w0).ln() / k,
                    (mem / m0).ln() / k
                )
            }
            _ => String::new(),
        };
        if same_case {
            series.push((n as f64, wall, mem));
        }
        let label = STEP_CASES
            .iter()
            .find(|(short, _)| *short == name)
            .map_or(name, |(_, c)| c.name);
        println!(
            "    {:<21} {:>7} {:>9.2} {:>8} {:>9} {:>11.3} {:>6.0} MiB {:>17}",
            label,
            n,
            wall,
            r.ops,
            r.events,
            r.step_ms,
            mem / (1u64 << 20) as f64,
            growth
        );
    }
    let fit = |f: fn(&(f64, f64, f64)) -> f64| {
        growth_exponent(&series.iter().map(|p| (p.0, f(p))).collect::<Vec<_>>())
    };
    if let (Some(t), Some(m)) = (fit(|p| p.1), fit(|p| p.2)) {
        println!("    gpt-1.3b fitted growth: wall N^{t:.2}, peak memory N^{m:.2}");
    }
    let wall_at = |gpus: f64| series.iter().find(|p| p.0 == gpus).map(|p| p.1);
    if let (Some(w0), Some(w1)) = (wall_at(1024.0), wall_at(16384.0)) {
        println!("    gpt-1.3b 1,024 -> 16,384 GPUs: wall x{:.1}", w1 / w0);
        // NCCL's tuner runs the data-parallel all-reduce as a ring at DP 32 and as a tree at
        // DP 512: the same step with the ring at both sizes separates the simulator's scaling
        // from the algorithm's.
        match (
            step_case_in_child("gpt", 1024, true, 7),
            step_case_in_child("gpt", 16384, true, 3),
        ) {
            (Ok(r0), Ok(r1)) => println!(
                "    gpt-1.3b with the ring forced: {:.2} s and {:.2} s, wall x{:.1}",
                r0.wall_s,
                r1.wall_s,
                r1.wall_s / r0.wall_s
            ),
            (Err(e), _) | (_, Err(e)) => println!("    gpt-1.3b with the ring forced: {e}"),
        }
    }
    println!(
        "    (each case in a fresh process; wall: median of 7 runs up to 4,096 GPUs, of 3 at 16,384, one \
         run above; peak memory: the largest of its runs; growth exponents between consecutive sizes)"
    );
}

fn print_step_header() {
    println!(
        "\n(c) training steps: GPT-1.3B bf16, TP 8 x PP 4 (1F1B, 8 micro-batches) x DP, and \
         Llama-3.1 405B, TP 8 x PP 16 x DP 128 (zero1, recompute), NCCL, on"
    );
    println!(
        "    topologies/h100_rail_cluster.toml grown to N/8 nodes, profile h100_sxm_node.json \
         (--quick: up to 4,096 GPUs)"
    );
}

/// Runs the benchmark cases of `sim::bench` once each and prints what they did and how fast;
/// with `steps_only`, only the training steps up to 16,384 GPUs.
pub fn run(quick: bool, steps_only: bool) {
    if steps_only {
        print_step_header();
        step_bench(if quick { 4096 } else { 16384 });
        return;
    }
    use sim::bench::{
        fat_tree, fat_tree_k_for, peak_memory_bytes, place, ring_all_reduce, Hold, Placement,
        RingStep,
    };
    use std::time::Instant;
    let mib = |b: Option<u64>| {
        b.map(|b| format!("{:.0} MiB", b as f64 / (1u64 << 20) as f64))
            .unwrap_or("?".into())
    };
    let gpus_max: u32 = if quick { 4096 } else { 16384 };

    println!("(a) one max-min solve of a ring step on a three-tier fat-tree (k=32, 32 hosts per edge, 16,384 GPUs)");
    let topo = fat_tree(32, 16384, Some(32));
    let mut solver = sim::net::maxmin::MaxMinSolver::new();
    let mut rates = Vec::new();
    for placement in [Placement::RankOrdered, Placement::Random] {
        let step = RingStep::new(&topo, &place(&topo, 16384, placement));
        step.solve(&mut solver, &mut rates);
        let reps = 20;
        let t = Instant::now();
        let mut slowest = 0.0;
        for _ in 0..reps {
            slowest = step.solve(&mut solver, &mut rates);
        }
        let per = t.elapsed().as_secs_f64() / reps as f64;
        println!(
            "    {:<13} {:>8.3} ms per solve   {} flows, {} link crossings, slowest flow {}",
            format!("{placement:?}"),
            per * 1e3,
            step.caps.len(),
            step.links.len(),
            sim::units::fmt_bits_per_s(slowest)
        );
        // The flow model's solver: split into link-disjoint parts, parts seen before reused.
        let problem = step.problem();
        let mut split_rates = vec![0.0; step.caps.len()];
        let t = Instant::now();
        let mut parts = (0, 0);
        for _ in 0..reps {
            let mut split = sim::net::maxmin::SplitSolver::new();
            split.solve(&problem, &mut split_rates);
            parts = (split.parts_solved, split.parts_reused);
        }
        let first = t.elapsed().as_secs_f64() / reps as f64;
        let mut split = sim::net::maxmin::SplitSolver::new();
        split.solve(&problem, &mut split_rates);
        let t = Instant::now();
        for _ in 0..reps {
            split.solve(&problem, &mut split_rates);
        }
        let seen = t.elapsed().as_secs_f64() / reps as f64;
        assert_eq!(
            split_rates, rates,
            "the split solver gives the solver's rates"
        );
        println!(
            "    {:<13} {:>8.3} ms split ({} parts solved, {} copies), {:.3} ms with every part seen",
            "",
            first * 1e3,
            parts.0,
            parts.1,
            seen * 1e3
        );
    }

    println!("\n(b) ring all-reduce of 1 GiB on a non-blocking fat-tree (400 Gb/s, 1 us per hop)");
    println!(
        "    {:<24} {:>9} {:>10} {:>12} {:>12} {:>12} {:>7} {:>14} {:>9} {:>10}",
        "case",
        "wall s",
        "events",
        "flows",
        "flows/s",
        "events/s",
        "solves",
        "simulated",
        "vs ideal",
        "peak mem"
    );
    let cases = [
        (1024, Placement::RankOrdered),
        (4096, Placement::RankOrdered),
        (4096, Placement::Random),
        (16384, Placement::RankOrdered),
        (16384, Placement::Random),
    ];
    for (n, placement) in cases {
        if n > gpus_max {
            continue;
        }
        let topo = fat_tree(fat_tree_k_for(n), n, None);
        let ranks = place(&topo, n, placement);
        let t = Instant::now();
        let run = ring_all_reduce(&topo, &ranks, 1 << 30);
        let wall = t.elapsed().as_secs_f64();
        let o = &run.outcome;
        let err = o.end.as_secs_f64() / run.closed_form.as_secs_f64() - 1.0;
        println!(
            "    {:<24} {:>9.3} {:>10} {:>12} {:>12.3e} {:>12.3e} {:>7} {:>14} {:>+8.3}% {:>10}",
            format!("{n} GPUs {placement:?}"),
            wall,
            o.events,
            o.net.flows,
            o.net.flows as f64 / wall,
            o.events as f64 / wall,
            o.net.solves,
            o.end.to_string(),
            err * 100.0,
            mib(peak_memory_bytes())
        );
    }
    println!("    (peak memory is the process's so far: cases run in increasing size)");

    print_step_header();
    step_bench(if quick { 4096 } else { 131072 });

    println!("\n(d) event-queue hold with 10^6 pending events");
    let mut hold = Hold::new(1_000_000);
    hold.run(1_000_000);
    let n = 5_000_000;
    let t = Instant::now();
    let sum = hold.run(n);
    let per = t.elapsed().as_secs_f64() / n as f64;
    println!(
        "    {:.1} ns per hold (pop + schedule), checksum {sum}",
        per * 1e9
    );
}
