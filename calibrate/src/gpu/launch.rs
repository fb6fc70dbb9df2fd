//! Where this process sits in a multi-node run, from the launcher's environment, and the TCP
//! rendezvous through which rank 0 hands every rank the NCCL unique id.
//!
//! Read in this order: torchrun-style `RANK`/`WORLD_SIZE`/`LOCAL_RANK`, then Slurm
//! (`SLURM_PROCID`/`SLURM_NTASKS`/`SLURM_LOCALID`), then Open MPI
//! (`OMPI_COMM_WORLD_RANK`/`OMPI_COMM_WORLD_SIZE`/`OMPI_COMM_WORLD_LOCAL_RANK`). The rendezvous
//! address is `MASTER_ADDR:MASTER_PORT` (port 29500 when unset); with more than one process
//! `MASTER_ADDR` is required.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Launch {
    pub rank: u32,
    pub world_size: u32,
    pub local_rank: u32,
    /// `host:port` of rank 0's rendezvous; `None` for a single process.
    pub master: Option<String>,
    /// Which launcher's variables were read.
    pub launcher: &'static str,
}

impl Launch {
    /// Reads the launch from `env` (a lookup such as `|k| std::env::var(k).ok()`).
    pub fn from_env(env: impl Fn(&str) -> Option<String>) -> Result<Launch, String> {
        let sets: [(&'static str, &str, &str, &str); 3] = [
            ("torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK"),
            ("slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"),
            (
                "mpi",
                "OMPI_COMM_WORLD_RANK",
                "OMPI_COMM_WORLD_SIZE",
                "OMPI_COMM_WORLD_LOCAL_RANK",
            ),
        ];
        for (launcher, r, w, l) in sets {
            let Some(world) = env(w) else { continue };
            let num = |k: &str, v: Option<String>| -> Result<u32, String> {
                let v = v.ok_or_else(|| format!("{k} is not set although {w} is"))?;
                v.trim()
                    .parse()
                    .map_err(|_| format!("{k}: expected a non-negative integer, got {v:?}"))
            };
            let world_size = num(w, Some(world))?;
            let rank = num(r, env(r))?;
            let local_rank = match env(l) {
                Some(v) => num(l, Some(v))?,
                None => rank,
            };
            if world_size == 0 || rank >= world_size {
                return Err(format!("{r}={rank} must be below {w}={world_size}"));
            }
            let master = if world_size > 1 {
                let addr = env("MASTER_ADDR").ok_or_else(|| {
                    format!("MASTER_ADDR must name rank 0's host when {w}={world_size} > 1")
                })?;
                let port = match env("MASTER_PORT") {
                    Some(p) => p
                        .trim()
                        .parse::<u16>()
                        .map_err(|_| format!("MASTER_PORT: expected a port number, got {p:?}"))?,
                    None => 29500,
                };
                Some(format!("{addr}:{port}"))
            } else {
                None
            };
            return Ok(Launch {
                rank,
                world_size,
                local_rank,
                master,
                launcher,
            });
        }
        Ok(Launch {
            rank: 0,
            world_size: 1,
            local_rank: 0,
            master: None,
            launcher: "single process",
        })
    }
}

/// Rank 0 serves `id` to the other `world_size - 1` ranks on `master`'s port; the others fetch
/// it (retrying while rank 0 starts, up to `timeout`). Returns the id every rank uses.
pub fn share_id(
    launch: &Launch,
    id: Option<[u8; 128]>,
    timeout: Duration,
) -> Result<[u8; 128], String> {
    let Some(master) = &launch.master else {
        return id.ok_or_else(|| "a single process needs its own NCCL id".to_string());
    };
    let deadline = Instant::now() + timeout;
    if launch.rank == 0 {
        let id = id.ok_or("rank 0 must create the NCCL id")?;
        let port = master.rsplit(':').next().unwrap_or("29500");
        let listener = TcpListener::bind(format!("0.0.0.0:{port}"))
            .map_err(|e| format!("rank 0 could not listen on port {port}: {e}"))?;
        listener.set_nonblocking(true).map_err(|e| e.to_string())?;
        let mut served = 0;
        while served + 1 < launch.world_size {
            match listener.accept() {
                Ok((mut s, _)) => {
                    s.set_nonblocking(false).map_err(|e| e.to_string())?;
                    s.write_all(&id)
                        .map_err(|e| format!("sending the NCCL id: {e}"))?;
                    served += 1;
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    if Instant::now() > deadline {
                        return Err(format!("rank 0 waited {timeout:?} but only {served} of {} ranks connected to {master}", launch.world_size - 1));
                    }
                    std::thread::sleep(Duration::from_millis(20));
                }
                Err(e) => return Err(format!("accepting a rank on {master}: {e}")),
            }
        }
        Ok(id)
    } else {
        loop {
            let addr = master
                .to_socket_addrs()
                .map_err(|e| format!("MASTER_ADDR {master}: {e}"))?
                .next()
                .ok_or_else(|| format!("MASTER_ADDR {master} resolves to nothing"))?;
            match TcpStream::connect_timeout(&addr, Duration::from_secs(2)) {
                Ok(mut s) => {
                    let mut buf = [0u8; 128];
                    s.set_read_timeout(Some(timeout))
                        .map_err(|e| e.to_string())?;
                    s.read_exact(&mut buf)
                        .map_err(|e| format!("reading the NCCL id from {master}: {e}"))?;
                    return Ok(buf);
                }
                Err(e) => {
                    if Instant::now() > deadline {
                        return Err(format!(
                            "rank {} could not reach rank 0 at {master} within {timeout:?}: {e}",
                            launch.rank
                        ));
                    }
                    std::thread::sleep(Duration::from_millis(100));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let m: BTreeMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k| m.get(k).cloned()
    }

    #[test]
    fn torchrun_slurm_and_mpi_variables_are_read() {
        let l = Launch::from_env(env(&[
            ("RANK", "3"),
            ("WORLD_SIZE", "16"),
            ("LOCAL_RANK", "3"),
            ("MASTER_ADDR", "node0"),
            ("MASTER_PORT", "1234"),
        ]))
        .unwrap();
        assert_eq!(
            (
                l.rank,
                l.world_size,
                l.local_rank,
                l.master.as_deref(),
                l.launcher
            ),
            (3, 16, 3, Some("node0:1234"), "torchrun")
        );
        let l = Launch::from_env(env(&[
            ("SLURM_PROCID", "9"),
            ("SLURM_NTASKS", "16"),
            ("SLURM_LOCALID", "1"),
            ("MASTER_ADDR", "n0"),
        ]))
        .unwrap();
        assert_eq!(
            (l.rank, l.local_rank, l.master.as_deref()),
            (9, 1, Some("n0:29500"))
        );
        let l = Launch::from_env(env(&[
            ("OMPI_COMM_WORLD_RANK", "0"),
            ("OMPI_COMM_WORLD_SIZE", "1"),
        ]))
        .unwrap();
        assert_eq!((l.world_size, l.master), (1, None));
        assert_eq!(
            Launch::from_env(env(&[])).unwrap().launcher,
            "single process"
        );
    }

    #[test]
    fn bad_launch_variables_say_which_one() {
        let e = Launch::from_env(env(&[("RANK", "x"), ("WORLD_SIZE", "2")])).unwrap_err();
        assert!(e.contains("RANK"), "{e}");
        let e = Launch::from_env(env(&[("RANK", "1"), ("WORLD_SIZE", "2")])).unwrap_err();
        assert!(e.contains("MASTER_ADDR"), "{e}");
        let e = Launch::from_env(env(&[
            ("RANK", "2"),
            ("WORLD_SIZE", "2"),
            ("MASTER_ADDR", "a"),
        ]))
        .unwrap_err();
        assert!(e.contains("below"), "{e}");
    }

    #[test]
    fn rank_zero_hands_its_id_to_every_rank_over_tcp() {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let launch = |rank| Launch {
            rank,
            world_size: 3,
            local_rank: rank,
            master: Some(format!("127.0.0.1:{port}")),
            launcher: "test",
        };
        let id = [7u8; 128];
        let others: Vec<_> = (1..3)
            .map(|r| {
                let l = launch(r);
                std::thread::spawn(move || share_id(&l, None, Duration::from_secs(20)))
            })
            .collect();
        assert_eq!(
            share_id(&launch(0), Some(id), Duration::from_secs(20)).unwrap(),
            id
        );
        for h in others {
            assert_eq!(h.join().unwrap().unwrap(), id);
        }
    }
}
