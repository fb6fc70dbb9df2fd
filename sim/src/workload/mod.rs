//! Training workloads: the model catalog, per-layer compute times from a profile, training-step
//! DAGs for every parallelism, memory per GPU, and the metrics of a step.
//!
//! - [`catalog`]: models as layers (shapes, parameters, FLOPs, activations), model files
//! - [`compute`]: profile → time of each layer's forward and backward pass at a batch size
//! - [`eager`]: a step as PyTorch runs it op by op, the host issuing beside the GPU
//! - [`gemm_table`]: measured GEMM times looked up by a layer product's shape
//! - [`step`]: the training step as a [`Schedule`](crate::collective::Schedule) of compute ops
//!   and embedded collectives (DDP, all-reduce after backward, parameter server, DataParallel,
//!   gradient accumulation, tensor, pipeline and hybrid parallelism)
//! - [`memory`]: bytes per GPU and the largest batch that fits
//! - [`trace`]: recorded steps (PyTorch ET + Kineto, Chakra ET) replayed as step DAGs
//! - [`metrics`]: step time, throughput, compute vs communication, exposed communication

pub mod catalog;
pub mod compute;
pub mod eager;
pub mod gemm_table;
pub mod memory;
pub mod metrics;
pub mod step;
pub mod trace;
