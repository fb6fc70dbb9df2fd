//! NCCL's point-to-point operations: the all-to-all as nccl-tests' `alltoall_perf` runs it (a
//! group of `ncclSend`/`ncclRecv`, every rank sending a `1/n` block to every other rank at
//! once), and a single `ncclSend`/`ncclRecv` pair (a pipeline stage's activations, a ring
//! attention shift). NCCL's tuner has no model of point-to-point operations (tuning.cc covers
//! collective algorithms only), so there is no choice to reproduce; what is played:
//! - every pair's block as one transfer, all of them together (the direct template), over the
//!   topology's routes: a GPU's blocks share its links, as NCCL's p2p channels share them;
//!   a send/recv pair is one such block, the whole message;
//! - the protocol: LL for blocks up to `NCCL_P2P_LL_THRESHOLD` (16 KiB, enqueue.cc 2.18), else
//!   Simple; LL puts 8 wire bytes on the link per 4 of data;
//! - the costs of the ring's kernels on the same transports (p2p runs the same send/receive
//!   primitives): the ring's call latency for the protocol once, its step latency and link
//!   efficiency for the class of link crossed, as a profile fitted them on all-reduce rows or
//!   NCCL's own constants. Nothing is fitted on all-to-all rows.

use super::params::Params;
use super::{Algo, Proto, Version};
use crate::collective::{
    generate, Algorithm, Collective, CollectiveSpec, Fabric, OpKind, Transport,
};
use crate::engine::SimTime;
use crate::library::{LibraryError, Plan, Request, System};
use crate::topology::LinkClass;

/// Blocks up to this many bytes go LL (`NCCL_P2P_LL_THRESHOLD`).
pub const P2P_LL_THRESHOLD: u64 = 16384;

/// The point-to-point plan of `req` (all_to_all or send_recv) on `sys`.
pub fn point_to_point(
    req: &Request,
    sys: &System,
    version: Version,
    params: &Params,
    fabric: &dyn Fabric,
) -> Result<Plan, LibraryError> {
    let block = match req.collective {
        Collective::SendRecv => req.bytes,
        _ => req.bytes / sys.ranks.max(1) as u64,
    };
    let p = if block <= P2P_LL_THRESHOLD {
        Proto::Ll
    } else {
        Proto::Simple
    };
    let spec = CollectiveSpec {
        collective: req.collective,
        bytes: req.bytes,
        root: req.root,
        peer: req.peer,
        algorithm: Algorithm::Direct,
        slices: 1,
    };
    let mut schedule = generate(&spec, sys.ranks, fabric)
        .map_err(|e| LibraryError::new(format!("collective ({})", e.field), e.expected))?;
    let class = sys
        .inter
        .filter(|_| sys.nodes > 1)
        .or(sys.intra)
        .map_or(LinkClass::Other, |f| f.class);
    let a = Algo::Ring;
    let base = params.base_latency_us(a, p);
    for op in schedule.ops.iter_mut() {
        if let OpKind::Transfer { bytes, pattern } = &mut op.kind {
            // Pairs inside a node pay the node's links, pairs across nodes the network's.
            let pairs = &schedule.patterns[pattern.0 as usize].pairs;
            let crosses = pairs
                .iter()
                .any(|&(x, y)| fabric.node_of(x) != fabric.node_of(y));
            let op_class = if crosses || sys.nodes == 1 {
                class
            } else {
                sys.intra.map_or(class, |f| f.class)
            };
            let wire = p.wire_bytes_per_byte() / params.efficiency(a, op_class);
            *bytes = (*bytes as f64 * wire).ceil() as u64;
            let setup_us = params.step_latency_us(a, p, op_class)
                + if op.deps.is_empty() { base } else { 0.0 };
            op.transport = Some(Transport {
                setup: SimTime::from_secs_f64(setup_us * 1e-6),
                max_flow_bps: f64::INFINITY,
            });
        }
    }
    schedule.algorithm = format!("nccl-p2p-{}", p.as_str());
    let what = match req.collective {
        Collective::SendRecv => "one send/recv pair",
        _ => "send/recv to every peer at once",
    };
    let decision = format!(
        "NCCL {version} p2p/{} ({what}; no tuner model), blocks of {block} B; steps over \
         {class}: base {base:.2} us, step {:.2} us, efficiency {:.3}",
        p.as_str(),
        params.step_latency_us(a, p, class),
        params.efficiency(a, class),
    );
    let (mut parameters, defaulted) = params.sources(a, p, class);
    parameters.extend(defaulted);
    Ok(Plan {
        schedule,
        placed_endpoints: Vec::new(),
        decision,
        parameters,
        alternatives: Vec::new(),
        alternatives_vary: String::new(),
        plays_per_way: 1,
    })
}
