//! The fingerprint of a call: what every PE's kernels publish beside their arrival and check
//! against their peers' (`kernels/PROTOCOL.md`, "Fingerprints"), so that two different calls
//! whose grids happen to match never accept each other's flags or touch each other's buffers.
//!
//! Two 64-bit words, the fields encoded rather than hashed where they fit, so that a mismatch
//! can be reported with both sides decoded:
//!
//! | word | bits | field |
//! |---|---|---|
//! | 0 | 63 | 1 (a fingerprint is never 0) |
//! | 0 | 59..63 | collective + 1 ([`Collective::ALL`] order) |
//! | 0 | 55..59 | element type + 1 ([`DataType::ALL`] order) |
//! | 0 | 51..55 | operator + 1 (0: the collective does not reduce) |
//! | 0 | 50 | in place |
//! | 0 | 47..50 | root (rooted collectives; 0 otherwise) |
//! | 0 | 0..47 | count, saturated at 2^47 - 1 |
//! | 1 | 32..64 | the team's tag: a hash of its members' world PEs, in team order |
//! | 1 | 0..32 | premul_sum's scale: its f32 bits where the kernels hold it in f32 (every float type but f64); else its f64 bits folded to 32 (high word xor low word), so that scales differing in any one bit differ here (0 for other operators) |
//!
//! The tag tells apart the teams that can share a channel over time: a new team takes a
//! channel only once every member's earlier team on it is dropped, and a PE that still calls
//! on a dropped team publishes that team's tag into a channel whose readers expect the new
//! team's.
use std::fmt;

use super::{Call, Collective};
use crate::{op::scale_in_f32, DataType, ReduceOp};

const VALID: u64 = 1 << 63;
const COUNT_BITS: u32 = 47;
const COUNT_MAX: u64 = (1 << COUNT_BITS) - 1;

/// A call's fingerprint, as the kernels carry it (`nvr_team::fp`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Fingerprint(pub(crate) [u64; 2]);

/// premul_sum's scale as word 1 carries it: its f32 bits where the kernels hold it in f32
/// (exactly: the operator's check refuses a scale f32 cannot hold); else (f64 and integer
/// data, which take the scale in 64 bits) its f64 bits folded to 32, high word xor low word,
/// so that scales differing in any one bit (two PEs that computed 1/3 differently, integer
/// scales past 2^24) never look alike. Its value cannot be shown then, only the folded word.
fn scale_word(dtype: DataType, s: f64) -> u64 {
    if scale_in_f32(dtype) {
        u64::from((s as f32).to_bits())
    } else {
        let b = s.to_bits();
        (b >> 32) ^ (b & 0xffff_ffff)
    }
}

/// premul_sum's operator code: the one after [`ReduceOp::BASIC`]'s.
const PREMUL: u64 = 9;
const _: () = assert!(PREMUL == ReduceOp::BASIC.len() as u64 + 1);

/// The operator's code: its place in [`ReduceOp::BASIC`] + 1, [`PREMUL`] for premul_sum.
fn op_code(op: ReduceOp) -> u64 {
    if let ReduceOp::PreMulSum(_) = op {
        return PREMUL;
    }
    ReduceOp::BASIC
        .iter()
        .position(|b| std::mem::discriminant(b) == std::mem::discriminant(&op))
        .map_or(0, |i| i as u64 + 1)
}

/// The name of the operator coded `code` (`"?"` for none).
fn op_name(code: u64) -> &'static str {
    if code == PREMUL {
        return ReduceOp::PreMulSum(0.0).name();
    }
    code.checked_sub(1)
        .and_then(|i| ReduceOp::BASIC.get(i as usize))
        .map_or("?", |op| op.name())
}

impl Fingerprint {
    /// The fingerprint of `coll` with these arguments on the team tagged `tag`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        coll: Collective,
        dtype: DataType,
        op: Option<ReduceOp>,
        count: usize,
        in_place: bool,
        root: usize,
        tag: u32,
    ) -> Self {
        let dtype_code = DataType::ALL
            .iter()
            .position(|&d| d == dtype)
            .map_or(0, |i| i as u64 + 1);
        let op_code = op.map_or(0, op_code);
        let w0 = VALID
            | (coll.index() as u64 + 1) << 59
            | (dtype_code & 15) << 55
            | op_code << 51
            | u64::from(in_place) << 50
            | (root as u64 & 7) << 47
            | (count as u64).min(COUNT_MAX);
        let scale = match op {
            Some(ReduceOp::PreMulSum(s)) => scale_word(dtype, s),
            _ => 0,
        };
        Fingerprint([w0, u64::from(tag) << 32 | scale])
    }

    /// The fingerprint of `call` on the team tagged `tag`.
    pub(crate) fn of(call: &Call, tag: u32) -> Self {
        Fingerprint::new(
            call.coll,
            if call.coll.reduces() {
                call.dtype
            } else {
                // Data movement is type-free: the same bytes in other types match.
                DataType::U8
            },
            call.coll.reduces().then_some(call.op),
            if call.coll.reduces() {
                call.count
            } else {
                call.block_bytes()
            },
            call.in_place,
            if call.coll.is_rooted() { call.root } else { 0 },
            tag,
        )
    }

    fn coll(self) -> Option<Collective> {
        let i = (self.0[0] >> 59 & 15) as usize;
        i.checked_sub(1)
            .and_then(|i| Collective::ALL.get(i).copied())
    }

    /// The team's tag.
    pub(crate) fn tag(self) -> u32 {
        (self.0[1] >> 32) as u32
    }
}

