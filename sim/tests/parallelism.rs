//! The parallelisms of a training step end to end, each as it lays its step out: FSDP and
//! ZeRO's shards, recomputation, experts (MoE), pipelines and their interleaving, rank orders,
//! context and tensor parallelism.

use std::path::Path;

use sim::scenario::{self, workload::run_workload};

mod steps;
use steps::{gpt_on_h100_nodes, repo};

/// Llama-3 8B on `nodes` HGX H100 nodes (bundled H100 profile), `parallelism` and overrides.
fn llama_on_h100(set: &[&str]) -> Result<sim::metrics::workload::WorkloadReport, String> {
    let text = format!(
        "name = \"llama-h100\"\nprofile = {:?}\n[topology]\nfile = {:?}\n\
         [topology.generator]\nnodes = 2\n[workload]\nmodel = \"llama3_8b\"\ndtype = \"bf16\"\n\
         optimizer = \"adam\"\nbatch_per_gpu = 1\nparallelism = \"fsdp\"\n",
        repo().join("data/profiles/h100_sxm_node.json"),
        repo().join("topologies/h100_rail_cluster.toml"),
    );
    let set: Vec<String> = set.iter().map(|s| s.to_string()).collect();
    let s = sim::scenario::parse(&text, Path::new("llama-h100.toml"), &set)
        .map_err(|e| e.to_string())?;
    run_workload(&s, Default::default()).map_err(|e| e.to_string())
}

/// Bytes a step's collectives were asked to move, by traffic class, in nccl-tests sizes
/// summed over the step's collectives: read from the step's traffic per epoch.
fn class_bytes(r: &sim::metrics::workload::WorkloadReport, class: &str) -> f64 {
    r.summary
        .traffic_per_epoch_bytes
        .get(class)
        .copied()
        .unwrap_or(0.0)
}

fn mixtral_on_h100(set: &[&str]) -> Result<sim::metrics::workload::WorkloadReport, String> {
    let text = format!(
        "name = \"mixtral-h100\"\nprofile = {:?}\n[topology]\nfile = {:?}\n\
         [topology.generator]\nnodes = 2\n[workload]\nmodel = \"mixtral_8x7b\"\n\
         dtype = \"bf16\"\noptimizer = \"adam\"\nbatch_per_gpu = 1\nparallelism = \"ddp\"\n\
         expert_parallel = 8\nmemory_check = false\n",
        repo().join("data/profiles/h100_sxm_node.json"),
        repo().join("topologies/h100_rail_cluster.toml"),
    );
    let set: Vec<String> = set.iter().map(|s| s.to_string()).collect();
    let s = sim::scenario::parse(&text, Path::new("mixtral-h100.toml"), &set)
        .map_err(|e| e.to_string())?;
    run_workload(&s, Default::default()).map_err(|e| e.to_string())
}

/// GPT-1.3B on 4 V100s as 4 pipeline stages of 8 micro-batches (the parallelism study), with
/// `virtual_stages` model chunks per stage.
fn gpt_pipeline(
    virtual_stages: u32,
    extra: &[&str],
) -> Result<sim::metrics::workload::WorkloadReport, String> {
    let v = format!("workload.virtual_stages={virtual_stages}");
    let mut set = vec![
        "workload.tensor_parallel=1",
        "workload.pipeline_parallel=4",
        "workload.microbatches=8",
        v.as_str(),
    ];
    set.extend_from_slice(extra);
    let set: Vec<String> = set.iter().map(|s| s.to_string()).collect();
    let s = scenario::load(
        &repo().join("scenarios/gpt_1_3b_v100_parallelism.toml"),
        &set,
    )
    .map_err(|e| e.to_string())?;
    run_workload(&s, Default::default()).map_err(|e| e.to_string())
}

