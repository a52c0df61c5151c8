//! The comparison of a signal word with a value ([`Cmp`], named `nvshmem::rma::Cmp`), kept
//! apart from [`crate::rma`] because [`crate::Error`] names it and every layer returns that:
//! it uses no other part of the crate (its parsing, which returns an `Error`, is in `rma.rs`).
use std::{fmt, os::raw::c_int};

/// A comparison of a signal word with a value, for [`Runtime::signal_wait_until`](crate::Runtime::signal_wait_until).
///
/// ```
/// use nvshmem::rma::Cmp;
/// assert_eq!("ge".parse::<Cmp>()?, Cmp::Ge);
/// assert_eq!(Cmp::Ne.to_string(), "ne");
/// # Ok::<(), nvshmem::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Cmp {
    /// Equal.
    Eq,
    /// Not equal.
    Ne,
    /// Greater than.
    Gt,
    /// Greater than or equal.
    Ge,
    /// Less than.
    Lt,
    /// Less than or equal.
    Le,
}

impl Cmp {
    /// NVSHMEM's number for the comparison (`NVSHMEM_CMP_*`).
    pub(crate) fn raw(self) -> c_int {
        (match self {
            Cmp::Eq => nvshmem_sys::NVSHMEM_CMP_EQ,
            Cmp::Ne => nvshmem_sys::NVSHMEM_CMP_NE,
            Cmp::Gt => nvshmem_sys::NVSHMEM_CMP_GT,
            Cmp::Ge => nvshmem_sys::NVSHMEM_CMP_GE,
            Cmp::Lt => nvshmem_sys::NVSHMEM_CMP_LT,
            Cmp::Le => nvshmem_sys::NVSHMEM_CMP_LE,
        }) as c_int
    }

    /// The comparison of NVSHMEM's number (`NVSHMEM_CMP_*`), as a kernel recorded it.
    pub(crate) fn from_raw(raw: u32) -> Option<Cmp> {
        [Cmp::Eq, Cmp::Ne, Cmp::Gt, Cmp::Ge, Cmp::Lt, Cmp::Le]
            .into_iter()
            .find(|c| c.raw() as u32 == raw)
    }

    fn name(self) -> &'static str {
        match self {
            Cmp::Eq => "eq",
            Cmp::Ne => "ne",
            Cmp::Gt => "gt",
            Cmp::Ge => "ge",
            Cmp::Lt => "lt",
            Cmp::Le => "le",
        }
    }
}

impl fmt::Display for Cmp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
