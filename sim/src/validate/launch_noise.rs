//! How far a row's measured median would move if its launches were recorded again, and so the
//! error that a model exact to every row's median still meets: the measurements' own noise
//! floor, group by group.
//!
//! A testbed row pools several launches (a fresh mpirun or torchrun each) and names each one's
//! median (`launch_medians_secs`). Launches of one configuration can land in different modes (an
//! OpenMPI exchange both ways at once or one way first, a launch's TCP connections), so a row's
//! median is itself a draw. Here each row is re-recorded [`REPLICATES`] times by resampling its
//! launches with replacement (the bootstrap) and taking the median of the drawn launch medians;
//! a model that predicts the median of the recorded launch medians exactly is scored against
//! each re-recording, group by group as `validate` scores groups (median and max |error| over
//! the group's scored rows). Per group that gives the median over re-recordings of those two
//! errors (`errors.csv`: `launch_noise_median_abs_pct`, `launch_noise_max_abs_pct`) and, under
//! gates, how often the exact model is within them ([`LaunchNoise::within_share`]).
//!
//! A floor, not a forecast: five launches are few for a bootstrap, and a row whose launches all
//! landed in one mode by chance shows no spread. Rows that name fewer than two launches count
//! as exact (no error). Deterministic: each group draws from its own stream of a fixed seed,
//! named by its dataset and group, whatever else is validated beside it.

use super::cli::Gates;
use crate::engine::SimRng;
use crate::stats::{median, median_in_place};

/// Re-recordings drawn per group.
pub const REPLICATES: usize = 2000;

/// The seed the re-recordings are drawn from (each group a stream of its own).
pub const SEED: u64 = 0x6c61_756e_6368;

/// What re-recording a group's launches does to the errors of a model exact to its medians.
#[derive(Debug, Clone, PartialEq)]
pub struct LaunchNoise {
    /// Median over re-recordings of the group's median |error|, percent.
    pub median_abs_pct: f64,
    /// Median over re-recordings of the group's max |error|, percent.
    pub max_abs_pct: f64,
    /// Each re-recording's (median, max) |error|, percent.
    replicates: Vec<(f64, f64)>,
}

impl LaunchNoise {
    /// The share of re-recordings in which the exact model is within `gates`.
    pub fn within_share(&self, gates: &Gates) -> f64 {
        let within = self
            .replicates
            .iter()
            .filter(|(median, max)| gates.admits(*median, *max))
            .count();
        within as f64 / self.replicates.len() as f64
    }
}

/// The launch noise of one group's scored rows, each given by its launch medians (seconds; a
/// row with fewer than two counts as exact), drawn from the stream named `label` (the group's
/// dataset and name); `None` where no row names two launches or more.
pub fn of_group(rows: &[&[f64]], label: &str) -> Option<LaunchNoise> {
    let launches: Vec<&[f64]> = rows.iter().copied().filter(|l| l.len() >= 2).collect();
    if launches.is_empty() {
        return None;
    }
    let exact: Vec<f64> = launches.iter().map(|l| median(l)).collect();
    // Rows without launches are exact: a 0 in every re-recording's list.
    let exact_rows = rows.len() - launches.len();
    let mut rng = SimRng::new(SEED, 0).fork(label);
    let mut drawn = Vec::new();
    let mut errors = Vec::with_capacity(rows.len());
    let replicates: Vec<(f64, f64)> = (0..REPLICATES)
        .map(|_| {
            errors.clear();
            errors.resize(exact_rows, 0.0);
            for (l, exact) in launches.iter().zip(&exact) {
                drawn.clear();
                drawn.extend((0..l.len()).map(|_| l[rng.below(l.len() as u64) as usize]));
                let again = median_in_place(&mut drawn);
                errors.push((exact - again).abs() / again * 100.0);
            }
            let max = errors.iter().copied().fold(0.0, f64::max);
            (median_in_place(&mut errors), max)
        })
        .collect();
    let mut medians: Vec<f64> = replicates.iter().map(|r| r.0).collect();
    let mut maxima: Vec<f64> = replicates.iter().map(|r| r.1).collect();
    Some(LaunchNoise {
        median_abs_pct: median_in_place(&mut medians),
        max_abs_pct: median_in_place(&mut maxima),
        replicates,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const GATES: Gates = Gates {
        max_median_error_pct: Some(3.0),
        max_error_pct: Some(10.0),
    };

    #[test]
    fn launches_that_agree_leave_no_noise_and_rows_without_launches_none_to_measure() {
        let agree = [0.2, 0.2, 0.2, 0.2, 0.2];
        let noise = of_group(&[&agree], "d g").unwrap();
        assert_eq!((noise.median_abs_pct, noise.max_abs_pct), (0.0, 0.0));
        assert_eq!(noise.within_share(&GATES), 1.0);
        assert_eq!(of_group(&[&[], &[0.3]], "d g"), None);
    }

    #[test]
    fn launches_in_two_modes_move_the_median_between_them_about_as_often_as_the_binomial_says() {
        // Three launches fast (1.0 s), two slow (2.0 s): a re-recording of five draws has a
        // slow median when three or more are slow, with probability 0.317 at 2 in 5; the exact
        // model (1.0 s) is then 50% fast, else exact.
        let modes = [1.0, 1.0, 1.0, 2.0, 2.0];
        let noise = of_group(&[&modes], "d g").unwrap();
        let share = noise.within_share(&GATES);
        assert!((share - (1.0 - 0.317)).abs() < 0.03, "{share}");
        assert_eq!(noise.median_abs_pct, 0.0);
        assert!(noise
            .replicates
            .iter()
            .all(|&(m, x)| m == x && (m == 0.0 || m == 50.0)));
    }

    #[test]
    fn a_group_is_scored_as_validate_scores_it_median_and_max_over_its_rows() {
        // One row in two modes 10% apart, one with no launches (exact), one whose two launches
        // agree: the group's median is always 0, its max 0 or ~10%.
        let rows: [&[f64]; 3] = [&[1.0, 1.0, 1.0, 1.1, 1.1], &[], &[0.5, 0.5]];
        let noise = of_group(&rows, "d g").unwrap();
        assert!(noise.replicates.iter().all(|&(m, _)| m == 0.0));
        assert!(noise
            .replicates
            .iter()
            .any(|&(_, x)| (x - 100.0 / 11.0).abs() < 1e-9));
        let within_max_5 = Gates {
            max_median_error_pct: None,
            max_error_pct: Some(5.0),
        };
        assert!(noise.within_share(&within_max_5) < 1.0);
        assert_eq!(noise.within_share(&GATES), 1.0);
    }

    #[test]
    fn the_draws_are_the_groups_own_whatever_is_validated_beside_it() {
        let modes = [1.0, 1.0, 2.0, 2.0, 2.0];
        let a = of_group(&[&modes], "d g").unwrap();
        let b = of_group(&[&modes], "d g").unwrap();
        assert_eq!(a, b);
        let other = of_group(&[&modes], "d h").unwrap();
        assert_ne!(a.replicates, other.replicates);
    }
}
