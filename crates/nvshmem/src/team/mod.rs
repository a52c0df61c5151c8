//! Teams: ordered sets of PEs that collectives run over.
//!
//! Splitting a team ([`Team::split_strided`], [`Team::split_2d`], [`Team::from_pes`]) is
//! collective over the parent team: every member of the parent must make the same call with
//! the same arguments, in the same order as its other collectives. Destroying a team (by
//! dropping it) is collective over the team's members.
mod explicit;
mod plan;

use std::os::raw::c_int;

use nvshmem_sys::{nvshmem_team_t, teams as ids};

use crate::{error::check, Error, Result, Runtime};
use plan::Strided;

pub(crate) use explicit::alloc_exchange_slot;

/// A team of PEs. The predefined teams ([`Runtime::world`], [`Runtime::shared`],
/// [`Runtime::node`]) live as long as the runtime; teams made by splitting are destroyed
/// (collectively, over their members) when dropped.
///
/// ```no_run
/// # let rt = nvshmem::Runtime::init()?;
/// let world = rt.world();
/// assert_eq!(world.n_pes(), rt.n_pes());
/// assert_eq!(world.my_pe(), Some(rt.my_pe()));
/// # Ok::<(), nvshmem::Error>(())
/// ```
pub struct Team {
    pub(crate) rt: Runtime,
    pub(crate) handle: nvshmem_team_t,
    /// Whether dropping the team destroys it (false for NVSHMEM's predefined teams).
    pub(crate) owned: bool,
    pub(crate) my_pe: Option<usize>,
    pub(crate) n_pes: usize,
}

