//! The algorithm layer: every collective call is described once ([`Call`]) and runs through
//! one [`Algorithm`], chosen from its collective's ordered registry ([`registry`]).
//!
//! An algorithm says whether it accepts a call ([`Algorithm::refuses`]), how much collective
//! scratch it needs, and what this PE queues for it, as a list of [`Step`]s (its plan). The
//! automatic choice is the first algorithm of the registry that accepts the call. A user can
//! force one per collective ([`RuntimeBuilder::algorithm`], [`Runtime::set_algorithm`], or the
//! environment variable [`ALGORITHMS_VAR`]); a forced algorithm that refuses a call makes it
//! fail with [`Error::AlgorithmRefused`], which says why.
//!
//! Every input of the choice (collective, element type, operator, sizes, team size, whether
//! every member is peer-mapped and the team's channel, both agreed when the team was made, in
//! place, root) is the same on every PE of the team, so every PE chooses alike and queues
//! matching steps: no PE is left waiting for another.
mod call;
mod ce;
pub(crate) mod crossover;
#[cfg(test)]
mod crossover_doc;
pub(crate) mod fingerprint;
mod forced;
pub(crate) mod lamport;
mod local;
mod nvlink;
mod nvshmem;
mod peer;
pub(crate) mod queue;
mod rooted;
mod run;

use std::fmt;

use super::check::Span;
use crate::{team::TeamShape, DataType, Error, ReduceOp, Result};
#[cfg(doc)]
use crate::{Runtime, RuntimeBuilder};
pub(crate) use call::Call;
pub use call::{Collective, Geometry};
pub use forced::ALGORITHMS_VAR;
#[cfg(test)]
pub(super) use forced::{parse_forced, ForcedTable};
pub(crate) use forced::{ForcedAlgorithms, ForcedChoice};
pub(crate) use queue::Step;
pub use run::ResolvedKernel;
pub(crate) use run::{bare, prepare, run, Planned, Plans};

/// One way to run a collective.
pub(crate) trait Algorithm: Sync {
    /// The name users force it by.
    fn name(&self) -> &'static str;
    /// Whether it can run any call on a team of `n` PEs: a test that builds no reason, made
    /// first by the automatic choice, so that an algorithm for other teams (`local`, one PE)
    /// costs other teams' calls nothing. [`refuses`](Self::refuses) refuses alike, and says
    /// why.
    fn takes_team_of(&self, _n: usize) -> bool {
        true
    }
    /// Why it cannot run `call`, or `None` when it can. A pure function of what every PE of
    /// the team passes alike.
    fn refuses(&self, call: &Call) -> Option<String>;
    /// Whether the automatic choice weighs it for `call` at all, preferred or as the fallback
    /// when nothing prefers the call; forcing it is not bound by this. Not where it can run
    /// more than its crossovers were measured for (LL past what it carried before issue 31),
    /// so that a wider capacity moves no automatic choice. A pure function of what every PE
    /// of the team passes alike, as [`refuses`](Self::refuses).
    fn weighed(&self, _call: &Call) -> bool {
        true
    }
    /// Whether the automatic choice takes it for `call`, which it accepts: where another
    /// algorithm later in the registry is faster (a size past a measured crossover) it says no,
    /// and stays available when forced.
    fn prefers(&self, _call: &Call) -> bool {
        true
    }
    /// Bytes of collective scratch it needs for `call`.
    fn scratch(&self, _call: &Call) -> usize {
        0
    }
    /// What this PE queues for `call` (which it accepts, with its scratch held).
    fn plan(&self, call: &Call, steps: &mut Vec<Step>);
}

impl fmt::Debug for dyn Algorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The algorithms of a collective, in the order the automatic choice tries them.
pub(crate) fn registry(coll: Collective) -> &'static [&'static dyn Algorithm] {
    use ce::Ce;
    use lamport::Lamport;
    use local::Local;
    use nvlink::{Direct, Flags, Ll};
    use nvshmem::{Native, ScaleThenSum, SumThenDiv};
    use peer::{PeerCopy, PeerKernel};
    use rooted::RootedGet;
    match coll {
        Collective::AllReduce | Collective::Reduce | Collective::ReduceScatter => &[
            &Local,
            &Ll,
            &Lamport,
            &Direct,
            &Native,
            &SumThenDiv,
            &ScaleThenSum,
            &PeerKernel,
        ],
        Collective::Broadcast | Collective::Fcollect | Collective::Alltoall => {
            &[&Local, &Ll, &Lamport, &Ce, &Direct, &Native]
        }
        Collective::Barrier | Collective::Sync => &[&Local, &Flags, &Native],
        Collective::Gather | Collective::Scatter => {
            &[&Local, &Ll, &Lamport, &Ce, &Direct, &RootedGet, &PeerCopy]
        }
    }
}

