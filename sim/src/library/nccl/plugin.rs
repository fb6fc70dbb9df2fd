//! A tuner plugin's rules: the CSV file of NCCL's example tuner plugin (`ext-tuner/example`,
//! NCCL 2.28; `NCCL_TUNER_PLUGIN` with `NCCL_TUNER_CONFIG_FILE`), applied as that plugin applies
//! it. Cloud images ship tuner plugins to override NCCL's own choice per size and scale; this
//! is how a scenario says what such a plugin does (`[collective] tuner_config = "FILE"`, and
//! `[workload.allreduce] tuner_config` for every communicator of a training step).
//!
//! One rule per line, `#` comments and blank lines skipped:
//! `collective_type,min_bytes,max_bytes,algorithm,protocol,channels,nNodes,nRanks[,numPipeOps[,regBuff]]`
//! (collectives `allreduce`, `allgather`, `reducescatter`, `broadcast`, `reduce`; algorithms and
//! protocols as `NCCL_ALGO` / `NCCL_PROTO` spell them; −1 is "any" for nNodes, nRanks,
//! numPipeOps and regBuff, and "NCCL's count" for channels).
//!
//! What the plugin does with them (`pluginGetCollInfo`, read from its source): NCCL hands it
//! the cost of every (algorithm, protocol), unavailable ones marked ignored; the first rule that
//! matches (collective, `min_bytes ≤ bytes ≤ max_bytes`, nodes, ranks, pipelined ops, buffer
//! registration) and whose entry is not ignored gets cost 0, so NCCL picks it. A rule naming an
//! entry NCCL cannot run here is passed over, and the next matching one is tried. The plugin
//! answers one channel unless the rule applied names a count; NCCL then runs that many (capped
//! at the communicator's channels) instead of its own. So with this plugin a collective no rule
//! matches, or one whose rule says −1, runs on one channel, though the plugin's README says −1
//! keeps NCCL's count; dtsim follows the code, and says so in the decision it reports.
//! dtsim's collectives are single operations (numPipeOps 1) on buffers NCCL has not
//! registered (regBuff 0).

use std::path::Path;

use super::{Algo, Proto};
use crate::collective::Collective;

/// One line of the file.
#[derive(Debug, Clone, PartialEq)]
pub struct Rule {
    /// Line number in the file (1-based), reported with the decision.
    pub line: usize,
    pub collective: Collective,
    pub min_bytes: u64,
    pub max_bytes: u64,
    pub algo: Algo,
    pub proto: Proto,
    /// `None`: −1.
    pub channels: Option<u32>,
    pub nodes: Option<u32>,
    pub ranks: Option<u32>,
    pub pipe_ops: Option<u32>,
    pub registered: Option<bool>,
}

/// The rules of one file, in file order (the first match wins).
#[derive(Debug, Clone, PartialEq)]
pub struct TunerRules {
    /// The file, for the decision line and errors.
    pub path: String,
    pub rules: Vec<Rule>,
}

/// The collectives the file names, by its spelling.
const COLLECTIVES: [(&str, Collective); 5] = [
    ("allreduce", Collective::AllReduce),
    ("allgather", Collective::AllGather),
    ("reducescatter", Collective::ReduceScatter),
    ("broadcast", Collective::Broadcast),
    ("reduce", Collective::Reduce),
];

/// What dtsim's collectives look like to the plugin: one operation, unregistered buffers.
const PIPE_OPS: u32 = 1;
const REGISTERED: bool = false;

