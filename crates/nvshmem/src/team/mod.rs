//! Teams: ordered sets of PEs that collectives run over.
//!
//! Making a team from a parent ([`Team::split_strided`], [`Team::split_2d`],
//! [`Team::from_pes`], [`Team::split`], [`Team::shrink`]) is collective over the parent team:
//! every member of the parent must make the call, in the same order as its other collectives
//! on the parent (not at the same time as one on another stream). Each takes the same
//! arguments on every member, except [`Team::split`], to which each member passes its own
//! colour and key.
//! Destroying a team (by dropping it) is collective over the team's members; it first waits
//! for all work queued on this PE's GPU, so that nothing still runs on the team when it is
//! gone.
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
//! [`Runtime::free_retired`]: crate::Runtime::free_retired
mod explicit;
mod plan;
#[cfg(test)]
mod props;
mod split;

use std::sync::Arc;

use nvshmem_sys::{nvshmem_team_t, teams as ids};

use crate::{
    ffi::TeamHandle,
    runtime::{Closing, Layer, Settings},
    Error, Result, Runtime,
};
use plan::Strided;

/// What a team is, shared by every handle of it (the predefined teams are made once per
/// runtime and shared by every [`Runtime::world`] call).
#[derive(Debug)]
pub(crate) struct TeamShape {
    pub(crate) handle: TeamHandle,
    /// This PE's index: a `Team` exists only on its members.
    pub(crate) my_pe: usize,
    pub(crate) n_pes: usize,
    /// World number of each member, in team order.
    pub(crate) world: Box<[usize]>,
    /// For each member, what to add to a local symmetric address to reach that member's copy
    /// of it by load and store; `None` unless every member is reachable so (one node, peer
    /// access).
    pub(crate) peer_offsets: Option<Box<[i64]>>,
    /// The most 512-thread blocks every member can keep resident on its GPU at once, the same
    /// number on every member: this crate's NVLink kernels launch at most this many blocks a
    /// call (`kernels/PROTOCOL.md`, "Residency"), so that every member's blocks of a call can
    /// run at the same time.
    pub(crate) max_blocks: u32,
}

/// [`TeamShape::max_blocks`] until it is measured when the team is made: 128, as many
/// 512-thread blocks as one H100 or H200 holds with one PE a GPU (132 SMs, one such block
/// each), the direct kernels' grid limit before teams had their own.
pub(crate) const DEFAULT_MAX_BLOCKS: u32 = 128;

impl TeamShape {
    /// Reads a valid handle's shape from NVSHMEM. `probe` is any symmetric address (used to
    /// find each member's mapping). Only members hold a handle (a split gives the others
    /// `NVSHMEM_TEAM_INVALID`), so a handle this PE is not in is NVSHMEM's error.
    fn read(rt: &Runtime, handle: TeamHandle, probe: u64) -> Result<Self> {
        let nv = rt.nv();
        // SAFETY: the handle is a predefined team or came from a successful split of this
        // runtime; both calls only read NVSHMEM's team table.
        let (my_pe, n_pes) = unsafe { nv.team_shape(handle) };
        let my_pe = my_pe.ok_or(Error::Nvshmem {
            call: "nvshmem_team_my_pe",
            status: -1,
        })?;
        let world = (0..n_pes)
            // SAFETY: as above; i is below the team's size.
            .map(|i| unsafe { nv.world_pe(handle, i) })
            .collect::<Result<Box<[usize]>>>()?;
        let peer_offsets = world
            .iter()
            // SAFETY: probe is a symmetric address of this runtime's heap; w a world PE.
            .map(|&w| unsafe { nv.ptr(probe, w) }.map(|p| p.wrapping_sub(probe) as i64))
            .collect::<Option<Box<[i64]>>>();
        Ok(TeamShape {
            handle,
            my_pe,
            n_pes,
            world,
            peer_offsets,
            max_blocks: DEFAULT_MAX_BLOCKS,
        })
    }
}

/// The team layer's state in a runtime: the predefined teams, made once.
struct Predefined {
    world: Arc<TeamShape>,
    shared: Arc<TeamShape>,
    node: Arc<TeamShape>,
}

/// Attaches the team layer to a starting runtime.
pub(crate) fn attach(rt: &Runtime, _: &Settings) -> Result<Box<dyn Layer>> {
    let probe = rt.heap().team_slot();
    let shape = |h| TeamShape::read(rt, h, probe).map(Arc::new);
    Ok(Box::new(Predefined {
        world: shape(ids::NVSHMEM_TEAM_WORLD)?,
        shared: shape(ids::NVSHMEM_TEAM_SHARED)?,
        node: shape(ids::NVSHMEMX_TEAM_NODE)?,
    }))
}

