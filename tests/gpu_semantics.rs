//! GPU checks that every reduction has one semantics at every size and by every algorithm:
//! all_reduce, reduce and reduce_scatter, in place and not, by avg, sum, premul_sum, min and
//! max, on every numeric type, with inputs at the type's limits (every PE the same value near
//! the largest or the least, where avg must give it back and a narrow sum would overflow) and
//! inputs of any bits (integers: sums wrap, avg is exact), at element counts on either side of
//! every crossover of the automatic choice for the team size, tiny and about 1 Mi; by the
//! automatic choice, by each algorithm forced (a forced algorithm that refuses the call is
//! counted, never judged), and through prepared calls. Each result is checked against a host
//! reference of the documented semantics (`collective/mod.rs`, "Reductions"):
//!
//! - integers: sum and premul_sum wrap modulo 2^bits; avg is the exact mean truncated toward
//!   zero; min and max compare as the type does;
//! - floats: summed (premul_sum: each input times the scale first) in `f32` for 16- and 8-bit
//!   floats, in the type for `f32` and `f64`, and rounded once; avg is that sum divided by the
//!   team size in the same type, rounded once. (The inputs are chosen so that every order of
//!   summation gives the same bits: small whole numbers, and limit values of one sign.)
//!
//! First, before any scratch is reserved, the automatic choice must run every such call at
//! every size (`no_scratch_needed_at_any_size`): no call may need scratch at one size only.
//!
//! Run by `scripts/gpu-check.sh`'s `semantics` suite at each PE count. Every check is
//! collective: every PE runs every case in the same order.
mod common;

use anyhow::{bail, ensure};
use common::{mix, poison, refused, Checks, Layout};
use cudarc::driver::CudaStream;
use nvshmem::{
    collective::Collective,
    element::{F8E4M3, F8E5M2},
    Element, ReduceOp, Runtime, SymArray, Team,
};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[test]
#[ignore = "needs NVIDIA GPUs and NVSHMEM: run scripts/gpu-check.sh on a GPU machine"]
fn gpu_semantics() {
    let session = common::start(Runtime::builder().heap_size(1 << 30));
    let rt = session.rt.clone();
    let (me, n) = (rt.my_pe(), rt.n_pes());
    if me == 0 {
        println!("semantics checks: {n} PEs");
    }
    let mut c = Checks::new(me);
    common::start_watchdog(me, Duration::from_secs(30));
    let world = rt.world();
    let stream = rt.stream().clone();

    c.run("no_scratch_needed_at_any_size", || {
        ensure!(rt.scratch_bytes() == 0, "scratch reserved before the check");
        if n > 1 && !world.has_nvlink_kernels() {
            // Then NVSHMEM's path is all there is, and it needs scratch for these calls.
            println!(
                "no_scratch_needed_at_any_size: the world has no NVLink kernels; nothing to check"
            );
            return Ok(());
        }
        let mut t = Tally::default();
        let auto = Some(&[None][..]);
        per_type::<i32>(&rt, &world, &stream, &[ReduceOp::Avg], auto, &mut t)?;
        per_type::<i64>(&rt, &world, &stream, &[ReduceOp::Avg], auto, &mut t)?;
        per_type::<half::f16>(&rt, &world, &stream, &[ReduceOp::Avg], auto, &mut t)?;
        let ops = [ReduceOp::PreMulSum(0.5), ReduceOp::Sum];
        per_type::<f32>(&rt, &world, &stream, &ops, auto, &mut t)?;
        t.finish(&rt, "without scratch")
    });
    rt.reserve_scratch(96 << 20).expect("scratch");
    let ops = [
        ReduceOp::Avg,
        ReduceOp::Sum,
        ReduceOp::PreMulSum(0.5),
        ReduceOp::Min,
        ReduceOp::Max,
    ];
    macro_rules! types {
        ($($t:ty),*) => {$(
            c.run(&format!("{}_every_size_and_algorithm", <$t as Element>::NAME), || {
                let mut t = Tally::default();
                per_type::<$t>(&rt, &world, &stream, &ops, None, &mut t)?;
                t.finish(&rt, <$t as Element>::NAME)
            });
        )*};
    }
    types!(
        i8,
        u8,
        i16,
        u16,
        i32,
        u32,
        i64,
        u64,
        half::f16,
        half::bf16,
        f32,
        f64,
        F8E4M3,
        F8E5M2
    );

    drop((world, stream, rt));
    c.finish("gpu_semantics");
    session.end();
}

