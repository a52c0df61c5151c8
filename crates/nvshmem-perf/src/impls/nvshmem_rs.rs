//! (a) nvshmem-rs: this library's safe collectives, called through [`adapter::run`] (the
//! library's dynamic entry point, [`Team::collective`], with the call [`call_spec`] describes).
//!
//! Buffers are typed `SymArray<T>` (the safe API is generic over [`Element`]), made per
//! point for the spec's element type ([`nvshmem::with_element_type!`]). The algorithm of each
//! collective is the library's automatic choice unless `--algo` (or `NVSHMEM_RS_ALGORITHMS`)
//! forced one; every row records which ran, as the library's [`Team::plan_of`] reports it.
use std::sync::Arc;

use anyhow::{Context, Result};
use cudarc::driver::CudaStream;
use nvshmem::{
    collective::{CallSpec, Collective, Geometry},
    Element, ElementKind, ReduceOp, Runtime, SymArray, Team,
};

use super::{Implementation, Spec};
use crate::coll::CollectiveExt;

/// The few lines that call the safe API.
pub mod adapter {
    use super::*;

    /// Runs `spec.coll` once on `stream` with the safe API ([`Team::collective`]). `output`
    /// is `None` in place: then `input` is the one buffer of [`Spec::in_place_buffer`], laid
    /// out as the library's in-place forms take it.
    pub fn run<T: Element>(
        team: &Team,
        spec: &Spec,
        input: &mut SymArray<T>,
        output: Option<&mut SymArray<T>>,
        stream: &Arc<CudaStream>,
    ) -> Result<()> {
        let what = call_spec(spec).kind().in_place(output.is_none());
        match output {
            Some(out) => team.collective(what, Some(&*input), out, stream)?,
            None => team.collective(what, None::<&SymArray<T>>, input, stream)?,
        }
        Ok(())
    }

    /// Whether the safe API has `spec` (same answer on every PE).
    pub fn unsupported(spec: &Spec) -> Option<String> {
        // From the table: a collective added to it needs no line here. Barrier and sync
        // have one form, which runs whatever --in-place says.
        let g = spec.coll.geometry();
        match spec.coll {
            c if spec.in_place && !g.has_in_place() && g != Geometry::None => {
                Some(format!("{c} has no in-place form"))
            }
            c if c.reduces() => unsupported_reduction(spec.dtype, spec.op),
            _ => None,
        }
    }

    /// Why the library cannot reduce `dtype` by `op` ([`ReduceOp::supports_type`]), if it
    /// cannot.
    pub fn unsupported_reduction(dtype: nvshmem::DataType, op: ReduceOp) -> Option<String> {
        if op.supports_type(dtype) {
            return None;
        }
        Some(match (op, dtype.kind()) {
            _ if !op.applies_to(dtype.kind()) => {
                format!("{} is not defined for {dtype}", op.name())
            }
            (ReduceOp::PreMulSum(_), ElementKind::Signed | ElementKind::Unsigned) => format!(
                "{op} of {dtype}: an integer type is scaled by a whole number (non-negative for \
                 unsigned types)"
            ),
            _ => format!("nvshmem-rs has no {} reduction of {dtype}", op.name()),
        })
    }
}

trait Buffers {
    fn fill(&mut self, bytes: &[u8], stream: &Arc<CudaStream>) -> Result<()>;
    fn fill_output(&mut self, bytes: &[u8], stream: &Arc<CudaStream>) -> Result<()>;
    fn read(&self) -> Result<Vec<u8>>;
    fn run(&mut self, team: &Team, spec: &Spec, stream: &Arc<CudaStream>) -> Result<()>;
}

struct Typed<T: Element> {
    input: SymArray<T>,
    output: Option<SymArray<T>>,
}

/// Copies `bytes` into `array` on `stream` and waits: elements written as bytes, so any bit
/// pattern reaches the device as it is.
fn copy_bytes_in<T: Element>(
    array: &mut SymArray<T>,
    bytes: &[u8],
    stream: &Arc<CudaStream>,
) -> Result<()> {
    let mut v = vec![T::default(); bytes.len() / std::mem::size_of::<T>()];
    bytemuck::cast_slice_mut::<T, u8>(&mut v).copy_from_slice(bytes);
    array.copy_from_host_on(&v, stream)?;
    stream.synchronize()?;
    Ok(())
}

