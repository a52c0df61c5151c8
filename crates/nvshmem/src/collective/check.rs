//! Argument checks of the collectives: pure functions of addresses, lengths and team
//! geometry, so every rule is unit-tested without a GPU.
//!
//! In-place rules follow NCCL's: an input may coincide with the output only where the
//! operation defines it (same address for all-reduce, reduce and broadcast; this PE's block
//! of the output for all-gather and gather; this PE's block of the input for reduce-scatter
//! and scatter); any other overlap is refused.
use crate::{error::check_len, Error, Result};

pub(crate) mod shape;

/// A run of `len` elements of `elem` bytes at device address `ptr`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Span {
    pub ptr: u64,
    pub len: usize,
    pub elem: usize,
}

impl Span {
    pub(crate) fn new(ptr: u64, len: usize, elem: usize) -> Self {
        Span { ptr, len, elem }
    }

    fn end(&self) -> u128 {
        self.ptr as u128 + (self.len as u128) * (self.elem as u128)
    }

    /// Whether the two share a byte (empty spans share none).
    pub(crate) fn overlaps(&self, other: &Span) -> bool {
        self.len > 0
            && other.len > 0
            && (self.ptr as u128) < other.end()
            && (other.ptr as u128) < self.end()
    }

    /// The address of element `i`.
    pub(crate) fn at(&self, i: usize) -> u64 {
        self.ptr + (i as u64) * (self.elem as u64)
    }
}

/// A `root` that is a PE index of a team of `n_pes`.
pub(crate) fn root(call: &'static str, root: usize, n_pes: usize) -> Result<()> {
    crate::error::check_pe(call, "root", root, n_pes, "the team")
}

/// `n * count`, or an error naming `arg` if it overflows.
fn times(call: &'static str, arg: &'static str, n: usize, count: usize) -> Result<usize> {
    n.checked_mul(count).ok_or_else(|| {
        Error::arg(
            call,
            arg,
            format_args!("{n} PEs x {count} elements overflow"),
        )
    })
}

pub(crate) fn divisible(
    call: &'static str,
    arg: &'static str,
    len: usize,
    n_pes: usize,
) -> Result<usize> {
    if len.checked_rem(n_pes) == Some(0) {
        Ok(len / n_pes)
    } else {
        Err(Error::arg(
            call,
            arg,
            format_args!(
                "has {len} elements, not a multiple of the team's {n_pes} PEs (one equal block per PE)"
            ),
        ))
    }
}

/// Refuses an overlap of `src` and `dst` unless `src` starts at `in_place` (the one address
/// at which the operation is defined to run in place) and spans exactly its part.
fn overlap(
    call: &'static str,
    src: &Span,
    dst: &Span,
    in_place: Option<u64>,
    rule: &str,
) -> Result<()> {
    if !src.overlaps(dst) || in_place == Some(src.ptr) {
        return Ok(());
    }
    Err(Error::arg(
        call,
        "dst",
        format_args!(
            "overlaps src (src {:#x}+{} B, dst {:#x}+{} B); {rule}",
            src.ptr,
            src.len * src.elem,
            dst.ptr,
            dst.len * dst.elem
        ),
    ))
}

/// all-reduce, reduce and broadcast: equal lengths; in place only at the same address.
pub(crate) fn same_shape(call: &'static str, src: &Span, dst: &Span) -> Result<()> {
    check_len(call, "dst", dst.len, src.len, "as many as src")?;
    overlap(
        call,
        src,
        dst,
        Some(dst.ptr),
        "in place means src and dst are the same array",
    )
}

/// fcollect (all-gather): `dst` holds `n_pes` blocks of `src.len`; in place when `src` is
/// this PE's block of `dst`. Returns the block length.
pub(crate) fn fcollect(
    call: &'static str,
    n_pes: usize,
    my_pe: usize,
    src: &Span,
    dst: &Span,
) -> Result<usize> {
    let count = src.len;
    let want = times(call, "dst", n_pes, count)?;
    check_len(call, "dst", dst.len, want, "the team's PEs x src's length")?;
    overlap(
        call,
        src,
        dst,
        Some(dst.at(my_pe * count)),
        "in place means src is this PE's block of dst (dst + my_pe * src.len)",
    )?;
    Ok(count)
}

/// reduce-scatter: `src` holds `n_pes` blocks of `dst.len`; in place when `dst` is this PE's
/// block of `src`. Returns the block length.
pub(crate) fn reduce_scatter(
    call: &'static str,
    n_pes: usize,
    my_pe: usize,
    src: &Span,
    dst: &Span,
) -> Result<usize> {
    let count = dst.len;
    let want = times(call, "src", n_pes, count)?;
    check_len(call, "src", src.len, want, "the team's PEs x dst's length")?;
    // In place: dst == src + my_pe * count, i.e. src == dst - my_pe * count.
    let in_place = dst.ptr.checked_sub(src.at(my_pe * count) - src.ptr);
    overlap(
        call,
        src,
        dst,
        in_place,
        "in place means dst is this PE's block of src (src + my_pe * dst.len)",
    )?;
    Ok(count)
}

/// alltoall: equal lengths, a multiple of the team size; never in place. Returns the block
/// length (elements sent to each PE).
pub(crate) fn alltoall(call: &'static str, n_pes: usize, src: &Span, dst: &Span) -> Result<usize> {
    check_len(call, "dst", dst.len, src.len, "as many as src")?;
    let count = divisible(call, "src", src.len, n_pes)?;
    overlap(call, src, dst, None, "alltoall cannot run in place")?;
    Ok(count)
}

#[cfg(test)]
mod tests {
    use super::*;

