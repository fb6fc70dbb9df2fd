//! Every parser survives its mutants, and every input that once failed stays fixed.
//!
//! - `the_corpus_of_past_failures_gives_clear_errors`: each file of `fuzz/corpus/<target>/` is
//!   refused with an error (no panic); scenarios are also simulated under an event budget.
//! - `a_short_budget_of_every_target_finds_no_panic`: 400 mutants per target (CI, debug: overflow checks on).
//! - `a_long_budget_of_every_target_finds_no_panic` (ignored): 75,000 per target, the million
//!   cases of the closing note; faster as `cargo run --release -p fuzz -- --cases 75000`.

use std::path::{Path, PathBuf};

use fuzz::harness::{self, Budget};
use fuzz::targets::Target;

#[global_allocator]
static ALLOC: fuzz::alloc::Capped = fuzz::alloc::Capped;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn corpus(target: Target) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(repo().join("fuzz/corpus").join(target.name()))
        .map(|rd| rd.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    v.sort();
    v
}

/// Runs a corpus scenario to its end with an event budget: a result or an error, never a
/// panic and never an unbounded run.
fn simulate(path: &Path) -> Result<(), String> {
    let s = sim::scenario::load(path, &[]).map_err(|e| e.to_string())?;
    let watch = sim::collective::play::Watch {
        max_events: Some(2_000_000),
        ..Default::default()
    };
    if s.file.workload.is_some() {
        sim::scenario::workload::run_workload(&s, watch).map_err(|e| e.to_string())?;
    } else {
        sim::scenario::run::run_watched(&s, watch).map_err(|e| e.to_string())?;
    }
    Ok(())
}

#[test]
fn the_corpus_of_past_failures_gives_clear_errors() {
    let scratch = std::env::temp_dir().join(format!("dtsim-fuzz-corpus-{}", std::process::id()));
    std::fs::create_dir_all(&scratch).unwrap();
    let mut seen = 0;
    for t in Target::ALL {
        for path in corpus(t) {
            let text = std::fs::read_to_string(&path).unwrap();
            seen += 1;
            match harness::run_case(t, &text, &path, &scratch) {
                Err(panic) => panic!("{}: panicked: {panic}", path.display()),
                Ok(accepted) if t == Target::Scenario => {
                    if accepted {
                        let outcome = std::panic::catch_unwind(|| simulate(&path));
                        let outcome = outcome.unwrap_or_else(|_| {
                            panic!("{}: the simulation panicked", path.display())
                        });
                        if let Err(e) = outcome {
                            assert!(
                                e.contains(path.to_str().unwrap()),
                                "{}: the error names the file: {e}",
                                path.display()
                            );
                        }
                    }
                }
                Ok(accepted) => assert!(
                    !accepted,
                    "{}: a past failure must now be refused with an error",
                    path.display()
                ),
            }
        }
    }
    assert!(seen >= 12, "the corpus has its {seen} files");
    std::fs::remove_dir_all(&scratch).unwrap();
}

#[test]
fn a_short_budget_of_every_target_finds_no_panic() {
    let budget = Budget {
        seed: 1,
        cases: 400,
        slow_ms: 10_000.0,
        hang_secs: 300,
    };
    for t in Target::ALL {
        let tally = harness::run(t, &repo(), &budget).unwrap();
        assert_eq!(tally.cases, 400);
        assert!(
            tally.panics.is_empty(),
            "{}: {} panics, first: case {} ({}); reproduce with \
             cargo run -p fuzz -- --target {} --seed 1 --case {} --print",
            t.name(),
            tally.panics.len(),
            tally.panics[0].0,
            tally.panics[0].1,
            t.name(),
            tally.panics[0].0
        );
        // The mutants are not all rejected at the first byte: some get through to the model.
        assert!(tally.accepted > 0, "{}: no mutant was accepted", t.name());
    }
}

#[test]
#[ignore = "a million cases: run with --release, or use dtsim-fuzz"]
fn a_long_budget_of_every_target_finds_no_panic() {
    let budget = Budget {
        seed: 20261124,
        cases: 75_000,
        slow_ms: 10_000.0,
        hang_secs: 60,
    };
    for t in Target::ALL {
        let tally = harness::run(t, &repo(), &budget).unwrap();
        assert!(
            tally.panics.is_empty(),
            "{}: {:?}",
            t.name(),
            tally.panics[0]
        );
    }
}
