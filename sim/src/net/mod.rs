//! Network models: how transfers share links over time.
//!
//! - [`maxmin`]: the bandwidth-sharing math (max-min fairness by progressive filling), a fast
//!   solver and a deliberately simple reference solver it must match.

pub mod maxmin;
