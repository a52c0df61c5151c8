//! GPU checks that every wait this crate queues ends within the runtime's timeout (issue 30,
//! "a bound on every wait"), each case run as its own job, since each leaves the runtime
//! failed. `GPU_WAITS_CASE` picks it (`scripts/gpu-check.sh run waits` runs them all with
//! `NVSHMEM_RS_TIMEOUT=5s`):
//!
//! - `signal` (the default; any number of PEs): a signal that is sent is waited for and the
//!   data put with it is seen; then every PE waits for a signal word no PE ever sends, and the
//!   copy to the host after it must return `Error::SignalWaitFailed` naming the word, the
//!   comparison, the value and the last value seen, no sooner than the timeout and at most 3 s
//!   after it; every later call returns the same failure.
//! - `kernel_peer` (2 PEs or more): the last PE never joins an all-reduce that this crate's
//!   kernels run; every other PE's copy after it must return `Error::CollectiveFailed`
//!   ("timed out") naming the last PE (team and world), the team, and what it waited for,
//!   within the timeout + 3 s.
//! - `kernel_peer_reduce` (2 PEs or more, run with `NVSHMEM_RS_ALGORITHMS=reduce=nvlink_direct`):
//!   the same with a rooted reduce to PE 0 in the direct kernels, whose waits differ by role
//!   (from 3 PEs the root touches no peer and waits only for the non-roots' departures).
//! - `nvshmem_path` (2 PEs or more, run with `NVSHMEM_RS_ALGORITHMS=all_reduce=nvshmem`): the
//!   last PE never joins an all-reduce that NVSHMEM's own kernels run, which nothing can end:
//!   the other PEs' processes must be ended by the watchdog with status 1 and the failure
//!   printed ("inside NVSHMEM"), within the timeout + GRACE (5 s) + 3 s; a PE still alive
//!   then prints "FAILED: still alive" and exits 2.
//!
//! The PE that stays away sleeps through the others' failure, then reads its runtime's state
//! (so its own watchdog, which sees the others exit, does not end it) and exits 0.
mod common;

use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context as _};
use common::Checks;
use nvshmem::{
    prelude::{Cmp, SignalArray, SignalOp},
    runtime::GRACE,
    Error, ReduceOp, Runtime,
};

/// Slack allowed past the bound: the kernels check the clock every 256 polls, the watchdog
/// looks every 50 ms, and a copy waits for the stream.
const SLACK: Duration = Duration::from_secs(3);

#[test]
#[ignore = "needs NVIDIA GPUs and NVSHMEM: run scripts/gpu-check.sh on a GPU machine"]
fn gpu_waits() {
    let session = common::start(Runtime::builder().heap_size(1 << 28));
    let rt = session.rt.clone();
    let (me, n) = (rt.my_pe(), rt.n_pes());
    let case = std::env::var("GPU_WAITS_CASE").unwrap_or_else(|_| "signal".into());
    let timeout = rt
        .timeout()
        .expect("run with a timeout (NVSHMEM_RS_TIMEOUT=5s)");
    if me == 0 {
        println!("waits: case {case}, {n} PEs, timeout {timeout:?}");
    }
    let mut c = Checks::new(me);
    match case.as_str() {
        "signal" => {
            c.run("a_signal_sent_is_waited_for_and_its_data_seen", || {
                signal_sent(&rt)
            });
            c.run("a_signal_never_sent_ends_within_the_bound", || {
                signal_never_sent(&rt, timeout)
            });
            linger();
        }
        "kernel_peer" | "kernel_peer_reduce" if n >= 2 => {
            let rooted = case == "kernel_peer_reduce";
            c.run("a_peer_that_never_arrives_in_our_kernels_is_named", || {
                kernel_peer(&rt, timeout, rooted)
            });
            if me != n - 1 {
                linger();
            }
        }
        "nvshmem_path" if n >= 2 => nvshmem_path(&rt, timeout),
        other => panic!("GPU_WAITS_CASE={other} at {n} PEs: expected signal, or kernel_peer, kernel_peer_reduce or nvshmem_path at 2 PEs or more"),
    }
    c.finish("gpu_waits");
    // The runtime has failed on purpose: it is not finalised (that is collective), and
    // dropping it leaves NVSHMEM as it is.
    drop(rt);
    drop(session);
}

/// Stays alive [`SLACK`] after this PE's own failure, so that no PE's exit is the failure a
/// slower PE sees first (its peer gone) instead of its own wait's.
fn linger() {
    std::thread::sleep(SLACK);
}

