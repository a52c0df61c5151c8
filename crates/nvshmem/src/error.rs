//! The one error type of this crate.
use std::fmt;

/// What went wrong. Every fallible call of this crate returns it; variants carry the call,
/// the argument and the numbers involved, so a message says what to change.
///
/// ```
/// use nvshmem::Error;
/// let e = Error::InvalidArgument { call: "split_strided", arg: "stride", reason: "must not be 0".into() };
/// assert_eq!(e.to_string(), "split_strided: invalid stride: must not be 0");
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// NVSHMEM's host library could not be found or loaded.
    #[error(transparent)]
    Load(#[from] nvshmem_sys::LoadError),

    /// The process has no usable NVIDIA GPU or CUDA driver.
    #[error("this program needs an NVIDIA GPU and its driver: {0}")]
    NoGpu(String),

    /// A CUDA driver call failed.
    #[error("CUDA error in {call}: {source}")]
    Cuda {
        /// What was being done.
        call: &'static str,
        /// The driver's error.
        #[source]
        source: cudarc::driver::DriverError,
    },

    /// An NVSHMEM call returned a non-zero status.
    #[error("NVSHMEM error in {call}: status {status}{}", describe_status(*.status))]
    Nvshmem {
        /// The NVSHMEM function.
        call: &'static str,
        /// Its return value.
        status: i32,
    },

    /// An MPI call failed.
    #[error("MPI error in {call}: {detail}")]
    Mpi {
        /// What was being done.
        call: &'static str,
        /// What MPI said.
        detail: String,
    },

    /// Bootstrapping NVSHMEM (finding rank, size, exchanging the unique id) failed.
    #[error("bootstrap ({bootstrap}) failed: {detail}")]
    Bootstrap {
        /// The bootstrap in use.
        bootstrap: String,
        /// What failed.
        detail: String,
    },

    /// NVSHMEM was already initialised in this process (by us or by someone else).
    #[error(
        "NVSHMEM is already initialised in this process ({0}); it can be initialised only once"
    )]
    AlreadyInitialized(&'static str),

    /// The runtime was finalised explicitly while handles still used it.
    #[error("the runtime cannot be finalised while {0} other handles (arrays, teams, timers) still use it")]
    RuntimeInUse(usize),

    /// The symmetric heap has no room for an allocation.
    #[error("symmetric heap exhausted: {requested} bytes requested, {in_use} of {heap_size} bytes in use")]
    OutOfHeap {
        /// Bytes asked for.
        requested: usize,
        /// Bytes already allocated through this runtime.
        in_use: usize,
        /// The heap size the runtime was started with.
        heap_size: usize,
    },

    /// An argument is out of range or inconsistent with another.
    #[error("{call}: invalid {arg}: {reason}")]
    InvalidArgument {
        /// The call that refused it.
        call: &'static str,
        /// The argument's name.
        arg: &'static str,
        /// Why, with the numbers.
        reason: String,
    },

    /// The operation is valid but no algorithm for it is available yet (for example an
    /// operator NVSHMEM lacks, before a run-time compiled kernel provides it).
    #[error("{call}: {what} is not supported yet")]
    Unsupported {
        /// The call that refused it.
        call: &'static str,
        /// What is missing, with the type and operator.
        what: String,
    },

    /// A collective needs more of the runtime's collective scratch than is reserved.
    #[error("{call} needs {needed} bytes of collective scratch but {reserved} are reserved: call Runtime::reserve_scratch({needed}) on every PE first")]
    ScratchTooSmall {
        /// The call that needs it.
        call: &'static str,
        /// Bytes it needs.
        needed: usize,
        /// Bytes reserved now.
        reserved: usize,
    },

    /// NVRTC, or the CUDA headers its kernels include, could not be found.
    #[error("run-time kernel compilation is unavailable: {0}")]
    Nvrtc(String),

    /// NVRTC refused one of this crate's kernels (a bug in the crate or an NVRTC too old
    /// or too new for it).
    #[error("NVRTC failed to compile kernel {kernel}:\n{log}")]
    Compile {
        /// The kernel instantiation, e.g. `reduce_f8e4m3_sum`.
        kernel: String,
        /// NVRTC's log and the options used.
        log: String,
    },

    /// An environment variable has a value that cannot be used.
    #[error("environment variable {var}={value:?}: {reason}")]
    Environment {
        /// The variable.
        var: String,
        /// Its value.
        value: String,
        /// Why it cannot be used.
        reason: String,
    },
}

/// Shorthand for this crate's results.
///
/// ```
/// use nvshmem::{Bootstrap, Result};
/// fn bootstrap(name: &str) -> Result<Bootstrap> {
///     name.parse()
/// }
/// assert_eq!(bootstrap("pmix")?, Bootstrap::Pmix);
/// assert!(bootstrap("carrier-pigeon").is_err());
/// # Ok::<(), nvshmem::Error>(())
/// ```
pub type Result<T, E = Error> = std::result::Result<T, E>;

fn describe_status(status: i32) -> &'static str {
    match status as u32 {
        nvshmem_sys::NVSHMEMX_ERROR_INVALID_VALUE => " (invalid value)",
        nvshmem_sys::NVSHMEMX_ERROR_OUT_OF_MEMORY => " (out of memory)",
        nvshmem_sys::NVSHMEMX_ERROR_NOT_SUPPORTED => " (not supported)",
        nvshmem_sys::NVSHMEMX_ERROR_SYMMETRY => " (symmetry violated)",
        nvshmem_sys::NVSHMEMX_ERROR_GPU_NOT_SELECTED => " (no GPU selected)",
        nvshmem_sys::NVSHMEMX_ERROR_COLLECTIVE_LAUNCH_FAILED => " (collective launch failed)",
        nvshmem_sys::NVSHMEMX_ERROR_INTERNAL => " (internal error)",
        _ => "",
    }
}

impl Error {
    /// Shorthand for [`Error::InvalidArgument`].
    pub(crate) fn arg(call: &'static str, arg: &'static str, reason: impl fmt::Display) -> Self {
        Error::InvalidArgument {
            call,
            arg,
            reason: reason.to_string(),
        }
    }

    /// Wraps a CUDA driver error with the call it came from.
    pub(crate) fn cuda(call: &'static str) -> impl FnOnce(cudarc::driver::DriverError) -> Self {
        move |source| Error::Cuda { call, source }
    }
}

/// Turns an NVSHMEM status into a `Result`.
pub(crate) fn check(call: &'static str, status: i32) -> Result<()> {
    if status == 0 {
        Ok(())
    } else {
        Err(Error::Nvshmem { call, status })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nvshmem_status_is_named() {
        let e = check("nvshmemx_float_sum_reduce_on_stream", 2).unwrap_err();
        assert_eq!(
            e.to_string(),
            "NVSHMEM error in nvshmemx_float_sum_reduce_on_stream: status 2 (out of memory)"
        );
        assert!(check("x", 0).is_ok());
    }

    #[test]
    fn out_of_heap_gives_the_numbers() {
        let e = Error::OutOfHeap {
            requested: 10,
            in_use: 20,
            heap_size: 25,
        };
        assert_eq!(
            e.to_string(),
            "symmetric heap exhausted: 10 bytes requested, 20 of 25 bytes in use"
        );
    }
}
