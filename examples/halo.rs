//! A 1-D halo exchange on a ring of PEs: each PE owns 1 Mi f32 of a global (periodic) array,
//! smooths it with a 3-point average `(left + 2 * centre + right) / 4` for a few iterations,
//! and before each iteration sends its first element to its left neighbour and its last to
//! its right neighbour (`put_with_signal`), whose kernels need them as ghost cells. The result
//! is checked against the same smoothing computed on the host over the whole array. The
//! exchange, the initial array and the host's check are in examples/common/halo.rs, shared with
//! examples/halo_device.rs.
//!
//! ```sh
//! scripts/run-example.sh halo                    # one PE per GPU through nvshmem-run
//! mpirun -np 2 target/release/examples/halo      # or any launcher (NVRTC must be loadable)
//! ```
#[path = "common/halo.rs"]
mod halo;
#[path = "common/run.rs"]
mod run;

use anyhow::{ensure, Context};
use cudarc::driver::{LaunchConfig, PushKernelArg};
use halo::CHUNK;
use nvshmem::prelude::*;

/// Smoothing iterations, each after one halo exchange.
const ITERS: u64 = 10;

/// The 3-point average, one thread per element; `ghosts` is `[left ghost, right ghost]`,
/// standing in for `u[-1]` and `u[n]`. Compiled at run time with NVRTC (through cudarc).
const KERNEL: &str = r#"
extern "C" __global__ void smooth(const float* u, float* out, const float* ghosts, unsigned n) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float left = i == 0 ? ghosts[0] : u[i - 1];
    float right = i == n - 1 ? ghosts[1] : u[i + 1];
    out[i] = 0.25f * left + 0.5f * u[i] + 0.25f * right;
}
"#;

fn main() -> std::process::ExitCode {
    run::main("halo", run)
}

fn run() -> anyhow::Result<()> {
    let rt = Runtime::init().context("starting NVSHMEM")?;
    let (me, n) = (rt.my_pe(), rt.n_pes());
    let (left, right) = halo::neighbours(me, n);
    let stream = rt.stream().clone();

    let ptx = cudarc::nvrtc::compile_ptx(KERNEL).context("compiling the stencil kernel")?;
    let smooth = rt.context().load_module(ptx)?.load_function("smooth")?;

    // Every PE allocates the same arrays, in the same order (allocation is collective).
    let mut cur = rt.alloc_from(&halo::mine(me))?;
    let mut next = rt.alloc_zeroed::<f32>(CHUNK)?;
    // Two sets of [left, right] ghost cells, used in turn (`halo::exchange` says why).
    let mut ghosts = rt.alloc_zeroed::<f32>(4)?;
    // One signal word per side, counting the puts that have arrived into that side's ghost.
    let arrived = rt.alloc_zeroed::<u64>(2)?;
    // No PE may put into a neighbour's arrays before that neighbour has zeroed them.
    rt.barrier_all(&stream)?;

    let (len, config) = (CHUNK as u32, LaunchConfig::for_num_elems(CHUNK as u32));
    for it in 1..=ITERS {
        // My edge elements into my neighbours' ghosts, theirs into mine (put_with_signal,
        // quiet, signal_wait_until, all on the stream), then the stencil.
        let slot = halo::exchange(&rt, &cur, &mut ghosts, &arrived, it, &stream)?;
        let ghost = ghosts.view(slot..slot + 2)?;
        let mut launch = stream.launch_builder(&smooth);
        launch.arg(&cur).arg(&mut next).arg(&ghost).arg(&len);
        // SAFETY: smooth reads CHUNK floats of `cur` and 2 of `ghost` and writes CHUNK floats
        // of `next`, exactly their lengths; one thread per element.
        unsafe { launch.launch(config) }?;
        std::mem::swap(&mut cur, &mut next);
    }
    stream.synchronize()?;

    // The same iterations on the host, over the whole ring.
    let want = halo::reference(me, n, ITERS);
    let worst = halo::compare(&cur.to_vec()?, &want, me, "host-initiated")?;
    let counts = arrived.to_vec()?;
    ensure!(
        counts == [ITERS, ITERS],
        "PE {me}: expected {ITERS} puts from each side, the signal words count {counts:?}"
    );
    println!(
        "PE {me}: {ITERS} iterations of a 3-point average on elements {}..{} of {}, ghost \
         cells from PEs {left} and {right}: matches the host (max difference {worst})",
        me * CHUNK,
        (me + 1) * CHUNK,
        n * CHUNK,
    );
    Ok(())
}
