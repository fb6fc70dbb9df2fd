//! The orders in which a root may serve children that enter a call in no fixed order.
//!
//! A root that posts a rendezvous send to each of its children at once does not choose whom
//! its data goes to first: a payload leaves once its child has answered (gloo's notification,
//! OpenMPI's acknowledgement of the request), and the children answer as they enter the call,
//! which after a barrier is in no fixed order. Where that order decides the time (the first
//! child served forwards while the root still sends), a library's plan carries one
//! alternative per order ([`super::Plan::alternatives`]) and a run reports the median one.

/// Most orders a root's children are played in.
pub const ORDERS_MAX: usize = 24;

/// The orders in which a root may serve `children` (given in posting order), posting order
/// first: every permutation while there are at most [`ORDERS_MAX`], else the posting order's
/// rotations, at most [`ORDERS_MAX`] of them evenly spaced (a root of 255 children is played
/// 24 ways, not 255: each way is a whole play of the call).
pub fn entry_orders(children: &[u32]) -> Vec<Vec<u32>> {
    let k = children.len();
    // k!, or None once it passes ORDERS_MAX (never computed whole: 21! overflows a u64).
    let permutations =
        (1..=k).try_fold(1usize, |f, i| f.checked_mul(i).filter(|&f| f <= ORDERS_MAX));
    if permutations.is_none() {
        let ways = k.min(ORDERS_MAX);
        return (0..ways)
            .map(|w| w * k / ways)
            .map(|i| {
                children[i..]
                    .iter()
                    .chain(&children[..i])
                    .copied()
                    .collect()
            })
            .collect();
    }
    let mut orders = vec![children.to_vec()];
    let mut order = children.to_vec();
    // Heap's algorithm, iteratively: every other permutation once.
    let mut c = vec![0usize; k];
    let mut i = 0;
    while i < k {
        if c[i] < i {
            let j = if i % 2 == 0 { 0 } else { c[i] };
            order.swap(j, i);
            orders.push(order.clone());
            c[i] += 1;
            i = 0;
        } else {
            c[i] = 0;
            i += 1;
        }
    }
    orders
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_permutation_once_posting_order_first_then_rotations_past_the_cap() {
        assert_eq!(entry_orders(&[7]), vec![vec![7]]);
        let three = entry_orders(&[1, 2, 4]);
        assert_eq!(three[0], vec![1, 2, 4]);
        let mut distinct = three.clone();
        distinct.sort();
        distinct.dedup();
        assert_eq!((three.len(), distinct.len()), (6, 6));
        assert_eq!(entry_orders(&[1, 2, 3, 4]).len(), 24);
        // 5! = 120 is past the cap: the five rotations.
        let rotations = entry_orders(&[1, 2, 4, 8, 16]);
        assert_eq!(rotations.len(), 5);
        assert_eq!(rotations[1], vec![2, 4, 8, 16, 1]);
        // 255 children (basic_linear on 256 ranks): 24 rotations, evenly spaced.
        let many: Vec<u32> = (1..256).collect();
        let spaced = entry_orders(&many);
        assert_eq!(spaced.len(), ORDERS_MAX);
        assert_eq!(spaced[0][0], 1);
        assert_eq!(spaced[1][0], 1 + 255 / 24);
        assert!(spaced.iter().all(|o| o.len() == 255));
    }
}
