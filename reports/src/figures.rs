//! Figures as SVG (plotters' SVG backend: text stays text, so no font files are needed), each
//! with a title, axes with units and a legend, and the table of numbers it was drawn from.

use plotters::coord::Shift;
use plotters::prelude::*;

/// The numbers behind a figure, as strings formatted for people (first column = row label).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Table {
    pub columns: Vec<String>,
    pub rows: Vec<Vec<String>>,
}

impl Table {
    pub fn to_csv(&self) -> String {
        let q = |s: &str| {
            if s.contains([',', '"', '\n']) {
                format!("\"{}\"", s.replace('"', "\"\""))
            } else {
                s.to_string()
            }
        };
        let mut out = self
            .columns
            .iter()
            .map(|c| q(c))
            .collect::<Vec<_>>()
            .join(",");
        out.push('\n');
        for r in &self.rows {
            out += &r.iter().map(|c| q(c)).collect::<Vec<_>>().join(",");
            out.push('\n');
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

/// Lines through points, one per series, on a linear or log x axis.
#[allow(clippy::too_many_arguments)]
pub fn lines(
    name: &str,
    title: &str,
    caption: &str,
    x_label: &str,
    y_label: &str,
    series: &[(String, Vec<(f64, f64)>)],
    log_x: bool,
    x_fmt: &dyn Fn(f64) -> String,
    y_fmt: &dyn Fn(f64) -> String,
) -> Res<Figure> {
    // log axes are drawn as log2 on a linear axis, labelled at powers of two
    let tx = |x: f64| {
        if log_x {
            x.max(f64::MIN_POSITIVE).log2()
        } else {
            x
        }
    };
    let series: Vec<(String, Vec<(f64, f64)>)> = series
        .iter()
        .map(|(l, p)| (l.clone(), p.iter().map(|&(x, y)| (tx(x), y)).collect()))
        .collect();
    let series = &series[..];
    let declining = series
        .iter()
        .all(|(_, p)| p.len() < 2 || p[p.len() - 1].1 < p[0].1);
    let label_x = |v: f64| {
        if !log_x {
            x_fmt(v)
        } else if (v - v.round()).abs() < 1e-6 {
            x_fmt(2f64.powi(v.round() as i32))
        } else {
            String::new()
        }
    };
    let pts = series.iter().flat_map(|(_, p)| p.iter());
    let (mut x0, mut x1, mut y1) = (f64::INFINITY, f64::NEG_INFINITY, 0.0f64);
    for &(x, y) in pts {
        x0 = x0.min(x);
        x1 = x1.max(x);
        y1 = y1.max(y);
    }
    if !x0.is_finite() {
        return Err(format!("{name}: no points to draw"));
    }
    if x1 <= x0 {
        x1 = x0 * 2.0 + 1.0;
    }
    let y1 = if y1 > 0.0 { y1 * 1.1 } else { 1.0 };
    let svg = svg_of(900, 520, |root| {
        let mut b = ChartBuilder::on(root);
        b.caption(title, (FONT, 22))
            .margin(14)
            .x_label_area_size(50)
            .y_label_area_size(80);
        macro_rules! body {
            ($chart:expr) => {{
                let mut chart = $chart;
                chart
                    .configure_mesh()
                    .x_desc(x_label)
                    .y_desc(y_label)
                    .x_labels(if log_x {
                        ((x1 - x0).ceil() as usize + 2) * 2
                    } else {
                        10
                    })
                    .x_label_formatter(&|v| label_x(*v))
                    .y_label_formatter(&|v| y_fmt(*v))
                    .label_style((FONT, 14))
                    .axis_desc_style((FONT, 16))
                    .light_line_style(WHITE)
                    .bold_line_style(RGBColor(225, 225, 225))
                    .draw()
                    .map_err(e)?;
                for (i, (label, p)) in series.iter().enumerate() {
                    let c = color(i);
                    chart
                        .draw_series(LineSeries::new(p.iter().copied(), c.stroke_width(2)))
                        .map_err(e)?
                        .label(label.as_str())
                        .legend(move |(x, y)| {
                            PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(3))
                        });
                    chart
                        .draw_series(p.iter().map(|&(x, y)| Circle::new((x, y), 3, c.filled())))
                        .map_err(e)?;
                }
                chart
                    .configure_series_labels()
                    .background_style(WHITE.mix(0.85))
                    .border_style(BLACK)
                    .position(if declining {
                        SeriesLabelPosition::LowerLeft
                    } else {
                        SeriesLabelPosition::UpperLeft
                    })
                    .label_font((FONT, 14))
                    .draw()
                    .map_err(e)?;
            }};
        }
        let pad = (x1 - x0) * 0.05;
        body!(b
            .build_cartesian_2d(x0 - pad..x1 + pad, 0f64..y1)
            .map_err(e)?);
        Ok(())
    })?;
    let mut xs: Vec<f64> = series
        .iter()
        .flat_map(|(_, p)| p.iter().map(|q| q.0))
        .collect();
    xs.sort_by(f64::total_cmp);
    xs.dedup();
    let table = Table {
        columns: std::iter::once(x_label.to_string())
            .chain(series.iter().map(|(l, _)| format!("{l}: {y_label}")))
            .collect(),
        rows: xs
            .iter()
            .map(|&x| {
                std::iter::once(x_fmt(if log_x { 2f64.powf(x) } else { x }))
                    .chain(series.iter().map(|(_, p)| {
                        p.iter()
                            .find(|q| q.0 == x)
                            .map(|q| y_fmt(q.1))
                            .unwrap_or_default()
                    }))
                    .collect()
            })
            .collect(),
    };
    Ok(Figure {
        name: name.into(),
        title: title.into(),
        caption: caption.into(),
        svg,
        table,
        series: series.len(),
        cells: 0,
    })
}

/// Bars per category; several series are stacked (e.g. compute + exposed communication).
#[allow(clippy::too_many_arguments)]
pub fn bars(
    name: &str,
    title: &str,
    caption: &str,
    x_label: &str,
    y_label: &str,
    categories: &[String],
    series: &[(String, Vec<f64>)],
    y_fmt: &dyn Fn(f64) -> String,
) -> Res<Figure> {
    let k = categories.len();
    if k == 0 {
        return Err(format!("{name}: no bars to draw"));
    }
    let top = (0..k)
        .map(|i| {
            series
                .iter()
                .map(|(_, v)| v.get(i).copied().unwrap_or(0.0))
                .sum::<f64>()
        })
        .fold(0.0, f64::max);
    let top = if top > 0.0 { top * 1.15 } else { 1.0 };
    let width = (200 + 90 * k as u32).clamp(700, 1300);
    let longest = categories
        .iter()
        .map(|c| c.chars().count())
        .max()
        .unwrap_or(0);
    let rotate = longest * 8 > (width as usize - 120) / k;
    let x_area = if rotate {
        (longest as u32 * 7 + 40).min(260)
    } else {
        70
    };
    let svg = svg_of(width, 450 + x_area, |root| {
        let mut chart = ChartBuilder::on(root)
            .caption(title, (FONT, 22))
            .margin(14)
            .x_label_area_size(x_area)
            .y_label_area_size(80)
            .build_cartesian_2d((0..k as i32 - 1).into_segmented(), 0f64..top)
            .map_err(e)?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_desc(x_label)
            .y_desc(y_label)
            .label_style((FONT, 13))
            .axis_desc_style((FONT, 16))
            .x_label_style(if rotate {
                TextStyle::from((FONT, 12)).transform(FontTransform::Rotate90)
            } else {
                TextStyle::from((FONT, 13))
            })
            .x_labels(k)
            .x_label_formatter(&|v| match v {
                SegmentValue::CenterOf(i) | SegmentValue::Exact(i) => {
                    categories.get(*i as usize).cloned().unwrap_or_default()
                }
                SegmentValue::Last => String::new(),
            })
            .y_label_formatter(&|v| y_fmt(*v))
            .light_line_style(WHITE)
            .bold_line_style(RGBColor(225, 225, 225))
            .draw()
            .map_err(e)?;
        let mut base = vec![0.0; k];
        for (s, (label, vals)) in series.iter().enumerate() {
            let c = color(s);
            let rects: Vec<_> = (0..k)
                .map(|i| {
                    let v = vals.get(i).copied().unwrap_or(0.0);
                    let (a, b) = (base[i], base[i] + v);
                    base[i] = b;
                    let mut r = Rectangle::new(
                        [
                            (SegmentValue::Exact(i as i32), a),
                            (SegmentValue::Exact(i as i32 + 1), b),
                        ],
                        c.filled(),
                    );
                    r.set_margin(0, 0, 12, 12);
                    r
                })
                .collect();
            chart
                .draw_series(rects)
                .map_err(e)?
                .label(label.as_str())
                .legend(move |(x, y)| Rectangle::new([(x, y - 6), (x + 14, y + 6)], c.filled()));
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .position(SeriesLabelPosition::UpperRight)
            .label_font((FONT, 14))
            .draw()
            .map_err(e)?;
        Ok(())
    })?;
    let table = Table {
        columns: std::iter::once(x_label.to_string())
            .chain(series.iter().map(|(l, _)| format!("{l} ({y_label})")))
            .collect(),
        rows: categories
            .iter()
            .enumerate()
            .map(|(i, c)| {
                std::iter::once(c.clone())
                    .chain(
                        series
                            .iter()
                            .map(|(_, v)| y_fmt(v.get(i).copied().unwrap_or(0.0))),
                    )
                    .collect()
            })
            .collect(),
    };
    Ok(Figure {
        name: name.into(),
        title: title.into(),
        caption: caption.into(),
        svg,
        table,
        series: series.len(),
        cells: 0,
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

/// Predicted against measured values: points, the y = x line and a ±`band_pct` band.
pub fn predicted_vs_measured(
    name: &str,
    title: &str,
    caption: &str,
    unit: &str,
    rows: &[(String, f64, f64)],
    band_pct: f64,
) -> Res<Figure> {
    let max = rows.iter().flat_map(|r| [r.1, r.2]).fold(0.0, f64::max) * 1.1;
    let max = if max > 0.0 { max } else { 1.0 };
    // zoom on the runs: start the axes below the smallest value
    let lo = rows
        .iter()
        .flat_map(|r| [r.1, r.2])
        .fold(f64::INFINITY, f64::min)
        * 0.8;
    let lo = if lo.is_finite() && lo > 0.0 && lo < max {
        lo
    } else {
        0.0
    };
    let f = band_pct / 100.0;
    let svg = svg_of(760, 640, |root| {
        let mut chart = ChartBuilder::on(root)
            .caption(title, (FONT, 22))
            .margin(14)
            .x_label_area_size(50)
            .y_label_area_size(80)
            .build_cartesian_2d(lo..max, lo..max)
            .map_err(e)?;
        chart
            .configure_mesh()
            .label_style((FONT, 14))
            .axis_desc_style((FONT, 16))
            .x_desc(format!("measured ({unit})"))
            .y_desc(format!("predicted ({unit})"))
            .x_label_formatter(&|v| crate::fmt::num(*v))
            .y_label_formatter(&|v| crate::fmt::num(*v))
            .light_line_style(RGBColor(235, 235, 235))
            .draw()
            .map_err(e)?;
        let band = RGBColor(0, 114, 178);
        chart
            .draw_series(std::iter::once(Polygon::new(
                vec![
                    (lo, lo * (1.0 + f)),
                    (max / (1.0 + f), max),
                    (max, max),
                    (max, max * (1.0 - f)),
                    (lo, lo * (1.0 - f)),
                ],
                band.mix(0.15),
            )))
            .map_err(e)?
            .label(format!("±{band_pct:.0}% band"))
            .legend(move |(x, y)| {
                Rectangle::new([(x, y - 6), (x + 14, y + 6)], band.mix(0.3).filled())
            });
        chart
            .draw_series(LineSeries::new(
                vec![(0.0, 0.0), (max, max)],
                BLACK.stroke_width(1),
            ))
            .map_err(e)?
            .label("predicted = measured")
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], BLACK));
        let c = RGBColor(213, 94, 0);
        chart
            .draw_series(rows.iter().map(|r| Circle::new((r.1, r.2), 5, c.filled())))
            .map_err(e)?
            .label("runs")
            .legend(move |(x, y)| Circle::new((x + 7, y), 5, c.filled()));
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .position(SeriesLabelPosition::UpperLeft)
            .label_font((FONT, 14))
            .draw()
            .map_err(e)?;
        Ok(())
    })?;
    let table = Table {
        columns: vec![
            "run".into(),
            format!("measured ({unit})"),
            format!("predicted ({unit})"),
            "error".into(),
        ],
        rows: rows
            .iter()
            .map(|(l, m, p)| {
                vec![
                    l.clone(),
                    crate::fmt::num(*m),
                    crate::fmt::num(*p),
                    if *m != 0.0 {
                        crate::fmt::pct((p - m) / m * 100.0)
                    } else {
                        "-".into()
                    },
                ]
            })
            .collect(),
    };
    Ok(Figure {
        name: name.into(),
        title: title.into(),
        caption: caption.into(),
        svg,
        table,
        series: 3,
        cells: 0,
    })
}

/// Values over time, one step line per series (a value holds over its bin), x in ms or us by
/// the span, for link utilization and buffer occupancy. `bins` are (start_us, end_us); every
/// series has one value per bin.
#[allow(clippy::too_many_arguments)]
pub fn over_time(
    name: &str,
    title: &str,
    caption: &str,
    y_label: &str,
    bins: &[(f64, f64)],
    series: &[(String, Vec<f64>)],
    y_max: Option<f64>,
    y_fmt: &dyn Fn(f64) -> String,
) -> Res<Figure> {
    if bins.is_empty() || series.is_empty() {
        return Err(format!("{name}: no series to draw"));
    }
    let end_us = bins.iter().map(|b| b.1).fold(0.0, f64::max).max(1e-6);
    let (div, unit) = if end_us >= 1e3 {
        (1e3, "ms")
    } else {
        (1.0, "us")
    };
    let top = series
        .iter()
        .flat_map(|(_, v)| v.iter().copied())
        .fold(0.0, f64::max);
    let top = y_max.unwrap_or(if top > 0.0 { top * 1.1 } else { 1.0 });
    let svg = svg_of(1100, 560, |root| {
        let mut chart = ChartBuilder::on(root)
            .caption(title, (FONT, 22))
            .margin(14)
            // Room right of the plot for the legend (one line per link).
            .margin_right(260)
            .x_label_area_size(50)
            .y_label_area_size(90)
            .build_cartesian_2d(0f64..end_us / div, 0f64..top)
            .map_err(e)?;
        chart
            .configure_mesh()
            .x_desc(format!("time ({unit})"))
            .y_desc(y_label)
            .x_labels(10)
            .x_label_formatter(&|v| crate::fmt::num(*v))
            .y_label_formatter(&|v| y_fmt(*v))
            .label_style((FONT, 14))
            .axis_desc_style((FONT, 16))
            .light_line_style(WHITE)
            .bold_line_style(RGBColor(225, 225, 225))
            .draw()
            .map_err(e)?;
        // The legend sits right of the plotting area, in the margin kept for it, drawn on the
        // whole figure (a chart's own legend is clipped to the plotting area).
        let (x_px, y_px) = chart.plotting_area().get_pixel_range();
        let (lx, ly) = (x_px.end + 12, y_px.start);
        for (i, (label, v)) in series.iter().enumerate() {
            // Past the palette, the same colours again, lighter.
            let c = color(i).mix(if i < PALETTE.len() { 1.0 } else { 0.5 });
            let mut pts = Vec::with_capacity(2 * v.len());
            for (&(a, b), &y) in bins.iter().zip(v) {
                pts.push((a / div, y));
                pts.push((b / div, y));
            }
            chart
                .draw_series(LineSeries::new(pts, c.stroke_width(2)))
                .map_err(e)?;
            let y = ly + 8 + 16 * i as i32;
            root.draw(&PathElement::new(
                vec![(lx, y), (lx + 20, y)],
                c.stroke_width(3),
            ))
            .map_err(e)?;
            root.draw(&Text::new(label.clone(), (lx + 26, y - 6), (FONT, 12)))
                .map_err(e)?;
        }
        Ok(())
    })?;
    let table = Table {
        columns: ["bin start".to_string(), "bin end".to_string()]
            .into_iter()
            .chain(series.iter().map(|(l, _)| format!("{l}: {y_label}")))
            .collect(),
        rows: bins
            .iter()
            .enumerate()
            .map(|(k, &(a, b))| {
                [crate::fmt::time_us(a), crate::fmt::time_us(b)]
                    .into_iter()
                    .chain(
                        series
                            .iter()
                            .map(|(_, v)| y_fmt(v.get(k).copied().unwrap_or(0.0))),
                    )
                    .collect()
            })
            .collect(),
    };
    Ok(Figure {
        name: name.into(),
        title: title.into(),
        caption: caption.into(),
        svg,
        table,
        series: series.len(),
        cells: 0,
    })
}
