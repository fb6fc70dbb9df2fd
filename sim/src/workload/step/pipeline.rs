//! Tensor-, pipeline-, context- and expert-parallel steps as Megatron lays them out: the mesh's
//! groups, Megatron tensor-parallel all-reduces, context parallelism (ring attention,
//! all-gathered keys and values, or Ulysses all-to-alls), expert all-to-alls,
//! point-to-point activations between stages in the order [`super::stages`] gives, per-stage
//! gradient exchange (all-reduce or the distributed optimizer).
//!
//! With `virtual_stages = v > 1` (Megatron's virtual pipeline) the layers are cut into `pp × v`
//! chunks and GPU stage `s` holds chunks `s, s + pp, s + 2pp, ...`: a micro-batch goes round
//! the `pp` GPU stages `v` times, and the bubble shrinks about `v`-fold for `1 + (pp - 1) /
//! (pp v)` times the activations of plain 1F1B on the first stage.

use super::stages::{partition, stage_order, Item};
use super::*;
use crate::workload::catalog::{Layer, LayerKind};
use crate::workload::compute::PassTimes;

/// Where a stage's compute ops run: how many ranks, which lane (pipeline stage).
#[derive(Clone, Copy)]
struct Lane {
    endpoints: u32,
    lane: u16,
}

impl Lane {
    /// The compute accumulated in `pending` (from layer `first_layer` on) as one op after
    /// `prev`; the deps of what comes next.
    fn flush(
        self,
        b: &mut StepBuilder,
        pending: &mut SimTime,
        prev: &[OpId],
        phase: Phase,
        first_layer: u32,
    ) -> Vec<OpId> {
        if *pending == SimTime::ZERO {
            return prev.to_vec();
        }
        let op = b.compute(
            self.endpoints,
            *pending,
            prev.to_vec(),
            phase,
            self.lane,
            first_layer,
        );
        *pending = SimTime::ZERO;
        vec![op]
    }
}

/// Communication inside one layer's pass.
enum Inner<'g> {
    /// Megatron-core's ring attention (Transformer Engine's `p2p` context parallelism): the
    /// pass's time in `cp` equal pieces, piece 0 on the rank's own keys and values, piece k
    /// once the k-th shift of `bytes` round the ring has arrived; each shift leaves when the
    /// previous one has arrived, so shifts overlap the pieces before them. Backward shifts
    /// carry the gradients of the keys and values too (twice the bytes).
    Ring {
        ring: &'g [(u32, u32)],
        bytes: u64,
        cp: u32,
    },
    /// Expert parallelism: an all-to-all to the experts, their compute, one back.
    Experts {
        spec: CollectiveSpec,
        groups: &'g [Vec<u32>],
    },
    /// Context parallelism by all-gather (Transformer Engine's `all_gather`): the keys and
    /// values (`gather`: the gathered size) all-gathered over the CP group before the pass;
    /// backward, gathered again, and their gradients reduce-scattered after it.
    Gathered {
        gather: CollectiveSpec,
        scatter: CollectiveSpec,
        groups: &'g [Vec<u32>],
    },
    /// DeepSpeed-Ulysses (`a2a`): forward, queries, keys and values all-to-all'd from
    /// sequence shards to head shards (`qkv`), the pass, the output back (`out`); backward,
    /// the output's gradient first, the inputs' gradients after.
    Ulysses {
        qkv: CollectiveSpec,
        out: CollectiveSpec,
        groups: &'g [Vec<u32>],
    },
}

