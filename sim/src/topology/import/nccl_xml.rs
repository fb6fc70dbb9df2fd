//! NCCL's topology XML (`NCCL_TOPO_DUMP_FILE`, `NCCL_TOPO_FILE`) → [`NodeFile`].
//!
//! What the elements mean, read from NCCL's `src/graph/topo.cc` and `xml.cc` (facts, not code):
//! - `<cpu numaid>`: a NUMA node; CPUs are joined pairwise (NCCL's `SYS` link).
//! - `<pci busid class link_speed link_width>`: a PCIe device or bridge, linked to its parent
//!   at `link_speed` × `link_width` (a width of 0 counts as 16 and an unknown speed as 8 GT/s,
//!   as NCCL does). A `<pci>` holding a `<gpu>` is that GPU, one holding a `<nic>` that NIC,
//!   one holding `<pci>` children a PCIe switch; a leaf with neither (an NVMe drive) is left out.
//! - `<gpu dev sm>` with `<nvlink target count tclass>`: `count` NVLinks to the device at PCI
//!   bus id `target`; `tclass` 0x068000 is an NVSwitch, 0x03.... a GPU, 0x068001 the CPU. NCCL
//!   merges every NVSwitch into one node, and so does the import: one `nvswitch` device, each
//!   GPU linked to it with the sum of its NVSwitch links (which is also how the bundled
//!   hand-written topologies model the non-blocking NVSwitch fabric).
//! - `<nic>` with `<net name dev speed>`: a NIC port; `speed` in Mbit/s (noted in the file, for
//!   the cluster generators' `nic_link`).
//!
//! Bandwidths are physical rates (PCIe payload rate after line coding, NVLink datasheet rate
//! per link by GPU model), not NCCL's own reduced estimates: efficiency is the calibration
//! profile's business.

use std::collections::BTreeMap;

use super::{pcie_bytes_per_s, ImportError, NodeDevice, NodeFile, NodeLink};
use crate::topology::gpu_models;
use crate::topology::{DeviceKind, LinkClass};

/// Reads NCCL topology XML text; `origin` (the file) is named in errors and in the header.
pub fn parse(text: &str, origin: &str) -> Result<NodeFile, ImportError> {
    let doc = roxmltree::Document::parse(text).map_err(|e| {
        let p = e.pos();
        ImportError::new(
            origin,
            Some(format!("{}:{}", p.row, p.col)),
            format!("well-formed NCCL topology XML ({e})"),
        )
    })?;
    let root = doc.root_element();
    let mut r = Reader {
        doc: &doc,
        origin,
        devices: Vec::new(),
        links: Vec::new(),
        gpus: BTreeMap::new(),
        gpu_model: None,
        nvlinks: Vec::new(),
        skipped: Vec::new(),
        switches: 0,
        nics: Vec::new(),
        cpu: String::new(),
    };
    if root.tag_name().name() != "system" {
        return Err(r.error(root, "a <system> root element"));
    }
    let mut cpus = Vec::new();
    for (i, cpu) in elements(root).enumerate() {
        if cpu.tag_name().name() != "cpu" {
            return Err(r.error(cpu, "a <cpu> element (NUMA node) inside <system>"));
        }
        let numa = cpu.attribute("numaid").unwrap_or("");
        let name = match numa.parse::<i64>() {
            Ok(n) if n >= 0 => format!("cpu{n}"),
            _ => format!("cpu{i}"),
        };
        if cpus.iter().any(|(n, _)| *n == name) {
            return Err(r.error(cpu, format!("a unique numaid; {name} appears twice")));
        }
        r.devices.push(NodeDevice {
            staged_via: None,
            name: name.clone(),
            kind: DeviceKind::Host,
            origin: format!(
                "<cpu numaid={numa:?}> {} {}",
                cpu.attribute("vendor").unwrap_or(""),
                cpu.attribute("arch").unwrap_or("")
            ),
        });
        r.cpu = name.clone();
        for child in elements(cpu) {
            r.child(child, &name)?;
        }
        cpus.push((name, cpu));
    }
    if r.gpus.is_empty() {
        return Err(ImportError::new(
            origin,
            None,
            "at least one <gpu> (inside a <pci> of a <cpu>); the file lists none",
        ));
    }
    r.connect_nvlinks()?;
    for i in 0..cpus.len() {
        for j in i + 1..cpus.len() {
            let (bw, what) = inter_cpu_bytes_per_s(cpus[i].1);
            r.links.push(NodeLink {
                a: cpus[i].0.clone(),
                b: cpus[j].0.clone(),
                bytes_per_s: bw,
                count: 1,
                class: LinkClass::Smp,
                origin: what,
            });
        }
    }
    Ok(r.finish(cpus.len()))
}

