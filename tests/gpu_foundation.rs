//! GPU test program for the foundation: runtime, symmetric heap, peer access, cudarc interop,
//! teams and their error paths. Run under a launcher with any number of PEs by
//! `scripts/gpu-check.sh`; skipped (ignored, with the reason) in a plain `cargo test`.
mod common;

use anyhow::{ensure, Context};
use common::{Checks, NEEDS_GPU};
use cudarc::driver::{LaunchConfig, PushKernelArg};
use nvshmem::{Element, Error, Runtime, SymArray};

/// The heap this program asks for, small enough to exhaust quickly.
const HEAP: usize = 64 << 20;

#[test]
#[ignore = "needs NVIDIA GPUs and NVSHMEM: run scripts/gpu-check.sh on a GPU machine"]
fn gpu_foundation() {
    let _ = NEEDS_GPU;
    let session = common::start(Runtime::builder().heap_size(HEAP));
    let rt = session.rt.clone();
    let mut c = Checks::new(rt.my_pe());
    let (me, n) = (rt.my_pe(), rt.n_pes());
    if me == 0 {
        println!(
            "runtime: {n} PEs, bootstrap {}, NVSHMEM {} from {}, heap {} B",
            rt.info().bootstrap,
            rt.info().version,
            rt.info().library.display(),
            rt.info().heap_size
        );
    }
    println!(
        "PE {me}: GPU {} (local rank {})",
        rt.info().device,
        rt.info().local_rank
    );

    c.run("runtime_info", || {
        ensure!(me < n);
        ensure_eq!(rt.info().heap_size, HEAP);
        ensure!(
            rt.info().library.exists(),
            "library path {:?}",
            rt.info().library
        );
        ensure!(rt.info().version.is_compatible_with_bindings());
        let count = cudarc::driver::CudaContext::device_count()? as usize;
        ensure_eq!(rt.info().device, rt.info().local_rank % count);
        Ok(())
    });

    c.run("second_init_is_refused", || match Runtime::init() {
        Err(Error::AlreadyInitialized(_)) => Ok(()),
        other => anyhow::bail!("expected AlreadyInitialized, got {other:?}"),
    });

    c.run("every_type_round_trips", || {
        macro_rules! round_trip {
            ($t:ty) => {
                round_trip::<$t>(&rt, 1001).with_context(|| <$t as Element>::NAME)?;
            };
        }
        nvshmem::for_each_element!(round_trip);
        Ok(())
    });

    c.run("zeroed_and_uninit_and_empty", || {
        let z = rt.alloc_zeroed::<u32>(4097)?;
        ensure!(
            z.to_vec()?.iter().all(|x| *x == 0),
            "alloc_zeroed is not zero"
        );
        // SAFETY: every element is written before any is read.
        let mut u = unsafe { rt.alloc_uninit::<i16>(33)? };
        let data: Vec<i16> = (0..33).map(|i| i * 3 - 40).collect();
        u.copy_from_host(&data)?;
        ensure_eq!(u.to_vec()?, data);
        let e = rt.alloc_zeroed::<f64>(0)?;
        ensure!(e.is_empty() && e.to_vec()?.is_empty());
        ensure!(matches!(e.peer_ptr(0), Ok(None)));
        Ok(())
    });

    c.run("allocation_patterns", || {
        // Many small arrays freed in reverse and interleaved orders, then a large one.
        let before = rt.heap_in_use();
        let mut arrays: Vec<SymArray<u8>> = (1..=64)
            .map(|i| rt.alloc_zeroed(i * 37))
            .collect::<Result<_, _>>()?;
        arrays.truncate(32);
        let more: Vec<SymArray<f32>> = (0..16)
            .map(|i| rt.alloc_from(&vec![i as f32; 1000]))
            .collect::<Result<_, _>>()?;
        for (i, a) in more.iter().enumerate() {
            ensure!(a.to_vec()?.iter().all(|x| *x == i as f32));
        }
        drop(arrays);
        drop(more);
        ensure_eq!(rt.heap_in_use(), before);
        let big = rt.alloc_zeroed::<u8>(HEAP / 2)?;
        ensure_eq!(big.num_bytes(), HEAP / 2);
        Ok(())
    });

    c.run("heap_exhaustion_and_recovery", || {
        match rt.alloc_zeroed::<u8>(HEAP + 1) {
            Err(Error::OutOfHeap {
                requested,
                heap_size,
                ..
            }) => {
                ensure_eq!((requested, heap_size), (HEAP + 1, HEAP));
            }
            other => anyhow::bail!("expected OutOfHeap, got {other:?}"),
        }
        // What the runtime holds itself (the team slot, the NVLink channels) is in use from
        // the start: three quarters of what is left still fit, another half does not.
        let free = HEAP - rt.heap_in_use();
        ensure!(
            free > HEAP * 3 / 4,
            "the runtime holds {} of {HEAP} B",
            rt.heap_in_use()
        );
        let a = rt.alloc_zeroed::<u8>(free * 3 / 4)?;
        ensure!(matches!(
            rt.alloc_zeroed::<u8>(HEAP / 2),
            Err(Error::OutOfHeap { .. })
        ));
        drop(a);
        let b = rt
            .alloc_zeroed::<u8>(HEAP / 2)
            .context("allocating after freeing")?;
        ensure_eq!(b.len(), HEAP / 2);
        // Overflowing byte counts are refused before NVSHMEM sees them.
        ensure!(matches!(
            rt.alloc_zeroed::<u64>(usize::MAX / 4),
            Err(Error::InvalidArgument { .. })
        ));
        Ok(())
    });

    c.run("views_keep_symmetric_addresses", || {
        let a = rt.alloc_from(&(0..100u32).collect::<Vec<_>>())?;
        let v = a.view(10..20)?;
        ensure_eq!(nvshmem::SymBuffer::sym_ptr(&v), a.device_ptr_raw() + 40);
        // cudarc's own copy functions take a view directly.
        let mut host = vec![0u32; 10];
        rt.stream().memcpy_dtoh(&v, &mut host)?;
        rt.stream().synchronize()?;
        ensure_eq!(host, (10..20).collect::<Vec<_>>());
        ensure!(matches!(
            a.view(90..101),
            Err(Error::InvalidArgument { .. })
        ));
        ensure!(matches!(a.view(..=100), Err(Error::InvalidArgument { .. })));
        Ok(())
    });

    c.run("kernel_arguments", || {
        let ptx = cudarc::nvrtc::compile_ptx(
            "extern \"C\" __global__ void fill(float* a, float v, unsigned n) {
                unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
                if (i < n) a[i] = v + i;
            }",
        )?;
        let module = rt.context().load_module(ptx)?;
        let fill = module.load_function("fill")?;
        let mut a = rt.alloc_zeroed::<f32>(5000)?;
        let mut v = a.view_mut(1000..2000)?;
        let (val, n) = (7.0f32, 1000u32);
        let stream = rt.stream();
        let mut launch = stream.launch_builder(&fill);
        launch.arg(&mut v).arg(&val).arg(&n);
        // SAFETY: fill writes n floats from the view's start, which has exactly n elements.
        unsafe { launch.launch(LaunchConfig::for_num_elems(n)) }?;
        stream.synchronize()?;
        let host = a.to_vec()?;
        ensure!(host[..1000].iter().all(|x| *x == 0.0) && host[2000..].iter().all(|x| *x == 0.0));
        ensure!(
            (0..1000).all(|i| host[1000 + i] == 7.0 + i as f32),
            "kernel output wrong"
        );
        Ok(())
    });

    c.run("peer_pointers_and_neighbour_write", || {
        let mut a = rt.alloc_zeroed::<u64>(16)?;
        ensure_eq!(a.peer_ptr(me)?, Some(a.device_ptr_raw()));
        for pe in 0..n {
            ensure!(
                a.peer_ptr(pe)?.is_some(),
                "PE {pe} is not peer-accessible from PE {me}"
            );
        }
        ensure!(matches!(a.peer_ptr(n), Err(Error::InvalidArgument { .. })));
        // Write my PE number into my right neighbour's array through its peer pointer.
        let right = (me + 1) % n;
        let mine = vec![1000 + me as u64; 16];
        let staging = rt.alloc_from(&mine)?;
        let dst = a.peer_ptr(right)?.unwrap();
        let stream = rt.stream();
        // SAFETY: dst is the right neighbour's copy of `a` (16 u64), mapped into this context
        // by NVSHMEM; staging holds 16 u64 on this PE.
        unsafe {
            cudarc::driver::result::memcpy_dtod_async(
                dst,
                staging.device_ptr_raw(),
                128,
                stream.cu_stream(),
            )?;
        }
        barrier_all(&rt)?;
        let left = (me + n - 1) % n;
        ensure_eq!(a.to_vec()?, vec![1000 + left as u64; 16]);
        a.copy_from_host(&[0; 16])?;
        Ok(())
    });

    c.run("finalize_while_in_use_is_refused", || {
        let held = rt.alloc_zeroed::<u8>(8)?;
        match rt.clone().finalize() {
            Err(Error::RuntimeInUse(k)) => ensure!(k >= 2, "counted {k} other handles"),
            other => anyhow::bail!("expected RuntimeInUse, got {other:?}"),
        }
        drop(held);
        Ok(())
    });

    teams(&rt, &mut c);

    drop(rt);
    c.finish("gpu_foundation");
    session.end();
    // NVSHMEM is started at most once per process.
    assert!(matches!(Runtime::init(), Err(Error::AlreadyInitialized(_))));
}

