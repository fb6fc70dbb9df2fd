//! NCCL through `libloading`, with cudarc's NCCL types (`cudarc::nccl::sys`) for the ABI.
//!
//! Only the entry points that exist in every NCCL 2.x are bound, so any `libnccl.so.2` works.
//! The library is looked up as `$CALIBRATE_NCCL_LIBRARY` (a path) if set, then `libnccl.so.2`,
//! then `libnccl.so`, through the normal dynamic-loader search (`LD_LIBRARY_PATH`, ld.so cache),
//! then as the files [`super::discover`] finds (PyTorch's `nvidia-nccl-*` wheels).

use std::ffi::{c_char, c_int, c_void, CStr};

use cudarc::nccl::sys::{
    cudaStream_t, ncclComm_t, ncclDataType_t, ncclRedOp_t, ncclResult_t, ncclUniqueId,
};

/// Names tried in order after `$CALIBRATE_NCCL_LIBRARY`.
pub const CANDIDATES: [&str; 2] = ["libnccl.so.2", "libnccl.so"];

type Res = ncclResult_t;

pub struct Nccl {
    _lib: libloading::Library,
    /// The name or path that loaded.
    pub library: String,
    get_version: unsafe extern "C" fn(*mut c_int) -> Res,
    get_unique_id: unsafe extern "C" fn(*mut ncclUniqueId) -> Res,
    comm_init_rank: unsafe extern "C" fn(*mut ncclComm_t, c_int, ncclUniqueId, c_int) -> Res,
    comm_init_all: unsafe extern "C" fn(*mut ncclComm_t, c_int, *const c_int) -> Res,
    comm_destroy: unsafe extern "C" fn(ncclComm_t) -> Res,
    error_string: unsafe extern "C" fn(Res) -> *const c_char,
    all_reduce: unsafe extern "C" fn(
        *const c_void,
        *mut c_void,
        usize,
        ncclDataType_t,
        ncclRedOp_t,
        ncclComm_t,
        cudaStream_t,
    ) -> Res,
    all_gather: unsafe extern "C" fn(
        *const c_void,
        *mut c_void,
        usize,
        ncclDataType_t,
        ncclComm_t,
        cudaStream_t,
    ) -> Res,
    reduce_scatter: unsafe extern "C" fn(
        *const c_void,
        *mut c_void,
        usize,
        ncclDataType_t,
        ncclRedOp_t,
        ncclComm_t,
        cudaStream_t,
    ) -> Res,
    broadcast: unsafe extern "C" fn(
        *const c_void,
        *mut c_void,
        usize,
        ncclDataType_t,
        c_int,
        ncclComm_t,
        cudaStream_t,
    ) -> Res,
    group_start: unsafe extern "C" fn() -> Res,
    group_end: unsafe extern "C" fn() -> Res,
}

/// The collectives `calibrate gpu` measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Collective {
    AllReduce,
    AllGather,
    ReduceScatter,
    Broadcast,
}

impl Collective {
    pub const ALL: [Collective; 4] = [
        Collective::AllReduce,
        Collective::AllGather,
        Collective::ReduceScatter,
        Collective::Broadcast,
    ];
    /// nccl-tests' name.
    pub fn name(self) -> &'static str {
        match self {
            Collective::AllReduce => "all_reduce",
            Collective::AllGather => "all_gather",
            Collective::ReduceScatter => "reduce_scatter",
            Collective::Broadcast => "broadcast",
        }
    }
}

impl Nccl {
    /// Loads NCCL from `$CALIBRATE_NCCL_LIBRARY`, [`CANDIDATES`] or a discovered wheel.
    pub fn load() -> Result<Nccl, String> {
        super::discover::load_library(
            "NCCL",
            "CALIBRATE_NCCL_LIBRARY",
            &CANDIDATES,
            "libnccl.so",
            |n| {
                // SAFETY: loading NVIDIA's NCCL runs its initializers only.
                let lib = unsafe { libloading::Library::new(n) }.map_err(|e| e.to_string())?;
                Self::bind(lib, n.to_string())
            },
        )
        .map(|(n, _)| n)
    }

