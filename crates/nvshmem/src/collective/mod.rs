//! Host-initiated, stream-ordered collectives over symmetric arrays.
//!
//! Every collective is a method on [`Team`], generic over the [`Element`] type, taking
//! symmetric inputs ([`SymBuffer`]), symmetric outputs ([`SymBufferMut`]) and a cudarc
//! [`CudaStream`]. It is *queued* on the stream, like a kernel launch: the call returns at
//! once, nothing synchronises, and it can be captured into a CUDA graph. Every PE of the team
//! must make the same call, with the same symmetric arrays (so of the same lengths and
//! shapes), in the same order.
//!
//! Every argument is checked before anything is queued; a bad one is an [`Error`] naming the
//! argument and the numbers, and leaves the stream untouched (so a PE that gets an error must
//! not expect the others to complete the collective: they will be refused alike, since the
//! checks depend only on what every PE passes alike).
//!
//! | call | NVSHMEM | in place |
//! |---|---|---|
//! | [`Team::all_reduce`] | `nvshmemx_<T>_<op>_reduce_on_stream` | [`Team::all_reduce_in_place`] |
//! | [`Team::reduce`] (to a root) | all-reduce into the runtime's scratch, copy on the root | [`Team::reduce_in_place`] |
//! | [`Team::broadcast`] | `nvshmemx_broadcastmem_on_stream` | [`Team::broadcast_in_place`] |
//! | [`Team::fcollect`] (all-gather) | `nvshmemx_fcollectmem_on_stream` | [`Team::fcollect_in_place`] |
//! | [`Team::alltoall`] | `nvshmemx_alltoallmem_on_stream` | never |
//! | [`Team::reduce_scatter`] | `nvshmemx_<T>_<op>_reducescatter_on_stream` | [`Team::reduce_scatter_in_place`] |
//! | [`Team::gather`], [`Team::scatter`] | gets on stream between two team syncs (the receiving PE copies) | [`Team::gather_in_place`], [`Team::scatter_in_place`] |
//! | [`Team::barrier`], [`Team::sync`], [`Runtime::barrier_all`], [`Runtime::sync_all`] | `nvshmemx_*barrier*/*sync*_on_stream` | |
//!
//! Each collective goes through one internal function that chooses an algorithm per call,
//! so the public API does not change with the algorithm.
//!
//! # Reductions
//!
//! [`Team::all_reduce`], [`Team::reduce`] and [`Team::reduce_scatter`] (and their in-place
//! forms) take every operator [`ReduceOp::supports`] for the element type:
//!
//! | element | operators | how |
//! |---|---|---|
//! | `f32` `f64` `f16` `bf16`, integers | sum, prod, min, max (and, or, xor: integers) | NVSHMEM's typed reduction |
//! | the same | avg | NVSHMEM's sum, then a kernel divides by the team size (integers: the sum wraps in the type, then truncates toward zero, as NCCL) |
//! | the same | premul_sum(s) | a kernel scales the input (into the output or the scratch, never over the input), then NVSHMEM's sum; integers need a whole `s` |
//! | [`Bool8`](crate::element_ext::Bool8) | and, or, min (= and), max (= or) | NVSHMEM's `uint8` min / max, right for any non-zero byte as true |
//! | [`F8E4M3`](crate::element_ext::F8E4M3), [`F8E5M2`](crate::element_ext::F8E5M2) | sum, min, max, avg, premul_sum(s) | this crate's kernel reading every member's input through peer-mapped memory, between two team barriers, computing in `f32` with one rounding |
//!
//! The kernels are compiled with NVRTC on their first use in a process (a
//! one-off cost per kernel; nothing synchronises): make one call before capturing a graph with
//! `CU_STREAM_CAPTURE_MODE_GLOBAL`, which may refuse loading a module during capture. fp8
//! reductions need every PE of the team on one node with peer access (else
//! [`Error::Unsupported`]).
//!
//! Collective scratch ([`Runtime::reserve_scratch`]) needed per call, with `B` the bytes of
//! the input array:
//!
//! | call | scratch |
//! |---|---|
//! | [`Team::reduce`], [`Team::reduce_in_place`] | `B` (none for fp8) |
//! | [`Team::reduce_scatter`], [`Team::reduce_scatter_in_place`] with `premul_sum` | `B` (all `n_pes` blocks; none for fp8) |
//! | [`Team::all_reduce_in_place`] on fp8 | `B` |
//! | [`Team::reduce_scatter`], [`Team::reduce_scatter_in_place`] on `i16`/`u16` with blocks over 1 MiB | `B` (NVSHMEM 3.4.5's 16-bit integer reductions fail above a few MiB a call: all-reduces of these types run in 1 MiB calls, and such reduce-scatters as an all-reduce into the scratch) |
//! | anything else | none |
//!
//! Calls that use the scratch share it: do not run two at once on different streams.
//!
//! # Shapes
//!
//! A [`SymArray`](crate::SymArray) may carry a shape ([`SymArray::with_shape`](crate::SymArray::with_shape)),
//! and the collectives then check it as TensorRT's DistCollective does, before anything is
//! queued. With `src` of shape `[d0, d1, ..]` and a team of `n` PEs:
//!
//! | call | `dst` | `d0` |
//! |---|---|---|
//! | [`Team::all_reduce`], [`Team::reduce`], [`Team::broadcast`] | `[d0, d1, ..]` | any |
//! | [`Team::fcollect`], [`Team::gather`] | `[n * d0, d1, ..]` (concatenated along the leading dimension) | any |
//! | [`Team::reduce_scatter`], [`Team::scatter`] | `[d0 / n, d1, ..]` (split along the leading dimension) | a multiple of `n` |
//! | [`Team::alltoall`] | `[d0, d1, ..]` | a multiple of `n` |
//!
//! The in-place forms of fcollect, gather, reduce-scatter and scatter need their buffer's
//! leading dimension to be a multiple of `n` (one block of whole rows per PE). A broken rule
//! is [`Error::InvalidArgument`] naming the argument, the shapes and the team size.
//!
//! Where only one buffer carries a shape, the other is a flat run: the element counts are
//! checked as for unshaped arrays, and the shaped buffer keeps only its own rule (a leading
//! dimension that divides by `n` where the call cuts it into one block per PE: `dst` of
//! fcollect and gather, `src` of reduce-scatter and scatter, either of alltoall). Views
//! carry no shape. Without shapes nothing changes: only element counts are checked. Every
//! PE must give its arrays the same shapes, as it gives them the same lengths.
//!
//! ```no_run
//! # use nvshmem::Runtime;
//! # let rt = Runtime::init()?; let stream = rt.stream().clone(); let team = rt.world();
//! let n = team.n_pes();
//! let src = rt.alloc_zeroed::<f32>(2 * 3)?.with_shape(&[2, 3])?;
//! let mut dst = rt.alloc_zeroed::<f32>(n * 2 * 3)?.with_shape(&[n * 2, 3])?;
//! team.fcollect(&src, &mut dst, &stream)?;
//! // Three rows do not split over two PEs:
//! let rows = rt.alloc_zeroed::<f32>(3 * 4)?.with_shape(&[3, 4])?;
//! if n == 2 {
//!     let mut out = rt.alloc_zeroed::<f32>(6)?;
//!     assert!(team.reduce_scatter(&rows, &mut out, nvshmem::ReduceOp::Sum, &stream).is_err());
//! }
//! # Ok::<(), nvshmem::Error>(())
//! ```
//!
//! ```no_run
//! use nvshmem::{ReduceOp, Runtime};
//! let rt = Runtime::init()?;
//! let stream = rt.context().new_stream().unwrap();
//! let world = rt.world();
//! let src = rt.alloc_from(&[rt.my_pe() as f32; 1024])?;
//! let mut dst = rt.alloc_zeroed::<f32>(1024)?;
//! world.all_reduce(&src, &mut dst, ReduceOp::Sum, &stream)?;
//! stream.synchronize().unwrap();
//! # Ok::<(), nvshmem::Error>(())
//! ```
mod check;
mod dispatch;
mod op;
mod plan;
mod scratch;
mod table;