struct Reader<'a, 'input> {
    doc: &'a roxmltree::Document<'input>,
    origin: &'a str,
    devices: Vec<NodeDevice>,
    links: Vec<NodeLink>,
    /// PCI bus id (lower case) → (GPU device name, its CPU, NVLink rate per link).
    gpus: BTreeMap<String, (String, String, f64)>,
    gpu_model: Option<&'static str>,
    /// (GPU name, its CPU, rate per link, target bus id, count, tclass, element position).
    nvlinks: Vec<(String, String, f64, String, u32, u32, String)>,
    skipped: Vec<String>,
    switches: u32,
    /// (NIC device name, port speed Mbit/s).
    nics: Vec<(String, u64)>,
    /// The `cpuN` being read.
    cpu: String,
}

fn elements<'a, 'i>(n: roxmltree::Node<'a, 'i>) -> impl Iterator<Item = roxmltree::Node<'a, 'i>> {
    n.children().filter(|c| c.is_element())
}

impl Reader<'_, '_> {
    fn at(&self, n: roxmltree::Node) -> String {
        let p = self.doc.text_pos_at(n.range().start);
        format!("{}:{} <{}>", p.row, p.col, n.tag_name().name())
    }

    fn error(&self, n: roxmltree::Node, expected: impl Into<String>) -> ImportError {
        ImportError::new(self.origin, Some(self.at(n)), expected)
    }

    fn attr<'n>(&self, n: roxmltree::Node<'n, '_>, key: &str) -> Result<&'n str, ImportError> {
        n.attribute(key)
            .ok_or_else(|| self.error(n, format!("a {key}=\"...\" attribute")))
    }

    fn uint(&self, n: roxmltree::Node, key: &str) -> Result<u64, ImportError> {
        let v = self.attr(n, key)?;
        v.trim()
            .parse::<u64>()
            .map_err(|_| self.error(n, format!("{key}: a non-negative whole number, got {v:?}")))
    }

    /// A child of a `<cpu>` or of a bridge `<pci>` named `parent`.
    fn child(&mut self, n: roxmltree::Node, parent: &str) -> Result<(), ImportError> {
        match n.tag_name().name() {
            "pci" => self.pci(n, parent),
            // A NIC without PCIe information hangs off its CPU at its own port speed.
            "nic" => self.nic_ports(n, parent, None),
            "gpu" => Err(self.error(
                n,
                "a <gpu> inside a <pci> element (which gives its PCIe link); found it directly \
                 under a <cpu>",
            )),
            other => Err(self.error(
                n,
                format!("a <pci> or <nic> element here (NCCL's node types), got <{other}>"),
            )),
        }
    }

    /// The ports (`<net>`) of a `<nic>`, each a NIC device linked to `parent` over `pcie`
    /// (bytes/s, where it came from), or at its own port speed when no `<pci>` gives one.
    fn nic_ports(
        &mut self,
        nic: roxmltree::Node,
        parent: &str,
        pcie: Option<(f64, &str)>,
    ) -> Result<(), ImportError> {
        for net in elements(nic) {
            let speed = self.net_speed(net)?;
            let name = self.add_nic(net)?;
            let (bytes_per_s, origin) = pcie.unwrap_or((
                speed as f64 * 1e6 / 8.0,
                "no <pci> around this <nic>: its port speed",
            ));
            self.links.push(NodeLink {
                a: name.clone(),
                b: parent.to_string(),
                bytes_per_s,
                count: 1,
                class: LinkClass::Pcie,
                origin: origin.to_string(),
            });
            self.nics.push((name, speed));
        }
        Ok(())
    }

    fn net_speed(&self, net: roxmltree::Node) -> Result<u64, ImportError> {
        if net.tag_name().name() != "net" {
            return Err(self.error(net, "a <net> element inside <nic>"));
        }
        let speed = self.uint(net, "speed")?;
        crate::limits::bandwidth_bps(speed as f64 * 1e6)
            .map_err(|e| self.error(net, format!("speed (Mbit/s): {e}")))?;
        Ok(speed)
    }

