//! `dtsim topo import`: a node measured in the field becomes a topology file, the same node as
//! the bundled hand-written one, and the building block of a cluster.

mod common;

use std::path::Path;

use common::{dtsim, repo, scratch};
use sim::topology::file as topology_file;
use sim::topology::import::{self, Format, ImportOptions};
use sim::topology::routing::Router;
use sim::topology::{DeviceKind, LinkClass, Topology};

const IBM_H100_XML: &str = "data/machines/ibm_gx3d_8xh100_nccl_topo.xml";
const A100_SMI: &str = "data/machines/a100x8_epyc7742_nvidia_smi_topo.txt";

fn read(rel: &str) -> String {
    std::fs::read_to_string(repo().join(rel)).unwrap()
}

fn import_file(rel: &str, gpu: Option<&str>) -> import::NodeFile {
    let opts = ImportOptions {
        gpu: gpu.map(str::to_string),
        ..Default::default()
    };
    import::import(&read(rel), rel, &opts).unwrap()
}

fn count(t: &Topology, kind: DeviceKind) -> usize {
    t.devices().iter().filter(|d| d.kind == kind).count()
}

/// Per GPU: (NVLink bandwidth to the NVSwitch per direction, bytes/s).
fn nvswitch_bandwidths(t: &Topology) -> Vec<f64> {
    t.gpus()
        .iter()
        .map(|&g| {
            t.out_links(g)
                .iter()
                .map(|&l| t.link(l))
                .filter(|l| t.device(l.to).kind == DeviceKind::Nvswitch)
                .map(|l| l.bandwidth_bps / 8.0)
                .sum()
        })
        .collect()
}

/// For every ordered GPU pair: (hops, bottleneck bits/s, class of the bottleneck).
fn gpu_pair_routes(t: &Topology) -> Vec<(usize, f64, LinkClass)> {
    let mut router = Router::new(t, 1);
    let gpus = t.gpus().to_vec();
    let mut out = Vec::new();
    for &a in &gpus {
        for &b in &gpus {
            if a != b {
                let path = router.path(t, a, b).expect("GPUs are connected").to_vec();
                let (bw, class) = t.bottleneck(&path);
                out.push((path.len(), bw, class));
            }
        }
    }
    out
}

fn assert_same_gpu_fabric(imported: &Topology, bundled: &Topology) {
    assert_eq!(imported.gpus().len(), bundled.gpus().len());
    assert_eq!(count(imported, DeviceKind::Nvswitch), 1);
    assert_eq!(count(bundled, DeviceKind::Nvswitch), 1);
    assert_eq!(nvswitch_bandwidths(imported), nvswitch_bandwidths(bundled));
    assert_eq!(gpu_pair_routes(imported), gpu_pair_routes(bundled));
    assert_eq!(imported.gpu, bundled.gpu);
}

#[test]
fn nccl_xml_of_an_hgx_h100_is_the_bundled_hgx_h100() {
    let node = import_file(IBM_H100_XML, None);
    let t = node.topology().unwrap();
    let hgx = topology_file::load(&repo().join("topologies/hgx_h100.toml")).unwrap();
    assert_same_gpu_fabric(&t, &hgx);
    assert_eq!(t.gpu.as_deref(), Some("H100-SXM5"), "from PCI id 0x2330");
    // 18 NVLinks x 25 GB/s, the datasheet's 450 GB/s per direction.
    assert_eq!(nvswitch_bandwidths(&t), vec![450e9; 8]);
    // One ConnectX NIC per GPU under the GPU's PCIe bridge; two sockets.
    assert_eq!(count(&t, DeviceKind::Nic), 8);
    assert_eq!(count(&t, DeviceKind::Host), 2);
    assert_eq!(count(&t, DeviceKind::PcieSwitch), 8);
    // The GPU's own PCIe link: Gen5 x16 (width 0 read as 16, as NCCL does), which the
    // hand-written file rounds to 63 GB/s.
    let gpu_pcie = |t: &Topology| {
        let g = t.gpus()[0];
        t.out_links(g)
            .iter()
            .map(|&l| t.link(l))
            .find(|l| l.class == LinkClass::Pcie)
            .unwrap()
            .bandwidth_bps
            / 8.0
    };
    assert!((gpu_pcie(&t) / gpu_pcie(&hgx) - 1.0).abs() < 1e-3);
}

