//! `large`: checks and times the large-message ("direct") collectives of
//! `crates/nvshmem/src/kernels/direct.cu`, and their copy-engine variants, on every GPU of this
//! host from one process (kernel-probe's fake symmetric heap; GPU g is team PE g).
//!
//! ```text
//! large --compile-only   NVRTC-compiles every instantiation for compute_90 (needs no GPU)
//! large check            results against a host reference: every collective x type x operator,
//!                        sizes 1 element .. 64 MiB, unaligned starts, in place, root 0 and n-1,
//!                        every kernel variant and copy-engine variant, CUDA graphs replayed 100
//!                        times, and the abort/timeout paths (a 5 s watchdog sets the abort word)
//! large time             every kernel and copy-engine variant at 1, 16, 64, 128, 256 MiB, on a
//!                        stream and in a CUDA graph; the link's ceiling; a table against the
//!                        targets and NCCL last
//! large sweep            grid sizes and load depths at 16 and 128 MiB (for tuning the grid rule)
//! ```
//! Sizes are nccl-tests' (the larger of one PE's input and output); bus bandwidth uses the
//! factors of this repository's nvshmem-perf: all_reduce 2(n-1)/n; reduce_scatter, fcollect,
//! alltoall, gather, scatter (n-1)/n; broadcast, reduce 1 (so for gather and scatter it is the
//! bytes crossing the root's link per second).
#[path = "large/reference.rs"]
mod reference;

use std::collections::HashMap;
use std::ffi::{c_void, CString};
use std::process::ExitCode;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use clap::{Parser, Subcommand};
use cudarc::driver::{sys, CudaEvent, CudaFunction, CudaGraph, CudaStream};
use cudarc::nvrtc::Ptx;
use kernel_probe::{
    arg, ck, compile_all, dtoh, htod, launch, reduce_prefix, source, stream_done, sync_step,
    Channel, Job, Node, NvrTeam, Op, Ty,
};
use reference::{Expect, Rng};

const DIRECT_CU: &str = include_str!("../../../nvshmem/src/kernels/direct.cu");

/// A plain copy kernel for the link's ceiling (no flags, no protocol).
const PROBE_CU: &str = r#"
extern "C" __global__ void __launch_bounds__(512, 1)
probe_copy(const uint4 *s, uint4 *d, unsigned long long n) {
    const unsigned long long G = (unsigned long long)gridDim.x * blockDim.x;
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += 8 * G) {
        uint4 r[8];
#pragma unroll
        for (int u = 0; u < 8; ++u)
            if (i + u * G < n) r[u] = s[i + u * G];
#pragma unroll
        for (int u = 0; u < 8; ++u)
            if (i + u * G < n) d[i + u * G] = r[u];
    }
}
"#;

/// Threads per block of every direct kernel (`NVR_D_THREADS`).
const THREADS: u32 = 512;
/// Most blocks of a direct launch.
const MAX_GRID: u64 = 128;
/// Bytes a PE moves per block before another block is added.
const GRID_UNIT: u64 = 16 << 10;
/// Bytes kept untouched around every buffer, checked after each call.
const GUARD: u64 = 4096;
/// Largest size `time` runs (nccl-tests' bytes).
const MAX_TIME_BYTES: u64 = 256 << 20;
/// How long a call may run before the watchdog sets the abort word.
const WATCHDOG: Duration = Duration::from_secs(5);
const MIB: u64 = 1 << 20;

// ---- collectives and the grid rule ----------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Coll {
    AllReduce,
    ReduceScatter,
    Reduce,
    Broadcast,
    Fcollect,
    Alltoall,
    Gather,
    Scatter,
}

impl Coll {
    const ALL: [Coll; 8] = [
        Coll::AllReduce,
        Coll::ReduceScatter,
        Coll::Reduce,
        Coll::Broadcast,
        Coll::Fcollect,
        Coll::Alltoall,
        Coll::Gather,
        Coll::Scatter,
    ];

    fn name(self) -> &'static str {
        match self {
            Coll::AllReduce => "all_reduce",
            Coll::ReduceScatter => "reduce_scatter",
            Coll::Reduce => "reduce",
            Coll::Broadcast => "broadcast",
            Coll::Fcollect => "fcollect",
            Coll::Alltoall => "alltoall",
            Coll::Gather => "gather",
            Coll::Scatter => "scatter",
        }
    }

    fn is_reduction(self) -> bool {
        matches!(self, Coll::AllReduce | Coll::ReduceScatter | Coll::Reduce)
    }

    fn rooted(self) -> bool {
        matches!(
            self,
            Coll::Reduce | Coll::Broadcast | Coll::Gather | Coll::Scatter
        )
    }

    /// Index of the kernel in its module's function list.
    fn fn_index(self) -> usize {
        match self {
            Coll::AllReduce | Coll::Broadcast => 0,
            Coll::ReduceScatter | Coll::Fcollect => 1,
            Coll::Reduce | Coll::Alltoall => 2,
            Coll::Gather => 3,
            Coll::Scatter => 4,
        }
    }

    fn busbw_factor(self, n: usize) -> f64 {
        let n = n.max(1) as f64;
        match self {
            Coll::AllReduce => 2.0 * (n - 1.0) / n,
            Coll::Broadcast | Coll::Reduce => 1.0,
            _ => (n - 1.0) / n,
        }
    }

    /// The kernel's size argument (elements for reductions, bytes otherwise) for nccl-tests'
    /// `bytes`, rounded down as nccl-tests rounds.
    fn size_for(self, bytes: u64, es: u64, n: usize) -> u64 {
        let n = n as u64;
        match self {
            Coll::AllReduce | Coll::Reduce => bytes / es,
            Coll::ReduceScatter => bytes / es / n,
            Coll::Broadcast => bytes,
            Coll::Fcollect | Coll::Alltoall | Coll::Gather | Coll::Scatter => bytes / n,
        }
    }

    /// nccl-tests' bytes of a call whose kernel size argument is `size`.
    fn nccl_bytes(self, size: u64, es: u64, n: usize) -> u64 {
        let n = n as u64;
        match self {
            Coll::AllReduce | Coll::Reduce => size * es,
            Coll::ReduceScatter => size * es * n,
            Coll::Broadcast => size,
            Coll::Fcollect | Coll::Alltoall | Coll::Gather | Coll::Scatter => size * n,
        }
    }

    /// Bytes of one PE's (src, dst) for kernel size `size`.
    fn extents(self, size: u64, es: u64, n: usize) -> (u64, u64) {
        let n = n as u64;
        let b = size * es;
        match self {
            Coll::AllReduce | Coll::Reduce | Coll::Broadcast => (b, b),
            Coll::ReduceScatter | Coll::Scatter => (n * b, b),
            Coll::Fcollect | Coll::Gather => (b, n * b),
            Coll::Alltoall => (n * b, n * b),
        }
    }
}

/// The grid of a direct launch: a pure function of (collective, bytes, n), the same on every
/// member (the rule of direct.cu's header). `bytes` is the kernel's count times the element
/// size for reductions, its `bytes` argument otherwise.
///
/// W = the bytes each PE moves over its links: all_reduce and reduce bytes / n (its share),
/// reduce_scatter bytes (one block), broadcast bytes, fcollect, alltoall, gather and scatter
/// bytes * max(n - 1, 1); grid = clamp(ceil(W / 16 KiB), 1, 128).
fn direct_grid(c: Coll, bytes: u64, n: usize) -> u32 {
    let n = n.max(1) as u64;
    let w = match c {
        Coll::AllReduce | Coll::Reduce => bytes / n,
        Coll::ReduceScatter | Coll::Broadcast => bytes,
        Coll::Fcollect | Coll::Alltoall | Coll::Gather | Coll::Scatter => bytes * (n - 1).max(1),
    };
    w.div_ceil(GRID_UNIT).clamp(1, MAX_GRID) as u32
}

// ---- kernel modules -------------------------------------------------------------------------

/// A compile-time variant of direct.cu (its NVR_D_* knobs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Knob {
    /// The library's choice.
    Default,
    /// fcollect, alltoall, gather, scatter load from peers (NVR_D_PULL 1).
    Pull,
    /// Broadcast: the root stores to every member (NVR_D_BCAST 1).
    BcastPush,
    /// Broadcast: every member loads from the root (NVR_D_BCAST 2).
    BcastPull,
    /// Broadcast: pull-and-forward (NVR_D_BCAST 3).
    BcastFwd,
    /// Rooted reduce: the root loads and reduces everything (NVR_D_REDUCE 1).
    RootPull,
    /// This many 16-byte loads in flight per thread (NVR_D_INFLIGHT).
    Inflight(u32),
}

impl Knob {
    fn defines(self) -> String {
        match self {
            Knob::Default => String::new(),
            Knob::Pull => "#define NVR_D_PULL 1\n".into(),
            Knob::BcastPush => "#define NVR_D_BCAST 1\n".into(),
            Knob::BcastPull => "#define NVR_D_BCAST 2\n".into(),
            Knob::BcastFwd => "#define NVR_D_BCAST 3\n".into(),
            Knob::RootPull => "#define NVR_D_REDUCE 1\n".into(),
            Knob::Inflight(k) => format!("#define NVR_D_INFLIGHT {k}\n"),
        }
    }

    fn name(self) -> String {
        match self {
            Knob::Default => "sm".into(),
            Knob::Pull => "sm-pull".into(),
            Knob::BcastPush => "sm-push".into(),
            Knob::BcastPull => "sm-bpull".into(),
            Knob::BcastFwd => "sm-fwd".into(),
            Knob::RootPull => "sm-rootpull".into(),
            Knob::Inflight(k) => format!("sm-u{k}"),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Module {
    /// nvr_direct_all_reduce, _reduce_scatter, _reduce for one (type, operator).
    Reduce(Ty, Op, Knob),
    /// The data-movement kernels and the copy-engine flag kernels.
    Move(Knob),
    /// probe_copy.
    Probe,
}

const REDUCE_FNS: [&str; 4] = [
    "nvr_direct_all_reduce",
    "nvr_direct_reduce_scatter",
    "nvr_direct_reduce",
    "nvr_direct_combine2",
];
const COMBINE2: usize = 3;
const MOVE_FNS: [&str; 7] = [
    "nvr_direct_broadcast",
    "nvr_direct_fcollect",
    "nvr_direct_alltoall",
    "nvr_direct_gather",
    "nvr_direct_scatter",
    "nvr_ce_enter",
    "nvr_ce_exit",
];
const CE_ENTER: usize = 5;
const CE_EXIT: usize = 6;

impl Module {
    fn job(self) -> Job {
        let body = DIRECT_CU;
        match self {
            Module::Reduce(t, op, k) => Job {
                name: format!("direct_{}_{}_{}", t.name(), op.name(), k.name()),
                src: source(&format!("{}{}", reduce_prefix(t, op), k.defines()), body),
                headers: t.header().is_some(),
            },
            Module::Move(k) => Job {
                name: format!("direct_move_{}", k.name()),
                src: source(&k.defines(), body),
                headers: false,
            },
            Module::Probe => Job {
                name: "probe_copy".into(),
                src: PROBE_CU.into(),
                headers: false,
            },
        }
    }

    fn functions(self) -> &'static [&'static str] {
        match self {
            Module::Reduce(..) => &REDUCE_FNS,
            Module::Move(_) => &MOVE_FNS,
            Module::Probe => &["probe_copy"],
        }
    }
}

/// The knobs whose modules `check` verifies beside the defaults (the ones `time` and `sweep`
/// run).
const REDUCE_KNOBS: [Knob; 3] = [Knob::RootPull, Knob::Inflight(4), Knob::Inflight(16)];
const MOVE_KNOBS: [Knob; 6] = [
    Knob::Default,
    Knob::Pull,
    Knob::BcastPush,
    Knob::BcastPull,
    Knob::BcastFwd,
    Knob::Inflight(16),
];
/// Types whose sum all-reduce `time` runs at 128 MiB beside f32 (the 16-bit comparison).
const TIME_TYPES: [Ty; 4] = [Ty::F16, Ty::BF16, Ty::I16, Ty::U16];

/// Every module there is.
fn all_modules() -> Vec<Module> {
    let mut v: Vec<Module> = Op::pairs()
        .into_iter()
        .map(|(t, op)| Module::Reduce(t, op, Knob::Default))
        .collect();
    v.extend(
        REDUCE_KNOBS
            .iter()
            .map(|&k| Module::Reduce(Ty::F32, Op::Sum, k)),
    );
    v.extend(MOVE_KNOBS.iter().map(|&k| Module::Move(k)));
    v.push(Module::Probe);
    v
}

/// The modules `time` and `sweep` need.
fn timing_modules() -> Vec<Module> {
    let mut v = vec![Module::Reduce(Ty::F32, Op::Sum, Knob::Default)];
    v.extend(TIME_TYPES.map(|t| Module::Reduce(t, Op::Sum, Knob::Default)));
    v.extend(
        REDUCE_KNOBS
            .iter()
            .map(|&k| Module::Reduce(Ty::F32, Op::Sum, k)),
    );
    v.extend(MOVE_KNOBS.iter().map(|&k| Module::Move(k)));
    v.push(Module::Probe);
    v
}

// ---- calls ----------------------------------------------------------------------------------

/// How a collective is carried out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Imp {
    /// The direct kernel of a module variant.
    Sm(Knob),
    /// Copy engines between the flag kernels: peer copies pushed to or pulled from peers, the
    /// local copy on a second stream.
    Ce { pull: bool },
    /// All-reduce in `chunks` pieces: per piece, the reduce-scatter kernel writes this PE's
    /// share of the piece into dst, and a second stream pushes that share to every peer by copy
    /// engine while the next piece is reduced; then the exit flag kernel. The size must divide
    /// by chunks * n.
    RsCe { chunks: u32 },
    /// Reductions of 2-PE teams by copy engine (not in place), in `chunks` pieces: a second
    /// stream pulls the peer's contribution into this PE's dst, nvr_direct_combine2 combines it
    /// with this PE's in team order, and (all_reduce) a third stream pushes the result to the
    /// peer. reduce_scatter: this PE's block; reduce: the root pulls, the other only flags.
    CeRed { chunks: u32 },
}

impl Imp {
    fn name(self) -> String {
        match self {
            Imp::Sm(k) => k.name(),
            Imp::Ce { pull } => if pull { "ce-pull" } else { "ce-push" }.into(),
            Imp::RsCe { chunks } => format!("rs+ce/{chunks}"),
            Imp::CeRed { chunks } => format!("ce-red/{chunks}"),
        }
    }
}

#[derive(Debug, Clone, Copy)]
struct Call {
    coll: Coll,
    imp: Imp,
    /// Element type and operator (reductions; ignored otherwise).
    ty: Ty,
    op: Op,
    /// The kernel's size argument: elements for reductions, bytes otherwise.
    size: u64,
    root: usize,
    scale: f64,
    /// Grid override (sweep); None: the rule.
    grid: Option<u32>,
}

impl Call {
    /// Element size: the type's for reductions, 1 otherwise.
    fn es(&self) -> u64 {
        if self.coll.is_reduction() {
            self.ty.size() as u64
        } else {
            1
        }
    }

