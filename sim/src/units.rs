//! Human units in configuration files: sizes (`"16MiB"`, `"25MB"`), bandwidths (`"400Gbps"`,
//! `"25GB/s"`) and durations (`"1.5us"`, `"700ns"`).
//!
//! Owns parsing and formatting only. Parsed values are plain numbers whose units are in their
//! names: `bytes: u64`, `bits_per_s: f64`, `SimTime` picoseconds. Every parse error says what was
//! given and which units are accepted, so a file loader can add the file and field.
//!
//! Conventions (the same as nccl-tests and vendor datasheets):
//! - sizes: `B`, `KB`/`MB`/`GB`/`TB` are powers of 1000, `KiB`/`MiB`/`GiB`/`TiB` powers of 1024;
//!   a bare integer is bytes.
//! - bandwidths: `bps`, `Kbps`, `Mbps`, `Gbps`, `Tbps` are bits per second (powers of 1000);
//!   `B/s`, `KB/s`, `MB/s`, `GB/s`, `TB/s` (also `GBps`) are bytes per second (powers of 1000);
//!   `GiB/s` and friends are powers of 1024 bytes per second.
//! - durations: `ps`, `ns`, `us` (or `µs`), `ms`, `s`; rounded to the nearest picosecond.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;

use crate::engine::SimTime;

/// Why a unit string could not be read.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{what}: got {given:?}, expected {expected}")]
pub struct UnitError {
    pub what: &'static str,
    pub given: String,
    pub expected: &'static str,
}

const SIZE_EXPECTED: &str =
    "a size such as \"4096\", \"1500B\", \"64KiB\", \"16MiB\", \"25MB\" or \"1GiB\"";
const BW_EXPECTED: &str =
    "a bandwidth such as \"400Gbps\", \"100Gb/s\", \"25GB/s\", \"25GBps\" or \"12GiB/s\"";
const BYTES_RANGE: &str = "a size of at most 1 PiB (1125899906842624 bytes)";
const TIME_EXPECTED: &str = "a duration such as \"700ps\", \"1.5us\", \"2ns\", \"1ms\" or \"1s\"";

/// Splits `"1.5us"` into (1.5, "us"). Accepts an optional space between number and unit.
fn split_number(s: &str) -> Option<(f64, &str)> {
    let s = s.trim();
    let end = s
        .char_indices()
        .find(|&(i, c)| {
            !(c.is_ascii_digit()
                || c == '.'
                || c == '_'
                || ((c == 'e' || c == 'E')
                    && s[i + 1..]
                        .starts_with(|d: char| d.is_ascii_digit() || d == '-' || d == '+'))
                || ((c == '-' || c == '+') && (i == 0 || s[..i].ends_with(['e', 'E']))))
        })
        .map(|(i, _)| i)
        .unwrap_or(s.len());
    if end == 0 {
        return None;
    }
    let num: String = s[..end].chars().filter(|&c| c != '_').collect();
    let value: f64 = num.parse().ok()?;
    Some((value, s[end..].trim()))
}

fn finite_non_negative(v: f64) -> bool {
    v.is_finite() && v >= 0.0
}

/// Parses a size in bytes.
pub fn parse_bytes(s: &str) -> Result<u64, UnitError> {
    let err = || UnitError {
        what: "size",
        given: s.to_string(),
        expected: SIZE_EXPECTED,
    };
    let (v, unit) = split_number(s).ok_or_else(err)?;
    let mult: f64 = match unit {
        "" | "B" => 1.0,
        "KB" | "kB" => 1e3,
        "MB" => 1e6,
        "GB" => 1e9,
        "TB" => 1e12,
        "KiB" | "K" => 1024.0,
        "MiB" | "M" => 1024.0 * 1024.0,
        "GiB" | "G" => 1024.0 * 1024.0 * 1024.0,
        "TiB" | "T" => 1024.0f64.powi(4),
        _ => return Err(err()),
    };
    let bytes = v * mult;
    if !finite_non_negative(bytes) || bytes.fract() != 0.0 {
        return Err(err());
    }
    if bytes > crate::limits::BYTES_MAX as f64 {
        return Err(UnitError {
            what: "size",
            given: s.to_string(),
            expected: BYTES_RANGE,
        });
    }
    Ok(bytes as u64)
}

