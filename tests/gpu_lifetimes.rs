//! GPU checks that nothing is freed under the GPU and that no PE waits without bound: one check
//! per hole a review found (issue 21), each written so that it fails where the hole is open.
//! Run by `scripts/gpu-check.sh` under a launcher with any number of PEs; skipped (ignored,
//! with the reason) in a plain `cargo test`.
//!
//! `GPU_LIFETIMES_CASE=opposite_orders` runs instead the one case that may end the runtime (two
//! teams whose first large calls come in opposite orders on the PEs): it must complete right,
//! or end with a typed error within the timeout, never hang.
mod common;

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use anyhow::{bail, ensure, Context as _};
use common::Checks;
use cudarc::driver::{CudaFunction, CudaStream, LaunchConfig, PushKernelArg};
use nvshmem::{
    collective::Collective,
    prelude::{Cmp, SignalArray, SignalOp},
    Error, ReduceOp, Runtime,
};

#[test]
#[ignore = "needs NVIDIA GPUs and NVSHMEM: run scripts/gpu-check.sh on a GPU machine"]
fn gpu_lifetimes() {
    let session = common::start(Runtime::builder().heap_size(1 << 30));
    let rt = session.rt.clone();
    let me = rt.my_pe();
    common::start_watchdog(me, Duration::from_secs(30));
    let spin = spin_kernel(&rt).expect("the spin kernel compiles");
    let mut c = Checks::new(me);
    if std::env::var("GPU_LIFETIMES_CASE").as_deref() == Ok("opposite_orders") {
        c.run("opposite_orders_end_right_or_with_an_error", || {
            opposite_orders(&rt)
        });
        c.finish("gpu_lifetimes");
        return;
    }
    c.run(
        "host_copies_with_page_locked_memory_are_done_when_they_return",
        || page_locked_copies(&rt, &spin),
    );
    c.run("a_graph_keeps_what_it_captured_alive", || graph_keeps(&rt));
    c.run(
        "a_graph_of_cudarc_copies_keeps_its_arrays_until_its_launches_are_done",
        || graph_of_cudarc_copies(&rt, &spin),
    );
    c.run("a_capture_this_crate_did_not_start_is_refused", || {
        foreign_capture(&rt)
    });
    c.run("an_allocation_never_waits_for_the_device", || {
        allocation_does_not_sync(&rt)
    });
    c.run("a_drop_never_waits_for_an_allocation", || {
        drop_does_not_wait(&rt)
    });
    c.run("drops_at_different_moments_keep_the_heaps_in_step", || {
        heaps_in_step(&rt)
    });
    c.run("a_full_heap_is_refused_alike_whatever_was_dropped", || {
        full_heap_alike(&rt)
    });
    c.run(
        "a_dropped_teams_channel_is_reused_only_after_its_work",
        || channel_reuse(&rt, &spin),
    );
    c.run("stream_churn_keeps_the_nvlink_kernels", || {
        stream_churn(&rt)
    });
    c.run("allocations_out_of_step_are_refused_alike", || {
        out_of_step(&rt)
    });
    c.run(
        "allocations_beside_nvshmem_world_collectives_in_flight",
        || alloc_beside_world_collectives(&rt),
    );
    drop(spin);
    c.finish("gpu_lifetimes");
    drop(rt);
    session.end();
}

/// A kernel that spins for `ns` nanoseconds: it keeps a stream busy, so that work queued after
/// it is still pending when the host looks.
fn spin_kernel(rt: &Runtime) -> anyhow::Result<CudaFunction> {
    let ptx = cudarc::nvrtc::compile_ptx(
        r#"
extern "C" __global__ void spin(unsigned long long ns) {
    unsigned long long t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); } while (t - t0 < ns);
}"#,
    )?;
    Ok(rt.context().load_module(ptx)?.load_function("spin")?)
}

fn spin(f: &CudaFunction, stream: &Arc<CudaStream>, d: Duration) -> anyhow::Result<()> {
    let ns = d.as_nanos() as u64;
    let cfg = LaunchConfig {
        grid_dim: (1, 1, 1),
        block_dim: (1, 1, 1),
        shared_mem_bytes: 0,
    };
    // SAFETY: the kernel takes one u64 and touches no memory.
    unsafe { stream.launch_builder(f).arg(&ns).launch(cfg) }?;
    Ok(())
}

