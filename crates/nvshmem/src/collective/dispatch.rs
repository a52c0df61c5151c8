//! One internal function per collective: validate, choose an algorithm, queue it.
//!
//! The algorithm is chosen per call by the `choose_*` functions. Today every collective runs
//! on NVSHMEM's own functions; an operator or type NVSHMEM lacks is
//! [`Error::Unsupported`]. Run-time compiled kernels (for `avg`, `premul_sum`, `bool`, fp8)
//! and our own peer-memory kernels are added as further [`Algorithm`] variants and chosen
//! here, without touching the public methods.
use std::os::raw::c_int;

use cudarc::driver::sys::CUstream;
use nvshmem_sys::teams::NVSHMEM_TEAM_WORLD;

use super::{
    check::{self, Span},
    op::ReduceOp,
    table::ReduceFn,
};
use crate::{error::check as status, Element, Error, Result, Team};

/// How one collective call runs.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Algorithm<F> {
    /// NVSHMEM's typed function `F`.
    Nvshmem(F),
}

/// The algorithm of a reduction of `T` by `op`, or why there is none.
fn choose_reduce<T: Element>(
    team: &Team,
    call: &'static str,
    op: ReduceOp,
    pick: fn(&nvshmem_sys::NvshmemLib, super::op::NvOp) -> Option<ReduceFn<T::Raw>>,
) -> Result<Algorithm<ReduceFn<T::Raw>>> {
    op.check_for::<T>(call)?;
    match op.nvshmem().and_then(|nv| pick(team.rt.inner.lib, nv)) {
        Some(f) => Ok(Algorithm::Nvshmem(f)),
        // Hook: kernels for avg / premul_sum / bool / fp8 are chosen here.
        None => Err(Error::Unsupported {
            call,
            what: format!(
                "operator {op} on {} (NVSHMEM has no such reduction; it needs a run-time compiled kernel)",
                T::NAME
            ),
        }),
    }
}

/// Runs an NVSHMEM typed reduction (`..._reduce_on_stream` or `..._reducescatter_on_stream`).
///
/// # Safety
/// `dst` and `src` are symmetric addresses of this runtime's heap, valid for what `f` reads
/// and writes with `count`; `cu` is a live stream of the runtime's context, which is current.
unsafe fn run_reduce<T: Element>(
    team: &Team,
    f: ReduceFn<T::Raw>,
    name: &'static str,
    dst: u64,
    src: u64,
    count: usize,
    cu: CUstream,
) -> Result<()> {
    let status_code = f(
        team.handle,
        dst as *mut T::Raw,
        src as *const T::Raw,
        count,
        cu,
    );
    status(name, status_code)
}

const REDUCE: &str = "nvshmemx_<T>_<op>_reduce_on_stream";
const REDUCESCATTER: &str = "nvshmemx_<T>_<op>_reducescatter_on_stream";

impl Team {
    pub(super) fn all_reduce_spans<T: Element>(
        &self,
        call: &'static str,
        src: Span,
        dst: Span,
        op: ReduceOp,
        stream: &cudarc::driver::CudaStream,
    ) -> Result<()> {
        check::same_shape(call, &src, &dst)?;
        let alg = choose_reduce::<T>(self, call, op, T::reduce_fn)?;
        let (_, cu) = self.enter(call, stream)?;
        if src.len == 0 {
            return Ok(());
        }
        match alg {
            // SAFETY: src and dst are symmetric arrays of this runtime with `src.len`
            // elements each (checked), either identical or disjoint (checked); `enter`
            // made the context current and checked the stream.
            Algorithm::Nvshmem(f) => unsafe {
                run_reduce::<T>(self, f, REDUCE, dst.ptr, src.ptr, src.len, cu)
            },
        }
    }

