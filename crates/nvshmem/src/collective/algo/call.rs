//! What a collective call is: the public [`Collective`] names, and [`Call`], one call as
//! every algorithm sees it.
use std::{fmt, str::FromStr};

#[cfg(doc)]
use super::{choice, ALGORITHMS_VAR};
use super::{crossover, registry};
use crate::{
    collective::check::Span, kernels::TeamDescriptor, team::TeamShape, DataType, Error, ReduceOp,
    Result,
};
#[cfg(doc)]
use crate::{Runtime, Team};

macro_rules! collectives {
    ($($variant:ident $name:literal [$($alias:literal),*] $geometry:ident
        rooted $rooted:literal reduces $reduces:literal $doc:literal;)*) => {
        /// A collective operation, to name it when forcing an algorithm or reporting.
        ///
        /// Parsed from its name (`all_reduce`) and from NCCL's and MPI's names for it
        /// (`allreduce`, `AllReduce`, `all_gather`, `MPI_Allgather`, ...).
        ///
        /// ```
        /// use nvshmem::collective::Collective;
        /// assert_eq!("allgather".parse::<Collective>()?, Collective::Fcollect);
        /// assert_eq!(Collective::AllReduce.to_string(), "all_reduce");
        /// assert!(Collective::Gather.algorithms().contains(&"rooted_get"));
        /// # Ok::<(), nvshmem::Error>(())
        /// ```
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[non_exhaustive]
        pub enum Collective {
            $(#[doc = $doc] $variant,)*
        }

        impl Collective {
            /// Every collective.
            ///
            /// ```
            /// assert_eq!(nvshmem::collective::Collective::ALL.len(), 10);
            /// ```
            pub const ALL: [Collective; 10] = [$(Collective::$variant),*];

            /// The name (`all_reduce`, `reduce_scatter`, ...), as the benchmark and
            /// [`ALGORITHMS_VAR`] write it.
            ///
            /// ```
            /// assert_eq!(nvshmem::collective::Collective::ReduceScatter.name(), "reduce_scatter");
            /// ```
            pub const fn name(self) -> &'static str {
                match self { $(Collective::$variant => $name,)* }
            }

            /// The name of the in-place call (`all_reduce_in_place`), as its errors name it;
            /// `None` for a collective without an in-place form ([`Geometry::has_in_place`]).
            pub(crate) const fn in_place_name(self) -> Option<&'static str> {
                let name = match self { $(Collective::$variant => concat!($name, "_in_place"),)* };
                if self.geometry().has_in_place() {
                    Some(name)
                } else {
                    None
                }
            }

            fn aliases(self) -> &'static [&'static str] {
                match self { $(Collective::$variant => &[$($alias),*],)* }
            }

            /// How its buffers relate ([`Geometry`]).
            ///
            /// ```
            /// use nvshmem::collective::{Collective, Geometry};
            /// assert_eq!(Collective::Fcollect.geometry(), Geometry::Gathered);
            /// ```
            pub const fn geometry(self) -> Geometry {
                match self { $(Collective::$variant => Geometry::$geometry,)* }
            }

            /// Whether it has a root PE.
            ///
            /// ```
            /// use nvshmem::collective::Collective;
            /// assert!(Collective::Gather.is_rooted() && !Collective::Fcollect.is_rooted());
            /// ```
            pub const fn is_rooted(self) -> bool {
                match self { $(Collective::$variant => $rooted,)* }
            }

            /// Whether it reduces (takes a [`ReduceOp`]).
            ///
            /// ```
            /// use nvshmem::collective::Collective;
            /// assert!(Collective::ReduceScatter.reduces() && !Collective::Scatter.reduces());
            /// ```
            pub const fn reduces(self) -> bool {
                match self { $(Collective::$variant => $reduces,)* }
            }
        }
    };
}

/// How a collective's two buffers relate, for a team of `n` PEs: the one description of a
/// collective's layout, from which the argument checks, the shape rules and the benchmark's
/// buffers derive.
///
/// ```
/// use nvshmem::collective::Geometry;
/// // (input, output) elements a PE for blocks of 4 elements in a team of 3.
/// assert_eq!(Geometry::Scattered.lengths(4, 3), Some((12, 4)));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Geometry {
    /// No buffers (barrier, sync).
    None,
    /// Input and output of one length (all-reduce, reduce, broadcast).
    Same,
    /// The output is `n` blocks, one from each PE in team order; the input one block
    /// (fcollect, gather).
    Gathered,
    /// The input is `n` blocks, block `i` for team PE `i`; the output one block
    /// (reduce-scatter, scatter).
    Scattered,
    /// Input and output are `n` blocks each; input block `j` goes to team PE `j`, output
    /// block `i` came from team PE `i` (alltoall).
    Exchanged,
}

