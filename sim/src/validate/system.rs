//! The system an nccl-tests row ran on, read from the row's own columns, and what dtsim replays
//! it on: a bundled topology file with the keys the row sets overridden, and the bundled profile
//! of its GPU.
//!
//! Nothing here matches a system's *name*: a table dtsim has never seen is configured by the
//! same rules as the shared ones. Columns read (the layout of `shared/validation/`):
//! - `gpu` (else `system`): the GPU model ([`gpu_models::by_name`]); `PCIe` in it is a PCIe card;
//! - `num_gpus` / `total_gpus`, `num_nodes`, `gpus_per_node`;
//! - `intra_node_interconnect`: an NVSwitch, a hybrid cube mesh (DGX-1), or PCIe, with or
//!   without peer-to-peer (also read from `caveat`, and `NCCL_P2P_DISABLE=1` in `command`);
//! - `inter_node_interconnect`: InfiniBand (`EDR`/`HDR`/`NDR`/`XDR`, or a rate), RoCE or
//!   Ethernet, GPUDirect-TCPXO; NICs per node and their rate (`8 x 200 Gbps`, `4x 100Gb`).
//!
//! What a row does not state comes from its GPU generation's usual build, and the replay says
//! so ([`Replay::assumed`]): SXM boards of A100 and later have an NVSwitch, V100/P100 SXM2
//! boards a hybrid cube mesh, other GPUs sit on PCIe; a cluster of NVSwitch nodes has one NIC
//! per GPU at its generation's InfiniBand rate (A100 HDR 200 Gb/s, Hopper and Blackwell NDR
//! 400 Gb/s), DGX-1 nodes 4 EDR NICs.

use super::Row;
use crate::topology::gpu_models::{self, GpuModel};

/// How a node's GPUs reach each other.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Intra {
    NvSwitch,
    /// DGX-1's NVLink hybrid cube mesh (no switch; some pairs have no NVLink).
    HybridCubeMesh,
    /// PCIe only; without `p2p` transfers are staged in host memory.
    Pcie {
        p2p: bool,
    },
}

/// The fabric between nodes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum NetKind {
    Infiniband,
    Ethernet,
    /// GCP's GPUDirect-TCPXO (Ethernet NICs driven by a TCP offload; its own NCCL settings).
    Tcpxo,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Network {
    pub kind: NetKind,
    pub nics_per_node: u32,
    pub gbps_per_nic: f64,
}

/// A row's system, as its columns (and, where silent, its GPU generation) say.
#[derive(Debug, Clone, PartialEq)]
pub struct SystemSpec {
    pub gpu: GpuModel,
    pub gpus: u32,
    pub nodes: u32,
    pub gpus_per_node: u32,
    pub intra: Intra,
    pub network: Option<Network>,
    /// What the row did not state and was taken from the GPU generation.
    pub assumed: Vec<String>,
}

/// What dtsim replays a row on.
#[derive(Debug, Clone, PartialEq)]
pub struct Replay {
    /// File stem under `topologies/`.
    pub topology: &'static str,
    /// `--set` overrides of the topology file (`topology.generator.nodes=2`).
    pub set: Vec<String>,
    /// File stem under `data/profiles/`.
    pub profile: &'static str,
    /// Extra `[collective]` lines (a system's documented NCCL environment).
    pub collective: &'static str,
    /// Whether NCCL can run NVLS on it (a forced `NCCL_ALGO=NVLS` is honoured).
    pub nvls_capable: bool,
    pub assumed: Vec<String>,
}

impl Replay {
    /// One line for the validate report: what the rows were replayed on.
    pub fn describe(&self) -> String {
        self.describe_with(&format!("profile {}.json", self.profile))
    }

    /// [`Self::describe`] naming another profile (a training step's compute profile).
    pub fn describe_with(&self, profile: &str) -> String {
        let mut s = format!("topologies/{}.toml", self.topology);
        if !self.set.is_empty() {
            s.push_str(&format!(" ({})", self.set.join(", ")));
        }
        s.push_str(&format!(", {profile}"));
        if !self.assumed.is_empty() {
            s.push_str(&format!("; assumed: {}", self.assumed.join("; ")));
        }
        s
    }
}

/// NCCL settings of Google's TCPXO environment for A3 Mega (`nccl-env-profile.sh`:
/// `NCCL_PROTO=Simple,LL128`, `NCCL_MIN_NCHANNELS=4`), as `[collective]` lines.
pub const GCP_TCPXO_NCCL: &str = "protocol = \"simple,ll128\"\nmin_channels = 4\n";

