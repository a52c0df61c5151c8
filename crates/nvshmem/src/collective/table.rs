//! NVSHMEM's typed collective functions, one per (element type, operator, collective).
//!
//! NVSHMEM exports `nvshmemx_<type>_<op>_reduce_on_stream` and friends. The symbols were
//! all resolved when the library was loaded (`nvshmem_sys::NvshmemLib` holds them as plain
//! function pointers); here each element type picks its own out of that struct with a `match`
//! the compiler turns into a field load. No name is built at run time.
use std::os::raw::c_int;

use nvshmem_sys::{cudaStream_t, nvshmem_team_t, NvshmemLib};

use super::op::NvOp;

/// `nvshmemx_<T>_<op>_reduce_on_stream` and `..._reducescatter_on_stream`:
/// (team, dest, source, count, stream).
pub type ReduceFn<R> =
    unsafe extern "C" fn(nvshmem_team_t, *mut R, *const R, usize, cudaStream_t) -> c_int;

/// An element type's view of NVSHMEM's typed functions.
///
/// Public only so it can bound [`Element`](crate::Element); it lives in a private module
/// and cannot be named or implemented outside the crate. A type NVSHMEM cannot compute on
/// (fp8) implements it with the defaults, which say "no such function"; the collectives then
/// choose another algorithm (the peer kernels) or return
/// [`Error::Unsupported`](crate::Error::Unsupported).
pub trait NvshmemTyped: Sized {
    /// The C type NVSHMEM's functions take for this element (same size and layout).
    type Raw;

    /// Whether NVSHMEM has typed reductions (at least sum, or for `Bool8` min/max) for this
    /// element; known without the library, so the choice of algorithm is a pure function.
    const NVSHMEM_REDUCES: bool = false;

    /// The most elements one NVSHMEM reduction call of this type may take. NVSHMEM 3.4.5's
    /// 16-bit integer reductions hang, or let the PEs' barriers fall out of step, at 16 MiB a
    /// call on 2 x H200 (`results/gpu-check/`), while 1 MiB calls pass every check: those
    /// types cap a call at 1 MiB, and longer reductions run as several calls.
    const MAX_NVSHMEM_COUNT: usize = usize::MAX;

    /// `nvshmemx_<T>_<op>_reduce_on_stream`, if NVSHMEM has it.
    fn reduce_fn(_lib: &NvshmemLib, _op: NvOp) -> Option<ReduceFn<Self::Raw>> {
        None
    }

    /// `nvshmemx_<T>_<op>_reducescatter_on_stream`, if NVSHMEM has it.
    fn reducescatter_fn(_lib: &NvshmemLib, _op: NvOp) -> Option<ReduceFn<Self::Raw>> {
        None
    }
}

macro_rules! nvshmem_typed {
    ($t:ty, $raw:ty, $nv:ident, [$($op:ident => $name:ident),*] $(, max $max:expr)?) => {
        // The element is handed to NVSHMEM as its C type: they must agree in size.
        const _: () = assert!(std::mem::size_of::<$t>() == std::mem::size_of::<$raw>());
        impl NvshmemTyped for $t {
            type Raw = $raw;
            const NVSHMEM_REDUCES: bool = true;
            $(const MAX_NVSHMEM_COUNT: usize = $max;)?
            #[inline]
            fn reduce_fn(lib: &NvshmemLib, op: NvOp) -> Option<ReduceFn<$raw>> {
                pastey::paste! {
                    match op {
                        $(NvOp::$op => Some(lib.[<nvshmemx_ $nv _ $name _reduce_on_stream>]),)*
                        #[allow(unreachable_patterns)]
                        _ => None,
                    }
                }
            }
            #[inline]
            fn reducescatter_fn(lib: &NvshmemLib, op: NvOp) -> Option<ReduceFn<$raw>> {
                pastey::paste! {
                    match op {
                        $(NvOp::$op => Some(lib.[<nvshmemx_ $nv _ $name _reducescatter_on_stream>]),)*
                        #[allow(unreachable_patterns)]
                        _ => None,
                    }
                }
            }
        }
    };
    (float $t:ty, $raw:ty, $nv:ident) => {
        nvshmem_typed!($t, $raw, $nv, [Sum => sum, Prod => prod, Min => min, Max => max]);
    };
    (int $t:ty, $nv:ident $(, max $max:expr)?) => {
        nvshmem_typed!($t, $t, $nv, [
            Sum => sum, Prod => prod, Min => min, Max => max, And => and, Or => or, Xor => xor
        ] $(, max $max)?);
    };
}

nvshmem_typed!(float f32, f32, float);
nvshmem_typed!(float f64, f64, double);
nvshmem_typed!(float half::f16, nvshmem_sys::half, half);
nvshmem_typed!(float half::bf16, nvshmem_sys::__nv_bfloat16, bfloat16);
nvshmem_typed!(int i8, int8);
nvshmem_typed!(int i16, int16, max (1 << 20) / 2);
nvshmem_typed!(int i32, int32);
nvshmem_typed!(int i64, int64);
nvshmem_typed!(int u8, uint8);
nvshmem_typed!(int u16, uint16, max (1 << 20) / 2);
nvshmem_typed!(int u32, uint32);
nvshmem_typed!(int u64, uint64);

// A Bool8 is a byte that is true when non-zero. NVSHMEM's uint8 min and max give the right
// truth value for any bytes (min is 0 exactly when some input is 0), whereas its bitwise `and`
// would not (1 & 2 == 0): so logical and is min, logical or is max.
nvshmem_typed!(crate::element_ext::Bool8, u8, uint8, [
    And => min, Or => max, Min => min, Max => max
]);

// NVSHMEM has no 8-bit floats: the defaults (no functions) send their reductions to the
// peer kernels.
impl NvshmemTyped for crate::element_ext::F8E4M3 {
    type Raw = u8;
}
impl NvshmemTyped for crate::element_ext::F8E5M2 {
    type Raw = u8;
}

#[cfg(test)]
mod tests {
    use super::NvshmemTyped;

    #[test]
    fn only_16_bit_integers_cap_an_nvshmem_call() {
        // 1 MiB a call: the size the GPU matrix checks on every team; NVSHMEM 3.4.5 hangs at
        // 16 MiB for these two types.
        assert_eq!(<i16 as NvshmemTyped>::MAX_NVSHMEM_COUNT, 1 << 19);
        assert_eq!(<u16 as NvshmemTyped>::MAX_NVSHMEM_COUNT, 1 << 19);
        macro_rules! uncapped {
            ($($t:ty),*) => {$(
                assert_eq!(<$t as NvshmemTyped>::MAX_NVSHMEM_COUNT, usize::MAX, stringify!($t));
            )*};
        }
        uncapped!(f32, f64, half::f16, half::bf16, i8, i32, i64, u8, u32, u64);
        uncapped!(crate::element_ext::Bool8, crate::element_ext::F8E4M3);
    }
}