    fn module(&self) -> Module {
        let k = match self.imp {
            Imp::Sm(k) => k,
            Imp::Ce { .. } | Imp::RsCe { .. } | Imp::CeRed { .. } => Knob::Default,
        };
        if self.coll.is_reduction() {
            Module::Reduce(self.ty, self.op, k)
        } else {
            Module::Move(k)
        }
    }

    fn label(&self) -> String {
        let mut s = format!("{} {}", self.coll.name(), self.imp.name());
        if self.coll.is_reduction() {
            s += &format!(" {} {}", self.ty.name(), self.op.name());
        }
        if self.coll.rooted() {
            s += &format!(" root {}", self.root);
        }
        s
    }
}

/// Where a call's buffers are: region A (inputs, and everything in place) and region B
/// (outputs) at fixed heap offsets, each buffer GUARD bytes in plus a misalignment.
#[derive(Debug, Clone, Copy)]
struct Place {
    sa: u64,
    da: u64,
    inplace: bool,
}

/// One copy-engine copy: (PE, heap offset) of its destination and source, and its length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Xfer {
    dst: (usize, u64),
    src: (usize, u64),
    bytes: u64,
}

/// The team size and where regions A and B are: what placing a call's buffers needs (kept
/// apart from the GPUs so the host-side logic can be tested without one).
#[derive(Debug, Clone, Copy)]
struct Layout {
    n: usize,
    ra: u64,
    rb: u64,
}

impl Layout {
    /// Heap offsets of PE g's (src, dst) for `call` placed at `p`.
    fn pointers(&self, call: &Call, p: Place, g: usize) -> (u64, u64) {
        let a = self.ra + GUARD + p.sa;
        if !p.inplace {
            return (a, self.rb + GUARD + p.da);
        }
        let blk = call.size * call.es();
        match call.coll {
            Coll::AllReduce | Coll::Reduce | Coll::Broadcast => (a, a),
            Coll::ReduceScatter => (a, a + g as u64 * blk),
            Coll::Fcollect => (a + g as u64 * blk, a),
            Coll::Gather => (a + call.root as u64 * blk, a),
            Coll::Scatter => (a, a + call.root as u64 * blk),
            Coll::Alltoall => unreachable!("alltoall has no in-place form"),
        }
    }

    /// Lengths of regions A and B that a call at `p` uses (guards included).
    fn region_lens(&self, call: &Call, p: Place) -> (u64, u64) {
        let (s, d) = call.coll.extents(call.size, call.es(), self.n);
        let up = |x: u64| x.next_multiple_of(256);
        if p.inplace {
            (up(2 * GUARD + p.sa + s.max(d)), 0)
        } else {
            (up(2 * GUARD + p.sa + s), up(2 * GUARD + p.da + d))
        }
    }

    /// The copies PE g issues for a copy-engine collective whose buffers are at heap offsets
    /// (src_h, dst_h): those that cross the link, and the local one (on the side stream).
    fn ce_copies(
        &self,
        call: &Call,
        g: usize,
        src_h: u64,
        dst_h: u64,
        pull: bool,
    ) -> (Vec<Xfer>, Option<Xfer>) {
        let n = self.n;
        let b = call.size;
        let me = g as u64;
        let root = call.root;
        let a = |j: usize, h: u64| (j, h);
        let others = || (1..n).map(move |k| (g + k) % n);
        let mut remote = Vec::new();
        let x = |d: (usize, u64), s: (usize, u64)| Xfer {
            dst: d,
            src: s,
            bytes: b,
        };
        let local_if = |d: u64, s: u64| (d != s).then(|| x(a(g, d), a(g, s)));
        let local;
        match call.coll {
            Coll::Broadcast => {
                if g == root {
                    if !pull {
                        remote.extend(others().map(|j| x(a(j, dst_h), a(g, src_h))));
                    }
                    local = local_if(dst_h, src_h);
                } else {
                    if pull {
                        remote.push(x(a(g, dst_h), a(root, src_h)));
                    }
                    local = None;
                }
            }
            Coll::Fcollect => {
                let mine = dst_h + me * b;
                let inplace = src_h == mine;
                for j in others() {
                    if pull {
                        let theirs = if inplace { dst_h + j as u64 * b } else { src_h };
                        remote.push(x(a(g, dst_h + j as u64 * b), a(j, theirs)));
                    } else {
                        remote.push(x(a(j, mine), a(g, src_h)));
                    }
                }
                local = local_if(mine, src_h);
            }
            Coll::Alltoall => {
                for j in others() {
                    let ju = j as u64;
                    if pull {
                        remote.push(x(a(g, dst_h + ju * b), a(j, src_h + me * b)));
                    } else {
                        remote.push(x(a(j, dst_h + me * b), a(g, src_h + ju * b)));
                    }
                }
                local = local_if(dst_h + me * b, src_h + me * b);
            }
            Coll::Gather => {
                if g == root {
                    if pull {
                        remote.extend(others().map(|j| x(a(g, dst_h + j as u64 * b), a(j, src_h))));
                    }
                    local = local_if(dst_h + me * b, src_h);
                } else {
                    if !pull {
                        remote.push(x(a(root, dst_h + me * b), a(g, src_h)));
                    }
                    local = None;
                }
            }
            Coll::Scatter => {
                if g == root {
                    if !pull {
                        remote.extend(others().map(|j| x(a(j, dst_h), a(g, src_h + j as u64 * b))));
                    }
                    local = local_if(dst_h, src_h + me * b);
                } else {
                    if pull {
                        remote.push(x(a(g, dst_h), a(root, src_h + me * b)));
                    }
                    local = None;
                }
            }
            Coll::AllReduce | Coll::ReduceScatter | Coll::Reduce => {
                unreachable!("no copy-engine form")
            }
        }
        (remote, local)
    }
}

// ---- the probe context ----------------------------------------------------------------------

struct Ctx {
    node: Node,
    n: usize,
    lay: Layout,
    ch: Channel,
    teams: Vec<NvrTeam>,
    streams: Vec<Arc<CudaStream>>,
    /// A second and third stream per GPU for copy-engine copies beside the kernels.
    side: Vec<Arc<CudaStream>>,
    side2: Vec<Arc<CudaStream>>,
    /// Events per GPU (no timing): fork, join, join of side2, a pulled piece, a combined piece.
    forks: Vec<CudaEvent>,
    joins: Vec<CudaEvent>,
    joins2: Vec<CudaEvent>,
    pulls: Vec<CudaEvent>,
    combs: Vec<CudaEvent>,
    funcs: HashMap<Module, Vec<Vec<CudaFunction>>>,
    /// Heap offsets of regions A and B, each `region` bytes.
    ra: u64,
    rb: u64,
    region: u64,
}

impl Ctx {
    fn new(gpus: Option<usize>, region: u64, modules: &[Module], ptx_only: bool) -> Result<Ctx> {
        let heap = 2 * region as usize + (16 << 20);
        let node = Node::new(gpus, heap)?;
        let n = node.n();
        if n > kernel_probe::MAX_TEAM {
            bail!("{n} GPUs: a team has at most {}", kernel_probe::MAX_TEAM);
        }
        let ra = node.alloc(region as usize)? as u64;
        let rb = node.alloc(region as usize)? as u64;
        // The LL area is not used by direct kernels: the smallest legal one.
        let ch = node.channel(16)?;
        let teams = (0..n).map(|g| node.world(g, ch, 0)).collect();
        let mut streams = Vec::new();
        let mut side = Vec::new();
        let mut side2 = Vec::new();
        let mut forks = Vec::new();
        let mut joins = Vec::new();
        let mut joins2 = Vec::new();
        let mut pulls = Vec::new();
        let mut combs = Vec::new();
        for g in &node.gpus {
            streams.push(g.ctx.new_stream()?);
            side.push(g.ctx.new_stream()?);
            side2.push(g.ctx.new_stream()?);
            forks.push(g.ctx.new_event(None)?);
            joins.push(g.ctx.new_event(None)?);
            joins2.push(g.ctx.new_event(None)?);
            pulls.push(g.ctx.new_event(None)?);
            combs.push(g.ctx.new_event(None)?);
        }
        let arch = node.gpus[0].arch.clone();
        let jobs: Vec<Job> = modules.iter().map(|m| m.job()).collect();
        let t0 = Instant::now();
        // SASS straight from NVRTC (ptxas on every core here), so loading costs no driver JIT
        // per module and GPU; PTX (JIT by the driver) when asked.
        let (ptx, what) = if ptx_only {
            (compile_all(&jobs, &arch)?, arch.clone())
        } else {
            let sm = arch.replace("compute_", "sm_");
            let bins = compile_all_cubin(&jobs, &sm)?;
            (bins.into_iter().map(Ptx::from_binary).collect(), sm)
        };
        println!(
            "compiled {} modules for {what} in {:.1} s",
            jobs.len(),
            t0.elapsed().as_secs_f64()
        );
        let mut funcs = HashMap::new();
        for (m, p) in modules.iter().zip(&ptx) {
            let per_gpu = node
                .gpus
                .iter()
                .map(|g| {
                    let fs = g.load(p, m.functions())?;
                    g.ctx.bind_to_thread()?;
                    for f in &fs {
                        // Loaded now, not at the first launch: a lazy load may wait for the
                        // context to go idle while a collective spins (PROTOCOL.md, Sources).
                        // SAFETY: a function of a module just loaded in this context.
                        ck(unsafe { sys::cuFuncLoad(f.cu_function()) }, "cuFuncLoad")?;
                    }
                    Ok(fs)
                })
                .collect::<Result<Vec<_>>>()?;
            funcs.insert(*m, per_gpu);
        }
        Ok(Ctx {
            node,
            n,
            lay: Layout { n, ra, rb },
            ch,
            teams,
            streams,
            side,
            side2,
            forks,
            joins,
            joins2,
            pulls,
            combs,
            funcs,
            ra,
            rb,
            region,
        })
    }

