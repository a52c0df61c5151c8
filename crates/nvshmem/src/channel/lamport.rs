//! A channel's Lamport area (`collective/algo/lamport.rs`, `kernels/lamport.cu`): where it lies
//! after the LL regions, how large it is, and the sentinel its receive buffers hold whenever the
//! channel is handed out zeroed. The algorithm that uses it sits in the collective layer; the
//! area's layout is the channel's, so the pool (`lane.rs`) can fill it.
/// Bytes of the area's header (`NVR_LAM_HEADER`: the run index and the count of the blocks
/// that started in one word, and what each buffer's run re-fills).
pub(crate) const HEADER: usize = 256;
/// The sentinel every 32-bit word of an unwritten receive buffer holds (`NVR_LAM_SENTINEL`).
pub(crate) const SENTINEL: u32 = 0x8000_0000;
/// The largest 2-PE call the default area holds: 2 MiB a PE (6 MiB and the header a channel).
pub(crate) const DEFAULT_MAX: usize = 2 << 20;
/// The smallest useful area: 2-PE calls of 64 KiB (the band starts there); the default
/// ([`default_max`]) makes no smaller one ([`RuntimeBuilder::lamport_bytes`] may ask for one).
///
/// [`RuntimeBuilder::lamport_bytes`]: crate::RuntimeBuilder::lamport_bytes
pub(crate) const SMALLEST_MAX: usize = 64 << 10;
/// Bytes of a Lamport area that holds 2-PE calls of up to `max` bytes: the header and three
/// buffers of one slot (`max` rounded up to 16 bytes); 0 for `max == 0`.
pub(crate) fn area_bytes(max: usize) -> usize {
    if max == 0 {
        0
    } else {
        HEADER + 3 * max.next_multiple_of(16)
    }
}

/// The most bytes a slot holds, whatever the area: the kernels index a call's vectors in 32
/// bits (`NVR_LAM_MAX_BYTES`), so a larger call goes to another algorithm.
pub(crate) const MAX_SLOT: usize = 1 << 30;

/// Bytes one (buffer, sender) slot of an area of `area` bytes holds on a team of `n` PEs:
/// the buffers are `3 x (n - 1)` slots of 16-byte multiples, at most [`MAX_SLOT`]. 0 where
/// there is no area or no peer.
pub(crate) fn slot_bytes(area: usize, n: usize) -> usize {
    if n < 2 || area <= HEADER {
        return 0;
    }
    (((area - HEADER) / (3 * (n - 1))) & !15).min(MAX_SLOT)
}

/// The default largest 2-PE call of each of `channels` channels on a heap of `heap_size`
/// bytes: [`DEFAULT_MAX`] where every area fits in a sixteenth of the heap, else the largest
/// multiple of 16 KiB that does, and none below 64 KiB (a 1 GiB heap, the default, holds
/// eight channels with 2 MiB each: 48 MiB).
pub(crate) fn default_max(heap_size: usize, channels: usize) -> usize {
    let budget = heap_size / 16 / channels.max(1);
    if area_bytes(DEFAULT_MAX) <= budget {
        return DEFAULT_MAX;
    }
    let fit = (budget.saturating_sub(HEADER) / 3) & !((16 << 10) - 1);
    if fit < SMALLEST_MAX {
        0
    } else {
        fit
    }
}

/// Where a channel's Lamport area lies: `offset` bytes from the channel's start (after its LL
/// regions), `bytes` long (0: none).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Area {
    pub(crate) offset: usize,
    pub(crate) bytes: usize,
}

impl Area {
    /// Fills the buffers of the area of the channel at `chan` with the sentinel, on `stream`:
    /// what a zeroed channel needs before its first Lamport call (a zeroed header is the state
    /// before the first run). Nothing where the area is empty.
    ///
    /// # Safety
    /// `chan` is a channel of the pool, whose allocation holds this area; the stream is live
    /// and the runtime's context current; no kernel uses the channel until the stream passes
    /// this point.
    pub(crate) unsafe fn fill(
        self,
        chan: u64,
        stream: cudarc::driver::sys::CUstream,
    ) -> crate::Result<()> {
        if self.bytes <= HEADER {
            return Ok(());
        }
        let at = chan + (self.offset + HEADER) as u64;
        // SAFETY: passed on from the caller: the words lie inside the channel's area.
        unsafe {
            cudarc::driver::sys::cuMemsetD32Async(at, SENTINEL, (self.bytes - HEADER) / 4, stream)
        }
        .result()
        .map_err(crate::Error::cuda("cuMemsetD32Async (Lamport buffers)"))
    }
}
