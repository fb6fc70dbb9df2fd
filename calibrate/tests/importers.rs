//! Importers on the real published tables in shared/validation (written back out in the
//! tools' own formats) and on hand-written fixtures in the real layouts.

use std::path::PathBuf;

use calibrate::build::{fit_run, FitOptions};
use calibrate::fit::Holdout;
use calibrate::import::{iperf3, kineto, nccl_tests, p2p, validation_csv};

/// shared/validation next to the repository (or inside it); `$DTSIM_VALIDATION_DIR` wins.
fn validation(name: &str) -> PathBuf {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut dirs: Vec<PathBuf> = std::env::var("DTSIM_VALIDATION_DIR")
        .into_iter()
        .map(PathBuf::from)
        .collect();
    dirs.extend(
        [
            "shared/validation",
            "../shared/validation",
            "../../shared/validation",
        ]
        .map(|d| root.join(d)),
    );
    let dir = dirs
        .iter()
        .find(|d| d.join(name).exists())
        .cloned()
        .unwrap_or_else(|| dirs[0].clone());
    dir.join(name)
}
fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}
fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 0.006 + 1e-4 * a.abs()
}

/// Real tables live outside the repository (shared/validation); skip quietly where absent.
fn real(name: &str) -> Option<Vec<validation_csv::CsvRun>> {
    let p = validation(name);
    if !p.exists() {
        eprintln!("skipped: {name} not found (set DTSIM_VALIDATION_DIR to shared/validation)");
        return None;
    }
    Some(validation_csv::load(&p).unwrap())
}

