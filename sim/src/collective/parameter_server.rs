//! Synchronous parameter-server all-reduce: workers push gradients, servers reduce them,
//! workers pull the parameters.
//!
//! The M bytes are split exactly into `servers` shards (sizes differing by at most one byte).
//! Server j holds shard j and is its own channel: a push op (every worker → server j, shard
//! bytes each, phase `Push`), a reduction at the server of everything it received, and a pull op
//! (server j → every worker, phase `Pull`) after it. Shards run independently.
//!
//! Without `colocated`, servers are extra endpoints `ranks + j` named `"ps{j}"` and every rank
//! is a worker, so each worker sends M and receives M. With `colocated`, server j is rank j
//! (`servers <= ranks`) and keeps its own shard locally instead of sending it to itself.
//! Shards of zero bytes (fewer bytes than servers) are left out.

use super::steps::{channel, split_even};
use super::{CollectiveError, CollectiveSpec, OpKind, Phase, Schedule};

pub(crate) fn generate(
    spec: &CollectiveSpec,
    ranks: u32,
    servers: u32,
    colocated: bool,
) -> Result<Schedule, CollectiveError> {
    if servers == 0 {
        return Err(CollectiveError::new(
            "algorithm.servers",
            "at least 1 server",
        ));
    }
    if colocated && servers > ranks {
        return Err(CollectiveError::new(
            "algorithm.servers",
            format!("at most {ranks} colocated servers (one per rank), got {servers}"),
        ));
    }
    channel(servers as usize - 1, "algorithm.servers")?;
    let algorithm = if colocated {
        format!("parameter_server({servers}, colocated)")
    } else {
        format!("parameter_server({servers})")
    };
    let mut schedule = Schedule::new(spec.collective, algorithm, ranks, spec.bytes);
    if !colocated {
        schedule.extra_endpoints = (0..servers).map(|j| format!("ps{j}")).collect();
    }
    let shards = split_even(spec.bytes, u64::from(servers));
    for (j, &shard) in shards.iter().enumerate() {
        if shard == 0 && !(spec.bytes == 0 && j == 0) {
            continue;
        }
        let server = if colocated {
            j as u32
        } else {
            ranks + j as u32
        };
        let workers: Vec<u32> = (0..ranks).filter(|&w| w != server).collect();
        let push = schedule.add_pattern(workers.iter().map(|&w| (w, server)).collect::<Vec<_>>());
        let pull = schedule.add_pattern(workers.iter().map(|&w| (server, w)).collect::<Vec<_>>());
        let lane = j as u16;
        let pushed = schedule.push(
            OpKind::Transfer {
                pattern: push,
                bytes: shard,
            },
            Vec::new(),
            Phase::Push,
            lane,
            0,
        );
        let reduced = schedule.push(
            OpKind::Reduce {
                endpoints: 1,
                bytes: shard * workers.len() as u64,
            },
            vec![pushed],
            Phase::Push,
            lane,
            1,
        );
        schedule.push(
            OpKind::Transfer {
                pattern: pull,
                bytes: shard,
            },
            vec![reduced],
            Phase::Pull,
            lane,
            2,
        );
    }
    Ok(schedule)
}

#[cfg(test)]
mod tests {
    use super::super::generate::generate;
    use super::super::generate::testing::*;
    use super::super::{Algorithm, Collective};
    use super::*;

    fn ps(servers: u32, colocated: bool, bytes: u64) -> super::super::CollectiveSpec {
        spec(
            Collective::AllReduce,
            Algorithm::ParameterServer { servers, colocated },
            bytes,
        )
    }

    #[test]
    fn each_worker_pushes_m_and_pulls_m_from_separate_servers() {
        let m = 1001;
        let s = generate(&ps(3, false, m), 5, &FLAT).unwrap();
        assert!(s.validate().is_ok());
        assert_eq!(s.extra_endpoints, vec!["ps0", "ps1", "ps2"]);
        assert_eq!(s.endpoints(), 8);
        let (sent, received) = sent_received(&s);
        for w in 0..5 {
            assert_eq!((sent[w], received[w]), (m as u128, m as u128));
        }
        // Server j receives its shard from every worker: 334, 334, 333.
        assert_eq!(&received[5..], &[5 * 334, 5 * 334, 5 * 333]);
        let phases: Vec<Phase> = s.ops.iter().map(|op| op.phase).collect();
        assert_eq!(&phases[..3], &[Phase::Push, Phase::Push, Phase::Pull]);
        assert_eq!(
            s.ops[1].kind,
            OpKind::Reduce {
                endpoints: 1,
                bytes: 5 * 334
            }
        );
    }

    #[test]
    fn colocated_servers_keep_their_own_shard() {
        let m = 400;
        let s = generate(&ps(2, true, m), 4, &FLAT).unwrap();
        assert!(s.validate().is_ok());
        assert!(s.extra_endpoints.is_empty());
        let (sent, received) = sent_received(&s);
        // Rank 0 serves shard 0: it pushes only shard 1 and sends shard 0 to 3 workers.
        assert_eq!(sent[0], 200 + 3 * 200);
        assert_eq!(received[0], 3 * 200 + 200);
        assert_eq!((sent[3], received[3]), (400, 400));
        assert_eq!(s.total_transfer_bytes(), 2 * 3 * 400);
    }

    #[test]
    fn server_counts_are_checked() {
        assert_eq!(
            generate(&ps(0, false, 64), 4, &FLAT).unwrap_err().field,
            "algorithm.servers"
        );
        assert_eq!(
            generate(&ps(5, true, 64), 4, &FLAT).unwrap_err().field,
            "algorithm.servers"
        );
    }
}
