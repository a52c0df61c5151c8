//! [`SymArray`], typed arrays every PE allocates alike, and views of them.
use std::{ops::RangeBounds, sync::Arc};

use cudarc::driver::{
    sys::CUdeviceptr, CudaStream, DevicePtr, DevicePtrMut, DeviceSlice, LaunchArgs, PushKernelArg,
    SyncOnDrop,
};

use super::{Alloc, Block};
use crate::{error::check_len, Element, Error, Result, Runtime};

/// A typed array in the symmetric heap, present at the same address offset on every PE.
///
/// Made by [`Runtime::alloc_zeroed`], [`Runtime::alloc_from`] or [`Runtime::alloc_uninit`];
/// retired on drop and freed, once every PE has dropped it and the work queued on it is done,
/// at a later allocation (see [`crate::memory`]). It holds the runtime alive.
///
/// It works with cudarc: pass `&array` (or a [`SymView`]) to cudarc's copy functions, which
/// record their use of it (so it is not freed under them), or to a kernel launch with
/// `launch_builder(..).arg(&array)`; such a launch is `unsafe`, and part of what it promises is
/// that the array outlives the kernel: call [`SymArray::track_use`] after it (or keep the array
/// until the stream is synchronised). Symmetric memory is ordered by streams, as NVSHMEM orders
/// it: order work on different streams with events yourself.
///
/// ```no_run
/// # let rt = nvshmem::Runtime::init()?;
/// let mut a = rt.alloc_from(&[1.0f32, 2.0, 3.0])?;
/// a.copy_from_host(&[4.0, 5.0, 6.0])?;
/// assert_eq!(a.to_vec()?, vec![4.0, 5.0, 6.0]);
/// assert_eq!(a.num_bytes(), 12);
/// # Ok::<(), nvshmem::Error>(())
/// ```
pub struct SymArray<T: Element> {
    /// The allocation, shared with whatever must keep it alive (a graph that captured work on
    /// it); an empty array has one of address 0, which owns no memory. Dropped before `rt`, so
    /// that it retires into a live runtime.
    alloc: Arc<Alloc>,
    rt: Runtime,
    /// Device address of element 0; 0 for an empty array.
    ptr: CUdeviceptr,
    len: usize,
    /// The shape given by [`SymArray::with_shape`]; `None`: 1-D of `len`. Boxed so an
    /// unshaped array carries one null word, and shaped calls compare slices, never allocate.
    shape: Option<Box<[usize]>>,
    _t: std::marker::PhantomData<T>,
}

// A SymArray owns device memory, reached only through the runtime's context.
impl<T: Element> std::fmt::Debug for SymArray<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SymArray<{}>[{}] @ {:#x}", T::NAME, self.len, self.ptr)?;
        match &self.shape {
            Some(shape) => write!(f, " shape {shape:?}"),
            None => Ok(()),
        }
    }
}

impl Runtime {
    /// Allocates `len` zeroed elements on every PE (collective).
    ///
    /// ```no_run
    /// # let rt = nvshmem::Runtime::init()?;
    /// let a = rt.alloc_zeroed::<f32>(1024)?;
    /// assert_eq!(a.len(), 1024);
    /// assert!(a.to_vec()?.iter().all(|&x| x == 0.0));
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    pub fn alloc_zeroed<T: Element>(&self, len: usize) -> Result<SymArray<T>> {
        self.allocate(len, true)
    }

    /// Allocates a copy of `data` on every PE (collective; each PE may pass different data
    /// of the same length).
    ///
    /// ```no_run
    /// # let rt = nvshmem::Runtime::init()?;
    /// let a = rt.alloc_from(&[rt.my_pe() as i32; 8])?;
    /// assert_eq!(a.to_vec()?, vec![rt.my_pe() as i32; 8]);
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    pub fn alloc_from<T: Element>(&self, data: &[T]) -> Result<SymArray<T>> {
        let mut a = self.allocate(data.len(), false)?;
        a.copy_from_host(data)?;
        Ok(a)
    }

    /// Allocates `len` elements without initialising them (collective).
    ///
    /// # Safety
    /// The contents are whatever the heap held before: write every element before reading one.
    ///
    /// ```no_run
    /// # let rt = nvshmem::Runtime::init()?;
    /// // SAFETY: every element is written before any is read.
    /// let mut a = unsafe { rt.alloc_uninit::<u32>(4)? };
    /// a.copy_from_host(&[1, 2, 3, 4])?;
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    pub unsafe fn alloc_uninit<T: Element>(&self, len: usize) -> Result<SymArray<T>> {
        self.allocate(len, false)
    }