/// Hole 1: a copy to or from page-locked host memory ran after the borrow of the host slice
/// had ended. Behind a spinning kernel, an asynchronous copy is still pending when the call
/// returns: the data must be there (download) and the source free to reuse (upload).
fn page_locked_copies(rt: &Runtime, f: &CudaFunction) -> anyhow::Result<()> {
    const N: usize = 1 << 16;
    let stream = rt.context().new_stream()?;
    let mut a = rt.alloc_from(&vec![7u32; N])?;
    // SAFETY: the pinned buffer is written before it is read.
    let mut pinned = unsafe { rt.context().alloc_pinned::<u32>(N) }?;
    let host = pinned.as_mut_slice()?;
    host.fill(1);
    spin(f, &stream, Duration::from_millis(300))?;
    a.copy_to_host_on(host, &stream)?;
    ensure!(
        host.iter().all(|&x| x == 7),
        "the download into page-locked memory was not done when copy_to_host_on returned"
    );
    host.fill(42);
    spin(f, &stream, Duration::from_millis(300))?;
    a.copy_from_host_on(host, &stream)?;
    host.fill(0);
    stream.synchronize()?;
    ensure!(
        a.to_vec()?.iter().all(|&x| x == 42),
        "the upload from page-locked memory read the buffer after copy_from_host_on returned"
    );
    Ok(())
}

/// Hole 2: a graph replayed after the arrays it captured were dropped wrote freed memory.
/// The arrays are dropped, new ones of the same size fill the heap with a sentinel, and the
/// graph is launched: the new arrays must keep their sentinel.
fn graph_keeps(rt: &Runtime) -> anyhow::Result<()> {
    const N: usize = 4096;
    let stream = rt.context().new_stream()?;
    let world = rt.world();
    let src = rt.alloc_from(&vec![1.0f32; N])?;
    let mut dst = rt.alloc_zeroed::<f32>(N)?;
    world.all_reduce(&src, &mut dst, ReduceOp::Sum, &stream)?;
    stream.synchronize()?;
    let graph = rt.capture(&stream, |s| {
        world.all_reduce(&src, &mut dst, ReduceOp::Sum, s)
    })?;
    let retired_before = rt.heap_usage().retired;
    drop((src, dst));
    // The graph holds them: not even retired yet.
    ensure!(
        rt.heap_usage().retired == retired_before,
        "the captured arrays were retired while the graph holds them"
    );
    // Allocations now would reuse the arrays' memory if it were freed.
    let others = sentinel_arrays(rt, N)?;
    for _ in 0..3 {
        graph.launch()?;
    }
    stream.synchronize()?;
    still_sentinel(&others, "after the captured ones were dropped", "the graph")?;
    drop(graph);
    ensure!(
        rt.heap_usage().retired == retired_before + 2 * N * 4,
        "the captured arrays are retired once the graph is dropped"
    );
    stream.synchronize()?;
    // Now the arrays can go: every PE dropped them and the graph's launches are done.
    rt.free_retired()?;
    Ok(())
}

/// A graph of cudarc's own work on an array (a memset through `DevicePtrMut`), launched
/// behind a spinning kernel, then dropped with the array: the memory must not be handed to
/// new arrays while the launch is still queued. (The graph kept the array but had not noted
/// its stream, so the array's drop found no work to wait for and the memory was reused.)
fn graph_of_cudarc_copies(rt: &Runtime, f: &CudaFunction) -> anyhow::Result<()> {
    const N: usize = 1 << 20;
    let stream = rt.context().new_stream()?;
    let mut a = rt.alloc_from(&vec![1.0f32; N])?;
    let graph = rt.capture(&stream, |s| -> anyhow::Result<()> {
        s.memset_zeros(&mut a)?;
        Ok(())
    })?;
    spin(f, &stream, Duration::from_millis(300))?;
    graph.launch()?;
    drop(graph);
    drop(a);
    let others = sentinel_arrays(rt, N)?;
    stream.synchronize()?;
    still_sentinel(
        &others,
        "after the graph and its array were dropped",
        "the graph's memset",
    )?;
    rt.free_retired()?;
    Ok(())
}

/// The sentinel the arrays allocated after a drop are filled with.
const SENTINEL: f32 = -3.0;

