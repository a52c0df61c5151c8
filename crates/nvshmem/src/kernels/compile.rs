//! Run-time compilation with NVRTC, the on-disk cache of compiled kernels, and the process-wide
//! cache of loaded ones.
//!
//! A kernel is compiled for the device's own architecture (`sm_90` on an H100 or H200) to
//! machine code, so the driver has nothing left to compile, and the result is kept on disk:
//! `$NVSHMEM_RS_KERNEL_CACHE` (`off` turns it off), else `$XDG_CACHE_HOME/nvshmem-rs/kernels`,
//! else `~/.cache/nvshmem-rs/kernels`. A file's name holds a hash of everything that makes the
//! code and of nothing else (source, options, target architecture, NVRTC's version), by an
//! algorithm fixed here ([`cache_key`], [`KeyHasher`]), so a stale file is never used and a
//! build with another Rust toolchain finds the same files. Files are written under a temporary
//! name and renamed, so PEs of one node compiling the same kernel at once do not see half a
//! file. Compiling every kernel costs minutes; with the cache, a process pays only for kernels
//! no earlier process on the machine compiled.
use std::collections::HashMap;
use std::ffi::{c_char, CString};
use std::hash::Hasher;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use cudarc::driver::sys::{self, CUdevice_attribute};
use cudarc::driver::{CudaContext, CudaFunction};
use cudarc::nvrtc::{result as nvrtc, sys as nvrtc_sys, Ptx};

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

/// The variable that names the kernel cache's folder (`off`: no cache).
pub(crate) const CACHE_ENV: &str = "NVSHMEM_RS_KERNEL_CACHE";

/// The kernel cache's folder, if caching is on (also the device-initiated kernels' cache).
pub(crate) fn cache_dir() -> Option<PathBuf> {
    match std::env::var_os(CACHE_ENV) {
        Some(v) if v == "off" => None,
        Some(v) => Some(PathBuf::from(v)),
        None => std::env::var_os("XDG_CACHE_HOME")
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".cache")))
            .map(|c| c.join("nvshmem-rs").join("kernels")),
    }
}

/// NVRTC's version, part of every cache key.
pub(crate) fn nvrtc_version() -> (i32, i32) {
    static VERSION: OnceLock<(i32, i32)> = OnceLock::new();
    *VERSION.get_or_init(|| {
        let (mut major, mut minor) = (0, 0);
        // SAFETY: two valid places for the answer; NVRTC was found loadable before this.
        unsafe { nvrtc_sys::nvrtcVersion(&mut major, &mut minor) };
        (major, minor)
    })
}

/// What NVRTC compiles `key` with for `arch`.
fn options(key: KernelKey, arch: &str) -> Result<Vec<String>> {
    let mut opts = vec![format!("--gpu-architecture={arch}"), "--std=c++17".into()];
    if key.needs_headers() {
        opts.push(format!("--include-path={}", cuda_include_dir()?.display()));
    }
    Ok(opts)
}

/// Compiles one kernel for `arch`: machine code for a real architecture (`sm_90`), PTX for a
/// virtual one (`compute_90`, what the CPU check compiles for). Read from and written to the
/// disk cache when it is on.
pub(crate) fn compile(key: KernelKey, arch: &str) -> Result<Ptx> {
    nvrtc_available()?;
    let source = key.source();
    let opts = options(key, arch)?;
    let machine_code = arch.starts_with("sm_");
    let cached = cache_dir().map(|dir| {
        let hash = cache_key(&source, &opts, arch, nvrtc_version());
        let ext = if machine_code { "cubin" } else { "ptx" };
        dir.join(format!("{}-{arch}-{hash:016x}.{ext}", key.name()))
    });
    if let Some(bytes) = cached.as_ref().and_then(|p| std::fs::read(p).ok()) {
        return Ok(image(bytes, machine_code));
    }
    let bytes = nvrtc_compile(key, &source, &opts, machine_code)?;
    if let Some(path) = &cached {
        store(path, &bytes);
    }
    Ok(image(bytes, machine_code))
}

