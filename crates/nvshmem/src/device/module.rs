//! Loaded device-initiated kernels: the module handle, typed arguments, launches (plain and
//! collective), and the deferred release of modules whose work is still queued.
use std::ffi::{c_void, CString};
use std::marker::PhantomData;
use std::sync::{Arc, Mutex};

use cudarc::driver::sys::{self, CUdevice_attribute};
use cudarc::driver::{CudaContext, CudaStream, DeviceRepr, LaunchConfig};

use super::{DeviceImage, DeviceSource};
use crate::ffi::Nvshmem;
use crate::kernels::compile::arch_of;
use crate::runtime::{
    in_use::{Pending, Resource, Uses},
    Enqueue,
};
use crate::{Element, Error, Result, Runtime, SymBuffer, SymBufferMut};

/// A module of device-initiated kernels loaded on this PE's GPU and registered with NVSHMEM
/// (`nvshmemx_cumodule_init`), so its kernels may call NVSHMEM's device API. Every PE loads the
/// same module (loading is not collective, but its kernels usually are).
///
/// It holds the runtime alive. Dropping it (and every [`DeviceKernel`] taken from it) releases
/// it *after its work*: the module is unregistered and unloaded at once if the GPU has finished
/// every launch made from it, else it waits in a list that later launches, loads and drops
/// check, and is released when its last launch has completed. Nothing in `drop` waits or
/// panics.
///
/// ```no_run
/// use nvshmem::device::{Args, DeviceModule, DeviceSource};
/// use nvshmem::cudarc::driver::LaunchConfig;
/// let rt = nvshmem::Runtime::init()?;
/// let module = DeviceModule::compile(&rt, &DeviceSource::new("ring", r#"
///     #include <nvshmem_rs.cuh>
///     extern "C" __global__ void ring(nvrs_array<int> a, nvrs_signals sig) {
///         int right = (nvshmem_my_pe() + 1) % nvshmem_n_pes();
///         nvshmem_int_p(a.at(0), nvshmem_my_pe(), right);
///         nvshmem_fence();
///         nvrs_signal_add(sig.at(0), 1, right);
///         nvrs_wait_ge(sig.at(0), 1);
///     }
/// "#))?;
/// let ring = module.kernel("ring")?;
/// let (mut a, sig) = (rt.alloc_zeroed::<i32>(1)?, rt.alloc_zeroed::<u64>(1)?);
/// rt.barrier_all(rt.stream())?;
/// let args = Args::new().array_mut(&mut a).array(&sig);
/// // SAFETY: ring(nvrs_array<int>, nvrs_signals) reads and writes element 0 of each.
/// unsafe { ring.launch_collective(LaunchConfig { grid_dim: (1, 1, 1), block_dim: (1, 1, 1), shared_mem_bytes: 0 }, rt.stream(), args)? };
/// assert_eq!(a.to_vec()?, vec![((rt.my_pe() + rt.n_pes() - 1) % rt.n_pes()) as i32]);
/// # Ok::<(), nvshmem::Error>(())
/// ```
#[derive(Clone)]
pub struct DeviceModule {
    inner: Arc<Loaded>,
}

impl std::fmt::Debug for DeviceModule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "DeviceModule({})", self.inner.name)
    }
}

/// A kernel of a [`DeviceModule`]; holds the module loaded.
///
/// ```no_run
/// # let rt = nvshmem::Runtime::init()?;
/// # let module = nvshmem::device::DeviceModule::compile(&rt, &nvshmem::device::DeviceSource::new("m", "#include <nvshmem_rs.cuh>\nextern \"C\" __global__ void k() {}"))?;
/// let k = module.kernel("k")?;
/// assert_eq!(k.name(), "k");
/// assert!(module.kernel("missing").is_err());
/// # Ok::<(), nvshmem::Error>(())
/// ```
#[derive(Clone)]
pub struct DeviceKernel {
    module: Arc<Loaded>,
    func: sys::CUfunction,
    name: String,
}

impl std::fmt::Debug for DeviceKernel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "DeviceKernel({}::{})", self.module.name, self.name)
    }
}

// SAFETY: a CUfunction is a handle the driver lets any thread use; the module it belongs to is
// kept loaded by the Arc.
unsafe impl Send for DeviceKernel {}
// SAFETY: as above; launching takes no lock of this handle's.
unsafe impl Sync for DeviceKernel {}