#[test]
fn fsdp_gathers_the_parameters_twice_and_scatters_the_gradients_once() {
    // On the ideal templates (ring all-gather and reduce-scatter, no protocol overhead),
    // ZeRO-3 moves each parameter byte three times where DDP's ring all-reduce moves it twice:
    // an all-gather before the forward, one before the backward, a reduce-scatter after it.
    let ideal = [
        "workload.allreduce.library=\"ideal\"",
        "workload.memory_check=false",
    ];
    let with = |m: &str| {
        let mut set = ideal.to_vec();
        let p = format!("workload.parallelism=\"{m}\"");
        set.push(&p);
        llama_on_h100(&set).unwrap()
    };
    let (ddp, fsdp, zero1) = (with("ddp"), with("fsdp"), with("zero1"));
    let total = |r: &sim::metrics::workload::WorkloadReport| {
        class_bytes(r, "all-gather") + class_bytes(r, "reduce-scatter")
    };
    let ratio = total(&fsdp) / total(&ddp);
    assert!((ratio - 1.5).abs() < 1e-6, "FSDP / DDP wire bytes {ratio}");
    // Two gathers per reduce-scatter.
    let g = class_bytes(&fsdp, "all-gather") / class_bytes(&fsdp, "reduce-scatter");
    assert!((g - 2.0).abs() < 1e-6, "{g}");
    // ZeRO-1 replaces the all-reduce by a reduce-scatter and an all-gather: the same bytes.
    assert!((total(&zero1) / total(&ddp) - 1.0).abs() < 1e-6);
    // Sharding shrinks memory stage by stage; only the working weights differ at stage 3.
    let mem = |m: &str| with(m).summary.memory;
    let (m0, m1, m2, m3) = (mem("ddp"), mem("zero1"), mem("zero2"), mem("fsdp"));
    assert!(
        m1.optimizer_bytes * 16 == m0.optimizer_bytes,
        "{m0:?} {m1:?}"
    );
    assert_eq!(m1.grads_bytes, m0.grads_bytes);
    assert_eq!(m2.grads_bytes, m0.grads_bytes.div_ceil(16));
    assert!(m3.params_bytes < m2.params_bytes);
    assert_eq!(m3.activation_bytes, m0.activation_bytes);
}

#[test]
fn a_model_that_does_not_fit_at_one_sample_is_refused_with_the_estimate() {
    // Llama-3 8B with plain DDP keeps 16 bytes of state per parameter on every GPU: 120 GiB
    // before activations, on 80 GB H100s.
    let e = llama_on_h100(&["workload.parallelism=\"ddp\""]).unwrap_err();
    assert!(e.contains("workload:") && e.contains("needs"), "{e}");
    assert!(e.contains("optimizer") && e.contains("GiB"), "{e}");
    assert!(e.contains("fsdp"), "the error says what would fit: {e}");
    // Sharded with FSDP over 16 GPUs it fits and runs.
    let r = llama_on_h100(&[]).unwrap();
    assert!(r.summary.memory.total_bytes() < r.summary.memory_capacity_bytes);
    assert!(r.summary.metrics.step_secs > 0.0);
}

#[test]
fn zero1_is_the_distributed_optimizer_under_tensor_and_pipeline_parallelism() {
    let ddp = llama_on_h100(&[
        "workload.parallelism=\"ddp\"",
        "workload.tensor_parallel=4",
        "workload.pipeline_parallel=2",
        "workload.microbatches=1",
        "workload.memory_check=false",
    ])
    .unwrap();
    let zero1 = llama_on_h100(&[
        "workload.parallelism=\"zero1\"",
        "workload.tensor_parallel=4",
        "workload.pipeline_parallel=2",
        "workload.microbatches=1",
        "workload.memory_check=false",
    ])
    .unwrap();
    // DP 2: optimizer state halves.
    assert_eq!(
        zero1.summary.memory.optimizer_bytes * 2,
        ddp.summary.memory.optimizer_bytes
    );
    // The gradient exchange is a reduce-scatter and an all-gather.
    assert!(class_bytes(&zero1, "reduce-scatter") > 0.0);
    let e = llama_on_h100(&["workload.tensor_parallel=2"]).unwrap_err();
    assert!(
        e.contains("workload.parallelism") && e.contains("zero1"),
        "{e}"
    );
}

#[test]
fn full_recomputation_keeps_layer_inputs_only_and_adds_a_forward_pass() {
    let plain = llama_on_h100(&["workload.memory_check=false"]).unwrap();
    let recompute = llama_on_h100(&["workload.activation_recompute=true"]).unwrap();
    let (a, b) = (&plain.summary, &recompute.summary);
    // A block's input (s·h) instead of its ~(17·s·h + 8·s·f)/2 saved elements.
    assert!(
        b.memory.activation_bytes * 10 < a.memory.activation_bytes,
        "{:?} vs {:?}",
        b.memory,
        a.memory
    );
    // Backward costs about twice the forward, so one more forward adds about a third.
    let ratio = b.metrics.compute_secs / a.metrics.compute_secs;
    assert!((1.25..1.40).contains(&ratio), "compute grows {ratio}x");
}