/// 16 new arrays of `n` [`SENTINEL`]s: where freed memory is handed out too early, they take
/// it, and what the GPU still writes there shows in them.
fn sentinel_arrays(rt: &Runtime, n: usize) -> anyhow::Result<Vec<nvshmem::SymArray<f32>>> {
    Ok((0..16)
        .map(|_| rt.alloc_from(&vec![SENTINEL; n]))
        .collect::<nvshmem::Result<_>>()?)
}

/// Fails naming the first element of `arrays` (allocated `when`) that is no longer the
/// sentinel, as written by `writer`.
fn still_sentinel(
    arrays: &[nvshmem::SymArray<f32>],
    when: &str,
    writer: &str,
) -> anyhow::Result<()> {
    for (k, o) in arrays.iter().enumerate() {
        let v = o.to_vec()?;
        if let Some(i) = v.iter().position(|&x| x != SENTINEL) {
            bail!(
                "array {k} allocated {when}: element {i} is {}, written by {writer}",
                v[i]
            );
        }
    }
    Ok(())
}

/// A call queued while a capture this crate did not start holds the stream is refused (its
/// graph could outlive what the call uses).
fn foreign_capture(rt: &Runtime) -> anyhow::Result<()> {
    let stream = rt.context().new_stream()?;
    let world = rt.world();
    world.barrier(&stream)?;
    stream.synchronize()?;
    stream.begin_capture(
        cudarc::driver::sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL,
    )?;
    let got = world.barrier(&stream);
    let _ = stream.end_capture(cudarc::driver::sys::CUgraphInstantiate_flags(0));
    match got {
        Err(Error::CaptureNotTracked { .. }) => Ok(()),
        other => bail!("expected CaptureNotTracked, got {other:?}"),
    }
}

/// Hole 6: an allocation after a drop synchronised the whole device. With this PE's stream
/// waiting for a signal that the next PE sends only after its own allocation, that wait never
/// ended. Now the allocation never waits for the device.
fn allocation_does_not_sync(rt: &Runtime) -> anyhow::Result<()> {
    let (me, n) = (rt.my_pe(), rt.n_pes());
    let stream = rt.context().new_stream()?;
    let flags = rt.alloc_zeroed::<u64>(1)?;
    let doomed = rt.alloc_zeroed::<f32>(1024)?;
    rt.barrier_all(rt.stream())?;
    rt.stream().synchronize()?;
    // The stream now waits for the previous PE's signal.
    rt.signal_wait_until(flags.signal(0)?, Cmp::Ge, 1, &stream)?;
    drop(doomed);
    let t0 = Instant::now();
    let fresh = rt.alloc_zeroed::<f32>(1024)?;
    let took = t0.elapsed();
    // After its allocation, each PE signals the next.
    rt.signal_op(
        flags.signal(0)?,
        SignalOp::Set(1),
        (me + 1) % n,
        rt.stream(),
    )?;
    rt.stream().synchronize()?;
    stream.synchronize()?;
    ensure!(
        took < Duration::from_secs(10),
        "the allocation took {took:?}"
    );
    drop(fresh);
    Ok(())
}

/// Hole 6 (second half): a drop on one thread blocked while another thread allocated. Here
/// the next PE joins the allocation a second late; meanwhile another thread drops arrays.
fn drop_does_not_wait(rt: &Runtime) -> anyhow::Result<()> {
    let me = rt.my_pe();
    let arrays: Vec<_> = (0..8)
        .map(|_| rt.alloc_zeroed::<u8>(4096))
        .collect::<nvshmem::Result<_>>()?;
    rt.barrier_all(rt.stream())?;
    rt.stream().synchronize()?;
    let dropped_in = std::thread::scope(|s| -> anyhow::Result<Duration> {
        let allocating = s.spawn(|| {
            if me % 2 == 1 {
                std::thread::sleep(Duration::from_secs(1));
            }
            rt.alloc_zeroed::<u8>(4096)
        });
        std::thread::sleep(Duration::from_millis(200));
        let t0 = Instant::now();
        drop(arrays);
        let took = t0.elapsed();
        allocating
            .join()
            .map_err(|_| anyhow::anyhow!("the allocating thread panicked"))??;
        Ok(took)
    })?;
    ensure!(
        dropped_in < Duration::from_millis(100),
        "dropping 8 arrays took {dropped_in:?} while another thread allocated"
    );
    Ok(())
}

