//! Shared by the GPU test programs: how they start, report and skip.
//!
//! Each GPU test file holds one `#[test]`, ignored by default (with the reason, so CI shows it
//! as skipped), that starts NVSHMEM once and runs named checks in order. `scripts/gpu-check.sh`
//! runs the files under each launcher with `--ignored`.
//!
//! The collective tests also share here what a collective call is, from the library's one
//! table of collectives ([`Collective`], [`Geometry`]): [`call`] and [`prepare`], a collective
//! made or prepared through the library's dynamic entry point ([`Team::collective`],
//! [`Team::prepare_collective`]), and [`Layout`], where a call's input, output and result lie
//! and what the result must be.
#![allow(dead_code)]

use cudarc::driver::CudaStream;
use nvshmem::collective::{CallKind, Collective, Geometry};
use nvshmem::{Element, ElementKind, Error, ReduceOp, Runtime, RuntimeBuilder, Team};
use nvshmem::{SymBuffer, SymBufferMut};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What this PE is doing and since when, for the watchdog.
static STEP: Mutex<Option<(String, Instant)>> = Mutex::new(None);

/// Records what this PE is doing now (a check's name, a case's phase).
pub fn step(what: impl Into<String>) {
    *STEP.lock().unwrap_or_else(|e| e.into_inner()) = Some((what.into(), Instant::now()));
}

/// Starts a thread that, whenever one step has lasted longer than `every`, prints which PE
/// is stuck where (on stderr): a GPU run that hangs then says where before its time limit
/// ends it. The thread ends with the process.
pub fn start_watchdog(pe: usize, every: Duration) {
    std::thread::spawn(move || loop {
        std::thread::sleep(every);
        let now = STEP.lock().unwrap_or_else(|e| e.into_inner()).clone();
        if let Some((what, since)) = now {
            let secs = since.elapsed().as_secs_f64();
            if secs >= every.as_secs_f64() {
                eprintln!("watchdog: PE {pe} still at \"{what}\" after {secs:.0} s");
            }
        }
    });
}

/// Why the GPU tests are skipped in an ordinary `cargo test`.
pub const NEEDS_GPU: &str =
    "needs NVIDIA GPUs and NVSHMEM: run scripts/gpu-check.sh on a GPU machine";

/// A started runtime and, when the test started MPI itself, MPI: finalised in that order.
pub struct Session {
    pub rt: Runtime,
    #[cfg(feature = "mpi")]
    universe: Option<mpi::environment::Universe>,
}

/// Starts the runtime the way `GPU_TEST_INIT` says: `auto` (default, detect from the
/// launcher) or `communicator` (the test starts MPI, NVSHMEM starts over its world
/// communicator, as a program with its own MPI would).
pub fn start(builder: RuntimeBuilder) -> Session {
    // RUST_LOG=nvshmem=debug shows the runtime's choices (bootstrap, channel bindings).
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_writer(std::io::stderr)
        .try_init();
    let how = std::env::var("GPU_TEST_INIT").unwrap_or_else(|_| "auto".into());
    match how.as_str() {
        "auto" => Session {
            rt: builder.init().expect("NVSHMEM starts"),
            #[cfg(feature = "mpi")]
            universe: None,
        },
        #[cfg(feature = "mpi")]
        "communicator" => {
            use mpi::traits::Communicator;
            let universe = mpi::initialize().expect("MPI starts");
            let world = universe.world();
            let rt = builder
                .init_with_communicator(&world)
                .expect("NVSHMEM starts over the communicator");
            assert_eq!(
                (rt.n_pes(), rt.my_pe()),
                (world.size() as usize, world.rank() as usize)
            );
            Session {
                rt,
                universe: Some(universe),
            }
        }
        other => panic!("GPU_TEST_INIT={other}: expected auto or communicator"),
    }
}

impl Session {
    /// Finalises NVSHMEM, then MPI if the test started it.
    pub fn end(self) {
        self.rt
            .finalize()
            .expect("nothing else holds the runtime at the end");
        #[cfg(feature = "mpi")]
        drop(self.universe);
    }
}

