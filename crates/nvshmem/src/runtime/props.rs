//! Property tests of what a runtime reads before NVSHMEM starts: sizes
//! (`NVSHMEM_SYMMETRIC_SIZE`, nvshmem-perf's), the heap size request, the bootstrap name and
//! timeout, and the launcher's variables. Each PE reads its own environment, so what matters
//! here is that any value is taken or refused with an error naming the variable, never a
//! panic at start-up.
use std::collections::HashMap;

use proptest::prelude::*;

use super::{
    launcher::{detect, Bootstrap},
    parse_size,
    settings::heap_size,
    uid::parse_timeout,
    DEFAULT_HEAP_SIZE,
};
use crate::{
    props::{config, names_arg, size, text},
    Error,
};

/// Size strings: a number with an optional suffix, padded, in any case; and junk.
fn size_text() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => (size(), "[ ]{0,2}", prop::sample::select(vec!["", "k", "K", "m", "M", "g", "G", "t", "T", "x", "KB", "é"]), "[ ]{0,2}")
            .prop_map(|(n, pad, suffix, end)| format!("{pad}{n}{pad}{suffix}{end}")),
        1 => "[+-]?[0-9]{0,24}[kKmMgGtT]?",
        1 => "\\PC{0,10}",
    ]
}

/// The variables the launch is read from, each set or not to a number, a hostile number, or
/// junk.
fn environment() -> impl Strategy<Value = HashMap<String, String>> {
    const VARS: &[&str] = &[
        "NVSHMEM_RS_BOOTSTRAP",
        "RANK",
        "WORLD_SIZE",
        "LOCAL_RANK",
        "LOCAL_WORLD_SIZE",
        "MASTER_ADDR",
        "MASTER_PORT",
        "OMPI_COMM_WORLD_RANK",
        "OMPI_COMM_WORLD_SIZE",
        "OMPI_COMM_WORLD_LOCAL_RANK",
        "SLURM_PROCID",
        "SLURM_NTASKS",
        "SLURM_LOCALID",
        "PMIX_RANK",
        "PMI_RANK",
        "PMI_SIZE",
    ];
    let value = prop_oneof![
        4 => (0usize..=9).prop_map(|n| n.to_string()),
        1 => size().prop_map(|n| n.to_string()),
        1 => Just("65536".to_string()),
        1 => text(&["env", "single", "pmi2", "mpi", "-1", " 3 ", "localhost"]),
    ];
    prop::collection::hash_map(
        prop::sample::select(VARS).prop_map(String::from),
        value,
        0..=8,
    )
}

proptest! {
    #![proptest_config(config())]

    /// A size is a positive number of bytes, the number times the suffix's power of 1024; any
    /// other text (0, overflow, junk) is no size, never a panic.
    #[test]
    fn sizes_parse_to_positive_byte_counts(s in size_text()) {
        let Some(bytes) = parse_size(&s) else { return Ok(()) };
        prop_assert!(bytes > 0);
        let t = s.trim();
        let (digits, shift) = match t.chars().last().map(|c| c.to_ascii_uppercase()) {
            Some('K') => (&t[..t.len() - 1], 10),
            Some('M') => (&t[..t.len() - 1], 20),
            Some('G') => (&t[..t.len() - 1], 30),
            Some('T') => (&t[..t.len() - 1], 40),
            _ => (t, 0),
        };
        let n: u128 = digits.trim().parse().map_err(|_| TestCaseError::fail(format!("{s:?}")))?;
        prop_assert_eq!(bytes as u128, n << shift);
    }

    /// Numbers print and parse back, with every suffix that does not overflow.
    #[test]
    fn sizes_round_trip(n in 1usize..=1 << 24, shift in prop::sample::select(vec![(0, ""), (10, "K"), (20, "m"), (30, "G"), (40, "t")])) {
        let (bits, suffix) = shift;
        prop_assert_eq!(parse_size(&format!(" {n}{suffix} ")), n.checked_mul(1 << bits));
    }

    /// The heap size: the builder's request if above 0 (0 is refused naming `bytes`), else
    /// the variable's size (else an error naming the variable and its value), else the
    /// default.
    #[test]
    fn the_heap_size_comes_from_the_request_or_the_variable(
        requested in prop::option::of(size()), env in prop::option::of(size_text()),
    ) {
        match (requested, heap_size(requested, env.as_deref())) {
            (Some(0), Err(e)) => prop_assert!(names_arg(&e, &["bytes"]), "{e:?}"),
            (Some(r), Ok(size)) => prop_assert_eq!(size, r),
            (None, Ok(size)) => prop_assert_eq!(
                size,
                env.as_deref().map_or(Some(DEFAULT_HEAP_SIZE), parse_size).unwrap_or(0)
            ),
            (None, Err(Error::Environment { var, value, .. })) => {
                prop_assert_eq!(var, "NVSHMEM_SYMMETRIC_SIZE");
                prop_assert_eq!(Some(&value), env.as_ref());
                prop_assert_eq!(parse_size(&value), None);
            }
            (r, got) => prop_assert!(false, "{r:?}: {got:?}"),
        }
    }

    /// The bootstrap timeout: seconds above 0 that a `Duration` holds, or none (then the
    /// start-up refuses the variable).
    #[test]
    fn bootstrap_timeouts_are_positive_durations(
        s in prop_oneof![any::<f64>().prop_map(|x| x.to_string()), crate::props::scale().prop_map(|x| format!("{x:e}")), "\\PC{0,8}"],
    ) {
        if let Some(d) = parse_timeout(&s) {
            prop_assert!(!d.is_zero(), "{s:?}");
        }
    }

    /// Any environment gives a launch or an error naming the variable or the bootstrap, never
    /// a panic; an accepted env launch has its rank inside its size and a port.
    #[test]
    fn any_environment_is_read_or_refused(env in environment(), name in prop::option::of(text(&["auto", "env", "single", "pmi", "pmi2", "pmix", "mpi", "slurm"]))) {
        let requested = match name.as_deref().map(str::parse::<Bootstrap>) {
            Some(Ok(b)) => b,
            Some(Err(e)) => {
                prop_assert!(matches!(e, Error::Environment { .. }), "{e:?}");
                Bootstrap::Auto
            }
            None => Bootstrap::Auto,
        };
        let lookup = |k: &str| env.get(k).cloned();
        match detect(requested, &lookup) {
            Ok(launch) => {
                prop_assert!(launch.bootstrap != Bootstrap::Auto);
                if launch.bootstrap == Bootstrap::Env {
                    let (rank, size) = (launch.rank.unwrap(), launch.size.unwrap());
                    prop_assert!(rank < size);
                    prop_assert_eq!(launch.rendezvous.is_some(), size > 1);
                    if let Some((_, port)) = launch.rendezvous {
                        prop_assert!(port > 0);
                    }
                }
            }
            Err(Error::Environment { var, .. }) => prop_assert!(env.contains_key(&var), "{var}"),
            Err(Error::Bootstrap { bootstrap, .. }) => prop_assert_eq!(bootstrap, "env"),
            Err(e) => prop_assert!(false, "{e:?}"),
        }
    }
}
