//! Finding the CUDA driver, cuBLAS and NCCL before anything calls into them.
//!
//! cudarc 0.17 loads its libraries lazily and panics when one is missing or lacks a symbol of
//! the CUDA version it was built for (here 12.0), so `calibrate gpu` checks every library up
//! front: it opens the same names cudarc will (`libcuda.so`, `libcuda.so.1`; `libcublas.so`,
//! `libcublas.so.12`) and then lets cudarc resolve its symbols under `catch_unwind`, turning a
//! too-old driver into an error message.
//!
//! NCCL is loaded here, not by cudarc: cudarc 0.17's candidate names for NCCL are `libnccl.so`,
//! `libnccl.so.12`, `.so.11`, `.so.10` and `.so.1` (its `get_lib_name_candidates`), never
//! `libnccl.so.2`, which is the only name most installations have (the runtime package and
//! PyTorch's `nvidia-nccl-cu12` wheel ship no `libnccl.so` symlink); and its NCCL loader
//! requires every NCCL 2.28 symbol, so older libraries panic. See [`super::nccl`].

use std::panic::{catch_unwind, AssertUnwindSafe};

/// The libraries `calibrate gpu` found.
#[derive(Debug, Clone, PartialEq)]
pub struct Found {
    pub driver: String,
    pub cublas: Option<String>,
    pub nccl: Option<String>,
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

/// Checks the driver (required), a GPU (required), cuBLAS and NCCL (reported when missing).
/// The error is one sentence for people.
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
    let cublas = first_loadable(&["libcublas.so.12", "libcublas.so"]).ok();
    let nccl = super::nccl::Nccl::load().ok().map(|n| n.library);
    Ok(Found {
        driver,
        cublas,
        nccl,
        devices: devices as usize,
    })
}
