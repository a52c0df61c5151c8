//! Teams: ordered sets of PEs that collectives run over.
//!
//! Making a team from a parent ([`Team::split_strided`], [`Team::split_2d`],
//! [`Team::from_pes`], [`Team::split`], [`Team::shrink`]) is collective over the parent team:
//! every member of the parent must make the call, in the same order as its other collectives
//! on the parent (not at the same time as one on another stream). Each takes the same
//! arguments on every member, except [`Team::split`], to which each member passes its own
//! colour and key.
//! Every team-making call is an agreement between the parent's members first (each checks that
//! every other makes the same call with the same arguments, within the runtime's timeout:
//! [`Error::OutOfStep`] or [`Error::WaitTimedOut`] otherwise), then NVSHMEM's, then one between
//! the new team's members, which agree on what the collectives need (whether every member can
//! load and store every other's memory, the team's channel, the blocks its kernels may use).
//! Dropping a team is not collective and never waits: the team retires, and NVSHMEM's team is
//! destroyed at the next team-making call (or [`Runtime::free_retired`]) once the work queued
//! on it is done. A [`Graph`](crate::Graph) that captured calls on a team keeps it alive.
//!
//! A team knows, from when it is made, its members' world numbers and whether this PE can load
//! and store every member's symmetric memory directly (and at which offset): what the
//! collectives' own NVLink algorithms need.
//!
//! # Lifecycle: what NCCL's communicators can do that NVSHMEM's teams can, and cannot
//!
//! | NCCL (nccl4py) | here |
//! |---|---|
//! | `split(color, key)` | [`Team::split`]: any partition of a team, ordered by key then by index |
//! | `shrink(exclude_ranks)` | [`Team::shrink`], but every member takes part: it cannot drop a PE that died |
//! | `destroy()` | dropping the [`Team`] |
//! | `grow(nranks, ...)` | cannot exist over NVSHMEM (below) |
//! | `suspend()` / `resume()` | cannot exist over NVSHMEM (below) |
//!
//! **Growing a job cannot exist.** NVSHMEM's set of PEs is fixed when it starts: the bootstrap
//! gives it the number of PEs (`nvshmemx_set_attr_uniqueid_args(rank, nranks, ..)`, or the
//! launcher's), and `nvshmemx_hostlib_init_attr` then maps every PE's symmetric heap into every
//! other's (CUDA IPC handles, or the network's memory keys) and opens the transports between
//! them. Every team, including those made from a unique id with `nvshmemx_team_init`, is a
//! subset of those PEs: NVSHMEM finds a new team's members among the world's PEs, and has no
//! call that adds a process to the world. Nor can a job finalise and start again with more
//! PEs in the same processes: NVSHMEM's specification leaves a second initialisation
//! undefined, and this crate refuses it ([`Error::AlreadyInitialized`]). A larger job is a new
//! launch, which carries its state over by the program's own means (a checkpoint).
//!
//! **Suspending and resuming cannot exist.** NCCL's `suspend` releases a communicator's
//! dynamic GPU memory and `resume` maps it again, the communicator kept. NVSHMEM 3.4 has no
//! such call: the symmetric heap, the team and collective state (`psync` arrays, the
//! `NVSHMEM_MAX_TEAMS` slots), the transports' buffers and the peers' mappings of each PE's
//! heap are made at initialisation (or as allocations grow the heap) and released only by
//! `nvshmemx_hostlib_finalize`, after which NVSHMEM cannot be started again (above). What a
//! program can give back while it runs is its own: dropping arrays and calling
//! [`Runtime::free_retired`] returns them to NVSHMEM's heap (NVSHMEM 3.4's `nvshmem_free`
//! keeps the heap's physical memory mapped), and dropping teams frees their team slots.
//!
//! The files: this one is the team API ([`Team`], the predefined teams, the strided and 2-D
//! splits); `agree.rs` the agreements of a team-making call (the opening one over the parent,
//! the new team's set-up); `registry.rs` the team layer's state in a runtime (the channel
//! pool, the predefined teams, the retired teams) and the making of a team's state;
//! `plan.rs` the arithmetic of splits; `split.rs` and `explicit.rs` the teams by colour and
//! key and by a list of PEs.
//!
//! [`Runtime::free_retired`]: crate::Runtime::free_retired
mod agree;
mod explicit;
mod plan;
#[cfg(test)]
mod props;
mod registry;
mod split;

