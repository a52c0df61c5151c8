//! NVSHMEM's own collectives ([`Native`]), and the two reductions NVSHMEM lacks built around
//! its sum: avg ([`SumThenDiv`]) and premul_sum ([`ScaleThenSum`]).
//!
//! NVSHMEM has no rooted reduction: a reduce to a root all-reduces into the collective
//! scratch, and the root takes the result out, so non-root outputs stay untouched. NVSHMEM
//! 3.4.5's 16-bit integer reductions fail above about 1 MiB a call
//! ([`ffi::max_reduce_count`]): all-reduces of those types run as several calls, and a
//! reduce-scatter whose blocks exceed the cap runs as an all-reduce into the scratch of which
//! each PE keeps its block.
use super::{Algorithm, Call, Collective, Step};
use crate::{
    ffi::{self, Reduction},
    kernels::Launch,
    DataType, ReduceOp,
};

/// NVSHMEM's own collective for the call: its typed reductions for the operators it has,
/// and its byte-wise broadcast, fcollect and alltoall for every type, its barrier and sync.
pub(super) struct Native;

/// avg: NVSHMEM's sum, then a kernel divides by the team size (integers: the sum wraps in the
/// type, then truncates toward zero, as NCCL).
pub(super) struct SumThenDiv;

/// premul_sum(s): a kernel scales the input (into the output or the scratch, never over the
/// caller's input), then NVSHMEM's sum.
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

fn refuse_reduction(call: &Call, op: ReduceOp) -> Option<String> {
    if !ffi::has_reduction(call.dtype, op) {
        return Some(format!(
            "NVSHMEM has no {} reduction of {}",
            op.name(),
            call.dtype
        ));
    }
    None
}

/// Whether a reduce-scatter's blocks are too long for one NVSHMEM call of the type.
fn long_blocks(call: &Call) -> bool {
    call.coll == Collective::ReduceScatter && call.count > ffi::max_reduce_count(call.dtype)
}

/// The scratch the NVSHMEM reductions need: the input's bytes for a rooted reduce (the result
/// lands there), for a reduce-scatter that scales its input or has long blocks (all `n`
/// blocks), nothing otherwise.
fn reduction_scratch(call: &Call, around: Around) -> usize {
    let input = call.src.len * call.dtype.size();
    match call.coll {
        Collective::Reduce => input,
        Collective::ReduceScatter if around.scale.is_some() || long_blocks(call) => input,
        _ => 0,
    }
}

/// `count` elements all-reduced from `src` into `dst` (identical or disjoint), as several
/// NVSHMEM calls when the type caps one (an all-reduce is element-wise, so chunks are
/// independent).
fn all_reduce(call: &Call, op: ReduceOp, dst: u64, src: u64, count: usize, steps: &mut Vec<Step>) {
    let (dtype, step) = (call.dtype, ffi::max_reduce_count(call.dtype).max(1));
    let mut done = 0;
    while done < count {
        let n = step.min(count - done);
        let off = (done * dtype.size()) as u64;
        steps.push(Step::Reduce {
            kind: Reduction::AllReduce,
            dtype,
            op,
            dst: dst + off,
            src: src + off,
            count: n,
        });
        done += n;
    }
}

fn map(dtype: DataType, divide: bool, src: u64, dst: u64, len: usize, factor: f64) -> Step {
    Step::Kernel(Launch::Map {
        dtype,
        divide,
        src,
        dst,
        len,
        factor,
    })
}

/// The plan of an NVSHMEM reduction with `around` it.
fn plan_reduction(call: &Call, around: Around, steps: &mut Vec<Step>) {
    let (dtype, n) = (call.dtype, call.n() as f64);
    let (src, dst, scratch, count) = (call.src.ptr, call.dst.ptr, call.scratch, call.count);
    let len = call.src.len;
    let divide = |from, to, len, steps: &mut Vec<Step>| {
        if around.divide {
            steps.push(map(dtype, true, from, to, len, n));
        }
    };
    // premul_sum scales the input into `to` and NVSHMEM reduces from there; the address
    // NVSHMEM reduces from.
    let scaled = |to, steps: &mut Vec<Step>| match around.scale {
        Some(s) => {
            steps.push(map(dtype, false, src, to, len, s));
            to
        }
        None => src,
    };
    // A result taken out of the scratch: divided on the way for avg, else copied.
    let take_out = |from, count: usize, steps: &mut Vec<Step>| {
        if around.divide {
            steps.push(map(dtype, true, from, dst, count, n));
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
            // premul_sum scales into dst (the input itself when in place, which the caller
            // gave up), and NVSHMEM sums dst in place: src stays as it was.
            let from = scaled(dst, steps);
            all_reduce(call, around.op, dst, from, len, steps);
            divide(dst, dst, len, steps);
        }
        Collective::Reduce => {
            // NVSHMEM writes its result on every PE: into the scratch, which the root takes
            // it out of (dividing on the way for avg).
            let from = scaled(scratch, steps);
            all_reduce(call, around.op, scratch, from, len, steps);
            if call.me == call.root {
                take_out(scratch, len, steps);
            }
        }
        Collective::ReduceScatter => {
            // premul_sum scales all n blocks into the scratch, and reduces from there.
            let from = scaled(scratch, steps);
            if long_blocks(call) {
                // All of it reduced into the scratch; this PE keeps its block. In place,
                // its block is written only after the all-reduce, which NVSHMEM completes
                // before any PE may reuse its input.
                all_reduce(call, around.op, scratch, from, len, steps);
                take_out(
                    scratch + (call.me * count * dtype.size()) as u64,
                    count,
                    steps,
                );
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
        reduction_scratch(
            call,
            Around {
                op: call.op,
                scale: None,
                divide: false,
            },
        )
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
    refuse_reduction(call, ReduceOp::Sum)
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
