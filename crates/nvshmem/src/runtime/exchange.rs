//! The agreements the library itself needs between PEs (starting, allocating and freeing,
//! making teams, finalising), each one gather of a small fixed-size entry per PE, waited for
//! with a deadline.
//!
//! Every member puts its [`Entry`] straight into every other member's inbox with a signal
//! (`nvshmemx_putmem_signal_on_stream`, point to point: no NVSHMEM collective, so nothing here
//! depends on NVSHMEM's per-team state), on a stream of the runtime's own (never the
//! program's, which may hold work that waits for a peer). The host then polls its signal words
//! until every member's entry has arrived. Nothing on the GPU ever waits for a peer: a peer
//! that never comes costs a host wait that ends after the runtime's timeout, or as soon as the
//! watchdog sees the peer fail, with an error that names the call and what it waited for; no
//! kernel is left spinning, so the process can still exit (under CUDA MPS a spinning kernel
//! holds the process's exit). Every member then reads the same table and decides the same
//! thing.
//!
//! Two agreements never mix: each pair of PEs counts the agreements they have made together
//! (both count alike, since each agreement is made by all its members), a sender's signal is
//! set to that count, and its entry lands in the inbox of the count's parity. A sender can
//! run at most one agreement ahead of a receiver (its next needs the receiver's entry, sent
//! only once the receiver has read this one), so two inboxes per sender suffice.
//!
//! Agreements over a team are ordered after that team's earlier calls
//! (its [`Ordered`](super::in_use::Ordered)), as any call on it is.
use std::{
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use cudarc::driver::{result as cu, sys, CudaEvent, CudaStream};

use super::health::Health;
use crate::{ffi::Nvshmem, ffi::TeamHandle, Error, Result};

/// Words of one PE's entry.
pub(crate) const WORDS: usize = 64;

/// One PE's part of an agreement.
pub(crate) type Entry = [u64; WORDS];

/// Page-locked host memory the copies of an agreement land in, so that they are asynchronous
/// and the host can wait for them with a deadline.
struct Pinned {
    ptr: *mut u64,
    words: usize,
}

// SAFETY: the memory is owned by this struct for its whole life and only touched under the
// exchange's lock.
unsafe impl Send for Pinned {}
// SAFETY: as above.
unsafe impl Sync for Pinned {}

impl Pinned {
    fn new(words: usize) -> Result<Self> {
        let mut p = std::ptr::null_mut();
        // SAFETY: a fresh pinned allocation owned by the result; the context is current.
        unsafe { sys::cuMemHostAlloc(&mut p, words * 8, 0) }
            .result()
            .map_err(Error::cuda("cuMemHostAlloc (exchange)"))?;
        Ok(Pinned {
            ptr: p.cast(),
            words,
        })
    }
}

impl Drop for Pinned {
    fn drop(&mut self) {
        // SAFETY: allocated by cuMemHostAlloc in `new`; dropped only once no copy is in flight
        // (a runtime whose exchange timed out is failed, and leaks its exchange).
        unsafe { sys::cuMemFreeHost(self.ptr.cast()) };
    }
}

/// The runtime's means of agreement: a stream, symmetric room for one entry per PE of the job
/// and this PE's own, and page-locked host memory for both.
pub(crate) struct Exchange {
    /// Held for a whole agreement: per world PE, the agreements made with it so far.
    lock: Mutex<Vec<u64>>,
    stream: Arc<CudaStream>,
    done: CudaEvent,
    /// Symmetric: see [`Slots`].
    sym: u64,
    host: Pinned,
    n_pes: usize,
}

impl std::fmt::Debug for Exchange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Exchange")
            .field("n_pes", &self.n_pes)
            .finish()
    }
}

/// Where an exchange keeps things in its symmetric memory, in words: this PE's outgoing entry,
/// then one signal word per sending PE, then two inboxes of one entry per sending PE.
#[derive(Debug, Clone, Copy)]
struct Slots {
    n_pes: usize,
}

impl Slots {
    const MINE: usize = 0;

    fn signal(self, sender: usize) -> usize {
        WORDS + sender
    }

    fn inbox(self, parity: u64, sender: usize) -> usize {
        WORDS + self.n_pes + (parity as usize * self.n_pes + sender) * WORDS
    }

