//! Starting and stopping NVSHMEM: the [`Runtime`] guard.
//!
//! NVSHMEM can be initialised once per process. [`Runtime::init`] (or the
//! [`RuntimeBuilder`]) does it; every handle made from the runtime (arrays, teams, timers)
//! holds it alive, and NVSHMEM is finalised when the last one drops or by
//! [`Runtime::finalize`].
mod launch;
mod uid;

use std::{
    path::PathBuf,
    sync::{Arc, Mutex},
};

use cudarc::driver::{CudaContext, CudaStream};
use nvshmem_sys::NvshmemLib;
use tracing::{debug, info, warn};

use launch::{detect, Launch};
pub use launch::{Bootstrap, BOOTSTRAP_VAR};

use crate::{error::check, Error, Result};

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
}

static STATE: Mutex<State> = Mutex::new(State::Fresh);

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
    pub(crate) inner: Arc<RuntimeInner>,
}

pub(crate) struct RuntimeInner {
    pub(crate) lib: &'static NvshmemLib,
    pub(crate) ctx: Arc<CudaContext>,
    pub(crate) stream: Arc<CudaStream>,
    pub(crate) my_pe: usize,
    pub(crate) n_pes: usize,
    pub(crate) info: RuntimeInfo,
    /// Bytes allocated from the symmetric heap through this runtime.
    pub(crate) heap_in_use: Mutex<usize>,
    /// One symmetric `u64` per PE that [`Team::from_pes`](crate::Team::from_pes) passes team
    /// ids through; allocated at start-up because allocating is collective over every PE.
    pub(crate) team_slot: cudarc::driver::sys::CUdeviceptr,
    /// The collective scratch of rooted reductions (`Runtime::reserve_scratch`).
    pub(crate) scratch: Mutex<crate::collective::Scratch>,
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
        let others = Arc::strong_count(&self.inner) - 1;
        if others > 0 {
            return Err(Error::RuntimeInUse(others));
        }
        drop(self);
        Ok(())
    }
}

impl RuntimeInner {
    /// Makes the runtime's context current on the calling thread, as every NVSHMEM host call
    /// that touches the GPU needs.
    pub(crate) fn bind(&self) -> Result<()> {
        self.ctx
            .bind_to_thread()
            .map_err(Error::cuda("binding the CUDA context"))
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

    /// Starts NVSHMEM.
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
        let launch = Launch {
            bootstrap: Bootstrap::Mpi,
            rank: Some(comm.rank() as usize),
            size: Some(comm.size() as usize),
            local_rank: Some(mpi_local_rank(comm)),
            rendezvous: None,
        };
        let mut exchange = |uid: Option<uid::UidBytes>| mpi_broadcast_uid(comm, uid);
        self.start(launch, Some(&mut exchange), universe)
    }

