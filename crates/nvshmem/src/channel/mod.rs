//! Channels: the symmetric memory this crate's NVLink kernels keep their epochs, flags and
//! packets in (`kernels/PROTOCOL.md`), its layout and sizing (here), and the pool a runtime
//! holds and the lanes its teams take them through ([`lane`]). Each team that uses the kernels
//! holds one, chosen when the team is made (`lane.rs` says how), so collectives of different
//! teams never share one, and the calls of one team take turns on it.
//!
//! This layer sits above [`crate::memory`] (the pool is one symmetric allocation) and the
//! runtime's stream ordering, and below [`crate::team`] (which takes a channel for each team it
//! makes) and [`crate::collective`] (whose NVLink algorithms run in it).
#[cfg(test)]
use crate::kernels::TeamDescriptor;

pub(crate) mod lane;

/// The most team members the fast path serves (`NVR_MAX_TEAM`); the kernels' ABI defines it,
/// every other use names it here.
pub(crate) use crate::kernels::MAX_TEAM;
/// Per-block flag words (`NVR_MAX_BLOCKS`).
const MAX_BLOCKS: usize = 512;
/// Blocks with LL regions (`NVR_LL_BLOCKS`).
const LL_BLOCKS: usize = 8;
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

/// The tag of a team whose members are the world PEs `world`, in team order (FNV-1a).
pub(crate) fn team_tag(world: &[usize]) -> u32 {
    let mut h: u32 = 0x811c_9dc5;
    for &pe in world {
        for b in (pe as u64).to_le_bytes() {
            h = (h ^ u32::from(b)).wrapping_mul(0x0100_0193);
        }
    }
    h
}

/// The fingerprint words a team's descriptor holds before any call (`nvr_team::fp`): word 0
/// empty (each call's launch fills it in), the team's tag in the high half of word 1, where a
/// call's fingerprint keeps it too (`collective/algo/fingerprint.rs`).
pub(crate) fn team_fingerprint(world: &[usize]) -> [u64; 2] {
    [0, u64::from(team_tag(world)) << 32]
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
        assert_eq!(std::mem::size_of::<TeamDescriptor>(), 128);
    }

    #[test]
    fn team_tags_follow_the_member_list() {
        assert_ne!(team_tag(&[0, 1]), team_tag(&[0, 2]));
        assert_ne!(team_tag(&[0, 1]), team_tag(&[1, 0]));
        assert_eq!(team_tag(&[3, 4, 5]), team_tag(&[3, 4, 5]));
    }

    /// The value of `#define NAME value` in the kernels' common header.
    fn kernel_define(name: &str) -> usize {
        let src = include_str!("../kernels/common.cuh");
        let line = src
            .lines()
            .find_map(|l| {
                l.trim()
                    .strip_prefix("#define ")?
                    .strip_prefix(name)?
                    .strip_prefix(' ')
            })
            .unwrap_or_else(|| panic!("common.cuh defines no {name}"));
        let value = line.split("//").next().unwrap_or("").trim();
        value
            .parse()
            .unwrap_or_else(|_| panic!("{name} in common.cuh is not a plain number: {value:?}"))
    }

    /// The constants mirrored from the kernels are the kernels' own: a change on one side only
    /// would have the host lay channels and descriptors out differently from the kernels.
    #[test]
    fn the_constants_are_the_kernels_own() {
        assert_eq!(kernel_define("NVR_MAX_TEAM"), MAX_TEAM);
        assert_eq!(kernel_define("NVR_MAX_BLOCKS"), MAX_BLOCKS);
        assert_eq!(kernel_define("NVR_LL_BLOCKS"), LL_BLOCKS);
        assert_eq!(kernel_define("NVR_FP_BLOCKS"), FP_BLOCKS);
        assert_eq!(kernel_define("NVR_FP_SLOT"), 32);
    }
}
