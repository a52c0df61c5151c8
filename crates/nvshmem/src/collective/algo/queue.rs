//! The narrow seam between the algorithms and the GPU: an algorithm's plan is a list of
//! [`Step`]s (data), and a [`Queue`] carries them out. On a PE the queue is [`Device`], which
//! calls NVSHMEM, copies and launches kernels on the stream; in tests it is a recorder, so
//! what every collective queues on every PE is asserted without a GPU.
use cudarc::driver::{sys::CUstream, CudaStream};

use crate::{
    channel::lane::SideStream,
    ffi::{Nvshmem, Reduction, TeamHandle},
    kernels::{self, Launch},
    runtime::Health,
    DataType, Error, ReduceOp, Result,
};

/// One thing a collective queues on the stream. Addresses are device addresses of this PE
/// (symmetric, unless said); byte counts are per call.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Step {
    /// NVSHMEM's typed reduction (`kind`) of `count` elements (per block for reduce-scatter).
    Reduce {
        kind: Reduction,
        dtype: DataType,
        op: ReduceOp,
        dst: u64,
        src: u64,
        count: usize,
    },
    /// `nvshmemx_broadcastmem_on_stream`.
    Broadcast {
        dst: u64,
        src: u64,
        bytes: usize,
        root: usize,
    },
    /// `nvshmemx_fcollectmem_on_stream` with blocks of `bytes`.
    Fcollect { dst: u64, src: u64, bytes: usize },
    /// `nvshmemx_alltoallmem_on_stream` with blocks of `bytes`.
    Alltoall { dst: u64, src: u64, bytes: usize },
    /// A barrier over the team (NVSHMEM's). `always`: queued even after an earlier step of
    /// the same call failed, because the other PEs wait in it (a closing barrier).
    Barrier { always: bool },
    /// A team sync (NVSHMEM's), with `always` as for [`Step::Barrier`].
    Sync { always: bool },
    /// `nvshmemx_quiet_on_stream`: every put this PE issued before it is complete at its
    /// target before work after it runs (a one-PE barrier's whole work).
    Quiet,
    /// `nvshmemx_getmem_on_stream`: `bytes` of `src` on world PE `pe` into `dst` here.
    Get {
        dst: u64,
        src: u64,
        bytes: usize,
        pe: usize,
    },
    /// A device-to-device copy on the stream (`dst` and `src` disjoint; either may be a
    /// peer's memory through its mapping, which the copy engines then move over the link).
    Copy { dst: u64, src: u64, bytes: usize },
    /// The team's side stream starts waiting for everything queued on the stream so far.
    Fork,
    /// A device-to-device copy on the side stream (after a [`Step::Fork`]), so that it runs
    /// beside the stream's own copies.
    SideCopy { dst: u64, src: u64, bytes: usize },
    /// The stream waits for everything queued on the side stream. Queued even after an
    /// earlier step failed, so nothing is left running apart from the stream (or outside a
    /// graph being captured).
    Join,
    /// One of this crate's kernels.
    Kernel(Launch),
    /// One of this crate's kernels that the other PEs wait in (a closing flag barrier):
    /// queued even after an earlier step of the same call failed.
    ClosingKernel(Launch),
}

impl Step {
    /// Whether the step is one of NVSHMEM's collectives over the team (not its one-sided
    /// calls: a get or a quiet involves no other member's participation).
    pub(crate) fn uses_nvshmem_collectives(&self) -> bool {
        matches!(
            self,
            Step::Reduce { .. }
                | Step::Broadcast { .. }
                | Step::Fcollect { .. }
                | Step::Alltoall { .. }
                | Step::Barrier { .. }
                | Step::Sync { .. }
        )
    }

