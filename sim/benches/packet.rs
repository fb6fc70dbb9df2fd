//! Criterion benchmarks of the packet model (throughput reported in packet-hops per second):
//! - a ring all-reduce of 256 MiB over 64 GPUs of a 400 Gb/s InfiniBand fat-tree (4 KiB
//!   packets, lossless), the headline case;
//! - a 64-to-1 incast of 1 MiB per sender on a 100 GbE star with 1 MiB buffers, lossless
//!   (pauses) and lossy (drops and retransmissions), windows of 64 KiB or TCP CUBIC.
//!
//! `cargo bench -p sim --bench packet`
//!
//! Recorded (bench profile, one thread, 2-core VM shared with another build), after the
//! radix-heap event queue landed (with the earlier binary-heap queue the ring case took
//! 2.7–3.1 s, 7.0–8.0 M packet-hops/s):
//!
//! | case | packet-hops | wall time | packet-hops/s |
//! |---|---|---|---|
//! | ring all-reduce 256 MiB, 64 GPUs, fat-tree 400G (11.4 ms simulated) | 21.7 M | 1.82–1.89 s | 11.5–11.9 M |
//! | incast 64→1, 1 MiB each, lossless (5.37 ms simulated) | 89.6 k | 8.6–9.5 ms | 9.4–10.4 M |
//! | incast 64→1, 1 MiB each, lossy (5.37 ms simulated) | 166 k | 20.5–23.0 ms | 7.2–8.1 M |
//!
//! 2026-11-29 (idle machine, the same cases; packet-hops count acknowledgements): lossless
//! 7.93–8.23 ms (10.9–11.3 M/s), lossy 17.2–17.6 ms (9.4–9.7 M/s), lossy with TCP CUBIC
//! instead of a 64 KiB window 16.0–16.1 ms for 180 k packet-hops (11.2 M/s), 5.37 ms simulated.
//!
//! A packet-hop costs about two events (serialization end, arrival).

use std::cell::RefCell;
use std::hint::black_box;
use std::sync::Arc;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};

use sim::bench::{fat_tree, fat_tree_k_for, place, Placement};
use sim::collective::play::{play, PlayOptions};
use sim::collective::{
    generate, Algorithm, Collective, CollectiveSpec, Fabric, OpKind, Phase, RingOrder, Schedule,
};
use sim::engine::SimTime;
use sim::net::packet::{CongestionControl, PacketConfig, PacketModel, SwitchMode};
use sim::net::NetworkModel;
use sim::topology::routing::Router;
use sim::topology::{DeviceId, DeviceKind, LinkClass, LinkSpec, Topology};

struct TopoFabric<'a> {
    topo: &'a Topology,
    ranks: &'a [DeviceId],
    router: RefCell<Router>,
}

impl Fabric for TopoFabric<'_> {
    fn bottleneck_bps(&self, a: u32, b: u32) -> f64 {
        let mut r = self.router.borrow_mut();
        r.path(self.topo, self.ranks[a as usize], self.ranks[b as usize])
            .expect("connected")
            .iter()
            .map(|&l| self.topo.link(l).bandwidth_bps)
            .fold(f64::INFINITY, f64::min)
    }
    fn node_of(&self, rank: u32) -> u32 {
        rank
    }
}

/// Plays `s` on a fresh packet model; returns (end time, packet-hops).
fn run(
    topo: &Arc<Topology>,
    eps: &[DeviceId],
    s: &Schedule,
    config: &PacketConfig,
) -> (SimTime, u64) {
    let mut m = PacketModel::new(topo.clone(), config.clone(), 1).expect("buffers hold a packet");
    let out = play(
        s,
        eps,
        &mut m,
        PlayOptions {
            reduce_bytes_per_s: None,
            shared_cores: None,
        },
    )
    .expect("routable");
    (out.end, m.port_stats().expect("packet model").packet_hops)
}

fn ring_all_reduce_64_gpus_256mib(c: &mut Criterion) {
    let n = 64;
    let topo = fat_tree(fat_tree_k_for(n), n, None);
    let ranks = place(&topo, n, Placement::RankOrdered);
    let fabric = TopoFabric {
        topo: &topo,
        ranks: &ranks,
        router: RefCell::new(Router::new(&topo, 1)),
    };
    let spec = CollectiveSpec {
        collective: Collective::AllReduce,
        bytes: 256 << 20,
        root: 0,
        peer: 1,
        algorithm: Algorithm::Ring {
            rings: vec![RingOrder::Generated {
                offset: 0,
                stride: 1,
                reverse: false,
            }],
        },
        slices: 1,
    };
    let s = generate(&spec, n, &fabric).expect("ring generates");
    let config = PacketConfig::default();
    let (end, hops) = run(&topo, &ranks, &s, &config);
    eprintln!("ring 64 GPUs 256 MiB: simulated {end}, {hops} packet-hops");
    let mut g = c.benchmark_group("packet_ring_all_reduce_256MiB");
    g.sample_size(10);
    g.throughput(Throughput::Elements(hops));
    g.bench_function("64_gpus", |b| {
        b.iter(|| black_box(run(&topo, &ranks, &s, &config)))
    });
    g.finish();
}

fn incast_64_to_1(c: &mut Criterion) {
    let mut b = Topology::builder("incast");
    let hosts: Vec<_> = (0..65)
        .map(|i| b.add_device(format!("h{i}"), DeviceKind::Gpu, Some(i)))
        .collect();
    let sw = b.add_device("sw", DeviceKind::Switch, None);
    for &h in &hosts {
        b.add_link(
            h,
            sw,
            LinkSpec {
                bandwidth_bps: 100e9,
                latency: SimTime::from_us(1),
                buffer_bytes: 1 << 20,
                class: LinkClass::Ethernet,
            },
        );
    }
    let topo = Arc::new(b.build().expect("star builds"));
    let mut s = Schedule::new(Collective::SendRecv, "incast", 65, 0);
    let p = s.add_pattern((0..64).map(|i| (i, 64)).collect::<Vec<_>>());
    s.push(
        OpKind::Transfer {
            pattern: p,
            bytes: 1 << 20,
        },
        vec![],
        Phase::SendRecv,
        0,
        0,
    );
    let eps = topo.gpus().to_vec();
    let mut g = c.benchmark_group("packet_incast_64_to_1_1MiB");
    g.sample_size(10);
    for (mode, cc) in [
        (SwitchMode::Lossless, CongestionControl::None),
        (SwitchMode::Lossy, CongestionControl::None),
        (SwitchMode::Lossy, CongestionControl::Cubic),
    ] {
        let config = PacketConfig {
            mode,
            window_bytes: (cc == CongestionControl::None).then_some(64 << 10),
            congestion_control: cc,
            ..PacketConfig::default()
        };
        let (end, hops) = run(&topo, &eps, &s, &config);
        eprintln!("incast {mode:?} {cc:?}: simulated {end}, {hops} packet-hops");
        g.throughput(Throughput::Elements(hops));
        let name = match cc {
            CongestionControl::Cubic => format!("{}_cubic", mode.as_str()),
            _ => mode.as_str().to_string(),
        };
        g.bench_function(name, |b| {
            b.iter(|| black_box(run(&topo, &eps, &s, &config)))
        });
    }
    g.finish();
}

criterion_group!(benches, ring_all_reduce_64_gpus_256mib, incast_64_to_1);
criterion_main!(benches);