#[test]
fn moe_all_to_all_bytes_follow_the_capacity_factor() {
    // Mixtral 8x7B, 16 GPUs in expert-parallel groups of 8: per MoE block and pass, one
    // all-to-all out to the experts and one back, each of cf x top-2 x 4,096 tokens x 4,096
    // hidden x 2 bytes per rank, of which 7/8 leave the rank. On the ideal templates (NCCL
    // adds its protocol's and links' overhead to the bytes on the wire).
    let a2a = |cf: &str| {
        let p = format!("workload.capacity_factor={cf}");
        let r = mixtral_on_h100(&[&p, "workload.allreduce.library=\"ideal\""]).unwrap();
        class_bytes(&r, "point-to-point")
    };
    let (one, padded) = (a2a("1.0"), a2a("1.25"));
    assert!((padded / one - 1.25).abs() < 1e-9, "{padded} / {one}");
    let per_rank = 4096.0 * 4096.0 * 2.0 * 2.0;
    let expected = 32.0 * 4.0 * 16.0 * 7.0 / 8.0 * per_rank;
    assert!((one / expected - 1.0).abs() < 1e-9, "{one} vs {expected}");
}

#[test]
fn under_nccl_moe_all_to_alls_run_as_nccls_grouped_sends() {
    // NCCL's all-to-all is a group of send/receive pairs with the ring's kernels' costs: the
    // step says so, and it is slower than the template's bare transfers at the links' rate.
    let nccl = mixtral_on_h100(&[]).unwrap();
    assert!(nccl.to_string().contains("p2p/simple"), "{nccl}");
    let ideal = mixtral_on_h100(&["workload.allreduce.library=\"ideal\""]).unwrap();
    assert!(!ideal.to_string().contains("p2p/"), "{ideal}");
    let a2a = |r: &sim::metrics::workload::WorkloadReport| class_bytes(r, "point-to-point");
    // NVLink's efficiency puts more bytes on the wire for the same payload.
    assert!(
        a2a(&nccl) > a2a(&ideal),
        "{} vs {}",
        a2a(&nccl),
        a2a(&ideal)
    );
}

#[test]
fn expert_parallelism_shards_the_experts_and_nothing_else() {
    let r = mixtral_on_h100(&[]).unwrap();
    assert_eq!(r.summary.expert_parallel, 8);
    assert!(r.to_string().contains("(EP 8 within DP)"), "{r}");
    let ep8 = r.summary.memory;
    let ep1 = mixtral_on_h100(&["workload.expert_parallel=1"])
        .unwrap()
        .summary
        .memory;
    // 32 blocks of 8 experts of 3 x 4,096 x 14,336: 7/8 of them leave each GPU.
    let experts = 32u64 * 8 * 3 * 4096 * 14336;
    let master = 4 + 2; // fp32 master and bf16 working copy
    assert_eq!(
        ep1.params_bytes - ep8.params_bytes,
        experts * 7 / 8 * master
    );
    assert_eq!(ep8.activation_bytes, ep1.activation_bytes);
    // Bad input: a group size that does not divide the experts, experts on a dense model.
    let e = mixtral_on_h100(&["workload.expert_parallel=3"]).unwrap_err();
    assert!(
        e.contains("workload.expert_parallel") && e.contains("8 experts"),
        "{e}"
    );
    let e = llama_on_h100(&["workload.expert_parallel=2"]).unwrap_err();
    assert!(e.contains("no experts"), "{e}");
}

#[test]
fn interleaved_1f1b_shrinks_the_bubble_for_more_boundaries_and_first_stage_activations() {
    let (plain, interleaved) = (gpt_pipeline(1, &[]).unwrap(), gpt_pipeline(2, &[]).unwrap());
    let (a, b) = (&plain.summary, &interleaved.summary);
    let idle = |s: &sim::metrics::workload::WorkloadSummary| {
        s.metrics.bubble_fraction_per_stage.iter().sum::<f64>() / 4.0
    };
    assert!(idle(b) < idle(a), "idle {} vs {}", idle(b), idle(a));
    assert!(b.metrics.step_secs < a.metrics.step_secs);
    // The bubble as Narayanan et al. (2021) count it, (pp - 1) / (v m + pp - 1) of the step
    // for equal chunks and free transfers: 27.3% at v = 1, 15.8% at v = 2, 11.1% at v = 3
    // (free: the tied embedding's gradient sum at the end would add to the first and last
    // stages' idle time, which the formula does not count).
    for v in 1..=3u32 {
        let r = gpt_pipeline(v, &["workload.ablation=\"free_communication\""])
            .unwrap()
            .summary;
        let oracle = 3.0 / (8.0 * v as f64 + 3.0);
        assert!(
            (idle(&r) - oracle).abs() < 0.02,
            "v {v}: idle {} vs {oracle}",
            idle(&r)
        );
    }
    // Each micro-batch crosses pp v - 1 = 7 stage boundaries instead of pp - 1 = 3, each way,
    // with the same activation (tokens x hidden) at every boundary.
    let p2p = |r| class_bytes(r, "point-to-point");
    let ratio = p2p(&interleaved) / p2p(&plain);
    assert!(
        (ratio - 7.0 / 3.0).abs() < 1e-9,
        "point-to-point bytes grow {ratio}x"
    );
    assert_eq!(b.stages.len(), 8);
    assert_eq!(b.virtual_stages, 2);
    // The first stage holds more micro-batches in flight: Megatron's 1 + (pp - 1) / (pp v)
    // = 1.375 for equal chunks (the chunks here are only nearly equal).
    let grow = b.memory.activation_bytes as f64 / a.memory.activation_bytes as f64;
    assert!((1.2..1.55).contains(&grow), "activations grow {grow}x");
    assert!(interleaved
        .to_string()
        .contains("interleaved 1F1B over 2 chunks per stage"));
}

