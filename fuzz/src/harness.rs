//! Runs cases of a target and counts what happened: accepted, refused with an error, panicked,
//! slow. Case `i` of target `t` under seed `s` is mutated from its own seed
//! ([`case_seed`]), so any one case is reproduced alone (`dtsim-fuzz --target t --seed s
//! --case i --print`).
//!
//! A case that runs past the hang limit cannot be stopped in-process: a watchdog prints its
//! reproducer and aborts (exit code 3), as the capped allocator does for a huge allocation.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::mutate::Mutator;
use crate::targets::Target;

/// What a batch of cases of one target did.
#[derive(Debug, Clone, Default)]
pub struct Tally {
    pub cases: u64,
    pub accepted: u64,
    pub refused: u64,
    /// (case index, panic message, input).
    pub panics: Vec<(u64, String, String)>,
    /// (case index, milliseconds) of cases slower than the slow limit.
    pub slow: Vec<(u64, f64)>,
    pub max_ms: f64,
    pub wall_secs: f64,
}

/// How a batch runs.
#[derive(Debug, Clone)]
pub struct Budget {
    pub seed: u64,
    pub cases: u64,
    /// Cases slower than this are listed (not failures: a progress bar covers long runs).
    pub slow_ms: f64,
    /// A case running longer than this aborts the process with its reproducer.
    pub hang_secs: u64,
}

/// The seed of case `i` of `target` in a run seeded `seed` (SplitMix64 of the three).
pub fn case_seed(seed: u64, target: Target, i: u64) -> u64 {
    let mut z = seed ^ (target as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ i.rotate_left(17);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The seeds of a target, read: (path, text).
pub fn load_seeds(target: Target, repo: &Path) -> Vec<(PathBuf, String)> {
    target
        .seed_paths(repo)
        .into_iter()
        .filter_map(|p| std::fs::read_to_string(&p).ok().map(|t| (p, t)))
        .collect()
}

/// The input of case `i`: which seed it mutates, and the mutant.
pub fn case_input(
    target: Target,
    seeds: &[(PathBuf, String)],
    seed: u64,
    i: u64,
) -> (usize, String) {
    let cs = case_seed(seed, target, i);
    let k = ChaCha8Rng::seed_from_u64(cs).random_range(0..seeds.len());
    let donors: Vec<String> = seeds.iter().map(|(_, t)| t.clone()).collect();
    let text = Mutator::new(cs).mutate(&seeds[k].1, &donors);
    (k, text)
}

// The case in flight, for the watchdog and the allocator (atomics: no allocation to read them).
static CUR_TARGET: AtomicUsize = AtomicUsize::new(usize::MAX);
static CUR_SEED: AtomicU64 = AtomicU64::new(0);
static CUR_CASE: AtomicU64 = AtomicU64::new(0);
static CUR_STARTED_MS: AtomicU64 = AtomicU64::new(0);

fn epoch_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

fn print_current_case(why: &str) {
    use std::io::Write as _;
    let t = CUR_TARGET.load(Ordering::SeqCst);
    let name = Target::ALL.get(t).map_or("?", |t| t.name());
    let _ = writeln!(
        std::io::stderr(),
        "dtsim-fuzz: {why} in case: --target {name} --seed {} --case {} (add --print for the input)",
        CUR_SEED.load(Ordering::SeqCst),
        CUR_CASE.load(Ordering::SeqCst),
    );
}

/// Called by [`crate::alloc::Capped`] on a refused allocation.
pub fn report_current_case_and_abort(bytes: usize) -> ! {
    use std::io::Write as _;
    let _ = writeln!(
        std::io::stderr(),
        "dtsim-fuzz: an allocation of {bytes} bytes (above the cap)"
    );
    print_current_case("allocation refused");
    std::process::abort()
}

/// Starts the watchdog (once per process): aborts when one case runs past `hang_secs`.
fn watchdog(hang_secs: u64) {
    static STARTED: std::sync::Once = std::sync::Once::new();
    STARTED.call_once(|| {
        std::thread::spawn(move || loop {
            std::thread::sleep(Duration::from_millis(500));
            let started = CUR_STARTED_MS.load(Ordering::SeqCst);
            if started > 0 && epoch_ms().saturating_sub(started) > hang_secs * 1000 {
                print_current_case(&format!("no answer after {hang_secs} s"));
                std::process::exit(3);
            }
        });
    });
}

thread_local! {
    static LAST_PANIC: std::cell::RefCell<String> = const { std::cell::RefCell::new(String::new()) };
    static IN_CASE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Keeps the panic messages of cases for the tally instead of printing them; other panics (a
/// test's own assertions) go to the default hook.
fn quiet_panics() {
    static SET: std::sync::Once = std::sync::Once::new();
    SET.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if IN_CASE.with(|c| c.get()) {
                let msg = format!("{info}");
                LAST_PANIC.with(|p| *p.borrow_mut() = msg);
            } else {
                default(info);
            }
        }));
    });
}

/// Names the case about to run, for the watchdog's and the allocator's reproducer.
pub fn mark_case(target: Target, seed: u64, i: u64) {
    CUR_TARGET.store(target as usize, Ordering::SeqCst);
    CUR_SEED.store(seed, Ordering::SeqCst);
    CUR_CASE.store(i, Ordering::SeqCst);
}

/// Runs one case; `Err` holds the panic message.
pub fn run_case(
    target: Target,
    text: &str,
    seed_path: &Path,
    scratch: &Path,
) -> Result<bool, String> {
    quiet_panics();
    IN_CASE.with(|c| c.set(true));
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        target.check(text, seed_path, scratch).is_ok()
    }));
    IN_CASE.with(|c| c.set(false));
    outcome.map_err(|_| LAST_PANIC.with(|p| p.borrow().clone()))
}

/// Runs `budget.cases` cases of `target`, mutating the repository's seeds.
pub fn run(target: Target, repo: &Path, budget: &Budget) -> Result<Tally, String> {
    let seeds = load_seeds(target, repo);
    if seeds.is_empty() {
        return Err(format!(
            "{}: no seed files found under {}",
            target.name(),
            repo.display()
        ));
    }
    watchdog(budget.hang_secs);
    let scratch = std::env::temp_dir().join(format!(
        "dtsim-fuzz-{}-{}",
        std::process::id(),
        target.name()
    ));
    std::fs::create_dir_all(&scratch).map_err(|e| format!("{}: {e}", scratch.display()))?;
    let mut tally = Tally::default();
    let started = Instant::now();
    for i in 0..budget.cases {
        let (k, text) = case_input(target, &seeds, budget.seed, i);
        mark_case(target, budget.seed, i);
        CUR_STARTED_MS.store(epoch_ms(), Ordering::SeqCst);
        let t0 = Instant::now();
        let outcome = run_case(target, &text, &seeds[k].0, &scratch);
        let ms = t0.elapsed().as_secs_f64() * 1e3;
        CUR_STARTED_MS.store(0, Ordering::SeqCst);
        tally.cases += 1;
        tally.max_ms = tally.max_ms.max(ms);
        if ms > budget.slow_ms {
            tally.slow.push((i, ms));
        }
        match outcome {
            Ok(true) => tally.accepted += 1,
            Ok(false) => tally.refused += 1,
            Err(msg) => tally.panics.push((i, msg, text)),
        }
    }
    tally.wall_secs = started.elapsed().as_secs_f64();
    let _ = std::fs::remove_dir_all(&scratch);
    Ok(tally)
}
