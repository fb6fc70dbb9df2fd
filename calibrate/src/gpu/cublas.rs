//! cuBLAS through `libloading`: the handful of entry points `calibrate gpu` times, which have the
//! same ABI in cuBLAS 11, 12 and 13 (`cublasCreate_v2`, `cublasDestroy_v2`, `cublasSetStream_v2`,
//! `cublasGemmEx`, `cublasGemmStridedBatchedEx`, `cublasGetProperty`).
//!
//! cudarc 0.17's own cuBLAS loader tries only `libcublas.so`, `.so.12`, `.so.11`, `.so.10` and
//! `.so.1`, so it never finds CUDA 13's `libcublas.so.13`, nor a library inside a PyTorch
//! wheel (`site-packages/nvidia/*/lib`) that is not on the loader path. The library is looked
//! up as `$CALIBRATE_CUBLAS_LIBRARY` (a path) if set, then [`CANDIDATES`] through the loader's
//! search, then the files [`super::discover`] finds. Before an absolute path is opened, its
//! sibling `libcublasLt.so.N` is loaded globally so that libcublas's dependency on that soname
//! resolves without `LD_LIBRARY_PATH`.
//!
//! Enum values are cuBLAS's, checked against cudarc 0.17.8's bindgen output
//! (`src/cublas/sys/mod.rs`: `CUDA_R_32F = 0`, `CUDA_R_16F = 2`, `CUDA_R_16BF = 14`,
//! `CUBLAS_COMPUTE_32F = 68`, `CUBLAS_COMPUTE_32F_FAST_TF32 = 77`, `CUBLAS_OP_N = 0`,
//! `CUBLAS_GEMM_DFALT = -1`, identical for CUDA 11.4 to 13.0).

use std::ffi::{c_char, c_int, c_longlong, c_void, CStr};
use std::path::Path;

/// Names tried through the loader's search after `$CALIBRATE_CUBLAS_LIBRARY`.
pub const CANDIDATES: [&str; 4] = [
    "libcublas.so.13",
    "libcublas.so.12",
    "libcublas.so.11",
    "libcublas.so",
];

/// `cudaDataType_t` (library_types.h).
pub const CUDA_R_32F: c_int = 0;
pub const CUDA_R_16F: c_int = 2;
pub const CUDA_R_16BF: c_int = 14;
/// `cublasComputeType_t`.
pub const CUBLAS_COMPUTE_32F: c_int = 68;
pub const CUBLAS_COMPUTE_32F_FAST_TF32: c_int = 77;
/// `cublasOperation_t`.
pub const CUBLAS_OP_N: c_int = 0;
/// `cublasGemmAlgo_t`.
pub const CUBLAS_GEMM_DEFAULT: c_int = -1;
/// `libraryPropertyType`.
const MAJOR_VERSION: c_int = 0;
const MINOR_VERSION: c_int = 1;
const PATCH_LEVEL: c_int = 2;

/// An opaque `cublasHandle_t`.
pub type Handle = *mut c_void;
type Status = c_int;

/// A number format as cuBLAS's GEMM sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GemmType {
    /// `fp32`, `tf32`, `fp16`, `bf16`.
    pub name: &'static str,
    pub data: c_int,
    pub compute: c_int,
    pub elem_bytes: u64,
}

/// The GEMM number formats `calibrate gpu` measures; all accumulate in fp32 with f32 scalars.
pub const GEMM_TYPES: [GemmType; 4] = [
    GemmType {
        name: "fp32",
        data: CUDA_R_32F,
        compute: CUBLAS_COMPUTE_32F,
        elem_bytes: 4,
    },
    GemmType {
        name: "tf32",
        data: CUDA_R_32F,
        compute: CUBLAS_COMPUTE_32F_FAST_TF32,
        elem_bytes: 4,
    },
    GemmType {
        name: "fp16",
        data: CUDA_R_16F,
        compute: CUBLAS_COMPUTE_32F,
        elem_bytes: 2,
    },
    GemmType {
        name: "bf16",
        data: CUDA_R_16BF,
        compute: CUBLAS_COMPUTE_32F,
        elem_bytes: 2,
    },
];

