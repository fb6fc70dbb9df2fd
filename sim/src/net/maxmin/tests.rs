//! Specification of max-min sharing: small systems with known rates (each sketched in ASCII,
//! flows as arrows over links), then properties of random systems.

use proptest::prelude::*;

use super::*;

const INF: f64 = f64::INFINITY;

/// A problem owned by a test: capacities, paths and caps.
#[derive(Debug, Clone)]
struct System {
    link_capacity_bps: Vec<f64>,
    flow_offsets: Vec<u32>,
    flow_links: Vec<u32>,
    flow_cap_bps: Vec<f64>,
}

impl System {
    fn new(link_capacity_bps: &[f64], flows: &[(&[u32], f64)]) -> Self {
        let mut flow_offsets = vec![0];
        let mut flow_links = Vec::new();
        let mut flow_cap_bps = Vec::new();
        for &(path, cap) in flows {
            flow_links.extend_from_slice(path);
            flow_offsets.push(flow_links.len() as u32);
            flow_cap_bps.push(cap);
        }
        System {
            link_capacity_bps: link_capacity_bps.to_vec(),
            flow_offsets,
            flow_links,
            flow_cap_bps,
        }
    }

    fn problem(&self) -> Problem<'_> {
        Problem {
            link_capacity_bps: &self.link_capacity_bps,
            flow_offsets: &self.flow_offsets,
            flow_links: &self.flow_links,
            flow_cap_bps: &self.flow_cap_bps,
        }
    }

    /// Rates from the fast solver, after checking the reference agrees bit for bit.
    fn rates(&self) -> Vec<f64> {
        let p = self.problem();
        let mut fast = vec![0.0; p.flow_count()];
        MaxMinSolver::new().solve(&p, &mut fast);
        let reference = solve_reference(&p);
        assert_eq!(
            bits(&fast),
            bits(&reference),
            "fast {fast:?} vs reference {reference:?}"
        );
        fast
    }
}

fn bits(rates: &[f64]) -> Vec<u64> {
    rates.iter().map(|r| r.to_bits()).collect()
}

fn assert_close(actual: &[f64], expected: &[f64]) {
    assert_eq!(actual.len(), expected.len());
    for (f, (&a, &e)) in actual.iter().zip(expected).enumerate() {
        assert!(
            a == e || (a - e).abs() <= 1e-12 * e.abs(),
            "flow {f}: rate {a}, expected {e} (all: {actual:?})"
        );
    }
}

/// ```text
///   f0 ──▶ ┌─────────┐
///          │ L0: 100 │      f0 = f1 = 50
///   f1 ──▶ └─────────┘
/// ```
#[test]
fn two_flows_on_one_link_get_half_each() {
    let s = System::new(&[100.0], &[(&[0], INF), (&[0], INF)]);
    assert_close(&s.rates(), &[50.0, 50.0]);
}

/// ```text
///   f0 (cap 10) ──▶ ┌─────────┐
///                   │ L0: 100 │      f0 = 10 (its cap), f1 = 90 (the rest)
///   f1 ───────────▶ └─────────┘
/// ```
#[test]
fn capped_flow_frees_capacity_for_the_others() {
    let s = System::new(&[100.0], &[(&[0], 10.0), (&[0], INF)]);
    assert_close(&s.rates(), &[10.0, 90.0]);
}

/// ```text
///   f0 (cap 60) ──▶ ┌─────────┐
///                   │ L0: 100 │      the cap (60) is above the fair share (50): it never binds
///   f1 ───────────▶ └─────────┘
/// ```
#[test]
fn cap_above_the_fair_share_does_not_bind() {
    let s = System::new(&[100.0], &[(&[0], 60.0), (&[0], INF)]);
    assert_close(&s.rates(), &[50.0, 50.0]);
}

/// Classic parking lot: one long flow crosses three equal links, one short flow per link.
/// ```text
///   f0 ═══════════════════════════════════▶
///        ┌──────┐     ┌──────┐     ┌──────┐
///        │L0: 1 │────▶│L1: 1 │────▶│L2: 1 │     every link has two flows: all get 1/2
///        └──────┘     └──────┘     └──────┘
///   f1 ───▶L0    f2 ───▶L1    f3 ───▶L2
/// ```
#[test]
fn parking_lot_gives_the_long_flow_half_of_every_link() {
    let s = System::new(
        &[1.0, 1.0, 1.0],
        &[(&[0, 1, 2], INF), (&[0], INF), (&[1], INF), (&[2], INF)],
    );
    assert_close(&s.rates(), &[0.5, 0.5, 0.5, 0.5]);
}

