//! The collectives benchmarked: their table order, buffer layout and nccl-tests' bandwidth
//! factors. A collective is the library's [`nvshmem::collective::Collective`], with its names
//! (and every NCCL or MPI alias), root and reduction; what only the benchmark needs of it is
//! [`CollectiveExt`]. The input pattern and expected results for `--check` are in
//! [`crate::check`].
use nvshmem::collective::{Collective, Geometry};

/// Every collective, in the order the tables, `all` and `--help` list them (barrier and sync
/// first, then the data movers): the benchmark's order since its first tables, not the
/// library's [`Collective::ALL`].
pub const TABLE_ORDER: [Collective; 10] = [
    Collective::Barrier,
    Collective::Sync,
    Collective::AllReduce,
    Collective::Broadcast,
    Collective::Fcollect,
    Collective::Alltoall,
    Collective::ReduceScatter,
    Collective::Reduce,
    Collective::Gather,
    Collective::Scatter,
];

/// A collective by any name or alias the library knows (`all_reduce`, `allreduce`,
/// `all_gather`, `bcast`, `MPI_Allgather`, ...), if it is benchmarked ([`TABLE_ORDER`]). Only
/// collectives parsed here reach the implementations, whose matches on the library's
/// (non-exhaustive) enum refuse any other.
pub fn parse(s: &str) -> Result<Collective, String> {
    let c: Collective = s.parse().map_err(reason)?;
    if TABLE_ORDER.contains(&c) {
        Ok(c)
    } else {
        Err(format!("{c} is not benchmarked"))
    }
}

/// Where an in-place call's input and output lie in its one buffer, in elements: NCCL's
/// convention, which the library's in-place forms follow (their docs on `Team`). Input and
/// output are the whole buffer for all-reduce, reduce and broadcast; for all-gather and gather
/// the buffer is the output (`n` blocks) and the input is this PE's block of it (NCCL: `sendbuf
/// == recvbuf + rank * count`, on the root for gather); for reduce-scatter and scatter the buffer
/// is the input and the output is this PE's block (`recvbuf == sendbuf + rank * count`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InPlace {
    /// Elements of the one buffer.
    pub elems: usize,
    /// Where the input starts.
    pub input_at: usize,
    /// Where the output starts.
    pub output_at: usize,
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

/// What the benchmark needs of a collective beyond the library's description of it: which
/// points it sizes, its buffers and nccl-tests' bus-bandwidth factor.
pub trait CollectiveExt: Copy {
    /// Whether it moves no data (timed once per repetition set, at size 0).
    fn is_sync_only(self) -> bool;
    /// Whether the buffers are split in one chunk per PE, so the count must divide by `n`.
    fn is_chunked(self) -> bool;
    /// nccl-tests' bus-bandwidth factor for `n` PEs (busbw = algbw * factor).
    fn busbw_factor(self, n: usize) -> f64;
    /// The element count for a requested size in bytes, as nccl-tests rounds it: whole
    /// elements, and a multiple of `n` for chunked collectives. 0 means the size is too small.
    fn count_for(self, bytes: usize, elem_size: usize, n: usize) -> usize;
    /// One PE's buffers for `count` elements (`count` is the larger of input and output,
    /// as nccl-tests' size is).
    fn layout(self, count: usize, n: usize) -> Layout;
    /// The one buffer of an in-place call with `layout` on team PE `me`, or `None` for a
    /// collective without an in-place form (alltoall, barrier, sync).
    fn in_place(self, layout: Layout, me: usize) -> Option<InPlace>;
}

impl CollectiveExt for Collective {
    fn is_sync_only(self) -> bool {
        self.geometry() == Geometry::None
    }

    fn is_chunked(self) -> bool {
        matches!(
            self.geometry(),
            Geometry::Gathered | Geometry::Scattered | Geometry::Exchanged
        )
    }

