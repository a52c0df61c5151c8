//! [`Registered`]: a program's own cudarc allocation registered with NVSHMEM, so that it can be
//! the local side of a put or a get; and [`LocalBuffer`] / [`LocalBufferMut`], what
//! [`Runtime::put`](crate::Runtime::put) and [`Runtime::get`](crate::Runtime::get) accept as
//! that side (symmetric memory or registered memory).
use cudarc::driver::{
    sys::CUdeviceptr, CudaSlice, CudaStream, CudaViewMut, DevicePtr, DevicePtrMut, DeviceSlice,
    SyncOnDrop,
};

use super::{SymBuffer, SymBufferMut};
use crate::{
    runtime::{
        in_use::{Pending, Uses},
        Enqueue,
    },
    Element, Error, Result, Runtime,
};

/// A cudarc allocation of the program's own (a [`CudaSlice`]), registered with NVSHMEM
/// (`nvshmemx_buffer_register`) while this handle lives: it can be the local side of a
/// one-sided call, the source of [`Runtime::put`](crate::Runtime::put) and
/// [`Runtime::put_with_signal`](crate::Runtime::put_with_signal) or the destination of
/// [`Runtime::get`](crate::Runtime::get), opposite a symmetric array on another PE. Only the
/// local side: other PEs cannot name it (it has no symmetric address), so it is never the
/// remote side of a call, nor an argument of a collective. Made by [`Runtime::register`].
///
/// It borrows the slice mutably, so that nothing else frees, moves or uses it meanwhile;
/// [`slice`](Registered::slice) and [`view_mut`](Registered::view_mut) reach it, and the
/// handle itself works with cudarc's copies (it is a [`DevicePtr`] and [`DevicePtrMut`]).
/// Puts and gets on it take part in cudarc's tracking of the slice's uses across streams (each
/// waits for the slice's last write, and is recorded as its last read or write).
///
/// **Dropping it unregisters the memory** (`nvshmemx_buffer_unregister`), after waiting for the
/// puts and gets queued on it (on each stream they used, for at most the runtime's timeout):
/// they may still read or write the memory through NVSHMEM, which, on a network transport,
/// reaches it through the registration. So the slice is never unregistered, and never handed
/// back to its owner to be freed, while queued work can still use it. Drop never panics: an
/// error is logged (`tracing`), and if the wait fails or times out the memory stays registered
/// (NVSHMEM releases it when it finalises) rather than be unregistered under queued work; while
/// the thread unwinds from a panic, nothing is waited for and the memory stays registered too.
/// [`Registered::unregister`] does the same and returns the error. A put or get on it cannot be
/// captured into a graph (the graph would outlive the registration): it is refused.
///
/// ```no_run
/// use nvshmem::prelude::*;
/// # let rt = Runtime::init()?; let stream = rt.stream().clone();
/// let mut mine = stream.clone_htod(&[rt.my_pe() as f32; 256])?; // the program's own memory
/// let mut inbox = rt.alloc_zeroed::<f32>(256)?;                  // symmetric
/// let right = (rt.my_pe() + 1) % rt.n_pes();
/// let registered = rt.register(&mut mine)?;
/// rt.put(&registered, &mut inbox, right, &stream)?;
/// rt.quiet(&stream)?;
/// drop(registered); // waits for the GPU, then unregisters; `mine` is the program's again
/// # Ok::<(), nvshmem::Error>(())
/// ```
pub struct Registered<'a, T: Element> {
    rt: Runtime,
    slice: &'a mut CudaSlice<T>,
    /// The slice's address, as registered; 0 once unregistered, and for an empty slice, which
    /// is not registered (NVSHMEM refuses zero bytes, and no put or get of nothing reads it).
    ptr: CUdeviceptr,
    /// The streams puts and gets on it were queued on.
    uses: Uses,
}

impl<T: Element> std::fmt::Debug for Registered<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Registered<{}>[{}] @ {:#x}",
            T::NAME,
            self.slice.len(),
            self.ptr
        )
    }
}

