//! One internal function per collective: validate, choose an algorithm, queue it.
//!
//! The algorithm of a reduction is chosen per call ([`super::plan::plan_reduce`], a pure
//! function of the type and operator): NVSHMEM's own reduction; NVSHMEM's sum with a
//! run-time compiled kernel after it (`avg`: divide by the team size) or before it
//! (`premul_sum`: scale the input, into the output or the scratch, never over the caller's
//! input); or, for types NVSHMEM cannot compute on (fp8), this crate's kernel reading every
//! member's input through peer-mapped memory between two team barriers. Every step is queued
//! on the caller's stream and nothing synchronises the host, so graph capture keeps working.
//! Everything that can fail (arguments, scratch, peer access, kernel compilation) is checked
//! before the first step is queued; what can still fail after it (a kernel launch between
//! the peer kernels' barriers) still queues the closing barrier, so no PE waits for another.
use std::os::raw::c_int;

use cudarc::driver::{sys::CUstream, CudaStream};
use nvshmem_sys::teams::NVSHMEM_TEAM_WORLD;

use super::{
    check::{self, Span},
    op::ReduceOp,
    plan::{plan_reduce, scratch_needed, Plan, Reduction},
    table::ReduceFn,
};
use crate::kernels::{self, KernelKey, KernelType, MapOp, ReduceOp as KernelOp, MAX_PEERS};
use crate::{error::check as status, Element, Error, Result, Team};

/// Which way [`Team::rooted_blocks`] moves the blocks.
#[derive(Debug, Clone, Copy)]
enum Rooted {
    Gather,
    Scatter,
}

/// How one reduction call runs (a [`Plan`] with its functions resolved).
#[derive(Debug, Clone, Copy)]
pub(crate) enum Algorithm<F> {
    /// NVSHMEM's typed function `F`.
    Nvshmem(F),
    /// `avg`: NVSHMEM's sum `F`, then a kernel divides the output by the team size.
    SumThenDiv(F, KernelType),
    /// `premul_sum(s)`: a kernel multiplies the input by `s`, then NVSHMEM's sum `F`.
    ScaleThenSum(F, KernelType, f64),
    /// This crate's reduction kernel over peer-mapped inputs, with PreMulSum's scale.
    PeerKernel(KernelOp, KernelType, f64),
}

impl<F> Algorithm<F> {
    /// The kernel the algorithm launches, if any.
    fn kernel(&self) -> Option<KernelKey> {
        match *self {
            Algorithm::Nvshmem(_) => None,
            Algorithm::SumThenDiv(_, t) => Some(KernelKey::Map(t, MapOp::Div)),
            Algorithm::ScaleThenSum(_, t, _) => Some(KernelKey::Map(t, MapOp::Mul)),
            Algorithm::PeerKernel(op, t, _) => Some(KernelKey::Reduce(t, op)),
        }
    }
}

/// The kernels' name for `T`.
fn kernel_type<T: Element>(call: &'static str) -> Result<KernelType> {
    KernelType::from_name(T::NAME).ok_or_else(|| Error::Unsupported {
        call,
        what: format!("this crate's kernels have no instantiation for {}", T::NAME),
    })
}

/// The algorithm of a reduction of `T` by `op` and its plan, or why there is none.
fn choose_reduce<T: Element>(
    team: &Team,
    call: &'static str,
    op: ReduceOp,
    pick: fn(&nvshmem_sys::NvshmemLib, super::op::NvOp) -> Option<ReduceFn<T::Raw>>,
) -> Result<(Plan, Algorithm<ReduceFn<T::Raw>>)> {
    op.check_for::<T>(call)?;
    let unsupported = |why: String| Error::Unsupported {
        call,
        what: format!("{op} on {}: {why}", T::NAME),
    };
    let plan = plan_reduce(T::KIND, T::NVSHMEM_REDUCES, op).map_err(unsupported)?;
    let lib = team.rt.inner.lib;
    let nvshmem =
        |nv| pick(lib, nv).ok_or_else(|| unsupported(format!("NVSHMEM has no {nv:?} reduction")));
    let alg = match plan {
        Plan::Nvshmem(nv) => Algorithm::Nvshmem(nvshmem(nv)?),
        Plan::SumThenDiv => {
            Algorithm::SumThenDiv(nvshmem(super::op::NvOp::Sum)?, kernel_type::<T>(call)?)
        }
        Plan::ScaleThenSum(s) => {
            Algorithm::ScaleThenSum(nvshmem(super::op::NvOp::Sum)?, kernel_type::<T>(call)?, s)
        }
        Plan::PeerKernel(kop, s) => Algorithm::PeerKernel(kop, kernel_type::<T>(call)?, s),
    };
    Ok((plan, alg))
}

