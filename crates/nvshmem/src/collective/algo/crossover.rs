//! The automatic choice's crossovers, in one table: for each collective, team size and GPU
//! architecture, the block sizes (bytes of one PE's part, [`Call::block_bytes`]) at which this
//! crate's NVLink algorithms are preferred over what follows them in the registry.
//!
//! Each [`Row`] holds four preferences: LL (`nvlink_ll`) up to [`Row::ll`] bytes, the Lamport
//! kernels (`nvlink_lamport`: float reductions, and copies of any type) for blocks in
//! [`Row::lamport`], the direct kernels (`nvlink_direct`) for blocks in [`Row::direct`], the
//! copy engines (`nvlink_ce`, data movement only) for blocks in [`Row::ce`]. Where two hold at
//! once the registry's order decides (LL, then Lamport or the copy engines, then the direct
//! kernels), except that LL gives way to Lamport for a call in Lamport's band that the Lamport
//! kernel accepts (a float reduction, or a copy), even within LL's limit; where
//! none holds, NVSHMEM's own collectives (or, for
//! gather and scatter, which NVSHMEM lacks, `rooted_get`) run. Every row says what it rests
//! on ([`Basis`]): the `nvshmem-perf` runs that measured it and their figures, or, where
//! nothing was measured, why its values are a safe default. `docs/performance.md` has the
//! measurements in full ("Crossovers").
//!
//! What has been measured: teams of 2 PEs on 2 x H200 and of 4 PEs on 4 x H200 (sm_90, one PE
//! a GPU); 2 PEs on 2 x H100 swept with every algorithm forced found the same choices
//! (`docs/perf/sweep-h100-2026-11-28`, read by the sweep test below). Everything else takes
//! the *conservative rows* ([`ROWS`], `arch: None`), chosen so that a wrong guess costs little:
//! - LL only for payloads small enough that each PE's LL traffic, `(n - 1)` blocks in or out,
//!   stays within what won on 2 PEs (LL's cost there is the launch and one flag exchange,
//!   which do not grow with the payload);
//! - the direct kernels only where the alternative is not NVSHMEM's own collective, or needs
//!   collective scratch a program on a peer-mapped team never had to reserve: the rooted
//!   reduce (NVSHMEM has none: its path all-reduces into the scratch), gather and scatter up
//!   to 16 MiB blocks (NVSHMEM has none: `rooted_get` was about 5 times slower at 8 B),
//!   reductions NVSHMEM cannot compute itself (fp8, `avg`, `premul_sum`; its wrappers need
//!   scratch for some, and `peer_kernel` loads every member's whole input) and, in every row,
//!   16-bit integer and bitwise reductions (NVSHMEM 3.4.5 runs the first at about 2 GB/s, and
//!   both in its own kernels, where one wrong bitwise result was seen), and alltoall at
//!   every size past LL (NVSHMEM's alltoall was slower at every size measured on 2 and 4 PEs,
//!   and hangs inside CUDA graphs at large sizes: `ALLTOALL_ASSUMED`);
//! - NVSHMEM's path for everything else, the copy engines never (their gain on 2 PEs was
//!   4-8 % past 16-64 MiB blocks, and with more peers each PE's copies share its links), and
//!   the Lamport reductions never (measured on 2 and 4 PEs only; with more peers each PE's
//!   stores and its buffers' slots are split `n - 1` ways).
//!
//! On 4 x H200 the conservative rows left much on the table (NVSHMEM's path, which is NCCL's,
//! took 10.1-11.3 µs for float all-reduces of 16-256 KiB where Lamport took 4.6-6.1), which is
//! why 4 PEs have rows of their own; 3 and 5-8 PEs keep the conservative ones until measured.
//!
//! An unknown architecture (any but sm_90, or none known) takes the conservative rows at every
//! team size, 2 PEs included, rather than the sm_90 ones: the crossovers are ratios of costs
//! that change with the GPU (the direct kernels' grid rule was tuned for 132 SMs, the copy
//! engines' edge over SM stores is the link's), and the conservative rows keep this crate's
//! kernels only where their edge does not hang on those costs: small LL messages, and calls
//! NVSHMEM runs slowly, with scratch, or not at all.
//!
//! Every PE of a team must decide alike: the inputs are the call (the same on every PE), the
//! team size and the team's architecture, agreed when the team was made (each member says
//! its GPU's compute capability; a team whose members differ has none, and takes the
//! conservative rows).
//!
//! To change a crossover, change its row, say in its [`Basis`] what measured it, and keep the
//! tests below (which pin the 2-PE sm_90 decisions) in step.
use std::{fmt, ops::RangeInclusive};

use super::{Call, Collective};
use crate::{ffi, DataType};

/// A GPU architecture, as its compute capability (`sm_90`: 9.0, the H100 and H200).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Arch {
    pub(crate) major: u32,
    pub(crate) minor: u32,
}

impl Arch {
    /// sm_90: H100, H200.
    pub(crate) const SM90: Arch = Arch { major: 9, minor: 0 };
}

impl fmt::Display for Arch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "sm_{}{}", self.major, self.minor)
    }
}

/// What a row rests on: read by the tests and by whoever changes the table, by no code path.
#[derive(Debug)]
#[cfg_attr(
    not(test),
    expect(dead_code, reason = "the table's record, checked by the tests only")
)]
pub(crate) enum Basis {
    /// Measured: the `nvshmem-perf` runs (each with its date, machine and commit) and the
    /// figures that place the crossovers, µs a call.
    Measured {
        runs: &'static [&'static str],
        figures: &'static str,
    },
    /// Not measured: why the values are a safe default.
    Assumed(&'static str),
}

/// The crossovers of one collective on teams of [`Row::pes`] PEs of one architecture.
#[derive(Debug)]
pub(crate) struct Row {
    pub(crate) coll: Collective,
    /// Team sizes the row serves.
    pub(crate) pes: RangeInclusive<usize>,
    /// The architecture it was measured on; `None`: any (the conservative rows).
    pub(crate) arch: Option<Arch>,
    /// LL up to this many bytes a block.
    pub(crate) ll: usize,
    /// The Lamport kernels (`nvlink_lamport`) for blocks in this band: float all-reduce,
    /// reduce-scatter and reduce, and the copies of any type (the registry tries them after
    /// LL, before the copy engines and the direct kernels).
    pub(crate) lamport: RangeInclusive<usize>,
    /// The direct kernels for blocks of these sizes.
    pub(crate) direct: RangeInclusive<usize>,
    /// And for reductions NVSHMEM has no typed function for (fp8, `avg`, `premul_sum`), at
    /// any size.
    pub(crate) direct_where_nvshmem_lacks: bool,
    /// The copy engines for blocks of these sizes.
    pub(crate) ce: RangeInclusive<usize>,
    #[cfg_attr(
        not(test),
        expect(dead_code, reason = "the table's record, checked by the tests only")
    )]
    pub(crate) basis: Basis,
}

const KIB: usize = 1 << 10;
const MIB: usize = 1 << 20;
/// No size.
const NEVER: RangeInclusive<usize> = RangeInclusive::new(1, 0);
/// Every size.
const ALWAYS: RangeInclusive<usize> = RangeInclusive::new(0, usize::MAX);
/// Sizes past `b`.
const fn above(b: usize) -> RangeInclusive<usize> {
    RangeInclusive::new(b + 1, usize::MAX)
}
/// Sizes up to `b`.
const fn up_to(b: usize) -> RangeInclusive<usize> {
    RangeInclusive::new(0, b)
}

/// The run the LL and direct crossovers come from: every collective in CUDA-graph mode, this
/// crate (then LL up to 32 KiB blocks and the direct kernels above, at every size), raw
/// NVSHMEM and NCCL interleaved per size, f32 sum, root 0 (`scripts/gpu-check.sh run
/// perfgraph` with `PERF_EXTRA="-e 128M -f 4 -n 20 -w 3 --reps 3"`). Sizes in the figures are
/// blocks.
const GRAPH_RUN: &str = "mpirun -np 2 nvshmem-perf all -b 8 -e 128M -f 4 -n 20 -w 3 --reps 3 \
                         -c 0 -G 1 (2 x H200, 2026-11-23, commit d0c55b0)";
/// The run of the copy engines' crossovers: `nvlink_ce` forced against the automatic choice
/// of then (the direct kernels, NVSHMEM's broadcast past 16 MiB, `rooted_get` past 32 MiB),
/// raw NVSHMEM and NCCL, stream mode, checked (`scripts/gpu-check.sh run cepoints`).
const CE_RUN: &str = "mpirun -np 2 nvshmem-perf broadcast,fcollect,alltoall,gather,scatter \
                      -b 1M -e 256M -f 2 -n 20 -w 3 --reps 3 -c 1, then the same with \
                      --impl nvshmem-rs --algo <each>=nvlink_ce (2 x H200, 2026-11-23, commit \
                      9e6d156)";
/// The run of the algorithm layer's cost: the automatic choice, then every collective forced
/// onto NVSHMEM's algorithm (gather and scatter onto `rooted_get`), stream mode, checked
/// (`scripts/gpu-check.sh run perfpoints`).
const POINTS_RUN: &str = "mpirun -np 2 nvshmem-perf all -b 8 -e 128M -f 16777216 -n 50 -w 5 \
                          --reps 3 -c 1, then the same with --impl nvshmem-rs,nvshmem --algo \
                          <each>=nvshmem,gather=rooted_get,scatter=rooted_get (2 x H200, \
                          2026-11-23, commit 2001dcc)";

/// The run of the Lamport band: the three reductions from 64 KiB to 2 MiB, f32 and bf16, the
/// automatic choice of then (Lamport from 64 KiB to 1 MiB blocks) beside raw NVSHMEM and
/// NCCL, then `nvlink_lamport` forced alone, graph and stream (`scripts/gpu-check.sh run
/// midband`). Sizes in the figures are whole calls (a reduce-scatter's block is half).
const MIDBAND_RUN: &str = "mpirun -np 2 nvshmem-perf all_reduce,reduce_scatter,reduce -d \
                           f32,bf16 -b 64K -e 2M -f 2 -n 100 -w 10 --reps 3 -c 0 -G 1, then the \
                           same with --impl nvshmem-rs --algo <each>=nvlink_lamport (2 x H200, \
                           2026-11-26, commit dad052c)";

/// The run of the copies' LL band (issue 31: LL over up to 32 blocks): this crate's automatic
/// choice of then beside raw NVSHMEM and NCCL, then `nvlink_ll` and `nvlink_direct` forced
/// alone, graph mode and stream mode checked (`scripts/gpu-check.sh run llwide`).
const LLWIDE_RUN: &str = "mpirun -np 2 nvshmem-perf fcollect,broadcast,alltoall,gather,scatter \
                          -d f32 -b 16K -e 1M -f 2 -n 100 -w 10 --reps 3 -c 0 -G 1 (and -c 1 \
                          -G 0), then --impl nvshmem-rs --algo <each>=nvlink_ll, then \
                          =nvlink_direct (2 x H200, 2026-11-27, commit bc9aa5e)";

/// The run that took 2-PE fcollect and alltoall on LL to its limit once their LL kernels gave
/// each peer a lane and no lane to the PE's own copy (`nvr_ll_fcollect_peers`).
const PEER_LANES_RUN: &str = "mpirun -np 2 nvshmem-perf fcollect,alltoall -d f32 -b 4K -e 2M -f \
                              2 -n 100 -w 10 --reps 3 -c 0 -G 1, then --impl nvshmem-rs --algo \
                              <each>=nvlink_ll|nvlink_direct (2 x H200, 2026-11-27, commit \
                              c3ed3c1, two GPUs of four: docs/perf/peerlanes-2026-11-27)";

/// The run of the reductions' LL-Lamport crossovers (issue 31): every algorithm forced beside
/// the automatic choice of then (LL to 32 KiB blocks, Lamport above), raw NVSHMEM and NCCL, one
/// job each, graph mode (`scripts/gpu-check.sh run sweep` with `SWEEP_COLLS=all_reduce,
/// reduce_scatter,reduce SWEEP_SIZES="-b 8 -e 128K -f 2" SWEEP_ITERS="-n 200 -w 20"`). Sizes
/// in the figures are whole calls (a reduce-scatter's block is half).
const SWEEP_RUN: &str = "mpirun -np 2 nvshmem-perf <each> -d f32 -b 8 -e 128K -f 2 -n 200 -w \
                         20 --reps 3 -c 0 -G 1, then --impl nvshmem-rs --algo \
                         <each>=nvlink_ll|nvlink_lamport|nvlink_direct|nvshmem (2 x H200, \
                         2026-11-27, commit ae1f03f; the same to 256 KiB with this table, \
                         commit 042fe47: docs/perf/sweep-2026-11-27/small)";

/// The reductions' sweep after the Lamport kernels' re-fill and pair loops (ea0eadb, 219b543):
/// every algorithm forced beside the automatic choice, the table unchanged, each choice within
/// 5 % of the fastest at all 45 points (`docs/perf/lamport-2026-11-27/2pe`).
const LAMPORT_RUN: &str = "mpirun -np 2 nvshmem-perf all_reduce,reduce_scatter,reduce -d f32 \
                           -b 512 -e 8M -f 2 -n 50 -w 5 --reps 3 -c 0 -G 1, then --impl \
                           nvshmem-rs --algo <each>=nvlink_ll|nvlink_lamport|nvlink_direct|nvshmem \
                           (2 x H200, 2026-11-27, commit 219b543)";

/// The run of the 4-PE rows (issue 31: what 4 GPUs take, measured rather than reasoned): every
/// algorithm forced beside the automatic choice of then (the conservative rows), raw NVSHMEM
/// and NCCL, one job each, graph mode, one PE a GPU (`scripts/gpu-check.sh run sweep` with
/// `SWEEP_PES=4`, then the reductions again from 8 B with `-n 200`). Sizes in the figures are
/// whole calls: a reduce-scatter's, fcollect's, alltoall's, gather's or scatter's block is a
/// quarter.
const FOUR_PE_RUN: &str = "mpirun -np 4 nvshmem-perf <each> -d f32 -b 4K -e 256M -f 2 -n 20 -w 3 \
                           --reps 3 -G 1, then --impl nvshmem-rs --algo \
                           <each>=nvlink_ll|nvlink_lamport|nvlink_direct|nvlink_ce|nvshmem; the \
                           reductions -b 8 -e 256K -n 200 -w 20 (4 x H200, 2026-11-27, commit \
                           f599047: docs/perf/sweep-4pe-2026-11-27)";