#[test]
fn interleaving_that_megatron_cannot_run_is_a_clear_error() {
    for (extra, says) in [
        (vec!["workload.pipeline_schedule=\"gpipe\""], "1f1b"),
        (
            vec!["workload.microbatches=6", "workload.batch_per_gpu=6"],
            "a multiple of pipeline_parallel",
        ),
        (
            vec!["workload.pipeline_parallel=1", "workload.microbatches=1"],
            "at least 2",
        ),
    ] {
        let e = gpt_pipeline(2, &extra).unwrap_err();
        assert!(
            e.contains("workload.virtual_stages") && e.contains(says),
            "{e}"
        );
    }
    let e = gpt_pipeline(0, &[]).unwrap_err();
    assert!(
        e.contains("workload.virtual_stages") && e.contains("at least 1"),
        "{e}"
    );
}

#[test]
fn rank_order_decides_which_groups_share_a_node() {
    // 16 GPUs on 2 HGX nodes, TP 8 x PP 2. Megatron's default order ("tp-dp-pp") keeps each
    // TP group on one node and sends activations between nodes; stages innermost
    // ("pp-tp-dp") puts consecutive stages on one node and spreads every TP group over both.
    let run = |order: &str| {
        let o = format!("workload.rank_order=\"{order}\"");
        gpt_on_h100_nodes(&[
            "workload.pipeline_parallel=2",
            "workload.microbatches=2",
            &o,
        ])
        .unwrap()
    };
    let (tp_inside, tp_across) = (run("tp-dp-pp"), run("pp-tp-dp"));
    let between_nodes = |r: &sim::metrics::workload::WorkloadReport, classes: &[&str]| -> u128 {
        let node = |e: u32| {
            r.endpoints[e as usize]
                .split('.')
                .next()
                .unwrap()
                .to_string()
        };
        r.traffic_per_step
            .iter()
            .filter(|((a, b, c), _)| classes.contains(c) && node(*a) != node(*b))
            .map(|(_, v)| *v)
            .sum()
    };
    let tp = ["reduce-scatter", "all-gather"];
    // With TP inside the nodes, the one all-reduce that crosses them is the tied embedding's
    // (first stage on one node, last on the other): 8 pairs, each rank sending its 1/8 of
    // 51,200 x 2,048 bf16 gradients once (the vocabulary padded to a multiple of 128 x 8; the
    // two-rank ring's reduce-scatter and all-gather).
    let embedding_group = 8 * 2 * (51200 * 2048 / 8) * 2;
    assert_eq!(between_nodes(&tp_inside, &tp), embedding_group);
    assert!(between_nodes(&tp_across, &tp) > 0);
    assert!(between_nodes(&tp_inside, &["point-to-point"]) > 0);
    assert_eq!(between_nodes(&tp_across, &["point-to-point"]), 0);
    assert!(tp_across.summary.metrics.step_secs > tp_inside.summary.metrics.step_secs);
    // Stage 0 starts at once; stage 1 waits for its first activation. Its ranks are the even
    // ones when stages are innermost.
    let starting = |r: &sim::metrics::workload::WorkloadReport| -> Vec<u32> {
        let mut t: Vec<u32> = r
            .trace
            .events
            .iter()
            .filter(|e| e.role == "compute" && e.start_ps == 0)
            .map(|e| e.track)
            .collect();
        t.dedup();
        t.sort_unstable();
        t.dedup();
        t
    };
    assert_eq!(starting(&tp_inside), (0..8).collect::<Vec<u32>>());
    assert_eq!(
        starting(&tp_across),
        (0..8).map(|i| 2 * i).collect::<Vec<u32>>()
    );
    assert!(tp_across.to_string().contains("ranks ordered pp-tp-cp-dp"));
}

