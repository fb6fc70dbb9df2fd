//! Topologies from what a machine reports about itself, written out as a dtsim topology file.
//!
//! - [`nccl_xml`]: NCCL's topology dump (`NCCL_TOPO_DUMP_FILE`) and the static files clouds ship
//!   for `NCCL_TOPO_FILE`: CPUs (NUMA nodes), PCIe switches with link speed and width, GPUs with
//!   their NVLinks (to peers, to NVSwitches, to the CPU), NICs with their port speed.
//! - [`smi_matrix`]: `nvidia-smi topo -m`, whose classes (NV#, PIX, PXB, PHB, NODE, SYS) say
//!   how devices connect but not how fast: bandwidths come from the GPU model or are stated.
//!
//! Both produce a [`NodeFile`]: one server as explicit `[[device]]`/`[[link]]` lists, with a
//! header saying where every number came from. Written to disk it is an ordinary topology file
//! (`dtsim topo show`, `dtsim run`), and it is the `node_file` of the cluster generators
//! (`rail_optimized`, `fat_tree`), which copy it once per server.

pub mod nccl_xml;
pub mod smi_matrix;

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::{DeviceKind, LinkClass, Topology, TopologyError};

/// One imported server.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeFile {
    pub name: String,
    pub description: String,
    /// The GPU model (`gpu = ...`), when the input names it.
    pub gpu: Option<String>,
    /// Header lines: the source, and every assumption the import made.
    pub notes: Vec<String>,
    pub devices: Vec<NodeDevice>,
    pub links: Vec<NodeLink>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct NodeDevice {
    pub name: String,
    pub kind: DeviceKind,
    /// What the input called it (a PCI bus id, a NIC name), written as a comment.
    pub origin: String,
    /// GPUs without peer-to-peer: the host whose memory stages their transfers.
    pub staged_via: Option<String>,
}

/// A bundle of `count` identical links between two devices.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeLink {
    pub a: String,
    pub b: String,
    /// Per member link and direction, bytes/s.
    pub bytes_per_s: f64,
    pub count: u32,
    pub class: LinkClass,
    /// Where the bandwidth came from, written as a comment.
    pub origin: String,
}

/// Per-hop latencies the import writes as `[defaults.<class>]`: neither input format carries
/// latency, so these are the same order-of-magnitude assumptions as the bundled hand-written
/// topologies (`topologies/hgx_h100.toml`, `dgx_a100.toml`), said so in the file.
const DEFAULT_LATENCIES: [(LinkClass, &str); 3] = [
    (LinkClass::Nvlink, "500ns"),
    (LinkClass::Pcie, "500ns"),
    (LinkClass::Smp, "200ns"),
];

impl NodeFile {
    /// The topology file's text.
    pub fn to_toml(&self) -> String {
        let mut s = String::new();
        for n in &self.notes {
            for line in n.lines() {
                let _ = writeln!(s, "# {line}");
            }
        }
        let _ = writeln!(s, "name = {}", quoted(&self.name));
        let _ = writeln!(s, "description = {}", quoted(&self.description));
        if let Some(g) = &self.gpu {
            let _ = writeln!(s, "gpu = {}", quoted(g));
        }
        for (class, latency) in DEFAULT_LATENCIES {
            if self.links.iter().any(|l| l.class == class) {
                let _ = writeln!(
                    s,
                    "\n[defaults.{class}]\nlatency = \"{latency}\"  # assumption (not in the input)"
                );
            }
        }
        for d in &self.devices {
            let _ = writeln!(
                s,
                "\n[[device]]  # {}\nname = {}\nkind = \"{}\"\nnode = 0",
                d.origin,
                quoted(&d.name),
                d.kind
            );
            if let Some(via) = &d.staged_via {
                let _ = writeln!(
                    s,
                    "staged_via = {}  # no peer-to-peer: transfers to other GPUs go through its memory",
                    quoted(via)
                );
            }
        }
        for l in &self.links {
            let _ = writeln!(
                s,
                "\n[[link]]  # {}\na = {}\nb = {}\nbandwidth = \"{}\"\nclass = \"{}\"",
                l.origin,
                quoted(&l.a),
                quoted(&l.b),
                bandwidth_text(l.bytes_per_s),
                l.class
            );
            if l.count > 1 {
                let _ = writeln!(s, "count = {}", l.count);
            }
        }
        s
    }

    /// The topology the file describes (what `dtsim topo show` of the written file gives).
    pub fn topology(&self) -> Result<Topology, TopologyError> {
        super::file::parse_str(&self.to_toml(), &format!("(imported {})", self.name))
    }
}

/// A topology name for an import of the file `origin`: its stem (`node.xml` → `node`).
fn name_from_origin(origin: &str) -> String {
    std::path::Path::new(origin)
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "imported".into())
}

/// A TOML basic string.
fn quoted(s: &str) -> String {
    toml::Value::String(s.to_string()).to_string()
}

/// `25GB/s`, `31.507692GB/s`: GB/s with at most six decimals, trailing zeros dropped.
pub fn bandwidth_text(bytes_per_s: f64) -> String {
    let g = format!("{:.6}", bytes_per_s / 1e9);
    let g = g.trim_end_matches('0').trim_end_matches('.');
    format!("{g}GB/s")
}

