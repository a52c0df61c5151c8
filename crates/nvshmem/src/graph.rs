//! CUDA graphs of this crate's calls that keep alive what they use.
//!
//! A graph replays raw addresses: the arrays, the teams' channels and the collective scratch
//! its calls used. Replayed after one of them is freed, it would write memory that is no
//! longer theirs, silently (others ship this bug). [`Runtime::capture`] records which of them
//! every call queued during the capture used, and the [`Graph`] it returns holds them: an
//! array or team dropped while a graph that uses it lives is freed (or destroyed) only after
//! the graph is dropped and its last launch has run. At each launch the graph's teams and
//! scratch are ordered after their earlier calls on other streams, as a call would be.
//!
//! A call of this crate queued on a stream that is being captured some other way (cudarc's
//! `begin_capture`, another library's) is refused with [`Error::CaptureNotTracked`]: nothing
//! would keep its resources alive. (cudarc's own copies into or out of a symmetric array, in
//! such a capture, cannot be refused: the array is then never freed.)
use std::sync::Arc;

use cudarc::driver::{sys, CudaGraph, CudaStream};

use crate::{
    runtime::in_use::{capturing, Resource},
    Error, Result, Runtime,
};

/// A CUDA graph captured with [`Runtime::capture`]: launched any number of times with
/// [`Graph::launch`], on the stream it was captured on; it keeps every array, team and scratch
/// its calls use alive until it is dropped.
///
/// ```no_run
/// use nvshmem::prelude::*;
/// let rt = Runtime::init()?;
/// let stream = rt.context().new_stream()?;
/// let world = rt.world();
/// let mut x = rt.alloc_from(&[1.0f32; 256])?;
/// world.all_reduce_in_place(&mut x, ReduceOp::Sum, &stream)?; // once before, to compile its kernel
/// let graph = rt.capture(&stream, |s| world.all_reduce_in_place(&mut x, ReduceOp::Sum, s))?;
/// for _ in 0..10 {
///     graph.launch()?;
/// }
/// drop(x); // freed only after the graph is dropped and its launches have run
/// stream.synchronize()?;
/// # Ok::<(), nvshmem::Error>(())
/// ```
pub struct Graph {
    graph: CudaGraph,
    stream: Arc<CudaStream>,
    keep: Vec<Arc<dyn Resource>>,
    rt: Runtime,
}

impl std::fmt::Debug for Graph {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Graph")
            .field("resources", &self.keep.len())
            .finish()
    }
}

