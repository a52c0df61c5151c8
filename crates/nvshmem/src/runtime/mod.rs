//! Starting and stopping NVSHMEM: the [`Runtime`] guard.
//!
//! NVSHMEM can be initialised once per process. [`Runtime::init`] (or the
//! [`RuntimeBuilder`]) does it; every handle made from the runtime (arrays, teams, timers)
//! holds it alive, and NVSHMEM is finalised when the last one drops or by
//! [`Runtime::finalize`].
//!
//! This is the bottom layer of the crate: it starts and stops NVSHMEM, and holds one field of
//! state for each layer above it (the memory layer's heap ledger, the teams, the collectives'
//! settings), made in that order at start-up and closed before NVSHMEM is finalised; it calls
//! none of their functions but those that make and close that state. Below the layers it
//! also keeps what they share: the runtime's health, its means of agreement between PEs
//! (`runtime/exchange.rs`), and what the GPU may still be using (`runtime/streams.rs`).
//!
//! # Threads
//!
//! [`Runtime`], [`Team`](crate::Team), [`SymArray`](crate::SymArray) and
//! [`Timing`](crate::Timing) are `Send` and `Sync`: they are handles to state behind an `Arc`,
//! whose mutable parts (the heap's ledger, the collective scratch, each team's order of calls)
//! sit behind locks. Any thread may call any method; each call binds the runtime's CUDA context
//! to the calling thread first. NVSHMEM is started with its host library's default thread
//! support, which it reports in [`RuntimeInfo::thread_level`] (`NVSHMEM_THREAD_MULTIPLE` = 3
//! on NVSHMEM 3.4.5). What threads must still agree on is *order*: collectives, allocations
//! and frees are collective over PEs, so every PE must issue them in the same order:
//! - calls on the *same* team are matched between PEs by their order, so the threads of a PE
//!   that make calls on one team must order those calls between themselves. On the GPU the
//!   library orders them for you: a call on another stream than the team's last one first
//!   waits for the team's earlier calls (as NCCL orders the calls of one communicator), so
//!   calls of one team never overlap on the GPU, whatever streams they use;
//! - calls on *different* teams may run at once, from any threads and streams; but the GPU
//!   need not run the kernels of different streams at the same time (streams can share a
//!   hardware queue, notably under MPS, or find the multiprocessors taken), and this crate's
//!   kernels wait for their peers. So calls on different teams must be *issued* in the same
//!   order on every PE, as NCCL asks of communicators used at once; issued in different
//!   orders, they may wait for each other until the [timeout](RuntimeBuilder::timeout), which
//!   ends them with [`Error::CollectiveFailed`], never for ever;
//! - allocations, [`Runtime::free_retired`], team creation: from one thread at a time, in the
//!   same order on every PE. Dropping arrays and teams is not collective: any thread, any
//!   time. When the PEs' calls do not match (one allocates where another makes a team, or
//!   with another size), every PE gets [`Error::OutOfStep`] naming what each did, or, where a
//!   PE never arrives, [`Error::WaitTimedOut`] after the [timeout](RuntimeBuilder::timeout).
//!
//! The GPU test `collectives_from_several_host_threads` runs three threads per PE this way,
//! each on its own team and stream, taking turns to issue their calls.
//!
//! # Several PEs on one GPU
//!
//! Running more PEs than GPUs (for correctness checks; it measures no speed) needs CUDA MPS
//! with a share per PE (`CUDA_MPS_ACTIVE_THREAD_PERCENTAGE` at most 100 / PEs per GPU): the
//! README's "Launching" says how. Without MPS, NVSHMEM runs such PEs in a limited mode in
//! which its collectives end the process, and [`Runtime::init`] refuses to start
//! ([`Error::GpuSharedWithoutMps`]). [`RuntimeInfo::pes_on_device`] and
//! [`RuntimeInfo::gpu_sharing`] say what was found. This crate's own kernels then use at most
//! the blocks each PE's share can keep resident at once, so that the kernels of PEs that
//! wait for each other can all run.
//!
//! # Health
//!
//! A PE whose peer died, stopped or hangs must not wait for ever. Every wait the library
//! queues on a stream ends within the [timeout](RuntimeBuilder::timeout), counted from when
//! the stream reaches it: this crate's kernels (the NVLink collectives, and the stream's wait
//! of [`Runtime::signal_wait_until`]) poll the clock and an abort word and record what they
//! waited for; NVSHMEM's own collectives and quiet, which nothing can end, are framed on the
//! stream by two writes into host-mapped memory, so the watchdog sees how long the stream has
//! been inside one. Each runtime has a watchdog thread that notices a failure (a peer's
//! process gone or stopped on this host, a wait past the timeout), ends this crate's kernels
//! through their abort word, and makes every later call return the failure
//! ([`Error::PeerFailed`], [`Error::CollectiveFailed`] naming the team, the PE waited for and
//! the epoch, [`Error::SignalWaitFailed`] naming the signal word, the comparison and the
//! values, [`Error::WaitTimedOut`]); a program stuck inside NVSHMEM's own calls (or a stream
//! still inside one after the failure) is ended with status 1 after [`GRACE`], the failure
//! printed. Not watched: NVSHMEM calls queued into a CUDA graph (every replay writes the same
//! frame, so one long wait cannot be told from many short ones; this crate's kernels in a
//! graph are bounded as anywhere). [`Runtime::abort`] and
//! [`Runtime::async_error`] are the program's own handles on it, like NCCL's
//! `ncclCommAbort` and `ncclCommGetAsyncError`. A failed runtime is not finalised: the
//! process exits with NVSHMEM as it is. The details, and why the process table rather than a
//! heartbeat, are in the source of `runtime/health.rs`.
//!
//! A panic on a PE leaves NVSHMEM as it is too (finalising is collective): the process exits
//! with the panic's message and status 101, and its peers see it gone. Dropping the last
//! handle of a healthy runtime first agrees with every PE (within the timeout) that all are
//! finalising, with the watchdog still running, so a peer that dies meanwhile never leaves a
//! PE waiting in NVSHMEM's finalisation.
pub(crate) mod exchange;
mod health;
mod launcher;
#[cfg(test)]
mod props;
pub(crate) mod streams;
mod uid;

use std::{
    path::PathBuf,
    sync::{Arc, Mutex, OnceLock},
    time::Duration,
};

use cudarc::driver::{sys::CUstream, CudaContext, CudaStream};
use nvshmem_sys::NvshmemLib;
use tracing::{debug, info, warn};

pub(crate) use health::{team_label, Health, Identity, TeamName};
pub use health::{DEFAULT_TIMEOUT, GRACE, POLL, TIMEOUT_VAR};
use launcher::{detect, Placement, REMOTE_TRANSPORT_VAR};
pub use launcher::{Bootstrap, BOOTSTRAP_VAR};

use crate::{
    collective::{algo::Collectives, Collective},
    ffi::Nvshmem,
    memory::Heap,
    team::Teams,
    Error, Result,
};
use exchange::{About, Exchange};
use streams::{Capture, Captures};

/// NVSHMEM's default symmetric heap size (1 GiB), used when neither the builder nor
/// `NVSHMEM_SYMMETRIC_SIZE` sets one.
///
/// ```no_run
/// # std::env::remove_var("NVSHMEM_SYMMETRIC_SIZE");
/// let rt = nvshmem::Runtime::init()?;
/// assert_eq!(rt.info().heap_size, nvshmem::runtime::DEFAULT_HEAP_SIZE);
/// # Ok::<(), nvshmem::Error>(())
/// ```
pub const DEFAULT_HEAP_SIZE: usize = 1 << 30;

/// What this process has done with NVSHMEM so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Fresh,
    Live,
    Finalized,
    /// Started, then failed before a runtime could be handed out (NVSHMEM is left as it is).
    Failed,
}

static STATE: Mutex<State> = Mutex::new(State::Fresh);