/// Payload bandwidth of a PCIe link per direction, bytes/s: `gt_per_s` transfers per second
/// per lane times `lanes`, less line coding (8b/10b up to 5 GT/s, 128b/130b from 8 GT/s;
/// PCI-SIG base specifications; 64 GT/s PAM4 FLIT mode counted as 128b/130b, 242/256 in truth).
pub fn pcie_bytes_per_s(gt_per_s: f64, lanes: u32) -> f64 {
    let coding = if gt_per_s < 8.0 {
        8.0 / 10.0
    } else {
        128.0 / 130.0
    };
    gt_per_s * 1e9 * lanes as f64 * coding / 8.0
}

/// The input formats [`import`] reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    NcclXml,
    NvidiaSmi,
}

impl Format {
    pub fn parse(s: &str) -> Option<Format> {
        match s {
            "nccl-xml" | "nccl" | "xml" => Some(Format::NcclXml),
            "nvidia-smi" | "smi" => Some(Format::NvidiaSmi),
            _ => None,
        }
    }

    /// XML starts with `<`; a `nvidia-smi topo -m` matrix has a `GPU0` column.
    pub fn detect(text: &str) -> Option<Format> {
        if text.trim_start().starts_with('<') {
            Some(Format::NcclXml)
        } else if text
            .lines()
            .any(|l| l.split_whitespace().next() == Some("GPU0"))
        {
            Some(Format::NvidiaSmi)
        } else {
            None
        }
    }
}

/// What the user states beside the file: the GPU model (required for `nvidia-smi`, which
/// does not name it; overrides the PCI id table for XML) and, for `nvidia-smi`, the PCIe and
/// SMP bandwidths.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ImportOptions {
    pub format: Option<Format>,
    pub gpu: Option<String>,
    pub pcie_bytes_per_s: Option<f64>,
    pub smp_bytes_per_s: Option<f64>,
    /// The topology's name (default: the file's stem).
    pub name: Option<String>,
    /// The GPUs cannot reach each other's memory (consumer GPUs, or P2P disabled: `nvidia-smi
    /// topo -p2p r` says `NS`): each GPU's transfers to another are staged in the memory of the
    /// host it reaches over PCIe, as NCCL's SHM transport does.
    pub no_p2p: bool,
}

/// Reads `text` (from `origin`) in the given or detected format.
pub fn import(text: &str, origin: &str, opts: &ImportOptions) -> Result<NodeFile, ImportError> {
    let format = opts
        .format
        .or_else(|| Format::detect(text))
        .ok_or_else(|| {
            ImportError::new(
                origin,
                None,
                "NCCL topology XML (starting with <system>) or nvidia-smi topo -m output (a GPU0 \
             column); neither recognised, name it with --format",
            )
        })?;
    let mut node = match format {
        Format::NcclXml => {
            let mut node = nccl_xml::parse(text, origin)?;
            if let Some(g) = &opts.gpu {
                if crate::topology::gpu_models::by_name(g).is_none() {
                    return Err(ImportError::new(
                        origin,
                        None,
                        format!(
                            "--gpu: a GPU model dtsim knows (H100-SXM5, A100-SXM4, ...), got {g:?}"
                        ),
                    ));
                }
                node.notes.push(format!("GPU model stated: {g}."));
                node.gpu = Some(g.clone());
            }
            node
        }
        Format::NvidiaSmi => {
            let gpu = opts.gpu.clone().ok_or_else(|| {
                ImportError::new(
                    origin,
                    None,
                    "--gpu MODEL: nvidia-smi topo -m does not name the GPU, and its NVLink rate \
                     and PCIe generation come from the model",
                )
            })?;
            smi_matrix::parse(
                text,
                origin,
                &smi_matrix::SmiOptions {
                    gpu,
                    pcie_bytes_per_s: opts.pcie_bytes_per_s,
                    smp_bytes_per_s: opts.smp_bytes_per_s,
                },
            )?
        }
    };
    if let Some(n) = &opts.name {
        node.name = n.clone();
    }
    if opts.no_p2p {
        stage_through_hosts(&mut node, origin)?;
    }
    Ok(node)
}