    fn allocate<T: Element>(&self, len: usize, zeroed: bool) -> Result<SymArray<T>> {
        let bytes = alloc_bytes(len, std::mem::size_of::<T>(), T::NAME)?;
        // An empty array owns no memory, and making one is not collective.
        let alloc = if len == 0 {
            Alloc::new(self.downgrade(), Block::default(), u64::MAX)
        } else {
            self.heap().alloc(self, "alloc", bytes, zeroed)?
        };
        Ok(SymArray {
            ptr: alloc.block.ptr,
            alloc,
            rt: self.clone(),
            len,
            shape: None,
            _t: std::marker::PhantomData,
        })
    }
}

impl<T: Element> SymArray<T> {
    /// Number of elements.
    ///
    /// ```no_run
    /// # let rt = nvshmem::Runtime::init()?;
    /// assert_eq!(rt.alloc_zeroed::<u16>(5)?.len(), 5);
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the array has no elements.
    ///
    /// ```no_run
    /// # let rt = nvshmem::Runtime::init()?;
    /// assert!(rt.alloc_zeroed::<u8>(0)?.is_empty());
    /// assert!(!rt.alloc_zeroed::<u8>(1)?.is_empty());
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Size in bytes.
    ///
    /// ```no_run
    /// # let rt = nvshmem::Runtime::init()?;
    /// assert_eq!(rt.alloc_zeroed::<half::bf16>(10)?.num_bytes(), 20);
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    pub fn num_bytes(&self) -> usize {
        self.len * std::mem::size_of::<T>()
    }

    /// The runtime this array belongs to.
    ///
    /// ```no_run
    /// # let rt = nvshmem::Runtime::init()?;
    /// let a = rt.alloc_zeroed::<f32>(4)?;
    /// assert_eq!(a.runtime().my_pe(), rt.my_pe());
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    pub fn runtime(&self) -> &Runtime {
        &self.rt
    }

    /// Notes that work queued on `stream` uses this array, so that its memory is freed only
    /// once that work is done (and, if `stream` is being captured through
    /// [`Runtime::capture`], that the graph keeps the array alive). This crate's own calls do
    /// it; call it after launching a kernel of your own that takes the array, or a view of
    /// it, as an argument.
    ///
    /// ```no_run
    /// # let rt = nvshmem::Runtime::init()?;
    /// let stream = rt.stream().clone();
    /// let a = rt.alloc_zeroed::<f32>(1024)?;
    /// // ... an unsafe launch of a kernel of yours with `&a` on `stream` ...
    /// a.track_use(&stream)?;
    /// drop(a); // freed only once that kernel has finished, on every PE
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    pub fn track_use(&self, stream: &Arc<CudaStream>) -> Result<()> {
        self.runtime()
            .enqueue("track_use", stream)?
            .uses(&self.alloc)
    }

    /// This array with a shape: `shape` (row-major, leading dimension first) has at least
    /// one dimension and exactly `len()` elements (so a zero dimension fits only an empty
    /// array). The memory is untouched: the shape is this handle's metadata, which the
    /// collectives check as TensorRT's DistCollective does (the module docs of
    /// [`crate::collective`], "Shapes"). Give every PE the same shape, as the same length.
    ///
    /// A wrong shape is [`Error::InvalidArgument`] naming the shape and the lengths, and the
    /// array is dropped (freed once every PE has dropped it: a shape refused on some PEs only
    /// leaves the heaps in step). Where a shape may be wrong, use [`SymArray::reshape`], which
    /// keeps the array.
    ///
    /// ```no_run
    /// # let rt = nvshmem::Runtime::init()?;
    /// let a = rt.alloc_zeroed::<f32>(12)?.with_shape(&[4, 3])?;
    /// assert_eq!(a.shape(), &[4, 3]);
    /// let e = rt.alloc_zeroed::<f32>(12)?.with_shape(&[5, 3]).unwrap_err();
    /// assert_eq!(e.to_string(), "with_shape: invalid shape: [5, 3] has 15 elements but the array has 12");
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    pub fn with_shape(mut self, shape: &[usize]) -> Result<Self> {
        self.set_shape("with_shape", shape)?;
        Ok(self)
    }

