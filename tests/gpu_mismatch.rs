//! GPU checks that mismatched collective calls are caught (issue 30, item 3): PEs of a team
//! that call with another length, root, operator, element type, in-place form or collective,
//! on the NVLink kernels of every family (LL for small messages, Lamport for the mid band,
//! direct for large ones), must
//! each get [`Error::CallMismatch`] within a short bound, never a result reported as good or a
//! hang; and a PE that makes one more call on a team the others dropped must get an error, not
//! corrupt the new team's calls; and PEs that start with settings out of step (or channels
//! that do not fit the heap) must each get the error from `init`, not wait for ever. Run by `scripts/gpu-check.sh run mismatch` (one process per
//! case, `GPU_MISMATCH_CASE=<name>`, with `NVSHMEM_RS_TIMEOUT=20s`); skipped (ignored, with
//! the reason) in a plain `cargo test`. `GPU_MISMATCH_CASE=list` prints the case names.
//!
//! A mismatch fails the runtime (the error says so): each case therefore starts its own
//! runtime, checks that the error came on every PE and that a later call returns it too, and
//! ends without finalising (a failed runtime is not finalised).
mod common;

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use anyhow::{bail, ensure, Context as _};
use cudarc::driver::CudaStream;
use nvshmem::{collective::Collective, Error, ReduceOp, Runtime, RuntimeBuilder, Team};

/// Elements of a large (direct-family) call: 4 MiB of f32.
const LARGE: usize = 1 << 20;
/// Elements of a small (LL-family) call.
const SMALL: usize = 1000;
/// Elements of a mid-band call (Lamport family): 256 KiB of f32.
const MID: usize = 64 << 10;
/// How long after its call a PE may take to report the mismatch.
const BOUND: Duration = Duration::from_secs(5);

/// What one PE calls.
#[derive(Clone, Copy, Debug)]
struct Side {
    coll: Collective,
    int: bool, // i32 elements rather than f32
    op: ReduceOp,
    count: usize,
    root: usize,
    in_place: bool,
}

const fn side(coll: Collective, count: usize) -> Side {
    Side {
        coll,
        int: false,
        op: ReduceOp::Sum,
        count,
        root: 0,
        in_place: false,
    }
}

/// A case: its name, the algorithm forced on every collective it calls, PE 0's call and every
/// other PE's.
struct Case {
    name: &'static str,
    algorithm: &'static str,
    pe0: Side,
    rest: Side,
}

