//! Teams of one PE ([`Local`], `local`): the PE's own data is all the call has, so a call
//! costs the copy it needs, or nothing.
//!
//! - Every collective that moves data (all-reduce, reduce, broadcast, fcollect, alltoall,
//!   reduce-scatter, gather, scatter), out of place: one device-to-device copy of the call's
//!   bytes on the stream (`cuMemcpyDtoDAsync`, a memcpy node in a CUDA graph, as NCCL's own
//!   one-rank calls); in place: nothing. A reduction of one input is that input, bit for bit,
//!   as the other algorithms give it (their kernels start from the first member's value and
//!   combine nothing more; avg divides by 1): sum, prod, min, max, and, or, xor and avg are
//!   the copy. [`Bool8`](crate::element::Bool8) keeps its byte as read, as NVSHMEM's path
//!   does (the kernels would write 1 for any non-zero byte: the same truth value).
//! - What a copy would not give: premul_sum multiplies by its scale (this crate's `nvr_map`
//!   kernel, which computes as the reduction kernels do, in place or not) unless the scale is
//!   exactly 1; and fp8, which only this crate's kernels reduce, goes through the same kernel
//!   (times 1) for every operator, because their store saturates to the largest finite value
//!   (an e5m2 infinity) and writes one NaN pattern: the result is what they give.
//! - Barrier: [`Step::Quiet`] (`nvshmemx_quiet_on_stream`), since a barrier also completes
//!   the RMA this PE issued before it (to PEs outside the team too). On a stream with no
//!   remote transport NVSHMEM queues nothing for it; in a graph, one small kernel. The
//!   ordering a barrier gives is the stream's own order on one PE. In a job of one PE
//!   (`TeamShape::alone_in_job`) there is no other PE to complete RMA to: nothing, in a
//!   graph too.
//! - Sync: nothing (a sync completes no RMA, and one member has no one to wait for).
//!
//! An empty plan still goes through the call's normal path: it notes its use of the team and
//! the arrays on the stream, so the team's calls stay ordered across streams.
//!
//! The automatic choice tries it first, and it refuses every team of more than one PE (the
//! team size is agreed, so every PE chooses alike). Another algorithm can still be forced on
//! a one-PE team (`NVSHMEM_RS_ALGORITHMS=all_reduce=nvshmem`), to compare.
use super::{Algorithm, Call, Collective, Step};
use crate::{kernels, DataType, ReduceOp};

/// Collectives on a team of one PE.
pub(super) struct Local;

/// The factor a one-PE reduction must multiply its input by, where a copy would not give the
/// bits the reduction kernels give (module docs): premul_sum's scale unless it is exactly 1,
/// and 1 for fp8.
fn factor(call: &Call) -> Option<f64> {
    if !call.is_reduction() {
        return None;
    }
    let fp8 = matches!(call.dtype, DataType::F8E4M3 | DataType::F8E5M2);
    match call.op {
        ReduceOp::PreMulSum(s) if s != 1.0 || fp8 => Some(s),
        _ if fp8 => Some(1.0),
        _ => None,
    }
}

impl Algorithm for Local {
    fn name(&self) -> &'static str {
        "local"
    }

    fn takes_team_of(&self, n: usize) -> bool {
        n == 1
    }

    fn refuses(&self, call: &Call) -> Option<String> {
        if !self.takes_team_of(call.n()) {
            return Some(format!(
                "it runs teams of one PE; this team has {}",
                call.n()
            ));
        }
        None
    }

    fn plan(&self, call: &Call, steps: &mut Vec<Step>) {
        let (src, dst) = (call.src.ptr, call.dst.ptr);
        match call.coll {
            Collective::Barrier if !call.team.alone_in_job => steps.push(Step::Quiet),
            Collective::Barrier => {}
            Collective::Sync => {}
            _ => {
                // One PE's part is the whole of both buffers, whatever the geometry; in place
                // (the in-place forms, or the same array for all-reduce, reduce, broadcast)
                // they are the same address, else disjoint (the checks refuse any other
                // overlap).
                if let Some(factor) = factor(call) {
                    steps.push(Step::Kernel(kernels::Launch::Map {
                        dtype: call.dtype,
                        kind: crate::kernels::MapKind::Mul,
                        src,
                        dst,
                        len: call.count,
                        factor,
                    }));
                } else if src != dst {
                    steps.push(Step::Copy {
                        dst,
                        src,
                        bytes: call.block_bytes(),
                    });
                }
            }
        }
    }
}
