//! Every parser reachable from the `dtsim` and `calibrate` command lines, each with the bundled
//! files that seed its mutants, and what one case runs.
//!
//! A case passes when the parser returns (a value or an error); the harness counts a panic, and
//! the allocator in [`crate::alloc`] stops the process on an allocation no input should need.
//! Parsers that read a path get the mutant written to a scratch file first. Scenario cases are
//! parsed and prepared (topology generated, profile read, ranks placed) but not simulated: the
//! simulations are fuzzed through the corpus with an event budget (see `tests/fuzz.rs`).

use std::path::{Path, PathBuf};

/// One parser (or parse-and-prepare path) under test.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Target {
    Scenario,
    Topology,
    Profile,
    ModelFile,
    SweepState,
    NcclTestsText,
    NcclTestsJson,
    Kineto,
    Iperf3,
    P2pMatrix,
    TorchDevice,
    LayerTimes,
    ValidationCsv,
    TestbedDataset,
    NcclTopoXml,
    NvidiaSmiTopo,
    PytorchTrace,
}

impl Target {
    pub const ALL: [Target; 17] = [
        Target::Scenario,
        Target::Topology,
        Target::Profile,
        Target::ModelFile,
        Target::SweepState,
        Target::NcclTestsText,
        Target::NcclTestsJson,
        Target::Kineto,
        Target::Iperf3,
        Target::P2pMatrix,
        Target::TorchDevice,
        Target::LayerTimes,
        Target::ValidationCsv,
        Target::TestbedDataset,
        Target::NcclTopoXml,
        Target::NvidiaSmiTopo,
        Target::PytorchTrace,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Target::Scenario => "scenario",
            Target::Topology => "topology",
            Target::Profile => "profile",
            Target::ModelFile => "model_file",
            Target::SweepState => "sweep_state",
            Target::NcclTestsText => "nccl_tests_text",
            Target::NcclTestsJson => "nccl_tests_json",
            Target::Kineto => "kineto",
            Target::Iperf3 => "iperf3",
            Target::P2pMatrix => "p2p_matrix",
            Target::TorchDevice => "torch_device",
            Target::LayerTimes => "layer_times",
            Target::ValidationCsv => "validation_csv",
            Target::TestbedDataset => "testbed_dataset",
            Target::NcclTopoXml => "nccl_topo_xml",
            Target::NvidiaSmiTopo => "nvidia_smi_topo",
            Target::PytorchTrace => "pytorch_trace",
        }
    }

    pub fn by_name(name: &str) -> Option<Target> {
        Target::ALL.into_iter().find(|t| t.name() == name)
    }

    /// The bundled files this target's mutants start from, relative to the repository root.
    /// Scenario seeds are read in place, so their relative topology and profile paths resolve.
    pub fn seed_paths(self, repo: &Path) -> Vec<PathBuf> {
        let list = |dir: &str, ext: &str| -> Vec<PathBuf> {
            let mut v: Vec<PathBuf> = std::fs::read_dir(repo.join(dir))
                .map(|rd| {
                    rd.filter_map(|e| e.ok().map(|e| e.path()))
                        .filter(|p| p.extension().is_some_and(|x| x == ext))
                        .collect()
                })
                .unwrap_or_default();
            v.sort();
            v
        };
        let files =
            |names: &[&str]| -> Vec<PathBuf> { names.iter().map(|n| repo.join(n)).collect() };
        match self {
            Target::Scenario => list("scenarios", "toml"),
            Target::Topology => list("topologies", "toml")
                .into_iter()
                .chain(list("testbed/topologies", "toml"))
                .collect(),
            Target::Profile => list("data/profiles", "json"),
            Target::ModelFile => list("data/runs/models", "toml"),
            Target::SweepState => files(&["fuzz/seeds/sweep.json", "fuzz/seeds/summary.json"]),
            Target::NcclTestsText => files(&[
                "calibrate/tests/fixtures/nccl_tests_multinode.txt",
                "calibrate/tests/fixtures/nccl_tests_old.txt",
                "calibrate/tests/fixtures/nccl_tests_truncated.txt",
            ]),
            Target::NcclTestsJson => files(&["calibrate/tests/fixtures/nccl_tests_report.json"]),
            Target::Kineto => files(&["calibrate/tests/fixtures/kineto_trace.json"]),
            Target::Iperf3 => files(&[
                "calibrate/tests/fixtures/iperf3_tcp.json",
                "calibrate/tests/fixtures/iperf3_error.json",
                "data/runs/calibration/testbed_star4_200mbit.iperf3_P4.json",
            ]),
            Target::P2pMatrix => files(&["calibrate/tests/fixtures/nvbandwidth.txt"]),
            Target::TorchDevice => files(&["data/runs/compute/epyc_2vcpu/device.json"]),
            Target::LayerTimes => files(&["data/runs/compute/epyc_2vcpu/layer_times.csv"]),
            // The shared tables live beside the repository; CI checkouts may lack them, so the
            // transcriptions bundled for validate's tests come first.
            Target::ValidationCsv => list("fuzz/seeds", "csv")
                .into_iter()
                .chain(list("../shared/validation", "csv"))
                .collect(),
            Target::NcclTopoXml => files(&["data/machines/ibm_gx3d_8xh100_nccl_topo.xml"]),
            Target::NvidiaSmiTopo => files(&["data/machines/a100x8_epyc7742_nvidia_smi_topo.txt"]),
            Target::PytorchTrace => files(&["data/traces/testbed_ddp_cnn/rank0.et.json"]),
            Target::TestbedDataset => files(&[
                "data/runs/testbed_gloo_collectives.csv",
                "data/runs/testbed_mpi_allreduce.csv",
                "data/runs/testbed_training.csv",
            ]),
        }
    }

    /// Runs one case: `text` as this target's input, `seed` the file it was mutated from,
    /// `scratch` a private folder for parsers that read paths. `Err` is a clean refusal.
    pub fn check(self, text: &str, seed: &Path, scratch: &Path) -> Result<(), String> {
        let s = |e: &dyn std::fmt::Display| e.to_string();
        let file = |name: &str| -> Result<PathBuf, String> {
            let p = scratch.join(name);
            std::fs::write(&p, text).map_err(|e| s(&e))?;
            Ok(p)
        };
        match self {
            Target::Scenario => {
                let sc = sim::scenario::parse(text, seed, &[]).map_err(|e| s(&e))?;
                sim::scenario::run::prepare(&sc).map_err(|e| s(&e))?;
                Ok(())
            }
            Target::Topology => {
                sim::topology::file::parse_str(text, "fuzz.toml").map_err(|e| s(&e))?;
                Ok(())
            }
            // Imported, then built from the written file, as `dtsim topo import` does.
            Target::NcclTopoXml | Target::NvidiaSmiTopo => {
                use sim::topology::import;
                let opts = import::ImportOptions {
                    format: Some(if self == Target::NcclTopoXml {
                        import::Format::NcclXml
                    } else {
                        import::Format::NvidiaSmi
                    }),
                    gpu: (self == Target::NvidiaSmiTopo).then(|| "A100-SXM4".to_string()),
                    ..Default::default()
                };
                let node = import::import(text, "fuzz.txt", &opts).map_err(|e| s(&e))?;
                node.topology().map_err(|e| s(&e))?;
                Ok(())
            }
            Target::PytorchTrace => {
                // The mutant is rank 0's execution trace beside the seed's own Kineto trace,
                // replayed on a uniform fabric.
                use sim::workload::{step, trace};
                let dir = scratch.join("trace");
                std::fs::create_dir_all(&dir).map_err(|e| s(&e))?;
                std::fs::write(dir.join("rank0.et.json"), text).map_err(|e| s(&e))?;
                let kineto = seed.with_file_name("rank0.kineto.json");
                std::fs::copy(kineto, dir.join("rank0.kineto.json")).map_err(|e| s(&e))?;
                let set = trace::load(&dir, Some(trace::Format::Pytorch)).map_err(|e| s(&e))?;
                let cfg = step::StepConfig::data_parallel(1, step::DpMethod::Ddp);
                trace::build(&set, &cfg, &Uniform, &step::Templates).map_err(|e| s(&e))?;
                Ok(())
            }
            Target::Profile => {
                sim::profile::Profile::parse(text, "fuzz.json").map_err(|e| s(&e))?;
                Ok(())
            }
            Target::ModelFile => {
                sim::workload::catalog::parse_model_file(text, "fuzz.toml").map_err(|e| s(&e))?;
                Ok(())
            }
            Target::SweepState => {
                // The mutant plays the manifest or a point's summary (by its seed's name); the
                // other file is the bundled seed.
                let dir = scratch.join("sweep");
                let _ = std::fs::remove_dir_all(&dir);
                let point = dir.join("points/00000-0000000000000000");
                std::fs::create_dir_all(&point).map_err(|e| s(&e))?;
                let seeds = seed.parent().unwrap_or(Path::new("."));
                let (manifest, summary) = if seed.ends_with("sweep.json") {
                    (
                        text.to_string(),
                        std::fs::read_to_string(seeds.join("summary.json")).map_err(|e| s(&e))?,
                    )
                } else {
                    (
                        std::fs::read_to_string(seeds.join("sweep.json")).map_err(|e| s(&e))?,
                        text.to_string(),
                    )
                };
                std::fs::write(dir.join("sweep.json"), manifest).map_err(|e| s(&e))?;
                std::fs::write(point.join("summary.json"), summary).map_err(|e| s(&e))?;
                let m = sim::scenario::sweep::merge(&[dir]).map_err(|e| format!("{e:#}"))?;
                let _ = sim::scenario::sweep::results_csv(&m);
                Ok(())
            }
            Target::NcclTestsText => {
                calibrate::import::nccl_tests::parse_text(text, "fuzz.txt").map_err(|e| s(&e))?;
                Ok(())
            }
            Target::NcclTestsJson => {
                calibrate::import::nccl_tests::parse_json(text, "fuzz.json").map_err(|e| s(&e))?;
                Ok(())
            }
            Target::Kineto => {
                calibrate::import::kineto::parse(text, "fuzz.json").map_err(|e| s(&e))?;
                Ok(())
            }
            Target::Iperf3 => {
                calibrate::import::iperf3::parse(text, "fuzz.json").map_err(|e| s(&e))?;
                Ok(())
            }
            Target::P2pMatrix => {
                calibrate::import::p2p::parse(text, "fuzz.txt").map_err(|e| s(&e))?;
                Ok(())
            }
            Target::TorchDevice => {
                calibrate::import::torch_device::parse(text, "fuzz.json").map_err(|e| s(&e))?;
                Ok(())
            }
            Target::LayerTimes => {
                calibrate::import::layer_times::load(&file("layer_times.csv")?)
                    .map_err(|e| s(&e))?;
                Ok(())
            }
            Target::ValidationCsv => {
                let p = file("validation.csv")?;
                calibrate::import::validation_csv::load(&p).map_err(|e| s(&e))?;
                let rows = sim::validate::read_csv(&p)?;
                if let Some(system) = rows.first().and_then(|r| r.get("system")) {
                    use sim::collective::Collective;
                    for op in [Collective::AllReduce, Collective::Broadcast] {
                        sim::validate::nccl::measured_us(&p, system, op)?;
                    }
                }
                Ok(())
            }
            Target::TestbedDataset => {
                sim::validate::read_csv(&file("testbed.csv")?)?;
                Ok(())
            }
        }
    }
}

/// Every pair of ranks joined at 100 Gbit/s, each rank its own node (trace replays).
struct Uniform;

impl sim::collective::Fabric for Uniform {
    fn bottleneck_bps(&self, _: u32, _: u32) -> f64 {
        100e9
    }
    fn node_of(&self, rank: u32) -> u32 {
        rank
    }
}
