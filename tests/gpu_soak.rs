//! Soak: allocates and frees thousands of symmetric arrays of mixed sizes and types, in varied
//! orders (some kept alive for many rounds), while running a million small collectives, and
//! checks that nothing grows: the symmetric heap in use, the GPU memory in use and the
//! process's resident host memory, read on every PE after a warm-up and again at the end.
//!
//! A test program, its one test ignored where there is no GPU; `scripts/gpu-check.sh run soak`
//! runs it with 2 PEs under nvshmem-run and with 1 PE alone, `SOAK_ARGS` giving the options
//! of [`USAGE`] to every PE:
//!
//! ```sh
//! scripts/gpu-check.sh run soak                                              # 10,000 arrays, 1,000,000 collectives
//! SOAK_ARGS="--arrays 500 --collectives 20000" scripts/gpu-check.sh run soak # a quick run
//! mpirun -np 2 -x SOAK_ARGS target/release/deps/gpu_soak-HASH --ignored --nocapture
//! ```
//!
//! Each round allocates one array (one of six element types, 4 B to 4 MiB, log-uniform, from a
//! seeded sequence every PE draws alike), zeroed or filled from the host; runs one collective
//! over all of it (broadcast or max all-reduce, in place), queued and not waited for; keeps it
//! in a pool of live arrays or drops it at once, still in use on the GPU (freeing is stream
//! ordered: `nvshmem::memory`'s docs). A full pool evicts a random member; now and then a random
//! part of the pool is dropped. Arrays are checked against the host's expectation (some at
//! once, some when evicted, after living through later allocations). Between rounds, small
//! collectives (1 to 256 elements per PE) cycle through all_reduce (sum, max), broadcast,
//! fcollect, alltoall, reduce_scatter, reduce, gather, scatter, team barrier and sync,
//! barrier_all and sync_all, over the same six types, on the runtime's stream; every
//! `--sync-every` calls the stream is synchronised, and that call's output is checked (poisoned
//! first, so a stale result cannot pass).
//!
//! # What is measured, when, and the tolerances
//!
//! - **heap**: [`nvshmem::Runtime::heap_usage`]`().in_use`, this crate's ledger of the
//!   symmetric heap. It counts exactly what was allocated and not dropped: it must come back
//!   to the same byte.
//! - **device**: the GPU's memory in use, `cuMemGetInfo` total minus free. It includes what
//!   NVSHMEM maps for its heap, which shows fragmentation of NVSHMEM's allocator that the
//!   ledger cannot. Allowed to grow by 2 MiB (`--device-tolerance`): the driver hands out
//!   device memory in 2 MiB pages, so one page is the least a real allocation shows as; more is
//!   growth.
//! - **host**: the process's resident memory (`VmRSS`), read after `malloc_trim(0)` hands
//!   glibc's free memory back, so what is left is live. Allowed to grow by 4 MiB
//!   (`--rss-tolerance`): pages that the CUDA driver, NVSHMEM's proxy thread and the
//!   allocator touch for the first time late in the run, which are no leak; a leak of 5 bytes
//!   per collective or 420 per array would exceed it at the default counts.
//!
//! "Before" is read after a warm-up that does everything the soak does once (every collective
//! on every type, at the smallest and largest lengths; arrays of every type at every size
//! class, the largest pool full of the largest arrays; then a tenth of the rounds and
//! collectives, at most 1,000 and 100,000), so that one-time set-up (kernels compiled or
//! loaded, NVLink channels bound, NVSHMEM's heap mapped up to the soak's largest footprint, the
//! driver's staging buffers) is in it. Every reading (before, at
//! each quarter, after) is taken settled: the pool is emptied, the stream synchronised, and
//! [`nvshmem::Runtime::free_retired`] frees every dropped array on every PE (a dropped array
//! is only retired until the next allocation or that call), so `heap_usage().retired` is 0.
//!
//! Each PE prints its table, then PE 0 the verdict over all PEs (`soak: ok on every PE` or
//! `soak: FAILED on ...`); the exit status is non-zero on every PE when anything grew past its
//! tolerance or a check failed on any PE.
use std::{sync::Arc, time::Instant};

use anyhow::{bail, ensure, Context};
use nvshmem::{
    cudarc::driver::CudaStream, half::bf16, runtime::parse_size, Element, HeapUsage, ReduceOp,
    Runtime, SymArray, Team,
};

const USAGE: &str = "usage: SOAK_ARGS=\"[--arrays N] [--collectives N] [--sync-every N] [--keep N] \
[--max-bytes BYTES] [--seed N] [--device-tolerance BYTES] [--rss-tolerance BYTES]\" (a test of tests/gpu_soak.rs)
  --arrays N             arrays allocated and freed (default 10000)
  --collectives N        small collectives (default 1000000)
  --sync-every N         synchronise, and check one call, every N collectives (default 1000)
  --keep N               arrays kept alive at most (default 24)
  --max-bytes BYTES      the largest array (default 4M)
  --seed N               the sequence of sizes, types and orders (default 1)
  --device-tolerance B   allowed growth of GPU memory in use (default 2M)
  --rss-tolerance B      allowed growth of resident host memory (default 4M)
