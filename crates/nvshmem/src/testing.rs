//! What a collective's result must be, for tests and benchmarks that check one (the
//! `testing` feature): the host's reference reduction ([`reduce`]), and how far a result read
//! back may be from it ([`allowed_error`], [`element_ok`]). The GPU tests of this repository
//! and `nvshmem-perf --check` both judge results by these, so the two agree on what is right.
//!
//! # The tolerance
//!
//! Integers and truth values must be exact: the result is the reference converted as the type
//! converts (an integer average truncated toward zero, a truth value the byte 0 or 1).
//!
//! A floating-point result of `T` may differ from the reference by
//! `2 · γ(k) · M + 2 · k · u · N`, where `u` is `T`'s unit roundoff (half its machine
//! epsilon), `N` its smallest normal value, `k` the number of roundings the computation
//! makes, `γ(k) = k·u / (1 − k·u)`, and `M` the magnitude of what was reduced
//! ([`Reference::magnitude`]: the sum of the terms' magnitudes for `sum`, `avg` (over `n`) and
//! `premul_sum`, the result's for the others). Why:
//!
//! - A reduction of `n` values rounds at most `k = n + 1` times ([`roundings`]) on every path
//!   these checks run (this crate's kernels, NVSHMEM's ring and tree, NCCL's ring): `n − 1`
//!   additions or multiplications, each rounded in `T` or a wider type; one scaling (each
//!   term of `premul_sum`, the division of `avg`, or NCCL's rounded `1/n`); one store into `T`.
//! - Each rounding errs by at most `u` times what it rounds, and everything rounded is at
//!   most `M` in magnitude (partial sums of terms whose magnitudes sum to `M`; a product's
//!   error at any step scales with the factors still to come, so it stays relative to the
//!   final product). The standard bound for `k` such roundings is `γ(k) · M` (Higham,
//!   *Accuracy and Stability of Numerical Algorithms*, §3.1); below `N` a rounding errs by at
//!   most `u · N` instead (half the subnormal step), hence the second term.
//! - The factor 2 covers the reference's own rounding in `f64`, as large as the device's for
//!   `f64` data.
//!
//! Where `k · u` reaches 1/2 (fp8 with many roundings), `γ(k)` is taken as `2 · k · u`: no
//! bound worth the name remains, so a caller that knows its computation rounds fewer times
//! passes that count (this crate computes fp8 reductions in `f32` and rounds once, on the
//! store).
use crate::{DataType, Element, ReduceOp};

/// The reference result of one element of a reduction (or of a data movement), in `f64`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Reference {
    /// The exact result (to `f64`'s precision); NaN where there is none.
    pub value: f64,
    /// What a rounding error is relative to: the sum of the terms' magnitudes for `sum`,
    /// `avg` (divided by `n`) and `premul_sum` (scaled terms); `|value|` otherwise.
    pub magnitude: f64,
}

impl From<f64> for Reference {
    /// A value moved, not computed: `magnitude` is `|value|`, and a float moved by a
    /// collective must come back within the tolerance of that (exactly, in practice).
    ///
    /// ```
    /// let r = nvshmem::testing::Reference::from(-2.5);
    /// assert_eq!((r.value, r.magnitude), (-2.5, 2.5));
    /// ```
    fn from(value: f64) -> Self {
        Reference {
            value,
            magnitude: value.abs(),
        }
    }
}

