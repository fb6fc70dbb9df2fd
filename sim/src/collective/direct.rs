//! Direct algorithms: every rank sends straight to every rank that needs its data, in one op
//! per phase.
//!
//! - all-to-all: all ordered pairs, `ceil(M/n)` each;
//! - reduce-scatter: all ordered pairs (rank i sends block j to rank j), `ceil(M/n)` each, then
//!   every rank reduces the n-1 blocks it received;
//! - all-gather: all ordered pairs, `ceil(M/n)` each;
//! - all-reduce: direct reduce-scatter then direct all-gather;
//! - broadcast: the root sends M to every other rank; reduce: every other rank sends M to the
//!   root, which reduces them; send/recv: `root` sends M to `peer`;
//! - barrier: every rank tells every other it has entered, all at once (one path latency).

use super::steps::ceil_div;
use super::{Collective, CollectiveError, CollectiveSpec, OpId, OpKind, Phase, Schedule};

pub(crate) fn generate(spec: &CollectiveSpec, ranks: u32) -> Result<Schedule, CollectiveError> {
    let mut s = Schedule::new(spec.collective, "direct", ranks, spec.bytes);
    let m = spec.bytes;
    let block = ceil_div(m, u64::from(ranks));
    let all_pairs = || -> Vec<(u32, u32)> {
        (0..ranks)
            .flat_map(|i| (0..ranks).filter(move |&j| j != i).map(move |j| (i, j)))
            .collect()
    };
    let others = || (0..ranks).filter(|&r| r != spec.root);
    let step = |s: &mut Schedule, pairs: Vec<(u32, u32)>, bytes, phase, deps: Vec<OpId>| {
        let pattern = s.add_pattern(pairs);
        let step_no = s.ops.len() as u32;
        s.push(OpKind::Transfer { pattern, bytes }, deps, phase, 0, step_no)
    };
    let reduce = |s: &mut Schedule, endpoints, bytes, phase, after: OpId| {
        let step_no = s.ops.len() as u32;
        s.push(
            OpKind::Reduce { endpoints, bytes },
            vec![after],
            phase,
            0,
            step_no,
        )
    };
    let received_blocks = block * u64::from(ranks - 1);
    match spec.collective {
        Collective::AllToAll => {
            step(&mut s, all_pairs(), block, Phase::AllToAll, vec![]);
        }
        Collective::ReduceScatter => {
            let sent = step(&mut s, all_pairs(), block, Phase::ReduceScatter, vec![]);
            reduce(&mut s, ranks, received_blocks, Phase::ReduceScatter, sent);
        }
        Collective::AllGather => {
            step(&mut s, all_pairs(), block, Phase::AllGather, vec![]);
        }
        Collective::AllReduce => {
            let sent = step(&mut s, all_pairs(), block, Phase::ReduceScatter, vec![]);
            let reduced = reduce(&mut s, ranks, received_blocks, Phase::ReduceScatter, sent);
            step(&mut s, all_pairs(), block, Phase::AllGather, vec![reduced]);
        }
        Collective::Broadcast => {
            let pairs = others().map(|r| (spec.root, r)).collect();
            step(&mut s, pairs, m, Phase::Broadcast, vec![]);
        }
        Collective::Reduce => {
            let pairs = others().map(|r| (r, spec.root)).collect();
            let sent = step(&mut s, pairs, m, Phase::Reduce, vec![]);
            reduce(&mut s, 1, m * u64::from(ranks - 1), Phase::Reduce, sent);
        }
        Collective::SendRecv => {
            step(
                &mut s,
                vec![(spec.root, spec.peer)],
                m,
                Phase::SendRecv,
                vec![],
            );
        }
        Collective::Barrier => {
            step(&mut s, all_pairs(), 0, Phase::Barrier, vec![]);
        }
    }
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::super::generate::generate;
    use super::super::generate::testing::*;
    use super::super::Algorithm;
    use super::*;

    fn direct(c: Collective, bytes: u64) -> CollectiveSpec {
        spec(c, Algorithm::Direct, bytes)
    }

    #[test]
    fn all_to_all_is_one_op_over_all_ordered_pairs() {
        let m = 5 * 100;
        let s = generate(&direct(Collective::AllToAll, m), 5, &FLAT).unwrap();
        assert!(s.validate().is_ok());
        assert_eq!(s.ops.len(), 1);
        assert_eq!(s.patterns[0].pairs.len(), 20);
        let (sent, received) = sent_received(&s);
        assert!(sent.iter().all(|&b| b == 4 * m as u128 / 5));
        assert!(received.iter().all(|&b| b == 4 * m as u128 / 5));
    }

    #[test]
    fn all_reduce_is_direct_reduce_scatter_then_all_gather() {
        let m = 4 * 250;
        let s = generate(&direct(Collective::AllReduce, m), 4, &FLAT).unwrap();
        let phases: Vec<Phase> = s.ops.iter().map(|op| op.phase).collect();
        assert_eq!(
            phases,
            vec![Phase::ReduceScatter, Phase::ReduceScatter, Phase::AllGather]
        );
        assert_eq!(s.ops[2].deps, vec![OpId(1)]);
        let (sent, _) = sent_received(&s);
        assert!(sent.iter().all(|&b| b == 2 * 3 * m as u128 / 4));
    }

    #[test]
    fn broadcast_and_reduce_go_through_the_root() {
        let mut sp = direct(Collective::Broadcast, 64);
        sp.root = 2;
        let s = generate(&sp, 4, &FLAT).unwrap();
        assert_eq!(s.patterns[0].pairs.to_vec(), vec![(2, 0), (2, 1), (2, 3)]);
        sp.collective = Collective::Reduce;
        let s = generate(&sp, 4, &FLAT).unwrap();
        assert_eq!(s.patterns[0].pairs.to_vec(), vec![(0, 2), (1, 2), (3, 2)]);
        assert_eq!(
            s.ops[1].kind,
            OpKind::Reduce {
                endpoints: 1,
                bytes: 3 * 64
            }
        );
    }
}