/// The loaded module, shared by the handle and its kernels.
struct Loaded {
    rt: Runtime,
    name: String,
    module: sys::CUmodule,
    /// Whether NVSHMEM registered it (`nvshmemx_cumodule_init` succeeded): only then is it
    /// unregistered before it is unloaded.
    registered: bool,
    /// The streams the module's kernels were launched on (eagerly, or into a graph that
    /// launches on them): when the module is dropped, an event on each says when its work is
    /// done.
    uses: Uses,
}

impl Resource for Loaded {
    fn uses(&self) -> Option<&Uses> {
        Some(&self.uses)
    }
}

// SAFETY: the CUmodule is a driver handle usable from any thread with the context current
// (every use binds it); the event list sits behind a lock.
unsafe impl Send for Loaded {}
// SAFETY: as above.
unsafe impl Sync for Loaded {}

impl DeviceModule {
    /// Compiles and links `source` for this PE's GPU (or takes it from the cache; see
    /// [`DeviceSource::build`]), then [loads](DeviceModule::load) it.
    ///
    /// ```no_run
    /// use nvshmem::device::{DeviceModule, DeviceSource};
    /// let rt = nvshmem::Runtime::init()?;
    /// let m = DeviceModule::compile(&rt, &DeviceSource::new("empty", "#include <nvshmem_rs.cuh>\nextern \"C\" __global__ void k() {}"))?;
    /// assert_eq!(m.name(), "empty");
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    pub fn compile(rt: &Runtime, source: &DeviceSource) -> Result<DeviceModule> {
        let image = source.build(&arch_of(rt.context())?)?;
        DeviceModule::load(rt, &image)
    }

    /// Loads linked machine code on this PE's GPU, registers it with NVSHMEM
    /// (`nvshmemx_cumodule_init`, which waits for the GPU to be idle) and loads every kernel
    /// now rather than at its first launch (a lazily loaded kernel's first launch can wait for
    /// the GPU to go idle, which never happens while a peer's kernel spins waiting for it).
    /// Refused when the image is for another architecture than the GPU's.
    ///
    /// ```no_run
    /// use nvshmem::device::{DeviceImage, DeviceModule};
    /// let rt = nvshmem::Runtime::init()?;
    /// let image = DeviceImage::from_linked_cubin("reference", "sm_90", std::fs::read("reference.cubin").unwrap());
    /// let m = DeviceModule::load(&rt, &image)?;
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    pub fn load(rt: &Runtime, image: &DeviceImage) -> Result<DeviceModule> {
        const CALL: &str = "DeviceModule::load";
        let arch = arch_of(rt.context())?;
        if image.arch() != arch {
            return Err(Error::arg(
                CALL,
                "image",
                format!(
                    "{} was built for {} but this PE's GPU is {arch}",
                    image.name(),
                    image.arch()
                ),
            ));
        }
        rt.check_health()?;
        rt.bind()?;
        reap(false);
        // The driver reads the image up to its ELF size; a copy with a trailing zero keeps a
        // truncated image from being read past its end.
        let mut bytes = image.cubin().to_vec();
        bytes.push(0);
        let mut module: sys::CUmodule = std::ptr::null_mut();
        // SAFETY: `bytes` is a complete ELF image in memory that outlives the call (the driver
        // copies it); the context is current.
        unsafe { sys::cuModuleLoadData(&mut module, bytes.as_ptr().cast()) }
            .result()
            .map_err(Error::cuda("cuModuleLoadData (device-initiated kernels)"))?;
        let mut loaded = Loaded {
            rt: rt.clone(),
            name: image.name().to_string(),
            module,
            registered: false,
            uses: Uses::default(),
        };
        // SAFETY: `module` was just loaded in the runtime's context (current) and is registered
        // once, here. NVSHMEM looks its device state up in the module by name and refuses a
        // module without it (an image not linked with its device library: the image's bytes
        // are the caller's); then `loaded`'s drop only unloads it.
        unsafe { rt.nv().cumodule_init(module) }?;
        loaded.registered = true;
        preload(module)?;
        Ok(DeviceModule {
            inner: Arc::new(loaded),
        })
    }