use std::sync::Arc;

use nvshmem_sys::nvshmem_team_t;

use crate::{
    channel::lane::Lane,
    ffi::TeamHandle,
    kernels::TeamDescriptor,
    runtime::in_use::{Ordered, Resource},
    Error, Result, Runtime,
};
use agree::{make, offer, Agreed, SetUp};
use plan::Strided;
use registry::Retired;
pub(crate) use registry::Teams;

/// What a team is, the same on every member once agreed when the team was made.
#[derive(Debug)]
pub(crate) struct TeamShape {
    pub(crate) handle: TeamHandle,
    /// This PE's index: a `Team` exists only on its members.
    pub(crate) my_pe: usize,
    pub(crate) n_pes: usize,
    /// World number of each member, in team order.
    pub(crate) world: Box<[usize]>,
    /// For each member, what to add to a local symmetric address to reach that member's copy
    /// of it by load and store; `None` unless every member can reach every other so (agreed:
    /// each member says whether it reaches all, and all must).
    pub(crate) peer_offsets: Option<Box<[i64]>>,
    /// The most 512-thread blocks every member can keep resident on its GPU at once (the
    /// smallest of the members' [`RuntimeInfo::resident_blocks`](crate::RuntimeInfo::resident_blocks)),
    /// the same number on every member: this crate's NVLink kernels launch at most this many
    /// blocks a call (`kernels/PROTOCOL.md`, "Residency"), so that every member's blocks of a
    /// call can run at the same time.
    pub(crate) max_blocks: u32,
    /// The NVLink kernels' view of the team (its channel), when it has one.
    pub(crate) descriptor: Option<TeamDescriptor>,
    /// The members' GPU architecture (compute capability major, minor), when every member's
    /// is the same: the automatic choice's crossovers depend on it, and must be read alike on
    /// every member.
    pub(crate) arch: Option<(u32, u32)>,
    /// Whether NVSHMEM's own collectives may run on the team: not on a team made by
    /// `nvshmemx_team_init` (a list that is not an increasing progression of the parent). On
    /// one H100 under MPS, NVSHMEM 3.4.5's all-reduce and broadcast there gave wrong results
    /// at 8 PEs (gpu_scale, 2026-11-24, three runs of three) and its reduce an illegal address
    /// at 4 PEs (2026-11-23). The automatic choice then puts the algorithms that queue NVSHMEM
    /// collectives (`Step::uses_nvshmem_collectives`) last, and forcing one is refused.
    pub(crate) nvshmem_collectives: bool,
    /// Whether some member's GPU is used by other PEs too (several PEs on one GPU under
    /// MPS). NVSHMEM's own kernels do not keep to the blocks a member keeps resident, and at
    /// 4 PEs on one H100 its 64 MiB-a-block reduce-scatter never finished (2026-11-24): the
    /// automatic choice then takes this crate's kernels, which do, wherever one accepts the
    /// call. NVSHMEM's reductions there lost a member's input (8 PEs on 2 x H200 under MPS,
    /// 2026-11-27): forcing one is refused (`collective::algo`, `refusal`).
    pub(crate) shares_gpu: bool,
    /// Whether this PE is the whole job (a world of one PE): then no RMA can be outstanding
    /// but on this PE's own streams, in their order, and a one-PE barrier has nothing to
    /// complete (NVSHMEM's `nvshmemx_quiet_on_stream` queues nothing there either, but a
    /// kernel in a graph).
    pub(crate) alone_in_job: bool,
    /// Whether this PE reaches every PE of the job by load and store (`nvshmem_ptr`), so that
    /// every put it issues on a stream has completed when the stream passes it. Otherwise
    /// (PEs on other nodes, reached through NVSHMEM's proxy or NIC) a put may still be in
    /// flight after it, and a barrier that only fences (the flag barrier) first queues
    /// NVSHMEM's quiet so that it completes them, as it promises.
    pub(crate) job_peer_mapped: bool,
}

