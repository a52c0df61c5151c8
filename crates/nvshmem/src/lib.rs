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
//! The crate is layered, each layer using only those before it: [`runtime`] (starting and
//! stopping NVSHMEM), [`memory`] (the symmetric heap), [`team`], then [`collective`], [`rma`]
//! and [`timing`]; [`device`] loads the program's own kernels that call NVSHMEM's device
//! API. Below them all sit the element types ([`element`]), the operators
//! ([`ReduceOp`]), the one wrapper of NVSHMEM's functions, and this crate's CUDA kernels.
// (undocumented_unsafe_blocks and unsafe_op_in_unsafe_fn come from the workspace's lints.)
#![deny(missing_docs)]

mod channel;
pub mod collective;
pub mod device;
pub mod element;
pub mod error;
mod ffi;
mod graph;
pub(crate) mod kernels;
pub mod memory;
mod op;
#[cfg(test)]
mod props;
pub mod rma;
pub mod runtime;
pub mod team;
pub mod timing;

pub use collective::ReduceOp;
pub use element::{DataType, Element, ElementKind};
pub use error::{Error, Result};
pub use graph::Graph;
pub use memory::{
    HeapUsage, LocalBuffer, LocalBufferMut, Registered, SymArray, SymBuffer, SymBufferMut, SymView,
    SymViewMut,
};
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
