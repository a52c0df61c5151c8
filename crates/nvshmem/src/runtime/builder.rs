//! The [`RuntimeBuilder`]: every choice of how a runtime starts, each with its default.
use std::time::Duration;

use super::launcher::detect;
#[cfg(feature = "mpi")]
use super::over_mpi::start_mpi;
#[cfg(feature = "mpi")]
use super::{start::ensure_fresh, STATE};
use super::{Bootstrap, Runtime};
#[cfg(doc)]
use super::{CHECK_CALLS_VAR, DEFAULT_TIMEOUT, GRACE, TIMEOUT_VAR};
#[cfg(doc)]
use crate::Error;
use crate::{collective::Collective, Result};

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
    pub(super) bootstrap: Option<Bootstrap>,
    pub(super) device: Option<usize>,
    pub(super) heap_size: Option<usize>,
    pub(super) timeout: Option<Option<Duration>>,
    /// `RuntimeBuilder::channels`.
    pub(crate) channels: Option<usize>,
    /// `RuntimeBuilder::lamport_bytes`.
    pub(crate) lamport_bytes: Option<usize>,
    /// `RuntimeBuilder::algorithm`, in the order given.
    pub(crate) algorithms: Vec<(Collective, String)>,
    /// `RuntimeBuilder::check_calls` and `check_nvshmem_calls`: 0 off, 1 this crate's
    /// kernels, 2 also before NVSHMEM's collectives.
    pub(super) check_calls: Option<u32>,
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
    /// this crate's NVLink kernels that lasts longer ends with [`Error::CollectiveFailed`]
    /// (a wait for the departure of a peer that has arrived is given a quarter more, so that
    /// where one peer holds up others the failure names the one that never came), and a peer
    /// on this host stopped for longer ends the runtime with [`Error::PeerFailed`].
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
    /// more pair of loads per peer (`kernels/PROTOCOL.md`, "Fingerprints"): measured on 2 ×
    /// H200 in a CUDA graph, nothing on an 8-byte all-reduce, 0.35 µs on a barrier (2.29
    /// against 1.94 µs) and 0.2-0.5 µs on a direct kernel (`docs/performance.md`). The
    /// environment variable [`CHECK_CALLS_VAR`] (`0` or `1`) overrides it. Every PE must
    /// choose alike: starting fails with [`Error::OutOfStep`] otherwise. Calls that run
    /// NVSHMEM's own collectives are not checked
    /// ([`check_nvshmem_calls`](Self::check_nvshmem_calls)).
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

    /// How many teams can use this crate's NVLink collectives at once (default 8, at most 64;
    /// by default no more than fit in a sixteenth of the heap, so fewer than 8 on a heap under
    /// about 525 MiB): each such team holds a channel from when it is made until it is dropped
    /// (predefined teams with the world's members share the world's). Each channel is a fixed
    /// amount of symmetric memory (about 4.1 MiB, and its Lamport buffers:
    /// [`lamport_bytes`](Self::lamport_bytes)), allocated when the runtime starts; a team made
    /// when none is free runs NVSHMEM's collectives instead
    /// ([`Team::has_nvlink_kernels`](crate::Team::has_nvlink_kernels) says which).
    ///
    /// ```no_run
    /// let rt = nvshmem::Runtime::builder().channels(16).init()?;
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    pub fn channels(mut self, count: usize) -> Self {
        self.channels = Some(count);
        self
    }

    /// Sizes the receive buffers of the `nvlink_lamport` reductions: each channel
    /// ([`channels`](Self::channels)) holds three buffers for calls of up to `max` bytes a PE
    /// on 2-PE teams (`max / (n - 1)` on teams of `n`, rounded down to 16 bytes), that is
    /// `3 x max` bytes of symmetric memory a channel (and a 256-byte header); 0 turns the
    /// algorithm off. Every PE must choose alike: starting fails with [`Error::OutOfStep`]
    /// otherwise. By default 2 MiB where every channel's buffers fit in a sixteenth of the
    /// heap (with 8 channels, a heap of about 770 MiB or more), else the largest multiple of
    /// 16 KiB that fits, and none where that is under 64 KiB.
    ///
    /// ```no_run
    /// // 2-PE calls up to 1 MiB: 3 MiB of symmetric memory per channel.
    /// let rt = nvshmem::Runtime::builder().lamport_bytes(1 << 20).init()?;
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    pub fn lamport_bytes(mut self, max: usize) -> Self {
        self.lamport_bytes = Some(max);
        self
    }
}
