//! `--check`: the input pattern, the host's expected answer, and how close a result must be.
//!
//! Elements go to and from bytes through the library's one list of element types
//! ([`nvshmem::with_element_type!`], [`Element::from_f64`], [`Element::to_f64`]), so every
//! [`DataType`] is covered without a table of our own; the reference covers every
//! [`ReduceOp`].
use nvshmem::{DataType, Element, ElementKind, ReduceOp};

use crate::{coll::Collective, impls::Spec};

/// Writes `v` as one element of `dtype` into `out` (`dtype.size()` bytes), by the type's own
/// conversion: integers truncate toward zero and saturate, truth values are 0 or 1.
pub fn encode(dtype: DataType, v: f64, out: &mut [u8]) {
    nvshmem::with_element_type!(dtype, T => {
        out.copy_from_slice(bytemuck::bytes_of(&<T as Element>::from_f64(v)))
    })
}

/// Reads one element of `dtype` from `b` (`dtype.size()` bytes).
pub fn decode(dtype: DataType, b: &[u8]) -> f64 {
    nvshmem::with_element_type!(dtype, T => Element::to_f64(bytemuck::pod_read_unaligned::<T>(b)))
}

/// The value PE `pe` puts at index `i` of its input for `spec`: small whole numbers, exact in
/// every type (products stay below 2^(n/4+1) for the PE counts benchmarked); 0 or 1 for
/// truth values, half of them true, shifted per PE, so and/or/min/max vary along the buffer.
pub fn input_value(spec: &Spec, pe: usize, i: usize) -> f64 {
    if spec.dtype.kind() == ElementKind::Bool {
        return f64::from(u8::from((pe * 3 + i) % 4 < 2));
    }
    match spec.op {
        ReduceOp::Prod => {
            if (i + pe) & 3 == 0 {
                2.0
            } else {
                1.0
            }
        }
        _ => (1 + (pe * 3 + i) % 5) as f64,
    }
}

/// The reduction by `op` of the values `val(pe)` of `n` PEs, computed on the host in `f64`:
/// bitwise operators on the integer values, `avg` the sum divided by `n`, `premul_sum(s)` the
/// sum of `s * x`. (Comparing with [`element_ok`] then applies the type's conversion, which
/// truncates an integer average toward zero, as NCCL and the library do.)
pub fn reduce(op: ReduceOp, n: usize, val: impl Fn(usize) -> f64) -> f64 {
    let vals = (0..n).map(&val);
    let bits = |f: fn(i64, i64) -> i64| {
        (0..n)
            .map(|pe| val(pe) as i64)
            .reduce(f)
            .map_or(f64::NAN, |v| v as f64)
    };
    match op {
        ReduceOp::Sum => vals.sum(),
        ReduceOp::Prod => vals.product(),
        ReduceOp::Min => vals.fold(f64::INFINITY, f64::min),
        ReduceOp::Max => vals.fold(f64::NEG_INFINITY, f64::max),
        ReduceOp::And => bits(|a, b| a & b),
        ReduceOp::Or => bits(|a, b| a | b),
        ReduceOp::Xor => bits(|a, b| a ^ b),
        ReduceOp::Avg => vals.sum::<f64>() / n as f64,
        ReduceOp::PreMulSum(s) => vals.map(|v| s * v).sum(),
        // An operator the library gained after this was written: no reference, so every
        // element is reported wrong rather than passed unchecked.
        _ => f64::NAN,
    }
}

/// What PE `spec.my_pe` should hold at index `k` of its output, or `None` where the
/// collective leaves it unspecified (outputs of non-root PEs for rooted reductions and
/// gathers).
pub fn expected(spec: &Spec, k: usize) -> Option<f64> {
    let (me, n, root) = (spec.my_pe, spec.n_pes, spec.root);
    let input = |pe: usize, i: usize| input_value(spec, pe, i);
    let reduce_all = |i: usize| reduce(spec.op, n, |pe| input(pe, i));
    let c = spec.layout.chunk.max(1);
    match spec.coll {
        Collective::Barrier | Collective::Sync => None,
        Collective::AllReduce => Some(reduce_all(k)),
        Collective::Reduce => (me == root).then(|| reduce_all(k)),
        Collective::Broadcast => Some(input(root, k)),
        Collective::Fcollect => Some(input(k / c, k % c)),
        Collective::Gather => (me == root).then(|| input(k / c, k % c)),
        Collective::ReduceScatter => Some(reduce_all(me * c + k)),
        Collective::Alltoall => Some(input(k / c, me * c + k % c)),
        Collective::Scatter => Some(input(root, me * c + k)),
    }
}

