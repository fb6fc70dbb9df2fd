//! Fixtures shared by the network models' unit tests: a star topology and hand-built schedules.

use std::sync::Arc;

use crate::collective::{Collective, OpId, OpKind, Phase, Schedule};
use crate::engine::SimTime;
use crate::topology::{DeviceKind, LinkClass, LinkSpec, Topology};

use super::series::LinkSeries;
use super::LinkTraffic;

pub const GBPS: f64 = 1e9;

/// `n` GPUs `g0..` on one switch `sw`: every link `bw` bits/s, `lat` per hop, `buffer` bytes
/// per port, of `class`.
pub fn star(n: u32, bw: f64, lat: SimTime, buffer: u64, class: LinkClass) -> Arc<Topology> {
    let mut b = Topology::builder("star");
    let gpus: Vec<_> = (0..n)
        .map(|i| b.add_device(format!("g{i}"), DeviceKind::Gpu, Some(i)))
        .collect();
    let sw = b.add_device("sw", DeviceKind::Switch, None);
    for g in gpus {
        b.add_link(
            g,
            sw,
            LinkSpec {
                bandwidth_bps: bw,
                latency: lat,
                buffer_bytes: buffer,
                class,
            },
        );
    }
    Arc::new(b.build().unwrap())
}

/// One transfer op: its (src, dst) pairs, bytes per pair, and the ops it waits for.
pub type OpSpec = (Vec<(u32, u32)>, u64, Vec<u32>);

/// One transfer op per entry of `ops`, over `n` endpoints.
pub fn schedule(n: u32, ops: &[OpSpec]) -> Schedule {
    let mut s = Schedule::new(Collective::SendRecv, "test", n, 0);
    for (pairs, bytes, deps) in ops {
        let p = s.add_pattern(pairs.clone());
        s.push(
            OpKind::Transfer {
                pattern: p,
                bytes: *bytes,
            },
            deps.iter().map(|&d| OpId(d)).collect(),
            Phase::SendRecv,
            0,
            0,
        );
    }
    s
}

/// Checks a series against the run's link totals: every link's bins integrate to its bytes
/// (relative `tol`), and utilization stays in [0, 1].
pub fn assert_series_matches_traffic(
    t: &Topology,
    series: &LinkSeries,
    traffic: &[LinkTraffic],
    tol: f64,
) {
    for e in &series.links {
        let cap = t.links()[e.link as usize].bandwidth_bps;
        let bytes: f64 = e
            .utilization
            .iter()
            .enumerate()
            .map(|(i, u)| {
                u * cap * (series.edges_ps[i + 1] - series.edges_ps[i]) as f64 * 1e-12 / 8.0
            })
            .sum();
        let want = traffic[e.link as usize].bytes;
        assert!(
            (bytes - want).abs() <= tol * want,
            "link {}: {bytes} vs {want}",
            e.link
        );
        assert!(e.utilization.iter().all(|&u| (0.0..=1.0).contains(&u)));
    }
}