/// The reduction by `op` of the values `val(k)` of `n` members, on the host in `f64`:
/// bitwise operators on the integer values, `avg` the sum divided by `n`, `premul_sum(s)` the
/// sum of `s · x`. (Comparing with [`element_ok`] then applies the type's conversion, which
/// truncates an integer average toward zero, as NCCL and this crate do.) Every operator has
/// one: the match is exhaustive within the crate, so a new operator does not build without.
///
/// ```
/// use nvshmem::{testing::reduce, ReduceOp};
/// let v = [6.0, -3.0, 5.0];
/// let r = reduce(ReduceOp::Sum, 3, |k| v[k]);
/// assert_eq!((r.value, r.magnitude), (8.0, 14.0));
/// assert_eq!(reduce(ReduceOp::Xor, 2, |k| v[k]).value, -5.0); // 6 ^ -3
/// assert_eq!(reduce(ReduceOp::PreMulSum(0.5), 3, |k| v[k]).value, 4.0);
/// ```
pub fn reduce(op: ReduceOp, n: usize, val: impl Fn(usize) -> f64) -> Reference {
    let vals = (0..n).map(&val);
    let bits = |f: fn(i64, i64) -> i64| {
        (0..n)
            .map(|k| val(k) as i64)
            .reduce(f)
            .map_or(f64::NAN, |v| v as f64)
    };
    let abs_sum = |scale: f64| (0..n).map(|k| (scale * val(k)).abs()).sum::<f64>();
    let (value, magnitude) = match op {
        ReduceOp::Sum => (vals.sum(), abs_sum(1.0)),
        ReduceOp::Avg => (vals.sum::<f64>() / n as f64, abs_sum(1.0) / n as f64),
        ReduceOp::PreMulSum(s) => (vals.map(|v| s * v).sum(), abs_sum(s)),
        ReduceOp::Prod => (vals.product(), f64::NAN),
        ReduceOp::Min => (vals.fold(f64::INFINITY, f64::min), f64::NAN),
        ReduceOp::Max => (vals.fold(f64::NEG_INFINITY, f64::max), f64::NAN),
        ReduceOp::And => (bits(|a, b| a & b), f64::NAN),
        ReduceOp::Or => (bits(|a, b| a | b), f64::NAN),
        ReduceOp::Xor => (bits(|a, b| a ^ b), f64::NAN),
    };
    Reference {
        value,
        magnitude: if magnitude.is_nan() {
            value.abs()
        } else {
            magnitude
        },
    }
}

/// How many times a reduction over `n` members may round on any path the checks run
/// (module docs): `n − 1` combining steps, one scaling, one store.
///
/// ```
/// assert_eq!(nvshmem::testing::roundings(8), 9);
/// ```
pub fn roundings(n: usize) -> usize {
    n + 1
}

/// (unit roundoff, smallest normal value) of a floating-point type; `None` for the others.
fn float_facts(dtype: DataType) -> Option<(f64, f64)> {
    Some(match dtype {
        DataType::F64 => (f64::EPSILON / 2.0, f64::MIN_POSITIVE),
        DataType::F32 => (f64::from(f32::EPSILON) / 2.0, f64::from(f32::MIN_POSITIVE)),
        DataType::F16 => (2f64.powi(-11), 2f64.powi(-14)),
        DataType::BF16 => (2f64.powi(-8), f64::from(f32::MIN_POSITIVE)),
        // 3 and 2 mantissa bits; exponent bias 7 and 15.
        DataType::F8E4M3 => (2f64.powi(-4), 2f64.powi(-6)),
        DataType::F8E5M2 => (2f64.powi(-3), 2f64.powi(-14)),
        _ => return None,
    })
}

/// How far a result of `dtype` computed with `k` roundings may be from a reference of
/// `magnitude` (module docs, "The tolerance"); 0 for integers and truth values.
///
/// ```
/// use nvshmem::{testing::allowed_error, DataType};
/// assert_eq!(allowed_error(DataType::I32, 9, 100.0), 0.0);
/// let f32_8 = allowed_error(DataType::F32, 9, 1.0);
/// assert!(f32_8 > 9.0 * 6e-8 && f32_8 < 9.0 * 1.3e-7);
/// assert!(allowed_error(DataType::BF16, 9, 1.0) > f32_8);
/// ```
pub fn allowed_error(dtype: DataType, k: usize, magnitude: f64) -> f64 {
    let Some((u, normal)) = float_facts(dtype) else {
        return 0.0;
    };
    let ku = k as f64 * u;
    let gamma = if ku < 0.5 { ku / (1.0 - ku) } else { 2.0 * ku };
    2.0 * gamma * magnitude + 2.0 * ku * normal
}

/// Writes `v` as one element of `dtype` into `out` (`dtype.size()` bytes), by the type's own
/// conversion: integers truncate toward zero and saturate, truth values are 0 or 1.
///
/// ```
/// use nvshmem::{testing::encode, DataType};
/// let mut b = [0u8; 1];
/// encode(DataType::I8, 1000.0, &mut b);
/// assert_eq!(b, [127]);
/// ```
pub fn encode(dtype: DataType, v: f64, out: &mut [u8]) {
    crate::with_element_type!(dtype, T => {
        out.copy_from_slice(bytemuck::bytes_of(&<T as Element>::from_f64(v)))
    })
}

