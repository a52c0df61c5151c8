//! What the GPU may still be doing with a resource, so that nothing is freed or reused under it.
//!
//! Every call of this crate queues work on a stream the program passes, and returns at once.
//! A resource that queued work uses (an array's memory, a team's channel, the collective
//! scratch) must outlive that work. This module keeps the facts needed for that, without ever
//! synchronising the device:
//! - [`Uses`]: the streams a resource was used on (an array, used from any stream and from
//!   several at once). When the resource is dropped, an event recorded on each of them
//!   ([`Pending`]) tells when the work queued so far is done.
//! - [`Ordered`]: a resource whose uses must not overlap (a team's channel, the scratch). A use
//!   on another stream than the last one first makes the new stream wait for the old one, as
//!   NCCL orders the calls of one communicator; so the last stream alone tells when all its
//!   work is done. A use holds the resource's [`Turn`] from then until its work is queued, so
//!   that uses from several threads are ordered as they are queued.
//! - [`Captures`]: the graphs being captured through [`Runtime::capture`](crate::Runtime::capture).
//!   Work queued into a graph runs whenever the graph is launched, so a call queued while its
//!   stream is captured hands the resources it uses to the graph, which keeps them alive; a
//!   capture this crate did not start is refused (it could not keep them alive).
use std::{
    any::Any,
    sync::{
        atomic::{AtomicBool, AtomicUsize, Ordering},
        Arc, Mutex, MutexGuard,
    },
};

use cudarc::driver::{sys, CudaEvent, CudaStream};

use crate::{Error, Result};

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Whether `stream` is being captured into a graph (an invalidated capture counts: work queued
/// there fails, and must not be counted as run).
#[inline]
pub(crate) fn capturing(stream: &CudaStream) -> Result<bool> {
    let mut status = sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE;
    // SAFETY: the stream is live (borrowed) and `status` a valid place for the answer.
    unsafe { sys::cuStreamIsCapturing(stream.cu_stream(), &mut status) }
        .result()
        .map_err(Error::cuda("cuStreamIsCapturing"))?;
    Ok(status != sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE)
}

/// The handle of one stream that an owner keeps alive (so no other stream can have the same
/// handle meanwhile), readable without the owner's lock. Starts as no stream: 0 is a real
/// handle (the legacy default stream).
struct LastStream(AtomicUsize);

impl LastStream {
    const NONE: usize = usize::MAX;

    #[inline]
    fn is(&self, stream: &CudaStream) -> bool {
        self.0.load(Ordering::Acquire) == stream.cu_stream() as usize
    }

    fn set(&self, stream: &CudaStream) {
        self.0.store(stream.cu_stream() as usize, Ordering::Release);
    }

    fn clear(&self) {
        self.0.store(Self::NONE, Ordering::Release);
    }
}

impl Default for LastStream {
    fn default() -> Self {
        LastStream(AtomicUsize::new(Self::NONE))
    }
}

/// The streams a resource was used on, each kept alive (an `Arc`) so that an event can still be
/// recorded on it when the resource is dropped.
#[derive(Default)]
pub(crate) struct Uses {
    streams: Mutex<Vec<Arc<CudaStream>>>,
    /// The stream noted last: a repeated use on it (the common case) costs one load. Set
    /// under the lock, only to a stream the list holds.
    last: LastStream,
}

impl Uses {
    /// Notes a use on `stream` (once per stream: a handle names one stream while it lives, and
    /// the `Arc` kept here keeps it alive).
    #[inline]
    pub(crate) fn add(&self, stream: &Arc<CudaStream>) {
        if !self.last.is(stream) {
            self.add_new(stream);
        }
    }

    /// [`Uses::add`] on another stream than the last: out of line, so that a repeated call's
    /// code stays small.
    #[cold]
    fn add_new(&self, stream: &Arc<CudaStream>) {
        let mut streams = lock(&self.streams);
        if !streams.iter().any(|s| s.cu_stream() == stream.cu_stream()) {
            streams.push(stream.clone());
        }
        self.last.set(stream);
    }

    /// The streams noted so far.
    pub(crate) fn snapshot(&self) -> Vec<Arc<CudaStream>> {
        lock(&self.streams).clone()
    }

    /// The streams noted so far, forgetting them.
    pub(crate) fn take(&self) -> Vec<Arc<CudaStream>> {
        let mut streams = lock(&self.streams);
        self.last.clear();
        std::mem::take(&mut streams)
    }
}

impl std::fmt::Debug for Uses {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Uses({} streams)", lock(&self.streams).len())
    }
}

/// Whether some work was ever found that cannot be proved done ([`Pending`]'s `broken`): the
/// runtime then does not wait for its work before finalising (it never ends), whatever the
/// timeout, and leaves NVSHMEM as it is. One runtime a process, so one flag.
static UNPROVABLE: AtomicBool = AtomicBool::new(false);

/// Whether [`UNPROVABLE`] is set.
pub(crate) fn some_work_unprovable() -> bool {
    UNPROVABLE.load(Ordering::Relaxed)
}

