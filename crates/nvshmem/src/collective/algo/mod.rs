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
mod ce;
pub(crate) mod channel;
pub(crate) mod crossover;
mod nvlink;
mod nvshmem;
mod peer;
pub(crate) mod queue;
mod rooted;

use std::{
    fmt,
    str::FromStr,
    sync::{
        atomic::{AtomicUsize, Ordering},
        Arc,
    },
};

use cudarc::driver::CudaStream;

use super::check::Span;
use crate::{
    kernels::{self, NvrTeam},
    memory::Alloc,
    team::TeamShape,
    DataType, Error, ReduceOp, Result, Runtime, RuntimeBuilder, Team,
};
pub(crate) use queue::Step;

/// The environment variable that forces algorithms, for programs that cannot be rebuilt:
/// `collective=algorithm` pairs separated by commas, e.g.
/// `NVSHMEM_RS_ALGORITHMS=all_reduce=nvshmem,gather=rooted_get`. It overrides
/// [`RuntimeBuilder::algorithm`].
///
/// ```
/// assert_eq!(nvshmem::collective::ALGORITHMS_VAR, "NVSHMEM_RS_ALGORITHMS");
/// ```
pub const ALGORITHMS_VAR: &str = "NVSHMEM_RS_ALGORITHMS";

macro_rules! collectives {
    ($($variant:ident $name:literal [$($alias:literal),*] $doc:literal;)*) => {
        /// A collective operation, to name it when forcing an algorithm or reporting.
        ///
        /// Parsed from its name (`all_reduce`) and from NCCL's and MPI's names for it
        /// (`allreduce`, `AllReduce`, `all_gather`, `MPI_Allgather`, ...).
        ///
        /// ```
        /// use nvshmem::collective::Collective;
        /// assert_eq!("allgather".parse::<Collective>()?, Collective::Fcollect);
        /// assert_eq!(Collective::AllReduce.to_string(), "all_reduce");
        /// assert!(Collective::Gather.algorithms().contains(&"rooted_get"));
        /// # Ok::<(), nvshmem::Error>(())
        /// ```
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[non_exhaustive]
        pub enum Collective {
            $(#[doc = $doc] $variant,)*
        }

        impl Collective {
            /// Every collective.
            ///
            /// ```
            /// assert_eq!(nvshmem::collective::Collective::ALL.len(), 10);
            /// ```
            pub const ALL: [Collective; 10] = [$(Collective::$variant),*];

            /// The name (`all_reduce`, `reduce_scatter`, ...), as the benchmark and
            /// [`ALGORITHMS_VAR`] write it.
            ///
            /// ```
            /// assert_eq!(nvshmem::collective::Collective::ReduceScatter.name(), "reduce_scatter");
            /// ```
            pub const fn name(self) -> &'static str {
                match self { $(Collective::$variant => $name,)* }
            }

            fn aliases(self) -> &'static [&'static str] {
                match self { $(Collective::$variant => &[$($alias),*],)* }
            }
        }
    };
}

collectives! {
    AllReduce "all_reduce" ["allreduce", "mpi_allreduce"] "All-reduce ([`Team::all_reduce`]).";
    Reduce "reduce" ["mpi_reduce"] "Reduce to a root ([`Team::reduce`]).";
    Broadcast "broadcast" ["bcast", "mpi_bcast"] "Broadcast ([`Team::broadcast`]).";
    Fcollect "fcollect" ["all_gather", "allgather", "mpi_allgather"] "All-gather ([`Team::fcollect`]).";
    Alltoall "alltoall" ["all_to_all", "mpi_alltoall"] "All-to-all ([`Team::alltoall`]).";
    ReduceScatter "reduce_scatter" ["reducescatter", "mpi_reduce_scatter_block"] "Reduce-scatter ([`Team::reduce_scatter`]).";
    Gather "gather" ["mpi_gather"] "Gather to a root ([`Team::gather`]).";
    Scatter "scatter" ["mpi_scatter"] "Scatter from a root ([`Team::scatter`]).";
    Barrier "barrier" ["mpi_barrier"] "Barrier ([`Team::barrier`], [`Runtime::barrier_all`]).";
    Sync "sync" ["team_sync", "sync_all"] "Synchronisation ([`Team::sync`], [`Runtime::sync_all`]).";
}