/// The relative error a floating-point result over `n` PEs may have (0 for integers and truth
/// values, which must be exact). Each of the up to `n` steps of a ring or tree rounds once
/// (partial sums of the positive inputs never exceed the result), and `avg` and `premul_sum`
/// once more: at most `(n + 1)` unit roundoffs `u` (half a unit in the last place). As in the
/// library's GPU tests (`tests/gpu_collectives.rs`), the allowance is per type: four times that
/// for f64, f32, f16 and bf16 (bf16's unit is 8x f16's); the bound itself for the 8-bit floats,
/// whose units are so large (3 mantissa bits in e4m3, 2 in e5m2) that more would pass anything.
pub fn tolerance(dtype: DataType, n: usize) -> f64 {
    let roundings = (n + 1) as f64;
    // Unit roundoff from machine epsilon (the gap between 1 and the next value).
    let u = |eps: f64| eps / 2.0 * roundings;
    match dtype {
        DataType::F64 => 4.0 * u(f64::EPSILON),
        DataType::F32 => 4.0 * u(f64::from(f32::EPSILON)),
        DataType::F16 => 4.0 * u(half::f16::EPSILON.to_f64()),
        DataType::BF16 => 4.0 * u(half::bf16::EPSILON.to_f64()),
        DataType::F8E4M3 => u(2f64.powi(-3)),
        DataType::F8E5M2 => u(2f64.powi(-2)),
        DataType::I8
        | DataType::I16
        | DataType::I32
        | DataType::I64
        | DataType::U8
        | DataType::U16
        | DataType::U32
        | DataType::U64
        | DataType::Bool8 => 0.0,
    }
}

/// Whether `got` (one element of `dtype`, as read back) is the reference `want` of a
/// collective over `n` PEs: floats within [`tolerance`] (relative, and at least that much
/// absolute), integers and truth values byte for byte as the type converts `want` (so an
/// integer average is truncated, and a truth value is the byte 0 or 1, nothing else).
pub fn element_ok(dtype: DataType, got: &[u8], want: f64, n: usize) -> bool {
    if want.is_nan() {
        return false;
    }
    if dtype.is_float() {
        let g = decode(dtype, got);
        !g.is_nan() && (g - want).abs() <= tolerance(dtype, n) * want.abs().max(1.0)
    } else {
        let mut buf = [0u8; 16];
        let w = &mut buf[..dtype.size()];
        encode(dtype, want, w);
        got == w
    }
}

/// What an in-place buffer holds outside its input before a check run: a byte no element of
/// any type reads back as a right answer here (f32 1.9e16, bf16 1.5e16, f8e4m3 20, i8 90,
/// bool8 90, which is neither 0 nor 1), so an output the call never wrote is counted wrong.
pub const POISON: u8 = 0x5a;

/// This PE's input buffer for `spec`: its input; in place the one buffer
/// ([`Spec::in_place_buffer`]), [`POISON`] but for the input at its offset.
pub fn make_input(spec: &Spec) -> Vec<u8> {
    let sz = spec.dtype.size();
    let at = spec.in_place_buffer().map_or(0, |ip| ip.input_at * sz);
    let mut v = vec![POISON; spec.filled_bytes()];
    for (i, e) in v[at..at + spec.in_bytes()].chunks_exact_mut(sz).enumerate() {
        encode(spec.dtype, input_value(spec, spec.my_pe, i), e);
    }
    v
}

/// This PE's output in `buffer`, what [`Implementation::read_output`](crate::impls::Implementation::read_output)
/// returned: all of it out of place, the output part of the one buffer in place; `None` when
/// the buffer is too short to hold it.
pub fn output_of<'a>(spec: &Spec, buffer: &'a [u8]) -> Option<&'a [u8]> {
    let sz = spec.dtype.size();
    let (at, whole) = match spec.in_place_buffer() {
        Some(ip) => (ip.output_at * sz, ip.elems * sz),
        None => (0, spec.out_bytes()),
    };
    (buffer.len() >= whole).then(|| &buffer[at..at + spec.out_bytes()])
}

