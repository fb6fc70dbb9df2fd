//! `suite.py packet_wait` logs (testbed/workloads/packet_wait.py): how long a small message
//! waits at a shaped link for the packet another connection has in service there.
//!
//! The log: `{"launches": [{"ping": [a, b], "through": [c, d], "beside": [e, f], "phases":
//! {"idle" | "through" | "beside": {"rtt_secs": [...]}}}, ...], ...}`: host `a` pinged host
//! `b` (1 byte there and back, at random moments) with nothing else running, while `c`
//! streamed to `d` across a link of the ping's way in, and while `e` streamed to `f` off its
//! path (as much host CPU, nothing on the path). Each launch starts fresh connections.
//!
//! The fit: the mean round trip through the stream less the mean beside it, over every ping of
//! every launch (a launch's mean depends on where its stream's packets fall against the
//! shaper's level, which changes from one launch to the next; the pool is the expectation).
//! The mean, not the median: dtsim plays the expected wait.
//!
//! A log whose pinging host is the one that streams (`--ping 2:0 --through 2:1 --beside 2:3`)
//! measures instead how long a host's small message waits behind its own stream ([`own_egress`]):
//! both streams leave through the host's link, so both phases are the same wait and are pooled,
//! less the idle round trip. At the link's rate that is what TCP keeps queued at the host's
//! egress (its small queues), the FIFO head an OpenMPI answer waits behind.

use std::path::Path;

use serde::Deserialize;

