//! Reports from dtsim results: one self-contained HTML page per study, with SVG figures
//! (plotters) and the tables behind them (read with polars), and sweep results as Parquet.
//!
//! polars lives in this crate only, so that `dtsim` (the `sim` crate) builds in minutes; the
//! `dtsim-report` binary is what `dtsim report` runs.

pub mod data;
pub mod figures;
pub mod fmt;
pub mod page;
pub mod study;

use sim::metrics::Summary;
use sim::units::{fmt_bytes, three_digits};

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// One HTML page comparing runs: one row per summary, in the order given.
pub fn comparison_table(title: &str, runs: &[Summary]) -> String {
    let mut h = format!(
        "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>{t}</title>\n<style>body{{font-family:sans-serif}}\
         table{{border-collapse:collapse}}td,th{{border:1px solid #bbb;padding:4px 8px;text-align:right}}\
         td:first-child,th:first-child{{text-align:left}}</style></head><body>\n<h1>{t}</h1>\n<table>\n\
         <tr><th>scenario</th><th>topology</th><th>collective</th><th>algorithm</th><th>ranks</th><th>size</th>\
         <th>time (us)</th><th>algbw (GB/s)</th><th>busbw (GB/s)</th></tr>\n",
        t = escape(title)
    );
    for s in runs {
        h += &format!(
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>\n",
            escape(&s.scenario),
            escape(&s.topology),
            escape(&s.collective),
            escape(&s.algorithm),
            s.ranks,
            fmt_bytes(s.bytes as f64),
            three_digits(s.time_us),
            three_digits(s.algbw_gbytes_per_s),
            three_digits(s.busbw_gbytes_per_s),
        );
    }
    h += "</table>\n</body></html>\n";
    h
}

/// Reads a `summary.json` written by `dtsim run --out`.
pub fn read_summary(path: &std::path::Path) -> Result<Summary, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn summary(name: &str, time_us: f64) -> Summary {
        serde_json::from_value(serde_json::json!({
            "scenario": name, "topology": "t<1>", "network_model": "flow", "profile": "nominal",
            "seed": 1, "collective": "all_reduce", "algorithm": "ring(1)", "ranks": 8,
            "bytes": 1073741824u64, "time_ps": (time_us * 1e6) as u64, "time_us": time_us,
            "algbw_gbytes_per_s": 1.0, "busbw_gbytes_per_s": 1.75, "ops": 3,
            "bytes_by_class": {}, "busiest_links": [], "events": 1,
            "net": {"batches": 1, "flows": 1, "events": 1, "solves": 1, "solution_reuses": 0,
                    "replays": 0, "replays_interrupted": 0}
        }))
        .unwrap()
    }

    #[test]
    fn the_comparison_table_has_one_row_per_run_and_escapes_names() {
        let html = comparison_table("ring vs tree", &[summary("a", 10.0), summary("b", 2000.0)]);
        assert_eq!(html.matches("<tr><td>").count(), 2);
        assert!(html.contains("t&lt;1&gt;"), "names are escaped");
        assert!(html.contains("<td>2000</td>"));
        assert!(html.contains("1.00 GiB"));
    }
}
