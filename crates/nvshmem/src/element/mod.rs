//! The element types a symmetric array can hold.
//!
//! They are listed once, in [`__element_list!`](crate::__element_list): the [`Element`] impls,
//! [`DataType`], NVSHMEM's typed function table, the kernels' CUDA type names and the
//! benchmark's `-d` choices all derive from that list, so adding a type is one line there
//! (and the compiler then points at every `match` on [`DataType`] that must learn it).
use std::{fmt, str::FromStr};

use cudarc::driver::{DeviceRepr, ValidAsZeroBits};

mod bool8;
mod fp8;

pub use bool8::Bool8;
pub use fp8::{F8E4M3, F8E5M2};

use crate::{Error, Result};

mod sealed {
    pub trait Sealed {}
}

/// What kind of number an element is; decides which operators apply to it.
///
/// ```
/// use nvshmem::{element::Bool8, Element, ElementKind};
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
    /// Truth value ([`Bool8`]): logical and/or, min/max.
    Bool,
}

/// An element type symmetric arrays hold and collectives compute on.
///
/// Sealed: implemented for `f32`, `f64`, [`half::f16`], [`half::bf16`], `i8`..`i64`,
/// `u8`..`u64` ([`for_each_element!`](crate::for_each_element)), and for the types NVSHMEM has
/// no arithmetic on, [`F8E4M3`], [`F8E5M2`] and [`Bool8`]
/// ([`for_each_extra_element!`](crate::for_each_extra_element)). [`Element::DTYPE`] names the
/// type at run time; the other constants are its names in Rust, in CUDA C and in NVSHMEM's
/// function names (`nvshmemx_<NVSHMEM_NAME>_sum_reduce_on_stream`).
///
/// ```
/// use nvshmem::{DataType, Element, ElementKind};
/// assert_eq!(<half::bf16 as Element>::NVSHMEM_NAME, "bfloat16");
/// assert_eq!(<u16 as Element>::KIND, ElementKind::Unsigned);
/// assert_eq!(<f32 as Element>::DTYPE, DataType::F32);
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
{
    /// The type as a value, for code that chooses at run time.
    const DTYPE: DataType;
    /// The Rust name (`"f32"`, `"bf16"`, ...), as the CLI and reports spell it.
    const NAME: &'static str = Self::DTYPE.name();
    /// The CUDA C type (`"float"`, `"__nv_bfloat16"`, ...), for run-time compiled kernels.
    const C_TYPE: &'static str = Self::DTYPE.c_type();
    /// NVSHMEM's name for the type in its typed functions: `"uint8"` for `Bool8`, whose
    /// reductions run on NVSHMEM's `uint8` min/max; `"fp8_e4m3"`/`"fp8_e5m2"` for the 8-bit
    /// floats, for which NVSHMEM has no functions (their reductions run in this crate's
    /// kernels).
    const NVSHMEM_NAME: &'static str = Self::DTYPE.nvshmem_name();
    /// What kind of number it is.
    const KIND: ElementKind = Self::DTYPE.kind();

    /// The value as an `f64` (exact for every type but 64-bit integers beyond 2^53).
    fn to_f64(self) -> f64;
    /// The nearest value of this type (saturating for integers and 8-bit floats; for `Bool8`,
    /// any non-zero value is true).
    fn from_f64(v: f64) -> Self;
}