BYTES take K, M, G suffixes (powers of 1024).";

/// The soak on this PE, with the options of [`USAGE`] from `SOAK_ARGS` (the `soak` suite of
/// `scripts/gpu-check.sh` passes its own through): fails when anything grew past its
/// tolerance or a check failed on any PE.
#[test]
#[ignore = "needs NVIDIA GPUs and NVSHMEM: run scripts/gpu-check.sh on a GPU machine"]
fn nothing_grows_over_a_long_run() -> anyhow::Result<()> {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .try_init();
    let args = std::env::var("SOAK_ARGS").unwrap_or_default();
    soak(Config::from_args(
        args.split_whitespace().map(String::from),
    )?)
}

/// The soak's parameters (see [`USAGE`]).
#[derive(Debug, Clone)]
struct Config {
    arrays: usize,
    collectives: usize,
    sync_every: usize,
    keep: usize,
    max_bytes: usize,
    seed: u64,
    device_tolerance: usize,
    rss_tolerance: usize,
}

impl Config {
    /// The configuration the options `args` give (the rest at their defaults).
    fn from_args(mut args: impl Iterator<Item = String>) -> anyhow::Result<Config> {
        let mut c = Config {
            arrays: 10_000,
            collectives: 1_000_000,
            sync_every: 1000,
            keep: 24,
            max_bytes: 4 << 20,
            seed: 1,
            device_tolerance: 2 << 20,
            rss_tolerance: 4 << 20,
        };
        while let Some(arg) = args.next() {
            if arg == "-h" || arg == "--help" {
                bail!("{USAGE}");
            }
            let (name, value) = match arg.split_once('=') {
                Some((n, v)) => (n.to_string(), v.to_string()),
                None => {
                    let v = args.next();
                    (
                        arg.clone(),
                        v.with_context(|| format!("{arg} needs a value\n{USAGE}"))?,
                    )
                }
            };
            let count = || -> anyhow::Result<usize> {
                value
                    .replace('_', "")
                    .parse()
                    .with_context(|| format!("{name}: {value:?} is not a count\n{USAGE}"))
            };
            // parse_size refuses 0, which is a fine tolerance.
            let bytes = || -> anyhow::Result<usize> {
                if value.trim() == "0" {
                    return Ok(0);
                }
                parse_size(&value)
                    .with_context(|| format!("{name}: {value:?} is not a byte count\n{USAGE}"))
            };
            match name.as_str() {
                "--arrays" => c.arrays = count()?,
                "--collectives" => c.collectives = count()?,
                "--sync-every" => c.sync_every = count()?,
                "--keep" => c.keep = count()?,
                "--max-bytes" => c.max_bytes = bytes()?,
                "--seed" => c.seed = count()? as u64,
                "--device-tolerance" => c.device_tolerance = bytes()?,
                "--rss-tolerance" => c.rss_tolerance = bytes()?,
                _ => bail!("unknown option {name}\n{USAGE}"),
            }
        }
        ensure!(c.sync_every > 0, "--sync-every must be at least 1");
        ensure!(c.keep > 0, "--keep must be at least 1");
        ensure!(c.max_bytes >= 8, "--max-bytes must be at least 8");
        Ok(c)
    }
}

/// SplitMix64: the one sequence every PE draws alike (allocation and freeing are collective,
/// so sizes, types and orders must be the same everywhere; nothing PE-specific draws from it).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number below `n` (> 0).
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    /// True once in `n` draws on average.
    fn one_in(&mut self, n: u64) -> bool {
        self.next().is_multiple_of(n)
    }
}

/// The element types the soak uses: one per size, floats and integers, a 16-bit float among
/// them. Each has its pair of small-collective buffers.
const TYPES: usize = 6;

/// Most elements per PE in a small collective.
const SMALL: usize = 256;

/// What an element of a poisoned output holds: above every value the checks expect (at most
/// 240), exact in every type of the soak.
const POISON: f64 = 250.0;

/// Element `i` of a round's array as PE `pe` fills it (0 to 60: exact in every type, and
/// what the max all-reduce keeps fits them all).
fn pattern(pe: usize, round: usize, i: usize) -> f64 {
    ((pe * 7 + round * 3 + i) % 61) as f64
}

/// How a round's array was used, so what every element must hold.
#[derive(Debug, Clone, Copy)]
enum Fill {
    /// Allocated zeroed: zeros, whatever collective ran on it.
    Zero,
    /// Filled with `pattern`, then broadcast in place from `root`.
    From { round: usize, root: usize },
    /// Filled with `pattern`, then all-reduced in place with max.
    Max { round: usize },
}

