//! The symmetric heap: typed arrays ([`SymArray`]), and this crate's own symmetric memory (the
//! collective scratch, the teams' channels), with one ledger of what is in use.
//!
//! **Allocation is collective.** Every PE must allocate the same arrays, of the same lengths, in
//! the same order: NVSHMEM gives each allocation the same offset on every PE, which is what
//! makes `array` on PE 0 and `array` on PE 1 the same symmetric object. Each allocation is an
//! agreement between the PEs (waited for at most the runtime's timeout): every PE checks that
//! every other is allocating the same size at the same point ([`Error::OutOfStep`] names the
//! first that is not), and, once NVSHMEM has placed the array, that every PE got the same
//! offset (if not, the heaps have come apart and the runtime fails).
//!
//! **Freeing is stream-ordered and agreed.** Dropping an array frees nothing, waits for
//! nothing and calls nothing collective: it records an event on each stream the array was
//! used on (this crate's calls note them; cudarc's copies record their own), and retires it.
//! At the next allocation (or [`Runtime::free_retired`]) every PE offers the retired arrays
//! whose events have completed, and the arrays that every PE offers are freed, in allocation
//! order, on every PE alike. So nothing is freed while queued work (on any PE) may still use
//! it, no PE ever synchronises its device for it, a drop on one thread never waits for an
//! allocation on another, and PEs whose drops land at different moments (threads) still free
//! the same arrays at the same point: the heaps never come apart. Whether an allocation fits is
//! judged by what NVSHMEM still holds (allocated, not yet freed), the same on every PE, not by
//! what each PE still uses: so every PE finds room, or refuses, alike. An array that work captured
//! into a graph uses is kept alive by the [`Graph`](crate::Graph) until the graph is dropped.
//!
//! **A program's own memory** (a cudarc allocation) can be the local side of a put or a get
//! once registered with NVSHMEM: [`Runtime::register`] gives a [`Registered`] handle, which
//! unregisters it when dropped, after the GPU has finished with it. Puts and gets take any
//! [`LocalBuffer`] (symmetric or registered) as their local side.
pub(crate) mod alloc;
pub(crate) mod array;
#[cfg(test)]
mod props;
pub(crate) mod registered;

use std::sync::{Arc, Mutex, MutexGuard};

use cudarc::driver::CudaStream;

pub(crate) use alloc::Alloc;
pub use array::{SymArray, SymBuffer, SymBufferMut, SymView, SymViewMut};
pub use registered::{LocalBuffer, LocalBufferMut, Registered};

use crate::{
    runtime::{
        exchange::{entry, same_call, tag, Entry, WORDS},
        in_use::{Ordered, Pending, Resource, Uses},
    },
    Error, Result, Runtime,
};

/// A block of symmetric memory: its address on this PE and its size.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Block {
    pub(crate) ptr: u64,
    pub(crate) bytes: usize,
}

/// What this runtime's ledger says of the symmetric heap ([`Runtime::heap_usage`]), in bytes.
///
/// The ledger counts what this crate allocated through NVSHMEM, by the sizes asked for: NVSHMEM
/// rounds each allocation up and keeps part of the heap for itself, which is not counted.
///
/// ```no_run
/// # let rt = nvshmem::Runtime::init()?;
/// let u = rt.heap_usage();
/// println!("{} of {} B in use (at most {}), {} B dropped, not yet freed", u.in_use, u.heap_size, u.peak, u.retired);
/// # Ok::<(), nvshmem::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct HeapUsage {
    /// In use: arrays not dropped, the collective scratch and this crate's own allocations
    /// ([`Runtime::heap_in_use`]).
    pub in_use: usize,
    /// The most that was in use at once since the runtime started.
    pub peak: usize,
    /// Dropped but not yet given back to NVSHMEM: freed at an allocation or
    /// [`Runtime::free_retired`] once every PE has dropped them and their work is done (the
    /// module docs say why). Not part of `in_use`.
    pub retired: usize,
    /// The heap's size ([`RuntimeInfo::heap_size`](crate::RuntimeInfo::heap_size)).
    pub heap_size: usize,
}