/// NVSHMEM's `nvshmem_malloc` and `nvshmem_free` end with a barrier over
/// `NVSHMEM_TEAM_WORLD` on NVSHMEM's own stream. While the world team of this crate was that
/// team, an allocation right after queuing a world collective on NVSHMEM's path ran that
/// barrier beside the collective, on the same team's sync counters: at 3, 4 and 8 PEs on one
/// GPU the sums came out wrong (one member's part twice or missing) or the PEs hung. Here
/// every round queues world all-reduces and barriers forced onto NVSHMEM's path on a side
/// stream, then at once drops the input and allocates (a malloc, and the free of what the
/// previous round dropped), and checks every sum. Where PEs share a GPU this crate refuses
/// NVSHMEM's reductions (alike on every PE, queuing nothing), so there NVSHMEM's fcollect
/// stands in for the all-reduce: the same world sync counters, and every block checked.
fn alloc_beside_world_collectives(rt: &Runtime) -> anyhow::Result<()> {
    rt.set_algorithm(Collective::AllReduce, Some("nvshmem"))?;
    rt.set_algorithm(Collective::Fcollect, Some("nvshmem"))?;
    rt.set_algorithm(Collective::Barrier, Some("nvshmem"))?;
    let result = world_collectives_beside_allocations(rt);
    for c in [
        Collective::AllReduce,
        Collective::Fcollect,
        Collective::Barrier,
    ] {
        rt.set_algorithm(c, None)?;
    }
    result
}

fn world_collectives_beside_allocations(rt: &Runtime) -> anyhow::Result<()> {
    const LEN: usize = 1 << 22; // 16 MiB of f32
    const ROUNDS: usize = 12;
    let (me, n) = (rt.my_pe(), rt.n_pes());
    let world = rt.world();
    let side = rt.context().new_stream()?;
    let one = rt.alloc_from(&[1.0f32])?;
    let mut sum = rt.alloc_zeroed::<f32>(1)?;
    let reduce = match world.all_reduce(&one, &mut sum, ReduceOp::Sum, &side) {
        Ok(()) => true,
        Err(Error::AlgorithmRefused { reason, .. }) if reason.contains("share a GPU") => false,
        Err(e) => return Err(e.into()),
    };
    // The fcollect's whole output is as large as the all-reduce's.
    let len = if reduce { LEN } else { LEN / n };
    let want: Vec<f32> = if reduce {
        vec![(n * (n + 1) / 2) as f32; LEN]
    } else {
        (0..n).flat_map(|j| vec![(j + 1) as f32; len]).collect()
    };
    for round in 0..ROUNDS {
        let src = rt.alloc_from(&vec![(me + 1) as f32; len])?;
        let mut dst = rt.alloc_zeroed::<f32>(want.len())?;
        for i in 0..2 {
            if reduce {
                world.all_reduce(&src, &mut dst, ReduceOp::Sum, &side)?;
            } else {
                world.fcollect(&src, &mut dst, &side)?;
            }
            if i == 0 {
                world.barrier(&side)?;
            }
        }
        drop(src);
        let extra = rt.alloc_zeroed::<u8>(4096 * (round + 1))?;
        side.synchronize()?;
        let got = dst.to_vec()?;
        if let Some(i) = (0..got.len()).find(|&i| got[i] != want[i]) {
            bail!(
                "round {round}: element {i} is {}, expected {}",
                got[i],
                want[i]
            );
        }
        drop(extra);
    }
    Ok(())
}

/// Hole 8: a drop that landed before an allocation on one PE and after it on another gave
/// the PEs different addresses for the new array. Odd PEs drop after they allocate; a ring of
/// puts into the new array then checks that it is one symmetric object.
fn heaps_in_step(rt: &Runtime) -> anyhow::Result<()> {
    let (me, n) = (rt.my_pe(), rt.n_pes());
    let stream = rt.stream().clone();
    for round in 0..4u32 {
        let old = rt.alloc_zeroed::<u32>(4096)?;
        let old = if me % 2 == 0 {
            drop(old);
            None
        } else {
            Some(old)
        };
        let mut fresh = rt.alloc_zeroed::<u32>(4096)?;
        drop(old);
        let mine = rt.alloc_from(&vec![me as u32 * 100 + round; 4096])?;
        rt.barrier_all(&stream)?;
        rt.put(&mine, &mut fresh, (me + 1) % n, &stream)?;
        rt.barrier_all(&stream)?;
        stream.synchronize()?;
        let want = ((me + n - 1) % n) as u32 * 100 + round;
        let got = fresh.to_vec()?;
        if let Some(i) = got.iter().position(|&x| x != want) {
            bail!("round {round}: element {i} is {}, expected {want}", got[i]);
        }
    }
    Ok(())
}

