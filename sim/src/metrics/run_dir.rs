//! The folder a run writes into, made so that it cannot mislead.
//!
//! - A run claims a fresh folder: an empty or missing one, or one it may clear (`--force`, and
//!   only a folder dtsim wrote: it holds `complete.json`, `summary.json` or `sweep.json`).
//!   Files of an earlier run never sit beside a new run's files.
//! - [`COMPLETE`] is written last, atomically, listing the files of the run: a folder without it
//!   is a run that was killed or is still being written.
//! - Temporary files that an interrupted atomic write left behind (`.<name>.tmp<pid>`) are
//!   removed by the next run or resume.

use std::path::{Path, PathBuf};

use super::output::write_atomic;

/// The completion marker, written after every other file of a run.
pub const COMPLETE: &str = "complete.json";

/// Files whose presence shows that dtsim wrote a folder (so `--force` may clear it).
const OWN_MARKERS: [&str; 3] = [COMPLETE, "summary.json", "sweep.json"];

/// Makes `dir` ready for a new run: creates it, or refuses one that already holds files unless
/// `force`, in which case a folder dtsim wrote is emptied first.
pub fn claim(dir: &Path, force: bool) -> Result<(), String> {
    let entries: Vec<PathBuf> = match std::fs::read_dir(dir) {
        Ok(rd) => rd.filter_map(|e| e.ok().map(|e| e.path())).collect(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()));
        }
        Err(e) => return Err(format!("{}: {e}", dir.display())),
    };
    if entries.is_empty() {
        return Ok(());
    }
    let ours = OWN_MARKERS.iter().any(|m| dir.join(m).is_file());
    if !force {
        let mut names: Vec<String> = entries
            .iter()
            .filter_map(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
            .collect();
        names.sort();
        let shown = names.iter().take(4).cloned().collect::<Vec<_>>().join(", ");
        let more = names.len().saturating_sub(4);
        return Err(format!(
            "{}: the output folder already holds files ({shown}{}); choose another --out{}",
            dir.display(),
            if more > 0 {
                format!(" and {more} more")
            } else {
                String::new()
            },
            if ours {
                ", or pass --force to clear it"
            } else {
                ""
            }
        ));
    }
    if !ours {
        return Err(format!(
            "{}: --force clears only a folder dtsim wrote (one holding {}); this one holds none",
            dir.display(),
            OWN_MARKERS.join(", ")
        ));
    }
    for p in entries {
        let removed = if p.is_dir() {
            std::fs::remove_dir_all(&p)
        } else {
            std::fs::remove_file(&p)
        };
        removed.map_err(|e| format!("clearing {}: {e}", p.display()))?;
    }
    Ok(())
}

/// Writes [`COMPLETE`] into `dir`, listing `files` (relative to `dir` where they lie inside it).
pub fn mark_complete(dir: &Path, kind: &str, files: &[PathBuf]) -> std::io::Result<()> {
    let names: Vec<String> = files
        .iter()
        .map(|f| f.strip_prefix(dir).unwrap_or(f).display().to_string())
        .collect();
    let v = serde_json::json!({
        "kind": kind,
        "dtsim": env!("CARGO_PKG_VERSION"),
        "files": names,
    });
    let text = serde_json::to_string_pretty(&v).map_err(std::io::Error::other)? + "\n";
    write_atomic(&dir.join(COMPLETE), text.as_bytes())
}

/// True iff `dir` holds a completion marker.
pub fn is_complete(dir: &Path) -> bool {
    dir.join(COMPLETE).is_file()
}

/// Removes the temporaries of interrupted atomic writes (`.<name>.tmp<digits>`) under `dir`,
/// recursively; returns how many it removed.
pub fn remove_stale_temps(dir: &Path) -> std::io::Result<usize> {
    let mut removed = 0;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let rd = match std::fs::read_dir(&d) {
            Ok(rd) => rd,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        };
        for e in rd.flatten() {
            let p = e.path();
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                stack.push(p);
            } else if is_temp_name(&e.file_name().to_string_lossy()) {
                std::fs::remove_file(&p)?;
                removed += 1;
            }
        }
    }
    Ok(removed)
}

/// `.<name>.tmp<digits>`: the name [`write_atomic`] gives its temporary.
fn is_temp_name(name: &str) -> bool {
    let Some(rest) = name.strip_prefix('.') else {
        return false;
    };
    match rest.rfind(".tmp") {
        Some(i) => {
            let digits = &rest[i + 4..];
            i > 0 && !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())
        }
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("dtsim-run-dir-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    #[test]
    fn a_missing_or_empty_folder_is_claimed() {
        let d = scratch("fresh");
        claim(&d, false).unwrap();
        assert!(d.is_dir());
        claim(&d, false).unwrap();
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_used_folder_is_refused_unless_forced_and_then_emptied() {
        let d = scratch("used");
        std::fs::create_dir_all(d.join("v1")).unwrap();
        std::fs::write(d.join("summary.json"), "{}").unwrap();
        std::fs::write(d.join("ports.csv"), "x").unwrap();
        let e = claim(&d, false).unwrap_err();
        assert!(e.contains("ports.csv") && e.contains("--force"), "{e}");
        claim(&d, true).unwrap();
        assert_eq!(std::fs::read_dir(&d).unwrap().count(), 0);
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn force_never_clears_a_folder_dtsim_did_not_write() {
        let d = scratch("foreign");
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("thesis.tex"), "x").unwrap();
        let e = claim(&d, true).unwrap_err();
        assert!(e.contains("--force clears only"), "{e}");
        assert!(d.join("thesis.tex").is_file());
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn stale_temporaries_are_removed_and_nothing_else() {
        let d = scratch("temps");
        std::fs::create_dir_all(d.join("points/00001-ab")).unwrap();
        for n in [".summary.json.tmp123", "points/00001-ab/.trace.json.tmp9"] {
            std::fs::write(d.join(n), "x").unwrap();
        }
        for n in ["summary.json", ".tmp5", ".x.tmp", "a.tmp1"] {
            std::fs::write(d.join(n), "x").unwrap();
        }
        assert_eq!(remove_stale_temps(&d).unwrap(), 2);
        assert!(d.join("summary.json").is_file() && d.join(".x.tmp").is_file());
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn the_marker_lists_the_files_relative_to_the_folder() {
        let d = scratch("marker");
        std::fs::create_dir_all(&d).unwrap();
        assert!(!is_complete(&d));
        mark_complete(&d, "collective", &[d.join("summary.json")]).unwrap();
        assert!(is_complete(&d));
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(d.join(COMPLETE)).unwrap()).unwrap();
        assert_eq!(v["files"][0], "summary.json");
        std::fs::remove_dir_all(&d).unwrap();
    }
}
