//! Safe, stream-ordered NVSHMEM for Rust.
//!
//! One process (a PE) per GPU; a [`Runtime`] starts NVSHMEM under any launcher; every PE
//! allocates the same typed [`SymArray`]s from the symmetric heap; [`Team`]s group PEs for
//! collectives.
//!
//! ```no_run
//! use nvshmem::Runtime;
//! let rt = Runtime::init()?;
//! let a = rt.alloc_from(&[rt.my_pe() as f32; 4])?;
//! println!("PE {}/{}: {:?}", rt.my_pe(), rt.n_pes(), a.to_vec()?);
//! # Ok::<(), nvshmem::Error>(())
//! ```
//!
//! The crate is layered, each layer using only those before it, lowest first: the signal
//! comparison ([`rma::Cmp`]) and [`error`]; the element types ([`element`]) and operators
//! ([`ReduceOp`]); the one wrapper of NVSHMEM's functions; this crate's CUDA kernels (their
//! ABI: the team descriptor and `MAX_TEAM`); [`runtime`] (starting and stopping NVSHMEM,
//! agreements, health, stream order); [`memory`] (the symmetric heap); the channels this
//! crate's NVLink kernels run in and the teams' lanes onto them; [`team`]; [`collective`];
//! then [`rma`], [`timing`], [`Graph`] and [`device`] (the program's own kernels that call
//! NVSHMEM's device API); last, behind the `testing` feature, the host reference and
//! tolerance that the GPU tests and `nvshmem-perf` check results against.
//!
//! One back-edge is sanctioned: an owner holds the state that layers above it keep for as
//! long as it lives. The [`Runtime`] owns the job's symmetric heap, its team registry, the
//! algorithms forced for each collective and the device modules retired for freeing (its
//! start makes them, its finalisation ends them), and hands its health the collective layer's
//! reading of call fingerprints; a [`Team`] owns its collectives' plans. Nothing else names a
//! layer above its own: a test (`layers.rs`) reads the sources and fails on any other such
//! import, and on a top-level module given no layer.
// (undocumented_unsafe_blocks and unsafe_op_in_unsafe_fn come from the workspace's lints.)
#![deny(missing_docs)]

mod channel;
mod cmp;
pub mod collective;
pub mod device;
pub mod element;
pub mod error;
mod ffi;
mod graph;
pub(crate) mod kernels;
#[cfg(test)]
mod layers;
pub mod memory;
mod op;
#[cfg(test)]
mod props;
pub mod rma;
pub mod runtime;
pub mod team;
#[cfg(feature = "testing")]
pub mod testing;
pub mod timing;

pub use element::{DataType, Element, ElementKind};
pub use error::{Error, Result};
pub use graph::Graph;
pub use memory::{
    HeapUsage, LocalBuffer, LocalBufferMut, Registered, SymArray, SymBuffer, SymBufferMut, SymView,
    SymViewMut,
};
pub use op::ReduceOp;
pub use runtime::{Bootstrap, Runtime, RuntimeBuilder, RuntimeInfo};
pub use team::Team;
pub use timing::Timing;

/// The raw bindings underneath, for calls this crate does not wrap.
pub use nvshmem_sys as sys;

/// The `half` crate, whose `f16` and `bf16` are element types.
pub use half;

/// The `cudarc` crate this one is built on, with the features it needs: streams
/// ([`Runtime::stream`]), events, kernel launches and copies on symmetric arrays all use its
/// types, so a program needs only `nvshmem` in its `Cargo.toml`.
///
/// ```no_run
/// use nvshmem::cudarc::driver::CudaStream;
/// # let rt = nvshmem::Runtime::init()?;
/// let stream: std::sync::Arc<CudaStream> = rt.context().new_stream()?;
/// # Ok::<(), nvshmem::Error>(())
/// ```
pub use cudarc;

/// What nearly every program names: `use nvshmem::prelude::*;`.
///
/// ```no_run
/// use nvshmem::prelude::*;
/// let rt = Runtime::init()?;
/// let stream = rt.stream().clone();
/// let flags = rt.alloc_zeroed::<u64>(1)?;
/// rt.signal_op(flags.signal(0)?, SignalOp::Add(1), 0, &stream)?;
/// let mut x = rt.alloc_from(&[1.0f32; 8])?;
/// rt.world().all_reduce_in_place(&mut x, ReduceOp::Sum, &stream)?;
/// # Ok::<(), nvshmem::Error>(())
/// ```
pub mod prelude {
    pub use crate::collective::Collective;
    pub use crate::rma::{Cmp, SignalArray, SignalOp, SignalWord};
    pub use crate::{
        DataType, Element, Error, Graph, LocalBuffer, LocalBufferMut, ReduceOp, Registered,
        Runtime, SymArray, SymBuffer, SymBufferMut, Team, Timing,
    };
}
