//! This crate's own CUDA kernels, for what NVSHMEM lacks: reductions on bool and fp8, avg and
//! pre-multiplied sum, gather and scatter through peer-mapped memory.
//!
//! The kernels work on raw device addresses that this GPU can dereference: its own buffers and
//! peers' symmetric buffers mapped with `nvshmem_ptr`. They are CUDA C sources kept beside this
//! file (`reduce.cu`, `copy.cu`), instantiated per (type, operator) by a `#define` prefix,
//! compiled with NVRTC for the device's architecture on first use and cached per context.
//!
//! Ordering is the caller's job: a launch only enqueues on the stream. Before a kernel reads a
//! peer's buffer the peer must have finished writing it (a team barrier on the stream), and
//! nothing may write a buffer that a peer's kernel is still reading.
// The collectives (another module) call these; until they do, parts are unused.
#![allow(dead_code)]

mod compile;
mod types;

use cudarc::driver::{CudaFunction, CudaStream, LaunchConfig, PushKernelArg};

// For callers that want to know up front whether kernels can be built.
#[allow(unused_imports)]
pub(crate) use compile::{cuda_include_dir, nvrtc_available, INCLUDE_ENV};
pub(crate) use types::{KernelKey, KernelType, MapOp, ReduceOp};

use crate::error::{Error, Result};

/// The most buffers one launch reads or writes; must match `NVR_MAX_PEERS` in the sources.
/// 128 pointers (1 KiB) ride in the kernel's parameters, so a launch needs no device table.
pub(crate) const MAX_PEERS: usize = 128;

const BLOCK: u32 = 256;
/// Grid-stride loops: more blocks than this only add scheduling cost (an H100 holds about
/// 1000 blocks of 256 threads at once).
const MAX_BLOCKS: u64 = 2048;

fn grid(work: u64) -> LaunchConfig {
    let blocks = work.div_ceil(BLOCK as u64).clamp(1, MAX_BLOCKS) as u32;
    LaunchConfig {
        grid_dim: (blocks, 1, 1),
        block_dim: (BLOCK, 1, 1),
        shared_mem_bytes: 0,
    }
}

fn peer_table(
    call: &'static str,
    arg: &'static str,
    ptrs: &[u64],
    align: usize,
) -> Result<[u64; MAX_PEERS]> {
    if ptrs.is_empty() || ptrs.len() > MAX_PEERS {
        return Err(Error::arg(
            call,
            arg,
            format!(
                "{} buffers given; 1 to {MAX_PEERS} are supported",
                ptrs.len()
            ),
        ));
    }
    if let Some((i, p)) = ptrs
        .iter()
        .enumerate()
        .find(|(_, &p)| p == 0 || p & (align as u64 - 1) != 0)
    {
        return Err(Error::arg(
            call,
            arg,
            format!("buffer {i} has address {p:#x}: null or not aligned to {align} bytes"),
        ));
    }
    let mut table = [0u64; MAX_PEERS];
    table[..ptrs.len()].copy_from_slice(ptrs);
    Ok(table)
}

fn check_ptr(call: &'static str, arg: &'static str, p: u64, align: usize) -> Result<()> {
    if p == 0 || p & (align as u64 - 1) != 0 {
        return Err(Error::arg(
            call,
            arg,
            format!("address {p:#x} is null or not aligned to {align} bytes"),
        ));
    }
    Ok(())
}

/// For integer types the kernels use the scalar as an integer of 64 bits (NCCL takes the
/// scalar in the data's type); refuse what would not convert exactly.
fn check_scalar(call: &'static str, arg: &'static str, t: KernelType, s: f64) -> Result<()> {
    if !s.is_finite() {
        return Err(Error::arg(call, arg, format!("{s} is not finite")));
    }
    if t.is_integer() {
        let signed = matches!(
            t,
            KernelType::I8 | KernelType::I16 | KernelType::I32 | KernelType::I64
        );
        let (lo, hi) = if signed {
            (-(2f64.powi(63)), 2f64.powi(63))
        } else {
            (0.0, 2f64.powi(64))
        };
        if s.fract() != 0.0 || s < lo || s >= hi {
            return Err(Error::arg(
                call,
                arg,
                format!(
                    "{s} is not an integer a {t} kernel can use (it computes in 64-bit {})",
                    if signed { "signed" } else { "unsigned" }
                ),
            ));
        }
    }
    Ok(())
}

fn function(stream: &CudaStream, key: KernelKey, index: usize) -> Result<CudaFunction> {
    Ok(compile::functions(stream.context(), key)?[index].clone())
}

/// Compiles and loads (once per context) the kernel `key`, so that a collective can learn
/// that NVRTC or the headers are missing before it queues its first step.
pub(crate) fn prepare(stream: &CudaStream, key: KernelKey) -> Result<()> {
    compile::functions(stream.context(), key).map(|_| ())
}

