//! iperf3's JSON report (`iperf3 -c HOST -J`): throughput between two hosts.
//!
//! Accepted fields (esnet/iperf `src/iperf_api.c`, JSON output): `start.connected[0].remote_host`,
//! `start.test_start.{protocol, num_streams, duration}`, `intervals[].sum.bits_per_second`,
//! `end.sum_sent` / `end.sum_received` `{seconds, bytes, bits_per_second, retransmits}` (TCP) or
//! `end.sum` (UDP); a report with an `error` key is refused with iperf3's message.

use std::path::Path;

use serde_json::Value;

use crate::error::{read_text, ImportError};

#[derive(Debug, Clone, PartialEq)]
pub struct Iperf3Run {
    pub remote_host: Option<String>,
    pub protocol: String,
    pub streams: u32,
    pub sent_bits_per_s: f64,
    /// The receiver's rate (what arrived); the sender's for UDP.
    pub received_bits_per_s: f64,
    pub retransmits: Option<u64>,
    pub seconds: f64,
    /// Per-interval rates, for spread.
    pub interval_bits_per_s: Vec<f64>,
}

pub fn load(path: &Path) -> Result<Iperf3Run, ImportError> {
    parse(&read_text(path)?, &path.display().to_string())
}

pub fn parse(text: &str, file: &str) -> Result<Iperf3Run, ImportError> {
    let v: Value = serde_json::from_str(text).map_err(|e| {
        ImportError::at(
            file,
            e.line(),
            format!("iperf3 JSON output of `iperf3 -J` ({e})"),
        )
    })?;
    if let Some(e) = v.get("error").and_then(Value::as_str) {
        return Err(ImportError::whole(
            file,
            format!("a completed iperf3 run; the report says: {e}"),
        ));
    }
    let field = |p: &str, what: &str| ImportError::whole(file, format!("`{p}`: {what}"));
    let end = v
        .get("end")
        .ok_or_else(|| field("end", "the summary object (was the run interrupted?)"))?;
    let ts = v.pointer("/start/test_start");
    let protocol = ts
        .and_then(|t| t.get("protocol"))
        .and_then(Value::as_str)
        .unwrap_or("TCP")
        .to_string();
    let bps = |o: Option<&Value>| {
        o.and_then(|s| s.get("bits_per_second"))
            .and_then(Value::as_f64)
    };
    let (sent, recv, secs, retr) = if let Some(s) = end.get("sum_sent") {
        let r = end.get("sum_received");
        (
            bps(Some(s)).ok_or_else(|| field("end.sum_sent.bits_per_second", "a number"))?,
            bps(r).ok_or_else(|| field("end.sum_received.bits_per_second", "a number"))?,
            s.get("seconds").and_then(Value::as_f64).unwrap_or(0.0),
            s.get("retransmits").and_then(Value::as_u64),
        )
    } else {
        let s = end.get("sum");
        let b = bps(s).ok_or_else(|| {
            field(
                "end.sum_sent or end.sum",
                "bits_per_second of the whole run",
            )
        })?;
        (
            b,
            b,
            s.and_then(|s| s.get("seconds"))
                .and_then(Value::as_f64)
                .unwrap_or(0.0),
            None,
        )
    };
    for (name, rate) in [
        ("end.sum_sent.bits_per_second", sent),
        ("end.sum_received.bits_per_second", recv),
    ] {
        sim::limits::bandwidth_bps(rate).map_err(|e| field(name, &e))?;
    }
    if !(0.0..=sim::limits::MEASURED_SECS_MAX).contains(&secs) {
        return Err(field(
            "end.sum_sent.seconds",
            &format!("a run length from 0 to a year, got {secs}"),
        ));
    }
    Ok(Iperf3Run {
        remote_host: v
            .pointer("/start/connected/0/remote_host")
            .and_then(Value::as_str)
            .map(str::to_string),
        protocol,
        streams: ts
            .and_then(|t| t.get("num_streams"))
            .and_then(Value::as_u64)
            .unwrap_or(1) as u32,
        sent_bits_per_s: sent,
        received_bits_per_s: recv,
        retransmits: retr,
        seconds: secs,
        interval_bits_per_s: v
            .get("intervals")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|i| bps(i.get("sum")))
            .collect(),
    })
}
