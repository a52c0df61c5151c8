//! GPU correctness matrix for the collectives: every operation x element type x operator x
//! size x team x in-place form, against a reference computed on the host in f64, plus CUDA
//! graph capture and replay, and every bad-input case. Run by `scripts/gpu-check.sh` under a
//! launcher with any number of PEs; skipped (ignored, with the reason) in a plain `cargo test`.
//!
//! Inputs are fresh random data each run (seed from `GPU_TEST_SEED`, printed), made so that
//! every PE can compute every member's input locally; outputs are poisoned first, so an
//! element that was not written fails; rooted calls must leave non-root outputs untouched.
//! The types NVSHMEM has no arithmetic on (`Bool8`, fp8) run through the same matrix
//! (`for_each_extra_element!`), with inputs they hold exactly.
mod common;

use anyhow::{bail, ensure};
use common::Checks;
use cudarc::driver::CudaStream;
use nvshmem::{Element, ElementKind, Error, ReduceOp, Runtime, SymArray, Team};

/// Per-PE block sizes in bytes beyond the element counts below; the 64 MiB size runs for the
/// world team, each operation with its first operator, out of place.
const BIG: usize = 64 << 20;
const MEDIUM: usize = 1 << 20;

#[test]
#[ignore = "needs NVIDIA GPUs and NVSHMEM: run scripts/gpu-check.sh on a GPU machine"]
fn gpu_collectives() {
    let session = common::start(Runtime::builder().heap_size(3 << 30));
    let rt = session.rt.clone();
    let seed: u64 = std::env::var("GPU_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5eed);
    let (me, n) = (rt.my_pe(), rt.n_pes());
    if me == 0 {
        println!("collectives matrix: {n} PEs, seed {seed}");
    }
    rt.reserve_scratch(4 * BIG)
        .expect("scratch for rooted reductions");
    let stream = rt.stream().clone();
    let mut c = Checks::new(me);

    // Teams, all made collectively by every PE. A member list in reverse order checks that
    // results follow the team's numbering, not the world's.
    let world = rt.world();
    let strided = if n >= 4 {
        world.split_strided(0, 2, n / 2)
    } else {
        world.split_strided(0, 1, n)
    }
    .expect("strided split");
    let reversed: Vec<usize> = (0..n).rev().collect();
    let listed = world.from_pes(&reversed).expect("team from a PE list");
    let single = world.split_strided(0, 1, 1).expect("one-PE team");
    let teams: Vec<(&str, Option<&Team>, Vec<usize>)> = vec![
        ("world", Some(&world), (0..n).collect()),
        (
            "strided",
            strided.as_ref(),
            if n >= 4 {
                (0..n / 2).map(|i| 2 * i).collect()
            } else {
                (0..n).collect()
            },
        ),
        ("listed", listed.as_ref(), reversed.clone()),
        ("single", single.as_ref(), vec![0]),
    ];

    let mut cases = 0usize;
    // MATRIX_MEDIUM_TEAMS (comma-separated names) limits which teams run the 1 MiB size, to fit
    // a run into a short lease; by default every team does.
    let medium_teams = std::env::var("MATRIX_MEDIUM_TEAMS").ok();
    for (tname, team, members) in &teams {
        let medium = medium_teams
            .as_deref()
            .is_none_or(|l| l.split(',').any(|t| t == *tname));
        if me == 0 && !medium {
            println!("collectives matrix: team {tname} skips the 1 MiB size (MATRIX_MEDIUM_TEAMS)");
        }
        for bytes in [0usize, 1, 2, MEDIUM]
            .into_iter()
            .filter(|b| medium || *b != MEDIUM)
        {
            macro_rules! per_type {
                ($t:ty) => {
                    let counts = counts::<$t>(bytes);
                    for count in counts {
                        let ctx = Ctx {
                            rt: &rt,
                            team: *team,
                            members,
                            stream: &stream,
                            seed,
                            count,
                            big: false,
                        };
                        let name = format!("{tname}/{}/{count}", <$t as Element>::NAME);
                        c.run(&name, || matrix::<$t>(&ctx, &mut cases));
                    }
                };
            }
            nvshmem::for_each_element!(per_type);
            nvshmem::for_each_extra_element!(per_type);
        }
    }
    // The 64 MiB size: world team, out of place, first operator of each operation.
    macro_rules! big {
        ($t:ty) => {
            let count = BIG / std::mem::size_of::<$t>();
            let ctx = Ctx {
                rt: &rt,
                team: Some(&world),
                members: &(0..n).collect::<Vec<_>>(),
                stream: &stream,
                seed,
                count,
                big: true,
            };
            c.run(&format!("world/{}/64MiB", <$t as Element>::NAME), || {
                matrix::<$t>(&ctx, &mut cases)
            });
        };
    }
    nvshmem::for_each_element!(big);
    nvshmem::for_each_extra_element!(big);

    c.run("graph_capture_and_replay", || {
        graph_replay(&rt, &world, seed, &mut cases)
    });
    c.run("graph_capture_and_replay_of_kernel_reductions", || {
        graph_replay_kernels(&rt, &world, seed, &mut cases)
    });
    c.run("bad_inputs_are_refused_before_launch", || {
        bad_inputs(&rt, &world, &stream)
    });

    if me == 0 {
        println!("collectives matrix: {cases} cases run on PE 0");
    }
    // Teams are destroyed collectively, in the same order on every PE.
    drop(teams);
    drop((strided, listed, single, world, stream, rt));
    c.finish("gpu_collectives");
    session.end();
}

/// The element counts for a size class: 0 means 1 element, 1 an odd count, 2 a count whose
/// bytes are not a multiple of 16, anything else that many bytes.
fn counts<T: Element>(class: usize) -> Vec<usize> {
    let size = std::mem::size_of::<T>();
    match class {
        0 => vec![1],
        1 => vec![1001],
        2 => vec![(0..64)
            .map(|k| 13 + k)
            .find(|c| !(c * size).is_multiple_of(16))
            .unwrap()],
        bytes => vec![bytes / size],
    }
}

struct Ctx<'a> {
    rt: &'a Runtime,
    team: Option<&'a Team>,
    /// World PE of each team index.
    members: &'a [usize],
    stream: &'a std::sync::Arc<CudaStream>,
    seed: u64,
    /// Elements per PE block.
    count: usize,
    big: bool,
}