/// Parses a bandwidth into bits per second.
pub fn parse_bandwidth(s: &str) -> Result<f64, UnitError> {
    let err = || UnitError {
        what: "bandwidth",
        given: s.to_string(),
        expected: BW_EXPECTED,
    };
    let (v, unit) = split_number(s).ok_or_else(err)?;
    let bits: f64 = match unit {
        "bps" | "b/s" => 1.0,
        "Kbps" | "kbps" | "Kb/s" | "kb/s" => 1e3,
        "Mbps" | "Mb/s" => 1e6,
        "Gbps" | "Gb/s" => 1e9,
        "Tbps" | "Tb/s" => 1e12,
        "B/s" | "Bps" => 8.0,
        "KB/s" | "kB/s" | "KBps" => 8e3,
        "MB/s" | "MBps" => 8e6,
        "GB/s" | "GBps" => 8e9,
        "TB/s" | "TBps" => 8e12,
        "KiB/s" => 8.0 * 1024.0,
        "MiB/s" => 8.0 * 1024.0 * 1024.0,
        "GiB/s" => 8.0 * 1024.0 * 1024.0 * 1024.0,
        _ => return Err(err()),
    };
    let r = v * bits;
    if crate::limits::bandwidth_bps(r).is_err() {
        return Err(UnitError {
            what: "bandwidth",
            given: s.to_string(),
            expected: "a bandwidth from 1 Kbps to 10 Pbps, such as \"400Gbps\" or \"25GB/s\"",
        });
    }
    Ok(r)
}

/// Parses a duration into simulated time (picoseconds, rounded to nearest).
pub fn parse_duration(s: &str) -> Result<SimTime, UnitError> {
    let err = || UnitError {
        what: "duration",
        given: s.to_string(),
        expected: TIME_EXPECTED,
    };
    let (v, unit) = split_number(s).ok_or_else(err)?;
    let ps_per: f64 = match unit {
        "ps" => 1.0,
        "ns" => 1e3,
        "us" | "µs" | "μs" => 1e6,
        "ms" => 1e9,
        "s" => 1e12,
        _ => return Err(err()),
    };
    let ps = (v * ps_per).round();
    if !finite_non_negative(ps) || ps > u64::MAX as f64 {
        return Err(err());
    }
    Ok(SimTime::from_ps(ps as u64))
}

/// Formats bytes for people: `"1.00 GiB"`, `"64.0 KiB"`, `"512 B"`.
pub fn fmt_bytes(bytes: f64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = bytes;
    let mut i = 0;
    while v.abs() >= 1024.0 && i + 1 < UNITS.len() {
        v /= 1024.0;
        i += 1;
    }
    if i == 0 {
        format!("{v:.0} B")
    } else {
        format!("{} {}", three_digits(v), UNITS[i])
    }
}

/// Formats a rate in bytes per second as GB/s (powers of 1000, as nccl-tests prints).
pub fn fmt_gbytes_per_s(bytes_per_s: f64) -> String {
    format!("{:.2} GB/s", bytes_per_s / 1e9)
}

/// Formats a bandwidth in bits per second for people: `"400 Gbps"`.
pub fn fmt_bits_per_s(bits_per_s: f64) -> String {
    const UNITS: [&str; 5] = ["bps", "Kbps", "Mbps", "Gbps", "Tbps"];
    let mut v = bits_per_s;
    let mut i = 0;
    while v.abs() >= 1000.0 && i + 1 < UNITS.len() {
        v /= 1000.0;
        i += 1;
    }
    format!("{} {}", three_digits(v), UNITS[i])
}

/// Three significant digits without scientific notation.
pub fn three_digits(v: f64) -> String {
    let a = v.abs();
    if a >= 100.0 {
        format!("{v:.0}")
    } else if a >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// A size in bytes read from a human string (or a bare integer) in a config file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Bytes(pub u64);

/// A bandwidth in bits per second read from a human string in a config file.
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd, Default)]
pub struct Bandwidth(pub f64);

/// A duration read from a human string in a config file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Duration(pub SimTime);

impl Bandwidth {
    pub fn bits_per_s(self) -> f64 {
        self.0
    }
    pub fn bytes_per_s(self) -> f64 {
        self.0 / 8.0
    }
}

#[derive(Deserialize)]
#[serde(untagged)]
enum StrOrInt {
    Str(String),
    Int(u64),
    Float(f64),
}

impl<'de> Deserialize<'de> for Bytes {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match StrOrInt::deserialize(d)? {
            StrOrInt::Str(s) => parse_bytes(&s).map(Bytes).map_err(serde::de::Error::custom),
            StrOrInt::Int(i) if i > crate::limits::BYTES_MAX => Err(serde::de::Error::custom(
                format!("size: got {i}, expected {BYTES_RANGE}"),
            )),
            StrOrInt::Int(i) => Ok(Bytes(i)),
            StrOrInt::Float(f) => Err(serde::de::Error::custom(format!(
                "size: got {f}, expected {SIZE_EXPECTED}"
            ))),
        }
    }
}