pub use op::ReduceOp;
pub(crate) use scratch::Scratch;
pub(crate) use table::NvshmemTyped;

use cudarc::driver::{sys::CUstream, CudaStream};

use crate::{Element, Error, Result, Runtime, SymBuffer, SymBufferMut, Team};
use check::{shape::Rule, Span};

fn span<T: Element>(b: &impl SymBuffer<T>) -> Span {
    Span::new(b.sym_ptr(), b.sym_len(), std::mem::size_of::<T>())
}

impl Runtime {
    /// Refuses memory of another runtime (a stale array from a runtime finalised earlier).
    pub(crate) fn check_same(
        &self,
        call: &'static str,
        arg: &'static str,
        other: &Runtime,
    ) -> Result<()> {
        if std::sync::Arc::ptr_eq(&self.inner, &other.inner) {
            Ok(())
        } else {
            Err(Error::arg(call, arg, "belongs to another NVSHMEM runtime"))
        }
    }

    /// Checks that `stream` is on this runtime's GPU context and makes that context current;
    /// returns the raw stream.
    pub(crate) fn enter(&self, call: &'static str, stream: &CudaStream) -> Result<CUstream> {
        if stream.context().as_ref() != self.inner.ctx.as_ref() {
            return Err(Error::arg(
                call,
                "stream",
                format_args!(
                    "belongs to CUDA device {} but this PE's NVSHMEM runs on device {}",
                    stream.context().ordinal(),
                    self.inner.info.device
                ),
            ));
        }
        self.inner.bind()?;
        Ok(stream.cu_stream())
    }
}

