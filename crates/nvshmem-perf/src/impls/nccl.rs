//! (c) NCCL through its C API, on ordinary device buffers. The communicator is made from a
//! unique id that PE 0 creates and hands to every PE through NVSHMEM, so any launcher works.
use std::{ffi::c_void, sync::Arc};

use anyhow::{anyhow, bail, Context, Result};
use cudarc::driver::{CudaSlice, CudaStream, DevicePtr};
use nvshmem::{collective::Collective, DataType, ReduceOp, Runtime};

use super::{nccl_lib::Nccl, nccl_lib::UniqueId, pe, Implementation, Spec};

/// NCCL's `ncclDataType_t` for `dtype` (nccl.h: int8 0, uint8 1, int32 2, uint32 3, int64 4,
/// uint64 5, float16 6, float32 7, float64 8, bfloat16 9, float8e4m3 10, float8e5m2 11);
/// `None` for what NCCL lacks: 16-bit integers and truth values.
pub fn nccl_type(dtype: DataType) -> Option<i32> {
    Some(match dtype {
        DataType::I8 => 0,
        DataType::U8 => 1,
        DataType::I32 => 2,
        DataType::U32 => 3,
        DataType::I64 => 4,
        DataType::U64 => 5,
        DataType::F16 => 6,
        DataType::F32 => 7,
        DataType::F64 => 8,
        DataType::BF16 => 9,
        DataType::F8E4M3 => 10,
        DataType::F8E5M2 => 11,
        DataType::I16 | DataType::U16 | DataType::Bool8 => return None,
    })
}

/// NCCL's `ncclRedOp_t` for `op` (sum 0, prod 1, max 2, min 3, avg 4); `None` for what NCCL
/// lacks (bitwise operators) and for premul_sum, which needs a communicator-specific operator
/// (`ncclRedOpCreatePreMulSum`) this benchmark does not create.
pub fn nccl_op(op: ReduceOp) -> Option<i32> {
    match op {
        ReduceOp::Sum => Some(0),
        ReduceOp::Prod => Some(1),
        ReduceOp::Max => Some(2),
        ReduceOp::Min => Some(3),
        ReduceOp::Avg => Some(4),
        ReduceOp::And | ReduceOp::Or | ReduceOp::Xor | ReduceOp::PreMulSum(_) => None,
        _ => None,
    }
}

/// The NCCL version (`ncclGetVersion`'s code) that added the 8-bit floats: 2.24.3.
const NCCL_FP8: i32 = 22403;

/// Why NCCL `version` cannot run `spec`, or `None` when it can (a pure function of the
/// arguments, the same on every PE).
pub fn nccl_unsupported(spec: &Spec, version: i32) -> Option<String> {
    let (dtype, op) = (spec.dtype, spec.op);
    match spec.coll {
        Collective::Sync => return Some("NCCL has no sync".into()),
        // The barrier row is a one-element f32 all-reduce whatever -d and -o say.
        Collective::Barrier => return None,
        _ => {}
    }
    if nccl_type(dtype).is_none() {
        return Some(format!("NCCL has no {dtype}"));
    }
    if matches!(dtype, DataType::F8E4M3 | DataType::F8E5M2) && version < NCCL_FP8 {
        let v = format!(
            "{}.{}.{}",
            version / 10000,
            version % 10000 / 100,
            version % 100
        );
        return Some(format!("NCCL {v} has no {dtype} (2.24.3 added fp8)"));
    }
    if spec.coll.reduces() && nccl_op(op).is_none() {
        return Some(match op {
            ReduceOp::PreMulSum(_) => {
                "premul_sum needs ncclRedOpCreatePreMulSum, which this benchmark does not call"
                    .into()
            }
            _ => format!("NCCL has no {} reduction", op.name()),
        });
    }
    match spec.coll {
        Collective::Alltoall | Collective::Gather | Collective::Scatter if spec.in_place => {
            Some("not run in place with NCCL's send/recv".into())
        }
        _ => None,
    }
}

/// NCCL over the world team.
pub struct NcclImpl {
    nccl: &'static Nccl,
    comm: super::nccl_lib::Comm,
    input: Option<(CudaSlice<u8>, u64)>,
    output: Option<(CudaSlice<u8>, u64)>,
    spec: Option<Spec>,
}

