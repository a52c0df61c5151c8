//! One-sided communication on a stream: put, get, signals, quiet.
//!
//! | call | what it queues |
//! |---|---|
//! | [`Runtime::put`]`(src, dst, pe, stream)` | this PE's `src` into `dst` on PE `pe` |
//! | [`Runtime::get`]`(src, dst, pe, stream)` | `src` on PE `pe` into this PE's `dst` |
//! | [`Runtime::put_with_signal`]`(src, dst, word, op, pe, stream)` | a put, then `op` on the signal `word` of PE `pe` once the data is there |
//! | [`Runtime::signal_op`]`(word, op, pe, stream)` | `op` on the signal `word` of PE `pe` |
//! | [`Runtime::signal_wait_until`]`(word, cmp, value, stream)` | the stream waits until this PE's `word` compares `cmp` to `value` |
//! | [`Runtime::quiet`]`(stream)` | completes every put this PE queued on `stream` |
//!
//! Every call that moves data names the source before the destination, as the collectives do.
//! PEs are numbered in the world team (0..[`Runtime::n_pes`]). Remote addresses are the
//! symmetric ones: `dst` names "this array (or view) on PE `pe`". The local side (the source of
//! a put, the destination of a get) is any [`LocalBuffer`]: symmetric memory, or the program's
//! own cudarc allocation registered with [`Runtime::register`]. A signal word is one `u64` of
//! a symmetric array, named with [`SignalArray::signal`] (`flags.signal(3)?`), and a
//! [`SignalOp`] carries its value ([`SignalOp::Set`]`(1)`, [`SignalOp::Add`]`(1)`). Like the
//! collectives, each call is queued on a cudarc stream, synchronises nothing and can be
//! captured in a graph. A put is complete at the destination only after [`Runtime::quiet`] (or
//! a barrier) on its stream, or when its signal is seen.
//!
//! ```no_run
//! use nvshmem::prelude::*;
//! # let rt = Runtime::init()?; let stream = rt.stream().clone();
//! let (me, n) = (rt.my_pe(), rt.n_pes());
//! let halo = rt.alloc_from(&[me as f32; 256])?;
//! let mut ghost = rt.alloc_zeroed::<f32>(256)?;
//! let arrived = rt.alloc_zeroed::<u64>(1)?;
//! // Send my halo to the right neighbour and tell it so; wait for the left one's.
//! rt.put_with_signal(&halo, &mut ghost, arrived.signal(0)?, SignalOp::Set(1), (me + 1) % n, &stream)?;
//! rt.signal_wait_until(arrived.signal(0)?, Cmp::Ge, 1, &stream)?;
//! # Ok::<(), nvshmem::Error>(())
//! ```
use std::{os::raw::c_int, str::FromStr, sync::Arc};

use cudarc::driver::CudaStream;

pub use crate::cmp::Cmp;
use crate::{
    error::{check_len, check_pe, Error},
    memory::Alloc,
    Element, LocalBuffer, LocalBufferMut, Result, Runtime, SymBuffer, SymBufferMut,
};

/// How a signal word is updated, with the value.
///
/// ```no_run
/// use nvshmem::prelude::*;
/// # let rt = Runtime::init()?; let stream = rt.stream().clone();
/// let flags = rt.alloc_zeroed::<u64>(2)?;
/// // Word 0 of PE 0 becomes 5; word 1 counts one more arrival.
/// rt.signal_op(flags.signal(0)?, SignalOp::Set(5), 0, &stream)?;
/// rt.signal_op(flags.signal(1)?, SignalOp::Add(1), 0, &stream)?;
/// # Ok::<(), nvshmem::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SignalOp {
    /// Store the value.
    Set(u64),
    /// Add the value (atomically).
    Add(u64),
}

impl SignalOp {
    /// NVSHMEM's operation and the value.
    fn raw(self) -> (c_int, u64) {
        match self {
            SignalOp::Set(v) => (nvshmem_sys::NVSHMEM_SIGNAL_SET as c_int, v),
            SignalOp::Add(v) => (nvshmem_sys::NVSHMEM_SIGNAL_ADD as c_int, v),
        }
    }
}

