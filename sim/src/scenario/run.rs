//! Runs a loaded scenario: builds the topology, places the ranks, generates the collective's
//! schedule, plays it on the chosen network model and gathers the results.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::collective::CallTiming;
pub(crate) use super::fabric::NetFabric;
use super::{NetworkModelName, PlacementStrategy, Scenario, ScenarioError};
use crate::collective::play::{play_watched, PlayError, PlayOptions, PlayOutcome, Watch};
use crate::collective::{benchmark_loop, generate, CollectiveError, OpKind, Phase, Schedule};
use crate::engine::{SimRng, SimTime};
use crate::library::mpi::Exchanges;
use crate::library::{self, Library, Request, System};
use crate::metrics::{RunIdentity, RunReport, TrafficKey};
use crate::net::factors::EfficiencyFactors;
use crate::net::flow::FlowModel;
use crate::net::packet::{CongestionControl, PacketModel};
use crate::net::series::SeriesOptions;
use crate::net::NetworkModel;
use crate::profile::{HostCpu, Profile, ProfileError};
use crate::topology::{
    file as topology_file, DeviceId, DeviceKind, Link, LinkClass, Topology, TopologyError,
};

/// Anything that can stop a run, each naming the file and field at fault.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    Scenario(#[from] ScenarioError),
    #[error(transparent)]
    Topology(#[from] TopologyError),
    #[error(transparent)]
    Profile(#[from] ProfileError),
    /// The simulation itself stopped: past the horizon of simulated time, or out of budget.
    #[error("{file}: {error}{hint}")]
    Play {
        file: String,
        /// The inputs that set the amount of traffic, for the user to change.
        hint: String,
        error: PlayError,
    },
}

impl RunError {
    /// A [`PlayError`] of scenario `file`; `hint` names the inputs behind the traffic.
    pub fn play(file: &str, hint: String, e: PlayError) -> RunError {
        match e {
            PlayError::Topology(t) => RunError::Topology(t),
            error => RunError::Play {
                file: file.to_string(),
                hint: match error {
                    PlayError::Horizon { .. } => hint,
                    _ => String::new(),
                },
                error,
            },
        }
    }
}

/// Everything a run needs, built from the scenario.
#[derive(Clone)]
pub struct Prepared {
    pub topology: Arc<Topology>,
    pub profile: Profile,
    pub ranks: Vec<DeviceId>,
    /// Ranks per node for hierarchical algorithms, when the scenario overrides the topology's.
    pub group_size: Option<u32>,
}

/// A topology error in a field that the scenario's `[topology]` table overrides is the
/// scenario's: name the scenario file and the overriding key (`topology.generator.n`), and the
/// topology file it overrides.
fn blame_overrides(s: &Scenario, e: TopologyError) -> TopologyError {
    fn leaves(t: &toml::Table, prefix: &str, out: &mut Vec<String>) {
        for (k, v) in t {
            let path = if prefix.is_empty() {
                k.clone()
            } else {
                format!("{prefix}.{k}")
            };
            match v {
                toml::Value::Table(inner) => leaves(inner, &path, out),
                _ => out.push(path),
            }
        }
    }
    let mut overridden = Vec::new();
    leaves(&s.topology_overrides, "", &mut overridden);
    let field = e.field.split(" (").next().unwrap_or(&e.field);
    let hits: Vec<&String> = overridden
        .iter()
        .filter(|o| {
            *o == field
                || o.starts_with(&format!("{field}."))
                || field.starts_with(&format!("{o}."))
        })
        .collect();
    if hits.is_empty() {
        return e;
    }
    let named = if hits.len() == 1 && hits[0].len() > field.len() {
        hits[0].as_str()
    } else {
        field
    };
    TopologyError {
        file: Some(s.path.display().to_string()),
        field: format!("topology.{named}"),
        expected: format!("{} (overriding {})", e.expected, s.topology_path.display()),
    }
}

/// Loads the topology and profile and places the ranks.
pub fn prepare(s: &Scenario) -> Result<Prepared, RunError> {
    let file = s.path.display().to_string();
    let topology = Arc::new(
        topology_file::load_with_overrides(&s.topology_path, &s.topology_overrides)
            .map_err(|e| blame_overrides(s, e))?,
    );
    let mut profile = match &s.profile_path {
        Some(p) => Profile::load(p)?,
        None => Profile::nominal(),
    };
    if let Some(cores) = s.file.network.shared_cores {
        let Some(host_cpu) = profile.network.host_cpu.as_mut() else {
            return Err(ScenarioError::new(
                &file,
                "network.shared_cores",
                format!(
                    "a profile with network.host_cpu (what a message costs the cores: \
                     calibrate import cpu-costs); profile {:?} has none",
                    profile.name
                ),
            )
            .into());
        };
        HostCpu::check_shared_cores(cores)
            .map_err(|expected| ScenarioError::new(&file, "network.shared_cores", expected))?;
        host_cpu.shared_cores = cores;
    }
    super::check_topology_library(&topology).map_err(|(field, expected)| {
        ScenarioError::new(s.topology_path.display().to_string(), field, expected)
    })?;
    let gpus = topology.gpus();
    let p = &s.file.placement;
    let n = p.ranks.unwrap_or(gpus.len() as u32);
    if n == 0 {
        return Err(ScenarioError::new(&file, "placement.ranks", "at least 1 rank").into());
    }
    if n as usize > gpus.len() {
        return Err(ScenarioError::new(
            &file,
            "placement.ranks",
            format!(
                "at most {} (the GPUs of topology {:?}), got {n}",
                gpus.len(),
                topology.name
            ),
        )
        .into());
    }
    let ranks: Vec<DeviceId> = match p.strategy {
        PlacementStrategy::RankOrdered => gpus[..n as usize].to_vec(),
        PlacementStrategy::Random => {
            let mut all = gpus.to_vec();
            SimRng::new(s.file.seed, 0)
                .fork("placement")
                .shuffle(&mut all);
            all.truncate(n as usize);
            all
        }
        PlacementStrategy::Explicit => {
            let Some(names) = &p.devices else {
                return Err(ScenarioError::new(
                    &file,
                    "placement.devices",
                    "a list of GPU names for explicit placement",
                )
                .into());
            };
            if names.len() != n as usize {
                return Err(ScenarioError::new(
                    &file,
                    "placement.devices",
                    format!("one device per rank ({n}), got {}", names.len()),
                )
                .into());
            }
            let mut out = Vec::with_capacity(names.len());
            for (i, name) in names.iter().enumerate() {
                let id = lookup(&topology, name, &file, &format!("placement.devices[{i}]"))?;
                if topology.device(id).kind != DeviceKind::Gpu {
                    return Err(ScenarioError::new(
                        &file,
                        format!("placement.devices[{i}]"),
                        format!("a GPU, but {name:?} is a {}", topology.device(id).kind),
                    )
                    .into());
                }
                if out.contains(&id) {
                    return Err(ScenarioError::new(
                        &file,
                        format!("placement.devices[{i}]"),
                        format!("a GPU not used by another rank; {name:?} is used twice"),
                    )
                    .into());
                }
                out.push(id);
            }
            out
        }
    };
    if p.strategy != PlacementStrategy::Explicit && p.devices.is_some() {
        return Err(ScenarioError::new(
            &file,
            "placement.devices",
            "only with strategy = \"explicit\"",
        )
        .into());
    }
    let group_size = match p.group_size {
        Some(g) if g == 0 || !n.is_multiple_of(g) => {
            return Err(ScenarioError::new(
                &file,
                "placement.group_size",
                format!("a divisor of the rank count {n} (ranks per group), got {g}"),
            )
            .into())
        }
        g => g,
    };
    Ok(Prepared {
        topology,
        profile,
        ranks,
        group_size,
    })
}

fn lookup(t: &Topology, name: &str, file: &str, field: &str) -> Result<DeviceId, ScenarioError> {
    t.find(name).ok_or_else(|| {
        ScenarioError::new(
            file,
            field,
            format!("a device of topology {:?}; there is no {name:?}", t.name),
        )
    })
}

/// The network model the scenario asks for, over the prepared topology and profile.
pub fn network_model(s: &Scenario, prep: &Prepared) -> Result<Box<dyn NetworkModel>, RunError> {
    let file = s.path.display().to_string();
    let model: Box<dyn NetworkModel> = match s.file.network.model {
        NetworkModelName::Flow => Box::new(FlowModel::new(
            prep.topology.clone(),
            prep.profile.efficiency_factors(),
            s.file.seed,
        )),
        NetworkModelName::Packet => {
            let factors = prep.profile.efficiency_factors();
            let mut config = s
                .file
                .network
                .packet_config()
                .map_err(|(f, e)| ScenarioError::new(&file, f, e))?;
            let topology = packet_topology(&prep.topology, &factors).map_err(|class| {
                ScenarioError::new(
                    &file,
                    "network.model",
                    format!(
                        "a profile whose {class} factors do not depend on the transfer size for \
                         the packet model (it plays rates and latencies, not per-size \
                         factors); profile {:?} has a size table: use model = \"flow\" or \
                         another profile",
                        prep.profile.name
                    ),
                )
            })?;
            // The shapers the profile measured: their buckets, and (CUBIC) the GSO packets
            // their receivers get whole and acknowledge one by one.
            for &class in LinkClass::ALL.iter() {
                config.set_shaper_burst_secs(class, factors.shaper_burst_secs(class));
            }
            if config.congestion_control == CongestionControl::Cubic {
                let gso = LinkClass::ALL
                    .iter()
                    .map(|&c| factors.shaper_packet_bytes(c))
                    .fold(0.0, f64::max);
                config.ack_every_bytes = gso.round() as u64;
            }
            if config.congestion_control == CongestionControl::Cubic
                && s.file.network.host_queue.is_none()
            {
                // The profile's measured FIFO head is what a connection keeps queued.
                let head = LinkClass::ALL
                    .iter()
                    .map(|&c| factors.fifo_head_bytes(c))
                    .fold(0.0, f64::max);
                if head > 0.0 {
                    config.host_queue_bytes = head.round() as u64;
                }
            }
            Box::new(
                PacketModel::new(topology, config, s.file.seed)
                    .map_err(|e| e.in_file(s.topology_path.display().to_string()))?,
            )
        }
    };
    Ok(model)
}

/// The topology as the packet model plays it under `factors`: every link at its class's
/// payload rate (bandwidth factor × link efficiency) and latency (× latency factor), or the
/// class whose factors depend on the size. The shapers' buckets come with the packet config.
fn packet_topology(
    topo: &Arc<Topology>,
    factors: &EfficiencyFactors,
) -> Result<Arc<Topology>, LinkClass> {
    if factors.is_identity() {
        return Ok(topo.clone());
    }
    let mut scale = Vec::new();
    for l in topo.links() {
        if !scale.iter().any(|&(c, _, _)| c == l.class) {
            let (bw, lat) = factors.size_independent(l.class).ok_or(l.class)?;
            scale.push((l.class, bw * factors.link_efficiency(l.class), lat));
        }
    }
    Ok(Arc::new(topo.map_links(|l| {
        let &(_, bw, lat) = scale
            .iter()
            .find(|s| s.0 == l.class)
            .unwrap_or(&(l.class, 1.0, 1.0));
        Link {
            bandwidth_bps: l.bandwidth_bps * bw,
            latency: SimTime::from_ps((l.latency.as_ps() as f64 * lat).round() as u64),
            ..l.clone()
        }
    })))
}

/// Runs the scenario to completion.
pub fn run(s: &Scenario) -> Result<RunReport, RunError> {
    run_watched(s, Watch::default())
}

/// [`run`] under a [`Watch`]: an event budget and progress reports.
pub fn run_watched(s: &Scenario, watch: Watch) -> Result<RunReport, RunError> {
    run_prepared(s, prepare(s)?, watch)
}

/// Runs the scenario on an already prepared topology and profile (a fit changes the profile
/// between runs without reloading files).
pub fn run_prepared(s: &Scenario, prep: Prepared, watch: Watch) -> Result<RunReport, RunError> {
    let file = s.path.display().to_string();
    let n = prep.ranks.len() as u32;
    let library = s.library(&prep.topology);
    let spec = s
        .collective_spec(n, library)
        .map_err(|(f, e)| ScenarioError::new(&file, f, e))?;
    let mut model = network_model(s, &prep)?;
    let collective_error = |e: CollectiveError| {
        ScenarioError::new(&file, format!("collective ({})", e.field), e.expected)
    };

    // A library's plan of a call, its network model given (the plan asks it for paths).
    let plan_request =
        |model: &mut dyn NetworkModel, request: &Request, opts: &library::LibraryOptions| {
            let fabric = NetFabric::new(model, &prep);
            let members: Vec<u32> = (0..n).collect();
            let system = System::of(&fabric, &members);
            library::plan(
                library,
                request,
                &system,
                opts,
                prep.profile.network.nccl.as_ref(),
                &fabric,
            )
            .map_err(|e| ScenarioError::new(&file, e.field, e.expected))
        };
    let plan_with = |model: &mut dyn NetworkModel, opts: &library::LibraryOptions| {
        plan_request(model, &Request::of(&spec), opts)
    };

    let mut decision = None;
    let mut parameters = Vec::new();
    let mut alternatives = Vec::new();
    let mut alternatives_vary = String::new();
    let mut plays_per_way = 1;
    // OpenMPI in its median or expected exchange mode: its options, to play the same call with every
    // exchange between partners both ways at once and with every one one way after the other,
    // whose times bound what a launch does (see `library::mpi`).
    let mut exchange_opts: Option<library::LibraryOptions> = None;
    let mut placed: Vec<(String, DeviceId)> = Vec::new();
    // Timed after the same call and the library's barrier: that barrier's schedule, one per play
    // of the call where its wake-ups are drawn (each play after a barrier of its own draws).
    let mut barriers: Vec<Schedule> = Vec::new();
    let timing = s
        .file
        .collective
        .as_ref()
        .and_then(|c| c.timing)
        .unwrap_or_default();
    let timed_calls = super::plays::timed_calls_of(s, &file)?;
    let barrier_request = Request {
        collective: crate::collective::Collective::Barrier,
        bytes: 0,
        root: 0,
        peer: 1.min(n.saturating_sub(1)),
    };
    let schedule: Schedule = if library == Library::Ideal {
        // Extra endpoints (parameter servers) go where the scenario says; generate once to
        // learn their names, then place them.
        let fabric = NetFabric::new(model.as_mut(), &prep);
        if timing == CallTiming::AfterBarrier {
            // The templates' barrier: every rank tells every other.
            let spec = crate::collective::CollectiveSpec {
                collective: crate::collective::Collective::Barrier,
                bytes: 0,
                root: 0,
                peer: barrier_request.peer,
                algorithm: crate::collective::Algorithm::Direct,
                slices: 1,
            };
            barriers.push(generate(&spec, n, &fabric).map_err(collective_error)?);
        }
        generate(&spec, n, &fabric).map_err(collective_error)?
    } else {
        if s.file.network.model == NetworkModelName::Packet && library == Library::Nccl {
            return Err(ScenarioError::new(
                &file,
                "network.model",
                format!(
                    "the flow model with library = \"{library}\": the packet model sends at \
                     link rate and cannot pace a channel at its copy rate; use model = \"flow\" \
                     or library = \"ideal\""
                ),
            )
            .into());
        }
        let c = s.file.collective.as_ref().expect("a collective scenario");
        let opts = super::library_options_of(c, library)
            .map_err(|(f, e)| ScenarioError::new(&file, f, e))?
            .with_host_profile(&prep.profile)
            .with_wake_ups(
                &prep.profile,
                s.file.seed,
                crate::library::gloo::host_cpu::WAKE_UP_PLAYS,
            );
        let plan = plan_with(model.as_mut(), &opts)?;
        if timing == CallTiming::AfterBarrier {
            // The harness's barrier: the library's default, whatever the call forces. A play of
            // it per play of the call, drawn from a seed of their own: which rank leaves the
            // barrier late is a draw like the call's own, and one barrier shared by every play
            // moved all of them together (the 1:1 leaves' 16 MiB multiring -3.8% or -14.9% by
            // the seed alone).
            let barrier_opts = library::LibraryOptions {
                algorithm: None,
                ring_orders: Vec::new(),
                ..opts.clone()
            }
            .with_wake_ups(
                &prep.profile,
                s.file.seed ^ super::plays::BARRIER_SEED,
                1 + plan.alternatives.len(),
            );
            let played = plan_request(model.as_mut(), &barrier_request, &barrier_opts)?;
            barriers.push(played.schedule);
            barriers.extend(played.alternatives);
        }
        if library == Library::Mpi
            && matches!(opts.mpi_exchanges, Exchanges::Median | Exchanges::Expected)
        {
            exchange_opts = Some(opts);
        }
        decision = Some(plan.decision);
        parameters = plan.parameters;
        placed = plan.placed_endpoints;
        alternatives = plan.alternatives;
        alternatives_vary = plan.alternatives_vary;
        plays_per_way = plan.plays_per_way;
        plan.schedule
    };
    let mut endpoints = prep.ranks.clone();
    for (i, name) in schedule.extra_endpoints.iter().enumerate() {
        if let Some((_, dev)) = placed.iter().find(|(p, _)| p == name) {
            endpoints.push(*dev);
            continue;
        }
        let field = format!("placement.endpoints.{name}");
        let Some(dev) = s.file.placement.endpoints.get(name) else {
            return Err(ScenarioError::new(
                &file,
                field,
                format!("the device of extra endpoint {name:?} (endpoint {} of algorithm {}), e.g. a host", n as usize + i, schedule.algorithm),
            )
            .into());
        };
        endpoints.push(lookup(&prep.topology, dev, &file, &field)?);
    }
    for name in s.file.placement.endpoints.keys() {
        if !schedule.extra_endpoints.contains(name) {
            return Err(ScenarioError::new(
                &file,
                format!("placement.endpoints.{name}"),
                format!(
                    "one of the algorithm's extra endpoints {:?}",
                    schedule.extra_endpoints
                ),
            )
            .into());
        }
    }
    let play_options = PlayOptions {
        reduce_bytes_per_s: prep.profile.reduce_bytes_per_s(),
        shared_cores: prep.profile.shared_cores(),
    };
    let play_error = |e| {
        let hint = format!(
            "; make collective.bytes ({}) smaller or the links faster",
            spec.bytes
        );
        RunError::play(&file, hint, e)
    };
    // Plays beside the main one, each on a network of its own and held to the run's limits:
    // a schedule's time alone, or in its benchmark loop where the scenario times it so. The
    // limits are built per play: a watch's progress callback is not shared between threads.
    let (max_events, max_bytes) = (watch.max_events, watch.max_bytes);
    let limits = || Watch {
        max_events,
        max_bytes,
        ..Watch::default()
    };
    // Play i's barrier (the barrier's plays as many as the call's, or one for all).
    let barrier_of = |i: usize| (!barriers.is_empty()).then(|| &barriers[i % barriers.len()]);
    let time_on_own_network = |schedule: &Schedule, i: usize| -> Result<SimTime, RunError> {
        let mut m = network_model(s, &prep)?;
        super::plays::play_timed(
            schedule,
            barrier_of(i),
            timed_calls,
            &endpoints,
            m.as_mut(),
            play_options,
            limits(),
        )
        .map_err(play_error)
    };
    // Every play of `first` and `others` on a network of its own: each play's end and its
    // index. The plays are independent: in parallel, collected in play order (deterministic),
    // the first play's error in play order whichever thread met one first.
    let play_all =
        |first: &Schedule, others: &[Schedule]| -> Result<Vec<(SimTime, usize)>, RunError> {
            use rayon::prelude::*;
            let plays: Vec<&Schedule> = std::iter::once(first).chain(others).collect();
            let played: Vec<Result<(SimTime, usize), RunError>> = plays
                .par_iter()
                .enumerate()
                .map(|(i, play)| time_on_own_network(play, i).map(|end| (end, i)))
                .collect();
            played.into_iter().collect()
        };
    // Where the call runs one of several equally likely ways (the plan's alternatives), every
    // way is played, and the run is the median one's: its time the median of all (the mean of
    // the middle two for an even count). Where each way is played several times with other
    // draws (`plays_per_way`), each way's median play stands for it first, so that two ways
    // far apart meet at their medians' mean and not at the draws' extremes. An estimate
    // (--dry-run) is the first play's alone.
    let mut schedule = schedule;
    let mut median_index = 0;
    let mut median_of: Option<(usize, SimTime, SimTime, SimTime)> = None;
    if !alternatives.is_empty() && !watch.estimate_only {
        let ends = play_all(&schedule, &alternatives)?;
        let k = ends.len();
        let (median, lo) = super::plays::median_play(&ends, plays_per_way);
        let fastest = ends.iter().map(|e| e.0).min().unwrap_or(median);
        let slowest = ends.iter().map(|e| e.0).max().unwrap_or(median);
        median_of = Some((k, median, fastest, slowest));
        median_index = lo;
        if lo > 0 {
            schedule = alternatives.swap_remove(lo - 1);
        }
    }
    let mut outcome: PlayOutcome =
        play_watched(&schedule, &endpoints, model.as_mut(), play_options, watch)
            .map_err(play_error)?;
    // Timed in its loop: the report's times and timeline are the timed call's; the traffic
    // and the link series stay the call's alone (the loop's would count the call twice).
    let mut alone_end: Option<SimTime> = None;
    // The fastest and slowest of the timed calls (several timed calls only).
    let mut calls_span: Option<(SimTime, SimTime)> = None;
    if let Some(barrier) = barrier_of(median_index).filter(|_| !watch.estimate_only) {
        alone_end = Some(outcome.end);
        // The call in its loop (the median play's, where there are several): its timeline.
        let mut m = network_model(s, &prep)?;
        let (played, looped) = benchmark_loop::play_after_barrier(
            &schedule,
            barrier,
            timed_calls,
            &endpoints,
            m.as_mut(),
            play_options,
            limits(),
        )
        .map_err(play_error)?;
        let times = looped.copy_times(&played);
        calls_span = times
            .iter()
            .min()
            .zip(times.iter().max())
            .map(|(&lo, &hi)| (lo, hi));
        outcome = benchmark_loop::timed_call(&played, &looped, &outcome);
    }
    // One mode at a time.
    let mut exchange_modes: Option<([SimTime; 2], Exchanges)> = None;
    if let Some(opts) = exchange_opts.filter(|_| !watch.estimate_only) {
        let mut ends = [SimTime::ZERO; 2];
        for (end, x) in ends
            .iter_mut()
            .zip([Exchanges::BothWays, Exchanges::OneWayFirst])
        {
            let opts = library::LibraryOptions {
                mpi_exchanges: x,
                ..opts.clone()
            };
            let plan = plan_with(network_model(s, &prep)?.as_mut(), &opts)?;
            // Every way of the mode (which partner of each slow exchange posts first), as
            // the call itself is played: its median.
            let ends = play_all(&plan.schedule, &plan.alternatives)?;
            *end = super::plays::median_play(&ends, plan.plays_per_way).0;
        }
        // Equal but for rounding: the algorithm exchanges nothing that the modes change.
        let (a, b) = (ends[0].as_ps() as f64, ends[1].as_ps() as f64);
        exchange_modes = ((a - b).abs() > 1e-9 * a.max(b)).then_some((ends, opts.mpi_exchanges));
    }
    let traffic = model.link_traffic();
    let ports = model.port_stats();
    let series = model.link_series(alone_end.unwrap_or(outcome.end), SeriesOptions::default());

    // Bytes per (pattern, phase) first: one pass over ops, then one over each pattern's pairs.
    let mut per_pattern: BTreeMap<(u32, Phase), u128> = BTreeMap::new();
    for op in &schedule.ops {
        if let OpKind::Transfer { pattern, bytes } = op.kind {
            *per_pattern.entry((pattern.0, op.phase)).or_insert(0) += bytes as u128;
        }
    }
    let mut pairs: BTreeMap<TrafficKey, u128> = BTreeMap::new();
    for (&(pattern, phase), &bytes) in &per_pattern {
        for &(src, dst) in schedule.patterns[pattern as usize].pairs.iter() {
            *pairs.entry(TrafficKey { src, dst, phase }).or_insert(0) += bytes;
        }
    }
    let network_model = format!("{:?}", s.file.network.model).to_lowercase();
    let run = RunIdentity {
        scenario: &s.file.name,
        network_model: &network_model,
        seed: s.file.seed,
        topology: &prep.topology,
        profile: &prep.profile.name,
    };
    let mut report = RunReport::new(run, &schedule, &endpoints, &outcome, &traffic, pairs);
    report.library = library.as_str();
    report.gpu = prep
        .topology
        .gpu
        .as_deref()
        .and_then(crate::topology::gpu_models::by_name)
        .map(|g| g.name.to_string());
    report.summary.library = match decision {
        Some(d) => d,
        None => "ideal (dtsim's templates as configured)".into(),
    };
    if let Some(alone) = alone_end {
        let calls = match calls_span {
            Some((fastest, slowest)) if timed_calls > 1 => format!(
                "the median of {timed_calls} calls ({:.3} to {:.3} ms), each ",
                fastest.as_secs_f64() * 1e3,
                slowest.as_secs_f64() * 1e3
            ),
            _ => String::new(),
        };
        report.summary.library.push_str(&format!(
            "; timed as a benchmark loop times it, {calls}after the same call and the \
             library's barrier (alone: {:.3} ms)",
            alone.as_secs_f64() * 1e3
        ));
    }
    if let Some((k, median, fastest, slowest)) = median_of {
        report.set_median_time(median);
        report.summary.plays = Some(crate::metrics::PlaysSpan {
            count: k as u32,
            fastest_ps: fastest.as_ps(),
            slowest_ps: slowest.as_ps(),
        });
        report.summary.library.push_str(&format!(
            "; the median of {k} plays of {alternatives_vary} ({:.3}-{:.3} ms)",
            fastest.as_secs_f64() * 1e3,
            slowest.as_secs_f64() * 1e3
        ));
    }
    if let Some(([both, serial], x)) = exchange_modes {
        report.summary.exchange_modes_ps = Some([both.as_ps(), serial.as_ps()]);
        let played = match x {
            Exchanges::Median => {
                "as in the median call, slow from the step by which half the \
                                  calls have gone slow"
            }
            _ => "at their expected time",
        };
        report.summary.library.push_str(&format!(
            "; exchanges between partners {played} (every one both ways at once {:.3} ms, \
             every one one way after the other {:.3} ms: a launch keeps near one)",
            both.as_secs_f64() * 1e3,
            serial.as_secs_f64() * 1e3
        ));
    }
    report.summary.library_parameters = parameters;
    if let Some(ports) = ports {
        report.attach_ports(&ports, &prep.topology, &schedule, &endpoints);
    }
    report.link_series = series;
    Ok(report)
}
