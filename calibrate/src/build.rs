//! Turning imported logs and GPU measurements into profile tables with provenance.

use sim::net::factors::FactorRow;
use sim::profile::{
    CollectiveFit, FactorTable, HoldoutError, LinkEfficiency, PathMeasurement, Profile, Provenance,
    SCHEMA_VERSION,
};
use sim::topology::LinkClass;
use sim::units::Bandwidth;

use crate::fit::{self, AlphaBeta, Holdout, HoldoutReport, Point, Weighting};
use crate::import::iperf3::Iperf3Run;
use crate::import::nccl_tests::{busbw_factor, NcclTestsRun};
use crate::import::p2p::Matrix;

/// How nccl-tests runs are fitted.
#[derive(Debug, Clone, Default)]
pub struct FitOptions {
    /// The links that bound the collective; required for multi-node logs.
    pub link_class: Option<LinkClass>,
    /// Nominal per-link rate (bytes/s) the factors are relative to; no factor table without it.
    pub nominal_bytes_per_s: Option<f64>,
    pub nominal_latency_secs: Option<f64>,
    pub holdout: Option<(Holdout, String)>,
    /// Fit out-of-place times instead of in-place ones.
    pub out_of_place: bool,
    /// Ignore sizes below this.
    pub min_bytes: u64,
    pub collective: Option<String>,
}

/// One fitted run.
#[derive(Debug, Clone)]
pub struct FittedRun {
    pub fit: CollectiveFit,
    pub line: AlphaBeta,
    pub holdout: Option<HoldoutReport>,
    pub factors: Option<(LinkClass, FactorTable)>,
}

pub fn provenance(source: &str, detail: impl Into<String>) -> Provenance {
    Provenance {
        source: source.into(),
        detail: detail.into(),
        date: Some(today()),
    }
}

/// Today's date (UTC) as YYYY-MM-DD.
pub fn today() -> String {
    let days = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() / 86400)
        .unwrap_or(0) as i64;
    // Howard Hinnant's civil-from-days.
    let z = days + 719468;
    let era = z.div_euclid(146097);
    let doe = z - era * 146097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}")
}

/// (bytes, seconds) points of a run: in-place times unless asked otherwise, falling back to the
/// other placement where a row lacks one.
pub fn points(run: &NcclTestsRun, o: &FitOptions) -> Vec<Point> {
    run.rows
        .iter()
        .filter(|r| r.size_bytes >= o.min_bytes.max(1))
        .filter_map(|r| {
            let t = if o.out_of_place {
                r.out_of_place.or(r.in_place)
            } else {
                r.in_place.or(r.out_of_place)
            }?;
            (t.time_us > 0.0).then_some(Point {
                bytes: r.size_bytes as f64,
                secs: t.time_us * 1e-6,
            })
        })
        .collect()
}

pub fn empty_profile(name: &str, description: &str, prov: Provenance) -> Profile {
    Profile {
        schema_version: SCHEMA_VERSION,
        name: name.into(),
        description: description.into(),
        provenance: prov,
        network: Default::default(),
        compute: None,
    }
}

