//! Host time of one collective call: this library against the same NVSHMEM function called
//! raw through `nvshmem-sys`, in the same run, alternating, on the same buffers and stream.
//!
//! Needs GPUs: `scripts/gpu-check.sh` runs it under `mpirun` (`cargo bench` on a machine
//! without one says so and exits). Each sample times a batch of back-to-back calls on the host
//! (no synchronisation inside the batch), after one untimed call of the same kind, and drains
//! the stream outside the timed region; the batch is short enough that the stream's launch
//! queue never fills, so the host never waits for the GPU inside a sample. Prints the median per-call time of each and their ratio, and,
//! where the call is one kernel of this crate, the time of a bare `cuLaunchKernel` of that
//! same kernel (resolved once, so it is the floor the whole call is measured against).
//!
//! The raw calls run on `NVSHMEM_TEAM_WORLD`, as a program of raw NVSHMEM would, and again on
//! the team's own handle (`rt.world()` is a duplicate of the world, `Team::raw`): the calls
//! forced onto NVSHMEM's algorithm are measured against the second, the same NVSHMEM work.
use std::time::Instant;

use nvshmem::{
    collective::{Collective, Prepared},
    ReduceOp, Runtime,
};

const BATCH: usize = 64;
const SAMPLES: usize = 200;