    fn busbw_factor(self, n: usize) -> f64 {
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
            // Not benchmarked (`parse` keeps to TABLE_ORDER): no factor rather than a wrong one.
            _ => f64::NAN,
        }
    }

    fn count_for(self, bytes: usize, elem_size: usize, n: usize) -> usize {
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

    fn layout(self, count: usize, n: usize) -> Layout {
        let n = n.max(1);
        let geometry = self.geometry();
        // nccl-tests' size is the larger buffer: the block is that over n where chunked.
        let chunk = if self.is_chunked() { count / n } else { count };
        let (in_elems, out_elems) = geometry
            .lengths(chunk, n)
            .expect("n chunks of count / n are at most count");
        Layout {
            in_elems,
            out_elems,
            chunk,
        }
    }

    fn in_place(self, layout: Layout, me: usize) -> Option<InPlace> {
        let own = me * layout.chunk;
        match self.geometry() {
            Geometry::Same => Some(InPlace {
                elems: layout.in_elems,
                input_at: 0,
                output_at: 0,
            }),
            Geometry::Gathered => Some(InPlace {
                elems: layout.out_elems,
                input_at: own,
                output_at: 0,
            }),
            Geometry::Scattered => Some(InPlace {
                elems: layout.in_elems,
                input_at: 0,
                output_at: own,
            }),
            _ => None,
        }
    }
}

/// Why the library refused a name, without the name of its parser (clap says which flag).
pub fn reason(e: nvshmem::Error) -> String {
    match e {
        nvshmem::Error::InvalidArgument { reason, .. } => reason,
        e => e.to_string(),
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

    /// NCCL's pointer rules (nccl4py's docs of allgather, gather, reduce_scatter and scatter):
    /// the input or output block of an in-place call is the PE's own, `rank * count` elements
    /// into the buffer that is the other side.
    #[test]
    fn in_place_buffers_follow_nccl() {
        for n in [1, 2, 3, 8] {
            for me in 0..n {
                let c = 4;
                for coll in [Collective::Fcollect, Collective::Gather] {
                    let l = coll.layout(c * n, n);
                    let ip = coll.in_place(l, me).unwrap();
                    // sendbuf == recvbuf + rank * sendcount; recvbuf holds n blocks.
                    assert_eq!(
                        ip,
                        InPlace {
                            elems: n * c,
                            input_at: me * c,
                            output_at: 0
                        }
                    );
                    assert_eq!((ip.elems, l.in_elems), (l.out_elems, c));
                }
                for coll in [Collective::ReduceScatter, Collective::Scatter] {
                    let l = coll.layout(c * n, n);
                    let ip = coll.in_place(l, me).unwrap();
                    // recvbuf == sendbuf + rank * recvcount; sendbuf holds n blocks.
                    assert_eq!(
                        ip,
                        InPlace {
                            elems: n * c,
                            input_at: 0,
                            output_at: me * c
                        }
                    );
                    assert_eq!((ip.elems, l.out_elems), (l.in_elems, c));
                }
                for coll in [
                    Collective::AllReduce,
                    Collective::Reduce,
                    Collective::Broadcast,
                ] {
                    let ip = coll.in_place(coll.layout(10, n), me).unwrap();
                    assert_eq!(
                        ip,
                        InPlace {
                            elems: 10,
                            input_at: 0,
                            output_at: 0
                        }
                    );
                }
                for coll in [Collective::Alltoall, Collective::Barrier, Collective::Sync] {
                    assert_eq!(coll.in_place(coll.layout(8 * n, n), me), None);
                }
            }
        }
    }

    #[test]
    fn names_and_aliases_are_the_library_s() {
        for c in TABLE_ORDER {
            assert_eq!(parse(c.name()), Ok(c));
        }
        // Every collective of the library is benchmarked, once.
        assert_eq!(TABLE_ORDER.len(), Collective::ALL.len());
        for c in Collective::ALL {
            assert_eq!(TABLE_ORDER.iter().filter(|&&t| t == c).count(), 1, "{c}");
        }
        for (alias, c) in [
            ("allreduce", Collective::AllReduce),
            ("all_gather", Collective::Fcollect),
            ("allgather", Collective::Fcollect),
            ("MPI_Allgather", Collective::Fcollect),
            ("bcast", Collective::Broadcast),
            ("all-to-all", Collective::Alltoall),
            ("reducescatter", Collective::ReduceScatter),
            ("team_sync", Collective::Sync),
        ] {
            assert_eq!(parse(alias), Ok(c), "{alias}");
        }
        let e = parse("nonsense").unwrap_err();
        assert!(
            e.contains("\"nonsense\": expected one of all_reduce"),
            "{e}"
        );
    }
}
