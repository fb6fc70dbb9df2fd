//! Reports rendered from real simulator output: the page references every figure, figure files
//! exist, and each figure has the series / cells its data calls for.

use std::path::{Path, PathBuf};

use reports::figures::Figure;
use reports::study::Section;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("dtsim-report-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn collective_run(dir: &Path) -> PathBuf {
    let s = sim::scenario::load(&repo().join("scenarios/quickstart.toml"), &[]).unwrap();
    let out = dir.join("run");
    sim::scenario::run::run(&s)
        .unwrap()
        .write_dir(&out)
        .unwrap();
    out
}

fn workload_run(dir: &Path) -> PathBuf {
    let s = sim::scenario::load(
        &repo().join("scenarios/resnet18_weak_scaling.toml"),
        &["placement.ranks=8".to_string()],
    )
    .unwrap();
    let out = dir.join("step");
    sim::scenario::workload::run_workload(&s, Default::default())
        .unwrap()
        .write_dir(&out)
        .unwrap();
    out
}

fn sweep(dir: &Path, scenario: &Path, name: &str) -> PathBuf {
    let sw = sim::scenario::sweep::expand(scenario, &[]).unwrap();
    let out = dir.join(name);
    let opts = sim::scenario::sweep::SweepOptions {
        out: out.clone(),
        jobs: 2,
        shard: sim::scenario::sweep::Shard::ALL,
        limit: None,
        all_files: false,
        force: false,
    };
    let o = sim::scenario::sweep::run(&sw, &opts, &|_| {}).unwrap();
    assert!(o.failed.is_empty(), "{:?}", o.failed);
    out
}

fn collective_sweep(dir: &Path) -> PathBuf {
    let p = dir.join("sweep.toml");
    std::fs::write(
        &p,
        format!(
            r#"
name = "ring-sweep"
[topology]
file = "{}"
[collective]
op = "all_reduce"
bytes = "1MiB"
[sweep]
"collective.algorithm" = ["ring", "double_binary_tree", "direct"]
"collective.bytes" = ["64KiB", "1MiB", "16MiB"]
"placement.ranks" = [2, 4, 10]
"#,
            repo().join("topologies/ring10_10GBps.toml").display()
        ),
    )
    .unwrap();
    sweep(dir, &p, "collectives")
}

fn figure<'a>(sections: &'a [Section], suffix: &str) -> &'a Figure {
    sections
        .iter()
        .flat_map(|s| &s.figures)
        .find(|f| f.name.ends_with(suffix))
        .unwrap_or_else(|| panic!("no figure *{suffix}"))
}