    /// Gives this array the shape `shape`, under the rules of [`SymArray::with_shape`]; on
    /// error the array keeps the shape it had.
    ///
    /// ```no_run
    /// # let rt = nvshmem::Runtime::init()?;
    /// let mut a = rt.alloc_zeroed::<u8>(24)?;
    /// a.reshape(&[2, 3, 4])?;
    /// assert_eq!(a.shape(), &[2, 3, 4]);
    /// assert!(a.reshape(&[0, 24]).is_err());
    /// assert_eq!(a.shape(), &[2, 3, 4]);
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    pub fn reshape(&mut self, shape: &[usize]) -> Result<()> {
        self.set_shape("reshape", shape)
    }

    /// Removes the shape: the array is again a plain run of `len()` elements, whose
    /// collectives check element counts only.
    ///
    /// ```no_run
    /// # let rt = nvshmem::Runtime::init()?; use nvshmem::SymBuffer;
    /// let mut a = rt.alloc_zeroed::<i32>(6)?.with_shape(&[2, 3])?;
    /// a.clear_shape();
    /// assert_eq!(a.shape(), &[6]);
    /// assert_eq!(a.sym_shape(), None);
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    pub fn clear_shape(&mut self) {
        self.shape = None;
    }

    /// The shape: the one given by [`SymArray::with_shape`] or [`SymArray::reshape`], else
    /// `[len()]`. ([`SymBuffer::sym_shape`] tells the two apart.)
    ///
    /// ```no_run
    /// # let rt = nvshmem::Runtime::init()?;
    /// let a = rt.alloc_zeroed::<f64>(8)?;
    /// assert_eq!(a.shape(), &[8]);
    /// assert_eq!(a.with_shape(&[2, 4])?.shape(), &[2, 4]);
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    pub fn shape(&self) -> &[usize] {
        self.shape
            .as_deref()
            .unwrap_or(std::slice::from_ref(&self.len))
    }

    fn set_shape(&mut self, call: &'static str, shape: &[usize]) -> Result<()> {
        check_shape(call, shape, self.len)?;
        self.shape = Some(shape.into());
        Ok(())
    }

    /// The device address of element 0 on this PE (0 for an empty array).
    ///
    /// ```no_run
    /// # let rt = nvshmem::Runtime::init()?;
    /// let a = rt.alloc_zeroed::<f32>(4)?;
    /// assert_ne!(a.device_ptr_raw(), 0);
    /// assert_eq!(rt.alloc_zeroed::<f32>(0)?.device_ptr_raw(), 0);
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    pub fn device_ptr_raw(&self) -> CUdeviceptr {
        self.ptr
    }