/// Runs an NVSHMEM all-reduce (`..._reduce_on_stream`) of `count` elements, as consecutive
/// calls over contiguous chunks of at most [`MAX_NVSHMEM_COUNT`](super::NvshmemTyped::MAX_NVSHMEM_COUNT)
/// (an all-reduce is element-wise, so chunks are independent).
///
/// # Safety
/// `dst` and `src` are symmetric addresses of this runtime's heap, each valid for `count`
/// elements, identical or disjoint; `cu` is a live stream of the runtime's context, which is
/// current.
unsafe fn run_all_reduce<T: Element>(
    team: &Team,
    f: ReduceFn<T::Raw>,
    dst: u64,
    src: u64,
    count: usize,
    cu: CUstream,
) -> Result<()> {
    let step = T::MAX_NVSHMEM_COUNT.max(1);
    let mut done = 0;
    while done < count {
        let n = step.min(count - done);
        let off = (done * std::mem::size_of::<T>()) as u64;
        status(
            "nvshmemx_<T>_<op>_reduce_on_stream",
            f(
                team.handle,
                (dst + off) as *mut T::Raw,
                (src + off) as *const T::Raw,
                n,
                cu,
            ),
        )?;
        done += n;
    }
    Ok(())
}

/// Runs an NVSHMEM reduce-scatter (`..._reducescatter_on_stream`) with `count` elements per
/// block, in one call (its blocks are strided, so it cannot be chunked like an all-reduce;
/// `reduce_scatter_spans` takes another way when `count` exceeds the type's cap).
///
/// # Safety
/// `src` holds `n_pes` blocks of `count` elements and `dst` one block, symmetric addresses
/// of this runtime's heap, disjoint or `dst` this PE's block of `src`; `cu` is live and current.
unsafe fn run_reduce_scatter<T: Element>(
    team: &Team,
    f: ReduceFn<T::Raw>,
    dst: u64,
    src: u64,
    count: usize,
    cu: CUstream,
) -> Result<()> {
    debug_assert!(count <= T::MAX_NVSHMEM_COUNT);
    let code = f(
        team.handle,
        dst as *mut T::Raw,
        src as *const T::Raw,
        count,
        cu,
    );
    status("nvshmemx_<T>_<op>_reducescatter_on_stream", code)
}

/// Queues `cuMemcpyDtoDAsync`.
///
/// # Safety
/// `dst` and `src` hold `bytes` on this device and do not overlap; `cu` is live and current.
unsafe fn copy(dst: u64, src: u64, bytes: usize, cu: CUstream, what: &'static str) -> Result<()> {
    cudarc::driver::result::memcpy_dtod_async(dst, src, bytes, cu).map_err(Error::cuda(what))
}

/// Runs `body` between two `barrier`s, queuing the closing one even when `body` fails: a
/// step that fails on some PEs only (a launch error; in a rooted reduce the root alone
/// launches) must not leave the others waiting in the closing barrier for it. The body's
/// error, if any, is returned after the closing barrier is queued.
fn between_barriers(
    mut barrier: impl FnMut() -> Result<()>,
    body: impl FnOnce() -> Result<()>,
) -> Result<()> {
    barrier()?;
    let done = body();
    let closed = barrier();
    done.and(closed)
}