impl FromStr for Cmp {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        Ok(match s.trim().to_ascii_lowercase().as_str() {
            "eq" | "==" => Cmp::Eq,
            "ne" | "!=" => Cmp::Ne,
            "gt" | ">" => Cmp::Gt,
            "ge" | ">=" => Cmp::Ge,
            "lt" | "<" => Cmp::Lt,
            "le" | "<=" => Cmp::Le,
            _ => {
                return Err(Error::arg(
                    "Cmp::from_str",
                    "cmp",
                    format!("{s:?}: expected eq, ne, gt, ge, lt or le"),
                ))
            }
        })
    }
}

/// One word of a symmetric `u64` array, used as a signal: "word 3 of `flags`", on whichever PE
/// a call names. Made by [`SignalArray::signal`].
///
/// ```no_run
/// use nvshmem::prelude::*;
/// # let rt = Runtime::init()?;
/// let flags = rt.alloc_zeroed::<u64>(4)?;
/// let word = flags.signal(3)?;
/// assert_eq!(word.index(), 3);
/// assert!(flags.signal(4).is_err());
/// # Ok::<(), nvshmem::Error>(())
/// ```
#[derive(Debug, Clone, Copy)]
pub struct SignalWord<'a> {
    rt: &'a Runtime,
    alloc: &'a Arc<Alloc>,
    ptr: u64,
    index: usize,
}

impl SignalWord<'_> {
    /// Which word of its array it is.
    ///
    /// ```no_run
    /// use nvshmem::prelude::*;
    /// # let rt = Runtime::init()?;
    /// let flags = rt.alloc_zeroed::<u64>(2)?;
    /// assert_eq!(flags.signal(1)?.index(), 1);
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    pub fn index(&self) -> usize {
        self.index
    }
}

/// Symmetric `u64` arrays (and views) as arrays of signal words.
///
/// ```no_run
/// use nvshmem::prelude::*;
/// # let rt = Runtime::init()?; let stream = rt.stream().clone();
/// let flags = rt.alloc_zeroed::<u64>(8)?;
/// rt.signal_op(flags.view(4..)?.signal(0)?, SignalOp::Add(1), 0, &stream)?; // word 4
/// # Ok::<(), nvshmem::Error>(())
/// ```
pub trait SignalArray: SymBuffer<u64> {
    /// Word `index` of the array; [`Error::InvalidArgument`] when it is outside.
    ///
    /// ```no_run
    /// use nvshmem::prelude::*;
    /// # let rt = Runtime::init()?;
    /// let flags = rt.alloc_zeroed::<u64>(1)?;
    /// let e = flags.signal(1).unwrap_err();
    /// assert_eq!(e.to_string(), "signal: invalid index: 1 is outside the signal array of 1 words");
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    fn signal(&self, index: usize) -> Result<SignalWord<'_>> {
        signal_index(index, self.sym_len())?;
        Ok(SignalWord {
            rt: self.sym_runtime(),
            alloc: self.alloc(),
            ptr: self.sym_ptr() + 8 * index as u64,
            index,
        })
    }
}

impl<B: SymBuffer<u64>> SignalArray for B {}

