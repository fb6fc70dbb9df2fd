//! `dtsim validate`'s behaviour: filters, fits, which rows are scored, their ranges and gates,
//! the testbed's rows. Where each published table's rows are replayed is `systems`.
#![cfg(test)]

mod systems;

use super::*;
use std::fmt::Write as _;

fn row(pairs: &[(&str, &str)]) -> Row {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// Validates a table written (as `text`) inside the repository's `target/`, so that its
/// topology and profile paths resolve; the file is removed again.
fn validate_table(tag: &str, text: &str) -> Report {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let csv = repo
        .join("target")
        .join(format!("{tag}-{}.csv", std::process::id()));
    let _ = std::fs::create_dir_all(csv.parent().unwrap());
    std::fs::write(&csv, text).unwrap();
    let r = validate(std::slice::from_ref(&csv), &Options::default()).unwrap();
    std::fs::remove_file(&csv).unwrap();
    r
}

#[test]
fn filters_compare_numbers_numerically_and_accept_alternatives() {
    let f = Filter::parse("size_bytes>=1048576; system=ND H100 v5|ND H200 v5").unwrap();
    assert!(f
        .matches(&row(&[("size_bytes", "4194304"), ("system", "ND H200 v5")]))
        .unwrap());
    assert!(!f
        .matches(&row(&[("size_bytes", "524288"), ("system", "ND H100 v5")]))
        .unwrap());
    assert!(!f
        .matches(&row(&[("size_bytes", "4194304"), ("system", "ND A100 v4")]))
        .unwrap());
}

#[test]
fn a_filter_on_a_missing_column_is_an_error_naming_it() {
    let f = Filter::parse("num_gpus=1").unwrap();
    assert!(f
        .matches(&row(&[("gpus", "1")]))
        .unwrap_err()
        .contains("num_gpus"));
    assert!(Filter::parse("no operator here").is_err());
}

#[test]
fn fit_recovers_latency_and_efficiency_from_exact_points() {
    // measured = 10 us + 1.25 x simulated
    let pts: Vec<(f64, f64)> = [1e-5, 1e-4, 1e-3, 1e-2]
        .iter()
        .map(|&s| (s, 1e-5 + 1.25 * s))
        .collect();
    let (a, b) = fit(&pts).unwrap();
    assert!((a - 1e-5).abs() < 1e-9, "{a}");
    assert!((b - 1.25).abs() < 1e-9, "{b}");
}

#[test]
fn fit_uses_a_factor_alone_when_predictions_do_not_spread() {
    let (a, b) = fit(&[(0.1, 0.2), (0.1, 0.2)]).unwrap();
    assert_eq!(a, 0.0);
    assert!((b - 2.0).abs() < 1e-12);
}

#[test]
fn csv_fields_with_quotes_and_commas_survive() {
    let rows = parse_rows("a,b\n\"x, y\",\"say \"\"hi\"\"\"\n\n", "t.csv").unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0]["a"], "x, y");
    assert_eq!(rows[0]["b"], "say \"hi\"");
    let e = parse_rows("a,b\n1,2,3\n", "t.csv").unwrap_err();
    assert_eq!(e, "t.csv: row 1: 2 fields like the header, got 3");
}

