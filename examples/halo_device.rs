//! The halo exchange of examples/halo.rs done by the stencil kernel itself: one persistent
//! kernel (examples/kernels/halo_device.cu, built by `nvshmem::device`, launched as NVSHMEM's
//! collective launch) puts its edge cells into its neighbours' ghost cells with
//! put-with-signal, waits for theirs, smooths, and synchronises its grid, for every iteration:
//! no host step per iteration. The result is checked against the host's, and the same
//! iterations are timed again host-initiated, as examples/halo.rs does them (two
//! `put_with_signal`, `quiet` and two `signal_wait_until` on the stream, then the stencil
//! kernel), so the two can be compared.
//!
//! `--device-only` skips the host-initiated run (scripts/gpu-check.sh passes it when PEs share
//! a GPU under MPS, where timings mean nothing and NVSHMEM's on-stream waits are unchecked).
//!
//! ```sh
//! scripts/run-example.sh halo_device                # one PE per GPU through nvshmem-run
//! mpirun -np 2 target/release/examples/halo_device  # any launcher; needs NVRTC and nvJitLink
//! ```
use anyhow::{ensure, Context};
use cudarc::driver::LaunchConfig;
use nvshmem::device::{Args, DeviceModule, DeviceSource};
use nvshmem::prelude::*;

/// Elements each PE owns.
const CHUNK: usize = 1 << 20;
/// Smoothing iterations.
const ITERS: u64 = 100;
/// Threads per block of the persistent kernel.
const BLOCK: u32 = 256;
/// Ghost cells and signal words: index 0 is the left side, 1 the right.
const LEFT: usize = 0;
const RIGHT: usize = 1;

/// The initial value of global element `g` (a saw-tooth, as in examples/halo.rs).
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
    match halo_device() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("halo_device: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn halo_device() -> anyhow::Result<()> {
    let rt = Runtime::init().context("starting NVSHMEM")?;
    let (me, n) = (rt.my_pe(), rt.n_pes());
    let (left, right) = ((me + n - 1) % n, (me + 1) % n);
    let stream = rt.stream().clone();
    let source = DeviceSource::new("halo_device", include_str!("kernels/halo_device.cu"));
    let module = DeviceModule::compile(&rt, &source).context("building the halo kernels")?;
    let step = module.kernel("halo_device")?;
    let smooth = module.kernel("smooth")?;

    let mine: Vec<f32> = (0..CHUNK).map(|i| initial(me * CHUNK + i)).collect();
    let mut host: Vec<f32> = (0..n * CHUNK).map(initial).collect();
    for _ in 0..ITERS {
        host = smooth_host(&host);
    }
    let want = &host[me * CHUNK..(me + 1) * CHUNK];
    let check = |got: &[f32], how: &str| -> anyhow::Result<f32> {
        // The same f32 operations in the same order as the host's (see examples/halo.rs).
        let worst = got
            .iter()
            .zip(want)
            .map(|(g, w)| (g - w).abs())
            .fold(0.0f32, f32::max);
        ensure!(
            worst <= 1e-6,
            "PE {me} ({how}): the result differs from the host's by up to {worst}"
        );
        Ok(worst)
    };

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
        let slot = 2 * (it as usize % 2);
        rt.put_with_signal(
            &cur.view(..1)?,
            &mut hghosts.view_mut(slot + RIGHT..slot + RIGHT + 1)?,
            harrived.signal(RIGHT)?,
            SignalOp::Add(1),
            left,
            &stream,
        )?;
        rt.put_with_signal(
            &cur.view(CHUNK - 1..)?,
            &mut hghosts.view_mut(slot + LEFT..slot + LEFT + 1)?,
            harrived.signal(LEFT)?,
            SignalOp::Add(1),
            right,
            &stream,
        )?;
        rt.quiet(&stream)?;
        rt.signal_wait_until(harrived.signal(LEFT)?, Cmp::Ge, it, &stream)?;
        rt.signal_wait_until(harrived.signal(RIGHT)?, Cmp::Ge, it, &stream)?;
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
