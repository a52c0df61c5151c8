//! Teams: ordered sets of PEs that collectives run over.
use nvshmem_sys::{nvshmem_team_t, teams as ids};

use crate::{Error, Result, Runtime};

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
    pub fn world(&self) -> Team {
        self.predefined(ids::NVSHMEM_TEAM_WORLD)
    }

    /// The PEs whose symmetric memory this PE can load and store directly.
    pub fn shared(&self) -> Team {
        self.predefined(ids::NVSHMEM_TEAM_SHARED)
    }

    /// The PEs on this PE's node.
    pub fn node(&self) -> Team {
        self.predefined(ids::NVSHMEMX_TEAM_NODE)
    }

    fn predefined(&self, handle: nvshmem_team_t) -> Team {
        let lib = self.inner.lib;
        // SAFETY: predefined team handles are valid while NVSHMEM is initialised, which the
        // runtime guarantees; the calls only read NVSHMEM's team table.
        let (my_pe, n_pes) = unsafe {
            (
                lib.nvshmem_team_my_pe(handle),
                lib.nvshmem_team_n_pes(handle),
            )
        };
        Team {
            rt: self.clone(),
            handle,
            owned: false,
            my_pe: usize::try_from(my_pe).ok(),
            n_pes: n_pes.max(0) as usize,
        }
    }
}

impl Team {
    /// The number of PEs in the team.
    pub fn n_pes(&self) -> usize {
        self.n_pes
    }

    /// This PE's index in the team (`None` if it is not a member).
    pub fn my_pe(&self) -> Option<usize> {
        self.my_pe
    }

    /// The runtime the team belongs to.
    pub fn runtime(&self) -> &Runtime {
        &self.rt
    }

    /// NVSHMEM's handle, for calls through `nvshmem-sys`.
    pub fn raw(&self) -> nvshmem_team_t {
        self.handle
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
