//! Data movement by copy engine (`nvlink_ce`): broadcast, fcollect, alltoall, gather and
//! scatter on a peer-mapped team, for large messages.
//!
//! Each PE copies what it owes its peers straight into their buffers with
//! `cuMemcpyDtoDAsync` over the peer mappings, so the link is driven by the copy engines and
//! no SM is busy; its own part (the local copy) goes on the channel's side stream at the same
//! time, forked from the call's stream and joined back. Two flag barriers (`nvr_barrier` with
//! its system-scope fence, on the team's channel) frame the copies: the first makes every
//! member's input written and output free before anyone copies, the second makes every copy
//! into this PE's buffers complete before the call is. The closing barrier is queued even
//! when a copy fails to queue, so no PE waits in it for another.
//!
//! A copy engine moves about 390 GB/s one way over an H200's NVLink, where SM stores reach
//! about 365 (`../shared/anchors.md`), but each call pays two barriers and a copy launch, so
//! it wins only for large messages: [`ce_preferred`] holds the crossovers measured.
use super::{
    nvlink::{flag_barrier, team_view},
    Algorithm, Call, Collective, Step,
};

/// Data movement by copy engine.
pub(super) struct Ce;

/// Whether the automatic choice takes the copy engines for `call`: two-PE teams past the
/// sizes where they beat the direct kernels, NVSHMEM and NCCL, measured on 2 x H200 with
/// nvshmem-perf in stream mode, f32, one run (`scripts/gpu-check.sh run cepoints`,
/// `results/perf-2xH200-nvlink/ce-2026-11-23/`); sizes below are nvshmem-perf's (the whole
/// buffer), `x` is one PE's block:
/// - broadcast past 16 MiB: 32 MiB 101.7 µs against the direct kernel's 110.7 and NCCL's
///   111.9; 128 MiB 355 against NVSHMEM's 386 and NCCL's 389 (378 GB/s); at 16 MiB the
///   direct kernel is faster (53.9 against 58.3);
/// - gather and scatter past 16 MiB blocks: 64 MiB 100.8 and 102.5 µs against NCCL's 104.5
///   and 108.3; at 32 MiB the direct kernel is faster (53.9 and 55.0 against 59.2 and 58.6);
/// - fcollect and alltoall past 64 MiB blocks: 256 MiB 364 and 365 µs against the direct
///   kernel's 378 and 379; at 128 MiB they are level (192 against 194; 197 against 191 in
///   graph mode), below it the direct kernel is faster.
///
/// With more members a PE's copies to each peer share its link, where the direct kernels
/// forward; not measured, so not chosen.
fn ce_preferred(call: &Call) -> bool {
    if call.n() != 2 {
        return false;
    }
    let x = call.block_bytes();
    match call.coll {
        Collective::Broadcast | Collective::Gather | Collective::Scatter => x > 16 << 20,
        Collective::Fcollect | Collective::Alltoall => x > 64 << 20,
        _ => false,
    }
}

/// The flag barrier that frames the copies (`nvr_barrier` with its fence), queued even after
/// a failed step when `closing`.
fn barrier(call: &Call, closing: bool) -> Step {
    let launch = flag_barrier(call, true);
    if closing {
        Step::ClosingKernel(launch)
    } else {
        Step::Kernel(launch)
    }
}

impl Algorithm for Ce {
    fn name(&self) -> &'static str {
        "nvlink_ce"
    }

    fn prefers(&self, call: &Call) -> bool {
        ce_preferred(call)
    }

    fn refuses(&self, call: &Call) -> Option<String> {
        if !matches!(
            call.coll,
            Collective::Broadcast
                | Collective::Fcollect
                | Collective::Alltoall
                | Collective::Gather
                | Collective::Scatter
        ) {
            return Some(format!("it moves data; {} is not data movement", call.coll));
        }
        if call.coll == Collective::Alltoall && call.in_place {
            // Peers' copies into my blocks would race with my copies out of them.
            return Some(
                "alltoall in place would overwrite blocks before they are sent; nvlink_direct \
                 runs it"
                    .into(),
            );
        }
        team_view(call).err()
    }

    fn plan(&self, call: &Call, steps: &mut Vec<Step>) {
        let (n, me, root, b) = (call.n(), call.me, call.root, call.block_bytes());
        let (src, dst) = (call.src.ptr, call.dst.ptr);
        let on = |addr: u64, j: usize| call.peer(addr, j).expect("accepted: peer-mapped");
        let at = |addr: u64, k: usize| addr + (k * b) as u64;
        // (peer copies, the local copy): each (dst, src, bytes).
        let mut remote = Vec::new();
        let mut local = None;
        // A member's own block of fcollect, gather and scatter (in place: inside the whole
        // buffer), the same symmetric address on every member.
        let own = |j: usize| call.member_block(j);
        match call.coll {
            Collective::Broadcast if me == root => {
                remote.extend((0..n).filter(|&j| j != me).map(|j| (on(dst, j), src, b)));
                local = Some((dst, src, b));
            }
            Collective::Fcollect => {
                let mine = at(dst, me);
                remote.extend(
                    (0..n)
                        .filter(|&j| j != me)
                        .map(|j| (on(mine, j), own(me), b)),
                );
                local = Some((mine, own(me), b));
            }
            Collective::Alltoall => {
                let mine = at(dst, me);
                remote.extend(
                    (0..n)
                        .filter(|&j| j != me)
                        .map(|j| (on(mine, j), at(src, j), b)),
                );
                local = Some((mine, at(src, me), b));
            }
            Collective::Gather if me == root => local = Some((at(dst, me), own(me), b)),
            Collective::Gather => remote.push((on(at(dst, me), root), own(me), b)),
            Collective::Scatter if me == root => {
                remote.extend(
                    (0..n)
                        .filter(|&j| j != me)
                        .map(|j| (on(own(j), j), at(src, j), b)),
                );
                local = Some((own(me), at(src, me), b));
            }
            _ => {}
        }
        // In place the local part is already where it belongs.
        let local = local.filter(|&(d, s, _)| d != s);
        steps.push(barrier(call, false));
        if let Some((dst, src, bytes)) = local {
            steps.push(Step::Fork);
            steps.push(Step::SideCopy { dst, src, bytes });
        }
        for (dst, src, bytes) in remote {
            steps.push(Step::Copy { dst, src, bytes });
        }
        if local.is_some() {
            steps.push(Step::Join);
        }
        steps.push(barrier(call, true));
    }
}
