//! This crate's own CUDA kernels: the NVLink collectives of peer-mapped teams, and what
//! NVSHMEM lacks (reductions on bool and fp8, avg and pre-multiplied sum, gather and scatter
//! through peer-mapped memory). Their C names begin with `nvr_`, for nvshmem-rs.
//!
//! The kernels work on raw device addresses that this GPU can dereference: its own buffers and
//! peers' symmetric buffers mapped with `nvshmem_ptr`. They are CUDA C sources kept beside this
//! file, each compiled as one program (no `#include` of each other):
//!
//! | file | what |
//! |---|---|
//! | `ll.cu` | the NVLink collectives for small messages (one-shot LL protocol) and the flag barrier `nvr_barrier` |
//! | `direct.cu` | the NVLink collectives for large messages (loads and stores of peers' buffers) |
//! | `lamport.cu` | one-shot float reductions and copies of any type for the mid band through sentinel-filled receive buffers in the channel (Lamport) |
//! | `common.cuh` | what `ll.cu` and `direct.cu` share: the protocol of `PROTOCOL.md` in code (team descriptor, channel layout, epochs, flags) |
//! | `ops.cuh` | the reduction operators, shared by `reduce.cu`, `ll.cu` and `direct.cu` |
//! | `reduce.cu` | element-wise reductions over peer-mapped buffers (`peer_kernel`), and the scaling and division around NVSHMEM's sum (`premul_sum`, `avg`) |
//! | `copy.cu` | block copies through peer pointers (`peer_copy`'s gather and scatter) |
//! | `wait.cu` | the stream's bounded wait for a signal word (`Runtime::signal_wait_until`), compiled with `common.cuh` |
//!
//! A reduction is instantiated per (type, operator) by a `#define` prefix (`types.rs`). The
//! sources are compiled with NVRTC for the device's architecture on first use, kept in an
//! on-disk cache and loaded once per context (`compile.rs`). `PROTOCOL.md` is the contract
//! between the NVLink kernels and the host side.
//!
//! A launch is described as data ([`Launch`]), so the algorithm layer can record what it
//! would queue in tests without a GPU. Every launch takes one path: [`launch`] checks it and
//! builds its kernel family's parameter block ([`Params`], the one place that lays parameters
//! out as the C signatures), [`resolve`] finds the loaded function, and [`fire`] enqueues it
//! with one `cuLaunchKernelEx`; a prepared call resolves once and fires
//! ([`NvlinkLaunch::resolve`], [`NvlinkLaunch::fire`]). Ordering is the caller's job: a
//! launch only enqueues on the stream. Before a kernel reads a peer's buffer the peer must have
//! finished writing it (a team barrier on the stream), and nothing may write a buffer that a
//! peer's kernel is still reading.
pub(crate) mod compile;
mod types;

use std::{ffi::c_void, sync::OnceLock};

use cudarc::driver::{sys, CudaStream};

pub(crate) use compile::compute_capability;
#[cfg(test)]
use compile::{cuda_include_dir, nvrtc_available};
pub(crate) use types::{lamport_serves, KernelKey, NvlinkSource};

use crate::{DataType, Error, ReduceOp, Result};

/// The value of `#define NAME value` in the kernels' common header, for the tests that hold
/// the host's mirrored constants to the kernels' own.
#[cfg(test)]
pub(crate) fn common_define(name: &str) -> usize {
    source_define("common.cuh", include_str!("common.cuh"), name)
}

/// The index of the `}` that closes the `{` at `open` in `src` (braces counted, nothing else:
/// for sources read as text by tests), or `None` where it is never closed.
#[cfg(test)]
pub(crate) fn closing_brace(src: &str, open: usize) -> Option<usize> {
    let mut depth = 0usize;
    for (i, c) in src[open..].char_indices() {
        match c {
            '{' => depth += 1,
            '}' => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    return Some(open + i);
                }
            }
            _ => {}
        }
    }
    None
}

/// The value of `#define NAME value` in `lamport.cu` (as [`common_define`]).
#[cfg(test)]
pub(crate) fn lamport_define(name: &str) -> usize {
    source_define("lamport.cu", include_str!("lamport.cu"), name)
}

/// A plain number (decimal or `0x` hex, an unsigned or `ull` suffix allowed) defined in the
/// source `src` (named `file`); panics, naming what is missing, where there is none.
#[cfg(test)]
fn source_define(file: &str, src: &str, name: &str) -> usize {
    let line = src
        .lines()
        .find_map(|l| {
            l.trim()
                .strip_prefix("#define ")?
                .strip_prefix(name)?
                .strip_prefix(' ')
        })
        .unwrap_or_else(|| panic!("{file} defines no {name}"));
    let value = line.split("//").next().unwrap_or("").trim();
    let digits = value.trim_end_matches(['u', 'l']);
    match digits.strip_prefix("0x") {
        Some(hex) => usize::from_str_radix(hex, 16),
        None => digits.parse(),
    }
    .unwrap_or_else(|_| panic!("{name} in {file} is not a plain number: {value:?}"))
}

/// The most buffers one launch reads or writes; must match `NVR_MAX_PEERS` in the sources.
/// 128 pointers (1 KiB) ride in the kernel's parameters, so a launch needs no device table.
pub(crate) const MAX_PEERS: usize = 128;

const BLOCK: u32 = 256;
/// Grid-stride loops: more blocks than this only add scheduling cost (an H100 holds about
/// 1000 blocks of 256 threads at once).
const MAX_BLOCKS: u64 = 2048;

/// The blocks (of [`BLOCK`] threads) of a grid-stride kernel over `work` items.
fn grid(work: u64) -> u32 {
    work.div_ceil(BLOCK as u64).clamp(1, MAX_BLOCKS) as u32
}

