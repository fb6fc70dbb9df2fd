//! Switched fabrics of one-GPU hosts: the two-tier `leaf_spine` and the three-tier `fat_tree`.

use super::*;

/// Two-tier Clos: `leaves` leaf switches `leaf<l>`, each with `hosts_per_leaf` single-GPU hosts
/// (`gpu<i>`, `i = l * hosts_per_leaf + h`; the host link stands for NIC and cable), and
/// `spines` spine switches `spine<s>`; every leaf has `uplinks_per_spine` links to every spine.
///
/// Uplink bandwidth: with `oversubscription = r`, each leaf's total uplink capacity is its
/// total downlink capacity divided by `r`, so one uplink carries
/// `hosts_per_leaf * host_link.bandwidth / (r * spines * uplinks_per_spine)` (`r = 1` is
/// non-blocking, `r = 2` is 2:1). Without it, `uplink.bandwidth` is used as given. Exactly one
/// of the two must be given.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LeafSpine {
    pub leaves: u32,
    pub hosts_per_leaf: u32,
    pub spines: u32,
    #[serde(default = "one")]
    pub uplinks_per_spine: u32,
    pub host_link: LinkParams,
    pub uplink: UplinkParams,
    #[serde(default)]
    pub oversubscription: Option<f64>,
}

impl LeafSpine {
    /// Bandwidth of one leaf→spine link, bits per second per direction.
    pub fn uplink_bits_per_s(&self) -> Result<f64, TopologyError> {
        match (self.oversubscription, self.uplink.bandwidth) {
            (Some(r), None) => {
                if !(r.is_finite() && r > 0.0) {
                    return Err(TopologyError::new(
                        "generator.oversubscription",
                        format!("a ratio greater than zero (2.0 means 2:1), got {r}"),
                    ));
                }
                let down_bps = self.hosts_per_leaf as f64 * self.host_link.bandwidth.bits_per_s();
                Ok(down_bps / (r * self.spines as f64 * self.uplinks_per_spine as f64))
            }
            (None, Some(bw)) => Ok(bw.bits_per_s()),
            (Some(_), Some(_)) => Err(TopologyError::new(
                "generator.uplink.bandwidth",
                "either uplink.bandwidth or oversubscription, not both",
            )),
            (None, None) => Err(TopologyError::new(
                "generator.uplink.bandwidth",
                "uplink.bandwidth, or oversubscription to derive it from, got neither",
            )),
        }
    }

    pub fn build(&self, name: &str) -> Result<Topology, TopologyError> {
        at_least("leaves", self.leaves, 1)?;
        at_least("hosts_per_leaf", self.hosts_per_leaf, 1)?;
        at_least("spines", self.spines, 1)?;
        at_least("uplinks_per_spine", self.uplinks_per_spine, 1)?;
        let hosts = self.leaves as u64 * self.hosts_per_leaf as u64;
        not_too_many("leaves", hosts + self.leaves as u64 + self.spines as u64)?;
        not_too_many_links(
            "uplinks_per_spine",
            hosts as u128
                + self.leaves as u128 * self.spines as u128 * self.uplinks_per_spine as u128,
        )?;
        let up = &self.uplink;
        let up_spec = link_spec(self.uplink_bits_per_s()?, up.latency, up.buffer, up.class);

        let mut b = Topology::builder(name);
        let gpus: Vec<_> = (0..hosts as u32)
            .map(|i| b.add_device(format!("gpu{i}"), DeviceKind::Gpu, Some(i)))
            .collect();
        let leaves: Vec<_> = (0..self.leaves)
            .map(|l| b.add_device(format!("leaf{l}"), DeviceKind::Switch, None))
            .collect();
        let spines: Vec<_> = (0..self.spines)
            .map(|s| b.add_device(format!("spine{s}"), DeviceKind::Switch, None))
            .collect();
        for (i, &g) in gpus.iter().enumerate() {
            let leaf = leaves[i / self.hosts_per_leaf as usize];
            b.add_link(g, leaf, self.host_link.spec());
        }
        for &leaf in &leaves {
            for &spine in &spines {
                for _ in 0..self.uplinks_per_spine {
                    b.add_link(leaf, spine, up_spec);
                }
            }
        }
        b.build()
    }
}

