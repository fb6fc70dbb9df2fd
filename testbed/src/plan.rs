//! What to build for a topology: namespaces for hosts, bridges for switches, shaped veth pairs
//! for links. Pure data, derived from a [`Topology`] without touching the system.
//!
//! Every GPU of the topology is one host (a network namespace with one interface `eth0`), in
//! the topology's rank order; every other device is a Linux bridge in the root namespace. Each
//! full-duplex link is one veth pair whose two ends are both shaped to the link's bandwidth on
//! egress, so both directions are capped. A host must have exactly one link, and the links must
//! form a tree (bridges forward by flooding and learning; a loop would need spanning tree).

use std::collections::BTreeMap;
use std::net::Ipv4Addr;

use sim::topology::{DeviceKind, Topology};

/// One host: a namespace with an address on the testbed subnet.
#[derive(Debug, Clone, PartialEq)]
pub struct Host {
    pub rank: u32,
    /// The topology device it stands for (e.g. `gpu0`).
    pub device: String,
    pub namespace: String,
    pub address: Ipv4Addr,
}

/// Where one end of a veth pair goes.
#[derive(Debug, Clone, PartialEq)]
pub enum End {
    /// Into host `rank`'s namespace, renamed `eth0`.
    Host(u32),
    /// Attached to this bridge in the root namespace.
    Bridge(String),
}

/// One link: a veth pair, each end shaped to `bits_per_s` on egress.
#[derive(Debug, Clone, PartialEq)]
pub struct Veth {
    /// Interface names in the root namespace (both at most 15 bytes).
    pub names: [String; 2],
    pub ends: [End; 2],
    pub bits_per_s: f64,
}

/// Everything a testbed consists of.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    pub prefix: String,
    pub hosts: Vec<Host>,
    pub bridges: Vec<String>,
    pub veths: Vec<Veth>,
    /// Prefix length of the host subnet.
    pub prefix_len: u8,
}

/// The interface name of every host inside its namespace.
pub const HOST_IFACE: &str = "eth0";

/// Builds the plan for `topo`; `prefix` (at most 6 characters, letters and digits) names every
/// namespace, bridge and veth; hosts get `subnet.1`, `subnet.2`, ... on a /16.
pub fn plan(topo: &Topology, prefix: &str, subnet: [u8; 2]) -> Result<Plan, String> {
    if prefix.is_empty() || prefix.len() > 6 || !prefix.chars().all(|c| c.is_ascii_alphanumeric()) {
        return Err(format!(
            "--prefix: 1 to 6 letters or digits (interface names are at most 15 bytes), got {prefix:?}"
        ));
    }
    let gpus = topo.gpus();
    if gpus.len() < 2 {
        return Err(format!(
            "topology {:?}: at least 2 GPUs (hosts), got {}",
            topo.name,
            gpus.len()
        ));
    }
    if gpus.len() > 60_000 {
        return Err(format!(
            "topology {:?}: at most 60000 hosts on one machine, got {}",
            topo.name,
            gpus.len()
        ));
    }
    let rank_of: BTreeMap<u32, u32> = gpus
        .iter()
        .enumerate()
        .map(|(r, d)| (d.0, r as u32))
        .collect();
    let hosts: Vec<Host> = gpus
        .iter()
        .enumerate()
        .map(|(r, d)| {
            let n = r as u32 + 1;
            Host {
                rank: r as u32,
                device: topo.device(*d).name.clone(),
                namespace: format!("{prefix}-h{r}"),
                address: Ipv4Addr::new(subnet[0], subnet[1], (n / 256) as u8, (n % 256) as u8),
            }
        })
        .collect();
    let mut bridge_of: BTreeMap<u32, String> = BTreeMap::new();
    for (i, d) in topo.devices().iter().enumerate() {
        if d.kind != DeviceKind::Gpu {
            bridge_of.insert(i as u32, format!("{prefix}-b{i}"));
        }
    }
    let links = topo.links();
    let mut veths = Vec::new();
    let mut host_links = vec![0u32; hosts.len()];
    for k in 0..topo.duplex_link_count() {
        let l = &links[2 * k];
        let back = &links[2 * k + 1];
        if (l.bandwidth_bps - back.bandwidth_bps).abs() > 1e-6 * l.bandwidth_bps {
            return Err(format!(
                "link {k} ({} - {}): the testbed shapes both directions alike; got {} and {} bit/s",
                topo.device(l.from).name,
                topo.device(l.to).name,
                l.bandwidth_bps,
                back.bandwidth_bps
            ));
        }
        let end = |d: u32| match rank_of.get(&d) {
            Some(&r) => End::Host(r),
            None => End::Bridge(bridge_of[&d].clone()),
        };
        let ends = [end(l.from.0), end(l.to.0)];
        if let [End::Host(a), End::Host(b)] = ends {
            return Err(format!(
                "link {k}: hosts {a} and {b} are linked directly; the testbed needs every host \
                 on a switch (one interface per namespace)"
            ));
        }
        for e in &ends {
            if let End::Host(r) = e {
                host_links[*r as usize] += 1;
            }
        }
        veths.push(Veth {
            names: [format!("{prefix}-{k}a"), format!("{prefix}-{k}b")],
            ends,
            bits_per_s: l.bandwidth_bps,
        });
    }
    if let Some((r, n)) = host_links.iter().enumerate().find(|(_, &n)| n != 1) {
        return Err(format!(
            "host {r} ({}): exactly one link per host, got {n}",
            hosts[r].device
        ));
    }
    // A connected graph with V vertices and V - 1 edges is a tree.
    let vertices = topo.devices().len();
    if veths.len() + 1 != vertices || !connected(topo) {
        return Err(format!(
            "topology {:?}: the links must form a tree ({} devices, {} links, {}); Linux \
             bridges would loop otherwise",
            topo.name,
            vertices,
            veths.len(),
            if connected(topo) {
                "connected"
            } else {
                "not connected"
            }
        ));
    }
    for v in &veths {
        if !(v.bits_per_s.is_finite() && v.bits_per_s >= 8_000.0) {
            return Err(format!(
                "link {}: a bandwidth of at least 8 kbit/s for tc, got {} bit/s",
                v.names[0], v.bits_per_s
            ));
        }
    }
    Ok(Plan {
        prefix: prefix.to_string(),
        hosts,
        bridges: bridge_of.into_values().collect(),
        veths,
        prefix_len: 16,
    })
}

