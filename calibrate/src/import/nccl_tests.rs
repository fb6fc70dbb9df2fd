//! nccl-tests output: the text tables (every layout since 2.0) and the JSON report, and the
//! writer that prints results in nccl-tests' own table format.
//!
//! Text format (NVIDIA/nccl-tests `src/common.cu`, `src/util.cu`): `#` comment lines carry the
//! run header (`# Collective test starting: all_reduce_perf`, `# nThread 1 nGpus 8 ...`, one
//! `#  Rank  0 Group  0 Pid 123 on host device  0 [0000:18:00] NVIDIA H100 80GB HBM3` line per
//! rank; older versions omit `Group`), then a column header such as
//! `#  size  count  type  redop  root  time  algbw  busbw  #wrong  time  algbw  busbw  #wrong`
//! (before 2.10 there is no `root` column and `#wrong` was `error`; with `-R`/per-iteration
//! timing extra columns follow each group; `-C` prints `cputime`), then one row per size with
//! out-of-place and in-place columns, then `# Avg bus bandwidth : X`. The parser reads the
//! column header and maps row fields by position, so any of these layouts works. Lines that are
//! neither comments nor rows (NCCL INFO lines, mpirun noise) are skipped.
//!
//! JSON format (`-J FILE`, nccl-tests `src/util.cu`, `JSON_FILE_VERSION 2`), accepted schema:
//! `{"version": 2, "args": [argv...], "nccl_version": 22703, "config": {"nthreads", "ngpus",
//! "devices": [{"rank", "group", "pid", "hostname", "device", "device_hex", "device_info"}]},
//! "results": [{"size", "count", "type", "redop", "root": "    -1", "out_of_place": {"time" |
//! "cpu_time", "alg_bw", "bus_bw", "nwrong"} | null, "in_place": {...}, ...}],
//! "average_bus_bandwidth": {"bandwidth"}}`. Unknown keys are ignored; the collective comes
//! from `args[0]` (`all_reduce_perf`).

use std::path::Path;

use serde_json::Value;

use crate::error::{read_text, ImportError};

/// The collectives nccl-tests measures, by their `*_perf` program names. Longer names first so
/// that `all_reduce_perf` is not read as `reduce_perf`.
pub const COLLECTIVES: [&str; 10] = [
    "reduce_scatter",
    "all_reduce",
    "all_gather",
    "alltoall",
    "broadcast",
    "sendrecv",
    "hypercube",
    "gather",
    "scatter",
    "reduce",
];

pub use sim::metrics::nccl_tests::{float_str, to_text, NcclTestsRun, RankDevice, Row, Timing};

/// busbw / algbw for a collective over `n` ranks (nccl-tests' `getBw` factors).
pub fn busbw_factor(collective: &str, n: u32) -> f64 {
    let n = n.max(1) as f64;
    match collective {
        "all_reduce" => 2.0 * (n - 1.0) / n,
        "all_gather" | "reduce_scatter" | "alltoall" | "gather" | "scatter" => (n - 1.0) / n,
        _ => 1.0,
    }
}

/// The collective named by a `*_perf` program in `text`, e.g. `all_reduce` for
/// `.../build/all_reduce_perf -b 8`.
pub fn collective_in(text: &str) -> Option<String> {
    let lower = text.to_ascii_lowercase();
    // The earliest `_perf` mention wins; at one position the longest name.
    let mut best: Option<(usize, &str)> = None;
    for name in COLLECTIVES {
        let pat = format!("{name}_perf");
        let mut from = 0;
        while let Some(i) = lower[from..].find(&pat) {
            let at = from + i;
            let boundary = at == 0
                || !lower.as_bytes()[at - 1].is_ascii_alphanumeric()
                    && lower.as_bytes()[at - 1] != b'_';
            if boundary {
                if best.is_none_or(|(b, _)| at < b) {
                    best = Some((at, name));
                }
                break;
            }
            from = at + 1;
        }
    }
    best.map(|(_, n)| n.to_string())
}

/// Reads a text or JSON nccl-tests log (gzip allowed); JSON when the first non-blank character
/// is `{`.
pub fn load(path: &Path) -> Result<NcclTestsRun, ImportError> {
    let text = read_text(path)?;
    let file = path.display().to_string();
    let mut run = if text.trim_start().starts_with('{') {
        parse_json(&text, &file)?
    } else {
        parse_text(&text, &file)?
    };
    if run.collective.is_none() {
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().to_ascii_lowercase())
            .unwrap_or_default();
        run.collective = COLLECTIVES
            .iter()
            .find(|c| name.contains(*c) || name.contains(&c.replace('_', "")))
            .map(|c| c.to_string());
    }
    Ok(run)
}

