//! What every kernel probe shares: all visible GPUs of one host driven from one process (one
//! host thread per GPU, like one PE per GPU), with peer access between them and a fake
//! symmetric heap, the channels and team descriptors of `crates/nvshmem/src/kernels/PROTOCOL.md`,
//! the host-mapped abort word and status record, and NVRTC compilation exactly as the library
//! does it (`prefix + ops.cuh + common.cuh + <kernel>.cu`, PTX for the device's `compute_XY`).
//!
//! The fake heap: one `cuMemAlloc` per GPU of the same size; an object at heap offset `o` lives
//! at `heap_base[g] + o` on every GPU `g`, so `off[j] = heap_base[j] - heap_base[me]` reaches a
//! peer's copy of any local symmetric address, as `nvshmem_ptr` would.
//!
//! Typical use: [`Node::new`], [`Node::alloc`] buffers and [`Node::channel`]s, compile with
//! [`compile_all`] and [`Gpu::load`], then [`Node::on_each`] runs one closure per GPU on its
//! own thread (context bound), where the closure builds its [`NvrTeam`] with [`Node::team`] and
//! launches with [`launch`].
use std::ffi::c_void;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier, Mutex};

use anyhow::{anyhow, bail, Context, Result};
use cudarc::driver::sys;
use cudarc::driver::{CudaContext, CudaFunction, CudaStream, DeviceRepr};
use cudarc::nvrtc::{CompileError, CompileOptions, Ptx};

// ---- the protocol's constants and team descriptor -------------------------------------------

/// Most PEs a fast-path team may have (`NVR_MAX_TEAM`).
pub const MAX_TEAM: usize = 8;
/// Most blocks one launch on a channel may have (`NVR_MAX_BLOCKS`).
pub const MAX_BLOCKS: usize = 512;
/// Most blocks an LL launch may have (`NVR_LL_BLOCKS`).
pub const LL_BLOCKS: usize = 8;
/// Bytes of a channel before its LL area (`NVR_CHAN_HEADER`): epoch, arrive, depart.
pub const CHAN_HEADER: usize = 4 * MAX_BLOCKS * (1 + 2 * MAX_TEAM);

/// The last live epoch (`NVR_EPOCH_LAST`): live epochs are 1 ..= EPOCH_LAST (PROTOCOL.md,
/// "Epochs").
pub const EPOCH_LAST: u32 = 0xFFFF_FFFE;

/// The epoch of the run after the one of epoch `e` (`nvr_next_epoch`): 0 (a zeroed channel)
/// and 0xFFFFFFFF are never live, so a zeroed flag never passes for a run and consecutive
/// runs alternate parity across the wrap.
pub fn next_epoch(e: u32) -> u32 {
    if e >= EPOCH_LAST {
        1
    } else {
        e + 1
    }
}

/// Byte offsets in a channel (PROTOCOL.md, "Channels").
pub const CHAN_EPOCH: usize = 0;
pub const CHAN_ARRIVE: usize = 4 * MAX_BLOCKS;
pub const CHAN_DEPART: usize = 4 * MAX_BLOCKS * (1 + MAX_TEAM);

/// `status[0]` codes.
pub const FAIL_ABORT: u32 = 1;
pub const FAIL_TIMEOUT: u32 = 2;
pub const FAIL_LIMITS: u32 = 3;
/// `status[3]` codes: what was waited for.
pub const WAIT_ARRIVE: u32 = 1;
pub const WAIT_DEPART: u32 = 2;
pub const WAIT_LL: u32 = 3;
pub const WAIT_ACK: u32 = 4;

/// Bytes of a channel whose LL regions hold `ll_bytes` each (`nvr_chan_bytes`).
pub fn chan_bytes(ll_bytes: u32) -> usize {
    CHAN_HEADER + 2 * MAX_TEAM * LL_BLOCKS * ll_bytes as usize
}

/// `struct nvr_team` of common.cuh, passed to every kernel by value.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NvrTeam {
    /// Add to a local symmetric address to get team PE j's copy (`off[me] == 0`).
    pub off: [i64; MAX_TEAM],
    /// Team size, 1..=MAX_TEAM.
    pub n: i32,
    /// This PE's index in the team.
    pub me: i32,
    /// Local device address of this (team, stream)'s channel.
    pub chan: u64,
    /// LL bytes of one (parity, peer, block) region.
    pub ll_bytes: u32,
    pub pad_: u32,
    /// Device address of the host-mapped abort word.
    pub abort: u64,
    /// Device address of the host-mapped status record (4 words).
    pub status: u64,
    /// 0: wait for ever (until abort).
    pub timeout_ns: u64,
}