/// Parking lot with growing capacities: the long flow is bottlenecked on L0; each short flow
/// takes what the long flow leaves on its own link.
/// ```text
///   f0 ════════════════════════════════════▶      f0 = 10/2 = 5    (bottleneck L0)
///        ┌───────┐    ┌───────┐    ┌───────┐      f1 = 5           (bottleneck L0)
///        │L0: 10 │───▶│L1: 20 │───▶│L2: 30 │      f2 = 20 - 5 = 15 (bottleneck L1)
///        └───────┘    └───────┘    └───────┘      f3 = 30 - 5 = 25 (bottleneck L2)
///   f1 ───▶L0    f2 ───▶L1    f3 ───▶L2
/// ```
#[test]
fn flows_with_different_bottlenecks_take_what_is_left() {
    let s = System::new(
        &[10.0, 20.0, 30.0],
        &[(&[0, 1, 2], INF), (&[0], INF), (&[1], INF), (&[2], INF)],
    );
    assert_close(&s.rates(), &[5.0, 5.0, 15.0, 25.0]);
}

/// Three flows on L1, one of which is held down by a narrow L0 upstream.
/// ```text
///   f0 ──▶ L0: 6 ──▶ ┌─────────┐
///   f1 ────────────▶ │ L1: 30  │      f0 = 6 (L0), f1 = f2 = (30 - 6)/2 = 12 (L1)
///   f2 ────────────▶ └─────────┘
/// ```
#[test]
fn flow_held_down_upstream_leaves_more_downstream() {
    let s = System::new(&[6.0, 30.0], &[(&[0, 1], INF), (&[1], INF), (&[1], INF)]);
    assert_close(&s.rates(), &[6.0, 12.0, 12.0]);
}

/// ```text
///   f0: no links, cap 7      → 7
///   f1: no links, no cap     → unlimited (f64::INFINITY)
///   f2 ──▶ L0: 100           → 100
/// ```
#[test]
fn flow_without_links_gets_its_cap_or_infinity() {
    let s = System::new(&[100.0], &[(&[], 7.0), (&[], INF), (&[0], INF)]);
    assert_eq!(s.rates(), vec![7.0, INF, 100.0]);
}

/// ```text
///   f0 ──▶ L0: ∞ ──▶        → unlimited
///   f1 ──▶ L0: ∞ (cap 5)    → 5
/// ```
#[test]
fn infinite_links_limit_nothing() {
    let s = System::new(&[INF], &[(&[0], INF), (&[0], 5.0)]);
    assert_eq!(s.rates(), vec![INF, 5.0]);
}

/// Infinite links never produce NaN when unlimited flows freeze on them.
/// ```text
///   f0 ──▶ L0: ∞ ──▶ L1: ∞     → unlimited
///   f1 ──▶ L0: ∞               → unlimited
///   f2 ────────────▶ L1: ∞     → unlimited
/// ```
#[test]
fn flows_sharing_only_infinite_links_are_all_unlimited() {
    let s = System::new(&[INF, INF], &[(&[0, 1], INF), (&[0], INF), (&[1], INF)]);
    assert_eq!(s.rates(), vec![INF, INF, INF]);
}

/// ```text
///   f0 ──▶ L0: 0 ──▶ L1: 100      → 0 (a dead link stops it)
///   f1 ────────────▶ L1: 100      → 100
/// ```
#[test]
fn zero_capacity_link_gives_zero_and_leaves_the_rest() {
    let s = System::new(&[0.0, 100.0], &[(&[0, 1], INF), (&[1], INF)]);
    assert_eq!(s.rates(), vec![0.0, 100.0]);
}

/// A path that lists L0 twice is charged twice on it (documented, not meant to happen).
/// ```text
///   f0 ──▶ L0 ──▶ L0      L0: 90 carries 2·f0 + f1 = 90 → f0 = f1 = 30
///   f1 ──▶ L0
/// ```
#[test]
fn link_listed_twice_in_a_path_is_charged_twice() {
    let s = System::new(&[90.0], &[(&[0, 0], INF), (&[0], INF)]);
    assert_close(&s.rates(), &[30.0, 30.0]);
}

