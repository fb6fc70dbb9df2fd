//! The datasets other than nccl-tests tables, each row replayed as a scenario: testbed runs
//! (collectives and training steps), DDP step times on DGX-1s, single-device step times, and
//! TensorFlow's 2017 CNN scaling table.

use std::fmt::Write as _;
use std::path::Path;

use super::{
    num, resolve, simulate, simulate_collective, simulate_step, toml_str, Replay, Replayed, Row,
    RowCall,
};
use crate::workload::catalog::TransformerConfig;

/// How many calls one launch of a testbed row timed after its warm-up: its command's
/// `--repeats`, else its pooled `repeats` over its launches (`launch_medians_secs`); none where
/// neither says (the scenario's default, one).
fn timed_calls(row: &Row) -> Option<u32> {
    let command = row.get("command").map(String::as_str).unwrap_or("");
    let from_command = command
        .split_whitespace()
        .collect::<Vec<_>>()
        .windows(2)
        .find(|w| w[0] == "--repeats")
        .and_then(|w| w[1].parse::<u32>().ok());
    let launches = row
        .get("launch_medians_secs")
        .map(|l| l.split(';').filter(|x| !x.trim().is_empty()).count() as u32)
        .unwrap_or(0);
    let pooled = row
        .get("repeats")
        .and_then(|r| r.trim().parse::<u32>().ok());
    from_command
        .or_else(|| pooled.filter(|_| launches > 0).map(|p| p / launches))
        .filter(|&n| n >= 1)
        .map(|n| n.min(crate::scenario::TIMED_CALLS_MAX))
}

/// A testbed row (a collective or a training step) replayed as the scenario its columns
/// describe, then `extra` overrides; an OpenMPI collective's run also gives its exchange
/// modes' bounds. A collective is timed as the harness times it, after the same call and a
/// barrier (`collective.timing`), the median of as many calls as each launch timed
/// ([`timed_calls`]).
pub(super) fn testbed_row(row: &Row, root: &Path, extra: &[String]) -> Replayed {
    let sim_set = row.get("sim_set").map(String::as_str).unwrap_or("");
    let method = row.get("method").cloned().unwrap_or_default();
    if sim_set.trim().is_empty() {
        return Err(format!("method {method}: no dtsim algorithm does the same"));
    }
    let topo = resolve(&row["topology"], root);
    let mut set: Vec<String> = row
        .get("topology_set")
        .map(String::as_str)
        .unwrap_or("")
        .split(';')
        .filter(|s| !s.trim().is_empty())
        .map(|s| format!("topology.{}", s.trim()))
        .collect();
    let kind = row.get("kind").map(String::as_str).unwrap_or("collective");
    let workload = kind == "training";
    if !workload {
        // The harness times each call after the previous one and a barrier (`tb.timed`), and
        // a launch reports the median of its timed calls.
        set.push("collective.timing=after_barrier".into());
        if let Some(n) = timed_calls(row) {
            set.push(format!("collective.timed_calls={n}"));
        }
    }
    set.extend(
        sim_set
            .split(';')
            .filter(|s| !s.trim().is_empty())
            .map(|s| s.trim().to_string()),
    );
    set.extend(extra.iter().cloned());
    let ranks = num(row, "ranks")? as u32;
    let bytes = num(row, "bytes")? as u64;
    let profile = row.get("profile").filter(|p| !p.is_empty());
    let mut text = String::from("name = \"validate\"\n");
    if let Some(p) = profile {
        let _ = writeln!(text, "profile = {}", toml_str(&resolve(p, root)));
    }
    let _ = writeln!(text, "[topology]\nfile = {}", toml_str(&topo));
    let _ = writeln!(text, "[placement]\nranks = {ranks}");
    let label = if workload {
        let model = resolve(&row["model"], root);
        let batch = num(row, "batch_per_gpu")? as u64;
        let bucket = num(row, "bucket_bytes")? as u64;
        let _ = writeln!(
            text,
            "[workload]\nmodel_file = {}\nbatch_per_gpu = {batch}\nbucket = \"{bucket}B\"\noptimizer = \"sgd\"",
            toml_str(&model)
        );
        format!("{method} {ranks} ranks batch {batch}")
    } else {
        let op = row.get("op").map(String::as_str).unwrap_or("all_reduce");
        let _ = writeln!(text, "[collective]\nop = \"{op}\"\nbytes = \"{bytes}B\"");
        format!("{op} {bytes} B {ranks} ranks")
    };
    let topo_name = Path::new(&row["topology"])
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let (sim, exchange_modes_secs, plays_secs, step) = if workload {
        let (secs, step) = simulate_step(&text, &set)?;
        (secs, None, None, step)
    } else {
        let (secs, modes, plays) = simulate_collective(&text, &set)?;
        (secs, modes, plays, None)
    };
    // Rows on the same topology file with other overrides (8 hosts instead of 4) are another
    // system: their own group.
    let overrides = row
        .get("topology_set")
        .map(String::as_str)
        .unwrap_or("")
        .trim();
    let topo_name = if overrides.is_empty() {
        topo_name
    } else {
        format!("{topo_name} ({overrides})")
    };
    let call = if workload {
        step
    } else {
        Some(RowCall {
            sim_set: sim_set.trim().to_string(),
            op: row
                .get("op")
                .map(|o| o.trim().to_string())
                .unwrap_or_else(|| "all_reduce".into()),
            ranks,
            bytes: Some(bytes),
            batch: None,
            gpu: None,
        })
    };
    Ok(Replay {
        exchange_modes_secs,
        plays_secs,
        call,
        ..Replay::new(
            format!("{method} @ {topo_name}"),
            label,
            num(row, "measured_secs")?,
            sim,
        )
    })
}

