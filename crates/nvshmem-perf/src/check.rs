//! `--check`: the input pattern, the host's expected answer, and how close a result must be.
//!
//! Copies (broadcast, fcollect, alltoall, gather, scatter) move bytes: every element must
//! arrive bit for bit, whatever its type. Reductions are judged by the library's reference and
//! tolerance (`nvshmem::testing`), which the repository's GPU tests judge results by too: one
//! definition of a right answer. Their inputs are small whole numbers whose every partial
//! result is exact in the element type ([`exact_limit`]), so that where no step divides or
//! scales, a right result is exact on every path (any order of additions, rounded at every hop
//! or once), and is required exact; avg and premul_sum keep the library's tolerance
//! ([`roundings_allowed`]). Elements go to and from bytes through the library's one list of
//! element types ([`testing::encode`], [`testing::decode`]), so every [`DataType`] is covered
//! without a table of our own; the reference covers every [`ReduceOp`].
//!
//! An output the call must write starts as poison ([`poison`], [`make_output`], and in place
//! what [`make_input`] leaves outside the input), a value no right answer has, so that an
//! element never written is counted wrong rather than taken for a right answer that zeros or
//! an earlier call left there.
use nvshmem::testing::{self, decode, encode, Reference};
use nvshmem::{collective::Collective, DataType, ElementKind, ReduceOp};

use rayon::prelude::*;

use crate::{coll::CollectiveExt, impls::Spec};

/// Whether `spec` moves data without computing on it: broadcast, fcollect, alltoall, gather,
/// scatter. Its output is checked bit for bit.
pub fn is_copy(spec: &Spec) -> bool {
    !spec.coll.reduces() && !spec.coll.is_sync_only()
}

/// The largest whole number up to which every whole number is exact in `dtype` (and in `f64`,
/// the reference's type): `2^p` for a float of `p` significant bits (16 for f8e4m3, 8 for
/// f8e5m2, 256 for bf16), one below the largest value for an integer (whose largest value is
/// the poison, [`poison`]), 1 for truth values. Found from the type's own conversion, so a type
/// added to the library needs no line here.
pub fn exact_limit(dtype: DataType) -> u64 {
    const F64_EXACT: u64 = 1 << 53;
    let round_trips = |v: u64| {
        let mut b = [0u8; 16];
        let b = &mut b[..dtype.size()];
        encode(dtype, v as f64, b);
        decode(dtype, b) == v as f64
    };
    match dtype.kind() {
        ElementKind::Float => (1..53)
            .map(|k| 1u64 << k)
            .find(|&p| !round_trips(p + 1))
            .unwrap_or(F64_EXACT),
        ElementKind::Bool => 1,
        // Integers saturate: the largest value is what the largest f64 converts to.
        _ => {
            let mut b = [0u8; 16];
            let b = &mut b[..dtype.size()];
            encode(dtype, f64::MAX, b);
            (decode(dtype, b) as u64).min(F64_EXACT + 1) - 1
        }
    }
}

/// The inputs of one point, worked out once ([`exact_limit`] searches the type's conversions,
/// the poison is encoded).
///
/// A copy's input is bits drawn from (PE, byte offset) by a mixing function
/// ([`Pattern::copy_element`]): every PE's input differs from every other's all along, so a
/// block from the wrong PE, or shifted, is wrong, and the bits take every pattern the type has
/// (NaN, infinities, -0.0, subnormals), which a copy must move as they are.
///
/// A reduction's inputs are small whole numbers, drawn per PE and element by the same
/// function: up to 5 where the type allows, the sum over the team's PEs at most
/// [`exact_limit`], so that every partial sum, in any order, is exact; products of ones and a
/// few twos, exact for the same reason. Truth values are the same on every PE but one (a
/// different one an element, or none): false there for and and min, true for or and max, so
/// that the answer is each value about half the time and every PE's input decides some of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pattern {
    /// Bytes of an element.
    size: usize,
    /// Truth values.
    truth: bool,
    /// For truth values: the one PE's value is true (or, max), not false (and, min).
    one_true: bool,
    /// Ones and twos, for a product.
    product: bool,
    /// The largest input of a sum; 0 where the team has more PEs than the exact limit, and
    /// only every `every`-th PE gives a one.
    most: usize,
    /// Where products have a two, or `most` is 0 a one: at PEs `pe` with `(i + pe) % every ==
    /// 0`.
    every: usize,
    /// PEs in the team.
    n: usize,
    /// The [`poison`], in the first `size` bytes.
    poison: [u8; 8],
}

