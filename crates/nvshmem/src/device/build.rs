//! Building a device-initiated kernel: NVRTC compiles the program's CUDA C to relocatable code
//! (or LTO-IR), nvJitLink links it with NVSHMEM's device library, and the machine code is
//! cached on disk beside the crate's own kernels (`kernels::compile`'s cache folder).
use std::ffi::{c_char, CString};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use cudarc::nvrtc::sys as nvrtc_sys;

use super::jitlink::{self, Input, Part};
use crate::error::{Error, Result};
use crate::kernels::compile::{
    cache_dir, cuda_include_dir, nvrtc_available, nvrtc_version, store, KeyHasher,
};

/// The crate's device header, which a kernel includes as `<nvshmem_rs.cuh>`.
pub const HEADER: &str = include_str!("../../include/nvshmem_rs.cuh");

/// Its name in `#include`.
pub const HEADER_NAME: &str = "nvshmem_rs.cuh";

/// How a device-initiated kernel is compiled and linked with NVSHMEM's device library.
///
/// Both compile with NVRTC for the GPU's own architecture and link with nvJitLink against
/// `libnvshmem_device.a`; they differ in what NVRTC hands the linker. The GPU check measured
/// both (compile time and the latency and bandwidth kernels of `nvshmem-perf device`); see
/// the module docs for the figures and why [`Route::Relocatable`] is the default.
///
/// ```
/// use nvshmem::device::Route;
/// assert_eq!(Route::default(), Route::Relocatable);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum Route {
    /// `-rdc=true`: relocatable machine code, linked with the library's machine code.
    #[default]
    Relocatable,
    /// `-rdc=true -dlto`: LTO-IR, optimised again at link time (`-lto`) with the library.
    Lto,
}

impl Route {
    /// Its name in logs and nvshmem-perf's rows (`rdc`, `lto`).
    ///
    /// ```
    /// assert_eq!(nvshmem::device::Route::Lto.name(), "lto");
    /// ```
    pub fn name(self) -> &'static str {
        match self {
            Route::Relocatable => "rdc",
            Route::Lto => "lto",
        }
    }
}

/// A device-initiated kernel's CUDA C source and how to build it: [`DeviceSource::build`]
/// gives the linked machine code ([`DeviceImage`]), which
/// [`DeviceModule::load`](super::DeviceModule::load) loads on a runtime's GPU.
///
/// The source includes `<nvshmem_rs.cuh>` (the crate's header: NVSHMEM's device API, the view
/// of a symmetric array, signal helpers) and declares its kernels `extern "C"`.
///
/// ```no_run
/// use nvshmem::device::DeviceSource;
/// let src = DeviceSource::new("put_one", r#"
///     #include <nvshmem_rs.cuh>
///     extern "C" __global__ void put_one(nvrs_array<int> a, int pe) {
///         nvshmem_int_p(a.at(0), 42, pe);
///     }
/// "#);
/// let image = src.build("sm_90")?; // no GPU needed
/// assert!(image.kernel_names().contains(&"put_one".to_string()));
/// # Ok::<(), nvshmem::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct DeviceSource {
    name: String,
    code: String,
    route: Route,
    defines: Vec<(String, String)>,
    include_dirs: Vec<PathBuf>,
}

/// Linked machine code of a device-initiated kernel, for one architecture.
///
/// ```no_run
/// # use nvshmem::device::DeviceSource;
/// let image = DeviceSource::new("k", "#include <nvshmem_rs.cuh>\nextern \"C\" __global__ void k() {}").build("sm_90")?;
/// println!("{} bytes for {} ({:?} compile, {:?} link, cached: {})",
///     image.cubin().len(), image.arch(), image.times().compile, image.times().link, image.times().cached);
/// # Ok::<(), nvshmem::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct DeviceImage {
    name: String,
    arch: String,
    cubin: Vec<u8>,
    times: BuildTimes,
}

/// What a build cost.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
#[non_exhaustive]
pub struct BuildTimes {
    /// NVRTC's compilation (zero when the image came from the cache).
    pub compile: Duration,
    /// nvJitLink's link (zero when cached).
    pub link: Duration,
    /// Whether the image was read from the on-disk cache.
    pub cached: bool,
}