fn col<'a>(row: &'a Row, name: &str) -> &'a str {
    row.get(name).map(String::as_str).unwrap_or("").trim()
}

/// Reads the system of `row`; errors name the column and what was expected.
pub fn read(row: &Row) -> Result<SystemSpec, String> {
    let gpu_text = match col(row, "gpu") {
        "" => col(row, "system"),
        g => g,
    };
    let gpu = gpu_models::by_name(gpu_text).ok_or_else(|| {
        format!(
            "gpu: a GPU model dtsim knows (H100, H200, A100, V100, P100, B200, RTX 2080 Ti, ...), \
             got {gpu_text:?}"
        )
    })?;
    let gpus_text = match col(row, "total_gpus") {
        "" => col(row, "num_gpus"),
        g => g,
    };
    let gpus: u32 =
        gpus_text.parse().ok().filter(|&g| g >= 1).ok_or_else(|| {
            format!("num_gpus/total_gpus: a whole number of GPUs, got {gpus_text:?}")
        })?;
    let nodes: u32 = match col(row, "num_nodes") {
        "" => 1,
        t => t
            .parse()
            .ok()
            .filter(|&n| n >= 1)
            .ok_or_else(|| format!("num_nodes: a whole number of nodes, got {t:?}"))?,
    };
    let gpus_per_node = match col(row, "gpus_per_node") {
        "" => {
            if !gpus.is_multiple_of(nodes) {
                return Err(format!(
                    "num_nodes: a divisor of the {gpus} GPUs (or a gpus_per_node column), got \
                     {nodes}"
                ));
            }
            gpus / nodes
        }
        t => t
            .parse()
            .ok()
            .filter(|&g: &u32| g >= 1 && g.checked_mul(nodes) == Some(gpus))
            .ok_or_else(|| format!("gpus_per_node: {gpus} GPUs over {nodes} nodes, got {t:?}"))?,
    };
    let mut assumed = Vec::new();
    let intra = read_intra(row, gpu_text, &gpu, gpus_per_node, &mut assumed);
    let network = if nodes > 1 {
        Some(read_network(row, &gpu, gpus_per_node, intra, &mut assumed))
    } else {
        None
    };
    Ok(SystemSpec {
        gpu,
        gpus,
        nodes,
        gpus_per_node,
        intra,
        network,
        assumed,
    })
}

fn read_intra(
    row: &Row,
    gpu_text: &str,
    gpu: &GpuModel,
    gpus_per_node: u32,
    assumed: &mut Vec<String>,
) -> Intra {
    let text = col(row, "intra_node_interconnect").to_ascii_lowercase();
    if text.contains("nvswitch") {
        return Intra::NvSwitch;
    }
    if text.contains("cube mesh") || text.contains("cube-mesh") {
        return Intra::HybridCubeMesh;
    }
    let all = format!(
        "{text} {} {}",
        col(row, "caveat").to_ascii_lowercase(),
        col(row, "command").to_ascii_lowercase()
    );
    let said = |keys: &[&str]| keys.iter().any(|k| all.contains(k));
    let consumer = gpu_text.to_ascii_uppercase().contains("GEFORCE")
        || ["2080", "RTX-3090", "4090"].contains(&gpu.name);
    let mut pcie = || {
        let p2p = if said(&[
            "p2p not supported",
            "no p2p",
            "without p2p",
            "p2p disabled",
            "nccl_p2p_disable=1",
        ]) {
            false
        } else if said(&[
            "p2p supported",
            "p2p enabled",
            "with p2p",
            "bar1 p2p",
            "p2p via",
        ]) {
            true
        } else if consumer {
            // NVIDIA's GeForce drivers do not offer PCIe peer-to-peer.
            assumed
                .push("no PCIe P2P (GeForce drivers do not offer it): the row does not say".into());
            false
        } else {
            true
        };
        Intra::Pcie { p2p }
    };
    let pcie_card = gpu_text.to_ascii_uppercase().contains("PCIE");
    let mentions_nvlink = text.replace("no nvlink", "").contains("nvlink");
    if pcie_card || gpu.nvlinks == 0 || (text.contains("pcie") && !mentions_nvlink) {
        return pcie();
    }
    // Not stated: the generation's SXM board.
    let cc = gpu.compute_capability;
    if gpus_per_node == 1 {
        return Intra::NvSwitch;
    }
    let (intra, what) = if cc >= 80 && cc != 86 && cc != 89 {
        (Intra::NvSwitch, "an NVSwitch (SXM board)")
    } else if cc == 60 || cc == 70 {
        (
            Intra::HybridCubeMesh,
            "an NVLink hybrid cube mesh (DGX-1 SXM2 board)",
        )
    } else {
        (pcie(), "PCIe")
    };
    assumed.push(format!("{what}: intra_node_interconnect does not say"));
    intra
}

