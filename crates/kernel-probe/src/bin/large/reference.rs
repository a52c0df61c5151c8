//! The host reference of the reductions: element encodings, random inputs, and what a
//! reduction must produce (integers and bool exactly, floats within a bound computed in f64).
use std::sync::OnceLock;

use half::{bf16, f16};
use kernel_probe::{Op, Ty};

/// A small, fast, seedable generator (xorshift64*); the checks need no statistical quality.
#[derive(Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in [lo, hi).
    pub fn uniform(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * ((self.next_u64() >> 11) as f64 / (1u64 << 53) as f64)
    }

    pub fn fill(&mut self, buf: &mut [u8]) {
        for c in buf.chunks_mut(8) {
            let v = self.next_u64().to_le_bytes();
            c.copy_from_slice(&v[..c.len()]);
        }
    }
}

/// 2^e as an f64 (normal range), usable in constants.
const fn pow2(e: i32) -> f64 {
    f64::from_bits(((1023 + e) as u64) << 52)
}

/// Every fp8 code's value, computed once (decoding is on the checks' hot path).
fn fp8_table(t: Ty) -> &'static [f64; 256] {
    static E4M3: OnceLock<[f64; 256]> = OnceLock::new();
    static E5M2: OnceLock<[f64; 256]> = OnceLock::new();
    let (cell, f): (_, fn(u8) -> f64) = if t == Ty::F8E4M3 {
        (&E4M3, e4m3_to_f64)
    } else {
        (&E5M2, e5m2_to_f64)
    };
    cell.get_or_init(|| std::array::from_fn(|i| f(i as u8)))
}

/// fp8 e4m3 (bias 7, no infinities, S.1111.111 is NaN) to f64.
pub fn e4m3_to_f64(b: u8) -> f64 {
    let s = if b & 0x80 != 0 { -1.0 } else { 1.0 };
    let e = ((b >> 3) & 0xF) as i32;
    let m = (b & 7) as f64;
    if e == 0xF && b & 7 == 7 {
        return f64::NAN;
    }
    if e == 0 {
        s * m / 8.0 * 2f64.powi(-6)
    } else {
        s * (1.0 + m / 8.0) * 2f64.powi(e - 7)
    }
}

/// fp8 e5m2 (bias 15, IEEE-like) to f64.
pub fn e5m2_to_f64(b: u8) -> f64 {
    let s = if b & 0x80 != 0 { -1.0 } else { 1.0 };
    let e = ((b >> 2) & 0x1F) as i32;
    let m = (b & 3) as f64;
    if e == 0x1F {
        return if m == 0.0 {
            s * f64::INFINITY
        } else {
            f64::NAN
        };
    }
    if e == 0 {
        s * m / 4.0 * 2f64.powi(-14)
    } else {
        s * (1.0 + m / 4.0) * 2f64.powi(e - 15)
    }
}

/// The value of a float element (little-endian bytes).
pub fn decode_float(t: Ty, b: &[u8]) -> f64 {
    match t {
        Ty::F32 => f32::from_le_bytes(b[..4].try_into().unwrap()) as f64,
        Ty::F64 => f64::from_le_bytes(b[..8].try_into().unwrap()),
        Ty::F16 => f16::from_le_bytes(b[..2].try_into().unwrap()).to_f64(),
        Ty::BF16 => bf16::from_le_bytes(b[..2].try_into().unwrap()).to_f64(),
        Ty::F8E4M3 | Ty::F8E5M2 => fp8_table(t)[b[0] as usize],
        _ => unreachable!("{t:?} is not a float"),
    }
}

/// The raw bits of an integer element, zero-extended.
pub fn decode_bits(t: Ty, b: &[u8]) -> u64 {
    let mut w = [0u8; 8];
    w[..t.size()].copy_from_slice(&b[..t.size()]);
    u64::from_le_bytes(w)
}

/// An integer element as the kernels load it: sign- or zero-extended to 64 bits.
pub fn load_int(t: Ty, b: &[u8]) -> u64 {
    let bits = decode_bits(t, b);
    let w = 8 * t.size() as u32;
    if t.is_signed() && w < 64 {
        (((bits << (64 - w)) as i64) >> (64 - w)) as u64
    } else {
        bits
    }
}