/// The cache key of a kernel compiled from `source` with `opts` for `arch` by NVRTC
/// `nvrtc` (major, minor): a [`KeyHasher`] over those, after a tag naming this layout. Only
/// what makes the code enters it, so a filler of the cache (`scripts/gpu-check.sh stage`) and
/// a reader on another machine, or built by another Rust toolchain, agree. The include path
/// is left out: where the CUDA headers are found differs between a build machine and a GPU
/// machine, not what they say (NVRTC's version pins them).
fn cache_key(source: &str, opts: &[String], arch: &str, nvrtc: (i32, i32)) -> u64 {
    let mut h = KeyHasher::new(b"nvshmem-rs kernel cache key 1");
    h.field(source.as_bytes());
    h.options(opts);
    h.field(arch.as_bytes());
    h.field(&nvrtc.0.to_le_bytes());
    h.field(&nvrtc.1.to_le_bytes());
    h.finish()
}

/// The hash of the on-disk kernel caches' file names (this module's and `device`'s): 64-bit
/// FNV-1a (the `fnv` crate), a fixed, documented algorithm whose value depends on the bytes
/// fed and nothing else, where std's `DefaultHasher` (used before) may change between Rust
/// releases and `Hash` impls feed platform- and version-dependent bytes (`usize` lengths,
/// enum discriminants). Each field is written as its length (8 bytes, little-endian) and its
/// bytes, so moving bytes from one field to the next changes the key; the first field is a
/// tag naming the key's layout, changed whenever the fields change, so that old files are
/// never read as new ones.
pub(crate) struct KeyHasher(fnv::FnvHasher);

impl KeyHasher {
    /// A hasher that has taken `tag`, the layout's name.
    pub(crate) fn new(tag: &[u8]) -> Self {
        let mut h = KeyHasher(fnv::FnvHasher::default());
        h.field(tag);
        h
    }

    /// Takes one field.
    pub(crate) fn field(&mut self, bytes: &[u8]) {
        self.0.write(&(bytes.len() as u64).to_le_bytes());
        self.0.write(bytes);
    }

    /// Takes NVRTC's options but the include paths (where headers were found is no part of
    /// the code; what they say is pinned by the tools' versions): their count, then each.
    pub(crate) fn options(&mut self, opts: &[String]) {
        let code_opts: Vec<&String> = opts
            .iter()
            .filter(|o| !o.starts_with("--include-path"))
            .collect();
        self.field(&(code_opts.len() as u64).to_le_bytes());
        for o in code_opts {
            self.field(o.as_bytes());
        }
    }

    /// The key.
    pub(crate) fn finish(&self) -> u64 {
        self.0.finish()
    }
}

fn image(bytes: Vec<u8>, machine_code: bool) -> Ptx {
    if machine_code {
        Ptx::from_binary(bytes)
    } else {
        Ptx::from_src(
            String::from_utf8_lossy(&bytes)
                .trim_end_matches('\0')
                .to_string(),
        )
    }
}

/// Writes a compiled kernel into the cache; a failure only costs a later recompile.
pub(crate) fn store(path: &Path, bytes: &[u8]) {
    let write = || -> std::io::Result<()> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let tmp = path.with_extension(format!("tmp{}", std::process::id()));
        std::fs::write(&tmp, bytes)?;
        std::fs::rename(&tmp, path)
    };
    if let Err(e) = write() {
        tracing::debug!(%e, path = %path.display(), "not caching a compiled kernel");
    }
}

