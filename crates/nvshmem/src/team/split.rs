//! [`Team::split`]: teams by colour and key, in one exchange.
//!
//! Every member needs every member's colour and key to know its team and its place in it, and
//! a team that is not a progression of the parent needs one NVSHMEM team unique id that all
//! its members hold. Both travel in one gather: each member makes an id (a host-side random
//! number, no communication) and puts `(colour, key, id)` into its entry of the agreement that
//! opens the call, which hands every member the whole table. Each member then computes the
//! same teams from it ([`plan::split_teams`]).
//!
//! A team whose members, in team order, are an increasing progression of the parent (even
//! PEs, all but the first, one PE) is made by NVSHMEM's own `nvshmem_team_split_strided`,
//! collective over the whole parent: every parent member, in a team or not, makes each of
//! them in increasing colour order. NVSHMEM 3.4.5's own collective kernels (which it runs when
//! it does not hand a call to NCCL, e.g. several PEs on one GPU) went wrong with an illegal
//! address on a team of 3 made from a unique id inside 4 PEs (world PEs 1 to 3, 2026-11-24),
//! and are right on strided teams. Any other team is joined with the id of its first member
//! (`nvshmemx_team_init`, collective over that team only), all at the same time, each by its
//! own members.
//!
//! The gather is the agreement that opens every team-making call (over the parent, on the
//! runtime's own stream, waited for at most the runtime's timeout), before NVSHMEM's own team
//! creation.
use super::{
    explicit::{self, NO_ID},
    make, offer,
    plan::{self, Choice},
    Team,
};
use crate::{Error, Result};

const CALL: &str = "Team::split";

/// One member's entry in the table: its colour (0 for none, else colour + 1), its key (as an
/// `i64`'s bits) and the team id it made.
type Entry = [u64; 3];

/// Not a valid entry (its colour word is above every colour + 1): what memory nothing wrote
/// could hold.
#[cfg(test)]
const POISON: u64 = u64::MAX;

fn encode(choice: Choice, id: u64) -> Entry {
    [
        choice.color.map_or(0, |c| u64::from(c) + 1),
        i64::from(choice.key) as u64,
        id,
    ]
}

/// The choice and id of an entry, `None` if it is not one [`encode`] makes.
fn decode(entry: Entry) -> Option<(Choice, u64)> {
    let color = match entry[0] {
        0 => None,
        c => Some(u32::try_from(c - 1).ok()?),
    };
    let key = i32::try_from(entry[1] as i64).ok()?;
    Some((Choice { color, key }, entry[2]))
}

fn exchange_error(detail: String) -> Error {
    Error::Bootstrap {
        bootstrap: "team split".into(),
        detail,
    }
}

/// [`Team::split`]: collective over `parent`.
pub(super) fn split(parent: &Team, color: Option<u32>, key: i32) -> Result<Option<Team>> {
    let mine = Choice { color, key };
    let Gathered {
        choices: table,
        table: entries,
    } = gather(parent, mine)?;
    let me = parent.my_pe();
    if table[me].0 != mine {
        return Err(exchange_error(format!(
            "the gathered table holds {:?} for this PE (parent PE {me}), which passed {mine:?}",
            table[me].0
        )));
    }
    let choices: Vec<Choice> = table.iter().map(|&(choice, _)| choice).collect();
    let teams = plan::split_teams(&choices);
    // The progressions, made by every parent member alike (module docs).
    let mut strided = None;
    for (c, members) in &teams {
        let Some(s) = plan::as_progression(members) else {
            continue;
        };
        // SAFETY: the parent handle is valid (its runtime is alive); the progression lies in
        // the parent (its members came from the gathered table); every parent member makes
        // the same calls in the same order (computed from the same table).
        let handle = unsafe {
            parent
                .rt
                .nv()
                .split_strided(parent.handle(), s.start, s.stride, s.size)
        }
        .map_err(|e| e.in_call(CALL))?;
        if Some(*c) == color {
            strided = Some(parent.finish(handle, &entries, members, |_| 0, false));
        } else if handle != nvshmem_sys::teams::NVSHMEM_TEAM_INVALID {
            return Err(exchange_error(format!(
                "NVSHMEM put parent PE {me} into the team of colour {c}, which it did not choose"
            )));
        }
    }
    if let Some(team) = strided {
        return team;
    }
    // Nothing more is collective over the parent: a PE in no team is done.
    let Some(color) = color else {
        return Ok(None);
    };
    // This PE's own entry (checked above) puts it in the team of its colour.
    let Some((members, index)) = teams
        .iter()
        .find(|(c, _)| *c == color)
        .and_then(|(_, members)| Some((members, plan::index_in(members, me)?)))
    else {
        return Err(exchange_error(format!(
            "parent PE {me} is missing from the team of its colour {color}"
        )));
    };
    let leader = members[0];
    let id = table[leader].1;
    // Every member of this team reads the same leader's id, so all refuse alike.
    if id == NO_ID {
        return Err(exchange_error(format!(
            "parent PE {leader}, the first member of the team of colour {color}, had no team id to give"
        )));
    }
    explicit::join(parent, id, &entries, members, index).map_err(|e| e.in_call(CALL))
}