fn cases() -> Vec<Case> {
    use Collective as C;
    let ar = |n| side(C::AllReduce, n);
    let with = |s: Side, f: &dyn Fn(&mut Side)| {
        let mut s = s;
        f(&mut s);
        s
    };
    let case = |name, algorithm, pe0, rest| Case {
        name,
        algorithm,
        pe0,
        rest,
    };
    vec![
        case("length_ll", "nvlink_ll", ar(SMALL), ar(SMALL + 1)),
        case("length_direct", "nvlink_direct", ar(LARGE), ar(LARGE + 1)),
        case(
            "root_ll",
            "nvlink_ll",
            side(C::Reduce, 64),
            with(side(C::Reduce, 64), &|s| s.root = 1),
        ),
        case(
            "root_direct",
            "nvlink_direct",
            side(C::Broadcast, LARGE),
            with(side(C::Broadcast, LARGE), &|s| s.root = 1),
        ),
        case(
            "operator_ll",
            "nvlink_ll",
            ar(64),
            with(ar(64), &|s| s.op = ReduceOp::Max),
        ),
        case(
            "operator_direct",
            "nvlink_direct",
            ar(LARGE),
            with(ar(LARGE), &|s| s.op = ReduceOp::Max),
        ),
        case(
            "premul_scale_ll",
            "nvlink_ll",
            with(ar(64), &|s| s.op = ReduceOp::PreMulSum(0.5)),
            with(ar(64), &|s| s.op = ReduceOp::PreMulSum(0.25)),
        ),
        case(
            "element_type_ll",
            "nvlink_ll",
            ar(64),
            with(ar(64), &|s| s.int = true),
        ),
        case(
            "element_type_direct",
            "nvlink_direct",
            ar(LARGE),
            with(ar(LARGE), &|s| s.int = true),
        ),
        case(
            "in_place_ll",
            "nvlink_ll",
            ar(64),
            with(ar(64), &|s| s.in_place = true),
        ),
        case("collective_ll", "nvlink_ll", ar(64), side(C::Broadcast, 64)),
        case(
            "collective_direct",
            "nvlink_direct",
            side(C::Fcollect, LARGE / 4),
            side(C::Alltoall, LARGE / 4),
        ),
        // Lamport: the data is its own flag, so a PE whose peer sent more than it waits
        // for has all it needs and must still find the mismatch (at its end, by the
        // fingerprints), and one that waits for more than was sent must not hang.
        case("length_lamport", "nvlink_lamport", ar(MID), ar(MID + 1)),
        case(
            "operator_lamport",
            "nvlink_lamport",
            ar(MID),
            with(ar(MID), &|s| s.op = ReduceOp::Max),
        ),
        case(
            "root_lamport",
            "nvlink_lamport",
            side(C::Reduce, MID),
            with(side(C::Reduce, MID), &|s| s.root = 1),
        ),
        case(
            "in_place_lamport",
            "nvlink_lamport",
            ar(MID),
            with(ar(MID), &|s| s.in_place = true),
        ),
        case(
            "collective_lamport",
            "nvlink_lamport",
            ar(MID),
            side(C::ReduceScatter, MID),
        ),
        // The Lamport copies (any type, a mask packet a line): a broadcast longer on one
        // side, and two copies of one length.
        case(
            "length_lamport_copy",
            "nvlink_lamport",
            side(C::Broadcast, MID),
            side(C::Broadcast, MID + 4),
        ),
        case(
            "collective_lamport_copy",
            "nvlink_lamport",
            side(C::Fcollect, MID / 2),
            side(C::Gather, MID / 2),
        ),
        // The 8-byte all-reduce against a barrier: the barrier's one block meets the
        // all-reduce's.
        case(
            "barrier_vs_all_reduce",
            "nvlink_ll",
            side(C::Barrier, 0),
            ar(2),
        ),
        // NVSHMEM's path, checked at level 2 (RuntimeBuilder::check_nvshmem_calls). NVSHMEM's
        // all-reduce, queued behind the check, can never end: after this case passes, the
        // watchdog must end the process GRACE after the mismatch, naming that call
        // (scripts/gpu-check.sh expects the exit, run with NVSHMEM_RS_TIMEOUT=5s).
        case("length_nvshmem", "nvshmem", ar(SMALL), ar(SMALL + 1)),
    ]
}

#[test]
#[ignore = "needs NVIDIA GPUs and NVSHMEM: run scripts/gpu-check.sh on a GPU machine"]
fn gpu_mismatch() {
    let name = std::env::var("GPU_MISMATCH_CASE").unwrap_or_else(|_| "list".into());
    if name == "list" {
        // Prefixed, so that scripts/gpu-check.sh tells the names from libtest's own lines.
        for c in cases() {
            println!("mismatch-case: {}", c.name);
        }
        println!("mismatch-case: stale_team");
        println!("mismatch-case: start_out_of_step");
        println!("mismatch-case: start_out_of_heap");
        return;
    }
    let result = if name == "stale_team" {
        stale_team()
    } else if name == "start_out_of_step" {
        start_refused(
            "out of step",
            |b, rank| b.lamport_bytes(if rank == 0 { 1 << 20 } else { 2 << 20 }),
            |e| matches!(e, Error::OutOfStep { .. }),
        )
    } else if name == "start_out_of_heap" {
        start_refused(
            "out of heap",
            |b, _| b.heap_size(64 << 20).channels(64).lamport_bytes(1 << 20),
            |e| matches!(e, Error::OutOfHeap { .. }),
        )
    } else {
        let case = cases()
            .into_iter()
            .find(|c| c.name == name)
            .unwrap_or_else(|| panic!("GPU_MISMATCH_CASE={name}: no such case (try list)"));
        mismatch(&case)
    };
    match result {
        Ok(pe) => println!("mismatch {name}: PASS on PE {pe}"),
        Err(e) => {
            println!("mismatch {name}: FAIL: {e:#}");
            panic!("mismatch case {name} failed");
        }
    }
}