// ---- the documented semantics, on the host ------------------------------------------------

/// An element type with its inputs and the reference of every operator checked here.
trait Sem: Element {
    /// Element `i` of team member `k`'s input.
    fn input(k: usize, i: usize) -> Self;
    /// The documented result of reducing `xs` (every member's element, in team order) by `op`.
    fn reduce(op: ReduceOp, xs: &[Self]) -> Self;
    /// Whether `got` is the result `want`.
    fn same(got: Self, want: Self) -> bool;
    /// The operator as the call takes it (integers scale by a whole number).
    fn op(op: ReduceOp) -> ReduceOp {
        op
    }
}

fn bits(i: usize, k: usize) -> u64 {
    mix(0x5e3a ^ mix(((k as u64 + 1) << 32) ^ (i as u64 + 1)))
}

macro_rules! integers {
    ($($t:ty),*) => {$(
        impl Sem for $t {
            fn input(k: usize, i: usize) -> Self {
                match i % 4 {
                    // The same near-limit value on every PE: avg must give it back.
                    0 => <$t>::MAX - 1,
                    1 if <$t>::MIN == 0 => <$t>::MAX - k as $t,
                    1 => <$t>::MIN + 1,
                    // Any bits: sums wrap, avg is exact.
                    _ => bits(i, k) as $t,
                }
            }
            fn reduce(op: ReduceOp, xs: &[Self]) -> Self {
                match op {
                    ReduceOp::Sum => xs.iter().fold(0, |a: $t, &x| a.wrapping_add(x)),
                    ReduceOp::PreMulSum(s) => {
                        let s = s as i128 as $t;
                        xs.iter().fold(0, |a: $t, &x| a.wrapping_add(x.wrapping_mul(s)))
                    }
                    ReduceOp::Avg => {
                        let sum: i128 = xs.iter().map(|&x| x as i128).sum();
                        // i128 division truncates toward zero.
                        (sum / xs.len() as i128) as $t
                    }
                    ReduceOp::Min => *xs.iter().min().unwrap(),
                    ReduceOp::Max => *xs.iter().max().unwrap(),
                    op => panic!("{op} is not checked here"),
                }
            }
            fn same(got: Self, want: Self) -> bool {
                got == want
            }
            fn op(op: ReduceOp) -> ReduceOp {
                match op {
                    ReduceOp::PreMulSum(_) => ReduceOp::PreMulSum(3.0),
                    op => op,
                }
            }
        }
    )*};
}
integers!(i8, u8, i16, u16, i32, u32, i64, u64);

/// Arithmetic in the accumulator the semantics names: `f32`, or `f64` for `f64`.
fn in_acc(wide64: bool, x: f64) -> f64 {
    if wide64 {
        x
    } else {
        x as f32 as f64
    }
}