// SAFETY: plain data with the C layout of `struct nvr_team` (repr(C), no padding the C side
// lacks; `team_layout_matches_c` checks the size and field offsets).
unsafe impl DeviceRepr for NvrTeam {}

#[cfg(test)]
mod epoch_tests {
    use super::*;

    #[test]
    fn epochs_skip_zero_and_alternate_parity_across_the_wrap() {
        assert_eq!(next_epoch(0), 1);
        assert_eq!(next_epoch(7), 8);
        assert_eq!(next_epoch(EPOCH_LAST - 1), EPOCH_LAST);
        assert_eq!(next_epoch(EPOCH_LAST), 1);
        // EPOCH_LAST is even and 1 odd: the LL regions (by e & 1) still alternate.
        assert_eq!(EPOCH_LAST & 1, 0);
        // Wrap-safe order holds across the wrap.
        assert!((next_epoch(EPOCH_LAST).wrapping_sub(EPOCH_LAST) as i32) > 0);
    }
}

// ---- kernel sources, types and operators ----------------------------------------------------

/// The operators header (combine, pre and post functions).
pub const OPS_CUH: &str = include_str!("../../nvshmem/src/kernels/ops.cuh");
/// The protocol header.
pub const COMMON_CUH: &str = include_str!("../../nvshmem/src/kernels/common.cuh");

/// The complete source of one instantiation: `prefix + ops.cuh + common.cuh + kernel`.
pub fn source(prefix: &str, kernel: &str) -> String {
    format!("{prefix}{OPS_CUH}\n{COMMON_CUH}\n{kernel}")
}

/// Element types, as `crates/nvshmem/src/kernels/types.rs` has them (its `KernelType`; the
/// prefix below mirrors its `prefix()`, so keep the two in step).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Ty {
    F32,
    F64,
    F16,
    BF16,
    I8,
    I16,
    I32,
    I64,
    U8,
    U16,
    U32,
    U64,
    F8E4M3,
    F8E5M2,
    Bool,
}

impl Ty {
    pub const ALL: [Ty; 15] = [
        Ty::F32,
        Ty::F64,
        Ty::F16,
        Ty::BF16,
        Ty::I8,
        Ty::I16,
        Ty::I32,
        Ty::I64,
        Ty::U8,
        Ty::U16,
        Ty::U32,
        Ty::U64,
        Ty::F8E4M3,
        Ty::F8E5M2,
        Ty::Bool,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Ty::F32 => "f32",
            Ty::F64 => "f64",
            Ty::F16 => "f16",
            Ty::BF16 => "bf16",
            Ty::I8 => "i8",
            Ty::I16 => "i16",
            Ty::I32 => "i32",
            Ty::I64 => "i64",
            Ty::U8 => "u8",
            Ty::U16 => "u16",
            Ty::U32 => "u32",
            Ty::U64 => "u64",
            Ty::F8E4M3 => "f8e4m3",
            Ty::F8E5M2 => "f8e5m2",
            Ty::Bool => "bool8",
        }
    }

    pub fn from_name(s: &str) -> Option<Ty> {
        Ty::ALL.into_iter().find(|t| t.name() == s)
    }

    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            Ty::F64 | Ty::I64 | Ty::U64 => 8,
            Ty::F32 | Ty::I32 | Ty::U32 => 4,
            Ty::F16 | Ty::BF16 | Ty::I16 | Ty::U16 => 2,
            Ty::I8 | Ty::U8 | Ty::F8E4M3 | Ty::F8E5M2 | Ty::Bool => 1,
        }
    }

    pub fn is_float(self) -> bool {
        matches!(
            self,
            Ty::F32 | Ty::F64 | Ty::F16 | Ty::BF16 | Ty::F8E4M3 | Ty::F8E5M2
        )
    }

    pub fn is_integer(self) -> bool {
        !self.is_float() && self != Ty::Bool
    }

    pub fn is_signed(self) -> bool {
        matches!(self, Ty::I8 | Ty::I16 | Ty::I32 | Ty::I64)
    }

    /// The header the type needs, if any.
    pub fn header(self) -> Option<&'static str> {
        match self {
            Ty::F16 => Some("cuda_fp16.h"),
            Ty::BF16 => Some("cuda_bf16.h"),
            Ty::F8E4M3 | Ty::F8E5M2 => Some("cuda_fp8.h"),
            _ => None,
        }
    }

    /// (C type, accumulator type, load, store), as types.rs.
    fn ctype(self) -> (&'static str, &'static str, &'static str, &'static str) {
        const X: &str = "(x)";
        const A: &str = "(a)";
        match self {
            Ty::F32 => ("float", "float", X, A),
            Ty::F64 => ("double", "double", X, A),
            Ty::F16 => ("__half", "float", "__half2float(x)", "__float2half_rn(a)"),
            Ty::BF16 => (
                "__nv_bfloat16",
                "float",
                "__bfloat162float(x)",
                "__float2bfloat16_rn(a)",
            ),
            Ty::F8E4M3 => ("__nv_fp8_e4m3", "float", "((float)(x))", "__nv_fp8_e4m3(a)"),
            Ty::F8E5M2 => ("__nv_fp8_e5m2", "float", "((float)(x))", "__nv_fp8_e5m2(a)"),
            Ty::I8 => ("signed char", "long long", X, A),
            Ty::I16 => ("short", "long long", X, A),
            Ty::I32 => ("int", "long long", X, A),
            Ty::I64 => ("long long", "long long", X, A),
            Ty::U8 => ("unsigned char", "unsigned long long", X, A),
            Ty::U16 => ("unsigned short", "unsigned long long", X, A),
            Ty::U32 => ("unsigned int", "unsigned long long", X, A),
            Ty::U64 => ("unsigned long long", "unsigned long long", X, A),
            Ty::Bool => (
                "unsigned char",
                "unsigned int",
                "((unsigned int)((x) != 0))",
                "((unsigned char)((a) != 0))",
            ),
        }
    }

    /// The `#include`s and `#define`s that instantiate a kernel source for this type.
    pub fn prefix(self) -> String {
        let (c, acc, load, store) = self.ctype();
        let mut s = String::new();
        if let Some(h) = self.header() {
            s += &format!("#include <{h}>\n");
        }
        s += &format!(
            "#define NVR_T {c}\n#define NVR_ACC {acc}\n#define NVR_LOAD(x) {load}\n#define NVR_STORE(a) {store}\n#define NVR_IS_FLOAT {}\n",
            self.is_float() as u8
        );
        s
    }
}

