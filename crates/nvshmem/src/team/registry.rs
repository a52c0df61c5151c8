//! The team layer's state in a runtime ([`Teams`]): the channel pool, NVSHMEM's predefined
//! teams, the teams dropped but not yet destroyed, and the making of a team's state from what
//! its members agreed.
use std::sync::{Arc, Mutex};

use nvshmem_sys::teams as ids;

use super::{make, offer, Agreed, SetUp, TeamInner, TeamShape};
use crate::{
    channel::{
        lane::{ChannelPool, Lane},
        team_fingerprint, MAX_TEAM,
    },
    ffi::TeamHandle,
    kernels::TeamDescriptor,
    runtime::{
        exchange::{entry, same_call, tag},
        in_use::Pending,
    },
    Error, Result, Runtime,
};

/// Dropped teams whose NVSHMEM team is not destroyed yet.
#[derive(Default)]
pub(super) struct Retired(Mutex<Vec<(TeamHandle, Pending)>>);

impl Retired {
    pub(super) fn push(&self, handle: TeamHandle, pending: Pending) {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push((handle, pending));
    }
}

/// The team layer's state in a runtime: what making teams needs (the channel pool, the teams
/// dropped but not yet destroyed), and NVSHMEM's predefined teams.
pub(crate) struct Teams {
    pub(super) core: Core,
    pub(super) world: Arc<TeamInner>,
    pub(super) shared: Arc<TeamInner>,
    pub(super) node: Arc<TeamInner>,
}

/// What making teams needs.
pub(super) struct Core {
    pool: Arc<ChannelPool>,
    ll_bytes: u32,
    /// Bytes of each channel's Lamport area (`channel::lamport`).
    lam_bytes: u64,
    /// How calls are checked (`RuntimeBuilder::check_calls`): 0 not, 1 this crate's
    /// kernels, 2 NVSHMEM's collectives too.
    check_calls: u32,
    pub(super) retired: Arc<Retired>,
    /// Whether a peer-mapped team went without a channel (said once).
    said_no_channel: std::sync::atomic::AtomicBool,
}

impl std::fmt::Debug for Teams {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Teams")
            .field("pool", &self.core.pool)
            .finish()
    }
}