/// Peer addresses of one team, in team-index order, for the peer kernels.
struct Peers {
    ptrs: [u64; MAX_PEERS],
    n: usize,
}

impl Peers {
    fn get(&self) -> &[u64] {
        &self.ptrs[..self.n]
    }
}

impl Team {
    /// Refuses what would fail after the first step is queued: a scratch too small, a kernel
    /// that does not compile. Returns the scratch address (0 when none is needed).
    fn prepare<F>(
        &self,
        call: &'static str,
        alg: &Algorithm<F>,
        scratch_bytes: usize,
        stream: &CudaStream,
    ) -> Result<u64> {
        let scratch = if scratch_bytes > 0 {
            self.rt.scratch_ptr(call, scratch_bytes)?
        } else {
            0
        };
        if let Some(key) = alg.kernel() {
            kernels::prepare(stream, key)?;
        }
        Ok(scratch)
    }

    /// The address of the symmetric `addr` + `offset` bytes on every team member, as this GPU
    /// sees it (`nvshmem_ptr`), in team-index order; refused unless every member is
    /// peer-accessible.
    fn peers(&self, call: &'static str, addr: u64, offset: u64) -> Result<Peers> {
        if self.n_pes > MAX_PEERS {
            return Err(Error::Unsupported {
                call,
                what: format!(
                    "the peer kernels read at most {MAX_PEERS} PEs; the team has {}",
                    self.n_pes
                ),
            });
        }
        let mut ptrs = [0u64; MAX_PEERS];
        for (i, slot) in ptrs.iter_mut().enumerate().take(self.n_pes) {
            let w = self.world_pe(call, "team", i)?;
            // SAFETY: `addr` is a symmetric address of this runtime's heap and `w` a valid
            // world PE; nvshmem_ptr only looks the mapping up.
            let p = unsafe { (self.rt.inner.lib.nvshmem_ptr)(addr as *const _, w) };
            if p.is_null() {
                return Err(Error::Unsupported {
                    call,
                    what: format!(
                        "reductions of this type run in this crate's peer kernels, which need \
                         every PE of the team on one node with peer access (NVLink or PCIe \
                         P2P); team PE {i} (world PE {w}) is not reachable from this GPU"
                    ),
                });
            }
            *slot = p as u64 + offset;
        }
        Ok(Peers {
            ptrs,
            n: self.n_pes,
        })
    }

    /// `nvshmemx_barrier_on_stream` over the team.
    fn barrier_on(&self, cu: CUstream) -> Result<()> {
        // SAFETY: the team handle is valid while the team lives; the stream is checked and
        // current.
        status("nvshmemx_barrier_on_stream", unsafe {
            (self.rt.inner.lib.nvshmemx_barrier_on_stream)(self.handle, cu)
        })
    }

