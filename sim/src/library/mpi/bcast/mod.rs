//! OpenMPI 4.1's broadcast: `coll/tuned`'s fixed rules and the `coll/base` trees they pick.
//! Facts read from v4.1.4's sources (no code taken):
//!
//! - **Choice** (`ompi_coll_tuned_bcast_intra_dec_fixed`): by communicator size and message
//!   size, one of 1 basic_linear, 2 chain, 3 pipeline, 4 split_binary_tree, 5 binary_tree,
//!   6 binomial, 7 knomial, 8 scatter_allgather, 9 scatter_allgather_ring ([`bcast_fixed`]).
//!   The rules pass no segment size and no fan-out: every tree runs unsegmented, and the
//!   chain's fan-out of 0 is forced to 1 (`build_chain`), the pipeline. A forced algorithm
//!   (`--mca coll_tuned_bcast_algorithm N`) runs with the MCA defaults: no segmentation, chain
//!   fan-out 4 (`coll_tuned_init_chain_fanout`), k-nomial radix 4.
//! - **Unsegmented trees** (`bcast_intra_generic` with one segment): the root posts its sends
//!   to all its children at once, one after the other in tree order, and waits for them; every
//!   other rank receives the whole message from its parent, then posts it to its children the
//!   same way. Each send is its own ob1 message (eager, or request, answer and data; [`super`]), so
//!   on a FIFO egress queue (a profile's FIFO head) the data of the child served first leads and
//!   the others wait behind its head, as captured on the testbed
//!   (`testbed_star4_200mbit.capture_mpi_bcast_binomial_256k.json`: the second child's data
//!   left 7.8 ms, 186 KB at the link's rate, behind the first's); without one, a parent's
//!   children share its uplink. basic_linear is the tree whose root has every other rank as a
//!   child.
//! - **Who is served first.** Eager sends leave in posting order. A rendezvous data leaves
//!   once its child answered, and the root's children answer as they enter the call: in that
//!   capture the leaf (rank 2) answered first in 10 of 12 calls and got its data first, the
//!   posted-first rank 1 (which forwards to rank 3) in 2; on the three leaves
//!   (`testbed_three_leaf_100mbit_uplinks.capture_mpi_bcast_binomial_{256k,1m}.json`) rank 1
//!   answered first in 24 of 32. So a rendezvous tree's plan carries every order of the root's
//!   children ([`entry_orders`]) and a run reports the median. A rank that forwards sends
//!   after its children have long answered: posting order.
//! - **Trees** (`coll_base_topo.c`), over ranks shifted so the root is 0: the fan-out tree
//!   (binary: children of the shifted rank s on level l are s + k·fanoutˡ, k = 1..fanout), the
//!   binomial tree (children s ^ 2ʲ for every power of two above s's highest bit), the k-nomial
//!   tree, and chains (fan-out f: f chains of consecutive ranks hanging from the root, the
//!   first (n − 1) mod f of them one longer).
//!
//! - **Scatter-allgather** (`bcast_intra_scatter_allgather`, `..._ring`): the root's vector in
//!   blocks of ⌈count / n⌉ elements scattered down a binomial tree (each rank sends its
//!   subtrees their blocks, one blocking send after the other), then all-gathered by recursive
//!   doubling (with recursive halving passing blocks to the ranks whose partner subtree is
//!   incomplete) or by a ring ([`scatter_allgather`]). Below one element per rank both fall
//!   back to basic_linear. The fixed rules pick scatter_allgather for 16-31 ranks from 1 MiB
//!   and for 1,024 ranks or more at the largest sizes.
//!
//! - **split_binary_tree** (`bcast_intra_split_bintree`): halves of the message down the binary
//!   tree's two subtrees, then swapped between neighbours ([`split_binary_tree`]); the fixed
//!   rules pick it for 256-1,023 ranks at 16-32 KiB.

use super::Algorithm as _;
use super::{
    exchange_in_step, is_eager, message, oriented_ways, CallExchanges, LibraryError,
    LibraryOptions, Partners, Plan, Request, StepPairs, System, ELEMENT_BYTES,
};
use crate::collective::{Collective, Endpoint, OpId, Phase, Schedule};
use crate::library::entry_orders::entry_orders;

