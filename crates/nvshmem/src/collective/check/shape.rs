//! Shape rules of the collectives, TensorRT's DistCollective's: gather-like calls concatenate
//! along the leading dimension, scatter-like calls split it, the others keep the shape.
//!
//! A shape is `None` for a buffer that carries none (an unshaped [`crate::SymArray`], any
//! view). Rules that relate two shapes apply only when both buffers carry one; a buffer
//! without a shape is a flat run whose element count the count checks judge, as before
//! shapes existed. A shaped buffer that a call cuts into one block per PE (gather's and
//! fcollect's `dst`, scatter's and reduce-scatter's `src`, both of alltoall's, an in-place
//! buffer of the blocked calls) must have a leading dimension divisible by the team size,
//! whatever the other buffer carries, so that every block is whole rows. With no shapes at
//! all, [`pair`] returns before looking further: the unshaped path costs two tests.
use crate::{
    collective::{Collective, Geometry},
    Error, Result,
};

/// How a collective relates its output's shape to its input's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Rule {
    /// all-reduce, reduce, broadcast: `dst` has `src`'s shape.
    Same,
    /// fcollect, gather: `dst` is the team's `src`s concatenated along the leading dimension.
    Concat,
    /// reduce-scatter, scatter: `src` is split along its leading dimension, one block per PE.
    Split,
    /// alltoall: equal shapes, the leading dimension split into one block per PE.
    Exchange,
}

impl Rule {
    /// The rule of a two-buffer collective (barrier and sync have no buffers: `Same`, which
    /// two absent shapes pass).
    pub(crate) fn of(coll: Collective) -> Rule {
        match coll.geometry() {
            Geometry::Same | Geometry::None => Rule::Same,
            Geometry::Gathered => Rule::Concat,
            Geometry::Scattered => Rule::Split,
            Geometry::Exchanged => Rule::Exchange,
        }
    }
}

/// Checks `src` and `dst` of a two-buffer collective under `rule`, for a team of `n_pes`.
#[inline]
pub(crate) fn pair(
    call: &'static str,
    rule: Rule,
    n_pes: usize,
    src: Option<&[usize]>,
    dst: Option<&[usize]>,
) -> Result<()> {
    if src.is_none() && dst.is_none() {
        return Ok(());
    }
    match rule {
        Rule::Same => same(call, src, dst),
        Rule::Concat => concat(call, n_pes, src, dst),
        Rule::Split => split(call, n_pes, src, dst),
        Rule::Exchange => exchange(call, n_pes, src, dst),
    }
}

/// The leading dimension and the trailing ones; `None` without a shape (or for a shape of
/// no dimensions, which a `SymArray` never carries).
fn lead(shape: Option<&[usize]>) -> Option<(usize, &[usize])> {
    shape
        .and_then(<[usize]>::split_first)
        .map(|(&d0, rest)| (d0, rest))
}

/// A shaped buffer that is cut into one block per PE: its leading dimension divides by
/// `n_pes`. Used alone by the in-place forms of fcollect, gather, reduce-scatter, scatter.
pub(crate) fn blocks(
    call: &'static str,
    arg: &'static str,
    n_pes: usize,
    shape: Option<&[usize]>,
) -> Result<()> {
    match lead(shape) {
        Some((d0, _)) if d0.checked_rem(n_pes) != Some(0) => Err(Error::arg(
            call,
            arg,
            format_args!(
                "leading dimension {d0} (shape {:?}) is not a multiple of the team's {n_pes} PEs (one block of whole rows per PE)",
                shape.unwrap_or_default()
            ),
        )),
        _ => Ok(()),
    }
}

fn same(call: &'static str, src: Option<&[usize]>, dst: Option<&[usize]>) -> Result<()> {
    match (src, dst) {
        (Some(s), Some(d)) if s != d => Err(Error::arg(
            call,
            "dst",
            format_args!("has shape {d:?} but src has {s:?} (the same shape is needed)"),
        )),
        _ => Ok(()),
    }
}

