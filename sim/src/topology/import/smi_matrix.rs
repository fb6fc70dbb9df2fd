//! `nvidia-smi topo -m` → [`NodeFile`].
//!
//! The matrix says how every two devices connect, not how fast (nvidia-smi's legend):
//! `NV#` a bonded set of # NVLinks; `PIX` at most one PCIe bridge; `PXB` several bridges, no
//! host bridge; `PHB` through a PCIe host bridge (the CPU); `NODE` across host bridges of one
//! NUMA node; `SYS` across the SMP interconnect between NUMA nodes. The import rebuilds the
//! smallest tree that gives those classes:
//! - one host `cpu<N>` per NUMA node (a GPU's `NUMA Affinity`; a NIC takes the NUMA node of a
//!   GPU it reaches without SYS), every two joined by an `smp` link;
//! - devices that are pairwise PIX/PXB share one PCIe switch, linked to their CPU; the rest
//!   link to their CPU directly (host bridges are not told apart: PHB and NODE both meet at
//!   the CPU);
//! - NVLinks: when a GPU's NV# counts add up to more links than its model has (NV12 to each of
//!   7 peers on an A100 with 12), they go through an NVSwitch, and each GPU links to one
//!   `nvswitch` with its NV# links; otherwise they are direct GPU–GPU bundles.
//!
//! Bandwidths come from [`SmiOptions`]: the GPU model's NVLink rate and PCIe generation unless
//! stated, and for SMP NCCL's estimate for a CPU it cannot identify unless stated.

use std::collections::BTreeMap;

use super::{pcie_bytes_per_s, ImportError, NodeDevice, NodeFile, NodeLink};
use crate::topology::gpu_models::{self, GpuModel};
use crate::topology::{DeviceKind, LinkClass};

/// What the matrix does not say.
#[derive(Debug, Clone, PartialEq)]
pub struct SmiOptions {
    /// The GPU model (`"A100-SXM4"`): NVLink rate per link, link count, PCIe generation.
    pub gpu: String,
    /// PCIe bandwidth per link and direction, bytes/s (default: the model's generation, x16).
    pub pcie_bytes_per_s: Option<f64>,
    /// Bandwidth between two NUMA nodes, bytes/s (default: NCCL's 6 GB/s for an unidentified
    /// x86 CPU, topo.h `BDW_QPI_BW`).
    pub smp_bytes_per_s: Option<f64>,
}

/// The most NVLinks between two devices the importers accept.
pub const MAX_NVLINKS: u32 = 64;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Rel {
    Nv(u32),
    Pix,
    Pxb,
    Phb,
    Node,
    Sys,
    SelfCell,
}

fn rel(cell: &str) -> Option<Rel> {
    Some(match cell {
        "X" => Rel::SelfCell,
        "PIX" => Rel::Pix,
        "PXB" => Rel::Pxb,
        "PHB" => Rel::Phb,
        "NODE" => Rel::Node,
        "SYS" | "SOC" => Rel::Sys,
        // A GPU has at most 18 NVLinks today; more than 64 is not a count.
        nv => Rel::Nv(
            nv.strip_prefix("NV")?
                .parse()
                .ok()
                .filter(|n| (1..=MAX_NVLINKS).contains(n))?,
        ),
    })
}