    pub(super) fn all_reduce_spans<T: Element>(
        &self,
        call: &'static str,
        src: Span,
        dst: Span,
        op: ReduceOp,
        stream: &CudaStream,
    ) -> Result<()> {
        check::same_shape(call, &src, &dst)?;
        let (plan, alg) = choose_reduce::<T>(self, call, op, T::reduce_fn)?;
        let (len, bytes, in_place) = (src.len, src.len * src.elem, src.ptr == dst.ptr);
        let (_, cu) = self.enter(call, stream)?;
        if len == 0 {
            return Ok(());
        }
        let need = scratch_needed(Reduction::AllReduce, plan, in_place, bytes);
        let scratch = self.prepare(call, &alg, need, stream)?;
        match alg {
            // SAFETY (all arms): src and dst are symmetric arrays of this runtime with `len`
            // elements each (checked), identical or disjoint (checked); `enter` made the
            // context current and checked the stream.
            Algorithm::Nvshmem(f) => unsafe {
                run_all_reduce::<T>(self, f, dst.ptr, src.ptr, len, cu)
            },
            Algorithm::SumThenDiv(f, t) => {
                // SAFETY: as above.
                unsafe { run_all_reduce::<T>(self, f, dst.ptr, src.ptr, len, cu)? };
                kernels::launch_map(
                    stream,
                    MapOp::Div,
                    t,
                    dst.ptr,
                    dst.ptr,
                    len,
                    self.n_pes as f64,
                )
            }
            Algorithm::ScaleThenSum(f, t, s) => {
                // The scaled input goes to dst (the input itself when in place, which the
                // caller gave up), and NVSHMEM sums dst in place: src stays as it was.
                kernels::launch_map(stream, MapOp::Mul, t, src.ptr, dst.ptr, len, s)?;
                // SAFETY: as above; source and dest the same array, which NVSHMEM allows.
                unsafe { run_all_reduce::<T>(self, f, dst.ptr, dst.ptr, len, cu) }
            }
            Algorithm::PeerKernel(kop, t, s) => {
                let peers = self.peers(call, src.ptr, 0)?;
                // In place, a PE writing its buffer would race with the others' reads of it:
                // reduce into the scratch and copy after everyone has read.
                let out = if in_place { scratch } else { dst.ptr };
                // The first barrier: every member's input is written; the second: nobody
                // reads an input any more, so it may be overwritten.
                between_barriers(
                    || self.barrier_on(cu),
                    || kernels::launch_reduce_peers(stream, kop, t, peers.get(), out, len, s),
                )?;
                if in_place {
                    // SAFETY: the scratch holds `bytes` (reserved, checked), dst too; the
                    // scratch is not reachable as a SymBuffer, so they are disjoint.
                    unsafe {
                        copy(
                            dst.ptr,
                            scratch,
                            bytes,
                            cu,
                            "cuMemcpyDtoDAsync (scratch to buf)",
                        )?
                    };
                }
                Ok(())
            }
        }
    }

    pub(super) fn reduce_spans<T: Element>(
        &self,
        call: &'static str,
        root: usize,
        src: Span,
        dst: Span,
        op: ReduceOp,
        stream: &CudaStream,
    ) -> Result<()> {
        check::root(call, root, self.n_pes)?;
        check::same_shape(call, &src, &dst)?;
        let (plan, alg) = choose_reduce::<T>(self, call, op, T::reduce_fn)?;
        let (len, bytes) = (src.len, src.len * src.elem);
        let need = scratch_needed(Reduction::Rooted, plan, src.ptr == dst.ptr, bytes);
        if need > 0 {
            // Refused before `enter`, as before: a missing scratch is the commonest mistake.
            self.rt.scratch_ptr(call, need)?;
        }
        let (me, cu) = self.enter(call, stream)?;
        if len == 0 {
            return Ok(());
        }
        let scratch = self.prepare(call, &alg, need, stream)?;
        let to_root = |cu| {
            // SAFETY: dst holds `bytes` (checked), the scratch too (reserved, checked); the
            // scratch is not reachable as a SymBuffer, so they are disjoint; queued on the
            // stream after the reduction into the scratch.
            unsafe {
                copy(
                    dst.ptr,
                    scratch,
                    bytes,
                    cu,
                    "cuMemcpyDtoDAsync (reduce result to root)",
                )
            }
        };
        match alg {
            // NVSHMEM writes its result on every PE: into the scratch, so non-root outputs
            // stay untouched, and the root takes it out.
            Algorithm::Nvshmem(f) => {
                // SAFETY: the scratch is symmetric (allocated collectively) with at least
                // `bytes`; src is a symmetric array of `len` elements, disjoint from the
                // scratch (the scratch is not reachable as a SymBuffer).
                unsafe { run_all_reduce::<T>(self, f, scratch, src.ptr, len, cu)? };
                if me == root {
                    to_root(cu)?;
                }
                Ok(())
            }
            Algorithm::SumThenDiv(f, t) => {
                // SAFETY: as above.
                unsafe { run_all_reduce::<T>(self, f, scratch, src.ptr, len, cu)? };
                if me == root {
                    // The division is the copy out.
                    let n = self.n_pes as f64;
                    kernels::launch_map(stream, MapOp::Div, t, scratch, dst.ptr, len, n)?;
                }
                Ok(())
            }
            Algorithm::ScaleThenSum(f, t, s) => {
                // The scaled input goes to the scratch, which NVSHMEM then sums in place; the
                // caller's src and non-root dst are never written.
                kernels::launch_map(stream, MapOp::Mul, t, src.ptr, scratch, len, s)?;
                // SAFETY: as above, source and dest the same symmetric scratch.
                unsafe { run_all_reduce::<T>(self, f, scratch, scratch, len, cu)? };
                if me == root {
                    to_root(cu)?;
                }
                Ok(())
            }
            Algorithm::PeerKernel(kop, t, s) => {
                // Only the root computes, straight into its dst (which may be its src: each
                // element is read before it is written, and no other PE reads the root's
                // dst); the barriers as in all-reduce.
                let peers = self.peers(call, src.ptr, 0)?;
                between_barriers(
                    || self.barrier_on(cu),
                    || {
                        if me != root {
                            return Ok(());
                        }
                        kernels::launch_reduce_peers(stream, kop, t, peers.get(), dst.ptr, len, s)
                    },
                )
            }
        }
    }

