//! `small`: checks and times the one-shot LL collectives of `ll.cu` and the team barrier on
//! every visible GPU of this host, one host thread per GPU (one PE per GPU).
//!
//! ```text
//! small --compile-only        compile every instantiation with NVRTC (no GPU needed)
//! small check [--seed S]      correctness against a host reference, every collective, type,
//!                             operator, size, root, in-place form and alignment; CUDA graphs,
//!                             two channels on two streams, mixed sequences on one channel,
//!                             abort, timeout and limit errors
//! small time                  µs per call, back to back on a stream and in a CUDA graph
//! ```
//! Exits non-zero on any failure; the last line is `N passed, M failed`.
use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use clap::{Parser, Subcommand};
use cudarc::driver::{sys, CudaFunction, CudaStream};
use cudarc::nvrtc::Ptx;
use kernel_probe::*;

const LL_CU: &str = include_str!("../../../nvshmem/src/kernels/ll.cu");
const EMPTY_CU: &str = "extern \"C\" __global__ void nvr_empty() {}\n";

#[derive(Parser)]
#[command(about = "Checks and times the LL collective kernels on every visible GPU")]
struct Cli {
    /// Compile every kernel instantiation with NVRTC for --arch and exit (needs no GPU).
    #[arg(long)]
    compile_only: bool,
    /// Architecture for --compile-only (on GPUs: the device's own).
    #[arg(long, default_value = "compute_90")]
    arch: String,
    /// With --compile-only: also write each instantiation's PTX into this folder (to assemble
    /// it with ptxas, e.g. for register counts).
    #[arg(long)]
    ptx_dir: Option<std::path::PathBuf>,
    /// Use at most this many GPUs.
    #[arg(long, global = true)]
    gpus: Option<usize>,
    /// PEs to run (default: one per GPU); more PEs than GPUs share them, several to a GPU in
    /// one context (every multi-PE path on one GPU; times then mean nothing).
    #[arg(long, global = true)]
    pes: Option<usize>,
    /// LL bytes of one (parity, peer, block) region; a multiple of 16, at least 8192. The LL
    /// cap (payload per sender-receiver pair) is 4 times this.
    #[arg(long, global = true, default_value_t = 65536)]
    ll_bytes: u32,
    /// Size of each GPU's fake symmetric heap, MiB.
    #[arg(long, global = true, default_value_t = 1024)]
    heap_mib: usize,
    #[command(subcommand)]
    mode: Option<Mode>,
}

#[derive(Subcommand)]
enum Mode {
    /// Correctness on all GPUs.
    Check {
        /// Seed of the random inputs (default: from the clock; printed either way).
        #[arg(long)]
        seed: Option<u64>,
        /// Run only the test groups whose name contains this.
        #[arg(long)]
        filter: Option<String>,
        /// A check that has not finished after this many ms is aborted (abort word).
        #[arg(long, default_value_t = 2000)]
        watchdog_ms: u64,
    },
    /// Latency per call, stream and graph mode.
    Time {
        /// Calls back to back on a stream per measurement.
        #[arg(long, default_value_t = 2000)]
        iters: usize,
        /// Calls captured in one graph.
        #[arg(long, default_value_t = 100)]
        graph_calls: usize,
        /// Replays of the graph per measurement.
        #[arg(long, default_value_t = 20)]
        graph_replays: usize,
        /// Time only the rows whose name contains this.
        #[arg(long)]
        filter: Option<String>,
    },
}

// ---- collectives and the launch rule --------------------------------------------------------

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Coll {
    AllReduce,
    Reduce,
    ReduceScatter,
    Broadcast,
    Fcollect,
    Alltoall,
    Gather,
    Scatter,
    Barrier,
    Sync,
    /// The empty kernel (timing floor).
    Empty,
}

impl Coll {
    const LL: [Coll; 8] = [
        Coll::AllReduce,
        Coll::Reduce,
        Coll::ReduceScatter,
        Coll::Broadcast,
        Coll::Fcollect,
        Coll::Alltoall,
        Coll::Gather,
        Coll::Scatter,
    ];

    fn name(self) -> &'static str {
        match self {
            Coll::AllReduce => "all_reduce",
            Coll::Reduce => "reduce",
            Coll::ReduceScatter => "reduce_scatter",
            Coll::Broadcast => "broadcast",
            Coll::Fcollect => "fcollect",
            Coll::Alltoall => "alltoall",
            Coll::Gather => "gather",
            Coll::Scatter => "scatter",
            Coll::Barrier => "barrier",
            Coll::Sync => "sync",
            Coll::Empty => "empty kernel",
        }
    }

    fn rooted(self) -> bool {
        matches!(
            self,
            Coll::Reduce | Coll::Broadcast | Coll::Gather | Coll::Scatter
        )
    }

    fn reduction(self) -> bool {
        matches!(self, Coll::AllReduce | Coll::Reduce | Coll::ReduceScatter)
    }

    fn ll(self) -> bool {
        Coll::LL.contains(&self)
    }

    /// (src bytes, dst bytes) of one PE for a per-pair payload of x bytes in a team of n.
    fn extents(self, x: usize, n: usize) -> (usize, usize) {
        match self {
            Coll::AllReduce | Coll::Reduce | Coll::Broadcast => (x, x),
            Coll::ReduceScatter | Coll::Scatter => (n * x, x),
            Coll::Fcollect | Coll::Gather => (x, n * x),
            Coll::Alltoall => (n * x, n * x),
            Coll::Barrier | Coll::Sync | Coll::Empty => (0, 0),
        }
    }
}

/// The reduction kernels of one instantiation, in this order.
const RED_FNS: [&str; 3] = [
    "nvr_ll_all_reduce",
    "nvr_ll_reduce",
    "nvr_ll_reduce_scatter",
];
/// The type-free kernels, in this order.
const MOVE_FNS: [&str; 6] = [
    "nvr_ll_broadcast",
    "nvr_ll_fcollect",
    "nvr_ll_alltoall",
    "nvr_ll_gather",
    "nvr_ll_scatter",
    "nvr_barrier",
];

/// THE LAUNCH RULE of ll.cu (grid must be equal on every member; the host computes it from
/// the per-pair payload `x` bytes and the team size `n`):
/// grid = min(8, max(1, ceil(x / 4096))); ppb = ceil(ceil(x / 8) / grid);
/// block = min(512, roundup32(ppb * G) + 32), G = 1, 2, 4, 8 for n = 1, 2, 3-4, 5-8.
fn ll_geometry(x: u64, n: usize) -> (u32, u32) {
    let grid = x.div_ceil(4096).clamp(1, LL_BLOCKS as u64);
    let ppb = x.div_ceil(8).div_ceil(grid);
    let g = match n {
        0 | 1 => 1,
        2 => 2,
        3 | 4 => 4,
        _ => 8,
    };
    let block = ((ppb * g).next_multiple_of(32) + 32).min(512);
    (grid as u32, block as u32)
}

/// The most payload bytes per (sender, receiver) pair an LL call may carry.
fn ll_cap(ll_bytes: u32) -> u64 {
    (LL_BLOCKS as u64) * (ll_bytes as u64) / 2
}

/// One launch.
#[derive(Clone, Copy, Debug)]
struct Call {
    coll: Coll,
    ty: Ty,
    op: Op,
    root: i32,
    src: u64,
    dst: u64,
    /// Elements (reductions) or bytes (data movement).
    len: u64,
    scale: f64,
}

impl Call {
    fn barrier(coll: Coll) -> Call {
        Call {
            coll,
            ty: Ty::U8,
            op: Op::Sum,
            root: 0,
            src: 0,
            dst: 0,
            len: 0,
            scale: 1.0,
        }
    }

    /// Per-pair payload bytes.
    fn x(&self) -> u64 {
        if self.coll.reduction() {
            self.len * self.ty.size() as u64
        } else {
            self.len
        }
    }

    fn geometry(&self, n: usize) -> (u32, u32) {
        match self.coll {
            Coll::Barrier | Coll::Sync | Coll::Empty => (1, 32),
            _ => ll_geometry(self.x(), n),
        }
    }
}

/// One GPU's loaded kernels.
struct Kernels {
    mv: Vec<CudaFunction>,
    red: HashMap<(Ty, Op), Vec<CudaFunction>>,
    empty: CudaFunction,
}

impl Kernels {
    fn get(&self, c: &Call) -> Result<&CudaFunction> {
        let red = |i: usize| -> Result<&CudaFunction> {
            self.red
                .get(&(c.ty, c.op))
                .map(|v| &v[i])
                .ok_or_else(|| anyhow!("{}_{} was not loaded", c.ty.name(), c.op.name()))
        };
        Ok(match c.coll {
            Coll::AllReduce => red(0)?,
            Coll::Reduce => red(1)?,
            Coll::ReduceScatter => red(2)?,
            Coll::Broadcast => &self.mv[0],
            Coll::Fcollect => &self.mv[1],
            Coll::Alltoall => &self.mv[2],
            Coll::Gather => &self.mv[3],
            Coll::Scatter => &self.mv[4],
            Coll::Barrier | Coll::Sync => &self.mv[5],
            Coll::Empty => &self.empty,
        })
    }
}

/// Enqueues one call on `stream`.
fn launch_call(k: &Kernels, stream: &CudaStream, team: &NvrTeam, c: &Call) -> Result<()> {
    let f = k.get(c)?;
    let (grid, block) = c.geometry(team.n as usize);
    let t = *team;
    let (root, src, dst, len, scale) = (c.root, c.src, c.dst, c.len, c.scale);
    let fence: i32 = (c.coll == Coll::Barrier) as i32;
    let mut args: Vec<*mut c_void> = match c.coll {
        Coll::AllReduce | Coll::ReduceScatter => {
            vec![arg(&t), arg(&src), arg(&dst), arg(&len), arg(&scale)]
        }
        Coll::Reduce => vec![
            arg(&t),
            arg(&root),
            arg(&src),
            arg(&dst),
            arg(&len),
            arg(&scale),
        ],
        Coll::Broadcast | Coll::Gather | Coll::Scatter => {
            vec![arg(&t), arg(&root), arg(&src), arg(&dst), arg(&len)]
        }
        Coll::Fcollect | Coll::Alltoall => vec![arg(&t), arg(&src), arg(&dst), arg(&len)],
        Coll::Barrier | Coll::Sync => vec![arg(&t), arg(&fence)],
        Coll::Empty => vec![],
    };
    // SAFETY: the argument list matches the kernel's signature in ll.cu (nvr_team by value,
    // int root, pointers and unsigned long long as u64, double scale, int fence); every
    // address was carved from the fake heap with the extents the call reads and writes, and
    // the values live until cuLaunchKernel returns (it copies them).
    unsafe { launch(f, stream, grid, block, &mut args) }
}

// ---- compiling and loading ------------------------------------------------------------------

fn jobs(pairs: &[(Ty, Op)]) -> Vec<Job> {
    let mut v = vec![
        Job {
            name: "ll_move".into(),
            src: source("", LL_CU),
            headers: false,
        },
        Job {
            name: "empty".into(),
            src: EMPTY_CU.into(),
            headers: false,
        },
    ];
    for &(t, op) in pairs {
        v.push(Job {
            name: format!("ll_{}_{}", t.name(), op.name()),
            src: source(&reduce_prefix(t, op), LL_CU),
            headers: t.header().is_some(),
        });
    }
    v
}

