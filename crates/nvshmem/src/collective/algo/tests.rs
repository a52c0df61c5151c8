//! What each algorithm queues, on each PE, without a GPU: the plans are data, and a recorder
//! stands in for the device.
use super::queue::{execute, record::Recorder, Step};
use super::*;
use crate::{
    ffi::Reduction,
    kernels::{Launch, MapKind},
    DataType, ReduceOp,
};

const SRC: u64 = 0x10_0000;
const DST: u64 = 0x80_0000;
const SCRATCH: u64 = 0x200_0000;
/// What a peer's copy is offset by, per member.
const PEER: u64 = 1 << 40;

pub(crate) fn team(n: usize, me: usize, mapped: bool) -> TeamShape {
    team_fitting(n, me, mapped, crate::team::DEFAULT_MAX_BLOCKS)
}

/// [`team`] whose members each keep at most `max_blocks` blocks of 512 threads resident.
pub(crate) fn team_fitting(n: usize, me: usize, mapped: bool, max_blocks: u32) -> TeamShape {
    TeamShape {
        handle: 7,
        my_pe: me,
        n_pes: n,
        world: (0..n).map(|i| 10 + i).collect(),
        peer_offsets: mapped.then(|| {
            (0..n)
                .map(|j| (j as i64 - me as i64) * PEER as i64)
                .collect()
        }),
        max_blocks,
        descriptor: None,
        arch: Some((9, 0)),
        nvshmem_collectives: true,
        shares_gpu: false,
        alone_in_job: false,
        job_peer_mapped: true,
    }
}

/// A call as `Team::collective` would describe it: `count` elements a part.
#[allow(clippy::too_many_arguments)]
pub(crate) fn call<'a>(
    team: &'a TeamShape,
    coll: Collective,
    dtype: DataType,
    op: ReduceOp,
    count: usize,
    in_place: bool,
    root: usize,
) -> Call<'a> {
    let n = team.n_pes;
    let me = team.my_pe;
    let el = dtype.size();
    let (src_len, dst_len) = match coll {
        Collective::Fcollect | Collective::Gather => (count, n * count),
        Collective::ReduceScatter | Collective::Scatter => (n * count, count),
        Collective::Alltoall => (n * count, n * count),
        Collective::Barrier | Collective::Sync => (0, 0),
        _ => (count, count),
    };
    let (src, dst) = if in_place {
        match coll {
            Collective::Fcollect | Collective::Gather => (DST + (me * count * el) as u64, DST),
            Collective::ReduceScatter | Collective::Scatter => {
                (SRC, SRC + (me * count * el) as u64)
            }
            _ => (SRC, SRC),
        }
    } else {
        (SRC, DST)
    };
    Call {
        coll,
        name: "test",
        team,
        me,
        dtype,
        op,
        root,
        src: Span::new(src, src_len, el),
        dst: Span::new(dst, dst_len, el),
        count,
        in_place,
        scratch: SCRATCH,
        room: usize::MAX,
        descriptor: None,
        arch: None,
    }
}

fn plan(c: &Call) -> (&'static str, Vec<Step>) {
    let a = choose(c, None).unwrap_or_else(|e| panic!("{e}"));
    let mut steps = Vec::new();
    a.plan(c, &mut steps);
    (a.name(), steps)
}

fn all_reduce(dst: u64, src: u64, dtype: DataType, op: ReduceOp, count: usize) -> Step {
    Step::Reduce {
        kind: Reduction::AllReduce,
        dtype,
        op,
        dst,
        src,
        count,
    }
}

#[test]
fn reductions_nvshmem_has_run_as_one_call() {
    let t = team(2, 1, true);
    let c = f32_sum(&t, Collective::AllReduce, 100);
    assert_eq!(
        plan(&c),
        (
            "nvshmem",
            vec![all_reduce(DST, SRC, DataType::F32, ReduceOp::Sum, 100)]
        )
    );
    let c = call(
        &t,
        Collective::ReduceScatter,
        DataType::U32,
        ReduceOp::Xor,
        8,
        false,
        0,
    );
    assert_eq!(
        plan(&c).1,
        [Step::Reduce {
            kind: Reduction::ReduceScatter,
            dtype: DataType::U32,
            op: ReduceOp::Xor,
            dst: DST,
            src: SRC,
            count: 8
        }]
    );
}

#[test]
fn avg_and_premul_sum_wrap_nvshmems_sum() {
    let t = team(4, 2, false);
    let c = call(
        &t,
        Collective::AllReduce,
        DataType::I32,
        ReduceOp::Avg,
        10,
        false,
        0,
    );
    let map = |kind, src, dst, len, factor| {
        Step::Kernel(Launch::Map {
            dtype: DataType::I32,
            kind,
            src,
            dst,
            len,
            factor,
        })
    };
    // Integers: each input split by the team size into 64-bit pairs (q, r) in the scratch,
    // NVSHMEM's i64 sum of the pairs, the exact mean rebuilt into dst. 160 bytes of wide
    // input after 160 of wide result.
    let staged = SCRATCH + 256;
    assert_eq!(
        plan(&c),
        (
            "sum_then_div",
            vec![
                map(MapKind::Widen, SRC, staged, 10, 4.0),
                all_reduce(SCRATCH, staged, DataType::I64, ReduceOp::Sum, 20),
                map(MapKind::Narrow, SCRATCH, DST, 10, 4.0)
            ]
        )
    );
    assert_eq!(nvshmem::SumThenDiv.scratch(&c), 256 + 160);
    // f32 sums in its own type, straight into dst, then divides there: no scratch.
    let c = call(
        &t,
        Collective::AllReduce,
        DataType::F32,
        ReduceOp::Avg,
        10,
        false,
        0,
    );
    assert_eq!(nvshmem::SumThenDiv.scratch(&c), 0);
    assert_eq!(
        plan(&c).1,
        vec![
            all_reduce(DST, SRC, DataType::F32, ReduceOp::Sum, 10),
            Step::Kernel(Launch::Map {
                dtype: DataType::F32,
                kind: MapKind::Div,
                src: DST,
                dst: DST,
                len: 10,
                factor: 4.0
            })
        ]
    );
    // premul_sum scales into the scratch (src is left as it was) and sums from there into
    // dst: NVSHMEM is never handed dst == src (nvshmem.rs, module docs). Integers sum in
    // their type (wrapping, as the kernels).
    let c = call(
        &t,
        Collective::AllReduce,
        DataType::I32,
        ReduceOp::PreMulSum(3.0),
        10,
        false,
        0,
    );
    assert_eq!(
        plan(&c),
        (
            "scale_then_sum",
            vec![
                map(MapKind::Mul, SRC, SCRATCH, 10, 3.0),
                all_reduce(DST, SCRATCH, DataType::I32, ReduceOp::Sum, 10)
            ]
        )
    );
}

/// 16-bit floats (and fp8) are widened into f32 for avg and premul_sum, as the kernels
/// compute them: summed in f32, rounded once. A reduce-scatter sums the wide blocks and
/// narrows this PE's; a reduce narrows on the root only.
#[test]
fn sixteen_bit_floats_sum_in_f32_on_nvshmems_path() {
    for me in 0..3 {
        let t = team(3, me, false);
        let map = |kind, src, dst, len, factor| {
            Step::Kernel(Launch::Map {
                dtype: DataType::F16,
                kind,
                src,
                dst,
                len,
                factor,
            })
        };
        // 3 blocks of 8 f16: 96 bytes of f32 input, a 32-byte f32 block of result.
        let c = call(
            &t,
            Collective::ReduceScatter,
            DataType::F16,
            ReduceOp::Avg,
            8,
            true,
            0,
        );
        let staged = SCRATCH + 256;
        assert_eq!(
            plan(&c),
            (
                "sum_then_div",
                vec![
                    map(MapKind::Widen, SRC, staged, 24, 1.0),
                    Step::Reduce {
                        kind: Reduction::ReduceScatter,
                        dtype: DataType::F32,
                        op: ReduceOp::Sum,
                        dst: SCRATCH,
                        src: staged,
                        count: 8
                    },
                    map(MapKind::Narrow, SCRATCH, SRC + 16 * me as u64, 8, 3.0)
                ]
            )
        );
        assert_eq!(nvshmem::SumThenDiv.scratch(&c), 256 + 96);
        let c = call(
            &t,
            Collective::Reduce,
            DataType::BF16,
            ReduceOp::PreMulSum(0.5),
            8,
            false,
            1,
        );
        let (name, steps) = plan(&c);
        assert_eq!(name, "scale_then_sum");
        assert_eq!(steps.len(), if me == 1 { 3 } else { 2 });
        assert!(matches!(
            steps[0],
            Step::Kernel(Launch::Map { kind: MapKind::Widen, factor, .. }) if factor == 0.5
        ));
        assert_eq!(
            steps[1],
            all_reduce(SCRATCH, staged, DataType::F32, ReduceOp::Sum, 8)
        );
        if me == 1 {
            assert!(matches!(
                steps[2],
                Step::Kernel(Launch::Map { kind: MapKind::Narrow, dst: DST, len: 8, factor, .. })
                    if factor == 1.0
            ));
        }
    }
}

#[test]
fn a_rooted_reduce_goes_through_the_scratch_and_only_the_root_copies_out() {
    for me in 0..3 {
        let t = team(3, me, false);
        let c = call(
            &t,
            Collective::Reduce,
            DataType::F64,
            ReduceOp::Max,
            16,
            false,
            1,
        );
        let (name, steps) = plan(&c);
        assert_eq!(name, "nvshmem");
        let mut want = vec![all_reduce(SCRATCH, SRC, DataType::F64, ReduceOp::Max, 16)];
        if me == 1 {
            want.push(Step::Copy {
                dst: DST,
                src: SCRATCH,
                bytes: 128,
            });
        }
        assert_eq!(steps, want, "PE {me}");
        assert_eq!(nvshmem::Native.scratch(&c), 128);
    }
}