fn concat(
    call: &'static str,
    n_pes: usize,
    src: Option<&[usize]>,
    dst: Option<&[usize]>,
) -> Result<()> {
    let (Some((s0, s_tail)), Some((d0, d_tail))) = (lead(src), lead(dst)) else {
        return blocks(call, "dst", n_pes, dst);
    };
    let want = n_pes.checked_mul(s0).ok_or_else(|| {
        Error::arg(
            call,
            "src",
            format_args!(
                "the team's {n_pes} PEs x leading dimension {s0} (shape {:?}) overflow",
                src.unwrap_or_default()
            ),
        )
    })?;
    if d0 == want && d_tail == s_tail {
        return Ok(());
    }
    Err(Error::arg(
        call,
        "dst",
        format_args!(
            "has shape {:?} but needs {:?} (src's shape {:?} with its leading dimension times the team's {n_pes} PEs)",
            dst.unwrap_or_default(),
            with_lead(want, s_tail),
            src.unwrap_or_default()
        ),
    ))
}

fn split(
    call: &'static str,
    n_pes: usize,
    src: Option<&[usize]>,
    dst: Option<&[usize]>,
) -> Result<()> {
    blocks(call, "src", n_pes, src)?;
    let (Some((s0, s_tail)), Some((d0, d_tail))) = (lead(src), lead(dst)) else {
        return Ok(());
    };
    // `blocks` passed, so n_pes is not 0.
    let want = s0 / n_pes;
    if d0 == want && d_tail == s_tail {
        return Ok(());
    }
    Err(Error::arg(
        call,
        "dst",
        format_args!(
            "has shape {:?} but needs {:?} (src's shape {:?} with its leading dimension divided by the team's {n_pes} PEs)",
            dst.unwrap_or_default(),
            with_lead(want, s_tail),
            src.unwrap_or_default()
        ),
    ))
}

fn exchange(
    call: &'static str,
    n_pes: usize,
    src: Option<&[usize]>,
    dst: Option<&[usize]>,
) -> Result<()> {
    blocks(call, "src", n_pes, src)?;
    same(call, src, dst)?;
    blocks(call, "dst", n_pes, dst)
}