impl Fill {
    fn expected(self, n: usize, i: usize) -> f64 {
        match self {
            Fill::Zero => 0.0,
            Fill::From { round, root } => pattern(root, round, i),
            Fill::Max { round } => (0..n).map(|p| pattern(p, round, i)).fold(0.0, f64::max),
        }
    }
}

/// An array of the pool, of any type.
trait Kept {
    /// Copies this PE's array to the host (through `host`) and counts the elements that differ
    /// from what its [`Fill`] says; returns a description of the first.
    fn check(&self, host: &mut [u64], n: usize) -> nvshmem::Result<Option<String>>;
}

struct Tagged<T: Element> {
    array: SymArray<T>,
    fill: Fill,
}

impl<T: Element> Kept for Tagged<T> {
    fn check(&self, host: &mut [u64], n: usize) -> nvshmem::Result<Option<String>> {
        let got = host_slice::<T>(host, self.array.len());
        self.array.copy_to_host(got)?;
        Ok(
            first_wrong(got, |i| Some(self.fill.expected(n, i)), 0.0).map(|(i, g, w)| {
                format!(
                    "array of {} {} ({:?}): element {i} is {g:?}, expected {w}",
                    self.array.len(),
                    T::NAME,
                    self.fill
                )
            }),
        )
    }
}

/// The first `len` elements of type `T` of the reusable host buffer (a `u64` buffer, so
/// aligned for every type), which the soak uses for every copy so the loop allocates no host
/// memory of its own.
fn host_slice<T: Element>(host: &mut [u64], len: usize) -> &mut [T] {
    let words = (len * std::mem::size_of::<T>()).div_ceil(8);
    &mut bytemuck::cast_slice_mut::<u64, T>(&mut host[..words])[..len]
}

/// The first element of `got` that differs from `want(i)` (`None`: `otherwise`), as
/// (index, got, wanted).
fn first_wrong<T: Element>(
    got: &[T],
    want: impl Fn(usize) -> Option<f64>,
    otherwise: f64,
) -> Option<(usize, T, f64)> {
    got.iter().enumerate().find_map(|(i, &g)| {
        let w = want(i).unwrap_or(otherwise);
        (g != T::from_f64(w)).then_some((i, g, w))
    })
}

/// The small collectives, cycled through in this order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    AllReduceSum,
    Broadcast,
    Fcollect,
    Barrier,
    AllReduceMax,
    Alltoall,
    Sync,
    ReduceScatter,
    ReduceMin,
    BarrierAll,
    Gather,
    Scatter,
    SyncAll,
}

const KINDS: [Kind; 13] = [
    Kind::AllReduceSum,
    Kind::Broadcast,
    Kind::Fcollect,
    Kind::Barrier,
    Kind::AllReduceMax,
    Kind::Alltoall,
    Kind::Sync,
    Kind::ReduceScatter,
    Kind::ReduceMin,
    Kind::BarrierAll,
    Kind::Gather,
    Kind::Scatter,
    Kind::SyncAll,
];

/// One small collective: what, on which type, how many elements per PE, which root.
#[derive(Debug, Clone, Copy)]
struct Call {
    kind: Kind,
    ty: usize,
    len: usize,
    root: usize,
}

impl Call {
    /// Call number `k` of the soak: the kinds cycle, the type changes every cycle (so every
    /// kind meets every type), the length and root wander.
    fn nth(k: usize, n: usize) -> Call {
        Call {
            kind: KINDS[k % KINDS.len()],
            ty: (k / KINDS.len()) % TYPES,
            len: 1 + (k.wrapping_mul(7919) >> 3) % SMALL,
            root: (k / 7) % n,
        }
    }
}

/// PE `pe`'s small-collective input, element `j`: 1 to `m`, with `m` small enough that a sum
/// over every PE stays exact in every type (below [`POISON`]).
fn small_value(pe: usize, j: usize, n: usize) -> f64 {
    let m = (240 / n).clamp(1, 29);
    ((pe * 5 + j) % m + 1) as f64
}

/// What element `i` of my output must hold after `call` (`None`: left as it was).
fn small_expected(call: Call, me: usize, n: usize, i: usize) -> Option<f64> {
    let Call {
        kind, len, root, ..
    } = call;
    let v = |p: usize, j: usize| small_value(p, j, n);
    let all = |j: usize| (0..n).map(move |p| v(p, j));
    match kind {
        Kind::AllReduceSum if i < len => Some(all(i).sum()),
        Kind::AllReduceMax if i < len => Some(all(i).fold(f64::MIN, f64::max)),
        Kind::Broadcast if i < len => Some(v(root, i)),
        Kind::Fcollect if i < n * len => Some(v(i / len, i % len)),
        Kind::Alltoall if i < n * len => Some(v(i / len, me * len + i % len)),
        Kind::ReduceScatter if i < len => Some(all(me * len + i).sum()),
        Kind::ReduceMin if i < len && me == root => Some(all(i).fold(f64::MAX, f64::min)),
        Kind::Gather if i < n * len && me == root => Some(v(i / len, i % len)),
        Kind::Scatter if i < len => Some(v(root, me * len + i)),
        _ => None,
    }
}

