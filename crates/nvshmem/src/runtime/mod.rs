//! Starting and stopping NVSHMEM: the [`Runtime`] guard.
//!
//! NVSHMEM can be initialised once per process. [`Runtime::init`] (or the
//! [`RuntimeBuilder`]) does it; every handle made from the runtime (arrays, teams, timers)
//! holds it alive, and NVSHMEM is finalised when the last one drops or by
//! [`Runtime::finalize`].
//!
//! This is the lowest layer with state (below it: errors, elements, operators, the wrapper of
//! NVSHMEM's functions and the kernels): it starts and stops NVSHMEM, and holds one field of
//! state for each layer above it (the memory layer's heap ledger, the teams, the algorithms
//! forced for each collective), made in that order at start-up and closed before NVSHMEM is
//! finalised; it calls none of their functions but those that make and close that state (the
//! crate's one sanctioned back-edge, `lib.rs`). Below the layers it also keeps what they
//! share: the runtime's health, its means of agreement between PEs (`exchange.rs`), and the
//! lifetimes of what the GPU may still be using (`in_use.rs`).
//!
//! The files: this one is the [`Runtime`] guard (its handles, [`RuntimeInfo`], what the layers
//! reach through it); `builder.rs` the [`RuntimeBuilder`]; `settings.rs` the settings judged
//! before NVSHMEM starts; `start.rs` the start itself (and `over_mpi.rs` MPI's part of it);
//! `finalise.rs` the end; `launcher.rs` and `uid.rs` the launchers and the unique id.
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
mod builder;
pub(crate) mod exchange;
mod finalise;
mod health;
pub(crate) mod in_use;
mod launcher;
#[cfg(feature = "mpi")]
mod over_mpi;
#[cfg(test)]
mod props;
mod settings;
mod start;
mod uid;

use std::{
    path::PathBuf,
    sync::{Arc, Mutex, OnceLock},
    time::Duration,
};

use cudarc::driver::{sys::CUstream, CudaContext, CudaStream};

pub use builder::RuntimeBuilder;
pub(crate) use health::{team_label, Health, Identity, TeamName};
pub use health::{DEFAULT_TIMEOUT, GRACE, POLL, TIMEOUT_VAR};
pub use launcher::{Bootstrap, BOOTSTRAP_VAR};
pub use settings::{parse_size, CHECK_CALLS_VAR, DEFAULT_HEAP_SIZE};

use crate::{
    collective::algo::ForcedAlgorithms, ffi::Nvshmem, memory::Heap, team::Teams, Error, Result,
};
use exchange::{About, Exchange};
use in_use::{Capture, Captures};

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
    /// can keep resident at once: the GPU's multiprocessors, or, when PEs share the GPU, three
    /// quarters of this PE's share of them (whole shares could not all be resident at once). A
    /// team's kernels use at most its members' smallest figure.
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
    forced_algorithms: ForcedAlgorithms,
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

    /// The algorithms forced for each collective (the collective layer's state in a runtime).
    #[inline]
    pub(crate) fn forced_algorithms(&self) -> &ForcedAlgorithms {
        &self.inner.forced_algorithms
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
    /// Notes that the work queued now uses `r` (see [`in_use`]), a resource whose uses do not
    /// take turns (an array, a module): its use on the stream or, in a capture, the graph
    /// keeping it.
    #[inline]
    pub(crate) fn uses(&self, r: &Arc<impl in_use::Resource>) -> Result<()> {
        debug_assert!(
            r.ordered().is_none(),
            "a resource that takes turns: Enqueue::turn"
        );
        self.turn(r).map(drop)
    }

    /// [`Enqueue::uses`] for a resource whose uses take turns (a team, the scratch): also its
    /// order after its earlier uses, and its turn, to be held until the work is queued (none
    /// in a capture, where each launch of the graph takes the turns).
    #[inline]
    pub(crate) fn turn<'r>(
        &self,
        r: &'r Arc<impl in_use::Resource>,
    ) -> Result<Option<in_use::Turn<'r>>> {
        in_use::note(
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