    /// Device address of heap offset `h` on GPU g.
    fn addr(&self, g: usize, h: u64) -> u64 {
        self.node.gpus[g].addr(h as usize)
    }

    fn func(&self, m: Module, g: usize, i: usize) -> Result<&CudaFunction> {
        self.funcs
            .get(&m)
            .map(|v| &v[g][i])
            .ok_or_else(|| anyhow!("module {m:?} was not compiled"))
    }

    fn pointers(&self, call: &Call, p: Place, g: usize) -> (u64, u64) {
        self.lay.pointers(call, p, g)
    }

    fn region_lens(&self, call: &Call, p: Place) -> (u64, u64) {
        self.lay.region_lens(call, p)
    }

    /// Enqueues one call on GPU g's stream (its context must be current).
    fn enqueue(&self, call: &Call, g: usize, src_h: u64, dst_h: u64) -> Result<()> {
        let s = &self.streams[g];
        let src = self.addr(g, src_h);
        let dst = self.addr(g, dst_h);
        let es = call.es();
        match call.imp {
            Imp::Sm(_) => self.launch_direct(call, g, src, dst),
            Imp::RsCe { chunks } => {
                let n = self.n as u64;
                let piece = call.size / chunks as u64;
                let c = piece / n;
                let me = g as u64;
                let rs = Call {
                    coll: Coll::ReduceScatter,
                    imp: Imp::Sm(Knob::Default),
                    size: c,
                    ..*call
                };
                for p in 0..chunks as u64 {
                    // This PE's share of piece p, in dst (heap offset).
                    let base = p * piece * es;
                    let share = dst_h + base + me * c * es;
                    self.launch_direct(&rs, g, src + base, self.addr(g, share))?;
                    self.forks[g].record(s)?;
                    self.side[g].wait(&self.forks[g])?;
                    for k in 1..self.n {
                        let j = (g + k) % self.n;
                        memcpy(
                            &self.side[g],
                            self.addr(j, share),
                            self.addr(g, share),
                            c * es,
                        )?;
                    }
                }
                self.joins[g].record(&self.side[g])?;
                s.wait(&self.joins[g])?;
                self.flag(g, CE_EXIT)
            }
            Imp::CeRed { chunks } => self.enqueue_ce_red(call, g, src_h, dst_h, chunks),
            Imp::Ce { pull } => {
                self.flag(g, CE_ENTER)?;
                let (remote, local) = self.lay.ce_copies(call, g, src_h, dst_h, pull);
                let at = |(j, h): (usize, u64)| self.addr(j, h);
                if let Some(c) = local {
                    self.forks[g].record(s)?;
                    self.side[g].wait(&self.forks[g])?;
                    memcpy(&self.side[g], at(c.dst), at(c.src), c.bytes)?;
                    self.joins[g].record(&self.side[g])?;
                }
                for c in remote {
                    memcpy(s, at(c.dst), at(c.src), c.bytes)?;
                }
                if local.is_some() {
                    s.wait(&self.joins[g])?;
                }
                self.flag(g, CE_EXIT)
            }
        }
    }

    /// The copy-engine reduction of a 2-PE team (see `Imp::CeRed`).
    fn enqueue_ce_red(
        &self,
        call: &Call,
        g: usize,
        src_h: u64,
        dst_h: u64,
        chunks: u32,
    ) -> Result<()> {
        if self.n != 2 {
            bail!("copy-engine reductions are for 2-PE teams");
        }
        let s = &self.streams[g];
        let peer = 1 - g;
        let es = call.es();
        let count = call.size;
        // The elements this PE reduces, where its contribution starts, whether it pushes.
        let (lo, hi, blk, push) = match call.coll {
            Coll::AllReduce => (count * g as u64 / 2, count * (g as u64 + 1) / 2, 0, true),
            Coll::ReduceScatter => (0, count, g as u64 * count * es, false),
            Coll::Reduce if g == call.root => (0, count, 0, false),
            Coll::Reduce => (0, 0, 0, false),
            _ => bail!("no copy-engine reduction for {}", call.coll.name()),
        };
        self.flag(g, CE_ENTER)?;
        self.forks[g].record(s)?;
        self.side[g].wait(&self.forks[g])?;
        self.side2[g].wait(&self.forks[g])?;
        let f = self.func(call.module(), g, COMBINE2)?;
        let k = chunks as u64;
        for c in 0..k {
            let a0 = lo + (hi - lo) * c / k;
            let a1 = lo + (hi - lo) * (c + 1) / k;
            if a1 == a0 {
                continue;
            }
            let len = a1 - a0;
            let mine = self.addr(g, src_h + blk + a0 * es);
            let d = self.addr(g, dst_h + a0 * es);
            memcpy(
                &self.side[g],
                d,
                self.addr(peer, src_h + blk + a0 * es),
                len * es,
            )?;
            self.pulls[g].record(&self.side[g])?;
            s.wait(&self.pulls[g])?;
            // Team order: PE 0's contribution first.
            let (a, b) = if g == 0 { (mine, d) } else { (d, mine) };
            let scale = call.scale;
            let grid = (len * es).div_ceil(GRID_UNIT).clamp(1, MAX_GRID) as u32;
            let mut args = [arg(&a), arg(&b), arg(&d), arg(&len), arg(&scale)];
            // SAFETY: nvr_direct_combine2(const T*, const T*, T*, u64, double); a, b and d
            // hold `len` elements in this GPU's heap.
            unsafe { launch(f, s, grid, THREADS, &mut args)? };
            if push {
                self.combs[g].record(s)?;
                self.side2[g].wait(&self.combs[g])?;
                memcpy(
                    &self.side2[g],
                    self.addr(peer, dst_h + a0 * es),
                    d,
                    len * es,
                )?;
            }
        }
        self.joins[g].record(&self.side[g])?;
        self.joins2[g].record(&self.side2[g])?;
        s.wait(&self.joins[g])?;
        s.wait(&self.joins2[g])?;
        self.flag(g, CE_EXIT)
    }

    fn launch_direct(&self, call: &Call, g: usize, src: u64, dst: u64) -> Result<()> {
        let f = self.func(call.module(), g, call.coll.fn_index())?;
        let grid = call
            .grid
            .unwrap_or_else(|| direct_grid(call.coll, call.size * call.es(), self.n));
        let team = self.teams[g];
        let root = call.root as i32;
        let size = call.size;
        let scale = call.scale;
        let mut args: Vec<*mut c_void> = match call.coll {
            Coll::AllReduce | Coll::ReduceScatter => {
                vec![arg(&team), arg(&src), arg(&dst), arg(&size), arg(&scale)]
            }
            Coll::Reduce => vec![
                arg(&team),
                arg(&root),
                arg(&src),
                arg(&dst),
                arg(&size),
                arg(&scale),
            ],
            Coll::Broadcast | Coll::Gather | Coll::Scatter => {
                vec![arg(&team), arg(&root), arg(&src), arg(&dst), arg(&size)]
            }
            Coll::Fcollect | Coll::Alltoall => vec![arg(&team), arg(&src), arg(&dst), arg(&size)],
        };
        // SAFETY: the arguments match the kernel's parameters in order (direct.cu); the
        // addresses lie in every GPU's heap, which outlives the call (it is synchronised before
        // the heap is freed).
        unsafe { launch(f, &self.streams[g], grid, THREADS, &mut args) }
    }

    /// Launches nvr_ce_enter or nvr_ce_exit (one warp) on GPU g.
    fn flag(&self, g: usize, which: usize) -> Result<()> {
        let f = self.func(Module::Move(Knob::Default), g, which)?;
        let team = self.teams[g];
        let mut args = [arg(&team)];
        // SAFETY: the flag kernels take the team by value; its channel and host words live as
        // long as the node.
        unsafe { launch(f, &self.streams[g], 1, 32, &mut args) }
    }

    /// Waits until every GPU's stream is idle; if that takes longer than `limit`, sets the
    /// abort word, waits for the kernels to leave, and returns every GPU's status record.
    fn wait_all(&self, limit: Duration) -> Result<Option<Vec<[u32; 4]>>> {
        let t0 = Instant::now();
        loop {
            let mut done = true;
            for s in &self.streams {
                s.context().bind_to_thread()?;
                done &= stream_done(s)?;
            }
            if done {
                return Ok(None);
            }
            if t0.elapsed() > limit {
                break;
            }
            std::thread::sleep(Duration::from_micros(50));
        }
        self.node.set_abort(1);
        let t1 = Instant::now();
        for s in &self.streams {
            s.context().bind_to_thread()?;
            while !stream_done(s)? {
                if t1.elapsed() > Duration::from_secs(10) {
                    eprintln!(
                        "FATAL: a kernel ignored the abort word for 10 s; status {:?}",
                        self.statuses()
                    );
                    std::process::exit(3);
                }
                std::thread::sleep(Duration::from_micros(200));
            }
        }
        Ok(Some(self.statuses()))
    }

    fn statuses(&self) -> Vec<[u32; 4]> {
        (0..self.n).map(|g| self.node.status(g)).collect()
    }

    /// After an abort: clears the abort word and status records and zeroes the channel on
    /// every GPU (all idle), so later calls start from epoch 0 everywhere.
    fn reset(&self) -> Result<()> {
        self.node.set_abort(0);
        self.node.clear_status();
        self.node.zero(self.ch.off, self.ch.bytes())
    }
}

/// Enqueues a device-to-device copy (peer addresses allowed: peer access is on).
fn memcpy(s: &CudaStream, dst: u64, src: u64, bytes: u64) -> Result<()> {
    if bytes == 0 {
        return Ok(());
    }
    // SAFETY: both ranges lie in heaps of this node (local or peer-mapped), live until the
    // stream is synchronised.
    ck(
        unsafe { sys::cuMemcpyDtoDAsync_v2(dst, src, bytes as usize, s.cu_stream()) },
        "cuMemcpyDtoDAsync",
    )
}

/// Captures `k` calls on GPU g's stream into a graph.
fn capture(ctx: &Ctx, call: &Call, g: usize, src: u64, dst: u64, k: usize) -> Result<CudaGraph> {
    let s = &ctx.streams[g];
    s.begin_capture(sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)?;
    let mut r = Ok(());
    for _ in 0..k {
        r = ctx.enqueue(call, g, src, dst);
        if r.is_err() {
            break;
        }
    }
    let graph = s.end_capture(sys::CUgraphInstantiate_flags(0));
    r?;
    graph?.ok_or_else(|| anyhow!("empty capture"))
}

// ---- check ----------------------------------------------------------------------------------

/// Host images of regions A and B of one GPU.
#[derive(Clone)]
struct Img {
    ra: u64,
    a: Vec<u8>,
    rb: u64,
    b: Vec<u8>,
}

impl Img {
    fn at(&self, h: u64, len: u64) -> &[u8] {
        if h >= self.ra && h + len <= self.ra + self.a.len() as u64 {
            let o = (h - self.ra) as usize;
            &self.a[o..o + len as usize]
        } else {
            let o = (h - self.rb) as usize;
            &self.b[o..o + len as usize]
        }
    }

    fn put(&mut self, h: u64, bytes: &[u8]) {
        let len = bytes.len() as u64;
        let dst = if h >= self.ra && h + len <= self.ra + self.a.len() as u64 {
            let o = (h - self.ra) as usize;
            &mut self.a[o..o + len as usize]
        } else {
            let o = (h - self.rb) as usize;
            &mut self.b[o..o + len as usize]
        };
        dst.copy_from_slice(bytes);
    }
}

/// One check: a call, where its buffers are, and how it is issued.
#[derive(Clone, Copy, Debug)]
struct Case {
    call: Call,
    place: Place,
    /// 0: issued directly; k: captured once in a graph, replayed k times.
    graph: u32,
}

