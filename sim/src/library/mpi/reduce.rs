//! OpenMPI 4.1's reduce (MPI_Reduce) as `coll/tuned`'s fixed rules run it, and the all-reduce's
//! nonoverlapping (a reduce to rank 0, then a broadcast from it). Facts read from v4.1.4's
//! sources (no code taken):
//!
//! - **Choice** (`ompi_coll_tuned_reduce_intra_dec_fixed`, commutative operations): by
//!   communicator size and the vector's bytes, one of 1 linear, 2 chain, 3 pipeline, 4 binary,
//!   5 binomial, 6 in_order_binary, 7 rabenseifner ([`reduce_fixed`]): binomial on most
//!   communicators from 8 ranks, binary below 4-8 KiB on 4-31, linear or the chain on 2-7.
//!   The rules pass no segment size (`reduce_intra_do_this(..., 0, 0, 0)`), so every tree runs
//!   unsegmented; the chain's fan-out of 0 becomes 1, and a forced chain runs the MCA default
//!   fan-out 4.
//! - **Linear** (`reduce_intra_basic_linear`): the root receives the vectors of ranks n − 1 …
//!   0 one blocking receive after the other, reducing each; the others send at once.
//! - **Trees** (`reduce_generic` with one segment): a rank receives its children's vectors in
//!   the order of its tree's children, reduces each in turn, then sends the result to its
//!   parent; leaves send at once. The trees are the broadcast's: chains, the binary fan-out
//!   tree and the binomial tree ([`super::bcast`]).
//!
//! Not modelled, and refused by name: in_order_binary and rabenseifner (the rules pick them
//! on 256-511 ranks at 8-16 KiB, from 2,048 ranks at some small sizes, and on 2-3 ranks below
//! 8 B).

use super::bcast::{binomial_tree, chain, fanout_tree};
use super::Algorithm as _;
use super::{message, LibraryError, LibraryOptions, Plan, Request, System};
use crate::collective::{Collective, OpId, OpKind, Phase, Schedule};

algorithms! {
    /// `coll_tuned_reduce_algorithm` numbers and names.
    ReduceAlg,
    "reduce",
    {
        Linear = 1 => "linear",
        Chain = 2 => "chain",
        Pipeline = 3 => "pipeline",
        Binary = 4 => "binary",
        Binomial = 5 => "binomial",
        InOrderBinary = 6 => "in_order_binary",
        Rabenseifner = 7 => "rabenseifner",
    }
}

/// OpenMPI 4.1's fixed reduce rule for a commutative operation over `bytes` on `comm_size`.
pub fn reduce_fixed(comm_size: u32, bytes: u64) -> ReduceAlg {
    use ReduceAlg::*;
    let rules: &[super::Rule<ReduceAlg>] = &[
        (
            4,
            &[
                (8, Rabenseifner),
                (16, Binary),
                (32, Pipeline),
                (262144, Linear),
                (524288, Pipeline),
                (1048576, Chain),
            ],
            Pipeline,
        ),
        (
            8,
            &[
                (4096, Binary),
                (65536, Chain),
                (262144, Binomial),
                (524288, Linear),
                (1048576, Binomial),
            ],
            Linear,
        ),
        (16, &[(8192, Binary)], Binomial),
        (32, &[(4096, Binary)], Binomial),
        (256, &[], Binomial),
        (512, &[(8192, Binomial), (16384, InOrderBinary)], Binomial),
        (2048, &[], Binomial),
        (
            4096,
            &[
                (512, Binomial),
                (1024, InOrderBinary),
                (8192, Binomial),
                (16384, InOrderBinary),
            ],
            Binomial,
        ),
        (
            u32::MAX,
            &[
                (16, Binomial),
                (32, InOrderBinary),
                (1024, Binomial),
                (2048, InOrderBinary),
                (8192, Binomial),
                (16384, InOrderBinary),
            ],
            Binomial,
        ),
    ];
    super::by_rules(rules, comm_size, bytes)
}

/// The MCA default fan-out of a forced chain (`coll_tuned_reduce_algorithm_chain_fanout`).
const FORCED_CHAIN_FANOUT: u32 = 4;

/// The reduce OpenMPI runs for `req` on `sys` (options checked by [`super::plan`]).
pub(super) fn plan(
    req: &Request,
    sys: &System,
    opts: &LibraryOptions,
) -> Result<Plan, LibraryError> {
    let n = sys.ranks;
    let (alg, how) = super::chosen(opts, || reduce_fixed(n, req.bytes))?;
    let forced = opts.algorithm.is_some();
    let mut s = Schedule::new(
        Collective::Reduce,
        format!("mpi {}", alg.as_str()),
        n,
        req.bytes,
    );
    reduce_into(&mut s, alg, n, req.root, req.bytes, forced, &[]).map_err(|alg| {
        LibraryError::new(
            "collective.algorithm",
            format!(
                "a reduce dtsim plays: OpenMPI runs {} here ({how}, {n} ranks, {} B), which is \
                 not modelled; force another one",
                alg.as_str(),
                req.bytes
            ),
        )
    })?;
    Ok(Plan {
        schedule: s,
        placed_endpoints: Vec::new(),
        decision: format!("OpenMPI 4.1 reduce {} ({how})", alg.as_str()),
        parameters: Vec::new(),
        alternatives: Vec::new(),
        alternatives_vary: String::new(),
        plays_per_way: 1,
    })
}