    fn words(self) -> usize {
        WORDS + self.n_pes + 2 * self.n_pes * WORDS
    }
}

/// Bytes of symmetric memory an exchange needs for a job of `n_pes`.
pub(crate) fn sym_bytes(n_pes: usize) -> usize {
    Slots { n_pes }.words() * 8
}

/// What an agreement is about, for its errors.
#[derive(Debug, Clone, Copy)]
pub(crate) struct About<'a> {
    /// The public call (`alloc`, `Team::split`, ...).
    pub(crate) call: &'static str,
    /// The team the PEs agree over, in words ("the world", "team 5 of 4 PEs").
    pub(crate) team: &'a str,
}

impl Exchange {
    /// The exchange of a starting runtime: `sym` is [`sym_bytes`] of symmetric memory.
    pub(crate) fn new(stream: Arc<CudaStream>, sym: u64, n_pes: usize) -> Result<Self> {
        Ok(Exchange {
            lock: Mutex::new(vec![0; n_pes]),
            done: stream
                .context()
                .new_event(None)
                .map_err(Error::cuda("cuEventCreate (exchange)"))?,
            // The table (this PE's entry, then one per member), then the signals read back.
            host: Pinned::new((n_pes + 1) * WORDS + n_pes)?,
            stream,
            sym,
            n_pes,
        })
    }