    /// The common start: GPU, library, heap, then NVSHMEM through the launch's bootstrap.
    /// `exchange`, when given, hands rank 0's unique id to every rank.
    /// `universe` is MPI when this runtime started it, to be finalised after NVSHMEM.
    fn start(
        self,
        launch: Launch,
        exchange: Option<&mut UidExchange>,
        #[cfg(feature = "mpi")] universe: Option<mpi::environment::Universe>,
    ) -> Result<Runtime> {
        let mut state = STATE.lock().unwrap_or_else(|p| p.into_inner());
        ensure_fresh(*state)?;
        // The GPU first: on a machine without one, that is the message that helps.
        let device = pick_device(self.device, launch.local_rank.unwrap_or(0))?;
        let lib = nvshmem_sys::lib()?;
        // SAFETY: nvshmemx_init_status takes no arguments and only reads NVSHMEM's state.
        if unsafe { lib.nvshmemx_init_status() } != 0 {
            return Err(Error::AlreadyInitialized(
                "by another component of this program",
            ));
        }

        let heap_size = choose_heap_size(self.heap_size)?;
        let ctx = CudaContext::new(device)
            .map_err(|e| Error::NoGpu(format!("cannot open CUDA device {device}: {e}")))?;
        let info = RuntimeInfo {
            bootstrap: launch.bootstrap,
            library: nvshmem_sys::loaded_path()
                .map(PathBuf::from)
                .unwrap_or_default(),
            version: nvshmem_sys::loaded_version().expect("lib() succeeded above"),
            device,
            local_rank: launch.local_rank.unwrap_or(0),
            heap_size,
        };
        debug!(?info, rank = ?launch.rank, size = ?launch.size, "starting NVSHMEM");

        init_nvshmem(lib, &launch, exchange)?;
        // SAFETY: NVSHMEM is initialised; these only read its state.
        let (my_pe, n_pes) = unsafe { (lib.nvshmem_my_pe(), lib.nvshmem_n_pes()) };
        let (my_pe, n_pes) = (my_pe as usize, n_pes as usize);
        if launch.rank.is_some_and(|r| r != my_pe) || launch.size.is_some_and(|s| s != n_pes) {
            warn!(my_pe, n_pes, rank = ?launch.rank, size = ?launch.size, "NVSHMEM numbered the PEs differently from the launcher");
        }
        let stream = ctx
            .new_stream()
            .map_err(Error::cuda("creating the runtime's stream"))?;
        ctx.bind_to_thread()
            .map_err(Error::cuda("binding the CUDA context"))?;
        let team_slot = crate::team::alloc_exchange_slot(lib)?;
        info!(
            pe = my_pe, n_pes, bootstrap = %info.bootstrap, library = %info.library.display(),
            version = %info.version, device, heap_size, "NVSHMEM started"
        );
        *state = State::Live;
        Ok(Runtime {
            inner: Arc::new(RuntimeInner {
                lib,
                ctx,
                stream,
                my_pe,
                n_pes,
                info,
                heap_in_use: Mutex::new(0),
                team_slot,
                scratch: Mutex::new(Default::default()),
                #[cfg(feature = "mpi")]
                universe,
            }),
        })
    }
}

fn ensure_fresh(state: State) -> Result<()> {
    match state {
        State::Fresh => Ok(()),
        State::Live => Err(Error::AlreadyInitialized("a runtime is live")),
        State::Finalized => Err(Error::AlreadyInitialized("it was finalised earlier")),
    }
}

/// Hands rank 0's unique id (passed in on rank 0 only) to every rank, returning it.
type UidExchange<'a> = dyn FnMut(Option<uid::UidBytes>) -> Result<uid::UidBytes> + 'a;