fn connected(topo: &Topology) -> bool {
    let n = topo.devices().len();
    let mut seen = vec![false; n];
    let mut stack = vec![0usize];
    seen[0] = true;
    while let Some(d) = stack.pop() {
        for l in topo.out_links(sim::topology::DeviceId(d as u32)) {
            let to = topo.link(*l).to.0 as usize;
            if !seen[to] {
                seen[to] = true;
                stack.push(to);
            }
        }
    }
    seen.iter().all(|&s| s)
}

/// Seconds of a link's rate its shaper's token bucket holds (tc's `burst` and `cburst`).
pub const BURST_SECS: f64 = 0.002;

/// tc token-bucket depth for a rate: [`BURST_SECS`] of traffic, at least 16 KiB (several full
/// frames; the floor binds below 65.5 Mbit/s).
pub fn burst_bytes(bits_per_s: f64) -> u64 {
    ((bits_per_s / 8.0 * BURST_SECS) as u64).max(16 * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;
    use sim::topology::file::parse_str;

    fn star(n: u32) -> Topology {
        parse_str(
            &format!(
                "name = \"s\"\n[generator]\nkind = \"star\"\nn = {n}\n\
                 [generator.link]\nbandwidth = \"200Mbps\"\nclass = \"ethernet\"\n"
            ),
            "star.toml",
        )
        .unwrap()
    }

    #[test]
    fn a_star_is_one_bridge_and_one_shaped_veth_per_host() {
        let p = plan(&star(4), "tb", [10, 77]).unwrap();
        assert_eq!(p.hosts.len(), 4);
        assert_eq!(p.bridges.len(), 1);
        assert_eq!(p.veths.len(), 4);
        assert_eq!(p.hosts[2].address, Ipv4Addr::new(10, 77, 0, 3));
        assert_eq!(p.hosts[2].namespace, "tb-h2");
        assert!(p.veths.iter().all(|v| v.bits_per_s == 200e6));
        assert!(p
            .veths
            .iter()
            .all(|v| v.names.iter().all(|n| n.len() <= 15)));
    }

    #[test]
    fn a_leaf_spine_with_one_spine_is_a_tree_of_three_bridges() {
        let t = parse_str(
            "name = \"ls\"\n[generator]\nkind = \"leaf_spine\"\nleaves = 2\nhosts_per_leaf = 2\n\
             spines = 1\noversubscription = 2.0\n[generator.host_link]\nbandwidth = \"200Mbps\"\n\
             class = \"ethernet\"\n[generator.uplink]\nclass = \"ethernet\"\n",
            "ls.toml",
        )
        .unwrap();
        let p = plan(&t, "tb", [10, 77]).unwrap();
        assert_eq!(p.bridges.len(), 3);
        let uplinks: Vec<_> = p
            .veths
            .iter()
            .filter(|v| matches!(v.ends, [End::Bridge(_), End::Bridge(_)]))
            .collect();
        assert_eq!(uplinks.len(), 2);
        assert!(uplinks.iter().all(|v| (v.bits_per_s - 200e6).abs() < 1.0));
    }

    #[test]
    fn two_spines_make_a_loop_and_are_refused() {
        let t = parse_str(
            "name = \"ls\"\n[generator]\nkind = \"leaf_spine\"\nleaves = 2\nhosts_per_leaf = 1\n\
             spines = 2\noversubscription = 1.0\n[generator.host_link]\nbandwidth = \"200Mbps\"\n\
             class = \"ethernet\"\n[generator.uplink]\nclass = \"ethernet\"\n",
            "ls.toml",
        )
        .unwrap();
        let e = plan(&t, "tb", [10, 77]).unwrap_err();
        assert!(e.contains("tree"), "{e}");
    }

    #[test]
    fn a_ring_of_gpus_is_refused_because_hosts_link_directly() {
        let t = parse_str(
            "name = \"r\"\n[generator]\nkind = \"ring\"\nn = 3\n[generator.link]\n\
             bandwidth = \"1Gbps\"\nclass = \"ethernet\"\n",
            "ring.toml",
        )
        .unwrap();
        assert!(plan(&t, "tb", [10, 77]).unwrap_err().contains("directly"));
    }

    #[test]
    fn long_prefixes_are_refused() {
        assert!(plan(&star(2), "toolong", [10, 77]).is_err());
    }

    #[test]
    fn burst_is_two_milliseconds_but_never_below_16_kib() {
        assert_eq!(burst_bytes(1e9), 250_000);
        assert_eq!(burst_bytes(1e6), 16 * 1024);
    }
}
