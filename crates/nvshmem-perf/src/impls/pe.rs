//! Small cross-PE helpers over raw NVSHMEM, so the benchmark works under any launcher.
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use cudarc::driver::CudaStream;
use nvshmem::Runtime;
use nvshmem_sys::teams::NVSHMEM_TEAM_WORLD;

/// The sum of `value` over all PEs.
pub fn sum_over_pes(rt: &Runtime, value: u64, stream: &Arc<CudaStream>) -> Result<u64> {
    let lib = nvshmem_sys::lib()?;
    let src = rt.alloc_from(&[value])?;
    let dst = rt.alloc_zeroed::<u64>(1)?;
    rt.context().bind_to_thread()?;
    // SAFETY: src and dst are live one-element symmetric arrays on every PE (allocated
    // collectively above); the stream belongs to the runtime's context.
    let status = unsafe {
        lib.nvshmemx_uint64_sum_reduce_on_stream(
            NVSHMEM_TEAM_WORLD,
            dst.device_ptr_raw() as *mut u64,
            src.device_ptr_raw() as *const u64,
            1,
            stream.cu_stream(),
        )
    };
    if status != 0 {
        bail!("nvshmemx_uint64_sum_reduce_on_stream returned {status}");
    }
    stream.synchronize().context("summing over PEs")?;
    Ok(dst.to_vec()?[0])
}

/// PE 0's `bytes`, on every PE (an NVSHMEM broadcast of symmetric memory).
pub fn from_pe0(rt: &Runtime, bytes: &[u8], stream: &Arc<CudaStream>) -> Result<Vec<u8>> {
    let lib = nvshmem_sys::lib()?;
    let src = rt.alloc_from(bytes)?;
    let dst = rt.alloc_zeroed::<u8>(bytes.len())?;
    rt.context().bind_to_thread()?;
    // SAFETY: src and dst are live symmetric arrays of bytes.len() bytes on every PE.
    let status = unsafe {
        lib.nvshmemx_broadcastmem_on_stream(
            NVSHMEM_TEAM_WORLD,
            dst.device_ptr_raw() as *mut _,
            src.device_ptr_raw() as *const _,
            bytes.len(),
            0,
            stream.cu_stream(),
        )
    };
    if status != 0 {
        bail!("nvshmemx_broadcastmem_on_stream returned {status}");
    }
    stream.synchronize().context("broadcasting from PE 0")?;
    Ok(dst.to_vec()?)
}

/// A barrier over all PEs on `stream`, waited for on the host: lines the PEs up before timing.
pub fn line_up(stream: &Arc<CudaStream>) -> Result<()> {
    let lib = nvshmem_sys::lib()?;
    // SAFETY: NVSHMEM is initialised (the runtime is alive) and the stream is valid.
    unsafe { lib.nvshmemx_barrier_all_on_stream(stream.cu_stream()) };
    stream.synchronize().context("barrier before timing")?;
    Ok(())
}