impl DeviceSource {
    /// A source named `name` (used in errors, logs and the cache's file names), built by
    /// [`Route::Relocatable`].
    ///
    /// ```
    /// let s = nvshmem::device::DeviceSource::new("halo", "extern \"C\" __global__ void k() {}");
    /// assert_eq!(s.name(), "halo");
    /// ```
    pub fn new(name: impl Into<String>, code: impl Into<String>) -> Self {
        DeviceSource {
            name: name.into(),
            code: code.into(),
            route: Route::default(),
            defines: Vec::new(),
            include_dirs: Vec::new(),
        }
    }

    /// The name given.
    ///
    /// ```
    /// assert_eq!(nvshmem::device::DeviceSource::new("a", "").name(), "a");
    /// ```
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Builds by `route` instead of the default.
    ///
    /// ```
    /// use nvshmem::device::{DeviceSource, Route};
    /// let s = DeviceSource::new("a", "").route(Route::Lto);
    /// assert_eq!(s.get_route(), Route::Lto);
    /// ```
    pub fn route(mut self, route: Route) -> Self {
        self.route = route;
        self
    }

    /// The route it is built by.
    ///
    /// ```
    /// use nvshmem::device::{DeviceSource, Route};
    /// assert_eq!(DeviceSource::new("a", "").get_route(), Route::Relocatable);
    /// ```
    pub fn get_route(&self) -> Route {
        self.route
    }

    /// Adds `-D name=value`.
    ///
    /// ```
    /// let s = nvshmem::device::DeviceSource::new("a", "").define("BLOCK", "256");
    /// # let _ = s;
    /// ```
    pub fn define(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.defines.push((name.into(), value.into()));
        self
    }

    /// Adds a folder to the include path. Headers read from it are not part of the cache key:
    /// give the source another name (or clear the cache) when they change.
    ///
    /// ```
    /// let s = nvshmem::device::DeviceSource::new("a", "").include_dir("/opt/mine/include");
    /// # let _ = s;
    /// ```
    pub fn include_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.include_dirs.push(dir.into());
        self
    }

    /// Compiles and links for `arch` (`sm_90` for H100 and H200; a real architecture, since
    /// the result is machine code), or reads the result from the cache. Needs no GPU: NVRTC,
    /// nvJitLink, NVSHMEM's headers and device library, and the CUDA and CCCL headers (see
    /// [`Toolchain`]). Errors: [`Error::Compile`] with NVRTC's log, [`Error::Link`] with
    /// nvJitLink's, [`Error::Nvrtc`] when a tool or a header folder is missing.
    ///
    /// ```no_run
    /// # use nvshmem::device::DeviceSource;
    /// let e = DeviceSource::new("bad", "extern \"C\" __global__ void k() { nope(); }").build("sm_90");
    /// assert!(matches!(e, Err(nvshmem::Error::Compile { .. })));
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    pub fn build(&self, arch: &str) -> Result<DeviceImage> {
        if !arch.starts_with("sm_") {
            return Err(Error::arg(
                "DeviceSource::build",
                "arch",
                format!("{arch:?} is not a real architecture such as sm_90"),
            ));
        }
        let tools = Toolchain::find()?;
        let opts = self.options(&tools, arch);
        let cached = cache_dir().map(|dir| dir.join(self.cache_file(&tools, &opts, arch)));
        if let Some(cubin) = cached.as_ref().and_then(|p| std::fs::read(p).ok()) {
            return Ok(DeviceImage {
                name: self.name.clone(),
                arch: arch.into(),
                cubin,
                times: BuildTimes {
                    cached: true,
                    ..BuildTimes::default()
                },
            });
        }
        let t0 = Instant::now();
        let code = compile(&self.name, &self.code, &opts, self.route)?;
        let compile_time = t0.elapsed();
        let t1 = Instant::now();
        let kind = match self.route {
            Route::Relocatable => Input::Cubin,
            Route::Lto => Input::LtoIr,
        };
        let cubin = jitlink::link(
            arch,
            self.route == Route::Lto,
            &[
                Part::Data(kind, &code, &self.name),
                Part::File(Input::Library, &tools.device_library),
            ],
        )
        .map_err(|log| Error::Link {
            module: self.name.clone(),
            log,
        })?;
        let link_time = t1.elapsed();
        if let Some(path) = &cached {
            store(path, &cubin);
        }
        tracing::debug!(name = %self.name, route = self.route.name(), ?compile_time, ?link_time, "built a device-initiated kernel");
        Ok(DeviceImage {
            name: self.name.clone(),
            arch: arch.into(),
            cubin,
            times: BuildTimes {
                compile: compile_time,
                link: link_time,
                cached: false,
            },
        })
    }

    /// NVRTC's options.
    fn options(&self, tools: &Toolchain, arch: &str) -> Vec<String> {
        let mut opts = vec![
            format!("--gpu-architecture={arch}"),
            "-rdc=true".into(),
            "-default-device".into(),
            "-std=c++17".into(),
        ];
        if self.route == Route::Lto {
            opts.push("-dlto".into());
        }
        for (k, v) in &self.defines {
            opts.push(format!("-D{k}={v}"));
        }
        for dir in self.include_dirs.iter().chain(&tools.include_dirs) {
            opts.push(format!("--include-path={}", dir.display()));
        }
        opts
    }

    /// The cache's file name: the source's name, the route, the architecture and
    /// [`device_cache_key`].
    fn cache_file(&self, tools: &Toolchain, opts: &[String], arch: &str) -> String {
        let key = device_cache_key(
            &self.code,
            HEADER,
            opts,
            arch,
            nvrtc_version(),
            tools.jitlink_version,
            &tools.nvshmem_version,
        );
        let safe: String = self
            .name
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '_' {
                    c
                } else {
                    '-'
                }
            })
            .collect();
        format!(
            "device-{safe}-{}-{arch}-{key:016x}.cubin",
            self.route.name()
        )
    }
}

