//! Prepared calls, after MPI-4's persistent collectives (`MPI_Allreduce_init`, `MPI_Start`):
//! a collective on given arrays, team and operator checked, chosen and planned once, then
//! started on a stream as often as wanted, each start costing about what queueing its plan
//! costs (one kernel launch for this crate's NVLink algorithms), with nothing checked or chosen
//! again.
//!
//! A [`Prepared`] borrows its arrays (the source shared, the destination exclusively) for as
//! long as it lives, so they can neither be dropped nor written by the host under it; each
//! start notes its use of them on its stream, as every call does, so that dropping them after
//! the prepared call is freed only once the GPU is done with them (see the README, "Symmetric
//! memory rules"). It also holds its team (and so the team's channel) and the collective
//! scratch lease it was planned on: a scratch that grows later does not move under it.
use std::{marker::PhantomData, sync::Arc};

use cudarc::driver::CudaStream;

use super::{algo, check_call, rootless_args, Args, Collective, ReduceOp};
use crate::{
    memory::{SymBuffer, SymBufferMut},
    Element, Result, Team,
};

/// A collective call prepared once and started many times: every call of [`Team`], in place
/// too, has its `prepare_` form ([`Team::prepare_all_reduce`], [`Team::prepare_sync`]...).
/// Every PE prepares the same calls, in the same order as its other calls on the team, and
/// starts them as it would make the call.
///
/// ```no_run
/// # use nvshmem::{ReduceOp, Runtime};
/// # let rt = Runtime::init()?; let stream = rt.stream().clone(); let team = rt.world();
/// let src = rt.alloc_from(&[1.0f32; 1024])?;
/// let mut dst = rt.alloc_zeroed::<f32>(1024)?;
/// let step = team.prepare_all_reduce(&src, &mut dst, ReduceOp::Sum)?;
/// for _ in 0..100 {
///     step.start(&stream)?;
/// }
/// drop(step); // `dst` can be read again
/// stream.synchronize().unwrap();
/// assert_eq!(dst.to_vec()?[0], team.n_pes() as f32);
/// # Ok::<(), nvshmem::Error>(())
/// ```
///
/// The arrays stay borrowed while the prepared call lives:
///
/// ```compile_fail
/// # use nvshmem::{ReduceOp, Runtime};
/// # let rt = Runtime::init()?; let stream = rt.stream().clone(); let team = rt.world();
/// let src = rt.alloc_from(&[1.0f32; 4])?;
/// let mut dst = rt.alloc_zeroed::<f32>(4)?;
/// let step = team.prepare_all_reduce(&src, &mut dst, ReduceOp::Sum)?;
/// drop(dst); // refused: `step` borrows it
/// step.start(&stream)?;
/// # Ok::<(), nvshmem::Error>(())
/// ```
#[must_use = "a prepared call does nothing until it is started"]
pub struct Prepared<'a> {
    team: Team,
    plan: algo::Planned,
    _arrays: PhantomData<&'a mut ()>,
}

impl std::fmt::Debug for Prepared<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Prepared")
            .field("team", &self.team.handle())
            .finish_non_exhaustive()
    }
}

impl Prepared<'_> {
    /// Queues the call on `stream` (any stream of the runtime's GPU), as the call itself
    /// would: collective, in the same order on every PE as the team's other calls.
    ///
    /// ```no_run
    /// # use nvshmem::Runtime;
    /// # let rt = Runtime::init()?; let stream = rt.stream().clone();
    /// let barrier = rt.world().prepare_barrier()?;
    /// barrier.start(&stream)?;
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    pub fn start(&self, stream: &Arc<CudaStream>) -> Result<()> {
        self.plan.start(&self.team, stream)
    }

    /// The team the call runs over.
    ///
    /// ```no_run
    /// # let rt = nvshmem::Runtime::init()?;
    /// let barrier = rt.world().prepare_barrier()?;
    /// assert_eq!(barrier.team().n_pes(), rt.n_pes());
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    pub fn team(&self) -> &Team {
        &self.team
    }
}