fn round_trip<T: Element>(rt: &Runtime, len: usize) -> anyhow::Result<()> {
    let data: Vec<T> = (0..len)
        .map(|i| T::from_f64(((i * 7 + rt.my_pe()) % 100) as f64))
        .collect();
    let a = rt.alloc_from(&data)?;
    ensure_eq!(a.len(), len);
    ensure_eq!(a.num_bytes(), len * std::mem::size_of::<T>());
    ensure!(
        a.to_vec()? == data,
        "{} data changed on the round trip",
        T::NAME
    );
    let mut wrong_len = vec![T::default(); len - 1];
    ensure!(matches!(
        a.copy_to_host(&mut wrong_len),
        Err(Error::InvalidArgument { .. })
    ));
    Ok(())
}

fn barrier_all(rt: &Runtime) -> anyhow::Result<()> {
    let lib = nvshmem::sys::lib()?;
    // SAFETY: NVSHMEM is initialised and the stream belongs to its context.
    unsafe { lib.nvshmemx_barrier_all_on_stream(rt.stream().cu_stream()) };
    rt.stream().synchronize()?;
    Ok(())
}

fn teams(rt: &Runtime, c: &mut Checks) {
    let (me, n) = (rt.my_pe(), rt.n_pes());
    let stream = rt.stream().clone();
    c.run("predefined_teams", || {
        let world = rt.world();
        ensure_eq!((world.n_pes(), world.my_pe()), (n, me));
        ensure_eq!(rt.shared().n_pes(), n);
        ensure_eq!(rt.node().n_pes(), n);
        Ok(())
    });
    // Every split below is collective over the world team and made with the same arguments
    // on every PE, so refusals happen on every PE alike.
    c.run("split_strided", || {
        let world = rt.world();
        let evens = world.split_strided(0, 2, n.div_ceil(2))?;
        ensure_eq!(evens.is_some(), me % 2 == 0);
        if let Some(t) = &evens {
            ensure_eq!((t.n_pes(), t.my_pe()), (n.div_ceil(2), me / 2));
            for k in 0..t.n_pes() {
                ensure_eq!(t.translate_pe(k, &world)?, Some(2 * k));
            }
            t.barrier(&stream)?;
        }
        let last = world.split_strided(n - 1, 1, 1)?;
        ensure_eq!(
            last.as_ref().map(|t| (t.n_pes(), t.my_pe())),
            (me == n - 1).then_some((1, 0))
        );
        stream.synchronize()?;
        Ok(())
    });
    c.run("split_2d", || {
        let world = rt.world();
        let xr = 2.min(n);
        let (x, y) = world.split_2d(2)?;
        let (x, y) = (
            x.context("every PE is in an x team")?,
            y.context("every PE is in a y team")?,
        );
        ensure_eq!(x.my_pe(), me % xr);
        ensure_eq!(x.n_pes(), xr.min(n - (me / xr) * xr));
        ensure_eq!(y.my_pe(), me / xr);
        ensure_eq!(y.n_pes(), (0..n).filter(|p| p % xr == me % xr).count());
        // An xrange beyond the team is clamped, as NVSHMEM does: one x team of everyone.
        let (wide, _) = world.split_2d(n + 5)?;
        ensure_eq!(wide.map(|t| t.n_pes()), Some(n));
        Ok(())
    });
    c.run("from_pes", || {
        let world = rt.world();
        let reversed: Vec<usize> = (0..n).rev().collect();
        // Not an increasing progression for n > 1: made through NVSHMEM's team unique id.
        let rev = world.from_pes(&reversed)?.context("every PE is listed")?;
        ensure_eq!((rev.n_pes(), rev.my_pe()), (n, n - 1 - me));
        ensure_eq!(world.translate_pe(me, &rev)?, Some(n - 1 - me));
        ensure_eq!(rev.translate_pe(0, &world)?, Some(n - 1));
        rev.barrier(&stream)?;
        // Twice in a row, and from a parent that is itself a split team.
        let again = rev
            .from_pes(&(0..n).rev().collect::<Vec<_>>())?
            .context("listed")?;
        ensure_eq!(again.translate_pe(0, &world)?, Some(0));
        let one = world.from_pes(&[n - 1])?;
        ensure_eq!(one.map(|t| t.n_pes()), (me == n - 1).then_some(1));
        stream.synchronize()?;
        Ok(())
    });
    c.run("team_errors_are_typed_and_symmetric", || {
        let world = rt.world();
        let refused = |r: nvshmem::Result<Option<nvshmem::Team>>, what: &str| match r {
            Err(Error::InvalidArgument { .. }) => Ok(()),
            other => anyhow::bail!("{what}: expected InvalidArgument, got {other:?}"),
        };
        refused(world.split_strided(0, 0, 1), "stride 0")?;
        refused(world.split_strided(0, 1, 0), "size 0")?;
        refused(world.split_strided(0, 1, n + 1), "past the last PE")?;
        refused(world.split_strided(n, 1, 1), "start out of range")?;
        refused(world.from_pes(&[]), "empty list")?;
        refused(world.from_pes(&[0, 0]), "duplicate PE")?;
        refused(world.from_pes(&[n]), "PE outside the parent")?;
        ensure!(
            matches!(world.split_2d(0), Err(Error::InvalidArgument { .. })),
            "xrange 0"
        );
        ensure!(
            matches!(
                world.translate_pe(n, &world),
                Err(Error::InvalidArgument { .. })
            ),
            "translate out of range"
        );
        // The job is healthy afterwards.
        world.barrier(&stream)?;
        stream.synchronize()?;
        Ok(())
    });
}