impl Runtime {
    /// Queues a put: `src` (this PE's: symmetric memory, or the program's own memory
    /// registered with [`Runtime::register`]) is copied into `dst` on PE `pe`. Equal lengths.
    ///
    /// ```no_run
    /// # let rt = nvshmem::Runtime::init()?; let stream = rt.stream().clone();
    /// let src = rt.alloc_from(&[rt.my_pe() as u32; 64])?;
    /// let mut dst = rt.alloc_zeroed::<u32>(64)?;
    /// let right = (rt.my_pe() + 1) % rt.n_pes();
    /// rt.put(&src, &mut dst, right, &stream)?;
    /// // From a cudarc allocation of the program's own, registered.
    /// let mut own = stream.clone_htod(&[7u32; 64])?;
    /// rt.put(&rt.register(&mut own)?, &mut dst, right, &stream)?;
    /// rt.quiet(&stream)?;
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    pub fn put<T: Element>(
        &self,
        src: &impl LocalBuffer<T>,
        dst: &mut impl SymBufferMut<T>,
        pe: usize,
        stream: &Arc<CudaStream>,
    ) -> Result<()> {
        const CALL: &str = "put";
        self.rma_checks(CALL, src, dst, pe)?;
        let q = self.enqueue(CALL, stream)?;
        if src.local_len() == 0 {
            return Ok(());
        }
        src.note(&q)?;
        q.uses(dst.alloc())?;
        let cu = q.cu;
        // Dropped once the put is queued: cudarc then records it as a read of `src`.
        let (src_ptr, _record) = src.local_ptr(stream);
        // SAFETY: dst is symmetric memory of this runtime and src this PE's symmetric or
        // registered memory of it, of equal lengths (checked); pe is a valid PE; the stream is
        // checked and its context current.
        unsafe {
            self.nv().copy(
                false,
                dst.sym_ptr(),
                src_ptr,
                src.local_len() * std::mem::size_of::<T>(),
                pe,
                cu,
            )
        };
        Ok(())
    }

    /// Queues a get: `src` on PE `pe` is copied into this PE's `dst` (symmetric memory, or the
    /// program's own memory registered with [`Runtime::register`]). Equal lengths. The data
    /// is in `dst` when the get completes on the stream.
    ///
    /// ```no_run
    /// # let rt = nvshmem::Runtime::init()?; let stream = rt.stream().clone();
    /// let src = rt.alloc_from(&[1.5f64; 8])?;
    /// let mut dst = rt.alloc_zeroed::<f64>(8)?;
    /// rt.get(&src, &mut dst, 0, &stream)?;
    /// // Into a cudarc allocation of the program's own, registered.
    /// let mut own = stream.alloc_zeros::<f64>(8)?;
    /// rt.get(&src, &mut rt.register(&mut own)?, 0, &stream)?;
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    pub fn get<T: Element>(
        &self,
        src: &impl SymBuffer<T>,
        dst: &mut impl LocalBufferMut<T>,
        pe: usize,
        stream: &Arc<CudaStream>,
    ) -> Result<()> {
        const CALL: &str = "get";
        self.rma_checks(CALL, src, dst, pe)?;
        let q = self.enqueue(CALL, stream)?;
        if src.sym_len() == 0 {
            return Ok(());
        }
        q.uses(src.alloc())?;
        dst.note(&q)?;
        let cu = q.cu;
        let bytes = src.sym_len() * std::mem::size_of::<T>();
        // Dropped once the get is queued: cudarc then records it as a write of `dst`.
        let (dst_ptr, _record) = dst.local_ptr_mut(stream);
        // SAFETY: src is symmetric memory of this runtime and dst this PE's symmetric or
        // registered memory of it, of equal lengths (checked); pe is a valid PE; the stream is
        // checked and its context current.
        unsafe { self.nv().copy(true, dst_ptr, src.sym_ptr(), bytes, pe, cu) };
        Ok(())
    }

    /// Queues a put followed by a signal: once `src` has arrived in `dst` on PE `pe`, the
    /// signal word `signal` on that PE is updated by `op`. A zero-length put still delivers
    /// its signal.
    ///
    /// ```no_run
    /// use nvshmem::prelude::*;
    /// # let rt = Runtime::init()?; let stream = rt.stream().clone();
    /// let src = rt.alloc_from(&[7u8; 1024])?;
    /// let mut dst = rt.alloc_zeroed::<u8>(1024)?;
    /// let flags = rt.alloc_zeroed::<u64>(1)?;
    /// rt.put_with_signal(&src, &mut dst, flags.signal(0)?, SignalOp::Set(1), 0, &stream)?;
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    pub fn put_with_signal<T: Element>(
        &self,
        src: &impl LocalBuffer<T>,
        dst: &mut impl SymBufferMut<T>,
        signal: SignalWord<'_>,
        op: SignalOp,
        pe: usize,
        stream: &Arc<CudaStream>,
    ) -> Result<()> {
        const CALL: &str = "put_with_signal";
        self.rma_checks(CALL, src, dst, pe)?;
        self.check_same(CALL, "signal", signal.rt)?;
        let q = self.enqueue(CALL, stream)?;
        src.note(&q)?;
        q.uses(dst.alloc())?;
        q.uses(signal.alloc)?;
        let cu = q.cu;
        let (op, value) = op.raw();
        let bytes = src.local_len() * std::mem::size_of::<T>();
        if bytes == 0 {
            // An empty array has no symmetric address (0) to hand NVSHMEM: the signal alone.
            // SAFETY: as in `signal_op`.
            unsafe { self.nv().signal(signal.ptr, value, op, pe, cu) };
            return Ok(());
        }
        let (src_ptr, _record) = src.local_ptr(stream);
        // SAFETY: as in `put`; the signal word is a symmetric u64 of this runtime (checked).
        unsafe {
            self.nv()
                .put_signal(dst.sym_ptr(), src_ptr, bytes, signal.ptr, value, op, pe, cu)
        };
        Ok(())
    }

