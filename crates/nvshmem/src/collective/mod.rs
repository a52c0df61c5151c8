//! Host-initiated, stream-ordered collectives over symmetric arrays.
//!
//! Every collective is a method on [`Team`], generic over the [`Element`] type, taking
//! symmetric inputs ([`SymBuffer`]), symmetric outputs ([`SymBufferMut`]) and a cudarc
//! [`CudaStream`]. It is *queued* on the stream, like a kernel launch: the call returns at
//! once, nothing synchronises, and it can be captured into a CUDA graph. Every PE of the team
//! must make the same call, with the same symmetric arrays (so of the same lengths and
//! shapes), in the same order.
//!
//! Every argument is checked before anything is queued; a bad one is an [`Error`](crate::Error) naming the
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
//! | [`Team::barrier`], [`Team::sync`], [`Runtime::barrier_all`](crate::Runtime::barrier_all), [`Runtime::sync_all`](crate::Runtime::sync_all) | `nvshmemx_*barrier*/*sync*_on_stream` | |
//!
//! Each collective goes through one internal function that chooses an algorithm per call,
//! so the public API does not change with the algorithm. A collective held as a value (a
//! [`CallKind`]: the collective, in place or not, its root and operator) is made by
//! [`Team::collective`] and prepared by [`Team::prepare_collective`], through the same path.
//!
//! On a team of one PE a call costs no more than the copy it needs: one device-to-device copy
//! of its bytes out of place, nothing in place (premul_sum, and every fp8 reduction, run the
//! scaling kernel instead, so the result is the other algorithms' to the bit); a barrier is
//! `nvshmemx_quiet_on_stream` (it still completes the PE's RMA), a sync nothing. Such calls
//! need no collective scratch.
//!
//! # Reductions
//!
//! [`Team::all_reduce`], [`Team::reduce`] and [`Team::reduce_scatter`] (and their in-place
//! forms) take every operator [`ReduceOp::supports`] for the element type. Each operator has
//! one meaning, whatever the size, the team and the algorithm that runs the call (chosen or
//! forced, called or prepared); an algorithm that could not give it refuses the call
//! ([`Error::AlgorithmRefused`](crate::Error::AlgorithmRefused) when forced):
//!
//! | operator | integers | floats |
//! |---|---|---|
//! | sum, prod | wrap modulo 2^bits | IEEE, in the accumulator (below) |
//! | premul_sum(s) | each input times `s` (a whole number), summed, modulo 2^bits | each input times `s` (one the accumulator holds), summed, in the accumulator |
//! | avg | the exact mean, truncated toward zero (no overflow, at 64 bits too) | the sum in the accumulator divided by the team size, rounded once |
//! | min, max | as the type compares (signed or not) | IEEE minNum / maxNum |
//! | and, or, xor | bitwise | |
//!
//! The accumulator is `f32` for `f16`, `bf16` and fp8 (rounded once into the type), and the
//! type itself for `f32` and `f64`: `bf16` has `f32`'s range, so a `bf16` sum or mean whose
//! `f32` sum passes `f32::MAX` is infinite, as an `f32` one is. Float sums may differ in their
//! last bits between algorithms (the order of summation is the algorithm's); NVSHMEM's own
//! sum and prod of `f16` and `bf16` round at each step in the type, where this crate's kernels
//! round once (the same for two PEs; for more, sums that are exact in the type agree).
//!
//! One difference in zeros: the `nvlink_lamport` algorithm (float reductions of the mid band:
//! by default, on two H100/H200, past LL's limit up to 2 MiB blocks, 1 MiB for reduce-scatter,
//! `Row::lamport` in the crossover table) reads every member's -0.0 as +0.0, since its receive
//! buffers use -0.0 as "not yet written". A zero result may so be +0.0 where another
//! algorithm gives -0.0 (a sum of -0.0s, a product with a -0.0 factor, min and max of zeros);
//! every other value is the same, and every PE gets the same bits. Its copies (broadcast,
//! fcollect, alltoall, gather, scatter) are bit for bit, -0.0 included.
//!
//! | element | operators | how |
//! |---|---|---|
//! | `f32` `f64` `f16` `bf16`, integers | sum, prod, min, max (and, or, xor: integers) | NVSHMEM's typed reduction, or this crate's kernels |
//! | the same | avg | this crate's kernels (integers sum in 128 bits), or NVSHMEM's sum of a wide form in the scratch: integers as pairs `(q, r)` with `x = q n + r` in 64 bits, 16-bit floats as `f32`; then a kernel divides and narrows (`f32` and `f64`: NVSHMEM's sum, then a kernel divides) |
//! | the same | premul_sum(s) | this crate's kernels, or a kernel scales the input into the scratch (16-bit floats widened to `f32`), NVSHMEM's sum from there (then narrowed); integers need a whole `s` |
//! | [`Bool8`](crate::element::Bool8) | and, or, min (= and), max (= or) | NVSHMEM's `uint8` min / max, right for any non-zero byte as true |
//! | [`F8E4M3`](crate::element::F8E4M3), [`F8E5M2`](crate::element::F8E5M2) | sum, min, max, avg, premul_sum(s) | this crate's kernels (through peer-mapped memory), computing in `f32` with one rounding; avg and premul_sum also on NVSHMEM's path, widened to `f32` |
//!
//! The kernels are compiled with NVRTC on their first use in a process (a
//! one-off cost per kernel; nothing synchronises): make one call before capturing a graph with
//! `CU_STREAM_CAPTURE_MODE_GLOBAL`, which may refuse loading a module during capture. fp8
//! sum, min and max need every PE of the team on one node with peer access (else
//! [`Error::Unsupported`](crate::Error::Unsupported)).
//!
//! # Collective scratch
//!
//! Some calls need collective scratch ([`Runtime::reserve_scratch`](crate::Runtime::reserve_scratch)),
//! and only when they run on NVSHMEM's path or on this crate's peer kernel: never on this
//! crate's NVLink kernels, which on a peer-mapped team run most calls. The automatic choice
//! never takes an algorithm that needs more scratch than is reserved while another that accepts
//! the call fits (every PE reserves alike, so every PE chooses alike): on a team the NVLink
//! kernels serve, no call needs scratch at any size unless an algorithm is forced. Elsewhere
//! (a team that is not peer-mapped, a team without a channel) NVSHMEM's path may be all there
//! is, so **a program that needs no scratch on one node can fail with
//! [`ScratchTooSmall`](crate::Error::ScratchTooSmall) on two**; a forced algorithm that needs
//! more than is reserved fails with it too. The NVLink kernels run a call when every member of
//! the team can load and store every other's memory (one node, NVLink or PCIe P2P), the team
//! has at most 8 PEs and got a channel when it was made (not when every channel was taken, see
//! [`RuntimeBuilder::channels`](crate::RuntimeBuilder::channels); [`Team::has_nvlink_kernels`]
//! says), and the kernels have the reduction. With `B` the bytes of the input array, and `W`
//! the bytes of its wide form (`16 / s × B` for integers of `s` bytes, `4 / s × B` for 16-bit
//! floats and fp8), NVSHMEM's path needs:
//!
//! | call | scratch |
//! |---|---|
//! | [`Team::reduce`], [`Team::reduce_in_place`] | `B`; `2 B` (plus 256) with `premul_sum` on `f32`, `f64`, integers |
//! | [`Team::all_reduce_in_place`], [`Team::all_reduce`] with `premul_sum` on `f32`, `f64`, integers | `B`: NVSHMEM reduces from a copy (its own kernels get a destination overlapping the source wrong from 3 PEs up: `tools/nvshmem-repro`) |
//! | [`Team::reduce_scatter`], [`Team::reduce_scatter_in_place`] with `premul_sum` on `f32`, `f64`, integers | `B` (all `n_pes` blocks) |
//! | [`Team::reduce_scatter_in_place`] (not `premul_sum`), [`Team::fcollect_in_place`] | one block: reduced into the scratch and copied into place / sent from a copy |
//! | every reduction by `avg` of integers, 16-bit floats and fp8, by `premul_sum` of 16-bit floats and fp8 | `2 W` (plus 256); `W` plus a block of it for a reduce-scatter |
//! | [`Team::reduce_scatter`], [`Team::reduce_scatter_in_place`] on `i16`/`u16` with blocks over 1 MiB | `B` (NVSHMEM 3.4.5's 16-bit integer reductions hang at 16 MiB a call on 2 × H200 while 1 MiB calls pass every check, so a call of these types takes at most 1 MiB: all-reduces run as several calls, and such reduce-scatters as an all-reduce into the scratch) |
//! | anything else | none |
//!
//! The peer kernel (fp8 sum, min and max on a team without a channel) needs `B` for an
//! in-place all-reduce. A program that may run on more than one node, or on teams that are not
//! peer-mapped, should reserve the scratch its rooted reductions, in-place calls and widened
//! reductions need. Calls that use the scratch share it and take turns on the GPU, whatever
//! their streams and teams. [`Team::plan_of`]
//! says, for a call described at run time ([`CallSpec`]), which algorithm it would run on a
//! team and how many bytes of scratch that needs.
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
//! is [`Error::InvalidArgument`](crate::Error::InvalidArgument) naming the argument, the shapes and the team size.
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
pub(crate) mod algo;
mod check;
mod dynamic;
mod prepared;
#[cfg(test)]
mod props;
mod query;