/// Reads `nvidia-smi topo -m` text; `origin` (the file) is named in errors and the header.
pub fn parse(text: &str, origin: &str, opts: &SmiOptions) -> Result<NodeFile, ImportError> {
    let model: GpuModel = gpu_models::by_name(&opts.gpu).ok_or_else(|| {
        ImportError::new(
            origin,
            None,
            format!(
                "--gpu: a GPU model dtsim knows (H100-SXM5, H200, A100-SXM4, V100-SXM2, B200, \
                 ...), got {:?}",
                opts.gpu
            ),
        )
    })?;
    let lines: Vec<&str> = text.lines().collect();
    let (header_at, header) = lines
        .iter()
        .enumerate()
        .find(|(_, l)| l.split_whitespace().next() == Some("GPU0"))
        .ok_or_else(|| {
            ImportError::new(
                origin,
                None,
                "a header line of device columns starting with GPU0 (nvidia-smi topo -m)",
            )
        })?;
    let columns: Vec<&str> = header
        .split_whitespace()
        .take_while(|t| *t != "CPU")
        .collect();
    let n = columns.len();
    // NIC legend ("NIC0: mlx5_0"), when printed.
    let legend: BTreeMap<&str, &str> = lines
        .iter()
        .filter_map(|l| {
            let (k, v) = l.trim().split_once(':')?;
            columns.contains(&k.trim()).then_some((k.trim(), v.trim()))
        })
        .collect();
    let mut matrix = vec![vec![Rel::SelfCell; n]; n];
    let mut numa: Vec<Option<u32>> = vec![None; n];
    let mut seen = vec![false; n];
    for (li, line) in lines.iter().enumerate().skip(header_at + 1) {
        let mut tokens = line.split_whitespace();
        let Some(first) = tokens.next() else { continue };
        let Some(row) = columns.iter().position(|c| *c == first) else {
            continue;
        };
        let at = || Some(format!("{}", li + 1));
        let cells: Vec<&str> = tokens.collect();
        if cells.len() < n {
            return Err(ImportError::new(
                origin,
                at(),
                format!("{n} cells on the row of {first}, got {}", cells.len()),
            ));
        }
        for (col, cell) in cells[..n].iter().enumerate() {
            let r = rel(cell).ok_or_else(|| {
                ImportError::new(
                    origin,
                    at(),
                    format!(
                        "{first} to {}: X, NV# (1 to 64), PIX, PXB, PHB, NODE or SYS, got {cell:?}",
                        columns[col]
                    ),
                )
            })?;
            if (r == Rel::SelfCell) != (col == row) {
                return Err(ImportError::new(
                    origin,
                    at(),
                    format!("{first} to {}: X exactly on the diagonal", columns[col]),
                ));
            }
            matrix[row][col] = r;
        }
        // GPU rows: CPU affinity, then NUMA affinity (a number, or N/A).
        if first.starts_with("GPU") {
            numa[row] = cells
                .get(n + 1)
                .and_then(|t| t.parse().ok())
                .filter(|&k: &u32| k < 1 << 16);
        }
        seen[row] = true;
    }
    if let Some(missing) = seen.iter().position(|s| !s) {
        return Err(ImportError::new(
            origin,
            None,
            format!("a row for every column; none for {}", columns[missing]),
        ));
    }
    for i in 0..n {
        for j in 0..n {
            if matrix[i][j] != matrix[j][i] {
                return Err(ImportError::new(
                    origin,
                    None,
                    format!(
                        "a symmetric matrix; {} to {} is {:?} but {} to {} is {:?}",
                        columns[i], columns[j], matrix[i][j], columns[j], columns[i], matrix[j][i]
                    ),
                ));
            }
        }
    }
    build(origin, opts, model, &columns, &legend, &matrix, numa)
}