/// Fits one run; `origin` names the log (and rows) in the provenance.
pub fn fit_run(run: &NcclTestsRun, origin: &str, o: &FitOptions) -> Result<FittedRun, String> {
    let collective = run.collective.clone().or(o.collective.clone()).ok_or_else(|| format!("{origin}: the log does not say which collective ran; pass --collective all_reduce (or all_gather, ...)"))?;
    let ranks = run.ranks().ok_or_else(|| {
        format!("{origin}: no rank count in the log (no `# nThread` or `Rank` lines)")
    })?;
    let nodes = run.hosts().len().max(1) as u32;
    let link_class = match o.link_class {
        Some(c) => c,
        None if nodes > 1 => return Err(format!("{origin}: {nodes} hosts; pass --link-class (ib, ethernet, ...) for the network between them")),
        None => LinkClass::Nvlink,
    };
    let pts = points(run, o);
    let line =
        fit::fit(&pts, Weighting::Relative).map_err(|e| format!("{origin}: {collective}: {e}"))?;
    let holdout = match &o.holdout {
        Some((h, _)) => Some(
            fit::fit_with_holdout(&pts, *h, Weighting::Relative)
                .map_err(|e| format!("{origin}: hold-out fit: {e}"))?,
        ),
        None => None,
    };
    let placement = if o.out_of_place {
        "out-of-place"
    } else {
        "in-place"
    };
    let prov = provenance(
        "imported",
        format!("weighted least-squares fit (1/time^2) of {placement} times, {} sizes {}..{} B, of {origin}; {ranks} ranks on {nodes} node(s), link class {link_class}{}", pts.len(), pts.first().map(|p| p.bytes).unwrap_or(0.0), pts.last().map(|p| p.bytes).unwrap_or(0.0), run.nccl_version.as_ref().map(|v| format!(", NCCL {v}")).unwrap_or_default()),
    );
    let bf = busbw_factor(&collective, ranks);
    let cf = CollectiveFit {
        collective: collective.clone(),
        link_class,
        ranks,
        nodes,
        alpha_secs: line.alpha_secs,
        alpha_ci95_secs: line.alpha_ci95_secs,
        algbw_bytes_per_s: line.beta_bytes_per_s,
        algbw_ci95_low_bytes_per_s: line.beta_ci95_bytes_per_s[0],
        algbw_ci95_high_bytes_per_s: line.beta_ci95_bytes_per_s[1]
            .is_finite()
            .then_some(line.beta_ci95_bytes_per_s[1]),
        busbw_bytes_per_s: line.beta_bytes_per_s * bf,
        r_squared: line.r_squared,
        max_rel_residual: line.max_abs_rel_residual(),
        min_bytes: pts.first().map(|p| p.bytes as u64).unwrap_or(0),
        max_bytes: pts.last().map(|p| p.bytes as u64).unwrap_or(0),
        points: pts.len() as u32,
        holdout: holdout
            .as_ref()
            .zip(o.holdout.as_ref())
            .map(|(h, (_, rule))| HoldoutError {
                rule: rule.clone(),
                points: h.held_back.len() as u32,
                mean_abs_rel_error: h.mean_abs_rel_error,
                max_abs_rel_error: h.max_abs_rel_error,
            }),
        provenance: prov,
    };
    // Factors compare the per-link rate (busbw) with the nominal link rate.
    let factors = o.nominal_bytes_per_s.map(|nominal| -> Result<_, String> {
        let rows = fit::efficiency_factors(&pts, &line, nominal / bf, o.nominal_latency_secs, 0.05)
            .map_err(|e| format!("{origin}: {e} (--nominal-bw)"))?;
        let fits = if line.max_abs_rel_residual() > 0.10 { "a straight line misses some sizes by more than 10%, so the factors vary with size" } else { "the line fits within 10%" };
        Ok((link_class, FactorTable {
            rows,
            provenance: provenance("imported", format!("busbw of {collective} in {origin} over nominal {} per link{}; {fits}", sim::units::fmt_gbytes_per_s(nominal), o.nominal_latency_secs.map(|l| format!("; latency factor = fitted alpha / nominal {:.2} us, bandwidth from time - alpha", l * 1e6)).unwrap_or_else(|| "; no nominal latency given: latency factor 1 and the bandwidth factor carries the whole measured time".into()))),
        }))
    }).transpose()?;
    Ok(FittedRun {
        fit: cf,
        line,
        holdout,
        factors,
    })
}