    fn add_nic(&mut self, net: roxmltree::Node) -> Result<String, ImportError> {
        let dev = self.uint(net, "dev")?;
        let name = format!("nic{dev}");
        if self.devices.iter().any(|d| d.name == name) {
            return Err(self.error(net, format!("a unique dev; {name} appears twice")));
        }
        self.devices.push(NodeDevice {
            staged_via: None,
            name: name.clone(),
            kind: DeviceKind::Nic,
            origin: format!(
                "{} port {}, {} Mbit/s",
                net.attribute("name").unwrap_or("?"),
                net.attribute("port").unwrap_or("?"),
                net.attribute("speed").unwrap_or("?")
            ),
        });
        Ok(name)
    }

    /// The PCIe link of a `<pci>` element to its parent, bytes/s, and where that came from.
    fn pci_link(&self, n: roxmltree::Node) -> Result<(f64, String), ImportError> {
        let width_text = n.attribute("link_width").unwrap_or("0");
        let width: u32 = width_text
            .trim()
            .parse()
            .map_err(|_| self.error(n, format!("link_width: a lane count, got {width_text:?}")))?;
        let speed_text = n.attribute("link_speed").unwrap_or("");
        let gts: Option<f64> = speed_text
            .split_whitespace()
            .next()
            .and_then(|t| t.parse().ok())
            .filter(|g: &f64| *g > 0.0 && *g <= 128.0);
        let lanes = if width == 0 { 16 } else { width };
        let speed = gts.unwrap_or(8.0);
        let mut what = format!("PCIe {speed} GT/s x{lanes}");
        if width == 0 || gts.is_none() {
            what += &format!(
                " (link_speed {speed_text:?} link_width {width_text:?}: NCCL reads a missing \
                 width as 16 lanes and an unknown speed as 8 GT/s)"
            );
        }
        Ok((pcie_bytes_per_s(speed, lanes), what))
    }

    fn pci(&mut self, n: roxmltree::Node, parent: &str) -> Result<(), ImportError> {
        let busid = self.attr(n, "busid")?.to_ascii_lowercase();
        let (bw, what) = self.pci_link(n)?;
        let kids: Vec<_> = elements(n).collect();
        let gpu = kids.iter().find(|k| k.tag_name().name() == "gpu");
        let nic = kids.iter().find(|k| k.tag_name().name() == "nic");
        let link = |a: String, b: &str| NodeLink {
            a,
            b: b.to_string(),
            bytes_per_s: bw,
            count: 1,
            class: LinkClass::Pcie,
            origin: what.clone(),
        };
        if let Some(&g) = gpu {
            let name = self.gpu(n, g, &busid, parent)?;
            self.links.push(link(name, parent));
            return Ok(());
        }
        if let Some(&nic) = nic {
            return self.nic_ports(nic, parent, Some((bw, &what)));
        }
        if kids.is_empty() {
            self.skipped.push(format!(
                "{busid} (class {})",
                n.attribute("class").unwrap_or("?")
            ));
            return Ok(());
        }
        let name = format!("pcisw{}", self.switches);
        self.switches += 1;
        self.devices.push(NodeDevice {
            staged_via: None,
            name: name.clone(),
            kind: DeviceKind::PcieSwitch,
            origin: format!("PCI bridge {busid}"),
        });
        self.links.push(link(name.clone(), parent));
        for k in kids {
            if k.tag_name().name() != "pci" {
                return Err(self.error(
                    k,
                    format!(
                        "a <pci> element inside a PCIe bridge, got <{}>",
                        k.tag_name().name()
                    ),
                ));
            }
            self.pci(k, &name)?;
        }
        Ok(())
    }