/// `[d0, tail...]`, for an error message.
fn with_lead(d0: usize, tail: &[usize]) -> Vec<usize> {
    std::iter::once(d0).chain(tail.iter().copied()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(r: Result<()>) -> String {
        r.unwrap_err().to_string()
    }

    #[test]
    fn no_shapes_pass_every_rule() {
        for rule in [Rule::Same, Rule::Concat, Rule::Split, Rule::Exchange] {
            // Even a team size no shape rule would accept: counts are judged elsewhere.
            assert!(pair("c", rule, 0, None, None).is_ok());
            assert!(pair("c", rule, 3, None, None).is_ok());
        }
    }

    #[test]
    fn same_needs_equal_shapes_when_both_carry_one() {
        let p = |s, d| pair("all_reduce", Rule::Same, 4, s, d);
        assert!(p(Some(&[2, 3]), Some(&[2, 3])).is_ok());
        // One unshaped side: counts decide (checked elsewhere), not shapes.
        assert!(p(Some(&[2, 3]), None).is_ok());
        assert!(p(None, Some(&[3, 2])).is_ok());
        assert_eq!(
            err(p(Some(&[2, 3]), Some(&[3, 2]))),
            "all_reduce: invalid dst: has shape [3, 2] but src has [2, 3] (the same shape is needed)"
        );
        assert!(p(Some(&[6]), Some(&[6, 1])).is_err());
        // No team-size rule: a leading dimension of 3 with 4 PEs is fine.
        assert!(p(Some(&[3, 5]), Some(&[3, 5])).is_ok());
    }

    #[test]
    fn concat_multiplies_the_leading_dimension() {
        let p = |s, d| pair("fcollect", Rule::Concat, 4, s, d);
        assert!(p(Some(&[2, 3]), Some(&[8, 3])).is_ok());
        assert!(p(Some(&[5]), Some(&[20])).is_ok());
        assert!(p(Some(&[0, 3]), Some(&[0, 3])).is_ok());
        assert_eq!(
            err(p(Some(&[2, 3]), Some(&[7, 3]))),
            "fcollect: invalid dst: has shape [7, 3] but needs [8, 3] (src's shape [2, 3] with its leading dimension times the team's 4 PEs)"
        );
        assert_eq!(
            err(p(Some(&[2, 3]), Some(&[8, 2]))),
            "fcollect: invalid dst: has shape [8, 2] but needs [8, 3] (src's shape [2, 3] with its leading dimension times the team's 4 PEs)"
        );
        // Same count, other rank: [4, 6] is not [8, 3].
        assert!(p(Some(&[2, 3]), Some(&[4, 6])).is_err());
        assert!(p(Some(&[2, 3]), Some(&[8, 3, 1])).is_err());
        // src alone: any leading dimension (counts decide dst).
        assert!(p(Some(&[3, 3]), None).is_ok());
    }

    #[test]
    fn concat_dst_alone_must_split_into_whole_rows() {
        let p = |s, d| pair("gather", Rule::Concat, 4, s, d);
        assert!(p(None, Some(&[8, 3])).is_ok());
        assert_eq!(
            err(p(None, Some(&[6, 4]))),
            "gather: invalid dst: leading dimension 6 (shape [6, 4]) is not a multiple of the team's 4 PEs (one block of whole rows per PE)"
        );
    }

    #[test]
    fn concat_overflow_is_an_error() {
        let e = err(pair(
            "gather",
            Rule::Concat,
            4,
            Some(&[usize::MAX]),
            Some(&[4]),
        ));
        assert_eq!(
            e,
            format!(
                "gather: invalid src: the team's 4 PEs x leading dimension {m} (shape [{m}]) overflow",
                m = usize::MAX
            )
        );
    }

    #[test]
    fn split_divides_the_leading_dimension() {
        let p = |s, d| pair("reduce_scatter", Rule::Split, 4, s, d);
        assert!(p(Some(&[8, 3]), Some(&[2, 3])).is_ok());
        assert!(p(Some(&[8, 3]), None).is_ok());
        assert!(p(None, Some(&[5, 7])).is_ok());
        assert_eq!(
            err(p(Some(&[6, 4]), Some(&[6]))),
            "reduce_scatter: invalid src: leading dimension 6 (shape [6, 4]) is not a multiple of the team's 4 PEs (one block of whole rows per PE)"
        );
        // Divisibility is src's own rule: checked with an unshaped dst too.
        assert!(p(Some(&[6, 4]), None).is_err());
        assert_eq!(
            err(p(Some(&[8, 3]), Some(&[3, 2]))),
            "reduce_scatter: invalid dst: has shape [3, 2] but needs [2, 3] (src's shape [8, 3] with its leading dimension divided by the team's 4 PEs)"
        );
        assert!(p(Some(&[8, 3]), Some(&[2, 3, 1])).is_err());
        assert!(pair("scatter", Rule::Split, 0, Some(&[8]), Some(&[2]))
            .unwrap_err()
            .to_string()
            .contains("team's 0 PEs"));
    }

    #[test]
    fn exchange_needs_equal_divisible_shapes() {
        let p = |s, d| pair("alltoall", Rule::Exchange, 2, s, d);
        assert!(p(Some(&[4, 3]), Some(&[4, 3])).is_ok());
        assert!(p(Some(&[4, 3]), None).is_ok());
        assert_eq!(
            err(p(Some(&[3, 4]), Some(&[3, 4]))),
            "alltoall: invalid src: leading dimension 3 (shape [3, 4]) is not a multiple of the team's 2 PEs (one block of whole rows per PE)"
        );
        assert_eq!(
            err(p(None, Some(&[3, 4]))),
            "alltoall: invalid dst: leading dimension 3 (shape [3, 4]) is not a multiple of the team's 2 PEs (one block of whole rows per PE)"
        );
        assert_eq!(
            err(p(Some(&[4, 3]), Some(&[2, 6]))),
            "alltoall: invalid dst: has shape [2, 6] but src has [4, 3] (the same shape is needed)"
        );
    }

    #[test]
    fn in_place_blocks_need_a_divisible_leading_dimension() {
        assert!(blocks("fcollect_in_place", "buf", 3, None).is_ok());
        assert!(blocks("fcollect_in_place", "buf", 3, Some(&[9, 2])).is_ok());
        assert!(blocks("fcollect_in_place", "buf", 3, Some(&[0, 2])).is_ok());
        assert_eq!(
            err(blocks("scatter_in_place", "buf", 3, Some(&[4, 3]))),
            "scatter_in_place: invalid buf: leading dimension 4 (shape [4, 3]) is not a multiple of the team's 3 PEs (one block of whole rows per PE)"
        );
        // A shape of no dimensions (never carried by a SymArray) counts as none.
        assert!(blocks("gather_in_place", "buf", 3, Some(&[])).is_ok());
    }
}
