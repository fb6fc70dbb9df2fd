//! What a track record matches and reports, on rows written here and on the repository's own
//! validation outputs.
#![cfg(test)]

use super::*;

fn row(set: &str, op: &str, ranks: u32, bytes: u64, err: f64) -> Row {
    Row {
        dataset: format!("d{ranks}"),
        keys: scenario_keys(set),
        op: op.into(),
        ranks,
        bytes,
        batch: None,
        gpu: None,
        error_pct: err,
    }
}

/// A collective call of `library` (forced `algorithm`, or the library's own choice).
fn collective(library: &str, algorithm: Option<&str>, ranks: u32, bytes: u64) -> Call {
    Call {
        played: Played::Collective {
            library: library.into(),
            algorithm: algorithm.map(str::to_string),
            orders: false,
            op: "all_reduce".into(),
            bytes,
        },
        ranks,
        gpu: None,
    }
}

fn mpi_ring(ranks: u32, bytes: u64) -> Call {
    collective("mpi", Some("ring"), ranks, bytes)
}

#[test]
fn a_call_matches_rows_of_its_library_algorithm_and_op_only() {
    let rows = [
        row(
            "collective.library=mpi;collective.algorithm=ring",
            "all_reduce",
            4,
            1 << 20,
            5.0,
        ),
        row("collective.library=mpi", "all_reduce", 4, 1 << 20, 50.0),
        row(
            "collective.library=mpi;collective.algorithm=ring",
            "all_gather",
            4,
            1 << 20,
            50.0,
        ),
        row("collective.library=gloo", "all_reduce", 4, 1 << 20, 50.0),
    ];
    let t = of(&mpi_ring(4, 1 << 20), &rows, Path::new("v")).unwrap();
    assert_eq!(t.all.rows, 1);
    assert_eq!(t.all.max_abs_error_pct, 5.0);
    let rules = collective("mpi", None, 4, 1 << 20);
    assert_eq!(of(&rules, &rows, Path::new("v")).unwrap().all.rows, 1);
    let mut gloo_multiring = collective("gloo", None, 4, 1 << 20);
    if let Played::Collective { orders, .. } = &mut gloo_multiring.played {
        *orders = true;
    }
    assert!(of(&gloo_multiring, &rows, Path::new("v")).is_none());
}

#[test]
fn the_errors_are_the_median_90th_percentile_max_and_signed_mean() {
    let set = "collective.library=mpi;collective.algorithm=ring";
    // |errors| 1..=10, signs alternating: median 5.5, nearest-rank p90 9, max 10.
    let rows: Vec<Row> = (1..=10)
        .map(|i| {
            let sign = if i % 2 == 0 { 1.0 } else { -1.0 };
            row(set, "all_reduce", 4, 1 << 20, sign * f64::from(i))
        })
        .collect();
    let t = of(&mpi_ring(4, 1 << 20), &rows, Path::new("v")).unwrap();
    assert_eq!(t.all.median_abs_error_pct, 5.5);
    assert_eq!(t.all.p90_abs_error_pct, 9.0);
    assert_eq!(t.all.max_abs_error_pct, 10.0);
    assert!((t.all.mean_error_pct - 0.5).abs() < 1e-12);
    assert_eq!(t.all.datasets, 1);
}

