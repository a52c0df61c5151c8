//! `nvlink_lamport`: one-shot float reductions and copies for the mid band (about 64 KiB to 2
//! MiB a PE) through sentinel-filled receive buffers (`kernels/lamport.cu`, whose header gives
//! the protocol and the argument for its three rotating buffers).
//!
//! Every PE stores what each peer needs of its input (all_reduce: all of it; reduce_scatter:
//! the peer's block; reduce: all of it, to the root only), 16 bytes at a time, into a receive
//! buffer in that peer's channel that holds the sentinel `0x80000000` in every 32-bit word, and
//! polls its own buffers until no word is the sentinel: the data is its own flag, so a call is
//! one NVLink crossing and a launch, with no barrier and no flag per vector. The price is
//! memory: each channel holds a *Lamport area* after its LL regions, three buffers of `n - 1`
//! slots, sized by [`RuntimeBuilder::lamport_bytes`] (by default 2-PE calls up to 2 MiB,
//! `channel::lamport::DEFAULT_MAX`, less on a heap too small for that: `default_max`).
//!
//! [`RuntimeBuilder::lamport_bytes`]: crate::RuntimeBuilder::lamport_bytes
//!
//! The copies (broadcast, fcollect, alltoall, gather, scatter) move any type: their bytes may
//! hold the sentinel, so every line of 32 vectors carries a mask packet naming the words whose
//! data is the sentinel itself (`lamport.cu`, COPIES), 16 bytes a 512, and LL's half payload
//! becomes full payload at one crossing.
//!
//! What it refuses: barrier and sync; reductions of integers and bool (every bit pattern is a
//! value, so there is no sentinel) and f64 (its words take any value); calls larger than a slot
//! ([`copy_need`] for a copy); teams that are not peer-mapped or got no channel.
//!
//! The reductions' semantics differ from the other algorithms in one point (the copies' do
//! not: they are bit for bit): every member's -0.0 is read as +0.0 (a sender must never send
//! the sentinel, and the receiver reads its own input alike so that every PE gets the same
//! bits), so the sign of a zero result may differ (a sum of -0.0s is +0.0 here, as is a product
//! with a -0.0 factor); every other value is the same.
use super::nvlink::{fingerprinted, kernel_step, premul_scale, team_view};
use super::{crossover, Algorithm, Call, Collective, Step};
use crate::channel::lamport::slot_bytes;
use crate::kernels::{self, NvlinkArgs, NvlinkSource};

/// The most blocks of a launch (`NVR_LAM_MAX_GRID`): every block publishes and checks the
/// call's fingerprint (`NVR_FP_BLOCKS`).
const MAX_GRID: usize = 128;
const _: () = assert!(MAX_GRID <= crate::channel::FP_BLOCKS);
/// Payload bytes per block of the launch rule: one block for every 2 KiB (or part of it).
/// Measured on 2 x H200 in a CUDA graph (2026-11-27, all-reduce f32, before the control warp):
/// 64 KiB took 4.21 us with 2 KiB a block against 4.52 with 8 KiB, 256 KiB 4.88 against 5.13;
/// 4 KiB fell between.
const BYTES_PER_BLOCK: usize = 2 << 10;

/// The launch rule of `lamport.cu` for `x` payload bytes per (sender, receiver) pair on a team
/// whose members keep `max_blocks` blocks resident: one block per [`BYTES_PER_BLOCK`], at most
/// [`MAX_GRID`] and `max_blocks`; a thread per vector of the block (a multiple of 32, at most
/// 512, which then loop: 1 MiB over 128 blocks is one vector a thread) and the control warp,
/// which moves no data (`lamport.cu`, "CONTROL WARP"). The same grid on every member.
pub(crate) fn shape(x: usize, max_blocks: u32) -> (u32, u32) {
    let most = (max_blocks as usize).clamp(1, MAX_GRID);
    let grid = x.div_ceil(BYTES_PER_BLOCK).clamp(1, most);
    let vectors_per_block = x.div_ceil(16).div_ceil(grid);
    let data = vectors_per_block.next_multiple_of(32).clamp(32, 512);
    (grid as u32, data as u32 + 32)
}