pub use crate::op::ReduceOp;
#[doc(hidden)]
pub use algo::ResolvedKernel;
pub use algo::{Collective, Geometry, ALGORITHMS_VAR};
pub use dynamic::CallKind;
pub use prepared::Prepared;
pub use query::{CallPlan, CallSpec};

use std::sync::Arc;

use cudarc::driver::CudaStream;

use crate::{
    memory::Alloc, team::TeamShape, DataType, Element, Result, SymBuffer, SymBufferMut, Team,
};
use algo::Call;
use check::{shape::Rule, Span};

fn span<T: Element>(b: &impl SymBuffer<T>) -> Span {
    Span::new(b.sym_ptr(), b.sym_len(), std::mem::size_of::<T>())
}

/// The buffers a public call passes, with their shapes.
#[derive(Debug, Clone, Copy)]
enum Bufs<'s> {
    /// Barrier and sync.
    None,
    /// An input and an output.
    Two {
        src: Span,
        src_shape: Option<&'s [usize]>,
        dst: Span,
        dst_shape: Option<&'s [usize]>,
    },
    /// One buffer, input and output as the in-place form defines.
    InPlace {
        buf: Span,
        shape: Option<&'s [usize]>,
    },
}

impl<'s> Bufs<'s> {
    /// An input and an output, with their shapes.
    fn two<T: Element>(src: &'s impl SymBuffer<T>, dst: &'s impl SymBuffer<T>) -> Self {
        Bufs::Two {
            src: span(src),
            src_shape: src.sym_shape(),
            dst: span(dst),
            dst_shape: dst.sym_shape(),
        }
    }
}

