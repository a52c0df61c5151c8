//! Queuing a chosen algorithm's plan: at once ([`run`], which keeps the plans of repeated
//! calls), prepared once and started many times ([`Planned`]), both through [`Plan::queue`];
//! or as one bare kernel launch for the host-overhead bench ([`ResolvedKernel`]). All three
//! choose and plan a checked call in one place, [`make`].
use std::sync::Arc;

use cudarc::driver::CudaStream;

use super::{choice, queue, Algorithm, Call, Collective, ForcedChoice, Step};
use crate::{
    collective::CallKey, kernels, memory::Alloc, runtime::Enqueue, Error, Result, Runtime, Team,
};

/// Checks (`check`, the collective's `check_call`), chooses, plans and queues the call `key`
/// names on `stream`. `arrays` are the allocations its buffers are part of: the call notes
/// its use of them, of the team and of the scratch, before queuing anything (see
/// [`crate::runtime::in_use`]).
///
/// A plan that needs no scratch is kept in the team's [`Plans`], keyed by the call's
/// arguments and the forced algorithm, so a call repeated on the same arrays (the common
/// case: a training step, a solver iteration) skips the checks, the choice, the plan and the
/// kernel lookup, and costs what a prepared call's start costs. `check` is pure (the same
/// arguments on the same team pass or fail alike), so a key that holds every argument the
/// checks read stands for checks passed; a call on shaped buffers is checked first.
pub(crate) fn run<'t>(
    team: &'t Team,
    key: CallKey,
    check: impl FnOnce() -> Result<Call<'t>>,
    arrays: &[&Arc<Alloc>],
    stream: &Arc<CudaStream>,
) -> Result<()> {
    let forcing = team.runtime().forced_algorithms().choice(key.coll());
    let key = PlanKey { call: key, forcing };
    if !key.call.shaped {
        let hit = team.inner().plans.with(&key, |plan| {
            let q = team.runtime().enqueue(key.call.name(), stream)?;
            plan.queue(&q, team, stream, arrays.iter().copied(), None)
        });
        if let Some(done) = hit {
            return done;
        }
    }
    plan_and_queue(team, key, check, arrays, stream)
}

/// [`run`] for a call whose plan is not kept: out of line, so that the code of a repeated
/// call stays small (the instructions the driver's launch leaves in the caches are few).
#[cold]
#[inline(never)]
fn plan_and_queue<'t>(
    team: &'t Team,
    key: PlanKey,
    check: impl FnOnce() -> Result<Call<'t>>,
    arrays: &[&Arc<Alloc>],
    stream: &Arc<CudaStream>,
) -> Result<()> {
    let rt = team.runtime();
    let plans = &team.inner().plans;
    let queue =
        |plan: &Plan, q: &Enqueue| plan.queue(q, team, stream, arrays.iter().copied(), None);
    let call = check()?;
    let q = rt.enqueue(call.name, stream)?;
    if key.call.shaped {
        if let Some(done) = plans.with(&key, |plan| queue(plan, &q)) {
            return done;
        }
    }
    let forced = key.forcing.algorithm(call.coll);
    let made = make(team, call, forced, Lease::Take, stream)?;
    // An empty call queues nothing, and its plan is not kept: it is checked and chosen again
    // each time (cheap, with nothing to plan).
    if made.plan.empty {
        return Ok(());
    }
    // A plan is kept only where the reserved scratch did not decide it: then more scratch,
    // reserved later, chooses alike, and a kept plan is what every PE would choose now (they
    // reserve together, but their caches need not hold the same plans).
    if made.scratch.is_none() && !made.room_mattered {
        return plans.insert_with(key, made.plan, |plan| queue(plan, &q));
    }
    let scratch = made.scratch.as_ref();
    made.plan
        .queue(&q, team, stream, arrays.iter().copied(), scratch)
}

/// Whether [`make`] may take a collective scratch lease for the call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Lease {
    /// A call that will note its use of the lease when queued ([`run`], [`prepare`]).
    Take,
    /// The bare launch ([`bare`]), which notes no uses: a call that needs scratch is refused.
    Refuse,
}

/// A checked call chosen and planned ([`make`]).
struct Made {
    alg: &'static dyn Algorithm,
    plan: Plan,
    /// The lease the plan's scratch addresses are in, if it needs scratch.
    scratch: Option<Arc<crate::memory::Scratch>>,
    /// Whether the reserved scratch ruled out an algorithm ([`choice`]): then the plan must
    /// not be kept.
    room_mattered: bool,
}

