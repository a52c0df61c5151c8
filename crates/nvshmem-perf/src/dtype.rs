//! Element types and reduction operators as the benchmark names them, with the host-side
//! encoding used to fill inputs and check outputs.
use clap::ValueEnum;
use serde::Serialize;

/// An element type (`-d`). Names follow nccl-tests where it has one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum DType {
    /// 32-bit float (nccl-tests `float`).
    #[value(alias = "float")]
    F32,
    /// 64-bit float (`double`).
    #[value(alias = "double")]
    F64,
    /// IEEE half (`half`).
    #[value(alias = "half")]
    F16,
    /// bfloat16.
    #[value(alias = "bfloat16")]
    Bf16,
    /// 8-bit signed (`int8`).
    #[value(alias = "int8")]
    I8,
    /// 16-bit signed (`int16`; NVSHMEM only, NCCL has no 16-bit integers).
    #[value(alias = "int16")]
    I16,
    /// 32-bit signed (`int32`, `int`).
    #[value(alias = "int32", alias = "int")]
    I32,
    /// 64-bit signed (`int64`).
    #[value(alias = "int64")]
    I64,
    /// 8-bit unsigned (`uint8`).
    #[value(alias = "uint8")]
    U8,
    /// 16-bit unsigned (`uint16`; NVSHMEM only).
    #[value(alias = "uint16")]
    U16,
    /// 32-bit unsigned (`uint32`).
    #[value(alias = "uint32")]
    U32,
    /// 64-bit unsigned (`uint64`).
    #[value(alias = "uint64")]
    U64,
}

impl DType {
    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            DType::I8 | DType::U8 => 1,
            DType::F16 | DType::Bf16 | DType::I16 | DType::U16 => 2,
            DType::F32 | DType::I32 | DType::U32 => 4,
            DType::F64 | DType::I64 | DType::U64 => 8,
        }
    }

    /// The short name used in tables and files.
    pub fn name(self) -> &'static str {
        match self {
            DType::F32 => "f32",
            DType::F64 => "f64",
            DType::F16 => "f16",
            DType::Bf16 => "bf16",
            DType::I8 => "i8",
            DType::I16 => "i16",
            DType::U16 => "u16",
            DType::I32 => "i32",
            DType::I64 => "i64",
            DType::U8 => "u8",
            DType::U32 => "u32",
            DType::U64 => "u64",
        }
    }

    /// NVSHMEM's name in its typed functions (`nvshmemx_<name>_sum_reduce_on_stream`).
    pub fn nvshmem_name(self) -> &'static str {
        match self {
            DType::F32 => "float",
            DType::F64 => "double",
            DType::F16 => "half",
            DType::Bf16 => "bfloat16",
            DType::I8 => "int8",
            DType::I16 => "int16",
            DType::U16 => "uint16",
            DType::I32 => "int32",
            DType::I64 => "int64",
            DType::U8 => "uint8",
            DType::U32 => "uint32",
            DType::U64 => "uint64",
        }
    }

    /// NCCL's `ncclDataType_t` value (nccl.h: int8 0, uint8 1, int32 2, uint32 3, int64 4,
    /// uint64 5, float16 6, float32 7, float64 8, bfloat16 9); `None` for the 16-bit integers,
    /// which NCCL lacks.
    pub fn nccl(self) -> Option<i32> {
        Some(match self {
            DType::I8 => 0,
            DType::U8 => 1,
            DType::I32 => 2,
            DType::U32 => 3,
            DType::I64 => 4,
            DType::U64 => 5,
            DType::F16 => 6,
            DType::F32 => 7,
            DType::F64 => 8,
            DType::Bf16 => 9,
            DType::I16 | DType::U16 => return None,
        })
    }

    /// Whether the type is floating point (checked with a tolerance, integers exactly).
    pub fn is_float(self) -> bool {
        matches!(self, DType::F32 | DType::F64 | DType::F16 | DType::Bf16)
    }

    /// Writes `v` (a small integer in every use here) as one element into `out`.
    pub fn encode(self, v: f64, out: &mut [u8]) {
        match self {
            DType::F32 => out.copy_from_slice(&(v as f32).to_le_bytes()),
            DType::F64 => out.copy_from_slice(&v.to_le_bytes()),
            DType::F16 => out.copy_from_slice(&half::f16::from_f64(v).to_le_bytes()),
            DType::Bf16 => out.copy_from_slice(&half::bf16::from_f64(v).to_le_bytes()),
            DType::I8 => out.copy_from_slice(&(v as i8).to_le_bytes()),
            DType::I16 => out.copy_from_slice(&(v as i16).to_le_bytes()),
            DType::U16 => out.copy_from_slice(&(v as u16).to_le_bytes()),
            DType::I32 => out.copy_from_slice(&(v as i32).to_le_bytes()),
            DType::I64 => out.copy_from_slice(&(v as i64).to_le_bytes()),
            DType::U8 => out.copy_from_slice(&(v as u8).to_le_bytes()),
            DType::U32 => out.copy_from_slice(&(v as u32).to_le_bytes()),
            DType::U64 => out.copy_from_slice(&(v as u64).to_le_bytes()),
        }
    }

    /// Reads one element from `b` (exactly `size()` bytes).
    pub fn decode(self, b: &[u8]) -> f64 {
        fn arr<const N: usize>(b: &[u8]) -> [u8; N] {
            b.try_into().expect("caller passes size() bytes")
        }
        match self {
            DType::F32 => f32::from_le_bytes(arr(b)) as f64,
            DType::F64 => f64::from_le_bytes(arr(b)),
            DType::F16 => half::f16::from_le_bytes(arr(b)).to_f64(),
            DType::Bf16 => half::bf16::from_le_bytes(arr(b)).to_f64(),
            DType::I8 => i8::from_le_bytes(arr(b)) as f64,
            DType::I16 => i16::from_le_bytes(arr(b)) as f64,
            DType::U16 => u16::from_le_bytes(arr(b)) as f64,
            DType::I32 => i32::from_le_bytes(arr(b)) as f64,
            DType::I64 => i64::from_le_bytes(arr(b)) as f64,
            DType::U8 => u8::from_le_bytes(arr(b)) as f64,
            DType::U32 => u32::from_le_bytes(arr(b)) as f64,
            DType::U64 => u64::from_le_bytes(arr(b)) as f64,
        }
    }
}

