//! Max-min fair bandwidth sharing (placeholder reference solver until the fast one lands).

/// A max-min problem: flows over links.
pub struct Problem<'a> {
    pub link_capacity_bps: &'a [f64],
    pub flow_offsets: &'a [u32],
    pub flow_links: &'a [u32],
    pub flow_cap_bps: &'a [f64],
}

#[derive(Debug, Default)]
pub struct MaxMinSolver {}

impl MaxMinSolver {
    pub fn new() -> Self {
        MaxMinSolver {}
    }
    pub fn solve(&mut self, p: &Problem, rates_bps: &mut [f64]) {
        let r = solve_reference(p);
        rates_bps.copy_from_slice(&r);
    }
}

pub fn solve_reference(p: &Problem) -> Vec<f64> {
    let nf = p.flow_cap_bps.len();
    let mut rate = vec![0.0; nf];
    let mut frozen = vec![false; nf];
    let mut remaining: Vec<f64> = p.link_capacity_bps.to_vec();
    loop {
        let mut count = vec![0u32; remaining.len()];
        let mut any = false;
        for f in 0..nf {
            if frozen[f] {
                continue;
            }
            any = true;
            for &l in &p.flow_links[p.flow_offsets[f] as usize..p.flow_offsets[f + 1] as usize] {
                count[l as usize] += 1;
            }
        }
        if !any {
            break;
        }
        let mut inc = f64::INFINITY;
        for (l, &c) in count.iter().enumerate() {
            if c > 0 {
                inc = inc.min(remaining[l] / c as f64);
            }
        }
        for f in 0..nf {
            if !frozen[f] {
                inc = inc.min(p.flow_cap_bps[f] - rate[f]);
            }
        }
        if !inc.is_finite() {
            for f in 0..nf {
                if !frozen[f] {
                    rate[f] = f64::INFINITY;
                    frozen[f] = true;
                }
            }
            break;
        }
        for f in 0..nf {
            if frozen[f] {
                continue;
            }
            rate[f] += inc;
            for &l in &p.flow_links[p.flow_offsets[f] as usize..p.flow_offsets[f + 1] as usize] {
                remaining[l as usize] -= inc;
            }
        }
        for f in 0..nf {
            if frozen[f] {
                continue;
            }
            let links = &p.flow_links[p.flow_offsets[f] as usize..p.flow_offsets[f + 1] as usize];
            let sat = links
                .iter()
                .any(|&l| remaining[l as usize] <= p.link_capacity_bps[l as usize] * 1e-12);
            if sat || rate[f] >= p.flow_cap_bps[f] {
                frozen[f] = true;
            }
        }
    }
    rate
}
