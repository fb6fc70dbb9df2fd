//! One collective scenario over a range of sizes, as nccl-tests sweeps them (`-b MIN -e MAX -f
//! FACTOR`), with the library's choice per size and, when given, the measured table beside it.
//!
//! Every size is a full simulation of the scenario with `collective.bytes` set: the tuner
//! chooses again per size, exactly as one `dtsim run` would.

use crate::collective::play::Watch;
use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::run::{prepare, run_prepared, Prepared};
use super::Scenario;
use crate::units::Bytes;

/// nccl-tests' size range: `min`, `min × factor`, ... up to `max`.
#[derive(Debug, Clone, Copy)]
pub struct Range {
    pub min_bytes: u64,
    pub max_bytes: u64,
    pub factor: u64,
}

impl Range {
    pub fn sizes(&self) -> Result<Vec<u64>, String> {
        if self.min_bytes == 0 || self.max_bytes < self.min_bytes {
            return Err(format!(
                "-b/-e: 0 < min <= max, got {} and {}",
                self.min_bytes, self.max_bytes
            ));
        }
        if self.factor < 2 {
            return Err(format!("-f: a factor of 2 or more, got {}", self.factor));
        }
        let mut v = vec![self.min_bytes];
        let mut last = self.min_bytes;
        while let Some(next) = last.checked_mul(self.factor) {
            if next > self.max_bytes {
                break;
            }
            v.push(next);
            last = next;
        }
        Ok(v)
    }
}

/// One simulated size.
#[derive(Debug, Clone)]
pub struct Point {
    pub bytes: u64,
    pub time_us: f64,
    pub algbw_gbytes_per_s: f64,
    pub busbw_gbytes_per_s: f64,
    /// The library's decision line (`ideal ...` for the templates).
    pub library: String,
}

/// Simulates `s` at every size of `range`.
pub fn run(s: &Scenario, range: &Range) -> Result<Vec<Point>, String> {
    run_on(s, &prepare(s).map_err(|e| e.to_string())?, range)
}

/// [`run`] on a topology and profile already prepared for `s` (also what
/// [`nccl_tests_run`] lists the ranks of).
pub fn run_on(s: &Scenario, prep: &Prepared, range: &Range) -> Result<Vec<Point>, String> {
    if s.file.collective.is_none() {
        return Err(format!(
            "{}: a [collective] scenario (a size sweep runs one collective at many sizes)",
            s.path.display()
        ));
    }
    range
        .sizes()?
        .into_iter()
        .map(|bytes| {
            let mut one = s.clone();
            if let Some(c) = one.file.collective.as_mut() {
                c.bytes = Some(Bytes(bytes));
            }
            let r = run_prepared(&one, prep.clone(), Watch::default())
                .map_err(|e| format!("{bytes} B: {e}"))?;
            Ok(Point {
                bytes,
                time_us: r.summary.time_ps as f64 * 1e-6,
                algbw_gbytes_per_s: r.summary.algbw_gbytes_per_s,
                busbw_gbytes_per_s: r.summary.busbw_gbytes_per_s,
                library: r.summary.library,
            })
        })
        .collect()
}

/// The sweep as nccl-tests would have printed it (`dtsim nccl-tests --format nccl-tests`): one
/// row per size in float elements and sum (none where nothing is reduced; root -1, or 0 for
/// rooted collectives), the same
/// simulated time in the out-of-place and in-place groups (dtsim does not tell them apart),
/// `#wrong` N/A (nothing was checked), the ranks as `Using devices` lines.
pub fn nccl_tests_run(
    s: &Scenario,
    prep: &Prepared,
    points: &[Point],
) -> Result<crate::metrics::nccl_tests::NcclTestsRun, String> {
    use crate::metrics::nccl_tests::{NcclTestsRun, RankDevice, Row, Timing};
    let c = s
        .file
        .collective
        .as_ref()
        .ok_or("a [collective] scenario")?;
    let topo = &prep.topology;
    let mut per_node: BTreeMap<Option<u32>, u32> = BTreeMap::new();
    let devices: Vec<RankDevice> = prep
        .ranks
        .iter()
        .enumerate()
        .map(|(rank, &d)| {
            let dev = topo.device(d);
            let k = per_node.entry(dev.node).or_insert(0);
            *k += 1;
            RankDevice {
                rank: rank as u32,
                host: dev
                    .node
                    .map_or_else(|| dev.name.clone(), |n| format!("node{n}")),
                device: *k - 1,
                name: topo.gpu.clone().unwrap_or_else(|| dev.name.clone()),
            }
        })
        .collect();
    use crate::collective::Collective;
    let rooted = matches!(c.op, Collective::Broadcast | Collective::Reduce);
    let reduces = matches!(
        c.op,
        Collective::AllReduce | Collective::Reduce | Collective::ReduceScatter
    );
    let rows: Vec<Row> = points
        .iter()
        .map(|p| {
            let t = Timing {
                time_us: p.time_us,
                algbw_gbps: p.algbw_gbytes_per_s,
                busbw_gbps: p.busbw_gbytes_per_s,
                wrong: None,
            };
            Row {
                size_bytes: p.bytes,
                count: p.bytes / 4,
                dtype: "float".into(),
                // nccl-tests prints "none" where nothing is reduced.
                redop: if reduces { "sum" } else { "none" }.into(),
                root: if rooted { 0 } else { -1 },
                out_of_place: Some(t),
                in_place: Some(t),
            }
        })
        .collect();
    let version = points.iter().find_map(|p| {
        let v = p.library.split("NCCL ").nth(1)?.split_whitespace().next()?;
        v.starts_with(|ch: char| ch.is_ascii_digit())
            .then(|| v.to_string())
    });
    let avg = (!points.is_empty())
        .then(|| points.iter().map(|p| p.busbw_gbytes_per_s).sum::<f64>() / points.len() as f64);
    Ok(NcclTestsRun {
        // The program nccl-tests runs it with (`alltoall_perf`, `sendrecv_perf`).
        collective: Some(
            match c.op {
                Collective::AllToAll => "alltoall",
                Collective::SendRecv => "sendrecv",
                other => other.as_str(),
            }
            .to_string(),
        ),
        nccl_version: version,
        gpus_per_process: Some(devices.len() as u32),
        devices,
        rows,
        avg_busbw_gbps: avg,
    })
}

