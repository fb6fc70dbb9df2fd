//! `suite.py cpu_costs` logs (testbed/workloads/cpu_costs.py): the machine's CPU that one gloo
//! message takes, by size, where every host runs on one machine's cores.
//!
//! The log: `{"cpus", "idle_busy_cores", "results": [{"bytes", "messages", "in_flight",
//! "secs", "busy_core_secs", "core_secs_per_message"}, ...], ...}`: rank 0 streamed
//! `messages` of `bytes` to rank 1, `in_flight` at a time; `core_secs_per_message` is the
//! machine's busy core-seconds over the stream less the idle machine's, per message.
//!
//! The fit: `core_secs = per_message + per_byte × bytes`, least squares on the relative error
//! (weights 1/y²): the sizes span 64× and the points scatter by ±25% from one stream to the
//! next, so an absolute fit would be the largest size's alone. Neither part may be negative
//! (a stack does not give time back): without a positive slope and non-negative intercept,
//! the slope alone.
//!
//! A collective's log (`suite.py cpu_costs --collective all_reduce`): `{"cpus", "results":
//! [{"collective", "bytes", "ranks", "calls", "core_secs_per_call"}, ...]}`: every rank ran
//! the collective back to back, and `core_secs_per_call` is the machine's busy core-seconds
//! per call less the idle machine's. A call's payload messages are those gloo sends for it as
//! dtsim plays it (`sim::library::gloo::payload_bytes`: gloo's ring all-reduce on n ranks, 4n(n
//! − 1) of a 2n-th of the buffer each up to 2n MiB); each row gives the mean core time of one
//! of them at their mean size, fitted the same way over every row of every log given. What it
//! measures: gloo's messages inside its own collectives, where no python runs per message.

use std::path::Path;

use sim::collective::Collective;

use serde::Deserialize;

use crate::error::{read_text, ImportError};

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct CpuCostRow {
    pub bytes: u64,
    pub messages: u64,
    pub core_secs_per_message: f64,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct CpuCostsLog {
    pub results: Vec<CpuCostRow>,
    pub cpus: u32,
}

/// Core time of a message: `per_message_secs + per_byte_secs × bytes`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MessageCost {
    pub per_message_secs: f64,
    pub per_byte_secs: f64,
}

/// One row of a collective's log: `calls` back-to-back calls of `collective` of `bytes` on
/// `ranks` ranks, and the machine's core-seconds per call.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct CollectiveCostRow {
    pub collective: Collective,
    pub bytes: u64,
    pub ranks: u32,
    pub calls: u64,
    pub core_secs_per_call: f64,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct CollectiveCostsLog {
    pub results: Vec<CollectiveCostRow>,
    pub cpus: u32,
}

/// A collective's log (see the module), each row checked: a collective gloo's payloads are
/// known for, two ranks or more, calls and a positive core time.
pub fn load_collectives(path: &Path) -> Result<CollectiveCostsLog, ImportError> {
    let file = path.display().to_string();
    parse_collectives(&read_text(path)?, &file)
}

pub fn parse_collectives(text: &str, file: &str) -> Result<CollectiveCostsLog, ImportError> {
    let log: CollectiveCostsLog = serde_json::from_str(text).map_err(|e| {
        ImportError::at(
            file,
            e.line(),
            format!("the JSON of testbed/workloads/cpu_costs.py --collective ({e})"),
        )
    })?;
    if log.results.is_empty() {
        return Err(ImportError::whole(file, "`results` with at least one row"));
    }
    for (i, r) in log.results.iter().enumerate() {
        if r.calls == 0 || !(r.core_secs_per_call.is_finite() && r.core_secs_per_call > 0.0) {
            return Err(ImportError::whole(
                file,
                format!("results[{i}]: calls > 0 and core_secs_per_call > 0"),
            ));
        }
        if let Err(e) = sim::library::gloo::payload_bytes(r.collective, r.bytes, r.ranks) {
            return Err(ImportError::whole(
                file,
                format!("results[{i}]: {}: {}", e.field, e.expected),
            ));
        }
    }
    Ok(log)
}