    /// A read-only view of `range`, keeping its symmetric address. A view is 1-D: it
    /// carries no shape, even of a shaped array (a range need not be whole rows).
    ///
    /// ```no_run
    /// # let rt = nvshmem::Runtime::init()?;
    /// use nvshmem::SymBuffer;
    /// let a = rt.alloc_zeroed::<f32>(8)?;
    /// let tail = a.view(6..)?;
    /// assert_eq!(tail.sym_len(), 2);
    /// assert_eq!(tail.sym_ptr(), a.device_ptr_raw() + 6 * 4);
    /// assert!(a.view(4..9).is_err());
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    pub fn view(&self, range: impl RangeBounds<usize>) -> Result<SymView<'_, T>> {
        let (offset, len) = self.checked_range(range)?;
        Ok(SymView {
            array: self,
            ptr: self.elem_ptr(offset),
            len,
        })
    }

    /// A writable view of `range`, keeping its symmetric address; 1-D, as [`SymArray::view`].
    ///
    /// ```no_run
    /// # let rt = nvshmem::Runtime::init()?;
    /// # let stream = rt.stream().clone(); let src = rt.alloc_from(&[1.0f32; 4])?;
    /// let mut dst = rt.alloc_zeroed::<f32>(8)?;
    /// // Fetch PE 0's four values into the second half of `dst`.
    /// rt.get(&src, &mut dst.view_mut(4..)?, 0, &stream)?;
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    pub fn view_mut(&mut self, range: impl RangeBounds<usize>) -> Result<SymViewMut<'_, T>> {
        let (offset, len) = self.checked_range(range)?;
        let ptr = self.elem_ptr(offset);
        Ok(SymViewMut {
            array: self,
            ptr,
            len,
        })
    }

    /// Copies `src` (exactly `len()` elements) into this PE's array and waits for the copy.
    ///
    /// ```no_run
    /// # let rt = nvshmem::Runtime::init()?;
    /// let mut a = rt.alloc_zeroed::<i64>(3)?;
    /// a.copy_from_host(&[1, 2, 3])?;
    /// assert!(a.copy_from_host(&[1, 2]).is_err()); // wrong length
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    pub fn copy_from_host(&mut self, src: &[T]) -> Result<()> {
        let stream = self.runtime().stream().clone();
        self.copy_from_host_on(src, &stream)?;
        stream.synchronize().map_err(Error::cuda("copy_from_host"))
    }

    /// Copies this PE's array into `dst` (exactly `len()` elements) and waits for the copy.
    /// When a wait queued before it ended without its condition (a signal never sent, a peer
    /// that never arrived: the runtime has failed), `dst` is not to be trusted, and the copy
    /// returns that failure ([`Error::SignalWaitFailed`], [`Error::CollectiveFailed`], ...).
    ///
    /// ```no_run
    /// # let rt = nvshmem::Runtime::init()?;
    /// let a = rt.alloc_from(&[7u8, 8, 9])?;
    /// let mut host = [0u8; 3];
    /// a.copy_to_host(&mut host)?;
    /// assert_eq!(host, [7, 8, 9]);
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    pub fn copy_to_host(&self, dst: &mut [T]) -> Result<()> {
        let stream = self.runtime().stream().clone();
        self.copy_to_host_on(dst, &stream)?;
        stream.synchronize().map_err(Error::cuda("copy_to_host"))?;
        // A wait before the copy on the stream that ended without its condition (a signal
        // never sent, a peer that never arrived) left `dst` undefined: its error, now.
        self.runtime().health().check_now()
    }

    /// This PE's array as a `Vec`.
    ///
    /// ```no_run
    /// # let rt = nvshmem::Runtime::init()?;
    /// assert_eq!(rt.alloc_from(&[1.5f64, 2.5])?.to_vec()?, vec![1.5, 2.5]);
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    pub fn to_vec(&self) -> Result<Vec<T>> {
        let mut v = vec![T::default(); self.len];
        self.copy_to_host(&mut v)?;
        Ok(v)
    }

    /// Queues a copy of `src` into this PE's array on `stream`; `src` may be reused as soon as
    /// this returns. Pageable memory (a `Vec`, an array on the stack) is staged by CUDA before
    /// the call returns, so the copy stays asynchronous; page-locked memory (registered with
    /// CUDA, or cudarc's pinned buffers seen as slices) would be read later by the copy engine,
    /// so for it this waits for the stream before returning. Refused while `stream` is being
    /// captured (a graph would read the host memory at every launch).
    ///
    /// ```no_run
    /// # let rt = nvshmem::Runtime::init()?;
    /// let stream = rt.context().new_stream().unwrap();
    /// let mut a = rt.alloc_zeroed::<f32>(2)?;
    /// a.copy_from_host_on(&[1.0, 2.0], &stream)?;
    /// stream.synchronize().unwrap();
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    pub fn copy_from_host_on(&mut self, src: &[T], stream: &Arc<CudaStream>) -> Result<()> {
        const CALL: &str = "copy_from_host";
        check_len(CALL, "src", src.len(), self.len, "the array's length")?;
        self.host_copy_use(CALL, stream)?;
        self.runtime()
            .copy_in(CALL, self.ptr, bytemuck::cast_slice(src), stream)
    }

    /// Copies this PE's array into `dst` on `stream`, in stream order. CUDA finishes a copy
    /// into pageable memory before the call returns; one into page-locked memory is waited for
    /// here too, so `dst` holds the data when this returns either way. Refused while `stream`
    /// is being captured (a graph would write the host memory at every launch).
    ///
    /// ```no_run
    /// # let rt = nvshmem::Runtime::init()?;
    /// let stream = rt.stream().clone();
    /// let a = rt.alloc_from(&[3u32, 4])?;
    /// let mut host = vec![0u32; 2];
    /// a.copy_to_host_on(&mut host, &stream)?;
    /// stream.synchronize().unwrap();
    /// assert_eq!(host, [3, 4]);
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    pub fn copy_to_host_on(&self, dst: &mut [T], stream: &Arc<CudaStream>) -> Result<()> {
        const CALL: &str = "copy_to_host";
        check_len(CALL, "dst", dst.len(), self.len, "the array's length")?;
        self.host_copy_use(CALL, stream)?;
        self.runtime()
            .copy_out(CALL, bytemuck::cast_slice_mut(dst), self.ptr, stream)
    }

    /// Notes a host copy's use of the array on `stream`, refusing a capture.
    fn host_copy_use(&self, call: &'static str, stream: &Arc<CudaStream>) -> Result<()> {
        let q = self.runtime().enqueue(call, stream)?;
        if q.capturing() {
            return Err(Error::Unsupported {
                call,
                what:
                    "a copy between host memory and a symmetric array in a CUDA graph (the graph \
                       would touch the host memory at every launch)"
                        .into(),
            });
        }
        q.uses(&self.alloc)
    }

    /// The address of this array on PE `pe`, when this PE can load and store it directly
    /// (same node, peer access); `None` when it can only be reached through NVSHMEM calls.
    ///
    /// ```no_run
    /// # let rt = nvshmem::Runtime::init()?;
    /// let a = rt.alloc_zeroed::<f32>(16)?;
    /// assert_eq!(a.peer_ptr(rt.my_pe())?, Some(a.device_ptr_raw()));
    /// let next = (rt.my_pe() + 1) % rt.n_pes();
    /// if let Some(p) = a.peer_ptr(next)? { println!("PE {next}'s copy is at {p:#x}"); }
    /// assert!(a.peer_ptr(rt.n_pes()).is_err());
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    pub fn peer_ptr(&self, pe: usize) -> Result<Option<CUdeviceptr>> {
        let rt = self.runtime();
        crate::error::check_pe("peer_ptr", "pe", pe, rt.n_pes(), "the job")?;
        if self.len == 0 {
            return Ok(None);
        }
        // SAFETY: ptr is a live symmetric address of this runtime's heap, pe a valid PE.
        Ok(unsafe { rt.nv().ptr(self.ptr, pe) })
    }

    fn elem_ptr(&self, offset: usize) -> CUdeviceptr {
        self.ptr + (offset * std::mem::size_of::<T>()) as CUdeviceptr
    }

    fn checked_range(&self, range: impl RangeBounds<usize>) -> Result<(usize, usize)> {
        checked_range(&range, self.len)
    }
}

