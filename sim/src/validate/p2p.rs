//! GPU-to-GPU copy bandwidth tables (p2pBandwidthLatencyTest, GPUInspector.jl, nvbandwidth,
//! simpleP2P; the layout of `shared/validation/p2p_bandwidth_matrices.csv`): each pair's copy
//! replayed on the system its columns describe ([`super::system`]), at the topology's own link
//! rates (the `default` profile: no efficiency applied, so the error is what the links lose
//! to a copy engine's real rate).
//!
//! A row is one (source GPU, destination GPU) of a matrix: `unidirectional` is one copy,
//! `bidirectional` two at once, one each way, scored on their total (as the tools report it).
//! The system: `gpu`, the `topology` column as the intra-node interconnect (NVSwitch, hybrid
//! cube mesh, PCIe with or without P2P), the GPU count from `Nx` / `N GPUs` in `system`,
//! `topology` or `gpu` (else the generation's 8-GPU board, or the highest GPU index named).
//! Not replayed, each with its reason: latencies, host-device copies, a GPU's copy within its
//! own memory, and device-to-device rows that name no pair.

use std::path::Path;

use super::{toml_str, Replayed, Row};

/// A copy whose size the row does not state: large enough that bandwidth, not latency, sets
/// the time.
const DEFAULT_COPY_BYTES: f64 = 64.0 * 1024.0 * 1024.0;

fn get<'a>(row: &'a Row, c: &str) -> &'a str {
    row.get(c).map(String::as_str).unwrap_or("").trim()
}

/// The first `N` of `Nx` or `N GPUs` in `text`.
fn gpu_count(text: &str) -> Option<u32> {
    let t = text.to_ascii_lowercase();
    let b = t.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i].is_ascii_digit() && (i == 0 || !b[i - 1].is_ascii_alphanumeric()) {
            let start = i;
            while i < b.len() && b[i].is_ascii_digit() {
                i += 1;
            }
            let rest = t[i..].trim_start().trim_start_matches('-');
            if t[i..].starts_with('x') || t[i..].starts_with('×') || rest.starts_with("gpu") {
                if let Ok(n) = t[start..i].parse::<u32>() {
                    if n >= 1 {
                        return Some(n);
                    }
                }
            }
        } else {
            i += 1;
        }
    }
    None
}

/// Bytes per unit of `unit` (GB/s, GiB/s, MB/s).
fn bytes_per_s(unit: &str) -> Option<f64> {
    match unit.to_ascii_lowercase().replace(' ', "").as_str() {
        "gb/s" | "gbps" => Some(1e9),
        "gib/s" => Some(1024.0 * 1024.0 * 1024.0),
        "mb/s" => Some(1e6),
        "mib/s" => Some(1024.0 * 1024.0),
        _ => None,
    }
}

/// The copy size a `transfer_size` cell gives (`40,000,000 B`, `64MB buffers`, `32000000 B`).
fn copy_bytes(text: &str) -> Option<f64> {
    let t = text.trim().to_ascii_lowercase();
    let digits: String = t
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == ',' || *c == '.')
        .filter(|c| *c != ',')
        .collect();
    let v: f64 = digits.parse().ok()?;
    let rest = t[t
        .char_indices()
        .find(|(_, c)| !(c.is_ascii_digit() || *c == ',' || *c == '.'))
        .map_or(t.len(), |(i, _)| i)..]
        .trim_start();
    let scale = if rest.starts_with("gib") || rest.starts_with("gb") {
        1024.0 * 1024.0 * 1024.0
    } else if rest.starts_with("mib") || rest.starts_with("mb") {
        1024.0 * 1024.0
    } else if rest.starts_with("kib") || rest.starts_with("kb") {
        1024.0
    } else if rest.starts_with('b') {
        1.0
    } else {
        return None;
    };
    (v > 0.0).then_some(v * scale)
}