    /// The kernel named `name` (an `extern "C"` kernel of the source).
    ///
    /// ```no_run
    /// # let rt = nvshmem::Runtime::init()?;
    /// # let module = nvshmem::device::DeviceModule::compile(&rt, &nvshmem::device::DeviceSource::new("m", "#include <nvshmem_rs.cuh>\nextern \"C\" __global__ void k() {}"))?;
    /// let e = module.kernel("nope").unwrap_err();
    /// assert!(e.to_string().contains("no kernel named nope"));
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    pub fn kernel(&self, name: &str) -> Result<DeviceKernel> {
        const CALL: &str = "DeviceModule::kernel";
        let cname = CString::new(name).map_err(|e| Error::arg(CALL, "name", e))?;
        self.inner.rt.bind()?;
        let mut func: sys::CUfunction = std::ptr::null_mut();
        // SAFETY: the module is loaded (this handle holds it); the context is current.
        let found =
            unsafe { sys::cuModuleGetFunction(&mut func, self.inner.module, cname.as_ptr()) };
        if found != sys::CUresult::CUDA_SUCCESS {
            return Err(Error::arg(
                CALL,
                "name",
                format!(
                    "module {} has no kernel named {name} ({found:?}); declare it extern \"C\"",
                    self.inner.name
                ),
            ));
        }
        Ok(DeviceKernel {
            module: Arc::clone(&self.inner),
            func,
            name: name.to_string(),
        })
    }

    /// The source's name.
    ///
    /// ```no_run
    /// # let rt = nvshmem::Runtime::init()?;
    /// # let module = nvshmem::device::DeviceModule::compile(&rt, &nvshmem::device::DeviceSource::new("m", "#include <nvshmem_rs.cuh>\nextern \"C\" __global__ void k() {}"))?;
    /// assert_eq!(module.name(), "m");
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    pub fn name(&self) -> &str {
        &self.inner.name
    }
}

/// Loads every function of the module now (see [`DeviceModule::load`]).
fn preload(module: sys::CUmodule) -> Result<()> {
    let mut count = 0u32;
    // SAFETY: the module is loaded in the current context; `count` is a valid place.
    unsafe { sys::cuModuleGetFunctionCount(&mut count, module) }
        .result()
        .map_err(Error::cuda("cuModuleGetFunctionCount"))?;
    let mut funcs = vec![std::ptr::null_mut(); count as usize];
    // SAFETY: `funcs` has room for the `count` functions the driver reported.
    unsafe { sys::cuModuleEnumerateFunctions(funcs.as_mut_ptr(), count, module) }
        .result()
        .map_err(Error::cuda("cuModuleEnumerateFunctions"))?;
    for f in funcs {
        // SAFETY: `f` is a function of the module just enumerated, in the current context.
        unsafe { sys::cuFuncLoad(f) }
            .result()
            .map_err(Error::cuda("cuFuncLoad"))?;
    }
    Ok(())
}

/// The device view of a symmetric array, as a kernel receives it from [`Args::array`]:
/// `nvrs_array<T>` of `nvshmem_rs.cuh` (this PE's address of element 0, and the length).
///
/// ```
/// assert_eq!(std::mem::size_of::<nvshmem::device::DeviceArray>(), 16);
/// ```
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeviceArray {
    /// This PE's device address of element 0 (a symmetric address).
    pub ptr: u64,
    /// The number of elements.
    pub len: u64,
}

// SAFETY: two u64s, laid out as `struct nvrs_array<T> { T* ptr; unsigned long long len; }`.
unsafe impl DeviceRepr for DeviceArray {}

/// A launch's arguments, in the order of the kernel's parameters: symmetric arrays as
/// [`DeviceArray`]s (`nvrs_array<T>` in the kernel) or raw pointers, and plain values. It
/// borrows the arrays until the launch, which records their use on its stream.
///
/// ```no_run
/// use nvshmem::device::Args;
/// # let rt = nvshmem::Runtime::init()?;
/// let (src, mut dst) = (rt.alloc_zeroed::<f32>(8)?, rt.alloc_zeroed::<f32>(8)?);
/// let args = Args::new().array(&src).array_mut(&mut dst).value(8u32).value(0.5f64);
/// assert_eq!(args.len(), 4);
/// # Ok::<(), nvshmem::Error>(())
/// ```
#[derive(Default)]
pub struct Args<'a> {
    /// Each parameter's bytes, in 8-byte words (so each is aligned for any argument type).
    slots: Vec<Box<[u64]>>,
    uses: Vec<Box<dyn Use + 'a>>,
}

impl std::fmt::Debug for Args<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Args({} parameters, {} arrays)",
            self.slots.len(),
            self.uses.len()
        )
    }
}

/// An array an [`Args`] passes: its runtime, and how to note its use by a launch.
trait Use {
    fn runtime(&self) -> &Runtime;
    fn record(&self, q: &Enqueue<'_>) -> Result<()>;
}

struct Used<'a, T: Element, B: SymBuffer<T>>(&'a B, PhantomData<T>);

impl<T: Element, B: SymBuffer<T>> Use for Used<'_, T, B> {
    fn runtime(&self) -> &Runtime {
        self.0.sym_runtime()
    }
    fn record(&self, q: &Enqueue<'_>) -> Result<()> {
        // The array's memory is freed only once the launch is done (or, in a capture, once
        // the graph is dropped).
        q.uses(self.0.alloc())
    }
}