    pub(super) fn broadcast_spans(
        &self,
        call: &'static str,
        root: usize,
        src: Span,
        dst: Span,
        stream: &CudaStream,
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
        stream: &CudaStream,
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
        stream: &CudaStream,
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
        stream: &CudaStream,
    ) -> Result<()> {
        let me = self.require_member(call)?;
        let count = check::reduce_scatter(call, self.n_pes, me, &src, &dst)?;
        if count > T::MAX_NVSHMEM_COUNT {
            return self.reduce_scatter_by_all_reduce::<T>(call, me, count, src, dst, op, stream);
        }
        let (plan, alg) = choose_reduce::<T>(self, call, op, T::reducescatter_fn)?;
        // The only overlap the checks let through is the in-place block.
        let in_place = src.overlaps(&dst);
        let need = scratch_needed(Reduction::ReduceScatter, plan, in_place, src.len * src.elem);
        let (_, cu) = self.enter(call, stream)?;
        if count == 0 {
            return Ok(());
        }
        let scratch = self.prepare(call, &alg, need, stream)?;
        match alg {
            // SAFETY (NVSHMEM arms): src holds n_pes blocks of dst's `count` elements
            // (checked); dst is disjoint from src or exactly this PE's block (checked).
            Algorithm::Nvshmem(f) => unsafe {
                run_reduce_scatter::<T>(self, f, dst.ptr, src.ptr, count, cu)
            },
            Algorithm::SumThenDiv(f, t) => {
                // SAFETY: as above.
                unsafe { run_reduce_scatter::<T>(self, f, dst.ptr, src.ptr, count, cu)? };
                let n = self.n_pes as f64;
                kernels::launch_map(stream, MapOp::Div, t, dst.ptr, dst.ptr, count, n)
            }
            Algorithm::ScaleThenSum(f, t, s) => {
                // All n_pes blocks are scaled into the scratch (the caller's src is left as
                // it was), and NVSHMEM reduce-scatters from there.
                kernels::launch_map(stream, MapOp::Mul, t, src.ptr, scratch, src.len, s)?;
                // SAFETY: the scratch is symmetric with src's bytes (reserved, checked) and
                // disjoint from dst (not reachable as a SymBuffer).
                unsafe { run_reduce_scatter::<T>(self, f, dst.ptr, scratch, count, cu) }
            }
            Algorithm::PeerKernel(kop, t, s) => {
                // This PE reduces its block from every member's src. In place, dst is this
                // PE's block of its own src, which no other PE reads: no race.
                let block = (me * count * src.elem) as u64;
                let peers = self.peers(call, src.ptr, block)?;
                between_barriers(
                    || self.barrier_on(cu),
                    || kernels::launch_reduce_peers(stream, kop, t, peers.get(), dst.ptr, count, s),
                )
            }
        }
    }