/// The most 512-thread blocks an H100 or H200 holds with one PE a GPU (132 SMs, one such block
/// each, rounded down to the direct kernels' grid limit): what CPU tests of the grid rules
/// assume when they need no particular team.
pub(crate) const DEFAULT_MAX_BLOCKS: u32 = 128;

/// A team's state, shared by its handles (and by graphs that captured calls on it).
pub(crate) struct TeamInner {
    pub(crate) shape: TeamShape,
    pub(crate) lane: Arc<Lane>,
    /// Where a team made by a split retires to when its last handle drops; `None` for
    /// NVSHMEM's predefined teams, which live as long as NVSHMEM.
    retire: Option<Arc<Retired>>,
    /// The plans of its recent calls, reused when a call repeats.
    pub(crate) plans: crate::collective::algo::Plans,
    /// How failure reports name it ([`team_label`](crate::runtime::team_label)).
    pub(crate) name: Arc<str>,
}

impl std::fmt::Debug for TeamInner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TeamInner")
            .field("shape", &self.shape)
            .field("lane", &self.lane)
            .finish()
    }
}

impl TeamInner {
    /// A predefined team with the same members: NVSHMEM's other handle, this team's lane (so
    /// their calls take turns together on the one channel).
    fn alias(&self, handle: TeamHandle) -> Arc<TeamInner> {
        let w = &self.shape;
        Arc::new(TeamInner {
            shape: TeamShape {
                handle,
                my_pe: w.my_pe,
                n_pes: w.n_pes,
                world: w.world.clone(),
                peer_offsets: w.peer_offsets.clone(),
                max_blocks: w.max_blocks,
                descriptor: w.descriptor,
                arch: w.arch,
                nvshmem_collectives: w.nvshmem_collectives,
                shares_gpu: w.shares_gpu,
                alone_in_job: w.alone_in_job,
                job_peer_mapped: w.job_peer_mapped,
            },
            lane: self.lane.clone(),
            retire: None,
            plans: Default::default(),
            name: self.name.clone(),
        })
    }
}

impl Resource for TeamInner {
    fn ordered(&self) -> Option<&Ordered> {
        Some(&self.lane.order)
    }
}

impl Drop for TeamInner {
    fn drop(&mut self) {
        if let Some(retired) = &self.retire {
            retired.push(self.shape.handle, self.lane.order.pending());
        }
    }
}

/// A team of PEs. The predefined teams ([`Runtime::world`], [`Runtime::shared`],
/// [`Runtime::node`]) live as long as the runtime; teams made by splitting are destroyed when
/// their last handle (clones included, and graphs that captured calls on them) drops.
/// Cloning is cheap: the handles share the team.
///
/// ```no_run
/// # let rt = nvshmem::Runtime::init()?;
/// let world = rt.world();
/// assert_eq!(world.n_pes(), rt.n_pes());
/// assert_eq!(world.my_pe(), rt.my_pe());
/// # Ok::<(), nvshmem::Error>(())
/// ```
#[derive(Clone)]
pub struct Team {
    rt: Runtime,
    inner: Arc<TeamInner>,
}

impl std::fmt::Debug for Team {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Team")
            .field("handle", &self.inner.shape.handle)
            .field("my_pe", &self.inner.shape.my_pe)
            .field("n_pes", &self.inner.shape.n_pes)
            .finish()
    }
}

impl Runtime {
    /// Every PE.
    ///
    /// ```no_run
    /// # let rt = nvshmem::Runtime::init()?;
    /// let world = rt.world();
    /// assert_eq!(world.n_pes(), rt.n_pes());
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    pub fn world(&self) -> Team {
        self.predefined(|t| &t.world)
    }

    /// The PEs whose symmetric memory this PE can load and store directly.
    ///
    /// ```no_run
    /// # let rt = nvshmem::Runtime::init()?;
    /// let shared = rt.shared();
    /// println!("{} PEs reachable by load/store", shared.n_pes());
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    pub fn shared(&self) -> Team {
        self.predefined(|t| &t.shared)
    }