/// The cache key of a device-initiated kernel: a [`KeyHasher`] over everything that makes
/// its machine code but where the headers were found (a build machine and a GPU machine
/// differ there, not in what the headers say): the program's source, the crate's header
/// ([`HEADER`]),
/// NVRTC's options (defines, route), the architecture, NVRTC's and nvJitLink's versions and
/// NVSHMEM's version header (which pins its device library). Stable across machines and Rust
/// toolchains, as the crate's own kernels' key ([`KeyHasher`] says why).
fn device_cache_key(
    code: &str,
    header: &str,
    opts: &[String],
    arch: &str,
    nvrtc: (i32, i32),
    jitlink: (u32, u32),
    nvshmem_version: &str,
) -> u64 {
    let mut h = KeyHasher::new(b"nvshmem-rs device kernel cache key 1");
    h.field(code.as_bytes());
    h.field(header.as_bytes());
    h.options(opts);
    h.field(arch.as_bytes());
    h.field(&nvrtc.0.to_le_bytes());
    h.field(&nvrtc.1.to_le_bytes());
    h.field(&jitlink.0.to_le_bytes());
    h.field(&jitlink.1.to_le_bytes());
    h.field(nvshmem_version.as_bytes());
    h.finish()
}

impl DeviceImage {
    /// Machine code linked elsewhere (say by nvcc and nvlink against NVSHMEM's device
    /// library), to load as it is.
    ///
    /// ```no_run
    /// let bytes = std::fs::read("reference.cubin").unwrap();
    /// let image = nvshmem::device::DeviceImage::from_linked_cubin("reference", "sm_90", bytes);
    /// assert_eq!(image.name(), "reference");
    /// ```
    pub fn from_linked_cubin(
        name: impl Into<String>,
        arch: impl Into<String>,
        cubin: Vec<u8>,
    ) -> Self {
        DeviceImage {
            name: name.into(),
            arch: arch.into(),
            cubin,
            times: BuildTimes::default(),
        }
    }

    /// Relocatable machine code compiled elsewhere (`nvcc -rdc=true -cubin`), linked here with
    /// NVSHMEM's device library for `arch`.
    ///
    /// ```no_run
    /// let bytes = std::fs::read("reference-rdc.cubin").unwrap();
    /// let image = nvshmem::device::DeviceImage::link_relocatable("reference", "sm_90", &bytes)?;
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    pub fn link_relocatable(
        name: impl Into<String>,
        arch: &str,
        relocatable: &[u8],
    ) -> Result<Self> {
        let name = name.into();
        let tools = Toolchain::find()?;
        let t = Instant::now();
        let cubin = jitlink::link(
            arch,
            false,
            &[
                Part::Data(Input::Cubin, relocatable, &name),
                Part::File(Input::Library, &tools.device_library),
            ],
        )
        .map_err(|log| Error::Link {
            module: name.clone(),
            log,
        })?;
        Ok(DeviceImage {
            name,
            arch: arch.into(),
            cubin,
            times: BuildTimes {
                link: t.elapsed(),
                ..BuildTimes::default()
            },
        })
    }

