//! The section of one run directory: its track record, traffic heatmaps, link utilization,
//! buffer occupancy, utilization and occupancy over time, the per-rank timeline.

use super::*;

/// Endpoint×endpoint matrices from rows (src, dst, key, bytes).
fn matrices(rows: &[(usize, usize, String, f64)], n: usize) -> BTreeMap<String, Vec<Vec<f64>>> {
    let mut m: BTreeMap<String, Vec<Vec<f64>>> = BTreeMap::new();
    for (s, d, k, b) in rows {
        if *s < n && *d < n {
            m.entry(k.clone()).or_insert_with(|| vec![vec![0.0; n]; n])[*s][*d] += b;
        }
    }
    m
}

/// The run's track record (`track_record.json`, written by `dtsim run` for a library's
/// collective or a training step): how far off dtsim has been on measured runs of the same call,
/// over all of them and the nearest, as read; `None` where the run has none.
fn track_record_table(dir: &Path) -> Result<Option<(String, Table)>, String> {
    let path = dir.join("track_record.json");
    if !path.is_file() {
        return Ok(None);
    }
    let t = read_json(&path)?;
    let span = |e: &serde_json::Value, lo: &str, hi: &str, show: &dyn Fn(f64) -> String| match (
        e[lo].as_f64(),
        e[hi].as_f64(),
    ) {
        (Some(a), Some(b)) if a == b => show(a),
        (Some(a), Some(b)) => format!("{}-{}", show(a), show(b)),
        _ => String::new(),
    };
    let plain = |x: f64| format!("{x}");
    let row = |which: &str, e: &serde_json::Value| {
        let size = match e.get("bytes_min") {
            Some(_) => span(e, "bytes_min", "bytes_max", &fmt::bytes),
            None => format!("batch {}", span(e, "batch_min", "batch_max", &plain)),
        };
        let pct = |k: &str| format!("{:.1}", e[k].as_f64().unwrap_or(f64::NAN));
        vec![
            which.to_string(),
            e["rows"].to_string(),
            e["datasets"].to_string(),
            span(e, "ranks_min", "ranks_max", &plain),
            size,
            pct("median_abs_error_pct"),
            pct("p90_abs_error_pct"),
            pct("max_abs_error_pct"),
            format!("{:+.1}", e["mean_error_pct"].as_f64().unwrap_or(f64::NAN)),
        ]
    };
    let mut rows = vec![row("all", &t["all"])];
    match t.get("nearest").filter(|n| !n.is_null()) {
        Some(n) => rows.push(row("nearest", n)),
        None => rows.push(vec![
            "nearest: none on the same GPU model within 2x the ranks and 4x the size".into(),
        ]),
    }
    let width = rows[0].len();
    for r in &mut rows {
        r.resize(width, String::new());
    }
    let columns = [
        "rows measured",
        "rows",
        "datasets",
        "ranks",
        "sizes",
        "median |error| %",
        "90% within %",
        "max |error| %",
        "mean error % (+: dtsim slower)",
    ];
    Ok(Some((
        format!(
            "Track record: how far off dtsim has been on measured runs of {} ({})",
            t["call"].as_str().unwrap_or("this call"),
            t["source"].as_str().unwrap_or("?")
        ),
        Table {
            columns: columns.iter().map(|c| c.to_string()).collect(),
            rows,
        },
    )))
}

