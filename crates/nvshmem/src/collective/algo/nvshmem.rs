//! NVSHMEM's own collectives ([`Native`]), and the two reductions NVSHMEM lacks built around
//! its sum: avg ([`SumThenDiv`]) and premul_sum ([`ScaleThenSum`]).
//!
//! NVSHMEM has no rooted reduction: a reduce to a root all-reduces into the collective
//! scratch, and the root takes the result out, so non-root outputs stay untouched. NVSHMEM
//! 3.4.5's 16-bit integer reductions hang at 16 MiB a call on 2 x H200 while 1 MiB calls pass
//! every check, so a call of those types takes at most 1 MiB ([`ffi::max_reduce_count`]):
//! all-reduces of those types run as several calls, and a
//! reduce-scatter whose blocks exceed the cap runs as an all-reduce into the scratch of which
//! each PE keeps its block.
//!
//! # NVSHMEM never gets a destination that overlaps its source
//!
//! OpenSHMEM forbids it (a reduction's `dest` and `source` may only be the same object, the
//! other collectives' not even that), and NVSHMEM 3.4.5's own kernels, which it runs when it
//! does not hand the call to NCCL (several PEs on one GPU, or no loadable NCCL), get it wrong
//! from 3 PEs up. `tools/nvshmem-repro` shows it from C, NVSHMEM called raw (one H100, MPS,
//! 3, 4 and 8 PEs, 2026-11-24):
//! - reduce-scatter in NCCL's in-place layout (`dest = source + me * count`): every PE from
//!   team index 2 up gets a wrong block. Its one-shot "allpush" algorithm reduces the first
//!   two members' blocks into `dest` before it reads this PE's own block of `source`, which
//!   `dest` is: this PE's contribution is lost (xor gives 0 at 3 PEs). PEs 0 and 1 combine
//!   their own block first, which is why they are right.
//! - all-reduce with `dest == source` (which OpenSHMEM allows): wrong on every PE at 1 MiB
//!   from 3 PEs, and at 16 KiB at 8 PEs. Its segmented algorithm sends `source` to the next
//!   peer after it has already reduced the previous peer's part into `dest`.
//! - fcollect with `source` inside `dest`, and broadcast with `dest == source` at the root,
//!   came out right; fcollect is staged all the same (overlap is not allowed, and the cost is
//!   one local copy of one block), broadcast's root case is one NVSHMEM handles explicitly.
//!
//! So every plan here stages what would overlap through the collective scratch: an in-place
//! all-reduce (and premul_sum's scaled input) is copied into the scratch and reduced from
//! there; an in-place reduce-scatter reduces into the scratch and the block is copied into
//! place once NVSHMEM has finished with the input (after an on-stream collective, the input
//! may be reused: OpenSHMEM's completion rule); an in-place fcollect sends a copy of this PE's
//! block. NVSHMEM's results with NCCL inside were right in place too; the copies are paid on
//! that path as well, since whether NVSHMEM uses NCCL is its own run-time choice.
use super::{Algorithm, Call, Collective, Step};
use crate::{
    ffi::{self, Reduction},
    kernels::{self, Launch, MapKind},
    DataType, ReduceOp,
};

/// NVSHMEM's own collective for the call: its typed reductions for the operators it has,
/// and its byte-wise broadcast, fcollect and alltoall for every type, its barrier and sync.
pub(super) struct Native;

/// avg: NVSHMEM's sum of a wide form of the input, then a kernel divides by the team size and
/// narrows, so the result is the one this crate's kernels give (the docs' semantics): `f32`
/// and `f64` sum in their type; 16- and 8-bit floats are widened into the scratch as `f32`
/// (summed in `f32`, rounded once); integers as the pair `(q, r)` with `x = q * n + r`, whose
/// sums cannot overflow 64 bits, from which the exact mean, truncated toward zero, is
/// rebuilt ([`MapKind`]).
pub(super) struct SumThenDiv;

/// premul_sum(s): a kernel scales the input (into the scratch, never over the caller's input),
/// then NVSHMEM's sum: integers in their type (wrapping, as the kernels), 16- and 8-bit floats
/// scaled into `f32`, summed in `f32` and rounded once (as the kernels).
pub(super) struct ScaleThenSum;