fn job_names(i: usize) -> &'static [&'static str] {
    match i {
        0 => &MOVE_FNS,
        1 => &["nvr_empty"],
        _ => &RED_FNS,
    }
}

/// Compiles the move kernels, the empty kernel and the reductions of `pairs` for the GPUs'
/// architecture and loads them on every GPU (loads spread over the cores).
fn load_kernels(node: &Node, pairs: &[(Ty, Op)]) -> Result<Vec<Kernels>> {
    let arch = node.gpus[0].arch.clone();
    if node.gpus.iter().any(|g| g.arch != arch) {
        bail!("the GPUs differ in architecture");
    }
    let jobs = jobs(pairs);
    let t0 = Instant::now();
    let ptx = compile_all(&jobs, &arch)?;
    println!(
        "compiled {} instantiations for {arch} in {:.1} s",
        jobs.len(),
        t0.elapsed().as_secs_f64()
    );
    let t0 = Instant::now();
    let items: Vec<(usize, usize)> = (0..node.n())
        .flat_map(|g| (0..jobs.len()).map(move |j| (g, j)))
        .collect();
    let out: Vec<std::sync::Mutex<Option<Result<Vec<CudaFunction>>>>> =
        items.iter().map(|_| std::sync::Mutex::new(None)).collect();
    let next = std::sync::atomic::AtomicUsize::new(0);
    let threads = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .min(items.len());
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= items.len() {
                    break;
                }
                let (g, j) = items[i];
                let gpu = &node.gpus[g];
                let r = gpu
                    .ctx
                    .bind_to_thread()
                    .map_err(anyhow::Error::from)
                    .and_then(|_| gpu.load(&ptx[j], job_names(j)));
                *out[i].lock().unwrap_or_else(|p| p.into_inner()) = Some(r);
            });
        }
    });
    let mut loaded: Vec<Vec<Option<Vec<CudaFunction>>>> =
        (0..node.n()).map(|_| vec![None; jobs.len()]).collect();
    for (i, m) in out.into_iter().enumerate() {
        let (g, j) = items[i];
        let r = m
            .into_inner()
            .unwrap_or_else(|p| p.into_inner())
            .unwrap_or_else(|| Err(anyhow!("not loaded")));
        loaded[g][j] = Some(r.with_context(|| format!("loading {} on GPU {g}", jobs[j].name))?);
    }
    println!(
        "loaded them on {} GPU(s) in {:.1} s",
        node.n(),
        t0.elapsed().as_secs_f64()
    );
    Ok(loaded
        .into_iter()
        .map(|mut l| {
            let mv = l[0].take().unwrap_or_default();
            let empty = l[1].take().unwrap_or_default().remove(0);
            let red = pairs
                .iter()
                .zip(l.into_iter().skip(2))
                .map(|(&p, f)| (p, f.unwrap_or_default()))
                .collect();
            Kernels { mv, red, empty }
        })
        .collect())
}

fn compile_only(arch: &str, ptx_dir: Option<&std::path::Path>) -> Result<(usize, usize)> {
    let pairs = Op::pairs();
    let jobs = jobs(&pairs);
    println!(
        "compiling {} instantiations for {arch}: ll.cu without prefix ({}), ll.cu for {} (type, operator) pairs ({}), the empty kernel",
        jobs.len(),
        MOVE_FNS.join(" "),
        pairs.len(),
        RED_FNS.join(" ")
    );
    let t0 = Instant::now();
    let mut passed = 0;
    let mut failed = 0;
    // Compile one by one in parallel batches, so one failure does not hide the others.
    let results: Vec<Result<Ptx>> = {
        let ptx = std::sync::Mutex::new(Vec::new());
        let next = std::sync::atomic::AtomicUsize::new(0);
        let threads = std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1);
        std::thread::scope(|s| {
            for _ in 0..threads {
                s.spawn(|| loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= jobs.len() {
                        break;
                    }
                    let r = compile(&jobs[i], arch);
                    ptx.lock().unwrap_or_else(|p| p.into_inner()).push((i, r));
                });
            }
        });
        let mut v = ptx.into_inner().unwrap_or_else(|p| p.into_inner());
        v.sort_by_key(|(i, _)| *i);
        v.into_iter().map(|(_, r)| r).collect()
    };
    for (j, (job, r)) in jobs.iter().zip(results).enumerate() {
        match r {
            Ok(p) => {
                let text = p.to_src();
                if let Some(d) = ptx_dir {
                    std::fs::create_dir_all(d)?;
                    std::fs::write(d.join(format!("{}.ptx", job.name)), &text)?;
                }
                let missing: Vec<_> = job_names(j)
                    .iter()
                    .filter(|f| !text.contains(&format!(".entry {f}(")))
                    .collect();
                let local = text.contains(".local");
                if missing.is_empty() {
                    passed += 1;
                    if local {
                        println!("note: {} uses local memory", job.name);
                    }
                } else {
                    failed += 1;
                    println!("FAILED {}: PTX lacks {missing:?}", job.name);
                }
            }
            Err(e) => {
                failed += 1;
                println!("FAILED {e:#}");
            }
        }
    }
    println!(
        "{} instantiations compiled for {arch} in {:.1} s ({} kernels)",
        passed,
        t0.elapsed().as_secs_f64(),
        MOVE_FNS.len() + 1 + RED_FNS.len() * pairs.len()
    );
    Ok((passed, failed))
}

// ---- random data and the host reference -----------------------------------------------------

/// splitmix64.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }
}

fn f8e4m3(b: u8) -> f64 {
    let s = if b & 0x80 != 0 { -1.0 } else { 1.0 };
    let e = ((b >> 3) & 0xf) as i32;
    let m = (b & 7) as f64;
    if b & 0x7f == 0x7f {
        return f64::NAN;
    }
    if e == 0 {
        s * m / 8.0 * 2f64.powi(-6)
    } else {
        s * (1.0 + m / 8.0) * 2f64.powi(e - 7)
    }
}

fn f8e5m2(b: u8) -> f64 {
    let s = if b & 0x80 != 0 { -1.0 } else { 1.0 };
    let e = ((b >> 2) & 0x1f) as i32;
    let m = (b & 3) as f64;
    if e == 31 {
        return if m == 0.0 {
            s * f64::INFINITY
        } else {
            f64::NAN
        };
    }
    if e == 0 {
        s * m / 4.0 * 2f64.powi(-14)
    } else {
        s * (1.0 + m / 4.0) * 2f64.powi(e - 15)
    }
}

/// The value of a float element.
fn decode(ty: Ty, b: &[u8]) -> f64 {
    match ty {
        Ty::F32 => f32::from_le_bytes([b[0], b[1], b[2], b[3]]) as f64,
        Ty::F64 => f64::from_le_bytes(b[..8].try_into().unwrap_or([0; 8])),
        Ty::F16 => half::f16::from_bits(u16::from_le_bytes([b[0], b[1]])).to_f64(),
        Ty::BF16 => half::bf16::from_bits(u16::from_le_bytes([b[0], b[1]])).to_f64(),
        Ty::F8E4M3 => f8e4m3(b[0]),
        Ty::F8E5M2 => f8e5m2(b[0]),
        _ => f64::NAN,
    }
}

/// An integer element, sign-extended for signed types.
fn load_int(ty: Ty, b: &[u8]) -> u64 {
    let mut w = [0u8; 8];
    w[..ty.size()].copy_from_slice(&b[..ty.size()]);
    let v = u64::from_le_bytes(w);
    if ty.is_signed() {
        let sh = 64 - 8 * ty.size() as u32;
        (((v << sh) as i64) >> sh) as u64
    } else {
        v
    }
}

/// Random elements for (ty, op): floats in ranges where sums and products of up to 8 members
/// stay far from overflow (prod: magnitudes in [0.5, 2]); integers full-width; bool: half
/// zero, the rest any non-zero byte.
fn gen_elems(rng: &mut Rng, ty: Ty, op: Op, count: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(count * ty.size());
    let sign = |rng: &mut Rng| if rng.next() & 1 == 0 { 1.0 } else { -1.0 };
    for _ in 0..count {
        let mag = |rng: &mut Rng, lim: f64| {
            if op == Op::Prod {
                sign(rng) * (0.5 + 1.5 * rng.unit())
            } else {
                lim * (2.0 * rng.unit() - 1.0)
            }
        };
        match ty {
            Ty::F32 => out.extend_from_slice(&(mag(rng, 100.0) as f32).to_le_bytes()),
            Ty::F64 => out.extend_from_slice(&mag(rng, 100.0).to_le_bytes()),
            Ty::F16 => out.extend_from_slice(&half::f16::from_f64(mag(rng, 8.0)).to_le_bytes()),
            Ty::BF16 => out.extend_from_slice(&half::bf16::from_f64(mag(rng, 8.0)).to_le_bytes()),
            Ty::F8E4M3 | Ty::F8E5M2 => loop {
                let b = rng.next() as u8;
                let v = decode(ty, &[b]);
                let fits = if op == Op::Prod {
                    (0.5..=2.0).contains(&v.abs())
                } else {
                    v.abs() <= 16.0
                };
                if v.is_finite() && fits {
                    out.push(b);
                    break;
                }
            },
            Ty::Bool => out.push(if rng.next() & 1 == 0 {
                0
            } else {
                1 + rng.below(255) as u8
            }),
            _ => out.extend_from_slice(&rng.next().to_le_bytes()[..ty.size()]),
        }
    }
    out
}

/// PreMulSum's scale for a type (integers take integer scales).
fn scale_for(ty: Ty, op: Op) -> f64 {
    match (op, ty) {
        (Op::PreMulSum, t) if t.is_signed() => -3.0,
        (Op::PreMulSum, t) if t.is_integer() => 3.0,
        (Op::PreMulSum, _) => 0.37,
        _ => 1.0,
    }
}

/// (relative spacing of the output type, its smallest subnormal, unit round-off of the
/// accumulator).
fn float_eps(ty: Ty) -> (f64, f64, f64) {
    let f32acc = 2f64.powi(-24);
    match ty {
        Ty::F32 => (2f64.powi(-23), 2f64.powi(-149), f32acc),
        Ty::F64 => (2f64.powi(-52), 0.0, 2f64.powi(-53)),
        Ty::F16 => (2f64.powi(-10), 2f64.powi(-24), f32acc),
        Ty::BF16 => (2f64.powi(-7), 2f64.powi(-133), f32acc),
        Ty::F8E4M3 => (2f64.powi(-3), 2f64.powi(-9), f32acc),
        Ty::F8E5M2 => (2f64.powi(-2), 2f64.powi(-16), f32acc),
        _ => (0.0, 0.0, 0.0),
    }
}

/// The expected result of one element combined over the members (in team order): exact bytes
/// for integers and bool, (value, tolerance) for floats (reference in f64).
enum Expected {
    Bytes(Vec<u8>),
    Float(f64, f64),
}