/// The input and output of the small collectives of one type, `n * SMALL` elements each,
/// allocated before the warm-up and kept to the end.
struct Pair<T: Element> {
    src: SymArray<T>,
    dst: SymArray<T>,
}

impl<T: Element> Pair<T> {
    fn new(rt: &Runtime) -> nvshmem::Result<Self> {
        let (me, n) = (rt.my_pe(), rt.n_pes());
        let data: Vec<T> = (0..n * SMALL)
            .map(|j| T::from_f64(small_value(me, j, n)))
            .collect();
        Ok(Pair {
            src: rt.alloc_from(&data)?,
            dst: rt.alloc_zeroed(n * SMALL)?,
        })
    }

    /// Queues `call` on `stream`.
    fn issue(&mut self, team: &Team, call: Call, stream: &Arc<CudaStream>) -> nvshmem::Result<()> {
        let (n, len, root) = (team.n_pes(), call.len, call.root);
        let Pair { src, dst } = self;
        match call.kind {
            Kind::AllReduceSum | Kind::AllReduceMax => {
                let op = if call.kind == Kind::AllReduceSum {
                    ReduceOp::Sum
                } else {
                    ReduceOp::Max
                };
                team.all_reduce(&src.view(..len)?, &mut dst.view_mut(..len)?, op, stream)
            }
            Kind::Broadcast => {
                team.broadcast(root, &src.view(..len)?, &mut dst.view_mut(..len)?, stream)
            }
            Kind::Fcollect => {
                team.fcollect(&src.view(..len)?, &mut dst.view_mut(..n * len)?, stream)
            }
            Kind::Alltoall => {
                team.alltoall(&src.view(..n * len)?, &mut dst.view_mut(..n * len)?, stream)
            }
            Kind::ReduceScatter => team.reduce_scatter(
                &src.view(..n * len)?,
                &mut dst.view_mut(..len)?,
                ReduceOp::Sum,
                stream,
            ),
            Kind::ReduceMin => team.reduce(
                root,
                &src.view(..len)?,
                &mut dst.view_mut(..len)?,
                ReduceOp::Min,
                stream,
            ),
            Kind::Gather => team.gather(
                root,
                &src.view(..len)?,
                &mut dst.view_mut(..n * len)?,
                stream,
            ),
            Kind::Scatter => team.scatter(
                root,
                &src.view(..n * len)?,
                &mut dst.view_mut(..len)?,
                stream,
            ),
            Kind::Barrier => team.barrier(stream),
            Kind::Sync => team.sync(stream),
            Kind::BarrierAll => team.runtime().barrier_all(stream),
            Kind::SyncAll => team.runtime().sync_all(stream),
        }
    }

    /// Runs `call` checked: poisons my output, meets every PE (so no PE's collective writes
    /// into my output before it is poisoned), queues the call, waits for it and compares the
    /// whole output with the host's expectation.
    fn checked(
        &mut self,
        team: &Team,
        call: Call,
        stream: &Arc<CudaStream>,
        host: &mut [u64],
    ) -> nvshmem::Result<Option<String>> {
        let (me, n) = (team.my_pe(), team.n_pes());
        let out = host_slice::<T>(host, self.dst.len());
        out.fill(T::from_f64(POISON));
        // Pageable memory: CUDA has staged it when this returns, so `host` may be reused.
        self.dst.copy_from_host_on(out, stream)?;
        team.runtime().barrier_all(stream)?;
        self.issue(team, call, stream)?;
        stream.synchronize()?;
        self.dst.copy_to_host(out)?;
        Ok(
            first_wrong(out, |i| small_expected(call, me, n, i), POISON).map(|(i, g, w)| {
                format!(
                    "{call:?} on {}: output element {i} is {g:?}, expected {w}",
                    T::NAME
                )
            }),
        )
    }
}

/// The small collectives' buffers, one pair per type of [`TYPES`].
struct SmallBufs {
    u8: Pair<u8>,
    bf16: Pair<bf16>,
    i32: Pair<i32>,
    f32: Pair<f32>,
    u64: Pair<u64>,
    f64: Pair<f64>,
}