/// The most members a team that the NVLink kernels serve may have (`NVR_MAX_TEAM`): the size
/// of [`TeamDescriptor::off`], and of each per-member part of a channel's layout. Defined here,
/// with the descriptor it sizes, because the kernels' ABI is the lowest layer that needs it;
/// everything above names it as [`crate::channel::MAX_TEAM`].
pub(crate) const MAX_TEAM: usize = 8;

/// The team descriptor of `kernels/PROTOCOL.md` (`struct nvr_team`), passed by value to every
/// NVLink kernel.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct TeamDescriptor {
    /// What to add to a local symmetric address to reach team PE `j`'s copy.
    pub(crate) off: [i64; MAX_TEAM],
    pub(crate) n: i32,
    pub(crate) me: i32,
    /// This (team, stream)'s channel, local address.
    pub(crate) chan: u64,
    pub(crate) ll_bytes: u32,
    /// Non-zero: the kernels publish and check call fingerprints (`fp`); 2: calls that run
    /// NVSHMEM's collectives are checked first too ([`crate::runtime::CHECK_CALLS_VAR`]).
    pub(crate) check: u32,
    /// Device address of the host-mapped abort word.
    pub(crate) abort: u64,
    /// Device address of the host-mapped status record.
    pub(crate) status: u64,
    pub(crate) timeout_ns: u64,
    /// The call's fingerprint (`collective::algo::fingerprint`), set per launch; on the
    /// team's own descriptor, `[0, tag]` (the team's tag in the high half of word 1).
    pub(crate) fp: [u64; 2],
    /// Bytes of the channel's Lamport area (`lamport.cu`), right after its LL regions; 0
    /// where the runtime has none (`collective::algo::lamport`).
    pub(crate) lam_bytes: u64,
}

/// The arguments after the team descriptor of an NVLink kernel (ll.cu, direct.cu).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum NvlinkArgs {
    /// `(team, [root,] src, dst, count, scale)`: a reduction of `count` elements.
    Reduce {
        root: Option<i32>,
        src: u64,
        dst: u64,
        count: u64,
        scale: f64,
    },
    /// `(team, [root,] src, dst, bytes)`: data movement.
    Move {
        root: Option<i32>,
        src: u64,
        dst: u64,
        bytes: u64,
    },
    /// `(team, fence)`: barrier (1) or sync (0).
    Barrier { fence: i32 },
    /// `(team, [root,] src, dst, count, scale, slot)`: a Lamport reduction (`lamport.cu`) of
    /// `count` elements whose receive buffers hold `slot` bytes per sender.
    Lamport {
        root: Option<i32>,
        src: u64,
        dst: u64,
        count: u64,
        scale: f64,
        slot: u64,
    },
    /// `(team, [root,] src, dst, bytes, slot)`: a Lamport copy (`lamport.cu`, COPIES) of
    /// `bytes` a pair whose receive buffers hold `slot` bytes per sender.
    LamportMove {
        root: Option<i32>,
        src: u64,
        dst: u64,
        bytes: u64,
        slot: u64,
    },
}

/// One launch of an NVLink kernel: the function, its grid (the same on every member) and its
/// arguments.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct NvlinkLaunch {
    pub(crate) key: KernelKey,
    pub(crate) function: &'static str,
    pub(crate) grid: u32,
    pub(crate) block: u32,
    pub(crate) team: TeamDescriptor,
    pub(crate) args: NvlinkArgs,
}

impl NvlinkLaunch {
    /// Its parameter block.
    #[inline]
    fn params(&self) -> Params<'_> {
        Params::Nvlink {
            team: &self.team,
            args: &self.args,
        }
    }

    /// Its loaded function (compiled and loaded on first use), for [`NvlinkLaunch::fire`].
    pub(crate) fn resolve(&self, stream: &CudaStream) -> Result<sys::CUfunction> {
        resolve(stream, self.key, self.function)
    }

    /// Enqueues it once more, its function `f` resolved before: one `cuLaunchKernelEx`, its
    /// parameters on the stack (this is the small collectives' whole host cost, so nothing is
    /// allocated).
    ///
    /// # Safety
    /// As for [`fire`]: `f` is this launch's function from [`NvlinkLaunch::resolve`] in the
    /// stream's context, which is current; every address it names holds what the kernel reads
    /// and writes until the stream passes this point.
    #[inline]
    pub(crate) unsafe fn fire(&self, f: sys::CUfunction, stream: &CudaStream) -> Result<()> {
        // SAFETY: passed on from the caller.
        unsafe { fire(f, stream, self.grid, self.block, &self.params()) }
    }
}

/// One kernel launch, with its arguments.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Launch {
    /// `dst[i] = op(peers[0][i], ..., peers[n-1][i])` for `i < len`. `peers` are device
    /// addresses of `len` elements each, readable from this GPU (own buffer or a peer's
    /// mapping), combined in the order given so PEs passing the same order get the same bits;
    /// the scale of `premul_sum` rides in `op`. 16- and 8-bit floats compute in `f32`,
    /// integers in 64 bits, and avg divides by `peers.len()`. `dst` must not be a buffer
    /// another PE's launch reads, but may be one of `peers` if no one else reads it.
    ReducePeers {
        dtype: DataType,
        op: ReduceOp,
        peers: Vec<u64>,
        dst: u64,
        len: usize,
    },
    /// Element `i < len` of `src` mapped into `dst` by `kind` ([`MapKind`]) with `factor`;
    /// `dst` may equal `src` for [`MapKind::Mul`] and [`MapKind::Div`]. For integer types
    /// `factor` is a whole number (and positive but to multiply).
    Map {
        dtype: DataType,
        kind: MapKind,
        src: u64,
        dst: u64,
        len: usize,
        factor: f64,
    },
    /// Block `b` of `dst` (bytes `b * block_bytes ..`) receives the `block_bytes` at
    /// `src_peers[b]`, for every block; one launch reads all sources.
    Gather {
        src_peers: Vec<u64>,
        dst: u64,
        block_bytes: usize,
    },
    /// The `block_bytes` at `dst_peers[b]` receive block `b` of `src`, for every block.
    Scatter {
        src: u64,
        dst_peers: Vec<u64>,
        block_bytes: usize,
    },
    /// An NVLink kernel.
    Nvlink(NvlinkLaunch),
    /// The stream waits for a signal word ([`SignalWaitParams`]).
    SignalWait(SignalWaitParams),
}