/// Column positions read from the `# size count type ...` header.
struct Columns {
    n: usize,
    size: usize,
    count: usize,
    dtype: usize,
    redop: usize,
    root: Option<usize>,
    /// (time, algbw, busbw, wrong) index per group, out-of-place first.
    groups: Vec<(usize, usize, usize, Option<usize>)>,
}

fn parse_header(tokens: &[&str]) -> Option<Columns> {
    let find = |name: &str| tokens.iter().position(|t| *t == name);
    let (size, count, dtype, redop) =
        (find("size")?, find("count")?, find("type")?, find("redop")?);
    let mut groups = Vec::new();
    for (i, t) in tokens.iter().enumerate() {
        if (*t == "time" || *t == "cputime")
            && tokens.get(i + 1) == Some(&"algbw")
            && tokens.get(i + 2) == Some(&"busbw")
        {
            let wrong = match tokens.get(i + 3) {
                Some(&"#wrong") | Some(&"error") | Some(&"wrong") => Some(i + 3),
                _ => None,
            };
            groups.push((i, i + 1, i + 2, wrong));
        }
    }
    if groups.is_empty() {
        return None;
    }
    // Trailing `timestamp` prints as two tokens (date and time) per row.
    let n = tokens.len() + usize::from(tokens.last() == Some(&"timestamp"));
    Some(Columns {
        n,
        size,
        count,
        dtype,
        redop,
        root: find("root"),
        groups,
    })
}

/// Parses nccl-tests text output; `file` names the log in errors.
pub fn parse_text(text: &str, file: &str) -> Result<NcclTestsRun, ImportError> {
    let mut run = NcclTestsRun {
        collective: collective_in(text),
        ..Default::default()
    };
    let mut cols: Option<(Columns, usize)> = None;
    for (i, raw) in text.lines().enumerate() {
        let lineno = i + 1;
        let line = raw.trim();
        if let Some(rest) = line.strip_prefix('#') {
            let tokens: Vec<&str> = rest.split_whitespace().collect();
            match tokens.first().copied() {
                Some("nThread") => {
                    let num = |k: &str| {
                        tokens
                            .iter()
                            .position(|t| *t == k)
                            .and_then(|p| tokens.get(p + 1))
                            .and_then(|v| v.parse::<u32>().ok())
                    };
                    match (num("nThread"), num("nGpus")) {
                        (Some(t), Some(g))
                            if (1..=sim::limits::RANKS_MAX).contains(&(t as u64 * g as u64)) =>
                        {
                            run.gpus_per_process = Some(t * g)
                        }
                        _ => return Err(ImportError::at(
                            file,
                            lineno,
                            "`# nThread T nGpus G ...` with integers T and G, T x G from 1 to 2^20",
                        )),
                    }
                }
                Some("Rank") => run.devices.push(parse_rank_line(&tokens).ok_or_else(|| {
                    ImportError::at(
                        file,
                        lineno,
                        "a device line `#  Rank R [Group G] Pid P on HOST device D [BUS] NAME`",
                    )
                })?),
                Some("nccl-tests") => {
                    if let Some(lib) = tokens.iter().find_map(|t| t.strip_prefix("nccl-library=")) {
                        run.nccl_version = Some(version_from_code(lib.parse().unwrap_or(0)));
                    }
                }
                Some("Avg") if tokens.get(1) == Some(&"bus") => {
                    run.avg_busbw_gbps = tokens
                        .iter()
                        .position(|t| *t == ":")
                        .and_then(|p| tokens.get(p + 1))
                        .and_then(|v| v.parse().ok());
                }
                _ => {
                    if let Some(c) = parse_header(&tokens) {
                        cols = Some((c, lineno));
                    }
                }
            }
            continue;
        }
        if let Some(v) = line.split("NCCL version ").nth(1) {
            if run.nccl_version.is_none() {
                run.nccl_version = v
                    .split(|c: char| c.is_whitespace() || c == '+')
                    .next()
                    .map(str::to_string);
            }
        }
        let Some((c, _)) = &cols else { continue };
        if !line.starts_with(|ch: char| ch.is_ascii_digit()) {
            continue;
        }
        run.rows
            .push(parse_row(line, c).map_err(|e| ImportError::at(file, lineno, e))?);
    }
    match cols {
        None => Err(ImportError::whole(file, "an nccl-tests result table: a `#  size  count  type  redop ... time  algbw  busbw` column header (is this an nccl-tests log?)")),
        Some((_, at)) if run.rows.is_empty() => Err(ImportError::at(file, at + 1, "result rows after the column header (the log ends before the first size)")),
        Some(_) => Ok(run),
    }
}