/// How this PE's GPU is shared with other PEs of the job.
///
/// ```no_run
/// use nvshmem::runtime::GpuSharing;
/// let rt = nvshmem::Runtime::init()?;
/// if rt.info().gpu_sharing != GpuSharing::Exclusive {
///     println!("{} PEs share this GPU: figures from this run mean nothing", rt.info().pes_on_device);
/// }
/// # Ok::<(), nvshmem::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub enum GpuSharing {
    /// This PE is the job's only PE on its GPU.
    Exclusive,
    /// Several PEs share the GPU through CUDA MPS (NVSHMEM's full mode for that), each with the
    /// share of the GPU's threads its `CUDA_MPS_ACTIVE_THREAD_PERCENTAGE` gives, if set.
    Mps {
        /// This PE's `CUDA_MPS_ACTIVE_THREAD_PERCENTAGE`, if set.
        thread_percentage: Option<f64>,
    },
}

/// What the runtime chose when it started.
///
/// ```no_run
/// let rt = nvshmem::Runtime::init()?;
/// let info = rt.info();
/// println!(
///     "NVSHMEM {} from {} on GPU {} (local rank {}), {} bootstrap, {} byte heap",
///     info.version, info.library.display(), info.device, info.local_rank, info.bootstrap, info.heap_size,
/// );
/// # Ok::<(), nvshmem::Error>(())
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct RuntimeInfo {
    /// The bootstrap that started NVSHMEM.
    pub bootstrap: Bootstrap,
    /// Where `libnvshmem_host.so.3` was loaded from.
    pub library: PathBuf,
    /// NVSHMEM's release.
    pub version: nvshmem_sys::Version,
    /// The CUDA device ordinal this PE uses.
    pub device: usize,
    /// This PE's rank among the PEs of its node, as the launcher said (or 0).
    pub local_rank: usize,
    /// The symmetric heap size, bytes.
    pub heap_size: usize,
    /// The thread support NVSHMEM reports (`nvshmem_query_thread`: 0 single, 1 funneled,
    /// 2 serialized, 3 multiple).
    pub thread_level: i32,
    /// How many PEs of the job use this PE's GPU (this one included).
    pub pes_on_device: usize,
    /// How they share it.
    pub gpu_sharing: GpuSharing,
    /// The most blocks of this crate's large-message kernels (512 threads each) that this PE
    /// can keep resident at once: the GPU's multiprocessors, or this PE's share of them when
    /// PEs share the GPU. A team's kernels use at most its members' smallest figure.
    pub resident_blocks: u32,
}

/// A live NVSHMEM runtime: one per process, shared by cloning.
///
/// ```no_run
/// let rt = nvshmem::Runtime::init()?;
/// println!("PE {} of {} on GPU {}", rt.my_pe(), rt.n_pes(), rt.info().device);
/// # Ok::<(), nvshmem::Error>(())
/// ```
#[derive(Clone)]
pub struct Runtime {
    inner: Arc<RuntimeInner>,
}

/// A runtime that does not keep it alive: for what the runtime itself holds (its scratch,
/// its teams' channels), which must not keep it alive for ever.
#[derive(Clone)]
pub(crate) struct WeakRuntime(std::sync::Weak<RuntimeInner>);

impl WeakRuntime {
    /// The runtime, if it is still alive.
    pub(crate) fn upgrade(&self) -> Option<Runtime> {
        self.0.upgrade().map(|inner| Runtime { inner })
    }
}

/// The state of a runtime: NVSHMEM and the CUDA context, its health, its means of agreement,
/// and the state of each layer above (the heap's ledger, the teams, the collectives), set once
/// at start-up and closed, newest first, before NVSHMEM is finalised.
struct RuntimeInner {
    nv: Nvshmem,
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    my_pe: usize,
    n_pes: usize,
    info: RuntimeInfo,
    /// The abort word, the watchdog and the first failure seen (see [`health`]).
    health: Arc<Health>,
    /// The library's own agreements between PEs, on its own stream and world team. Dropped by
    /// hand: a runtime that failed leaks it (a copy into its page-locked memory may be in
    /// flight).
    exchange: std::mem::ManuallyDrop<Exchange>,
    /// This crate's world team: a duplicate of `NVSHMEM_TEAM_WORLD`, which agreements over
    /// every PE and the program's world collectives ([`Runtime::world`]) run on.
    /// `NVSHMEM_TEAM_WORLD` itself is left to NVSHMEM's host calls: `nvshmem_malloc` and
    /// `nvshmem_free` end with a barrier over it on NVSHMEM's own stream, which must not meet
    /// a collective of ours on the same team still running on another stream or PE (the two
    /// would share the team's sync counters: the GPU run of 2026-11-24 saw wrong sums and
    /// hangs at 3, 4 and 8 PEs when an allocation followed a world all-reduce at once).
    world_team: crate::ffi::TeamHandle,
    /// The graphs being captured through [`Runtime::capture`].
    captures: Captures,
    heap: Heap,
    collectives: Collectives,
    /// Set once, right after the runtime is made (making teams needs the runtime).
    teams: OnceLock<Teams>,
    /// MPI, when this runtime started it; finalised after NVSHMEM.
    #[cfg(feature = "mpi")]
    universe: Option<mpi::environment::Universe>,
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime")
            .field("my_pe", &self.inner.my_pe)
            .field("n_pes", &self.inner.n_pes)
            .field("info", &self.inner.info)
            .finish()
    }
}

/// Chooses how NVSHMEM starts. Everything has a default; see [`Bootstrap`] for detection.
///
/// ```no_run
/// use nvshmem::{Bootstrap, Runtime};
/// let rt = Runtime::builder()
///     .bootstrap(Bootstrap::Env)
///     .heap_size(256 << 20)
///     .init()?;
/// # Ok::<(), nvshmem::Error>(())
/// ```
#[derive(Debug, Clone, Default)]
pub struct RuntimeBuilder {
    bootstrap: Option<Bootstrap>,
    device: Option<usize>,
    heap_size: Option<usize>,
    timeout: Option<Option<Duration>>,
    /// `RuntimeBuilder::channels`.
    pub(crate) channels: Option<usize>,
    /// `RuntimeBuilder::lamport_bytes`.
    pub(crate) lamport_bytes: Option<usize>,
    /// `RuntimeBuilder::algorithm`, in the order given.
    pub(crate) algorithms: Vec<(Collective, String)>,
    /// `RuntimeBuilder::check_calls` and `check_nvshmem_calls`: 0 off, 1 this crate's
    /// kernels, 2 also before NVSHMEM's collectives.
    check_calls: Option<u32>,
}

/// The environment variable that turns the NVLink kernels' check of mismatched calls on (`1`),
/// on and also before NVSHMEM's collectives on peer-mapped teams (`2`), or off (`0`); it
/// overrides [`RuntimeBuilder::check_calls`] and [`RuntimeBuilder::check_nvshmem_calls`].
///
/// ```
/// assert_eq!(nvshmem::runtime::CHECK_CALLS_VAR, "NVSHMEM_RS_CHECK_CALLS");
/// ```
pub const CHECK_CALLS_VAR: &str = "NVSHMEM_RS_CHECK_CALLS";

impl Runtime {
    /// Starts NVSHMEM with every choice detected from the environment.
    ///
    /// ```no_run
    /// let rt = nvshmem::Runtime::init()?;
    /// assert!(rt.my_pe() < rt.n_pes());
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    pub fn init() -> Result<Runtime> {
        RuntimeBuilder::default().init()
    }

    /// A builder to choose the bootstrap, the GPU or the heap size.
    ///
    /// ```no_run
    /// let rt = nvshmem::Runtime::builder().heap_size(64 << 20).init()?;
    /// assert_eq!(rt.info().heap_size, 64 << 20);
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    pub fn builder() -> RuntimeBuilder {
        RuntimeBuilder::default()
    }

