//! Writes a [`RunReport`] to a directory, each file atomically.
//!
//! Files: `summary.json`, `links.csv` (per directed link), `traffic.csv` (endpoint×endpoint
//! bytes per phase, one row per pair that exchanged data), `timeline.csv` (per op),
//! `rank_timeline.csv` (per endpoint and op: sent or received, to or from whom, when; when
//! small enough), `trace.json` (the per-rank timeline as a Chrome / Perfetto trace),
//! `endpoints.csv` (which device holds each endpoint), `ports.csv` (per output port buffer
//! statistics, packet model only), `link_series.csv` (utilization per time bin of the busiest
//! links, and buffer occupancy per bin for the packet model).

use std::io::Write as _;
use std::path::{Path, PathBuf};

use super::RunReport;
use crate::net::series::LinkSeries;

/// Writes `contents` to `path` so that readers see either the old file or the whole new one:
/// a temporary file in the same directory, flushed, then renamed over the target.
pub fn write_atomic(path: &Path, contents: &[u8]) -> std::io::Result<()> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(format!(".{name}.tmp{}", std::process::id()));
    {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(contents)?;
        f.sync_all()?;
    }
    std::fs::rename(&tmp, path).inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })
}

/// A CSV file built in memory (quoting by the `csv` crate): a header, then rows of fields.
pub struct CsvText(csv::Writer<Vec<u8>>);

impl CsvText {
    pub fn new<I, T>(header: I) -> Self
    where
        I: IntoIterator<Item = T>,
        T: AsRef<[u8]>,
    {
        let mut t = CsvText(csv::Writer::from_writer(Vec::new()));
        t.row(header);
        t
    }
    /// One record (fields as strings: write numbers with `to_string()` or `format!`).
    pub fn row<I, T>(&mut self, fields: I)
    where
        I: IntoIterator<Item = T>,
        T: AsRef<[u8]>,
    {
        self.0
            .write_record(fields)
            .expect("writing CSV into memory cannot fail");
    }
    pub fn finish(self) -> String {
        let bytes = self.0.into_inner().expect("an in-memory writer flushes");
        String::from_utf8(bytes).expect("fields are UTF-8")
    }
}

impl RunReport {
    /// The summary as pretty JSON (what `--json` prints).
    pub fn summary_json(&self) -> String {
        serde_json::to_string_pretty(&self.summary).expect("the summary serializes") + "\n"
    }

    /// Writes every result file into `dir`, `summary.json` last; returns the paths written.
    pub fn write_dir(&self, dir: &Path) -> std::io::Result<Vec<PathBuf>> {
        let mut written = Vec::new();
        let mut put = |name: &str, text: String| -> std::io::Result<()> {
            let p = dir.join(name);
            write_atomic(&p, text.as_bytes())?;
            written.push(p);
            Ok(())
        };
        let mut t = CsvText::new([
            "link",
            "from",
            "to",
            "class",
            "bandwidth_bps",
            "bytes",
            "utilization",
        ]);
        for l in &self.links {
            t.row([
                l.link.to_string(),
                l.from.clone(),
                l.to.clone(),
                l.class.to_string(),
                l.bandwidth_bps.to_string(),
                l.bytes.to_string(),
                l.utilization.to_string(),
            ]);
        }
        put("links.csv", t.finish())?;

        let mut t = CsvText::new(["endpoint", "name", "device"]);
        for (i, (name, dev)) in self.endpoints.iter().enumerate() {
            t.row([i.to_string(), name.clone(), dev.clone()]);
        }
        put("endpoints.csv", t.finish())?;

        let mut t = CsvText::new(["src", "dst", "phase", "bytes"]);
        for (k, bytes) in &self.traffic {
            t.row([
                k.src.to_string(),
                k.dst.to_string(),
                k.phase.as_str().to_string(),
                bytes.to_string(),
            ]);
        }
        put("traffic.csv", t.finish())?;

        let mut t = CsvText::new([
            "op",
            "kind",
            "phase",
            "channel",
            "step",
            "pairs",
            "bytes_per_pair",
            "start_us",
            "end_us",
        ]);
        for r in &self.timeline {
            t.row([
                r.op.to_string(),
                r.kind.to_string(),
                r.phase.to_string(),
                r.channel.to_string(),
                r.step.to_string(),
                r.pairs.to_string(),
                r.bytes_per_pair.to_string(),
                r.start_us.to_string(),
                r.end_us.to_string(),
            ]);
        }
        put("timeline.csv", t.finish())?;

        if let Some(rows) = &self.rank_timeline {
            let mut t = CsvText::new([
                "endpoint", "op", "role", "peer", "phase", "start_us", "end_us",
            ]);
            for &(e, op, role, peer) in rows {
                let r = &self.timeline[op as usize];
                t.row([
                    e.to_string(),
                    op.to_string(),
                    role.to_string(),
                    peer.to_string(),
                    r.phase.to_string(),
                    r.start_us.to_string(),
                    r.end_us.to_string(),
                ]);
            }
            put("rank_timeline.csv", t.finish())?;
        }
        put("trace.json", self.trace.to_json())?;
        if let Some(rows) = &self.ports {
            put("ports.csv", super::ports::ports_csv(rows))?;
        }
        if let Some(series) = &self.link_series {
            let name = |l: u32| {
                self.links
                    .get(l as usize)
                    .map(|r| (r.from.clone(), r.to.clone()))
                    .unwrap_or_default()
            };
            put("link_series.csv", link_series_csv(series, name))?;
        }
        // The summary last: a folder with summary.json holds every other file too.
        put("summary.json", self.summary_json())?;
        Ok(written)
    }
}

/// `link_series.csv`: one row per (link, bin), links by id, named by `name(link)` as
/// (from, to); occupancy columns when the model has buffers.
pub fn link_series_csv(series: &LinkSeries, name: impl Fn(u32) -> (String, String)) -> String {
    let buffers = series.links.iter().any(|e| e.occupancy.is_some());
    let mut header = vec![
        "link",
        "from",
        "to",
        "bin_start_us",
        "bin_end_us",
        "utilization",
    ];
    if buffers {
        header.extend(["occupancy_bytes", "max_occupancy_bytes"]);
    }
    let mut t = CsvText::new(header);
    let us = |ps: u64| ps as f64 * 1e-6;
    for e in &series.links {
        let (from, to) = name(e.link);
        for (i, u) in e.utilization.iter().enumerate() {
            let mut row = vec![
                e.link.to_string(),
                from.clone(),
                to.clone(),
                us(series.edges_ps[i]).to_string(),
                us(series.edges_ps[i + 1]).to_string(),
                u.to_string(),
            ];
            match (&e.occupancy, buffers) {
                (Some(o), _) => {
                    row.extend([o.avg_bytes[i].to_string(), o.max_bytes[i].to_string()])
                }
                (None, true) => row.extend([String::new(), String::new()]),
                (None, false) => {}
            }
            t.row(row);
        }
    }
    t.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn atomic_write_replaces_the_whole_file_and_leaves_no_temporary() {
        let dir = std::env::temp_dir().join(format!("dtsim-atomic-{}", std::process::id()));
        let p = dir.join("a.txt");
        write_atomic(&p, b"first").unwrap();
        write_atomic(&p, b"second").unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "second");
        let names: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names.len(), 1, "{names:?}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn csv_fields_with_commas_and_quotes_are_quoted() {
        let mut t = CsvText::new(["a", "b"]);
        t.row(["x,y", "say \"hi\""]);
        t.row(["plain", ""]);
        assert_eq!(t.finish(), "a,b\n\"x,y\",\"say \"\"hi\"\"\"\nplain,\n");
    }
}
