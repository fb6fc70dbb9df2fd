//! Size-dependent bandwidth and latency factors per link class, SimGrid-style.
//!
//! Real transfers do not reach a link's nominal bandwidth, and small ones pay more than the
//! wire latency. A calibration profile can say, per link class, "transfers of at least S bytes
//! get factor f of the bandwidth and g times the latency": a piecewise-constant table over the
//! size. A flow's rate is then capped at `bandwidth_factor × bottleneck bandwidth` and its path
//! latency scaled by `latency_factor`, using the factors of its bottleneck link's class.
//!
//! A *link efficiency* is different: the share of every link of a class that carries payload
//! (TCP/IP over Ethernet: 1448 of the 1514 bytes of a full frame), whatever the number of
//! flows on it. It scales the links' capacity, so flows that share a link share that, where a
//! bandwidth factor would cap each of them and let two together exceed it. On the testbed
//! 1, 2, 4 and 8 iperf3 streams and a 3-to-1 incast through one 200 Mbit/s link all received
//! 191.3–191.6 Mbit/s in total (`data/runs/calibration/testbed_star4_200mbit.iperf3_*.json`).

use serde::{Deserialize, Serialize};

use crate::topology::LinkClass;

/// One row of a factor table: applies to sizes `>= min_bytes` up to the next row.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FactorRow {
    pub min_bytes: u64,
    pub bandwidth_factor: f64,
    pub latency_factor: f64,
}

/// Factors for every link class; a class without a table has factor 1.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct EfficiencyFactors {
    /// Sorted by `min_bytes` per class.
    pub tables: Vec<(LinkClass, Vec<FactorRow>)>,
    /// Payload share of every link of a class (1 for a class not listed).
    #[serde(default)]
    pub link: Vec<(LinkClass, f64)>,
    /// Bytes a TCP connection keeps queued ahead in a FIFO egress queue of a link of a class
    /// (none for a class not listed): see [`crate::net::flow`] on sends posted together.
    #[serde(default)]
    pub fifo_head: Vec<(LinkClass, f64)>,
    /// A shaper's token bucket on every link of a class, as seconds at the link's rate (none
    /// for a class not listed): see [`crate::net::flow`] on transfers that start on idle links.
    #[serde(default)]
    pub shaper_burst_secs: Vec<(LinkClass, f64)>,
    /// Mean seconds a small message waits at a shaped link of a class for the packet another
    /// connection has in service there (none for a class not listed): see [`crate::net::flow`]
    /// on sends crossing a link behind another connection's packet.
    #[serde(default)]
    pub shaper_packet_wait_secs: Vec<(LinkClass, f64)>,
    /// Largest packet TCP hands the shaper of a link of a class at once, bytes (none for a
    /// class not listed): see [`crate::net::flow`] on one-packet messages and the shaper's
    /// debt.
    #[serde(default)]
    pub shaper_packet_bytes: Vec<(LinkClass, f64)>,
    /// Whether a message passes a shaper whole only if its TCP connection's congestion window
    /// covers it, each connection's window kept as TCP grows it: see [`crate::net::flow`] on
    /// congestion windows. A profile that measured its shapers' packets (TCP's GSO packets)
    /// keeps them.
    #[serde(default)]
    pub tcp_windows: bool,
}

impl EfficiencyFactors {
    /// (bandwidth factor, latency factor) for a transfer of `bytes` whose bottleneck is `class`.
    pub fn lookup(&self, class: LinkClass, bytes: u64) -> (f64, f64) {
        let Some((_, rows)) = self.tables.iter().find(|(c, _)| *c == class) else {
            return (1.0, 1.0);
        };
        match rows.iter().rev().find(|r| bytes >= r.min_bytes) {
            Some(r) => (r.bandwidth_factor, r.latency_factor),
            None => (1.0, 1.0),
        }
    }

    /// The payload share of a link of `class`.
    pub fn link_efficiency(&self, class: LinkClass) -> f64 {
        self.link
            .iter()
            .find(|(c, _)| *c == class)
            .map_or(1.0, |&(_, e)| e)
    }

    /// Bytes a connection keeps queued ahead on a link of `class`; 0 when not measured.
    pub fn fifo_head_bytes(&self, class: LinkClass) -> f64 {
        self.fifo_head
            .iter()
            .find(|(c, _)| *c == class)
            .map_or(0.0, |&(_, b)| b)
    }