    pub(super) fn reduce_spans<T: Element>(
        &self,
        call: &'static str,
        root: usize,
        src: Span,
        dst: Span,
        op: ReduceOp,
        stream: &cudarc::driver::CudaStream,
    ) -> Result<()> {
        check::root(call, root, self.n_pes)?;
        check::same_shape(call, &src, &dst)?;
        let alg = choose_reduce::<T>(self, call, op, T::reduce_fn)?;
        let bytes = src.len * src.elem;
        let scratch = self.rt.scratch_ptr(call, bytes)?;
        let (me, cu) = self.enter(call, stream)?;
        if src.len == 0 {
            return Ok(());
        }
        match alg {
            // SAFETY: the scratch is symmetric (allocated collectively) with at least
            // `bytes`; src is a symmetric array of `src.len` elements, disjoint from the
            // scratch (the scratch is not reachable as a SymBuffer).
            Algorithm::Nvshmem(f) => unsafe {
                run_reduce::<T>(self, f, REDUCE, scratch, src.ptr, src.len, cu)?
            },
        }
        if me == root {
            // SAFETY: dst holds `bytes` (checked), the scratch too; queued on the stream after
            // the reduction into the scratch.
            unsafe { cudarc::driver::result::memcpy_dtod_async(dst.ptr, scratch, bytes, cu) }
                .map_err(Error::cuda("cuMemcpyDtoDAsync (reduce result to root)"))?;
        }
        Ok(())
    }

    pub(super) fn broadcast_spans(
        &self,
        call: &'static str,
        root: usize,
        src: Span,
        dst: Span,
        stream: &cudarc::driver::CudaStream,
    ) -> Result<()> {
        check::root(call, root, self.n_pes)?;
        check::same_shape(call, &src, &dst)?;
        let (_, cu) = self.enter(call, stream)?;
        if src.len == 0 {
            return Ok(());
        }
        // Data movement needs no arithmetic: NVSHMEM's byte-wise form serves every type.
        // SAFETY: src and dst are symmetric with `bytes` each (checked), identical or
        // disjoint; the root is a team index (checked); the stream is checked and current.
        let code = unsafe {
            (self.rt.inner.lib.nvshmemx_broadcastmem_on_stream)(
                self.handle,
                dst.ptr as *mut _,
                src.ptr as *const _,
                src.len * src.elem,
                root as c_int,
                cu,
            )
        };
        status("nvshmemx_broadcastmem_on_stream", code)
    }

    pub(super) fn fcollect_spans(
        &self,
        call: &'static str,
        src: Span,
        dst: Span,
        stream: &cudarc::driver::CudaStream,
    ) -> Result<()> {
        let me = self.require_member(call)?;
        let count = check::fcollect(call, self.n_pes, me, &src, &dst)?;
        let (_, cu) = self.enter(call, stream)?;
        if count == 0 {
            return Ok(());
        }
        // SAFETY: dst holds n_pes blocks of src's bytes (checked); src is disjoint from dst or
        // exactly this PE's block (NCCL's in-place rule, checked).
        let code = unsafe {
            (self.rt.inner.lib.nvshmemx_fcollectmem_on_stream)(
                self.handle,
                dst.ptr as *mut _,
                src.ptr as *const _,
                count * src.elem,
                cu,
            )
        };
        status("nvshmemx_fcollectmem_on_stream", code)
    }

    pub(super) fn alltoall_spans(
        &self,
        call: &'static str,
        src: Span,
        dst: Span,
        stream: &cudarc::driver::CudaStream,
    ) -> Result<()> {
        let count = check::alltoall(call, self.n_pes, &src, &dst)?;
        let (_, cu) = self.enter(call, stream)?;
        if count == 0 {
            return Ok(());
        }
        // SAFETY: src and dst hold n_pes blocks of `count` elements each and are disjoint
        // (checked).
        let code = unsafe {
            (self.rt.inner.lib.nvshmemx_alltoallmem_on_stream)(
                self.handle,
                dst.ptr as *mut _,
                src.ptr as *const _,
                count * src.elem,
                cu,
            )
        };
        status("nvshmemx_alltoallmem_on_stream", code)
    }

