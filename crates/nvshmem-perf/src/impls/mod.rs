//! The implementations compared, behind one interface.
//!
//! Each implementation prepares its buffers for one [`Spec`], runs the collective once per
//! [`Implementation::run_once`] on the benchmark's stream (so the driver can time it, loop it,
//! or capture it in a CUDA graph), and exposes its input and output for `--check`.
use std::sync::Arc;

use anyhow::Result;
use cudarc::driver::CudaStream;
use nvshmem::{collective::Collective, DataType, ReduceOp};

use crate::coll::{CollectiveExt, InPlace, Layout};

pub mod nccl;
pub mod nccl_lib;
pub mod nvshmem_raw;
pub mod nvshmem_rs;
pub mod pe;

/// One point to run: a collective at one size.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Spec {
    /// The collective.
    pub coll: Collective,
    /// Element type.
    pub dtype: DataType,
    /// Operator (used by reductions).
    pub op: ReduceOp,
    /// Root PE (used by rooted collectives).
    pub root: usize,
    /// nccl-tests' count: elements of the larger buffer.
    pub count: usize,
    /// Buffer sizes.
    pub layout: Layout,
    /// In place.
    pub in_place: bool,
    /// This PE's index in the team.
    pub my_pe: usize,
    /// PEs in the team.
    pub n_pes: usize,
}

impl Spec {
    /// Input bytes of one PE.
    pub fn in_bytes(&self) -> usize {
        self.layout.in_elems * self.dtype.size()
    }
    /// Output bytes of one PE.
    pub fn out_bytes(&self) -> usize {
        self.layout.out_elems * self.dtype.size()
    }
    /// Bytes of one chunk.
    pub fn chunk_bytes(&self) -> usize {
        self.layout.chunk * self.dtype.size()
    }
    /// In place, the one buffer and where input and output lie in it (NCCL's convention,
    /// [`InPlace`]); `None` out of place.
    pub fn in_place_buffer(&self) -> Option<InPlace> {
        self.in_place
            .then(|| self.coll.in_place(self.layout, self.my_pe))
            .flatten()
    }
    /// Bytes of the buffer [`Implementation::fill_input`] fills: the input, or in place the
    /// one buffer.
    pub fn filled_bytes(&self) -> usize {
        match self.in_place_buffer() {
            Some(ip) => ip.elems * self.dtype.size(),
            None => self.in_bytes(),
        }
    }
}

/// A collective implementation under test.
///
/// The driver calls, for each point: [`unsupported`](Self::unsupported), then
/// [`prepare`](Self::prepare) (collectively on every PE), any number of
/// [`run_once`](Self::run_once), [`fill_input`](Self::fill_input) /
/// [`fill_output`](Self::fill_output) / [`read_output`](Self::read_output) for checking (in
/// graph mode around a launch of a graph of `run_once` captured before, so buffers are
/// written in place, never reallocated), and [`release`](Self::release).
pub trait Implementation {
    /// The name in tables and files.
    fn name(&self) -> &'static str;
    /// Why this implementation cannot run `spec`, or `None` when it can. Must give the same
    /// answer on every PE (a PE that skips would leave the others waiting).
    fn unsupported(&self, spec: &Spec) -> Option<String>;
    /// What is actually run, when the collective's name does not say it (e.g. NCCL's barrier).
    fn note(&self, _spec: &Spec) -> String {
        String::new()
    }
    /// The algorithm that runs `spec`, for implementations that have a choice (`-` for the
    /// others).
    fn algorithm(&self, _spec: &Spec) -> String {
        "-".into()
    }
    /// Allocates the buffers for `spec` (collective for symmetric memory).
    fn prepare(&mut self, spec: &Spec, stream: &Arc<CudaStream>) -> Result<()>;
    /// Copies `input` into the input buffer; returns once copied. Out of place `input` is one
    /// PE's `in_bytes`; in place it is the whole one buffer ([`Spec::in_place_buffer`], as
    /// [`crate::check::make_input`] lays it out), input and all.
    fn fill_input(&mut self, input: &[u8], stream: &Arc<CudaStream>) -> Result<()>;
    /// Copies `output` (one PE's `out_bytes`, [`crate::check::make_output`]'s poison) into the
    /// output buffer; returns once copied. Called out of place only: in place the one buffer is
    /// [`fill_input`](Self::fill_input)'s.
    fn fill_output(&mut self, output: &[u8], stream: &Arc<CudaStream>) -> Result<()>;
    /// Enqueues the collective once on `stream`; does not wait.
    fn run_once(&mut self, stream: &Arc<CudaStream>) -> Result<()>;
    /// The output buffer (one PE's `out_bytes`), after waiting for `stream`; in place the whole
    /// one buffer, whose output part [`crate::check::count_wrong`] finds by the same layout.
    fn read_output(&mut self, stream: &Arc<CudaStream>) -> Result<Vec<u8>>;
    /// Frees the buffers of the last `prepare` (collective for symmetric memory).
    fn release(&mut self);
}