/// The 4-PE reductions again after the Lamport kernels' re-fill (ea0eadb) and team loops of 4
/// (42c5acf), and the rooted reduce after the direct kernels' split (f633d8a): every
/// algorithm forced beside the automatic choice, raw NVSHMEM and NCCL, graph mode, one PE a
/// GPU (`scripts/gpu-check.sh run sweep` with `SWEEP_PES=4`). Three runs: the reductions 512
/// B-8 MiB, every collective 512 B-256 MiB, the rooted reduce 512 B-256 MiB.
const FOUR_PE_REDUCTIONS_RUN: &str = "mpirun -np 4 nvshmem-perf all_reduce,reduce_scatter,reduce \
                                      -d f32 -b 512 -e 8M -f 2 -n 50 -w 5 --reps 3 -G 1, then \
                                      --impl nvshmem-rs --algo \
                                      <each>=nvlink_ll|nvlink_lamport|nvlink_direct|nvshmem; \
                                      every collective -b 512 -e 256M -n 20 -w 3 (4 x H200, \
                                      2026-11-27, commit 42c5acf); the rooted reduce -b 512 -e \
                                      256M -n 20 -w 3 at commit f633d8a \
                                      (docs/perf/sweep-4pe-2026-11-27b)";

/// The run that moved the 4-PE gather and scatter LL bands: the rooted copies again after LL
/// batched their packets (commit 6a67b05), LL and the direct kernels forced beside the
/// automatic choice, raw NVSHMEM and NCCL (`scripts/gpu-check.sh run sweep` with
/// `SWEEP_COLLS=broadcast,gather,scatter SWEEP_SIZES="-b 64K -e 2M -f 2" SWEEP_ITERS="-n 100
/// -w 10" SWEEP_VARIANTS="ll direct"`, `SWEEP_PES=4` and 2).
const ROOTED_RUN: &str = "mpirun -np 4 nvshmem-perf broadcast,gather,scatter -d f32 -b 64K -e \
                          2M -f 2 -n 100 -w 10 --reps 3 -G 1, then --impl nvshmem-rs --algo \
                          <each>=nvlink_ll|nvlink_direct (4 x H200, 2026-11-27, commit \
                          6a67b05: docs/perf/rooted-2026-11-27)";

/// The runs that moved the large-message crossovers of broadcast, gather and scatter, after
/// the waits stopped reading the host's abort word every 256 polls (commit c84af28): that read
/// had made every one-way move of the direct kernels whose wait outlasted it 1.3-2 x slower
/// (the "dip" at 32-64 MiB of the figures before). Every algorithm forced beside the automatic
/// choice, raw NVSHMEM and NCCL, graph mode, one PE a GPU (`scripts/gpu-check.sh run sweep`
/// with `SWEEP_SIZES="-b 1M -e 256M -f 2"`; alltoall in a run of its own with
/// `NCCL_GRAPH_REGISTER=0`, since NVSHMEM's hangs in a graph without it). Sizes in the figures
/// are blocks.
const LARGE_RUN: &str = "mpirun -np 2 nvshmem-perf <each> -d f32 -b 1M -e 256M -f 2 -n 20 -w 3 \
                         --reps 3 -G 1, then --impl nvshmem-rs --algo \
                         <each>=nvlink_ll|nvlink_lamport|nvlink_direct|nvlink_ce|nvshmem (2 x \
                         H200, 2026-11-27, commit c84af28: docs/perf/sweep-large-2026-11-27/2pe)";
/// [`LARGE_RUN`] on 4 PEs (`SWEEP_PES=4`).
const FOUR_PE_LARGE_RUN: &str = "mpirun -np 4 nvshmem-perf <each> -d f32 -b 1M -e 256M -f 2 -n \
                                 20 -w 3 --reps 3 -G 1, then --impl nvshmem-rs --algo \
                                 <each>=nvlink_ll|nvlink_lamport|nvlink_direct|nvlink_ce|nvshmem \
                                 (4 x H200, 2026-11-27, commit 6ab7cfc: \
                                 docs/perf/sweep-large-2026-11-27/4pe)";

/// The run that took the 4-PE broadcast on LL to 768 KiB: the relayed broadcast
/// (`nvr_ll_broadcast_relay`: the root sends each non-root a third, which forwards it to the
/// other two), LL forced beside the automatic choice (this table's), raw NVSHMEM and NCCL; with
/// the sweep of every collective that came before it the same day (commit 96b11de, LL's
/// one-shot broadcast then), graph mode, one PE a GPU (`scripts/gpu-check.sh run sweep` with
/// `SWEEP_PES=4`). The relay's first build (d51ef77) had timed 5.23 and 6.17 µs at 256 and
/// 512 KiB against NVSHMEM's 7.12 and 8.13.
const RELAY_RUN: &str = "mpirun -np 4 nvshmem-perf broadcast -d f32 -b 16K -e 1M -f 2 -n 100 \
                         -w 10 --reps 3 -G 1, then --impl nvshmem-rs --algo \
                         broadcast=nvlink_ll (4 x H200, 2026-11-28, commit ee96790); every \
                         collective -b 1K -e 4M -n 20 -w 3, LL, Lamport and the direct kernels \
                         forced (commit 96b11de; docs/perf/relay-2026-11-28)";

/// The run that took the 2-PE broadcast, gather and scatter on LL to 1 MiB blocks once each
/// 2-PE LL block took both of its regions (LL then carried 1 MiB a pair, 512 KiB before; since
/// 2026-11-28 it takes 64 blocks of one region each: `channel::ll_blocks`): the copies with LL
/// and the direct kernels forced beside the automatic choice, raw NVSHMEM and NCCL
/// (`scripts/gpu-check.sh run sweep` with
/// `SWEEP_COLLS=broadcast,fcollect,alltoall,gather,scatter SWEEP_SIZES="-b 256K -e 4M -f 2"
/// SWEEP_VARIANTS="ll direct"`), on H200 and on H100. Sizes in the figures are whole calls.
const LL_PAIR_RUN: &str = "mpirun -np 2 nvshmem-perf <each> -d f32 -b 256K -e 4M -f 2 -n 20 -w 3 \
                           --reps 3 -G 1, then --impl nvshmem-rs --algo \
                           <each>=nvlink_ll|nvlink_direct (2 x H200, 2026-11-28, commit b2cba2f, \
                           two more H200 pairs alike; 2 x H100 at 2249441: \
                           docs/perf/sweep-llpair-2026-11-28)";

/// The runs of the copies' Lamport bands (`lamport.cu`, COPIES: full payload at one crossing,
/// where LL carries half): the five copies with LL and then Lamport forced, twice in turn,
/// which placed each band's start between the sizes measured (commit f727acd); then, with
/// the kernels as they stand, every algorithm forced beside the automatic choice, raw NVSHMEM
/// and NCCL (`scripts/gpu-check.sh run sweep` with `SWEEP_COLLS=broadcast,fcollect,alltoall,
/// gather,scatter SWEEP_SIZES="-b 64K -e 4M -f 2" SWEEP_ITERS="-n 100 -w 10"
/// SWEEP_VARIANTS="ll lamport direct"`): the choice within 5 % of the fastest at all 35
/// points. Sizes in the figures are blocks (fcollect's, alltoall's, gather's and scatter's
/// whole call is two).
const LAMPORT_COPY_RUN: &str = "mpirun -np 2 nvshmem-perf broadcast,fcollect,alltoall,gather,\
                                scatter -d f32 -b 32K -e 2M -f 2 -n 100 -w 10 --reps 3 -c 0 -G 1 \
                                --impl nvshmem-rs --algo <each>=nvlink_ll, then =nvlink_lamport, \
                                twice in turn (2 x H200, 2026-11-28, commit f727acd); the sweep \
                                -b 64K -e 4M -n 100 -w 10, LL, Lamport and the direct kernels \
                                forced (commit bd102fa: docs/perf/sweep-lamport-copies-2026-11-28)";

/// The runs after the Lamport kernels' header became one word (commit 6a71afc: the block's
/// count relaxed, no fence; 0.2-0.5 us off the reductions and the rooted copies below 256 KiB,
/// nothing off fcollect and alltoall): LL and Lamport forced beside the automatic choice, raw
/// NVSHMEM and NCCL, for the reduce from 1 KiB and the copies from 16 KiB, which moved the
/// reduce's Lamport band down from 64 KiB and scatter's from 368 KiB blocks; the rest stayed.
const LAMPORT_HEADER_RUN: &str = "mpirun -np 2 nvshmem-perf <each collective> -d f32 -b 16K -e \
                                  1M -f 2, then reduce,broadcast,scatter -b 1K -e 32K -f 2, -n \
                                  100 -w 10 --reps 3 -c 0 -G 1, automatic and with --impl \
                                  nvshmem-rs --algo <each>=nvlink_ll, then =nvlink_lamport (2 x \
                                  H200, 2026-11-28, commit 6a71afc: \
                                  docs/perf/sweep-lamport-header-2026-11-28)";

/// The run after the Lamport copies' batch went to one line (commit ec1d892, `lamport.cu`,
/// NVR_LAMC_BATCH: no register spill; fcollect and alltoall 0.3-0.5 us faster at 16 KiB-1 MiB
/// than with 4, the rooted copies 0.1-0.3): LL and Lamport forced beside the automatic choice
/// (with the table before this run's bands), raw NVSHMEM and NCCL, for the five copies of 32
/// KiB-1 MiB calls, which moved every copy's Lamport band down.
const LAMPORT_BATCH_RUN: &str = "mpirun -np 2 nvshmem-perf broadcast,fcollect,alltoall,gather,\
                                 scatter -d f32 -b 32K -e 1M -f 2 -n 100 -w 10 --reps 3 -c 0 -G \
                                 1, automatic and with --impl nvshmem-rs --algo <each>=nvlink_ll, \
                                 then =nvlink_lamport (2 x H200, 2026-11-28, commit ec1d892: \
                                 docs/perf/sweep-lamport-batch1-2026-11-28)";

/// The run of the Lamport copies on 4 GPUs, where they had never been timed (commit 063cee9,
/// the batch of one line): the five copies with LL, Lamport and the direct kernels forced beside
/// the automatic choice (the table before this run: no Lamport copies on 4 PEs), raw NVSHMEM
/// and NCCL. Lamport was faster from 64 KiB blocks (broadcast: calls) to its limit, 512 KiB a
/// pair, but for the broadcast of 512 KiB; the same build passed the correctness matrix with
/// Lamport forced on those GPUs.
const FOUR_PE_LAMPORT_COPY_RUN: &str = "mpirun -np 4 nvshmem-perf <each copy> -d f32 -b 16K -e \
                                        4M -f 2 -n 100 -w 10 --reps 3 -c 0 -G 1, automatic and \
                                        with --impl nvshmem-rs --algo <each>=nvlink_ll | \
                                        nvlink_lamport | nvlink_direct (4 x H200, 2026-11-28, \
                                        commit 063cee9, one PE a GPU: \
                                        docs/perf/sweep-4pe-lamport-copies-2026-11-28)";

/// Why the conservative rows take LL only for small payloads.
const LL_ASSUMED: &str = "not measured on this architecture or team size. LL's cost is the \
    launch and one flag exchange; each PE moves (n - 1) blocks in or out, so the limit keeps \
    (n - 1) x limit within the 2-PE sm_90 limit, where LL was 1.05-1.7 times faster than \
    NVSHMEM and NCCL";

/// Why the conservative rows take the direct kernels for alltoall past LL.
const ALLTOALL_ASSUMED: &str = "not measured on this architecture or team size. LL as \
    LL_ASSUMED says, then the direct kernels at every size rather than NVSHMEM's alltoall: they \
    were faster at every size measured on 2 and 4 PEs (4 PEs, 256 MiB: 587.8 against 657.7), \
    and NVSHMEM 3.4.5's alltoall, which it hands to NCCL, hung inside CUDA graphs at 128 MiB a \
    PE with NCCL 2.28.3 and 2.28.9: NCCL's graph registration of buffers in NVSHMEM 3.4.5's \
    heap, NCCL's own alltoall on them hangs alike (tools/nvshmem-repro, REPRO_CASES= \
    graph_alltoall or graph_nccl_heap; not with NCCL_GRAPH_REGISTER=0, NVSHMEM_DISABLE_NCCL=1 \
    or NVSHMEM 3.8.0)";