/// A dropped allocation, waiting for its work and for every PE to drop it too.
#[derive(Debug)]
pub(crate) struct Retired {
    pub(crate) block: Block,
    pub(crate) serial: u64,
    pub(crate) pending: Pending,
}

/// Retired allocations a PE offers to free in one agreement, at most (the rest wait for the
/// next): what fits in an entry after its header.
const OFFER: usize = WORDS - 8;

/// The memory layer's state in a runtime.
#[derive(Debug)]
pub(crate) struct Heap {
    heap_size: usize,
    /// The address of the heap's first allocation (the runtime's exchange), at the same
    /// offset on every PE: allocations are compared between PEs by their offset from it.
    origin: u64,
    ledger: Mutex<Ledger>,
    /// Dropped allocations, in the order dropped. Locked only briefly, so a drop never waits
    /// for an allocation in progress.
    retired: Mutex<Vec<Retired>>,
    /// Held through an allocation or a free: one collective section at a time on this PE.
    section: Mutex<()>,
    /// The collective scratch ([`Runtime::reserve_scratch`]).
    scratch: Mutex<Option<Arc<Scratch>>>,
}

#[derive(Debug, Default)]
struct Ledger {
    /// Bytes allocated through this runtime and not retired (arrays, scratch, internal).
    in_use: usize,
    /// Bytes NVSHMEM holds for this runtime: allocated and not yet freed at an agreement. What
    /// an allocation's room is judged by: allocations and frees are agreed, so it is the same
    /// on every PE at every allocation, where `in_use` falls on each PE when its arrays drop
    /// (a PE that judged by it could find room where another did not, and wait alone in
    /// NVSHMEM's collective malloc for ever).
    held: usize,
    /// The most `in_use` has been.
    peak: usize,
    /// The serial number the next allocation gets (the same on every PE).
    serial: u64,
}

impl Ledger {
    /// An allocation made (on every PE alike: the next serial).
    fn allocated(&mut self, bytes: usize) {
        self.serial += 1;
        self.held += bytes;
        self.charged(bytes);
    }

    /// `bytes` more in use on this PE.
    fn charged(&mut self, bytes: usize) {
        self.in_use += bytes;
        self.peak = self.peak.max(self.in_use);
    }

    /// An allocation dropped on this PE: no longer in use here, still held until freed.
    fn retired(&mut self, bytes: usize) {
        self.in_use = self.in_use.saturating_sub(bytes);
    }

    /// An allocation freed at an agreement (on every PE alike).
    fn freed(&mut self, bytes: usize) {
        self.held = self.held.saturating_sub(bytes);
    }
}

/// The collective scratch: one allocation, and the order of the calls that use it (calls on
/// different streams or teams take turns, so they never share it at once).
pub(crate) struct Scratch {
    pub(crate) alloc: Arc<Alloc>,
    order: Ordered,
}

impl std::fmt::Debug for Scratch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scratch")
            .field("alloc", &self.alloc)
            .finish()
    }
}

impl Scratch {
    /// Its address.
    pub(crate) fn ptr(&self) -> u64 {
        self.alloc.block.ptr
    }
}