/// What a [`Launch::Map`] computes (`NVR_MAP_*` of reduce.cu), in the type's accumulator
/// (`f32` for 16- and 8-bit floats, 64 bits for integers).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MapKind {
    /// `dst[i] = src[i] * factor` (integers wrap modulo 2^bits).
    Mul,
    /// `dst[i] = src[i] / factor`.
    Div,
    /// `src` of the type into the wide form NVSHMEM sums ([`wide`]): floats `src[i] *
    /// factor` in `f32` (or their own type); integers the pair `(q, r)` with `src[i] = q *
    /// factor + r`, `0 <= r < factor`, as two 64-bit integers.
    Widen,
    /// The wide form's sum over the team back into the type: floats `sum / factor`, rounded
    /// once; integers the pair's exact mean `Q + R / factor`, truncated toward zero.
    Narrow,
}

/// The type NVSHMEM sums the wide form of `dtype` in ([`MapKind::Widen`]), and how many of its
/// elements stand for one element of `dtype`: `f32` for 16- and 8-bit floats, the type itself
/// for `f32` and `f64`, and for integers a pair of 64-bit integers (signed for signed types).
pub(crate) fn wide(dtype: DataType) -> (DataType, usize) {
    match dtype.kind() {
        crate::ElementKind::Signed => (DataType::I64, 2),
        crate::ElementKind::Unsigned | crate::ElementKind::Bool => (DataType::U64, 2),
        crate::ElementKind::Float if dtype.size() < 4 => (DataType::F32, 1),
        crate::ElementKind::Float => (dtype, 1),
    }
}

/// Bytes of one wide element ([`wide`]), the alignment a widened buffer needs.
fn wide_size(dtype: DataType) -> usize {
    wide(dtype).0.size()
}

impl Launch {
    /// The kernel it runs.
    pub(crate) fn key(&self) -> KernelKey {
        match self {
            Launch::ReducePeers { dtype, op, .. } => KernelKey::Reduce(*dtype, *op),
            Launch::Map { dtype, kind, .. } => match kind {
                MapKind::Mul => KernelKey::Scale(*dtype),
                MapKind::Div => KernelKey::Divide(*dtype),
                MapKind::Widen => KernelKey::Widen(*dtype),
                MapKind::Narrow => KernelKey::Narrow(*dtype),
            },
            Launch::Gather {
                src_peers,
                dst,
                block_bytes,
            } => KernelKey::Copy(word_size(
                *block_bytes,
                src_peers.iter().copied().chain([*dst]),
            )),
            Launch::Scatter {
                src,
                dst_peers,
                block_bytes,
            } => KernelKey::Copy(word_size(
                *block_bytes,
                dst_peers.iter().copied().chain([*src]),
            )),
            Launch::Nvlink(l) => l.key,
            Launch::SignalWait(_) => KernelKey::Wait,
        }
    }

    /// The function of [`Launch::key`]'s module it runs.
    fn function(&self) -> &'static str {
        match self {
            Launch::ReducePeers { .. } => "nvr_reduce",
            Launch::Map { .. } => "nvr_map",
            Launch::Gather { .. } => "nvr_gather",
            Launch::Scatter { .. } => "nvr_scatter",
            Launch::Nvlink(l) => l.function,
            Launch::SignalWait(_) => "nvr_signal_wait",
        }
    }
}

/// The most parameters a kernel of this crate takes (a Lamport reduction with a root).
const MAX_PARAMS: usize = 7;

/// A kernel's parameters, typed by kernel family. Each field has its C parameter's type
/// (addresses and `unsigned long long` as `u64`, `int` as `i32`, `double` as `f64`, the peer
/// tables and the team descriptor by reference to their by-value layout), so
/// [`Params::pointers`], the one place that lays parameters out for the driver, only takes
/// their addresses in the signature's order.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Params<'a> {
    /// reduce.cu: `nvr_reduce(nvr_peers src, int n_src, NVR_T *dst, nvr_size len, double
    /// scale)`; `nvr_peers` is `MAX_PEERS` pointers by value.
    ReducePeers {
        peers: &'a [u64; MAX_PEERS],
        n: i32,
        dst: u64,
        len: u64,
        scale: f64,
    },
    /// reduce.cu: `nvr_map(const NVR_T *src, NVR_T *dst, nvr_size len, double s)`.
    Map {
        src: u64,
        dst: u64,
        len: u64,
        factor: f64,
    },
    /// copy.cu: `nvr_gather(nvr_wpeers src, int n, NVR_W *dst, nvr_size words)`.
    Gather {
        src: &'a [u64; MAX_PEERS],
        n: i32,
        dst: u64,
        words: u64,
    },
    /// copy.cu: `nvr_scatter(const NVR_W *src, nvr_wpeers dst, int n, nvr_size words)`.
    Scatter {
        src: u64,
        dst: &'a [u64; MAX_PEERS],
        n: i32,
        words: u64,
    },
    /// ll.cu and direct.cu (`kernels/PROTOCOL.md`): `(nvr_team t, [int root,] src, dst,
    /// unsigned long long count, double scale)` for a reduction, `(nvr_team t, [int root,] src,
    /// dst, unsigned long long bytes)` for data movement, `nvr_barrier(nvr_team t, int fence)`;
    /// lamport.cu: `(nvr_team t, [int root,] src, dst, unsigned long long count, double scale,
    /// unsigned long long slot)` for a reduction, `(nvr_team t, [int root,] src, dst, unsigned
    /// long long bytes, unsigned long long slot)` for a copy.
    Nvlink {
        team: &'a TeamDescriptor,
        args: &'a NvlinkArgs,
    },
    /// wait.cu: `nvr_signal_wait(const nvr_u64 *sig, int cmp, unsigned long long value,
    /// unsigned long long index, unsigned int *control, unsigned long long timeout_ns)`. By
    /// reference, so that the parameters of the other families (the small collectives' hot
    /// path) stay as small as they were.
    SignalWait(&'a SignalWaitParams),
}