/// The system of a DDP row (its columns under the names [`super::system`] reads), what it is
/// replayed on, and its GPU's compute profile.
fn ddp_system(
    row: &Row,
) -> Result<
    (
        super::system::SystemSpec,
        super::system::Replay,
        &'static str,
    ),
    String,
> {
    let mut described = row.clone();
    for (from, to) in [
        ("num_machines", "num_nodes"),
        ("gpus_per_machine", "gpus_per_node"),
        ("intra_node", "intra_node_interconnect"),
        ("inter_node", "inter_node_interconnect"),
    ] {
        if let Some(v) = row.get(from) {
            described.entry(to.to_string()).or_insert_with(|| v.clone());
        }
    }
    let spec = super::system::read(&described)?;
    let replay = spec.replay()?;
    let profile = super::system::compute_profile(&spec.gpu)?;
    Ok((spec, replay, profile))
}

/// Whether a DDP row is replayed: its median (p50), the other percentiles are not.
fn ddp_replayed(row: &Row) -> bool {
    row.get("percentile").map(String::as_str) == Some("p50")
}

/// What a DDP row is replayed on, for the report: (group, description).
pub(super) fn ddp_replayed_on(row: &Row) -> Option<(String, String)> {
    if !ddp_replayed(row) {
        return None;
    }
    let (_, replay, profile) = ddp_system(row).ok()?;
    // The step's compute comes from the GPU's compute profile, not the NCCL one.
    let how = replay.describe_with(&format!("compute profile {profile}.json"));
    Some((row.get("model").cloned().unwrap_or_default(), how))
}