impl Inner<'_> {
    /// One pass of `time` on layer `layer` after `deps`; returns its last op.
    #[allow(clippy::too_many_arguments)]
    fn pass(
        &self,
        b: &mut StepBuilder,
        at: Lane,
        time: SimTime,
        forward: bool,
        deps: Vec<OpId>,
        phase: Phase,
        layer: usize,
    ) -> Result<OpId, StepError> {
        let (n, lane, layer) = (at.endpoints, at.lane, layer as u32);
        match self {
            Inner::Ring { ring, bytes, cp } => {
                let bytes = if forward { *bytes } else { 2 * bytes };
                let piece = SimTime::from_secs_f64(time.as_secs_f64() / *cp as f64);
                let mut shift = b.transfer(ring.to_vec(), bytes, deps.clone())?;
                let mut last = b.compute(n, piece, deps, phase, lane, layer);
                for k in 1..*cp {
                    last = b.compute(n, piece, vec![last, shift], phase, lane, layer);
                    if k + 1 < *cp {
                        shift = b.transfer(ring.to_vec(), bytes, vec![shift])?;
                    }
                }
                Ok(last)
            }
            Inner::Experts { spec, groups } => {
                let out = b.collective(spec.clone(), groups, deps, &|op| op.kind.clone())?;
                let op = b.compute(n, time, vec![out], phase, lane, layer);
                b.collective(spec.clone(), groups, vec![op], &|op| op.kind.clone())
            }
            Inner::Gathered {
                gather,
                scatter,
                groups,
            } => {
                let kv = b.collective(gather.clone(), groups, deps, &|op| op.kind.clone())?;
                let op = b.compute(n, time, vec![kv], phase, lane, layer);
                if forward {
                    return Ok(op);
                }
                b.collective(scatter.clone(), groups, vec![op], &|op| op.kind.clone())
            }
            Inner::Ulysses { qkv, out, groups } => {
                let (before, after) = if forward { (qkv, out) } else { (out, qkv) };
                let a = b.collective(before.clone(), groups, deps, &|op| op.kind.clone())?;
                let op = b.compute(n, time, vec![a], phase, lane, layer);
                b.collective(after.clone(), groups, vec![op], &|op| op.kind.clone())
            }
        }
    }
}

/// One Megatron step's layout: the mesh, the model's chunks and what each layer costs, with
/// the groups each collective runs over.
struct Megatron<'a> {
    model: &'a Model,
    cfg: &'a StepConfig,
    mesh: Mesh,
    /// Model chunks per stage, micro-batches, expert-parallel group size.
    v: u32,
    m: u32,
    ep: u32,
    /// Samples per micro-batch; bytes per element.
    mb: u64,
    e: u64,
    /// Layer ranges of the `pp × v` virtual stages, in pipeline order: virtual stage q (a
    /// chunk of consecutive layers) runs on GPU stage q mod pp.
    stages: Vec<std::ops::Range<usize>>,
    times: Vec<PassTimes>,
    /// Every rank of each GPU stage, in (replica, context rank, tensor rank) order.
    ranks: Vec<Vec<u32>>,
    /// Per GPU stage, built once for every pass: its TP groups, one shift of its CP ring
    /// (every rank to the next of its ring; empty without CP), its EP groups (`ep`
    /// consecutive replicas of the same context and tensor rank; empty without EP).
    tp_groups: Vec<Vec<Vec<u32>>>,
    rings: Vec<Vec<(u32, u32)>>,
    /// Per GPU stage, its CP groups (every context rank of one replica and tensor rank; empty
    /// without CP).
    cp_groups: Vec<Vec<Vec<u32>>>,
    ep_groups: Vec<Vec<Vec<u32>>>,
}