impl Team {
    /// This PE's index in the team, the raw stream, with the stream's context current.
    fn enter(&self, call: &'static str, stream: &CudaStream) -> Result<(usize, CUstream)> {
        let me = self.require_member(call)?;
        let cu = self.rt.enter(call, stream)?;
        Ok((me, cu))
    }

    /// Both buffers of this runtime, and their shapes (if any) related by `rule`.
    fn check_buffers<T: Element>(
        &self,
        call: &'static str,
        rule: Rule,
        src: &impl SymBuffer<T>,
        dst: &impl SymBuffer<T>,
    ) -> Result<()> {
        self.rt.check_same(call, "src", src.sym_runtime())?;
        self.rt.check_same(call, "dst", dst.sym_runtime())?;
        check::shape::pair(call, rule, self.n_pes, src.sym_shape(), dst.sym_shape())
    }

    /// All-reduce: every PE's `dst` gets the element-wise reduction of all PEs' `src`
    /// (NVSHMEM's "reduce"). `src` and `dst` have equal lengths and do not overlap (see
    /// [`Team::all_reduce_in_place`]).
    ///
    /// Every operator [`ReduceOp::supports`] for `T` (module docs, "Reductions"); an operator
    /// the type does not define, or a `premul_sum` scale that is not a whole number for an
    /// integer type, is [`Error::InvalidArgument`] naming `op`. Needs no scratch. `src` is
    /// never written (`premul_sum` scales into `dst`, then sums there).
    ///
    /// ```no_run
    /// # use nvshmem::{ReduceOp, Runtime};
    /// # let rt = Runtime::init()?; let stream = rt.stream().clone(); let team = rt.world();
    /// let src = rt.alloc_from(&[1u32, 2, 3])?;
    /// let mut dst = rt.alloc_zeroed::<u32>(3)?;
    /// team.all_reduce(&src, &mut dst, ReduceOp::Max, &stream)?;
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    pub fn all_reduce<T: Element>(
        &self,
        src: &impl SymBuffer<T>,
        dst: &mut impl SymBufferMut<T>,
        op: ReduceOp,
        stream: &CudaStream,
    ) -> Result<()> {
        self.check_buffers("all_reduce", Rule::Same, src, dst)?;
        self.all_reduce_spans::<T>("all_reduce", span(src), span(dst), op, stream)
    }

