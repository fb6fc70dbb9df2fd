//! A validation's outputs: `predictions.csv`, the per-group error table, and the report as
//! text.

use super::*;
use crate::metrics::output::CsvText;

impl Report {
    /// `predictions.csv`: one line per replayed row.
    pub fn predictions_csv(&self) -> String {
        let mut t = CsvText::new([
            "dataset",
            "group",
            "row",
            "label",
            "measured_secs",
            "simulated_secs",
            "predicted_secs",
            "error_pct",
            "calibration",
            "scored",
            "measured_min_secs",
            "measured_max_secs",
            "within_measured_range",
            "both_ways_secs",
            "one_way_first_secs",
            "launch_median_min_secs",
            "launch_median_max_secs",
            "plays_fastest_secs",
            "plays_slowest_secs",
            "sim_set",
            "op",
            "ranks",
            "bytes",
            "gpu",
            "batch",
            "launch_medians_secs",
        ]);
        for p in &self.predictions {
            let (lo, hi) = p
                .measured_range_secs
                .map(|(lo, hi)| (format!("{lo:.6e}"), format!("{hi:.6e}")))
                .unwrap_or_default();
            let modes = p
                .exchange_modes_secs
                .map(|(lo, hi)| (format!("{lo:.6e}"), format!("{hi:.6e}")))
                .unwrap_or_default();
            let launches = p
                .launch_range_secs
                .map(|(lo, hi)| (format!("{lo:.6e}"), format!("{hi:.6e}")))
                .unwrap_or_default();
            let call = p.call.as_ref();
            let plays = p
                .plays_secs
                .map(|(lo, hi)| (format!("{lo:.6e}"), format!("{hi:.6e}")))
                .unwrap_or_default();
            t.row([
                p.dataset.clone(),
                p.group.clone(),
                p.row.to_string(),
                p.label.clone(),
                format!("{:.6e}", p.measured_secs),
                format!("{:.6e}", p.simulated_secs),
                format!("{:.6e}", p.predicted_secs),
                format!("{:.3}", p.error_pct()),
                p.calibration.to_string(),
                p.scored.to_string(),
                lo,
                hi,
                p.within_measured_range()
                    .map(|w| w.to_string())
                    .unwrap_or_default(),
                modes.0,
                modes.1,
                launches.0,
                launches.1,
                plays.0,
                plays.1,
                call.map(|c| c.sim_set.clone()).unwrap_or_default(),
                call.map(|c| c.op.clone()).unwrap_or_default(),
                call.map(|c| c.ranks.to_string()).unwrap_or_default(),
                call.and_then(|c| c.bytes)
                    .map(|b| b.to_string())
                    .unwrap_or_default(),
                call.and_then(|c| c.gpu.clone()).unwrap_or_default(),
                call.and_then(|c| c.batch)
                    .map(|b| b.to_string())
                    .unwrap_or_default(),
                p.launch_medians_secs
                    .iter()
                    .map(|v| format!("{v:.6e}"))
                    .collect::<Vec<_>>()
                    .join(";"),
            ]);
        }
        t.finish()
    }

    /// `errors.csv`: one line per dataset × group.
    pub fn errors_csv(&self) -> String {
        let mut t = CsvText::new([
            "dataset",
            "group",
            "scored_rows",
            "calibration_rows",
            "median_abs_error_pct",
            "max_abs_error_pct",
            "fit_a_secs",
            "fit_b",
            "scored_rows_within_measured_range",
            "launch_noise_median_abs_pct",
            "launch_noise_max_abs_pct",
        ]);
        for g in &self.groups {
            let noise = &g.launch_noise;
            let (a, b) = g
                .fit
                .map(|(a, b)| (format!("{a:.6e}"), format!("{b:.6}")))
                .unwrap_or_default();
            t.row([
                g.dataset.clone(),
                g.group.clone(),
                g.rows.to_string(),
                g.calibration_rows.to_string(),
                format!("{:.3}", g.median_abs_pct),
                format!("{:.3}", g.max_abs_pct),
                a,
                b,
                g.within_range
                    .map(|(n, _)| n.to_string())
                    .unwrap_or_default(),
                noise
                    .as_ref()
                    .map(|n| format!("{:.3}", n.median_abs_pct))
                    .unwrap_or_default(),
                noise
                    .as_ref()
                    .map(|n| format!("{:.3}", n.max_abs_pct))
                    .unwrap_or_default(),
            ]);
        }
        t.finish()
    }

