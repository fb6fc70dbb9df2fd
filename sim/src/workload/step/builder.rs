//! [`StepBuilder`]: a step's schedule built op by op (compute on lanes, collectives planned
//! per group and embedded, point-to-point transfers, joins), for the step builders of this
//! module's siblings and for the trace replay.

use super::{Ablation, PlanClass, Planned, Planner, StepConfig, StepDag, StepError};
use crate::collective::{
    Algorithm, Collective, CollectiveSpec, Endpoint, Fabric, Op, OpId, OpKind, Phase, Schedule,
};
use crate::engine::SimTime;
use crate::topology::DeviceId;

/// A group of the communicator as the generators see it.
struct SubFabric<'a> {
    parent: &'a dyn Fabric,
    members: &'a [u32],
}

impl Fabric for SubFabric<'_> {
    fn bottleneck_bps(&self, src: Endpoint, dst: Endpoint) -> f64 {
        self.parent
            .bottleneck_bps(self.members[src as usize], self.members[dst as usize])
    }
    fn node_of(&self, rank: u32) -> u32 {
        self.parent.node_of(self.members[rank as usize])
    }
}

/// Builds a step's schedule op by op: compute on lanes, collectives planned per group and
/// embedded, point-to-point transfers, joins. [`build`](super::build) drives it from a model;
/// the trace replay (`workload::trace`) from a recorded step.
pub struct StepBuilder<'a> {
    pub(super) s: Schedule,
    pub(super) lanes: Vec<Option<u16>>,
    fabric: &'a dyn Fabric,
    planner: &'a dyn Planner,
    cfg: &'a StepConfig,
    pub(super) placed: Vec<(String, DeviceId)>,
    pub(super) decisions: Vec<(String, u32)>,
    /// Position of each extra endpoint of the step's schedule, by name (thousands of NVLS
    /// groups each name their own switch).
    endpoint_index: std::collections::HashMap<String, u32>,
}

impl<'a> StepBuilder<'a> {
    pub fn new(
        ranks: u32,
        fabric: &'a dyn Fabric,
        planner: &'a dyn Planner,
        cfg: &'a StepConfig,
    ) -> Self {
        StepBuilder {
            s: Schedule::new(Collective::AllReduce, "training-step", ranks, 0),
            lanes: Vec::new(),
            fabric,
            planner,
            cfg,
            placed: Vec::new(),
            decisions: Vec::new(),
            endpoint_index: std::collections::HashMap::new(),
        }
    }

    /// The built schedule in a [`StepDag`] of one lane per op's lane, with the ranks set and
    /// no model facts (stages, buckets, batch): the caller fills what it knows.
    pub fn finish(self) -> StepDag {
        let lane_count = self.lanes.iter().flatten().max().map_or(1, |&l| l + 1);
        let ranks = self.s.ranks;
        StepDag {
            schedule: self.s,
            lanes: self.lanes,
            lane_count,
            ranks,
            data_parallel: ranks,
            global_batch: 0,
            stages: Vec::new(),
            virtual_stages: 1,
            lane_ranks: Vec::new(),
            buckets: Vec::new(),
            placed: self.placed,
            decisions: self.decisions,
        }
    }

    pub fn compute(
        &mut self,
        endpoints: u32,
        d: SimTime,
        deps: Vec<OpId>,
        phase: Phase,
        lane: u16,
        step: u32,
    ) -> OpId {
        let d = if self.cfg.ablation == Ablation::FreeCompute {
            SimTime::ZERO
        } else {
            d
        };
        self.lanes.push(Some(lane));
        self.s.push(
            OpKind::Compute {
                endpoints,
                duration: d,
            },
            deps,
            phase,
            lane,
            step,
        )
    }

    pub fn join(&mut self, deps: Vec<OpId>) -> OpId {
        self.lanes.push(None);
        self.s.push(
            OpKind::Compute {
                endpoints: 0,
                duration: SimTime::ZERO,
            },
            deps,
            Phase::SendRecv,
            0,
            0,
        )
    }

