use nvshmem::prelude::*;

fn main() -> Result<(), nvshmem::Error> {
    let rt = Runtime::init()?; // one PE per GPU; the launcher is found from the environment
    let (me, n) = (rt.my_pe(), rt.n_pes());
    let x = rt.alloc_from(&[me as f32 + 1.0; 1024])?; // collective: every PE allocates alike
    let mut sum = rt.alloc_zeroed::<f32>(1024)?;
    let stream = rt.stream();
    rt.world().all_reduce(&x, &mut sum, ReduceOp::Sum, stream)?; // queued on the stream
    stream.synchronize()?; // a cudarc call: its error converts into nvshmem::Error too
    let got = sum.to_vec()?;
    assert!(got.iter().all(|&v| v == (n * (n + 1) / 2) as f32));
    println!("PE {me} of {n}: all_reduce gave {} everywhere", got[0]);
    Ok(())
}