/// Three-tier k-ary fat-tree (Al-Fares, Loukissas, Vahdat, SIGCOMM 2008): `k` pods, each with
/// `k/2` edge switches `pod<p>.edge<e>` and `k/2` aggregation switches `pod<p>.agg<a>` (every
/// edge linked to every agg of its pod), and `(k/2)^2` core switches `core<c>`; core `c` links to
/// agg `c / (k/2)` of every pod. Hosts (`gpu<i>`, one GPU each) hang off edge switches.
///
/// - `hosts_per_edge` (default `k/2`, the non-blocking tree with `k^3/4` hosts) overrides the
///   hosts per edge switch; more than `k/2` oversubscribes the edge layer by
///   `hosts_per_edge / (k/2)`: k = 32 with `hosts_per_edge = 32` gives 16,384 hosts at 2:1.
/// - `hosts` populates only the first N host slots (pod-major, then edge, then port), e.g. to
///   fit a GPU count that is not `k * k/2 * hosts_per_edge`; the fabric is always complete.
/// - `link` is used for edge–agg and agg–core links, `host_link` (default `link`) for host–edge.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FatTree {
    pub k: u32,
    #[serde(default)]
    pub hosts_per_edge: Option<u32>,
    #[serde(default)]
    pub hosts: Option<u32>,
    pub link: LinkParams,
    #[serde(default)]
    pub host_link: Option<LinkParams>,
}

impl FatTree {
    pub fn build(&self, name: &str) -> Result<Topology, TopologyError> {
        let k = self.k;
        at_least("k", k, 2)?;
        if !k.is_multiple_of(2) {
            return Err(TopologyError::new(
                "generator.k",
                format!("an even number of switch ports, got {k}"),
            ));
        }
        let half = k / 2;
        let per_edge = self.hosts_per_edge.unwrap_or(half);
        at_least("hosts_per_edge", per_edge, 1)?;
        let slots = k as u64 * half as u64 * per_edge as u64;
        let switches = k as u64 * k as u64 + half as u64 * half as u64;
        not_too_many("k", slots + switches)?;
        let hosts = match self.hosts {
            None => slots as u32,
            Some(h) if h >= 1 && h as u64 <= slots => h,
            Some(h) => {
                return Err(TopologyError::new(
                    "generator.hosts",
                    format!("between 1 and the {slots} host slots of this fat-tree, got {h}"),
                ))
            }
        };
        let host_link = self.host_link.as_ref().unwrap_or(&self.link).spec();
        let fabric = self.link.spec();

        let mut b = Topology::builder(name);
        let gpus: Vec<_> = (0..hosts)
            .map(|i| b.add_device(format!("gpu{i}"), DeviceKind::Gpu, Some(i)))
            .collect();
        let mut edges = Vec::with_capacity((k * half) as usize);
        let mut aggs = Vec::with_capacity((k * half) as usize);
        for p in 0..k {
            for e in 0..half {
                edges.push(b.add_device(format!("pod{p}.edge{e}"), DeviceKind::Switch, None));
            }
            for a in 0..half {
                aggs.push(b.add_device(format!("pod{p}.agg{a}"), DeviceKind::Switch, None));
            }
        }
        let cores: Vec<_> = (0..half * half)
            .map(|c| b.add_device(format!("core{c}"), DeviceKind::Switch, None))
            .collect();
        for (i, &g) in gpus.iter().enumerate() {
            b.add_link(g, edges[i / per_edge as usize], host_link);
        }
        for p in 0..k as usize {
            for e in 0..half as usize {
                for a in 0..half as usize {
                    let pod = p * half as usize;
                    b.add_link(edges[pod + e], aggs[pod + a], fabric);
                }
            }
        }
        for (c, &core) in cores.iter().enumerate() {
            let a = c / half as usize;
            for p in 0..k as usize {
                b.add_link(aggs[p * half as usize + a], core, fabric);
            }
        }
        b.build()
    }
}