impl Collective {
    /// The names of the algorithms that can run this collective, in the order the automatic
    /// choice tries them.
    ///
    /// ```
    /// use nvshmem::collective::Collective;
    /// assert_eq!(
    ///     Collective::Broadcast.algorithms(),
    ///     ["nvlink_ll", "nvlink_ce", "nvlink_direct", "nvshmem"]
    /// );
    /// ```
    pub fn algorithms(self) -> Vec<&'static str> {
        registry(self).iter().map(|a| a.name()).collect()
    }

    fn index(self) -> usize {
        Collective::ALL
            .iter()
            .position(|&c| c == self)
            .expect("ALL lists every collective")
    }
}

impl fmt::Display for Collective {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Collective {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        let key = s.trim().to_ascii_lowercase().replace('-', "_");
        Collective::ALL
            .into_iter()
            .find(|c| c.name() == key || c.aliases().contains(&key.as_str()))
            .ok_or_else(|| {
                let names: Vec<_> = Collective::ALL.iter().map(|c| c.name()).collect();
                Error::arg(
                    "Collective::from_str",
                    "collective",
                    format_args!("{s:?}: expected one of {}", names.join(", ")),
                )
            })
    }
}

/// One collective call, as every algorithm sees it. Made after the arguments were checked.
#[derive(Debug, Clone)]
pub(crate) struct Call<'a> {
    pub(crate) coll: Collective,
    /// The public call, for errors (`"all_reduce_in_place"`).
    pub(crate) name: &'static str,
    pub(crate) team: &'a TeamShape,
    /// This PE's index in the team.
    pub(crate) me: usize,
    pub(crate) dtype: DataType,
    /// The operator (reductions only; `Sum` otherwise, and unused).
    pub(crate) op: ReduceOp,
    /// The root (rooted collectives only; 0 otherwise).
    pub(crate) root: usize,
    pub(crate) src: Span,
    pub(crate) dst: Span,
    /// Elements of one PE's part: the whole input of all-reduce, reduce and broadcast; one
    /// block of the others (a PE's input of fcollect and gather, its output of reduce-scatter
    /// and scatter, one destination's share of alltoall); 0 for barrier and sync.
    pub(crate) count: usize,
    /// The input is (part of) the output, as the in-place forms define it.
    pub(crate) in_place: bool,
    /// The collective scratch, held for the call (0 when the algorithm needs none).
    pub(crate) scratch: u64,
    /// The NVLink kernels' view of the team (its channel), when the team has one.
    pub(crate) nvr: Option<NvrTeam>,
    /// The architecture of this PE's GPU, which the crossovers depend on
    /// ([`crossover`]); set with `nvr`, `None` (unknown) until then.
    pub(crate) arch: Option<crossover::Arch>,
}

