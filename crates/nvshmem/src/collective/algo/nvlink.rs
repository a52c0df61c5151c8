//! This crate's NVLink collectives (`kernels/PROTOCOL.md`), for teams whose members can all
//! load and store each other's symmetric memory: one kernel launch a call, no NVSHMEM call,
//! every wait ended by the runtime's abort word.
//!
//! - [`Ll`] (`nvlink_ll`): one-shot LL collectives (`ll.cu`) for payloads up to the channel's
//!   LL capacity: each PE stores its data, flagged with the epoch, straight into its peers'
//!   channel slots and reads its own; no barrier before or after.
//! - [`Direct`] (`nvlink_direct`): large messages (`direct.cu`): each PE loads and stores its
//!   peers' user buffers directly over NVLink in 16-byte vectors (two-shot reductions), framed
//!   by per-block arrive and depart flags; no staging, no extra symmetric memory.
//! - [`Flags`] (`nvlink`): barrier and sync as a flag exchange (`nvr_barrier`).
//!
//! The automatic choice takes LL up to [`ll_crossover`] bytes a PE and the direct kernels
//! where [`direct_preferred`] says, both read from the crossover table
//! ([`crossover`]).
use super::fingerprint::Fingerprint;
use super::{crossover, Algorithm, Call, Collective, Step};
use crate::kernels::{KernelKey, Launch, NvlinkArgs, NvlinkLaunch, NvlinkSource, TeamDescriptor};

/// One-shot LL collectives.
pub(super) struct Ll;

/// Large-message collectives over peers' buffers.
pub(super) struct Direct;

/// Payload bytes a PE (per sender and receiver) up to which the automatic choice takes LL for
/// `call`: its collective's row of the crossover table, for its team size and architecture.
pub(crate) fn ll_crossover(call: &Call) -> usize {
    crossover::ll_limit(call)
}

/// Whether the automatic choice takes the direct kernels for `call` (past LL's range): the
/// crossover table's band for its collective, team size and architecture, and 16-bit integer
/// and bitwise reductions always. Elsewhere NVSHMEM's collectives (NCCL's inside) or, for
/// gather and scatter, the copy engines or `rooted_get` run.
fn direct_preferred(call: &Call) -> bool {
    crossover::direct(call)
}

/// Barrier and sync by flags.
pub(super) struct Flags;

/// Why a call cannot use the NVLink kernels at all, or its team descriptor.
pub(super) fn team_view<'a>(call: &'a Call) -> Result<&'a TeamDescriptor, String> {
    call.descriptor.as_ref().ok_or_else(|| {
        if !call.peer_mapped() {
            "it needs every PE of the team reachable by load and store from this GPU (one \
             node, peer access)"
                .to_string()
        } else if call.n() > crate::channel::MAX_TEAM {
            format!(
                "it serves teams of at most {} PEs; this one has {}",
                crate::channel::MAX_TEAM,
                call.n()
            )
        } else {
            "the team got no channel when it was made: every channel of the runtime was taken \
             (RuntimeBuilder::channels)"
                .to_string()
        }
    })
}

/// The most blocks an LL launch on a team of `n` whose members keep `max_blocks` blocks
/// resident may have: `nvr_ll_blocks(n)` (64 for 2 PEs down to 8 for 8: the channel's LL
/// regions shared out among the senders), or fewer where fewer fit (`kernels/PROTOCOL.md`,
/// "Residency"). The same on every member, as `n` and `max_blocks` are.
pub(crate) fn ll_blocks(n: usize, max_blocks: u32) -> usize {
    (max_blocks as usize).clamp(1, crate::channel::ll_blocks(n))
}

/// The most payload bytes a pair an LL launch carries on a team of `n` whose members keep
/// `max_blocks` blocks resident, with LL regions of `ll_bytes`: half of each block's region is
/// payload (PROTOCOL.md, "LL packets"), over as many blocks as the team's size leaves each
/// sender and its members keep resident. 1 MiB on 2 PEs with the default regions (64 blocks:
/// [`crate::channel::ll_blocks`]), 256 KiB on 4, 128 KiB on 8.
pub(crate) fn ll_cap(n: usize, max_blocks: u32, ll_bytes: usize) -> usize {
    ll_blocks(n, max_blocks) * ll_bytes / 2
}

/// Payload bytes a pair per block of an LL launch, up to [`ll_blocks`]: 2 KiB, so that the
/// packets move over many SMs at once (2 x H200, 2026-11-27: forced LL fcollect took 4.21 us at
/// 32 KiB a pair with one block per 4 KiB and 3.73 at 64 KiB with one per 2 KiB).
const LL_BYTES_PER_BLOCK: usize = 2 << 10;