algorithms! {
    /// `coll_tuned_bcast_algorithm` numbers and names.
    BcastAlg,
    "broadcast",
    {
        BasicLinear = 1 => "basic_linear",
        Chain = 2 => "chain",
        Pipeline = 3 => "pipeline",
        SplitBinaryTree = 4 => "split_binary_tree",
        BinaryTree = 5 => "binary_tree",
        Binomial = 6 => "binomial",
        Knomial = 7 => "knomial",
        ScatterAllgather = 8 => "scatter_allgather",
        ScatterAllgatherRing = 9 => "scatter_allgather_ring",
    }
}

/// OpenMPI 4.1's fixed broadcast rule for `bytes` on `comm_size` ranks.
pub fn bcast_fixed(comm_size: u32, bytes: u64) -> BcastAlg {
    use BcastAlg::*;
    let rules: &[super::Rule<BcastAlg>] = &[
        (
            4,
            &[
                (32, Pipeline),
                (256, BinaryTree),
                (512, Pipeline),
                (1024, Knomial),
                (32768, BasicLinear),
                (131072, BinaryTree),
                (262144, Chain),
                (524288, BasicLinear),
                (1048576, Binomial),
            ],
            BinaryTree,
        ),
        (
            8,
            &[
                (64, BinaryTree),
                (128, Binomial),
                (2048, BinaryTree),
                (8192, Binomial),
                (1048576, BasicLinear),
            ],
            Chain,
        ),
        (
            16,
            &[
                (8, Knomial),
                (64, BinaryTree),
                (4096, Knomial),
                (16384, BinaryTree),
                (32768, Binomial),
            ],
            BasicLinear,
        ),
        (
            32,
            &[(4096, Knomial), (1048576, Binomial)],
            ScatterAllgather,
        ),
        (64, &[(2048, Binomial)], Knomial),
        (128, &[], Knomial),
        (
            256,
            &[
                (2, Binomial),
                (16384, BinaryTree),
                (32768, BasicLinear),
                (65536, BinaryTree),
            ],
            Knomial,
        ),
        (1024, &[(16384, Knomial), (32768, SplitBinaryTree)], Knomial),
        (2048, &[(524288, Knomial)], ScatterAllgather),
        (4096, &[(262144, Knomial)], ScatterAllgather),
        (
            u32::MAX,
            &[(8192, Knomial), (16384, BinaryTree), (262144, Knomial)],
            ScatterAllgather,
        ),
    ];
    super::by_rules(rules, comm_size, bytes)
}

/// The MCA defaults a forced algorithm runs with: chain fan-out and k-nomial radix.
const FORCED_CHAIN_FANOUT: u32 = 4;
const KNOMIAL_RADIX: u32 = 4;

/// The broadcast OpenMPI runs for `req` on `sys` (options checked by [`super::plan`]).
pub(super) fn plan(
    req: &Request,
    sys: &System,
    opts: &LibraryOptions,
) -> Result<Plan, LibraryError> {
    let n = sys.ranks;
    let (alg, how) = super::chosen(opts, || bcast_fixed(n, req.bytes))?;
    // The fixed rules pass fan-out 0, which build_chain makes 1; forced, the MCA default.
    let chain_fanout = if opts.algorithm.is_some() {
        FORCED_CHAIN_FANOUT
    } else {
        1
    };
    let root = req.root;
    let count = req.bytes / ELEMENT_BYTES;
    // The scatter-allgather broadcasts fall back to basic_linear below one element per rank,
    // as the source does.
    let fallback = matches!(
        alg,
        BcastAlg::ScatterAllgather | BcastAlg::ScatterAllgatherRing
    ) && count < u64::from(n);
    let name = if fallback {
        format!("{}, basic_linear below one element per rank", alg.as_str())
    } else {
        alg.as_str().to_string()
    };
    let new_schedule = || Schedule::new(Collective::Broadcast, format!("mpi {name}"), n, req.bytes);
    let mut s = new_schedule();
    let mut alternatives = Vec::new();
    // Whose alternatives are the ways its exchanges go, not the root's entry orders.
    let mut oriented = false;
    if n > 1 && req.bytes > 0 {
        // The trees, or the algorithms that build their own schedule.
        let children = match alg {
            _ if fallback => Some(linear(n, root)),
            BcastAlg::BasicLinear => Some(linear(n, root)),
            BcastAlg::Chain => Some(chain(n, root, chain_fanout)),
            BcastAlg::Pipeline => Some(chain(n, root, 1)),
            BcastAlg::BinaryTree => Some(fanout_tree(n, root, 2)),
            BcastAlg::Binomial => Some(binomial_tree(n, root)),
            BcastAlg::Knomial => Some(knomial_tree(n, root, KNOMIAL_RADIX)),
            BcastAlg::SplitBinaryTree => {
                (s, alternatives) = oriented_ways(opts.mpi_exchanges, n, |x| {
                    let mut s = new_schedule();
                    split_binary_tree(&mut s, n, root, count, x);
                    s
                });
                oriented = true;
                None
            }
            BcastAlg::ScatterAllgather | BcastAlg::ScatterAllgatherRing => {
                let ring = alg == BcastAlg::ScatterAllgatherRing;
                (s, alternatives) = oriented_ways(opts.mpi_exchanges, n, |x| {
                    let mut s = new_schedule();
                    scatter_allgather(&mut s, n, root, count, ring, x);
                    s
                });
                oriented = true;
                None
            }
        };
        if let Some(mut children) = children {
            tree_bcast(&mut s, &children, root, req.bytes);
            // Rendezvous sends leave in the order the root's children answer: every order.
            if !is_eager(req.bytes) {
                let posted = children[root as usize].clone();
                for order in entry_orders(&posted).into_iter().skip(1) {
                    children[root as usize] = order;
                    let mut alt = new_schedule();
                    tree_bcast(&mut alt, &children, root, req.bytes);
                    alternatives.push(alt);
                }
            }
        }
    }
    let decision = format!("OpenMPI 4.1 broadcast {name} ({how})");
    Ok(if oriented {
        Plan::with_orientations(s, decision, alternatives)
    } else {
        Plan::with_entry_orders(s, decision, alternatives)
    })
}

