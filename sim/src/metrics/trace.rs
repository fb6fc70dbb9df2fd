//! The per-rank timeline of a run as a Chrome / Perfetto trace (`trace.json`, the Trace Event
//! Format: one track per endpoint, one complete event per send, receive and compute interval),
//! so that it opens in chrome://tracing, ui.perfetto.dev and the tools people already use.

use std::fmt::Write as _;

use crate::collective::play::OpTiming;
use crate::collective::{OpKind, Schedule};

/// One interval on one track.
#[derive(Debug, Clone, PartialEq)]
pub struct TraceEvent {
    pub track: u32,
    /// `"send"`, `"recv"` or `"compute"`.
    pub role: &'static str,
    /// The op's phase (`"reduce-scatter"`, `"backward"` ...).
    pub phase: &'static str,
    pub op: u32,
    pub step: u32,
    /// The other endpoint of a transfer.
    pub peer: Option<u32>,
    pub bytes: u64,
    pub start_ps: u64,
    pub end_ps: u64,
}

/// Tracks (endpoint names) and their events, sorted by (track, start, op).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Trace {
    pub title: String,
    pub tracks: Vec<String>,
    pub events: Vec<TraceEvent>,
    /// Tracks left out to keep the trace under the event cap.
    pub tracks_left_out: usize,
}