/// [`LL_BYTES_PER_BLOCK`] on teams of 1 and 2 PEs: 1 KiB. With 64 blocks a sender on 2 PEs
/// (2026-11-28), twice the blocks at 2-32 KiB a pair took 0.05-0.2 us off the rooted copies and
/// reduce there and nothing elsewhere (2 x H200, against 2 KiB in one call, 100 calls a graph:
/// gather of 4 KiB 2.05 -> 1.83 us, scatter 2.02 -> 1.84, reduce of 8 KiB 2.24 -> 2.08;
/// docs/performance.md, "Sixty-four blocks on two PEs"). Larger teams keep 2 KiB, the size
/// their measured rows were swept with.
const LL_BYTES_PER_BLOCK_PAIR: usize = 1 << 10;

/// Lanes an LL packet has for `m` team PEs (`nvr_ll_group`): `m` rounded up to 1, 2, 4 or 8.
fn ll_lanes(m: usize) -> usize {
    match m {
        0 | 1 => 1,
        2 => 2,
        3 | 4 => 4,
        _ => 8,
    }
}

/// Blocks past this many bytes take the peer-lane kernels. Below, the plain ones were as fast
/// or faster (2 PEs, a 1 KiB call, 512 B blocks: fcollect 2.44 against the peer layout's 2.56
/// µs, alltoall 2.47 against 2.79, timed in a build that held both layouts in one kernel);
/// from 4 KiB calls (2 KiB blocks) the peer lanes were faster: 2.70 against 3.19 and 2.90
/// against 3.21 (3 PEs: 3.61 against 4.52, 4.21 against 4.66; 2 x and 3 x H200, 2026-11-27,
/// `docs/perf/peerlanes-2026-11-27`).
const PEER_LANES_PAST: usize = 1 << 10;

/// Whether an LL fcollect or alltoall takes its peer-lane kernel (`nvr_ll_<coll>_peers`: a lane
/// for each peer, none for this PE's own copy): where the peers round up to fewer lanes than
/// the members (2, 3 and 5 PEs), so each thread carries fewer packets, for blocks past
/// [`PEER_LANES_PAST`]. (On 4 PEs the lanes would be as many, and the peer kernel was slower.)
pub(crate) fn ll_peer_lanes(coll: Collective, x: usize, n: usize) -> bool {
    matches!(coll, Collective::Fcollect | Collective::Alltoall)
        && ll_lanes(n.saturating_sub(1)) < ll_lanes(n)
        && x > PEER_LANES_PAST
}

/// Broadcasts past this many bytes on teams of 4 or more take the relayed kernel
/// (`nvr_ll_broadcast_relay`: [`ll_relay`]). 4 x H200, LL forced, graph, µs at 32 / 64 / 128 /
/// 256 KiB: relayed 3.36 / 3.50 / 3.90 / 5.25, one-shot 2.57-2.62 / 2.96-3.01 / 3.57-3.64 /
/// 6.26-6.31 (2026-11-28, commit d51ef77 against 96b11de, one call; the relay at ee96790: 256
/// KiB 4.95, docs/perf/relay-2026-11-28). On 3 PEs the one-shot was faster as far as it
/// carries (256 KiB: 4.49 against 4.97): its root sends two copies, not three.
const RELAY_PAST: usize = 128 << 10;

/// Whether an LL broadcast of `bytes` on a team of `n` whose one-shot LL carries `cap` bytes a
/// pair ([`ll_cap`]) runs the relayed kernel (`nvr_ll_broadcast_relay`): the root sends each
/// non-root a chunk of the buffer (an `n - 1`-th, [`ll_relay_chunk`]) and the non-roots
/// forward theirs to one another, so the root's link carries the buffer once rather than `n -
/// 1` times, for a second crossing. On teams of 4 or more past [`RELAY_PAST`], and on 3 past
/// what the one-shot carries; never on 2 (one non-root: nothing to relay).
pub(crate) fn ll_relay(coll: Collective, bytes: usize, n: usize, cap: usize) -> bool {
    coll == Collective::Broadcast && n >= 3 && (bytes > cap || (n >= 4 && bytes > RELAY_PAST))
}