#[test]
fn a_rank_order_that_does_not_name_each_axis_once_is_a_clear_error() {
    let e = gpt_on_h100_nodes(&["workload.rank_order=\"tp-pp\""]).unwrap_err();
    assert!(
        e.contains("workload.rank_order") && e.contains("tp, dp and pp (and cp) each once"),
        "{e}"
    );
}

#[test]
fn context_parallelism_passes_keys_and_values_round_its_ring_and_halves_the_work() {
    // GPT 1.3B (24 attention blocks, 2,048 tokens, 2,048 keys and values wide, fp16), 2
    // micro-batch samples, on 2 HGX nodes: TP 8 x DP 2 against TP 8 x CP 2.
    let (dp, cp) = (
        gpt_on_h100_nodes(&["workload.memory_check=false"]).unwrap(),
        gpt_on_h100_nodes(&["workload.context_parallel=2", "workload.memory_check=false"]).unwrap(),
    );
    // Per attention block: one shift of each rank's keys and values forward, one of keys,
    // values and their gradients backward; each rank's share is 2 x 2,048 x 2,048 / CP
    // elements x 2 samples x 2 bytes / TP 8, sent by all 16 ranks.
    let per_rank_shift = 2.0 * 2048.0 * 2048.0 / 2.0 * 2.0 * 2.0 / 8.0;
    let ring = 24.0 * (1.0 + 2.0) * per_rank_shift * 16.0;
    assert_eq!(class_bytes(&dp, "point-to-point"), 0.0);
    assert_eq!(class_bytes(&cp, "point-to-point"), ring);
    // Each rank computes half the tokens and keeps half the activations.
    let (a, b) = (&dp.summary, &cp.summary);
    let work = b.metrics.compute_secs / a.metrics.compute_secs;
    assert!((0.45..0.56).contains(&work), "compute per rank x{work}");
    let act = b.memory.activation_bytes as f64 / a.memory.activation_bytes as f64;
    assert!((act - 0.5).abs() < 0.01, "activations x{act}");
    // CP ranks hold the same parameters: gradients are averaged over DP x CP, as over DP.
    assert_eq!(b.memory.params_bytes, a.memory.params_bytes);
    assert_eq!(b.global_batch * 2, a.global_batch);
    assert!(cp.to_string().contains("TP 8 x PP 1 x CP 2"));
}

#[test]
fn context_parallelism_by_all_gather_or_all_to_all_moves_what_each_exchange_sends() {
    // The same GPT 1.3B TP 8 x CP 2 step (2,048 x 2,048 queries, keys and values each, 2
    // samples, 2 bytes, heads over TP 8): 24 attention blocks, each CP pair's ranks on two
    // nodes.
    let run = |comm: &str| {
        let c = format!("workload.context_parallel_comm=\"{comm}\"");
        gpt_on_h100_nodes(&[
            "workload.context_parallel=2",
            "workload.memory_check=false",
            &c,
        ])
        .unwrap()
    };
    let (ring, gathered, ulysses) = (run("p2p"), run("all_gather"), run("a2a"));
    let q = 2048.0 * 2048.0;
    let kv = 2.0 * q;
    let share = |elems: f64| elems / 2.0 * 2.0 * 2.0 / 8.0;
    // Ulysses: per block and rank, queries + keys + values out and the output back, forward
    // and backward: half of each buffer leaves the rank (the other half is its own heads).
    let a2a = 24.0 * 16.0 * 2.0 * (share(q + kv) + share(q)) / 2.0;
    assert_eq!(class_bytes(&ulysses, "point-to-point"), a2a);
    // All-gather: keys and values gathered forward and backward, their gradients scattered
    // backward; each rank sends its half of the whole once per exchange, where the ring sent
    // the same bytes as point-to-point shifts (and not its gradients: 3 exchanges, not 3 x 1).
    assert_eq!(class_bytes(&gathered, "point-to-point"), 0.0);
    let exchanged = |r: &sim::metrics::workload::WorkloadReport| {
        class_bytes(r, "all-gather") + class_bytes(r, "reduce-scatter")
    };
    let moved = exchanged(&gathered) - exchanged(&ring);
    let expected = 24.0 * 16.0 * 3.0 * share(kv);
    assert!(
        (moved / expected - 1.0).abs() < 1e-9,
        "{moved} vs {expected}"
    );
    // Each way computes the same half of the attention.
    for r in [&gathered, &ulysses] {
        let work = r.summary.metrics.compute_secs / ring.summary.metrics.compute_secs;
        assert!((work - 1.0).abs() < 1e-9, "compute x{work}");
    }
    // Bad input: a way Megatron does not have; heads that TP x CP does not divide (GPT 1.3B's
    // 16 heads over TP 8 x CP 8).
    let e = gpt_on_h100_nodes(&[
        "workload.context_parallel=2",
        "workload.context_parallel_comm=\"ulysses\"",
    ])
    .unwrap_err();
    assert!(e.contains("context_parallel_comm"), "{e}");
    let e = gpt_on_h100_nodes(&[
        "topology.generator.nodes=8",
        "workload.context_parallel=8",
        "workload.context_parallel_comm=\"a2a\"",
    ])
    .unwrap_err();
    assert!(
        e.contains("workload.context_parallel_comm") && e.contains("16 key/value heads"),
        "{e}"
    );
}

