//! Figures as SVG (plotters' SVG backend: text stays text, so no font files are needed), each
//! with a title, axes with units and a legend, and the table of numbers it was drawn from.

use plotters::coord::Shift;
use plotters::prelude::*;
use sim::metrics::output::CsvText;

mod xy;

pub use xy::{bars, lines, over_time, predicted_vs_measured};

/// What a predicted-vs-measured point may carry besides its values: the range of the measured
/// runs behind it and the range of the model's plays (fastest, slowest).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct PointSpans {
    pub measured: Option<(f64, f64)>,
    pub predicted: Option<(f64, f64)>,
}

/// The numbers behind a figure, as strings formatted for people (first column = row label).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Table {
    pub columns: Vec<String>,
    pub rows: Vec<Vec<String>>,
}

impl Table {
    pub fn to_csv(&self) -> String {
        let mut t = CsvText::new(&self.columns);
        for r in &self.rows {
            t.row(r);
        }
        t.finish()
    }

    /// The table in Markdown (GitHub's pipe tables), `|` in a cell escaped, for pasting into
    /// a report or a README.
    pub fn to_markdown(&self) -> String {
        let line = |cells: &[String]| {
            let escaped: Vec<String> = cells.iter().map(|c| c.replace('|', "\\|")).collect();
            format!("| {} |\n", escaped.join(" | "))
        };
        let mut out = line(&self.columns);
        out += &format!("|{}\n", "---|".repeat(self.columns.len()));
        for r in &self.rows {
            out += &line(r);
        }
        out
    }
}

/// One figure of a report.
#[derive(Debug, Clone, PartialEq)]
pub struct Figure {
    /// File stem: `figures/<name>.svg`, `tables/<name>.csv`.
    pub name: String,
    pub title: String,
    /// What it shows, in a sentence.
    pub caption: String,
    pub svg: String,
    pub table: Table,
    /// Legend entries (lines, bar series, phases).
    pub series: usize,
    /// Heatmap cells drawn (0 for other figures).
    pub cells: usize,
}

type Res<T> = Result<T, String>;

fn e<E: std::fmt::Debug>(x: E) -> String {
    format!("drawing failed: {x:?}")
}

/// Colors for series, distinguishable and colour-blind safe (Okabe-Ito).
pub const PALETTE: [RGBColor; 8] = [
    RGBColor(0, 114, 178),
    RGBColor(230, 159, 0),
    RGBColor(0, 158, 115),
    RGBColor(204, 121, 167),
    RGBColor(86, 180, 233),
    RGBColor(213, 94, 0),
    RGBColor(240, 228, 66),
    RGBColor(0, 0, 0),
];

fn color(i: usize) -> RGBColor {
    PALETTE[i % PALETTE.len()]
}

/// Viridis-like colour for t in [0, 1].
pub fn heat(t: f64) -> RGBColor {
    const STOPS: [(f64, f64, f64); 5] = [
        (68.0, 1.0, 84.0),
        (59.0, 82.0, 139.0),
        (33.0, 145.0, 140.0),
        (94.0, 201.0, 98.0),
        (253.0, 231.0, 37.0),
    ];
    let t = if t.is_finite() {
        t.clamp(0.0, 1.0)
    } else {
        0.0
    };
    let x = t * (STOPS.len() - 1) as f64;
    let i = (x.floor() as usize).min(STOPS.len() - 2);
    let f = x - i as f64;
    let (a, b) = (STOPS[i], STOPS[i + 1]);
    let m = |p: f64, q: f64| (p + (q - p) * f).round() as u8;
    RGBColor(m(a.0, b.0), m(a.1, b.1), m(a.2, b.2))
}

const FONT: &str = "sans-serif";

fn svg_of(
    w: u32,
    h: u32,
    draw: impl FnOnce(&DrawingArea<SVGBackend, Shift>) -> Res<()>,
) -> Res<String> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (w, h)).into_drawing_area();
        root.fill(&WHITE).map_err(e)?;
        draw(&root)?;
        root.present().map_err(e)?;
    }
    Ok(svg)
}