/// Bytes of each chunk of a relayed broadcast of `bytes` on `n` PEs, the payload a pair
/// carries (`ll.cu`'s `nvr_ll_relay_chunk`, which computes the same): an `n - 1`-th, rounded
/// up to whole 8-byte packets; the whole buffer on 1 and 2 PEs.
pub(crate) fn ll_relay_chunk(bytes: usize, n: usize) -> usize {
    if n <= 2 {
        return bytes;
    }
    bytes.div_ceil(n - 1).next_multiple_of(8)
}

/// How LL carries `call` over `team`'s channel: (what the one-shot carries a pair,
/// [`ll_cap`]; the payload bytes a pair, its block or a relayed broadcast's chunk; whether it
/// is relayed, [`ll_relay`]).
fn ll_carry(call: &Call, team: &TeamDescriptor) -> (usize, usize, bool) {
    let (bytes, n) = (call.block_bytes(), call.n());
    let cap = ll_cap(n, call.team.max_blocks, team.ll_bytes as usize);
    if ll_relay(call.coll, bytes, n, cap) {
        (cap, ll_relay_chunk(bytes, n), true)
    } else {
        (cap, bytes, false)
    }
}

/// The LL launch rule of `ll.cu` for `x` payload bytes per (sender, receiver) pair and a team
/// of `n` whose members keep `max_blocks` blocks resident: (grid, block). `peer_lanes`: the
/// peer-lane kernels' (lanes for `n - 1` PEs, not `n`: [`ll_peer_lanes`]).
pub(crate) fn ll_shape(x: usize, n: usize, max_blocks: u32, peer_lanes: bool) -> (u32, u32) {
    let per_block = if n <= 2 {
        LL_BYTES_PER_BLOCK_PAIR
    } else {
        LL_BYTES_PER_BLOCK
    };
    let grid = x.div_ceil(per_block).clamp(1, ll_blocks(n, max_blocks));
    let packets_per_block = x.div_ceil(8).div_ceil(grid);
    let lanes = ll_lanes(if peer_lanes { n.saturating_sub(1) } else { n });
    let block = ((packets_per_block * lanes).next_multiple_of(32) + 32).min(512);
    (grid as u32, block as u32)
}

/// The relayed broadcast's launch rule (`nvr_ll_broadcast_relay`) for a chunk of `x` bytes on
/// a team of `n`: LL's grid, and a block of one segment of whole warps for each team PE
/// (`nvr_ll_warp_lanes`), each as many threads as a block's packets, rounded up to a warp, at
/// most 512 in all.
pub(crate) fn ll_relay_shape(x: usize, n: usize, max_blocks: u32) -> (u32, u32) {
    let (grid, _) = ll_shape(x, n, max_blocks, false);
    let packets_per_block = x.div_ceil(8).div_ceil(grid as usize);
    let n = n.max(1);
    let segment = packets_per_block
        .next_multiple_of(32)
        .clamp(32, (512 / n) / 32 * 32);
    (grid, (segment * n) as u32)
}

/// Payload bytes a pair that the automatic choice weighs LL for (besides the crossover table's
/// LL band, which measured rows widen past it), on a team whose members keep `max_blocks`
/// blocks resident: what LL carried before issue 31 widened it (8 blocks of 8 KiB), so that
/// where no row measured more (conservative rows, teams whose other algorithms refuse) LL is
/// not taken as a fallback for payloads it was never measured at (`testdata/copy_choices.txt`).
/// Past it, outside a measured band, LL runs only when forced.
fn ll_weighed_up_to(max_blocks: u32) -> usize {
    (max_blocks as usize).clamp(1, 8) * (8 << 10)
}

