//! Finding and loading `libnvshmem_host.so.3` once per process.
//!
//! Where we look, in order:
//! 1. `NVSHMEM_LIBRARY`, the full path of the library; when it is set, nothing else is tried;
//! 2. `$NVSHMEM_HOME/lib` (and `lib64`);
//! 3. the dynamic loader's own search (`LD_LIBRARY_PATH`, `ldconfig`'s cache);
//! 4. the `nvidia-nvshmem-cu13` Python wheel: `$VIRTUAL_ENV`, `$CONDA_PREFIX`, then the
//!    site-packages folders `python3` reports.
//!
//! The library is opened with `RTLD_NOW | RTLD_GLOBAL`, because NVSHMEM's bootstrap and
//! transport plugins, which it loads later from its own folder, resolve symbols from it; and it
//! is never unloaded, since NVSHMEM keeps threads and handlers that point into it.
use std::{
    env, fmt,
    path::{Path, PathBuf},
    process::Command,
    sync::OnceLock,
};

use crate::NvshmemLib;

/// The file name NVSHMEM 3.x installs its host library under.
///
/// ```
/// // Named in the error that lists where the library was looked for.
/// let e = nvshmem_sys::LoadError::NotFound { tried: Vec::new() };
/// assert!(e.to_string().contains("libnvshmem_host.so.3"));
/// ```
pub const LIBRARY_NAME: &str = "libnvshmem_host.so.3";

/// The NVSHMEM release the committed bindings were generated from.
///
/// ```
/// use nvshmem_sys::BINDINGS_VERSION;
/// assert_eq!(BINDINGS_VERSION.major, 3);
/// assert!(BINDINGS_VERSION.is_compatible_with_bindings());
/// ```
pub const BINDINGS_VERSION: Version = Version {
    major: crate::NVSHMEM_VENDOR_MAJOR_VERSION as i32,
    minor: crate::NVSHMEM_VENDOR_MINOR_VERSION as i32,
    patch: crate::NVSHMEM_VENDOR_PATCH_VERSION as i32,
};

/// An NVSHMEM release number.
///
/// ```
/// use nvshmem_sys::Version;
/// let v = Version { major: 3, minor: 4, patch: 5 };
/// assert_eq!(v.to_string(), "3.4.5");
/// assert!(v < Version { major: 3, minor: 10, patch: 0 }); // ordered numerically
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Version {
    /// Major release; the bindings work with one major release only.
    pub major: i32,
    /// Minor release.
    pub minor: i32,
    /// Patch release.
    pub patch: i32,
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)
    }
}

impl Version {
    /// Whether a library of this version can be driven by the committed bindings: the same
    /// major release, and no older than the headers they were generated from (NVSHMEM keeps
    /// its host ABI within a major release and only adds to it).
    ///
    /// ```
    /// use nvshmem_sys::{Version, BINDINGS_VERSION};
    /// let newer = Version { minor: BINDINGS_VERSION.minor + 1, ..BINDINGS_VERSION };
    /// assert!(newer.is_compatible_with_bindings());
    /// let next_major = Version { major: BINDINGS_VERSION.major + 1, minor: 0, patch: 0 };
    /// assert!(!next_major.is_compatible_with_bindings());
    /// ```
    pub fn is_compatible_with_bindings(&self) -> bool {
        self.major == BINDINGS_VERSION.major && *self >= BINDINGS_VERSION
    }
}

/// Why NVSHMEM's host library could not be loaded.
///
/// ```no_run
/// match nvshmem_sys::lib() {
///     Ok(_) => println!("NVSHMEM {} loaded", nvshmem_sys::loaded_version().unwrap()),
///     Err(nvshmem_sys::LoadError::NotFound { tried }) => eprintln!("tried {} places", tried.len()),
///     Err(e) => eprintln!("{e}"),
/// }
/// ```
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum LoadError {
    /// No candidate could be opened. Lists every place tried and why each failed.
    #[error("NVSHMEM's host library ({LIBRARY_NAME}) was not found; tried:\n{}\nSet NVSHMEM_LIBRARY to the library's path, NVSHMEM_HOME to its install prefix, or `pip install nvidia-nvshmem-cu13`", format_tried(.tried))]
    NotFound {
        /// Each candidate and the loader's answer.
        tried: Vec<(String, String)>,
    },
    /// The library was found but is a release the bindings cannot drive.
    #[error("NVSHMEM {found} at {path} does not match these bindings (generated from {expected}; any {}.x from {expected} on works)", .expected.major)]
    VersionMismatch {
        /// Where the library was found.
        path: PathBuf,
        /// The release it reports.
        found: Version,
        /// The release the bindings were generated from.
        expected: Version,
    },
    /// The library opened, but lacks a function the bindings need.
    #[error("NVSHMEM {version} at {path} lacks a symbol the bindings need: {detail}")]
    MissingSymbol {
        /// Where the library was found.
        path: PathBuf,
        /// The release it reports.
        version: Version,
        /// The loader's message, naming the symbol.
        detail: String,
    },
}