fn init_nvshmem(
    lib: &NvshmemLib,
    launch: &Launch,
    exchange: Option<&mut UidExchange>,
) -> Result<()> {
    let mut attr = nvshmem_sys::nvshmemx_init_attr_t::default();
    set_attr_versions(&mut attr);
    if let Some(flavour) = launch.bootstrap.nvshmem_pmi_flavour() {
        // NVSHMEM's own bootstrap plugins are chosen through its environment.
        check_plugin(launch.bootstrap)?;
        set_env("NVSHMEM_BOOTSTRAP", "PMI");
        set_env("NVSHMEM_BOOTSTRAP_PMI", flavour);
        // SAFETY: attr is a valid, versioned attribute struct that outlives the call.
        let status = unsafe { lib.nvshmemx_hostlib_init_attr(0, &mut attr) };
        return check("nvshmemx_hostlib_init_attr", status);
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
    // SAFETY: uid and attr are valid and outlive both calls.
    let status =
        unsafe { lib.nvshmemx_set_attr_uniqueid_args(rank as i32, size as i32, &uid, &mut attr) };
    check("nvshmemx_set_attr_uniqueid_args", status)?;
    // SAFETY: as above.
    let status = unsafe {
        lib.nvshmemx_hostlib_init_attr(nvshmem_sys::NVSHMEMX_INIT_WITH_UNIQUEID as u32, &mut attr)
    };
    check("nvshmemx_hostlib_init_attr", status)
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
    let mut id = nvshmem_sys::nvshmemx_uniqueid_t::default();
    // SAFETY: id is a valid, writable unique-id struct.
    check("nvshmemx_get_uniqueid", unsafe {
        lib.nvshmemx_get_uniqueid(&mut id)
    })?;
    Ok(uid::uid_to_bytes(&id))
}

/// Sets a variable NVSHMEM reads at initialisation.
fn set_env(key: &str, value: &str) {
    debug!(key, value, "setting NVSHMEM's environment");
    // NVSHMEM reads its configuration only from the environment. This runs once, before
    // NVSHMEM starts, under the runtime's lock; a program must not read or write the
    // environment from another thread while it starts NVSHMEM (documented on the builder).
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

/// The heap size: the builder's, else `NVSHMEM_SYMMETRIC_SIZE`, else NVSHMEM's default. The
/// chosen size is written to `NVSHMEM_SYMMETRIC_SIZE` so NVSHMEM and we agree on it.
fn choose_heap_size(requested: Option<usize>) -> Result<usize> {
    let size = match (requested, std::env::var("NVSHMEM_SYMMETRIC_SIZE")) {
        (Some(0), _) => {
            return Err(Error::arg(
                "RuntimeBuilder::heap_size",
                "bytes",
                "must be above 0",
            ))
        }
        (Some(bytes), _) => bytes,
        (None, Ok(v)) => parse_size(&v).ok_or_else(|| Error::Environment {
            var: "NVSHMEM_SYMMETRIC_SIZE".into(),
            value: v.clone(),
            reason: "expected a byte count such as 1073741824, 512M or 2G".into(),
        })?,
        (None, Err(_)) => DEFAULT_HEAP_SIZE,
    };
    set_env("NVSHMEM_SYMMETRIC_SIZE", &size.to_string());
    Ok(size)
}

/// Parses NVSHMEM's size syntax: a number with an optional K, M, G or T suffix (powers of 1024).
pub(crate) fn parse_size(s: &str) -> Option<usize> {
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

#[cfg(feature = "mpi")]
fn mpi_local_rank<C: mpi::traits::Communicator>(comm: &C) -> usize {
    use mpi::traits::Communicator as _;
    comm.split_shared(comm.rank()).rank() as usize
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

impl Drop for RuntimeInner {
    fn drop(&mut self) {
        let mut state = STATE.lock().unwrap_or_else(|p| p.into_inner());
        *state = State::Finalized;
        if std::thread::panicking() {
            // Finalising is collective: with this PE failing, the others may never arrive.
            // Leave NVSHMEM and MPI as they are; the launcher ends the job when we exit.
            #[cfg(feature = "mpi")]
            std::mem::forget(self.universe.take());
            return;
        }
        if let Err(e) = self.bind() {
            warn!(%e, "binding the CUDA context before finalising NVSHMEM");
        }
        if let Err(e) = self.stream.synchronize() {
            warn!(%e, "synchronising the runtime's stream before finalising NVSHMEM");
        }
        // SAFETY: NVSHMEM is still initialised, the context current, the stream synchronised;
        // the scratch is reachable only through this runtime, which no handle uses any more.
        unsafe {
            self.scratch
                .get_mut()
                .unwrap_or_else(|p| p.into_inner())
                .release(self.lib)
        };
        // SAFETY: NVSHMEM was initialised by this runtime, and every handle that used it held
        // this runtime alive, so none is left.
        unsafe { self.lib.nvshmemx_hostlib_finalize() };
        debug!("NVSHMEM finalised");
        // MPI, if we started it, is finalised when `universe` drops, after this.
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn attribute_versions_match_nvshmem_sizes() {
        let mut attr = nvshmem_sys::nvshmemx_init_attr_t::default();
        set_attr_versions(&mut attr);
        assert_eq!(attr.version, (1 << 16) + 144);
        assert_eq!(attr.args.version, (1 << 16) + 128);
        assert_eq!(attr.args.uid_args.version, (1 << 16) + 24);
    }
}