    /// A `<gpu>` inside the `<pci>` element `pci`: its device; its NVLinks are connected once
    /// every GPU is known.
    fn gpu(
        &mut self,
        pci: roxmltree::Node,
        g: roxmltree::Node,
        busid: &str,
        parent: &str,
    ) -> Result<String, ImportError> {
        let dev = self.uint(g, "dev")?;
        let sm = self.uint(g, "sm")? as u32;
        let name = format!("gpu{dev}");
        if self.devices.iter().any(|d| d.name == name) {
            return Err(self.error(g, format!("a unique dev; {name} appears twice")));
        }
        let pci_device = pci
            .attribute("device")
            .and_then(|d| u32::from_str_radix(d.trim_start_matches("0x"), 16).ok());
        let model = pci_device.and_then(gpu_models::name_of_pci_device);
        if let Some(m) = model {
            match self.gpu_model {
                Some(prev) if prev != m => {
                    return Err(self.error(
                        pci,
                        format!("GPUs of one model (dtsim names one per topology); {prev} and {m}"),
                    ))
                }
                _ => self.gpu_model = Some(m),
            }
        }
        let rate = model
            .and_then(gpu_models::by_name)
            .map(|m| m.nvlink_bytes_per_s)
            .filter(|r| *r > 0.0)
            .unwrap_or_else(|| gpu_models::nvlink_rate_of_compute_capability(sm));
        self.devices.push(NodeDevice {
            staged_via: None,
            name: name.clone(),
            kind: DeviceKind::Gpu,
            origin: format!(
                "{busid}, sm {sm}, {}",
                model.unwrap_or("model not in dtsim's PCI id table")
            ),
        });
        let cpu = self.cpu.clone();
        self.gpus
            .insert(busid.to_string(), (name.clone(), cpu.clone(), rate));
        let _ = parent;
        for l in elements(g) {
            match l.tag_name().name() {
                "nvlink" => {
                    let target = self.attr(l, "target")?.to_ascii_lowercase();
                    let count = self.uint(l, "count")?;
                    let max = super::smi_matrix::MAX_NVLINKS as u64;
                    if !(1..=max).contains(&count) {
                        return Err(
                            self.error(l, format!("count: 1 to {max} NVLinks, got {count}"))
                        );
                    }
                    let count = count as u32;
                    let tclass_text = self.attr(l, "tclass")?;
                    let tclass = u32::from_str_radix(tclass_text.trim_start_matches("0x"), 16)
                        .map_err(|_| {
                            self.error(
                                l,
                                format!("tclass: a PCI class in hex, got {tclass_text:?}"),
                            )
                        })?;
                    let at = self.at(l);
                    self.nvlinks
                        .push((name.clone(), cpu.clone(), rate, target, count, tclass, at));
                }
                // Grace–Hopper/Blackwell chip-to-chip link to the CPU: not modelled here.
                "c2c" => self.skipped.push(format!("{name} <c2c> link")),
                other => {
                    return Err(self.error(
                        l,
                        format!("an <nvlink> or <c2c> element inside <gpu>, got <{other}>"),
                    ))
                }
            }
        }
        Ok(name)
    }

    fn connect_nvlinks(&mut self) -> Result<(), ImportError> {
        let mut to_switch: BTreeMap<String, (u32, f64)> = BTreeMap::new();
        let mut peers: BTreeMap<(String, String), (u32, f64)> = BTreeMap::new();
        let mut to_cpu: BTreeMap<(String, String), (u32, f64)> = BTreeMap::new();
        for (gpu, cpu, rate, target, count, tclass, at) in std::mem::take(&mut self.nvlinks) {
            let kind = if tclass == 0x068001 {
                "cpu"
            } else if tclass >> 8 == 0x0680 {
                "nvswitch"
            } else if tclass >> 16 == 0x03 {
                "gpu"
            } else {
                ""
            };
            match kind {
                "nvswitch" => {
                    let e = to_switch.entry(gpu).or_insert((0, rate));
                    e.0 += count;
                }
                "gpu" => {
                    let Some((peer, _, _)) = self.gpus.get(&target) else {
                        return Err(ImportError::new(
                            self.origin,
                            Some(at),
                            format!(
                                "target: the bus id of a <pci> holding a <gpu>; no GPU is at \
                                 {target}"
                            ),
                        ));
                    };
                    let key = if gpu < *peer {
                        (gpu, peer.clone())
                    } else {
                        (peer.clone(), gpu)
                    };
                    // Listed on both GPUs: keep one bundle (the larger count if they differ).
                    let e = peers.entry(key).or_insert((0, rate));
                    e.0 = e.0.max(count);
                }
                "cpu" => {
                    to_cpu.insert((gpu, cpu), (count, rate));
                }
                _ => {
                    return Err(ImportError::new(
                        self.origin,
                        Some(at),
                        format!(
                            "tclass: 0x068000 (NVSwitch), 0x030200 (GPU) or 0x068001 (CPU), \
                             got {tclass:#08x}"
                        ),
                    ))
                }
            }
        }
        if !to_switch.is_empty() {
            self.devices.push(NodeDevice {
                staged_via: None,
                name: "nvswitch".into(),
                kind: DeviceKind::Nvswitch,
                origin: "every NVSwitch chip of the dump, merged into one as NCCL does".into(),
            });
        }
        for (gpu, (count, rate)) in to_switch {
            self.links
                .push(nvlink(gpu, "nvswitch".into(), count, rate, "to NVSwitches"));
        }
        for ((a, b), (count, rate)) in peers {
            self.links.push(nvlink(a, b, count, rate, "GPU to GPU"));
        }
        for ((gpu, cpu), (count, rate)) in to_cpu {
            self.links.push(nvlink(gpu, cpu, count, rate, "to the CPU"));
        }
        Ok(())
    }