/// Runs one named check, printing its outcome on PE 0's and every failing PE's output.
pub struct Checks {
    pe: usize,
    pub passed: usize,
    pub failed: Vec<String>,
    pub skipped: Vec<String>,
}

impl Checks {
    pub fn new(pe: usize) -> Self {
        Checks {
            pe,
            passed: 0,
            failed: Vec::new(),
            skipped: Vec::new(),
        }
    }

    pub fn run(&mut self, name: &str, f: impl FnOnce() -> anyhow::Result<()>) {
        // GPU_TEST_SKIP: comma-separated parts of check names to leave out (the same on every
        // PE, since checks are collective), to isolate a failure; skips are counted and shown.
        let skip = std::env::var("GPU_TEST_SKIP").unwrap_or_default();
        if skip.split(',').any(|p| !p.is_empty() && name.contains(p)) {
            self.skipped.push(name.to_string());
            if self.pe == 0 {
                println!("check {name} ... skipped (GPU_TEST_SKIP)");
            }
            return;
        }
        step(name);
        let t0 = Instant::now();
        let result = f();
        let secs = t0.elapsed().as_secs_f64();
        match result {
            Ok(()) => {
                self.passed += 1;
                if self.pe == 0 {
                    println!("check {name} ... ok ({secs:.1} s)");
                }
            }
            Err(e) => {
                println!(
                    "check {name} ... FAILED on PE {} ({secs:.1} s): {e:#}",
                    self.pe
                );
                self.failed.push(name.to_string());
            }
        }
    }

    /// Prints the summary line and fails the test if any check failed.
    pub fn finish(self, what: &str) {
        let skipped = match self.skipped.len() {
            0 => String::new(),
            k => format!(", {k} skipped"),
        };
        println!(
            "PE {}: {what}: {} passed, {} failed{skipped}{}",
            self.pe,
            self.passed,
            self.failed.len(),
            if self.failed.is_empty() {
                String::new()
            } else {
                format!(" ({})", self.failed.join(", "))
            }
        );
        assert!(self.failed.is_empty(), "failed checks: {:?}", self.failed);
    }
}

/// `anyhow::ensure!` with the values in the message.
#[macro_export]
macro_rules! ensure_eq {
    ($a:expr, $b:expr) => {{
        let (a, b) = (&$a, &$b);
        anyhow::ensure!(a == b, "{} = {:?}, expected {:?}", stringify!($a), a, b);
    }};
}

// ---- collective calls, from the library's table of collectives ---------------------------

/// The collectives that move data (all but barrier and sync), in the table's order.
pub fn data_collectives() -> Vec<Collective> {
    Collective::ALL
        .into_iter()
        .filter(|c| c.geometry() != Geometry::None)
        .collect()
}

/// The library's value for `coll` as these tests call it ([`CallKind`]).
pub fn kind(coll: Collective, in_place: bool, root: usize, op: ReduceOp) -> CallKind {
    CallKind::new(coll).in_place(in_place).root(root).op(op)
}

/// Queues `coll` over `team` on `s` ([`Team::collective`]): from `src` into `dst`, or in
/// place in `dst` alone (`src` unused). `root` is used by rooted collectives only, `op` by
/// reductions only.
#[allow(clippy::too_many_arguments)]
pub fn call<T: Element>(
    team: &Team,
    coll: Collective,
    in_place: bool,
    root: usize,
    op: ReduceOp,
    src: &impl SymBuffer<T>,
    dst: &mut impl SymBufferMut<T>,
    s: &Arc<CudaStream>,
) -> nvshmem::Result<()> {
    let src = (!in_place).then_some(src);
    team.collective(kind(coll, in_place, root, op), src, dst, s)
}

/// Prepares `coll` over `team` ([`Team::prepare_collective`]), as [`call`] makes it: from
/// `src` into `dst`, or in place in `dst` alone (`src` unused).
pub fn prepare<'a, T: Element>(
    team: &Team,
    coll: Collective,
    in_place: bool,
    root: usize,
    op: ReduceOp,
    src: &'a impl SymBuffer<T>,
    dst: &'a mut impl SymBufferMut<T>,
) -> nvshmem::Result<nvshmem::collective::Prepared<'a>> {
    let src = (!in_place).then_some(src);
    team.prepare_collective(kind(coll, in_place, root, op), src, dst)
}