fn parse_rank_line(tokens: &[&str]) -> Option<RankDevice> {
    let after = |k: &str| {
        tokens
            .iter()
            .position(|t| *t == k)
            .and_then(|p| tokens.get(p + 1))
    };
    let rank = after("Rank")?.parse().ok()?;
    let host = after("on")?.to_string();
    let dpos = tokens.iter().position(|t| *t == "device")?;
    let device = tokens.get(dpos + 1)?.parse().ok()?;
    let mut rest = &tokens[dpos + 2..];
    if rest.first().is_some_and(|t| t.starts_with('[')) {
        rest = &rest[1..];
    }
    Some(RankDevice {
        rank,
        host,
        device,
        name: rest.join(" "),
    })
}

fn parse_row(line: &str, c: &Columns) -> Result<Row, String> {
    let t: Vec<&str> = line.split_whitespace().collect();
    let layout = || {
        format!("{} columns as in the header (size count type redop{} then time algbw busbw per group), got {}", c.n, if c.root.is_some() { " root" } else { "" }, t.len())
    };
    let int = |i: usize, what: &str| {
        t[i].parse::<u64>()
            .map_err(|_| format!("{what} as an integer in column {}, got {:?}", i + 1, t[i]))
    };
    let float = |i: usize, what: &str| {
        let v = t[i]
            .parse::<f64>()
            .map_err(|_| format!("{what} as a number in column {}, got {:?}", i + 1, t[i]))?;
        if v.is_finite() && v >= 0.0 {
            Ok(v)
        } else {
            Err(format!(
                "{what} of 0 or more in column {} (a measured value), got {v}",
                i + 1
            ))
        }
    };
    // A row with the out-of-place group left blank (nccl-tests' trace replay) is one group short.
    let full = c
        .groups
        .last()
        .map(|g| g.3.unwrap_or(g.2) + 1)
        .unwrap_or(c.n);
    let glen = c
        .groups
        .first()
        .map(|g| g.3.unwrap_or(g.2) + 1 - g.0)
        .unwrap_or(0);
    let blank_oop = c.groups.len() == 2 && t.len() == full - glen;
    let mut groups = Vec::new();
    if blank_oop {
        groups.push(None);
    }
    for &(ti, ai, bi, wi) in c.groups.iter().skip(usize::from(blank_oop)) {
        let (ti, ai, bi, wi) = if blank_oop {
            (ti - glen, ai - glen, bi - glen, wi.map(|w| w - glen))
        } else {
            (ti, ai, bi, wi)
        };
        if bi >= t.len() {
            return Err(layout());
        }
        let wrong = match wi {
            Some(w) if w < t.len() => match t[w] {
                "N/A" => None,
                s => Some(s.parse::<f64>().map_err(|_| {
                    format!("#wrong as a number or N/A in column {}, got {s:?}", w + 1)
                })?),
            },
            Some(_) => return Err(layout()),
            None => None,
        };
        groups.push(Some(Timing {
            time_us: float(ti, "time (us)")?,
            algbw_gbps: float(ai, "algbw (GB/s)")?,
            busbw_gbps: float(bi, "busbw (GB/s)")?,
            wrong,
        }));
    }
    let root = match c.root {
        Some(r) => t[r]
            .parse::<i64>()
            .map_err(|_| format!("root as an integer in column {}, got {:?}", r + 1, t[r]))?,
        None => -1,
    };
    Ok(Row {
        size_bytes: int(c.size, "size (B)")?,
        count: int(c.count, "count (elements)")?,
        dtype: t[c.dtype].to_string(),
        redop: t[c.redop].to_string(),
        root,
        out_of_place: groups.first().copied().flatten(),
        in_place: groups.get(1).copied().flatten(),
    })
}

/// NCCL's version code: `major*10000 + minor*100 + patch` since 2.9, `major*1000 + minor*100 +
/// patch` before.
pub fn version_from_code(code: u64) -> String {
    if code >= 10000 {
        format!("{}.{}.{}", code / 10000, (code % 10000) / 100, code % 100)
    } else {
        format!("{}.{}.{}", code / 1000, (code % 1000) / 100, code % 100)
    }
}