/// What every way of queuing a checked call shares ([`run`], [`prepare`], [`bare`]): the
/// collective scratch reserved now weighed ([`Call::room`]), the algorithm chosen (`forced`,
/// or the automatic choice), the scratch it needs leased (none for an empty call, which
/// queues nothing) and its plan made with every kernel compiled in `stream`'s context. What
/// is kept, noted or queued is the caller's.
fn make(
    team: &Team,
    mut call: Call<'_>,
    forced: Option<&'static dyn Algorithm>,
    lease: Lease,
    stream: &CudaStream,
) -> Result<Made> {
    let rt = team.runtime();
    call.room = rt.scratch_bytes();
    let (alg, room_mattered) = choice(&call, forced)?;
    let scratch = match alg.scratch(&call) {
        0 => None,
        _ if call.is_empty() => None,
        _ if lease == Lease::Refuse => return Err(not_one_kernel(call.coll, alg)),
        bytes => Some(rt.heap().scratch(call.name, bytes)?),
    };
    call.scratch = scratch.as_ref().map_or(0, |s| s.ptr());
    Ok(Made {
        alg,
        plan: Plan::make(alg, &call, stream)?,
        scratch,
        room_mattered,
    })
}

/// What a call queues once checked, chosen and planned: the plan's steps with every kernel
/// compiled, and, when the whole plan is one kernel of this crate, that kernel resolved. Made
/// per call ([`run`], which keeps it in the team's [`Plans`]) or once for many starts
/// ([`Planned`]); both queue it through [`Plan::queue`].
pub(crate) struct Plan {
    name: &'static str,
    /// Whether the call has nothing to move (no elements): nothing is noted or queued.
    empty: bool,
    /// The steps; empty for an empty call, and for a plan with nothing to queue (a one-PE
    /// call in place), which still notes its uses.
    steps: Vec<Step>,
    /// The plan's one kernel of this crate, resolved, when that is the whole plan.
    kernel: Option<(
        cudarc::driver::sys::CUfunction,
        crate::kernels::NvlinkLaunch,
    )>,
}

// SAFETY: the raw function handle is a CUDA driver handle, usable from any thread with its
// context current (every start makes it so); the rest is Send and Sync.
unsafe impl Send for Plan {}
// SAFETY: as above; queuing only reads the plan.
unsafe impl Sync for Plan {}

/// Where NVSHMEM's collectives are checked too (`RuntimeBuilder::check_nvshmem_calls`): a plan
/// that queues one on a team with a channel starts with this crate's flag sync, carrying the
/// call's fingerprint (`kernels/PROTOCOL.md`, "Fingerprints").
pub(super) fn check_nvshmem_first(call: &Call, steps: &mut Vec<Step>) {
    if call.descriptor.is_some_and(|d| d.check >= 2)
        && steps.iter().any(Step::uses_nvshmem_collectives)
    {
        steps.insert(0, Step::Kernel(super::nvlink::flag_barrier(call, false)));
    }
}

impl Plan {
    /// The plan of `alg` for `call` (scratch already set), its kernels compiled and loaded in
    /// `stream`'s context.
    fn make(alg: &dyn Algorithm, call: &Call, stream: &CudaStream) -> Result<Plan> {
        let mut plan = Plan {
            name: call.name,
            empty: call.is_empty(),
            steps: Vec::new(),
            kernel: None,
        };
        if plan.empty {
            return Ok(plan);
        }
        alg.plan(call, &mut plan.steps);
        check_nvshmem_first(call, &mut plan.steps);
        for step in &plan.steps {
            if let Step::Kernel(launch) | Step::ClosingKernel(launch) = step {
                kernels::prepare(stream, launch.key())?;
            }
        }
        if let [Step::Kernel(kernels::Launch::Nvlink(l))] = plan.steps.as_slice() {
            plan.kernel = Some((l.resolve(stream)?, l.clone()));
        }
        Ok(plan)
    }