impl Call<'_> {
    /// Whether the collective reduces.
    pub(crate) fn is_reduction(&self) -> bool {
        matches!(
            self.coll,
            Collective::AllReduce | Collective::Reduce | Collective::ReduceScatter
        )
    }

    /// Whether the call has no data to move, and so queues nothing (barrier and sync always
    /// run).
    pub(crate) fn is_empty(&self) -> bool {
        self.count == 0 && !matches!(self.coll, Collective::Barrier | Collective::Sync)
    }

    /// Team size.
    pub(crate) fn n(&self) -> usize {
        self.team.n_pes
    }

    /// Bytes of one PE's part ([`Call::count`] elements).
    pub(crate) fn block_bytes(&self) -> usize {
        self.count * self.dtype.size()
    }

    /// Member `j`'s own block of a gather (its input) or a scatter (its output), as a
    /// symmetric address: the same array on every member, so the same number names it
    /// everywhere. Not in place that is the `src` (gather) or `dst` (scatter) every member
    /// passes; in place, block `j` of the whole buffer.
    pub(crate) fn member_block(&self, j: usize) -> u64 {
        let (whole, own) = match self.coll {
            Collective::Scatter => (&self.src, &self.dst),
            _ => (&self.dst, &self.src),
        };
        if self.in_place {
            whole.ptr + (j * self.block_bytes()) as u64
        } else {
            own.ptr
        }
    }

    /// The address of `addr` (a symmetric address) on team member `j`, as this GPU loads and
    /// stores it; `None` unless every member is peer-mapped.
    pub(crate) fn peer(&self, addr: u64, j: usize) -> Option<u64> {
        let off = self.team.peer_offsets.as_ref()?;
        Some(addr.wrapping_add(off[j] as u64))
    }

    /// Whether this PE can load and store every member's symmetric memory.
    pub(crate) fn peer_mapped(&self) -> bool {
        self.team.peer_offsets.is_some()
    }
}

/// One way to run a collective.
pub(crate) trait Algorithm: Sync {
    /// The name users force it by.
    fn name(&self) -> &'static str;
    /// Why it cannot run `call`, or `None` when it can. A pure function of what every PE of
    /// the team passes alike.
    fn refuses(&self, call: &Call) -> Option<String>;
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
    use nvlink::{Direct, Flags, Ll};
    use nvshmem::{Native, ScaleThenSum, SumThenDiv};
    use peer::{PeerCopy, PeerKernel};
    use rooted::RootedGet;
    match coll {
        Collective::AllReduce | Collective::Reduce | Collective::ReduceScatter => &[
            &Ll,
            &Direct,
            &Native,
            &SumThenDiv,
            &ScaleThenSum,
            &PeerKernel,
        ],
        Collective::Broadcast | Collective::Fcollect | Collective::Alltoall => {
            &[&Ll, &Ce, &Direct, &Native]
        }
        Collective::Barrier | Collective::Sync => &[&Flags, &Native],
        Collective::Gather | Collective::Scatter => &[&Ll, &Ce, &Direct, &RootedGet, &PeerCopy],
    }
}

