//! The discrete-event kernel: simulated time, the event queue and the random streams.
//!
//! It knows nothing about networks, collectives or training. A simulation owns one
//! [`EventQueue`] of its own closed event enum and one [`SimRng`]; there is no global state, so
//! many simulations can run in one process and in parallel tests.
//!
//! # Ordering guarantee
//!
//! Events are delivered in non-decreasing time. Events scheduled for the same time are delivered
//! in the order they were scheduled (first in, first out), whichever component scheduled them.
//! Scheduling an event earlier than the time of the last delivered event is an error
//! ([`ScheduleError::InThePast`]), never a panic. Cancelling an event that was already delivered
//! or already cancelled is allowed and does nothing. Together these make a run a pure function
//! of (scenario, seed).

mod queue;
mod rng;
mod time;

/// The binary-heap queue the event queue is tested and benchmarked against; not supported API.
#[doc(hidden)]
pub use queue::reference as queue_reference;
pub use queue::{EventHandle, EventQueue, ScheduleError};
pub use rng::SimRng;
pub use time::SimTime;