/// The 8-byte word a copy's input starts with one time in 16: two f32 -0.0, the word the
/// library's Lamport copies fill a slot with before data arrives, so their masks must tell
/// this data from no data.
const LAMPORT_EMPTY: u64 = 0x8000_0000_8000_0000;

/// 64 well-mixed bits of `(a, b)` (splitmix64's finalizer): inputs that no period in PEs or
/// elements repeats.
fn mix(a: usize, b: usize) -> u64 {
    let mut z = (a as u64)
        .wrapping_mul(0x9e37_79b9_7f4a_7c15)
        .wrapping_add(b as u64)
        .wrapping_add(0x6a09_e667_f3bc_c909);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl Pattern {
    /// The pattern of `spec`.
    pub fn of(spec: &Spec) -> Self {
        let n = spec.n_pes.max(1);
        let limit = usize::try_from(exact_limit(spec.dtype)).unwrap_or(usize::MAX);
        let product = spec.op == ReduceOp::Prod;
        let every = if product {
            // At most log2(limit) twos in any element's product.
            n.div_ceil(limit.ilog2().max(1) as usize).max(4)
        } else {
            n.div_ceil(limit)
        };
        let mut poison_bytes = [0u8; 8];
        let p = poison(spec);
        poison_bytes[..p.len()].copy_from_slice(&p);
        Pattern {
            size: spec.dtype.size(),
            truth: spec.dtype.kind() == ElementKind::Bool,
            one_true: matches!(spec.op, ReduceOp::Or | ReduceOp::Max),
            product,
            most: (limit / n).min(5),
            every,
            n,
            poison: poison_bytes,
        }
    }

    /// The value PE `pe` puts at index `i` of its input for a reduction.
    pub fn value(&self, pe: usize, i: usize) -> f64 {
        let marked = (i + pe).is_multiple_of(self.every);
        if self.truth {
            // The one PE of element i, or none (n to 2n - 1).
            let one = mix(self.n, i) as usize % (2 * self.n) == pe;
            f64::from(u8::from(one == self.one_true))
        } else if self.product {
            if marked {
                2.0
            } else {
                1.0
            }
        } else if self.most == 0 {
            f64::from(u8::from(marked))
        } else {
            (1 + mix(pe, i) % self.most as u64) as f64
        }
    }

    /// The bytes PE `pe` puts at index `i` of its input for a copy (`out`: one element): the
    /// element's bytes of the word `mix(pe, w)` (or [`LAMPORT_EMPTY`]) at byte offset `8 w`;
    /// for truth values the low bit of its byte. Never the [`poison`]: an element that would
    /// be has its lowest bit flipped.
    pub fn copy_element(&self, pe: usize, i: usize, out: &mut [u8]) {
        let at = i * self.size;
        let word = match mix(pe, at / 8) {
            w if w % 16 == 0 => LAMPORT_EMPTY,
            w => w,
        };
        let bytes = word.to_le_bytes();
        out.copy_from_slice(&bytes[at % 8..at % 8 + self.size]);
        if self.truth {
            out[0] &= 1;
        }
        if out == &self.poison[..self.size] {
            out[0] ^= 1;
        }
    }
}

/// Where element `k` of PE `spec.my_pe`'s output comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// Nothing: the collective leaves it unspecified (outputs of non-root PEs for rooted
    /// reductions and gathers).
    Unspecified,
    /// Element `i` of PE `pe`'s input, moved as it is.
    Copy {
        /// The PE whose input it is.
        pe: usize,
        /// The index in that input.
        i: usize,
    },
    /// The reduction over every PE of input element `i`.
    Reduction(usize),
}

/// Where element `k` of PE `spec.my_pe`'s output comes from, by the collective's definition.
pub fn source(spec: &Spec, k: usize) -> Source {
    let (me, root) = (spec.my_pe, spec.root);
    let c = spec.layout.chunk.max(1);
    let rooted = |s: Source| if me == root { s } else { Source::Unspecified };
    match spec.coll {
        Collective::Barrier | Collective::Sync => Source::Unspecified,
        Collective::AllReduce => Source::Reduction(k),
        Collective::Reduce => rooted(Source::Reduction(k)),
        Collective::ReduceScatter => Source::Reduction(me * c + k),
        Collective::Broadcast => Source::Copy { pe: root, i: k },
        Collective::Fcollect => Source::Copy {
            pe: k / c,
            i: k % c,
        },
        Collective::Gather => rooted(Source::Copy {
            pe: k / c,
            i: k % c,
        }),
        Collective::Alltoall => Source::Copy {
            pe: k / c,
            i: me * c + k % c,
        },
        Collective::Scatter => Source::Copy {
            pe: root,
            i: me * c + k,
        },
        // Only collectives of `coll::TABLE_ORDER` are parsed, and every implementation's
        // `run_once` refuses any other before its output could be checked.
        c => unreachable!("{c} is not benchmarked"),
    }
}

