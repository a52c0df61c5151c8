//! The common start of a runtime: its settings judged (the forced algorithms among them), the
//! GPU and the library opened, NVSHMEM initialised through the launch's bootstrap, the world
//! agreed, then each layer's state made (health, heap, teams).
use std::{
    path::PathBuf,
    sync::{Arc, OnceLock},
};

use cudarc::driver::CudaContext;
use nvshmem_sys::NvshmemLib;
use tracing::{debug, info, warn};

use super::{
    exchange::{self, About, Exchange},
    in_use::Captures,
    launcher::{Placement, REMOTE_TRANSPORT_VAR},
    settings::{
        allow_uneven_sharing, choose_check_calls, choose_heap_size, choose_timeout, set_env,
    },
    uid, Bootstrap, GpuSharing, Health, Identity, Runtime, RuntimeBuilder, RuntimeInfo,
    RuntimeInner, State, STATE,
};
use crate::{
    collective::algo::ForcedAlgorithms,
    ffi::{Nvshmem, TeamHandle},
    memory::Heap,
    team::Teams,
    Error, Result,
};

impl RuntimeBuilder {
    /// The common start: settings (the heap's size among them), GPU, library, then NVSHMEM
    /// through the launch's bootstrap, then the library's own state (agreed with every PE).
    /// `exchange`, when given, hands rank 0's unique id to every rank.
    /// `universe` is MPI when this runtime started it, to be finalised after NVSHMEM.
    pub(super) fn start(
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
        let forced_algorithms = ForcedAlgorithms::new(&self.algorithms)?;
        let heap_size = choose_heap_size(self.heap_size)?;
        // Then the GPU: on a machine without one, that is the message that helps.
        let device = pick_device(self.device, &launch)?;
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
        let info = job_info(nv, lib, &ctx, &launch, device, heap_size)?;
        let stream = ctx
            .new_stream()
            .map_err(Error::cuda("creating the runtime's stream"))?;
        // The collective layer reads its calls' fingerprints for the health's reports.
        let health = Health::start(
            my_pe,
            timeout,
            crate::collective::algo::fingerprint::describe,
        )?;
        let (world_team, sym, sym_bytes, exchange) = meet_world(nv, &ctx, &health, heap_size)?;
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
                forced_algorithms,
                teams: OnceLock::new(),
                #[cfg(feature = "mpi")]
                universe,
            }),
        };
        // A failure here is seen alike by every PE (an allocation refused, an agreement out of
        // step), or ends their next agreement: dropping the runtime then finalises NVSHMEM
        // where every PE agrees to, and leaves it otherwise.
        let teams = match Teams::start(&rt, self.channels, self.lamport_bytes, check_calls) {
            Ok(teams) => teams,
            Err(e) => {
                // Dropping the runtime finalises NVSHMEM (or leaves it) under the state's
                // lock, which std's Mutex does not take twice: let go of it first (a `?`
                // would drop `rt` before `state`, and the PE would wait on itself for ever).
                drop(state);
                drop(rt);
                return Err(e);
            }
        };
        if rt.inner.teams.set(teams).is_err() {
            unreachable!("the teams are set once, here");
        }
        *state = State::Live;
        drop(state);
        let info = &rt.inner.info;
        info!(
            pe = my_pe, n_pes, bootstrap = %info.bootstrap, library = %info.library.display(),
            version = %info.version, device, heap_size, pes_on_device = info.pes_on_device, "NVSHMEM started"
        );
        Ok(rt)
    }
}

/// What NVSHMEM says of this PE's job once started, as [`RuntimeInfo`]; refuses a GPU shared
/// without MPS, where every collective of NVSHMEM would end the process.
fn job_info(
    nv: Nvshmem,
    lib: &NvshmemLib,
    ctx: &CudaContext,
    launch: &Placement,
    device: usize,
    heap_size: usize,
) -> Result<RuntimeInfo> {
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
    Ok(RuntimeInfo {
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
        resident_blocks: resident_blocks(ctx, pes_on_device, gpu_sharing)?,
    })
}

