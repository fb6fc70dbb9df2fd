//! Numbers for people: three significant digits, units that fit the magnitude.

pub use sim::units::{fmt_bits_per_s as bits_per_s, fmt_bytes as bytes};

/// A plain number with three significant digits (`0.123`, `12.3`, `1234`), `0` for zero.
pub fn num(v: f64) -> String {
    if v == 0.0 || !v.is_finite() {
        return "0".into();
    }
    let a = v.abs();
    if a >= 100.0 {
        format!("{v:.0}")
    } else if a >= 10.0 {
        format!("{v:.1}")
    } else if a >= 1.0 {
        format!("{v:.2}")
    } else {
        let digits = (-a.log10()).floor() as usize + 3;
        format!("{v:.digits$}")
    }
}

/// A duration given in microseconds: `850 ns`, `12.3 us`, `4.56 ms`, `1.23 s`.
pub fn time_us(us: f64) -> String {
    let a = us.abs();
    if a >= 1e6 {
        format!("{} s", num(us / 1e6))
    } else if a >= 1e3 {
        format!("{} ms", num(us / 1e3))
    } else if a >= 1.0 || a == 0.0 {
        format!("{} us", num(us))
    } else {
        format!("{} ns", num(us * 1e3))
    }
}

/// Bytes per second as GB/s (10^9).
pub fn gbytes_per_s(gb_per_s: f64) -> String {
    format!("{} GB/s", num(gb_per_s))
}

pub fn pct(v: f64) -> String {
    format!("{}%", num(v))
}

/// Length of the union of intervals.
pub fn union_us(iv: impl Iterator<Item = (f64, f64)>) -> f64 {
    let mut v: Vec<(f64, f64)> = iv.filter(|(a, b)| b > a).collect();
    v.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut total = 0.0;
    let mut cur: Option<(f64, f64)> = None;
    for (a, b) in v {
        match cur {
            Some((s, e)) if a <= e => cur = Some((s, e.max(b))),
            Some((s, e)) => {
                total += e - s;
                cur = Some((a, b));
            }
            None => cur = Some((a, b)),
        }
    }
    if let Some((s, e)) = cur {
        total += e - s;
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_have_three_significant_digits_and_fitting_units() {
        assert_eq!(num(12.345), "12.3");
        assert_eq!(num(0.012345), "0.0123");
        assert_eq!(num(123456.0), "123456");
        assert_eq!(time_us(0.5), "500 ns");
        assert_eq!(time_us(4560.0), "4.56 ms");
        assert_eq!(time_us(2.5e6), "2.50 s");
        assert_eq!(gbytes_per_s(123.4), "123 GB/s");
        assert_eq!(pct(7.25), "7.25%");
    }

    #[test]
    fn overlapping_intervals_count_once() {
        assert_eq!(
            union_us([(0.0, 2.0), (1.0, 3.0), (5.0, 6.0)].into_iter()),
            4.0
        );
    }
}