/// A fingerprint's words decoded, for [`Error::CallMismatch`](crate::Error::CallMismatch) (the
/// runtime's health reports a mismatch with it, `DescribeCall` in `runtime/health.rs`).
pub(crate) fn describe(words: [u64; 2]) -> String {
    Fingerprint(words).to_string()
}

/// Decoded: `all_reduce of f32 sum, 1048576 elements on team 0x811c9dc5`.
impl fmt::Display for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let [w0, w1] = self.0;
        if w0 & VALID == 0 {
            return write!(f, "nothing this library can read ({w0:#018x} {w1:#018x})");
        }
        let Some(coll) = self.coll() else {
            return write!(f, "an unknown call ({w0:#018x} {w1:#018x})");
        };
        f.write_str(coll.name())?;
        let count = w0 & COUNT_MAX;
        let saturated = if count == COUNT_MAX { "at least " } else { "" };
        if coll.reduces() {
            let dtype = (w0 >> 55 & 15)
                .checked_sub(1)
                .and_then(|i| DataType::ALL.get(i as usize));
            let op = w0 >> 51 & 15;
            write!(f, " of {} {}", dtype.map_or("?", |d| d.name()), op_name(op))?;
            if op == PREMUL && dtype.is_some_and(|&d| scale_in_f32(d)) {
                write!(f, " (scale {})", f32::from_bits(w1 as u32))?;
            } else if op == PREMUL {
                write!(f, " (a scale folded to {:#010x})", w1 as u32)?;
            }
            write!(f, ", {saturated}{count} elements")?;
        } else if coll.geometry() != super::Geometry::None {
            write!(f, " of {saturated}{count} bytes")?;
        }
        if coll.is_rooted() {
            write!(f, ", root {}", w0 >> 47 & 7)?;
        }
        if w0 >> 50 & 1 == 1 {
            f.write_str(", in place")?;
        }
        write!(f, " on team {:#010x}", self.tag())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::channel::{team_fingerprint, team_tag};

    #[test]
    fn fields_round_trip_through_the_words() {
        let tag = team_tag(&[0, 1]);
        let a = Fingerprint::new(
            Collective::AllReduce,
            DataType::F32,
            Some(ReduceOp::Sum),
            1 << 20,
            false,
            0,
            tag,
        );
        assert_eq!(
            a.to_string(),
            format!("all_reduce of f32 sum, 1048576 elements on team {tag:#010x}")
        );
        let b = Fingerprint::new(
            Collective::AllReduce,
            DataType::F32,
            Some(ReduceOp::Sum),
            (1 << 20) + 1,
            false,
            0,
            tag,
        );
        assert_ne!(a, b);
        assert!(b.to_string().contains("1048577 elements"));
        let r = Fingerprint::new(
            Collective::Reduce,
            DataType::BF16,
            Some(ReduceOp::PreMulSum(0.5)),
            7,
            true,
            5,
            tag,
        );
        assert_eq!(
            r.to_string(),
            format!("reduce of bf16 premul_sum (scale 0.5), 7 elements, root 5, in place on team {tag:#010x}")
        );
        let g = Fingerprint::new(Collective::Gather, DataType::U8, None, 100, false, 2, 9);
        assert_eq!(
            g.to_string(),
            "gather of 100 bytes, root 2 on team 0x00000009"
        );
        let s = Fingerprint::new(Collective::Sync, DataType::U8, None, 0, false, 0, 9);
        assert_eq!(s.to_string(), "sync on team 0x00000009");
    }

    #[test]
    fn every_field_tells_calls_apart() {
        let base = |c, d, o, n, ip, r, t| Fingerprint::new(c, d, o, n, ip, r, t);
        let a = base(
            Collective::AllReduce,
            DataType::F32,
            Some(ReduceOp::Sum),
            8,
            false,
            0,
            1,
        );
        let others = [
            base(
                Collective::ReduceScatter,
                DataType::F32,
                Some(ReduceOp::Sum),
                8,
                false,
                0,
                1,
            ),
            base(
                Collective::AllReduce,
                DataType::I32,
                Some(ReduceOp::Sum),
                8,
                false,
                0,
                1,
            ),
            base(
                Collective::AllReduce,
                DataType::F32,
                Some(ReduceOp::Max),
                8,
                false,
                0,
                1,
            ),
            base(
                Collective::AllReduce,
                DataType::F32,
                Some(ReduceOp::Sum),
                9,
                false,
                0,
                1,
            ),
            base(
                Collective::AllReduce,
                DataType::F32,
                Some(ReduceOp::Sum),
                8,
                true,
                0,
                1,
            ),
            base(
                Collective::AllReduce,
                DataType::F32,
                Some(ReduceOp::Sum),
                8,
                false,
                1,
                1,
            ),
            base(
                Collective::AllReduce,
                DataType::F32,
                Some(ReduceOp::Sum),
                8,
                false,
                0,
                2,
            ),
        ];
        for o in others {
            assert_ne!(a, o, "{o}");
        }
        // A premul_sum all-reduce of 8 elements of `dtype` with scale s.
        let premul = |dtype, s| {
            base(
                Collective::AllReduce,
                dtype,
                Some(ReduceOp::PreMulSum(s)),
                8,
                false,
                0,
                1,
            )
        };
        let p = |s| premul(DataType::F32, s);
        assert_ne!(p(0.5), p(0.25));
        // f64 scales in f64: those beyond f32's range too (as f32 they were all infinity).
        let p64 = |s| premul(DataType::F64, s);
        assert_ne!(p64(1e39), p64(1e40));
        assert_ne!(p64(-1e300), p64(1e300));
        assert_ne!(p64(0.5), p64(0.25));
        // Any one bit apart, in f64 and in integers past f32's 24 bits.
        assert_ne!(
            p64(1.0 / 3.0),
            p64(f64::from_bits((1.0f64 / 3.0).to_bits() ^ 1))
        );
        let pi = |s| premul(DataType::I64, s);
        assert_ne!(pi(16_777_216.0), pi(16_777_217.0));
        assert_ne!(pi(2f64.powi(40)), pi(2f64.powi(40) + 1.0));
        assert!(p64(0.5)
            .to_string()
            .contains("f64 premul_sum (a scale folded to 0x3fe00000)"));
        assert!(p(0.5).to_string().contains("f32 premul_sum (scale 0.5)"));
        // Every type and collective has a code of its own, none of them 0.
        for (i, &d) in DataType::ALL.iter().enumerate() {
            let f = base(
                Collective::AllReduce,
                d,
                Some(ReduceOp::Sum),
                1,
                false,
                0,
                0,
            );
            assert_eq!((f.0[0] >> 55 & 15) as usize, i + 1);
            assert!(f.to_string().contains(d.name()), "{f}");
        }
        for c in Collective::ALL {
            let f = base(c, DataType::U8, None, 1, false, 0, 0);
            assert_eq!(f.coll(), Some(c));
            assert_ne!(f.0[0], 0);
        }
    }

    #[test]
    fn huge_counts_saturate_and_say_so() {
        let f = Fingerprint::new(
            Collective::Broadcast,
            DataType::U8,
            None,
            usize::MAX,
            false,
            0,
            0,
        );
        assert!(
            f.to_string().contains("at least 140737488355327 bytes"),
            "{f}"
        );
        assert_eq!(
            Fingerprint::default().to_string().split(' ').next(),
            Some("nothing")
        );
    }

    #[test]
    fn operator_codes_are_pinned() {
        // The codes are part of what peers compare: they must not move with `ReduceOp`.
        let ops = [
            (ReduceOp::Sum, 1, "sum"),
            (ReduceOp::Prod, 2, "prod"),
            (ReduceOp::Min, 3, "min"),
            (ReduceOp::Max, 4, "max"),
            (ReduceOp::And, 5, "and"),
            (ReduceOp::Or, 6, "or"),
            (ReduceOp::Xor, 7, "xor"),
            (ReduceOp::Avg, 8, "avg"),
            (ReduceOp::PreMulSum(0.5), 9, "premul_sum"),
        ];
        for (op, code, name) in ops {
            assert_eq!(op_code(op), code, "{op}");
            assert_eq!(op_name(code), name);
        }
        assert_eq!(op_name(0), "?");
        assert_eq!(op_name(10), "?");
        // A team's descriptor keeps its tag where a call's fingerprint does.
        let t = Fingerprint(team_fingerprint(&[2, 5]));
        assert_eq!(t.0, [0, u64::from(team_tag(&[2, 5])) << 32]);
        assert_eq!(t.tag(), team_tag(&[2, 5]));
    }
}