/// What the opening agreement gave: every parent member's choice and team id, and the whole
/// table (which sets the new teams up).
struct Gathered {
    choices: Vec<(Choice, u64)>,
    table: Vec<crate::runtime::exchange::Entry>,
}

/// Gathers every member's choice and team id, in parent order: the agreement that opens the
/// call (see [`Team::agree_to_make`]).
fn gather(parent: &Team, mine: Choice) -> Result<Gathered> {
    // Only the first member of each team uses its id, but no PE knows yet who that is. A PE
    // that cannot make one offers NO_ID, which its team's members then refuse alike.
    let id = parent.rt.nv().team_unique_id().unwrap_or_else(|e| {
        tracing::warn!(%e, "making a team unique id for Team::split");
        NO_ID
    });
    let e = encode(mine, id);
    let table = parent.agree_to_make(CALL, [make::SPLIT, e[0], e[1], e[2], 0])?;
    let choices = table
        .iter()
        .enumerate()
        .map(|(pe, w)| {
            let a = offer::ARGS;
            decode([w[a], w[a + 1], w[a + 2]]).ok_or_else(|| {
                exchange_error(format!(
                    "parent PE {pe}'s entry {:?} is not one a split writes",
                    &w[a..a + 3]
                ))
            })
        })
        .collect::<Result<_>>()?;
    Ok(Gathered { choices, table })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_round_trip() {
        for color in [None, Some(0), Some(1), Some(u32::MAX)] {
            for key in [i32::MIN, -1, 0, 1, i32::MAX] {
                for id in [0, 42, NO_ID] {
                    let choice = Choice { color, key };
                    let entry = encode(choice, id);
                    assert_eq!(decode(entry), Some((choice, id)), "{entry:?}");
                }
            }
        }
        assert_eq!(
            encode(
                Choice {
                    color: None,
                    key: -1
                },
                5
            ),
            [0, u64::MAX, 5]
        );
        assert_eq!(
            encode(
                Choice {
                    color: Some(2),
                    key: 3
                },
                5
            ),
            [3, 3, 5]
        );
    }

    #[test]
    fn an_entry_the_gather_did_not_write_is_refused() {
        assert_eq!(decode([POISON; 3]), None);
        // A colour word above u32::MAX + 1, or a key outside i32, is no entry of ours.
        assert_eq!(decode([u64::from(u32::MAX) + 2, 0, 0]), None);
        assert!(decode([u64::from(u32::MAX) + 1, 0, 0]).is_some());
        assert_eq!(decode([1, i64::from(i32::MAX) as u64 + 1, 0]), None);
        assert_eq!(decode([1, (i64::from(i32::MIN) - 1) as u64, 0]), None);
    }
}
