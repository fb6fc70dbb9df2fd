//! Link utilization and buffer occupancy over time: what a model records during a run so that,
//! after it, the busiest links' utilization (and, for models with buffers, the fullest ports'
//! occupancy) can be given per time bin over `[0, end]`.
//!
//! Two recorders, one per kind of model:
//! - [`IntervalLog`] (flow model): link loads are piecewise constant between solution changes,
//!   so the model logs, each time it credits a solution with time in force, the interval and
//!   the solution record (a flat `Vec`, 32 bytes an entry). The loads of the K busiest links
//!   are found after the run. Past [`MAX_LOG_ENTRIES`] entries the log is coarsened in place:
//!   entries are merged per (aligned power-of-two time slot, record), keeping the time the
//!   record was in force within the slot (whole picoseconds), so memory stays bounded, totals
//!   are kept and the loads within a slot still add up to at most the capacity.
//! - [`PortBins`] (packet model): bytes sent and buffer occupancy (time-average and maximum)
//!   per port in fixed-width fine bins that double in width when the run outgrows them.
//!
//! Both are rebinned into [`SeriesOptions::bins`] bins over `[0, end]` by spreading each fine
//! piece uniformly over its time span (exact for the flow model's uncoarsened intervals).

/// How a series is asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SeriesOptions {
    /// Bins over `[0, end]`.
    pub bins: usize,
    /// Links (and ports) kept: the busiest by average utilization (and the fullest by maximum
    /// occupancy).
    pub top_links: usize,
}

impl Default for SeriesOptions {
    fn default() -> Self {
        SeriesOptions {
            bins: 200,
            top_links: 16,
        }
    }
}

/// Buffer occupancy of one port per bin.
#[derive(Debug, Clone, PartialEq)]
pub struct OccupancySeries {
    /// Time-average occupancy per bin (bytes).
    pub avg_bytes: Vec<f64>,
    /// Largest occupancy seen in each bin (bytes).
    pub max_bytes: Vec<u64>,
}

/// One directed link's series.
#[derive(Debug, Clone, PartialEq)]
pub struct LinkSeriesEntry {
    pub link: u32,
    /// Time-average load / capacity per bin, in [0, 1].
    pub utilization: Vec<f64>,
    /// For models with buffers: the occupancy of the link's output port.
    pub occupancy: Option<OccupancySeries>,
}

/// Per-bin series for a bounded set of directed links.
#[derive(Debug, Clone, PartialEq)]
pub struct LinkSeries {
    /// Bin `i` covers `[edges_ps[i], edges_ps[i + 1])`; `edges_ps[i] = end · i / bins`.
    pub edges_ps: Vec<u64>,
    /// Sorted by link id: the busiest links, and the fullest ports when there are buffers.
    pub links: Vec<LinkSeriesEntry>,
}

impl LinkSeries {
    pub fn bins(&self) -> usize {
        self.edges_ps.len().saturating_sub(1)
    }
}

/// `bins + 1` integer edges over `[0, end_ps]` (at least one bin, at least 1 ps wide).
pub fn bin_edges(end_ps: u64, bins: usize) -> Vec<u64> {
    let bins = bins.max(1);
    let end = end_ps.max(1) as u128;
    (0..=bins)
        .map(|i| (end * i as u128 / bins as u128) as u64)
        .collect()
}

/// Adds `amount_per_ps` × overlap(`[start, end)`, bin) to every bin the span touches (the
/// part beyond the last edge is dropped).
pub fn spread(edges: &[u64], start: u64, end: u64, amount_per_ps: f64, out: &mut [f64]) {
    let bins = edges.len() - 1;
    let last = edges[bins];
    let end = end.min(last);
    if end <= start {
        return;
    }
    let mut i = ((start as u128 * bins as u128) / last as u128) as usize;
    i = i.min(bins - 1);
    while i > 0 && edges[i] > start {
        i -= 1;
    }
    while i + 1 < bins && edges[i + 1] <= start {
        i += 1;
    }
    let mut t = start;
    while t < end && i < bins {
        let b_end = edges[i + 1].min(end);
        if b_end > t {
            out[i] += amount_per_ps * (b_end - t) as f64;
            t = b_end;
        }
        i += 1;
    }
}

/// Bins `i` overlaps, as a range over `edges`.
fn bins_touched(edges: &[u64], start: u64, end: u64) -> std::ops::Range<usize> {
    let bins = edges.len() - 1;
    let first = edges.partition_point(|&e| e <= start).saturating_sub(1);
    let last = edges.partition_point(|&e| e < end).clamp(first + 1, bins);
    first.min(bins - 1)..last
}

