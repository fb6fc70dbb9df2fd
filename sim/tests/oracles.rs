//! Closed-form alpha-beta times as test oracles for the simulator.
//!
//! Each test builds a uniform topology from a topology file text, generates a collective's
//! schedule, plays it on the flow model and compares the simulated time with the textbook
//! formula. The formulas are oracles only: the simulator never uses them.

use std::sync::Arc;

use sim::collective::play::{play, PlayOptions, PlayOutcome};
use sim::collective::{generate, Algorithm, Collective, CollectiveSpec, Fabric, RingOrder};
use sim::engine::SimTime;
use sim::net::flow::FlowModel;
use sim::net::NetworkModel;
use sim::topology::{file, DeviceId, Topology};

const MIB: u64 = 1 << 20;

fn ring_topology(n: u32, bandwidth: &str, latency: &str) -> Arc<Topology> {
    let text = format!(
        "name = \"ring\"\n[generator]\nkind = \"ring\"\nn = {n}\n[generator.link]\nbandwidth = \"{bandwidth}\"\nlatency = \"{latency}\"\nclass = \"ethernet\"\n"
    );
    Arc::new(file::parse_str(&text, "ring.toml").unwrap())
}

fn star_topology(n: u32, bandwidth: &str, latency: &str) -> Arc<Topology> {
    let text = format!(
        "name = \"star\"\n[generator]\nkind = \"star\"\nn = {n}\n[generator.link]\nbandwidth = \"{bandwidth}\"\nlatency = \"{latency}\"\nclass = \"ethernet\"\n"
    );
    Arc::new(file::parse_str(&text, "star.toml").unwrap())
}

/// Generators ask the network for bottlenecks and nodes; on these uniform topologies every rank
/// is its own node and every path has the same bottleneck.
struct Uniform {
    bps: f64,
}
impl Fabric for Uniform {
    fn bottleneck_bps(&self, _: u32, _: u32) -> f64 {
        self.bps
    }
    fn node_of(&self, rank: u32) -> u32 {
        rank
    }
}

fn simulate(topo: &Arc<Topology>, spec: CollectiveSpec, extra: &[DeviceId]) -> PlayOutcome {
    let n = topo.gpus().len() as u32;
    let schedule = generate(
        &spec,
        n,
        &Uniform {
            bps: topo.links()[0].bandwidth_bps,
        },
    )
    .unwrap();
    let mut endpoints = topo.gpus().to_vec();
    endpoints.extend_from_slice(extra);
    let mut model = FlowModel::new(topo.clone(), Default::default(), 1);
    let out = play(
        &schedule,
        &endpoints,
        &mut model,
        PlayOptions {
            reduce_bytes_per_s: None,
            shared_cores: None,
        },
    )
    .unwrap();
    // Bytes sent = bytes received: every byte put on the network crossed every hop of its path.
    let on_links: f64 = model.link_traffic().iter().map(|l| l.bytes).sum();
    assert!(on_links > 0.0 || schedule.total_transfer_bytes() == 0);
    out
}

fn spec(collective: Collective, algorithm: Algorithm, bytes: u64) -> CollectiveSpec {
    CollectiveSpec {
        collective,
        bytes,
        root: 0,
        peer: 1,
        algorithm,
        slices: 1,
    }
}

fn one_ring() -> Algorithm {
    Algorithm::Ring {
        rings: vec![RingOrder::Generated {
            offset: 0,
            stride: 1,
            reverse: false,
        }],
    }
}

fn assert_close(simulated: SimTime, expected_secs: f64, tolerance: f64, what: &str) {
    let got = simulated.as_secs_f64();
    let err = (got - expected_secs).abs() / expected_secs;
    assert!(
        err <= tolerance,
        "{what}: simulated {got:.9} s, closed form {expected_secs:.9} s, error {:.4}%",
        err * 100.0
    );
}

#[test]
fn ring_all_reduce_on_a_ring_takes_2_n_minus_1_alpha_plus_m_over_n_b() {
    let (b_bytes, a) = (10e9, 1e-6);
    for n in [2u32, 3, 4, 8, 10, 16] {
        let topo = ring_topology(n, "10GB/s", "1us");
        let m = 64 * MIB;
        let out = simulate(&topo, spec(Collective::AllReduce, one_ring(), m), &[]);
        let steps = 2.0 * (n as f64 - 1.0);
        let chunk = (m as f64 / n as f64).ceil();
        assert_close(
            out.end,
            steps * (a + chunk / b_bytes),
            0.005,
            &format!("ring of {n}"),
        );
    }
}

#[test]
fn ring_all_reduce_on_a_star_pays_two_hops_of_latency_per_step() {
    let (b_bytes, a) = (100e9 / 8.0, 2e-6);
    for n in [4u32, 8, 32] {
        let topo = star_topology(n, "100Gbps", "1us");
        let m = 256 * MIB;
        let out = simulate(&topo, spec(Collective::AllReduce, one_ring(), m), &[]);
        let steps = 2.0 * (n as f64 - 1.0);
        assert_close(
            out.end,
            steps * (a + (m as f64 / n as f64).ceil() / b_bytes),
            0.005,
            &format!("star of {n}"),
        );
    }
}

