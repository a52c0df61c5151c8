//! A one-byte boolean, the form the kernels read and write.
use std::fmt;

use cudarc::driver::{DeviceRepr, ValidAsZeroBits};

/// A boolean stored as one byte, 0 or 1, the form the kernels read and write (Rust's `bool`
/// cannot be `Pod`: only two of its 256 bit patterns are valid). Any non-zero byte read back
/// counts as true.
///
/// ```
/// use nvshmem::element::Bool8;
/// assert!(Bool8::from(true).get());
/// assert_eq!(Bool8::from_bits(7), Bool8::TRUE);
/// ```
#[repr(transparent)]
#[derive(Clone, Copy, Default, bytemuck::Pod, bytemuck::Zeroable)]
pub struct Bool8(u8);

impl Bool8 {
    /// False (0).
    ///
    /// ```
    /// use nvshmem::element::Bool8;
    /// assert_eq!(Bool8::FALSE, Bool8::default());
    /// assert!(!Bool8::FALSE.get());
    /// ```
    pub const FALSE: Self = Self(0);
    /// True (1).
    ///
    /// ```
    /// use nvshmem::element::Bool8;
    /// assert_eq!(Bool8::TRUE, Bool8::from(true));
    /// assert_eq!(Bool8::TRUE.to_bits(), 1);
    /// ```
    pub const TRUE: Self = Self(1);
    /// The value with this byte (non-zero is true).
    ///
    /// ```
    /// use nvshmem::element::Bool8;
    /// assert_eq!(Bool8::from_bits(0), Bool8::FALSE);
    /// assert_eq!(Bool8::from_bits(0xFF), Bool8::TRUE);
    /// ```
    pub const fn from_bits(bits: u8) -> Self {
        Self(bits)
    }
    /// The byte as stored.
    ///
    /// ```
    /// use nvshmem::element::Bool8;
    /// assert_eq!(Bool8::from(false).to_bits(), 0);
    /// assert_eq!(Bool8::from_bits(7).to_bits(), 7); // kept as read, though it equals TRUE
    /// ```
    pub const fn to_bits(self) -> u8 {
        self.0
    }
    /// The boolean.
    ///
    /// ```
    /// use nvshmem::element::Bool8;
    /// assert!(Bool8::from_bits(2).get());
    /// assert!(!Bool8::from(false).get());
    /// ```
    pub const fn get(self) -> bool {
        self.0 != 0
    }

    /// 1.0 for true, 0.0 for false ([`Element::to_f64`](crate::Element::to_f64)).
    pub(crate) fn to_f64(self) -> f64 {
        if self.get() {
            1.0
        } else {
            0.0
        }
    }

    /// True for any non-zero value ([`Element::from_f64`](crate::Element::from_f64)).
    pub(crate) fn from_f64(v: f64) -> Self {
        Self::from(v != 0.0)
    }
}

impl From<bool> for Bool8 {
    fn from(b: bool) -> Self {
        Self(b as u8)
    }
}

impl From<Bool8> for bool {
    fn from(b: Bool8) -> bool {
        b.get()
    }
}

/// Compares truth values, so any non-zero byte equals [`Bool8::TRUE`].
impl PartialEq for Bool8 {
    fn eq(&self, other: &Self) -> bool {
        self.get() == other.get()
    }
}

impl Eq for Bool8 {}

impl fmt::Debug for Bool8 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Bool8({})", self.get())
    }
}

// SAFETY: one byte; every bit pattern is a valid (truthy or false) value.
unsafe impl DeviceRepr for Bool8 {}
// SAFETY: zero is false.
unsafe impl ValidAsZeroBits for Bool8 {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bool8_is_a_truth_value() {
        assert_eq!(Bool8::from(false).to_bits(), 0);
        assert_eq!(Bool8::from(true).to_bits(), 1);
        assert_eq!(Bool8::from_bits(2), Bool8::TRUE);
        assert!(!bool::from(Bool8::default()));
        assert_eq!(std::mem::size_of::<Bool8>(), 1);
    }
}
