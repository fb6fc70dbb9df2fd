//! One self-contained HTML page per study: every figure's SVG inline (the page needs no other
//! file to show), the table behind each figure, and the same figures and tables also written
//! as files (`figures/NAME.svg`, `tables/NAME.csv`; tables shown without a figure also as
//! `tables/N-NAME.md`, Markdown) for reuse.

use std::path::{Path, PathBuf};

use crate::figures::Table;
use crate::study::Section;

/// HTML tables show at most this many rows (the CSV next to the page has them all).
pub const MAX_HTML_ROWS: usize = 300;

pub fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn html_table(t: &Table) -> String {
    let mut h = String::from("<table><thead><tr>");
    for c in &t.columns {
        h += &format!("<th>{}</th>", escape(c));
    }
    h += "</tr></thead><tbody>\n";
    for r in t.rows.iter().take(MAX_HTML_ROWS) {
        h += "<tr>";
        for c in r {
            h += &format!("<td>{}</td>", escape(c));
        }
        h += "</tr>\n";
    }
    h += "</tbody></table>";
    if t.rows.len() > MAX_HTML_ROWS {
        h += &format!(
            "<p class=\"note\">First {MAX_HTML_ROWS} of {} rows; all are in the CSV file.</p>",
            t.rows.len()
        );
    }
    h
}

/// The page's HTML.
pub fn render(title: &str, sections: &[Section]) -> String {
    let mut h = format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>{t}</title>\n<style>\n\
body{{font-family:system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;margin:24px auto;max-width:1320px;color:#222;padding:0 16px}}\n\
h1{{font-size:28px}}h2{{border-bottom:2px solid #0072b2;padding-bottom:4px;margin-top:40px}}\n\
figure{{margin:24px 0;padding:12px;border:1px solid #ddd;border-radius:6px}}figure svg{{max-width:100%;height:auto}}\n\
figcaption{{color:#444;margin:6px 0}}table{{border-collapse:collapse;font-size:13px;margin:8px 0}}\n\
td,th{{border:1px solid #ccc;padding:3px 8px;text-align:right}}td:first-child,th:first-child{{text-align:left}}\n\
th{{background:#f3f6fa}}details{{margin-top:6px}}.note{{color:#666;font-size:13px}}nav li{{margin:2px 0}}\n\
</style></head><body>\n<h1>{t}</h1>\n",
        t = escape(title)
    );
    h += "<nav><ul>\n";
    for s in sections {
        for f in &s.figures {
            h += &format!(
                "<li><a href=\"#fig-{}\">{}</a></li>\n",
                escape(&f.name),
                escape(&f.title)
            );
        }
    }
    h += "</ul></nav>\n";
    for s in sections {
        h += &format!(
            "<h2>{}</h2>\n<p>{}</p>\n",
            escape(&s.heading),
            escape(&s.text)
        );
        for f in &s.figures {
            let svg = f
                .svg
                .trim_start_matches(|c: char| c != '<')
                .trim_start_matches("<?xml version=\"1.0\" encoding=\"UTF-8\"?>")
                .trim();
            h += &format!(
                "<figure id=\"fig-{n}\">\n{svg}\n<figcaption>{c} <a href=\"figures/{n}.svg\">figures/{n}.svg</a> · <a href=\"tables/{n}.csv\">tables/{n}.csv</a></figcaption>\n\
<details><summary>Table behind the figure</summary>\n{table}\n</details>\n</figure>\n",
                n = escape(&f.name),
                c = escape(&f.caption),
                table = html_table(&f.table),
            );
        }
        for (name, t) in &s.tables {
            h += &format!(
                "<details><summary>{}</summary>\n{}\n</details>\n",
                escape(name),
                html_table(t)
            );
        }
    }
    h += "<p class=\"note\">Written by dtsim-report. Times and bandwidths are simulated.</p>\n</body></html>\n";
    h
}

/// Writes `index.html`, `figures/*.svg` and `tables/*.csv` into `out`; returns the paths.
pub fn write(out: &Path, title: &str, sections: &[Section]) -> Result<Vec<PathBuf>, String> {
    let put = |p: PathBuf, text: &str| -> Result<PathBuf, String> {
        sim::metrics::output::write_atomic(&p, text.as_bytes())
            .map_err(|e| format!("{}: {e}", p.display()))?;
        Ok(p)
    };
    let mut written = Vec::new();
    for (k, s) in sections.iter().enumerate() {
        for f in &s.figures {
            written.push(put(
                out.join("figures").join(format!("{}.svg", f.name)),
                &f.svg,
            )?);
            written.push(put(
                out.join("tables").join(format!("{}.csv", f.name)),
                &f.table.to_csv(),
            )?);
        }
        // Tables shown without a figure: as CSV and as Markdown.
        for (name, t) in &s.tables {
            let stem = format!("{}-{}", k + 1, crate::study::slug(name));
            written.push(put(
                out.join("tables").join(format!("{stem}.csv")),
                &t.to_csv(),
            )?);
            written.push(put(
                out.join("tables").join(format!("{stem}.md")),
                &t.to_markdown(),
            )?);
        }
    }
    written.push(put(out.join("index.html"), &render(title, sections))?);
    Ok(written)
}
