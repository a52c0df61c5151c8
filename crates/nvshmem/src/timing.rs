//! Optional timing of any stream-ordered call: CUDA events recorded around it on its stream.
//!
//! [`Runtime::timed`] and [`Team::timed`] (the same, on the team's runtime) run a closure that
//! queues work on a stream and return its result with a [`Timing`]. Nothing is synchronised
//! when a call is timed; the [`Timing`] handle is read later, without blocking
//! ([`Timing::elapsed`]) or by waiting ([`Timing::wait`]). Calls that are not timed pay
//! nothing.
//!
//! ```no_run
//! use nvshmem::prelude::*;
//! # let rt = Runtime::init()?; let stream = rt.stream().clone();
//! let world = rt.world();
//! let mut grads = rt.alloc_from(&[1.0f32; 1 << 20])?;
//! let ((), t) = world.timed(&stream, || world.all_reduce_in_place(&mut grads, ReduceOp::Avg, &stream))?;
//! // ... other host work while the GPU runs ...
//! println!("all_reduce took {:?}", t.wait()?);
//! # Ok::<(), nvshmem::Error>(())
//! ```
use std::{sync::Arc, time::Duration};

use cudarc::driver::{sys::CUevent_flags, CudaEvent, CudaStream};

use crate::{Error, Result, Runtime, Team};

/// The GPU time of one timed call: two CUDA events recorded on its stream before and after.
///
/// Holds the runtime alive. The time is the GPU's, between the stream reaching the call and
/// finishing it (including waiting for the other PEs inside a collective).
///
/// ```no_run
/// # use nvshmem::{ReduceOp, Runtime};
/// # let rt = Runtime::init()?; let stream = rt.stream().clone(); let team = rt.world();
/// # let src = rt.alloc_zeroed::<f32>(1 << 20)?; let mut dst = rt.alloc_zeroed::<f32>(1 << 20)?;
/// let ((), t) = team.timed(&stream, || team.all_reduce(&src, &mut dst, ReduceOp::Sum, &stream))?;
/// // ... queue more work; later:
/// println!("all_reduce took {:?}", t.wait()?);
/// # Ok::<(), nvshmem::Error>(())
/// ```
#[derive(Debug)]
pub struct Timing {
    start: CudaEvent,
    end: CudaEvent,
    _rt: Runtime,
}

impl Timing {
    /// The elapsed GPU time, or `None` while the call has not finished. Never blocks.
    ///
    /// ```no_run
    /// # let rt = nvshmem::Runtime::init()?; let stream = rt.stream().clone();
    /// let ((), t) = rt.timed(&stream, || rt.barrier_all(&stream))?;
    /// while t.elapsed()?.is_none() {
    ///     // ... do host work while the GPU runs ...
    /// }
    /// println!("barrier: {:?}", t.elapsed()?.unwrap());
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    pub fn elapsed(&self) -> Result<Option<Duration>> {
        let done = |e: &CudaEvent| e.try_is_complete().map_err(Error::cuda("cuEventQuery"));
        if !(done(&self.end)? && done(&self.start)?) {
            return Ok(None);
        }
        self.read().map(Some)
    }

    /// Waits for the call to finish and returns its GPU time.
    ///
    /// ```no_run
    /// # let rt = nvshmem::Runtime::init()?; let stream = rt.stream().clone();
    /// let ((), t) = rt.timed(&stream, || rt.barrier_all(&stream))?;
    /// let d = t.wait()?;
    /// assert_eq!(t.elapsed()?, Some(d));
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    pub fn wait(&self) -> Result<Duration> {
        self.end
            .synchronize()
            .map_err(Error::cuda("cuEventSynchronize"))?;
        self.read()
    }

    fn read(&self) -> Result<Duration> {
        let ms = self
            .start
            .elapsed_ms(&self.end)
            .map_err(Error::cuda("cuEventElapsedTime"))?;
        Ok(Duration::from_secs_f64(f64::from(ms.max(0.0)) / 1e3))
    }
}

impl Runtime {
    /// Runs `f`, which queues work on `stream`, between two timing events recorded on
    /// `stream`; returns `f`'s value and the [`Timing`]. Errors from `f` are returned as is.
    ///
    /// ```no_run
    /// # let rt = nvshmem::Runtime::init()?; let stream = rt.stream().clone();
    /// let ((), t) = rt.timed(&stream, || rt.barrier_all(&stream))?;
    /// println!("{:?}", t.wait()?);
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    pub fn timed<R>(
        &self,
        stream: &Arc<CudaStream>,
        f: impl FnOnce() -> Result<R>,
    ) -> Result<(R, Timing)> {
        self.enter("timed", stream)?;
        let event = || {
            stream
                .context()
                .new_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
                .map_err(Error::cuda("cuEventCreate"))
        };
        let (start, end) = (event()?, event()?);
        start.record(stream).map_err(Error::cuda("cuEventRecord"))?;
        let value = f()?;
        end.record(stream).map_err(Error::cuda("cuEventRecord"))?;
        Ok((
            value,
            Timing {
                start,
                end,
                _rt: self.clone(),
            },
        ))
    }
}

impl Team {
    /// Times `f` (typically one collective of this team) on `stream`: the same as
    /// [`Runtime::timed`], on the team's runtime.
    ///
    /// ```no_run
    /// # let rt = nvshmem::Runtime::init()?; let stream = rt.stream().clone();
    /// let team = rt.world();
    /// let ((), t) = team.timed(&stream, || team.barrier(&stream))?;
    /// if let Some(d) = t.elapsed()? { println!("barrier: {d:?}"); }
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    pub fn timed<R>(
        &self,
        stream: &Arc<CudaStream>,
        f: impl FnOnce() -> Result<R>,
    ) -> Result<(R, Timing)> {
        self.runtime().timed(stream, f)
    }
}