impl<'a> Args<'a> {
    /// No arguments yet.
    ///
    /// ```
    /// assert!(nvshmem::device::Args::new().is_empty());
    /// ```
    pub fn new() -> Self {
        Self::default()
    }

    /// The number of parameters so far.
    ///
    /// ```
    /// assert_eq!(nvshmem::device::Args::new().value(1i32).len(), 1);
    /// ```
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    /// Whether there are none.
    ///
    /// ```
    /// assert!(nvshmem::device::Args::new().is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// A plain value (an integer, a float, a `#[repr(C)]` struct the kernel takes by value).
    ///
    /// ```
    /// let a = nvshmem::device::Args::new().value(3u64).value(1.5f32);
    /// assert_eq!(a.len(), 2);
    /// ```
    pub fn value<V: DeviceRepr + Copy>(mut self, v: V) -> Self {
        const {
            assert!(
                std::mem::align_of::<V>() <= 8,
                "kernel arguments align to at most 8 bytes"
            )
        };
        let words = std::mem::size_of::<V>().div_ceil(8).max(1);
        let mut slot = vec![0u64; words].into_boxed_slice();
        // SAFETY: the slot has room for `V` (rounded up to whole words) and is aligned to 8,
        // which is at least `V`'s alignment (checked above); `V` is `Copy`.
        unsafe { std::ptr::write(slot.as_mut_ptr().cast::<V>(), v) };
        self.slots.push(slot);
        self
    }

    /// A symmetric array or view the kernel reads, as `nvrs_array<T>`.
    ///
    /// ```no_run
    /// # let rt = nvshmem::Runtime::init()?;
    /// let a = rt.alloc_zeroed::<u64>(4)?;
    /// let tail = a.view(2..)?;
    /// let args = nvshmem::device::Args::new().array(&a).array(&tail);
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    pub fn array<T: Element>(self, buf: &'a impl SymBuffer<T>) -> Self {
        let view = DeviceArray {
            ptr: buf.sym_ptr(),
            len: buf.sym_len() as u64,
        };
        self.used(buf).value(view)
    }

    /// A symmetric array or view the kernel writes, as `nvrs_array<T>`.
    ///
    /// ```no_run
    /// # let rt = nvshmem::Runtime::init()?;
    /// let mut a = rt.alloc_zeroed::<f32>(4)?;
    /// let args = nvshmem::device::Args::new().array_mut(&mut a);
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    pub fn array_mut<T: Element>(self, buf: &'a mut impl SymBufferMut<T>) -> Self {
        let buf: &'a _ = buf;
        let view = DeviceArray {
            ptr: buf.sym_ptr(),
            len: buf.sym_len() as u64,
        };
        self.used(buf).value(view)
    }

    /// A symmetric array's address alone, as a `T*` parameter (for kernels written against
    /// NVSHMEM alone, such as nvcc-built ones). Its length is not passed: the kernel must
    /// know it.
    ///
    /// ```no_run
    /// # let rt = nvshmem::Runtime::init()?;
    /// let mut a = rt.alloc_zeroed::<f32>(4)?;
    /// let args = nvshmem::device::Args::new().ptr_mut(&mut a).value(4u64);
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    pub fn ptr_mut<T: Element>(self, buf: &'a mut impl SymBufferMut<T>) -> Self {
        let buf: &'a _ = buf;
        let ptr = buf.sym_ptr();
        self.used(buf).value(ptr)
    }

    /// As [`Args::ptr_mut`], for an array the kernel only reads.
    ///
    /// ```no_run
    /// # let rt = nvshmem::Runtime::init()?;
    /// let a = rt.alloc_zeroed::<f32>(4)?;
    /// let args = nvshmem::device::Args::new().ptr(&a);
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    pub fn ptr<T: Element>(self, buf: &'a impl SymBuffer<T>) -> Self {
        let ptr = buf.sym_ptr();
        self.used(buf).value(ptr)
    }

    fn used<T: Element, B: SymBuffer<T>>(mut self, buf: &'a B) -> Self {
        self.uses.push(Box::new(Used::<T, B>(buf, PhantomData)));
        self
    }
}