    /// Queues the plan on `stream` (checked by `q`), after noting the uses of the team, of
    /// `arrays` and of the `scratch` lease: the one way every call and every start queues.
    fn queue<'a>(
        &self,
        q: &Enqueue<'_>,
        team: &Team,
        stream: &Arc<CudaStream>,
        arrays: impl Iterator<Item = &'a Arc<Alloc>>,
        scratch: Option<&Arc<crate::memory::Scratch>>,
    ) -> Result<()> {
        if self.empty {
            return Ok(());
        }
        // The team first: its order makes this stream wait for the team's earlier calls. Its
        // turn, and the scratch's, are held until the work is queued (dropped at the end).
        let _team = q.turn(team.inner())?;
        for a in arrays {
            q.uses(a)?;
        }
        let _scratch = scratch.map(|s| q.turn(s)).transpose()?;
        if let Some((function, launch)) = &self.kernel {
            // SAFETY: `function` was resolved for this launch in the runtime's context (made
            // current by `enqueue`), whose kernel cache keeps its module loaded while the
            // runtime lives (the team holds it); the launch's addresses are the team's channel
            // (the team is held) and the call's arrays, held by the caller, whose use on this
            // stream was just noted.
            return unsafe { launch.fire(*function, stream) };
        }
        self.queue_steps(q, team, stream)
    }

    /// [`Plan::queue`] for a plan that is not one kernel of this crate (NVSHMEM's path, copies,
    /// several steps). Inlined, with the NVSHMEM calls under it, as the one-kernel path is: the
    /// frames a call returns through after NVSHMEM's call are code and stack that call has
    /// evicted from the caches (docs/performance.md, "Host time per call").
    #[inline]
    fn queue_steps(&self, q: &Enqueue<'_>, team: &Team, stream: &Arc<CudaStream>) -> Result<()> {
        let side = self
            .steps
            .contains(&Step::Fork)
            .then(|| team.inner().lane.side(stream))
            .transpose()?;
        let rt = team.runtime();
        let mut device = queue::Device {
            nv: rt.nv(),
            team: team.handle(),
            stream,
            cu: q.cu,
            side,
            call: self.name,
            watch: (!q.capturing()).then(|| (rt.health(), &team.inner().name)),
        };
        queue::execute(&self.steps, &mut device)
    }
}

/// What a scratch-free plan is made from, besides the team (each team keeps its own
/// [`Plans`]): the call's arguments and what is forced for its collective, so that a change
/// of either plans anew.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PlanKey {
    call: CallKey,
    forcing: ForcedChoice,
}

/// A team's most recent scratch-free plans ([`run`]), newest first. Small and scanned in
/// order: a program repeats a few calls, and comparing a key costs less than hashing it. A
/// plan is queued under the lock, in place: a repeated call touches as little memory as it
/// can after the driver's last launch has evicted it from the caches (a team's calls are
/// ordered one after another anyway).
#[derive(Default)]
pub(crate) struct Plans(std::sync::Mutex<Vec<(PlanKey, Plan)>>);

impl Plans {
    /// How many plans a team keeps.
    const KEPT: usize = 16;

    /// Runs `f` on the plan kept for `key`, if any, which becomes the newest.
    fn with<R>(&self, key: &PlanKey, f: impl FnOnce(&Plan) -> R) -> Option<R> {
        let mut plans = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let i = plans.iter().position(|(k, _)| k == key)?;
        plans[..=i].rotate_right(1);
        Some(f(&plans[0].1))
    }

    /// Keeps `plan` for `key` as the newest (the oldest beyond [`Plans::KEPT`] is dropped)
    /// and runs `f` on it.
    fn insert_with<R>(&self, key: PlanKey, plan: Plan, f: impl FnOnce(&Plan) -> R) -> R {
        let mut plans = self.0.lock().unwrap_or_else(|p| p.into_inner());
        plans.retain(|(k, _)| *k != key);
        plans.truncate(Self::KEPT - 1);
        plans.insert(0, (key, plan));
        f(&plans[0].1)
    }
}

impl std::fmt::Debug for Plans {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let n = self.0.lock().map_or(0, |p| p.len());
        write!(f, "Plans({n})")
    }
}

/// A call checked, chosen and planned once ([`prepare`]), to be queued as often as wanted by
/// [`Planned::start`]: its [`Plan`], the arrays it was made for and the scratch lease it
/// planned on.
pub(crate) struct Planned {
    plan: Plan,
    /// What every start notes its use of: the call's arrays, the scratch lease.
    arrays: Vec<Arc<Alloc>>,
    scratch: Option<Arc<crate::memory::Scratch>>,
}