/// Enqueues `dst[i] = op(peers[0][i], ..., peers[n-1][i])` for `i < len`, on `stream`.
///
/// `peers` are device addresses of `len` elements of `elem` each, readable from this GPU (own
/// buffer or `nvshmem_ptr` of a peer's); they are combined in the order given, so PEs passing
/// the same order get the same bits. `scale` is PreMulSum's factor (ignored otherwise). Float
/// types of 16 bits or fewer compute in `f32`, integers in 64 bits, and avg divides by
/// `peers.len()`. `dst` must not be any buffer that another PE's launch reads (an in-place
/// all-reduce would race with the peers' reads), but may be one of `peers` if no one else
/// reads it.
#[allow(clippy::too_many_arguments)]
pub(crate) fn launch_reduce_peers(
    stream: &CudaStream,
    op: ReduceOp,
    elem: KernelType,
    peers: &[u64],
    dst: u64,
    len: usize,
    scale: f64,
) -> Result<()> {
    const CALL: &str = "reduce (peer kernel)";
    if !op.supports(elem) {
        return Err(Error::arg(
            CALL,
            "op",
            format!("{op} is not defined for {elem}"),
        ));
    }
    if op == ReduceOp::PreMulSum {
        check_scalar(CALL, "scale", elem, scale)?;
    }
    let table = peer_table(CALL, "peers", peers, elem.size())?;
    check_ptr(CALL, "dst", dst, elem.size())?;
    if len == 0 {
        return Ok(());
    }
    let f = function(stream, KernelKey::Reduce(elem, op), 0)?;
    let (n, len64) = (peers.len() as i32, len as u64);
    let mut b = stream.launch_builder(&f);
    b.arg(&table).arg(&n).arg(&dst).arg(&len64).arg(&scale);
    // SAFETY: the signature matches nvr_reduce(nvr_peers, int, T*, unsigned long long, double);
    // the caller guarantees every address holds `len` elements of `elem` reachable from this
    // device until the stream passes this point.
    unsafe { b.launch(grid(len64)) }.map_err(Error::cuda("cuLaunchKernel(nvr_reduce)"))?;
    Ok(())
}

/// Enqueues `dst[i] = src[i] * s` ([`MapOp::Mul`]) or `src[i] / s` ([`MapOp::Div`]) for
/// `i < len`; `dst` may equal `src`. For integer types `s` must be an integer (and non-zero
/// for `Div`, which truncates toward zero). Used to turn NVSHMEM's sum into avg (divide by
/// the team size afterwards) and into PreMulSum (multiply the input first).
#[allow(clippy::too_many_arguments)]
pub(crate) fn launch_map(
    stream: &CudaStream,
    op: MapOp,
    elem: KernelType,
    src: u64,
    dst: u64,
    len: usize,
    s: f64,
) -> Result<()> {
    const CALL: &str = "scale (kernel)";
    if !op.supports(elem) {
        return Err(Error::arg(
            CALL,
            "op",
            format!("{} is not defined for {elem}", op.name()),
        ));
    }
    check_scalar(CALL, "s", elem, s)?;
    if op == MapOp::Div && s == 0.0 {
        return Err(Error::arg(CALL, "s", "division by zero"));
    }
    check_ptr(CALL, "src", src, elem.size())?;
    check_ptr(CALL, "dst", dst, elem.size())?;
    if len == 0 {
        return Ok(());
    }
    let f = function(stream, KernelKey::Map(elem, op), 0)?;
    let len64 = len as u64;
    let mut b = stream.launch_builder(&f);
    b.arg(&src).arg(&dst).arg(&len64).arg(&s);
    // SAFETY: matches nvr_map(const T*, T*, unsigned long long, double); the caller
    // guarantees `src` and `dst` hold `len` elements on this device.
    unsafe { b.launch(grid(len64)) }.map_err(Error::cuda("cuLaunchKernel(nvr_map)"))?;
    Ok(())
}

/// The widest copy word dividing the block size and every address.
fn word_size(block_bytes: usize, ptrs: impl IntoIterator<Item = u64>) -> usize {
    let mut bits = block_bytes as u64 | 16;
    for p in ptrs {
        bits |= p;
    }
    // Lowest set bit: the largest power of two dividing all of them, capped at 16.
    (1u64 << bits.trailing_zeros()) as usize
}