/// The bytes of `len` elements of `elem` bytes (type `name`), or an error if they overflow.
pub(super) fn alloc_bytes(len: usize, elem: usize, name: &str) -> Result<usize> {
    len.checked_mul(elem).ok_or_else(|| {
        Error::arg(
            "alloc",
            "len",
            format!("{len} elements of {name} overflow the address space"),
        )
    })
}

/// `range` of an array of `len` elements as (offset, length), if it lies inside. Bounds are
/// counted in `u128`, so that `..=usize::MAX` means one element more than any `len`, not
/// (saturated) all of an array of `usize::MAX`.
pub(super) fn checked_range(range: &impl RangeBounds<usize>, len: usize) -> Result<(usize, usize)> {
    use std::ops::Bound::*;
    let start = match range.start_bound() {
        Included(&s) => s as u128,
        Excluded(&s) => s as u128 + 1,
        Unbounded => 0,
    };
    let end = match range.end_bound() {
        Included(&e) => e as u128 + 1,
        Excluded(&e) => e as u128,
        Unbounded => len as u128,
    };
    if start > end || end > len as u128 {
        return Err(Error::arg(
            "view",
            "range",
            format!("{start}..{end} is outside 0..{len}"),
        ));
    }
    // Both at most `len`: they fit.
    Ok((start as usize, (end - start) as usize))
}

/// A shape for `len` elements: at least one dimension, product (overflow-checked) `len`.
pub(super) fn check_shape(call: &'static str, shape: &[usize], len: usize) -> Result<()> {
    if shape.is_empty() {
        return Err(Error::arg(
            call,
            "shape",
            format_args!(
                "[] has no dimensions; a shape needs at least one (the array has {len} elements)"
            ),
        ));
    }
    // A zero dimension makes the product 0 whatever the others, even ones that overflow.
    let product = if shape.contains(&0) {
        Some(0)
    } else {
        shape.iter().try_fold(1usize, |acc, &d| acc.checked_mul(d))
    };
    match product {
        Some(n) if n == len => Ok(()),
        Some(n) => Err(Error::arg(
            call,
            "shape",
            format_args!("{shape:?} has {n} elements but the array has {len}"),
        )),
        None => Err(Error::arg(
            call,
            "shape",
            format_args!("{shape:?} has more elements than a usize counts (the array has {len})"),
        )),
    }
}