/// Wrong elements of this PE's output for `spec`, read from `buffer` (the whole buffer
/// [`Implementation::read_output`](crate::impls::Implementation::read_output) gives; a
/// buffer too short for it is wrong in every element).
pub fn count_wrong(spec: &Spec, buffer: &[u8]) -> u64 {
    let sz = spec.dtype.size();
    let Some(output) = output_of(spec, buffer) else {
        return spec.layout.out_elems as u64;
    };
    let mut wrong = 0;
    for (k, e) in output.chunks_exact(sz).enumerate() {
        if let Some(want) = expected(spec, k) {
            wrong += u64::from(!element_ok(spec.dtype, e, want, spec.n_pes));
        }
    }
    wrong
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec_of(coll: Collective, dtype: DataType, op: ReduceOp, me: usize, n: usize) -> Spec {
        let count = coll.count_for(8 * n * dtype.size(), dtype.size(), n);
        Spec {
            coll,
            dtype,
            op,
            root: 0,
            count,
            layout: coll.layout(count, n),
            in_place: false,
            my_pe: me,
            n_pes: n,
        }
    }

    fn spec(coll: Collective, me: usize) -> Spec {
        spec_of(coll, DataType::F32, ReduceOp::Sum, me, 2)
    }

    /// The right answer, as the device would write it: the reference in the element type.
    fn host_result(s: &Spec) -> Vec<u8> {
        let sz = s.dtype.size();
        let mut out = vec![0u8; s.out_bytes()];
        for (k, e) in out.chunks_exact_mut(sz).enumerate() {
            encode(s.dtype, expected(s, k).unwrap_or(0.0), e);
        }
        out
    }

    fn bytes(dtype: DataType, v: f64) -> Vec<u8> {
        let mut b = vec![0u8; dtype.size()];
        encode(dtype, v, &mut b);
        b
    }

    fn all_ops() -> Vec<ReduceOp> {
        let mut ops = ReduceOp::BASIC.to_vec();
        ops.extend([ReduceOp::PreMulSum(3.0), ReduceOp::PreMulSum(0.5)]);
        ops
    }

    #[test]
    fn encode_decode_round_trips_for_every_type() {
        for &t in DataType::ALL {
            let b = bytes(t, 7.0);
            let back = if t.kind() == ElementKind::Bool {
                1.0
            } else {
                7.0
            };
            assert_eq!(decode(t, &b), back, "{t}");
            assert_eq!(decode(t, &bytes(t, 0.0)), 0.0, "{t}");
        }
        assert_eq!(bytes(DataType::F32, 1.5), 1.5f32.to_ne_bytes());
        assert_eq!(bytes(DataType::BF16, 1.0), half::bf16::ONE.to_ne_bytes());
        assert_eq!(bytes(DataType::Bool8, 5.0), [1]);
        assert_eq!(bytes(DataType::I8, 1000.0), [127]);
    }

    #[test]
    fn the_reference_covers_every_operator() {
        let v = [6.0, 3.0, 5.0];
        let at = |pe: usize| v[pe];
        assert_eq!(reduce(ReduceOp::Sum, 3, at), 14.0);
        assert_eq!(reduce(ReduceOp::Prod, 3, at), 90.0);
        assert_eq!(reduce(ReduceOp::Min, 3, at), 3.0);
        assert_eq!(reduce(ReduceOp::Max, 3, at), 6.0);
        assert_eq!(reduce(ReduceOp::And, 3, at), 0.0);
        assert_eq!(reduce(ReduceOp::Or, 3, at), 7.0);
        assert_eq!(reduce(ReduceOp::Xor, 3, at), 0.0);
        assert_eq!(reduce(ReduceOp::Xor, 2, at), 5.0);
        assert_eq!(reduce(ReduceOp::And, 2, at), 2.0);
        assert_eq!(reduce(ReduceOp::Avg, 3, at), 14.0 / 3.0);
        assert_eq!(reduce(ReduceOp::PreMulSum(0.5), 3, at), 7.0);
        assert_eq!(reduce(ReduceOp::PreMulSum(-2.0), 2, at), -18.0);
    }

    #[test]
    fn integer_averages_truncate_and_must_be_exact() {
        let want = reduce(ReduceOp::Avg, 3, |pe| [6.0, 3.0, 5.0][pe]);
        assert!(element_ok(
            DataType::I32,
            &bytes(DataType::I32, 4.0),
            want,
            3
        ));
        assert!(!element_ok(
            DataType::I32,
            &bytes(DataType::I32, 5.0),
            want,
            3
        ));
        assert!(element_ok(DataType::U8, &[4], want, 3));
        assert!(!element_ok(
            DataType::U64,
            &bytes(DataType::U64, 5.0),
            4.0,
            3
        ));
    }

    #[test]
    fn tolerances_per_type() {
        for &t in DataType::ALL {
            assert_eq!(tolerance(t, 2) > 0.0, t.is_float(), "{t}");
        }
        let order = [
            DataType::F64,
            DataType::F32,
            DataType::F16,
            DataType::BF16,
            DataType::F8E4M3,
            DataType::F8E5M2,
        ];
        for w in order.windows(2) {
            assert!(tolerance(w[0], 8) < tolerance(w[1], 8), "{w:?}");
        }
        assert!(tolerance(DataType::F32, 8) > tolerance(DataType::F32, 2));
        // An f32 average one unit off passes; a thousandth off does not (it did before).
        let third = 7.0 / 3.0;
        let f = |v: f32| v.to_ne_bytes();
        assert!(element_ok(DataType::F32, &f(third as f32), third, 3));
        let next = f32::from_bits((third as f32).to_bits() + 1);
        assert!(element_ok(DataType::F32, &f(next), third, 3));
        assert!(!element_ok(
            DataType::F32,
            &f(third as f32 * 1.001),
            third,
            3
        ));
        // bf16 rounds 7/3 to 2.328125: 0.2% off, within its tolerance; 2.5 (7% off) is not.
        let b = bytes(DataType::BF16, third);
        assert!((decode(DataType::BF16, &b) - third).abs() > 1e-3);
        assert!(element_ok(DataType::BF16, &b, third, 3));
        assert!(!element_ok(
            DataType::BF16,
            &bytes(DataType::BF16, 2.5),
            third,
            3
        ));
        // e5m2 has no 9 (8 and 10 around it); e4m3 has 9 but not 17.
        assert_eq!(decode(DataType::F8E5M2, &bytes(DataType::F8E5M2, 9.0)), 8.0);
        assert!(element_ok(
            DataType::F8E5M2,
            &bytes(DataType::F8E5M2, 9.0),
            9.0,
            2
        ));
        assert!(element_ok(
            DataType::F8E4M3,
            &bytes(DataType::F8E4M3, 17.0),
            17.0,
            4
        ));
        assert!(!element_ok(
            DataType::F8E4M3,
            &bytes(DataType::F8E4M3, 12.0),
            9.0,
            2
        ));
        // NaN is never right.
        assert!(!element_ok(DataType::F64, &f64::NAN.to_ne_bytes(), 1.0, 2));
        assert!(!element_ok(
            DataType::F64,
            &1.0f64.to_ne_bytes(),
            f64::NAN,
            2
        ));
    }

    #[test]
    fn truth_values_are_the_byte_0_or_1() {
        assert!(element_ok(DataType::Bool8, &[1], 1.0, 2));
        assert!(!element_ok(DataType::Bool8, &[2], 1.0, 2));
        assert!(!element_ok(DataType::Bool8, &[0], 1.0, 2));
        // The inputs vary, so and/or/min/max are not constant.
        let s = spec_of(Collective::AllReduce, DataType::Bool8, ReduceOp::And, 0, 2);
        let outs: Vec<f64> = (0..8).filter_map(|k| expected(&s, k)).collect();
        assert!(outs.contains(&0.0) && outs.contains(&1.0), "{outs:?}");
        let s = ReduceOp::Or;
        let s = spec_of(Collective::AllReduce, DataType::Bool8, s, 0, 2);
        let outs: Vec<f64> = (0..8).filter_map(|k| expected(&s, k)).collect();
        assert!(outs.contains(&0.0) && outs.contains(&1.0), "{outs:?}");
    }

    #[test]
    fn a_right_answer_has_no_wrong_elements() {
        for c in [
            Collective::AllReduce,
            Collective::Fcollect,
            Collective::Alltoall,
            Collective::ReduceScatter,
        ] {
            let s = spec(c, 1);
            assert_eq!(count_wrong(&s, &host_result(&s)), 0, "{c:?}");
        }
    }

    #[test]
    fn every_type_and_operator_checks_itself() {
        for &t in DataType::ALL {
            for op in all_ops() {
                if !op.applies_to(t.kind()) {
                    continue;
                }
                for n in [2, 3, 8] {
                    for c in [Collective::AllReduce, Collective::ReduceScatter] {
                        let s = spec_of(c, t, op, n - 1, n);
                        let want: Vec<f64> = (0..s.layout.out_elems)
                            .map(|k| expected(&s, k).unwrap())
                            .collect();
                        assert!(want.iter().all(|w| w.is_finite()), "{t} {op} {want:?}");
                        let out = host_result(&s);
                        assert_eq!(count_wrong(&s, &out), 0, "{c:?} {t} {op} n {n}");
                    }
                }
            }
        }
    }

    #[test]
    fn wrong_elements_are_counted() {
        let s = spec(Collective::AllReduce, 0);
        let mut out = host_result(&s);
        encode(DataType::F32, 99.0, &mut out[4..8]);
        assert_eq!(count_wrong(&s, &out), 1);
        assert_eq!(count_wrong(&s, &[]), 16);
        // The input alone is not an all-reduce.
        assert!(count_wrong(&s, &make_input(&s)) > 0);
    }

    /// `spec` of PE `me` in place.
    fn in_place(coll: Collective, dtype: DataType, op: ReduceOp, me: usize, n: usize) -> Spec {
        Spec {
            in_place: true,
            ..spec_of(coll, dtype, op, me, n)
        }
    }

    /// The collective run on the host over every PE's one buffer (`bufs`, as [`make_input`]
    /// fills them), by NCCL's definition: each PE's input read at `sendbuf` and its output
    /// written at `recvbuf`, pointers into its buffer placed by NCCL's in-place rules
    /// (written out here from nccl4py's docs, not from [`Spec::in_place_buffer`]). What a right
    /// in-place implementation leaves in the buffers.
    fn nccl_in_place_on_host(specs: &[Spec], bufs: &mut [Vec<u8>]) {
        let s0 = specs[0];
        let (n, c, sz, root) = (s0.n_pes, s0.layout.chunk, s0.dtype.size(), s0.root);
        let ptrs = |me: usize| match s0.coll {
            // sendbuf == recvbuf + rank * count; recvbuf is the buffer.
            Collective::Fcollect | Collective::Gather => (me * c, 0),
            // recvbuf == sendbuf + rank * count; sendbuf is the buffer.
            Collective::ReduceScatter | Collective::Scatter => (0, me * c),
            _ => (0, 0),
        };
        let inputs: Vec<Vec<f64>> = (0..n)
            .map(|pe| {
                let at = ptrs(pe).0 * sz;
                bufs[pe][at..at + s0.in_bytes()]
                    .chunks_exact(sz)
                    .map(|b| decode(s0.dtype, b))
                    .collect()
            })
            .collect();
        let red = |i: usize| reduce(s0.op, n, |pe| inputs[pe][i]);
        for me in 0..n {
            let out: Option<Vec<f64>> = match s0.coll {
                Collective::AllReduce => Some((0..s0.count).map(red).collect()),
                Collective::Reduce => (me == root).then(|| (0..s0.count).map(red).collect()),
                Collective::Broadcast => Some(inputs[root].clone()),
                Collective::Fcollect => Some(inputs.concat()),
                Collective::Gather => (me == root).then(|| inputs.concat()),
                Collective::ReduceScatter => Some((me * c..me * c + c).map(red).collect()),
                Collective::Scatter => Some(inputs[root][me * c..me * c + c].to_vec()),
                _ => unreachable!("no in-place form"),
            };
            let at = ptrs(me).1 * sz;
            for (k, v) in out.into_iter().flatten().enumerate() {
                encode(s0.dtype, v, &mut bufs[me][at + k * sz..at + (k + 1) * sz]);
            }
        }
    }

    #[test]
    fn in_place_buffers_check_by_nccl_s_layout() {
        let colls = [
            Collective::AllReduce,
            Collective::Reduce,
            Collective::Broadcast,
            Collective::Fcollect,
            Collective::Gather,
            Collective::ReduceScatter,
            Collective::Scatter,
        ];
        for coll in colls {
            for n in [1, 2, 3, 4, 8] {
                for (dtype, op) in [
                    (DataType::F32, ReduceOp::Sum),
                    (DataType::BF16, ReduceOp::Max),
                    (DataType::I8, ReduceOp::Prod),
                    (DataType::Bool8, ReduceOp::Or),
                ] {
                    let specs: Vec<Spec> = (0..n)
                        .map(|me| Spec {
                            root: n / 2,
                            ..in_place(coll, dtype, op, me, n)
                        })
                        .collect();
                    let mut bufs: Vec<Vec<u8>> = specs.iter().map(make_input).collect();
                    for (s, b) in specs.iter().zip(&bufs) {
                        assert_eq!(b.len(), s.in_place_buffer().unwrap().elems * dtype.size());
                    }
                    let what = format!("{coll:?} {dtype} {op} n {n}");
                    // Before the call, an output that is not the input is all wrong (the poison).
                    if matches!(coll, Collective::Fcollect) && n > 1 {
                        assert!(count_wrong(&specs[0], &bufs[0]) > 0, "{what}");
                    }
                    nccl_in_place_on_host(&specs, &mut bufs);
                    for (s, b) in specs.iter().zip(&bufs) {
                        assert_eq!(count_wrong(s, b), 0, "{what} PE {}", s.my_pe);
                    }
                }
            }
        }
    }

    /// What the benchmark did before: nvshmem-rs got an all-gather buffer of one block, and
    /// its reduce-scatter output was read from block 0 on every PE. Both are wrong now.
    #[test]
    fn the_old_in_place_buffers_are_wrong() {
        let n = 2;
        let specs: Vec<Spec> = (0..n)
            .map(|me| in_place(Collective::Fcollect, DataType::BF16, ReduceOp::Sum, me, n))
            .collect();
        let one_block = vec![0u8; specs[1].in_bytes()];
        assert_eq!(
            count_wrong(&specs[1], &one_block),
            specs[1].layout.out_elems as u64
        );

        let specs: Vec<Spec> = (0..n)
            .map(|me| {
                in_place(
                    Collective::ReduceScatter,
                    DataType::F32,
                    ReduceOp::Sum,
                    me,
                    n,
                )
            })
            .collect();
        let mut bufs: Vec<Vec<u8>> = specs.iter().map(make_input).collect();
        nccl_in_place_on_host(&specs, &mut bufs);
        assert_eq!(count_wrong(&specs[1], &bufs[1]), 0);
        // PE 1's block 0 is its input there, not the reduction.
        let block = specs[1].out_bytes();
        let mut block0 = bufs[1].clone();
        block0.copy_within(0..block, block);
        assert!(count_wrong(&specs[1], &block0) > 0);
        // And the input left alone (no call made) is not a reduce-scatter either.
        assert!(count_wrong(&specs[1], &make_input(&specs[1])) > 0);
    }

    #[test]
    fn inputs_differ_between_pes() {
        let a = make_input(&spec(Collective::AllReduce, 0));
        let b = make_input(&spec(Collective::AllReduce, 1));
        assert_eq!(a.len(), 64);
        assert_ne!(a, b);
    }

    #[test]
    fn expected_results() {
        let v = |s: &Spec, pe, i| input_value(s, pe, i);
        let s = spec(Collective::AllReduce, 1);
        assert_eq!(expected(&s, 1), Some(v(&s, 0, 1) + v(&s, 1, 1)));
        let s = spec(Collective::Alltoall, 1);
        // PE 1's output chunk 0 comes from PE 0's chunk 1.
        let c = s.layout.chunk;
        assert_eq!(expected(&s, 1), Some(v(&s, 0, c + 1)));
        let s = spec(Collective::Gather, 1);
        assert_eq!(expected(&s, 3), None);
        let s = spec(Collective::Gather, 0);
        assert_eq!(expected(&s, c + 1), Some(v(&s, 1, 1)));
        let s = spec(Collective::ReduceScatter, 1);
        assert_eq!(expected(&s, 0), Some(v(&s, 0, c) + v(&s, 1, c)));
        let s = spec_of(Collective::AllReduce, DataType::I32, ReduceOp::Avg, 0, 2);
        assert_eq!(expected(&s, 0), Some((v(&s, 0, 0) + v(&s, 1, 0)) / 2.0));
    }
}