/// Runs `$body` with `$T` the soak's element type number `$ty` (0 to [`TYPES`] - 1).
macro_rules! with_type {
    ($ty:expr, $T:ident => $body:expr) => {
        match $ty {
            0 => {
                type $T = u8;
                $body
            }
            1 => {
                type $T = bf16;
                $body
            }
            2 => {
                type $T = i32;
                $body
            }
            3 => {
                type $T = f32;
                $body
            }
            4 => {
                type $T = u64;
                $body
            }
            _ => {
                type $T = f64;
                $body
            }
        }
    };
}

/// The pair of buffers of type `Self`.
trait Pick: Element {
    fn pick(b: &mut SmallBufs) -> &mut Pair<Self>;
}

macro_rules! pick {
    ($($t:ty => $field:ident),*) => {
        $(impl Pick for $t {
            fn pick(b: &mut SmallBufs) -> &mut Pair<Self> {
                &mut b.$field
            }
        })*
    };
}
pick!(u8 => u8, bf16 => bf16, i32 => i32, f32 => f32, u64 => u64, f64 => f64);

/// One reading of memory on this PE.
#[derive(Debug, Clone)]
struct Reading {
    point: String,
    rounds: usize,
    calls: usize,
    secs: f64,
    heap: HeapUsage,
    device: usize,
    rss: usize,
}

/// The soak's state on this PE.
struct Soak {
    rt: Runtime,
    world: Team,
    stream: std::sync::Arc<CudaStream>,
    me: usize,
    n: usize,
    cfg: Config,
    rng: Rng,
    /// Every copy between host and GPU goes through this one buffer (see [`host_slice`]).
    host: Vec<u64>,
    pool: Vec<Box<dyn Kept>>,
    small: SmallBufs,
    /// Rounds (arrays) and small collectives done so far, warm-up included.
    rounds: usize,
    calls: usize,
    /// Checks run, and the first few that failed (with the count of all).
    checks: usize,
    failed: usize,
    failures: Vec<String>,
    start: Instant,
}

impl Soak {
    /// Records a check's outcome; a wrong result is counted and the run goes on, so that every
    /// PE reaches the end together (a PE that stopped here would leave the others waiting in
    /// their next collective).
    fn record(&mut self, outcome: Option<String>) {
        self.checks += 1;
        if let Some(what) = outcome {
            self.failed += 1;
            if self.failures.len() < 10 {
                eprintln!("soak: PE {}: wrong result: {what}", self.me);
                self.failures.push(what);
            }
        }
    }

    /// Small collective number `self.calls`; checked (and the stream synchronised) every
    /// `sync_every` calls.
    fn small_call(&mut self) -> anyhow::Result<()> {
        let call = Call::nth(self.calls, self.n);
        self.calls += 1;
        let check = self.calls.is_multiple_of(self.cfg.sync_every);
        self.small_typed(call, check)
    }

    fn small_typed(&mut self, call: Call, check: bool) -> anyhow::Result<()> {
        with_type!(call.ty, T => {
            let pair = T::pick(&mut self.small);
            if check {
                let outcome = pair
                    .checked(&self.world, call, &self.stream, &mut self.host)
                    .with_context(|| format!("{call:?} on {}", T::NAME))?;
                self.record(outcome);
            } else {
                pair.issue(&self.world, call, &self.stream)
                    .with_context(|| format!("{call:?} on {}", T::NAME))?;
            }
        });
        Ok(())
    }

    /// One round: a new array of `bytes` (rounded down to whole elements, at least one) of
    /// type number `ty`, used, checked (always, with `check`) or kept as the sequence says.
    fn round_with(&mut self, ty: usize, bytes: usize, check: bool) -> anyhow::Result<()> {
        let round = self.rounds;
        self.rounds += 1;
        let zeroed = self.rng.one_in(3);
        let max = self.rng.one_in(3);
        let root = self.rng.below(self.n);
        let check_now = self.rng.one_in(16);
        let keep = self.rng.one_in(2);
        let kept = with_type!(ty, T => {
            let len = (bytes / std::mem::size_of::<T>()).max(1);
            self.new_array::<T>(len, zeroed, max, round, root)
                .with_context(|| format!("array {round}: {len} {}", T::NAME))?
        });
        if check || check_now {
            let outcome = kept.check(&mut self.host, self.n)?;
            self.record(outcome);
        }
        if keep {
            self.pool.push(kept);
            if self.pool.len() > self.cfg.keep {
                let i = self.rng.below(self.pool.len());
                let evicted = self.pool.swap_remove(i);
                // Checked after living through later allocations and frees: another array
                // given its memory would show here.
                if self.rng.one_in(4) {
                    let outcome = evicted.check(&mut self.host, self.n)?;
                    self.record(outcome);
                }
            }
        }
        // Otherwise `kept` is dropped here, its collective perhaps still running: retired now,
        // freed at the next allocation once the GPU is done with it.
        if self.rng.one_in(101) {
            // Now and then a random part of the pool goes, in random order.
            let k = self.rng.below(self.pool.len() + 1);
            for _ in 0..k {
                let i = self.rng.below(self.pool.len());
                drop(self.pool.remove(i));
            }
        }
        Ok(())
    }