impl<'a> Megatron<'a> {
    fn new(
        model: &'a Model,
        cm: &ComputeModel,
        cfg: &'a StepConfig,
        dp: u32,
        tp: u32,
        pp: u32,
    ) -> Result<Self, StepError> {
        let cp = cfg.context_parallel.max(1);
        let m = cfg.microbatches.max(1);
        if !cfg.batch_per_gpu.is_multiple_of(m as u64) {
            return Err(err(
                "workload.microbatches",
                format!(
                    "a divisor of batch_per_gpu ({}), got {m}",
                    cfg.batch_per_gpu
                ),
            ));
        }
        let v = cfg.virtual_stages.max(1);
        if v > 1 {
            // (`pipeline_parallel` of at least 2 is checked with the scenario.)
            let why = if cfg.pipeline_schedule != PipelineSchedule::OneFOneB {
                Some("pipeline_schedule = \"1f1b\" (interleaving is a 1F1B schedule)".to_string())
            } else if !m.is_multiple_of(pp) {
                Some(format!(
                    "microbatches ({m}) a multiple of pipeline_parallel ({pp}), as Megatron's \
                     interleaved schedule needs"
                ))
            } else if (pp * v) as usize > model.layers.len() {
                Some(format!(
                    "pipeline_parallel x virtual_stages ({pp} x {v}) at most the model's {} layers",
                    model.layers.len()
                ))
            } else {
                None
            };
            if let Some(why) = why {
                return Err(err("workload.virtual_stages", format!("{v} needs {why}")));
            }
        }
        let mut g = Megatron {
            model,
            cfg,
            mesh: Mesh {
                tp,
                cp,
                dp,
                pp,
                order: cfg.rank_order,
            },
            v,
            m,
            ep: cfg.expert_parallel.max(1),
            mb: cfg.batch_per_gpu / m as u64,
            e: cfg.dtype.bytes(),
            stages: Vec::new(),
            times: Vec::new(),
            ranks: Vec::new(),
            tp_groups: Vec::new(),
            rings: Vec::new(),
            cp_groups: Vec::new(),
            ep_groups: Vec::new(),
        };
        g.ranks = (0..pp).map(|s| g.mesh.stage_ranks(s)).collect();
        g.tp_groups = g
            .ranks
            .iter()
            .map(|r| r.chunks(tp as usize).map(<[u32]>::to_vec).collect())
            .collect();
        let (ep, coords) = (g.ep, || {
            (0..dp).flat_map(|r| (0..cp).flat_map(move |c| (0..tp).map(move |t| (r, c, t))))
        });
        if cp > 1 {
            g.rings = (0..pp)
                .map(|s| {
                    coords()
                        .map(|(r, c, t)| (g.rank(s, r, c, t), g.rank(s, r, (c + 1) % cp, t)))
                        .collect()
                })
                .collect();
            g.cp_groups = (0..pp)
                .map(|s| {
                    (0..dp)
                        .flat_map(|r| (0..tp).map(move |t| (r, t)))
                        .map(|(r, t)| (0..cp).map(|c| g.rank(s, r, c, t)).collect())
                        .collect()
                })
                .collect();
        }
        if ep > 1 {
            g.ep_groups = (0..pp)
                .map(|s| {
                    coords()
                        .filter(|&(r, _, _)| r < dp / ep)
                        .map(|(grp, c, t)| {
                            (grp * ep..(grp + 1) * ep)
                                .map(|r| g.rank(s, r, c, t))
                                .collect()
                        })
                        .collect()
                })
                .collect();
        }
        g.times = model
            .layers
            .iter()
            .map(|l| {
                if g.moe_ep(l) {
                    let padded = Layer {
                        forward_flops: (l.forward_flops as f64 * cfg.capacity_factor).round()
                            as u64,
                        ..l.clone()
                    };
                    cm.layer_times_split(&model.name, &padded, g.mb, g.split(l), cp as u64)
                } else {
                    cm.layer_times_split(&model.name, l, g.mb, g.split(l), cp as u64)
                }
            })
            .collect();
        let costs: Vec<f64> = g
            .times
            .iter()
            .map(|t| t.forward.as_secs_f64() + t.backward.as_secs_f64())
            .collect();
        g.stages = partition(&costs, (pp * v) as usize);
        Ok(g)
    }

    fn rank(&self, stage: u32, replica: u32, c: u32, t: u32) -> u32 {
        let Mesh { tp, cp, .. } = self.mesh;
        self.ranks[stage as usize][((replica * cp + c) * tp + t) as usize]
    }

    /// Ranks of one GPU stage (every compute op of the stage runs on all of them).
    fn per_stage(&self) -> u32 {
        self.mesh.dp * self.mesh.cp * self.mesh.tp
    }

    /// A MoE block runs on its tokens' share, sequence-parallel across the TP group (Megatron
    /// needs sequence parallelism for MoE under TP), its experts whole on each rank of the
    /// group (expert tensor parallelism 1); with expert parallelism, padded to their capacity.
    fn moe_ep(&self, l: &Layer) -> bool {
        self.ep > 1 && l.kind == LayerKind::MoeBlock
    }

    /// How many ways a layer's parameters are split (tensor parallelism).
    fn param_split(&self, l: &Layer) -> u64 {
        if l.kind.tensor_parallel() {
            self.mesh.tp as u64
        } else {
            1
        }
    }

    /// How many ways a layer's work is split besides context parallelism.
    fn split(&self, l: &Layer) -> u64 {
        if l.kind == LayerKind::MoeBlock {
            self.mesh.tp as u64
        } else {
            self.param_split(l)
        }
    }

    fn tp_spec(&self, bytes: u64) -> CollectiveSpec {
        CollectiveSpec {
            collective: Collective::AllReduce,
            bytes,
            root: 0,
            peer: 1,
            algorithm: self.cfg.algorithm.clone(),
            slices: self.cfg.slices,
        }
    }