#[test]
fn nvidia_smi_matrix_of_a_dgx_a100_is_the_bundled_dgx_a100() {
    let node = import_file(A100_SMI, Some("A100-SXM4"));
    let t = node.topology().unwrap();
    let dgx = topology_file::load(&repo().join("topologies/dgx_a100.toml")).unwrap();
    assert_same_gpu_fabric(&t, &dgx);
    assert_eq!(nvswitch_bandwidths(&t), vec![300e9; 8]);
    // 10 NICs; the 8 compute NICs share a PCIe switch with their two GPUs (PXB), the two
    // storage NICs (PIX to each other) one of their own.
    assert_eq!(count(&t, DeviceKind::Nic), 10);
    assert_eq!(count(&t, DeviceKind::PcieSwitch), 5);
    let mut r = Router::new(&t, 1);
    let (gpu0, nic0) = (t.find("gpu0").unwrap(), t.find("nic0").unwrap());
    assert_eq!(
        r.path(&t, gpu0, nic0).unwrap().len(),
        2,
        "GPU0 -> switch -> NIC0"
    );
    // NUMA nodes 1, 3, 5, 7 hold GPUs; the storage NICs' node is not in the matrix.
    assert_eq!(count(&t, DeviceKind::Host), 5);
}

#[test]
fn the_written_file_reads_back_as_the_same_topology() {
    for (rel, gpu) in [(IBM_H100_XML, None), (A100_SMI, Some("A100-SXM4"))] {
        let node = import_file(rel, gpu);
        let text = node.to_toml();
        let back = topology_file::parse_str(&text, "written").unwrap();
        let direct = node.topology().unwrap();
        assert_eq!(back.devices(), direct.devices(), "{rel}");
        assert_eq!(back.links(), direct.links(), "{rel}");
        assert!(
            text.starts_with("# Imported by `dtsim topo import`"),
            "{rel}"
        );
    }
}