/// The first agreement of every PE, on the runtime's own world team: the team itself, the
/// symmetric room for the agreements' entries (`sym`, `sym_bytes` bytes), the exchange over
/// it, and every PE's identity (then watched by the health) and heap size (which must be the
/// same everywhere).
fn meet_world(
    nv: Nvshmem,
    ctx: &Arc<CudaContext>,
    health: &Health,
    heap_size: usize,
) -> Result<(TeamHandle, u64, usize, Exchange)> {
    let (my_pe, n_pes) = nv.world();
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
    exchange.open(nv, health, world_team)?;
    let identity = Identity::own();
    let mut words = identity.words.to_vec();
    words.push(heap_size as u64);
    let table = exchange.gather(
        nv,
        health,
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
    Ok((world_team, sym, sym_bytes, exchange))
}

pub(super) fn ensure_fresh(state: State) -> Result<()> {
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
/// the GPU without one split it equally. Where PEs share the GPU, a quarter of that share is
/// left unused ([`share_of_sms`]).
fn resident_blocks(ctx: &CudaContext, pes_on_device: usize, sharing: GpuSharing) -> Result<u32> {
    use cudarc::driver::sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT;
    let sms = ctx
        .attribute(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
        .map_err(Error::cuda("cuDeviceGetAttribute (multiprocessors)"))?
        .max(1) as u32;
    Ok(share_of_sms(sms, pes_on_device, sharing))
}

/// [`resident_blocks`]'s arithmetic. Shares of PEs on one GPU add up to the whole GPU, and
/// a whole share was more than a PE could count on: 8 PEs on 2 x H200 under MPS (4 a GPU, 25 %
/// each, 33 multiprocessors seen) with grids of 33 blocks, one PE absent, had blocks of a
/// present PE never start while its others waited, so its peers' waits timed out naming it
/// instead of the absent one (3 runs of 3, tests/gpu_waits.rs `kernel_peer_reduce`); with
/// three quarters of the share, 24, every PE named the absent one (2 of 2, 2026-11-27).
fn share_of_sms(sms: u32, pes_on_device: usize, sharing: GpuSharing) -> u32 {
    let share = match sharing {
        GpuSharing::Exclusive => return sms.max(1),
        GpuSharing::Mps {
            thread_percentage: Some(_),
        } => sms,
        GpuSharing::Mps {
            thread_percentage: None,
        } => sms / pes_on_device.max(1) as u32,
    };
    (share * 3 / 4).max(1)
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
    match super::launcher::remote_transport(launch, user.as_deref()) {
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

/// The CUDA device for this PE: the explicit choice, else the node-local rank modulo the
/// number of visible devices, refused where that shares the GPUs unevenly
/// ([`Placement::uneven_sharing`]: NVSHMEM would never return from its start) unless the
/// user allows it (`allow_uneven_sharing`).
fn pick_device(explicit: Option<usize>, launch: &Placement) -> Result<usize> {
    let local_rank = launch.local_rank.unwrap_or(0);
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
            if let Some((fewest, most)) = launch.uneven_sharing(count) {
                if !allow_uneven_sharing()? {
                    return Err(Error::UnevenGpuSharing {
                        pes: launch.local_size.unwrap_or(0),
                        gpus: count,
                        fewest,
                        most,
                    });
                }
            }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shared_gpu_gives_each_pe_its_share_of_the_multiprocessors() {
        assert_eq!(share_of_sms(132, 1, GpuSharing::Exclusive), 132);
        let mps = |p| GpuSharing::Mps {
            thread_percentage: p,
        };
        // With a thread percentage the device's count is already the share; a quarter of a
        // share stays unused.
        assert_eq!(share_of_sms(33, 4, mps(Some(25.0))), 24);
        assert_eq!(share_of_sms(132, 3, mps(None)), 33);
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