    /// Sends between two stages: every (replica, context rank, tp rank) to its counterpart.
    fn pairs(&self, from: u32, to: u32) -> Vec<(u32, u32)> {
        let (a, b) = (&self.ranks[from as usize], &self.ranks[to as usize]);
        a.iter().copied().zip(b.iter().copied()).collect()
    }

    /// The communication inside layer `l`'s pass on stage `s`, if any: attention under
    /// context parallelism passes keys and values round the ring (with their gradients
    /// backward); a MoE block under expert parallelism dispatches cf x k x tokens x hidden per
    /// rank to the experts and combines as much back, the rank's tokens split over TP and CP.
    fn inner(&self, b: &StepBuilder, s: u32, l: usize) -> Option<Inner<'_>> {
        let (layer, tp, cp) = (&self.model.layers[l], self.mesh.tp, self.mesh.cp);
        if cp > 1 && layer.kv_elems > 0 {
            // One rank's share of the keys and values (heads split over TP, tokens over CP).
            let share = |elems: u64| elems / cp as u64 * self.mb * self.e / tp as u64;
            let groups = &self.cp_groups[s as usize];
            let spec = |c: Collective, bytes: u64| b.spec(c, bytes, self.cfg.algorithm_for(c));
            return Some(match self.cfg.context_parallel_comm {
                CpComm::P2p => Inner::Ring {
                    ring: &self.rings[s as usize],
                    bytes: share(layer.kv_elems),
                    cp,
                },
                // nccl-tests sizes: an all-gather's is its output, a reduce-scatter's its
                // input: the whole keys and values.
                CpComm::AllGather => Inner::Gathered {
                    gather: spec(Collective::AllGather, share(layer.kv_elems) * cp as u64),
                    scatter: spec(Collective::ReduceScatter, share(layer.kv_elems) * cp as u64),
                    groups,
                },
                // Queries are as wide as the block's input; the output as its output.
                CpComm::A2a => Inner::Ulysses {
                    qkv: spec(
                        Collective::AllToAll,
                        share(layer.input_elems + layer.kv_elems),
                    ),
                    out: spec(Collective::AllToAll, share(layer.output_elems)),
                    groups,
                },
            });
        }
        if !self.moe_ep(layer) {
            return None;
        }
        let k = self.model.moe.map_or(0, |m| m.experts_per_token);
        let bytes = (layer.input_elems as f64
            * self.mb as f64
            * k as f64
            * self.cfg.capacity_factor
            * self.e as f64
            / (tp * cp) as f64)
            .round() as u64;
        Some(Inner::Experts {
            spec: b.spec(
                Collective::AllToAll,
                bytes,
                self.cfg.algorithm_for(Collective::AllToAll),
            ),
            groups: &self.ep_groups[s as usize],
        })
    }

    /// One pass (forward or backward) of one micro-batch through virtual stage `q` on GPU
    /// stage `s`, after `prev`: the layers' compute merged between tensor-parallel
    /// all-reduces (and the passes with communication inside); returns its last op.
    fn pass(
        &self,
        b: &mut StepBuilder,
        s: u32,
        q: u32,
        fwd: bool,
        mut prev: Vec<OpId>,
    ) -> Result<OpId, StepError> {
        let (tp, cp, mb, e) = (self.mesh.tp, self.mesh.cp, self.mb, self.e);
        let per_stage = self.per_stage();
        let range = self.stages[q as usize].clone();
        let layers: Vec<usize> = if fwd {
            range.collect()
        } else {
            range.rev().collect()
        };
        let at = Lane {
            endpoints: per_stage,
            lane: s as u16,
        };
        let mut pending = SimTime::ZERO;
        let mut first_layer = layers[0] as u32;
        for (k, &l) in layers.iter().enumerate() {
            let t = &self.times[l];
            let layer = &self.model.layers[l];
            // What tensor parallelism all-reduces after this layer's pass (and after its
            // recomputed forward).
            let reduce = |forward: bool| {
                (tp > 1)
                    .then(|| layer.tensor_parallel_reduce_elems(forward))
                    .flatten()
            };
            let comm = reduce(fwd);
            let inner = self.inner(b, s, l);
            if !fwd && self.cfg.recompute {
                // Full recomputation: the layer's forward again (with its tensor-parallel
                // all-reduce) right before its backward.
                match &inner {
                    Some(inner) => {
                        let deps = at.flush(b, &mut pending, &prev, Phase::Backward, first_layer);
                        prev =
                            vec![inner.pass(b, at, t.forward, true, deps, Phase::Backward, l)?];
                    }
                    None => pending = pending.saturating_add(t.forward),
                }
                if let Some(elems) = reduce(true) {
                    let op = b.compute(
                        per_stage,
                        pending,
                        prev.clone(),
                        Phase::Backward,
                        s as u16,
                        first_layer,
                    );
                    pending = SimTime::ZERO;
                    let bytes = elems * mb * e / cp as u64;
                    prev = vec![b.collective(
                        self.tp_spec(bytes),
                        &self.tp_groups[s as usize],
                        vec![op],
                        &|op| op.kind.clone(),
                    )?];
                }
            }
            let (time, phase) = if fwd {
                (t.forward, Phase::Forward)
            } else {
                (t.backward, Phase::Backward)
            };
            match &inner {
                Some(inner) => {
                    let deps = at.flush(b, &mut pending, &prev, phase, first_layer);
                    prev = vec![inner.pass(b, at, time, fwd, deps, phase, l)?];
                    first_layer = layers.get(k + 1).copied().unwrap_or(0) as u32;
                }
                None => pending = pending.saturating_add(time),
            }
            if comm.is_some() || k + 1 == layers.len() {
                let op = b.compute(
                    per_stage,
                    pending,
                    prev.clone(),
                    phase,
                    s as u16,
                    first_layer,
                );
                prev = vec![op];
                pending = SimTime::ZERO;
                if let Some(elems) = comm {
                    let bytes = elems * mb * e / cp as u64;
                    prev = vec![b.collective(
                        self.tp_spec(bytes),
                        &self.tp_groups[s as usize],
                        prev.clone(),
                        &|op| op.kind.clone(),
                    )?];
                }
                first_layer = layers.get(k + 1).copied().unwrap_or(0) as u32;
            }
        }
        Ok(prev[0])
    }

    /// Bytes one rank sends on at the end of a pass through virtual stage `q`: the last
    /// layer's output forward, the first layer's input gradient backward.
    fn boundary_bytes(&self, q: u32, fwd: bool) -> u64 {
        let range = &self.stages[q as usize];
        let elems = if fwd {
            self.model.layers[range.end - 1].output_elems
        } else {
            self.model.layers[range.start].input_elems
        };
        elems * self.mb * self.e / self.mesh.tp as u64 / self.mesh.cp as u64
    }

    /// Parameters per rank of stage `s`'s copy of the tied embedding
    /// ([`Model::tied_embedding_copy`]).
    fn tied_copy(&self, s: u32) -> u64 {
        let Mesh { tp, pp, .. } = self.mesh;
        self.model
            .tied_embedding_copy(s as u64, pp as u64, tp as u64)
    }

    /// The tied embedding's two copies, on the first and the last stage, summed after the
    /// backward pass: an all-reduce between each first-stage rank and its last-stage
    /// counterpart (Megatron's embedding group), after both stages' last backward ops.
    /// `None` without a tied embedding split across stages.
    fn sync_tied_embedding(
        &self,
        b: &mut StepBuilder,
        first: Option<OpId>,
        last: Option<OpId>,
    ) -> Result<Option<OpId>, StepError> {
        let Mesh { tp, cp, dp, pp, .. } = self.mesh;
        let copy = self.tied_copy(pp - 1);
        if copy == 0 {
            return Ok(None);
        }
        let pairs: Vec<Vec<u32>> = (0..dp)
            .flat_map(|r| (0..cp).flat_map(move |c| (0..tp).map(move |t| (r, c, t))))
            .map(|(r, c, t)| vec![self.rank(0, r, c, t), self.rank(pp - 1, r, c, t)])
            .collect();
        let deps: Vec<OpId> = first.into_iter().chain(last).collect();
        Ok(Some(b.collective(
            self.tp_spec(copy * self.e),
            &pairs,
            deps,
            &|op| op.kind.clone(),
        )?))
    }

    /// Stage `s`'s gradient exchange after `after`, then its optimizer: an all-reduce over
    /// every replica of the parameters (Megatron's DP x CP group) and, for experts, among the
    /// replicas holding the same ones (the expert-data-parallel group); or, under the
    /// distributed optimizer, reduce-scatters over the same groups (dense, then experts), the
    /// update of both shards and all-gathers in the same order (Megatron-core keeps dense and
    /// expert parameters in separate buffers, each sharded over its own group). Returns the
    /// stage's last op.
    fn exchange(
        &self,
        b: &mut StepBuilder,
        cm: &ComputeModel,
        s: u32,
        after: Vec<OpId>,
    ) -> Result<OpId, StepError> {
        let Mesh { tp, cp, dp, pp, .. } = self.mesh;
        let (ep, e, cfg) = (self.ep, self.e, self.cfg);
        let held = || {
            (0..self.v)
                .flat_map(|c| self.model.layers[self.stages[(c * pp + s) as usize].clone()].iter())
        };
        // Expert weights (1/ep of each MoE block's) apart from the dense ones when their
        // group differs: under EP, or under TP (experts whole on every TP rank).
        let expert_params = self.model.moe.map_or(0, |m| m.expert_params_per_block);
        let apart = ep > 1 || tp > 1;
        let experts = |l: &Layer| {
            if apart && l.kind == LayerKind::MoeBlock {
                expert_params
            } else {
                0
            }
        };
        // The last stage's copy of a tied embedding (vocabulary-parallel under TP).
        let copy = self.tied_copy(s);
        let params: u64 = held()
            .map(|l| (l.params - experts(l)) / self.param_split(l))
            .sum::<u64>()
            + copy;
        let expert_shard: u64 = held().map(|l| experts(l) / ep as u64).sum();
        let tensors: u32 = held().map(|l| l.param_tensors).sum::<u32>() + (copy > 0) as u32;
        let groups: Vec<Vec<u32>> = if dp * cp > 1 {
            (0..tp)
                .map(|t| {
                    (0..dp)
                        .flat_map(|r| (0..cp).map(move |c| (r, c)))
                        .map(|(r, c)| self.rank(s, r, c, t))
                        .collect()
                })
                .collect()
        } else {
            Vec::new()
        };
        let lane = s as u16;
        // Expert gradients, on the same stream after the dense ones: among the ranks holding
        // the same experts (one of every `ep` replicas, every context rank, and every tensor
        // rank: the experts are whole on each rank of a TP group, which routes a different
        // share of the tokens through them, so their gradients are summed across it too).
        let replicas: Vec<Vec<u32>> = (0..ep)
            .map(|p| {
                (0..dp / ep)
                    .flat_map(|g| (0..cp).flat_map(move |c| (0..tp).map(move |t| (g, c, t))))
                    .map(|(g, c, t)| self.rank(s, g * ep + p, c, t))
                    .collect()
            })
            .collect();
        let expert_replicas = replicas[0].len() as u64;
        let sharded_experts = expert_shard > 0 && expert_replicas > 1;
        if cfg.method == DpMethod::Zero1 && (!groups.is_empty() || sharded_experts) {
            let spec = |c: Collective, bytes: u64| CollectiveSpec {
                collective: c,
                algorithm: cfg.algorithm_for(c),
                ..self.tp_spec(bytes * e)
            };
            // Each buffer over its group: (bytes, groups); a group of one is nothing to do.
            let mut buffers: Vec<(u64, &[Vec<u32>])> = Vec::new();
            if !groups.is_empty() {
                buffers.push((params, &groups));
            }
            if sharded_experts {
                buffers.push((expert_shard, &replicas));
            }
            let mut last = after;
            for &(bytes, g) in &buffers {
                let rs = b.collective(spec(Collective::ReduceScatter, bytes), g, last, &|op| {
                    op.kind.clone()
                })?;
                last = vec![rs];
            }
            let dense_shard = if groups.is_empty() {
                params
            } else {
                params.div_ceil((dp * cp) as u64)
            };
            let expert_part = expert_shard.div_ceil(expert_replicas.max(1));
            let opt = cm.optimizer_time(
                dense_shard + expert_part,
                tensors.div_ceil(dp * cp).max(1),
                cfg.optimizer,
            );
            let mut last = vec![b.compute(self.per_stage(), opt, last, Phase::Optimizer, lane, 0)];
            for &(bytes, g) in &buffers {
                let ag = b.collective(spec(Collective::AllGather, bytes), g, last, &|op| {
                    op.kind.clone()
                })?;
                last = vec![ag];
            }
            return Ok(last[0]);
        }
        let mut exchanged: Option<OpId> = None;
        if !groups.is_empty() {
            exchanged = Some(b.collective(
                self.tp_spec(params * e),
                &groups,
                after.clone(),
                &|op| op.kind.clone(),
            )?);
        }
        if sharded_experts {
            let deps = exchanged.map_or(after.clone(), |op| vec![op]);
            exchanged = Some(b.collective(
                self.tp_spec(expert_shard * e),
                &replicas,
                deps,
                &|op| op.kind.clone(),
            )?);
        }
        let done = match exchanged {
            Some(op) => op,
            None => b.join(after),
        };
        let opt = cm.optimizer_time(params + expert_shard, tensors, cfg.optimizer);
        Ok(b.compute(self.per_stage(), opt, vec![done], Phase::Optimizer, lane, 0))
    }
}

