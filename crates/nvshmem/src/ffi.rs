//! Every call this crate makes into NVSHMEM, each wrapped once: a status becomes a
//! `Result`, and the wrapper states what the caller must guarantee.
//!
//! [`Nvshmem`] is a copy of the loaded library's handle that exists only while NVSHMEM is
//! initialised (the runtime makes it after initialising, and every holder keeps the runtime
//! alive), so the wrappers that need nothing more than "NVSHMEM is running" are safe; those
//! that take addresses or handles are `unsafe` and say which.
use std::os::raw::{c_int, c_void};

use cudarc::driver::sys::CUstream;
use nvshmem_sys::{nvshmem_team_t, teams, NvshmemLib};

use crate::{DataType, Error, ReduceOp, Result};

/// NVSHMEM's handle of a team.
pub(crate) type TeamHandle = nvshmem_team_t;

/// `nvshmemx_init_status()` before NVSHMEM is initialised (`NVSHMEM_STATUS_NOT_INITIALIZED`).
pub(crate) const STATUS_NOT_INITIALIZED: c_int = 0;
/// `nvshmemx_init_status()` when PEs share a GPU without MPS (`NVSHMEM_STATUS_LIMITED_MPG`):
/// every collective but barrier and sync ends the process.
pub(crate) const STATUS_LIMITED_MPG: c_int = 3;

/// Turns an NVSHMEM status into a `Result`.
#[inline]
pub(crate) fn check(call: &'static str, status: c_int) -> Result<()> {
    if status == 0 {
        Ok(())
    } else {
        Err(Error::Nvshmem { call, status })
    }
}

/// NVSHMEM's host library, while it is initialised.
#[derive(Clone, Copy)]
pub(crate) struct Nvshmem {
    lib: &'static NvshmemLib,
}

impl std::fmt::Debug for Nvshmem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Nvshmem")
    }
}

/// NVSHMEM's typed reduction entry points, all with one C signature once the element pointers
/// are seen as `void*`: (team, dest, source, count, stream) -> status.
pub(crate) type ReduceFn =
    unsafe extern "C" fn(nvshmem_team_t, *mut c_void, *const c_void, usize, CUstream) -> c_int;

/// Which of NVSHMEM's two typed reductions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reduction {
    /// `nvshmemx_<T>_<op>_reduce_on_stream`: every PE gets the whole result.
    AllReduce,
    /// `nvshmemx_<T>_<op>_reducescatter_on_stream`: PE i gets block i.
    ReduceScatter,
}

/// The typed function table, made from the element list and the operator table (`op.rs`):
/// for each core type, the operators NVSHMEM has for it (`numbers`: every core type;
/// `integers`: not the floats).
macro_rules! reduce_table {
    ([] $($t:ty, $v:ident, $n:literal, $c:literal, $nv:ident, $k:ident, $g:ident, $conv:ident;)*) => {
        fn typed_reduce(lib: &NvshmemLib, kind: Reduction, dtype: DataType, op: ReduceOp) -> Option<ReduceFn> {
            match dtype {
                $( DataType::$v => reduce_table!(@type lib kind op $nv $k $g), )*
            }
        }
    };
    (@type $lib:ident $kind:ident $op:ident $nv:ident $k:ident extra) => { None };
    (@type $lib:ident $kind:ident $op:ident $nv:ident $k:ident core) => {
        crate::op::reduce_op_table!(typed_ops $lib $kind $op $nv $k)
    };
}