/// Each PE puts its number with a signal into its right neighbour (itself, alone) and waits
/// for its left neighbour's: the data must be there after the wait.
fn signal_sent(rt: &Runtime) -> anyhow::Result<()> {
    let (me, n) = (rt.my_pe(), rt.n_pes());
    let stream = rt.stream().clone();
    let src = rt.alloc_from(&[me as u32 + 1; 1024])?;
    let mut dst = rt.alloc_zeroed::<u32>(1024)?;
    let flags = rt.alloc_zeroed::<u64>(2)?;
    rt.barrier_all(&stream)?;
    let right = (me + 1) % n;
    rt.put_with_signal(
        &src,
        &mut dst,
        flags.signal(0)?,
        SignalOp::Set(1),
        right,
        &stream,
    )?;
    rt.signal_wait_until(flags.signal(0)?, Cmp::Ge, 1, &stream)?;
    let got = dst.to_vec()?;
    let left = (me + n - 1) % n;
    ensure!(
        got.iter().all(|&x| x == left as u32 + 1),
        "after the wait, dst holds {} where PE {left} put {}",
        got[0],
        left + 1
    );
    // Every PE's put has landed before any PE frees its arrays (a put into a freed array).
    rt.barrier_all(&stream)?;
    stream.synchronize()?;
    Ok(())
}

/// Waits for word 1 of a signal array to reach 1, which no PE sends.
fn signal_never_sent(rt: &Runtime, timeout: Duration) -> anyhow::Result<()> {
    let stream = rt.stream().clone();
    let flags = rt.alloc_zeroed::<u64>(2)?;
    let data = rt.alloc_zeroed::<u32>(16)?;
    stream.synchronize()?;
    let t0 = Instant::now();
    rt.signal_wait_until(flags.signal(1)?, Cmp::Ge, 1, &stream)?;
    let copied = data.to_vec();
    let took = t0.elapsed();
    let e = match copied {
        Ok(_) => bail!("the copy after a wait for a signal never sent returned Ok after {took:?}"),
        Err(e) => e,
    };
    println!(
        "waits: PE {}: signal never sent: {} after {:.2} s: {e}",
        rt.my_pe(),
        variant(&e),
        took.as_secs_f64()
    );
    match e {
        Error::SignalWaitFailed {
            failure,
            index,
            cmp,
            value,
            seen,
            ..
        } => {
            ensure!(failure == "timed out", "failure {failure:?}");
            ensure!(index == 1, "the error names word {index}, not 1");
            ensure!(cmp == Some(Cmp::Ge), "the error names {cmp:?}, not ge");
            ensure!(value == 1 && seen == 0, "value {value}, seen {seen}");
        }
        other => bail!("expected Error::SignalWaitFailed, got {other}"),
    }
    ensure!(
        took >= timeout && took <= timeout + SLACK,
        "the error came after {took:?}, not within {timeout:?} .. +{SLACK:?}"
    );
    let later = rt.async_error().err().context("the runtime has failed")?;
    ensure!(
        matches!(later, Error::SignalWaitFailed { .. }),
        "a later call returns {later}, not the wait's failure"
    );
    Ok(())
}