/// The list of element types, handed to the macro `$m` (with any leading arguments) as rows
/// `Rust type, DataType variant, name, CUDA C type, NVSHMEM type, kind, group, conversion;`.
/// `group` is `core` for the types NVSHMEM computes on itself and `extra` for the others;
/// `conversion` says how a value converts to and from `f64` (`cast`: `as`; `method`: the
/// type's `to_f64`/`from_f64`). Every other list of types in the workspace is made from this.
#[doc(hidden)]
#[macro_export]
macro_rules! __element_list {
    ($($m:ident)::+ $(, $($arg:tt)*)?) => {
        $($m)::+! { [$($($arg)*)?]
            f32,                         F32,    "f32",    "float",              float,    Float,    core,  cast;
            f64,                         F64,    "f64",    "double",             double,   Float,    core,  cast;
            $crate::half::f16,           F16,    "f16",    "__half",             half,     Float,    core,  method;
            $crate::half::bf16,          BF16,   "bf16",   "__nv_bfloat16",      bfloat16, Float,    core,  method;
            i8,                          I8,     "i8",     "signed char",        int8,     Signed,   core,  cast;
            i16,                         I16,    "i16",    "short",              int16,    Signed,   core,  cast;
            i32,                         I32,    "i32",    "int",                int32,    Signed,   core,  cast;
            i64,                         I64,    "i64",    "long long",          int64,    Signed,   core,  cast;
            u8,                          U8,     "u8",     "unsigned char",      uint8,    Unsigned, core,  cast;
            u16,                         U16,    "u16",    "unsigned short",     uint16,   Unsigned, core,  cast;
            u32,                         U32,    "u32",    "unsigned int",       uint32,   Unsigned, core,  cast;
            u64,                         U64,    "u64",    "unsigned long long", uint64,   Unsigned, core,  cast;
            $crate::element::Bool8,      Bool8,  "bool8",  "unsigned char",      uint8,    Bool,     extra, method;
            $crate::element::F8E4M3,     F8E4M3, "f8e4m3", "__nv_fp8_e4m3",      fp8_e4m3, Float,    extra, method;
            $crate::element::F8E5M2,     F8E5M2, "f8e5m2", "__nv_fp8_e5m2",      fp8_e5m2, Float,    extra, method;
        }
    };
}

/// Expands `$m!(T);` for every row of `group`.
#[doc(hidden)]
#[macro_export]
macro_rules! __element_each {
    ([$m:ident $group:ident] $($t:ty, $v:ident, $n:literal, $c:literal, $nv:ident, $k:ident, $g:ident, $conv:ident;)*) => {
        $( $crate::__element_each!(@one $m $group $g $t); )*
    };
    (@one $m:ident core core $t:ty) => { $m!($t) };
    (@one $m:ident extra extra $t:ty) => { $m!($t) };
    (@one $m:ident $want:ident $g:ident $t:ty) => {};
}

/// Calls `$m!(T)` once for every [`Element`] type NVSHMEM computes on itself (the 12 numeric
/// types); [`for_each_extra_element!`](crate::for_each_extra_element) lists the others.
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
        $crate::__element_list!($crate::__element_each, $m core)
    };
}

/// Calls `$m!(T)` once for each [`Element`] type NVSHMEM has no arithmetic on:
/// [`Bool8`], [`F8E4M3`] and [`F8E5M2`] (reductions in this crate's kernels or on NVSHMEM's
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
        $crate::__element_list!($crate::__element_each, $m extra)
    };
}