    /// All-reduce in place: `buf` is both input and output. Operators as
    /// [`Team::all_reduce`]; on fp8 it needs `buf.len()` bytes of collective scratch
    /// ([`Runtime::reserve_scratch`]: the result is reduced there while the other PEs still
    /// read `buf`, then copied back), else [`Error::ScratchTooSmall`].
    ///
    /// ```no_run
    /// # use nvshmem::{ReduceOp, Runtime};
    /// # let rt = Runtime::init()?; let stream = rt.stream().clone(); let team = rt.world();
    /// let mut grads = rt.alloc_from(&[0.5f32; 256])?;
    /// team.all_reduce_in_place(&mut grads, ReduceOp::Sum, &stream)?;
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    pub fn all_reduce_in_place<T: Element>(
        &self,
        buf: &mut impl SymBufferMut<T>,
        op: ReduceOp,
        stream: &CudaStream,
    ) -> Result<()> {
        self.rt
            .check_same("all_reduce_in_place", "buf", buf.sym_runtime())?;
        let s = span(buf);
        self.all_reduce_spans::<T>("all_reduce_in_place", s, s, op, stream)
    }

    /// Reduce to `root` (a PE index in the team): the root's `dst` gets the reduction of all
    /// PEs' `src`; the other PEs' `dst` is left untouched (as NCCL's reduce).
    ///
    /// NVSHMEM has no rooted reduction: the result is reduced into the runtime's collective
    /// scratch, then copied to `dst` on the root (for `avg`, divided into it; `premul_sum`
    /// scales `src` into the scratch and sums it there in place, so it needs no more). Reserve
    /// the scratch first, collectively, with [`Runtime::reserve_scratch`]
    /// (`len * size_of::<T>()` bytes, else [`Error::ScratchTooSmall`]); fp8 needs none (the
    /// root reduces the peers' `src` straight into its `dst`). Calls that use the scratch
    /// share it, so do not run two at once on different streams. Operators as
    /// [`Team::all_reduce`].
    ///
    /// ```no_run
    /// # use nvshmem::{ReduceOp, Runtime};
    /// # let rt = Runtime::init()?; let stream = rt.stream().clone(); let team = rt.world();
    /// rt.reserve_scratch(1 << 20)?;
    /// let src = rt.alloc_from(&[1.0f64; 64])?;
    /// let mut dst = rt.alloc_zeroed::<f64>(64)?;
    /// team.reduce(0, &src, &mut dst, ReduceOp::Sum, &stream)?;
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    pub fn reduce<T: Element>(
        &self,
        root: usize,
        src: &impl SymBuffer<T>,
        dst: &mut impl SymBufferMut<T>,
        op: ReduceOp,
        stream: &CudaStream,
    ) -> Result<()> {
        self.check_buffers("reduce", Rule::Same, src, dst)?;
        self.reduce_spans::<T>("reduce", root, span(src), span(dst), op, stream)
    }

