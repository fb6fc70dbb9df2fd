//! Measured GEMM times looked up by a layer product's shape.
//!
//! `calibrate gpu` times every layer GEMM of the catalog models alone, at a few batch sizes, in
//! each of the three products training runs: the forward `C = A·W` (`m × n` from `k`), the input
//! gradient (`m × k` from `n`) and the weight gradient (`n × k` from `m`). A layer at another
//! batch has the same shape but along one coordinate, the one the batch multiplies: the rows of
//! the forward and input-gradient products and the reduction of the weight gradient for a
//! [`BatchAxis::Rows`] product, the count for a [`BatchAxis::Count`] one. So the table is keyed by
//! the shape with that coordinate blanked, and holds the measured values of the coordinate in
//! order: a lookup is exact, interpolated linearly between the two measured neighbours, or,
//! outside the measured range, the nearest measurement scaled in proportion (the convention of
//! measured layer times). Shapes never measured are the caller's to time another way.

use std::collections::HashMap;

use crate::profile::GemmTime;
use crate::workload::catalog::{BatchAxis, GemmShape};

/// The three products of a layer GEMM in training.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Pass {
    Forward,
    InputGrad,
    WeightGrad,
}

impl Pass {
    pub const ALL: [Pass; 3] = [Pass::Forward, Pass::InputGrad, Pass::WeightGrad];

    /// `(m, n, k, count)` of this product of a forward product `(m, n, k, count)`.
    pub fn shape(self, (m, n, k, c): (u64, u64, u64, u64)) -> (u64, u64, u64, u64) {
        match self {
            Pass::Forward => (m, n, k, c),
            Pass::InputGrad => (m, k, n, c),
            Pass::WeightGrad => (n, k, m, c),
        }
    }

    /// Which coordinate of [`Self::shape`] (0 m, 1 n, 2 k, 3 count) the batch multiplies.
    fn batch_coordinate(self, axis: BatchAxis) -> usize {
        match (axis, self) {
            (BatchAxis::Count, _) => 3,
            (BatchAxis::Rows, Pass::WeightGrad) => 2,
            (BatchAxis::Rows, _) => 0,
        }
    }
}

type Key = (usize, [u64; 4]);

/// The measured GEMMs of one number format, indexed for lookups by layer product.
#[derive(Debug, Clone, Default)]
pub struct GemmTable {
    /// (blanked coordinate, shape with it 0) → (coordinate value, seconds), by value.
    by_key: HashMap<Key, Vec<(u64, f64)>>,
}

