//! A minimal NCCL binding, loaded at run time from where a user's NCCL lives.
//!
//! cudarc's NCCL bindings look only on the loader path and panic on a missing library or
//! symbol; a benchmark must instead find the NCCL of `NCCL_HOME` or of the Python wheel, and
//! report a missing one. Only the dozen functions the benchmark calls are bound (nccl.h,
//! stable since NCCL 2.7).
use std::{
    ffi::{c_char, c_int, c_void, CStr},
    path::{Path, PathBuf},
};

use cudarc::driver::sys::CUstream;

/// `ncclComm_t`.
pub type Comm = *mut c_void;

/// `ncclUniqueId`: 128 opaque bytes, passed by value to `ncclCommInitRank`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct UniqueId {
    /// The bytes.
    pub internal: [c_char; 128],
}

type Coll =
    unsafe extern "C" fn(*const c_void, *mut c_void, usize, c_int, c_int, Comm, CUstream) -> c_int;

/// The bound functions.
pub struct Nccl {
    /// Where it was loaded from.
    pub path: PathBuf,
    /// `ncclGetVersion`'s code (e.g. 22809).
    pub version: i32,
    pub(crate) get_unique_id: unsafe extern "C" fn(*mut UniqueId) -> c_int,
    pub(crate) comm_init_rank: unsafe extern "C" fn(*mut Comm, c_int, UniqueId, c_int) -> c_int,
    pub(crate) comm_destroy: unsafe extern "C" fn(Comm) -> c_int,
    pub(crate) error_string: unsafe extern "C" fn(c_int) -> *const c_char,
    /// ncclAllReduce(send, recv, count, type, op, comm, stream).
    pub(crate) all_reduce: Coll,
    /// ncclReduceScatter(send, recv, recvcount, type, op, comm, stream).
    pub(crate) reduce_scatter: Coll,
    pub(crate) broadcast: unsafe extern "C" fn(
        *const c_void,
        *mut c_void,
        usize,
        c_int,
        c_int,
        Comm,
        CUstream,
    ) -> c_int,
    pub(crate) reduce: unsafe extern "C" fn(
        *const c_void,
        *mut c_void,
        usize,
        c_int,
        c_int,
        c_int,
        Comm,
        CUstream,
    ) -> c_int,
    pub(crate) all_gather:
        unsafe extern "C" fn(*const c_void, *mut c_void, usize, c_int, Comm, CUstream) -> c_int,
    pub(crate) send:
        unsafe extern "C" fn(*const c_void, usize, c_int, c_int, Comm, CUstream) -> c_int,
    pub(crate) recv:
        unsafe extern "C" fn(*mut c_void, usize, c_int, c_int, Comm, CUstream) -> c_int,
    pub(crate) group_start: unsafe extern "C" fn() -> c_int,
    pub(crate) group_end: unsafe extern "C" fn() -> c_int,
}

/// Where to look, in order: an explicit path, `$NCCL_LIBRARY`, `$NCCL_HOME/lib`, the loader
/// path (`libnccl.so.2`), then the `nvidia-nccl-cu13` wheel in the active or usual Python
/// environments.
pub fn candidates(explicit: Option<&Path>, env: &dyn Fn(&str) -> Option<String>) -> Vec<PathBuf> {
    let mut v = Vec::new();
    if let Some(p) = explicit {
        v.push(p.to_path_buf());
    }
    if let Some(p) = env("NCCL_LIBRARY") {
        v.push(PathBuf::from(p));
    }
    if let Some(h) = env("NCCL_HOME") {
        for sub in ["lib", "lib64", ""] {
            v.push(Path::new(&h).join(sub).join("libnccl.so.2"));
        }
    }
    v.push(PathBuf::from("libnccl.so.2"));
    let mut envs: Vec<PathBuf> = Vec::new();
    for var in ["VIRTUAL_ENV", "CONDA_PREFIX"] {
        if let Some(p) = env(var) {
            envs.push(PathBuf::from(p));
        }
    }
    envs.extend(["/opt/torch/.venv", "/usr/local", "/usr"].map(PathBuf::from));
    if let Some(h) = env("HOME") {
        envs.push(Path::new(&h).join(".local"));
    }
    for e in envs {
        let lib = e.join("lib");
        let Ok(rd) = std::fs::read_dir(&lib) else {
            continue;
        };
        let mut pys: Vec<PathBuf> = rd
            .flatten()
            .map(|d| d.path())
            .filter(|p| {
                p.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with("python3"))
            })
            .collect();
        pys.sort();
        for py in pys.into_iter().rev() {
            for sp in ["site-packages", "dist-packages"] {
                v.push(py.join(sp).join("nvidia/nccl/lib/libnccl.so.2"));
            }
        }
    }
    v
}