/// The NIC count and rate in `text` (`8 x 200 Gbps`, `4x 100Gb`, `400 Gb/s`), each if stated.
fn nics_and_rate(text: &str) -> (Option<u32>, Option<f64>) {
    let t = text.to_ascii_lowercase().replace('×', "x");
    let chars: Vec<char> = t.chars().collect();
    let mut numbers: Vec<(usize, usize, f64)> = Vec::new(); // (start, end, value)
    let mut i = 0;
    while i < chars.len() {
        if chars[i].is_ascii_digit() {
            let start = i;
            while i < chars.len() && (chars[i].is_ascii_digit() || chars[i] == '.') {
                i += 1;
            }
            let s: String = chars[start..i].iter().collect();
            if let Ok(v) = s.parse::<f64>() {
                numbers.push((start, i, v));
            }
        } else {
            i += 1;
        }
    }
    let rest = |end: usize| -> String { chars[end..].iter().collect::<String>() };
    let mut rate = None;
    let mut count = None;
    for (k, &(_, end, v)) in numbers.iter().enumerate() {
        let after = rest(end);
        let after = after.trim_start();
        let is_rate = [
            "gb/s", "gbps", "gbit", "gb ", "g ", "gbe", "gb,", "gb)", "g,", "g)",
        ]
        .iter()
        .any(|u| after.starts_with(u))
            || after == "g"
            || after == "gb";
        if is_rate && rate.is_none() {
            rate = Some(v);
            // "8 x 200 Gbps": the number before an `x` is the NIC count.
            if k > 0 {
                let (_, prev_end, prev) = numbers[k - 1];
                let between: String = chars[prev_end..numbers[k].0].iter().collect();
                if between.trim() == "x" && prev >= 1.0 && prev.fract() == 0.0 {
                    count = Some(prev as u32);
                }
            }
        }
    }
    (count, rate)
}

fn read_network(
    row: &Row,
    gpu: &GpuModel,
    gpus_per_node: u32,
    intra: Intra,
    assumed: &mut Vec<String>,
) -> Network {
    let text = col(row, "inter_node_interconnect");
    let lower = text.to_ascii_lowercase();
    let has = |k: &str| lower.contains(k);
    let cc = gpu.compute_capability;
    let kind = if has("tcpxo") {
        Some(NetKind::Tcpxo)
    } else if has("infiniband")
        || has(" ib")
        || lower.starts_with("ib")
        || ["edr", "hdr", "ndr", "xdr"].iter().any(|k| has(k))
    {
        Some(NetKind::Infiniband)
    } else if has("roce") || has("ethernet") || has("tcp") || has("efa") {
        Some(NetKind::Ethernet)
    } else {
        None
    };
    let (count, mut rate) = nics_and_rate(text);
    if rate.is_none() {
        rate = [
            ("xdr", 800.0),
            ("ndr", 400.0),
            ("hdr", 200.0),
            ("edr", 100.0),
        ]
        .iter()
        .find(|(k, _)| has(k))
        .map(|&(_, r)| r);
    }
    let dgx1 = intra == Intra::HybridCubeMesh;
    let kind = kind.unwrap_or_else(|| {
        assumed.push("InfiniBand: inter_node_interconnect does not say".into());
        NetKind::Infiniband
    });
    // GCP A3 Mega's TCPXO NICs (8 x 200 Gb/s per node, GCP's machine-type docs).
    let default_gbps = match kind {
        NetKind::Tcpxo => 200.0,
        _ if cc >= 90 => 400.0,
        _ if cc >= 80 => 200.0,
        _ => 100.0,
    };
    let gbps = rate.unwrap_or_else(|| {
        if kind != NetKind::Tcpxo {
            assumed.push(format!(
                "{default_gbps} Gb/s NICs: inter_node_interconnect does not give a rate"
            ));
        }
        default_gbps
    });
    let nics = count.unwrap_or_else(|| {
        let n = if dgx1 { 4 } else { gpus_per_node };
        if kind != NetKind::Tcpxo {
            assumed.push(format!(
                "{n} NICs per node: inter_node_interconnect does not give a count"
            ));
        }
        n
    });
    Network {
        kind,
        nics_per_node: nics,
        gbps_per_nic: gbps,
    }
}

