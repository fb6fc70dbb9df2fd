//! Finding NVIDIA libraries the dynamic loader does not know about: cuBLAS and NCCL installed as
//! Python wheels (`site-packages/nvidia/<package>/lib/libcublas.so.13`, `.../libnccl.so.2`),
//! which is how PyTorch machines have them, or in a CUDA toolkit outside the loader path.
//!
//! The directories searched are, in order: `lib/python3*/site-packages` under `$VIRTUAL_ENV` and
//! `$CONDA_PREFIX`, the entries of `python3`'s `sys.path`, `/usr/local/cuda/lib64` and
//! `/usr/local/cuda/targets/x86_64-linux/lib`. In each, the library is looked for in the
//! directory itself and in `nvidia/*/lib` (one level of globbing, never a recursive walk).
//! Results are ordered newest soname major first, then by search order, then by name, so the
//! same tree always gives the same list.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Toolkit directories searched after the Python ones.
pub const CUDA_DIRS: [&str; 2] = [
    "/usr/local/cuda/lib64",
    "/usr/local/cuda/targets/x86_64-linux/lib",
];

/// How long `python3 -c 'print(sys.path)'` may take before it is abandoned.
pub const PYTHON_TIMEOUT: Duration = Duration::from_secs(10);

/// The directories to search, from the environment (`env("VIRTUAL_ENV")`, ...) and the Python
/// `sys.path` entries given; duplicates removed, first occurrence kept. Entries that are not
/// directories are dropped.
pub fn search_dirs(env: &dyn Fn(&str) -> Option<String>, python_path: &[PathBuf]) -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    for var in ["VIRTUAL_ENV", "CONDA_PREFIX"] {
        if let Some(prefix) = env(var).filter(|v| !v.is_empty()) {
            dirs.extend(site_packages_under(Path::new(&prefix)));
        }
    }
    dirs.extend(python_path.iter().cloned());
    dirs.extend(CUDA_DIRS.iter().map(PathBuf::from));
    let mut out: Vec<PathBuf> = Vec::new();
    for d in dirs {
        if d.is_dir() && !out.contains(&d) {
            out.push(d);
        }
    }
    out
}

/// `prefix/lib/python3*/site-packages`, sorted.
fn site_packages_under(prefix: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = sorted_entries(&prefix.join("lib"))
        .into_iter()
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("python3"))
        })
        .map(|p| p.join("site-packages"))
        .filter(|p| p.is_dir())
        .collect();
    v.sort();
    v
}

fn sorted_entries(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|rd| rd.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    v.sort();
    v
}