pub(super) fn hybrid_step(
    b: &mut StepBuilder,
    model: &Model,
    cm: &ComputeModel,
    cfg: &StepConfig,
    dp: u32,
    tp: u32,
    pp: u32,
) -> Result<StepDag, StepError> {
    let g = Megatron::new(model, cm, cfg, dp, tp, pp)?;
    let (v, m) = (g.v, g.m);
    let nq = pp * v;
    // Ops that deliver microbatch i's activation to virtual stage q (fwd) / its gradient (bwd).
    let mut act_in: Vec<Vec<Option<OpId>>> = vec![vec![None; m as usize]; nq as usize];
    let mut grad_in: Vec<Vec<Option<OpId>>> = vec![vec![None; m as usize]; nq as usize];
    let mut cursor = vec![0usize; pp as usize];
    let orders: Vec<Vec<Item>> = (0..pp)
        .map(|s| stage_order(cfg.pipeline_schedule, pp, v, m, s))
        .collect();
    let mut last_on_stage: Vec<Option<OpId>> = vec![None; pp as usize];
    // Walk the stages round-robin, emitting each stage's next item once its input exists
    // (ops must be pushed after their dependencies).
    let total_items: usize = orders.iter().map(|o| o.len()).sum();
    let mut emitted = 0;
    while emitted < total_items {
        let mut progressed = false;
        for s in 0..pp {
            let su = s as usize;
            while cursor[su] < orders[su].len() {
                let Item {
                    forward: fwd,
                    microbatch: i,
                    chunk,
                } = orders[su][cursor[su]];
                let iu = i as usize;
                let q = chunk * pp + s;
                let qu = q as usize;
                let input = if fwd {
                    if q == 0 {
                        Some(None)
                    } else {
                        act_in[qu][iu].map(Some)
                    }
                } else if q + 1 == nq {
                    Some(None)
                } else {
                    grad_in[qu][iu].map(Some)
                };
                let Some(input) = input else { break };
                let prev: Vec<OpId> = last_on_stage[su].into_iter().chain(input).collect();
                let end = g.pass(b, s, q, fwd, prev)?;
                last_on_stage[su] = Some(end);
                let bytes = g.boundary_bytes(q, fwd);
                if fwd && q + 1 < nq {
                    let to = (q + 1) % pp;
                    act_in[qu + 1][iu] = Some(b.transfer(g.pairs(s, to), bytes, vec![end])?);
                } else if !fwd && q > 0 {
                    let to = (q - 1) % pp;
                    grad_in[qu - 1][iu] = Some(b.transfer(g.pairs(s, to), bytes, vec![end])?);
                }
                cursor[su] += 1;
                emitted += 1;
                progressed = true;
            }
        }
        if !progressed {
            return Err(err(
                "workload.pipeline_schedule",
                "a schedule without deadlock (internal error)",
            ));
        }
    }
    // A tied embedding's copies summed first (Megatron does it after the data-parallel
    // exchange; both precede the optimizer), then per stage: gradient exchange across
    // replicas, then the optimizer.
    let tied = g.sync_tied_embedding(b, last_on_stage[0], last_on_stage[pp as usize - 1])?;
    let mut ends = Vec::new();
    for s in 0..pp {
        let mut after: Vec<OpId> = last_on_stage[s as usize].into_iter().collect();
        if s == 0 || s + 1 == pp {
            after.extend(tied);
        }
        ends.push(g.exchange(b, cm, s, after)?);
    }
    b.join(ends);
    let mut dag = empty_dag();
    dag.global_batch = cfg.batch_per_gpu * dp as u64;
    dag.virtual_stages = v;
    if cfg.rank_order != RankOrder::default() {
        dag.lane_ranks = g.ranks;
    }
    dag.stages = g.stages;
    dag.lane_count = pp as u16;
    Ok(dag)
}