/// What runs around NVSHMEM's reduction.
#[derive(Clone, Copy)]
struct Around {
    /// The operator NVSHMEM applies.
    op: ReduceOp,
    /// Multiply the input by this first.
    scale: Option<f64>,
    /// Divide the result by the team size after.
    divide: bool,
}

impl Around {
    /// The wide type NVSHMEM sums in, and its elements per element of the call's type, where
    /// the call's own type would not give the kernels' result: avg of integers and of 16- and
    /// 8-bit floats, premul_sum of 16- and 8-bit floats ([`kernels::wide`]).
    fn widened(&self, dtype: DataType) -> Option<(DataType, usize)> {
        let (wide, per) = kernels::wide(dtype);
        let needed = (wide, per) != (dtype, 1)
            && (self.divide || (self.scale.is_some() && dtype.is_float()));
        needed.then_some((wide, per))
    }
}

fn refuse_reduction(call: &Call, op: ReduceOp) -> Option<String> {
    refuse_reduction_of(call.dtype, op)
}

fn refuse_reduction_of(dtype: DataType, op: ReduceOp) -> Option<String> {
    if !ffi::has_reduction(dtype, op) {
        return Some(format!("NVSHMEM has no {} reduction of {dtype}", op.name()));
    }
    None
}

/// Whether a reduce-scatter's blocks are too long for one NVSHMEM call of the type.
fn long_blocks(call: &Call) -> bool {
    call.coll == Collective::ReduceScatter && call.count > ffi::max_reduce_count(call.dtype)
}

/// What runs around NVSHMEM's reduction for `call`, by the algorithm of this file that takes
/// its operator.
fn around_of(call: &Call) -> Around {
    match call.op {
        ReduceOp::Avg => SUM_THEN_DIV,
        ReduceOp::PreMulSum(_) => ScaleThenSum::around(call),
        op => Around {
            op,
            scale: None,
            divide: false,
        },
    }
}

/// Whether NVSHMEM's plan for `call` needs the scratch: to keep NVSHMEM's source and
/// destination apart (module docs: an in-place all-reduce, reduce-scatter or fcollect), to
/// scale premul_sum's input, or to widen avg's and premul_sum's (16- and 8-bit floats,
/// integers' avg). Where this crate's NVLink kernels can run such a call, the automatic
/// choice takes them instead: they work in place, in the wide type, with no scratch to
/// reserve. A pure function of what every PE passes alike.
pub(super) fn stages(call: &Call) -> bool {
    match call.coll {
        Collective::AllReduce | Collective::ReduceScatter => {
            reduction_scratch(call, around_of(call)) > 0
        }
        Collective::Fcollect => call.in_place,
        _ => false,
    }
}

/// Scratch offsets are rounded up to this, so each staged buffer starts aligned for any type.
const SCRATCH_ALIGN: usize = 256;

/// Where an NVSHMEM reduction's plan keeps things in the collective scratch: a result that
/// cannot be written straight into the output at offset 0 (`result` bytes: a rooted reduce's
/// whole result, an in-place reduce-scatter's block, a long-block reduce-scatter's all-reduce),
/// then the input NVSHMEM reduces from when it cannot be the caller's (`staged` bytes:
/// premul_sum's scaled copy, an in-place all-reduce's copy).
#[derive(Debug, Clone, Copy, PartialEq)]
struct Staging {
    result: usize,
    staged: usize,
}

impl Staging {
    fn of(call: &Call, around: Around) -> Staging {
        if let Some((wide, per)) = around.widened(call.dtype) {
            // The input widened, and NVSHMEM's wide result (all of it, or one block).
            let at = |len: usize| len.saturating_mul(per * wide.size());
            let staged = at(call.src.len);
            let result = match call.coll {
                Collective::ReduceScatter => at(call.count),
                _ => staged,
            };
            return Staging { result, staged };
        }
        let input = call.src.len * call.dtype.size();
        let result = match call.coll {
            Collective::Reduce => input,
            Collective::ReduceScatter if long_blocks(call) => input,
            Collective::ReduceScatter if call.in_place && around.scale.is_none() => {
                call.block_bytes()
            }
            _ => 0,
        };
        let staged = match call.coll {
            _ if around.scale.is_some() => input,
            Collective::AllReduce if call.in_place => input,
            _ => 0,
        };
        Staging { result, staged }
    }