macro_rules! floats {
    ($($t:ty, $hi:expr, $wide64:expr);*) => {$(
        impl Sem for $t {
            fn input(k: usize, i: usize) -> Self {
                match i % 4 {
                    // The same value near the largest (least) on every PE: of one sign, so
                    // the sum's bits do not depend on its order.
                    0 => <$t>::from_f64($hi),
                    1 => <$t>::from_f64(-$hi),
                    _ => <$t>::from_f64((bits(i, k) % 15) as f64 - 7.0),
                }
            }
            fn reduce(op: ReduceOp, xs: &[Self]) -> Self {
                let acc = |x: f64| in_acc($wide64, x);
                let v: Vec<f64> = xs.iter().map(|x| x.to_f64()).collect();
                // Each addition rounded in the accumulator, in team order.
                let sum = |pre: &dyn Fn(f64) -> f64| {
                    v[1..].iter().fold(pre(v[0]), |a, &x| acc(a + pre(x)))
                };
                let r = match op {
                    ReduceOp::Sum => sum(&|x| x),
                    ReduceOp::PreMulSum(s) => sum(&|x| acc(acc(s) * x)),
                    ReduceOp::Avg => acc(sum(&|x| x) / v.len() as f64),
                    ReduceOp::Min => v.iter().copied().fold(f64::INFINITY, f64::min),
                    ReduceOp::Max => v.iter().copied().fold(f64::NEG_INFINITY, f64::max),
                    op => panic!("{op} is not checked here"),
                };
                <$t>::from_f64(r)
            }
            fn same(got: Self, want: Self) -> bool {
                let (g, w) = (got.to_f64(), want.to_f64());
                g == w || (g.is_nan() && w.is_nan())
            }
        }
    )*};
}
floats!(
    half::f16, 60000.0, false;
    half::bf16, 3e38, false;
    f32, 3e38, false;
    f64, 1e308, true;
    F8E4M3, 448.0, false;
    F8E5M2, 57344.0, false
);

// ---- the cases ----------------------------------------------------------------------------

/// Block sizes (bytes of one PE's part) where the automatic choice changes algorithm for
/// `coll` on a team of `n` (`collective/algo/crossover.rs`: LL's limit of the conservative
/// rows and of the measured 2-PE sm_90 rows, the direct kernels' band from 256 KiB, the
/// Lamport band's ends for floats: past LL's limit, up to 2 MiB (1 MiB for reduce-scatter)).
fn crossovers(coll: Collective, n: usize) -> Vec<usize> {
    const K: usize = 1 << 10;
    let small = n <= 4;
    match coll {
        Collective::AllReduce if n == 2 => vec![8 * K, 32 * K, 256 * K, 2048 * K],
        Collective::ReduceScatter if n == 2 => vec![4 * K, 16 * K, 256 * K, 1024 * K],
        Collective::Reduce if n == 2 => vec![8 * K, 32 * K, 2048 * K],
        Collective::AllReduce | Collective::Reduce => vec![if small { 8 * K } else { 4 * K }],
        _ => vec![if small { 4 * K } else { 2 * K }],
    }
}

/// Element counts of one part for `coll`: tiny, either side of each crossover, about 1 Mi
/// elements of input.
fn counts(coll: Collective, n: usize, el: usize) -> Vec<usize> {
    let mut v = vec![1, 3];
    for b in crossovers(coll, n) {
        v.extend([b / el, b / el + 1]);
    }
    v.push(match coll {
        Collective::ReduceScatter => (1 << 20) / n,
        _ => 1 << 20,
    });
    v.sort_unstable();
    v.dedup();
    v
}

/// The algorithms to try: the automatic choice, then each of the registry forced.
fn algorithms(coll: Collective) -> Vec<Option<&'static str>> {
    std::iter::once(None)
        .chain(coll.algorithms().into_iter().map(Some))
        .collect()
}

#[derive(Default)]
struct Tally {
    passed: usize,
    failed: usize,
    refused: usize,
    first: Vec<String>,
    started: Option<Instant>,
}

impl Tally {
    fn record(&mut self, done: anyhow::Result<()>, what: impl FnOnce() -> String) {
        self.started.get_or_insert_with(Instant::now);
        match done {
            Ok(()) => self.passed += 1,
            Err(e) if refused(&e) => self.refused += 1,
            Err(e) => {
                self.failed += 1;
                if self.first.len() < 8 {
                    self.first.push(format!("{}: {e:#}", what()));
                }
            }
        }
    }

