//! (b) NVSHMEM's on-stream collectives called raw through `nvshmem-sys`, on symmetric
//! buffers from the safe crate. Typed functions are resolved by name
//! (`nvshmemx_<type>_<op>_reduce_on_stream`), as a C program would spell them; NVSHMEM reduces
//! its own types only ([`nvshmem_reduces`]), and moves bytes, so data movement runs for every
//! type.
use std::{ffi::c_void, sync::Arc};

use anyhow::{bail, Context, Result};
use cudarc::driver::{sys::CUstream, CudaStream};
use nvshmem::{collective::Collective, DataType, ReduceOp, Runtime, SymArray};
use nvshmem_sys::nvshmem_team_t;

use super::{Implementation, Spec};
use crate::coll::CollectiveExt;

/// Whether NVSHMEM has a reduction of `dtype` by `op`, or why not (the library's operator
/// table: [`ReduceOp::nvshmem_has`]). (The library builds the others, avg, premul_sum, fp8
/// and bool8, from these or in its own kernels.)
pub fn nvshmem_reduces(dtype: DataType, op: ReduceOp) -> Result<(), String> {
    if op.nvshmem_has(dtype) {
        Ok(())
    } else if !dtype.is_core() {
        Err(format!("NVSHMEM has no {dtype} reductions"))
    } else if op.nvshmem_name().is_none() {
        Err(format!("NVSHMEM has no {} reduction", op.name()))
    } else {
        Err(format!(
            "NVSHMEM has no {} reduction of {dtype} (integers only)",
            op.name()
        ))
    }
}

type TypedFn =
    unsafe extern "C" fn(nvshmem_team_t, *mut c_void, *const c_void, usize, CUstream) -> i32;

/// Raw NVSHMEM.
pub struct NvshmemRaw {
    rt: Runtime,
    team: nvshmem_team_t,
    world: bool,
    symbols: &'static libloading::Library,
    input: Option<SymArray<u8>>,
    output: Option<SymArray<u8>>,
    spec: Option<Spec>,
    typed: Option<TypedFn>,
}

impl NvshmemRaw {
    /// Over `team` (a raw NVSHMEM team handle).
    pub fn new(rt: Runtime, team: nvshmem_team_t) -> Result<Self> {
        nvshmem_sys::lib()?;
        let path = nvshmem_sys::loaded_path().context("NVSHMEM's path")?;
        // SAFETY: the library is already loaded by nvshmem-sys (this only takes another
        // reference); it stays loaded for the life of the process (leaked, never unloaded).
        let lib = unsafe {
            libloading::os::unix::Library::open(
                Some(path),
                libloading::os::unix::RTLD_NOW | libloading::os::unix::RTLD_GLOBAL,
            )
        }
        .context("reopening NVSHMEM to look up typed collectives")?;
        Ok(Self {
            rt,
            team,
            world: team == nvshmem_sys::teams::NVSHMEM_TEAM_WORLD,
            symbols: Box::leak(Box::new(lib.into())),
            input: None,
            output: None,
            spec: None,
            typed: None,
        })
    }

    fn symbol_name(spec: &Spec) -> Option<String> {
        let (t, o) = (spec.dtype.nvshmem_name(), spec.op.nvshmem_name()?);
        match spec.coll {
            Collective::AllReduce => Some(format!("nvshmemx_{t}_{o}_reduce_on_stream")),
            Collective::ReduceScatter => Some(format!("nvshmemx_{t}_{o}_reducescatter_on_stream")),
            _ => None,
        }
    }

    fn lookup(&self, name: &str) -> Option<TypedFn> {
        // SAFETY: every `nvshmemx_<type>_<op>_reduce(scatter)_on_stream` has this signature
        // (team, dest, source, count, stream) -> int, with typed pointers we pass as void.
        unsafe {
            self.symbols
                .get::<TypedFn>(name.as_bytes())
                .ok()
                .map(|s| *s)
        }
    }
}

