//! Shared by the GPU test programs: how they start, report and skip.
//!
//! Each GPU test file holds one `#[test]`, ignored by default (with the reason, so CI shows it
//! as skipped), that starts NVSHMEM once and runs named checks in order. `scripts/gpu-check.sh`
//! runs the files under each launcher with `--ignored`.
#![allow(dead_code)]

use nvshmem::{Runtime, RuntimeBuilder};
use std::sync::Mutex;
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