/// split_binary_tree (`bcast_intra_split_bintree`, unsegmented as the rules and the MCA
/// defaults run it) of `count` elements: the binary tree's left subtree (odd shifted ranks)
/// gets the first half (⌈count / 2⌉), the right one the rest; the root sends the left child its
/// half, then the right child, each node forwards its half to its children one blocking send
/// after the other; then every left node swaps halves with the right node after it (shifted
/// s and s + 1). With an even rank count the last rank has no partner and the root sends it
/// the right half. A vector of one element runs the chain ([`chain`], fan-out 1).
fn split_binary_tree(s: &mut Schedule, n: u32, root: u32, count: u64, x: &CallExchanges) {
    let halves = [count.div_ceil(2), count / 2];
    if halves[1] == 0 {
        return tree_bcast(s, &chain(n, root, 1), root, count * ELEMENT_BYTES);
    }
    let bytes = |h: usize| halves[h] * ELEMENT_BYTES;
    // Left (0) for odd shifted ranks, right (1) for even ones and the root.
    let side = |r: u32| ((shift(r, root, n) + 1) % 2) as usize;
    let tree = fanout_tree(n, root, 2);
    let mut ready: Vec<Vec<OpId>> = vec![Vec::new(); n as usize];
    let mut frontier = vec![root];
    let mut depth = 0;
    while !frontier.is_empty() {
        let mut next = Vec::new();
        for parent in frontier {
            let mut deps = ready[parent as usize].clone();
            for (i, &child) in tree[parent as usize].iter().enumerate() {
                // The root sends each child its own half; the others forward theirs.
                let h = if parent == root { i } else { side(parent) };
                let op = message(
                    s,
                    &[(parent, child)],
                    bytes(h),
                    deps.clone(),
                    Phase::Broadcast,
                    depth,
                );
                ready[child as usize] = vec![op];
                if !is_eager(bytes(h)) {
                    deps = vec![op];
                }
                next.push(child);
            }
            ready[parent as usize] = deps;
        }
        frontier = next;
        depth += 1;
    }
    // Left nodes and the right node after them swap halves.
    let last = unshift(n - 1, root, n);
    let swapping: Vec<Endpoint> = (0..n)
        .filter(|&r| r != root && side(r) == 0)
        .filter(|&left| !(n.is_multiple_of(2) && left == last))
        .collect();
    for &left in &swapping {
        let right = unshift(shift(left, root, n) + 1, root, n);
        let mut deps = ready[left as usize].clone();
        deps.extend(ready[right as usize].iter().copied());
        // The halves differ by at most an element: both ways as the larger. The partners come
        // from waiting on the tree's messages.
        exchange_in_step(
            s,
            (
                &[(left, right)],
                StepPairs::all(Partners::Polling, swapping.len() as u32),
            ),
            bytes(0),
            n,
            x,
            deps,
            Phase::Broadcast,
            depth,
        );
    }
    if n.is_multiple_of(2) {
        let deps = ready[root as usize].clone();
        message(s, &[(root, last)], bytes(1), deps, Phase::Broadcast, depth);
    }
}