#[test]
fn calibration_rows_are_never_scored() {
    let dir = std::env::temp_dir().join(format!("dtsim-validate-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let topo = root.join("topologies/star8_100g.toml");
    let csv = dir.join("runs.csv");
    // Four all-reduce sizes on a star, "measured" exactly 2x the simulation + 1 ms.
    let mut text = String::from(
        "kind,topology,topology_set,ranks,method,op,bytes,sim_set,profile,measured_secs\n",
    );
    for bytes in [1u64 << 20, 1 << 22, 1 << 24, 1 << 26] {
        let scen = format!(
            "name = \"t\"\n[topology]\nfile = {}\n[placement]\nranks = 4\n[collective]\nop = \"all_reduce\"\nbytes = \"{bytes}B\"\n",
            toml_str(&topo)
        );
        let sim = simulate(&scen, &["collective.algorithm=ring".into()], false).unwrap();
        let _ = writeln!(
            text,
            "collective,{},,4,allreduce,all_reduce,{bytes},collective.algorithm=ring,,{}",
            topo.display(),
            1e-3 + 2.0 * sim
        );
    }
    std::fs::write(&csv, text).unwrap();
    let plain = validate(std::slice::from_ref(&csv), &Options::default()).unwrap();
    assert_eq!(plain.groups[0].rows, 4);
    assert!(plain.groups[0].median_abs_pct > 40.0);
    let opts = Options {
        calibrate_on: Some(Filter::parse("bytes=1048576|67108864").unwrap()),
        ..Options::default()
    };
    let cal = validate(&[csv], &opts).unwrap();
    assert_eq!(cal.groups[0].rows, 2);
    assert_eq!(cal.groups[0].calibration_rows, 2);
    assert!(
        cal.groups[0].max_abs_pct < 0.01,
        "{}",
        cal.groups[0].max_abs_pct
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn progress_hears_of_every_row_of_every_dataset_in_order() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let (topo, sim) = ring_all_reduce_on_star8();
    let head = "kind,topology,topology_set,ranks,method,op,bytes,sim_set,profile,measured_secs\n";
    let line = |m: f64| {
        format!(
            "collective,{},,4,ring,all_reduce,4194304,collective.algorithm=ring,,{m}\n",
            topo.display()
        )
    };
    let dir = repo
        .join("target")
        .join(format!("progress-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (a, b) = (dir.join("a.csv"), dir.join("b.csv"));
    std::fs::write(&a, format!("{head}{}{}", line(sim), line(2.0 * sim))).unwrap();
    std::fs::write(&b, format!("{head}{}", line(sim))).unwrap();
    let heard = std::cell::RefCell::new(Vec::new());
    let report = validate_with_progress(&[a, b], &Options::default(), &|at| {
        heard.borrow_mut().push((
            at.dataset.to_string(),
            at.dataset_index,
            at.datasets,
            at.row,
            at.rows,
        ))
    })
    .unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    let d = |name: &str, i, row, rows| (name.to_string(), i, 2, row, rows);
    assert_eq!(
        heard.into_inner(),
        vec![d("a", 1, 1, 2), d("a", 1, 2, 2), d("b", 2, 1, 1)]
    );
    assert_eq!(report.predictions.len(), 3);
}

/// The topology and simulated seconds of the rows the range tests build: a ring all-reduce of
/// 4 MiB on 4 ranks of `topologies/star8_100g.toml`.
fn ring_all_reduce_on_star8() -> (std::path::PathBuf, f64) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let topo = root.join("topologies/star8_100g.toml");
    let scen = format!(
        "name = \"t\"\n[topology]\nfile = {}\n[placement]\nranks = 4\n[collective]\nop = \"all_reduce\"\nbytes = \"4194304B\"\n",
        toml_str(&topo)
    );
    let sim = simulate(&scen, &["collective.algorithm=ring".into()], false).unwrap();
    (topo, sim)
}

#[test]
fn rows_say_whether_the_prediction_lies_within_their_measured_repetitions() {
    let dir = std::env::temp_dir().join(format!("dtsim-validate-range-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (topo, sim) = ring_all_reduce_on_star8();
    let mut text = String::from(
        "kind,topology,topology_set,ranks,method,op,bytes,sim_set,profile,measured_secs,\
         measured_min_secs,measured_max_secs\n",
    );
    // Median 20% above the prediction: the fastest run reached it, then no run did, then
    // no range given.
    for (lo, hi) in [
        (format!("{}", 0.9 * sim), format!("{}", 1.5 * sim)),
        (format!("{}", 1.1 * sim), format!("{}", 1.5 * sim)),
        (String::new(), String::new()),
    ] {
        let _ = writeln!(
            text,
            "collective,{},,4,allreduce,all_reduce,4194304,collective.algorithm=ring,,{},{lo},{hi}",
            topo.display(),
            1.2 * sim
        );
    }
    let csv = dir.join("runs.csv");
    std::fs::write(&csv, text).unwrap();
    let r = validate(&[csv], &Options::default()).unwrap();
    let within: Vec<Option<bool>> = r
        .predictions
        .iter()
        .map(Prediction::within_measured_range)
        .collect();
    assert_eq!(within, [Some(true), Some(false), None]);
    assert_eq!(r.groups[0].within_range, Some((1, 2)));
    assert!((r.groups[0].median_abs_pct - 100.0 / 6.0).abs() < 1e-6);
    let rows = r.predictions_csv();
    assert!(rows.lines().next().unwrap().ends_with(
        "measured_min_secs,measured_max_secs,within_measured_range,both_ways_secs,\
             one_way_first_secs,launch_median_min_secs,launch_median_max_secs,\
             plays_fastest_secs,plays_slowest_secs,sim_set,op,ranks,bytes,gpu,batch,\
             launch_medians_secs"
    ));
    // The ideal template exchanges nothing OpenMPI's way: no modes; nor launches given; one
    // play. Each row names its call (what `dtsim run` reads back as its track record).
    let call = ",collective.algorithm=ring,all_reduce,4,4194304,,,";
    assert!(rows
        .lines()
        .nth(1)
        .unwrap()
        .ends_with(&format!(",true,,,,,,{call}")));
    assert!(rows
        .lines()
        .nth(3)
        .unwrap()
        .ends_with(&format!(",,,,,,,{call}")));
    // One of the group's two rows within its repetitions; no launches named, so no launch noise.
    assert!(r.errors_csv().lines().nth(1).unwrap().ends_with(",1,,"));
    assert!(r.to_string().contains("1/2"), "{r}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn rows_pooling_launches_show_the_range_of_their_launch_medians() {
    // The same row three ways: launches around the prediction, launches all above it, one
    // launch only (nothing to show).
    let (topo, sim) = ring_all_reduce_on_star8();
    let mut text = String::from(
        "kind,topology,topology_set,ranks,method,op,bytes,sim_set,profile,measured_secs,\
         launch_medians_secs\n",
    );
    for launches in [
        format!("{};{};{}", 0.8 * sim, 1.2 * sim, 1.3 * sim),
        format!("{};{}", 1.1 * sim, 1.3 * sim),
        format!("{}", 1.2 * sim),
    ] {
        let _ = writeln!(
            text,
            "collective,{},,4,allreduce,all_reduce,4194304,collective.algorithm=ring,,{},{launches}",
            topo.display(),
            1.2 * sim
        );
    }
    let r = validate_table("launch-medians", &text);
    let ranges: Vec<Option<(f64, f64)>> =
        r.predictions.iter().map(|p| p.launch_range_secs).collect();
    let close = |a: Option<(f64, f64)>, lo: f64, hi: f64| {
        a.is_some_and(|(a, b)| {
            (a / (lo * sim) - 1.0).abs() < 1e-9 && (b / (hi * sim) - 1.0).abs() < 1e-9
        })
    };
    assert!(close(ranges[0], 0.8, 1.3), "{ranges:?}");
    assert!(close(ranges[1], 1.1, 1.3), "{ranges:?}");
    assert_eq!(ranges[2], None);
    assert_eq!(r.predictions[2].launch_medians_secs, Vec::<f64>::new());
    assert_eq!(r.predictions[1].launch_medians_secs.len(), 2);
    // predictions.csv names each row's launches (the last column), none for the third.
    let csv = r.predictions_csv();
    let last = |line: &str| line.rsplit(',').next().unwrap().to_string();
    let launches: Vec<String> = csv.lines().skip(1).map(last).collect();
    assert_eq!(launches[0].split(';').count(), 3, "{csv}");
    assert_eq!(launches[2], "");
    // Re-recorded from those launches, a model exact to each row's median of them misses.
    let noise: Vec<_> = r.groups.iter().map(|g| g.launch_noise.clone()).collect();
    assert!(
        noise[0].as_ref().is_some_and(|n| n.max_abs_pct > 0.0),
        "{noise:?}"
    );
    let shown = r.to_string();
    assert_eq!(shown.matches("launch medians").count(), 2, "{shown}");
    assert_eq!(shown.matches("ms: within)").count(), 1, "{shown}");
}

/// A validation table of collective rows on the testbed's star with its profile: one row per
/// `(method, sim_set)`, all with `topology_set`, `ranks`, `op_bytes` ("op,bytes") and
/// `measured_secs`.
fn star_rows(
    topology_set: &str,
    ranks: u32,
    op_bytes: &str,
    measured_secs: f64,
    methods: &[(&str, &str)],
) -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let star = root.join("testbed/topologies/star4_200mbit.toml");
    let profile = root.join("data/profiles/testbed_star4_200mbit.json");
    let mut text = String::from(
        "kind,topology,topology_set,ranks,method,op,bytes,sim_set,profile,measured_secs\n",
    );
    for (method, set) in methods {
        let _ = writeln!(
            text,
            "collective,{},{topology_set},{ranks},{method},{op_bytes},{set},{},{measured_secs}",
            star.display(),
            profile.display()
        );
    }
    text
}

#[test]
fn openmpi_rows_give_the_bounds_of_their_exchange_modes() {
    // A 16 MiB all_gather by recursive doubling on the testbed's star: both ways at once its
    // exchanges move 12 MiB one way (~0.53 s at the star's measured rate), one way after the
    // other nearly twice that; the median call, slow from its first step (two pairs entering
    // run slow 181 times in 320), is the slow bound within 1% (the bound sends every lower
    // rank's data first, the median way as its coins fall: on the star that moves only the
    // shapers' buckets). A ring exchanges with no partner: no modes.
    let text = star_rows(
        "",
        4,
        "all_gather,16777216",
        1.0,
        &[
            ("rd", "collective.library=mpi"),
            ("ring", "collective.library=mpi;collective.algorithm=ring"),
        ],
    );
    let r = validate_table("exchange-modes", &text);
    let (both, serial) = r.predictions[0].exchange_modes_secs.unwrap();
    let median = r.predictions[0].simulated_secs;
    assert!(both < median, "{both} {median}");
    assert!((median - serial).abs() < 0.01 * serial, "{median} {serial}");
    assert!((0.5..0.6).contains(&both), "{both}");
    assert!(serial > 1.9 * both, "{serial} vs {both}");
    assert_eq!(r.predictions[1].exchange_modes_secs, None);
    assert!(r.to_string().contains("exchange modes"), "{r}");
}

#[test]
fn gloo_rows_on_a_profile_with_wake_ups_give_the_span_of_their_plays() {
    // gloo on the testbed's star draws the hosts' wake-ups: the call is played 25 times and
    // predicted at the median play, which lies within the plays' span (wider than nothing
    // at 256 KiB on 8 hosts, where a drawn stall of milliseconds is a third of the call). An
    // ideal ring draws nothing: no span.
    let text = star_rows(
        "generator.n=8",
        8,
        "all_gather,262144",
        0.0134,
        &[
            ("gloo", "collective.library=gloo"),
            ("ideal", "collective.library=ideal"),
        ],
    );
    let r = validate_table("plays", &text);
    let (fastest, slowest) = r.predictions[0].plays_secs.unwrap();
    let predicted = r.predictions[0].simulated_secs;
    assert!(
        fastest <= predicted && predicted <= slowest,
        "{fastest} {predicted} {slowest}"
    );
    assert!(slowest > fastest + 1e-3, "{fastest} {slowest}");
    assert_eq!(r.predictions[1].plays_secs, None);
    assert!(r.to_string().contains("(plays "), "{r}");
    assert!(r
        .predictions_csv()
        .lines()
        .next()
        .unwrap()
        .contains("plays_fastest_secs"));
}

#[test]
fn the_gates_name_every_scored_group_outside_them_and_ignore_unscored_ones() {
    let group = |name: &str, rows: usize, median: f64, max: f64| GroupError {
        dataset: "d".into(),
        group: name.into(),
        rows,
        calibration_rows: 0,
        median_abs_pct: median,
        max_abs_pct: max,
        fit: None,
        within_range: None,
        launch_noise: None,
    };
    let report = Report {
        predictions: Vec::new(),
        groups: vec![
            group("tight", 4, 1.0, 4.0),
            group("spread", 4, 2.0, 12.0),
            group("biased", 4, 5.0, 6.0),
            group("only fitted", 0, 50.0, 90.0),
        ],
        skipped: Vec::new(),
        replayed_on: Vec::new(),
    };
    assert_eq!(
        report.outside(Some(3.0), Some(10.0)),
        (vec!["d spread".to_string(), "d biased".to_string()], 3)
    );
    assert_eq!(report.outside(Some(3.0), None).0, vec!["d biased"]);
    assert_eq!(report.outside(None, Some(10.0)).0, vec!["d spread"]);
    assert!(report.outside(None, None).0.is_empty());
}

#[test]
fn a_group_outside_misses_within_the_launch_spread_when_every_row_off_lies_between_launches() {
    // Rows measured at 100 ms; `predicted` ms, and the launches' medians from `launches`.
    let row = |group: &str, predicted: f64, launches: Option<(f64, f64)>| Prediction {
        dataset: "d".into(),
        group: group.into(),
        row: 0,
        label: format!("{group} {predicted}"),
        measured_secs: 0.100,
        simulated_secs: predicted / 1e3,
        predicted_secs: predicted / 1e3,
        calibration: false,
        scored: true,
        measured_range_secs: None,
        exchange_modes_secs: None,
        plays_secs: None,
        launch_range_secs: launches.map(|(lo, hi)| (lo / 1e3, hi / 1e3)),
        launch_medians_secs: launches
            .map(|(lo, hi)| vec![lo / 1e3, hi / 1e3])
            .unwrap_or_default(),
        call: None,
    };
    let report = Report {
        predictions: vec![
            // 8% off, but a launch ran at 95 and one at 110: within; the 1% row does not count.
            row("noisy", 108.0, Some((95.0, 110.0))),
            row("noisy", 101.0, None),
            // One row off beyond every launch.
            row("biased", 108.0, Some((95.0, 110.0))),
            row("biased", 115.0, Some((95.0, 110.0))),
            // Off, and no launches recorded apart.
            row("pooled", 108.0, None),
        ],
        ..Report::default()
    };
    let outside: Vec<String> = ["d noisy", "d biased", "d pooled"].map(String::from).into();
    assert_eq!(report.within_launch_spread(&outside, 3.0), vec!["d noisy"]);
    // Every row within 10%: none is off, so none is marked.
    assert!(report.within_launch_spread(&outside, 20.0).is_empty());
}

#[test]
fn set_replays_testbed_rows_with_more_scenario_keys_and_nothing_else() {
    let dir = std::env::temp_dir().join(format!("dtsim-validate-set-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (topo, sim) = ring_all_reduce_on_star8();
    let csv = dir.join("runs.csv");
    std::fs::write(
        &csv,
        format!(
            "kind,topology,topology_set,ranks,method,op,bytes,sim_set,profile,measured_secs\n\
             collective,{},,4,ring,all_reduce,4194304,collective.algorithm=ring,,{sim}\n",
            topo.display()
        ),
    )
    .unwrap();
    let flow = validate(std::slice::from_ref(&csv), &Options::default()).unwrap();
    let opts = Options {
        set: vec!["network.model=packet".into()],
        ..Options::default()
    };
    let packet = validate(std::slice::from_ref(&csv), &opts).unwrap();
    let (f, p) = (&flow.predictions[0], &packet.predictions[0]);
    assert_eq!(f.simulated_secs, sim);
    // Packets stored and forwarded at every hop: a little slower than the fluid flows.
    assert!(
        p.simulated_secs > sim && p.simulated_secs < 1.05 * sim,
        "{} vs {sim}",
        p.simulated_secs
    );
    let ddp = dir.join("ddp.csv");
    std::fs::write(&ddp, "sec_per_iter\n1.0\n").unwrap();
    let err = validate(&[ddp], &opts).unwrap_err();
    assert!(err.contains("--set replays testbed datasets"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}