/// The [`GemmType`] called `name`.
pub fn gemm_type(name: &str) -> Option<GemmType> {
    GEMM_TYPES.iter().copied().find(|t| t.name == name)
}

type GemmEx = unsafe extern "C" fn(
    Handle,
    c_int,
    c_int,
    c_int,
    c_int,
    c_int,
    *const c_void,
    *const c_void,
    c_int,
    c_int,
    *const c_void,
    c_int,
    c_int,
    *const c_void,
    *mut c_void,
    c_int,
    c_int,
    c_int,
    c_int,
) -> Status;

type GemmStridedBatchedEx = unsafe extern "C" fn(
    Handle,
    c_int,
    c_int,
    c_int,
    c_int,
    c_int,
    *const c_void,
    *const c_void,
    c_int,
    c_int,
    c_longlong,
    *const c_void,
    c_int,
    c_int,
    c_longlong,
    *const c_void,
    *mut c_void,
    c_int,
    c_int,
    c_longlong,
    c_int,
    c_int,
    c_int,
) -> Status;

pub struct Cublas {
    create: unsafe extern "C" fn(*mut Handle) -> Status,
    destroy: unsafe extern "C" fn(Handle) -> Status,
    set_stream: unsafe extern "C" fn(Handle, *mut c_void) -> Status,
    gemm_ex: GemmEx,
    gemm_strided_batched_ex: GemmStridedBatchedEx,
    get_property: unsafe extern "C" fn(c_int, *mut c_int) -> Status,
    status_string: Option<unsafe extern "C" fn(Status) -> *const c_char>,
    /// Declared after the function pointers: dropped (unloaded) last.
    _lib: libloading::Library,
    _lt: Option<libloading::os::unix::Library>,
    /// The name or path that loaded.
    pub library: String,
}

/// The `libcublasLt` that goes with an absolute `libcublas` path: the same suffix
/// (`libcublas.so.13.1.0.3` → `libcublasLt.so.13.1.0.3`), else the soname major
/// (`libcublasLt.so.13`), if such a file is beside it.
pub fn lt_sibling(cublas: &Path) -> Option<std::path::PathBuf> {
    let name = cublas.file_name()?.to_str()?;
    let suffix = name.strip_prefix("libcublas.so")?;
    let dir = cublas.parent()?;
    let exact = dir.join(format!("libcublasLt.so{suffix}"));
    if exact.is_file() {
        return Some(exact);
    }
    let major = suffix.strip_prefix('.')?.split('.').next()?;
    let soname = dir.join(format!("libcublasLt.so.{major}"));
    soname.is_file().then_some(soname)
}

impl Cublas {
    /// Loads cuBLAS from `$CALIBRATE_CUBLAS_LIBRARY`, [`CANDIDATES`] or a discovered file.
    pub fn load() -> Result<Cublas, String> {
        super::discover::load_library(
            "cuBLAS",
            "CALIBRATE_CUBLAS_LIBRARY",
            &CANDIDATES,
            "libcublas.so",
            Self::open,
        )
        .map(|(c, _)| c)
    }

    /// Opens one library (a name for the loader's search, or a path).
    pub fn open(name: &str) -> Result<Cublas, String> {
        let path = Path::new(name);
        let lt = match (path.is_absolute(), lt_sibling(path)) {
            (true, Some(lt)) => {
                use libloading::os::unix::{Library, RTLD_GLOBAL, RTLD_NOW};
                // SAFETY: loading NVIDIA's cuBLASLt runs its initializers only.
                let lib = unsafe { Library::open(Some(&lt), RTLD_NOW | RTLD_GLOBAL) }
                    .map_err(|e| format!("its libcublasLt {}: {e}", lt.display()))?;
                Some(lib)
            }
            _ => None,
        };
        // SAFETY: loading NVIDIA's cuBLAS runs its initializers only.
        let lib = unsafe { libloading::Library::new(name) }.map_err(|e| e.to_string())?;
        Self::bind(lib, lt, name.to_string())
    }

