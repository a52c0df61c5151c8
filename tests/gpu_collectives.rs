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

use anyhow::{bail, ensure, Context as _};
use common::{mix, poison, refused, Checks, Layout};
use cudarc::driver::CudaStream;
use nvshmem::testing::{self, Reference};
use nvshmem::{
    collective::{CallKind, Collective},
    Element, ElementKind, Error, ReduceOp, Runtime, SymArray, Team,
};

/// Per-PE block sizes in bytes beyond the element counts below; the 64 MiB size runs for the
/// world team, each operation with its first operator, out of place.
const BIG: usize = 64 << 20;
const MEDIUM: usize = 1 << 20;
/// The size class `near_ll`: about 100 KiB a PE block, under what LL carries a pair at every
/// team size to 8 (128 KiB), not a multiple of 16 bytes, so that forced LL moves many packets
/// a thread in several batches with a short tail.
const NEAR_LL: usize = 3;

#[test]
#[ignore = "needs NVIDIA GPUs and NVSHMEM: run scripts/gpu-check.sh on a GPU machine"]
fn gpu_collectives() {
    // Channels for every (team, stream) pair the checks use, with room to spare.
    let session = common::start(Runtime::builder().heap_size(3 << 30).channels(24));
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
    common::start_watchdog(me, std::time::Duration::from_secs(30));
    let threads = host_threads(n);
    let started = std::time::Instant::now();

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
    let only = Selection::from_env();
    for (tname, team, members) in &teams {
        let medium = medium_teams
            .as_deref()
            .is_none_or(|l| l.split(',').any(|t| t == *tname));
        if me == 0 && !medium {
            println!("collectives matrix: team {tname} skips the 1 MiB size (MATRIX_MEDIUM_TEAMS)");
        }
        for bytes in [0usize, 1, 2, NEAR_LL, MEDIUM]
            .into_iter()
            .filter(|b| medium || *b != MEDIUM)
            .filter(|&b| only.class(b))
        {
            macro_rules! per_type {
                ($t:ty) => {
                    let counts = if only.ty(<$t as Element>::NAME) {
                        counts::<$t>(bytes)
                    } else {
                        vec![]
                    };
                    for count in counts {
                        let ctx = Ctx {
                            rt: &rt,
                            team: *team,
                            members,
                            stream: &stream,
                            seed,
                            count,
                            big: false,
                            threads,
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
                threads,
            };
            if only.class(BIG) && only.ty(<$t as Element>::NAME) {
                c.run(&format!("world/{}/64MiB", <$t as Element>::NAME), || {
                    matrix::<$t>(&ctx, &mut cases)
                });
            }
        };
    }
    nvshmem::for_each_element!(big);
    nvshmem::for_each_extra_element!(big);

    c.run("collectives_in_flight_on_two_streams_and_two_teams", || {
        concurrent(&rt, &world, listed.as_ref())
    });
    c.run("collectives_from_several_host_threads", || {
        from_threads(&rt, &world, listed.as_ref())
    });
    c.run("graph_capture_and_replay", || {
        graph_replay(&rt, &world, seed, 1001, &mut cases)
    });
    if only.class(BIG) && only.ty("f32") {
        // 64 MiB blocks: the direct kernels' large-message paths (the rooted reduce's split
        // from 3 PEs), replayed as the small calls are.
        c.run("graph_capture_and_replay_of_64_mib_calls", || {
            graph_replay(&rt, &world, seed, BIG / 4, &mut cases)
        });
    }
    if only.class(MEDIUM) && only.ty("f32") {
        // 1 MiB blocks: LL's limit on 2 PEs (64 blocks of one region each), forced with
        // the others under MATRIX_FORCE=each, replayed as the small calls are.
        c.run("graph_capture_and_replay_of_1_mib_calls", || {
            graph_replay(&rt, &world, seed, MEDIUM / 4, &mut cases)
        });
    }
    if n >= 3 {
        // The relayed LL broadcast (nvr_ll_broadcast_relay), forced at a size that takes it on
        // this many PEs: past 128 KiB from 4 PEs (chunks of 40 KiB or more, under what LL
        // carries a pair on 8), past the one-shot's reach on 3 (336 KiB a pair). A 12-byte tail
        // leaves the last chunk shorter; the root is the last PE.
        c.run("graph_capture_and_replay_of_relayed_broadcasts", || {
            let bytes = if n == 3 {
                500 << 10
            } else {
                (132usize << 10).max((n - 1) * (40 << 10))
            } + 12;
            let stream = rt.context().new_stream()?;
            rt.set_algorithm(Collective::Broadcast, Some("nvlink_ll"))?;
            let done = graph_replay_one(
                &rt,
                &world,
                seed,
                Collective::Broadcast,
                bytes / 4,
                &stream,
                &mut cases,
            );
            rt.set_algorithm(Collective::Broadcast, None)?;
            done
        });
    }
    c.run("graph_capture_and_replay_of_kernel_reductions", || {
        graph_replay_kernels(&rt, &world, seed, &mut cases)
    });
    c.run("graph_replay_of_lamport_reductions_with_new_inputs", || {
        let colls = [
            Collective::AllReduce,
            Collective::ReduceScatter,
            Collective::Reduce,
        ];
        with_lamport_forced(&rt, &world, "lamport graph", &colls, || {
            lamport_rounds(&rt, &world, seed, &mut cases)
        })
    });
    c.run(
        "graph_replay_of_lamport_copies_with_the_sentinel_in_their_data",
        || {
            let colls = [
                Collective::Broadcast,
                Collective::Fcollect,
                Collective::Alltoall,
                Collective::Gather,
                Collective::Scatter,
            ];
            with_lamport_forced(&rt, &world, "lamport copies", &colls, || {
                lamport_copy_rounds(&rt, &world, seed, &mut cases)
            })
        },
    );
    c.run("bad_inputs_are_refused_before_launch", || {
        bad_inputs(&rt, &world, &stream)
    });
    c.run("a_forced_algorithm_is_refused_alike_on_every_pe", || {
        forced_refusal(&rt, &world, &stream)
    });
    c.run(
        "an_array_dropped_right_after_queuing_is_not_reused_early",
        || drop_after_queue(&rt, &world),
    );
    c.run("what_a_free_costs", || free_cost(&rt));
    c.run("prepared_calls_give_what_the_calls_give", || {
        prepared(&rt, &world, listed.as_ref())
    });

    if me == 0 {
        println!(
            "collectives matrix: {cases} cases run on PE 0 in {:.1} s ({threads} host threads a PE); \
             {} refused by a forced algorithm (skipped)",
            started.elapsed().as_secs_f64(),
            REFUSED.load(std::sync::atomic::Ordering::Relaxed)
        );
    }
    // Teams are destroyed collectively, in the same order on every PE.
    drop(teams);
    drop((strided, listed, single, world, stream, rt));
    c.finish("gpu_collectives");
    session.end();
}

/// Which size classes and element types the matrix runs: `MATRIX_CLASSES` (comma-separated,
/// of `one`, `odd`, `unaligned`, `near_ll`, `medium` and `big`: 1 element, an odd count, a
/// count whose bytes are not a multiple of 16, about 100 KiB (`NEAR_LL`), 1 MiB and 64 MiB a
/// PE) and `MATRIX_TYPES` (type names, as `f32,bf16,u8`); each unset means all. They fit a run of many PEs into a short lease (e.g.
/// `MATRIX_CLASSES=one,odd,unaligned` at 8 PEs) and are the same on every PE. With
/// `MATRIX_FORCE=each`, `MATRIX_ALGOS` (algorithm names, as `nvshmem,nvlink_ll`) limits the
/// algorithms forced, so that a wrong result can be tied to the calls made before it.
struct Selection {
    classes: Option<Vec<String>>,
    types: Option<Vec<String>>,
    algos: Option<Vec<String>>,
}

impl Selection {
    fn from_env() -> Self {
        let list = |v: &str| {
            std::env::var(v)
                .ok()
                .map(|s| s.split(',').map(|t| t.trim().to_string()).collect())
        };
        Selection {
            classes: list("MATRIX_CLASSES"),
            types: list("MATRIX_TYPES"),
            algos: list("MATRIX_ALGOS"),
        }
    }

    fn algo(&self, name: &str) -> bool {
        self.algos
            .as_ref()
            .is_none_or(|l| l.iter().any(|a| a == name))
    }

    /// Whether the size class `bytes` (as `counts` takes it, or `BIG`) runs.
    fn class(&self, bytes: usize) -> bool {
        let name = match bytes {
            0 => "one",
            1 => "odd",
            2 => "unaligned",
            NEAR_LL => "near_ll",
            BIG => "big",
            _ => "medium",
        };
        self.classes
            .as_ref()
            .is_none_or(|l| l.iter().any(|c| c == name))
    }

    fn ty(&self, name: &str) -> bool {
        self.types
            .as_ref()
            .is_none_or(|l| l.iter().any(|t| t == name))
    }
}

/// The element counts for a size class: 0 means 1 element, 1 an odd count, 2 a count whose
/// bytes are not a multiple of 16, `NEAR_LL` about 100 KiB, anything else that many bytes.
fn counts<T: Element>(class: usize) -> Vec<usize> {
    let size = std::mem::size_of::<T>();
    match class {
        0 => vec![1],
        1 => vec![1001],
        2 => vec![(0..64)
            .map(|k| 13 + k)
            .find(|c| !(c * size).is_multiple_of(16))
            .unwrap()],
        // 102,412 bytes, or the count just under it: 8-byte types 102,408 (6,400.5 times 16).
        NEAR_LL => vec![(100 * 1024 + 12) / size],
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
    /// Host threads this PE may use to make inputs and check results.
    threads: usize,
}

impl Ctx<'_> {
    fn n(&self) -> usize {
        self.members.len()
    }
    /// This PE's team index, when it is a member.
    fn rank(&self) -> Option<usize> {
        self.team.map(|t| t.my_pe())
    }
}

/// The host threads each PE uses: the machine's cores shared among the PEs on it (all PEs
/// of a run are on one node here; the launcher does not bind them to cores).
fn host_threads(n_pes: usize) -> usize {
    let cores = std::thread::available_parallelism().map_or(1, |p| p.get());
    (cores / n_pes.max(1)).max(1)
}

/// Slices shorter than this are worked through on the calling thread: a thread costs more
/// than it saves on them.
const MIN_CHUNK: usize = 1 << 15;

fn chunk_len(len: usize, threads: usize) -> usize {
    len.div_ceil(threads.max(1)).max(MIN_CHUNK)
}

/// Sets `out[i] = f(i)` for every index, on up to `threads` threads.
fn par_fill<X: Send>(out: &mut [X], threads: usize, f: impl Fn(usize) -> X + Sync) {
    let chunk = chunk_len(out.len(), threads);
    if chunk >= out.len() {
        out.iter_mut().enumerate().for_each(|(i, x)| *x = f(i));
        return;
    }
    let f = &f;
    std::thread::scope(|s| {
        for (c, part) in out.chunks_mut(chunk).enumerate() {
            s.spawn(move || {
                let start = c * chunk;
                part.iter_mut()
                    .enumerate()
                    .for_each(|(j, x)| *x = f(start + j));
            });
        }
    });
}

/// The first index below `len` for which `bad` holds, searched on up to `threads` threads.
fn par_find(len: usize, threads: usize, bad: impl Fn(usize) -> bool + Sync) -> Option<usize> {
    let chunk = chunk_len(len, threads);
    if chunk >= len {
        return (0..len).find(|&i| bad(i));
    }
    let bad = &bad;
    std::thread::scope(|s| {
        let parts: Vec<_> = (0..len)
            .step_by(chunk)
            .map(|start| s.spawn(move || (start..(start + chunk).min(len)).find(|&i| bad(i))))
            .collect();
        // In index order, so the first mismatch reported is the first of the whole slice.
        parts
            .into_iter()
            .find_map(|p| p.join().expect("a checking thread panicked"))
    })
}

const GOLDEN: u64 = 0x9e37_79b9_7f4a_7c15;

/// The deterministic inputs of one case: element `i` of what the member at team index `k`
/// puts in is a hash of (seed, case, input length, k, i). Any PE computes any member's
/// element on its own, without making the elements before it or the other members' inputs.
struct Inputs<T> {
    key: u64,
    small_prod: bool,
    _t: std::marker::PhantomData<fn() -> T>,
}

// By hand: a derive would ask `T: Clone`, which the marker does not need.
impl<T> Clone for Inputs<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for Inputs<T> {}

impl<T: Element> Inputs<T> {
    fn new(seed: u64, case: u64, len: usize, op: Option<ReduceOp>) -> Self {
        Inputs {
            key: mix(seed ^ mix(case.wrapping_mul(GOLDEN) ^ ((len as u64) << 24))),
            small_prod: matches!(op, Some(ReduceOp::Prod)) && std::mem::size_of::<T>() <= 2,
            _t: std::marker::PhantomData,
        }
    }

    /// Element `i` of member `k`'s input.
    fn at(&self, k: usize, i: usize) -> T {
        let member = mix(self.key ^ (k as u64 + 1).wrapping_mul(GOLDEN));
        let r = mix(member.wrapping_add((i as u64 + 1).wrapping_mul(GOLDEN)));
        let v = match T::KIND {
            // Integer inputs stay small enough that no reduction over 8 PEs overflows: a
            // product of 8- and 16-bit unsigned inputs of 0, 1 and 2 takes a 2 from members
            // 0..7 only, so it is at most 128 (eight 2s, 256, wrapped to 0 in u8 on 8 PEs at
            // 102,412 elements, 2026-11-27, where this check wanted 256).
            ElementKind::Signed if self.small_prod => (r % 3) as f64 - 1.0,
            ElementKind::Unsigned if self.small_prod => {
                (r % 2) as f64 + (k < 7 && r.is_multiple_of(5)) as u8 as f64
            }
            ElementKind::Signed => (r % 15) as f64 - 7.0,
            ElementKind::Unsigned => (r % 15) as f64,
            // fp8: multiples of 0.25 in [-2, 2], exact in e4m3 and e5m2, so a reduction
            // over up to 8 PEs is exact in f32 and rounded once on the store.
            ElementKind::Float if is_fp8::<T>() => (r % 17) as f64 / 4.0 - 2.0,
            ElementKind::Float => (r % 2001) as f64 / 1000.0 - 1.0,
            ElementKind::Bool => (r % 2) as f64,
        };
        T::from_f64(v)
    }

    /// Element `i` of member `k`'s input, as the type holds it, in f64.
    fn f(&self, k: usize, i: usize) -> f64 {
        self.at(k, i).to_f64()
    }

    /// Member `k`'s whole input, of `len` elements.
    fn whole(&self, k: usize, len: usize, threads: usize) -> Vec<T> {
        let mut v = vec![T::default(); len];
        par_fill(&mut v, threads, |i| self.at(k, i));
        v
    }
}

fn is_fp8<T: Element>() -> bool {
    T::KIND == ElementKind::Float && std::mem::size_of::<T>() == 1
}

/// Compares `got` with `want(i)` for every index by the library's one definition of a right
/// answer ([`testing::element_ok`]: integers and truth values exactly, after the type's own
/// conversion; floats within the error `k` roundings allow, `k` being
/// [`testing::roundings`] over `n` members, but 1 for fp8, which this crate computes in `f32`
/// and rounds once). Returns the first mismatch.
fn compare<T: Element>(
    what: &str,
    got: &[T],
    want: impl Fn(usize) -> Reference + Sync,
    n: usize,
    threads: usize,
) -> anyhow::Result<()> {
    match first_wrong(got, &want, n, threads) {
        Some(i) => bail!("{}", mismatch(what, got, i, want(i), n)),
        None => Ok(()),
    }
}

/// What `compare` says of element `i` of `got`, which is not `w`.
fn mismatch<T: Element>(what: &str, got: &[T], i: usize, w: Reference, n: usize) -> String {
    format!(
        "{what}: element {i} is {} (bytes {:?}), expected {} (within {}; of {})",
        got[i].to_f64(),
        bytemuck::bytes_of(&got[i]),
        w.value,
        testing::allowed_error(T::DTYPE, roundings::<T>(n), w.magnitude),
        got.len()
    )
}

/// The reference's rounding allowance for `T` over `n` members.
fn roundings<T: Element>(n: usize) -> usize {
    if is_fp8::<T>() {
        1
    } else {
        testing::roundings(n)
    }
}

/// The first element of `got` that is not `want`'s value, within the allowance.
fn first_wrong<T: Element>(
    got: &[T],
    want: impl Fn(usize) -> Reference + Sync,
    n: usize,
    threads: usize,
) -> Option<usize> {
    let k = roundings::<T>(n);
    let good = |i: usize| testing::element_ok(T::DTYPE, bytemuck::bytes_of(&got[i]), want(i), k);
    par_find(got.len(), threads, |i| !good(i))
}

/// For element `i` of member `r`'s wrong result: the inputs the reference combines for it and
/// what the output held there before the call, so that a wrong value seen once can be traced
/// (a member's input missing, a stale value, the poison never overwritten).
fn explain<T: Element>(
    layout: &Layout,
    inputs: &Inputs<T>,
    r: usize,
    i: usize,
    before: Option<&T>,
) -> String {
    let reads = std::cell::RefCell::new(Vec::new());
    layout.expected::<f64>(
        r,
        i,
        |k, j| {
            reads.borrow_mut().push((k, j));
            inputs.f(k, j)
        },
        |val| (0..layout.n).map(val).sum(),
    );
    let reads: Vec<String> = reads
        .into_inner()
        .into_iter()
        .map(|(k, j)| format!("member {k} [{j}] = {}", inputs.f(k, j)))
        .collect();
    let before = before.map_or("nothing".into(), |b| b.to_f64().to_string());
    format!(
        "its inputs: {}; the output held {before} there before the call",
        reads.join(", ")
    )
}

/// Cases a forced algorithm refused (skipped, not failed).
static REFUSED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// The symmetric buffers every case of one type, size and team runs in: `n * count`
/// elements each, the longest any case uses; a case views the lengths it needs (views keep
/// the symmetric address). Allocated once instead of per case, since every allocation and
/// free is a barrier over all PEs.
struct Bufs<T: Element> {
    src: SymArray<T>,
    dst: SymArray<T>,
}

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
    // Every world PE allocates, members of the team or not (allocation is collective over
    // all PEs), the same lengths (the team's size is the same everywhere). A refusal is the
    // same on every PE (the heap is checked against the size every PE started with).
    let len = ctx.n() * ctx.count;
    let mut bufs = Bufs {
        src: ctx.rt.alloc_zeroed::<T>(len)?,
        dst: ctx.rt.alloc_zeroed::<T>(len)?,
    };
    let mut first_error = None;
    let mut failed = 0;
    // MATRIX_FORCE=each: every case runs once with each algorithm of its collective forced
    // in turn (the sizes up to 1 MiB), instead of once with the automatic choice.
    let each = std::env::var("MATRIX_FORCE").is_ok_and(|v| v == "each") && !ctx.big;
    for (ci, coll) in common::data_collectives().into_iter().enumerate() {
        let algos: Vec<Option<&str>> = if each {
            let only = Selection::from_env();
            coll.algorithms()
                .into_iter()
                .filter(|a| only.algo(a))
                .map(Some)
                .collect()
        } else {
            vec![None]
        };
        for algo in algos {
            ctx.rt.set_algorithm(coll, algo)?;
            let op_list: Vec<Option<ReduceOp>> = if coll.reduces() {
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
                    if in_place && !coll.geometry().has_in_place() {
                        continue; // alltoall has no in-place form (as NCCL's)
                    }
                    let case = (ci * 100 + oi * 2 + in_place as usize) as u64;
                    *cases += 1;
                    let layout = Layout {
                        coll,
                        n: ctx.n(),
                        m: ctx.count,
                        in_place,
                        root: ctx.n() - 1, // the last team index: not world PE 0 in general
                    };
                    let one = Case {
                        op,
                        inputs: Inputs::new(ctx.seed, case, layout.lens().0, op),
                        layout,
                    };
                    match one_case::<T>(ctx, &mut bufs, one) {
                        Ok(()) => {}
                        // The same on every member: the choice depends only on what they
                        // all pass.
                        Err(e) if refused(&e) => {
                            REFUSED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        }
                        Err(e) => {
                            failed += 1;
                            let what = format!(
                                "{coll:?} {}{}{}",
                                op.map(|o| o.to_string()).unwrap_or_default(),
                                if in_place { " in place" } else { "" },
                                algo.map(|a| format!(" (forced {a})")).unwrap_or_default()
                            );
                            first_error.get_or_insert(e.context(what));
                        }
                    }
                }
            }
        }
        ctx.rt.set_algorithm(coll, None)?;
    }
    // The buffers are freed here (collectively, in the same order on every PE), after the
    // last case's barrier and synchronize: no PE is still working on them.
    drop(bufs);
    match first_error {
        None => Ok(()),
        Some(e) => Err(e.context(format!("{failed} cases failed, the first"))),
    }
}

/// One case of the matrix: the call, its buffers and the inputs it runs with.
struct Case<T> {
    op: Option<ReduceOp>,
    inputs: Inputs<T>,
    layout: Layout,
}

/// What a member read back after its call, for the checks.
struct Readback<T> {
    /// This PE's input.
    own: Vec<T>,
    /// The output buffer as written before the call: poison, and in place the input.
    before: Vec<T>,
    /// The output buffer after the call.
    got: Vec<T>,
    /// `src` after the call (out of place), which must still be the input.
    src_after: Option<Vec<T>>,
}

/// One collective call checked end to end, in the buffers `matrix` allocated. Only the
/// team's members call the collective; every PE takes part in the two barriers.
fn one_case<T: Element>(ctx: &Ctx, bufs: &mut Bufs<T>, case: Case<T>) -> anyhow::Result<()> {
    let what = format!(
        "{} x{} {:?} {}{}",
        T::NAME,
        ctx.count,
        case.layout.coll,
        case.op.map(|o| o.to_string()).unwrap_or_default(),
        if case.layout.in_place {
            " in place"
        } else {
            ""
        }
    );
    common::step(format!("{what}: inputs, call"));
    let member = ctx.team.zip(ctx.rank());
    let written = member.map(|(_, r)| write_inputs(ctx, r, bufs, &case));
    // Every PE, whatever failed: no member's call may put into a peer's output before that
    // peer has written its poison and input (the buffers are reused from case to case, and a
    // PE may still be checking the last case while a faster one starts this one). A barrier
    // on the stream: the host does not wait for it.
    ctx.rt.barrier_all(ctx.stream)?;
    let launched = match (member, written) {
        (Some((team, _)), Some(Ok(w))) => Some(launch(ctx, team, bufs, &case, w)),
        (_, Some(Err(e))) => Some(Err(e)),
        _ => None,
    };
    // Every PE gets here, whatever failed. The barrier keeps the next case's writes to the
    // buffers from racing with peers still working on this case's (the same buffers); the
    // synchronize completes the copies back to the host.
    ctx.rt.barrier_all(ctx.stream)?;
    common::step(format!("{what}: synchronize"));
    ctx.stream.synchronize()?;
    common::step(format!("{what}: check"));
    match (member, launched) {
        (Some((_, r)), Some(back)) => check(ctx, r, &case, &back?),
        _ => Ok(()),
    }
}

/// A member's input and the output buffer as it was written before the call.
struct Written<T> {
    own: Vec<T>,
    /// Poison, and in place the input where NCCL puts it.
    before: Vec<T>,
}

/// Queues on the stream, for member `r`, the writes of its input and of the poisoned output.
fn write_inputs<T: Element>(
    ctx: &Ctx,
    r: usize,
    bufs: &mut Bufs<T>,
    case: &Case<T>,
) -> anyhow::Result<Written<T>> {
    let s = ctx.stream;
    let (src_len, out_len) = (case.layout.lens().0, case.layout.out_len());
    let own = case.inputs.whole(r, src_len, ctx.threads);
    let mut before = vec![poison::<T>(); out_len];
    if case.layout.in_place {
        let at = case.layout.input_at(r);
        before[at..at + src_len].copy_from_slice(&own);
    } else {
        s.memcpy_htod(own.as_slice(), &mut bufs.src.view_mut(..src_len)?)?;
    }
    // From pageable memory: CUDA has staged the data when the call returns.
    s.memcpy_htod(before.as_slice(), &mut bufs.dst.view_mut(..out_len)?)?;
    Ok(Written { own, before })
}

/// Queues on the stream, for a member: the call, and the copies back of the output and (out
/// of place) the input.
fn launch<T: Element>(
    ctx: &Ctx,
    team: &Team,
    bufs: &mut Bufs<T>,
    case: &Case<T>,
    written: Written<T>,
) -> anyhow::Result<Readback<T>> {
    let s = ctx.stream;
    let l = case.layout;
    let (src_len, out_len) = (l.lens().0, l.out_len());
    let src = bufs.src.view(..src_len)?;
    let mut dst = bufs.dst.view_mut(..out_len)?;
    let op = case.op.unwrap_or(ReduceOp::Sum);
    common::call(team, l.coll, l.in_place, l.root, op, &src, &mut dst, s)?;
    let mut got = vec![T::default(); out_len];
    s.memcpy_dtoh(&dst, got.as_mut_slice())?;
    let src_after = if l.in_place {
        None
    } else {
        let mut v = vec![T::default(); src_len];
        s.memcpy_dtoh(&src, v.as_mut_slice())?;
        Some(v)
    };
    Ok(Readback {
        own: written.own,
        before: written.before,
        got,
        src_after,
    })
}

/// Checks what member `r` read back (after the stream was synchronised).
fn check<T: Element>(
    ctx: &Ctx,
    r: usize,
    case: &Case<T>,
    back: &Readback<T>,
) -> anyhow::Result<()> {
    let (n, threads) = (ctx.n(), ctx.threads);
    let (layout, inputs) = (case.layout, case.inputs);
    let op = case.op.unwrap_or(ReduceOp::Sum);
    let got = &back.got;
    if layout.root_only(r) {
        // Left untouched: the very bytes written before.
        ensure!(
            bytemuck::cast_slice::<T, u8>(got) == bytemuck::cast_slice::<T, u8>(&back.before),
            "a non-root output was written"
        );
    } else {
        // The region of the output the call defines.
        let result = layout.result(r);
        let Some(region) = got.get(result.clone()) else {
            bail!(
                "the output has {} elements, the result needs {result:?}",
                got.len()
            );
        };
        let want = |i: usize| {
            layout.expected(
                r,
                i,
                |k, j| inputs.f(k, j),
                |val| testing::reduce(op, n, val),
            )
        };
        if let Some(i) = first_wrong::<T>(region, want, n, threads) {
            // Where the wrong value may have come from, for a failure seen once.
            let why = explain(&layout, &inputs, r, i, back.before.get(result.start + i));
            bail!("{}; {why}", mismatch("result", region, i, want(i), n));
        }
    }
    if let Some(src_after) = &back.src_after {
        ensure!(
            bytemuck::cast_slice::<T, u8>(src_after) == bytemuck::cast_slice::<T, u8>(&back.own),
            "the input was changed"
        );
    }
    Ok(())
}

/// Each collective captured once in a CUDA graph and replayed twice, with new input between.
/// How many times a captured graph is replayed back to back before its last check: every
/// replay advances the NVLink kernels' epochs on the device, so a replayed graph must keep
/// working as long as it is replayed.
const REPLAYS: u64 = 1000;

/// The algorithms a graph check runs a collective with: the automatic choice, or with
/// `MATRIX_FORCE=each` every algorithm of the collective forced in turn.
fn graph_algorithms(coll: Collective) -> Vec<Option<&'static str>> {
    if std::env::var("MATRIX_FORCE").is_ok_and(|v| v == "each") {
        coll.algorithms().into_iter().map(Some).collect()
    } else {
        vec![None]
    }
}

