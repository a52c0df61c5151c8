//! The element types a symmetric array can hold.
use std::fmt;

use cudarc::driver::{DeviceRepr, ValidAsZeroBits};

mod sealed {
    pub trait Sealed {}
}

/// What kind of number an element is; decides which operators apply to it.
///
/// ```
/// use nvshmem::{element_ext::Bool8, Element, ElementKind};
/// assert_eq!(<half::f16 as Element>::KIND, ElementKind::Float);
/// assert_eq!(<i8 as Element>::KIND, ElementKind::Signed);
/// assert_eq!(<u64 as Element>::KIND, ElementKind::Unsigned);
/// assert_eq!(<Bool8 as Element>::KIND, ElementKind::Bool);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ElementKind {
    /// IEEE or brain floating point.
    Float,
    /// Two's-complement signed integer.
    Signed,
    /// Unsigned integer.
    Unsigned,
    /// Truth value ([`Bool8`](crate::element_ext::Bool8)): logical and/or, min/max.
    Bool,
}

/// An element type NVSHMEM can hold in symmetric memory and compute on.
///
/// Sealed: implemented for `f32`, `f64`, [`half::f16`], [`half::bf16`], `i8`..`i64`,
/// `u8`..`u64` ([`for_each_element!`](crate::for_each_element)) and for the types NVSHMEM has
/// no arithmetic on, [`F8E4M3`], [`F8E5M2`] and [`Bool8`]
/// ([`for_each_extra_element!`](crate::for_each_extra_element)). The constants name the type
/// in Rust, in CUDA C and in NVSHMEM's function names
/// (`nvshmemx_<NVSHMEM_NAME>_sum_reduce_on_stream`).
///
/// [`F8E4M3`]: crate::element_ext::F8E4M3
/// [`F8E5M2`]: crate::element_ext::F8E5M2
/// [`Bool8`]: crate::element_ext::Bool8
///
/// ```
/// use nvshmem::{Element, ElementKind};
/// assert_eq!(<half::bf16 as Element>::NVSHMEM_NAME, "bfloat16");
/// assert_eq!(<u16 as Element>::KIND, ElementKind::Unsigned);
/// assert_eq!(<f32 as Element>::from_f64(1.5).to_f64(), 1.5);
/// ```
pub trait Element:
    sealed::Sealed
    + Copy
    + Default
    + PartialEq
    + fmt::Debug
    + DeviceRepr
    + ValidAsZeroBits
    + bytemuck::Pod
    + Send
    + Sync
    + 'static
    + crate::collective::NvshmemTyped
{
    /// The Rust name (`"f32"`, `"bf16"`, ...), as the CLI and reports spell it.
    const NAME: &'static str;
    /// The CUDA C type (`"float"`, `"__nv_bfloat16"`, ...), for run-time compiled kernels.
    const C_TYPE: &'static str;
    /// NVSHMEM's name for the type in its typed functions: `"uint8"` for `Bool8`, whose
    /// reductions run on NVSHMEM's `uint8` min/max; `"fp8_e4m3"`/`"fp8_e5m2"` for the 8-bit
    /// floats, for which NVSHMEM has no functions (their reductions run in this crate's
    /// kernels).
    const NVSHMEM_NAME: &'static str;
    /// What kind of number it is.
    const KIND: ElementKind;

    /// The value as an `f64` (exact for every type but 64-bit integers beyond 2^53).
    fn to_f64(self) -> f64;
    /// The nearest value of this type (saturating for integers and 8-bit floats; for `Bool8`,
    /// any non-zero value is true).
    fn from_f64(v: f64) -> Self;
}

