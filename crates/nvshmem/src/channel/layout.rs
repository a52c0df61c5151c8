//! The layout of a channel: the symmetric memory this crate's NVLink kernels keep their
//! epochs, flags and packets in (`kernels/PROTOCOL.md`). Each team that uses the kernels holds
//! one, chosen when the team is made (`lane.rs` says how), so collectives of different
//! teams never share one, and the calls of one team take turns on it.
#[cfg(test)]
use crate::kernels::TeamDescriptor;

/// The most team members the fast path serves (`NVR_MAX_TEAM`), as the kernels' ABI defines it.
pub(crate) use crate::kernels::MAX_TEAM;
/// Per-block flag words (`NVR_MAX_BLOCKS`).
pub(super) const MAX_BLOCKS: usize = 512;
/// The most blocks an LL launch may have (`NVR_LL_BLOCKS`): those of a 2-PE team, whose one
/// sender a receiver takes all [`LL_REGIONS`].
pub(crate) const LL_BLOCKS: usize = 64;
/// LL regions per epoch parity (`NVR_LL_REGIONS`), shared out among a team's senders.
pub(crate) const LL_REGIONS: usize = 64;
/// Blocks that publish call fingerprints (`NVR_FP_BLOCKS`).
pub(crate) const FP_BLOCKS: usize = 128;
/// Bytes of the header: epochs, arrive and depart flags, then the fingerprint slots (two
/// parities of `FP_BLOCKS` x `MAX_TEAM` slots of 32 bytes).
const HEADER: usize = 4 * MAX_BLOCKS * (1 + 2 * MAX_TEAM) + 2 * FP_BLOCKS * MAX_TEAM * 32;

/// The most channels a runtime has (one bit each in the masks a new team's members AND
/// together, `lane.rs`).
pub(crate) const MAX_CHANNELS: usize = 64;

/// The most blocks an LL launch on a team of `n` may have (`nvr_ll_blocks`), one region of
/// `ll_bytes` a block: each parity's [`LL_REGIONS`] regions shared out among the senders. On 2
/// PEs a receiver has one sender, which takes all 64 (a lone PE, which sends nothing, launches
/// as many); larger teams index regions by sender, `n` of them, so that a PE's own index is
/// never written in its channel: 21 for 3, 16 for 4, 12, 10, 9 and 8 for 5 to 8.
///
/// Until 2026-11-28 a 2-PE block took two regions as one, 32 blocks of 64 KiB: the same 1 MiB
/// of payload a pair, but 64 blocks move 256 KiB-1 MiB 5-10 % faster (more SMs storing and
/// polling; `docs/performance.md`, "Sixty-four blocks on two PEs"). 128 blocks of half a region
/// were measured too: faster for some copies at 512 KiB-1 MiB, slower at 256 KiB. Where members
/// keep fewer than 64 blocks resident, a 2-PE team now carries half of what it did.
pub(crate) fn ll_blocks(n: usize) -> usize {
    if n <= 2 {
        LL_BLOCKS
    } else {
        LL_REGIONS / n.min(MAX_TEAM)
    }
}

/// Bytes of one channel with LL regions of `ll_bytes` (`nvr_chan_bytes`).
pub(crate) fn chan_bytes(ll_bytes: usize) -> usize {
    HEADER + 2 * LL_REGIONS * ll_bytes
}

/// Bytes of one LL region by default: 16 KiB of payload a block, so a 4-PE team's 16 blocks
/// carry 256 KiB a pair, and a 2-PE team's 64 blocks ([`ll_blocks`]) 1 MiB (issue 31: LL
/// one-shot copies through the mid band).
///
/// What a channel costs: the header, 100,352 bytes (epochs and flags 34,816, fingerprint slots
/// 65,536), then the LL area, `2 x LL_REGIONS x ll_bytes` = 2 x 64 x 32 KiB = 4 MiB: 4.1 MiB a
/// channel (2.1 MiB with the 16 KiB regions before), then its Lamport area (6 MiB by default).
/// On NVSHMEM's default heap (1 GiB) a sixteenth holds 15 channels, so a runtime keeps its 8
/// (`Sizing::for_heap`), 81 MiB with their Lamport areas (65 MiB before); fewer than 8 only on
/// heaps under about 525 MiB (270 MiB before). Regions for `LL_BLOCKS` blocks of every one of
/// `MAX_TEAM` senders, whatever the team's size, would have cost 2 x 8 x 32 x 32 KiB = 16 MiB a
/// channel, and 3 channels on the default heap: hence the regions shared out by team size
/// ([`ll_blocks`]).
pub(crate) const DEFAULT_LL_BYTES: usize = 32 << 10;

/// How the fast path is sized: the channel count ([`crate::RuntimeBuilder::channels`], else
/// the heap's default) and the bytes of an LL region ([`DEFAULT_LL_BYTES`]; no setting
/// changes it).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Sizing {
    pub(crate) channels: usize,
    pub(crate) ll_bytes: usize,
}

impl Sizing {
    /// Within the limits: at most [`MAX_CHANNELS`] channels, LL regions a multiple of 16 bytes.
    pub(crate) fn checked(self) -> Self {
        Sizing {
            channels: self.channels.min(MAX_CHANNELS),
            ll_bytes: self.ll_bytes.next_multiple_of(16),
        }
    }

    /// The default for a heap of `heap_size` bytes: 8 channels, fewer on a small heap (at
    /// most a sixteenth of it, at least one).
    pub(crate) fn for_heap(heap_size: usize) -> Self {
        let ll_bytes = DEFAULT_LL_BYTES;
        let fit = heap_size / 16 / chan_bytes(ll_bytes);
        Sizing {
            channels: fit.clamp(1, 8),
            ll_bytes,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_layout_matches_the_protocol() {
        // PROTOCOL.md: NVR_CHAN_FP = 4*MB*(1+2*MT), NVR_CHAN_HEADER = NVR_CHAN_FP +
        // 2*FPB*MT*32, total + 2*LR*ll_bytes.
        assert_eq!(HEADER, 4 * 512 * 17 + 65536);
        assert_eq!(chan_bytes(32 << 10), 34816 + 65536 + 2 * 64 * (32 << 10));
        assert_eq!(chan_bytes(DEFAULT_LL_BYTES), 4_294_656);
        assert_eq!(std::mem::size_of::<TeamDescriptor>(), 136);
    }

    #[test]
    fn each_sender_gets_disjoint_regions_of_its_blocks() {
        let want = [64, 64, 21, 16, 12, 10, 9, 8];
        for n in 1..=MAX_TEAM {
            let g = ll_blocks(n);
            assert_eq!(g, want[n - 1], "n {n}");
            // Region (j, b) of a parity is j * g + b, or b on 2 PEs (one sender a receiver):
            // every one inside the parity's regions.
            let senders = if n == 2 { 1 } else { n };
            assert!(senders * g <= LL_REGIONS, "n {n}");
            // Every grid an LL launch may have publishes and checks fingerprints.
            assert!(g <= FP_BLOCKS);
        }
    }

    #[test]
    fn the_default_heap_keeps_eight_channels() {
        // NVSHMEM's default heap (1 GiB) keeps 8; smaller heaps fewer, at least one.
        let s = Sizing::for_heap(1 << 30);
        assert_eq!((s.channels, s.ll_bytes), (8, 32 << 10));
        assert_eq!(Sizing::for_heap(525 << 20).channels, 8);
        assert_eq!(Sizing::for_heap(520 << 20).channels, 7);
        assert_eq!(Sizing::for_heap(1 << 20).channels, 1);
    }
}
