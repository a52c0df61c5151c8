//! nvJitLink, loaded at run time: links a relocatable kernel with NVSHMEM's device library.
//!
//! cudarc has no binding of it, and this crate needs seven functions, so they are declared here
//! and looked up with libloading, under the versioned names that CUDA 13's `nvJitLink.h` maps its
//! API to (`__nvJitLinkCreate_13_0`, ...): the library's unversioned names keep an older ABI.
use std::ffi::{c_char, c_void, CString};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use libloading::Library;

use crate::error::{Error, Result};

type Handle = *mut c_void;
type Status = i32;

/// What an input to the link is (`nvJitLinkInputType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(i32)]
pub(crate) enum Input {
    /// Relocatable machine code (NVRTC with `-rdc`).
    Cubin = 1,
    /// LTO-IR (NVRTC with `-dlto`).
    LtoIr = 3,
    /// A host library holding device code (`libnvshmem_device.a`).
    Library = 6,
}

struct Api {
    _lib: Library,
    create: unsafe extern "C" fn(*mut Handle, u32, *const *const c_char) -> Status,
    destroy: unsafe extern "C" fn(*mut Handle) -> Status,
    add_data: unsafe extern "C" fn(Handle, i32, *const c_void, usize, *const c_char) -> Status,
    add_file: unsafe extern "C" fn(Handle, i32, *const c_char) -> Status,
    complete: unsafe extern "C" fn(Handle) -> Status,
    cubin_size: unsafe extern "C" fn(Handle, *mut usize) -> Status,
    cubin: unsafe extern "C" fn(Handle, *mut c_void) -> Status,
    error_log_size: unsafe extern "C" fn(Handle, *mut usize) -> Status,
    error_log: unsafe extern "C" fn(Handle, *mut c_char) -> Status,
    version: unsafe extern "C" fn(*mut u32, *mut u32) -> Status,
}

/// The file name of CUDA 13's nvJitLink.
pub(crate) const LIBRARY: &str = "libnvJitLink.so.13";

/// Where nvJitLink is looked for after the loader's own search: the CUDA toolkit's folders and
/// the lib folder beside every `LD_LIBRARY_PATH` entry's parent (the `nvidia-nvjitlink` wheel
/// shares `nvidia/cu13/lib` with NVRTC).
fn candidates() -> Vec<PathBuf> {
    let mut v = vec![PathBuf::from(LIBRARY)];
    for var in ["CUDA_HOME", "CUDA_PATH"] {
        if let Some(p) = std::env::var_os(var) {
            v.push(Path::new(&p).join("lib64").join(LIBRARY));
            v.push(Path::new(&p).join("lib").join(LIBRARY));
        }
    }
    v.push(PathBuf::from("/usr/local/cuda/lib64").join(LIBRARY));
    v
}

fn api() -> Result<&'static Api> {
    static API: OnceLock<std::result::Result<Api, String>> = OnceLock::new();
    API.get_or_init(|| {
        let mut errors = Vec::new();
        for path in candidates() {
            // SAFETY: nvJitLink's initialisers only set up its own state.
            match unsafe { Library::new(&path) } {
                Ok(lib) => return resolve(lib).map_err(|e| format!("{}: {e}", path.display())),
                Err(e) => errors.push(e.to_string()),
            }
        }
        Err(format!(
            "{LIBRARY} could not be loaded ({}); install the `nvidia-nvjitlink` 13.0 wheel \
             (scripts/setup.sh does) or the CUDA toolkit and put its lib folder on LD_LIBRARY_PATH",
            errors.join("; ")
        ))
    })
    .as_ref()
    .map_err(|e| Error::Nvrtc(e.clone()))
}

fn resolve(lib: Library) -> std::result::Result<Api, libloading::Error> {
    // SAFETY: each symbol is looked up under the name nvJitLink.h (CUDA 13.0) declares it with,
    // and given that declaration's C signature; the library stays loaded in the struct.
    unsafe {
        Ok(Api {
            create: *lib.get(b"__nvJitLinkCreate_13_0\0")?,
            destroy: *lib.get(b"__nvJitLinkDestroy_13_0\0")?,
            add_data: *lib.get(b"__nvJitLinkAddData_13_0\0")?,
            add_file: *lib.get(b"__nvJitLinkAddFile_13_0\0")?,
            complete: *lib.get(b"__nvJitLinkComplete_13_0\0")?,
            cubin_size: *lib.get(b"__nvJitLinkGetLinkedCubinSize_13_0\0")?,
            cubin: *lib.get(b"__nvJitLinkGetLinkedCubin_13_0\0")?,
            error_log_size: *lib.get(b"__nvJitLinkGetErrorLogSize_13_0\0")?,
            error_log: *lib.get(b"__nvJitLinkGetErrorLog_13_0\0")?,
            version: *lib.get(b"nvJitLinkVersion\0")?,
            _lib: lib,
        })
    }
}