impl Runtime {
    /// Registers `slice`, device memory the program allocated with cudarc on this PE's GPU,
    /// with NVSHMEM: the [`Registered`] handle it returns can be the local side of a put or a
    /// get, and unregisters the memory when dropped. This PE alone: not collective. Waits for
    /// the slice's stream first, so that the allocation and any writes queued on it are done.
    ///
    /// Registering costs a host call into NVSHMEM and, on a network transport, a registration
    /// with the NIC: register a buffer once and use it for many calls. An empty slice is
    /// accepted and nothing is registered.
    ///
    /// Errors: a slice of another CUDA device or context ([`Error::InvalidArgument`]); NVSHMEM
    /// refusing it ([`Error::Nvshmem`]: for example memory it cannot register with the
    /// network transport in use).
    ///
    /// ```no_run
    /// # let rt = nvshmem::Runtime::init()?; let stream = rt.stream().clone();
    /// let mut staging = stream.alloc_zeros::<u32>(1024)?;
    /// let registered = rt.register(&mut staging)?;
    /// assert_eq!(registered.len(), 1024);
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    pub fn register<'a, T: Element>(
        &self,
        slice: &'a mut CudaSlice<T>,
    ) -> Result<Registered<'a, T>> {
        const CALL: &str = "register";
        if slice.context().cu_ctx() != self.context().cu_ctx() {
            return Err(Error::arg(
                CALL,
                "slice",
                format_args!(
                    "belongs to CUDA device {} but this PE's NVSHMEM runs on device {}",
                    slice.ordinal(),
                    self.info().device
                ),
            ));
        }
        let bytes = slice.num_bytes();
        let ptr = if bytes == 0 {
            0
        } else {
            slice.stream().synchronize().map_err(Error::cuda(
                "synchronising the slice's stream before registering it",
            ))?;
            let (ptr, _record) = slice.device_ptr(slice.stream());
            self.bind()?;
            // SAFETY: ptr is this PE's device memory (a cudarc allocation of this runtime's
            // context, checked above, so neither managed nor symmetric), `bytes` long and more
            // than 0; the borrow held by the handle keeps it allocated until the handle
            // unregisters it. The context is current.
            unsafe { self.nv().buffer_register(ptr, bytes) }.map_err(|e| e.in_call(CALL))?;
            ptr
        };
        Ok(Registered {
            rt: self.clone(),
            slice,
            ptr,
            uses: Uses::default(),
        })
    }
}

impl<T: Element> Registered<'_, T> {
    /// Number of elements.
    ///
    /// ```no_run
    /// # let rt = nvshmem::Runtime::init()?; let stream = rt.stream().clone();
    /// let mut buf = stream.alloc_zeros::<f64>(8)?;
    /// assert_eq!(rt.register(&mut buf)?.len(), 8);
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    pub fn len(&self) -> usize {
        self.slice.len()
    }

    /// Whether the slice has no elements (then nothing is registered).
    ///
    /// ```no_run
    /// # let rt = nvshmem::Runtime::init()?; let stream = rt.stream().clone();
    /// let mut none = stream.alloc_zeros::<u8>(0)?;
    /// assert!(rt.register(&mut none)?.is_empty());
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    pub fn is_empty(&self) -> bool {
        self.slice.is_empty()
    }

    /// The runtime it is registered with.
    ///
    /// ```no_run
    /// # let rt = nvshmem::Runtime::init()?; let stream = rt.stream().clone();
    /// let mut buf = stream.alloc_zeros::<u8>(4)?;
    /// assert_eq!(rt.register(&mut buf)?.runtime().my_pe(), rt.my_pe());
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    pub fn runtime(&self) -> &Runtime {
        &self.rt
    }

    /// The registered slice, to read (cudarc copies, kernel arguments).
    ///
    /// ```no_run
    /// # let rt = nvshmem::Runtime::init()?; let stream = rt.stream().clone();
    /// let mut buf = stream.clone_htod(&[3u16; 4])?;
    /// let registered = rt.register(&mut buf)?;
    /// assert_eq!(stream.clone_dtoh(registered.slice())?, [3; 4]);
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    pub fn slice(&self) -> &CudaSlice<T> {
        self.slice
    }

    /// A writable view of the registered slice (cudarc copies into it, kernel arguments).
    /// A view rather than the slice itself: the slice cannot be replaced while registered.
    ///
    /// ```no_run
    /// # let rt = nvshmem::Runtime::init()?; let stream = rt.stream().clone();
    /// let mut buf = stream.alloc_zeros::<i32>(4)?;
    /// let mut registered = rt.register(&mut buf)?;
    /// stream.memcpy_htod(&[1, 2, 3, 4], &mut registered.view_mut())?;
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    pub fn view_mut(&mut self) -> CudaViewMut<'_, T> {
        self.slice.as_view_mut()
    }

    /// Unregisters the memory now, as dropping the handle does, and returns what failed: the
    /// wait for the GPU (then the memory stays registered until NVSHMEM finalises) or NVSHMEM's
    /// unregistration.
    ///
    /// ```no_run
    /// # let rt = nvshmem::Runtime::init()?; let stream = rt.stream().clone();
    /// let mut buf = stream.alloc_zeros::<f32>(64)?;
    /// let registered = rt.register(&mut buf)?;
    /// registered.unregister()?;
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    pub fn unregister(mut self) -> Result<()> {
        self.release()
    }

    /// Waits for the GPU, then unregisters; at most once (`ptr` is 0 afterwards).
    fn release(&mut self) -> Result<()> {
        let ptr = std::mem::take(&mut self.ptr);
        if ptr == 0 {
            return Ok(());
        }
        self.rt.bind()?;
        // The puts and gets queued on the memory must be done before NVSHMEM forgets it.
        let mut pending = Pending::after(self.uses.take());
        let start = std::time::Instant::now();
        while !pending.done() {
            self.rt.check_health()?;
            if let Some(limit) = self.rt.timeout().filter(|t| start.elapsed() >= *t) {
                return Err(Error::WaitTimedOut {
                    call: "unregister",
                    waiting_for: "the puts and gets queued on the registered memory (it stays \
                                  registered)"
                        .into(),
                    after: limit,
                });
            }
            std::thread::sleep(std::time::Duration::from_micros(100));
        }
        // SAFETY: ptr was registered by `Runtime::register` and is unregistered once (taken
        // above); the puts and gets queued on it are done, and no more can be queued on it
        // through this handle; the context is current.
        unsafe { self.rt.nv().buffer_unregister(ptr) }.map_err(|e| e.in_call("unregister"))
    }
}

