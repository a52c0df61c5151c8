//! Hello from every PE: rank, GPU and team sizes; then each PE writes a value into its right
//! neighbour's symmetric array and checks what its left neighbour wrote into its own.
//!
//! ```sh
//! scripts/run-example.sh hello                   # one PE per GPU through nvshmem-run
//! mpirun -np 2 target/release/examples/hello     # or any launcher
//! ```
use anyhow::{ensure, Context};
use nvshmem::Runtime;

fn main() -> std::process::ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .init();
    match hello() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            // A plain message, no backtrace: "needs an NVIDIA GPU" is an answer, not a bug.
            eprintln!("hello: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
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
    rt.put(&mut inbox, &mine, right, &stream)?;
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
    Ok(())
}