    fn bind(
        lib: libloading::Library,
        lt: Option<libloading::os::unix::Library>,
        library: String,
    ) -> Result<Cublas, String> {
        macro_rules! sym {
            ($name:literal) => {
                // SAFETY: the signature is cuBLAS's, as declared in cublas_api.h (same in 11-13).
                unsafe { super::discover::symbol(&lib, &library, $name) }?
            };
        }
        Ok(Cublas {
            create: sym!(b"cublasCreate_v2\0"),
            destroy: sym!(b"cublasDestroy_v2\0"),
            set_stream: sym!(b"cublasSetStream_v2\0"),
            gemm_ex: sym!(b"cublasGemmEx\0"),
            gemm_strided_batched_ex: sym!(b"cublasGemmStridedBatchedEx\0"),
            get_property: sym!(b"cublasGetProperty\0"),
            // SAFETY: as above; absent before cuBLAS 11.4, hence optional.
            status_string: unsafe { lib.get(b"cublasGetStatusString\0") }
                .ok()
                .map(|s| *s),
            _lib: lib,
            _lt: lt,
            library,
        })
    }

    fn check(&self, s: Status, what: &str) -> Result<(), String> {
        if s == 0 {
            return Ok(());
        }
        let msg = self
            .status_string
            // SAFETY: cuBLAS returns a static string for any status.
            .map(|f| {
                unsafe { CStr::from_ptr(f(s)) }
                    .to_string_lossy()
                    .into_owned()
            })
            .unwrap_or_default();
        Err(format!("{what}: cuBLAS status {s} {msg}"))
    }

    /// `13.1.0`
    pub fn version(&self) -> Result<String, String> {
        let mut parts = [0 as c_int; 3];
        for (p, prop) in parts
            .iter_mut()
            .zip([MAJOR_VERSION, MINOR_VERSION, PATCH_LEVEL])
        {
            // SAFETY: writes one int; needs no handle or GPU.
            self.check(unsafe { (self.get_property)(prop, p) }, "cublasGetProperty")?;
        }
        Ok(format!("{}.{}.{}", parts[0], parts[1], parts[2]))
    }

    /// A handle on the current CUDA context whose work goes to `stream` (a `CUstream`).
    ///
    /// # Safety
    /// `stream` must be null (the default stream) or a live stream of the current context that
    /// outlives the handle.
    pub unsafe fn handle(&self, stream: *mut c_void) -> Result<BlasHandle<'_>, String> {
        let mut h: Handle = std::ptr::null_mut();
        // SAFETY: writes one handle.
        self.check(unsafe { (self.create)(&mut h) }, "cublasCreate")?;
        let handle = BlasHandle { blas: self, h };
        // SAFETY: a live handle; the stream per this function's contract.
        self.check(unsafe { (self.set_stream)(h, stream) }, "cublasSetStream")?;
        Ok(handle)
    }
}

/// A cuBLAS handle, destroyed on drop.
pub struct BlasHandle<'a> {
    blas: &'a Cublas,
    h: Handle,
}

/// Column-major operands of `count` products `C (m×n) = A (m×k) · B (k×n)`, stored one after
/// another (strides m·k, k·n, m·n elements).
#[derive(Debug, Clone, Copy)]
pub struct GemmOperands {
    pub a: u64,
    pub b: u64,
    pub c: u64,
}

