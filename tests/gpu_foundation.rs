//! GPU test program for the foundation: runtime, symmetric heap, peer access, cudarc interop,
//! teams and their error paths. Run under a launcher with any number of PEs by
//! `scripts/gpu-check.sh`; skipped (ignored, with the reason) in a plain `cargo test`.
mod common;

use anyhow::{ensure, Context};
use common::{Checks, NEEDS_GPU};
use cudarc::driver::{LaunchConfig, PushKernelArg};
use nvshmem::{rma::SignalOp, Element, Error, ReduceOp, Runtime, SymArray, Team};

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

    c.run("registered_memory_put_and_get", || registered(&rt));
    c.run("a_module_not_linked_with_nvshmem_is_refused", || {
        unlinked_module(&rt)
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

/// Puts from and gets into the program's own cudarc memory, registered with NVSHMEM, opposite
/// symmetric arrays on the neighbours; each result checked against the host.
fn registered(rt: &Runtime) -> anyhow::Result<()> {
    use nvshmem::rma::{Cmp, SignalArray};
    const LEN: usize = 4096;
    let (me, n) = (rt.my_pe(), rt.n_pes());
    let (left, right) = ((me + n - 1) % n, (me + 1) % n);
    let data =
        |pe: usize| -> Vec<u32> { (0..LEN as u32).map(|i| pe as u32 * 100_000 + i).collect() };
    let stream = rt.stream().clone();
    // Symmetric arrays first, alike on every PE (allocation is collective).
    let mut inbox = rt.alloc_zeroed::<u32>(LEN)?;
    let mut signalled = rt.alloc_zeroed::<u32>(LEN)?;
    let flags = rt.alloc_zeroed::<u64>(1)?;
    let exposed = rt.alloc_from(&data(me))?;
    barrier_all(rt)?;

    // Put: my own memory, written on another stream of the context (cudarc orders the put on
    // `stream` after that write), into the right neighbour's inbox.
    let other = rt.context().new_stream()?;
    let mut own = other.clone_htod(&data(me))?;
    let registered = rt.register(&mut own)?;
    ensure_eq!(registered.len(), LEN);
    rt.put(&registered, &mut inbox, right, &stream)?;
    // And the same with a signal, waited for on the stream.
    rt.put_with_signal(
        &registered,
        &mut signalled,
        flags.signal(0)?,
        SignalOp::Set(1),
        right,
        &stream,
    )?;
    rt.signal_wait_until(flags.signal(0)?, Cmp::Ge, 1, &stream)?;
    rt.quiet(&stream)?;
    barrier_all(rt)?;
    ensure!(inbox.to_vec()? == data(left), "put from registered memory");
    ensure!(
        signalled.to_vec()? == data(left),
        "put_with_signal from registered memory"
    );
    // Every PE has read its inbox before any puts into it again.
    barrier_all(rt)?;
    // Lengths are checked as for symmetric memory.
    let mut short = rt.alloc_zeroed::<u32>(LEN - 1)?;
    ensure!(matches!(
        rt.put(&registered, &mut short, right, &stream),
        Err(Error::InvalidArgument { .. })
    ));
    registered.unregister()?;
    // Unregistered, the memory is the program's again, and can be registered again.
    ensure_eq!(stream.clone_dtoh(&own)?, data(me));
    drop(rt.register(&mut own)?);

    // Get: the right neighbour's exposed array into my own memory.
    let mut fetched = stream.alloc_zeros::<u32>(LEN)?;
    {
        let mut registered = rt.register(&mut fetched)?;
        rt.get(&exposed, &mut registered, right, &stream)?;
        ensure!(
            stream.clone_dtoh(registered.slice())? == data(right),
            "get into registered memory"
        );
        // Written through the handle's view, then sent: the handle is a cudarc buffer too.
        stream.memcpy_htod(&data(me + n), &mut registered.view_mut())?;
        rt.put(&registered, &mut inbox, right, &stream)?;
        rt.quiet(&stream)?;
    } // dropped: waits for the GPU, then unregisters
    barrier_all(rt)?;
    ensure!(
        inbox.to_vec()? == data(left + n),
        "put after a cudarc write"
    );
    ensure_eq!(stream.clone_dtoh(&fetched)?, data(me + n));

    // An empty allocation registers nothing, and moves nothing.
    let mut none = stream.alloc_zeros::<u32>(0)?;
    let mut empty = rt.alloc_zeroed::<u32>(0)?;
    let registered = rt.register(&mut none)?;
    ensure!(registered.is_empty());
    rt.put(&registered, &mut empty, right, &stream)?;
    drop(registered);
    // An empty put with a signal delivers the signal alone (the set above made it 1).
    let nothing = rt.alloc_zeroed::<u32>(0)?;
    rt.put_with_signal(
        &nothing,
        &mut empty,
        flags.signal(0)?,
        SignalOp::Add(1),
        right,
        &stream,
    )?;
    rt.signal_wait_until(flags.signal(0)?, Cmp::Ge, 2, &stream)?;
    stream.synchronize()?;
    barrier_all(rt)?;
    Ok(())
}

/// An image that is no module (bytes) is refused; one that loads but was not linked with
/// NVSHMEM's device library (a plain kernel's PTX, which the driver compiles) is refused or
/// registered, as NVSHMEM decides; either way the runtime goes on.
fn unlinked_module(rt: &Runtime) -> anyhow::Result<()> {
    use cudarc::driver::sys::CUdevice_attribute as A;
    use nvshmem::device::{DeviceImage, DeviceModule};
    let ctx = rt.context();
    let arch = format!(
        "sm_{}{}",
        ctx.attribute(A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?,
        ctx.attribute(A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?
    );
    let junk = DeviceImage::from_linked_cubin("junk", &arch, vec![0x42; 4096]);
    ensure!(
        DeviceModule::load(rt, &junk).is_err(),
        "4 KiB of junk loaded as a module"
    );
    let ptx = cudarc::nvrtc::compile_ptx("extern \"C\" __global__ void plain(int *p) { *p = 1; }")?;
    let plain = DeviceImage::from_linked_cubin("plain", &arch, ptx.to_src().into_bytes());
    // What NVSHMEM does with it is its own choice (refuse it, or register a module that uses
    // nothing of it); what is checked is that either way the module goes and the runtime goes
    // on (a module never registered must not be unregistered).
    match DeviceModule::load(rt, &plain) {
        Err(e) => println!("PE {}: a module without NVSHMEM: {e}", rt.my_pe()),
        Ok(m) => {
            println!("PE {}: a module without NVSHMEM was registered", rt.my_pe());
            drop(m);
        }
    }
    rt.barrier_all(rt.stream())?;
    rt.stream().synchronize()?;
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
    c.run("split_by_colour_and_key", || {
        let world = rt.world();
        let mut arrays = TeamArrays::new(rt)?;
        // Even and odd PEs, each team numbered from its highest world PE down.
        let half = world
            .split(Some(me as u32 % 2), -(me as i32))?
            .context("every PE has a colour")?;
        let half_members: Vec<usize> = (0..n).filter(|p| p % 2 == me % 2).rev().collect();
        check_team(rt, &half, &half_members, &mut arrays, &stream)?;
        // Split again, from a parent that is itself a split: one colour, keys reversing it
        // back into world order.
        let again = half
            .split(Some(3), -(half.my_pe() as i32))?
            .context("every PE has a colour")?;
        let again_members: Vec<usize> = half_members.iter().rev().copied().collect();
        check_team(rt, &again, &again_members, &mut arrays, &stream)?;
        // PE 0 sits out (colour None): the others form one team, equal keys in world order.
        let rest = world.split((me != 0).then_some(u32::MAX), 0)?;
        ensure_eq!(rest.is_some(), me != 0);
        if let Some(rest) = &rest {
            check_team(rt, rest, &(1..n).collect::<Vec<_>>(), &mut arrays, &stream)?;
        }
        // Everyone sits out: no team anywhere.
        ensure!(world.split(None, 7)?.is_none());
        // Three colours named out of order, one of them possibly empty of this PE's parity.
        let colour = [20u32, 5, 11][me % 3];
        let thirds = world.split(Some(colour), 0)?.context("coloured")?;
        let thirds_members: Vec<usize> = (0..n).filter(|p| p % 3 == me % 3).collect();
        check_team(rt, &thirds, &thirds_members, &mut arrays, &stream)?;
        stream.synchronize()?;
        Ok(())
    });
    c.run("shrink", || {
        let world = rt.world();
        let mut arrays = TeamArrays::new(rt)?;
        // Without PE 0 (with one PE nobody is left, and PE 0 gets None as every excluded PE).
        let rest = world.shrink(&[0])?;
        ensure_eq!(rest.is_some(), me != 0);
        if let Some(rest) = &rest {
            check_team(rt, rest, &(1..n).collect::<Vec<_>>(), &mut arrays, &stream)?;
        }
        // Excluding nobody: a new team of every PE, in the same order.
        let same = world.shrink(&[])?.context("nobody is excluded")?;
        check_team(rt, &same, &(0..n).collect::<Vec<_>>(), &mut arrays, &stream)?;
        // Excluding the last PE of a shrunk team: not a progression of the world from 3 PEs
        // on ([0, 2] of 3), so made from a unique id.
        if n >= 3 {
            let gapped = world.shrink(&[1])?;
            let members: Vec<usize> = (0..n).filter(|&p| p != 1).collect();
            ensure_eq!(gapped.is_some(), me != 1);
            if let Some(gapped) = &gapped {
                check_team(rt, gapped, &members, &mut arrays, &stream)?;
            }
        }
        // Excluding everyone (in any order) leaves no team on any PE.
        ensure!(world.shrink(&(0..n).rev().collect::<Vec<_>>())?.is_none());
        let refused = |r: nvshmem::Result<Option<Team>>, what: &str| match r {
            Err(Error::InvalidArgument { .. }) => Ok(()),
            other => anyhow::bail!("{what}: expected InvalidArgument, got {other:?}"),
        };
        refused(world.shrink(&[n]), "a PE outside the team")?;
        refused(world.shrink(&[0, 0]), "a PE twice")?;
        world.barrier(&stream)?;
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

/// Symmetric arrays every PE allocates alike (allocation is collective over all PEs, so not
/// inside a branch that only a team's members take) for [`check_team`].
struct TeamArrays {
    src: SymArray<i64>,
    sum: SymArray<i64>,
    all: SymArray<i64>,
}

impl TeamArrays {
    const COUNT: usize = 1000;

    fn new(rt: &Runtime) -> anyhow::Result<Self> {
        Ok(TeamArrays {
            src: rt.alloc_from(&[rt.my_pe() as i64; Self::COUNT])?,
            sum: rt.alloc_zeroed(Self::COUNT)?,
            all: rt.alloc_zeroed(rt.n_pes() * Self::COUNT)?,
        })
    }
}

/// Checks, on a member, that `team` holds the world PEs `members` in that order, then runs an
/// all-reduce (sum of the members' world PE numbers) and an fcollect (their PE numbers, in
/// team order) over it and checks both against the host.
fn check_team(
    rt: &Runtime,
    team: &Team,
    members: &[usize],
    a: &mut TeamArrays,
    stream: &std::sync::Arc<cudarc::driver::CudaStream>,
) -> anyhow::Result<()> {
    let (me, count) = (rt.my_pe(), TeamArrays::COUNT);
    let world = rt.world();
    ensure_eq!(team.n_pes(), members.len());
    ensure_eq!(Some(team.my_pe()), members.iter().position(|&p| p == me));
    for (k, &pe) in members.iter().enumerate() {
        ensure_eq!(team.translate_pe(k, &world)?, Some(pe));
    }
    // Poison the outputs, then a barrier over the team, so that no member's fcollect writes
    // into mine before it is poisoned and a collective that writes nothing cannot pass.
    a.sum.copy_from_host(&[-1; TeamArrays::COUNT])?;
    let all_len = a.all.len();
    a.all.copy_from_host(&vec![-1; all_len])?;
    team.barrier(stream)?;
    team.all_reduce(&a.src, &mut a.sum, ReduceOp::Sum, stream)?;
    let k = members.len();
    team.fcollect(&a.src, &mut a.all.view_mut(..k * count)?, stream)?;
    let want: i64 = members.iter().map(|&p| p as i64).sum();
    let got = a.sum.to_vec()?; // waits for the stream
    ensure!(
        got.iter().all(|&x| x == want),
        "all_reduce over {members:?} gave {}, expected {want}",
        got[0]
    );
    let got = a.all.to_vec()?;
    for (j, &pe) in members.iter().enumerate() {
        ensure!(
            got[j * count..(j + 1) * count]
                .iter()
                .all(|&x| x == pe as i64),
            "fcollect over {members:?}: block {j} should be PE {pe}'s, starts {}",
            got[j * count]
        );
    }
    Ok(())
}