impl TunerRules {
    /// Reads and parses `path`.
    pub fn load(path: &Path) -> Result<TunerRules, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("{}: a readable tuner rules file ({e})", path.display()))?;
        TunerRules::parse(&text, &path.display().to_string())
    }

    /// Parses the file's text; an error names the file, the line and the field.
    pub fn parse(text: &str, path: &str) -> Result<TunerRules, String> {
        let mut rules = Vec::new();
        for (i, raw) in text.lines().enumerate() {
            let line = raw.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            rules.push(parse_rule(line, i + 1).map_err(|e| format!("{path} line {}: {e}", i + 1))?);
        }
        Ok(TunerRules {
            path: path.to_string(),
            rules,
        })
    }

    /// The first rule that matches a collective of `bytes` on `nodes` nodes and `ranks` ranks
    /// and whose (algorithm, protocol) NCCL can run here (`runnable`).
    pub fn first_match(
        &self,
        collective: Collective,
        bytes: u64,
        nodes: u32,
        ranks: u32,
        runnable: impl Fn(Algo, Proto) -> bool,
    ) -> Option<&Rule> {
        let any_or = |want: Option<u32>, have: u32| want.is_none_or(|w| w == have);
        self.rules.iter().find(|r| {
            r.collective == collective
                && (r.min_bytes..=r.max_bytes).contains(&bytes)
                && any_or(r.nodes, nodes)
                && any_or(r.ranks, ranks)
                && any_or(r.pipe_ops, PIPE_OPS)
                && r.registered.is_none_or(|g| g == REGISTERED)
                && runnable(r.algo, r.proto)
        })
    }
}