impl DeviceKernel {
    /// The kernel's name.
    ///
    /// ```no_run
    /// # let rt = nvshmem::Runtime::init()?;
    /// # let module = nvshmem::device::DeviceModule::compile(&rt, &nvshmem::device::DeviceSource::new("m", "#include <nvshmem_rs.cuh>\nextern \"C\" __global__ void k() {}"))?;
    /// assert_eq!(module.kernel("k")?.name(), "k");
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Enqueues the kernel on `stream` with `config`, as `cuLaunchKernel` does. Use it for
    /// kernels whose blocks do not wait for each other or for peers' kernels; those that do
    /// need [`DeviceKernel::launch_collective`].
    ///
    /// # Safety
    /// `args` match the kernel's parameters in number, order and type (`nvrs_array<T>` for
    /// [`Args::array`], `T*` for [`Args::ptr`], the C type of each value); every access the
    /// kernel makes, locally and on peers, stays within the arrays passed (or memory it
    /// otherwise owns); and a kernel that waits for peers (a signal, a barrier) is matched by
    /// their launches, as NVSHMEM's device API requires.
    ///
    /// ```no_run
    /// # use nvshmem::device::Args;
    /// # let rt = nvshmem::Runtime::init()?;
    /// # let module = nvshmem::device::DeviceModule::compile(&rt, &nvshmem::device::DeviceSource::new("m", "#include <nvshmem_rs.cuh>\nextern \"C\" __global__ void fill(nvrs_array<float> a, float v) { unsigned long long i = blockIdx.x * blockDim.x + threadIdx.x; if (i < a.len) a[i] = v; }"))?;
    /// let mut a = rt.alloc_zeroed::<f32>(1000)?;
    /// let fill = module.kernel("fill")?;
    /// let cfg = nvshmem::cudarc::driver::LaunchConfig::for_num_elems(1000);
    /// // SAFETY: fill(nvrs_array<float>, float) writes only a's 1000 elements.
    /// unsafe { fill.launch(cfg, rt.stream(), Args::new().array_mut(&mut a).value(2.0f32))? };
    /// assert!(a.to_vec()?.iter().all(|&x| x == 2.0));
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    pub unsafe fn launch(
        &self,
        config: LaunchConfig,
        stream: &Arc<CudaStream>,
        args: Args<'_>,
    ) -> Result<()> {
        // SAFETY: the caller's guarantee, passed on.
        unsafe { self.fire("DeviceKernel::launch", config, stream, args, false) }
    }