pub(super) fn run_section(dir: &Path, tag: &str) -> Result<Section, String> {
    let summary = read_json(&dir.join("summary.json"))?;
    let workload = summary.get("metrics").is_some();
    let name = summary["scenario"].as_str().unwrap_or("run").to_string();
    let mut sec = Section {
        heading: format!("Run {name}"),
        ..Section::default()
    };
    if workload {
        let m = &summary["metrics"];
        sec.text = format!(
            "{} on {} ({} ranks, {}): step {}, {} samples/s, communication overhead {}.",
            summary["model"].as_str().unwrap_or("?"),
            summary["topology"].as_str().unwrap_or("?"),
            summary["ranks"],
            summary["parallelism"].as_str().unwrap_or("?"),
            fmt::time_us(m["step_secs"].as_f64().unwrap_or(0.0) * 1e6),
            fmt::num(m["samples_per_s"].as_f64().unwrap_or(0.0)),
            fmt::pct(m["communication_overhead_pct"].as_f64().unwrap_or(0.0)),
        );
    } else {
        sec.text = format!(
            "{} of {} over {} ranks on {}, algorithm {}: {} (bus bandwidth {}).",
            summary["collective"].as_str().unwrap_or("?"),
            fmt::bytes(summary["bytes"].as_f64().unwrap_or(0.0)),
            summary["ranks"],
            summary["topology"].as_str().unwrap_or("?"),
            summary["algorithm"].as_str().unwrap_or("?"),
            fmt::time_us(summary["time_us"].as_f64().unwrap_or(0.0)),
            fmt::gbytes_per_s(summary["busbw_gbytes_per_s"].as_f64().unwrap_or(0.0)),
        );
    }
    if let Some(t) = track_record_table(dir)? {
        sec.tables.push(t);
    }
    // traffic heatmaps
    let (file, key_col, bytes_col, what) = if workload {
        (
            "traffic_per_epoch.csv",
            "class",
            "bytes_per_epoch",
            "per epoch",
        )
    } else {
        ("traffic.csv", "phase", "bytes", "in the run")
    };
    let tp = dir.join(file);
    if tp.is_file() {
        let df = read_table(&tp)?;
        let (s, d, k, b) = (
            f64s(&df, "src"),
            f64s(&df, "dst"),
            strings(&df, key_col),
            f64s(&df, bytes_col),
        );
        let rows: Vec<(usize, usize, String, f64)> = (0..df.height())
            .filter_map(|i| Some((s[i]? as usize, d[i]? as usize, k[i].clone(), b[i]?)))
            .collect();
        let n = rows.iter().map(|r| r.0.max(r.1) + 1).max().unwrap_or(0);
        if n > 0 && n <= MAX_HEATMAP {
            let labels: Vec<String> = (0..n).map(|i| i.to_string()).collect();
            let mats = matrices(&rows, n);
            // reduce-scatter and all-gather first
            let mut keys: Vec<&String> = mats.keys().collect();
            keys.sort_by_key(|k| match k.as_str() {
                "reduce-scatter" => 0,
                "all-gather" => 1,
                _ => 2,
            });
            for k in keys.into_iter().take(4) {
                sec.figures.push(figures::heatmap(
                    &format!("{tag}-traffic-{}", slug(k)),
                    &format!("{k} traffic {what} (GB)"),
                    &format!("Bytes each endpoint (row) sends to each other endpoint (column) in the {k} phase, {what}."),
                    ("sender rank", "receiver rank"),
                    &labels,
                    &mats[k],
                    "bytes sent (GB)",
                    &|v| format!("{} GB", fmt::num(v / 1e9)),
                )?);
            }
        }
    }
    // link utilization
    let lp = dir.join("links.csv");
    if lp.is_file() {
        let df = read_table(&lp)?;
        let (from, to, util) = (
            strings(&df, "from"),
            strings(&df, "to"),
            f64s(&df, "utilization"),
        );
        let mut idx: Vec<usize> = (0..df.height())
            .filter(|&i| util[i].unwrap_or(0.0) > 0.0)
            .collect();
        idx.sort_by(|&a, &b| {
            util[b]
                .unwrap_or(0.0)
                .total_cmp(&util[a].unwrap_or(0.0))
                .then(a.cmp(&b))
        });
        idx.truncate(16);
        if !idx.is_empty() {
            sec.figures.push(figures::bars(
                &format!("{tag}-link-utilization"),
                "Busiest links: average utilization over the run",
                "Bytes carried over (bandwidth × run time), the 16 busiest directed links.",
                "link",
                "utilization (%)",
                &idx.iter()
                    .map(|&i| format!("{}→{}", from[i], to[i]))
                    .collect::<Vec<_>>(),
                &[(
                    "utilization".into(),
                    idx.iter()
                        .map(|&i| util[i].unwrap_or(0.0) * 100.0)
                        .collect(),
                )],
                &|x| fmt::pct(x),
            )?);
        }
    }
    // utilization and buffer occupancy over time
    let sp = dir.join("link_series.csv");
    if sp.is_file() {
        sec.figures.extend(series_figures(&sp, tag)?);
    }
    // buffer occupancy
    let pp = dir.join("ports.csv");
    if pp.is_file() {
        let df = read_table(&pp)?;
        let (from, to) = (strings(&df, "from"), strings(&df, "to"));
        let (cap, max, avg) = (
            f64s(&df, "capacity_bytes"),
            f64s(&df, "max_occupancy_bytes"),
            f64s(&df, "avg_occupancy_bytes"),
        );
        let frac = |v: &[Option<f64>], i: usize| match (v[i], cap[i]) {
            (Some(x), Some(c)) if c > 0.0 => 100.0 * x / c,
            _ => 0.0,
        };
        let mut idx: Vec<usize> = (0..df.height()).filter(|&i| frac(&max, i) > 0.0).collect();
        idx.sort_by(|&a, &b| frac(&max, b).total_cmp(&frac(&max, a)).then(a.cmp(&b)));
        idx.truncate(16);
        if !idx.is_empty() {
            sec.figures.push(figures::bars(
                &format!("{tag}-buffer-occupancy"),
                "Fullest output buffers",
                "Average occupancy, and the rest up to the maximum, as a share of each port's buffer (the 16 fullest ports).",
                "output port",
                "buffer occupancy (% of capacity)",
                &idx.iter().map(|&i| format!("{}→{}", from[i], to[i])).collect::<Vec<_>>(),
                &[
                    ("average".into(), idx.iter().map(|&i| frac(&avg, i)).collect()),
                    ("maximum (above average)".into(), idx.iter().map(|&i| (frac(&max, i) - frac(&avg, i)).max(0.0)).collect()),
                ],
                &|x| fmt::pct(x),
            )?);
        }
    }
    // per-rank timeline
    let trp = dir.join("trace.json");
    if trp.is_file() {
        let t = read_json(&trp)?;
        let mut tracks: Vec<String> = Vec::new();
        let mut spans = Vec::new();
        for ev in t["traceEvents"].as_array().into_iter().flatten() {
            let tid = ev["tid"].as_u64().unwrap_or(0) as usize;
            if ev["ph"] == "M" && ev["name"] == "thread_name" && tid < MAX_TIMELINE_TRACKS {
                if tracks.len() <= tid {
                    tracks.resize(tid + 1, String::new());
                }
                tracks[tid] = ev["args"]["name"].as_str().unwrap_or("").to_string();
            } else if ev["ph"] == "X" && tid < MAX_TIMELINE_TRACKS {
                let ts = ev["ts"].as_f64().unwrap_or(0.0);
                let role = ev["args"]["role"].as_str().unwrap_or("");
                let cat = ev["cat"].as_str().unwrap_or("").to_string();
                spans.push(Span {
                    track: tid,
                    start_us: ts,
                    end_us: ts + ev["dur"].as_f64().unwrap_or(0.0),
                    category: if role == "recv" {
                        format!("{cat} (recv)")
                    } else {
                        cat
                    },
                });
            }
        }
        if !spans.is_empty() {
            // sends carry the same interval as the matching receives: keep sends and compute
            spans.retain(|s| !s.category.ends_with("(recv)"));
            sec.figures.push(figures::timeline(
                &format!("{tag}-timeline"),
                if workload { "Per-rank timeline of one training step" } else { "Per-rank timeline of the collective" },
                &format!(
                    "What each rank does over time, coloured by phase (sends and compute; first {MAX_TIMELINE_TRACKS} ranks). The same timeline is in trace.json for chrome://tracing or ui.perfetto.dev."
                ),
                &tracks,
                &spans,
            )?);
        }
    }
    Ok(sec)
}