/// ```text
///   f0 ──▶ L2 ──▶ L0      rates 5 and 3 on L0: 20 / L2: 10   (L1 unused, L3 unused)
///   f1 ──▶ L2 (cap 3)
/// ```
#[test]
fn link_loads_sum_rates_on_used_links_in_link_order() {
    let s = System::new(&[20.0, 1.0, 10.0, 1.0], &[(&[2, 0], INF), (&[2], 3.0)]);
    let rates = s.rates();
    assert_close(&rates, &[7.0, 3.0]);
    assert_eq!(link_loads(&s.problem(), &rates), vec![(0, 7.0), (2, 10.0)]);
}

/// A solver reused across problems of different sizes answers like a fresh one: its scratch is
/// reset for every link the previous solve touched.
#[test]
fn reused_solver_answers_like_a_fresh_one() {
    let big = System::new(
        &[10.0, 20.0, 30.0, 40.0],
        &[(&[0, 1, 2, 3], INF), (&[3], 4.0), (&[2, 3], INF)],
    );
    let small = System::new(&[100.0, 50.0], &[(&[1], INF), (&[1], INF)]);
    let mut solver = MaxMinSolver::new();
    for s in [&big, &small, &big, &small] {
        let p = s.problem();
        let mut reused = vec![0.0; p.flow_count()];
        solver.solve(&p, &mut reused);
        assert_eq!(bits(&reused), bits(&s.rates()));
    }
}

#[test]
fn no_flows_is_an_empty_answer() {
    let s = System::new(&[1.0], &[]);
    assert!(s.rates().is_empty());
    let empty = Problem {
        link_capacity_bps: &[],
        flow_offsets: &[],
        flow_links: &[],
        flow_cap_bps: &[],
    };
    assert!(solve_reference(&empty).is_empty());
}

// ---------------------------------------------------------------------------------------------
// Random systems.