impl<T: Element> Buffers for Typed<T> {
    fn fill(&mut self, bytes: &[u8], stream: &Arc<CudaStream>) -> Result<()> {
        copy_bytes_in(&mut self.input, bytes, stream)
    }
    fn fill_output(&mut self, bytes: &[u8], stream: &Arc<CudaStream>) -> Result<()> {
        match self.output.as_mut() {
            Some(out) => copy_bytes_in(out, bytes, stream),
            None => Ok(()),
        }
    }
    fn read(&self) -> Result<Vec<u8>> {
        let v = self.output.as_ref().unwrap_or(&self.input).to_vec()?;
        Ok(bytemuck::cast_slice(&v).to_vec())
    }
    fn run(&mut self, team: &Team, spec: &Spec, stream: &Arc<CudaStream>) -> Result<()> {
        adapter::run(team, spec, &mut self.input, self.output.as_mut(), stream)
    }
}

/// The library's description of the call `spec` makes ([`Team::plan_of`]): one block of the
/// layout is the library's count.
pub fn call_spec(spec: &Spec) -> CallSpec {
    let count = if spec.coll.is_sync_only() {
        0
    } else {
        spec.layout.chunk
    };
    CallSpec::new(spec.coll, spec.dtype, count)
        .op(spec.op)
        .root(spec.root)
        .in_place(spec.in_place)
}

fn typed<T: Element>(rt: &Runtime, team: &Team, spec: &Spec) -> Result<Box<dyn Buffers>> {
    // A deliberate baseline of scratch, one buffer's worth for the collectives that may use
    // it (rooted reductions reduce into it; some reduce-scatters, such as premul_sum or
    // i16/u16 blocks over 1 MiB, and in-place all-reduces by this crate's kernels, fp8 or a
    // forced peer_kernel, go through it), reserved before the plan is asked for (collective,
    // like allocating). The automatic choice passes over an algorithm that needs more scratch
    // than is reserved while another fits, so this baseline, not only the call, steers which
    // algorithm is measured: what the plan below sees reserved is this.
    let scratch = match spec.coll {
        Collective::Reduce => spec.layout.out_elems,
        Collective::ReduceScatter => spec.layout.in_elems,
        Collective::AllReduce if spec.in_place => spec.layout.in_elems,
        _ => 0,
    };
    if scratch > 0 {
        rt.reserve_scratch(scratch * std::mem::size_of::<T>())?;
    }
    // And what the call will run needs, which a forced algorithm may make more (the same plan
    // on every PE, so every PE reserves alike; a call that would be refused reserves nothing
    // and is refused when made).
    if let Ok(plan) = team.plan_of(&call_spec(spec)) {
        if plan.scratch_bytes > 0 {
            rt.reserve_scratch(plan.scratch_bytes)?;
        }
    }
    // In place, one buffer as NCCL lays it out, which is the library's in-place layout too:
    // the output of all-gather and gather (n blocks, the input this PE's), the input of
    // reduce-scatter and scatter (the output this PE's block).
    let input = match spec.in_place_buffer() {
        Some(ip) => rt.alloc_zeroed::<T>(ip.elems)?,
        None => rt.alloc_zeroed::<T>(spec.layout.in_elems)?,
    };
    let output = if spec.in_place {
        None
    } else {
        Some(rt.alloc_zeroed::<T>(spec.layout.out_elems)?)
    };
    Ok(Box::new(Typed { input, output }))
}

/// The safe API.
pub struct NvshmemRs {
    rt: Runtime,
    team: Team,
    bufs: Option<Box<dyn Buffers>>,
    spec: Option<Spec>,
}

impl NvshmemRs {
    /// Over `team`.
    pub fn new(rt: Runtime, team: Team) -> Self {
        Self {
            rt,
            team,
            bufs: None,
            spec: None,
        }
    }
}

impl Implementation for NvshmemRs {
    fn name(&self) -> &'static str {
        "nvshmem-rs"
    }

    fn unsupported(&self, spec: &Spec) -> Option<String> {
        adapter::unsupported(spec)
    }

    /// What the library runs `spec` with ([`Team::plan_of`]); for a call it refuses, the
    /// forced algorithm that refused it, or `-`.
    fn algorithm(&self, spec: &Spec) -> String {
        match self.team.plan_of(&call_spec(spec)) {
            Ok(plan) => plan.algorithm.into(),
            Err(_) => self.rt.forced_algorithm(spec.coll).unwrap_or("-").into(),
        }
    }

    fn prepare(&mut self, spec: &Spec, _stream: &Arc<CudaStream>) -> Result<()> {
        self.release();
        let (rt, team) = (&self.rt, &self.team);
        self.bufs = Some(nvshmem::with_element_type!(spec.dtype, T => typed::<T>(rt, team, spec)?));
        self.spec = Some(*spec);
        Ok(())
    }

    fn fill_input(&mut self, input: &[u8], stream: &Arc<CudaStream>) -> Result<()> {
        self.bufs
            .as_mut()
            .context("not prepared")?
            .fill(input, stream)
    }

    fn fill_output(&mut self, output: &[u8], stream: &Arc<CudaStream>) -> Result<()> {
        self.bufs
            .as_mut()
            .context("not prepared")?
            .fill_output(output, stream)
    }

    fn run_once(&mut self, stream: &Arc<CudaStream>) -> Result<()> {
        let spec = self.spec.context("not prepared")?;
        let team = &self.team;
        self.bufs
            .as_mut()
            .context("not prepared")?
            .run(team, &spec, stream)
    }

    fn read_output(&mut self, stream: &Arc<CudaStream>) -> Result<Vec<u8>> {
        stream.synchronize()?;
        self.bufs.as_ref().context("not prepared")?.read()
    }

    fn release(&mut self) {
        self.bufs = None;
        self.spec = None;
    }
}

