//! Device-initiated communication: the program's own CUDA kernels calling NVSHMEM's device
//! API (`nvshmem_putmem_nbi`, `nvshmemx_putmem_signal_nbi_block`, `nvshmem_signal_wait_until`,
//! `nvshmem_quiet`, `nvshmem_barrier_all`, `nvshmem_ptr`, the team calls) without returning to
//! the host: halo exchanges inside a stencil kernel, pipelined producer-consumer kernels,
//! fine-grained one-sided updates.
//!
//! A [`DeviceSource`] (CUDA C that includes `<nvshmem_rs.cuh>`, the crate's header:
//! [`HEADER`]) is compiled by NVRTC and linked by nvJitLink with NVSHMEM's device library
//! (`libnvshmem_device.a`) into a [`DeviceImage`], cached on disk like the crate's own kernels;
//! a [`DeviceModule`] loads it on a runtime's GPU and registers it with NVSHMEM
//! (`nvshmemx_cumodule_init`); its [`DeviceKernel`]s launch with typed [`Args`] (symmetric
//! arrays arrive as `nvrs_array<T>`: pointer and length), plainly or as NVSHMEM's collective
//! launch (every block resident at once, checked first).
//!
//! ```no_run
//! use nvshmem::device::{Args, DeviceModule, DeviceSource};
//! use nvshmem::cudarc::driver::LaunchConfig;
//! let rt = nvshmem::Runtime::init()?;
//! let module = DeviceModule::compile(&rt, &DeviceSource::new("shift", r#"
//!     #include <nvshmem_rs.cuh>
//!     // Every PE sends its block of `src` to the next PE's `dst`, signals it, and waits for
//!     // its own from the previous PE: no host step.
//!     extern "C" __global__ void shift(nvrs_array<float> src, nvrs_array<float> dst, nvrs_signals sig) {
//!         int next = (nvshmem_my_pe() + 1) % nvshmem_n_pes();
//!         nvshmemx_putmem_signal_nbi_block(dst.ptr, src.ptr, src.len * sizeof(float),
//!                                          sig.at(0), 1, NVSHMEM_SIGNAL_ADD, next);
//!         if (threadIdx.x == 0) nvrs_wait_ge(sig.at(0), 1);
//!         __syncthreads();
//!     }
//! "#))?;
//! let (src, mut dst, sig) = (rt.alloc_from(&[rt.my_pe() as f32; 1024])?, rt.alloc_zeroed::<f32>(1024)?, rt.alloc_zeroed::<u64>(1)?);
//! rt.barrier_all(rt.stream())?;
//! let cfg = LaunchConfig { grid_dim: (1, 1, 1), block_dim: (256, 1, 1), shared_mem_bytes: 0 };
//! // SAFETY: shift(nvrs_array<float>, nvrs_array<float>, nvrs_signals) moves src.len floats
//! // into a dst of the same length on the next PE and touches signal word 0.
//! unsafe { module.kernel("shift")?.launch_collective(cfg, rt.stream(), Args::new().array(&src).array_mut(&mut dst).array(&sig))? };
//! let prev = (rt.my_pe() + rt.n_pes() - 1) % rt.n_pes();
//! assert!(dst.to_vec()?.iter().all(|&x| x == prev as f32));
//! # Ok::<(), nvshmem::Error>(())
//! ```
//!
//! # The route, and why
//!
//! Three ways to build such a kernel were tried with NVSHMEM 3.4.5 and CUDA 13.0 (NVRTC and
//! nvJitLink 13.0.88):
//! - **Relocatable code** (`-rdc=true`, machine code, linked with the library's machine code):
//!   the default, [`Route::Relocatable`].
//! - **LTO** (`-rdc=true -dlto`, LTO-IR, linked with `-lto`): [`Route::Lto`]. Same compile
//!   time; the link optimises the kernel again.
//! - **Header-only** (NVSHMEM's `NVSHMEM_ENABLE_ALL_DEVICE_INLINING`, no `-rdc`, no link):
//!   compiles as fast, but only without IBGDA (its headers include rdma-core's, which need the
//!   host C library NVRTC does not have), and then the module lacks the
//!   `nvshmemi_ibgda_device_state_d` global that `nvshmemx_cumodule_init` of a library built
//!   with IBGDA looks up, so it cannot be registered. Not offered.
//!
//! Measured (2026-11-24; NVRTC from the cache off):
//!
//! | | relocatable | LTO |
//! |---|---|---|
//! | NVRTC, 2-core build machine, the repository's kernels | 1.9-2.4 s | 1.9-2.4 s |
//! | nvJitLink, same | 0.007-0.011 s | 0.09-0.58 s |
//! | NVRTC + nvJitLink on the H100 machine (device_perf.cu) | 4.63 + 0.016 s | 3.85 + 0.52 s |
//! | kernel code (ping_pong's SASS) | 6272 bytes | 6272 bytes |
//! | H100, 1 PE: block put 8 B / 1 MiB, put bandwidth 4 MiB, put-with-signal round trip 8 B | 2.25 / 27.5 µs, 1355 GB/s, 2.57 µs | 1.96 / 27.5 µs, 1387 GB/s, 2.32 µs |
//!
//! The two routes give the same machine code for the program's kernels: NVSHMEM's device
//! functions they call are inline in its headers, hence already in the program's translation
//! unit, and the library is machine code, which LTO cannot optimise again; the speed figures
//! differ by the spread of single runs. Relocatable code links 10 to 50 times faster and does
//! not tie the LTO-IR's producer (NVRTC) to the linker's version, so it is the default.
//! `nvshmem-perf device` puts both beside the same kernels built by nvcc.
//!
//! # What NVRTC needs with NVSHMEM 3.4 to 3.8
//!
//! `nvshmem_rs.cuh` carries the fixes, chosen by NVSHMEM's version macros. With 3.4 only,
//! NVSHMEM's device headers name `std::is_integral` and friends, which NVRTC has only as
//! `cuda::std` (CCCL's headers, found in CUDA's `include/cccl` or the `nvidia-cuda-cccl`
//! wheel); from 3.5 the headers use `cuda::std` under NVRTC themselves. With every release
//! `uint64_t` is `unsigned long long` under NVRTC but `unsigned long` in the nvcc-built device
//! library, so the library's out-of-line put-with-signal (to peers reached through a proxy or
//! IBGDA) has another mangled name than an NVRTC kernel asks for: the header forwards one to
//! the other. That function is `nvshmemi_transfer_put_signal` in 3.4, the same with a last
//! `qp_index` parameter in 3.5 to 3.7, and `nvshmemi_transfer_put_signal_dispatch` in 3.8 (the
//! old name now an inline wrapper); a release after 3.8 gets no bridge until its headers are
//! read, and a put-with-signal then fails to link (`Error::Link` naming the function) rather
//! than run wrongly. CI links every shipped device kernel against 3.4.5 and 3.8.0; the
//! releases between were checked by hand (3.5.21, 3.6.5, 3.7.2, 2026-11-26).
//!
//! # Lifetime
//!
//! A [`DeviceModule`] holds the runtime. Each launch records an event on its stream; when the
//! module and its kernels are dropped, it is unregistered (`nvshmemx_cumodule_finalize`) and
//! unloaded once every such event has completed: at once if they have, else at a later load,
//! launch or drop of any device module. `drop` never waits.
mod build;
mod elf;
mod jitlink;
mod module;

pub use build::{
    BuildTimes, DeviceImage, DeviceSource, Route, Toolchain, HEADER, HEADER_NAME, NVSHMEM_HOME_VAR,
};
pub(crate) use module::{release_retired, retired_settled};
pub use module::{Args, DeviceArray, DeviceKernel, DeviceModule};

/// nvJitLink's version, e.g. `(13, 0)`, or why it cannot be loaded.
///
/// ```no_run
/// let (major, _) = nvshmem::device::nvjitlink_version()?;
/// assert!(major >= 13);
/// # Ok::<(), nvshmem::Error>(())
/// ```
pub fn nvjitlink_version() -> crate::Result<(u32, u32)> {
    jitlink::version()
}
