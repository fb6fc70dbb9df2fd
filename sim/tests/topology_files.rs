//! Topology files: what a valid file builds, and what each kind of mistake is told.
//!
//! Every error must name the file (with line:column where the text locates it), the field
//! path and what was expected; nothing may panic.

use std::path::{Path, PathBuf};

use sim::engine::SimTime;
use sim::topology::file::{load, load_with_overrides, merge_toml, parse_str};
use sim::topology::summary::summarize;
use sim::topology::{DeviceKind, LinkClass, TopologyError};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/topology")
        .join(name)
}

/// Two GPUs joined by one link; each error case edits one thing.
const BASE: &str = r#"name = "base"

[[device]]
name = "gpu{i}"
kind = "gpu"
node = 0
count = 2

[[device]]
name = "sw0"
kind = "switch"

[[link]]
a = "gpu0"
b = "sw0"
bandwidth = "400Gbps"
class = "ib"

[[link]]
a = "gpu1"
b = "sw0"
bandwidth = "400Gbps"
class = "ib"
"#;

fn error_of(text: &str) -> TopologyError {
    match parse_str(text, "t.toml") {
        Ok(t) => panic!("expected an error, built {:?}", t.name),
        Err(e) => e,
    }
}

/// The file named in an error, without its `:line:column`.
fn file_only(e: &TopologyError) -> &str {
    let f = e.file.as_deref().expect("errors name the file");
    f.split(':').next().unwrap_or(f)
}

#[test]
fn the_base_file_builds() {
    let t = parse_str(BASE, "t.toml").unwrap();
    assert_eq!(t.devices().len(), 3);
    assert_eq!(t.gpus().len(), 2);
    assert_eq!(t.duplex_link_count(), 2);
}

#[test]
fn malformed_toml_gives_line_and_column() {
    let e = error_of("name = \"x\"\n[[device]\nname = \"a\"\n");
    assert_eq!(e.file.as_deref(), Some("t.toml:2:9"), "{e}");
    assert!(e.expected.starts_with("valid TOML"), "{e}");
}

#[test]
fn unknown_field_is_named_with_its_path_and_the_fields_allowed() {
    let text = BASE.replace("class = \"ib\"\n", "class = \"ib\"\nlatncy = \"1us\"\n");
    let e = error_of(&text);
    assert_eq!(e.field, "link[0].latncy", "{e}");
    assert_eq!(e.file.as_deref(), Some("t.toml:18:1"), "{e}");
    assert!(e.expected.contains("`latency`"), "{e}");
}

#[test]
fn unknown_top_level_field_is_refused() {
    let e = error_of(&format!("nmae = \"typo\"\n{BASE}"));
    assert_eq!(e.field, "nmae", "{e}");
    assert!(e.expected.contains("unknown field"), "{e}");
}

#[test]
fn wrong_bandwidth_unit_says_which_units_are_accepted() {
    let text = BASE.replacen("\"400Gbps\"", "\"400Gbit\"", 1);
    let e = error_of(&text);
    assert_eq!(e.field, "link[0].bandwidth", "{e}");
    assert_eq!(e.file.as_deref(), Some("t.toml:16:13"), "{e}");
    assert!(e.expected.contains("400Gbit"), "{e}");
    assert!(e.expected.contains("Gbps"), "{e}");
}

#[test]
fn bare_number_bandwidth_is_refused() {
    let text = BASE.replacen("\"400Gbps\"", "400", 1);
    let e = error_of(&text);
    assert_eq!(e.field, "link[0].bandwidth", "{e}");
    assert!(e.expected.contains("no unit"), "{e}");
}

#[test]
fn zero_bandwidth_is_refused() {
    let e = error_of(&BASE.replacen("\"400Gbps\"", "\"0Gbps\"", 2));
    assert_eq!(e.field, "link[0].bandwidth", "{e}");
    assert!(e.expected.contains("from 1 Kbps to 10 Pbps"), "{e}");
}

#[test]
fn link_to_a_missing_device_names_it() {
    let e = error_of(&BASE.replace("a = \"gpu1\"", "a = \"gpu7\""));
    assert_eq!(e.field, "link[1].a", "{e}");
    assert!(e.expected.contains("\"gpu7\""), "{e}");
    assert_eq!(e.file.as_deref(), Some("t.toml:20:5"), "{e}");
}

#[test]
fn duplicate_device_names_are_refused_even_from_counts() {
    let text = format!("{BASE}\n[[device]]\nname = \"gpu1\"\nkind = \"nic\"\n");
    let e = error_of(&text);
    assert_eq!(e.field, "device[2].name", "{e}");
    assert!(e.expected.contains("\"gpu1\""), "{e}");
    assert!(e.expected.contains("device[0]"), "{e}");
}

