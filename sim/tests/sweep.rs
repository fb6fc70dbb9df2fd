//! `dtsim sweep` and `dtsim merge` on real files: stable expansion, resuming after a kill with
//! every point exactly once, shards that merge into the same table, Slurm scripts.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant, SystemTime};

mod common;
use common::{dtsim, repo};

fn scratch(name: &str) -> PathBuf {
    common::scratch("sweep", name)
}

/// 3 algorithms × 4 sizes × 4 rank counts = 48 points on the 10-GPU ring.
fn write_sweep(dir: &Path) -> PathBuf {
    let topo = repo().join("topologies/ring10_10GBps.toml");
    let p = dir.join("sweep.toml");
    std::fs::write(
        &p,
        format!(
            r#"
name = "ring-sweep"
[topology]
file = "{}"
[collective]
op = "all_reduce"
bytes = "1MiB"
[sweep]
"collective.algorithm" = ["ring", "double_binary_tree", "direct"]
"collective.bytes" = ["64KiB", "1MiB", "16MiB", "64MiB"]
"placement.ranks" = [2, 4, 8, 10]
"#,
            topo.display()
        ),
    )
    .unwrap();
    p
}

fn json(o: &Output) -> serde_json::Value {
    assert!(
        o.status.success(),
        "dtsim failed: {}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&o.stdout).expect("--json prints JSON")
}

/// summary.json path → (modification time, key) of every done point.
fn done_points(out: &Path) -> BTreeMap<PathBuf, (SystemTime, String)> {
    let mut m = BTreeMap::new();
    let Ok(rd) = std::fs::read_dir(out.join("points")) else {
        return m;
    };
    for e in rd {
        let p = e.unwrap().path().join("summary.json");
        if let Ok(text) = std::fs::read_to_string(&p) {
            let v: serde_json::Value = serde_json::from_str(&text).expect("whole summaries only");
            let key = v["sweep_point"]["key"].as_str().unwrap().to_string();
            m.insert(
                p.clone(),
                (std::fs::metadata(&p).unwrap().modified().unwrap(), key),
            );
        }
    }
    m
}

#[test]
fn points_expand_in_a_stable_order_with_the_last_axis_fastest() {
    let dir = scratch("order");
    let s = write_sweep(&dir);
    let sw = sim::scenario::sweep::expand(&s, &[]).unwrap();
    assert_eq!(sw.points.len(), 48);
    let first: Vec<String> = sw.points[..5]
        .iter()
        .map(|p| {
            p.values
                .iter()
                .map(|(_, v)| sim::scenario::sweep::value_text(v))
                .collect::<Vec<_>>()
                .join("/")
        })
        .collect();
    assert_eq!(
        first,
        [
            "ring/64KiB/2",
            "ring/64KiB/4",
            "ring/64KiB/8",
            "ring/64KiB/10",
            "ring/1MiB/2"
        ]
    );
    let again = sim::scenario::sweep::expand(&s, &[]).unwrap();
    assert_eq!(sw.points, again.points, "expansion is deterministic");
    let dirs: std::collections::BTreeSet<String> = sw.points.iter().map(|p| p.dir_name()).collect();
    assert_eq!(dirs.len(), 48, "every point has its own directory");
}

#[test]
fn a_sweep_killed_half_way_resumes_and_runs_every_point_exactly_once() {
    let dir = scratch("kill");
    let s = write_sweep(&dir);
    let out = dir.join("out");
    let mut child = Command::new(env!("CARGO_BIN_EXE_dtsim"))
        .args(["sweep", s.to_str().unwrap(), "--jobs", "2", "--out"])
        .arg(&out)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // kill it once a few points are done (or let it end if it is faster than the polling)
    let t = Instant::now();
    while done_points(&out).len() < 6 && t.elapsed() < Duration::from_secs(60) {
        std::thread::sleep(Duration::from_millis(2));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let before = done_points(&out);
    assert!(!before.is_empty());
    let v = json(&dtsim(&[
        "sweep",
        s.to_str().unwrap(),
        "--jobs",
        "2",
        "--json",
        "--out",
        out.to_str().unwrap(),
    ]));
    assert_eq!(v["already_done"], before.len(), "{v}");
    assert_eq!(
        v["ran"].as_u64().unwrap() as usize + before.len(),
        48,
        "the rest, and only the rest, ran: {v}"
    );
    assert_eq!(v["failed"].as_array().unwrap().len(), 0);
    let after = done_points(&out);
    assert_eq!(after.len(), 48);
    for (p, (mtime, key)) in &before {
        assert_eq!(
            &after[p],
            &(*mtime, key.clone()),
            "{} was run again",
            p.display()
        );
    }
    let keys: std::collections::BTreeSet<&String> = after.values().map(|(_, k)| k).collect();
    assert_eq!(keys.len(), 48, "one result per point");
    let csv = std::fs::read_to_string(out.join("results.csv")).unwrap();
    assert_eq!(csv.lines().count(), 49);
    assert!(csv.starts_with("index,dir,collective.algorithm,collective.bytes,placement.ranks,"));
}

#[test]
fn a_limit_stops_early_and_a_point_with_another_key_is_not_done() {
    let dir = scratch("limit");
    let s = write_sweep(&dir);
    let out = dir.join("out");
    let o = out.to_str().unwrap();
    let v = json(&dtsim(&[
        "sweep",
        s.to_str().unwrap(),
        "--limit",
        "10",
        "--json",
        "--out",
        o,
    ]));
    assert_eq!(
        (v["ran"].as_u64(), v["left"].as_u64()),
        (Some(10), Some(38))
    );
    assert!(
        v["results"].is_null(),
        "no results table before every point is done"
    );
    // a summary that belongs to another point (e.g. the scenario changed) is not this one's
    let p = done_points(&out).into_keys().next().unwrap();
    let text = std::fs::read_to_string(&p)
        .unwrap()
        .replace("scenario=ring-sweep", "scenario=old");
    std::fs::write(&p, text).unwrap();
    let v = json(&dtsim(&[
        "sweep",
        s.to_str().unwrap(),
        "--json",
        "--out",
        o,
    ]));
    assert_eq!(
        (v["already_done"].as_u64(), v["ran"].as_u64()),
        (Some(9), Some(39))
    );
}

#[test]
fn shards_cover_every_point_once_and_merge_into_the_unsharded_table() {
    let dir = scratch("shards");
    let s = write_sweep(&dir);
    let whole = dir.join("whole");
    json(&dtsim(&[
        "sweep",
        s.to_str().unwrap(),
        "--json",
        "--out",
        whole.to_str().unwrap(),
    ]));
    let mut counts = 0;
    for i in 0..3 {
        let d = dir.join(format!("shard{i}"));
        let v = json(&dtsim(&[
            "sweep",
            s.to_str().unwrap(),
            "--shard",
            &format!("{i}/3"),
            "--json",
            "--out",
            d.to_str().unwrap(),
        ]));
        assert_eq!(v["in_shard"], 16);
        counts += v["ran"].as_u64().unwrap();
    }
    assert_eq!(counts, 48);
    let merged = dir.join("merged.csv");
    let o = dtsim(&[
        "merge",
        dir.join("shard0").to_str().unwrap(),
        dir.join("shard1").to_str().unwrap(),
        dir.join("shard2").to_str().unwrap(),
        "--out",
        merged.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(
        std::fs::read_to_string(&merged).unwrap(),
        std::fs::read_to_string(whole.join("results.csv")).unwrap()
    );
    // one shard alone: merge says what is missing
    let o = dtsim(&["merge", dir.join("shard1").to_str().unwrap()]);
    assert!(String::from_utf8_lossy(&o.stdout).contains("16 points, 32 missing"));
}

#[test]
fn slurm_array_variables_pick_the_shard() {
    let dir = scratch("slurm-env");
    let s = write_sweep(&dir);
    let o = Command::new(env!("CARGO_BIN_EXE_dtsim"))
        .args(["sweep", s.to_str().unwrap(), "--json", "--out"])
        .arg(dir.join("out"))
        .env("SLURM_ARRAY_TASK_ID", "2")
        .env("SLURM_ARRAY_TASK_COUNT", "4")
        .output()
        .unwrap();
    let v = json(&o);
    assert_eq!(v["shard"], "2/4");
    assert_eq!(v["ran"], 12);
}

#[test]
fn emit_slurm_writes_an_array_job_and_a_dependent_merge() {
    let dir = scratch("slurm");
    let s = write_sweep(&dir);
    let o = dtsim(&[
        "sweep",
        s.to_str().unwrap(),
        "--emit-slurm",
        dir.join("jobs").to_str().unwrap(),
        "--tasks",
        "4",
        "--out",
        dir.join("out").to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let array = std::fs::read_to_string(dir.join("jobs/sweep_array.sbatch")).unwrap();
    assert!(array.contains("#SBATCH --array=0-3"), "{array}");
    assert!(array.contains(" sweep ") && array.contains("--out"));
    let merge = std::fs::read_to_string(dir.join("jobs/merge.sbatch")).unwrap();
    assert!(merge.contains(" merge "));
    let submit = std::fs::read_to_string(dir.join("jobs/submit.sh")).unwrap();
    assert!(submit.contains("--dependency=afterok:"), "{submit}");
    assert!(
        !dir.join("out/points").exists(),
        "emitting scripts runs nothing"
    );
}

#[test]
fn a_workload_study_sweeps_its_compare_variants() {
    let dir = scratch("workload");
    let v = json(&dtsim(&[
        "sweep",
        "scenarios/resnet18_weak_scaling.toml",
        "--json",
        "--out",
        dir.to_str().unwrap(),
    ]));
    assert_eq!(v["ran"], 5);
    let csv = std::fs::read_to_string(dir.join("results.csv")).unwrap();
    let header: Vec<&str> = csv.lines().next().unwrap().split(',').collect();
    assert_eq!(header[2], "variant");
    assert!(header.contains(&"samples_per_s") && header.contains(&"ranks"));
    let ranks_col = header.iter().position(|c| *c == "ranks").unwrap();
    let ranks: Vec<&str> = csv
        .lines()
        .skip(1)
        .map(|l| l.split(',').nth(ranks_col).unwrap())
        .collect();
    assert_eq!(ranks, ["4", "8", "16", "32", "64"]);
}

#[test]
fn a_run_writes_a_chrome_trace_with_one_track_per_rank() {
    let dir = scratch("trace");
    let o = dtsim(&[
        "run",
        "scenarios/quickstart.toml",
        "--out",
        dir.to_str().unwrap(),
    ]);
    assert!(o.status.success());
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("trace.json")).unwrap()).unwrap();
    let ev = v["traceEvents"].as_array().unwrap();
    let tracks = ev.iter().filter(|e| e["name"] == "thread_name").count();
    assert_eq!(tracks, 10);
    assert!(ev
        .iter()
        .any(|e| e["ph"] == "X" && e["cat"] == "reduce-scatter"));
    assert!(ev
        .iter()
        .any(|e| e["ph"] == "X" && e["cat"] == "all-gather"));
}

#[test]
fn a_second_sweep_into_the_same_folder_is_refused_and_force_never_mixes_the_two() {
    let dir = scratch("two-sweeps");
    let s = write_sweep(&dir);
    let out = dir.join("out");
    let o = out.to_str().unwrap();
    let sweep = |extra: &[&str]| {
        let mut args = vec!["sweep", s.to_str().unwrap(), "--json", "--out", o];
        args.extend_from_slice(extra);
        dtsim(&args)
    };
    let first = json(&sweep(&["--set", "collective.slices=1"]));
    assert_eq!(first["ran"].as_u64(), Some(48));
    // A leftover of an interrupted atomic write is removed on the next call.
    let stray = out.join("points").join(".summary.json.tmp4242");
    std::fs::write(&stray, "half").unwrap();
    let again = json(&sweep(&["--set", "collective.slices=1"]));
    assert_eq!(again["already_done"].as_u64(), Some(48));
    assert!(!stray.exists());

    let refused = sweep(&["--set", "collective.slices=2"]);
    assert!(!refused.status.success());
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(
        err.contains("holds another sweep") && err.contains("--force"),
        "{err}"
    );

    let second = json(&sweep(&["--set", "collective.slices=2", "--force"]));
    assert_eq!(second["ran"].as_u64(), Some(48));
    let table = std::fs::read_to_string(out.join("results.csv")).unwrap();
    let indexes: Vec<&str> = table
        .lines()
        .skip(1)
        .map(|l| l.split(',').next().unwrap())
        .collect();
    let unique: std::collections::BTreeSet<&str> = indexes.iter().copied().collect();
    assert_eq!((indexes.len(), unique.len()), (48, 48), "{table}");
}

/// Sweeps `toml` (a scenario with its `[sweep]`, `{profile}` and `{topology}` standing for the
/// repository's files of those names) in a scratch folder named `name`: `results.csv`'s header
/// and its points' fields (quoted fields, which hold commas, unquoted).
fn sweep_results(
    name: &str,
    toml: &str,
    profile: &str,
    topology: &str,
) -> (Vec<String>, Vec<Vec<String>>) {
    let dir = scratch(name);
    let p = dir.join("sweep.toml");
    let text = toml
        .replace("{profile}", &repo().join(profile).display().to_string())
        .replace("{topology}", &repo().join(topology).display().to_string());
    std::fs::write(&p, text).unwrap();
    let out = dir.join("out");
    json(&dtsim(&[
        "sweep",
        p.to_str().unwrap(),
        "--json",
        "--out",
        out.to_str().unwrap(),
    ]));
    let fields = |line: &str| -> Vec<String> {
        let (mut out, mut cur, mut quoted) = (Vec::new(), String::new(), false);
        for c in line.chars() {
            match c {
                '"' => quoted = !quoted,
                ',' if !quoted => out.push(std::mem::take(&mut cur)),
                c => cur.push(c),
            }
        }
        out.push(cur);
        out
    };
    let text = std::fs::read_to_string(out.join("results.csv")).unwrap();
    let mut lines = text.lines();
    let header = fields(lines.next().unwrap());
    (header, lines.map(fields).collect())
}

/// The position of column `name` in `header`.
fn column(header: &[String], name: &str) -> usize {
    header
        .iter()
        .position(|h| h == name)
        .unwrap_or_else(|| panic!("no {name} in {header:?}"))
}

#[test]
fn a_sweep_of_a_library_collective_merges_its_track_record_per_point() {
    // OpenMPI's ring all-reduce on 3 and 8 hosts of the testbed's star: each point carries how
    // far off dtsim has been on the testbed's runs of that call, nearest to the point's size.
    let (header, points) = sweep_results(
        "track",
        r#"
name = "mpi-ring"
profile = "{profile}"
[topology]
file = "{topology}"
[collective]
op = "all_reduce"
library = "mpi"
algorithm = "ring"
bytes = "1MiB"
[sweep]
"topology.generator.n" = [3, 8]
"#,
        "data/profiles/testbed_star4_200mbit.json",
        "testbed/topologies/star4_200mbit.toml",
    );
    let col = |name: &str| column(&header, name);
    let (call, rows, nearest_min) = (
        col("track_record_call"),
        col("track_record_all_rows"),
        col("track_record_nearest_ranks_min"),
    );
    assert_eq!(points.len(), 2);
    for pt in &points {
        assert_eq!(pt[call], "mpi ring all_reduce");
        assert!(pt[rows].parse::<u32>().unwrap() >= 40);
    }
    // Nearest to 3 ranks: from 3 up; to 8 ranks: 4 up (within a factor of 2).
    let mut mins: Vec<&str> = points.iter().map(|pt| pt[nearest_min].as_str()).collect();
    mins.sort();
    assert_eq!(mins, ["3", "4"]);
}

#[test]
fn a_sweep_of_a_training_step_merges_its_track_record_per_point() {
    // ResNet-50 eager in bf16 on one and on eight H100s: both points are the step the lent
    // H100's one-GPU runs measured; only the one-GPU point has rows near it.
    let (header, mut points) = sweep_results(
        "step-track",
        r#"
name = "resnet50-eager"
profile = "{profile}"
[topology]
file = "{topology}"
[workload]
model = "resnet50"
batch_per_gpu = 16
dtype = "bf16"
execution = "eager"
[sweep]
"placement.ranks" = [1, 8]
"#,
        "data/profiles/h100_sxm_node.json",
        "topologies/hgx_h100.toml",
    );
    let col = |name: &str| column(&header, name);
    let (call, ranks, batch, nearest) = (
        col("track_record_call"),
        col("ranks"),
        col("track_record_all_batch_min"),
        col("track_record_nearest_rows"),
    );
    points.sort_by_key(|pt| pt[ranks].parse::<u32>().unwrap());
    assert_eq!(points.len(), 2);
    for pt in &points {
        assert_eq!(
            pt[call],
            "training step resnet50 bf16 eager (profile h100_sxm_node)"
        );
        assert!(!pt[batch].is_empty());
    }
    assert!(points[0][nearest].parse::<u32>().unwrap() >= 1);
    assert_eq!(points[1][nearest], "");
}