/// PyTorch DDP benchmark row (p50), replayed as PyTorch runs it (NCCL's choice for each gradient
/// bucket) on the system its own columns describe ([`super::system`]: the GPU named in `system`,
/// `num_gpus`, `num_machines`, `gpus_per_machine`, `intra_node`, `inter_node`), with the bundled
/// compute profile of its GPU. The shared table's DGX-1 rows run on `dgx1_v100.toml`, two or more
/// machines on `dgx1_v100_x2.toml` with their count. Until 2026-11-27 every row ran on DGX-1 with
/// hand-laid NVLink rings; NCCL's ring search finds the same (scores within 0.1 point).
pub(super) fn ddp_row(row: &Row, root: &Path) -> Replayed {
    let model = row.get("model").cloned().unwrap_or_default();
    if !ddp_replayed(row) {
        return Err("only p50 rows are replayed".into());
    }
    if crate::workload::catalog::by_name(&model).is_err() {
        return Err(format!("model {model}: not in the catalog"));
    }
    let (spec, replay, profile) = ddp_system(row)?;
    let gpus = spec.gpus;
    let batch = num(row, "batch_per_gpu")? as u64;
    let bucket_mb = row
        .get("bucket_cap_mb")
        .and_then(|v| v.parse::<f64>().ok())
        .unwrap_or(25.0);
    let text =
        format!(
        "name = \"validate\"\nprofile = {}\n[topology]\nfile = {}\n[placement]\nranks = {gpus}\n\
         [workload]\nmodel = \"{model}\"\nbatch_per_gpu = {batch}\nparallelism = \"ddp\"\n\
         bucket = \"{}B\"\n",
        toml_str(&root.join("data/profiles").join(format!("{profile}.json"))),
        toml_str(&root.join("topologies").join(format!("{}.toml", replay.topology))),
        (bucket_mb * 1024.0 * 1024.0) as u64
    );
    let sim = simulate(&text, &replay.set, true)?;
    let label = format!(
        "{model} {gpus} GPUs {}",
        row.get("config_label").cloned().unwrap_or_default()
    );
    Ok(Replay::new(model, label, num(row, "sec_per_iter")?, sim))
}

/// A single-device training row of `calibrate/scripts/torch_bench.py` (`step_times.csv`): one
/// step of the model on one GPU (or CPU) of the profile(s) the row names (`profile`, separated
/// by `;`, relative to the repository root), one prediction per profile.
pub(super) fn single_device_rows(row: &Row, root: &Path) -> Vec<Replayed> {
    let get = |c: &str| row.get(c).map(String::as_str).unwrap_or("").trim();
    let model = get("model").to_string();
    if crate::workload::catalog::by_name(&model).is_err() {
        return vec![Err(format!("model {model}: not in the catalog"))];
    }
    let profiles: Vec<&str> = get("profile")
        .split(';')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .collect();
    if profiles.is_empty() {
        return vec![Err(
            "profile: the dtsim profile(s) to predict with (torch_bench.py --profile)".into(),
        )];
    }
    let dtype = match get("dtype") {
        "" => "fp32",
        d => d,
    };
    let machine = match get("machine") {
        "" => get("device_name"),
        m => m,
    };
    // How the step ran, where the row says (torch_bench.py --attention, --compile): each way
    // is its own group. Torch's fused attention (`sdpa`) is the model's FlashAttention: no
    // scores stored, none softmaxed through memory. A compiled step is dtsim's fused step; an
    // eager one (torch_bench's default) plays the host beside the GPU where the profile
    // measured the host's costs in the row's dtype (`compute.eager_host`), and is the fused
    // step where it did not (a profile of layers timed alone has the host in its times).
    let fused_attention = get("attention") == "sdpa";
    let compiled = get("compiled") == "1";
    let how = [
        if fused_attention { " sdpa" } else { "" },
        if compiled { " compiled" } else { "" },
    ]
    .concat();
    profiles
        .into_iter()
        .map(|profile| {
            let batch = num(row, "batch")? as u64;
            let model_keys = match TransformerConfig::by_name(&model) {
                Some(c) if fused_attention => {
                    let c = TransformerConfig {
                        flash_attention: true,
                        ..c
                    };
                    let table = toml::to_string(&c)
                        .map_err(|e| format!("model {model} as [workload.transformer]: {e}"))?;
                    format!("[workload.transformer]\n{table}")
                }
                _ => format!("model = \"{model}\"\n"),
            };
            let path = resolve(profile, root);
            let eager = !compiled
                && crate::profile::Profile::load(&path)
                    .map_err(|e| e.to_string())?
                    .compute
                    .is_some_and(|c| c.eager_host.contains_key(dtype));
            let execution = if eager { "eager" } else { "fused" };
            let text = format!(
                "name = \"validate\"\nprofile = {}\n[topology]\nfile = {}\n[placement]\nranks = 1\n\
                 [workload]\nbatch_per_gpu = {batch}\nparallelism = \"ddp\"\n\
                 dtype = \"{dtype}\"\nexecution = \"{execution}\"\n{model_keys}",
                toml_str(&path),
                toml_str(&root.join("topologies/pcie_box_2gpu.toml")),
            );
            let (sim, call) = simulate_step(&text, &[])?;
            // The GPU the row ran on (the replay's topology only carries the profile's GPU).
            let gpu = crate::topology::gpu_models::by_name(get("device_name"))
                .map(|g| g.name.to_string());
            let stem = Path::new(profile)
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default();
            Ok(Replay {
                call: call.map(|c| RowCall { gpu, ..c }),
                ..Replay::new(
                    format!(
                        "{machine} {model} {dtype}{how}{} · {stem}",
                        if eager { " eager" } else { "" }
                    ),
                    format!("{model} batch {batch} ({stem})"),
                    num(row, "step_secs_median")?,
                    sim,
                )
            })
        })
        .collect()
}