/// Every data collective of `m` f32 elements a block, captured and replayed
/// ([`graph_replay_one`]).
fn graph_replay(
    rt: &Runtime,
    world: &Team,
    seed: u64,
    m: usize,
    cases: &mut usize,
) -> anyhow::Result<()> {
    let stream = rt.context().new_stream()?;
    for coll in common::data_collectives() {
        // Large calls with the automatic choice only, as the matrix's `big` class.
        let algos = if m >= 1 << 20 {
            vec![None]
        } else {
            graph_algorithms(coll)
        };
        for algo in algos {
            rt.set_algorithm(coll, algo)?;
            let done = graph_replay_one(rt, world, seed, coll, m, &stream, cases);
            rt.set_algorithm(coll, None)?;
            match done {
                Err(e) if refused(&e) => {
                    REFUSED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
                Err(e) => return Err(e.context(format!("{coll:?} forced {algo:?}"))),
                Ok(()) => {}
            }
        }
    }
    Ok(())
}

/// One collective of `m` elements a block captured in a graph and replayed: twice with new
/// inputs between, checked each time, then [`REPLAYS`] times back to back and checked again.
fn graph_replay_one(
    rt: &Runtime,
    world: &Team,
    seed: u64,
    coll: Collective,
    m: usize,
    stream: &std::sync::Arc<CudaStream>,
    cases: &mut usize,
) -> anyhow::Result<()> {
    let (me, n) = (rt.my_pe(), rt.n_pes());
    let mut src = rt.alloc_zeroed::<f32>(n * m)?;
    let mut dst = rt.alloc_zeroed::<f32>(n * m)?;
    {
        let layout = Layout {
            coll,
            n,
            m,
            in_place: false,
            root: n - 1,
        };
        let (sl, dl) = layout.lens();
        // Max for reduce: a second operator through the same graph path.
        let op = if coll == Collective::Reduce {
            ReduceOp::Max
        } else {
            ReduceOp::Sum
        };
        let queue = |src: &SymArray<f32>, dst: &mut SymArray<f32>| {
            let (sv, mut dv) = (src.view(..sl)?, dst.view_mut(..dl)?);
            common::call(world, coll, false, layout.root, op, &sv, &mut dv, stream)
        };
        // Once outside the capture: the kernels compile.
        queue(&src, &mut dst)?;
        stream.synchronize()?;
        rt.barrier_all(stream)?;
        let graph = rt.capture(stream, |_| queue(&src, &mut dst))?;
        for replay in 0..3u64 {
            // The third round replays the second's inputs REPLAYS times, then checks.
            let (replay, times) = if replay == 2 {
                (1, REPLAYS)
            } else {
                (replay, 1)
            };
            let data: Vec<f32> = (0..n * m)
                .map(|i| ((i as u64 * 31 + seed + replay * 7 + me as u64 * 1000) % 97) as f32)
                .collect();
            src.copy_from_host(&data)?;
            dst.copy_from_host(&vec![-1.0; n * m])?;
            rt.barrier_all(stream)?;
            for _ in 0..times {
                graph.launch()?;
            }
            stream.synchronize()?;
            let got = dst.to_vec()?;
            let of = |pe: usize, i: usize| {
                ((i as u64 * 31 + seed + replay * 7 + pe as u64 * 1000) % 97) as f32
            };
            // A non-root output of reduce and gather keeps the -1 written before.
            let want = |i: usize| {
                if layout.root_only(me) {
                    -1.0
                } else {
                    let of64 = |p: usize, j: usize| of(p, j) as f64;
                    layout
                        .expected(me, i, of64, |val| testing::reduce(op, n, val))
                        .value as f32
                }
            };
            for i in layout.result(me) {
                let w = want(i);
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

/// Rounds of [`lamport_rounds`] and [`lamport_copy_rounds`] with new inputs, each checked; then back-to-back replays.
const LAMPORT_ROUNDS: u64 = 60;
const LAMPORT_BACK_TO_BACK: u64 = 500;

/// The Lamport graph tests' replays: (round, the inputs' round, replays) for each of
/// [`LAMPORT_ROUNDS`] rounds with new inputs, then the last inputs again
/// [`LAMPORT_BACK_TO_BACK`] times back to back.
fn lamport_schedule() -> impl Iterator<Item = (u64, u64, u64)> {
    (0..LAMPORT_ROUNDS)
        .map(|r| (r, r, 1))
        .chain(std::iter::once((
            LAMPORT_ROUNDS,
            LAMPORT_ROUNDS - 1,
            LAMPORT_BACK_TO_BACK,
        )))
}

/// `rounds` with `nvlink_lamport` forced on `colls`, the automatic choice again after it
/// whatever it returned; nothing (`what` says so) on fewer than 2 PEs or a team without this
/// crate's NVLink kernels.
fn with_lamport_forced(
    rt: &Runtime,
    world: &Team,
    what: &str,
    colls: &[Collective],
    rounds: impl FnOnce() -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    if rt.n_pes() < 2 || !world.has_nvlink_kernels() {
        if rt.my_pe() == 0 {
            println!("{what}: needs 2+ PEs with NVLink kernels; nothing to check");
        }
        return Ok(());
    }
    for &coll in colls {
        rt.set_algorithm(coll, Some("nvlink_lamport"))?;
    }
    let done = rounds();
    for &coll in colls {
        rt.set_algorithm(coll, None)?;
    }
    done
}

/// `nvlink_lamport` forced, five calls of different sizes and types captured in one CUDA graph
/// (all_reduce f32 of 256 KiB, all_reduce in place by max of 64 KiB, reduce_scatter of an odd
/// block, f16 all_reduce of an odd count, rooted max-reduce), replayed [`LAMPORT_ROUNDS`] times
/// with new inputs, every output checked after each replay; then replayed
/// [`LAMPORT_BACK_TO_BACK`] times back to back (the in-place call is a max, which leaves its
/// result as it is) and checked again. The sizes differ from call to call so that each run
/// re-fills a buffer another size used (the rotation of `lamport.cu`), and every 101st input
/// is -0.0 on every PE: a sender that sent it as it is would leave its peers waiting on the
/// sentinel, and the documented result is +0.0 (checked by its bits).
fn lamport_rounds(rt: &Runtime, world: &Team, seed: u64, cases: &mut usize) -> anyhow::Result<()> {
    use half::f16;
    let (me, n) = (rt.my_pe(), rt.n_pes());
    let root = n - 1;
    let stream = rt.context().new_stream()?;
    let (ma, mb, mc, md, me16) = (64 << 10, 16 << 10, (16 << 10) + 3, 1000, (32 << 10) + 1);
    // Member pe's input element i of call `salt` in round r: small whole numbers (every sum
    // exact in f32 and f16), -0.0 at every 101st element.
    let of = |pe: usize, i: usize, r: u64, salt: u64| -> f32 {
        if i.is_multiple_of(101) {
            -0.0
        } else {
            ((i as u64 * 31 + seed + r * 7 + salt * 13 + pe as u64 * 1000) % 97) as f32 - 48.0
        }
    };
    let mut a_src = rt.alloc_zeroed::<f32>(ma)?;
    let mut a_dst = rt.alloc_zeroed::<f32>(ma)?;
    let mut b = rt.alloc_zeroed::<f32>(mb)?;
    let mut c_src = rt.alloc_zeroed::<f32>(n * mc)?;
    let mut c_dst = rt.alloc_zeroed::<f32>(mc)?;
    let mut d_src = rt.alloc_zeroed::<f32>(md)?;
    let mut d_dst = rt.alloc_zeroed::<f32>(md)?;
    let mut e_src = rt.alloc_zeroed::<f16>(me16)?;
    let mut e_dst = rt.alloc_zeroed::<f16>(me16)?;
    let queue = |s: &std::sync::Arc<CudaStream>,
                 a_dst: &mut SymArray<f32>,
                 b: &mut SymArray<f32>,
                 c_dst: &mut SymArray<f32>,
                 d_dst: &mut SymArray<f32>,
                 e_dst: &mut SymArray<f16>|
     -> nvshmem::Result<()> {
        world.all_reduce(&a_src, a_dst, ReduceOp::Sum, s)?;
        world.all_reduce_in_place(b, ReduceOp::Max, s)?;
        world.reduce_scatter(&c_src, c_dst, ReduceOp::Sum, s)?;
        world.all_reduce(&e_src, e_dst, ReduceOp::Sum, s)?;
        world.reduce(root, &d_src, d_dst, ReduceOp::Max, s)
    };
    // Once outside the capture: the kernels compile and load.
    queue(
        &stream, &mut a_dst, &mut b, &mut c_dst, &mut d_dst, &mut e_dst,
    )?;
    stream.synchronize()?;
    rt.barrier_all(&stream)?;
    let graph = rt.capture(&stream, |s| {
        queue(s, &mut a_dst, &mut b, &mut c_dst, &mut d_dst, &mut e_dst)
    })?;
    let sum = |i: usize, r: u64, salt: u64| (0..n).fold(0.0f32, |acc, p| acc + of(p, i, r, salt));
    let max = |i: usize, r: u64, salt: u64| {
        (0..n).fold(f32::NEG_INFINITY, |acc, p| acc.max(of(p, i, r, salt)))
    };
    // Equal, and a zero result is +0.0 (every -0.0 input is read as +0.0).
    let same = |got: f32, want: f32| got == want && (want != 0.0 || got.to_bits() == 0);
    for (round, r, times) in lamport_schedule() {
        a_src.copy_from_host(&(0..ma).map(|i| of(me, i, r, 0)).collect::<Vec<_>>())?;
        b.copy_from_host(&(0..mb).map(|i| of(me, i, r, 1)).collect::<Vec<_>>())?;
        c_src.copy_from_host(&(0..n * mc).map(|i| of(me, i, r, 2)).collect::<Vec<_>>())?;
        d_src.copy_from_host(&(0..md).map(|i| of(me, i, r, 3)).collect::<Vec<_>>())?;
        e_src.copy_from_host(
            &(0..me16)
                .map(|i| f16::from_f32(of(me, i, r, 4)))
                .collect::<Vec<_>>(),
        )?;
        a_dst.copy_from_host(&vec![-1.0; ma])?;
        c_dst.copy_from_host(&vec![-1.0; mc])?;
        d_dst.copy_from_host(&vec![-1.0; md])?;
        e_dst.copy_from_host(&vec![f16::from_f32(-1.0); me16])?;
        rt.barrier_all(&stream)?;
        for _ in 0..times {
            graph.launch()?;
        }
        stream.synchronize()?;
        let what = |call: &str, i: usize, got: f32, want: f32| {
            format!("lamport graph round {round} ({times} replays), {call}: element {i} is {got:?}, expected {want:?}")
        };
        for (i, &g) in a_dst.to_vec()?.iter().enumerate() {
            ensure!(
                same(g, sum(i, r, 0)),
                what("all_reduce f32", i, g, sum(i, r, 0))
            );
        }
        for (i, &g) in b.to_vec()?.iter().enumerate() {
            ensure!(
                same(g, max(i, r, 1)),
                what("all_reduce_in_place max", i, g, max(i, r, 1))
            );
        }
        for (i, &g) in c_dst.to_vec()?.iter().enumerate() {
            let w = sum(me * mc + i, r, 2);
            ensure!(same(g, w), what("reduce_scatter", i, g, w));
        }
        for (i, g) in e_dst.to_vec()?.iter().enumerate() {
            let (g, w) = (g.to_f32(), sum(i, r, 4));
            ensure!(same(g, w), what("all_reduce f16", i, g, w));
        }
        for (i, &g) in d_dst.to_vec()?.iter().enumerate() {
            let w = if me == root { max(i, r, 3) } else { -1.0 };
            ensure!(same(g, w), what("reduce to the last PE", i, g, w));
        }
        *cases += 1;
    }
    if me == 0 {
        println!(
            "lamport graph: {LAMPORT_ROUNDS} rounds with new inputs and {LAMPORT_BACK_TO_BACK} \
             back-to-back replays of 5 calls, every output checked: PASS"
        );
    }
    Ok(())
}

/// `nvlink_lamport` forced for the five copies (broadcast of 256 KiB, fcollect out of place and
/// in place, alltoall, gather and scatter of blocks of 25603 words, whose 102412 bytes leave
/// every block but the first unaligned), captured in one CUDA graph, replayed
/// [`LAMPORT_ROUNDS`] times with new inputs and then [`LAMPORT_BACK_TO_BACK`] times back to
/// back, every output checked bit for bit. The inputs are full of `0x80000000`, the buffers'
/// fill: every block starts with 256 such words, and a third of the word pairs after that are
/// two of them, which is how a copy's 64-bit word reads "not yet written" (`lamport.cu`,
/// COPIES); a receiver that took the data alone for its flag would wait there for ever, one
/// that took a mask packet wrongly would pass the fill off as data.
fn lamport_copy_rounds(
    rt: &Runtime,
    world: &Team,
    seed: u64,
    cases: &mut usize,
) -> anyhow::Result<()> {
    const FILL: u32 = 0x8000_0000;
    const POISON: u32 = 0xdead_beef;
    let (me, n) = (rt.my_pe(), rt.n_pes());
    let root = n - 1;
    let stream = rt.context().new_stream()?;
    let (m, mb) = (25603, 65536);
    // Member pe's word i (of a buffer of blocks of `block` words) of call `salt` in round r.
    let of = |pe: usize, i: usize, block: usize, r: u64, salt: u64| -> u32 {
        let h = i as u64 / 2 + seed + r * 7 + salt * 13 + pe as u64 * 1000;
        if i % block < 256 || h.is_multiple_of(3) {
            FILL
        } else {
            (h.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32) as u32
        }
    };
    let mut bc_src = rt.alloc_zeroed::<u32>(mb)?;
    let mut bc_dst = rt.alloc_zeroed::<u32>(mb)?;
    let mut fc_src = rt.alloc_zeroed::<u32>(m)?;
    let mut fc_dst = rt.alloc_zeroed::<u32>(n * m)?;
    let mut fi = rt.alloc_zeroed::<u32>(n * m)?;
    let mut aa_src = rt.alloc_zeroed::<u32>(n * m)?;
    let mut aa_dst = rt.alloc_zeroed::<u32>(n * m)?;
    let mut ga_src = rt.alloc_zeroed::<u32>(m)?;
    let mut ga_dst = rt.alloc_zeroed::<u32>(n * m)?;
    let mut sc_src = rt.alloc_zeroed::<u32>(n * m)?;
    let mut sc_dst = rt.alloc_zeroed::<u32>(m)?;
    type Outs<'a> = [&'a mut SymArray<u32>; 6];
    let queue = |s: &std::sync::Arc<CudaStream>, o: Outs| -> nvshmem::Result<()> {
        let [bc, fc, fi, aa, ga, sc] = o;
        world.broadcast(root, &bc_src, bc, s)?;
        world.fcollect(&fc_src, fc, s)?;
        world.fcollect_in_place(fi, s)?;
        world.alltoall(&aa_src, aa, s)?;
        world.gather(root, &ga_src, ga, s)?;
        world.scatter(root, &sc_src, sc, s)
    };
    macro_rules! outs {
        () => {
            [
                &mut bc_dst,
                &mut fc_dst,
                &mut fi,
                &mut aa_dst,
                &mut ga_dst,
                &mut sc_dst,
            ]
        };
    }
    // Once outside the capture: the kernels compile and load.
    queue(&stream, outs!())?;
    stream.synchronize()?;
    rt.barrier_all(&stream)?;
    let graph = rt.capture(&stream, |s| queue(s, outs!()))?;
    for (round, r, times) in lamport_schedule() {
        let input = |len: usize, block: usize, salt: u64| -> Vec<u32> {
            (0..len).map(|i| of(me, i, block, r, salt)).collect()
        };
        bc_src.copy_from_host(&input(mb, mb, 0))?;
        fc_src.copy_from_host(&input(m, m, 1))?;
        let mut own = vec![POISON; n * m];
        own[me * m..(me + 1) * m].copy_from_slice(&input(m, m, 2));
        fi.copy_from_host(&own)?;
        aa_src.copy_from_host(&input(n * m, m, 3))?;
        ga_src.copy_from_host(&input(m, m, 4))?;
        sc_src.copy_from_host(&input(n * m, m, 5))?;
        for out in [
            &mut bc_dst,
            &mut fc_dst,
            &mut aa_dst,
            &mut ga_dst,
            &mut sc_dst,
        ] {
            out.copy_from_host(&vec![POISON; out.len()])?;
        }
        rt.barrier_all(&stream)?;
        for _ in 0..times {
            graph.launch()?;
        }
        stream.synchronize()?;
        let check = |call: &str, got: Vec<u32>, want: &dyn Fn(usize) -> u32| match (0..got.len())
            .find(|&i| got[i] != want(i))
        {
            None => Ok(()),
            Some(i) => Err(anyhow::anyhow!(
                "lamport copies round {round} ({times} replays), {call}: word {i} is {:#x}, \
                     expected {:#x}",
                got[i],
                want(i)
            )),
        };
        check("broadcast", bc_dst.to_vec()?, &|i| of(root, i, mb, r, 0))?;
        check("fcollect", fc_dst.to_vec()?, &|i| of(i / m, i % m, m, r, 1))?;
        check("fcollect in place", fi.to_vec()?, &|i| {
            of(i / m, i % m, m, r, 2)
        })?;
        check("alltoall", aa_dst.to_vec()?, &|i| {
            of(i / m, me * m + i % m, m, r, 3)
        })?;
        check("gather", ga_dst.to_vec()?, &|i| {
            if me == root {
                of(i / m, i % m, m, r, 4)
            } else {
                POISON
            }
        })?;
        check("scatter", sc_dst.to_vec()?, &|i| {
            of(root, me * m + i, m, r, 5)
        })?;
        *cases += 1;
    }
    if me == 0 {
        println!(
            "lamport copies: {LAMPORT_ROUNDS} rounds with new inputs and {LAMPORT_BACK_TO_BACK} \
             back-to-back replays of 6 calls, every output checked: PASS"
        );
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
    use nvshmem::element::F8E4M3;
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
                 s: &std::sync::Arc<CudaStream>|
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
        let graph = rt.capture(&stream, |s| queue(case, &f_src, &mut f_dst, &mut q, s))?;
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
            Err(Error::InvalidArgument { .. })
            | Err(Error::Unsupported { .. })
            | Err(Error::AlgorithmRefused { .. }) => Ok(()),
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
    let bools = rt.alloc_zeroed::<nvshmem::element::Bool8>(8)?;
    let mut bools_out = rt.alloc_zeroed::<nvshmem::element::Bool8>(8)?;
    arg_op(
        world.all_reduce(&bools, &mut bools_out, ReduceOp::Sum, s),
        "sum on bool8",
    )?;
    let f8 = rt.alloc_zeroed::<nvshmem::element::F8E4M3>(8)?;
    let mut f8_out = rt.alloc_zeroed::<nvshmem::element::F8E4M3>(8)?;
    arg_op(
        world.all_reduce(&f8, &mut f8_out, ReduceOp::Xor, s),
        "xor on f8e4m3",
    )?;
    // Shapes (TensorRT DistCollective's rules): rows are never cut between PEs.
    if n > 1 {
        let rows = 2 * n + 1; // not a multiple of the team size
        let shaped = rt.alloc_zeroed::<f32>(rows * 4)?.with_shape(&[rows, 4])?;
        let mut out = rt.alloc_zeroed::<f32>(4)?.with_shape(&[1, 4])?;
        invalid(
            world.reduce_scatter(&shaped, &mut out, ReduceOp::Sum, s),
            "reduce_scatter splits rows",
        )?;
        invalid(
            world.scatter(0, &shaped, &mut out, s),
            "scatter splits rows",
        )?;
        let mut shaped_buf = rt.alloc_zeroed::<f32>(rows * 4)?.with_shape(&[rows, 4])?;
        invalid(
            world.fcollect_in_place(&mut shaped_buf, s),
            "fcollect in place splits rows",
        )?;
        let two_rows = rt.alloc_zeroed::<f32>(6)?.with_shape(&[2, 3])?;
        let mut wrong_rows = rt.alloc_zeroed::<f32>(3 * n * 2)?.with_shape(&[2 * n, 3])?;
        wrong_rows.reshape(&[n, 6])?;
        invalid(
            world.fcollect(&two_rows, &mut wrong_rows, s),
            "fcollect trailing dims",
        )?;
    }
    // The dynamic entry point: a combination no call has names the argument at fault, and
    // the typed checks refuse as they refuse the typed call.
    let arg_is = |r: nvshmem::Result<()>, want: &str, what: &str| -> anyhow::Result<()> {
        match r {
            Err(Error::InvalidArgument { arg, .. }) if arg == want => Ok(()),
            other => bail!("{what}: expected InvalidArgument naming {want}, got {other:?}"),
        }
    };
    let none = None::<&SymArray<f32>>;
    let kind = CallKind::new;
    arg_is(
        world.collective(kind(Collective::Alltoall).in_place(true), none, &mut b, s),
        "what",
        "dynamic alltoall in place",
    )?;
    arg_is(
        world.collective(kind(Collective::AllReduce), none, &mut b, s),
        "src",
        "dynamic all_reduce without src",
    )?;
    arg_is(
        world.collective(
            kind(Collective::Fcollect).in_place(true),
            Some(&a),
            &mut b,
            s,
        ),
        "src",
        "dynamic fcollect in place with a src",
    )?;
    arg_is(
        world.collective(kind(Collective::Broadcast).root(n), Some(&a), &mut b, s),
        "root",
        "dynamic broadcast root out of range",
    )?;
    let prepared = world
        .prepare_collective(kind(Collective::Alltoall).in_place(true), none, &mut b)
        .map(drop);
    arg_is(prepared, "what", "dynamic prepared alltoall in place")?;
    rt.barrier_all(s)?;
    world.all_reduce(&a, &mut b, ReduceOp::Sum, s)?;
    s.synchronize()?;
    Ok(())
}

/// The matrix's host-side helpers, without a GPU: the parallel fill and search agree with a
/// plain loop (the first mismatch is the first of the whole slice, across chunks), inputs
/// depend on their indices alone, and `compare` and `reduce_at` give what they should.
/// Collectives in flight at once: all-reduces on the world team on two streams, and on a
/// second team (the world's PEs listed in reverse) on a third, queued interleaved many times
/// with nothing between them, then checked. The NVLink kernels keep their flags per (team,
/// stream), so none of these may wait on or overwrite another's.
fn concurrent(rt: &Runtime, world: &Team, listed: Option<&Team>) -> anyhow::Result<()> {
    const ROUNDS: usize = 200;
    let (me, n) = (rt.my_pe(), rt.n_pes());
    let streams: Vec<_> = (0..3)
        .map(|_| rt.context().new_stream())
        .collect::<Result<_, _>>()?;
    let lens = [2usize, 1001, 4096];
    let mut srcs = Vec::new();
    let mut dsts = Vec::new();
    for (k, &len) in lens.iter().enumerate() {
        srcs.push(rt.alloc_from(&vec![(me * 3 + k + 1) as f32; len])?);
        dsts.push(rt.alloc_zeroed::<f32>(len)?);
    }
    let teams: [&Team; 3] = [world, world, listed.unwrap_or(world)];
    // First calls (which bind channels) one at a time, then everything interleaved.
    for round in 0..ROUNDS {
        if round < 2 {
            common::step(format!("concurrent: round {round}"));
        }
        for k in 0..3 {
            teams[k].all_reduce(&srcs[k], &mut dsts[k], ReduceOp::Sum, &streams[k])?;
            teams[k].barrier(&streams[k])?;
            if round == 0 {
                streams[k].synchronize()?;
            }
        }
    }
    for (k, s) in streams.iter().enumerate() {
        common::step(format!("concurrent: synchronising stream {k}"));
        s.synchronize()?;
    }
    for (k, dst) in dsts.iter().enumerate() {
        let want = (0..n).map(|p| (p * 3 + k + 1) as f32).sum::<f32>();
        let got = dst.to_vec()?;
        if let Some(i) = got.iter().position(|&x| x != want) {
            bail!("stream {k}: element {i} is {}, expected {want}", got[i]);
        }
    }
    rt.async_error()?;
    Ok(())
}

/// The threading model (`nvshmem::runtime`'s docs): three host threads of each PE queue
/// collectives at once, each on its own stream and its own team (the world, a copy of it, the
/// world listed in reverse): calls on one team from several threads would reach NVSHMEM's path
/// in a different order on each PE. Each (team, stream) pair's first call, which binds its
/// channel collectively, is made from the main thread in the same order on every PE, as the
/// docs require; after that the threads run freely, and every result is checked.
fn from_threads(rt: &Runtime, world: &Team, listed: Option<&Team>) -> anyhow::Result<()> {
    const ROUNDS: usize = 300;
    let (me, n) = (rt.my_pe(), rt.n_pes());
    let copy = world
        .split_strided(0, 1, n)?
        .context("every PE is in a copy of the world")?;
    let spare;
    let other = match listed {
        Some(t) => t,
        None => {
            spare = world.split_strided(0, 1, n)?.context("a second copy")?;
            &spare
        }
    };
    let teams: [&Team; 3] = [world, &copy, other];
    let mut work = Vec::new();
    for (k, team) in teams.into_iter().enumerate() {
        let stream = rt.context().new_stream()?;
        let src = rt.alloc_from(&vec![(me * 5 + k + 1) as f32; 777 * (k + 1)])?;
        let mut dst = rt.alloc_zeroed::<f32>(777 * (k + 1))?;
        team.all_reduce(&src, &mut dst, ReduceOp::Sum, &stream)?;
        stream.synchronize()?;
        work.push((k, team, stream, src, dst));
    }
    common::step("threads: running");
    // The threads take turns to *issue* their calls (thread 0, 1, 2, 0, ...), the same on every
    // PE, while the calls run on the GPU at once: the GPU need not run the kernels of different
    // streams at the same time, so calls that wait for each other across PEs must be issued in
    // the same order on every PE (as NCCL asks of communicators used at once).
    // (next turn, a thread gave up): a thread that fails must not leave the others waiting.
    let turn = (
        std::sync::Mutex::new((0usize, false)),
        std::sync::Condvar::new(),
    );
    let turn = &turn;
    std::thread::scope(|scope| {
        let handles: Vec<_> = work
            .iter_mut()
            .map(|(k, team, stream, src, dst)| {
                scope.spawn(move || -> anyhow::Result<()> {
                    let want = (0..n).map(|p| (p * 5 + *k + 1) as f32).sum::<f32>();
                    let (m, cv) = turn;
                    let give_up = |e: anyhow::Error| {
                        m.lock().unwrap_or_else(|p| p.into_inner()).1 = true;
                        cv.notify_all();
                        e
                    };
                    for round in 0..ROUNDS {
                        {
                            let mut t = m.lock().unwrap_or_else(|p| p.into_inner());
                            while t.0 % 3 != *k && !t.1 {
                                t = cv.wait(t).unwrap_or_else(|p| p.into_inner());
                            }
                            if t.1 {
                                bail!("thread {k}: another thread gave up");
                            }
                            let issued = team.all_reduce(src, dst, ReduceOp::Sum, stream);
                            t.0 += 1;
                            cv.notify_all();
                            drop(t);
                            issued.map_err(|e| give_up(e.into()))?;
                        }
                        if round % 50 == 49 {
                            (|| -> anyhow::Result<()> {
                                stream.synchronize()?;
                                let got = dst.to_vec()?;
                                if let Some(i) = got.iter().position(|&x| x != want) {
                                    bail!(
                                        "thread {k}, round {round}: element {i} is {}, expected {want}",
                                        got[i]
                                    );
                                }
                                Ok(())
                            })()
                            .map_err(give_up)?;
                        }
                    }
                    stream.synchronize()?;
                    Ok(())
                })
            })
            .collect();
        handles
            .into_iter()
            .try_for_each(|h| h.join().map_err(|_| anyhow::anyhow!("a thread panicked"))?)
    })?;
    rt.async_error()?;
    Ok(())
}

/// Forcing an algorithm that cannot run a call is a typed refusal on every PE (the choice
/// depends only on what every PE passes), which queues nothing; an unknown name is refused
/// when forcing.
fn forced_refusal(
    rt: &Runtime,
    world: &Team,
    s: &std::sync::Arc<CudaStream>,
) -> anyhow::Result<()> {
    let src = rt.alloc_from(&[1.0f32; 16])?;
    let mut dst = rt.alloc_zeroed::<f32>(16)?;
    ensure!(rt
        .set_algorithm(Collective::AllReduce, Some("carrier_pigeon"))
        .is_err());
    rt.set_algorithm(Collective::AllReduce, Some("nvshmem"))?;
    let got = world.all_reduce(&src, &mut dst, ReduceOp::Avg, s);
    rt.set_algorithm(Collective::AllReduce, None)?;
    match got {
        Err(Error::AlgorithmRefused {
            algorithm, reason, ..
        }) => {
            ensure!(algorithm == "nvshmem" && reason.contains("avg"), "{reason}");
        }
        other => bail!("expected AlgorithmRefused, got {other:?}"),
    }
    // And the automatic choice still runs it.
    world.all_reduce(&src, &mut dst, ReduceOp::Avg, s)?;
    s.synchronize()?;
    ensure!(dst.to_vec()?.iter().all(|&x| x == 1.0), "avg of ones");
    Ok(())
}

/// The soundness check of stream-ordered frees: a 256 MiB all-reduce is queued on a second
/// stream, its input dropped at once, and a new array of the same size (which may take the
/// dropped one's memory) allocated and overwritten straight away. Freed on drop, the input
/// would be overwritten while the collective still reads it; retired and freed only after the
/// GPU is done with it, the result is right.
fn drop_after_queue(rt: &Runtime, world: &Team) -> anyhow::Result<()> {
    const LEN: usize = 64 << 20; // 256 MiB of f32
    let (me, n) = (rt.my_pe(), rt.n_pes());
    let side = rt.context().new_stream()?;
    let src = rt.alloc_from(&vec![(me + 1) as f32; LEN])?;
    let mut dst = rt.alloc_zeroed::<f32>(LEN)?;
    let src_at = src.device_ptr_raw();
    world.all_reduce(&src, &mut dst, ReduceOp::Sum, &side)?;
    drop(src);
    let mut junk = rt.alloc_zeroed::<f32>(LEN)?;
    junk.copy_from_host_on(&vec![-1e6f32; LEN], rt.stream())?;
    side.synchronize()?;
    rt.stream().synchronize()?;
    let want = (n * (n + 1) / 2) as f32;
    let got = dst.to_vec()?;
    if let Some(i) = got.iter().position(|&x| x != want) {
        bail!("element {i} is {}, expected {want}", got[i]);
    }
    if me == 0 {
        println!(
            "drop after queue: the new array {} the dropped one's memory; the result is right",
            if junk.device_ptr_raw() == src_at {
                "took"
            } else {
                "did not take"
            }
        );
    }
    Ok(())
}

/// The cost of a free that waits for the GPU: allocate and drop 1 MiB 200 times (each
/// allocation frees the array dropped before it, after a cuCtxSynchronize), against NVSHMEM's
/// own nvshmem_malloc and nvshmem_free called raw.
fn free_cost(rt: &Runtime) -> anyhow::Result<()> {
    const ROUNDS: u32 = 200;
    const BYTES: usize = 1 << 20;
    rt.free_retired()?;
    let t = std::time::Instant::now();
    for _ in 0..ROUNDS {
        // SAFETY: never read.
        let a = unsafe { rt.alloc_uninit::<u8>(BYTES)? };
        drop(a);
    }
    rt.free_retired()?;
    let ours = t.elapsed() / ROUNDS;
    let lib = nvshmem::sys::lib()?;
    let t = std::time::Instant::now();
    for _ in 0..ROUNDS {
        // SAFETY: NVSHMEM is initialised (the runtime is alive), its context is current on
        // this thread (the runtime's calls above bound it), every PE makes the same calls, and
        // the block is freed once, unused.
        unsafe {
            let p = lib.nvshmem_malloc(BYTES);
            ensure!(!p.is_null(), "nvshmem_malloc");
            lib.nvshmem_free(p);
        }
    }
    let raw = t.elapsed() / ROUNDS;
    if rt.my_pe() == 0 {
        println!("free cost: alloc + drop of 1 MiB {ours:?} a round (stream-ordered), raw nvshmem_malloc + nvshmem_free {raw:?}");
    }
    Ok(())
}

#[test]
fn matrix_host_helpers() {
    let len = 5 * MIN_CHUNK + 7;
    let mut v = vec![0usize; len];
    par_fill(&mut v, 4, |i| i * 3);
    assert!(v.iter().enumerate().all(|(i, &x)| x == i * 3));
    for bad in [0, MIN_CHUNK - 1, MIN_CHUNK, 3 * MIN_CHUNK + 5, len - 1] {
        let found = par_find(len, 4, |i| i >= bad && i % 2 == bad % 2);
        assert_eq!(found, Some(bad));
    }
    assert_eq!(par_find(len, 4, |_| false), None);

    let inputs = Inputs::<half::bf16>::new(1, 2, len, Some(ReduceOp::Sum));
    let whole = inputs.whole(3, len, 4);
    assert!(whole.iter().enumerate().all(|(i, &x)| x == inputs.at(3, i)));
    assert_eq!(inputs.whole(3, len, 1), whole);
    assert_ne!(inputs.whole(2, 100, 1), whole[..100]);
    let other_case = Inputs::<half::bf16>::new(1, 3, len, Some(ReduceOp::Sum));
    assert_ne!(other_case.whole(3, 100, 1), whole[..100]);

    let got: Vec<i32> = (0..len as i32).collect();
    compare::<i32>("result", &got, |i| (i as f64).into(), 1, 4).unwrap();
    let first = 2 * MIN_CHUNK + 1;
    let e = compare::<i32>(
        "result",
        &got,
        |i| Reference::from(if i >= first { -1.0 } else { i as f64 }),
        1,
        4,
    )
    .unwrap_err();
    assert!(
        e.to_string().contains(&format!("element {first} is")),
        "{e}"
    );

    // A wrong element is traced to the inputs that feed it and what the output held.
    let lay = Layout {
        coll: Collective::AllReduce,
        n: 2,
        m: 3,
        in_place: false,
        root: 1,
    };
    let ins = Inputs::<f32>::new(1, 0, 3, Some(ReduceOp::Sum));
    let why = explain(&lay, &ins, 0, 2, Some(&-1.5f32));
    let want = format!(
        "its inputs: member 0 [2] = {}, member 1 [2] = {}; the output held -1.5 there before the call",
        ins.f(0, 2),
        ins.f(1, 2)
    );
    assert_eq!(why, want);
    let wrong: Vec<f32> = (0..3).map(|i| ins.f(0, i) as f32).collect();
    let reference = |i: usize| Reference::from(ins.f(0, i) + ins.f(1, i));
    assert_eq!(first_wrong(&wrong, reference, 2, 1), Some(0));
    let rs = Layout {
        coll: Collective::ReduceScatter,
        ..lay
    };
    assert!(explain(&rs, &ins, 1, 0, None).starts_with("its inputs: member 0 [3] = "));

    // A bool8 byte other than 0 and 1 is wrong even where it reads as true.
    let bools = [nvshmem::element::Bool8::from_f64(1.0); 3];
    let mut bad = bools;
    bytemuck::cast_slice_mut::<_, u8>(&mut bad)[1] = 2;
    compare("b", &bools, |_| 1.0.into(), 2, 1).unwrap();
    assert!(compare("b", &bad, |_| 1.0.into(), 2, 1).is_err());
}

/// Every data collective prepared ([`common::prepare`]), out of place and in place, on `team`:
/// started once (out of place twice, which must change nothing), it leaves its buffers as the
/// call ([`common::call`]) leaves a copy of them made from the same inputs, byte for byte,
/// outputs the call does not write included (poisoned alike). i32 sums are exact, so any
/// algorithm gives the same bytes.
fn every_prepared_form(rt: &Runtime, team: &Team, name: &str) -> anyhow::Result<()> {
    let (tme, tn) = (team.my_pe(), team.n_pes());
    let s = rt.stream();
    let (m, root) = (1000, tn - 1);
    for coll in common::data_collectives() {
        for in_place in [false, true] {
            if in_place && !coll.geometry().has_in_place() {
                continue;
            }
            let lay = Layout {
                coll,
                n: tn,
                m,
                in_place,
                root,
            };
            let input: Vec<i32> = (0..lay.lens().0)
                .map(|i| (tme * 100_000 + i) as i32)
                .collect();
            let fresh = || -> anyhow::Result<(SymArray<i32>, SymArray<i32>)> {
                let mut init = vec![common::poison::<i32>(); lay.out_len()];
                if in_place {
                    let at = lay.input_at(tme);
                    init[at..at + input.len()].copy_from_slice(&input);
                }
                Ok((rt.alloc_from(&input)?, rt.alloc_from(&init)?))
            };
            let what = format!(
                "{name}: prepared {coll}{}",
                if in_place { " in place" } else { "" }
            );
            let (src, mut called) = fresh()?;
            common::call(
                team,
                coll,
                in_place,
                root,
                ReduceOp::Sum,
                &src,
                &mut called,
                s,
            )?;
            let (src2, mut prepared) = fresh()?;
            {
                let p = common::prepare(
                    team,
                    coll,
                    in_place,
                    root,
                    ReduceOp::Sum,
                    &src2,
                    &mut prepared,
                )?;
                p.start(s)?;
                if !in_place {
                    p.start(s)?;
                }
            }
            s.synchronize()?;
            let (want, got) = (called.to_vec()?, prepared.to_vec()?);
            if let Some(i) = (0..want.len()).find(|&i| want[i] != got[i]) {
                anyhow::bail!(
                    "{what}: element {i} is {}, the call gave {} (of {})",
                    got[i],
                    want[i],
                    want.len()
                );
            }
            // The call did write its result (the comparison alone would pass two no-ops).
            if !lay.root_only(tme) {
                let r = lay.result(tme);
                ensure!(
                    got[r].iter().any(|&x| x != common::poison::<i32>()),
                    "{what}: the result is still the poison"
                );
            }
        }
    }
    Ok(())
}

/// Prepared calls (`Team::prepare_*`) started many times, on two streams and on a listed team,
/// give what the calls give; every collective's prepared form, in place too, gives what its
/// call gives on the same inputs; their arrays, dropped right after the prepared call while
/// its last start may still run, are not reused early.
fn prepared(rt: &Runtime, world: &Team, listed: Option<&Team>) -> anyhow::Result<()> {
    let other = rt.context().new_stream()?;
    for (name, team) in [("world", Some(world)), ("listed", listed)] {
        let Some(team) = team else { continue };
        every_prepared_form(rt, team, name)?;
        let (tme, tn) = (team.my_pe(), team.n_pes());
        for count in [3usize, 4099, 1 << 18] {
            let src = rt.alloc_from(&vec![(tme + 1) as f32; count])?;
            let mut dst = rt.alloc_zeroed::<f32>(count)?;
            let blocks = rt.alloc_from(&vec![tme as i32; count])?;
            let mut all = rt.alloc_zeroed::<i32>(count * tn)?;
            let mut bc = rt.alloc_zeroed::<f32>(count)?;
            {
                let ar = team.prepare_all_reduce(&src, &mut dst, ReduceOp::Sum)?;
                let fc = team.prepare_fcollect(&blocks, &mut all)?;
                let br = team.prepare_broadcast(tn - 1, &src, &mut bc)?;
                let bar = team.prepare_barrier()?;
                let sync = team.prepare_sync()?;
                for i in 0..20 {
                    let s = if i % 2 == 0 { rt.stream() } else { &other };
                    ar.start(s)?;
                    fc.start(s)?;
                    br.start(s)?;
                    bar.start(s)?;
                    // A sync orders the streams' work as a barrier does (nothing here puts).
                    sync.start(s)?;
                }
            }
            other.synchronize()?;
            rt.stream().synchronize()?;
            let want = (tn * (tn + 1) / 2) as f32;
            ensure!(
                dst.to_vec()?.iter().all(|&x| x == want),
                "{name}: prepared all_reduce of {count} gave {}, expected {want}",
                dst.to_vec()?[0]
            );
            let got = all.to_vec()?;
            for j in 0..tn {
                ensure!(
                    got[j * count..(j + 1) * count]
                        .iter()
                        .all(|&x| x == j as i32),
                    "{name}: prepared fcollect of {count}: block {j} wrong"
                );
            }
            ensure!(
                bc.to_vec()?.iter().all(|&x| x == tn as f32),
                "{name}: prepared broadcast of {count} wrong"
            );
        }
    }
    // Dropped right after the last start, with the start still queued behind a long kernel of
    // the same stream: the next allocation must not get the arrays' memory while it runs.
    let big = 1 << 22;
    let src = rt.alloc_from(&vec![1.0f32; big])?;
    let mut dst = rt.alloc_zeroed::<f32>(big)?;
    let ar = world.prepare_all_reduce(&src, &mut dst, ReduceOp::Sum)?;
    for _ in 0..8 {
        ar.start(rt.stream())?;
    }
    drop(ar);
    drop((src, dst));
    let fresh = rt.alloc_from(&vec![-1.0f32; big])?;
    rt.stream().synchronize()?;
    ensure!(
        fresh.to_vec()?.iter().all(|&x| x == -1.0),
        "an array freed after its prepared call was reused while the call ran"
    );
    Ok(())
}