    /// NVSHMEM's function the step calls, when it is one that may wait: for the other
    /// members (its collectives) or for this PE's puts to complete (quiet). Such a step is
    /// framed in the progress ring ([`Health::nvshmem_begin`]) so that the watchdog bounds
    /// its wait.
    pub(crate) fn nvshmem_wait(&self) -> Option<&'static str> {
        Some(match self {
            Step::Reduce { kind, .. } => match kind {
                Reduction::AllReduce => "nvshmemx_<type>_<op>_reduce_on_stream",
                Reduction::ReduceScatter => "nvshmemx_<type>_<op>_reducescatter_on_stream",
            },
            Step::Broadcast { .. } => "nvshmemx_broadcastmem_on_stream",
            Step::Fcollect { .. } => "nvshmemx_fcollectmem_on_stream",
            Step::Alltoall { .. } => "nvshmemx_alltoallmem_on_stream",
            Step::Barrier { .. } => "nvshmemx_barrier_on_stream",
            Step::Sync { .. } => "nvshmemx_team_sync_on_stream",
            Step::Quiet => "nvshmemx_quiet_on_stream",
            _ => return None,
        })
    }

    /// Whether the step is queued even after an earlier step failed.
    fn always(&self) -> bool {
        matches!(
            self,
            Step::Barrier { always: true }
                | Step::Sync { always: true }
                | Step::Join
                | Step::ClosingKernel(_)
        )
    }
}

/// What carries out a plan's steps.
pub(crate) trait Queue {
    /// Gets ready for `launch` (compiles its kernel), before anything of the call is queued.
    fn prepare(&mut self, launch: &Launch) -> Result<()>;
    /// Queues one step.
    fn queue(&mut self, step: &Step) -> Result<()>;
}

/// Queues a plan: first every kernel is prepared (so what can fail before the first step
/// fails then, and nothing is queued), then the steps run in order. After a step fails, the
/// rest are skipped except those marked `always` (closing barriers the other PEs wait in),
/// and the first error is returned.
#[inline]
pub(crate) fn execute(steps: &[Step], q: &mut dyn Queue) -> Result<()> {
    for step in steps {
        if let Step::Kernel(launch) | Step::ClosingKernel(launch) = step {
            q.prepare(launch)?;
        }
    }
    let mut failed = None;
    for step in steps {
        if failed.is_some() && !step.always() {
            continue;
        }
        if let Err(e) = q.queue(step) {
            failed.get_or_insert(e);
        }
    }
    failed.map_or(Ok(()), Err)
}

/// The queue of a PE: NVSHMEM, copies and kernels on `stream`, over `team`.
pub(crate) struct Device<'a> {
    pub(crate) nv: Nvshmem,
    pub(crate) team: TeamHandle,
    pub(crate) stream: &'a CudaStream,
    /// `stream`, already checked to be on the runtime's context, which is current.
    pub(crate) cu: CUstream,
    /// The team's side stream, when the plan forks.
    pub(crate) side: Option<std::sync::Arc<SideStream>>,
    /// The public call the steps are queued for (failure reports name it).
    pub(crate) call: &'static str,
    /// Where NVSHMEM's waits are framed, and the team's name; `None` while the stream is
    /// being captured (a graph would write the same progress numbers at every launch, so its
    /// NVSHMEM calls are not watched).
    pub(crate) watch: Option<(&'a Health, &'a std::sync::Arc<str>)>,
}

impl Device<'_> {
    fn side(&self) -> Result<&SideStream> {
        self.side.as_deref().ok_or_else(|| Error::Unsupported {
            call: "collective",
            what: "a side-stream step without the channel's side stream".into(),
        })
    }
}

impl Queue for Device<'_> {
    fn prepare(&mut self, launch: &Launch) -> Result<()> {
        kernels::prepare(self.stream, launch.key())
    }

    #[inline]
    fn queue(&mut self, step: &Step) -> Result<()> {
        let Some(((health, name), what)) = self.watch.zip(step.nvshmem_wait()) else {
            return self.queue_now(step);
        };
        let team = (!matches!(step, Step::Quiet)).then_some(name);
        // SAFETY: `cu` is live and its context current (`Runtime::enter`).
        let Some(framed) = (unsafe { health.nvshmem_begin(self.cu, self.call, what, team) }) else {
            return self.queue_now(step);
        };
        let queued = self.queue_now(step);
        // SAFETY: as above. Queued even after a failed step: the frame must close (a failed
        // call queued nothing that could wait).
        let ended = unsafe { health.nvshmem_end(self.cu, framed) };
        queued.and(ended)
    }
}