/// Parses the JSON report written by `nccl-tests -J FILE` (schema in the module doc).
pub fn parse_json(text: &str, file: &str) -> Result<NcclTestsRun, ImportError> {
    let v: Value = serde_json::from_str(text)
        .map_err(|e| ImportError::at(file, e.line(), format!("nccl-tests JSON ({e})")))?;
    let field = |path: &str, what: &str| ImportError::whole(file, format!("`{path}`: {what}"));
    let mut run = NcclTestsRun::default();
    if let Some(args) = v.get("args").and_then(Value::as_array) {
        let joined: Vec<&str> = args.iter().filter_map(Value::as_str).collect();
        run.collective = collective_in(&joined.join(" "));
    }
    run.nccl_version = v
        .get("nccl_version")
        .and_then(Value::as_u64)
        .map(version_from_code);
    if let Some(cfg) = v.get("config") {
        let t = cfg.get("nthreads").and_then(Value::as_u64);
        let g = cfg.get("ngpus").and_then(Value::as_u64);
        if let (Some(t), Some(g)) = (t, g) {
            let ranks = t
                .checked_mul(g)
                .filter(|n| (1..=sim::limits::RANKS_MAX).contains(n))
                .ok_or_else(|| {
                    field(
                        "config.nthreads x config.ngpus",
                        &format!(
                            "from 1 to {} GPUs per process, got {t} x {g}",
                            sim::limits::RANKS_MAX
                        ),
                    )
                })?;
            run.gpus_per_process = Some(ranks as u32);
        }
        for (i, d) in cfg
            .get("devices")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
        {
            let s = |k: &str| d.get(k).and_then(Value::as_str).map(str::to_string);
            let n = |k: &str| d.get(k).and_then(Value::as_u64);
            run.devices.push(RankDevice {
                rank: n("rank")
                    .ok_or_else(|| field(&format!("config.devices[{i}].rank"), "an integer"))?
                    as u32,
                host: s("hostname").unwrap_or_default(),
                device: n("device").unwrap_or(0) as u32,
                name: s("device_info").unwrap_or_default(),
            });
        }
    }
    let results = v
        .get("results")
        .and_then(Value::as_array)
        .ok_or_else(|| field("results", "a list of result rows (is the run complete?)"))?;
    for (i, r) in results.iter().enumerate() {
        let p = format!("results[{i}]");
        let u = |k: &str| {
            r.get(k)
                .and_then(Value::as_u64)
                .ok_or_else(|| field(&format!("{p}.{k}"), "a non-negative integer"))
        };
        let s = |k: &str| {
            r.get(k)
                .and_then(Value::as_str)
                .map(|s| s.trim().to_string())
                .ok_or_else(|| field(&format!("{p}.{k}"), "a string"))
        };
        let timing = |k: &str| -> Result<Option<Timing>, ImportError> {
            let Some(g) = r.get(k).filter(|g| !g.is_null()) else {
                return Ok(None);
            };
            let num = |f: &str| g.get(f).and_then(json_f64);
            for f in ["time", "cpu_time", "alg_bw", "bus_bw"] {
                if let Some(v) = num(f).filter(|v| !(v.is_finite() && *v >= 0.0)) {
                    return Err(field(
                        &format!("{p}.{k}.{f}"),
                        &format!("a measured value of 0 or more, got {v}"),
                    ));
                }
            }
            Ok(Some(Timing {
                time_us: num("time")
                    .or_else(|| num("cpu_time"))
                    .ok_or_else(|| field(&format!("{p}.{k}.time"), "a number of microseconds"))?,
                algbw_gbps: num("alg_bw")
                    .ok_or_else(|| field(&format!("{p}.{k}.alg_bw"), "a number (GB/s)"))?,
                busbw_gbps: num("bus_bw")
                    .ok_or_else(|| field(&format!("{p}.{k}.bus_bw"), "a number (GB/s)"))?,
                wrong: num("nwrong"),
            }))
        };
        let root = match r.get("root") {
            Some(Value::String(s)) => s
                .trim()
                .parse()
                .map_err(|_| field(&format!("{p}.root"), "an integer"))?,
            Some(Value::Number(n)) => n.as_i64().unwrap_or(-1),
            _ => -1,
        };
        run.rows.push(Row {
            size_bytes: u("size")?,
            count: u("count")?,
            dtype: s("type")?,
            redop: s("redop")?,
            root,
            out_of_place: timing("out_of_place")?,
            in_place: timing("in_place")?,
        });
    }
    if run.rows.is_empty() {
        return Err(field("results", "at least one result row"));
    }
    run.avg_busbw_gbps = v
        .get("average_bus_bandwidth")
        .and_then(|a| a.get("bandwidth"))
        .and_then(json_f64);
    Ok(run)
}

/// nccl-tests writes NaN as the string "nan".
fn json_f64(v: &Value) -> Option<f64> {
    match v {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}