/// A reduction operator (`-o`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RedOp {
    /// Sum.
    Sum,
    /// Product.
    Prod,
    /// Minimum.
    Min,
    /// Maximum.
    Max,
}

impl RedOp {
    /// The name in tables, files, and NVSHMEM's function names.
    pub fn name(self) -> &'static str {
        match self {
            RedOp::Sum => "sum",
            RedOp::Prod => "prod",
            RedOp::Min => "min",
            RedOp::Max => "max",
        }
    }

    /// NCCL's `ncclRedOp_t` (sum 0, prod 1, max 2, min 3).
    pub fn nccl(self) -> i32 {
        match self {
            RedOp::Sum => 0,
            RedOp::Prod => 1,
            RedOp::Max => 2,
            RedOp::Min => 3,
        }
    }

    /// Combines two values on the host, for the expected result.
    pub fn combine(self, a: f64, b: f64) -> f64 {
        match self {
            RedOp::Sum => a + b,
            RedOp::Prod => a * b,
            RedOp::Min => a.min(b),
            RedOp::Max => a.max(b),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encode_decode_round_trips() {
        for t in DType::value_variants() {
            let mut b = vec![0u8; t.size()];
            t.encode(7.0, &mut b);
            assert_eq!(t.decode(&b), 7.0, "{t:?}");
        }
    }

    #[test]
    fn nccl_ids_are_distinct() {
        let mut ids: Vec<i32> = DType::value_variants()
            .iter()
            .filter_map(|t| t.nccl())
            .collect();
        ids.sort();
        ids.dedup();
        assert_eq!(ids.len(), DType::value_variants().len() - 2);
        assert_eq!(DType::I16.nccl(), None);
    }
}
