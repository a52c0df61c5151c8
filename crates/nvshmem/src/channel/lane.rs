//! What this crate's collectives keep per team: a *lane*, the team's channel (the symmetric
//! memory its NVLink kernels keep their epochs, flags, packets and Lamport buffers in,
//! `kernels/PROTOCOL.md`), the order of the team's calls across streams, and the stream its
//! copy-engine collectives fork onto.
//!
//! **One channel per team, chosen when the team is made.** A fixed pool of channels is
//! allocated when the runtime starts (allocation is collective over every PE, so it cannot
//! happen later on a smaller team). Making a team is already an agreement between its members
//! (every member makes the same call at the same point), and in it each member offers the
//! channels free on it; the team takes the lowest free on all of them. Nothing about a channel
//! is decided at a call, so calls may come from any stream and thread in any order, and
//! nothing is agreed while a stream is being captured.
//!
//! **Calls of one team take turns on the GPU.** Their kernels share the channel's flags, so a
//! call on another stream than the team's last one first waits for the team's earlier calls
//! ([`Ordered`]), as NCCL orders the calls of one communicator. Calls of different teams run
//! at once.
//!
//! **A channel is reused only once nothing can land in it.** When a team is dropped, its
//! channel waits for the team's last work (an event on its last stream) on this PE. Every store
//! a peer's kernel makes into this PE's channel is observed by this PE's kernel of the same
//! call before that kernel ends (`kernels/PROTOCOL.md`, "Quiescence"), so once this PE's last
//! kernel on the channel is done, nothing more arrives in it. The channel is then zeroed, and
//! its Lamport buffers filled with their sentinel, on the runtime's own stream (the
//! agreements'), ahead of this PE's entry in the next team's agreement, and offered as free in
//! it: a peer learns that it is free only from that agreement, which follows the zeroing on
//! this PE.
use std::sync::{Arc, Mutex, OnceLock};

use cudarc::driver::{result as cu, CudaStream};

use super::MAX_CHANNELS;
use crate::{
    memory::Alloc,
    runtime::in_use::{Ordered, Pending, Resource},
    Error, Result,
};

/// A team's channel: its index in the pool and its local address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Channel {
    pub(crate) index: usize,
    pub(crate) addr: u64,
}

/// The channels of a runtime: one symmetric allocation, cut into `count` channels.
pub(crate) struct ChannelPool {
    alloc: Arc<Alloc>,
    /// Bytes of one channel.
    each: usize,
    count: usize,
    /// Each channel's Lamport area, filled with its sentinel whenever the channel is zeroed.
    lamport: super::lamport::Area,
    state: Mutex<PoolState>,
}

#[derive(Default)]
struct PoolState {
    /// Channels held by a team (bit i: channel i).
    held: u64,
    /// Channels whose Lamport area holds zeros, not yet the sentinel (all at first).
    unfilled: u64,
    /// Channels of dropped teams, with the work that must end before they can be reused.
    released: Vec<(usize, Pending)>,
}

impl std::fmt::Debug for ChannelPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChannelPool")
            .field("count", &self.count)
            .field("each", &self.each)
            .finish()
    }
}

impl ChannelPool {
    /// A pool of `count` channels (at most [`MAX_CHANNELS`]) of `each` bytes in `alloc`
    /// (zeroed), each with the Lamport area `lamport` (filled when first offered: `free_mask`).
    pub(crate) fn new(
        alloc: Arc<Alloc>,
        each: usize,
        count: usize,
        lamport: super::lamport::Area,
    ) -> Self {
        ChannelPool {
            alloc,
            each,
            count: count.min(MAX_CHANNELS),
            lamport,
            state: Mutex::new(PoolState {
                unfilled: u64::MAX,
                ..PoolState::default()
            }),
        }
    }

    /// Bytes of symmetric memory the pool holds.
    pub(crate) fn bytes(&self) -> usize {
        self.alloc.block.bytes
    }

    /// A symmetric address, to find each member's mapping with `nvshmem_ptr`.
    pub(crate) fn probe(&self) -> u64 {
        self.alloc.block.ptr
    }

