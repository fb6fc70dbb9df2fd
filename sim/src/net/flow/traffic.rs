//! What links carried: bytes per link over the run, and utilization over time of the busiest
//! ones. Both are integrated per solution record (a batch's link loads times how long that
//! solution was in force), never per flow per event.

use super::FlowModel;
use crate::engine::SimTime;
use crate::net::series::{self, LinkSeries, LinkSeriesEntry, SeriesOptions};
use crate::net::LinkTraffic;

impl FlowModel {
    /// Bytes every link carried so far (each record credited once, then zeroed).
    pub(super) fn traffic_totals(&mut self) -> Vec<LinkTraffic> {
        for rec in &mut self.records {
            if rec.in_force_ps == 0 {
                continue;
            }
            let secs = rec.in_force_ps as f64 * 1e-12;
            let links = &self.patterns[rec.pattern as usize].link_set;
            for (&l, &load) in links.iter().zip(&rec.loads_bps) {
                self.link_bytes[l as usize] += load / 8.0 * secs;
            }
            rec.in_force_ps = 0;
        }
        self.link_bytes
            .iter()
            .map(|&bytes| LinkTraffic { bytes })
            .collect()
    }

    /// Utilization over time of the busiest links, from the log of when each record was in
    /// force.
    pub(super) fn series(&mut self, end: SimTime, options: SeriesOptions) -> Option<LinkSeries> {
        let traffic = self.traffic_totals();
        let entries = self.series_log.entries()?;
        let score: Vec<f64> = traffic
            .iter()
            .zip(&self.link_capacity_bps)
            .map(|(t, &c)| if c > 0.0 { t.bytes / c } else { 0.0 })
            .collect();
        let chosen = series::top_k(&score, options.top_links);
        let mut slot_of = vec![u32::MAX; self.link_capacity_bps.len()];
        for (k, &l) in chosen.iter().enumerate() {
            slot_of[l] = k as u32;
        }
        // Per record, the loads on chosen links only (flat: offsets into one table).
        let mut offsets = Vec::with_capacity(self.records.len() + 1);
        let mut loads: Vec<(u32, f64)> = Vec::new();
        offsets.push(0u32);
        for rec in &self.records {
            let links = &self.patterns[rec.pattern as usize].link_set;
            for (&l, &load) in links.iter().zip(&rec.loads_bps) {
                let k = slot_of[l as usize];
                if k != u32::MAX && load.is_finite() && load != 0.0 {
                    loads.push((k, load));
                }
            }
            offsets.push(loads.len() as u32);
        }
        let edges = series::bin_edges(end.as_ps(), options.bins);
        let bins = edges.len() - 1;
        let mut bits = vec![vec![0.0; bins]; chosen.len()];
        for e in entries {
            let r = e.record as usize;
            let (a, b) = (offsets[r] as usize, offsets[r + 1] as usize);
            for &(k, load) in &loads[a..b] {
                let per_ps = load * 1e-12 * e.share();
                series::spread(
                    &edges,
                    e.start_ps,
                    e.start_ps + e.dur_ps,
                    per_ps,
                    &mut bits[k as usize],
                );
            }
        }
        let links = chosen
            .iter()
            .zip(bits)
            .map(|(&l, bits)| {
                let cap = self.link_capacity_bps[l];
                let utilization = bits
                    .iter()
                    .enumerate()
                    .map(|(i, b)| utilization(*b, cap, edges[i + 1] - edges[i]))
                    .collect();
                LinkSeriesEntry {
                    link: l as u32,
                    utilization,
                    occupancy: None,
                }
            })
            .collect();
        Some(LinkSeries {
            edges_ps: edges,
            links,
        })
    }
}

/// Bits carried in a bin over what the link could carry in it; rounding above 1 (a part in
/// 10^9: sums of rates that fill a link) is taken off.
pub(crate) fn utilization(bits: f64, capacity_bps: f64, width_ps: u64) -> f64 {
    if width_ps == 0 || capacity_bps <= 0.0 {
        return 0.0;
    }
    let u = bits / (capacity_bps * width_ps as f64 * 1e-12);
    if u > 1.0 && u < 1.0 + 1e-9 {
        1.0
    } else {
        u
    }
}