#[test]
fn real_nccl_tests_tables_survive_a_round_trip_through_the_nccl_tests_text_format() {
    for name in [
        "azure_nd_single_node_allreduce.csv",
        "gcp_a3mega_2node_h100_allreduce.csv",
        "autodl_2x2080ti_pcie_noP2P_nccl.csv",
    ] {
        let Some(runs) = real(name) else { continue };
        assert!(!runs.is_empty());
        for r in runs {
            let text = nccl_tests::to_text(&r.run);
            let back =
                nccl_tests::parse_text(&text, name).unwrap_or_else(|e| panic!("{e}\n{text}"));
            assert_eq!(back.collective, r.run.collective);
            assert_eq!(back.ranks(), r.run.ranks());
            assert_eq!(back.hosts(), r.run.hosts());
            assert_eq!(back.rows.len(), r.run.rows.len(), "{name} {}", r.system);
            for (a, b) in r.run.rows.iter().zip(&back.rows) {
                assert_eq!(
                    (a.size_bytes, a.count, &a.dtype, &a.redop, a.root),
                    (b.size_bytes, b.count, &b.dtype, &b.redop, b.root)
                );
                for (x, y) in [(a.in_place, b.in_place), (a.out_of_place, b.out_of_place)] {
                    assert_eq!(x.is_some(), y.is_some());
                    if let (Some(x), Some(y)) = (x, y) {
                        assert!(
                            close(x.time_us, y.time_us)
                                && close(x.algbw_gbps, y.algbw_gbps)
                                && close(x.busbw_gbps, y.busbw_gbps),
                            "{name} {} {}: {x:?} vs {y:?}",
                            r.system,
                            a.size_bytes
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn the_gcp_two_node_table_matches_its_csv_rows_exactly() {
    let Some(runs) = real("gcp_a3mega_2node_h100_allreduce.csv") else {
        return;
    };
    let r = &runs[0];
    assert_eq!(
        (r.run.ranks(), r.run.hosts().len(), r.run.rows.len()),
        (Some(16), 2, 31)
    );
    let last = r.run.rows.last().unwrap();
    assert_eq!(last.size_bytes, 8589934592);
    let back = nccl_tests::parse_text(&nccl_tests::to_text(&r.run), "x").unwrap();
    let b = back.rows.last().unwrap();
    assert_eq!(
        (
            b.out_of_place.unwrap().time_us,
            b.out_of_place.unwrap().busbw_gbps,
            b.in_place.unwrap().busbw_gbps
        ),
        (47535.0, 338.82, 337.35)
    );
}

/// The fit error on held-back sizes of each shared table; printed for the report.
#[test]
fn fits_of_the_shared_tables_predict_held_back_sizes() {
    for (name, class) in [
        ("azure_nd_single_node_allreduce.csv", "nvlink"),
        ("gcp_a3mega_2node_h100_allreduce.csv", "ethernet"),
        ("autodl_2x2080ti_pcie_noP2P_nccl.csv", "pcie"),
    ] {
        let Some(runs) = real(name) else { continue };
        for r in runs {
            for (rule, h, min) in [
                ("every:3", Holdout::EveryKth(3), 0u64),
                ("every:3 >=1MiB", Holdout::EveryKth(3), 1 << 20),
                ("above:256MiB", Holdout::Above(256 << 20), 0),
            ] {
                let o = FitOptions {
                    link_class: sim::topology::LinkClass::ALL
                        .into_iter()
                        .find(|c| c.as_str() == class),
                    holdout: Some((h, rule.into())),
                    min_bytes: min,
                    ..Default::default()
                };
                let f = fit_run(&r.run, name, &o).unwrap();
                let ho = f.holdout.unwrap();
                println!(
                    "{name} | {} | {} | {rule} | alpha {:.1} us | busbw {:.1} GB/s | R2 {:.3} | fit max res {:.1}% | hold-out {} pts mean {:.1}% max {:.1}%",
                    r.system, f.fit.collective, f.fit.alpha_secs * 1e6, f.fit.busbw_bytes_per_s / 1e9, f.fit.r_squared, f.fit.max_rel_residual * 100.0, ho.held_back.len(), ho.mean_abs_rel_error * 100.0, ho.max_abs_rel_error * 100.0
                );
                assert!(ho.held_back.len() >= 2);
                assert!(ho.mean_abs_rel_error.is_finite());
                // Interpolating between measured sizes works; extrapolating a line past the
                // sizes it saw (above:) is reported, not bounded.
                if rule.starts_with("every") {
                    assert!(
                        ho.mean_abs_rel_error < 0.3,
                        "{name} {} {rule}: {}",
                        r.system,
                        ho.mean_abs_rel_error
                    );
                }
            }
        }
    }
}

#[test]
fn a_multi_node_log_gives_ranks_hosts_collective_and_na_wrong_counts() {
    let r = nccl_tests::load(&fixture("nccl_tests_multinode.txt")).unwrap();
    assert_eq!(r.collective.as_deref(), Some("all_gather"));
    assert_eq!(r.nccl_version.as_deref(), Some("2.19.3"));
    assert_eq!(
        (r.ranks(), r.hosts()),
        (Some(4), vec!["node-a".to_string(), "node-b".to_string()])
    );
    assert_eq!(r.devices[2].name, "NVIDIA H100 80GB HBM3");
    assert_eq!(r.rows.len(), 6);
    assert_eq!(r.rows[5].in_place.unwrap().wrong, None);
    assert_eq!(r.rows[5].out_of_place.unwrap().time_us, 120.0);
    assert_eq!(r.avg_busbw_gbps, Some(2.3285));
    // Two hosts: the link class must be given.
    let e = fit_run(&r, "log", &FitOptions::default()).unwrap_err();
    assert!(e.contains("--link-class"), "{e}");
}

#[test]
fn the_old_layout_without_root_and_with_error_columns_is_read() {
    let r = nccl_tests::load(&fixture("nccl_tests_old.txt")).unwrap();
    assert_eq!(r.collective, None, "the old log does not name its program");
    assert_eq!(r.nccl_version.as_deref(), Some("2.4.8"));
    assert_eq!((r.ranks(), r.rows.len()), (Some(4), 6));
    let row = &r.rows[4];
    assert_eq!(
        (
            row.size_bytes,
            row.root,
            row.out_of_place.unwrap().time_us,
            row.in_place.unwrap().busbw_gbps
        ),
        (32768, -1, 28.77, 1.72)
    );
    assert_eq!(row.in_place.unwrap().wrong, Some(0.0));
}

#[test]
fn the_json_report_is_read_with_its_collective_version_and_devices() {
    let r = nccl_tests::load(&fixture("nccl_tests_report.json")).unwrap();
    assert_eq!(r.collective.as_deref(), Some("reduce_scatter"));
    assert_eq!(r.nccl_version.as_deref(), Some("2.27.3"));
    assert_eq!((r.ranks(), r.rows.len()), (Some(2), 4));
    assert_eq!(r.rows[1].in_place.unwrap().wrong, None);
    assert_eq!(r.rows[3].out_of_place.unwrap().time_us, 18.0);
    assert_eq!(r.avg_busbw_gbps, Some(0.692));
}

#[test]
fn broken_and_truncated_logs_name_file_line_and_expectation() {
    let e = nccl_tests::load(&fixture("nccl_tests_truncated.txt")).unwrap_err();
    assert_eq!(e.line, Some(17), "{e}");
    let msg = e.to_string();
    assert!(
        msg.contains("nccl_tests_truncated.txt:17: expected") && msg.contains("columns"),
        "{msg}"
    );
    let e = nccl_tests::parse_text("hello\nworld\n", "x.log").unwrap_err();
    assert!(e.to_string().contains("column header"), "{e}");
    let head: String = std::fs::read_to_string(fixture("nccl_tests_multinode.txt"))
        .unwrap()
        .lines()
        .take(13)
        .map(|l| format!("{l}\n"))
        .collect();
    let e = nccl_tests::parse_text(&head, "cut.log").unwrap_err();
    assert!(e.to_string().contains("result rows"), "{e}");
    let bad = std::fs::read_to_string(fixture("nccl_tests_multinode.txt"))
        .unwrap()
        .replace("    20.50", "    2o.50");
    let e = nccl_tests::parse_text(&bad, "bad.log").unwrap_err();
    assert_eq!(e.line, Some(15));
    assert!(e.to_string().contains("time (us) as a number"), "{e}");
    let json = std::fs::read_to_string(fixture("nccl_tests_report.json")).unwrap();
    let e = nccl_tests::parse_json(&json[..json.len() / 2], "cut.json").unwrap_err();
    assert!(
        e.to_string()
            .starts_with("cut.json:1: expected nccl-tests JSON"),
        "{e}"
    );
}

#[test]
fn kineto_traces_give_steps_kernels_layers_and_nccl_sizes() {
    let s = kineto::load(&fixture("kineto_trace.json")).unwrap();
    assert_eq!(s.steps.len(), 1);
    assert_eq!(s.steps[0].number, 4);
    assert!((s.steps[0].cpu_secs - 900e-6).abs() < 1e-12);
    // The forward conv kernel was launched on the step's thread; the backward conv and the
    // gradient all-reduce on autograd's, while the step was open: all three are the step's
    // (the all-gather's launch is not in the trace).
    assert!((s.steps[0].gpu_kernel_secs - 620e-6).abs() < 1e-12);
    let layer = |n: &str| {
        s.layers
            .iter()
            .find(|l| l.name == n)
            .map(|l| l.total_secs)
            .unwrap_or(f64::NAN)
    };
    assert!((layer("nn.Module: Conv2d_0") - 120e-6).abs() < 1e-12);
    assert!(
        (layer("autograd::engine::evaluate_function: ConvolutionBackward0") - 200e-6).abs() < 1e-12
    );
    assert_eq!(
        s.kernels[0].name,
        "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"
    );
    let ar = &s.collectives[0];
    assert_eq!(
        (
            ar.collective.as_str(),
            ar.bytes,
            ar.group.as_deref(),
            ar.group_size
        ),
        ("all_reduce", Some(2359296 * 4), Some("0"), Some(8))
    );
    let ag = &s.collectives[1];
    assert_eq!(
        (ag.collective.as_str(), ag.bytes, ag.group_size),
        ("all_gather", Some(2048), Some(2))
    );
}

#[test]
fn gzipped_and_truncated_kineto_traces() {
    use std::io::Write as _;
    let dir = std::env::temp_dir().join(format!("calibrate-kineto-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let text = std::fs::read(fixture("kineto_trace.json")).unwrap();
    let gz = dir.join("trace.json.gz");
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    enc.write_all(&text).unwrap();
    std::fs::write(&gz, enc.finish().unwrap()).unwrap();
    assert_eq!(
        kineto::load(&gz).unwrap(),
        kineto::load(&fixture("kineto_trace.json")).unwrap()
    );
    let cut = dir.join("cut.json");
    std::fs::write(&cut, &text[..text.len() * 2 / 3]).unwrap();
    let e = kineto::load(&cut).unwrap_err();
    assert!(e.line.is_some_and(|l| l > 5), "{e}");
    assert!(e.to_string().contains("Chrome trace"), "{e}");
    let e = kineto::parse(r#"{"traceEvents": []}"#, "empty.json").unwrap_err();
    assert!(e.to_string().contains("ProfilerActivity.CUDA"), "{e}");
    std::fs::remove_dir_all(&dir).ok();
}

/// p2pBandwidthLatencyTest's printf layout (NVIDIA/cuda-samples p2pBandwidthLatencyTest.cu).
fn p2p_text(title: &str, label: &str, m: &[Vec<f64>]) -> String {
    let mut s = format!("{title}\n   {label}");
    for j in 0..m.len() {
        s += &format!("{j:>6} ");
    }
    s += "\n";
    for (i, row) in m.iter().enumerate() {
        s += &format!("{i:>6} ");
        for v in row {
            s += &format!("{v:>6.2} ");
        }
        s += "\n";
    }
    s
}

fn csv_matrix(system_prefix: &str, metric: &str) -> Option<Vec<Vec<f64>>> {
    let p = validation("p2p_bandwidth_matrices.csv");
    let text = std::fs::read_to_string(p).ok()?;
    let recs = validation_csv::records(&text);
    let h = &recs[0].1;
    let c = |n: &str| h.iter().position(|x| x == n).unwrap();
    let rows: Vec<&Vec<String>> = recs
        .iter()
        .skip(1)
        .map(|r| &r.1)
        .filter(|r| {
            r.len() == h.len()
                && r[c("system")].starts_with(system_prefix)
                && r[c("direction_or_metric")] == metric
        })
        .collect();
    let n = rows
        .iter()
        .map(|r| {
            r[c("src_gpu")]
                .parse::<usize>()
                .unwrap()
                .max(r[c("dst_gpu")].parse().unwrap())
        })
        .max()?
        + 1;
    let mut m = vec![vec![0.0; n]; n];
    for r in rows {
        m[r[c("src_gpu")].parse::<usize>().unwrap()][r[c("dst_gpu")].parse::<usize>().unwrap()] =
            r[c("value")].parse().unwrap();
    }
    Some(m)
}

#[test]
fn real_p2p_matrices_round_trip_through_the_p2p_bandwidth_latency_test_layout() {
    let Some(uni) = csv_matrix("AutoDL", "unidirectional, P2P disabled") else {
        return;
    };
    let bi = csv_matrix("AutoDL", "bidirectional, P2P disabled").unwrap();
    let lat = csv_matrix("AutoDL", "latency, P2P disabled (GPU row)").unwrap();
    let cpu = csv_matrix("AutoDL", "latency, P2P disabled (CPU row)").unwrap();
    let text = format!(
        "[P2P (Peer-to-Peer) GPU Bandwidth Latency Test]\nDevice: 0, NVIDIA GeForce RTX 2080 Ti, pciBusID: 3d, pciDeviceID: 0, pciDomainID:0\n{}{}{}\n{}",
        p2p_text("Unidirectional P2P=Disabled Bandwidth Matrix (GB/s)", "D\\D", &uni),
        p2p_text("Bidirectional P2P=Disabled Bandwidth Matrix (GB/s)", "D\\D", &bi),
        p2p_text("P2P=Disabled Latency Matrix (us)", "GPU", &lat),
        p2p_text("", "CPU", &cpu)
    );
    let ms = p2p::parse(&text, "p2p.txt").unwrap();
    assert_eq!(ms.len(), 4);
    for (m, want) in ms.iter().zip([&uni, &bi, &lat, &cpu]) {
        for (i, row) in want.iter().enumerate() {
            for (j, v) in row.iter().enumerate() {
                assert!(close(m.values[i][j].unwrap(), *v), "{} [{i}][{j}]", m.title);
            }
        }
    }
    assert!(ms[1].is_bidirectional() && !ms[0].is_bidirectional());
    assert!(ms[2].is_latency() && ms[3].is_latency() && ms[3].title.ends_with("(CPU)"));
    // The 8-GPU V100 matrix (GPUInspector) in the same layout: NVLink pairs stand out.
    let v100 = csv_matrix("Univ. Bielefeld", "unidirectional").unwrap();
    let m = &p2p::parse(
        &p2p_text(
            "Unidirectional P2P=Enabled Bandwidth (P2P Writes) Matrix (GB/s)",
            "D\\D",
            &v100,
        ),
        "v100",
    )
    .unwrap()[0];
    assert_eq!(m.values.len(), 8);
    assert!(close(m.values[0][2].unwrap(), 45.0071));
}

#[test]
fn nvbandwidth_matrices_and_cut_matrices() {
    let ms = p2p::load(&fixture("nvbandwidth.txt")).unwrap();
    assert_eq!(ms.len(), 2);
    assert_eq!(ms[0].values[0][0], None);
    assert_eq!(ms[0].values[1][2], Some(390.0));
    assert!(ms[1].is_bidirectional() && !ms[0].is_bidirectional());
    assert!((ms[0].off_diagonal_mean().unwrap() - 390.05).abs() < 1e-9);
    let text = std::fs::read_to_string(fixture("nvbandwidth.txt")).unwrap();
    let cut: String = text.lines().take(19).map(|l| format!("{l}\n")).collect();
    let e = p2p::parse(&cut, "cut.txt").unwrap_err();
    assert_eq!(e.line, Some(20), "{e}");
    assert!(e.to_string().contains("row 2 of the 3x3 matrix"), "{e}");
}

#[test]
fn iperf3_reports_and_iperf3_errors() {
    let r = iperf3::load(&fixture("iperf3_tcp.json")).unwrap();
    assert_eq!(
        (r.protocol.as_str(), r.streams, r.remote_host.as_deref()),
        ("TCP", 4, Some("10.0.0.1"))
    );
    assert_eq!(
        (r.sent_bits_per_s, r.received_bits_per_s, r.retransmits),
        (94e9, 93.8e9, Some(4))
    );
    assert_eq!(r.interval_bits_per_s, vec![94e9, 95e9, 93e9]);
    let e = iperf3::load(&fixture("iperf3_error.json")).unwrap_err();
    assert!(e.to_string().contains("Connection refused"), "{e}");
    let e = iperf3::parse("{\"start\": {", "x.json").unwrap_err();
    assert_eq!(e.line, Some(1));
}

/// `dtsim nccl-tests --format nccl-tests`: a predicted sweep printed in nccl-tests' layout
/// parses back with the nccl-tests importer, row for row, and its columns line up under the
/// header as nccl-tests prints them.
#[test]
fn a_predicted_sweep_in_nccl_tests_layout_reads_back_and_lines_up() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let s = sim::scenario::load(&root.join("scenarios/hgx_h100_allreduce.toml"), &[]).unwrap();
    let range = sim::scenario::size_sweep::Range {
        min_bytes: 8,
        max_bytes: 1 << 30,
        factor: 8,
    };
    let prep = sim::scenario::run::prepare(&s).unwrap();
    let points = sim::scenario::size_sweep::run_on(&s, &prep, &range).unwrap();
    let run = sim::scenario::size_sweep::nccl_tests_run(&s, &prep, &points).unwrap();
    let text = nccl_tests::to_text(&run);
    let back = nccl_tests::parse_text(&text, "predicted.txt").unwrap();
    assert_eq!(back.collective.as_deref(), Some("all_reduce"));
    assert_eq!(back.ranks(), Some(8));
    assert_eq!(back.rows.len(), points.len());
    assert!(text.contains("step: 8(factor)"), "{text}");
    for (r, p) in back.rows.iter().zip(&points) {
        assert_eq!(r.size_bytes, p.bytes);
        let t = r.in_place.unwrap();
        // nccl-tests prints two decimals at most: the time comes back to within 0.005 us
        // (or its 4-significant-digit rounding for large times).
        assert!(
            (t.time_us - p.time_us).abs() <= 0.005 + 5e-4 * p.time_us,
            "{} B: {} vs {}",
            p.bytes,
            t.time_us,
            p.time_us
        );
        assert_eq!(r.out_of_place.unwrap().time_us, t.time_us);
    }
    // Every value ends in the column where its header label ends.
    let lines: Vec<&str> = text.lines().collect();
    let header = lines
        .iter()
        .find(|l| l.contains("size") && l.contains("count") && l.contains("#wrong"))
        .unwrap();
    let ends = |l: &str| -> Vec<usize> {
        l.char_indices()
            .filter(|&(i, c)| {
                c != ' ' && c != '#' && !l[i + c.len_utf8()..].starts_with(|n: char| n != ' ')
            })
            .map(|(i, _)| i)
            .collect()
    };
    let label_ends = ends(header);
    for row in lines.iter().filter(|l| !l.starts_with('#')) {
        assert_eq!(ends(row), label_ends, "\n{header}\n{row}");
    }
    assert_eq!(label_ends.len(), 13, "{header}");
}

#[test]
fn the_testbed_profiles_host_cpu_is_the_fit_of_the_log_their_provenance_names() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let log = calibrate::import::cpu_costs::load(
        &root.join("data/runs/calibration/testbed_star4_200mbit.cpu_costs.json"),
    )
    .unwrap();
    let fit = calibrate::import::cpu_costs::fit(&log);
    for name in [
        "testbed_star4_200mbit",
        "testbed_two_level_2to1",
        "testbed_three_leaf_100mbit_uplinks",
    ] {
        let path = root.join(format!("data/profiles/{name}.json"));
        let p = sim::profile::Profile::load(&path).unwrap();
        let h = p
            .network
            .host_cpu
            .as_ref()
            .expect("the testbed profiles carry host_cpu");
        assert!(h.provenance.detail.contains(
            "calibrate import cpu-costs data/runs/calibration/testbed_star4_200mbit.cpu_costs.json"
        ));
        assert_eq!(h.shared_cores, f64::from(log.cpus), "{name}");
        let per_message = h.per_message.0.as_secs_f64();
        assert!(
            (per_message - fit.per_message_secs).abs() < 1e-12,
            "{name}: {per_message}"
        );
        assert!(
            (h.per_byte_ns * 1e-9 - fit.per_byte_secs).abs() < 1e-18,
            "{name}"
        );
    }
}

#[test]
fn the_testbed_profiles_cost_a_collectives_message_as_their_own_logs_fit_it() {
    // gloo's all-reduces run back to back on 4, 6 and 8 hosts of the star: the fit of their
    // core time per payload message is what every testbed profile with host costs carries in
    // network.host_cpu.in_collectives, and it is below the isend/irecv stream's, message for
    // message (no python per message).
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let logs: Vec<_> = [4, 6, 8]
        .iter()
        .map(|n| {
            calibrate::import::cpu_costs::load_collectives(&root.join(format!(
                "data/runs/calibration/testbed_star4_200mbit.cpu_costs_all_reduce_{n}hosts.json"
            )))
            .unwrap()
        })
        .collect();
    let fit = calibrate::import::cpu_costs::fit_collectives(&logs).unwrap();
    for name in ["testbed_star4_200mbit", "testbed_three_leaf_200mbit"] {
        let p =
            sim::profile::Profile::load(&root.join(format!("data/profiles/{name}.json"))).unwrap();
        let h = p.network.host_cpu.as_ref().unwrap();
        let c = h.in_collectives.as_ref().expect("in_collectives");
        assert!(c
            .provenance
            .detail
            .contains("calibrate import collective-cpu-costs"));
        assert!((c.per_message.0.as_secs_f64() - fit.per_message_secs).abs() < 1e-12);
        assert!((c.per_byte_ns * 1e-9 - fit.per_byte_secs).abs() < 1e-18);
        for bytes in [4096.0, 65536.0, 1048576.0] {
            let stream = h.per_message.0.as_secs_f64() + h.per_byte_ns * 1e-9 * bytes;
            let inside = fit.per_message_secs + fit.per_byte_secs * bytes;
            assert!(
                inside < stream,
                "{name}: {bytes} B {inside} against {stream}"
            );
        }
    }
}

#[test]
fn the_testbed_profiles_carry_the_shaper_bucket_fitted_from_their_own_logs() {
    // Each topology's suite.py shaper_gap log, fitted by `calibrate import shaper`, is what its
    // profiles say, and the fit finds the shaper's setting (2 ms) within 1.1%.
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    for (topology, profiles) in [
        (
            "star4_200mbit",
            &[
                "testbed_star4_200mbit",
                "testbed_star4_200mbit_ddp",
                "testbed_star4_200mbit_allreduce_after_backward",
                "testbed_star4_200mbit_parameter_server",
            ][..],
        ),
        ("two_level_2to1", &["testbed_two_level_2to1"][..]),
        (
            "three_leaf_100mbit_uplinks",
            &["testbed_three_leaf_100mbit_uplinks"][..],
        ),
        ("two_leaf_150mbit", &["testbed_two_leaf_150mbit"][..]),
    ] {
        let log = root.join(format!(
            "data/runs/calibration/testbed_{topology}.shaper_gap.json"
        ));
        let fit = calibrate::import::shaper::fit(&calibrate::import::shaper::load(&log).unwrap())
            .unwrap();
        let secs = fit.depth_bytes / fit.rate_bytes_per_s;
        assert!((secs / 2e-3 - 1.0).abs() < 0.011, "{topology}: {secs}");
        for name in profiles {
            let p = sim::profile::Profile::load(&root.join(format!("data/profiles/{name}.json")))
                .unwrap();
            let b = &p.network.shaper_burst[&sim::topology::LinkClass::Ethernet];
            assert_eq!(b.provenance.source, "measured", "{name}");
            assert!(
                (b.value.0.as_secs_f64() - secs).abs() < 1e-9,
                "{name}: {:?} against {secs}",
                b.value
            );
        }
    }
}