fn reduce_ref(ty: Ty, op: Op, elems: &[&[u8]], scale: f64) -> Expected {
    let n = elems.len();
    if ty == Ty::Bool {
        let v: Vec<u64> = elems.iter().map(|b| (b[0] != 0) as u64).collect();
        let r = match op {
            Op::Min | Op::And => v.iter().fold(1, |a, &b| a & b),
            Op::Max | Op::Or => v.iter().fold(0, |a, &b| a | b),
            _ => 0,
        };
        return Expected::Bytes(vec![(r != 0) as u8]);
    }
    if ty.is_integer() {
        let v: Vec<u64> = elems.iter().map(|b| load_int(ty, b)).collect();
        let s = scale as i64 as u64;
        let signed = ty.is_signed();
        let r = match op {
            Op::Sum => v.iter().fold(0u64, |a, &b| a.wrapping_add(b)),
            Op::PreMulSum => v
                .iter()
                .fold(0u64, |a, &b| a.wrapping_add(s.wrapping_mul(b))),
            Op::Avg => {
                let sum = v.iter().fold(0u64, |a, &b| a.wrapping_add(b));
                if signed {
                    (sum as i64).wrapping_div(n as i64) as u64
                } else {
                    sum / n as u64
                }
            }
            Op::Prod => v.iter().skip(1).fold(v[0], |a, &b| a.wrapping_mul(b)),
            Op::And => v.iter().fold(u64::MAX, |a, &b| a & b),
            Op::Or => v.iter().fold(0, |a, &b| a | b),
            Op::Min if signed => v.iter().map(|&x| x as i64).min().unwrap_or(0) as u64,
            Op::Max if signed => v.iter().map(|&x| x as i64).max().unwrap_or(0) as u64,
            Op::Min => v.iter().copied().min().unwrap_or(0),
            Op::Max => v.iter().copied().max().unwrap_or(0),
        };
        return Expected::Bytes(r.to_le_bytes()[..ty.size()].to_vec());
    }
    let x: Vec<f64> = elems.iter().map(|b| decode(ty, b)).collect();
    let (rel, sub, acc) = float_eps(ty);
    let s = if ty == Ty::F64 {
        scale
    } else {
        scale as f32 as f64
    };
    let nf = n as f64;
    match op {
        Op::Sum | Op::Avg | Op::PreMulSum => {
            let pre: Vec<f64> = x
                .iter()
                .map(|&v| if op == Op::PreMulSum { v * s } else { v })
                .collect();
            let mut r: f64 = pre.iter().sum();
            let mut abs: f64 = pre.iter().map(|v| v.abs()).sum();
            if op == Op::Avg {
                r /= nf;
                abs /= nf;
            }
            Expected::Float(r, 2.0 * nf * acc * abs + rel * r.abs() + sub)
        }
        Op::Prod => {
            let r: f64 = x.iter().product();
            Expected::Float(r, (2.0 * nf * acc + rel) * r.abs() + sub)
        }
        Op::Min => Expected::Float(x.iter().copied().fold(f64::INFINITY, f64::min), 0.0),
        Op::Max => Expected::Float(x.iter().copied().fold(f64::NEG_INFINITY, f64::max), 0.0),
        Op::And | Op::Or => Expected::Float(f64::NAN, 0.0),
    }
}

// ---- the environment: GPUs, streams, channels, buffers --------------------------------------

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum TeamKind {
    /// Every GPU, in order.
    World,
    /// Every GPU, in reverse order (team index != GPU index).
    Reversed,
    /// Each GPU alone (teams of 1).
    Single,
}

/// Where everything lives, per GPU (plain data, so plans can be built and checked without
/// GPUs): heap bases, host records, channels and the arena tests carve their buffers from.
struct Layout {
    bases: Vec<u64>,
    aborts: Vec<u64>,
    statuses: Vec<u64>,
    /// Channel of (team kind, stream).
    chans: HashMap<(u8, usize), Channel>,
    /// A channel for the error tests (zeroed after each).
    spare: Channel,
    /// The arena the plans carve windows from (heap offset, bytes).
    arena: usize,
    arena_len: usize,
    ll_bytes: u32,
}

impl Layout {
    fn n(&self) -> usize {
        self.bases.len()
    }

    fn cap(&self) -> u64 {
        ll_cap(self.ll_bytes)
    }

    fn addr(&self, g: usize, off: usize) -> u64 {
        self.bases[g] + off as u64
    }

    fn teams(&self, kind: TeamKind) -> Vec<Vec<usize>> {
        let n = self.n();
        match kind {
            TeamKind::World => vec![(0..n).collect()],
            TeamKind::Reversed => vec![(0..n).rev().collect()],
            TeamKind::Single => (0..n).map(|g| vec![g]).collect(),
        }
    }

    /// The descriptor of team index `me` of the team `members` (GPU indices, team order) on
    /// channel `ch` (as Node::team).
    fn team_on(&self, ch: Channel, members: &[usize], me: usize, timeout_ns: u64) -> NvrTeam {
        let g = members[me];
        let mut off = [0i64; MAX_TEAM];
        for (j, &m) in members.iter().enumerate() {
            off[j] = self.bases[m].wrapping_sub(self.bases[g]) as i64;
        }
        NvrTeam {
            off,
            n: members.len() as i32,
            me: me as i32,
            chan: self.addr(g, ch.off),
            ll_bytes: ch.ll_bytes,
            pad_: 0,
            abort: self.aborts[g],
            status: self.statuses[g],
            timeout_ns,
        }
    }

    fn team(&self, kind: TeamKind, stream: usize, members: &[usize], me: usize) -> NvrTeam {
        self.team_on(self.chans[&(kind as u8, stream)], members, me, 0)
    }
}

struct Env {
    node: Node,
    kernels: Vec<Kernels>,
    /// Two streams per GPU.
    streams: Vec<[Arc<CudaStream>; 2]>,
    lay: Layout,
    watchdog: Duration,
}

impl std::ops::Deref for Env {
    type Target = Layout;
    fn deref(&self) -> &Layout {
        &self.lay
    }
}

impl Env {
    fn new(node: Node, kernels: Vec<Kernels>, ll_bytes: u32, watchdog: Duration) -> Result<Env> {
        let mut streams = Vec::new();
        for g in &node.gpus {
            streams.push([g.ctx.new_stream()?, g.ctx.new_stream()?]);
        }
        let mut chans = HashMap::new();
        for kind in [TeamKind::World, TeamKind::Reversed, TeamKind::Single] {
            for s in 0..2 {
                chans.insert((kind as u8, s), node.channel(ll_bytes)?);
            }
        }
        let spare = node.channel(ll_bytes)?;
        let arena_len = (node.heap_bytes() - node.alloc(0)?).saturating_sub(1 << 20);
        let arena = node.alloc(arena_len)?;
        let lay = Layout {
            bases: node.gpus.iter().map(|g| g.heap).collect(),
            aborts: node.gpus.iter().map(|g| g.abort).collect(),
            statuses: node.gpus.iter().map(|g| g.status).collect(),
            chans,
            spare,
            arena,
            arena_len,
            ll_bytes,
        };
        Ok(Env {
            node,
            kernels,
            streams,
            lay,
            watchdog,
        })
    }

    /// Zeroes every channel on every GPU (after an aborted call left them undefined).
    fn reset_channels(&self) -> Result<()> {
        for ch in self.chans.values().chain([&self.spare]) {
            self.node.zero(ch.off, ch.bytes())?;
        }
        Ok(())
    }

    /// Waits for `streams` of GPU `g`; after the watchdog sets every abort word, and gives up
    /// 3 s later. Returns whether it had to abort.
    fn wait(&self, streams: &[&CudaStream], aborted: &AtomicBool) -> Result<bool> {
        let t0 = Instant::now();
        let mut fired = false;
        loop {
            let mut done = true;
            for s in streams {
                done &= stream_done(s)?;
            }
            if done {
                return Ok(fired);
            }
            let e = t0.elapsed();
            if !fired && e > self.watchdog {
                fired = true;
                aborted.store(true, Ordering::SeqCst);
                self.node.set_abort(1);
            }
            if e > self.watchdog + Duration::from_secs(3) {
                bail!("kernels still running 3 s after the abort word was set");
            }
            std::thread::sleep(Duration::from_micros(20));
        }
    }

    fn status_report(&self) -> String {
        (0..self.n())
            .map(|g| {
                let s = self.node.status(g);
                format!(
                    "GPU {g} status [code {}, peer {}, epoch {}, what {}]",
                    s[0], s[1] as i32, s[2], s[3]
                )
            })
            .collect::<Vec<_>>()
            .join("; ")
    }
}

// ---- plans: windows of memory, calls, expectations ------------------------------------------

const MARGIN: usize = 64;
const POISON: u8 = 0xa5;

/// Float outputs compared with a tolerance: elements of `ty` at `pos` of window `win`.
struct FloatSpan {
    win: usize,
    pos: usize,
    ty: Ty,
    refs: Vec<(f64, f64)>,
}

/// What one test runs: windows of the heap (same offsets on every GPU; poison, inputs), the
/// calls per GPU, and what the windows must hold afterwards.
struct Plan<'a> {
    lay: &'a Layout,
    used: usize,
    /// Heap offset of each window (its data starts MARGIN bytes in).
    wins: Vec<(usize, usize)>,
    /// [gpu][win]
    init: Vec<Vec<Vec<u8>>>,
    exp: Vec<Vec<Vec<u8>>>,
    floats: Vec<Vec<FloatSpan>>,
    /// Spans (gpu, win, pos, len) that must be bitwise equal across members.
    same: Vec<Vec<(usize, usize, usize, usize)>>,
    /// [gpu]: (stream, team, call, label)
    calls: Vec<Vec<(usize, NvrTeam, Call, usize)>>,
    labels: Vec<String>,
}

#[derive(Clone, Copy, Debug)]
struct Spec {
    coll: Coll,
    ty: Ty,
    op: Op,
    /// Elements (reductions) or bytes per pair.
    len: usize,
    /// Root's team index.
    root: usize,
    inplace: bool,
    /// Buffers at offsets that are not 8-aligned (different ones for src and dst).
    mis: bool,
    team: TeamKind,
    stream: usize,
}

impl Spec {
    fn label(&self) -> String {
        let mut s = self.coll.name().to_string();
        if self.coll.reduction() {
            s += &format!(" {} {} count {}", self.ty.name(), self.op.name(), self.len);
        } else if self.coll.ll() {
            s += &format!(" {} B", self.len);
        }
        if self.coll.rooted() {
            s += &format!(" root {}", self.root);
        }
        if self.inplace {
            s += " in-place";
        }
        if self.mis {
            s += " unaligned";
        }
        s += &format!(" team {:?} stream {}", self.team, self.stream);
        s
    }
}