struct Tally {
    passed: usize,
    failed: usize,
    lines: Vec<String>,
}

impl Tally {
    fn record(&mut self, name: &str, r: Result<Vec<String>>) {
        match r {
            Ok(errs) if errs.is_empty() => self.passed += 1,
            Ok(errs) => {
                self.failed += 1;
                let msg = format!("FAILED {name}: {}", errs.join("; "));
                println!("{msg}");
                self.lines.push(msg);
            }
            Err(e) => {
                self.failed += 1;
                let msg = format!("FAILED {name}: error: {e:#}");
                println!("{msg}");
                self.lines.push(msg);
            }
        }
    }
}

/// Every GPU's regions before a call: typed random elements for reductions (so no NaN),
/// random bytes otherwise, in region A; poison in region B.
fn initial_images(lay: &Layout, case: &Case, rng: &mut Rng) -> Vec<Img> {
    let call = &case.call;
    let es = call.es() as usize;
    let (la, lb) = lay.region_lens(call, case.place);
    (0..lay.n)
        .map(|_| {
            let mut a = vec![0u8; la as usize];
            if call.coll.is_reduction() {
                for e in a.chunks_exact_mut(es) {
                    reference::random_element(call.ty, rng, e);
                }
            } else {
                rng.fill(&mut a);
            }
            Img {
                ra: lay.ra,
                a,
                rb: lay.rb,
                b: vec![0xA5; lb as usize],
            }
        })
        .collect()
}

/// Runs one case and compares every GPU's regions with the reference; the mismatches found.
fn run_case(ctx: &Ctx, case: &Case, rng: &mut Rng) -> Result<Vec<String>> {
    let call = &case.call;
    let n = ctx.n;
    let (la, lb) = ctx.region_lens(call, case.place);
    if la > ctx.region || lb > ctx.region {
        bail!(
            "case needs {la}/{lb} bytes of region, {} available",
            ctx.region
        );
    }
    let init = initial_images(&ctx.lay, case, rng);
    for (g, img) in init.iter().enumerate() {
        htod(&ctx.streams[g], ctx.addr(g, ctx.ra), &img.a)?;
        htod(&ctx.streams[g], ctx.addr(g, ctx.rb), &img.b)?;
    }
    let ptrs: Vec<(u64, u64)> = (0..n).map(|g| ctx.pointers(call, case.place, g)).collect();

    let mut graphs = Vec::new();
    let issued = (|| -> Result<()> {
        for (g, &(s, d)) in ptrs.iter().enumerate() {
            ctx.node.gpus[g].ctx.bind_to_thread()?;
            if case.graph == 0 {
                ctx.enqueue(call, g, s, d)?;
            } else {
                graphs.push(capture(ctx, call, g, s, d, 1)?);
            }
        }
        for _ in 0..case.graph {
            for gr in &graphs {
                gr.launch()?;
            }
        }
        Ok(())
    })();
    if let Err(e) = issued {
        // What was issued on the other GPUs waits for this one: stop it, start over.
        ctx.node.set_abort(1);
        for st in &ctx.streams {
            let _ = st.synchronize();
        }
        ctx.reset()?;
        return Err(e);
    }
    if let Some(st) = ctx.wait_all(WATCHDOG)? {
        ctx.reset()?;
        return Ok(vec![format!(
            "hung; the watchdog aborted it; status per GPU {st:?}"
        )]);
    }
    drop(graphs);

    let mut got = init.clone();
    for (g, img) in got.iter_mut().enumerate() {
        dtoh(&ctx.streams[g], ctx.addr(g, ctx.ra), &mut img.a)?;
        dtoh(&ctx.streams[g], ctx.addr(g, ctx.rb), &mut img.b)?;
    }
    Ok(compare(&ctx.lay, case, &init, &got, &ptrs))
}

/// The mismatches between what the GPUs hold and what the call must leave.
fn compare(
    lay: &Layout,
    case: &Case,
    init: &[Img],
    got: &[Img],
    ptrs: &[(u64, u64)],
) -> Vec<String> {
    let call = &case.call;
    let n = lay.n;
    let es = call.es();
    let b = call.size * es;
    let root = call.root;
    let mut errs = Vec::new();
    let mut want: Vec<Img> = init.to_vec();
    // The element-checked output range of each GPU (reductions).
    let mut ranges: Vec<Option<(u64, u64)>> = vec![None; n];
    match call.coll {
        Coll::AllReduce => (0..n).for_each(|g| ranges[g] = Some((ptrs[g].1, call.size))),
        Coll::ReduceScatter => (0..n).for_each(|g| ranges[g] = Some((ptrs[g].1, call.size))),
        Coll::Reduce => ranges[root] = Some((ptrs[root].1, call.size)),
        Coll::Broadcast => {
            for (g, w) in want.iter_mut().enumerate() {
                w.put(ptrs[g].1, init[root].at(ptrs[root].0, b));
            }
        }
        Coll::Fcollect => {
            for (g, w) in want.iter_mut().enumerate() {
                for j in 0..n {
                    w.put(ptrs[g].1 + j as u64 * b, init[j].at(ptrs[j].0, b));
                }
            }
        }
        Coll::Alltoall => {
            for (g, w) in want.iter_mut().enumerate() {
                for j in 0..n {
                    w.put(
                        ptrs[g].1 + j as u64 * b,
                        init[j].at(ptrs[j].0 + g as u64 * b, b),
                    );
                }
            }
        }
        Coll::Gather => {
            for j in 0..n {
                let bytes = init[j].at(ptrs[j].0, b).to_vec();
                want[root].put(ptrs[root].1 + j as u64 * b, &bytes);
            }
        }
        Coll::Scatter => {
            for (g, w) in want.iter_mut().enumerate() {
                w.put(ptrs[g].1, init[root].at(ptrs[root].0 + g as u64 * b, b));
            }
        }
    }
    // Bytes outside the output ranges: exactly as expected (guards, untouched inputs and
    // non-root outputs included).
    for g in 0..n {
        let skip = ranges[g].map(|(h, c)| (h, h + c * es));
        for (name, base, w, x) in [
            ("A", want[g].ra, &want[g].a, &got[g].a),
            ("B", want[g].rb, &want[g].b, &got[g].b),
        ] {
            let mut bad = 0usize;
            let mut first = None;
            for (i, (p, q)) in w.iter().zip(x.iter()).enumerate() {
                let h = base + i as u64;
                if skip.is_some_and(|(lo, hi)| h >= lo && h < hi) {
                    continue;
                }
                if p != q {
                    bad += 1;
                    first.get_or_insert((i, *p, *q));
                }
            }
            if let Some((i, p, q)) = first {
                errs.push(format!(
                    "GPU {g} region {name}: {bad} wrong bytes, first at +{i} (src at +{}, dst at +{}): want {p:#04x} got {q:#04x}",
                    ptrs[g].0 as i64 - base as i64,
                    ptrs[g].1 as i64 - base as i64
                ));
            }
        }
    }
    // Reduction outputs, element by element against the reference (on every core: the
    // reference is most of check's host time).
    if call.coll.is_reduction() {
        errs.extend(check_reduction(case, n, init, got, ptrs, &ranges));
        // All-reduce: every PE must hold the same bits.
        if call.coll == Coll::AllReduce {
            let len = call.size * es;
            let r0 = got[0].at(ptrs[0].1, len);
            for g in 1..n {
                if got[g].at(ptrs[g].1, len) != r0 {
                    errs.push(format!("GPU {g}'s result differs in bits from GPU 0's"));
                }
            }
        }
    }
    errs.truncate(6);
    errs
}

/// The reduction outputs (`ranges`: per GPU, the heap offset and count of its output) against
/// the reference, split over the host's cores; one message per GPU with wrong results.
fn check_reduction(
    case: &Case,
    n: usize,
    init: &[Img],
    got: &[Img],
    ptrs: &[(u64, u64)],
    ranges: &[Option<(u64, u64)>],
) -> Vec<String> {
    let call = &case.call;
    let t = call.ty;
    let es = call.es();
    let b = call.size * es;
    let outs: Vec<(usize, u64)> = (0..n)
        .filter_map(|g| ranges[g].map(|(h, _)| (g, h)))
        .collect();
    let count = call.size;
    let threads = std::thread::available_parallelism()
        .map_or(1, |x| x.get())
        .clamp(1, 32) as u64;
    let per = count.div_ceil(threads).max(1);
    // Per thread, per output GPU: wrong results and the first one described.
    let parts: Vec<Vec<(u64, Option<String>)>> = std::thread::scope(|sc| {
        let hs: Vec<_> = (0..threads)
            .map(|i| {
                let (k0, k1) = ((i * per).min(count), ((i + 1) * per).min(count));
                let outs = &outs;
                sc.spawn(move || {
                    let mut res: Vec<(u64, Option<String>)> = vec![(0, None); outs.len()];
                    let mut inputs: Vec<&[u8]> = Vec::with_capacity(n);
                    for k in k0..k1 {
                        // All-reduce and reduce: one expectation for every output GPU.
                        let mut shared: Option<Expect> = None;
                        for (o, &(g, h)) in outs.iter().enumerate() {
                            let blk = if call.coll == Coll::ReduceScatter {
                                g as u64 * b
                            } else {
                                0
                            };
                            inputs.clear();
                            for j in 0..n {
                                inputs.push(init[j].at(ptrs[j].0 + blk + k * es, es));
                            }
                            let e = match shared {
                                Some(e) => e,
                                None => {
                                    let e = reference::reduce(t, call.op, call.scale, &inputs);
                                    if call.coll != Coll::ReduceScatter {
                                        shared = Some(e);
                                    }
                                    e
                                }
                            };
                            let x = got[g].at(h + k * es, es);
                            if !reference::meets(t, e, x) {
                                res[o].0 += 1;
                                if res[o].1.is_none() {
                                    let ins: Vec<String> =
                                        inputs.iter().map(|i| reference::show(t, i)).collect();
                                    res[o].1 = Some(format!(
                                        "element {k}: inputs [{}] want {} got {}",
                                        ins.join(", "),
                                        match e {
                                            Expect::Bits(v) => format!("{v:#x}"),
                                            Expect::Near { value, tol } => {
                                                format!("{value} ± {tol:e}")
                                            }
                                        },
                                        reference::show(t, x)
                                    ));
                                }
                            }
                        }
                    }
                    res
                })
            })
            .collect();
        hs.into_iter()
            .map(|h| h.join().expect("a reference thread panicked"))
            .collect()
    });
    let mut errs = Vec::new();
    for (o, &(g, _)) in outs.iter().enumerate() {
        let bad: u64 = parts.iter().map(|p| p[o].0).sum();
        if let Some(first) = parts.iter().find_map(|p| p[o].1.clone()) {
            errs.push(format!(
                "GPU {g}: {bad} of {count} results wrong, first {first}"
            ));
        }
    }
    errs
}