    /// Reduce-scatter for blocks longer than one NVSHMEM call of `T` may take
    /// ([`MAX_NVSHMEM_COUNT`](super::NvshmemTyped::MAX_NVSHMEM_COUNT)): an all-reduce of the whole
    /// input into the scratch (chunked like any all-reduce), of which this PE keeps its
    /// block. It does `n_pes` times the arithmetic of a reduce-scatter and needs the scratch
    /// of `src`'s bytes; in place, this PE's block is written only after the all-reduce,
    /// which NVSHMEM completes before any PE may reuse its input.
    #[allow(clippy::too_many_arguments)]
    fn reduce_scatter_by_all_reduce<T: Element>(
        &self,
        call: &'static str,
        me: usize,
        count: usize,
        src: Span,
        dst: Span,
        op: ReduceOp,
        stream: &CudaStream,
    ) -> Result<()> {
        let (_, alg) = choose_reduce::<T>(self, call, op, T::reduce_fn)?;
        let (len, bytes) = (src.len, src.len * src.elem);
        let (_, cu) = self.enter(call, stream)?;
        let scratch = self.prepare(call, &alg, bytes, stream)?;
        let mine = scratch + (me * count * src.elem) as u64;
        let keep = |cu| {
            // SAFETY: `mine` is this PE's block of the scratch (`count` elements of the
            // `bytes` reserved and checked), dst holds `count` (checked); the scratch is not
            // reachable as a SymBuffer, so they are disjoint.
            unsafe {
                copy(
                    dst.ptr,
                    mine,
                    count * src.elem,
                    cu,
                    "cuMemcpyDtoDAsync (own block)",
                )
            }
        };
        // SAFETY (every NVSHMEM call): the scratch is symmetric with `bytes` (reserved,
        // checked); src is a symmetric array of `len` elements, disjoint from the scratch.
        match alg {
            Algorithm::Nvshmem(f) => {
                unsafe { run_all_reduce::<T>(self, f, scratch, src.ptr, len, cu)? };
                keep(cu)
            }
            Algorithm::SumThenDiv(f, t) => {
                unsafe { run_all_reduce::<T>(self, f, scratch, src.ptr, len, cu)? };
                let n = self.n_pes as f64;
                kernels::launch_map(stream, MapOp::Div, t, mine, dst.ptr, count, n)
            }
            Algorithm::ScaleThenSum(f, t, s) => {
                kernels::launch_map(stream, MapOp::Mul, t, src.ptr, scratch, len, s)?;
                unsafe { run_all_reduce::<T>(self, f, scratch, scratch, len, cu)? };
                keep(cu)
            }
            // Types with a cap are NVSHMEM's own; the peer kernels take any length.
            Algorithm::PeerKernel(..) => Err(Error::Unsupported {
                call,
                what: format!(
                    "{op} on {}: no algorithm for {count} elements a block",
                    T::NAME
                ),
            }),
        }
    }

    /// The world PE number of team PE `pe` (`arg` names what `pe` came from, for the error).
    fn world_pe(&self, call: &'static str, arg: &'static str, pe: usize) -> Result<c_int> {
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
                arg,
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
        stream: &CudaStream,
    ) -> Result<()> {
        self.rooted_blocks(Rooted::Gather, call, root, src, dst, stream)
    }

    pub(super) fn scatter_spans(
        &self,
        call: &'static str,
        root: usize,
        src: Span,
        dst: Span,
        stream: &CudaStream,
    ) -> Result<()> {
        self.rooted_blocks(Rooted::Scatter, call, root, src, dst, stream)
    }

