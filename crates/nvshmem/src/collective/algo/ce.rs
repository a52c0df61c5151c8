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
//! about 365 (`docs/performance.md`, "The link's ceiling"), but each call pays two barriers
//! and the passages from kernel to copy engine and back, 14-16 us a call in a graph at any
//! size (`tools/probes/README.md`, "The copy engines' frame"), so it wins only for large
//! messages: [`ce_preferred`] reads the crossovers measured from the crossover table
//! ([`crossover`]). (The local copy by an SM kernel on the side stream, which the probe
//! favoured by up to 3.6 us a call, made no difference in nvshmem-perf on 2 x H200 from 1 to
//! 128 MiB: commit f18e54e, not kept.)
use super::{
    crossover,
    nvlink::{flag_barrier, team_view},
    Algorithm, Call, Collective, Step,
};

/// Data movement by copy engine.
pub(super) struct Ce;

/// Whether the automatic choice takes the copy engines for `call`: the crossover table's band
/// for its collective, team size and architecture. Measured on two-PE teams of H200s only;
/// with more members a PE's copies to each peer share its links, where the direct kernels
/// forward, so other teams never prefer them until measured.
fn ce_preferred(call: &Call) -> bool {
    crossover::copy_engines(call)
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
