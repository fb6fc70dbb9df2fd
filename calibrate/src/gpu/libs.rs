//! Finding the CUDA driver before anything calls into it.
//!
//! cudarc 0.17 loads the driver lazily and panics when it is missing or lacks a symbol of the
//! CUDA version it was built for (here 12.0), so `calibrate gpu` checks it up front: it opens
//! the names cudarc will (`libcuda.so.1`, `libcuda.so`) and then lets cudarc resolve its
//! symbols under `catch_unwind`, turning a too-old driver into an error message.
//!
//! cuBLAS and NCCL are loaded by this crate, not by cudarc ([`super::cublas`], [`super::nccl`]):
//! cudarc 0.17's candidate names for them (its `get_lib_name_candidates`) are `libX.so`,
//! `.so.12`, `.so.11`, `.so.10` and `.so.1`, which miss CUDA 13's `libcublas.so.13` and
//! `libnccl.so.2` (the only name most installations have, PyTorch's `nvidia-nccl-*` wheels
//! included), and its loaders require every symbol of the version they were built for. Both
//! loaders fall back to [`super::discover`] for libraries inside Python wheels.

use std::panic::{catch_unwind, AssertUnwindSafe};

/// The driver `calibrate gpu` found.
#[derive(Debug, Clone, PartialEq)]
pub struct Found {
    /// The name the driver library loaded under.
    pub driver: String,
    pub devices: usize,
}

/// The first of `names` that the dynamic loader opens, with every error when none does.
pub fn first_loadable(names: &[&str]) -> Result<String, String> {
    let mut errors = Vec::new();
    for n in names {
        // SAFETY: opening a library runs its initializers; these are NVIDIA's own libraries.
        match unsafe { libloading::Library::new(n) } {
            Ok(_) => return Ok(n.to_string()),
            Err(e) => errors.push(e.to_string()),
        }
    }
    Err(errors.join("; "))
}

/// Runs `f`, turning a panic inside cudarc into an error, without printing the panic.
pub fn no_panic<T>(what: &str, f: impl FnOnce() -> T) -> Result<T, String> {
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let r = catch_unwind(AssertUnwindSafe(f));
    std::panic::set_hook(hook);
    r.map_err(|p| {
        let msg = p
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_default();
        format!("{what} failed inside cudarc: {msg}")
    })
}

/// Checks the driver and that it sees a GPU (both required). The error is one sentence for
/// people.
pub fn check() -> Result<Found, String> {
    let driver = first_loadable(&["libcuda.so.1", "libcuda.so"]).map_err(|_| {
        "no NVIDIA driver here: libcuda.so.1 could not be loaded, so there is no GPU to measure (use `calibrate import` for logs from a GPU machine)".to_string()
    })?;
    // SAFETY: cudarc's own check; a panic (a symbol missing from an old driver) is caught.
    let resolved = no_panic("loading the CUDA driver", || unsafe {
        cudarc::driver::sys::is_culib_present()
    })
    .map_err(|e| {
        format!(
            "the NVIDIA driver in {driver} is older than CUDA 12.0, which calibrate needs ({e})"
        )
    })?;
    if !resolved {
        return Err(format!(
            "cudarc could not load the CUDA driver although {driver} exists"
        ));
    }
    let devices = no_panic("counting GPUs", cudarc::driver::CudaContext::device_count)?
        .map_err(|e| format!("the NVIDIA driver is installed but reports no usable GPU ({e:?})"))?;
    if devices < 1 {
        return Err("the NVIDIA driver is installed but reports no GPU".into());
    }
    Ok(Found {
        driver,
        devices: devices as usize,
    })
}