    /// The source's name.
    ///
    /// ```
    /// let i = nvshmem::device::DeviceImage::from_linked_cubin("r", "sm_90", vec![]);
    /// assert_eq!(i.name(), "r");
    /// ```
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The architecture it was built for.
    ///
    /// ```
    /// let i = nvshmem::device::DeviceImage::from_linked_cubin("r", "sm_90", vec![]);
    /// assert_eq!(i.arch(), "sm_90");
    /// ```
    pub fn arch(&self) -> &str {
        &self.arch
    }

    /// The machine code.
    ///
    /// ```
    /// let i = nvshmem::device::DeviceImage::from_linked_cubin("r", "sm_90", vec![1, 2]);
    /// assert_eq!(i.cubin(), &[1, 2]);
    /// ```
    pub fn cubin(&self) -> &[u8] {
        &self.cubin
    }

    /// What building it cost.
    ///
    /// ```
    /// let i = nvshmem::device::DeviceImage::from_linked_cubin("r", "sm_90", vec![]);
    /// assert!(!i.times().cached);
    /// ```
    pub fn times(&self) -> BuildTimes {
        self.times
    }

    /// The names of the kernels (entry functions) the machine code holds, read from its ELF
    /// symbol table (`STO_CUDA_ENTRY` symbols); empty if it is not a CUDA ELF.
    ///
    /// ```
    /// let i = nvshmem::device::DeviceImage::from_linked_cubin("r", "sm_90", vec![]);
    /// assert!(i.kernel_names().is_empty());
    /// ```
    pub fn kernel_names(&self) -> Vec<String> {
        super::elf::entry_names(&self.cubin)
    }
}

/// Where the tools and headers of a build were found.
#[derive(Debug, Clone)]
pub struct Toolchain {
    /// NVSHMEM's `include/`, CUDA's headers, CCCL's, in the order NVRTC searches them.
    pub include_dirs: Vec<PathBuf>,
    /// `libnvshmem_device.a`.
    pub device_library: PathBuf,
    /// The text of NVSHMEM's `non_abi/nvshmem_version.h` (part of every cache key).
    nvshmem_version: String,
    /// nvJitLink's version (part of every cache key: the linker makes the machine code).
    jitlink_version: (u32, u32),
}

/// The variable naming NVSHMEM's folder (holding `include/` and `lib/`), as scripts/setup.sh
/// exports it.
pub const NVSHMEM_HOME_VAR: &str = "NVSHMEM_HOME";

impl Toolchain {
    /// Finds NVRTC, nvJitLink and the folders: NVSHMEM's from `$NVSHMEM_HOME`, else beside the
    /// loaded `libnvshmem_host.so.3` (the wheel keeps `include/` and `lib/` together); the CUDA
    /// headers as the crate's own kernels find them (`NVSHMEM_RS_CUDA_INCLUDE`, `CUDA_HOME`,
    /// ...); CCCL's in their `cccl/` folder (CUDA 13's layout, and the `nvidia-cuda-cccl`
    /// wheel's).
    ///
    /// ```no_run
    /// let t = nvshmem::device::Toolchain::find()?;
    /// println!("linking with {}", t.device_library.display());
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    pub fn find() -> Result<Toolchain> {
        static FOUND: OnceLock<std::result::Result<Toolchain, String>> = OnceLock::new();
        FOUND
            .get_or_init(|| {
                Toolchain::search().map_err(|e| match e {
                    Error::Nvrtc(why) => why,
                    other => other.to_string(),
                })
            })
            .clone()
            .map_err(Error::Nvrtc)
    }

