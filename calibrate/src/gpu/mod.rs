//! `calibrate gpu`: measuring this machine's GPUs. [`libs`] checks the driver before any call
//! into CUDA, [`discover`] finds cuBLAS and NCCL inside Python wheels, [`cublas`] and [`nccl`]
//! load them, [`launch`] reads the multi-node environment and shares the NCCL id, [`layers`]
//! plans the catalog models' layer GEMMs, [`measure`] runs the measurements.

pub mod cublas;
pub mod discover;
pub mod launch;
pub mod layers;
pub mod libs;
pub mod measure;
pub mod nccl;