impl Geometry {
    /// Input and output lengths of one PE, in elements, for blocks of `count` elements in a
    /// team of `n`; `None` where `n` blocks of `count` overflow a `usize` (no buffer holds
    /// them).
    ///
    /// ```
    /// use nvshmem::collective::Geometry;
    /// assert_eq!(Geometry::Gathered.lengths(4, 3), Some((4, 12)));
    /// assert_eq!(Geometry::Exchanged.lengths(4, 3), Some((12, 12)));
    /// assert_eq!(Geometry::Gathered.lengths(usize::MAX, 2), None);
    /// assert_eq!(Geometry::Same.lengths(usize::MAX, 2), Some((usize::MAX, usize::MAX)));
    /// ```
    pub const fn lengths(self, count: usize, n: usize) -> Option<(usize, usize)> {
        match (self, count.checked_mul(n)) {
            (Geometry::None, _) => Some((0, 0)),
            (Geometry::Same, _) => Some((count, count)),
            (Geometry::Gathered, Some(all)) => Some((count, all)),
            (Geometry::Scattered, Some(all)) => Some((all, count)),
            (Geometry::Exchanged, Some(all)) => Some((all, all)),
            (_, None) => None,
        }
    }

    /// Whether the collective has an in-place form (`_in_place` calls): every geometry but
    /// the exchange and none.
    ///
    /// ```
    /// assert!(!nvshmem::collective::Geometry::Exchanged.has_in_place());
    /// ```
    pub const fn has_in_place(self) -> bool {
        matches!(
            self,
            Geometry::Same | Geometry::Gathered | Geometry::Scattered
        )
    }
}

// The one table of the collectives: name, NCCL's and MPI's names, geometry, root, reduction.
collectives! {
    AllReduce "all_reduce" ["allreduce", "mpi_allreduce"] Same
        rooted false reduces true "All-reduce ([`Team::all_reduce`]).";
    Reduce "reduce" ["mpi_reduce"] Same
        rooted true reduces true "Reduce to a root ([`Team::reduce`]).";
    Broadcast "broadcast" ["bcast", "mpi_bcast"] Same
        rooted true reduces false "Broadcast ([`Team::broadcast`]).";
    Fcollect "fcollect" ["all_gather", "allgather", "mpi_allgather"] Gathered
        rooted false reduces false "All-gather ([`Team::fcollect`]).";
    Alltoall "alltoall" ["all_to_all", "mpi_alltoall"] Exchanged
        rooted false reduces false "All-to-all ([`Team::alltoall`]).";
    ReduceScatter "reduce_scatter" ["reducescatter", "mpi_reduce_scatter_block"] Scattered
        rooted false reduces true "Reduce-scatter ([`Team::reduce_scatter`]).";
    Gather "gather" ["mpi_gather"] Gathered
        rooted true reduces false "Gather to a root ([`Team::gather`]).";
    Scatter "scatter" ["mpi_scatter"] Scattered
        rooted true reduces false "Scatter from a root ([`Team::scatter`]).";
    Barrier "barrier" ["mpi_barrier"] None
        rooted false reduces false "Barrier ([`Team::barrier`], [`Runtime::barrier_all`]).";
    Sync "sync" ["team_sync", "sync_all"] None
        rooted false reduces false "Synchronisation ([`Team::sync`], [`Runtime::sync_all`]).";
}

impl Collective {
    /// The names of the algorithms that can run this collective, in the order the automatic
    /// choice tries them.
    ///
    /// ```
    /// use nvshmem::collective::Collective;
    /// assert_eq!(
    ///     Collective::Broadcast.algorithms(),
    ///     ["local", "nvlink_ll", "nvlink_lamport", "nvlink_ce", "nvlink_direct", "nvshmem"]
    /// );
    /// ```
    pub fn algorithms(self) -> Vec<&'static str> {
        registry(self).iter().map(|a| a.name()).collect()
    }

    pub(super) fn index(self) -> usize {
        Collective::ALL
            .iter()
            .position(|&c| c == self)
            .expect("ALL lists every collective")
    }
}

impl fmt::Display for Collective {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Collective {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        let key = s.trim().to_ascii_lowercase().replace('-', "_");
        Collective::ALL
            .into_iter()
            .find(|c| c.name() == key || c.aliases().contains(&key.as_str()))
            .ok_or_else(|| {
                let names: Vec<_> = Collective::ALL.iter().map(|c| c.name()).collect();
                Error::arg(
                    "Collective::from_str",
                    "collective",
                    format_args!("{s:?}: expected one of {}", names.join(", ")),
                )
            })
    }
}