/// Every PE allocates 55 % of the heap's free room; every other PE drops it at once, the rest
/// keep it; then every PE asks for 55 % again. NVSHMEM still holds the first everywhere (on
/// two PEs or more), so every PE must be refused (`OutOfHeap`) alike; a PE that judged by its own arrays found room,
/// entered NVSHMEM's collective malloc alone and waited there for ever. Once every PE has
/// dropped it, the same allocation succeeds everywhere.
fn full_heap_alike(rt: &Runtime) -> anyhow::Result<()> {
    let me = rt.my_pe();
    let stream = rt.stream().clone();
    rt.barrier_all(&stream)?;
    stream.synchronize()?;
    rt.free_retired()?;
    let u = rt.heap_usage();
    let room = u.heap_size - u.in_use - u.retired;
    let big = room / 100 * 55;
    let first = rt.alloc_zeroed::<u8>(big)?;
    let first = if me.is_multiple_of(2) {
        drop(first);
        None
    } else {
        Some(first)
    };
    // With one PE every PE has dropped it: freed at this allocation's agreement, room.
    match (rt.alloc_zeroed::<u8>(big), rt.n_pes()) {
        (Err(Error::OutOfHeap { .. }), 2..) => {}
        (Ok(_), 1) => {}
        (other, n) => bail!(
            "PE {me} of {n} (dropped its first: {}): expected {}, got {:?}",
            first.is_none(),
            if n == 1 { "room" } else { "OutOfHeap" },
            other.map(|a| a.len())
        ),
    }
    drop(first);
    // Its zeroing done everywhere, so that every PE offers it at the next agreement.
    rt.context().synchronize()?;
    rt.barrier_all(&stream)?;
    stream.synchronize()?;
    let second = rt.alloc_zeroed::<u8>(big)?;
    ensure!(second.len() == big);
    Ok(())
}

/// Hole 5: a dropped team's channel, handed to a new team while a late kernel of the old one
/// could still store into it. Rooted calls (a gather whose non-roots end before the root's
/// arrival lands) run on a team whose root is held back by a spinning kernel; the team is
/// dropped at once and a new one made, whose calls are checked.
fn channel_reuse(rt: &Runtime, f: &CudaFunction) -> anyhow::Result<()> {
    let (me, n) = (rt.my_pe(), rt.n_pes());
    let world = rt.world();
    let stream = rt.context().new_stream()?;
    let src = rt.alloc_from(&[me as u64 + 1; 64])?;
    let mut dst = rt.alloc_zeroed::<u64>(64 * n)?;
    let mut sum = rt.alloc_zeroed::<u64>(64)?;
    for round in 0..12 {
        let team = world
            .split_strided(0, 1, n)?
            .context("every PE is in a copy of the world")?;
        if me == round % n {
            spin(f, &stream, Duration::from_millis(50))?;
        }
        for _ in 0..4 {
            team.gather(round % n, &src, &mut dst, &stream)?;
        }
        drop(team);
        let team = world
            .split_strided(0, 1, n)?
            .context("every PE is in a copy of the world")?;
        for _ in 0..4 {
            team.all_reduce(&src, &mut sum, ReduceOp::Sum, &stream)?;
        }
        stream.synchronize()?;
        let want = (n * (n + 1) / 2) as u64;
        let got = sum.to_vec()?;
        ensure!(
            got.iter().all(|&x| x == want),
            "round {round}: all_reduce on the new team gave {}, expected {want}",
            got[0]
        );
    }
    rt.async_error()?;
    Ok(())
}