    /// The PEs on this PE's node.
    ///
    /// ```no_run
    /// # let rt = nvshmem::Runtime::init()?;
    /// let node = rt.node();
    /// println!("{} PEs on this node", node.n_pes());
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    pub fn node(&self) -> Team {
        self.predefined(|t| &t.node)
    }

    fn predefined(&self, which: impl Fn(&Teams) -> &Arc<TeamInner>) -> Team {
        Team {
            rt: self.clone(),
            inner: which(self.teams()).clone(),
        }
    }

    /// Bytes of symmetric memory this crate's NVLink collectives hold, whatever the message
    /// sizes: a fixed pool of channels (one per team that uses the NVLink kernels), allocated
    /// at start-up.
    ///
    /// ```no_run
    /// # let rt = nvshmem::Runtime::init()?;
    /// println!("{} bytes for the NVLink collectives", rt.collective_memory());
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    pub fn collective_memory(&self) -> usize {
        self.teams().pool_bytes()
    }
}

impl Team {
    /// The number of PEs in the team.
    ///
    /// ```no_run
    /// # let rt = nvshmem::Runtime::init()?;
    /// assert_eq!(rt.world().n_pes(), rt.n_pes());
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    pub fn n_pes(&self) -> usize {
        self.inner.shape.n_pes
    }

    /// This PE's index in the team, from 0 to [`n_pes`](Team::n_pes) - 1. A `Team` exists
    /// only on its members (a split gives the others `None`), so there always is one, as
    /// with [`Runtime::my_pe`].
    ///
    /// ```no_run
    /// # let rt = nvshmem::Runtime::init()?;
    /// let node = rt.node();
    /// println!("I am PE {} of the {} on my node", node.my_pe(), node.n_pes());
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    pub fn my_pe(&self) -> usize {
        self.inner.shape.my_pe
    }

    /// The index in `to` of the PE that has index `pe` in this team: `None` when that PE is
    /// not a member of `to`. `pe` must be below [`n_pes`](Team::n_pes).
    ///
    /// ```no_run
    /// # let rt = nvshmem::Runtime::init()?;
    /// let world = rt.world();
    /// let evens = world.split_strided(0, 2, rt.n_pes().div_ceil(2))?;
    /// if let Some(evens) = &evens {
    ///     // Index 1 of the even PEs is world PE 2.
    ///     assert_eq!(evens.translate_pe(1, &world)?, Some(2));
    /// }
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    pub fn translate_pe(&self, pe: usize, to: &Team) -> Result<Option<usize>> {
        const CALL: &str = "Team::translate_pe";
        crate::error::check_pe(CALL, "pe", pe, self.n_pes(), "the team")?;
        self.rt.check_same(CALL, "to", &to.rt)?;
        // SAFETY: both handles are valid while their runtime lives (we hold it); pe is in
        // range.
        Ok(unsafe {
            self.rt
                .nv()
                .translate(self.inner.shape.handle, pe, to.inner.shape.handle)
        })
    }

    /// A new team of `size` PEs of this team: indices `start, start + stride, ...`, numbered
    /// in that order. Collective over this team (every member calls it with the same
    /// arguments); PEs that are not in the new team get `None`. The new team is destroyed,
    /// collectively over its members, when dropped.
    ///
    /// Errors: `stride` or `size` 0, `start` or the last PE (`start + (size - 1) * stride`)
    /// outside this team ([`Error::InvalidArgument`]);
    /// NVSHMEM refusing, for example when all its team slots (`NVSHMEM_MAX_TEAMS`) are in
    /// use ([`Error::Nvshmem`]).
    ///
    /// ```no_run
    /// # let rt = nvshmem::Runtime::init()?;
    /// // The odd PEs of the world.
    /// let odds = rt.world().split_strided(1, 2, rt.n_pes() / 2)?;
    /// match &odds {
    ///     Some(team) => println!("odd PE {} of {}", team.my_pe(), team.n_pes()),
    ///     None => println!("even PE {}", rt.my_pe()),
    /// }
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    pub fn split_strided(&self, start: usize, stride: usize, size: usize) -> Result<Option<Team>> {
        const CALL: &str = "Team::split_strided";
        let s = Strided {
            start,
            stride,
            size,
        };
        plan::check_strided(CALL, self.n_pes(), s)?;
        self.split_checked(CALL, s)
    }