/// What a public call passes to [`Team::run_call`]: everything its checks read.
#[derive(Debug, Clone, Copy)]
struct Args<'s> {
    coll: Collective,
    name: &'static str,
    dtype: DataType,
    op: Option<ReduceOp>,
    root: Option<usize>,
    bufs: Bufs<'s>,
}

impl Args<'_> {
    /// What the team's plan cache ([`algo::Plans`]) knows this call by: every argument but
    /// the buffers' shapes, which only decide whether [`check_call`] refuses the call, never
    /// what call it makes.
    #[inline]
    fn key(&self) -> CallKey {
        let op = self.op.map(|op| {
            let scale = match op {
                ReduceOp::PreMulSum(scale) => scale.to_bits(),
                _ => 0,
            };
            (std::mem::discriminant(&op), scale)
        });
        let (bufs, shaped) = match self.bufs {
            Bufs::None => (KeyBufs::None, false),
            Bufs::Two {
                src,
                src_shape,
                dst,
                dst_shape,
            } => (
                KeyBufs::Two(src, dst),
                src_shape.is_some() || dst_shape.is_some(),
            ),
            Bufs::InPlace { buf, shape } => (KeyBufs::InPlace(buf), shape.is_some()),
        };
        CallKey {
            coll: self.coll,
            name: Name(self.name),
            dtype: self.dtype,
            op,
            root: self.root,
            bufs,
            shaped,
        }
    }
}

/// A public call's arguments as the team's plan cache compares them ([`Args::key`]). The
/// operator's scale is compared by its bits (0.0 and -0.0 give results of different signs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct CallKey {
    coll: Collective,
    name: Name,
    dtype: DataType,
    op: Option<(std::mem::Discriminant<ReduceOp>, u64)>,
    root: Option<usize>,
    bufs: KeyBufs,
    /// Whether a buffer has a shape: then the key does not hold everything the checks read,
    /// and a call is checked before its plan is looked up.
    pub(crate) shaped: bool,
}

impl CallKey {
    /// The call's public name, for errors.
    pub(crate) fn name(&self) -> &'static str {
        self.name.0
    }

    /// The collective.
    pub(crate) fn coll(&self) -> Collective {
        self.coll
    }
}

/// A call's public name in a [`CallKey`], compared by address: the same name is the same
/// literal (a call names itself once), and comparing the bytes would read them from memory the
/// driver's launch has evicted, on every call; two equal names at two addresses only plan anew.
#[derive(Debug, Clone, Copy)]
struct Name(&'static str);

impl PartialEq for Name {
    fn eq(&self, other: &Name) -> bool {
        std::ptr::eq(self.0, other.0)
    }
}

impl Eq for Name {}

/// [`Bufs`] without the shapes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum KeyBufs {
    None,
    Two(Span, Span),
    InPlace(Span),
}

