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
//! every member is peer-mapped, in place, root) is the same on every PE of the team, so every
//! PE chooses alike and queues matching steps: no PE is left waiting for another.
mod ce;
pub(crate) mod channel;
mod nvlink;
mod nvshmem;
mod peer;
pub(crate) mod queue;
mod rooted;

use std::{
    fmt,
    str::FromStr,
    sync::atomic::{AtomicUsize, Ordering},
};

use cudarc::driver::CudaStream;

use super::check::Span;
use crate::{
    kernels::{self, NvrTeam},
    runtime::{Closing, Identity, Layer, Settings},
    team::TeamShape,
    DataType, Error, ReduceOp, Result, Runtime, RuntimeBuilder, Team,
};
use channel::{Channels, Sizing};
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
    /// The NVLink kernels' view of the team on this call's stream (its channel), when the
    /// team can use them.
    pub(crate) nvr: Option<NvrTeam>,
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
    /// Whether it runs on the team's channel (this crate's NVLink kernels): only then does a
    /// call look the channel up (or bind one), which costs host time on every call.
    fn uses_channel(&self) -> bool {
        false
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

/// Chooses, plans and queues `call` on `stream`.
pub(crate) fn run(team: &Team, mut call: Call, stream: &CudaStream) -> Result<()> {
    let rt = team.runtime();
    let cu = rt.enter(call.name, stream)?;
    let alg = choose_on(team, &mut call, stream)?;
    if call.is_empty() {
        return Ok(());
    }
    let lease = match alg.scratch(&call) {
        0 => None,
        bytes => Some(rt.heap().scratch(call.name, bytes)?),
    };
    call.scratch = lease.as_ref().map_or(0, |l| l.ptr());
    let mut steps = Vec::with_capacity(4);
    alg.plan(&call, &mut steps);
    let side = steps
        .contains(&Step::Fork)
        .then(|| rt.collectives().side(&call, stream))
        .transpose()?;
    let mut device = queue::Device {
        nv: rt.nv(),
        team: team.handle(),
        stream,
        cu,
        side,
    };
    let done = queue::execute(&steps, &mut device);
    // The scratch is held until everything using it is queued.
    drop(lease);
    done
}

/// The algorithm for `call` on `stream` (the runtime's context current), with the team's
/// channel looked up (or bound) into `call` when the choice may need it.
fn choose_on(team: &Team, call: &mut Call, stream: &CudaStream) -> Result<&'static dyn Algorithm> {
    let state = team.runtime().collectives();
    let forced = state.forced.get(call.coll);
    // The same on every PE: forcing is made alike everywhere.
    if forced.is_none_or(|a| a.uses_channel()) {
        call.nvr = state.channels.team_view(team, stream)?;
    }
    choose(call, forced)
}

/// A call's one kernel launch, resolved once: for the host-overhead bench, which times a bare
/// `cuLaunchKernel` of the kernel a call queues against the whole call (see
/// [`Team::bare_launch_for_bench`]).
#[doc(hidden)]
pub struct BareLaunch {
    function: cudarc::driver::sys::CUfunction,
    launch: crate::kernels::NvrLaunch,
    /// The runtime, which keeps the channel and the kernels' module alive.
    rt: Runtime,
}

impl BareLaunch {
    /// Queues the kernel once more on `stream` (which must be the stream it was resolved
    /// for): one `cuLaunchKernel`, nothing else. Every PE must fire as often as the others.
    pub fn fire(&self, stream: &CudaStream) -> Result<()> {
        self.rt.enter("bare launch", stream)?;
        // SAFETY: `function` was resolved for this launch in the runtime's context (current
        // after `enter`), whose kernel cache keeps the module loaded; the launch's addresses
        // are the channel (alive with the runtime) and the arrays it was made from, which the
        // bench keeps alive until its streams are synchronised.
        unsafe { crate::kernels::fire_nvr(self.function, stream, &self.launch) }
    }
}