    /// This PE's index in the world team.
    ///
    /// ```no_run
    /// # let rt = nvshmem::Runtime::init()?;
    /// if rt.my_pe() == 0 {
    ///     println!("PE 0 reporting for {} PEs", rt.n_pes());
    /// }
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    pub fn my_pe(&self) -> usize {
        self.inner.my_pe
    }

    /// The number of PEs.
    ///
    /// ```no_run
    /// # let rt = nvshmem::Runtime::init()?;
    /// let right = (rt.my_pe() + 1) % rt.n_pes();
    /// assert!(right < rt.n_pes());
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    pub fn n_pes(&self) -> usize {
        self.inner.n_pes
    }

    /// What was chosen at start-up.
    ///
    /// ```no_run
    /// # let rt = nvshmem::Runtime::init()?;
    /// assert!(rt.info().version.is_compatible_with_bindings());
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    pub fn info(&self) -> &RuntimeInfo {
        &self.inner.info
    }

    /// The CUDA context NVSHMEM runs on (the primary context of this PE's GPU).
    ///
    /// ```no_run
    /// # let rt = nvshmem::Runtime::init()?;
    /// // A second stream of the same GPU, for work that overlaps the runtime's own.
    /// let side = rt.context().new_stream().unwrap();
    /// rt.barrier_all(&side)?;
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    pub fn context(&self) -> &Arc<CudaContext> {
        &self.inner.ctx
    }

    /// The runtime's own stream, used by blocking conveniences such as
    /// [`SymArray::copy_to_host`](crate::SymArray::copy_to_host).
    ///
    /// ```no_run
    /// # let rt = nvshmem::Runtime::init()?;
    /// let stream = rt.stream().clone();
    /// rt.barrier_all(&stream)?;
    /// stream.synchronize().unwrap();
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    pub fn stream(&self) -> &Arc<CudaStream> {
        &self.inner.stream
    }

    /// Finalises NVSHMEM now. Refused, with the count, while other handles (clones, arrays,
    /// teams, timers) still use the runtime; those keep it alive, and it is finalised when the
    /// last of them drops.
    ///
    /// ```no_run
    /// let rt = nvshmem::Runtime::init()?;
    /// let a = rt.alloc_zeroed::<f32>(4)?;
    /// let again = rt.clone();
    /// // Refused: `a` and `again` still use it (and the refused handle is dropped).
    /// assert!(matches!(rt.finalize(), Err(nvshmem::Error::RuntimeInUse(2))));
    /// drop(a);
    /// again.finalize()?;
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    pub fn finalize(self) -> Result<()> {
        let others = self.handles() - 1;
        if others > 0 {
            return Err(Error::RuntimeInUse(others));
        }
        drop(self);
        Ok(())
    }
}

/// The runtime's health (see [Health](crate::runtime#health)).
impl Runtime {
    /// Ends every wait of this crate's kernels (the NVLink collectives, and the streams'
    /// waits of [`Runtime::signal_wait_until`]), now and in any such kernel that starts
    /// later on this PE, and returns at once, whatever the other PEs do: each kernel stops
    /// soon after, its call's results undefined. Every later call on the runtime returns
    /// [`Error::CollectiveFailed`] ("aborted"), and the runtime is not finalised when dropped
    /// (finalising is collective), so the process can exit. Like NCCL's `ncclCommAbort`.
    /// NVSHMEM's own collectives (teams that are not peer-mapped) are not ended by it.
    ///
    /// ```no_run
    /// # let rt = nvshmem::Runtime::init()?;
    /// rt.abort();
    /// assert!(rt.async_error().is_err());
    /// assert!(rt.world().barrier(rt.stream()).is_err());
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    pub fn abort(&self) {
        self.inner.health.abort()
    }

    /// The failure that ended this runtime, if any: a peer that died or stopped
    /// ([`Error::PeerFailed`]), a wait of this crate's NVLink kernels that timed out or was
    /// aborted, a launch outside its limits ([`Error::CollectiveFailed`]), a signal wait that
    /// timed out ([`Error::SignalWaitFailed`]), a wait inside NVSHMEM past the timeout
    /// ([`Error::WaitTimedOut`]). Like NCCL's `ncclCommGetAsyncError`; reads host memory only
    /// (what a kernel recorded is read at once, not at the watchdog's next look), so it never
    /// blocks.
    ///
    /// ```no_run
    /// # let rt = nvshmem::Runtime::init()?;
    /// rt.async_error()?;
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    pub fn async_error(&self) -> Result<()> {
        self.inner.health.check_now()
    }

    /// How long a PE waits for a peer before the job counts as broken (`None`: for ever); see
    /// [`RuntimeBuilder::timeout`].
    ///
    /// ```no_run
    /// # let rt = nvshmem::Runtime::init()?;
    /// println!("waits end after {:?}", rt.timeout());
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    pub fn timeout(&self) -> Option<Duration> {
        self.inner.health.timeout()
    }
}

/// What the layers above reach of the runtime.
impl Runtime {
    /// NVSHMEM's functions (valid while this runtime lives).
    pub(crate) fn nv(&self) -> Nvshmem {
        self.inner.nv
    }

    /// Makes the runtime's context current on the calling thread, as every NVSHMEM host call
    /// that touches the GPU needs.
    #[inline]
    pub(crate) fn bind(&self) -> Result<()> {
        self.inner
            .ctx
            .bind_to_thread()
            .map_err(Error::cuda("binding the CUDA context"))
    }

    /// Checks that the job has not failed and that `stream` is on this runtime's GPU context,
    /// and makes that context current; returns the raw stream.
    #[inline]
    pub(crate) fn enter(&self, call: &'static str, stream: &CudaStream) -> Result<CUstream> {
        if stream.context().cu_ctx() != self.inner.ctx.cu_ctx() {
            return Err(self.foreign_stream(call, stream));
        }
        self.inner.health.check()?;
        self.bind()?;
        Ok(stream.cu_stream())
    }

    /// [`Runtime::enter`]'s refusal of a stream of another device, out of line.
    #[cold]
    fn foreign_stream(&self, call: &'static str, stream: &CudaStream) -> Error {
        Error::arg(
            call,
            "stream",
            format_args!(
                "belongs to CUDA device {} but this PE's NVSHMEM runs on device {}",
                stream.context().ordinal(),
                self.inner.info.device
            ),
        )
    }

