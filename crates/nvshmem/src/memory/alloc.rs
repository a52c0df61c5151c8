//! One allocation of the symmetric heap, shared by the array that owns it and by whatever
//! still needs it alive (a graph that captured work on it, a call's scratch lease), and freed,
//! through the heap, only once every PE has dropped it and the work queued on it is done.
use std::sync::{
    atomic::{AtomicBool, Ordering},
    Arc, Mutex,
};

use cudarc::driver::{CudaEvent, CudaStream, SyncOnDrop};

use super::{Block, Retired};
use crate::runtime::{
    in_use::{capturing, Pending, Resource, Uses},
    WeakRuntime,
};

/// An allocation: its block, its serial number (the same on every PE: allocations are made
/// in the same order everywhere), and where it was used.
pub struct Alloc {
    /// Its runtime, not kept alive: the runtime itself holds allocations (its scratch, its
    /// channels), and an array holds the runtime beside its allocation.
    rt: WeakRuntime,
    pub(crate) block: Block,
    serial: u64,
    /// The streams this crate's calls queued work on it on.
    uses: Uses,
    /// Events of its uses by cudarc's own copies (cudarc hands a `&CudaStream`, which cannot
    /// be kept alive): one per stream, by the driver's stream id (never reused in a process),
    /// each recorded by cudarc after the copy is queued. Boxed so that a reference to an event
    /// stays valid while more are added; none is removed before the allocation drops.
    copies: Mutex<Vec<(u64, Box<CudaEvent>)>>,
    /// Set when it was used in a way that cannot be proved done (a CUDA graph this crate did
    /// not capture): it is then never freed.
    leak: AtomicBool,
}

impl std::fmt::Debug for Alloc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Alloc")
            .field("block", &self.block)
            .field("serial", &self.serial)
            .finish()
    }
}

impl Alloc {
    pub(crate) fn new(rt: WeakRuntime, block: Block, serial: u64) -> Arc<Self> {
        Arc::new(Alloc {
            rt,
            block,
            serial,
            uses: Uses::default(),
            copies: Mutex::default(),
            leak: AtomicBool::new(false),
        })
    }

    /// What cudarc's own copy on `stream` (through `DevicePtr`) must do to keep this memory
    /// alive until the copy is done: record an event on the stream once the copy is queued.
    /// A copy captured into a graph: kept by the graph if this crate captures it, else the
    /// memory is never freed.
    pub(crate) fn cudarc_use<'s>(self: &'s Arc<Self>, stream: &'s CudaStream) -> SyncOnDrop<'s> {
        if self.block.ptr == 0 {
            return SyncOnDrop::Sync(None);
        }
        match capturing(stream) {
            Ok(false) => {}
            Ok(true) => {
                let held = self
                    .rt
                    .upgrade()
                    .is_some_and(|rt| rt.captures().hold_if_captured(stream, self.clone()));
                if !held {
                    self.leak.store(true, Ordering::Relaxed);
                }
                return SyncOnDrop::Sync(None);
            }
            Err(_) => {
                self.leak.store(true, Ordering::Relaxed);
                return SyncOnDrop::Sync(None);
            }
        }
        match self.copy_event(stream) {
            Some(event) => {
                // SAFETY: the event is boxed inside `copies`, whose boxes are never removed or
                // moved while `self` is borrowed (only `Drop` takes them), so the reference
                // lives as long as the borrow of `self`.
                let event = unsafe { &*event };
                SyncOnDrop::Record(Some((event, stream)))
            }
            // No event to record: wait for the copy instead (cudarc synchronises the stream
            // when the guard drops).
            None => SyncOnDrop::Sync(Some(stream)),
        }
    }

    /// The event of cudarc's copies on `stream`, made on first use (null on failure).
    fn copy_event(&self, stream: &CudaStream) -> Option<*const CudaEvent> {
        let mut id = 0;
        // SAFETY: the stream is live (borrowed) and `id` a valid place for the answer.
        unsafe { cudarc::driver::sys::cuStreamGetId(stream.cu_stream(), &mut id) }
            .result()
            .ok()?;
        let mut copies = self.copies.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((_, e)) = copies.iter().find(|(s, _)| *s == id) {
            return Some(&**e as *const CudaEvent);
        }
        let event = Box::new(stream.context().new_event(None).ok()?);
        let ptr = &*event as *const CudaEvent;
        copies.push((id, event));
        Some(ptr)
    }
}

impl Resource for Alloc {
    fn uses(&self) -> Option<&Uses> {
        Some(&self.uses)
    }
}

impl Drop for Alloc {
    fn drop(&mut self) {
        if self.block.ptr == 0 || self.leak.load(Ordering::Relaxed) {
            return;
        }
        let mut pending = Pending::after(self.uses.take());
        let copies = std::mem::take(self.copies.get_mut().unwrap_or_else(|p| p.into_inner()));
        for (_, event) in copies {
            pending = pending.with_event(*event);
        }
        // Freed later, by every PE alike, once this work is done (see `crate::memory`). A
        // runtime already gone is finalising, which releases the whole heap.
        if let Some(rt) = self.rt.upgrade() {
            rt.heap().retire(Retired {
                block: self.block,
                serial: self.serial,
                pending,
            });
        }
    }
}
