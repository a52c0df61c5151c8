//! Which algorithm a reduction runs, and how much collective scratch it needs: pure functions
//! of the element's kind, whether NVSHMEM reduces the type, the operator and the call's shape,
//! so the choice is unit-tested without a GPU.
use super::op::{NvOp, ReduceOp};
use crate::kernels::ReduceOp as KernelOp;
use crate::ElementKind;

/// How a reduction runs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Plan {
    /// NVSHMEM's typed reduction by this operator.
    Nvshmem(NvOp),
    /// `avg`: NVSHMEM's sum, then the output divided by the team size in a kernel (integers
    /// truncate toward zero).
    SumThenDiv,
    /// `premul_sum(s)`: the input multiplied by `s` in a kernel (into the output or the
    /// scratch, never over the caller's input), then NVSHMEM's sum.
    ScaleThenSum(f64),
    /// This crate's kernel reading every member's input through peer-mapped memory (types
    /// NVSHMEM cannot compute on: fp8), with the scale for `premul_sum`.
    PeerKernel(KernelOp, f64),
}

/// The plan for a reduction by `op` (already checked against the kind) of elements of `kind`,
/// or what is missing. `nvshmem_reduces`: NVSHMEM has typed reductions for the type.
pub(crate) fn plan_reduce(
    kind: ElementKind,
    nvshmem_reduces: bool,
    op: ReduceOp,
) -> Result<Plan, String> {
    if nvshmem_reduces {
        return match (op, op.nvshmem()) {
            (_, Some(nv)) => Ok(Plan::Nvshmem(nv)),
            (ReduceOp::Avg, None) => Ok(Plan::SumThenDiv),
            (ReduceOp::PreMulSum(s), None) => Ok(Plan::ScaleThenSum(s)),
            (op, None) => Err(format!("no algorithm for operator {op}")),
        };
    }
    let kernel = match op {
        ReduceOp::Sum => KernelOp::Sum,
        ReduceOp::Min => KernelOp::Min,
        ReduceOp::Max => KernelOp::Max,
        ReduceOp::Avg => KernelOp::Avg,
        ReduceOp::PreMulSum(_) => KernelOp::PreMulSum,
        ReduceOp::And if kind == ElementKind::Bool => KernelOp::And,
        ReduceOp::Or if kind == ElementKind::Bool => KernelOp::Or,
        op => {
            return Err(format!(
                "operator {op}: NVSHMEM has no reductions on this type and this crate's peer \
                 kernels have sum, min, max, avg and premul_sum only"
            ))
        }
    };
    let scale = match op {
        ReduceOp::PreMulSum(s) => s,
        _ => 1.0,
    };
    Ok(Plan::PeerKernel(kernel, scale))
}

/// The reducing collectives, for [`scratch_needed`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reduction {
    AllReduce,
    /// Reduce to a root.
    Rooted,
    ReduceScatter,
}

