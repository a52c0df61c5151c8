//! Hello from every PE: rank, GPU and team sizes; then each PE writes a value into its right
//! neighbour's symmetric array and checks what its left neighbour wrote into its own; then a
//! tour of every collective over all PEs, each checked, with one line per collective and its
//! time (CUDA events around the call) on PE 0.
//!
//! ```sh
//! scripts/run-example.sh hello                   # one PE per GPU through nvshmem-run
//! mpirun -np 2 target/release/examples/hello     # or any launcher
//! ```
#[path = "common/run.rs"]
mod run;

use anyhow::{ensure, Context};
use nvshmem::{ReduceOp, Runtime, SymArray, Team};

fn main() -> std::process::ExitCode {
    run::main("hello", hello)
}

fn hello() -> anyhow::Result<()> {
    let rt = Runtime::init().context("starting NVSHMEM")?;
    let (me, n) = (rt.my_pe(), rt.n_pes());
    let info = rt.info();
    println!(
        "hello from PE {me} of {n}: GPU {}, teams world {} / shared {} / node {}, NVSHMEM {} ({} bootstrap)",
        info.device,
        rt.world().n_pes(),
        rt.shared().n_pes(),
        rt.node().n_pes(),
        info.version,
        info.bootstrap,
    );

    // Every PE allocates the same two arrays (allocation is collective).
    let mine = rt.alloc_from(&[1000 + me as u64; 4])?;
    let mut inbox = rt.alloc_zeroed::<u64>(4)?;
    let stream = rt.stream().clone();
    let right = (me + 1) % n;
    rt.put(&mine, &mut inbox, right, &stream)?;
    rt.quiet(&stream)?;
    // Everyone's put has landed once everyone has passed the barrier.
    rt.barrier_all(&stream)?;
    stream.synchronize()?;

    let left = (me + n - 1) % n;
    let got = inbox.to_vec()?;
    ensure!(
        got == vec![1000 + left as u64; 4],
        "PE {me} expected PE {left}'s value, found {got:?}"
    );
    println!("PE {me}: PE {left} wrote {} into my array: ok", got[0]);
    drop((mine, inbox));
    tour(&rt)
}

/// Elements each PE contributes to every collective of the tour.
const COUNT: usize = 1 << 16;

/// Every collective once over the world team, on f32 data whose result is known: PE `p`'s
/// element `i` is `p + i % 7`.
fn tour(rt: &Runtime) -> anyhow::Result<()> {
    let (me, n) = (rt.my_pe(), rt.n_pes());
    let world = rt.world();
    let stream = rt.stream().clone();
    let root = n - 1;
    let value = |pe: usize, i: usize| (pe + i % 7) as f32;
    let mine: Vec<f32> = (0..n * COUNT).map(|i| value(me, i)).collect();
    let src = rt.alloc_from(&mine)?;
    let mut dst = rt.alloc_zeroed::<f32>(n * COUNT)?;
    rt.reserve_scratch(COUNT * 4)?;
    let sum_of = |i: usize| (0..n).map(|p| value(p, i)).sum::<f32>();
    if me == 0 {
        println!("tour: every collective over {n} PEs, {COUNT} f32 per PE");
    }

    let step = |name: &str,
                dst: &mut SymArray<f32>,
                run: &dyn Fn(&Team, &mut SymArray<f32>) -> nvshmem::Result<()>,
                want: &dyn Fn(usize) -> Option<f32>|
     -> anyhow::Result<()> {
        // The first call of a collective sets up its state in NVSHMEM (and NCCL inside it),
        // which takes milliseconds: one untimed call first, finished on every PE before the
        // output is poisoned for the timed one.
        run(&world, dst)?;
        rt.barrier_all(&stream)?;
        stream.synchronize()?;
        dst.copy_from_host(&vec![-1.0; n * COUNT])?;
        rt.barrier_all(&stream)?;
        let ((), t) = world.timed(&stream, || run(&world, dst))?;
        let time = t.wait()?;
        let got = dst.to_vec()?;
        let wrong = (0..got.len())
            .filter(|&i| want(i).is_some_and(|w| got[i] != w))
            .count();
        ensure!(wrong == 0, "{name}: {wrong} wrong elements on PE {me}");
        if me == 0 {
            println!("  {name:<15} {:>9.1} us  ok", time.as_secs_f64() * 1e6);
        }
        Ok(())
    };
    let block = |i: usize| (i < COUNT).then_some(i);
    step("barrier", &mut dst, &|t, _| t.barrier(&stream), &|_| None)?;
    step("sync", &mut dst, &|t, _| t.sync(&stream), &|_| None)?;
    step(
        "all_reduce",
        &mut dst,
        &|t, d| {
            t.all_reduce(
                &src.view(..COUNT)?,
                &mut d.view_mut(..COUNT)?,
                ReduceOp::Sum,
                &stream,
            )
        },
        &|i| block(i).map(sum_of),
    )?;
    step(
        "reduce",
        &mut dst,
        &|t, d| {
            t.reduce(
                root,
                &src.view(..COUNT)?,
                &mut d.view_mut(..COUNT)?,
                ReduceOp::Max,
                &stream,
            )
        },
        &|i| {
            block(i).map(|i| {
                if me == root {
                    (n - 1 + i % 7) as f32
                } else {
                    -1.0
                }
            })
        },
    )?;
    step(
        "broadcast",
        &mut dst,
        &|t, d| {
            t.broadcast(
                root,
                &src.view(..COUNT)?,
                &mut d.view_mut(..COUNT)?,
                &stream,
            )
        },
        &|i| block(i).map(|i| value(root, i)),
    )?;
    step(
        "fcollect",
        &mut dst,
        &|t, d| t.fcollect(&src.view(..COUNT)?, d, &stream),
        &|i| Some(value(i / COUNT, i % COUNT)),
    )?;
    step(
        "alltoall",
        &mut dst,
        &|t, d| t.alltoall(&src, d, &stream),
        &|i| Some(value(i / COUNT, me * COUNT + i % COUNT)),
    )?;
    step(
        "reduce_scatter",
        &mut dst,
        &|t, d| t.reduce_scatter(&src, &mut d.view_mut(..COUNT)?, ReduceOp::Sum, &stream),
        &|i| block(i).map(|i| sum_of(me * COUNT + i)),
    )?;
    step(
        "gather",
        &mut dst,
        &|t, d| t.gather(root, &src.view(..COUNT)?, d, &stream),
        &|i| {
            Some(if me == root {
                value(i / COUNT, i % COUNT)
            } else {
                -1.0
            })
        },
    )?;
    step(
        "scatter",
        &mut dst,
        &|t, d| t.scatter(root, &src, &mut d.view_mut(..COUNT)?, &stream),
        &|i| block(i).map(|i| value(root, me * COUNT + i)),
    )?;
    Ok(())
}
