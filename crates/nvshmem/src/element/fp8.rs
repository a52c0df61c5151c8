//! 8-bit floats, which NVSHMEM has no functions for.
//!
//! Their reductions run in this crate's own kernels (compiled at run time with NVRTC); data
//! movement treats them as bytes. Each is one byte, `Pod`, and has the same layout as the CUDA
//! type the kernels use (`__nv_fp8_e4m3`, `__nv_fp8_e5m2`).
use std::fmt;

use cudarc::driver::{DeviceRepr, ValidAsZeroBits};

/// The parameters of one 8-bit float format.
struct Format {
    mantissa_bits: u32,
    bias: i32,
    /// Largest finite magnitude.
    max: f64,
    /// Whether all-ones exponent with zero mantissa is infinity (e5m2) or a number (e4m3fn).
    has_inf: bool,
}

const E4M3: Format = Format {
    mantissa_bits: 3,
    bias: 7,
    max: 448.0,
    has_inf: false,
};

const E5M2: Format = Format {
    mantissa_bits: 2,
    bias: 15,
    max: 57344.0,
    has_inf: true,
};

/// The canonical NaN both formats produce (all exponent and mantissa bits set), as CUDA does.
const NAN_BITS: u8 = 0x7F;

impl Format {
    fn exponent_bits(&self) -> u32 {
        7 - self.mantissa_bits
    }

    /// Smallest normal exponent.
    fn emin(&self) -> i32 {
        1 - self.bias
    }

    fn decode(&self, bits: u8) -> f64 {
        let m = self.mantissa_bits;
        let sign = if bits & 0x80 != 0 { -1.0 } else { 1.0 };
        let exp = ((bits & 0x7F) >> m) as i32;
        let mant = (bits & ((1 << m) - 1)) as i32;
        let all_ones = (1 << self.exponent_bits()) - 1;
        if exp == all_ones {
            if self.has_inf {
                return if mant == 0 {
                    sign * f64::INFINITY
                } else {
                    f64::NAN
                };
            }
            if mant == (1 << m) - 1 {
                return f64::NAN;
            }
        }
        let magnitude = if exp == 0 {
            mant as f64 * 2f64.powi(self.emin() - m as i32)
        } else {
            (1.0 + mant as f64 / (1 << m) as f64) * 2f64.powi(exp - self.bias)
        };
        sign * magnitude
    }

    /// Rounds to nearest, ties to even; magnitudes beyond the largest finite value (infinity
    /// included) saturate to it, and NaN stays NaN: CUDA's `__NV_SATFINITE` conversion, which is
    /// what `__nv_fp8_e4m3(float)` / `__nv_fp8_e5m2(float)` do in the kernels.
    fn encode(&self, x: f64) -> u8 {
        if x.is_nan() {
            return NAN_BITS;
        }
        let sign: u8 = if x.is_sign_negative() { 0x80 } else { 0 };
        let a = x.abs();
        let m = self.mantissa_bits as i32;
        // Binade of `a`, never below the subnormal range's.
        let e = if a >= 2f64.powi(self.emin()) {
            ((a.to_bits() >> 52) & 0x7FF) as i32 - 1023
        } else {
            self.emin()
        };
        let quantum = 2f64.powi(e - m);
        // Exact: dividing by a power of two; `a` is finite or saturates below.
        let rounded = (a / quantum).round_ties_even() * quantum;
        let v = if a.is_infinite() || rounded > self.max {
            self.max
        } else {
            rounded
        };
        if v == 0.0 {
            return sign;
        }
        let ve = ((v.to_bits() >> 52) & 0x7FF) as i32 - 1023;
        let bits = if ve < self.emin() {
            (v / 2f64.powi(self.emin() - m)) as u8
        } else {
            let mant = (v / 2f64.powi(ve - m)) as i32 - (1 << m);
            (((ve + self.bias) << m) | mant) as u8
        };
        sign | bits
    }
}

