//! Property tests of the team splits' checks: every refusal happens before NVSHMEM's
//! collective split, so it must be the same on every PE of the parent team. The strided and
//! list checks take no PE index at all; the 2-D layout does, and every PE of an x or y team
//! must compute the same team for it.
use proptest::prelude::*;

use super::plan::{as_progression, check_pes, check_strided, index_in, split_2d_layout, Strided};
use crate::{
    channel::MAX_TEAM,
    props::{config, names_arg, size},
};

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

/// One parent member's offer: free channels, resident blocks and architecture that may differ
/// between members in every way, and which of `n` parent members it reaches (mostly all).
fn offer_of(n: usize) -> impl Strategy<Value = (u64, u32, (u32, u32), Vec<bool>)> {
    (
        any::<u64>(),
        0u32..=200,
        prop_oneof![4 => Just((9u32, 0u32)), 1 => (7u32..=10, 0u32..=9)],
        prop::collection::vec(prop::bool::weighted(0.9), n),
    )
}

/// A parent of 1 to 12 members with their offers, a new team of some of them (in any order),
/// and channels each parent member holds for another team of the same call.
#[allow(clippy::type_complexity)]
fn making() -> impl Strategy<Value = (Vec<(u64, u32, (u32, u32), Vec<bool>)>, Vec<usize>, Vec<u64>)>
{
    (1usize..=12).prop_flat_map(|n| {
        (
            prop::collection::vec(offer_of(n), n),
            Just((0..n).collect::<Vec<_>>()).prop_shuffle(),
            1usize..=n,
            prop::collection::vec(prop_oneof![3 => Just(0u64), 1 => any::<u64>()], n),
        )
            .prop_map(|(offers, order, k, taken)| (offers, order[..k].to_vec(), taken))
    })
}

proptest! {
    #![proptest_config(config())]

    /// Members that differ in which channels are free, which parent members they reach, how
    /// many blocks they can keep resident and their GPU: the decisions read only the table,
    /// so every member gets the same; and each is safe for every member: peer mapping only if
    /// every member reaches every other, a channel free on every member (and not taken for
    /// another team of the call), the lowest such, a grid no member would leave partly
    /// unscheduled, an architecture only if all share it.
    #[test]
    fn a_new_team_decides_alike_and_safely_for_every_member((offers, members, taken) in making()) {
        use super::{make, offer, SetUp};
        use crate::runtime::exchange::{entry, tag};
        let table: Vec<[u64; 64]> = offers
            .iter()
            .map(|(free, res, arch, reach)| {
                let mut w = vec![make::STRIDED, 0, 0, 0, 0];
                w.extend(offer::words(*free, *res, res % 3 == 0, *arch, reach));
                entry(tag::MAKE_TEAM, &w)
            })
            .collect();
        let agreed = SetUp::agree(&table, &members, |p| taken[p]);
        for _member in &members {
            prop_assert_eq!(SetUp::agree(&table, &members, |p| taken[p]), agreed);
        }
        let reaches_all = members
            .iter()
            .all(|&p| members.iter().all(|&q| offers[p].3[q]));
        prop_assert_eq!(agreed.mapped, reaches_all);
        let common = members.iter().fold(u64::MAX, |m, &p| m & offers[p].0 & !taken[p]);
        match agreed.channel {
            Some(c) => {
                prop_assert!(common & (1 << c) != 0, "channel {} taken somewhere", c);
                prop_assert_eq!(common & ((1u64 << c) - 1), 0, "a lower channel was free everywhere");
            }
            None => prop_assert_eq!(common, 0),
        }
        prop_assert!(agreed.max_blocks >= 1);
        prop_assert_eq!(agreed.shares_gpu, members.iter().any(|&p| offers[p].1 % 3 == 0));
        prop_assert!(members.iter().all(|&p| agreed.max_blocks <= offers[p].1.max(1)));
        let first = offers[members[0]].2;
        match agreed.arch {
            Some(a) => prop_assert!(members.iter().all(|&p| offers[p].2 == a)),
            None => prop_assert!(members.iter().any(|&p| offers[p].2 != first)),
        }
        if let Some(c) = agreed.team_channel(members.len()) {
            prop_assert!(agreed.mapped && members.len() <= MAX_TEAM && Some(c) == agreed.channel);
        }
    }
}
