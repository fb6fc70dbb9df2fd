#![cfg(test)]

use super::*;

/// ```text
///   gpu0 ══ nvlink 300GB/s ══ gpu1      (one node, no switch)
/// ```
const TWO_GPUS: &str = r#"
name = "two"
[defaults.nvlink]
latency = "700ns"
[[device]]
name = "gpu{i}"
kind = "gpu"
node = 0
count = 2
[[link]]
a = "gpu0"
b = "gpu1"
bandwidth = "300GB/s"
class = "nvlink"
"#;

/// ```text
///   gpu0 ─┐
///         sw ══ host      (no P2P: gpu0 → gpu1 is staged in host memory)
///   gpu1 ─┘
/// ```
const NO_P2P_BOX: &str = r#"
name = "box"
[[device]]
name = "gpu{i}"
kind = "gpu"
node = 0
count = 2
staged_via = "host"
[[device]]
name = "sw"
kind = "pcie_switch"
[[device]]
name = "host"
kind = "host"
[[link]]
a = "gpu0"
b = "sw"
bandwidth = "15.75GB/s"
class = "pcie"
[[link]]
a = "gpu1"
b = "sw"
bandwidth = "15.75GB/s"
class = "pcie"
[[link]]
a = "sw"
b = "host"
bandwidth = "15.75GB/s"
class = "pcie"
"#;

#[test]
fn gpus_staged_via_a_host_are_routed_through_its_memory() {
    let t = parse_str(NO_P2P_BOX, "box.toml").unwrap();
    let (g0, g1) = (t.find("gpu0").unwrap(), t.find("gpu1").unwrap());
    assert_eq!(t.staged_via(g0, g1), t.find("host"));
    let mut router = crate::topology::routing::Router::new(&t, 0);
    assert_eq!(
        router.hops(&t, g0, g1),
        Some(4),
        "up to host memory and back down"
    );
    let e = parse_str(
        &NO_P2P_BOX.replace("staged_via = \"host\"", "staged_via = \"hots\""),
        "box.toml",
    )
    .unwrap_err();
    assert_eq!(e.field, "device[0].staged_via");
    assert!(e.expected.contains("\"hots\""), "{}", e.expected);
}

#[test]
fn counted_devices_expand_and_class_defaults_fill_links() {
    let t = parse_str(TWO_GPUS, "two.toml").unwrap();
    assert_eq!(t.devices().len(), 2);
    assert_eq!(t.devices()[1].name, "gpu1");
    assert_eq!(t.devices()[1].node, Some(0));
    assert!(!t.devices()[1].forwards);
    let l = &t.links()[0];
    assert_eq!(l.bandwidth_bps, 2.4e12);
    assert_eq!(l.latency, SimTime::from_ns(700));
    assert_eq!(l.buffer_bytes, default_buffer_bytes(LinkClass::Nvlink));
}

#[test]
fn bundled_links_multiply_bandwidth_and_buffer_not_latency() {
    let text = TWO_GPUS.replace("class = \"nvlink\"", "class = \"nvlink\"\ncount = 4");
    let t = parse_str(&text, "x").unwrap();
    assert_eq!(t.duplex_link_count(), 1);
    assert_eq!(t.links()[0].bandwidth_bps, 4.0 * 2.4e12);
    assert_eq!(
        t.links()[0].buffer_bytes,
        4 * default_buffer_bytes(LinkClass::Nvlink)
    );
    assert_eq!(t.links()[0].latency, SimTime::from_ns(700));
}

#[test]
fn line_and_column_count_characters_from_one() {
    let text = "ab\ncµd\n";
    assert_eq!(line_col(text, 0), (1, 1));
    assert_eq!(line_col(text, 3), (2, 1));
    // 'µ' is two bytes; 'd' is the third character of line 2.
    assert_eq!(line_col(text, 6), (2, 3));
}

#[test]
fn span_tree_names_array_elements_and_nested_keys() {
    let text = "name = \"x\"\n[[link]]\na = \"p\"\n[[link]]\na = \"q\"\nbandwidth = \"1Gbps\"\n";
    let tree = SpanTree::parse(text).unwrap();
    let at = text.find("\"1Gbps\"").unwrap();
    assert_eq!(tree.path_at(at + 2).as_deref(), Some("link[1].bandwidth"));
    let key = text.rfind("a = ").unwrap();
    assert_eq!(tree.path_at(key).as_deref(), Some("link[1].a"));
    let span = tree.span_of("link[1].bandwidth").unwrap();
    assert_eq!(&text[span], "\"1Gbps\"");
    assert_eq!(
        tree.span_of("link"),
        None,
        "a whole array has no single place"
    );
    assert_eq!(tree.span_of("link[7].a"), None);
}

#[test]
fn merge_replaces_values_and_merges_tables() {
    let mut base: toml::Table =
        toml::from_str("name = \"a\"\n[generator]\nkind = \"ring\"\nn = 4\n").unwrap();
    let over: toml::Table = toml::from_str("[generator]\nn = 8\nextra = true\n").unwrap();
    merge_toml(&mut base, &over);
    let g = base["generator"].as_table().unwrap();
    assert_eq!(g["kind"].as_str(), Some("ring"));
    assert_eq!(g["n"].as_integer(), Some(8));
    assert_eq!(g["extra"].as_bool(), Some(true));
    assert_eq!(base["name"].as_str(), Some("a"));
}