    fn finish(self, rt: &Runtime, what: &str) -> anyhow::Result<()> {
        if rt.my_pe() == 0 {
            println!(
                "semantics {what}: {} cases passed, {} failed, {} refused by a forced algorithm \
                 ({:.1} s)",
                self.passed,
                self.failed,
                self.refused,
                self.started.map_or(0.0, |t| t.elapsed().as_secs_f64())
            );
        }
        if self.failed > 0 {
            bail!(
                "{} cases failed:\n  {}",
                self.failed,
                self.first.join("\n  ")
            );
        }
        Ok(())
    }
}

/// Every case of `T` by `ops`: each reduction, in place and not, at every count, by each of
/// `algos` (default: the automatic choice and every algorithm forced, then prepared calls).
fn per_type<T: Sem>(
    rt: &Runtime,
    team: &Team,
    s: &Arc<CudaStream>,
    ops: &[ReduceOp],
    algos: Option<&[Option<&'static str>]>,
    tally: &mut Tally,
) -> anyhow::Result<()> {
    let (n, r) = (team.n_pes(), team.my_pe());
    // The longest array any case needs: a reduce-scatter's input holds n parts.
    let longest = [
        Collective::AllReduce,
        Collective::Reduce,
        Collective::ReduceScatter,
    ]
    .into_iter()
    .flat_map(|c| {
        let parts = if c == Collective::ReduceScatter { n } else { 1 };
        counts(c, n, std::mem::size_of::<T>())
            .into_iter()
            .map(move |k| k * parts)
    })
    .max()
    .unwrap_or(1);
    let mut src = rt.alloc_zeroed::<T>(longest)?;
    let mut dst = rt.alloc_zeroed::<T>(longest)?;
    let root = n - 1;
    for coll in [
        Collective::AllReduce,
        Collective::Reduce,
        Collective::ReduceScatter,
    ] {
        for m in counts(coll, n, T::DTYPE.size()) {
            // This PE's input, made once for every case of this size.
            let (src_len, _) = coll
                .geometry()
                .lengths(m, n)
                .expect("a test's sizes fit a usize");
            let own: Vec<T> = (0..src_len).map(|i| T::input(r, i)).collect();
            for &op in ops {
                // min and max have no arithmetic to go wrong at size: the small counts only.
                if matches!(op, ReduceOp::Min | ReduceOp::Max) && m > 1 << 16 {
                    continue;
                }
                let op = T::op(op);
                for in_place in [false, true] {
                    let layout = Layout {
                        coll,
                        n,
                        m,
                        in_place,
                        root,
                    };
                    let want = expected::<T>(&layout, op, r);
                    let bufs = Bufs {
                        own: &own,
                        before: before::<T>(&layout, r),
                        want,
                    };
                    let all = algorithms(coll);
                    for &algo in algos.unwrap_or(&all) {
                        let done =
                            rt.set_algorithm(coll, algo)
                                .map_err(Into::into)
                                .and_then(|()| {
                                    one(rt, team, &mut src, &mut dst, &layout, op, &bufs, false, s)
                                });
                        let _ = rt.set_algorithm(coll, None);
                        tally.record(done, || describe::<T>(&layout, op, algo, false));
                        // Prepared calls exist for the two-buffer all-reduce and reduce-scatter.
                        let preparable = !in_place && coll != Collective::Reduce;
                        if algos.is_none() && preparable {
                            let done =
                                rt.set_algorithm(coll, algo)
                                    .map_err(Into::into)
                                    .and_then(|()| {
                                        one(
                                            rt, team, &mut src, &mut dst, &layout, op, &bufs, true,
                                            s,
                                        )
                                    });
                            let _ = rt.set_algorithm(coll, None);
                            tally.record(done, || describe::<T>(&layout, op, algo, true));
                        }
                    }
                }
            }
        }
    }
    Ok(())
}

fn describe<T: Element>(l: &Layout, op: ReduceOp, algo: Option<&str>, prepared: bool) -> String {
    format!(
        "{} {} by {op} x{} {}({}{})",
        T::NAME,
        l.coll,
        l.m,
        if l.in_place { "in place " } else { "" },
        algo.unwrap_or("auto"),
        if prepared { ", prepared" } else { "" }
    )
}

/// This PE's whole output buffer after the call: its result where the call defines one, what
/// was there before elsewhere (the input in place, else the poison).
fn expected<T: Sem>(l: &Layout, op: ReduceOp, r: usize) -> Vec<T> {
    let mut out = before::<T>(l, r);
    if !l.root_only(r) {
        let range = l.result(r);
        let mut xs = vec![T::default(); l.n];
        for (i, o) in out[range.clone()].iter_mut().enumerate() {
            let at = match l.coll {
                Collective::ReduceScatter => r * l.m + i,
                _ => i,
            };
            for (k, x) in xs.iter_mut().enumerate() {
                *x = T::input(k, at);
            }
            *o = T::reduce(op, &xs);
        }
    }
    out
}

/// This PE's output buffer before the call: the poison, with its input in it in place.
fn before<T: Sem>(l: &Layout, r: usize) -> Vec<T> {
    let mut out = vec![poison::<T>(); l.out_len()];
    if l.in_place {
        let at = l.input_at(r);
        for (i, o) in out[at..at + l.lens().0].iter_mut().enumerate() {
            *o = T::input(r, i);
        }
    }
    out
}

/// What one size's cases write and expect on this PE: its input, its output buffer before
/// the call, and after.
struct Bufs<'a, T> {
    own: &'a [T],
    before: Vec<T>,
    want: Vec<T>,
}