impl Ctx<'_> {
    fn n(&self) -> usize {
        self.members.len()
    }
    /// This PE's team index, when it is a member.
    fn rank(&self) -> Option<usize> {
        self.team.and_then(|t| t.my_pe())
    }
}

/// A deterministic input: what the member at team index `k` puts in for `case`, of `len`.
fn input<T: Element>(ctx: &Ctx, case: u64, k: usize, len: usize, op: Option<ReduceOp>) -> Vec<T> {
    let mut s =
        ctx.seed ^ (case.wrapping_mul(0x9e37_79b9_7f4a_7c15)) ^ ((k as u64 + 1) << 40) ^ len as u64;
    let mut next = move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    };
    let small_prod = matches!(op, Some(ReduceOp::Prod)) && std::mem::size_of::<T>() <= 2;
    let fp8 = is_fp8::<T>();
    (0..len)
        .map(|_| {
            let r = next();
            let v = match T::KIND {
                // Integer inputs stay small enough that no reduction over 8 PEs overflows.
                ElementKind::Signed if small_prod => (r % 3) as f64 - 1.0,
                ElementKind::Unsigned if small_prod => (r % 2) as f64 + (r % 5 == 0) as u8 as f64,
                ElementKind::Signed => (r % 15) as f64 - 7.0,
                ElementKind::Unsigned => (r % 15) as f64,
                // fp8: multiples of 0.25 in [-2, 2], exact in e4m3 and e5m2, so a reduction
                // over up to 8 PEs is exact in f32 and rounded once on the store.
                ElementKind::Float if fp8 => (r % 17) as f64 / 4.0 - 2.0,
                ElementKind::Float => (r % 2001) as f64 / 1000.0 - 1.0,
                ElementKind::Bool => (r % 2) as f64,
            };
            T::from_f64(v)
        })
        .collect()
}

fn is_fp8<T: Element>() -> bool {
    T::KIND == ElementKind::Float && std::mem::size_of::<T>() == 1
}