#[test]
fn context_parallelism_a_model_cannot_split_is_a_clear_error() {
    // No attention blocks.
    let e = gpt_on_h100_nodes(&["workload.model=\"resnet50\"", "workload.context_parallel=2"])
        .unwrap_err();
    assert!(
        e.contains("workload.context_parallel") && e.contains("attention"),
        "{e}"
    );
    // 3 does not divide the 16 ranks.
    let e = gpt_on_h100_nodes(&["workload.context_parallel=3"]).unwrap_err();
    assert!(
        e.contains("context_parallel") && e.contains("dividing the 16 ranks"),
        "{e}"
    );
    // Megatron cuts a sequence into 2 x CP chunks: 1,000 tokens do not make 32.
    let text = format!(
        "name = \"cp\"\nprofile = {:?}\n[topology]\nfile = {:?}\n[topology.generator]\n\
         nodes = 2\n[workload]\nbatch_per_gpu = 1\ncontext_parallel = 16\n\
         [workload.transformer]\nlayers = 2\nhidden = 256\nheads = 4\nsequence = 1000\n\
         vocabulary = 1000\n",
        repo().join("data/profiles/h100_sxm_node.json"),
        repo().join("topologies/h100_rail_cluster.toml"),
    );
    let s = sim::scenario::parse(&text, Path::new("cp.toml"), &[]).unwrap();
    let e = run_workload(&s, Default::default())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("workload.context_parallel") && e.contains("1000-token"),
        "{e}"
    );
}

#[test]
fn expert_parallelism_under_tensor_parallelism_dispatches_each_ranks_share_of_the_tokens() {
    // Mixtral 8x7B on 16 GPUs as TP 2 x DP 8 with the experts over the 8 replicas: the MoE
    // blocks' tokens are sequence-parallel over the TP pair, so each rank dispatches half of
    // what it would under DDP (the same 32 blocks x 4 all-to-alls x 16 ranks x 7/8 leaving).
    let r = mixtral_on_h100(&["workload.tensor_parallel=2"]).unwrap();
    let per_rank = 4096.0 * 4096.0 * 2.0 * 2.0 / 2.0;
    let expected = 32.0 * 4.0 * 16.0 * 7.0 / 8.0 * per_rank;
    let a2a = class_bytes(&r, "point-to-point");
    assert!((a2a / expected - 1.0).abs() < 1e-9, "{a2a} vs {expected}");
    assert!(
        r.to_string().contains("TP 2 x PP 1 (EP 8 within DP)"),
        "{r}"
    );
    // The experts' weights shard by EP as under DDP; the dense ones by TP.
    let ep1 =
        mixtral_on_h100(&["workload.tensor_parallel=2", "workload.expert_parallel=1"]).unwrap();
    let experts = 32u64 * 8 * 3 * 4096 * 14336;
    assert_eq!(
        ep1.summary.memory.params_bytes - r.summary.memory.params_bytes,
        experts * 7 / 8 * (4 + 2)
    );
    // FSDP with experts, and ZeRO-2 under Megatron's mesh, are not modelled: said so.
    for set in [
        &["workload.parallelism=\"fsdp\""][..],
        &[
            "workload.parallelism=\"zero2\"",
            "workload.tensor_parallel=2",
        ][..],
    ] {
        let e = mixtral_on_h100(set).unwrap_err();
        assert!(
            e.contains("workload.expert_parallel") && e.contains("not with FSDP"),
            "{e}"
        );
    }
}