/// The bundled profile of a GPU model: the one fitted on its own tables, else the NCCL model's
/// own constants (`default`).
fn profile_of(gpu: &GpuModel, intra: Intra) -> &'static str {
    match gpu.name {
        "H200" => "h200_sxm_node",
        "H100" | "H800" | "GH200" => "h100_sxm_node",
        "A100" | "A800" if intra == Intra::NvSwitch => "a100_sxm_node",
        "B200" | "B100" | "GB200" => "b200_sxm_node",
        "2080" if intra == (Intra::Pcie { p2p: false }) => "rtx2080ti_pcie_box",
        _ => "default",
    }
}

/// The bundled profile whose compute section is a GPU model's (for training steps): its
/// datasheet peaks and nominal efficiencies.
pub fn compute_profile(gpu: &GpuModel) -> Result<&'static str, String> {
    match gpu.name {
        "V100" => Ok("v100_dgx1_public"),
        "H200" => Ok("h200_sxm_node"),
        "H100" | "H800" | "GH200" => Ok("h100_sxm_node"),
        "A100" | "A800" => Ok("a100_sxm_node"),
        "B200" | "B100" | "GB200" => Ok("b200_sxm_node"),
        other => Err(format!(
            "system: a GPU with a bundled compute profile (V100, A100, H100, H200, B200) for \
             a training step, got {other}"
        )),
    }
}

/// The file model each bundled topology names, so that `gpu` is set only where it differs.
fn file_gpu(topology: &str) -> &'static str {
    match topology {
        "hgx_h100" | "h100_rail_cluster" | "gcp_a3mega" => "H100",
        "dgx_a100" => "A100",
        "hgx_b200" => "B200",
        "pcie_box_2gpu" => "2080",
        _ => "",
    }
}

fn pcie_gbps(gpu: &GpuModel) -> f64 {
    // x16 payload rate: GT/s × 16 lanes × 128/130 / 8.
    (gpu.pcie_gt_per_s * 16.0 * 128.0 / 130.0 / 8.0 * 100.0).round() / 100.0
}