/// Checks `a` as PE `team.my_pe` of `team` and makes the [`Call`] every algorithm sees, or
/// the error that refuses it: every public collective's argument checks. A pure function of the
/// arguments and the team, in which this PE's index only says which block of an in-place
/// buffer is its own: every PE that passes the same arguments decides alike, so a refusal
/// leaves no PE waiting for another.
fn check_call<'t>(a: &Args, team: &'t TeamShape) -> Result<Call<'t>> {
    let (call, n, me) = (a.name, team.n_pes, team.my_pe);
    let none = Span::new(0, 0, 1);
    let (src, dst, own) = match a.bufs {
        Bufs::None => (none, none, None),
        Bufs::Two {
            src,
            src_shape,
            dst,
            dst_shape,
        } => {
            check::span(call, "src", &src)?;
            check::span(call, "dst", &dst)?;
            check::shape::pair(call, Rule::of(a.coll), n, src_shape, dst_shape)?;
            (src, dst, None)
        }
        Bufs::InPlace { buf, shape } => {
            check::span(call, "buf", &buf)?;
            match a.coll.geometry() {
                Geometry::Same => (buf, buf, None),
                Geometry::Gathered => {
                    let (all, mine) = check::own_block(call, n, me, &buf, shape)?;
                    (mine, all, Some(me))
                }
                Geometry::Scattered => {
                    let (all, mine) = check::own_block(call, n, me, &buf, shape)?;
                    (all, mine, Some(me))
                }
                Geometry::Exchanged | Geometry::None => unreachable!("no in-place form"),
            }
        }
    };
    if let Some(root) = a.root {
        check::root(call, root, n)?;
    }
    let (count, in_place) = match a.coll.geometry() {
        Geometry::Same => {
            check::same_shape(call, &src, &dst)?;
            (src.len, src.ptr == dst.ptr)
        }
        Geometry::Gathered => {
            let count = check::fcollect(call, n, own, &src, &dst)?;
            (count, src.overlaps(&dst))
        }
        Geometry::Scattered => {
            let count = check::reduce_scatter(call, n, own, &src, &dst)?;
            (count, src.overlaps(&dst))
        }
        Geometry::Exchanged => (check::alltoall(call, n, &src, &dst)?, false),
        Geometry::None => (0, false),
    };
    if let Some(op) = a.op {
        op.check_for(call, a.dtype)?;
    }
    Ok(Call {
        coll: a.coll,
        name: call,
        team,
        me,
        dtype: a.dtype,
        op: a.op.unwrap_or(ReduceOp::Sum),
        root: a.root.unwrap_or(0),
        src,
        dst,
        count,
        in_place,
        scratch: 0,
        // Set from the runtime where the call is chosen (algo::run's `make`).
        room: 0,
        descriptor: team.descriptor,
        arch: team
            .arch
            .map(|(major, minor)| algo::crossover::Arch { major, minor }),
    })
}

impl Team {
    /// Checks a call's arguments ([`check_call`]) and runs it through the algorithm layer.
    /// Nothing is queued when a check refuses. A call the team has planned before with the
    /// same arguments (and no shapes) passed the same checks, and is not checked again.
    #[inline]
    fn run_call(&self, a: Args, arrays: &[&Arc<Alloc>], stream: &Arc<CudaStream>) -> Result<()> {
        algo::run(
            self,
            a.key(),
            || check_call(&a, self.shape()),
            arrays,
            stream,
        )
    }

    /// For the host-overhead bench only, not part of the API: what [`Team::barrier`]
    /// (`all_reduce == None`) or an all-reduce sum of `all_reduce`'s two arrays would launch
    /// on `stream`, resolved once, so that the bench can time a bare `cuLaunchKernel` of the
    /// same kernel against the whole call. Refused unless the call would be one kernel of
    /// this crate.
    ///
    /// # Safety
    ///
    /// Each [`ResolvedKernel::fire`](algo::ResolvedKernel::fire) of the result runs the team's
    /// channel protocol outside the team's call order, so the caller makes every fire one of
    /// the team's collective calls by hand: every member fires as often as the others, at the
    /// same point of its sequence of the team's calls, on `stream`, with no call of the team on
    /// another stream meanwhile, and `all_reduce`'s arrays stay alive until the stream has run
    /// every fire (nothing notes their use). Otherwise the kernels' flags drift apart between
    /// members (a wait passed too early: wrong results; or one that never ends: a timeout), or
    /// a kernel writes freed memory.
    ///
    /// ```no_run
    /// # let rt = nvshmem::Runtime::init()?; let stream = rt.stream().clone();
    /// let team = rt.world();
    /// // SAFETY: every PE fires the barrier's kernel alike, on the runtime's stream only.
    /// if let Ok(k) = unsafe { team.bare_launch_for_bench(None, &stream) } {
    ///     // SAFETY: as above; the barrier has no arrays.
    ///     unsafe { k.fire(&stream)? };
    /// }
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    #[doc(hidden)]
    pub unsafe fn bare_launch_for_bench(
        &self,
        all_reduce: Option<(&crate::SymArray<f32>, &crate::SymArray<f32>)>,
        stream: &CudaStream,
    ) -> Result<algo::ResolvedKernel> {
        let (coll, name, dtype, op, bufs) = match all_reduce {
            None => (
                Collective::Barrier,
                "barrier",
                DataType::U8,
                None,
                Bufs::None,
            ),
            Some((src, dst)) => (
                Collective::AllReduce,
                "all_reduce",
                DataType::F32,
                Some(ReduceOp::Sum),
                Bufs::two(src, dst),
            ),
        };
        let args = Args {
            coll,
            name,
            dtype,
            op,
            root: None,
            bufs,
        };
        algo::bare(self, check_call(&args, self.shape())?, stream)
    }

