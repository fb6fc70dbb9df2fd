//! gloo and OpenMPI on CPU hosts: the testbed's topologies default to gloo, OpenMPI's fixed
//! rules pick what it picks, and a topology that names no known library is a clear error.

use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn run(topology: &Path, bytes: &str, extra: &str) -> Result<sim::metrics::Summary, String> {
    run_op(topology, &[], "all_reduce", bytes, extra)
}

/// A collective `op` of `bytes` on `topology` with `set` overrides and `extra` lines in its
/// `[collective]` table.
fn run_op(
    topology: &Path,
    set: &[&str],
    op: &str,
    bytes: &str,
    extra: &str,
) -> Result<sim::metrics::Summary, String> {
    let text = format!(
        "name = \"t\"\n[topology]\nfile = {:?}\n[collective]\nop = \"{op}\"\nbytes = \"{bytes}\"\n{extra}",
        topology.display().to_string()
    );
    let set: Vec<String> = set.iter().map(|s| s.to_string()).collect();
    let s = sim::scenario::parse(&text, Path::new("t.toml"), &set).map_err(|e| e.to_string())?;
    sim::scenario::run::run(&s)
        .map(|r| r.summary)
        .map_err(|e| e.to_string())
}

#[test]
fn the_testbed_runs_gloo_by_default() {
    let star = root().join("testbed/topologies/star4_200mbit.toml");
    let s = run(&star, "16MiB", "").unwrap();
    assert!(
        s.library.starts_with("gloo ring, 16 segments"),
        "{}",
        s.library
    );
    // The ideal templates stay one line away.
    let s = run(
        &star,
        "16MiB",
        "library = \"ideal\"\nalgorithm = \"ring\"\n",
    )
    .unwrap();
    assert!(s.library.starts_with("ideal"), "{}", s.library);
}

#[test]
fn openmpi_follows_its_fixed_rules_on_four_ranks() {
    // coll_tuned_decision_fixed.c (4.1): 4-7 ranks, commutative: recursive doubling below
    // 8 KiB, Rabenseifner from there.
    let star = root().join("testbed/topologies/star4_200mbit.toml");
    let small = run(&star, "4KiB", "library = \"mpi\"\n").unwrap();
    assert!(
        small.library.contains("recursive_doubling (fixed rules)"),
        "{}",
        small.library
    );
    let big = run(&star, "1MiB", "library = \"mpi\"\n").unwrap();
    assert!(
        big.library.contains("rabenseifner (fixed rules)"),
        "{}",
        big.library
    );
    let e = run(&star, "1MiB", "library = \"mpi\"\nalgorithm = \"bruck\"\n").unwrap_err();
    assert!(e.contains("collective.algorithm"), "{e}");
}