    /// [`Runtime::enter`] for a call that queues work using resources (arrays, a team, the
    /// scratch), with what it needs to note their use: whether the stream is being captured,
    /// and into which graph (a capture this crate did not start is refused).
    #[inline]
    pub(crate) fn enqueue<'a>(
        &'a self,
        call: &'static str,
        stream: &'a Arc<CudaStream>,
    ) -> Result<Enqueue<'a>> {
        let cu = self.enter(call, stream)?;
        let capture = self.inner.captures.of(call, stream)?;
        Ok(Enqueue {
            rt: self,
            stream,
            cu,
            capture,
        })
    }

    /// The runtime's health: abort word, watchdog, failure.
    pub(crate) fn health(&self) -> &Health {
        &self.inner.health
    }

    /// Refuses to start anything collective once the job has failed: the peer it would wait
    /// for may never come.
    pub(crate) fn check_health(&self) -> Result<()> {
        self.inner.health.check()
    }

    /// Whether `other` is this runtime (and not a handle of one finalised earlier).
    #[inline]
    pub(crate) fn is(&self, other: &Runtime) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    /// Refuses memory (or a team) of another runtime: `arg` of `call` came from `other`.
    #[inline]
    pub(crate) fn check_same(
        &self,
        call: &'static str,
        arg: &'static str,
        other: &Runtime,
    ) -> Result<()> {
        #[cold]
        fn other_runtime(call: &'static str, arg: &'static str) -> Error {
            Error::arg(call, arg, "belongs to another NVSHMEM runtime")
        }
        if self.is(other) {
            Ok(())
        } else {
            Err(other_runtime(call, arg))
        }
    }

    /// The memory layer's state.
    pub(crate) fn heap(&self) -> &Heap {
        &self.inner.heap
    }

    /// The team layer's state.
    pub(crate) fn teams(&self) -> &Teams {
        self.inner
            .teams
            .get()
            .expect("the teams are set up before the runtime is handed out")
    }

    /// The collectives' state.
    #[inline]
    pub(crate) fn collectives(&self) -> &Collectives {
        &self.inner.collectives
    }

    /// The graphs being captured.
    pub(crate) fn captures(&self) -> &Captures {
        &self.inner.captures
    }

    /// Gathers every world PE's `mine` (an agreement of the library's own, on its own stream
    /// and team, waited for at most the timeout).
    pub(crate) fn agree_world(
        &self,
        call: &'static str,
        mine: &exchange::Entry,
    ) -> Result<Vec<exchange::Entry>> {
        self.agree_world_with(call, |_| Ok(*mine))
    }

    /// [`Runtime::agree_world`] with an entry that `make` builds on the agreement's stream
    /// (queuing there what must precede the gather).
    pub(crate) fn agree_world_with(
        &self,
        call: &'static str,
        make: impl FnOnce(&Arc<CudaStream>) -> Result<exchange::Entry>,
    ) -> Result<Vec<exchange::Entry>> {
        let about = About {
            call,
            team: "the world",
        };
        self.inner.exchange.gather(
            self.inner.nv,
            &self.inner.health,
            self.inner.world_team,
            self.inner.n_pes,
            about,
            make,
        )
    }

    /// Gathers every member's entry over `team` (`n` members): `make` queues on the
    /// agreement's stream what must precede the gather (such as waiting for the team's earlier
    /// calls) and returns this PE's entry.
    pub(crate) fn agree_over(
        &self,
        about: About<'_>,
        team: crate::ffi::TeamHandle,
        n: usize,
        make: impl FnOnce(&Arc<CudaStream>) -> Result<exchange::Entry>,
    ) -> Result<Vec<exchange::Entry>> {
        self.inner
            .exchange
            .gather(self.inner.nv, &self.inner.health, team, n, about, make)
    }

    /// The NVSHMEM team behind [`Runtime::world`]: a duplicate of `NVSHMEM_TEAM_WORLD`
    /// (`RuntimeInner::world_team` says why).
    pub(crate) fn world_handle(&self) -> crate::ffi::TeamHandle {
        self.inner.world_team
    }

    /// A handle that does not keep the runtime alive.
    pub(crate) fn downgrade(&self) -> WeakRuntime {
        WeakRuntime(Arc::downgrade(&self.inner))
    }

    /// How many handles share this runtime.
    pub(crate) fn handles(&self) -> usize {
        Arc::strong_count(&self.inner)
    }
}

/// A call about to queue work on `stream`: the runtime healthy, its context current, the
/// stream checked, and the graph it is being captured into, if any.
pub struct Enqueue<'a> {
    pub(crate) rt: &'a Runtime,
    pub(crate) stream: &'a Arc<CudaStream>,
    pub(crate) cu: CUstream,
    capture: Option<Arc<Capture>>,
}

impl Enqueue<'_> {
    /// Notes that the work queued now uses `r` (see [`streams`]): its use on the stream, its
    /// order after its earlier uses, or, in a capture, the graph keeping it.
    #[inline]
    pub(crate) fn uses(&self, r: &Arc<impl streams::Resource>) -> Result<()> {
        streams::note(
            r,
            self.stream,
            self.capture.as_deref(),
            &self.rt.inner.captures,
        )
    }

    /// Whether the work is being captured into a graph.
    pub(crate) fn capturing(&self) -> bool {
        self.capture.is_some()
    }
}

impl RuntimeBuilder {
    /// Chooses the bootstrap instead of detecting it.
    ///
    /// ```no_run
    /// use nvshmem::{Bootstrap, Runtime};
    /// let rt = Runtime::builder().bootstrap(Bootstrap::Single).init()?;
    /// assert_eq!(rt.n_pes(), 1);
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    pub fn bootstrap(mut self, bootstrap: Bootstrap) -> Self {
        self.bootstrap = Some(bootstrap);
        self
    }

    /// Uses this CUDA device instead of the one picked from the node-local rank.
    ///
    /// ```no_run
    /// let rt = nvshmem::Runtime::builder().device(1).init()?;
    /// assert_eq!(rt.info().device, 1);
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    pub fn device(mut self, ordinal: usize) -> Self {
        self.device = Some(ordinal);
        self
    }

    /// Sets the symmetric heap size in bytes (overrides `NVSHMEM_SYMMETRIC_SIZE`).
    ///
    /// ```no_run
    /// let rt = nvshmem::Runtime::builder().heap_size(2 << 30).init()?;
    /// assert_eq!(rt.info().heap_size, 2 << 30);
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    pub fn heap_size(mut self, bytes: usize) -> Self {
        self.heap_size = Some(bytes);
        self
    }

    /// How long a PE waits for a peer before the job counts as broken (see
    /// [`health`](crate::runtime#health)): `None` waits for ever. Default
    /// [`DEFAULT_TIMEOUT`]; the environment variable [`TIMEOUT_VAR`] overrides it. A wait of
    /// this crate's NVLink kernels that lasts longer ends with [`Error::CollectiveFailed`],
    /// and a peer on this host stopped for longer ends the runtime with [`Error::PeerFailed`].
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// let rt = nvshmem::Runtime::builder()
    ///     .timeout(Duration::from_secs(60))
    ///     .init()?;
    /// assert_eq!(rt.timeout(), Some(Duration::from_secs(60)));
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    pub fn timeout(mut self, limit: impl Into<Option<Duration>>) -> Self {
        self.timeout = Some(limit.into());
        self
    }

    /// Whether this crate's NVLink kernels check that every PE of a team made the same call
    /// (default: on). Each PE's kernels publish a fingerprint of the call (collective, element
    /// type, operator and premul_sum's scale, count, in place, root, team) beside their
    /// arrival and compare their peers' with theirs, so that two different calls never accept
    /// each other's flags or touch each other's buffers: a mismatch ends the call on every PE
    /// with [`Error::CallMismatch`] (and fails the runtime) instead of a wrong result or a
    /// hang. It costs each arrival one more pair of 16-byte stores and each block's end one
    /// more pair of loads per peer (`kernels/PROTOCOL.md`, "Fingerprints"). The environment
    /// variable [`CHECK_CALLS_VAR`] (`0` or `1`) overrides it. Every PE must choose alike:
    /// starting fails with [`Error::OutOfStep`] otherwise. Calls that run NVSHMEM's own
    /// collectives are not checked ([`check_nvshmem_calls`](Self::check_nvshmem_calls)).
    ///
    /// ```no_run
    /// let rt = nvshmem::Runtime::builder().check_calls(false).init()?;
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    pub fn check_calls(mut self, on: bool) -> Self {
        self.check_calls = Some(u32::from(on));
        self
    }

    /// Whether calls that a peer-mapped team (one with a channel) runs with NVSHMEM's own
    /// collectives are checked too (default: off; implies [`check_calls`](Self::check_calls)).
    /// Such a call is then preceded by this crate's flag sync carrying its fingerprint, which
    /// costs a kernel and a round trip between the PEs per call, too much for the mid-sized
    /// messages that take NVSHMEM's path to be on by default. A mismatch is reported as
    /// [`Error::CallMismatch`]; NVSHMEM's collective, already queued, still runs, and where it
    /// then waits for ever the watchdog ends the process with the mismatch printed
    /// ([`GRACE`]). [`CHECK_CALLS_VAR`]`=2` is the same.
    ///
    /// ```no_run
    /// let rt = nvshmem::Runtime::builder().check_nvshmem_calls(true).init()?;
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    pub fn check_nvshmem_calls(mut self, on: bool) -> Self {
        self.check_calls = Some(if on { 2 } else { 1 });
        self
    }