impl Device<'_> {
    /// Queues `step` itself (without a frame).
    #[inline]
    fn queue_now(&mut self, step: &Step) -> Result<()> {
        let (nv, team, cu) = (self.nv, self.team, self.cu);
        // SAFETY (every NVSHMEM step): the plans are made from a checked call: every address
        // is a symmetric address of this runtime with the bytes the step names (lengths,
        // overlaps and roots were checked before planning; the scratch is reserved, held for
        // the call and disjoint from user buffers); `team` is the call's team, valid while it
        // lives; `cu` is live and its context current (`Runtime::enter`).
        match *step {
            Step::Reduce {
                kind,
                dtype,
                op,
                dst,
                src,
                count,
            } => {
                let f = nv
                    .reduce_fn(kind, dtype, op)
                    .ok_or_else(|| Error::Unsupported {
                        call: "reduction",
                        what: format!("NVSHMEM's {op} reduction of {dtype}"),
                    })?;
                // SAFETY: as above; `f` is the function for `dtype`.
                unsafe { nv.reduce(kind, f, team, dst, src, count, cu) }
            }
            Step::Broadcast {
                dst,
                src,
                bytes,
                root,
            } => {
                // SAFETY: as above.
                unsafe { nv.broadcast(team, dst, src, bytes, root, cu) }
            }
            Step::Fcollect { dst, src, bytes } => {
                // SAFETY: as above.
                unsafe { nv.fcollect(team, dst, src, bytes, cu) }
            }
            Step::Alltoall { dst, src, bytes } => {
                // SAFETY: as above.
                unsafe { nv.alltoall(team, dst, src, bytes, cu) }
            }
            Step::Barrier { .. } => {
                // SAFETY: as above.
                unsafe { nv.barrier(Some(team), cu) }
            }
            Step::Sync { .. } => {
                // SAFETY: as above.
                unsafe { nv.sync(Some(team), cu) }
            }
            Step::Quiet => {
                // SAFETY: as above.
                unsafe { nv.quiet(cu) };
                Ok(())
            }
            Step::Get {
                dst,
                src,
                bytes,
                pe,
            } => {
                // SAFETY: as above; `pe` is a world PE (translated from the team).
                unsafe { nv.copy(true, dst, src, bytes, pe, cu) };
                Ok(())
            }
            Step::Copy { dst, src, bytes } => {
                // SAFETY: both hold `bytes` on this device and are disjoint (the plan copies
                // between the scratch and a user buffer); the stream is live and current.
                unsafe { cudarc::driver::result::memcpy_dtod_async(dst, src, bytes, cu) }
                    .map_err(Error::cuda("cuMemcpyDtoDAsync"))
            }
            Step::Fork => {
                let side = self.side()?;
                side.fork
                    .record(self.stream)
                    .map_err(Error::cuda("cuEventRecord"))?;
                side.stream
                    .wait(&side.fork)
                    .map_err(Error::cuda("cuStreamWaitEvent"))
            }
            Step::SideCopy { dst, src, bytes } => {
                let side = self.side()?;
                // SAFETY: as for `Copy`; the side stream belongs to the same context and
                // waits (Fork) for the work before this call, and the stream waits for it
                // (Join) before anything after.
                unsafe {
                    cudarc::driver::result::memcpy_dtod_async(
                        dst,
                        src,
                        bytes,
                        side.stream.cu_stream(),
                    )
                }
                .map_err(Error::cuda("cuMemcpyDtoDAsync (side stream)"))
            }
            Step::Join => {
                let side = self.side()?;
                side.join
                    .record(&side.stream)
                    .map_err(Error::cuda("cuEventRecord"))?;
                self.stream
                    .wait(&side.join)
                    .map_err(Error::cuda("cuStreamWaitEvent"))
            }
            Step::Kernel(ref launch) | Step::ClosingKernel(ref launch) => {
                kernels::launch(self.stream, launch)
            }
        }
    }
}

#[cfg(test)]
pub(crate) mod record {
    use super::*;

    /// A queue that records the steps it is given, and can fail the steps a test chooses.
    #[derive(Default)]
    pub(crate) struct Recorder {
        pub(crate) queued: Vec<Step>,
        pub(crate) prepared: Vec<Launch>,
        /// Steps for which `queue` fails (after recording them).
        pub(crate) fail: Option<fn(&Step) -> bool>,
    }

    impl Queue for Recorder {
        fn prepare(&mut self, launch: &Launch) -> Result<()> {
            self.prepared.push(launch.clone());
            Ok(())
        }

        fn queue(&mut self, step: &Step) -> Result<()> {
            self.queued.push(step.clone());
            match self.fail {
                Some(f) if f(step) => Err(Error::arg("test", "step", "failed on purpose")),
                _ => Ok(()),
            }
        }
    }
}