impl Resource for Scratch {
    fn uses(&self) -> Option<&Uses> {
        self.alloc.uses()
    }
    fn ordered(&self) -> Option<&Ordered> {
        Some(&self.order)
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Heap {
    /// The heap of a starting runtime whose first allocation, `origin_bytes` at `origin`, the
    /// runtime made itself.
    pub(crate) fn new(heap_size: usize, origin: u64, origin_bytes: usize) -> Self {
        Heap {
            heap_size,
            origin,
            ledger: Mutex::new(Ledger {
                in_use: origin_bytes,
                held: origin_bytes,
                peak: origin_bytes,
                serial: 0,
            }),
            retired: Mutex::default(),
            section: Mutex::default(),
            scratch: Mutex::default(),
        }
    }

    fn ledger(&self) -> MutexGuard<'_, Ledger> {
        lock(&self.ledger)
    }

    /// Allocates `bytes` on every PE (collective), zeroed if asked, for the public call
    /// `call`; returns the allocation. Dropped arrays that every PE has finished with are freed
    /// first. Refused, on every PE alike, when another PE allocates another size at this
    /// point, or when the ledger says the heap has no room (NVSHMEM keeps part of the heap for
    /// itself, so it can also refuse first: then too `OutOfHeap`).
    pub(crate) fn alloc(
        &self,
        rt: &Runtime,
        call: &'static str,
        bytes: usize,
        zeroed: bool,
    ) -> Result<Arc<Alloc>> {
        let _section = lock(&self.section);
        rt.check_health()?;
        rt.bind()?;
        let serial = self.ledger().serial;
        self.agree_and_free(rt, call, tag::ALLOC, &[serial, bytes as u64, zeroed as u64])?;
        let held = self.ledger().held;
        let room = check_room(bytes, held, 0, self.heap_size);
        let ptr = match room {
            // SAFETY: the runtime's context is current; every PE makes this call alike (agreed
            // above, and the ledger that judged the room is the same everywhere).
            Ok(()) => unsafe { rt.nv().malloc(bytes, zeroed) },
            Err(_) => None,
        };
        // Every PE checks that every PE got the memory, at the same offset.
        let offset = ptr.map_or(u64::MAX, |p| p.wrapping_sub(self.origin));
        let placed = rt.agree_world(call, &entry(tag::PLACED, &[serial, offset]))?;
        same_call(call, &placed, tag::PLACED)?;
        if let Some(pe) = placed.iter().position(|e| e[2] == u64::MAX) {
            // NVSHMEM refused somewhere; what it gave elsewhere stays allocated (freeing is
            // collective and the PEs without it would not take part), counted as in use there,
            // and as held on every PE, so that the PEs still judge the room alike.
            if let Some(p) = ptr {
                tracing::warn!(
                    ptr = p,
                    bytes,
                    "an allocation refused on another PE is kept"
                );
                self.ledger().charged(bytes);
            }
            if placed.iter().any(|e| e[2] != u64::MAX) {
                self.ledger().held += bytes;
            }
            return Err(room.err().unwrap_or(Error::OutOfHeap {
                requested: bytes,
                in_use: held,
                heap_size: self.heap_size,
            }))
            .map_err(|e| note_refusal(e, pe));
        }
        if let Some(pe) = placed.iter().position(|e| e[2] != offset) {
            return Err(rt.health().diverged(
                call,
                format!(
                    "allocation {serial} ({bytes} bytes) is at offset {:#x} on PE {pe} but {offset:#x} \
                     here: the symmetric heaps differ",
                    placed[pe][2]
                ),
            ));
        }
        let ptr = ptr.expect("every PE got memory");
        self.ledger().allocated(bytes);
        Ok(Alloc::new(rt.downgrade(), Block { ptr, bytes }, serial))
    }

    /// The agreement that opens an allocation or a free: every PE says what it is doing
    /// (`tag` and `words`, which must match) and which retired allocations it has finished
    /// with; those that every PE offers are freed, in allocation order, on every PE.
    fn agree_and_free(
        &self,
        rt: &Runtime,
        call: &'static str,
        kind: u64,
        words: &[u64],
    ) -> Result<()> {
        let mut held = std::mem::take(&mut *lock(&self.retired));
        let offer = offer(&mut held);
        let mut mine = words.to_vec();
        mine.push(offer.len() as u64);
        mine.extend(&offer);
        let agreed = rt.agree_world(call, &entry(kind, &mine)).and_then(|table| {
            same_call(call, &table, kind)?;
            same_words(call, &table, words)?;
            Ok(agreed_frees(&table, words.len()))
        });
        let result = agreed.map(|frees| {
            for serial in frees {
                let i = held
                    .iter()
                    .position(|r| r.serial == serial)
                    .expect("this PE offered it");
                let r = held.remove(i);
                // SAFETY: every PE dropped this allocation and finished the work queued on it
                // (each offered it only then); every PE frees it here, in the same order; the
                // context is current.
                unsafe { rt.nv().free(r.block.ptr) };
                self.ledger().freed(r.block.bytes);
            }
        });
        // What was not freed goes back, before anything dropped meanwhile.
        let mut retired = lock(&self.retired);
        held.append(&mut retired);
        *retired = held;
        result
    }

    /// Retires an allocation whose owners are gone: freed at an agreement once every PE has
    /// retired it and its work is done. Never blocks and never calls NVSHMEM, so it is safe
    /// in `Drop`, on one PE alone, or while unwinding.
    pub(crate) fn retire(&self, r: Retired) {
        self.ledger().retired(r.block.bytes);
        lock(&self.retired).push(r);
    }

    /// The work still queued on the scratch (waited for before finalising).
    pub(crate) fn live_pending(&self) -> Vec<Pending> {
        lock(&self.scratch)
            .iter()
            .map(|s| Pending::after(s.alloc.uses().map_or_else(Vec::new, Uses::snapshot)))
            .collect()
    }

    /// Whether the work of every retired allocation is done (waited for before finalising).
    pub(crate) fn settled(&self) -> bool {
        lock(&self.retired).iter_mut().all(|r| r.pending.done())
    }

    /// The heap's size (the same on every PE: checked at start-up).
    pub(crate) fn size(&self) -> usize {
        self.heap_size
    }

    /// Bytes in use (not retired).
    pub(crate) fn in_use(&self) -> usize {
        self.ledger().in_use
    }

    /// The ledger's figures.
    fn usage(&self) -> HeapUsage {
        let (in_use, peak) = {
            let l = self.ledger();
            (l.in_use, l.peak)
        };
        HeapUsage {
            in_use,
            peak,
            retired: lock(&self.retired).iter().map(|r| r.block.bytes).sum(),
            heap_size: self.heap_size,
        }
    }

    /// The scratch, if at least `bytes` are reserved: a lease the call notes as a use.
    pub(crate) fn scratch(&self, call: &'static str, bytes: usize) -> Result<Arc<Scratch>> {
        let scratch = lock(&self.scratch);
        let reserved = scratch.as_ref().map_or(0, |s| s.alloc.block.bytes);
        check_scratch(call, bytes, reserved)?;
        Ok(scratch.clone().expect("reserved"))
    }

    fn reserve_scratch(&self, rt: &Runtime, bytes: usize) -> Result<()> {
        let mut scratch = lock(&self.scratch);
        let old = scratch.as_ref().map(|s| s.alloc.block.bytes);
        if old.is_some_and(|old| bytes <= old) {
            return Ok(());
        }
        // The old scratch is retired first, so that this allocation's agreement can free it
        // once its users are done (a graph that captured a call on it keeps it until then).
        *scratch = None;
        let (alloc, grown) = grow(old.unwrap_or(0), bytes, |bytes| {
            self.alloc(rt, "Runtime::reserve_scratch", bytes, false)
        });
        *scratch = alloc.map(|alloc| {
            Arc::new(Scratch {
                alloc,
                order: Ordered::taken_after_teams(),
            })
        });
        grown
    }
}

/// A grow of the scratch from `old` bytes (0: none), already retired, to `bytes`: the new
/// allocation (`alloc`), and whether it was made. Where the heap has no room for it
/// ([`Error::OutOfHeap`]) the old size is allocated again, so that a failed grow leaves the
/// calls the scratch they ran with: that refusal is decided on every PE alike (by the ledger
/// every PE keeps alike, or by NVSHMEM on some PE, which the placement's agreement tells every
/// PE), and the old size is the same everywhere, so every PE makes this second collective
/// allocation, or none. Any other failure is not retried: one seen before the agreement (the
/// runtime's health, binding the device) may be this PE's alone, while the others wait in the
/// agreement until it times out and fails the runtime.
fn grow<A>(
    old: usize,
    bytes: usize,
    mut alloc: impl FnMut(usize) -> Result<A>,
) -> (Option<A>, Result<()>) {
    match alloc(bytes) {
        Ok(a) => (Some(a), Ok(())),
        Err(e @ Error::OutOfHeap { .. }) if old > 0 => match alloc(old) {
            Ok(a) => (Some(a), Err(e)),
            Err(again) => {
                tracing::warn!(
                    old,
                    bytes,
                    error = %again,
                    "the scratch could not grow, nor be reserved again at its old size"
                );
                (None, Err(e))
            }
        },
        Err(e) => (None, Err(e)),
    }
}

/// The serials of the retired allocations whose work is done, oldest first, at most [`OFFER`].
fn offer(held: &mut [Retired]) -> Vec<u64> {
    let mut ready: Vec<u64> = held
        .iter_mut()
        .filter_map(|r| r.pending.done().then_some(r.serial))
        .collect();
    ready.sort_unstable();
    ready.truncate(OFFER);
    ready
}

/// The words after the tag that every entry must share (what is being allocated).
fn same_words(call: &'static str, table: &[Entry], words: &[u64]) -> Result<()> {
    let n = words.len();
    match table.iter().position(|e| e[1..=n] != *words) {
        None => Ok(()),
        Some(pe) => Err(Error::OutOfStep {
            call,
            detail: format!(
                "PE {pe} made allocation {} of {} bytes where this PE made allocation {} of {} \
                 bytes: every PE must allocate the same arrays in the same order",
                table[pe][1],
                table[pe].get(2).copied().unwrap_or(0),
                words[0],
                words.get(1).copied().unwrap_or(0)
            ),
        }),
    }
}

/// The serials that every entry offers (after `header` words and the count), ascending.
fn agreed_frees(table: &[Entry], header: usize) -> Vec<u64> {
    let offered = |e: &Entry| -> Vec<u64> {
        let count = (e[1 + header] as usize).min(OFFER);
        e[2 + header..2 + header + count].to_vec()
    };
    let Some(first) = table.first() else {
        return Vec::new();
    };
    let mut agreed = offered(first);
    for e in &table[1..] {
        let theirs = offered(e);
        agreed.retain(|s| theirs.contains(s));
    }
    agreed.sort_unstable();
    agreed
}

/// An `OutOfHeap` that NVSHMEM gave on PE `pe` rather than this one.
fn note_refusal(e: Error, pe: usize) -> Error {
    tracing::debug!(pe, "NVSHMEM refused an allocation");
    e
}

/// Refuses `requested` bytes on a heap of `heap_size` of which NVSHMEM holds `held`, `freed`
/// of which are freed first. Judged from the ledger's `held`, which every PE keeps alike (they
/// allocate and free alike), so every PE refuses alike.
pub(crate) fn check_room(
    requested: usize,
    held: usize,
    freed: usize,
    heap_size: usize,
) -> Result<()> {
    if requested <= heap_size.saturating_sub(held.saturating_sub(freed)) {
        return Ok(());
    }
    Err(Error::OutOfHeap {
        requested,
        in_use: held,
        heap_size,
    })
}

/// Refuses a call that needs `needed` bytes of collective scratch when `reserved` are (the
/// same on every PE: reserving is collective).
pub(crate) fn check_scratch(call: &'static str, needed: usize, reserved: usize) -> Result<()> {
    if needed <= reserved {
        return Ok(());
    }
    Err(Error::ScratchTooSmall {
        call,
        needed,
        reserved,
    })
}

impl Runtime {
    /// Bytes allocated from the symmetric heap through this runtime and in use: arrays not
    /// dropped, the collective scratch, and this crate's own allocations (made at start-up).
    ///
    /// ```no_run
    /// # let rt = nvshmem::Runtime::init()?;
    /// let before = rt.heap_in_use();
    /// let a = rt.alloc_zeroed::<f64>(100)?;
    /// assert_eq!(rt.heap_in_use(), before + 800);
    /// drop(a);
    /// assert_eq!(rt.heap_in_use(), before);
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    pub fn heap_in_use(&self) -> usize {
        self.heap().in_use()
    }

