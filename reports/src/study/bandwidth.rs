//! The section of a scenario file: the GPU×GPU bandwidth its routing gives.

use super::*;

/// The configured GPU×GPU bandwidth: the bottleneck of each routed path on an idle network.
pub(super) fn bandwidth_section(path: &Path, tag: &str) -> Result<Section, String> {
    use sim::scenario::run::{network_model, prepare};
    let s = sim::scenario::load(path, &[]).map_err(|e| e.to_string())?;
    let prep = prepare(&s).map_err(|e| e.to_string())?;
    let mut model = network_model(&s, &prep).map_err(|e| e.to_string())?;
    let n = prep.ranks.len().min(MAX_HEATMAP);
    let mut m = vec![vec![0.0; n]; n];
    for (i, row) in m.iter_mut().enumerate() {
        for (j, cell) in row.iter_mut().enumerate() {
            if i != j {
                *cell = model
                    .path_bottleneck(prep.ranks[i], prep.ranks[j])
                    .map(|(bps, _)| bps / 8.0)
                    .unwrap_or(0.0);
            }
        }
    }
    let labels: Vec<String> = (0..n).map(|i| i.to_string()).collect();
    let fig = figures::heatmap(
        &format!("{tag}-bandwidth"),
        &format!("GPU×GPU bandwidth, {} (configured)", prep.topology.name),
        "Bottleneck link bandwidth of the routed path between each pair of ranks on an idle network.",
        ("source rank", "destination rank"),
        &labels,
        &m,
        "bandwidth (GB/s)",
        &|v| fmt::gbytes_per_s(v / 1e9),
    )?;
    Ok(Section {
        heading: format!("Topology {} ({})", prep.topology.name, path.display()),
        text: format!("{n} ranks placed by scenario {}.", s.file.name),
        figures: vec![fig],
        tables: Vec::new(),
    })
}