    /// Starts NVSHMEM.
    ///
    /// NVSHMEM reads its configuration only from the environment, so starting may set
    /// `NVSHMEM_SYMMETRIC_SIZE` (always, to the heap size chosen) and, for NVSHMEM's own
    /// bootstraps, `NVSHMEM_BOOTSTRAP` and `NVSHMEM_BOOTSTRAP_PMI`. No other thread of the
    /// program may read or write the environment while this runs.
    ///
    /// ```no_run
    /// use nvshmem::{Bootstrap, Runtime};
    /// let rt = Runtime::builder().bootstrap(Bootstrap::Env).init()?;
    /// println!("PE {} of {}", rt.my_pe(), rt.n_pes());
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    pub fn init(self) -> Result<Runtime> {
        let env = |k: &str| std::env::var(k).ok();
        let launch = detect(self.bootstrap.unwrap_or(Bootstrap::Auto), &env)?;
        #[cfg(feature = "mpi")]
        if launch.bootstrap == Bootstrap::Mpi {
            ensure_fresh(*STATE.lock().unwrap_or_else(|p| p.into_inner()))?;
            let universe = start_mpi()?;
            let world = mpi::topology::SimpleCommunicator::world();
            return self.start_over_communicator(&world, universe);
        }
        self.start(
            launch,
            None,
            #[cfg(feature = "mpi")]
            None,
        )
    }

    /// Starts NVSHMEM over an MPI communicator the caller already has (MPI initialised and
    /// owned by the caller, who must keep it alive until the runtime is finalised). Collective
    /// over `comm`: its rank 0 makes the unique id and broadcasts it; the PEs are numbered as
    /// the communicator's ranks.
    ///
    /// ```no_run
    /// use mpi::traits::*;
    /// let universe = mpi::initialize().unwrap();
    /// let world = universe.world();
    /// let rt = nvshmem::Runtime::builder().init_with_communicator(&world)?;
    /// assert_eq!(rt.n_pes(), world.size() as usize);
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    #[cfg(feature = "mpi")]
    pub fn init_with_communicator<C: mpi::traits::Communicator>(self, comm: &C) -> Result<Runtime> {
        self.start_over_communicator(comm, None)
    }

    #[cfg(feature = "mpi")]
    fn start_over_communicator<C: mpi::traits::Communicator>(
        self,
        comm: &C,
        universe: Option<mpi::environment::Universe>,
    ) -> Result<Runtime> {
        let (local_rank, local_size) = mpi_node_local(comm);
        let launch = Placement {
            bootstrap: Bootstrap::Mpi,
            rank: Some(comm.rank() as usize),
            size: Some(comm.size() as usize),
            local_rank: Some(local_rank),
            local_size: Some(local_size),
            rendezvous: None,
        };
        let mut exchange = |uid: Option<uid::UidBytes>| mpi_broadcast_uid(comm, uid);
        self.start(launch, Some(&mut exchange), universe)
    }

    /// The common start: settings, GPU, library, heap, then NVSHMEM through the launch's
    /// bootstrap, then the library's own state (agreed with every PE).
    /// `exchange`, when given, hands rank 0's unique id to every rank.
    /// `universe` is MPI when this runtime started it, to be finalised after NVSHMEM.
    fn start(
        self,
        launch: Placement,
        exchange: Option<&mut UidExchange>,
        #[cfg(feature = "mpi")] universe: Option<mpi::environment::Universe>,
    ) -> Result<Runtime> {
        let mut state = STATE.lock().unwrap_or_else(|p| p.into_inner());
        ensure_fresh(*state)?;
        // Everything that can be judged before NVSHMEM starts is judged first, so that a bad
        // setting or variable never leaves NVSHMEM started.
        let timeout = choose_timeout(self.timeout)?;
        let check_calls = choose_check_calls(self.check_calls)?;
        let collectives = Collectives::new(&self.algorithms)?;
        let heap_size = choose_heap_size(self.heap_size)?;
        // Then the GPU: on a machine without one, that is the message that helps.
        let device = pick_device(self.device, launch.local_rank.unwrap_or(0))?;
        let lib = Nvshmem::library()?;
        if Nvshmem::init_status(lib) != crate::ffi::STATUS_NOT_INITIALIZED {
            return Err(Error::AlreadyInitialized(
                "by another component of this program",
            ));
        }
        let ctx = CudaContext::new(device)
            .map_err(|e| Error::NoGpu(format!("cannot open CUDA device {device}: {e}")))?;
        ctx.bind_to_thread()
            .map_err(Error::cuda("binding the CUDA context"))?;
        choose_remote_transport(&launch);
        debug!(device, heap_size, rank = ?launch.rank, size = ?launch.size, "starting NVSHMEM");
        init_nvshmem(lib, &launch, exchange)?;
        // NVSHMEM is started. A failure from here on leaves it as it is (finalising is
        // collective, and the other PEs may be past this point), and no runtime can start again
        // in this process; a failure every PE sees alike is reported alike.
        *state = State::Failed;
        // SAFETY: NVSHMEM is now initialised, and the handle lives in the runtime made below,
        // which finalises NVSHMEM only when the last handle to it is gone.
        let nv = unsafe { Nvshmem::assume_initialised(lib) };
        let (my_pe, n_pes) = nv.world();
        if launch.rank.is_some_and(|r| r != my_pe) || launch.size.is_some_and(|s| s != n_pes) {
            warn!(my_pe, n_pes, rank = ?launch.rank, size = ?launch.size, "NVSHMEM numbered the PEs differently from the launcher");
        }
        let pes_on_device = nv.pes_on_this_gpu();
        if Nvshmem::init_status(lib) == crate::ffi::STATUS_LIMITED_MPG {
            // Every collective of NVSHMEM would end the process: refuse to go on.
            return Err(Error::GpuSharedWithoutMps {
                pes: pes_on_device.max(2),
                device,
            });
        }
        let gpu_sharing = if pes_on_device > 1 {
            GpuSharing::Mps {
                thread_percentage: mps_thread_percentage(),
            }
        } else {
            GpuSharing::Exclusive
        };
        let info = RuntimeInfo {
            bootstrap: launch.bootstrap,
            library: nvshmem_sys::loaded_path()
                .map(PathBuf::from)
                .unwrap_or_default(),
            version: nvshmem_sys::loaded_version().expect("the library is loaded"),
            device,
            local_rank: launch.local_rank.unwrap_or(0),
            heap_size,
            thread_level: nv.thread_level(),
            pes_on_device,
            gpu_sharing,
            resident_blocks: resident_blocks(&ctx, pes_on_device, gpu_sharing)?,
        };
        let stream = ctx
            .new_stream()
            .map_err(Error::cuda("creating the runtime's stream"))?;
        let health = Health::start(my_pe, timeout)?;
        // The world team (see `RuntimeInner::world_team`), and room for the agreements'
        // entries (the heap's first allocation, at the same offset on every PE: the origin the
        // heap measures offsets from).
        // SAFETY: NVSHMEM is initialised; the world team has n_pes members.
        let world_team =
            unsafe { nv.split_strided(nvshmem_sys::teams::NVSHMEM_TEAM_WORLD, 0, 1, n_pes) }
                .map_err(|e| e.in_call("nvshmem_team_split_strided (the runtime's own team)"))?;
        let sym_bytes = exchange::sym_bytes(n_pes);
        // SAFETY: the context is current; every PE asks for the same size.
        let sym = unsafe { nv.malloc(sym_bytes, true) }.ok_or(Error::OutOfHeap {
            requested: sym_bytes,
            in_use: 0,
            heap_size,
        })?;
        let own = ctx
            .new_stream()
            .map_err(Error::cuda("creating the runtime's own stream"))?;
        let exchange = Exchange::new(own, sym, n_pes)?;
        exchange.open(nv, &health, world_team)?;
        let identity = Identity::own();
        let mut words = identity.words.to_vec();
        words.push(heap_size as u64);
        let table = exchange.gather(
            nv,
            &health,
            world_team,
            n_pes,
            About {
                call: "Runtime::init",
                team: "the world",
            },
            |_| Ok(exchange::entry(exchange::tag::START, &words)),
        )?;
        exchange::same_call("Runtime::init", &table, exchange::tag::START)?;
        let heap_word = 1 + Identity::WORDS;
        if let Some(pe) = table.iter().position(|e| e[heap_word] != heap_size as u64) {
            return Err(Error::OutOfStep {
                call: "Runtime::init",
                detail: format!(
                    "PE {pe} has a symmetric heap of {} bytes and PE {my_pe} one of {heap_size}: \
                     every PE needs the same (NVSHMEM_SYMMETRIC_SIZE, RuntimeBuilder::heap_size)",
                    table[pe][heap_word]
                ),
            });
        }
        health.watch_peers(
            table
                .iter()
                .map(|e| Identity {
                    words: std::array::from_fn(|i| e[1 + i]),
                })
                .collect(),
        );
        let rt = Runtime {
            inner: Arc::new(RuntimeInner {
                nv,
                heap: Heap::new(heap_size, sym, sym_bytes),
                health,
                stream,
                ctx,
                my_pe,
                n_pes,
                info,
                exchange: std::mem::ManuallyDrop::new(exchange),
                world_team,
                captures: Captures::default(),
                collectives,
                teams: OnceLock::new(),
                #[cfg(feature = "mpi")]
                universe,
            }),
        };
        // A failure here is seen alike by every PE (an allocation refused, an agreement out of
        // step), or ends their next agreement: dropping the runtime then finalises NVSHMEM
        // where every PE agrees to, and leaves it otherwise.
        let teams = Teams::start(&rt, self.channels, self.lamport_bytes, check_calls)?;
        if rt.inner.teams.set(teams).is_err() {
            unreachable!("the teams are set once, here");
        }
        *state = State::Live;
        drop(state);
        let info = &rt.inner.info;
        info!(
            pe = my_pe, n_pes, bootstrap = %info.bootstrap, library = %info.library.display(),
            version = %info.version, device, heap_size, pes_on_device, "NVSHMEM started"
        );
        Ok(rt)
    }
}

