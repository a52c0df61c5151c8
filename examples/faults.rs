//! What a job does when one PE fails: every PE runs a loop of all-reduces, checked against the
//! host, and one PE fails on purpose at a chosen iteration. The others must end with an error
//! that names the failed PE (or exit non-zero saying so) instead of waiting for ever.
//!
//! ```sh
//! faults MODE [PE] [AT]      MODE: none, kill, panic, stop, exit, abort, exit-at-end
//!                            PE: the PE that fails (default the last); AT: the iteration (200)
//! NVSHMEM_RS_TIMEOUT=10s scripts/run-example.sh faults stop
//! ```
//!
//! `kill` sends itself SIGKILL, `panic` panics, `stop` sends itself SIGSTOP (a hung PE), `exit`
//! exits with status 3 without finalising, `abort` calls `Runtime::abort` and carries on (its
//! next call must fail). `exit-at-end`: every all-reduce completes, then the failing PE exits
//! (status 0, without finalising) while the others drop their runtime at once: dropping it
//! must end (NVSHMEM left as it is) within the timeout, not wait in finalising for ever. Every line about the failure carries the Unix time in seconds, so a
//! driver can tell how long the survivors took to end.
#[path = "common/run.rs"]
mod run;

use std::{
    process::{Command, ExitCode},
    time::{Duration, Instant, SystemTime, UNIX_EPOCH},
};

use anyhow::{bail, ensure, Context};
use nvshmem::prelude::*;

/// Elements of each all-reduce (f32).
const LEN: usize = 4096;
/// Iterations when nothing fails.
const ITERATIONS: usize = 2000;

fn now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

fn main() -> ExitCode {
    run::main("faults", faults)
}

fn faults() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let mode = args.next().unwrap_or_else(|| "none".into());
    ensure!(
        [
            "none",
            "kill",
            "panic",
            "stop",
            "exit",
            "abort",
            "exit-at-end"
        ]
        .contains(&mode.as_str()),
        "unknown mode {mode:?}: expected none, kill, panic, stop, exit, abort or exit-at-end"
    );
    let rt = Runtime::init().context("starting NVSHMEM")?;
    let (me, n) = (rt.my_pe(), rt.n_pes());
    let victim: usize = match args.next() {
        Some(pe) => pe.parse().context("PE")?,
        None => n - 1,
    };
    let at: usize = match args.next() {
        Some(i) => i.parse().context("AT")?,
        None => 200,
    };
    ensure!(victim < n, "PE {victim} is not below {n}");
    let world = rt.world();
    let stream = rt.stream().clone();
    let src = rt.alloc_from(&vec![(me + 1) as f32; LEN])?;
    let mut dst = rt.alloc_zeroed::<f32>(LEN)?;
    let expected = (n * (n + 1) / 2) as f32;
    if me == 0 {
        println!(
            "{n} PEs, mode {mode}, PE {victim} fails at iteration {at}, timeout {:?}",
            rt.timeout()
        );
    }
    let mut last_ok = Instant::now();
    for i in 0..ITERATIONS {
        if i == at && me == victim {
            fail(&rt, &mode, me, i)?;
        }
        let mut step = || -> anyhow::Result<()> {
            world.all_reduce(&src, &mut dst, ReduceOp::Sum, &stream)?;
            stream.synchronize()?;
            if i % 100 == 0 || i + 1 == ITERATIONS {
                let got = dst.to_vec()?;
                ensure!(
                    got.iter().all(|&x| x == expected),
                    "iteration {i}: all_reduce gave {} where the host says {expected}",
                    got[0]
                );
            }
            Ok(())
        };
        if let Err(e) = step() {
            println!(
                "PE {me}: iteration {i} failed at t={:.3}, {:.3} s after the last completed one: {e}",
                now(),
                last_ok.elapsed().as_secs_f64()
            );
            bail!("PE {me} ended on a failure: {e}");
        }
        last_ok = Instant::now();
    }
    println!("PE {me}: {ITERATIONS} all-reduces of {LEN} f32 checked: ok");
    if mode == "exit-at-end" {
        if me == victim {
            println!("fault: PE {me} exits without finalising, t={:.3}", now());
            std::process::exit(0);
        }
        drop((src, dst, world, stream));
        let t = Instant::now();
        drop(rt);
        println!(
            "PE {me}: runtime dropped {:.3} s after its peer left, t={:.3}",
            t.elapsed().as_secs_f64(),
            now()
        );
    }
    Ok(())
}

/// PE `me` fails as `mode` says, at iteration `i`.
fn fail(rt: &Runtime, mode: &str, me: usize, i: usize) -> anyhow::Result<()> {
    println!(
        "fault: PE {me} does {mode} at iteration {i}, t={:.3}",
        now()
    );
    let signal = |name: &str| -> anyhow::Result<()> {
        let pid = std::process::id().to_string();
        let status = Command::new("kill").args([name, &pid]).status()?;
        ensure!(status.success(), "kill {name} {pid}: {status}");
        Ok(())
    };
    match mode {
        "kill" => signal("-KILL")?,
        "stop" => {
            signal("-STOP")?;
            // Only reached if someone sends SIGCONT: then wait to be ended.
            std::thread::sleep(Duration::from_secs(3600));
        }
        "panic" => panic!("PE {me}: a deliberate panic at iteration {i}"),
        "exit" => std::process::exit(3),
        "abort" => {
            let t = Instant::now();
            rt.abort();
            println!(
                "PE {me}: abort returned after {:.1} us; async_error: {:?}",
                t.elapsed().as_secs_f64() * 1e6,
                rt.async_error().err().map(|e| e.to_string())
            );
        }
        _ => {}
    }
    Ok(())
}