    fn bind(lib: libloading::Library, library: String) -> Result<Nccl, String> {
        macro_rules! sym {
            ($name:literal) => {
                // SAFETY: the signature is NCCL's, as declared in nccl.h (types from cudarc's bindgen).
                unsafe { super::discover::symbol(&lib, &library, $name) }?
            };
        }
        Ok(Nccl {
            get_version: sym!(b"ncclGetVersion\0"),
            get_unique_id: sym!(b"ncclGetUniqueId\0"),
            comm_init_rank: sym!(b"ncclCommInitRank\0"),
            comm_init_all: sym!(b"ncclCommInitAll\0"),
            comm_destroy: sym!(b"ncclCommDestroy\0"),
            error_string: sym!(b"ncclGetErrorString\0"),
            all_reduce: sym!(b"ncclAllReduce\0"),
            all_gather: sym!(b"ncclAllGather\0"),
            reduce_scatter: sym!(b"ncclReduceScatter\0"),
            broadcast: sym!(b"ncclBroadcast\0"),
            group_start: sym!(b"ncclGroupStart\0"),
            group_end: sym!(b"ncclGroupEnd\0"),
            _lib: lib,
            library,
        })
    }

    fn check(&self, r: Res, what: &str) -> Result<(), String> {
        if r == ncclResult_t::ncclSuccess {
            return Ok(());
        }
        // SAFETY: NCCL returns a static string for any result code.
        let msg = unsafe { CStr::from_ptr((self.error_string)(r)) }
            .to_string_lossy()
            .into_owned();
        Err(format!("{what}: {msg} ({r:?})"))
    }

    /// `2.21.5`
    pub fn version(&self) -> Result<String, String> {
        let mut v: c_int = 0;
        self.check(unsafe { (self.get_version)(&mut v) }, "ncclGetVersion")?;
        Ok(crate::import::nccl_tests::version_from_code(v as u64))
    }

    pub fn unique_id(&self) -> Result<[u8; 128], String> {
        let mut id = ncclUniqueId { internal: [0; 128] };
        self.check(unsafe { (self.get_unique_id)(&mut id) }, "ncclGetUniqueId")?;
        Ok(id.internal.map(|c| c as u8))
    }

    /// One communicator per local device, for a single-process run.
    pub fn init_all(&self, devices: &[c_int]) -> Result<Vec<ncclComm_t>, String> {
        let mut comms: Vec<ncclComm_t> = vec![std::ptr::null_mut(); devices.len()];
        self.check(
            unsafe {
                (self.comm_init_all)(comms.as_mut_ptr(), devices.len() as c_int, devices.as_ptr())
            },
            "ncclCommInitAll",
        )?;
        Ok(comms)
    }

    /// This process's communicator in a multi-process run (the current CUDA context's device).
    pub fn init_rank(&self, world: u32, id: [u8; 128], rank: u32) -> Result<ncclComm_t, String> {
        let uid = ncclUniqueId {
            internal: id.map(|b| b as c_char),
        };
        let mut comm: ncclComm_t = std::ptr::null_mut();
        self.check(
            unsafe { (self.comm_init_rank)(&mut comm, world as c_int, uid, rank as c_int) },
            "ncclCommInitRank",
        )?;
        Ok(comm)
    }

    /// # Safety
    /// `comm` must come from [`Nccl::init_all`] or [`Nccl::init_rank`] and not be used again.
    pub unsafe fn destroy(&self, comm: ncclComm_t) {
        // SAFETY: per the contract above; errors at teardown are not actionable.
        let _ = unsafe { (self.comm_destroy)(comm) };
    }

    pub fn group<T>(&self, f: impl FnOnce() -> Result<T, String>) -> Result<T, String> {
        self.check(unsafe { (self.group_start)() }, "ncclGroupStart")?;
        let r = f();
        self.check(unsafe { (self.group_end)() }, "ncclGroupEnd")?;
        r
    }

    /// Launches one collective of `count` floats per rank (nccl-tests' count convention: the
    /// receive count for reduce-scatter, the send count for all-gather).
    ///
    /// # Safety
    /// `send` and `recv` must be device buffers on `comm`'s device large enough for the
    /// collective, and `stream` a stream of that device.
    pub unsafe fn launch(
        &self,
        c: Collective,
        send: *const c_void,
        recv: *mut c_void,
        count: usize,
        comm: ncclComm_t,
        stream: cudaStream_t,
    ) -> Result<(), String> {
        let f = ncclDataType_t::ncclFloat32;
        let sum = ncclRedOp_t::ncclSum;
        let r = match c {
            Collective::AllReduce => (self.all_reduce)(send, recv, count, f, sum, comm, stream),
            Collective::AllGather => (self.all_gather)(send, recv, count, f, comm, stream),
            Collective::ReduceScatter => {
                (self.reduce_scatter)(send, recv, count, f, sum, comm, stream)
            }
            Collective::Broadcast => (self.broadcast)(send, recv, count, f, 0, comm, stream),
        };
        self.check(r, c.name())
    }
}