    /// Offset of the staged input; saturating, as [`Staging::bytes`].
    fn staged_at(&self) -> usize {
        self.result
            .checked_next_multiple_of(SCRATCH_ALIGN)
            .unwrap_or(usize::MAX)
    }

    /// Saturating: a call too large for any scratch asks for `usize::MAX` bytes, which the
    /// scratch refuses with a typed error (the sizes are checked spans, each under 2^64 bytes,
    /// but two of them together can overflow).
    fn bytes(&self) -> usize {
        match self.staged {
            0 => self.result,
            s => self.staged_at().saturating_add(s),
        }
    }
}

/// The scratch the NVSHMEM reductions need ([`Staging`]).
fn reduction_scratch(call: &Call, around: Around) -> usize {
    Staging::of(call, around).bytes()
}

/// `count` elements all-reduced from `src` into `dst` (identical or disjoint), as several
/// NVSHMEM calls when the type caps one (an all-reduce is element-wise, so chunks are
/// independent).
fn all_reduce(call: &Call, op: ReduceOp, dst: u64, src: u64, count: usize, steps: &mut Vec<Step>) {
    all_reduce_of(call.dtype, op, dst, src, count, steps)
}

fn all_reduce_of(
    dtype: DataType,
    op: ReduceOp,
    dst: u64,
    src: u64,
    count: usize,
    steps: &mut Vec<Step>,
) {
    let step = ffi::max_reduce_count(dtype).max(1);
    let mut done = 0;
    while done < count {
        let n = step.min(count - done);
        // Within the call's spans, whose bytes count in a usize; the addresses saturate only
        // in a plan whose scratch no heap holds, which is looked at but never queued (the
        // call's scratch check refuses it first).
        let off = (done * dtype.size()) as u64;
        steps.push(Step::Reduce {
            kind: Reduction::AllReduce,
            dtype,
            op,
            dst: dst.saturating_add(off),
            src: src.saturating_add(off),
            count: n,
        });
        done += n;
    }
}

fn map(dtype: DataType, kind: MapKind, src: u64, dst: u64, len: usize, factor: f64) -> Step {
    Step::Kernel(Launch::Map {
        dtype,
        kind,
        src,
        dst,
        len,
        factor,
    })
}