/// The `k` indices with the largest positive `score`, then sorted by index (ties: lower
/// index first).
pub fn top_k(score: &[f64], k: usize) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..score.len()).filter(|&i| score[i] > 0.0).collect();
    idx.sort_by(|&a, &b| score[b].total_cmp(&score[a]).then(a.cmp(&b)));
    idx.truncate(k);
    idx.sort_unstable();
    idx
}

/// One logged stretch of time during which a solution record was in force for `share` of it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LogEntry {
    pub start_ps: u64,
    pub dur_ps: u64,
    /// Time in force within the span: `dur_ps` for an exact interval, less after coarsening.
    pub active_ps: u64,
    pub record: u32,
}

impl LogEntry {
    /// The fraction of the span its record was in force.
    pub fn share(&self) -> f64 {
        self.active_ps as f64 / self.dur_ps.max(1) as f64
    }
}

/// Entries kept before the log is coarsened (32 MiB).
pub const MAX_LOG_ENTRIES: usize = 1 << 20;

/// Slots of the coarsened log cover the run so far in at least this many pieces.
const MIN_SLOTS: u64 = 4096;

/// The flow model's record of which solution was in force when.
#[derive(Debug, Clone, Default)]
pub struct IntervalLog {
    entries: Vec<LogEntry>,
    /// Width of a coarsened slot (0 while the log is exact).
    slot_ps: u64,
    cap: usize,
    /// Set when even the coarsest log would not fit: no series is given.
    overflowed: bool,
}

impl IntervalLog {
    pub fn new() -> Self {
        Self::with_capacity_limit(MAX_LOG_ENTRIES)
    }

    /// A log that coarsens past `cap` entries (tests use small ones).
    pub fn with_capacity_limit(cap: usize) -> Self {
        IntervalLog {
            entries: Vec::new(),
            slot_ps: 0,
            cap: cap.max(16),
            overflowed: false,
        }
    }

    #[inline]
    pub fn push(&mut self, start_ps: u64, dur_ps: u64, record: usize) {
        if self.overflowed || dur_ps == 0 {
            return;
        }
        self.entries.push(LogEntry {
            start_ps,
            dur_ps,
            active_ps: dur_ps,
            record: record as u32,
        });
        if self.entries.len() >= self.cap {
            self.coarsen();
        }
    }

    pub fn entries(&self) -> Option<&[LogEntry]> {
        (!self.overflowed).then_some(&self.entries[..])
    }

    /// Width of a coarsened slot, 0 while every entry is exact.
    pub fn slot_ps(&self) -> u64 {
        self.slot_ps
    }

    /// Merges entries per (slot, record) with slots wide enough to fit in half the cap.
    fn coarsen(&mut self) {
        let end = self
            .entries
            .iter()
            .map(|e| e.start_ps + e.dur_ps)
            .max()
            .unwrap_or(1);
        let mut w = self
            .slot_ps
            .max((end / MIN_SLOTS).max(1).next_power_of_two());
        loop {
            // (slot, record, time in force)
            let mut pieces: Vec<(u64, u32, u64)> = Vec::new();
            for e in &self.entries {
                let (mut t, stop) = (e.start_ps, e.start_ps + e.dur_ps);
                let mut left = e.active_ps;
                while t < stop {
                    let slot = t / w;
                    let s_end = ((slot + 1) * w).min(stop);
                    // Whole picoseconds per piece, the remainder to the last one.
                    let part = if s_end == stop {
                        left
                    } else {
                        ((e.active_ps as u128 * (s_end - t) as u128) / e.dur_ps as u128) as u64
                    };
                    left -= part.min(left);
                    pieces.push((slot, e.record, part));
                    t = s_end;
                }
                if pieces.len() > 4 * self.cap {
                    break;
                }
            }
            pieces.sort_unstable_by_key(|p| (p.0, p.1));
            let mut merged: Vec<LogEntry> = Vec::new();
            let mut i = 0;
            while i < pieces.len() {
                let (slot, rec) = (pieces[i].0, pieces[i].1);
                let mut active = 0;
                while i < pieces.len() && (pieces[i].0, pieces[i].1) == (slot, rec) {
                    active += pieces[i].2;
                    i += 1;
                }
                // Every record of a slot spans the same time (so their loads add up to at most
                // the capacity), the last slot ending with the data.
                let (lo, hi) = (slot * w, ((slot + 1) * w).min(end));
                merged.push(LogEntry {
                    start_ps: lo,
                    dur_ps: hi - lo,
                    active_ps: active.min(hi - lo),
                    record: rec,
                });
            }
            if merged.len() <= self.cap / 2 {
                self.entries = merged;
                self.slot_ps = w;
                return;
            }
            if w >= end {
                self.entries = Vec::new();
                self.overflowed = true;
                return;
            }
            w *= 2;
        }
    }
}