/// Reduction operators (`NVR_OP_*` of ops.cuh).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Op {
    Sum,
    Min,
    Max,
    And,
    Or,
    Avg,
    PreMulSum,
    Prod,
}

impl Op {
    pub const ALL: [Op; 8] = [
        Op::Sum,
        Op::Min,
        Op::Max,
        Op::And,
        Op::Or,
        Op::Avg,
        Op::PreMulSum,
        Op::Prod,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Op::Sum => "sum",
            Op::Min => "min",
            Op::Max => "max",
            Op::And => "and",
            Op::Or => "or",
            Op::Avg => "avg",
            Op::PreMulSum => "premulsum",
            Op::Prod => "prod",
        }
    }

    pub fn from_name(s: &str) -> Option<Op> {
        Op::ALL.into_iter().find(|o| o.name() == s)
    }

    pub fn define(self) -> &'static str {
        match self {
            Op::Sum => "NVR_OP_SUM",
            Op::Min => "NVR_OP_MIN",
            Op::Max => "NVR_OP_MAX",
            Op::And => "NVR_OP_AND",
            Op::Or => "NVR_OP_OR",
            Op::Avg => "NVR_OP_AVG",
            Op::PreMulSum => "NVR_OP_PREMULSUM",
            Op::Prod => "NVR_OP_PROD",
        }
    }

    /// As types.rs's `ReduceOp::supports`, plus prod for every number type.
    pub fn supports(self, t: Ty) -> bool {
        match self {
            Op::And | Op::Or => !t.is_float(),
            Op::Min | Op::Max => true,
            Op::Sum | Op::Avg | Op::PreMulSum | Op::Prod => t != Ty::Bool,
        }
    }

    /// Every (type, operator) pair the kernels implement.
    pub fn pairs() -> Vec<(Ty, Op)> {
        let mut v = Vec::new();
        for t in Ty::ALL {
            for op in Op::ALL {
                if op.supports(t) {
                    v.push((t, op));
                }
            }
        }
        v
    }
}

/// The prefix of a reduction instantiation: the type's prefix and `#define NVR_OP`.
pub fn reduce_prefix(t: Ty, op: Op) -> String {
    format!("{}#define NVR_OP {}\n", t.prefix(), op.define())
}

// ---- NVRTC ----------------------------------------------------------------------------------

/// Names a folder holding `cuda_fp16.h`, `cuda_bf16.h` and `cuda_fp8.h`, searched first.
pub const INCLUDE_ENV: &str = "NVSHMEM_RS_CUDA_INCLUDE";

/// Whether libnvrtc can be loaded (cudarc panics on first use otherwise).
pub fn nvrtc_available() -> Result<()> {
    // SAFETY: only tries to dlopen libnvrtc under cudarc's candidate names.
    if unsafe { cudarc::nvrtc::sys::is_culib_present() } {
        Ok(())
    } else {
        bail!("libnvrtc (CUDA 13) could not be loaded: put its folder on LD_LIBRARY_PATH (here: `. scripts/setup.sh`)")
    }
}