/// The plan of an NVSHMEM reduction with `around` it. NVSHMEM's source and destination never
/// overlap (module docs); [`Staging`] says where the scratch holds what.
fn plan_reduction(call: &Call, around: Around, steps: &mut Vec<Step>) {
    let (dtype, n) = (call.dtype, call.n() as f64);
    let (src, dst, scratch, count) = (call.src.ptr, call.dst.ptr, call.scratch, call.count);
    let len = call.src.len;
    let staging = Staging::of(call, around);
    // Saturating, as the scratch's size (Staging::bytes): such a plan is never queued.
    let staged = scratch.saturating_add(staging.staged_at() as u64);
    if let Some((wide, per)) = around.widened(dtype) {
        return plan_widened(call, around, (wide, per), staged, steps);
    }
    let divide = |from, to, len, steps: &mut Vec<Step>| {
        if around.divide {
            steps.push(map(dtype, MapKind::Div, from, to, len, n));
        }
    };
    // The address NVSHMEM reduces from: premul_sum's input scaled into the scratch, an
    // in-place all-reduce's input copied there, else the caller's input.
    let from = if let Some(s) = around.scale {
        steps.push(map(dtype, MapKind::Mul, src, staged, len, s));
        staged
    } else if staging.staged > 0 {
        steps.push(Step::Copy {
            dst: staged,
            src,
            bytes: staging.staged,
        });
        staged
    } else {
        src
    };
    // A result taken out of the scratch: divided on the way for avg, else copied.
    let take_out = |from, count: usize, steps: &mut Vec<Step>| {
        if around.divide {
            steps.push(map(dtype, MapKind::Div, from, dst, count, n));
        } else {
            steps.push(Step::Copy {
                dst,
                src: from,
                bytes: count * dtype.size(),
            });
        }
    };
    match call.coll {
        Collective::AllReduce => {
            all_reduce(call, around.op, dst, from, len, steps);
            divide(dst, dst, len, steps);
        }
        Collective::Reduce => {
            // NVSHMEM writes its result on every PE: into the scratch, which the root takes
            // it out of (dividing on the way for avg).
            all_reduce(call, around.op, scratch, from, len, steps);
            if call.me == call.root {
                take_out(scratch, len, steps);
            }
        }
        Collective::ReduceScatter => {
            if long_blocks(call) {
                // All of it reduced into the scratch; this PE keeps its block. In place,
                // its block is written only after the all-reduce, which NVSHMEM completes
                // before any PE may reuse its input.
                all_reduce(call, around.op, scratch, from, len, steps);
                take_out(
                    scratch.saturating_add((call.me * count * dtype.size()) as u64),
                    count,
                    steps,
                );
            } else if staging.result > 0 {
                // In place, reading the caller's input: the block reduced into the scratch,
                // then copied over this PE's block of the input, which NVSHMEM no longer
                // reads once its reduce-scatter has completed on this stream.
                steps.push(Step::Reduce {
                    kind: Reduction::ReduceScatter,
                    dtype,
                    op: around.op,
                    dst: scratch,
                    src: from,
                    count,
                });
                take_out(scratch, count, steps);
            } else {
                steps.push(Step::Reduce {
                    kind: Reduction::ReduceScatter,
                    dtype,
                    op: around.op,
                    dst,
                    src: from,
                    count,
                });
                divide(dst, dst, count, steps);
            }
        }
        _ => unreachable!("only reductions are planned here"),
    }
}

/// The plan of a reduction NVSHMEM sums in a wide type ([`Around::widened`]): the input
/// widened into the scratch (`staged`), NVSHMEM's sum of it into the scratch's start, and the
/// result (this PE's block of it for reduce-scatter; the root's only for reduce) narrowed into
/// the output. NVSHMEM's source and destination are both scratch, apart; the caller's buffers
/// are read first and written last, so in place needs nothing more.
fn plan_widened(
    call: &Call,
    around: Around,
    (wide, per): (DataType, usize),
    staged: u64,
    steps: &mut Vec<Step>,
) {
    let (dtype, n) = (call.dtype, call.n() as f64);
    let (src, dst, scratch, len) = (call.src.ptr, call.dst.ptr, call.scratch, call.src.len);
    // Integers split by the team size; floats scale by premul_sum's scale, or 1.
    let split = if dtype.is_float() {
        around.scale.unwrap_or(1.0)
    } else {
        n
    };
    let join = if around.divide { n } else { 1.0 };
    steps.push(map(dtype, MapKind::Widen, src, staged, len, split));
    // The wide counts saturate where the staging's bytes did: such a plan is never queued.
    let out = match call.coll {
        Collective::ReduceScatter => {
            steps.push(Step::Reduce {
                kind: Reduction::ReduceScatter,
                dtype: wide,
                op: around.op,
                dst: scratch,
                src: staged,
                count: call.count.saturating_mul(per),
            });
            call.count
        }
        _ => {
            all_reduce_of(
                wide,
                around.op,
                scratch,
                staged,
                len.saturating_mul(per),
                steps,
            );
            len
        }
    };
    if call.coll != Collective::Reduce || call.me == call.root {
        steps.push(map(dtype, MapKind::Narrow, scratch, dst, out, join));
    }
}