impl Layer for Predefined {
    fn close(&self, _: &Closing<'_>) {}

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

/// A team of PEs. The predefined teams ([`Runtime::world`], [`Runtime::shared`],
/// [`Runtime::node`]) live as long as the runtime; teams made by splitting are destroyed
/// (collectively, over their members) when dropped.
///
/// ```no_run
/// # let rt = nvshmem::Runtime::init()?;
/// let world = rt.world();
/// assert_eq!(world.n_pes(), rt.n_pes());
/// assert_eq!(world.my_pe(), rt.my_pe());
/// # Ok::<(), nvshmem::Error>(())
/// ```
pub struct Team {
    rt: Runtime,
    shape: Arc<TeamShape>,
    /// Whether dropping the team destroys it (false for NVSHMEM's predefined teams).
    owned: bool,
}

impl std::fmt::Debug for Team {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Team")
            .field("handle", &self.shape.handle)
            .field("my_pe", &self.shape.my_pe)
            .field("n_pes", &self.shape.n_pes)
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
        self.predefined(|p| &p.world)
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
        self.predefined(|p| &p.shared)
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
        self.predefined(|p| &p.node)
    }

    fn predefined(&self, which: impl Fn(&Predefined) -> &Arc<TeamShape>) -> Team {
        Team {
            rt: self.clone(),
            shape: which(self.layer::<Predefined>()).clone(),
            owned: false,
        }
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
        self.shape.n_pes
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
        self.shape.my_pe
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
                .translate(self.shape.handle, pe, to.shape.handle)
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

    /// [`split_strided`](Team::split_strided) after the checks.
    fn split_checked(&self, call: &'static str, s: Strided) -> Result<Option<Team>> {
        // A team of one PE is the same whatever the stride; NVSHMEM's stride is a c_int.
        let stride = if s.size == 1 { 1 } else { s.stride };
        self.rt.check_health()?;
        self.rt.bind()?;
        // SAFETY: the parent handle is valid (its runtime is alive); the numbers were checked
        // against the parent's size.
        let handle = unsafe {
            self.rt
                .nv()
                .split_strided(self.shape.handle, s.start, stride, s.size)
        }
        .map_err(|e| e.in_call(call))?;
        let team = self.owned_team(handle)?;
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
        self.rt.check_health()?;
        self.rt.bind()?;
        // SAFETY: the parent handle is valid; xrange is at most the parent's size.
        let (x, y, status) = unsafe { self.rt.nv().split_2d(self.shape.handle, xrange) };
        // NVSHMEM may have made one of the two teams before failing: wrap both so they are
        // destroyed rather than leaked.
        let (x, y) = (self.owned_team(x), self.owned_team(y));
        status.map_err(|e| e.in_call(CALL))?;
        Ok((x?, y?))
    }

    /// A team of the listed PEs of this team (indices in this team), numbered in the order
    /// listed. Collective over this team: every member calls it with the same list; PEs not
    /// listed get `None`. The team is destroyed, collectively over its members, when dropped.
    ///
    /// A list with a constant positive step (`[1, 3, 5]`) becomes a
    /// [`split_strided`](Team::split_strided). Any other order (`[3, 0, 2]`) is made with
    /// NVSHMEM's team unique id: the first listed PE creates it and puts it into every
    /// member's copy of a small symmetric slot the runtime keeps for this, between two
    /// barriers over this team, and the members then initialise the team from it.
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
    pub fn runtime(&self) -> &Runtime {
        &self.rt
    }

    /// NVSHMEM's handle, for calls through `nvshmem-sys`.
    ///
    /// ```no_run
    /// # let rt = nvshmem::Runtime::init()?;
    /// let handle = rt.world().raw();
    /// assert_eq!(handle, nvshmem_sys::teams::NVSHMEM_TEAM_WORLD);
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    pub fn raw(&self) -> nvshmem_team_t {
        self.shape.handle
    }

    /// Wraps a handle a split returned: `None` for `NVSHMEM_TEAM_INVALID` (not a member).
    /// Made owned before its shape is read, so that a failure still destroys it.
    fn owned_team(&self, handle: nvshmem_team_t) -> Result<Option<Team>> {
        if handle == ids::NVSHMEM_TEAM_INVALID {
            return Ok(None);
        }
        let mut team = Team {
            rt: self.rt.clone(),
            shape: Arc::new(TeamShape {
                handle,
                my_pe: 0,
                n_pes: 0,
                world: Box::default(),
                peer_offsets: None,
                max_blocks: DEFAULT_MAX_BLOCKS,
            }),
            owned: true,
        };
        team.shape = Arc::new(TeamShape::read(
            &self.rt,
            handle,
            self.rt.heap().team_slot(),
        )?);
        Ok(Some(team))
    }

    /// What the team is (shared by its handles; the collectives key their state by it).
    pub(crate) fn shape(&self) -> &Arc<TeamShape> {
        &self.shape
    }

    /// NVSHMEM's handle of the team.
    pub(crate) fn handle(&self) -> TeamHandle {
        self.shape.handle
    }
}

impl Drop for Team {
    fn drop(&mut self) {
        // Destroying is collective: not while this PE panics or after a peer failed.
        if !self.owned || std::thread::panicking() || self.rt.health().failed() {
            return;
        }
        if let Err(e) = self.rt.bind() {
            tracing::warn!(%e, "binding the CUDA context to destroy a team");
        }
        // Work queued on the team (on any stream) must be done on every member before the
        // team's slots can serve another team: each member waits for its GPU, then NVSHMEM's
        // destroy, collective over the members, returns once all have.
        if let Err(e) = self.rt.context().synchronize() {
            tracing::warn!(%e, "waiting for the GPU before destroying a team");
        }
        // SAFETY: an owned handle came from a successful split of this runtime, which is
        // still alive, and is destroyed once, here; the GPU has finished with it.
        unsafe { self.rt.nv().team_destroy(self.shape.handle) };
    }
}