/// Marks every GPU as staged via the host nearest to it over PCIe (fewest PCIe hops, the first
/// in device order on a tie), for `--no-p2p`. A GPU with NVLinks has peer-to-peer over them:
/// an error says so.
fn stage_through_hosts(node: &mut NodeFile, origin: &str) -> Result<(), ImportError> {
    let index: BTreeMap<&str, usize> = node
        .devices
        .iter()
        .enumerate()
        .map(|(i, d)| (d.name.as_str(), i))
        .collect();
    let mut pcie_neighbours = vec![Vec::new(); node.devices.len()];
    for l in &node.links {
        let (Some(&a), Some(&b)) = (index.get(l.a.as_str()), index.get(l.b.as_str())) else {
            continue;
        };
        if l.class == LinkClass::Nvlink {
            let gpu = if node.devices[a].kind == DeviceKind::Gpu {
                &l.a
            } else {
                &l.b
            };
            return Err(ImportError::new(
                origin,
                None,
                format!(
                    "--no-p2p: GPUs without NVLinks, but {gpu} has NVLinks, over which CUDA \
                     peer-to-peer works"
                ),
            ));
        }
        if l.class == LinkClass::Pcie {
            pcie_neighbours[a].push(b);
            pcie_neighbours[b].push(a);
        }
    }
    for g in 0..node.devices.len() {
        if node.devices[g].kind != DeviceKind::Gpu {
            continue;
        }
        // Breadth-first over PCIe links, neighbours in link order: the first host reached.
        let mut seen = vec![false; node.devices.len()];
        let mut queue = std::collections::VecDeque::from([g]);
        seen[g] = true;
        let mut host = None;
        while let Some(d) = queue.pop_front() {
            if node.devices[d].kind == DeviceKind::Host {
                host = Some(d);
                break;
            }
            for &n in &pcie_neighbours[d] {
                if !seen[n] {
                    seen[n] = true;
                    queue.push_back(n);
                }
            }
        }
        let host = host.ok_or_else(|| {
            ImportError::new(
                origin,
                None,
                format!(
                    "--no-p2p: a host (CPU) that {} reaches over PCIe, to stage its transfers",
                    node.devices[g].name
                ),
            )
        })?;
        node.devices[g].staged_via = Some(node.devices[host].name.clone());
    }
    node.notes.push(
        "No GPU peer-to-peer (--no-p2p): transfers between GPUs are staged in host memory."
            .to_string(),
    );
    Ok(())
}

/// An import problem: which input, where in it (line:column or element), what was expected.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{origin}{}: {what}", at.as_ref().map(|a| format!(":{a}")).unwrap_or_default())]
pub struct ImportError {
    pub origin: String,
    pub at: Option<String>,
    pub what: String,
}

impl ImportError {
    pub fn new(origin: &str, at: Option<String>, what: impl Into<String>) -> Self {
        ImportError {
            origin: origin.to_string(),
            at,
            what: what.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pcie_rates_are_the_spec_payload_rates() {
        assert!((pcie_bytes_per_s(8.0, 16) / 1e9 - 15.753846).abs() < 1e-6);
        assert!((pcie_bytes_per_s(16.0, 16) / 1e9 - 31.507692).abs() < 1e-6);
        assert!((pcie_bytes_per_s(32.0, 16) / 1e9 - 63.015385).abs() < 1e-6);
        assert_eq!(pcie_bytes_per_s(2.5, 1), 0.25e9);
    }

    #[test]
    fn bandwidths_are_written_so_the_topology_parser_reads_them_back() {
        assert_eq!(bandwidth_text(25e9), "25GB/s");
        assert_eq!(bandwidth_text(pcie_bytes_per_s(16.0, 16)), "31.507692GB/s");
        let b: crate::units::Bandwidth =
            serde_json::from_value(serde_json::json!(bandwidth_text(12.5e9))).unwrap();
        assert_eq!(b.bits_per_s(), 100e9);
    }

    /// Two consumer GPUs behind one PCIe switch, as `nvidia-smi topo -m` prints them (the
    /// AutoDL 2 x RTX 2080 Ti box of the shared nccl-tests table).
    const PIX_PAIR: &str = "\tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\n\
                            GPU0\t X \tPIX\t0-31\t0\n\
                            GPU1\tPIX\t X \t0-31\t0\n";

    fn import_pix_pair(no_p2p: bool) -> Result<NodeFile, ImportError> {
        let opts = ImportOptions {
            gpu: Some("RTX 2080 Ti".into()),
            no_p2p,
            ..Default::default()
        };
        import(PIX_PAIR, "pix.txt", &opts)
    }

    #[test]
    fn without_p2p_gpus_behind_a_switch_are_staged_through_their_cpu() {
        let p2p = import_pix_pair(false).unwrap().topology().unwrap();
        let staged = import_pix_pair(true).unwrap().topology().unwrap();
        let hops = |t: &Topology| {
            let (a, b) = (t.gpus()[0], t.gpus()[1]);
            crate::topology::routing::Router::new(t, 0).hops(t, a, b)
        };
        assert_eq!(hops(&p2p), Some(2), "peer to peer through the switch");
        assert_eq!(
            hops(&staged),
            Some(4),
            "up to the CPU's memory and back down"
        );
        let text = import_pix_pair(true).unwrap().to_toml();
        assert!(text.contains("staged_via = \"cpu0\""), "{text}");
    }

    #[test]
    fn no_p2p_is_refused_for_gpus_with_nvlinks() {
        let nvlinked = PIX_PAIR.replace("PIX", "NV2");
        let opts = ImportOptions {
            gpu: Some("A100-SXM4".into()),
            no_p2p: true,
            ..Default::default()
        };
        let e = import(&nvlinked, "nv.txt", &opts).unwrap_err().to_string();
        assert!(
            e.contains(
                "--no-p2p: GPUs without NVLinks, but gpu0 has NVLinks, over which CUDA peer"
            ),
            "{e}"
        );
    }
}