    /// Reduce to `root` in place: the root's `buf` gets the reduction of all PEs' `buf`; the
    /// other PEs' `buf` is left untouched. Uses the scratch as [`Team::reduce`] does
    /// (`buf.len() * size_of::<T>()` bytes, none for fp8); operators as [`Team::all_reduce`].
    ///
    /// ```no_run
    /// # use nvshmem::{ReduceOp, Runtime};
    /// # let rt = Runtime::init()?; let stream = rt.stream().clone(); let team = rt.world();
    /// # rt.reserve_scratch(1 << 20)?;
    /// let mut buf = rt.alloc_from(&[3i64; 16])?;
    /// team.reduce_in_place(0, &mut buf, ReduceOp::Min, &stream)?;
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    pub fn reduce_in_place<T: Element>(
        &self,
        root: usize,
        buf: &mut impl SymBufferMut<T>,
        op: ReduceOp,
        stream: &CudaStream,
    ) -> Result<()> {
        self.rt
            .check_same("reduce_in_place", "buf", buf.sym_runtime())?;
        let s = span(buf);
        self.reduce_spans::<T>("reduce_in_place", root, s, s, op, stream)
    }

    /// Broadcast from `root` (a PE index in the team): every PE's `dst` gets the root's `src`.
    /// `src` matters only on the root but must be symmetric and as long as `dst` everywhere.
    ///
    /// ```no_run
    /// # use nvshmem::Runtime;
    /// # let rt = Runtime::init()?; let stream = rt.stream().clone(); let team = rt.world();
    /// let src = rt.alloc_from(&[7u8; 100])?;
    /// let mut dst = rt.alloc_zeroed::<u8>(100)?;
    /// team.broadcast(0, &src, &mut dst, &stream)?;
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    pub fn broadcast<T: Element>(
        &self,
        root: usize,
        src: &impl SymBuffer<T>,
        dst: &mut impl SymBufferMut<T>,
        stream: &CudaStream,
    ) -> Result<()> {
        self.check_buffers("broadcast", Rule::Same, src, dst)?;
        self.broadcast_spans("broadcast", root, span(src), span(dst), stream)
    }

    /// Broadcast in place: every PE's `buf` gets the root's `buf`.
    ///
    /// ```no_run
    /// # use nvshmem::Runtime;
    /// # let rt = Runtime::init()?; let stream = rt.stream().clone(); let team = rt.world();
    /// let mut weights = rt.alloc_zeroed::<half::bf16>(4096)?;
    /// team.broadcast_in_place(0, &mut weights, &stream)?;
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    pub fn broadcast_in_place<T: Element>(
        &self,
        root: usize,
        buf: &mut impl SymBufferMut<T>,
        stream: &CudaStream,
    ) -> Result<()> {
        self.rt
            .check_same("broadcast_in_place", "buf", buf.sym_runtime())?;
        let s = span(buf);
        self.broadcast_spans("broadcast_in_place", root, s, s, stream)
    }

    /// All-gather (NVSHMEM's fcollect): `dst` (`n_pes * src.len()` elements) gets every PE's
    /// `src`, ordered by PE index in the team.
    ///
    /// ```no_run
    /// # use nvshmem::Runtime;
    /// # let rt = Runtime::init()?; let stream = rt.stream().clone(); let team = rt.world();
    /// let src = rt.alloc_from(&[team.my_pe().unwrap() as i32; 8])?;
    /// let mut dst = rt.alloc_zeroed::<i32>(8 * team.n_pes())?;
    /// team.fcollect(&src, &mut dst, &stream)?;
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    pub fn fcollect<T: Element>(
        &self,
        src: &impl SymBuffer<T>,
        dst: &mut impl SymBufferMut<T>,
        stream: &CudaStream,
    ) -> Result<()> {
        self.check_buffers("fcollect", Rule::Concat, src, dst)?;
        self.fcollect_spans("fcollect", span(src), span(dst), stream)
    }

    /// All-gather in place: `buf` holds `n_pes` blocks; this PE's block (index
    /// `my_pe`) is its input, and every block is filled from its PE.
    ///
    /// ```no_run
    /// # use nvshmem::Runtime;
    /// # let rt = Runtime::init()?; let stream = rt.stream().clone(); let team = rt.world();
    /// let mut buf = rt.alloc_zeroed::<f32>(4 * team.n_pes())?;
    /// team.fcollect_in_place(&mut buf, &stream)?;
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    pub fn fcollect_in_place<T: Element>(
        &self,
        buf: &mut impl SymBufferMut<T>,
        stream: &CudaStream,
    ) -> Result<()> {
        const CALL: &str = "fcollect_in_place";
        let (all, mine) = self.own_block(CALL, buf)?;
        self.fcollect_spans(CALL, mine, all, stream)
    }