/// One NVRTC compilation: the PTX or the machine code (cubin).
fn nvrtc_compile(
    key: KernelKey,
    source: &str,
    opts: &[String],
    machine_code: bool,
) -> Result<Vec<u8>> {
    let failed = |log: String| Error::Compile {
        kernel: key.name(),
        log,
    };
    let src = CString::new(source).map_err(|e| failed(e.to_string()))?;
    let name = CString::new(format!("{}.cu", key.name())).map_err(|e| failed(e.to_string()))?;
    let prog = nvrtc::create_program(&src, Some(&name)).map_err(|e| failed(e.to_string()))?;
    // SAFETY: `prog` was created above from `src` and `name`, which outlive it, and is
    // destroyed once, at the end of this block; the buffers handed to NVRTC have the sizes it
    // reported.
    let out = unsafe {
        let compiled = nvrtc::compile_program(prog, opts);
        let out = match compiled {
            Err(e) => {
                let log = nvrtc::get_program_log(prog)
                    .map(|l| {
                        let bytes: Vec<u8> = l.iter().map(|&c| c as u8).collect();
                        String::from_utf8_lossy(&bytes)
                            .trim_end_matches('\0')
                            .to_string()
                    })
                    .unwrap_or_default();
                Err(failed(format!(
                    "{e}: {}\n(options: {})",
                    log.trim_end(),
                    opts.join(" ")
                )))
            }
            Ok(()) if machine_code => {
                let mut size = 0;
                nvrtc_sys::nvrtcGetCUBINSize(prog, &mut size)
                    .result()
                    .map_err(|e| failed(e.to_string()))
                    .and_then(|()| {
                        let mut buf = vec![0u8; size];
                        nvrtc_sys::nvrtcGetCUBIN(prog, buf.as_mut_ptr().cast::<c_char>())
                            .result()
                            .map(|()| buf)
                            .map_err(|e| failed(e.to_string()))
                    })
            }
            Ok(()) => nvrtc::get_ptx(prog)
                .map(|p| p.iter().map(|&c| c as u8).collect())
                .map_err(|e| failed(e.to_string())),
        };
        let _ = nvrtc::destroy_program(prog);
        out
    };
    out
}

/// The architecture of the context's device, e.g. `sm_90` for an H100.
pub(crate) fn arch_of(ctx: &CudaContext) -> Result<String> {
    let (major, minor) = compute_capability(ctx)?;
    Ok(format!("sm_{major}{minor}"))
}