macro_rules! fp8 {
    ($(#[$doc:meta])* $name:ident, $fmt:expr, $label:literal) => {
        $(#[$doc])*
        #[repr(transparent)]
        #[derive(Clone, Copy, Default, bytemuck::Pod, bytemuck::Zeroable)]
        pub struct $name(u8);

        impl $name {
            /// The largest finite value.
            ///
            /// ```
            #[doc = concat!("use nvshmem::element::", $label, " as F8;")]
            /// assert_eq!(F8::from_f32(f32::INFINITY), F8::MAX);
            /// assert!(F8::from_f32(-1e9).to_f32() == -F8::MAX.to_f32());
            /// ```
            pub const MAX: Self = Self(0x7F - if $fmt.has_inf { 4 } else { 1 });
            /// The value with these bits.
            ///
            /// ```
            #[doc = concat!("use nvshmem::element::", $label, " as F8;")]
            /// assert_eq!(F8::from_bits(0x00).to_f32(), 0.0);
            /// assert_eq!(F8::from_bits(0x80).to_f32(), -0.0);
            /// assert_eq!(F8::from_bits(F8::MAX.to_bits()), F8::MAX);
            /// ```
            pub const fn from_bits(bits: u8) -> Self {
                Self(bits)
            }
            /// The bits.
            ///
            /// ```
            #[doc = concat!("use nvshmem::element::", $label, " as F8;")]
            /// assert_eq!(F8::from_f32(0.0).to_bits(), 0x00);
            /// assert_eq!(F8::from_f32(-0.0).to_bits(), 0x80); // the sign bit
            /// assert_eq!(F8::from_f32(-2.0).to_bits() & 0x80, 0x80);
            /// ```
            pub const fn to_bits(self) -> u8 {
                self.0
            }
            /// The nearest value (ties to even), saturating to +-[`Self::MAX`] beyond it
            /// (infinity included), NaN to NaN: as CUDA's conversion in the kernels.
            ///
            /// ```
            #[doc = concat!("use nvshmem::element::", $label, " as F8;")]
            /// assert_eq!(F8::from_f32(1.5).to_f32(), 1.5);
            /// assert_eq!(F8::from_f32(f32::NEG_INFINITY).to_f32(), -F8::MAX.to_f32());
            /// assert!(F8::from_f32(f32::NAN).is_nan());
            /// ```
            pub fn from_f32(x: f32) -> Self {
                Self($fmt.encode(x as f64))
            }
            /// As [`Self::from_f32`], rounding once from the `f64`.
            ///
            /// ```
            #[doc = concat!("use nvshmem::element::", $label, " as F8;")]
            /// assert_eq!(F8::from_f64(-0.75).to_f64(), -0.75);
            /// assert_eq!(F8::from_f64(1e300), F8::MAX);
            /// ```
            pub fn from_f64(x: f64) -> Self {
                Self($fmt.encode(x))
            }
            /// The exact value.
            ///
            /// ```
            #[doc = concat!("use nvshmem::element::", $label, " as F8;")]
            /// assert_eq!(F8::from_f32(0.25).to_f32(), 0.25);
            /// assert_eq!(f32::from(F8::from_f32(-4.0)), -4.0);
            /// ```
            pub fn to_f32(self) -> f32 {
                $fmt.decode(self.0) as f32
            }
            /// The exact value.
            ///
            /// ```
            #[doc = concat!("use nvshmem::element::", $label, " as F8;")]
            /// assert_eq!(F8::from_f32(3.0).to_f64(), 3.0);
            /// assert_eq!(F8::MAX.to_f64(), F8::MAX.to_f32() as f64);
            /// ```
            pub fn to_f64(self) -> f64 {
                $fmt.decode(self.0)
            }
            /// Whether it is NaN.
            ///
            /// ```
            #[doc = concat!("use nvshmem::element::", $label, " as F8;")]
            /// assert!(F8::from_f64(f64::NAN).is_nan());
            /// assert!(!F8::MAX.is_nan());
            /// assert_ne!(F8::from_f32(f32::NAN), F8::from_f32(f32::NAN)); // NaN is unequal to itself
            /// ```
            pub fn is_nan(self) -> bool {
                self.to_f64().is_nan()
            }
        }

        /// Compares values as IEEE floats do (NaN unequal to itself, -0 equal to +0).
        impl PartialEq for $name {
            fn eq(&self, other: &Self) -> bool {
                self.to_f64() == other.to_f64()
            }
        }

        impl PartialOrd for $name {
            fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
                self.to_f64().partial_cmp(&other.to_f64())
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}({})", $label, self.to_f32())
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Display::fmt(&self.to_f32(), f)
            }
        }

        impl From<$name> for f32 {
            fn from(x: $name) -> f32 {
                x.to_f32()
            }
        }

        // SAFETY: one byte with the layout of the CUDA type; every bit pattern is valid.
        unsafe impl DeviceRepr for $name {}
        // SAFETY: all-zero bits are +0.
        unsafe impl ValidAsZeroBits for $name {}
    };
}

fp8!(
    /// An 8-bit float with 4 exponent and 3 mantissa bits, OCP's `E4M3FN` (CUDA's
    /// `__nv_fp8_e4m3`): no infinities, largest finite 448, one NaN pattern per sign.
    ///
    /// ```
    /// use nvshmem::element::F8E4M3;
    /// assert_eq!(F8E4M3::from_f32(448.0).to_f32(), 448.0);
    /// assert_eq!(F8E4M3::from_f32(1e9), F8E4M3::MAX);
    /// ```
    F8E4M3,
    E4M3,
    "F8E4M3"
);

