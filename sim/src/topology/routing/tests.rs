#![cfg(test)]

use super::*;
use crate::engine::SimTime;
use crate::topology::{DeviceKind, LinkClass, LinkSpec};

fn spec() -> LinkSpec {
    LinkSpec {
        bandwidth_bps: 1e9,
        latency: SimTime::from_ns(1),
        buffer_bytes: 1 << 20,
        class: LinkClass::Ethernet,
    }
}

/// ```text
///   g0 ─ s0 ─┬─ a ─┬─ s1 ─ g1
///            └─ b ─┘
/// ```
fn diamond() -> Topology {
    let mut t = Topology::builder("diamond");
    let g0 = t.add_device("g0", DeviceKind::Gpu, Some(0));
    let g1 = t.add_device("g1", DeviceKind::Gpu, Some(1));
    let s0 = t.add_device("s0", DeviceKind::Switch, None);
    let s1 = t.add_device("s1", DeviceKind::Switch, None);
    let a = t.add_device("a", DeviceKind::Switch, None);
    let b = t.add_device("b", DeviceKind::Switch, None);
    t.add_link(g0, s0, spec());
    t.add_link(g1, s1, spec());
    for m in [a, b] {
        t.add_link(s0, m, spec());
        t.add_link(m, s1, spec());
    }
    t.build().unwrap()
}

#[test]
fn paths_are_shortest_and_connected() {
    let t = diamond();
    let mut r = Router::new(&t, 0);
    let (g0, g1) = (t.find("g0").unwrap(), t.find("g1").unwrap());
    let p = r.path(&t, g0, g1).unwrap().to_vec();
    assert_eq!(p.len(), 4);
    assert_eq!(t.link(p[0]).from, g0);
    assert_eq!(t.link(p[3]).to, g1);
    for w in p.windows(2) {
        assert_eq!(t.link(w[0]).to, t.link(w[1]).from);
    }
    assert_eq!(r.path(&t, g0, g0).unwrap(), &[]);
}

#[test]
fn ecmp_is_deterministic_and_uses_both_branches_across_salts() {
    let t = diamond();
    let (g0, g1) = (t.find("g0").unwrap(), t.find("g1").unwrap());
    let mut seen = std::collections::BTreeSet::new();
    for salt in 0..32 {
        let p1 = Router::new(&t, salt).path(&t, g0, g1).unwrap().to_vec();
        let p2 = Router::new(&t, salt).path(&t, g0, g1).unwrap().to_vec();
        assert_eq!(p1, p2);
        seen.insert(t.link(p1[1]).to);
    }
    assert_eq!(seen.len(), 2, "both middle switches are used by some salt");
}

#[test]
fn gpus_do_not_forward_others_traffic() {
    // g0 ─ g1 ─ g2, and g0 ─ h ─ g2 through a host: g0→g2 must go through the host.
    let mut t = Topology::builder("chain");
    let g0 = t.add_device("g0", DeviceKind::Gpu, Some(0));
    let g1 = t.add_device("g1", DeviceKind::Gpu, Some(0));
    let g2 = t.add_device("g2", DeviceKind::Gpu, Some(0));
    let h = t.add_device("h", DeviceKind::Host, Some(0));
    t.add_link(g0, g1, spec());
    t.add_link(g1, g2, spec());
    t.add_link(g0, h, spec());
    t.add_link(h, g2, spec());
    let t = t.build().unwrap();
    let mut r = Router::new(&t, 0);
    let p = r.path(&t, g0, g2).unwrap().to_vec();
    assert_eq!(t.link(p[0]).to, h);
}