fn start(algorithm: Option<&str>, colls: &[Collective]) -> Runtime {
    let mut b: RuntimeBuilder = Runtime::builder()
        .heap_size(1 << 30)
        .check_nvshmem_calls(algorithm == Some("nvshmem"));
    if let Some(a) = algorithm {
        for &c in colls {
            if c.geometry() != nvshmem::collective::Geometry::None {
                b = b.algorithm(c, a);
            }
        }
    }
    let session = common::start(b);
    common::start_watchdog(session.rt.my_pe(), Duration::from_secs(30));
    // Scratch reserved up front, so that no call allocates it (collectively) on its own.
    session
        .rt
        .reserve_scratch(64 << 20)
        .expect("scratch for the reductions");
    session.rt
}

/// The same arrays on every PE (symmetric allocations must match), long enough for either
/// side's call; each call takes views of its own lengths, as the program of issue 30 did.
struct Buffers {
    src_f: nvshmem::SymArray<f32>,
    dst_f: nvshmem::SymArray<f32>,
    src_i: nvshmem::SymArray<i32>,
    dst_i: nvshmem::SymArray<i32>,
}

impl Buffers {
    fn new(rt: &Runtime, sides: &[Side], n: usize) -> anyhow::Result<Self> {
        let len = sides
            .iter()
            .map(|s| {
                let (i, o) = s
                    .coll
                    .geometry()
                    .lengths(s.count, n)
                    .expect("a test's sizes fit a usize");
                i.max(o)
            })
            .max()
            .unwrap_or(0)
            + 1;
        Ok(Buffers {
            src_f: rt.alloc_from(&vec![1.0f32; len])?,
            dst_f: rt.alloc_zeroed(len)?,
            src_i: rt.alloc_from(&vec![1i32; len])?,
            dst_i: rt.alloc_zeroed(len)?,
        })
    }

    /// Queues `s` over `team` on views of the arrays (the caller waits as it needs: a
    /// mismatched call is not waited for, since NVSHMEM's collectives cannot be ended).
    fn call(&mut self, team: &Team, s: Side, stream: &Arc<CudaStream>) -> anyhow::Result<()> {
        let (inp, out) = s
            .coll
            .geometry()
            .lengths(s.count, team.n_pes())
            .expect("a test's sizes fit a usize");
        if s.int {
            let sv = self.src_i.view(..inp.max(1))?;
            let mut dv = self.dst_i.view_mut(..out.max(1))?;
            common::call(team, s.coll, s.in_place, s.root, s.op, &sv, &mut dv, stream)?;
        } else {
            let sv = self.src_f.view(..inp.max(1))?;
            let mut dv = self.dst_f.view_mut(..out.max(1))?;
            common::call(team, s.coll, s.in_place, s.root, s.op, &sv, &mut dv, stream)?;
        }
        Ok(())
    }
}