/// The algorithm for `call`: `forced`, if it accepts the call, else the first of the registry
/// that does ([`choice`]).
pub(crate) fn choose(
    call: &Call,
    forced: Option<&'static dyn Algorithm>,
) -> Result<&'static dyn Algorithm> {
    choice(call, forced).map(|(a, _)| a)
}

/// The algorithm for `call`, and whether the reserved scratch ([`Call::room`]) ruled out an
/// algorithm the choice would otherwise have weighed (then the choice may change once more
/// scratch is reserved, and its plan is not kept: [`run()`]).
///
/// `forced`, if it accepts the call (its scratch need is checked when the call runs: a forced
/// algorithm gets [`Error::ScratchTooSmall`]). Else the automatic choice: the first algorithm
/// of the registry that accepts and prefers the call, else the first that accepts it; an
/// algorithm whose scratch need exceeds the reserved scratch is passed over while another that
/// accepts the call fits, so whether a call needs scratch does not hang on the size the
/// choice happens to see (the reserved scratch is the same on every PE: reserving is
/// collective).
pub(crate) fn choice(
    call: &Call,
    forced: Option<&'static dyn Algorithm>,
) -> Result<(&'static dyn Algorithm, bool)> {
    if let Some(a) = forced {
        return match refusal(a, call) {
            None => Ok((a, false)),
            Some(reason) => Err(Error::AlgorithmRefused {
                call: call.name,
                algorithm: a.name(),
                reason,
            }),
        };
    }
    let mut why = Vec::new();
    let mut fallback = None;
    // Where members share a GPU ([`TeamShape::shares_gpu`]: NVSHMEM's kernels may need more
    // blocks resident than a member keeps) or NVSHMEM made the team with nvshmemx_team_init
    // ([`TeamShape::nvshmem_collectives`]), NVSHMEM's collectives come last: first what
    // prefers the call and queues none, then what accepts it and queues none, then the usual
    // order (a team without a channel has nothing but NVSHMEM's path).
    let avoid = call.team.shares_gpu || !call.team.nvshmem_collectives;
    let mut own_kernels = None;
    let mut with_nvshmem = None;
    // The first accepting algorithm that needs more scratch than is reserved: taken only when
    // nothing that fits accepts the call (the call then fails with ScratchTooSmall).
    let mut too_big = None;
    for &a in registry(call.coll) {
        if !a.takes_team_of(call.n()) {
            continue;
        }
        match a.refuses(call) {
            None if !a.weighed(call) => why.push(format!(
                "{}: the automatic choice does not take it for this size (force it)",
                a.name()
            )),
            None if a.scratch(call) > call.room => {
                too_big.get_or_insert(a);
            }
            None if avoid && queues_nvshmem_collectives(a, call) => {
                with_nvshmem.get_or_insert(a);
            }
            None if a.prefers(call) => return Ok((a, too_big.is_some())),
            None if avoid => {
                own_kernels.get_or_insert(a);
            }
            None => {
                fallback.get_or_insert(a);
            }
            Some(reason) => why.push(format!("{}: {reason}", a.name())),
        }
    }
    if let Some(a) = own_kernels.or(fallback).or(with_nvshmem).or(too_big) {
        return Ok((a, too_big.is_some()));
    }
    Err(Error::Unsupported {
        call: call.name,
        what: format!(
            "{} of {} by {} (no algorithm accepts it; {})",
            call.coll,
            call.dtype,
            call.op,
            why.join("; ")
        ),
    })
}

/// Why `alg`, forced, cannot run `call`: its own refusal, or a plan that would queue one of
/// NVSHMEM's collectives where NVSHMEM gave wrong results (the automatic choice only puts
/// those last): on a team NVSHMEM made with nvshmemx_team_init
/// ([`TeamShape::nvshmem_collectives`]), and NVSHMEM's reductions where some member's GPU is
/// used by other PEs too ([`TeamShape::shares_gpu`]). A pure function of what every member
/// passes alike, as [`Algorithm::refuses`].
fn refusal(alg: &dyn Algorithm, call: &Call) -> Option<String> {
    if let Some(why) = alg.refuses(call) {
        return Some(why);
    }
    if !call.team.nvshmem_collectives && queues_nvshmem_collectives(alg, call) {
        return Some(
            "it queues NVSHMEM collectives, which do not run on a team made by \
             nvshmemx_team_init (a list of PEs that is not an increasing progression): NVSHMEM \
             3.4.5 gave wrong results there"
                .to_string(),
        );
    }
    // Where PEs share a GPU NVSHMEM cannot hand a call to NCCL and runs its own kernels. Its
    // all-reduce there lost a member's input in the first or last element (8 PEs on 2 x H200
    // under MPS, the team of the even PEs, 1001 f32, after calls of this crate's kernels on
    // the team: 8 of 12 runs of the collectives matrix on 2026-11-27, with this crate's
    // barrier before it or NVSHMEM's, with programmatic dependent launch on or off; right in
    // 3 of 3 with only NVSHMEM's algorithms forced, so an interaction with the calls before it
    // is not ruled out). A forced NVSHMEM reduction is refused there rather than risked.
    if call.team.shares_gpu && queues_nvshmem_reductions(alg, call) {
        return Some(
            "it queues NVSHMEM reductions, and where PEs share a GPU NVSHMEM 3.4.5 runs its own \
             reduction kernels, which gave wrong results there (a member's input missing; \
             cause not found)"
                .to_string(),
        );
    }
    None
}