impl Nccl {
    /// Loads the first NCCL found; the error lists what was tried.
    pub fn load(explicit: Option<&Path>) -> Result<&'static Nccl, String> {
        let env = |k: &str| std::env::var(k).ok();
        let mut tried = Vec::new();
        for c in candidates(explicit, &env) {
            let bare = c.components().count() == 1;
            if !bare && !c.exists() {
                continue;
            }
            // RTLD_LOCAL: NVSHMEM loads `libnccl.so.2` by name for its own collectives; a
            // global copy of ours would be handed to it instead (seen: NVSHMEM's reductions
            // then failed with "invalid argument"), so each keeps its own.
            // SAFETY: loading NCCL runs its initialisers, which only set up its own state.
            let lib = unsafe {
                libloading::os::unix::Library::open(
                    Some(&c),
                    libloading::os::unix::RTLD_NOW | libloading::os::unix::RTLD_LOCAL,
                )
            };
            match lib {
                Ok(lib) => {
                    // Never unloaded: NCCL keeps threads and callbacks for the process's life.
                    let lib: &'static libloading::Library = Box::leak(Box::new(lib.into()));
                    return Self::bind(lib, c).map(|n| &*Box::leak(Box::new(n)));
                }
                Err(e) => tried.push(format!("{}: {e}", c.display())),
            }
        }
        Err(format!(
            "NCCL not found (set NCCL_HOME or --nccl-lib); tried: {}",
            if tried.is_empty() {
                "nothing loadable".into()
            } else {
                tried.join("; ")
            }
        ))
    }

    fn bind(lib: &'static libloading::Library, path: PathBuf) -> Result<Nccl, String> {
        macro_rules! sym {
            ($name:literal) => {
                // SAFETY: the symbol is declared in nccl.h with the type of the field it fills.
                unsafe {
                    *lib.get(concat!($name, "\0").as_bytes())
                        .map_err(|e| format!("{}: {}: {e}", path.display(), $name))?
                }
            };
        }
        let get_version: unsafe extern "C" fn(*mut c_int) -> c_int = sym!("ncclGetVersion");
        let mut version = 0;
        // SAFETY: writes one int.
        unsafe { get_version(&mut version) };
        Ok(Nccl {
            version,
            get_unique_id: sym!("ncclGetUniqueId"),
            comm_init_rank: sym!("ncclCommInitRank"),
            comm_destroy: sym!("ncclCommDestroy"),
            error_string: sym!("ncclGetErrorString"),
            all_reduce: sym!("ncclAllReduce"),
            reduce_scatter: sym!("ncclReduceScatter"),
            broadcast: sym!("ncclBroadcast"),
            reduce: sym!("ncclReduce"),
            all_gather: sym!("ncclAllGather"),
            send: sym!("ncclSend"),
            recv: sym!("ncclRecv"),
            group_start: sym!("ncclGroupStart"),
            group_end: sym!("ncclGroupEnd"),
            path,
        })
    }

    /// `Ok` for ncclSuccess, else NCCL's message.
    pub fn check(&self, call: &str, status: c_int) -> Result<(), String> {
        if status == 0 {
            return Ok(());
        }
        // SAFETY: ncclGetErrorString returns a static C string for any code.
        let msg = unsafe { CStr::from_ptr((self.error_string)(status)) };
        Err(format!("{call}: {} ({status})", msg.to_string_lossy()))
    }

    /// The version as `major.minor.patch`.
    pub fn version_string(&self) -> String {
        let v = self.version;
        format!("{}.{}.{}", v / 10000, (v % 10000) / 100, v % 100)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn search_order() {
        let env = |k: &str| match k {
            "NCCL_HOME" => Some("/opt/nccl".to_string()),
            "NCCL_LIBRARY" => Some("/x/libnccl.so.2".to_string()),
            _ => None,
        };
        let c = candidates(Some(Path::new("/mine.so")), &env);
        assert_eq!(c[0], PathBuf::from("/mine.so"));
        assert_eq!(c[1], PathBuf::from("/x/libnccl.so.2"));
        assert_eq!(c[2], PathBuf::from("/opt/nccl/lib/libnccl.so.2"));
        let bare = c
            .iter()
            .position(|p| p == Path::new("libnccl.so.2"))
            .unwrap();
        assert!(bare > 2);
    }

    #[test]
    fn missing_nccl_is_an_error_not_a_panic() {
        let r = Nccl::load(Some(Path::new("/nonexistent/libnccl.so.2")));
        // On a machine with NCCL somewhere this may load; without, it must say what it tried.
        if let Err(e) = r {
            assert!(e.contains("NCCL not found"), "{e}");
        }
    }
}