/// A matrix as coloured cells (row i = sender, column j = receiver), with a colour bar whose
/// axis carries the unit. `fmt` formats one value for the colour bar and the table.
#[allow(clippy::too_many_arguments)]
pub fn heatmap(
    name: &str,
    title: &str,
    caption: &str,
    axis_label: (&str, &str),
    labels: &[String],
    m: &[Vec<f64>],
    unit: &str,
    fmt: &dyn Fn(f64) -> String,
) -> Res<Figure> {
    let n = labels.len();
    let max = m.iter().flatten().copied().fold(0.0f64, f64::max);
    let min_nz = m
        .iter()
        .flatten()
        .copied()
        .filter(|&v| v > 0.0)
        .fold(f64::INFINITY, f64::min);
    let lo = if min_nz.is_finite() && min_nz < max {
        min_nz
    } else {
        0.0
    };
    let scale = |v: f64| if max > lo { (v - lo) / (max - lo) } else { 1.0 };
    let mut cells = 0;
    let svg = svg_of(900, 760, |root| {
        let (left, right) = root.split_horizontally(780);
        let mut chart = ChartBuilder::on(&left)
            .caption(title, (FONT, 22))
            .margin(12)
            .x_label_area_size(48)
            .y_label_area_size(64)
            .build_cartesian_2d(0f64..n as f64, 0f64..n as f64)
            .map_err(e)?;
        let step = (n / 16).max(1);
        let lab = |v: &f64| {
            let i = v.floor() as usize;
            if (*v - v.floor() - 0.5).abs() < 1e-9 && i.is_multiple_of(step) {
                i.to_string()
            } else {
                String::new()
            }
        };
        let labs = n.min(16) * 2 + 1;
        chart
            .configure_mesh()
            .disable_mesh()
            .x_desc(axis_label.1)
            .y_desc(axis_label.0)
            .label_style((FONT, 13))
            .axis_desc_style((FONT, 16))
            .x_labels(labs.max(2) * step.max(1))
            .y_labels(labs.max(2) * step.max(1))
            .x_label_formatter(&|v| lab(v))
            .y_label_formatter(&|v| {
                let flipped = n as f64 - v;
                lab(&flipped)
            })
            .draw()
            .map_err(e)?;
        let mut rects = Vec::new();
        for (i, row) in m.iter().enumerate() {
            for (j, &v) in row.iter().enumerate() {
                let y = (n - 1 - i) as f64;
                let c = if v > 0.0 {
                    heat(scale(v))
                } else {
                    RGBColor(240, 240, 240)
                };
                rects.push(Rectangle::new(
                    [(j as f64, y), (j as f64 + 1.0, y + 1.0)],
                    c.filled(),
                ));
            }
        }
        cells = rects.len();
        chart.draw_series(rects).map_err(e)?;
        // colour bar: the legend of a heatmap
        let hi = if max > lo { max } else { lo + 1.0 };
        let mut bar = ChartBuilder::on(&right)
            .margin_top(50)
            .margin_bottom(60)
            .margin_right(8)
            .y_label_area_size(70)
            .build_cartesian_2d(0f64..1f64, lo..hi)
            .map_err(e)?;
        bar.configure_mesh()
            .disable_mesh()
            .disable_x_axis()
            .y_desc(unit)
            .label_style((FONT, 13))
            .axis_desc_style((FONT, 15))
            .y_labels(6)
            .y_label_formatter(&|v| fmt(*v))
            .draw()
            .map_err(e)?;
        let k = 64;
        bar.draw_series((0..k).map(|s| {
            let a = lo + (hi - lo) * s as f64 / k as f64;
            let b = lo + (hi - lo) * (s + 1) as f64 / k as f64;
            Rectangle::new(
                [(0.0, a), (1.0, b)],
                heat(s as f64 / (k - 1) as f64).filled(),
            )
        }))
        .map_err(e)?;
        Ok(())
    })?;
    let mut table = Table {
        columns: std::iter::once(format!("{} \\ {}", axis_label.0, axis_label.1))
            .chain(labels.iter().cloned())
            .collect(),
        rows: Vec::new(),
    };
    for (i, row) in m.iter().enumerate() {
        table.rows.push(
            std::iter::once(labels[i].clone())
                .chain(
                    row.iter()
                        .map(|&v| if v > 0.0 { fmt(v) } else { "0".into() }),
                )
                .collect(),
        );
    }
    Ok(Figure {
        name: name.into(),
        title: title.into(),
        caption: caption.into(),
        svg,
        table,
        series: 1,
        cells,
    })
}

/// One interval of a timeline.
#[derive(Debug, Clone, PartialEq)]
pub struct Span {
    pub track: usize,
    pub start_us: f64,
    pub end_us: f64,
    pub category: String,
}