/// Writes one random element that the reductions can combine without overflow to infinity:
/// floats in about [-4, 4] (exactly representable in the type), integers over their full
/// range (the kernels wrap in 64 bits, as the reference does), bool bytes half zero, the rest
/// assorted non-zero values.
pub fn random_element(t: Ty, rng: &mut Rng, out: &mut [u8]) {
    match t {
        Ty::F32 => out.copy_from_slice(&(rng.uniform(-4.0, 4.0) as f32).to_le_bytes()),
        Ty::F64 => out.copy_from_slice(&rng.uniform(-4.0, 4.0).to_le_bytes()),
        Ty::F16 => out.copy_from_slice(&f16::from_f64(rng.uniform(-4.0, 4.0)).to_le_bytes()),
        Ty::BF16 => out.copy_from_slice(&bf16::from_f64(rng.uniform(-4.0, 4.0)).to_le_bytes()),
        Ty::F8E4M3 => {
            // Exponent field 3..=8: magnitudes 2^-4 .. 2^1 * 1.875; never NaN.
            let r = rng.next_u64();
            let e = 3 + (r % 6) as u8;
            out[0] = ((r >> 8) as u8 & 0x80) | (e << 3) | ((r >> 16) as u8 & 7);
        }
        Ty::F8E5M2 => {
            // Exponent field 11..=16: magnitudes 2^-4 .. 2^1 * 1.75; never inf or NaN.
            let r = rng.next_u64();
            let e = 11 + (r % 6) as u8;
            out[0] = ((r >> 8) as u8 & 0x80) | (e << 2) | ((r >> 16) as u8 & 3);
        }
        Ty::Bool => {
            let r = rng.next_u64();
            out[0] = if r & 1 == 0 {
                0
            } else {
                [1u8, 2, 0x80, 0xFF, 7][((r >> 8) % 5) as usize]
            };
        }
        _ => rng.fill(out),
    }
}

/// Unit roundoff of the type's storage and of its accumulator, and the smallest positive
/// value it holds (its subnormal step), for the float bound.
fn float_params(t: Ty) -> (f64, f64, f64) {
    const ACC32: f64 = pow2(-24);
    match t {
        Ty::F32 => (pow2(-24), ACC32, pow2(-149)),
        Ty::F64 => (pow2(-53), pow2(-53), f64::from_bits(1)),
        Ty::F16 => (pow2(-11), ACC32, pow2(-24)),
        Ty::BF16 => (pow2(-8), ACC32, pow2(-133)),
        Ty::F8E4M3 => (pow2(-4), ACC32, pow2(-9)),
        Ty::F8E5M2 => (pow2(-3), ACC32, pow2(-16)),
        _ => unreachable!(),
    }
}

/// Largest finite value of an fp8 type (the kernels' stores saturate to it).
fn saturation(t: Ty) -> Option<f64> {
    match t {
        Ty::F8E4M3 => Some(448.0),
        Ty::F8E5M2 => Some(57344.0),
        _ => None,
    }
}

/// What one output element must be.
#[derive(Debug, Clone, Copy)]
pub enum Expect {
    /// These exact bytes (integers, bool).
    Bits(u64),
    /// Within `tol` of `value` (floats).
    Near { value: f64, tol: f64 },
}

/// The reduction of `inputs` (one element per member, in team order, as stored bytes) by `op`
/// with the kernels' semantics: premulsum multiplies each input by `scale` (integers by
/// `scale` truncated to an integer), avg divides the combination by the member count
/// (integers truncate toward zero), integers compute in 64 bits and wrap on the store, bool
/// treats any non-zero byte as true and stores 0 or 1.
pub fn reduce(t: Ty, op: Op, scale: f64, inputs: &[&[u8]]) -> Expect {
    let n = inputs.len();
    if t == Ty::Bool {
        let mut a = (inputs[0][0] != 0) as u64;
        for x in &inputs[1..] {
            let b = (x[0] != 0) as u64;
            a = match op {
                Op::Min => a.min(b),
                Op::Max => a.max(b),
                Op::And => a & b,
                Op::Or => a | b,
                _ => unreachable!("bool has no {op:?}"),
            };
        }
        return Expect::Bits((a != 0) as u64);
    }
    if t.is_integer() {
        let s = if t.is_signed() {
            (scale as i64) as u64
        } else {
            scale as u64
        };
        let pre = |x: u64| {
            if op == Op::PreMulSum {
                x.wrapping_mul(s)
            } else {
                x
            }
        };
        let mut a = pre(load_int(t, inputs[0]));
        for x in &inputs[1..] {
            let b = pre(load_int(t, x));
            a = match op {
                Op::Sum | Op::Avg | Op::PreMulSum => a.wrapping_add(b),
                Op::Prod => a.wrapping_mul(b),
                Op::Min if t.is_signed() => (a as i64).min(b as i64) as u64,
                Op::Max if t.is_signed() => (a as i64).max(b as i64) as u64,
                Op::Min => a.min(b),
                Op::Max => a.max(b),
                Op::And => a & b,
                Op::Or => a | b,
            };
        }
        if op == Op::Avg {
            a = if t.is_signed() {
                ((a as i64) / n as i64) as u64
            } else {
                a / n as u64
            };
        }
        let w = 8 * t.size() as u32;
        let mask = if w == 64 { u64::MAX } else { (1u64 << w) - 1 };
        return Expect::Bits(a & mask);
    }
    // Floats: the exact value in f64 and a bound on the kernels' rounding (accumulation in
    // NVR_ACC, possibly fused multiply-adds for premulsum, one rounding to the type).
    let mut buf = [0f64; kernel_probe::MAX_TEAM];
    for (p, b) in buf.iter_mut().zip(inputs) {
        let x = decode_float(t, b);
        *p = if op == Op::PreMulSum { x * scale } else { x };
    }
    let pre = &buf[..n];
    let (value, mag) = match op {
        Op::Sum | Op::Avg | Op::PreMulSum => {
            let v: f64 = pre.iter().sum();
            let m: f64 = pre.iter().map(|x| x.abs()).sum();
            if op == Op::Avg {
                (v / n as f64, m / n as f64)
            } else {
                (v, m)
            }
        }
        Op::Prod => {
            let v: f64 = pre.iter().product();
            (v, v.abs())
        }
        Op::Min => {
            let v = pre.iter().cloned().fold(f64::INFINITY, f64::min);
            (v, v.abs())
        }
        Op::Max => {
            let v = pre.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            (v, v.abs())
        }
        Op::And | Op::Or => unreachable!("floats have no {op:?}"),
    };
    let (u_t, u_acc, tiny) = float_params(t);
    let acc_err = (n as f64 + 2.0) * u_acc * mag;
    let mut tol = acc_err + u_t * (value.abs() + acc_err) + tiny;
    let mut value = value;
    if let Some(max) = saturation(t) {
        if value.abs() > max {
            value = value.signum() * max;
            tol += u_t * max;
        }
    }
    Expect::Near { value, tol }
}

