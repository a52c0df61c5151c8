//! Gather and scatter, which NVSHMEM lacks, as gets between two team syncs ([`RootedGet`]).
use super::{Algorithm, Call, Collective, Step};

/// The root gets every member's block (gather); each member gets its block from the root
/// (scatter). The PE whose buffer receives a block is the one whose stream copies it, so the
/// data is in place when that stream moves on, whatever the peers' streams do; the first sync
/// keeps the gets from reading inputs not yet written, the second keeps the PEs read from from
/// overwriting them while the gets run. The arrays are the same symmetric arrays on every PE
/// (as for every collective), which is how the reader knows the peer's address. Works for any
/// team, peer-mapped or not.
pub(super) struct RootedGet;

impl Algorithm for RootedGet {
    fn name(&self) -> &'static str {
        "rooted_get"
    }

    fn refuses(&self, call: &Call) -> Option<String> {
        match call.coll {
            Collective::Gather | Collective::Scatter => None,
            c => Some(format!("it runs gather and scatter, not {c}")),
        }
    }

    fn plan(&self, call: &Call, steps: &mut Vec<Step>) {
        let (me, bytes) = (call.me, call.block_bytes());
        let block = |base: u64, k: usize| base + (k * bytes) as u64;
        let world = |k: usize| call.team.world[k];
        steps.push(Step::Sync { always: false });
        match call.coll {
            Collective::Gather if me == call.root => {
                for k in 0..call.n() {
                    if k == me && call.in_place {
                        continue; // the root's own block is already where it belongs
                    }
                    steps.push(Step::Get {
                        dst: block(call.dst.ptr, k),
                        src: call.member_block(k),
                        bytes,
                        pe: world(k),
                    });
                }
            }
            Collective::Gather => {}
            Collective::Scatter => {
                if !(me == call.root && call.in_place) {
                    steps.push(Step::Get {
                        dst: call.dst.ptr,
                        src: block(call.src.ptr, me),
                        bytes,
                        pe: world(call.root),
                    });
                }
            }
            _ => unreachable!("refused"),
        }
        steps.push(Step::Sync { always: true });
    }
}