/// The cases of `check`.
fn check_cases(n: usize, quick: bool) -> Vec<Case> {
    let mut v = Vec::new();
    let push = |v: &mut Vec<Case>, call: Call, sa: u64, da: u64, inplace: bool| {
        v.push(Case {
            call,
            place: Place { sa, da, inplace },
            graph: 0,
        });
    };
    let roots = if n > 1 { vec![0, n - 1] } else { vec![0] };
    // Reductions: every (type, operator) with the default kernels.
    for coll in [Coll::AllReduce, Coll::ReduceScatter, Coll::Reduce] {
        for (i, (t, op)) in Op::pairs().into_iter().enumerate() {
            let es = t.size() as u64;
            let scale = if t.is_integer() { 3.0 } else { 0.5 };
            let call = |size: u64, root: usize| Call {
                coll,
                imp: Imp::Sm(Knob::Default),
                ty: t,
                op,
                size,
                root,
                scale,
                grid: None,
            };
            let root = roots[i % roots.len()];
            let big = Coll::size_for(coll, MIB, es, n) + 3;
            push(&mut v, call(1, root), 0, 0, false);
            // An odd count, both starts off 16-byte alignment by one element (same alignment).
            push(&mut v, call(7, root), es, es, false);
            // 1 MiB + 3 elements, src one element off, dst aligned (store widths < 16).
            push(
                &mut v,
                call(big, roots[(i + 1) % roots.len()]),
                es,
                0,
                false,
            );
            // In place, starting 3 elements in.
            push(&mut v, call(big, root), 3 * es, 3 * es, true);
        }
    }
    // Reduction variants (f32 sum), and 64 MiB.
    let f32sum = |coll: Coll, k: Knob, bytes: u64, root: usize| Call {
        coll,
        imp: Imp::Sm(k),
        ty: Ty::F32,
        op: Op::Sum,
        size: coll.size_for(bytes, 4, n),
        root,
        scale: 1.0,
        grid: None,
    };
    for k in REDUCE_KNOBS {
        for coll in [Coll::AllReduce, Coll::ReduceScatter, Coll::Reduce] {
            for &root in &roots {
                let mut c = f32sum(coll, k, MIB, root);
                c.size += 3;
                push(&mut v, c, 4, 4, false);
                push(&mut v, c, 0, 0, true);
            }
        }
    }
    if !quick {
        let big = 64 * MIB;
        for coll in [Coll::AllReduce, Coll::ReduceScatter, Coll::Reduce] {
            push(&mut v, f32sum(coll, Knob::Default, big, n - 1), 0, 0, false);
            push(&mut v, f32sum(coll, Knob::Default, big, 0), 8, 8, true);
        }
        for (t, op) in [
            (Ty::BF16, Op::Avg),
            (Ty::I16, Op::Sum),
            (Ty::U16, Op::Max),
            (Ty::F8E4M3, Op::PreMulSum),
        ] {
            let es = t.size() as u64;
            push(
                &mut v,
                Call {
                    coll: Coll::AllReduce,
                    imp: Imp::Sm(Knob::Default),
                    ty: t,
                    op,
                    size: big / es,
                    root: 0,
                    scale: 0.5,
                    grid: None,
                },
                es,
                es,
                false,
            );
        }
    }
    // Data movement: every kernel variant and copy-engine variant.
    let mut imps: Vec<Imp> = MOVE_KNOBS.iter().map(|&k| Imp::Sm(k)).collect();
    imps.push(Imp::Ce { pull: false });
    imps.push(Imp::Ce { pull: true });
    for coll in [
        Coll::Broadcast,
        Coll::Fcollect,
        Coll::Alltoall,
        Coll::Gather,
        Coll::Scatter,
    ] {
        for &imp in &imps {
            let bcast_knob = matches!(
                imp,
                Imp::Sm(Knob::BcastPush | Knob::BcastPull | Knob::BcastFwd)
            );
            if bcast_knob && coll != Coll::Broadcast {
                continue;
            }
            let rs: &[usize] = if coll.rooted() { &roots } else { &[0] };
            for &root in rs {
                let call = |size: u64| Call {
                    coll,
                    imp,
                    ty: Ty::U8,
                    op: Op::Sum,
                    size,
                    root,
                    scale: 1.0,
                    grid: None,
                };
                let inplace = coll != Coll::Alltoall;
                push(&mut v, call(1), 0, 0, false);
                push(&mut v, call(15), 3, 3, false);
                push(&mut v, call(4097), 0, 5, false);
                push(&mut v, call(MIB + 3), 1, 1, false);
                push(&mut v, call(MIB + 3), 7, 12, false);
                if inplace {
                    push(&mut v, call(MIB + 3), 5, 5, true);
                }
                if !quick && matches!(imp, Imp::Sm(Knob::Default) | Imp::Ce { pull: false }) {
                    push(&mut v, call(coll.size_for(64 * MIB, 1, n)), 0, 0, false);
                    if inplace {
                        push(&mut v, call(coll.size_for(64 * MIB, 1, n)), 16, 16, true);
                    }
                }
            }
        }
    }
    // The copy-engine all-reduce (reduce-scatter kernels + pushes): sizes divisible by
    // chunks * n.
    for (bytes, chunks, inplace) in [
        (MIB, 1, false),
        (MIB, 4, true),
        (MIB, 16, false),
        (64 * MIB, 4, false),
        (64 * MIB, 16, true),
    ] {
        if quick && bytes > MIB {
            continue;
        }
        let mut c = f32sum(Coll::AllReduce, Knob::Default, bytes, 0);
        c.imp = Imp::RsCe { chunks };
        c.size -= c.size % (chunks as u64 * n as u64);
        push(&mut v, c, 16, 16, inplace);
    }
    // Copy-engine reductions of 2-PE teams (not in place): every reduction, several types (the
    // team order of the combine), odd sizes, unaligned starts, pieces of uneven length.
    if n == 2 {
        for coll in [Coll::AllReduce, Coll::ReduceScatter, Coll::Reduce] {
            for &root in &roots {
                if root != 0 && coll != Coll::Reduce {
                    continue;
                }
                for (t, op, chunks, sa, da) in [
                    (Ty::F32, Op::Sum, 1, 4, 0),
                    (Ty::F32, Op::Sum, 4, 16, 16),
                    (Ty::BF16, Op::Avg, 3, 2, 2),
                    (Ty::I16, Op::PreMulSum, 16, 0, 0),
                    (Ty::F8E5M2, Op::Sum, 2, 1, 1),
                    (Ty::U8, Op::Max, 5, 3, 0),
                ] {
                    let es = t.size() as u64;
                    let c = Call {
                        coll,
                        imp: Imp::CeRed { chunks },
                        ty: t,
                        op,
                        size: coll.size_for(MIB, es, n) + 3,
                        root,
                        scale: 3.0,
                        grid: None,
                    };
                    push(&mut v, c, sa * es, da * es, false);
                    push(&mut v, Call { size: 5, ..c }, 0, 0, false);
                }
                if !quick {
                    let mut c = f32sum(coll, Knob::Default, 64 * MIB, root);
                    c.imp = Imp::CeRed { chunks: 8 };
                    push(&mut v, c, 0, 0, false);
                }
            }
        }
    }
    // CUDA graphs: one call captured, replayed 100 times (epochs advance on the device).
    let mut ar = f32sum(Coll::AllReduce, Knob::Default, MIB, 0);
    ar.size += 3;
    let fc = Call {
        coll: Coll::Fcollect,
        imp: Imp::Sm(Knob::Default),
        ty: Ty::U8,
        op: Op::Sum,
        size: MIB + 5,
        root: 0,
        scale: 1.0,
        grid: None,
    };
    let ce = Call {
        imp: Imp::Ce { pull: false },
        ..fc
    };
    let bc = Call {
        coll: Coll::Broadcast,
        root: n - 1,
        ..fc
    };
    for call in [ar, fc, ce, bc] {
        v.push(Case {
            call,
            place: Place {
                sa: 4,
                da: 4,
                inplace: false,
            },
            graph: 100,
        });
    }
    v
}

/// The abort and timeout paths: GPU 0 alone launches an all-reduce, so it waits for ever for
/// GPU 1's arrival. With a timeout in the team, the kernel must give up by itself (status 2);
/// without, the watchdog's abort word must stop it (status 1). Either way the status names
/// the peer, the epoch and what was waited for.
fn check_abort(ctx: &mut Ctx, timeout: bool) -> Result<Vec<String>> {
    let mut errs = Vec::new();
    let call = Call {
        coll: Coll::AllReduce,
        imp: Imp::Sm(Knob::Default),
        ty: Ty::F32,
        op: Op::Sum,
        size: 1024,
        root: 0,
        scale: 1.0,
        grid: None,
    };
    let saved = ctx.teams[0];
    if timeout {
        ctx.teams[0].timeout_ns = 50_000_000;
    }
    ctx.node.gpus[0].ctx.bind_to_thread()?;
    let (s, d) = ctx.pointers(
        &call,
        Place {
            sa: 0,
            da: 0,
            inplace: false,
        },
        0,
    );
    let r = ctx.enqueue(&call, 0, s, d);
    ctx.teams[0] = saved;
    r?;
    let t0 = Instant::now();
    let st = ctx.wait_all(WATCHDOG)?;
    let secs = t0.elapsed().as_secs_f64();
    let status = match st {
        Some(st) => {
            if timeout {
                errs.push(format!(
                    "the 50 ms timeout did not end the wait; the watchdog did after {secs:.1} s"
                ));
            }
            st[0]
        }
        None => {
            if !timeout {
                errs.push("the lone all-reduce finished without its peer".into());
            }
            ctx.node.status(0)
        }
    };
    let want = if timeout {
        kernel_probe::FAIL_TIMEOUT
    } else {
        kernel_probe::FAIL_ABORT
    };
    if status[0] != want || status[1] != 1 || status[3] != kernel_probe::WAIT_ARRIVE {
        errs.push(format!(
            "status {status:?}: want [{want}, 1 (peer), epoch, {} (arrive)]",
            kernel_probe::WAIT_ARRIVE
        ));
    }
    println!(
        "  {} path: GPU 0 status {status:?} after {secs:.2} s",
        if timeout { "timeout" } else { "abort" }
    );
    ctx.reset()?;
    Ok(errs)
}

fn check(gpus: Option<usize>, seed: u64, quick: bool, ptx: bool) -> Result<bool> {
    let mut mods: Vec<Module> = Op::pairs()
        .into_iter()
        .map(|(t, op)| Module::Reduce(t, op, Knob::Default))
        .collect();
    mods.extend(
        REDUCE_KNOBS
            .iter()
            .map(|&k| Module::Reduce(Ty::F32, Op::Sum, k)),
    );
    mods.extend(MOVE_KNOBS.iter().map(|&k| Module::Move(k)));
    let mut ctx = Ctx::new(gpus, 96 * MIB, &mods, ptx)?;
    let n = ctx.n;
    println!("check: {n} GPUs, seed {seed}");
    let mut rng = Rng::new(seed);
    let mut tally = Tally {
        passed: 0,
        failed: 0,
        lines: Vec::new(),
    };
    let cases = check_cases(n, quick);
    let t0 = Instant::now();
    let mut per_coll: HashMap<Coll, (usize, usize, f64)> = HashMap::new();
    for case in &cases {
        let c0 = Instant::now();
        let before = tally.failed;
        let name = format!(
            "{} size {} src+{} dst+{}{}{}",
            case.call.label(),
            case.call.size,
            case.place.sa,
            case.place.da,
            if case.place.inplace { " in place" } else { "" },
            if case.graph > 0 {
                format!(" graph x{}", case.graph)
            } else {
                String::new()
            }
        );
        tally.record(&name, run_case(&ctx, case, &mut rng));
        let e = per_coll.entry(case.call.coll).or_default();
        e.0 += 1;
        e.1 += tally.failed - before;
        e.2 += c0.elapsed().as_secs_f64();
    }
    for c in Coll::ALL {
        if let Some((k, f, s)) = per_coll.get(&c) {
            println!("  {:<15} {k:>5} cases, {f} failed, {s:.1} s", c.name());
        }
    }
    if n > 1 {
        for timeout in [true, false] {
            let r = check_abort(&mut ctx, timeout);
            tally.record(
                if timeout {
                    "timeout path"
                } else {
                    "abort path"
                },
                r,
            );
        }
        // The channel was zeroed: a normal call must work again.
        let mut c = cases[0];
        c.graph = 0;
        tally.record("a call after the aborts", run_case(&ctx, &c, &mut rng));
    }
    println!("check took {:.1} s", t0.elapsed().as_secs_f64());
    println!();
    println!("==== check summary ====");
    for l in &tally.lines {
        println!("{l}");
    }
    println!("{} passed, {} failed", tally.passed, tally.failed);
    Ok(tally.failed == 0)
}

// ---- time -----------------------------------------------------------------------------------

/// Calls per measurement: about 2 GiB of nccl-tests bytes, 10 to 200 calls.
fn iters_for(bytes: u64) -> usize {
    ((2048 * MIB) / bytes.max(1)).clamp(10, 200) as usize
}

/// Waits for one GPU's stream (from that GPU's thread); past twice the watchdog's time, sets
/// the abort word (stopping every GPU's kernels) and fails with the status records.
fn wait_stream(ctx: &Ctx, s: &CudaStream) -> Result<()> {
    let t0 = Instant::now();
    while !stream_done(s)? {
        if t0.elapsed() > WATCHDOG * 2 {
            ctx.node.set_abort(1);
            s.synchronize()?;
            bail!("hung; aborted; status {:?}", ctx.statuses());
        }
        std::thread::sleep(Duration::from_micros(100));
    }
    Ok(())
}

