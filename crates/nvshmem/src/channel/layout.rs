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
/// Blocks with LL regions (`NVR_LL_BLOCKS`).
pub(crate) const LL_BLOCKS: usize = 8;
/// Blocks that publish call fingerprints (`NVR_FP_BLOCKS`).
pub(crate) const FP_BLOCKS: usize = 128;
/// Bytes of the header: epochs, arrive and depart flags, then the fingerprint slots (two
/// parities of `FP_BLOCKS` x `MAX_TEAM` slots of 32 bytes).
const HEADER: usize = 4 * MAX_BLOCKS * (1 + 2 * MAX_TEAM) + 2 * FP_BLOCKS * MAX_TEAM * 32;

/// The most channels a runtime has (one bit each in the masks a new team's members AND
/// together, `lane.rs`).
pub(crate) const MAX_CHANNELS: usize = 64;

/// Bytes of one channel with LL regions of `ll_bytes` (`nvr_chan_bytes`).
pub(crate) fn chan_bytes(ll_bytes: usize) -> usize {
    HEADER + 2 * MAX_TEAM * LL_BLOCKS * ll_bytes
}

/// How the fast path is sized: [`crate::RuntimeBuilder`] settings `channels` and `ll_bytes`.
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
        let ll_bytes = 16 << 10;
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
        // 2*FPB*MT*32, total + 2*MT*LB*ll_bytes.
        assert_eq!(HEADER, 4 * 512 * 17 + 65536);
        assert_eq!(chan_bytes(16 << 10), 34816 + 65536 + 2 * 8 * 8 * (16 << 10));
        assert_eq!(std::mem::size_of::<TeamDescriptor>(), 136);
    }
}