/// Whether libcuda can be loaded.
pub fn driver_available() -> Result<()> {
    // SAFETY: only tries to dlopen libcuda under cudarc's candidate names.
    if unsafe { cudarc::driver::sys::is_culib_present() } {
        Ok(())
    } else {
        bail!("libcuda could not be loaded: no NVIDIA driver on this machine")
    }
}

/// The first folder with the fp16, bf16 and fp8 headers, tried in the library's order:
/// `$NVSHMEM_RS_CUDA_INCLUDE`, `$CUDA_HOME/include`, `$CUDA_PATH/include`,
/// `/usr/local/cuda/include`, `../include` beside every `LD_LIBRARY_PATH` entry.
pub fn cuda_include_dir() -> Result<PathBuf> {
    let mut v = Vec::new();
    if let Some(p) = std::env::var_os(INCLUDE_ENV) {
        v.push(PathBuf::from(p));
    }
    for var in ["CUDA_HOME", "CUDA_PATH"] {
        if let Some(p) = std::env::var_os(var) {
            v.push(Path::new(&p).join("include"));
        }
    }
    v.push(PathBuf::from("/usr/local/cuda/include"));
    if let Some(paths) = std::env::var_os("LD_LIBRARY_PATH") {
        for dir in std::env::split_paths(&paths) {
            if let Some(parent) = dir.parent() {
                v.push(parent.join("include"));
            }
        }
    }
    v.iter()
        .find(|d| {
            ["cuda_fp16.h", "cuda_bf16.h", "cuda_fp8.h"]
                .iter()
                .all(|h| d.join(h).is_file())
        })
        .cloned()
        .ok_or_else(|| {
            anyhow!(
                "cuda_fp16.h, cuda_bf16.h and cuda_fp8.h are in none of {v:?}; set {INCLUDE_ENV}"
            )
        })
}

/// One instantiation to compile: a name for logs, its complete source, and whether it needs
/// the CUDA headers.
#[derive(Debug, Clone)]
pub struct Job {
    pub name: String,
    pub src: String,
    pub headers: bool,
}

/// Compiles one source to PTX for `arch` (`compute_90`) as the library does (`--std=c++17`,
/// the header folder when needed).
pub fn compile(job: &Job, arch: &str) -> Result<Ptx> {
    nvrtc_available()?;
    let mut opts = CompileOptions {
        name: Some(format!("{}.cu", job.name)),
        options: vec![format!("--gpu-architecture={arch}"), "--std=c++17".into()],
        ..Default::default()
    };
    if job.headers {
        opts.include_paths
            .push(cuda_include_dir()?.to_string_lossy().into_owned());
    }
    cudarc::nvrtc::compile_ptx_with_opts(&job.src, opts).map_err(|e| match e {
        CompileError::CompileError { log, options, .. } => anyhow!(
            "NVRTC failed on {}:\n{}\n(options: {})",
            job.name,
            log.to_string_lossy().trim_end(),
            options.join(" ")
        ),
        other => anyhow!("NVRTC failed on {}: {other}", job.name),
    })
}

/// Compiles every job, on as many threads as the machine has cores; the PTX in job order.
pub fn compile_all(jobs: &[Job], arch: &str) -> Result<Vec<Ptx>> {
    let threads = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .min(jobs.len().max(1));
    let next = std::sync::atomic::AtomicUsize::new(0);
    let out: Vec<Mutex<Option<Result<Ptx>>>> = jobs.iter().map(|_| Mutex::new(None)).collect();
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                if i >= jobs.len() {
                    break;
                }
                let r = compile(&jobs[i], arch);
                *out[i].lock().unwrap_or_else(|p| p.into_inner()) = Some(r);
            });
        }
    });
    out.into_iter()
        .map(|m| {
            m.into_inner()
                .unwrap_or_else(|p| p.into_inner())
                .unwrap_or_else(|| Err(anyhow!("not compiled")))
        })
        .collect()
}

// ---- driver helpers -------------------------------------------------------------------------

/// Turns a driver status into a Result naming the call.
pub fn ck(r: sys::CUresult, what: &str) -> Result<()> {
    r.result().map_err(|e| anyhow!("{what}: {e:?}"))
}

/// A kernel argument: the address of a value that lives until the launch call returns.
pub fn arg<T>(x: &T) -> *mut c_void {
    x as *const T as *mut c_void
}