/// The imported node is a cluster generator's server: two of them on 200 Gbit/s rails run
/// the same 16-GPU all-reduce as the generated HGX cluster, within the extra PCIe hop of the
/// imported node's bridges.
#[test]
fn a_two_node_cluster_of_the_imported_node_runs_an_all_reduce() {
    let dir = scratch("topo-import", "two_nodes");
    let node_toml = dir.join("node.toml");
    let out = dtsim(&[
        "topo",
        "import",
        IBM_H100_XML,
        "--out",
        node_toml.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let links = "nic_link = { bandwidth = \"200Gbps\", latency = \"1us\", class = \"ib\" }\n\
                 spine_link = { bandwidth = \"200Gbps\", latency = \"1us\", class = \"ib\" }\n";
    std::fs::write(
        dir.join("cluster.toml"),
        format!(
            "name = \"two-imported\"\ngpu = \"H100-SXM5\"\n[generator]\nkind = \
             \"rail_optimized\"\nnodes = 2\nnode_file = \"node.toml\"\nspines = 1\n{links}"
        ),
    )
    .unwrap();
    let t = topology_file::load(&dir.join("cluster.toml")).unwrap();
    assert_eq!(t.gpus().len(), 16);
    assert_eq!(
        count(&t, DeviceKind::Switch),
        9,
        "8 rail leaves and a spine"
    );
    assert!(t.find("n1.gpu7").is_some() && t.find("n1.nvswitch").is_some());
    std::fs::write(
        dir.join("ar.toml"),
        "name = \"ar\"\nseed = 1\n[topology]\nfile = \"cluster.toml\"\n[collective]\nop = \
         \"all_reduce\"\nbytes = \"256MiB\"\n",
    )
    .unwrap();
    let time = |args: &[&str]| -> f64 {
        let out = dtsim(args);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        v["time_us"].as_f64().expect("time_us in the JSON summary")
    };
    let ar = dir.join("ar.toml");
    let imported = time(&["run", ar.to_str().unwrap(), "--json"]);
    let generated = time(&[
        "run",
        ar.to_str().unwrap(),
        "--json",
        "--set",
        &format!(
            "topology.file={:?}",
            repo()
                .join("topologies/h100_rail_cluster.toml")
                .display()
                .to_string()
        ),
        "--set",
        "topology.generator.nodes=2",
        "--set",
        "topology.generator.nodes_per_rail_leaf=2",
        "--set",
        "topology.generator.spines=1",
        "--set",
        "topology.generator.uplinks_per_spine=1",
        "--set",
        "topology.generator.nic_link.bandwidth=\"200Gbps\"",
        "--set",
        "topology.generator.spine_link.bandwidth=\"200Gbps\"",
    ]);
    assert!(imported > 0.0);
    assert!(
        (imported / generated - 1.0).abs() < 0.01,
        "imported {imported} us vs generated {generated} us"
    );
}

// ---- bad input: a clear error naming the element, never a panic ----

fn xml_error(text: &str) -> String {
    import::nccl_xml::parse(text, "dump.xml")
        .unwrap_err()
        .to_string()
}

#[test]
fn a_truncated_xml_dump_names_where_it_stops() {
    let full = read(IBM_H100_XML);
    let cut = &full[..full.len() / 2];
    let e = xml_error(cut);
    assert!(e.starts_with("dump.xml:"), "{e}");
    assert!(e.contains("well-formed NCCL topology XML"), "{e}");
}

#[test]
fn an_unknown_element_is_named_with_its_line() {
    let text = read(IBM_H100_XML)
        .replacen("<nic>", "<nicc>", 1)
        .replacen("</nic>", "</nicc>", 1);
    let e = xml_error(&text);
    assert!(e.contains("<nicc>") && e.contains("dump.xml:5:"), "{e}");
}

#[test]
fn an_nvlink_to_a_gpu_that_is_not_there_is_an_error() {
    let text = read(IBM_H100_XML).replacen(
        "target=\"0000:f5:00.0\" count=\"5\" tclass=\"0x068000\"",
        "target=\"0000:99:00.0\" count=\"5\" tclass=\"0x030200\"",
        1,
    );
    let e = xml_error(&text);
    assert!(
        e.contains("no GPU is at 0000:99:00.0") && e.contains("<nvlink>"),
        "{e}"
    );
}

#[test]
fn bad_attributes_name_the_attribute() {
    let text = read(IBM_H100_XML).replacen("count=\"5\"", "count=\"five\"", 1);
    assert!(xml_error(&text).contains("count: a non-negative whole number, got \"five\""));
    let text = read(IBM_H100_XML).replacen("tclass=\"0x068000\"", "tclass=\"0x010802\"", 1);
    assert!(xml_error(&text).contains("tclass: 0x068000 (NVSwitch)"));
    assert!(xml_error("<system version=\"1\"></system>").contains("at least one <gpu>"));
    assert!(xml_error("<topology/>").contains("a <system> root element"));
}

#[test]
fn a_bad_nvidia_smi_matrix_is_an_error_naming_the_cell() {
    let smi = |text: &str, gpu: Option<&str>| {
        let opts = ImportOptions {
            format: Some(Format::NvidiaSmi),
            gpu: gpu.map(str::to_string),
            ..Default::default()
        };
        import::import(text, "topo.txt", &opts)
            .unwrap_err()
            .to_string()
    };
    let good = read(A100_SMI);
    assert!(smi(&good, None).contains("--gpu MODEL"));
    assert!(smi(&good, Some("MI300X")).contains("a GPU model dtsim knows"));
    let bad_cell = good.replacen("NV12", "NVX", 1);
    let e = smi(&bad_cell, Some("A100"));
    assert!(
        e.contains("topo.txt:2") && e.contains("GPU0 to GPU1") && e.contains("\"NVX\""),
        "{e}"
    );
    let asym = good.replacen("PXB", "SYS", 1);
    assert!(smi(&asym, Some("A100")).contains("a symmetric matrix"));
    let short: String = good.lines().take(4).collect::<Vec<_>>().join("\n");
    assert!(smi(&short, Some("A100")).contains("a row for every column"));
    assert!(smi("hello", Some("A100")).contains("a header line"));
}

#[test]
fn the_cli_detects_the_format_and_refuses_what_it_cannot_read() {
    let out = dtsim(&["topo", "import", A100_SMI, "--gpu", "A100-SXM4"]);
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("kind = \"nvswitch\""));
    let out = dtsim(&["topo", "import", "README.md"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("README.md") && err.contains("--format"),
        "{err}"
    );
    assert!(Path::new(&repo().join(IBM_H100_XML)).exists());
}

#[test]
fn node_file_replaces_the_generated_server_fields() {
    let dir = scratch("topo-import", "conflict");
    let node = import_file(IBM_H100_XML, None);
    std::fs::write(dir.join("node.toml"), node.to_toml()).unwrap();
    std::fs::write(
        dir.join("c.toml"),
        "name = \"c\"\n[generator]\nkind = \"rail_optimized\"\nnodes = 2\nnode_file = \
         \"node.toml\"\ngpus_per_node = 8\nspines = 1\nnic_link = { bandwidth = \"200Gbps\", class = \"ib\" \
         }\nspine_link = { bandwidth = \"200Gbps\", class = \"ib\" }\n",
    )
    .unwrap();
    let e = topology_file::load(&dir.join("c.toml"))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("generator.gpus_per_node") && e.contains("node_file"),
        "{e}"
    );
    std::fs::write(
        dir.join("d.toml"),
        "name = \"d\"\n[generator]\nkind = \"rail_optimized\"\nnodes = 2\nnode_file = \
         \"missing.toml\"\nspines = 1\nnic_link = { bandwidth = \"200Gbps\", class = \"ib\" }\nspine_link = { \
         bandwidth = \"200Gbps\", class = \"ib\" }\n",
    )
    .unwrap();
    let e = topology_file::load(&dir.join("d.toml"))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("generator.node_file") && e.contains("missing.toml"),
        "{e}"
    );
}