impl Teams {
    /// The team layer of a starting runtime: the channel pool (`channels` of them, or the
    /// default for the heap, each with a Lamport area for calls of `lamport` bytes, or the
    /// default for the heap) and NVSHMEM's predefined teams, set up with every PE, which must
    /// all check calls alike and size the Lamport areas alike.
    pub(crate) fn start(
        rt: &Runtime,
        channels: Option<usize>,
        lamport: Option<usize>,
        check_calls: u32,
    ) -> Result<Self> {
        use crate::channel::{chan_bytes, lamport, Sizing};
        const CALL: &str = "Runtime::init (teams)";
        let mut sizing = Sizing::for_heap(rt.info().heap_size);
        if let Some(n) = channels {
            sizing.channels = n;
        }
        let sizing = sizing.checked();
        let area = lamport::Area {
            offset: chan_bytes(sizing.ll_bytes),
            bytes: lamport::area_bytes(
                lamport
                    .unwrap_or_else(|| lamport::default_max(rt.info().heap_size, sizing.channels)),
            ),
        };
        let each = area.offset + area.bytes;
        let bytes = (sizing.channels * each).max(256);
        let alloc = rt.heap().alloc(rt, CALL, bytes, true)?;
        let core = Core {
            pool: Arc::new(ChannelPool::new(alloc, each, sizing.channels, area)),
            ll_bytes: sizing.ll_bytes as u32,
            lam_bytes: area.bytes as u64,
            check_calls,
            retired: Arc::default(),
            said_no_channel: Default::default(),
        };
        // NVSHMEM's predefined teams, set up in one agreement over every PE: each offers its
        // channels, resident blocks, architecture and which world PEs it reaches.
        let everyone: Vec<usize> = (0..rt.n_pes()).collect();
        let table = rt.agree_world_with(CALL, |stream| {
            // The first argument word: the call check's level, which must be the same on every
            // PE (a PE that does not publish fingerprints would keep its peers waiting).
            // The second: the Lamport areas' size, which the kernels' buffer layout rests on.
            let lam = core.lam_bytes;
            let mut words = vec![make::PREDEFINED, u64::from(check_calls), lam, 0, 0];
            words.extend(core.offer(rt, &everyone, stream)?);
            Ok(entry(tag::MAKE_TEAM, &words))
        })?;
        same_call(CALL, &table, tag::MAKE_TEAM)?;
        if let Some(pe) = table
            .iter()
            .position(|e| e[offer::ARGS] != table[0][offer::ARGS])
        {
            return Err(Error::OutOfStep {
                call: CALL,
                detail: format!(
                    "PE {pe} checks calls at level {} (NVSHMEM_RS_CHECK_CALLS, \
                     RuntimeBuilder::check_calls), PE 0 at level {}: every PE must check alike",
                    table[pe][offer::ARGS],
                    table[0][offer::ARGS]
                ),
            });
        }
        if let Some(pe) = table
            .iter()
            .position(|e| e[offer::ARGS + 1] != table[0][offer::ARGS + 1])
        {
            return Err(Error::OutOfStep {
                call: CALL,
                detail: format!(
                    "PE {pe} has Lamport areas of {} bytes, PE 0 of {} \
                     (RuntimeBuilder::lamport_bytes): every PE must size them alike",
                    table[pe][offer::ARGS + 1],
                    table[0][offer::ARGS + 1]
                ),
            });
        }
        let world = Arc::new(core.build(
            rt,
            rt.world_handle(),
            SetUp::agree(&table, &everyone, |_| 0),
            None,
            false,
        )?);
        let taken = |p: usize| {
            // The world's channel is held on every PE.
            let _ = p;
            world.lane.channel.map_or(0, |c| 1u64 << c.index)
        };
        let predefined = |handle| -> Result<Arc<TeamInner>> {
            let (_, members) = read_members(rt, handle)?;
            if members == world.shape.world {
                return Ok(world.alias(handle));
            }
            let agreed = SetUp::agree(&table, &members, taken);
            Ok(Arc::new(core.build(rt, handle, agreed, None, false)?))
        };
        let shared = predefined(ids::NVSHMEM_TEAM_SHARED)?;
        let node = if read_members(rt, ids::NVSHMEMX_TEAM_NODE)?.1 == shared.shape.world {
            shared.alias(ids::NVSHMEMX_TEAM_NODE)
        } else {
            predefined(ids::NVSHMEMX_TEAM_NODE)?
        };
        Ok(Teams {
            core,
            world,
            shared,
            node,
        })
    }

    /// Destroys the NVSHMEM teams of dropped teams whose work is done (NVSHMEM 3.4's destroy
    /// is local to the PE and synchronises the device: done only where a call already waits
    /// for the device, when a team is made or in [`Runtime::free_retired`]).
    pub(crate) fn destroy_retired(&self, rt: &Runtime) {
        let mut retired = self
            .core
            .retired
            .0
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        retired.retain_mut(|(handle, pending)| {
            if !pending.done() {
                return true;
            }
            // SAFETY: the handle came from a split of this runtime, retired once when its last
            // handle dropped, and its work is done; the context is current (the caller's).
            unsafe { rt.nv().team_destroy(*handle) };
            false
        });
    }

    /// Whether the work of every dropped team and released channel is done.
    pub(crate) fn settled(&self) -> bool {
        let teams = self
            .core
            .retired
            .0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter_mut()
            .all(|(_, p)| p.done());
        teams && self.core.pool.settled()
    }

    /// The work still queued on the predefined teams (waited for before finalising).
    pub(crate) fn live_pending(&self) -> Vec<Pending> {
        [&self.world, &self.shared, &self.node]
            .iter()
            .map(|t| t.lane.order.pending())
            .collect()
    }

    /// Releases the layer before NVSHMEM finalises (which destroys every team itself).
    pub(crate) fn close(self, _nv: crate::ffi::Nvshmem) {}

    /// Bytes of symmetric memory the channels hold.
    pub(crate) fn pool_bytes(&self) -> usize {
        self.core.pool.bytes()
    }
}

impl Core {
    /// This PE's offer for a team-making call over a parent whose members are the world PEs
    /// `parent`: the entry words from [`offer::FREE`] on. The free channels are found (the
    /// released ones zeroed, the Lamport areas filled) on `stream`, the agreement's, just
    /// before the entry goes out, so that work precedes what the peers learn from it.
    pub(super) fn offer(
        &self,
        rt: &Runtime,
        parent: &[usize],
        stream: &cudarc::driver::CudaStream,
    ) -> Result<Vec<u64>> {
        let probe = self.pool.probe();
        let reach: Vec<bool> = parent
            .iter()
            // SAFETY: probe is a symmetric address of this runtime's heap; w a world PE.
            .map(|&w| unsafe { rt.nv().ptr(probe, w) }.is_some())
            .collect();
        Ok(offer::words(
            self.pool.free_mask(stream)?,
            rt.info().resident_blocks,
            rt.info().pes_on_device > 1,
            crate::kernels::compute_capability(rt.context())?,
            &reach,
        ))
    }