fn poison<T: Element>() -> T {
    if T::KIND == ElementKind::Bool {
        // True but not a byte any reduction of 0/1 inputs produces: an unwritten element
        // shows in the byte check of `compare`.
        return *bytemuck::from_bytes::<T>(&[0x5A]);
    }
    T::from_f64(if T::KIND == ElementKind::Unsigned {
        99.0
    } else {
        -99.0
    })
}

/// Folds member inputs into the expected reduction, in f64 (integers exactly; bitwise
/// operators on the integer values).
fn reduce_ref<T: Element>(inputs: &[Vec<T>], op: ReduceOp) -> Vec<f64> {
    let n = inputs.len() as f64;
    (0..inputs[0].len())
        .map(|i| {
            let vals = inputs.iter().map(|v| v[i].to_f64());
            let int = |f: fn(i64, i64) -> i64| {
                inputs
                    .iter()
                    .map(|v| v[i].to_f64() as i64)
                    .reduce(f)
                    .unwrap() as f64
            };
            match op {
                ReduceOp::Sum => vals.sum(),
                ReduceOp::Prod => vals.product(),
                ReduceOp::Min => vals.fold(f64::INFINITY, f64::min),
                ReduceOp::Max => vals.fold(f64::NEG_INFINITY, f64::max),
                ReduceOp::And => int(|a, b| a & b),
                ReduceOp::Or => int(|a, b| a | b),
                ReduceOp::Xor => int(|a, b| a ^ b),
                ReduceOp::Avg => vals.sum::<f64>() / n,
                ReduceOp::PreMulSum(s) => vals.map(|v| v * s).sum(),
                _ => f64::NAN,
            }
        })
        .collect()
}

/// The rounding a float type allows, relative to the magnitude of the summed inputs.
fn tolerance<T: Element>(n: usize) -> f64 {
    let eps = match std::mem::size_of::<T>() {
        8 => 1e-15,
        4 => 1.2e-7,
        _ if T::NAME == "bf16" => 7.9e-3,
        _ => 9.8e-4,
    };
    if T::KIND == ElementKind::Float {
        4.0 * eps * (n as f64 + 1.0)
    } else {
        0.0
    }
}

/// Compares `got` with `want`; integers exactly (after the type's own conversion), floats
/// within the type's rounding. Returns the first mismatch.
fn compare<T: Element>(what: &str, got: &[T], want: &[f64], n: usize) -> anyhow::Result<()> {
    ensure!(
        got.len() == want.len(),
        "{what}: {} elements, expected {}",
        got.len(),
        want.len()
    );
    let tol = tolerance::<T>(n);
    // fp8 results are computed exactly in f32 and rounded once: within half a unit in the
    // last place (3 mantissa bits in e4m3, 2 in e5m2), plus the smallest subnormal.
    let fp8_rel = match T::NAME {
        "f8e4m3" => 2f64.powi(-4),
        _ => 2f64.powi(-3),
    };
    if T::KIND == ElementKind::Bool {
        let bytes: &[u8] = bytemuck::cast_slice(got);
        if let Some(i) = bytes.iter().position(|&b| b > 1) {
            bail!(
                "{what}: element {i} is the byte {:#x}, not 0 or 1",
                bytes[i]
            );
        }
    }
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let g = g.to_f64();
        let ok = if is_fp8::<T>() {
            (g - w).abs() <= fp8_rel * w.abs() + 2f64.powi(-16)
        } else if T::KIND == ElementKind::Float {
            (g - w).abs() <= tol * w.abs().max(1.0) * n as f64
        } else {
            g == T::from_f64(*w).to_f64()
        };
        if !ok || g.is_nan() {
            bail!(
                "{what}: element {i} is {g}, expected {w} (of {})",
                got.len()
            );
        }
    }
    Ok(())
}

fn as_f64<T: Element>(v: &[T]) -> Vec<f64> {
    v.iter().map(|x| x.to_f64()).collect()
}

/// Ops run by the matrix, each a closure over the team and the two buffers.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Coll {
    AllReduce,
    Reduce,
    Broadcast,
    Fcollect,
    Alltoall,
    ReduceScatter,
    Gather,
    Scatter,
}

const COLLS: [Coll; 8] = [
    Coll::AllReduce,
    Coll::Reduce,
    Coll::Broadcast,
    Coll::Fcollect,
    Coll::Alltoall,
    Coll::ReduceScatter,
    Coll::Gather,
    Coll::Scatter,
];