/// Appends OpenMPI's reduce `alg` of `bytes` to `root` on `n` ranks to `s`, every rank
/// starting after `after`; returns what the root's result waits for, or the algorithm when it
/// is not modelled. `forced`: the MCA defaults' chain fan-out rather than the rules'.
pub(super) fn reduce_into(
    s: &mut Schedule,
    alg: ReduceAlg,
    n: u32,
    root: u32,
    bytes: u64,
    forced: bool,
    after: &[OpId],
) -> Result<Vec<OpId>, ReduceAlg> {
    let children = match alg {
        ReduceAlg::Linear => None,
        ReduceAlg::Chain => Some(chain(n, root, if forced { FORCED_CHAIN_FANOUT } else { 1 })),
        ReduceAlg::Pipeline => Some(chain(n, root, 1)),
        ReduceAlg::Binary => Some(fanout_tree(n, root, 2)),
        ReduceAlg::Binomial => Some(binomial_tree(n, root)),
        ReduceAlg::InOrderBinary | ReduceAlg::Rabenseifner => return Err(alg),
    };
    if n < 2 || bytes == 0 {
        return Ok(after.to_vec());
    }
    let fold = |s: &mut Schedule, got: OpId, before: Option<OpId>, step: u32| {
        let mut deps = vec![got];
        deps.extend(before);
        s.push(
            OpKind::Reduce {
                endpoints: 1,
                bytes,
            },
            deps,
            Phase::Reduce,
            0,
            step,
        )
    };
    let Some(children) = children else {
        // Linear: one blocking receive after the other at the root, from rank n − 1 down.
        let mut last: Option<OpId> = None;
        for (k, r) in (0..n).rev().filter(|&r| r != root).enumerate() {
            let mut deps = after.to_vec();
            deps.extend(last);
            let got = message(s, &[(r, root)], bytes, deps, Phase::Reduce, k as u32);
            last = Some(fold(s, got, last, k as u32));
        }
        return Ok(last.into_iter().collect());
    };
    // Leaves first: a rank's children are all deeper than it.
    let mut depth = vec![0u32; n as usize];
    let mut order = vec![root];
    let mut i = 0;
    while i < order.len() {
        let p = order[i];
        for &c in &children[p as usize] {
            depth[c as usize] = depth[p as usize] + 1;
            order.push(c);
        }
        i += 1;
    }
    let mut done: Vec<Vec<OpId>> = vec![after.to_vec(); n as usize];
    for &p in order.iter().rev() {
        let mut last: Option<OpId> = None;
        for &c in &children[p as usize] {
            let got = message(
                s,
                &[(c, p)],
                bytes,
                done[c as usize].clone(),
                Phase::Reduce,
                depth[c as usize],
            );
            last = Some(fold(s, got, last, depth[c as usize]));
        }
        if let Some(l) = last {
            done[p as usize] = vec![l];
        }
    }
    Ok(done[root as usize].clone())
}

#[cfg(test)]
mod tests {
    use super::*;
    use ReduceAlg::*;

    #[test]
    fn fixed_rules_at_the_thresholds_of_the_source() {
        // coll_tuned_decision_fixed.c (v4.1.4), commutative operations.
        assert_eq!(reduce_fixed(2, 7), Rabenseifner);
        assert_eq!(reduce_fixed(3, 100_000), Linear);
        assert_eq!(reduce_fixed(3, 2 << 20), Pipeline);
        assert_eq!(reduce_fixed(4, 4095), Binary);
        assert_eq!(reduce_fixed(6, 10_000), Chain);
        assert_eq!(reduce_fixed(7, 300_000), Linear);
        assert_eq!(reduce_fixed(7, 1 << 20), Linear);
        assert_eq!(reduce_fixed(8, 8191), Binary);
        assert_eq!(reduce_fixed(20, 4096), Binomial);
        assert_eq!(reduce_fixed(300, 10_000), InOrderBinary);
        assert_eq!(reduce_fixed(1000, 10_000), Binomial);
        assert_eq!(reduce_fixed(5000, 20), InOrderBinary);
    }

    /// The data bytes OpenMPI's reduce of `bytes` to `root` on `n` ranks by `alg` moves, and
    /// the reductions' bytes.
    fn moved(alg: &str, n: u32, root: u32, bytes: u64) -> (u128, u128) {
        let p = crate::library::testing::mpi_forced(Collective::Reduce, alg, n, root, bytes);
        let s = &p.schedule;
        let data = crate::library::testing::mpi_data_bytes(s);
        let reduced: u128 = s
            .ops
            .iter()
            .map(|op| match op.kind {
                OpKind::Reduce { bytes, endpoints } => u128::from(bytes) * u128::from(endpoints),
                _ => 0,
            })
            .sum();
        (data, reduced)
    }

    #[test]
    fn every_algorithm_moves_each_vector_once_and_reduces_it_once() {
        // Whatever the tree, every rank but the root sends one vector (its own or its
        // subtree's) and the vectors are reduced n − 1 times in all.
        let m = 1u64 << 20;
        for alg in ["linear", "chain", "pipeline", "binary", "binomial"] {
            for (n, root) in [(2u32, 0u32), (5, 0), (8, 3), (13, 12)] {
                let want = u128::from(n - 1) * u128::from(m);
                assert_eq!(
                    moved(alg, n, root, m),
                    (want, want),
                    "{alg} on {n} to {root}"
                );
            }
        }
    }

    #[test]
    fn what_is_not_modelled_is_refused_by_name() {
        let req = Request {
            collective: Collective::Reduce,
            bytes: 10_000,
            root: 0,
            peer: 1,
        };
        let sys = crate::library::testing::cpu_hosts(300);
        let e = plan(&req, &sys, &LibraryOptions::default()).unwrap_err();
        assert!(e.to_string().contains("in_order_binary"), "{e}");
    }
}