    /// [`split_strided`](Team::split_strided) after the checks (and [`from_pes`](Team::from_pes)
    /// for a progression, under its own name).
    fn split_checked(&self, call: &'static str, s: Strided) -> Result<Option<Team>> {
        // A team of one PE is the same whatever the stride; NVSHMEM's stride is a c_int.
        let stride = if s.size == 1 { 1 } else { s.stride };
        let args = [
            make::STRIDED,
            s.start as u64,
            stride as u64,
            s.size as u64,
            0,
        ];
        let table = self.agree_to_make(call, args)?;
        make::same_args(call, &table, &args)?;
        // SAFETY: the parent handle is valid (its runtime is alive); the numbers were checked
        // against the parent's size; every member makes this call (agreed above).
        let handle = unsafe {
            self.rt
                .nv()
                .split_strided(self.handle(), s.start, stride, s.size)
        }
        .map_err(|e| e.in_call(call))?;
        let members: Vec<usize> = (0..s.size).map(|i| s.start + i * s.stride).collect();
        let team = self.finish(handle, &table, &members, |_| 0, false)?;
        let expected = s.index_of(self.my_pe());
        if team.as_ref().map(|t| t.my_pe()) != expected {
            tracing::warn!(
                ?expected, got = ?team.as_ref().map(|t| t.my_pe()), ?s,
                "NVSHMEM numbered the split team differently from the strided arithmetic"
            );
        }
        Ok(team)
    }

    /// Splits this team into a 2-D grid: x teams of `xrange` consecutive PEs (indices
    /// `0..xrange`, `xrange..2*xrange`, ...; the last may be shorter) and y teams of the PEs
    /// with the same index within their x team (`i, i + xrange, i + 2*xrange, ...`). Returns
    /// this PE's `(x team, y team)`; every member of this team is in one of each.
    /// `xrange` above [`n_pes`](Team::n_pes) is allowed and clamped to it, as NVSHMEM does
    /// (one x team of everyone, y teams of one PE). Collective over this team; both teams
    /// are destroyed, collectively over their members, when dropped.
    ///
    /// Errors: `xrange` 0 ([`Error::InvalidArgument`]); NVSHMEM
    /// refusing ([`Error::Nvshmem`]).
    ///
    /// ```no_run
    /// # let rt = nvshmem::Runtime::init()?;
    /// // 8 PEs as 2 rows of 4: rows are x teams, columns are y teams.
    /// let (row, column) = rt.world().split_2d(4)?;
    /// let (row, column) = (row.unwrap(), column.unwrap());
    /// assert_eq!(row.my_pe(), rt.my_pe() % 4);
    /// assert_eq!(column.my_pe(), rt.my_pe() / 4);
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    pub fn split_2d(&self, xrange: usize) -> Result<(Option<Team>, Option<Team>)> {
        const CALL: &str = "Team::split_2d";
        if xrange == 0 {
            return Err(Error::arg(CALL, "xrange", "must be at least 1"));
        }
        let me = self.my_pe();
        // Checks the arithmetic the same way on every PE (and documents NVSHMEM's layout).
        plan::split_2d_layout(CALL, self.n_pes(), xrange, me)?;
        let xrange = xrange.min(self.n_pes());
        let args = [make::TWO_D, xrange as u64, 0, 0, 0];
        let table = self.agree_to_make(CALL, args)?;
        make::same_args(CALL, &table, &args)?;
        // SAFETY: the parent handle is valid; xrange is at most the parent's size; every member
        // makes this call (agreed above).
        let (x, y, status) = unsafe { self.rt.nv().split_2d(self.handle(), xrange) };
        // Every PE is in one x team and one y team. The x teams take their channels first; a y
        // team then skips, on each member, the channel that member's x team took (every PE
        // works that out alike from the table).
        let n = self.n_pes();
        let members =
            |s: Strided| -> Vec<usize> { (0..s.size).map(|i| s.start + i * s.stride).collect() };
        let layout = |p| plan::split_2d_layout(CALL, n, xrange, p);
        let (mx, my) = layout(me)?;
        let x_channel = |p: usize| -> u64 {
            layout(p)
                .ok()
                .and_then(|(xs, _)| {
                    let m = members(xs);
                    SetUp::agree(&table, &m, |_| 0).team_channel(m.len())
                })
                .map_or(0, |c| 1u64 << c)
        };
        // NVSHMEM may have made one of the two teams before failing: set both up (every PE in
        // the same order, x teams then y teams) so they are destroyed rather than leaked.
        let (x, y) = (
            self.finish(x, &table, &members(mx), |_| 0, false),
            self.finish(y, &table, &members(my), x_channel, false),
        );
        status.map_err(|e| e.in_call(CALL))?;
        Ok((x?, y?))
    }

