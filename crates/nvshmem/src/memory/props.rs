//! Property tests of the heap's checks: allocation sizes, heap room, scratch, shapes and view
//! ranges. None takes a PE index: the heap's ledger is the same on every PE (they allocate
//! and drop alike), so a refusal from it is the same everywhere.
use std::ops::Bound;

use proptest::prelude::*;

use super::{
    array::{alloc_bytes, check_shape, checked_range},
    check_room, check_scratch,
};
use crate::{
    props::{config, names_arg, size},
    Error,
};

fn bound() -> impl Strategy<Value = Bound<usize>> {
    prop_oneof![
        size().prop_map(Bound::Included),
        size().prop_map(Bound::Excluded),
        Just(Bound::Unbounded),
    ]
}

proptest! {
    #![proptest_config(config())]

    /// An allocation's bytes are its length times the element size, or an error naming `len`
    /// when they do not fit a `usize`.
    #[test]
    fn allocation_sizes_never_wrap(len in size(), elem in prop_oneof![1usize..=16, size()]) {
        let exact = len as u128 * elem as u128;
        match alloc_bytes(len, elem, "T") {
            Ok(bytes) => prop_assert_eq!(bytes as u128, exact),
            Err(e) => {
                prop_assert!(exact > usize::MAX as u128);
                prop_assert!(names_arg(&e, &["len"]), "{e:?}");
            }
        }
    }

    /// The heap has room exactly when what is requested fits beside what stays in use; a
    /// refusal is `OutOfHeap` with the numbers.
    #[test]
    fn the_heap_refuses_exactly_what_does_not_fit(
        requested in size(), in_use in size(), freed in size(), heap in size(),
    ) {
        // Any numbers: an answer, never a panic.
        let _ = check_room(requested, in_use, freed, heap);
        // A ledger as the heap keeps it: in use at most the heap, freed part of it.
        let in_use = in_use.min(heap);
        let freed = freed.min(in_use);
        let fits = requested as u128 + (in_use - freed) as u128 <= heap as u128;
        match check_room(requested, in_use, freed, heap) {
            Ok(()) => prop_assert!(fits),
            Err(Error::OutOfHeap { requested: r, in_use: u, heap_size: h }) => {
                prop_assert!(!fits);
                prop_assert_eq!((r, u, h), (requested, in_use, heap));
            }
            Err(e) => prop_assert!(false, "{e:?}"),
        }
    }

    /// A call that needs scratch gets it exactly when enough is reserved.
    #[test]
    fn scratch_is_refused_exactly_when_too_small(needed in size(), reserved in size()) {
        match check_scratch("reduce", needed, reserved) {
            Ok(()) => prop_assert!(needed <= reserved),
            Err(Error::ScratchTooSmall { call, needed: n, reserved: r }) => {
                prop_assert!(needed > reserved);
                prop_assert_eq!((call, n, r), ("reduce", needed, reserved));
            }
            Err(e) => prop_assert!(false, "{e:?}"),
        }
    }

    /// A shape is accepted exactly when it has a dimension and its elements (a zero
    /// dimension making them 0, whatever the others) are the array's.
    #[test]
    fn shapes_hold_exactly_the_arrays_elements(
        shape in prop::collection::vec(prop_oneof![0usize..=6, size()], 0..=4),
        len in prop_oneof![0usize..=64, size()],
    ) {
        let elements = if shape.contains(&0) {
            Some(0)
        } else {
            shape.iter().try_fold(1u128, |a, &d| a.checked_mul(d as u128))
        };
        let fits = !shape.is_empty() && elements == Some(len as u128);
        match check_shape("reshape", &shape, len) {
            Ok(()) => prop_assert!(fits, "{shape:?} for {len}"),
            Err(e) => {
                prop_assert!(!fits, "{shape:?} for {len}: {e}");
                prop_assert!(names_arg(&e, &["shape"]), "{e:?}");
            }
        }
    }

    /// A view's range is accepted exactly when every index it names is inside the array, and
    /// then it is the offset and length of those indices.
    #[test]
    fn view_ranges_are_inside_their_array(start in bound(), end in bound(), len in size()) {
        let first = match start {
            Bound::Included(s) => s as u128,
            Bound::Excluded(s) => s as u128 + 1,
            Bound::Unbounded => 0,
        };
        let past = match end {
            Bound::Included(e) => e as u128 + 1,
            Bound::Excluded(e) => e as u128,
            Bound::Unbounded => len as u128,
        };
        let inside = first <= past && past <= len as u128;
        match checked_range(&(start, end), len) {
            Ok((offset, n)) => {
                prop_assert!(inside);
                prop_assert_eq!((offset as u128, n as u128), (first, past - first));
            }
            Err(e) => {
                prop_assert!(!inside);
                prop_assert!(names_arg(&e, &["range"]), "{e:?}");
            }
        }
    }
}

proptest! {
    #![proptest_config(config())]

    /// PEs whose drops landed at different moments offer different retired allocations: what
    /// is freed is exactly what every PE offers, in allocation order, the same on every PE
    /// (each reads the same table), so the heaps stay the same.
    #[test]
    fn only_allocations_every_pe_offers_are_freed_in_order(
        offers in prop::collection::vec(prop::collection::btree_set(0u64..40, 0..=super::OFFER), 1..=8),
        serial in 40u64..100,
    ) {
        use crate::runtime::exchange::{entry, tag};
        let table: Vec<_> = offers
            .iter()
            .map(|o| {
                let mut words = vec![serial, 64, 0, o.len() as u64];
                words.extend(o.iter().copied());
                entry(tag::ALLOC, &words)
            })
            .collect();
        let freed = super::agreed_frees(&table, 3);
        let want: Vec<u64> = offers[0]
            .iter()
            .copied()
            .filter(|s| offers.iter().all(|o| o.contains(s)))
            .collect();
        prop_assert_eq!(&freed, &want);
        prop_assert!(freed.windows(2).all(|w| w[0] < w[1]));
    }
}
