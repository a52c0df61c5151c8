//! The settings a runtime judges before NVSHMEM starts, each from its variable, else the
//! builder, else the default: the timeout, the check of calls, the heap size; and the one way
//! the runtime sets NVSHMEM's environment ([`set_env`]).
use std::time::Duration;

use tracing::debug;

#[cfg(doc)]
use super::RuntimeBuilder;
use super::{health, DEFAULT_TIMEOUT, TIMEOUT_VAR};
use crate::{Error, Result};

/// NVSHMEM's default symmetric heap size (1 GiB), used when neither the builder nor
/// `NVSHMEM_SYMMETRIC_SIZE` sets one.
///
/// ```no_run
/// # std::env::remove_var("NVSHMEM_SYMMETRIC_SIZE");
/// let rt = nvshmem::Runtime::init()?;
/// assert_eq!(rt.info().heap_size, nvshmem::runtime::DEFAULT_HEAP_SIZE);
/// # Ok::<(), nvshmem::Error>(())
/// ```
pub const DEFAULT_HEAP_SIZE: usize = 1 << 30;

/// The environment variable that turns the NVLink kernels' check of mismatched calls on (`1`),
/// on and also before NVSHMEM's collectives on peer-mapped teams (`2`), or off (`0`); it
/// overrides [`RuntimeBuilder::check_calls`] and [`RuntimeBuilder::check_nvshmem_calls`].
///
/// ```
/// assert_eq!(nvshmem::runtime::CHECK_CALLS_VAR, "NVSHMEM_RS_CHECK_CALLS");
/// ```
pub const CHECK_CALLS_VAR: &str = "NVSHMEM_RS_CHECK_CALLS";

/// The variable that lets a job share its GPUs unevenly all the same (`1`): for an NVSHMEM
/// release that starts such a job (3.4.5 does not: [`Error::UnevenGpuSharing`]).
pub(crate) const ALLOW_UNEVEN_VAR: &str = "NVSHMEM_RS_ALLOW_UNEVEN_SHARING";

/// Whether [`ALLOW_UNEVEN_VAR`] is set to `1` (`0` or unset: no; anything else is refused).
pub(super) fn allow_uneven_sharing() -> Result<bool> {
    let allow = Error::from_env(ALLOW_UNEVEN_VAR, |v| match v.trim() {
        "" | "0" => Ok(false),
        "1" => Ok(true),
        _ => Err("expected 1 (start all the same) or 0".into()),
    })?;
    Ok(allow.unwrap_or(false))
}

/// The timeout: [`TIMEOUT_VAR`]'s, else the builder's, else [`DEFAULT_TIMEOUT`].
pub(super) fn choose_timeout(requested: Option<Option<Duration>>) -> Result<Option<Duration>> {
    let set = Error::from_env(TIMEOUT_VAR, health::parse_timeout)?;
    Ok(set.unwrap_or_else(|| requested.unwrap_or(Some(DEFAULT_TIMEOUT))))
}

/// How the kernels check calls (0 off, 1 on, 2 also NVSHMEM's collectives):
/// [`CHECK_CALLS_VAR`]'s, else the builder's, else on.
pub(super) fn choose_check_calls(requested: Option<u32>) -> Result<u32> {
    let set = Error::from_env(CHECK_CALLS_VAR, parse_check_calls)?;
    Ok(set.unwrap_or_else(|| requested.unwrap_or(1)))
}

fn parse_check_calls(v: &str) -> std::result::Result<u32, String> {
    match v.trim().to_ascii_lowercase().as_str() {
        "2" | "all" => Ok(2),
        "1" | "on" | "true" | "yes" => Ok(1),
        "0" | "off" | "false" | "no" => Ok(0),
        _ => Err("expected 1 (check calls), 2 (NVSHMEM's collectives too) or 0 (do not)".into()),
    }
}