/// The table: the measured rows first, then the conservative ones. A call's row is the first
/// of its collective that serves its team size and architecture, so a measured row wins over
/// the conservative row that also covers its team size.
pub(crate) static ROWS: &[Row] = &[
    // Measured: 2 PEs, sm_90.
    Row {
        coll: Collective::AllReduce,
        pes: 2..=2,
        arch: Some(Arch::SM90),
        ll: 32 * KIB,
        lamport: RangeInclusive::new(KIB + 1, 2 * MIB),
        direct: above(256 * KIB),
        direct_where_nvshmem_lacks: false,
        ce: NEVER,
        basis: Basis::Measured {
            runs: &[GRAPH_RUN, MIDBAND_RUN, SWEEP_RUN, LAMPORT_RUN],
            figures: "SWEEP (graph, f32): LL 8 B: 2.73 against Lamport 2.96, NCCL 5.71; 1 KiB: \
                      2.85 against Lamport 3.06; 2 KiB: 3.41 against Lamport 3.35; 16 KiB: 3.73 \
                      against Lamport 3.39; 32 KiB: 3.85 against 3.41 (LL stays to 32 KiB for \
                      the types Lamport does not serve). Before: LL 32 KiB: 5.7 against NVSHMEM \
                      7.1, NCCL 7.1; direct 128 KiB: 7.5 against 7.3, 7.3; 512 KiB: 8.9 against \
                      9.8, 9.8; 128 MiB: 399.6 against 456.3, 472.2 (336 GB/s); Lamport (graph, \
                      f32) 64 KiB: 4.55 against NVSHMEM 6.83, NCCL 6.82; 1 MiB: 7.27 against \
                      13.21, 13.04; 2 MiB: 11.27 against direct 12.91, NCCL 27.9",
        },
    },
    Row {
        coll: Collective::ReduceScatter,
        pes: 2..=2,
        arch: Some(Arch::SM90),
        ll: 16 * KIB,
        lamport: RangeInclusive::new(KIB + 1, 2 * MIB),
        direct: above(256 * KIB),
        direct_where_nvshmem_lacks: false,
        ce: NEVER,
        basis: Basis::Measured {
            runs: &[GRAPH_RUN, MIDBAND_RUN, SWEEP_RUN, LAMPORT_RUN],
            figures: "SWEEP (graph, f32; call sizes): LL 2 KiB: 2.93 against Lamport 3.10; 4 \
                      KiB: 3.43 against Lamport 3.40; 32 KiB: 3.62 against 3.46; Lamport 4 MiB \
                      (the default sweep, -n 20): 11.90 against direct 14.05, NCCL 23.38. \
                      Before: LL 16 KiB: 5.7 against NVSHMEM 6.1, NCCL 6.0; direct 64 KiB: 6.6 \
                      against 6.3, 6.3; 256 KiB: 7.9 against 7.7, 7.6; 1 MiB: 10.1 against 14.1, \
                      14.1; 64 MiB: 209.2 against 283.1, 281.6; Lamport (graph, f32; call sizes) \
                      64 KiB: 4.41 against NVSHMEM 5.95, NCCL 5.95; 2 MiB: 7.16 against 14.08, \
                      14.0",
        },
    },
    Row {
        coll: Collective::Fcollect,
        pes: 2..=2,
        arch: Some(Arch::SM90),
        ll: 512 * KIB,
        lamport: RangeInclusive::new(32 * KIB + 1, MIB),
        // From 256 KiB, where LL cannot carry it (fewer resident blocks), the direct kernels.
        direct: above(256 * KIB),
        direct_where_nvshmem_lacks: false,
        ce: above(64 * MIB),
        basis: Basis::Measured {
            runs: &[
                GRAPH_RUN,
                CE_RUN,
                LLWIDE_RUN,
                PEER_LANES_RUN,
                LAMPORT_COPY_RUN,
                LAMPORT_BATCH_RUN,
            ],
            figures: "LAMPORT_BATCH (graph, f32, blocks): Lamport 16 KiB: 2.35 against LL 2.42; \
                      64 KiB: 2.66 against 2.67; 128 KiB: 2.86 against 3.07; LL 32 KiB: 2.52 \
                      against 2.57. \
                      LAMPORT_COPY (the sweep, blocks): Lamport 256 KiB: 3.68 against LL 3.99; \
                      512 KiB: 4.55 against 5.70; 1 MiB: 6.16 against 8.79, direct 8.36; LL 128 \
                      KiB: 3.06 against 3.24. PEER_LANES (whole calls, graph): LL 1 MiB: 6.62 against direct 8.09, \
                      NCCL 10.39, NVSHMEM 10.36; 512 KiB: 4.84 against direct 7.21; 2 MiB: \
                      direct 10.43 (past LL). LLWIDE (before the peer lanes): LL 128 KiB: 3.73 \
                      against NVSHMEM 6.31, NCCL 6.32, direct 6.75; 512 KiB: 5.85 against 7.85, \
                      7.91, 7.29; 1 MiB: 9.12 against direct 8.19. Before: \
                      LL 16 KiB: 5.1 against NVSHMEM 6.3, NCCL 6.3; direct 64 KiB: 6.8 \
                      against 6.4, 6.5; 256 KiB: 7.2 against 8.1, 8.1; 1 MiB: 10.2 against \
                      16.0, 16.3; copy engines 64 MiB: 192.0 against direct 194.3 (level); \
                      128 MiB: 364.2 against direct 378.2, NCCL 546.8",
        },
    },
    Row {
        coll: Collective::Alltoall,
        pes: 2..=2,
        arch: Some(Arch::SM90),
        ll: 512 * KIB,
        lamport: RangeInclusive::new(8 * KIB + 1, MIB),
        direct: ALWAYS,
        direct_where_nvshmem_lacks: false,
        ce: above(64 * MIB),
        basis: Basis::Measured {
            runs: &[
                GRAPH_RUN,
                CE_RUN,
                LLWIDE_RUN,
                PEER_LANES_RUN,
                LAMPORT_COPY_RUN,
                LAMPORT_BATCH_RUN,
            ],
            figures: "LAMPORT_BATCH (graph, f32, blocks): Lamport 16 KiB: 2.41 against LL 2.46; \
                      32 KiB: 2.53 against 2.58; 64 KiB: 2.61 against 2.78; 128 KiB: 2.83 \
                      against 3.25. \
                      LAMPORT_COPY (the sweep, blocks): Lamport 256 KiB: 3.70 against LL 4.11; \
                      512 KiB: 4.57 against 5.72; 1 MiB: 6.13 against 8.90, direct 8.07; LL 128 \
                      KiB: 3.16 against 3.24. PEER_LANES (whole calls, graph): LL 1 MiB: 6.73 against direct 7.91, \
                      NCCL 12.32, NVSHMEM 12.33; 512 KiB: 5.06 against direct 7.06. LLWIDE \
                      (before the peer lanes): LL 128 KiB: 3.72 against direct 6.59, NVSHMEM \
                      7.78, NCCL 7.82; 512 KiB: 6.18 against direct 7.08; 1 MiB: 9.83 against \
                      direct 8.00. Before: LL 16 KiB: 5.1 against NVSHMEM 8.0, NCCL 7.9; direct \
                      64 KiB: 6.7 against 8.1, 8.0; 64 MiB: 191.9 against 203.1, 250.2; copy \
                      engines 64 MiB: 193.0 against direct 194.2 (level); 128 MiB: 364.8 against \
                      direct 378.6, NCCL 472.6",
        },
    },
    Row {
        coll: Collective::Broadcast,
        pes: 2..=2,
        arch: Some(Arch::SM90),
        ll: MIB,
        lamport: RangeInclusive::new(64 * KIB + 1, MIB),
        direct: RangeInclusive::new(MIB + 1, 64 * MIB),
        direct_where_nvshmem_lacks: false,
        ce: above(64 * MIB),
        basis: Basis::Measured {
            runs: &[
                GRAPH_RUN,
                CE_RUN,
                LLWIDE_RUN,
                LARGE_RUN,
                LL_PAIR_RUN,
                LAMPORT_COPY_RUN,
                LAMPORT_BATCH_RUN,
            ],
            figures: "LAMPORT_BATCH (graph, f32): Lamport 128 KiB: 2.53 against LL 2.60; 256 \
                      KiB: 2.86 against 2.99; LL 64 KiB: 2.32 against 2.40. \
                      LAMPORT_COPY (the sweep): Lamport 512 KiB: 3.71 against LL 4.02; 1 MiB: \
                      4.73 against 7.04, direct 8.78; LL 256 KiB: 3.04 against 3.22. LL_PAIR: LL 1 MiB: 8.17 against direct 9.02, NVSHMEM 11.35, NCCL 11.66; \
                      H100 8.12 against 10.12, 11.51, 11.63. \
                      LARGE: direct 32 MiB: 97.64 against copy engines 104.34, NCCL 110.44; 64 \
                      MiB: 189.23 against 192.17, NCCL 203.20; copy engines 128 MiB: 359.13 \
                      against direct 370.91, NCCL 385.70. LLWIDE (graph): LL 64 KiB: 2.91 \
                      against NVSHMEM 5.92, NCCL 5.96; 512 KiB: 5.76 against 8.06, 8.11, \
                      direct 8.59 (LL carried 512 KiB a PE at most then). \
                      Before: LL 32 KiB: 3.7 against NVSHMEM 6.1, NCCL 6.1; direct 128 KiB: 7.0 \
                      against 6.2, 6.1; 512 KiB: 7.9 against 8.3, 8.5; 2 MiB: 13.0 against 21.9, \
                      19.1; copy engines 128 MiB: 355.0 against NVSHMEM 385.6, NCCL 388.6 \
                      (378 GB/s)",
        },
    },
    Row {
        coll: Collective::Reduce,
        pes: 2..=2,
        arch: Some(Arch::SM90),
        ll: 64 * KIB,
        lamport: RangeInclusive::new(4 * KIB + 1, 2 * MIB),
        direct: ALWAYS,
        direct_where_nvshmem_lacks: false,
        ce: NEVER,
        basis: Basis::Measured {
            runs: &[
                GRAPH_RUN,
                POINTS_RUN,
                MIDBAND_RUN,
                SWEEP_RUN,
                LAMPORT_RUN,
                LARGE_RUN,
                LAMPORT_HEADER_RUN,
            ],
            figures: "LAMPORT_HEADER (graph, f32): Lamport 4 KiB: 2.01 against LL 2.05; 8 KiB: \
                      2.06 against 2.16; 16 KiB: 2.14 against 2.23; 32 KiB: 2.25 against 2.32; \
                      64 KiB: 2.34 against 2.48; 128 KiB: 2.40 against 2.80; LL 2 KiB: 2.00 \
                      against 2.05. \
                      LARGE (the two-shot at every size then): direct 128 MiB: 386.79 against \
                      NCCL 377.44; the root's pull since (nvlink.rs REDUCE_PULL_FROM): 367.40 \
                      against NCCL 376.69. SWEEP (graph, f32): LL 32 KiB: 3.12 against Lamport \
                      3.36, NCCL 5.08; 64 KiB: 3.17 against 3.37; 128 KiB: 3.75 against 3.39. \
                      Before: LL 32 KiB: 4.0 against NCCL 5.4; NVSHMEM has no rooted reduce, \
                      and its path here (an \
                      all-reduce into the scratch) is slower at every size: 8 B 12.10 against \
                      the automatic choice's 4.58, 128 MiB 537.6 against 457.0 (stream; graph \
                      6.29 against 1.61, 516.8 against 470.2). NCCL's reduce, not an algorithm \
                      here, was faster at 128 KiB (5.8 against 7.3) and 128 MiB (377.8 against \
                      460.6); Lamport (graph, f32) 64 KiB: 3.96 against NCCL 5.29; 1 MiB: 5.40 \
                      against 10.45; 2 MiB (forced): 8.12 against direct 12.77, NCCL 16.40",
        },
    },
    Row {
        coll: Collective::Gather,
        pes: 2..=2,
        arch: Some(Arch::SM90),
        ll: MIB,
        lamport: RangeInclusive::new(32 * KIB + 1, MIB),
        direct: up_to(64 * MIB),
        direct_where_nvshmem_lacks: false,
        ce: above(64 * MIB),
        basis: Basis::Measured {
            runs: &[
                GRAPH_RUN,
                CE_RUN,
                POINTS_RUN,
                LLWIDE_RUN,
                LARGE_RUN,
                LL_PAIR_RUN,
                LAMPORT_COPY_RUN,
                LAMPORT_BATCH_RUN,
            ],
            figures: "LAMPORT_BATCH (graph, f32, blocks): Lamport 64 KiB: 2.30 against LL 2.38; \
                      128 KiB: 2.43 against 2.64; LL 32 KiB: 2.22 against 2.24. \
                      LAMPORT_COPY (the sweep, blocks): Lamport 256 KiB: 3.22 against \
                      LL 3.31; 512 KiB: 3.73 against 4.44; 1 MiB: 4.72 against 6.84; LL 128 \
                      KiB: 2.66 against 2.90. LL_PAIR: LL 2 MiB: 7.50 against direct 8.76, NCCL 11.78; H100 7.29 \
                      against 9.90, 12.81. \
                      LARGE: direct 32 MiB: 96.98 against copy engines 101.71, NCCL 102.68; 64 \
                      MiB: 188.28 against 188.39 (level); copy engines 128 MiB: 356.99 against \
                      direct 369.72, NCCL 379.47. LLWIDE (whole calls, graph): LL 128 KiB: \
                      3.07 against NCCL 6.23, direct 6.90; 1 MiB: 7.47 against NCCL 9.01, \
                      direct 8.36. Before: LL 16 KiB: 3.8 \
                      against NCCL 6.5 (rooted_get 8 B: 16.84 against 3.60, stream); direct 16 \
                      MiB: 52.9 against NCCL 56.3",
        },
    },
    Row {
        coll: Collective::Scatter,
        pes: 2..=2,
        arch: Some(Arch::SM90),
        ll: MIB,
        lamport: RangeInclusive::new(64 * KIB + 1, MIB),
        direct: up_to(64 * MIB),
        direct_where_nvshmem_lacks: false,
        ce: above(64 * MIB),
        basis: Basis::Measured {
            runs: &[
                GRAPH_RUN,
                CE_RUN,
                POINTS_RUN,
                LLWIDE_RUN,
                LARGE_RUN,
                LL_PAIR_RUN,
                LAMPORT_COPY_RUN,
                LAMPORT_HEADER_RUN,
                LAMPORT_BATCH_RUN,
            ],
            figures: "LAMPORT_BATCH (graph, f32, blocks): Lamport 128 KiB: 2.52 against LL 2.61; \
                      256 KiB: 2.84 against 3.05; LL 64 KiB: 2.32 against 2.35. \
                      LAMPORT_HEADER (graph, f32, blocks): Lamport 256 KiB: 3.03 against LL \
                      3.15; LL 128 KiB: 2.64 against 2.75. \
                      LAMPORT_COPY (the sweep, blocks): Lamport 512 KiB: 3.70 against \
                      LL 4.13; 1 MiB: 4.82 against 7.45; LL 256 KiB: 3.04 against 3.24. LL_PAIR: LL 2 MiB: H100 8.66 against direct 9.83, NCCL 13.16; H200 8.72 \
                      against direct 8.62 (within 2 %), NCCL 11.77. \
                      LARGE: direct 32 MiB: 97.97 against copy engines 105.22, NCCL 106.55; 64 \
                      MiB: 188.97 against 192.79; copy engines 128 MiB: 361.25 against direct \
                      371.00, NCCL 388.04. LLWIDE (whole calls, graph): LL 128 KiB: 2.93 \
                      against NCCL 5.96, direct 6.93; 1 MiB: 6.55 against NCCL 8.41, direct \
                      8.37. Before: LL 16 KiB: 3.8 \
                      against NCCL 6.2 (rooted_get 8 B: 17.98 against 3.56, stream); direct 16 \
                      MiB: 53.3 against NCCL 58.5",
        },
    },
    // Measured: 4 PEs, sm_90 (one PE a GPU; FOUR_PE_RUN, whole-call sizes in the figures).
    Row {
        coll: Collective::AllReduce,
        pes: 4..=4,
        arch: Some(Arch::SM90),
        ll: 64 * KIB,
        lamport: up_to(256 * KIB),
        direct: RangeInclusive::new(64 * KIB + 1, 16 * MIB),
        direct_where_nvshmem_lacks: true,
        ce: NEVER,
        basis: Basis::Measured {
            runs: &[FOUR_PE_RUN, FOUR_PE_REDUCTIONS_RUN],
            figures: "REDUCTIONS: Lamport 256 KiB: 5.82 against direct 7.94, NCCL 11.12; 512 \
                      KiB: 9.16 against direct 8.58. FOUR_PE: \
                      Lamport 8 B: 3.13 against LL 3.66, NCCL 7.84; 16 KiB: 4.58 against LL \
                      5.31, NVSHMEM 10.07; 256 KiB: 6.11 against direct 8.90, NVSHMEM 10.85; \
                      512 KiB: 10.31 against direct 10.10. LL (the types Lamport does not \
                      serve) 64 KiB: 6.61 against direct 8.44; 128 KiB: 10.05 against direct \
                      8.57. Direct 1 MiB: 12.16 against NVSHMEM 16.88; 16 MiB: 89.72 against \
                      97.19; 32 MiB: 171.99 against 172.61 (level); 128 MiB: 645.55 against \
                      612.59",
        },
    },
    Row {
        coll: Collective::ReduceScatter,
        pes: 4..=4,
        arch: Some(Arch::SM90),
        ll: 64 * KIB,
        lamport: up_to(512 * KIB),
        direct: above(64 * KIB),
        direct_where_nvshmem_lacks: false,
        ce: NEVER,
        basis: Basis::Measured {
            runs: &[FOUR_PE_RUN, FOUR_PE_REDUCTIONS_RUN],
            figures: "REDUCTIONS: Lamport 2 MiB (Lamport's limit): 9.47 against direct 11.11, \
                      NCCL 16.09; direct 4 MiB: 16.02 against NVSHMEM 32.87. FOUR_PE: \
                      Lamport 64 B: 3.28 against LL 3.57, NCCL 6.55; 64 KiB: 4.60 against LL \
                      5.46, NVSHMEM 7.64; 2 MiB: 10.01 against direct 12.29, NVSHMEM 16.52. LL \
                      256 KiB: 6.91 against direct 7.41; 512 KiB: 11.40 against direct 8.62. \
                      Direct 4 MiB: 17.55 against NVSHMEM 33.59; 256 MiB: 630.84 against \
                      657.87, NCCL 659.11",
        },
    },
    Row {
        coll: Collective::Fcollect,
        pes: 4..=4,
        arch: Some(Arch::SM90),
        ll: 64 * KIB,
        lamport: RangeInclusive::new(32 * KIB + 1, 512 * KIB),
        direct: above(64 * KIB),
        direct_where_nvshmem_lacks: false,
        ce: NEVER,
        basis: Basis::Measured {
            runs: &[FOUR_PE_RUN, FOUR_PE_LAMPORT_COPY_RUN],
            figures: "FOUR_PE_LAMPORT_COPY (whole calls): Lamport 256 KiB: 3.77 against LL 4.42; \
                      512 KiB: 4.77 against direct 7.06; 1 MiB: 6.70 against 8.54; 2 MiB: 10.04 \
                      against 12.01; LL 128 KiB: 3.68 against 3.74. \
                      LL 256 KiB: 6.50 against direct 8.02, NVSHMEM 8.81; 512 KiB: 10.08 \
                      against direct 8.79. Direct 4 MiB: 21.28 against NVSHMEM 34.16; 256 MiB: \
                      586.84 against 605.46, NCCL 659.66, copy engines 1049.29",
        },
    },
    Row {
        coll: Collective::Alltoall,
        pes: 4..=4,
        arch: Some(Arch::SM90),
        ll: 64 * KIB,
        lamport: RangeInclusive::new(32 * KIB + 1, 512 * KIB),
        direct: ALWAYS,
        direct_where_nvshmem_lacks: false,
        ce: NEVER,
        basis: Basis::Measured {
            runs: &[FOUR_PE_RUN, FOUR_PE_LAMPORT_COPY_RUN],
            figures: "FOUR_PE_LAMPORT_COPY (whole calls): Lamport 256 KiB: 4.02 against LL 4.97; \
                      512 KiB: 4.33 against direct 6.81; 1 MiB: 6.66 against 8.17; 2 MiB: 10.05 \
                      against 10.84; LL 128 KiB: 3.70 against 3.99. \
                      LL 256 KiB: 6.84 against direct 7.76, NVSHMEM 8.54; 512 KiB: 10.87 \
                      against direct 8.32. Direct 2 MiB: 12.59 against NVSHMEM 20.59; 256 MiB: \
                      587.79 against 657.74, NCCL 656.96, copy engines 1048.50",
        },
    },
    Row {
        coll: Collective::Broadcast,
        pes: 4..=4,
        arch: Some(Arch::SM90),
        ll: 768 * KIB,
        lamport: RangeInclusive::new(32 * KIB + 1, 256 * KIB),
        direct: RangeInclusive::new(768 * KIB + 1, 16 * MIB),
        direct_where_nvshmem_lacks: false,
        ce: NEVER,
        basis: Basis::Measured {
            runs: &[FOUR_PE_RUN, FOUR_PE_LARGE_RUN, RELAY_RUN, FOUR_PE_LAMPORT_COPY_RUN],
            figures: "FOUR_PE_LAMPORT_COPY: Lamport 64 KiB: 2.76 against LL 2.89; 128 KiB: 3.09 \
                      against 3.49; 256 KiB: 3.98 against 4.92; LL 32 KiB: 2.57 against 2.70; 512 \
                      KiB: 5.74 against 6.03 (Lamport carries no more than 512 KiB a pair here); \
                      direct 1 MiB: 10.73 against NVSHMEM 11.57, NCCL 11.59 (RELAY's run: 10.92 \
                      against 11.36, 11.38; FOUR_PE's, before the direct kernels' shorter entry \
                      and exit: 12.43 against NVSHMEM 11.45). \
                      RELAY: LL relayed 256 KiB: 4.95 against NVSHMEM 7.18, NCCL 7.17 (the \
                      one-shot 6.26-6.46); 512 KiB: 5.93 against NVSHMEM 8.00, NCCL 8.10 (the \
                      one-shot carries at most 256 KiB on 4 PEs, the relay 768); one-shot \
                      128 KiB: 3.51-3.64 against relayed 3.88-3.90. LARGE: direct 8 MiB: 41.48 against NVSHMEM 61.53, NCCL 36.24; 16 MiB: \
                      79.05 against NVSHMEM 87.23, NCCL 60.38; NVSHMEM 32 MiB: 109.81 against \
                      direct 142.33. FOUR_PE: LL 128 KiB: 6.14 against NVSHMEM 7.19; 256 KiB: \
                      9.70 against 7.31. NVSHMEM 1 MiB: 11.45 against direct 12.43. Direct 2 \
                      MiB: 15.94 against NVSHMEM 28.72 (19.06 with NCCL_GRAPH_REGISTER=0), NCCL \
                      19.00; 4 MiB: 23.49 against 39.72 (24.68). NVSHMEM with \
                      NCCL_GRAPH_REGISTER=0, which a program must set itself, 8 MiB: 36.56",
        },
    },
    Row {
        coll: Collective::Reduce,
        pes: 4..=4,
        arch: Some(Arch::SM90),
        ll: 32 * KIB,
        lamport: RangeInclusive::new(KIB + 1, 512 * KIB),
        direct: ALWAYS,
        direct_where_nvshmem_lacks: false,
        ce: NEVER,
        basis: Basis::Measured {
            runs: &[FOUR_PE_RUN, FOUR_PE_REDUCTIONS_RUN, FOUR_PE_LARGE_RUN],
            figures: "REDUCTIONS: LL 1 KiB: 3.16 / 3.15 / 3.27 against Lamport 3.19 / 3.38 / \
                      3.44 (three runs); Lamport 2 KiB: 3.38 / 3.49 / 3.53 against LL 3.64 / \
                      3.69 / 3.77; 32 KiB: 3.57 / 3.80 / 3.70 against LL 3.68 / 3.87 / 3.94; \
                      512 KiB: 6.66 against direct 8.01, NCCL 8.14. LL (the types Lamport does \
                      not serve) 32 KiB: 3.68 against direct 6.24. Direct 1 MiB: 10.12 against \
                      NVSHMEM 17.94; 64 MiB (the split, nvlink.rs REDUCE_SPLIT_FROM): 297.02 \
                      against 354.48; 256 MiB: 978.04 against 1318.63; NCCL's reduce, not an \
                      algorithm here, 758.50 at 256 MiB. LARGE (after the abort word's fix, \
                      before the split from 16 MiB): direct 64 MiB: 239.06 against NVSHMEM \
                      348.17, NCCL 207.22. FOUR_PE (before the Lamport kernels' re-fill and team \
                      loops): LL 32 KiB: 3.72 against Lamport 4.51",
        },
    },
    Row {
        coll: Collective::Gather,
        pes: 4..=4,
        arch: Some(Arch::SM90),
        ll: 256 * KIB,
        lamport: RangeInclusive::new(32 * KIB + 1, 512 * KIB),
        direct: up_to(16 * MIB),
        direct_where_nvshmem_lacks: false,
        ce: above(16 * MIB),
        basis: Basis::Measured {
            runs: &[FOUR_PE_RUN, ROOTED_RUN, FOUR_PE_LARGE_RUN, FOUR_PE_LAMPORT_COPY_RUN],
            figures: "FOUR_PE_LAMPORT_COPY (whole calls): Lamport 256 KiB: 2.98 against LL 3.36; \
                      512 KiB: 3.26 against 4.33; 1 MiB: 4.47 against 6.47; 2 MiB: 5.76 against \
                      direct 9.98; LL 128 KiB: 2.83 against 2.95. \
                      LARGE (blocks): direct 8 MiB: 74.37 against copy engines 80.28, NCCL \
                      74.49; 16 MiB: 141.55 against 142.66, NCCL 137.72; copy engines 32 MiB: \
                      270.63 against direct 274.43, NCCL 270.96. ROOTED (whole calls): LL 512 \
                      KiB: 4.57 against direct 8.20, NCCL 7.30; 1 MiB (LL's limit, 256 KiB \
                      blocks): 6.36 against direct 9.34, NCCL 9.09 (FOUR_PE, before LL's \
                      batches: 13.61 against direct 9.63)",
        },
    },
    Row {
        coll: Collective::Scatter,
        pes: 4..=4,
        arch: Some(Arch::SM90),
        ll: 256 * KIB,
        lamport: RangeInclusive::new(32 * KIB + 1, 512 * KIB),
        direct: up_to(16 * MIB),
        direct_where_nvshmem_lacks: false,
        ce: above(16 * MIB),
        basis: Basis::Measured {
            runs: &[FOUR_PE_RUN, ROOTED_RUN, FOUR_PE_LARGE_RUN, FOUR_PE_LAMPORT_COPY_RUN],
            figures: "FOUR_PE_LAMPORT_COPY (whole calls): Lamport 256 KiB: 2.86 against LL 2.92; \
                      512 KiB: 3.05 against 3.80; 1 MiB: 4.00 against 7.01; 2 MiB: 6.40 against \
                      direct 10.70; LL 128 KiB: 2.61 against 2.75. \
                      LARGE (blocks): direct 8 MiB: 76.22 against copy engines 88.31, NCCL \
                      78.57; 16 MiB: 146.76 against 150.82, NCCL 148.03; copy engines 32 MiB: \
                      286.56 against rooted_get 279.69 (2.5 % apart), direct 286.52. ROOTED \
                      (whole calls): LL 512 KiB: 4.47 against direct 8.39, NCCL 7.77; 1 MiB \
                      (LL's limit, 256 KiB blocks): 7.49 against direct 9.47, NCCL 9.89 \
                      (FOUR_PE, before LL's batches: 11.81 against direct 9.70)",
        },
    },
    // Conservative: any architecture, any team size not measured above (1 to 8 PEs, the
    // NVLink kernels' limit).
    Row {
        coll: Collective::AllReduce,
        pes: 1..=4,
        arch: None,
        ll: 8 * KIB,
        lamport: NEVER,
        direct: NEVER,
        direct_where_nvshmem_lacks: true,
        ce: NEVER,
        basis: Basis::Assumed(LL_ASSUMED),
    },
    Row {
        coll: Collective::AllReduce,
        pes: 5..=8,
        arch: None,
        ll: 4 * KIB,
        lamport: NEVER,
        direct: NEVER,
        direct_where_nvshmem_lacks: true,
        ce: NEVER,
        basis: Basis::Assumed(LL_ASSUMED),
    },
    Row {
        coll: Collective::ReduceScatter,
        pes: 1..=4,
        arch: None,
        ll: 4 * KIB,
        lamport: NEVER,
        direct: NEVER,
        direct_where_nvshmem_lacks: true,
        ce: NEVER,
        basis: Basis::Assumed(LL_ASSUMED),
    },
    Row {
        coll: Collective::ReduceScatter,
        pes: 5..=8,
        arch: None,
        ll: 2 * KIB,
        lamport: NEVER,
        direct: NEVER,
        direct_where_nvshmem_lacks: true,
        ce: NEVER,
        basis: Basis::Assumed(LL_ASSUMED),
    },
    Row {
        coll: Collective::Fcollect,
        pes: 1..=4,
        arch: None,
        ll: 4 * KIB,
        lamport: NEVER,
        direct: NEVER,
        direct_where_nvshmem_lacks: false,
        ce: NEVER,
        basis: Basis::Assumed(LL_ASSUMED),
    },
    Row {
        coll: Collective::Fcollect,
        pes: 5..=8,
        arch: None,
        ll: 2 * KIB,
        lamport: NEVER,
        direct: NEVER,
        direct_where_nvshmem_lacks: false,
        ce: NEVER,
        basis: Basis::Assumed(LL_ASSUMED),
    },
    Row {
        coll: Collective::Alltoall,
        pes: 1..=4,
        arch: None,
        ll: 8 * KIB,
        lamport: NEVER,
        direct: ALWAYS,
        direct_where_nvshmem_lacks: false,
        ce: NEVER,
        basis: Basis::Assumed(ALLTOALL_ASSUMED),
    },
    Row {
        coll: Collective::Alltoall,
        pes: 5..=8,
        arch: None,
        ll: 4 * KIB,
        lamport: NEVER,
        direct: ALWAYS,
        direct_where_nvshmem_lacks: false,
        ce: NEVER,
        basis: Basis::Assumed(ALLTOALL_ASSUMED),
    },
    Row {
        coll: Collective::Broadcast,
        pes: 1..=4,
        arch: None,
        ll: 8 * KIB,
        lamport: NEVER,
        direct: NEVER,
        direct_where_nvshmem_lacks: false,
        ce: NEVER,
        basis: Basis::Assumed(LL_ASSUMED),
    },
    Row {
        coll: Collective::Broadcast,
        pes: 5..=8,
        arch: None,
        ll: 4 * KIB,
        lamport: NEVER,
        direct: NEVER,
        direct_where_nvshmem_lacks: false,
        ce: NEVER,
        basis: Basis::Assumed(LL_ASSUMED),
    },
    Row {
        coll: Collective::Reduce,
        pes: 1..=4,
        arch: None,
        ll: 8 * KIB,
        lamport: NEVER,
        direct: ALWAYS,
        direct_where_nvshmem_lacks: false,
        ce: NEVER,
        basis: Basis::Assumed(
            "not measured; the direct kernels at every size past LL: NVSHMEM has no rooted \
             reduce, its path needs collective scratch of the input's bytes (which a program \
             that ran on a peer-mapped team never reserved) and was slower at every size on \
             2 PEs (8 B 12.10 against 4.58, 128 MiB 537.6 against 457.0, stream)",
        ),
    },
    Row {
        coll: Collective::Reduce,
        pes: 5..=8,
        arch: None,
        ll: 4 * KIB,
        lamport: NEVER,
        direct: ALWAYS,
        direct_where_nvshmem_lacks: false,
        ce: NEVER,
        basis: Basis::Assumed("as for 1 to 4 PEs"),
    },
    Row {
        coll: Collective::Gather,
        pes: 1..=4,
        arch: None,
        ll: 8 * KIB,
        lamport: NEVER,
        direct: up_to(16 * MIB),
        direct_where_nvshmem_lacks: false,
        ce: NEVER,
        basis: Basis::Assumed(
            "not measured; NVSHMEM has no gather: the direct kernels up to 16 MiB blocks, \
             where on 2 PEs they beat NCCL and rooted_get (8 B 3.60 against rooted_get's \
             16.84); rooted_get past that (the measured rows take the copy engines past 16 \
             MiB blocks on 4 PEs, 64 MiB on 2)",
        ),
    },
    Row {
        coll: Collective::Gather,
        pes: 5..=8,
        arch: None,
        ll: 4 * KIB,
        lamport: NEVER,
        direct: up_to(16 * MIB),
        direct_where_nvshmem_lacks: false,
        ce: NEVER,
        basis: Basis::Assumed("as for 1 to 4 PEs"),
    },
    Row {
        coll: Collective::Scatter,
        pes: 1..=4,
        arch: None,
        ll: 8 * KIB,
        lamport: NEVER,
        direct: up_to(16 * MIB),
        direct_where_nvshmem_lacks: false,
        ce: NEVER,
        basis: Basis::Assumed(
            "not measured; as gather (rooted_get 8 B 17.98 against 3.56 on 2 PEs)",
        ),
    },
    Row {
        coll: Collective::Scatter,
        pes: 5..=8,
        arch: None,
        ll: 4 * KIB,
        lamport: NEVER,
        direct: up_to(16 * MIB),
        direct_where_nvshmem_lacks: false,
        ce: NEVER,
        basis: Basis::Assumed("as for 1 to 4 PEs"),
    },
];