/// A read-only view of part of a [`SymArray`]; symmetric like the array.
///
/// ```no_run
/// # let rt = nvshmem::Runtime::init()?; let stream = rt.stream().clone();
/// let src = rt.alloc_from(&[1.0f32, 2.0, 3.0, 4.0])?;
/// let mut dst = rt.alloc_zeroed::<f32>(2)?;
/// // Send the last two values to PE 0.
/// rt.put(&src.view(2..)?, &mut dst, 0, &stream)?;
/// # Ok::<(), nvshmem::Error>(())
/// ```
#[derive(Debug, Clone, Copy)]
pub struct SymView<'a, T: Element> {
    array: &'a SymArray<T>,
    ptr: CUdeviceptr,
    len: usize,
}

/// A writable view of part of a [`SymArray`]; symmetric like the array.
///
/// ```no_run
/// # let rt = nvshmem::Runtime::init()?; let stream = rt.stream().clone();
/// let src = rt.alloc_from(&[rt.my_pe() as u32; 2])?;
/// let mut dst = rt.alloc_zeroed::<u32>(2 * rt.n_pes())?;
/// // Each PE writes its two values into its own slot of PE 0's `dst`.
/// let me = rt.my_pe();
/// rt.put(&src, &mut dst.view_mut(2 * me..2 * me + 2)?, 0, &stream)?;
/// # Ok::<(), nvshmem::Error>(())
/// ```
#[derive(Debug)]
pub struct SymViewMut<'a, T: Element> {
    array: &'a mut SymArray<T>,
    ptr: CUdeviceptr,
    len: usize,
}

pub(crate) mod sealed {
    use super::Alloc;
    use std::sync::Arc;

    /// Sealing [`SymBuffer`](super::SymBuffer) (only this crate's types name symmetric memory),
    /// and what the crate reaches through it: the allocation behind the memory, whose uses a
    /// call notes.
    pub trait Sealed {
        /// The allocation the memory is part of.
        fn alloc(&self) -> &Arc<Alloc>;
    }
}

/// Anything that names symmetric memory: a [`SymArray`] or a view of one. Collectives and
/// RMA take it, so they accept whole arrays and parts alike.
///
/// Sealed: NVSHMEM can reach only memory of its symmetric heap, so nothing else (a plain
/// cudarc allocation, a raw pointer) can be passed where a `SymBuffer` is expected. It is
/// refused when the program is compiled (where only the local side of a put or get is meant,
/// a cudarc allocation can be registered instead: [`Registered`](crate::Registered)):
///
/// ```compile_fail
/// # let rt = nvshmem::Runtime::init()?; let stream = rt.stream().clone();
/// let plain = stream.alloc_zeroed::<f32>(16).unwrap(); // cudarc memory, not symmetric
/// let mut dst = rt.alloc_zeroed::<f32>(16)?;
/// rt.world().all_reduce(&plain, &mut dst, nvshmem::ReduceOp::Sum, &stream)?;
/// # Ok::<(), nvshmem::Error>(())
/// ```
pub trait SymBuffer<T: Element>: sealed::Sealed {
    /// The symmetric address of the first element on this PE.
    ///
    /// ```no_run
    /// # let rt = nvshmem::Runtime::init()?; use nvshmem::SymBuffer;
    /// let a = rt.alloc_zeroed::<u32>(4)?;
    /// assert_eq!(a.view(1..)?.sym_ptr(), a.sym_ptr() + 4);
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    fn sym_ptr(&self) -> CUdeviceptr;
    /// Number of elements.
    ///
    /// ```no_run
    /// # let rt = nvshmem::Runtime::init()?; use nvshmem::SymBuffer;
    /// let a = rt.alloc_zeroed::<u32>(10)?;
    /// assert_eq!(a.sym_len(), 10);
    /// assert_eq!(a.view(2..5)?.sym_len(), 3);
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    fn sym_len(&self) -> usize;
    /// The runtime the memory belongs to.
    ///
    /// ```no_run
    /// # let rt = nvshmem::Runtime::init()?; use nvshmem::SymBuffer;
    /// let a = rt.alloc_zeroed::<u32>(1)?;
    /// assert_eq!(a.sym_runtime().my_pe(), rt.my_pe());
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    fn sym_runtime(&self) -> &Runtime;
    /// The shape, if the memory carries one: a [`SymArray`] given one by
    /// [`SymArray::with_shape`] or [`SymArray::reshape`]. `None` (the default, and always for
    /// views) means a plain run of [`SymBuffer::sym_len`] elements, checked by count only.
    ///
    /// ```no_run
    /// # let rt = nvshmem::Runtime::init()?;
    /// use nvshmem::SymBuffer;
    /// let a = rt.alloc_zeroed::<f32>(6)?;
    /// assert_eq!(a.sym_shape(), None);
    /// let a = a.with_shape(&[3, 2])?;
    /// assert_eq!(a.sym_shape(), Some(&[3, 2][..]));
    /// assert_eq!(a.view(..)?.sym_shape(), None);
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    fn sym_shape(&self) -> Option<&[usize]> {
        None
    }
}