/// Runs every case of one type and size; a failing case does not stop the others, so every
/// PE makes the same collective calls (allocations, barriers) whatever fails where.
fn matrix<T: Element>(ctx: &Ctx, cases: &mut usize) -> anyhow::Result<()> {
    // Integer data is scaled by a whole number (NCCL takes the scalar in the data's type).
    let scale = match T::KIND {
        ElementKind::Signed | ElementKind::Unsigned => 2.0,
        _ => 0.5,
    };
    let ops: Vec<ReduceOp> = ReduceOp::BASIC
        .iter()
        .copied()
        .chain([ReduceOp::PreMulSum(scale)])
        .filter(|op| op.supports::<T>())
        .collect();
    let mut first_error = None;
    let mut failed = 0;
    for (ci, coll) in COLLS.iter().enumerate() {
        let reducing = matches!(coll, Coll::AllReduce | Coll::Reduce | Coll::ReduceScatter);
        let op_list: Vec<Option<ReduceOp>> = if reducing {
            ops.iter().map(|o| Some(*o)).collect()
        } else {
            vec![None]
        };
        let op_list = if ctx.big {
            op_list.into_iter().take(1).collect()
        } else {
            op_list
        };
        for (oi, op) in op_list.into_iter().enumerate() {
            for in_place in if ctx.big {
                vec![false]
            } else {
                vec![false, true]
            } {
                if in_place && *coll == Coll::Alltoall {
                    continue; // alltoall has no in-place form (as NCCL's)
                }
                let case = (ci * 100 + oi * 2 + in_place as usize) as u64;
                let root = ctx.n() - 1; // the last team index: not world PE 0 in general
                *cases += 1;
                if let Err(e) = one_case::<T>(ctx, *coll, op, in_place, root, case) {
                    failed += 1;
                    let what = format!(
                        "{coll:?} {}{}",
                        op.map(|o| o.to_string()).unwrap_or_default(),
                        if in_place { " in place" } else { "" }
                    );
                    first_error.get_or_insert(e.context(what));
                }
            }
        }
    }
    match first_error {
        None => Ok(()),
        Some(e) => Err(e.context(format!("{failed} cases failed, the first"))),
    }
}

/// One collective call checked end to end. Every world PE allocates (allocation is collective
/// over all PEs); only the team's members call the collective.
fn one_case<T: Element>(
    ctx: &Ctx,
    coll: Coll,
    op: Option<ReduceOp>,
    in_place: bool,
    root: usize,
    case: u64,
) -> anyhow::Result<()> {
    let (n, m) = (ctx.n(), ctx.count);
    let (src_len, dst_len) = match coll {
        Coll::AllReduce | Coll::Reduce | Coll::Broadcast => (m, m),
        Coll::Fcollect | Coll::Gather => (m, n * m),
        Coll::Alltoall => (n * m, n * m),
        Coll::ReduceScatter | Coll::Scatter => (n * m, m),
    };
    // In-place forms use one buffer of the larger length; the input is where NCCL puts it.
    let buf_len = src_len.max(dst_len);
    let inputs: Vec<Vec<T>> = (0..n)
        .map(|k| input::<T>(ctx, case, k, src_len, op))
        .collect();
    let rank = ctx.rank();
    let mut src: SymArray<T> = ctx.rt.alloc_zeroed(if in_place { 0 } else { src_len })?;
    let mut dst: SymArray<T> = ctx
        .rt
        .alloc_zeroed(if in_place { buf_len } else { dst_len })?;
    let mut before = vec![poison::<T>(); dst.len()];
    if let Some(r) = rank {
        if in_place {
            let at = match coll {
                Coll::Fcollect | Coll::Gather => r * m,
                _ => 0,
            };
            before[at..at + src_len].copy_from_slice(&inputs[r]);
        } else {
            src.copy_from_host(&inputs[r])?;
        }
    }
    dst.copy_from_host(&before)?;

    let outcome = match (ctx.team, rank) {
        (Some(team), Some(r)) => run_and_check(
            ctx, team, r, coll, op, in_place, root, &inputs, &mut src, &mut dst, &before,
        ),
        _ => Ok(()),
    };
    // Nobody frees (a collective) while a member may still be working on the buffers, and
    // every PE gets here, whatever failed.
    ctx.rt.barrier_all(ctx.stream)?;
    ctx.stream.synchronize()?;
    outcome
}

