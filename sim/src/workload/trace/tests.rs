//! The replay's rules on small hand-made traces: collectives meet by order within a group,
//! sends meet receives, compute chains keep their durations, bad traces name the node.
#![cfg(test)]

use super::*;
use crate::collective::OpKind;
use crate::workload::step::{DpMethod, Templates};

struct Uniform;
impl Fabric for Uniform {
    fn bottleneck_bps(&self, _: u32, _: u32) -> f64 {
        8e9
    }
    fn node_of(&self, r: u32) -> u32 {
        r
    }
}

fn compute(id: u64, secs: f64, deps: &[u64]) -> TraceNode {
    TraceNode {
        id,
        name: format!("op{id}"),
        kind: NodeKind::Compute { secs },
        deps: deps.to_vec(),
        lane: 0,
    }
}

fn all_reduce(id: u64, bytes: u64, group: Option<&str>, deps: &[u64]) -> TraceNode {
    TraceNode {
        id,
        name: "c10d::allreduce_".into(),
        kind: NodeKind::Collective {
            op: Collective::AllReduce,
            bytes,
            group: group.map(str::to_string),
            root: 0,
        },
        deps: deps.to_vec(),
        lane: 0,
    }
}

fn set(ranks: Vec<Vec<TraceNode>>) -> TraceSet {
    TraceSet {
        name: "t".into(),
        format: "pytorch",
        ranks: ranks
            .into_iter()
            .enumerate()
            .map(|(r, nodes)| RankTrace {
                file: format!("rank{r}"),
                nodes,
                recorded_step_secs: None,
            })
            .collect(),
        groups: BTreeMap::new(),
    }
}

fn dag(s: &TraceSet) -> Result<StepDag, TraceError> {
    let cfg = StepConfig::data_parallel(1, DpMethod::Ddp);
    build(s, &cfg, &Uniform, &Templates)
}

fn transfers(d: &StepDag) -> usize {
    d.schedule
        .ops
        .iter()
        .filter(|o| matches!(o.kind, OpKind::Transfer { .. }))
        .count()
}

#[test]
fn every_rank_issuing_one_all_reduce_makes_one_collective() {
    let rank = |c: f64| {
        vec![
            compute(1, c, &[]),
            all_reduce(2, 1 << 20, None, &[1]),
            compute(3, 0.001, &[2]),
        ]
    };
    let d = dag(&set(vec![rank(0.01), rank(0.02)])).unwrap();
    // 2-rank ring all-reduce: reduce-scatter and all-gather steps, once.
    assert_eq!(transfers(&d), 2);
    assert_eq!(d.lane_count, 2);
    let computes: Vec<_> = d
        .lanes
        .iter()
        .zip(&d.schedule.ops)
        .filter(|(l, _)| l.is_some())
        .collect();
    assert_eq!(computes.len(), 4);
}

#[test]
fn collectives_of_one_group_meet_in_issue_order_not_node_order() {
    // Rank 1 lists its nodes in another order, but issues the same sequence.
    let r0 = vec![
        all_reduce(1, 1024, None, &[]),
        all_reduce(2, 2048, None, &[1]),
    ];
    let r1 = vec![
        all_reduce(20, 2048, None, &[10]),
        all_reduce(10, 1024, None, &[]),
    ];
    assert!(dag(&set(vec![r0, r1])).is_ok());
}

#[test]
fn mismatched_sizes_name_the_node_and_both_sizes() {
    let r0 = vec![all_reduce(1, 1024, None, &[])];
    let r1 = vec![all_reduce(1, 4096, None, &[])];
    let e = dag(&set(vec![r0, r1])).unwrap_err();
    assert_eq!(e.file, "rank1");
    assert!(e.element.contains("node 1"), "{e}");
    assert!(
        e.expected.contains("1024 B") && e.expected.contains("4096 B"),
        "{e}"
    );
}

#[test]
fn a_collective_one_rank_never_issues_is_an_error_not_a_hang() {
    let r0 = vec![all_reduce(1, 1024, None, &[]), compute(2, 0.1, &[1])];
    let r1 = vec![compute(1, 0.1, &[])];
    let e = dag(&set(vec![r0, r1])).unwrap_err();
    assert!(e.expected.contains("issued only by ranks [0]"), "{e}");
}

#[test]
fn a_missing_process_group_is_named() {
    let mut s = set(vec![
        vec![all_reduce(1, 8, Some("tp0"), &[])],
        vec![all_reduce(1, 8, Some("tp0"), &[])],
    ]);
    s.groups.insert("dp".into(), vec![0, 1]);
    let e = dag(&s).unwrap_err();
    assert!(
        e.expected.contains("\"tp0\" is not one") && e.expected.contains("dp"),
        "{e}"
    );
    s.groups.insert("tp0".into(), vec![0, 1]);
    assert!(dag(&s).is_ok());
}