#[test]
fn disconnected_topology_names_the_lost_device() {
    let text = format!("{BASE}\n[[device]]\nname = \"lonely\"\nkind = \"host\"\n");
    let e = error_of(&text);
    assert!(e.expected.contains("connected"), "{e}");
    assert!(e.expected.contains("\"lonely\""), "{e}");
    assert_eq!(file_only(&e), "t.toml");
}

#[test]
fn generator_and_lists_together_are_refused() {
    let text = format!(
        "{BASE}\n[generator]\nkind = \"ring\"\nn = 4\nlink = {{ bandwidth = \"1Gbps\", class = \"ib\" }}\n"
    );
    let e = error_of(&text);
    assert_eq!(e.field, "generator", "{e}");
    assert!(e.expected.contains("not both"), "{e}");
}

#[test]
fn neither_generator_nor_lists_is_refused() {
    let e = error_of("name = \"empty\"\ndescription = \"nothing here\"\n");
    assert!(e.expected.contains("neither"), "{e}");
    assert_eq!(file_only(&e), "t.toml");
}

#[test]
fn count_without_index_placeholder_is_refused() {
    let e = error_of(&BASE.replace("name = \"gpu{i}\"", "name = \"gpu\""));
    assert_eq!(e.field, "device[0].name", "{e}");
    assert!(e.expected.contains("{i}"), "{e}");
    assert_eq!(e.file.as_deref(), Some("t.toml:4:8"), "{e}");
}

#[test]
fn index_placeholder_without_count_is_refused() {
    let text = BASE.replace("count = 2\n", "");
    let e = error_of(&text);
    assert_eq!(e.field, "device[0].name", "{e}");
    assert!(e.expected.contains("count"), "{e}");
}

#[test]
fn zero_counts_are_refused() {
    let e = error_of(&BASE.replace("count = 2", "count = 0"));
    assert_eq!(e.field, "device[0].count", "{e}");
    let e = error_of(&BASE.replacen("class = \"ib\"", "class = \"ib\"\ncount = 0", 1));
    assert_eq!(e.field, "link[0].count", "{e}");
}

#[test]
fn a_link_from_a_device_to_itself_is_refused() {
    let e = error_of(&BASE.replace(
        "b = \"sw0\"\nbandwidth = \"400Gbps\"\nclass = \"ib\"\n\n",
        "b = \"gpu0\"\nbandwidth = \"400Gbps\"\nclass = \"ib\"\n\n",
    ));
    assert_eq!(e.field, "link[0].b", "{e}");
}

#[test]
fn unknown_device_kind_and_link_class_list_the_choices() {
    let e = error_of(&BASE.replace("kind = \"switch\"", "kind = \"router\""));
    assert_eq!(e.field, "device[1].kind", "{e}");
    assert!(e.expected.contains("pcie_switch"), "{e}");
    let e = error_of(&BASE.replacen("class = \"ib\"", "class = \"infiniband\"", 1));
    assert_eq!(e.field, "link[0].class", "{e}");
    assert!(e.expected.contains("ethernet"), "{e}");
}

#[test]
fn missing_required_fields_are_named() {
    let e = error_of(&BASE.replace("name = \"base\"\n", ""));
    assert_eq!(e.field, "name", "{e}");
    assert!(e.expected.contains("required"), "{e}");
    let e = error_of(&BASE.replacen("class = \"ib\"\n", "", 1));
    assert_eq!(e.field, "link[0].class", "{e}");
}

#[test]
fn class_defaults_are_checked_like_links() {
    let e = error_of(&format!("[defaults.nvlnk]\nlatency = \"1us\"\n{BASE}"));
    assert_eq!(e.field, "defaults.nvlnk", "{e}");
    let e = error_of(&format!(
        "[defaults.ib]\nlatency = \"3 fortnights\"\n{BASE}"
    ));
    assert_eq!(e.field, "defaults.ib.latency", "{e}");
    assert_eq!(e.file.as_deref(), Some("t.toml:2:11"), "{e}");
}