/// Adds fits to a profile, replacing earlier fits of the same collective, ranks and link class.
/// The first all-reduce factor table of a class wins over other collectives.
pub fn merge_fits(p: &mut Profile, fits: &[FittedRun]) {
    for f in fits {
        p.network.collective_fits.retain(|g| {
            !(g.collective == f.fit.collective
                && g.ranks == f.fit.ranks
                && g.link_class == f.fit.link_class
                && g.nodes == f.fit.nodes)
        });
        p.network.collective_fits.push(f.fit.clone());
    }
    for f in fits
        .iter()
        .filter(|f| f.fit.collective == "all_reduce")
        .chain(fits.iter().filter(|f| f.fit.collective != "all_reduce"))
    {
        if let Some((class, table)) = &f.factors {
            if !table.rows.is_empty() {
                p.network
                    .factors
                    .entry(*class)
                    .or_insert_with(|| table.clone());
            }
        }
    }
}

/// Path measurements from P2P matrices: the mean off-diagonal value of each matrix plus every
/// pair.
pub fn p2p_paths(
    matrices: &[Matrix],
    origin: &str,
    link_class: Option<LinkClass>,
) -> Vec<PathMeasurement> {
    let mut out = Vec::new();
    for m in matrices {
        let kind = if m.is_latency() {
            "p2p latency"
        } else if m.is_bidirectional() {
            "p2p bidirectional"
        } else {
            "p2p unidirectional"
        };
        for (i, row) in m.values.iter().enumerate() {
            for (j, v) in row.iter().enumerate() {
                let Some(v) = *v else { continue };
                if i == j || v <= 0.0 {
                    continue;
                }
                let (bandwidth, latency_secs) = if m.is_latency() {
                    (None, Some(v * 1e-6))
                } else {
                    (Some(Bandwidth(v * 8e9)), None)
                };
                out.push(PathMeasurement {
                    kind: kind.into(),
                    link_class,
                    src: Some(format!("gpu{i}")),
                    dst: Some(format!("gpu{j}")),
                    bandwidth,
                    latency_secs,
                    provenance: provenance(
                        "imported",
                        format!("{origin}, matrix \"{}\" (line {})", m.title, m.line),
                    ),
                });
            }
        }
    }
    out
}

pub fn iperf3_path(
    run: &Iperf3Run,
    origin: &str,
    link_class: Option<LinkClass>,
) -> PathMeasurement {
    PathMeasurement {
        kind: run.protocol.to_ascii_lowercase(),
        link_class,
        src: None,
        dst: run.remote_host.clone(),
        bandwidth: Some(Bandwidth(run.received_bits_per_s)),
        latency_secs: None,
        provenance: provenance(
            "imported",
            format!(
                "iperf3 {} with {} stream(s) over {:.1} s, received rate, from {origin}{}",
                run.protocol,
                run.streams,
                run.seconds,
                run.retransmits
                    .map(|r| format!("; {r} retransmits"))
                    .unwrap_or_default()
            ),
        ),
    }
}

/// Most spread (max − min over the median) of the total rates of iperf3 runs with different
/// stream counts through one link for the link to count as shared: the total then does not
/// depend on how many flows share it, so its efficiency is the link's, not each flow's.
pub const SHARED_SPREAD: f64 = 0.03;