/// Elements of block `b` (of `sc` each) of a vector of `count`: the last ones partial or empty.
fn block_elems(count: u64, sc: u64, b: u32) -> u64 {
    count.saturating_sub(u64::from(b) * sc).min(sc)
}

/// Scatter by a binomial tree, then all-gather by recursive doubling (`ring`: false) or a ring,
/// of `count` elements (at least one per rank) from `root`; ranks shifted so the root is 0.
///
/// Scatter: the shifted rank v receives from v − lowbit(v), then sends its subtrees at
/// distance lowbit(v)/2, /4 ... 1 their blocks (blocks of ⌈count / n⌉ elements, by shifted
/// rank), one blocking send after the other. Recursive doubling: at distance 1, 2, 4 ... v
/// and v ^ d swap what each holds (their aligned runs of blocks); where v's partner subtree is
/// incomplete (n not a power of two), the ranks that got it pass what they received down to
/// those of their own subtree that had no partner, by recursive halving. Ring: n − 1 steps of
/// one block to the next rank. Every exchange runs as the testbed's do ([`exchange`]).
fn scatter_allgather(
    s: &mut Schedule,
    n: u32,
    root: u32,
    count: u64,
    ring: bool,
    x: &CallExchanges,
) {
    let sc = count.div_ceil(u64::from(n));
    let real = |v: u32| unshift(v, root, n);
    let top = n.next_power_of_two();
    // Per shifted rank: elements held, and what its next call waits for.
    let mut held = vec![0u64; n as usize];
    let mut ready: Vec<Vec<OpId>> = vec![Vec::new(); n as usize];
    held[0] = count;
    // Parents before their children: a child has one set bit more than its parent.
    let mut order: Vec<u32> = (0..n).collect();
    order.sort_by_key(|v| (v.count_ones(), *v));
    for v in order {
        let start = if v == 0 { top } else { 1 << v.trailing_zeros() };
        let mut mask = start >> 1;
        while mask > 0 {
            let c = v + mask;
            let sent = held[v as usize].saturating_sub(sc * u64::from(mask));
            if c < n && sent > 0 {
                let bytes = sent * ELEMENT_BYTES;
                let pair = [(real(v), real(c))];
                let deps = ready[v as usize].clone();
                let op = message(s, &pair, bytes, deps, Phase::Broadcast, 0);
                held[c as usize] = sent;
                held[v as usize] -= sent;
                ready[c as usize] = vec![op];
                // A blocking send: a rendezvous returns once its data is out, an eager one
                // at once.
                if !is_eager(bytes) {
                    ready[v as usize] = vec![op];
                }
            }
            mask >>= 1;
        }
    }
    if ring {
        ring_allgather(s, n, count, sc, &real, ready);
    } else {
        doubling_allgather(s, n, count, sc, &real, ready, x);
    }
}

