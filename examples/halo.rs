//! A 1-D halo exchange on a ring of PEs: each PE owns 1 Mi f32 of a global (periodic) array,
//! smooths it with a 3-point average `(left + 2 * centre + right) / 4` for a few iterations,
//! and before each iteration sends its first element to its left neighbour and its last to
//! its right neighbour (`put_with_signal`), whose kernels need them as ghost cells. The result
//! is checked against the same smoothing computed on the host over the whole array.
//!
//! ```sh
//! scripts/run-example.sh halo                    # one PE per GPU through nvshmem-run
//! mpirun -np 2 target/release/examples/halo      # or any launcher (NVRTC must be loadable)
//! ```
use anyhow::{ensure, Context};
use cudarc::driver::{LaunchConfig, PushKernelArg};
use nvshmem::prelude::*;

/// Elements each PE owns.
const CHUNK: usize = 1 << 20;
/// Smoothing iterations, each after one halo exchange.
const ITERS: u64 = 10;
/// Ghost cells and signal words: index 0 holds the left neighbour's last element, 1 the
/// right neighbour's first.
const LEFT: usize = 0;
const RIGHT: usize = 1;

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

/// The initial value of global element `g`: a saw-tooth, so that every element differs from
/// its neighbours and a wrong ghost cell shows in the result.
fn initial(g: usize) -> f32 {
    ((g * 37) % 101) as f32 / 100.0
}

/// One iteration on the host, over the whole periodic array, with the kernel's arithmetic.
fn smooth_host(u: &[f32]) -> Vec<f32> {
    let n = u.len();
    (0..n)
        .map(|i| 0.25 * u[(i + n - 1) % n] + 0.5 * u[i] + 0.25 * u[(i + 1) % n])
        .collect()
}

fn main() -> std::process::ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .init();
    match halo() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("halo: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn halo() -> anyhow::Result<()> {
    let rt = Runtime::init().context("starting NVSHMEM")?;
    let (me, n) = (rt.my_pe(), rt.n_pes());
    // On a ring; with one PE both neighbours are itself, and the puts wrap its own array.
    let (left, right) = ((me + n - 1) % n, (me + 1) % n);
    let stream = rt.stream().clone();

    let ptx = cudarc::nvrtc::compile_ptx(KERNEL).context("compiling the stencil kernel")?;
    let smooth = rt.context().load_module(ptx)?.load_function("smooth")?;

    // Every PE allocates the same arrays, in the same order (allocation is collective).
    let mine: Vec<f32> = (0..CHUNK).map(|i| initial(me * CHUNK + i)).collect();
    let mut cur = rt.alloc_from(&mine)?;
    let mut next = rt.alloc_zeroed::<f32>(CHUNK)?;
    // Two sets of [left, right] ghost cells, used in turn (by iteration parity): a neighbour
    // may be one iteration ahead, and its next put must not overwrite the ghosts my kernel is
    // still reading. It cannot be two ahead: its put for iteration i + 2 waits for my put of
    // i + 1, which my stream issues only after my kernel of iteration i has finished.
    let mut ghosts = rt.alloc_zeroed::<f32>(4)?;
    // One signal word per side, counting the puts that have arrived into that side's ghost.
    let arrived = rt.alloc_zeroed::<u64>(2)?;
    // No PE may put into a neighbour's arrays before that neighbour has zeroed them.
    rt.barrier_all(&stream)?;

    let (len, config) = (CHUNK as u32, LaunchConfig::for_num_elems(CHUNK as u32));
    for it in 1..=ITERS {
        let slot = 2 * (it as usize % 2);
        // My first element becomes my left neighbour's right ghost, my last element my right
        // neighbour's left ghost; each put adds 1 to the signal word of the side it fills.
        rt.put_with_signal(
            &cur.view(..1)?,
            &mut ghosts.view_mut(slot + RIGHT..slot + RIGHT + 1)?,
            arrived.signal(RIGHT)?,
            SignalOp::Add(1),
            left,
            &stream,
        )?;
        rt.put_with_signal(
            &cur.view(CHUNK - 1..)?,
            &mut ghosts.view_mut(slot + LEFT..slot + LEFT + 1)?,
            arrived.signal(LEFT)?,
            SignalOp::Add(1),
            right,
            &stream,
        )?;
        // Finish this iteration's puts before the next ones start, so that the signals of
        // one side arrive in iteration order (a count of `it` then means iteration `it`'s
        // element is there, not a later one's ahead of it).
        rt.quiet(&stream)?;
        // The signals count puts (Add(1)), so after iteration `it` each word reads `it`: the
        // wait is `>= it` and the words are never reset. A reset to 0 would race with the
        // neighbour's next put, which may already be on its way.
        rt.signal_wait_until(arrived.signal(LEFT)?, Cmp::Ge, it, &stream)?;
        rt.signal_wait_until(arrived.signal(RIGHT)?, Cmp::Ge, it, &stream)?;
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
    let mut host: Vec<f32> = (0..n * CHUNK).map(initial).collect();
    for _ in 0..ITERS {
        host = smooth_host(&host);
    }
    let got = cur.to_vec()?;
    let want = &host[me * CHUNK..(me + 1) * CHUNK];
    // The same f32 operations in the same order: the results should agree to the last bit
    // (the GPU may fuse a multiply and an add, which cannot change a product by 0.25 or 0.5,
    // as those are exact); 1e-6 leaves room for a compiler that rounds differently.
    let worst = got
        .iter()
        .zip(want)
        .map(|(g, w)| (g - w).abs())
        .fold(0.0f32, f32::max);
    ensure!(
        worst <= 1e-6,
        "PE {me}: the smoothed array differs from the host's by up to {worst}"
    );
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
