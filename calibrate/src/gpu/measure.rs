//! The measurements of `calibrate gpu`, through cudarc (driver), [`super::cublas`] and
//! [`super::nccl`]: device inventory, copy bandwidth, P2P matrix, cuBLAS GEMM grid, the catalog
//! models' layer GEMMs ([`super::layers`]) and NCCL collectives.
//! Every time is taken with CUDA events after warm-up, repeated, and reported as median with
//! min and max.

use std::ffi::{c_int, c_void};
use std::sync::Arc;

use cudarc::driver::sys::{self as cu, CUdevice_attribute, CUevent_flags};
use cudarc::driver::{CudaContext, CudaSlice, CudaStream, DevicePtr};
use serde::Serialize;

use super::cublas::{BlasHandle, Cublas, GemmOperands, GemmType, GEMM_TYPES};
use super::launch::Launch;
use super::layers::{LayerGemmTime, PlannedGemm};
use super::nccl::{Collective, Nccl};
use crate::compute::GemmTiming;
use crate::import::nccl_tests::{busbw_factor, NcclTestsRun, RankDevice, Row, Timing};

#[derive(Debug, Clone)]
pub struct Options {
    pub min_bytes: u64,
    pub max_bytes: u64,
    pub warmup: u32,
    pub reps: u32,
    pub copies: bool,
    pub p2p: bool,
    pub gemm: bool,
    pub nccl: bool,
    /// The layer GEMMs to time ([`super::layers::plan`]); empty to skip them.
    pub layers: Vec<PlannedGemm>,
}

/// Median and spread of repeated timings, in seconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Stat {
    pub median_secs: f64,
    pub min_secs: f64,
    pub max_secs: f64,
}