impl GemmTable {
    /// The table of `times` measured in `dtype`; other formats are left out.
    pub fn new(times: &[GemmTime], dtype: &str) -> GemmTable {
        let mut by_key: HashMap<Key, Vec<(u64, f64)>> = HashMap::new();
        for t in times.iter().filter(|t| t.dtype == dtype && t.secs > 0.0) {
            let shape = [t.m, t.n, t.k, t.count];
            // Every coordinate may be the one a lookup varies: index the time under each.
            for coord in 0..4 {
                let mut key = shape;
                key[coord] = 0;
                by_key
                    .entry((coord, key))
                    .or_default()
                    .push((shape[coord], t.secs));
            }
        }
        for v in by_key.values_mut() {
            v.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.total_cmp(&b.1)));
            v.dedup_by_key(|e| e.0);
        }
        GemmTable { by_key }
    }

    pub fn is_empty(&self) -> bool {
        self.by_key.is_empty()
    }

    /// Seconds of product `pass` of `g` for `batch` samples, or `None` when no GEMM of that
    /// shape along the batch's coordinate was measured.
    pub fn pass_secs(&self, g: &GemmShape, pass: Pass, batch: u64) -> Option<f64> {
        let (m, n, k, c) = pass.shape(g.at_batch(batch.max(1)));
        let coord = pass.batch_coordinate(g.batch_axis);
        let mut key = [m, n, k, c];
        let want = key[coord];
        key[coord] = 0;
        let points = self.by_key.get(&(coord, key))?;
        let at = points.partition_point(|p| p.0 < want);
        let secs = match (at.checked_sub(1).map(|i| points[i]), points.get(at)) {
            (_, Some(&(v, s))) if v == want => s,
            (Some((v1, s1)), Some(&(v2, s2))) => {
                s1 + (s2 - s1) * (want - v1) as f64 / (v2 - v1) as f64
            }
            (Some((v, s)), None) | (None, Some(&(v, s))) => s * want as f64 / v as f64,
            (None, None) => return None,
        };
        Some(secs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(dtype: &str, m: u64, n: u64, k: u64, count: u64, secs: f64) -> GemmTime {
        GemmTime {
            dtype: dtype.into(),
            m,
            n,
            k,
            count,
            secs,
        }
    }

    /// A linear layer 768 → 3072 over 1024 tokens per sample, measured at batch 1 and 4.
    fn linear_table() -> GemmTable {
        GemmTable::new(
            &[
                t("bf16", 1024, 3072, 768, 1, 10e-6),
                t("bf16", 4096, 3072, 768, 1, 28e-6),
                t("bf16", 1024, 768, 3072, 1, 11e-6), // input gradient at batch 1
                t("bf16", 3072, 768, 1024, 1, 12e-6), // weight gradient at batch 1
                t("fp32", 1024, 3072, 768, 1, 99e-6),
            ],
            "bf16",
        )
    }

    #[test]
    fn a_measured_shape_is_read_back_exactly_in_each_product() {
        let g = GemmShape::rows(1024, 3072, 768, 1);
        let tab = linear_table();
        assert_eq!(tab.pass_secs(&g, Pass::Forward, 1), Some(10e-6));
        assert_eq!(tab.pass_secs(&g, Pass::InputGrad, 1), Some(11e-6));
        assert_eq!(tab.pass_secs(&g, Pass::WeightGrad, 1), Some(12e-6));
    }

    #[test]
    fn batches_between_measurements_interpolate_and_beyond_them_scale() {
        let g = GemmShape::rows(1024, 3072, 768, 1);
        let tab = linear_table();
        // Batch 2: 2048 rows, a third of the way from 1024 to 4096.
        let mid = tab.pass_secs(&g, Pass::Forward, 2).unwrap();
        assert!((mid - (10e-6 + 18e-6 / 3.0)).abs() < 1e-15, "{mid}");
        // Batch 8: twice the largest measured.
        assert!((tab.pass_secs(&g, Pass::Forward, 8).unwrap() - 56e-6).abs() < 1e-15);
        // The weight gradient at batch 2 reduces over 2048 rows: scaled from its one point.
        assert!((tab.pass_secs(&g, Pass::WeightGrad, 2).unwrap() - 24e-6).abs() < 1e-15);
    }

    #[test]
    fn other_shapes_and_formats_are_not_guessed() {
        let tab = linear_table();
        assert_eq!(
            tab.pass_secs(&GemmShape::rows(1024, 4096, 768, 1), Pass::Forward, 1),
            None
        );
        assert!(GemmTable::new(&[t("bf16", 1, 1, 1, 1, 1e-6)], "tf32").is_empty());
    }

    #[test]
    fn per_head_products_vary_in_their_count() {
        // Attention's Q·Kᵀ: 12 heads of 1024 × 1024 from 64 per sample.
        let g = GemmShape {
            m_per_sample: 1024,
            n: 1024,
            k: 64,
            count: 12,
            batch_axis: BatchAxis::Count,
        };
        let tab = GemmTable::new(
            &[
                t("bf16", 1024, 1024, 64, 12, 20e-6),
                t("bf16", 1024, 1024, 64, 96, 100e-6),
            ],
            "bf16",
        );
        assert_eq!(tab.pass_secs(&g, Pass::Forward, 8), Some(100e-6));
        let b4 = tab.pass_secs(&g, Pass::Forward, 4).unwrap();
        assert!((b4 - (20e-6 + 80e-6 * 36.0 / 84.0)).abs() < 1e-15, "{b4}");
    }
}