/// Writable symmetric memory: a [`SymArray`] or a [`SymViewMut`]; what collectives and RMA
/// write into.
///
/// ```no_run
/// # let rt = nvshmem::Runtime::init()?;
/// use nvshmem::{Element, Runtime, SymBuffer, SymBufferMut};
/// // Fetches PE `pe`'s `src` into `dst`, which may be a whole array or a writable view.
/// fn fetch<T: Element>(
///     rt: &Runtime, src: &impl SymBuffer<T>, dst: &mut impl SymBufferMut<T>, pe: usize,
/// ) -> nvshmem::Result<()> {
///     rt.get(src, dst, pe, rt.stream())
/// }
/// let src = rt.alloc_from(&[1.0f32; 4])?;
/// let mut dst = rt.alloc_zeroed::<f32>(8)?;
/// fetch(&rt, &src, &mut dst.view_mut(..4)?, 0)?;
/// # Ok::<(), nvshmem::Error>(())
/// ```
pub trait SymBufferMut<T: Element>: SymBuffer<T> {}

macro_rules! sym_buffer {
    ($ty:ty, $alloc:expr $(, $shape:ident)?) => {
        impl<T: Element> sealed::Sealed for $ty {
            fn alloc(&self) -> &Arc<Alloc> {
                let f: fn(&Self) -> &Arc<Alloc> = $alloc;
                f(self)
            }
        }
        impl<T: Element> SymBuffer<T> for $ty {
            fn sym_ptr(&self) -> CUdeviceptr {
                self.ptr
            }
            fn sym_len(&self) -> usize {
                self.len
            }
            fn sym_runtime(&self) -> &Runtime {
                self.runtime()
            }
            $(
                fn sym_shape(&self) -> Option<&[usize]> {
                    self.$shape.as_deref()
                }
            )?
        }
        impl<T: Element> DeviceSlice<T> for $ty {
            fn len(&self) -> usize {
                self.len
            }
            fn stream(&self) -> &Arc<CudaStream> {
                SymBuffer::sym_runtime(self).stream()
            }
        }
        impl<T: Element> DevicePtr<T> for $ty {
            fn device_ptr<'s>(&'s self, stream: &'s CudaStream) -> (CUdeviceptr, SyncOnDrop<'s>) {
                (self.ptr, sealed::Sealed::alloc(self).cudarc_use(stream))
            }
        }
    };
}
sym_buffer!(SymArray<T>, |a| &a.alloc, shape);
sym_buffer!(SymView<'_, T>, |v| &v.array.alloc);
sym_buffer!(SymViewMut<'_, T>, |v| &v.array.alloc);

impl<T: Element> SymView<'_, T> {
    /// The runtime the viewed array belongs to.
    ///
    /// ```no_run
    /// # let rt = nvshmem::Runtime::init()?;
    /// let a = rt.alloc_zeroed::<f32>(4)?;
    /// assert_eq!(a.view(1..)?.runtime().n_pes(), rt.n_pes());
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    pub fn runtime(&self) -> &Runtime {
        self.array.runtime()
    }
}

impl<T: Element> SymViewMut<'_, T> {
    /// The runtime the viewed array belongs to.
    ///
    /// ```no_run
    /// # let rt = nvshmem::Runtime::init()?;
    /// let mut a = rt.alloc_zeroed::<f32>(4)?;
    /// assert_eq!(a.view_mut(..2)?.runtime().my_pe(), rt.my_pe());
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    pub fn runtime(&self) -> &Runtime {
        self.array.runtime()
    }
}

impl<T: Element> SymBufferMut<T> for SymArray<T> {}
impl<T: Element> SymBufferMut<T> for SymViewMut<'_, T> {}

