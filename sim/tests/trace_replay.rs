//! Recorded steps replayed: the testbed's traced DDP step (PyTorch ET + Kineto, and the same
//! step as Chakra ET) replays to within 5% of the step time it recorded; a Chakra trace written
//! by Chakra's own converter reads; bad traces are errors naming the file and the node.

mod common;

use std::io::Read;
use std::path::Path;

use common::{dtsim, repo, scratch};
use sim::collective::play::Watch;
use sim::metrics::workload::WorkloadReport;
use sim::workload::trace::{self, Format, NodeKind};

const SCENARIO: &str = "scenarios/trace_testbed_ddp_cnn.toml";
const PYTORCH: &str = "data/traces/testbed_ddp_cnn";
const CHAKRA: &str = "data/traces/testbed_ddp_cnn_chakra";

fn replay(set: &[&str]) -> WorkloadReport {
    let overrides: Vec<String> = set.iter().map(|s| s.to_string()).collect();
    let s = sim::scenario::load(&repo().join(SCENARIO), &overrides).unwrap();
    sim::scenario::workload::run_workload(&s, Watch::default()).unwrap()
}

fn error_of(args: &[&str]) -> String {
    let out = dtsim(args);
    assert!(!out.status.success(), "{args:?} should fail");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn the_recorded_pytorch_step_replays_within_5_percent_of_its_recorded_time() {
    let r = replay(&[]);
    let t = r.summary.trace.as_ref().expect("a trace summary");
    let recorded = t.recorded_step_secs.expect("Kineto records the step");
    let predicted = r.summary.metrics.step_secs;
    let err = (predicted - recorded).abs() / recorded;
    assert!(
        err <= 0.05,
        "predicted {predicted} s, recorded {recorded} s"
    );
    // One gradient bucket (224,522 fp32 parameters) all-reduced once, on the wire both ways.
    assert_eq!((t.format.as_str(), t.collectives), ("pytorch", 1));
    assert_eq!(r.summary.ranks, 2);
    assert!(r.summary.metrics.exposed_communication_secs > 0.0);
}

#[test]
fn the_same_step_as_chakra_files_replays_to_the_same_time() {
    let py = replay(&[]).summary.metrics.step_secs;
    let ch = replay(&[&format!("workload.trace=../{CHAKRA}")]);
    assert_eq!(ch.summary.trace.as_ref().unwrap().format, "chakra");
    // Chakra stores whole microseconds: 48 nodes per rank round by at most 24 us.
    assert!(
        (ch.summary.metrics.step_secs - py).abs() < 50e-6,
        "{py} vs {}",
        ch.summary.metrics.step_secs
    );
}

#[test]
fn the_shipped_chakra_files_are_what_trace_convert_writes() {
    let out = scratch("trace", "convert");
    let o = dtsim(&["trace", "convert", PYTORCH, "--out", out.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    for r in 0..2 {
        let name = format!("testbed_ddp_cnn.{r}.et");
        let written = std::fs::read(out.join(&name)).unwrap();
        let shipped = std::fs::read(repo().join(CHAKRA).join(&name)).unwrap();
        assert!(written == shipped, "{name} differs from a fresh conversion");
    }
}

#[test]
fn a_slower_link_exposes_more_communication_and_compute_stays_as_recorded() {
    let base = replay(&[]).summary.metrics;
    let slow = replay(&["topology.generator.link.bandwidth=50Mbps"])
        .summary
        .metrics;
    assert!((slow.compute_secs - base.compute_secs).abs() < 1e-9);
    // A 4x slower wire: the all-reduce, all of it exposed, takes more than 3x longer.
    assert!(
        slow.exposed_communication_secs > 3.0 * base.exposed_communication_secs,
        "{} vs {}",
        slow.exposed_communication_secs,
        base.exposed_communication_secs
    );
}

#[test]
fn a_trace_written_by_chakras_own_converter_reads() {
    let dir = scratch("trace", "chakra-upstream");
    let mut gz = flate2::read::GzDecoder::new(
        std::fs::File::open(repo().join("sim/tests/fixtures/chakra/chakra.0.et.gz")).unwrap(),
    );
    let mut bytes = Vec::new();
    gz.read_to_end(&mut bytes).unwrap();
    std::fs::write(dir.join("chakra.0.et"), &bytes).unwrap();
    let set = trace::load(&dir, None).unwrap();
    assert_eq!((set.format, set.ranks.len()), ("chakra", 1));
    let nodes = &set.ranks[0].nodes;
    assert_eq!(nodes.len(), 3664);
    let colls: Vec<u64> = nodes
        .iter()
        .filter_map(|n| match n.kind {
            NodeKind::Collective { bytes, .. } => Some(bytes),
            _ => None,
        })
        .collect();
    assert_eq!(colls.len(), 21);
    // The first broadcast: one fp32 tensor of 53,120 elements, from its inputs.
    let first = nodes
        .iter()
        .find(|n| n.name == "c10d::broadcast_(0)")
        .unwrap();
    assert!(matches!(
        first.kind,
        NodeKind::Collective { bytes: 212_480, .. }
    ));
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
    }
}

#[test]
fn a_truncated_chakra_file_is_an_error_naming_the_file_and_byte() {
    let dir = scratch("trace", "truncated");
    copy_dir(&repo().join(CHAKRA), &dir);
    let f = dir.join("testbed_ddp_cnn.1.et");
    let bytes = std::fs::read(&f).unwrap();
    std::fs::write(&f, &bytes[..bytes.len() - 10]).unwrap();
    let e = error_of(&["trace", "show", dir.to_str().unwrap()]);
    assert!(
        e.contains("testbed_ddp_cnn.1.et") && e.contains("node message at byte"),
        "{e}"
    );
    assert!(e.contains("truncated"), "{e}");
}

#[test]
fn execution_and_kineto_traces_of_different_steps_are_refused() {
    let dir = scratch("trace", "mismatch");
    copy_dir(&repo().join(PYTORCH), &dir);
    // Rank 1's Kineto file holds rank 0's step name but an operator list cut short.
    let k = std::fs::read_to_string(dir.join("rank1.kineto.json")).unwrap();
    let mut v: serde_json::Value = serde_json::from_str(&k).unwrap();
    let events = v.as_array_mut().unwrap();
    let i = events
        .iter()
        .position(|e| e["name"] == "Optimizer.step#SGD.step")
        .unwrap();
    events.remove(i);
    std::fs::write(dir.join("rank1.kineto.json"), v.to_string()).unwrap();
    let e = error_of(&["trace", "show", dir.to_str().unwrap()]);
    assert!(
        e.contains("rank1.kineto.json") && e.contains("top-level operator"),
        "{e}"
    );
    assert!(e.contains("Optimizer.step#SGD.step"), "{e}");
    std::fs::remove_file(dir.join("rank1.kineto.json")).unwrap();
    let e = error_of(&["trace", "show", dir.to_str().unwrap()]);
    assert!(
        e.contains("rank1.kineto.json") && e.contains("Kineto trace"),
        "{e}"
    );
}

#[test]
fn a_collective_on_a_process_group_the_trace_does_not_define_is_named() {
    let mut set = trace::load(&repo().join(PYTORCH), Some(Format::Pytorch)).unwrap();
    set.groups.insert("world".into(), vec![0, 1]);
    for r in &mut set.ranks {
        for n in &mut r.nodes {
            if let NodeKind::Collective { group, .. } = &mut n.kind {
                *group = Some("tp3".into());
            }
        }
    }
    let dir = scratch("trace", "pg");
    trace::chakra::write_dir(&set, &dir, "step").unwrap();
    let scenario = dir.join("s.toml");
    std::fs::write(
        &scenario,
        format!(
            "name = \"pg\"\n[topology]\nfile = \"{}\"\n[workload]\ntrace = \"{}\"\n",
            repo()
                .join("testbed/topologies/star4_200mbit.toml")
                .display(),
            dir.display()
        ),
    )
    .unwrap();
    let e = error_of(&["run", scenario.to_str().unwrap()]);
    assert!(
        e.contains("workload.trace") && e.contains("step.0.et"),
        "{e}"
    );
    assert!(
        e.contains("\"tp3\" is not one") && e.contains("world"),
        "{e}"
    );
}

#[test]
fn a_scenario_naming_a_model_and_a_trace_is_refused() {
    let e = error_of(&["run", SCENARIO, "--set", "workload.model=resnet50"]);
    assert!(
        e.contains("workload.model") && e.contains("exactly one of"),
        "{e}"
    );
}
