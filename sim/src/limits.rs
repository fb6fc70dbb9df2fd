//! What is physically sensible for each kind of input: one definition, read by every parser
//! of `dtsim` and `calibrate`.
//!
//! A value outside its range is an error naming the range, never clamped or dropped in
//! silence. The ranges are wide (a 1 kbit/s link, a 1 PiB collective, a million GPUs): they
//! exist to catch typos and unit slips (`"1bps"` for `"1Gbps"`, a rate of 10^30 bit/s, a
//! negative time) and sizes whose simulated time cannot be represented (see
//! [`crate::engine::SimTime::MAX`]), not to second-guess unusual systems.

/// Link and path bandwidths, in bits per second: 1 kbit/s to 10 Pbit/s.
pub const BANDWIDTH_BPS: (f64, f64) = (1e3, 1e16);
/// Link latencies and per-message overheads, in seconds: 0 to 1 s.
pub const LATENCY_MAX_SECS: f64 = 1.0;
/// Sizes of messages, collectives and buffers, in bytes: at most 1 PiB (2^50).
pub const BYTES_MAX: u64 = 1 << 50;
/// GPUs, ranks and hosts in one scenario or measured row: 1 to 2^20 (1,048,576).
pub const RANKS_MAX: u64 = 1 << 20;
/// Pipeline slices per step of a collective (NCCL uses 1 to 8; more than 4096 slices per step
/// describes no real pipeline).
pub const SLICES_MAX: u32 = 4096;
/// Measured durations, in seconds: 0 to a year.
pub const MEASURED_SECS_MAX: f64 = 365.0 * 86_400.0;

/// `Ok` for a bandwidth in [`BANDWIDTH_BPS`]; else what was expected.
pub fn bandwidth_bps(bps: f64) -> Result<f64, String> {
    let (lo, hi) = BANDWIDTH_BPS;
    if bps.is_finite() && (lo..=hi).contains(&bps) {
        Ok(bps)
    } else {
        Err(format!(
            "a bandwidth from 1 Kbps to 10 Pbps ({lo:e} to {hi:e} bit/s); got {bps:e} bit/s"
        ))
    }
}

/// `Ok` for a latency of 0 to [`LATENCY_MAX_SECS`].
pub fn latency_secs(secs: f64) -> Result<f64, String> {
    if secs.is_finite() && (0.0..=LATENCY_MAX_SECS).contains(&secs) {
        Ok(secs)
    } else {
        Err(format!("a latency from 0 to 1 s; got {secs:e} s"))
    }
}

/// `Ok` for a size of at most [`BYTES_MAX`].
pub fn bytes(b: u64) -> Result<u64, String> {
    if b <= BYTES_MAX {
        Ok(b)
    } else {
        Err(format!(
            "a size of at most 1 PiB ({BYTES_MAX} bytes); got {b} bytes"
        ))
    }
}

/// `Ok` for 1 to [`RANKS_MAX`] ranks (given as a float: measured tables carry `1e30` too).
pub fn ranks(n: f64) -> Result<u64, String> {
    if n.is_finite() && n >= 1.0 && n <= RANKS_MAX as f64 && n.fract() == 0.0 {
        Ok(n as u64)
    } else {
        Err(format!(
            "a whole number of GPUs from 1 to {RANKS_MAX}; got {n}"
        ))
    }
}

/// `Ok` for an efficiency or derating factor in (0, 1].
pub fn factor(f: f64) -> Result<f64, String> {
    if f.is_finite() && f > 0.0 && f <= 1.0 {
        Ok(f)
    } else {
        Err(format!(
            "a factor above 0 and at most 1 (a link delivers at most its rate); got {f}"
        ))
    }
}

/// `Ok` for a measured duration from 0 to [`MEASURED_SECS_MAX`].
pub fn measured_secs(secs: f64) -> Result<f64, String> {
    if secs.is_finite() && (0.0..=MEASURED_SECS_MAX).contains(&secs) {
        Ok(secs)
    } else {
        Err(format!("a measured time from 0 to a year; got {secs:e} s"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_edges_of_each_range_are_inside_it() {
        assert!(bandwidth_bps(1e3).is_ok() && bandwidth_bps(1e16).is_ok());
        assert!(latency_secs(0.0).is_ok() && latency_secs(1.0).is_ok());
        assert!(bytes(BYTES_MAX).is_ok());
        assert!(ranks(1.0).is_ok() && ranks(RANKS_MAX as f64).is_ok());
        assert!(factor(1.0).is_ok());
        assert!(measured_secs(0.0).is_ok());
    }

    #[test]
    fn typos_and_unit_slips_are_outside() {
        assert!(bandwidth_bps(1.0)
            .unwrap_err()
            .contains("1 Kbps to 10 Pbps"));
        assert!(bandwidth_bps(1e-300 * 1e9).is_err());
        assert!(bandwidth_bps(1e30).is_err());
        assert!(bandwidth_bps(f64::NAN).is_err());
        assert!(latency_secs(-1e-9).is_err() && latency_secs(2.0).is_err());
        assert!(bytes(BYTES_MAX + 1).unwrap_err().contains("at most 1 PiB"));
        assert!(ranks(1e30).is_err() && ranks(0.0).is_err() && ranks(2.5).is_err());
        assert!(factor(1e19).is_err() && factor(0.0).is_err() && factor(-0.5).is_err());
        assert!(measured_secs(-1.0).is_err() && measured_secs(f64::INFINITY).is_err());
    }
}