/// One end of a transfer on a track: (track, peer, `"send"` or `"recv"`).
type TransferEnd = (u32, u32, &'static str);

/// Calls `f` with every per-track event of a played schedule on tracks `0..n_tracks`, in op
/// order (see [`Trace::from_schedule`] for what runs where).
fn each_event(
    schedule: &Schedule,
    times: &[OpTiming],
    lanes: Option<Lanes<'_>>,
    n_tracks: usize,
    f: &mut dyn FnMut(TraceEvent),
) {
    let ranks = schedule.ranks as usize;
    // Each listed lane's ranks on the kept tracks, filtered once rather than per op (a stage of
    // a 16,384-GPU step has 1,024 ranks, a trace keeps a few tracks).
    let kept_lane_ranks: Option<Vec<Vec<usize>>> = lanes.and_then(|l| l.ranks).map(|listed| {
        listed
            .iter()
            .map(|rs| {
                rs.iter()
                    .map(|&r| r as usize)
                    .filter(|&r| r < n_tracks)
                    .collect()
            })
            .collect()
    });
    // Each pattern's (track, peer, role) on the kept tracks, listed the first time an op uses
    // it: a pattern of a fused collective has thousands of pairs, a trace keeps a few tracks.
    let mut kept_ends: Vec<Option<Vec<TransferEnd>>> = vec![None; schedule.patterns.len()];
    for (i, (op, t)) in schedule.ops.iter().zip(times).enumerate() {
        let (start_ps, end_ps) = (t.start.as_ps(), t.end.as_ps());
        let base = TraceEvent {
            track: 0,
            role: "compute",
            phase: op.phase.as_str(),
            op: i as u32,
            step: op.step,
            peer: None,
            bytes: 0,
            start_ps,
            end_ps,
        };
        match op.kind {
            OpKind::Transfer { pattern, bytes } => {
                let ends = kept_ends[pattern.0 as usize].get_or_insert_with(|| {
                    schedule.patterns[pattern.0 as usize]
                        .pairs
                        .iter()
                        .flat_map(|&(a, b)| [(a, b, "send"), (b, a, "recv")])
                        .filter(|&(track, _, _)| (track as usize) < n_tracks)
                        .collect()
                });
                for &(track, peer, role) in ends.iter() {
                    f(TraceEvent {
                        track,
                        role,
                        peer: Some(peer),
                        bytes,
                        ..base.clone()
                    });
                }
            }
            OpKind::Compute { .. } if end_ps > start_ps => {
                let mut on_track = |r: usize| {
                    f(TraceEvent {
                        track: r as u32,
                        ..base.clone()
                    })
                };
                let block = |from: usize, to: usize| (from..to).take_while(|&r| r < n_tracks);
                match lanes.map(|l| (l, l.of_op.get(i).copied().flatten())) {
                    None => block(0, ranks).for_each(&mut on_track),
                    Some((_, None)) => {}
                    Some((l, Some(lane))) => match &kept_lane_ranks {
                        Some(kept) => kept[lane as usize].iter().copied().for_each(&mut on_track),
                        None => {
                            let per = ranks / l.count.max(1) as usize;
                            block(lane as usize * per, (lane as usize + 1) * per)
                                .for_each(&mut on_track)
                        }
                    },
                }
            }
            OpKind::Reduce { bytes, .. } if end_ps > start_ps => {
                for r in 0..ranks.min(n_tracks) {
                    f(TraceEvent {
                        track: r as u32,
                        role: "reduce",
                        bytes,
                        ..base.clone()
                    });
                }
            }
            _ => {}
        }
    }
}

/// How many events [`each_event`] gives each of the tracks `0..n_tracks`, in time proportional
/// to ops, patterns and stages rather than to events: a transfer counts once for its pattern, a
/// compute op once for its stage, and both are spread over their tracks at the end (a 16,384-GPU step has hundreds
/// of millions of per-rank compute events; counting them one by one was most of a run).
fn events_per_track(
    schedule: &Schedule,
    times: &[OpTiming],
    lanes: Option<Lanes<'_>>,
    n_tracks: usize,
) -> Vec<usize> {
    let ranks = schedule.ranks as usize;
    let mut counts = vec![0usize; n_tracks];
    let mut on_every_rank = 0usize;
    let mut per_lane: Vec<usize> = Vec::new();
    let mut per_pattern = vec![0usize; schedule.patterns.len()];
    for (i, (op, t)) in schedule.ops.iter().zip(times).enumerate() {
        let lasts = t.end.as_ps() > t.start.as_ps();
        match op.kind {
            OpKind::Transfer { pattern, .. } => per_pattern[pattern.0 as usize] += 1,
            OpKind::Compute { .. } if lasts => {
                match lanes.map(|l| l.of_op.get(i).copied().flatten()) {
                    None => on_every_rank += 1,
                    Some(None) => {}
                    Some(Some(lane)) => {
                        let lane = lane as usize;
                        if per_lane.len() <= lane {
                            per_lane.resize(lane + 1, 0);
                        }
                        per_lane[lane] += 1;
                    }
                }
            }
            OpKind::Reduce { .. } if lasts => on_every_rank += 1,
            _ => {}
        }
    }
    for (pattern, &n) in schedule.patterns.iter().zip(&per_pattern) {
        if n > 0 {
            for &(a, b) in pattern.pairs.iter() {
                for track in [a as usize, b as usize] {
                    if track < n_tracks {
                        counts[track] += n;
                    }
                }
            }
        }
    }
    for c in counts.iter_mut().take(ranks) {
        *c += on_every_rank;
    }
    if let Some(l) = lanes {
        for (lane, &n) in per_lane.iter().enumerate().filter(|(_, &n)| n > 0) {
            match l.ranks {
                Some(listed) => {
                    for &r in listed[lane].iter().filter(|&&r| (r as usize) < n_tracks) {
                        counts[r as usize] += n;
                    }
                }
                None => {
                    let per = ranks / l.count.max(1) as usize;
                    let to = ((lane + 1) * per).min(n_tracks);
                    for c in counts.iter_mut().take(to).skip(lane * per) {
                        *c += n;
                    }
                }
            }
        }
    }
    counts
}

/// Which ranks a training step's compute ops run on: op `i` of lane `l` (a pipeline stage)
/// runs on every rank of that stage.
#[derive(Debug, Clone, Copy)]
pub struct Lanes<'a> {
    /// Each op's lane; `None` for ops that are not a stage's compute.
    pub of_op: &'a [Option<u16>],
    pub count: u16,
    /// The ranks of each lane; `None`: lane `l` is ranks `l·r/count ..`, consecutive.
    pub ranks: Option<&'a [Vec<u32>]>,
}

/// Traces stop adding tracks beyond this many events (a 128-rank ring all-reduce has ~65,000).
pub const MAX_TRACE_EVENTS: usize = 500_000;

impl Trace {
    /// The timeline of a played schedule. `tracks` names the endpoints (ranks first). `lanes`
    /// (training steps) gives each op's pipeline stage and where the stage's ranks are; without
    /// lanes, compute ops run on every rank.
    pub fn from_schedule(
        title: &str,
        schedule: &Schedule,
        times: &[OpTiming],
        tracks: Vec<String>,
        lanes: Option<Lanes<'_>>,
    ) -> Trace {
        // Count first, then build only the tracks that fit under MAX_TRACE_EVENTS: a
        // 16,384-GPU step has tens of millions of per-rank events, of which a trace keeps
        // half a million.
        let counts = events_per_track(schedule, times, lanes, tracks.len());
        let (mut kept, mut total) = (0usize, 0usize);
        for &c in &counts {
            if total + c > MAX_TRACE_EVENTS && kept > 0 {
                break;
            }
            total += c;
            kept += 1;
        }
        let mut per_track: Vec<Vec<TraceEvent>> = counts[..kept]
            .iter()
            .map(|&c| Vec::with_capacity(c))
            .collect();
        each_event(schedule, times, lanes, kept, &mut |e| {
            per_track[e.track as usize].push(e)
        });
        let mut events = Vec::with_capacity(total);
        for v in per_track.iter_mut() {
            v.sort_by_key(|e| (e.start_ps, e.op, e.role));
            events.append(v);
        }
        let left = tracks.len() - kept;
        let mut tracks = tracks;
        tracks.truncate(kept);
        Trace {
            title: title.to_string(),
            tracks,
            events,
            tracks_left_out: left,
        }
    }