use crate::error::{read_text, ImportError};

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Phase {
    pub rtt_secs: Vec<f64>,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Phases {
    pub idle: Phase,
    pub through: Phase,
    pub beside: Phase,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Launch {
    pub ping: [u32; 2],
    pub through: [u32; 2],
    pub beside: [u32; 2],
    pub phases: Phases,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct PacketWaitLog {
    pub launches: Vec<Launch>,
}

/// What the log measured: the mean extra wait and what it is made of.
#[derive(Debug, Clone, PartialEq)]
pub struct PacketWait {
    /// Mean round trip through the stream less the mean beside it, seconds.
    pub wait_secs: f64,
    /// Each launch's own difference of means, seconds.
    pub per_launch_secs: Vec<f64>,
    /// Means over every launch: idle, through, beside, seconds.
    pub idle_secs: f64,
    pub through_secs: f64,
    pub beside_secs: f64,
    pub pings_per_phase: usize,
}

pub fn load(path: &Path) -> Result<PacketWaitLog, ImportError> {
    parse(&read_text(path)?, &path.display().to_string())
}

/// Several logs of one link, their launches pooled.
pub fn load_all(paths: &[std::path::PathBuf]) -> Result<PacketWaitLog, ImportError> {
    let mut launches = Vec::new();
    for p in paths {
        launches.extend(load(p)?.launches);
    }
    Ok(PacketWaitLog { launches })
}

pub fn parse(text: &str, file: &str) -> Result<PacketWaitLog, ImportError> {
    let log: PacketWaitLog = serde_json::from_str(text).map_err(|e| {
        ImportError::at(
            file,
            e.line(),
            format!("the JSON of testbed/workloads/suite.py packet_wait ({e})"),
        )
    })?;
    if log.launches.is_empty() {
        return Err(ImportError::whole(file, "`launches`: at least one launch"));
    }
    for (i, l) in log.launches.iter().enumerate() {
        for (name, p) in [
            ("idle", &l.phases.idle),
            ("through", &l.phases.through),
            ("beside", &l.phases.beside),
        ] {
            if p.rtt_secs.is_empty() || p.rtt_secs.iter().any(|t| !(t.is_finite() && *t > 0.0)) {
                return Err(ImportError::whole(
                    file,
                    format!("launches[{i}].phases.{name}.rtt_secs: round trips, each > 0 s"),
                ));
            }
        }
    }
    Ok(log)
}

fn mean(xs: impl Iterator<Item = f64>) -> f64 {
    let (sum, n) = xs.fold((0.0, 0usize), |(s, n), x| (s + x, n + 1));
    sum / n.max(1) as f64
}

/// The mean wait through the stream beyond beside it, over every ping (see the module).
pub fn fit(log: &PacketWaitLog) -> PacketWait {
    let pooled = |pick: fn(&Phases) -> &Phase| {
        mean(
            log.launches
                .iter()
                .flat_map(|l| pick(&l.phases).rtt_secs.iter().copied()),
        )
    };
    let (idle, through, beside) = (
        pooled(|p| &p.idle),
        pooled(|p| &p.through),
        pooled(|p| &p.beside),
    );
    let per_launch_secs = log
        .launches
        .iter()
        .map(|l| {
            mean(l.phases.through.rtt_secs.iter().copied())
                - mean(l.phases.beside.rtt_secs.iter().copied())
        })
        .collect();
    PacketWait {
        wait_secs: (through - beside).max(0.0),
        per_launch_secs,
        idle_secs: idle,
        through_secs: through,
        beside_secs: beside,
        pings_per_phase: log
            .launches
            .iter()
            .map(|l| l.phases.through.rtt_secs.len())
            .sum(),
    }
}

/// What an own-egress log measured (see the module): a host's small message behind its own
/// stream.
#[derive(Debug, Clone, PartialEq)]
pub struct OwnEgress {
    /// Mean round trip while the host streams (both phases, every launch) less the mean idle
    /// one, seconds.
    pub wait_secs: f64,
    /// Each launch's own, seconds.
    pub per_launch_secs: Vec<f64>,
    /// Means over every launch: idle, and while streaming, seconds.
    pub idle_secs: f64,
    pub streaming_secs: f64,
    /// Pings while streaming, over every launch.
    pub pings: usize,
}

/// The mean wait of a host's ping behind its own stream (see the module); a launch whose
/// pinging host is not the one that streams is refused, naming it.
pub fn own_egress(log: &PacketWaitLog) -> Result<OwnEgress, String> {
    for (i, l) in log.launches.iter().enumerate() {
        if l.through[0] != l.ping[0] || l.beside[0] != l.ping[0] {
            return Err(format!(
                "launches[{i}]: the pinging host streaming (ping from {} while {} and {} \
                 stream), as suite.py packet_wait --ping 2:0 --through 2:1 --beside 2:3 runs it",
                l.ping[0], l.through[0], l.beside[0]
            ));
        }
    }
    let streaming = |l: &Launch| {
        l.phases
            .through
            .rtt_secs
            .iter()
            .chain(&l.phases.beside.rtt_secs)
            .copied()
            .collect::<Vec<f64>>()
    };
    let idle = mean(
        log.launches
            .iter()
            .flat_map(|l| l.phases.idle.rtt_secs.iter().copied()),
    );
    let all: Vec<f64> = log.launches.iter().flat_map(streaming).collect();
    let streaming_secs = mean(all.iter().copied());
    let per_launch_secs = log
        .launches
        .iter()
        .map(|l| {
            let own = mean(streaming(l).into_iter());
            (own - mean(l.phases.idle.rtt_secs.iter().copied())).max(0.0)
        })
        .collect();
    Ok(OwnEgress {
        wait_secs: (streaming_secs - idle).max(0.0),
        per_launch_secs,
        idle_secs: idle,
        streaming_secs,
        pings: all.len(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn launch(through: &[f64], beside: &[f64]) -> String {
        let list = |v: &[f64]| {
            v.iter()
                .map(|x| x.to_string())
                .collect::<Vec<_>>()
                .join(",")
        };
        format!(
            r#"{{"ping":[0,1],"through":[2,1],"beside":[2,3],"phases":{{
                "idle":{{"rtt_secs":[0.00003]}},
                "through":{{"rtt_secs":[{}]}},
                "beside":{{"rtt_secs":[{}]}}}}}}"#,
            list(through),
            list(beside)
        )
    }

    #[test]
    fn the_wait_is_the_pooled_mean_through_the_stream_less_the_mean_beside_it() {
        // Launch 1: 1 and 3 ms through, 0.1 beside; launch 2: 2 ms through, 0.1 beside. Pooled:
        // (1 + 3 + 2) / 3 - 0.1 = 1.9 ms; each launch alone 1.9 and 1.9.
        let text = format!(
            r#"{{"launches":[{},{}]}}"#,
            launch(&[0.001, 0.003], &[0.0001, 0.0001]),
            launch(&[0.002], &[0.0001])
        );
        let fit = fit(&parse(&text, "log.json").unwrap());
        assert!((fit.wait_secs - 0.0019).abs() < 1e-12, "{fit:?}");
        assert_eq!(fit.per_launch_secs.len(), 2);
        assert!((fit.per_launch_secs[0] - 0.0019).abs() < 1e-12);
        assert_eq!(fit.pings_per_phase, 3);
    }

    #[test]
    fn a_hosts_wait_behind_its_own_stream_pools_both_phases_less_the_idle_round_trip() {
        // The pinging host 2 streams in both phases: (7 + 9 + 8 + 8) / 4 ms less 0.03 idle.
        let own = |through: &str, beside: &str| {
            format!(
                r#"{{"ping":[2,0],"through":[2,1],"beside":[2,3],"phases":{{
                    "idle":{{"rtt_secs":[0.00003]}},
                    "through":{{"rtt_secs":[{through}]}},
                    "beside":{{"rtt_secs":[{beside}]}}}}}}"#
            )
        };
        let text = format!(
            r#"{{"launches":[{},{}]}}"#,
            own("0.007", "0.009"),
            own("0.008", "0.008")
        );
        let fit = own_egress(&parse(&text, "log.json").unwrap()).unwrap();
        assert!((fit.wait_secs - 0.00797).abs() < 1e-12, "{fit:?}");
        assert_eq!(fit.pings, 4);
        assert!((fit.per_launch_secs[0] - 0.00797).abs() < 1e-12);
        // A log where another host streams measures a shaped link's packet, not this.
        let text = format!(r#"{{"launches":[{}]}}"#, launch(&[0.002], &[0.0001]));
        let e = own_egress(&parse(&text, "log.json").unwrap()).unwrap_err();
        assert!(e.contains("launches[0]") && e.contains("--ping 2:0"), "{e}");
    }

    #[test]
    fn a_log_without_launches_or_with_a_bad_round_trip_names_the_field() {
        let e = parse(r#"{"launches":[]}"#, "log.json").unwrap_err();
        assert!(e.to_string().contains("launches"), "{e}");
        let text = format!(r#"{{"launches":[{}]}}"#, launch(&[-1.0], &[0.0001]));
        let e = parse(&text, "log.json").unwrap_err();
        assert!(
            e.to_string()
                .contains("launches[0].phases.through.rtt_secs"),
            "{e}"
        );
    }
}