/// The runtime's failure, waited for up to `BOUND` after `t0` (the watchdog hands a kernel's
/// record to the runtime within its poll).
fn failure(rt: &Runtime, t0: Instant) -> Option<Error> {
    loop {
        if let Err(e) = rt.async_error() {
            return Some(e);
        }
        if t0.elapsed() >= BOUND {
            return None;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn mismatch(case: &Case) -> anyhow::Result<usize> {
    let rt = start(Some(case.algorithm), &[case.pe0.coll, case.rest.coll]);
    let me = rt.my_pe();
    let world = rt.world();
    let stream = rt.stream().clone();
    let mut buf = Buffers::new(&rt, &[case.pe0, case.rest], rt.n_pes())?;
    // One matching call first, so the channel has run and its epochs are not the first.
    buf.call(&world, case.rest, &stream)
        .context("the matching call before the case")?;
    stream.synchronize()?;
    rt.async_error()
        .context("the matching call before the case")?;
    world.barrier(&stream)?;
    stream.synchronize()?;
    let mine = if me == 0 { case.pe0 } else { case.rest };
    let t0 = Instant::now();
    let queued = buf.call(&world, mine, &stream);
    let Some(e) = failure(&rt, t0) else {
        bail!(
            "no error within {BOUND:?} of the mismatched call (the call itself: {queued:?}): \
             PE {me} called {mine:?}"
        )
    };
    let secs = t0.elapsed().as_secs_f64();
    println!("PE {me}: {} after {secs:.3} s: {e}", case.name);
    ensure!(
        matches!(e, Error::CallMismatch { .. }),
        "the error is not CallMismatch: {e:?}"
    );
    let text = e.to_string();
    for s in [case.pe0, case.rest] {
        ensure!(
            text.contains(s.coll.name()),
            "the message does not name {}: {text}",
            s.coll
        );
    }
    // The runtime has failed, as the error says: a later call returns the same error.
    match world.barrier(&stream) {
        Err(Error::CallMismatch { .. }) => {}
        other => bail!("a later call returned {other:?}, not the mismatch"),
    }
    Ok(me)
}

/// A start that NVSHMEM passes but the crate's own set-up refuses (settings out of step, or
/// channels that do not fit the heap): every PE must get the error from `init` within a bound,
/// not wait for ever (the runtime made so far is finalised on the way out, under the start's
/// lock until that was fixed, which the PE then waited on itself). `rank`: the launcher's.
fn start_refused(
    what: &str,
    settings: impl Fn(RuntimeBuilder, usize) -> RuntimeBuilder,
    expected: impl Fn(&Error) -> bool,
) -> anyhow::Result<usize> {
    let rank = ["OMPI_COMM_WORLD_RANK", "PMI_RANK", "RANK", "SLURM_PROCID"]
        .iter()
        .find_map(|v| std::env::var(v).ok()?.parse::<usize>().ok())
        .context("no launcher's rank variable")?;
    // A hang is this case's failure: the watchdog (no runtime to poll) ends the process.
    let t0 = Instant::now();
    std::thread::spawn(move || {
        std::thread::sleep(Duration::from_secs(60));
        eprintln!("PE {rank}: the refused start has not returned after 60 s");
        std::process::exit(3);
    });
    let got = settings(Runtime::builder().heap_size(1 << 30), rank).init();
    let secs = t0.elapsed().as_secs_f64();
    match got {
        Err(e) if expected(&e) => {
            println!("PE {rank}: start {what} after {secs:.3} s: {e}");
            Ok(rank)
        }
        other => bail!("PE {rank}: expected the start to be refused ({what}), got {other:?}"),
    }
}

/// PE 1 makes one more call on a team (PEs 0 and 1) that PE 0 has dropped, while a new team
/// is made (PEs 0 and 2, or 1 and 0 with two PEs): PE 1 must get an error, and every call of
/// the new team must give the right result or an error, never a wrong result reported as good.
///
/// What is guaranteed (`kernels/PROTOCOL.md`, "Fingerprints", stale teams): a channel is
/// taken only where it is free on every member, and PE 1 still holds the stale team's, so a new
/// team with PE 1 (two PEs) never shares it: the stale call waits for a PE 0 that never comes
/// and ends at the timeout (`CollectiveFailed`) or when PE 0 exits (`PeerFailed`), or with
/// `CallMismatch`; never `Ok`. With three PEs or more the new team (0 and 2) may take the
/// channel PE 0 freed, and PE 1's stale stores land in PE 2's slots on PE 0: PE 0 fails with
/// `CallMismatch` if it reads the stale fingerprint, and otherwise should compute right. That
/// last part is not guaranteed (the protocol's known gap: the stale packets can land before
/// PE 2's, and PE 2's fingerprint after them); a wrong result with no error here is that gap
/// seen, and fails the case.
fn stale_team() -> anyhow::Result<usize> {
    let rt = start(Some("nvlink_ll"), &[Collective::AllReduce]);
    let (me, n) = (rt.my_pe(), rt.n_pes());
    let world = rt.world();
    let stream = rt.stream().clone();
    let old = world.split_strided(0, 1, 2)?;
    let src = rt.alloc_from(&[1.0f32, 2.0])?;
    let mut dst = rt.alloc_zeroed::<f32>(2)?;
    if let Some(t) = &old {
        t.all_reduce(&src, &mut dst, ReduceOp::Sum, &stream)?;
    }
    stream.synchronize()?;
    world.barrier(&stream)?;
    stream.synchronize()?;
    let old = if me == 0 {
        drop(old);
        None
    } else {
        old
    };
    world.barrier(&stream)?;
    stream.synchronize()?;
    let new = if n >= 3 {
        world.split_strided(0, 2, 2)?
    } else {
        world.from_pes(&[1, 0])?
    };
    let side_stream = rt.context().new_stream()?;
    let mut x = rt.alloc_zeroed::<f32>(2)?;
    let mut y = rt.alloc_zeroed::<f32>(2)?;
    let t0 = Instant::now();
    let stale = match (&old, me) {
        (Some(t), 1) => Some(t.all_reduce(&src, &mut dst, ReduceOp::Sum, &side_stream)),
        _ => None,
    };
    let mut outcome = String::from("no error");
    if let Some(t) = &new {
        let k = t.n_pes() as f32;
        for i in 0..20u32 {
            // Any step may be where the runtime reports the stale call (a copy to the host
            // checks for a recorded failure): a typed error is an outcome, not a failed case.
            let r = x
                .copy_from_host(&[i as f32, 1.0])
                .and_then(|()| y.copy_from_host(&[-1.0, -1.0]))
                .and_then(|()| t.all_reduce(&x, &mut y, ReduceOp::Sum, &stream))
                .and_then(|()| Ok(stream.synchronize()?))
                .and_then(|()| y.to_vec());
            let got = match r {
                Ok(got) => got,
                Err(e) => {
                    outcome = format!("iteration {i}: {e}");
                    break;
                }
            };
            if got != [k * i as f32, k] {
                // Wrong is acceptable only as the failed call it is.
                match failure(&rt, Instant::now()) {
                    Some(e) => {
                        outcome = format!("iteration {i}: wrong values, and the error {e}");
                        break;
                    }
                    None => bail!(
                        "the new team's all-reduce {i} gave {got:?}, not {:?}, with no error \
                         (the stale packets were taken: PROTOCOL.md, Fingerprints, stale teams)",
                        [k * i as f32, k]
                    ),
                }
            }
        }
    }
    if let Some(queued) = stale {
        // The stale call's kernel waits for a PE that will never come: it ends by a mismatch,
        // or at the timeout.
        let limit = rt.timeout().unwrap_or(Duration::from_secs(60)) + Duration::from_secs(10);
        let done = queued.map_err(anyhow::Error::from).and_then(|()| {
            side_stream.synchronize()?;
            Ok(())
        });
        let e = match (done, failure(&rt, Instant::now())) {
            (_, Some(e)) => e,
            (Err(e), None) => bail!("the stale call failed without a runtime error: {e:#}"),
            (Ok(()), None) => bail!("the stale call on a dropped team completed without an error"),
        };
        ensure!(
            t0.elapsed() < limit,
            "the stale call's error took {:?}",
            t0.elapsed()
        );
        ensure!(
            matches!(
                e,
                Error::CallMismatch { .. }
                    | Error::CollectiveFailed { .. }
                    | Error::PeerFailed { .. }
            ),
            "the stale call's error is {e:?}"
        );
        outcome = format!("stale call: {e}");
    }
    println!(
        "PE {me}: stale_team after {:.1} s: {outcome}",
        t0.elapsed().as_secs_f64()
    );
    // No finalising (collective) after a case that may have failed some PEs' runtimes.
    rt.abort();
    Ok(me)
}
