//! Reports from dtsim results.
//!
//! This first version turns run summaries (`summary.json` written by `dtsim run --out`) into a
//! self-contained HTML comparison table. Figures (plotters) and polars tables come with the
//! reports issue; polars stays in this crate so the simulator builds fast.

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