#[test]
fn a_topology_naming_an_unknown_library_is_an_error_naming_the_file_and_field() {
    let dir = std::env::temp_dir().join(format!("dtsim-cpu-lib-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let topo = dir.join("bad.toml");
    std::fs::write(
        &topo,
        "name = \"bad\"\nlibrary = \"glo\"\n[generator]\nkind = \"star\"\nn = 2\n\
         [generator.link]\nbandwidth = \"1Gbps\"\nclass = \"ethernet\"\n",
    )
    .unwrap();
    let e = run(&topo, "1MiB", "").unwrap_err();
    assert!(
        e.contains("bad.toml") && e.contains("library") && e.contains("gloo"),
        "{e}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// gloo's `op` of `bytes` on `hosts` hosts of the testbed star with the star's profile and
/// `set`: its time in seconds.
fn on_the_star(hosts: u32, op: &str, bytes: &str, set: &[&str]) -> Result<f64, String> {
    star_report(
        hosts,
        &format!("op = \"{op}\"\nbytes = \"{bytes}\"\nlibrary = \"gloo\"\n"),
        set,
    )
    .map(|r| r.summary.time_ps as f64 * 1e-12)
}

/// The run of `hosts` hosts of the testbed's star with its measured profile, `collective` the
/// lines of its `[collective]` table, with `set` overrides.
fn star_report(
    hosts: u32,
    collective: &str,
    set: &[&str],
) -> Result<sim::metrics::RunReport, String> {
    let text = format!(
        "name = \"t\"\nprofile = {:?}\n[topology]\nfile = {:?}\ngenerator.n = {hosts}\n\
         [collective]\n{collective}",
        root()
            .join("data/profiles/testbed_star4_200mbit.json")
            .display()
            .to_string(),
        root()
            .join("testbed/topologies/star4_200mbit.toml")
            .display()
            .to_string()
    );
    let set: Vec<String> = set.iter().map(|s| s.to_string()).collect();
    let s = sim::scenario::parse(&text, Path::new("t.toml"), &set).map_err(|e| e.to_string())?;
    sim::scenario::run::run(&s).map_err(|e| e.to_string())
}

/// The star's 8 hosts, all-reducing 256 KiB with gloo on the star's profile, with `set`.
fn eight_hosts_256k(set: &[&str]) -> Result<f64, String> {
    on_the_star(8, "all_reduce", "256KiB", set)
}

#[test]
fn hosts_sharing_one_core_wait_for_it_and_two_cores_hold_the_testbeds_gloo_work() {
    // Measured (data/runs/calibration/testbed_star_one_core_vs_two.csv): 27.9 ms on the
    // machine's 2 cores, 41.3 ms with every rank pinned to one (one launch each); on 2 cores
    // over five launches on 2026-11-29, 23.4 ms (testbed_gloo_collectives.csv). Timed as the
    // harness times it (each call after a barrier), 2 cores within 10% of the five launches.
    let looped = ["collective.timing=after_barrier"];
    let two_looped = eight_hosts_256k(&looped).unwrap();
    assert!((two_looped / 23.4e-3 - 1.0).abs() < 0.10, "{two_looped}");
    // On one core the pool carries part of the way to the pinned run, not all of it (31.5
    // ms played): a message's core time was measured with the threads on 2 cores
    // (`network.host_cpu.in_collectives`), and on one they also wait out each other's slices.
    let one_looped =
        eight_hosts_256k(&["collective.timing=after_barrier", "network.shared_cores=1"]).unwrap();
    assert!(
        one_looped > 1.25 * two_looped && one_looped < 41.3e-3,
        "{one_looped} against {two_looped}"
    );
    // Each step's work (8 messages of 16 KiB, and the reductions) does not all fit beside its
    // transfers once the shapers' bursts carry their first bytes: 2 cores hold the call back
    // too (19.2 ms against 18.5 on a core per host), and 1 core much more (26.0). Played rank
    // by rank (2026-12-02) the ranks' work spreads over each step; in lockstep batches, when
    // every rank's came at once, 2 cores held it back by more than 10%.
    let two = eight_hosts_256k(&[]).unwrap();
    let one = eight_hosts_256k(&["network.shared_cores=1"]).unwrap();
    let own_cores = eight_hosts_256k(&["network.shared_cores=1000"]).unwrap();
    assert!(two > 1.02 * own_cores, "{two} against {own_cores}");
    assert!(one > 1.3 * two, "{one} against {two}");
}

#[test]
fn shared_cores_need_a_profile_that_says_what_a_message_costs_them() {
    let star = root().join("testbed/topologies/star4_200mbit.toml");
    let e = run(&star, "1MiB", "[network]\nshared_cores = 1\n").unwrap_err();
    assert!(
        e.contains("network.shared_cores") && e.contains("host_cpu"),
        "{e}"
    );
    let e = eight_hosts_256k(&["network.shared_cores=0.5"]).unwrap_err();
    assert!(
        e.contains("network.shared_cores") && e.contains("from 1"),
        "{e}"
    );
}

/// A collective of `op` on the testbed's 4-host star under OpenMPI, without the testbed's
/// profile: the links' nominal 200 Mbit/s (25 MB/s) and 25 µs.
fn mpi_on_star(op: &str, bytes: &str, extra: &str) -> Result<sim::metrics::Summary, String> {
    let star = root().join("testbed/topologies/star4_200mbit.toml");
    run_op(
        &star,
        &[],
        op,
        bytes,
        &format!("library = \"mpi\"\n{extra}"),
    )
}

#[test]
fn openmpis_broadcast_sends_to_every_rank_at_once_then_chains_from_a_mib() {
    // 4-7 ranks (coll_tuned_decision_fixed.c, 4.1): basic_linear from 8 KiB, the chain (one
    // chain, unsegmented: store and forward) from 1 MiB.
    let m = |bytes: f64| bytes / 25e6 * 1e3;
    let linear = mpi_on_star("broadcast", "256KiB", "").unwrap();
    assert!(
        linear.library.contains("basic_linear (fixed rules)"),
        "{}",
        linear.library
    );
    // The root's link carries three copies at once.
    let ms = linear.time_us / 1e3;
    assert!((ms / m(3.0 * 262144.0) - 1.0).abs() < 0.01, "{ms} ms");
    let chain = mpi_on_star("broadcast", "1MiB", "").unwrap();
    assert!(
        chain.library.contains("chain (fixed rules)"),
        "{}",
        chain.library
    );
    // Three hops, each the whole message after the one before.
    let ms = chain.time_us / 1e3;
    assert!((ms / m(3.0 * 1048576.0) - 1.0).abs() < 0.01, "{ms} ms");
    // The binomial tree: the root's two children share its link, then rank 1 forwards to 3.
    let binomial = mpi_on_star("broadcast", "1MiB", "algorithm = \"binomial\"\n").unwrap();
    let ms = binomial.time_us / 1e3;
    assert!((ms / m(3.0 * 1048576.0) - 1.0).abs() < 0.01, "{ms} ms");
    // Split binary tree: the root sends each child half, rank 1 forwards its half to 3 while
    // the root sends 2 the other, then 1 and 2 swap halves and the root sends 3 the right one:
    // three half-message times if the swap ran both ways at once. Its partners come from
    // waiting on the tree's messages, so its way back waits for the first way's head in 95 of
    // 106 cases (the captured exchanges of such partners), and so in the median call: a
    // further half less the slow mode's 82.5 KB tail, still well under the binomial tree.
    let split = mpi_on_star("broadcast", "1MiB", "algorithm = \"split_binary_tree\"\n").unwrap();
    let ms = split.time_us / 1e3;
    let half = 524_288.0;
    let expected = m(3.0 * half) + m(half - 82_500.0);
    assert!(
        (ms / expected - 1.0).abs() < 0.01 && ms < 0.65 * binomial.time_us / 1e3,
        "{ms} ms against {expected} ms, binomial {} ms",
        binomial.time_us / 1e3
    );
    // Not modelled: a clear error naming the field.
    let e = mpi_on_star("all_gather", "1MiB", "algorithm = \"linear\"\n").unwrap_err();
    assert!(
        e.contains("collective.algorithm") && e.contains("linear"),
        "{e}"
    );
}

#[test]
fn openmpis_all_gather_doubles_its_exchanges_on_a_power_of_two_and_runs_bruck_otherwise() {
    let rd = mpi_on_star("all_gather", "4MiB", "").unwrap();
    assert!(
        rd.library.contains("recursive_doubling (fixed rules)"),
        "{}",
        rd.library
    );
    // Two exchanges, of one block (1 MiB) then two, each way: at least the bytes one way.
    let ms = rd.time_us / 1e3;
    assert!(ms >= 3.0 * 1048576.0 / 25e6 * 1e3, "{ms} ms");
    let star = root().join("testbed/topologies/star4_200mbit.toml");
    let odd = run_op(
        &star,
        &["topology.generator.n=3"],
        "all_gather",
        "3MiB",
        "library = \"mpi\"\n",
    )
    .unwrap();
    assert!(
        odd.library
            .contains("recursive_doubling (fixed rules), runs bruck"),
        "{}",
        odd.library
    );
    // The ring: three steps of one block, each rank to the next.
    let ring = mpi_on_star("all_gather", "4MiB", "algorithm = \"ring\"\n").unwrap();
    let ms = ring.time_us / 1e3;
    assert!(ms >= 3.0 * 1048576.0 / 25e6 * 1e3 * 0.99, "{ms} ms");
    let e = mpi_on_star("all_gather", "4MiB", "algorithm = \"two_proc\"\n").unwrap_err();
    assert!(e.contains("2 ranks only"), "{e}");
}

#[test]
fn openmpis_reduce_scatter_halves_below_256k_and_rings_above() {
    // 4-31 ranks (coll_tuned_decision_fixed.c, 4.1): recursive halving below 256 KiB, the
    // ring from there: three steps of a quarter of the vector each, reduced on the way.
    let rh = mpi_on_star("reduce_scatter", "128KiB", "").unwrap();
    assert!(
        rh.library.contains("recursive_halving (fixed rules)"),
        "{}",
        rh.library
    );
    let ring = mpi_on_star("reduce_scatter", "16MiB", "").unwrap();
    assert!(
        ring.library.contains("ring (fixed rules)"),
        "{}",
        ring.library
    );
    let ms = ring.time_us / 1e3;
    let bytes_ms = 3.0 * 4.0 * 1048576.0 / 25e6 * 1e3;
    assert!(
        ms >= bytes_ms && ms < 1.1 * bytes_ms,
        "{ms} ms vs {bytes_ms} ms"
    );
    // Recursive halving sends half, then a quarter: fewer bytes than the ring's three
    // quarters, over exchanges between partners.
    let forced = mpi_on_star(
        "reduce_scatter",
        "16MiB",
        "algorithm = \"recursive_halving\"\n",
    )
    .unwrap();
    assert!(forced.library.contains("(forced)"), "{}", forced.library);
    // Butterfly halves the same windows the other way round and ends with a swap between
    // mirror images (ranks 1 and 2 here): more bytes than recursive halving, which ends with
    // every block home.
    let butterfly = mpi_on_star("reduce_scatter", "16MiB", "algorithm = \"butterfly\"\n").unwrap();
    assert!(
        butterfly.time_us > forced.time_us,
        "butterfly {} us, recursive halving {} us",
        butterfly.time_us,
        forced.time_us
    );
    let e = mpi_on_star(
        "reduce_scatter",
        "16MiB",
        "algorithm = \"non_overlapping\"\n",
    )
    .unwrap_err();
    assert!(
        e.contains("non_overlapping") && e.contains("not modelled"),
        "{e}"
    );
}

#[test]
fn openmpis_exchange_modes_bound_the_median_and_the_expected_one() {
    // All_gather by recursive doubling on the star, 16 MiB: exchanges of 4 then 8 MiB. Both
    // ways at once they cost their bytes one way (12 MiB at 25 MB/s); one way after the other
    // all but the slow mode's tail twice; the expected mode lies between. The median call (the
    // default) runs slow from the first step, whose two pairs run slow 181 times in 320: the
    // slow bound.
    let in_mode = |mode: &str| {
        let extra = if mode.is_empty() {
            String::new()
        } else {
            format!("exchanges = \"{mode}\"\n")
        };
        mpi_on_star("all_gather", "16MiB", &extra).unwrap()
    };
    let time = |mode: &str| in_mode(mode).time_us / 1e3;
    let (both, expected, serial) = (time("both_ways"), time("expected"), time("one_way_first"));
    assert_eq!(time(""), serial, "the median call");
    let bytes_ms = 12.0 * 1048576.0 / 25e6 * 1e3;
    assert!(
        (both / bytes_ms - 1.0).abs() < 0.02,
        "{both} ms vs {bytes_ms} ms"
    );
    assert!(
        both < expected && expected < serial,
        "{both} {expected} {serial}"
    );
    assert!(
        (serial / (2.0 * bytes_ms) - 1.0).abs() < 0.03,
        "{serial} ms"
    );
    // A run in the median or expected mode says both bounds (the same plays as the forced
    // modes'), in its summary and on its library line; a forced mode and an algorithm without
    // exchanges (the ring) have none.
    for (mode, played) in [("", "median call"), ("expected", "expected time")] {
        let run = in_mode(mode);
        let [b, s] = run.exchange_modes_ps.expect("bounds");
        assert_eq!(
            (b, s),
            (
                in_mode("both_ways").time_ps,
                in_mode("one_way_first").time_ps
            )
        );
        assert!(
            run.library.contains("every one both ways at once") && run.library.contains(played),
            "{}",
            run.library
        );
    }
    assert_eq!(in_mode("both_ways").exchange_modes_ps, None);
    let ring = mpi_on_star("all_gather", "16MiB", "algorithm = \"ring\"\n").unwrap();
    assert_eq!(ring.exchange_modes_ps, None, "{}", ring.library);
    // OpenMPI's option only: gloo refuses it by field.
    let star = root().join("testbed/topologies/star4_200mbit.toml");
    let e = run(&star, "1MiB", "exchanges = \"both_ways\"\n").unwrap_err();
    assert!(
        e.contains("collective.exchanges") && e.contains("OpenMPI"),
        "{e}"
    );
    let e = mpi_on_star("all_gather", "1MiB", "exchanges = \"sometimes\"\n").unwrap_err();
    assert!(
        e.contains("one of median, expected, both_ways, one_way_first"),
        "{e}"
    );
}

/// A `[collective]` of `lines` on the testbed topology `stem` with its measured profile:
/// seconds.
fn on_testbed(stem: &str, lines: &str) -> f64 {
    testbed_report(stem, lines).summary.time_ps as f64 * 1e-12
}

/// The run of the `[collective]` `lines` on testbed topology `stem` with its measured profile.
fn testbed_report(stem: &str, lines: &str) -> sim::metrics::RunReport {
    let text = format!(
        "name = \"t\"\nprofile = {:?}\n[topology]\nfile = {:?}\n[collective]\n{lines}",
        root()
            .join(format!("data/profiles/testbed_{stem}.json"))
            .display()
            .to_string(),
        root()
            .join(format!("testbed/topologies/{stem}.toml"))
            .display()
            .to_string()
    );
    let s = sim::scenario::parse(&text, Path::new("t.toml"), &[]).unwrap();
    sim::scenario::run::run(&s).unwrap()
}

/// OpenMPI's ring all_gather of `bytes` on the three leaves (6 hosts, 300 Mbit/s host links,
/// 100 Mbit/s uplinks) with their measured profile: seconds.
fn ring_on_three_leaves(bytes: u64) -> f64 {
    on_testbed(
        "three_leaf_100mbit_uplinks",
        &format!("op = \"all_gather\"\nbytes = {bytes}\nlibrary = \"mpi\"\nalgorithm = \"ring\"\n"),
    )
}

#[test]
fn openmpis_tree_broadcast_serves_its_children_in_the_order_they_answer() {
    // The binomial tree on 4 ranks: the root posts its sends to rank 1 (whose subtree holds
    // rank 3) and to rank 2 at once; each data leaves once its child answered, and on the
    // star's FIFO egress the first served goes first: the other's data waits behind its head
    // H (168,411 B in the profile; captured at 256 KiB,
    // testbed_star4_200mbit.capture_mpi_bcast_binomial_256k.json, the second-served child's
    // data left 7.8 ms behind the first's: 186 KB at the link's rate). The children answered
    // in either order (rank 2 first in 10 of 12 calls there), so the run is the median of
    // both, their mean:
    // - rank 1 first has it all after (2S - H) / C and forwards it to rank 3 while rank 2
    //   receives the rest: (3S - H) / C in all;
    // - rank 2 first: rank 1 has it after 2S / C, then forwards: 3S / C.
    // The root's first send and rank 1's forward each start on an idle link and leave with
    // its shaper's burst B (1.979 ms of the rate; the 40-byte requests take 40 bytes of it).
    let c = 200e6 * 0.9564 / 8.0;
    let b = 1.979e-3 * c;
    let s = 1_048_576.0;
    let t = on_testbed(
        "star4_200mbit",
        "op = \"broadcast\"\nbytes = \"1MiB\"\nlibrary = \"mpi\"\nalgorithm = \"binomial\"\n",
    );
    let forwarder_first = (3.0 * s - 168_411.0 - 2.0 * b) / c;
    let leaf_first = (3.0 * s - 2.0 * b) / c;
    let median = (forwarder_first + leaf_first) / 2.0;
    assert!((t / median - 1.0).abs() < 0.01, "{t} s against {median} s");
}

#[test]
fn openmpis_ring_between_leaves_waits_for_answers_queued_behind_other_blocks_at_the_uplinks() {
    // Five steps of 174,760 B; each crosses a 100 Mbit/s uplink (95.7 measured) at least once:
    // 73 ms in lockstep. Between leaves an answer waits at the uplink behind another ring
    // connection's block (captured: testbed_three_leaf_100mbit_uplinks.capture_mpi_ring_1m.json),
    // and the cross-leaf connections take turns: 116-131 ms measured over four launches.
    let one_mib = ring_on_three_leaves(1_048_560);
    let lockstep = 5.0 * 174_760.0 * 8.0 / 95.66e6;
    assert!(one_mib > 1.2 * lockstep, "{one_mib} s against {lockstep} s");
    assert!(one_mib < 131e-3, "{one_mib} s");
    // Sizes nothing was built on (testbed_mpi_three_leaf_heldout.csv, two launches of five):
    // 512 KiB in 49.4 ms, 2 MiB in 213.0 ms. Since requests leave the shapers' bursts to the
    // blocks after them (2026-11-29), every block crossing an uplink that idled leaves with
    // one: 512 KiB takes 40.1 ms (alone and in the harness's loop alike), 19% under these two
    // launches and 16% under the five pooled in the dataset (47.8 ms): a miss this test keeps
    // in view, bounded, not hidden.
    for (bytes, measured, within) in [(524_280u64, 49.4e-3, 0.20), (2_097_144, 213.0e-3, 0.10)] {
        let t = ring_on_three_leaves(bytes);
        assert!(
            (t / measured - 1.0).abs() < within,
            "{bytes} B: {t} s, measured {measured} s"
        );
    }
}

/// A barrier on the testbed's star of `n` hosts, no profile (nominal links), `extra` lines in
/// its `[collective]` table: its time in seconds.
fn barrier_on_star(n: u32, extra: &str) -> f64 {
    let star = root().join("testbed/topologies/star4_200mbit.toml");
    let text = format!(
        "name = \"t\"\n[topology]\nfile = {:?}\n[collective]\nop = \"barrier\"\n{extra}",
        star.display().to_string()
    );
    let set = vec![format!("topology.generator.n={n}")];
    let s = sim::scenario::parse(&text, Path::new("t.toml"), &set).unwrap();
    sim::scenario::run::run(&s).unwrap().summary.time_ps as f64 * 1e-12
}

#[test]
fn a_barrier_takes_one_path_latency_per_hop_its_last_rank_must_pass() {
    // Empty messages cost their path latency alone: ideal's barrier (everyone tells everyone
    // at once) is one path, P; OpenMPI's the latest rank's entry plus one path per round the
    // news of it must travel.
    let p = barrier_on_star(8, "library = \"ideal\"\n");
    assert!((p - 50e-6).abs() < 1e-9, "two 25 us links: {p}");
    let mpi =
        |alg: &str| barrier_on_star(8, &format!("library = \"mpi\"\nalgorithm = \"{alg}\"\n"));
    // linear: to rank 0 and back.
    let lag = mpi("linear") - 2.0 * p;
    assert!(lag > 0.0, "the last rank enters late");
    let close = |a: f64, b: f64| (a - b).abs() < 1e-9;
    // bruck and recursive doubling: log2 8 = 3 rounds; the tree: up 3 and down 3.
    assert!(close(mpi("bruck"), lag + 3.0 * p), "{}", mpi("bruck"));
    assert!(close(mpi("recursive_doubling"), lag + 3.0 * p));
    assert!(close(mpi("tree"), lag + 6.0 * p), "{}", mpi("tree"));
    // Two laps of 8 hops, whatever the late entry (it has arrived by the time the lap does).
    assert!(mpi("double_ring") >= 16.0 * p, "{}", mpi("double_ring"));
    // The rules: linear from 4 to 7 ranks, recursive doubling on 8.
    assert!(close(
        barrier_on_star(8, "library = \"mpi\"\n"),
        lag + 3.0 * p
    ));
    assert!(close(
        barrier_on_star(5, "library = \"mpi\"\n"),
        lag + 2.0 * p
    ));
}

#[test]
fn gloos_barrier_is_a_dissemination_of_notified_empty_messages() {
    // gloo's barrier.cc: at distance 1, 2, 4 ... a receive from rank − d, a send to rank + d;
    // each send waits for its receiver's notification: two paths per round at least.
    // Rank 0 enters late (gloo's measured entry lag), and the news of it travels the rounds.
    let p = barrier_on_star(2, "library = \"ideal\"\n");
    let lag = sim::library::gloo::p2p::ENTRY_LAG.as_secs_f64();
    for (n, rounds) in [(2u32, 1.0), (4, 2.0), (5, 3.0), (8, 3.0)] {
        let t = barrier_on_star(n, "library = \"gloo\"\n");
        assert!(t >= lag + 2.0 * rounds * p, "{n} ranks: {t}");
        assert!(t < lag + 2.0 * (rounds + 1.0) * p, "{n} ranks: {t}");
    }
}

#[test]
fn a_barrier_carries_no_data_and_on_nccl_is_torchs_all_reduce_of_one_float() {
    let star = root().join("testbed/topologies/star4_200mbit.toml");
    let e = run_op(&star, &[], "barrier", "1MiB", "").unwrap_err();
    assert!(
        e.contains("collective.bytes") && e.contains("no data"),
        "{e}"
    );
    // NCCL has no barrier: ProcessGroupNCCL::barrier all-reduces a one-element float tensor.
    let hgx = root().join("topologies/hgx_h100.toml");
    let barrier = run_op(&hgx, &[], "barrier", "0B", "").unwrap();
    let one_float = run_op(&hgx, &[], "all_reduce", "4B", "").unwrap();
    assert_eq!(barrier.time_ps, one_float.time_ps);
    assert!(
        barrier
            .library
            .starts_with("a barrier as torch runs it on NCCL"),
        "{}",
        barrier.library
    );
    // Every other op still needs its buffer.
    let text = format!(
        "name = \"t\"\n[topology]\nfile = {:?}\n[collective]\nop = \"all_reduce\"\n",
        star.display().to_string()
    );
    let s = sim::scenario::parse(&text, Path::new("t.toml"), &[]).unwrap();
    let e = sim::scenario::run::run(&s).unwrap_err().to_string();
    assert!(e.contains("collective.bytes"), "{e}");
}

#[test]
fn a_gloo_broadcast_is_the_median_of_the_orders_its_root_may_serve_its_children_in() {
    // The root's payloads leave in the order its children's notifications arrive, which is
    // the order they enter: every order is played and the run reports the median one.
    let star = root().join("testbed/topologies/star4_200mbit.toml");
    let profile = format!(
        "profile = {:?}\n",
        root()
            .join("data/profiles/testbed_star4_200mbit.json")
            .display()
            .to_string()
    );
    let run = |n: u32| {
        let text = format!(
            "name = \"t\"\n{profile}[topology]\nfile = {:?}\n[collective]\nop = \"broadcast\"\nbytes = \"256KiB\"\n",
            star.display().to_string()
        );
        let set = vec![format!("topology.generator.n={n}")];
        let s = sim::scenario::parse(&text, Path::new("t.toml"), &set).unwrap();
        sim::scenario::run::run(&s).unwrap().summary
    };
    // "... the median of K plays of the ranks' entry order and the hosts' wake-ups (A-B ms)"
    let ways = |library: &str| -> (usize, f64, f64) {
        let tail = library.split("the median of ").nth(1).expect(library);
        let k: usize = tail.split(' ').next().unwrap().parse().unwrap();
        let range = tail.split('(').nth(1).unwrap().trim_end_matches(" ms)");
        let (a, b) = range.split_once('-').unwrap();
        (k, a.parse().unwrap(), b.parse().unwrap())
    };
    // Four hosts: the root's children are ranks 1 and 2, two orders, each played 51 times
    // with the profile's wake-ups drawn (at least 101 plays, every order as often).
    let four = run(4);
    let (k, fastest, slowest) = ways(&four.library);
    assert_eq!(k, 102);
    assert!(fastest < slowest, "{}", four.library);
    assert!(four
        .library
        .contains("plays of the ranks' entry order and the hosts' wake-ups"));
    let ms = four.time_ps as f64 * 1e-9;
    assert!(fastest <= ms && ms <= slowest, "{ms} {}", four.library);
    // Eight hosts: ranks 1, 2 and 4, six orders, 17 plays each.
    let eight = run(8);
    let (k, fastest, slowest) = ways(&eight.library);
    assert_eq!(k, 102);
    let ms = eight.time_ps as f64 * 1e-9;
    assert!(fastest < ms && ms < slowest, "{ms} {}", eight.library);
}

/// The star's 4 hosts all-gathering 16 MiB with gloo on the star's profile, with `set`.
fn four_hosts_all_gather_16m(set: &[&str]) -> f64 {
    on_the_star(4, "all_gather", "16MiB", set).unwrap()
}

#[test]
fn gloos_staging_copies_wait_for_the_cores_the_hosts_share() {
    // ProcessGroupGloo's all_gather copies each rank's block (4 MiB) into a fresh buffer
    // before the ring, at the profile's priming rate on one core, all four ranks at once: on 2
    // shared cores that takes twice as long as alone, on 1 core four times. Each rank copies
    // the 16 MiB out at the (faster) copy-out rate once its own ring is done; the ranks end
    // further apart than such a copy lasts, so the shared cores do not delay those.
    let profile =
        sim::profile::Profile::load(&root().join("data/profiles/testbed_star4_200mbit.json"))
            .unwrap();
    let prime = profile.host_copy_bytes_per_s().unwrap();
    let out = profile.host_copy_out_bytes_per_s().unwrap();
    assert!(
        out > 2.0 * prime,
        "the copy out to warm pages is the faster one"
    );
    let priming_secs = 4.0 * 1048576.0 / prime;
    let own = four_hosts_all_gather_16m(&["network.shared_cores=1000"]);
    let two = four_hosts_all_gather_16m(&[]);
    let one = four_hosts_all_gather_16m(&["network.shared_cores=1"]);
    let more = |t: f64| (t - own) / priming_secs;
    assert!(
        (more(two) - 1.0).abs() < 0.1,
        "2 cores: {two} against {own}: {} primings more",
        more(two)
    );
    assert!(
        (more(one) - 3.0).abs() < 0.1,
        "1 core: {one} against {own}: {} primings more",
        more(one)
    );
}

#[test]
fn a_call_timed_in_its_benchmark_loop_starts_with_the_buckets_the_last_one_left() {
    // gloo's ring all-reduce of 256 KiB on the star keeps every link busy to its end. Alone,
    // every link's bucket is full when the call starts and each rank's first segment leaves
    // with a 2 ms burst; timed as the harness times it (the call, a barrier, the call again)
    // the links have refilled only over the barrier. Measured 16.28 ms over five launches
    // (testbed_gloo_collectives.csv, 2026-11-29). Since the shapers pass one-packet messages
    // whole (each 32 KiB segment, as captured) the loop's call came 5-8% fast: the captured
    // hosts reacted a mean 0.31-0.89 ms after each segment, dtsim's wake-ups are drawn at the
    // unloaded level (0.19 ms mean; docs/testbed.md, "htb's debt, played"); since gloo's
    // messages cost the core time measured inside its collectives (2026-12-02), 8.2% fast;
    // since its ranks run their loops on their own (2026-12-02, later), 1.9% slow (16.6 ms),
    // and 14.0 ms alone.
    let all_reduce = "op = \"all_reduce\"\nbytes = \"256KiB\"\nlibrary = \"gloo\"\n";
    let alone = on_testbed("star4_200mbit", all_reduce);
    let in_loop = on_testbed(
        "star4_200mbit",
        &format!("{all_reduce}timing = \"after_barrier\"\n"),
    );
    assert!(
        in_loop > alone + 1e-3,
        "{in_loop} s against {alone} s alone"
    );
    assert!((in_loop / 16.28e-3 - 1.0).abs() < 0.05, "{in_loop} s");
    assert!((alone / 16.28e-3 - 1.0).abs() > 0.10, "{alone} s");
    // Without shapers' buckets (nominal links, no profile) nothing carries from one call to
    // the next: an ideal ring all-reduce times the same in its loop as alone.
    let star = root().join("testbed/topologies/star4_200mbit.toml");
    let alone = run(&star, "1MiB", "library = \"ideal\"\n").unwrap();
    let in_loop = run(
        &star,
        "1MiB",
        "library = \"ideal\"\ntiming = \"after_barrier\"\n",
    )
    .unwrap();
    assert_eq!(alone.time_ps, in_loop.time_ps);
    assert!(
        in_loop.library.contains("after the same call"),
        "{}",
        in_loop.library
    );
}

#[test]
fn a_call_timed_in_its_loop_reports_the_timed_calls_timeline() {
    // The summary's time and the timeline are the same call's: the last op of the timeline
    // ends at the reported time, and the first starts at or after zero (the barrier's end,
    // after the time the longest-timed rank waited there: each rank is timed from its own
    // exit of the barrier).
    let r = star_report(
        4,
        "op = \"all_reduce\"\nbytes = \"256KiB\"\nlibrary = \"gloo\"\ntiming = \"after_barrier\"\n",
        &[],
    )
    .unwrap();
    let last_us = r.timeline.iter().map(|t| t.end_us).fold(0.0, f64::max);
    let first_us = r
        .timeline
        .iter()
        .map(|t| t.start_us)
        .fold(f64::INFINITY, f64::min);
    assert!(
        (last_us - r.summary.time_us).abs() < 1e-6,
        "{last_us} against {}",
        r.summary.time_us
    );
    assert!(
        first_us >= 0.0 && first_us < 0.1 * last_us,
        "{first_us} of {last_us}"
    );
    assert!(
        r.summary.library.contains("(alone: "),
        "{}",
        r.summary.library
    );
}

#[test]
fn a_host_at_half_the_rate_doubles_gloos_ring_on_the_star() {
    // The straggler what-if, measured on 2026-11-30 (five launches of 5 pooled): gloo's ring
    // all-reduce of 4 MiB took 262.8 ms on the star at 200 Mbit/s
    // (testbed_gloo_collectives.csv) and 531.4 ms with host 3's link at 100 Mbit/s
    // (testbed_gloo_slow_host_heldout.csv), 2.02x; its all_gather of 1 MiB 36.9 and 74.7 ms,
    // 2.02x. Every step of the ring waits for the slow host's link, each with its own profile.
    for (lines, measured) in [
        ("op = \"all_reduce\"\nbytes = \"4MiB\"\n", 531.4 / 262.8),
        ("op = \"all_gather\"\nbytes = \"1MiB\"\n", 74.7 / 36.9),
    ] {
        let slower = on_testbed("star4_slow_host", lines) / on_testbed("star4_200mbit", lines);
        assert!(
            (slower / measured - 1.0).abs() < 0.03,
            "{lines}: {slower:.3}x, measured {measured:.3}x"
        );
    }
}

#[test]
fn gloos_reduce_root_gathers_once_its_writes_are_done_not_once_they_arrived() {
    // gloo's reduce of 4 MiB on 4 hosts, measured (five launches of 5 pooled): 262.4 ms on
    // the star at 200 Mbit/s (testbed_gloo_collectives.csv), 357.6 ms with host 3 at 100
    // (testbed_gloo_slow_host_heldout.csv). There the root's segments to the slow host leave
    // its link faster than the slow host's port passes them, so the root's loop ends, and it
    // posts the gather's receives, before they arrive: rank 1's chunk crosses while the
    // reduce-scatter still runs (captured, testbed_star4_slow_host.capture_gloo_reduce_4m.json).
    // Waiting for the root's last segment to arrive played 391.3 ms.
    let lines = "op = \"reduce\"\nbytes = \"4MiB\"\n";
    let star = on_testbed("star4_200mbit", lines);
    assert!((star / 0.2624 - 1.0).abs() < 0.01, "{star}");
    let slow = on_testbed("star4_slow_host", lines);
    assert!((slow / 0.3576 - 1.0).abs() < 0.06, "{slow}");
}

#[test]
fn openmpis_eager_ring_ends_one_message_before_its_steps_bytes_as_htbs_debt_says() {
    // OpenMPI's ring all-reduce of 256 KiB: each step's message (256 KiB / n, under the
    // 64 KiB eager limit and one GSO packet) passes the shaper whole, and its link pays it off
    // before the next, so a ring of 2(n - 1) steps ends 2(n - 1) - 1 messages at the payload
    // rate after it starts (captured on 6 hosts: every warm call's message left as one packet,
    // the next 1.83 ms later). Measured over five launches of 5: 15.26 ms on 5 hosts, 18.36 ms
    // on 10 (testbed_mpi_star5_200_heldout.csv, testbed_mpi_star10_heldout.csv).
    let payload_bps = 200e6 * 0.9564;
    for (n, measured_secs) in [(5u32, 15.26e-3), (10, 18.36e-3)] {
        let r = star_report(
            n,
            "op = \"all_reduce\"\nbytes = \"256KiB\"\nlibrary = \"mpi\"\n\
             algorithm = \"ring\"\ntiming = \"after_barrier\"\n",
            &[],
        )
        .unwrap();
        let secs = r.summary.time_ps as f64 * 1e-12;
        let messages = f64::from(2 * (n - 1) - 1);
        let rule_secs = messages * 262_144.0 / f64::from(n) * 8.0 / payload_bps;
        assert!(
            (secs / rule_secs - 1.0).abs() < 0.01,
            "{n} hosts: {secs} s, {rule_secs} s"
        );
        assert!(
            (secs / measured_secs - 1.0).abs() < 0.02,
            "{n} hosts: {secs} s"
        );
    }
}

#[test]
fn the_slow_hosts_first_block_waits_for_an_answer_queued_behind_its_successors_block() {
    // OpenMPI's ring all_gather of 1 MiB on the star whose host 3 runs at half the rate. The
    // ring's last rank (the slow host) enters a median 0.14 ms after the others (every
    // OpenMPI capture: `capture_exchanges.py --entry-lags`), longer than an acknowledgement's
    // round trip, so rank 0 is already sending its own first block to rank 1 when rank 3's
    // request comes, and its answer leaves behind that block: captured
    // (testbed_star4_slow_host.capture_mpi_ring_ag_1m_*.json), the slow host's first block
    // left 10.6-16.4 ms into the call. With a 50 µs lag the answer went first, by 2 µs.
    let r = testbed_report(
        "star4_slow_host",
        "op = \"all_gather\"\nbytes = \"1MiB\"\nlibrary = \"mpi\"\nalgorithm = \"ring\"\n",
    );
    let block = 262_144;
    let first_block_start_ms = |from: u32, to: u32| {
        r.rank_timeline
            .as_ref()
            .unwrap()
            .iter()
            .filter(|&&(e, _, role, peer)| e == from && role == "send" && peer == to)
            .map(|&(_, op, _, _)| &r.timeline[op as usize])
            .filter(|row| row.bytes_per_pair == block)
            .map(|row| row.start_us / 1e3)
            .fold(f64::INFINITY, f64::min)
    };
    // Rank 0's block to rank 1: 262,144 B at 200 Mbit/s, about 9 ms.
    let rank0_ms = first_block_start_ms(0, 1);
    let slow_ms = first_block_start_ms(3, 0);
    assert!(rank0_ms < 0.5, "rank 0's first block at {rank0_ms} ms");
    assert!(
        (7.0..17.0).contains(&slow_ms),
        "the slow host's first block at {slow_ms} ms"
    );
}

#[test]
fn a_benchmark_loop_reports_the_median_of_its_timed_calls_and_refuses_none() {
    // The star's 4-rank OpenMPI ring of 4 MiB: every call in its loop the same, so the
    // median of five is the one call's time; said in the run's library line.
    let ring = |calls: &str| {
        mpi_on_star(
            "all_reduce",
            "4MiB",
            &format!("algorithm = \"ring\"\ntiming = \"after_barrier\"\n{calls}"),
        )
    };
    let one = ring("").unwrap();
    let five = ring("timed_calls = 5\n").unwrap();
    assert!(
        five.library.contains("the median of 5 calls"),
        "{}",
        five.library
    );
    assert!(!one.library.contains("the median of"), "{}", one.library);
    let rel = (five.time_us / one.time_us - 1.0).abs();
    assert!(rel < 0.02, "{} against {}", five.time_us, one.time_us);
    // 1 MiB: the calls differ in the loop (the buckets each leaves the next); the line says
    // the fastest and the slowest, and the median lies between them.
    let mib = mpi_on_star(
        "all_reduce",
        "1MiB",
        "algorithm = \"ring\"\ntiming = \"after_barrier\"\ntimed_calls = 4\n",
    )
    .unwrap();
    let span = mib
        .library
        .split("the median of 4 calls (")
        .nth(1)
        .and_then(|rest| rest.split(" ms)").next())
        .unwrap_or_else(|| panic!("no span of calls in {}", mib.library));
    let ms: Vec<f64> = span.split(" to ").filter_map(|x| x.parse().ok()).collect();
    assert_eq!(ms.len(), 2, "{span}");
    let median_ms = mib.time_us / 1e3;
    assert!(
        ms[0] <= median_ms + 1e-3 && median_ms <= ms[1] + 1e-3,
        "{median_ms} ms outside {span}"
    );
    let e = ring("timed_calls = 0\n").unwrap_err();
    assert!(
        e.contains("collective.timed_calls") && e.contains("from 1 to 100"),
        "{e}"
    );
}