impl Runtime {
    /// Captures what `f` queues on `stream` into a [`Graph`]: `f` gets the stream and makes
    /// this crate's calls (and any other work) on it as usual; they are recorded, not run.
    /// The graph keeps alive what those calls use (module docs).
    ///
    /// Make each kind of call once before capturing it: the first call of a collective
    /// compiles its kernel, which a capture cannot record. Allocation, team creation and
    /// copies between host memory and symmetric arrays are refused inside a capture (they are
    /// not stream work, or would touch host memory at every launch).
    ///
    /// Errors: `stream` of another device, or already being captured
    /// ([`Error::InvalidArgument`]); what `f` returns (any error type that an [`Error`]
    /// converts into, such as `anyhow::Error`); CUDA refusing the capture (for example work
    /// that cannot be captured).
    ///
    /// ```no_run
    /// # use nvshmem::prelude::*;
    /// # let rt = Runtime::init()?; let stream = rt.context().new_stream()?;
    /// let team = rt.world();
    /// team.barrier(&stream)?;
    /// let graph = rt.capture(&stream, |s| team.barrier(s))?;
    /// graph.launch()?;
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    pub fn capture<E: From<Error>>(
        &self,
        stream: &Arc<CudaStream>,
        f: impl FnOnce(&Arc<CudaStream>) -> std::result::Result<(), E>,
    ) -> std::result::Result<Graph, E> {
        const CALL: &str = "Runtime::capture";
        self.enter(CALL, stream)?;
        if capturing(stream)? {
            return Err(Error::arg(CALL, "stream", "is already being captured").into());
        }
        // What the stream did before the capture, for calls on its teams elsewhere meanwhile.
        let entry = stream
            .record_event(None)
            .map_err(Error::cuda("cuEventRecord (before a capture)"))?;
        let capture = self.captures().begin(stream, entry);
        // Relaxed: the calls of other threads (their agreements poll events) must not end the
        // capture; this thread's calls queue only stream work into it.
        let begun = stream
            .begin_capture(sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_RELAXED)
            .map_err(|e| E::from(Error::cuda("cuStreamBeginCapture")(e)));
        let result = begun.and_then(|()| f(stream));
        let ended = stream.end_capture(sys::CUgraphInstantiate_flags(0));
        self.captures().end(stream);
        result?;
        let graph = ended
            .map_err(Error::cuda("cuStreamEndCapture"))?
            .ok_or_else(|| Error::arg(CALL, "f", "queued nothing on the stream"))?;
        let keep = std::mem::take(&mut *capture.keep.lock().unwrap_or_else(|p| p.into_inner()));
        // The graph runs on `stream`: whatever it keeps is used there, so a drop after the
        // graph's waits for its launches. This crate's calls noted the stream already; cudarc's
        // own copies in the capture (through `DevicePtr`) see it only as a borrow, and did not.
        for r in &keep {
            if let Some(uses) = r.uses() {
                uses.add(stream);
            }
        }
        Ok(Graph {
            graph,
            stream: stream.clone(),
            keep,
            rt: self.clone(),
        })
    }
}

impl Graph {
    /// Launches the graph on the stream it was captured on. The teams and scratch its calls
    /// use first wait for their earlier calls on other streams, as calls do.
    ///
    /// ```no_run
    /// # use nvshmem::prelude::*;
    /// # let rt = Runtime::init()?; let stream = rt.context().new_stream()?;
    /// # let team = rt.world(); team.sync(&stream)?;
    /// let graph = rt.capture(&stream, |s| team.sync(s))?;
    /// graph.launch()?;
    /// graph.stream().synchronize()?;
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    pub fn launch(&self) -> Result<()> {
        self.rt.enter("Graph::launch", &self.stream)?;
        // Every turn held until the launch is queued, taken in the one order every holder of
        // several follows (teams, then the scratch), once each: teams with the same members
        // share one lane.
        let mut orders: Vec<_> = self.keep.iter().filter_map(|r| r.ordered()).collect();
        orders.sort_by_key(|o| o.rank());
        orders.dedup_by_key(|o| o.rank());
        let _turns = orders
            .iter()
            .map(|o| o.enter(&self.stream, self.rt.captures()))
            .collect::<Result<Vec<_>>>()?;
        self.graph.launch().map_err(Error::cuda("cuGraphLaunch"))
    }

    /// The stream it was captured on, which it launches on.
    ///
    /// ```no_run
    /// # use nvshmem::prelude::*;
    /// # let rt = Runtime::init()?; let stream = rt.context().new_stream()?;
    /// # let team = rt.world(); team.sync(&stream)?;
    /// let graph = rt.capture(&stream, |s| team.sync(s))?;
    /// assert_eq!(graph.stream().cu_stream(), stream.cu_stream());
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    pub fn stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }

    /// Pre-uploads the graph to the device, so that its first launch costs no more than the
    /// next ones.
    ///
    /// ```no_run
    /// # use nvshmem::prelude::*;
    /// # let rt = Runtime::init()?; let stream = rt.context().new_stream()?;
    /// # let team = rt.world(); team.sync(&stream)?;
    /// let graph = rt.capture(&stream, |s| team.sync(s))?;
    /// graph.upload()?;
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    pub fn upload(&self) -> Result<()> {
        self.graph.upload().map_err(Error::cuda("cuGraphUpload"))
    }
}