fn main() -> anyhow::Result<()> {
    let rt = match Runtime::init() {
        Ok(rt) => rt,
        Err(e @ nvshmem::Error::NoGpu(_)) => {
            eprintln!("host_overhead: skipped: {e}");
            return Ok(());
        }
        Err(e) => return Err(e.into()),
    };
    let stream = rt.stream().clone();
    let team = rt.world();
    let lib = nvshmem::sys::lib()?;
    let src = rt.alloc_from(&[1.0f32; 2])?;
    let mut dst = rt.alloc_zeroed::<f32>(2)?;
    let (s, d) = (
        src.device_ptr_raw() as *const f32,
        dst.device_ptr_raw() as *mut f32,
    );

    // A team of one PE runs `local` (a copy, a quiet: no kernel of this crate): the host path
    // of a kernel call is measured there on the kernels the calls took before, forced.
    let one_pe = team.n_pes() == 1 && team.has_nvlink_kernels();
    if one_pe {
        rt.set_algorithm(Collective::AllReduce, Some("nvlink_ll"))?;
        rt.set_algorithm(Collective::Barrier, Some("nvlink"))?;
    }
    // The same kernels, bare: `None` where the calls are not one kernel of this crate
    // (NVSHMEM's path, one PE without peers).
    // SAFETY: every PE fires these exactly as often as the others, at the same points of the
    // sampling loop (the same plan on every PE), on `stream` only, with no other call of the
    // team on another stream; `src` and `dst` live to the end of main, past the last
    // synchronisation of `stream`.
    let bare_ar = unsafe { team.bare_launch_for_bench(Some((&src, &dst)), &stream) }.ok();
    // SAFETY: as above (a barrier has no arrays).
    let bare_bar = unsafe { team.bare_launch_for_bench(None, &stream) }.ok();
    // The same calls prepared once (on arrays of their own, which they borrow).
    let src2 = rt.alloc_from(&[1.0f32; 2])?;
    let mut dst2 = rt.alloc_zeroed::<f32>(2)?;
    let prep_ar = team.prepare_all_reduce(&src2, &mut dst2, ReduceOp::Sum)?;
    let prep_bar = team.prepare_barrier()?;
    let own = team.raw();
    // The raw NVSHMEM calls, on a team handle (0 is NVSHMEM_TEAM_WORLD).
    let raw_ar = |handle: nvshmem::sys::nvshmem_team_t| {
        // SAFETY: src and dst are live symmetric arrays of 2 floats; the handle is a live team
        // and the stream the runtime's own.
        let status =
            unsafe { lib.nvshmemx_float_sum_reduce_on_stream(handle, d, s, 2, stream.cu_stream()) };
        anyhow::ensure!(status == 0, "nvshmemx_float_sum_reduce_on_stream: {status}");
        Ok(())
    };
    let raw_bar = |handle: nvshmem::sys::nvshmem_team_t| {
        // SAFETY: as above.
        let status = unsafe { lib.nvshmemx_barrier_on_stream(handle, stream.cu_stream()) };
        anyhow::ensure!(status == 0, "nvshmemx_barrier_on_stream: {status}");
        Ok(())
    };
    // Per-call host times, one per sample, alternating within each sample: ours and raw
    // all-reduce, ours and raw barrier, the bare all-reduce and barrier kernels (0 without, or
    // unless `with_bare`), the prepared ones, and the raw ones on the team's own handle.
    let mut sample_all = |with_bare: bool,
                          prep_ar: &Prepared,
                          prep_bar: &Prepared|
     -> anyhow::Result<[Vec<f64>; 10]> {
        let mut t: [Vec<f64>; 10] = Default::default();
        for sample in 0..SAMPLES + 10 {
            let row = [
                per_call(&stream, || {
                    team.all_reduce(&src, &mut dst, ReduceOp::Sum, &stream)
                        .map_err(Into::into)
                })?,
                per_call(&stream, || raw_ar(0))?,
                per_call(&stream, || team.barrier(&stream).map_err(Into::into))?,
                per_call(&stream, || raw_bar(0))?,
                match bare_ar.as_ref().filter(|_| with_bare) {
                    Some(b) => {
                        // SAFETY: src and dst live until the end of `main`, after the stream is
                        // synchronised, and the team's calls all run on this one stream.
                        per_call(&stream, || unsafe { b.fire(&stream) }.map_err(Into::into))?
                    }
                    None => 0.0,
                },
                match bare_bar.as_ref().filter(|_| with_bare) {
                    Some(b) => {
                        // SAFETY: as the all-reduce's above.
                        per_call(&stream, || unsafe { b.fire(&stream) }.map_err(Into::into))?
                    }
                    None => 0.0,
                },
                per_call(&stream, || prep_ar.start(&stream).map_err(Into::into))?,
                per_call(&stream, || prep_bar.start(&stream).map_err(Into::into))?,
                per_call(&stream, || raw_ar(own))?,
                per_call(&stream, || raw_bar(own))?,
            ];
            if sample >= 10 {
                for (v, x) in t.iter_mut().zip(row) {
                    v.push(x);
                }
            }
        }
        Ok(t)
    };
    let [mut ours, mut raw, mut barrier_ours, mut barrier_raw, mut ar_bare, mut bar_bare, mut ar_prep, mut bar_prep, _, _] =
        sample_all(true, &prep_ar, &prep_bar)?;
    // One PE's own calls (`local`), automatic choice, against the raw calls.
    let mut local = None;
    if one_pe {
        rt.set_algorithm(Collective::AllReduce, None)?;
        rt.set_algorithm(Collective::Barrier, None)?;
        let [l_ar, l_ar_raw, l_bar, l_bar_raw, _, _, _, _, _, _] =
            sample_all(false, &prep_ar, &prep_bar)?;
        local = Some([l_ar, l_ar_raw, l_bar, l_bar_raw]);
    }
    // The algorithm layer's own cost: the same calls forced onto NVSHMEM's algorithm, against
    // the raw calls, alternating as above; and prepared there, what a start on NVSHMEM's path
    // costs once checks, choice and plan are done (what every start must do).
    rt.set_algorithm(Collective::AllReduce, Some("nvshmem"))?;
    rt.set_algorithm(Collective::Barrier, Some("nvshmem"))?;
    drop((prep_ar, prep_bar));
    let prep_ar = team.prepare_all_reduce(&src2, &mut dst2, ReduceOp::Sum)?;
    let prep_bar = team.prepare_barrier()?;
    let [mut f_ar, mut f_ar_world, mut f_bar, mut f_bar_world, _, _, mut f_ar_prep, mut f_bar_prep, mut f_ar_raw, mut f_bar_raw] =
        sample_all(false, &prep_ar, &prep_bar)?;
    rt.set_algorithm(Collective::AllReduce, None)?;
    rt.set_algorithm(Collective::Barrier, None)?;

    // What the driver queries on the path cost alone (the host path makes one of each).
    let driver = |f: &dyn Fn()| {
        let t = Instant::now();
        for _ in 0..10_000 {
            f();
        }
        t.elapsed().as_secs_f64() / 10_000.0 * 1e9
    };
    let cu = stream.cu_stream();
    // SAFETY: `cu` is the runtime's live stream; the out-parameter is a valid local.
    let capturing = driver(&|| unsafe {
        let mut st =
            nvshmem::cudarc::driver::sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE;
        nvshmem::cudarc::driver::sys::cuStreamIsCapturing(cu, &mut st);
    });
    // SAFETY: as above.
    let stream_id = driver(&|| unsafe {
        let mut id = 0;
        nvshmem::cudarc::driver::sys::cuStreamGetId(cu, &mut id);
    });
    // SAFETY: the out-parameter is a valid local.
    let current = driver(&|| unsafe {
        let mut c = std::ptr::null_mut();
        nvshmem::cudarc::driver::sys::cuCtxGetCurrent(&mut c);
    });

    if rt.my_pe() == 0 {
        println!(
            "host time per call, median of {SAMPLES} batches of {BATCH} calls, {} PEs:",
            rt.n_pes()
        );
        if one_pe {
            println!(
                "  (1 PE: forced onto nvlink_ll and nvlink; the automatic choice, local, below)"
            );
        }
        report("all_reduce f32 sum, 2 elements", &mut ours, &mut raw);
        report("barrier", &mut barrier_ours, &mut barrier_raw);
        if bare_ar.is_some() && bare_bar.is_some() {
            println!("against a bare cuLaunchKernel of the same kernel (resolved once):");
            bare("all_reduce f32 sum, 2 elements", &mut ours, &mut ar_bare);
            bare("barrier", &mut barrier_ours, &mut bar_bare);
            println!("prepared once (Team::prepare_*), each start against the bare launch:");
            bare("all_reduce f32 sum, 2 elements", &mut ar_prep, &mut ar_bare);
            bare("barrier", &mut bar_prep, &mut bar_bare);
        }
        println!(
            "forced onto NVSHMEM's algorithm (the algorithm layer's own cost), against raw \
             NVSHMEM on the same team handle:"
        );
        report("all_reduce f32 sum, 2 elements", &mut f_ar, &mut f_ar_raw);
        report("barrier", &mut f_bar, &mut f_bar_raw);
        println!("  prepared there, each start against the same raw NVSHMEM:");
        report(
            "all_reduce f32 sum, 2 elements",
            &mut f_ar_prep,
            &mut f_ar_raw,
        );
        report("barrier", &mut f_bar_prep, &mut f_bar_raw);
        println!("  the same, against raw NVSHMEM on NVSHMEM_TEAM_WORLD:");
        report("all_reduce f32 sum, 2 elements", &mut f_ar, &mut f_ar_world);
        report("barrier", &mut f_bar, &mut f_bar_world);
        if let Some([mut ar, mut ar_raw, mut bar, mut bar_raw]) = local {
            println!("one PE's automatic choice (local: a copy, a quiet):");
            report("all_reduce f32 sum, 2 elements", &mut ar, &mut ar_raw);
            report("barrier", &mut bar, &mut bar_raw);
        }
        println!(
            "driver queries on the path: cuStreamIsCapturing {capturing:.0} ns, cuStreamGetId \
             {stream_id:.0} ns, cuCtxGetCurrent {current:.0} ns"
        );
    }
    drop((prep_ar, prep_bar));
    drop((src2, dst2));
    drop((bare_ar, bare_bar, src, dst, team));
    Ok(())
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn report(what: &str, ours: &mut [f64], raw: &mut [f64]) {
    let (o, r) = (median(ours) * 1e6, median(raw) * 1e6);
    println!(
        "  {what:<32} nvshmem-rs {o:7.3} us   raw nvshmem-sys {r:7.3} us   ratio {:.3}",
        o / r
    );
}

fn bare(what: &str, ours: &mut [f64], bare: &mut [f64]) {
    let (o, b) = (median(ours) * 1e6, median(bare) * 1e6);
    println!(
        "  {what:<32} nvshmem-rs {o:7.3} us   bare cuLaunchKernel {b:7.3} us   ratio {:.3}",
        o / b
    );
}

/// Host seconds per call of a batch of `call`, the stream drained outside the timed region.
/// One untimed call of the same kind, drained, goes first, so that no batch pays for the
/// driver's switch from the other kind of work measured before it.
fn per_call(
    stream: &nvshmem::cudarc::driver::CudaStream,
    mut call: impl FnMut() -> anyhow::Result<()>,
) -> anyhow::Result<f64> {
    call()?;
    stream.synchronize()?;
    let t = Instant::now();
    for _ in 0..BATCH {
        call()?;
    }
    let secs = t.elapsed().as_secs_f64() / BATCH as f64;
    stream.synchronize()?;
    Ok(secs)
}