    /// Queues an update of the signal word `signal` on PE `pe` by `op`.
    ///
    /// ```no_run
    /// use nvshmem::prelude::*;
    /// # let rt = Runtime::init()?; let stream = rt.stream().clone();
    /// let counter = rt.alloc_zeroed::<u64>(1)?;
    /// rt.signal_op(counter.signal(0)?, SignalOp::Add(1), 0, &stream)?; // PE 0 counts one more
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    pub fn signal_op(
        &self,
        signal: SignalWord<'_>,
        op: SignalOp,
        pe: usize,
        stream: &Arc<CudaStream>,
    ) -> Result<()> {
        const CALL: &str = "signal_op";
        self.check_same(CALL, "signal", signal.rt)?;
        check_pe(CALL, "pe", pe, self.n_pes(), "the job")?;
        let q = self.enqueue(CALL, stream)?;
        q.uses(signal.alloc)?;
        let cu = q.cu;
        let (op, value) = op.raw();
        // SAFETY: the signal word is a symmetric u64 of this runtime (checked); pe valid;
        // stream checked and current.
        unsafe { self.nv().signal(signal.ptr, value, op, pe, cu) };
        Ok(())
    }

    /// Makes `stream` wait until this PE's signal word `signal` compares `cmp` to `value`
    /// (work queued after this on the stream starts only then; the host does not wait). Data
    /// put with the signal ([`Runtime::put_with_signal`]) is visible to the work after it.
    ///
    /// The wait is bounded by the runtime's timeout ([`RuntimeBuilder::timeout`](crate::RuntimeBuilder::timeout),
    /// `NVSHMEM_RS_TIMEOUT`), counted from when the stream reaches it, and ended at once by
    /// [`Runtime::abort`] or a peer's failure: it is this crate's own small kernel (one
    /// thread polling the word), not NVSHMEM's `nvshmemx_signal_wait_until_on_stream`, which
    /// nothing could end. A wait that ends so lets the stream go on; the runtime has failed,
    /// and the next call (or the synchronising copy to the host that reads the data, such as
    /// [`SymArray::to_vec`](crate::SymArray::to_vec)) returns [`Error::SignalWaitFailed`]
    /// naming the word, the comparison, the value and the last value seen.
    ///
    /// ```no_run
    /// use nvshmem::prelude::*;
    /// # let rt = Runtime::init()?; let stream = rt.stream().clone();
    /// let flags = rt.alloc_zeroed::<u64>(1)?;
    /// rt.signal_wait_until(flags.signal(0)?, Cmp::Ge, 1, &stream)?;
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    pub fn signal_wait_until(
        &self,
        signal: SignalWord<'_>,
        cmp: Cmp,
        value: u64,
        stream: &Arc<CudaStream>,
    ) -> Result<()> {
        const CALL: &str = "signal_wait_until";
        self.check_same(CALL, "signal", signal.rt)?;
        let q = self.enqueue(CALL, stream)?;
        q.uses(signal.alloc)?;
        let health = self.health();
        let wait = crate::kernels::Launch::SignalWait(crate::kernels::SignalWaitParams {
            signal: signal.ptr,
            cmp: cmp.raw(),
            value,
            index: signal.index as u64,
            control: health.device_words().0,
            timeout_ns: health.timeout_ns(),
        });
        // The signal word is this PE's symmetric u64 (checked), live while the stream uses it
        // (its use was just noted); the control block lives as long as the runtime; the
        // stream is checked and its context current.
        crate::kernels::launch(stream, &wait)
    }

