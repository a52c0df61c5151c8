//! Channels: the symmetric memory this crate's NVLink kernels keep their epochs, flags,
//! packets and Lamport buffers in (`kernels/PROTOCOL.md`), its layout and sizing ([`layout`],
//! and [`lamport`] for the Lamport area after the LL regions), and the pool a runtime holds and
//! the lanes its teams take them through ([`lane`]). Each team that uses the kernels
//! holds one, chosen when the team is made (`lane.rs` says how), so collectives of different
//! teams never share one, and the calls of one team take turns on it.
//!
//! This layer sits above [`crate::memory`] (the pool is one symmetric allocation) and the
//! runtime's stream ordering, and below [`crate::team`] (which takes a channel for each team it
//! makes) and [`crate::collective`] (whose NVLink algorithms run in it).
pub(crate) mod lamport;
pub(crate) mod lane;
mod layout;

pub(crate) use layout::{chan_bytes, ll_blocks, Sizing, FP_BLOCKS, MAX_CHANNELS, MAX_TEAM};
#[cfg(test)]
pub(crate) use layout::{DEFAULT_LL_BYTES, LL_BLOCKS, LL_REGIONS};

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

#[cfg(test)]
mod tests {
    use super::layout::MAX_BLOCKS;
    use super::*;

    #[test]
    fn team_tags_follow_the_member_list() {
        assert_ne!(team_tag(&[0, 1]), team_tag(&[0, 2]));
        assert_ne!(team_tag(&[0, 1]), team_tag(&[1, 0]));
        assert_eq!(team_tag(&[3, 4, 5]), team_tag(&[3, 4, 5]));
    }

    use crate::kernels::common_define;

    /// The constants mirrored from the kernels are the kernels' own: a change on one side only
    /// would have the host lay channels and descriptors out differently from the kernels.
    #[test]
    fn the_constants_are_the_kernels_own() {
        assert_eq!(common_define("NVR_MAX_TEAM"), MAX_TEAM);
        assert_eq!(common_define("NVR_MAX_BLOCKS"), MAX_BLOCKS);
        assert_eq!(common_define("NVR_LL_BLOCKS"), LL_BLOCKS);
        assert_eq!(common_define("NVR_LL_REGIONS"), LL_REGIONS);
        assert_eq!(common_define("NVR_FP_BLOCKS"), FP_BLOCKS);
        assert_eq!(common_define("NVR_FP_SLOT"), 32);
    }

    /// The device's `nvr_ll_blocks` reads the LL blocks of a team of n from a table in one
    /// word (byte n - 1), not the division the host does: every team size must agree, or a
    /// kernel would address other regions than the host sized and refuse or overlap them.
    #[test]
    fn the_kernels_ll_block_table_is_the_hosts_division() {
        let src = include_str!("../kernels/common.cuh");
        let body = &src[src.find("int nvr_ll_blocks(int n)").expect("nvr_ll_blocks")..];
        let hex = body[body.find("0x").expect("the table") + 2..]
            .split(|c: char| !c.is_ascii_hexdigit())
            .next()
            .unwrap();
        let table = u64::from_str_radix(hex, 16).unwrap();
        for n in 1..=MAX_TEAM {
            let device = ((table >> (8 * (n - 1))) & 0xff) as usize;
            assert_eq!(device, ll_blocks(n), "a team of {n}");
        }
    }
}