/// Enqueues a gather: block `b` of `dst` (bytes `b * block_bytes ..`) receives the
/// `block_bytes` at `src_peers[b]`, for every `b < src_peers.len()`; one launch reads all
/// sources, in words as wide as alignment allows.
pub(crate) fn launch_gather_peers(
    stream: &CudaStream,
    src_peers: &[u64],
    dst: u64,
    block_bytes: usize,
) -> Result<()> {
    const CALL: &str = "gather (peer kernel)";
    let table = peer_table(CALL, "src_peers", src_peers, 1)?;
    check_ptr(CALL, "dst", dst, 1)?;
    if block_bytes == 0 {
        return Ok(());
    }
    let w = word_size(block_bytes, src_peers.iter().copied().chain([dst]));
    let f = function(stream, KernelKey::Copy(w), 0)?;
    let (n, words) = (src_peers.len() as i32, (block_bytes / w) as u64);
    let mut b = stream.launch_builder(&f);
    b.arg(&table).arg(&n).arg(&dst).arg(&words);
    // SAFETY: matches nvr_gather(nvr_wpeers, int, W*, unsigned long long); every address is
    // aligned to the word size `w` and the caller guarantees the blocks exist on or are
    // mapped to this device.
    unsafe { b.launch(grid(n as u64 * words)) }
        .map_err(Error::cuda("cuLaunchKernel(nvr_gather)"))?;
    Ok(())
}

/// Enqueues a scatter: the `block_bytes` at `dst_peers[b]` receive block `b` of `src`, for
/// every `b < dst_peers.len()`.
pub(crate) fn launch_scatter_peers(
    stream: &CudaStream,
    src: u64,
    dst_peers: &[u64],
    block_bytes: usize,
) -> Result<()> {
    const CALL: &str = "scatter (peer kernel)";
    let table = peer_table(CALL, "dst_peers", dst_peers, 1)?;
    check_ptr(CALL, "src", src, 1)?;
    if block_bytes == 0 {
        return Ok(());
    }
    let w = word_size(block_bytes, dst_peers.iter().copied().chain([src]));
    let f = function(stream, KernelKey::Copy(w), 1)?;
    let (n, words) = (dst_peers.len() as i32, (block_bytes / w) as u64);
    let mut b = stream.launch_builder(&f);
    b.arg(&src).arg(&table).arg(&n).arg(&words);
    // SAFETY: matches nvr_scatter(const W*, nvr_wpeers, int, unsigned long long); as above.
    unsafe { b.launch(grid(n as u64 * words)) }
        .map_err(Error::cuda("cuLaunchKernel(nvr_scatter)"))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copy_word_follows_alignment() {
        assert_eq!(word_size(64, [0x1000, 0x2000]), 16);
        assert_eq!(word_size(64, [0x1000, 0x2004]), 4);
        assert_eq!(word_size(6, [0x1000]), 2);
        assert_eq!(word_size(7, [0x1000]), 1);
        assert_eq!(word_size(32, [0x1008]), 8);
    }

    #[test]
    fn bad_arguments_are_refused_before_anything_compiles() {
        let e = peer_table("c", "peers", &[], 4).unwrap_err().to_string();
        assert!(e.contains("0 buffers given; 1 to 128"), "{e}");
        let e = peer_table("c", "peers", &[0x1000, 0x1002], 4)
            .unwrap_err()
            .to_string();
        assert!(e.contains("buffer 1 has address 0x1002"), "{e}");
        assert!(peer_table("c", "peers", &[8; 129], 4).is_err());
        assert!(check_scalar("c", "s", KernelType::I32, 2.5).is_err());
        assert!(check_scalar("c", "s", KernelType::U8, -1.0).is_err());
        assert!(check_scalar("c", "s", KernelType::I8, -3.0).is_ok());
        assert!(check_scalar("c", "s", KernelType::F16, 0.1).is_ok());
        assert!(check_scalar("c", "s", KernelType::F32, f64::NAN).is_err());
        assert_eq!(grid(1).grid_dim.0, 1);
        assert_eq!(grid(1 << 40).grid_dim.0, MAX_BLOCKS as u32);
    }

    /// The CI check: every kernel instantiation compiles with NVRTC for compute_90, no GPU
    /// needed. Ignored by default because it needs libnvrtc and the CUDA headers;
    /// `scripts/check-kernels.sh` installs both from PyPI and runs it.
    #[test]
    #[ignore = "needs NVRTC 13 and the CUDA headers: run scripts/check-kernels.sh"]
    fn every_kernel_compiles_with_nvrtc() {
        if let Err(e) = nvrtc_available() {
            panic!("cannot check the kernels: {e}");
        }
        let include = cuda_include_dir().unwrap_or_else(|e| panic!("{e}"));
        println!("CUDA headers from {}", include.display());
        let all = KernelKey::all();
        let mut failed = Vec::new();
        for key in &all {
            for arch in ["compute_90"] {
                match compile::compile(*key, arch) {
                    Ok(ptx) => {
                        let text = ptx.to_src();
                        for f in key.functions() {
                            assert!(text.contains(f), "{}: PTX lacks {f}", key.name());
                        }
                    }
                    Err(e) => failed.push(format!("{arch}: {e}")),
                }
            }
        }
        assert!(
            failed.is_empty(),
            "{} of {} failed:\n{}",
            failed.len(),
            all.len(),
            failed.join("\n\n")
        );
        println!("{} kernels compiled for compute_90", all.len());
    }
}
