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
#![deny(missing_docs)]

pub mod collective;
pub mod element;
pub mod element_ext;
pub mod error;
pub mod heap;
pub(crate) mod kernels;
pub mod rma;
pub mod runtime;
pub mod team;
pub mod timing;

pub use collective::ReduceOp;
pub use element::{Element, ElementKind};
pub use error::{Error, Result};
pub use heap::{SymArray, SymBuffer, SymBufferMut, SymView, SymViewMut};
pub use runtime::{Bootstrap, Runtime, RuntimeBuilder, RuntimeInfo};
pub use team::Team;

/// The raw bindings underneath, for calls this crate does not wrap.
pub use nvshmem_sys as sys;
pub use timing::Timing;
