//! Simulated time: an integer number of picoseconds.
//!
//! A 1500-byte packet at 800 Gb/s lasts 15 ns; nanosecond rounding would be a 3% error per
//! packet, so time is kept in picoseconds. `u64` picoseconds cover 213 days of simulated time.
//!
//! [`SimTime::MAX`] is the horizon: adding past it saturates there instead of wrapping, so an
//! overflowing input (a 2^32 batch, a 1 bps link) lands every later event exactly at the horizon,
//! and the driver that pops an event there stops with [`SimTime::HORIZON_DAYS`] in its error.

use std::fmt;
use std::ops::{Add, AddAssign, Sub};

/// A point in simulated time or a duration, in picoseconds.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Default,
    serde::Serialize,
    serde::Deserialize,
)]
#[serde(transparent)]
pub struct SimTime(u64);

impl SimTime {
    pub const ZERO: SimTime = SimTime(0);
    pub const MAX: SimTime = SimTime(u64::MAX);
    /// How far simulated time reaches, in whole days (2^64 ps = 213.5 days), for messages.
    pub const HORIZON_DAYS: u64 = u64::MAX / 1_000_000_000_000 / 86_400;

    pub const fn from_ps(ps: u64) -> Self {
        SimTime(ps)
    }
    pub const fn from_ns(ns: u64) -> Self {
        SimTime(ns * 1_000)
    }
    pub const fn from_us(us: u64) -> Self {
        SimTime(us * 1_000_000)
    }
    /// Seconds to picoseconds, rounded to nearest; negative or non-finite inputs saturate.
    pub fn from_secs_f64(secs: f64) -> Self {
        let ps = (secs * 1e12).round();
        if ps.is_nan() || ps <= 0.0 {
            SimTime(0)
        } else if ps >= u64::MAX as f64 {
            SimTime::MAX
        } else {
            SimTime(ps as u64)
        }
    }
    pub const fn as_ps(self) -> u64 {
        self.0
    }
    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 * 1e-12
    }
    pub fn as_us_f64(self) -> f64 {
        self.0 as f64 * 1e-6
    }
    pub fn saturating_add(self, other: SimTime) -> SimTime {
        SimTime(self.0.saturating_add(other.0))
    }
    pub fn saturating_sub(self, other: SimTime) -> SimTime {
        SimTime(self.0.saturating_sub(other.0))
    }
}

/// Saturates at the horizon ([`SimTime::MAX`]) instead of wrapping.
impl Add for SimTime {
    type Output = SimTime;
    fn add(self, rhs: SimTime) -> SimTime {
        self.saturating_add(rhs)
    }
}
impl AddAssign for SimTime {
    fn add_assign(&mut self, rhs: SimTime) {
        *self = self.saturating_add(rhs);
    }
}
impl Sub for SimTime {
    type Output = SimTime;
    fn sub(self, rhs: SimTime) -> SimTime {
        SimTime(self.0 - rhs.0)
    }
}

impl fmt::Display for SimTime {
    /// Prints with a unit chosen for people: `1.50 us`, `12.3 ms`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ps = self.0 as f64;
        let (v, unit) = if ps < 1e3 {
            (ps, "ps")
        } else if ps < 1e6 {
            (ps / 1e3, "ns")
        } else if ps < 1e9 {
            (ps / 1e6, "us")
        } else if ps < 1e12 {
            (ps / 1e9, "ms")
        } else {
            (ps / 1e12, "s")
        };
        write!(f, "{} {unit}", crate::units::three_digits(v))
    }
}