impl<'de> Deserialize<'de> for Bandwidth {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match StrOrInt::deserialize(d)? {
            StrOrInt::Str(s) => parse_bandwidth(&s)
                .map(Bandwidth)
                .map_err(serde::de::Error::custom),
            StrOrInt::Int(_) | StrOrInt::Float(_) => Err(serde::de::Error::custom(format!(
                "bandwidth: a bare number has no unit; expected {BW_EXPECTED}"
            ))),
        }
    }
}

impl<'de> Deserialize<'de> for Duration {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match StrOrInt::deserialize(d)? {
            StrOrInt::Str(s) => parse_duration(&s)
                .map(Duration)
                .map_err(serde::de::Error::custom),
            StrOrInt::Int(0) => Ok(Duration(SimTime::ZERO)),
            StrOrInt::Int(_) | StrOrInt::Float(_) => Err(serde::de::Error::custom(format!(
                "duration: a bare number has no unit; expected {TIME_EXPECTED}"
            ))),
        }
    }
}

impl Serialize for Bytes {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(self.0)
    }
}
impl Serialize for Bandwidth {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&format!("{}bps", self.0))
    }
}
impl Serialize for Duration {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&format!("{}ps", self.0.as_ps()))
    }
}

impl fmt::Display for Bandwidth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&fmt_bits_per_s(self.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_use_decimal_and_binary_prefixes() {
        assert_eq!(parse_bytes("4096"), Ok(4096));
        assert_eq!(parse_bytes("1500B"), Ok(1500));
        assert_eq!(parse_bytes("25MB"), Ok(25_000_000));
        assert_eq!(parse_bytes("16MiB"), Ok(16 << 20));
        assert_eq!(parse_bytes("1GiB"), Ok(1 << 30));
        assert_eq!(parse_bytes("0.5KiB"), Ok(512));
        assert_eq!(parse_bytes("1_024"), Ok(1024));
    }

    #[test]
    fn bandwidths_distinguish_bits_and_bytes() {
        assert_eq!(parse_bandwidth("400Gbps"), Ok(400e9));
        assert_eq!(parse_bandwidth("100 Gb/s"), Ok(100e9));
        assert_eq!(parse_bandwidth("25GB/s"), Ok(200e9));
        assert_eq!(parse_bandwidth("25GBps"), Ok(200e9));
        assert_eq!(parse_bandwidth("1GiB/s"), Ok(8.0 * 1073741824.0));
    }

    #[test]
    fn durations_round_to_picoseconds() {
        assert_eq!(parse_duration("1.5us").unwrap().as_ps(), 1_500_000);
        assert_eq!(parse_duration("700ps").unwrap().as_ps(), 700);
        assert_eq!(parse_duration("2ns").unwrap().as_ps(), 2_000);
        assert_eq!(parse_duration("1ms").unwrap().as_ps(), 1_000_000_000);
        assert_eq!(parse_duration("1e-6s").unwrap().as_ps(), 1_000_000);
    }

    #[test]
    fn wrong_units_say_what_was_expected() {
        let e = parse_bandwidth("400Gbit").unwrap_err();
        assert!(e.to_string().contains("400Gbit"), "{e}");
        assert!(e.to_string().contains("Gbps"), "{e}");
        for out_of_range in ["0Gbps", "1bps", "1e-300Gbps", "1e30Tbps"] {
            let e = parse_bandwidth(out_of_range).unwrap_err().to_string();
            assert!(e.contains("from 1 Kbps to 10 Pbps"), "{e}");
        }
        let e = parse_bytes("1e30B").unwrap_err().to_string();
        assert!(e.contains("at most 1 PiB"), "{e}");
        assert!(parse_bytes("4294967296GiB").is_err());
        assert!(parse_bytes("12 parsecs").is_err());
        assert!(parse_bytes("-5B").is_err());
        assert!(parse_duration("3 fortnights").is_err());
        assert!(parse_bytes("").is_err());
    }

    #[test]
    fn formatting_is_for_people() {
        assert_eq!(fmt_bytes(512.0), "512 B");
        assert_eq!(fmt_bytes((1u64 << 30) as f64), "1.00 GiB");
        assert_eq!(fmt_bits_per_s(400e9), "400 Gbps");
        assert_eq!(fmt_gbytes_per_s(12.345e9), "12.35 GB/s");
    }
}