#[allow(clippy::too_many_arguments)]
fn run_and_check<T: Element>(
    ctx: &Ctx,
    team: &Team,
    r: usize,
    coll: Coll,
    op: Option<ReduceOp>,
    in_place: bool,
    root: usize,
    inputs: &[Vec<T>],
    src: &mut SymArray<T>,
    dst: &mut SymArray<T>,
    before: &[T],
) -> anyhow::Result<()> {
    let (n, m) = (ctx.n(), ctx.count);
    {
        let s: &CudaStream = ctx.stream;
        let op = op.unwrap_or(ReduceOp::Sum);
        match (coll, in_place) {
            (Coll::AllReduce, false) => team.all_reduce(&*src, &mut *dst, op, s)?,
            (Coll::AllReduce, true) => team.all_reduce_in_place(&mut *dst, op, s)?,
            (Coll::Reduce, false) => team.reduce(root, &*src, &mut *dst, op, s)?,
            (Coll::Reduce, true) => team.reduce_in_place(root, &mut *dst, op, s)?,
            (Coll::Broadcast, false) => team.broadcast(root, &*src, &mut *dst, s)?,
            (Coll::Broadcast, true) => team.broadcast_in_place(root, &mut *dst, s)?,
            (Coll::Fcollect, false) => team.fcollect(&*src, &mut *dst, s)?,
            (Coll::Fcollect, true) => team.fcollect_in_place(&mut *dst, s)?,
            (Coll::Alltoall, _) => team.alltoall(&*src, &mut *dst, s)?,
            (Coll::ReduceScatter, false) => team.reduce_scatter(&*src, &mut *dst, op, s)?,
            (Coll::ReduceScatter, true) => team.reduce_scatter_in_place(&mut *dst, op, s)?,
            (Coll::Gather, false) => team.gather(root, &*src, &mut *dst, s)?,
            (Coll::Gather, true) => team.gather_in_place(root, &mut *dst, s)?,
            (Coll::Scatter, false) => team.scatter(root, &*src, &mut *dst, s)?,
            (Coll::Scatter, true) => team.scatter_in_place(root, &mut *dst, s)?,
        }
        ctx.stream.synchronize()?;
        let got = dst.to_vec()?;
        let untouched = as_f64(before);
        // The region of `dst` the call defines, and what it must hold.
        let (at, want): (usize, Vec<f64>) = match coll {
            Coll::AllReduce => (0, reduce_ref(inputs, op)),
            Coll::Reduce if r == root => (0, reduce_ref(inputs, op)),
            Coll::Reduce => (0, untouched.clone()),
            Coll::Broadcast => (0, as_f64(&inputs[root])),
            Coll::Fcollect => (0, inputs.iter().flat_map(|v| as_f64(v)).collect()),
            Coll::Gather if r == root => (0, inputs.iter().flat_map(|v| as_f64(v)).collect()),
            Coll::Gather => (0, untouched.clone()),
            Coll::Alltoall => (
                0,
                inputs
                    .iter()
                    .flat_map(|v| as_f64(&v[r * m..(r + 1) * m]))
                    .collect(),
            ),
            Coll::ReduceScatter => {
                let blocks: Vec<Vec<T>> = inputs
                    .iter()
                    .map(|v| v[r * m..(r + 1) * m].to_vec())
                    .collect();
                (if in_place { r * m } else { 0 }, reduce_ref(&blocks, op))
            }
            Coll::Scatter => (
                if in_place { r * m } else { 0 },
                as_f64(&inputs[root][r * m..(r + 1) * m]),
            ),
        };
        let region = &got[at..at + want.len()];
        let root_only = matches!(coll, Coll::Reduce | Coll::Gather) && r != root;
        if root_only {
            // Left untouched: the very bytes written before.
            ensure!(
                bytemuck::cast_slice::<T, u8>(&got) == bytemuck::cast_slice::<T, u8>(before),
                "a non-root output was written"
            );
        } else {
            compare::<T>("result", region, &want, n)?;
        }
        if !in_place {
            ensure!(
                bytemuck::cast_slice::<T, u8>(&src.to_vec()?)
                    == bytemuck::cast_slice::<T, u8>(&inputs[r]),
                "the input was changed"
            );
        }
    }
    Ok(())
}