/// One call, checked: inputs written, the call (prepared or not) queued between two barriers,
/// the output read back and compared with what `bufs` expects.
#[allow(clippy::too_many_arguments)]
fn one<T: Sem>(
    rt: &Runtime,
    team: &Team,
    src: &mut SymArray<T>,
    dst: &mut SymArray<T>,
    l: &Layout,
    op: ReduceOp,
    bufs: &Bufs<T>,
    prepared: bool,
    s: &Arc<CudaStream>,
) -> anyhow::Result<()> {
    let r = team.my_pe();
    let (src_len, _) = l.lens();
    let out_len = l.out_len();
    let want = &bufs.want;
    if !l.in_place {
        s.memcpy_htod(bufs.own, &mut src.view_mut(0..src_len)?)?;
    }
    s.memcpy_htod(bufs.before.as_slice(), &mut dst.view_mut(0..out_len)?)?;
    rt.barrier_all(s)?;
    let called = {
        let input = src.view(0..src_len)?;
        let mut output = dst.view_mut(0..out_len)?;
        match (prepared, l.coll) {
            (true, Collective::AllReduce) => team
                .prepare_all_reduce(&input, &mut output, op)
                .and_then(|p| p.start(s)),
            (true, _) => team
                .prepare_reduce_scatter(&input, &mut output, op)
                .and_then(|p| p.start(s)),
            (false, coll) => {
                common::call(team, coll, l.in_place, l.root, op, &input, &mut output, s)
            }
        }
    };
    let mut got = vec![T::default(); out_len];
    if called.is_ok() {
        s.memcpy_dtoh(&dst.view(0..out_len)?, got.as_mut_slice())?;
    }
    rt.barrier_all(s)?;
    s.synchronize()?;
    called?;
    rt.async_error()?;
    if let Some(i) = (0..out_len).find(|&i| !T::same(got[i], want[i])) {
        let bad = (0..out_len).filter(|&i| !T::same(got[i], want[i])).count();
        bail!(
            "{bad} of {out_len} elements wrong; first at {i}: got {:?}, expected {:?} (inputs \
             {:?})",
            got[i],
            want[i],
            (0..l.n)
                .map(|k| T::input(
                    k,
                    if l.coll == Collective::ReduceScatter && !l.in_place {
                        r * l.m + i
                    } else {
                        i
                    }
                ))
                .collect::<Vec<T>>()
        );
    }
    Ok(())
}