// Pairs (i, j) index the square matrix and the per-device vectors together.
#[allow(clippy::needless_range_loop)]
fn build(
    origin: &str,
    opts: &SmiOptions,
    model: GpuModel,
    columns: &[&str],
    legend: &BTreeMap<&str, &str>,
    matrix: &[Vec<Rel>],
    numa: Vec<Option<u32>>,
) -> Result<NodeFile, ImportError> {
    let n = columns.len();
    let is_gpu: Vec<bool> = columns.iter().map(|c| c.starts_with("GPU")).collect();
    let mut notes = vec![format!(
        "Imported by `dtsim topo import` from {origin} (nvidia-smi topo -m), GPU model {} \
         (stated).",
        opts.gpu
    )];
    // NUMA node of devices without one: that of a device reached without crossing SMP; those
    // that reach everything across SMP go on a NUMA node of their own.
    let spare = numa
        .iter()
        .flatten()
        .max()
        .map_or(0, |m| m.saturating_add(1));
    let mut unplaced = Vec::new();
    let numa: Vec<u32> = (0..n)
        .map(|i| {
            numa[i]
                .or_else(|| {
                    (0..n)
                        .filter(|&j| !matches!(matrix[i][j], Rel::Sys | Rel::SelfCell))
                        .find_map(|j| numa[j])
                })
                .unwrap_or_else(|| {
                    unplaced.push(columns[i]);
                    spare
                })
        })
        .collect();
    if !unplaced.is_empty() {
        notes.push(format!(
            "{} reach every GPU across SMP and name no NUMA node: placed on cpu{spare}.",
            unplaced.join(", ")
        ));
    }
    let name_of = |i: usize| -> String {
        let c = columns[i];
        match c.strip_prefix("GPU") {
            Some(k) => format!("gpu{k}"),
            None => match c.strip_prefix("NIC") {
                Some(k) => format!("nic{k}"),
                None => c.replace(|ch: char| !ch.is_ascii_alphanumeric(), "_"),
            },
        }
    };
    let mut devices = Vec::new();
    let mut links = Vec::new();
    for i in 0..n {
        devices.push(NodeDevice {
            staged_via: None,
            name: name_of(i),
            kind: if is_gpu[i] {
                DeviceKind::Gpu
            } else {
                DeviceKind::Nic
            },
            origin: format!(
                "{}{}",
                columns[i],
                legend
                    .get(columns[i])
                    .map(|l| format!(" ({l})"))
                    .unwrap_or_default()
            ),
        });
    }
    let mut cpus: Vec<u32> = numa.clone();
    cpus.sort_unstable();
    cpus.dedup();
    for c in &cpus {
        devices.push(NodeDevice {
            staged_via: None,
            name: format!("cpu{c}"),
            kind: DeviceKind::Host,
            origin: format!("NUMA node {c}"),
        });
    }
    let pcie = opts
        .pcie_bytes_per_s
        .unwrap_or_else(|| pcie_bytes_per_s(model.pcie_gt_per_s, 16));
    let pcie_origin = match opts.pcie_bytes_per_s {
        Some(_) => "PCIe, stated".to_string(),
        None => format!(
            "PCIe {} GT/s x16, the {} host interface",
            model.pcie_gt_per_s, model.name
        ),
    };
    // PCIe switches: devices pairwise PIX or PXB (transitively) share one.
    let mut group: Vec<usize> = (0..n).collect();
    fn find(g: &mut [usize], i: usize) -> usize {
        let mut r = i;
        while g[r] != r {
            r = g[r];
        }
        g[i] = r;
        r
    }
    for i in 0..n {
        for j in 0..n {
            if matches!(matrix[i][j], Rel::Pix | Rel::Pxb) {
                let (a, b) = (find(&mut group, i), find(&mut group, j));
                group[a] = b;
            }
        }
    }
    let mut switches: BTreeMap<usize, String> = BTreeMap::new();
    for i in 0..n {
        let root = find(&mut group, i);
        let members = (0..n).filter(|&j| find(&mut group, j) == root).count();
        let cpu = format!("cpu{}", numa[i]);
        let parent = if members > 1 {
            let next = switches.len();
            let sw = switches.entry(root).or_insert_with(|| {
                let name = format!("pcisw{next}");
                devices.push(NodeDevice {
                    staged_via: None,
                    name: name.clone(),
                    kind: DeviceKind::PcieSwitch,
                    origin: "PCIe switch shared by devices PIX/PXB to each other".into(),
                });
                links.push(NodeLink {
                    a: name.clone(),
                    b: cpu.clone(),
                    bytes_per_s: pcie,
                    count: 1,
                    class: LinkClass::Pcie,
                    origin: pcie_origin.clone(),
                });
                name
            });
            sw.clone()
        } else {
            cpu
        };
        links.push(NodeLink {
            a: name_of(i),
            b: parent,
            bytes_per_s: pcie,
            count: 1,
            class: LinkClass::Pcie,
            origin: pcie_origin.clone(),
        });
    }
    // NVLinks.
    let gpus: Vec<usize> = (0..n).filter(|&i| is_gpu[i]).collect();
    let nv = |i: usize, j: usize| match matrix[i][j] {
        Rel::Nv(k) => k,
        _ => 0,
    };
    let switched = gpus.iter().any(|&i| {
        let total: u32 = gpus.iter().map(|&j| nv(i, j)).sum();
        total > model.nvlinks
    });
    let rate = model.nvlink_bytes_per_s;
    if switched {
        devices.push(NodeDevice {
            staged_via: None,
            name: "nvswitch".into(),
            kind: DeviceKind::Nvswitch,
            origin: format!(
                "NV# counts add up to more than the {} links of a {}: an NVSwitch fabric",
                model.nvlinks, model.name
            ),
        });
        for &i in &gpus {
            let count = gpus.iter().map(|&j| nv(i, j)).max().unwrap_or(0);
            if count > 0 {
                links.push(NodeLink {
                    a: name_of(i),
                    b: "nvswitch".into(),
                    bytes_per_s: rate,
                    count,
                    class: LinkClass::Nvlink,
                    origin: format!("NV{count} to the NVSwitch, {} GB/s each", rate / 1e9),
                });
            }
        }
    } else {
        for (a, &i) in gpus.iter().enumerate() {
            for &j in &gpus[a + 1..] {
                let count = nv(i, j);
                if count > 0 {
                    links.push(NodeLink {
                        a: name_of(i),
                        b: name_of(j),
                        bytes_per_s: rate,
                        count,
                        class: LinkClass::Nvlink,
                        origin: format!("NV{count}, {} GB/s each", rate / 1e9),
                    });
                }
            }
        }
    }
    let smp = opts.smp_bytes_per_s.unwrap_or(6e9);
    for (a, ca) in cpus.iter().enumerate() {
        for cb in &cpus[a + 1..] {
            links.push(NodeLink {
                a: format!("cpu{ca}"),
                b: format!("cpu{cb}"),
                bytes_per_s: smp,
                count: 1,
                class: LinkClass::Smp,
                origin: match opts.smp_bytes_per_s {
                    Some(_) => "between NUMA nodes, stated".into(),
                    None => "between NUMA nodes: NCCL's 6 GB/s for an unidentified x86 CPU \
                             (state --smp)"
                        .into(),
                },
            });
        }
    }
    notes.push(format!(
        "{} GPUs, {} NICs, {} NUMA nodes, {} PCIe switches{}. Host bridges are not told apart \
         (PHB and NODE meet at the CPU).",
        gpus.len(),
        n - gpus.len(),
        cpus.len(),
        switches.len(),
        if switched {
            ", one NVSwitch fabric"
        } else {
            ""
        }
    ));
    let gpu_name = opts.gpu.clone();
    Ok(NodeFile {
        name: super::name_from_origin(origin),
        description: format!(
            "{}x {gpu_name} node imported from nvidia-smi topo -m",
            gpus.len()
        ),
        gpu: Some(gpu_name),
        notes,
        devices,
        links,
    })
}