/// Each collective captured once in a CUDA graph and replayed twice, with new input between.
fn graph_replay(rt: &Runtime, world: &Team, seed: u64, cases: &mut usize) -> anyhow::Result<()> {
    let (me, n) = (rt.my_pe(), rt.n_pes());
    let stream = rt.context().new_stream()?;
    let m = 1001;
    let mut src = rt.alloc_zeroed::<f32>(n * m)?;
    let mut dst = rt.alloc_zeroed::<f32>(n * m)?;
    for coll in COLLS {
        let root = n - 1;
        stream.begin_capture(
            cudarc::driver::sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_RELAXED,
        )?;
        let queued = match coll {
            Coll::AllReduce => world.all_reduce(
                &src.view(..m)?,
                &mut dst.view_mut(..m)?,
                ReduceOp::Sum,
                &stream,
            ),
            Coll::Reduce => world.reduce(
                root,
                &src.view(..m)?,
                &mut dst.view_mut(..m)?,
                ReduceOp::Max,
                &stream,
            ),
            Coll::Broadcast => {
                world.broadcast(root, &src.view(..m)?, &mut dst.view_mut(..m)?, &stream)
            }
            Coll::Fcollect => world.fcollect(&src.view(..m)?, &mut dst, &stream),
            Coll::Alltoall => world.alltoall(&src, &mut dst, &stream),
            Coll::ReduceScatter => {
                world.reduce_scatter(&src, &mut dst.view_mut(..m)?, ReduceOp::Sum, &stream)
            }
            Coll::Gather => world.gather(root, &src.view(..m)?, &mut dst, &stream),
            Coll::Scatter => world.scatter(root, &src, &mut dst.view_mut(..m)?, &stream),
        };
        let graph = stream.end_capture(cudarc::driver::sys::CUgraphInstantiate_flags(0))?;
        queued?;
        let graph = graph.ok_or_else(|| anyhow::anyhow!("{coll:?}: the capture made no graph"))?;
        for replay in 0..2u64 {
            let data: Vec<f32> = (0..n * m)
                .map(|i| ((i as u64 * 31 + seed + replay * 7 + me as u64 * 1000) % 97) as f32)
                .collect();
            src.copy_from_host(&data)?;
            dst.copy_from_host(&vec![-1.0; n * m])?;
            rt.barrier_all(&stream)?;
            graph.launch()?;
            stream.synchronize()?;
            let got = dst.to_vec()?;
            let of = |pe: usize, i: usize| {
                ((i as u64 * 31 + seed + replay * 7 + pe as u64 * 1000) % 97) as f32
            };
            let want: Vec<(usize, f32)> = match coll {
                Coll::AllReduce => (0..m)
                    .map(|i| (i, (0..n).map(|p| of(p, i)).sum()))
                    .collect(),
                Coll::Reduce if me == root => (0..m)
                    .map(|i| (i, (0..n).map(|p| of(p, i)).fold(f32::MIN, f32::max)))
                    .collect(),
                Coll::Reduce | Coll::Gather => (0..m).map(|i| (i, -1.0)).collect(),
                Coll::Broadcast => (0..m).map(|i| (i, of(root, i))).collect(),
                Coll::Fcollect => (0..n * m).map(|i| (i, of(i / m, i % m))).collect(),
                Coll::Alltoall => (0..n * m).map(|i| (i, of(i / m, me * m + i % m))).collect(),
                Coll::ReduceScatter => (0..m)
                    .map(|i| (i, (0..n).map(|p| of(p, me * m + i)).sum()))
                    .collect(),
                Coll::Scatter => (0..m).map(|i| (i, of(root, me * m + i))).collect(),
            };
            let want = if coll == Coll::Gather && me == root {
                (0..n * m).map(|i| (i, of(i / m, i % m))).collect()
            } else {
                want
            };
            for (i, w) in want {
                ensure!(
                    got[i] == w,
                    "{coll:?} replay {replay}: element {i} is {}, expected {w}",
                    got[i]
                );
            }
            *cases += 1;
        }
    }
    Ok(())
}