#[test]
fn the_repositorys_validation_outputs_describe_every_collective_row_and_step() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../data/runs/validation");
    let rows = read(&dir).unwrap();
    // Every testbed collective row scored in the folders, none left out for want of its
    // call (a folder written before the columns would be).
    let mut collective_rows = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let file = entry.unwrap().path().join("predictions.csv");
        let name = file
            .parent()
            .unwrap()
            .file_name()
            .unwrap()
            .to_string_lossy();
        if !name.starts_with("testbed_") || name == "testbed_training" || !file.is_file() {
            continue;
        }
        collective_rows += read_csv(&file).unwrap().len();
    }
    assert!(
        collective_rows > 600,
        "{collective_rows} testbed collective rows"
    );
    let testbed = rows
        .iter()
        .filter(|r| r.dataset.starts_with("testbed_") && r.op != STEP_OP);
    assert_eq!(testbed.count(), collective_rows);
    // The measured training steps: the testbed's three, and the lent GPUs' one-GPU steps,
    // each with its batch, on its GPU model.
    let steps: Vec<&Row> = rows.iter().filter(|r| r.op == STEP_OP).collect();
    assert_eq!(
        steps
            .iter()
            .filter(|r| r.dataset == "testbed_training")
            .count(),
        3
    );
    assert!(steps.iter().all(|r| r.batch.is_some() && r.bytes == 0));
    let on_h100 = steps.iter().filter(|r| r.gpu.as_deref() == Some("H100"));
    assert!(on_h100.count() >= 50);
    // The nccl-tests tables' scored rows, each on its GPU model.
    let nccl: Vec<&Row> = rows
        .iter()
        .filter(|r| {
            r.keys
                .get("collective.library")
                .is_some_and(|l| l == "nccl")
        })
        .collect();
    assert!(nccl.len() > 100 && nccl.iter().all(|r| r.gpu.is_some()));
    // OpenMPI's ring all-reduce was recorded on 3 to 8 ranks; the three-host star's 1 MiB
    // row is among the nearest to a 3-rank 1 MiB call.
    let t = of(&mpi_ring(3, 1 << 20), &rows, &dir).unwrap();
    assert!(t.all.rows >= 40 && t.all.ranks_min == 3, "{:?}", t.all);
    let n = t.nearest.unwrap();
    assert!(n.rows >= 10 && n.max_abs_error_pct <= t.all.max_abs_error_pct);
}

