//! Where each rank of a TP × DP × PP mesh sits: `rank_order` names the axes innermost first,
//! as Megatron-core's `RankGenerator` order does ("tp-dp-pp": a tensor-parallel group is
//! consecutive ranks, so on 8-GPU nodes it stays inside a node; then data-parallel replicas;
//! pipeline stages outermost). Ranks are placed on devices in order, so the order decides
//! which groups share a node, a rail or a leaf: the what-if of placement.

use std::fmt;

/// One axis of the mesh.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Axis {
    Tp,
    Dp,
    Pp,
}

impl Axis {
    fn name(self) -> &'static str {
        match self {
            Axis::Tp => "tp",
            Axis::Dp => "dp",
            Axis::Pp => "pp",
        }
    }
}

/// The order of the mesh's axes, innermost (consecutive ranks) first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RankOrder(pub [Axis; 3]);

impl Default for RankOrder {
    fn default() -> Self {
        RankOrder([Axis::Tp, Axis::Dp, Axis::Pp])
    }
}

impl fmt::Display for RankOrder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let [a, b, c] = self.0;
        write!(f, "{}-{}-{}", a.name(), b.name(), c.name())
    }
}

impl std::str::FromStr for RankOrder {
    type Err = String;

    /// "tp-dp-pp" and its permutations (case-insensitive; `-` or `,` between axes).
    fn from_str(s: &str) -> Result<Self, String> {
        let expected = || {
            format!(
                "the axes tp, dp and pp each once, innermost first, such as \"tp-dp-pp\" \
                 (got \"{s}\")"
            )
        };
        let axes: Vec<Axis> = s
            .split(['-', ','])
            .map(|a| match a.trim().to_ascii_lowercase().as_str() {
                "tp" => Ok(Axis::Tp),
                "dp" => Ok(Axis::Dp),
                "pp" => Ok(Axis::Pp),
                _ => Err(expected()),
            })
            .collect::<Result<_, _>>()?;
        match axes[..] {
            [a, b, c] if a != b && b != c && a != c => Ok(RankOrder([a, b, c])),
            _ => Err(expected()),
        }
    }
}

/// A mesh of `tp × dp × pp` ranks laid out in `order`.
#[derive(Debug, Clone, Copy)]
pub struct Mesh {
    pub tp: u32,
    pub dp: u32,
    pub pp: u32,
    pub order: RankOrder,
}

impl Mesh {
    fn size(&self, a: Axis) -> u32 {
        match a {
            Axis::Tp => self.tp,
            Axis::Dp => self.dp,
            Axis::Pp => self.pp,
        }
    }

    /// The rank of tensor-parallel rank `t` of replica `replica` in pipeline stage `stage`.
    pub fn rank(&self, stage: u32, replica: u32, t: u32) -> u32 {
        let coord = |a: Axis| match a {
            Axis::Tp => t,
            Axis::Dp => replica,
            Axis::Pp => stage,
        };
        let (mut rank, mut stride) = (0, 1);
        for a in self.order.0 {
            rank += coord(a) * stride;
            stride *= self.size(a);
        }
        rank
    }

    /// Every rank of pipeline stage `stage`, in (replica, tensor rank) order.
    pub fn stage_ranks(&self, stage: u32) -> Vec<u32> {
        (0..self.dp)
            .flat_map(|r| (0..self.tp).map(move |t| self.rank(stage, r, t)))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mesh(order: &str) -> Mesh {
        Mesh {
            tp: 4,
            dp: 3,
            pp: 2,
            order: order.parse().unwrap(),
        }
    }

    #[test]
    fn every_order_places_each_rank_once() {
        for order in [
            "tp-dp-pp", "tp-pp-dp", "dp-tp-pp", "dp-pp-tp", "pp-tp-dp", "pp-dp-tp",
        ] {
            let m = mesh(order);
            let mut seen = [false; 24];
            for s in 0..2 {
                for r in m.stage_ranks(s) {
                    assert!(!seen[r as usize], "{order}: rank {r} twice");
                    seen[r as usize] = true;
                }
            }
            assert!(seen.iter().all(|&x| x), "{order}");
            assert_eq!(order.parse::<RankOrder>().unwrap().to_string(), order);
        }
    }

    #[test]
    fn the_innermost_axis_takes_consecutive_ranks() {
        // Megatron's default: a TP group is 4 consecutive ranks, replicas next, stages last.
        let m = mesh("tp-dp-pp");
        assert_eq!(
            (0..4).map(|t| m.rank(0, 0, t)).collect::<Vec<_>>(),
            [0, 1, 2, 3]
        );
        assert_eq!(m.rank(0, 1, 0), 4);
        assert_eq!(m.rank(1, 0, 0), 12);
        // Stages innermost: a micro-batch's activations go to the next rank.
        let m = mesh("pp-tp-dp");
        assert_eq!((m.rank(0, 0, 0), m.rank(1, 0, 0)), (0, 1));
        assert_eq!(m.rank(0, 0, 1), 2);
        assert_eq!(m.rank(0, 1, 0), 8);
    }

    #[test]
    fn an_order_without_each_axis_once_is_refused_with_what_is_expected() {
        for bad in ["tp-dp", "tp-tp-pp", "tp-dp-ep", ""] {
            let e = bad.parse::<RankOrder>().unwrap_err();
            assert!(e.contains("tp, dp and pp each once"), "{e}");
        }
        assert_eq!(
            "PP, TP, DP".parse::<RankOrder>().unwrap().to_string(),
            "pp-tp-dp"
        );
    }
}