/// Fine bins of the packet model: per port, bytes sent and occupancy, in bins of a common
/// width that doubles (merging pairs) whenever the run reaches the last bin.
#[derive(Debug, Clone)]
pub struct PortBins {
    width_ps: u64,
    /// The latest time recorded: the last fine bin's data ends there.
    last_ps: u64,
    /// Per port, allocated when the port first sends or holds something.
    ports: Vec<Option<Box<FineBins>>>,
}

#[derive(Debug, Clone)]
struct FineBins {
    bytes: Vec<f64>,
    area_byte_ps: Vec<f64>,
    max_bytes: Vec<u64>,
}

/// Fine bins per port (12 KiB a port that is used).
pub const FINE_BINS: usize = 512;

impl PortBins {
    pub fn new(ports: usize) -> Self {
        PortBins {
            width_ps: 1024,
            last_ps: 0,
            ports: vec![None; ports],
        }
    }

    /// Makes the bins cover `t_ps`.
    fn cover(&mut self, t_ps: u64) {
        self.last_ps = self.last_ps.max(t_ps + 1);
        while t_ps >= self.width_ps * FINE_BINS as u64 {
            for b in self.ports.iter_mut().flatten() {
                for i in 0..FINE_BINS / 2 {
                    b.bytes[i] = b.bytes[2 * i] + b.bytes[2 * i + 1];
                    b.area_byte_ps[i] = b.area_byte_ps[2 * i] + b.area_byte_ps[2 * i + 1];
                    b.max_bytes[i] = b.max_bytes[2 * i].max(b.max_bytes[2 * i + 1]);
                }
                for i in FINE_BINS / 2..FINE_BINS {
                    b.bytes[i] = 0.0;
                    b.area_byte_ps[i] = 0.0;
                    b.max_bytes[i] = 0;
                }
            }
            self.width_ps *= 2;
        }
    }

    fn port(&mut self, port: u32) -> &mut FineBins {
        self.ports[port as usize].get_or_insert_with(|| {
            Box::new(FineBins {
                bytes: vec![0.0; FINE_BINS],
                area_byte_ps: vec![0.0; FINE_BINS],
                max_bytes: vec![0; FINE_BINS],
            })
        })
    }

    /// Spreads a value over `[start, end)` in fine bins; `f` gets (bins, bin, overlap ps).
    fn each_bin(
        &mut self,
        port: u32,
        start: u64,
        end: u64,
        mut f: impl FnMut(&mut FineBins, usize, u64),
    ) {
        self.cover(end.saturating_sub(1).max(start));
        let w = self.width_ps;
        let b = self.port(port);
        let mut t = start;
        loop {
            let i = (t / w) as usize;
            let b_end = ((i as u64 + 1) * w).min(end);
            f(b, i, b_end - t);
            t = b_end;
            if t >= end {
                break;
            }
        }
    }

    /// `bytes` sent by `port` over `[start, end)`.
    pub fn add_bytes(&mut self, port: u32, start_ps: u64, end_ps: u64, bytes: f64) {
        if end_ps <= start_ps {
            self.cover(start_ps);
            let i = (start_ps / self.width_ps) as usize;
            self.port(port).bytes[i] += bytes;
            return;
        }
        let per_ps = bytes / (end_ps - start_ps) as f64;
        self.each_bin(port, start_ps, end_ps, |b, i, dt| {
            b.bytes[i] += per_ps * dt as f64
        });
    }

    /// `port` held `occupancy` bytes over `[start, end)`.
    pub fn add_occupancy(&mut self, port: u32, start_ps: u64, end_ps: u64, occupancy: u64) {
        if occupancy == 0 || end_ps <= start_ps {
            return;
        }
        self.each_bin(port, start_ps, end_ps, |b, i, dt| {
            b.area_byte_ps[i] += occupancy as f64 * dt as f64;
            b.max_bytes[i] = b.max_bytes[i].max(occupancy);
        });
    }

