//! What the `dtsim` command-line tests share: the repository root and running the binary there.

use std::path::PathBuf;
use std::process::{Command, Output};

pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Runs `dtsim args` in the repository root.
pub fn dtsim(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_dtsim"))
        .args(args)
        .current_dir(repo())
        .output()
        .expect("dtsim runs")
}