/// Enqueues `f` on `stream` with a 1-D grid (cuLaunchKernel, none of cudarc's bookkeeping).
///
/// # Safety
/// `args` must point at values matching the kernel's parameters, in order, and every address
/// they carry must be valid for what the kernel does with it until the kernel has finished.
pub unsafe fn launch(
    f: &CudaFunction,
    stream: &CudaStream,
    grid: u32,
    block: u32,
    args: &mut [*mut c_void],
) -> Result<()> {
    // SAFETY: the caller guarantees the arguments; the function and stream are live.
    let r = unsafe {
        sys::cuLaunchKernel(
            f.cu_function(),
            grid,
            1,
            1,
            block,
            1,
            1,
            0,
            stream.cu_stream(),
            args.as_mut_ptr(),
            std::ptr::null_mut(),
        )
    };
    ck(r, "cuLaunchKernel")
}

/// Copies host bytes to a device address on `stream` and waits for it.
pub fn htod(stream: &CudaStream, dst: u64, src: &[u8]) -> Result<()> {
    if src.is_empty() {
        return Ok(());
    }
    stream.context().bind_to_thread()?;
    // SAFETY: `dst` names at least `src.len()` device bytes (the caller's buffer); the host
    // slice lives until the stream synchronisation below.
    unsafe {
        ck(
            sys::cuMemcpyHtoDAsync_v2(
                dst,
                src.as_ptr() as *const c_void,
                src.len(),
                stream.cu_stream(),
            ),
            "cuMemcpyHtoDAsync",
        )?;
    }
    stream
        .synchronize()
        .context("cuStreamSynchronize after a copy to the device")
}

/// Copies device bytes to the host on `stream` (after the work queued before it) and waits.
pub fn dtoh(stream: &CudaStream, src: u64, dst: &mut [u8]) -> Result<()> {
    if dst.is_empty() {
        return Ok(());
    }
    stream.context().bind_to_thread()?;
    // SAFETY: `src` names at least `dst.len()` device bytes; the host slice outlives the copy
    // (synchronised below).
    unsafe {
        ck(
            sys::cuMemcpyDtoHAsync_v2(
                dst.as_mut_ptr() as *mut c_void,
                src,
                dst.len(),
                stream.cu_stream(),
            ),
            "cuMemcpyDtoHAsync",
        )?;
    }
    stream
        .synchronize()
        .context("cuStreamSynchronize after a copy to the host")
}

/// Sets device bytes on `stream` and waits.
pub fn memset(stream: &CudaStream, dst: u64, byte: u8, bytes: usize) -> Result<()> {
    if bytes == 0 {
        return Ok(());
    }
    stream.context().bind_to_thread()?;
    // SAFETY: `dst` names at least `bytes` device bytes of this context.
    unsafe {
        ck(
            sys::cuMemsetD8Async(dst, byte, bytes, stream.cu_stream()),
            "cuMemsetD8Async",
        )?;
    }
    stream
        .synchronize()
        .context("cuStreamSynchronize after a memset")
}

/// Whether the work queued on `stream` has finished (cuStreamQuery), without waiting.
pub fn stream_done(stream: &CudaStream) -> Result<bool> {
    // SAFETY: the stream is live.
    let r = unsafe { sys::cuStreamQuery(stream.cu_stream()) };
    match r {
        sys::CUresult::CUDA_SUCCESS => Ok(true),
        sys::CUresult::CUDA_ERROR_NOT_READY => Ok(false),
        other => ck(other, "cuStreamQuery").map(|_| false),
    }
}

/// Runs `f` on every GPU's thread (inside [`Node::on_each`]) as one step: every thread reaches the barrier even after an
/// error, and every thread fails the step when any did, so no thread waits for ever.
pub fn sync_step<T>(
    bar: &Barrier,
    failed: &AtomicBool,
    f: impl FnOnce() -> Result<T>,
) -> Result<T> {
    let r = f();
    if r.is_err() {
        failed.store(true, Ordering::SeqCst);
    }
    bar.wait();
    match r {
        Ok(_) if failed.load(Ordering::SeqCst) => bail!("another GPU failed this step"),
        r => r,
    }
}

// ---- the node: GPUs, heaps, host records ----------------------------------------------------

/// Bytes of one GPU's host-mapped record: the abort word at 0, status[4] at 16.
const REC_BYTES: usize = 64;

/// One GPU (one PE): its context, its heap, and its abort word and status record. With more
/// PEs than GPUs ([`Node::with_pes`]) several share a GPU and its context, each with its own
/// heap and records, as several processes share a GPU under CUDA MPS.
pub struct Gpu {
    /// Index of this PE among all (with one PE a GPU, the CUDA ordinal too).
    pub ordinal: usize,
    /// The CUDA ordinal of the GPU it runs on.
    pub device: usize,
    pub ctx: Arc<CudaContext>,
    /// Device address of this GPU's heap.
    pub heap: u64,
    /// Device address of this GPU's abort word (host-mapped).
    pub abort: u64,
    /// Device address of this GPU's status record (host-mapped, 4 words).
    pub status: u64,
    /// `compute_XY` of the device.
    pub arch: String,
}