    /// All-to-all: block `j` of this PE's `src` goes to block `i` (this PE's index) of PE
    /// `j`'s `dst`. `src` and `dst` have equal lengths, a multiple of the team size, and do
    /// not overlap.
    ///
    /// ```no_run
    /// # use nvshmem::Runtime;
    /// # let rt = Runtime::init()?; let stream = rt.stream().clone(); let team = rt.world();
    /// let src = rt.alloc_zeroed::<u16>(32 * team.n_pes())?;
    /// let mut dst = rt.alloc_zeroed::<u16>(32 * team.n_pes())?;
    /// team.alltoall(&src, &mut dst, &stream)?;
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    pub fn alltoall<T: Element>(
        &self,
        src: &impl SymBuffer<T>,
        dst: &mut impl SymBufferMut<T>,
        stream: &CudaStream,
    ) -> Result<()> {
        self.check_buffers("alltoall", Rule::Exchange, src, dst)?;
        self.alltoall_spans("alltoall", span(src), span(dst), stream)
    }

    /// Reduce-scatter: `src` holds `n_pes` blocks of `dst.len()`; team PE `i`'s `dst` gets
    /// the reduction over all PEs of block `i`.
    ///
    /// Operators as [`Team::all_reduce`]. `premul_sum` scales all of `src` into the
    /// collective scratch (so `src` is left as it was) and reduce-scatters from there: it
    /// needs `src.len() * size_of::<T>()` bytes reserved with [`Runtime::reserve_scratch`],
    /// else [`Error::ScratchTooSmall`] (not on fp8, whose kernel reads the peers' blocks
    /// directly). Other operators need no scratch.
    ///
    /// ```no_run
    /// # use nvshmem::{ReduceOp, Runtime};
    /// # let rt = Runtime::init()?; let stream = rt.stream().clone(); let team = rt.world();
    /// let src = rt.alloc_from(&vec![1.0f32; 16 * team.n_pes()])?;
    /// let mut dst = rt.alloc_zeroed::<f32>(16)?;
    /// team.reduce_scatter(&src, &mut dst, ReduceOp::Sum, &stream)?;
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    pub fn reduce_scatter<T: Element>(
        &self,
        src: &impl SymBuffer<T>,
        dst: &mut impl SymBufferMut<T>,
        op: ReduceOp,
        stream: &CudaStream,
    ) -> Result<()> {
        self.check_buffers("reduce_scatter", Rule::Split, src, dst)?;
        self.reduce_scatter_spans::<T>("reduce_scatter", span(src), span(dst), op, stream)
    }

    /// Reduce-scatter in place: `buf` holds `n_pes` blocks; this PE's block (index `my_pe`)
    /// gets the reduction of that block over all PEs. The other blocks are left as they were.
    /// Operators and scratch as [`Team::reduce_scatter`] (`premul_sum`: `buf.len() *
    /// size_of::<T>()` bytes).
    ///
    /// ```no_run
    /// # use nvshmem::{ReduceOp, Runtime};
    /// # let rt = Runtime::init()?; let stream = rt.stream().clone(); let team = rt.world();
    /// let mut buf = rt.alloc_from(&vec![2i32; 8 * team.n_pes()])?;
    /// team.reduce_scatter_in_place(&mut buf, ReduceOp::Sum, &stream)?;
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    pub fn reduce_scatter_in_place<T: Element>(
        &self,
        buf: &mut impl SymBufferMut<T>,
        op: ReduceOp,
        stream: &CudaStream,
    ) -> Result<()> {
        const CALL: &str = "reduce_scatter_in_place";
        let (all, mine) = self.own_block(CALL, buf)?;
        self.reduce_scatter_spans::<T>(CALL, all, mine, op, stream)
    }