/// A signal wait ([`Launch::SignalWait`], [`Params::SignalWait`]): the stream waits until the
/// `u64` at `signal` (this PE's) compares `cmp` (NVSHMEM's numbering, `NVSHMEM_CMP_*`) true
/// with `value`, polling the runtime's host-mapped `control` block (the abort word, then the
/// status record) and ending after `timeout_ns` (0: never) with the failure recorded there;
/// `index` is the word's index in its array, for the report. Each field has its C parameter's
/// type.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct SignalWaitParams {
    pub(crate) signal: u64,
    pub(crate) cmp: i32,
    pub(crate) value: u64,
    pub(crate) index: u64,
    pub(crate) control: u64,
    pub(crate) timeout_ns: u64,
}

impl Params<'_> {
    /// The kernel parameter array of `cuLaunchKernelEx`: a pointer to each parameter, in the
    /// order of the C signature written at each variant, null past the last. They point into
    /// `self`, so they are valid while it is borrowed.
    fn pointers(&self) -> [*mut c_void; MAX_PARAMS] {
        // The driver only reads through them.
        fn at<T>(x: &T) -> *mut c_void {
            (x as *const T).cast_mut().cast()
        }
        let mut p = [std::ptr::null_mut(); MAX_PARAMS];
        let mut put = |list: &[*mut c_void]| p[..list.len()].copy_from_slice(list);
        match self {
            Params::ReducePeers {
                peers,
                n,
                dst,
                len,
                scale,
            } => put(&[at(*peers), at(n), at(dst), at(len), at(scale)]),
            Params::Map {
                src,
                dst,
                len,
                factor,
            } => put(&[at(src), at(dst), at(len), at(factor)]),
            Params::Gather { src, n, dst, words } => put(&[at(*src), at(n), at(dst), at(words)]),
            Params::Scatter { src, dst, n, words } => put(&[at(src), at(*dst), at(n), at(words)]),
            Params::Nvlink { team, args } => {
                let team = at(*team);
                match args {
                    NvlinkArgs::Reduce {
                        root: Some(root),
                        src,
                        dst,
                        count,
                        scale,
                    } => put(&[team, at(root), at(src), at(dst), at(count), at(scale)]),
                    NvlinkArgs::Reduce {
                        root: None,
                        src,
                        dst,
                        count,
                        scale,
                    } => put(&[team, at(src), at(dst), at(count), at(scale)]),
                    NvlinkArgs::Move {
                        root: Some(root),
                        src,
                        dst,
                        bytes,
                    } => put(&[team, at(root), at(src), at(dst), at(bytes)]),
                    NvlinkArgs::Move {
                        root: None,
                        src,
                        dst,
                        bytes,
                    } => put(&[team, at(src), at(dst), at(bytes)]),
                    NvlinkArgs::Barrier { fence } => put(&[team, at(fence)]),
                    NvlinkArgs::Lamport {
                        root: Some(root),
                        src,
                        dst,
                        count,
                        scale,
                        slot,
                    } => put(&[
                        team,
                        at(root),
                        at(src),
                        at(dst),
                        at(count),
                        at(scale),
                        at(slot),
                    ]),
                    NvlinkArgs::Lamport {
                        root: None,
                        src,
                        dst,
                        count,
                        scale,
                        slot,
                    } => put(&[team, at(src), at(dst), at(count), at(scale), at(slot)]),
                    NvlinkArgs::LamportMove {
                        root: Some(root),
                        src,
                        dst,
                        bytes,
                        slot,
                    } => put(&[team, at(root), at(src), at(dst), at(bytes), at(slot)]),
                    NvlinkArgs::LamportMove {
                        root: None,
                        src,
                        dst,
                        bytes,
                        slot,
                    } => put(&[team, at(src), at(dst), at(bytes), at(slot)]),
                }
            }
            Params::SignalWait(SignalWaitParams {
                signal,
                cmp,
                value,
                index,
                control,
                timeout_ns,
            }) => put(&[
                at(signal),
                at(cmp),
                at(value),
                at(index),
                at(control),
                at(timeout_ns),
            ]),
        }
        p
    }

    /// What a failed launch is reported as.
    fn what(&self) -> &'static str {
        match self {
            Params::ReducePeers { .. } => "cuLaunchKernelEx(nvr_reduce)",
            Params::Map { .. } => "cuLaunchKernelEx(nvr_map)",
            Params::Gather { .. } => "cuLaunchKernelEx(nvr_gather)",
            Params::Scatter { .. } => "cuLaunchKernelEx(nvr_scatter)",
            Params::Nvlink { .. } => "cuLaunchKernelEx (NVLink collective)",
            Params::SignalWait(_) => "cuLaunchKernelEx(nvr_signal_wait)",
        }
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

/// Compiles and loads (once per context) the kernel `key`, so that a collective can learn
/// that NVRTC or the headers are missing before it queues its first step.
pub(crate) fn prepare(stream: &CudaStream, key: KernelKey) -> Result<()> {
    compile::functions(stream.context(), key).map(|_| ())
}

/// The loaded function `function` of the kernel `key` in the stream's context (compiled and
/// loaded on first use; the process-wide kernel cache keeps its module loaded).
pub(crate) fn resolve(
    stream: &CudaStream,
    key: KernelKey,
    function: &str,
) -> Result<sys::CUfunction> {
    let fns = compile::functions(stream.context(), key)?;
    let index = key
        .functions()
        .iter()
        .position(|f| *f == function)
        .expect("the launch names a function of its key");
    Ok(fns[index].cu_function())
}

