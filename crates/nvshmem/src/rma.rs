//! One-sided communication on a stream: put, get, signals, quiet.
//!
//! PEs are numbered in the world team (0..[`Runtime::n_pes`]). Remote addresses are the
//! symmetric ones: `dst` names "this array (or view) on PE `pe`". Like the collectives, each
//! call is queued on a cudarc stream, synchronises nothing and can be captured in a graph.
//! A put is complete at the destination only after [`Runtime::quiet`] (or a barrier) on its
//! stream, or when its signal is seen.
use std::{fmt, os::raw::c_int, str::FromStr};

use cudarc::driver::CudaStream;

use crate::{error::Error, Element, Result, Runtime, SymBuffer, SymBufferMut};

/// `nvshmemx_putmem_on_stream` and `nvshmemx_getmem_on_stream`.
type MemFn = unsafe extern "C" fn(
    *mut std::ffi::c_void,
    *const std::ffi::c_void,
    usize,
    c_int,
    cudarc::driver::sys::CUstream,
);

/// How a signal word is updated.
///
/// ```no_run
/// # use nvshmem::rma::SignalOp;
/// # let rt = nvshmem::Runtime::init()?; let stream = rt.stream().clone();
/// let flags = rt.alloc_zeroed::<u64>(2)?;
/// // Word 0 of PE 0 becomes 5; word 1 counts one more arrival.
/// rt.signal_op(&flags, 0, 5, SignalOp::Set, 0, &stream)?;
/// rt.signal_op(&flags, 1, 1, SignalOp::Add, 0, &stream)?;
/// # Ok::<(), nvshmem::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SignalOp {
    /// Store the value.
    Set,
    /// Add the value (atomically).
    Add,
}

impl SignalOp {
    fn raw(self) -> c_int {
        (match self {
            SignalOp::Set => nvshmem_sys::NVSHMEM_SIGNAL_SET,
            SignalOp::Add => nvshmem_sys::NVSHMEM_SIGNAL_ADD,
        }) as c_int
    }
}

/// A comparison of a signal word with a value, for [`Runtime::signal_wait_until`].
///
/// ```
/// use nvshmem::rma::Cmp;
/// assert_eq!("ge".parse::<Cmp>()?, Cmp::Ge);
/// assert_eq!(Cmp::Ne.to_string(), "ne");
/// # Ok::<(), nvshmem::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Cmp {
    /// Equal.
    Eq,
    /// Not equal.
    Ne,
    /// Greater than.
    Gt,
    /// Greater than or equal.
    Ge,
    /// Less than.
    Lt,
    /// Less than or equal.
    Le,
}

impl Cmp {
    fn raw(self) -> c_int {
        (match self {
            Cmp::Eq => nvshmem_sys::NVSHMEM_CMP_EQ,
            Cmp::Ne => nvshmem_sys::NVSHMEM_CMP_NE,
            Cmp::Gt => nvshmem_sys::NVSHMEM_CMP_GT,
            Cmp::Ge => nvshmem_sys::NVSHMEM_CMP_GE,
            Cmp::Lt => nvshmem_sys::NVSHMEM_CMP_LT,
            Cmp::Le => nvshmem_sys::NVSHMEM_CMP_LE,
        }) as c_int
    }

    fn name(self) -> &'static str {
        match self {
            Cmp::Eq => "eq",
            Cmp::Ne => "ne",
            Cmp::Gt => "gt",
            Cmp::Ge => "ge",
            Cmp::Lt => "lt",
            Cmp::Le => "le",
        }
    }
}

impl fmt::Display for Cmp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
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

/// A PE number below `n_pes`.
fn check_pe(call: &'static str, pe: usize, n_pes: usize) -> Result<c_int> {
    if pe < n_pes {
        Ok(pe as c_int)
    } else {
        Err(Error::arg(
            call,
            "pe",
            format_args!("{pe} is not a PE: there are {n_pes} (0..{n_pes})"),
        ))
    }
}

fn check_lens(call: &'static str, src: usize, dst: usize) -> Result<()> {
    if src == dst {
        Ok(())
    } else {
        Err(Error::arg(
            call,
            "src",
            format_args!("has {src} elements but dst has {dst}: they must be equal"),
        ))
    }
}

/// The address of word `index` of a signal array of `len` words at `ptr`.
fn signal_addr(call: &'static str, ptr: u64, len: usize, index: usize) -> Result<u64> {
    if index < len {
        Ok(ptr + 8 * index as u64)
    } else {
        Err(Error::arg(
            call,
            "index",
            format_args!("{index} is outside the signal array of {len} words"),
        ))
    }
}