#[test]
fn sixteen_bit_integers_reach_nvshmem_in_one_mib_calls() {
    let t = team(2, 0, false);
    let count = 3 * (1 << 19) + 5;
    let c = call(
        &t,
        Collective::AllReduce,
        DataType::I16,
        ReduceOp::Sum,
        count,
        false,
        0,
    );
    let (_, steps) = plan(&c);
    assert_eq!(steps.len(), 4);
    assert_eq!(
        steps[3],
        all_reduce(
            DST + 3 * (1 << 20),
            SRC + 3 * (1 << 20),
            DataType::I16,
            ReduceOp::Sum,
            5
        )
    );
    // A reduce-scatter whose blocks exceed a call all-reduces into the scratch and keeps its
    // own block.
    let t = team(2, 1, false);
    let c = call(
        &t,
        Collective::ReduceScatter,
        DataType::U16,
        ReduceOp::Sum,
        1 << 20,
        false,
        0,
    );
    assert_eq!(nvshmem::Native.scratch(&c), 2 * (2 << 20));
    let (_, steps) = plan(&c);
    assert_eq!(
        steps.last(),
        Some(&Step::Copy {
            dst: DST,
            src: SCRATCH + (2 << 20),
            bytes: 2 << 20
        })
    );
    assert!(steps[..steps.len() - 1].iter().all(|s| matches!(
        s,
        Step::Reduce {
            kind: Reduction::AllReduce,
            ..
        }
    )));
}

#[test]
fn fp8_reduces_in_the_peer_kernel_between_barriers() {
    let t = team(2, 1, true);
    let c = call(
        &t,
        Collective::AllReduce,
        DataType::F8E4M3,
        ReduceOp::Sum,
        64,
        true,
        0,
    );
    let (name, steps) = plan(&c);
    assert_eq!(name, "peer_kernel");
    // In place: the result goes to the scratch, then back once every PE has read.
    assert_eq!(
        steps,
        [
            Step::Barrier { always: false },
            Step::Kernel(Launch::ReducePeers {
                dtype: DataType::F8E4M3,
                op: ReduceOp::Sum,
                peers: vec![SRC.wrapping_sub(PEER), SRC],
                dst: SCRATCH,
                len: 64
            }),
            Step::Barrier { always: true },
            Step::Copy {
                dst: SRC,
                src: SCRATCH,
                bytes: 64
            }
        ]
    );
    assert_eq!(peer::PeerKernel.scratch(&c), 64);
    // Without peer access there is no way to reduce fp8.
    let t = team(2, 1, false);
    let c = call(
        &t,
        Collective::AllReduce,
        DataType::F8E4M3,
        ReduceOp::Sum,
        64,
        false,
        0,
    );
    let e = choose(&c, None).unwrap_err().to_string();
    assert!(e.contains("peer access"), "{e}");
}

#[test]
fn the_closing_barrier_is_queued_even_when_a_launch_fails() {
    let t = team(2, 0, true);
    let c = call(
        &t,
        Collective::ReduceScatter,
        DataType::F8E5M2,
        ReduceOp::Max,
        32,
        false,
        0,
    );
    let (_, steps) = plan(&c);
    let mut ok = Recorder::default();
    assert!(execute(&steps, &mut ok).is_ok());
    let mut bad = Recorder {
        fail: Some(|s| matches!(s, Step::Kernel(_))),
        ..Default::default()
    };
    let e = execute(&steps, &mut bad).unwrap_err();
    assert!(e.to_string().contains("failed on purpose"), "{e}");
    // The PE whose launch failed still queues both barriers, as the PEs that succeed do.
    assert_eq!(bad.queued, ok.queued);
    // Kernels are prepared before anything is queued.
    assert_eq!(ok.prepared.len(), 1);
}

#[test]
fn after_a_failure_only_closing_barriers_are_queued() {
    let steps = [
        Step::Sync { always: false },
        Step::Copy {
            dst: DST,
            src: SRC,
            bytes: 4,
        },
        Step::Get {
            dst: DST,
            src: SRC,
            bytes: 4,
            pe: 1,
        },
        Step::Sync { always: true },
    ];
    let mut q = Recorder {
        fail: Some(|s| matches!(s, Step::Copy { .. })),
        ..Default::default()
    };
    assert!(execute(&steps, &mut q).is_err());
    assert_eq!(
        q.queued,
        [steps[0].clone(), steps[1].clone(), steps[3].clone()]
    );
    // A failed opening sync stops everything but the closing one.
    let mut q = Recorder {
        fail: Some(|s| matches!(s, Step::Sync { always: false })),
        ..Default::default()
    };
    assert!(execute(&steps, &mut q).is_err());
    assert_eq!(q.queued, [steps[0].clone(), steps[3].clone()]);
}

#[test]
fn gather_and_scatter_get_on_the_receiving_pe() {
    let steps_of = |coll, me, in_place| {
        let t = team(3, me, false);
        plan(&call(&t, coll, DataType::U8, ReduceOp::Sum, 5, in_place, 2)).1
    };
    // The root gets every block (its own too when not in place); the others queue the syncs.
    let root = steps_of(Collective::Gather, 2, false);
    assert_eq!(root.len(), 2 + 3);
    assert_eq!(
        root[1],
        Step::Get {
            dst: DST,
            src: SRC,
            bytes: 5,
            pe: 10
        }
    );
    assert_eq!(steps_of(Collective::Gather, 2, true).len(), 2 + 2);
    assert_eq!(
        steps_of(Collective::Gather, 0, false),
        [Step::Sync { always: false }, Step::Sync { always: true }]
    );
    // Scatter: every member gets its block from the root (the root in place: nothing).
    assert_eq!(
        steps_of(Collective::Scatter, 1, false)[1],
        Step::Get {
            dst: DST,
            src: SRC + 5,
            bytes: 5,
            pe: 12
        }
    );
    assert_eq!(steps_of(Collective::Scatter, 2, true).len(), 2);
}

/// The steps every PE of a team must queue alike (NVSHMEM's collectives), in order.
pub(crate) fn collective_steps(steps: &[Step]) -> Vec<String> {
    steps
        .iter()
        .filter_map(|s| match s {
            Step::Reduce { kind, count, .. } => Some(format!("reduce {kind:?} {count}")),
            Step::Broadcast { bytes, root, .. } => Some(format!("broadcast {bytes} {root}")),
            Step::Fcollect { bytes, .. } => Some(format!("fcollect {bytes}")),
            Step::Alltoall { bytes, .. } => Some(format!("alltoall {bytes}")),
            Step::Barrier { .. } => Some("barrier".into()),
            Step::Sync { .. } => Some("sync".into()),
            _ => None,
        })
        .collect()
}