impl Algorithm for Ll {
    fn name(&self) -> &'static str {
        "nvlink_ll"
    }

    fn refuses(&self, call: &Call) -> Option<String> {
        let team = match kernel_view(call) {
            Ok(t) => t,
            Err(why) => return Some(why),
        };
        let (cap, pair, relay) = ll_carry(call, team);
        if pair > cap {
            let relayed = if relay {
                format!(" (relayed through the non-roots: {pair} a pair)")
            } else {
                String::new()
            };
            return Some(format!(
                "it carries at most {cap} bytes a PE, the call {}{relayed}",
                call.block_bytes()
            ));
        }
        None
    }

    fn weighed(&self, call: &Call) -> bool {
        call.block_bytes() <= ll_weighed_up_to(call.team.max_blocks).max(ll_crossover(call))
    }

    fn prefers(&self, call: &Call) -> bool {
        // A call in the Lamport band goes to the Lamport kernel, where it accepts the call,
        // even within LL's limit: a float reduction (faster from 2 KiB blocks, crossover.rs,
        // SWEEP_RUN; every other type keeps LL) or a copy (LAMPORT_COPY_RUN). The registry
        // keeps LL first, so that where nothing prefers a call the fallback order is as before.
        let lamport = super::lamport::Lamport;
        call.block_bytes() <= ll_crossover(call)
            && !(lamport.prefers(call) && lamport.refuses(call).is_none())
    }

    fn plan(&self, call: &Call, steps: &mut Vec<Step>) {
        let peer_lanes = ll_peer_lanes(call.coll, call.block_bytes(), call.n());
        let team = team_view(call).expect("accepted: the team has a channel");
        let (_, x, relay) = ll_carry(call, team);
        let (grid, block) = if relay {
            ll_relay_shape(x, call.n(), call.team.max_blocks)
        } else {
            ll_shape(x, call.n(), call.team.max_blocks, peer_lanes)
        };
        let kernel = match (call.coll, peer_lanes) {
            (Collective::Fcollect, true) => "fcollect_peers",
            (Collective::Alltoall, true) => "alltoall_peers",
            (Collective::Broadcast, _) if relay => "broadcast_relay",
            (coll, _) => coll.name(),
        };
        steps.push(launch(call, NvlinkSource::Ll, kernel, grid, block));
    }
}

/// The most blocks of a direct launch (`direct.cu`'s launch rule).
const DIRECT_MAX_GRID: u32 = 128;
// Every block of a launch publishes and checks the call's fingerprint only below
// `NVR_FP_BLOCKS`: a direct grid past it would leave blocks unchecked.
const _: () = assert!(DIRECT_MAX_GRID as usize <= crate::channel::FP_BLOCKS);

/// The direct launch rule of `direct.cu`: 512 threads a block, and one block per 16 KiB that
/// this PE moves over its links, at most [`DIRECT_MAX_GRID`] and at most the team's
/// `max_blocks` (every member's blocks resident at once: `kernels/PROTOCOL.md`, "Residency").
/// The same on every member.
pub(crate) fn direct_grid(call: &Call) -> u32 {
    let (n, bytes) = (call.n().max(1), call.block_bytes());
    // (A rooted reduce the split or the pull runs needs no case of its own: from
    // REDUCE_SPLIT_FROM and REDUCE_PULL_FROM even 1/n of it takes the most blocks.)
    let moved = match call.coll {
        Collective::AllReduce | Collective::Reduce => bytes / n,
        Collective::ReduceScatter | Collective::Broadcast => bytes,
        _ => bytes * (n - 1).max(1),
    };
    let most = call.team.max_blocks.clamp(1, DIRECT_MAX_GRID) as usize;
    moved.div_ceil(16 << 10).clamp(1, most) as u32
}

impl Algorithm for Direct {
    fn name(&self) -> &'static str {
        "nvlink_direct"
    }

    fn prefers(&self, call: &Call) -> bool {
        // Past LL's range, a call that NVSHMEM could only take through the scratch (in place,
        // premul_sum, a widened avg) runs here: in place, in the wide type, with no scratch.
        direct_preferred(call) || super::nvshmem::stages(call)
    }

    fn refuses(&self, call: &Call) -> Option<String> {
        kernel_view(call).err()
    }

    fn plan(&self, call: &Call, steps: &mut Vec<Step>) {
        let grid = direct_grid(call);
        let kernel = reduce_way(call).unwrap_or(call.coll.name());
        steps.push(launch(call, NvlinkSource::Direct, kernel, grid, 512));
    }
}

/// Bytes from which a rooted reduce of 3 PEs or more runs the non-roots' split
/// (`nvr_direct_reduce_split`) rather than the two-shot. The split brings S into the root
/// where the two-shot brings 2 (n - 1)/n S (4 x H200, direct forced, µs at 16 / 32 MiB: 4 PEs
/// split 75.3 / 130.3 against two-shot 79.3 / 150.8; 3 PEs 66.9 / 117.7 against 72.8 / 140.6).
/// Below 16 MiB it is untried: its share would need a grid of its own (`direct_grid`).
const REDUCE_SPLIT_FROM: usize = 16 << 20;
const _: () = assert!(
    REDUCE_SPLIT_FROM / crate::channel::MAX_TEAM >= (DIRECT_MAX_GRID as usize) << 14,
    "direct_grid counts a split reduce's share as the two-shot's"
);

