//! The agreements of a team-making call: the one that opens it over the parent team (every
//! member makes the same call and offers what the new teams need: [`offer`], [`make`]), and
//! what each new team's members decide from it ([`SetUp`], [`Agreed`]).
use std::sync::Arc;

use nvshmem_sys::{nvshmem_team_t, teams as ids};

use super::Team;
use crate::{
    channel::{lane::agreed_channel, MAX_TEAM},
    runtime::{
        exchange::{entry, same_call, tag, About},
        in_use::Pending,
    },
    Error, Result,
};

/// One member's part of a new team's set-up agreement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SetUp {
    /// The channels free on it (bit i: channel i).
    pub(crate) free: u64,
    /// Whether it can load and store every member's symmetric memory.
    pub(crate) reaches_all: bool,
    /// [`RuntimeInfo::resident_blocks`](crate::RuntimeInfo::resident_blocks).
    pub(crate) resident_blocks: u32,
    /// Whether other PEs of the job use its GPU ([`RuntimeInfo::pes_on_device`](crate::RuntimeInfo::pes_on_device) above 1).
    pub(crate) shares_gpu: bool,
    /// Its GPU's compute capability.
    pub(crate) arch: (u32, u32),
}

/// What every member of a new team decides from the set-up table: the same everywhere, since
/// it reads nothing but the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Agreed {
    /// Every member reaches every other (else no member uses peer mappings).
    pub(crate) mapped: bool,
    /// The lowest channel free on every member, if any.
    pub(crate) channel: Option<usize>,
    /// The members' smallest resident-block figure (at least 1).
    pub(crate) max_blocks: u32,
    /// The members' architecture, if they all share one.
    pub(crate) arch: Option<(u32, u32)>,
    /// Some member's GPU is used by other PEs too (see [`TeamShape::shares_gpu`](super::TeamShape::shares_gpu)).
    pub(crate) shares_gpu: bool,
}

impl Agreed {
    /// The channel a team of `n` members takes: the agreed one, if its members reach each
    /// other and it has at most [`MAX_TEAM`] of them (others use none).
    pub(crate) fn team_channel(&self, n: usize) -> Option<usize> {
        self.channel.filter(|_| self.mapped && n <= MAX_TEAM)
    }
}

impl SetUp {
    /// The parts of a new team's members, read from the agreement that opened the call (over
    /// the parent, one entry per parent member; see [`offer`]): `members` are the new team's
    /// members as parent indices, in team order, and `taken(p)` the channels parent member `p`
    /// takes in the same call for another of its new teams (a `split_2d`'s x team), which are
    /// not free for this one.
    pub(crate) fn from_table(
        table: &[[u64; 64]],
        members: &[usize],
        taken: impl Fn(usize) -> u64,
    ) -> Vec<SetUp> {
        members
            .iter()
            .map(|&p| {
                let e = &table[p];
                SetUp {
                    free: e[offer::FREE] & !taken(p),
                    reaches_all: members.iter().all(|&q| offer::reaches(e, q)),
                    resident_blocks: e[offer::RESIDENT] as u32,
                    shares_gpu: e[offer::RESIDENT] >> 32 & 1 == 1,
                    arch: ((e[offer::ARCH] >> 32) as u32, e[offer::ARCH] as u32),
                }
            })
            .collect()
    }

    /// The decisions of a table, for the new team of `members` (see [`SetUp::from_table`]).
    pub(crate) fn agree(
        table: &[[u64; 64]],
        members: &[usize],
        taken: impl Fn(usize) -> u64,
    ) -> Agreed {
        Self::decide(&Self::from_table(table, members, taken))
    }

    /// The decisions from every member's part, in team order.
    pub(crate) fn decide(parts: &[SetUp]) -> Agreed {
        let arch = parts.first().map(|p| p.arch);
        Agreed {
            mapped: parts.iter().all(|p| p.reaches_all),
            channel: agreed_channel(parts.iter().map(|p| p.free)),
            max_blocks: parts
                .iter()
                .map(|p| p.resident_blocks)
                .min()
                .unwrap_or(1)
                .max(1),
            arch: arch.filter(|a| parts.iter().all(|p| p.arch == *a)),
            shares_gpu: parts.iter().any(|p| p.shares_gpu),
        }
    }
}

impl Team {
    /// The agreement that opens a team-making call, over this (the parent) team, after its
    /// earlier calls: every member says which call it makes (`args`: the kind, then four words
    /// of arguments) and offers what the new teams need agreed (see [`offer`]). Returns every
    /// member's entry. Then the teams dropped earlier whose work is done are destroyed
    /// (NVSHMEM's team making synchronises the device anyway).
    pub(super) fn agree_to_make(
        &self,
        call: &'static str,
        args: [u64; 5],
    ) -> Result<Vec<[u64; 64]>> {
        self.rt.check_health()?;
        self.rt.bind()?;
        let n = self.n_pes();
        let parent = format!("the parent team (team {} of {n} PEs)", self.handle());
        let about = About {
            call,
            team: &parent,
        };
        let core = &self.rt.teams().core;
        let table = self.rt.agree_over(about, self.handle(), n, |stream| {
            // As any call on the team: after its earlier calls, on whatever stream.
            let _turn = self.inner.lane.order.enter(stream, self.rt.captures())?;
            let mut words = args.to_vec();
            words.extend(core.offer(&self.rt, &self.inner.shape.world, stream)?);
            Ok(entry(tag::MAKE_TEAM, &words))
        })?;
        same_call(call, &table, tag::MAKE_TEAM)?;
        if let Some(pe) = table.iter().position(|e| e[offer::KIND] != args[0]) {
            return Err(Error::OutOfStep {
                call,
                detail: format!(
                    "parent PE {pe} made {} at this point: every member must make the same call",
                    make::name(table[pe][offer::KIND])
                ),
            });
        }
        self.rt.teams().destroy_retired(&self.rt);
        Ok(table)
    }