    /// The heap ledger's figures: in use, the peak, and what was dropped but not yet freed.
    /// A program that frees what it allocates comes back to the same `in_use`, and to
    /// `retired` 0 after [`Runtime::free_retired`] once the GPU is done with the dropped arrays
    /// (`tests/gpu_soak.rs` checks both over thousands of allocations).
    ///
    /// ```no_run
    /// # let rt = nvshmem::Runtime::init()?;
    /// let before = rt.heap_usage();
    /// let a = rt.alloc_zeroed::<u32>(1 << 20)?;
    /// assert!(rt.heap_usage().peak >= before.in_use + (4 << 20));
    /// drop(a);
    /// assert_eq!(rt.heap_usage().retired, 4 << 20);
    /// rt.stream().synchronize()?; // the allocation's zeroing is done
    /// rt.free_retired()?;
    /// assert_eq!(rt.heap_usage().retired, 0);
    /// assert_eq!(rt.heap_usage().in_use, before.in_use);
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    pub fn heap_usage(&self) -> HeapUsage {
        self.heap().usage()
    }

    /// Frees, now, the dropped arrays that every PE has dropped and whose queued work is
    /// done (collective, like allocating: every PE calls it at the same point). Allocating does
    /// this by itself; call it to give memory back to NVSHMEM without allocating. It never
    /// waits for the GPU: an array whose work is still queued somewhere stays retired until a
    /// later allocation or call (the module docs say why). It also destroys the teams dropped
    /// since the last team was made, whose work is done.
    ///
    /// ```no_run
    /// # let rt = nvshmem::Runtime::init()?;
    /// let a = rt.alloc_zeroed::<u8>(1 << 20)?;
    /// drop(a);
    /// rt.free_retired()?;
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    pub fn free_retired(&self) -> Result<()> {
        const CALL: &str = "Runtime::free_retired";
        let heap = self.heap();
        let _section = lock(&heap.section);
        self.check_health()?;
        self.bind()?;
        let serial = heap.ledger().serial;
        heap.agree_and_free(self, CALL, tag::FREE, &[serial])?;
        self.teams().destroy_retired(self);
        Ok(())
    }