macro_rules! device_ptr_mut {
    ($ty:ty) => {
        impl<T: Element> DevicePtrMut<T> for $ty {
            fn device_ptr_mut<'s>(
                &'s mut self,
                stream: &'s CudaStream,
            ) -> (CUdeviceptr, SyncOnDrop<'s>) {
                let ptr = self.ptr;
                (ptr, sealed::Sealed::alloc(&*self).cudarc_use(stream))
            }
        }
    };
}
device_ptr_mut!(SymArray<T>);
device_ptr_mut!(SymViewMut<'_, T>);

// Kernel arguments: a kernel parameter `T*` receives the device address. `LaunchArgs` keeps a
// pointer to the argument value, so the address pushed is the one stored in the array or view,
// which lives as long as the borrow the launch holds.
macro_rules! kernel_arg {
    ($($ty:ty),*) => {$(
        // SAFETY: the pushed value is a `CUdeviceptr` (u64, DeviceRepr) that outlives `'b`,
        // exactly what a pointer parameter of a CUDA kernel expects.
        unsafe impl<'a, 'b: 'a, 'c, T: Element> PushKernelArg<$ty> for LaunchArgs<'a> {
            #[inline(always)]
            fn arg(&mut self, arg: $ty) -> &mut Self {
                self.arg(&arg.ptr)
            }
        }
    )*};
}
kernel_arg!(
    &'b SymArray<T>,
    &'b mut SymArray<T>,
    &'b SymView<'c, T>,
    &'b mut SymViewMut<'c, T>
);

#[cfg(test)]
mod tests {
    use super::{check_shape, checked_range};
    use std::ops::Bound;

    fn err(shape: &[usize], len: usize) -> String {
        check_shape("reshape", shape, len).unwrap_err().to_string()
    }

    #[test]
    fn shape_must_hold_exactly_len_elements() {
        assert!(check_shape("reshape", &[4, 3], 12).is_ok());
        assert!(check_shape("reshape", &[12], 12).is_ok());
        assert!(check_shape("reshape", &[1, 12, 1], 12).is_ok());
        assert_eq!(
            err(&[5, 3], 12),
            "reshape: invalid shape: [5, 3] has 15 elements but the array has 12"
        );
    }

    #[test]
    fn zero_dimensions_fit_only_empty_arrays() {
        assert!(check_shape("reshape", &[0], 0).is_ok());
        assert!(check_shape("reshape", &[0, 7], 0).is_ok());
        // The zero wins over dimensions whose product would overflow.
        assert!(check_shape("reshape", &[usize::MAX, usize::MAX, 0], 0).is_ok());
        assert_eq!(
            err(&[0, 4], 4),
            "reshape: invalid shape: [0, 4] has 0 elements but the array has 4"
        );
        assert!(check_shape("reshape", &[2, 3], 0).is_err());
    }

    /// `..=usize::MAX` of an array of `usize::MAX` elements asks for one more than it has; the
    /// end was saturated to `usize::MAX` and the range accepted.
    #[test]
    fn ranges_are_counted_without_saturating() {
        assert!(checked_range(&(..=usize::MAX), usize::MAX).is_err());
        assert_eq!(
            checked_range(&(..=usize::MAX - 1), usize::MAX).unwrap(),
            (0, usize::MAX)
        );
        assert_eq!(checked_range(&(2..), 8).unwrap(), (2, 6));
        assert_eq!(checked_range(&(3..=3), 8).unwrap(), (3, 1));
        let excluded = (Bound::Excluded(usize::MAX), Bound::Unbounded);
        assert_eq!(
            checked_range(&excluded, usize::MAX)
                .unwrap_err()
                .to_string(),
            format!(
                "view: invalid range: {}..{} is outside 0..{}",
                1u128 << 64,
                usize::MAX,
                usize::MAX
            )
        );
        assert_eq!(
            checked_range(&(4..9), 8).unwrap_err().to_string(),
            "view: invalid range: 4..9 is outside 0..8"
        );
    }

    #[test]
    fn empty_and_overflowing_shapes_are_refused() {
        assert_eq!(
            err(&[], 1),
            "reshape: invalid shape: [] has no dimensions; a shape needs at least one (the array has 1 elements)"
        );
        assert_eq!(
            err(&[usize::MAX, 2], 8),
            format!(
                "reshape: invalid shape: [{}, 2] has more elements than a usize counts (the array has 8)",
                usize::MAX
            )
        );
    }
}
