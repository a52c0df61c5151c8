//! Property tests of the team splits' checks: every refusal happens before NVSHMEM's
//! collective split, so it must be the same on every PE of the parent team. The strided and
//! list checks take no PE index at all; the 2-D layout does, and every PE of an x or y team
//! must compute the same team for it.
use proptest::prelude::*;

use super::plan::{as_progression, check_pes, check_strided, index_in, split_2d_layout, Strided};
use crate::props::{config, names_arg, size};

/// Team sizes: 1 to 8, as the tests on GPUs have, and a few larger.
fn parent() -> impl Strategy<Value = usize> {
    prop_oneof![4 => 1usize..=8, 1 => 9usize..=64]
}

/// Strided parameters near the team size, and hostile ones whose products overflow.
fn strided() -> impl Strategy<Value = Strided> {
    let near = prop_oneof![3 => 0usize..=9, 1 => size()];
    (near.clone(), near.clone(), near).prop_map(|(start, stride, size)| Strided {
        start,
        stride,
        size,
    })
}

/// PE lists: in range or not, with duplicates, empty, progressions.
fn pes() -> impl Strategy<Value = Vec<usize>> {
    prop_oneof![
        3 => prop::collection::vec(0usize..=9, 0..=8),
        1 => (0usize..=8, 1usize..=4, 1usize..=8)
            .prop_map(|(start, stride, n)| (0..n).map(|i| start + i * stride).collect()),
        1 => prop::collection::vec(size(), 0..=4),
    ]
}

proptest! {
    #![proptest_config(config())]

    /// A strided split is accepted exactly when its members are PEs of the parent (stride and
    /// size at least 1), with the last member returned; `index_of` then numbers exactly them.
    #[test]
    fn strided_splits_are_accepted_exactly_inside_the_parent(n in parent(), s in strided()) {
        let last = (s.size as u128)
            .checked_sub(1)
            .map(|k| s.start as u128 + k * s.stride as u128);
        let inside = s.stride >= 1 && last.is_some_and(|l| l < n as u128);
        match check_strided("Team::split_strided", n, s) {
            Ok(got) => {
                prop_assert!(inside, "{s:?} of {n} accepted");
                prop_assert_eq!(Some(got as u128), last);
                for pe in 0..n {
                    let member = (0..s.size).find(|i| s.start + i * s.stride == pe);
                    prop_assert_eq!(s.index_of(pe), member, "PE {}", pe);
                }
            }
            Err(e) => {
                prop_assert!(!inside, "{s:?} of {n} refused: {e}");
                prop_assert!(names_arg(&e, &["start", "stride", "size"]), "{e:?}");
            }
        }
        // Never a panic, whatever the stride (0 included).
        let _ = s.index_of(n);
    }

    /// A 2-D split: every PE decides alike (only `xrange` 0 is refused), and every member of
    /// an x or y team computes the same team, which the strided check accepts and in which it
    /// is numbered as NVSHMEM numbers it.
    #[test]
    fn two_d_splits_agree_on_every_pe(n in parent(), xrange in prop_oneof![0usize..=10, size()]) {
        let layouts: Vec<_> = (0..n)
            .map(|pe| split_2d_layout("Team::split_2d", n, xrange, pe))
            .collect();
        if xrange == 0 {
            for l in &layouts {
                prop_assert!(l.as_ref().is_err_and(|e| names_arg(e, &["xrange"])));
            }
            return Ok(());
        }
        let xr = xrange.min(n);
        for (pe, l) in layouts.iter().enumerate() {
            let (x, y) = l.as_ref().map_err(|e| TestCaseError::fail(e.to_string()))?;
            prop_assert!(check_strided("t", n, *x).is_ok() && check_strided("t", n, *y).is_ok());
            prop_assert_eq!(x.index_of(pe), Some(pe % xr));
            prop_assert_eq!(y.index_of(pe), Some(pe / xr));
            for (other, m) in layouts.iter().enumerate() {
                let (ox, oy) = m.as_ref().map_err(|e| TestCaseError::fail(e.to_string()))?;
                if x.index_of(other).is_some() {
                    prop_assert_eq!(ox, x, "PEs {} and {} see different x teams", pe, other);
                }
                if y.index_of(other).is_some() {
                    prop_assert_eq!(oy, y, "PEs {} and {} see different y teams", pe, other);
                }
            }
        }
    }

    /// A PE list is accepted exactly when it is not empty, in range and without duplicates.
    /// A list that is a progression becomes a strided split the strided check accepts, with
    /// the same members in the same order.
    #[test]
    fn pe_lists_are_checked_and_progressions_become_strided_splits(n in parent(), pes in pes()) {
        let mut sorted = pes.clone();
        sorted.sort_unstable();
        sorted.dedup();
        let valid = !pes.is_empty() && pes.iter().all(|&p| p < n) && sorted.len() == pes.len();
        match check_pes("Team::from_pes", n, &pes) {
            Ok(()) => prop_assert!(valid, "{pes:?} of {n} accepted"),
            Err(e) => {
                prop_assert!(!valid, "{pes:?} of {n} refused: {e}");
                prop_assert!(names_arg(&e, &["pes"]), "{e:?}");
            }
        }
        if let Some(s) = as_progression(&pes) {
            let members: Vec<_> = (0..s.size).map(|i| s.start + i * s.stride).collect();
            prop_assert_eq!(&members, &pes);
            if valid {
                prop_assert!(check_strided("t", n, s).is_ok());
                for pe in 0..n {
                    prop_assert_eq!(s.index_of(pe), index_in(&pes, pe));
                }
            }
        }
    }
}