/// Bytes of collective scratch a call needs; `input_bytes` is the size of the input (for
/// reduce-scatter all `n_pes` blocks).
///
/// - rooted reduce through NVSHMEM (every plan but the peer kernel): the input's size, the
///   result lands there and the root copies (or for avg divides) it out, so non-root outputs
///   stay untouched; `premul_sum` scales into the scratch and sums there in place, so it
///   needs no more;
/// - reduce-scatter with `premul_sum`: the whole input's size (`n_pes` blocks), the scaled
///   copy that NVSHMEM then reduce-scatters, leaving the caller's input alone;
/// - in-place all-reduce by the peer kernel: the input's size, since a PE writing its own
///   buffer while the others still read it would race;
/// - nothing otherwise.
pub(crate) fn scratch_needed(
    coll: Reduction,
    plan: Plan,
    in_place: bool,
    input_bytes: usize,
) -> usize {
    let peer = matches!(plan, Plan::PeerKernel(..));
    let needed = match coll {
        Reduction::Rooted => !peer,
        Reduction::ReduceScatter => matches!(plan, Plan::ScaleThenSum(_)),
        Reduction::AllReduce => peer && in_place,
    };
    if needed {
        input_bytes
    } else {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::element_ext::{Bool8, F8E4M3, F8E5M2};
    use crate::Element;

    fn plan<T: Element>(op: ReduceOp) -> Result<Plan, String> {
        op.check_for::<T>("t").map_err(|e| e.to_string())?;
        plan_reduce(T::KIND, T::NVSHMEM_REDUCES, op)
    }

    #[test]
    fn numeric_types_use_nvshmem_and_kernels_around_it() {
        macro_rules! numeric {
            ($t:ty) => {
                assert_eq!(plan::<$t>(ReduceOp::Sum), Ok(Plan::Nvshmem(NvOp::Sum)));
                assert_eq!(plan::<$t>(ReduceOp::Prod), Ok(Plan::Nvshmem(NvOp::Prod)));
                assert_eq!(plan::<$t>(ReduceOp::Max), Ok(Plan::Nvshmem(NvOp::Max)));
                assert_eq!(plan::<$t>(ReduceOp::Avg), Ok(Plan::SumThenDiv));
                assert_eq!(
                    plan::<$t>(ReduceOp::PreMulSum(2.0)),
                    Ok(Plan::ScaleThenSum(2.0))
                );
            };
        }
        crate::for_each_element!(numeric);
        assert_eq!(plan::<u32>(ReduceOp::Xor), Ok(Plan::Nvshmem(NvOp::Xor)));
        assert!(plan::<f32>(ReduceOp::Xor).is_err());
        assert!(plan::<i16>(ReduceOp::PreMulSum(1.5)).is_err());
    }

    #[test]
    fn bool8_uses_nvshmem_bytes() {
        // The table maps and/or to uint8 min/max (see table.rs).
        assert_eq!(plan::<Bool8>(ReduceOp::And), Ok(Plan::Nvshmem(NvOp::And)));
        assert_eq!(plan::<Bool8>(ReduceOp::Or), Ok(Plan::Nvshmem(NvOp::Or)));
        assert_eq!(plan::<Bool8>(ReduceOp::Min), Ok(Plan::Nvshmem(NvOp::Min)));
        assert_eq!(plan::<Bool8>(ReduceOp::Max), Ok(Plan::Nvshmem(NvOp::Max)));
        for op in [ReduceOp::Sum, ReduceOp::Xor, ReduceOp::Avg] {
            assert!(plan::<Bool8>(op).is_err(), "{op}");
        }
    }

    #[test]
    fn fp8_uses_the_peer_kernel() {
        fn fp8<T: Element>() {
            assert_eq!(
                plan::<T>(ReduceOp::Sum),
                Ok(Plan::PeerKernel(KernelOp::Sum, 1.0))
            );
            assert_eq!(
                plan::<T>(ReduceOp::Min),
                Ok(Plan::PeerKernel(KernelOp::Min, 1.0))
            );
            assert_eq!(
                plan::<T>(ReduceOp::Max),
                Ok(Plan::PeerKernel(KernelOp::Max, 1.0))
            );
            assert_eq!(
                plan::<T>(ReduceOp::Avg),
                Ok(Plan::PeerKernel(KernelOp::Avg, 1.0))
            );
            assert_eq!(
                plan::<T>(ReduceOp::PreMulSum(0.5)),
                Ok(Plan::PeerKernel(KernelOp::PreMulSum, 0.5))
            );
            let e = plan::<T>(ReduceOp::Prod).unwrap_err();
            assert!(e.contains("prod") && e.contains("peer kernels"), "{e}");
            assert!(plan::<T>(ReduceOp::And).is_err());
        }
        fp8::<F8E4M3>();
        fp8::<F8E5M2>();
        // Every peer-kernel plan is one the kernels implement for the type.
        for t in [
            crate::kernels::KernelType::F8E4M3,
            crate::kernels::KernelType::F8E5M2,
        ] {
            for op in ReduceOp::BASIC
                .into_iter()
                .chain([ReduceOp::PreMulSum(2.0)])
            {
                if let Ok(Plan::PeerKernel(k, _)) = plan_reduce(ElementKind::Float, false, op) {
                    assert!(k.supports(t), "{op} on {t}");
                }
            }
        }
    }

    #[test]
    fn scratch_per_call() {
        use Reduction::*;
        let nv = Plan::Nvshmem(NvOp::Sum);
        let peer = Plan::PeerKernel(KernelOp::Sum, 1.0);
        let scale = Plan::ScaleThenSum(2.0);
        // Rooted reduce through NVSHMEM: the array's bytes, in place or not, any operator.
        for p in [nv, Plan::SumThenDiv, scale] {
            assert_eq!(scratch_needed(Rooted, p, false, 4096), 4096);
            assert_eq!(scratch_needed(Rooted, p, true, 4096), 4096);
            assert_eq!(scratch_needed(AllReduce, p, true, 4096), 0);
        }
        assert_eq!(scratch_needed(Rooted, peer, false, 4096), 0);
        // Reduce-scatter: only premul_sum, the whole input.
        assert_eq!(scratch_needed(ReduceScatter, scale, false, 8192), 8192);
        assert_eq!(scratch_needed(ReduceScatter, scale, true, 8192), 8192);
        assert_eq!(scratch_needed(ReduceScatter, nv, false, 8192), 0);
        assert_eq!(
            scratch_needed(ReduceScatter, Plan::SumThenDiv, true, 8192),
            0
        );
        assert_eq!(scratch_needed(ReduceScatter, peer, true, 8192), 0);
        // All-reduce: only the peer kernel in place.
        assert_eq!(scratch_needed(AllReduce, peer, true, 100), 100);
        assert_eq!(scratch_needed(AllReduce, peer, false, 100), 0);
    }
}