/// The host's reduction over every PE of input element `i` of a reduction `spec`, whose
/// inputs are `p`.
pub fn reduce_of(spec: &Spec, p: &Pattern, i: usize) -> Reference {
    testing::reduce(spec.op, spec.n_pes, |pe| p.value(pe, i))
}

/// How many roundings a reduction's result may show ([`testing::element_ok`]'s `k`): none
/// where no step divides or scales, in every type: the inputs keep the reference and every
/// partial result exact ([`Pattern`]), so every path, whatever its order or how often it
/// rounds, computes the exact answer (a tolerance of n+1 roundings let a bf16 sum over 8 PEs
/// be a unit off, an fp8 one take any value); for avg and premul_sum, whose division or
/// scaling rounds, as many as any implementation benchmarked may make
/// ([`testing::roundings`]: NCCL's ring rounds at every hop, fp8 included). (Integers and
/// truth values are exact whatever the count.)
pub fn roundings_allowed(spec: &Spec) -> usize {
    match spec.op {
        ReduceOp::Avg | ReduceOp::PreMulSum(_) => testing::roundings(spec.n_pes),
        _ => 0,
    }
}

/// One element of a value no right answer of `spec` has, to fill what a checked call must
/// write: NaN for floats (never within a tolerance); for integers the largest value, above
/// every reduction's answer ([`exact_limit`]), or 1 for premul_sum by a whole number of
/// magnitude 2 or more, whose answers are its multiples or saturate; for truth values the byte
/// 0x5a, neither 0 nor 1. Copies' inputs never hold it ([`Pattern::copy_element`]).
pub fn poison(spec: &Spec) -> Vec<u8> {
    let dtype = spec.dtype;
    let mut b = vec![0u8; dtype.size()];
    match dtype.kind() {
        ElementKind::Float => encode(dtype, f64::NAN, &mut b),
        ElementKind::Bool => b.fill(POISON_BYTE),
        _ => match spec.op {
            ReduceOp::PreMulSum(s) if spec.coll.reduces() && s.abs() >= 2.0 => {
                encode(dtype, 1.0, &mut b)
            }
            _ => encode(dtype, f64::MAX, &mut b),
        },
    }
    b
}

/// The byte [`poison`] fills a truth value with.
const POISON_BYTE: u8 = 0x5a;

/// Whether PE `spec.my_pe`'s input is read by anyone: in place, a non-root PE's buffer of
/// broadcast or scatter is only written (its output), so all of it is poisoned instead.
fn input_read(spec: &Spec) -> bool {
    !(spec.in_place
        && matches!(spec.coll, Collective::Broadcast | Collective::Scatter)
        && spec.my_pe != spec.root)
}

/// This PE's input buffer for `spec`: its input; in place the one buffer
/// ([`Spec::in_place_buffer`]), [`poison`] but for the input at its offset (all poison where
/// no one reads this PE's input).
pub fn make_input(spec: &Spec) -> Vec<u8> {
    let sz = spec.dtype.size();
    let at = spec.in_place_buffer().map_or(0, |ip| ip.input_at * sz);
    let mut v = poison(spec).repeat(spec.filled_bytes() / sz);
    if input_read(spec) {
        let p = Pattern::of(spec);
        let copy = is_copy(spec);
        v[at..at + spec.in_bytes()]
            .par_chunks_exact_mut(sz)
            .with_min_len(PARALLEL_FROM)
            .enumerate()
            .for_each(|(i, e)| {
                if copy {
                    p.copy_element(spec.my_pe, i, e);
                } else {
                    encode(spec.dtype, p.value(spec.my_pe, i), e);
                }
            });
    }
    v
}

/// Elements a thread takes at least, for a point's input and check (rayon's threads: one thread
/// takes seconds over the 64M elements of a 256 MiB point, at every size of a sweep, in both
/// modes; below this, handing work out costs more).
const PARALLEL_FROM: usize = 1 << 16;

