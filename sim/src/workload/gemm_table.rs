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
//! outside the measured range and within [`EXTRAPOLATION_FACTOR`] of it, the nearest
//! measurement moved along its roofline: the product keeps its measured distance from its own
//! roofline (`max(FLOPs / achieved peak, bytes / copy rate)`). A compute-bound product then
//! scales in proportion to its FLOPs, and a launch- or memory-bound one (AlexNet's classifier at
//! 32 rows) stops growing with its rows until its FLOPs outweigh its bytes. Checked against the
//! GEMMs PyTorch timed at 2-8 times the largest batch `calibrate gpu` measured, on the H100 and
//! the H200 in bf16 and tf32 (ResNet-50 at 64, AlexNet at 64-256): summed time -9 to -1%, where
//! scaling in proportion gave -1 to +9% in sum but +23 to +47% at AlexNet's batch 256.
//! Further out, a launch-bound measurement says nothing of a compute-bound kernel (scaled from
//! 32 rows, Llama's 4096 × 4096 projection over 8,192 tokens came out 16 times its FLOPs at the
//! peak), so the lookup answers `None` and the caller times the product as an unmeasured shape.

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

/// How far beyond (or below) the measured values of its coordinate a measurement still times a
/// product: 8, the largest factor the extrapolation was checked over.
pub const EXTRAPOLATION_FACTOR: u64 = 8;

/// What bounds a GEMM's time on a device: its achieved matmul rate and its memory rate.
#[derive(Debug, Clone, Copy)]
pub struct Roofline {
    pub peak_flops_per_s: f64,
    pub memory_bytes_per_s: f64,
    /// Bytes per element of the product's operands.
    pub element_bytes: u64,
}

impl Roofline {
    /// Seconds of a `(m, n, k, count)` product at its roofline: its FLOPs at the peak or its
    /// operands and result once through memory, whichever is longer.
    fn secs(&self, [m, n, k, c]: [u64; 4]) -> f64 {
        let (m, n, k, c) = (m as f64, n as f64, k as f64, c as f64);
        let flops = 2.0 * m * n * k * c;
        let bytes = (m * k + k * n + m * n) * c * self.element_bytes as f64;
        (flops / self.peak_flops_per_s).max(bytes / self.memory_bytes_per_s)
    }
}

/// The measured GEMMs of one number format, indexed for lookups by layer product.
#[derive(Debug, Clone, Default)]
pub struct GemmTable {
    /// (blanked coordinate, shape with it 0) → (coordinate value, seconds), by value.
    by_key: HashMap<Key, Vec<(u64, f64)>>,
    /// Moves a measurement to a size outside the measured range (`None`: an empty table).
    roofline: Option<Roofline>,
}