    /// Embeds `collective` of `bytes` over each group (all groups the same size) after
    /// `after`; returns a join op that finishes with it. The planner plans the first group and
    /// the others reuse its schedule, unless the library placed endpoints of its own (NVLS:
    /// each group has its own NVSwitch): then every group is planned.
    pub fn collective(
        &mut self,
        spec: CollectiveSpec,
        groups: &[Vec<u32>],
        after: Vec<OpId>,
        map_kind: &dyn Fn(&Op) -> OpKind,
    ) -> Result<OpId, StepError> {
        if self.cfg.ablation == Ablation::FreeCommunication || groups.is_empty() {
            return Ok(self.join(after));
        }
        let plan_group = |g: &Vec<u32>| {
            let fabric = SubFabric {
                parent: self.fabric,
                members: g,
            };
            self.planner.plan(&spec, g, &fabric)
        };
        // Groups whose plans are the same schedule (up to which placed endpoints they use:
        // NVLS groups on different nodes each have their own NVSwitch) are embedded as one:
        // one op per step over all their pairs. The groups of one collective start together
        // after one batched compute op and are the same shape, so they also finish together.
        if !self.cfg.group_fusion {
            let mut sinks = Vec::new();
            for g in groups {
                let mut planned = plan_group(g)?;
                if let Some(d) = planned.decision.take() {
                    self.count_decision(&d);
                }
                let names = self.placed_names(&planned);
                sinks.extend(self.embed_groups(&planned.schedule, &[(g, names)], &after, map_kind));
            }
            return Ok(self.join(sinks));
        }
        let first = plan_group(&groups[0])?;
        let planned_apart = !first.placed.is_empty();
        let mut classes: Vec<PlanClass> = Vec::new();
        let mut next = Some(first);
        let mut first_decision: Option<String> = None;
        for (i, g) in groups.iter().enumerate() {
            let mut planned = match next.take() {
                Some(p) => p,
                None if planned_apart => plan_group(g)?,
                None => {
                    // Planned once: every group runs the first group's plan.
                    let names = classes[0].endpoint_names.clone();
                    classes[0].members.push((g, names));
                    if let Some(d) = &first_decision {
                        self.count_decision(d);
                    }
                    continue;
                }
            };
            if let Some(d) = planned.decision.take() {
                self.count_decision(&d);
                if i == 0 {
                    first_decision = Some(d);
                }
            }
            let names = self.placed_names(&planned);
            let same = classes.iter_mut().find(|c| {
                std::sync::Arc::ptr_eq(&c.schedule, &planned.schedule)
                    || (c.schedule.ops == planned.schedule.ops
                        && c.schedule.patterns == planned.schedule.patterns
                        && c.schedule.extra_endpoints.len()
                            == planned.schedule.extra_endpoints.len())
            });
            match same {
                Some(c) => c.members.push((g, names)),
                None => {
                    debug_assert!(i == 0 || planned_apart);
                    classes.push(PlanClass {
                        schedule: planned.schedule,
                        endpoint_names: names.clone(),
                        members: vec![(g, names)],
                    })
                }
            }
        }
        let mut sinks = Vec::new();
        for class in &classes {
            sinks.extend(self.embed_groups(&class.schedule, &class.members, &after, map_kind));
        }
        if sinks.is_empty() {
            return Ok(self.join(after));
        }
        Ok(self.join(sinks))
    }

    /// The step's names of a plan's extra endpoints, registering the endpoints it placed: a
    /// library-placed endpoint is named after its device, so groups sharing a device share
    /// the endpoint and groups on different ones do not.
    fn placed_names(&mut self, planned: &Planned) -> Vec<String> {
        let globals: Vec<String> = planned
            .placed
            .iter()
            .map(|(name, dev)| format!("{name}@{}", dev.0))
            .collect();
        for (global, (_, dev)) in globals.iter().zip(&planned.placed) {
            if !self.endpoint_index.contains_key(global) {
                self.endpoint_position(global);
                self.placed.push((global.clone(), *dev));
            }
        }
        planned
            .schedule
            .extra_endpoints
            .iter()
            .map(
                |name| match planned.placed.iter().position(|(n, _)| n == name) {
                    Some(i) => globals[i].clone(),
                    None => name.clone(),
                },
            )
            .collect()
    }

    /// The position of the step's extra endpoint `name`, added when new.
    fn endpoint_position(&mut self, name: &str) -> u32 {
        if let Some(&pos) = self.endpoint_index.get(name) {
            return pos;
        }
        let pos = self.s.extra_endpoints.len() as u32;
        self.s.extra_endpoints.push(name.to_string());
        self.endpoint_index.insert(name.to_string(), pos);
        pos
    }