    /// NVSHMEM's collective launch (`nvshmemx_collective_launch`), for kernels whose blocks
    /// synchronise with each other or with other PEs' kernels (device-side barriers, signal
    /// waits between blocks of different PEs): every block must be resident at once, so the
    /// grid is checked against what fits on this GPU (the SM count this context may use, under
    /// MPS its share, times the blocks per SM the kernel's registers and shared memory allow)
    /// and launched cooperatively where the GPU supports it. A grid of `(0, 0, 0)` asks for the
    /// most that fit. Returns the grid launched. Too large a grid is
    /// [`Error::CollectiveLaunch`]; nothing is launched then.
    ///
    /// Unlike NVSHMEM's, which launches on a stream of its own and joins the caller's with
    /// events, the kernel is launched on `stream` itself.
    ///
    /// # Safety
    /// As [`DeviceKernel::launch`]; every PE whose kernel this one waits for makes the matching
    /// launch.
    ///
    /// ```no_run
    /// # let rt = nvshmem::Runtime::init()?;
    /// # let module = nvshmem::device::DeviceModule::compile(&rt, &nvshmem::device::DeviceSource::new("m", "#include <nvshmem_rs.cuh>\nextern \"C\" __global__ void sync() { nvshmemx_barrier_all_block(); }"))?;
    /// let k = module.kernel("sync")?;
    /// let cfg = nvshmem::cudarc::driver::LaunchConfig { grid_dim: (1, 1, 1), block_dim: (128, 1, 1), shared_mem_bytes: 0 };
    /// // SAFETY: every PE launches the same barrier.
    /// unsafe { k.launch_collective(cfg, rt.stream(), nvshmem::device::Args::new())? };
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    pub unsafe fn launch_collective(
        &self,
        config: LaunchConfig,
        stream: &Arc<CudaStream>,
        args: Args<'_>,
    ) -> Result<(u32, u32, u32)> {
        const CALL: &str = "DeviceKernel::launch_collective";
        self.module.rt.enter(CALL, stream)?;
        let resident = self.max_resident_blocks(config.block_dim, config.shared_mem_bytes)?;
        let block = config.block_dim.0 * config.block_dim.1 * config.block_dim.2;
        let grid = plan_collective_grid(config.grid_dim, resident).map_err(|requested| {
            Error::CollectiveLaunch {
                kernel: self.name.clone(),
                grid: requested,
                resident: resident as u64,
                block,
                shared_bytes: config.shared_mem_bytes,
            }
        })?;
        let cooperative = self
            .module
            .rt
            .context()
            .attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH)
            .map_err(Error::cuda("cuDeviceGetAttribute"))?
            != 0;
        let config = LaunchConfig {
            grid_dim: grid,
            ..config
        };
        // SAFETY: the caller's guarantee, passed on; the grid fits on the GPU.
        unsafe { self.fire(CALL, config, stream, args, cooperative) }?;
        Ok(grid)
    }

    /// The most blocks of `block_dim` threads (with `shared_mem_bytes` of dynamic shared
    /// memory each) that can be resident at once on this PE's GPU: what a collective launch
    /// may ask for (`nvshmemx_collective_launch_query_gridsize`).
    ///
    /// ```no_run
    /// # let rt = nvshmem::Runtime::init()?;
    /// # let module = nvshmem::device::DeviceModule::compile(&rt, &nvshmem::device::DeviceSource::new("m", "#include <nvshmem_rs.cuh>\nextern \"C\" __global__ void k() {}"))?;
    /// let most = module.kernel("k")?.max_resident_blocks((256, 1, 1), 0)?;
    /// assert!(most > 0);
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    pub fn max_resident_blocks(
        &self,
        block_dim: (u32, u32, u32),
        shared_mem_bytes: u32,
    ) -> Result<u32> {
        let rt = &self.module.rt;
        rt.bind()?;
        let threads = block_dim.0 * block_dim.1 * block_dim.2;
        let mut per_sm = 0i32;
        // SAFETY: `func` belongs to a loaded module of the current context.
        unsafe {
            sys::cuOccupancyMaxActiveBlocksPerMultiprocessor(
                &mut per_sm,
                self.func,
                threads as i32,
                shared_mem_bytes as usize,
            )
        }
        .result()
        .map_err(Error::cuda("cuOccupancyMaxActiveBlocksPerMultiprocessor"))?;
        Ok(per_sm.max(0) as u32 * usable_sms(rt.context())?)
    }

    /// Reaps released modules, checks the arrays, records their use, launches, and records
    /// the module's event on the stream.
    ///
    /// # Safety
    /// As [`DeviceKernel::launch`].
    unsafe fn fire(
        &self,
        call: &'static str,
        config: LaunchConfig,
        stream: &Arc<CudaStream>,
        args: Args<'_>,
        cooperative: bool,
    ) -> Result<()> {
        let rt = &self.module.rt;
        let q = rt.enqueue(call, stream)?;
        for u in &args.uses {
            rt.check_same(call, "args", u.runtime())?;
        }
        reap(false);
        for u in &args.uses {
            u.record(&q)?;
        }
        // The module stays loaded until this launch is done (or a graph holding it is gone).
        q.uses(&self.module)?;
        let mut params: Vec<*mut c_void> = args
            .slots
            .iter()
            .map(|s| s.as_ptr() as *mut c_void)
            .collect();
        let mut attr = sys::CUlaunchAttribute {
            id: sys::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_COOPERATIVE,
            pad: [0; 4],
            value: sys::CUlaunchAttributeValue { cooperative: 1 },
        };
        let cfg = sys::CUlaunchConfig {
            gridDimX: config.grid_dim.0,
            gridDimY: config.grid_dim.1,
            gridDimZ: config.grid_dim.2,
            blockDimX: config.block_dim.0,
            blockDimY: config.block_dim.1,
            blockDimZ: config.block_dim.2,
            sharedMemBytes: config.shared_mem_bytes,
            hStream: stream.cu_stream(),
            attrs: &mut attr,
            numAttrs: cooperative as u32,
        };
        // SAFETY: `func` is a kernel of a module this handle keeps loaded, in the stream's
        // context (current, checked by `enter`); each parameter points at a live slot holding
        // one argument's bytes, which the driver copies before returning; the caller
        // guarantees they match the kernel's parameters and what the kernel accesses.
        unsafe { sys::cuLaunchKernelEx(&cfg, self.func, params.as_mut_ptr(), std::ptr::null_mut()) }
            .result()
            .map_err(Error::cuda("cuLaunchKernelEx (device-initiated kernel)"))
    }
}

/// The grid a collective launch runs: `requested`, or every resident block for `(0, 0, 0)`;
/// `Err(blocks asked for)` when that is more than `resident` (or nothing fits).
fn plan_collective_grid(
    requested: (u32, u32, u32),
    resident: u32,
) -> std::result::Result<(u32, u32, u32), u64> {
    let blocks = requested.0 as u64 * requested.1 as u64 * requested.2 as u64;
    if requested == (0, 0, 0) {
        return if resident > 0 {
            Ok((resident, 1, 1))
        } else {
            Err(0)
        };
    }
    if blocks == 0 || blocks > resident as u64 {
        return Err(blocks);
    }
    Ok(requested)
}