fp8!(
    /// An 8-bit float with 5 exponent and 2 mantissa bits (CUDA's `__nv_fp8_e5m2`): IEEE-like,
    /// with infinities, largest finite 57344.
    ///
    /// ```
    /// use nvshmem::element::F8E5M2;
    /// assert_eq!(F8E5M2::from_f32(57344.0).to_f32(), 57344.0);
    /// assert_eq!(F8E5M2::from_bits(0x7C).to_f32(), f32::INFINITY);
    /// ```
    F8E5M2,
    E5M2,
    "F8E5M2"
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn e4m3_known_values() {
        assert_eq!(F8E4M3::MAX.to_bits(), 0x7E);
        assert_eq!(F8E4M3::MAX.to_f32(), 448.0);
        assert_eq!(F8E4M3::from_f32(1.0).to_bits(), 0x38);
        assert_eq!(F8E4M3::from_f32(-2.0).to_bits(), 0xC0);
        assert_eq!(F8E4M3::from_bits(0x01).to_f64(), 2f64.powi(-9)); // smallest subnormal
        assert_eq!(F8E4M3::from_bits(0x08).to_f64(), 2f64.powi(-6)); // smallest normal
        assert!(F8E4M3::from_bits(0x7F).is_nan() && F8E4M3::from_bits(0xFF).is_nan());
        // 0x78 is 256 in e4m3fn (exponent all ones is still a number there).
        assert_eq!(F8E4M3::from_bits(0x78).to_f32(), 256.0);
    }

    #[test]
    fn e5m2_known_values() {
        assert_eq!(F8E5M2::MAX.to_bits(), 0x7B);
        assert_eq!(F8E5M2::MAX.to_f32(), 57344.0);
        assert_eq!(F8E5M2::from_f32(1.0).to_bits(), 0x3C);
        assert_eq!(F8E5M2::from_bits(0xFC).to_f32(), f32::NEG_INFINITY);
        assert!(F8E5M2::from_bits(0x7D).is_nan());
        assert_eq!(F8E5M2::from_bits(0x01).to_f64(), 2f64.powi(-16));
    }

    #[test]
    fn saturates_and_keeps_nan() {
        assert_eq!(F8E4M3::from_f32(464.0).to_f32(), 448.0);
        assert_eq!(F8E4M3::from_f32(1e6).to_f32(), 448.0);
        assert_eq!(F8E4M3::from_f32(f32::NEG_INFINITY).to_f32(), -448.0);
        assert_eq!(F8E5M2::from_f32(f32::INFINITY).to_f32(), 57344.0);
        assert_eq!(F8E5M2::from_f32(-70000.0).to_f32(), -57344.0);
        assert!(F8E4M3::from_f32(f32::NAN).is_nan());
        assert!(F8E5M2::from_f32(f32::NAN).is_nan());
        assert_ne!(F8E4M3::from_f32(f32::NAN), F8E4M3::from_f32(f32::NAN));
    }

    #[test]
    fn rounds_to_nearest_even() {
        // Halfway between 1 (mantissa 000) and 1.125 (001): to 1.
        assert_eq!(F8E4M3::from_f32(1.0625).to_f32(), 1.0);
        // Halfway between 1.125 (001) and 1.25 (010): to 1.25.
        assert_eq!(F8E4M3::from_f32(1.1875).to_f32(), 1.25);
        assert_eq!(F8E4M3::from_f32(1.07).to_f32(), 1.125);
        // Subnormals: half the smallest rounds to 0 (even), 1.5 of it to 2 of it.
        assert_eq!(F8E4M3::from_f64(2f64.powi(-10)).to_bits(), 0);
        assert_eq!(F8E4M3::from_f64(1.5 * 2f64.powi(-9)).to_bits(), 0x02);
        assert_eq!(F8E4M3::from_f64(-2f64.powi(-12)).to_bits(), 0x80);
        // e5m2: halfway between 1 and 1.25 -> 1; between 1.25 and 1.5 -> 1.5.
        assert_eq!(F8E5M2::from_f32(1.125).to_f32(), 1.0);
        assert_eq!(F8E5M2::from_f32(1.375).to_f32(), 1.5);
        // Rounding carries into the next binade: 1.96875 -> 2 in e4m3.
        assert_eq!(F8E4M3::from_f32(1.96875).to_f32(), 2.0);
    }

    #[test]
    fn every_bit_pattern_round_trips() {
        for b in 0..=255u8 {
            for (x, back) in [
                (
                    F8E4M3::from_bits(b).to_f32(),
                    F8E4M3::from_f32(F8E4M3::from_bits(b).to_f32()).to_bits(),
                ),
                (
                    F8E5M2::from_bits(b).to_f32(),
                    F8E5M2::from_f32(F8E5M2::from_bits(b).to_f32()).to_bits(),
                ),
            ] {
                if x.is_nan() {
                    assert_eq!(back, NAN_BITS, "{b:#x}");
                } else if x.is_infinite() {
                    // Saturating conversion: infinity goes to the largest finite value.
                    assert_eq!(back & 0x7F, 0x7B, "{b:#x}");
                } else {
                    assert_eq!(back, b, "{b:#x} = {x}");
                }
            }
        }
    }
}