    /// Counts one group's collective under the library's decision line.
    fn count_decision(&mut self, decision: &str) {
        let short = crate::library::choice(decision);
        match self.decisions.iter_mut().find(|(k, _)| k == short) {
            Some((_, count)) => *count += 1,
            None => self.decisions.push((short.to_string(), 1)),
        }
    }

    /// Embeds `sub` once over all `groups` (rank i of `sub` = `group[i]`, its j-th extra
    /// endpoint the step's endpoint named by the group's j-th name); returns the sinks.
    fn embed_groups(
        &mut self,
        sub: &Schedule,
        groups: &[(&Vec<u32>, Vec<String>)],
        after: &[OpId],
        map_kind: &dyn Fn(&Op) -> OpKind,
    ) -> Vec<OpId> {
        let maps: Vec<Vec<u32>> = groups
            .iter()
            .map(|(g, names)| {
                let mut m = (*g).clone();
                for name in names {
                    let pos = self.endpoint_position(name);
                    m.push(self.s.ranks + pos);
                }
                m
            })
            .collect();
        let refs: Vec<&[u32]> = maps.iter().map(|m| m.as_slice()).collect();
        let before = self.s.ops.len();
        let sinks = self.s.embed(sub, &refs, after, map_kind);
        self.lanes.extend((before..self.s.ops.len()).map(|_| None));
        sinks
    }

    pub(super) fn spec(
        &self,
        collective: Collective,
        bytes: u64,
        algorithm: Algorithm,
    ) -> CollectiveSpec {
        CollectiveSpec {
            collective,
            bytes,
            root: 0,
            peer: 1,
            algorithm,
            slices: self.cfg.slices,
        }
    }

    /// Copies of `bytes` over each of `pairs` after `deps` that no communication library
    /// carries (nn.DataParallel's scatter and gather are cudaMemcpy's between GPUs): the bare
    /// transfer.
    pub fn copy(
        &mut self,
        pairs: Vec<(u32, u32)>,
        bytes: u64,
        deps: Vec<OpId>,
        phase: Phase,
    ) -> OpId {
        if self.cfg.ablation == Ablation::FreeCommunication || pairs.is_empty() || bytes == 0 {
            return self.join(deps);
        }
        let p = self.s.add_pattern(pairs);
        self.lanes.push(None);
        self.s
            .push(OpKind::Transfer { pattern: p, bytes }, deps, phase, 0, 0)
    }

    /// A point-to-point message of `bytes` over each of `pairs` after `deps` (a pipeline
    /// stage's activations or gradients, a ring attention shift), sent as the planner's
    /// library sends one: a send/recv of each pair (NCCL's p2p protocol and kernel costs,
    /// gloo's rendezvous, the bare transfer for templates). Pairs inside a node and pairs
    /// across nodes are planned apart (their transports differ), and within each set every
    /// pair plays the first one's plan. Returns an op that finishes with all of them.
    pub fn transfer(
        &mut self,
        pairs: Vec<(u32, u32)>,
        bytes: u64,
        deps: Vec<OpId>,
    ) -> Result<OpId, StepError> {
        if self.cfg.ablation == Ablation::FreeCommunication || pairs.is_empty() || bytes == 0 {
            return Ok(self.join(deps));
        }
        let spec = CollectiveSpec {
            collective: Collective::SendRecv,
            bytes,
            root: 0,
            peer: 1,
            algorithm: Algorithm::Direct,
            slices: 1,
        };
        let fabric = self.fabric;
        let (across, within): (Vec<Vec<u32>>, Vec<Vec<u32>>) = pairs
            .iter()
            .map(|&(a, b)| vec![a, b])
            .partition(|g| fabric.node_of(g[0]) != fabric.node_of(g[1]));
        let mut ends = Vec::with_capacity(2);
        for groups in [within, across] {
            if !groups.is_empty() {
                let after = deps.clone();
                ends.push(self.collective(spec.clone(), &groups, after, &|op| op.kind.clone())?);
            }
        }
        Ok(match ends[..] {
            [one] => one,
            _ => self.join(ends),
        })
    }
}