    /// A team of the listed PEs of this team (indices in this team), numbered in the order
    /// listed. Collective over this team: every member calls it with the same list; PEs not
    /// listed get `None`. The team is destroyed, collectively over its members, when dropped.
    ///
    /// A list with a constant positive step (`[1, 3, 5]`) becomes a
    /// [`split_strided`](Team::split_strided). Any other order (`[3, 0, 2]`) is made with
    /// NVSHMEM's team unique id: the first listed PE creates it and hands it to the others in
    /// the agreement that opens the call, and the members then initialise the team from it.
    ///
    /// Errors: an empty list, a PE outside this team, a PE listed twice
    /// ([`Error::InvalidArgument`]); NVSHMEM refusing ([`Error::Nvshmem`]).
    ///
    /// ```no_run
    /// # let rt = nvshmem::Runtime::init()?;
    /// // World PEs 3, 0 and 2, numbered 0, 1, 2 in the new team.
    /// let team = rt.world().from_pes(&[3, 0, 2])?;
    /// if rt.my_pe() == 0 {
    ///     assert_eq!(team.unwrap().my_pe(), 1);
    /// }
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    pub fn from_pes(&self, pes: &[usize]) -> Result<Option<Team>> {
        const CALL: &str = "Team::from_pes";
        plan::check_pes(CALL, self.n_pes(), pes)?;
        self.list_checked(CALL, pes)
    }

    /// [`from_pes`](Team::from_pes) after the checks.
    fn list_checked(&self, call: &'static str, pes: &[usize]) -> Result<Option<Team>> {
        match plan::as_progression(pes) {
            Some(s) => self.split_checked(call, s),
            None => explicit::team_from_list(self, self.my_pe(), pes),
        }
    }

    /// Splits this team by colour: the members that pass the same `color` form one new team,
    /// numbered by `key` (smaller first) and, among equal keys, by their index in this team.
    /// A member that passes `None` joins no team and gets `None`; every other member gets its
    /// team. Any partition is possible: the colours need not be contiguous or ordered, and a
    /// colour may be any `u32`. This is `MPI_Comm_split` and `ncclCommSplit` (nccl4py's
    /// `split(color, key)`).
    ///
    /// Collective over this team: every member calls it, each with its own colour and key (the
    /// only team-making call whose arguments differ between PEs). The members learn each
    /// other's colours and keys through one gather over this team (NVSHMEM's fcollect of 24
    /// bytes a member, after a team sync, into memory the runtime keeps for this), which also
    /// carries one NVSHMEM team unique id per member. Each member then works out the same teams
    /// and joins its own, under the id of its first member: the teams of different colours are
    /// made at the same time, each collectively over its own members only
    /// (`nvshmemx_team_init`), so no PE waits for a team it is not in and the colours need no
    /// common order. Each new team is destroyed, collectively over its members, when dropped.
    ///
    /// Errors: none from the arguments (every colour and key is valid). A failure of the
    /// exchange ([`Error::Bootstrap`]: an entry of the gathered table missing, or a team's
    /// first member without a team id, seen alike by every member of that team) or of NVSHMEM
    /// ([`Error::Nvshmem`], for example when all its team slots, `NVSHMEM_MAX_TEAMS`, are in
    /// use) is an error on the PEs it concerns.
    ///
    /// ```no_run
    /// # let rt = nvshmem::Runtime::init()?;
    /// // Even and odd world PEs, each team numbered from its highest world PE down.
    /// let me = rt.my_pe();
    /// let half = rt.world().split(Some(me as u32 % 2), -(me as i32))?.unwrap();
    /// let evens_or_odds = (rt.n_pes() - me % 2).div_ceil(2);
    /// assert_eq!(half.n_pes(), evens_or_odds);
    /// assert_eq!(half.my_pe(), evens_or_odds - 1 - me / 2);
    /// // PE 0 sits out: it gets None, the others one team of all but PE 0, in world order.
    /// let rest = rt.world().split((me != 0).then_some(0), 0)?;
    /// assert_eq!(rest.is_none(), me == 0);
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    pub fn split(&self, color: Option<u32>, key: i32) -> Result<Option<Team>> {
        split::split(self, color, key)
    }

