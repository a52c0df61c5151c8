//! Queuing a chosen algorithm's plan: at once ([`run`]), prepared once and started many
//! times ([`Planned`]), or as one bare kernel launch for the host-overhead bench
//! ([`ResolvedKernel`]).
use std::sync::Arc;

use cudarc::driver::CudaStream;

use super::*;

/// Chooses, plans and queues `call` on `stream`. `arrays` are the allocations its buffers are
/// part of: the call notes its use of them, of the team and of the scratch, before queuing
/// anything (see [`crate::runtime::streams`]).
pub(crate) fn run(
    team: &Team,
    mut call: Call,
    arrays: &[&Arc<Alloc>],
    stream: &Arc<CudaStream>,
) -> Result<()> {
    let rt = team.runtime();
    let q = rt.enqueue(call.name, stream)?;
    let alg = choose(&call, rt.collectives().forced(call.coll))?;
    if call.is_empty() {
        return Ok(());
    }
    let scratch = match alg.scratch(&call) {
        0 => None,
        bytes => Some(rt.heap().scratch(call.name, bytes)?),
    };
    call.scratch = scratch.as_ref().map_or(0, |s| s.ptr());
    let mut steps = Vec::with_capacity(4);
    alg.plan(&call, &mut steps);
    let side = steps
        .contains(&Step::Fork)
        .then(|| team.inner().lane.side(stream))
        .transpose()?;
    // The team first: its order makes this stream wait for the team's earlier calls.
    q.uses(team.inner())?;
    for a in arrays {
        q.uses(*a)?;
    }
    if let Some(s) = &scratch {
        q.uses(s)?;
    }
    let mut device = queue::Device {
        nv: rt.nv(),
        team: team.handle(),
        stream,
        cu: q.cu,
        side,
    };
    queue::execute(&steps, &mut device)
}

/// A call checked, chosen and planned once ([`prepare`]), to be queued as often as wanted by
/// [`Planned::start`]: what [`run`] does on every call, less the choice, the plan and the
/// kernel lookup.
pub(crate) struct Planned {
    name: &'static str,
    /// Whether the call has nothing to move (no elements): nothing is noted or queued.
    empty: bool,
    /// The plan's steps; empty for an empty call, and for a plan with nothing to queue (a
    /// one-PE call in place), which still notes its uses.
    steps: Vec<Step>,
    /// The plan's one kernel of this crate, resolved, when that is the whole plan.
    kernel: Option<(
        cudarc::driver::sys::CUfunction,
        crate::kernels::NvlinkLaunch,
    )>,
    /// What every start notes its use of: the call's arrays, the scratch lease it planned on.
    arrays: Vec<Arc<Alloc>>,
    scratch: Option<Arc<crate::memory::Scratch>>,
}

// SAFETY: the raw function handle is a CUDA driver handle, usable from any thread with its
// context current (every start makes it so); the rest is Send and Sync.
unsafe impl Send for Planned {}
// SAFETY: as above; starting only reads the plan.
unsafe impl Sync for Planned {}

/// Chooses and plans `call` once, as [`run`] would, for [`Planned::start`]: the scratch lease
/// and every kernel are taken now.
pub(crate) fn prepare(team: &Team, mut call: Call, arrays: &[&Arc<Alloc>]) -> Result<Planned> {
    let rt = team.runtime();
    let own = rt.stream().clone();
    rt.enter(call.name, &own)?;
    let alg = choose(&call, rt.collectives().forced(call.coll))?;
    let mut planned = Planned {
        name: call.name,
        empty: call.is_empty(),
        steps: Vec::new(),
        kernel: None,
        arrays: arrays.iter().map(|a| Arc::clone(a)).collect(),
        scratch: None,
    };
    if call.is_empty() {
        return Ok(planned);
    }
    planned.scratch = match alg.scratch(&call) {
        0 => None,
        bytes => Some(rt.heap().scratch(call.name, bytes)?),
    };
    call.scratch = planned.scratch.as_ref().map_or(0, |s| s.ptr());
    alg.plan(&call, &mut planned.steps);
    for step in &planned.steps {
        if let Step::Kernel(launch) | Step::ClosingKernel(launch) = step {
            kernels::prepare(&own, launch.key())?;
        }
    }
    if let [Step::Kernel(kernels::Launch::Nvlink(l))] = planned.steps.as_slice() {
        planned.kernel = Some((l.resolve(&own)?, l.clone()));
    }
    Ok(planned)
}

impl Planned {
    /// Queues the planned call on `stream`, noting its uses as [`run`] does.
    pub(crate) fn start(&self, team: &Team, stream: &Arc<CudaStream>) -> Result<()> {
        let rt = team.runtime();
        let q = rt.enqueue(self.name, stream)?;
        if self.empty {
            return Ok(());
        }
        q.uses(team.inner())?;
        for a in &self.arrays {
            q.uses(a)?;
        }
        if let Some(s) = &self.scratch {
            q.uses(s)?;
        }
        if let Some((function, launch)) = &self.kernel {
            // SAFETY: `function` was resolved for this launch in the runtime's context (made
            // current by `enqueue`), whose kernel cache keeps its module loaded while the
            // runtime lives (the team holds it); the launch's addresses are the team's channel
            // (the team is held) and the arrays (held, and borrowed by the prepared call), whose
            // use on this stream was just noted.
            return unsafe { launch.fire(*function, stream) };
        }
        let side = self
            .steps
            .contains(&Step::Fork)
            .then(|| team.inner().lane.side(stream))
            .transpose()?;
        let mut device = queue::Device {
            nv: rt.nv(),
            team: team.handle(),
            stream,
            cu: q.cu,
            side,
        };
        queue::execute(&self.steps, &mut device)
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
    let alg = choose(&call, rt.collectives().forced(call.coll))?;
    let mut steps = Vec::new();
    if alg.scratch(&call) == 0 {
        alg.plan(&call, &mut steps);
    }
    match steps.as_slice() {
        [Step::Kernel(crate::kernels::Launch::Nvlink(l))] => Ok(ResolvedKernel {
            function: l.resolve(stream)?,
            launch: l.clone(),
            rt: rt.clone(),
            _team: team.clone(),
        }),
        _ => Err(Error::Unsupported {
            call: "bare_launch_for_bench",
            what: format!(
                "{} runs as {}, not one kernel of this crate",
                call.coll,
                alg.name()
            ),
        }),
    }
}