/// Times `call` (non-in-place, aligned buffers) on every GPU at once; µs per call (the
/// slowest GPU), on a stream or as one graph of all the calls.
fn time_call(ctx: &Ctx, call: &Call, graph: bool) -> Result<f64> {
    let n = ctx.n;
    let es = call.es();
    let bytes = call.coll.nccl_bytes(call.size, es, n);
    let k = iters_for(bytes);
    let place = Place {
        sa: 0,
        da: 0,
        inplace: false,
    };
    // Two steps, each ended together by every GPU thread (sync_step), so a thread that fails
    // cannot leave the others waiting at a barrier: warm-up (and capture), then the timed run.
    let bar = Barrier::new(n);
    let failed = AtomicBool::new(false);
    let times = ctx.node.on_each(|g, gpu| {
        let s = &ctx.streams[g];
        let (src, dst) = ctx.pointers(call, place, g);
        let gr = sync_step(&bar, &failed, || {
            for _ in 0..3 {
                ctx.enqueue(call, g, src, dst)?;
            }
            let gr = if graph {
                let gr = capture(ctx, call, g, src, dst, k)?;
                gr.upload()?;
                // One untimed replay: the timed one is not the first.
                gr.launch()?;
                Some(gr)
            } else {
                None
            };
            wait_stream(ctx, s)?;
            Ok(gr)
        })?;
        let (e0, e1) = sync_step(&bar, &failed, || {
            let e0 = gpu
                .ctx
                .new_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT))?;
            let e1 = gpu
                .ctx
                .new_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT))?;
            e0.record(s)?;
            match &gr {
                Some(gr) => gr.launch()?,
                None => {
                    for _ in 0..k {
                        ctx.enqueue(call, g, src, dst)?;
                    }
                }
            }
            e1.record(s)?;
            wait_stream(ctx, s)?;
            Ok((e0, e1))
        })?;
        Ok(e0.elapsed_ms(&e1)? as f64 * 1000.0 / k as f64)
    });
    match times {
        Ok(t) => Ok(t.into_iter().fold(0.0, f64::max)),
        Err(e) => {
            // A GPU that failed leaves its peers waiting: stop them and start over.
            ctx.node.set_abort(1);
            for s in &ctx.streams {
                let _ = s.synchronize();
            }
            ctx.reset()?;
            Err(e)
        }
    }
}

struct Row {
    coll: Coll,
    imp: String,
    ty: Ty,
    bytes: u64,
    stream_us: f64,
    graph_us: f64,
    factor: f64,
}

impl Row {
    fn bw(&self, us: f64) -> f64 {
        self.bytes as f64 / (us * 1e3) * self.factor
    }
}

fn fmt_size(b: u64) -> String {
    if b >= MIB && b % MIB == 0 {
        format!("{} MiB", b / MIB)
    } else {
        format!("{b} B")
    }
}

/// A collective's target and NCCL's figures on this machine.
struct Target {
    coll: Coll,
    /// busbw GB/s to reach at 128 MiB.
    busbw: f64,
    /// NCCL's busbw at 16 MiB and 128 MiB on 2 x H200 (the project's anchor run of
    /// 2026-11-22; `docs/performance.md`, "Large messages", has NCCL's figures of the
    /// 2026-11-23 sweep beside this crate's), if measured.
    nccl: Option<(f64, f64)>,
}

const TARGETS: [Target; 8] = [
    Target {
        coll: Coll::AllReduce,
        busbw: 350.0,
        nccl: Some((215.0, 285.0)),
    },
    Target {
        coll: Coll::ReduceScatter,
        busbw: 350.0,
        nccl: Some((164.0, 226.0)),
    },
    Target {
        coll: Coll::Reduce,
        busbw: 350.0,
        nccl: None,
    },
    Target {
        coll: Coll::Broadcast,
        busbw: 385.0,
        nccl: Some((275.0, 347.0)),
    },
    Target {
        coll: Coll::Fcollect,
        busbw: 370.0,
        nccl: Some((156.0, 232.0)),
    },
    Target {
        coll: Coll::Alltoall,
        busbw: 370.0,
        nccl: Some((165.0, 264.0)),
    },
    Target {
        coll: Coll::Gather,
        busbw: 370.0,
        nccl: None,
    },
    Target {
        coll: Coll::Scatter,
        busbw: 370.0,
        nccl: None,
    },
];

/// The link's ceiling: 256 MiB copied from GPU 0 to GPU 1 (and both ways at once) by copy
/// engine and by a plain SM copy kernel. GB/s per direction.
fn link_ceiling(ctx: &Ctx) -> Result<String> {
    if ctx.n < 2 {
        return Ok("link ceiling: needs 2 GPUs".into());
    }
    let bytes = MAX_TIME_BYTES;
    let reps = 5;
    // GPU g copies from its region A to the peer's region B (push) or from the peer's region A
    // to its own region B (pull): the data crosses from the pusher, or to the puller.
    let run = |sm: bool, both: bool, pull: bool| -> Result<f64> {
        let barrier = Barrier::new(ctx.n);
        let t = ctx.node.on_each(|g, gpu| {
            let active = g == 0 || (both && g == 1);
            barrier.wait();
            if !active {
                return Ok(0.0);
            }
            let peer = 1 - g;
            let s = &ctx.streams[g];
            let (src, dst) = if pull {
                (ctx.addr(peer, ctx.ra), ctx.addr(g, ctx.rb))
            } else {
                (ctx.addr(g, ctx.ra), ctx.addr(peer, ctx.rb))
            };
            let go = || -> Result<()> {
                if sm {
                    let f = ctx.func(Module::Probe, g, 0)?;
                    let nvec = bytes / 16;
                    let mut args = [arg(&src), arg(&dst), arg(&nvec)];
                    // SAFETY: probe_copy(const uint4*, uint4*, u64): src in a region A, dst in a
                    // region B of this GPU or its peer, both at least `bytes` long.
                    unsafe { launch(f, s, 128, 512, &mut args) }
                } else {
                    memcpy(s, dst, src, bytes)
                }
            };
            go()?;
            s.synchronize()?;
            let e0 = gpu
                .ctx
                .new_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT))?;
            let e1 = gpu
                .ctx
                .new_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT))?;
            e0.record(s)?;
            for _ in 0..reps {
                go()?;
            }
            e1.record(s)?;
            s.synchronize()?;
            Ok(bytes as f64 * reps as f64 / (e0.elapsed_ms(&e1)? as f64 * 1e6))
        })?;
        let active: Vec<f64> = t.into_iter().filter(|&x| x > 0.0).collect();
        Ok(active.iter().cloned().fold(f64::INFINITY, f64::min))
    };
    Ok(format!(
        "link ceiling, 256 MiB copies, GB/s per direction: copy engine push {:.1} one way, {:.1} both ways, pull {:.1} one way, {:.1} both ways; SM copy kernel push {:.1} one way, {:.1} both ways, pull {:.1} one way, {:.1} both ways",
        run(false, false, false)?,
        run(false, true, false)?,
        run(false, false, true)?,
        run(false, true, true)?,
        run(true, false, false)?,
        run(true, true, false)?,
        run(true, false, true)?,
        run(true, true, true)?
    ))
}

/// The implementations `time` runs for a collective.
fn time_imps(c: Coll, n: usize) -> Vec<Imp> {
    let ce = [Imp::Ce { pull: false }, Imp::Ce { pull: true }];
    let mut v = match c {
        Coll::AllReduce => vec![
            Imp::Sm(Knob::Default),
            Imp::Sm(Knob::Inflight(4)),
            Imp::Sm(Knob::Inflight(16)),
            Imp::RsCe { chunks: 1 },
            Imp::RsCe { chunks: 4 },
            Imp::RsCe { chunks: 16 },
            Imp::CeRed { chunks: 4 },
            Imp::CeRed { chunks: 16 },
        ],
        Coll::ReduceScatter => vec![
            Imp::Sm(Knob::Default),
            Imp::Sm(Knob::Inflight(16)),
            Imp::CeRed { chunks: 4 },
            Imp::CeRed { chunks: 16 },
        ],
        Coll::Reduce => vec![
            Imp::Sm(Knob::Default),
            Imp::Sm(Knob::RootPull),
            Imp::CeRed { chunks: 4 },
            Imp::CeRed { chunks: 16 },
        ],
        Coll::Broadcast => {
            let other = if n <= 2 {
                Knob::BcastFwd
            } else {
                Knob::BcastPush
            };
            vec![
                Imp::Sm(Knob::Default),
                Imp::Sm(Knob::BcastPull),
                Imp::Sm(other),
                ce[0],
                ce[1],
            ]
        }
        _ => vec![Imp::Sm(Knob::Default), Imp::Sm(Knob::Pull), ce[0], ce[1]],
    };
    // Copy-engine reductions exist for 2-PE teams only.
    v.retain(|i| n == 2 || !matches!(i, Imp::CeRed { .. }));
    v
}

fn time(gpus: Option<usize>, ptx: bool) -> Result<bool> {
    let ctx = Ctx::new(
        gpus,
        MAX_TIME_BYTES + 2 * GUARD + 4096,
        &timing_modules(),
        ptx,
    )?;
    let n = ctx.n;
    println!("time: {n} GPUs; µs per call (slowest GPU) and busbw GB/s, stream mode (back-to-back calls after 3 warm-up) and graph mode (the same calls as one graph)");
    let mut ok = 0usize;
    let mut bad = 0usize;
    match link_ceiling(&ctx) {
        Ok(s) => {
            println!("{s}");
            ok += 1;
        }
        Err(e) => {
            println!("FAILED link ceiling: {e:#}");
            bad += 1;
        }
    }
    let sizes = [MIB, 16 * MIB, 64 * MIB, 128 * MIB, MAX_TIME_BYTES];
    let mut rows: Vec<Row> = Vec::new();
    println!(
        "{:<15} {:<12} {:<7} {:>8} {:>10} {:>8} {:>10} {:>8}",
        "collective", "impl", "type", "size", "stream µs", "busbw", "graph µs", "busbw"
    );
    let mut plan: Vec<(Call, u64)> = Vec::new();
    for c in Coll::ALL {
        for imp in time_imps(c, n) {
            for &bytes in &sizes {
                let es = if c.is_reduction() { 4 } else { 1 };
                let mut size = c.size_for(bytes, es, n);
                if let Imp::RsCe { chunks } = imp {
                    size -= size % (chunks as u64 * n as u64);
                }
                let call = Call {
                    coll: c,
                    imp,
                    ty: Ty::F32,
                    op: Op::Sum,
                    size,
                    root: 0,
                    scale: 1.0,
                    grid: None,
                };
                plan.push((call, bytes));
            }
        }
        if c == Coll::AllReduce {
            for t in TIME_TYPES {
                let call = Call {
                    coll: c,
                    imp: Imp::Sm(Knob::Default),
                    ty: t,
                    op: Op::Sum,
                    size: 128 * MIB / t.size() as u64,
                    root: 0,
                    scale: 1.0,
                    grid: None,
                };
                plan.push((call, 128 * MIB));
            }
        }
    }
    for (call, bytes) in plan {
        let name = format!(
            "{:<15} {:<12} {:<7} {:>8}",
            call.coll.name(),
            call.imp.name(),
            if call.coll.is_reduction() {
                call.ty.name()
            } else {
                "-"
            },
            fmt_size(bytes)
        );
        let s = time_call(&ctx, &call, false);
        let g = time_call(&ctx, &call, true);
        match (s, g) {
            (Ok(s), Ok(g)) => {
                let row = Row {
                    coll: call.coll,
                    imp: call.imp.name(),
                    ty: call.ty,
                    bytes: call.coll.nccl_bytes(call.size, call.es(), n),
                    stream_us: s,
                    graph_us: g,
                    factor: call.coll.busbw_factor(n),
                };
                println!(
                    "{name} {:>10.1} {:>8.1} {:>10.1} {:>8.1}",
                    s,
                    row.bw(s),
                    g,
                    row.bw(g)
                );
                rows.push(row);
                ok += 1;
            }
            (s, g) => {
                let e = s.err().or(g.err()).unwrap();
                println!("FAILED {name}: {e:#}");
                bad += 1;
            }
        }
    }
    summary(&rows, n);
    println!("{ok} passed, {bad} failed");
    Ok(bad == 0)
}