/// The SMs this context may use: the device's count, less under MPS, where a client started
/// with `CUDA_MPS_ACTIVE_THREAD_PERCENTAGE` gets only that share (rounded down to whole SM
/// pairs) and its
/// context may report an execution affinity of fewer SMs. A collective launch sized by the
/// whole device would then have blocks that never become resident while the others spin.
fn usable_sms(ctx: &Arc<CudaContext>) -> Result<u32> {
    let all = ctx
        .attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
        .map_err(Error::cuda("cuDeviceGetAttribute"))? as u32;
    // SAFETY: an all-zero affinity record is valid (a type and a count); the context is current.
    let mut affinity: sys::CUexecAffinityParam = unsafe { std::mem::zeroed() };
    // SAFETY: `affinity` is a valid place for the answer.
    let got = unsafe {
        sys::cuCtxGetExecAffinity(
            &mut affinity,
            sys::CUexecAffinityType::CU_EXEC_AFFINITY_TYPE_SM_COUNT,
        )
    };
    // SAFETY: the union's one member, zeroed above and filled by the driver on success.
    let share = unsafe { affinity.param.smCount.val };
    let affinity = (got == sys::CUresult::CUDA_SUCCESS).then_some(share);
    let percentage = std::env::var(MPS_PERCENTAGE_VAR).ok();
    Ok(sm_share(all, affinity, percentage.as_deref()))
}

/// The variable with which MPS limits a client's share of the GPU.
const MPS_PERCENTAGE_VAR: &str = "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE";

/// [`usable_sms`] from its inputs: the device's SM count, the context's affinity (if the
/// driver gave one), and the MPS percentage (if set).
fn sm_share(all: u32, affinity: Option<u32>, percentage: Option<&str>) -> u32 {
    let mut sms = all;
    if let Some(a) = affinity.filter(|&a| a > 0) {
        sms = sms.min(a);
    }
    if let Some(p) = percentage.and_then(|p| p.trim().parse::<f64>().ok()) {
        if p > 0.0 && p < 100.0 {
            // MPS hands out SMs in pairs (a TPC) on recent GPUs: whole pairs only, so that the
            // grid never counts on an SM the share rounded away.
            let pairs = (all as f64 / 2.0 * p / 100.0).floor() as u32;
            sms = sms.min((2 * pairs).max(1));
        }
    }
    sms
}

impl Drop for Loaded {
    fn drop(&mut self) {
        let pending = Pending::after(self.uses.take());
        let retired = Retired {
            nv: self.rt.nv(),
            ctx: Arc::clone(self.rt.context()),
            module: self.module,
            registered: self.registered,
            name: std::mem::take(&mut self.name),
            pending,
        };
        if std::thread::panicking() || self.rt.check_health().is_err() {
            // As the runtime does: a failing PE leaves what the GPU may still use as it is.
            std::mem::forget(retired);
            return;
        }
        RETIRED
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(retired);
        // Releases this module now if its work is done, and any earlier one whose work is.
        reap(false);
    }
}

/// A dropped module waiting for its launches to complete before it is unregistered and
/// unloaded.
struct Retired {
    /// NVSHMEM, valid while the runtime lives: entries are only released from a call that
    /// holds the runtime (there is one runtime per process, and NVSHMEM cannot be started
    /// again once finalised), so a retired entry is released before NVSHMEM is finalised or
    /// never (see [`release_retired`] for the runtime's drop).
    nv: Nvshmem,
    ctx: Arc<CudaContext>,
    module: sys::CUmodule,
    registered: bool,
    name: String,
    pending: Pending,
}

// SAFETY: the module handle is usable from any thread with its context current, which
// `release` binds; the rest is Send.
unsafe impl Send for Retired {}

static RETIRED: Mutex<Vec<Retired>> = Mutex::new(Vec::new());

impl Retired {
    /// Whether every launch of the module has completed (never waits; one that cannot be
    /// proved done keeps the module loaded).
    fn done(&mut self) -> bool {
        self.pending.done()
    }

    /// [`Retired::done`], through a shared reference (the events were recorded already; a
    /// capture's deferred ones are recorded by `done`).
    fn done_now(&self) -> bool {
        self.pending.is_done()
    }