/// The fit over every row of `logs` (see the module): each row's core time per payload
/// message at its mean payload size; `None` when the rows hold fewer than two sizes.
pub fn fit_collectives(logs: &[CollectiveCostsLog]) -> Option<MessageCost> {
    let mut points = Vec::new();
    for r in logs.iter().flat_map(|l| &l.results) {
        let payloads = sim::library::gloo::payload_bytes(r.collective, r.bytes, r.ranks).ok()?;
        let count = payloads.len() as f64;
        let mean_bytes = payloads.iter().sum::<u64>() as f64 / count;
        points.push((mean_bytes, r.core_secs_per_call / count));
    }
    let sizes: std::collections::BTreeSet<u64> = points.iter().map(|p| p.0 as u64).collect();
    if sizes.len() < 2 {
        return None;
    }
    let (per_message_secs, per_byte_secs) = sim::validate::fit(&points)?;
    Some(MessageCost {
        per_message_secs,
        per_byte_secs,
    })
}

pub fn load(path: &Path) -> Result<CpuCostsLog, ImportError> {
    parse(&read_text(path)?, &path.display().to_string())
}

pub fn parse(text: &str, file: &str) -> Result<CpuCostsLog, ImportError> {
    let log: CpuCostsLog = serde_json::from_str(text).map_err(|e| {
        ImportError::at(
            file,
            e.line(),
            format!("the JSON of testbed/workloads/cpu_costs.py ({e})"),
        )
    })?;
    let sizes: std::collections::BTreeSet<u64> = log.results.iter().map(|r| r.bytes).collect();
    if sizes.len() < 2 {
        return Err(ImportError::whole(
            file,
            "`results` with at least two message sizes",
        ));
    }
    if let Some(i) = log.results.iter().position(|r| {
        r.bytes == 0
            || r.messages == 0
            || !(r.core_secs_per_message.is_finite() && r.core_secs_per_message > 0.0)
    }) {
        return Err(ImportError::whole(
            file,
            format!("results[{i}]: bytes > 0, messages > 0 and core_secs_per_message > 0"),
        ));
    }
    if log.cpus == 0 {
        return Err(ImportError::whole(file, "cpus: the machine's cores, > 0"));
    }
    Ok(log)
}

