//! What the `dtsim` command-line tests share: the repository root and running the binary there.

use std::path::PathBuf;
use std::process::{Command, Output};

pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Runs `dtsim args` in the repository root, without the Slurm array variables of an
/// enclosing job (`dtsim sweep` reads them to pick its shard).
pub fn dtsim(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_dtsim"))
        .args(args)
        .current_dir(repo())
        .env_remove("SLURM_ARRAY_TASK_ID")
        .env_remove("SLURM_ARRAY_TASK_COUNT")
        .output()
        .expect("dtsim runs")
}

/// A fresh, empty folder under the system's temporary directory, private to this test process.
pub fn scratch(prefix: &str, name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("dtsim-{prefix}-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}