impl Gpu {
    /// Device address of heap offset `off`.
    pub fn addr(&self, off: usize) -> u64 {
        self.heap + off as u64
    }

    /// Loads PTX into this GPU's context and looks up `names` (in that order).
    pub fn load(&self, ptx: &Ptx, names: &[&str]) -> Result<Vec<CudaFunction>> {
        let m = self
            .ctx
            .load_module(ptx.clone())
            .with_context(|| format!("cuModuleLoadData on GPU {}", self.ordinal))?;
        names
            .iter()
            .map(|n| {
                m.load_function(n)
                    .with_context(|| format!("cuModuleGetFunction({n}) on GPU {}", self.ordinal))
            })
            .collect()
    }
}

/// A channel: heap offset and LL region size; the same on every GPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Channel {
    pub off: usize,
    pub ll_bytes: u32,
}

impl Channel {
    pub fn bytes(&self) -> usize {
        chan_bytes(self.ll_bytes)
    }
}

/// All visible GPUs of this host, with peer access between every pair and a heap each.
pub struct Node {
    pub gpus: Vec<Gpu>,
    heap_bytes: usize,
    /// Host address of the records (one REC_BYTES slot per GPU), pinned and mapped.
    rec_host: usize,
    /// Next free heap offset (the symmetric bump allocator).
    next: Mutex<usize>,
}

impl Node {
    /// Opens the first `max_gpus` visible GPUs (all when None), enables peer access between
    /// every pair (refusing pairs that cannot), allocates a heap of `heap_bytes` on each and the
    /// host-mapped records.
    pub fn new(max_gpus: Option<usize>, heap_bytes: usize) -> Result<Node> {
        Node::with_pes(None, max_gpus, heap_bytes)
    }

    /// [`Node::new`] with `pes` PEs (default: one per GPU): PE i runs on GPU i % GPUs, so more
    /// PEs than GPUs put several on one GPU, sharing its context (one process; their kernels
    /// run side by side on their own streams, as under CUDA MPS without thread shares). Every
    /// multi-PE path of the kernels then runs on one GPU; times mean nothing there.
    pub fn with_pes(
        pes: Option<usize>,
        max_gpus: Option<usize>,
        heap_bytes: usize,
    ) -> Result<Node> {
        driver_available()?;
        let devices = CudaContext::device_count().context("cuDeviceGetCount")? as usize;
        let devices = max_gpus.map_or(devices, |m| m.min(devices));
        if devices == 0 {
            bail!("no GPU visible");
        }
        let mut dev_ctxs = Vec::new();
        for i in 0..devices {
            dev_ctxs.push(CudaContext::new(i).with_context(|| format!("context on GPU {i}"))?);
        }
        // Peer access, every ordered pair of GPUs.
        for (i, ci) in dev_ctxs.iter().enumerate() {
            ci.bind_to_thread()?;
            for (j, cj) in dev_ctxs.iter().enumerate() {
                if i == j {
                    continue;
                }
                let mut can = 0;
                ck(
                    // SAFETY: out-pointer to a local; device handles come from live contexts.
                    unsafe { sys::cuDeviceCanAccessPeer(&mut can, ci.cu_device(), cj.cu_device()) },
                    "cuDeviceCanAccessPeer",
                )?;
                if can == 0 {
                    bail!("GPU {i} cannot access GPU {j}'s memory (no peer access between them)");
                }
                // SAFETY: the current context is GPU i's; cj is a live context.
                let r = unsafe { sys::cuCtxEnablePeerAccess(cj.cu_ctx(), 0) };
                if r != sys::CUresult::CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED {
                    ck(r, "cuCtxEnablePeerAccess")?;
                }
            }
        }
        let count = pes.unwrap_or(devices);
        if count == 0 {
            bail!("0 PEs asked for");
        }
        let ctxs: Vec<(usize, Arc<CudaContext>)> = (0..count)
            .map(|p| (p % devices, dev_ctxs[p % devices].clone()))
            .collect();
        // The host records: one pinned, mapped, portable allocation.
        ctxs[0].1.bind_to_thread()?;
        let mut host: *mut c_void = std::ptr::null_mut();
        let rec_len = REC_BYTES * count;
        ck(
            // SAFETY: out-pointer to a local; a context is current.
            unsafe {
                sys::cuMemHostAlloc(
                    &mut host,
                    rec_len,
                    sys::CU_MEMHOSTALLOC_PORTABLE | sys::CU_MEMHOSTALLOC_DEVICEMAP,
                )
            },
            "cuMemHostAlloc",
        )?;
        // SAFETY: `host` holds `rec_len` bytes just allocated.
        unsafe { std::ptr::write_bytes(host as *mut u8, 0, rec_len) };
        let mut node = Node {
            gpus: Vec::new(),
            heap_bytes,
            rec_host: host as usize,
            next: Mutex::new(0),
        };
        for (i, (device, ctx)) in ctxs.into_iter().enumerate() {
            ctx.bind_to_thread()?;
            let mut heap = 0;
            ck(
                // SAFETY: out-pointer to a local; GPU i's context is current.
                unsafe { sys::cuMemAlloc_v2(&mut heap, heap_bytes) },
                "cuMemAlloc (heap)",
            )?;
            ck(
                // SAFETY: the heap was just allocated with `heap_bytes` bytes.
                unsafe { sys::cuMemsetD8_v2(heap, 0, heap_bytes) },
                "cuMemsetD8 (heap)",
            )?;
            let mut rec = 0;
            ck(
                // SAFETY: `host` is a DEVICEMAP allocation; out-pointer to a local.
                unsafe {
                    sys::cuMemHostGetDevicePointer_v2(
                        &mut rec,
                        (host as *mut u8).add(REC_BYTES * i) as *mut c_void,
                        0,
                    )
                },
                "cuMemHostGetDevicePointer",
            )?;
            let (major, minor) = ctx.compute_capability()?;
            node.gpus.push(Gpu {
                ordinal: i,
                device,
                ctx,
                heap,
                abort: rec,
                status: rec + 16,
                arch: format!("compute_{major}{minor}"),
            });
        }
        for g in &node.gpus {
            g.ctx.synchronize()?;
        }
        Ok(node)
    }