/// Whether the automatic choice takes the Lamport kernels for `call` (which they accept): a
/// float reduction or a copy of any type in its row's band.
pub(super) fn lamport(call: &Call) -> bool {
    (!call.coll.reduces() || call.dtype.is_float())
        && lookup(call.coll, call.n(), call.arch)
            .is_some_and(|r| r.lamport.contains(&call.block_bytes()))
}

/// The row for `coll` on a team of `n` PEs of architecture `arch` (`None`: unknown): the
/// measured row if there is one, else the conservative one; `None` for barrier and sync
/// (which have no crossover) and teams too large for the NVLink kernels.
pub(crate) fn lookup(coll: Collective, n: usize, arch: Option<Arch>) -> Option<&'static Row> {
    ROWS.iter()
        .filter(|r| r.coll == coll && r.pes.contains(&n))
        .find(|r| r.arch.is_none() || r.arch == arch)
}

fn row(call: &Call) -> Option<&'static Row> {
    lookup(call.coll, call.n(), call.arch)
}

/// Bytes a block up to which the automatic choice takes LL for `call`.
pub(super) fn ll_limit(call: &Call) -> usize {
    row(call).map_or(0, |r| r.ll)
}

/// Whether the automatic choice takes the direct kernels for `call` (past LL's limit).
pub(super) fn direct(call: &Call) -> bool {
    // In every row: NVSHMEM 3.4.5's own 16-bit integer reductions run at about 2 GB/s
    // (an i16 all-reduce of 128 MiB took 84 ms on 2 x H200), the direct kernels as fast as
    // f16's (399.6 µs, 336 GB/s): docs/performance.md, "16-bit integers". And the bitwise
    // reductions, which NVSHMEM computes in its own kernels (NCCL has none): the one wrong
    // result of its path seen on separate GPUs was one (an int64 `and` reduce-scatter on 3 x
    // H200, 2026-11-27, not seen again in four reruns; tools/nvshmem-repro's `bitwise` case
    // repeats it), and its one-shot reduce-scatter pushes into one shared scratch per team.
    if call.is_reduction()
        && (matches!(call.dtype, DataType::I16 | DataType::U16) || call.op.is_bitwise())
    {
        return true;
    }
    row(call).is_some_and(|r| {
        r.direct.contains(&call.block_bytes())
            || (r.direct_where_nvshmem_lacks
                && call.is_reduction()
                && !ffi::has_reduction(call.dtype, call.op))
    })
}