/// Bytes from which a pair's rooted reduce runs the root's pull (`nvr_direct_reduce_pull`:
/// the root loads the peer's whole input, nothing is stored over the link) rather than the
/// two-shot. 2 x H200, graph, µs at 4 / 16 / 128 / 256 MiB: pull 18.52 / 51.62 / 367.40 /
/// 726.22, two-shot 17.49 / 53.52 / 386.51 / 765.55, NCCL 22.50 / 57.68 / 376.69 / 737.90; 8
/// MiB level (29.54 against 29.46). The non-root reducing everything into the root (the
/// split on a pair) was the slowest: 65.44 at 16 MiB, 419.50 at 128.
const REDUCE_PULL_FROM: usize = 16 << 20;
const _: () = assert!(
    REDUCE_PULL_FROM / 2 >= (DIRECT_MAX_GRID as usize) << 14,
    "direct_grid counts a pulled reduce's work as the two-shot's"
);

/// The rooted reduce's kernel other than the two-shot that the direct kernels run `call`
/// with, if any: the root's pull on a pair, the non-roots' split on larger teams, each for
/// large calls.
fn reduce_way(call: &Call) -> Option<&'static str> {
    if call.coll != Collective::Reduce {
        return None;
    }
    let bytes = call.block_bytes();
    match call.n() {
        2 if bytes >= REDUCE_PULL_FROM => Some("reduce_pull"),
        n if n > 2 && bytes >= REDUCE_SPLIT_FROM => Some("reduce_split"),
        _ => None,
    }
}

/// What both kernel files refuse: a team without a channel, barrier and sync (the `nvlink`
/// algorithm's). The team's channel view otherwise. (They have code for every reduction the
/// argument checks let through: the operator table, `op.rs`, is both.)
fn kernel_view<'a>(call: &'a Call) -> Result<&'a TeamDescriptor, String> {
    let team = team_view(call)?;
    if matches!(call.coll, Collective::Barrier | Collective::Sync) {
        return Err(format!(
            "it has no {}; the nvlink algorithm does",
            call.coll
        ));
    }
    Ok(team)
}

/// The one launch of an accepted call: `file`'s kernel `nvr_<file>_<kernel>` (`kernel`: the
/// collective's name, named alike in both files, or a variant's such as `fcollect_peers`),
/// with the arguments of `kernels/PROTOCOL.md`.
fn launch(call: &Call, file: NvlinkSource, kernel: &str, grid: u32, block: u32) -> Step {
    let team = fingerprinted(call);
    let root = Some(call.root as i32);
    let move_ = |root| moving(root, call.src.ptr, call.dst.ptr, call.block_bytes());
    let args = match call.coll {
        Collective::AllReduce | Collective::ReduceScatter => reduce(call, None),
        Collective::Reduce => reduce(call, root),
        Collective::Broadcast | Collective::Gather | Collective::Scatter => move_(root),
        Collective::Fcollect | Collective::Alltoall => move_(None),
        Collective::Barrier | Collective::Sync => unreachable!("refused"),
    };
    kernel_step(call, file, kernel, team, grid, block, args)
}

/// The launch of `file`'s kernel `kernel` (the collective's name, or a variant's) for `call`
/// over `team` (the call's fingerprinted descriptor) with `args`: the one place an NVLink
/// kernel's step is built.
pub(super) fn kernel_step(
    call: &Call,
    file: NvlinkSource,
    kernel: &str,
    team: TeamDescriptor,
    grid: u32,
    block: u32,
    args: NvlinkArgs,
) -> Step {
    let reduction = call.is_reduction().then_some((call.dtype, call.op));
    Step::Kernel(Launch::Nvlink(NvlinkLaunch {
        key: KernelKey::Nvlink(file, reduction),
        function: file
            .function(kernel, reduction.is_some())
            .expect("each file has a kernel for every collective it accepts"),
        grid,
        block,
        team,
        args,
    }))
}

/// The scale a reduction's kernel applies to its inputs: `premul_sum`'s, else 1.
pub(super) fn premul_scale(call: &Call) -> f64 {
    match call.op {
        crate::ReduceOp::PreMulSum(s) => s,
        _ => 1.0,
    }
}

/// The team descriptor of an accepted call's launches, carrying the call's fingerprint
/// (`kernels/PROTOCOL.md`, "Fingerprints") when the team checks calls.
pub(super) fn fingerprinted(call: &Call) -> TeamDescriptor {
    let mut team = *call
        .descriptor
        .as_ref()
        .expect("accepted: the team has a channel");
    if team.check != 0 {
        let tag = Fingerprint(team.fp).tag();
        team.fp = Fingerprint::of(call, tag).0;
    }
    team
}