/// The scatter-allgather broadcast's recursive doubling (see [`scatter_allgather`]).
fn doubling_allgather(
    s: &mut Schedule,
    n: u32,
    count: u64,
    sc: u64,
    real: &dyn Fn(u32) -> Endpoint,
    mut ready: Vec<Vec<OpId>>,
    x: &CallExchanges,
) {
    let mut held: Vec<u64> = (0..n).map(|v| block_elems(count, sc, v)).collect();
    // What each rank received last, which it passes on to those without a partner.
    let mut received = vec![0u64; n as usize];
    let (mut mask, mut step) = (1u32, 1u32);
    while mask < n {
        let before = held.clone();
        let lower: Vec<u32> = (0..n).filter(|v| v & mask == 0 && (v ^ mask) < n).collect();
        // The step's pairs that exchange (both hold something): a step as slow as its slowest.
        let exchanging = lower
            .iter()
            .filter(|&&v| before[v as usize].min(before[(v ^ mask) as usize]) > 0)
            .count() as u32;
        for v in lower {
            let w = v ^ mask;
            let (a, b) = (before[v as usize], before[w as usize]);
            let mut deps = ready[v as usize].clone();
            deps.extend(ready[w as usize].iter().copied());
            let common = a.min(b);
            let pair = [(real(v), real(w))];
            let mut done = if common > 0 {
                // The partners come from waiting on the scatter's or the last step's messages.
                exchange_in_step(
                    s,
                    (&pair, StepPairs::all(Partners::Polling, exchanging)),
                    common * ELEMENT_BYTES,
                    n,
                    x,
                    deps.clone(),
                    Phase::AllGather,
                    step,
                )
            } else {
                super::join(s, deps, Phase::AllGather, step)
            };
            if a != b {
                let way = if a > b {
                    pair.to_vec()
                } else {
                    super::reversed(&pair)
                };
                let surplus = (a.max(b) - common) * ELEMENT_BYTES;
                done = message(s, &way, surplus, vec![done], Phase::AllGather, step);
            }
            ready[v as usize] = vec![done];
            ready[w as usize] = vec![done];
            held[v as usize] += b;
            held[w as usize] += a;
            received[v as usize] = b;
            received[w as usize] = a;
        }
        // Incomplete partner subtrees: pass what came across down to the ranks without one.
        let mut rh = mask >> 1;
        while rh > 0 {
            let mut sends: Vec<(u32, u32)> = Vec::new();
            for v in (0..n).filter(|v| v & mask == 0) {
                let own_root = v & !(mask - 1);
                if own_root + 2 * mask <= n {
                    continue; // the partner subtree is whole
                }
                let with_data = i64::from(n) - i64::from(own_root) - i64::from(mask);
                let w = v ^ rh;
                let sub_root = i64::from(v & !(2 * rh - 1));
                if w > v
                    && i64::from(v) < sub_root + with_data
                    && i64::from(w) >= sub_root + with_data
                {
                    sends.push((v, w));
                }
            }
            for (v, w) in sends {
                let elems = received[v as usize];
                let mut deps = ready[v as usize].clone();
                deps.extend(ready[w as usize].iter().copied());
                let op = message(
                    s,
                    &[(real(v), real(w))],
                    elems * ELEMENT_BYTES,
                    deps,
                    Phase::AllGather,
                    step,
                );
                ready[v as usize] = vec![op];
                ready[w as usize] = vec![op];
                received[w as usize] = elems;
                held[w as usize] += elems;
            }
            rh >>= 1;
        }
        mask <<= 1;
        step += 1;
    }
    debug_assert!(held.iter().all(|&h| h == count), "{held:?} of {count}");
}

/// The scatter-allgather broadcast's ring (see [`scatter_allgather`]): at step i the shifted
/// rank v sends block v − i + 1 to v + 1 and receives block v − i from v − 1, a receive posted
/// and then a blocking send; it moves on once both are done.
fn ring_allgather(
    s: &mut Schedule,
    n: u32,
    count: u64,
    sc: u64,
    real: &dyn Fn(u32) -> Endpoint,
    mut ready: Vec<Vec<OpId>>,
) {
    for i in 1..n {
        let mut sent = Vec::with_capacity(n as usize);
        for v in 0..n {
            let block = (v + n - (i - 1)) % n;
            let bytes = block_elems(count, sc, block) * ELEMENT_BYTES;
            let right = (v + 1) % n;
            let mut deps = ready[v as usize].clone();
            deps.extend(ready[right as usize].iter().copied());
            sent.push(if bytes > 0 {
                message(
                    s,
                    &[(real(v), real(right))],
                    bytes,
                    deps,
                    Phase::AllGather,
                    i,
                )
            } else {
                super::join(s, deps, Phase::AllGather, i)
            });
        }
        for v in 0..n {
            let left = (v + n - 1) % n;
            ready[v as usize] = vec![sent[v as usize], sent[left as usize]];
        }
    }
}

/// An unsegmented broadcast down `children` (per rank, in the order it posts its sends):
/// every rank posts the whole message to each of its children, in order, once it has it.
fn tree_bcast(s: &mut Schedule, children: &[Vec<u32>], root: u32, bytes: u64) {
    let mut frontier: Vec<(u32, Option<OpId>)> = vec![(root, None)];
    let mut depth = 0;
    while !frontier.is_empty() {
        let mut next = Vec::new();
        for (parent, got) in frontier {
            let kids = &children[parent as usize];
            if kids.is_empty() {
                continue;
            }
            for &c in kids {
                let sent = message(
                    s,
                    &[(parent, c)],
                    bytes,
                    got.into_iter().collect(),
                    Phase::Broadcast,
                    depth,
                );
                next.push((c, Some(sent)));
            }
        }
        frontier = next;
        depth += 1;
    }
}