    /// Gather to `root`: the root's `dst` (`n_pes * src.len()` elements) gets every PE's
    /// `src`, ordered by PE index in the team; the other PEs' `dst` is left untouched (it must
    /// still be symmetric and as long).
    ///
    /// ```no_run
    /// # use nvshmem::Runtime;
    /// # let rt = Runtime::init()?; let stream = rt.stream().clone(); let team = rt.world();
    /// let src = rt.alloc_from(&[1u64; 4])?;
    /// let mut dst = rt.alloc_zeroed::<u64>(4 * team.n_pes())?;
    /// team.gather(0, &src, &mut dst, &stream)?;
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    pub fn gather<T: Element>(
        &self,
        root: usize,
        src: &impl SymBuffer<T>,
        dst: &mut impl SymBufferMut<T>,
        stream: &CudaStream,
    ) -> Result<()> {
        self.check_buffers("gather", Rule::Concat, src, dst)?;
        self.gather_spans("gather", root, span(src), span(dst), stream)
    }

    /// Gather in place: `buf` holds `n_pes` blocks; each PE's input is its own block (index
    /// `my_pe`), and the root's `buf` receives them all. Only the root's `buf` is written.
    ///
    /// ```no_run
    /// # use nvshmem::Runtime;
    /// # let rt = Runtime::init()?; let stream = rt.stream().clone(); let team = rt.world();
    /// let mut buf = rt.alloc_zeroed::<f32>(4 * team.n_pes())?;
    /// team.gather_in_place(0, &mut buf, &stream)?;
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    pub fn gather_in_place<T: Element>(
        &self,
        root: usize,
        buf: &mut impl SymBufferMut<T>,
        stream: &CudaStream,
    ) -> Result<()> {
        const CALL: &str = "gather_in_place";
        let (all, mine) = self.own_block(CALL, buf)?;
        // Every PE's input is its own block: on the root that is the in-place block; on the
        // others `dst` is not written, so its overlap with `src` is harmless.
        self.gather_spans(CALL, root, mine, all, stream)
    }

    /// Scatter from `root`: block `i` of the root's `src` (`n_pes * dst.len()` elements)
    /// goes to team PE `i`'s `dst`. `src` is read only on the root.
    ///
    /// ```no_run
    /// # use nvshmem::Runtime;
    /// # let rt = Runtime::init()?; let stream = rt.stream().clone(); let team = rt.world();
    /// let src = rt.alloc_zeroed::<i8>(10 * team.n_pes())?;
    /// let mut dst = rt.alloc_zeroed::<i8>(10)?;
    /// team.scatter(0, &src, &mut dst, &stream)?;
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    pub fn scatter<T: Element>(
        &self,
        root: usize,
        src: &impl SymBuffer<T>,
        dst: &mut impl SymBufferMut<T>,
        stream: &CudaStream,
    ) -> Result<()> {
        self.check_buffers("scatter", Rule::Split, src, dst)?;
        self.scatter_spans("scatter", root, span(src), span(dst), stream)
    }

    /// Scatter in place: `buf` holds `n_pes` blocks; every PE's block `my_pe` gets block
    /// `my_pe` of the root's `buf`. The other blocks are left as they were.
    ///
    /// ```no_run
    /// # use nvshmem::Runtime;
    /// # let rt = Runtime::init()?; let stream = rt.stream().clone(); let team = rt.world();
    /// let mut buf = rt.alloc_zeroed::<f64>(2 * team.n_pes())?;
    /// team.scatter_in_place(0, &mut buf, &stream)?;
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    pub fn scatter_in_place<T: Element>(
        &self,
        root: usize,
        buf: &mut impl SymBufferMut<T>,
        stream: &CudaStream,
    ) -> Result<()> {
        const CALL: &str = "scatter_in_place";
        let (all, mine) = self.own_block(CALL, buf)?;
        self.scatter_spans(CALL, root, all, mine, stream)
    }