    fn search() -> Result<Toolchain> {
        nvrtc_available()?;
        let jitlink_version = jitlink::version()?;
        let root = nvshmem_root()?;
        let nvshmem_include = root.join("include");
        let device_library = ["lib", "lib64"]
            .iter()
            .map(|l| root.join(l).join("libnvshmem_device.a"))
            .find(|p| p.is_file())
            .ok_or_else(|| {
                Error::Nvrtc(format!(
                    "NVSHMEM's device library libnvshmem_device.a is not in {}/lib",
                    root.display()
                ))
            })?;
        let nvshmem_version =
            std::fs::read_to_string(nvshmem_include.join("non_abi").join("nvshmem_version.h"))
                .map_err(|e| {
                    Error::Nvrtc(format!(
                        "NVSHMEM's device headers are not in {}: {e}",
                        nvshmem_include.display()
                    ))
                })?;
        let cuda = cuda_include_dir()?;
        let cccl = [cuda.join("cccl"), cuda.clone()]
            .into_iter()
            .find(|d| d.join("cuda").join("std").join("type_traits").is_file())
            .ok_or_else(|| {
                Error::Nvrtc(format!(
                    "CCCL's headers (cuda/std/type_traits), which NVSHMEM's device headers need, \
                     are not in {0}/cccl or {0}: install the `nvidia-cuda-cccl` 13.0 wheel \
                     (scripts/setup.sh does) or use CUDA 13's include folder",
                    cuda.display()
                ))
            })?;
        let mut include_dirs = vec![nvshmem_include, cuda.clone()];
        if cccl != cuda {
            include_dirs.push(cccl);
        }
        Ok(Toolchain {
            include_dirs,
            device_library,
            nvshmem_version,
            jitlink_version,
        })
    }
}

/// NVSHMEM's folder: `$NVSHMEM_HOME`, else the parent of the loaded host library's folder.
fn nvshmem_root() -> Result<PathBuf> {
    let has_headers = |d: &Path| d.join("include").join("nvshmem.h").is_file();
    if let Some(home) = std::env::var_os(NVSHMEM_HOME_VAR) {
        let home = PathBuf::from(home);
        if has_headers(&home) {
            return Ok(home);
        }
    }
    let loaded = nvshmem_sys::loaded_path()
        .map(Path::to_path_buf)
        .or_else(|| {
            nvshmem_sys::lib()
                .ok()
                .and_then(|_| nvshmem_sys::loaded_path().map(Path::to_path_buf))
        });
    if let Some(root) = loaded
        .as_deref()
        .and_then(Path::parent)
        .and_then(Path::parent)
    {
        if has_headers(root) {
            return Ok(root.to_path_buf());
        }
    }
    Err(Error::Nvrtc(format!(
        "NVSHMEM's device headers (include/nvshmem.h) were found neither in ${NVSHMEM_HOME_VAR} \
         ({:?}) nor beside the host library ({:?}); set {NVSHMEM_HOME_VAR} to the folder of the \
         `nvidia-nvshmem-cu13` wheel (nvidia/nvshmem) or of an NVSHMEM install",
        std::env::var_os(NVSHMEM_HOME_VAR),
        loaded
    )))
}

