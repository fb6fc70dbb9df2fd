//! The NCCL fit's specification: the minimizer, which keys are fitted together, ring channel
//! rates, the linear solve.

#![cfg(test)]
use super::*;

#[test]
fn nelder_mead_finds_the_minimum_of_a_quadratic_bowl() {
    let f = |x: &[f64]| (x[0] - 3.0).powi(2) + 10.0 * (x[1] + 1.0).powi(2);
    let x = nelder_mead(&f, &[0.0, 0.0], 1.0, 500);
    assert!(
        (x[0] - 3.0).abs() < 1e-3 && (x[1] + 1.0).abs() < 1e-3,
        "{x:?}"
    );
}

#[test]
fn keys_that_share_no_row_are_fitted_apart_with_their_own_rows() {
    // Rows 0 and 2 use keys {0, 1} and {1, 2}: one group; row 1 uses key 3 alone.
    let groups = independent_groups(5, &[vec![0, 1], vec![3], vec![1, 2]]);
    assert_eq!(
        groups,
        vec![
            (vec![0, 1, 2], vec![0, 2]),
            (vec![3], vec![1]),
            (vec![4], vec![])
        ]
    );
}

#[test]
fn ring_channel_rates_replace_the_links_efficiency_only_when_asked() {
    let topo = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../topologies/dgx_a100.toml");
    let rows: Vec<FitRow> = [1u64 << 10, 1 << 28]
        .into_iter()
        .enumerate()
        .map(|(i, bytes)| {
            Measured {
                topology: &topo,
                collective: "all_reduce",
                bytes,
                ranks: 8,
                algorithm: None,
                protocol: None,
                version: Some("2.18.5"),
                tuner_config: None,
                collnet: false,
                measured_secs: 1e-4,
                file: "t.csv".into(),
                row: i as u32 + 1,
            }
            .fit_row()
            .unwrap()
        })
        .collect();
    let (plain, _) = exercised(&rows, FitChoices::default()).unwrap();
    assert!(
        plain.contains(&Key::Efficiency("ring/nvlink".into())),
        "{plain:?}"
    );
    assert!(
        !plain.iter().any(|k| matches!(k, Key::Channel(_))),
        "{plain:?}"
    );
    let (rates, by_row) = exercised(
        &rows,
        FitChoices {
            ring_channel_rates: true,
        },
    )
    .unwrap();
    assert!(
        !rates.iter().any(|k| matches!(k, Key::Efficiency(_))),
        "{rates:?}"
    );
    // 1 KiB runs ring/LL, 256 MiB ring/Simple: one channel rate each, in its own row.
    let ll = rates
        .iter()
        .position(|k| *k == Key::Channel("ring/ll".into()));
    let simple = rates
        .iter()
        .position(|k| *k == Key::Channel("ring/simple".into()));
    assert!(by_row[0].contains(&ll.unwrap()) && !by_row[0].contains(&simple.unwrap()));
    assert!(by_row[1].contains(&simple.unwrap()) && !by_row[1].contains(&ll.unwrap()));
}

#[test]
fn invert_inverts_and_refuses_singular() {
    let inv = invert(vec![vec![4.0, 1.0], vec![1.0, 3.0]]).unwrap();
    let d = 11.0;
    assert!((inv[0][0] - 3.0 / d).abs() < 1e-12 && (inv[0][1] + 1.0 / d).abs() < 1e-12);
    assert!(invert(vec![vec![1.0, 2.0], vec![2.0, 4.0]]).is_none());
}