#[test]
fn generator_errors_name_the_generator_field() {
    let ring = |n: &str, bw: &str| {
        format!(
            "name = \"r\"\n[generator]\nkind = \"ring\"\nn = {n}\nlink = {{ bandwidth = \"{bw}\", class = \"ib\" }}\n"
        )
    };
    let e = error_of(&ring("1", "1Gbps"));
    assert_eq!(e.field, "generator.n", "{e}");
    assert_eq!(e.file.as_deref(), Some("t.toml:4:5"), "{e}");
    let e = error_of(&ring("4", "1Gbit"));
    assert_eq!(e.field, "generator.link.bandwidth", "{e}");
    let e = error_of(&ring("4", "1Gbps").replace("kind = \"ring\"", "kind = \"rnig\""));
    assert_eq!(e.field, "generator.kind", "{e}");
    assert!(e.expected.contains("`ring`"), "{e}");
}

#[test]
fn an_explicit_fixture_builds_with_defaults_and_bundles() {
    let t = load(&fixture("two_node_explicit.toml")).unwrap();
    assert_eq!(t.name, "two-node-explicit");
    assert_eq!(t.gpus().len(), 4);
    let nic0 = t.find("nic0").unwrap();
    let nic1 = t.find("nic1").unwrap();
    let l = t
        .links()
        .iter()
        .find(|l| l.from == nic0 && l.to == nic1)
        .unwrap();
    assert_eq!(l.class, LinkClass::Ethernet);
    assert_eq!(l.bandwidth_bps, 100e9, "two bundled 50 Gbps links");
    assert_eq!(l.latency, SimTime::from_us(2));
    assert_eq!(l.buffer_bytes, 2 * (8 << 20), "bundle buffers add up");
    let pcie = t
        .links()
        .iter()
        .find(|l| l.class == LinkClass::Pcie)
        .unwrap();
    assert_eq!(pcie.latency, SimTime::from_ns(500));
    assert_eq!(t.device(t.find("gpu1_n1").unwrap()).node, Some(1));
    assert_eq!(t.device(nic0).kind, DeviceKind::Nic);

    let s = summarize(&t);
    assert_eq!(s.bisection_bps, 100e9);
    assert_eq!(s.diameter_hops, 5);
    assert_eq!(s.nodes, 2);
}

#[test]
fn a_fixture_with_an_error_is_located_in_its_file() {
    let path = fixture("bad_unit.toml");
    let e = load(&path).unwrap_err();
    assert_eq!(e.file, Some(format!("{}:11:13", path.display())), "{e}");
    assert_eq!(e.field, "link[0].bandwidth");
    assert!(e
        .to_string()
        .contains("bad_unit.toml:11:13: link[0].bandwidth:"));
}

#[test]
fn a_missing_file_is_an_error_naming_it() {
    let e = load(Path::new("/nonexistent/topo.toml")).unwrap_err();
    assert_eq!(e.file.as_deref(), Some("/nonexistent/topo.toml"));
}

#[test]
fn overrides_merge_into_the_generator() {
    let path = fixture("ring_generator.toml");
    assert_eq!(load(&path).unwrap().gpus().len(), 4);
    let over: toml::Table = toml::from_str("[generator]\nn = 6\n").unwrap();
    let t = load_with_overrides(&path, &over).unwrap();
    assert_eq!(t.gpus().len(), 6);
    // The link parameters not overridden are kept.
    assert_eq!(t.links()[0].latency, SimTime::from_us(1));
}

#[test]
fn a_bad_override_is_named_by_its_field() {
    let path = fixture("ring_generator.toml");
    let over: toml::Table = toml::from_str("[generator]\noversubscription = 2\n").unwrap();
    let e = load_with_overrides(&path, &over).unwrap_err();
    assert_eq!(e.field, "generator.oversubscription", "{e}");
    // Locations would point into the merged text, so only the file is named.
    assert_eq!(e.file, Some(path.display().to_string()));
}

#[test]
fn merge_replaces_arrays_and_scalars_and_merges_tables() {
    let mut base: toml::Table = toml::from_str("a = [1, 2]\n[t]\nx = 1\ny = 2\n").unwrap();
    let over: toml::Table = toml::from_str("a = [3]\n[t]\ny = 5\n").unwrap();
    merge_toml(&mut base, &over);
    let want: toml::Table = toml::from_str("a = [3]\n[t]\nx = 1\ny = 5\n").unwrap();
    assert_eq!(base, want);
}

#[test]
fn no_prefix_of_a_valid_file_panics() {
    let text = std::fs::read_to_string(fixture("two_node_explicit.toml")).unwrap();
    let mut errors = 0;
    for end in (0..text.len()).filter(|&i| text.is_char_boundary(i)) {
        if parse_str(&text[..end], "prefix.toml").is_err() {
            errors += 1;
        }
    }
    assert!(errors > 0);
    assert!(parse_str(&text, "whole.toml").is_ok());
}
