//! `--check`: the input pattern, the host's expected answer, and how close a result must be.
//!
//! The reference reduction and the tolerance are the library's (`nvshmem::testing`), which the
//! repository's GPU tests judge results by too: one definition of a right answer. Elements go
//! to and from bytes through the library's one list of element types
//! ([`testing::encode`], [`testing::decode`]), so every [`DataType`] is covered without a
//! table of our own; the reference covers every [`ReduceOp`].
use nvshmem::testing::{self, encode, Reference};
use nvshmem::{collective::Collective, DataType, ElementKind, ReduceOp};

use crate::{coll::CollectiveExt, impls::Spec};

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

/// What PE `spec.my_pe` should hold at index `k` of its output, or `None` where the
/// collective leaves it unspecified (outputs of non-root PEs for rooted reductions and
/// gathers).
pub fn expected(spec: &Spec, k: usize) -> Option<Reference> {
    let (me, n, root) = (spec.my_pe, spec.n_pes, spec.root);
    let input = |pe: usize, i: usize| Reference::from(input_value(spec, pe, i));
    let reduce_all = |i: usize| testing::reduce(spec.op, n, |pe| input_value(spec, pe, i));
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
        // Only collectives of `coll::TABLE_ORDER` are parsed, and every implementation's
        // `run_once` refuses any other before its output could be checked.
        c => unreachable!("{c} is not benchmarked"),
    }
}

/// Whether `got` (one element of `dtype`, as read back) is the reference `want` of a
/// collective over `n` PEs, by the library's tolerance ([`testing::element_ok`]) with as many
/// roundings as any implementation benchmarked may make ([`testing::roundings`]: NCCL's ring
/// rounds at every hop, fp8 included).
pub fn element_ok(dtype: DataType, got: &[u8], want: Reference, n: usize) -> bool {
    testing::element_ok(dtype, got, want, testing::roundings(n))
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

/// What this PE's output buffer holds before a checked call, out of place: [`POISON`]
/// throughout, so that an element the call never wrote is counted wrong, not taken for a right
/// answer an earlier call left there (or for the zeros a fresh buffer holds, which are
/// `premul_sum(0)`'s answer). `None` in place (the one buffer is [`make_input`]'s) and for
/// barrier and sync, which have no output.
pub fn make_output(spec: &Spec) -> Option<Vec<u8>> {
    (!spec.in_place && !spec.coll.is_sync_only()).then(|| vec![POISON; spec.out_bytes()])
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
    use nvshmem::testing::decode;

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
            encode(s.dtype, expected(s, k).map_or(0.0, |r| r.value), e);
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
    fn truth_values_are_the_byte_0_or_1() {
        assert!(element_ok(DataType::Bool8, &[1], 1.0.into(), 2));
        assert!(!element_ok(DataType::Bool8, &[2], 1.0.into(), 2));
        assert!(!element_ok(DataType::Bool8, &[0], 1.0.into(), 2));
        // The inputs vary, so and/or/min/max are not constant.
        let s = spec_of(Collective::AllReduce, DataType::Bool8, ReduceOp::And, 0, 2);
        let outs: Vec<f64> = (0..8)
            .filter_map(|k| expected(&s, k))
            .map(|r| r.value)
            .collect();
        assert!(outs.contains(&0.0) && outs.contains(&1.0), "{outs:?}");
        let s = ReduceOp::Or;
        let s = spec_of(Collective::AllReduce, DataType::Bool8, s, 0, 2);
        let outs: Vec<f64> = (0..8)
            .filter_map(|k| expected(&s, k))
            .map(|r| r.value)
            .collect();
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
                            .map(|k| expected(&s, k).unwrap().value)
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
        let red = |i: usize| testing::reduce(s0.op, n, |pe| inputs[pe][i]).value;
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
        let expected = |s: &Spec, k| expected(s, k).map(|r| r.value);
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