/// Bytes of a slot that a copy of `x` bytes a pair uses (`nvr_lamc_need`): its 16-byte
/// vectors, then one 16-byte mask packet for each line of 32 of them. Saturating: a block
/// near the largest span needs more than any slot holds, and is refused as such.
pub(crate) fn copy_need(x: usize) -> usize {
    let vectors = x.div_ceil(16);
    vectors
        .saturating_add(vectors.div_ceil(32))
        .saturating_mul(16)
}

/// Bytes of a slot that `call` uses: its block rounded up to 16 bytes for a reduction, and
/// [`copy_need`] for a copy (saturating alike).
fn slot_need(call: &Call) -> usize {
    if call.coll.reduces() {
        call.block_bytes()
            .checked_next_multiple_of(16)
            .unwrap_or(usize::MAX)
    } else {
        copy_need(call.block_bytes())
    }
}

/// Lamport one-shot reductions and copies.
pub(super) struct Lamport;

impl Algorithm for Lamport {
    fn name(&self) -> &'static str {
        "nvlink_lamport"
    }

    fn takes_team_of(&self, n: usize) -> bool {
        n >= 2
    }

    fn refuses(&self, call: &Call) -> Option<String> {
        if matches!(call.coll, Collective::Barrier | Collective::Sync) {
            return Some(format!("it moves data; it has no {}", call.coll));
        }
        if call.n() < 2 {
            return Some("it needs a team of at least 2 PEs".to_string());
        }
        if call.coll.reduces() && !kernels::lamport_serves(call.dtype) {
            return Some(format!(
                "it needs a float type of at most 32 bits, whose -0.0 can stand in for \
                 'not yet written'; {} has no such value",
                call.dtype
            ));
        }
        let team = match team_view(call) {
            Ok(t) => t,
            Err(why) => return Some(why),
        };
        let slot = slot_bytes(team.lam_bytes as usize, call.n());
        if slot == 0 {
            return Some(
                "the runtime has no Lamport buffers (RuntimeBuilder::lamport_bytes, or a heap \
                 too small for the default)"
                    .to_string(),
            );
        }
        if slot_need(call) > slot {
            return Some(format!(
                "its buffers hold {slot} bytes a PE on a team of {}; the call needs {} for {}",
                call.n(),
                slot_need(call),
                call.block_bytes()
            ));
        }
        None
    }

    fn weighed(&self, call: &Call) -> bool {
        // A copy only in its measured band: elsewhere the copies' order (LL, then the copy
        // engines and the direct kernels) stays the fallback it was.
        call.coll.reduces() || crossover::lamport(call)
    }

    fn prefers(&self, call: &Call) -> bool {
        crossover::lamport(call)
    }

    fn plan(&self, call: &Call, steps: &mut Vec<Step>) {
        let team = fingerprinted(call);
        let slot = slot_bytes(team.lam_bytes as usize, call.n()) as u64;
        let (grid, block) = shape(call.block_bytes(), call.team.max_blocks);
        let root = call.coll.is_rooted().then_some(call.root as i32);
        let args = if call.coll.reduces() {
            NvlinkArgs::Lamport {
                root,
                src: call.src.ptr,
                dst: call.dst.ptr,
                count: call.count as u64,
                scale: premul_scale(call),
                slot,
            }
        } else {
            NvlinkArgs::LamportMove {
                root,
                src: call.src.ptr,
                dst: call.dst.ptr,
                bytes: call.block_bytes() as u64,
                slot,
            }
        };
        steps.push(kernel_step(
            call,
            NvlinkSource::Lamport,
            call.coll.name(),
            team,
            grid,
            block,
            args,
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::channel::lamport::{
        area_bytes, default_max, DEFAULT_MAX, HEADER, MAX_SLOT, SENTINEL, SMALLEST_MAX,
    };
    use crate::{
        collective::algo::tests::{call, team, with_channel},
        DataType, ReduceOp,
    };

    /// Why `nvlink_lamport` refuses a call of `count` elements on PE 0 of `n` with a channel
    /// whose Lamport area holds 2-PE calls of `max` bytes.
    fn refusal(
        coll: Collective,
        n: usize,
        dtype: DataType,
        op: ReduceOp,
        count: usize,
        max: usize,
    ) -> Option<String> {
        let t = team(n, 0, true);
        let mut c = with_channel(call(&t, coll, dtype, op, count, false, 0));
        c.descriptor.as_mut().unwrap().lam_bytes = area_bytes(max) as u64;
        Lamport.refuses(&c)
    }

    #[test]
    fn it_refuses_integer_and_f64_reductions_and_calls_past_its_buffers() {
        use Collective::*;
        let m = DEFAULT_MAX;
        for coll in [AllReduce, ReduceScatter, Reduce] {
            for t in [
                DataType::F32,
                DataType::F16,
                DataType::BF16,
                DataType::F8E4M3,
                DataType::F8E5M2,
            ] {
                for op in [
                    ReduceOp::Sum,
                    ReduceOp::Max,
                    ReduceOp::Avg,
                    ReduceOp::PreMulSum(0.5),
                ] {
                    assert_eq!(refusal(coll, 2, t, op, 1000, m), None, "{coll} {t} {op}");
                }
            }
            for t in [DataType::I32, DataType::U8, DataType::Bool8, DataType::F64] {
                let why = refusal(coll, 2, t, ReduceOp::Max, 1000, m).unwrap();
                assert!(why.contains("float type of at most 32 bits"), "{why}");
            }
        }
        // Copies move any type; a slot holds their vectors and a mask packet every 32.
        for coll in [Broadcast, Fcollect, Alltoall, Gather, Scatter] {
            for t in [DataType::U8, DataType::F64, DataType::Bool8, DataType::F32] {
                assert_eq!(
                    refusal(coll, 2, t, ReduceOp::Sum, 1000, m),
                    None,
                    "{coll} {t}"
                );
            }
            let why = refusal(coll, 2, DataType::U8, ReduceOp::Sum, m, m).unwrap();
            assert!(
                why.contains("hold 2097152 bytes a PE on a team of 2; the call needs 2162688"),
                "{why}"
            );
            let most = m / 33 * 32;
            assert_eq!(copy_need(most), m);
            assert_eq!(refusal(coll, 2, DataType::U8, ReduceOp::Sum, most, m), None);
            assert!(refusal(coll, 2, DataType::U8, ReduceOp::Sum, most + 1, m).is_some());
        }
        // 2 MiB a PE fits the default on 2 PEs, one element more does not; on 4 PEs a third.
        let f32s = m / 4;
        assert_eq!(
            refusal(AllReduce, 2, DataType::F32, ReduceOp::Sum, f32s, m),
            None
        );
        let why = refusal(AllReduce, 2, DataType::F32, ReduceOp::Sum, f32s + 1, m).unwrap();
        assert!(
            why.contains("hold 2097152 bytes a PE on a team of 2"),
            "{why}"
        );
        assert!(refusal(AllReduce, 4, DataType::F32, ReduceOp::Sum, f32s / 2, m).is_some());
        assert_eq!(
            refusal(AllReduce, 4, DataType::F32, ReduceOp::Sum, f32s / 3 - 4, m),
            None
        );
        // A runtime without areas.
        let why = refusal(AllReduce, 2, DataType::F32, ReduceOp::Sum, 8, 0).unwrap();
        assert!(why.contains("no Lamport buffers"), "{why}");
        // One PE: the local algorithm's; and not peer-mapped: no channel.
        assert!(!Lamport.takes_team_of(1));
        assert!(refusal(AllReduce, 1, DataType::F32, ReduceOp::Sum, 8, m).is_some());
        let t = team(2, 0, false);
        let c = call(&t, AllReduce, DataType::F32, ReduceOp::Sum, 8, false, 0);
        assert!(Lamport
            .refuses(&c)
            .unwrap()
            .contains("reachable by load and store"));
    }

    #[test]
    fn forced_by_name_it_runs_or_says_why() {
        use crate::collective::algo::{choose, ForcedTable};
        let forced = ForcedTable::default();
        forced
            .apply("all_reduce=nvlink_lamport,reduce=nvlink_lamport")
            .unwrap();
        assert_eq!(
            forced.get(Collective::Reduce).unwrap().name(),
            "nvlink_lamport"
        );
        forced.apply("broadcast=nvlink_lamport").unwrap();
        assert!(forced.apply("barrier=nvlink_lamport").is_err());
        let a = forced.get(Collective::AllReduce).expect("forced by name");
        assert_eq!(a.name(), "nvlink_lamport");
        let t = team(2, 0, true);
        let c = with_channel(call(
            &t,
            Collective::AllReduce,
            DataType::BF16,
            ReduceOp::Sum,
            9,
            false,
            0,
        ));
        assert_eq!(choose(&c, Some(a)).unwrap().name(), "nvlink_lamport");
        let c = with_channel(call(
            &t,
            Collective::AllReduce,
            DataType::I32,
            ReduceOp::Sum,
            9,
            false,
            0,
        ));
        match choose(&c, Some(a)) {
            Err(crate::Error::AlgorithmRefused {
                algorithm, reason, ..
            }) => {
                assert_eq!(algorithm, "nvlink_lamport");
                assert!(reason.contains("float type"), "{reason}");
            }
            other => panic!("{other:?}"),
        }
        assert!(Collective::ReduceScatter
            .algorithms()
            .contains(&"nvlink_lamport"));
        assert!(Collective::Broadcast
            .algorithms()
            .contains(&"nvlink_lamport"));
        assert!(!Collective::Sync.algorithms().contains(&"nvlink_lamport"));
    }

    /// The one launch of `nvlink_lamport`'s plan for `c`.
    fn the_launch(c: &Call) -> crate::kernels::NvlinkLaunch {
        use crate::kernels::Launch;
        let mut steps = Vec::new();
        Lamport.plan(c, &mut steps);
        match steps.pop() {
            Some(Step::Kernel(Launch::Nvlink(l))) if steps.is_empty() => l,
            other => panic!("{other:?} after {steps:?}"),
        }
    }

    #[test]
    fn its_plan_is_one_launch_with_the_slot_and_the_root() {
        use crate::kernels::{KernelKey, NvlinkArgs, NvlinkSource};
        let t = team(2, 1, true);
        for (coll, function, root) in [
            (Collective::AllReduce, "nvr_lamport_all_reduce", None),
            (
                Collective::ReduceScatter,
                "nvr_lamport_reduce_scatter",
                None,
            ),
            (Collective::Reduce, "nvr_lamport_reduce", Some(1)),
        ] {
            let c = with_channel(call(
                &t,
                coll,
                DataType::F16,
                ReduceOp::PreMulSum(0.25),
                32768,
                false,
                1,
            ));
            let l = the_launch(&c);
            assert_eq!(l.function, function);
            assert_eq!(
                l.key,
                KernelKey::Nvlink(
                    NvlinkSource::Lamport,
                    Some((DataType::F16, ReduceOp::PreMulSum(1.0)))
                )
            );
            assert_ne!(
                l.key,
                KernelKey::Nvlink(
                    NvlinkSource::Ll,
                    Some((DataType::F16, ReduceOp::PreMulSum(1.0)))
                )
            );
            assert_eq!((l.grid, l.block), shape(65536, t.max_blocks));
            // The call's fingerprint rides in the descriptor, as every NVLink launch's.
            assert_ne!(l.team.fp[0], 0);
            assert_eq!(
                l.args,
                NvlinkArgs::Lamport {
                    root,
                    src: c.src.ptr,
                    dst: c.dst.ptr,
                    count: 32768,
                    scale: 0.25,
                    slot: DEFAULT_MAX as u64,
                }
            );
        }
    }

    #[test]
    fn a_copy_plans_its_type_free_kernel_with_the_bytes_and_the_slot() {
        use crate::kernels::{KernelKey, NvlinkArgs, NvlinkSource};
        let t = team(2, 1, true);
        for (coll, function, root) in [
            (Collective::Broadcast, "nvr_lamport_broadcast", Some(1)),
            (Collective::Fcollect, "nvr_lamport_fcollect", None),
            (Collective::Alltoall, "nvr_lamport_alltoall", None),
            (Collective::Gather, "nvr_lamport_gather", Some(1)),
            (Collective::Scatter, "nvr_lamport_scatter", Some(1)),
        ] {
            let c = with_channel(call(
                &t,
                coll,
                DataType::U8,
                ReduceOp::Sum,
                100_001,
                false,
                1,
            ));
            let l = the_launch(&c);
            assert_eq!(l.function, function);
            assert_eq!(l.key, KernelKey::Nvlink(NvlinkSource::Lamport, None));
            assert_eq!((l.grid, l.block), shape(100_001, t.max_blocks));
            assert_eq!(
                l.args,
                NvlinkArgs::LamportMove {
                    root,
                    src: c.src.ptr,
                    dst: c.dst.ptr,
                    bytes: 100_001,
                    slot: DEFAULT_MAX as u64,
                }
            );
        }
        // 6251 vectors and 196 mask packets.
        assert_eq!(copy_need(100_001), 16 * (6251 + 196));
        assert_eq!(copy_need(0), 0);
        assert_eq!(copy_need(512), 16 * 33);
    }

    #[test]
    fn areas_hold_three_buffers_of_n_minus_one_slots() {
        assert_eq!(area_bytes(0), 0);
        assert_eq!(area_bytes(DEFAULT_MAX), 256 + 6 * (1 << 20));
        assert_eq!(area_bytes(17), 256 + 3 * 32);
        let a = area_bytes(DEFAULT_MAX);
        assert_eq!(slot_bytes(a, 2), DEFAULT_MAX);
        // Three peers share it: a third each, rounded down to 16 bytes.
        assert_eq!(slot_bytes(a, 4), ((2 << 20) / 3) & !15);
        assert_eq!(slot_bytes(a, 8) % 16, 0);
        assert!(256 + 3 * 7 * slot_bytes(a, 8) <= a);
        assert_eq!(slot_bytes(a, 1), 0);
        assert_eq!(slot_bytes(0, 2), 0);
        assert_eq!(slot_bytes(HEADER, 2), 0);
    }

    #[test]
    fn a_slot_never_outgrows_the_kernels_32_bit_indices() {
        assert_eq!(MAX_SLOT, kernels::lamport_define("NVR_LAM_MAX_BYTES"));
        assert_eq!(HEADER, kernels::lamport_define("NVR_LAM_HEADER"));
        assert_eq!(
            SENTINEL as usize,
            kernels::lamport_define("NVR_LAM_SENTINEL")
        );
        // An area of 4 GiB a buffer on a pair: its slots stop at MAX_SLOT.
        assert_eq!(slot_bytes(area_bytes(4 << 30), 2), MAX_SLOT);
        assert_eq!(slot_bytes(area_bytes(MAX_SLOT), 2), MAX_SLOT);
        assert_eq!(slot_bytes(area_bytes(MAX_SLOT - 16), 2), MAX_SLOT - 16);
    }

    #[test]
    fn the_default_fits_2_mib_on_a_default_heap_and_shrinks_on_small_ones() {
        assert_eq!(
            default_max(crate::runtime::DEFAULT_HEAP_SIZE, 8),
            DEFAULT_MAX
        );
        // 256 MiB, 7 channels: 16 MiB of areas, about 2.3 MiB each.
        let m = default_max(256 << 20, 7);
        assert!((SMALLEST_MAX..DEFAULT_MAX).contains(&m), "{m}");
        assert!(7 * area_bytes(m) <= (256 << 20) / 16);
        assert_eq!(m % (16 << 10), 0);
        // 16 MiB, one channel: 1 MiB for areas holds 2-PE calls of 336 KiB.
        assert_eq!(default_max(16 << 20, 1), 336 << 10);
        // 2 MiB: 128 KiB for areas, under 64 KiB a call: none.
        assert_eq!(default_max(2 << 20, 1), 0);
    }

    /// The host's constants are `lamport.cu`'s.
    #[test]
    fn the_constants_match_lamport_cu() {
        use crate::kernels::{KernelKey, NvlinkSource};
        let key = KernelKey::Nvlink(NvlinkSource::Lamport, Some((DataType::F32, ReduceOp::Sum)));
        let src = key.source();
        assert!(src.contains(&format!("#define NVR_LAM_HEADER {HEADER}ull\n")));
        assert!(src.contains(&format!("#define NVR_LAM_SENTINEL {SENTINEL:#x}u\n")));
        assert!(src.contains("#define NVR_LAM_MAX_GRID NVR_FP_BLOCKS\n"));
        assert_eq!(MAX_GRID, crate::channel::FP_BLOCKS);
    }

    #[test]
    fn the_launch_rule() {
        assert_eq!(shape(64 << 10, 128), (32, 160));
        assert_eq!(shape(1 << 20, 128), (128, 544));
        assert_eq!(shape(2 << 20, 128), (128, 544));
        // Fewer vectors than threads: fewer threads, never under two warps.
        assert_eq!(shape(16, 128), (1, 64));
        assert_eq!(shape(0, 128), (1, 64));
        assert_eq!(shape(100 << 10, 128), (50, 160));
        // Only as many blocks as every member keeps resident.
        assert_eq!(shape(1 << 20, 16), (16, 544));
        assert_eq!(shape(1 << 20, 0), (1, 544));
    }
}