    /// Occupancy reached `occupancy` at `t_ps` (for the per-bin maximum).
    pub fn touch_max(&mut self, port: u32, t_ps: u64, occupancy: u64) {
        if occupancy == 0 {
            return;
        }
        self.cover(t_ps);
        let i = (t_ps / self.width_ps) as usize;
        let b = self.port(port);
        b.max_bytes[i] = b.max_bytes[i].max(occupancy);
    }

    /// Rebins port `port` into `edges`: (bytes per bin, average occupancy, max occupancy).
    pub fn rebin(&self, port: u32, edges: &[u64]) -> (Vec<f64>, Vec<f64>, Vec<u64>) {
        let bins = edges.len() - 1;
        let (mut bytes, mut area, mut max) = (vec![0.0; bins], vec![0.0; bins], vec![0; bins]);
        if let Some(b) = &self.ports[port as usize] {
            let w = self.width_ps;
            for i in 0..FINE_BINS {
                // A fine bin's data lies within it and before the last time recorded.
                let s = i as u64 * w;
                let e = ((i as u64 + 1) * w).min(self.last_ps.max(s + 1));
                if b.bytes[i] != 0.0 {
                    spread(edges, s, e, b.bytes[i] / (e - s) as f64, &mut bytes);
                }
                if b.area_byte_ps[i] != 0.0 {
                    spread(edges, s, e, b.area_byte_ps[i] / (e - s) as f64, &mut area);
                }
                if b.max_bytes[i] > 0 && s < edges[bins] {
                    for k in bins_touched(edges, s, e.min(edges[bins])) {
                        max[k] = max[k].max(b.max_bytes[i]);
                    }
                }
            }
        }
        let avg = area
            .iter()
            .enumerate()
            .map(|(k, a)| a / (edges[k + 1] - edges[k]).max(1) as f64)
            .collect();
        (bytes, avg, max)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spreading_splits_a_span_across_bins_by_overlap() {
        let edges = bin_edges(100, 4); // 0 25 50 75 100
        let mut out = vec![0.0; 4];
        spread(&edges, 20, 60, 1.0, &mut out);
        assert_eq!(out, vec![5.0, 25.0, 10.0, 0.0]);
        // Beyond the end is dropped.
        spread(&edges, 90, 130, 2.0, &mut out);
        assert_eq!(out[3], 20.0);
    }

    #[test]
    fn coarsening_keeps_each_records_total_time_and_bounds_the_log() {
        let mut log = IntervalLog::with_capacity_limit(64);
        let mut expected = [0u64; 3];
        let mut t = 0;
        for i in 0..10_000u64 {
            let d = 7 + i % 13;
            log.push(t, d, (i % 3) as usize);
            expected[(i % 3) as usize] += d;
            t += d + i % 5;
        }
        let entries = log.entries().unwrap();
        assert!(entries.len() < 64);
        assert!(log.slot_ps() > 0);
        for (r, &want) in expected.iter().enumerate() {
            let got: f64 = entries
                .iter()
                .filter(|e| e.record == r as u32)
                .map(|e| e.active_ps as f64)
                .sum();
            assert!(
                (got - want as f64).abs() / (want as f64) < 1e-6,
                "{got} vs {want}"
            );
        }
    }

    #[test]
    fn port_bins_double_and_keep_bytes_and_maxima() {
        let mut p = PortBins::new(1);
        p.add_bytes(0, 0, 1000, 100.0);
        p.touch_max(0, 10, 3000);
        // Far beyond the first bins' reach: widths double, totals stay.
        p.add_bytes(0, 5_000_000, 5_001_000, 50.0);
        p.add_occupancy(0, 5_000_000, 5_000_500, 1500);
        let edges = bin_edges(6_000_000, 6);
        let (bytes, avg, max) = p.rebin(0, &edges);
        assert!((bytes.iter().sum::<f64>() - 150.0).abs() < 1e-9);
        assert_eq!(max[0], 3000);
        assert_eq!(max[5], 1500);
        // The occupancy sits near the edge at 5 us: fine bins spread it over both sides, but its
        // byte-picoseconds are all there.
        let area: f64 = avg.iter().map(|a| a * 1e6).sum();
        assert!((area - 1500.0 * 500.0).abs() < 1e-3, "{avg:?}");
    }

    #[test]
    fn the_busiest_are_picked_by_score_and_returned_by_index() {
        assert_eq!(top_k(&[0.5, 0.0, 0.9, 0.5, 0.1], 3), vec![0, 2, 3]);
    }
}