/// The heap size: the builder's, else `NVSHMEM_SYMMETRIC_SIZE`, else NVSHMEM's default. The
/// chosen size is written to `NVSHMEM_SYMMETRIC_SIZE` so NVSHMEM and we agree on it.
pub(super) fn choose_heap_size(requested: Option<usize>) -> Result<usize> {
    let size = heap_size(
        requested,
        std::env::var("NVSHMEM_SYMMETRIC_SIZE").ok().as_deref(),
    )?;
    // SAFETY: called from `start` before NVSHMEM starts, under the runtime's lock (see
    // `set_env`).
    unsafe { set_env("NVSHMEM_SYMMETRIC_SIZE", &size.to_string()) };
    Ok(size)
}

/// The heap size from the builder's request and the value of `NVSHMEM_SYMMETRIC_SIZE`
/// (`None`: unset, or not Unicode).
pub(super) fn heap_size(requested: Option<usize>, env: Option<&str>) -> Result<usize> {
    Ok(match (requested, env) {
        (Some(0), _) => {
            return Err(Error::arg(
                "RuntimeBuilder::heap_size",
                "bytes",
                "must be above 0",
            ))
        }
        (Some(bytes), _) => bytes,
        (None, Some(v)) => parse_size(v).ok_or_else(|| Error::Environment {
            var: "NVSHMEM_SYMMETRIC_SIZE".into(),
            value: v.into(),
            reason: "expected a byte count such as 1073741824, 512M or 2G".into(),
        })?,
        (None, None) => DEFAULT_HEAP_SIZE,
    })
}

/// Parses NVSHMEM's size syntax: a number with an optional K, M, G or T suffix (powers of
/// 1024), as `NVSHMEM_SYMMETRIC_SIZE` and nvshmem-perf's sizes are written.
///
/// ```
/// use nvshmem::runtime::parse_size;
/// assert_eq!(parse_size("512M"), Some(512 << 20));
/// assert_eq!(parse_size("4096"), Some(4096));
/// assert_eq!(parse_size("0"), None);
/// ```
pub fn parse_size(s: &str) -> Option<usize> {
    let s = s.trim();
    let (digits, shift) = match s.chars().last()?.to_ascii_uppercase() {
        'K' => (&s[..s.len() - 1], 10),
        'M' => (&s[..s.len() - 1], 20),
        'G' => (&s[..s.len() - 1], 30),
        'T' => (&s[..s.len() - 1], 40),
        _ => (s, 0),
    };
    let n: usize = digits.trim().parse().ok()?;
    n.checked_mul(1usize << shift).filter(|n| *n > 0)
}

/// Sets a variable NVSHMEM reads at initialisation (it reads its configuration only from the
/// environment). Skipped when the variable already has the value.
///
/// # Safety
/// No other thread reads or writes the environment during the call (`std::env::set_var`
/// races with `getenv` in C code, NVSHMEM's and MPI's included). The runtime calls it only
/// while starting, under its lock, and [`RuntimeBuilder::init`] documents that requirement.
pub(super) unsafe fn set_env(key: &str, value: &str) {
    if std::env::var(key).is_ok_and(|v| v == value) {
        return;
    }
    debug!(key, value, "setting NVSHMEM's environment");
    std::env::set_var(key, value);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_call_check_switch_parses() {
        assert_eq!(parse_check_calls("1"), Ok(1));
        assert_eq!(parse_check_calls(" off "), Ok(0));
        assert_eq!(parse_check_calls("0"), Ok(0));
        assert_eq!(parse_check_calls("2"), Ok(2));
        assert!(parse_check_calls("maybe").is_err());
    }

    #[test]
    fn sizes_parse_like_nvshmem() {
        assert_eq!(parse_size("1024"), Some(1024));
        assert_eq!(parse_size("512M"), Some(512 << 20));
        assert_eq!(parse_size("2g"), Some(2 << 30));
        assert_eq!(parse_size("1T"), Some(1 << 40));
        assert_eq!(parse_size("0"), None);
        assert_eq!(parse_size("G"), None);
        assert_eq!(parse_size("lots"), None);
        assert_eq!(parse_size("99999999999999999999T"), None);
    }
}