/// basic_linear's tree: the root's children are every other rank.
fn linear(n: u32, root: u32) -> Vec<Vec<u32>> {
    (0..n)
        .map(|r| {
            if r == root {
                (0..n).filter(|&c| c != root).collect()
            } else {
                Vec::new()
            }
        })
        .collect()
}

/// Ranks shifted so that `root` is 0, and back.
fn shift(r: u32, root: u32, n: u32) -> u32 {
    (r + n - root) % n
}
fn unshift(v: u32, root: u32, n: u32) -> u32 {
    (v + root) % n
}

/// `build_tree(fanout)`: levels of fanoutˡ shifted ranks; the children of shifted rank s on
/// level l are s + k·fanoutˡ for k = 1..=fanout.
pub(super) fn fanout_tree(n: u32, root: u32, fanout: u32) -> Vec<Vec<u32>> {
    let fanout = u64::from(fanout.max(1));
    (0..n)
        .map(|r| {
            let s = u64::from(shift(r, root, n));
            // The level of s: the first l with 1 + f + ... + fˡ > s.
            let (mut level_size, mut up_to) = (1u64, 1u64);
            while up_to <= s {
                level_size *= fanout;
                up_to += level_size;
            }
            (1..=fanout)
                .map(|k| s + k * level_size)
                .take_while(|&c| c < u64::from(n))
                .map(|c| unshift(c as u32, root, n))
                .collect()
        })
        .collect()
}

/// `build_bmtree`: the children of shifted rank v are v ^ 2ʲ for every power of two above v's
/// highest set bit (1, 2, 4, ... for the root), below n.
pub(super) fn binomial_tree(n: u32, root: u32) -> Vec<Vec<u32>> {
    (0..n)
        .map(|r| {
            let v = shift(r, root, n);
            let mut mask = if v == 0 {
                1
            } else {
                1u64 << (32 - v.leading_zeros())
            };
            let mut kids = Vec::new();
            while mask < u64::from(n) {
                let c = u64::from(v) ^ mask;
                if c >= u64::from(n) {
                    break;
                }
                kids.push(unshift(c as u32, root, n));
                mask <<= 1;
            }
            kids
        })
        .collect()
}

/// `build_kmtree(radix)`: shifted rank v's children are v + m·k (k = 1..radix) for m the
/// powers of radix below v's own position, largest first.
pub(super) fn knomial_tree(n: u32, root: u32, radix: u32) -> Vec<Vec<u32>> {
    let radix = u64::from(radix.max(2));
    (0..n)
        .map(|r| {
            let v = u64::from(shift(r, root, n));
            let mut mask = 1u64;
            while mask < u64::from(n) {
                if v % (radix * mask) != 0 {
                    break;
                }
                mask *= radix;
            }
            mask /= radix;
            let mut kids = Vec::new();
            while mask > 0 {
                for k in 1..radix {
                    let c = v + mask * k;
                    if c < u64::from(n) {
                        kids.push(unshift(c as u32, root, n));
                    }
                }
                mask /= radix;
            }
            kids
        })
        .collect()
}

/// `build_chain(fanout)`: `fanout` chains of consecutive shifted ranks hang from the root,
/// the first (n − 1) mod fanout of them one rank longer.
pub(super) fn chain(n: u32, root: u32, fanout: u32) -> Vec<Vec<u32>> {
    let mut kids = vec![Vec::new(); n as usize];
    if n < 2 {
        return kids;
    }
    let others = n - 1;
    let fanout = fanout.clamp(1, others);
    let (len, longer) = (others / fanout, others % fanout);
    let mut head = 1;
    for c in 0..fanout {
        let this_len = len + u32::from(c < longer);
        if this_len == 0 {
            continue;
        }
        kids[root as usize].push(unshift(head, root, n));
        for v in head..head + this_len - 1 {
            kids[unshift(v, root, n) as usize].push(unshift(v + 1, root, n));
        }
        head += this_len;
    }
    kids
}

mod tests;