    /// Makes sure at least `bytes` of collective scratch are reserved: rooted reductions on
    /// teams that are not peer-mapped, in-place reductions, `premul_sum` and `avg` there,
    /// 16-bit integer reduce-scatters there, a forced algorithm that needs it (the table in
    /// [`crate::collective`]'s docs). Where the team's NVLink kernels run, the automatic
    /// choice needs none; with more reserved it may take NVSHMEM's path where that needs
    /// scratch.
    ///
    /// **Collective over all PEs**, like allocating: every PE calls it with the same size.
    /// Growing the scratch retires the old one (freed once every call and graph that used it is
    /// done with it) and allocates a new one; call it once at start-up with the largest size
    /// you need. A size not above the current one does nothing. Calls that use the scratch take
    /// turns on the GPU, whatever their streams and teams.
    ///
    /// A grow the heap has no room for returns [`Error::OutOfHeap`] on every PE, after
    /// reserving the old size again (a collective allocation, which every PE makes alike), so
    /// the calls that ran before still run. Only where even that finds no room (the old
    /// scratch, still in use by queued work or a graph on some PE, was not yet freed) is no
    /// scratch left reserved; [`Runtime::scratch_bytes`] says which.
    ///
    /// ```no_run
    /// let rt = nvshmem::Runtime::init()?;
    /// rt.reserve_scratch(64 << 20)?;
    /// assert!(rt.scratch_bytes() >= 64 << 20);
    /// // More than the heap holds: refused on every PE, the 64 MiB kept.
    /// if let Err(e) = rt.reserve_scratch(1 << 50) {
    ///     eprintln!("{e}; {} bytes of scratch reserved", rt.scratch_bytes());
    /// }
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    pub fn reserve_scratch(&self, bytes: usize) -> Result<()> {
        self.heap().reserve_scratch(self, bytes)
    }

