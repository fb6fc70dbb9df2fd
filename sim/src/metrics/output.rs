//! Writes a [`RunReport`] to a directory, each file atomically.
//!
//! Files: `summary.json`, `links.csv` (per directed link), `traffic.csv` (endpoint×endpoint
//! bytes per phase, one row per pair that exchanged data), `timeline.csv` (per op),
//! `rank_timeline.csv` (per endpoint and op, when small enough), `trace.json` (the per-rank
//! timeline as a Chrome / Perfetto trace), `endpoints.csv` (which device
//! holds each endpoint), `ports.csv` (per output port buffer statistics, packet model only),
//! `link_series.csv` (utilization per time bin of the busiest links, and buffer occupancy
//! per bin for the packet model).

use std::fmt::Write as _;
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

/// CSV field: quoted when it contains a comma, quote or newline.
pub(crate) fn field(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

impl RunReport {
    /// The summary as pretty JSON (what `--json` prints).
    pub fn summary_json(&self) -> String {
        serde_json::to_string_pretty(&self.summary).expect("the summary serializes") + "\n"
    }

    /// Writes every result file into `dir`; returns the paths written.
    pub fn write_dir(&self, dir: &Path) -> std::io::Result<Vec<PathBuf>> {
        let mut written = Vec::new();
        let mut put = |name: &str, text: String| -> std::io::Result<()> {
            let p = dir.join(name);
            write_atomic(&p, text.as_bytes())?;
            written.push(p);
            Ok(())
        };
        put("summary.json", self.summary_json())?;

        let mut s = String::from("link,from,to,class,bandwidth_bps,bytes,utilization\n");
        for l in &self.links {
            let _ = writeln!(
                s,
                "{},{},{},{},{},{},{}",
                l.link,
                field(&l.from),
                field(&l.to),
                l.class,
                l.bandwidth_bps,
                l.bytes,
                l.utilization
            );
        }
        put("links.csv", s)?;

        let mut s = String::from("endpoint,name,device\n");
        for (i, (name, dev)) in self.endpoints.iter().enumerate() {
            let _ = writeln!(s, "{i},{},{}", field(name), field(dev));
        }
        put("endpoints.csv", s)?;

        let mut s = String::from("src,dst,phase,bytes\n");
        for (k, bytes) in &self.traffic {
            let _ = writeln!(s, "{},{},{},{}", k.src, k.dst, k.phase.as_str(), bytes);
        }
        put("traffic.csv", s)?;

        let mut s =
            String::from("op,kind,phase,channel,step,pairs,bytes_per_pair,start_us,end_us\n");
        for r in &self.timeline {
            let _ = writeln!(
                s,
                "{},{},{},{},{},{},{},{},{}",
                r.op,
                r.kind,
                r.phase,
                r.channel,
                r.step,
                r.pairs,
                r.bytes_per_pair,
                r.start_us,
                r.end_us
            );
        }
        put("timeline.csv", s)?;

        if let Some(rows) = &self.rank_timeline {
            let mut s = String::from("endpoint,op,role,phase,start_us,end_us\n");
            for &(e, op, role) in rows {
                let t = &self.timeline[op as usize];
                let _ = writeln!(s, "{e},{op},{role},{},{},{}", t.phase, t.start_us, t.end_us);
            }
            put("rank_timeline.csv", s)?;
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
        Ok(written)
    }
}

/// `link_series.csv`: one row per (link, bin), links by id, named by `name(link)` as
/// (from, to); occupancy columns when the model has buffers.
pub fn link_series_csv(series: &LinkSeries, name: impl Fn(u32) -> (String, String)) -> String {
    let buffers = series.links.iter().any(|e| e.occupancy.is_some());
    let mut s = String::from("link,from,to,bin_start_us,bin_end_us,utilization");
    s += if buffers {
        ",occupancy_bytes,max_occupancy_bytes\n"
    } else {
        "\n"
    };
    let us = |ps: u64| ps as f64 * 1e-6;
    for e in &series.links {
        let (from, to) = name(e.link);
        let (from, to) = (field(&from), field(&to));
        for (i, u) in e.utilization.iter().enumerate() {
            let _ = write!(
                s,
                "{},{from},{to},{},{},{u}",
                e.link,
                us(series.edges_ps[i]),
                us(series.edges_ps[i + 1])
            );
            match (&e.occupancy, buffers) {
                (Some(o), _) => {
                    let _ = writeln!(s, ",{},{}", o.avg_bytes[i], o.max_bytes[i]);
                }
                (None, true) => s += ",,\n",
                (None, false) => s.push('\n'),
            }
        }
    }
    s
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
    fn csv_fields_with_commas_are_quoted() {
        assert_eq!(field("a,b"), "\"a,b\"");
        assert_eq!(field("plain"), "plain");
    }
}