/// Reads one element of `dtype` from `b` (`dtype.size()` bytes).
///
/// ```
/// use nvshmem::{testing::decode, DataType};
/// assert_eq!(decode(DataType::F32, &1.5f32.to_ne_bytes()), 1.5);
/// ```
pub fn decode(dtype: DataType, b: &[u8]) -> f64 {
    crate::with_element_type!(dtype, T => Element::to_f64(bytemuck::pod_read_unaligned::<T>(b)))
}

/// Whether `got` (one element of `dtype`, as read back) is the reference `want` of a
/// computation with `k` roundings ([`roundings`]): floats within [`allowed_error`] and not
/// NaN, integers and truth values byte for byte as the type converts `want.value` (so an
/// integer average is truncated, and a truth value is the byte 0 or 1, nothing else). A NaN
/// reference is never met.
///
/// ```
/// use nvshmem::{testing::{element_ok, reduce}, DataType, ReduceOp};
/// let want = reduce(ReduceOp::Avg, 3, |k| [6.0, 3.0, 5.0][k]);
/// assert!(element_ok(DataType::I32, &4i32.to_ne_bytes(), want, 4));
/// assert!(!element_ok(DataType::I32, &5i32.to_ne_bytes(), want, 4));
/// assert!(element_ok(DataType::F32, &(14.0f32 / 3.0).to_ne_bytes(), want, 4));
/// ```
pub fn element_ok(dtype: DataType, got: &[u8], want: Reference, k: usize) -> bool {
    if want.value.is_nan() {
        return false;
    }
    if dtype.is_float() {
        let g = decode(dtype, got);
        !g.is_nan() && (g - want.value).abs() <= allowed_error(dtype, k, want.magnitude)
    } else {
        let mut buf = [0u8; 16];
        let w = &mut buf[..dtype.size()];
        encode(dtype, want.value, w);
        got == w
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes(dtype: DataType, v: f64) -> Vec<u8> {
        let mut b = vec![0u8; dtype.size()];
        encode(dtype, v, &mut b);
        b
    }

    #[test]
    fn the_reference_covers_every_operator() {
        let v = [6.0, 3.0, 5.0];
        let at = |k: usize| v[k];
        let value = |op| reduce(op, 3, at).value;
        assert_eq!(value(ReduceOp::Sum), 14.0);
        assert_eq!(value(ReduceOp::Prod), 90.0);
        assert_eq!(value(ReduceOp::Min), 3.0);
        assert_eq!(value(ReduceOp::Max), 6.0);
        assert_eq!(value(ReduceOp::And), 0.0);
        assert_eq!(value(ReduceOp::Or), 7.0);
        assert_eq!(value(ReduceOp::Xor), 0.0);
        assert_eq!(reduce(ReduceOp::Xor, 2, at).value, 5.0);
        assert_eq!(value(ReduceOp::Avg), 14.0 / 3.0);
        assert_eq!(value(ReduceOp::PreMulSum(0.5)), 7.0);
        assert_eq!(reduce(ReduceOp::PreMulSum(-2.0), 2, at).value, -18.0);
        for &op in ReduceOp::EVERY {
            assert!(value(op).is_finite(), "{op}: no reference");
        }
        // Magnitudes: what rounding errors scale with.
        let mixed = |k: usize| [1.0, -1.0, 0.5][k];
        assert_eq!(reduce(ReduceOp::Sum, 3, mixed).magnitude, 2.5);
        assert_eq!(reduce(ReduceOp::Avg, 3, mixed).magnitude, 2.5 / 3.0);
        assert_eq!(reduce(ReduceOp::PreMulSum(-2.0), 3, mixed).magnitude, 5.0);
        assert_eq!(reduce(ReduceOp::Prod, 3, mixed).magnitude, 0.5);
        assert_eq!(reduce(ReduceOp::Min, 3, mixed).magnitude, 1.0);
    }

    #[test]
    fn integers_and_truth_values_are_exact() {
        let want = reduce(ReduceOp::Avg, 3, |k| [6.0, 3.0, 5.0][k]);
        assert!(element_ok(
            DataType::I32,
            &bytes(DataType::I32, 4.0),
            want,
            4
        ));
        assert!(!element_ok(
            DataType::I32,
            &bytes(DataType::I32, 5.0),
            want,
            4
        ));
        assert!(element_ok(DataType::U8, &[4], want, 4));
        assert!(element_ok(DataType::Bool8, &[1], 1.0.into(), 3));
        assert!(!element_ok(DataType::Bool8, &[2], 1.0.into(), 3));
        assert!(!element_ok(DataType::Bool8, &[0], 1.0.into(), 3));
        for &t in DataType::ALL {
            assert_eq!(allowed_error(t, 3, 1.0) > 0.0, t.is_float(), "{t}");
        }
    }

    #[test]
    fn floats_get_what_their_roundings_allow() {
        // Coarser types allow more, and more roundings allow more.
        let order = [
            DataType::F64,
            DataType::F32,
            DataType::F16,
            DataType::BF16,
            DataType::F8E4M3,
            DataType::F8E5M2,
        ];
        for w in order.windows(2) {
            assert!(
                allowed_error(w[0], 9, 1.0) < allowed_error(w[1], 9, 1.0),
                "{w:?}"
            );
        }
        assert!(allowed_error(DataType::F32, 9, 1.0) > allowed_error(DataType::F32, 3, 1.0));
        // An f32 average one unit off passes; a thousandth off does not.
        let third = reduce(ReduceOp::Avg, 3, |k| [3.0, 2.0, 2.0][k]);
        let f = |v: f32| v.to_ne_bytes();
        let k = roundings(3);
        assert!(element_ok(DataType::F32, &f(third.value as f32), third, k));
        let next = f32::from_bits((third.value as f32).to_bits() + 1);
        assert!(element_ok(DataType::F32, &f(next), third, k));
        assert!(!element_ok(
            DataType::F32,
            &f(third.value as f32 * 1.001),
            third,
            k
        ));
        // bf16 rounds 7/3 to 2.328125 (0.2 % off): within; 2.5 (7 % off) is not.
        let b = bytes(DataType::BF16, third.value);
        assert!((decode(DataType::BF16, &b) - third.value).abs() > 1e-3);
        assert!(element_ok(DataType::BF16, &b, third, k));
        assert!(!element_ok(
            DataType::BF16,
            &bytes(DataType::BF16, 2.5),
            third,
            k
        ));
        // Cancellation: the error scales with the terms, not the (small) result.
        let cancel = reduce(ReduceOp::Sum, 2, |k| [1.0, -0.999][k]);
        let off = cancel.value + 4.0 * f64::from(f32::EPSILON);
        assert!(element_ok(DataType::F32, &f(off as f32), cancel, 3));
        // fp8 rounded once: e4m3 has 9 but not 17 (16 and 18 around it); a sum one member
        // short is wrong.
        let e4 = DataType::F8E4M3;
        let want = reduce(ReduceOp::Sum, 2, |k| [8.0, 9.0][k]);
        assert!(element_ok(e4, &bytes(e4, 16.0), want, 1));
        assert!(!element_ok(e4, &bytes(e4, 9.0), want, 1));
        assert!(!element_ok(e4, &bytes(e4, 12.0), want, 1));
        // Below the normal range, about half a subnormal step of slack a rounding: f16's
        // nearest to 2^-20 + 2^-26 is 2^-20; a step further (2^-24) is still within, more not.
        let tiny = Reference::from(2f64.powi(-20) + 2f64.powi(-26));
        let f16 = DataType::F16;
        assert!(element_ok(f16, &bytes(f16, 2f64.powi(-20)), tiny, 1));
        assert!(!element_ok(
            f16,
            &bytes(f16, 2f64.powi(-20) + 2f64.powi(-22)),
            tiny,
            1
        ));
        // NaN is never right, nor is a NaN reference met.
        let nan = f64::NAN.to_ne_bytes();
        assert!(!element_ok(DataType::F64, &nan, 1.0.into(), 2));
        assert!(!element_ok(
            DataType::F64,
            &1.0f64.to_ne_bytes(),
            f64::NAN.into(),
            2
        ));
    }
}