    pub(super) fn reduce_scatter_spans<T: Element>(
        &self,
        call: &'static str,
        src: Span,
        dst: Span,
        op: ReduceOp,
        stream: &cudarc::driver::CudaStream,
    ) -> Result<()> {
        let me = self.require_member(call)?;
        let count = check::reduce_scatter(call, self.n_pes, me, &src, &dst)?;
        let alg = choose_reduce::<T>(self, call, op, T::reducescatter_fn)?;
        let (_, cu) = self.enter(call, stream)?;
        if count == 0 {
            return Ok(());
        }
        match alg {
            // SAFETY: src holds n_pes blocks of dst's `count` elements (checked); dst is
            // disjoint from src or exactly this PE's block (checked).
            Algorithm::Nvshmem(f) => unsafe {
                run_reduce::<T>(self, f, REDUCESCATTER, dst.ptr, src.ptr, count, cu)
            },
        }
    }

    /// The world PE number of team PE `pe`.
    fn world_pe(&self, call: &'static str, pe: usize) -> Result<c_int> {
        // SAFETY: the team handle is valid while the team lives; `pe` is below n_pes.
        let w = unsafe {
            (self.rt.inner.lib.nvshmem_team_translate_pe)(
                self.handle,
                pe as c_int,
                NVSHMEM_TEAM_WORLD,
            )
        };
        if w < 0 {
            return Err(Error::arg(
                call,
                "root",
                format_args!("NVSHMEM cannot translate team PE {pe} to a world PE"),
            ));
        }
        Ok(w)
    }

    pub(super) fn gather_spans(
        &self,
        call: &'static str,
        root: usize,
        src: Span,
        dst: Span,
        stream: &cudarc::driver::CudaStream,
    ) -> Result<()> {
        let count = check::gather(call, self.n_pes, root, &src, &dst)?;
        let (me, cu) = self.enter(call, stream)?;
        if count == 0 {
            return Ok(());
        }
        let root_world = self.world_pe(call, root)?;
        let lib = self.rt.inner.lib;
        let target = dst.at(me * count);
        // NVSHMEM has no gather: each PE puts its block into the root's dst. The first sync
        // keeps the puts from overtaking the root's earlier use of dst; the barrier completes
        // them before the root's later work reads dst.
        // SAFETY: team handle valid, stream checked and current.
        status("nvshmemx_team_sync_on_stream", unsafe {
            (lib.nvshmemx_team_sync_on_stream)(self.handle, cu)
        })?;
        if !(me == root && target == src.ptr) {
            // SAFETY: target is block `me` of the symmetric dst (n_pes blocks of `count`,
            // checked), src holds `count` elements; root_world is a valid PE.
            unsafe {
                (lib.nvshmemx_putmem_on_stream)(
                    target as *mut _,
                    src.ptr as *const _,
                    count * src.elem,
                    root_world,
                    cu,
                )
            };
        }
        // SAFETY: as above.
        status("nvshmemx_barrier_on_stream", unsafe {
            (lib.nvshmemx_barrier_on_stream)(self.handle, cu)
        })
    }

    pub(super) fn scatter_spans(
        &self,
        call: &'static str,
        root: usize,
        src: Span,
        dst: Span,
        stream: &cudarc::driver::CudaStream,
    ) -> Result<()> {
        let count = check::scatter(call, self.n_pes, root, &src, &dst)?;
        let (me, cu) = self.enter(call, stream)?;
        if count == 0 {
            return Ok(());
        }
        let root_world = self.world_pe(call, root)?;
        let lib = self.rt.inner.lib;
        let source = src.at(me * count);
        // NVSHMEM has no scatter: each PE gets its block from the root's src. The first sync
        // waits for the root's src to be ready; the second keeps the root from overwriting
        // src while others still read it.
        // SAFETY: team handle valid, stream checked and current.
        status("nvshmemx_team_sync_on_stream", unsafe {
            (lib.nvshmemx_team_sync_on_stream)(self.handle, cu)
        })?;
        if !(me == root && source == dst.ptr) {
            // SAFETY: source is block `me` of the symmetric src (n_pes blocks of `count`,
            // checked); dst holds `count` elements; root_world is a valid PE.
            unsafe {
                (lib.nvshmemx_getmem_on_stream)(
                    dst.ptr as *mut _,
                    source as *const _,
                    count * src.elem,
                    root_world,
                    cu,
                )
            };
        }
        // SAFETY: as above.
        status("nvshmemx_team_sync_on_stream", unsafe {
            (lib.nvshmemx_team_sync_on_stream)(self.handle, cu)
        })
    }
}