impl Algorithm for Native {
    fn name(&self) -> &'static str {
        "nvshmem"
    }

    fn refuses(&self, call: &Call) -> Option<String> {
        match call.coll {
            Collective::AllReduce | Collective::Reduce | Collective::ReduceScatter => {
                refuse_reduction(call, call.op)
            }
            Collective::Broadcast
            | Collective::Fcollect
            | Collective::Alltoall
            | Collective::Barrier
            | Collective::Sync => None,
            Collective::Gather | Collective::Scatter => {
                Some(format!("NVSHMEM has no {}", call.coll))
            }
        }
    }

    fn scratch(&self, call: &Call) -> usize {
        match call.coll {
            // An in-place fcollect sends a copy of this PE's block (module docs).
            Collective::Fcollect if call.in_place => call.block_bytes(),
            _ => reduction_scratch(
                call,
                Around {
                    op: call.op,
                    scale: None,
                    divide: false,
                },
            ),
        }
    }

    fn plan(&self, call: &Call, steps: &mut Vec<Step>) {
        let (src, dst, bytes) = (call.src.ptr, call.dst.ptr, call.block_bytes());
        match call.coll {
            Collective::AllReduce | Collective::Reduce | Collective::ReduceScatter => {
                let around = Around {
                    op: call.op,
                    scale: None,
                    divide: false,
                };
                plan_reduction(call, around, steps)
            }
            // Data movement needs no arithmetic: NVSHMEM's byte-wise forms serve every type.
            Collective::Broadcast => steps.push(Step::Broadcast {
                dst,
                src,
                bytes,
                root: call.root,
            }),
            Collective::Fcollect if call.in_place => {
                // This PE's block, which the input is, sent from a copy: NVSHMEM's source and
                // destination never overlap (module docs).
                steps.push(Step::Copy {
                    dst: call.scratch,
                    src,
                    bytes,
                });
                steps.push(Step::Fcollect {
                    dst,
                    src: call.scratch,
                    bytes,
                });
            }
            Collective::Fcollect => steps.push(Step::Fcollect { dst, src, bytes }),
            Collective::Alltoall => steps.push(Step::Alltoall { dst, src, bytes }),
            Collective::Barrier => steps.push(Step::Barrier { always: false }),
            Collective::Sync => steps.push(Step::Sync { always: false }),
            Collective::Gather | Collective::Scatter => unreachable!("refused"),
        }
    }
}

/// Accepts reductions by `op` whose sum NVSHMEM has.
fn refuse_around(call: &Call, wanted: &str, matches: bool) -> Option<String> {
    if !matches!(
        call.coll,
        Collective::AllReduce | Collective::Reduce | Collective::ReduceScatter
    ) {
        return Some(format!("{} is not a reduction", call.coll));
    }
    if !matches {
        return Some(format!("it runs {wanted} only, not {}", call.op.name()));
    }
    if call.dtype == DataType::Bool8 {
        return Some(format!("{} is not defined for bool8", call.op.name()));
    }
    // The sum NVSHMEM computes: of the wide type where the call is widened.
    let summed = around_of(call)
        .widened(call.dtype)
        .map_or(call.dtype, |(wide, _)| wide);
    refuse_reduction_of(summed, ReduceOp::Sum)
}

impl Algorithm for SumThenDiv {
    fn name(&self) -> &'static str {
        "sum_then_div"
    }

    fn refuses(&self, call: &Call) -> Option<String> {
        refuse_around(call, "avg", call.op == ReduceOp::Avg)
    }

    fn scratch(&self, call: &Call) -> usize {
        reduction_scratch(call, SUM_THEN_DIV)
    }

    fn plan(&self, call: &Call, steps: &mut Vec<Step>) {
        plan_reduction(call, SUM_THEN_DIV, steps)
    }
}

const SUM_THEN_DIV: Around = Around {
    op: ReduceOp::Sum,
    scale: None,
    divide: true,
};

impl ScaleThenSum {
    fn around(call: &Call) -> Around {
        let scale = match call.op {
            ReduceOp::PreMulSum(s) => Some(s),
            _ => None,
        };
        Around {
            op: ReduceOp::Sum,
            scale,
            divide: false,
        }
    }
}

impl Algorithm for ScaleThenSum {
    fn name(&self) -> &'static str {
        "scale_then_sum"
    }

    fn refuses(&self, call: &Call) -> Option<String> {
        refuse_around(
            call,
            "premul_sum",
            matches!(call.op, ReduceOp::PreMulSum(_)),
        )
    }

    fn scratch(&self, call: &Call) -> usize {
        reduction_scratch(call, Self::around(call))
    }

    fn plan(&self, call: &Call, steps: &mut Vec<Step>) {
        plan_reduction(call, Self::around(call), steps)
    }
}