/// Up to 30 links with capacities drawn partly from a few round values (so fair shares tie), partly
/// at random, a few infinite; up to 60 flows over 1–6 distinct links, some capped.
fn random_system() -> impl Strategy<Value = System> {
    let capacity = prop_oneof![
        6 => prop::sample::select(vec![10.0, 40.0, 100.0, 400.0]),
        6 => 1.0..500.0_f64,
        1 => Just(INF),
    ];
    (prop::collection::vec(capacity, 1..=30)).prop_flat_map(|capacities| {
        let links = capacities.len() as u32;
        let cap = prop_oneof![
            3 => Just(INF),
            1 => prop::sample::select(vec![5.0, 10.0, 25.0]),
            1 => 0.5..300.0_f64,
        ];
        let path = prop::collection::vec(0..links, 1..=6).prop_map(|mut links| {
            let mut seen = Vec::new();
            links.retain(|l| {
                let fresh = !seen.contains(l);
                seen.push(*l);
                fresh
            });
            links
        });
        prop::collection::vec((path, cap), 0..=60).prop_map(move |flows| {
            let flows: Vec<(&[u32], f64)> = flows.iter().map(|(p, c)| (p.as_slice(), *c)).collect();
            System::new(&capacities, &flows)
        })
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    /// The fast solver matches the reference (bit for bit, which implies relative 1e-12).
    #[test]
    fn fast_solver_matches_reference(s in random_system()) {
        let p = s.problem();
        let mut fast = vec![0.0; p.flow_count()];
        MaxMinSolver::new().solve(&p, &mut fast);
        let reference = solve_reference(&p);
        prop_assert_eq!(bits(&fast), bits(&reference));
    }

    /// How links are numbered changes no rate: a copy of a system with its links numbered
    /// backwards (another rail, other ECMP choices) gets the same rates, bit for bit, in both
    /// solvers. Ties between equal shares go to the link used first, not to the lower index.
    #[test]
    fn rates_do_not_depend_on_link_numbering(s in random_system()) {
        let both = copies_of(&s, 2, &[1]);
        let p = both.problem();
        let mut fast = vec![0.0; p.flow_count()];
        MaxMinSolver::new().solve(&p, &mut fast);
        let reference = solve_reference(&p);
        // Flow f of the copy numbered forwards is 2f, of the one numbered backwards 2f + 1.
        for rates in [&fast, &reference] {
            let (forwards, backwards): (Vec<f64>, Vec<f64>) =
                rates.chunks(2).map(|pair| (pair[0], pair[1])).unzip();
            prop_assert_eq!(bits(&forwards), bits(&backwards));
        }
    }

    /// Rates are non-negative, finite unless the flow has no cap and only infinite links, no link
    /// carries more than its capacity, and no flow exceeds its cap.
    #[test]
    fn rates_are_feasible(s in random_system()) {
        let p = s.problem();
        let rates = s.rates();
        for (f, &r) in rates.iter().enumerate() {
            let unlimited = p.flow_cap_bps[f] == INF
                && p.links_of(f).iter().all(|&l| p.link_capacity_bps[l as usize] == INF);
            prop_assert!(r >= 0.0 && (r.is_finite() || unlimited), "flow {} rate {}", f, r);
            prop_assert!(r <= p.flow_cap_bps[f], "flow {} rate {} over cap {}", f, r, p.flow_cap_bps[f]);
        }
        for (link, load) in link_loads(&p, &rates) {
            let capacity = p.link_capacity_bps[link as usize];
            prop_assert!(load <= capacity * (1.0 + 1e-9), "link {} load {} > {}", link, load, capacity);
        }
    }

    /// Max-min optimality certificate: every flow is at its cap, or crosses a saturated link on
    /// which no flow gets more than it does (so raising it would need lowering a smaller flow).
    #[test]
    fn every_flow_is_capped_or_has_a_bottleneck(s in random_system()) {
        let p = s.problem();
        let rates = s.rates();
        let loads = link_loads(&p, &rates);
        let load_of = |link: u32| loads.binary_search_by_key(&link, |&(l, _)| l).map(|i| loads[i].1).unwrap_or(0.0);
        let mut max_rate_on = vec![0.0_f64; p.link_capacity_bps.len()];
        for (f, &r) in rates.iter().enumerate() {
            for &l in p.links_of(f) {
                max_rate_on[l as usize] = max_rate_on[l as usize].max(r);
            }
        }
        for (f, &r) in rates.iter().enumerate() {
            let at_cap = (r - p.flow_cap_bps[f]).abs() <= 1e-9 * p.flow_cap_bps[f];
            let bottlenecked = p.links_of(f).iter().any(|&l| {
                let capacity = p.link_capacity_bps[l as usize];
                load_of(l) >= capacity * (1.0 - 1e-9) && r >= max_rate_on[l as usize] * (1.0 - 1e-9)
            });
            prop_assert!(at_cap || bottlenecked, "flow {} (rate {}) has neither cap nor bottleneck", f, r);
        }
    }

    /// Same input, same solver or a fresh one: bit-identical output.
    #[test]
    fn solving_twice_is_bit_identical(s in random_system(), t in random_system()) {
        let p = s.problem();
        let mut solver = MaxMinSolver::new();
        let mut first = vec![0.0; p.flow_count()];
        solver.solve(&p, &mut first);
        // Something else in between, so the second solve runs on dirty scratch.
        let q = t.problem();
        let mut other = vec![0.0; q.flow_count()];
        solver.solve(&q, &mut other);
        let mut second = vec![0.0; p.flow_count()];
        solver.solve(&p, &mut second);
        prop_assert_eq!(bits(&first), bits(&second));
    }
}

// ---------------------------------------------------------------------------------------------
// The split solver: link-disjoint parts solved apart, each distinct part once.

/// `copies` copies of `s` side by side, copy c on links `c * L + l` (L = `s`'s link count),
/// except that copies listed in `reversed` number their links backwards (`c * L + L - 1 - l`);
/// flows interleaved copy by copy (flow f of every copy, then flow f + 1).
fn copies_of(s: &System, copies: u32, reversed: &[u32]) -> System {
    let links = s.link_capacity_bps.len() as u32;
    let mut capacity = vec![0.0; (links * copies) as usize];
    for c in 0..copies {
        for l in 0..links {
            let to = if reversed.contains(&c) {
                links - 1 - l
            } else {
                l
            };
            capacity[(c * links + to) as usize] = s.link_capacity_bps[l as usize];
        }
    }
    let p = s.problem();
    let mut paths = Vec::new();
    for f in 0..p.flow_count() {
        for c in 0..copies {
            let path: Vec<u32> = p
                .links_of(f)
                .iter()
                .map(|&l| {
                    c * links
                        + if reversed.contains(&c) {
                            links - 1 - l
                        } else {
                            l
                        }
                })
                .collect();
            paths.push((path, p.flow_cap_bps[f]));
        }
    }
    let flows: Vec<(&[u32], f64)> = paths.iter().map(|(p, c)| (p.as_slice(), *c)).collect();
    System::new(&capacity, &flows)
}

/// Rates from the split solver, after checking they are the fast solver's bit for bit.
fn split_rates(solver: &mut SplitSolver, s: &System) -> Vec<f64> {
    let p = s.problem();
    let mut split = vec![0.0; p.flow_count()];
    solver.solve(&p, &mut split);
    let mut whole = vec![0.0; p.flow_count()];
    MaxMinSolver::new().solve(&p, &mut whole);
    assert_eq!(
        bits(&split),
        bits(&whole),
        "split {split:?} vs whole {whole:?}"
    );
    split
}

/// One rail:
/// ```text
///   f0 ──▶ ┌─────────┐ ──▶ ┌────────┐ ──▶      f2 capped at 20: L1 leaves 40 to f0,
///   f1 ──▶ │ L0: 100 │     │ L1: 60 │          L0 leaves 60 to f1
///          └─────────┘ f2 ─▶ (cap 20)
/// ```
fn rail() -> System {
    System::new(&[100.0, 60.0], &[(&[0, 1], INF), (&[0], INF), (&[1], 20.0)])
}

#[test]
fn eight_copies_of_one_rail_are_solved_once() {
    let rails = copies_of(&rail(), 8, &[]);
    let mut solver = SplitSolver::new().splitting_every_problem();
    let rates = split_rates(&mut solver, &rails);
    // Flows are interleaved rail by rail: f0 of every rail, then f1, then f2.
    assert_close(&rates[..8], &[40.0; 8]);
    assert_close(&rates[8..16], &[60.0; 8]);
    assert_close(&rates[16..], &[20.0; 8]);
    // The first part of a shape is solved unencoded (most shapes come once), the second is
    // solved and kept, the six after it take its rates.
    assert_eq!((solver.parts_solved, solver.parts_reused), (2, 6));
    // The same parts in the next problem are not solved again.
    split_rates(&mut solver, &rails);
    assert_eq!((solver.parts_solved, solver.parts_reused), (2, 14));
}

#[test]
fn a_copy_whose_links_are_numbered_in_another_order_takes_the_same_rates() {
    // Ties go to the link used first, not to the lower index: how a copy's links are numbered
    // changes nothing in its solve (split_rates checks the rates against the reference).
    let rails = copies_of(&rail(), 4, &[2]);
    let mut solver = SplitSolver::new().splitting_every_problem();
    split_rates(&mut solver, &rails);
    // Rail 0 (first of its shape) and rail 1 (kept) are solved, rails 2 and 3 are rail 1's.
    assert_eq!((solver.parts_solved, solver.parts_reused), (2, 2));
}

#[test]
fn a_flow_across_two_rails_joins_them_into_one_part() {
    let mut rails = copies_of(&rail(), 3, &[]);
    // A flow over rail 0's L1 and rail 1's L0 (link 2): rails 0 and 1 are one part, rail 2
    // another, and neither is a copy of the other.
    rails.flow_links.extend_from_slice(&[1, 2]);
    rails.flow_offsets.push(rails.flow_links.len() as u32);
    rails.flow_cap_bps.push(INF);
    let mut solver = SplitSolver::new().splitting_every_problem();
    split_rates(&mut solver, &rails);
    assert_eq!((solver.parts_solved, solver.parts_reused), (2, 0));
}

/// A random system in 1 to 4 copies, some numbered backwards, with a few flows that join
/// copies.
fn random_copies() -> impl Strategy<Value = System> {
    (
        random_system(),
        1..=4_u32,
        prop::collection::vec(0..4_u32, 0..2),
        0..3_usize,
    )
        .prop_map(|(s, copies, reversed, bridges)| {
            let mut c = copies_of(&s, copies, &reversed);
            let links = c.link_capacity_bps.len() as u32;
            for b in 0..bridges as u32 {
                let (x, y) = ((b * 7) % links, (b * 13 + links / 2) % links);
                if x != y {
                    c.flow_links.extend_from_slice(&[x, y]);
                    c.flow_offsets.push(c.flow_links.len() as u32);
                    c.flow_cap_bps.push(INF);
                }
            }
            c
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// Split or whole, seen before or not: the same rates, bit for bit.
    #[test]
    fn the_split_solver_gives_the_fast_solvers_rates(
        systems in prop::collection::vec(random_copies(), 1..=3)
    ) {
        let mut solver = SplitSolver::new().splitting_every_problem();
        for s in &systems {
            split_rates(&mut solver, s);
            // Again: now every part has been seen.
            split_rates(&mut solver, s);
        }
    }
}

/// `s` without flow `f`, and the links that flow crossed flagged as changed.
fn without_flow(s: &System, f: usize) -> (System, Vec<bool>) {
    let p = s.problem();
    let mut changed = vec![false; s.link_capacity_bps.len()];
    for &l in p.links_of(f) {
        changed[l as usize] = true;
    }
    let paths: Vec<(&[u32], f64)> = (0..p.flow_count())
        .filter(|&g| g != f)
        .map(|g| (p.links_of(g), p.flow_cap_bps[g]))
        .collect();
    (System::new(&s.link_capacity_bps, &paths), changed)
}

/// `solve_changed` on `after` with the rates `before` had (flow `removed` gone), checked bit
/// for bit against the fast solver on `after`.
fn changed_rates(
    solver: &mut SplitSolver,
    before: &[f64],
    removed: usize,
    after: &System,
    changed: &[bool],
) -> Vec<f64> {
    let previous: Vec<f64> = before
        .iter()
        .enumerate()
        .filter(|&(g, _)| g != removed)
        .map(|(_, &r)| r)
        .collect();
    let p = after.problem();
    let mut rates = vec![0.0; p.flow_count()];
    solver.solve_changed(&p, &previous, changed, &mut rates);
    let mut whole = vec![0.0; p.flow_count()];
    MaxMinSolver::new().solve(&p, &mut whole);
    assert_eq!(bits(&rates), bits(&whole), "{rates:?} vs {whole:?}");
    rates
}

#[test]
fn parts_that_cross_no_changed_link_keep_their_rates() {
    // Three rails; rail 1's f1 (flow 4: f0s are 0-2, f1s 3-5) ends. Rail 1's f0 now has L0 to
    // itself but L1 still holds it at 40 beside f2's 20: 40, 20; rails 0 and 2 keep theirs.
    let rails = copies_of(&rail(), 3, &[]);
    let mut solver = SplitSolver::new().splitting_every_problem();
    let before = split_rates(&mut solver, &rails);
    let (after, changed) = without_flow(&rails, 4);
    let kept_before = solver.parts_kept;
    let rates = changed_rates(&mut solver, &before, 4, &after, &changed);
    assert_close(&rates, &[40.0, 40.0, 40.0, 60.0, 60.0, 20.0, 20.0, 20.0]);
    assert_eq!(solver.parts_kept - kept_before, 2);
}

#[test]
fn a_part_with_a_new_flow_is_solved_though_no_link_of_it_changed() {
    // Nothing flagged, but rail 2's f1 has no previous rate (it started since): its part is
    // solved, rails 0 and 1 keep theirs.
    let rails = copies_of(&rail(), 3, &[]);
    let mut solver = SplitSolver::new().splitting_every_problem();
    let mut previous = split_rates(&mut solver, &rails);
    previous[5] = f64::NAN;
    let p = rails.problem();
    let mut rates = vec![0.0; p.flow_count()];
    solver.solve_changed(&p, &previous, &[false; 6], &mut rates);
    assert_close(&rates[3..6], &[60.0; 3]);
    assert_eq!(solver.parts_kept, 2);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// A flow ends, its links are flagged: keeping the other parts' rates gives what solving
    /// the whole problem again gives, bit for bit.
    #[test]
    fn keeping_unchanged_parts_gives_the_fast_solvers_rates(
        s in random_copies(), pick in any::<prop::sample::Index>()
    ) {
        let flows = s.problem().flow_count();
        prop_assume!(flows > 1);
        let removed = pick.index(flows);
        let mut solver = SplitSolver::new().splitting_every_problem();
        let before = split_rates(&mut solver, &s);
        let (after, changed) = without_flow(&s, removed);
        changed_rates(&mut solver, &before, removed, &after, &changed);
    }
}
