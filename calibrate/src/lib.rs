//! `calibrate`: produces the calibration profiles dtsim replays. Importers read logs users
//! already have ([`import`]), [`fit`] turns size sweeps into alpha-beta lines and factor tables,
//! [`build`] assembles [`sim::profile::Profile`]s with provenance, [`compute`] turns GEMM timings
//! into a profile's compute section, [`gpu`] measures real GPUs through cudarc, cuBLAS and NCCL,
//! and [`cli`] is the command line the thin `calibrate` binary runs.

pub mod build;
pub mod cli;
pub mod compute;
pub mod error;
pub mod fit;
pub mod fit_nccl;
pub mod gpu;
pub mod import;

pub use error::ImportError;