    /// A buffer split into one block per PE (of whole rows, if it carries a shape): the whole
    /// buffer, and this PE's block of it. The runtime check and the split shared by the
    /// in-place forms of fcollect, reduce-scatter, gather and scatter.
    fn own_block<T: Element>(
        &self,
        call: &'static str,
        buf: &impl SymBufferMut<T>,
    ) -> Result<(Span, Span)> {
        self.rt.check_same(call, "buf", buf.sym_runtime())?;
        check::shape::blocks(call, "buf", self.n_pes, buf.sym_shape())?;
        let me = self.require_member(call)?;
        let all = span(buf);
        if all.len.checked_rem(self.n_pes) != Some(0) {
            return Err(Error::arg(
                call,
                "buf",
                format_args!(
                    "has {} elements, not a multiple of the team's {} PEs (one equal block per PE)",
                    all.len, self.n_pes
                ),
            ));
        }
        let count = all.len / self.n_pes;
        Ok((all, Span::new(all.at(me * count), count, all.elem)))
    }

    /// Barrier over the team, on `stream`: work queued before it on every member's stream,
    /// and the RMA it issued, completes before work queued after it on any member's stream.
    ///
    /// ```no_run
    /// # let rt = nvshmem::Runtime::init()?; let stream = rt.stream().clone();
    /// rt.world().barrier(&stream)?;
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    pub fn barrier(&self, stream: &CudaStream) -> Result<()> {
        let (_, cu) = self.enter("barrier", stream)?;
        // SAFETY: the team handle is valid while the team (and so the runtime) lives; the
        // stream is live and on the runtime's context, which is current.
        let status = unsafe { (self.rt.inner.lib.nvshmemx_barrier_on_stream)(self.handle, cu) };
        crate::error::check("nvshmemx_barrier_on_stream", status)
    }

    /// Synchronisation over the team, on `stream`: like [`Team::barrier`] but without
    /// completing outstanding RMA (cheaper).
    ///
    /// ```no_run
    /// # let rt = nvshmem::Runtime::init()?; let stream = rt.stream().clone();
    /// rt.world().sync(&stream)?;
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    pub fn sync(&self, stream: &CudaStream) -> Result<()> {
        let (_, cu) = self.enter("sync", stream)?;
        // SAFETY: as in `barrier`.
        let status = unsafe { (self.rt.inner.lib.nvshmemx_team_sync_on_stream)(self.handle, cu) };
        crate::error::check("nvshmemx_team_sync_on_stream", status)
    }
}

impl Runtime {
    /// Barrier over all PEs on `stream` (`nvshmemx_barrier_all_on_stream`).
    ///
    /// ```no_run
    /// # let rt = nvshmem::Runtime::init()?;
    /// rt.barrier_all(rt.stream())?;
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    pub fn barrier_all(&self, stream: &CudaStream) -> Result<()> {
        let cu = self.enter("barrier_all", stream)?;
        // SAFETY: NVSHMEM is initialised (we hold the runtime); the stream is live and on the
        // runtime's context, which is current.
        unsafe { (self.inner.lib.nvshmemx_barrier_all_on_stream)(cu) };
        Ok(())
    }

    /// Synchronisation over all PEs on `stream` (`nvshmemx_sync_all_on_stream`).
    ///
    /// ```no_run
    /// # let rt = nvshmem::Runtime::init()?;
    /// rt.sync_all(rt.stream())?;
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    pub fn sync_all(&self, stream: &CudaStream) -> Result<()> {
        let cu = self.enter("sync_all", stream)?;
        // SAFETY: as in `barrier_all`.
        unsafe { (self.inner.lib.nvshmemx_sync_all_on_stream)(cu) };
        Ok(())
    }
}