impl BlasHandle<'_> {
    /// Enqueues `count` GEMMs (one `cublasGemmEx` when `count` is 1, else one
    /// `cublasGemmStridedBatchedEx`) with alpha 1, beta 0, no transposes.
    ///
    /// # Safety
    /// The three device pointers must hold `count·m·k`, `count·k·n` and `count·m·n` elements of
    /// `t` on the handle's device.
    pub unsafe fn gemm(
        &self,
        t: GemmType,
        (m, n, k, count): (u64, u64, u64, u64),
        ops: GemmOperands,
    ) -> Result<(), String> {
        let dim = |v: u64, what: &str| {
            c_int::try_from(v).map_err(|_| format!("GEMM {what} = {v} exceeds cuBLAS's int range"))
        };
        let (mi, ni, ki, ci) = (
            dim(m, "m")?,
            dim(n, "n")?,
            dim(k, "k")?,
            dim(count, "count")?,
        );
        let (alpha, beta) = (1.0f32, 0.0f32);
        let (alpha, beta) = (
            &alpha as *const f32 as *const c_void,
            &beta as *const f32 as *const c_void,
        );
        let (a, b, c) = (
            ops.a as *const c_void,
            ops.b as *const c_void,
            ops.c as *mut c_void,
        );
        let s = if count == 1 {
            // SAFETY: per this function's contract; f32 scalars match the 32F compute types.
            unsafe {
                (self.blas.gemm_ex)(
                    self.h,
                    CUBLAS_OP_N,
                    CUBLAS_OP_N,
                    mi,
                    ni,
                    ki,
                    alpha,
                    a,
                    t.data,
                    mi,
                    b,
                    t.data,
                    ki,
                    beta,
                    c,
                    t.data,
                    mi,
                    t.compute,
                    CUBLAS_GEMM_DEFAULT,
                )
            }
        } else {
            // SAFETY: as above, with `count` operands of each kind stored back to back.
            unsafe {
                (self.blas.gemm_strided_batched_ex)(
                    self.h,
                    CUBLAS_OP_N,
                    CUBLAS_OP_N,
                    mi,
                    ni,
                    ki,
                    alpha,
                    a,
                    t.data,
                    mi,
                    (m * k) as c_longlong,
                    b,
                    t.data,
                    ki,
                    (k * n) as c_longlong,
                    beta,
                    c,
                    t.data,
                    mi,
                    (m * n) as c_longlong,
                    ci,
                    t.compute,
                    CUBLAS_GEMM_DEFAULT,
                )
            }
        };
        self.blas.check(
            s,
            if count == 1 {
                "cublasGemmEx"
            } else {
                "cublasGemmStridedBatchedEx"
            },
        )
    }
}

impl Drop for BlasHandle<'_> {
    fn drop(&mut self) {
        // SAFETY: the handle came from cublasCreate and is not used after this; errors at
        // teardown are not actionable.
        let _ = unsafe { (self.blas.destroy)(self.h) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn candidates_put_the_override_first_and_discovered_files_last() {
        let found = vec![std::path::PathBuf::from(
            "/venv/site-packages/nvidia/cu13/lib/libcublas.so.13",
        )];
        let c = super::super::discover::candidates(
            Some("/opt/x/libcublas.so.13".into()),
            &CANDIDATES,
            &found,
        );
        assert_eq!(c[0], "/opt/x/libcublas.so.13");
        assert_eq!(c[1], "libcublas.so.13");
        assert_eq!(
            c.last().unwrap(),
            "/venv/site-packages/nvidia/cu13/lib/libcublas.so.13"
        );
        assert_eq!(c.len(), CANDIDATES.len() + 2);
    }

    #[test]
    fn the_lt_sibling_is_found_beside_an_absolute_path() {
        let dir = std::env::temp_dir().join(format!("calibrate-cublas-lt-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("libcublas.so.13.1.0.3"), b"").unwrap();
        std::fs::write(dir.join("libcublasLt.so.13"), b"").unwrap();
        assert_eq!(
            lt_sibling(&dir.join("libcublas.so.13.1.0.3")),
            Some(dir.join("libcublasLt.so.13"))
        );
        assert_eq!(lt_sibling(&dir.join("libcublas.so.12")), None);
        // An empty file is refused with its path in the message, not a panic.
        let e = Cublas::open(&dir.join("libcublas.so.13.1.0.3").to_string_lossy())
            .err()
            .expect("empty files do not load");
        assert!(e.contains("libcublasLt.so.13"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