    /// Unregisters and unloads the module.
    fn release(self) {
        if let Err(e) = self.ctx.bind_to_thread() {
            tracing::warn!(%e, module = %self.name, "binding the context to release a device module");
            return;
        }
        if self.registered {
            // SAFETY: the module was registered by `DeviceModule::load` (checked) and is
            // finalised once, here, while NVSHMEM is initialised (see `nv`); its launches have
            // completed.
            if let Err(e) = unsafe { self.nv.cumodule_finalize(self.module) } {
                tracing::warn!(%e, module = %self.name, "unregistering a device module");
            }
        }
        // SAFETY: no launch of the module is queued any more and NVSHMEM no longer writes
        // into it; it is unloaded once.
        if let Err(e) = unsafe { sys::cuModuleUnload(self.module) }.result() {
            tracing::warn!(%e, module = %self.name, "unloading a device module");
        }
        tracing::debug!(module = %self.name, "device module released");
    }
}

/// Releases every retired module whose work is done (`wait`: waits for the others first).
fn reap(wait: bool) {
    let ready: Vec<Retired> = {
        let mut list = RETIRED.lock().unwrap_or_else(|p| p.into_inner());
        if list.is_empty() {
            return;
        }
        if wait {
            // At most the runtime's own wait before finalising; a module whose work never
            // ends stays loaded.
            let start = std::time::Instant::now();
            while !list.iter_mut().all(Retired::done)
                && start.elapsed() < std::time::Duration::from_secs(30)
            {
                std::thread::sleep(std::time::Duration::from_micros(200));
            }
        }
        list.iter_mut().for_each(|r| {
            r.done();
        });
        let (ready, waiting) = std::mem::take(&mut *list)
            .into_iter()
            .partition(|r: &Retired| r.done_now());
        *list = waiting;
        ready
    };
    for r in ready {
        r.release();
    }
}

/// Waits (a bounded time) for the work of every retired device module, then unregisters and
/// unloads them: the runtime calls it while it closes, before NVSHMEM is finalised. A module
/// whose work does not end stays loaded until the process exits.
pub(crate) fn release_retired() {
    reap(true)
}

/// Whether the work queued with every retired device module is done: the runtime finalises
/// NVSHMEM only then (a kernel still running would use the heap it tears down), and waits for
/// it as long as for the rest of its work (its timeout), not [`reap`]'s fixed bound.
pub(crate) fn retired_settled() -> bool {
    RETIRED
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .iter_mut()
        .all(Retired::done)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn collective_grids_must_fit() {
        assert_eq!(plan_collective_grid((0, 0, 0), 264), Ok((264, 1, 1)));
        assert_eq!(plan_collective_grid((0, 0, 0), 0), Err(0));
        assert_eq!(plan_collective_grid((132, 1, 1), 264), Ok((132, 1, 1)));
        assert_eq!(plan_collective_grid((16, 16, 2), 264), Err(512));
        assert_eq!(plan_collective_grid((4, 0, 1), 264), Err(0));
        assert_eq!(plan_collective_grid((1, 1, 1), 0), Err(1));
    }

    #[test]
    fn an_mps_client_counts_only_its_share_of_the_sms() {
        assert_eq!(sm_share(132, None, None), 132);
        assert_eq!(sm_share(132, Some(132), Some("50")), 66);
        assert_eq!(sm_share(132, Some(66), Some("50")), 66);
        assert_eq!(sm_share(132, None, Some("25")), 32);
        assert_eq!(sm_share(132, Some(40), None), 40);
        assert_eq!(sm_share(132, Some(0), Some("100")), 132);
        assert_eq!(sm_share(132, None, Some("not a number")), 132);
        assert_eq!(sm_share(132, None, Some("0.1")), 1);
    }

    #[test]
    fn arguments_keep_their_bytes_in_order() {
        let a = Args::new()
            .value(7u32)
            .value(-2i64)
            .value(1.5f64)
            .value(DeviceArray {
                ptr: 0x1000,
                len: 3,
            });
        assert_eq!(a.len(), 4);
        assert_eq!(a.slots[0][0] as u32, 7);
        assert_eq!(a.slots[1][0] as i64, -2);
        assert_eq!(f64::from_bits(a.slots[2][0]), 1.5);
        assert_eq!(&*a.slots[3], &[0x1000, 3]);
    }

    #[test]
    fn the_error_of_a_grid_too_large_names_the_limit() {
        let e = Error::CollectiveLaunch {
            kernel: "halo".into(),
            grid: 512,
            resident: 264,
            block: 256,
            shared_bytes: 0,
        };
        assert_eq!(
            e.to_string(),
            "collective launch of halo: 512 blocks requested but at most 264 can be resident \
             at once on this GPU (blocks of 256 threads, 0 bytes of shared memory)"
        );
    }
}