    /// Number of GPUs.
    pub fn n(&self) -> usize {
        self.gpus.len()
    }

    pub fn heap_bytes(&self) -> usize {
        self.heap_bytes
    }

    /// Allocates `bytes` at the same heap offset on every GPU (aligned to 256); the offset.
    pub fn alloc(&self, bytes: usize) -> Result<usize> {
        let mut next = self.next.lock().unwrap_or_else(|p| p.into_inner());
        let off = next.next_multiple_of(256);
        if off + bytes > self.heap_bytes {
            bail!(
                "fake heap exhausted: {} bytes asked at offset {off}, heap of {}",
                bytes,
                self.heap_bytes
            );
        }
        *next = off + bytes;
        Ok(off)
    }

    /// Allocates a channel with LL regions of `ll_bytes` (a multiple of 16), zeroed on every
    /// GPU.
    pub fn channel(&self, ll_bytes: u32) -> Result<Channel> {
        if ll_bytes == 0 || ll_bytes % 16 != 0 {
            bail!("ll_bytes {ll_bytes} is not a positive multiple of 16");
        }
        let ch = Channel {
            off: self.alloc(chan_bytes(ll_bytes))?,
            ll_bytes,
        };
        self.zero(ch.off, ch.bytes())?;
        Ok(ch)
    }

    /// Zeroes `bytes` at heap offset `off` on every GPU, synchronously (no kernel may use them
    /// meanwhile).
    pub fn zero(&self, off: usize, bytes: usize) -> Result<()> {
        for g in &self.gpus {
            g.ctx.bind_to_thread()?;
            ck(
                // SAFETY: [off, off + bytes) lies in g's heap (allocated by `alloc`).
                unsafe { sys::cuMemsetD8_v2(g.addr(off), 0, bytes) },
                "cuMemsetD8",
            )?;
            g.ctx.synchronize()?;
        }
        Ok(())
    }

    /// The team descriptor of PE `members[me]` for the team `members` (GPU indices in team
    /// order), on channel `ch`.
    pub fn team(&self, members: &[usize], me: usize, ch: Channel, timeout_ns: u64) -> NvrTeam {
        assert!(!members.is_empty() && members.len() <= MAX_TEAM && me < members.len());
        let g = &self.gpus[members[me]];
        let mut off = [0i64; MAX_TEAM];
        for (j, &m) in members.iter().enumerate() {
            off[j] = self.gpus[m].heap.wrapping_sub(g.heap) as i64;
        }
        NvrTeam {
            off,
            n: members.len() as i32,
            me: me as i32,
            chan: g.addr(ch.off),
            ll_bytes: ch.ll_bytes,
            pad_: 0,
            abort: g.abort,
            status: g.status,
            timeout_ns,
        }
    }

    /// The team of every GPU in order, as seen by GPU `me`.
    pub fn world(&self, me: usize, ch: Channel, timeout_ns: u64) -> NvrTeam {
        let all: Vec<usize> = (0..self.n()).collect();
        self.team(&all, me, ch, timeout_ns)
    }