/// Replays one row: (group, label, measured secs, simulated secs).
pub(super) fn p2p_row(row: &Row, root: &Path) -> Replayed {
    let metric = get(row, "direction_or_metric").to_ascii_lowercase();
    let test = get(row, "test").to_ascii_lowercase();
    let both_ways = metric.starts_with("bidirectional");
    let one_way = metric.starts_with("unidirectional") || metric.starts_with("cudamemcpypeer");
    if !(both_ways || one_way) {
        return Err(if metric.starts_with("latency") {
            "latency rows are not replayed (a tiny copy's CUDA call time, not the links')".into()
        } else {
            format!(
                "{metric:?} rows are not replayed (host-device copies, or device-to-device \
                 without a GPU pair)"
            )
        });
    }
    let (src, dst) = match (
        get(row, "src_gpu").parse::<u32>(),
        get(row, "dst_gpu").parse::<u32>(),
    ) {
        (Ok(s), Ok(d)) => (s, d),
        // simpleP2P: GPU0 <-> GPU1; nvbandwidth's "per pair": any pair, all alike on a switch.
        _ if test.contains("simplep2p")
            || metric.contains("gpu0<->gpu1")
            || get(row, "src_gpu") == "pair" =>
        {
            (0, 1)
        }
        _ => return Err("src_gpu, dst_gpu: the GPU pair the copy ran between".into()),
    };
    if src == dst {
        return Err("a GPU's copy within its own memory is not replayed".into());
    }
    let value: f64 = get(row, "value")
        .parse()
        .ok()
        .filter(|v: &f64| *v > 0.0)
        .ok_or("value: a positive bandwidth")?;
    let unit = get(row, "unit");
    let scale = bytes_per_s(unit).ok_or_else(|| format!("unit: GB/s or GiB/s, got {unit:?}"))?;
    let bytes = copy_bytes(get(row, "transfer_size")).unwrap_or(DEFAULT_COPY_BYTES);
    // The system, from this layout's columns under the names the system reader takes.
    let named = format!(
        "{} {} {}",
        get(row, "system"),
        get(row, "topology"),
        get(row, "gpu")
    );
    let mut described = Row::new();
    described.insert("gpu".into(), get(row, "gpu").to_string());
    described.insert("system".into(), get(row, "system").to_string());
    described.insert(
        "intra_node_interconnect".into(),
        get(row, "topology").to_string(),
    );
    described.insert(
        "caveat".into(),
        format!("{metric} {}", get(row, "caveat")).to_ascii_lowercase(),
    );
    let probe = super::system::read(&{
        let mut r = described.clone();
        r.insert("num_gpus".into(), "8".into());
        r
    })?;
    let gpus = gpu_count(&named).unwrap_or(match probe.intra {
        super::system::Intra::Pcie { .. } => src.max(dst).saturating_add(1),
        _ => 8,
    });
    if src.max(dst) >= gpus {
        return Err(format!(
            "src_gpu, dst_gpu: GPUs of the {gpus} the system names, got {src} and {dst}"
        ));
    }
    described.insert("num_gpus".into(), gpus.to_string());
    let spec = super::system::read(&described)?;
    let replay = spec.replay()?;
    let (op, moved) = if both_ways {
        ("all_to_all", 2.0 * bytes)
    } else {
        ("send_recv", bytes)
    };
    let text = format!(
        "name = \"validate\"\nprofile = {}\n[topology]\nfile = {}\n[placement]\n\
         strategy = \"explicit\"\nranks = 2\ndevices = [\"n0.gpu{src}\", \"n0.gpu{dst}\"]\n\
         [collective]\nop = \"{op}\"\nbytes = \"{}B\"\nroot = 0\npeer = 1\nlibrary = \"ideal\"\n\
         algorithm = \"direct\"\n",
        toml_str(&root.join("data/profiles/default.json")),
        toml_str(
            &root
                .join("topologies")
                .join(format!("{}.toml", replay.topology))
        ),
        moved as u64,
    );
    let sim = super::simulate(&text, &replay.set, false)?;
    let measured = moved / (value * scale);
    let group = format!(
        "{} · {} copy",
        get(row, "system"),
        if both_ways { "two-way" } else { "one-way" }
    );
    Ok(super::Replay::new(
        group,
        format!("GPU {src} -> {dst}"),
        measured,
        sim,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_units_and_gpu_counts_read_as_the_tools_print_them() {
        assert_eq!(copy_bytes("40,000,000 B (code default)"), Some(4e7));
        assert_eq!(copy_bytes("64MB buffers"), Some(64.0 * 1024.0 * 1024.0));
        assert_eq!(copy_bytes("sample default"), None);
        assert_eq!(bytes_per_s("GiB/s"), Some(1073741824.0));
        assert_eq!(gpu_count("PC2 DGX A100 (8x A100 + NVSwitch)"), Some(8));
        assert_eq!(gpu_count("single VM, 8 GPUs"), Some(8));
        assert_eq!(gpu_count("tinybox (tiny14), 6x RTX 4090"), Some(6));
        assert_eq!(gpu_count("ND H100 v5"), None);
        assert_eq!(gpu_count("RTX 4090"), None);
        assert_eq!(
            gpu_count("8-GPU SXM2 NVLink2 board, PCIe Gen3 x16"),
            Some(8)
        );
    }
}
