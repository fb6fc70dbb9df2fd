//! dtsim: a discrete-event simulator of the networks that distributed deep-learning training
//! runs on.
//!
//! Layers, each depending only on those above it in this list:
//! - [`units`]: human units in files (`"400Gbps"`, `"1.5us"`, `"16MiB"`); [`limits`]: the
//!   physically sensible range of each kind of value, for `dtsim` and `calibrate` alike
//! - [`engine`]: simulated time, the event queue, random streams
//! - [`topology`]: devices and links (petgraph), generators, routing
//! - [`net`]: network models (flow-level max-min sharing) behind one interface
//! - [`collective`]: collective algorithms as schedules of chunk transfers
//! - [`profile`]: calibration profiles (efficiency factors, provenance)
//! - [`workload`]: models, training-step DAGs, parallelism (above collective, below scenario)
//! - [`scenario`]: scenario files → simulations; [`metrics`]: what a run reports
//! - [`validate`]: measured runs replayed in the simulator, with their error

pub mod bench;
pub mod collective;
pub mod engine;
pub mod library;
pub mod limits;
pub mod metrics;
pub mod net;
pub mod pipe;
pub mod profile;
pub mod scenario;
pub mod stats;
mod toml_spans;
pub mod topology;
pub mod units;
pub mod validate;
pub mod workload;