    /// Gather and scatter, which NVSHMEM lacks, as gets between two team syncs: the root gets
    /// every member's block (gather), each member gets its block from the root (scatter). The
    /// PE whose buffer receives a block is the one whose stream copies it, so the data is in
    /// place when that stream moves on, whatever the peers' streams do; the first sync keeps
    /// the gets from reading inputs not yet written, the second keeps the PEs read from from
    /// overwriting them while the gets run. The arrays are the same symmetric arrays on every
    /// PE (as for every collective), which is how the reader knows the peer's address.
    fn rooted_blocks(
        &self,
        dir: Rooted,
        call: &'static str,
        root: usize,
        src: Span,
        dst: Span,
        stream: &CudaStream,
    ) -> Result<()> {
        let me = self.require_member(call)?;
        let count = match dir {
            Rooted::Gather => check::gather(call, self.n_pes, root, me, &src, &dst)?,
            Rooted::Scatter => check::scatter(call, self.n_pes, root, me, &src, &dst)?,
        };
        let (_, cu) = self.enter(call, stream)?;
        if count == 0 {
            return Ok(());
        }
        // (to, from on the peer, the peer's world PE) for each get this PE makes.
        let mut gets = Vec::new();
        match dir {
            Rooted::Gather if me == root => {
                let in_place = src.ptr == dst.at(me * count);
                for k in 0..self.n_pes {
                    if k == me && in_place {
                        continue; // the root's own block is already where it belongs
                    }
                    let from = if in_place { dst.at(k * count) } else { src.ptr };
                    gets.push((dst.at(k * count), from, self.world_pe(call, "team PE", k)?));
                }
            }
            Rooted::Gather => {}
            Rooted::Scatter => {
                let from = src.at(me * count);
                if !(me == root && dst.ptr == from) {
                    gets.push((dst.ptr, from, self.world_pe(call, "root", root)?));
                }
            }
        }
        let lib = self.rt.inner.lib;
        // SAFETY: team handle valid, stream checked and current.
        let sync = || {
            status("nvshmemx_team_sync_on_stream", unsafe {
                (lib.nvshmemx_team_sync_on_stream)(self.handle, cu)
            })
        };
        sync()?;
        for (to, from, pe) in gets {
            // SAFETY: `to` is `count` elements of this PE's symmetric dst and `from` as many of
            // the symmetric input on world PE `pe` (lengths checked above, PE translated).
            unsafe {
                (lib.nvshmemx_getmem_on_stream)(
                    to as *mut _,
                    from as *const _,
                    count * src.elem,
                    pe,
                    cu,
                )
            };
        }
        sync()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;

    /// The steps one PE queues: "B" a barrier, "K" the body.
    fn run(body_fails: bool) -> (Vec<&'static str>, Result<()>) {
        let log = RefCell::new(Vec::new());
        let r = between_barriers(
            || {
                log.borrow_mut().push("B");
                Ok(())
            },
            || {
                log.borrow_mut().push("K");
                if body_fails {
                    Err(Error::arg("reduce", "op", "launch failed"))
                } else {
                    Ok(())
                }
            },
        );
        (log.into_inner(), r)
    }

    #[test]
    fn closing_barrier_is_queued_even_when_the_body_fails() {
        // A PE whose launch fails (the root of an fp8 reduce is the only one launching) still
        // makes both barriers, as the PEs that succeed do, and reports the failure.
        let (ok_steps, ok) = run(false);
        let (bad_steps, bad) = run(true);
        assert!(ok.is_ok());
        assert_eq!(ok_steps, ["B", "K", "B"]);
        assert_eq!(bad_steps, ok_steps);
        assert!(bad.unwrap_err().to_string().contains("launch failed"));
    }

    #[test]
    fn a_failed_opening_barrier_stops_before_the_body() {
        let steps = RefCell::new(Vec::new());
        let r = between_barriers(
            || {
                steps.borrow_mut().push("B");
                Err(Error::arg("barrier", "team", "refused"))
            },
            || {
                steps.borrow_mut().push("K");
                Ok(())
            },
        );
        assert!(r.is_err());
        assert_eq!(steps.into_inner(), ["B"]);
    }
}
