//! GPU checks of the collectives at every team size, beyond the matrix (`gpu_collectives.rs`):
//! every algorithm forced in turn over views that start at unaligned offsets, with odd
//! counts, in place and not (the direct kernels' narrow stores and their mismatched-source
//! branch; NVSHMEM's in-place layouts); CUDA graphs replayed at sizes that take each path;
//! collectives queued beside a kernel that fills the GPU; several split teams at once; the
//! broadcasts and all-reduces that went wrong or waited until the timeout when the PEs' kernels
//! could not all be resident; the NVLink kernels across their channels' epoch wrap. Run by `scripts/gpu-check.sh`'s `scale` suite at each PE count,
//! on separate GPUs or with several PEs on one GPU under CUDA MPS.
//!
//! Every check is collective: every PE runs every check, in the same order, whatever failed.
mod common;

use anyhow::{bail, ensure, Context as _};
use common::{mix, poison, refused, Checks, Layout};
use cudarc::driver::{CudaStream, LaunchConfig, PushKernelArg};
use nvshmem::{
    collective::Collective, element::Element, ElementKind, ReduceOp, Runtime, SymArray, Team,
};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[test]
#[ignore = "needs NVIDIA GPUs and NVSHMEM: run scripts/gpu-check.sh on a GPU machine"]
fn gpu_scale() {
    let session = common::start(Runtime::builder().heap_size(2 << 30).channels(24));
    let rt = session.rt.clone();
    let (me, n) = (rt.my_pe(), rt.n_pes());
    let seed: u64 = std::env::var("GPU_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5eed);
    if me == 0 {
        println!("scale checks: {n} PEs, seed {seed}");
    }
    rt.reserve_scratch(256 << 20).expect("scratch");
    let mut c = Checks::new(me);
    common::start_watchdog(me, Duration::from_secs(30));
    let world = rt.world();
    let stream = rt.stream().clone();

    c.run("broadcast_of_1mib_from_pe_0_repeated", || {
        repeated::<f32>(
            &rt,
            &world,
            &stream,
            Collective::Broadcast,
            (1 << 20) / 4,
            0,
            10,
        )
    });
    c.run("all_reduce_of_4mib_repeated", || {
        repeated::<f32>(
            &rt,
            &world,
            &stream,
            Collective::AllReduce,
            (4 << 20) / 4,
            0,
            5,
        )
    });
    c.run("broadcasts_of_64mib_bf16_and_f64", || {
        repeated::<half::bf16>(
            &rt,
            &world,
            &stream,
            Collective::Broadcast,
            (64 << 20) / 2,
            n - 1,
            3,
        )?;
        repeated::<f64>(
            &rt,
            &world,
            &stream,
            Collective::Broadcast,
            (64 << 20) / 8,
            n - 1,
            3,
        )
    });
    c.run("in_place_layouts_by_every_algorithm", || {
        in_place_layouts(&rt, &world, &stream, seed)
    });
    c.run("unaligned_views_and_odd_counts_by_every_algorithm", || {
        unaligned(&rt, &world, &stream, seed)
    });
    c.run("graphs_replayed_at_every_size", || {
        graphs(&rt, &world, seed)
    });
    c.run("several_split_teams_at_once", || {
        split_teams(&rt, &world, seed)
    });
    c.run("collectives_beside_a_kernel_that_fills_the_gpu", || {
        beside_filler(&rt, &world, seed)
    });
    c.run("channel_epochs_across_the_wrap", || {
        epoch_wrap(&rt, &world, seed)
    });

    drop((world, stream, rt));
    c.finish("gpu_scale");
    session.end();
}

// ---- inputs, expectations, one checked call ----------------------------------------------

/// Element `i` of team member `k`'s input in case `key`: small whole numbers, exact in every
/// type and in sums over 8 PEs (bf16 included).
fn input<T: Element>(key: u64, k: usize, i: usize) -> T {
    let r = mix(key ^ mix((k as u64 + 1) << 32 ^ (i as u64 + 1)));
    let v = match T::KIND {
        ElementKind::Unsigned => (r % 15) as f64,
        ElementKind::Bool => (r % 2) as f64,
        _ => (r % 15) as f64 - 7.0,
    };
    T::from_f64(v)
}

/// One call: the collective, its layout and its inputs' key.
#[derive(Clone, Copy, Debug)]
struct Case {
    coll: Collective,
    /// Elements of one part (`Call::count`).
    m: usize,
    in_place: bool,
    root: usize,
    /// Where the input (out of place) and the output (or the one in-place buffer) start, in
    /// elements from the start of their arrays.
    src_at: usize,
    dst_at: usize,
    key: u64,
}

impl Case {
    /// Its buffers and result in a team of `n`.
    fn layout(&self, n: usize) -> Layout {
        Layout {
            coll: self.coll,
            n,
            m: self.m,
            in_place: self.in_place,
            root: self.root,
        }
    }

    fn out_len(&self, n: usize) -> usize {
        self.layout(n).out_len()
    }
}

/// Runs `case` over `team` (of which this PE is member `r` of `n`) in `src` and `dst`, which
/// must be long enough, and checks the result. Every world PE calls it (the barriers are over
/// every PE); `team` is `None` on PEs outside it.
fn one<T: Element>(
    rt: &Runtime,
    team: Option<&Team>,
    src: &mut SymArray<T>,
    dst: &mut SymArray<T>,
    case: Case,
    s: &Arc<CudaStream>,
) -> anyhow::Result<()> {
    let Some(team) = team else {
        rt.barrier_all(s)?;
        rt.barrier_all(s)?;
        s.synchronize()?;
        return Ok(());
    };
    let (n, r) = (team.n_pes(), team.my_pe());
    let layout = case.layout(n);
    let (src_len, _) = layout.lens();
    let out_len = layout.out_len();
    let (own, before) = write_inputs(src, dst, case, n, r, s)?;
    rt.barrier_all(s)?;
    let called = call(team, src, dst, case, n, s);
    let mut got = vec![T::default(); out_len];
    let mut src_after = vec![T::default(); if case.in_place { 0 } else { src_len }];
    if called.is_ok() {
        s.memcpy_dtoh(
            &dst.view(case.dst_at..case.dst_at + out_len)?,
            got.as_mut_slice(),
        )?;
        if !case.in_place {
            s.memcpy_dtoh(
                &src.view(case.src_at..case.src_at + src_len)?,
                src_after.as_mut_slice(),
            )?;
        }
    }
    rt.barrier_all(s)?;
    s.synchronize()?;
    called?;
    // A kernel that stopped waiting (timeout, abort) says so here, before its results are
    // judged: they are undefined then, and the error names the cause.
    rt.async_error()?;
    check(&case, n, r, &before, &got)?;
    ensure!(
        case.in_place || bits(&src_after) == bits(&own),
        "the input was changed"
    );
    Ok(())
}

/// Queues on `s` the writes of member `r`'s input of `case` (in a team of `n`) and of its
/// poisoned output (in place, the input in it); returns both as written (input, output).
fn write_inputs<T: Element>(
    src: &mut SymArray<T>,
    dst: &mut SymArray<T>,
    case: Case,
    n: usize,
    r: usize,
    s: &Arc<CudaStream>,
) -> anyhow::Result<(Vec<T>, Vec<T>)> {
    let layout = case.layout(n);
    let (src_len, _) = layout.lens();
    let own: Vec<T> = (0..src_len).map(|i| input(case.key, r, i)).collect();
    let mut before = vec![poison::<T>(); layout.out_len()];
    if case.in_place {
        let at = layout.input_at(r);
        before[at..at + src_len].copy_from_slice(&own);
    } else {
        s.memcpy_htod(
            own.as_slice(),
            &mut src.view_mut(case.src_at..case.src_at + src_len)?,
        )?;
    }
    // From pageable memory: CUDA has staged the data when the call returns.
    s.memcpy_htod(
        before.as_slice(),
        &mut dst.view_mut(case.dst_at..case.dst_at + before.len())?,
    )?;
    Ok((own, before))
}

fn bits<T: Element>(v: &[T]) -> &[u8] {
    bytemuck::cast_slice(v)
}

/// Queues the call of `case`, in views of `src` and `dst` at its offsets.
fn call<T: Element>(
    team: &Team,
    src: &SymArray<T>,
    dst: &mut SymArray<T>,
    case: Case,
    n: usize,
    s: &Arc<CudaStream>,
) -> anyhow::Result<()> {
    let layout = case.layout(n);
    let (src_len, _) = layout.lens();
    let sv = src.view(case.src_at..case.src_at + src_len)?;
    let mut dv = dst.view_mut(case.dst_at..case.dst_at + layout.out_len())?;
    let (coll, in_place, root) = (case.coll, case.in_place, case.root);
    common::call(team, coll, in_place, root, ReduceOp::Sum, &sv, &mut dv, s)?;
    Ok(())
}

/// What member `r` of `n` must read back after `case` (sums of whole numbers: exact), with
/// `before` the output buffer as written before the call.
fn check<T: Element>(
    case: &Case,
    n: usize,
    r: usize,
    before: &[T],
    got: &[T],
) -> anyhow::Result<()> {
    let layout = case.layout(n);
    let f = |k: usize, i: usize| input::<T>(case.key, k, i).to_f64();
    if layout.root_only(r) {
        ensure!(bits(got) == bits(before), "a non-root output was written");
        return Ok(());
    }
    let result = layout.result(r);
    let (at, len) = (result.start, result.len());
    let sum = |val: &dyn Fn(usize) -> f64| (0..n).map(val).sum::<f64>();
    let want = |i: usize| layout.expected(r, i, f, sum);
    for i in 0..len {
        let (g, w) = (got[at + i].to_f64(), T::from_f64(want(i)).to_f64());
        if g != w {
            let wrong = (i..len)
                .filter(|&j| got[at + j].to_f64() != T::from_f64(want(j)).to_f64())
                .count();
            bail!(
                "element {i} of {len} is {g}, expected {w} ({wrong} wrong from there{})",
                if g == poison::<T>().to_f64() {
                    "; it is the poison: never written"
                } else {
                    ""
                }
            );
        }
    }
    Ok(())
}

/// Runs `case` with `algo` forced (or the automatic choice), counting a refusal as skipped.
#[allow(clippy::too_many_arguments)]
fn forced<T: Element>(
    rt: &Runtime,
    team: Option<&Team>,
    src: &mut SymArray<T>,
    dst: &mut SymArray<T>,
    case: Case,
    algo: Option<&str>,
    s: &Arc<CudaStream>,
    tally: &mut Tally,
) {
    let done = rt
        .set_algorithm(case.coll, algo)
        .map_err(anyhow::Error::from)
        .and_then(|()| one(rt, team, src, dst, case, s));
    let _ = rt.set_algorithm(case.coll, None);
    // Which team, roughly: the checks run on the world and on teams in another order.
    let order = match team {
        Some(t) if t.n_pes() == rt.n_pes() && t.my_pe() == rt.my_pe() => "world order",
        Some(_) => "team in another order",
        None => "not a member",
    };
    tally.record(done, || {
        format!(
            "{} {:?} x{} {}{}at {}/{} ({}, {order})",
            T::NAME,
            case.coll,
            case.m,
            if case.in_place { "in place " } else { "" },
            if case.coll.is_rooted() {
                format!("root {} ", case.root)
            } else {
                String::new()
            },
            case.src_at,
            case.dst_at,
            algo.unwrap_or("auto")
        )
    });
}

#[derive(Default)]
struct Tally {
    passed: usize,
    failed: usize,
    refused: usize,
    first: Vec<String>,
}

impl Tally {
    /// Counts one case's outcome; a failure's first few are kept, named by `what`.
    fn record(&mut self, done: anyhow::Result<()>, what: impl FnOnce() -> String) {
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
                "{what}: {} cases passed, {} failed, {} refused by a forced algorithm",
                self.passed, self.failed, self.refused
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

/// The algorithms to force for `coll`: the automatic choice, then each of its registry.
fn algorithms(coll: Collective) -> Vec<Option<&'static str>> {
    std::iter::once(None)
        .chain(coll.algorithms().into_iter().map(Some))
        .collect()
}

// ---- the checks -------------------------------------------------------------------------

/// One collective over the world, `rounds` times, with fresh inputs and a check each time.
fn repeated<T: Element>(
    rt: &Runtime,
    world: &Team,
    s: &Arc<CudaStream>,
    coll: Collective,
    m: usize,
    root: usize,
    rounds: u64,
) -> anyhow::Result<()> {
    let n = rt.n_pes();
    let (sl, dl) = coll
        .geometry()
        .lengths(m, n)
        .expect("a test's sizes fit a usize");
    let mut src = rt.alloc_zeroed::<T>(sl)?;
    let mut dst = rt.alloc_zeroed::<T>(dl)?;
    for round in 0..rounds {
        let case = Case {
            coll,
            m,
            in_place: false,
            root,
            src_at: 0,
            dst_at: 0,
            key: 1000 + round,
        };
        one(rt, Some(world), &mut src, &mut dst, case, s)
            .with_context(|| format!("{} {coll:?} x{m} round {round}", T::NAME))?;
    }
    Ok(())
}

/// The in-place forms of every collective, by every algorithm that accepts them, at a block
/// of 4099 i32 (past the LL range: the automatic choice hands some to NVSHMEM) and 1 MiB, on
/// the world team and on the world listed in reverse (team index != world PE); rooted ones
/// from the first, a middle and the last team index (an in-place gather's blocks lie at every
/// member's own index, whichever the root: the direct kernels' pull mode read the root's).
fn in_place_layouts(
    rt: &Runtime,
    world: &Team,
    s: &Arc<CudaStream>,
    seed: u64,
) -> anyhow::Result<()> {
    let n = rt.n_pes();
    let reversed: Vec<usize> = (0..n).rev().collect();
    let listed = world.from_pes(&reversed)?;
    let counts = [1, 4099, (1 << 20) / 4];
    let longest = n * counts[2];
    let mut src = rt.alloc_zeroed::<i32>(longest)?;
    let mut dst = rt.alloc_zeroed::<i32>(longest)?;
    let mut tally = Tally::default();
    for (ti, team) in [Some(world), listed.as_ref()].into_iter().enumerate() {
        for (ci, coll) in common::data_collectives().into_iter().enumerate() {
            if !coll.geometry().has_in_place() {
                continue;
            }
            let mut roots = vec![n - 1];
            if coll.is_rooted() {
                roots.extend([0, n / 2]);
                roots.sort_unstable();
                roots.dedup();
            }
            for algo in algorithms(coll) {
                for &root in &roots {
                    for (k, &m) in counts.iter().enumerate() {
                        let case = Case {
                            coll,
                            m,
                            in_place: true,
                            root,
                            src_at: 0,
                            dst_at: 0,
                            key: seed ^ (root * 4096 + ti * 256 + ci * 16 + k) as u64,
                        };
                        forced(rt, team, &mut src, &mut dst, case, algo, s, &mut tally);
                    }
                }
            }
        }
    }
    drop((src, dst));
    drop(listed);
    tally.finish(rt, "in-place layouts")
}

/// Views starting at unaligned offsets (each side its own), odd counts, 8-, 16- and 32-bit
/// elements, every collective by every algorithm that accepts it, in place and not.
fn unaligned(rt: &Runtime, world: &Team, s: &Arc<CudaStream>, seed: u64) -> anyhow::Result<()> {
    fn per_type<T: Element>(
        rt: &Runtime,
        world: &Team,
        s: &Arc<CudaStream>,
        seed: u64,
        tally: &mut Tally,
    ) -> anyhow::Result<()> {
        let n = rt.n_pes();
        // Elements a part: a few (LL), a block past LL's crossover, one that takes the direct
        // kernels for every collective; all odd.
        let counts = [37usize, 4099, 70001];
        // (src_at, dst_at, in place): the two sides misaligned against each other and against
        // 16 bytes, equally misaligned, and an in-place buffer that starts off 16 bytes.
        let layouts = [(1usize, 3usize, false), (5, 5, false), (0, 7, true)];
        let longest = n * counts[2] + 16;
        let mut src = rt.alloc_zeroed::<T>(longest)?;
        let mut dst = rt.alloc_zeroed::<T>(longest)?;
        for (ci, coll) in common::data_collectives().into_iter().enumerate() {
            for algo in algorithms(coll) {
                for (k, &m) in counts.iter().enumerate() {
                    for (l, &(src_at, dst_at, in_place)) in layouts.iter().enumerate() {
                        if in_place && !coll.geometry().has_in_place() {
                            continue;
                        }
                        let case = Case {
                            coll,
                            m,
                            in_place,
                            root: (ci + k) % n,
                            src_at,
                            dst_at,
                            key: seed ^ ((ci * 64 + k * 8 + l) as u64) << 8,
                        };
                        forced(rt, Some(world), &mut src, &mut dst, case, algo, s, tally);
                    }
                }
            }
        }
        Ok(())
    }
    let mut tally = Tally::default();
    per_type::<u8>(rt, world, s, seed, &mut tally)?;
    per_type::<half::bf16>(rt, world, s, seed, &mut tally)?;
    per_type::<f32>(rt, world, s, seed, &mut tally)?;
    tally.finish(rt, "unaligned views and odd counts")
}

/// Every collective captured once in a CUDA graph at sizes that take LL, NVSHMEM and the
/// direct kernels, then replayed: once with new inputs, then 100 times back to back, each
/// checked. On the world team and, from 4 PEs, on the halves of a split.
fn graphs(rt: &Runtime, world: &Team, seed: u64) -> anyhow::Result<()> {
    let (me, n) = (rt.my_pe(), rt.n_pes());
    let half = world.split(Some((me * 2 / n.max(1)) as u32), 0)?;
    let teams: Vec<(&str, Option<&Team>)> = if n >= 4 {
        vec![("world", Some(world)), ("half", half.as_ref())]
    } else {
        vec![("world", Some(world))]
    };
    let s = rt.context().new_stream()?;
    let counts = [1001usize, 70001, (1 << 20) / 4];
    let mut src = rt.alloc_zeroed::<f32>(n * counts[2])?;
    let mut dst = rt.alloc_zeroed::<f32>(n * counts[2])?;
    let mut replays = 0;
    for (tname, team) in &teams {
        for (ci, coll) in common::data_collectives().into_iter().enumerate() {
            for (k, &m) in counts.iter().enumerate() {
                let case = |key: u64| Case {
                    coll,
                    m,
                    in_place: false,
                    root: 0,
                    src_at: 0,
                    dst_at: 0,
                    key,
                };
                let key0 = seed ^ ((ci * 8 + k) as u64) << 16;
                // Once outside the capture (kernels compiled, channel bound).
                one(rt, *team, &mut src, &mut dst, case(key0), &s)
                    .with_context(|| format!("{tname} {coll:?} x{m} before capture"))?;
                let graph = match team {
                    Some(t) => {
                        let graph = rt
                            .capture(&s, |cs| call(t, &src, &mut dst, case(key0), t.n_pes(), cs))?;
                        Some(graph)
                    }
                    None => None,
                };
                for (round, times) in [(1u64, 1), (2, 100)] {
                    let key = key0 ^ round;
                    // Inputs and poison as `one` writes them, then the graph instead of a call.
                    let c = case(key);
                    let (tn, r) = team.map_or((0, 0), |t| (t.n_pes(), t.my_pe()));
                    let mut before = Vec::new();
                    if team.is_some() {
                        before = write_inputs(&mut src, &mut dst, c, tn, r, &s)?.1;
                    }
                    rt.barrier_all(&s)?;
                    if let Some(g) = &graph {
                        for _ in 0..times {
                            g.launch()?;
                        }
                    }
                    rt.barrier_all(&s)?;
                    s.synchronize()?;
                    if team.is_some() {
                        let got = dst.view(..c.out_len(tn))?;
                        let mut host = vec![0f32; c.out_len(tn)];
                        s.memcpy_dtoh(&got, host.as_mut_slice())?;
                        s.synchronize()?;
                        check(&c, tn, r, &before, &host).with_context(|| {
                            format!("{tname} {coll:?} x{m}: graph replayed {times} times")
                        })?;
                        replays += times;
                    }
                }
            }
        }
    }
    if me == 0 {
        println!("graphs: {replays} replays checked on PE 0");
    }
    drop(half);
    Ok(())
}

/// The world split in two (by parity) and in a 2-D grid, every team running all-reduce,
/// fcollect and broadcast on its own stream at the same time as the world on another, many
/// rounds with nothing between them; then every result checked.
fn split_teams(rt: &Runtime, world: &Team, _seed: u64) -> anyhow::Result<()> {
    const ROUNDS: usize = 50;
    let (me, n) = (rt.my_pe(), rt.n_pes());
    let parity = world.split(Some((me % 2) as u32), 0)?;
    let (x, y) = world.split_2d(2.min(n))?;
    let teams: Vec<&Team> = [Some(world), parity.as_ref(), x.as_ref(), y.as_ref()]
        .into_iter()
        .flatten()
        .collect();
    let streams: Vec<_> = (0..teams.len())
        .map(|_| rt.context().new_stream())
        .collect::<Result<_, _>>()?;
    let m = 3001;
    let mut bufs = Vec::new();
    for (k, t) in teams.iter().enumerate() {
        let ar_src = rt.alloc_from(&vec![(t.my_pe() * 3 + k + 1) as f32; m])?;
        let ar_dst = rt.alloc_zeroed::<f32>(m)?;
        let fc_src = rt.alloc_from(&vec![(t.my_pe() * 5 + k) as f32; m])?;
        // Every PE allocates the same arrays (teams of one split differ in size at odd PE
        // counts): room for the largest team, of which each team fills its own size.
        let fc_dst = rt.alloc_zeroed::<f32>(n * m)?;
        let bc = rt.alloc_from(&vec![(t.my_pe() * 7 + k) as f32; m])?;
        let bc_dst = rt.alloc_zeroed::<f32>(m)?;
        bufs.push((ar_src, ar_dst, fc_src, fc_dst, bc, bc_dst));
    }
    // Each (team, stream) pair's first call, which binds its channel, one at a time in the same
    // order on every PE; then everything interleaved.
    for round in 0..ROUNDS {
        for (k, t) in teams.iter().enumerate() {
            let (a, b, c, d, e, f) = &mut bufs[k];
            let st = &streams[k];
            t.all_reduce(&*a, b, ReduceOp::Sum, st)?;
            let tn = t.n_pes();
            t.fcollect(&*c, &mut d.view_mut(..tn * m)?, st)?;
            t.broadcast(t.n_pes() - 1, &*e, f, st)?;
            if round == 0 {
                st.synchronize()?;
            }
        }
    }
    for st in &streams {
        st.synchronize()?;
    }
    for (k, t) in teams.iter().enumerate() {
        let tn = t.n_pes();
        let (_, b, _, d, _, f) = &bufs[k];
        let ar = (0..tn).map(|p| (p * 3 + k + 1) as f32).sum::<f32>();
        ensure!(
            b.to_vec()?.iter().all(|&v| v == ar),
            "team {k} ({tn} PEs): all-reduce"
        );
        let fc = d.to_vec()?;
        for (i, &v) in fc[..tn * m].iter().enumerate() {
            ensure!(
                v == ((i / m) * 5 + k) as f32,
                "team {k} ({tn} PEs): fcollect element {i} is {v}"
            );
        }
        ensure!(
            f.to_vec()?.iter().all(|&v| v == ((tn - 1) * 7 + k) as f32),
            "team {k} ({tn} PEs): broadcast"
        );
    }
    drop(bufs);
    rt.barrier_all(rt.stream())?;
    rt.stream().synchronize()?;
    drop(teams);
    // Destroyed collectively, in the same order on every PE.
    drop(parity);
    drop(x);
    drop(y);
    Ok(())
}

/// A kernel that occupies every SM of this PE's share of the GPU for `FILL_MS`, queued on a
/// side stream just before collectives of every path on another: they must complete with the
/// right results (the filler ends, and the collectives' blocks are scheduled after it), or
/// end within the timeout with an error that names the cause. First the filler runs on the
/// last PE only (its peers' kernels wait for its blocks), then on every PE.
fn beside_filler(rt: &Runtime, world: &Team, seed: u64) -> anyhow::Result<()> {
    const FILL_MS: u64 = 300;
    let (me, n) = (rt.my_pe(), rt.n_pes());
    let ctx = rt.context();
    let src = r#"
extern "C" __global__ void fill(unsigned long long ns) {
    unsigned long long t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    } while (t - t0 < ns);
}
"#;
    let ptx = cudarc::nvrtc::compile_ptx(src).context("compiling the filler")?;
    let module = ctx.load_module(ptx)?;
    let fill = module.load_function("fill")?;
    let sms = ctx.attribute(
        cudarc::driver::sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
    )? as u32;
    let side = ctx.new_stream()?;
    let s = rt.context().new_stream()?;
    let sizes: [(Collective, usize); 5] = [
        (Collective::AllReduce, 1001),
        (Collective::AllReduce, (4 << 20) / 4),
        (Collective::Broadcast, (1 << 20) / 4),
        (Collective::Fcollect, 70001),
        (Collective::ReduceScatter, 70001),
    ];
    let longest = n * (4 << 20) / 4;
    let mut a = rt.alloc_zeroed::<f32>(longest)?;
    let mut b = rt.alloc_zeroed::<f32>(longest)?;
    for (round, who) in [(0u64, Some(n - 1)), (1, None)] {
        for (k, &(coll, m)) in sizes.iter().enumerate() {
            let case = Case {
                coll,
                m,
                in_place: false,
                root: 0,
                src_at: 0,
                dst_at: 0,
                key: seed ^ (round * 16 + k as u64) << 24,
            };
            // The filler goes in right after the barrier that opens the case, so the
            // collective is queued while it holds the SMs: `one`'s steps, with the filler
            // between its first barrier and the call.
            let (_, before) = write_inputs(&mut a, &mut b, case, n, me, &s)?;
            rt.barrier_all(&s)?;
            s.synchronize()?;
            let t0 = Instant::now();
            if who.is_none_or(|p| p == me) {
                let cfg = LaunchConfig {
                    grid_dim: (sms * 2, 1, 1),
                    block_dim: (1024, 1, 1),
                    shared_mem_bytes: 0,
                };
                let ns = FILL_MS * 1_000_000;
                let mut l = side.launch_builder(&fill);
                l.arg(&ns);
                // SAFETY: the kernel takes one u64 and touches no memory.
                unsafe { l.launch(cfg) }?;
            }
            let called = call(world, &a, &mut b, case, n, &s);
            let mut got = vec![0f32; case.out_len(n)];
            if called.is_ok() {
                s.memcpy_dtoh(&b.view(..case.out_len(n))?, got.as_mut_slice())?;
            }
            rt.barrier_all(&s)?;
            let synced = s.synchronize();
            let took = t0.elapsed();
            side.synchronize()?;
            called.with_context(|| format!("{coll:?} x{m}: the call"))?;
            synced.with_context(|| {
                format!("{coll:?} x{m} beside the filler (round {round}): after {took:?}")
            })?;
            rt.async_error().with_context(|| {
                format!("{coll:?} x{m} beside the filler (round {round}, {took:?})")
            })?;
            check(&case, n, me, &before, &got).with_context(|| {
                format!("{coll:?} x{m} beside the filler (round {round}, {took:?})")
            })?;
        }
    }
    Ok(())
}

/// The last live epoch of a channel block (`NVR_EPOCH_LAST`, `kernels/PROTOCOL.md`, "Epochs").
const EPOCH_LAST: u32 = 0xFFFF_FFFE;

/// The NVLink kernels across their epoch wrap (`kernels/PROTOCOL.md`, "Epochs": live epochs are
/// 1 ..= `EPOCH_LAST`, 0 and 0xFFFFFFFF are skipped, so consecutive runs alternate parity
/// across the wrap too), which in use comes only after 2^32 - 2 runs of one block. The
/// channels of the world team and of the world listed in reverse (team index != world PE) are
/// set as if every block had just run epoch `EPOCH_LAST - 3 k` (round k: 0 to 5, so both
/// parities, the first call of round 0 running epoch 1); then 40 calls of every collective
/// with `nvlink_ll`, `nvlink_direct` and (reductions) `nvlink_lamport` forced (whose buffer
/// rotation must not hang on the epochs), the automatic choice, barriers and syncs, on
/// both teams at random (the same on every PE), are queued back to back with nothing between
/// them, and every result is checked once they are done.
fn epoch_wrap(rt: &Runtime, world: &Team, seed: u64) -> anyhow::Result<()> {
    const ROUNDS: u32 = 6;
    const CALLS: u64 = 40;
    let (me, n) = (rt.my_pe(), rt.n_pes());
    if !world.has_nvlink_kernels() {
        if me == 0 {
            println!(
                "epoch wrap: the world team has no NVLink kernels (no channel): nothing wraps"
            );
        }
        return Ok(());
    }
    let reversed: Vec<usize> = (0..n).rev().collect();
    let listed = world
        .from_pes(&reversed)?
        .context("every PE is in the reversed list")?;
    // Both have channels unless every channel is taken (then the listed team runs NVSHMEM's
    // algorithms, and only the world's channel wraps).
    let teams: Vec<&Team> = [world, &listed]
        .into_iter()
        .filter(|t| t.has_nvlink_kernels())
        .collect();
    let s = rt.context().new_stream()?;
    // Before and after the setting: every PE done with the channels, then every PE's setting
    // done, by NVSHMEM's own barrier, which does not use them.
    let fence = || -> anyhow::Result<()> {
        s.synchronize()?;
        rt.set_algorithm(Collective::Barrier, Some("nvshmem"))?;
        let done = rt.barrier_all(&s);
        rt.set_algorithm(Collective::Barrier, None)?;
        done?;
        s.synchronize()?;
        Ok(())
    };
    let colls = common::data_collectives();
    let mut tally = Tally::default();
    // Calls queued by forced nvlink_ll, forced nvlink_direct, the automatic choice,
    // barriers or syncs, and forced nvlink_lamport.
    let mut kinds = [0usize; 5];
    for round in 0..ROUNDS {
        let start = EPOCH_LAST - 3 * round;
        fence()?;
        for &t in &teams {
            // SAFETY: every PE sets the same epoch on the same teams here, between two
            // `fence`s (every PE's stream drained, then NVSHMEM's barrier, which does not use
            // the channels), so no call of the team is in flight or starts meanwhile.
            let has_channel = unsafe { t.set_channel_epoch_for_tests(start, &s)? };
            ensure!(has_channel, "a team with NVLink kernels has no channel");
        }
        fence()?;
        // The calls: (team, case or a barrier/sync, forced algorithm), the same on every PE.
        let mut plan = Vec::new();
        let (mut src_len, mut dst_len) = (0usize, 0usize);
        for i in 0..CALLS {
            let r = mix(seed ^ (u64::from(round) << 32) ^ i ^ 0xe90c);
            let ti = usize::from(r.is_multiple_of(4)).min(teams.len() - 1);
            let kind = (r >> 8) % 10;
            if kind < 2 {
                let coll = [Collective::Barrier, Collective::Sync][kind as usize];
                plan.push((ti, coll, None, None));
                continue;
            }
            let coll = colls[((r >> 16) % colls.len() as u64) as usize];
            let (algo, m) = match kind {
                2..=5 => (Some("nvlink_ll"), 1 + (r >> 24) % 1500),
                6 | 7 => (Some("nvlink_direct"), 20_000 + (r >> 24) % 50_001),
                // Up to 240 KB a PE: within the Lamport buffers this heap and channel count
                // give (about 1.86 MiB for 2 PEs, 272 KB a peer at 8 PEs).
                8 if coll.reduces() => (Some("nvlink_lamport"), 1 + (r >> 24) % 60_000),
                _ => (None, 1 + (r >> 24) % 70_000),
            };
            let algo = algo.filter(|a| coll.algorithms().contains(a));
            let case = Case {
                coll,
                m: m as usize,
                in_place: coll.geometry().has_in_place() && (r >> 44).is_multiple_of(3),
                root: ((r >> 48) as usize) % n,
                // Each call its own part of the arrays, 16-byte aligned.
                src_at: src_len,
                dst_at: dst_len,
                key: mix(r),
            };
            let layout = case.layout(n);
            src_len += layout.lens().0.next_multiple_of(4);
            dst_len += layout.out_len().next_multiple_of(4);
            plan.push((ti, coll, Some(case), algo));
        }
        let mut src = rt.alloc_zeroed::<f32>(src_len.max(1))?;
        let mut dst = rt.alloc_zeroed::<f32>(dst_len.max(1))?;
        // Inputs and poison as `one` writes them, for every call, then one barrier.
        let mut befores = Vec::new();
        for &(ti, _, case, _) in &plan {
            let Some(case) = case else {
                befores.push(Vec::new());
                continue;
            };
            let r = teams[ti].my_pe();
            befores.push(write_inputs(&mut src, &mut dst, case, n, r, &s)?.1);
        }
        rt.barrier_all(&s)?;
        // Back to back.
        let mut queued = Vec::new();
        for &(ti, coll, case, algo) in &plan {
            let team = teams[ti];
            let Some(case) = case else {
                common::call::<f32>(team, coll, false, 0, ReduceOp::Sum, &src, &mut dst, &s)?;
                kinds[3] += 1;
                queued.push(Ok(()));
                continue;
            };
            rt.set_algorithm(coll, algo)?;
            let done = call(team, &src, &mut dst, case, n, &s);
            rt.set_algorithm(coll, None)?;
            if done.is_ok() {
                kinds[match algo {
                    Some("nvlink_ll") => 0,
                    Some("nvlink_lamport") => 4,
                    Some(_) => 1,
                    None => 2,
                }] += 1;
            }
            queued.push(done);
        }
        let mut got = Vec::new();
        for (k, &(_, _, case, _)) in plan.iter().enumerate() {
            let mut back = vec![0f32; befores[k].len()];
            if let (Some(case), Ok(())) = (case, &queued[k]) {
                s.memcpy_dtoh(
                    &dst.view(case.dst_at..case.dst_at + back.len())?,
                    back.as_mut_slice(),
                )?;
            }
            got.push(back);
        }
        rt.barrier_all(&s)?;
        s.synchronize()?;
        rt.async_error()
            .with_context(|| format!("round {round}, from epoch {start:#x}"))?;
        for (k, (&(ti, _, case, algo), done)) in plan.iter().zip(queued).enumerate() {
            let Some(case) = case else { continue };
            let r = teams[ti].my_pe();
            let checked = done
                .and_then(|()| check(&case, n, r, &befores[k], &got[k]))
                .with_context(|| format!("round {round} (from epoch {start:#x}), call {k}"));
            tally.record(checked, || {
                format!(
                    "{:?} x{} {}on team {ti} ({})",
                    case.coll,
                    case.m,
                    if case.in_place { "in place " } else { "" },
                    algo.unwrap_or("auto")
                )
            });
        }
        drop((src, dst));
    }
    fence()?;
    let used = teams.len();
    drop(teams);
    // Destroyed collectively, on every PE.
    drop(listed);
    if me == 0 {
        println!(
            "epoch wrap: {ROUNDS} rounds of {CALLS} calls on {} teams from epochs {EPOCH_LAST:#x} - 3 k: \
             {} queued by nvlink_ll (forced), {} by nvlink_direct (forced), {} by nvlink_lamport \
             (forced), {} by the automatic choice, {} barriers and syncs",
            used,
            kinds[0],
            kinds[1],
            kinds[4],
            kinds[2],
            kinds[3]
        );
    }
    tally.finish(rt, "epoch wrap")
}