impl NcclImpl {
    /// Makes the communicator (collective over all PEs). `nccl` is this PE's loaded NCCL, or
    /// why it is missing; every PE must agree that NCCL loaded before any of them waits in
    /// `ncclCommInitRank`, so a PE without NCCL makes all of them skip it.
    pub fn new(
        rt: &Runtime,
        nccl: Result<&'static Nccl, String>,
        stream: &Arc<CudaStream>,
    ) -> Result<Self> {
        let missing = pe::sum_over_pes(rt, u64::from(nccl.is_err()), stream)?;
        let nccl = nccl.map_err(|e| anyhow!(e))?;
        if missing > 0 {
            bail!("NCCL is missing on {missing} PE(s)");
        }
        let mut id = UniqueId { internal: [0; 128] };
        if rt.my_pe() == 0 {
            // SAFETY: writes one ncclUniqueId.
            nccl.check("ncclGetUniqueId", unsafe { (nccl.get_unique_id)(&mut id) })
                .map_err(|e| anyhow!(e))?;
        }
        let mine: Vec<u8> = id.internal.iter().map(|b| *b as u8).collect();
        let shared = pe::from_pe0(rt, &mine, stream)?;
        for (d, s) in id.internal.iter_mut().zip(&shared) {
            *d = *s as _;
        }
        rt.context().bind_to_thread()?;
        let mut comm = std::ptr::null_mut();
        // SAFETY: comm is written by NCCL; the id is PE 0's, the same on every PE; the CUDA
        // context of this PE's GPU is current, which is the device NCCL binds the comm to.
        let status =
            unsafe { (nccl.comm_init_rank)(&mut comm, rt.n_pes() as i32, id, rt.my_pe() as i32) };
        nccl.check("ncclCommInitRank", status)
            .map_err(|e| anyhow!(e))?;
        Ok(Self {
            nccl,
            comm,
            input: None,
            output: None,
            spec: None,
        })
    }

    fn alloc(stream: &Arc<CudaStream>, bytes: usize) -> Result<(CudaSlice<u8>, u64)> {
        let s = stream.alloc_zeros::<u8>(bytes.max(1))?;
        let ptr = {
            let (p, _sync) = s.device_ptr(stream);
            p
        };
        Ok((s, ptr))
    }
}