    /// A two-buffer call, with both buffers of this runtime.
    #[allow(clippy::too_many_arguments)]
    fn two<T: Element>(
        &self,
        coll: Collective,
        name: &'static str,
        op: Option<ReduceOp>,
        root: Option<usize>,
        src: &impl SymBuffer<T>,
        dst: &impl SymBuffer<T>,
        stream: &Arc<CudaStream>,
    ) -> Result<()> {
        let args = self.two_args(coll, name, op, root, src, dst)?;
        self.run_call(args, &[src.alloc(), dst.alloc()], stream)
    }

    /// The description of a two-buffer call, with both buffers checked to be of this runtime.
    fn two_args<'s, T: Element>(
        &self,
        coll: Collective,
        name: &'static str,
        op: Option<ReduceOp>,
        root: Option<usize>,
        src: &'s impl SymBuffer<T>,
        dst: &'s impl SymBuffer<T>,
    ) -> Result<Args<'s>> {
        let rt = self.runtime();
        rt.check_same(name, "src", src.sym_runtime())?;
        rt.check_same(name, "dst", dst.sym_runtime())?;
        Ok(Args {
            coll,
            name,
            dtype: T::DTYPE,
            op,
            root,
            bufs: Bufs::two(src, dst),
        })
    }

    /// An in-place call on `buf`, of this runtime: input and output are all of it
    /// (all-reduce, reduce, broadcast), or the output (fcollect, gather) or input
    /// (reduce-scatter, scatter) is all of it and the other this PE's block.
    fn in_place<T: Element>(
        &self,
        coll: Collective,
        name: &'static str,
        op: Option<ReduceOp>,
        root: Option<usize>,
        buf: &impl SymBufferMut<T>,
        stream: &Arc<CudaStream>,
    ) -> Result<()> {
        let args = self.in_place_args(coll, name, op, root, buf)?;
        self.run_call(args, &[buf.alloc()], stream)
    }

    /// The description of an in-place call on `buf`, checked to be of this runtime.
    fn in_place_args<'s, T: Element>(
        &self,
        coll: Collective,
        name: &'static str,
        op: Option<ReduceOp>,
        root: Option<usize>,
        buf: &'s impl SymBuffer<T>,
    ) -> Result<Args<'s>> {
        self.runtime().check_same(name, "buf", buf.sym_runtime())?;
        Ok(Args {
            coll,
            name,
            dtype: T::DTYPE,
            op,
            root,
            bufs: Bufs::InPlace {
                buf: span(buf),
                shape: buf.sym_shape(),
            },
        })
    }

    /// All-reduce: every PE's `dst` gets the element-wise reduction of all PEs' `src`
    /// (NVSHMEM's "reduce"). `src` and `dst` have equal lengths and do not overlap (see
    /// [`Team::all_reduce_in_place`]).
    ///
    /// Every operator [`ReduceOp::supports`] for `T` (module docs, "Reductions"); an operator
    /// the type does not define, or a `premul_sum` scale that is not a whole number for an
    /// integer type (or that an `f32` accumulator cannot hold), is
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) naming `op`. Needs no scratch, but
    /// for `premul_sum` on NVSHMEM's path (module docs, "Reductions"). `src` is never written.
    ///
    /// ```no_run
    /// # use nvshmem::{ReduceOp, Runtime};
    /// # let rt = Runtime::init()?; let stream = rt.stream().clone(); let team = rt.world();
    /// let src = rt.alloc_from(&[1u32, 2, 3])?;
    /// let mut dst = rt.alloc_zeroed::<u32>(3)?;
    /// team.all_reduce(&src, &mut dst, ReduceOp::Max, &stream)?;
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    #[doc(alias(
        "allreduce",
        "AllReduce",
        "MPI_Allreduce",
        "ncclAllReduce",
        "nvshmem_reduce"
    ))]
    pub fn all_reduce<T: Element>(
        &self,
        src: &impl SymBuffer<T>,
        dst: &mut impl SymBufferMut<T>,
        op: ReduceOp,
        stream: &Arc<CudaStream>,
    ) -> Result<()> {
        let c = Collective::AllReduce;
        self.two(c, "all_reduce", Some(op), None, src, dst, stream)
    }

    /// All-reduce in place: `buf` is both input and output. Operators as
    /// [`Team::all_reduce`]; on fp8 it needs `buf.len()` bytes of collective scratch
    /// ([`Runtime::reserve_scratch`](crate::Runtime::reserve_scratch): the result is reduced there while the other PEs still
    /// read `buf`, then copied back), and as many on NVSHMEM's path (a team without peer
    /// access: NVSHMEM reduces from a copy of `buf`), else [`Error::ScratchTooSmall`](crate::Error::ScratchTooSmall).
    ///
    /// ```no_run
    /// # use nvshmem::{ReduceOp, Runtime};
    /// # let rt = Runtime::init()?; let stream = rt.stream().clone(); let team = rt.world();
    /// let mut grads = rt.alloc_from(&[0.5f32; 256])?;
    /// team.all_reduce_in_place(&mut grads, ReduceOp::Sum, &stream)?;
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    #[doc(alias("allreduce", "MPI_Allreduce", "ncclAllReduce"))]
    pub fn all_reduce_in_place<T: Element>(
        &self,
        buf: &mut impl SymBufferMut<T>,
        op: ReduceOp,
        stream: &Arc<CudaStream>,
    ) -> Result<()> {
        let c = Collective::AllReduce;
        self.in_place(c, "all_reduce_in_place", Some(op), None, buf, stream)
    }

    /// Reduce to `root` (a PE index in the team): the root's `dst` gets the reduction of all
    /// PEs' `src`; the other PEs' `dst` is left untouched (as NCCL's reduce).
    ///
    /// On a team the NVLink kernels serve (module docs, "Collective scratch") the root reduces
    /// the members' `src` straight into its `dst`, with no scratch. Elsewhere it runs on
    /// NVSHMEM, which has no rooted reduction: the result is reduced into the runtime's
    /// collective scratch, then copied to `dst` on the root (for `avg`, divided into it;
    /// `premul_sum` scales `src` into the scratch too, after the result: `2 * len *
    /// size_of::<T>()` bytes and 256 more). Reserve the scratch first, collectively, with
    /// [`Runtime::reserve_scratch`](crate::Runtime::reserve_scratch) (`len * size_of::<T>()`
    /// bytes, else [`Error::ScratchTooSmall`](crate::Error::ScratchTooSmall)) where a team may
    /// take that path. Calls that use the scratch share it, so do not run two at once on
    /// different streams. Operators as [`Team::all_reduce`].
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
    #[doc(alias("MPI_Reduce", "ncclReduce"))]
    pub fn reduce<T: Element>(
        &self,
        root: usize,
        src: &impl SymBuffer<T>,
        dst: &mut impl SymBufferMut<T>,
        op: ReduceOp,
        stream: &Arc<CudaStream>,
    ) -> Result<()> {
        let c = Collective::Reduce;
        self.two(c, "reduce", Some(op), Some(root), src, dst, stream)
    }

    /// Reduce to `root` in place: the root's `buf` gets the reduction of all PEs' `buf`; the
    /// other PEs' `buf` is left untouched. Uses the scratch where [`Team::reduce`] does
    /// (`buf.len() * size_of::<T>()` bytes); operators as [`Team::all_reduce`].
    ///
    /// ```no_run
    /// # use nvshmem::{ReduceOp, Runtime};
    /// # let rt = Runtime::init()?; let stream = rt.stream().clone(); let team = rt.world();
    /// # rt.reserve_scratch(1 << 20)?;
    /// let mut buf = rt.alloc_from(&[3i64; 16])?;
    /// team.reduce_in_place(0, &mut buf, ReduceOp::Min, &stream)?;
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    #[doc(alias("MPI_Reduce", "ncclReduce"))]
    pub fn reduce_in_place<T: Element>(
        &self,
        root: usize,
        buf: &mut impl SymBufferMut<T>,
        op: ReduceOp,
        stream: &Arc<CudaStream>,
    ) -> Result<()> {
        let c = Collective::Reduce;
        self.in_place(c, "reduce_in_place", Some(op), Some(root), buf, stream)
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
    #[doc(alias("bcast", "Bcast", "MPI_Bcast", "ncclBroadcast", "ncclBcast"))]
    pub fn broadcast<T: Element>(
        &self,
        root: usize,
        src: &impl SymBuffer<T>,
        dst: &mut impl SymBufferMut<T>,
        stream: &Arc<CudaStream>,
    ) -> Result<()> {
        let c = Collective::Broadcast;
        self.two(c, "broadcast", None, Some(root), src, dst, stream)
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
    #[doc(alias("bcast", "MPI_Bcast", "ncclBroadcast"))]
    pub fn broadcast_in_place<T: Element>(
        &self,
        root: usize,
        buf: &mut impl SymBufferMut<T>,
        stream: &Arc<CudaStream>,
    ) -> Result<()> {
        let c = Collective::Broadcast;
        self.in_place(c, "broadcast_in_place", None, Some(root), buf, stream)
    }

    /// All-gather (NVSHMEM's fcollect): `dst` (`n_pes * src.len()` elements) gets every PE's
    /// `src`, ordered by PE index in the team.
    ///
    /// ```no_run
    /// # use nvshmem::Runtime;
    /// # let rt = Runtime::init()?; let stream = rt.stream().clone(); let team = rt.world();
    /// let src = rt.alloc_from(&[team.my_pe() as i32; 8])?;
    /// let mut dst = rt.alloc_zeroed::<i32>(8 * team.n_pes())?;
    /// team.fcollect(&src, &mut dst, &stream)?;
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    #[doc(alias(
        "all_gather",
        "allgather",
        "AllGather",
        "MPI_Allgather",
        "ncclAllGather"
    ))]
    pub fn fcollect<T: Element>(
        &self,
        src: &impl SymBuffer<T>,
        dst: &mut impl SymBufferMut<T>,
        stream: &Arc<CudaStream>,
    ) -> Result<()> {
        let c = Collective::Fcollect;
        self.two(c, "fcollect", None, None, src, dst, stream)
    }

    /// All-gather in place: `buf` holds `n_pes` blocks; this PE's block (index
    /// `my_pe`) is its input, and every block is filled from its PE. On NVSHMEM's path (a
    /// team without peer access) it needs one block of collective scratch, sent from there.
    ///
    /// ```no_run
    /// # use nvshmem::Runtime;
    /// # let rt = Runtime::init()?; let stream = rt.stream().clone(); let team = rt.world();
    /// let mut buf = rt.alloc_zeroed::<f32>(4 * team.n_pes())?;
    /// team.fcollect_in_place(&mut buf, &stream)?;
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    #[doc(alias("all_gather", "allgather", "MPI_Allgather", "ncclAllGather"))]
    pub fn fcollect_in_place<T: Element>(
        &self,
        buf: &mut impl SymBufferMut<T>,
        stream: &Arc<CudaStream>,
    ) -> Result<()> {
        let c = Collective::Fcollect;
        self.in_place(c, "fcollect_in_place", None, None, buf, stream)
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
    #[doc(alias("all_to_all", "AllToAll", "MPI_Alltoall", "ncclAlltoAll"))]
    pub fn alltoall<T: Element>(
        &self,
        src: &impl SymBuffer<T>,
        dst: &mut impl SymBufferMut<T>,
        stream: &Arc<CudaStream>,
    ) -> Result<()> {
        let c = Collective::Alltoall;
        self.two(c, "alltoall", None, None, src, dst, stream)
    }

    /// Reduce-scatter: `src` holds `n_pes` blocks of `dst.len()`; team PE `i`'s `dst` gets
    /// the reduction over all PEs of block `i`.
    ///
    /// Operators as [`Team::all_reduce`]. `premul_sum` scales all of `src` into the
    /// collective scratch (so `src` is left as it was) and reduce-scatters from there: it
    /// needs `src.len() * size_of::<T>()` bytes reserved with [`Runtime::reserve_scratch`](crate::Runtime::reserve_scratch),
    /// else [`Error::ScratchTooSmall`](crate::Error::ScratchTooSmall) (not on fp8, whose kernel reads the peers' blocks
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
    #[doc(alias(
        "reducescatter",
        "ReduceScatter",
        "MPI_Reduce_scatter_block",
        "ncclReduceScatter"
    ))]
    pub fn reduce_scatter<T: Element>(
        &self,
        src: &impl SymBuffer<T>,
        dst: &mut impl SymBufferMut<T>,
        op: ReduceOp,
        stream: &Arc<CudaStream>,
    ) -> Result<()> {
        let c = Collective::ReduceScatter;
        self.two(c, "reduce_scatter", Some(op), None, src, dst, stream)
    }

    /// Reduce-scatter in place: `buf` holds `n_pes` blocks; this PE's block (index `my_pe`)
    /// gets the reduction of that block over all PEs. The other blocks are left as they were.
    /// Operators and scratch as [`Team::reduce_scatter`] (`premul_sum`: `buf.len() *
    /// size_of::<T>()` bytes); on NVSHMEM's path (a team without peer access) the other
    /// operators need one block (`buf.len() / n_pes` elements): the block is reduced there
    /// and copied into place.
    ///
    /// ```no_run
    /// # use nvshmem::{ReduceOp, Runtime};
    /// # let rt = Runtime::init()?; let stream = rt.stream().clone(); let team = rt.world();
    /// let mut buf = rt.alloc_from(&vec![2i32; 8 * team.n_pes()])?;
    /// team.reduce_scatter_in_place(&mut buf, ReduceOp::Sum, &stream)?;
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    #[doc(alias("reducescatter", "MPI_Reduce_scatter_block", "ncclReduceScatter"))]
    pub fn reduce_scatter_in_place<T: Element>(
        &self,
        buf: &mut impl SymBufferMut<T>,
        op: ReduceOp,
        stream: &Arc<CudaStream>,
    ) -> Result<()> {
        let c = Collective::ReduceScatter;
        self.in_place(c, "reduce_scatter_in_place", Some(op), None, buf, stream)
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
    #[doc(alias("MPI_Gather", "ncclGather"))]
    pub fn gather<T: Element>(
        &self,
        root: usize,
        src: &impl SymBuffer<T>,
        dst: &mut impl SymBufferMut<T>,
        stream: &Arc<CudaStream>,
    ) -> Result<()> {
        let c = Collective::Gather;
        self.two(c, "gather", None, Some(root), src, dst, stream)
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
    #[doc(alias("MPI_Gather", "ncclGather"))]
    pub fn gather_in_place<T: Element>(
        &self,
        root: usize,
        buf: &mut impl SymBufferMut<T>,
        stream: &Arc<CudaStream>,
    ) -> Result<()> {
        // Every PE's input is its own block: on the root that is the in-place block; on the
        // others `dst` is not written, so its overlap with `src` is harmless.
        let c = Collective::Gather;
        self.in_place(c, "gather_in_place", None, Some(root), buf, stream)
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
    #[doc(alias("MPI_Scatter", "ncclScatter"))]
    pub fn scatter<T: Element>(
        &self,
        root: usize,
        src: &impl SymBuffer<T>,
        dst: &mut impl SymBufferMut<T>,
        stream: &Arc<CudaStream>,
    ) -> Result<()> {
        let c = Collective::Scatter;
        self.two(c, "scatter", None, Some(root), src, dst, stream)
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
    #[doc(alias("MPI_Scatter", "ncclScatter"))]
    pub fn scatter_in_place<T: Element>(
        &self,
        root: usize,
        buf: &mut impl SymBufferMut<T>,
        stream: &Arc<CudaStream>,
    ) -> Result<()> {
        let c = Collective::Scatter;
        self.in_place(c, "scatter_in_place", None, Some(root), buf, stream)
    }

    /// Barrier over the team, on `stream`: work queued before it on every member's stream,
    /// and the RMA it issued, completes before work queued after it on any member's stream.
    ///
    /// Exactly: when any member's stream passes the barrier, every member's stream has reached
    /// it, so the work each queued before it on that stream has completed, and every put or
    /// signal each issued on that stream (through this crate or NVSHMEM, to any PE of the job,
    /// in the team or not) has completed at its target: on a peer-mapped team the barrier
    /// kernel fences system-wide before it arrives, and on a job with PEs this PE does not
    /// reach by load and store (another node) NVSHMEM's quiet runs first; on other teams
    /// NVSHMEM's barrier does both. Work on the members' *other* streams is not waited for.
    /// A team of one PE: the quiet alone (nothing in a job of one PE, where nothing can be
    /// outstanding beyond the stream's own order).
    ///
    /// ```no_run
    /// # let rt = nvshmem::Runtime::init()?; let stream = rt.stream().clone();
    /// rt.world().barrier(&stream)?;
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    #[doc(alias("MPI_Barrier", "nvshmem_barrier"))]
    #[inline]
    pub fn barrier(&self, stream: &Arc<CudaStream>) -> Result<()> {
        self.rootless(Collective::Barrier, "barrier", stream)
    }

    /// Synchronisation over the team, on `stream`: like [`Team::barrier`] but without
    /// completing outstanding RMA (cheaper).
    ///
    /// Exactly: when any member's stream passes it, every member's stream has reached it, so
    /// the work each queued before it on that stream has completed (kernels, copies, and puts
    /// that NVSHMEM moved on the stream itself, to peer-mapped PEs), but a put moved by
    /// NVSHMEM's proxy or NIC (to another node) may still be in flight, and this PE's own
    /// stores through peer pointers are not fenced system-wide: use [`Team::barrier`] (or
    /// [`Runtime::quiet`](crate::Runtime::quiet) first) when a member will read what this PE
    /// put. A team of one PE: nothing.
    ///
    /// ```no_run
    /// # let rt = nvshmem::Runtime::init()?; let stream = rt.stream().clone();
    /// rt.world().sync(&stream)?;
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    #[doc(alias("nvshmem_sync", "team_sync"))]
    pub fn sync(&self, stream: &Arc<CudaStream>) -> Result<()> {
        self.rootless(Collective::Sync, "sync", stream)
    }

    /// A call with no buffers (barrier, sync).
    #[inline]
    fn rootless(
        &self,
        coll: Collective,
        name: &'static str,
        stream: &Arc<CudaStream>,
    ) -> Result<()> {
        self.run_call(rootless_args(coll, name), &[], stream)
    }
}

/// The description of a call with no buffers (barrier, sync).
fn rootless_args(coll: Collective, name: &'static str) -> Args<'static> {
    Args {
        coll,
        name,
        dtype: DataType::U8,
        op: None,
        root: None,
        bufs: Bufs::None,
    }
}

impl crate::Runtime {
    /// Barrier over all PEs on `stream` (the world team's [`Team::barrier`], with its
    /// guarantees).
    ///
    /// ```no_run
    /// # let rt = nvshmem::Runtime::init()?;
    /// rt.barrier_all(rt.stream())?;
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    #[doc(alias("MPI_Barrier", "nvshmem_barrier_all"))]
    pub fn barrier_all(&self, stream: &Arc<CudaStream>) -> Result<()> {
        self.world()
            .rootless(Collective::Barrier, "barrier_all", stream)
    }

    /// Synchronisation over all PEs on `stream` (the world team's [`Team::sync`], with its
    /// guarantees).
    ///
    /// ```no_run
    /// # let rt = nvshmem::Runtime::init()?;
    /// rt.sync_all(rt.stream())?;
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    #[doc(alias("nvshmem_sync_all"))]
    pub fn sync_all(&self, stream: &Arc<CudaStream>) -> Result<()> {
        self.world().rootless(Collective::Sync, "sync_all", stream)
    }
}