    /// Seconds of a link's rate its shaper's bucket holds; 0 when it has none.
    pub fn shaper_burst_secs(&self, class: LinkClass) -> f64 {
        self.shaper_burst_secs
            .iter()
            .find(|(c, _)| *c == class)
            .map_or(0.0, |&(_, s)| s)
    }

    /// Mean seconds a message waits at a shaped link of `class` behind another connection's
    /// packet; 0 when not measured.
    pub fn shaper_packet_wait_secs(&self, class: LinkClass) -> f64 {
        self.shaper_packet_wait_secs
            .iter()
            .find(|(c, _)| *c == class)
            .map_or(0.0, |&(_, s)| s)
    }

    /// Largest packet TCP hands the shaper of a link of `class`; 0 when not measured (no
    /// message passes whole).
    pub fn shaper_packet_bytes(&self, class: LinkClass) -> f64 {
        self.shaper_packet_bytes
            .iter()
            .find(|(c, _)| *c == class)
            .map_or(0.0, |&(_, b)| b)
    }

    /// (bandwidth factor, latency factor) of `class` when they do not depend on the size;
    /// `None` when its table gives sizes different factors.
    pub fn size_independent(&self, class: LinkClass) -> Option<(f64, f64)> {
        let Some((_, rows)) = self.tables.iter().find(|(c, _)| *c == class) else {
            return Some((1.0, 1.0));
        };
        let Some(first) = rows.first() else {
            return Some((1.0, 1.0));
        };
        let f = (first.bandwidth_factor, first.latency_factor);
        // Sizes below the first row's get (1, 1).
        let below_ok = first.min_bytes == 0 || f == (1.0, 1.0);
        (below_ok
            && rows
                .iter()
                .all(|r| (r.bandwidth_factor, r.latency_factor) == f))
        .then_some(f)
    }

    pub fn is_identity(&self) -> bool {
        self.tables.iter().all(|(_, rows)| {
            rows.iter()
                .all(|r| r.bandwidth_factor == 1.0 && r.latency_factor == 1.0)
        }) && self.link.iter().all(|&(_, e)| e == 1.0)
            && self.fifo_head.iter().all(|&(_, b)| b == 0.0)
            && self.shaper_burst_secs.iter().all(|&(_, s)| s == 0.0)
            && self.shaper_packet_wait_secs.iter().all(|&(_, s)| s == 0.0)
            && self.shaper_packet_bytes.iter().all(|&(_, b)| b == 0.0)
    }

    /// Checks bandwidth factors are in (0, 1], latency factors non-negative and rows sorted.
    pub fn validate(&self) -> Result<(), String> {
        for (class, e) in &self.link {
            crate::limits::factor(*e)
                .map_err(|why| format!("link efficiency of {class}: {why}"))?;
        }
        for (class, rows) in &self.tables {
            for (i, r) in rows.iter().enumerate() {
                if let Err(e) = crate::limits::factor(r.bandwidth_factor) {
                    return Err(format!("{class}[{i}].bandwidth_factor: {e}"));
                }
                if !(r.latency_factor >= 0.0 && r.latency_factor.is_finite()) {
                    return Err(format!(
                        "{class}[{i}].latency_factor: a number >= 0, got {}",
                        r.latency_factor
                    ));
                }
                if i > 0 && rows[i - 1].min_bytes >= r.min_bytes {
                    return Err(format!(
                        "{class}[{i}].min_bytes: rows sorted by increasing size"
                    ));
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_row_with_the_largest_min_at_or_below_the_size_applies() {
        let f = EfficiencyFactors {
            tables: vec![(
                LinkClass::Ib,
                vec![
                    FactorRow {
                        min_bytes: 0,
                        bandwidth_factor: 0.5,
                        latency_factor: 3.0,
                    },
                    FactorRow {
                        min_bytes: 65536,
                        bandwidth_factor: 0.9,
                        latency_factor: 1.0,
                    },
                ],
            )],
            ..Default::default()
        };
        assert_eq!(f.lookup(LinkClass::Ib, 1024), (0.5, 3.0));
        assert_eq!(f.lookup(LinkClass::Ib, 65536), (0.9, 1.0));
        assert_eq!(f.lookup(LinkClass::Nvlink, 1024), (1.0, 1.0));
        assert!(f.validate().is_ok());
    }
}