/// Work that must be done before a dropped resource's memory is reused: one event per stream
/// it was used on, recorded when it was dropped. A stream being captured into a graph at that
/// moment cannot take an event for its earlier work; it is kept, and its event recorded once
/// the capture has ended. Never blocks.
#[derive(Default)]
pub(crate) struct Pending {
    events: Vec<CudaEvent>,
    later: Vec<Arc<CudaStream>>,
    /// An event could not be made or recorded: the work cannot be proved done, so the memory
    /// is never reused (leaked until NVSHMEM finalises, which is safe).
    broken: bool,
}

impl Pending {
    /// The work queued so far on `streams`.
    pub(crate) fn after(streams: Vec<Arc<CudaStream>>) -> Self {
        let mut p = Pending {
            later: streams,
            ..Default::default()
        };
        p.record_later();
        p
    }

    /// Adds an event recorded elsewhere (a cudarc copy's), to wait for too.
    pub(crate) fn with_event(mut self, event: CudaEvent) -> Self {
        self.events.push(event);
        self
    }

    fn record_later(&mut self) {
        let streams = std::mem::take(&mut self.later);
        for s in streams {
            match capturing(&s) {
                Ok(true) => self.later.push(s),
                Ok(false) => match s.record_event(None) {
                    Ok(e) => self.events.push(e),
                    Err(e) => {
                        tracing::warn!(%e, "recording an event to free memory after its use");
                        self.mark_broken();
                    }
                },
                Err(e) => {
                    tracing::warn!(%e, "asking whether a stream is being captured");
                    self.mark_broken();
                }
            }
        }
    }

    /// The work cannot be proved done: never (see [`UNPROVABLE`]).
    fn mark_broken(&mut self) {
        self.broken = true;
        UNPROVABLE.store(true, Ordering::Relaxed);
    }

    /// Whether the work is done, without recording what a capture held back (then: not yet).
    pub(crate) fn is_done(&self) -> bool {
        !self.broken
            && self.later.is_empty()
            && self
                .events
                .iter()
                .all(|e| e.try_is_complete().unwrap_or(false))
    }

    /// Whether the work is done (records the events a finished capture had held back).
    pub(crate) fn done(&mut self) -> bool {
        if !self.later.is_empty() {
            self.record_later();
        }
        if self.broken || !self.later.is_empty() {
            return false;
        }
        match self
            .events
            .iter()
            .try_fold(true, |all, e| e.try_is_complete().map(|done| all && done))
        {
            Ok(done) => done,
            Err(e) => {
                // A failed kernel before the event: the memory may still be in use by nothing,
                // but the context is broken; never reuse it.
                tracing::warn!(%e, "querying an event before freeing memory");
                self.mark_broken();
                false
            }
        }
    }
}

impl std::fmt::Debug for Pending {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pending")
            .field("events", &self.events.len())
            .field("later", &self.later.len())
            .field("broken", &self.broken)
            .finish()
    }
}

/// A resource whose uses must follow one another on the GPU (a team's channel: its kernels
/// share flags; the collective scratch). The last stream it was used on: a use on another
/// stream first makes that stream wait for everything queued on the last one. A use holds the
/// resource's [`Turn`] until its work is queued: otherwise a use on another stream, from
/// another thread, could be ordered after the work queued so far but not after this use's,
/// which it would then overlap on the GPU.
#[derive(Default)]
pub(crate) struct Ordered {
    last: Mutex<Option<Arc<CudaStream>>>,
    /// Where a use that holds several turns at once takes this one ([`Ordered::rank`]).
    rank: u8,
}

/// A use's turn on an [`Ordered`] resource: no other use is ordered while it is held.
#[must_use = "a turn is held until the use's work is queued"]
pub(crate) struct Turn<'o> {
    _held: MutexGuard<'o, Option<Arc<CudaStream>>>,
}

impl Ordered {
    /// A resource whose turn is taken after every team's (the scratch): a call holds its
    /// team's turn, then the scratch's, and a graph's launch takes them in the same order
    /// ([`Ordered::rank`]), so no two holders wait for each other.
    pub(crate) fn taken_after_teams() -> Self {
        Ordered {
            rank: 1,
            ..Ordered::default()
        }
    }

    /// The order in which a holder of several turns takes them: by rank, then by address.
    pub(crate) fn rank(&self) -> (u8, usize) {
        (self.rank, self as *const Ordered as usize)
    }

    /// Orders a use on `stream` after every earlier use, on whatever stream; the turn is
    /// held until the use's work is queued.
    #[inline]
    pub(crate) fn enter(&self, stream: &Arc<CudaStream>, captures: &Captures) -> Result<Turn<'_>> {
        let mut last = lock(&self.last);
        match last.as_ref() {
            Some(prev) if prev.cu_stream() == stream.cu_stream() => {}
            Some(prev) => {
                let event =
                    if capturing(prev)? {
                        // Its earlier work was queued before the capture began: the event recorded
                        // then stands for it.
                        captures.entry_event(prev)?
                    } else {
                        Arc::new(prev.record_event(None).map_err(Error::cuda(
                            "cuEventRecord (ordering calls across streams)",
                        ))?)
                    };
                stream.wait(&event).map_err(Error::cuda(
                    "cuStreamWaitEvent (ordering calls across streams)",
                ))?;
                *last = Some(stream.clone());
            }
            None => *last = Some(stream.clone()),
        }
        Ok(Turn { _held: last })
    }

    /// The work queued so far (for retiring the resource).
    pub(crate) fn pending(&self) -> Pending {
        Pending::after(lock(&self.last).clone().into_iter().collect())
    }
}