/// The environment variable that turns programmatic dependent launch of the NVLink kernels off
/// (`0`, `off`, `false` or `no`) or on (`1`, `on`, `true`, `yes`, the default): see
/// `kernels/PROTOCOL.md`, "Launch". It exists to measure what the overlap gains and to rule
/// it out when chasing a problem; results are the same either way.
pub(crate) const PDL_VAR: &str = "NVSHMEM_RS_PDL";

/// [`PDL_VAR`]'s value as a switch, or why it is not one.
pub(crate) fn parse_pdl(value: &str) -> std::result::Result<bool, String> {
    match value.trim().to_ascii_lowercase().as_str() {
        "" | "1" | "on" | "true" | "yes" => Ok(true),
        "0" | "off" | "false" | "no" => Ok(false),
        _ => Err("expected 1/on/true/yes or 0/off/false/no".into()),
    }
}

/// NVSHMEM's switch for several PEs on one GPU under CUDA MPS without thread shares (full MPG
/// whatever the shares): then the PEs' kernels compete for every SM of the GPU.
const MPS_NO_SHARES_VAR: &str = "NVSHMEM_IGNORE_CUDA_MPS_ACTIVE_THREAD_PERCENTAGE";

/// Whether programmatic dependent launch is on when [`PDL_VAR`] is not set: yes, unless PEs
/// share their GPU without MPS thread shares (`no_shares`, [`MPS_NO_SHARES_VAR`] set to a
/// non-zero value). A kernel launched early holds its SMs while it waits for the one before
/// it; with shares (or a GPU to itself) those are this PE's own, but without shares they may
/// be the SMs a peer's kernel needs to start, and the peers then wait for each other until
/// the timeout (`kernels/PROTOCOL.md`, "Residency").
fn pdl_default(no_shares: Option<&str>) -> bool {
    !no_shares.is_some_and(|v| !matches!(v.trim(), "" | "0"))
}

/// Whether NVLink kernels are launched with programmatic stream serialization: read once per
/// process (the runtime refuses a value [`parse_pdl`] refuses before any launch, so the
/// fallback is never taken by a running program).
#[inline]
fn pdl() -> bool {
    static PDL: OnceLock<bool> = OnceLock::new();
    *PDL.get_or_init(|| {
        let default = pdl_default(std::env::var(MPS_NO_SHARES_VAR).ok().as_deref());
        std::env::var(PDL_VAR).map_or(default, |v| parse_pdl(&v).unwrap_or(default))
    })
}

/// The one kernel launch of this crate: `f` on `stream` over `grid` blocks of `block` threads,
/// with `params`, by `cuLaunchKernelEx`. The NVLink kernels get programmatic stream
/// serialization unless [`PDL_VAR`] turns it off (the driver ignores the attribute where the
/// GPU cannot overlap launches, before sm_90); the peer kernels, which do not wait for their
/// predecessor on the device, keep plain stream order.
///
/// # Safety
/// `f` is the function of `params`' kernel from [`resolve`] in the stream's context, which is
/// current (the runtime's `enter` or `enqueue` made it so) and keeps its module loaded (the
/// process-wide kernel cache holds it); every address `params` names holds what the kernel
/// reads and writes, on this device or mapped to it, until the stream passes this point.
#[inline]
pub(crate) unsafe fn fire(
    f: sys::CUfunction,
    stream: &CudaStream,
    grid: u32,
    block: u32,
    params: &Params<'_>,
) -> Result<()> {
    let mut pointers = params.pointers();
    let overlap = matches!(params, Params::Nvlink { .. }) && pdl();
    let mut attr = sys::CUlaunchAttribute {
        id: sys::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION,
        pad: [0; 4],
        value: sys::CUlaunchAttributeValue {
            programmaticStreamSerializationAllowed: 1,
        },
    };
    let config = sys::CUlaunchConfig {
        gridDimX: grid,
        gridDimY: 1,
        gridDimZ: 1,
        blockDimX: block,
        blockDimY: 1,
        blockDimZ: 1,
        sharedMemBytes: 0,
        hStream: stream.cu_stream(),
        attrs: &mut attr,
        numAttrs: overlap as u32,
    };
    // SAFETY: `f` is the kernel's function, loaded in this context, which the caller made
    // current; `pointers` are, in order, exactly the parameters of its C signature
    // (`Params::pointers`, written beside each family's signature), each pointing at a value of
    // the C type and size inside `params`, which outlives the call; the driver copies them
    // before returning (as it copies `config` and the attribute it points at). The caller
    // guarantees the addresses they name hold what the kernel reads and writes. Every kernel
    // launched with the attribute (the NVLink kernels) calls `nvr_launch_begin` before it
    // touches memory, which keeps it in stream order under it (PROTOCOL.md, "Launch").
    unsafe { sys::cuLaunchKernelEx(&config, f, pointers.as_mut_ptr(), std::ptr::null_mut()) }
        .result()
        .map_err(Error::cuda(params.what()))
}