#[test]
fn the_distributed_optimizer_shards_experts_over_the_replicas_that_hold_them() {
    // Mixtral 8x7B on 16 GPUs, experts over groups of 8 (EP 8): every expert is held by 2
    // replicas, every dense weight by 16. Megatron-core's distributed optimizer shards each
    // over its own group: dense optimizer state 1/16, expert state 1/2.
    let ddp = mixtral_on_h100(&[]).unwrap();
    let zero1 = mixtral_on_h100(&["workload.parallelism=\"zero1\""]).unwrap();
    let experts_here = 32u64 * 8 * 3 * 4096 * 14336 / 8;
    let dense = 46_702_792_704u64 - 32 * 8 * 3 * 4096 * 14336;
    let adam = 8;
    assert_eq!(
        ddp.summary.memory.optimizer_bytes,
        (dense + experts_here) * adam
    );
    assert_eq!(
        zero1.summary.memory.optimizer_bytes,
        (dense * adam).div_ceil(16) + (experts_here * adam).div_ceil(2)
    );
    // Gradients stay whole under ZeRO-1 (sharded from ZeRO-2 on).
    assert_eq!(
        zero1.summary.memory.grads_bytes,
        ddp.summary.memory.grads_bytes
    );
    // No all-reduce is left: dense and expert gradients are reduce-scattered and the
    // parameters all-gathered, the experts' among their 2 replicas.
    assert_eq!(class_bytes(&zero1, "all-reduce"), 0.0);
    assert!(class_bytes(&zero1, "reduce-scatter") > 0.0);
    assert!(class_bytes(&zero1, "all-gather") > 0.0);
    // The same expert all-to-alls as under DDP.
    assert_eq!(
        class_bytes(&zero1, "point-to-point"),
        class_bytes(&ddp, "point-to-point")
    );
    // ZeRO-2 (DeepSpeed-MoE) also shards the gradients, each over the same group.
    let zero2 = mixtral_on_h100(&["workload.parallelism=\"zero2\""]).unwrap();
    let bf16 = 2;
    assert_eq!(
        zero2.summary.memory.grads_bytes,
        (dense * bf16).div_ceil(16) + (experts_here * bf16).div_ceil(2)
    );
    // Sharding changes who updates what, not what is exchanged: the same buckets move as
    // reduce-scatters and all-gathers instead of all-reduces.
    assert_eq!(
        class_bytes(&zero2, "reduce-scatter"),
        class_bytes(&zero1, "reduce-scatter")
    );
    // Under tensor parallelism, Megatron's distributed optimizer: dense state over the DP
    // group of 8; the experts are whole on both ranks of a TP pair (one replica per DP group
    // of 8), which route different tokens through them: their gradients are reduced, and
    // their state sharded, over the pair.
    let tp2 = |method: &str| {
        let m = format!("workload.parallelism=\"{method}\"");
        mixtral_on_h100(&["workload.tensor_parallel=2", &m]).unwrap()
    };
    let (ddp2, zero1_2) = (tp2("ddp"), tp2("zero1"));
    let dense_tp = ddp2.summary.memory.optimizer_bytes / adam - experts_here;
    assert_eq!(
        zero1_2.summary.memory.optimizer_bytes,
        (dense_tp * adam).div_ceil(8) + (experts_here * adam).div_ceil(2)
    );
    assert!(class_bytes(&zero1_2, "reduce-scatter") > 0.0);
}

/// Megatron's tensor parallelism splits the vocabulary too: the embedding's rows are looked up
/// per slice and all-reduced forward, the head's logits stay split and its input gradient is
/// all-reduced backward. GPT 1.3B at TP 8 on one HGX node: 24 layers' attention and MLP blocks
/// all-reduce once per pass (96), plus those two.
#[test]
fn tensor_parallelism_splits_the_vocabulary_with_one_all_reduce_each_way() {
    let text = format!(
        "name = \"tp8\"\nprofile = {:?}\n[topology]\nfile = {:?}\n[workload]\n\
         model = \"gpt_1_3b\"\ndtype = \"bf16\"\noptimizer = \"adam\"\nbatch_per_gpu = 1\n\
         tensor_parallel = 8\n",
        repo().join("data/profiles/h100_sxm_node.json"),
        repo().join("topologies/hgx_h100.toml"),
    );
    let s = sim::scenario::parse(&text, Path::new("tp8.toml"), &[]).unwrap();
    let said = run_workload(&s, Default::default()).unwrap().to_string();
    assert!(said.contains("(x98)"), "{said}");
    // The vocabulary is padded as Megatron pads it, to a multiple of 128 x 8: 50,257 tokens
    // become 51,200, 943 x 2,048 parameters more than the catalog's 1,315,723,264.
    assert!(said.contains("(1317654528 parameters"), "{said}");
    // Every GPU holds an eighth of every layer's parameters, the tied embedding's too: 1/8 of
    // 1,317.7M at 6 bytes (bf16 weights and their fp32 master copy), 942 MiB.
    assert!(said.contains("params 942 MiB"), "{said}");
}