    const B: u64 = 0x1000;
    fn f32s(ptr: u64, len: usize) -> Span {
        Span::new(ptr, len, 4)
    }

    #[test]
    fn overlap_is_by_bytes() {
        assert!(f32s(B, 4).overlaps(&f32s(B + 12, 1)));
        assert!(!f32s(B, 4).overlaps(&f32s(B + 16, 1)));
        assert!(!f32s(B, 0).overlaps(&f32s(B, 4)));
        assert!(f32s(B + 4, 1).overlaps(&f32s(B, 2)));
    }

    #[test]
    fn root_must_be_in_the_team() {
        assert!(root("broadcast", 1, 2).is_ok());
        let e = root("broadcast", 2, 2).unwrap_err().to_string();
        assert_eq!(
            e,
            "broadcast: invalid root: 2 is not a PE of the team, which has 2 PEs (0..2)"
        );
    }

    #[test]
    fn all_reduce_lengths_and_in_place() {
        assert!(same_shape("all_reduce", &f32s(B, 8), &f32s(B + 64, 8)).is_ok());
        assert!(same_shape("all_reduce", &f32s(B, 8), &f32s(B, 8)).is_ok());
        let e = same_shape("all_reduce", &f32s(B, 8), &f32s(B + 64, 7))
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "all_reduce: invalid dst: has 7 elements but needs 8 (as many as src)"
        );
        let e = same_shape("all_reduce", &f32s(B, 8), &f32s(B + 4, 8))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("overlaps src") && e.contains("same array"),
            "{e}"
        );
        assert!(same_shape("all_reduce", &f32s(B, 0), &f32s(B, 0)).is_ok());
    }

    #[test]
    fn fcollect_needs_n_blocks_and_allows_own_block_in_place() {
        assert_eq!(
            fcollect("fcollect", 4, 2, &f32s(B, 3), &f32s(B + 100, 12)).unwrap(),
            3
        );
        let e = fcollect("fcollect", 4, 2, &f32s(B, 3), &f32s(B + 100, 11))
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "fcollect: invalid dst: has 11 elements but needs 12 (the team's PEs x src's length)"
        );
        // In place: src is block 2 of dst.
        assert!(fcollect("fcollect", 4, 2, &f32s(B + 24, 3), &f32s(B, 12)).is_ok());
        // Another block, or a misaligned one, is an overlap.
        assert!(fcollect("fcollect", 4, 2, &f32s(B + 12, 3), &f32s(B, 12)).is_err());
        assert!(fcollect("fcollect", 4, 2, &f32s(B + 20, 3), &f32s(B, 12)).is_err());
        assert!(fcollect("fcollect", usize::MAX, 0, &f32s(B, 3), &f32s(B, 3)).is_err());
    }

    #[test]
    fn reduce_scatter_needs_n_blocks_and_allows_own_block_in_place() {
        assert_eq!(
            reduce_scatter("reduce_scatter", 2, 1, &f32s(B, 10), &f32s(B + 400, 5)).unwrap(),
            5
        );
        let e = reduce_scatter("reduce_scatter", 2, 1, &f32s(B, 9), &f32s(B + 400, 5))
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "reduce_scatter: invalid src: has 9 elements but needs 10 (the team's PEs x dst's length)"
        );
        assert!(reduce_scatter("reduce_scatter", 2, 1, &f32s(B, 10), &f32s(B + 20, 5)).is_ok());
        assert!(reduce_scatter("reduce_scatter", 2, 0, &f32s(B, 10), &f32s(B + 20, 5)).is_err());
        assert!(reduce_scatter("reduce_scatter", 2, 0, &f32s(B, 10), &f32s(B, 5)).is_ok());
    }

    #[test]
    fn gather_and_scatter_in_place_use_each_pes_own_block() {
        // Gather is judged by fcollect's rule and scatter by reduce-scatter's, plus the root:
        // PE 1 of 3: its own block (B + 8) is in place, whatever the root (seen on 2 GPUs:
        // judging non-roots by the root's block refused the call on them only, and the root
        // then waited for them).
        assert!(fcollect("gather", 3, 1, &f32s(B + 8, 2), &f32s(B, 6)).is_ok());
        assert!(fcollect("gather", 3, 0, &f32s(B + 8, 2), &f32s(B, 6)).is_err());
        assert!(root("gather", 3, 3).is_err());
        assert!(reduce_scatter("scatter", 3, 2, &f32s(B, 6), &f32s(B + 16, 2)).is_ok());
        assert!(reduce_scatter("scatter", 3, 1, &f32s(B, 6), &f32s(B + 16, 2)).is_err());
        let e = reduce_scatter("scatter", 3, 0, &f32s(B, 7), &f32s(B + 64, 2))
            .unwrap_err()
            .to_string();
        assert!(e.contains("has 7 elements but needs 6"), "{e}");
    }

    #[test]
    fn alltoall_needs_divisible_equal_disjoint() {
        assert_eq!(
            alltoall("alltoall", 4, &f32s(B, 8), &f32s(B + 32, 8)).unwrap(),
            2
        );
        let e = alltoall("alltoall", 4, &f32s(B, 6), &f32s(B + 64, 6))
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "alltoall: invalid src: has 6 elements, not a multiple of the team's 4 PEs (one equal block per PE)"
        );
        assert!(alltoall("alltoall", 4, &f32s(B, 8), &f32s(B + 64, 4)).is_err());
        let e = alltoall("alltoall", 4, &f32s(B, 8), &f32s(B, 8))
            .unwrap_err()
            .to_string();
        assert!(e.contains("cannot run in place"), "{e}");
    }
}