    /// Under `gates`, re-recorded from their launches ([`launch_noise`]): how many scored
    /// groups a model exact to every row's median would have within them on average (a group
    /// without launches counts whole), and those it would have within less than half the time
    /// (`dataset group`), when any scored group names its launches.
    pub fn exact_model_within(&self, gates: &Gates) -> Option<(f64, Vec<String>)> {
        let mut expected = 0.0;
        let mut rarely = Vec::new();
        let mut any = false;
        for g in &self.groups {
            if g.rows == 0 {
                continue;
            }
            let share = g.launch_noise.as_ref().map_or(1.0, |n| {
                any = true;
                n.within_share(gates)
            });
            expected += share;
            if share < 0.5 {
                rarely.push(format!("{} {}", g.dataset, g.group));
            }
        }
        any.then_some((expected, rarely))
    }

    /// The scored groups (label `dataset method`) whose median |error| exceeds
    /// `max_median_pct` or whose max |error| exceeds `max_pct` (either limit optional), and how
    /// many groups were scored.
    pub fn outside(
        &self,
        max_median_pct: Option<f64>,
        max_pct: Option<f64>,
    ) -> (Vec<String>, usize) {
        let gates = Gates {
            max_median_error_pct: max_median_pct,
            max_error_pct: max_pct,
        };
        let scored: Vec<&GroupError> = self.groups.iter().filter(|g| g.rows > 0).collect();
        let outside = scored
            .iter()
            .filter(|g| !gates.admits(g.median_abs_pct, g.max_abs_pct))
            .map(|g| format!("{} {}", g.dataset, g.group))
            .collect();
        (outside, scored.len())
    }

    /// Of the groups labelled in `outside` (`dataset group`, as [`Self::outside`] gives them),
    /// those that miss only where the recorded launches disagree as much: every scored row off
    /// by more than `row_limit_pct` predicts within its row's launch medians (the fastest and
    /// the slowest launch's), and such a row exists. A better model of the mean call cannot
    /// bring these within the bar; more launches might.
    pub fn within_launch_spread(&self, outside: &[String], row_limit_pct: f64) -> Vec<String> {
        outside
            .iter()
            .filter(|label| {
                let mut off = self
                    .predictions
                    .iter()
                    .filter(|p| p.scored && !p.calibration)
                    .filter(|p| format!("{} {}", p.dataset, p.group) == **label)
                    .filter(|p| p.error_pct().abs() > row_limit_pct)
                    .peekable();
                off.peek().is_some()
                    && off.all(|p| {
                        p.launch_range_secs
                            .is_some_and(|(lo, hi)| (lo..=hi).contains(&p.predicted_secs))
                    })
            })
            .cloned()
            .collect()
    }

    /// Writes `predictions.csv` and `errors.csv` into `dir`, each atomically.
    pub fn write_dir(&self, dir: &Path) -> std::io::Result<()> {
        use crate::metrics::output::write_atomic;
        write_atomic(
            &dir.join("predictions.csv"),
            self.predictions_csv().as_bytes(),
        )?;
        write_atomic(&dir.join("errors.csv"), self.errors_csv().as_bytes())
    }
}

