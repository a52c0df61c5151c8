//! The collectives benchmarked: buffer layout, nccl-tests' bandwidth factors, and the input
//! pattern with its expected result for `--check`.
use clap::ValueEnum;
use serde::Serialize;

use crate::dtype::RedOp;

/// A collective (`--collective`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, ValueEnum, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Collective {
    /// Barrier over the team (NVSHMEM `barrier_all`; NCCL: a one-element all-reduce).
    Barrier,
    /// Sync over the team: a barrier without the memory-ordering guarantee (NVSHMEM only).
    Sync,
    /// All-reduce (NVSHMEM `reduce`).
    #[value(alias = "allreduce")]
    AllReduce,
    /// Broadcast from the root.
    #[value(alias = "bcast")]
    Broadcast,
    /// All-gather (NVSHMEM `fcollect`).
    #[value(alias = "all_gather", alias = "allgather")]
    Fcollect,
    /// All-to-all.
    #[value(alias = "all_to_all")]
    Alltoall,
    /// Reduce-scatter.
    #[value(alias = "reducescatter")]
    ReduceScatter,
    /// Reduce to the root.
    Reduce,
    /// Gather to the root.
    Gather,
    /// Scatter from the root.
    Scatter,
}

/// Element counts of one PE's buffers for a collective of `count` elements.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    /// Elements in one PE's input buffer.
    pub in_elems: usize,
    /// Elements in one PE's output buffer.
    pub out_elems: usize,
    /// Elements each PE contributes or receives in chunked collectives (else `count`).
    pub chunk: usize,
}

impl Collective {
    /// Every collective, in table order.
    pub fn all() -> &'static [Collective] {
        Collective::value_variants()
    }

    /// The snake-case name in tables and files.
    pub fn name(self) -> &'static str {
        match self {
            Collective::Barrier => "barrier",
            Collective::Sync => "sync",
            Collective::AllReduce => "all_reduce",
            Collective::Broadcast => "broadcast",
            Collective::Fcollect => "fcollect",
            Collective::Alltoall => "alltoall",
            Collective::ReduceScatter => "reduce_scatter",
            Collective::Reduce => "reduce",
            Collective::Gather => "gather",
            Collective::Scatter => "scatter",
        }
    }

    /// Whether it moves no data (timed once per repetition set, at size 0).
    pub fn is_sync_only(self) -> bool {
        matches!(self, Collective::Barrier | Collective::Sync)
    }

    /// Whether `-o` applies.
    pub fn has_op(self) -> bool {
        matches!(
            self,
            Collective::AllReduce | Collective::ReduceScatter | Collective::Reduce
        )
    }

    /// Whether `-r` applies.
    pub fn has_root(self) -> bool {
        matches!(
            self,
            Collective::Broadcast | Collective::Reduce | Collective::Gather | Collective::Scatter
        )
    }

    /// Whether the buffers are split in one chunk per PE, so the count must divide by `n`.
    pub fn is_chunked(self) -> bool {
        matches!(
            self,
            Collective::Fcollect
                | Collective::Alltoall
                | Collective::ReduceScatter
                | Collective::Gather
                | Collective::Scatter
        )
    }

    /// nccl-tests' bus-bandwidth factor for `n` PEs (busbw = algbw * factor).
    pub fn busbw_factor(self, n: usize) -> f64 {
        let n = n.max(1) as f64;
        match self {
            Collective::Barrier | Collective::Sync => 0.0,
            Collective::AllReduce => 2.0 * (n - 1.0) / n,
            Collective::Broadcast | Collective::Reduce => 1.0,
            Collective::Fcollect
            | Collective::Alltoall
            | Collective::ReduceScatter
            | Collective::Gather
            | Collective::Scatter => (n - 1.0) / n,
        }
    }

    /// The element count for a requested size in bytes, as nccl-tests rounds it: whole
    /// elements, and a multiple of `n` for chunked collectives. 0 means the size is too small.
    pub fn count_for(self, bytes: usize, elem_size: usize, n: usize) -> usize {
        if self.is_sync_only() {
            return 0;
        }
        let count = bytes / elem_size.max(1);
        if self.is_chunked() {
            count - count % n.max(1)
        } else {
            count
        }
    }

    /// One PE's buffers for `count` elements (`count` is the larger of input and output,
    /// as nccl-tests' size is).
    pub fn layout(self, count: usize, n: usize) -> Layout {
        let n = n.max(1);
        let per = count / n;
        let (in_elems, out_elems, chunk) = match self {
            Collective::Barrier | Collective::Sync => (0, 0, 0),
            Collective::AllReduce | Collective::Broadcast | Collective::Reduce => {
                (count, count, count)
            }
            Collective::Fcollect | Collective::Gather => (per, count, per),
            Collective::ReduceScatter | Collective::Scatter => (count, per, per),
            Collective::Alltoall => (count, count, per),
        };
        Layout {
            in_elems,
            out_elems,
            chunk,
        }
    }
}