/// Enqueues `launch` on `stream`: checks its arguments, builds its parameter block, resolves
/// its function and fires it. The caller guarantees that every address it names holds what the
/// launch reads or writes, on this device or mapped to it, until the stream passes this point,
/// and that the stream's context is current.
pub(crate) fn launch(stream: &CudaStream, launch: &Launch) -> Result<()> {
    // The peer table of a gather, scatter or reduction over peers, on the stack (only those
    // fill it: an NVLink launch pays nothing for it).
    let table;
    let key = launch.key();
    let (grid, block, params) = match launch {
        Launch::Nvlink(l) => (l.grid, l.block, l.params()),
        Launch::SignalWait(w) => {
            const CALL: &str = "signal_wait_until (kernel)";
            check_ptr(CALL, "signal", w.signal, 8)?;
            check_ptr(CALL, "control", w.control, 4)?;
            if !(0..=5).contains(&w.cmp) {
                return Err(Error::arg(
                    CALL,
                    "cmp",
                    format!("{} is not NVSHMEM_CMP_*", w.cmp),
                ));
            }
            (1, 32, Params::SignalWait(w))
        }
        Launch::ReducePeers {
            dtype,
            op,
            peers,
            dst,
            len,
        } => {
            const CALL: &str = "reduce (peer kernel)";
            if !op.applies_to(dtype.kind()) {
                return Err(Error::arg(
                    CALL,
                    "op",
                    format!("{op} is not defined for {dtype}"),
                ));
            }
            let scale = match *op {
                ReduceOp::PreMulSum(s) => {
                    crate::op::check_scale(CALL, *dtype, s)?;
                    s
                }
                _ => 1.0,
            };
            table = peer_table(CALL, "peers", peers, dtype.size())?;
            check_ptr(CALL, "dst", *dst, dtype.size())?;
            if *len == 0 {
                return Ok(());
            }
            let len = *len as u64;
            let params = Params::ReducePeers {
                peers: &table,
                n: peers.len() as i32,
                dst: *dst,
                len,
                scale,
            };
            (self::grid(len), BLOCK, params)
        }
        Launch::Map {
            dtype,
            kind,
            src,
            dst,
            len,
            factor,
        } => {
            const CALL: &str = "scale (kernel)";
            if *dtype == DataType::Bool8 {
                return Err(Error::arg(CALL, "dtype", "bool8 cannot be scaled"));
            }
            crate::op::check_scale(CALL, *dtype, *factor)?;
            let divides = match kind {
                MapKind::Mul => false,
                MapKind::Widen => !dtype.is_float(),
                MapKind::Div | MapKind::Narrow => true,
            };
            if divides && *factor <= 0.0 {
                return Err(Error::arg(
                    CALL,
                    "factor",
                    "division by a non-positive number",
                ));
            }
            let (narrow, wide) = (dtype.size(), wide_size(*dtype));
            let (src_align, dst_align) = match kind {
                MapKind::Mul | MapKind::Div => (narrow, narrow),
                MapKind::Widen => (narrow, wide),
                MapKind::Narrow => (wide, narrow),
            };
            check_ptr(CALL, "src", *src, src_align)?;
            check_ptr(CALL, "dst", *dst, dst_align)?;
            if *len == 0 {
                return Ok(());
            }
            let len = *len as u64;
            let params = Params::Map {
                src: *src,
                dst: *dst,
                len,
                factor: *factor,
            };
            (self::grid(len), BLOCK, params)
        }
        Launch::Gather {
            src_peers,
            dst,
            block_bytes,
        } => {
            const CALL: &str = "gather (peer kernel)";
            table = peer_table(CALL, "src_peers", src_peers, 1)?;
            check_ptr(CALL, "dst", *dst, 1)?;
            if *block_bytes == 0 {
                return Ok(());
            }
            let (n, words) = (src_peers.len() as i32, copy_words(key, *block_bytes));
            let params = Params::Gather {
                src: &table,
                n,
                dst: *dst,
                words,
            };
            (self::grid(n as u64 * words), BLOCK, params)
        }
        Launch::Scatter {
            src,
            dst_peers,
            block_bytes,
        } => {
            const CALL: &str = "scatter (peer kernel)";
            table = peer_table(CALL, "dst_peers", dst_peers, 1)?;
            check_ptr(CALL, "src", *src, 1)?;
            if *block_bytes == 0 {
                return Ok(());
            }
            let (n, words) = (dst_peers.len() as i32, copy_words(key, *block_bytes));
            let params = Params::Scatter {
                src: *src,
                dst: &table,
                n,
                words,
            };
            (self::grid(n as u64 * words), BLOCK, params)
        }
    };
    let f = resolve(stream, key, launch.function())?;
    // SAFETY: `f` is the launch's function, just resolved in the stream's context; `params`
    // were built from the launch, whose addresses (null and alignment checked for the peer
    // kernels) the caller guarantees.
    unsafe { fire(f, stream, grid, block, &params) }
}