/// The reductions that run this crate's kernels, captured in CUDA graphs and replayed twice
/// with new input between: avg (a kernel after NVSHMEM's sum), premul_sum on reduce-scatter
/// (a kernel scaling into the scratch before it) and an in-place fp8 all-reduce (the peer
/// kernel between barriers, through the scratch). Each is run once before capture, so the
/// kernels are compiled and loaded outside it.
fn graph_replay_kernels(
    rt: &Runtime,
    world: &Team,
    seed: u64,
    cases: &mut usize,
) -> anyhow::Result<()> {
    use nvshmem::element_ext::F8E4M3;
    let (me, n) = (rt.my_pe(), rt.n_pes());
    let stream = rt.context().new_stream()?;
    let m = 1001;
    // Multiples of 0.25 in [-1, 1]: exact in every type here, and their sums over 8 PEs too
    // (in f32; fp8 rounds the sum once).
    let of = |pe: usize, i: usize, replay: u64| {
        ((i as u64 * 13 + seed + replay * 5 + pe as u64 * 7) % 9) as f64 / 4.0 - 1.0
    };
    let mut f_src = rt.alloc_zeroed::<f32>(n * m)?;
    let mut f_dst = rt.alloc_zeroed::<f32>(n * m)?;
    let mut q = rt.alloc_zeroed::<F8E4M3>(m)?;
    let queue = |case: usize,
                 f_src: &SymArray<f32>,
                 f_dst: &mut SymArray<f32>,
                 q: &mut SymArray<F8E4M3>,
                 s: &CudaStream|
     -> nvshmem::Result<()> {
        match case {
            0 => world.all_reduce(
                &f_src.view(..m)?,
                &mut f_dst.view_mut(..m)?,
                ReduceOp::Avg,
                s,
            ),
            1 => world.reduce_scatter(
                f_src,
                &mut f_dst.view_mut(..m)?,
                ReduceOp::PreMulSum(0.5),
                s,
            ),
            _ => world.all_reduce_in_place(q, ReduceOp::Sum, s),
        }
    };
    for case in 0..3 {
        queue(case, &f_src, &mut f_dst, &mut q, &stream)?;
        stream.synchronize()?;
        rt.barrier_all(&stream)?;
        stream.begin_capture(
            cudarc::driver::sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_RELAXED,
        )?;
        let queued = queue(case, &f_src, &mut f_dst, &mut q, &stream);
        let graph = stream.end_capture(cudarc::driver::sys::CUgraphInstantiate_flags(0))?;
        queued?;
        let graph =
            graph.ok_or_else(|| anyhow::anyhow!("case {case}: the capture made no graph"))?;
        for replay in 0..2u64 {
            let data: Vec<f32> = (0..n * m).map(|i| of(me, i, replay) as f32).collect();
            f_src.copy_from_host(&data)?;
            f_dst.copy_from_host(&vec![-100.0; n * m])?;
            let q_data: Vec<F8E4M3> = (0..m)
                .map(|i| F8E4M3::from_f64(of(me, i, replay)))
                .collect();
            q.copy_from_host(&q_data)?;
            rt.barrier_all(&stream)?;
            graph.launch()?;
            stream.synchronize()?;
            let (got, want, tol): (Vec<f64>, Vec<f64>, f64) = match case {
                0 => (
                    f_dst.to_vec()?[..m].iter().map(|&x| x as f64).collect(),
                    (0..m)
                        .map(|i| (0..n).map(|p| of(p, i, replay)).sum::<f64>() / n as f64)
                        .collect(),
                    1e-6,
                ),
                1 => (
                    f_dst.to_vec()?[..m].iter().map(|&x| x as f64).collect(),
                    (0..m)
                        .map(|i| (0..n).map(|p| 0.5 * of(p, me * m + i, replay)).sum())
                        .collect(),
                    0.0,
                ),
                _ => (
                    q.to_vec()?.iter().map(|x| x.to_f64()).collect(),
                    (0..m)
                        .map(|i| (0..n).map(|p| of(p, i, replay)).sum())
                        .collect(),
                    2f64.powi(-4),
                ),
            };
            for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                ensure!(
                    (g - w).abs() <= tol * w.abs() + 1e-9,
                    "case {case} replay {replay}: element {i} is {g}, expected {w}"
                );
            }
            *cases += 1;
        }
    }
    rt.barrier_all(&stream)?;
    stream.synchronize()?;
    Ok(())
}