    /// Queues the completion of every put this PE issued on `stream`: work after it on the
    /// stream starts only when they have arrived. The wait runs inside NVSHMEM, which nothing
    /// can end: one that lasts longer than the runtime's timeout (a put to a PE that is gone)
    /// fails the runtime, and the watchdog ends the process [`GRACE`](crate::runtime::GRACE)
    /// later, saying so (not inside a CUDA graph, whose replays it cannot tell apart).
    ///
    /// ```no_run
    /// # let rt = nvshmem::Runtime::init()?; let stream = rt.stream().clone();
    /// rt.quiet(&stream)?;
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    pub fn quiet(&self, stream: &Arc<CudaStream>) -> Result<()> {
        const CALL: &str = "quiet";
        let q = self.enqueue(CALL, stream)?;
        let cu = q.cu;
        if q.capturing() {
            // SAFETY: NVSHMEM is initialised; the stream is checked and current.
            unsafe { self.nv().quiet(cu) };
            return Ok(());
        }
        // Framed, so that the watchdog bounds the wait (a put to a PE that is gone never
        // completes).
        let health = self.health();
        // SAFETY: the stream is checked and its context current.
        let framed = unsafe { health.nvshmem_begin(cu, CALL, "nvshmemx_quiet_on_stream", None) };
        // SAFETY: NVSHMEM is initialised; the stream is checked and current.
        unsafe { self.nv().quiet(cu) };
        match framed {
            // SAFETY: as for the begin.
            Some(framed) => unsafe { health.nvshmem_end(cu, framed) },
            None => Ok(()),
        }
    }

    /// The checks of every call that moves data: both sides of this runtime, equal lengths, a
    /// PE of the job. (Symmetric memory is a [`LocalBuffer`] too, so either side fits.)
    fn rma_checks<T: Element>(
        &self,
        call: &'static str,
        src: &impl LocalBuffer<T>,
        dst: &impl LocalBuffer<T>,
        pe: usize,
    ) -> Result<()> {
        self.check_same(call, "src", src.local_runtime())?;
        self.check_same(call, "dst", dst.local_runtime())?;
        rma_args(call, src.local_len(), dst.local_len(), pe, self.n_pes())
    }
}

/// The arguments of a put or get past their runtime: equal lengths, and `pe` a PE of the job
/// of `n_pes`.
pub(crate) fn rma_args(
    call: &'static str,
    src_len: usize,
    dst_len: usize,
    pe: usize,
    n_pes: usize,
) -> Result<()> {
    check_len(call, "src", src_len, dst_len, "dst's length")?;
    check_pe(call, "pe", pe, n_pes, "the job")
}

/// A signal word `index` of an array of `len` words.
pub(crate) fn signal_index(index: usize, len: usize) -> Result<()> {
    if index < len {
        return Ok(());
    }
    Err(Error::arg(
        "signal",
        "index",
        format_args!("{index} is outside the signal array of {len} words"),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cmp_parses_and_maps() {
        for c in [Cmp::Eq, Cmp::Ne, Cmp::Gt, Cmp::Ge, Cmp::Lt, Cmp::Le] {
            assert_eq!(c.to_string().parse::<Cmp>().unwrap(), c);
        }
        assert_eq!(">=".parse::<Cmp>().unwrap(), Cmp::Ge);
        assert!("around".parse::<Cmp>().is_err());
        assert_eq!(Cmp::Ge.raw(), 5);
        assert_eq!(SignalOp::Add(3).raw(), (10, 3));
        assert_eq!(SignalOp::Set(7).raw(), (9, 7));
        for c in [Cmp::Eq, Cmp::Ne, Cmp::Gt, Cmp::Ge, Cmp::Lt, Cmp::Le] {
            assert_eq!(Cmp::from_raw(c.raw() as u32), Some(c));
        }
        assert_eq!(Cmp::from_raw(6), None);
    }
}