fn parse_rule(line: &str, number: usize) -> Result<Rule, String> {
    let f: Vec<&str> = line.split(',').map(str::trim).collect();
    if !(8..=10).contains(&f.len()) {
        return Err(format!(
            "8 to 10 comma-separated fields (collective_type,min_bytes,max_bytes,algorithm,\
             protocol,channels,nNodes,nRanks[,numPipeOps[,regBuff]]), got {}",
            f.len()
        ));
    }
    let collective = COLLECTIVES
        .iter()
        .find(|(name, _)| name.eq_ignore_ascii_case(f[0]))
        .map(|&(_, c)| c)
        .ok_or_else(|| {
            format!(
                "collective_type: one of {}, got {:?}",
                COLLECTIVES.map(|c| c.0).join(", "),
                f[0]
            )
        })?;
    let bytes = |name: &str, v: &str| {
        v.parse::<u64>()
            .map_err(|_| format!("{name}: a whole number of bytes, got {v:?}"))
    };
    let (min_bytes, max_bytes) = (bytes("min_bytes", f[1])?, bytes("max_bytes", f[2])?);
    if min_bytes > max_bytes {
        return Err(format!(
            "max_bytes: at least min_bytes ({min_bytes}), got {max_bytes}"
        ));
    }
    let algo = Algo::parse(f[3]).ok_or_else(|| {
        format!(
            "algorithm: one of {}, got {:?}",
            Algo::ALL.map(Algo::as_str).join(", "),
            f[3]
        )
    })?;
    let proto = Proto::parse(f[4]).ok_or_else(|| {
        format!(
            "protocol: one of {}, got {:?}",
            Proto::ALL.map(Proto::as_str).join(", "),
            f[4]
        )
    })?;
    // −1, or a count from 1.
    let count = |name: &str, v: &str| match v.parse::<i64>() {
        Ok(-1) => Ok(None),
        Ok(n) if n >= 1 && n <= i64::from(u32::MAX) => Ok(Some(n as u32)),
        _ => Err(format!("{name}: -1 or a count from 1, got {v:?}")),
    };
    let registered = match f.get(9).copied() {
        None | Some("-1") => None,
        Some("0") => Some(false),
        Some("1") => Some(true),
        Some(v) => return Err(format!("regBuff: -1, 0 or 1, got {v:?}")),
    };
    Ok(Rule {
        line: number,
        collective,
        min_bytes,
        max_bytes,
        algo,
        proto,
        channels: count("channels", f[5])?,
        nodes: count("nNodes", f[6])?,
        ranks: count("nRanks", f[7])?,
        pipe_ops: f.get(8).map_or(Ok(None), |v| count("numPipeOps", v))?,
        registered,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = "\
# two nodes: tree from 32 MiB, 4 channels
allreduce,33554432,4294967295,tree,simple,4,2,-1
allreduce,0,33554431,nvls,simple,-1,2,16,1,0
  # any scale, broadcast: ring LL
broadcast,0,65536,ring,ll,-1,-1,-1
";

    #[test]
    fn rules_read_as_the_example_plugin_reads_them() {
        let r = TunerRules::parse(FILE, "t.conf").unwrap();
        assert_eq!(r.rules.len(), 3);
        let first = &r.rules[0];
        assert_eq!(
            (first.line, first.collective, first.algo, first.proto),
            (2, Collective::AllReduce, Algo::Tree, Proto::Simple)
        );
        assert_eq!(
            (first.channels, first.nodes, first.ranks),
            (Some(4), Some(2), None)
        );
        assert_eq!((first.pipe_ops, first.registered), (None, None));
        assert_eq!(
            (r.rules[1].pipe_ops, r.rules[1].registered),
            (Some(1), Some(false))
        );
        assert_eq!(r.rules[2].line, 5);
    }

    #[test]
    fn the_first_matching_rule_naming_what_nccl_can_run_wins() {
        let r = TunerRules::parse(FILE, "t.conf").unwrap();
        let all = |_: Algo, _: Proto| true;
        let line = |m: Option<&Rule>| m.map(|r| r.line);
        // Size bounds are inclusive at both ends.
        assert_eq!(
            line(r.first_match(Collective::AllReduce, 32 << 20, 2, 16, all)),
            Some(2)
        );
        assert_eq!(
            line(r.first_match(Collective::AllReduce, (32 << 20) - 1, 2, 16, all)),
            Some(3)
        );
        // nRanks 16 only; nNodes 2 only.
        assert_eq!(
            line(r.first_match(Collective::AllReduce, 1 << 20, 2, 8, all)),
            None
        );
        assert_eq!(
            line(r.first_match(Collective::AllReduce, 64 << 20, 4, 32, all)),
            None
        );
        // NVLS not runnable here: passed over, nothing else matches.
        let no_nvls = |a: Algo, _: Proto| a != Algo::Nvls;
        assert_eq!(
            line(r.first_match(Collective::AllReduce, 1 << 20, 2, 16, no_nvls)),
            None
        );
        assert_eq!(
            line(r.first_match(Collective::Broadcast, 65536, 1, 8, all)),
            Some(5)
        );
        assert_eq!(
            line(r.first_match(Collective::AllGather, 1024, 1, 8, all)),
            None
        );
    }

    #[test]
    fn a_bad_line_names_the_file_the_line_and_the_field() {
        for (text, wants) in [
            ("allreduce,0,1,tree,simple,-1,-1", "t.conf line 1: 8 to 10"),
            (
                "\nalltoall,0,1,tree,simple,-1,-1,-1",
                "t.conf line 2: collective_type: one of",
            ),
            (
                "allreduce,0,1,rings,simple,-1,-1,-1",
                "algorithm: one of tree, ring",
            ),
            (
                "allreduce,0,1,ring,ll64,-1,-1,-1",
                "protocol: one of ll, ll128, simple",
            ),
            (
                "allreduce,9,1,ring,ll,-1,-1,-1",
                "max_bytes: at least min_bytes (9)",
            ),
            (
                "allreduce,0,1M,ring,ll,-1,-1,-1",
                "max_bytes: a whole number",
            ),
            (
                "allreduce,0,1,ring,ll,0,-1,-1",
                "channels: -1 or a count from 1",
            ),
            ("allreduce,0,1,ring,ll,-1,-1,-1,-1,2", "regBuff: -1, 0 or 1"),
        ] {
            let e = TunerRules::parse(text, "t.conf").unwrap_err();
            assert!(e.contains(wants), "{text:?}: {e}");
        }
    }
}