impl Implementation for NcclImpl {
    fn name(&self) -> &'static str {
        "nccl"
    }

    fn unsupported(&self, spec: &Spec) -> Option<String> {
        nccl_unsupported(spec, self.nccl.version)
    }

    fn note(&self, spec: &Spec) -> String {
        match spec.coll {
            Collective::Barrier => "barrier is a 1-element f32 all-reduce (NCCL has none)".into(),
            Collective::Alltoall | Collective::Gather | Collective::Scatter => {
                "grouped ncclSend/ncclRecv".into()
            }
            _ => String::new(),
        }
    }

    fn prepare(&mut self, spec: &Spec, stream: &Arc<CudaStream>) -> Result<()> {
        self.release();
        let (in_b, out_b) = if spec.coll == Collective::Barrier {
            (4, 4)
        } else {
            (spec.in_bytes(), spec.out_bytes())
        };
        match spec.in_place_buffer() {
            // In place, one buffer (NCCL's layout, `Spec::in_place_buffer`): the larger of
            // input and output, the other a slice of it.
            Some(ip) => self.input = Some(Self::alloc(stream, ip.elems * spec.dtype.size())?),
            // The barrier's one element, reduced onto itself.
            None if spec.coll == Collective::Barrier => {
                self.input = Some(Self::alloc(stream, in_b)?)
            }
            None => {
                self.input = Some(Self::alloc(stream, in_b)?);
                self.output = Some(Self::alloc(stream, out_b)?);
            }
        }
        stream.synchronize()?;
        self.spec = Some(*spec);
        Ok(())
    }

    fn fill_input(&mut self, input: &[u8], stream: &Arc<CudaStream>) -> Result<()> {
        if let Some((inp, _)) = self.input.as_mut().filter(|_| !input.is_empty()) {
            let mut view = inp.slice_mut(0..input.len());
            stream.memcpy_htod(input, &mut view)?;
        }
        stream.synchronize()?;
        Ok(())
    }

    fn fill_output(&mut self, output: &[u8], stream: &Arc<CudaStream>) -> Result<()> {
        if let Some((out, _)) = self.output.as_mut().filter(|_| !output.is_empty()) {
            if output.len() > out.len() {
                bail!("{} bytes for an output of {}", output.len(), out.len());
            }
            let mut view = out.slice_mut(0..output.len());
            stream.memcpy_htod(output, &mut view)?;
        }
        stream.synchronize()?;
        Ok(())
    }

    fn run_once(&mut self, stream: &Arc<CudaStream>) -> Result<()> {
        let spec = self.spec.context("run_once before prepare")?;
        let n = self.nccl;
        let s = stream.cu_stream();
        // The barrier row is an f32 all-reduce whatever the type; `unsupported` kept out the
        // types and operators NCCL lacks from every other row.
        let dt = nccl_type(spec.dtype).unwrap_or(7);
        let (op, root) = (nccl_op(spec.op).unwrap_or(0), spec.root as i32);
        let cb = spec.chunk_bytes() as u64;
        let inp = self.input.as_ref().map(|b| b.1);
        let out = self.output.as_ref().map(|b| b.1);
        let sz = spec.dtype.size() as u64;
        // In place: input and output where NCCL's rules put them in the one buffer.
        let (src, dst) = match (spec.in_place_buffer(), inp, out) {
            (Some(ip), Some(i), _) => (i + ip.input_at as u64 * sz, i + ip.output_at as u64 * sz),
            (None, Some(i), None) => (i, i),
            (None, Some(i), Some(o)) => (i, o),
            _ => bail!("buffers not prepared"),
        };
        let (src, dst) = (src as *const c_void, dst as *mut c_void);
        let comm = self.comm;
        let chunk = spec.layout.chunk;
        // SAFETY: for every call below, src and dst are live device allocations of this PE's
        // GPU sized by prepare for this spec's layout, and every count and offset stays inside
        // them (offsets are whole chunks below n_pes chunks); comm is a live communicator over
        // the world, peers are below n_pes; the stream belongs to the comm's device.
        let status = unsafe {
            match spec.coll {
                Collective::Barrier => (n.all_reduce)(src, dst, 1, 7, 0, comm, s),
                Collective::AllReduce => (n.all_reduce)(src, dst, spec.count, dt, op, comm, s),
                Collective::ReduceScatter => (n.reduce_scatter)(src, dst, chunk, dt, op, comm, s),
                Collective::Broadcast => (n.broadcast)(src, dst, spec.count, dt, root, comm, s),
                Collective::Reduce => (n.reduce)(src, dst, spec.count, dt, op, root, comm, s),
                Collective::Fcollect => (n.all_gather)(src, dst, chunk, dt, comm, s),
                Collective::Alltoall | Collective::Gather | Collective::Scatter => {
                    n.check("ncclGroupStart", (n.group_start)())
                        .map_err(|e| anyhow!(e))?;
                    let mut st = 0;
                    for p in 0..spec.n_pes {
                        let off = p as u64 * cb;
                        let (sp, dp) = (src.byte_add(off as usize), dst.byte_add(off as usize));
                        let pi = p as i32;
                        match spec.coll {
                            Collective::Alltoall => {
                                st |= (n.send)(sp, chunk, dt, pi, comm, s);
                                st |= (n.recv)(dp, chunk, dt, pi, comm, s);
                            }
                            Collective::Gather => {
                                if p == spec.root {
                                    st |= (n.send)(src, chunk, dt, pi, comm, s);
                                }
                                if spec.my_pe == spec.root {
                                    st |= (n.recv)(dp, chunk, dt, pi, comm, s);
                                }
                            }
                            _ => {
                                if spec.my_pe == spec.root {
                                    st |= (n.send)(sp, chunk, dt, pi, comm, s);
                                }
                                if p == spec.root {
                                    st |= (n.recv)(dst, chunk, dt, pi, comm, s);
                                }
                            }
                        }
                    }
                    let end = (n.group_end)();
                    if st != 0 {
                        st
                    } else {
                        end
                    }
                }
                Collective::Sync => bail!("NCCL has no sync"),
                c => bail!("{c} is not benchmarked"),
            }
        };
        n.check(spec.coll.name(), status).map_err(|e| anyhow!(e))?;
        Ok(())
    }

    fn read_output(&mut self, stream: &Arc<CudaStream>) -> Result<Vec<u8>> {
        let spec = self.spec.context("read before prepare")?;
        stream.synchronize()?;
        // The output buffer, or in place the whole one buffer.
        let host = match (self.input.as_ref(), self.output.as_ref()) {
            (_, Some((o, _))) => stream.clone_dtoh(o)?,
            (Some((i, _)), None) => stream.clone_dtoh(i)?,
            _ => Vec::new(),
        };
        let len = spec
            .in_place_buffer()
            .map_or(spec.out_bytes(), |_| spec.filled_bytes());
        Ok(host.into_iter().take(len).collect())
    }

    fn release(&mut self) {
        self.input = None;
        self.output = None;
        self.spec = None;
    }
}