/// Whether the stored element `got` meets `e`.
pub fn meets(t: Ty, e: Expect, got: &[u8]) -> bool {
    match e {
        Expect::Bits(b) => decode_bits(t, got) == b,
        Expect::Near { value, tol } => {
            let g = decode_float(t, got);
            g.is_finite() && (g - value).abs() <= tol
        }
    }
}

/// A short description of an element for failure messages.
pub fn show(t: Ty, b: &[u8]) -> String {
    if t.is_float() {
        format!("{} ({:#x})", decode_float(t, b), decode_bits(t, b))
    } else {
        format!("{:#x}", decode_bits(t, b))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fp8_decoding() {
        assert_eq!(e4m3_to_f64(0x38), 1.0);
        assert_eq!(e4m3_to_f64(0x7E), 448.0);
        assert!(e4m3_to_f64(0x7F).is_nan());
        assert_eq!(e4m3_to_f64(0x01), 2f64.powi(-9));
        assert_eq!(e5m2_to_f64(0x3C), 1.0);
        assert_eq!(e5m2_to_f64(0x7B), 57344.0);
        assert!(e5m2_to_f64(0x7C).is_infinite());
    }

    #[test]
    fn integer_semantics() {
        let a = [0x7Fu8];
        let b = [0x01u8];
        // i8 sum wraps; u8 does the same bits; signed min differs from unsigned min.
        assert!(matches!(
            reduce(Ty::I8, Op::Sum, 1.0, &[&a, &b]),
            Expect::Bits(0x80)
        ));
        let m = [0x80u8];
        assert!(matches!(
            reduce(Ty::I8, Op::Min, 1.0, &[&m, &b]),
            Expect::Bits(0x80)
        ));
        assert!(matches!(
            reduce(Ty::U8, Op::Min, 1.0, &[&m, &b]),
            Expect::Bits(0x01)
        ));
        // avg truncates toward zero: (-3 + 0) / 2 = -1.
        let x = [0xFDu8];
        let z = [0u8];
        assert!(matches!(
            reduce(Ty::I8, Op::Avg, 1.0, &[&x, &z]),
            Expect::Bits(0xFF)
        ));
        // bool: any non-zero byte is true; results are 0 or 1.
        let t = [0x80u8];
        assert!(matches!(
            reduce(Ty::Bool, Op::And, 1.0, &[&t, &[2u8]]),
            Expect::Bits(1)
        ));
    }

    #[test]
    fn float_bound_holds_for_f32_sums() {
        let a = 1.5f32.to_le_bytes();
        let b = 2.25f32.to_le_bytes();
        let e = reduce(Ty::F32, Op::Sum, 1.0, &[&a, &b]);
        assert!(meets(Ty::F32, e, &3.75f32.to_le_bytes()));
        assert!(!meets(Ty::F32, e, &3.7501f32.to_le_bytes()));
    }
}