#[test]
fn halving_doubling_matches_2_log_n_alpha_plus_2_n_minus_1_over_n_m_over_b() {
    let (b_bytes, a) = (100e9 / 8.0, 2e-6);
    for n in [2u32, 4, 8, 16, 64] {
        let topo = star_topology(n, "100Gbps", "1us");
        let m = 64 * MIB;
        let out = simulate(
            &topo,
            spec(Collective::AllReduce, Algorithm::HalvingDoubling, m),
            &[],
        );
        let log_n = (n as f64).log2();
        let expected = 2.0 * log_n * a + 2.0 * (n as f64 - 1.0) / n as f64 * m as f64 / b_bytes;
        assert_close(
            out.end,
            expected,
            0.005,
            &format!("halving-doubling over {n}"),
        );
    }
}

#[test]
fn double_binary_tree_reduce_then_broadcast_matches_its_alpha_beta_time() {
    // On a star with bandwidth B per direction, a tree level where a parent has two children
    // sends M/2 per child through the parent's one downlink (reduce) or uplink (broadcast): M/B
    // per level, M/(2B) when every parent at that level has one child. The two trees each carry
    // M/2 and, for an even rank count, have disjoint interior ranks, so they do not contend.
    // Without pipelining: sum over the levels of (2 hops of latency + level bytes / B), once up
    // and once down, for the slower tree.
    let (b_bytes, a) = (100e9 / 8.0, 2e-6);
    for n in [4u32, 8, 16] {
        let topo = star_topology(n, "100Gbps", "1us");
        let m = 64 * MIB;
        let out = simulate(
            &topo,
            spec(Collective::AllReduce, Algorithm::DoubleBinaryTree, m),
            &[],
        );
        let schedule = generate(
            &spec(Collective::AllReduce, Algorithm::DoubleBinaryTree, m),
            n,
            &Uniform { bps: 1.0 },
        )
        .unwrap();
        // Per tree (channel), the alpha-beta time of its levels, each taking the fan-in of its
        // busiest receiver (reduce) or fan-out of its busiest sender (broadcast).
        let mut per_tree = [0.0f64; 2];
        for op in &schedule.ops {
            if let sim::collective::OpKind::Transfer { pattern, bytes } = op.kind {
                let pairs = &schedule.patterns[pattern.0 as usize].pairs;
                let mut fan = std::collections::BTreeMap::new();
                for &(s, d) in pairs.iter() {
                    let key = if op.phase == sim::collective::Phase::Broadcast {
                        s
                    } else {
                        d
                    };
                    *fan.entry(key).or_insert(0u32) += 1;
                }
                let worst = *fan.values().max().unwrap() as f64;
                per_tree[op.channel as usize] += a + worst * bytes as f64 / b_bytes;
            }
        }
        let expected = per_tree[0].max(per_tree[1]);
        assert_close(
            out.end,
            expected,
            0.005,
            &format!("double binary tree over {n}"),
        );
    }
}

#[test]
fn parameter_server_incast_takes_2_n_minus_1_m_over_b_on_the_server_link() {
    // Server colocated on rank 0: n-1 workers push M into its downlink, then it sends M to each
    // of them through its uplink.
    let (b_bytes, a) = (100e9 / 8.0, 2e-6);
    for n in [2u32, 4, 16] {
        let topo = star_topology(n, "100Gbps", "1us");
        let m = 32 * MIB;
        let out = simulate(
            &topo,
            spec(
                Collective::AllReduce,
                Algorithm::ParameterServer {
                    servers: 1,
                    colocated: true,
                },
                m,
            ),
            &[],
        );
        let expected = 2.0 * (n as f64 - 1.0) * m as f64 / b_bytes + 2.0 * a;
        assert_close(
            out.end,
            expected,
            0.005,
            &format!("parameter server with {n} ranks"),
        );
    }
}

#[test]
fn more_rings_on_both_directions_halve_the_time() {
    // Two rings over the same physical ring, the second reversed: each direction of each link
    // carries one ring, so the bandwidth term halves.
    let topo = ring_topology(10, "10GB/s", "1us");
    let m = 64 * MIB;
    let two = Algorithm::Ring {
        rings: vec![
            RingOrder::Generated {
                offset: 0,
                stride: 1,
                reverse: false,
            },
            RingOrder::Generated {
                offset: 5,
                stride: 1,
                reverse: true,
            },
        ],
    };
    let out = simulate(&topo, spec(Collective::AllReduce, two, m), &[]);
    let expected = 18.0 * (1e-6 + (m as f64 / 2.0 / 10.0).ceil() / 10e9);
    assert_close(out.end, expected, 0.005, "two counter-rotating rings");
}

#[test]
fn pipelining_in_slices_hides_latency_behind_bandwidth_as_a_pipeline() {
    // A broadcast chain over 8 ranks of a ring: without slices each of the 7 hops waits for the
    // whole message; with s slices the pipeline takes (7 + s - 1) slice times.
    let topo = ring_topology(8, "10GB/s", "1us");
    let m = 64 * MIB;
    let mut sp = spec(Collective::Broadcast, one_ring(), m);
    let unsliced = simulate(&topo, sp.clone(), &[]);
    assert_close(
        unsliced.end,
        7.0 * (1e-6 + m as f64 / 10e9),
        0.005,
        "unsliced chain",
    );
    sp.slices = 16;
    let sliced = simulate(&topo, sp, &[]);
    let slice = m as f64 / 16.0;
    assert_close(
        sliced.end,
        (7.0 + 15.0) * (1e-6 + slice / 10e9),
        0.005,
        "16-slice chain",
    );
}