/// The algorithm for `call`: `forced`, if it accepts the call, else the first of the registry
/// that does.
pub(crate) fn choose(
    call: &Call,
    forced: Option<&'static dyn Algorithm>,
) -> Result<&'static dyn Algorithm> {
    if let Some(a) = forced {
        return match a.refuses(call) {
            None => Ok(a),
            Some(reason) => Err(Error::AlgorithmRefused {
                call: call.name,
                algorithm: a.name(),
                reason,
            }),
        };
    }
    let mut why = Vec::new();
    let mut fallback = None;
    for &a in registry(call.coll) {
        match a.refuses(call) {
            None if a.prefers(call) => return Ok(a),
            None => {
                fallback.get_or_insert(a);
            }
            Some(reason) => why.push(format!("{}: {reason}", a.name())),
        }
    }
    if let Some(a) = fallback {
        return Ok(a);
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
    let alg = choose(&call, rt.collectives().forced.get(call.coll))?;
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
    /// The plan's steps; empty for a call with nothing to move.
    steps: Vec<Step>,
    /// The plan's one kernel of this crate, resolved, when that is the whole plan.
    kernel: Option<(cudarc::driver::sys::CUfunction, crate::kernels::NvrLaunch)>,
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
    let alg = choose(&call, rt.collectives().forced.get(call.coll))?;
    let mut planned = Planned {
        name: call.name,
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
    if let [Step::Kernel(kernels::Launch::Nvr(l))] = planned.steps.as_slice() {
        planned.kernel = Some((kernels::resolve_nvr(&own, l)?, l.clone()));
    }
    Ok(planned)
}

impl Planned {
    /// Queues the planned call on `stream`, noting its uses as [`run`] does.
    pub(crate) fn start(&self, team: &Team, stream: &Arc<CudaStream>) -> Result<()> {
        let rt = team.runtime();
        let q = rt.enqueue(self.name, stream)?;
        if self.steps.is_empty() {
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
            return unsafe { kernels::fire_nvr(*function, stream, launch) };
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
pub struct BareLaunch {
    function: cudarc::driver::sys::CUfunction,
    launch: crate::kernels::NvrLaunch,
    /// The runtime, which keeps the kernels' module alive, and the team, which keeps its
    /// channel.
    rt: Runtime,
    _team: Team,
}

impl BareLaunch {
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
        unsafe { crate::kernels::fire_nvr(self.function, stream, &self.launch) }
    }
}

/// Plans `call` as [`run`] would and returns its one kernel launch, resolved.
pub(crate) fn bare(team: &Team, call: Call, stream: &CudaStream) -> Result<BareLaunch> {
    let rt = team.runtime();
    rt.enter(call.name, stream)?;
    let alg = choose(&call, rt.collectives().forced.get(call.coll))?;
    let mut steps = Vec::new();
    if alg.scratch(&call) == 0 {
        alg.plan(&call, &mut steps);
    }
    match steps.as_slice() {
        [Step::Kernel(crate::kernels::Launch::Nvr(l))] => Ok(BareLaunch {
            function: crate::kernels::resolve_nvr(stream, l)?,
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

/// The collectives' state in a runtime: the algorithm forced for each collective.
pub(crate) struct Collectives {
    forced: Forced,
}

impl Collectives {
    /// The state of a starting runtime, from the builder's forced algorithms, then the
    /// environment's ([`ALGORITHMS_VAR`], which overrides them), and `NVSHMEM_RS_PDL` checked:
    /// judged before NVSHMEM starts, so a bad value never leaves it started.
    pub(crate) fn new(algorithms: &[(Collective, String)]) -> Result<Self> {
        let forced = Forced::default();
        for (coll, name) in algorithms {
            forced
                .set(*coll, Some(name))
                .map_err(|reason| Error::arg("RuntimeBuilder::algorithm", "algorithm", reason))?;
        }
        if let Ok(list) = std::env::var(ALGORITHMS_VAR) {
            forced.apply(&list).map_err(|reason| Error::Environment {
                var: ALGORITHMS_VAR.into(),
                value: list.clone(),
                reason,
            })?;
        }
        if let Ok(value) = std::env::var(kernels::PDL_VAR) {
            kernels::parse_pdl(&value).map_err(|reason| Error::Environment {
                var: kernels::PDL_VAR.into(),
                value: value.clone(),
                reason,
            })?;
        }
        Ok(Collectives { forced })
    }
}

/// The algorithm forced for each collective: an index into its registry, plus one; 0 for the
/// automatic choice.
#[derive(Default)]
pub(super) struct Forced([AtomicUsize; Collective::ALL.len()]);

impl Forced {
    pub(super) fn get(&self, coll: Collective) -> Option<&'static dyn Algorithm> {
        match self.0[coll.index()].load(Ordering::Relaxed) {
            0 => None,
            i => Some(registry(coll)[i - 1]),
        }
    }

    /// Forces the pairs of `list` (`collective=algorithm,...`, as [`ALGORITHMS_VAR`] holds):
    /// the reason for the first that cannot be parsed or names no algorithm of its collective.
    pub(super) fn apply(&self, list: &str) -> std::result::Result<(), String> {
        for (c, a) in parse_forced(list)? {
            self.set(c, Some(&a))?;
        }
        Ok(())
    }

    pub(super) fn set(
        &self,
        coll: Collective,
        algorithm: Option<&str>,
    ) -> std::result::Result<(), String> {
        let index = match algorithm {
            None | Some("auto") => 0,
            Some(name) => {
                registry(coll)
                    .iter()
                    .position(|a| a.name() == name)
                    .ok_or_else(|| {
                        format!(
                            "{coll} has no algorithm {name:?}; it has auto, {}",
                            coll.algorithms().join(", ")
                        )
                    })?
                    + 1
            }
        };
        self.0[coll.index()].store(index, Ordering::Relaxed);
        Ok(())
    }
}

/// Parses `collective=algorithm` pairs separated by commas.
pub(super) fn parse_forced(list: &str) -> std::result::Result<Vec<(Collective, String)>, String> {
    list.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|pair| {
            let (c, a) = pair
                .split_once('=')
                .ok_or_else(|| format!("{pair:?} is not collective=algorithm"))?;
            let c: Collective = c.parse().map_err(|e: Error| e.to_string())?;
            Ok((c, a.trim().to_string()))
        })
        .collect()
}

impl Runtime {
    /// Forces `coll` to run with the algorithm named `algorithm` (one of
    /// [`Collective::algorithms`]), or restores the automatic choice with `None` or
    /// `Some("auto")`. Takes effect for calls made after it; make it on every PE alike, at the
    /// same point of the program. A forced algorithm that cannot run a call makes that call
    /// fail with [`Error::AlgorithmRefused`]. An unknown name is [`Error::InvalidArgument`].
    ///
    /// ```no_run
    /// use nvshmem::collective::Collective;
    /// # let rt = nvshmem::Runtime::init()?;
    /// rt.set_algorithm(Collective::Gather, Some("peer_copy"))?;
    /// assert!(rt.set_algorithm(Collective::Gather, Some("carrier_pigeon")).is_err());
    /// rt.set_algorithm(Collective::Gather, None)?;
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    pub fn set_algorithm(&self, coll: Collective, algorithm: Option<&str>) -> Result<()> {
        self.collectives()
            .forced
            .set(coll, algorithm)
            .map_err(|reason| Error::arg("Runtime::set_algorithm", "algorithm", reason))
    }

    /// The algorithm forced for `coll`, if any.
    ///
    /// ```no_run
    /// use nvshmem::collective::Collective;
    /// # let rt = nvshmem::Runtime::init()?;
    /// assert_eq!(rt.forced_algorithm(Collective::AllReduce), None);
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    pub fn forced_algorithm(&self, coll: Collective) -> Option<&'static str> {
        self.collectives().forced.get(coll).map(|a| a.name())
    }
}

impl RuntimeBuilder {
    /// Forces `coll` to run with the algorithm named `algorithm` (one of
    /// [`Collective::algorithms`]); checked when the runtime starts. The environment variable
    /// [`ALGORITHMS_VAR`] overrides it.
    ///
    /// ```no_run
    /// use nvshmem::{collective::Collective, Runtime};
    /// let rt = Runtime::builder()
    ///     .algorithm(Collective::AllReduce, "nvshmem")
    ///     .init()?;
    /// assert_eq!(rt.forced_algorithm(Collective::AllReduce), Some("nvshmem"));
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    pub fn algorithm(mut self, coll: Collective, algorithm: &str) -> Self {
        self.algorithms.push((coll, algorithm.to_string()));
        self
    }

    /// How many teams can use this crate's NVLink collectives at once (default 8, fewer on a
    /// heap under 256 MiB, at most 64): each such team holds a channel from when it is made
    /// until it is dropped (predefined teams with the world's members share the world's).
    /// Each channel is a fixed amount of symmetric memory (about 2 MiB), allocated when the
    /// runtime starts; a team made when none is free runs NVSHMEM's collectives instead
    /// ([`Team::has_nvlink_kernels`] says which).
    ///
    /// ```no_run
    /// let rt = nvshmem::Runtime::builder().channels(16).init()?;
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    pub fn channels(mut self, count: usize) -> Self {
        self.channels = Some(count);
        self
    }
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
            nvr: None,
            arch: Some((9, 0)),
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
            nvr: None,
            arch: None,
        };
        registry(Collective::AllReduce)
            .iter()
            .any(|a| a.refuses(&call).is_none())
    }
}

#[cfg(test)]
pub(crate) mod tests;