    /// This team without the members listed in `exclude` (indices in this team, in any
    /// order): the others, numbered in their order in this team. Excluded PEs get `None`, as
    /// every PE does when all are excluded; excluding none gives a new team of the same PEs.
    /// nccl4py's `shrink(exclude_ranks)`, made as [`from_pes`](Team::from_pes) of the members
    /// kept.
    ///
    /// Collective over this team, *excluded members included*: every member calls it with the
    /// same list. Unlike `ncclCommShrink`, it therefore cannot drop a PE that has died or hangs:
    /// NVSHMEM's team creation needs every member of the parent to take part (a split is
    /// collective over the parent, and a team made from a unique id is handed out between
    /// barriers over the parent; even `nvshmemx_team_init`, collective over the new team,
    /// writes into every PE's team-creation state), and NVSHMEM 3.4 has no call that goes on
    /// without a failed PE. A job that loses a PE ends (see [`Runtime::abort`] for stopping
    /// this crate's kernels that wait on it) and is launched again.
    ///
    /// Errors: a PE outside this team or listed twice ([`Error::InvalidArgument`], on every PE
    /// alike); NVSHMEM refusing ([`Error::Nvshmem`]).
    ///
    /// [`Runtime::abort`]: crate::Runtime::abort
    ///
    /// ```no_run
    /// # let rt = nvshmem::Runtime::init()?;
    /// // Every world PE but PE 0; PE 1 becomes index 0.
    /// let rest = rt.world().shrink(&[0])?;
    /// match rt.my_pe() {
    ///     0 => assert!(rest.is_none()),
    ///     me => assert_eq!(rest.unwrap().my_pe(), me - 1),
    /// }
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    pub fn shrink(&self, exclude: &[usize]) -> Result<Option<Team>> {
        const CALL: &str = "Team::shrink";
        let keep = plan::shrink_members(CALL, self.n_pes(), exclude)?;
        if keep.is_empty() {
            // Every member decides this alike, so none goes on to a collective.
            return Ok(None);
        }
        self.list_checked(CALL, &keep)
    }

    /// The runtime the team belongs to.
    ///
    /// ```no_run
    /// # let rt = nvshmem::Runtime::init()?;
    /// let team = rt.world();
    /// assert_eq!(team.runtime().n_pes(), rt.n_pes());
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    #[inline]
    pub fn runtime(&self) -> &Runtime {
        &self.rt
    }

    /// NVSHMEM's handle, for calls through `nvshmem-sys`. The world team's is a duplicate of
    /// `NVSHMEM_TEAM_WORLD`, not that team itself: NVSHMEM's own `nvshmem_malloc` and
    /// `nvshmem_free` end with a barrier over `NVSHMEM_TEAM_WORLD`, which must never run
    /// beside a collective on the same team, and this crate allocates while collectives are
    /// in flight. Collectives that a program's own code (device code included) runs on
    /// `NVSHMEM_TEAM_WORLD` must therefore never be in flight while an array is allocated or
    /// dropped arrays are freed.
    ///
    /// ```no_run
    /// # let rt = nvshmem::Runtime::init()?;
    /// let handle = rt.world().raw();
    /// assert_ne!(handle, nvshmem_sys::teams::NVSHMEM_TEAM_WORLD);
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    pub fn raw(&self) -> nvshmem_team_t {
        self.inner.shape.handle
    }

