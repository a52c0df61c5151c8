//! The halo exchange of examples/halo.rs done by the stencil kernel itself: one persistent
//! kernel (examples/kernels/halo_device.cu, built by `nvshmem::device`, launched as NVSHMEM's
//! collective launch) puts its edge cells into its neighbours' ghost cells with
//! put-with-signal, waits for theirs, smooths, and synchronises its grid, for every iteration:
//! no host step per iteration. The result is checked against the host's, and the same
//! iterations are timed again host-initiated, as examples/halo.rs does them (the exchange of
//! examples/common/halo.rs: two `put_with_signal`, `quiet` and two `signal_wait_until` on the
//! stream, then the stencil kernel), so the two can be compared.
//!
//! `--device-only` skips the host-initiated run (scripts/gpu-check.sh passes it when PEs share
//! a GPU under MPS, where timings mean nothing and NVSHMEM's on-stream waits are unchecked).
//!
//! ```sh
//! scripts/run-example.sh halo_device                # one PE per GPU through nvshmem-run
//! mpirun -np 2 target/release/examples/halo_device  # any launcher; needs NVRTC and nvJitLink
//! ```
#[path = "common/halo.rs"]
mod halo;
#[path = "common/run.rs"]
mod run;

use anyhow::{ensure, Context};
use cudarc::driver::LaunchConfig;
use halo::CHUNK;
use nvshmem::device::{Args, DeviceModule, DeviceSource};
use nvshmem::prelude::*;

/// Smoothing iterations.
const ITERS: u64 = 100;
/// Threads per block of the persistent kernel.
const BLOCK: u32 = 256;

fn main() -> std::process::ExitCode {
    run::main("halo_device", halo_device)
}

fn halo_device() -> anyhow::Result<()> {
    let rt = Runtime::init().context("starting NVSHMEM")?;
    let (me, n) = (rt.my_pe(), rt.n_pes());
    let stream = rt.stream().clone();
    let source = DeviceSource::new("halo_device", include_str!("kernels/halo_device.cu"));
    let module = DeviceModule::compile(&rt, &source).context("building the halo kernels")?;
    let step = module.kernel("halo_device")?;
    let smooth = module.kernel("smooth")?;

    let mine = halo::mine(me);
    let want = halo::reference(me, n, ITERS);
    let check = |got: &[f32], how: &str| halo::compare(got, &want, me, how);

    // ---- device-initiated: one collective launch for every iteration.
    let mut u0 = rt.alloc_from(&mine)?;
    let mut u1 = rt.alloc_zeroed::<f32>(CHUNK)?;
    let mut ghosts = rt.alloc_zeroed::<f32>(4)?;
    let arrived = rt.alloc_zeroed::<u64>(2)?;
    rt.barrier_all(&stream)?;
    let cfg = LaunchConfig {
        grid_dim: (0, 0, 0),
        block_dim: (BLOCK, 1, 1),
        shared_mem_bytes: 0,
    };
    let most = step.max_resident_blocks((BLOCK, 1, 1), 0)?;
    println!("PE {me}: the persistent kernel runs {most} blocks of {BLOCK} (all that fit at once)");
    let start = stream.record_event(Some(cudarc::driver::sys::CUevent_flags::CU_EVENT_DEFAULT))?;
    let args = Args::new()
        .array_mut(&mut u0)
        .array_mut(&mut u1)
        .array_mut(&mut ghosts)
        .array(&arrived)
        .value(ITERS);
    // SAFETY: halo_device(nvrs_array<float> x 3, nvrs_signals, u64) reads and writes the CHUNK
    // elements of u0 and u1 and the 4 ghost cells, puts one float and one signal into each
    // neighbour's ghosts and words (allocated alike on every PE), and waits for theirs; every
    // PE launches it, collectively (all blocks resident: it synchronises its grid).
    let grid = unsafe { step.launch_collective(cfg, &stream, args)? };
    let end = stream.record_event(Some(cudarc::driver::sys::CUevent_flags::CU_EVENT_DEFAULT))?;
    let device_ms = start.elapsed_ms(&end)?;
    rt.barrier_all(&stream)?;
    let result = if ITERS.is_multiple_of(2) {
        u0.to_vec()?
    } else {
        u1.to_vec()?
    };
    let worst = check(&result, "device-initiated")?;
    ensure!(
        arrived.to_vec()? == [ITERS, ITERS],
        "PE {me}: signal words {:?}, expected {ITERS} each",
        arrived.to_vec()?
    );
    // Said before the host-initiated run, so that a log shows which of the two a failure is in.
    println!(
        "PE {me}: device-initiated: {ITERS} iterations match the host (max difference {worst})"
    );

    if std::env::args().any(|a| a == "--device-only") {
        return Ok(());
    }

    // ---- host-initiated, as examples/halo.rs: puts, quiet and waits on the stream, then the
    // stencil kernel, per iteration.
    let mut cur = rt.alloc_from(&mine)?;
    let mut next = rt.alloc_zeroed::<f32>(CHUNK)?;
    let mut hghosts = rt.alloc_zeroed::<f32>(4)?;
    let harrived = rt.alloc_zeroed::<u64>(2)?;
    rt.barrier_all(&stream)?;
    let one_per_elem = LaunchConfig::for_num_elems(CHUNK as u32);
    let hstart = stream.record_event(Some(cudarc::driver::sys::CUevent_flags::CU_EVENT_DEFAULT))?;
    for it in 1..=ITERS {
        let slot = halo::exchange(&rt, &cur, &mut hghosts, &harrived, it, &stream)?;
        let ghost = hghosts.view(slot..slot + 2)?;
        let args = Args::new()
            .ptr(&cur)
            .ptr_mut(&mut next)
            .ptr(&ghost)
            .value(CHUNK as u32);
        // SAFETY: smooth(const float*, float*, const float*, unsigned) reads CHUNK floats of
        // cur and 2 of the ghost view and writes CHUNK of next; one thread per element.
        unsafe { smooth.launch(one_per_elem, &stream, args)? };
        std::mem::swap(&mut cur, &mut next);
    }
    let hend = stream.record_event(Some(cudarc::driver::sys::CUevent_flags::CU_EVENT_DEFAULT))?;
    let host_ms = hstart.elapsed_ms(&hend)?;
    rt.barrier_all(&stream)?;
    check(&cur.to_vec()?, "host-initiated")?;

    println!(
        "PE {me}: {ITERS} iterations on elements {}..{} of {}: matches the host (max difference \
         {worst}); device-initiated {:.1} us/iteration ({} blocks of {BLOCK}), host-initiated \
         {:.1} us/iteration",
        me * CHUNK,
        (me + 1) * CHUNK,
        n * CHUNK,
        device_ms as f64 * 1e3 / ITERS as f64,
        grid.0,
        host_ms as f64 * 1e3 / ITERS as f64,
    );
    Ok(())
}