impl std::fmt::Display for Report {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Columns as wide as their longest entry (group names run long: "<system> · <op>").
        fn width<'s>(items: impl Iterator<Item = &'s str>, min: usize) -> usize {
            items.map(|s| s.chars().count()).max().unwrap_or(0).max(min)
        }
        let rows: Vec<String> = self
            .predictions
            .iter()
            .map(|p| format!("{}: {}", p.group, p.label))
            .collect();
        let datasets = self.predictions.iter().map(|p| p.dataset.as_str());
        let wd = width(
            datasets.chain(self.groups.iter().map(|g| g.dataset.as_str())),
            34,
        );
        let wr = width(rows.iter().map(String::as_str), 40);
        let wg = width(self.groups.iter().map(|g| g.group.as_str()), 34);
        writeln!(
            f,
            "{:<wd$} {:<wr$} {:>12} {:>12} {:>8}",
            "dataset", "row", "measured", "predicted", "error"
        )?;
        for (p, row) in self.predictions.iter().zip(&rows) {
            let mut tag = if p.calibration {
                "(calibration)".to_string()
            } else if !p.scored {
                "(not scored)".to_string()
            } else {
                p.measured_range_secs
                    .map(|r| {
                        span(
                            "runs",
                            r,
                            p.within_measured_range() == Some(true),
                            ": within",
                        )
                    })
                    .unwrap_or_default()
            };
            if let Some(r @ (lo, hi)) = p.exchange_modes_secs {
                let within = (lo..=hi).contains(&p.measured_secs);
                tag = format!(
                    "{tag} {}",
                    span("exchange modes", r, within, ": measured within")
                );
            }
            if let Some(r @ (lo, hi)) = p.launch_range_secs {
                let within = (lo..=hi).contains(&p.predicted_secs);
                tag = format!("{tag} {}", span("launch medians", r, within, ": within"));
            }
            if let Some(r @ (lo, hi)) = p.plays_secs {
                let within = (lo..=hi).contains(&p.measured_secs);
                tag = format!("{tag} {}", span("plays", r, within, ": measured within"));
            }
            writeln!(
                f,
                "{:<wd$} {:<wr$} {:>10.3}ms {:>10.3}ms {:>+7.1}%  {tag}",
                p.dataset,
                row,
                p.measured_secs * 1e3,
                p.predicted_secs * 1e3,
                p.error_pct()
            )?;
        }
        // "in runs": scored rows predicted within the range of their measured repetitions;
        // "launch noise": the median and max |error| of a model exact to every row's median,
        // re-recorded from the launches (`launch_noise`).
        let any_range = self.groups.iter().any(|g| g.within_range.is_some());
        let any_noise = self.groups.iter().any(|g| g.launch_noise.is_some());
        writeln!(
            f,
            "\n{:<wd$} {:<wg$} {:>5} {:>5} {:>9} {:>9}{}{}",
            "dataset",
            "method",
            "rows",
            "calib",
            "median|e|",
            "max|e|",
            if any_range { "   in runs" } else { "" },
            if any_noise { "   launch noise" } else { "" }
        )?;
        for g in &self.groups {
            let in_runs = match (any_range, g.within_range) {
                (false, _) => String::new(),
                (true, Some((n, of))) => format!(" {:>9}", format!("{n}/{of}")),
                (true, None) => format!(" {:>9}", "-"),
            };
            let noise = match (any_noise, &g.launch_noise) {
                (false, _) => String::new(),
                (true, Some(n)) => format!(
                    " {:>14}",
                    format!("{:.2}% {:.2}%", n.median_abs_pct, n.max_abs_pct)
                ),
                (true, None) => format!(" {:>14}", "-"),
            };
            writeln!(
                f,
                "{:<wd$} {:<wg$} {:>5} {:>5} {:>8.2}% {:>8.2}%{in_runs}{noise}",
                g.dataset, g.group, g.rows, g.calibration_rows, g.median_abs_pct, g.max_abs_pct
            )?;
        }
        if !self.replayed_on.is_empty() {
            writeln!(f, "\nreplayed on (from each row's GPU, GPU and node counts and interconnect columns):")?;
            for (d, g, how) in &self.replayed_on {
                writeln!(f, "  {d} · {g}: {how}")?;
            }
        }
        if !self.skipped.is_empty() {
            let mut by: BTreeMap<(String, String), usize> = BTreeMap::new();
            for (d, why) in &self.skipped {
                let why = why.split_once(": ").map(|(_, w)| w).unwrap_or(why);
                *by.entry((d.clone(), why.to_string())).or_default() += 1;
            }
            writeln!(f, "\nskipped:")?;
            for ((d, why), n) in by {
                writeln!(f, "  {d}: {n} rows: {why}")?;
            }
        }
        Ok(())
    }
}

/// A row's range tag, `(label A-B ms: said)`, the last part only where `within`.
fn span(label: &str, (lo_secs, hi_secs): (f64, f64), within: bool, said: &str) -> String {
    format!(
        "({label} {:.3}-{:.3}ms{})",
        lo_secs * 1e3,
        hi_secs * 1e3,
        if within { said } else { "" }
    )
}