/// Chooses and plans `call` once, as [`run`] would, for [`Planned::start`]: the scratch lease
/// and every kernel are taken now.
pub(crate) fn prepare(team: &Team, call: Call, arrays: &[&Arc<Alloc>]) -> Result<Planned> {
    let rt = team.runtime();
    let own = rt.stream().clone();
    rt.enter(call.name, &own)?;
    let forced = rt.forced_algorithms().forced(call.coll);
    let made = make(team, call, forced, Lease::Take, &own)?;
    Ok(Planned {
        plan: made.plan,
        arrays: arrays.iter().map(|a| Arc::clone(a)).collect(),
        scratch: made.scratch,
    })
}

impl Planned {
    /// Queues the planned call on `stream`, noting its uses as [`run`] does.
    pub(crate) fn start(&self, team: &Team, stream: &Arc<CudaStream>) -> Result<()> {
        let q = team.runtime().enqueue(self.plan.name, stream)?;
        self.plan
            .queue(&q, team, stream, self.arrays.iter(), self.scratch.as_ref())
    }
}

/// A call's one kernel launch, resolved once: for the host-overhead bench, which times a bare
/// `cuLaunchKernel` of the kernel a call queues against the whole call (see
/// [`Team::bare_launch_for_bench`]).
#[doc(hidden)]
pub struct ResolvedKernel {
    function: cudarc::driver::sys::CUfunction,
    launch: crate::kernels::NvlinkLaunch,
    /// The runtime, which keeps the kernels' module alive, and the team, which keeps its
    /// channel.
    rt: Runtime,
    _team: Team,
}

impl ResolvedKernel {
    /// Queues the kernel once more on `stream` (which must be the stream it was resolved
    /// for): one `cuLaunchKernel`, nothing else. Every PE must fire as often as the others.
    ///
    /// # Safety
    /// The arrays the launch was resolved from are alive, and stay alive until the stream has
    /// passed every launch queued by this (nothing notes their use), and no other call on the
    /// team runs on another stream meanwhile.
    pub unsafe fn fire(&self, stream: &CudaStream) -> Result<()> {
        self.rt.enter("bare launch", stream)?;
        // SAFETY: `function` was resolved for this launch in the runtime's context (current
        // after `enter`), whose kernel cache keeps the module loaded; the launch's addresses
        // are the team's channel (kept by `_team`) and the arrays, which the caller keeps
        // alive.
        unsafe { self.launch.fire(self.function, stream) }
    }
}

/// Plans `call` as [`run`] would and returns its one kernel launch, resolved.
pub(crate) fn bare(team: &Team, call: Call, stream: &CudaStream) -> Result<ResolvedKernel> {
    let rt = team.runtime();
    rt.enter(call.name, stream)?;
    let coll = call.coll;
    let forced = rt.forced_algorithms().forced(coll);
    let made = make(team, call, forced, Lease::Refuse, stream)?;
    match made.plan.kernel {
        Some((function, launch)) => Ok(ResolvedKernel {
            function,
            launch,
            rt: rt.clone(),
            _team: team.clone(),
        }),
        None => Err(not_one_kernel(coll, made.alg)),
    }
}