#[test]
fn a_study_page_has_every_figure_inline_and_as_a_file() {
    let dir = scratch("study");
    let inputs = vec![
        collective_sweep(&dir),
        sweep(
            &dir,
            &repo().join("scenarios/resnet18_weak_scaling.toml"),
            "weak",
        ),
        sweep(
            &dir,
            &repo().join("scenarios/resnet18_strong_scaling.toml"),
            "strong",
        ),
        collective_run(&dir),
        workload_run(&dir),
        repo().join("topologies/../scenarios/quickstart.toml"),
    ];
    let sections = reports::study::build(&inputs).unwrap();
    let out = dir.join("report");
    reports::page::write(&out, "test study", &sections).unwrap();
    let html = std::fs::read_to_string(out.join("index.html")).unwrap();
    let figures: Vec<&Figure> = sections.iter().flat_map(|s| &s.figures).collect();
    assert!(figures.len() >= 18, "{} figures", figures.len());
    assert_eq!(
        html.matches("<svg").count(),
        figures.len(),
        "every SVG inline"
    );
    for f in &figures {
        let svg = out.join("figures").join(format!("{}.svg", f.name));
        let text = std::fs::read_to_string(&svg).unwrap();
        assert!(
            text.contains(
                &f.title
                    .replace('&', "&amp;")
                    .replace('<', "&lt;")
                    .replace('>', "&gt;")
            ) || text.contains("<text"),
            "{}",
            f.name
        );
        assert!(out.join("tables").join(format!("{}.csv", f.name)).is_file());
        assert!(html.contains(&format!("id=\"fig-{}\"", f.name)));
        assert!(html.contains(&format!("href=\"figures/{}.svg\"", f.name)));
        assert!(!f.table.rows.is_empty(), "{} has a table", f.name);
    }

    // scaling curves: one series per workload study, weak and strong told apart
    let thr = figure(&sections, "scaling-throughput");
    assert_eq!(thr.series, 2);
    let lines = thr
        .svg
        .lines()
        .filter(|l| l.contains("<polyline") && l.contains("stroke-width=\"2\""))
        .count();
    assert_eq!(lines, 2, "one drawn line per study");
    assert!(thr.svg.contains("resnet18-weak-scaling (weak)"));
    assert!(thr.svg.contains("resnet18-strong-scaling (strong)"));
    assert_eq!(thr.table.rows.len(), 5, "4, 8, 16, 32, 64 GPUs");
    let eff = figure(&sections, "scaling-efficiency");
    assert_eq!(eff.table.rows[0][1], "100%", "efficiency starts at 100%");

    // method comparison of the collective sweep: one line per algorithm
    let bw = figure(&sections, "busbw-vs-size");
    assert_eq!(bw.series, 3);
    for alg in ["ring", "double_binary_tree", "direct"] {
        assert!(
            bw.svg.contains(&format!(">\n{alg}\n</text>")),
            "legend names {alg}"
        );
    }
    assert_eq!(
        bw.table
            .rows
            .iter()
            .map(|r| r[0].as_str())
            .collect::<Vec<_>>(),
        ["64.0 KiB", "1.00 MiB", "16.0 MiB"]
    );
    assert!(bw.svg.contains("bus bandwidth (GB/s)"), "axis with unit");

    // compute vs communication: two stacked series over five variants
    let cc = figure(&sections, "weak-compute-vs-comm");
    assert_eq!(cc.series, 2);
    assert_eq!(cc.table.rows.len(), 5);

    // heatmaps: n x n cells
    let rs = figure(&sections, "run-traffic-reduce-scatter");
    assert_eq!(rs.cells, 100);
    assert!(rs.svg.matches("<rect").count() >= 100);
    let ag = figure(&sections, "step-traffic-all-gather");
    assert_eq!(ag.cells, 64);
    let bwm = figure(&sections, "quickstart-bandwidth");
    assert_eq!(bwm.cells, 100);
    assert_eq!(
        bwm.table.rows[0][2], "10.0 GB/s",
        "ring10 links are 10 GB/s"
    );

    // timelines: one legend entry per phase
    let tl = figure(&sections, "run-timeline");
    assert_eq!(tl.series, 2, "reduce-scatter and all-gather");
    let step = figure(&sections, "step-timeline");
    assert!(
        step.series >= 3,
        "forward, backward and communication phases"
    );
}

#[test]
fn validation_results_plot_predicted_against_measured_with_a_band() {
    let dir = scratch("validation");
    let p = dir.join("validation.csv");
    std::fs::write(
        &p,
        "run,measured_ms,predicted_ms\nresnet50 8 GPUs,100,104\nresnet50 16 GPUs,120,114\nvgg16 8 GPUs,300,330\n",
    )
    .unwrap();
    let sections = reports::study::build(&[p]).unwrap();
    let f = figure(&sections, "validation");
    assert_eq!(f.table.rows.len(), 3);
    assert_eq!(f.table.rows[2], ["vgg16 8 GPUs", "300", "330", "10.0%"]);
    assert!(f.svg.contains("predicted (ms)") && f.svg.contains("measured (ms)"));
    assert!(f.svg.contains("±10% band"));
    assert!(
        sections[0].text.contains("worst 10.0%"),
        "{}",
        sections[0].text
    );
}

