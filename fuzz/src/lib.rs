//! Fuzzing of every parser `dtsim` and `calibrate` read, on stable Rust: a seeded,
//! structure-aware mutator ([`mutate`]) over the files the repository ships ([`targets`]), run
//! by a harness that catches panics, times every case and keeps the inputs that failed
//! ([`harness`]). `dtsim-fuzz` runs it with a case budget; `cargo test -p fuzz` runs a short
//! budget and replays `fuzz/corpus/`, the inputs that once panicked, hung or misled.

pub mod alloc;
pub mod harness;
pub mod mutate;
pub mod targets;
