//! The nccl-tests result table (its rows, timings and the ranks it ran on) and its text layout
//! as nccl-tests' `src/util.cu` prints it: `dtsim nccl-tests --format nccl-tests` writes
//! predictions through it, and `calibrate` reads logs into it (`calibrate::import::nccl_tests`)
//! and writes them back, so a prediction and a measurement diff line by line.

/// One timing group (out-of-place or in-place) of a result row.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Timing {
    pub time_us: f64,
    pub algbw_gbps: f64,
    pub busbw_gbps: f64,
    /// Wrong elements; `None` when the log says `N/A` (validation off).
    pub wrong: Option<f64>,
}

/// One row of the table: one message size.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub size_bytes: u64,
    pub count: u64,
    pub dtype: String,
    pub redop: String,
    pub root: i64,
    pub out_of_place: Option<Timing>,
    pub in_place: Option<Timing>,
}

/// A rank as listed under `# Using devices`.
#[derive(Debug, Clone, PartialEq)]
pub struct RankDevice {
    pub rank: u32,
    pub host: String,
    pub device: u32,
    pub name: String,
}

/// One nccl-tests run.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct NcclTestsRun {
    /// `all_reduce`, `all_gather`, ... when the log says which program ran.
    pub collective: Option<String>,
    pub nccl_version: Option<String>,
    /// Threads × GPUs per process, from `# nThread T nGpus G`.
    pub gpus_per_process: Option<u32>,
    pub devices: Vec<RankDevice>,
    pub rows: Vec<Row>,
    pub avg_busbw_gbps: Option<f64>,
}

impl NcclTestsRun {
    /// Ranks in the run: the `Rank` lines when listed, else the GPUs of one process.
    pub fn ranks(&self) -> Option<u32> {
        if self.devices.is_empty() {
            self.gpus_per_process
        } else {
            Some(self.devices.len() as u32)
        }
    }
    /// Distinct hosts, in rank order.
    pub fn hosts(&self) -> Vec<String> {
        let mut hosts: Vec<String> = Vec::new();
        for d in &self.devices {
            if !hosts.contains(&d.host) {
                hosts.push(d.host.clone());
            }
        }
        hosts
    }
}

/// `printf("%g")`: six significant digits, trailing zeros dropped (as nccl-tests prints the
/// average bus bandwidth).
fn six_significant(v: f64) -> String {
    if v == 0.0 || !v.is_finite() {
        return format!("{v}");
    }
    let decimals = (5 - v.abs().log10().floor() as i32).max(0) as usize;
    let t = format!("{v:.decimals$}");
    if t.contains('.') {
        t.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        t
    }
}

/// nccl-tests' `getFloatStr`: a number right-aligned in `width` with as many decimals as fit.
pub fn float_str(value: f64, width: usize) -> String {
    let mut power = 0usize;
    let mut val = 1.0f64;
    while value >= val && power < 40 {
        power += 1;
        val *= 10.0;
    }
    if power + 2 < width {
        format!("{value:>width$.2}")
    } else if power + 1 < width {
        format!("{value:>width$.1}")
    } else if power < width + 1 {
        format!("{value:>width$.0}")
    } else {
        format!("{:>width$}", format!("{value:.1e}"))
    }
}

/// Prints a run in nccl-tests' current text layout (header, `Using devices`, table, footer), as
/// `src/util.cu` does.
pub fn to_text(run: &NcclTestsRun) -> String {
    let coll = run.collective.as_deref().unwrap_or("all_reduce");
    let mut s = String::new();
    if let Some(v) = &run.nccl_version {
        s += &format!("# nccl-tests layout (written by dtsim) NCCL version {v}\n");
    }
    s += &format!("# Collective test starting: {coll}_perf\n");
    let min = run.rows.first().map(|r| r.size_bytes).unwrap_or(0);
    let max = run.rows.last().map(|r| r.size_bytes).unwrap_or(0);
    let factor = match &run.rows[..] {
        [a, b, ..] if a.size_bytes > 0 && b.size_bytes % a.size_bytes == 0 => {
            (b.size_bytes / a.size_bytes).max(2)
        }
        _ => 2,
    };
    s += &format!(
        "# nThread 1 nGpus {} minBytes {min} maxBytes {max} step: {factor}(factor) warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0\n#\n# Using devices\n",
        run.gpus_per_process.or(run.ranks()).unwrap_or(1)
    );
    for d in &run.devices {
        s += &format!(
            "#  Rank {:>2} Group  0 Pid {:>6} on {:>10} device {:>2} [0000:00:00] {}\n",
            d.rank, 0, d.host, d.device, d.name
        );
    }
    s += "#\n";
    s += &format!("# {:>10}  {:>12}  {:>8}  {:>6}  {:>6}           out-of-place                       in-place          \n", "", "", "", "", "");
    s += &format!(
        "# {:>10}  {:>12}  {:>8}  {:>6}  {:>6}  {:>7}  {:>6}  {:>6}  {:>6}  {:>7}  {:>6}  {:>6}  {:>6} \n",
        "size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw", "#wrong"
    );
    s += &format!(
        "# {:>10}  {:>12}  {:>8}  {:>6}  {:>6}  {:>7}  {:>6}  {:>6}  {:>6}  {:>7}  {:>6}  {:>6}  {:>6} \n",
        "(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", ""
    );
    let group = |t: &Option<Timing>| match t {
        Some(t) => format!(
            "  {}  {}  {}  {:>6}",
            float_str(t.time_us, 7),
            float_str(t.algbw_gbps, 6),
            float_str(t.busbw_gbps, 6),
            t.wrong
                .map(|w| format!("{w}"))
                .unwrap_or_else(|| "N/A".into())
        ),
        None => " ".repeat(32),
    };
    for r in &run.rows {
        s += &format!(
            "{:>12}  {:>12}  {:>8}  {:>6}  {:>6}",
            r.size_bytes, r.count, r.dtype, r.redop, r.root
        );
        s += &group(&r.out_of_place);
        s += &group(&r.in_place);
        s += "\n";
    }
    s += "# Out of bounds values : 0 OK\n";
    if let Some(a) = run.avg_busbw_gbps {
        s += &format!("# Avg bus bandwidth    : {} \n", six_significant(a));
    }
    s += "#\n";
    s += &format!("# Collective test concluded: {coll}_perf\n");
    s
}
