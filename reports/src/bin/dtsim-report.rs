//! `dtsim-report`: HTML reports with figures from dtsim results, and sweep results as Parquet.
//!
//! ```text
//! dtsim-report RESULTS... --out DIR [--title TITLE] [--bar MEDIAN,MAX]
//! dtsim-report merge SWEEP_DIR... [--out DIR]
//! dtsim-report whatif BEFORE[@TOPOLOGY] AFTER[@TOPOLOGY] --out DIR [--title TITLE]
//! ```
//! RESULTS: sweep directories, run directories (`dtsim run --out`), results .csv/.parquet,
//! validation CSVs (predicted and measured columns), `dtsim validate --out` error tables
//! (`errors.csv`: the groups within `--bar`), scenario .toml files (bandwidth heatmap).

use std::path::PathBuf;
use std::process::ExitCode;

const USAGE: &str = "usage:
  dtsim-report RESULTS... --out DIR [--title TITLE] [--bar MEDIAN,MAX]
      RESULTS: sweep directories (results.csv/.parquet or points/), run directories
      (summary.json from `dtsim run --out`), results or validation .csv/.parquet files,
      `dtsim validate --out` error tables (errors.csv; one table of the method groups whose
      median and largest |error| are within --bar, in percent, default 3,10), scenario .toml
      files (GPU x GPU bandwidth). Writes DIR/index.html, DIR/figures/*.svg, DIR/tables/*.csv
      (and *.md for tables without a figure).
  dtsim-report merge SWEEP_DIR... [--out DIR]
      Merges sweep points (e.g. shards) into DIR/results.csv and DIR/results.parquet
      (default DIR: the first SWEEP_DIR).
  dtsim-report whatif BEFORE[@TOPOLOGY] AFTER[@TOPOLOGY] --out DIR [--title TITLE]
      A what-if scored: two `dtsim validate --out` predictions.csv files (or their folders),
      rows paired by method and label (a topology picks one system's rows where a file holds
      several); per row the measured and predicted before/after ratios and the predicted
      ratio's error. Writes DIR/index.html and DIR/tables/*.csv, *.md.";

fn main() -> ExitCode {
    sim::pipe::end_quietly_on_closed_pipe();
    let args: Vec<String> = std::env::args().skip(1).collect();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}

fn run(args: &[String]) -> Result<(), String> {
    let mut inputs: Vec<PathBuf> = Vec::new();
    let mut out: Option<PathBuf> = None;
    let mut title: Option<String> = None;
    let mut bar = reports::study::groups::Bar::default();
    let merge = args.first().is_some_and(|a| a == "merge");
    let whatif = args.first().is_some_and(|a| a == "whatif");
    let mut it = args.iter().skip(usize::from(merge || whatif));
    while let Some(a) = it.next() {
        match a.as_str() {
            "-h" | "--help" => {
                println!("{USAGE}");
                return Ok(());
            }
            "--out" => out = Some(it.next().ok_or("--out needs a directory")?.into()),
            "--title" => title = Some(it.next().ok_or("--title needs a text")?.clone()),
            "--bar" => {
                bar =
                    reports::study::groups::Bar::parse(it.next().ok_or("--bar needs MEDIAN,MAX")?)?
            }
            s if s.starts_with("--") => return Err(format!("unknown option {s}\n{USAGE}")),
            s => inputs.push(s.into()),
        }
    }
    if inputs.is_empty() {
        return Err(format!("no inputs\n{USAGE}"));
    }
    if merge {
        let dir = out.unwrap_or_else(|| inputs[0].clone());
        let (rows, missing, files) = reports::data::merge_to_parquet(&inputs, &dir)?;
        for f in &files {
            println!("wrote {}", f.display());
        }
        println!(
            "{rows} points{}",
            if missing > 0 {
                format!(", {missing} missing (run the sweep again to finish them)")
            } else {
                String::new()
            }
        );
        return Ok(());
    }
    let out = out.ok_or(format!("--out DIR is required\n{USAGE}"))?;
    let sections = if whatif {
        let [before, after] = &inputs[..] else {
            return Err(format!("whatif: two inputs, BEFORE and AFTER\n{USAGE}"));
        };
        let side = |p: &PathBuf| reports::study::whatif::parse_side(&p.to_string_lossy());
        vec![reports::study::whatif::whatif_section(
            &side(before),
            &side(after),
        )?]
    } else {
        reports::study::build_with(&inputs, bar)?
    };
    let title = title.unwrap_or_else(|| {
        let names: Vec<String> = sections.iter().map(|s| s.heading.clone()).collect();
        format!("dtsim report: {}", names.join(", "))
    });
    let files = reports::page::write(&out, &title, &sections)?;
    let figures: usize = sections.iter().map(|s| s.figures.len()).sum();
    println!(
        "wrote {} ({figures} figures, {} files)",
        out.join("index.html").display(),
        files.len()
    );
    Ok(())
}