    /// The runtime's own stream, which agreements and their preparations run on.
    pub(crate) fn stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }

    /// Waits, once at start-up, until every PE's exchange memory is zeroed (`nvshmem_calloc`
    /// need not have finished zeroing on a peer when it returns here), so that no entry or
    /// signal put into a peer is wiped: a barrier over `team` (every PE), waited for at most
    /// the timeout.
    pub(crate) fn open(&self, nv: Nvshmem, health: &Health, team: TeamHandle) -> Result<()> {
        let about = About {
            call: "Runtime::init",
            team: "the world",
        };
        // SAFETY: `team` is the runtime's own world team; the stream is live, its context
        // current (the runtime is starting on this thread).
        unsafe { nv.barrier(Some(team), self.stream.cu_stream())? };
        self.done
            .record(&self.stream)
            .map_err(Error::cuda("cuEventRecord (exchange)"))?;
        wait(&self.done, health, about)
    }

    /// Gathers every member's entry over `team` (of `n` members, in team order), waiting at
    /// most the runtime's timeout. `make` runs first, under the exchange's lock, with the
    /// exchange's stream: it queues there what must precede the gather (ordering after the
    /// team's earlier calls, zeroing what the entry offers) and returns this PE's entry. On a
    /// timeout the runtime fails (the peers that did arrive wait for this one in vain).
    pub(crate) fn gather(
        &self,
        nv: Nvshmem,
        health: &Health,
        team: TeamHandle,
        n: usize,
        about: About<'_>,
        make: impl FnOnce(&Arc<CudaStream>) -> Result<Entry>,
    ) -> Result<Vec<Entry>> {
        assert!(n <= self.n_pes, "a team is part of the job");
        let mut done_with = self.lock.lock().unwrap_or_else(|p| p.into_inner());
        health.check()?;
        self.stream
            .context()
            .bind_to_thread()
            .map_err(Error::cuda("binding the CUDA context"))?;
        let mine = make(&self.stream)?;
        tracing::debug!(
            call = about.call,
            team = about.team,
            tag = mine[0],
            "agreement"
        );
        let me = nv.world().0;
        // SAFETY: `team` is a live team of `n` members.
        let members = (0..n)
            .map(|i| unsafe { nv.world_pe(team, i) })
            .collect::<Result<Vec<usize>>>()?;
        let slots = Slots { n_pes: self.n_pes };
        let at = |word: usize| self.sym + (word * 8) as u64;
        let cu_stream = self.stream.cu_stream();
        // SAFETY: the host buffer holds n_pes + 1 entries and n_pes signal words and is
        // touched only under the lock, while no copy of an earlier agreement is in flight
        // (each waits for its own, or the runtime fails and leaks the exchange).
        let host = unsafe { std::slice::from_raw_parts_mut(self.host.ptr, self.host.words) };
        let (table, signals) = host.split_at_mut((self.n_pes + 1) * WORDS);
        table[..WORDS].copy_from_slice(&mine);
        // SAFETY: `sym` is this runtime's symmetric exchange memory laid out as `slots`, on
        // every PE; the host buffer is page-locked and outlives the copies (waited for below);
        // every member is a world PE; the stream is live and its context current.
        unsafe {
            cu::memcpy_htod_async(at(Slots::MINE), &table[..WORDS], cu_stream)
                .map_err(Error::cuda("cuMemcpyHtoDAsync (exchange)"))?;
            for &w in members.iter().filter(|&&w| w != me) {
                nv.put_signal(
                    at(slots.inbox(done_with[w] % 2, me)),
                    at(Slots::MINE),
                    WORDS * 8,
                    at(slots.signal(me)),
                    done_with[w] + 1,
                    nvshmem_sys::NVSHMEM_SIGNAL_SET as std::os::raw::c_int,
                    w,
                    cu_stream,
                );
            }
        }
        let start = Instant::now();
        // The puts are out (and `make`'s work done) before the entries are looked for.
        self.done
            .record(&self.stream)
            .map_err(Error::cuda("cuEventRecord (exchange)"))?;
        wait(&self.done, health, about)?;
        let mut polls = 0u32;
        loop {
            // SAFETY: as above; the signal words of every PE are read back.
            unsafe {
                cu::memcpy_dtoh_async(signals, at(slots.signal(0)), cu_stream)
                    .map_err(Error::cuda("cuMemcpyDtoHAsync (exchange)"))?;
            }
            self.done
                .record(&self.stream)
                .map_err(Error::cuda("cuEventRecord (exchange)"))?;
            wait(&self.done, health, about)?;
            if members
                .iter()
                .all(|&w| w == me || signals[w] > done_with[w])
            {
                break;
            }
            health.check()?;
            if let Some(limit) = health.timeout() {
                if start.elapsed() >= limit {
                    return Err(health.host_wait_timed_out(about.call, about.team, limit));
                }
            }
            polls += 1;
            if polls < 200 {
                std::thread::yield_now();
            } else {
                std::thread::sleep(Duration::from_micros(200));
            }
        }
        for (i, &w) in members.iter().enumerate() {
            let slot = &mut table[(i + 1) * WORDS..(i + 2) * WORDS];
            if w == me {
                slot.copy_from_slice(&mine);
                continue;
            }
            // SAFETY: as above; the signal said this inbox holds `w`'s whole entry.
            unsafe {
                cu::memcpy_dtoh_async(slot, at(slots.inbox(done_with[w] % 2, w)), cu_stream)
                    .map_err(Error::cuda("cuMemcpyDtoHAsync (exchange)"))?;
            }
        }
        self.done
            .record(&self.stream)
            .map_err(Error::cuda("cuEventRecord (exchange)"))?;
        wait(&self.done, health, about)?;
        for &w in members.iter().filter(|&&w| w != me) {
            done_with[w] += 1;
        }
        Ok(table[WORDS..WORDS * (n + 1)]
            .chunks_exact(WORDS)
            .map(|c| c.try_into().expect("WORDS words"))
            .collect())
    }
}

/// Waits for `event` by polling, ending at the runtime's timeout (the runtime then fails) or
/// when the watchdog sees a peer fail.
pub(crate) fn wait(event: &CudaEvent, health: &Health, about: About<'_>) -> Result<()> {
    let start = Instant::now();
    let mut spins = 0u32;
    loop {
        if event
            .try_is_complete()
            .map_err(Error::cuda("cuEventQuery (exchange)"))?
        {
            return Ok(());
        }
        health.check()?;
        if let Some(limit) = health.timeout() {
            if start.elapsed() >= limit {
                return Err(health.host_wait_timed_out(about.call, about.team, limit));
            }
        }
        // Agreements are short when every PE is there: yield first, then sleep a little.
        spins += 1;
        if spins < 2000 {
            std::thread::yield_now();
        } else {
            std::thread::sleep(Duration::from_micros(200));
        }
    }
}

/// Builds an entry: `tag` (what is being agreed, so a PE making another call is seen), then
/// `words`, zero-filled.
pub(crate) fn entry(tag: u64, words: &[u64]) -> Entry {
    assert!(words.len() < WORDS, "an entry holds {} words", WORDS - 1);
    let mut e = [0u64; WORDS];
    e[0] = tag;
    e[1..=words.len()].copy_from_slice(words);
    e
}