/// A Gantt chart: one row per track, bars coloured by category (one legend entry each).
pub fn timeline(
    name: &str,
    title: &str,
    caption: &str,
    tracks: &[String],
    spans: &[Span],
) -> Res<Figure> {
    let mut cats: Vec<String> = Vec::new();
    for s in spans {
        if !cats.contains(&s.category) {
            cats.push(s.category.clone());
        }
    }
    let end = spans.iter().map(|s| s.end_us).fold(0.0, f64::max).max(1e-3);
    let (div, unit) = if end >= 1e3 { (1e3, "ms") } else { (1.0, "us") };
    let n = tracks.len().max(1);
    let h = (140 + 22 * n as u32).clamp(300, 1400);
    let svg = svg_of(1100, h, |root| {
        let mut chart = ChartBuilder::on(root)
            .caption(title, (FONT, 22))
            .margin(14)
            .x_label_area_size(50)
            .y_label_area_size(150)
            .build_cartesian_2d(0f64..end / div * 1.22, 0f64..n as f64)
            .map_err(e)?;
        let step = (n / 40).max(1);
        chart
            .configure_mesh()
            .disable_y_mesh()
            .x_desc(format!("time in the step ({unit})"))
            .y_desc("rank")
            .label_style((FONT, 12))
            .axis_desc_style((FONT, 16))
            .y_labels(2 * n + 1)
            .y_label_formatter(&|v| {
                let i = n as f64 - v - 0.5;
                if (i - i.round()).abs() < 1e-6 && (i.round() as usize).is_multiple_of(step) {
                    tracks.get(i.round() as usize).cloned().unwrap_or_default()
                } else {
                    String::new()
                }
            })
            .x_label_formatter(&|v| crate::fmt::num(*v))
            .light_line_style(RGBColor(235, 235, 235))
            .draw()
            .map_err(e)?;
        for (ci, cat) in cats.iter().enumerate() {
            let c = color(ci);
            let rects: Vec<_> = spans
                .iter()
                .filter(|s| &s.category == cat)
                .map(|s| {
                    let y = (n - 1 - s.track) as f64;
                    Rectangle::new(
                        [
                            (s.start_us / div, y + 0.15),
                            (s.end_us.max(s.start_us) / div, y + 0.85),
                        ],
                        c.filled(),
                    )
                })
                .collect();
            chart
                .draw_series(rects)
                .map_err(e)?
                .label(cat.as_str())
                .legend(move |(x, y)| Rectangle::new([(x, y - 6), (x + 14, y + 6)], c.filled()));
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.9))
            .border_style(BLACK)
            .position(SeriesLabelPosition::UpperRight)
            .label_font((FONT, 14))
            .draw()
            .map_err(e)?;
        Ok(())
    })?;
    let mut table = Table {
        columns: vec![
            "rank".into(),
            "phase".into(),
            "busy".into(),
            "first start".into(),
            "last end".into(),
        ],
        rows: Vec::new(),
    };
    for (t, name) in tracks.iter().enumerate() {
        for cat in &cats {
            let mine: Vec<&Span> = spans
                .iter()
                .filter(|s| s.track == t && &s.category == cat)
                .collect();
            if mine.is_empty() {
                continue;
            }
            let busy: f64 = crate::fmt::union_us(mine.iter().map(|s| (s.start_us, s.end_us)));
            table.rows.push(vec![
                name.clone(),
                cat.clone(),
                crate::fmt::time_us(busy),
                crate::fmt::time_us(
                    mine.iter()
                        .map(|s| s.start_us)
                        .fold(f64::INFINITY, f64::min),
                ),
                crate::fmt::time_us(mine.iter().map(|s| s.end_us).fold(0.0, f64::max)),
            ]);
        }
    }
    Ok(Figure {
        name: name.into(),
        title: title.into(),
        caption: caption.into(),
        svg,
        table,
        series: cats.len(),
        cells: 0,
    })
}

#[cfg(test)]
mod tests {
    use super::Table;

    #[test]
    fn a_figures_table_is_written_as_csv_with_its_awkward_cells_quoted() {
        let t = Table {
            columns: vec!["method".into(), "time (ms)".into()],
            rows: vec![
                vec!["ring, 2 rings".into(), "1.5".into()],
                vec!["the \"fast\" one".into(), "".into()],
                vec!["two\nlines".into(), "3".into()],
            ],
        };
        assert_eq!(
            t.to_csv(),
            "method,time (ms)\n\"ring, 2 rings\",1.5\n\"the \"\"fast\"\" one\",\n\"two\nlines\",3\n"
        );
    }

    #[test]
    fn a_table_in_markdown_escapes_the_pipes_in_its_cells() {
        let t = Table {
            columns: vec!["dataset".into(), "mean |error|".into()],
            rows: vec![vec!["a".into(), "2.5%".into()]],
        };
        assert_eq!(
            t.to_markdown(),
            "| dataset | mean \\|error\\| |\n|---|---|\n| a | 2.5% |\n"
        );
    }
}