    /// Bytes of collective scratch reserved now.
    ///
    /// ```no_run
    /// let rt = nvshmem::Runtime::init()?;
    /// assert_eq!(rt.scratch_bytes(), 0);
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    pub fn scratch_bytes(&self) -> usize {
        lock(&self.heap().scratch)
            .as_ref()
            .map_or(0, |s| s.alloc.block.bytes)
    }
}

/// How a host slice is backed, for asynchronous copies: CUDA stages pageable memory before an
/// upload returns and finishes a download before it returns, so the slice may be reused at
/// once; page-locked (or managed) memory is read or written by the copy engine later, so the
/// copy must be waited for before the borrow of the slice ends.
pub(crate) fn is_page_locked(host: *const u8) -> bool {
    use cudarc::driver::sys;
    let mut kind = 0u32;
    // SAFETY: the attribute query reads nothing through the pointer; `kind` is a valid place
    // for a CUmemorytype. For pageable memory the driver answers CUDA_ERROR_INVALID_VALUE.
    let r = unsafe {
        sys::cuPointerGetAttribute(
            (&mut kind as *mut u32).cast(),
            sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
            host as sys::CUdeviceptr,
        )
    };
    r == sys::CUresult::CUDA_SUCCESS
}

impl Runtime {
    /// Queues a copy of `src` (host) to device address `dst` on `stream`; if `src` is
    /// page-locked, waits for it before returning (see [`is_page_locked`]).
    pub(crate) fn copy_in(
        &self,
        call: &'static str,
        dst: u64,
        src: &[u8],
        stream: &CudaStream,
    ) -> Result<()> {
        let cu = self.enter(call, stream)?;
        if src.is_empty() {
            return Ok(());
        }
        // SAFETY: the caller passes a device address of this runtime with room for `src`;
        // `src` outlives the copy: CUDA stages pageable memory before the call returns, and
        // page-locked memory is waited for below, before the borrow ends.
        unsafe { cudarc::driver::result::memcpy_htod_async(dst, src, cu) }
            .map_err(Error::cuda("cuMemcpyHtoDAsync"))?;
        if is_page_locked(src.as_ptr()) {
            stream
                .synchronize()
                .map_err(Error::cuda("waiting for a copy from page-locked memory"))?;
        }
        Ok(())
    }