    /// The state of a team NVSHMEM has made (`handle`), from what its members agreed. Takes
    /// the agreed channel.
    pub(super) fn build(
        &self,
        rt: &Runtime,
        handle: TeamHandle,
        agreed: Agreed,
        retire: Option<Arc<Retired>>,
        by_init: bool,
    ) -> Result<TeamInner> {
        let (my_pe, world) = read_members(rt, handle)?;
        let n = world.len();
        let probe = self.pool.probe();
        let peer_offsets: Option<Box<[i64]>> = if agreed.mapped {
            world
                .iter()
                // SAFETY: probe is a symmetric address of this runtime's heap; w a world PE.
                .map(|&w| unsafe { rt.nv().ptr(probe, w) }.map(|p| p.wrapping_sub(probe) as i64))
                .collect()
        } else {
            None
        };
        if agreed.mapped && peer_offsets.is_none() {
            // Every member said it reaches every other: NVSHMEM answers differently now.
            return Err(rt.health().diverged(
                "making a team",
                format!("team {handle}: a member agreed to reach every other, but cannot"),
            ));
        }
        let channel = if agreed.mapped && n <= MAX_TEAM {
            if agreed.channel.is_none()
                && !self
                    .said_no_channel
                    .swap(true, std::sync::atomic::Ordering::Relaxed)
            {
                tracing::warn!(
                    team = handle,
                    "every channel is taken: this team's collectives run NVSHMEM's algorithms \
                     (RuntimeBuilder::channels gives more)"
                );
            }
            agreed.team_channel(n).map(|i| self.pool.take(i))
        } else {
            None
        };
        tracing::debug!(
            team = handle,
            ?world,
            my_pe,
            ?agreed,
            ?channel,
            "team set up"
        );
        let name: Arc<str> = crate::runtime::team_label(&world, rt.n_pes()).into();
        if let Some(c) = &channel {
            rt.health().name_channel(
                c.addr,
                crate::runtime::TeamName {
                    label: name.clone(),
                    world: world.iter().copied().collect(),
                },
            );
        }
        let job_peer_mapped = (0..rt.n_pes())
            // SAFETY: probe is a symmetric address of this runtime's heap; w a world PE.
            .all(|w| unsafe { rt.nv().ptr(probe, w) }.is_some());
        let descriptor = channel.map(|c| {
            let offs = peer_offsets.as_ref().expect("a channel needs peer mapping");
            let mut off = [0i64; MAX_TEAM];
            off[..offs.len()].copy_from_slice(offs);
            let (abort, status) = rt.health().device_words();
            TeamDescriptor {
                off,
                n: n as i32,
                me: my_pe as i32,
                chan: c.addr,
                ll_bytes: self.ll_bytes,
                lam_bytes: self.lam_bytes,
                check: self.check_calls,
                abort,
                status,
                timeout_ns: rt.health().timeout_ns(),
                // The calls' launches fill in word 0 (`Fingerprint::of`); the tag is the
                // team's, the same on every member.
                fp: team_fingerprint(&world),
            }
        });
        Ok(TeamInner {
            shape: TeamShape {
                handle,
                my_pe,
                n_pes: n,
                world,
                peer_offsets,
                max_blocks: agreed.max_blocks,
                descriptor,
                arch: agreed.arch,
                nvshmem_collectives: !by_init,
                shares_gpu: agreed.shares_gpu,
                alone_in_job: rt.n_pes() == 1,
                job_peer_mapped,
            },
            lane: Arc::new(Lane::new(self.pool.clone(), channel)),
            retire,
            plans: Default::default(),
            name,
        })
    }
}

/// This PE's index in a valid team and its members' world numbers, from NVSHMEM. Only members
/// hold a handle (a split gives the others `NVSHMEM_TEAM_INVALID`), so a handle this PE is not
/// in is NVSHMEM's error.
fn read_members(rt: &Runtime, handle: TeamHandle) -> Result<(usize, Box<[usize]>)> {
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
    Ok((my_pe, world))
}