/// A reduction's arguments.
fn reduce(call: &Call, root: Option<i32>) -> NvlinkArgs {
    NvlinkArgs::Reduce {
        root,
        src: call.src.ptr,
        dst: call.dst.ptr,
        count: call.count as u64,
        scale: premul_scale(call),
    }
}

/// A data movement's arguments.
fn moving(root: Option<i32>, src: u64, dst: u64, bytes: usize) -> NvlinkArgs {
    NvlinkArgs::Move {
        root,
        src,
        dst,
        bytes: bytes as u64,
    }
}

impl Algorithm for Flags {
    fn name(&self) -> &'static str {
        "nvlink"
    }

    fn refuses(&self, call: &Call) -> Option<String> {
        if !matches!(call.coll, Collective::Barrier | Collective::Sync) {
            return Some(format!("it runs barrier and sync, not {}", call.coll));
        }
        team_view(call).err()
    }

    fn plan(&self, call: &Call, steps: &mut Vec<Step>) {
        // A barrier also completes this PE's earlier RMA at its targets (NVSHMEM's meaning):
        // the kernel fences system-wide before it arrives, which completes what this PE
        // stored through peer mappings and what its stream copied. Puts to PEs it does not
        // reach so (another node: NVSHMEM's proxy or NIC moves them) may still be in flight
        // after the stream passes them: NVSHMEM's quiet completes those first. (Not collective:
        // each PE decides by what it reaches, and the kernel is the same on every member.)
        if call.coll == Collective::Barrier && !call.team.job_peer_mapped {
            steps.push(Step::Quiet);
        }
        steps.push(Step::Kernel(flag_barrier(
            call,
            call.coll == Collective::Barrier,
        )));
    }
}