/// Where one call's buffers and result lie, for team member `r`, derived from the collective's
/// [`Geometry`]: `m` elements a part (the library's `count`: the whole input of all-reduce,
/// reduce and broadcast, one block of the others) in a team of `n`.
#[derive(Clone, Copy, Debug)]
pub struct Layout {
    pub coll: Collective,
    pub n: usize,
    pub m: usize,
    pub in_place: bool,
    pub root: usize,
}

impl Layout {
    /// (input, output) elements of one member out of place.
    pub fn lens(&self) -> (usize, usize) {
        self.coll
            .geometry()
            .lengths(self.m, self.n)
            .expect("a test's sizes fit a usize")
    }

    /// Elements of the output buffer the call gets: in place, one buffer of the larger length,
    /// holding the input where NCCL puts it ([`Layout::input_at`]).
    pub fn out_len(&self) -> usize {
        let (src, dst) = self.lens();
        if self.in_place {
            src.max(dst)
        } else {
            dst
        }
    }

    /// Where member `r`'s input starts in the in-place buffer: its own block of a gathered
    /// output, else the start.
    pub fn input_at(&self, r: usize) -> usize {
        match self.coll.geometry() {
            Geometry::Gathered if self.in_place => r * self.m,
            _ => 0,
        }
    }

    /// Whether member `r` gets no result, its output left untouched: not the root of a
    /// rooted reduction or gather (broadcast and scatter give every member a result).
    pub fn root_only(&self, r: usize) -> bool {
        self.coll.is_rooted()
            && r != self.root
            && (self.coll.reduces() || self.coll.geometry() == Geometry::Gathered)
    }

    /// The part of member `r`'s output buffer the call defines: in place, a scattered result is
    /// the member's own block.
    pub fn result(&self, r: usize) -> std::ops::Range<usize> {
        let at = match self.coll.geometry() {
            Geometry::Scattered if self.in_place => r * self.m,
            _ => 0,
        };
        at..at + self.lens().1
    }

    /// Element `i` of member `r`'s result, `input(k, j)` being element `j` of member `k`'s
    /// input and `reduce(val)` the reduction of `val(k)` over the members: an `f64`, or a
    /// [`Reference`](nvshmem::testing::Reference) with the magnitude the tolerance needs
    /// (data moved converts into one).
    pub fn expected<R: From<f64>>(
        &self,
        r: usize,
        i: usize,
        input: impl Fn(usize, usize) -> f64,
        reduce: impl Fn(&dyn Fn(usize) -> f64) -> R,
    ) -> R {
        let m = self.m;
        // Whose input (None: every member's, reduced, or the root's) and which element of it.
        let (from, at) = match self.coll.geometry() {
            Geometry::Same => (None, i),
            Geometry::Gathered => (Some(i / m), i % m),
            Geometry::Scattered => (None, r * m + i),
            Geometry::Exchanged => (Some(i / m), r * m + i % m),
            g => panic!("{} ({g:?}) has no result", self.coll),
        };
        if self.coll.reduces() {
            reduce(&|k| input(k, at))
        } else {
            R::from(input(from.unwrap_or(self.root), at))
        }
    }
}

/// splitmix64's output function: a well-mixed 64-bit hash.
pub fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// What an output holds before a call writes it: a value no check's inputs give.
pub fn poison<T: Element>() -> T {
    if T::KIND == ElementKind::Bool {
        // True but not a byte any reduction of 0/1 inputs produces: an unwritten element
        // shows in a byte check.
        return *bytemuck::from_bytes::<T>(&[0x5A]);
    }
    T::from_f64(if T::KIND == ElementKind::Unsigned {
        99.0
    } else {
        -99.0
    })
}

/// Whether `e` is a forced algorithm's refusal (the same on every PE: the choice depends only
/// on what every PE passes).
pub fn refused(e: &anyhow::Error) -> bool {
    matches!(
        e.downcast_ref::<Error>(),
        Some(Error::AlgorithmRefused { .. })
    )
}