#[test]
fn a_validate_predictions_csv_plots_its_runs_and_plays_as_bars_on_log_axes_when_wide() {
    // dtsim validate's predictions.csv: rows named by group and label; the measured runs'
    // range and the model's plays' range become bars, and values 1 ms to 4 s log axes.
    let dir = scratch("validation_bars");
    let p = dir.join("predictions.csv");
    std::fs::write(
        &p,
        "dataset,group,row,label,measured_secs,simulated_secs,predicted_secs,measured_min_secs,\
         measured_max_secs,plays_fastest_secs,plays_slowest_secs\n\
         tb,allgather @ star,1,256 KiB,0.0134,0.0121,0.0121,0.0091,0.0254,0.0094,0.0172\n\
         tb,allgather @ star,2,16 MiB,4.2,4.1,4.1,4.1,4.3,,\n",
    )
    .unwrap();
    let sections = reports::study::build(&[p]).unwrap();
    let f = figure(&sections, "validation");
    assert_eq!(f.table.rows[0][0], "allgather @ star: 256 KiB");
    assert!(f.svg.contains("log scale"), "values 300x apart");
    assert!(
        f.caption.contains("Bars: the measured runs' range"),
        "{}",
        f.caption
    );
    // Three bars: two runs' ranges, one plays' range (the 16 MiB row has none).
    let bars = f.svg.matches("stroke=\"#6E6E6E\"").count();
    assert_eq!(bars, 3, "{}", f.svg);
}

#[test]
fn sweep_points_merge_into_parquet_that_polars_reads_back() {
    let dir = scratch("parquet");
    let sw = collective_sweep(&dir);
    let (rows, missing, files) =
        reports::data::merge_to_parquet(std::slice::from_ref(&sw), &sw).unwrap();
    assert_eq!((rows, missing), (27, 0));
    let df = reports::data::read_table(&files[1]).unwrap();
    assert_eq!(df.height(), 27);
    let ranks = reports::data::f64s(&df, "ranks");
    assert_eq!(ranks[..3], [Some(2.0), Some(4.0), Some(10.0)]);
    assert_eq!(
        reports::data::strings(&df, "collective.algorithm")[26],
        "direct"
    );
}

/// Links in a `link_series.csv` whose column `col` is ever above zero.
fn links_with(csv: &Path, col: &str) -> usize {
    let text = std::fs::read_to_string(csv).unwrap();
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let c = header.iter().position(|h| *h == col).unwrap();
    let mut seen: Vec<String> = Vec::new();
    for l in lines {
        let f: Vec<&str> = l.split(',').collect();
        if f[c].parse::<f64>().unwrap() > 0.0 && !seen.iter().any(|s| s == f[0]) {
            seen.push(f[0].to_string());
        }
    }
    seen.len()
}

#[test]
fn runs_get_utilization_and_buffer_occupancy_over_time_charts() {
    let dir = scratch("series");
    let flow = collective_run(&dir);
    let s = sim::scenario::load(&repo().join("scenarios/ps_incast_lossless.toml"), &[]).unwrap();
    let packet = dir.join("incast");
    sim::scenario::run::run(&s)
        .unwrap()
        .write_dir(&packet)
        .unwrap();
    for d in [&flow, &packet] {
        assert!(d.join("link_series.csv").is_file(), "{}", d.display());
    }
    let sections = reports::study::build(&[flow.clone(), packet.clone()]).unwrap();
    let out = dir.join("report");
    reports::page::write(&out, "series", &sections).unwrap();
    let html = std::fs::read_to_string(out.join("index.html")).unwrap();

    // One series per busy link (at most 16), one per port that ever queued (at most 16).
    let util = figure(&sections[..1], "link-utilization-over-time");
    let want = links_with(&flow.join("link_series.csv"), "utilization").min(16);
    assert!(want > 0);
    assert_eq!(util.series, want);
    assert!(
        sections[..1]
            .iter()
            .flat_map(|s| &s.figures)
            .all(|f| !f.name.ends_with("buffer-occupancy-over-time")),
        "no buffers in the flow model"
    );
    let util_p = figure(&sections[1..], "link-utilization-over-time");
    assert_eq!(
        util_p.series,
        links_with(&packet.join("link_series.csv"), "utilization").min(16)
    );
    let occ = figure(&sections[1..], "buffer-occupancy-over-time");
    let want_occ = links_with(&packet.join("link_series.csv"), "max_occupancy_bytes").min(16);
    assert!(want_occ > 0, "the incast queues somewhere");
    assert_eq!(occ.series, want_occ);
    for f in [util, util_p, occ] {
        // Every series is a drawn line with its legend entry; time axis and units are labelled.
        assert!(f.svg.matches("<polyline").count() >= f.series, "{}", f.name);
        assert!(f.svg.contains("time (ms)") || f.svg.contains("time (us)"));
        assert!(f.svg.contains('→'), "legend names links");
        assert_eq!(f.table.rows.len(), 200, "one table row per bin");
        assert!(out
            .join("figures")
            .join(format!("{}.svg", f.name))
            .is_file());
        assert!(html.contains(&format!("href=\"figures/{}.svg\"", f.name)));
        assert!(html.contains(&format!("id=\"fig-{}\"", f.name)));
    }
    assert!(util.svg.contains("utilization (%)"));
    assert!(occ.svg.contains("buffer occupancy (bytes)"));
}

