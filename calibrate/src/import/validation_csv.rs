//! The CSV transcriptions of published nccl-tests tables in `shared/validation/`
//! (`azure_nd_single_node_allreduce.csv`, `gcp_a3mega_2node_h100_allreduce.csv`,
//! `autodl_2x2080ti_pcie_noP2P_nccl.csv`), turned back into [`NcclTestsRun`]s: one run per
//! (system, collective). Rows that give only in-place busbw (the Azure table) get their time
//! and algbw from it with nccl-tests' own factors (`time = size / (busbw / factor)`); nothing
//! else is derived.

use std::collections::BTreeMap;
use std::path::Path;

use super::nccl_tests::{busbw_factor, NcclTestsRun, RankDevice, Row, Timing};
use crate::error::{read_text, ImportError};

/// Splits CSV text into records of fields (RFC 4180 quoting, by the `csv` crate), each with the
/// 1-based line it starts on; blank lines are skipped. Reading stops at the first malformed
/// record (text is UTF-8 already, so the `csv` crate has little to refuse).
pub fn records(text: &str) -> Vec<(usize, Vec<String>)> {
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .from_reader(text.as_bytes());
    let mut out = Vec::new();
    // The line from the record's byte offset, past the blank lines the reader skipped (the
    // `csv` crate's own line number counts the record from the first of them).
    let (mut at, mut line) = (0usize, 1usize);
    for rec in reader.records() {
        let Ok(rec) = rec else { break };
        let mut start = rec
            .position()
            .map_or(at, |p| p.byte() as usize)
            .min(text.len());
        while text[start..].starts_with(['\n', '\r']) {
            start += 1;
        }
        line += text[at..start.max(at)].matches('\n').count();
        at = start.max(at);
        out.push((line, rec.iter().map(str::to_string).collect()));
    }
    out
}

/// A run per (system, collective) with the CSV rows it came from.
#[derive(Debug, Clone)]
pub struct CsvRun {
    pub system: String,
    pub run: NcclTestsRun,
    /// 1-based CSV lines of its rows.
    pub lines: Vec<usize>,
    pub source: String,
}