/// The table: size, choice, simulated time and bandwidths; with `measured` (µs by size) the
/// measured time, busbw and error beside them, and the median |error| at the foot.
pub fn table(points: &[Point], measured: Option<&BTreeMap<u64, f64>>) -> String {
    let mut s = String::new();
    let _ = write!(
        s,
        "{:>12}  {:<34} {:>11} {:>9} {:>9}",
        "size (B)", "choice", "time (us)", "algbw", "busbw"
    );
    if measured.is_some() {
        let _ = write!(s, "  {:>11} {:>9} {:>8}", "measured", "busbw", "error");
    }
    s.push('\n');
    let mut errors = Vec::new();
    for p in points {
        let _ = write!(
            s,
            "{:>12}  {:<34} {:>11.2} {:>9.2} {:>9.2}",
            p.bytes,
            short_choice(&p.library),
            p.time_us,
            p.algbw_gbytes_per_s,
            p.busbw_gbytes_per_s
        );
        if let Some(m) = measured {
            match m.get(&p.bytes) {
                Some(&us) => {
                    let busbw = p.busbw_gbytes_per_s * p.time_us / us;
                    let e = p.time_us / us - 1.0;
                    errors.push(e.abs());
                    let _ = write!(s, "  {us:>11.2} {busbw:>9.2} {:>+7.1}%", e * 100.0);
                }
                None => {
                    let _ = write!(s, "  {:>11} {:>9} {:>8}", "-", "-", "-");
                }
            }
        }
        s.push('\n');
    }
    if !errors.is_empty() {
        let max = errors.iter().copied().fold(0.0, f64::max);
        let _ = writeln!(
            s,
            "{} sizes measured: median |error| {:.1}%, max {:.1}%",
            errors.len(),
            crate::stats::median(&errors) * 100.0,
            max * 100.0
        );
    }
    s
}

/// `"NCCL 2.27 ring/ll, 24 channels, 1 slice(s); ..."` → `"ring/ll, 24 channels"`.
fn short_choice(library: &str) -> String {
    match crate::library::choice(library).strip_prefix("NCCL ") {
        Some(rest) => rest
            .split_once(' ')
            .map_or(rest, |(_, r)| r)
            .trim()
            .to_string(),
        None => library.split(' ').next().unwrap_or("").to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_follow_nccl_tests_b_e_f() {
        let r = Range {
            min_bytes: 8,
            max_bytes: 8 << 30,
            factor: 2,
        };
        let v = r.sizes().unwrap();
        assert_eq!(v.len(), 31);
        assert_eq!((v[0], v[30]), (8, 8 << 30));
        let bad = Range {
            min_bytes: 8,
            max_bytes: 64,
            factor: 1,
        };
        assert!(bad.sizes().unwrap_err().starts_with("-f"));
    }

    #[test]
    fn choice_is_shortened_to_algorithm_protocol_and_channels() {
        assert_eq!(
            short_choice("NCCL 2.27 ring/ll, 24 channels, 1 slice(s); steps over nvlink"),
            "ring/ll, 24 channels"
        );
        assert_eq!(short_choice("ideal (dtsim's templates)"), "ideal");
    }
}
