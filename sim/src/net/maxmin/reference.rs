//! The reference max-min solver: the bottleneck algorithm written as plainly as possible.
//!
//! Every round scans all links for the smallest fair share and all flows for the smallest cap,
//! then freezes one flow (a cap) or one link's flows (a bottleneck): O(F·(L + F·h)) per round and
//! up to F rounds. It exists so the fast solver has something obviously right to match in tests.

use super::{effective_cap, fair_share, Problem};

/// Max-min fair rates (bits/s) of `p`'s flows by plain progressive filling; see the module docs
/// for the exact rules. Bit-identical to [`super::MaxMinSolver::solve`].
///
/// # Panics
/// If `flow_cap_bps` does not have one entry per flow or a path names a link outside
/// `link_capacity_bps`.
pub fn solve_reference(p: &Problem) -> Vec<f64> {
    let flows = p.flow_count();
    p.assert_shape(flows);
    let links = p.link_capacity_bps.len();
    let mut remaining_bps = p.link_capacity_bps.to_vec();
    let mut unfrozen = vec![0_u32; links];
    // Ties between equal shares go to the link an earlier flow crossed first.
    let mut first_use = vec![u32::MAX; links];
    let mut used = 0;
    for flow in 0..flows {
        for &link in p.links_of(flow) {
            unfrozen[link as usize] += 1;
            if first_use[link as usize] == u32::MAX {
                first_use[link as usize] = used;
                used += 1;
            }
        }
    }
    let effective_cap_bps: Vec<f64> = (0..flows)
        .map(|flow| {
            effective_cap(
                p.flow_cap_bps[flow],
                p.links_of(flow),
                &unfrozen,
                p.link_capacity_bps,
            )
        })
        .collect();
    let mut rates_bps = vec![f64::INFINITY; flows];
    let mut frozen = vec![false; flows];

    let mut freeze = |flow: usize,
                      rate: f64,
                      remaining_bps: &mut Vec<f64>,
                      unfrozen: &mut Vec<u32>,
                      frozen: &mut Vec<bool>| {
        rates_bps[flow] = rate;
        frozen[flow] = true;
        for &link in p.links_of(flow) {
            remaining_bps[link as usize] -= rate;
            unfrozen[link as usize] -= 1;
        }
    };

    loop {
        let mut bottleneck: Option<(f64, usize)> = None;
        for link in 0..links {
            if unfrozen[link] == 0 {
                continue;
            }
            let share = fair_share(remaining_bps[link], unfrozen[link]);
            let better = |&(best, at): &(f64, usize)| {
                share < best || (share == best && first_use[link] < first_use[at])
            };
            if bottleneck.is_none_or(|b| better(&b)) {
                bottleneck = Some((share, link));
            }
        }
        let mut tightest_cap: Option<(f64, usize)> = None;
        for flow in 0..flows {
            let cap = effective_cap_bps[flow];
            if frozen[flow] || cap == f64::INFINITY {
                continue;
            }
            if tightest_cap.is_none_or(|(best, _)| cap < best) {
                tightest_cap = Some((cap, flow));
            }
        }
        match (tightest_cap, bottleneck) {
            (Some((cap, flow)), None) => {
                freeze(flow, cap, &mut remaining_bps, &mut unfrozen, &mut frozen)
            }
            (Some((cap, flow)), Some((share, _))) if cap <= share => {
                freeze(flow, cap, &mut remaining_bps, &mut unfrozen, &mut frozen)
            }
            // Every flow still rising is unlimited (and INFINITY - INFINITY would be NaN).
            (_, Some((share, _))) if share == f64::INFINITY => break,
            (_, Some((share, link))) => {
                for flow in 0..flows {
                    if !frozen[flow] && p.links_of(flow).contains(&(link as u32)) {
                        freeze(flow, share, &mut remaining_bps, &mut unfrozen, &mut frozen);
                    }
                }
            }
            (None, None) => break,
        }
    }
    // Flows never frozen have empty paths and no cap: unlimited.
    rates_bps
}