/// One core type's operators, from the operator table's rows.
macro_rules! typed_ops {
    ([$lib:ident $kind:ident $op:ident $nv:ident $k:ident]
        $($(#[$attr:meta])* $v:ident $(($field:ty))? = $name:literal [$($alias:literal),*]
        define $def:ident applies [$($kind_:ident)*] nvshmem [$($nvop:ident($class:ident))?];)*) => {{
        let mut f: Option<ReduceFn> = None;
        $( typed_ops!(@row f $lib $kind $op $nv $k $v [$($nvop $class)?]); )*
        f
    }};
    // NVSHMEM has no such reduction, or none for floats.
    (@row $f:ident $lib:ident $kind:ident $op:ident $nv:ident $k:ident $v:ident []) => {};
    (@row $f:ident $lib:ident $kind:ident $op:ident $nv:ident Float $v:ident [$name:ident integers]) => {};
    (@row $f:ident $lib:ident $kind:ident $op:ident $nv:ident $k:ident $v:ident [$name:ident $class:ident]) => {
        if matches!($op, ReduceOp::$v { .. }) {
            $f = pastey::paste! {
                match $kind {
                    // SAFETY: a function pointer seen as the typed function it is, differing
                    // from `ReduceFn` only in the pointee type of its two data pointers, which
                    // the C ABI passes alike.
                    Reduction::AllReduce => Some(unsafe {
                        std::mem::transmute::<*const (), ReduceFn>($lib.[<nvshmemx_ $nv _ $name _reduce_on_stream>] as *const ())
                    }),
                    // SAFETY: as above.
                    Reduction::ReduceScatter => Some(unsafe {
                        std::mem::transmute::<*const (), ReduceFn>($lib.[<nvshmemx_ $nv _ $name _reducescatter_on_stream>] as *const ())
                    }),
                }
            };
        }
    };
}
crate::__element_list!(reduce_table);

/// What NVSHMEM's reduction of `dtype` by `op` really computes on: a [`Bool8`](crate::element::Bool8)
/// is a byte that is true when non-zero, and NVSHMEM's `uint8` min and max give the right
/// truth value for any bytes (min is 0 exactly when some input is 0), whereas its bitwise
/// `and` would not (1 & 2 == 0): so logical and is min, logical or is max.
fn nvshmem_operands(dtype: DataType, op: ReduceOp) -> Option<(DataType, ReduceOp)> {
    match (dtype, op) {
        (DataType::Bool8, ReduceOp::And | ReduceOp::Min) => Some((DataType::U8, ReduceOp::Min)),
        (DataType::Bool8, ReduceOp::Or | ReduceOp::Max) => Some((DataType::U8, ReduceOp::Max)),
        (DataType::Bool8, _) => None,
        _ => Some((dtype, op)),
    }
}

/// Whether NVSHMEM has a typed reduction of `dtype` by `op` (known without the library).
pub(crate) fn has_reduction(dtype: DataType, op: ReduceOp) -> bool {
    nvshmem_operands(dtype, op).is_some_and(|(d, op)| op.nvshmem_has(d))
}

/// The most elements one NVSHMEM reduction call of `dtype` may take. NVSHMEM 3.4.5's 16-bit
/// integer reductions hang (or let the PEs' barriers fall out of step) at 16 MiB a call on
/// 2 x H200 while 1 MiB calls pass every check (`docs/performance.md`, "16-bit integers"), so
/// a call of those types takes at most 1 MiB, and longer reductions run as several calls.
pub(crate) fn max_reduce_count(dtype: DataType) -> usize {
    match dtype {
        DataType::I16 | DataType::U16 => (1 << 20) / 2,
        _ => usize::MAX,
    }
}

impl Nvshmem {
    /// Loads the library (no NVSHMEM call is made).
    pub(crate) fn library() -> Result<&'static NvshmemLib> {
        Ok(nvshmem_sys::lib()?)
    }

    /// The handle of an initialised NVSHMEM.
    ///
    /// # Safety
    /// NVSHMEM is initialised, and stays so for as long as any copy of the result is used.
    pub(crate) unsafe fn assume_initialised(lib: &'static NvshmemLib) -> Self {
        Nvshmem { lib }
    }

    /// Whether NVSHMEM was initialised by anyone in this process (reads its state only).
    pub(crate) fn init_status(lib: &NvshmemLib) -> c_int {
        // SAFETY: takes no arguments and only reads NVSHMEM's state.
        unsafe { lib.nvshmemx_init_status() }
    }

    /// A fresh unique id for a unique-id initialisation.
    pub(crate) fn unique_id(lib: &NvshmemLib) -> Result<nvshmem_sys::nvshmemx_uniqueid_t> {
        let mut id = nvshmem_sys::nvshmemx_uniqueid_t::default();
        // SAFETY: id is a valid, writable unique-id struct.
        check("nvshmemx_get_uniqueid", unsafe {
            lib.nvshmemx_get_uniqueid(&mut id)
        })?;
        Ok(id)
    }

    /// `nvshmemx_set_attr_uniqueid_args`.
    ///
    /// # Safety
    /// `uid` and `attr` stay valid until [`Nvshmem::hostlib_init`] with `attr` returns
    /// (NVSHMEM keeps a pointer to `uid`).
    pub(crate) unsafe fn set_uniqueid_args(
        lib: &NvshmemLib,
        rank: usize,
        size: usize,
        uid: &nvshmem_sys::nvshmemx_uniqueid_t,
        attr: &mut nvshmem_sys::nvshmemx_init_attr_t,
    ) -> Result<()> {
        // SAFETY: both references are valid for the call, and the caller keeps `uid` alive
        // until the initialisation that reads it returns (this function's contract).
        check("nvshmemx_set_attr_uniqueid_args", unsafe {
            lib.nvshmemx_set_attr_uniqueid_args(rank as c_int, size as c_int, uid, attr)
        })
    }

    /// `nvshmemx_hostlib_init_attr`: starts NVSHMEM (collective over the job's PEs).
    ///
    /// # Safety
    /// NVSHMEM is not initialised; `attr` is a versioned attribute struct whose pointers stay
    /// valid through the call; the CUDA context NVSHMEM is to use is current.
    pub(crate) unsafe fn hostlib_init(
        lib: &NvshmemLib,
        flags: u32,
        attr: &mut nvshmem_sys::nvshmemx_init_attr_t,
    ) -> Result<()> {
        // SAFETY: the caller guarantees NVSHMEM is not yet initialised, `attr` is valid
        // through the call and the right context is current (this function's contract).
        check("nvshmemx_hostlib_init_attr", unsafe {
            lib.nvshmemx_hostlib_init_attr(flags, attr)
        })
    }

    /// Finalises NVSHMEM (collective over every PE).
    ///
    /// # Safety
    /// Nothing uses NVSHMEM any more: no symmetric memory is in use by queued work, and no
    /// copy of this handle is used after.
    pub(crate) unsafe fn finalize(self) {
        // SAFETY: NVSHMEM is initialised (this handle's invariant) and the caller guarantees
        // that nothing uses it any more (this function's contract).
        unsafe { self.lib.nvshmemx_hostlib_finalize() }
    }

    /// This PE's number and the number of PEs.
    pub(crate) fn world(&self) -> (usize, usize) {
        // SAFETY: NVSHMEM is initialised (this handle's invariant); both only read its state.
        let (me, n) = unsafe { (self.lib.nvshmem_my_pe(), self.lib.nvshmem_n_pes()) };
        (me.max(0) as usize, n.max(0) as usize)
    }

    /// How many PEs use this PE's GPU (NVSHMEM's own team of them, `NVSHMEMI_TEAM_SAME_GPU`;
    /// 1 when it does not say).
    pub(crate) fn pes_on_this_gpu(&self) -> usize {
        // SAFETY: NVSHMEM is initialised and makes its predefined teams at start-up; the call
        // only reads its state.
        let n = unsafe { self.lib.nvshmem_team_n_pes(teams::NVSHMEMI_TEAM_SAME_GPU) };
        usize::try_from(n).unwrap_or(1).max(1)
    }

    /// The thread level NVSHMEM provides (`NVSHMEM_THREAD_*`).
    pub(crate) fn thread_level(&self) -> c_int {
        let mut provided = 0;
        // SAFETY: NVSHMEM is initialised; provided is a valid place for the answer.
        unsafe { self.lib.nvshmem_query_thread(&mut provided) };
        provided
    }

    // ---- symmetric memory

    /// Allocates `bytes` (zeroed if `zeroed`) from the symmetric heap; `None` when NVSHMEM
    /// refuses. Collective over every PE, which must all ask for the same size.
    ///
    /// # Safety
    /// The runtime's CUDA context is current.
    pub(crate) unsafe fn malloc(&self, bytes: usize, zeroed: bool) -> Option<u64> {
        // SAFETY: NVSHMEM is initialised (this handle's invariant) and the caller makes the
        // runtime's context current; a refusal is a null pointer, checked below.
        let p = unsafe {
            if zeroed {
                self.lib.nvshmem_calloc(1, bytes)
            } else {
                self.lib.nvshmem_malloc(bytes)
            }
        };
        (!p.is_null()).then_some(p as u64)
    }

    /// Frees an allocation (collective over every PE, in the same order everywhere).
    ///
    /// # Safety
    /// `ptr` came from [`Nvshmem::malloc`] and is freed once; no queued work uses it; the
    /// runtime's context is current.
    pub(crate) unsafe fn free(&self, ptr: u64) {
        // SAFETY: the caller guarantees `ptr` is a live allocation of this heap that no
        // queued work uses, freed once, with the context current (this function's contract).
        unsafe { self.lib.nvshmem_free(ptr as *mut c_void) }
    }

    /// The address at which this GPU can load and store `addr` of PE `pe` (world numbering),
    /// or `None` when it can only be reached through NVSHMEM calls.
    ///
    /// # Safety
    /// `addr` is an address of this runtime's symmetric heap and `pe` a world PE.
    pub(crate) unsafe fn ptr(&self, addr: u64, pe: usize) -> Option<u64> {
        // SAFETY: the caller guarantees `addr` is in this runtime's symmetric heap and `pe` a
        // world PE (this function's contract); the call only computes an address.
        let p = unsafe { self.lib.nvshmem_ptr(addr as *const c_void, pe as c_int) };
        (!p.is_null()).then_some(p as u64)
    }

    /// `nvshmemx_buffer_register`: lets NVSHMEM use the `bytes` at `addr`, memory outside the
    /// symmetric heap, as the local side of its one-sided calls (for a network transport it
    /// registers the memory with the NIC; peer-to-peer copies need nothing).
    ///
    /// # Safety
    /// `addr` is this PE's device memory (not managed, not in the symmetric heap), allocated
    /// for at least `bytes` bytes (more than 0) until [`Nvshmem::buffer_unregister`] undoes
    /// this; the runtime's context is current.
    pub(crate) unsafe fn buffer_register(&self, addr: u64, bytes: usize) -> Result<()> {
        // SAFETY: the caller guarantees `addr` is `bytes` of this PE's device memory that
        // stays allocated until it is unregistered (this function's contract).
        check("nvshmemx_buffer_register", unsafe {
            self.lib
                .nvshmemx_buffer_register(addr as *mut c_void, bytes)
        })
    }

    /// `nvshmemx_buffer_unregister`: undoes [`Nvshmem::buffer_register`] of `addr`.
    ///
    /// # Safety
    /// `addr` was registered by [`Nvshmem::buffer_register`] and is unregistered once; no
    /// queued work uses it any more; the runtime's context is current.
    pub(crate) unsafe fn buffer_unregister(&self, addr: u64) -> Result<()> {
        // SAFETY: the caller guarantees `addr` was registered, is unregistered once and no
        // queued work uses it (this function's contract).
        check("nvshmemx_buffer_unregister", unsafe {
            self.lib.nvshmemx_buffer_unregister(addr as *mut c_void)
        })
    }

    // ---- modules of device-initiated kernels

    /// `nvshmemx_cumodule_init`: fills the module's copy of NVSHMEM's device state (the
    /// `nvshmemi_device_state_d` globals its device library defines) and registers it, so that
    /// NVSHMEM updates it when the state changes (a new team). Waits for the device.
    ///
    /// # Safety
    /// `module` is a live module of the runtime's context (current), linked with NVSHMEM's
    /// device library, not registered yet.
    pub(crate) unsafe fn cumodule_init(&self, module: cudarc::driver::sys::CUmodule) -> Result<()> {
        // SAFETY: the caller guarantees `module` is a live, unregistered module linked with
        // NVSHMEM's device library, in the current context (this function's contract).
        check("nvshmemx_cumodule_init", unsafe {
            self.lib.nvshmemx_cumodule_init(module)
        })
    }

    /// `nvshmemx_cumodule_finalize`: unregisters a module [`Nvshmem::cumodule_init`]
    /// registered; NVSHMEM no longer writes into it, so it may be unloaded after.
    ///
    /// # Safety
    /// `module` was registered by [`Nvshmem::cumodule_init`] and is finalised once; the
    /// runtime's context is current.
    pub(crate) unsafe fn cumodule_finalize(
        &self,
        module: cudarc::driver::sys::CUmodule,
    ) -> Result<()> {
        // SAFETY: the caller guarantees `module` was registered and is finalised once, in
        // the current context (this function's contract).
        check("nvshmemx_cumodule_finalize", unsafe {
            self.lib.nvshmemx_cumodule_finalize(module)
        })
    }

    // ---- teams

    /// This PE's index in `team` (`None` if not a member) and the team's size.
    ///
    /// # Safety
    /// `team` is a valid team handle of this runtime.
    pub(crate) unsafe fn team_shape(&self, team: TeamHandle) -> (Option<usize>, usize) {
        // SAFETY: the caller guarantees `team` is a valid handle (this function's contract);
        // both calls only read NVSHMEM's state.
        let (me, n) = unsafe {
            (
                self.lib.nvshmem_team_my_pe(team),
                self.lib.nvshmem_team_n_pes(team),
            )
        };
        (usize::try_from(me).ok(), n.max(0) as usize)
    }

    /// The index in `to` of the PE with index `pe` in `from`, if it is a member of `to`.
    ///
    /// # Safety
    /// Both handles are valid; `pe` is below `from`'s size.
    pub(crate) unsafe fn translate(
        &self,
        from: TeamHandle,
        pe: usize,
        to: TeamHandle,
    ) -> Option<usize> {
        // SAFETY: the caller guarantees both handles are valid and `pe` is in `from` (this
        // function's contract); the call only reads NVSHMEM's state.
        let to_pe = unsafe { self.lib.nvshmem_team_translate_pe(from, pe as c_int, to) };
        usize::try_from(to_pe).ok()
    }

    /// The world number of team PE `pe`.
    ///
    /// # Safety
    /// As [`Nvshmem::translate`].
    pub(crate) unsafe fn world_pe(&self, team: TeamHandle, pe: usize) -> Result<usize> {
        // SAFETY: `team` is valid and `pe` in it (this function's contract), and the world
        // team always is.
        unsafe { self.translate(team, pe, teams::NVSHMEM_TEAM_WORLD) }.ok_or(Error::Nvshmem {
            call: "nvshmem_team_translate_pe",
            status: -1,
        })
    }

    /// `nvshmem_team_split_strided` with NVSHMEM's default configuration; the new handle
    /// (`NVSHMEM_TEAM_INVALID` on PEs not in it). Collective over `parent`.
    ///
    /// # Safety
    /// `parent` is valid; the numbers fit the parent (checked by the caller).
    pub(crate) unsafe fn split_strided(
        &self,
        parent: TeamHandle,
        start: usize,
        stride: usize,
        size: usize,
    ) -> Result<TeamHandle> {
        let mut handle = teams::NVSHMEM_TEAM_INVALID;
        // SAFETY: the caller guarantees `parent` is valid and the numbers fit it (this
        // function's contract); a null configuration with mask 0 means the defaults, and
        // `handle` is a valid place for the answer.
        check("nvshmem_team_split_strided", unsafe {
            self.lib.nvshmem_team_split_strided(
                parent,
                start as c_int,
                stride as c_int,
                size as c_int,
                std::ptr::null(),
                0,
                &mut handle,
            )
        })?;
        Ok(handle)
    }

    /// `nvshmem_team_split_2d`: the x and y handles, and the status (NVSHMEM may have made one
    /// team before failing, so the handles come back either way). Collective over `parent`.
    ///
    /// # Safety
    /// `parent` is valid; `xrange` is at most its size.
    pub(crate) unsafe fn split_2d(
        &self,
        parent: TeamHandle,
        xrange: usize,
    ) -> (TeamHandle, TeamHandle, Result<()>) {
        let (mut x, mut y) = (teams::NVSHMEM_TEAM_INVALID, teams::NVSHMEM_TEAM_INVALID);
        // SAFETY: the caller guarantees `parent` is valid and `xrange` fits it (this
        // function's contract); null configurations with mask 0 mean the defaults, and `x`
        // and `y` are valid places for the answers.
        let status = unsafe {
            self.lib.nvshmem_team_split_2d(
                parent,
                xrange as c_int,
                std::ptr::null(),
                0,
                &mut x,
                std::ptr::null(),
                0,
                &mut y,
            )
        };
        (x, y, check("nvshmem_team_split_2d", status))
    }

    /// A fresh team unique id (`nvshmemx_team_get_uniqueid`).
    pub(crate) fn team_unique_id(&self) -> Result<u64> {
        let mut id = 0;
        // SAFETY: NVSHMEM is initialised; id is a valid place for the id.
        check("nvshmemx_team_get_uniqueid", unsafe {
            self.lib.nvshmemx_team_get_uniqueid(&mut id)
        })?;
        Ok(id)
    }

    /// `nvshmemx_team_init`: joins the team of `n` PEs named by `id`, at index `index`.
    /// Collective over the new team's members.
    ///
    /// # Safety
    /// `config` is a versioned team configuration whose `uniqueid` is the team's id.
    pub(crate) unsafe fn team_init(
        &self,
        config: &mut nvshmem_sys::nvshmem_team_config_t,
        mask: i64,
        n: usize,
        index: usize,
    ) -> Result<TeamHandle> {
        let mut handle = teams::NVSHMEM_TEAM_INVALID;
        // SAFETY: the caller guarantees `config` is a versioned configuration naming the
        // team's id (this function's contract); `handle` is a valid place for the answer.
        check("nvshmemx_team_init", unsafe {
            self.lib
                .nvshmemx_team_init(&mut handle, config, mask as _, n as c_int, index as c_int)
        })?;
        Ok(handle)
    }

    /// Destroys a team. In NVSHMEM 3.4 this is local to the PE (its barrier is commented out)
    /// and synchronises the whole device (`cudaDeviceSynchronize`).
    ///
    /// # Safety
    /// `team` came from a split of this runtime, is destroyed once, and no queued work uses it.
    pub(crate) unsafe fn team_destroy(&self, team: TeamHandle) {
        // SAFETY: the caller guarantees `team` came from a split, is destroyed once and no
        // queued work uses it (this function's contract).
        unsafe { self.lib.nvshmem_team_destroy(team) }
    }

    // ---- collectives on a stream (every member of the team makes the same call)

    /// `nvshmemx_barrier_on_stream` over `team` (or every PE with `None`).
    ///
    /// # Safety
    /// `team` is valid; `stream` is a live stream of the runtime's context, which is current.
    #[inline]
    pub(crate) unsafe fn barrier(&self, team: Option<TeamHandle>, stream: CUstream) -> Result<()> {
        match team {
            // SAFETY: the caller guarantees the team is valid and the stream live in the
            // current context (this function's contract).
            Some(t) => check("nvshmemx_barrier_on_stream", unsafe {
                self.lib.nvshmemx_barrier_on_stream(t, stream)
            }),
            None => {
                // Returns void: a failure shows at the next synchronisation of the stream.
                // SAFETY: as above; the world team always exists.
                unsafe { self.lib.nvshmemx_barrier_all_on_stream(stream) };
                Ok(())
            }
        }
    }

    /// `nvshmemx_team_sync_on_stream` over `team` (or every PE with `None`).
    ///
    /// # Safety
    /// As [`Nvshmem::barrier`].
    #[inline]
    pub(crate) unsafe fn sync(&self, team: Option<TeamHandle>, stream: CUstream) -> Result<()> {
        match team {
            // SAFETY: the caller guarantees the team is valid and the stream live in the
            // current context (this function's contract).
            Some(t) => check("nvshmemx_team_sync_on_stream", unsafe {
                self.lib.nvshmemx_team_sync_on_stream(t, stream)
            }),
            None => {
                // SAFETY: as above; the world team always exists.
                unsafe { self.lib.nvshmemx_sync_all_on_stream(stream) };
                Ok(())
            }
        }
    }

    /// The typed reduction of `dtype` by `op`, if NVSHMEM has one.
    #[inline]
    pub(crate) fn reduce_fn(
        &self,
        kind: Reduction,
        dtype: DataType,
        op: ReduceOp,
    ) -> Option<ReduceFn> {
        let (dtype, op) = nvshmem_operands(dtype, op)?;
        typed_reduce(self.lib, kind, dtype, op)
    }

    /// Calls a typed reduction over `count` elements (per block, for reduce-scatter).
    ///
    /// # Safety
    /// `f` came from [`Nvshmem::reduce_fn`] for the element type of the buffers; `src` and
    /// `dst` are symmetric addresses holding what the collective reads and writes (for
    /// reduce-scatter `src` holds one block per member), identical or disjoint (or `dst`
    /// this PE's block of `src`); `team` is valid; `stream` live and its context current.
    #[allow(clippy::too_many_arguments)]
    #[inline]
    pub(crate) unsafe fn reduce(
        &self,
        kind: Reduction,
        f: ReduceFn,
        team: TeamHandle,
        dst: u64,
        src: u64,
        count: usize,
        stream: CUstream,
    ) -> Result<()> {
        let call = match kind {
            Reduction::AllReduce => "nvshmemx_<T>_<op>_reduce_on_stream",
            Reduction::ReduceScatter => "nvshmemx_<T>_<op>_reducescatter_on_stream",
        };
        // SAFETY: the caller guarantees `f` is the typed reduction of the buffers' element
        // type, the buffers are symmetric and hold what it reads and writes, the team is
        // valid and the stream live in the current context (this function's contract).
        check(call, unsafe {
            f(
                team,
                dst as *mut c_void,
                src as *const c_void,
                count,
                stream,
            )
        })
    }

    /// `nvshmemx_broadcastmem_on_stream`: `bytes` from `root`'s `src` to every `dst`.
    ///
    /// # Safety
    /// `src`, `dst` symmetric with `bytes` each, identical or disjoint; `root` a team index;
    /// the rest as [`Nvshmem::barrier`].
    #[inline]
    pub(crate) unsafe fn broadcast(
        &self,
        team: TeamHandle,
        dst: u64,
        src: u64,
        bytes: usize,
        root: usize,
        stream: CUstream,
    ) -> Result<()> {
        // SAFETY: the caller guarantees symmetric buffers of `bytes`, identical or disjoint,
        // a root in the team, a valid team and a live stream (this function's contract).
        check("nvshmemx_broadcastmem_on_stream", unsafe {
            self.lib.nvshmemx_broadcastmem_on_stream(
                team,
                dst as *mut c_void,
                src as *const c_void,
                bytes,
                root as c_int,
                stream,
            )
        })
    }

    /// `nvshmemx_fcollectmem_on_stream`: every `dst` gets each member's `bytes` of `src`.
    ///
    /// # Safety
    /// `dst` holds one block of `bytes` per member; `src` is disjoint from it or this PE's
    /// block; the rest as [`Nvshmem::barrier`].
    #[inline]
    pub(crate) unsafe fn fcollect(
        &self,
        team: TeamHandle,
        dst: u64,
        src: u64,
        bytes: usize,
        stream: CUstream,
    ) -> Result<()> {
        // SAFETY: the caller guarantees `dst` holds a block per member, `src` is disjoint
        // from it or this PE's block, a valid team and a live stream (this function's
        // contract).
        check("nvshmemx_fcollectmem_on_stream", unsafe {
            self.lib.nvshmemx_fcollectmem_on_stream(
                team,
                dst as *mut c_void,
                src as *const c_void,
                bytes,
                stream,
            )
        })
    }

    /// `nvshmemx_alltoallmem_on_stream` with blocks of `bytes`.
    ///
    /// # Safety
    /// `src` and `dst` hold one block per member each and are disjoint; the rest as
    /// [`Nvshmem::barrier`].
    #[inline]
    pub(crate) unsafe fn alltoall(
        &self,
        team: TeamHandle,
        dst: u64,
        src: u64,
        bytes: usize,
        stream: CUstream,
    ) -> Result<()> {
        // SAFETY: the caller guarantees disjoint buffers of a block per member, a valid
        // team and a live stream (this function's contract).
        check("nvshmemx_alltoallmem_on_stream", unsafe {
            self.lib.nvshmemx_alltoallmem_on_stream(
                team,
                dst as *mut c_void,
                src as *const c_void,
                bytes,
                stream,
            )
        })
    }

    // ---- one-sided communication on a stream

    /// `nvshmemx_putmem_on_stream` (or `getmem` with `get`): `bytes` from `src` here to `dst`
    /// on world PE `pe` (or from `src` on `pe` to `dst` here).
    ///
    /// # Safety
    /// Both addresses are symmetric with `bytes` (the local side may also be registered
    /// memory); `pe` a world PE; `stream` live and its context current.
    pub(crate) unsafe fn copy(
        &self,
        get: bool,
        dst: u64,
        src: u64,
        bytes: usize,
        pe: usize,
        stream: CUstream,
    ) {
        let (d, s, p) = (dst as *mut c_void, src as *const c_void, pe as c_int);
        // SAFETY: the caller guarantees both sides hold `bytes` (symmetric, or registered
        // locally), a world PE and a live stream in the current context (this function's
        // contract).
        unsafe {
            if get {
                self.lib.nvshmemx_getmem_on_stream(d, s, bytes, p, stream)
            } else {
                self.lib.nvshmemx_putmem_on_stream(d, s, bytes, p, stream)
            }
        }
    }

    /// `nvshmemx_putmem_signal_on_stream`.
    ///
    /// # Safety
    /// As [`Nvshmem::copy`]; `sig` is a symmetric `u64`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) unsafe fn put_signal(
        &self,
        dst: u64,
        src: u64,
        bytes: usize,
        sig: u64,
        value: u64,
        op: c_int,
        pe: usize,
        stream: CUstream,
    ) {
        // SAFETY: as `copy`'s, and `sig` is a symmetric `u64` (this function's contract).
        unsafe {
            self.lib.nvshmemx_putmem_signal_on_stream(
                dst as *mut c_void,
                src as *const c_void,
                bytes,
                sig as *mut u64,
                value,
                op,
                pe as c_int,
                stream,
            )
        }
    }

    /// `nvshmemx_signal_op_on_stream`.
    ///
    /// # Safety
    /// `sig` is a symmetric `u64`; `pe` a world PE; `stream` live, its context current.
    pub(crate) unsafe fn signal(
        &self,
        sig: u64,
        value: u64,
        op: c_int,
        pe: usize,
        stream: CUstream,
    ) {
        // SAFETY: the caller guarantees a symmetric `u64`, a world PE and a live stream in the
        // current context (this function's contract).
        unsafe {
            self.lib
                .nvshmemx_signal_op_on_stream(sig as *mut u64, value, op, pe as c_int, stream)
        }
    }

    /// `nvshmemx_quiet_on_stream`.
    ///
    /// # Safety
    /// `stream` live, its context current.
    pub(crate) unsafe fn quiet(&self, stream: CUstream) {
        // SAFETY: the caller guarantees a live stream in the current context (this
        // function's contract).
        unsafe { self.lib.nvshmemx_quiet_on_stream(stream) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nvshmem_status_is_named() {
        let e = check("nvshmemx_float_sum_reduce_on_stream", 2).unwrap_err();
        assert_eq!(
            e.to_string(),
            "NVSHMEM error in nvshmemx_float_sum_reduce_on_stream: status 2 (out of memory)"
        );
        assert!(check("x", 0).is_ok());
    }

    #[test]
    fn the_table_knows_which_reductions_nvshmem_has() {
        use DataType::*;
        for &d in DataType::ALL.iter().filter(|d| d.is_core()) {
            assert!(has_reduction(d, ReduceOp::Sum), "{d}");
            assert!(has_reduction(d, ReduceOp::Prod), "{d}");
            assert_eq!(has_reduction(d, ReduceOp::Xor), d.is_integer(), "{d}");
            assert!(!has_reduction(d, ReduceOp::Avg), "{d}");
            assert!(!has_reduction(d, ReduceOp::PreMulSum(2.0)), "{d}");
        }
        for op in [ReduceOp::And, ReduceOp::Or, ReduceOp::Min, ReduceOp::Max] {
            assert!(has_reduction(Bool8, op), "{op}");
        }
        assert!(!has_reduction(Bool8, ReduceOp::Sum));
        assert!(!has_reduction(F8E4M3, ReduceOp::Sum));
        assert_eq!(
            nvshmem_operands(Bool8, ReduceOp::And),
            Some((U8, ReduceOp::Min))
        );
    }

    #[test]
    fn only_16_bit_integers_cap_a_call() {
        // 1 MiB a call: the size the GPU matrix checks on every team; NVSHMEM 3.4.5 hangs at
        // 16 MiB for these two types.
        assert_eq!(max_reduce_count(DataType::I16), 1 << 19);
        assert_eq!(max_reduce_count(DataType::U16), 1 << 19);
        for &d in DataType::ALL {
            if !matches!(d, DataType::I16 | DataType::U16) {
                assert_eq!(max_reduce_count(d), usize::MAX, "{d}");
            }
        }
    }
}