/// The link efficiency of a class from iperf3 runs with different numbers of parallel streams
/// through the same bottleneck link of `nominal_bits_per_s`: the median total received rate
/// over nominal, when the totals agree within [`SHARED_SPREAD`]; `Err` says why not.
pub fn iperf3_link_efficiency(
    runs: &[(String, Iperf3Run)],
    nominal_bits_per_s: f64,
    measured: &Provenance,
) -> Result<LinkEfficiency, String> {
    let mut streams: Vec<u32> = runs.iter().map(|(_, r)| r.streams).collect();
    streams.sort_unstable();
    streams.dedup();
    if streams.len() < 2 {
        return Err(format!(
            "runs with at least two different stream counts (iperf3 -P), got {streams:?}"
        ));
    }
    let rates: Vec<f64> = runs.iter().map(|(_, r)| r.received_bits_per_s).collect();
    let median = sim::stats::median(&rates);
    let lo = rates.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = rates.iter().copied().fold(0.0, f64::max);
    let spread = (hi - lo) / median;
    if spread > SHARED_SPREAD {
        return Err(format!(
            "the total rate depends on the stream count ({:.2}-{:.2} Mbit/s, spread {:.1}% > \
             {:.0}%): each flow is limited, not the link",
            lo / 1e6,
            hi / 1e6,
            spread * 100.0,
            SHARED_SPREAD * 100.0
        ));
    }
    let value = sim::limits::factor(median / nominal_bits_per_s).map_err(|e| {
        format!(
            "the received rate {:.2} Mbit/s over nominal {:.2} Mbit/s: {e}; --nominal-bw is \
             the bottleneck link's rate",
            median / 1e6,
            nominal_bits_per_s / 1e6
        )
    })?;
    let each: Vec<String> = runs
        .iter()
        .map(|(origin, r)| {
            format!(
                "{} stream(s) {:.2} Mbit/s ({origin})",
                r.streams,
                r.received_bits_per_s / 1e6
            )
        })
        .collect();
    Ok(LinkEfficiency {
        value: (value * 1e4).round() / 1e4,
        provenance: Provenance {
            source: measured.source.clone(),
            detail: format!(
                "link efficiency {value:.4} = median total {:.2} of {:.2} Mbit/s nominal over \
                 iperf3 runs through one link, totals within {:.1}% whatever the streams: {}; {}",
                median / 1e6,
                nominal_bits_per_s / 1e6,
                spread * 100.0,
                each.join(", "),
                measured.detail
            ),
            date: measured.date.clone(),
        },
    })
}

/// One factor row for `link_class` from an iperf3 run over a path whose bottleneck link is
/// nominally `nominal_bits_per_s`: bandwidth factor = received rate / nominal, and, given
/// `(measured, nominal)` one-way path latencies, latency factor = measured / nominal (else 1).
pub fn iperf3_factors(
    run: &Iperf3Run,
    nominal_bits_per_s: f64,
    latency_secs: Option<(f64, f64)>,
    measured: &Provenance,
) -> Result<FactorTable, String> {
    sim::limits::bandwidth_bps(nominal_bits_per_s).map_err(|e| format!("--nominal-bw: {e}"))?;
    let bandwidth_factor = sim::limits::factor(run.received_bits_per_s / nominal_bits_per_s)
        .map_err(|e| {
            format!(
                "the received rate {:.2} Mbit/s over nominal {:.2} Mbit/s: {e}; \
                 --nominal-bw is the bottleneck link's rate",
                run.received_bits_per_s / 1e6,
                nominal_bits_per_s / 1e6
            )
        })?;
    let (latency_factor, lat_detail) = match latency_secs {
        Some((m, n)) if n > 0.0 && m > 0.0 => (
            m / n,
            format!(
                ", latency factor {:.4} = measured one-way {:.2} us / nominal {:.2} us",
                m / n,
                m * 1e6,
                n * 1e6
            ),
        ),
        Some((m, n)) => {
            return Err(format!(
                "--latency/--nominal-latency: positive durations, got {m} s and {n} s"
            ))
        }
        None => (1.0, ", latency factor 1 (no latency given)".to_string()),
    };
    Ok(FactorTable {
        rows: vec![FactorRow {
            min_bytes: 0,
            bandwidth_factor: (bandwidth_factor * 1e4).round() / 1e4,
            latency_factor: (latency_factor * 1e4).round() / 1e4,
        }],
        provenance: Provenance {
            source: measured.source.clone(),
            detail: format!(
                "bandwidth factor {bandwidth_factor:.4} = {:.2} of {:.2} Mbit/s nominal{lat_detail}; {}",
                run.received_bits_per_s / 1e6,
                nominal_bits_per_s / 1e6,
                measured.detail
            ),
            date: measured.date.clone(),
        },
    })
}
