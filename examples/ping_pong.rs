//! A ring ping-pong done by the GPU alone: a token goes round the ring of PEs by
//! put-with-signal, each PE's kernel waiting for its signal word and passing the token on
//! (examples/kernels/ping_pong.cu, built by `nvshmem::device`). With two PEs a lap is one round
//! trip; with `n`, `n` hops. Prints the time of a lap and of a hop (the GPU's own timer, after
//! warm-up laps), and checks that every PE saw every lap's token in order.
//!
//! ```sh
//! scripts/run-example.sh ping_pong                # one PE per GPU through nvshmem-run
//! mpirun -np 2 target/release/examples/ping_pong  # any launcher; needs NVRTC and nvJitLink
//! ```
#[path = "common/run.rs"]
mod run;

use anyhow::{ensure, Context};
use cudarc::driver::LaunchConfig;
use nvshmem::device::{Args, DeviceModule, DeviceSource};
use nvshmem::prelude::*;

/// Laps run before the timed ones.
const WARMUP: u64 = 100;
/// Laps timed.
const LAPS: u64 = 10_000;

fn main() -> std::process::ExitCode {
    run::main("ping_pong", ping_pong)
}

fn ping_pong() -> anyhow::Result<()> {
    let rt = Runtime::init().context("starting NVSHMEM")?;
    let (me, n) = (rt.my_pe(), rt.n_pes());
    let stream = rt.stream().clone();
    let source = DeviceSource::new("ping_pong", include_str!("kernels/ping_pong.cu"));
    let module = DeviceModule::compile(&rt, &source).context("building the ping-pong kernel")?;
    let kernel = module.kernel("ping_pong")?;

    let total = (WARMUP + LAPS) as usize;
    let mut token = rt.alloc_zeroed::<u64>(1)?;
    let mut seen = rt.alloc_zeroed::<u64>(total)?;
    let sig = rt.alloc_zeroed::<u64>(1)?;
    let mut elapsed = rt.alloc_zeroed::<u64>(1)?;
    // No PE may signal a peer before the peer has zeroed its words.
    rt.barrier_all(&stream)?;
    let args = Args::new()
        .array_mut(&mut token)
        .array_mut(&mut seen)
        .array(&sig)
        .array_mut(&mut elapsed)
        .value(WARMUP);
    let one = LaunchConfig {
        grid_dim: (1, 1, 1),
        block_dim: (1, 1, 1),
        shared_mem_bytes: 0,
    };
    // SAFETY: ping_pong(nvrs_array<u64> x 2, nvrs_signals, nvrs_array<u64>, u64) reads and
    // writes element 0 of token, sig and elapsed and the `total` elements of seen, and puts to
    // the next PE's token and sig, which every PE allocated alike; every PE launches it, and a
    // collective launch makes sure it is resident while it waits for its neighbours.
    unsafe { kernel.launch_collective(one, &stream, args)? };
    stream.synchronize()?;
    rt.barrier_all(&stream)?;
    stream.synchronize()?;

    let seen = seen.to_vec()?;
    let want: Vec<u64> = (1..=total as u64).collect();
    ensure!(
        seen == want,
        "PE {me}: the laps' tokens arrived as {:?}... instead of 1, 2, 3, ...",
        &seen[..seen.len().min(8)]
    );
    ensure!(
        sig.to_vec()? == [total as u64],
        "PE {me}: signal word reads {:?}, expected {total}",
        sig.to_vec()?
    );
    let ns = elapsed.to_vec()?[0] as f64;
    let lap_us = ns / LAPS as f64 / 1e3;
    if me == 0 {
        println!(
            "ping_pong: {n} PEs, {LAPS} laps of put-with-signal after {WARMUP} warm-up laps: \
             {lap_us:.2} us a lap, {:.2} us a hop{}",
            lap_us / n as f64,
            if n == 2 {
                " (a lap is one round trip)"
            } else {
                ""
            }
        );
    }
    println!("PE {me}: all {total} laps arrived in order: passed");
    Ok(())
}