/// Every bad input is refused with a typed error before anything is launched, and the job
/// goes on afterwards (a barrier and a correct collective complete).
fn bad_inputs(rt: &Runtime, world: &Team, s: &std::sync::Arc<CudaStream>) -> anyhow::Result<()> {
    let n = rt.n_pes();
    let a = rt.alloc_zeroed::<f32>(8 * n)?;
    let mut b = rt.alloc_zeroed::<f32>(8 * n)?;
    let ints = rt.alloc_zeroed::<i32>(8)?;
    let mut ints_out = rt.alloc_zeroed::<i32>(8)?;
    let invalid = |r: nvshmem::Result<()>, what: &str| -> anyhow::Result<()> {
        match r {
            Err(Error::InvalidArgument { .. }) | Err(Error::Unsupported { .. }) => Ok(()),
            other => bail!("{what}: expected a typed refusal, got {other:?}"),
        }
    };
    invalid(
        world.all_reduce(&a.view(..7)?, &mut b.view_mut(..8)?, ReduceOp::Sum, s),
        "length mismatch",
    )?;
    invalid(world.broadcast(n, &a, &mut b, s), "root out of range")?;
    invalid(
        world.reduce(n + 3, &a, &mut b, ReduceOp::Sum, s),
        "reduce root out of range",
    )?;
    invalid(world.all_reduce(&a, &mut b, ReduceOp::Xor, s), "xor on f32")?;
    invalid(
        world.fcollect(&a.view(..8)?, &mut b.view_mut(..8 * n - 1)?, s),
        "fcollect length",
    )?;
    if n > 1 {
        invalid(
            world.reduce_scatter(
                &a.view(..8 * n - 1)?,
                &mut b.view_mut(..8)?,
                ReduceOp::Sum,
                s,
            ),
            "reduce_scatter length",
        )?;
        invalid(
            world.alltoall(&a.view(..8 * n - 1)?, &mut b.view_mut(..8 * n - 1)?, s),
            "alltoall divisibility",
        )?;
    }
    // Input and output cannot overlap by mistake: they are two arrays, or one array borrowed
    // mutably by an `_in_place` call, which the borrow checker keeps apart. An integer
    // bitwise reduction between the refusals shows the job is still healthy.
    world.all_reduce(&ints, &mut ints_out, ReduceOp::And, s)?;
    let arg_op = |r: nvshmem::Result<()>, what: &str| -> anyhow::Result<()> {
        match r {
            Err(Error::InvalidArgument { arg: "op", .. }) => Ok(()),
            other => bail!("{what}: expected InvalidArgument naming op, got {other:?}"),
        }
    };
    arg_op(
        world.all_reduce(&ints, &mut ints_out, ReduceOp::PreMulSum(0.5), s),
        "premul_sum(0.5) on i32",
    )?;
    // A whole scale, negative too, is fine for a signed type.
    world.all_reduce(&ints, &mut ints_out, ReduceOp::PreMulSum(-1.0), s)?;
    let bools = rt.alloc_zeroed::<nvshmem::element_ext::Bool8>(8)?;
    let mut bools_out = rt.alloc_zeroed::<nvshmem::element_ext::Bool8>(8)?;
    arg_op(
        world.all_reduce(&bools, &mut bools_out, ReduceOp::Sum, s),
        "sum on bool8",
    )?;
    let f8 = rt.alloc_zeroed::<nvshmem::element_ext::F8E4M3>(8)?;
    let mut f8_out = rt.alloc_zeroed::<nvshmem::element_ext::F8E4M3>(8)?;
    match world.all_reduce(&f8, &mut f8_out, ReduceOp::Prod, s) {
        Err(Error::Unsupported { .. }) => {}
        other => bail!("prod on f8e4m3: expected Unsupported, got {other:?}"),
    }
    rt.barrier_all(s)?;
    world.all_reduce(&a, &mut b, ReduceOp::Sum, s)?;
    s.synchronize()?;
    Ok(())
}