/// Runs `$body` with `$T` the [`Element`] type of the [`DataType`] `$dtype`: how code that
/// chooses the type at run time (a command-line flag, a file) calls the generic API.
///
/// ```
/// use nvshmem::{DataType, Element};
/// fn size_of_type(d: DataType) -> usize {
///     nvshmem::with_element_type!(d, T => std::mem::size_of::<T>())
/// }
/// assert_eq!(size_of_type(DataType::BF16), 2);
/// assert_eq!(size_of_type("f64".parse().unwrap()), 8);
/// ```
#[macro_export]
macro_rules! with_element_type {
    ($dtype:expr, $T:ident => $body:expr) => {
        $crate::__element_list!($crate::__element_match, ($dtype) $T ($body))
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __element_match {
    ([($dtype:expr) $T:ident ($body:expr)] $($t:ty, $v:ident, $n:literal, $c:literal, $nv:ident, $k:ident, $g:ident, $conv:ident;)*) => {
        match $dtype {
            $( $crate::DataType::$v => {
                #[allow(dead_code)]
                type $T = $t;
                $body
            } )*
        }
    };
}

macro_rules! define_types {
    ([] $($t:ty, $v:ident, $name:literal, $c:literal, $nv:ident, $kind:ident, $group:ident, $conv:ident;)*) => {
        /// An element type as a value: one variant per [`Element`] type, for code that
        /// chooses the type at run time. Parsed from and printed as the Rust names (`f32`,
        /// `bf16`, `f8e4m3`, `bool8`, ...); NVSHMEM's and nccl-tests' names (`float`,
        /// `bfloat16`, `int32`, ...) parse too.
        ///
        /// ```
        /// use nvshmem::{DataType, ElementKind};
        /// let d: DataType = "bfloat16".parse()?;
        /// assert_eq!(d, DataType::BF16);
        /// assert_eq!((d.name(), d.size(), d.kind()), ("bf16", 2, ElementKind::Float));
        /// assert_eq!(DataType::ALL.len(), 15);
        /// # Ok::<(), nvshmem::Error>(())
        /// ```
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum DataType {
            $(
                #[doc = concat!("`", stringify!($t), "`")]
                $v,
            )*
        }

        impl DataType {
            /// Every type, in the order of the list.
            ///
            /// ```
            /// assert_eq!(nvshmem::DataType::ALL[0], nvshmem::DataType::F32);
            /// ```
            pub const ALL: &'static [DataType] = &[$(DataType::$v),*];

            /// The Rust name (`"f32"`, `"bf16"`, `"f8e4m3"`, ...).
            ///
            /// ```
            /// assert_eq!(nvshmem::DataType::U16.name(), "u16");
            /// ```
            pub const fn name(self) -> &'static str {
                match self { $(DataType::$v => $name,)* }
            }

            /// The CUDA C type the kernels use.
            ///
            /// ```
            /// assert_eq!(nvshmem::DataType::F16.c_type(), "__half");
            /// ```
            pub const fn c_type(self) -> &'static str {
                match self { $(DataType::$v => $c,)* }
            }

            /// NVSHMEM's name for the type in its typed functions (see
            /// [`Element::NVSHMEM_NAME`]).
            ///
            /// ```
            /// assert_eq!(nvshmem::DataType::I64.nvshmem_name(), "int64");
            /// ```
            pub const fn nvshmem_name(self) -> &'static str {
                match self { $(DataType::$v => stringify!($nv),)* }
            }

            /// What kind of number it is.
            ///
            /// ```
            /// assert_eq!(nvshmem::DataType::U8.kind(), nvshmem::ElementKind::Unsigned);
            /// ```
            pub const fn kind(self) -> ElementKind {
                match self { $(DataType::$v => ElementKind::$kind,)* }
            }

            /// Bytes per element.
            ///
            /// ```
            /// assert_eq!(nvshmem::DataType::F64.size(), 8);
            /// ```
            pub const fn size(self) -> usize {
                match self { $(DataType::$v => std::mem::size_of::<$t>(),)* }
            }

            /// Whether NVSHMEM itself computes on the type (the 12 numeric types), as opposed
            /// to this crate's kernels or NVSHMEM's bytes ([`Bool8`], fp8).
            ///
            /// ```
            /// assert!(nvshmem::DataType::I16.is_core());
            /// assert!(!nvshmem::DataType::F8E5M2.is_core());
            /// ```
            pub const fn is_core(self) -> bool {
                match self { $(DataType::$v => define_types!(@core $group),)* }
            }
        }

        $(
            impl sealed::Sealed for $t {}
            impl Element for $t {
                const DTYPE: DataType = DataType::$v;
                #[inline]
                fn to_f64(self) -> f64 {
                    define_types!(@to $conv self)
                }
                #[inline]
                fn from_f64(v: f64) -> Self {
                    define_types!(@from $conv $t, v)
                }
            }
        )*
    };
    (@core core) => { true };
    (@core extra) => { false };
    (@to cast $x:ident) => { $x as f64 };
    (@to method $x:ident) => { $x.to_f64() };
    (@from cast $t:ty, $v:ident) => { $v as $t };
    (@from method $t:ty, $v:ident) => { <$t>::from_f64($v) };
}
crate::__element_list!(define_types);

impl DataType {
    /// Whether the type is a floating-point type (fp8 included).
    ///
    /// ```
    /// assert!(nvshmem::DataType::F8E4M3.is_float() && !nvshmem::DataType::I8.is_float());
    /// ```
    pub const fn is_float(self) -> bool {
        matches!(self.kind(), ElementKind::Float)
    }