#[test]
fn send_meets_receive_as_one_transfer() {
    let r0 = vec![TraceNode {
        id: 1,
        name: "send".into(),
        kind: NodeKind::Send {
            peer: 1,
            bytes: 4096,
        },
        deps: vec![],
        lane: 0,
    }];
    let r1 = vec![
        TraceNode {
            id: 7,
            name: "recv".into(),
            kind: NodeKind::Recv {
                peer: 0,
                bytes: 4096,
            },
            deps: vec![],
            lane: 0,
        },
        compute(8, 0.5, &[7]),
    ];
    let d = dag(&set(vec![r0, r1])).unwrap();
    assert_eq!(transfers(&d), 1);
}

#[test]
fn cycles_and_dangling_dependencies_are_errors() {
    let e = dag(&set(vec![vec![
        compute(1, 0.1, &[2]),
        compute(2, 0.1, &[1]),
    ]]))
    .unwrap_err();
    assert!(e.expected.contains("cycle"), "{e}");
    let e = dag(&set(vec![vec![compute(1, 0.1, &[9])]])).unwrap_err();
    assert!(e.expected.contains("no node 9"), "{e}");
}

#[test]
fn chakra_files_round_trip_every_node_kind() {
    let mut s = set(vec![vec![
        compute(1, 0.012345, &[]),
        all_reduce(2, 3 << 20, Some("dp"), &[1]),
        TraceNode {
            id: 3,
            name: "send".into(),
            kind: NodeKind::Send { peer: 1, bytes: 99 },
            deps: vec![2],
            lane: 0,
        },
        TraceNode {
            id: 4,
            name: "gemm".into(),
            kind: NodeKind::Compute { secs: 0.5 },
            deps: vec![1],
            lane: 1,
        },
        // A barrier stays a barrier (played as the library runs it), with no bytes.
        TraceNode {
            id: 5,
            name: "c10d::barrier".into(),
            kind: NodeKind::Collective {
                op: Collective::Barrier,
                bytes: 0,
                group: Some("dp".into()),
                root: 0,
            },
            deps: vec![3],
            lane: 0,
        },
    ]]);
    s.groups.insert("dp".into(), vec![0, 1]);
    s.ranks[0].recorded_step_secs = Some(0.25);
    let bytes = chakra::encode(&s.ranks[0], &s.groups, "test");
    let (back, groups) = chakra::parse(&bytes, "x.0.et").unwrap();
    assert_eq!(groups, s.groups);
    assert_eq!(back.recorded_step_secs, Some(0.25));
    // The process-group metadata node comes first, then the nodes as written (durations in
    // whole microseconds).
    assert_eq!(back.nodes.len(), 6);
    let mut want = s.ranks[0].nodes.clone();
    want[0].kind = NodeKind::Compute { secs: 0.012345 };
    for (w, g) in want.iter().zip(&back.nodes[1..]) {
        assert_eq!((w.id, &w.deps, w.lane), (g.id, &g.deps, g.lane));
        match (&w.kind, &g.kind) {
            (NodeKind::Compute { secs: a }, NodeKind::Compute { secs: b }) => {
                assert!((a - b).abs() < 1e-6)
            }
            (a, b) => assert_eq!(a, b),
        }
    }
}

#[test]
fn truncated_and_unknown_chakra_nodes_are_named() {
    let s = set(vec![vec![compute(1, 0.1, &[]), compute(2, 0.1, &[1])]]);
    let bytes = chakra::encode(&s.ranks[0], &s.groups, "test");
    let e = chakra::parse(&bytes[..bytes.len() - 3], "x.0.et").unwrap_err();
    assert!(e.element.starts_with("node message at byte"), "{e}");
    assert!(e.expected.contains("truncated"), "{e}");
    // A node of type 42.
    let mut odd = chakra::encode(&set(vec![vec![]]).ranks[0], &BTreeMap::new(), "test");
    let node = super::chakra_pb::Node {
        id: 5,
        name: "mystery".into(),
        r#type: 42,
        ..Default::default()
    };
    prost::Message::encode_length_delimited(&node, &mut odd).unwrap();
    let e = chakra::parse(&odd, "x.0.et").unwrap_err();
    assert_eq!(e.element, "node 5 (mystery)");
    assert!(e.expected.contains("got 42"), "{e}");
}