#[test]
fn folders_without_the_call_columns_are_left_out_and_a_broken_file_is_named() {
    let dir = std::env::temp_dir().join(format!("dtsim-track-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    for (folder, text) in [
        // Written before the columns: nothing to match, no error.
        (
            "old",
            "dataset,group,row,error_pct,scored\nd,g,1,5.0,true\n",
        ),
        (
            "new",
            "dataset,simulated_secs,predicted_secs,error_pct,scored,calibration,sim_set,op,\
             ranks,bytes,gpu\n\
             d,1e-3,1e-3,-2.5,true,false,collective.library=gloo,all_reduce,4,1024,\n\
             d,1e-3,1e-3,9.0,false,false,collective.library=gloo,all_reduce,4,1024,\n\
             d,1e-3,2e-3,7.0,true,false,collective.library=gloo,all_reduce,4,1024,\n",
        ),
    ] {
        std::fs::create_dir_all(dir.join(folder)).unwrap();
        std::fs::write(dir.join(folder).join("predictions.csv"), text).unwrap();
    }
    // The scored, uncalibrated row only.
    let rows = read(&dir).unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!((rows[0].error_pct, rows[0].gpu.clone()), (-2.5, None));
    std::fs::write(dir.join("new/predictions.csv"), "a,b\n1,2,3\n").unwrap();
    let err = read(&dir).unwrap_err();
    assert!(
        err.contains("new/predictions.csv") && err.contains("row 1"),
        "{err}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn nccl_calls_are_nearest_on_their_own_gpu_model() {
    let set = "collective.library=nccl";
    let on = |gpu: &str, err: f64| Row {
        gpu: Some(gpu.into()),
        ..row(set, "all_reduce", 8, 1 << 20, err)
    };
    let rows = [on("H100", 3.0), on("2080", 30.0), on("H100", 5.0)];
    let call = Call {
        gpu: Some("H100".into()),
        ..collective("nccl", None, 8, 1 << 20)
    };
    let t = of(&call, &rows, Path::new("v")).unwrap();
    assert_eq!(t.all.rows, 3);
    let n = t.nearest.unwrap();
    assert_eq!((n.rows, n.max_abs_error_pct), (2, 5.0));
}

#[test]
fn the_nearest_rows_are_within_twice_the_ranks_and_four_times_the_bytes() {
    let set = "collective.library=mpi;collective.algorithm=ring";
    let rows = [
        row(set, "all_reduce", 8, 4 << 20, 1.0),
        row(set, "all_reduce", 4, 1 << 20, 2.0),
        row(set, "all_reduce", 17, 1 << 20, 30.0),
        row(set, "all_reduce", 8, 64 << 10, 40.0),
    ];
    let t = of(&mpi_ring(8, 1 << 20), &rows, Path::new("v")).unwrap();
    assert_eq!(t.all.rows, 4);
    let n = t.nearest.unwrap();
    assert_eq!(n.rows, 2);
    assert_eq!(n.max_abs_error_pct, 2.0);
    assert_eq!((n.ranks_min, n.ranks_max), (4, 8));
    let far = of(&mpi_ring(64, 1 << 30), &rows, Path::new("v")).unwrap();
    assert!(far.nearest.is_none());
}

/// A measured step of `model` on `profile`, batch `batch` on `ranks` ranks.
fn step_row(model: &str, profile: &str, ranks: u32, batch: u64, err: f64) -> Row {
    let set = format!(
        "profile={profile};workload.dtype=bf16;workload.execution=eager;workload.model={model}"
    );
    Row {
        op: STEP_OP.into(),
        batch: Some(batch),
        gpu: Some("H100".into()),
        ..row(&set, STEP_OP, ranks, 0, err)
    }
}

fn step(model: &str, profile: &str, ranks: u32, batch: u64) -> Call {
    let keys = scenario_keys(&format!(
        "profile={profile};workload.dtype=bf16;workload.execution=eager;workload.model={model}"
    ));
    Call {
        played: Played::Step { keys, batch },
        ranks,
        gpu: Some("H100".into()),
    }
}

#[test]
fn a_step_matches_rows_of_the_same_model_dtype_execution_and_profile_nearest_by_batch() {
    let rows = [
        step_row("resnet50", "h100_sxm_node", 1, 16, -40.0),
        step_row("resnet50", "h100_sxm_node", 1, 256, -20.0),
        step_row("resnet50", "h100_torch_layers", 1, 16, 80.0),
        step_row("gpt2", "h100_sxm_node", 1, 16, 60.0),
        row("collective.library=nccl", "all_reduce", 1, 16, 1.0),
    ];
    let t = of(
        &step("resnet50", "h100_sxm_node", 1, 32),
        &rows,
        Path::new("v"),
    )
    .unwrap();
    assert_eq!(
        t.call,
        "training step resnet50 bf16 eager (profile h100_sxm_node)"
    );
    assert_eq!((t.all.rows, t.all.max_abs_error_pct), (2, 40.0));
    assert_eq!((t.all.batch_min, t.all.batch_max), (Some(16), Some(256)));
    assert_eq!(t.all.bytes_min, None);
    // Batch 32: 16 is within 4x, 256 is not.
    let n = t.nearest.unwrap();
    assert_eq!((n.rows, n.max_abs_error_pct), (1, 40.0));
    // Eight ranks: no one-GPU row is near.
    let eight = of(
        &step("resnet50", "h100_sxm_node", 8, 32),
        &rows,
        Path::new("v"),
    )
    .unwrap();
    assert!(eight.nearest.is_none());
    assert!(
        eight.to_string().contains("(1 rank, batch 16-256)"),
        "{eight}"
    );
    assert!(of(&step("bert", "h100_sxm_node", 1, 32), &rows, Path::new("v")).is_none());
}

#[test]
fn a_steps_keys_name_its_model_dtype_execution_attention_and_profile() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let parse = |workload: &str| {
        let text = format!(
            "name = \"t\"\nprofile = {:?}\n[topology]\nfile = {:?}\n[workload]\nbatch_per_gpu = 8\n{workload}",
            root.join("data/profiles/h100_sxm_node.json"),
            root.join("topologies/hgx_h100.toml"),
        );
        crate::scenario::parse(&text, Path::new("t.toml"), &[]).unwrap()
    };
    let named = step_keys(&parse(
        "model = \"resnet50\"\ndtype = \"bf16\"\nexecution = \"eager\"\n",
    ))
    .unwrap();
    assert_eq!(
        keys_column(&named),
        "profile=h100_sxm_node;workload.dtype=bf16;workload.execution=eager;\
         workload.model=resnet50"
    );
    let file = step_keys(&parse(&format!(
        "model_file = {:?}\n",
        root.join("data/runs/models/testbed_mlp.toml")
    )))
    .unwrap();
    assert_eq!(file[MODEL], "testbed_mlp");
    assert_eq!(
        (file[DTYPE].as_str(), file[EXECUTION].as_str()),
        ("fp32", "fused")
    );
    // The keys a row's sim_set column carries read back as the same map.
    assert_eq!(scenario_keys(&keys_column(&named)), named);
}
