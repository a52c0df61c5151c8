//! The runtime's collective scratch: symmetric memory that rooted reductions reduce into.
//!
//! NVSHMEM's reductions write their output on every PE, at one symmetric address; a reduction
//! to a root must leave the other PEs' output untouched, so it reduces into this scratch and
//! the root copies the result out. Reduce-scatter with `premul_sum` scales its input into it,
//! and an in-place fp8 all-reduce reduces into it (see `plan::scratch_needed`). The scratch is reserved explicitly, on every PE, because
//! allocating symmetric memory is collective over *all* PEs: doing it lazily inside a call on
//! a smaller team would hang, and inside a captured graph it would fail.
use crate::{Error, Result, Runtime};

/// The reserved scratch (address 0 and 0 bytes when none).
#[derive(Debug, Default)]
pub(crate) struct Scratch {
    ptr: u64,
    bytes: usize,
}

impl Scratch {
    /// Frees the scratch. Collective; called when the runtime finalises.
    ///
    /// # Safety
    /// NVSHMEM is initialised, the runtime's context current, and no queued work uses it.
    pub(crate) unsafe fn release(&mut self, lib: &nvshmem_sys::NvshmemLib) {
        if self.ptr != 0 {
            lib.nvshmem_free(self.ptr as *mut _);
        }
        *self = Scratch::default();
    }
}

impl Runtime {
    /// Makes sure at least `bytes` of collective scratch are reserved: rooted reductions,
    /// [`Team::reduce`](crate::Team::reduce), need as many bytes as their arrays;
    /// [`Team::reduce_scatter`](crate::Team::reduce_scatter) with `premul_sum` as many as its
    /// whole input; an in-place fp8 all-reduce as many as its buffer (the table in
    /// [`crate::collective`]'s docs).
    ///
    /// **Collective over all PEs**, like allocating: every PE calls it with the same size.
    /// Growing the scratch waits for the GPU to finish queued work and reallocates it; call
    /// it once at start-up, outside graph capture, with the largest size you need. A size not
    /// above the current one does nothing.
    ///
    /// ```no_run
    /// let rt = nvshmem::Runtime::init()?;
    /// rt.reserve_scratch(64 << 20)?;
    /// assert!(rt.scratch_bytes() >= 64 << 20);
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    pub fn reserve_scratch(&self, bytes: usize) -> Result<()> {
        let inner = &self.inner;
        let mut scratch = inner.scratch.lock().unwrap_or_else(|p| p.into_inner());
        if bytes <= scratch.bytes {
            return Ok(());
        }
        let mut in_use = inner.heap_in_use.lock().unwrap_or_else(|p| p.into_inner());
        let heap_size = inner.info.heap_size;
        // The old scratch is freed first, so it counts as available. Checked against our own
        // count so every PE refuses alike and none is left waiting inside NVSHMEM.
        let available = heap_size.saturating_sub(in_use.saturating_sub(scratch.bytes));
        if bytes > available {
            return Err(Error::OutOfHeap {
                requested: bytes,
                in_use: *in_use,
                heap_size,
            });
        }
        inner.bind()?;
        inner.ctx.synchronize().map_err(Error::cuda(
            "synchronising before growing the collective scratch",
        ))?;
        *in_use -= scratch.bytes;
        // SAFETY: NVSHMEM is initialised, the context current, the GPU idle (synchronised
        // above), so no queued work uses the old scratch.
        unsafe { scratch.release(inner.lib) };
        // SAFETY: as above; nvshmem_malloc is collective and every PE makes this call.
        let ptr = unsafe { inner.lib.nvshmem_malloc(bytes) };
        if ptr.is_null() {
            return Err(Error::OutOfHeap {
                requested: bytes,
                in_use: *in_use,
                heap_size,
            });
        }
        *in_use += bytes;
        *scratch = Scratch {
            ptr: ptr as u64,
            bytes,
        };
        Ok(())
    }

    /// Bytes of collective scratch reserved now.
    ///
    /// ```no_run
    /// let rt = nvshmem::Runtime::init()?;
    /// assert_eq!(rt.scratch_bytes(), 0);
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    pub fn scratch_bytes(&self) -> usize {
        self.inner
            .scratch
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .bytes
    }

    /// The scratch address, if at least `bytes` are reserved.
    pub(crate) fn scratch_ptr(&self, call: &'static str, bytes: usize) -> Result<u64> {
        let scratch = self.inner.scratch.lock().unwrap_or_else(|p| p.into_inner());
        if bytes == 0 || bytes <= scratch.bytes {
            Ok(scratch.ptr)
        } else {
            Err(Error::ScratchTooSmall {
                call,
                needed: bytes,
                reserved: scratch.bytes,
            })
        }
    }
}