impl<'a> Plan<'a> {
    fn new(lay: &'a Layout) -> Plan<'a> {
        let n = lay.n();
        Plan {
            lay,
            used: 0,
            wins: Vec::new(),
            init: vec![Vec::new(); n],
            exp: vec![Vec::new(); n],
            floats: (0..n).map(|_| Vec::new()).collect(),
            same: Vec::new(),
            calls: vec![Vec::new(); n],
            labels: Vec::new(),
        }
    }

    fn window(&mut self, len: usize) -> Result<usize> {
        let off = self.used.next_multiple_of(256);
        let total = len + 2 * MARGIN;
        if off + total > self.lay.arena_len {
            bail!("the test arena is too small for this plan");
        }
        self.used = off + total;
        self.wins.push((self.lay.arena + off, total));
        for g in 0..self.lay.n() {
            self.init[g].push(vec![POISON; total]);
            self.exp[g].push(vec![POISON; total]);
        }
        Ok(self.wins.len() - 1)
    }

    fn addr(&self, g: usize, win: usize, pos: usize) -> u64 {
        self.lay.addr(g, self.wins[win].0 + MARGIN + pos)
    }

    fn put(&mut self, g: usize, win: usize, pos: usize, b: &[u8]) {
        self.init[g][win][MARGIN + pos..MARGIN + pos + b.len()].copy_from_slice(b);
        self.exp[g][win][MARGIN + pos..MARGIN + pos + b.len()].copy_from_slice(b);
    }

    fn expect(&mut self, g: usize, win: usize, pos: usize, b: &[u8]) {
        self.exp[g][win][MARGIN + pos..MARGIN + pos + b.len()].copy_from_slice(b);
    }

    /// Expects the reduction over `ins` (one slice per member, team order) at (win, pos) of
    /// GPU g.
    fn expect_reduce(&mut self, g: usize, win: usize, pos: usize, sp: &Spec, ins: &[&[u8]]) {
        let s = sp.ty.size();
        let count = ins[0].len() / s;
        let scale = scale_for(sp.ty, sp.op);
        let mut refs = Vec::new();
        let mut bytes = Vec::with_capacity(count * s);
        for e in 0..count {
            let elems: Vec<&[u8]> = ins.iter().map(|b| &b[e * s..(e + 1) * s]).collect();
            match reduce_ref(sp.ty, sp.op, &elems, scale) {
                Expected::Bytes(b) => bytes.extend_from_slice(&b),
                Expected::Float(v, tol) => refs.push((v, tol)),
            }
        }
        if sp.ty.is_float() {
            self.floats[g].push(FloatSpan {
                win,
                pos,
                ty: sp.ty,
                refs,
            });
        } else {
            self.expect(g, win, pos, &bytes);
        }
    }

    /// Adds one collective call of `sp` on every GPU: inputs, expected outputs, the calls.
    fn add(&mut self, sp: &Spec, rng: &mut Rng) -> Result<()> {
        let label = self.labels.len();
        self.labels.push(sp.label());
        let teams = self.lay.teams(sp.team);
        if matches!(sp.coll, Coll::Barrier | Coll::Sync) {
            for team in &teams {
                for (i, &g) in team.iter().enumerate() {
                    let t = self.lay.team(sp.team, sp.stream, team, i);
                    self.calls[g].push((sp.stream, t, Call::barrier(sp.coll), label));
                }
            }
            return Ok(());
        }
        let n = teams[0].len();
        let es = if sp.coll.reduction() { sp.ty.size() } else { 1 };
        let x = sp.len * es;
        let (src_len, dst_len) = sp.coll.extents(x, n);
        let (mis_s, mis_d) = if sp.mis { (3 * es, 5 * es) } else { (0, 0) };
        let (ws, wd) = if sp.inplace {
            let w = self.window(mis_s + src_len.max(dst_len))?;
            (w, w)
        } else {
            (self.window(mis_s + src_len)?, self.window(mis_d + dst_len)?)
        };
        let root = sp.root.min(n - 1);
        for team in &teams {
            let n = team.len();
            // Inputs, one per member.
            let ins: Vec<Vec<u8>> = (0..n)
                .map(|_| {
                    if sp.coll.reduction() {
                        gen_elems(rng, sp.ty, sp.op, src_len / es)
                    } else {
                        rng.bytes(src_len)
                    }
                })
                .collect();
            // Where each member's src and dst are.
            let place = |i: usize| -> (usize, usize) {
                if !sp.inplace {
                    return (mis_s, mis_d);
                }
                match sp.coll {
                    Coll::Fcollect | Coll::Gather => (mis_s + i * x, mis_s),
                    Coll::ReduceScatter | Coll::Scatter => (mis_s, mis_s + i * x),
                    _ => (mis_s, mis_s),
                }
            };
            for (i, &g) in team.iter().enumerate() {
                let (sp_pos, _) = place(i);
                self.put(g, ws, sp_pos, &ins[i]);
            }
            let mut same = Vec::new();
            for (i, &g) in team.iter().enumerate() {
                let (src_pos, dst_pos) = place(i);
                let blk = |b: &Vec<u8>, j: usize| b[j * x..(j + 1) * x].to_vec();
                match sp.coll {
                    Coll::AllReduce => {
                        let v: Vec<&[u8]> = ins.iter().map(|b| b.as_slice()).collect();
                        self.expect_reduce(g, wd, dst_pos, sp, &v);
                        same.push((g, wd, dst_pos, x));
                    }
                    Coll::Reduce => {
                        if i == root {
                            let v: Vec<&[u8]> = ins.iter().map(|b| b.as_slice()).collect();
                            self.expect_reduce(g, wd, dst_pos, sp, &v);
                        }
                    }
                    Coll::ReduceScatter => {
                        let v: Vec<&[u8]> = ins.iter().map(|b| &b[i * x..(i + 1) * x]).collect();
                        self.expect_reduce(g, wd, dst_pos, sp, &v);
                    }
                    Coll::Broadcast => self.expect(g, wd, dst_pos, &ins[root]),
                    Coll::Fcollect => {
                        for (j, b) in ins.iter().enumerate() {
                            self.expect(g, wd, dst_pos + j * x, b);
                        }
                    }
                    Coll::Alltoall => {
                        for (j, b) in ins.iter().enumerate() {
                            self.expect(g, wd, dst_pos + j * x, &blk(b, i));
                        }
                    }
                    Coll::Gather => {
                        if i == root {
                            for (j, b) in ins.iter().enumerate() {
                                self.expect(g, wd, dst_pos + j * x, b);
                            }
                        }
                    }
                    Coll::Scatter => self.expect(g, wd, dst_pos, &blk(&ins[root], i)),
                    Coll::Barrier | Coll::Sync | Coll::Empty => {}
                }
                let call = Call {
                    coll: sp.coll,
                    ty: sp.ty,
                    op: sp.op,
                    root: root as i32,
                    src: self.addr(g, ws, src_pos),
                    dst: self.addr(g, wd, dst_pos),
                    len: sp.len as u64,
                    scale: scale_for(sp.ty, sp.op),
                };
                let t = self.lay.team(sp.team, sp.stream, team, i);
                self.calls[g].push((sp.stream, t, call, label));
            }
            if same.len() > 1 {
                self.same.push(same);
            }
        }
        Ok(())
    }

    /// Uploads, launches (plainly, or captured once in a graph and replayed), waits under the
    /// watchdog, downloads and compares. Returns the failures (empty: passed).
    fn run(&self, env: &Env, replays: Option<usize>) -> Result<Vec<String>> {
        env.node.on_each(|g, gpu| {
            for (w, &(off, _)) in self.wins.iter().enumerate() {
                htod(&env.streams[g][0], gpu.addr(off), &self.init[g][w])?;
            }
            Ok(())
        })?;
        let aborted = AtomicBool::new(false);
        let got = env.node.on_each(|g, gpu| {
            let k = &env.kernels[g];
            let st = &env.streams[g];
            match replays {
                None => {
                    for (s, t, c, _) in &self.calls[g] {
                        launch_call(k, &st[*s], t, c)?;
                    }
                }
                Some(r) => {
                    st[0].begin_capture(
                        sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL,
                    )?;
                    let mut res = Ok(());
                    for (_, t, c, _) in &self.calls[g] {
                        res = res.and_then(|_| launch_call(k, &st[0], t, c));
                    }
                    let graph = st[0].end_capture(sys::CUgraphInstantiate_flags(0))?;
                    res?;
                    let graph = graph.ok_or_else(|| anyhow!("the capture made no graph"))?;
                    graph.upload()?;
                    for _ in 0..r {
                        graph.launch()?;
                    }
                    env.wait(&[&st[0]], &aborted)?;
                }
            }
            env.wait(&[&st[0], &st[1]], &aborted)?;
            let mut out = Vec::new();
            for &(off, len) in &self.wins {
                let mut v = vec![0u8; len];
                dtoh(&st[0], gpu.addr(off), &mut v)?;
                out.push(v);
            }
            Ok(out)
        });
        let got = match got {
            Ok(g) => g,
            Err(e) => {
                // A launch error or a kernel that ignored the abort word: the GPUs' state is
                // unknown, so no further test can be trusted.
                let msg = format!("{e:#}; {}", env.status_report());
                bail!("{msg}")
            }
        };
        let mut fails = Vec::new();
        if aborted.load(Ordering::SeqCst) {
            fails.push(format!(
                "did not finish within {} ms: aborted; {}",
                env.watchdog.as_millis(),
                env.status_report()
            ));
        } else if (0..env.n()).any(|g| env.node.status(g)[0] != 0) {
            fails.push(format!("a status record is set: {}", env.status_report()));
        }
        if !fails.is_empty() {
            env.node.set_abort(0);
            env.node.clear_status();
            env.reset_channels()?;
            fails.push(format!("calls: {}", self.labels.join(" | ")));
            return Ok(fails);
        }
        self.verify(&got, &mut fails);
        if !fails.is_empty() {
            fails.push(format!("calls: {}", self.labels.join(" | ")));
        }
        Ok(fails)
    }

    fn verify(&self, got: &[Vec<Vec<u8>>], fails: &mut Vec<String>) {
        for (g, got_g) in got.iter().enumerate() {
            let mut skip: Vec<Vec<bool>> = self.wins.iter().map(|w| vec![false; w.1]).collect();
            for f in &self.floats[g] {
                let s = f.ty.size();
                let base = MARGIN + f.pos;
                for (e, &(r, tol)) in f.refs.iter().enumerate() {
                    let at = base + e * s;
                    skip[f.win][at..at + s].fill(true);
                    let v = decode(f.ty, &got_g[f.win][at..at + s]);
                    let ok = if tol == 0.0 {
                        v == r
                    } else {
                        (v - r).abs() <= tol
                    };
                    if !ok && fails.len() < 12 {
                        fails.push(format!(
                            "GPU {g} window {} element {e} ({}): got {v:e}, expected {r:e} ± {tol:e}",
                            f.win,
                            f.ty.name()
                        ));
                    }
                    if !ok && fails.len() >= 12 {
                        return;
                    }
                }
            }
            for (w, want) in self.exp[g].iter().enumerate() {
                let have = &got_g[w];
                let mut bad = 0usize;
                let mut first = None;
                for (i, (&a, &b)) in have.iter().zip(want).enumerate() {
                    if !skip[w][i] && a != b {
                        bad += 1;
                        first.get_or_insert((i, a, b));
                    }
                }
                if let Some((i, a, b)) = first {
                    let at = i as isize - MARGIN as isize;
                    fails.push(format!(
                        "GPU {g} window {w}: {bad} byte(s) wrong, first at {at} (relative to the buffer): got {a:#04x}, expected {b:#04x}{}",
                        if b == POISON { " (should be untouched)" } else { "" }
                    ));
                }
            }
        }
        for grp in &self.same {
            let (g0, w0, p0, len) = grp[0];
            let a = &got[g0][w0][MARGIN + p0..MARGIN + p0 + len];
            for &(g, w, p, _) in &grp[1..] {
                if &got[g][w][MARGIN + p..MARGIN + p + len] != a {
                    fails.push(format!(
                        "all_reduce results differ in bits between GPU {g0} and GPU {g}"
                    ));
                }
            }
        }
    }
}

// ---- the checks -----------------------------------------------------------------------------

struct Tally {
    passed: usize,
    failed: usize,
    shown: usize,
}

impl Tally {
    fn record(&mut self, what: &str, fails: Vec<String>) {
        if fails.is_empty() {
            self.passed += 1;
        } else {
            self.failed += 1;
            if self.shown < 40 {
                self.shown += 1;
                println!("FAILED {what}");
                for f in fails {
                    println!("    {f}");
                }
            }
        }
    }
}

/// The sizes checked for a collective: 1 element, 3 (odd bytes for 1-byte types), 37 (odd,
/// several packets), 1000, 4100 bytes' worth (two blocks) and the LL cap.
fn sizes(coll: Coll, es: usize, cap: u64) -> Vec<usize> {
    let cap_len = cap as usize / es;
    let mut v = vec![1, 3, 37, 1000, 4100usize.div_ceil(es), cap_len];
    if !coll.reduction() {
        v.push(cap_len - 3);
    }
    v.retain(|&l| l * es <= cap as usize);
    v.sort_unstable();
    v.dedup();
    v
}

fn check(env: &Env, seed: u64, filter: Option<&str>) -> Result<Tally> {
    let mut tally = Tally {
        passed: 0,
        failed: 0,
        shown: 0,
    };
    let mut rng = Rng(seed);
    let want = |name: &str| filter.is_none_or(|f| name.contains(f));
    let n = env.n();
    let roots: Vec<usize> = if n > 1 { vec![0, n - 1] } else { vec![0] };

    // Every collective x type x operator x size x root x in-place x alignment, world team.
    for coll in Coll::LL {
        if !want(coll.name()) {
            continue;
        }
        let t0 = Instant::now();
        let (p0, f0) = (tally.passed, tally.failed);
        let pairs: Vec<(Ty, Op)> = if coll.reduction() {
            Op::pairs()
        } else {
            vec![(Ty::U8, Op::Sum)]
        };
        for &(ty, op) in &pairs {
            let es = if coll.reduction() { ty.size() } else { 1 };
            for len in sizes(coll, es, env.cap()) {
                for &root in if coll.rooted() {
                    &roots[..]
                } else {
                    &roots[..1]
                } {
                    for inplace in [false, true] {
                        if inplace && coll == Coll::Alltoall {
                            continue;
                        }
                        for mis in [false, true] {
                            let sp = Spec {
                                coll,
                                ty,
                                op,
                                len,
                                root,
                                inplace,
                                mis,
                                team: TeamKind::World,
                                stream: 0,
                            };
                            let mut plan = Plan::new(env);
                            plan.add(&sp, &mut rng)?;
                            let fails = plan.run(env, None)?;
                            tally.record(&sp.label(), fails);
                        }
                    }
                }
            }
        }
        println!(
            "{:<16} {:>6} cases, {} failed ({:.1} s)",
            coll.name(),
            tally.passed + tally.failed - p0 - f0,
            tally.failed - f0,
            t0.elapsed().as_secs_f64()
        );
    }

    // Other teams: reversed order (team index != GPU index) and teams of one.
    if want("teams") {
        let t0 = Instant::now();
        let (p0, f0) = (tally.passed, tally.failed);
        for team in [TeamKind::Reversed, TeamKind::Single] {
            for coll in Coll::LL.into_iter().chain([Coll::Barrier, Coll::Sync]) {
                let red = [(Ty::F32, Op::Sum), (Ty::I32, Op::Max), (Ty::BF16, Op::Avg)];
                let pairs: &[(Ty, Op)] = if coll.reduction() {
                    &red
                } else {
                    &[(Ty::U8, Op::Sum)]
                };
                for &(ty, op) in pairs {
                    let es = if coll.reduction() { ty.size() } else { 1 };
                    for len in [3usize, 1000, env.cap() as usize / es] {
                        for &root in if coll.rooted() {
                            &roots[..]
                        } else {
                            &roots[..1]
                        } {
                            let sp = Spec {
                                coll,
                                ty,
                                op,
                                len,
                                root,
                                inplace: false,
                                mis: len == 3,
                                team,
                                stream: 0,
                            };
                            let mut plan = Plan::new(env);
                            plan.add(&sp, &mut rng)?;
                            let fails = plan.run(env, None)?;
                            tally.record(&sp.label(), fails);
                        }
                    }
                }
            }
        }
        println!(
            "{:<16} {:>6} cases, {} failed ({:.1} s)",
            "teams",
            tally.passed + tally.failed - p0 - f0,
            tally.failed - f0,
            t0.elapsed().as_secs_f64()
        );
    }

    // One call captured in a CUDA graph, replayed 1000 times; results and epochs after.
    if want("graph") {
        let t0 = Instant::now();
        let (p0, f0) = (tally.passed, tally.failed);
        for coll in Coll::LL.into_iter().chain([Coll::Barrier, Coll::Sync]) {
            let (ty, op) = if coll.reduction() {
                (Ty::F32, Op::Sum)
            } else {
                (Ty::U8, Op::Sum)
            };
            let sp = Spec {
                coll,
                ty,
                op,
                len: 5000,
                root: n - 1,
                inplace: false,
                mis: false,
                team: TeamKind::World,
                stream: 0,
            };
            let mut plan = Plan::new(env);
            plan.add(&sp, &mut rng)?;
            let ch = env.chans[&(TeamKind::World as u8, 0)];
            let before = read_epochs(env, ch)?;
            let mut fails = plan.run(env, Some(1000))?;
            let after = read_epochs(env, ch)?;
            let (grid, _) = plan.calls[0][0].2.geometry(n);
            for g in 0..n {
                for b in 0..LL_BLOCKS {
                    let want = if b < grid as usize { 1000 } else { 0 };
                    let d = after[g][b].wrapping_sub(before[g][b]);
                    if d != want && fails.is_empty() {
                        fails.push(format!(
                            "GPU {g} block {b}: epoch advanced by {d}, expected {want}"
                        ));
                    }
                }
            }
            tally.record(&format!("graph x1000: {}", sp.label()), fails);
        }
        println!(
            "{:<16} {:>6} cases, {} failed ({:.1} s)",
            "graph",
            tally.passed + tally.failed - p0 - f0,
            tally.failed - f0,
            t0.elapsed().as_secs_f64()
        );
    }

    // Two channels used at once from two streams per GPU, different inputs per call.
    if want("streams") {
        let t0 = Instant::now();
        let (p0, f0) = (tally.passed, tally.failed);
        for round in 0..4 {
            let mut plan = Plan::new(env);
            for i in 0..16 {
                for stream in 0..2 {
                    let coll = Coll::LL[(i + 3 * stream + round) % Coll::LL.len()];
                    let sp = random_spec(&mut rng, env, coll, TeamKind::World, stream, false);
                    plan.add(&sp, &mut rng)?;
                }
            }
            let fails = plan.run(env, None)?;
            tally.record(&format!("two streams, round {round}"), fails);
        }
        println!(
            "{:<16} {:>6} cases, {} failed ({:.1} s)",
            "streams",
            tally.passed + tally.failed - p0 - f0,
            tally.failed - f0,
            t0.elapsed().as_secs_f64()
        );
    }

    // One channel, different collectives (rooted or not, different grids, barriers) in a
    // random sequence, many times.
    if want("sequence") {
        let t0 = Instant::now();
        let (p0, f0) = (tally.passed, tally.failed);
        for round in 0..16 {
            let mut plan = Plan::new(env);
            for _ in 0..64 {
                let r = rng.below(20) as usize;
                let coll = if r < 16 {
                    Coll::LL[r % Coll::LL.len()]
                } else if r < 18 {
                    Coll::Barrier
                } else {
                    Coll::Sync
                };
                let team = if rng.below(4) == 0 {
                    TeamKind::Reversed
                } else {
                    TeamKind::World
                };
                let sp = random_spec(&mut rng, env, coll, team, 0, true);
                plan.add(&sp, &mut rng)?;
            }
            let fails = plan.run(env, None)?;
            tally.record(&format!("sequence of 64 calls, round {round}"), fails);
        }
        println!(
            "{:<16} {:>6} cases, {} failed ({:.1} s)",
            "sequence",
            tally.passed + tally.failed - p0 - f0,
            tally.failed - f0,
            t0.elapsed().as_secs_f64()
        );
    }

    // Across the epoch wrap: the channels start as if NVR_EPOCH_LAST - k runs had been made
    // (every epoch and flag word at that value, the LL areas zeroed), then random sequences of
    // every LL collective, barrier and sync on them cross from NVR_EPOCH_LAST to 1 (epochs skip
    // 0 and 0xFFFFFFFF: PROTOCOL.md, "Epochs"). Results are checked, and afterwards every
    // block's epoch must be live and the same on every PE.
    if want("wrap") {
        let t0 = Instant::now();
        let (p0, f0) = (tally.passed, tally.failed);
        for round in 0..6u32 {
            env.reset_channels()?;
            let start = EPOCH_LAST - 1 - 2 * round;
            for kind in [TeamKind::World, TeamKind::Reversed] {
                preset_epochs(env, env.chans[&(kind as u8, 0)], start)?;
            }
            let mut plan = Plan::new(env);
            for _ in 0..40 {
                let r = rng.below(20) as usize;
                let coll = if r < 16 {
                    Coll::LL[r % Coll::LL.len()]
                } else if r < 18 {
                    Coll::Barrier
                } else {
                    Coll::Sync
                };
                let team = if rng.below(4) == 0 {
                    TeamKind::Reversed
                } else {
                    TeamKind::World
                };
                let sp = random_spec(&mut rng, env, coll, team, 0, true);
                plan.add(&sp, &mut rng)?;
            }
            let mut fails = plan.run(env, None)?;
            if fails.is_empty() {
                for kind in [TeamKind::World, TeamKind::Reversed] {
                    let ch = env.chans[&(kind as u8, 0)];
                    let e = read_epochs(env, ch)?;
                    for b in 0..LL_BLOCKS {
                        let v: Vec<u32> = e.iter().map(|g| g[b]).collect();
                        if v.iter().any(|&x| x == 0 || x > EPOCH_LAST)
                            || v.windows(2).any(|w| w[0] != w[1])
                        {
                            fails.push(format!("{kind:?} block {b}: epochs {v:?} after the wrap"));
                        }
                    }
                }
            }
            tally.record(
                &format!("40 calls across the epoch wrap from {start:#x}, round {round}"),
                fails,
            );
        }
        env.reset_channels()?;
        println!(
            "{:<16} {:>6} cases, {} failed ({:.1} s)",
            "wrap",
            tally.passed + tally.failed - p0 - f0,
            tally.failed - f0,
            t0.elapsed().as_secs_f64()
        );
    }

    // Error paths.
    if want("abort") {
        let r = abort_test(env, None);
        tally.record(
            "abort: a barrier whose peer never comes, abort word set after 100 ms",
            r?,
        );
    }
    if want("timeout") {
        let r = abort_test(env, Some((Coll::Barrier, 50_000_000)));
        tally.record(
            "timeout: barrier with timeout_ns = 50 ms, peer never comes",
            r?,
        );
        let r = abort_test(env, Some((Coll::AllReduce, 50_000_000)));
        tally.record(
            "timeout: LL all_reduce with timeout_ns = 50 ms, peer never comes",
            r?,
        );
    }
    if want("limits") {
        let r = limits_test(env);
        tally.record("limits: a launch beyond the LL cap records status 3", r?);
    }
    Ok(tally)
}

/// A random call for the mixed tests: any size up to the cap (mostly small), random root,
/// reductions of a few types.
fn random_spec(
    rng: &mut Rng,
    env: &Layout,
    coll: Coll,
    team: TeamKind,
    stream: usize,
    allow_inplace: bool,
) -> Spec {
    const RED: [(Ty, Op); 5] = [
        (Ty::F32, Op::Sum),
        (Ty::I32, Op::Max),
        (Ty::BF16, Op::Avg),
        (Ty::U8, Op::PreMulSum),
        (Ty::F64, Op::Min),
    ];
    let (ty, op) = if coll.reduction() {
        RED[rng.below(RED.len() as u64) as usize]
    } else {
        (Ty::U8, Op::Sum)
    };
    let es = if coll.reduction() { ty.size() } else { 1 };
    let cap = env.cap() as usize;
    let bytes = match rng.below(8) {
        0..=2 => 1 + rng.below(64) as usize,
        3 => 64 + rng.below(4096) as usize,
        4 | 5 => 4096 + rng.below(28 * 1024) as usize,
        6 => 32 * 1024 + rng.below((cap - 32 * 1024) as u64) as usize,
        _ => cap,
    };
    let len = (bytes / es).max(1);
    Spec {
        coll,
        ty,
        op,
        len,
        root: rng.below(env.n() as u64) as usize,
        inplace: allow_inplace && coll != Coll::Alltoall && rng.below(3) == 0,
        mis: rng.below(3) == 0,
        team,
        stream,
    }
}

/// Sets every epoch, arrive and depart word of `ch` on every GPU to `e`: the state after run
/// `e` of every block, every peer having started and left it.
fn preset_epochs(env: &Env, ch: Channel, e: u32) -> Result<()> {
    let words: Vec<u8> = std::iter::repeat_n(e.to_le_bytes(), CHAN_HEADER / 4)
        .flatten()
        .collect();
    env.node.on_each(|g, gpu| {
        let st = &env.streams[g][0];
        htod(st, gpu.addr(ch.off), &words)?;
        st.synchronize()?;
        Ok(())
    })?;
    Ok(())
}

fn read_epochs(env: &Env, ch: Channel) -> Result<Vec<Vec<u32>>> {
    env.node.on_each(|g, gpu| {
        let mut b = vec![0u8; 4 * LL_BLOCKS];
        dtoh(&env.streams[g][0], gpu.addr(ch.off + CHAN_EPOCH), &mut b)?;
        Ok(b.chunks(4)
            .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect())
    })
}

/// GPU 0 launches alone a call whose peers never come: without `timeout`, a barrier that the
/// host aborts after 100 ms; with (coll, ns), that call with timeout_ns = ns. The kernel must
/// exit and the status must name the missing peer and what was waited for.
fn abort_test(env: &Env, timeout: Option<(Coll, u64)>) -> Result<Vec<String>> {
    let n = env.n();
    // With one GPU, a team of two whose second member never runs.
    let members: Vec<usize> = if n > 1 { (0..n).collect() } else { vec![0, 0] };
    let (coll, ns) = timeout.unwrap_or((Coll::Barrier, 0));
    let t = env.team_on(env.spare, &members, 0, ns);
    let gpu = &env.node.gpus[0];
    gpu.ctx.bind_to_thread()?;
    let st = &env.streams[0][0];
    let call = if coll == Coll::AllReduce {
        let buf = gpu.addr(env.arena);
        Call {
            coll,
            ty: Ty::F32,
            op: Op::Sum,
            root: 0,
            src: buf,
            dst: buf + 8192,
            len: 1000,
            scale: 1.0,
        }
    } else {
        Call::barrier(coll)
    };
    env.node.clear_status();
    let t0 = Instant::now();
    launch_call(&env.kernels[0], st, &t, &call)?;
    let mut fails = Vec::new();
    if timeout.is_none() {
        std::thread::sleep(Duration::from_millis(100));
        if stream_done(st)? {
            fails.push("the barrier finished although its peer never came".into());
        }
        env.node.set_abort(1);
    }
    let mut done = false;
    while t0.elapsed() < Duration::from_secs(3) {
        if stream_done(st)? {
            done = true;
            break;
        }
        std::thread::sleep(Duration::from_micros(100));
    }
    let took = t0.elapsed();
    if !done {
        bail!("the kernel did not exit within 3 s of its start (abort or timeout ignored); GPU state unknown");
    }
    st.synchronize()?;
    let s = env.node.status(0);
    let (code, what) = match (timeout, coll) {
        (None, _) => (FAIL_ABORT, WAIT_ARRIVE),
        (Some(_), Coll::AllReduce) => (FAIL_TIMEOUT, WAIT_LL),
        (Some(_), _) => (FAIL_TIMEOUT, WAIT_ARRIVE),
    };
    let peer_ok = (1..members.len() as u32).contains(&s[1]);
    if s[0] != code || s[3] != what || !peer_ok {
        fails.push(format!(
            "status [code {}, peer {}, epoch {}, what {}], expected code {code}, a missing peer (1..{}), what {what}",
            s[0], s[1] as i32, s[2], s[3], members.len() - 1
        ));
    }
    if timeout.is_some() && took < Duration::from_nanos(ns) {
        fails.push(format!(
            "exited after {took:?}, before its timeout of {ns} ns"
        ));
    }
    println!(
        "{}: kernel exited after {:.1} ms, {}",
        if timeout.is_some() {
            "timeout"
        } else {
            "abort"
        },
        took.as_secs_f64() * 1e3,
        env.status_report()
    );
    env.node.set_abort(0);
    env.node.clear_status();
    env.reset_channels()?;
    Ok(fails)
}

/// A team of one on GPU 0 launches an all_reduce one packet beyond the LL cap, and a barrier
/// with two blocks: both must record NVR_FAIL_LIMITS and return at once.
fn limits_test(env: &Env) -> Result<Vec<String>> {
    let gpu = &env.node.gpus[0];
    gpu.ctx.bind_to_thread()?;
    let st = &env.streams[0][0];
    let t = env.team_on(env.spare, &[0], 0, 0);
    let buf = gpu.addr(env.arena);
    let mut fails = Vec::new();
    env.node.clear_status();
    let c = Call {
        coll: Coll::AllReduce,
        ty: Ty::U8,
        op: Op::Sum,
        root: 0,
        src: buf,
        dst: buf,
        len: env.cap() + 8,
        scale: 1.0,
    };
    launch_call(&env.kernels[0], st, &t, &c)?;
    let aborted = AtomicBool::new(false);
    env.wait(&[st], &aborted)?;
    st.synchronize()?;
    let s = env.node.status(0);
    if s[0] != FAIL_LIMITS {
        fails.push(format!(
            "all_reduce beyond the cap: status {s:?}, expected code 3"
        ));
    }
    env.node.clear_status();
    let f = &env.kernels[0].mv[5];
    let fence = 1i32;
    let mut args = [arg(&t), arg(&fence)];
    // SAFETY: nvr_barrier(nvr_team, int); the team's addresses are GPU 0's.
    unsafe { launch(f, st, 2, 32, &mut args)? };
    env.wait(&[st], &aborted)?;
    st.synchronize()?;
    let s = env.node.status(0);
    if s[0] != FAIL_LIMITS {
        fails.push(format!(
            "barrier with 2 blocks: status {s:?}, expected code 3"
        ));
    }
    if aborted.load(Ordering::SeqCst) {
        fails.push("a refused launch hung".into());
    }
    env.node.set_abort(0);
    env.node.clear_status();
    env.reset_channels()?;
    Ok(fails)
}

// ---- timing ---------------------------------------------------------------------------------

struct Row {
    label: String,
    bytes: u64,
    x: u64,
    grid: u32,
    block: u32,
    stream_us: f64,
    graph_us: f64,
}

/// (len, x) of a timed call of `bytes` in nccl-tests' sense (the larger of one PE's input and
/// output) for a team of n, f32 for reductions; None when it does not fit.
fn time_len(coll: Coll, bytes: u64, n: u64, cap: u64) -> Option<(u64, u64)> {
    let (len, x) = match coll {
        Coll::AllReduce | Coll::Reduce => (bytes / 4, bytes / 4 * 4),
        Coll::ReduceScatter => (bytes / (4 * n), bytes / (4 * n) * 4),
        Coll::Broadcast => (bytes, bytes),
        _ => (bytes / n, bytes / n),
    };
    (len > 0 && x <= cap).then_some((len, x))
}

fn time(
    env: &Env,
    iters: usize,
    graph_calls: usize,
    replays: usize,
    filter: Option<&str>,
) -> Result<(Vec<Row>, usize)> {
    let n = env.n();
    let cap = env.cap();
    let src_off = env.arena;
    let dst_off = env.arena + (n * cap as usize).next_multiple_of(4096) + 4096;
    let mut rows = Vec::new();
    let mut failed = 0;
    let mut specs: Vec<(Coll, u64)> = vec![(Coll::Empty, 0), (Coll::Barrier, 0), (Coll::Sync, 0)];
    for coll in Coll::LL {
        let cap_bytes = match coll {
            Coll::AllReduce | Coll::Reduce | Coll::Broadcast => cap,
            _ => cap * n as u64,
        };
        for b in [8u64, 64, 512, 4096, 32768, cap_bytes] {
            if !specs.contains(&(coll, b)) {
                specs.push((coll, b));
            }
        }
    }
    for (coll, bytes) in specs {
        let label = if coll.reduction() {
            format!("{} f32 sum", coll.name())
        } else {
            coll.name().to_string()
        };
        if filter.is_some_and(|f| !label.contains(f)) {
            continue;
        }
        let (len, x) = if coll.ll() {
            match time_len(coll, bytes, n as u64, cap) {
                Some(v) => v,
                None => continue,
            }
        } else {
            (0, 0)
        };
        let call_of = |g: usize| Call {
            coll,
            ty: Ty::F32,
            op: Op::Sum,
            root: 0,
            src: env.node.gpus[g].addr(src_off),
            dst: env.node.gpus[g].addr(dst_off),
            len,
            scale: 1.0,
        };
        let (grid, block) = call_of(0).geometry(n);
        match time_one(env, &call_of, iters, graph_calls, replays) {
            Ok((s, gr)) => rows.push(Row {
                label,
                bytes,
                x,
                grid,
                block,
                stream_us: s,
                graph_us: gr,
            }),
            Err(e) => {
                failed += 1;
                println!("FAILED timing {label} {bytes} B: {e:#}");
                env.node.set_abort(0);
                env.node.clear_status();
                env.reset_channels()?;
            }
        }
    }
    Ok((rows, failed))
}

/// µs per call (stream mode, graph mode), the slowest GPU's.
fn time_one(
    env: &Env,
    call_of: &(dyn Fn(usize) -> Call + Sync),
    iters: usize,
    graph_calls: usize,
    replays: usize,
) -> Result<(f64, f64)> {
    let n = env.n();
    let bar = Barrier::new(n);
    let failed = AtomicBool::new(false);
    let aborted = AtomicBool::new(false);
    let per_gpu = env.node.on_each(|g, gpu| {
        let k = &env.kernels[g];
        let st = &env.streams[g][0];
        let t = env.team(TeamKind::World, 0, &(0..n).collect::<Vec<_>>(), g);
        let c = call_of(g);
        let step = |f: &dyn Fn() -> Result<f64>| sync_step(&bar, &failed, f);
        let (ev0, ev1) = sync_step(&bar, &failed, || {
            let f = Some(sys::CUevent_flags::CU_EVENT_DEFAULT);
            Ok((gpu.ctx.new_event(f)?, gpu.ctx.new_event(f)?))
        })?;
        // Warm-up.
        step(&|| {
            for _ in 0..50 {
                launch_call(k, st, &t, &c)?;
            }
            env.wait(&[st], &aborted)?;
            Ok(0.0)
        })?;
        // Stream mode: `iters` calls back to back.
        let s_us = step(&|| {
            ev0.record(st)?;
            for _ in 0..iters {
                launch_call(k, st, &t, &c)?;
            }
            ev1.record(st)?;
            env.wait(&[st], &aborted)?;
            Ok(ev0.elapsed_ms(&ev1)? as f64 * 1e3 / iters as f64)
        })?;
        // Graph mode: capture graph_calls calls once, replay it once to warm up, then time
        // `replays` replays.
        let graph = sync_step(&bar, &failed, || {
            st.begin_capture(sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)?;
            let mut res = Ok(());
            for _ in 0..graph_calls {
                res = res.and_then(|_| launch_call(k, st, &t, &c));
            }
            let graph = st.end_capture(sys::CUgraphInstantiate_flags(0))?;
            res?;
            let graph = graph.ok_or_else(|| anyhow!("the capture made no graph"))?;
            graph.upload()?;
            graph.launch()?;
            env.wait(&[st], &aborted)?;
            Ok(graph)
        })?;
        let g_us = step(&|| {
            ev0.record(st)?;
            for _ in 0..replays {
                graph.launch()?;
            }
            ev1.record(st)?;
            env.wait(&[st], &aborted)?;
            Ok(ev0.elapsed_ms(&ev1)? as f64 * 1e3 / (replays * graph_calls) as f64)
        })?;
        Ok((s_us, g_us))
    });
    let per_gpu = per_gpu.with_context(|| env.status_report())?;
    if aborted.load(Ordering::SeqCst) {
        bail!("aborted by the watchdog; {}", env.status_report());
    }
    let s = per_gpu.iter().map(|p| p.0).fold(0.0, f64::max);
    let g = per_gpu.iter().map(|p| p.1).fold(0.0, f64::max);
    Ok((s, g))
}

fn print_table(rows: &[Row], n: usize, ll_bytes: u32, iters: usize, calls: usize, replays: usize) {
    println!();
    println!(
        "LL collectives on {n} GPU(s), ll_bytes {ll_bytes} (cap {} B per pair); µs per call, slowest GPU; stream: {iters} calls back to back; graph: {calls} calls per graph, {replays} replays",
        ll_cap(ll_bytes)
    );
    println!(
        "{:<24} {:>9} {:>9} {:>10} {:>10} {:>10}",
        "collective", "bytes", "x/pair", "grid x blk", "stream µs", "graph µs"
    );
    for r in rows {
        println!(
            "{:<24} {:>9} {:>9} {:>10} {:>10.2} {:>10.2}",
            r.label,
            r.bytes,
            r.x,
            format!("{}x{}", r.grid, r.block),
            r.stream_us,
            r.graph_us
        );
    }
}

// ---- main -----------------------------------------------------------------------------------

fn main() {
    let cli = Cli::parse();
    let (passed, failed) = match run(cli) {
        Ok(pf) => pf,
        Err(e) => {
            println!("FAILED: {e:#}");
            (0, 1)
        }
    };
    println!("{passed} passed, {failed} failed");
    std::process::exit(if failed == 0 { 0 } else { 1 });
}

fn run(cli: Cli) -> Result<(usize, usize)> {
    if cli.ll_bytes % 16 != 0 || cli.ll_bytes < 8192 {
        bail!("--ll-bytes must be a multiple of 16 and at least 8192");
    }
    if cli.compile_only {
        return compile_only(&cli.arch, cli.ptx_dir.as_deref());
    }
    let Some(mode) = cli.mode else {
        bail!("say --compile-only, check or time (see --help)");
    };
    // Lazy module loading (CUDA's default) loads a kernel at its first launch and may wait
    // for the context to go idle meanwhile; with kernels that spin on kernels of other
    // streams and GPUs, that can deadlock (e.g. the two-stream check). Load everything up
    // front. (Still a single thread here, before cuInit.)
    if std::env::var_os("CUDA_MODULE_LOADING").is_none() {
        std::env::set_var("CUDA_MODULE_LOADING", "EAGER");
    }
    let node = Node::with_pes(cli.pes, cli.gpus, cli.heap_mib << 20)?;
    println!(
        "{} GPU(s): {}",
        node.n(),
        node.gpus
            .iter()
            .map(|g| format!(
                "{} {} ({})",
                g.ordinal,
                g.ctx.name().unwrap_or_default(),
                g.arch
            ))
            .collect::<Vec<_>>()
            .join(", ")
    );
    if node.n() > MAX_TEAM {
        bail!("{} GPUs; a team has at most {MAX_TEAM}", node.n());
    }
    match mode {
        Mode::Check {
            seed,
            filter,
            watchdog_ms,
        } => {
            let seed = seed.unwrap_or_else(|| {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map(|d| d.as_nanos() as u64)
                    .unwrap_or(1)
            });
            println!("seed {seed} (rerun with --seed {seed})");
            let kernels = load_kernels(&node, &Op::pairs())?;
            let env = Env::new(
                node,
                kernels,
                cli.ll_bytes,
                Duration::from_millis(watchdog_ms),
            )?;
            println!(
                "ll_bytes {}, LL cap {} B per pair, watchdog {watchdog_ms} ms",
                env.ll_bytes,
                env.cap()
            );
            let t = check(&env, seed, filter.as_deref())?;
            println!("seed {seed}");
            Ok((t.passed, t.failed))
        }
        Mode::Time {
            iters,
            graph_calls,
            graph_replays,
            filter,
        } => {
            let kernels = load_kernels(&node, &[(Ty::F32, Op::Sum)])?;
            let env = Env::new(node, kernels, cli.ll_bytes, Duration::from_secs(10))?;
            let (rows, failed) = time(&env, iters, graph_calls, graph_replays, filter.as_deref())?;
            print_table(
                &rows,
                env.n(),
                env.ll_bytes,
                iters,
                graph_calls,
                graph_replays,
            );
            Ok((rows.len(), failed))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The launch rule keeps every call up to the cap within the kernels' limit
    /// (ppb * 16 <= ll_bytes, grid <= 8, block <= 512) for every allowed ll_bytes.
    #[test]
    fn launch_rule_fits_the_limits() {
        for ll in [8192u32, 8208, 16384, 32768, 65536, 262144] {
            let cap = ll_cap(ll);
            let mut xs: Vec<u64> = (0..=20000).collect();
            xs.extend((cap - 20000..=cap).step_by(1));
            xs.extend([32767, 32768, 32769, 36863, 36864, 36865]);
            xs.retain(|&x| x <= cap);
            for x in xs {
                for n in 1..=8 {
                    let (grid, block) = ll_geometry(x, n);
                    let ppb = x.div_ceil(8).div_ceil(grid as u64);
                    assert!(grid as usize <= LL_BLOCKS && grid >= 1);
                    assert!(block % 32 == 0 && (64..=512).contains(&block) || x == 0);
                    assert!(ppb * 16 <= ll as u64, "x {x} ll {ll}: ppb {ppb}");
                }
            }
            // One byte beyond the cap breaks the limit.
            let x = cap + 1;
            let (grid, _) = ll_geometry(x, 2);
            assert!(x.div_ceil(8).div_ceil(grid as u64) * 16 > ll as u64 || ll % 16 != 0);
        }
        assert_eq!(ll_geometry(8, 2), (1, 64));
        assert_eq!(ll_geometry(32768, 2), (8, 512));
        assert_eq!(ll_geometry(4096, 8), (1, 512));
    }

    #[test]
    fn fp8_decoding() {
        assert_eq!(f8e4m3(0x38), 1.0);
        assert_eq!(f8e4m3(0x7e), 448.0);
        assert!(f8e4m3(0x7f).is_nan());
        assert_eq!(f8e4m3(0x01), 2f64.powi(-9));
        assert_eq!(f8e5m2(0x3c), 1.0);
        assert_eq!(f8e5m2(0x7b), 57344.0);
        assert!(f8e5m2(0x7c).is_infinite());
        assert_eq!(f8e5m2(0x01), 2f64.powi(-16));
    }

    #[test]
    fn integer_reference_wraps_like_the_device() {
        let a = 100i8.to_le_bytes();
        let b = 100i8.to_le_bytes();
        match reduce_ref(Ty::I8, Op::Sum, &[&a, &b], 1.0) {
            Expected::Bytes(v) => assert_eq!(v, vec![200u8]),
            _ => panic!(),
        }
        let a = (-7i32).to_le_bytes();
        let b = 2i32.to_le_bytes();
        match reduce_ref(Ty::I32, Op::Avg, &[&a, &b], 1.0) {
            Expected::Bytes(v) => assert_eq!(v, (-2i32).to_le_bytes().to_vec()),
            _ => panic!(),
        }
        match reduce_ref(Ty::U16, Op::Min, &[&[1, 0x80], &[2, 0]], 1.0) {
            Expected::Bytes(v) => assert_eq!(v, vec![2, 0]),
            _ => panic!(),
        }
        match reduce_ref(Ty::Bool, Op::Max, &[&[0], &[7]], 1.0) {
            Expected::Bytes(v) => assert_eq!(v, vec![1]),
            _ => panic!(),
        }
    }

    #[test]
    fn checked_sizes_stay_within_the_cap() {
        for coll in Coll::LL {
            for es in [1, 2, 4, 8] {
                let s = sizes(coll, es, ll_cap(65536));
                assert!(s
                    .iter()
                    .all(|&l| l >= 1 && (l * es) as u64 <= ll_cap(65536)));
                assert!(s.contains(&1) && s.contains(&(ll_cap(65536) as usize / es)));
            }
        }
    }

    // ---- a host emulation of the kernels' semantics, to check the harness itself ----------

    fn fake_layout(n: usize, ll_bytes: u32) -> Layout {
        let mut chans = HashMap::new();
        let mut off = 0;
        for kind in [TeamKind::World, TeamKind::Reversed, TeamKind::Single] {
            for s in 0..2 {
                chans.insert((kind as u8, s), Channel { off, ll_bytes });
                off += chan_bytes(ll_bytes);
            }
        }
        Layout {
            bases: (0..n).map(|g| (g as u64 + 1) << 40).collect(),
            aborts: vec![0; n],
            statuses: vec![0; n],
            chans,
            spare: Channel { off, ll_bytes },
            arena: 1 << 28,
            arena_len: 1 << 30,
            ll_bytes,
        }
    }

    /// fp8 from f32 as cuda_fp8.h does it: round to nearest even, saturate to finite.
    fn encode_fp8(ty: Ty, v: f32) -> u8 {
        let mut best = (f64::INFINITY, 0u8);
        for b in 0..=255u8 {
            let d = decode(ty, &[b]);
            if !d.is_finite() {
                continue;
            }
            let e = (d - v as f64).abs();
            if e < best.0 || (e == best.0 && b & 1 == 0 && best.1 & 1 == 1) {
                best = (e, b);
            }
        }
        best.1
    }

    /// One element reduced as the device does it (f32 accumulator for floats of 32 bits or
    /// fewer, sequential in team order).
    fn device_reduce(ty: Ty, op: Op, elems: &[&[u8]], scale: f64) -> Vec<u8> {
        if !ty.is_float() {
            match reduce_ref(ty, op, elems, scale) {
                Expected::Bytes(b) => return b,
                Expected::Float(..) => unreachable!(),
            }
        }
        let n = elems.len();
        if ty == Ty::F64 {
            let mut a = 0.0f64;
            for (j, e) in elems.iter().enumerate() {
                let x = decode(ty, e);
                let x = if op == Op::PreMulSum { scale * x } else { x };
                a = if j == 0 {
                    x
                } else {
                    match op {
                        Op::Min => a.min(x),
                        Op::Max => a.max(x),
                        Op::Prod => a * x,
                        _ => a + x,
                    }
                };
            }
            if op == Op::Avg {
                a /= n as f64;
            }
            return a.to_le_bytes().to_vec();
        }
        let s = scale as f32;
        let mut a = 0.0f32;
        for (j, e) in elems.iter().enumerate() {
            let x = decode(ty, e) as f32;
            let x = if op == Op::PreMulSum { s * x } else { x };
            a = if j == 0 {
                x
            } else {
                match op {
                    Op::Min => a.min(x),
                    Op::Max => a.max(x),
                    Op::Prod => a * x,
                    _ => a + x,
                }
            };
        }
        if op == Op::Avg {
            a /= n as f32;
        }
        match ty {
            Ty::F32 => a.to_le_bytes().to_vec(),
            Ty::F16 => half::f16::from_f32(a).to_le_bytes().to_vec(),
            Ty::BF16 => half::bf16::from_f32(a).to_le_bytes().to_vec(),
            _ => vec![encode_fp8(ty, a)],
        }
    }

    /// Runs a plan's calls on host copies of its windows with the semantics the kernels
    /// promise: what a correct GPU run would download.
    fn emulate(plan: &Plan) -> Vec<Vec<Vec<u8>>> {
        let lay = plan.lay;
        let mut mem = plan.init.clone();
        let locate = |g: usize, addr: u64| -> (usize, usize) {
            let off = (addr - lay.bases[g]) as usize;
            let w = plan
                .wins
                .iter()
                .position(|&(o, l)| o <= off && off < o + l)
                .expect("address outside every window");
            (w, off - plan.wins[w].0)
        };
        for label in 0..plan.labels.len() {
            // This label's calls, grouped by team (the GPUs its offsets reach).
            // (member GPUs in team order, (team index, call) of each member)
            type TeamCalls = (Vec<usize>, Vec<(usize, Call)>);
            let mut teams: Vec<TeamCalls> = Vec::new();
            for g in 0..lay.n() {
                for (_, t, c, l) in &plan.calls[g] {
                    if *l != label {
                        continue;
                    }
                    let members: Vec<usize> = (0..t.n as usize)
                        .map(|j| {
                            let base = lay.bases[g].wrapping_add(t.off[j] as u64);
                            lay.bases.iter().position(|&b| b == base).unwrap()
                        })
                        .collect();
                    assert_eq!(members[t.me as usize], g);
                    match teams.iter_mut().find(|(m, _)| *m == members) {
                        Some((_, v)) => v.push((t.me as usize, *c)),
                        None => teams.push((members, vec![(t.me as usize, *c)])),
                    }
                }
            }
            for (members, mut calls) in teams {
                calls.sort_by_key(|(me, _)| *me);
                let n = members.len();
                assert_eq!(calls.len(), n, "every member calls");
                let c0 = calls[0].1;
                if !c0.coll.ll() {
                    continue;
                }
                let es = if c0.coll.reduction() { c0.ty.size() } else { 1 };
                let x = c0.len as usize * es;
                let (src_len, dst_len) = c0.coll.extents(x, n);
                // Every member's input, read before anything is written.
                let ins: Vec<Vec<u8>> = calls
                    .iter()
                    .map(|(i, c)| {
                        let (w, p) = locate(members[*i], c.src);
                        mem[members[*i]][w][p..p + src_len].to_vec()
                    })
                    .collect();
                let root = c0.root as usize;
                for (i, c) in &calls {
                    let (i, g) = (*i, members[*i]);
                    let red = |blk: Option<usize>| -> Vec<u8> {
                        let mut out = Vec::new();
                        for e in 0..x / es {
                            let at = blk.map_or(0, |b| b * x) + e * es;
                            let el: Vec<&[u8]> = ins.iter().map(|b| &b[at..at + es]).collect();
                            out.extend(device_reduce(c.ty, c.op, &el, c.scale));
                        }
                        out
                    };
                    let out: Option<Vec<u8>> = match c.coll {
                        Coll::AllReduce => Some(red(None)),
                        Coll::Reduce => (i == root).then(|| red(None)),
                        Coll::ReduceScatter => Some(red(Some(i))),
                        Coll::Broadcast => Some(ins[root].clone()),
                        Coll::Fcollect => Some(ins.concat()),
                        Coll::Alltoall => Some(
                            ins.iter()
                                .flat_map(|b| b[i * x..(i + 1) * x].to_vec())
                                .collect(),
                        ),
                        Coll::Gather => (i == root).then(|| ins.concat()),
                        Coll::Scatter => Some(ins[root][i * x..(i + 1) * x].to_vec()),
                        _ => None,
                    };
                    if let Some(out) = out {
                        assert_eq!(out.len(), dst_len);
                        let (w, p) = locate(g, c.dst);
                        mem[g][w][p..p + dst_len].copy_from_slice(&out);
                    }
                }
            }
        }
        mem
    }

    fn emulate_and_verify(plan: &Plan) -> Vec<String> {
        let got = emulate(plan);
        let mut fails = Vec::new();
        plan.verify(&got, &mut fails);
        fails
    }

    /// Every case `check` builds, on teams of 1, 2, 3 and 8 (small sizes; the cap for a few),
    /// passes against the emulation; so the harness's buffers, in-place placements, roots,
    /// references and tolerances agree with the kernels' contract.
    #[test]
    fn harness_agrees_with_an_emulation_of_the_contract() {
        let mut rng = Rng(42);
        for n in [1usize, 2, 3, 8] {
            let lay = fake_layout(n, 8192);
            let roots: Vec<usize> = if n > 1 { vec![0, n - 1] } else { vec![0] };
            let mut cases = 0;
            for coll in Coll::LL {
                // Every (type, operator) for teams of 1 and 2; every type once (operators
                // rotating) for the larger teams, to keep the test quick.
                let pairs: Vec<(Ty, Op)> = if !coll.reduction() {
                    vec![(Ty::U8, Op::Sum)]
                } else if n <= 2 {
                    Op::pairs()
                } else {
                    Op::pairs().into_iter().step_by(7).collect()
                };
                for &(ty, op) in &pairs {
                    let es = if coll.reduction() { ty.size() } else { 1 };
                    let mut lens = vec![1, 3, 37];
                    if !coll.reduction() || (n == 2 && matches!(op, Op::Sum | Op::Max)) {
                        lens.push(lay.cap() as usize / es);
                    }
                    for len in lens {
                        for &root in if coll.rooted() {
                            &roots[..]
                        } else {
                            &roots[..1]
                        } {
                            for inplace in [false, true] {
                                if inplace && coll == Coll::Alltoall {
                                    continue;
                                }
                                for (mis, team) in [
                                    (false, TeamKind::World),
                                    (true, TeamKind::Reversed),
                                    (true, TeamKind::Single),
                                ] {
                                    let sp = Spec {
                                        coll,
                                        ty,
                                        op,
                                        len,
                                        root,
                                        inplace,
                                        mis,
                                        team,
                                        stream: 0,
                                    };
                                    let mut plan = Plan::new(&lay);
                                    plan.add(&sp, &mut rng).unwrap();
                                    let fails = emulate_and_verify(&plan);
                                    assert!(fails.is_empty(), "n {n}: {}: {fails:?}", sp.label());
                                    cases += 1;
                                }
                            }
                        }
                    }
                }
            }
            // Mixed sequences, as the sequence and two-stream checks build them.
            for round in 0..4 {
                let mut plan = Plan::new(&lay);
                for i in 0..40 {
                    let coll = [Coll::Barrier, Coll::Sync]
                        .into_iter()
                        .chain(Coll::LL)
                        .nth(rng.below(10) as usize)
                        .unwrap();
                    let team = if i % 3 == 0 {
                        TeamKind::Reversed
                    } else {
                        TeamKind::World
                    };
                    let sp = random_spec(&mut rng, &lay, coll, team, round % 2, true);
                    plan.add(&sp, &mut rng).unwrap();
                }
                let fails = emulate_and_verify(&plan);
                assert!(fails.is_empty(), "n {n} sequence {round}: {fails:?}");
            }
            println!("n {n}: {cases} cases agree");
        }
    }

    /// The verification catches what a broken kernel would do: an output not written, a byte
    /// wrong, a write past the end, a write into a non-root's dst, results that differ
    /// between members.
    #[test]
    fn verification_catches_wrong_results() {
        let mut rng = Rng(7);
        let lay = fake_layout(2, 8192);
        let spec = |coll, ty, op| Spec {
            coll,
            ty,
            op,
            len: 100,
            root: 1,
            inplace: false,
            mis: true,
            team: TeamKind::World,
            stream: 0,
        };
        // (spec, gpu, which window, byte offset relative to the buffer, new value or None to
        // restore the initial content)
        let cases: Vec<(Spec, usize, usize, isize, Option<u8>)> = vec![
            (spec(Coll::Fcollect, Ty::U8, Op::Sum), 0, 1, 150, None),
            (spec(Coll::Fcollect, Ty::U8, Op::Sum), 1, 1, 7, Some(0x11)),
            (
                spec(Coll::Fcollect, Ty::U8, Op::Sum),
                1,
                1,
                5 + 200,
                Some(0),
            ),
            (spec(Coll::Fcollect, Ty::U8, Op::Sum), 1, 1, -1, Some(0)),
            (spec(Coll::Gather, Ty::U8, Op::Sum), 0, 1, 5 + 3, Some(0)),
            (
                spec(Coll::AllReduce, Ty::I32, Op::Sum),
                1,
                1,
                20 + 4 * 99,
                Some(0x5a),
            ),
            (
                spec(Coll::AllReduce, Ty::F32, Op::Sum),
                1,
                1,
                20 + 4 * 50 + 3,
                Some(0x41),
            ),
            (
                spec(Coll::AllReduce, Ty::F32, Op::Sum),
                0,
                1,
                20 + 4 * 50,
                None,
            ),
            (
                spec(Coll::AllReduce, Ty::BF16, Op::Max),
                0,
                1,
                10 + 2 * 7,
                Some(0x01),
            ),
            (
                spec(Coll::AllReduce, Ty::F32, Op::Sum),
                0,
                1,
                20 + 4 * 50,
                Some(0x01),
            ),
        ];
        for (sp, g, w, at, v) in cases {
            let mut plan = Plan::new(&lay);
            plan.add(&sp, &mut rng).unwrap();
            let mut got = emulate(&plan);
            let i = (MARGIN as isize + at) as usize;
            got[g][w][i] = match v {
                Some(b) if b == got[g][w][i] => b ^ 0xff,
                Some(b) => b,
                None => plan.init[g][w][i],
            };
            let mut fails = Vec::new();
            plan.verify(&got, &mut fails);
            assert!(
                !fails.is_empty(),
                "not caught: {} GPU {g} at {at}",
                sp.label()
            );
        }
    }
}
