//! Merging: every done point of one or more sweep directories (shards of one sweep, or
//! sweeps run apart) into one table of axis values and summary metrics (`results.csv`).

use std::collections::BTreeMap;
use std::path::PathBuf;

use crate::metrics::output::CsvText;

/// One merged row: the point's axis values and its summary's scalar metrics.
#[derive(Debug, Clone, PartialEq)]
pub struct ResultRow {
    pub index: usize,
    pub dir: String,
    pub values: Vec<(String, String)>,
    pub metrics: Vec<(String, serde_json::Value)>,
}

/// Scalar fields of a summary, nested objects flattened as `parent_child` (workload `metrics`
/// without prefix); lists are left out.
pub(super) fn flatten(
    prefix: &str,
    v: &serde_json::Value,
    out: &mut Vec<(String, serde_json::Value)>,
) {
    if let serde_json::Value::Object(m) = v {
        for (k, x) in m {
            if k == "sweep_point" {
                continue;
            }
            let name = if prefix.is_empty() || prefix == "metrics" {
                k.clone()
            } else {
                format!("{prefix}_{k}")
            };
            match x {
                serde_json::Value::Object(_) => flatten(
                    if k == "metrics" && prefix.is_empty() {
                        "metrics"
                    } else {
                        &name
                    },
                    x,
                    out,
                ),
                serde_json::Value::Array(_) => {}
                _ => out.push((name, x.clone())),
            }
        }
    }
}

/// What `merge` found.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MergeOutcome {
    pub rows: Vec<ResultRow>,
    /// Points named in a `sweep.json` without a done result.
    pub missing: Vec<usize>,
    /// Axis keys (from `sweep.json`, else from the points).
    pub axes: Vec<String>,
}

/// Reads every done point under `dirs` (each a sweep output directory, e.g. one per shard),
/// one row per point key (a key found twice is kept once), in point order.
pub fn merge(dirs: &[PathBuf]) -> anyhow::Result<MergeOutcome> {
    let mut by_key: BTreeMap<String, (usize, ResultRow)> = BTreeMap::new();
    let mut expected: BTreeMap<String, usize> = BTreeMap::new();
    let mut axes: Vec<String> = Vec::new();
    for dir in dirs {
        // Keys of this directory's own sweep: points of an earlier sweep into the same folder
        // (another --set) are not this sweep's results.
        let mut listed: Option<std::collections::BTreeSet<String>> = None;
        if let Ok(text) = std::fs::read_to_string(dir.join("sweep.json")) {
            let m: serde_json::Value = serde_json::from_str(&text)
                .map_err(|e| anyhow::anyhow!("{}: {e}", dir.join("sweep.json").display()))?;
            for a in m["axes"].as_array().into_iter().flatten() {
                if let Some(k) = a["key"].as_str() {
                    if !axes.iter().any(|x| x == k) {
                        axes.push(k.to_string());
                    }
                }
            }
            let keys = listed.get_or_insert_with(Default::default);
            for p in m["points"].as_array().into_iter().flatten() {
                if let (Some(k), Some(i)) = (p["key"].as_str(), p["index"].as_u64()) {
                    expected.insert(k.to_string(), i as usize);
                    keys.insert(k.to_string());
                }
            }
        }
        let points = dir.join("points");
        let mut entries: Vec<PathBuf> = match std::fs::read_dir(&points) {
            Ok(rd) => rd.filter_map(|e| e.ok().map(|e| e.path())).collect(),
            Err(e) => anyhow::bail!(
                "{}: {e} (expected a sweep output directory with points/)",
                points.display()
            ),
        };
        entries.sort();
        for d in entries {
            let Ok(text) = std::fs::read_to_string(d.join("summary.json")) else {
                continue;
            };
            let v: serde_json::Value = serde_json::from_str(&text)
                .map_err(|e| anyhow::anyhow!("{}: {e}", d.join("summary.json").display()))?;
            let sp = &v["sweep_point"];
            let (Some(key), Some(index)) = (sp["key"].as_str(), sp["index"].as_u64()) else {
                continue;
            };
            if listed.as_ref().is_some_and(|keys| !keys.contains(key)) {
                continue;
            }
            let values: Vec<(String, String)> = sp["axes"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|a| a.as_str())
                .map(|a| {
                    (
                        a.to_string(),
                        sp["values"][a].as_str().unwrap_or("").to_string(),
                    )
                })
                .collect();
            for (a, _) in &values {
                if !axes.iter().any(|x| x == a) {
                    axes.push(a.clone());
                }
            }
            let mut metrics = Vec::new();
            flatten("", &v, &mut metrics);
            let row = ResultRow {
                index: index as usize,
                dir: d
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default(),
                values,
                metrics,
            };
            by_key
                .entry(key.to_string())
                .or_insert((index as usize, row));
        }
    }
    let missing: Vec<usize> = expected
        .iter()
        .filter(|(k, _)| !by_key.contains_key(*k))
        .map(|(_, &i)| i)
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    let mut rows: Vec<(usize, ResultRow)> = by_key.into_values().collect();
    rows.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.dir.cmp(&b.1.dir)));
    Ok(MergeOutcome {
        rows: rows.into_iter().map(|(_, r)| r).collect(),
        missing,
        axes,
    })
}

/// The merged rows as CSV: `index`, `dir`, the axes, then every metric column in order of first
/// appearance (empty where a point lacks it).
pub fn results_csv(m: &MergeOutcome) -> String {
    let mut metric_cols: Vec<String> = Vec::new();
    for r in &m.rows {
        for (k, _) in &r.metrics {
            if !metric_cols.contains(k) && !m.axes.contains(k) {
                metric_cols.push(k.clone());
            }
        }
    }
    let mut t = CsvText::new(
        ["index", "dir"]
            .into_iter()
            .map(String::from)
            .chain(m.axes.iter().cloned())
            .chain(metric_cols.iter().cloned()),
    );
    for r in &m.rows {
        let mut row = vec![r.index.to_string(), r.dir.clone()];
        for a in &m.axes {
            let v = r
                .values
                .iter()
                .find(|(k, _)| k == a)
                .map(|(_, v)| v.clone())
                .unwrap_or_default();
            row.push(v);
        }
        for c in &metric_cols {
            row.push(
                match r.metrics.iter().find(|(k, _)| k == c).map(|(_, v)| v) {
                    Some(serde_json::Value::String(x)) => x.clone(),
                    Some(serde_json::Value::Null) | None => String::new(),
                    Some(x) => x.to_string(),
                },
            );
        }
        t.row(row);
    }
    t.finish()
}