    /// The trace as Trace Event Format JSON (times in microseconds, to the picosecond).
    pub fn to_json(&self) -> String {
        let us = |ps: u64| format!("{}.{:06}", ps / 1_000_000, ps % 1_000_000);
        let mut s = String::from("{\"displayTimeUnit\":\"ns\",\"otherData\":");
        s += &serde_json::json!({
            "generator": "dtsim",
            "title": self.title,
            "tracks_left_out": self.tracks_left_out,
        })
        .to_string();
        s += ",\"traceEvents\":[\n";
        let _ = write!(
            s,
            "{{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":1,\"tid\":0,\"args\":{{\"name\":{}}}}}",
            serde_json::Value::String(self.title.clone())
        );
        for (i, name) in self.tracks.iter().enumerate() {
            let _ = write!(
                s,
                ",\n{{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,\"tid\":{i},\"args\":{{\"name\":{}}}}}\
                 ,\n{{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":1,\"tid\":{i},\"args\":{{\"sort_index\":{i}}}}}",
                serde_json::Value::String(name.clone())
            );
        }
        for e in &self.events {
            let name = if e.role == "compute" {
                e.phase.to_string()
            } else {
                format!("{} {}", e.phase, e.role)
            };
            let _ = write!(
                s,
                ",\n{{\"name\":\"{name}\",\"cat\":\"{}\",\"ph\":\"X\",\"pid\":1,\"tid\":{},\"ts\":{},\"dur\":{},\"args\":{{\"op\":{},\"step\":{},\"role\":\"{}\"",
                e.phase,
                e.track,
                us(e.start_ps),
                us(e.end_ps - e.start_ps),
                e.op,
                e.step,
                e.role
            );
            if let Some(p) = e.peer {
                let _ = write!(s, ",\"peer\":{p}");
            }
            if e.bytes > 0 {
                let _ = write!(s, ",\"bytes\":{}", e.bytes);
            }
            s += "}}";
        }
        s += "\n]}\n";
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collective::{Collective, Op, Pattern, PatternId, Phase};
    use crate::engine::SimTime;
    use std::sync::Arc;

    fn two_rank_exchange() -> (Schedule, Vec<OpTiming>) {
        let schedule = Schedule {
            collective: Collective::AllReduce,
            algorithm: "ring(1)".into(),
            ranks: 2,
            extra_endpoints: vec![],
            bytes: 100,
            patterns: vec![Pattern {
                pairs: Arc::from(vec![(0, 1), (1, 0)]),
            }],
            ops: vec![
                Op {
                    kind: OpKind::Transfer {
                        pattern: PatternId(0),
                        bytes: 50,
                    },
                    deps: vec![],
                    phase: Phase::ReduceScatter,
                    channel: 0,
                    step: 0,
                    transport: None,
                    in_order: false,
                    pushed_of: None,
                    wake_up_group: None,
                },
                Op {
                    kind: OpKind::Compute {
                        endpoints: 2,
                        duration: SimTime::from_ps(1_000_000),
                    },
                    deps: vec![],
                    phase: Phase::Backward,
                    channel: 0,
                    step: 0,
                    transport: None,
                    in_order: false,
                    pushed_of: None,
                    wake_up_group: None,
                },
            ],
        };
        let t = |a: u64, b: u64| OpTiming {
            start: SimTime::from_ps(a),
            end: SimTime::from_ps(b),
        };
        (schedule, vec![t(0, 1_500_000), t(1_500_000, 2_500_000)])
    }

    #[test]
    fn every_rank_gets_a_send_a_receive_and_its_compute() {
        let (s, times) = two_rank_exchange();
        let tr = Trace::from_schedule("t", &s, &times, vec!["rank0".into(), "rank1".into()], None);
        assert_eq!(tr.events.len(), 6);
        for r in 0..2 {
            let roles: Vec<&str> = tr
                .events
                .iter()
                .filter(|e| e.track == r)
                .map(|e| e.role)
                .collect();
            assert_eq!(roles, ["recv", "send", "compute"]);
        }
    }

    #[test]
    fn the_json_is_trace_event_format_with_microsecond_times() {
        let (s, times) = two_rank_exchange();
        let tr = Trace::from_schedule("t", &s, &times, vec!["rank0".into(), "rank1".into()], None);
        let v: serde_json::Value = serde_json::from_str(&tr.to_json()).unwrap();
        let ev = v["traceEvents"].as_array().unwrap();
        let complete: Vec<_> = ev.iter().filter(|e| e["ph"] == "X").collect();
        assert_eq!(complete.len(), 6);
        let send = complete
            .iter()
            .find(|e| e["name"] == "reduce-scatter send" && e["tid"] == 0)
            .unwrap();
        assert_eq!(send["dur"].as_f64().unwrap(), 1.5);
        assert_eq!(send["args"]["peer"], 1);
        let names: Vec<_> = ev
            .iter()
            .filter(|e| e["name"] == "thread_name")
            .map(|e| e["args"]["name"].as_str().unwrap().to_string())
            .collect();
        assert_eq!(names, ["rank0", "rank1"]);
    }

    /// Eight ranks in four lanes; transfers, computes of every lane and of none, reductions,
    /// zero-length ops that make no event.
    fn eight_rank_step() -> (Schedule, Vec<OpTiming>, Vec<Option<u16>>) {
        let (mut s, _) = two_rank_exchange();
        s.ranks = 8;
        s.patterns = vec![
            Pattern {
                pairs: Arc::from(vec![(0, 5), (5, 0), (3, 7), (6, 2)]),
            },
            Pattern {
                pairs: Arc::from(vec![(1, 2), (7, 4)]),
            },
        ];
        let template = s.ops.clone();
        let mut lanes = Vec::new();
        s.ops.clear();
        for k in 0..40u32 {
            let mut op = template[(k % 2) as usize].clone();
            if let OpKind::Transfer { bytes, .. } = op.kind {
                let pattern = PatternId(u32::from(k % 3 == 2));
                op.kind = OpKind::Transfer { pattern, bytes };
            }
            if k % 5 == 4 {
                op.kind = OpKind::Reduce {
                    endpoints: 8,
                    bytes: 64,
                };
            }
            s.ops.push(op);
            lanes.push((k % 7 != 3).then_some((k % 4) as u16));
        }
        let times = (0..40u64)
            .map(|k| OpTiming {
                start: SimTime::from_ps(k * 10),
                end: SimTime::from_ps(k * 10 + if k % 9 == 8 { 0 } else { 5 }),
            })
            .collect();
        (s, times, lanes)
    }

    #[test]
    fn counting_events_per_track_agrees_with_visiting_each_event() {
        let (s, times, of_op) = eight_rank_step();
        let listed: Vec<Vec<u32>> = vec![vec![7, 0], vec![1, 6], vec![2, 5], vec![3, 4]];
        let lane_sets = [
            None,
            Some(Lanes {
                of_op: &of_op,
                count: 4,
                ranks: None,
            }),
            Some(Lanes {
                of_op: &of_op,
                count: 4,
                ranks: Some(&listed),
            }),
        ];
        for lanes in lane_sets {
            for n_tracks in [0, 1, 3, 6, 8, 9] {
                let mut visited = vec![0usize; n_tracks];
                each_event(&s, &times, lanes, n_tracks, &mut |e| {
                    visited[e.track as usize] += 1
                });
                let counted = events_per_track(&s, &times, lanes, n_tracks);
                assert_eq!(
                    counted,
                    visited,
                    "{n_tracks} tracks, lanes {:?}",
                    lanes.map(|l| l.ranks.is_some())
                );
                assert!(visited.iter().sum::<usize>() > 0 || n_tracks == 0);
            }
        }
    }

    #[test]
    fn compute_ops_of_a_pipeline_stage_run_on_that_stages_ranks_only() {
        let (s, times) = two_rank_exchange();
        let lanes = [None, Some(1u16)];
        let tr = Trace::from_schedule(
            "t",
            &s,
            &times,
            vec!["rank0".into(), "rank1".into()],
            Some(Lanes {
                of_op: &lanes,
                count: 2,
                ranks: None,
            }),
        );
        let compute: Vec<u32> = tr
            .events
            .iter()
            .filter(|e| e.role == "compute")
            .map(|e| e.track)
            .collect();
        assert_eq!(compute, [1]);
    }
}
