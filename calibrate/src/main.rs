//! `calibrate`: produces and inspects the calibration profiles that dtsim replays.
//!
//! This first version reads and checks profiles (`calibrate show PROFILE`); GPU measurement
//! through cudarc and the importers of nccl-tests logs and profiler traces come next (see the
//! project's issues).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use sim::profile::Profile;
use sim::units::{fmt_bits_per_s, fmt_bytes};

#[derive(Parser)]
#[command(name = "calibrate", version, about = "Calibration profiles for dtsim")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Check a profile and print it readably, with the provenance of every table.
    Show {
        profile: PathBuf,
        /// Print the profile as normalized JSON instead.
        #[arg(long)]
        json: bool,
    },
}

fn main() -> ExitCode {
    match run(Cli::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}

fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Show { profile, json } => {
            let p = Profile::load(&profile)?;
            if json {
                println!("{}", serde_json::to_string_pretty(&p)?);
            } else {
                print!("{}", describe(&p));
            }
            Ok(())
        }
    }
}

/// A profile as text for people.
fn describe(p: &Profile) -> String {
    let mut s = String::new();
    let prov = |pr: &sim::profile::Provenance| {
        format!(
            "{}: {}{}",
            pr.source,
            pr.detail,
            pr.date
                .as_ref()
                .map(|d| format!(" ({d})"))
                .unwrap_or_default()
        )
    };
    s += &format!("profile {} (schema {})\n", p.name, p.schema_version);
    if !p.description.is_empty() {
        s += &format!("  {}\n", p.description);
    }
    s += &format!("  from {}\n", prov(&p.provenance));
    if p.network.factors.is_empty() {
        s += "  link factors: none (links run at the topology's nominal bandwidth and latency)\n";
    }
    for (class, table) in &p.network.factors {
        s += &format!(
            "  link factors for {class} (from {})\n",
            prov(&table.provenance)
        );
        s += "    from size    bandwidth x   latency x\n";
        for r in &table.rows {
            s += &format!(
                "    {:>10}   {:>11.3}   {:>9.3}\n",
                fmt_bytes(r.min_bytes as f64),
                r.bandwidth_factor,
                r.latency_factor
            );
        }
    }
    match &p.network.reduce_bandwidth {
        Some(m) => {
            s += &format!(
                "  reduction rate {} (from {})\n",
                fmt_bits_per_s(m.value.bits_per_s()),
                prov(&m.provenance)
            )
        }
        None => s += "  reduction rate: fused into transfers (no extra time)\n",
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bundled_default_profile_loads_and_describes_its_provenance() {
        let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../data/profiles/default.json");
        let p = Profile::load(&path).unwrap();
        let text = describe(&p);
        assert!(text.contains("profile default"), "{text}");
        assert!(text.contains("from nominal"), "{text}");
    }
}