    /// Whether the type is a signed or unsigned integer.
    ///
    /// ```
    /// assert!(nvshmem::DataType::U64.is_integer() && !nvshmem::DataType::Bool8.is_integer());
    /// ```
    pub const fn is_integer(self) -> bool {
        matches!(self.kind(), ElementKind::Signed | ElementKind::Unsigned)
    }

    /// Other spellings that parse: NVSHMEM's type names and nccl-tests' (`float`, `half`,
    /// `int`, ...).
    fn alias(s: &str) -> Option<DataType> {
        Some(match s {
            "float" | "float32" => DataType::F32,
            "double" | "float64" => DataType::F64,
            "half" | "float16" => DataType::F16,
            "bfloat16" => DataType::BF16,
            "int8" => DataType::I8,
            "int16" => DataType::I16,
            "int32" | "int" => DataType::I32,
            "int64" => DataType::I64,
            "uint8" => DataType::U8,
            "uint16" => DataType::U16,
            "uint32" => DataType::U32,
            "uint64" => DataType::U64,
            "bool" => DataType::Bool8,
            "fp8_e4m3" | "e4m3" => DataType::F8E4M3,
            "fp8_e5m2" | "e5m2" => DataType::F8E5M2,
            _ => return None,
        })
    }
}

impl fmt::Display for DataType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for DataType {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        let key = s.trim().to_ascii_lowercase();
        DataType::ALL
            .iter()
            .copied()
            .find(|d| d.name() == key)
            .or_else(|| DataType::alias(&key))
            .ok_or_else(|| {
                let names: Vec<_> = DataType::ALL.iter().map(|d| d.name()).collect();
                Error::arg(
                    "DataType::from_str",
                    "type",
                    format_args!("{s:?}: expected one of {}", names.join(", ")),
                )
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check<T: Element>(size: usize, nv: &str, kind: ElementKind) {
        assert_eq!(std::mem::size_of::<T>(), size, "{}", T::NAME);
        assert_eq!(T::DTYPE.size(), size, "{}", T::NAME);
        assert_eq!(T::NVSHMEM_NAME, nv);
        assert_eq!(T::KIND, kind);
        let three = if kind == ElementKind::Bool { 1.0 } else { 3.0 };
        assert_eq!(T::from_f64(3.0).to_f64(), three, "{}", T::NAME);
        assert_eq!(T::NAME.parse::<DataType>().unwrap(), T::DTYPE);
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
        check::<F8E4M3>(1, "fp8_e4m3", ElementKind::Float);
        check::<F8E5M2>(1, "fp8_e5m2", ElementKind::Float);
        check::<Bool8>(1, "uint8", ElementKind::Bool);
        assert_eq!(<F8E4M3 as Element>::C_TYPE, "__nv_fp8_e4m3");
        assert_eq!(<F8E5M2 as Element>::C_TYPE, "__nv_fp8_e5m2");
    }

    #[test]
    fn extra_types_convert_through_f64() {
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
    fn the_lists_agree() {
        let mut names = Vec::new();
        macro_rules! push {
            ($t:ty) => {
                names.push(<$t as Element>::NAME)
            };
        }
        crate::for_each_element!(push);
        assert_eq!(names.len(), 12);
        assert!(DataType::ALL[..12].iter().all(|d| d.is_core()));
        crate::for_each_extra_element!(push);
        let all: Vec<_> = DataType::ALL.iter().map(|d| d.name()).collect();
        assert_eq!(names, all);
        for &d in DataType::ALL {
            assert_eq!(crate::with_element_type!(d, T => T::DTYPE), d);
        }
    }

    #[test]
    fn names_and_aliases_parse() {
        assert_eq!("float".parse::<DataType>().unwrap(), DataType::F32);
        assert_eq!("INT32".parse::<DataType>().unwrap(), DataType::I32);
        assert_eq!("uint16".parse::<DataType>().unwrap(), DataType::U16);
        let e = "f128".parse::<DataType>().unwrap_err().to_string();
        assert!(e.contains("\"f128\": expected one of f32, f64"), "{e}");
    }
}