pub fn load(path: &Path) -> Result<Vec<CsvRun>, ImportError> {
    let file = path.display().to_string();
    let text = read_text(path)?;
    let recs = records(&text);
    let Some((_, header)) = recs.first() else {
        return Err(ImportError::whole(&file, "a CSV header line"));
    };
    let col = |name: &str| header.iter().position(|h| h == name);
    let need = |name: &str| {
        col(name).ok_or_else(|| ImportError::at(&file, 1, format!("a `{name}` column")))
    };
    let (sys, coll, size) = (need("system")?, need("collective")?, need("size_bytes")?);
    let ranks_col = col("total_gpus")
        .or(col("num_gpus"))
        .ok_or_else(|| ImportError::at(&file, 1, "a `total_gpus` or `num_gpus` column"))?;
    let mut runs: BTreeMap<(String, String), CsvRun> = BTreeMap::new();
    for (line, r) in recs.iter().skip(1) {
        if r.len() == 1 && r[0].is_empty() {
            continue;
        }
        if r.len() != header.len() {
            return Err(ImportError::at(
                &file,
                *line,
                format!("{} fields as in the header, got {}", header.len(), r.len()),
            ));
        }
        let num = |i: usize, what: &str| {
            r[i].trim().parse::<f64>().map_err(|_| {
                ImportError::at(&file, *line, format!("{what} as a number, got {:?}", r[i]))
            })
        };
        let opt = |name: &str| col(name).map(|i| num(i, name)).transpose();
        let in_range = |v: f64, what: &str, check: &dyn Fn(f64) -> Result<u64, String>| {
            check(v).map_err(|e| ImportError::at(&file, *line, format!("{what}: {e}")))
        };
        let ranks = in_range(num(ranks_col, "the GPU count")?, &header[ranks_col], &|v| {
            sim::limits::ranks(v)
        })? as u32;
        let collective = r[coll].clone();
        let size_bytes = in_range(num(size, "size_bytes")?, "size_bytes", &|v| {
            if v.is_finite() && v >= 0.0 && v.fract() == 0.0 {
                sim::limits::bytes(v as u64)
            } else {
                Err(format!("a whole number of bytes, got {v}"))
            }
        })?;
        let opt = |name: &str| -> Result<Option<f64>, ImportError> {
            let v = opt(name)?;
            match v {
                Some(x) if !(x.is_finite() && x >= 0.0) => Err(ImportError::at(
                    &file,
                    *line,
                    format!("`{name}`: a measured value of 0 or more, got {x}"),
                )),
                _ => Ok(v),
            }
        };
        let group = |t: Option<f64>, a: Option<f64>, b: Option<f64>| match (t, a, b) {
            (Some(t), Some(a), Some(b)) => Some(Timing {
                time_us: t,
                algbw_gbps: a,
                busbw_gbps: b,
                wrong: None,
            }),
            _ => None,
        };
        let oop = group(
            opt("oop_time_us")?,
            opt("oop_algbw_GBps")?,
            opt("oop_busbw_GBps")?,
        );
        let mut ip = group(
            opt("ip_time_us")?,
            opt("ip_algbw_GBps")?,
            opt("ip_busbw_GBps")?,
        );
        if ip.is_none() {
            if let Some(busbw) = opt("busbw_GBps")? {
                let algbw = busbw / busbw_factor(&collective, ranks);
                ip = Some(Timing {
                    time_us: size_bytes as f64 / (algbw * 1e9) * 1e6,
                    algbw_gbps: algbw,
                    busbw_gbps: busbw,
                    wrong: None,
                });
            }
        }
        let e = runs
            .entry((r[sys].clone(), collective.clone()))
            .or_insert_with(|| CsvRun {
                system: r[sys].clone(),
                run: NcclTestsRun {
                    collective: Some(collective.clone()),
                    nccl_version: col("nccl_version")
                        .map(|i| r[i].clone())
                        .filter(|v| v.chars().next().is_some_and(|c| c.is_ascii_digit())),
                    gpus_per_process: Some(ranks),
                    ..Default::default()
                },
                lines: Vec::new(),
                source: col("source").map(|i| r[i].clone()).unwrap_or_default(),
            });
        if e.run.devices.is_empty() {
            // The CSV states nodes and GPUs per node; list the ranks as nccl-tests would.
            let nodes = col("num_nodes")
                .and_then(|i| r[i].parse::<u32>().ok())
                .unwrap_or(1)
                .max(1);
            let per_node = col("gpus_per_node")
                .and_then(|i| r[i].parse::<u32>().ok())
                .unwrap_or(ranks / nodes)
                .max(1);
            let gpu = col("gpu").map(|i| r[i].clone()).unwrap_or_default();
            e.run.devices = (0..ranks)
                .map(|k| RankDevice {
                    rank: k,
                    host: format!("node{}", k / per_node),
                    device: k % per_node,
                    name: gpu.clone(),
                })
                .collect();
        }
        let dtype = col("dtype")
            .map(|i| r[i].clone())
            .unwrap_or_else(|| "float".into());
        e.run.rows.push(Row {
            size_bytes,
            count: col("count")
                .and_then(|i| r[i].parse().ok())
                .unwrap_or(size_bytes / 4),
            dtype: if dtype == "float32" {
                "float".into()
            } else {
                dtype
            },
            redop: col("redop")
                .map(|i| r[i].clone())
                .unwrap_or_else(|| "sum".into()),
            root: col("root").and_then(|i| r[i].parse().ok()).unwrap_or(-1),
            out_of_place: oop,
            in_place: ip,
        });
        e.lines.push(*line);
    }
    Ok(runs.into_values().collect())
}

#[cfg(test)]
mod tests {
    use super::records;

    #[test]
    fn quoted_commas_and_newlines_stay_in_their_field_and_lines_count_from_one() {
        let text = "system,note\nA,\"x, y\"\n\nB,\"two\nlines\"\nC,z\n";
        let r = records(text);
        let fields: Vec<Vec<&str>> = r
            .iter()
            .map(|(_, f)| f.iter().map(String::as_str).collect())
            .collect();
        assert_eq!(
            fields,
            [
                vec!["system", "note"],
                vec!["A", "x, y"],
                vec!["B", "two\nlines"],
                vec!["C", "z"],
            ]
        );
        let lines: Vec<usize> = r.iter().map(|(l, _)| *l).collect();
        assert_eq!(lines, [1, 2, 4, 6]);
    }
}