macro_rules! element {
    ($t:ty, $name:expr, $c:literal, $nv:literal, $kind:ident, $to:expr, $from:expr) => {
        impl sealed::Sealed for $t {}
        impl Element for $t {
            const NAME: &'static str = $name;
            const C_TYPE: &'static str = $c;
            const NVSHMEM_NAME: &'static str = $nv;
            const KIND: ElementKind = ElementKind::$kind;
            #[inline]
            fn to_f64(self) -> f64 {
                ($to)(self)
            }
            #[inline]
            fn from_f64(v: f64) -> Self {
                ($from)(v)
            }
        }
    };
    ($t:ident, $c:literal, $nv:literal, $kind:ident) => {
        element!(
            $t,
            stringify!($t),
            $c,
            $nv,
            $kind,
            |x: $t| x as f64,
            |v: f64| v as $t
        );
    };
}

element!(f32, "float", "float", Float);
element!(f64, "double", "double", Float);
element!(
    half::f16,
    "f16",
    "__half",
    "half",
    Float,
    |x: half::f16| x.to_f64(),
    half::f16::from_f64
);
element!(
    half::bf16,
    "bf16",
    "__nv_bfloat16",
    "bfloat16",
    Float,
    |x: half::bf16| x.to_f64(),
    half::bf16::from_f64
);
element!(i8, "signed char", "int8", Signed);
element!(i16, "short", "int16", Signed);
element!(i32, "int", "int32", Signed);
element!(i64, "long long", "int64", Signed);
element!(u8, "unsigned char", "uint8", Unsigned);
element!(u16, "unsigned short", "uint16", Unsigned);
element!(u32, "unsigned int", "uint32", Unsigned);
element!(u64, "unsigned long long", "uint64", Unsigned);
element!(
    crate::element_ext::F8E4M3,
    "f8e4m3",
    "__nv_fp8_e4m3",
    "fp8_e4m3",
    Float,
    |x: crate::element_ext::F8E4M3| x.to_f64(),
    crate::element_ext::F8E4M3::from_f64
);
element!(
    crate::element_ext::F8E5M2,
    "f8e5m2",
    "__nv_fp8_e5m2",
    "fp8_e5m2",
    Float,
    |x: crate::element_ext::F8E5M2| x.to_f64(),
    crate::element_ext::F8E5M2::from_f64
);
element!(
    crate::element_ext::Bool8,
    "bool8",
    "unsigned char",
    "uint8",
    Bool,
    |x: crate::element_ext::Bool8| if x.get() { 1.0 } else { 0.0 },
    |v: f64| crate::element_ext::Bool8::from(v != 0.0)
);

/// Calls `$m!(T)` once for every [`Element`] type NVSHMEM computes on itself (the 12 numeric
/// types); [`for_each_extra_element!`](crate::for_each_extra_element) lists the others. The
/// lists to extend when a type is added.
///
/// ```
/// let mut bytes = Vec::new();
/// macro_rules! size {
///     ($t:ty) => {
///         bytes.push(std::mem::size_of::<$t>())
///     };
/// }
/// nvshmem::for_each_element!(size);
/// assert_eq!(bytes, [4, 8, 2, 2, 1, 2, 4, 8, 1, 2, 4, 8]);
/// ```
#[macro_export]
macro_rules! for_each_element {
    ($m:ident) => {
        $m!(f32);
        $m!(f64);
        $m!(half::f16);
        $m!(half::bf16);
        $m!(i8);
        $m!(i16);
        $m!(i32);
        $m!(i64);
        $m!(u8);
        $m!(u16);
        $m!(u32);
        $m!(u64);
    };
}