/// The bare launch's refusal of a call of `coll` that `alg` does not run as one kernel of
/// this crate (or runs with scratch, whose use a bare launch cannot note).
fn not_one_kernel(coll: Collective, alg: &dyn Algorithm) -> Error {
    Error::Unsupported {
        call: "bare_launch_for_bench",
        what: format!(
            "{coll} runs as {}, not one kernel of this crate",
            alg.name()
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Collective, ForcedTable};
    use super::*;
    use crate::collective::{Args, Bufs};
    use crate::{collective::check::Span, DataType, ReduceOp};

    fn plan_named(name: &'static str) -> Plan {
        Plan {
            name,
            empty: false,
            steps: Vec::new(),
            kernel: None,
        }
    }

    /// The key of a call on f32 buffers of `count` elements (one buffer when `in_place`).
    fn key(coll: Collective, op: Option<ReduceOp>, count: usize, in_place: bool) -> PlanKey {
        key_of(coll, op, Span::new(0x1000, count, 4), in_place, None, None)
    }

    fn key_of(
        coll: Collective,
        op: Option<ReduceOp>,
        src: Span,
        in_place: bool,
        shape: Option<&[usize]>,
        forced: Option<&'static str>,
    ) -> PlanKey {
        let forcing = ForcedTable::default();
        forcing
            .set(coll, forced)
            .expect("an algorithm of the collective");
        let dst = Span::new(0x9000, src.len, src.elem);
        let bufs = match in_place {
            true => Bufs::InPlace { buf: src, shape },
            false => Bufs::Two {
                src,
                src_shape: shape,
                dst,
                dst_shape: None,
            },
        };
        let args = Args {
            coll,
            name: "test",
            dtype: DataType::F32,
            op,
            root: None,
            bufs,
        };
        PlanKey {
            call: args.key(),
            forcing: forcing.choice(coll),
        }
    }

    #[test]
    fn a_plan_is_reused_only_for_a_call_that_plans_alike() {
        let (ar, sum) = (Collective::AllReduce, Some(ReduceOp::Sum));
        let base = key(ar, sum, 1024, false);
        assert_eq!(base, key(ar, sum, 1024, false));
        assert!(!base.call.shaped);
        let elsewhere = Span::new(0x1100, 1024, 4);
        let differ = [
            key_of(ar, sum, elsewhere, false, None, None),
            key(ar, sum, 1023, false),
            key(ar, Some(ReduceOp::Max), 1024, false),
            key(ar, sum, 1024, true),
            key(Collective::Broadcast, None, 1024, false),
            key_of(
                ar,
                sum,
                Span::new(0x1000, 1024, 4),
                false,
                None,
                Some("nvshmem"),
            ),
            key_of(ar, sum, Span::new(0x1000, 1024, 2), false, None, None),
        ];
        for (i, k) in differ.iter().enumerate() {
            assert_ne!(base, *k, "variant {i} must plan anew");
        }
        let mut rooted = Args {
            coll: Collective::Broadcast,
            name: "broadcast",
            dtype: DataType::F32,
            op: None,
            root: Some(0),
            bufs: Bufs::None,
        };
        let root0 = rooted.key();
        rooted.root = Some(1);
        assert_ne!(root0, rooted.key());
        rooted.dtype = DataType::I32;
        assert_ne!(root0, rooted.key());
        // Scales compare by their bits: 0.0 and -0.0 give results of different signs.
        let scaled = |s: f64| key(ar, Some(ReduceOp::PreMulSum(s)), 1024, false);
        assert_eq!(scaled(0.5), scaled(0.5));
        assert_ne!(scaled(0.0), scaled(-0.0));
        assert_ne!(scaled(0.5), base);
        // A shaped buffer's key says so: its call is checked before the plan is looked up.
        let shaped = key_of(
            ar,
            sum,
            Span::new(0x1000, 1024, 4),
            false,
            Some(&[32, 32]),
            None,
        );
        assert!(shaped.call.shaped);
    }

    #[test]
    fn a_team_keeps_its_most_recent_plans() {
        let keys: Vec<PlanKey> = (1..=Plans::KEPT + 1)
            .map(|n| key(Collective::AllReduce, Some(ReduceOp::Sum), n, false))
            .collect();
        let plans = Plans::default();
        let name = |k: &PlanKey| plans.with(k, |p| p.name);
        assert_eq!(name(&keys[0]), None);
        assert_eq!(
            plans.insert_with(keys[0], plan_named("first"), |p| p.name),
            "first"
        );
        assert_eq!(name(&keys[0]), Some("first"));
        for k in &keys[1..Plans::KEPT] {
            plans.insert_with(*k, plan_named("more"), |_| ());
        }
        // The first key, used again, is the newest: the next insert evicts the second.
        assert_eq!(name(&keys[0]), Some("first"));
        plans.insert_with(keys[Plans::KEPT], plan_named("last"), |_| ());
        assert_eq!(name(&keys[0]), Some("first"));
        assert_eq!(name(&keys[1]), None);
        assert_eq!(name(&keys[2]), Some("more"));
        assert_eq!(name(&keys[Plans::KEPT]), Some("last"));
        // Inserting a key again replaces its plan instead of keeping two.
        plans.insert_with(keys[Plans::KEPT], plan_named("again"), |_| ());
        assert_eq!(name(&keys[Plans::KEPT]), Some("again"));
        assert_eq!(plans.0.lock().unwrap().len(), Plans::KEPT);
    }
}