/// Tags of the agreements, in entry word 0: a PE that sees another tag in a peer's entry knows
/// that the peer made another call at the same point (the program's collectives are out of
/// order), and every PE reports it alike.
pub(crate) mod tag {
    /// Start-up: identities, devices, heap sizes.
    pub(crate) const START: u64 = 0x6e76_7273_0001;
    /// An allocation: serial, size, and the blocks this PE can free.
    pub(crate) const ALLOC: u64 = 0x6e76_7273_0002;
    /// The offset an allocation got.
    pub(crate) const PLACED: u64 = 0x6e76_7273_0003;
    /// Freeing dropped arrays without allocating.
    pub(crate) const FREE: u64 = 0x6e76_7273_0004;
    /// Making a team, over the parent.
    pub(crate) const MAKE_TEAM: u64 = 0x6e76_7273_0005;
    /// Setting a new team up, over the new team.
    pub(crate) const SET_UP_TEAM: u64 = 0x6e76_7273_0006;
    /// Finalising.
    pub(crate) const FINALIZE: u64 = 0x6e76_7273_0007;

    /// The name of a tag, for errors.
    pub(crate) fn name(tag: u64) -> &'static str {
        match tag {
            START => "starting the runtime",
            ALLOC => "an allocation",
            PLACED => "an allocation",
            FREE => "Runtime::free_retired",
            MAKE_TEAM => "making a team",
            SET_UP_TEAM => "setting a team up",
            FINALIZE => "finalising",
            _ => "something else",
        }
    }
}

/// Checks that every PE of `table` made the call tagged `want`: the error names the first PE
/// that made another.
pub(crate) fn same_call(call: &'static str, table: &[Entry], want: u64) -> Result<()> {
    match table.iter().position(|e| e[0] != want) {
        None => Ok(()),
        Some(pe) => Err(Error::OutOfStep {
            call,
            detail: format!(
                "PE {pe} (of the team) was {} at this point, not {}: every PE must make collective \
                 calls in the same order",
                tag::name(table[pe][0]),
                tag::name(want)
            ),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every word of the exchange memory has one use: this PE's entry, one signal per sender,
    /// two inboxes per sender, all inside `sym_bytes`.
    #[test]
    fn the_slots_give_every_sender_its_own_words() {
        for n_pes in [1, 2, 3, 8, 64] {
            let l = Slots { n_pes };
            let mut owner = vec![None; l.words()];
            let mut claim = |range: std::ops::Range<usize>, who: String| {
                for w in range {
                    assert!(owner[w].is_none(), "word {w}: {who} and {:?}", owner[w]);
                    owner[w] = Some(who.clone());
                }
            };
            claim(Slots::MINE..Slots::MINE + WORDS, "mine".into());
            for p in 0..n_pes {
                claim(l.signal(p)..l.signal(p) + 1, format!("signal {p}"));
                for parity in [0, 1] {
                    let i = l.inbox(parity, p);
                    claim(i..i + WORDS, format!("inbox {parity} {p}"));
                }
            }
            assert!(
                owner.iter().all(Option::is_some),
                "unused words at {n_pes} PEs"
            );
            assert_eq!(sym_bytes(n_pes), l.words() * 8);
        }
    }

    #[test]
    fn entries_carry_their_tag_then_their_words() {
        let e = entry(tag::ALLOC, &[7, 8, 9]);
        assert_eq!(&e[..5], &[tag::ALLOC, 7, 8, 9, 0]);
        assert!(e[5..].iter().all(|&w| w == 0));
    }

    #[test]
    fn a_pe_making_another_call_is_named() {
        let table = vec![
            entry(tag::ALLOC, &[1]),
            entry(tag::ALLOC, &[1]),
            entry(tag::MAKE_TEAM, &[]),
        ];
        assert!(same_call("alloc", &table[..2], tag::ALLOC).is_ok());
        let e = same_call("alloc", &table, tag::ALLOC).unwrap_err();
        assert_eq!(
            e.to_string(),
            "alloc: the PEs are out of step: PE 2 (of the team) was making a team at this point, \
             not an allocation: every PE must make collective calls in the same order"
        );
    }
}