/// The words a block of a gather or scatter is copied in, its kernel being `key`: every address
/// and the block size are aligned to the copy word of the kernel.
fn copy_words(key: KernelKey, block_bytes: usize) -> u64 {
    let KernelKey::Copy(w) = key else {
        unreachable!("a gather or scatter is a copy")
    };
    (block_bytes / w) as u64
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The wide forms NVSHMEM sums avg and premul_sum in: f32 for 16- and 8-bit floats,
    /// 64-bit (q, r) pairs for integers, the type itself for f32 and f64.
    #[test]
    fn wide_forms() {
        assert_eq!(wide(DataType::F16), (DataType::F32, 1));
        assert_eq!(wide(DataType::BF16), (DataType::F32, 1));
        assert_eq!(wide(DataType::F8E5M2), (DataType::F32, 1));
        assert_eq!(wide(DataType::F32), (DataType::F32, 1));
        assert_eq!(wide(DataType::F64), (DataType::F64, 1));
        assert_eq!(wide(DataType::I8), (DataType::I64, 2));
        assert_eq!(wide(DataType::I64), (DataType::I64, 2));
        assert_eq!(wide(DataType::U16), (DataType::U64, 2));
        assert_eq!(wide(DataType::U64), (DataType::U64, 2));
    }

    #[test]
    fn the_pdl_switch_reads_the_usual_words_and_refuses_others() {
        for on in ["", "1", "on", "TRUE", " yes "] {
            assert_eq!(parse_pdl(on), Ok(true), "{on:?}");
        }
        for off in ["0", "off", "False", "no"] {
            assert_eq!(parse_pdl(off), Ok(false), "{off:?}");
        }
        assert!(parse_pdl("2").unwrap_err().contains("expected"));
    }

    /// Programmatic dependent launch is on by default, off when PEs share a GPU without MPS
    /// thread shares (its early-launched blocks could hold SMs a peer's kernel needs).
    #[test]
    fn pdl_is_off_by_default_when_pes_share_a_gpu_without_thread_shares() {
        assert!(pdl_default(None));
        assert!(pdl_default(Some("0")) && pdl_default(Some("")));
        assert!(!pdl_default(Some("1")));
    }

    #[test]
    fn both_nvlink_files_name_a_kernel_for_every_collective() {
        let reductions = ["all_reduce", "reduce", "reduce_scatter"];
        let moves = ["broadcast", "fcollect", "alltoall", "gather", "scatter"];
        for file in NvlinkSource::ALL {
            for (names, reducing) in [(&reductions[..], true), (&moves[..], false)] {
                for name in names {
                    let f = file.function(name, reducing);
                    assert_eq!(f.map(|f| f.ends_with(name)), Some(true), "{file:?} {name}");
                }
            }
            assert_eq!(file.function("fcollect", true), None);
            assert_eq!(file.function("reduce", false), None);
        }
    }

    /// Reads back what `pointers` point at as the C types of a signature.
    fn read(p: *mut c_void, ty: char) -> u64 {
        // SAFETY: every test below passes the type the pointer was built for.
        unsafe {
            match ty {
                'i' => *(p as *const i32) as u64,
                'u' => *(p as *const u64),
                'd' => (*(p as *const f64)).to_bits(),
                't' => (*(p as *const TeamDescriptor)).chan,
                'p' => (*(p as *const [u64; MAX_PEERS]))[1],
                _ => unreachable!(),
            }
        }
    }

    /// The parameter arrays follow the C signatures: one pointer per parameter, in order, each
    /// at a value of the parameter's type, nothing after the last.
    #[test]
    fn parameter_arrays_follow_the_kernel_signatures() {
        let mut table = [0u64; MAX_PEERS];
        table[1] = 0x2000;
        let team = TeamDescriptor {
            off: [0; MAX_TEAM],
            n: 2,
            me: 0,
            chan: 0xc000,
            ll_bytes: 0,
            check: 0,
            abort: 0,
            status: 0,
            timeout_ns: 0,
            fp: [0; 2],
            lam_bytes: 0,
        };
        let args = |a| Params::Nvlink {
            team: &team,
            args: a,
        };
        let reduce = |root| NvlinkArgs::Reduce {
            root,
            src: 0x10,
            dst: 0x20,
            count: 5,
            scale: 0.5,
        };
        let moving = |root| NvlinkArgs::Move {
            root,
            src: 0x10,
            dst: 0x20,
            bytes: 64,
        };
        let (r1, r0, m1, m0) = (reduce(Some(1)), reduce(None), moving(Some(1)), moving(None));
        let barrier = NvlinkArgs::Barrier { fence: 1 };
        let lamport = |root| NvlinkArgs::Lamport {
            root,
            src: 0x10,
            dst: 0x20,
            count: 5,
            scale: 0.5,
            slot: 4096,
        };
        let (l1, l0) = (lamport(Some(1)), lamport(None));
        let lamport_move = |root| NvlinkArgs::LamportMove {
            root,
            src: 0x10,
            dst: 0x20,
            bytes: 64,
            slot: 4096,
        };
        let (c1, c0) = (lamport_move(Some(1)), lamport_move(None));
        let half = 0.5f64.to_bits();
        let cases: [(Params, &str, &[u64]); 14] = [
            (
                Params::SignalWait(&SignalWaitParams {
                    signal: 0x40,
                    cmp: 5,
                    value: 9,
                    index: 3,
                    control: 0x80,
                    timeout_ns: 77,
                }),
                "uiuuuu",
                &[0x40, 5, 9, 3, 0x80, 77],
            ),
            (
                Params::ReducePeers {
                    peers: &table,
                    n: 2,
                    dst: 0x30,
                    len: 7,
                    scale: 0.5,
                },
                "piuud",
                &[0x2000, 2, 0x30, 7, half],
            ),
            (
                Params::Map {
                    src: 0x10,
                    dst: 0x20,
                    len: 7,
                    factor: 0.5,
                },
                "uuud",
                &[0x10, 0x20, 7, half],
            ),
            (
                Params::Gather {
                    src: &table,
                    n: 3,
                    dst: 0x30,
                    words: 4,
                },
                "piuu",
                &[0x2000, 3, 0x30, 4],
            ),
            (
                Params::Scatter {
                    src: 0x10,
                    dst: &table,
                    n: 3,
                    words: 4,
                },
                "upiu",
                &[0x10, 0x2000, 3, 4],
            ),
            (args(&r1), "tiuuud", &[0xc000, 1, 0x10, 0x20, 5, half]),
            (args(&r0), "tuuud", &[0xc000, 0x10, 0x20, 5, half]),
            (args(&m1), "tiuuu", &[0xc000, 1, 0x10, 0x20, 64]),
            (args(&m0), "tuuu", &[0xc000, 0x10, 0x20, 64]),
            (args(&barrier), "ti", &[0xc000, 1]),
            (
                args(&l1),
                "tiuuudu",
                &[0xc000, 1, 0x10, 0x20, 5, half, 4096],
            ),
            (args(&l0), "tuuudu", &[0xc000, 0x10, 0x20, 5, half, 4096]),
            (args(&c1), "tiuuuu", &[0xc000, 1, 0x10, 0x20, 64, 4096]),
            (args(&c0), "tuuuu", &[0xc000, 0x10, 0x20, 64, 4096]),
        ];
        for (params, types, values) in cases {
            let p = params.pointers();
            let used = p.iter().take_while(|p| !p.is_null()).count();
            assert_eq!(used, types.len(), "{params:?}");
            assert!(p[used..].iter().all(|p| p.is_null()), "{params:?}");
            let got: Vec<u64> = types.chars().zip(p).map(|(t, p)| read(p, t)).collect();
            assert_eq!(got, values, "{params:?}");
        }
    }

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
        assert_eq!(grid(1), 1);
        assert_eq!(grid(1 << 40), MAX_BLOCKS as u32);
    }

    /// Compiles every kernel for `arch` on every core; the errors.
    fn compile_all(
        arch: &str,
        each: impl Fn(KernelKey, &cudarc::nvrtc::Ptx) + Sync,
    ) -> Vec<String> {
        let keys = KernelKey::all();
        let next = std::sync::atomic::AtomicUsize::new(0);
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        std::thread::scope(|s| {
            let workers: Vec<_> = (0..threads)
                .map(|_| {
                    s.spawn(|| {
                        let mut failed = Vec::new();
                        loop {
                            let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                            let Some(&key) = keys.get(i) else { break };
                            match compile::compile(key, arch) {
                                Ok(code) => each(key, &code),
                                Err(e) => failed.push(format!("{arch}: {e}")),
                            }
                        }
                        failed
                    })
                })
                .collect();
            workers
                .into_iter()
                .flat_map(|w| w.join().unwrap())
                .collect()
        })
    }

    /// Fills the on-disk kernel cache with machine code for `NVSHMEM_RS_PRECOMPILE_ARCH`
    /// (default `sm_90`, H100 and H200), so that programs on a GPU machine sharing the cache
    /// (`NVSHMEM_RS_KERNEL_CACHE`) compile nothing. `scripts/gpu-check.sh stage` runs it.
    #[test]
    #[ignore = "fills the kernel cache: run by scripts/gpu-check.sh stage"]
    fn fill_the_kernel_cache() {
        nvrtc_available().unwrap_or_else(|e| panic!("{e}"));
        let arch = std::env::var("NVSHMEM_RS_PRECOMPILE_ARCH").unwrap_or_else(|_| "sm_90".into());
        let failed = compile_all(&arch, |_, _| {});
        assert!(failed.is_empty(), "{}", failed.join("\n\n"));
        println!("{} kernels in the cache for {arch}", KernelKey::all().len());
    }

    /// The most PTX one LL kernel may compile to (bytes of its `.entry`, compute_90, NVRTC
    /// 13.0). Kernels, not modules: a kernel's size is what its calls pay, and a module grows
    /// with every kernel added to it. Whole modules were bounded before (the copies' `ll`:
    /// 229,757 bytes at 6a67b05, 318,520 at f833c9f, 303,736 at df5bd86). 2026-11-28, with
    /// the relayed broadcast: its kernel 57,231, the copies 29,914-50,072 (scatter the largest
    /// of them), the barrier 12,508. The test prints the largest.
    const LL_KERNEL_PTX_MOST: usize = 64_000;

    /// The `.entry` functions of a PTX text: (name, bytes from `.entry` to its closing brace).
    fn ptx_entries(text: &str) -> Vec<(&str, usize)> {
        text.match_indices(".entry ")
            .map(|(at, _)| {
                let rest = &text[at + ".entry ".len()..];
                let name = rest.split(['(', ' ', '\n']).next().unwrap_or("");
                let len = text[at..]
                    .find("\n}\n")
                    .map_or(text.len() - at, |end| end + 3);
                (name, len)
            })
            .collect()
    }

    /// The CI check: every kernel instantiation compiles with NVRTC for compute_90, no GPU
    /// needed, and no LL kernel grows past [`LL_KERNEL_PTX_MOST`]. Ignored by default because it
    /// needs libnvrtc and the CUDA headers; `scripts/check-kernels.sh` installs both from PyPI
    /// and runs it.
    #[test]
    #[ignore = "needs NVRTC 13 and the CUDA headers: run scripts/check-kernels.sh"]
    fn every_kernel_compiles_with_nvrtc() {
        if let Err(e) = nvrtc_available() {
            panic!("cannot check the kernels: {e}");
        }
        let include = cuda_include_dir().unwrap_or_else(|e| panic!("{e}"));
        println!("CUDA headers from {}", include.display());
        let all = KernelKey::all();
        let largest_ll = std::sync::Mutex::new((String::new(), 0usize));
        let failed = compile_all("compute_90", |key, ptx| {
            let text = ptx.to_src();
            for f in key.functions() {
                assert!(text.contains(f), "{}: PTX lacks {f}", key.name());
            }
            // An LL call's time grows with its kernel's size: 4adb6f0 unrolled every wait of
            // the LL copies 8 times, their PTX went from 253 KB to 970 KB (machine code 210 KB
            // to 994 KB) and every call slowed by 0.5-2.6 us on 2 x H200, even of one packet a
            // thread (docs/performance.md, "LL packets in flight").
            if matches!(key, KernelKey::Nvlink(NvlinkSource::Ll, _)) {
                let entries = ptx_entries(&text);
                assert!(!entries.is_empty(), "{}: no .entry in its PTX", key.name());
                for (name, len) in entries {
                    assert!(
                        len <= LL_KERNEL_PTX_MOST,
                        "{} {name}: {len} bytes of PTX, more than {LL_KERNEL_PTX_MOST}: a \
                         larger LL kernel is a slower one; measure it before raising the bound",
                        key.name(),
                    );
                    let mut most = largest_ll.lock().unwrap();
                    if len > most.1 {
                        *most = (format!("{} {name}", key.name()), len);
                    }
                }
            }
        });
        assert!(
            failed.is_empty(),
            "{} of {} failed:\n{}",
            failed.len(),
            all.len(),
            failed.join("\n\n")
        );
        let (name, len) = largest_ll.into_inner().unwrap();
        println!(
            "{} kernels compiled for compute_90; the largest LL kernel's PTX: {name}, {len} \
             bytes (at most {LL_KERNEL_PTX_MOST})",
            all.len(),
        );
    }
}