impl std::fmt::Debug for Team {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Team")
            .field("handle", &self.handle)
            .field("my_pe", &self.my_pe)
            .field("n_pes", &self.n_pes)
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
        self.predefined(ids::NVSHMEM_TEAM_WORLD)
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
        self.predefined(ids::NVSHMEM_TEAM_SHARED)
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
        self.predefined(ids::NVSHMEMX_TEAM_NODE)
    }

    fn predefined(&self, handle: nvshmem_team_t) -> Team {
        self.team_from_handle(handle, false)
    }

    /// Wraps a valid team handle, reading this PE's index and the size from NVSHMEM.
    fn team_from_handle(&self, handle: nvshmem_team_t, owned: bool) -> Team {
        let lib = self.inner.lib;
        // SAFETY: the handle is a predefined team or came from a successful split, so it is
        // valid while NVSHMEM is initialised, which the runtime guarantees; the calls only
        // read NVSHMEM's team table.
        let (my_pe, n_pes) = unsafe {
            (
                lib.nvshmem_team_my_pe(handle),
                lib.nvshmem_team_n_pes(handle),
            )
        };
        Team {
            rt: self.clone(),
            handle,
            owned,
            my_pe: usize::try_from(my_pe).ok(),
            n_pes: n_pes.max(0) as usize,
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
        self.n_pes
    }

    /// This PE's index in the team (`None` if it is not a member).
    ///
    /// ```no_run
    /// # let rt = nvshmem::Runtime::init()?;
    /// let node = rt.node();
    /// println!("I am PE {:?} of the {} on my node", node.my_pe(), node.n_pes());
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    pub fn my_pe(&self) -> Option<usize> {
        self.my_pe
    }

    /// Whether this PE is a member of the team.
    ///
    /// ```no_run
    /// # let rt = nvshmem::Runtime::init()?;
    /// assert!(rt.world().is_member());
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    pub fn is_member(&self) -> bool {
        self.my_pe.is_some()
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
        if pe >= self.n_pes {
            return Err(Error::arg(
                "Team::translate_pe",
                "pe",
                format!("PE {pe} is outside the team of {} PEs", self.n_pes),
            ));
        }
        // SAFETY: both handles are valid while their runtime lives (we hold it); pe is in
        // range, and below c_int::MAX because NVSHMEM's team sizes are c_ints.
        let t = unsafe {
            self.rt
                .inner
                .lib
                .nvshmem_team_translate_pe(self.handle, pe as c_int, to.handle)
        };
        Ok(usize::try_from(t).ok())
    }

    /// A new team of `size` PEs of this team: indices `start, start + stride, ...`, numbered
    /// in that order. Collective over this team (every member calls it with the same
    /// arguments); PEs that are not in the new team get `None`. The new team is destroyed,
    /// collectively over its members, when dropped.
    ///
    /// Errors: `stride` or `size` 0, `start` or the last PE (`start + (size - 1) * stride`)
    /// outside this team, this PE not a member of this team ([`Error::InvalidArgument`]);
    /// NVSHMEM refusing, for example when all its team slots (`NVSHMEM_MAX_TEAMS`) are in
    /// use ([`Error::Nvshmem`]).
    ///
    /// ```no_run
    /// # let rt = nvshmem::Runtime::init()?;
    /// // The odd PEs of the world.
    /// let odds = rt.world().split_strided(1, 2, rt.n_pes() / 2)?;
    /// match &odds {
    ///     Some(team) => println!("odd PE {} of {}", team.my_pe().unwrap(), team.n_pes()),
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
        plan::check_strided(CALL, self.n_pes, s)?;
        self.require_member(CALL)?;
        self.split_checked(CALL, s)
    }

    /// [`split_strided`](Team::split_strided) after the checks.
    fn split_checked(&self, call: &'static str, s: Strided) -> Result<Option<Team>> {
        // A team of one PE is the same whatever the stride; NVSHMEM's stride is a c_int.
        let stride = if s.size == 1 { 1 } else { s.stride };
        self.rt.inner.bind()?;
        let mut handle = ids::NVSHMEM_TEAM_INVALID;
        // SAFETY: the parent handle is valid (its runtime is alive); the numbers were checked
        // against the parent's size, which is a c_int; a null config with mask 0 asks for
        // NVSHMEM's defaults; handle is a valid place for the result.
        let status = unsafe {
            self.rt.inner.lib.nvshmem_team_split_strided(
                self.handle,
                s.start as c_int,
                stride as c_int,
                s.size as c_int,
                std::ptr::null(),
                0,
                &mut handle,
            )
        };
        check(call, status)?;
        let team = self.owned_team(handle);
        let expected = self.my_pe.and_then(|me| s.index_of(me));
        if team.as_ref().and_then(|t| t.my_pe) != expected {
            tracing::warn!(
                ?expected, got = ?team.as_ref().map(|t| t.my_pe), ?s,
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
    /// Errors: `xrange` 0 or this PE not a member ([`Error::InvalidArgument`]); NVSHMEM
    /// refusing ([`Error::Nvshmem`]).
    ///
    /// ```no_run
    /// # let rt = nvshmem::Runtime::init()?;
    /// // 8 PEs as 2 rows of 4: rows are x teams, columns are y teams.
    /// let (row, column) = rt.world().split_2d(4)?;
    /// let (row, column) = (row.unwrap(), column.unwrap());
    /// assert_eq!(row.my_pe(), Some(rt.my_pe() % 4));
    /// assert_eq!(column.my_pe(), Some(rt.my_pe() / 4));
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    pub fn split_2d(&self, xrange: usize) -> Result<(Option<Team>, Option<Team>)> {
        const CALL: &str = "Team::split_2d";
        if xrange == 0 {
            return Err(Error::arg(CALL, "xrange", "must be at least 1"));
        }
        let me = self.require_member(CALL)?;
        // Checks the arithmetic the same way on every PE (and documents NVSHMEM's layout).
        plan::split_2d_layout(CALL, self.n_pes, xrange, me)?;
        let xrange = xrange.min(self.n_pes);
        self.rt.inner.bind()?;
        let (mut x, mut y) = (ids::NVSHMEM_TEAM_INVALID, ids::NVSHMEM_TEAM_INVALID);
        // SAFETY: the parent handle is valid; xrange is at most the parent's size, a c_int;
        // null configs with mask 0 ask for defaults; x and y are valid places for results.
        let status = unsafe {
            self.rt.inner.lib.nvshmem_team_split_2d(
                self.handle,
                xrange as c_int,
                std::ptr::null(),
                0,
                &mut x,
                std::ptr::null(),
                0,
                &mut y,
            )
        };
        // NVSHMEM may have made one of the two teams before failing: wrap both so they are
        // destroyed rather than leaked.
        let (x, y) = (self.owned_team(x), self.owned_team(y));
        check(CALL, status)?;
        Ok((x, y))
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
    /// Errors: an empty list, a PE outside this team, a PE listed twice, this PE not a member
    /// of this team ([`Error::InvalidArgument`]); NVSHMEM refusing ([`Error::Nvshmem`]).
    ///
    /// ```no_run
    /// # let rt = nvshmem::Runtime::init()?;
    /// // World PEs 3, 0 and 2, numbered 0, 1, 2 in the new team.
    /// let team = rt.world().from_pes(&[3, 0, 2])?;
    /// if rt.my_pe() == 0 {
    ///     assert_eq!(team.unwrap().my_pe(), Some(1));
    /// }
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    pub fn from_pes(&self, pes: &[usize]) -> Result<Option<Team>> {
        const CALL: &str = "Team::from_pes";
        plan::check_pes(CALL, self.n_pes, pes)?;
        let me = self.require_member(CALL)?;
        match plan::as_progression(pes) {
            Some(s) => self.split_checked(CALL, s),
            None => explicit::team_from_list(self, me, pes),
        }
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
        self.handle
    }

    /// Wraps a handle a split returned: `None` for `NVSHMEM_TEAM_INVALID` (not a member).
    fn owned_team(&self, handle: nvshmem_team_t) -> Option<Team> {
        (handle != ids::NVSHMEM_TEAM_INVALID).then(|| self.rt.team_from_handle(handle, true))
    }

    /// This PE's index, or an error naming `call` when it is not a member.
    pub(crate) fn require_member(&self, call: &'static str) -> Result<usize> {
        self.my_pe
            .ok_or_else(|| Error::arg(call, "team", "this PE is not a member of the team"))
    }
}

impl Drop for Team {
    fn drop(&mut self) {
        if !self.owned || std::thread::panicking() {
            return;
        }
        if let Err(e) = self.rt.inner.bind() {
            tracing::warn!(%e, "binding the CUDA context to destroy a team");
        }
        // SAFETY: an owned handle came from a successful split of this runtime, which is
        // still alive, and is destroyed once, here.
        unsafe { self.rt.inner.lib.nvshmem_team_destroy(self.handle) };
    }
}