/// The table against the targets (128 MiB) and NCCL (16 and 128 MiB), best implementation per
/// collective and mode.
fn summary(rows: &[Row], n: usize) {
    println!();
    println!("==== summary ({n} GPUs; busbw GB/s; best implementation per collective) ====");
    println!(
        "{:<15} {:>6} | {:<12} {:>7} {:<12} {:>7} | {:>7} {:>7} | {:>7} {:>7} | verdict",
        "collective",
        "target",
        "128M stream",
        "",
        "128M graph",
        "",
        "NCCL16",
        "ours16",
        "NCCL128",
        "ours128",
    );
    for Target {
        coll: c,
        busbw: target,
        nccl,
    } in TARGETS
    {
        let best = |bytes: u64, graph: bool| {
            rows.iter()
                .filter(|r| {
                    r.coll == c && r.bytes == bytes && (r.ty == Ty::F32 || !c.is_reduction())
                })
                .map(|r| {
                    (
                        r.bw(if graph { r.graph_us } else { r.stream_us }),
                        r.imp.clone(),
                    )
                })
                .fold((0.0, String::new()), |a, b| if b.0 > a.0 { b } else { a })
        };
        let (s128, si) = best(128 * MIB, false);
        let (g128, gi) = best(128 * MIB, true);
        let (s16, _) = best(16 * MIB, false);
        let (nccl16, nccl128) = match nccl {
            Some((a, b)) => (format!("{a:.0}"), format!("{b:.0}")),
            None => ("-".into(), "-".into()),
        };
        let mut verdict = if s128.max(g128) >= target {
            "target met"
        } else {
            "below target"
        }
        .to_string();
        if let Some((a, b)) = nccl {
            if s16 < a || s128 < b {
                verdict += ", slower than NCCL (stream)";
            }
        }
        println!(
            "{:<15} {:>6.0} | {:<12} {:>7.1} {:<12} {:>7.1} | {:>7} {:>7.1} | {:>7} {:>7.1} | {verdict}",
            c.name(), target, si, s128, gi, g128, nccl16, s16, nccl128, s128
        );
    }
    // 16-bit all-reduce against f16's.
    let ar = |t: Ty| {
        rows.iter()
            .find(|r| {
                r.coll == Coll::AllReduce && r.ty == t && r.bytes == 128 * MIB && r.imp == "sm"
            })
            .map(|r| r.bw(r.stream_us))
    };
    if let Some(h) = ar(Ty::F16) {
        for t in [Ty::BF16, Ty::I16, Ty::U16] {
            if let Some(x) = ar(t) {
                println!(
                    "all_reduce {} 128 MiB: {x:.1} GB/s, {:+.1}% vs f16 {h:.1} ({})",
                    t.name(),
                    100.0 * (x / h - 1.0),
                    if x >= 0.9 * h {
                        "within 10%"
                    } else {
                        "MORE than 10% slower"
                    }
                );
            }
        }
    }
}

// ---- sweep ----------------------------------------------------------------------------------

fn sweep(gpus: Option<usize>, ptx: bool) -> Result<bool> {
    let ctx = Ctx::new(gpus, 128 * MIB + 2 * GUARD + 4096, &timing_modules(), ptx)?;
    let n = ctx.n;
    let grids = [16u32, 32, 48, 64, 96, 128];
    println!("sweep: {n} GPUs; busbw GB/s (stream mode) by grid; rule's grid marked *");
    print!("{:<15} {:<12} {:>8}", "collective", "impl", "size");
    for g in grids {
        print!(" {g:>7}");
    }
    println!();
    let mut bad = 0;
    let mut ok = 0;
    let subjects: Vec<(Coll, Knob)> = vec![
        (Coll::AllReduce, Knob::Default),
        (Coll::AllReduce, Knob::Inflight(4)),
        (Coll::AllReduce, Knob::Inflight(16)),
        (Coll::ReduceScatter, Knob::Default),
        (Coll::ReduceScatter, Knob::Inflight(16)),
        (Coll::Reduce, Knob::Default),
        (Coll::Broadcast, Knob::Default),
        (Coll::Fcollect, Knob::Default),
        (Coll::Fcollect, Knob::Inflight(16)),
        (Coll::Alltoall, Knob::Default),
        (Coll::Gather, Knob::Default),
        (Coll::Scatter, Knob::Default),
    ];
    for (c, k) in subjects {
        for bytes in [16 * MIB, 128 * MIB] {
            let es = if c.is_reduction() { 4 } else { 1 };
            let size = c.size_for(bytes, es, n);
            let rule = direct_grid(c, size * es, n);
            print!("{:<15} {:<12} {:>8}", c.name(), k.name(), fmt_size(bytes));
            for grid in grids {
                let call = Call {
                    coll: c,
                    imp: Imp::Sm(k),
                    ty: Ty::F32,
                    op: Op::Sum,
                    size,
                    root: 0,
                    scale: 1.0,
                    grid: Some(grid),
                };
                match time_call(&ctx, &call, false) {
                    Ok(us) => {
                        let bw = bytes as f64 / (us * 1e3) * c.busbw_factor(n);
                        print!(" {bw:>6.1}{}", if grid == rule { "*" } else { " " });
                        ok += 1;
                    }
                    Err(e) => {
                        print!(" FAILED({e:#})");
                        bad += 1;
                    }
                }
            }
            println!();
        }
    }
    println!("{ok} passed, {bad} failed");
    Ok(bad == 0)
}

// ---- compile-only and main ------------------------------------------------------------------

/// Compiles one job with NVRTC straight to SASS for `sm` (`sm_90`): the options of the
/// library's PTX compile, a real architecture instead of a virtual one.
fn compile_cubin(job: &Job, sm: &str) -> Result<Vec<u8>> {
    use cudarc::nvrtc::{result as nr, sys as ns};
    kernel_probe::nvrtc_available()?;
    let src = CString::new(job.src.as_str())?;
    let name = CString::new(format!("{}.cu", job.name))?;
    let mut opts = vec![
        format!("--gpu-architecture={sm}"),
        "--std=c++17".to_string(),
    ];
    if job.headers {
        opts.push(format!(
            "--include-path={}",
            kernel_probe::cuda_include_dir()?.display()
        ));
    }
    let prog = nr::create_program(&src, Some(&name)).map_err(|e| anyhow!("{e:?}"))?;
    // SAFETY: `prog` was just created and is destroyed once, below; the buffers passed to the
    // size and copy calls are as long as NVRTC says.
    let out = unsafe {
        match nr::compile_program(prog, &opts) {
            Err(e) => {
                let log = nr::get_program_log(prog).unwrap_or_default();
                let log: Vec<u8> = log.iter().map(|&c| c as u8).collect();
                Err(anyhow!(
                    "NVRTC failed on {} ({e:?}):\n{}",
                    job.name,
                    String::from_utf8_lossy(&log)
                        .trim_end_matches('\0')
                        .trim_end()
                ))
            }
            Ok(()) => {
                let mut size = 0usize;
                ns::nvrtcGetCUBINSize(prog, &mut size)
                    .result()
                    .map_err(|e| anyhow!("nvrtcGetCUBINSize: {e:?}"))?;
                let mut buf = vec![0u8; size];
                ns::nvrtcGetCUBIN(prog, buf.as_mut_ptr() as *mut std::ffi::c_char)
                    .result()
                    .map_err(|e| anyhow!("nvrtcGetCUBIN: {e:?}"))?;
                Ok(buf)
            }
        }
    };
    // SAFETY: created above, not destroyed yet.
    unsafe { nr::destroy_program(prog) }.map_err(|e| anyhow!("{e:?}"))?;
    out
}

/// `compile_cubin` for every job, on every core; in job order.
fn compile_all_cubin(jobs: &[Job], sm: &str) -> Result<Vec<Vec<u8>>> {
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(jobs.len().max(1));
    let next = std::sync::atomic::AtomicUsize::new(0);
    let out: Vec<std::sync::Mutex<Option<Result<Vec<u8>>>>> =
        jobs.iter().map(|_| std::sync::Mutex::new(None)).collect();
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                if i >= jobs.len() {
                    break;
                }
                let r = compile_cubin(&jobs[i], sm);
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

fn compile_only(sass: bool) -> Result<bool> {
    let mods = all_modules();
    let jobs: Vec<Job> = mods.iter().map(|m| m.job()).collect();
    let t0 = Instant::now();
    let mut missing = 0;
    let arch = if sass { "sm_90" } else { "compute_90" };
    if sass {
        // SASS (ptxas run too), as `check` and `time` load it: an ELF image per module.
        for (m, c) in mods.iter().zip(compile_all_cubin(&jobs, arch)?) {
            if !c.starts_with(b"\x7fELF") {
                println!("FAILED {m:?}: not an ELF image");
                missing += 1;
            }
        }
    } else {
        let ptx = compile_all(&jobs, arch)?;
        for (m, p) in mods.iter().zip(&ptx) {
            let src = p.to_src();
            for f in m.functions() {
                if !src.contains(&format!(".entry {f}(")) {
                    println!("FAILED {:?}: no entry {f} in the PTX", m);
                    missing += 1;
                }
            }
        }
    }
    let pairs = Op::pairs().len();
    println!(
        "compiled {} modules for {arch} in {:.1} s: {pairs} (type, operator) pairs x 4 reduction kernels, {} reduction variants, {} data-movement variants x 7 kernels, the probe copy",
        jobs.len(),
        t0.elapsed().as_secs_f64(),
        REDUCE_KNOBS.len(),
        MOVE_KNOBS.len()
    );
    println!("{} passed, {missing} failed", jobs.len());
    Ok(missing == 0)
}

#[derive(Parser)]
#[command(about = "Checks and times the large-message collectives of direct.cu")]
struct Cli {
    /// NVRTC-compile every instantiation for compute_90 and exit (no GPU needed).
    #[arg(long)]
    compile_only: bool,
    /// With --compile-only: SASS for sm_90 (what check and time load) instead of PTX.
    #[arg(long)]
    sass: bool,
    /// Use the first N GPUs (default: all).
    #[arg(long, global = true)]
    gpus: Option<usize>,
    /// Seed of the random inputs (default: $GPU_TEST_SEED, else the clock).
    #[arg(long, global = true)]
    seed: Option<u64>,
    /// Load PTX (the driver JIT-compiles it, as the library does) instead of SASS from NVRTC.
    #[arg(long, global = true)]
    ptx: bool,
    #[command(subcommand)]
    cmd: Option<Cmd>,
}

#[derive(Subcommand)]
enum Cmd {
    /// Results against a host reference.
    Check {
        /// Skip the 64 MiB cases.
        #[arg(long)]
        quick: bool,
    },
    /// Times every kernel and copy-engine variant.
    Time,
    /// Busbw by grid size (tuning).
    Sweep,
}

fn run() -> Result<bool> {
    let cli = Cli::parse();
    // Every kernel is loaded before the first launch (cuFuncLoad above); EAGER also covers
    // what the driver loads on its own. Set before the driver initialises.
    if std::env::var_os("CUDA_MODULE_LOADING").is_none() {
        std::env::set_var("CUDA_MODULE_LOADING", "EAGER");
    }
    if cli.compile_only {
        return compile_only(cli.sass);
    }
    let seed = cli.seed.unwrap_or_else(|| {
        std::env::var("GPU_TEST_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map(|d| d.as_secs())
                    .unwrap_or(1)
            })
    });
    match cli.cmd {
        Some(Cmd::Check { quick }) => check(cli.gpus, seed, quick, cli.ptx),
        Some(Cmd::Time) => time(cli.gpus, cli.ptx),
        Some(Cmd::Sweep) => sweep(cli.gpus, cli.ptx),
        None => {
            let a = check(cli.gpus, seed, false, cli.ptx)?;
            let b = time(cli.gpus, cli.ptx)?;
            Ok(a && b)
        }
    }
    .context("large")
}

