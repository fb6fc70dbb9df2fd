//! `calibrate gpu`: measuring this machine's GPUs. [`libs`] checks the libraries before any
//! call into CUDA, [`launch`] reads the multi-node environment and shares the NCCL id,
//! [`nccl`] loads NCCL, [`measure`] runs the measurements.

pub mod launch;
pub mod libs;
pub mod measure;
pub mod nccl;
