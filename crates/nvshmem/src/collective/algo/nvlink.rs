//! This crate's NVLink collectives (`kernels/PROTOCOL.md`), for teams whose members can all
//! load and store each other's symmetric memory: one kernel launch a call, no NVSHMEM call,
//! every wait ended by the runtime's abort word.
//!
//! - [`Ll`] (`nvlink_ll`): one-shot LL collectives (`ll.cu`) for payloads up to the channel's
//!   LL capacity: each PE stores its data, flagged with the epoch, straight into its peers'
//!   channel slots and reads its own; no barrier before or after.
//! - [`Flags`] (`nvlink`): barrier and sync as a flag exchange (`nvr_barrier`).
use super::{Algorithm, Call, Collective, Step};
use crate::kernels::{self, KernelKey, Launch, NvrArgs, NvrFile, NvrLaunch, NvrTeam};

/// One-shot LL collectives.
pub(super) struct Ll;

/// Barrier and sync by flags.
pub(super) struct Flags;

/// Why a call cannot use the NVLink kernels at all, or its team descriptor.
fn team_view<'a>(call: &'a Call) -> Result<&'a NvrTeam, String> {
    call.nvr.as_ref().ok_or_else(|| {
        if !call.peer_mapped() {
            "it needs every PE of the team reachable by load and store from this GPU (one \
             node, peer access)"
                .to_string()
        } else if call.n() > super::channel::MAX_TEAM {
            format!(
                "it serves teams of at most {} PEs; this one has {}",
                super::channel::MAX_TEAM,
                call.n()
            )
        } else {
            "this team and stream have no channel: their first call came during graph \
             capture, or every channel of the runtime is taken (RuntimeBuilder::channels)"
                .to_string()
        }
    })
}

/// The LL launch rule of `ll.cu` for `x` payload bytes per (sender, receiver) pair and a team
/// of `n`: (grid, block).
pub(crate) fn ll_shape(x: usize, n: usize) -> (u32, u32) {
    let grid = x.div_ceil(4096).clamp(1, 8);
    let packets_per_block = x.div_ceil(8).div_ceil(grid);
    let lanes = match n {
        0 | 1 => 1,
        2 => 2,
        3 | 4 => 4,
        _ => 8,
    };
    let block = ((packets_per_block * lanes).next_multiple_of(32) + 32).min(512);
    (grid as u32, block as u32)
}

impl Algorithm for Ll {
    fn name(&self) -> &'static str {
        "nvlink_ll"
    }

    fn refuses(&self, call: &Call) -> Option<String> {
        let team = match team_view(call) {
            Ok(t) => t,
            Err(why) => return Some(why),
        };
        if matches!(call.coll, Collective::Barrier | Collective::Sync) {
            return Some(format!(
                "it has no {}; the nvlink algorithm does",
                call.coll
            ));
        }
        if call.is_reduction() && !kernels::reduces(call.dtype, call.op) {
            return Some(format!(
                "the NVLink kernels have no {} reduction of {}",
                call.op.name(),
                call.dtype
            ));
        }
        let cap = 4 * team.ll_bytes as usize;
        if call.block_bytes() > cap {
            return Some(format!(
                "it carries at most {cap} bytes a PE, the call {}",
                call.block_bytes()
            ));
        }
        None
    }

    fn plan(&self, call: &Call, steps: &mut Vec<Step>) {
        let team = *call.nvr.as_ref().expect("accepted: the team has a channel");
        let x = call.block_bytes();
        let (grid, block) = ll_shape(x, call.n());
        let root = Some(call.root as i32);
        let (src, dst) = (call.src.ptr, call.dst.ptr);
        let (function, args) = match call.coll {
            Collective::AllReduce => ("nvr_ll_all_reduce", reduce(call, None)),
            Collective::Reduce => ("nvr_ll_reduce", reduce(call, root)),
            Collective::ReduceScatter => ("nvr_ll_reduce_scatter", reduce(call, None)),
            Collective::Broadcast => ("nvr_ll_broadcast", moving(root, src, dst, x)),
            Collective::Fcollect => ("nvr_ll_fcollect", moving(None, src, dst, x)),
            Collective::Alltoall => ("nvr_ll_alltoall", moving(None, src, dst, x)),
            Collective::Gather => ("nvr_ll_gather", moving(root, src, dst, x)),
            Collective::Scatter => ("nvr_ll_scatter", moving(root, src, dst, x)),
            Collective::Barrier | Collective::Sync => unreachable!("refused"),
        };
        let key = if call.is_reduction() {
            KernelKey::Nvr(NvrFile::Ll, Some((call.dtype, call.op)))
        } else {
            KernelKey::Nvr(NvrFile::Ll, None)
        };
        steps.push(Step::Kernel(Launch::Nvr(NvrLaunch {
            key,
            function,
            grid,
            block,
            team,
            args,
        })));
    }
}

/// A reduction's arguments.
fn reduce(call: &Call, root: Option<i32>) -> NvrArgs {
    NvrArgs::Reduce {
        root,
        src: call.src.ptr,
        dst: call.dst.ptr,
        count: call.count as u64,
        scale: match call.op {
            crate::ReduceOp::PreMulSum(s) => s,
            _ => 1.0,
        },
    }
}

/// A data movement's arguments.
fn moving(root: Option<i32>, src: u64, dst: u64, bytes: usize) -> NvrArgs {
    NvrArgs::Move {
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
        let team = *call.nvr.as_ref().expect("accepted: the team has a channel");
        // A barrier also completes this PE's earlier RMA at its targets (NVSHMEM's meaning):
        // the kernel fences system-wide before it arrives.
        let fence = (call.coll == Collective::Barrier) as i32;
        steps.push(Step::Kernel(Launch::Nvr(NvrLaunch {
            key: KernelKey::Nvr(NvrFile::Ll, None),
            function: "nvr_barrier",
            grid: 1,
            block: 32,
            team,
            args: NvrArgs::Barrier { fence },
        })));
    }
}

#[cfg(test)]
mod tests {
    use super::ll_shape;

    #[test]
    fn the_ll_launch_rule_of_ll_cu() {
        // 8 bytes, 2 PEs: one packet, two lanes: one warp plus the flag warp.
        assert_eq!(ll_shape(8, 2), (1, 64));
        assert_eq!(ll_shape(4096, 2), (1, 512));
        assert_eq!(ll_shape(4097, 8), (2, 512));
        assert_eq!(ll_shape(64 << 10, 2), (8, 512));
        assert_eq!(ll_shape(0, 1), (1, 32));
    }
}