fn format_tried(tried: &[(String, String)]) -> String {
    tried
        .iter()
        .map(|(place, why)| format!("  - {place}: {why}"))
        .collect::<Vec<_>>()
        .join("\n")
}

struct Loaded {
    lib: NvshmemLib,
    path: PathBuf,
    version: Version,
}

static LOADED: OnceLock<Result<Loaded, LoadError>> = OnceLock::new();

/// The loaded NVSHMEM host library, loading it on first use.
///
/// The first call searches and loads; later calls return the same library, or the same error.
///
/// ```no_run
/// let nvshmem = nvshmem_sys::lib()?;
/// // SAFETY: NVSHMEM's version query needs no initialised NVSHMEM.
/// let (mut major, mut minor, mut patch) = (0, 0, 0);
/// unsafe { nvshmem.nvshmemx_vendor_get_version_info(&mut major, &mut minor, &mut patch) };
/// assert_eq!(major, nvshmem_sys::loaded_version().unwrap().major);
/// # Ok::<(), nvshmem_sys::LoadError>(())
/// ```
pub fn lib() -> Result<&'static NvshmemLib, LoadError> {
    match LOADED.get_or_init(load) {
        Ok(l) => Ok(&l.lib),
        Err(e) => Err(e.clone()),
    }
}

/// The path the library was loaded from, once [`lib`] has succeeded.
///
/// ```no_run
/// nvshmem_sys::lib()?;
/// let path = nvshmem_sys::loaded_path().unwrap();
/// assert!(path.ends_with("libnvshmem_host.so.3"));
/// # Ok::<(), nvshmem_sys::LoadError>(())
/// ```
pub fn loaded_path() -> Option<&'static Path> {
    LOADED.get()?.as_ref().ok().map(|l| l.path.as_path())
}

/// The release of the loaded library, once [`lib`] has succeeded.
///
/// ```no_run
/// nvshmem_sys::lib()?;
/// let v = nvshmem_sys::loaded_version().unwrap();
/// assert!(v.is_compatible_with_bindings());
/// # Ok::<(), nvshmem_sys::LoadError>(())
/// ```
pub fn loaded_version() -> Option<Version> {
    LOADED.get()?.as_ref().ok().map(|l| l.version)
}

/// The candidates that need no Python interpreter to find, in search order, each with where
/// it came from. When `NVSHMEM_LIBRARY` is set it is the only one.
fn fixed_candidates() -> Vec<(PathBuf, &'static str)> {
    if let Some(explicit) = env::var_os("NVSHMEM_LIBRARY") {
        return vec![(PathBuf::from(explicit), "NVSHMEM_LIBRARY")];
    }
    let mut out = Vec::new();
    if let Some(home) = env::var_os("NVSHMEM_HOME") {
        for sub in ["lib", "lib64"] {
            out.push((
                Path::new(&home).join(sub).join(LIBRARY_NAME),
                "NVSHMEM_HOME",
            ));
        }
    }
    out.push((PathBuf::from(LIBRARY_NAME), "the loader path"));
    out
}

/// Site-packages folders where the NVSHMEM wheel may live.
fn python_site_dirs() -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    for var in ["VIRTUAL_ENV", "CONDA_PREFIX"] {
        if let Some(prefix) = env::var_os(var) {
            dirs.extend(glob_site_packages(Path::new(&prefix)));
        }
    }
    // Asking the interpreter is the one way to know where pip put the wheel; it runs once,
    // and only when no earlier candidate could be opened.
    if let Ok(out) = Command::new("python3")
        .args([
            "-c",
            "import site,sys;print('\\n'.join(site.getsitepackages()+[site.getusersitepackages()]))",
        ])
        .output()
    {
        if out.status.success() {
            dirs.extend(String::from_utf8_lossy(&out.stdout).lines().map(PathBuf::from));
        }
    }
    dirs.dedup();
    dirs
}