impl std::fmt::Debug for Ordered {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Ordered")
    }
}

/// A resource that queued work may use: what it needs noted when a call uses it.
pub(crate) trait Resource: Any + Send + Sync {
    /// The streams it was used on, if it tracks them (arrays).
    fn uses(&self) -> Option<&Uses> {
        None
    }
    /// The order of its uses, if they must not overlap (team lanes, the scratch).
    fn ordered(&self) -> Option<&Ordered> {
        None
    }
}

/// One graph being captured through [`Runtime::capture`](crate::Runtime::capture): what its
/// calls used, which the graph keeps alive and orders at every launch.
#[derive(Default)]
pub(crate) struct Capture {
    pub(crate) keep: Mutex<Vec<Arc<dyn Resource>>>,
}

impl Capture {
    fn hold(&self, r: Arc<dyn Resource>) {
        let mut keep = lock(&self.keep);
        if !keep.iter().any(|k| Arc::ptr_eq(k, &r)) {
            keep.push(r);
        }
    }
}

/// One capture in progress: the stream's handle (as a number), the capture, and the event
/// recorded on the stream just before the capture began (what [`Ordered::enter`] waits for
/// when a resource's last use was on that stream).
type InProgress = (usize, Arc<Capture>, Arc<CudaEvent>);

/// The captures in progress.
#[derive(Default)]
pub(crate) struct Captures(Mutex<Vec<InProgress>>);

impl Captures {
    pub(crate) fn begin(&self, stream: &CudaStream, entry: CudaEvent) -> Arc<Capture> {
        let capture = Arc::new(Capture::default());
        lock(&self.0).push((
            stream.cu_stream() as usize,
            capture.clone(),
            Arc::new(entry),
        ));
        capture
    }

    pub(crate) fn end(&self, stream: &CudaStream) {
        lock(&self.0).retain(|(s, _, _)| *s != stream.cu_stream() as usize);
    }

    fn find(&self, stream: &CudaStream) -> Option<(Arc<Capture>, Arc<CudaEvent>)> {
        lock(&self.0)
            .iter()
            .find(|(s, _, _)| *s == stream.cu_stream() as usize)
            .map(|(_, c, e)| (c.clone(), e.clone()))
    }

    fn entry_event(&self, stream: &CudaStream) -> Result<Arc<CudaEvent>> {
        self.find(stream)
            .map(|(_, e)| e)
            .ok_or(Error::CaptureNotTracked {
                call: "ordering a team's calls across streams",
            })
    }

    /// Hands `r` to the graph `stream` is being captured into, if this crate captures it;
    /// false when no capture of this crate holds the stream.
    pub(crate) fn hold_if_captured(&self, stream: &CudaStream, r: Arc<dyn Resource>) -> bool {
        match self.find(stream) {
            Some((c, _)) => {
                c.hold(r);
                true
            }
            None => false,
        }
    }

    /// The capture `stream` is in, if it is captured: `Ok(None)` when it is not, an error when
    /// a capture that this crate did not start holds it.
    #[inline]
    pub(crate) fn of(
        &self,
        call: &'static str,
        stream: &CudaStream,
    ) -> Result<Option<Arc<Capture>>> {
        if !capturing(stream)? {
            return Ok(None);
        }
        match self.find(stream) {
            Some((c, _)) => Ok(Some(c)),
            None => Err(Error::CaptureNotTracked { call }),
        }
    }
}

/// What a call notes of a resource it queues work on: in eager mode, its use on the stream
/// (and its order: the turn, for a resource whose uses take turns); in a capture, the graph
/// keeps it (and orders it at every launch).
#[inline]
pub(crate) fn note<'r>(
    r: &'r Arc<impl Resource>,
    stream: &Arc<CudaStream>,
    capture: Option<&Capture>,
    captures: &Captures,
) -> Result<Option<Turn<'r>>> {
    if let Some(uses) = r.uses() {
        uses.add(stream);
    }
    match capture {
        Some(c) => {
            c.hold(r.clone());
            Ok(None)
        }
        None => r.ordered().map(|o| o.enter(stream, captures)).transpose(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Work whose event could not be recorded is never done, and says so to the runtime's
    /// end, which then gives up waiting for it whatever the timeout (it waited for ever with
    /// none).
    #[test]
    fn work_that_cannot_be_proved_done_never_is_and_says_so() {
        let mut p = Pending::default();
        assert!(p.done());
        p.mark_broken();
        assert!(!p.done() && !p.is_done());
        assert!(some_work_unprovable());
    }
}