    /// The new team of `handle` (none on PEs NVSHMEM left out), made of the parent members
    /// `members` (parent indices, in team order), set up from the opening agreement's `table`;
    /// `taken(p)` are the channels parent member `p` holds for another team of the same call;
    /// `by_init`: NVSHMEM made it with `nvshmemx_team_init` (see
    /// [`TeamShape::nvshmem_collectives`](super::TeamShape::nvshmem_collectives)). A team that fails to set up is still destroyed
    /// later.
    pub(super) fn finish(
        &self,
        handle: nvshmem_team_t,
        table: &[[u64; 64]],
        members: &[usize],
        taken: impl Fn(usize) -> u64,
        by_init: bool,
    ) -> Result<Option<Team>> {
        if handle == ids::NVSHMEM_TEAM_INVALID {
            return Ok(None);
        }
        let core = &self.rt.teams().core;
        let agreed = SetUp::agree(table, members, taken);
        match core.build(
            &self.rt,
            handle,
            agreed,
            Some(core.retired.clone()),
            by_init,
        ) {
            Ok(inner) => Ok(Some(Team {
                rt: self.rt.clone(),
                inner: Arc::new(inner),
            })),
            Err(e) => {
                core.retired.push(handle, Pending::default());
                Err(e)
            }
        }
    }
}

/// What each parent member offers in the agreement that opens a team-making call, after the
/// call's kind and arguments: the entry's layout, and this PE's offer.
pub(crate) mod offer {
    /// Entry word of the call's kind (see [`super::make`]); its arguments follow.
    pub(crate) const KIND: usize = 1;
    /// The call's arguments (four words).
    pub(crate) const ARGS: usize = 2;
    /// The channels free on the member (bit i: channel i).
    pub(crate) const FREE: usize = 6;
    /// [`RuntimeInfo::resident_blocks`](crate::RuntimeInfo::resident_blocks) in the low 32
    /// bits; bit 32: other PEs use the member's GPU.
    pub(crate) const RESIDENT: usize = 7;
    /// Compute capability, major << 32 | minor.
    pub(crate) const ARCH: usize = 8;
    /// The parent members the member can load and store, as bits (bit p: parent member p).
    pub(crate) const REACH: usize = 9;
    /// Parent members the reach bits can name: a member further on counts as unreachable
    /// (such parents span many nodes, where no team of this crate's NVLink kernels forms).
    pub(crate) const REACH_BITS: usize = (64 - REACH) * 64;

    /// Whether the entry's member reaches parent member `p`.
    pub(crate) fn reaches(e: &[u64; 64], p: usize) -> bool {
        p < REACH_BITS && e[REACH + p / 64] >> (p % 64) & 1 == 1
    }

    /// The entry words from [`FREE`] on, for a member that reaches the parent members `reach`.
    pub(crate) fn words(
        free: u64,
        resident: u32,
        shares_gpu: bool,
        arch: (u32, u32),
        reach: &[bool],
    ) -> Vec<u64> {
        let mut w = vec![0u64; 64 - FREE];
        w[0] = free;
        w[1] = u64::from(resident) | u64::from(shares_gpu) << 32;
        w[2] = u64::from(arch.0) << 32 | u64::from(arch.1);
        for (p, _) in reach
            .iter()
            .enumerate()
            .filter(|(p, r)| **r && *p < REACH_BITS)
        {
            w[REACH - FREE + p / 64] |= 1 << (p % 64);
        }
        w
    }
}

/// The kinds of team-making call, as their agreement names them.
pub(super) mod make {
    use crate::{Error, Result};

    pub(crate) const STRIDED: u64 = 1;
    pub(crate) const TWO_D: u64 = 2;
    pub(crate) const LIST: u64 = 3;
    pub(crate) const SPLIT: u64 = 4;
    /// Not a call: the set-up of NVSHMEM's predefined teams at start-up.
    pub(crate) const PREDEFINED: u64 = 5;

    pub(crate) fn name(kind: u64) -> &'static str {
        match kind {
            STRIDED => "a strided split (split_strided, or from_pes of a progression)",
            TWO_D => "split_2d",
            LIST => "from_pes (or shrink)",
            SPLIT => "split",
            PREDEFINED => "starting the runtime",
            _ => "another call",
        }
    }

    /// Checks that every member passed the same `args` (kind and arguments).
    pub(crate) fn same_args(call: &'static str, table: &[[u64; 64]], args: &[u64]) -> Result<()> {
        match table.iter().position(|e| e[1..=args.len()] != *args) {
            None => Ok(()),
            Some(pe) => Err(Error::OutOfStep {
                call,
                detail: format!(
                    "parent PE {pe} passed {:?} where this PE passed {:?}: every member must pass \
                     the same arguments",
                    &table[pe][2..=args.len()],
                    &args[1..]
                ),
            }),
        }
    }
}
