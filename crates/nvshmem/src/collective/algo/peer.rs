//! This crate's kernels over peer-mapped memory, between two NVSHMEM barriers: reductions
//! ([`PeerKernel`], every type and operator the kernels have, and the only way to reduce
//! fp8), and gather and scatter by one copy kernel ([`PeerCopy`]).
//!
//! The first barrier makes every member's input written before any PE reads it; the second
//! keeps every PE from overwriting its input while another still reads it. The closing
//! barrier is queued even when the kernel fails to launch on some PEs (a rooted call launches
//! on the root only), so no PE waits in it for another.
use super::{Algorithm, Call, Collective, Step};
use crate::kernels::{Launch, MAX_PEERS};

/// Reductions by this crate's kernel reading every member's input directly.
pub(super) struct PeerKernel;

/// Gather and scatter by one copy kernel on the root, reading the peers' blocks (gather) or
/// writing them (scatter) directly, between two team syncs.
pub(super) struct PeerCopy;

/// Why the peer kernels cannot reach the team, if they cannot.
fn refuse_peers(call: &Call) -> Option<String> {
    if call.n() > MAX_PEERS {
        return Some(format!(
            "the peer kernels read at most {MAX_PEERS} PEs; the team has {}",
            call.n()
        ));
    }
    if !call.peer_mapped() {
        return Some(
            "it needs every PE of the team on one node with peer access (NVLink or PCIe P2P), \
             and some member is not reachable by load and store from this GPU"
                .into(),
        );
    }
    None
}

/// `addr` on every member, in team order.
fn on_every_member(call: &Call, addr: u64) -> Vec<u64> {
    (0..call.n())
        .map(|j| {
            call.peer(addr, j)
                .expect("checked: every member is peer-mapped")
        })
        .collect()
}

/// `body` between a barrier and a closing barrier.
fn between_barriers(steps: &mut Vec<Step>, body: impl FnOnce(&mut Vec<Step>)) {
    steps.push(Step::Barrier { always: false });
    body(steps);
    steps.push(Step::Barrier { always: true });
}

impl Algorithm for PeerKernel {
    fn name(&self) -> &'static str {
        "peer_kernel"
    }

    fn refuses(&self, call: &Call) -> Option<String> {
        if !matches!(
            call.coll,
            Collective::AllReduce | Collective::Reduce | Collective::ReduceScatter
        ) {
            return Some(format!("{} is not a reduction", call.coll));
        }
        refuse_peers(call)
    }

    fn scratch(&self, call: &Call) -> usize {
        // In place, a PE writing its buffer would race with the others' reads of it: the
        // result goes to the scratch and is copied back after everyone has read.
        if call.coll == Collective::AllReduce && call.in_place {
            call.block_bytes()
        } else {
            0
        }
    }

    fn plan(&self, call: &Call, steps: &mut Vec<Step>) {
        let (dtype, op, count) = (call.dtype, call.op, call.count);
        let reduce = |peers: Vec<u64>, dst| {
            Step::Kernel(Launch::ReducePeers {
                dtype,
                op,
                peers,
                dst,
                len: count,
            })
        };
        match call.coll {
            Collective::AllReduce => {
                let out = if call.in_place {
                    call.scratch
                } else {
                    call.dst.ptr
                };
                between_barriers(steps, |s| {
                    s.push(reduce(on_every_member(call, call.src.ptr), out))
                });
                if call.in_place {
                    steps.push(Step::Copy {
                        dst: call.dst.ptr,
                        src: call.scratch,
                        bytes: call.block_bytes(),
                    });
                }
            }
            // Only the root computes, straight into its dst (which may be its src: each
            // element is read before it is written, and no other PE reads the root's dst).
            Collective::Reduce => between_barriers(steps, |s| {
                if call.me == call.root {
                    s.push(reduce(on_every_member(call, call.src.ptr), call.dst.ptr));
                }
            }),
            // This PE reduces its block from every member's src. In place, dst is this PE's
            // block of its own src, which no other PE reads: no race.
            Collective::ReduceScatter => {
                let block = call.src.ptr + (call.me * call.block_bytes()) as u64;
                between_barriers(steps, |s| {
                    s.push(reduce(on_every_member(call, block), call.dst.ptr))
                });
            }
            _ => unreachable!("refused"),
        }
    }
}

impl Algorithm for PeerCopy {
    fn name(&self) -> &'static str {
        "peer_copy"
    }

    fn refuses(&self, call: &Call) -> Option<String> {
        if !matches!(call.coll, Collective::Gather | Collective::Scatter) {
            return Some(format!("it runs gather and scatter, not {}", call.coll));
        }
        refuse_peers(call)
    }

    fn plan(&self, call: &Call, steps: &mut Vec<Step>) {
        let bytes = call.block_bytes();
        steps.push(Step::Sync { always: false });
        match call.coll {
            Collective::Gather if call.me == call.root => {
                let from = |j: usize| {
                    call.peer(call.member_block(j), j)
                        .expect("checked: every member is peer-mapped")
                };
                steps.push(Step::Kernel(Launch::Gather {
                    src_peers: (0..call.n()).map(from).collect(),
                    dst: call.dst.ptr,
                    block_bytes: bytes,
                }));
            }
            Collective::Gather => {}
            // The root writes every member's block into its dst (its own too: in place that
            // copies a block onto itself, which changes nothing).
            Collective::Scatter if call.me == call.root => {
                let dst_of = |j: usize| {
                    call.peer(call.member_block(j), j)
                        .expect("checked: every member is peer-mapped")
                };
                steps.push(Step::Kernel(Launch::Scatter {
                    src: call.src.ptr,
                    dst_peers: (0..call.n()).map(dst_of).collect(),
                    block_bytes: bytes,
                }));
            }
            Collective::Scatter => {}
            _ => unreachable!("refused"),
        }
        steps.push(Step::Sync { always: true });
    }
}
