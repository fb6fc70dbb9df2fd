//! Order statistics shared by everything that prints an error table (`dtsim validate`,
//! `dtsim nccl-tests --measured`, `calibrate fit-nccl`): one definition of the median, so the
//! three print the same number for the same errors.

use crate::engine::SimTime;

/// The median of `values`: the middle one, or the mean of the two middle ones for an even
/// count; NaN when empty. NaNs sort last (`f64::total_cmp`).
pub fn median(values: &[f64]) -> f64 {
    median_in_place(&mut values.to_vec())
}

/// [`median`] without the copy: sorts `values` (a hot loop's scratch buffer) and takes its
/// middle.
pub fn median_in_place(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    match n {
        0 => f64::NAN,
        _ if n % 2 == 1 => values[n / 2],
        _ => (values[n / 2 - 1] + values[n / 2]) / 2.0,
    }
}

/// The median of indexed times (a time and whose it is, e.g. a play or a timed call): the
/// middle time, or the mean of the two middle ones for an even count, with the index of the
/// lower middle one (equal times ordered by index); zero and index 0 when empty.
pub fn median_time(items: &[(SimTime, usize)]) -> (SimTime, usize) {
    let mut sorted = items.to_vec();
    sorted.sort_unstable();
    let n = sorted.len();
    if n == 0 {
        return (SimTime::ZERO, 0);
    }
    let (lo, hi) = (sorted[(n - 1) / 2], sorted[n / 2]);
    (SimTime::from_ps((lo.0.as_ps() + hi.0.as_ps()) / 2), lo.1)
}

#[cfg(test)]
mod tests {
    use super::median;

    #[test]
    fn an_even_count_takes_the_mean_of_the_two_middle_values() {
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), 2.5);
    }

    #[test]
    fn an_odd_count_takes_the_middle_value_whatever_the_order() {
        assert_eq!(median(&[9.0, 1.0, 5.0]), 5.0);
    }

    #[test]
    fn no_values_have_no_median() {
        assert!(median(&[]).is_nan());
    }
}