/// One NVRTC compilation of `code` with the crate's header available: relocatable machine code,
/// or LTO-IR for [`Route::Lto`].
fn compile(name: &str, code: &str, opts: &[String], route: Route) -> Result<Vec<u8>> {
    let failed = |log: String| Error::Compile {
        kernel: name.to_string(),
        log,
    };
    let src = CString::new(code).map_err(|e| failed(e.to_string()))?;
    let file = CString::new(format!("{name}.cu")).map_err(|e| failed(e.to_string()))?;
    let header = CString::new(HEADER).expect("the header has no NUL");
    let header_name = CString::new(HEADER_NAME).expect("no NUL");
    let copts: Vec<CString> = opts
        .iter()
        .map(|o| CString::new(o.as_str()))
        .collect::<std::result::Result<_, _>>()
        .map_err(|e| failed(e.to_string()))?;
    let popts: Vec<*const c_char> = copts.iter().map(|o| o.as_ptr()).collect();
    let mut prog: nvrtc_sys::nvrtcProgram = std::ptr::null_mut();
    let headers = [header.as_ptr()];
    let names = [header_name.as_ptr()];
    // SAFETY: every pointer is a NUL-terminated string that outlives the program, which is
    // destroyed once at the end of this function; the buffers handed to NVRTC have the sizes
    // it reported.
    unsafe {
        nvrtc_sys::nvrtcCreateProgram(
            &mut prog,
            src.as_ptr(),
            file.as_ptr(),
            1,
            headers.as_ptr(),
            names.as_ptr(),
        )
        .result()
        .map_err(|e| failed(format!("{e:?}")))?;
        let out = (|| {
            let status = nvrtc_sys::nvrtcCompileProgram(prog, popts.len() as i32, popts.as_ptr());
            if status != nvrtc_sys::nvrtcResult::NVRTC_SUCCESS {
                let mut size = 0;
                nvrtc_sys::nvrtcGetProgramLogSize(prog, &mut size);
                let mut log = vec![0u8; size];
                if size > 0 {
                    nvrtc_sys::nvrtcGetProgramLog(prog, log.as_mut_ptr().cast());
                }
                let log = String::from_utf8_lossy(&log)
                    .trim_end_matches('\0')
                    .trim_end()
                    .to_string();
                return Err(failed(format!(
                    "{status:?}: {log}\n(options: {})",
                    opts.join(" ")
                )));
            }
            let mut size = 0;
            let mut buf;
            match route {
                Route::Relocatable => {
                    nvrtc_sys::nvrtcGetCUBINSize(prog, &mut size)
                        .result()
                        .map_err(|e| failed(format!("{e:?}")))?;
                    buf = vec![0u8; size];
                    nvrtc_sys::nvrtcGetCUBIN(prog, buf.as_mut_ptr().cast())
                        .result()
                        .map_err(|e| failed(format!("{e:?}")))?;
                }
                Route::Lto => {
                    nvrtc_sys::nvrtcGetLTOIRSize(prog, &mut size)
                        .result()
                        .map_err(|e| failed(format!("{e:?}")))?;
                    buf = vec![0u8; size];
                    nvrtc_sys::nvrtcGetLTOIR(prog, buf.as_mut_ptr().cast())
                        .result()
                        .map_err(|e| failed(format!("{e:?}")))?;
                }
            }
            Ok(buf)
        })();
        nvrtc_sys::nvrtcDestroyProgram(&mut prog);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::device_cache_key;

    const CODE: &str = "#include <nvshmem_rs.cuh>\nextern \"C\" __global__ void k() {}\n";
    const HEADER: &str = "#pragma once\n";
    const VERSION_H: &str = "#define NVSHMEM_VENDOR_MAJOR_VERSION 3\n";

    fn opts(arch: &str, include: &str) -> Vec<String> {
        vec![
            format!("--gpu-architecture={arch}"),
            "-rdc=true".into(),
            "-default-device".into(),
            "-std=c++17".into(),
            "-DBLOCK=256".into(),
            format!("--include-path={include}"),
        ]
    }

    fn key(code: &str, opts: &[String], nvrtc: (i32, i32), jitlink: (u32, u32)) -> u64 {
        device_cache_key(code, HEADER, opts, "sm_90", nvrtc, jitlink, VERSION_H)
    }

    /// Pinned, as the crate's own kernels' key is (`kernels::compile`'s tests): the value was
    /// computed apart from this code, by a plain 64-bit FNV-1a over the length-prefixed fields
    /// `device_cache_key` lists.
    #[test]
    fn the_device_cache_key_is_fixed_across_toolchains() {
        let k = key(
            CODE,
            &opts("sm_90", "/opt/nvshmem/include"),
            (13, 0),
            (13, 0),
        );
        assert_eq!(k, 0x07c9_36ed_fd89_3fe4, "{k:#018x}");
    }

    #[test]
    fn the_device_cache_key_follows_what_makes_the_code_and_nothing_else() {
        let base = key(CODE, &opts("sm_90", "/a"), (13, 0), (13, 0));
        assert_eq!(base, key(CODE, &opts("sm_90", "/b"), (13, 0), (13, 0)));
        let mut lto = opts("sm_90", "/a");
        lto.push("-dlto".into());
        for other in [
            key(
                "__global__ void k2() {}",
                &opts("sm_90", "/a"),
                (13, 0),
                (13, 0),
            ),
            key(CODE, &opts("sm_100", "/a"), (13, 0), (13, 0)),
            key(CODE, &lto, (13, 0), (13, 0)),
            key(CODE, &opts("sm_90", "/a"), (13, 1), (13, 0)),
            key(CODE, &opts("sm_90", "/a"), (13, 0), (13, 1)),
            device_cache_key(
                CODE,
                "",
                &opts("sm_90", "/a"),
                "sm_90",
                (13, 0),
                (13, 0),
                VERSION_H,
            ),
            device_cache_key(
                CODE,
                HEADER,
                &opts("sm_90", "/a"),
                "sm_100",
                (13, 0),
                (13, 0),
                VERSION_H,
            ),
            device_cache_key(
                CODE,
                HEADER,
                &opts("sm_90", "/a"),
                "sm_90",
                (13, 0),
                (13, 0),
                "",
            ),
        ] {
            assert_ne!(base, other);
        }
    }
}