    /// A round with a drawn type and size: log-uniform from 4 B to `max_bytes`.
    fn round(&mut self) -> anyhow::Result<()> {
        let ty = self.rng.below(TYPES);
        let top = self.cfg.max_bytes.ilog2() as usize;
        let e = 2 + self.rng.below(top - 1);
        let bytes = ((1usize << e) + self.rng.below(1 << e)).min(self.cfg.max_bytes);
        self.round_with(ty, bytes, false)
    }

    fn new_array<T: Element>(
        &mut self,
        len: usize,
        zeroed: bool,
        max: bool,
        round: usize,
        root: usize,
    ) -> anyhow::Result<Box<dyn Kept>> {
        let mut array = if zeroed {
            self.rt.alloc_zeroed::<T>(len)?
        } else {
            let data = host_slice::<T>(&mut self.host, len);
            for (i, x) in data.iter_mut().enumerate() {
                *x = T::from_f64(pattern(self.me, round, i));
            }
            self.rt.alloc_from(data)?
        };
        // Used on the GPU at once, and not waited for.
        if max {
            self.world
                .all_reduce_in_place(&mut array, ReduceOp::Max, &self.stream)?;
        } else {
            self.world
                .broadcast_in_place(root, &mut array, &self.stream)?;
        }
        let fill = match (zeroed, max) {
            (true, _) => Fill::Zero,
            (false, true) => Fill::Max { round },
            (false, false) => Fill::From { round, root },
        };
        Ok(Box::new(Tagged { array, fill }))
    }

    /// `rounds` rounds with `calls` small collectives spread evenly between them (all at once
    /// when there are no rounds).
    fn span(&mut self, rounds: usize, calls: usize) -> anyhow::Result<()> {
        let mut done = 0;
        for r in 0..rounds {
            self.round()?;
            let until = calls * (r + 1) / rounds;
            while done < until {
                self.small_call()?;
                done += 1;
            }
        }
        while done < calls {
            self.small_call()?;
            done += 1;
        }
        Ok(())
    }

    /// Everything the soak does, once, so that one-time set-up is in the "before" reading.
    fn warm_up(&mut self) -> anyhow::Result<()> {
        // Every small collective on every type, at the smallest and largest lengths and two
        // roots, each checked.
        for kind in KINDS {
            for ty in 0..TYPES {
                for (len, root) in [(1, 0), (SMALL, self.n - 1)] {
                    let call = Call {
                        kind,
                        ty,
                        len,
                        root,
                    };
                    self.small_typed(call, true)?;
                }
            }
        }
        // Arrays of every type at every size class, each checked: the in-place collectives
        // choose their algorithm by size.
        for ty in 0..TYPES {
            let mut bytes = 4;
            while bytes <= self.cfg.max_bytes {
                self.round_with(ty, bytes, true)?;
                bytes *= 4;
            }
        }
        // The largest footprint the soak can reach: the pool full of the largest arrays, and
        // the round's new one (the pool emptied first, so it is no larger than that).
        self.pool.clear();
        let full: Vec<Box<dyn Kept>> = (0..=self.cfg.keep)
            .map(|i| {
                let (zeroed, max) = (false, i % 2 == 0);
                with_type!(i % TYPES, T => {
                    let len = self.cfg.max_bytes / std::mem::size_of::<T>();
                    let round = self.rounds;
                    self.rounds += 1;
                    self.new_array::<T>(len, zeroed, max, round, 0)
                })
            })
            .collect::<anyhow::Result<_>>()?;
        drop(full);
        // A tenth of the rounds and collectives (at most 1,000 and 100,000).
        let rounds = self.cfg.arrays.div_ceil(10).min(1000);
        let calls = (self.cfg.collectives / 10).min(100_000);
        self.span(rounds, calls)
    }

    /// Empties the pool, waits for the GPU, frees every dropped array on every PE, and reads
    /// the heap, the device and the host.
    fn settle_and_read(&mut self, point: &str) -> anyhow::Result<Reading> {
        while !self.pool.is_empty() {
            let i = self.rng.below(self.pool.len());
            drop(self.pool.swap_remove(i));
        }
        self.stream.synchronize()?;
        // Collective: every PE gets here at the same point of the sequence.
        self.rt.free_retired()?;
        let heap = self.rt.heap_usage();
        ensure!(
            heap.retired == 0,
            "{} B still retired after free_retired",
            heap.retired
        );
        Ok(Reading {
            point: point.into(),
            rounds: self.rounds,
            calls: self.calls,
            secs: self.start.elapsed().as_secs_f64(),
            heap,
            device: device_used(&self.rt)?,
            rss: host_rss()?,
        })
    }
}