/// The launch of `nvr_barrier` on `call`'s channel: with `fence`, a barrier (this PE's
/// earlier writes visible system-wide before any peer passes), else a sync.
pub(super) fn flag_barrier(call: &Call, fence: bool) -> Launch {
    Launch::Nvlink(NvlinkLaunch {
        key: KernelKey::Nvlink(NvlinkSource::Ll, None),
        function: "nvr_barrier",
        grid: 1,
        block: 64,
        team: fingerprinted(call),
        args: NvlinkArgs::Barrier {
            fence: fence as i32,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::{direct_grid, ll_cap, ll_shape};
    use crate::collective::algo::tests::{f32_sum, team, team_fitting, with_channel};
    use crate::collective::Collective;

    #[test]
    fn the_direct_launch_rule_of_direct_cu() {
        let grid = |n: usize, coll: Collective, count: usize| {
            direct_grid(&f32_sum(&team(n, 0, true), coll, count))
        };
        // A block per 16 KiB this PE moves: an all-reduce's share is 1/n of the input...
        assert_eq!(grid(2, Collective::AllReduce, 64 << 10), 8);
        assert_eq!(grid(4, Collective::AllReduce, 64 << 10), 4);
        // ...and so is a rooted reduce's (a two-shot to the root; the split's sizes take the
        // most blocks either way); a reduce-scatter moves a block.
        assert_eq!(grid(4, Collective::Reduce, 64 << 10), 4);
        assert_eq!(grid(4, Collective::Reduce, 1 << 20), 64);
        assert_eq!(grid(4, Collective::Reduce, 16 << 20), 128);
        assert_eq!(grid(4, Collective::Reduce, 8 << 20), 128);
        assert_eq!(grid(2, Collective::Reduce, 64 << 10), 8);
        assert_eq!(grid(2, Collective::Reduce, 1), 1);
        assert_eq!(grid(2, Collective::ReduceScatter, 64 << 10), 16);
        // At most 128 blocks, and at most what every member keeps resident.
        assert_eq!(grid(2, Collective::Reduce, 64 << 20), 128);
        let few = team_fitting(2, 1, true, 5);
        assert_eq!(direct_grid(&f32_sum(&few, Collective::Reduce, 1 << 20)), 5);
    }

    #[test]
    fn a_large_rooted_reduce_runs_the_pull_on_pairs_and_the_split_on_more() {
        use super::{Algorithm, Direct, Launch, Step, REDUCE_PULL_FROM, REDUCE_SPLIT_FROM};
        let kernel = |n: usize, count: usize| {
            let mut steps = Vec::new();
            let t = team(n, 0, true);
            Direct.plan(
                &with_channel(f32_sum(&t, Collective::Reduce, count)),
                &mut steps,
            );
            match steps.as_slice() {
                [Step::Kernel(Launch::Nvlink(l))] => l.function,
                other => panic!("{other:?}"),
            }
        };
        let split_from = REDUCE_SPLIT_FROM / 4; // f32 elements
        for n in 3..=8 {
            assert_eq!(kernel(n, split_from - 1), "nvr_direct_reduce", "{n}");
            assert_eq!(kernel(n, split_from), "nvr_direct_reduce_split", "{n}");
        }
        let pull_from = REDUCE_PULL_FROM / 4;
        assert_eq!(kernel(2, pull_from - 1), "nvr_direct_reduce");
        assert_eq!(kernel(2, pull_from), "nvr_direct_reduce_pull");
        assert_eq!(kernel(2, pull_from << 2), "nvr_direct_reduce_pull");
    }

    /// The relayed broadcast's chunks cover the buffer, each whole packets but the last, one a
    /// non-root; its block holds a segment of whole warps for every team PE.
    #[test]
    fn a_relayed_broadcast_cuts_the_buffer_into_one_chunk_a_non_root() {
        use super::{ll_relay, ll_relay_chunk, ll_relay_shape};
        for n in 1..=8usize {
            for bytes in [
                1usize,
                7,
                8,
                1000,
                16 << 10,
                (100 << 10) + 12,
                768 << 10,
                1 << 20,
            ] {
                let c = ll_relay_chunk(bytes, n);
                let chunks = n.saturating_sub(1).max(1);
                assert!(c * chunks >= bytes, "{n} {bytes}");
                if n > 2 {
                    assert_eq!(c % 8, 0, "{n} {bytes}");
                    // No chunk is wasted whole: the last starts inside the buffer...
                    assert!(
                        c * (chunks - 1) < bytes || bytes < chunks * 8,
                        "{n} {bytes}"
                    );
                } else {
                    assert_eq!(c, bytes);
                }
                let (grid, block) = ll_relay_shape(c, n, 32);
                assert!(block % 32 == 0 && block <= 512, "{n} {bytes}: {block}");
                assert!(block as usize >= 32 * n, "{n} {bytes}: {block}");
                assert_eq!(block as usize % n, 0, "{n} {bytes}: {block}");
                assert_eq!(grid, ll_shape(c, n, 32, false).0);
            }
        }
        let (k128, cap3, cap4) = (128 << 10, 336 << 10, 256 << 10);
        assert!(!ll_relay(Collective::Broadcast, 1 << 20, 2, 1 << 20));
        assert!(!ll_relay(Collective::Scatter, 1 << 20, 4, cap4));
        assert!(!ll_relay(Collective::Broadcast, k128, 4, cap4));
        assert!(ll_relay(Collective::Broadcast, k128 + 1, 4, cap4));
        assert!(ll_relay(Collective::Broadcast, k128 + 1, 8, 128 << 10));
        // 3 PEs: the one-shot as far as it carries.
        assert!(!ll_relay(Collective::Broadcast, cap3, 3, cap3));
        assert!(ll_relay(Collective::Broadcast, cap3 + 1, 3, cap3));
        // 4 PEs, 512 KiB: chunks of a third, 16 blocks, 4 segments of 4 warps.
        assert_eq!(ll_relay_chunk(512 << 10, 4), 174_768);
        assert_eq!(ll_relay_shape(174_768, 4, 32), (16, 512));
    }

    #[test]
    fn fcollect_and_alltoall_take_the_peer_lanes_where_they_are_fewer() {
        use super::ll_peer_lanes;
        for coll in [Collective::Fcollect, Collective::Alltoall] {
            for n in 1..=8 {
                // 2, 3 and 5 PEs: n - 1 rounds up to fewer lanes than n.
                let fewer = matches!(n, 2 | 3 | 5);
                assert!(!ll_peer_lanes(coll, 1 << 10, n), "{coll} {n}");
                assert_eq!(ll_peer_lanes(coll, (1 << 10) + 1, n), fewer, "{coll} {n}");
                assert_eq!(ll_peer_lanes(coll, 512 << 10, n), fewer, "{coll} {n}");
            }
        }
        for coll in [
            Collective::Broadcast,
            Collective::Gather,
            Collective::AllReduce,
        ] {
            assert!(!ll_peer_lanes(coll, 64 << 10, 2), "{coll}");
        }
    }

    #[test]
    fn the_ll_launch_rule_of_ll_cu() {
        // 8 bytes, 2 PEs: one packet, two lanes: one warp plus the flag warp.
        assert_eq!(ll_shape(8, 2, 128, false), (1, 64));
        assert_eq!(ll_shape(2048, 2, 128, false), (2, 288));
        assert_eq!(ll_shape(4096, 2, 128, false), (4, 288));
        assert_eq!(ll_shape(4096, 4, 128, false), (2, 512));
        assert_eq!(ll_shape(4097, 8, 128, false), (3, 512));
        assert_eq!(ll_shape(32 << 10, 2, 128, false), (32, 288));
        assert_eq!(ll_shape(0, 1, 128, false), (1, 32));
        // One block per 1 KiB on 1 and 2 PEs, per 2 KiB on more, up to the blocks a sender
        // has: 64 for 2 PEs (issue 31; 8 for every team before, 32 until 2026-11-28), 16 for
        // 4, 8 for 8.
        assert_eq!(ll_shape((32 << 10) + 8, 2, 128, false), (33, 288));
        assert_eq!(ll_shape(64 << 10, 2, 128, false), (64, 288));
        assert_eq!(ll_shape(128 << 10, 2, 128, false), (64, 512));
        assert_eq!(ll_shape(512 << 10, 2, 128, false), (64, 512));
        assert_eq!(ll_shape(1 << 20, 2, 128, false), (64, 512));
        assert_eq!(ll_shape(64 << 10, 4, 128, false), (16, 512));
        assert_eq!(ll_shape(64 << 10, 3, 128, false), (21, 512));
        assert_eq!(ll_shape(64 << 10, 8, 128, false), (8, 512));
        // Where members keep fewer blocks resident, fewer blocks carry more packets each.
        assert_eq!(ll_shape(64 << 10, 2, 4, false), (4, 512));
        assert_eq!(ll_shape(64 << 10, 2, 0, false), (1, 512));
        // fcollect and alltoall: a lane a peer. 2 PEs: one packet, one lane.
        assert_eq!(ll_shape(8, 2, 128, true), (1, 64));
        assert_eq!(ll_shape(1024, 2, 128, false), (1, 288));
        assert_eq!(ll_shape(1024, 2, 128, true), (1, 160));
        assert_eq!(ll_shape(1024, 5, 128, true), (1, 512));
        assert_eq!(ll_shape(1024, 4, 128, true), (1, 512));
    }

    /// Every payload LL accepts fits its regions under the launch rule: `ppb * 16 <=
    /// ll_bytes` at the largest payload of every team size and resident-block figure, and no
    /// grid past the sender's blocks (what `nvr_ll_check` refuses).
    #[test]
    fn every_accepted_payload_fits_its_blocks_regions() {
        let ll_bytes = crate::channel::DEFAULT_LL_BYTES;
        for n in 1..=crate::channel::MAX_TEAM {
            let region = ll_bytes;
            for max_blocks in [0, 1, 2, 3, 5, 8, 16, 21, 33, 128] {
                let cap = ll_cap(n, max_blocks, ll_bytes);
                let mut xs: Vec<usize> = (0..=20).map(|p| 1usize << p).collect();
                xs.extend([cap - 1, cap, (32 << 10) + 1, 3 << 14]);
                for (x, peer_lanes) in xs
                    .into_iter()
                    .filter(|&x| x <= cap)
                    .zip([false, true].iter().cycle())
                {
                    let (grid, block) = ll_shape(x, n, max_blocks, *peer_lanes);
                    let ppb = x.div_ceil(8).div_ceil(grid as usize);
                    assert!(ppb * 16 <= region, "n {n} mb {max_blocks} x {x}");
                    assert!(x <= grid as usize * (region / 2), "n {n} x {x}");
                    assert!(grid as usize <= crate::channel::ll_blocks(n), "n {n} x {x}");
                    assert!(
                        grid as usize <= (max_blocks as usize).max(1),
                        "mb {max_blocks}"
                    );
                    assert!(block % 32 == 0 && block <= 512);
                }
            }
        }
        // 2 PEs carry 1 MiB a pair with the default regions (issue 31; 512 KiB before they
        // took all 64 blocks), 4 PEs 256 KiB, 8 PEs 128 KiB.
        assert_eq!(ll_cap(2, 128, ll_bytes), 1 << 20);
        assert_eq!(ll_cap(4, 128, ll_bytes), 256 << 10);
        assert_eq!(ll_cap(8, 128, ll_bytes), 128 << 10);
    }
}