/// One member's part of a set-up agreement: channel masks, reach, resident blocks and
/// architecture that may differ between members in every way.
fn set_up_part() -> impl Strategy<Value = super::SetUp> {
    (
        any::<u64>(),
        prop::bool::weighted(0.8),
        0u32..=200,
        prop_oneof![4 => Just((9u32, 0u32)), 1 => (7u32..=10, 0u32..=9)],
    )
        .prop_map(|(free, reaches_all, resident_blocks, arch)| super::SetUp {
            free,
            reaches_all,
            resident_blocks,
            arch,
        })
}

proptest! {
    #![proptest_config(config())]

    /// Members that differ in which channels are free, whether they reach every other, how
    /// many blocks they can keep resident and their GPU: the decisions read only the table,
    /// so every member gets the same; and each is safe for every member: peer mapping only if
    /// all reach all, a channel free on every member, a grid no member would leave partly
    /// unscheduled, an architecture only if all share it.
    #[test]
    fn a_new_team_decides_alike_and_safely_for_every_member(
        parts in prop::collection::vec(set_up_part(), 1..=8),
    ) {
        let table: Vec<[u64; 64]> = parts.iter().map(|p| p.entry()).collect();
        let agreed = super::SetUp::agree(&table);
        // What each member decides from the table it got (the same table on every member).
        for _member in 0..parts.len() {
            prop_assert_eq!(super::SetUp::agree(&table), agreed);
        }
        prop_assert_eq!(agreed.mapped, parts.iter().all(|p| p.reaches_all));
        if let Some(c) = agreed.channel {
            prop_assert!(parts.iter().all(|p| p.free & (1 << c) != 0), "channel {} taken somewhere", c);
            prop_assert!(parts.iter().all(|p| p.free & ((1u64 << c) - 1) & parts.iter().fold(u64::MAX, |m, q| m & q.free) == 0), "a lower channel was free everywhere");
        } else {
            prop_assert_eq!(parts.iter().fold(u64::MAX, |m, p| m & p.free), 0);
        }
        prop_assert!(agreed.max_blocks >= 1);
        prop_assert!(parts.iter().all(|p| agreed.max_blocks <= p.resident_blocks.max(1)));
        match agreed.arch {
            Some(a) => prop_assert!(parts.iter().all(|p| p.arch == a)),
            None => prop_assert!(parts.iter().any(|p| p.arch != parts[0].arch)),
        }
    }
}
