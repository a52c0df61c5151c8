//! Run-time compilation with NVRTC, and the process-wide cache of loaded kernels.
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use cudarc::driver::sys::{self, CUdevice_attribute};
use cudarc::driver::{CudaContext, CudaFunction};
use cudarc::nvrtc::{CompileError, CompileOptions, Ptx};

use super::types::KernelKey;
use crate::error::{Error, Result};

/// Names a folder holding `cuda_fp16.h`, `cuda_bf16.h` and `cuda_fp8.h`, searched first.
pub(crate) const INCLUDE_ENV: &str = "NVSHMEM_RS_CUDA_INCLUDE";

/// Whether libnvrtc can be loaded; cudarc panics on first use otherwise, so this is asked
/// first. Remembered: the answer cannot change within a process.
pub(crate) fn nvrtc_available() -> Result<()> {
    static PRESENT: OnceLock<bool> = OnceLock::new();
    // SAFETY: only tries to dlopen libnvrtc under cudarc's candidate names.
    let present = *PRESENT.get_or_init(|| unsafe { cudarc::nvrtc::sys::is_culib_present() });
    if present {
        Ok(())
    } else {
        Err(Error::Nvrtc(
            "libnvrtc (CUDA 13) could not be loaded; install the CUDA toolkit's NVRTC or the \
             `nvidia-cuda-nvrtc` 13.0 wheel and put its lib folder on LD_LIBRARY_PATH"
                .into(),
        ))
    }
}

/// Folders that may hold the CUDA headers, in the order tried: `$NVSHMEM_RS_CUDA_INCLUDE`,
/// `$CUDA_HOME/include`, `$CUDA_PATH/include`, `/usr/local/cuda/include`, then `../include`
/// beside every `LD_LIBRARY_PATH` entry (the layout of the pip wheels: `nvidia/cu13/lib`
/// holds libnvrtc, `nvidia/cu13/include` the headers of `nvidia-cuda-runtime`).
fn include_candidates() -> Vec<PathBuf> {
    let mut v = Vec::new();
    if let Some(p) = std::env::var_os(INCLUDE_ENV) {
        v.push(PathBuf::from(p));
    }
    for var in ["CUDA_HOME", "CUDA_PATH"] {
        if let Some(p) = std::env::var_os(var) {
            v.push(Path::new(&p).join("include"));
        }
    }
    v.push(PathBuf::from("/usr/local/cuda/include"));
    if let Some(paths) = std::env::var_os("LD_LIBRARY_PATH") {
        for dir in std::env::split_paths(&paths) {
            if let Some(parent) = dir.parent() {
                v.push(parent.join("include"));
            }
        }
    }
    v
}

/// The first candidate folder with the fp16, bf16 and fp8 headers. NVRTC 13 has none of them
/// built in (checked with the 13.0.88 wheel), so kernels on those types need it.
pub(crate) fn cuda_include_dir() -> Result<PathBuf> {
    static FOUND: OnceLock<Option<PathBuf>> = OnceLock::new();
    let found = FOUND.get_or_init(|| {
        include_candidates().into_iter().find(|d| {
            ["cuda_fp16.h", "cuda_bf16.h", "cuda_fp8.h"]
                .iter()
                .all(|h| d.join(h).is_file())
        })
    });
    found.clone().ok_or_else(|| {
        Error::Nvrtc(format!(
            "the CUDA headers cuda_fp16.h, cuda_bf16.h and cuda_fp8.h were not found in any of \
             {:?}; set {INCLUDE_ENV} to the folder holding them (the CUDA toolkit's include/ or \
             the `nvidia-cuda-runtime` 13 wheel's nvidia/cu13/include)",
            include_candidates()
        ))
    })
}

/// Compiles one kernel to PTX for `arch` (`compute_90`, ...).
pub(crate) fn compile(key: KernelKey, arch: &str) -> Result<Ptx> {
    nvrtc_available()?;
    let mut opts = CompileOptions {
        name: Some(format!("{}.cu", key.name())),
        options: vec![format!("--gpu-architecture={arch}"), "--std=c++17".into()],
        ..Default::default()
    };
    if key.needs_headers() {
        opts.include_paths
            .push(cuda_include_dir()?.to_string_lossy().into_owned());
    }
    cudarc::nvrtc::compile_ptx_with_opts(key.source(), opts).map_err(|e| Error::Compile {
        kernel: key.name(),
        log: match e {
            CompileError::CompileError { log, options, .. } => format!(
                "{}\n(options: {})",
                log.to_string_lossy().trim_end(),
                options.join(" ")
            ),
            other => other.to_string(),
        },
    })
}

/// The virtual architecture of the context's device, e.g. `compute_90` for an H100.
pub(crate) fn arch_of(ctx: &CudaContext) -> Result<String> {
    let attr = |a| {
        ctx.attribute(a)
            .map_err(Error::cuda("cuDeviceGetAttribute"))
    };
    let major = attr(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?;
    let minor = attr(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?;
    Ok(format!("compute_{major}{minor}"))
}

/// Loaded kernels by (context, kernel). A context's kernels live as long as the process: the
/// cache holds the module, and through it the context.
type Cache = HashMap<(usize, KernelKey), Arc<[CudaFunction]>>;

/// The functions of `key` (in [`KernelKey::functions`] order) in `ctx`, compiling and loading
/// them on first use. Compilation happens under the lock, so each kernel compiles once.
pub(crate) fn functions(ctx: &Arc<CudaContext>, key: KernelKey) -> Result<Arc<[CudaFunction]>> {
    static CACHE: OnceLock<Mutex<Cache>> = OnceLock::new();
    let cache = CACHE.get_or_init(Default::default);
    // A poisoned lock only means another thread panicked mid-insert; the map is still valid.
    let mut map = cache.lock().unwrap_or_else(|p| p.into_inner());
    let id = (ctx.cu_ctx() as usize, key);
    if let Some(f) = map.get(&id) {
        return Ok(f.clone());
    }
    let ptx = compile(key, &arch_of(ctx)?)?;
    let module = ctx
        .load_module(ptx)
        .map_err(Error::cuda("cuModuleLoadData"))?;
    let fns = key
        .functions()
        .iter()
        .map(|name| {
            let f = module
                .load_function(name)
                .map_err(Error::cuda("cuModuleGetFunction"))?;
            // Loaded now, not at its first launch: CUDA's lazy loading may make a first launch
            // wait for the context to go idle, which never happens while a collective of this
            // crate spins waiting for a peer whose matching launch is that first launch.
            // SAFETY: `f` is a function of a module loaded in this context, which is current.
            unsafe { sys::cuFuncLoad(f.cu_function()) }
                .result()
                .map_err(Error::cuda("cuFuncLoad"))?;
            Ok(f)
        })
        .collect::<Result<Arc<[_]>>>()?;
    tracing::debug!(kernel = %key.name(), "compiled and loaded");
    map.insert(id, fns.clone());
    Ok(fns)
}