impl<T: Element> Drop for Registered<'_, T> {
    fn drop(&mut self) {
        // While unwinding, or once a peer failed, a wait for the GPU could hang on work that
        // waits for the failed peer: the memory stays registered instead (see the type's docs).
        if self.ptr == 0 || std::thread::panicking() || self.rt.health().failed() {
            return;
        }
        if let Err(e) = self.release() {
            tracing::warn!(%e, "unregistering memory from NVSHMEM");
        }
    }
}

impl<T: Element> DeviceSlice<T> for Registered<'_, T> {
    fn len(&self) -> usize {
        self.slice.len()
    }
    fn stream(&self) -> &std::sync::Arc<CudaStream> {
        self.slice.stream()
    }
}

impl<T: Element> DevicePtr<T> for Registered<'_, T> {
    fn device_ptr<'s>(&'s self, stream: &'s CudaStream) -> (CUdeviceptr, SyncOnDrop<'s>) {
        self.slice.device_ptr(stream)
    }
}

impl<T: Element> DevicePtrMut<T> for Registered<'_, T> {
    fn device_ptr_mut<'s>(&'s mut self, stream: &'s CudaStream) -> (CUdeviceptr, SyncOnDrop<'s>) {
        self.slice.device_ptr_mut(stream)
    }
}

pub(crate) mod sealed {
    use crate::{runtime::Enqueue, Result};

    /// Sealing [`LocalBuffer`](super::LocalBuffer), and what a put or get notes of its local
    /// side: its use on the stream.
    pub trait Sealed<T> {
        /// Notes the call's use of the memory.
        fn note(&self, q: &Enqueue<'_>) -> Result<()>;
    }
}

/// Memory that can be the local side of a one-sided call: the source of a put, which this PE
/// reads, or (as [`LocalBufferMut`]) the destination of a get. Symmetric memory (a
/// [`SymArray`](crate::SymArray) or a view of one) and [`Registered`] memory are; the remote
/// side of a call is always symmetric ([`SymBuffer`]).
///
/// Sealed: NVSHMEM reaches only memory of its heap or registered with it, so a plain cudarc
/// allocation must be registered first:
///
/// ```compile_fail
/// # let rt = nvshmem::Runtime::init()?; let stream = rt.stream().clone();
/// let plain = stream.alloc_zeros::<f32>(16).unwrap(); // not registered
/// let mut dst = rt.alloc_zeroed::<f32>(16)?;
/// rt.put(&plain, &mut dst, 0, &stream)?;
/// # Ok::<(), nvshmem::Error>(())
/// ```
pub trait LocalBuffer<T: Element>: sealed::Sealed<T> {
    /// Number of elements.
    ///
    /// ```no_run
    /// # let rt = nvshmem::Runtime::init()?; let stream = rt.stream().clone();
    /// use nvshmem::LocalBuffer;
    /// let a = rt.alloc_zeroed::<u32>(10)?;
    /// assert_eq!(a.local_len(), 10);
    /// let mut b = stream.alloc_zeros::<u32>(3)?;
    /// assert_eq!(rt.register(&mut b)?.local_len(), 3);
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    fn local_len(&self) -> usize;
    /// The runtime whose NVSHMEM can reach the memory.
    ///
    /// ```no_run
    /// # let rt = nvshmem::Runtime::init()?;
    /// use nvshmem::LocalBuffer;
    /// let a = rt.alloc_zeroed::<u32>(1)?;
    /// assert_eq!(a.local_runtime().my_pe(), rt.my_pe());
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    fn local_runtime(&self) -> &Runtime;
    /// The device address of the first element on this PE, for reading on `stream`, with
    /// cudarc's record of the use (nothing for symmetric memory), to drop once the read is
    /// queued: the same contract as cudarc's [`DevicePtr::device_ptr`].
    ///
    /// ```no_run
    /// # let rt = nvshmem::Runtime::init()?; let stream = rt.stream().clone();
    /// use nvshmem::{LocalBuffer, SymBuffer};
    /// let a = rt.alloc_zeroed::<u32>(4)?;
    /// let (ptr, _record) = a.local_ptr(&stream);
    /// assert_eq!(ptr, a.sym_ptr());
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    fn local_ptr<'s>(&'s self, stream: &'s CudaStream) -> (CUdeviceptr, SyncOnDrop<'s>);
}

