//! Timing collectives without blocking: all-reduces of growing size (4 KiB to 64 MiB of f32)
//! are queued on the stream, each inside `team.timed`, which records CUDA events around it and
//! waits for nothing; the host computes the expected result while the GPU runs, then polls
//! `Timing::elapsed()` (which never blocks) until the last call is done, prints each size's
//! time and bandwidth, and checks the result.
//!
//! ```sh
//! scripts/run-example.sh timing                  # one PE per GPU through nvshmem-run
//! mpirun -np 2 target/release/examples/timing
//! ```
#[path = "common/run.rs"]
mod run;

use std::time::{Duration, Instant};

use anyhow::{ensure, Context};
use nvshmem::prelude::*;

/// Elements (f32) of each all-reduce: 1 Ki to 16 Mi, by factors of 4.
const SIZES: [usize; 8] = [
    1 << 10,
    1 << 12,
    1 << 14,
    1 << 16,
    1 << 18,
    1 << 20,
    1 << 22,
    1 << 24,
];
/// Timed calls of each size; the fastest is reported (the others carry noise: a PE that
/// arrived late, a clock that was still rising).
const REPEATS: usize = 5;

/// PE `pe`'s element `i`: small whole numbers, so that every sum is exact in f32.
fn value(pe: usize, i: usize) -> f32 {
    (pe + i % 5) as f32
}

fn main() -> std::process::ExitCode {
    run::main("timing", timing)
}

fn timing() -> anyhow::Result<()> {
    let rt = Runtime::init().context("starting NVSHMEM")?;
    let (me, n) = (rt.my_pe(), rt.n_pes());
    let world = rt.world();
    let stream = rt.stream().clone();
    let largest = SIZES[SIZES.len() - 1];

    // One pair of arrays of the largest size; each call uses views of their first `len`.
    let mine: Vec<f32> = (0..largest).map(|i| value(me, i)).collect();
    let src = rt.alloc_from(&mine)?;
    let mut dst = rt.alloc_zeroed::<f32>(largest)?;
    let all_reduce = |len: usize, dst: &mut SymArray<f32>| -> nvshmem::Result<()> {
        world.all_reduce(
            &src.view(..len)?,
            &mut dst.view_mut(..len)?,
            ReduceOp::Sum,
            &stream,
        )
    };

    // The first call of each size sets up its state (and may compile a kernel on the host
    // while the GPU waits, time that the events would count): one untimed call of each size
    // first, finished on every PE.
    for &len in &SIZES {
        all_reduce(len, &mut dst)?;
    }
    rt.barrier_all(&stream)?;
    stream.synchronize()?;
    // Poison the output so that the check below sees only the timed calls' result; the
    // barrier keeps every PE's collective from writing into my `dst` (reductions may use
    // peers' outputs on the way) before I have poisoned it.
    dst.copy_from_host(&vec![-1.0; largest])?;
    rt.barrier_all(&stream)?;

    // Queue every timed call; nothing here waits for the GPU.
    let queued = Instant::now();
    let mut timings = Vec::new();
    for &len in &SIZES {
        for _ in 0..REPEATS {
            let ((), t) = world.timed(&stream, || all_reduce(len, &mut dst))?;
            timings.push((len, t));
        }
    }

    // Host work while the GPU runs: the expected result.
    let expected: Vec<f32> = (0..largest)
        .map(|i| (0..n).map(|pe| value(pe, i)).sum())
        .collect();
    let host_work = queued.elapsed();
    // Then poll: the calls finish in the order they were queued, so when the last one is
    // done, all are. elapsed() returns None until then, and never blocks.
    let last = &timings[timings.len() - 1].1;
    let mut polls = 0u64;
    while last.elapsed()?.is_none() {
        polls += 1;
        std::thread::yield_now();
    }
    let all_done = queued.elapsed();

    if me == 0 {
        println!(
            "queued {} all_reduces over {n} PEs; the host computed the expected result meanwhile \
             ({:.1} ms), then polled {polls} times until the GPU finished ({:.1} ms after queueing)",
            timings.len(),
            ms(host_work),
            ms(all_done),
        );
        // algbw: bytes per second of the call; busbw: what each PE's links carry, 2 (n - 1) / n
        // times as much for an all-reduce (nccl-tests' convention).
        println!(
            "{:>12} {:>12} {:>14} {:>14}",
            "bytes", "time (us)", "algbw (GB/s)", "busbw (GB/s)"
        );
        for (i, &len) in SIZES.iter().enumerate() {
            let best = timings[i * REPEATS..(i + 1) * REPEATS]
                .iter()
                .map(|(_, t)| {
                    t.elapsed()?
                        .context("a call is not done although the last one is")
                })
                .collect::<anyhow::Result<Vec<Duration>>>()?
                .into_iter()
                .min()
                .unwrap_or_default();
            let bytes = len * std::mem::size_of::<f32>();
            let algbw = bytes as f64 / best.as_secs_f64().max(1e-9) / 1e9;
            let busbw = algbw * 2.0 * (n - 1) as f64 / n as f64;
            println!(
                "{bytes:>12} {:>12.1} {algbw:>14.2} {busbw:>14.2}",
                best.as_secs_f64() * 1e6
            );
        }
    }

    // The last call wrote all of `dst`: check it.
    let got = dst.to_vec()?;
    let wrong = got.iter().zip(&expected).filter(|(g, w)| g != w).count();
    ensure!(
        wrong == 0,
        "PE {me}: {wrong} of {largest} elements of the last all_reduce differ from the host's"
    );
    println!("PE {me}: the last all_reduce ({largest} f32) matches the host's sum: ok");
    Ok(())
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}
