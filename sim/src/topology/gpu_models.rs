//! GPU models as a topology needs them: compute capability, NVLink rate and link count, and the
//! PCI device ids that name them in NCCL's topology dumps.
//!
//! One table, read by the NCCL library model (constants by GPU generation) and by the
//! topology importers (NVLink bandwidth from a link count, the model behind a PCI id). Facts
//! from vendor datasheets (general knowledge): NVLink1 (P100) 4 links × 20 GB/s per direction;
//! NVLink2 (V100) 6 × 25; NVLink3 (A100) 12 × 25; NVLink4 (H100/H200) 18 × 25; NVLink5 (B200)
//! 18 × 50; the RTX 3090 bridge 4 × 14.0625; the Ada cards (RTX 4090, L40, L40S) and the
//! A10 have none. Host interface: PCIe Gen3 (8 GT/s) up to
//! Volta/Turing, Gen4 (16) for Ampere, Gen5 (32) for Hopper and Blackwell, 16 lanes. PCI device ids from the PCI ID repository
//! (pci-ids.ucw.cz, vendor 10de), and the two seen in the fixtures' own dumps (0x2330
//! H100 SXM5, 0x2335 H200).

/// One GPU model.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GpuModel {
    /// The name a topology file's `gpu = "..."` is matched against (substring, case and
    /// `-`/`_`/space insensitive), and the name importers write.
    pub name: &'static str,
    /// CUDA compute capability × 10.
    pub compute_capability: u32,
    /// NVLink payload rate per link and direction, bytes/s (0: no NVLink).
    pub nvlink_bytes_per_s: f64,
    /// NVLinks per GPU (0: none).
    pub nvlinks: u32,
    /// PCIe transfer rate of the host interface, GT/s per lane (x16 for every model here).
    pub pcie_gt_per_s: f64,
}

const fn model(name: &'static str, cc: u32, gbps: f64, links: u32, pcie: f64) -> GpuModel {
    GpuModel {
        name,
        compute_capability: cc,
        nvlink_bytes_per_s: gbps * 1e9,
        nvlinks: links,
        pcie_gt_per_s: pcie,
    }
}

/// Searched in order: longer, more specific names first (GB200 before B200, GH200 before H200).
const MODELS: [GpuModel; 20] = [
    model("GB200", 100, 50.0, 18, 32.0),
    model("B200", 100, 50.0, 18, 32.0),
    model("B100", 100, 50.0, 18, 32.0),
    model("GH200", 90, 25.0, 18, 32.0),
    model("H200", 90, 25.0, 18, 32.0),
    model("H100", 90, 25.0, 18, 32.0),
    model("H800", 90, 25.0, 8, 32.0),
    model("A100", 80, 25.0, 12, 16.0),
    model("A800", 80, 25.0, 8, 16.0),
    model("A30", 80, 25.0, 4, 16.0),
    model("RTX-3090", 86, 14.0625, 4, 16.0),
    model("4090", 89, 0.0, 0, 16.0),
    model("L40S", 89, 0.0, 0, 16.0),
    model("L40", 89, 0.0, 0, 16.0),
    model("A10", 86, 0.0, 0, 16.0),
    model("V100", 70, 25.0, 6, 8.0),
    model("2080", 75, 25.0, 2, 8.0),
    model("T4", 75, 0.0, 0, 8.0),
    model("P100", 60, 20.0, 4, 8.0),
    model("K80", 37, 0.0, 0, 8.0),
];

/// The model a topology file names (`"H100-SXM5"`, `"A100-SXM4"`, `"RTX 2080 Ti"`).
pub fn by_name(name: &str) -> Option<GpuModel> {
    let n = name.to_ascii_uppercase().replace([' ', '_'], "-");
    MODELS.iter().copied().find(|m| n.contains(m.name))
}

/// (PCI device id, the name importers write into `gpu = ...`).
const PCI_IDS: [(u32, &str); 12] = [
    (0x2330, "H100-SXM5"),
    (0x2324, "H800-SXM5"),
    (0x2335, "H200-SXM"),
    (0x2331, "H100-PCIe"),
    (0x20b0, "A100-SXM4"),
    (0x20b2, "A100-SXM4"),
    (0x20b5, "A100-PCIe"),
    (0x20f1, "A100-PCIe"),
    (0x1db1, "V100-SXM2"),
    (0x1db5, "V100-SXM2"),
    (0x15f9, "P100-SXM2"),
    (0x1e07, "RTX 2080 Ti"),
];

/// The model name behind an NVIDIA PCI device id, when the table knows it.
pub fn name_of_pci_device(device: u32) -> Option<&'static str> {
    PCI_IDS
        .iter()
        .find(|(id, _)| *id == device)
        .map(|&(_, n)| n)
}

/// NVLink payload rate per link and direction of a compute capability, bytes/s, for a GPU
/// whose model is not known (the datasheet rate of that generation).
pub fn nvlink_rate_of_compute_capability(cc: u32) -> f64 {
    match cc {
        100.. => 50e9,
        86 => 14.0625e9,
        70..=99 => 25e9,
        60..=69 => 20e9,
        _ => 25e9,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_match_the_most_specific_model() {
        assert_eq!(by_name("GB200 NVL72").unwrap().name, "GB200");
        assert_eq!(by_name("gh200").unwrap().name, "GH200");
        assert_eq!(by_name("H100-SXM5").unwrap().nvlinks, 18);
        assert_eq!(by_name("RTX 3090").unwrap().compute_capability, 86);
        assert!(by_name("MI300X").is_none());
    }

    #[test]
    fn every_pci_id_names_a_known_model() {
        for (id, name) in PCI_IDS {
            assert!(by_name(name).is_some(), "{id:#x} -> {name}");
        }
    }

    #[test]
    fn total_nvlink_bandwidth_matches_the_datasheets() {
        let total = |n: &str| {
            let m = by_name(n).unwrap();
            m.nvlink_bytes_per_s * m.nvlinks as f64 / 1e9
        };
        assert_eq!(total("H100"), 450.0);
        assert_eq!(total("A100"), 300.0);
        assert_eq!(total("V100"), 150.0);
        assert_eq!(total("B200"), 900.0);
    }
}