impl Runtime {
    /// Queues a put: `src` (this PE's) is copied into `dst` on PE `pe`. Equal lengths.
    ///
    /// ```no_run
    /// # let rt = nvshmem::Runtime::init()?; let stream = rt.stream().clone();
    /// let src = rt.alloc_from(&[rt.my_pe() as u32; 64])?;
    /// let mut dst = rt.alloc_zeroed::<u32>(64)?;
    /// let right = (rt.my_pe() + 1) % rt.n_pes();
    /// rt.put(&mut dst, &src, right, &stream)?;
    /// rt.quiet(&stream)?;
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    pub fn put<T: Element>(
        &self,
        dst: &mut impl SymBufferMut<T>,
        src: &impl SymBuffer<T>,
        pe: usize,
        stream: &CudaStream,
    ) -> Result<()> {
        let f = self.inner.lib.nvshmemx_putmem_on_stream;
        self.copy_mem("put", f, dst, src, pe, stream)
    }

    /// Queues a get: `src` on PE `pe` is copied into this PE's `dst`. Equal lengths. The data
    /// is in `dst` when the get completes on the stream.
    ///
    /// ```no_run
    /// # let rt = nvshmem::Runtime::init()?; let stream = rt.stream().clone();
    /// let src = rt.alloc_from(&[1.5f64; 8])?;
    /// let mut dst = rt.alloc_zeroed::<f64>(8)?;
    /// rt.get(&mut dst, &src, 0, &stream)?;
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    pub fn get<T: Element>(
        &self,
        dst: &mut impl SymBufferMut<T>,
        src: &impl SymBuffer<T>,
        pe: usize,
        stream: &CudaStream,
    ) -> Result<()> {
        let f = self.inner.lib.nvshmemx_getmem_on_stream;
        self.copy_mem("get", f, dst, src, pe, stream)
    }

    /// Put and get: NVSHMEM's `putmem`/`getmem_on_stream` take the same arguments, with `pe`
    /// the PE that holds `dst` (put) or `src` (get).
    fn copy_mem<T: Element>(
        &self,
        call: &'static str,
        f: MemFn,
        dst: &mut impl SymBufferMut<T>,
        src: &impl SymBuffer<T>,
        pe: usize,
        stream: &CudaStream,
    ) -> Result<()> {
        let pe = self.rma_checks(call, dst, src, pe)?;
        let cu = self.enter(call, stream)?;
        if src.sym_len() == 0 {
            return Ok(());
        }
        // SAFETY: dst and src are symmetric arrays of this runtime of equal lengths (checked);
        // pe is a valid PE; the stream is checked and its context current.
        unsafe {
            f(
                dst.sym_ptr() as *mut _,
                src.sym_ptr() as *const _,
                src.sym_len() * std::mem::size_of::<T>(),
                pe,
                cu,
            )
        };
        Ok(())
    }

    /// Queues a put followed by a signal: once `src` has arrived in `dst` on PE `pe`, word
    /// `index` of `signal` on that PE is updated by `op` with `value`.
    ///
    /// ```no_run
    /// # use nvshmem::rma::SignalOp;
    /// # let rt = nvshmem::Runtime::init()?; let stream = rt.stream().clone();
    /// let src = rt.alloc_from(&[7u8; 1024])?;
    /// let mut dst = rt.alloc_zeroed::<u8>(1024)?;
    /// let flags = rt.alloc_zeroed::<u64>(1)?;
    /// rt.put_with_signal(&mut dst, &src, &flags, 0, 1, SignalOp::Set, 0, &stream)?;
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    #[allow(clippy::too_many_arguments)]
    pub fn put_with_signal<T: Element>(
        &self,
        dst: &mut impl SymBufferMut<T>,
        src: &impl SymBuffer<T>,
        signal: &impl SymBuffer<u64>,
        index: usize,
        value: u64,
        op: SignalOp,
        pe: usize,
        stream: &CudaStream,
    ) -> Result<()> {
        const CALL: &str = "put_with_signal";
        let pe = self.rma_checks(CALL, dst, src, pe)?;
        self.check_same(CALL, "signal", signal.sym_runtime())?;
        let sig = signal_addr(CALL, signal.sym_ptr(), signal.sym_len(), index)?;
        let cu = self.enter(CALL, stream)?;
        // SAFETY: as in `put`; sig is word `index` of a symmetric u64 array (checked). A
        // zero-length put still delivers its signal, as NVSHMEM defines it.
        unsafe {
            (self.inner.lib.nvshmemx_putmem_signal_on_stream)(
                dst.sym_ptr() as *mut _,
                src.sym_ptr() as *const _,
                src.sym_len() * std::mem::size_of::<T>(),
                sig as *mut u64,
                value,
                op.raw(),
                pe,
                cu,
            )
        };
        Ok(())
    }