fn ensure_fresh(state: State) -> Result<()> {
    match state {
        State::Fresh => Ok(()),
        State::Live => Err(Error::AlreadyInitialized("a runtime is live")),
        State::Finalized => Err(Error::AlreadyInitialized("it was finalised earlier")),
        State::Failed => Err(Error::AlreadyInitialized(
            "a runtime started and failed earlier",
        )),
    }
}

/// This PE's `CUDA_MPS_ACTIVE_THREAD_PERCENTAGE`, if set to a number.
fn mps_thread_percentage() -> Option<f64> {
    std::env::var("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE")
        .ok()
        .and_then(|v| v.trim().parse::<f64>().ok())
        .filter(|p| *p > 0.0 && *p <= 100.0)
}

/// The most 512-thread blocks this PE can keep resident at once (see
/// [`RuntimeInfo::resident_blocks`]): one per multiprocessor (the large-message kernels take a
/// whole one each). An MPS client with a thread percentage already sees only its share of the
/// multiprocessors in the device's count (seen on an H100: 33 of 132 at 25 %); PEs that share
/// the GPU without one split it equally.
fn resident_blocks(ctx: &CudaContext, pes_on_device: usize, sharing: GpuSharing) -> Result<u32> {
    use cudarc::driver::sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT;
    let sms = ctx
        .attribute(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
        .map_err(Error::cuda("cuDeviceGetAttribute (multiprocessors)"))?
        .max(1) as u32;
    Ok(share_of_sms(sms, pes_on_device, sharing))
}

/// [`resident_blocks`]'s arithmetic.
fn share_of_sms(sms: u32, pes_on_device: usize, sharing: GpuSharing) -> u32 {
    let share = match sharing {
        GpuSharing::Exclusive
        | GpuSharing::Mps {
            thread_percentage: Some(_),
        } => sms,
        GpuSharing::Mps {
            thread_percentage: None,
        } => sms / pes_on_device.max(1) as u32,
    };
    share.max(1)
}

/// Hands rank 0's unique id (passed in on rank 0 only) to every rank, returning it.
type UidExchange<'a> = dyn FnMut(Option<uid::UidBytes>) -> Result<uid::UidBytes> + 'a;

fn init_nvshmem(
    lib: &NvshmemLib,
    launch: &Placement,
    exchange: Option<&mut UidExchange>,
) -> Result<()> {
    let mut attr = nvshmem_sys::nvshmemx_init_attr_t::default();
    set_attr_versions(&mut attr);
    if let Some(flavour) = launch.bootstrap.nvshmem_pmi_flavour() {
        // NVSHMEM's own bootstrap plugins are chosen through its environment.
        check_plugin(launch.bootstrap)?;
        // SAFETY: called from `start`, under the runtime's lock, before NVSHMEM starts (the
        // contract the builder documents: no other thread uses the environment meanwhile).
        unsafe {
            set_env("NVSHMEM_BOOTSTRAP", "PMI");
            set_env("NVSHMEM_BOOTSTRAP_PMI", flavour);
        }
        // SAFETY: NVSHMEM is not initialised (checked in `start`); attr is a valid, versioned
        // attribute struct that outlives the call; the context is current.
        return unsafe { Nvshmem::hostlib_init(lib, 0, &mut attr) };
    }
    let rank = launch.rank.unwrap_or(0);
    let size = launch.size.unwrap_or(1);
    let uid_bytes = match (exchange, launch.bootstrap) {
        (Some(exchange), _) => exchange(if rank == 0 { Some(new_uid(lib)?) } else { None })?,
        (None, Bootstrap::Env) if size > 1 => {
            let (addr, port) = launch
                .rendezvous
                .clone()
                .expect("detect() checked the rendezvous");
            let timeout = uid::rendezvous_timeout()?;
            if rank == 0 {
                let id = new_uid(lib)?;
                uid::serve_uid(&addr, port, size, &id, timeout)?;
                id
            } else {
                uid::fetch_uid(&addr, port, rank, size, timeout)?
            }
        }
        _ => new_uid(lib)?,
    };
    // set_attr_uniqueid_args keeps a pointer to the id: it must live until init returns.
    let uid = uid::uid_from_bytes(&uid_bytes);
    // SAFETY: uid and attr are valid and outlive both calls; NVSHMEM is not initialised
    // (checked in `start`) and the context is current.
    unsafe {
        Nvshmem::set_uniqueid_args(lib, rank, size, &uid, &mut attr)?;
        Nvshmem::hostlib_init(
            lib,
            nvshmem_sys::NVSHMEMX_INIT_WITH_UNIQUEID as u32,
            &mut attr,
        )
    }
}

/// Opens NVSHMEM's bootstrap plugin for `bootstrap` ourselves first. NVSHMEM reports a plugin
/// that cannot be loaded (say, built against another PMIx) and then crashes in its own clean-up
/// (seen with 3.4.5's PMIx plugin: a double free); checking first turns that into an error.
fn check_plugin(bootstrap: Bootstrap) -> Result<()> {
    let file = match bootstrap {
        Bootstrap::Pmi => "nvshmem_bootstrap_pmi.so.3",
        Bootstrap::Pmi2 => "nvshmem_bootstrap_pmi2.so.3",
        _ => "nvshmem_bootstrap_pmix.so.3",
    };
    let dir = nvshmem_sys::loaded_path()
        .and_then(|p| p.parent())
        .unwrap_or(std::path::Path::new(""));
    let path = dir.join(file);
    use libloading::os::unix::{Library, RTLD_LOCAL, RTLD_NOW};
    // SAFETY: the plugin's constructors only initialise its own state; it is unloaded again at
    // once, and NVSHMEM loads it afresh.
    match unsafe { Library::open(Some(&path), RTLD_NOW | RTLD_LOCAL) } {
        Ok(lib) => {
            drop(lib);
            Ok(())
        }
        Err(e) => Err(Error::Bootstrap {
            bootstrap: bootstrap.to_string(),
            detail: format!("NVSHMEM's plugin {} cannot be loaded: {e}", path.display()),
        }),
    }
}

/// Fills in the version fields NVSHMEM checks (its `nvshmemx_init_init_attr_ver_only` macro).
fn set_attr_versions(attr: &mut nvshmem_sys::nvshmemx_init_attr_t) {
    use std::mem::size_of_val;
    attr.version = (1 << 16) + size_of_val(attr) as i32;
    attr.args.version = (1 << 16) + size_of_val(&attr.args) as i32;
    attr.args.uid_args.version = (1 << 16) + size_of_val(&attr.args.uid_args) as i32;
}

fn new_uid(lib: &NvshmemLib) -> Result<uid::UidBytes> {
    Ok(uid::uid_to_bytes(&Nvshmem::unique_id(lib)?))
}

/// Turns NVSHMEM's remote (network) transport off when every PE of the job is on this node
/// and the user has not chosen one (`launcher::remote_transport` says when): NVSHMEM would
/// otherwise open InfiniBand for nothing, and 3.8 prints an error line per PE at every start
/// on a machine without it (`ibrc.cpp: ... no IB devices found`).
fn choose_remote_transport(launch: &Placement) {
    let user = std::env::var(REMOTE_TRANSPORT_VAR).ok();
    match launcher::remote_transport(launch, user.as_deref()) {
        Some(value) => {
            debug!(
                var = REMOTE_TRANSPORT_VAR,
                value, "every PE is on this node: no remote transport for NVSHMEM"
            );
            // SAFETY: called from `start`, under the runtime's lock, before NVSHMEM starts
            // (the contract the builder documents: no other thread uses the environment).
            unsafe { set_env(REMOTE_TRANSPORT_VAR, value) };
        }
        None => debug!(
            var = REMOTE_TRANSPORT_VAR,
            user = ?user,
            size = ?launch.size,
            local_size = ?launch.local_size,
            "NVSHMEM's remote transport left as it is (set by the user, or PEs may be on other nodes)"
        ),
    }
}

/// Sets a variable NVSHMEM reads at initialisation (it reads its configuration only from the
/// environment). Skipped when the variable already has the value.
///
/// # Safety
/// No other thread reads or writes the environment during the call (`std::env::set_var`
/// races with `getenv` in C code, NVSHMEM's and MPI's included). The runtime calls it only
/// while starting, under its lock, and [`RuntimeBuilder::init`] documents that requirement.
unsafe fn set_env(key: &str, value: &str) {
    if std::env::var(key).is_ok_and(|v| v == value) {
        return;
    }
    debug!(key, value, "setting NVSHMEM's environment");
    std::env::set_var(key, value);
}

/// The CUDA device for this PE: the explicit choice, else the node-local rank modulo the
/// number of visible devices.
fn pick_device(explicit: Option<usize>, local_rank: usize) -> Result<usize> {
    // SAFETY: only checks whether libcuda can be opened; cudarc panics on first use otherwise.
    if !unsafe { cudarc::driver::sys::is_culib_present() } {
        return Err(Error::NoGpu(
            "the CUDA driver library (libcuda.so.1) was not found".into(),
        ));
    }
    let count = CudaContext::device_count()
        .map_err(|e| Error::NoGpu(format!("the CUDA driver reports: {e}")))?;
    if count <= 0 {
        return Err(Error::NoGpu("no CUDA device is visible".into()));
    }
    let count = count as usize;
    match explicit {
        Some(d) if d >= count => Err(Error::arg(
            "RuntimeBuilder::device",
            "device",
            format!("{d} is not below the {count} visible devices"),
        )),
        Some(d) => Ok(d),
        None => {
            if local_rank >= count {
                warn!(
                    local_rank,
                    count, "more PEs on this node than GPUs: PEs share GPUs"
                );
            }
            Ok(local_rank % count)
        }
    }
}

/// The timeout: [`TIMEOUT_VAR`]'s, else the builder's, else [`DEFAULT_TIMEOUT`].
fn choose_timeout(requested: Option<Option<Duration>>) -> Result<Option<Duration>> {
    match std::env::var(TIMEOUT_VAR) {
        Ok(v) => health::parse_timeout(&v).map_err(|reason| Error::Environment {
            var: TIMEOUT_VAR.into(),
            value: v.clone(),
            reason,
        }),
        Err(_) => Ok(requested.unwrap_or(Some(DEFAULT_TIMEOUT))),
    }
}

/// How the kernels check calls (0 off, 1 on, 2 also NVSHMEM's collectives):
/// [`CHECK_CALLS_VAR`]'s, else the builder's, else on.
fn choose_check_calls(requested: Option<u32>) -> Result<u32> {
    match std::env::var(CHECK_CALLS_VAR) {
        Ok(v) => parse_check_calls(&v).map_err(|reason| Error::Environment {
            var: CHECK_CALLS_VAR.into(),
            value: v.clone(),
            reason,
        }),
        Err(_) => Ok(requested.unwrap_or(1)),
    }
}

fn parse_check_calls(v: &str) -> std::result::Result<u32, String> {
    match v.trim().to_ascii_lowercase().as_str() {
        "2" | "all" => Ok(2),
        "1" | "on" | "true" | "yes" => Ok(1),
        "0" | "off" | "false" | "no" => Ok(0),
        _ => Err("expected 1 (check calls), 2 (NVSHMEM's collectives too) or 0 (do not)".into()),
    }
}

/// The heap size: the builder's, else `NVSHMEM_SYMMETRIC_SIZE`, else NVSHMEM's default. The
/// chosen size is written to `NVSHMEM_SYMMETRIC_SIZE` so NVSHMEM and we agree on it.
fn choose_heap_size(requested: Option<usize>) -> Result<usize> {
    let size = heap_size(
        requested,
        std::env::var("NVSHMEM_SYMMETRIC_SIZE").ok().as_deref(),
    )?;
    // SAFETY: called from `start` before NVSHMEM starts, under the runtime's lock (see
    // `set_env`).
    unsafe { set_env("NVSHMEM_SYMMETRIC_SIZE", &size.to_string()) };
    Ok(size)
}

/// The heap size from the builder's request and the value of `NVSHMEM_SYMMETRIC_SIZE`
/// (`None`: unset, or not Unicode).
fn heap_size(requested: Option<usize>, env: Option<&str>) -> Result<usize> {
    Ok(match (requested, env) {
        (Some(0), _) => {
            return Err(Error::arg(
                "RuntimeBuilder::heap_size",
                "bytes",
                "must be above 0",
            ))
        }
        (Some(bytes), _) => bytes,
        (None, Some(v)) => parse_size(v).ok_or_else(|| Error::Environment {
            var: "NVSHMEM_SYMMETRIC_SIZE".into(),
            value: v.into(),
            reason: "expected a byte count such as 1073741824, 512M or 2G".into(),
        })?,
        (None, None) => DEFAULT_HEAP_SIZE,
    })
}

/// Parses NVSHMEM's size syntax: a number with an optional K, M, G or T suffix (powers of
/// 1024), as `NVSHMEM_SYMMETRIC_SIZE` and nvshmem-perf's sizes are written.
///
/// ```
/// use nvshmem::runtime::parse_size;
/// assert_eq!(parse_size("512M"), Some(512 << 20));
/// assert_eq!(parse_size("4096"), Some(4096));
/// assert_eq!(parse_size("0"), None);
/// ```
pub fn parse_size(s: &str) -> Option<usize> {
    let s = s.trim();
    let (digits, shift) = match s.chars().last()?.to_ascii_uppercase() {
        'K' => (&s[..s.len() - 1], 10),
        'M' => (&s[..s.len() - 1], 20),
        'G' => (&s[..s.len() - 1], 30),
        'T' => (&s[..s.len() - 1], 40),
        _ => (s, 0),
    };
    let n: usize = digits.trim().parse().ok()?;
    n.checked_mul(1usize << shift).filter(|n| *n > 0)
}

#[cfg(feature = "mpi")]
fn start_mpi() -> Result<Option<mpi::environment::Universe>> {
    if mpi::environment::is_initialized() {
        // The program started MPI itself and will finalise it.
        return Ok(None);
    }
    mpi::initialize().map(Some).ok_or(Error::Mpi {
        call: "MPI_Init",
        detail: "MPI could not be initialised".into(),
    })
}

/// This rank's place among the ranks of `comm` on its node (those that share its memory), and
/// their number: the job is on one node when that is `comm`'s size.
#[cfg(feature = "mpi")]
fn mpi_node_local<C: mpi::traits::Communicator>(comm: &C) -> (usize, usize) {
    use mpi::traits::Communicator as _;
    let node = comm.split_shared(comm.rank());
    (node.rank() as usize, node.size() as usize)
}

#[cfg(feature = "mpi")]
fn mpi_broadcast_uid<C: mpi::traits::Communicator>(
    comm: &C,
    uid: Option<uid::UidBytes>,
) -> Result<uid::UidBytes> {
    use mpi::traits::Root;
    let mut bytes = uid.unwrap_or([0; uid::UID_BYTES]);
    comm.process_at_rank(0).broadcast_into(&mut bytes[..]);
    Ok(bytes)
}

impl RuntimeInner {
    /// Whether every PE agrees, within the timeout, that all are finalising (the watchdog
    /// still running, so a peer that died is seen rather than waited for).
    fn agree_to_finalize(&self) -> bool {
        let about = About {
            call: "finalising",
            team: "the world",
        };
        let mine = exchange::entry(exchange::tag::FINALIZE, &[]);
        match self.exchange.gather(
            self.nv,
            &self.health,
            self.world_team,
            self.n_pes,
            about,
            |_| Ok(mine),
        ) {
            Ok(table) => match exchange::same_call("finalising", &table, exchange::tag::FINALIZE) {
                Ok(()) => true,
                Err(e) => {
                    warn!(%e, "NVSHMEM left as it is");
                    false
                }
            },
            Err(e) => {
                warn!(%e, "NVSHMEM left as it is");
                false
            }
        }
    }

    /// Waits, at most the timeout, until no queued work can still use the heap: every dropped
    /// array's and team's work, and the runtime's own streams.
    fn settle(&self) -> bool {
        let mut last = Vec::new();
        for s in [&self.stream, self.exchange.stream()] {
            match s.record_event(None) {
                Ok(e) => last.push(e),
                Err(e) => {
                    warn!(%e, "recording the runtime's last work");
                    return false;
                }
            }
        }
        // What the runtime itself still holds: the scratch, the predefined teams' calls.
        let mut live = self.heap.live_pending();
        if let Some(t) = self.teams.get() {
            live.extend(t.live_pending());
        }
        let start = std::time::Instant::now();
        loop {
            let streams_done = last.iter().all(|e| e.try_is_complete().unwrap_or(false))
                && live.iter_mut().all(|p| p.done());
            let teams_done = self.teams.get().is_none_or(|t| t.settled());
            if streams_done && teams_done && self.heap.settled() {
                return true;
            }
            if self.health.timeout().is_some_and(|t| start.elapsed() >= t) || self.health.failed() {
                return false;
            }
            std::thread::sleep(Duration::from_micros(200));
        }
    }

    /// Leaves NVSHMEM, MPI, the context and everything the GPU may still use as they are: the
    /// process exits with them, as `nvshmem_global_exit` would leave them.
    fn abandon(&mut self) {
        if let Some(teams) = self.teams.take() {
            std::mem::forget(teams);
        }
        std::mem::forget(Arc::clone(&self.health));
        std::mem::forget(Arc::clone(&self.stream));
        std::mem::forget(Arc::clone(self.exchange.stream()));
        std::mem::forget(Arc::clone(&self.ctx));
        #[cfg(feature = "mpi")]
        std::mem::forget(self.universe.take());
    }
}

impl Drop for RuntimeInner {
    fn drop(&mut self) {
        let mut state = STATE.lock().unwrap_or_else(|p| p.into_inner());
        if let Err(e) = self.ctx.bind_to_thread() {
            warn!(%e, "binding the CUDA context before finalising NVSHMEM");
        }
        // Finalising is collective, and so is everything the layers release: with this PE
        // failing, a peer gone, or the PEs not all finalising, the others may never arrive.
        let finalize = !std::thread::panicking()
            && !self.health.failed()
            && self.agree_to_finalize()
            && self.settle();
        if !finalize {
            *state = State::Failed;
            self.health.stop();
            self.abandon();
            debug!("NVSHMEM left as it is: this PE is panicking or the job has failed");
            return;
        }
        *state = State::Finalized;
        if let Some(teams) = self.teams.take() {
            teams.close(self.nv);
        }
        // Device modules of the program's own that were dropped with work still queued.
        crate::device::release_retired();
        // SAFETY: NVSHMEM was initialised by this runtime; every handle that used it held this
        // runtime alive, so none is left; the work queued on its memory is done (settled).
        unsafe { self.nv.finalize() };
        // SAFETY: the exchange is not used again (this is the runtime's end) and nothing is
        // in flight on its stream (settled).
        unsafe { std::mem::ManuallyDrop::drop(&mut self.exchange) };
        // Stopped last: a peer that dies while NVSHMEM finalises is seen, and the process ended
        // after GRACE, rather than left waiting in NVSHMEM for ever.
        self.health.stop();
        debug!("NVSHMEM finalised");
        // MPI, if we started it, is finalised when `universe` drops, after this.
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_call_check_switch_parses() {
        assert_eq!(parse_check_calls("1"), Ok(1));
        assert_eq!(parse_check_calls(" off "), Ok(0));
        assert_eq!(parse_check_calls("0"), Ok(0));
        assert_eq!(parse_check_calls("2"), Ok(2));
        assert!(parse_check_calls("maybe").is_err());
    }

    #[test]
    fn sizes_parse_like_nvshmem() {
        assert_eq!(parse_size("1024"), Some(1024));
        assert_eq!(parse_size("512M"), Some(512 << 20));
        assert_eq!(parse_size("2g"), Some(2 << 30));
        assert_eq!(parse_size("1T"), Some(1 << 40));
        assert_eq!(parse_size("0"), None);
        assert_eq!(parse_size("G"), None);
        assert_eq!(parse_size("lots"), None);
        assert_eq!(parse_size("99999999999999999999T"), None);
    }

    #[test]
    fn a_shared_gpu_gives_each_pe_its_share_of_the_multiprocessors() {
        assert_eq!(share_of_sms(132, 1, GpuSharing::Exclusive), 132);
        let mps = |p| GpuSharing::Mps {
            thread_percentage: p,
        };
        // With a thread percentage the device's count is already the share.
        assert_eq!(share_of_sms(33, 4, mps(Some(25.0))), 33);
        assert_eq!(share_of_sms(132, 3, mps(None)), 44);
        // Never none: a kernel needs one block somewhere.
        assert_eq!(share_of_sms(4, 8, mps(None)), 1);
    }

    #[test]
    fn attribute_versions_match_nvshmem_sizes() {
        let mut attr = nvshmem_sys::nvshmemx_init_attr_t::default();
        set_attr_versions(&mut attr);
        assert_eq!(attr.version, (1 << 16) + 144);
        assert_eq!(attr.args.version, (1 << 16) + 128);
        assert_eq!(attr.args.uid_args.version, (1 << 16) + 24);
    }
}