/// The GPU's memory in use (total minus free), as `cuMemGetInfo` reports it for this PE's GPU.
fn device_used(rt: &Runtime) -> anyhow::Result<usize> {
    rt.context().bind_to_thread()?;
    let (free, total) = nvshmem::cudarc::driver::result::mem_get_info()?;
    Ok(total - free)
}

/// This process's resident memory (`VmRSS`), after glibc has handed back what it keeps free.
fn host_rss() -> anyhow::Result<usize> {
    #[cfg(target_env = "gnu")]
    // SAFETY: malloc_trim only returns free pages of glibc's arenas to the kernel; no live
    // allocation moves or changes, and it takes glibc's own locks.
    unsafe {
        libc::malloc_trim(0);
    }
    let status =
        std::fs::read_to_string("/proc/self/status").context("reading /proc/self/status")?;
    let kb: usize = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .context("no VmRSS line in /proc/self/status")?;
    Ok(kb * 1024)
}

/// Bytes with a binary unit.
fn human(bytes: f64) -> String {
    let units = ["B", "KiB", "MiB", "GiB"];
    let mut v = bytes;
    let mut u = 0;
    while v.abs() >= 1024.0 && u + 1 < units.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{v:.0} {}", units[u])
    } else {
        format!("{v:.1} {}", units[u])
    }
}

/// A change, signed, exact in bytes and readable.
fn change(after: usize, before: usize) -> String {
    let d = after as i128 - before as i128;
    format!(
        "{d:+} B ({}{})",
        if d >= 0 { "+" } else { "" },
        human(d as f64)
    )
}

fn soak(cfg: Config) -> anyhow::Result<()> {
    let rt = Runtime::init().context("starting NVSHMEM")?;
    let (me, n) = (rt.my_pe(), rt.n_pes());
    let stream = rt.stream().clone();
    if me == 0 {
        println!(
            "soak on {n} PEs ({} bootstrap): {} arrays of 4 B to {} kept at most {} at a time, \
             {} small collectives, synchronised every {}, seed {}",
            rt.info().bootstrap,
            cfg.arrays,
            human(cfg.max_bytes as f64),
            cfg.keep,
            cfg.collectives,
            cfg.sync_every,
            cfg.seed
        );
    }
    // The scratch the rooted reduce needs, reserved once (it is part of "before").
    rt.reserve_scratch(n * SMALL * 8)?;
    let small = SmallBufs {
        u8: Pair::new(&rt)?,
        bf16: Pair::new(&rt)?,
        i32: Pair::new(&rt)?,
        f32: Pair::new(&rt)?,
        u64: Pair::new(&rt)?,
        f64: Pair::new(&rt)?,
    };
    let mut s = Soak {
        world: rt.world(),
        rt: rt.clone(),
        stream: stream.clone(),
        me,
        n,
        rng: Rng(cfg.seed),
        host: vec![0; cfg.max_bytes.div_ceil(8).max(n * SMALL)],
        pool: Vec::new(),
        small,
        rounds: 0,
        calls: 0,
        checks: 0,
        failed: 0,
        failures: Vec::new(),
        start: Instant::now(),
        cfg: cfg.clone(),
    };

    s.warm_up().context("warm-up")?;
    let mut readings = vec![s.settle_and_read("before (after warm-up)")?];
    let (warm_rounds, warm_calls) = (s.rounds, s.calls);
    if me == 0 {
        println!(
            "warm-up: {warm_rounds} arrays, {warm_calls} small collectives, {:.1} s",
            readings[0].secs
        );
    }

    // The soak proper, in quarters, settled and read after each.
    let quarters = 4;
    for q in 0..quarters {
        let rounds = cfg.arrays * (q + 1) / quarters - cfg.arrays * q / quarters;
        let calls = cfg.collectives * (q + 1) / quarters - cfg.collectives * q / quarters;
        let t = Instant::now();
        s.span(rounds, calls)
            .with_context(|| format!("quarter {} of the soak", q + 1))?;
        let point = if q + 1 == quarters {
            "after".to_string()
        } else {
            format!("{}%", 100 * (q + 1) / quarters)
        };
        readings.push(s.settle_and_read(&point)?);
        if me == 0 {
            let secs = t.elapsed().as_secs_f64();
            println!(
                "quarter {}/{quarters}: {rounds} arrays, {calls} small collectives in {secs:.1} s \
                 ({:.0} collectives/s)",
                q + 1,
                calls as f64 / secs.max(1e-9)
            );
        }
    }

    // The verdict of this PE.
    let (before, after) = (&readings[0], &readings[readings.len() - 1]);
    let mut grew = Vec::new();
    if after.heap.in_use != before.heap.in_use {
        grew.push(format!(
            "symmetric heap in use {}",
            change(after.heap.in_use, before.heap.in_use)
        ));
    }
    if after.device > before.device + cfg.device_tolerance {
        grew.push(format!(
            "device memory {} (tolerance {})",
            change(after.device, before.device),
            human(cfg.device_tolerance as f64)
        ));
    }
    if after.rss > before.rss + cfg.rss_tolerance {
        grew.push(format!(
            "host RSS {} (tolerance {})",
            change(after.rss, before.rss),
            human(cfg.rss_tolerance as f64)
        ));
    }
    if s.failed > 0 {
        grew.push(format!("{} of {} checks wrong", s.failed, s.checks));
    }
    let ok = grew.is_empty();

    // The tables, one PE after another (the barriers keep them from interleaving).
    for p in 0..n {
        if p == me {
            print_table(me, &readings, &cfg, s.checks, s.failed);
            println!(
                "PE {me}: {}: heap in use {}, device {}, host RSS {}",
                if ok { "ok" } else { "FAILED" },
                change(after.heap.in_use, before.heap.in_use),
                change(after.device, before.device),
                change(after.rss, before.rss),
            );
            for g in &grew {
                println!("PE {me}:   {g}");
            }
        }
        rt.barrier_all(&stream)?;
        stream.synchronize()?;
    }

    // The verdict over all PEs: how many failed, known to every PE.
    let flag = rt.alloc_from(&[u32::from(!ok)])?;
    let mut failing = rt.alloc_zeroed::<u32>(1)?;
    rt.world()
        .all_reduce(&flag, &mut failing, ReduceOp::Sum, &stream)?;
    let failing = failing.to_vec()?[0];
    let total = s.start.elapsed().as_secs_f64();
    if me == 0 {
        if failing == 0 {
            println!(
                "soak: ok on every PE ({n}): {} arrays and {} small collectives after the warm-up, \
                 {} checks right; heap in use unchanged, device and host RSS grew less than {} and {} \
                 ({total:.1} s)",
                s.rounds - warm_rounds,
                s.calls - warm_calls,
                s.checks,
                human(cfg.device_tolerance as f64),
                human(cfg.rss_tolerance as f64),
            );
        } else {
            println!("soak: FAILED on {failing} of {n} PEs (see their lines above) ({total:.1} s)");
        }
    }
    ensure!(
        failing == 0,
        "{}",
        if ok {
            format!("{failing} other PE(s) grew or computed wrong results")
        } else {
            grew.join("; ")
        }
    );
    Ok(())
}