/// Hole 9: channels bound to streams that were destroyed were never released, so stream churn
/// exhausted the pool and the NVLink kernels fell back to NVSHMEM's path without a word. Now
/// a team keeps its channel whatever streams it is used on: with nvlink_ll forced, every call
/// on a fresh stream runs it.
fn stream_churn(rt: &Runtime) -> anyhow::Result<()> {
    let n = rt.n_pes();
    let world = rt.world();
    if !world.has_nvlink_kernels() {
        println!("stream churn: the world team has no NVLink kernels here (not peer-mapped)");
        return Ok(());
    }
    let src = rt.alloc_from(&[1.0f32; 256])?;
    let mut dst = rt.alloc_zeroed::<f32>(256)?;
    rt.set_algorithm(Collective::AllReduce, Some("nvlink_ll"))?;
    let result = (|| -> anyhow::Result<()> {
        for round in 0..100 {
            let stream = rt.context().new_stream()?;
            world
                .all_reduce(&src, &mut dst, ReduceOp::Sum, &stream)
                .with_context(|| format!("round {round}"))?;
            stream.synchronize()?;
        }
        Ok(())
    })();
    rt.set_algorithm(Collective::AllReduce, None)?;
    result?;
    ensure!(dst.to_vec()?.iter().all(|&x| x == n as f32));
    Ok(())
}

/// Allocations of different sizes at the same point are refused on every PE alike, naming
/// the PE, and the runtime goes on.
fn out_of_step(rt: &Runtime) -> anyhow::Result<()> {
    if rt.n_pes() < 2 {
        return Ok(());
    }
    let len = 1000 + rt.my_pe();
    match rt.alloc_zeroed::<u8>(len) {
        Err(Error::OutOfStep { detail, .. }) => {
            ensure!(detail.contains("PE"), "{detail}");
        }
        other => bail!("expected OutOfStep, got {other:?}"),
    }
    // The same size again: fine.
    let a = rt.alloc_zeroed::<u8>(1000)?;
    drop(a);
    rt.async_error()?;
    Ok(())
}

/// Issue 20: two teams over the same PEs whose first large calls are issued on two streams
/// in opposite orders on alternate PEs. Their kernels may wait for each other's blocks; the
/// calls must complete right, or end with a typed error within the timeout, never hang.
fn opposite_orders(rt: &Runtime) -> anyhow::Result<()> {
    let (me, n) = (rt.my_pe(), rt.n_pes());
    let world = rt.world();
    let a = world.split_strided(0, 1, n)?.context("team a")?;
    let b = world.split_strided(0, 1, n)?.context("team b")?;
    const N: usize = 2 << 20; // 8 MiB of f32
    let src = rt.alloc_from(&vec![1.0f32; N])?;
    let (mut da, mut db) = (rt.alloc_zeroed::<f32>(N)?, rt.alloc_zeroed::<f32>(N)?);
    let (sa, sb) = (rt.context().new_stream()?, rt.context().new_stream()?);
    let t0 = Instant::now();
    let queued = if me % 2 == 0 {
        a.all_reduce(&src, &mut da, ReduceOp::Sum, &sa)
            .and_then(|()| b.all_reduce(&src, &mut db, ReduceOp::Sum, &sb))
    } else {
        b.all_reduce(&src, &mut db, ReduceOp::Sum, &sb)
            .and_then(|()| a.all_reduce(&src, &mut da, ReduceOp::Sum, &sa))
    };
    let done = queued.map_err(anyhow::Error::from).and_then(|()| {
        sa.synchronize()?;
        sb.synchronize()?;
        Ok(())
    });
    let limit = rt.timeout().unwrap_or(Duration::MAX);
    match (done, rt.async_error()) {
        (Err(e), Ok(())) => bail!("{e:#}"),
        (Ok(()), Ok(())) => {
            for (name, d) in [("a", &da), ("b", &db)] {
                ensure!(
                    d.to_vec()?.iter().all(|&x| x == n as f32),
                    "team {name}'s all_reduce is wrong"
                );
            }
            println!("opposite orders: completed right in {:?}", t0.elapsed());
            Ok(())
        }
        (_, Err(e)) => {
            ensure!(
                t0.elapsed() < limit + Duration::from_secs(10),
                "the error came after {:?}",
                t0.elapsed()
            );
            println!(
                "opposite orders: ended with an error after {:?}: {e}",
                t0.elapsed()
            );
            // A PE's own wait ends it (CollectiveFailed), or a peer whose wait ended first
            // has exited by the time this PE looks (PeerFailed: 4 PEs under MPS, 2026-11-27,
            // PE 1 saw PE 0 gone 0.05 s after PE 0's timeout). Both are the typed end asked
            // for; anything else is not.
            let typed = matches!(e, Error::CollectiveFailed { .. } | Error::PeerFailed { .. });
            std::process::exit(if typed { 0 } else { 3 });
        }
    }
}