#[cfg(test)]
mod tests {
    use super::adapter::unsupported_reduction;
    use nvshmem::{DataType, ReduceOp};

    #[test]
    fn the_library_is_asked_about_the_call_the_benchmark_makes() {
        use crate::coll::CollectiveExt;
        use nvshmem::collective::Collective;
        let spec = |coll: Collective, in_place| {
            let (n, me) = (4, 1);
            let count = coll.count_for(1 << 20, 2, n);
            super::Spec {
                coll,
                dtype: DataType::BF16,
                op: ReduceOp::Avg,
                root: 3,
                count,
                layout: coll.layout(count, n),
                in_place,
                my_pe: me,
                n_pes: n,
            }
        };
        // The library's count is one block: the PE's share of a chunked collective.
        let s = super::call_spec(&spec(Collective::Fcollect, true));
        assert_eq!(
            (s.collective(), s.count(), s.is_in_place()),
            (Collective::Fcollect, 1 << 17, true)
        );
        let s = super::call_spec(&spec(Collective::ReduceScatter, false));
        assert_eq!((s.count(), s.operator()), (1 << 17, ReduceOp::Avg));
        let s = super::call_spec(&spec(Collective::AllReduce, false));
        assert_eq!(s.count(), 1 << 19);
        let s = super::call_spec(&spec(Collective::Gather, false));
        assert_eq!((s.count(), s.root_pe()), (1 << 17, 3));
        assert_eq!(
            super::call_spec(&spec(Collective::Barrier, false)).count(),
            0
        );
    }

    /// Only the in-place forms the library lacks are turned away (alltoall's, with the words
    /// the rows have always had), from the table of collectives; barrier and sync run as
    /// they are.
    #[test]
    fn in_place_forms_the_library_lacks_are_skipped() {
        use crate::coll::CollectiveExt;
        use nvshmem::collective::{Collective, Geometry};
        for coll in Collective::ALL {
            for in_place in [false, true] {
                let n = 2;
                let count = coll.count_for(1 << 10, 4, n);
                let spec = super::Spec {
                    coll,
                    dtype: DataType::F32,
                    op: ReduceOp::Sum,
                    root: 0,
                    count,
                    layout: coll.layout(count, n),
                    in_place,
                    my_pe: 0,
                    n_pes: n,
                };
                let why = super::adapter::unsupported(&spec);
                let lacks = in_place && coll.geometry() == Geometry::Exchanged;
                assert_eq!(why.is_some(), lacks, "{coll} in place {in_place}: {why:?}");
            }
        }
        let alltoall = Collective::Alltoall;
        let spec = super::Spec {
            coll: alltoall,
            dtype: DataType::F32,
            op: ReduceOp::Sum,
            root: 0,
            count: 4,
            layout: alltoall.layout(4, 2),
            in_place: true,
            my_pe: 0,
            n_pes: 2,
        };
        assert_eq!(
            super::adapter::unsupported(&spec).as_deref(),
            Some("alltoall has no in-place form")
        );
    }

    #[test]
    fn reductions_the_library_lacks_say_why() {
        assert_eq!(unsupported_reduction(DataType::F32, ReduceOp::Sum), None);
        assert_eq!(unsupported_reduction(DataType::I16, ReduceOp::Xor), None);
        assert_eq!(unsupported_reduction(DataType::I32, ReduceOp::Avg), None);
        assert_eq!(
            unsupported_reduction(DataType::BF16, ReduceOp::PreMulSum(0.5)),
            None
        );
        assert_eq!(unsupported_reduction(DataType::Bool8, ReduceOp::And), None);
        assert_eq!(
            unsupported_reduction(DataType::F32, ReduceOp::Xor).unwrap(),
            "xor is not defined for f32"
        );
        let e = unsupported_reduction(DataType::I32, ReduceOp::PreMulSum(0.5)).unwrap();
        assert!(e.contains("whole number"), "{e}");
        // The library's own kernels compute fp8 products (in f32).
        assert_eq!(
            unsupported_reduction(DataType::F8E4M3, ReduceOp::Prod),
            None
        );
    }
}