impl Stat {
    pub fn of(mut v: Vec<f64>) -> Stat {
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let median = if n == 0 {
            f64::NAN
        } else if n % 2 == 1 {
            v[n / 2]
        } else {
            0.5 * (v[n / 2 - 1] + v[n / 2])
        };
        Stat {
            median_secs: median,
            min_secs: v.first().copied().unwrap_or(f64::NAN),
            max_secs: v.last().copied().unwrap_or(f64::NAN),
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct DeviceInfo {
    pub ordinal: usize,
    pub name: String,
    pub compute_capability: (i32, i32),
    pub sms: i32,
    pub memory_bytes: u64,
    pub sm_clock_khz: i32,
    pub memory_clock_khz: i32,
}

#[derive(Debug, Clone, Serialize)]
pub struct CopyPoint {
    /// `h2d`, `d2h` (pinned host memory) or `d2d` (within one GPU).
    pub kind: &'static str,
    pub device: usize,
    pub bytes: u64,
    pub time: Stat,
}

#[derive(Debug, Clone, Serialize)]
pub struct P2pEntry {
    pub src: usize,
    pub dst: usize,
    pub peer_access: bool,
    pub bytes: u64,
    pub unidirectional: Stat,
    /// Both directions at once; the time until both finish.
    pub bidirectional: Stat,
    /// A 4-byte copy: copy-engine latency as an application sees it.
    pub latency: Stat,
}

#[derive(Debug, Clone, Serialize)]
pub struct GemmPoint {
    /// `fp32`, `tf32`, `fp16`, `bf16`.
    pub dtype: &'static str,
    pub m: u64,
    pub n: u64,
    pub k: u64,
    pub time: Stat,
}

impl GemmPoint {
    pub fn flops(&self) -> f64 {
        2.0 * self.m as f64 * self.n as f64 * self.k as f64
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct GpuReport {
    pub host: String,
    pub driver_version: String,
    /// The cuBLAS file that loaded and its version.
    pub cublas_library: Option<String>,
    pub cublas_version: Option<String>,
    /// The NCCL file that loaded and its version.
    pub nccl_library: Option<String>,
    pub nccl_version: Option<String>,
    pub launch: String,
    pub devices: Vec<DeviceInfo>,
    pub copies: Vec<CopyPoint>,
    pub p2p: Vec<P2pEntry>,
    pub gemms: Vec<GemmPoint>,
    /// Every pass of every layer GEMM; identical shapes share one measurement.
    pub layer_gemms: Vec<LayerGemmTime>,
    #[serde(skip)]
    pub collectives: Vec<NcclTestsRun>,
}

impl GpuReport {
    /// The grid and layer GEMMs as [`crate::compute::compute_section`] takes them.
    pub fn gemm_timings(&self) -> Vec<GemmTiming> {
        self.gemms
            .iter()
            .map(|g| GemmTiming {
                dtype: g.dtype.to_string(),
                m: g.m,
                n: g.n,
                k: g.k,
                count: 1,
                median_secs: g.time.median_secs,
                layer: None,
            })
            .chain(self.layer_gemms.iter().map(LayerGemmTime::timing))
            .collect()
    }
}

type R<T> = Result<T, String>;

fn d<E: std::fmt::Debug>(what: &str) -> impl Fn(E) -> String + '_ {
    move |e| format!("{what}: {e:?}")
}

const TIMED: Option<CUevent_flags> = Some(CUevent_flags::CU_EVENT_DEFAULT);

/// Times `f` on `stream`: `warmup` untimed calls, then `reps` calls each between two events.
fn time_on(
    stream: &Arc<CudaStream>,
    warmup: u32,
    reps: u32,
    mut f: impl FnMut() -> R<()>,
) -> R<Stat> {
    for _ in 0..warmup {
        f()?;
    }
    let mut v = Vec::with_capacity(reps as usize);
    for _ in 0..reps.max(1) {
        let start = stream.record_event(TIMED).map_err(d("cuEventRecord"))?;
        f()?;
        let end = stream.record_event(TIMED).map_err(d("cuEventRecord"))?;
        v.push(start.elapsed_ms(&end).map_err(d("cuEventElapsedTime"))? as f64 * 1e-3);
    }
    Ok(Stat::of(v))
}

fn sizes(min: u64, max: u64) -> Vec<u64> {
    let mut v = Vec::new();
    let mut s = min.max(1);
    while s <= max {
        v.push(s);
        s = s.saturating_mul(2);
    }
    v
}

fn ptr(s: &CudaSlice<u8>, stream: &CudaStream) -> u64 {
    let (p, _guard) = s.device_ptr(stream);
    p
}

pub fn device_info(ctx: &Arc<CudaContext>) -> R<DeviceInfo> {
    let attr = |a| ctx.attribute(a).map_err(d("cuDeviceGetAttribute"));
    Ok(DeviceInfo {
        ordinal: ctx.ordinal(),
        name: ctx.name().map_err(d("cuDeviceGetName"))?,
        compute_capability: ctx
            .compute_capability()
            .map_err(d("cuDeviceComputeCapability"))?,
        sms: attr(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?,
        // SAFETY: a device handle from a live context.
        memory_bytes: unsafe { cudarc::driver::result::device::total_mem(ctx.cu_device()) }
            .map_err(d("cuDeviceTotalMem"))? as u64,
        sm_clock_khz: attr(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_CLOCK_RATE)?,
        memory_clock_khz: attr(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE)?,
    })
}

pub fn driver_version() -> R<String> {
    let mut v: c_int = 0;
    // SAFETY: writes one int.
    unsafe { cu::cuDriverGetVersion(&mut v) }
        .result()
        .map_err(d("cuDriverGetVersion"))?;
    Ok(format!("{}.{}", v / 1000, (v % 1000) / 10))
}

fn copies(ctx: &Arc<CudaContext>, o: &Options) -> R<Vec<CopyPoint>> {
    let stream = ctx.default_stream();
    let max = o.max_bytes.max(4096) as usize;
    // SAFETY: the pinned buffer is only used as a copy source/target; its contents do not matter.
    let mut host = unsafe { ctx.alloc_pinned::<u8>(max) }.map_err(d("cuMemHostAlloc"))?;
    let mut a = stream.alloc_zeros::<u8>(max).map_err(d("cuMemAlloc"))?;
    let mut b = stream.alloc_zeros::<u8>(max).map_err(d("cuMemAlloc"))?;
    // The pinned buffer as a plain slice, so that each size copies its first `n` bytes (cudarc
    // copies whole host slices and asserts the device side is at least as long).
    let host = host.as_mut_slice().map_err(d("cuEventSynchronize"))?;
    let mut out = Vec::new();
    for bytes in sizes(4096, max as u64) {
        let n = bytes as usize;
        let h2d = time_on(&stream, o.warmup, o.reps, || {
            stream
                .memcpy_htod(&host[..n], &mut a.slice_mut(..n))
                .map_err(d("memcpy_htod"))
        })?;
        let d2h = time_on(&stream, o.warmup, o.reps, || {
            stream
                .memcpy_dtoh(&a.slice(..n), &mut host[..n])
                .map_err(d("memcpy_dtoh"))
        })?;
        let d2d = time_on(&stream, o.warmup, o.reps, || {
            stream
                .memcpy_dtod(&a.slice(..n), &mut b.slice_mut(..n))
                .map_err(d("memcpy_dtod"))
        })?;
        for (kind, time) in [("h2d", h2d), ("d2h", d2h), ("d2d", d2d)] {
            out.push(CopyPoint {
                kind,
                device: ctx.ordinal(),
                bytes,
                time,
            });
        }
    }
    Ok(out)
}

fn p2p(ctxs: &[Arc<CudaContext>], o: &Options) -> R<Vec<P2pEntry>> {
    let bytes = (64u64 << 20).min(o.max_bytes.max(4096)) as usize;
    let streams: Vec<Arc<CudaStream>> = ctxs.iter().map(|c| c.default_stream()).collect();
    let bufs: Vec<(CudaSlice<u8>, CudaSlice<u8>)> = streams
        .iter()
        .map(|s| {
            Ok((
                s.alloc_zeros::<u8>(bytes).map_err(d("cuMemAlloc"))?,
                s.alloc_zeros::<u8>(bytes).map_err(d("cuMemAlloc"))?,
            ))
        })
        .collect::<R<_>>()?;
    let mut out = Vec::new();
    for i in 0..ctxs.len() {
        for j in 0..ctxs.len() {
            if i == j {
                continue;
            }
            let mut can: c_int = 0;
            // SAFETY: device handles from live contexts.
            unsafe {
                cu::cuDeviceCanAccessPeer(&mut can, ctxs[i].cu_device(), ctxs[j].cu_device())
            }
            .result()
            .map_err(d("cuDeviceCanAccessPeer"))?;
            for (x, y) in [(i, j), (j, i)] {
                if can != 0 {
                    ctxs[x].bind_to_thread().map_err(d("cuCtxSetCurrent"))?;
                    // SAFETY: enabling access from x's context to y's; "already enabled" is fine.
                    let r = unsafe { cu::cuCtxEnablePeerAccess(ctxs[y].cu_ctx(), 0) };
                    if r != cu::CUresult::CUDA_SUCCESS
                        && r != cu::CUresult::CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED
                    {
                        return Err(format!("cuCtxEnablePeerAccess {x}->{y}: {r:?}"));
                    }
                }
            }
            let copy = |x: usize, y: usize, n: usize| -> R<()> {
                // SAFETY: both buffers hold at least `n` bytes and live as long as the contexts.
                unsafe {
                    cu::cuMemcpyPeerAsync(
                        ptr(&bufs[y].1, &streams[y]),
                        ctxs[y].cu_ctx(),
                        ptr(&bufs[x].0, &streams[x]),
                        ctxs[x].cu_ctx(),
                        n,
                        streams[x].cu_stream(),
                    )
                }
                .result()
                .map_err(d("cuMemcpyPeerAsync"))
            };
            let uni = time_on(&streams[i], o.warmup, o.reps, || copy(i, j, bytes))?;
            let latency = time_on(&streams[i], o.warmup, o.reps, || copy(i, j, 4))?;
            // Bidirectional: j's copy is enqueued after j's stream waits for i's start event.
            let mut bi = Vec::new();
            for rep in 0..(o.warmup + o.reps.max(1)) {
                let start = streams[i].record_event(TIMED).map_err(d("cuEventRecord"))?;
                streams[j].wait(&start).map_err(d("cuStreamWaitEvent"))?;
                copy(i, j, bytes)?;
                copy(j, i, bytes)?;
                let done_j = streams[j].record_event(TIMED).map_err(d("cuEventRecord"))?;
                streams[i].wait(&done_j).map_err(d("cuStreamWaitEvent"))?;
                let end = streams[i].record_event(TIMED).map_err(d("cuEventRecord"))?;
                let ms = start.elapsed_ms(&end).map_err(d("cuEventElapsedTime"))?;
                if rep >= o.warmup {
                    bi.push(ms as f64 * 1e-3);
                }
            }
            out.push(P2pEntry {
                src: i,
                dst: j,
                peer_access: can != 0,
                bytes: bytes as u64,
                unidirectional: uni,
                bidirectional: Stat::of(bi),
                latency,
            });
        }
    }
    Ok(out)
}

/// The GEMM grid: square sizes and a few transformer/CNN-like shapes.
pub const GEMM_SHAPES: [(u64, u64, u64); 10] = [
    (256, 256, 256),
    (512, 512, 512),
    (1024, 1024, 1024),
    (2048, 2048, 2048),
    (4096, 4096, 4096),
    (8192, 8192, 8192),
    (4096, 1024, 4096),
    (8192, 2048, 1024),
    (1024, 128, 4096),
    (128, 4096, 4096),
];

/// Device buffers for GEMM operands, filled with a small finite value and grown on demand.
#[derive(Default)]
struct Operands {
    bufs: [Option<CudaSlice<u8>>; 3],
}

impl Operands {
    /// Device pointers to at least `bytes[i]` bytes each.
    fn ensure(&mut self, stream: &Arc<CudaStream>, bytes: [u64; 3]) -> R<GemmOperands> {
        for (buf, &want) in self.bufs.iter_mut().zip(&bytes) {
            let want = want.max(1) as usize;
            if buf.as_ref().is_some_and(|b| b.len() >= want) {
                continue;
            }
            *buf = None;
            let s = stream
                .alloc_zeros::<u8>(want)
                .map_err(d(&format!("cuMemAlloc of {want} bytes")))?;
            // 0x3c in every byte: a small finite value in fp32, fp16 and bf16 alike.
            // SAFETY: the buffer holds exactly `want` bytes.
            unsafe {
                cudarc::driver::result::memset_d8_async(
                    ptr(&s, stream),
                    0x3c,
                    want,
                    stream.cu_stream(),
                )
            }
            .map_err(d("cuMemsetD8"))?;
            *buf = Some(s);
        }
        let p = |i: usize| self.bufs[i].as_ref().map(|b| ptr(b, stream)).unwrap_or(0);
        Ok(GemmOperands {
            a: p(0),
            b: p(1),
            c: p(2),
        })
    }
}

/// Times `count` GEMMs of `(m, n, k)` in `t`.
fn time_gemm(
    blas: &BlasHandle,
    stream: &Arc<CudaStream>,
    ops: &mut Operands,
    t: GemmType,
    (m, n, k, count): (u64, u64, u64, u64),
    o: &Options,
) -> R<Stat> {
    let e = t.elem_bytes;
    let p = ops.ensure(
        stream,
        [m * k * count * e, k * n * count * e, m * n * count * e],
    )?;
    time_on(stream, o.warmup, o.reps, || {
        // SAFETY: `ensure` sized the three buffers for `count` column-major operands of `t`.
        unsafe { blas.gemm(t, (m, n, k, count), p) }
    })
}

fn gemms(blas: &Cublas, ctx: &Arc<CudaContext>, o: &Options) -> R<Vec<GemmPoint>> {
    let stream = ctx.default_stream();
    // SAFETY: the context's default stream, bound to this thread, outlives the handle.
    let handle = unsafe { blas.handle(stream.cu_stream() as *mut c_void) }?;
    let mut ops = Operands::default();
    let mut out = Vec::new();
    for t in GEMM_TYPES {
        for &(m, n, k) in &GEMM_SHAPES {
            let time = time_gemm(&handle, &stream, &mut ops, t, (m, n, k, 1), o)?;
            out.push(GemmPoint {
                dtype: t.name,
                m,
                n,
                k,
                time,
            });
        }
    }
    Ok(out)
}

/// Times every planned layer GEMM, each distinct shape once; a shape that does not fit in
/// memory is reported through `log` and left out.
fn layer_gemms(
    blas: &Cublas,
    ctx: &Arc<CudaContext>,
    o: &Options,
    log: &mut dyn FnMut(&str),
) -> R<Vec<LayerGemmTime>> {
    let stream = ctx.default_stream();
    // SAFETY: the context's default stream, bound to this thread, outlives the handle.
    let handle = unsafe { blas.handle(stream.cu_stream() as *mut c_void) }?;
    let mut ops = Operands::default();
    let mut measured: std::collections::BTreeMap<(String, u64, u64, u64, u64), Option<Stat>> =
        std::collections::BTreeMap::new();
    let mut out = Vec::new();
    let mut current = None;
    for g in &o.layers {
        let group = (g.model.clone(), g.batch, g.dtype.clone());
        if current.as_ref() != Some(&group) {
            log(&format!(
                "layer GEMMs of {} at batch {} in {}",
                g.model, g.batch, g.dtype
            ));
            current = Some(group);
        }
        let t = super::cublas::gemm_type(&g.dtype)
            .ok_or_else(|| format!("no cuBLAS GEMM type {:?}", g.dtype))?;
        let key = g.key();
        let stat = match measured.get(&key) {
            Some(s) => *s,
            None => {
                let shape = (g.m, g.n, g.k, g.count);
                let s = match time_gemm(&handle, &stream, &mut ops, t, shape, o) {
                    Ok(s) => Some(s),
                    Err(e) if e.starts_with("cuMemAlloc") => {
                        log(&format!(
                            "{} {} {} {}x{}x{} x{}: skipped ({e})",
                            g.model, g.layer, g.pass, g.m, g.n, g.k, g.count
                        ));
                        ops = Operands::default();
                        None
                    }
                    Err(e) => return Err(e),
                };
                measured.insert(key, s);
                s
            }
        };
        if let Some(time) = stat {
            out.push(LayerGemmTime {
                gemm: g.clone(),
                time,
            });
        }
    }
    Ok(out)
}

struct NcclRank {
    stream: Arc<CudaStream>,
    comm: cudarc::nccl::sys::ncclComm_t,
    send: CudaSlice<u8>,
    recv: CudaSlice<u8>,
    rank: usize,
}

fn collectives(
    nccl: &Nccl,
    ctxs: &[Arc<CudaContext>],
    launch: &Launch,
    o: &Options,
    host: &str,
    devices: &[DeviceInfo],
) -> R<Vec<NcclTestsRun>> {
    let comms = if launch.world_size > 1 {
        let id = if launch.rank == 0 {
            Some(nccl.unique_id()?)
        } else {
            None
        };
        let id = super::launch::share_id(launch, id, std::time::Duration::from_secs(300))?;
        ctxs[0].bind_to_thread().map_err(d("cuCtxSetCurrent"))?;
        vec![nccl.init_rank(launch.world_size, id, launch.rank)?]
    } else {
        let devs: Vec<c_int> = ctxs.iter().map(|c| c.ordinal() as c_int).collect();
        nccl.init_all(&devs)?
    };
    let nranks = if launch.world_size > 1 {
        launch.world_size
    } else {
        ctxs.len() as u32
    } as usize;
    let max = o.max_bytes as usize;
    let mut ranks = Vec::new();
    for (i, (ctx, comm)) in ctxs.iter().zip(comms).enumerate() {
        let stream = ctx.new_stream().map_err(d("cuStreamCreate"))?;
        let send = stream.alloc_zeros::<u8>(max).map_err(d("cuMemAlloc"))?;
        let recv = stream.alloc_zeros::<u8>(max).map_err(d("cuMemAlloc"))?;
        let rank = if launch.world_size > 1 {
            launch.rank as usize
        } else {
            i
        };
        ranks.push(NcclRank {
            stream,
            comm,
            send,
            recv,
            rank,
        });
    }
    let mut runs = Vec::new();
    for c in Collective::ALL {
        let mut rows = Vec::new();
        for size in sizes(o.min_bytes.max(4), o.max_bytes) {
            // nccl-tests' convention: `size` is the whole buffer; per-rank counts divide it.
            let per_rank_div = match c {
                Collective::AllGather | Collective::ReduceScatter => nranks,
                _ => 1,
            };
            let count = (size as usize / 4) / per_rank_div;
            if count == 0 {
                continue;
            }
            let size = (count * 4 * per_rank_div) as u64;
            let mut groups = Vec::new();
            for in_place in [false, true] {
                let go = || -> R<()> {
                    nccl.group(|| {
                        for r in &ranks {
                            let (s, rv) = (ptr(&r.send, &r.stream), ptr(&r.recv, &r.stream));
                            let (send, recv) = match (in_place, c) {
                                (false, _) => (s, rv),
                                (true, Collective::AllGather) => {
                                    (rv + (r.rank * count * 4) as u64, rv)
                                }
                                (true, Collective::ReduceScatter) => {
                                    (s, s + (r.rank * count * 4) as u64)
                                }
                                (true, _) => (rv, rv),
                            };
                            // SAFETY: both buffers hold `max` >= size bytes on this rank's device.
                            unsafe {
                                nccl.launch(
                                    c,
                                    send as *const c_void,
                                    recv as *mut c_void,
                                    count,
                                    r.comm,
                                    r.stream.cu_stream() as cudarc::nccl::sys::cudaStream_t,
                                )?
                            };
                        }
                        Ok(())
                    })
                };
                for _ in 0..o.warmup {
                    go()?;
                }
                let mut times = Vec::new();
                for _ in 0..o.reps.max(1) {
                    let starts: Vec<_> = ranks
                        .iter()
                        .map(|r| r.stream.record_event(TIMED))
                        .collect::<Result<_, _>>()
                        .map_err(d("cuEventRecord"))?;
                    go()?;
                    let ends: Vec<_> = ranks
                        .iter()
                        .map(|r| r.stream.record_event(TIMED))
                        .collect::<Result<_, _>>()
                        .map_err(d("cuEventRecord"))?;
                    let mut t = 0.0f64;
                    for (s, e) in starts.iter().zip(&ends) {
                        t = t.max(s.elapsed_ms(e).map_err(d("cuEventElapsedTime"))? as f64 * 1e-3);
                    }
                    times.push(t);
                }
                let st = Stat::of(times);
                let algbw = size as f64 / st.median_secs / 1e9;
                groups.push(Timing {
                    time_us: st.median_secs * 1e6,
                    algbw_gbps: algbw,
                    busbw_gbps: algbw * busbw_factor(c.name(), nranks as u32),
                    wrong: None,
                });
            }
            rows.push(Row {
                size_bytes: size,
                count: (count * per_rank_div) as u64,
                dtype: "float".into(),
                redop: if c == Collective::AllGather || c == Collective::Broadcast {
                    "none".into()
                } else {
                    "sum".into()
                },
                root: if c == Collective::Broadcast { 0 } else { -1 },
                out_of_place: groups.first().copied(),
                in_place: groups.get(1).copied(),
            });
        }
        let avg = rows
            .iter()
            .filter_map(|r| r.in_place.map(|t| t.busbw_gbps))
            .sum::<f64>()
            / rows.len().max(1) as f64;
        runs.push(NcclTestsRun {
            collective: Some(c.name().into()),
            nccl_version: nccl.version().ok(),
            gpus_per_process: Some(ctxs.len() as u32),
            devices: devices
                .iter()
                .enumerate()
                .map(|(i, dv)| RankDevice {
                    rank: if launch.world_size > 1 {
                        launch.rank
                    } else {
                        i as u32
                    },
                    host: host.into(),
                    device: dv.ordinal as u32,
                    name: dv.name.clone(),
                })
                .collect(),
            rows,
            avg_busbw_gbps: Some(avg),
        });
    }
    for r in &ranks {
        // SAFETY: each communicator came from init_* above and is not used after this.
        unsafe { nccl.destroy(r.comm) };
    }
    Ok(runs)
}

/// Runs every enabled measurement. In a multi-process launch this process measures its own
/// GPU (`LOCAL_RANK`) and joins the NCCL communicator of all ranks.
pub fn run(
    o: &Options,
    launch: &Launch,
    nccl: Option<&Nccl>,
    cublas: Option<&Cublas>,
    log: &mut dyn FnMut(&str),
) -> R<GpuReport> {
    let count = CudaContext::device_count().map_err(d("cuDeviceGetCount"))? as usize;
    let ordinals: Vec<usize> = if launch.world_size > 1 {
        vec![launch.local_rank as usize]
    } else {
        (0..count).collect()
    };
    if ordinals.iter().any(|&o| o >= count) {
        return Err(format!(
            "LOCAL_RANK {} but only {count} GPUs are visible",
            launch.local_rank
        ));
    }
    let ctxs: Vec<Arc<CudaContext>> = ordinals
        .iter()
        .map(|&i| CudaContext::new(i).map_err(d("cuCtxCreate")))
        .collect::<R<_>>()?;
    for c in &ctxs {
        // SAFETY: this program orders its own work with explicit events.
        unsafe { c.disable_event_tracking() };
    }
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown-host".into());
    let devices: Vec<DeviceInfo> = ctxs.iter().map(device_info).collect::<R<_>>()?;
    let mut report = GpuReport {
        host: host.clone(),
        driver_version: driver_version()?,
        cublas_library: cublas.map(|c| c.library.clone()),
        cublas_version: cublas.and_then(|c| c.version().ok()),
        nccl_library: nccl.map(|n| n.library.clone()),
        nccl_version: nccl.and_then(|n| n.version().ok()),
        launch: format!(
            "{} rank {} of {}",
            launch.launcher, launch.rank, launch.world_size
        ),
        devices: devices.clone(),
        copies: Vec::new(),
        p2p: Vec::new(),
        gemms: Vec::new(),
        layer_gemms: Vec::new(),
        collectives: Vec::new(),
    };
    if o.copies {
        log("copy bandwidth (H2D, D2H, D2D)");
        for c in &ctxs {
            c.bind_to_thread().map_err(d("cuCtxSetCurrent"))?;
            report.copies.extend(copies(c, o)?);
        }
    }
    if o.p2p && ctxs.len() > 1 {
        log("P2P bandwidth and latency matrix");
        report.p2p = p2p(&ctxs, o)?;
    }
    if o.gemm || !o.layers.is_empty() {
        match cublas {
            Some(blas) => {
                ctxs[0].bind_to_thread().map_err(d("cuCtxSetCurrent"))?;
                if o.gemm {
                    log("cuBLAS GEMM grid");
                    report.gemms = gemms(blas, &ctxs[0], o)?;
                }
                if !o.layers.is_empty() {
                    report.layer_gemms = layer_gemms(blas, &ctxs[0], o, log)?;
                }
            }
            None => log("cuBLAS not found: GEMM grid and layer GEMMs skipped"),
        }
    }
    if o.nccl {
        match nccl {
            Some(n) => {
                log("NCCL collectives");
                report.collectives = collectives(n, &ctxs, launch, o, &host, &devices)?;
            }
            None => log("NCCL not found (libnccl.so.2 / libnccl.so): collectives skipped"),
        }
    }
    Ok(report)
}