/// Plans `call` as [`run`] would and returns its one kernel launch, resolved.
pub(crate) fn bare(team: &Team, mut call: Call, stream: &CudaStream) -> Result<BareLaunch> {
    let rt = team.runtime();
    rt.enter(call.name, stream)?;
    let alg = choose_on(team, &mut call, stream)?;
    let mut steps = Vec::new();
    if alg.scratch(&call) == 0 {
        alg.plan(&call, &mut steps);
    }
    match steps.as_slice() {
        [Step::Kernel(crate::kernels::Launch::Nvr(l))] => Ok(BareLaunch {
            function: crate::kernels::resolve_nvr(stream, l)?,
            launch: l.clone(),
            rt: rt.clone(),
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

/// The collectives' state in a runtime: the algorithm forced for each collective (an index
/// into its registry, plus one; 0 for the automatic choice), and the NVLink kernels' channels.
pub(crate) struct Collectives {
    forced: Forced,
    channels: Channels,
    /// The side streams of the channels that have needed one, by channel address (made on
    /// first use, kept for the runtime's life: few, since channels are).
    sides: std::sync::Mutex<Vec<(u64, std::sync::Arc<queue::Side>)>>,
}

impl Collectives {
    /// The side stream of `call`'s channel (its stream's), made on first use.
    fn side(&self, call: &Call, stream: &CudaStream) -> Result<std::sync::Arc<queue::Side>> {
        let chan = call.nvr.as_ref().map_or(0, |t| t.chan);
        let mut sides = self.sides.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((_, s)) = sides.iter().find(|(c, _)| *c == chan) {
            return Ok(s.clone());
        }
        let side = std::sync::Arc::new(queue::Side::new(stream)?);
        sides.push((chan, side.clone()));
        Ok(side)
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

/// Attaches the collectives' state to a starting runtime: the builder's forced algorithms,
/// then the environment's.
pub(crate) fn attach(rt: &Runtime, settings: &Settings) -> Result<Box<dyn Layer>> {
    let mut sizing = Sizing::for_heap(rt.info().heap_size);
    if let Some(n) = settings.get("channels").last() {
        sizing.channels = n.parse().expect("RuntimeBuilder::channels writes a number");
    }
    let forced = Forced::default();
    for pair in settings.get("algorithm") {
        forced
            .apply(pair)
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
    let channels = Channels::new(rt, sizing)?;
    exchange_identities(rt)?;
    Ok(Box::new(Collectives {
        forced,
        channels,
        sides: Default::default(),
    }))
}

/// Hands every PE's process identity to the runtime's watchdog, so that it can tell when a
/// peer on this host dies or is stopped (see [Health](crate::runtime#health)). One fcollect
/// over the world at start-up; here because it needs the heap and the world team.
fn exchange_identities(rt: &Runtime) -> Result<()> {
    const CALL: &str = "Runtime::init (identity exchange)";
    let bytes = Identity::WORDS * 8;
    let n = rt.n_pes();
    let block = rt.heap().alloc(rt, bytes * (n + 1), true)?;
    let (mine, all) = (block.ptr, block.ptr + bytes as u64);
    let stream = rt.stream();
    let exchanged = (|| {
        let cu = rt.enter(CALL, stream)?;
        rt.copy_in(
            CALL,
            mine,
            bytemuck::cast_slice(&Identity::own().words),
            stream,
        )?;
        // SAFETY: `all` holds one identity per world PE and is disjoint from `mine`, both in
        // this runtime's symmetric block; the world team is valid; the stream is live and
        // current.
        unsafe { rt.nv().fcollect(rt.world().handle(), all, mine, bytes, cu) }?;
        let mut out = vec![0u8; bytes * n];
        rt.copy_out(CALL, &mut out, all, stream)?;
        stream
            .synchronize()
            .map_err(Error::cuda("synchronising the identity exchange"))?;
        Ok::<_, Error>(out)
    })();
    // Freed at the next allocation, in stream order, on every PE alike.
    rt.heap().retire(block);
    let ids = exchanged?
        .chunks_exact(bytes)
        .map(|c| Identity {
            words: std::array::from_fn(|i| {
                u64::from_ne_bytes(c[8 * i..8 * i + 8].try_into().expect("8 bytes"))
            }),
        })
        .collect();
    rt.health().watch_peers(ids);
    Ok(())
}

impl Layer for Collectives {
    fn close(&self, _: &Closing<'_>) {}

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

impl Runtime {
    fn collectives(&self) -> &Collectives {
        self.layer::<Collectives>()
    }

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

    /// Bytes of symmetric memory this crate's NVLink collectives hold, whatever the message
    /// sizes: a fixed pool of channels, allocated at start-up.
    ///
    /// ```no_run
    /// # let rt = nvshmem::Runtime::init()?;
    /// println!("{} bytes for the NVLink collectives", rt.collective_memory());
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    pub fn collective_memory(&self) -> usize {
        self.collectives().channels.pool_bytes()
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
    pub fn algorithm(self, coll: Collective, algorithm: &str) -> Self {
        self.with_setting("algorithm", format!("{coll}={algorithm}"))
    }

    /// How many (team, stream) pairs can use this crate's NVLink collectives at once (default
    /// 8, fewer on a heap under 256 MiB, at most 64). Each channel is a fixed amount of
    /// symmetric memory (about 2 MiB), allocated when the runtime starts; a pair that finds
    /// none free runs NVSHMEM's collectives instead.
    ///
    /// ```no_run
    /// let rt = nvshmem::Runtime::builder().channels(16).init()?;
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    pub fn channels(self, count: usize) -> Self {
        self.with_setting("channels", count.to_string())
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
        };
        registry(Collective::AllReduce)
            .iter()
            .any(|a| a.refuses(&call).is_none())
    }
}

#[cfg(test)]
pub(crate) mod tests;