/// Whether the automatic choice takes the copy engines for `call`.
pub(super) fn copy_engines(call: &Call) -> bool {
    row(call).is_some_and(|r| r.ce.contains(&call.block_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        collective::algo::{
            registry,
            tests::{call, data_collectives, team, with_channel},
        },
        team::TeamShape,
        ReduceOp,
    };

    /// The 2-PE preferences as `nvlink.rs` and `ce.rs` wrote them before this table, kept
    /// verbatim as the record the measured rows must reproduce: (LL, copy engines, direct)
    /// for a block of `x` bytes.
    fn before_the_table(
        coll: Collective,
        dtype: DataType,
        op: ReduceOp,
        x: usize,
    ) -> (bool, bool, bool) {
        let reduction = matches!(
            coll,
            Collective::AllReduce | Collective::Reduce | Collective::ReduceScatter
        );
        let ll = x
            <= match coll {
                Collective::ReduceScatter => 16 << 10,
                // Widened since by LLWIDE_RUN (issue 31: LL over up to 32 blocks), then to
                // LL's limit by PEER_LANES_RUN; broadcast, gather and scatter to 1 MiB by
                // LL_PAIR_RUN (LL's 2-PE limit doubled).
                Collective::Broadcast | Collective::Gather | Collective::Scatter => 1 << 20,
                Collective::Fcollect | Collective::Alltoall => 512 << 10,
                // Widened since by SWEEP_RUN (LL beat Lamport to 64 KiB).
                Collective::Reduce => 64 << 10,
                _ => 32 << 10,
            };
        // Widened since by LARGE_RUN (the direct kernels' one-way moves no longer slowed by
        // the abort word's reads): broadcast, gather and scatter took them past 16 MiB.
        let ce = match coll {
            Collective::Broadcast | Collective::Gather | Collective::Scatter => x > 64 << 20,
            Collective::Fcollect | Collective::Alltoall => x > 64 << 20,
            _ => false,
        };
        // Widened since: bitwise reductions take the direct kernels past LL on every row.
        let direct = (reduction
            && (matches!(dtype, DataType::I16 | DataType::U16)
                || matches!(op, ReduceOp::And | ReduceOp::Or | ReduceOp::Xor)))
            || match coll {
                Collective::AllReduce | Collective::ReduceScatter | Collective::Fcollect => {
                    x > 256 << 10
                }
                Collective::Alltoall | Collective::Reduce => true,
                Collective::Broadcast => (1 << 20) < x && x <= 64 << 20,
                Collective::Gather | Collective::Scatter => x <= 64 << 20,
                Collective::Barrier | Collective::Sync => false,
            };
        (ll, ce, direct)
    }

    /// What [`choose`](super::super::choose) took for `c` with those preferences: the first
    /// algorithm of the registry that accepts and prefers the call, else the first that
    /// accepts.
    fn chosen_before_the_table(c: &Call) -> &'static str {
        let (ll, ce, direct) = before_the_table(c.coll, c.dtype, c.op, c.block_bytes());
        let accepting: Vec<_> = registry(c.coll)
            .iter()
            .filter(|a| a.refuses(c).is_none())
            .collect();
        // Since SWEEP_RUN, LL gives way to the Lamport kernel where that prefers and accepts
        // the call (nvlink.rs, `Ll::prefers`).
        let lamport_takes = accepting
            .iter()
            .any(|a| a.name() == "nvlink_lamport" && a.prefers(c));
        let preferred = accepting.iter().find(|a| match a.name() {
            "nvlink_ll" => ll && !lamport_takes,
            "nvlink_ce" => ce,
            // An in-place or premul_sum call that NVSHMEM could only take by staging it
            // through the scratch goes to the direct kernels since (nvshmem.rs, `stages`).
            "nvlink_direct" => direct || super::super::nvshmem::stages(c),
            _ => a.prefers(c),
        });
        preferred.or(accepting.first()).map_or("-", |a| a.name())
    }

    /// Block sizes around every threshold: powers of two from 1 B to 1 GiB, and one byte
    /// either side of each.
    fn sizes() -> Vec<usize> {
        (0..=30)
            .flat_map(|p| {
                let b = 1usize << p;
                [b - 1, b, b + 1]
            })
            .collect()
    }

    /// A call on PE 0 of `n`, peer-mapped with a channel, on `arch`, of `x`-byte blocks.
    fn call_on(
        t: &TeamShape,
        coll: Collective,
        arch: Option<Arch>,
        dtype: DataType,
        op: ReduceOp,
        x: usize,
        in_place: bool,
    ) -> Call<'_> {
        let mut c = with_channel(call(t, coll, dtype, op, x / dtype.size(), in_place, 0));
        c.arch = arch;
        c
    }

    /// LL's limit, whether the direct kernels and the copy engines are preferred, and the
    /// algorithm chosen, for a call of `x`-byte blocks on PE 0 of `n`.
    fn decide(
        coll: Collective,
        n: usize,
        arch: Option<Arch>,
        dtype: DataType,
        op: ReduceOp,
        x: usize,
    ) -> (usize, bool, bool, &'static str) {
        let t = team(n, 0, true);
        let c = call_on(&t, coll, arch, dtype, op, x, false);
        let chosen = super::super::choose(&c, None).map_or("-", |a| a.name());
        (ll_limit(&c), direct(&c), copy_engines(&c), chosen)
    }

    #[test]
    fn the_two_pe_sm90_choices_are_those_made_before_the_table() {
        let mut checked = 0;
        for coll in data_collectives() {
            for (dtype, op) in [
                (DataType::F32, ReduceOp::Sum),
                (DataType::F32, ReduceOp::PreMulSum(0.5)),
                (DataType::U8, ReduceOp::Max),
                (DataType::U32, ReduceOp::Xor),
                (DataType::I16, ReduceOp::Sum),
                (DataType::U16, ReduceOp::Min),
                (DataType::BF16, ReduceOp::Avg),
                (DataType::F8E4M3, ReduceOp::Sum),
                (DataType::Bool8, ReduceOp::And),
            ] {
                for x in sizes().into_iter().filter(|x| x % dtype.size() == 0) {
                    for me in [0, 1] {
                        for in_place in [false, true] {
                            let t = team(2, me, true);
                            let c = call_on(&t, coll, Some(Arch::SM90), dtype, op, x, in_place);
                            let now = super::super::choose(&c, None).map_or("-", |a| a.name());
                            assert_eq!(
                                now,
                                chosen_before_the_table(&c),
                                "{coll} {dtype} {op} {x} B, PE {me}, in place {in_place}"
                            );
                            // Where the registry's order does not hide it, each preference
                            // is the same too.
                            let (ll, ce, direct_before) = before_the_table(coll, dtype, op, x);
                            assert_eq!(x <= ll_limit(&c), ll, "{coll} {x} B");
                            assert_eq!(copy_engines(&c), ce, "{coll} {x} B");
                            if !ce {
                                assert_eq!(direct(&c), direct_before, "{coll} {dtype} {x} B");
                            }
                            checked += 1;
                        }
                    }
                }
            }
        }
        assert!(checked > 10_000, "{checked}");
    }

    #[test]
    fn two_pe_sm90_choices_name_the_measured_algorithms() {
        let f32_sum =
            |coll, x| decide(coll, 2, Some(Arch::SM90), DataType::F32, ReduceOp::Sum, x).3;
        assert_eq!(f32_sum(Collective::AllReduce, KIB), "nvlink_ll");
        assert_eq!(f32_sum(Collective::AllReduce, KIB + 4), "nvlink_lamport");
        assert_eq!(f32_sum(Collective::AllReduce, 32 * KIB), "nvlink_lamport");
        assert_eq!(f32_sum(Collective::AllReduce, 48 * KIB), "nvlink_lamport");
        // The types Lamport does not serve keep LL to LL's own limit.
        let i32_sum =
            |coll, x| decide(coll, 2, Some(Arch::SM90), DataType::I32, ReduceOp::Sum, x).3;
        assert_eq!(i32_sum(Collective::AllReduce, 32 * KIB), "nvlink_ll");
        assert_eq!(i32_sum(Collective::ReduceScatter, 16 * KIB), "nvlink_ll");
        assert_eq!(
            f32_sum(Collective::ReduceScatter, 16 * KIB),
            "nvlink_lamport"
        );
        assert_eq!(f32_sum(Collective::Reduce, 4 * KIB), "nvlink_ll");
        assert_eq!(f32_sum(Collective::Reduce, 4 * KIB + 4), "nvlink_lamport");
        assert_eq!(i32_sum(Collective::Reduce, 64 * KIB), "nvlink_ll");
        assert_eq!(f32_sum(Collective::AllReduce, 64 * KIB), "nvlink_lamport");
        assert_eq!(f32_sum(Collective::AllReduce, MIB), "nvlink_lamport");
        assert_eq!(f32_sum(Collective::AllReduce, 2 * MIB), "nvlink_lamport");
        assert_eq!(
            f32_sum(Collective::AllReduce, 2 * MIB + 16),
            "nvlink_direct"
        );
        // The copies: LL, then Lamport (LAMPORT_COPY_RUN, LAMPORT_BATCH_RUN) up to 1 MiB
        // blocks, whatever the type, then the direct kernels.
        let u8_copy = |coll, x| decide(coll, 2, Some(Arch::SM90), DataType::U8, ReduceOp::Sum, x).3;
        for (coll, from) in [
            (Collective::Broadcast, 64 * KIB),
            (Collective::Fcollect, 32 * KIB),
            (Collective::Alltoall, 8 * KIB),
            (Collective::Gather, 32 * KIB),
            (Collective::Scatter, 64 * KIB),
        ] {
            assert_eq!(f32_sum(coll, from), "nvlink_ll", "{coll}");
            assert_eq!(f32_sum(coll, from + 4), "nvlink_lamport", "{coll}");
            assert_eq!(u8_copy(coll, from + 1), "nvlink_lamport", "{coll}");
            assert_eq!(f32_sum(coll, MIB), "nvlink_lamport", "{coll}");
            assert_eq!(f32_sum(coll, MIB + 4), "nvlink_direct", "{coll}");
            // Not measured on 3 PEs, nor on another architecture (4 PEs: the rows of
            // `four_pe_sm90_choices_name_the_measured_algorithms`).
            assert_ne!(
                decide(
                    coll,
                    3,
                    Some(Arch::SM90),
                    DataType::F32,
                    ReduceOp::Sum,
                    MIB / 2
                )
                .3,
                "nvlink_lamport"
            );
            assert_ne!(
                decide(coll, 2, None, DataType::F32, ReduceOp::Sum, MIB / 2).3,
                "nvlink_lamport"
            );
        }
        assert_eq!(f32_sum(Collective::Broadcast, 64 * MIB), "nvlink_direct");
        assert_eq!(f32_sum(Collective::Broadcast, 128 * MIB), "nvlink_ce");
        assert_eq!(f32_sum(Collective::Fcollect, 64 * MIB), "nvlink_direct");
        assert_eq!(f32_sum(Collective::Fcollect, 128 * MIB), "nvlink_ce");
        assert_eq!(f32_sum(Collective::Gather, 64 * MIB), "nvlink_direct");
        assert_eq!(f32_sum(Collective::Gather, 128 * MIB), "nvlink_ce");
        assert_eq!(f32_sum(Collective::Reduce, 256 * MIB), "nvlink_direct");
    }

    /// The block (one PE's part, [`Call::block_bytes`]) of a call of `bytes` on `n` PEs as
    /// `nvshmem-perf` sizes calls (nccl-tests' size): the whole buffer for all-reduce, reduce and
    /// broadcast, an `n`-th of it for the chunked collectives.
    fn block_of(coll: Collective, bytes: usize, n: usize) -> usize {
        match coll {
            Collective::AllReduce | Collective::Reduce | Collective::Broadcast => bytes,
            _ => bytes / n,
        }
    }

    /// The 4-PE sm_90 rows (FOUR_PE_RUN): the fastest algorithm measured at each size, in
    /// call sizes as `nvshmem-perf` gives them (a chunked collective's block is a quarter).
    #[test]
    fn four_pe_sm90_choices_name_the_measured_algorithms() {
        let pick = |coll, dtype, call: usize| {
            decide(
                coll,
                4,
                Some(Arch::SM90),
                dtype,
                ReduceOp::Sum,
                block_of(coll, call, 4),
            )
            .3
        };
        let f32 = |coll, call| pick(coll, DataType::F32, call);
        let i32 = |coll, call| pick(coll, DataType::I32, call);
        use Collective::*;
        for (coll, call, want) in [
            (AllReduce, 8, "nvlink_lamport"),
            (AllReduce, 256 * KIB, "nvlink_lamport"),
            (AllReduce, 512 * KIB, "nvlink_direct"),
            (AllReduce, 16 * MIB, "nvlink_direct"),
            (AllReduce, 32 * MIB, "nvshmem"),
            (ReduceScatter, 64, "nvlink_lamport"),
            (ReduceScatter, 2 * MIB, "nvlink_lamport"),
            (ReduceScatter, 4 * MIB, "nvlink_direct"),
            (ReduceScatter, 256 * MIB, "nvlink_direct"),
            (Reduce, KIB, "nvlink_ll"),
            (Reduce, 2 * KIB, "nvlink_lamport"),
            (Reduce, 32 * KIB, "nvlink_lamport"),
            (Reduce, 64 * KIB, "nvlink_lamport"),
            (Reduce, 512 * KIB, "nvlink_lamport"),
            (Reduce, MIB, "nvlink_direct"),
            (Fcollect, 128 * KIB, "nvlink_ll"),
            (Fcollect, 256 * KIB, "nvlink_lamport"),
            (Fcollect, 2 * MIB, "nvlink_lamport"),
            (Fcollect, 4 * MIB, "nvlink_direct"),
            (Fcollect, 256 * MIB, "nvlink_direct"),
            (Alltoall, 128 * KIB, "nvlink_ll"),
            (Alltoall, 256 * KIB, "nvlink_lamport"),
            (Alltoall, 2 * MIB, "nvlink_lamport"),
            (Alltoall, 4 * MIB, "nvlink_direct"),
            (Alltoall, 256 * MIB, "nvlink_direct"),
            (Broadcast, 32 * KIB, "nvlink_ll"),
            (Broadcast, 64 * KIB, "nvlink_lamport"),
            (Broadcast, 256 * KIB, "nvlink_lamport"),
            (Broadcast, 512 * KIB, "nvlink_ll"),
            (Broadcast, 768 * KIB, "nvlink_ll"),
            (Broadcast, 768 * KIB + 8, "nvlink_direct"),
            (Broadcast, MIB, "nvlink_direct"),
            (Broadcast, 2 * MIB, "nvlink_direct"),
            (Broadcast, 4 * MIB, "nvlink_direct"),
            (Broadcast, 8 * MIB, "nvlink_direct"),
            (Broadcast, 16 * MIB, "nvlink_direct"),
            (Broadcast, 32 * MIB, "nvshmem"),
            (Gather, 128 * KIB, "nvlink_ll"),
            (Gather, 256 * KIB, "nvlink_lamport"),
            (Gather, 2 * MIB, "nvlink_lamport"),
            (Gather, 4 * MIB, "nvlink_direct"),
            (Gather, 64 * MIB, "nvlink_direct"),
            (Gather, 128 * MIB, "nvlink_ce"),
            (Scatter, 128 * KIB, "nvlink_ll"),
            (Scatter, 256 * KIB, "nvlink_lamport"),
            (Scatter, 2 * MIB, "nvlink_lamport"),
            (Scatter, 4 * MIB, "nvlink_direct"),
            (Scatter, 64 * MIB, "nvlink_direct"),
            (Scatter, 128 * MIB, "nvlink_ce"),
        ] {
            assert_eq!(f32(coll, call), want, "{coll} f32 {call} B");
        }
        // The types Lamport does not serve: LL to 64 KiB, the direct kernels past it, and
        // NVSHMEM's path past 16 MiB where it has the reduction, the direct kernels where not.
        assert_eq!(i32(AllReduce, 64 * KIB), "nvlink_ll");
        assert_eq!(i32(AllReduce, 128 * KIB), "nvlink_direct");
        assert_eq!(i32(AllReduce, 32 * MIB), "nvshmem");
        assert_eq!(i32(ReduceScatter, 256 * KIB), "nvlink_ll");
        assert_eq!(i32(ReduceScatter, 512 * KIB), "nvlink_direct");
        assert_eq!(i32(Reduce, 32 * KIB), "nvlink_ll");
        assert_eq!(i32(Reduce, 64 * KIB), "nvlink_direct");
        assert_eq!(
            decide(
                AllReduce,
                4,
                Some(Arch::SM90),
                DataType::F8E4M3,
                ReduceOp::Sum,
                32 * MIB
            )
            .3,
            "nvlink_direct"
        );
    }

    /// The measured rows against the sweeps they rest on, as committed (`docs/perf/`, each
    /// algorithm forced in turn, graph mode, f32 sum): at every point, the algorithm the table
    /// chooses was timed within 5 % (or 0.2 µs) of the fastest one, but at the points listed
    /// (each one a single-run oddity the row's figures name). A change of a measured row that
    /// its own data does not back fails here.
    #[test]
    fn the_measured_rows_choose_the_fastest_algorithm_of_their_sweeps() {
        let perf = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/perf");
        // (team size, folder, lists of points excused: collective and call bytes, whether the
        // automatic choice's own times count as timings of the algorithm it took: the rooted
        // sweep forced LL and the direct kernels only, and its choice of NVSHMEM's broadcast
        // is timed in its automatic job)
        type Sweep = (
            usize,
            &'static str,
            &'static [&'static [(&'static str, usize)]],
            bool,
        );
        // The 4-PE points that the direct kernels' one-way moves lost before c84af28 (the
        // broadcast of 16 MiB, gather and scatter of 32 and 64 MiB: timed again in
        // sweep-large-2026-11-27) and NVSHMEM's broadcast of 8 MiB, whose forced job ran again
        // with NCCL_GRAPH_REGISTER=0 after NVSHMEM's alltoall hung (36.6 µs, against 61.5 with
        // registration, a program's default; the direct kernels 41.5 in the large sweep); and
        // the rooted reduce of 64 MiB in the two-shot, before the split (f633d8a; timed in
        // sweep-4pe-2026-11-27b/reduce).
        const FOUR_PE_BEFORE_C84AF28: &[(&str, usize)] = &[
            ("reduce", 64 * MIB),
            ("broadcast", 8 * MIB),
            ("broadcast", 16 * MIB),
            ("gather", 32 * MIB),
            ("gather", 64 * MIB),
            ("scatter", 32 * MIB),
            ("scatter", 64 * MIB),
        ];
        // The 4-PE rooted reduce's Lamport band before its re-fill and team loops of 4
        // (ea0eadb, 42c5acf: timed again in sweep-4pe-2026-11-27b, where it wins from 2 KiB).
        const FOUR_PE_LAMPORT_REDUCE_BEFORE_EA0EADB: &[(&str, usize)] = &[
            ("reduce", 2 * KIB),
            ("reduce", 4 * KIB),
            ("reduce", 8 * KIB),
            ("reduce", 16 * KIB),
            ("reduce", 32 * KIB),
        ];
        // Where the table takes LL past the 512 KiB a pair it carried on 2 PEs before each
        // block took both of its regions (LL_PAIR_RUN): earlier sweeps could not time LL there
        // (the broadcast of 1 MiB, the gather and scatter of 2 MiB; timed in
        // sweep-llpair-2026-11-28).
        const TWO_PE_BEFORE_LL_PAIR: &[(&str, usize)] = &[
            ("broadcast", MIB),
            ("gather", 2 * MIB),
            ("scatter", 2 * MIB),
        ];
        // Where the table takes the Lamport copies (LAMPORT_COPY_RUN, whole calls here):
        // sweeps before them could not time them (timed in sweep-lamport-copies-2026-11-28).
        const TWO_PE_BEFORE_LAMPORT_COPIES: &[(&str, usize)] = &[
            ("broadcast", 512 * KIB),
            ("broadcast", MIB),
            ("fcollect", 512 * KIB),
            ("fcollect", MIB),
            ("fcollect", 2 * MIB),
            ("alltoall", 512 * KIB),
            ("alltoall", MIB),
            ("alltoall", 2 * MIB),
            ("gather", 512 * KIB),
            ("gather", MIB),
            ("gather", 2 * MIB),
            ("scatter", MIB),
            ("scatter", 2 * MIB),
        ];
        // The 4-PE broadcast of 512 KiB, where the table takes LL since its relayed kernel
        // (RELAY_RUN): the one-shot LL could not carry it, so sweeps before it timed no LL
        // there (timed in relay-2026-11-28/broadcast-4pe).
        const FOUR_PE_BEFORE_RELAY: &[(&str, usize)] = &[("broadcast", 512 * KIB)];
        // Where the table takes the Lamport kernels since their header became one word
        // (LAMPORT_HEADER_RUN, 6a71afc): the scatter of 512 KiB (256 KiB blocks), which earlier
        // sweeps did not time with Lamport, and the reduce of 8-64 KiB, where they timed the
        // kernel before it slower than LL (timed again in sweep-lamport-header-2026-11-28:
        // 2.06-2.34 µs against LL's 2.16-2.48). Each sweep lists the sizes it timed so.
        const TWO_PE_SCATTER_BEFORE_LAMPORT_HEADER: &[(&str, usize)] = &[("scatter", 512 * KIB)];
        const TWO_PE_REDUCE_BEFORE_LAMPORT_HEADER: &[(&str, usize)] = &[
            ("reduce", 8 * KIB),
            ("reduce", 16 * KIB),
            ("reduce", 32 * KIB),
            ("reduce", 64 * KIB),
        ];
        // Where the table takes the Lamport copies since their batch of one line
        // (LAMPORT_BATCH_RUN, ec1d892: 2.3-2.9 µs from 32 KiB to 256 KiB calls): sweeps before
        // it could not time them there, or timed the batch of 4 slower than LL (timed again
        // in sweep-lamport-batch1-2026-11-28). Each sweep lists the sizes it timed so: every
        // copy of 256 KiB, and the alltoall of 32-128 KiB and broadcast, fcollect and gather of
        // 128 KiB.
        const TWO_PE_256K_BEFORE_LAMPORT_BATCH: &[(&str, usize)] = &[
            ("alltoall", 256 * KIB),
            ("broadcast", 256 * KIB),
            ("fcollect", 256 * KIB),
            ("gather", 256 * KIB),
            ("scatter", 256 * KIB),
        ];
        const TWO_PE_BELOW_256K_BEFORE_LAMPORT_BATCH: &[(&str, usize)] = &[
            ("alltoall", 32 * KIB),
            ("alltoall", 64 * KIB),
            ("alltoall", 128 * KIB),
            ("broadcast", 128 * KIB),
            ("fcollect", 128 * KIB),
            ("gather", 128 * KIB),
        ];
        // Where the 4-PE rows take the Lamport copies (FOUR_PE_LAMPORT_COPY_RUN, whole calls):
        // sweeps before it could not time them (timed in sweep-4pe-lamport-copies-2026-11-28).
        const FOUR_PE_BEFORE_LAMPORT_COPIES: &[(&str, usize)] = &[
            ("broadcast", 64 * KIB),
            ("broadcast", 128 * KIB),
            ("broadcast", 256 * KIB),
            ("fcollect", 256 * KIB),
            ("fcollect", 512 * KIB),
            ("fcollect", MIB),
            ("fcollect", 2 * MIB),
            ("alltoall", 256 * KIB),
            ("alltoall", 512 * KIB),
            ("alltoall", MIB),
            ("alltoall", 2 * MIB),
            ("gather", 256 * KIB),
            ("gather", 512 * KIB),
            ("gather", MIB),
            ("gather", 2 * MIB),
            ("scatter", 256 * KIB),
            ("scatter", 512 * KIB),
            ("scatter", MIB),
            ("scatter", 2 * MIB),
        ];
        // The 4-PE broadcast of 1 MiB, which the direct kernels take since
        // FOUR_PE_LAMPORT_COPY_RUN (10.73 µs against NVSHMEM's 11.57; NVSHMEM's before): the
        // first 4-PE sweep timed their longer entry and exit then (12.43 against 11.36), and
        // the relay's broadcast sweep did not force them.
        const FOUR_PE_BROADCAST_1M_BEFORE_DIRECT: &[(&str, usize)] = &[("broadcast", MIB)];
        let sweeps: [Sweep; 26] = [
            // LL's fcollect and alltoall of 1 MiB before their lanes went to the peers alone
            // (timed again in PEER_LANES_RUN's sweep). The direct kernels' one-way moves of
            // 32-64 MiB before the waits stopped reading the abort word every 256 polls
            // (c84af28; timed again in sweep-large-2026-11-27, as on 4 PEs below).
            (
                2,
                "sweep-2026-11-27/full",
                &[
                    &[("reduce", 8 * KIB), ("reduce", 16 * KIB)],
                    TWO_PE_SCATTER_BEFORE_LAMPORT_HEADER,
                    &[
                        ("fcollect", MIB),
                        ("alltoall", MIB),
                        ("broadcast", 32 * MIB),
                        ("broadcast", 64 * MIB),
                        ("gather", 64 * MIB),
                        ("gather", 128 * MIB),
                        ("scatter", 64 * MIB),
                        ("scatter", 128 * MIB),
                    ],
                    TWO_PE_BEFORE_LL_PAIR,
                    TWO_PE_BEFORE_LAMPORT_COPIES,
                    TWO_PE_256K_BEFORE_LAMPORT_BATCH,
                    TWO_PE_BELOW_256K_BEFORE_LAMPORT_BATCH,
                ],
                false,
            ),
            (
                2,
                "sweep-2026-11-27/small",
                &[
                    TWO_PE_REDUCE_BEFORE_LAMPORT_HEADER,
                    TWO_PE_BEFORE_LL_PAIR,
                    TWO_PE_BEFORE_LAMPORT_COPIES,
                ],
                false,
            ),
            // FOUR_PE_BEFORE_C84AF28 (the rooted reduce of 64 MiB: direct 407.6 against
            // NVSHMEM's 357.2 where direct wins at 32 and 128 MiB); LL's gather and scatter of
            // 1 MiB before LL batched their packets (6a67b05; timed again in the rooted sweep:
            // 6.36 and 7.49 against direct 9.34 and 9.47); FOUR_PE_LAMPORT_REDUCE_BEFORE_EA0EADB
            // (this sweep starts at 4 KiB).
            (
                4,
                "sweep-4pe-2026-11-27/full",
                &[
                    FOUR_PE_BEFORE_C84AF28,
                    &[("gather", MIB), ("scatter", MIB), ("broadcast", 256 * KIB)],
                    FOUR_PE_LAMPORT_REDUCE_BEFORE_EA0EADB,
                    FOUR_PE_BEFORE_RELAY,
                    FOUR_PE_BEFORE_LAMPORT_COPIES,
                    FOUR_PE_BROADCAST_1M_BEFORE_DIRECT,
                ],
                false,
            ),
            (
                4,
                "sweep-4pe-2026-11-27/small",
                &[FOUR_PE_LAMPORT_REDUCE_BEFORE_EA0EADB],
                false,
            ),
            (
                2,
                "rooted-2026-11-27/2pe",
                &[
                    TWO_PE_SCATTER_BEFORE_LAMPORT_HEADER,
                    TWO_PE_BEFORE_LL_PAIR,
                    TWO_PE_BEFORE_LAMPORT_COPIES,
                    &[
                        ("broadcast", 128 * KIB),
                        ("broadcast", 256 * KIB),
                        ("gather", 128 * KIB),
                        ("gather", 256 * KIB),
                        ("scatter", 256 * KIB),
                    ],
                ],
                true,
            ),
            (
                2,
                "peerlanes-2026-11-27/2pe",
                &[
                    TWO_PE_BEFORE_LL_PAIR,
                    TWO_PE_BEFORE_LAMPORT_COPIES,
                    &[
                        ("alltoall", 32 * KIB),
                        ("alltoall", 64 * KIB),
                        ("alltoall", 128 * KIB),
                        ("alltoall", 256 * KIB),
                        ("fcollect", 128 * KIB),
                        ("fcollect", 256 * KIB),
                    ],
                ],
                true,
            ),
            // The direct kernels with one fence less at entry and exit (3e4b6ca), 256 KiB to
            // 8 MiB calls.
            (
                2,
                "direct-2026-11-27/2pe",
                &[
                    TWO_PE_SCATTER_BEFORE_LAMPORT_HEADER,
                    TWO_PE_BEFORE_LL_PAIR,
                    TWO_PE_BEFORE_LAMPORT_COPIES,
                    TWO_PE_256K_BEFORE_LAMPORT_BATCH,
                ],
                true,
            ),
            (
                4,
                "rooted-2026-11-27/4pe",
                &[FOUR_PE_BEFORE_RELAY, FOUR_PE_BEFORE_LAMPORT_COPIES],
                true,
            ),
            // The reductions, 512 B to 8 MiB calls, after the Lamport kernels' re-fill and
            // pair loops (219b543).
            (
                2,
                "lamport-2026-11-27/2pe",
                &[
                    &[("reduce", 8 * KIB)],
                    TWO_PE_BEFORE_LL_PAIR,
                    TWO_PE_BEFORE_LAMPORT_COPIES,
                ],
                true,
            ),
            (4, "sweep-4pe-2026-11-27b/reductions", &[], true),
            (
                4,
                "sweep-4pe-2026-11-27b/full",
                &[
                    FOUR_PE_BEFORE_C84AF28,
                    FOUR_PE_BEFORE_RELAY,
                    FOUR_PE_BEFORE_LAMPORT_COPIES,
                ],
                true,
            ),
            (4, "sweep-4pe-2026-11-27b/reduce", &[], true),
            (
                2,
                "sweep-large-2026-11-27/2pe",
                &[TWO_PE_BEFORE_LL_PAIR, TWO_PE_BEFORE_LAMPORT_COPIES],
                true,
            ),
            (
                4,
                "sweep-large-2026-11-27/4pe",
                &[FOUR_PE_BEFORE_LAMPORT_COPIES],
                true,
            ),
            // 2 x H100 (the rows are of sm_90, H100 and H200 alike): the first H100 pair lent.
            (
                2,
                "sweep-h100-2026-11-28/full",
                &[
                    TWO_PE_REDUCE_BEFORE_LAMPORT_HEADER,
                    TWO_PE_SCATTER_BEFORE_LAMPORT_HEADER,
                    TWO_PE_BEFORE_LL_PAIR,
                    TWO_PE_BEFORE_LAMPORT_COPIES,
                    TWO_PE_256K_BEFORE_LAMPORT_BATCH,
                    TWO_PE_BELOW_256K_BEFORE_LAMPORT_BATCH,
                ],
                true,
            ),
            // LL_PAIR_RUN: the copies of 256 KiB to 4 MiB with LL carrying 1 MiB a pair.
            (
                2,
                "sweep-llpair-2026-11-28/h200",
                &[
                    TWO_PE_SCATTER_BEFORE_LAMPORT_HEADER,
                    TWO_PE_BEFORE_LAMPORT_COPIES,
                    TWO_PE_256K_BEFORE_LAMPORT_BATCH,
                ],
                true,
            ),
            (
                2,
                "sweep-llpair-2026-11-28/h100",
                &[
                    TWO_PE_SCATTER_BEFORE_LAMPORT_HEADER,
                    TWO_PE_BEFORE_LAMPORT_COPIES,
                    TWO_PE_256K_BEFORE_LAMPORT_BATCH,
                ],
                true,
            ),
            // The broadcast, gather and scatter again with the table as it stands (90131ec).
            (
                2,
                "sweep-llpair-2026-11-28/h100-90131ec",
                &[
                    TWO_PE_SCATTER_BEFORE_LAMPORT_HEADER,
                    TWO_PE_BEFORE_LAMPORT_COPIES,
                ],
                true,
            ),
            // RELAY_RUN: every collective on 4 x H200 with the one-shot LL broadcast (its
            // relayed kernel came after), then the broadcast with it.
            (
                4,
                "relay-2026-11-28/sweep-4pe",
                &[FOUR_PE_BEFORE_RELAY, FOUR_PE_BEFORE_LAMPORT_COPIES],
                true,
            ),
            (
                4,
                "relay-2026-11-28/broadcast-4pe",
                &[
                    FOUR_PE_BEFORE_LAMPORT_COPIES,
                    FOUR_PE_BROADCAST_1M_BEFORE_DIRECT,
                ],
                true,
            ),
            // LAMPORT_COPY_RUN: the copies of 64 KiB to 4 MiB with the Lamport copies.
            (
                2,
                "sweep-lamport-copies-2026-11-28/h200",
                &[&[
                    ("alltoall", 64 * KIB),
                    ("alltoall", 128 * KIB),
                    ("broadcast", 128 * KIB),
                    ("fcollect", 128 * KIB),
                    ("gather", 128 * KIB),
                    ("gather", 256 * KIB),
                    ("scatter", 256 * KIB),
                ]],
                true,
            ),
            // LAMPORT_HEADER_RUN: every collective of 16 KiB to 1 MiB, then the reduce,
            // broadcast and scatter of 1-32 KiB, with the Lamport header in one word.
            (
                2,
                "sweep-lamport-header-2026-11-28/band",
                &[&[
                    ("alltoall", 32 * KIB),
                    ("alltoall", 64 * KIB),
                    ("alltoall", 128 * KIB),
                    ("fcollect", 128 * KIB),
                    ("fcollect", 256 * KIB),
                ]],
                true,
            ),
            (2, "sweep-lamport-header-2026-11-28/small", &[], true),
            // LAMPORT_BATCH_RUN: the copies of 32 KiB to 1 MiB with the batch of one line, then
            // of 4-32 KiB with the bands it moved.
            (2, "sweep-lamport-batch1-2026-11-28", &[], true),
            (2, "sweep-lamport-batch1-2026-11-28/low", &[], true),
            // FOUR_PE_LAMPORT_COPY_RUN: the copies of 16 KiB to 4 MiB on 4 GPUs with the
            // Lamport copies.
            (4, "sweep-4pe-lamport-copies-2026-11-28", &[], true),
        ];
        let mut checked = 0;
        for (n, dir, exceptions, with_auto) in sweeps {
            // (collective, bytes) -> algorithm -> µs, from the forced jobs' files.
            let mut timed =
                std::collections::BTreeMap::<(String, usize), Vec<(String, f64)>>::new();
            let mut files: Vec<_> = std::fs::read_dir(perf.join(dir))
                .unwrap()
                .map(|e| e.unwrap().path())
                .filter(|p| {
                    let name = p.file_name().unwrap().to_string_lossy().into_owned();
                    name.ends_with(".jsonl") && (with_auto || !name.starts_with("graph-auto-"))
                })
                .collect();
            files.sort();
            assert!(files.len() >= 2, "{dir}: {files:?}");
            for f in files {
                for line in std::fs::read_to_string(&f).unwrap().lines() {
                    let r: serde_json::Value = serde_json::from_str(line).unwrap();
                    if r["status"] != "ok" || r["implementation"] != "nvshmem-rs" {
                        continue;
                    }
                    assert_eq!(r["n_pes"], n, "{f:?}");
                    let key = (
                        r["collective"].as_str().unwrap().to_string(),
                        r["count"].as_u64().unwrap() as usize,
                    );
                    let algo = r["algo"].as_str().unwrap().to_string();
                    timed
                        .entry(key)
                        .or_default()
                        .push((algo, r["time_us"].as_f64().unwrap()));
                }
            }
            for ((name, count), times) in &timed {
                let coll: Collective = name.parse().unwrap();
                let bytes = count * 4;
                let block = block_of(coll, bytes, n);
                if block == 0 {
                    continue;
                }
                let chosen = decide(
                    coll,
                    n,
                    Some(Arch::SM90),
                    DataType::F32,
                    ReduceOp::Sum,
                    block,
                )
                .3;
                let best = times.iter().map(|t| t.1).fold(f64::INFINITY, f64::min);
                // The chosen algorithm's best time: where the automatic job and a forced one
                // both timed it, the two differ by the jobs' jitter, not by a choice.
                let mine = times
                    .iter()
                    .filter(|t| t.0 == chosen)
                    .map(|t| t.1)
                    .fold(f64::INFINITY, f64::min);
                let excused = exceptions
                    .iter()
                    .any(|list| list.contains(&(name.as_str(), bytes)));
                // (An excused point's choice may not have been timed: TWO_PE_BEFORE_LL_PAIR.)
                assert!(
                    mine.is_finite() || excused,
                    "{dir}: {name} {bytes} B: {chosen} was not timed ({times:?})"
                );
                let fast_enough = mine <= 1.05 * best || mine - best <= 0.2;
                assert!(
                    fast_enough != excused,
                    "{dir}: {name} {bytes} B: {chosen} {mine:.2} µs, the fastest {best:.2} \
                     ({times:?}){}",
                    if excused {
                        " (listed as an exception, but fast enough now)"
                    } else {
                        ""
                    }
                );
                checked += 1;
            }
        }
        assert!(checked > 300, "{checked}");
    }

    /// The Lamport band on 2-PE sm_90 teams: float reductions past 1 KiB blocks (64 KiB for the
    /// rooted reduce, where LL stays faster) up to 2 MiB; 4-PE sm_90 teams have a band of their
    /// own (`four_pe_sm90_choices_name_the_measured_algorithms`); integers, f64 (which the
    /// algorithm refuses), other team sizes and unknown architectures never prefer it. The
    /// copies' bands are 2- and 4-PE sm_90 ones
    /// (`two_pe_sm90_choices_name_the_measured_algorithms`,
    /// `four_pe_sm90_choices_name_the_measured_algorithms`).
    #[test]
    fn lamport_is_preferred_for_float_reductions_of_the_mid_band_on_measured_sm90_teams_only() {
        for r in ROWS.iter().filter(|r| !r.lamport.is_empty()) {
            assert!(r.arch == Some(Arch::SM90));
            let pes = 2..=4;
            assert!(
                pes.contains(r.pes.start()) && pes.contains(r.pes.end()) && r.pes != (3..=3),
                "{} {:?}",
                r.coll,
                r.pes
            );
        }
        let choice = |coll, n, arch, dtype, x| decide(coll, n, arch, dtype, ReduceOp::Sum, x).3;
        let sm90 = Some(Arch::SM90);
        for coll in [
            Collective::AllReduce,
            Collective::ReduceScatter,
            Collective::Reduce,
        ] {
            for dtype in [
                DataType::F32,
                DataType::BF16,
                DataType::F16,
                DataType::F8E5M2,
            ] {
                let from = if coll == Collective::Reduce {
                    4 * KIB
                } else {
                    KIB
                };
                for x in [from + 4, 2 * from, 256 * KIB, MIB, 2 * MIB] {
                    assert_eq!(
                        choice(coll, 2, sm90, dtype, x),
                        "nvlink_lamport",
                        "{coll} {dtype} {x}"
                    );
                }
                assert_ne!(choice(coll, 2, sm90, dtype, 4 * MIB), "nvlink_lamport");
                assert_ne!(choice(coll, 2, sm90, dtype, from), "nvlink_lamport");
                assert_ne!(choice(coll, 3, sm90, dtype, 256 * KIB), "nvlink_lamport");
                assert_ne!(choice(coll, 8, sm90, dtype, 256 * KIB), "nvlink_lamport");
                assert_ne!(choice(coll, 2, None, dtype, 256 * KIB), "nvlink_lamport");
            }
            for dtype in [DataType::F64, DataType::I32, DataType::U8] {
                assert_ne!(choice(coll, 2, sm90, dtype, 256 * KIB), "nvlink_lamport");
            }
        }
        for coll in [
            Collective::Broadcast,
            Collective::Fcollect,
            Collective::Alltoall,
        ] {
            assert_ne!(
                choice(coll, 2, sm90, DataType::F32, 8 * KIB),
                "nvlink_lamport"
            );
            assert_ne!(
                choice(coll, 4, sm90, DataType::F32, 8 * KIB),
                "nvlink_lamport"
            );
            assert_ne!(choice(coll, 4, sm90, DataType::F32, MIB), "nvlink_lamport");
            assert_ne!(
                choice(coll, 3, sm90, DataType::F32, 256 * KIB),
                "nvlink_lamport"
            );
        }
    }

    #[test]
    fn every_collective_has_one_row_for_each_team_size_and_architecture() {
        for coll in data_collectives() {
            for n in 1..=8 {
                for arch in [
                    Some(Arch::SM90),
                    None,
                    Some(Arch {
                        major: 10,
                        minor: 0,
                    }),
                ] {
                    let rows: Vec<_> = ROWS
                        .iter()
                        .filter(|r| r.coll == coll && r.pes.contains(&n))
                        .filter(|r| r.arch.is_none() || r.arch == arch)
                        .collect();
                    let measured = rows.iter().filter(|r| r.arch.is_some()).count();
                    let conservative = rows.len() - measured;
                    assert_eq!(conservative, 1, "{coll} n={n} {arch:?}");
                    assert!(measured <= 1, "{coll} n={n} {arch:?}");
                    // The measured row, where there is one, is the one found.
                    let found = lookup(coll, n, arch).unwrap();
                    assert_eq!(found.arch.is_some(), measured == 1, "{coll} n={n} {arch:?}");
                }
            }
            assert!(lookup(coll, 9, Some(Arch::SM90)).is_none());
        }
        for coll in [Collective::Barrier, Collective::Sync] {
            assert!(lookup(coll, 2, Some(Arch::SM90)).is_none());
        }
    }

    #[test]
    fn measured_rows_name_their_runs_and_assumed_rows_say_why() {
        for r in ROWS {
            match &r.basis {
                Basis::Measured { runs, figures } => {
                    assert_eq!(r.arch, Some(Arch::SM90), "{:?}", r.coll);
                    assert_eq!(r.pes.start(), r.pes.end(), "{:?}", r.coll);
                    let n = r.pes.start();
                    assert!(!runs.is_empty() && !figures.is_empty());
                    for run in *runs {
                        assert!(
                            run.starts_with(&format!("mpirun -np {n} nvshmem-perf ")),
                            "{run}"
                        );
                        assert!(
                            ["2026-11-23", "2026-11-26", "2026-11-27", "2026-11-28"]
                                .iter()
                                .any(|day| run.contains(&format!("{n} x H200, {day}, commit "))),
                            "{run}"
                        );
                    }
                }
                Basis::Assumed(why) => {
                    assert_eq!(r.arch, None, "{:?}", r.coll);
                    assert!(!why.is_empty());
                }
            }
        }
    }

    #[test]
    fn the_conservative_rows_keep_ll_traffic_within_the_measured_and_never_copy() {
        for r in ROWS.iter().filter(|r| r.arch.is_none()) {
            let measured = lookup(r.coll, 2, Some(Arch::SM90)).unwrap();
            for n in r.pes.clone() {
                assert!(
                    (n - 1) * r.ll <= measured.ll,
                    "{:?} n={n}: (n - 1) x {} over the 2-PE limit {}",
                    r.coll,
                    r.ll,
                    measured.ll
                );
            }
            assert!(r.ce.is_empty(), "{:?}", r.coll);
        }
    }

    /// Teams of 3 and 5 to 8 PEs and unknown architectures: LL for small payloads, NVSHMEM's path
    /// above, the direct kernels only for alltoall, the rooted reduce, gather and scatter up to
    /// 16 MiB, and reductions NVSHMEM lacks; never the copy engines.
    #[test]
    fn unmeasured_teams_and_architectures_choose_conservatively() {
        let other = Some(Arch {
            major: 10,
            minor: 0,
        });
        for (n, arch) in [
            (3, Some(Arch::SM90)),
            (4, None),
            (5, Some(Arch::SM90)),
            (8, Some(Arch::SM90)),
            (2, None),
            (2, other),
            (8, other),
        ] {
            let f32_sum = |coll, x| decide(coll, n, arch, DataType::F32, ReduceOp::Sum, x);
            let small = if n <= 4 { 8 * KIB } else { 4 * KIB };
            assert_eq!(f32_sum(Collective::AllReduce, small).3, "nvlink_ll");
            assert_eq!(f32_sum(Collective::AllReduce, small + 4).3, "nvshmem");
            assert_eq!(f32_sum(Collective::AllReduce, 128 * MIB).3, "nvshmem");
            assert_eq!(f32_sum(Collective::Fcollect, small / 2).3, "nvlink_ll");
            assert_eq!(f32_sum(Collective::Fcollect, small).3, "nvshmem");
            assert_eq!(f32_sum(Collective::Broadcast, MIB).3, "nvshmem", "n={n}");
            assert_eq!(
                f32_sum(Collective::Broadcast, 256 * MIB).3,
                "nvshmem",
                "n={n}"
            );
            // Alltoall never runs NVSHMEM's (ALLTOALL_ASSUMED): LL, then the direct kernels.
            assert_eq!(f32_sum(Collective::Alltoall, small / 2).3, "nvlink_ll");
            for x in [small * 2, MIB, 256 * MIB] {
                assert_eq!(f32_sum(Collective::Alltoall, x).3, "nvlink_direct", "n={n}");
            }
            assert_eq!(f32_sum(Collective::Reduce, 256 * MIB).3, "nvlink_direct");
            for coll in [Collective::Gather, Collective::Scatter] {
                assert_eq!(f32_sum(coll, 16 * MIB).3, "nvlink_direct", "{coll} n={n}");
                assert_eq!(f32_sum(coll, 32 * MIB).3, "rooted_get", "{coll} n={n}");
            }
            // Reductions NVSHMEM cannot run itself keep the direct kernels, so that no call
            // needs scratch it did not need before.
            let lacks = |coll, dtype, op| decide(coll, n, arch, dtype, op, MIB).3;
            assert_eq!(
                lacks(Collective::AllReduce, DataType::F8E4M3, ReduceOp::Sum),
                "nvlink_direct"
            );
            assert_eq!(
                lacks(
                    Collective::ReduceScatter,
                    DataType::F32,
                    ReduceOp::PreMulSum(0.5)
                ),
                "nvlink_direct"
            );
            assert_eq!(
                lacks(Collective::AllReduce, DataType::I16, ReduceOp::Sum),
                "nvlink_direct"
            );
            assert_eq!(
                lacks(Collective::AllReduce, DataType::I32, ReduceOp::Sum),
                "nvshmem"
            );
            for coll in data_collectives() {
                for x in sizes() {
                    assert!(!decide(coll, n, arch, DataType::U8, ReduceOp::Max, x).2);
                }
            }
        }
    }

    /// Bitwise reductions, which NVSHMEM computes in its own kernels rather than NCCL's, take
    /// the direct kernels past LL on every row; the same call by `sum` keeps NVSHMEM's path
    /// where the row gives it one.
    #[test]
    fn bitwise_reductions_never_take_nvshmems_path_on_a_peer_mapped_team() {
        let sm90 = Some(Arch::SM90);
        for (n, arch) in [(2, sm90), (3, sm90), (4, sm90), (8, sm90), (3, None)] {
            for coll in [
                Collective::AllReduce,
                Collective::ReduceScatter,
                Collective::Reduce,
            ] {
                for op in [ReduceOp::And, ReduceOp::Or, ReduceOp::Xor] {
                    for dtype in [DataType::I32, DataType::U64, DataType::U8] {
                        for x in [64 * KIB, 128 * KIB, 64 * MIB] {
                            let chosen = decide(coll, n, arch, dtype, op, x).3;
                            assert!(
                                chosen == "nvlink_direct" || chosen == "nvlink_ll",
                                "{coll} {dtype} {op} {x} B on {n} PEs took {chosen}"
                            );
                        }
                    }
                }
            }
        }
        let sum = decide(
            Collective::AllReduce,
            3,
            sm90,
            DataType::I32,
            ReduceOp::Sum,
            MIB,
        )
        .3;
        assert_eq!(sum, "nvshmem");
        let xor = decide(
            Collective::AllReduce,
            3,
            sm90,
            DataType::I32,
            ReduceOp::Xor,
            MIB,
        )
        .3;
        assert_eq!(xor, "nvlink_direct");
    }

    /// Barrier and sync have no crossover: the flag barrier on every team it accepts but
    /// teams of one PE, which need no flags (`local`).
    #[test]
    fn barrier_and_sync_take_the_flag_barrier_whatever_the_architecture() {
        for coll in [Collective::Barrier, Collective::Sync] {
            for arch in [Some(Arch::SM90), None] {
                for n in [1, 2, 3, 8] {
                    assert_eq!(
                        decide(coll, n, arch, DataType::U8, ReduceOp::Sum, 0).3,
                        if n == 1 { "local" } else { "nvlink" }
                    );
                }
            }
            assert_eq!(registry(coll)[1].name(), "nvlink");
        }
    }

    #[test]
    fn architectures_print_as_nvrtc_names_them() {
        assert_eq!(Arch::SM90.to_string(), "sm_90");
        assert_eq!(
            Arch {
                major: 10,
                minor: 0
            }
            .to_string(),
            "sm_100"
        );
    }
}