    fn rec(&self, gpu: usize) -> *mut u32 {
        (self.rec_host + REC_BYTES * gpu) as *mut u32
    }

    /// Sets (or clears) every GPU's abort word.
    pub fn set_abort(&self, v: u32) {
        for i in 0..self.n() {
            // SAFETY: the record lives as long as self; volatile because GPUs read it.
            unsafe { std::ptr::write_volatile(self.rec(i), v) };
        }
    }

    /// GPU `gpu`'s status record: [code, peer, epoch, what].
    pub fn status(&self, gpu: usize) -> [u32; 4] {
        let mut s = [0u32; 4];
        for (k, w) in s.iter_mut().enumerate() {
            // SAFETY: words 4..8 of the record; volatile because GPUs write them.
            *w = unsafe { std::ptr::read_volatile(self.rec(gpu).add(4 + k)) };
        }
        s
    }

    /// Clears every status record.
    pub fn clear_status(&self) {
        for i in 0..self.n() {
            for k in 0..4 {
                // SAFETY: as in `status`.
                unsafe { std::ptr::write_volatile(self.rec(i).add(4 + k), 0) };
            }
        }
    }

    /// Runs `f(gpu index, gpu)` on one thread per GPU, each with its context bound, and
    /// returns the results in GPU order (the first error if any failed).
    pub fn on_each<R: Send>(&self, f: impl Fn(usize, &Gpu) -> Result<R> + Sync) -> Result<Vec<R>> {
        let results: Vec<Result<R>> = std::thread::scope(|s| {
            let hs: Vec<_> = self
                .gpus
                .iter()
                .enumerate()
                .map(|(i, g)| {
                    let f = &f;
                    s.spawn(move || {
                        g.ctx.bind_to_thread()?;
                        f(i, g)
                    })
                })
                .collect();
            hs.into_iter()
                .map(|h| {
                    h.join()
                        .unwrap_or_else(|_| Err(anyhow!("a GPU thread panicked")))
                })
                .collect()
        });
        results
            .into_iter()
            .enumerate()
            .map(|(i, r)| r.with_context(|| format!("GPU {i}")))
            .collect()
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        for g in &self.gpus {
            // Errors are ignored: the process is ending and nothing else uses these.
            let _ = g.ctx.bind_to_thread();
            let _ = g.ctx.synchronize();
            // SAFETY: the heap was allocated in this context and no work uses it any more.
            let _ = unsafe { sys::cuMemFree_v2(g.heap) };
        }
        if let Some(g) = self.gpus.first() {
            let _ = g.ctx.bind_to_thread();
            // SAFETY: allocated by cuMemHostAlloc in `new`; no GPU uses it any more.
            let _ = unsafe { sys::cuMemFreeHost(self.rec_host as *mut c_void) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn team_layout_matches_c() {
        // struct nvr_team: off[8] at 0, n 64, me 68, chan 72, ll_bytes 80, pad_ 84, abort 88,
        // status 96, timeout_ns 104; 112 bytes, 8-aligned.
        assert_eq!(std::mem::size_of::<NvrTeam>(), 112);
        assert_eq!(std::mem::align_of::<NvrTeam>(), 8);
        assert_eq!(std::mem::offset_of!(NvrTeam, n), 64);
        assert_eq!(std::mem::offset_of!(NvrTeam, chan), 72);
        assert_eq!(std::mem::offset_of!(NvrTeam, ll_bytes), 80);
        assert_eq!(std::mem::offset_of!(NvrTeam, abort), 88);
        assert_eq!(std::mem::offset_of!(NvrTeam, status), 96);
        assert_eq!(std::mem::offset_of!(NvrTeam, timeout_ns), 104);
    }

    #[test]
    fn channel_sizes_follow_the_protocol() {
        assert_eq!(CHAN_HEADER, 34816);
        assert_eq!(chan_bytes(65536), 34816 + 2 * 8 * 8 * 65536);
        assert!(COMMON_CUH.contains("#define NVR_MAX_TEAM 8"));
        assert!(COMMON_CUH.contains("#define NVR_MAX_BLOCKS 512"));
        assert!(COMMON_CUH.contains("#define NVR_LL_BLOCKS 8"));
    }

    #[test]
    fn pairs_cover_every_type() {
        let p = Op::pairs();
        for t in Ty::ALL {
            assert!(p.iter().any(|&(u, _)| u == t));
        }
        assert!(!Op::Prod.supports(Ty::Bool));
        assert!(Op::And.supports(Ty::Bool) && !Op::And.supports(Ty::F16));
    }
}