/// The last PE stays away from an all-reduce of this crate's kernels (world team, 64 floats:
/// LL on a peer-mapped team, Lamport on a 4-PE sm_90 one), or from a rooted reduce to PE 0
/// (`rooted`; whichever algorithm NVSHMEM_RS_ALGORITHMS forces) of 64 MiB, where the direct
/// kernels take the root's pull on 2 PEs and the non-roots' split from 3; every other PE's
/// copy after it must name it.
fn kernel_peer(rt: &Runtime, timeout: Duration, rooted: bool) -> anyhow::Result<()> {
    let (me, n) = (rt.my_pe(), rt.n_pes());
    let world = rt.world();
    ensure!(
        world.has_nvlink_kernels(),
        "the world team is not peer-mapped with a channel: this case needs one node"
    );
    let stream = rt.stream().clone();
    let count = if rooted { 16 << 20 } else { 64 };
    let src = rt.alloc_from(&vec![1.0f32; count])?;
    let mut dst = rt.alloc_zeroed::<f32>(count)?;
    let what = if rooted { "reduce" } else { "all-reduce" };
    let call = |dst: &mut _| {
        if rooted {
            world.reduce(0, &src, dst, ReduceOp::Sum, &stream)
        } else {
            world.all_reduce(&src, dst, ReduceOp::Sum, &stream)
        }
    };
    // One that completes first: the kernels and the channel work. A reduce leaves the
    // non-roots' dst as it was (zero).
    call(&mut dst)?;
    let want = if rooted && me != 0 { 0.0 } else { n as f32 };
    ensure!(
        dst.to_vec()?.iter().all(|&x| x == want),
        "the first {what} is wrong"
    );
    rt.barrier_all(&stream)?;
    stream.synchronize()?;
    let absent = n - 1;
    if me == absent {
        // Until the others have failed and lingered and exited, and its own watchdog has
        // seen them go (well within GRACE of that).
        stay_away(rt, timeout + SLACK + GRACE / 2);
        return Ok(());
    }
    let t0 = Instant::now();
    call(&mut dst)?;
    let copied = dst.to_vec();
    let took = t0.elapsed();
    let Err(e) = copied else {
        bail!("the copy after a {what} PE {absent} never joined returned Ok after {took:?}")
    };
    println!(
        "waits: PE {me}: peer never arrived in our kernel: {} after {:.2} s: {e}",
        variant(&e),
        took.as_secs_f64()
    );
    match &e {
        Error::CollectiveFailed {
            failure,
            team_pe,
            pe,
            team,
            ..
        } => {
            ensure!(*failure == "timed out", "failure {failure:?}");
            ensure!(
                *team_pe == Some(absent),
                "names team PE {team_pe:?}, not {absent}"
            );
            ensure!(*pe == Some(absent), "names world PE {pe:?}, not {absent}");
            ensure!(team.contains("world PEs"), "names the team {team:?}");
        }
        other => bail!("expected Error::CollectiveFailed, got {other}"),
    }
    ensure!(
        took >= timeout && took <= timeout + SLACK,
        "the error came after {took:?}, not within {timeout:?} .. +{SLACK:?}"
    );
    Ok(())
}

/// The last PE stays away from an all-reduce that NVSHMEM's own kernels run; the others wait
/// in it until the watchdog ends their process. Returns only on the absent PE.
fn nvshmem_path(rt: &Runtime, timeout: Duration) {
    let (me, n) = (rt.my_pe(), rt.n_pes());
    let absent = n - 1;
    let run = || -> anyhow::Result<()> {
        let world = rt.world();
        let stream = rt.stream().clone();
        let src = rt.alloc_from(&[1.0f32; 1024])?;
        let mut dst = rt.alloc_zeroed::<f32>(1024)?;
        world.all_reduce(&src, &mut dst, ReduceOp::Sum, &stream)?;
        ensure!(
            dst.to_vec()?.iter().all(|&x| x == n as f32),
            "the first all-reduce is wrong"
        );
        rt.barrier_all(&stream)?;
        stream.synchronize()?;
        if me == absent {
            // Past the others' end, which nvshmem-run's ending of the job then shares.
            stay_away(rt, timeout + GRACE + SLACK + Duration::from_secs(5));
            return Ok(());
        }
        let limit = timeout + GRACE + SLACK;
        std::thread::spawn(move || {
            std::thread::sleep(limit);
            println!(
                "waits: PE {me}: FAILED: still alive {limit:?} after entering NVSHMEM's all-reduce"
            );
            std::process::exit(2);
        });
        println!("waits: PE {me}: entering NVSHMEM's all-reduce without PE {absent}");
        world.all_reduce(&src, &mut dst, ReduceOp::Sum, &stream)?;
        stream.synchronize()?;
        bail!("NVSHMEM's all-reduce completed without PE {absent}")
    };
    if let Err(e) = run() {
        println!("waits: PE {me}: FAILED: {e:#}");
        std::process::exit(3);
    }
}

/// The absent PE: sleeps `for_` through the others' failure, then reads its runtime's state,
/// which hands it any failure its watchdog saw (the others' exit), so the watchdog leaves the
/// ending to it.
fn stay_away(rt: &Runtime, for_: Duration) {
    std::thread::sleep(for_);
    let state = rt.async_error();
    println!(
        "waits: PE {}: stayed away; now {}",
        rt.my_pe(),
        state.map_or_else(|e| e.to_string(), |()| "healthy".into())
    );
}

/// The variant's name, for the log.
fn variant(e: &Error) -> &'static str {
    match e {
        Error::SignalWaitFailed { .. } => "SignalWaitFailed",
        Error::CollectiveFailed { .. } => "CollectiveFailed",
        Error::WaitTimedOut { .. } => "WaitTimedOut",
        Error::PeerFailed { .. } => "PeerFailed",
        _ => "another error",
    }
}
