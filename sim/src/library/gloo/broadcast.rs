//! gloo's broadcast (`broadcast.cc`): a binomial tree of the whole message, a parent posting
//! to all its children at once, in the orders the root may serve them. See [`super`].

use super::PREAMBLE_BYTES;
use crate::collective::{Collective, Endpoint, OpId, OpKind, Phase, Schedule};

/// The root's children in gloo's binomial broadcast, in the order it posts its sends: virtual
/// ranks 1, 2, 4 … below n (the largest subtree first).
pub(super) fn root_children(n: u32) -> Vec<u32> {
    (0..32).map(|j| 1u32 << j).take_while(|&v| v < n).collect()
}

/// The orders in which a broadcast's root may serve its children, posting order first
/// ([`crate::library::entry_orders`]). Captured on 8 hosts of the star
/// (`testbed_star4_200mbit_8hosts.capture_broadcast_256k.json`, ten 256 KiB calls), the
/// root's first payload went to rank 1 in four calls (40.4-42.7 ms), to 2 in three and to 4 in
/// three (44.8-53.8 ms); on 4 hosts rank 1 first in seven of eleven. A rank that forwards posts
/// its sends after its children have long notified, so they leave in posting order (rank 1 to
/// 3 before 5 in all ten).
pub(super) fn root_orders(n: u32) -> Vec<Vec<u32>> {
    crate::library::entry_orders::entry_orders(&root_children(n))
}

/// gloo's binomial broadcast: virtual rank v (root is 0) receives from v − 2^⌊log2 v⌋ and then
/// sends to v + 2^j for every 2^j > v, all at once. Every receiver's notification leaves at
/// the start (each rank posts its one receive first). The root's payloads leave in the order
/// `first` gives its children (see [`root_orders`]), the others' in posting order.
pub(super) fn broadcast(bytes: u64, n: u32, root: u32, first: &[u32]) -> Schedule {
    let mut s = Schedule::new(Collective::Broadcast, "gloo binomial", n, bytes);
    if n < 2 {
        return s;
    }
    let real = |v: u32| (v + root) % n;
    let parent = |v: u32| v - (1 << (31 - v.leading_zeros()));
    let notify_pairs: Vec<(Endpoint, Endpoint)> =
        (1..n).map(|v| (real(v), real(parent(v)))).collect();
    let pattern = s.add_pattern(notify_pairs);
    let ready = s.push(
        OpKind::Transfer {
            pattern,
            bytes: PREAMBLE_BYTES,
        },
        vec![],
        Phase::Broadcast,
        0,
        0,
    );
    let mut received: Vec<Option<OpId>> = vec![None; n as usize];
    // The root's sends first, in the order given (a FIFO tie goes to the first pushed), then
    // every other rank's in posting order.
    let rest = (1..n).filter(|v| !first.contains(v));
    for v in first.iter().copied().chain(rest) {
        let p = parent(v);
        let mut deps = vec![ready];
        deps.extend(received[p as usize]);
        let pattern = s.push_pattern(vec![(real(p), real(v))]);
        let step = 32 - v.leading_zeros();
        received[v as usize] = Some(s.push(
            OpKind::Transfer { pattern, bytes },
            deps,
            Phase::Broadcast,
            0,
            step,
        ));
    }
    s
}