    fn addr(&self, index: usize) -> u64 {
        self.alloc.block.ptr + (index * self.each) as u64
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, PoolState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The channels free on this PE, as a mask, for a team's agreement: those no team holds.
    /// Released channels whose work is done are zeroed first, on `stream` (the agreement's,
    /// so the zeroing precedes what the peers learn from it), and become free; every free
    /// channel whose Lamport area still holds zeros gets its sentinel there too.
    pub(crate) fn free_mask(&self, stream: &CudaStream) -> Result<u64> {
        let mut state = self.lock();
        let mut kept = Vec::new();
        for (index, mut pending) in std::mem::take(&mut state.released) {
            if !pending.done() {
                kept.push((index, pending));
                continue;
            }
            let (addr, cu_stream) = (self.addr(index), stream.cu_stream());
            // SAFETY: the channel lies inside the pool's allocation, which lives as long as the
            // pool, and nothing uses it any more (its last team's work is done); the stream is
            // live and the runtime's context current (the caller's).
            let zeroed = unsafe { cu::memset_d8_async(addr, 0, self.each, cu_stream) };
            if let Err(e) = zeroed {
                kept.push((index, pending));
                state.released = kept;
                return Err(Error::cuda("cuMemsetD8Async (channel)")(e));
            }
            state.held &= !(1 << index);
            state.unfilled |= 1 << index;
        }
        state.released = kept;
        let released = state.released.iter().fold(0u64, |m, (i, _)| m | 1 << i);
        let all = if self.count == 64 {
            u64::MAX
        } else {
            (1u64 << self.count) - 1
        };
        let free = all & !state.held & !released;
        // A free channel's Lamport area gets its sentinel here, on the agreement's stream,
        // before any peer learns that the channel is free.
        let unfilled = free & state.unfilled;
        for index in (0..self.count).filter(|i| unfilled >> i & 1 != 0) {
            // SAFETY: as the zeroing above: a free channel of the pool, nothing uses it.
            unsafe { self.lamport.fill(self.addr(index), stream.cu_stream()) }?;
            state.unfilled &= !(1 << index);
        }
        Ok(free)
    }

    /// Takes channel `index`, free on every member (agreed).
    pub(crate) fn take(&self, index: usize) -> Channel {
        self.lock().held |= 1 << index;
        Channel {
            index,
            addr: self.addr(index),
        }
    }

    /// Gives a dropped team's channel back, to be reused once `pending` is done.
    fn release(&self, index: usize, pending: Pending) {
        self.lock().released.push((index, pending));
    }

    /// Whether every released channel's work is done (waited for before finalising).
    pub(crate) fn settled(&self) -> bool {
        self.lock().released.iter_mut().all(|(_, p)| p.done())
    }
}

/// The lowest channel free on every member: the AND of their masks.
pub(crate) fn agreed_channel(masks: impl IntoIterator<Item = u64>) -> Option<usize> {
    let common = masks.into_iter().fold(u64::MAX, |m, x| m & x);
    (common != 0).then(|| common.trailing_zeros() as usize)
}

/// A stream beside a team's calls, with the two events that fork work onto it and join it
/// back (the copy-engine collectives' own part runs there).
pub(crate) struct SideStream {
    pub(crate) stream: Arc<CudaStream>,
    pub(crate) fork: cudarc::driver::CudaEvent,
    pub(crate) join: cudarc::driver::CudaEvent,
}

impl SideStream {
    /// A side stream and its events in `stream`'s context.
    pub(crate) fn new(stream: &CudaStream) -> Result<Self> {
        let ctx = stream.context();
        Ok(SideStream {
            stream: ctx.new_stream().map_err(Error::cuda("cuStreamCreate"))?,
            fork: ctx.new_event(None).map_err(Error::cuda("cuEventCreate"))?,
            join: ctx.new_event(None).map_err(Error::cuda("cuEventCreate"))?,
        })
    }
}

impl std::fmt::Debug for SideStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SideStream").finish_non_exhaustive()
    }
}

/// A team's lane (shared by predefined teams with the same members, whose calls then take
/// turns together).
pub(crate) struct Lane {
    pub(crate) order: Ordered,
    pub(crate) channel: Option<Channel>,
    side: OnceLock<Arc<SideStream>>,
    pool: Arc<ChannelPool>,
}

impl std::fmt::Debug for Lane {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lane")
            .field("channel", &self.channel)
            .finish()
    }
}

impl Lane {
    pub(crate) fn new(pool: Arc<ChannelPool>, channel: Option<Channel>) -> Self {
        Lane {
            order: Ordered::default(),
            channel,
            side: OnceLock::new(),
            pool,
        }
    }

    /// The side stream, made on first use.
    pub(crate) fn side(&self, stream: &CudaStream) -> Result<Arc<SideStream>> {
        if let Some(s) = self.side.get() {
            return Ok(s.clone());
        }
        let made = Arc::new(SideStream::new(stream)?);
        Ok(self.side.get_or_init(|| made).clone())
    }

    /// [`Team::set_channel_epoch_for_tests`](crate::Team::set_channel_epoch_for_tests): this
    /// PE's part of the channel set, on `stream`, to the state after run `epoch` of every block
    /// (the rest zeroed, the Lamport buffers refilled with their sentinel); `false` where the
    /// team has no channel.
    pub(crate) fn preset_epoch(&self, epoch: u32, stream: &CudaStream) -> Result<bool> {
        let Some(c) = self.channel else {
            return Ok(false);
        };
        // The header (epochs, arrive and depart words) is what precedes the LL regions.
        let header = super::chan_bytes(0);
        let s = stream.cu_stream();
        // SAFETY: the channel lies inside the pool's allocation, which lives as long as the
        // pool (held by this lane), `each` bytes from its address, the header first; the
        // stream is live and the runtime's context current (the caller bound it). No kernel
        // uses the channel meanwhile: the caller's contract, and the team's order puts this
        // after the team's earlier calls on this PE.
        unsafe {
            cu::memset_d8_async(c.addr, 0, self.pool.each, s)
                .map_err(Error::cuda("cuMemsetD8Async (channel)"))?;
            cudarc::driver::sys::cuMemsetD32Async(c.addr, epoch, header / 4, s)
                .result()
                .map_err(Error::cuda("cuMemsetD32Async (channel)"))?;
            self.pool.lamport.fill(c.addr, s)?;
        }
        Ok(true)
    }
}

impl Resource for Lane {
    fn ordered(&self) -> Option<&Ordered> {
        Some(&self.order)
    }
}

impl Drop for Lane {
    fn drop(&mut self) {
        if let Some(c) = self.channel {
            // The side stream's work joins the team's stream before the call ends, so the last
            // stream's work covers it.
            self.pool.release(c.index, self.order.pending());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lowest_channel_free_on_every_member_is_taken() {
        assert_eq!(agreed_channel([0b1110, 0b1011, 0b1010]), Some(1));
        assert_eq!(agreed_channel([0b0110, 0b1001]), None);
        assert_eq!(agreed_channel([u64::MAX]), Some(0));
        assert_eq!(agreed_channel([1 << 63, u64::MAX]), Some(63));
        assert_eq!(agreed_channel(std::iter::empty()), Some(0));
    }
}