/// GPT ties its head to the word embeddings. Split into pipeline stages, the last stage keeps
/// a copy for the head and the two copies' gradients are summed after the backward pass
/// (Megatron's embedding group): one all-reduce between each first-stage rank and its
/// last-stage counterpart, 8 pairs at TP 8, of the 1/8 of 50,257 x 2,048 embeddings each holds.
#[test]
fn a_tied_embedding_split_across_stages_sums_its_two_copies_gradients() {
    let text = format!(
        "name = \"pp4\"\nprofile = {:?}\n[topology]\nfile = {:?}\n[topology.generator]\n\
         nodes = 4\n[workload]\nmodel = \"gpt_1_3b\"\ndtype = \"bf16\"\noptimizer = \"adam\"\n\
         batch_per_gpu = 8\ntensor_parallel = 8\npipeline_parallel = 4\nmicrobatches = 8\n",
        repo().join("data/profiles/h100_sxm_node.json"),
        repo().join("topologies/h100_rail_cluster.toml"),
    );
    // 4 nodes as PP 4, 1 node as PP 1: data parallelism 1 either way, no gradient all-reduce.
    let run = |pp: u32| {
        let set = vec![
            format!("workload.pipeline_parallel={pp}"),
            format!("topology.generator.nodes={pp}"),
        ];
        let s = sim::scenario::parse(&text, Path::new("pp4.toml"), &set).unwrap();
        run_workload(&s, Default::default()).unwrap().to_string()
    };
    // Besides the blocks' tensor-parallel all-reduces and the stage sends: 8 collectives.
    let said = run(4);
    assert!(said.contains("(x784)") && said.contains("(x8)"), "{said}");
    // On one stage there is one copy and nothing to sum.
    let one = run(1);
    assert!(!one.contains("(x8)"), "{one}");
}

#[test]
fn under_nccl_pipeline_stages_send_as_nccl_send_recv_pairs_over_the_links_they_cross() {
    // GPT 1.3B on two 8-GPU H100 nodes, TP 4 x PP 4: stage boundaries 0-1 and 2-3 stay inside
    // a node (NVLink), 1-2 crosses the network. Each boundary's activations (forward) and
    // gradients (backward) are ncclSend/ncclRecv pairs, planned per link class.
    let text = format!(
        "name = \"pp-h100\"\nprofile = {:?}\n[topology]\nfile = {:?}\n\
         [topology.generator]\nnodes = 2\n[workload]\nmodel = \"gpt_1_3b\"\ndtype = \"bf16\"\n\
         optimizer = \"adam\"\nbatch_per_gpu = 8\ntensor_parallel = 4\npipeline_parallel = 4\n\
         microbatches = 8\nmemory_check = false\n",
        repo().join("data/profiles/h100_sxm_node.json"),
        repo().join("topologies/h100_rail_cluster.toml"),
    );
    let run = |set: &[&str]| {
        let set: Vec<String> = set.iter().map(|s| s.to_string()).collect();
        let s = sim::scenario::parse(&text, Path::new("pp-h100.toml"), &set).unwrap();
        run_workload(&s, Default::default()).unwrap()
    };
    let nccl = run(&[]);
    let said = nccl.to_string();
    // 8 micro-batches x 2 passes x 2 boundaries inside nodes x 4 TP ranks; 1 boundary across.
    assert!(
        said.contains("steps over nvlink: base 8.40 us (x128)"),
        "{said}"
    );
    assert!(said.contains("steps over ib: base 8.40 us (x64)"), "{said}");
    let ideal = run(&["workload.allreduce.library=\"ideal\""]);
    assert!(!ideal.to_string().contains("p2p/"), "{ideal}");
    // The same payload; NCCL's link efficiency puts more bytes on the wire.
    let p2p = |r: &sim::metrics::workload::WorkloadReport| class_bytes(r, "point-to-point");
    assert!(
        p2p(&nccl) > p2p(&ideal),
        "{} vs {}",
        p2p(&nccl),
        p2p(&ideal)
    );
}