    /// Queues an update of word `index` of `signal` on PE `pe` by `op` with `value`.
    ///
    /// ```no_run
    /// # use nvshmem::rma::SignalOp;
    /// # let rt = nvshmem::Runtime::init()?; let stream = rt.stream().clone();
    /// let flags = rt.alloc_zeroed::<u64>(4)?;
    /// rt.signal_op(&flags, 2, 1, SignalOp::Add, 0, &stream)?;
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    pub fn signal_op(
        &self,
        signal: &impl SymBuffer<u64>,
        index: usize,
        value: u64,
        op: SignalOp,
        pe: usize,
        stream: &CudaStream,
    ) -> Result<()> {
        const CALL: &str = "signal_op";
        self.check_same(CALL, "signal", signal.sym_runtime())?;
        let pe = check_pe(CALL, pe, self.n_pes())?;
        let sig = signal_addr(CALL, signal.sym_ptr(), signal.sym_len(), index)?;
        let cu = self.enter(CALL, stream)?;
        // SAFETY: sig is word `index` of a symmetric u64 array (checked); pe valid; stream
        // checked and current.
        unsafe {
            (self.inner.lib.nvshmemx_signal_op_on_stream)(sig as *mut u64, value, op.raw(), pe, cu)
        };
        Ok(())
    }

    /// Makes `stream` wait until word `index` of this PE's `signal` compares to `value` as
    /// `cmp` says. Work queued after it on the stream runs only then.
    ///
    /// ```no_run
    /// # use nvshmem::rma::Cmp;
    /// # let rt = nvshmem::Runtime::init()?; let stream = rt.stream().clone();
    /// let flags = rt.alloc_zeroed::<u64>(1)?;
    /// rt.signal_wait_until(&flags, 0, Cmp::Ge, 1, &stream)?;
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    pub fn signal_wait_until(
        &self,
        signal: &impl SymBuffer<u64>,
        index: usize,
        cmp: Cmp,
        value: u64,
        stream: &CudaStream,
    ) -> Result<()> {
        const CALL: &str = "signal_wait_until";
        self.check_same(CALL, "signal", signal.sym_runtime())?;
        let sig = signal_addr(CALL, signal.sym_ptr(), signal.sym_len(), index)?;
        let cu = self.enter(CALL, stream)?;
        // SAFETY: sig is word `index` of a symmetric u64 array of this PE (checked); the
        // stream is checked and current.
        unsafe {
            (self.inner.lib.nvshmemx_signal_wait_until_on_stream)(
                sig as *mut u64,
                cmp.raw(),
                value,
                cu,
            )
        };
        Ok(())
    }

    /// Queues completion of every put this PE issued on `stream` before it.
    ///
    /// ```no_run
    /// # let rt = nvshmem::Runtime::init()?;
    /// rt.quiet(rt.stream())?;
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    pub fn quiet(&self, stream: &CudaStream) -> Result<()> {
        let cu = self.enter("quiet", stream)?;
        // SAFETY: NVSHMEM is initialised; the stream is checked and current.
        unsafe { (self.inner.lib.nvshmemx_quiet_on_stream)(cu) };
        Ok(())
    }

    fn rma_checks<T: Element>(
        &self,
        call: &'static str,
        dst: &impl SymBuffer<T>,
        src: &impl SymBuffer<T>,
        pe: usize,
    ) -> Result<c_int> {
        self.check_same(call, "dst", dst.sym_runtime())?;
        self.check_same(call, "src", src.sym_runtime())?;
        check_lens(call, src.sym_len(), dst.sym_len())?;
        check_pe(call, pe, self.n_pes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pe_range() {
        assert_eq!(check_pe("put", 1, 2).unwrap(), 1);
        assert_eq!(
            check_pe("put", 2, 2).unwrap_err().to_string(),
            "put: invalid pe: 2 is not a PE: there are 2 (0..2)"
        );
    }

    #[test]
    fn lengths_must_match() {
        assert!(check_lens("get", 3, 3).is_ok());
        assert_eq!(
            check_lens("get", 3, 4).unwrap_err().to_string(),
            "get: invalid src: has 3 elements but dst has 4: they must be equal"
        );
    }

    #[test]
    fn signal_words_are_in_range() {
        assert_eq!(signal_addr("signal_op", 0x100, 4, 3).unwrap(), 0x118);
        assert!(signal_addr("signal_op", 0x100, 4, 4).is_err());
        assert!(signal_addr("signal_op", 0, 0, 0).is_err());
    }

    #[test]
    fn cmp_parses_and_maps() {
        for c in [Cmp::Eq, Cmp::Ne, Cmp::Gt, Cmp::Ge, Cmp::Lt, Cmp::Le] {
            assert_eq!(c.to_string().parse::<Cmp>().unwrap(), c);
        }
        assert_eq!(">=".parse::<Cmp>().unwrap(), Cmp::Ge);
        assert!("around".parse::<Cmp>().is_err());
        assert_eq!(Cmp::Ge.raw(), 5);
        assert_eq!(SignalOp::Add.raw(), 10);
    }
}