    fn finish(mut self, cpus: usize) -> NodeFile {
        // GPUs first (by dev), then NVSwitch, NICs, CPUs and PCIe switches, in input order.
        let order = |k: DeviceKind| match k {
            DeviceKind::Gpu => 0,
            DeviceKind::Nvswitch => 1,
            DeviceKind::Nic => 2,
            DeviceKind::Host => 3,
            _ => 4,
        };
        let index = |n: &str| -> u64 {
            n.trim_start_matches(|c: char| !c.is_ascii_digit())
                .parse()
                .unwrap_or(0)
        };
        self.devices
            .sort_by_key(|d| (order(d.kind), index(&d.name)));
        let gpus = self.gpus.len();
        let gpu = self.gpu_model.map(str::to_string);
        let mut notes = vec![
            format!(
                "Imported by `dtsim topo import` from {} (NCCL topology XML).",
                self.origin
            ),
            format!(
                "{gpus} GPUs ({}), {} NICs, {cpus} CPUs, {} PCIe switches{}.",
                gpu.as_deref()
                    .unwrap_or("model unknown: add gpu = \"...\" for library = nccl"),
                self.nics.len(),
                self.switches,
                if self.devices.iter().any(|d| d.kind == DeviceKind::Nvswitch) {
                    ", one NVSwitch fabric"
                } else {
                    ""
                }
            ),
            "Bandwidths: PCIe from link_speed x link_width less line coding; NVLink from the \
             datasheet rate per link of the GPU model times the link count; between CPUs \
             NCCL's own inter-socket estimate (topo.h)."
                .to_string(),
        ];
        if !self.nics.is_empty() {
            self.nics.sort_by_key(|(n, _)| index(n));
            let speeds: Vec<String> = self
                .nics
                .iter()
                .map(|(n, s)| format!("{n} {} Gbit/s", *s as f64 / 1000.0))
                .collect();
            notes.push(format!(
                "NIC port speeds (for a cluster generator's nic_link): {}.",
                speeds.join(", ")
            ));
        }
        if !self.skipped.is_empty() {
            notes.push(format!(
                "Left out (neither GPU, NIC nor bridge): {}.",
                self.skipped.join(", ")
            ));
        }
        let description = format!(
            "{gpus}x {} node imported from NCCL's topology XML",
            gpu.as_deref().unwrap_or("GPU")
        );
        NodeFile {
            name: super::name_from_origin(self.origin),
            description,
            gpu,
            notes,
            devices: self.devices,
            links: self.links,
        }
    }
}

fn nvlink(a: String, b: String, count: u32, rate: f64, what: &str) -> NodeLink {
    NodeLink {
        a,
        b,
        bytes_per_s: rate,
        count,
        class: LinkClass::Nvlink,
        origin: format!("{count} NVLinks {what}, {} GB/s each", rate / 1e9),
    }
}

/// NCCL's inter-socket bandwidth estimate for the CPUs of `cpu`'s kind (topo.h: Intel
/// Broadwell QPI 6, Skylake 10, Sapphire Rapids 22, Emerald Rapids 40 GB/s; AMD 16; POWER9 32;
/// Arm 6), in bytes/s, with what it is.
fn inter_cpu_bytes_per_s(cpu: roxmltree::Node) -> (f64, String) {
    let arch = cpu.attribute("arch").unwrap_or("");
    let vendor = cpu.attribute("vendor").unwrap_or("");
    let model: u32 = cpu
        .attribute("modelid")
        .and_then(|m| m.parse().ok())
        .unwrap_or(0);
    let (gbps, what) = match (arch, vendor) {
        ("ppc64", _) => (32.0, "POWER9"),
        ("arm64", _) => (6.0, "Arm"),
        (_, "AuthenticAMD") => (16.0, "AMD"),
        // NCCL's thresholds on the family-6 model id.
        (_, "GenuineIntel") => match model {
            0xCF.. => (40.0, "Intel Emerald Rapids or later"),
            0x8F.. => (22.0, "Intel Sapphire Rapids"),
            0x55.. => (10.0, "Intel Skylake to Ice Lake"),
            _ => (6.0, "Intel Broadwell or earlier"),
        },
        _ => (6.0, "unknown CPU"),
    };
    (
        gbps * 1e9,
        format!("between sockets: NCCL's {what} estimate, {gbps} GB/s"),
    )
}