/// `python3`'s `sys.path`, or nothing when there is no `python3`, it fails, or it takes longer
/// than `timeout` (it is then killed).
pub fn python_sys_path(timeout: Duration) -> Vec<PathBuf> {
    let child = Command::new("python3")
        .args(["-c", "import sys; print(\"\\n\".join(sys.path))"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn();
    let Ok(mut child) = child else {
        return Vec::new();
    };
    let deadline = Instant::now() + timeout;
    loop {
        match child.try_wait() {
            Ok(Some(status)) if status.success() => break,
            Ok(Some(_)) | Err(_) => return Vec::new(),
            Ok(None) if Instant::now() >= deadline => {
                let _ = child.kill();
                let _ = child.wait();
                return Vec::new();
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
        }
    }
    let Ok(out) = child.wait_with_output() else {
        return Vec::new();
    };
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(PathBuf::from)
        .collect()
}

/// The soname major of `name` for the library `stem` (`libcublas.so`): `Some(Some(13))` for
/// `libcublas.so.13` or `libcublas.so.13.1.0.3`, `Some(None)` for the bare `libcublas.so`, `None`
/// for other files (`libcublasLt.so.13`, `libcublas.so.13.bak`).
pub fn soname_major(name: &str, stem: &str) -> Option<Option<u32>> {
    let rest = name.strip_prefix(stem)?;
    if rest.is_empty() {
        return Some(None);
    }
    let version = rest.strip_prefix('.')?;
    let parts: Vec<&str> = version.split('.').collect();
    if parts
        .iter()
        .any(|p| p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit()))
    {
        return None;
    }
    parts[0].parse().ok().map(Some)
}

/// Files named `stem` or `stem.N[.M...]` in each of `dirs` and in their `nvidia/*/lib`, newest
/// major first (a bare `stem` last), then in the order of `dirs`, then shortest name (the soname
/// before the full version) and by path.
pub fn find_library(stem: &str, dirs: &[PathBuf]) -> Vec<PathBuf> {
    let mut found: Vec<(std::cmp::Reverse<Option<u32>>, usize, usize, PathBuf)> = Vec::new();
    for (order, dir) in dirs.iter().enumerate() {
        let mut lib_dirs = vec![dir.clone()];
        lib_dirs.extend(
            sorted_entries(&dir.join("nvidia"))
                .into_iter()
                .map(|p| p.join("lib"))
                .filter(|p| p.is_dir()),
        );
        for lib_dir in lib_dirs {
            for path in sorted_entries(&lib_dir) {
                let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
                    continue;
                };
                if let Some(major) = soname_major(name, stem) {
                    let len = name.len();
                    found.push((std::cmp::Reverse(major), order, len, path));
                }
            }
        }
    }
    found.sort();
    let mut out: Vec<PathBuf> = Vec::new();
    for (_, _, _, p) in found {
        if !out.contains(&p) {
            out.push(p);
        }
    }
    out
}

/// [`find_library`] over [`search_dirs`] of this process's environment and `python3`.
pub fn discover(stem: &str) -> Vec<PathBuf> {
    let dirs = search_dirs(&|k| std::env::var(k).ok(), &python_sys_path(PYTHON_TIMEOUT));
    find_library(stem, &dirs)
}

/// The candidates for a library: the override from the environment (a path), then `names` for
/// the loader's search, then `discovered` files not already listed.
pub fn candidates(
    env_override: Option<String>,
    names: &[&str],
    discovered: &[PathBuf],
) -> Vec<String> {
    let mut v: Vec<String> = env_override.into_iter().filter(|s| !s.is_empty()).collect();
    v.extend(names.iter().map(|s| s.to_string()));
    for p in discovered {
        let s = p.to_string_lossy().into_owned();
        if !v.contains(&s) {
            v.push(s);
        }
    }
    v
}

/// The function `name` (NUL-terminated) exported by `lib`, or an error naming `library` and the
/// symbol.
///
/// # Safety
/// `T` must be the symbol's C signature.
pub unsafe fn symbol<T: Copy>(
    lib: &libloading::Library,
    library: &str,
    name: &[u8],
) -> Result<T, String> {
    // SAFETY: the caller guarantees that `T` is the symbol's type.
    unsafe { lib.get::<T>(name) }.map(|s| *s).map_err(|e| {
        format!(
            "{library} lacks {}: {e}",
            String::from_utf8_lossy(name.strip_suffix(b"\0").unwrap_or(name))
        )
    })
}

/// Loads a library: `$env_var` (a path) if set, then `names` through the loader's search, and
/// only when none of those opens, the files [`discover`] finds for `stem`.
pub fn load_library<T>(
    what: &str,
    env_var: &str,
    names: &[&str],
    stem: &str,
    mut open: impl FnMut(&str) -> Result<T, String>,
) -> Result<(T, String), String> {
    let first = candidates(std::env::var(env_var).ok(), names, &[]);
    let plain = match load_first(what, &first, &mut open) {
        Ok(loaded) => return Ok(loaded),
        Err(e) => e,
    };
    let found: Vec<PathBuf> = discover(stem);
    let rest: Vec<String> = candidates(None, &[], &found)
        .into_iter()
        .filter(|c| !first.contains(c))
        .collect();
    if rest.is_empty() {
        return Err(format!(
            "{plain}; no {stem}* in site-packages/nvidia/*/lib of $VIRTUAL_ENV, $CONDA_PREFIX or python3's sys.path, nor in {} (set ${env_var} to its path)",
            CUDA_DIRS.join(", ")
        ));
    }
    load_first(what, &rest, open).map_err(|e| format!("{plain}; {e}"))
}

/// Opens the first of `candidates` (names for the loader's search or paths) that loads, calling
/// `open` on each; the error lists every candidate with its reason.
pub fn load_first<T>(
    what: &str,
    candidates: &[String],
    mut open: impl FnMut(&str) -> Result<T, String>,
) -> Result<(T, String), String> {
    let mut errors = Vec::new();
    for c in candidates {
        match open(c) {
            Ok(t) => return Ok((t, c.clone())),
            // The loader's messages usually start with the name already.
            Err(e) if e.starts_with(c.as_str()) => errors.push(e),
            Err(e) => errors.push(format!("{c}: {e}")),
        }
    }
    Err(format!(
        "{what} not found; tried {} ({})",
        candidates.join(", "),
        errors.join("; ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_symbol_is_an_error_naming_the_library_and_the_symbol() {
        // SAFETY: the C library's initializers already ran in this process.
        let libc = unsafe { libloading::Library::new("libc.so.6") }.unwrap();
        type Strlen = unsafe extern "C" fn(*const std::ffi::c_char) -> usize;
        // SAFETY: strlen's C signature.
        let strlen: Strlen = unsafe { symbol(&libc, "libc.so.6", b"strlen\0") }.unwrap();
        // SAFETY: a NUL-terminated string.
        assert_eq!(unsafe { strlen(c"four".as_ptr()) }, 4);
        // SAFETY: never called.
        let e = unsafe { symbol::<Strlen>(&libc, "libc.so.6", b"cublasCreate_v2\0") }.unwrap_err();
        assert!(e.starts_with("libc.so.6 lacks cublasCreate_v2:"), "{e}");
    }

    /// A temporary tree of empty files named like the real libraries.
    fn tree(tag: &str, files: &[&str]) -> PathBuf {
        let root =
            std::env::temp_dir().join(format!("calibrate-discover-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        for f in files {
            let p = root.join(f);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(&p, b"").unwrap();
        }
        root
    }

    #[test]
    fn sonames_are_recognized_and_lookalikes_are_not() {
        assert_eq!(
            soname_major("libcublas.so.13", "libcublas.so"),
            Some(Some(13))
        );
        assert_eq!(
            soname_major("libcublas.so.12.4.5.8", "libcublas.so"),
            Some(Some(12))
        );
        assert_eq!(soname_major("libcublas.so", "libcublas.so"), Some(None));
        assert_eq!(soname_major("libcublasLt.so.13", "libcublas.so"), None);
        assert_eq!(soname_major("libcublas.so.13.bak", "libcublas.so"), None);
        assert_eq!(soname_major("libnccl.so.2", "libnccl.so"), Some(Some(2)));
    }

    #[test]
    fn wheels_in_a_virtual_env_are_found_newest_major_first() {
        let root = tree(
            "venv",
            &[
                "venv/lib/python3.12/site-packages/nvidia/cublas/lib/libcublas.so.12",
                "venv/lib/python3.12/site-packages/nvidia/cublas/lib/libcublasLt.so.12",
                "venv/lib/python3.12/site-packages/nvidia/cu13/lib/libcublas.so.13",
                "venv/lib/python3.12/site-packages/nvidia/cu13/lib/libcublasLt.so.13",
                "venv/lib/python3.12/site-packages/nvidia/nccl/lib/libnccl.so.2",
                "venv/lib/python3.12/site-packages/torch/lib/libcublas.so.11",
                "other/libcublas.so",
            ],
        );
        let venv = root.join("venv").to_string_lossy().into_owned();
        let env = move |k: &str| (k == "VIRTUAL_ENV").then(|| venv.clone());
        let dirs = search_dirs(&env, &[root.join("other"), root.join("missing")]);
        let sp = root.join("venv/lib/python3.12/site-packages");
        assert_eq!(dirs[0], sp);
        assert_eq!(dirs[1], root.join("other"));
        assert!(!dirs.contains(&root.join("missing")));
        let cublas = find_library("libcublas.so", &dirs);
        // torch/lib is not nvidia/*/lib: not searched.
        let local: Vec<PathBuf> = cublas
            .into_iter()
            .filter(|p| p.starts_with(&root))
            .collect();
        assert_eq!(
            local,
            vec![
                sp.join("nvidia/cu13/lib/libcublas.so.13"),
                sp.join("nvidia/cublas/lib/libcublas.so.12"),
                root.join("other/libcublas.so"),
            ]
        );
        let nccl: Vec<PathBuf> = find_library("libnccl.so", &dirs)
            .into_iter()
            .filter(|p| p.starts_with(&root))
            .collect();
        assert_eq!(nccl, vec![sp.join("nvidia/nccl/lib/libnccl.so.2")]);
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn a_broken_library_file_is_an_error_naming_its_path() {
        let root = tree("broken", &["site/nvidia/nccl/lib/libnccl.so.2"]);
        let path = root.join("site/nvidia/nccl/lib/libnccl.so.2");
        let candidates = vec![path.to_string_lossy().into_owned()];
        let r = load_first("NCCL", &candidates, |c| {
            // SAFETY: an empty file; the loader rejects it before running anything.
            unsafe { libloading::Library::new(c) }.map_err(|e| e.to_string())
        });
        let e = r.expect_err("an empty file does not load");
        assert!(e.contains(&*path.to_string_lossy()), "{e}");
        assert!(e.starts_with("NCCL not found"), "{e}");
        std::fs::remove_dir_all(&root).unwrap();
    }

    /// Needs cuBLAS and NCCL installed (no GPU): `cargo test -p calibrate -- --ignored`.
    #[test]
    #[ignore = "needs cuBLAS and NCCL installed"]
    fn installed_cublas_and_nccl_load_and_report_versions() {
        let blas = super::super::cublas::Cublas::load().unwrap();
        let v = blas.version().unwrap();
        let major: u32 = v.split('.').next().unwrap().parse().unwrap();
        assert!(major >= 11, "{} {v}", blas.library);
        let nccl = super::super::nccl::Nccl::load().unwrap();
        assert!(
            nccl.version().unwrap().starts_with("2."),
            "{}",
            nccl.library
        );
        eprintln!(
            "cuBLAS {v} from {}; NCCL {} from {}",
            blas.library,
            nccl.version().unwrap(),
            nccl.library
        );
    }

    #[test]
    fn python_sys_path_never_fails() {
        // With or without python3 here, this returns (possibly empty) within the timeout.
        let t = Instant::now();
        let _ = python_sys_path(Duration::from_secs(5));
        assert!(t.elapsed() < Duration::from_secs(6));
    }
}