#[test]
fn among_equally_short_paths_the_widest_wins() {
    // g0 ─NVLink 3.6T─ nvsw ─NVLink─ g1, and g0 ─PCIe 0.5T─ host ─PCIe─ g1: both 2 hops.
    let mut t = Topology::builder("hgx-like");
    let g0 = t.add_device("g0", DeviceKind::Gpu, Some(0));
    let g1 = t.add_device("g1", DeviceKind::Gpu, Some(0));
    let sw = t.add_device("nvsw", DeviceKind::Nvswitch, Some(0));
    let h = t.add_device("host", DeviceKind::Host, Some(0));
    let nv = LinkSpec {
        bandwidth_bps: 3.6e12,
        class: LinkClass::Nvlink,
        ..spec()
    };
    let pcie = LinkSpec {
        bandwidth_bps: 0.5e12,
        class: LinkClass::Pcie,
        ..spec()
    };
    t.add_link(g0, h, pcie);
    t.add_link(h, g1, pcie);
    t.add_link(g0, sw, nv);
    t.add_link(sw, g1, nv);
    let t = t.build().unwrap();
    for salt in 0..16 {
        let p = Router::new(&t, salt).path(&t, g0, g1).unwrap().to_vec();
        assert_eq!(t.link(p[0]).to, sw, "salt {salt}");
    }
}

#[test]
fn anchored_searches_give_the_paths_of_a_search_from_each_destination() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut files: Vec<_> = std::fs::read_dir(root.join("topologies"))
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    files.sort();
    let mut checked = 0;
    for f in files {
        let mut over = toml::Table::new();
        let text = std::fs::read_to_string(&f).unwrap();
        // Grow nothing, shrink the big generated ones to a few hundred devices.
        if text.contains("kind = \"rail_optimized\"") {
            over = toml::from_str("[generator]\nnodes = 4\nnodes_per_rail_leaf = 2").unwrap();
        } else if text.contains("kind = \"fat_tree\"") {
            over = toml::from_str("[generator]\nk = 4").unwrap();
        }
        let Ok(t) = crate::topology::file::load_with_overrides(&f, &over) else {
            continue;
        };
        if t.gpus().len() > 64 {
            continue;
        }
        let ends: Vec<DeviceId> = (0..t.devices().len() as u32).map(DeviceId).collect();
        for salt in [0, 7] {
            let (mut fast, mut slow) = (Router::new(&t, salt), Router::reference(&t, salt));
            for &a in &ends {
                for &b in &ends {
                    let x = fast.path(&t, a, b).map(|p| p.to_vec()).ok();
                    let y = slow.path(&t, a, b).map(|p| p.to_vec()).ok();
                    assert_eq!(x, y, "{}: {a:?} -> {b:?}, salt {salt}", f.display());
                    checked += 1;
                }
            }
        }
    }
    assert!(checked > 10_000, "{checked} pairs");
}

#[test]
fn composite_searches_of_leaves_give_the_paths_of_full_searches_on_large_fabrics() {
    // Large enough that a rail leaf's or a fat-tree edge's own region is under an eighth
    // of the devices, so their searches are composites of the region and the spines'.
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let cases = [
        (
            "h100_rail_cluster.toml",
            "[generator]\nnodes = 64\nnodes_per_rail_leaf = 4",
        ),
        ("fat_tree_k8.toml", ""),
    ];
    for (file, over) in cases {
        let over: toml::Table = toml::from_str(over).unwrap();
        let f = root.join("topologies").join(file);
        let t = crate::topology::file::load_with_overrides(&f, &over).unwrap();
        let n = t.devices().len() as u64;
        let mut rng = crate::engine::SimRng::new(5, 0);
        let (mut fast, mut slow) = (Router::new(&t, 3), Router::reference(&t, 3));
        for _ in 0..20_000 {
            let a = DeviceId(rng.below(n) as u32);
            let b = DeviceId(rng.below(n) as u32);
            let x = fast.path(&t, a, b).map(|p| p.to_vec()).ok();
            let y = slow.path(&t, a, b).map(|p| p.to_vec()).ok();
            assert_eq!(x, y, "{file}: {a:?} -> {b:?}");
        }
        let composites = fast
            .dist
            .values()
            .filter(|s| matches!(s, Search::Composite { .. }))
            .count();
        assert!(composites > 0, "{file}: no composite search was made");
    }
}