/// The fit over every row (see the module): `sim::validate::fit`'s relative least squares of
/// core time on bytes, intercept and slope kept non-negative.
pub fn fit(log: &CpuCostsLog) -> MessageCost {
    let points: Vec<(f64, f64)> = log
        .results
        .iter()
        .map(|r| (r.bytes as f64, r.core_secs_per_message))
        .collect();
    let (per_message_secs, per_byte_secs) = sim::validate::fit(&points).unwrap_or((0.0, 0.0));
    MessageCost {
        per_message_secs,
        per_byte_secs,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn log(rows: &[(u64, f64)]) -> String {
        let results: Vec<String> = rows
            .iter()
            .map(|(b, y)| {
                format!(r#"{{"bytes": {b}, "messages": 10, "core_secs_per_message": {y}}}"#)
            })
            .collect();
        format!(r#"{{"cpus": 2, "results": [{}]}}"#, results.join(","))
    }

    #[test]
    fn costs_on_a_line_come_back() {
        // 100 µs + 3 ns/B, exactly.
        let rows: Vec<(u64, f64)> = [16384u64, 65536, 1 << 20]
            .iter()
            .map(|&b| (b, 100e-6 + 3e-9 * b as f64))
            .collect();
        let f = fit(&parse(&log(&rows), "t.json").unwrap());
        assert!((f.per_message_secs - 100e-6).abs() < 1e-9, "{f:?}");
        assert!((f.per_byte_secs - 3e-9).abs() < 1e-14, "{f:?}");
    }

    #[test]
    fn the_fit_weighs_small_messages_as_much_as_large_ones() {
        // The small sizes cost 200 µs, the 1 MiB one 20% over the line through them: a
        // relative fit keeps the small sizes within a few percent.
        let rows = [
            (16384, 200e-6 + 3e-9 * 16384.0),
            (32768, 200e-6 + 3e-9 * 32768.0),
            (1 << 20, 1.2 * (200e-6 + 3e-9 * (1u64 << 20) as f64)),
        ];
        let f = fit(&parse(&log(&rows), "t.json").unwrap());
        for &(b, y) in &rows[..2] {
            let p = f.per_message_secs + f.per_byte_secs * b as f64;
            assert!((p - y).abs() / y < 0.05, "{b} B: {p} against {y}");
        }
    }

    /// A collective log of `(collective, bytes, ranks, core secs per call)` rows.
    fn collective_log(rows: &[(&str, u64, u32, f64)]) -> String {
        let results: Vec<String> = rows
            .iter()
            .map(|(c, b, n, y)| {
                format!(
                    r#"{{"collective": "{c}", "bytes": {b}, "ranks": {n}, "calls": 10,
                        "core_secs_per_call": {y}}}"#
                )
            })
            .collect();
        format!(r#"{{"cpus": 2, "results": [{}]}}"#, results.join(","))
    }

    #[test]
    fn a_collectives_core_time_is_spread_over_the_payloads_gloo_sends() {
        // Calls whose payloads cost exactly 70 µs + 1.5 ns/B each (gloo's ring all-reduce on
        // n ranks: 4n(n - 1) payloads of a 2n-th of the buffer): the fit gives them back.
        let call = |bytes: u64, n: u32| {
            sim::library::gloo::payload_bytes(Collective::AllReduce, bytes, n)
                .unwrap()
                .iter()
                .map(|&b| 70e-6 + 1.5e-9 * b as f64)
                .sum::<f64>()
        };
        let rows: Vec<(&str, u64, u32, f64)> = [(262144, 4), (1 << 20, 4), (262144, 8)]
            .iter()
            .map(|&(b, n)| ("all_reduce", b, n, call(b, n)))
            .collect();
        let log = parse_collectives(&collective_log(&rows), "c.json").unwrap();
        let f = fit_collectives(&[log]).unwrap();
        assert!((f.per_message_secs - 70e-6).abs() < 1e-10, "{f:?}");
        assert!((f.per_byte_secs - 1.5e-9).abs() < 1e-15, "{f:?}");
        // One payload size alone gives no slope: no fit.
        let one = parse_collectives(&collective_log(&rows[..1]), "c.json").unwrap();
        assert_eq!(fit_collectives(&[one]), None);
    }

    #[test]
    fn a_collective_log_with_a_collective_gloo_has_no_payloads_for_is_refused_by_row() {
        let e =
            parse_collectives(&collective_log(&[("barrier", 4, 4, 1e-3)]), "c.json").unwrap_err();
        assert!(e.to_string().contains("c.json"), "{e}");
        let e = parse_collectives(
            &collective_log(&[
                ("all_reduce", 262144, 4, 1e-3),
                ("all_reduce", 1024, 1, 1e-3),
            ]),
            "c.json",
        )
        .unwrap_err();
        assert!(e.to_string().contains("results[1]"), "{e}");
        let e = parse_collectives(&collective_log(&[("all_reduce", 262144, 4, 0.0)]), "c.json")
            .unwrap_err();
        assert!(e.to_string().contains("core_secs_per_call"), "{e}");
    }

    #[test]
    fn a_log_with_one_size_or_a_bad_row_is_refused_by_field() {
        let e = parse(&log(&[(16384, 1e-4), (16384, 2e-4)]), "t.json").unwrap_err();
        assert!(e.to_string().contains("two message sizes"), "{e}");
        let e = parse(&log(&[(16384, 1e-4), (65536, 0.0)]), "t.json").unwrap_err();
        assert!(e.to_string().contains("results[1]"), "{e}");
    }
}