/// What `dtsim run --out DIR` writes for a scenario with `[[compare]]` variants: one folder per
/// variant, then `complete.json` of kind `compare`.
fn compare_run(dir: &Path) -> PathBuf {
    let out = dir.join("compare");
    let rows = sim::scenario::workload::run_study(
        &repo().join("scenarios/alexnet_ring10_ring_vs_hierarchical.toml"),
        &[],
        Default::default(),
    )
    .unwrap();
    let mut files = Vec::new();
    for r in &rows {
        files.extend(r.report.write_dir(&out.join(&r.label)).unwrap());
    }
    sim::metrics::run_dir::mark_complete(&out, "compare", &files).unwrap();
    out
}

#[test]
fn a_compare_run_folder_renders_the_variants_side_by_side_then_each_one() {
    let dir = scratch("compare");
    let run = compare_run(&dir);
    let sections = reports::study::build(&[run]).unwrap();
    // One comparison section, then one per variant (the scenario has four).
    assert_eq!(
        sections.len(),
        5,
        "{:?}",
        sections.iter().map(|s| &s.heading).collect::<Vec<_>>()
    );
    assert!(sections[0].heading.starts_with("Variants of"));
    for suffix in ["-throughput", "-step-time", "-compute-vs-comm"] {
        let f = figure(&sections, suffix);
        assert!(f.svg.contains("<svg"), "{suffix}");
    }
    assert!(sections[1..].iter().all(|s| s.heading.contains("variant")));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_bar_table_of_a_validation_folder_agrees_with_validates_own_gates() {
    // OpenMPI's two- and three-rank butterfly on the testbed, replayed by `dtsim validate`
    // and written as `--out` does; the report's table must count the groups the gates do.
    let dir = scratch("bar");
    let dataset = repo().join("data/runs/testbed_mpi_butterfly_heldout.csv");
    let report = sim::validate::validate(
        std::slice::from_ref(&dataset),
        &sim::validate::Options {
            calibrate_on: None,
            set: Vec::new(),
            score_on: None,
            out: None,
            leave_one_out_system: false,
        },
    )
    .unwrap();
    report.write_dir(&dir).unwrap();
    let (outside, scored) = report.outside(Some(3.0), Some(10.0));
    assert!(scored > 0 && !outside.is_empty() && outside.len() < scored);

    let sections = reports::study::build(&[dir.join("errors.csv")]).unwrap();
    let table = &sections[0].tables[0].1;
    let row = &table.rows[0];
    assert_eq!(row[0], "testbed_mpi_butterfly_heldout");
    assert_eq!(
        row[1],
        format!("{} of {scored}", scored - outside.len()),
        "{table:?}"
    );
    // What an exact model would have within, re-recorded from the launches: validate's count.
    let gates = sim::validate::Gates {
        max_median_error_pct: Some(3.0),
        max_error_pct: Some(10.0),
    };
    let (exact, _) = report.exact_model_within(&gates).unwrap();
    assert_eq!(row[2], format!("{exact:.1} of {scored}"), "{table:?}");
    let rows_scored = report.predictions.iter().filter(|p| p.scored).count();
    assert_eq!(row[3], rows_scored.to_string());
    for o in &outside {
        let group = o.trim_start_matches("testbed_mpi_butterfly_heldout ");
        assert!(row[5].contains(group), "{group} missing from {}", row[5]);
    }
    // The groups it marks as missing within their launches' spread are validate's.
    let marked: Vec<&str> = row[5]
        .split("; ")
        .filter(|g| g.ends_with(", within launches)"))
        .collect();
    let spread = report.within_launch_spread(&outside, 3.0);
    assert_eq!(marked.len(), spread.len(), "{marked:?} {spread:?}");
    for g in &spread {
        let group = g.trim_start_matches("testbed_mpi_butterfly_heldout ");
        assert!(
            marked.iter().any(|m| m.starts_with(group)),
            "{group}: {marked:?}"
        );
    }
    // The page writes the table as CSV and Markdown next to the HTML.
    let files = reports::page::write(&dir.join("page"), "bar", &sections).unwrap();
    let md = files
        .iter()
        .find(|f| f.extension().is_some_and(|x| x == "md"))
        .unwrap();
    assert!(std::fs::read_to_string(md)
        .unwrap()
        .contains("| testbed_mpi_butterfly_heldout |"));
}

#[test]
fn the_testbeds_what_if_pairs_every_method_and_size_of_the_two_leaves() {
    // The committed validation folders of the 2:1 leaves (among the star's rows) and of the
    // same leaves with their uplinks doubled: four gloo methods at four sizes on both.
    let v = repo().join("data/runs/validation");
    let side = |p: String| reports::study::whatif::parse_side(&p);
    let s = reports::study::whatif::whatif_section(
        &side(format!(
            "{}@two_level_2to1",
            v.join("testbed_gloo").display()
        )),
        &side(
            v.join("testbed_gloo_two_level_1to1_whatif")
                .display()
                .to_string(),
        ),
    )
    .unwrap();
    let t = &s.tables[0].1;
    assert_eq!(t.rows.len(), 16, "{t:?}");
    let methods: std::collections::BTreeSet<&str> = t.rows.iter().map(|r| r[0].as_str()).collect();
    assert_eq!(
        methods.into_iter().collect::<Vec<_>>(),
        ["allreduce", "hierarchical", "multiring", "ps"]
    );
    // Without the topology the folder's rows are ambiguous (the star's and the leaves'
    // all-reduce of 256 KiB): refused, naming the way out.
    let e = reports::study::whatif::whatif_section(
        &side(v.join("testbed_gloo").display().to_string()),
        &side(
            v.join("testbed_gloo_two_level_1to1_whatif")
                .display()
                .to_string(),
        ),
    )
    .unwrap_err();
    assert!(
        e.contains("more than one topology") && e.contains("@TOPOLOGY"),
        "{e}"
    );
}

#[test]
fn a_run_with_a_track_record_shows_it_as_a_table() {
    // OpenMPI's ring all-reduce of 1 MiB on three hosts of the testbed's star, written as
    // `dtsim run --out` writes it, track record included.
    let dir = scratch("track-record");
    let s = sim::scenario::load(
        &repo().join("scenarios/testbed_openmpi_allreduce.toml"),
        &[
            "collective.algorithm=ring".to_string(),
            "topology.generator.n=3".to_string(),
            "collective.bytes=1MiB".to_string(),
        ],
    )
    .unwrap();
    let report = sim::scenario::run::run(&s).unwrap();
    let out = dir.join("run");
    report.write_dir(&out).unwrap();
    let t = sim::validate::track_record::for_run(&s, &report).unwrap();
    std::fs::write(
        out.join("track_record.json"),
        serde_json::to_string_pretty(&t).unwrap(),
    )
    .unwrap();
    let sections = reports::study::build(&[out]).unwrap();
    let (title, table) = sections[0]
        .tables
        .iter()
        .find(|(title, _)| title.starts_with("Track record"))
        .unwrap();
    assert!(title.contains("mpi ring all_reduce"), "{title}");
    assert_eq!(table.rows.len(), 2);
    assert_eq!(table.rows[0][0], "all");
    assert_eq!(table.rows[0][1], t.all.rows.to_string());
    assert_eq!(
        table.rows[0][5],
        format!("{:.1}", t.all.median_abs_error_pct)
    );
    assert_eq!(table.rows[1][0], "nearest");
    // A run without one (the quickstart's ideal ring) has no such table.
    let other = scratch("no-track-record");
    let plain = reports::study::build(&[collective_run(&other)]).unwrap();
    assert!(!plain[0]
        .tables
        .iter()
        .any(|(title, _)| title.starts_with("Track record")));
    std::fs::remove_dir_all(&dir).unwrap();
    std::fs::remove_dir_all(&other).unwrap();
}
