#![cfg(test)]

use super::merge::flatten;
use super::*;

const BASE: &str = r#"
name = "s"
[topology]
file = "../../topologies/ring10_10GBps.toml"
[collective]
op = "all_reduce"
bytes = "1MiB"
"#;

#[test]
fn axes_keep_the_order_they_are_written_in() {
    let text = format!(
        "{BASE}[sweep]\n\"placement.ranks\" = [2, 4]\n\"collective.bytes\" = [\"1MiB\", \"2MiB\", \"4MiB\"]\n"
    );
    let spec = parse_spec("f", &text).unwrap();
    let keys: Vec<&str> = spec.axes.iter().map(|a| a.key.as_str()).collect();
    assert_eq!(keys, ["placement.ranks", "collective.bytes"]);
    assert_eq!(spec.mode, SweepMode::Product);
}

#[test]
fn product_varies_the_last_axis_fastest() {
    let c = combinations(SweepMode::Product, &[2, 3]);
    assert_eq!(
        c,
        vec![
            vec![0, 0],
            vec![0, 1],
            vec![0, 2],
            vec![1, 0],
            vec![1, 1],
            vec![1, 2]
        ]
    );
}

#[test]
fn zip_takes_the_ith_value_of_every_axis_and_wants_equal_lengths() {
    assert_eq!(
        combinations(SweepMode::Zip, &[3, 3]),
        vec![vec![0, 0], vec![1, 1], vec![2, 2]]
    );
    let text = format!("{BASE}[sweep]\nmode = \"zip\"\n\"a.b\" = [1, 2]\n\"c.d\" = [1]\n");
    let e = parse_spec("f.toml", &text).unwrap_err();
    assert_eq!(e.field, "sweep.\"c.d\"");
    assert!(e.expected.contains("2 values"), "{e}");
}

#[test]
fn an_axis_must_be_a_non_empty_list() {
    let text = format!("{BASE}[sweep]\n\"a.b\" = []\n");
    assert!(parse_spec("f", &text).is_err());
    let text = format!("{BASE}[sweep]\n\"a.b\" = 3\n");
    assert!(parse_spec("f", &text)
        .unwrap_err()
        .expected
        .contains("list"));
    let text = format!("{BASE}[sweep]\nmode = \"diagonal\"\n");
    assert_eq!(parse_spec("f", &text).unwrap_err().field, "sweep.mode");
}

#[test]
fn shards_split_points_round_robin_and_read_slurm_variables() {
    let s = Shard::parse("1/3").unwrap();
    let mine: Vec<usize> = (0..10).filter(|&i| s.contains(i)).collect();
    assert_eq!(mine, [1, 4, 7]);
    assert!(Shard::parse("3/3").is_err());
    assert!(Shard::parse("x").is_err());
    let env = |k: &str| match k {
        "SLURM_ARRAY_TASK_ID" => Some("5".to_string()),
        "SLURM_ARRAY_TASK_COUNT" => Some("4".to_string()),
        "SLURM_ARRAY_TASK_MIN" => Some("2".to_string()),
        _ => None,
    };
    assert_eq!(
        Shard::from_env(env).unwrap(),
        Some(Shard { index: 3, count: 4 })
    );
    assert_eq!(Shard::from_env(|_| None).unwrap(), None);
}

#[test]
fn the_hash_is_stable_across_processes() {
    // FNV-1a test vector
    assert_eq!(fnv1a64("a"), 0xaf63_dc4c_8601_ec8c);
}

#[test]
fn flattening_keeps_scalars_and_prefixes_nested_objects() {
    let v = serde_json::json!({"a": 1, "net": {"flows": 2}, "metrics": {"step_secs": 0.5},
        "list": [1, 2], "sweep_point": {"key": "k"}});
    let mut out = Vec::new();
    flatten("", &v, &mut out);
    let names: Vec<&str> = out.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(names, ["a", "step_secs", "net_flows"]);
}