impl Team {
    /// [`Team::all_reduce`], prepared ([`Prepared`]): every check, the algorithm's choice and
    /// its plan done now, once; `src` and `dst` stay borrowed while the result lives.
    ///
    /// ```no_run
    /// # use nvshmem::{ReduceOp, Runtime};
    /// # let rt = Runtime::init()?; let stream = rt.stream().clone(); let team = rt.world();
    /// let src = rt.alloc_from(&[2u32; 8])?;
    /// let mut dst = rt.alloc_zeroed::<u32>(8)?;
    /// team.prepare_all_reduce(&src, &mut dst, ReduceOp::Max)?.start(&stream)?;
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    pub fn prepare_all_reduce<'a, T: Element>(
        &self,
        src: &'a impl SymBuffer<T>,
        dst: &'a mut impl SymBufferMut<T>,
        op: ReduceOp,
    ) -> Result<Prepared<'a>> {
        let c = Collective::AllReduce;
        self.prepare_two(c, "all_reduce", Some(op), None, src, dst)
    }

    /// [`Team::all_reduce_in_place`], prepared ([`Prepared`]); `buf` stays borrowed while the
    /// result lives.
    ///
    /// ```no_run
    /// # use nvshmem::{ReduceOp, Runtime};
    /// # let rt = Runtime::init()?; let stream = rt.stream().clone(); let team = rt.world();
    /// let mut grads = rt.alloc_from(&[0.5f32; 256])?;
    /// team.prepare_all_reduce_in_place(&mut grads, ReduceOp::Avg)?.start(&stream)?;
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    pub fn prepare_all_reduce_in_place<'a, T: Element>(
        &self,
        buf: &'a mut impl SymBufferMut<T>,
        op: ReduceOp,
    ) -> Result<Prepared<'a>> {
        let c = Collective::AllReduce;
        self.prepare_one(c, "all_reduce_in_place", Some(op), None, buf)
    }

    /// [`Team::reduce`], prepared ([`Prepared`]). It needs the collective scratch where the
    /// call does, reserved before it is prepared.
    ///
    /// ```no_run
    /// # use nvshmem::{ReduceOp, Runtime};
    /// # let rt = Runtime::init()?; let stream = rt.stream().clone(); let team = rt.world();
    /// rt.reserve_scratch(1 << 20)?;
    /// let src = rt.alloc_from(&[1.0f64; 64])?;
    /// let mut dst = rt.alloc_zeroed::<f64>(64)?;
    /// team.prepare_reduce(0, &src, &mut dst, ReduceOp::Sum)?.start(&stream)?;
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    pub fn prepare_reduce<'a, T: Element>(
        &self,
        root: usize,
        src: &'a impl SymBuffer<T>,
        dst: &'a mut impl SymBufferMut<T>,
        op: ReduceOp,
    ) -> Result<Prepared<'a>> {
        let c = Collective::Reduce;
        self.prepare_two(c, "reduce", Some(op), Some(root), src, dst)
    }

    /// [`Team::reduce_in_place`], prepared ([`Prepared`]).
    ///
    /// ```no_run
    /// # use nvshmem::{ReduceOp, Runtime};
    /// # let rt = Runtime::init()?; let stream = rt.stream().clone(); let team = rt.world();
    /// # rt.reserve_scratch(1 << 20)?;
    /// let mut buf = rt.alloc_from(&[3i64; 16])?;
    /// team.prepare_reduce_in_place(0, &mut buf, ReduceOp::Min)?.start(&stream)?;
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    pub fn prepare_reduce_in_place<'a, T: Element>(
        &self,
        root: usize,
        buf: &'a mut impl SymBufferMut<T>,
        op: ReduceOp,
    ) -> Result<Prepared<'a>> {
        let c = Collective::Reduce;
        self.prepare_one(c, "reduce_in_place", Some(op), Some(root), buf)
    }

    /// [`Team::reduce_scatter`], prepared ([`Prepared`]).
    ///
    /// ```no_run
    /// # use nvshmem::{ReduceOp, Runtime};
    /// # let rt = Runtime::init()?; let stream = rt.stream().clone(); let team = rt.world();
    /// let src = rt.alloc_from(&vec![1.0f32; 16 * team.n_pes()])?;
    /// let mut dst = rt.alloc_zeroed::<f32>(16)?;
    /// team.prepare_reduce_scatter(&src, &mut dst, ReduceOp::Sum)?.start(&stream)?;
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    pub fn prepare_reduce_scatter<'a, T: Element>(
        &self,
        src: &'a impl SymBuffer<T>,
        dst: &'a mut impl SymBufferMut<T>,
        op: ReduceOp,
    ) -> Result<Prepared<'a>> {
        let c = Collective::ReduceScatter;
        self.prepare_two(c, "reduce_scatter", Some(op), None, src, dst)
    }

    /// [`Team::reduce_scatter_in_place`], prepared ([`Prepared`]).
    ///
    /// ```no_run
    /// # use nvshmem::{ReduceOp, Runtime};
    /// # let rt = Runtime::init()?; let stream = rt.stream().clone(); let team = rt.world();
    /// # rt.reserve_scratch(1 << 20)?;
    /// let mut buf = rt.alloc_from(&vec![1u32; 8 * team.n_pes()])?;
    /// team.prepare_reduce_scatter_in_place(&mut buf, ReduceOp::Sum)?.start(&stream)?;
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    pub fn prepare_reduce_scatter_in_place<'a, T: Element>(
        &self,
        buf: &'a mut impl SymBufferMut<T>,
        op: ReduceOp,
    ) -> Result<Prepared<'a>> {
        let c = Collective::ReduceScatter;
        self.prepare_one(c, "reduce_scatter_in_place", Some(op), None, buf)
    }

    /// [`Team::fcollect`], prepared ([`Prepared`]).
    ///
    /// ```no_run
    /// # use nvshmem::Runtime;
    /// # let rt = Runtime::init()?; let stream = rt.stream().clone(); let team = rt.world();
    /// let src = rt.alloc_from(&[team.my_pe() as i32; 4])?;
    /// let mut dst = rt.alloc_zeroed::<i32>(4 * team.n_pes())?;
    /// team.prepare_fcollect(&src, &mut dst)?.start(&stream)?;
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    pub fn prepare_fcollect<'a, T: Element>(
        &self,
        src: &'a impl SymBuffer<T>,
        dst: &'a mut impl SymBufferMut<T>,
    ) -> Result<Prepared<'a>> {
        self.prepare_two(Collective::Fcollect, "fcollect", None, None, src, dst)
    }

    /// [`Team::fcollect_in_place`], prepared ([`Prepared`]).
    ///
    /// ```no_run
    /// # use nvshmem::Runtime;
    /// # let rt = Runtime::init()?; let stream = rt.stream().clone(); let team = rt.world();
    /// let mut buf = rt.alloc_zeroed::<i32>(4 * team.n_pes())?;
    /// team.prepare_fcollect_in_place(&mut buf)?.start(&stream)?;
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    pub fn prepare_fcollect_in_place<'a, T: Element>(
        &self,
        buf: &'a mut impl SymBufferMut<T>,
    ) -> Result<Prepared<'a>> {
        self.prepare_one(Collective::Fcollect, "fcollect_in_place", None, None, buf)
    }

    /// [`Team::alltoall`], prepared ([`Prepared`]).
    ///
    /// ```no_run
    /// # use nvshmem::Runtime;
    /// # let rt = Runtime::init()?; let stream = rt.stream().clone(); let team = rt.world();
    /// let src = rt.alloc_zeroed::<u16>(32 * team.n_pes())?;
    /// let mut dst = rt.alloc_zeroed::<u16>(32 * team.n_pes())?;
    /// team.prepare_alltoall(&src, &mut dst)?.start(&stream)?;
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    pub fn prepare_alltoall<'a, T: Element>(
        &self,
        src: &'a impl SymBuffer<T>,
        dst: &'a mut impl SymBufferMut<T>,
    ) -> Result<Prepared<'a>> {
        self.prepare_two(Collective::Alltoall, "alltoall", None, None, src, dst)
    }

    /// [`Team::broadcast`], prepared ([`Prepared`]).
    ///
    /// ```no_run
    /// # use nvshmem::Runtime;
    /// # let rt = Runtime::init()?; let stream = rt.stream().clone(); let team = rt.world();
    /// let src = rt.alloc_from(&[7u8; 100])?;
    /// let mut dst = rt.alloc_zeroed::<u8>(100)?;
    /// team.prepare_broadcast(0, &src, &mut dst)?.start(&stream)?;
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    pub fn prepare_broadcast<'a, T: Element>(
        &self,
        root: usize,
        src: &'a impl SymBuffer<T>,
        dst: &'a mut impl SymBufferMut<T>,
    ) -> Result<Prepared<'a>> {
        let c = Collective::Broadcast;
        self.prepare_two(c, "broadcast", None, Some(root), src, dst)
    }

    /// [`Team::broadcast_in_place`], prepared ([`Prepared`]).
    ///
    /// ```no_run
    /// # use nvshmem::Runtime;
    /// # let rt = Runtime::init()?; let stream = rt.stream().clone(); let team = rt.world();
    /// let mut buf = rt.alloc_from(&[team.my_pe() as u64; 10])?;
    /// team.prepare_broadcast_in_place(0, &mut buf)?.start(&stream)?;
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    pub fn prepare_broadcast_in_place<'a, T: Element>(
        &self,
        root: usize,
        buf: &'a mut impl SymBufferMut<T>,
    ) -> Result<Prepared<'a>> {
        let c = Collective::Broadcast;
        self.prepare_one(c, "broadcast_in_place", None, Some(root), buf)
    }

    /// [`Team::gather`], prepared ([`Prepared`]).
    ///
    /// ```no_run
    /// # use nvshmem::Runtime;
    /// # let rt = Runtime::init()?; let stream = rt.stream().clone(); let team = rt.world();
    /// let src = rt.alloc_from(&[team.my_pe() as f32; 3])?;
    /// let mut dst = rt.alloc_zeroed::<f32>(3 * team.n_pes())?;
    /// team.prepare_gather(0, &src, &mut dst)?.start(&stream)?;
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    pub fn prepare_gather<'a, T: Element>(
        &self,
        root: usize,
        src: &'a impl SymBuffer<T>,
        dst: &'a mut impl SymBufferMut<T>,
    ) -> Result<Prepared<'a>> {
        let c = Collective::Gather;
        self.prepare_two(c, "gather", None, Some(root), src, dst)
    }

    /// [`Team::gather_in_place`], prepared ([`Prepared`]).
    ///
    /// ```no_run
    /// # use nvshmem::Runtime;
    /// # let rt = Runtime::init()?; let stream = rt.stream().clone(); let team = rt.world();
    /// let mut buf = rt.alloc_zeroed::<f32>(3 * team.n_pes())?;
    /// team.prepare_gather_in_place(0, &mut buf)?.start(&stream)?;
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    pub fn prepare_gather_in_place<'a, T: Element>(
        &self,
        root: usize,
        buf: &'a mut impl SymBufferMut<T>,
    ) -> Result<Prepared<'a>> {
        let c = Collective::Gather;
        self.prepare_one(c, "gather_in_place", None, Some(root), buf)
    }

    /// [`Team::scatter`], prepared ([`Prepared`]).
    ///
    /// ```no_run
    /// # use nvshmem::Runtime;
    /// # let rt = Runtime::init()?; let stream = rt.stream().clone(); let team = rt.world();
    /// let src = rt.alloc_zeroed::<f64>(2 * team.n_pes())?;
    /// let mut dst = rt.alloc_zeroed::<f64>(2)?;
    /// team.prepare_scatter(0, &src, &mut dst)?.start(&stream)?;
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    pub fn prepare_scatter<'a, T: Element>(
        &self,
        root: usize,
        src: &'a impl SymBuffer<T>,
        dst: &'a mut impl SymBufferMut<T>,
    ) -> Result<Prepared<'a>> {
        let c = Collective::Scatter;
        self.prepare_two(c, "scatter", None, Some(root), src, dst)
    }

    /// [`Team::scatter_in_place`], prepared ([`Prepared`]).
    ///
    /// ```no_run
    /// # use nvshmem::Runtime;
    /// # let rt = Runtime::init()?; let stream = rt.stream().clone(); let team = rt.world();
    /// let mut buf = rt.alloc_zeroed::<f64>(2 * team.n_pes())?;
    /// team.prepare_scatter_in_place(0, &mut buf)?.start(&stream)?;
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    pub fn prepare_scatter_in_place<'a, T: Element>(
        &self,
        root: usize,
        buf: &'a mut impl SymBufferMut<T>,
    ) -> Result<Prepared<'a>> {
        let c = Collective::Scatter;
        self.prepare_one(c, "scatter_in_place", None, Some(root), buf)
    }

    /// [`Team::barrier`], prepared ([`Prepared`]).
    ///
    /// ```no_run
    /// # let rt = nvshmem::Runtime::init()?; let stream = rt.stream().clone();
    /// let barrier = rt.world().prepare_barrier()?;
    /// barrier.start(&stream)?;
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    pub fn prepare_barrier(&self) -> Result<Prepared<'static>> {
        self.prepared(rootless_args(Collective::Barrier, "barrier"), &[])
    }

    /// [`Team::sync`], prepared ([`Prepared`]).
    ///
    /// ```no_run
    /// # let rt = nvshmem::Runtime::init()?; let stream = rt.stream().clone();
    /// let sync = rt.world().prepare_sync()?;
    /// sync.start(&stream)?;
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    pub fn prepare_sync(&self) -> Result<Prepared<'static>> {
        self.prepared(rootless_args(Collective::Sync, "sync"), &[])
    }

    pub(super) fn prepare_two<'a, T: Element>(
        &self,
        coll: Collective,
        name: &'static str,
        op: Option<ReduceOp>,
        root: Option<usize>,
        src: &'a impl SymBuffer<T>,
        dst: &'a mut impl SymBufferMut<T>,
    ) -> Result<Prepared<'a>> {
        let args = self.two_args(coll, name, op, root, src, &*dst)?;
        self.prepared(args, &[src.alloc(), dst.alloc()])
    }

    pub(super) fn prepare_one<'a, T: Element>(
        &self,
        coll: Collective,
        name: &'static str,
        op: Option<ReduceOp>,
        root: Option<usize>,
        buf: &'a mut impl SymBufferMut<T>,
    ) -> Result<Prepared<'a>> {
        let args = self.in_place_args(coll, name, op, root, &*buf)?;
        self.prepared(args, &[buf.alloc()])
    }

    pub(super) fn prepared<'a>(
        &self,
        args: Args,
        arrays: &[&Arc<crate::memory::Alloc>],
    ) -> Result<Prepared<'a>> {
        let plan = algo::prepare(self, check_call(&args, self.shape())?, arrays)?;
        Ok(Prepared {
            team: self.clone(),
            plan,
            _arrays: PhantomData,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::Collective;

    /// Every collective has a prepared form, and every in-place form a prepared in-place
    /// form, named after the call (`prepare_` + its name): a collective added to the table
    /// without them fails here.
    #[test]
    fn every_call_has_a_prepared_form() {
        let src = include_str!("prepared.rs");
        for c in Collective::ALL {
            let names = [Some(c.name()), c.in_place_name()];
            for name in names.into_iter().flatten() {
                let generic = format!("pub fn prepare_{name}<");
                let plain = format!("pub fn prepare_{name}(");
                assert!(
                    src.contains(&generic) || src.contains(&plain),
                    "no prepare_{name}"
                );
                // Its rustdoc names the call it prepares.
                let doc = format!("/// [`Team::{name}`], prepared ([`Prepared`])");
                assert!(
                    src.contains(&doc),
                    "prepare_{name} does not say what it prepares"
                );
            }
        }
    }
}