/// Whether `alg`'s plan for `call` (which it accepts) queues one of NVSHMEM's collectives.
fn queues_nvshmem_collectives(alg: &dyn Algorithm, call: &Call) -> bool {
    planned_steps(alg, call)
        .iter()
        .any(Step::uses_nvshmem_collectives)
}

/// Whether `alg`'s plan for `call` queues one of NVSHMEM's reductions (not merely its
/// barriers, as `peer_kernel`'s plan does around this crate's kernel).
fn queues_nvshmem_reductions(alg: &dyn Algorithm, call: &Call) -> bool {
    planned_steps(alg, call)
        .iter()
        .any(|s| matches!(s, Step::Reduce { .. }))
}

/// `alg`'s plan for `call` (which it accepts), as data: made on a copy with a stand-in
/// scratch address, only to be looked at. An empty call queues nothing.
fn planned_steps(alg: &dyn Algorithm, call: &Call) -> Vec<Step> {
    let mut steps = Vec::new();
    if call.is_empty() {
        return steps;
    }
    let mut probe = call.clone();
    if alg.scratch(call) > 0 && probe.scratch == 0 {
        probe.scratch = 1 << 48;
    }
    alg.plan(&probe, &mut steps);
    steps
}

impl ReduceOp {
    /// Whether a reduction of `T` by this operator can run: it [applies](Self::applies_to) to
    /// `T`'s kind, its scale suits `T` (a whole number for integers), and some algorithm of
    /// the crate computes the pair (NVSHMEM's, or this crate's kernels, which compute fp8).
    /// Reductions that only this crate's kernels compute (fp8) also need, at call time, every
    /// PE of the team to be peer-accessible.
    ///
    /// ```
    /// use nvshmem::{element::{Bool8, F8E4M3}, ReduceOp};
    /// assert!(ReduceOp::Avg.supports::<i32>());
    /// assert!(!ReduceOp::PreMulSum(0.5).supports::<i32>());
    /// assert!(ReduceOp::PreMulSum(0.5).supports::<f32>());
    /// assert!(ReduceOp::Sum.supports::<F8E4M3>() && !ReduceOp::Xor.supports::<F8E4M3>());
    /// assert!(ReduceOp::And.supports::<Bool8>() && !ReduceOp::Sum.supports::<Bool8>());
    /// ```
    pub fn supports<T: crate::Element>(self) -> bool {
        self.supports_type(T::DTYPE)
    }

    /// [`ReduceOp::supports`] for a type chosen at run time.
    ///
    /// ```
    /// use nvshmem::{DataType, ReduceOp};
    /// assert!(ReduceOp::Max.supports_type(DataType::BF16));
    /// assert!(!ReduceOp::Xor.supports_type(DataType::F64));
    /// ```
    pub fn supports_type(self, dtype: DataType) -> bool {
        if self.check_for("ReduceOp::supports", dtype).is_err() {
            return false;
        }
        // A two-PE, peer-mapped all-reduce: the most any algorithm could be offered.
        let team = TeamShape {
            handle: 0,
            my_pe: 0,
            n_pes: 2,
            world: Box::new([0, 1]),
            peer_offsets: Some(Box::new([0, 1 << 40])),
            max_blocks: crate::team::DEFAULT_MAX_BLOCKS,
            descriptor: None,
            arch: Some((9, 0)),
            nvshmem_collectives: true,
            shares_gpu: false,
            alone_in_job: false,
            job_peer_mapped: true,
        };
        let span = Span::new(1 << 20, 1, dtype.size());
        let call = Call {
            coll: Collective::AllReduce,
            name: "ReduceOp::supports",
            team: &team,
            me: 0,
            dtype,
            op: self,
            root: 0,
            src: span,
            dst: Span::new(2 << 20, 1, dtype.size()),
            count: 1,
            in_place: false,
            scratch: 0,
            room: usize::MAX,
            descriptor: None,
            arch: None,
        };
        registry(Collective::AllReduce)
            .iter()
            .any(|a| a.refuses(&call).is_none())
    }
}

#[cfg(test)]
pub(crate) mod tests;
