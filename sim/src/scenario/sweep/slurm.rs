//! Slurm: a sweep as a job array of shards (`dtsim sweep --shard i/n`) and a merge job that
//! depends on it.

use std::fmt::Write as _;
use std::path::Path;

use super::Sweep;

/// Slurm scripts for a sweep: a job array of `tasks` shards and a merge job that depends on it.
#[derive(Debug, Clone)]
pub struct SlurmScripts {
    pub array: String,
    pub merge: String,
    pub submit: String,
}

/// Builds the scripts; `dtsim` is the binary to call, `out` the shared results directory.
pub fn slurm_scripts(
    sweep: &Sweep,
    dtsim: &Path,
    out: &Path,
    tasks: u32,
    cpus_per_task: u32,
) -> SlurmScripts {
    let tasks = tasks.clamp(1, sweep.points.len().max(1) as u32);
    let q = |p: &Path| shell_quote(&p.display().to_string());
    let mut sets = String::new();
    for o in &sweep.base_overrides {
        let _ = write!(sets, " --set {}", shell_quote(o));
    }
    let name: String = sweep
        .name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let array = format!(
        "#!/bin/bash\n\
         # {points} points of sweep {sweep_name:?} in {tasks} array tasks; each task runs the points\n\
         # with index % SLURM_ARRAY_TASK_COUNT == SLURM_ARRAY_TASK_ID (dtsim reads both).\n\
         #SBATCH --job-name=dtsim-{name}\n\
         #SBATCH --array=0-{last}\n\
         #SBATCH --cpus-per-task={cpus_per_task}\n\
         #SBATCH --output={logs}/%A_%a.out\n\
         set -euo pipefail\n\
         exec {dtsim} sweep {scenario}{sets} --out {out} --jobs \"${{SLURM_CPUS_PER_TASK:-{cpus_per_task}}}\"\n",
        points = sweep.points.len(),
        sweep_name = sweep.name,
        last = tasks - 1,
        logs = q(&out.join("logs")),
        dtsim = q(dtsim),
        scenario = q(&sweep.scenario_path),
        out = q(out),
    );
    let merge = format!(
        "#!/bin/bash\n\
         # Merges the points of sweep {sweep_name:?} into results.csv once the array is done.\n\
         #SBATCH --job-name=dtsim-{name}-merge\n\
         #SBATCH --cpus-per-task=1\n\
         #SBATCH --output={logs}/merge_%j.out\n\
         set -euo pipefail\n\
         exec {dtsim} merge {out}\n",
        sweep_name = sweep.name,
        logs = q(&out.join("logs")),
        dtsim = q(dtsim),
        out = q(out),
    );
    let submit = format!(
        "#!/bin/bash\n\
         # Submits the sweep array and a merge job that runs after every array task succeeded.\n\
         set -euo pipefail\n\
         cd \"$(dirname \"$0\")\"\n\
         mkdir -p {logs}\n\
         array=$(sbatch --parsable sweep_array.sbatch)\n\
         sbatch --dependency=afterok:\"${{array%%;*}}\" merge.sbatch\n",
        logs = q(&out.join("logs")),
    );
    SlurmScripts {
        array,
        merge,
        submit,
    }
}

fn shell_quote(s: &str) -> String {
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-=+:,@".contains(c))
    {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}