fn print_table(me: usize, readings: &[Reading], cfg: &Config, checks: usize, failed: usize) {
    println!(
        "PE {me}: memory, settled (heap: this crate's ledger; device: cuMemGetInfo total - free; \
         host: VmRSS after malloc_trim)"
    );
    println!(
        "PE {me}: {:<24} {:>7} {:>11} {:>8} {:>15} {:>15} {:>15} {:>15}",
        "point",
        "arrays",
        "collectives",
        "secs",
        "heap in use",
        "heap peak",
        "device used",
        "host RSS"
    );
    for r in readings {
        println!(
            "PE {me}: {:<24} {:>7} {:>11} {:>8.1} {:>15} {:>15} {:>15} {:>15}",
            r.point, r.rounds, r.calls, r.secs, r.heap.in_use, r.heap.peak, r.device, r.rss
        );
    }
    let (before, after) = (&readings[0], &readings[readings.len() - 1]);
    println!(
        "PE {me}: {:<24} heap in use {} (must be 0), device {} (at most +{}), host RSS {} (at most +{})",
        "after - before",
        change(after.heap.in_use, before.heap.in_use),
        change(after.device, before.device),
        human(cfg.device_tolerance as f64),
        change(after.rss, before.rss),
        human(cfg.rss_tolerance as f64),
    );
    println!("PE {me}: {checks} results checked against the host, {failed} wrong");
}

/// `SOAK_ARGS` is read as the soak example's command line was: both option forms, sizes with
/// suffixes, a zero tolerance; an unknown option or a bad value is refused with the usage.
#[test]
fn soak_args_parse_as_options() {
    let parse = |s: &str| Config::from_args(s.split_whitespace().map(String::from));
    let c = parse("--arrays 500 --collectives=20_000 --max-bytes 64K --device-tolerance 0")
        .expect("valid options");
    assert_eq!(
        (c.arrays, c.collectives, c.max_bytes),
        (500, 20_000, 64 << 10)
    );
    assert_eq!(
        (c.device_tolerance, c.rss_tolerance, c.keep),
        (0, 4 << 20, 24)
    );
    let d = parse("").expect("no options");
    assert_eq!((d.arrays, d.collectives), (10_000, 1_000_000));
    for bad in [
        "--arrays",
        "--arrays many",
        "--bogus 1",
        "--keep 0",
        "--help",
    ] {
        let e = parse(bad).expect_err(bad).to_string();
        assert!(e.contains("usage") || e.contains("at least"), "{bad}: {e}");
    }
}