/// Calls `$m!(T)` once for each [`Element`] type NVSHMEM has no arithmetic on:
/// [`Bool8`](crate::element_ext::Bool8), [`F8E4M3`](crate::element_ext::F8E4M3) and
/// [`F8E5M2`](crate::element_ext::F8E5M2) (reductions in this crate's kernels or on NVSHMEM's
/// bytes; data movement byte-wise as for every type).
///
/// ```
/// let mut names = Vec::new();
/// macro_rules! name {
///     ($t:ty) => {
///         names.push(<$t as nvshmem::Element>::NAME)
///     };
/// }
/// nvshmem::for_each_extra_element!(name);
/// assert_eq!(names, ["bool8", "f8e4m3", "f8e5m2"]);
/// ```
#[macro_export]
macro_rules! for_each_extra_element {
    ($m:ident) => {
        $m!($crate::element_ext::Bool8);
        $m!($crate::element_ext::F8E4M3);
        $m!($crate::element_ext::F8E5M2);
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check<T: Element>(size: usize, nv: &str, kind: ElementKind) {
        assert_eq!(std::mem::size_of::<T>(), size, "{}", T::NAME);
        assert_eq!(T::NVSHMEM_NAME, nv);
        assert_eq!(T::KIND, kind);
        assert_eq!(T::from_f64(3.0).to_f64(), 3.0, "{}", T::NAME);
    }

    #[test]
    fn every_type_maps_to_nvshmem() {
        check::<f32>(4, "float", ElementKind::Float);
        check::<f64>(8, "double", ElementKind::Float);
        check::<half::f16>(2, "half", ElementKind::Float);
        check::<half::bf16>(2, "bfloat16", ElementKind::Float);
        check::<i8>(1, "int8", ElementKind::Signed);
        check::<i16>(2, "int16", ElementKind::Signed);
        check::<i32>(4, "int32", ElementKind::Signed);
        check::<i64>(8, "int64", ElementKind::Signed);
        check::<u8>(1, "uint8", ElementKind::Unsigned);
        check::<u16>(2, "uint16", ElementKind::Unsigned);
        check::<u32>(4, "uint32", ElementKind::Unsigned);
        check::<u64>(8, "uint64", ElementKind::Unsigned);
        use crate::element_ext::{Bool8, F8E4M3, F8E5M2};
        check::<F8E4M3>(1, "fp8_e4m3", ElementKind::Float);
        check::<F8E5M2>(1, "fp8_e5m2", ElementKind::Float);
        assert_eq!(<F8E4M3 as Element>::C_TYPE, "__nv_fp8_e4m3");
        assert_eq!(<F8E5M2 as Element>::C_TYPE, "__nv_fp8_e5m2");
        assert_eq!(std::mem::size_of::<Bool8>(), 1);
        assert_eq!(<Bool8 as Element>::KIND, ElementKind::Bool);
        assert_eq!(<Bool8 as Element>::NVSHMEM_NAME, "uint8");
    }

    #[test]
    fn extra_types_convert_through_f64() {
        use crate::element_ext::{Bool8, F8E4M3, F8E5M2};
        assert_eq!(<Bool8 as Element>::from_f64(0.0).to_bits(), 0);
        assert_eq!(<Bool8 as Element>::from_f64(-2.0).to_bits(), 1);
        assert_eq!(Element::to_f64(Bool8::from_bits(9)), 1.0);
        assert_eq!(Element::to_f64(Bool8::FALSE), 0.0);
        assert_eq!(<F8E4M3 as Element>::from_f64(0.25).to_f64(), 0.25);
        assert_eq!(<F8E4M3 as Element>::from_f64(1e9).to_f64(), 448.0);
        assert_eq!(<F8E5M2 as Element>::from_f64(-1.75).to_f64(), -1.75);
    }

    #[test]
    fn integer_conversion_saturates() {
        assert_eq!(i8::from_f64(1000.0), i8::MAX);
        assert_eq!(u8::from_f64(-3.0), 0);
        assert_eq!(<half::bf16 as Element>::from_f64(1.0).to_f64(), 1.0);
    }

    #[test]
    fn the_type_list_covers_every_element() {
        let mut names = Vec::new();
        macro_rules! push {
            ($t:ty) => {
                names.push(<$t as Element>::NAME)
            };
        }
        for_each_element!(push);
        assert_eq!(names.len(), 12);
        assert!(
            names.contains(&"bf16") && names.contains(&"u64"),
            "{names:?}"
        );
        for_each_extra_element!(push);
        assert_eq!(names.len(), 15);
    }
}