/// nvJitLink's version, e.g. (13, 0); an error saying where it was looked for when it cannot
/// be loaded.
pub(crate) fn version() -> Result<(u32, u32)> {
    let api = api()?;
    let (mut major, mut minor) = (0, 0);
    // SAFETY: two valid places for the answer.
    let status = unsafe { (api.version)(&mut major, &mut minor) };
    if status != 0 {
        return Err(Error::Nvrtc(format!("nvJitLinkVersion failed ({status})")));
    }
    Ok((major, minor))
}

/// One input of a link.
pub(crate) enum Part<'a> {
    /// Bytes in memory, of the given type, with a name for the log.
    Data(Input, &'a [u8], &'a str),
    /// A file (NVSHMEM's device library).
    File(Input, &'a Path),
}

/// Links `parts` for `arch` (e.g. `sm_90`) into machine code that `cuModuleLoadData` loads;
/// `lto` links LTO-IR inputs with link-time optimisation. The error is the link log.
pub(crate) fn link(
    arch: &str,
    lto: bool,
    parts: &[Part<'_>],
) -> std::result::Result<Vec<u8>, String> {
    let api = api().map_err(|e| e.to_string())?;
    let mut opts = vec![CString::new(format!("-arch={arch}")).map_err(|e| e.to_string())?];
    if lto {
        opts.push(CString::new("-lto").expect("no NUL"));
    }
    let ptrs: Vec<*const c_char> = opts.iter().map(|o| o.as_ptr()).collect();
    let mut handle: Handle = std::ptr::null_mut();
    // SAFETY: `ptrs` holds `ptrs.len()` NUL-terminated strings that outlive the call.
    let status = unsafe { (api.create)(&mut handle, ptrs.len() as u32, ptrs.as_ptr()) };
    if status != 0 {
        return Err(format!(
            "nvJitLinkCreate failed ({status}) with options {opts:?}"
        ));
    }
    let linker = Linker { api, handle };
    for part in parts {
        let status = match part {
            Part::Data(kind, bytes, name) => {
                let name = CString::new(*name).map_err(|e| e.to_string())?;
                // SAFETY: the handle is live; `bytes` and `name` outlive the call (nvJitLink
                // copies the input).
                unsafe {
                    (api.add_data)(
                        linker.handle,
                        *kind as i32,
                        bytes.as_ptr().cast(),
                        bytes.len(),
                        name.as_ptr(),
                    )
                }
            }
            Part::File(kind, path) => {
                let file =
                    CString::new(path.to_string_lossy().as_bytes()).map_err(|e| e.to_string())?;
                // SAFETY: the handle is live; `file` is a NUL-terminated path.
                unsafe { (api.add_file)(linker.handle, *kind as i32, file.as_ptr()) }
            }
        };
        if status != 0 {
            return Err(linker.failure("adding an input", status));
        }
    }
    // SAFETY: the handle is live.
    let status = unsafe { (api.complete)(linker.handle) };
    if status != 0 {
        return Err(linker.failure("linking", status));
    }
    let mut size = 0;
    // SAFETY: the handle is live and linked; `size` is a valid place for the answer.
    let status = unsafe { (api.cubin_size)(linker.handle, &mut size) };
    if status != 0 {
        return Err(linker.failure("nvJitLinkGetLinkedCubinSize", status));
    }
    let mut cubin = vec![0u8; size];
    // SAFETY: `cubin` has the size nvJitLink reported.
    let status = unsafe { (api.cubin)(linker.handle, cubin.as_mut_ptr().cast()) };
    if status != 0 {
        return Err(linker.failure("nvJitLinkGetLinkedCubin", status));
    }
    Ok(cubin)
}

/// A live nvJitLink handle, destroyed on drop.
struct Linker {
    api: &'static Api,
    handle: Handle,
}

impl Linker {
    /// The error log, after a failed step.
    fn failure(&self, step: &str, status: Status) -> String {
        let mut size = 0;
        // SAFETY: the handle is live; the buffer has the size nvJitLink reported.
        let log = unsafe {
            if (self.api.error_log_size)(self.handle, &mut size) == 0 && size > 0 {
                let mut buf = vec![0u8; size];
                (self.api.error_log)(self.handle, buf.as_mut_ptr().cast());
                String::from_utf8_lossy(&buf)
                    .trim_end_matches('\0')
                    .trim_end()
                    .to_string()
            } else {
                String::new()
            }
        };
        format!("nvJitLink failed {step} (status {status}):\n{log}")
    }
}

impl Drop for Linker {
    fn drop(&mut self) {
        // SAFETY: the handle came from nvJitLinkCreate and is destroyed once.
        unsafe { (self.api.destroy)(&mut self.handle) };
    }
}