/// A link's name, utilization (%) and occupancy (bytes) per bin.
type LinkBins = (String, Vec<f64>, Vec<f64>);

/// Series shown per over-time chart.
pub const MAX_SERIES: usize = 16;

/// `link_series.csv`: utilization over time of the busiest links, and buffer occupancy over
/// time of the fullest ports when the file has it.
fn series_figures(path: &Path, tag: &str) -> Result<Vec<Figure>, String> {
    let df = read_table(path)?;
    let (link, from, to) = (f64s(&df, "link"), strings(&df, "from"), strings(&df, "to"));
    let (start, end, util) = (
        f64s(&df, "bin_start_us"),
        f64s(&df, "bin_end_us"),
        f64s(&df, "utilization"),
    );
    let buffers = has(&df, "occupancy_bytes");
    let occ = f64s(&df, "occupancy_bytes");
    // Rows come link by link, bins in order.
    let mut links: Vec<LinkBins> = Vec::new();
    let mut bins: Vec<(f64, f64)> = Vec::new();
    let mut last = None;
    for i in 0..df.height() {
        if link[i] != last {
            last = link[i];
            links.push((format!("{}→{}", from[i], to[i]), Vec::new(), Vec::new()));
        }
        if links.len() == 1 {
            bins.push((start[i].unwrap_or(0.0), end[i].unwrap_or(0.0)));
        }
        let l = links.last_mut().expect("a link was pushed");
        l.1.push(util[i].unwrap_or(0.0) * 100.0);
        l.2.push(occ[i].unwrap_or(0.0));
    }
    let mut figs = Vec::new();
    let pick = |score: &dyn Fn(&LinkBins) -> f64| {
        let mut idx: Vec<usize> = (0..links.len())
            .filter(|&i| score(&links[i]) > 0.0)
            .collect();
        idx.sort_by(|&a, &b| {
            score(&links[b])
                .total_cmp(&score(&links[a]))
                .then(a.cmp(&b))
        });
        idx.truncate(MAX_SERIES);
        idx
    };
    let busiest = pick(&|l| l.1.iter().sum());
    if !busiest.is_empty() {
        figs.push(figures::over_time(
            &format!("{tag}-link-utilization-over-time"),
            "Link utilization over time",
            &format!(
                "Load over capacity of the busiest directed links ({} shown), averaged per time bin.",
                busiest.len()
            ),
            "utilization (%)",
            &bins,
            &busiest.iter().map(|&i| (links[i].0.clone(), links[i].1.clone())).collect::<Vec<_>>(),
            Some(105.0),
            &|x| fmt::pct(x),
        )?);
    }
    if buffers {
        let fullest = pick(&|l| l.2.iter().copied().fold(0.0, f64::max));
        if !fullest.is_empty() {
            figs.push(figures::over_time(
                &format!("{tag}-buffer-occupancy-over-time"),
                "Buffer occupancy over time",
                &format!(
                    "Bytes queued at the fullest output ports ({} shown), averaged per time bin.",
                    fullest.len()
                ),
                "buffer occupancy (bytes)",
                &bins,
                &fullest
                    .iter()
                    .map(|&i| (links[i].0.clone(), links[i].2.clone()))
                    .collect::<Vec<_>>(),
                None,
                &|x| fmt::bytes(x),
            )?);
        }
    }
    Ok(figs)
}