/// One collective call, as every algorithm sees it. Made after the arguments were checked.
#[derive(Debug, Clone)]
pub(crate) struct Call<'a> {
    pub(crate) coll: Collective,
    /// The public call, for errors (`"all_reduce_in_place"`).
    pub(crate) name: &'static str,
    pub(crate) team: &'a TeamShape,
    /// This PE's index in the team.
    pub(crate) me: usize,
    pub(crate) dtype: DataType,
    /// The operator (reductions only; `Sum` otherwise, and unused).
    pub(crate) op: ReduceOp,
    /// The root (rooted collectives only; 0 otherwise).
    pub(crate) root: usize,
    pub(crate) src: Span,
    pub(crate) dst: Span,
    /// Elements of one PE's part: the whole input of all-reduce, reduce and broadcast; one
    /// block of the others (a PE's input of fcollect and gather, its output of reduce-scatter
    /// and scatter, one destination's share of alltoall); 0 for barrier and sync.
    pub(crate) count: usize,
    /// The input is (part of) the output, as the in-place forms define it.
    pub(crate) in_place: bool,
    /// The collective scratch, held for the call (0 when the algorithm needs none).
    pub(crate) scratch: u64,
    /// Bytes of collective scratch reserved ([`Runtime::reserve_scratch`]), the same on every
    /// PE: the automatic choice passes over an algorithm that needs more while another fits
    /// ([`choice`]).
    pub(crate) room: usize,
    /// The NVLink kernels' view of the team (its channel), when the team has one.
    pub(crate) descriptor: Option<TeamDescriptor>,
    /// The team's architecture, agreed when the team was made (every member's compute
    /// capability, where they all share one; `None` where they differ or it is unknown), set
    /// by `check_call` from the team: the crossovers depend on it ([`crossover`]), and every
    /// member reads the same.
    pub(crate) arch: Option<crossover::Arch>,
}

impl Call<'_> {
    /// Whether the collective reduces.
    pub(crate) fn is_reduction(&self) -> bool {
        self.coll.reduces()
    }

    /// Whether the call has no data to move, and so queues nothing (barrier and sync always
    /// run).
    pub(crate) fn is_empty(&self) -> bool {
        self.count == 0 && self.coll.geometry() != Geometry::None
    }

    /// Team size.
    pub(crate) fn n(&self) -> usize {
        self.team.n_pes
    }

    /// Bytes of one PE's part ([`Call::count`] elements).
    pub(crate) fn block_bytes(&self) -> usize {
        self.count * self.dtype.size()
    }

    /// Member `j`'s own block of a gather (its input) or a scatter (its output), as a
    /// symmetric address: the same array on every member, so the same number names it
    /// everywhere. Not in place that is the `src` (gather) or `dst` (scatter) every member
    /// passes; in place, block `j` of the whole buffer.
    pub(crate) fn member_block(&self, j: usize) -> u64 {
        let (whole, own) = match self.coll {
            Collective::Scatter => (&self.src, &self.dst),
            _ => (&self.dst, &self.src),
        };
        if self.in_place {
            whole.ptr + (j * self.block_bytes()) as u64
        } else {
            own.ptr
        }
    }

    /// The address of `addr` (a symmetric address) on team member `j`, as this GPU loads and
    /// stores it; `None` unless every member is peer-mapped.
    pub(crate) fn peer(&self, addr: u64, j: usize) -> Option<u64> {
        let off = self.team.peer_offsets.as_ref()?;
        Some(addr.wrapping_add(off[j] as u64))
    }

    /// Whether this PE can load and store every member's symmetric memory.
    pub(crate) fn peer_mapped(&self) -> bool {
        self.team.peer_offsets.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `lengths(usize::MAX, 2)` multiplied unchecked: a panic in a debug build, and in release
    /// a wrapped length, from which a program or a benchmark would size a buffer too short.
    #[test]
    fn lengths_that_overflow_are_none() {
        for g in [Geometry::Gathered, Geometry::Scattered, Geometry::Exchanged] {
            assert_eq!(g.lengths(usize::MAX, 2), None, "{g:?}");
            assert_eq!(g.lengths(usize::MAX / 2 + 1, 2), None, "{g:?}");
            let (i, o) = g.lengths(usize::MAX / 2, 2).unwrap();
            assert_eq!(i.max(o), usize::MAX - 1, "{g:?}");
        }
        // A geometry that multiplies nothing has lengths for any team.
        let most = usize::MAX;
        assert_eq!(Geometry::Same.lengths(most, most), Some((most, most)));
        assert_eq!(Geometry::None.lengths(most, most), Some((0, 0)));
    }
}
