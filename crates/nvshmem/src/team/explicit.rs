//! Teams of an arbitrary list of PEs, made from NVSHMEM's team unique id.
//!
//! The first listed PE makes the id and hands it to the other members in the agreement that
//! opens the call (each member's entry carries the list's length and a digest of it, so a
//! member that passed another list is named); the members then join the team with it.
use std::os::raw::c_int;

use super::{make, offer, plan, Team};
use crate::{Error, Result};

/// `NVSHMEMI_TEAM_CONFIG_VERSION_2_IDENTIFIER` (`nvshmem_types.h`).
const TEAM_CONFIG_VERSION: c_int =
    (2 << 16) + std::mem::size_of::<nvshmem_sys::nvshmem_team_config_t>() as c_int;

/// What stands for "no id": NVSHMEM's own "invalid team id"
/// (`NVSHMEM_TEAM_UNIQUID_INITIALIZER`), which it never hands out.
pub(super) const NO_ID: u64 = u64::MAX;

/// A digest of the list (FNV-1a over its entries), so members that pass different lists of the
/// same length are told apart in the agreement.
fn digest(pes: &[usize]) -> u64 {
    pes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &pe| {
        (h ^ pe as u64).wrapping_mul(0x0100_0000_01b3)
    })
}

/// Makes the team of `pes` (checked, not a progression) of `parent`, where this PE has index
/// `me`. Collective over `parent`.
pub(super) fn team_from_list(parent: &Team, me: usize, pes: &[usize]) -> Result<Option<Team>> {
    // The first listed PE makes the id (a PE that cannot offers NO_ID, which every member
    // then refuses alike).
    let id = if me == pes[0] {
        parent.rt.nv().team_unique_id().unwrap_or_else(|e| {
            tracing::warn!(%e, "making a team unique id for Team::from_pes");
            NO_ID
        })
    } else {
        NO_ID
    };
    let args = [make::LIST, pes.len() as u64, digest(pes)];
    let call = "Team::from_pes";
    let table = parent.agree_to_make(call, [args[0], args[1], args[2], id, 0])?;
    make::same_args(call, &table, &args)?;
    let Some(index) = plan::index_in(pes, me) else {
        return Ok(None);
    };
    let id = table[pes[0]][offer::ARGS + 2];
    if id == NO_ID {
        return Err(Error::Bootstrap {
            bootstrap: "team".into(),
            detail: format!(
                "PE {} (the first listed) did not hand out the team's unique id",
                pes[0]
            ),
        });
    }
    join(parent, id, &table, pes, index)
}

/// Joins, as its member `index`, the team of the parent members `members` whose unique id is
/// `id` (`nvshmemx_team_init`): collective over that team's members only, so teams with
/// different ids can be made at the same time by disjoint sets of PEs. `table` is the opening
/// agreement's, which sets the team up.
pub(super) fn join(
    parent: &Team,
    id: u64,
    table: &[[u64; 64]],
    members: &[usize],
    index: usize,
) -> Result<Option<Team>> {
    let size = members.len();
    let mut config = nvshmem_sys::nvshmem_team_config_t {
        version: TEAM_CONFIG_VERSION,
        num_contexts: -1,
        uniqueid: id,
        ..Default::default()
    };
    // SAFETY: config is versioned as NVSHMEM 3.x expects and carries the team's id; sizes fit
    // a c_int as they are at most the parent's size.
    let handle = unsafe {
        parent.rt.nv().team_init(
            &mut config,
            nvshmem_sys::NVSHMEM_TEAM_CONFIG_MASK_UNIQUEID as i64,
            size,
            index,
        )
    }?;
    parent.finish(handle, table, members, |_| 0, true)
}

#[cfg(test)]
mod tests {
    #[test]
    fn config_version_is_nvshmems() {
        assert_eq!(super::TEAM_CONFIG_VERSION, (2 << 16) + 64);
    }

    #[test]
    fn lists_that_differ_have_different_digests() {
        use super::digest;
        assert_ne!(digest(&[3, 0, 2]), digest(&[0, 3, 2]));
        assert_ne!(digest(&[3, 0, 2]), digest(&[3, 0]));
        assert_eq!(digest(&[3, 0, 2]), digest(&[3, 0, 2]));
    }
}