fn glob_site_packages(prefix: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(prefix.join("lib")) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("python3"))
        .map(|e| e.path().join("site-packages"))
        .collect()
}

fn load() -> Result<Loaded, LoadError> {
    let mut tried = Vec::new();
    for (path, origin) in fixed_candidates() {
        match open(&path) {
            Ok(lib) => return finish(lib, path),
            Err(why) => tried.push((format!("{} (from {origin})", path.display()), why)),
        }
    }
    if env::var_os("NVSHMEM_LIBRARY").is_none() {
        for dir in python_site_dirs() {
            let path = dir.join("nvidia/nvshmem/lib").join(LIBRARY_NAME);
            let place = format!("{} (from the nvidia-nvshmem-cu13 wheel)", path.display());
            if !path.exists() {
                tried.push((place, "no such file".into()));
                continue;
            }
            match open(&path) {
                Ok(lib) => return finish(lib, path),
                Err(why) => tried.push((place, why)),
            }
        }
    }
    Err(LoadError::NotFound { tried })
}

fn open(path: &Path) -> Result<libloading::Library, String> {
    use libloading::os::unix::{Library, RTLD_GLOBAL, RTLD_NOW};
    // SAFETY: loading NVSHMEM runs its library constructors, which only initialise its own
    // globals; the flags are those NVSHMEM's plugins require.
    unsafe { Library::open(Some(path), RTLD_NOW | RTLD_GLOBAL) }
        .map(Into::into)
        .map_err(|e| e.to_string())
}

fn finish(library: libloading::Library, path: PathBuf) -> Result<Loaded, LoadError> {
    let version = query_version(&library).map_err(|detail| LoadError::MissingSymbol {
        path: path.clone(),
        version: Version {
            major: 0,
            minor: 0,
            patch: 0,
        },
        detail,
    })?;
    if !version.is_compatible_with_bindings() {
        return Err(LoadError::VersionMismatch {
            path,
            found: version,
            expected: BINDINGS_VERSION,
        });
    }
    // SAFETY: the bindings were generated from this library's headers, for a release whose
    // ABI the version check above has just confirmed.
    match unsafe { NvshmemLib::from_library(library) } {
        Ok(lib) => Ok(Loaded { lib, path, version }),
        Err(e) => Err(LoadError::MissingSymbol {
            path,
            version,
            detail: e.to_string(),
        }),
    }
}

fn query_version(library: &libloading::Library) -> Result<Version, String> {
    type VersionFn = unsafe extern "C" fn(*mut i32, *mut i32, *mut i32);
    // SAFETY: the signature is `void nvshmemx_vendor_get_version_info(int*, int*, int*)` in
    // every 3.x release.
    let f = unsafe { library.get::<VersionFn>(b"nvshmemx_vendor_get_version_info\0") }
        .map_err(|e| e.to_string())?;
    let (mut major, mut minor, mut patch) = (0, 0, 0);
    // SAFETY: the three pointers are valid for writes for the duration of the call, and the
    // function needs no initialised NVSHMEM.
    unsafe { f(&mut major, &mut minor, &mut patch) };
    Ok(Version {
        major,
        minor,
        patch,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_compatibility_follows_the_major_release() {
        let v = |major, minor, patch| Version {
            major,
            minor,
            patch,
        };
        assert!(BINDINGS_VERSION.is_compatible_with_bindings());
        assert!(v(3, 8, 0).is_compatible_with_bindings());
        assert!(!v(3, 3, 24).is_compatible_with_bindings());
        assert!(!v(4, 0, 0).is_compatible_with_bindings());
        assert!(!v(2, 11, 0).is_compatible_with_bindings());
        assert_eq!(v(3, 4, 5).to_string(), "3.4.5");
    }

    #[test]
    fn not_found_lists_every_place_tried() {
        let e = LoadError::NotFound {
            tried: vec![
                (
                    "/a/libnvshmem_host.so.3 (from NVSHMEM_HOME)".into(),
                    "no such file".into(),
                ),
                (
                    "libnvshmem_host.so.3 (from the loader path)".into(),
                    "cannot open".into(),
                ),
            ],
        };
        let msg = e.to_string();
        assert!(
            msg.contains("/a/libnvshmem_host.so.3 (from NVSHMEM_HOME): no such file"),
            "{msg}"
        );
        assert!(msg.contains("the loader path): cannot open"), "{msg}");
        assert!(msg.contains("NVSHMEM_LIBRARY"), "{msg}");
    }
}