impl GemmTable {
    /// The table of `times` measured in `dtype` on a device bounded by `roofline`; other formats
    /// are left out.
    pub fn new(times: &[GemmTime], dtype: &str, roofline: Roofline) -> GemmTable {
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
        GemmTable {
            by_key,
            roofline: Some(roofline),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.by_key.is_empty()
    }

    /// Seconds of product `pass` of `g` for `batch` samples, or `None` when no GEMM of that
    /// shape was measured within [`EXTRAPOLATION_FACTOR`] of it along the batch's coordinate.
    pub fn pass_secs(&self, g: &GemmShape, pass: Pass, batch: u64) -> Option<f64> {
        let (m, n, k, c) = pass.shape(g.at_batch(batch.max(1)));
        let coord = pass.batch_coordinate(g.batch_axis);
        let mut key = [m, n, k, c];
        let want = key[coord];
        key[coord] = 0;
        let points = self.by_key.get(&(coord, key))?;
        let at = points.partition_point(|p| p.0 < want);
        match (at.checked_sub(1).map(|i| points[i]), points.get(at)) {
            (_, Some(&(v, s))) if v == want => Some(s),
            (Some((v1, s1)), Some(&(v2, s2))) => {
                Some(s1 + (s2 - s1) * (want - v1) as f64 / (v2 - v1) as f64)
            }
            (Some((v, s)), None) | (None, Some(&(v, s))) => {
                let (lo, hi) = (v.min(want), v.max(want));
                if hi > lo.saturating_mul(EXTRAPOLATION_FACTOR) {
                    return None;
                }
                let roofline = self.roofline?;
                let mut measured = key;
                measured[coord] = v;
                key[coord] = want;
                Some(s * roofline.secs(key) / roofline.secs(measured))
            }
            (None, None) => None,
        }
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

    /// An H100 in bf16, roughly: 800 TFLOP/s, 2.9 TB/s.
    const H100_BF16: Roofline = Roofline {
        peak_flops_per_s: 800e12,
        memory_bytes_per_s: 2.9e12,
        element_bytes: 2,
    };

    fn table(times: &[GemmTime]) -> GemmTable {
        GemmTable::new(times, "bf16", H100_BF16)
    }

    /// A linear layer 768 → 3072 over 1024 tokens per sample, measured at batch 1 and 4.
    fn linear_table() -> GemmTable {
        table(&[
            t("bf16", 1024, 3072, 768, 1, 10e-6),
            t("bf16", 4096, 3072, 768, 1, 28e-6),
            t("bf16", 1024, 768, 3072, 1, 11e-6), // input gradient at batch 1
            t("bf16", 3072, 768, 1024, 1, 12e-6), // weight gradient at batch 1
            t("fp32", 1024, 3072, 768, 1, 99e-6),
        ])
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
    fn batches_between_measurements_interpolate() {
        let g = GemmShape::rows(1024, 3072, 768, 1);
        // Batch 2: 2048 rows, a third of the way from 1024 to 4096.
        let mid = linear_table().pass_secs(&g, Pass::Forward, 2).unwrap();
        assert!((mid - (10e-6 + 18e-6 / 3.0)).abs() < 1e-15, "{mid}");
    }

    #[test]
    fn a_compute_bound_product_beyond_the_measurements_scales_with_its_flops() {
        // 4096 rows: 19.3 GFLOP (24 us at the peak) against 36 MB (12 us): compute-bound, so
        // twice the rows is twice the time.
        let g = GemmShape::rows(1024, 3072, 768, 1);
        let b8 = linear_table().pass_secs(&g, Pass::Forward, 8).unwrap();
        assert!((b8 - 56e-6).abs() < 1e-12, "{b8}");
        // The weight gradient at batch 2 reduces over 2048 rows; only batch 1 was measured.
        let wg = linear_table().pass_secs(&g, Pass::WeightGrad, 2).unwrap();
        assert!(wg > 12e-6 && wg <= 24e-6, "{wg}");
    }

    #[test]
    fn a_memory_bound_product_grows_with_its_bytes_not_its_rows() {
        // AlexNet's 4096 x 4096 classifier at 32 rows reads its 32 MiB of weights (11.7 us at
        // 2.9 TB/s; its FLOPs take 1.3 us) and took 22 us. At 64 rows it reads 0.5 MiB more.
        let tab = table(&[t("bf16", 32, 4096, 4096, 1, 22e-6)]);
        let secs = tab
            .pass_secs(&GemmShape::rows(64, 4096, 4096, 1), Pass::Forward, 1)
            .unwrap();
        assert!(secs > 22e-6 && secs < 22e-6 * 1.03, "{secs}");
    }

    #[test]
    fn far_beyond_the_measurements_a_lookup_answers_nothing() {
        // Llama's 4096 x 4096 projection over 8,192 tokens is 256 times AlexNet's 32 rows: the
        // launch-bound measurement says nothing of it.
        let tab = table(&[t("bf16", 32, 4096, 4096, 1, 22e-6)]);
        let at = |rows| tab.pass_secs(&GemmShape::rows(rows, 4096, 4096, 1), Pass::Forward, 1);
        assert!(at(256).is_some());
        assert_eq!(at(257), None);
        assert_eq!(at(8192), None);
        assert!(at(4).is_some());
        assert_eq!(at(3), None);
    }

    #[test]
    fn other_shapes_and_formats_are_not_guessed() {
        let tab = linear_table();
        assert_eq!(
            tab.pass_secs(&GemmShape::rows(1024, 4096, 768, 1), Pass::Forward, 1),
            None
        );
        assert!(GemmTable::new(&[t("bf16", 1, 1, 1, 1, 1e-6)], "tf32", H100_BF16).is_empty());
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
        let tab = table(&[
            t("bf16", 1024, 1024, 64, 12, 20e-6),
            t("bf16", 1024, 1024, 64, 96, 100e-6),
        ]);
        assert_eq!(tab.pass_secs(&g, Pass::Forward, 8), Some(100e-6));
        let b4 = tab.pass_secs(&g, Pass::Forward, 4).unwrap();
        assert!((b4 - (20e-6 + 80e-6 * 36.0 / 84.0)).abs() < 1e-15, "{b4}");
    }
}