    /// Queues a copy from device address `src` into `dst` (host) on `stream`; if `dst` is
    /// page-locked, waits for it before returning (pageable memory is written before the call
    /// returns anyway).
    pub(crate) fn copy_out(
        &self,
        call: &'static str,
        dst: &mut [u8],
        src: u64,
        stream: &CudaStream,
    ) -> Result<()> {
        let cu = self.enter(call, stream)?;
        if dst.is_empty() {
            return Ok(());
        }
        let locked = is_page_locked(dst.as_ptr());
        // SAFETY: the caller passes a device address of this runtime holding `dst.len()`
        // bytes; `dst` outlives the copy: CUDA finishes a copy into pageable memory before the
        // call returns, and one into page-locked memory is waited for below.
        unsafe { cudarc::driver::result::memcpy_dtoh_async(dst, src, cu) }
            .map_err(Error::cuda("cuMemcpyDtoHAsync"))?;
        if locked {
            stream
                .synchronize()
                .map_err(Error::cuda("waiting for a copy into page-locked memory"))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(rows: &[&[u64]]) -> Vec<Entry> {
        rows.iter().map(|r| entry(tag::ALLOC, r)).collect()
    }

    #[test]
    fn only_what_every_pe_offers_is_freed_in_allocation_order() {
        // Header words: serial, bytes, zeroed; then the count and the serials.
        let t = table(&[
            &[9, 64, 0, 3, 4, 2, 7],
            &[9, 64, 0, 2, 7, 4],
            &[9, 64, 0, 4, 1, 4, 7, 8],
        ]);
        assert_eq!(agreed_frees(&t, 3), vec![4, 7]);
        // A PE that offers nothing blocks every free.
        let t = table(&[&[9, 64, 0, 2, 4, 7], &[9, 64, 0, 0]]);
        assert!(agreed_frees(&t, 3).is_empty());
        // One PE: what it offers.
        let t = table(&[&[1, 8, 1, 2, 5, 3]]);
        assert_eq!(agreed_frees(&t, 3), vec![3, 5]);
    }

    /// Two PEs that allocated alike, one of which has dropped an array the other still holds
    /// (drops are not collective): the next allocation's room is judged alike on both, by what
    /// NVSHMEM still holds, until the agreed free. (Judged by what each PE still uses, the PE
    /// that had dropped found room, and would have entered NVSHMEM's collective malloc alone.)
    #[test]
    fn every_pe_judges_the_room_alike_whenever_its_arrays_drop() {
        let heap = 1000;
        let (mut dropped, mut kept) = (Ledger::default(), Ledger::default());
        for l in [&mut dropped, &mut kept] {
            l.allocated(600);
        }
        dropped.retired(600);
        assert_eq!((dropped.in_use, kept.in_use), (0, 600));
        for l in [&dropped, &kept] {
            assert!(check_room(600, l.held, 0, heap).is_err());
            assert!(check_room(400, l.held, 0, heap).is_ok());
        }
        // The other PE drops it too; the next agreement frees it on both.
        kept.retired(600);
        for l in [&mut dropped, &mut kept] {
            l.freed(600);
            assert_eq!((l.in_use, l.held, l.peak, l.serial), (0, 0, 600, 1));
            assert!(check_room(600, l.held, 0, heap).is_ok());
        }
    }

    /// A failed grow keeps a scratch of the old size: the old scratch was set aside before
    /// the new one was asked for (so that the allocation's agreement can free it), and a
    /// refusal left none (scratch_bytes() fell to 0, and every call that had run with the old
    /// scratch then failed with ScratchTooSmall). A heap of 100 bytes, the old scratch of 60
    /// freed at the agreement, a grow to 120.
    #[test]
    fn a_grow_the_heap_has_no_room_for_keeps_the_old_size() {
        let heap = 100;
        let out = |requested| Error::OutOfHeap {
            requested,
            in_use: 0,
            heap_size: heap,
        };
        let mut asked = Vec::new();
        let (kept, grown) = grow(60, 120, |b| {
            asked.push(b);
            if b <= heap {
                Ok(b)
            } else {
                Err(out(b))
            }
        });
        assert_eq!((kept, asked), (Some(60), vec![120, 60]));
        assert!(matches!(
            grown,
            Err(Error::OutOfHeap { requested: 120, .. })
        ));
        // Where the grow fits there is one allocation.
        let (new, grown) = grow(60, 80, Ok);
        assert_eq!(new, Some(80));
        assert!(grown.is_ok());
        // The old size refused too (still held elsewhere): none, and the grow's error.
        let (none, grown) = grow(60, 120, |b| Err::<usize, _>(out(b)));
        assert_eq!(none, None);
        assert!(matches!(
            grown,
            Err(Error::OutOfHeap { requested: 120, .. })
        ));
        // Nothing to keep, or a failure that may be this PE's alone: one allocation only.
        for (old, e) in [
            (0, out(120)),
            (
                60,
                Error::OutOfStep {
                    call: "Runtime::reserve_scratch",
                    detail: String::new(),
                },
            ),
        ] {
            let mut calls = 0;
            let mut e = Some(e);
            let (none, grown) = grow(old, 120, |_| {
                calls += 1;
                Err::<usize, _>(e.take().expect("asked once"))
            });
            assert_eq!((none, calls), (None, 1));
            assert!(grown.is_err());
        }
    }

    #[test]
    fn a_count_past_the_entry_is_cut_to_what_fits() {
        let mut e = entry(tag::ALLOC, &[0, 8, 0, u64::MAX]);
        e[5] = 1;
        assert_eq!(agreed_frees(&[e], 3).len(), OFFER);
    }

    #[test]
    fn an_allocation_of_another_size_or_order_is_named() {
        let t = table(&[&[3, 64, 0], &[3, 64, 0], &[3, 128, 0]]);
        assert!(same_words("alloc", &t[..2], &[3, 64, 0]).is_ok());
        let e = same_words("alloc", &t, &[3, 64, 0]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "alloc: the PEs are out of step: PE 2 made allocation 3 of 128 bytes where this PE made \
             allocation 3 of 64 bytes: every PE must allocate the same arrays in the same order"
        );
        let t = table(&[&[3, 64, 0], &[4, 64, 0]]);
        assert!(same_words("alloc", &t, &[3, 64, 0]).is_err());
    }

    #[test]
    fn the_oldest_finished_allocations_are_offered_first() {
        let mut held: Vec<Retired> = [5u64, 2, 9]
            .into_iter()
            .map(|serial| Retired {
                block: Block {
                    ptr: 0x1000 * serial,
                    bytes: 8,
                },
                serial,
                pending: Pending::default(),
            })
            .collect();
        assert_eq!(offer(&mut held), vec![2, 5, 9]);
    }
}