impl Drop for NcclImpl {
    fn drop(&mut self) {
        self.release();
        // SAFETY: comm came from ncclCommInitRank and is destroyed once; its buffers are freed.
        let status = unsafe { (self.nccl.comm_destroy)(self.comm) };
        if let Err(e) = self.nccl.check("ncclCommDestroy", status) {
            eprintln!("warning: {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::coll::CollectiveExt;

    fn spec(coll: Collective, dtype: DataType, op: ReduceOp) -> Spec {
        Spec {
            coll,
            dtype,
            op,
            root: 0,
            count: 8,
            layout: coll.layout(8, 2),
            in_place: false,
            my_pe: 0,
            n_pes: 2,
        }
    }

    #[test]
    fn nccl_ids_follow_nccl_h() {
        let ids: Vec<Option<i32>> = DataType::ALL.iter().map(|&t| nccl_type(t)).collect();
        let mut known: Vec<i32> = ids.iter().flatten().copied().collect();
        known.sort();
        assert_eq!(known, (0..12).collect::<Vec<_>>());
        assert_eq!(nccl_type(DataType::F32), Some(7));
        assert_eq!(nccl_type(DataType::BF16), Some(9));
        assert_eq!(nccl_type(DataType::F8E5M2), Some(11));
        for t in [DataType::I16, DataType::U16, DataType::Bool8] {
            assert_eq!(nccl_type(t), None, "{t}");
        }
        let ops: Vec<Option<i32>> = ReduceOp::BASIC.iter().map(|&o| nccl_op(o)).collect();
        // sum prod min max and or xor avg
        assert_eq!(
            ops,
            [
                Some(0),
                Some(1),
                Some(3),
                Some(2),
                None,
                None,
                None,
                Some(4)
            ]
        );
        assert_eq!(nccl_op(ReduceOp::PreMulSum(2.0)), None);
    }

    #[test]
    fn what_nccl_lacks_is_unsupported_with_a_reason() {
        let v = 22805;
        let ok = |c, t, o| nccl_unsupported(&spec(c, t, o), v);
        assert_eq!(
            ok(Collective::AllReduce, DataType::F32, ReduceOp::Avg),
            None
        );
        assert_eq!(
            ok(Collective::AllReduce, DataType::I16, ReduceOp::Sum).as_deref(),
            Some("NCCL has no i16")
        );
        assert_eq!(
            ok(Collective::Broadcast, DataType::Bool8, ReduceOp::Sum).as_deref(),
            Some("NCCL has no bool8")
        );
        assert_eq!(
            ok(Collective::AllReduce, DataType::U32, ReduceOp::Xor).as_deref(),
            Some("NCCL has no xor reduction")
        );
        assert!(ok(
            Collective::ReduceScatter,
            DataType::F32,
            ReduceOp::PreMulSum(0.5)
        )
        .unwrap()
        .contains("ncclRedOpCreatePreMulSum"));
        // The operator does not matter where there is none.
        assert_eq!(
            ok(Collective::Fcollect, DataType::U16, ReduceOp::Xor).as_deref(),
            Some("NCCL has no u16")
        );
        assert_eq!(ok(Collective::Fcollect, DataType::F32, ReduceOp::Xor), None);
        // The barrier row is NCCL's f32 all-reduce whatever the type.
        assert_eq!(
            ok(Collective::Barrier, DataType::Bool8, ReduceOp::Xor),
            None
        );
        assert!(ok(Collective::Sync, DataType::F32, ReduceOp::Sum).is_some());
        assert_eq!(
            ok(Collective::AllReduce, DataType::F8E4M3, ReduceOp::Sum),
            None
        );
        let old = nccl_unsupported(
            &spec(Collective::AllReduce, DataType::F8E4M3, ReduceOp::Sum),
            22304,
        );
        assert_eq!(
            old.as_deref(),
            Some("NCCL 2.23.4 has no f8e4m3 (2.24.3 added fp8)")
        );
    }
}