fn main() -> ExitCode {
    match run() {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            println!("FAILED: {e:#}");
            ExitCode::from(2)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The element of type `t` nearest to `v` (fp8 by search over every code).
    fn encode(t: Ty, v: f64) -> Vec<u8> {
        match t {
            Ty::F32 => (v as f32).to_le_bytes().to_vec(),
            Ty::F64 => v.to_le_bytes().to_vec(),
            Ty::F16 => half::f16::from_f64(v).to_le_bytes().to_vec(),
            Ty::BF16 => half::bf16::from_f64(v).to_le_bytes().to_vec(),
            Ty::F8E4M3 | Ty::F8E5M2 => {
                // Nearest finite code, by binary search over the codes sorted by value.
                static SORTED: std::sync::OnceLock<[Vec<(f64, u8)>; 2]> =
                    std::sync::OnceLock::new();
                let tables = SORTED.get_or_init(|| {
                    [Ty::F8E4M3, Ty::F8E5M2].map(|t| {
                        let mut v: Vec<(f64, u8)> = (0..=255u8)
                            .map(|c| (reference::decode_float(t, &[c]), c))
                            .filter(|(x, _)| x.is_finite())
                            .collect();
                        v.sort_by(|a, b| a.0.total_cmp(&b.0));
                        v
                    })
                });
                let codes = &tables[(t == Ty::F8E5M2) as usize];
                let i = codes.partition_point(|&(x, _)| x < v);
                let best = [i.saturating_sub(1), i.min(codes.len() - 1)]
                    .into_iter()
                    .min_by(|&a, &b| (codes[a].0 - v).abs().total_cmp(&(codes[b].0 - v).abs()))
                    .unwrap();
                vec![codes[best].1]
            }
            _ => unreachable!(),
        }
    }

    /// Start of share k of `parts` over `bytes` in 16-byte units (nvr_d_share).
    fn share(bytes: u64, k: usize, parts: usize) -> u64 {
        let units = bytes.div_ceil(16);
        (units * k as u64 / parts as u64 * 16).min(bytes)
    }

    /// What a correct device leaves, following direct.cu's own addressing: the pairs each PE
    /// copies (push or pull) at its own pointers plus peer offsets, and the copy-engine lists of
    /// `ce_copies`, rather than the harness's rule of what each collective means; so `compare`
    /// passing on it shows that the two agree.
    fn simulate(lay: &Layout, call: &Call, init: &[Img], ptrs: &[(u64, u64)]) -> Vec<Img> {
        let n = lay.n;
        let es = call.es();
        let b = call.size * es;
        let root = call.root;
        let mut out = init.to_vec();
        let mut copy = |dp: usize, d: u64, sp: usize, s: u64, len: u64| {
            let v = init[sp].at(s, len).to_vec();
            out[dp].put(d, &v);
        };
        let knob = match call.imp {
            Imp::Sm(k) => k,
            Imp::Ce { pull } => {
                for (g, &(s, d)) in ptrs.iter().enumerate() {
                    let (remote, local) = lay.ce_copies(call, g, s, d, pull);
                    for x in remote.iter().chain(local.iter()) {
                        copy(x.dst.0, x.dst.1, x.src.0, x.src.1, x.bytes);
                    }
                }
                return out;
            }
            Imp::RsCe { .. } | Imp::CeRed { .. } => Knob::Default,
        };
        let pull = knob == Knob::Pull;
        match call.coll {
            Coll::Broadcast => {
                let algo = match knob {
                    Knob::BcastPush => 1,
                    Knob::BcastPull => 2,
                    Knob::BcastFwd => 3,
                    _ if n <= 2 => 1,
                    _ => 3,
                };
                for (me, &(s, d)) in ptrs.iter().enumerate() {
                    let local = s != d;
                    match algo {
                        1 if me == root => {
                            for j in 0..n {
                                if j != me || local {
                                    copy(j, d, me, s, b);
                                }
                            }
                        }
                        2 if me != root => copy(me, d, root, s, b),
                        3 if me != root => {
                            let r = if me < root { me } else { me - 1 };
                            let (lo, hi) = (share(b, r, n - 1), share(b, r + 1, n - 1));
                            for j in (0..n).filter(|&j| j != root) {
                                copy(j, d + lo, root, s + lo, hi - lo);
                            }
                        }
                        2 | 3 if local => copy(me, d, me, s, b),
                        _ => {}
                    }
                }
            }
            Coll::Fcollect => {
                for (me, &(s, d)) in ptrs.iter().enumerate() {
                    let mine = d + me as u64 * b;
                    let local = s != mine;
                    for j in 0..n {
                        let ju = j as u64;
                        if j == me && !local {
                            continue;
                        }
                        if pull {
                            let from = if j == me || local { s } else { d + ju * b };
                            copy(me, d + ju * b, j, from, b);
                        } else {
                            copy(j, mine, me, s, b);
                        }
                    }
                }
            }
            Coll::Alltoall => {
                for (me, &(s, d)) in ptrs.iter().enumerate() {
                    let m = me as u64;
                    for j in 0..n {
                        let ju = j as u64;
                        if pull {
                            copy(me, d + ju * b, j, s + m * b, b);
                        } else {
                            copy(j, d + m * b, me, s + ju * b, b);
                        }
                    }
                }
            }
            Coll::Gather => {
                for (me, &(s, d)) in ptrs.iter().enumerate() {
                    let m = me as u64;
                    let local = s != d + m * b;
                    if pull {
                        if me == root {
                            for j in 0..n {
                                if j != me {
                                    copy(me, d + j as u64 * b, j, s, b);
                                } else if local {
                                    copy(me, d + m * b, me, s, b);
                                }
                            }
                        }
                    } else if me != root {
                        copy(root, d + m * b, me, s, b);
                    } else if local {
                        copy(me, d + m * b, me, s, b);
                    }
                }
            }
            Coll::Scatter => {
                for (me, &(s, d)) in ptrs.iter().enumerate() {
                    let m = me as u64;
                    let local = d != s + m * b;
                    if pull {
                        if me != root {
                            copy(me, d, root, s + m * b, b);
                        } else if local {
                            copy(me, d, me, s + m * b, b);
                        }
                    } else if me == root {
                        for j in 0..n {
                            if j != me || local {
                                copy(j, d, me, s + j as u64 * b, b);
                            }
                        }
                    }
                }
            }
            Coll::AllReduce | Coll::ReduceScatter | Coll::Reduce => {
                // Element k is reduced by its owner from every member's copy at the owner's
                // pointers and stored where the owner's kernel stores it.
                let t = call.ty;
                let value =
                    |inputs: &[&[u8]]| match reference::reduce(t, call.op, call.scale, inputs) {
                        Expect::Bits(v) => v.to_le_bytes()[..t.size()].to_vec(),
                        Expect::Near { value, .. } => encode(t, value),
                    };
                for k in 0..call.size {
                    let owner = match (call.coll, knob) {
                        (Coll::Reduce, Knob::RootPull) => root,
                        (Coll::ReduceScatter, _) => usize::MAX,
                        _ => k as usize % n,
                    };
                    let owners: Vec<usize> = if owner == usize::MAX {
                        (0..n).collect()
                    } else {
                        vec![owner]
                    };
                    for o in owners {
                        let blk = if call.coll == Coll::ReduceScatter {
                            o as u64 * b
                        } else {
                            0
                        };
                        let inputs: Vec<&[u8]> = (0..n)
                            .map(|j| init[j].at(ptrs[o].0 + blk + k * es, es))
                            .collect();
                        let v = value(&inputs);
                        let at = ptrs[o].1 + k * es;
                        match call.coll {
                            Coll::AllReduce => (0..n).for_each(|j| out[j].put(at, &v)),
                            Coll::ReduceScatter => out[o].put(at, &v),
                            _ => out[root].put(at, &v),
                        }
                    }
                }
            }
        }
        out
    }

    fn lay(n: usize) -> Layout {
        Layout {
            n,
            ra: 1 << 20,
            rb: 512 << 20,
        }
    }

    #[test]
    fn grid_rule() {
        assert_eq!(direct_grid(Coll::AllReduce, 8, 2), 1);
        assert_eq!(direct_grid(Coll::AllReduce, MIB, 2), 32);
        assert_eq!(direct_grid(Coll::AllReduce, 128 * MIB, 2), 128);
        assert_eq!(direct_grid(Coll::ReduceScatter, MIB, 2), 64);
        assert_eq!(direct_grid(Coll::Fcollect, MIB / 2, 2), 32);
        assert_eq!(direct_grid(Coll::Broadcast, 0, 8), 1);
    }

    /// Every small case of `check`, for 1 to 4 PEs, passes `compare` on the simulated device,
    /// and a flipped byte in an output, in a guard or in an untouched input is caught.
    #[test]
    fn simulated_device_passes_every_check_case() {
        let mut rng = Rng::new(7);
        for n in 1..=4 {
            let lay = lay(n);
            let mut ran = 0;
            for case in check_cases(n, true) {
                if case.call.size > 5000 {
                    continue;
                }
                let init = initial_images(&lay, &case, &mut rng);
                let ptrs: Vec<(u64, u64)> = (0..n)
                    .map(|g| lay.pointers(&case.call, case.place, g))
                    .collect();
                let mut got = simulate(&lay, &case.call, &init, &ptrs);
                let errs = compare(&lay, &case, &init, &got, &ptrs);
                assert!(errs.is_empty(), "n={n} {:?}: {errs:?}", case);
                ran += 1;
                // Corruptions: the last output byte of GPU 0 (or of the root), the first guard
                // byte of region A.
                let g = if case.call.coll.rooted() {
                    case.call.root
                } else {
                    0
                };
                let (_, d) = ptrs[g];
                let (s_len, d_len) = case.call.coll.extents(case.call.size, case.call.es(), n);
                let receives =
                    !matches!(case.call.coll, Coll::Gather | Coll::Reduce) || g == case.call.root;
                if receives && d_len > 0 && n > 1 {
                    let h = d + d_len - 1;
                    let mut v = got[g].at(h, 1).to_vec();
                    v[0] ^= 0x5A;
                    got[g].put(h, &v);
                    assert!(
                        !compare(&lay, &case, &init, &got, &ptrs).is_empty(),
                        "n={n} {case:?}: a wrong output byte passed"
                    );
                    v[0] ^= 0x5A;
                    got[g].put(h, &v);
                }
                let _ = s_len;
                got[0].a[0] ^= 1;
                assert!(
                    !compare(&lay, &case, &init, &got, &ptrs).is_empty(),
                    "n={n} {case:?}: a wrong guard byte passed"
                );
            }
            assert!(ran > 500, "{ran} cases for n={n}");
        }
    }

    /// Host time of the reference side of the largest checks (run with --release --ignored):
    /// what `check` spends besides the GPUs.
    #[test]
    #[ignore = "a timing, not a check: run with --release --ignored"]
    fn host_time_of_64_mib_cases() {
        let mut rng = Rng::new(1);
        let lay = lay(2);
        for case in check_cases(2, false) {
            if case.call.coll.nccl_bytes(case.call.size, case.call.es(), 2) < 64 * MIB {
                continue;
            }
            let t0 = Instant::now();
            let init = initial_images(&lay, &case, &mut rng);
            let ptrs: Vec<(u64, u64)> = (0..2)
                .map(|g| lay.pointers(&case.call, case.place, g))
                .collect();
            let t1 = Instant::now();
            let got = simulate(&lay, &case.call, &init, &ptrs);
            let t2 = Instant::now();
            let errs = compare(&lay, &case, &init, &got, &ptrs);
            assert!(errs.is_empty(), "{errs:?}");
            println!(
                "{}: inputs {:.2} s, compare {:.2} s (simulation {:.2} s)",
                case.call.label(),
                (t1 - t0).as_secs_f64(),
                t2.elapsed().as_secs_f64(),
                (t2 - t1).as_secs_f64()
            );
        }
    }

    /// NVRTC makes SASS of a reduction and of the data-movement module (needs libnvrtc: run
    /// with --ignored after `. scripts/setup.sh`).
    #[test]
    #[ignore = "needs libnvrtc: run with --ignored after . scripts/setup.sh"]
    fn sass_of_two_modules() {
        for m in [
            Module::Reduce(Ty::BF16, Op::Avg, Knob::Default),
            Module::Move(Knob::Default),
        ] {
            let bin = compile_cubin(&m.job(), "sm_90").unwrap();
            assert!(bin.starts_with(b"\x7fELF"), "{m:?}");
        }
        let mut bad = Module::Move(Knob::Default).job();
        bad.src += "\nthis is not C++;\n";
        let e = compile_cubin(&bad, "sm_90").unwrap_err().to_string();
        assert!(e.contains("NVRTC failed"), "{e}");
    }
}