#[test]
fn every_pe_takes_the_same_decision_and_queues_matching_collectives() {
    let ops = [
        ReduceOp::Sum,
        ReduceOp::Max,
        ReduceOp::Avg,
        ReduceOp::PreMulSum(2.0),
        ReduceOp::And,
    ];
    for n in [1, 2, 3, 8] {
        for mapped in [false, true] {
            for coll in Collective::ALL {
                for &dtype in DataType::ALL {
                    for op in ops {
                        if op.check_for("t", dtype).is_err() {
                            continue;
                        }
                        for count in [0, 1, 1000, 3 << 19] {
                            for in_place in [false, true] {
                                let teams: Vec<_> = (0..n).map(|me| team(n, me, mapped)).collect();
                                let calls: Vec<_> = teams
                                    .iter()
                                    .map(|t| call(t, coll, dtype, op, count, in_place, n - 1))
                                    .collect();
                                let chosen: Vec<_> = calls
                                    .iter()
                                    .map(|c| {
                                        choose(c, None).map(|a| a.name()).map_err(|e| e.to_string())
                                    })
                                    .collect();
                                assert!(
                                    chosen.windows(2).all(|w| w[0] == w[1]),
                                    "{coll} {dtype} {op} n={n}: {chosen:?}"
                                );
                                let Ok(_) = &chosen[0] else { continue };
                                let plans: Vec<_> =
                                    calls.iter().map(|c| collective_steps(&plan(c).1)).collect();
                                assert!(
                                    plans.windows(2).all(|w| w[0] == w[1]),
                                    "{coll} {dtype} {op} n={n} count={count}: {plans:?}"
                                );
                            }
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn a_forced_algorithm_that_cannot_run_the_call_says_why() {
    let t = team(2, 0, false);
    let c = call(
        &t,
        Collective::AllReduce,
        DataType::F32,
        ReduceOp::Avg,
        4,
        false,
        0,
    );
    let e = choose(&c, Some(&nvshmem::Native)).unwrap_err();
    assert!(
        matches!(
            e,
            Error::AlgorithmRefused {
                algorithm: "nvshmem",
                ..
            }
        ),
        "{e:?}"
    );
    assert_eq!(
        e.to_string(),
        "test: the forced algorithm nvshmem cannot run this call: NVSHMEM has no avg reduction of f32"
    );
    let e = choose(&c, Some(&peer::PeerKernel)).unwrap_err().to_string();
    assert!(e.contains("peer access"), "{e}");
    assert_eq!(
        choose(&c, Some(&nvshmem::SumThenDiv)).unwrap().name(),
        "sum_then_div"
    );
}

#[test]
fn forced_algorithms_parse_and_unknown_names_are_refused() {
    let state = ForcedTable::default();
    for (c, a) in parse_forced("all_reduce=peer_kernel, allgather = nvshmem").unwrap() {
        state.set(c, Some(&a)).unwrap();
    }
    assert_eq!(
        state.get(Collective::AllReduce).map(|a| a.name()),
        Some("peer_kernel")
    );
    assert_eq!(
        state.get(Collective::Fcollect).map(|a| a.name()),
        Some("nvshmem")
    );
    assert!(state.get(Collective::Reduce).is_none());
    state.set(Collective::AllReduce, Some("auto")).unwrap();
    assert!(state.get(Collective::AllReduce).is_none());
    let e = state.set(Collective::Gather, Some("nvshmem")).unwrap_err();
    assert_eq!(
        e,
        "gather has no algorithm \"nvshmem\"; it has auto, local, nvlink_ll, nvlink_lamport, nvlink_ce, nvlink_direct, rooted_get, peer_copy"
    );
    assert!(parse_forced("all_reduce").is_err());
    assert!(parse_forced("everything=nvshmem")
        .unwrap_err()
        .contains("expected one of"));
}

#[test]
fn collectives_parse_from_their_nccl_and_mpi_names() {
    for c in Collective::ALL {
        assert_eq!(c.name().parse::<Collective>().unwrap(), c);
        assert!(!c.algorithms().is_empty(), "{c}");
    }
    assert_eq!(
        "AllReduce".parse::<Collective>().unwrap(),
        Collective::AllReduce
    );
    assert_eq!(
        "all-gather".parse::<Collective>().unwrap(),
        Collective::Fcollect
    );
    assert_eq!(
        "MPI_Alltoall".parse::<Collective>().unwrap(),
        Collective::Alltoall
    );
    assert!("allsort".parse::<Collective>().is_err());
}

#[test]
fn supports_combines_kind_scale_and_algorithm() {
    use crate::element::{Bool8, F8E4M3, F8E5M2};
    assert!(ReduceOp::Avg.supports::<u8>());
    assert!(ReduceOp::PreMulSum(3.0).supports::<u64>());
    assert!(!ReduceOp::PreMulSum(0.25).supports::<u64>());
    for op in [ReduceOp::Sum, ReduceOp::Min, ReduceOp::Max, ReduceOp::Avg] {
        assert!(op.supports::<F8E4M3>() && op.supports::<F8E5M2>(), "{op}");
    }
    assert!(ReduceOp::PreMulSum(0.5).supports::<F8E5M2>());
    // This crate's kernels compute a product of fp8 too (in f32); nothing has xor of a float.
    assert!(ReduceOp::Prod.supports::<F8E4M3>());
    assert!(!ReduceOp::Xor.supports::<F8E4M3>());
    for op in [ReduceOp::And, ReduceOp::Or, ReduceOp::Min, ReduceOp::Max] {
        assert!(op.supports::<Bool8>(), "{op}");
    }
    for op in [ReduceOp::Sum, ReduceOp::Prod, ReduceOp::Xor, ReduceOp::Avg] {
        assert!(!op.supports::<Bool8>(), "{op}");
    }
    assert!(!ReduceOp::PreMulSum(1.0).supports::<Bool8>());
}

/// Where each member's own block is read from (gather) or written to (scatter), in place and
/// not, through peer pointers (peer_copy) and through gets (rooted_get).
#[test]
fn gather_and_scatter_address_each_members_own_block() {
    let steps = |a: &dyn Algorithm, coll, me, in_place| {
        let t = team(3, me, true);
        let mut steps = Vec::new();
        a.plan(
            &call(&t, coll, DataType::U8, ReduceOp::Sum, 5, in_place, 1),
            &mut steps,
        );
        steps
    };
    // peer_copy, root 1: peer j of the root is at offset (j - 1) * PEER.
    let at = |addr: u64, j: u64| addr.wrapping_add(j.wrapping_sub(1).wrapping_mul(PEER));
    for (in_place, want) in [
        (false, [at(SRC, 0), at(SRC, 1), at(SRC, 2)]),
        (true, [at(DST, 0), at(DST + 5, 1), at(DST + 10, 2)]),
    ] {
        match &steps(&peer::PeerCopy, Collective::Gather, 1, in_place)[1] {
            Step::Kernel(Launch::Gather { src_peers, dst, .. }) => {
                assert_eq!(
                    (src_peers.as_slice(), *dst),
                    (&want[..], DST),
                    "in place {in_place}"
                );
            }
            s => panic!("{s:?}"),
        }
    }
    for (in_place, want) in [
        (false, [at(DST, 0), at(DST, 1), at(DST, 2)]),
        (true, [at(SRC, 0), at(SRC + 5, 1), at(SRC + 10, 2)]),
    ] {
        match &steps(&peer::PeerCopy, Collective::Scatter, 1, in_place)[1] {
            Step::Kernel(Launch::Scatter { src, dst_peers, .. }) => {
                assert_eq!(
                    (*src, dst_peers.as_slice()),
                    (SRC, &want[..]),
                    "in place {in_place}"
                );
            }
            s => panic!("{s:?}"),
        }
    }
    // rooted_get, root 1, in place: the root gets block k of member k's dst into its block k.
    let gets: Vec<(u64, u64, usize)> = steps(&rooted::RootedGet, Collective::Gather, 1, true)
        .iter()
        .filter_map(|s| match s {
            Step::Get { dst, src, pe, .. } => Some((*dst, *src, *pe)),
            _ => None,
        })
        .collect();
    assert_eq!(gets, [(DST, DST, 10), (DST + 10, DST + 10, 12)]);
}

/// An f32 sum of `count` elements a part, out of place, root 0: the call most tests need.
pub(crate) fn f32_sum(team: &TeamShape, coll: Collective, count: usize) -> Call<'_> {
    call(team, coll, DataType::F32, ReduceOp::Sum, count, false, 0)
}

/// `c` with a channel, as a team that can use the NVLink kernels has, on the architecture the
/// crossovers were measured on (sm_90).
pub(crate) fn with_channel(mut c: Call<'_>) -> Call<'_> {
    let mut off = [0i64; crate::channel::MAX_TEAM];
    if let Some(o) = &c.team.peer_offsets {
        off[..o.len()].copy_from_slice(o);
    }
    c.descriptor = Some(crate::kernels::TeamDescriptor {
        off,
        n: c.n() as i32,
        me: c.me as i32,
        chan: 0x900_0000,
        ll_bytes: crate::channel::DEFAULT_LL_BYTES as u32,
        check: 1,
        abort: 0,
        status: 0,
        timeout_ns: 0,
        fp: [0, 0x1234_5678 << 32],
        lam_bytes: crate::channel::lamport::area_bytes(crate::channel::lamport::DEFAULT_MAX) as u64,
    });
    c.arch = Some(crossover::Arch::SM90);
    c
}

/// The algorithm of `coll` registered as `name`.
fn named(coll: Collective, name: &str) -> &'static dyn Algorithm {
    registry(coll)
        .iter()
        .find(|a| a.name() == name)
        .copied()
        .unwrap_or_else(|| panic!("{coll} has no algorithm {name}"))
}

/// The flag barrier is launched with the one shape `nvr_barrier` accepts (`ll.cu` records a
/// launch-limit failure for any other, and its peers then wait until the timeout): one block
/// of two warps, so that its epoch is read by the first warp while the flag warp fences
/// (`nvr_arrive_ordered`).
#[test]
fn the_flag_barrier_launch_is_the_shape_nvr_barrier_accepts() {
    let t = team(2, 0, true);
    let c = with_channel(call(
        &t,
        Collective::Barrier,
        DataType::U8,
        ReduceOp::Sum,
        0,
        false,
        0,
    ));
    let Launch::Nvlink(l) = super::nvlink::flag_barrier(&c, true) else {
        panic!("the flag barrier is an NVLink launch");
    };
    let src = include_str!("../../kernels/ll.cu");
    let body = &src[src
        .find("nvr_barrier(const __grid_constant__")
        .expect("nvr_barrier in ll.cu")..];
    let body = &body[..body.find("\n}\n").expect("its end")];
    assert_eq!((l.function, l.grid), ("nvr_barrier", 1));
    assert!(body.contains(&format!("gridDim.x == {}", l.grid)), "{body}");
    assert!(
        body.contains(&format!("blockDim.x == {}", l.block)),
        "{body}"
    );
    assert!(src.contains(&format!("__launch_bounds__({})\n    nvr_barrier(", l.block)));
    assert!(l.block >= 64, "two warps at least");
}

/// What `nvlink_ce` queues for `coll` on PE `me` of 2 (root 1, 64 bytes a block): the copies
/// between the two flag barriers, as (kind, dst, src, bytes), kind 'c' on the stream and 's'
/// on the side stream; and that the plan is framed as the module says.
fn ce_copies(coll: Collective, me: usize, in_place: bool) -> Vec<(char, u64, u64, usize)> {
    let t = team(2, me, true);
    let c = with_channel(call(&t, coll, DataType::U8, ReduceOp::Sum, 64, in_place, 1));
    assert!(ce::Ce.refuses(&c).is_none(), "{coll}");
    let mut steps = Vec::new();
    ce::Ce.plan(&c, &mut steps);
    let barrier = |s: &Step| {
        matches!(s, Step::Kernel(Launch::Nvlink(l)) | Step::ClosingKernel(Launch::Nvlink(l))
            if l.function == "nvr_barrier" && l.args == crate::kernels::NvlinkArgs::Barrier { fence: 1 })
    };
    assert!(matches!(steps.first(), Some(s @ Step::Kernel(_)) if barrier(s)));
    assert!(matches!(steps.last(), Some(s @ Step::ClosingKernel(_)) if barrier(s)));
    let body = &steps[1..steps.len() - 1];
    let forks = body.iter().filter(|s| **s == Step::Fork).count();
    let side = body
        .iter()
        .filter(|s| matches!(s, Step::SideCopy { .. }))
        .count();
    assert_eq!(forks, side, "{coll}: one fork per side copy");
    assert_eq!(body.iter().filter(|s| **s == Step::Join).count(), side);
    body.iter()
        .filter_map(|s| match *s {
            Step::Copy { dst, src, bytes } => Some(('c', dst, src, bytes)),
            Step::SideCopy { dst, src, bytes } => Some(('s', dst, src, bytes)),
            _ => None,
        })
        .collect()
}

#[test]
fn copy_engines_move_each_block_once_between_two_barriers() {
    // Peer j's copy of address a is a + (j - me) * PEER.
    let up = |a: u64| a + PEER;
    let down = |a: u64| a.wrapping_sub(PEER);
    use Collective::*;
    // Broadcast: the root (1) copies to PE 0 and locally beside it; PE 0 only waits.
    assert_eq!(
        ce_copies(Broadcast, 1, false),
        [('s', DST, SRC, 64), ('c', down(DST), SRC, 64)]
    );
    assert_eq!(ce_copies(Broadcast, 0, false), []);
    assert_eq!(ce_copies(Broadcast, 1, true), [('c', down(SRC), SRC, 64)]);
    // Fcollect: my block to my slot on the peer, and locally.
    assert_eq!(
        ce_copies(Fcollect, 0, false),
        [('s', DST, SRC, 64), ('c', up(DST), SRC, 64)]
    );
    assert_eq!(
        ce_copies(Fcollect, 1, true),
        [('c', down(DST + 64), DST + 64, 64)]
    );
    // Alltoall: block j of my src to block me of PE j's dst.
    assert_eq!(
        ce_copies(Alltoall, 0, false),
        [('s', DST, SRC, 64), ('c', up(DST), SRC + 64, 64)]
    );
    // Gather to root 1: PE 0 writes its block into the root's slot 0; the root copies its own.
    assert_eq!(ce_copies(Gather, 0, false), [('c', up(DST), SRC, 64)]);
    assert_eq!(ce_copies(Gather, 1, false), [('s', DST + 64, SRC, 64)]);
    assert_eq!(ce_copies(Gather, 1, true), []);
    assert_eq!(ce_copies(Gather, 0, true), [('c', up(DST), DST, 64)]);
    // Scatter from root 1: block 0 to PE 0's dst, block 1 to its own.
    assert_eq!(
        ce_copies(Scatter, 1, false),
        [('s', DST, SRC + 64, 64), ('c', down(DST), SRC, 64)]
    );
    assert_eq!(ce_copies(Scatter, 0, false), []);
    assert_eq!(ce_copies(Scatter, 1, true), [('c', down(SRC), SRC, 64)]);
}

#[test]
fn copy_engines_refuse_what_they_cannot_move() {
    let t = team(2, 0, true);
    let c = |coll, in_place| {
        with_channel(call(
            &t,
            coll,
            DataType::F32,
            ReduceOp::Sum,
            16,
            in_place,
            0,
        ))
    };
    assert!(ce::Ce
        .refuses(&c(Collective::AllReduce, false))
        .unwrap()
        .contains("not data movement"));
    assert!(ce::Ce
        .refuses(&c(Collective::Alltoall, true))
        .unwrap()
        .contains("in place"));
    let mut no_channel = c(Collective::Broadcast, false);
    no_channel.descriptor = None;
    assert!(ce::Ce.refuses(&no_channel).is_some());
    // Chosen only for large messages on two PEs (the measured crossovers), but accepted
    // whenever forced.
    assert!(!ce::Ce.prefers(&c(Collective::Broadcast, false)));
    let big = |n, coll, bytes: usize| {
        let t = team(n, 0, true);
        ce::Ce.prefers(&with_channel(call(
            &t,
            coll,
            DataType::U8,
            ReduceOp::Sum,
            bytes,
            false,
            0,
        )))
    };
    assert!(big(2, Collective::Broadcast, 128 << 20));
    assert!(!big(2, Collective::Broadcast, 64 << 20));
    assert!(!big(3, Collective::Broadcast, 128 << 20));
    assert!(big(2, Collective::Gather, 128 << 20));
    assert!(!big(2, Collective::Gather, 64 << 20));
    assert!(!big(2, Collective::Fcollect, 64 << 20));
    assert!(big(2, Collective::Alltoall, 128 << 20));
}

#[test]
fn a_failed_copy_still_joins_the_side_stream_and_queues_the_closing_barrier() {
    let t = team(2, 0, true);
    let c = with_channel(call(
        &t,
        Collective::Fcollect,
        DataType::U8,
        ReduceOp::Sum,
        64,
        false,
        0,
    ));
    let mut steps = Vec::new();
    ce::Ce.plan(&c, &mut steps);
    let mut ok = Recorder::default();
    assert!(execute(&steps, &mut ok).is_ok());
    let mut bad = Recorder {
        fail: Some(|s| matches!(s, Step::Copy { .. })),
        ..Default::default()
    };
    assert!(execute(&steps, &mut bad).is_err());
    assert_eq!(
        bad.queued, ok.queued,
        "nothing after the failed copy is left out"
    );
    let mut bad = Recorder {
        fail: Some(|s| matches!(s, Step::Fork)),
        ..Default::default()
    };
    assert!(execute(&steps, &mut bad).is_err());
    assert_eq!(
        bad.queued
            .iter()
            .filter(|s| matches!(s, Step::Join | Step::ClosingKernel(_)))
            .count(),
        2
    );
}

#[test]
fn barrier_fences_and_sync_does_not() {
    let t = team(2, 0, true);
    for (coll, fence) in [(Collective::Barrier, 1), (Collective::Sync, 0)] {
        let c = with_channel(call(&t, coll, DataType::U8, ReduceOp::Sum, 0, false, 0));
        let (name, steps) = plan(&c);
        assert_eq!(name, "nvlink");
        assert!(
            matches!(&steps[..], [Step::Kernel(Launch::Nvlink(l))]
                if l.function == "nvr_barrier" && l.args == crate::kernels::NvlinkArgs::Barrier { fence }),
            "{coll}: {steps:?}"
        );
    }
}

/// A barrier promises that this PE's RMA has completed: where some PE of the job is reached
/// only through NVSHMEM's proxy (another node), the flag barrier's fence cannot complete a put
/// to it, so NVSHMEM's quiet comes first. A sync promises no such thing, and NVSHMEM's own
/// barrier quiets by itself.
#[test]
fn a_barrier_quiets_first_where_some_pe_is_not_peer_mapped() {
    let mut t = team(2, 0, true);
    t.job_peer_mapped = false;
    for coll in [Collective::Barrier, Collective::Sync] {
        let c = with_channel(call(&t, coll, DataType::U8, ReduceOp::Sum, 0, false, 0));
        let (name, steps) = plan(&c);
        assert_eq!(name, "nvlink");
        match coll {
            Collective::Barrier => assert!(
                matches!(&steps[..], [Step::Quiet, Step::Kernel(Launch::Nvlink(l))]
                    if l.function == "nvr_barrier"),
                "{steps:?}"
            ),
            _ => assert!(
                matches!(&steps[..], [Step::Kernel(Launch::Nvlink(_))]),
                "{steps:?}"
            ),
        }
    }
    let c = call(
        &t,
        Collective::Barrier,
        DataType::U8,
        ReduceOp::Sum,
        0,
        false,
        0,
    );
    let (name, steps) = plan(&c);
    assert_eq!(
        (name, &steps[..]),
        ("nvshmem", &[Step::Barrier { always: false }][..])
    );
}

/// Every step that may wait inside NVSHMEM names NVSHMEM's function, so its frame in the
/// progress ring can report it; copies, kernels and gets wait for no one.
#[test]
fn steps_that_wait_inside_nvshmem_name_their_function() {
    let waits = [
        Step::Barrier { always: true },
        Step::Sync { always: false },
        Step::Quiet,
        Step::Broadcast {
            dst: 0,
            src: 0,
            bytes: 8,
            root: 0,
        },
        Step::Fcollect {
            dst: 0,
            src: 0,
            bytes: 8,
        },
        Step::Alltoall {
            dst: 0,
            src: 0,
            bytes: 8,
        },
    ];
    for s in &waits {
        assert!(
            s.nvshmem_wait().is_some_and(|f| f.starts_with("nvshmemx_")),
            "{s:?}"
        );
    }
    for s in [
        Step::Copy {
            dst: 0,
            src: 0,
            bytes: 8,
        },
        Step::Fork,
        Step::Join,
        Step::Get {
            dst: 0,
            src: 0,
            bytes: 8,
            pe: 1,
        },
    ] {
        assert_eq!(s.nvshmem_wait(), None, "{s:?}");
    }
}

/// The bytes NVSHMEM's step reads and writes: (source, destination), for a team of `n`.
fn nvshmem_ranges(step: &Step, n: usize) -> Option<((u64, u64), (u64, u64))> {
    let span = |a: u64, b: usize| (a, a + b as u64);
    match *step {
        Step::Reduce {
            kind,
            dtype,
            dst,
            src,
            count,
            ..
        } => {
            let b = count * dtype.size();
            let s = match kind {
                Reduction::ReduceScatter => n * b,
                _ => b,
            };
            Some((span(src, s), span(dst, b)))
        }
        Step::Fcollect { dst, src, bytes } => Some((span(src, bytes), span(dst, n * bytes))),
        Step::Alltoall { dst, src, bytes } => Some((span(src, n * bytes), span(dst, n * bytes))),
        Step::Broadcast {
            dst, src, bytes, ..
        } => Some((span(src, bytes), span(dst, bytes))),
        _ => None,
    }
}

/// NVSHMEM 3.4.5's own kernels get overlapping source and destination wrong from 3 PEs up
/// (tools/nvshmem-repro): no plan of an NVSHMEM-based algorithm hands it such a call, for
/// every collective, in place and not, every operator and PE; and every scratch address a
/// plan uses lies inside the scratch it asked for. (A broadcast's root in place, `dst == src`
/// exactly, is the one form NVSHMEM handles itself.)
#[test]
fn nvshmem_is_never_handed_overlapping_buffers() {
    const FAR_DST: u64 = 1 << 36;
    const FAR_SCRATCH: u64 = 1 << 38;
    let algos: [&dyn Algorithm; 3] = [
        &nvshmem::Native,
        &nvshmem::SumThenDiv,
        &nvshmem::ScaleThenSum,
    ];
    let ops = [
        ReduceOp::Sum,
        ReduceOp::Xor,
        ReduceOp::Avg,
        ReduceOp::PreMulSum(2.0),
    ];
    let mut planned = 0;
    for n in [1, 2, 3, 4, 8] {
        for me in 0..n {
            let t = team(n, me, false);
            for coll in Collective::ALL {
                for dtype in [DataType::F32, DataType::I16, DataType::U8] {
                    for op in ops {
                        if op.check_for("t", dtype).is_err() {
                            continue;
                        }
                        for count in [1, 1000, 3 << 19] {
                            for in_place in [false, true] {
                                if in_place && coll == Collective::Alltoall {
                                    continue; // refused before any plan (no in-place form)
                                }
                                let mut c = call(&t, coll, dtype, op, count, in_place, n - 1);
                                // Apart from each other whatever the sizes, as the arrays
                                // and the scratch are.
                                if !in_place {
                                    c.dst.ptr = FAR_DST;
                                }
                                c.scratch = FAR_SCRATCH;
                                for a in algos {
                                    if a.refuses(&c).is_some() {
                                        continue;
                                    }
                                    let mut steps = Vec::new();
                                    a.plan(&c, &mut steps);
                                    planned += 1;
                                    let what = format!(
                                        "{} {coll} {dtype} {op} n={n} me={me} x{count} in place {in_place}",
                                        a.name()
                                    );
                                    let scratch = (FAR_SCRATCH, FAR_SCRATCH + a.scratch(&c) as u64);
                                    for s in &steps {
                                        if let Some(((s0, s1), (d0, d1))) = nvshmem_ranges(s, n) {
                                            let same_broadcast =
                                                matches!(s, Step::Broadcast { .. }) && s0 == d0;
                                            assert!(
                                                same_broadcast || s1 <= d0 || d1 <= s0,
                                                "{what}: {s:?} overlaps"
                                            );
                                        }
                                        let used: Vec<u64> = match s {
                                            Step::Reduce { dst, src, .. }
                                            | Step::Fcollect { dst, src, .. }
                                            | Step::Copy { dst, src, .. } => vec![*dst, *src],
                                            Step::Kernel(Launch::Map { src, dst, .. }) => {
                                                vec![*src, *dst]
                                            }
                                            _ => vec![],
                                        };
                                        for addr in used.into_iter().filter(|&x| x >= FAR_SCRATCH) {
                                            assert!(
                                                addr < scratch.1,
                                                "{what}: {s:?} uses scratch past the {} bytes asked for",
                                                scratch.1 - scratch.0
                                            );
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
    assert!(planned > 1000, "{planned} plans");
}

/// The in-place layouts NVSHMEM's kernels got wrong, as planned on a PE from team index 2 up:
/// reduce-scatter reduces into the scratch and copies its block into place; all-reduce reduces
/// from a copy of its input; fcollect sends a copy of its block.
#[test]
fn in_place_nvshmem_plans_stage_through_the_scratch() {
    let t = team(4, 2, false);
    let el = 4u64;
    let c = call(
        &t,
        Collective::ReduceScatter,
        DataType::I32,
        ReduceOp::Xor,
        4099,
        true,
        0,
    );
    let (name, steps) = plan(&c);
    assert_eq!(name, "nvshmem");
    assert_eq!(
        steps,
        [
            Step::Reduce {
                kind: Reduction::ReduceScatter,
                dtype: DataType::I32,
                op: ReduceOp::Xor,
                dst: SCRATCH,
                src: SRC,
                count: 4099
            },
            Step::Copy {
                dst: SRC + 2 * 4099 * el,
                src: SCRATCH,
                bytes: 4099 * 4
            }
        ]
    );
    assert_eq!(nvshmem::Native.scratch(&c), 4099 * 4);
    // Avg in place: narrowed out of the scratch into this PE's block.
    let c = call(
        &t,
        Collective::ReduceScatter,
        DataType::I32,
        ReduceOp::Avg,
        10,
        true,
        0,
    );
    let (name, steps) = plan(&c);
    assert_eq!(name, "sum_then_div");
    assert!(matches!(
        steps.last(),
        Some(Step::Kernel(Launch::Map { kind: MapKind::Narrow, src: SCRATCH, dst, .. })) if *dst == SRC + 20 * el
    ));
    let c = call(
        &t,
        Collective::AllReduce,
        DataType::I32,
        ReduceOp::Xor,
        1 << 18,
        true,
        0,
    );
    assert_eq!(
        plan(&c).1,
        [
            Step::Copy {
                dst: SCRATCH,
                src: SRC,
                bytes: 1 << 20
            },
            all_reduce(SRC, SCRATCH, DataType::I32, ReduceOp::Xor, 1 << 18)
        ]
    );
    let c = call(
        &t,
        Collective::Fcollect,
        DataType::U8,
        ReduceOp::Sum,
        100,
        true,
        0,
    );
    assert_eq!(
        plan(&c).1,
        [
            Step::Copy {
                dst: SCRATCH,
                src: DST + 200,
                bytes: 100
            },
            Step::Fcollect {
                dst: DST,
                src: SCRATCH,
                bytes: 100
            }
        ]
    );
    assert_eq!(nvshmem::Native.scratch(&c), 100);
    // Out of place nothing is staged.
    let c = call(
        &t,
        Collective::ReduceScatter,
        DataType::I32,
        ReduceOp::Xor,
        4099,
        false,
        0,
    );
    assert_eq!(nvshmem::Native.scratch(&c), 0);
    assert_eq!(plan(&c).1.len(), 1);
}

/// On a peer-mapped team, a reduction NVSHMEM could only take through the scratch (in place,
/// premul_sum all-reduce) runs in this crate's kernels past LL's range, in place, with no
/// scratch; xor included, which those kernels now have. Without peer access it stays on
/// NVSHMEM, staged.
#[test]
fn in_place_reductions_take_the_nvlink_kernels_where_they_can() {
    for (coll, op, in_place) in [
        (Collective::AllReduce, ReduceOp::Sum, true),
        (Collective::AllReduce, ReduceOp::Xor, true),
        (Collective::AllReduce, ReduceOp::PreMulSum(2.0), false),
        (Collective::ReduceScatter, ReduceOp::Xor, true),
        (Collective::Fcollect, ReduceOp::Sum, true),
    ] {
        for me in 0..3 {
            // 64 KiB a PE: past LL's crossover, short of the direct kernels' own range (3 PEs
            // take the conservative rows, where the direct kernels have none).
            let t = team(3, me, true);
            let c = with_channel(call(&t, coll, DataType::I32, op, 16 << 10, in_place, 0));
            let chosen = choose(&c, None).unwrap().name();
            assert_eq!(chosen, "nvlink_direct", "{coll} {op} in place {in_place}");
            // The same call out of place (premul aside) stays on NVSHMEM, but for the bitwise
            // operators, which take the direct kernels past LL on every row (crossover.rs).
            if in_place {
                let c = with_channel(call(&t, coll, DataType::I32, op, 16 << 10, false, 0));
                let want = if op.is_bitwise() {
                    "nvlink_direct"
                } else {
                    "nvshmem"
                };
                assert_eq!(choose(&c, None).unwrap().name(), want, "{coll} {op}");
            }
            let t = team(3, me, false);
            let c = call(&t, coll, DataType::I32, op, 16 << 10, in_place, 0);
            let a = choose(&c, None).unwrap();
            assert!(a.scratch(&c) > 0, "{coll} {op}: {}", a.name());
        }
    }
}

/// The NVLink kernels launch no more blocks than every member keeps resident
/// (`TeamShape::max_blocks`), the same grid on every member: the direct kernels' grid and the
/// LL kernels' grid are capped by it, and LL carries only what that many blocks hold.
#[test]
fn launches_fit_the_blocks_every_member_keeps_resident() {
    let grid_of = |steps: &[Step]| match steps {
        [Step::Kernel(Launch::Nvlink(l))] => (l.function, l.grid),
        s => panic!("{s:?}"),
    };
    for max_blocks in [1, 4, 16, 33, 128, 1000] {
        let mut grids = Vec::new();
        for me in 0..4 {
            let t = team_fitting(4, me, true, max_blocks);
            // 64 MiB a PE: the direct kernels' rule alone would take 128 blocks.
            let c = with_channel(f32_sum(&t, Collective::AllReduce, 16 << 20));
            // Planned by the direct kernels whatever the automatic choice (at 4 PEs, NVSHMEM's
            // path for this size: crossover.rs).
            assert!(nvlink::Direct.refuses(&c).is_none());
            let mut steps = Vec::new();
            nvlink::Direct.plan(&c, &mut steps);
            let (_, grid) = grid_of(&steps);
            assert_eq!(grid, max_blocks.min(128), "max_blocks {max_blocks}");
            // 24 KiB a PE: LL with up to 6 blocks, if that many fit.
            let c = with_channel(f32_sum(&t, Collective::AllReduce, 6 << 10));
            // 4 PEs: 16 blocks a sender (channel::ll_blocks) of 16 KiB payload each.
            let fits = (max_blocks as usize).min(16) * (32 << 10) / 2 >= 24 << 10;
            assert_eq!(
                nvlink::Ll.refuses(&c).is_none(),
                fits,
                "max_blocks {max_blocks}"
            );
            if fits {
                let mut steps = Vec::new();
                nvlink::Ll.plan(&c, &mut steps);
                let (f, grid) = grid_of(&steps);
                assert_eq!(f, "nvr_ll_all_reduce");
                // One block per 2 KiB of the 24 KiB (nvlink::ll_shape).
                assert_eq!(grid, 12.min(max_blocks), "max_blocks {max_blocks}");
                grids.push(grid);
            }
        }
        assert!(grids.windows(2).all(|w| w[0] == w[1]), "{grids:?}");
    }
}

/// What a one-PE call must queue (`local`): the copy of its bytes out of place, nothing in
/// place; the scaling kernel for premul_sum (scale other than 1) and for every fp8 reduction;
/// the quiet for a barrier, but in a job of one PE; nothing for a sync.
fn one_pe_expected(c: &Call) -> Vec<Step> {
    let fp8 = matches!(c.dtype, DataType::F8E4M3 | DataType::F8E5M2);
    let scale = match c.op {
        ReduceOp::PreMulSum(s) if c.coll.reduces() && (s != 1.0 || fp8) => Some(s),
        _ if c.coll.reduces() && fp8 => Some(1.0),
        _ => None,
    };
    match (c.coll, scale) {
        (Collective::Barrier, _) if c.team.alone_in_job => vec![],
        (Collective::Barrier, _) => vec![Step::Quiet],
        (Collective::Sync, _) => vec![],
        (_, Some(factor)) => vec![Step::Kernel(Launch::Map {
            dtype: c.dtype,
            kind: MapKind::Mul,
            src: c.src.ptr,
            dst: c.dst.ptr,
            len: c.count,
            factor,
        })],
        _ if c.in_place => vec![],
        _ => vec![Step::Copy {
            dst: c.dst.ptr,
            src: c.src.ptr,
            bytes: c.count * c.dtype.size(),
        }],
    }
}

#[test]
fn one_pe_calls_cost_one_copy_or_nothing() {
    let ops: Vec<ReduceOp> = ReduceOp::BASIC
        .into_iter()
        .chain([2.0, 1.0, -0.5].map(ReduceOp::PreMulSum))
        .collect();
    let mut planned = 0;
    for (mapped, alone) in [(false, false), (true, false), (true, true)] {
        let mut t = team(1, 0, mapped);
        t.alone_in_job = alone;
        for coll in Collective::ALL {
            let counts: &[usize] = match coll.geometry() {
                Geometry::None => &[0],
                _ => &[1, 1000, 3 << 19, 64 << 20],
            };
            for &dtype in DataType::ALL {
                for &op in &ops {
                    if coll.reduces() && op.check_for("t", dtype).is_err() {
                        continue;
                    }
                    if !coll.reduces() && op != ReduceOp::Sum {
                        continue; // the operator is unused
                    }
                    for &count in counts {
                        for in_place in [false, true] {
                            if in_place && !coll.geometry().has_in_place() {
                                continue;
                            }
                            for channel in [false, true] {
                                let mut c = call(&t, coll, dtype, op, count, in_place, 0);
                                if channel && mapped {
                                    c = with_channel(c);
                                }
                                let what = format!(
                                    "{coll} {dtype} {op} count {count} in place {in_place} \
                                     mapped {mapped} channel {channel} alone {alone}"
                                );
                                let (name, steps) = plan(&c);
                                assert_eq!(name, "local", "{what}");
                                assert_eq!(local::Local.scratch(&c), 0, "{what}");
                                assert_eq!(steps, one_pe_expected(&c), "{what}");
                                if in_place {
                                    assert_eq!(c.src.ptr, c.dst.ptr, "{what}");
                                }
                                // Queued as planned, an empty plan included.
                                let mut rec = Recorder::default();
                                execute(&steps, &mut rec).unwrap();
                                assert_eq!(rec.queued, steps, "{what}");
                                planned += 1;
                            }
                        }
                    }
                }
            }
        }
    }
    assert!(planned > 2000, "{planned}");
}

#[test]
fn every_registry_tries_local_first_and_local_takes_no_other_team() {
    for coll in Collective::ALL {
        assert_eq!(registry(coll)[0].name(), "local", "{coll}");
        assert_eq!(coll.algorithms()[0], "local", "{coll}");
    }
    for n in [2, 3, 8] {
        assert!(!local::Local.takes_team_of(n));
        for mapped in [false, true] {
            let t = team(n, n - 1, mapped);
            for coll in Collective::ALL {
                let count = if coll.geometry() == Geometry::None {
                    0
                } else {
                    16
                };
                for in_place in [false, true] {
                    let c = call(&t, coll, DataType::F32, ReduceOp::Sum, count, in_place, 0);
                    let why = format!("it runs teams of one PE; this team has {n}");
                    assert_eq!(local::Local.refuses(&c), Some(why.clone()), "{coll}");
                    for c in [c.clone(), with_channel(c)] {
                        if let Ok(a) = choose(&c, None) {
                            assert_ne!(a.name(), "local", "{coll} n {n}");
                        }
                        match choose(&c, Some(&local::Local)) {
                            Err(Error::AlgorithmRefused {
                                algorithm: "local",
                                reason,
                                ..
                            }) => assert_eq!(reason, why),
                            other => panic!("{coll} n {n}: {other:?}"),
                        }
                    }
                }
            }
        }
    }
    // A multi-PE call no algorithm accepts names the others' reasons, not local's.
    let t = team(2, 0, false);
    let c = f32_sum(&t, Collective::Gather, 4);
    let e = choose(&c, Some(&nvshmem::Native)).unwrap_err().to_string();
    assert!(e.contains("NVSHMEM has no gather"), "{e}");
}

/// Another algorithm can still be forced on a one-PE team, so that the benchmark compares
/// `local` with NVSHMEM's path and this crate's kernels on one GPU.
#[test]
fn other_algorithms_can_still_be_forced_on_one_pe() {
    let t = team(1, 0, true);
    let c = with_channel(f32_sum(&t, Collective::AllReduce, 2));
    assert_eq!(plan(&c).0, "local");
    let forced = ForcedTable::default();
    forced
        .apply("all_reduce=nvshmem,barrier=nvshmem,broadcast=nvlink_ce")
        .unwrap();
    let a = choose(&c, forced.get(Collective::AllReduce)).unwrap();
    assert_eq!(a.name(), "nvshmem");
    let mut steps = Vec::new();
    a.plan(&c, &mut steps);
    assert_eq!(
        steps,
        [all_reduce(DST, SRC, DataType::F32, ReduceOp::Sum, 2)]
    );
    let b = call(
        &t,
        Collective::Barrier,
        DataType::U8,
        ReduceOp::Sum,
        0,
        false,
        0,
    );
    let a = choose(&b, forced.get(Collective::Barrier)).unwrap();
    let mut steps = Vec::new();
    a.plan(&b, &mut steps);
    assert_eq!(steps, [Step::Barrier { always: false }]);
    for (coll, name) in [
        (Collective::AllReduce, "nvlink_ll"),
        (Collective::AllReduce, "nvlink_direct"),
        (Collective::Broadcast, "nvlink_ce"),
        (Collective::Barrier, "nvlink"),
    ] {
        let count = if coll == Collective::Barrier { 0 } else { 2 };
        let c = with_channel(f32_sum(&t, coll, count));
        assert_eq!(choose(&c, Some(named(coll, name))).unwrap().name(), name);
    }
}

#[test]
fn a_team_made_by_team_init_queues_nvshmem_collectives_only_as_a_last_resort() {
    let sizes = [1usize, 4099, 1 << 22];
    for n in [3usize, 4, 8] {
        let mut t = team(n, 1, true);
        t.nvshmem_collectives = false;
        for coll in Collective::ALL {
            for &count in &sizes {
                for in_place in [false, true] {
                    let c = with_channel(call(
                        &t,
                        coll,
                        DataType::F32,
                        ReduceOp::Sum,
                        count,
                        in_place,
                        0,
                    ));
                    let a = choose(&c, None).unwrap_or_else(|e| panic!("{coll} x{count}: {e}"));
                    let mut steps = Vec::new();
                    a.plan(&c, &mut steps);
                    assert!(
                        !steps.iter().any(Step::uses_nvshmem_collectives),
                        "{coll} x{count} in place {in_place} at {n} PEs took {}: {steps:?}",
                        a.name()
                    );
                }
            }
        }
        // Forced onto NVSHMEM's path, the call is refused, saying why.
        let c = with_channel(f32_sum(&t, Collective::AllReduce, 64));
        match choose(&c, Some(named(Collective::AllReduce, "nvshmem"))) {
            Err(Error::AlgorithmRefused { reason, .. }) => {
                assert!(reason.contains("nvshmemx_team_init"), "{reason}")
            }
            other => panic!("forced nvshmem on a team_init team: {other:?}"),
        }
        // Without a channel, NVSHMEM's path is all that is left: the automatic choice takes it.
        let c = call(
            &t,
            Collective::Barrier,
            DataType::U8,
            ReduceOp::Sum,
            0,
            false,
            0,
        );
        assert_eq!(
            choose(&c, None).map(|a| a.name()).ok(),
            Some("nvshmem"),
            "{n} PEs"
        );
        // The same team as NVSHMEM made it by a split takes NVSHMEM's path for large calls
        // (128 MiB: past the direct kernels' band of the 4-PE sm_90 row too).
        t.nvshmem_collectives = true;
        let c = with_channel(f32_sum(&t, Collective::AllReduce, 1 << 25));
        assert_eq!(
            choose(&c, None).map(|a| a.name()).ok(),
            Some("nvshmem"),
            "{n} PEs"
        );
    }
}

#[test]
fn nvshmem_reductions_forced_where_members_share_a_gpu_are_refused() {
    for n in [2usize, 4, 8] {
        let mut t = team(n, 1, true);
        t.shares_gpu = true;
        for coll in [
            Collective::AllReduce,
            Collective::ReduceScatter,
            Collective::Reduce,
        ] {
            for name in ["nvshmem", "sum_then_div", "scale_then_sum"] {
                let forced = named(coll, name);
                let op = match name {
                    "sum_then_div" => ReduceOp::Avg,
                    "scale_then_sum" => ReduceOp::PreMulSum(0.5),
                    _ => ReduceOp::Sum,
                };
                let c = with_channel(call(&t, coll, DataType::F32, op, 1001, false, 0));
                match choose(&c, Some(forced)) {
                    Err(Error::AlgorithmRefused { reason, .. }) => {
                        assert!(reason.contains("share a GPU"), "{reason}")
                    }
                    other => panic!("{name} forced, {coll} at {n} PEs sharing a GPU: {other:?}"),
                }
                // Members on GPUs of their own: NVSHMEM hands the call to NCCL; accepted.
                let own = team(n, 1, true);
                let c = with_channel(call(&own, coll, DataType::F32, op, 1001, false, 0));
                assert_eq!(choose(&c, Some(forced)).map(|a| a.name()).ok(), Some(name));
            }
            // This crate's reductions are not refused there, peer_kernel's included (it queues
            // NVSHMEM's barriers around its kernel, not its reductions).
            for name in ["peer_kernel", "nvlink_direct"] {
                let forced = named(coll, name);
                let c = with_channel(call(&t, coll, DataType::F32, ReduceOp::Sum, 1001, false, 0));
                assert_eq!(
                    choose(&c, Some(forced)).map(|a| a.name()).ok(),
                    Some(name),
                    "{name} forced, {coll} at {n} PEs sharing a GPU"
                );
            }
        }
        // NVSHMEM's data movement is not refused there.
        let forced = Some(named(Collective::Fcollect, "nvshmem"));
        let c = with_channel(call(
            &t,
            Collective::Fcollect,
            DataType::U8,
            ReduceOp::Sum,
            4096,
            false,
            0,
        ));
        assert_eq!(choose(&c, forced).map(|a| a.name()).ok(), Some("nvshmem"));
    }
}

#[test]
fn members_sharing_a_gpu_take_this_crates_kernels_where_one_accepts() {
    for n in [2usize, 3, 4, 8] {
        let mut t = team(n, 1, true);
        t.shares_gpu = true;
        for coll in Collective::ALL {
            for count in [1usize, 4099, 1 << 24] {
                let c = with_channel(call(
                    &t,
                    coll,
                    DataType::F32,
                    ReduceOp::Sum,
                    count,
                    false,
                    n - 1,
                ));
                let a = choose(&c, None).unwrap_or_else(|e| panic!("{coll} x{count}: {e}"));
                let mut steps = Vec::new();
                a.plan(&c, &mut steps);
                assert!(
                    !steps.iter().any(Step::uses_nvshmem_collectives),
                    "{coll} x{count} at {n} PEs sharing a GPU took {}",
                    a.name()
                );
            }
        }
        // Without a channel only NVSHMEM's path is left: it still runs.
        let c = f32_sum(&t, Collective::AllReduce, 1 << 24);
        assert_eq!(choose(&c, None).map(|a| a.name()).ok(), Some("nvshmem"));
    }
    // Members on GPUs of their own keep the table's choice (NVSHMEM's path at 3 PEs, 64 MiB).
    let t = team(3, 1, true);
    let c = with_channel(f32_sum(&t, Collective::ReduceScatter, 1 << 24));
    assert_eq!(choose(&c, None).map(|a| a.name()).ok(), Some("nvshmem"));
}

/// Every NVLink launch carries its call's fingerprint on a team that checks calls, and the
/// team's own descriptor where it does not; calls that differ in length launch differently.
#[test]
fn nvlink_launches_carry_the_calls_fingerprint() {
    use super::fingerprint::Fingerprint;
    let t = team(2, 0, true);
    let fp_of = |c: &Call| {
        let (_, steps) = plan(c);
        let fps: Vec<[u64; 2]> = steps
            .iter()
            .filter_map(|s| match s {
                Step::Kernel(Launch::Nvlink(l)) => Some(l.team.fp),
                _ => None,
            })
            .collect();
        assert!(!fps.is_empty(), "{steps:?}");
        assert!(fps.iter().all(|f| *f == fps[0]), "{fps:?}");
        fps[0]
    };
    for (coll, count) in [
        (Collective::AllReduce, 2),
        (Collective::AllReduce, 1 << 20),
        (Collective::Broadcast, 64),
        (Collective::Barrier, 0),
    ] {
        let c = with_channel(f32_sum(&t, coll, count));
        let want = Fingerprint::of(&c, 0x1234_5678);
        assert_eq!(fp_of(&c), want.0, "{coll} {count}: {want}");
        assert_eq!(want.tag(), 0x1234_5678);
        if count > 0 {
            let longer = with_channel(f32_sum(&t, coll, count + 1));
            assert_ne!(fp_of(&longer), want.0, "{coll} {count}");
        }
        let mut off = with_channel(f32_sum(&t, coll, count));
        if let Some(d) = off.descriptor.as_mut() {
            d.check = 0;
        }
        assert_eq!(fp_of(&off), [0, 0x1234_5678 << 32], "{coll}: unchecked");
    }
}

/// With NVSHMEM's collectives checked too (check level 2), a plan that queues one on a team
/// with a channel starts with the flag sync carrying the call's fingerprint; at level 1, or
/// for a plan of this crate's kernels alone, nothing is added.
#[test]
fn checking_nvshmem_calls_puts_the_fingerprinted_sync_first() {
    use super::fingerprint::Fingerprint;
    let t = team(2, 0, true);
    for level in [1, 2] {
        let mut c = with_channel(f32_sum(&t, Collective::AllReduce, 1 << 16));
        if let Some(d) = c.descriptor.as_mut() {
            d.check = level;
        }
        let mut steps = Vec::new();
        nvshmem::Native.plan(&c, &mut steps);
        let before = steps.len();
        run::check_nvshmem_first(&c, &mut steps);
        if level == 2 {
            assert_eq!(steps.len(), before + 1);
            assert!(
                matches!(&steps[0], Step::Kernel(Launch::Nvlink(l))
                    if l.function == "nvr_barrier"
                        && l.team.fp == Fingerprint::of(&c, 0x1234_5678).0),
                "{steps:?}"
            );
        } else {
            assert_eq!(steps.len(), before);
        }
        let mut ours = Vec::new();
        nvlink::Direct.plan(&c, &mut ours);
        let n = ours.len();
        run::check_nvshmem_first(&c, &mut ours);
        assert_eq!(ours.len(), n, "this crate's kernels check themselves");
    }
}

/// The reserved scratch in the automatic choice: an algorithm that needs more than is
/// reserved is passed over while another that accepts the call fits, and taken only when none
/// does (the call then fails with ScratchTooSmall); such a choice says the room decided it, so
/// its plan is not kept. A forced algorithm is not passed over.
#[test]
fn the_choice_passes_over_algorithms_that_need_more_scratch_than_is_reserved() {
    let bytes = 1024 * 4;
    for me in 0..3 {
        // Peer-mapped, no channel: NVSHMEM's path (a rooted reduce needs B of scratch) or the
        // peer kernel (none).
        let t = team(3, me, true);
        let mut c = call(
            &t,
            Collective::Reduce,
            DataType::F32,
            ReduceOp::Sum,
            1024,
            false,
            2,
        );
        let chosen = |c: &Call| choice(c, None).map(|(a, room)| (a.name(), room)).unwrap();
        assert_eq!(chosen(&c), ("nvshmem", false), "PE {me}");
        c.room = bytes;
        assert_eq!(chosen(&c), ("nvshmem", false), "PE {me}");
        c.room = bytes - 1;
        assert_eq!(chosen(&c), ("peer_kernel", true), "PE {me}");
        c.room = 0;
        assert_eq!(chosen(&c), ("peer_kernel", true), "PE {me}");
        assert_eq!(peer::PeerKernel.scratch(&c), 0);
        // premul_sum's reduce-scatter alike: scaled into B of scratch, or the peer kernel.
        let mut c = call(
            &t,
            Collective::ReduceScatter,
            DataType::F32,
            ReduceOp::PreMulSum(0.5),
            1024,
            false,
            0,
        );
        c.room = 0;
        assert_eq!(chosen(&c), ("peer_kernel", true), "PE {me}");
        c.room = 3 * bytes;
        assert_eq!(chosen(&c), ("scale_then_sum", false), "PE {me}");
        // Forced: taken whatever the room (the call gets ScratchTooSmall when it runs).
        c.room = 0;
        let forced = Some(named(Collective::ReduceScatter, "scale_then_sum"));
        let (a, room) = choice(&c, forced).unwrap();
        assert_eq!((a.name(), room), ("scale_then_sum", false));
        assert!(a.scratch(&c) > c.room);
        // Not peer-mapped, nothing else accepts: NVSHMEM's path, which needs more.
        let t = team(3, me, false);
        let mut c = call(
            &t,
            Collective::Reduce,
            DataType::F32,
            ReduceOp::Sum,
            1024,
            false,
            2,
        );
        c.room = 0;
        let (a, room) = choice(&c, None).unwrap();
        assert_eq!((a.name(), room), ("nvshmem", true));
        let e = crate::memory::check_scratch(c.name, a.scratch(&c), c.room).unwrap_err();
        assert!(
            matches!(
                e,
                Error::ScratchTooSmall {
                    needed: 4096,
                    reserved: 0,
                    ..
                }
            ),
            "{e:?}"
        );
    }
}

/// On a team the NVLink kernels serve, no call the automatic choice makes needs collective
/// scratch when none is reserved, at any size and team size, in place or not: a program that
/// runs at 8 KiB and at 1 MiB also runs at 64 KiB (where NVSHMEM's path, which avg and
/// premul_sum need scratch on, sits between the kernels' bands).
#[test]
fn without_scratch_every_automatic_choice_fits_at_every_size() {
    let cases = [
        (DataType::I32, ReduceOp::Avg),
        (DataType::U64, ReduceOp::Avg),
        (DataType::F16, ReduceOp::Avg),
        (DataType::F32, ReduceOp::Avg),
        (DataType::F32, ReduceOp::PreMulSum(0.5)),
        (DataType::I8, ReduceOp::PreMulSum(3.0)),
        (DataType::BF16, ReduceOp::Sum),
        (DataType::I64, ReduceOp::Sum),
        (DataType::U16, ReduceOp::Max),
        (DataType::F8E4M3, ReduceOp::Avg),
    ];
    let mut checked = 0;
    for n in [2, 3, 4, 8] {
        for me in [0, n - 1] {
            let t = team(n, me, true);
            for coll in [
                Collective::AllReduce,
                Collective::Reduce,
                Collective::ReduceScatter,
            ] {
                for (dtype, op) in cases {
                    for p in [0, 6, 10, 12, 13, 14, 15, 16, 17, 18, 20] {
                        for count in [(1usize << p) - 1, 1 << p, (1 << p) + 1] {
                            if count == 0 {
                                continue;
                            }
                            for in_place in [false, true] {
                                for arch in [Some(crossover::Arch::SM90), None] {
                                    let mut c =
                                        with_channel(call(&t, coll, dtype, op, count, in_place, 0));
                                    c.arch = arch;
                                    c.room = 0;
                                    let (a, room) = choice(&c, None).unwrap();
                                    assert_eq!(
                                        a.scratch(&c),
                                        0,
                                        "{coll} {dtype} {op} x {count}, n={n}, in place \
                                         {in_place}: {} (room decided: {room})",
                                        a.name()
                                    );
                                    checked += 1;
                                }
                            }
                        }
                    }
                }
            }
        }
    }
    assert!(checked > 10_000, "{checked}");
}

/// The scratch rule does not move a measured choice: with or without scratch, the 2-PE sm_90
/// choices stay those of the crossover table, and no such choice says the room decided it.
#[test]
fn the_room_does_not_change_choices_that_fit() {
    for me in [0, 1] {
        let t = team(2, me, true);
        for (count, want) in [
            (256, "nvlink_ll"),
            (8 << 10, "nvlink_lamport"),
            (12 << 10, "nvlink_lamport"),
            (16 << 10, "nvlink_lamport"),
            (1 << 20, "nvlink_direct"),
        ] {
            let mut c = with_channel(f32_sum(&t, Collective::AllReduce, count));
            for room in [0, usize::MAX] {
                c.room = room;
                let (a, decided) = choice(&c, None).unwrap();
                assert_eq!((a.name(), decided), (want, false), "{count} room {room}");
            }
        }
        // avg between the kernels' bands: the direct kernels (NVSHMEM's path would widen
        // through the scratch), whatever is reserved.
        let mut c = with_channel(call(
            &t,
            Collective::AllReduce,
            DataType::I32,
            ReduceOp::Avg,
            16 << 10,
            false,
            0,
        ));
        for room in [0, usize::MAX] {
            c.room = room;
            assert_eq!(choose(&c, None).unwrap().name(), "nvlink_direct");
        }
    }
}

/// The collectives with buffers (all but barrier and sync), from the library's one list.
pub(crate) fn data_collectives() -> impl Iterator<Item = Collective> {
    Collective::ALL
        .into_iter()
        .filter(|c| c.geometry() != Geometry::None)
}

/// The collectives that move data without reducing it.
fn copies() -> impl Iterator<Item = Collective> {
    data_collectives().filter(|c| !c.reduces())
}

/// The automatic choice for the copies (broadcast, fcollect, alltoall, gather, scatter), one
/// line per team, PE, architecture, resident-block figure, kind of team and placement: the
/// algorithm taken at blocks of 8 B to 1 MiB (powers of two and 1.5 times them), written as
/// runs (`name<=last size`).
fn copy_choices() -> String {
    use crossover::Arch;
    let mut sizes: Vec<usize> = (3..=20).map(|p| 1usize << p).collect();
    sizes.extend((3..20).map(|p| 3usize << (p - 1)));
    sizes.sort_unstable();
    let mut out = String::new();
    for coll in copies() {
        for n in [2, 3, 4, 8] {
            for me in [0, 1] {
                for arch in [Some(Arch::SM90), None] {
                    for max_blocks in [128, 16, 4, 2, 1] {
                        for kind in ["plain", "shares_gpu", "team_init"] {
                            for in_place in [false, true] {
                                let mut t = team_fitting(n, me, true, max_blocks);
                                t.shares_gpu = kind == "shares_gpu";
                                t.nvshmem_collectives = kind != "team_init";
                                let mut runs: Vec<(&str, usize)> = Vec::new();
                                for &x in &sizes {
                                    let mut c = with_channel(call(
                                        &t,
                                        coll,
                                        DataType::U8,
                                        ReduceOp::Sum,
                                        x,
                                        in_place,
                                        0,
                                    ));
                                    c.arch = arch;
                                    let a = choose(&c, None).map_or("-", |a| a.name());
                                    match runs.last_mut() {
                                        Some((name, last)) if *name == a => *last = x,
                                        _ => runs.push((a, x)),
                                    }
                                }
                                let arch = arch.map_or("any".to_string(), |a| a.to_string());
                                let place = if in_place { "in" } else { "out" };
                                let runs: Vec<String> =
                                    runs.iter().map(|(a, x)| format!("{a}<={x}")).collect();
                                out += &format!(
                                    "{coll} n{n} pe{me} {arch} mb{max_blocks} {kind} {place}: {}\n",
                                    runs.join(" ")
                                );
                            }
                        }
                    }
                }
            }
        }
    }
    out
}

/// The automatic choice of a copy from 8 B to 1 MiB is the one recorded in
/// `testdata/copy_choices.txt`: written before the LL channel grew (issue 31: up to 32 LL
/// blocks, 32 KiB regions), which changed none, then rewritten for the measured LL band of the
/// 2-PE sm_90 rows, and for 2-PE blocks taking both of their regions (LL's capacity doubled:
/// where members keep fewer than 32 blocks resident, LL now reaches the band instead of handing
/// its upper half to NVSHMEM or the copy engines), then for 2-PE teams of 64 blocks of one
/// region each (`channel::ll_blocks`: 2026-11-28; where members keep fewer than 64 blocks
/// resident LL carries half of what it did, only the `mb1`-`mb16` rows of 2 PEs changed),
/// then for scatter's Lamport band from 192 KiB blocks (LAMPORT_HEADER_RUN: only the 2-PE sm_90
/// scatter rows changed), then for every copy's Lamport band moved down after the batch of one
/// line (LAMPORT_BATCH_RUN: only 2-PE sm_90 rows changed) (`WRITE_COPY_CHOICES=1` rewrites it, for a
/// deliberate change of the crossover table; review its diff).
#[test]
fn the_copies_choose_as_recorded() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("src/collective/algo/testdata/copy_choices.txt");
    let now = copy_choices();
    if std::env::var_os("WRITE_COPY_CHOICES").is_some_and(|v| v == "1") {
        std::fs::write(&path, &now).unwrap();
    }
    let before = std::fs::read_to_string(&path).unwrap();
    for (a, b) in before.lines().zip(now.lines()) {
        assert_eq!(b, a, "the automatic choice changed");
    }
    assert_eq!(before.lines().count(), now.lines().count());
}

/// Forced, LL runs the copies through the mid band on 2 PEs (issue 31): up to 1 MiB a pair
/// with 64 blocks (one region each: `channel::ll_blocks`; 32 blocks of two regions before
/// 2026-11-28), refused
/// past it with the capacity named; the automatic choice takes it where the crossover table's
/// LL band says so (`the_copies_choose_as_recorded`).
#[test]
fn forced_ll_carries_the_copies_up_to_1_mib_a_pair() {
    for coll in copies() {
        for me in [0, 1] {
            let t = team(2, me, true);
            for x in [64 << 10, 128 << 10, 256 << 10, 512 << 10, 1 << 20] {
                let c = with_channel(f32_sum(&t, coll, x / 4));
                let a = choose(&c, Some(&nvlink::Ll)).unwrap_or_else(|e| panic!("{coll} {x}: {e}"));
                let mut steps = Vec::new();
                a.plan(&c, &mut steps);
                match &steps[..] {
                    [Step::Kernel(Launch::Nvlink(l))] => {
                        // fcollect and alltoall: their peer-lane kernels, a lane a peer. 64
                        // blocks, one per KiB up to 64 KiB, so 128 packets a block at 64 KiB
                        // (128 threads a lane, and the flag warp), 256 at 128 KiB.
                        let peer_lanes =
                            matches!(coll, Collective::Fcollect | Collective::Alltoall);
                        let kernel = if peer_lanes { "_peers" } else { "" };
                        assert_eq!(l.function, format!("nvr_ll_{}{kernel}", coll.name()));
                        let lanes = if peer_lanes { 1 } else { 2 };
                        let block = ((x / 8 / 64) * lanes + 32).min(512) as u32;
                        let grid = 64;
                        assert_eq!((l.grid, l.block), (grid, block), "{coll} {x}");
                    }
                    s => panic!("{s:?}"),
                }
                // The automatic choice takes it where the crossover table's LL band holds and
                // its Lamport band does not.
                assert_eq!(
                    choose(&c, None).unwrap().name() == "nvlink_ll",
                    x <= crossover::ll_limit(&c) && !crossover::lamport(&c),
                    "{coll} {x}"
                );
            }
            let c = with_channel(call(
                &t,
                coll,
                DataType::U8,
                ReduceOp::Sum,
                (1 << 20) + 1,
                false,
                0,
            ));
            let why = nvlink::Ll.refuses(&c).expect("past the capacity");
            assert!(why.contains("at most 1048576 bytes a PE"), "{why}");
            assert!(choose(&c, Some(&nvlink::Ll)).is_err());
        }
    }
}

/// LL gives way to the Lamport kernel only where that prefers and accepts the call: a float
/// reduction in Lamport's band on a 2-PE sm_90 team (shared GPU or not), not an integer one,
/// not where the runtime has no Lamport buffers; and where nothing prefers a call (a shared
/// GPU's team of 3, past LL's limit) the fallback is LL, as before Lamport's band moved down.
#[test]
fn ll_gives_way_to_lamport_only_where_lamport_takes_the_call() {
    let chosen = |c: &Call| choose(c, None).unwrap().name();
    for shares_gpu in [false, true] {
        let mut t = team(2, 0, true);
        t.shares_gpu = shares_gpu;
        let c = with_channel(f32_sum(&t, Collective::AllReduce, 4 << 10));
        assert_eq!(chosen(&c), "nvlink_lamport", "shares_gpu {shares_gpu}");
        let i = with_channel(call(
            &t,
            Collective::AllReduce,
            DataType::I32,
            ReduceOp::Sum,
            4 << 10,
            false,
            0,
        ));
        assert_eq!(chosen(&i), "nvlink_ll");
        let mut none = with_channel(f32_sum(&t, Collective::AllReduce, 4 << 10));
        none.descriptor.as_mut().unwrap().lam_bytes = 0;
        assert_eq!(chosen(&none), "nvlink_ll");
        // 1 KiB blocks stay LL's.
        assert_eq!(
            chosen(&with_channel(f32_sum(&t, Collective::AllReduce, 256))),
            "nvlink_ll"
        );
    }
    // Where nothing prefers the call (16 KiB on 3 PEs, past the conservative LL limit), a team
    // sharing a GPU falls back to the first of its own kernels that accepts it: LL.
    let mut t = team(3, 0, true);
    t.shares_gpu = true;
    let c = with_channel(f32_sum(&t, Collective::AllReduce, 4 << 10));
    assert_eq!(chosen(&c), "nvlink_ll");
}