/// The compute capability of the context's device, `(major, minor)`: `(9, 0)` on an H100 or
/// H200. Asked of the driver once per device and remembered, since every collective call's
/// automatic choice reads it (`collective/algo/crossover.rs`).
pub(crate) fn compute_capability(ctx: &CudaContext) -> Result<(u32, u32)> {
    // Per device ordinal: `major << 8 | minor`, 0 until known (a major is never 0).
    static KNOWN: [AtomicU32; 64] = [const { AtomicU32::new(0) }; 64];
    let slot = KNOWN.get(ctx.ordinal());
    if let Some(v) = slot.map(|s| s.load(Ordering::Relaxed)).filter(|&v| v != 0) {
        return Ok((v >> 8, v & 0xff));
    }
    let attr = |a| {
        ctx.attribute(a)
            .map(|v| v as u32)
            .map_err(Error::cuda("cuDeviceGetAttribute"))
    };
    let major = attr(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?;
    let minor = attr(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?;
    if let Some(s) = slot {
        s.store(major << 8 | minor, Ordering::Relaxed);
    }
    Ok((major, minor))
}

/// Loaded kernels by (context, kernel). A context's kernels live as long as the process: the
/// cache holds the module, and through it the context.
type Cache = HashMap<(usize, KernelKey), Arc<[CudaFunction]>>;

/// A thread's most recently used entries of the [`Cache`].
type Recent = std::cell::RefCell<Vec<((usize, KernelKey), Arc<[CudaFunction]>)>>;

/// The functions of `key` (in [`KernelKey::functions`] order) in `ctx`, compiling and loading
/// them on first use. Compilation happens under the lock, so each kernel compiles once.
pub(crate) fn functions(ctx: &Arc<CudaContext>, key: KernelKey) -> Result<Arc<[CudaFunction]>> {
    // A small call looks its kernel up twice (to prepare, then to launch), and a loop of them
    // looks up the same few kernels: each thread keeps the last it found, so those lookups
    // take neither the lock nor a hash. (Entries are never removed from the cache, so a
    // remembered one stays valid.)
    thread_local! {
        static LAST: Recent = const { std::cell::RefCell::new(Vec::new()) };
    }
    let id = (ctx.cu_ctx() as usize, key);
    let remembered = LAST.with_borrow(|last| {
        last.iter()
            .find(|(k, _)| *k == id)
            .map(|(_, f)| Arc::clone(f))
    });
    if let Some(f) = remembered {
        return Ok(f);
    }
    let found = shared_functions(ctx, id)?;
    LAST.with_borrow_mut(|last| {
        if last.len() == 4 {
            last.remove(0);
        }
        last.push((id, Arc::clone(&found)));
    });
    Ok(found)
}

/// [`functions`] through the process-wide cache.
fn shared_functions(
    ctx: &Arc<CudaContext>,
    (cu_ctx, key): (usize, KernelKey),
) -> Result<Arc<[CudaFunction]>> {
    static CACHE: OnceLock<Mutex<Cache>> = OnceLock::new();
    let cache = CACHE.get_or_init(Default::default);
    // A poisoned lock only means another thread panicked mid-insert; the map is still valid.
    let mut map = cache.lock().unwrap_or_else(|p| p.into_inner());
    let id = (cu_ctx, key);
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

#[cfg(test)]
mod tests {
    use super::cache_key;

    fn opts(arch: &str, include: &str) -> Vec<String> {
        vec![
            format!("--gpu-architecture={arch}"),
            "--std=c++17".into(),
            format!("--include-path={include}"),
        ]
    }

    /// The key is pinned: a change of this value means every cache on every machine is
    /// invalidated, which a change of the key's layout must do on purpose (its tag). The value
    /// was computed apart from this code, by a plain FNV-1a (offset basis 0xcbf29ce484222325,
    /// prime 0x100000001b3) over the bytes [`cache_key`] describes.
    #[test]
    fn the_cache_key_is_fixed_across_toolchains() {
        let key = cache_key(
            "extern \"C\" __global__ void k() {}\n",
            &opts("sm_90", "/usr/local/cuda/include"),
            "sm_90",
            (13, 0),
        );
        assert_eq!(key, 0x7b6a_c767_fa8c_6212, "{key:#018x}");
    }

    #[test]
    fn the_cache_key_follows_what_makes_the_code_and_nothing_else() {
        let src = "__global__ void k() {}";
        let base = cache_key(src, &opts("sm_90", "/a"), "sm_90", (13, 0));
        // Where the headers were found is not part of the code.
        assert_eq!(
            base,
            cache_key(src, &opts("sm_90", "/b/include"), "sm_90", (13, 0))
        );
        for other in [
            cache_key(
                "__global__ void k2() {}",
                &opts("sm_90", "/a"),
                "sm_90",
                (13, 0),
            ),
            cache_key(src, &opts("sm_100", "/a"), "sm_90", (13, 0)),
            cache_key(src, &opts("sm_90", "/a"), "sm_100", (13, 0)),
            cache_key(src, &opts("sm_90", "/a"), "sm_90", (13, 1)),
            cache_key(src, &opts("sm_90", "/a"), "sm_90", (12, 0)),
            cache_key(src, &opts("sm_90", "/a")[1..], "sm_90", (13, 0)),
        ] {
            assert_ne!(base, other);
        }
        // Fields are length-prefixed: moving bytes between two options changes the key.
        let split = |a: &str, b: &str| cache_key(src, &[a.into(), b.into()], "sm_90", (13, 0));
        assert_ne!(split("-DA", "B"), split("-D", "AB"));
    }
}