/// Memory that can be the local destination of a get: writable symmetric memory (a
/// [`SymArray`](crate::SymArray) or a [`SymViewMut`](crate::SymViewMut)) or [`Registered`]
/// memory.
///
/// ```no_run
/// # let rt = nvshmem::Runtime::init()?; let stream = rt.stream().clone();
/// use nvshmem::{Element, LocalBufferMut, Runtime, SymBuffer};
/// // Fetches PE `pe`'s `src` into `dst`: symmetric or registered memory alike.
/// fn fetch<T: Element>(
///     rt: &Runtime, src: &impl SymBuffer<T>, dst: &mut impl LocalBufferMut<T>, pe: usize,
/// ) -> nvshmem::Result<()> {
///     rt.get(src, dst, pe, rt.stream())
/// }
/// let src = rt.alloc_from(&[1.0f32; 4])?;
/// let mut sym = rt.alloc_zeroed::<f32>(4)?;
/// fetch(&rt, &src, &mut sym, 0)?;
/// let mut own = stream.alloc_zeros::<f32>(4)?;
/// fetch(&rt, &src, &mut rt.register(&mut own)?, 0)?;
/// # Ok::<(), nvshmem::Error>(())
/// ```
pub trait LocalBufferMut<T: Element>: LocalBuffer<T> {
    /// The device address of the first element on this PE, for writing on `stream`, with
    /// cudarc's record of the use, to drop once the write is queued: the contract of cudarc's
    /// [`DevicePtrMut::device_ptr_mut`].
    ///
    /// ```no_run
    /// # let rt = nvshmem::Runtime::init()?; let stream = rt.stream().clone();
    /// use nvshmem::LocalBufferMut;
    /// let mut a = rt.alloc_zeroed::<u32>(4)?;
    /// let (ptr, _record) = a.local_ptr_mut(&stream);
    /// assert_ne!(ptr, 0);
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    fn local_ptr_mut<'s>(&'s mut self, stream: &'s CudaStream) -> (CUdeviceptr, SyncOnDrop<'s>);
}

impl<T: Element, B: SymBuffer<T>> sealed::Sealed<T> for B {
    fn note(&self, q: &Enqueue<'_>) -> Result<()> {
        q.uses(self.alloc())
    }
}

// Symmetric memory is ordered by streams alone (see `SymArray`): no cudarc record to keep.
impl<T: Element, B: SymBuffer<T>> LocalBuffer<T> for B {
    fn local_len(&self) -> usize {
        self.sym_len()
    }
    fn local_runtime(&self) -> &Runtime {
        self.sym_runtime()
    }
    fn local_ptr<'s>(&'s self, _stream: &'s CudaStream) -> (CUdeviceptr, SyncOnDrop<'s>) {
        (self.sym_ptr(), SyncOnDrop::Sync(None))
    }
}

impl<T: Element, B: SymBufferMut<T>> LocalBufferMut<T> for B {
    fn local_ptr_mut<'s>(&'s mut self, _stream: &'s CudaStream) -> (CUdeviceptr, SyncOnDrop<'s>) {
        (self.sym_ptr(), SyncOnDrop::Sync(None))
    }
}

impl<T: Element> sealed::Sealed<T> for Registered<'_, T> {
    fn note(&self, q: &Enqueue<'_>) -> Result<()> {
        if q.capturing() {
            return Err(Error::Unsupported {
                call: "put or get",
                what: "registered memory in a CUDA graph (the graph could run after the memory is \
                       unregistered)"
                    .into(),
            });
        }
        self.uses.add(q.stream);
        Ok(())
    }
}

impl<T: Element> LocalBuffer<T> for Registered<'_, T> {
    fn local_len(&self) -> usize {
        self.slice.len()
    }
    fn local_runtime(&self) -> &Runtime {
        &self.rt
    }
    fn local_ptr<'s>(&'s self, stream: &'s CudaStream) -> (CUdeviceptr, SyncOnDrop<'s>) {
        self.slice.device_ptr(stream)
    }
}

impl<T: Element> LocalBufferMut<T> for Registered<'_, T> {
    fn local_ptr_mut<'s>(&'s mut self, stream: &'s CudaStream) -> (CUdeviceptr, SyncOnDrop<'s>) {
        self.slice.device_ptr_mut(stream)
    }
}