/// The value PE `pe` puts at index `i` of its input. Small integers, exact in every type and
/// under every operator for the PE counts benchmarked (products stay below 2^(n/4+1)).
pub fn input_value(pe: usize, i: usize, op: RedOp) -> f64 {
    match op {
        RedOp::Prod => {
            if (i + pe) & 3 == 0 {
                2.0
            } else {
                1.0
            }
        }
        _ => (1 + (pe * 3 + i) % 5) as f64,
    }
}

/// What PE `me` should hold at index `k` of its output, or `None` where the collective leaves
/// it unspecified (outputs of non-root PEs for rooted reductions and gathers).
pub fn expected(
    coll: Collective,
    k: usize,
    me: usize,
    n: usize,
    root: usize,
    op: RedOp,
    layout: Layout,
) -> Option<f64> {
    let reduce_all = |i: usize| {
        (1..n).fold(input_value(0, i, op), |acc, pe| {
            op.combine(acc, input_value(pe, i, op))
        })
    };
    let c = layout.chunk.max(1);
    match coll {
        Collective::Barrier | Collective::Sync => None,
        Collective::AllReduce => Some(reduce_all(k)),
        Collective::Reduce => (me == root).then(|| reduce_all(k)),
        Collective::Broadcast => Some(input_value(root, k, op)),
        Collective::Fcollect => Some(input_value(k / c, k % c, op)),
        Collective::Gather => (me == root).then(|| input_value(k / c, k % c, op)),
        Collective::ReduceScatter => Some(reduce_all(me * c + k)),
        Collective::Alltoall => Some(input_value(k / c, me * c + k % c, op)),
        Collective::Scatter => Some(input_value(root, me * c + k, op)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn busbw_factors_follow_nccl_tests() {
        assert_eq!(Collective::AllReduce.busbw_factor(2), 1.0);
        assert_eq!(Collective::AllReduce.busbw_factor(8), 1.75);
        assert_eq!(Collective::ReduceScatter.busbw_factor(4), 0.75);
        assert_eq!(Collective::Fcollect.busbw_factor(2), 0.5);
        assert_eq!(Collective::Alltoall.busbw_factor(8), 0.875);
        assert_eq!(Collective::Broadcast.busbw_factor(8), 1.0);
        assert_eq!(Collective::Reduce.busbw_factor(8), 1.0);
        assert_eq!(Collective::Barrier.busbw_factor(8), 0.0);
        assert_eq!(Collective::AllReduce.busbw_factor(1), 0.0);
    }

    #[test]
    fn counts_round_like_nccl_tests() {
        assert_eq!(Collective::AllReduce.count_for(8, 4, 2), 2);
        assert_eq!(Collective::AllReduce.count_for(10, 4, 3), 2);
        assert_eq!(Collective::Fcollect.count_for(8, 4, 3), 0);
        assert_eq!(Collective::Fcollect.count_for(28, 4, 3), 6);
        assert_eq!(Collective::Barrier.count_for(1 << 20, 4, 2), 0);
    }

    #[test]
    fn layouts() {
        let l = Collective::Fcollect.layout(8, 2);
        assert_eq!((l.in_elems, l.out_elems, l.chunk), (4, 8, 4));
        let l = Collective::ReduceScatter.layout(8, 4);
        assert_eq!((l.in_elems, l.out_elems, l.chunk), (8, 2, 2));
        let l = Collective::Alltoall.layout(8, 4);
        assert_eq!((l.in_elems, l.out_elems, l.chunk), (8, 8, 2));
    }

    #[test]
    fn expected_results() {
        let op = RedOp::Sum;
        let l = Collective::AllReduce.layout(4, 2);
        let want = input_value(0, 1, op) + input_value(1, 1, op);
        assert_eq!(
            expected(Collective::AllReduce, 1, 1, 2, 0, op, l),
            Some(want)
        );
        let l = Collective::Alltoall.layout(4, 2);
        // PE 1's output chunk 0 comes from PE 0's chunk 1.
        assert_eq!(
            expected(Collective::Alltoall, 1, 1, 2, 0, op, l),
            Some(input_value(0, 3, op))
        );
        let l = Collective::Gather.layout(4, 2);
        assert_eq!(expected(Collective::Gather, 3, 1, 2, 0, op, l), None);
        assert_eq!(
            expected(Collective::Gather, 3, 0, 2, 0, op, l),
            Some(input_value(1, 1, op))
        );
        let l = Collective::ReduceScatter.layout(4, 2);
        assert_eq!(
            expected(Collective::ReduceScatter, 0, 1, 2, 0, op, l),
            Some(input_value(0, 2, op) + input_value(1, 2, op))
        );
    }
}