/// TensorFlow tf_cnn_benchmarks row (May 2017, images/s over all GPUs) on the single machine
/// it names: a DGX-1 with P100s (`topologies/dgx1_p100.toml`) or 8 K80 GPUs on PCIe
/// (`topologies/k80x8_pcie.toml`, GCE and AWS alike), with the compute profile fitted on that
/// GPU's 1-GPU synthetic rows. Step time = batch per GPU × GPUs / images per second.
/// `variable_update`: parameter_server on the CPU → one server on the host (every GPU pushes its
/// gradients over PCIe and pulls the parameters); parameter_server on the GPUs, and replicated
/// without NCCL (each variable summed on one GPU and copied back) → the parameter server sharded
/// over the GPUs; replicated with NCCL → one ring all-reduce after the backward pass over an
/// NVLink Hamiltonian cycle (TF 1.x does not overlap it). Plain SGD, tf_cnn_benchmarks'
/// default. Real-data rows form their own groups: their input pipeline is not simulated.
/// Multi-instance rows are skipped (the network is not stated), as are the distributed table's
/// one-instance rows (gRPC parameter servers, not modelled).
pub(super) fn tf_cnn_row(row: &Row, root: &Path) -> Replayed {
    let field = |c: &str| row.get(c).map(String::as_str).unwrap_or("");
    let (system, update) = (
        field("system"),
        field("variable_update / local_parameter_device"),
    );
    if num(row, "num_nodes")? > 1.0 {
        return Err("multi-instance cluster: network not stated".into());
    }
    if update.starts_with("distributed_replicated") {
        return Err(
            "distributed_replicated on one instance: gRPC parameter servers, not modelled".into(),
        );
    }
    let (short, topology, profile, host) = if system.starts_with("NVIDIA DGX-1") {
        let p = "data/profiles/p100_dgx1_tf_cnn_calibrated.json";
        ("DGX-1 P100", "topologies/dgx1_p100.toml", p, "n0.cpu0")
    } else if system.starts_with("GCE") || system == "AWS p2.8xlarge" {
        let p = "data/profiles/k80_tf_cnn_calibrated.json";
        let short = if system.starts_with("GCE") {
            "GCE K80"
        } else {
            "AWS K80"
        };
        (short, "topologies/k80x8_pcie.toml", p, "n0.host")
    } else {
        return Err(format!("system {system:?}: no topology"));
    };
    let model_name = field("model");
    let model = match model_name {
        "InceptionV3" => "inception_v3",
        "ResNet-50" => "resnet50",
        "ResNet-152" => "resnet152",
        "AlexNet" => "alexnet",
        "VGG16" => "vgg16",
        other => return Err(format!("model {other:?}: not in the catalog")),
    };
    let gpus = num(row, "num_gpus")? as u32;
    let batch = num(row, "batch_per_gpu")? as u64;
    let (method, parallelism) = match update {
        "parameter_server / cpu" => (
            "ps/cpu",
            "parallelism = \"parameter_server\"\nservers = 1\ncolocated = false".to_string(),
        ),
        "parameter_server / gpu" => (
            "ps/gpu",
            format!("parallelism = \"parameter_server\"\nservers = {gpus}"),
        ),
        "replicated (without NCCL) / gpu" => (
            "replicated/no-nccl",
            format!("parallelism = \"parameter_server\"\nservers = {gpus}"),
        ),
        "replicated (with NCCL) / n/a" => {
            // One ring (NCCL 1.x's ring count is not stated) along NVLink: GPUs 0-3 are fully
            // connected, 4-7 too, and GPU i links to i+4.
            let order = match (short, gpus) {
                (_, 1) => "[[0]]",
                ("DGX-1 P100", 2) => "[[0, 1]]",
                ("DGX-1 P100", 4) => "[[0, 1, 2, 3]]",
                ("DGX-1 P100", 8) => "[[0, 1, 2, 3, 7, 6, 5, 4]]",
                _ => return Err(format!("NCCL on {gpus} GPUs of {short}: no ring order")),
            };
            let ring = format!("algorithm = \"ring\"\norders = {order}");
            (
                "replicated/nccl",
                format!("parallelism = \"allreduce_after_backward\"\n[workload.allreduce]\n{ring}"),
            )
        }
        other => return Err(format!("variable_update {other:?}: not modelled")),
    };
    let mut text = format!(
        "name = \"validate\"\nprofile = {}\n[topology]\nfile = {}\n[placement]\nranks = {gpus}\n",
        toml_str(&root.join(profile)),
        toml_str(&root.join(topology)),
    );
    if update == "parameter_server / cpu" {
        let _ = writeln!(text, "[placement.endpoints]\nps0 = \"{host}\"");
    }
    let _ = writeln!(
        text,
        "[workload]\nmodel = \"{model}\"\nbatch_per_gpu = {batch}"
    );
    let _ = writeln!(text, "optimizer = \"sgd\"\n{parallelism}");
    let sim = simulate(&text, &[], true)?;
    let real = field("data") == "real";
    let group = format!(
        "{short} {model_name} {method}{}",
        if real { " real data" } else { "" }
    );
    let measured = batch as f64 * gpus as f64 / num(row, "throughput")?;
    Ok(Replay::new(
        group,
        format!("{gpus} GPUs batch {batch}"),
        measured,
        sim,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(fields: &[(&str, &str)]) -> Row {
        fields
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn a_row_is_timed_over_as_many_calls_as_each_of_its_launches_timed() {
        // The command says it: ten timed calls per launch, fifty pooled over five launches.
        let r = row(&[
            ("command", "python3 gloo_collectives.py --method allreduce --repeats 10 --bytes 262144  (x5 launches)"),
            ("repeats", "50"),
            ("launch_medians_secs", "0.1;0.1;0.1;0.1;0.1"),
        ]);
        assert_eq!(timed_calls(&r), Some(10));
        // Without it in the command: the pooled count over the launches.
        let r = row(&[
            ("repeats", "25"),
            ("launch_medians_secs", "0.1;0.1;0.1;0.1;0.1"),
        ]);
        assert_eq!(timed_calls(&r), Some(5));
        // Neither: the scenario's default.
        assert_eq!(timed_calls(&row(&[("repeats", "25")])), None);
        // A count past the loop's limit is held to it.
        let r = row(&[("command", "x.py --repeats 5000")]);
        assert_eq!(timed_calls(&r), Some(crate::scenario::TIMED_CALLS_MAX));
    }
}