impl SystemSpec {
    /// What dtsim replays this system on, or why it cannot.
    pub fn replay(&self) -> Result<Replay, String> {
        let mut set = Vec::new();
        let mut assumed = self.assumed.clone();
        let g = &self.gpu;
        let cc = g.compute_capability;
        let nvlink_gbps = g.nvlink_bytes_per_s / 1e9 * g.nvlinks as f64;
        let (topology, collective, nvls_capable) =
            match (self.intra, self.network) {
                (Intra::NvSwitch, None) => {
                    // Other generations on a switch (DGX-2's 16 V100) take the HGX H100 board
                    // with their own NVLink and PCIe rates.
                    let (topology, board_gbps, board_pcie) = match cc {
                        100.. => ("hgx_b200", 900.0, 63.0),
                        80..=85 => ("dgx_a100", 300.0, 31.5),
                        _ => ("hgx_h100", 450.0, 63.0),
                    };
                    if (nvlink_gbps - board_gbps).abs() > 1e-6 {
                        set.push(format!(
                            "topology.generator.nvlink.bandwidth={nvlink_gbps}GB/s"
                        ));
                    }
                    let pcie = pcie_gbps(g);
                    if (pcie - board_pcie).abs() > 0.5 {
                        set.push(format!("topology.generator.pcie.bandwidth={pcie}GB/s"));
                    }
                    if self.gpus > 8 {
                        set.push(format!("topology.generator.gpus={}", self.gpus));
                    }
                    (topology, "", cc >= 90)
                }
                (Intra::NvSwitch, Some(net)) if net.kind == NetKind::Tcpxo => {
                    if cc != 90 {
                        return Err(format!(
                            "gpu: GPUDirect-TCPXO nodes are A3 Mega (H100); got {}",
                            g.name
                        ));
                    }
                    set.push(format!("topology.generator.nodes={}", self.nodes));
                    if self.gpus_per_node != 8 {
                        set.push(format!(
                            "topology.generator.gpus_per_node={}",
                            self.gpus_per_node
                        ));
                    }
                    ("gcp_a3mega", GCP_TCPXO_NCCL, false)
                }
                (Intra::NvSwitch, Some(net)) => {
                    set.push(format!("topology.generator.nodes={}", self.nodes));
                    if self.gpus_per_node != 8 {
                        set.push(format!(
                            "topology.generator.gpus_per_node={}",
                            self.gpus_per_node
                        ));
                    }
                    if (nvlink_gbps - 450.0).abs() > 1e-6 {
                        set.push(format!(
                            "topology.generator.nvlink.bandwidth={nvlink_gbps}GB/s"
                        ));
                    }
                    let pcie = pcie_gbps(g);
                    if (pcie - 63.0).abs() > 0.5 {
                        set.push(format!("topology.generator.pcie.bandwidth={pcie}GB/s"));
                    }
                    // The rail generator gives every GPU its own NIC: fewer, faster NICs are played
                    // as one per GPU carrying the node's total.
                    let per_gpu =
                        net.gbps_per_nic * net.nics_per_node as f64 / self.gpus_per_node as f64;
                    if net.nics_per_node != self.gpus_per_node {
                        assumed.push(format!(
                            "{} NICs of {} Gb/s per node played as one per GPU of {per_gpu} Gb/s",
                            net.nics_per_node, net.gbps_per_nic
                        ));
                    }
                    let class = if net.kind == NetKind::Ethernet {
                        "ethernet"
                    } else {
                        "ib"
                    };
                    for link in ["nic_link", "spine_link"] {
                        set.push(format!("topology.generator.{link}.bandwidth={per_gpu}Gbps"));
                        set.push(format!("topology.generator.{link}.class={class}"));
                    }
                    ("h100_rail_cluster", "", false)
                }
                (Intra::HybridCubeMesh, net) => {
                    if self.gpus_per_node > 8 || (self.nodes > 1 && self.gpus_per_node != 8) {
                        return Err(format!(
                            "gpus_per_node: 8 per DGX-1 hybrid cube mesh node (fewer only on one \
                         node), got {}",
                            self.gpus_per_node
                        ));
                    }
                    let topology = match (cc, net) {
                        (60, None) => "dgx1_p100",
                        (_, None) => "dgx1_v100",
                        (_, Some(_)) => "dgx1_v100_x2",
                    };
                    if let Some(net) = net {
                        if net.nics_per_node != 4 {
                            return Err(format!(
                                "inter_node_interconnect: 4 NICs per DGX-1 node, got {}",
                                net.nics_per_node
                            ));
                        }
                        set.push(format!("topology.generator.nodes={}", self.nodes));
                        set.push(format!(
                            "topology.generator.nic_link.bandwidth={}Gbps",
                            net.gbps_per_nic
                        ));
                        if cc == 60 {
                            set.push(format!(
                                "topology.generator.nvlink.bandwidth={}GB/s",
                                g.nvlink_bytes_per_s / 1e9
                            ));
                        }
                    }
                    (topology, "", false)
                }
                (Intra::Pcie { p2p }, None) => {
                    if self.gpus != 2 {
                        set.push(format!("topology.generator.gpus={}", self.gpus));
                    }
                    let pcie = pcie_gbps(g);
                    if (pcie - 15.75).abs() > 0.5 {
                        set.push(format!("topology.generator.pcie.bandwidth={pcie}GB/s"));
                        set.push(format!(
                            "topology.generator.switch_uplink.bandwidth={pcie}GB/s"
                        ));
                    }
                    if p2p {
                        set.push("topology.generator.p2p=true".into());
                    }
                    ("pcie_box_2gpu", "", false)
                }
                (Intra::Pcie { .. }, Some(_)) => return Err(
                    "num_nodes: PCIe GPUs on one node (dtsim has no cluster of PCIe boxes), got \
                     more"
                        .into(),
                ),
            };
        if file_gpu(topology) != g.name {
            set.push(format!("topology.gpu=\"{}\"", g.name));
        }
        let profile = if self.network.is_some_and(|n| n.kind == NetKind::Tcpxo) {
            "gcp_a3mega_2node_h100"
        } else {
            profile_of(g, self.intra)
        };
        if profile == "default" {
            assumed.push(format!(
                "NCCL's own constants: no bundled profile was fitted on {} tables",
                g.name
            ));
        }
        Ok(Replay {
            topology,
            set,
            profile,
            collective,
            nvls_capable,
            assumed,
        })
    }
}