/// What this PE's output buffer holds before a checked call, out of place: [`poison`]
/// throughout, so that an element the call never wrote is counted wrong, not taken for a right
/// answer an earlier call left there (or for the zeros a fresh buffer holds, which are
/// `premul_sum(0)`'s answer). `None` in place (the one buffer is [`make_input`]'s) and for
/// barrier and sync, which have no output.
pub fn make_output(spec: &Spec) -> Option<Vec<u8>> {
    (!spec.in_place && !spec.coll.is_sync_only())
        .then(|| poison(spec).repeat(spec.layout.out_elems))
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
/// buffer too short for it is wrong in every element): copies bit for bit, reductions by
/// [`testing::element_ok`] with [`roundings_allowed`].
pub fn count_wrong(spec: &Spec, buffer: &[u8]) -> u64 {
    let sz = spec.dtype.size();
    let Some(output) = output_of(spec, buffer) else {
        return spec.layout.out_elems as u64;
    };
    let k = roundings_allowed(spec);
    let p = Pattern::of(spec);
    output
        .par_chunks_exact(sz)
        .with_min_len(PARALLEL_FROM)
        .enumerate()
        .map(|(k_out, got)| {
            let ok = match source(spec, k_out) {
                Source::Unspecified => true,
                Source::Copy { pe, i } => {
                    let mut want = [0u8; 16];
                    let want = &mut want[..sz];
                    p.copy_element(pe, i, want);
                    got == want
                }
                Source::Reduction(i) => {
                    testing::element_ok(spec.dtype, got, reduce_of(spec, &p, i), k)
                }
            };
            u64::from(!ok)
        })
        .sum()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A spec of `n` PEs (8 elements a PE), as PE `me` sees it: the benches' tests use it too.
    pub(crate) fn spec_of(
        coll: Collective,
        dtype: DataType,
        op: ReduceOp,
        me: usize,
        n: usize,
    ) -> Spec {
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

    fn input_value(s: &Spec, pe: usize, i: usize) -> f64 {
        Pattern::of(s).value(pe, i)
    }

    fn reduced(s: &Spec, i: usize) -> Reference {
        reduce_of(s, &Pattern::of(s), i)
    }

    /// The right answer, as the device would write it: copies' bytes, the reference in the
    /// element type; unspecified elements 0.
    fn host_result(s: &Spec) -> Vec<u8> {
        let sz = s.dtype.size();
        let mut out = vec![0u8; s.out_bytes()];
        let p = Pattern::of(s);
        for (k, e) in out.chunks_exact_mut(sz).enumerate() {
            match source(s, k) {
                Source::Unspecified => {}
                Source::Copy { pe, i } => p.copy_element(pe, i, e),
                Source::Reduction(i) => encode(s.dtype, reduce_of(s, &p, i).value, e),
            }
        }
        out
    }

    /// How many elements of `s`'s output are specified (all but non-roots' of rooted ones).
    fn specified(s: &Spec) -> u64 {
        (0..s.layout.out_elems)
            .filter(|&k| source(s, k) != Source::Unspecified)
            .count() as u64
    }

    fn bytes(dtype: DataType, v: f64) -> Vec<u8> {
        let mut b = vec![0u8; dtype.size()];
        encode(dtype, v, &mut b);
        b
    }

    fn all_ops() -> Vec<ReduceOp> {
        let mut ops = ReduceOp::BASIC.to_vec();
        ops.extend([
            ReduceOp::PreMulSum(3.0),
            ReduceOp::PreMulSum(0.5),
            ReduceOp::PreMulSum(0.0),
            ReduceOp::PreMulSum(-2.0),
            ReduceOp::PreMulSum(1.0),
        ]);
        ops
    }

    /// The collectives with buffers (all but barrier and sync), from the library's one list.
    fn data_collectives() -> impl Iterator<Item = Collective> {
        Collective::ALL.into_iter().filter(|c| !c.is_sync_only())
    }
    fn copies() -> impl Iterator<Item = Collective> {
        data_collectives().filter(|c| !c.reduces())
    }
    fn reductions() -> impl Iterator<Item = Collective> {
        data_collectives().filter(|c| c.reduces())
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
    fn exact_limits_follow_the_types() {
        let limit = |t| exact_limit(t);
        assert_eq!(limit(DataType::F8E4M3), 16);
        assert_eq!(limit(DataType::F8E5M2), 8);
        assert_eq!(limit(DataType::BF16), 256);
        assert_eq!(limit(DataType::F16), 2048);
        assert_eq!(limit(DataType::F32), 1 << 24);
        assert_eq!(limit(DataType::F64), 1 << 53);
        assert_eq!(limit(DataType::I8), 126);
        assert_eq!(limit(DataType::U8), 254);
        assert_eq!(limit(DataType::I16), 32766);
        assert_eq!(limit(DataType::U64), 1 << 53);
        assert_eq!(limit(DataType::Bool8), 1);
        for &t in DataType::ALL {
            let l = limit(t).min(1 << 12);
            for v in 0..=l {
                assert_eq!(
                    decode(t, &bytes(t, v as f64)),
                    v.min(1) as f64 * v as f64,
                    "{t} {v}"
                );
            }
        }
    }

    #[test]
    fn truth_values_are_the_byte_0_or_1() {
        assert!(testing::element_ok(DataType::Bool8, &[1], 1.0.into(), 2));
        assert!(!testing::element_ok(DataType::Bool8, &[2], 1.0.into(), 2));
        assert!(!testing::element_ok(DataType::Bool8, &[0], 1.0.into(), 2));
        // The inputs vary, so and/or/min/max are not constant.
        for op in [ReduceOp::And, ReduceOp::Or] {
            let s = spec_of(Collective::AllReduce, DataType::Bool8, op, 0, 2);
            let outs: Vec<f64> = (0..8).map(|i| reduced(&s, i).value).collect();
            assert!(outs.contains(&0.0) && outs.contains(&1.0), "{op} {outs:?}");
        }
    }

    #[test]
    fn a_right_answer_has_no_wrong_elements() {
        for c in data_collectives() {
            for me in 0..2 {
                let s = spec(c, me);
                assert_eq!(count_wrong(&s, &host_result(&s)), 0, "{c:?}");
            }
        }
    }

    #[test]
    fn every_type_and_operator_checks_itself() {
        for &t in DataType::ALL {
            for op in all_ops() {
                if !op.applies_to(t.kind()) {
                    continue;
                }
                for n in [1, 2, 3, 8, 17, 40] {
                    for c in data_collectives() {
                        let s = spec_of(c, t, op, n - 1, n);
                        let out = host_result(&s);
                        assert_eq!(count_wrong(&s, &out), 0, "{c:?} {t} {op} n {n}");
                    }
                }
            }
        }
    }

    /// Found by an audit: fp8 copies were judged by a reduction's tolerance of n+1 roundings,
    /// which at 2 PEs let f8e5m2 take 0 for any value, and outputs started as zeros, so an
    /// output never written passed. Copies are now bit for bit, in every type.
    #[test]
    fn copies_are_compared_bit_for_bit() {
        for &t in DataType::ALL {
            for c in copies() {
                for n in [2, 3, 8] {
                    let s = spec_of(c, t, ReduceOp::Sum, 0, n);
                    let right = host_result(&s);
                    assert_eq!(count_wrong(&s, &right), 0, "{c:?} {t} n {n}");
                    let all = specified(&s);
                    // One bit off in every element (for fp8 the neighbour a rounding would
                    // give): every element wrong.
                    let mut off = right.clone();
                    off.chunks_exact_mut(t.size()).for_each(|e| e[0] ^= 1);
                    assert_eq!(count_wrong(&s, &off), all, "{c:?} {t} n {n}");
                    // Zeros are wrong wherever the answer is not zero.
                    let zeros = vec![0u8; right.len()];
                    let nonzero = right
                        .chunks_exact(t.size())
                        .filter(|e| e.iter().any(|&b| b != 0))
                        .count() as u64;
                    assert!(nonzero > all / 3, "{t}: {nonzero} of {all}");
                    assert_eq!(count_wrong(&s, &zeros), nonzero, "{c:?} {t} n {n}");
                }
            }
        }
    }

    /// Whatever was poisoned before the call is wrong in every element the call must write:
    /// for premul_sum(0), whose every answer is 0, too.
    #[test]
    fn the_poison_is_never_a_right_answer() {
        for &t in DataType::ALL {
            for op in all_ops() {
                for n in [1, 2, 3, 8, 17, 130] {
                    for c in data_collectives() {
                        if c.reduces() && !op.applies_to(t.kind()) {
                            continue;
                        }
                        let s = spec_of(c, t, op, 0, n);
                        let poisoned = make_output(&s).unwrap();
                        let what = format!("{c:?} {t} {op} n {n}");
                        assert_eq!(count_wrong(&s, &poisoned), specified(&s), "{what}");
                    }
                }
            }
        }
        let s = spec_of(
            Collective::AllReduce,
            DataType::F8E4M3,
            ReduceOp::PreMulSum(0.0),
            0,
            2,
        );
        assert_eq!(count_wrong(&s, &vec![0u8; s.out_bytes()]), 0);
        assert_eq!(
            count_wrong(&s, &make_output(&s).unwrap()),
            s.layout.out_elems as u64
        );
        // In place there is no output buffer of its own.
        let s = Spec {
            in_place: true,
            ..s
        };
        assert_eq!(make_output(&s), None);
    }

    /// Found by an audit: fp8 sums were judged within n+1 roundings, as wide as the values
    /// themselves. Their inputs now keep every partial sum exact, and the result must be exact.
    #[test]
    fn fp8_reductions_are_exact() {
        for t in [DataType::F8E4M3, DataType::F8E5M2] {
            for op in [ReduceOp::Sum, ReduceOp::Prod, ReduceOp::Min, ReduceOp::Max] {
                for n in 1..=20 {
                    let s = spec_of(Collective::AllReduce, t, op, 0, n);
                    assert_eq!(roundings_allowed(&s), 0, "{t} {op} n {n}");
                    let right = host_result(&s);
                    for (i, e) in right.chunks_exact(1).enumerate() {
                        let r = reduced(&s, i);
                        assert_eq!(decode(t, e), r.value, "{t} {op} n {n}: inexact");
                        // The next value up or down is wrong.
                        for step in [e[0].wrapping_add(1), e[0].wrapping_sub(1)] {
                            let mut out = right.clone();
                            out[i] = step;
                            assert_eq!(count_wrong(&s, &out), 1, "{t} {op} n {n} {i}");
                        }
                    }
                    if op == ReduceOp::Sum {
                        // What the old tolerance passed: e5m2's 10 as 8 at 2 PEs.
                        let zeros = vec![0u8; right.len()];
                        assert_eq!(count_wrong(&s, &zeros), specified(&s), "{t} n {n}");
                    }
                }
            }
            // avg and premul_sum divide or scale: the library's tolerance stays.
            let s = spec_of(Collective::AllReduce, t, ReduceOp::Avg, 0, 2);
            assert_eq!(roundings_allowed(&s), testing::roundings(2));
        }
    }

    /// `e` (one element) as the next or previous bit pattern up: the neighbouring value.
    fn step(e: &[u8], up: bool) -> Vec<u8> {
        let mut b = [0u8; 8];
        b[..e.len()].copy_from_slice(e);
        let v = u64::from_le_bytes(b);
        let v = if up {
            v.wrapping_add(1)
        } else {
            v.wrapping_sub(1)
        };
        v.to_le_bytes()[..e.len()].to_vec()
    }

    /// Found by an audit: bf16 and f16 sums were judged within n+1 roundings of their type (a
    /// bf16 sum over 8 PEs could be a unit off), though their small whole inputs keep every
    /// partial sum exact. Every float type's sum, prod, min and max must now be exact; avg and
    /// premul_sum keep the tolerance.
    #[test]
    fn float_reductions_are_exact_where_every_partial_result_is() {
        for t in [DataType::BF16, DataType::F16, DataType::F32, DataType::F64] {
            for op in [ReduceOp::Sum, ReduceOp::Prod, ReduceOp::Min, ReduceOp::Max] {
                for n in [1, 2, 3, 8, 20, 60] {
                    for c in reductions() {
                        let s = spec_of(c, t, op, 0, n);
                        assert_eq!(roundings_allowed(&s), 0, "{t} {op} n {n}");
                        let right = host_result(&s);
                        let sz = t.size();
                        for (k, e) in right.chunks_exact(sz).enumerate() {
                            let Source::Reduction(i) = source(&s, k) else {
                                continue;
                            };
                            assert_eq!(decode(t, e), reduced(&s, i).value, "{t} {op} n {n}");
                            if k >= 8 {
                                continue;
                            }
                            for up in [true, false] {
                                let mut out = right.clone();
                                out[k * sz..(k + 1) * sz].copy_from_slice(&step(e, up));
                                let what = format!("{c:?} {t} {op} n {n} element {k}");
                                assert_eq!(count_wrong(&s, &out), 1, "{what}");
                            }
                        }
                    }
                }
            }
            for op in [ReduceOp::Avg, ReduceOp::PreMulSum(0.5)] {
                let s = spec_of(Collective::AllReduce, t, op, 0, 8);
                assert_eq!(roundings_allowed(&s), testing::roundings(8), "{t} {op}");
            }
        }
        // What the old tolerance passed: a bf16 sum over 8 PEs one unit off.
        let s = spec_of(Collective::AllReduce, DataType::BF16, ReduceOp::Sum, 0, 8);
        let want = reduced(&s, 0);
        assert!(want.value > 8.0);
        let off = bytes(DataType::BF16, want.value + 1.0);
        assert!(testing::element_ok(
            DataType::BF16,
            &off,
            want,
            testing::roundings(8)
        ));
        let mut out = host_result(&s);
        out[..2].copy_from_slice(&off);
        assert_eq!(count_wrong(&s, &out), 1);
    }

    /// Every partial sum of the reductions' inputs, in any order, is exact in the type: the
    /// whole sum (inputs are not negative) is at most the exact limit.
    #[test]
    fn reduction_inputs_keep_partial_results_exact() {
        for &t in DataType::ALL {
            if t.kind() == ElementKind::Bool {
                continue;
            }
            for n in [1, 2, 3, 4, 5, 8, 9, 16, 17, 64, 300] {
                for op in [ReduceOp::Sum, ReduceOp::Prod] {
                    let s = spec_of(Collective::AllReduce, t, op, 0, n);
                    for i in 0..64 {
                        let r = reduced(&s, i).value;
                        assert!(r <= exact_limit(t) as f64, "{t} {op} n {n}: {r}");
                        assert!((0..n).all(|pe| input_value(&s, pe, i) >= 0.0));
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
    /// (written out here from nccl4py's docs, not from [`Spec::in_place_buffer`]); copies move
    /// bytes, reductions compute on values. What a right in-place implementation leaves in the
    /// buffers.
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
        // Each PE's input, element by element.
        let inputs: Vec<Vec<Vec<u8>>> = (0..n)
            .map(|pe| {
                let at = ptrs(pe).0 * sz;
                bufs[pe][at..at + s0.in_bytes()]
                    .chunks_exact(sz)
                    .map(<[u8]>::to_vec)
                    .collect()
            })
            .collect();
        let red = |i: usize| {
            let v = testing::reduce(s0.op, n, |pe| decode(s0.dtype, &inputs[pe][i])).value;
            bytes(s0.dtype, v)
        };
        for me in 0..n {
            let out: Option<Vec<Vec<u8>>> = match s0.coll {
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
            for (k, e) in out.into_iter().flatten().enumerate() {
                bufs[me][at + k * sz..at + (k + 1) * sz].copy_from_slice(&e);
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
                    (DataType::F8E5M2, ReduceOp::Sum),
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
                    // Before the call, an output that is not the input is all wrong (the
                    // poison): other PEs' blocks, a non-root's broadcast or scattered block.
                    for s in &specs {
                        let poisoned = match coll {
                            Collective::Fcollect => n > 1,
                            Collective::Gather => n > 1 && s.my_pe == s.root,
                            Collective::Broadcast | Collective::Scatter => s.my_pe != s.root,
                            _ => false,
                        };
                        let unwritten = count_wrong(s, &bufs[s.my_pe]);
                        if poisoned {
                            let own = if coll == Collective::Broadcast {
                                0
                            } else {
                                s.layout.chunk
                            };
                            let others = s.layout.out_elems - own;
                            let own = if coll == Collective::Scatter { own } else { 0 };
                            assert_eq!(unwritten, (others + own) as u64, "{what}");
                        }
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

    /// Found by an audit: inputs were (pe * 3 + i) % 5, the same on PEs 5 apart (truth
    /// values 4 apart), so a block from the wrong PE could pass. Copies' inputs now differ
    /// between any two PEs in nearly every element, and take every kind of bit pattern.
    #[test]
    fn copy_inputs_differ_between_any_two_pes() {
        for &t in DataType::ALL {
            let s = spec_of(Collective::Broadcast, t, ReduceOp::Sum, 0, 64);
            let p = Pattern::of(&s);
            let input = |pe: usize| -> Vec<u8> {
                let mut v = vec![0u8; 256 * t.size()];
                v.chunks_exact_mut(t.size())
                    .enumerate()
                    .for_each(|(i, e)| p.copy_element(pe, i, e));
                v
            };
            let inputs: Vec<Vec<u8>> = (0..64).map(input).collect();
            for a in 0..64 {
                for b in 0..a {
                    let same = inputs[a]
                        .chunks_exact(t.size())
                        .zip(inputs[b].chunks_exact(t.size()))
                        .filter(|(x, y)| x == y)
                        .count();
                    // Truth values agree half the time; wider types about never.
                    let most = if t.size() == 1 { 160 } else { 40 };
                    assert!(same < most, "{t}: PEs {a} and {b} agree in {same} of 256");
                }
            }
        }
        // Every kind of value: NaN, infinities, -0.0, subnormals; the Lamport copies' empty
        // word too.
        let s = spec_of(Collective::Fcollect, DataType::F32, ReduceOp::Sum, 0, 2);
        let p = Pattern::of(&s);
        let vals: Vec<f32> = (0..4096)
            .map(|i| {
                let mut e = [0u8; 4];
                p.copy_element(1, i, &mut e);
                f32::from_le_bytes(e)
            })
            .collect();
        assert!(vals.iter().any(|v| v.is_nan()));
        assert!(vals.iter().any(|v| v.is_subnormal()));
        assert!(vals.iter().any(|v| *v == 0.0 && v.is_sign_negative()));
        assert!(vals
            .chunks_exact(2)
            .any(|w| w.iter().all(|v| v.to_bits() == 0x8000_0000)));
        let s = spec_of(Collective::Fcollect, DataType::F8E4M3, ReduceOp::Sum, 0, 2);
        let p = Pattern::of(&s);
        let mut seen = [false; 256];
        for i in 0..8192 {
            let mut e = [0u8];
            p.copy_element(0, i, &mut e);
            seen[e[0] as usize] = true;
        }
        // Every byte but the poison (the canonical NaN; 0xff, NaN too, does come).
        let poison = poison(&s)[0];
        assert_eq!(poison, 0x7f);
        for (b, seen) in seen.into_iter().enumerate() {
            assert_eq!(seen, b != poison as usize, "f8e4m3 byte {b:#x}");
        }
    }

    /// A block from the wrong PE is wrong in (nearly) every element, at any PE count.
    #[test]
    fn a_block_from_the_wrong_pe_is_wrong() {
        for &t in DataType::ALL {
            for n in [6, 8] {
                let s = spec_of(Collective::Fcollect, t, ReduceOp::Sum, 0, n);
                let c = s.layout.chunk;
                let mut out = host_result(&s);
                let sz = t.size();
                // Block 5 (PE 5's input) replaced by PE 0's: 5 apart.
                out.copy_within(0..c * sz, 5 * c * sz);
                let wrong = count_wrong(&s, &out);
                let least = if sz == 1 { c as u64 / 4 } else { c as u64 - 1 };
                assert!(wrong >= least.max(1), "{t} n {n}: {wrong} of {c}");
            }
        }
        // And a reduction's truth values: each PE decides some elements.
        for op in [ReduceOp::And, ReduceOp::Or, ReduceOp::Min, ReduceOp::Max] {
            for n in [2, 5, 8] {
                let s = spec_of(Collective::AllReduce, DataType::Bool8, op, 0, n);
                let p = Pattern::of(&s);
                let without = |pe: usize, i: usize| {
                    testing::reduce(op, n, |q| {
                        p.value(if q == pe { (pe + 1) % n } else { q }, i)
                    })
                };
                for pe in 0..n {
                    let decides = (0..512)
                        .filter(|&i| without(pe, i).value != reduced(&s, i).value)
                        .count();
                    assert!(decides > 0, "{op} n {n}: PE {pe} decides nothing");
                }
            }
        }
    }

    #[test]
    fn inputs_differ_between_pes() {
        for c in [Collective::AllReduce, Collective::Broadcast] {
            let a = make_input(&spec(c, 0));
            let b = make_input(&spec(c, 1));
            assert_eq!(a.len(), 64);
            assert_ne!(a, b);
        }
    }

    #[test]
    fn expected_results() {
        let v = |s: &Spec, pe, i| input_value(s, pe, i);
        let s = spec(Collective::AllReduce, 1);
        assert_eq!(source(&s, 1), Source::Reduction(1));
        assert_eq!(reduced(&s, 1).value, v(&s, 0, 1) + v(&s, 1, 1));
        let s = spec(Collective::Alltoall, 1);
        // PE 1's output chunk 0 comes from PE 0's chunk 1.
        let c = s.layout.chunk;
        assert_eq!(source(&s, 1), Source::Copy { pe: 0, i: c + 1 });
        let s = spec(Collective::Gather, 1);
        assert_eq!(source(&s, 3), Source::Unspecified);
        let s = spec(Collective::Gather, 0);
        assert_eq!(source(&s, c + 1), Source::Copy { pe: 1, i: 1 });
        let s = spec(Collective::Scatter, 1);
        assert_eq!(source(&s, 1), Source::Copy { pe: 0, i: c + 1 });
        let s = spec(Collective::ReduceScatter, 1);
        assert_eq!(source(&s, 0), Source::Reduction(c));
        assert_eq!(reduced(&s, c).value, v(&s, 0, c) + v(&s, 1, c));
        let s = spec_of(Collective::AllReduce, DataType::I32, ReduceOp::Avg, 0, 2);
        assert_eq!(reduced(&s, 0).value, (v(&s, 0, 0) + v(&s, 1, 0)) / 2.0);
    }
}