    /// What the team is.
    pub(crate) fn shape(&self) -> &TeamShape {
        &self.inner.shape
    }

    /// The team's state, shared by its handles (a call on it notes it as a use).
    #[inline]
    pub(crate) fn inner(&self) -> &Arc<TeamInner> {
        &self.inner
    }

    /// NVSHMEM's handle of the team.
    #[inline]
    pub(crate) fn handle(&self) -> TeamHandle {
        self.inner.shape.handle
    }

    /// Whether this crate's NVLink kernels can run the team's collectives: every member can
    /// load and store every other's memory, the team has at most 8 members, and it got one of
    /// the runtime's channels when it was made ([`RuntimeBuilder::channels`]). Every member
    /// gets the same answer. Otherwise its collectives run NVSHMEM's algorithms.
    ///
    /// [`RuntimeBuilder::channels`]: crate::RuntimeBuilder::channels
    ///
    /// ```no_run
    /// # let rt = nvshmem::Runtime::init()?;
    /// if !rt.world().has_nvlink_kernels() {
    ///     println!("the world team's collectives run NVSHMEM's algorithms");
    /// }
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    pub fn has_nvlink_kernels(&self) -> bool {
        self.inner.shape.descriptor.is_some()
    }

    /// **A hook for this repository's GPU tests, not an API** (`tests/gpu_scale.rs` uses it to
    /// take the NVLink kernels across their epoch wrap, which otherwise comes after 2^32 - 2
    /// runs). Queues on `stream` the setting of this PE's part of the team's channel to the
    /// state after run `epoch` of every block, every peer having started and left it
    /// (`kernels/PROTOCOL.md`, "Epochs": every epoch, arrive and depart word `epoch`, the LL
    /// regions zeroed). Returns whether the team has a channel (else nothing is queued).
    ///
    /// # Safety
    ///
    /// It overwrites the flags the NVLink kernels synchronise by, outside their protocol:
    /// every member must do it at the same point, with the same `epoch`, with no call of the
    /// team in flight on any member before it and none started on any member until every
    /// member's setting is done (a barrier that does not use this team's channel between, as
    /// NVSHMEM's own). Otherwise a member's kernel may pass a wait it should not (reading a
    /// peer's buffer before it is written, or writing one still being read: wrong results) or
    /// wait for an epoch that never comes (until the runtime's timeout).
    ///
    /// ```no_run
    /// # let rt = nvshmem::Runtime::init()?; let stream = rt.stream().clone();
    /// # use nvshmem::collective::Collective;
    /// let team = rt.world();
    /// // Every PE: nothing of the team in flight, then NVSHMEM's barrier (not the channel's).
    /// stream.synchronize()?;
    /// rt.set_algorithm(Collective::Barrier, Some("nvshmem"))?;
    /// rt.barrier_all(&stream)?;
    /// // SAFETY: every PE sets the same epoch here, between two barriers that do not use the
    /// // team's channel, with no call of the team in flight.
    /// let has_channel = unsafe { team.set_channel_epoch_for_tests(0xffff_fff0, &stream)? };
    /// stream.synchronize()?;
    /// rt.barrier_all(&stream)?;
    /// rt.set_algorithm(Collective::Barrier, None)?;
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    #[doc(hidden)]
    pub unsafe fn set_channel_epoch_for_tests(
        &self,
        epoch: u32,
        stream: &Arc<cudarc::driver::CudaStream>,
    ) -> Result<bool> {
        if epoch == 0 || epoch == u32::MAX {
            return Err(Error::arg(
                "set_channel_epoch_for_tests",
                "epoch",
                format_args!("{epoch:#x}: live epochs are 1 ..= 0xfffffffe"),
            ));
        }
        self.rt.bind()?;
        let _turn = self.inner.lane.order.enter(stream, self.rt.captures())?;
        self.inner.lane.preset_epoch(epoch, stream)
    }
}
