//! Figures on x-y axes: lines, stacked bars, predicted against measured, values over time.

use plotters::prelude::*;

use super::*;

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

/// Predicted against measured values: points, the y = x line and a ±`band_pct` band. Where
/// `spans` gives a row its measured runs' range or the model's plays' range, a bar shows it
/// (horizontal: measured, vertical: predicted). Values that span more than 30× are drawn on
/// log axes (log10 on linear axes, labelled in the values).
#[allow(clippy::too_many_arguments)]
pub fn predicted_vs_measured(
    name: &str,
    title: &str,
    caption: &str,
    unit: &str,
    rows: &[(String, f64, f64)],
    spans: &[PointSpans],
    band_pct: f64,
) -> Res<Figure> {
    let positive = |v: &f64| *v > 0.0 && v.is_finite();
    let values = || rows.iter().flat_map(|r| [r.1, r.2]).filter(positive);
    let (vmin, vmax) = values().fold((f64::INFINITY, 0.0f64), |(a, b), v| (a.min(v), b.max(v)));
    let log = vmin.is_finite() && vmax / vmin > 30.0;
    let t = |v: f64| if log { v.max(vmin * 1e-3).log10() } else { v };
    let (lo, max) = if log {
        (t(vmin) - 0.1, t(vmax) + 0.1)
    } else {
        let max = if vmax > 0.0 { vmax * 1.1 } else { 1.0 };
        // zoom on the runs: start the axes below the smallest value
        let lo = vmin * 0.8;
        (
            if lo.is_finite() && lo > 0.0 && lo < max {
                lo
            } else {
                0.0
            },
            max,
        )
    };
    let label = |v: f64| crate::fmt::num(if log { 10f64.powf(v) } else { v });
    let f = band_pct / 100.0;
    // The band's edges, y = x (1 ± f), through the plot's corners.
    let edge = |x: f64, k: f64| if log { x + k.log10() } else { x * k };
    let svg = svg_of(760, 640, |root| {
        let mut chart = ChartBuilder::on(root)
            .caption(title, (FONT, 22))
            .margin(14)
            .x_label_area_size(50)
            .y_label_area_size(80)
            .build_cartesian_2d(lo..max, lo..max)
            .map_err(e)?;
        let axis = |what: &str| {
            if log {
                format!("{what} ({unit}, log scale)")
            } else {
                format!("{what} ({unit})")
            }
        };
        chart
            .configure_mesh()
            .label_style((FONT, 14))
            .axis_desc_style((FONT, 16))
            .x_desc(axis("measured"))
            .y_desc(axis("predicted"))
            .x_label_formatter(&|v| label(*v))
            .y_label_formatter(&|v| label(*v))
            .light_line_style(RGBColor(235, 235, 235))
            .draw()
            .map_err(e)?;
        let band = RGBColor(0, 114, 178);
        chart
            .draw_series(std::iter::once(Polygon::new(
                vec![
                    (lo, edge(lo, 1.0 + f)),
                    (max, edge(max, 1.0 + f)),
                    (max, edge(max, 1.0 - f)),
                    (lo, edge(lo, 1.0 - f)),
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
                vec![(lo, lo), (max, max)],
                BLACK.stroke_width(1),
            ))
            .map_err(e)?
            .label("predicted = measured")
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], BLACK));
        let c = RGBColor(213, 94, 0);
        let grey = RGBColor(110, 110, 110);
        let bars = rows.iter().zip(spans).flat_map(|(r, s)| {
            let (m, p) = (t(r.1), t(r.2));
            let runs = s.measured.map(|(a, b)| vec![(t(a), p), (t(b), p)]);
            let plays = s.predicted.map(|(a, b)| vec![(m, t(a)), (m, t(b))]);
            runs.into_iter()
                .chain(plays)
                .map(move |path| PathElement::new(path, grey.stroke_width(1)))
        });
        chart.draw_series(bars).map_err(e)?;
        chart
            .draw_series(
                rows.iter()
                    .map(|r| Circle::new((t(r.1), t(r.2)), 5, c.filled())),
            )
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
