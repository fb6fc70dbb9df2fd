//! Where each rank of a TP × CP × DP × PP mesh sits: `rank_order` names the axes innermost
//! first, as Megatron-core's `RankGenerator` order does ("tp-cp-dp-pp": a tensor-parallel
//! group is consecutive ranks, so on 8-GPU nodes it stays inside a node; then the context-
//! parallel ring, data-parallel replicas, pipeline stages outermost). Ranks are placed on
//! devices in order, so the order decides which groups share a node, a rail or a leaf: the
//! what-if of placement.

use std::fmt;

/// One axis of the mesh.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Axis {
    Tp,
    Cp,
    Dp,
    Pp,
}

impl Axis {
    const ALL: [Axis; 4] = [Axis::Tp, Axis::Cp, Axis::Dp, Axis::Pp];

    fn name(self) -> &'static str {
        match self {
            Axis::Tp => "tp",
            Axis::Cp => "cp",
            Axis::Dp => "dp",
            Axis::Pp => "pp",
        }
    }
}

/// The order of the mesh's axes, innermost (consecutive ranks) first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RankOrder(pub [Axis; 4]);

impl Default for RankOrder {
    fn default() -> Self {
        RankOrder(Axis::ALL)
    }
}

impl fmt::Display for RankOrder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = self.0.iter().map(|a| a.name()).collect();
        write!(f, "{}", names.join("-"))
    }
}

impl std::str::FromStr for RankOrder {
    type Err = String;

    /// "tp-cp-dp-pp" and its permutations (case-insensitive; `-` or `,` between axes); without
    /// cp ("tp-dp-pp") cp goes right after tp, where Megatron-core puts it.
    fn from_str(s: &str) -> Result<Self, String> {
        let expected = || {
            format!(
                "the axes tp, dp and pp (and cp) each once, innermost first, such as \
                 \"tp-cp-dp-pp\" or \"tp-dp-pp\" (got \"{s}\")"
            )
        };
        let mut axes: Vec<Axis> = s
            .split(['-', ','])
            .map(|a| {
                Axis::ALL
                    .into_iter()
                    .find(|x| x.name() == a.trim().to_ascii_lowercase())
                    .ok_or_else(expected)
            })
            .collect::<Result<_, _>>()?;
        if axes.len() == 3 && !axes.contains(&Axis::Cp) {
            if let Some(tp) = axes.iter().position(|&a| a == Axis::Tp) {
                axes.insert(tp + 1, Axis::Cp);
            }
        }
        let each_once = Axis::ALL
            .iter()
            .all(|a| axes.iter().filter(|&b| b == a).count() == 1);
        match axes[..] {
            [a, b, c, d] if each_once => Ok(RankOrder([a, b, c, d])),
            _ => Err(expected()),
        }
    }
}

/// A mesh of `tp × cp × dp × pp` ranks laid out in `order`.
#[derive(Debug, Clone, Copy)]
pub struct Mesh {
    pub tp: u32,
    pub cp: u32,
    pub dp: u32,
    pub pp: u32,
    pub order: RankOrder,
}

impl Mesh {
    fn size(&self, a: Axis) -> u32 {
        match a {
            Axis::Tp => self.tp,
            Axis::Cp => self.cp,
            Axis::Dp => self.dp,
            Axis::Pp => self.pp,
        }
    }

    /// The rank of tensor-parallel rank `t` of context-parallel rank `c` of replica `replica`
    /// in pipeline stage `stage`.
    pub fn rank(&self, stage: u32, replica: u32, c: u32, t: u32) -> u32 {
        let coord = |a: Axis| match a {
            Axis::Tp => t,
            Axis::Cp => c,
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

    /// Every rank of pipeline stage `stage`, in (replica, context rank, tensor rank) order.
    pub fn stage_ranks(&self, stage: u32) -> Vec<u32> {
        let (tp, cp) = (self.tp, self.cp);
        (0..self.dp)
            .flat_map(|r| (0..cp).flat_map(move |c| (0..tp).map(move |t| (r, c, t))))
            .map(|(r, c, t)| self.rank(stage, r, c, t))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mesh(order: &str, cp: u32) -> Mesh {
        Mesh {
            tp: 4,
            cp,
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
            for cp in [1, 2] {
                let m = mesh(order, cp);
                let mut all: Vec<u32> = (0..2).flat_map(|s| m.stage_ranks(s)).collect();
                all.sort_unstable();
                assert_eq!(all, (0..24 * cp).collect::<Vec<u32>>(), "{order} cp {cp}");
            }
        }
        let m = mesh("dp-pp-cp-tp", 2);
        let mut all: Vec<u32> = (0..2).flat_map(|s| m.stage_ranks(s)).collect();
        all.sort_unstable();
        assert_eq!(all, (0..48).collect::<Vec<u32>>());
    }

    #[test]
    fn the_innermost_axis_takes_consecutive_ranks() {
        // Megatron's default: a TP group is 4 consecutive ranks, replicas next, stages last.
        let m = mesh("tp-dp-pp", 1);
        let tp_group: Vec<u32> = (0..4).map(|t| m.rank(0, 0, 0, t)).collect();
        assert_eq!(tp_group, [0, 1, 2, 3]);
        assert_eq!(m.rank(0, 1, 0, 0), 4);
        assert_eq!(m.rank(1, 0, 0, 0), 12);
        // Context parallelism right after TP: a CP ring steps over whole TP groups.
        let m = mesh("tp-cp-dp-pp", 2);
        assert_eq!((m.rank(0, 0, 1, 0), m.rank(0, 1, 0, 0)), (4, 8));
        // Stages innermost: a micro-batch's activations go to the next rank.
        let m = mesh("pp-tp-dp", 1);
        assert_eq!((m.rank(0, 0, 0, 0), m.rank(1, 0, 0, 0)), (0, 1));
        assert_eq!(m.rank(0, 0, 0, 1), 2);
        assert_eq!(m.rank(0, 1, 0, 0), 8);
    }

    #[test]
    fn an_order_without_cp_puts_it_right_after_tp() {
        for (given, full) in [("tp-dp-pp", "tp-cp-dp-pp"), ("PP, TP, DP", "pp-tp-cp-dp")] {
            assert_eq!(given.parse::<RankOrder>().unwrap().to_string(), full);
        }
        assert_eq!(RankOrder::default().to_string(), "tp-cp-dp-pp");
    }

    #[test]
    fn an_order_without_each_axis_once_is_refused_with_what_is_expected() {
        for bad in [
            "tp-dp",
            "tp-tp-pp",
            "tp-dp-ep",
            "tp-cp-dp",
            "tp-cp-dp-pp-cp",
            "",
        ] {
            let e = bad.parse::<RankOrder>().unwrap_err();
            assert!(e.contains("tp, dp and pp (and cp) each once"), "{e}");
        }
    }
}