impl Implementation for NvshmemRaw {
    fn name(&self) -> &'static str {
        "nvshmem"
    }

    fn unsupported(&self, spec: &Spec) -> Option<String> {
        match spec.coll {
            Collective::Reduce | Collective::Gather | Collective::Scatter => {
                return Some("NVSHMEM has no rooted reduce, gather or scatter".into())
            }
            Collective::Fcollect | Collective::Alltoall | Collective::ReduceScatter
                if spec.in_place =>
            {
                return Some("NVSHMEM does not allow this collective in place".into())
            }
            Collective::AllReduce | Collective::ReduceScatter => {
                if let Err(why) = nvshmem_reduces(spec.dtype, spec.op) {
                    return Some(why);
                }
            }
            _ => {}
        }
        let name = Self::symbol_name(spec)?;
        self.lookup(&name)
            .is_none()
            .then(|| format!("NVSHMEM exports no {name}"))
    }

    fn prepare(&mut self, spec: &Spec, _stream: &Arc<CudaStream>) -> Result<()> {
        self.release();
        if !spec.coll.is_sync_only() {
            // In place, the one buffer (NCCL's layout); here only where input and output are
            // the whole of it, since NVSHMEM allows no other in-place collective.
            self.input = Some(self.rt.alloc_zeroed::<u8>(spec.filled_bytes())?);
            if !spec.in_place {
                self.output = Some(self.rt.alloc_zeroed::<u8>(spec.out_bytes())?);
            }
        }
        self.typed = Self::symbol_name(spec).and_then(|n| self.lookup(&n));
        self.spec = Some(*spec);
        Ok(())
    }

    fn fill_input(&mut self, input: &[u8], stream: &Arc<CudaStream>) -> Result<()> {
        if let Some(a) = self.input.as_mut() {
            a.copy_from_host_on(input, stream)?;
            stream.synchronize()?;
        }
        Ok(())
    }

    fn fill_output(&mut self, output: &[u8], stream: &Arc<CudaStream>) -> Result<()> {
        if let Some(a) = self.output.as_mut() {
            a.copy_from_host_on(output, stream)?;
            stream.synchronize()?;
        }
        Ok(())
    }

    fn run_once(&mut self, stream: &Arc<CudaStream>) -> Result<()> {
        let spec = self.spec.context("run_once before prepare")?;
        let lib = nvshmem_sys::lib()?;
        let s = stream.cu_stream();
        let base = self.input.as_ref().map_or(0, |a| a.device_ptr_raw());
        let (src, dst) = match (spec.in_place_buffer(), self.output.as_ref()) {
            (Some(ip), _) => {
                let at = |elems: usize| base + (elems * spec.dtype.size()) as u64;
                (at(ip.input_at), at(ip.output_at))
            }
            (None, Some(out)) => (base, out.device_ptr_raw()),
            (None, None) => (base, base),
        };
        let (src, dst) = (src as *const c_void, dst as *mut c_void);
        let team = self.team;
        // SAFETY: for every call below, src and dst are live symmetric allocations of
        // spec.in_bytes() and spec.out_bytes() on every PE (prepare is collective and all PEs
        // run the same spec), or in place the input and output parts of one allocation of
        // spec.filled_bytes(); the byte and element counts passed are those of the layout, so
        // NVSHMEM stays inside them; the stream belongs to the runtime's context.
        let status = unsafe {
            match spec.coll {
                Collective::Barrier if self.world => {
                    lib.nvshmemx_barrier_all_on_stream(s);
                    0
                }
                Collective::Barrier => lib.nvshmemx_barrier_on_stream(team, s),
                Collective::Sync if self.world => {
                    lib.nvshmemx_sync_all_on_stream(s);
                    0
                }
                Collective::Sync => lib.nvshmemx_team_sync_on_stream(team, s),
                Collective::AllReduce => {
                    let f = self.typed.context("typed reduce not resolved")?;
                    f(team, dst, src, spec.count, s)
                }
                Collective::ReduceScatter => {
                    let f = self.typed.context("typed reducescatter not resolved")?;
                    f(team, dst, src, spec.layout.chunk, s)
                }
                Collective::Broadcast => lib.nvshmemx_broadcastmem_on_stream(
                    team,
                    dst,
                    src,
                    spec.out_bytes(),
                    spec.root as i32,
                    s,
                ),
                Collective::Fcollect => {
                    lib.nvshmemx_fcollectmem_on_stream(team, dst, src, spec.chunk_bytes(), s)
                }
                Collective::Alltoall => {
                    lib.nvshmemx_alltoallmem_on_stream(team, dst, src, spec.chunk_bytes(), s)
                }
                Collective::Reduce | Collective::Gather | Collective::Scatter => {
                    bail!("{} is not supported by raw NVSHMEM", spec.coll.name())
                }
                c => bail!("{c} is not benchmarked"),
            }
        };
        if status != 0 {
            bail!("NVSHMEM {} returned {status}", spec.coll.name());
        }
        Ok(())
    }

    fn read_output(&mut self, stream: &Arc<CudaStream>) -> Result<Vec<u8>> {
        stream.synchronize()?;
        match self.output.as_ref().or(self.input.as_ref()) {
            Some(a) => Ok(a.to_vec()?),
            None => Ok(Vec::new()),
        }
    }

    fn release(&mut self) {
        // Output first, then input: the reverse of allocation, the same on every PE.
        self.output = None;
        self.input = None;
        self.spec = None;
        self.typed = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nvshmem_reduces_its_own_types_and_operators() {
        for &t in DataType::ALL {
            for op in [ReduceOp::Sum, ReduceOp::Prod, ReduceOp::Min, ReduceOp::Max] {
                assert_eq!(nvshmem_reduces(t, op).is_ok(), t.is_core(), "{t} {op}");
            }
            for op in [ReduceOp::And, ReduceOp::Or, ReduceOp::Xor] {
                assert_eq!(nvshmem_reduces(t, op).is_ok(), t.is_integer(), "{t} {op}");
            }
            assert!(nvshmem_reduces(t, ReduceOp::Avg).is_err());
            assert!(nvshmem_reduces(t, ReduceOp::PreMulSum(2.0)).is_err());
        }
        assert_eq!(
            nvshmem_reduces(DataType::F8E4M3, ReduceOp::Sum).unwrap_err(),
            "NVSHMEM has no f8e4m3 reductions"
        );
        assert_eq!(
            nvshmem_reduces(DataType::F32, ReduceOp::Xor).unwrap_err(),
            "NVSHMEM has no xor reduction of f32 (integers only)"
        );
        assert_eq!(
            nvshmem_reduces(DataType::I32, ReduceOp::Avg).unwrap_err(),
            "NVSHMEM has no avg reduction"
        );
    }
}
