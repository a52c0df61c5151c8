//! Property tests of the validation layer: the generators and settings every area shares,
//! and the properties of the operators, the element types' names, RMA's arguments and the
//! public parsers. Each other area's properties sit next to what they test
//! (`collective::props`, `team::props`, `memory::props`, `runtime::props`).
//!
//! What every property holds, for generated arguments that include the hostile ones (0,
//! `usize::MAX`, addresses near `u64::MAX`, NaN and infinite scales, junk strings): the call
//! does not panic, it returns `Ok` or one of the error variants its table row in
//! [`crate::error`] names, and, where the function takes this PE's index, every PE of the
//! team decides alike.
use proptest::prelude::*;

use crate::{collective::Collective, rma, DataType, ElementKind, Error, ReduceOp, Result};

/// 256 cases a property: every branch of these small functions is reached many times over,
/// and the whole suite runs in seconds on a 2-core machine. Failures are not written to
/// `proptest-regressions/` files: a failing input found is kept as a named unit test.
pub(crate) fn config() -> ProptestConfig {
    ProptestConfig {
        cases: 256,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

/// Sizes and indices, biased to the edges: small ones (where every rule applies), powers of
/// two and their neighbours, and values near `usize::MAX` (where products overflow).
pub(crate) fn size() -> impl Strategy<Value = usize> {
    prop_oneof![
        4 => 0usize..=16,
        2 => (0u32..usize::BITS).prop_flat_map(|b| {
            let p = 1usize << b;
            prop_oneof![Just(p - 1), Just(p), Just(p.wrapping_add(1))]
        }),
        1 => (usize::MAX - 16)..=usize::MAX,
        1 => any::<usize>(),
    ]
}

/// Device addresses: realistic ones (a heap at 0x7f00_0000_0000, 256-byte aligned or not),
/// 0, and ones near the end of the address space.
pub(crate) fn address() -> impl Strategy<Value = u64> {
    prop_oneof![
        4 => (0u64..1 << 20).prop_map(|o| 0x7f00_0000_0000 + o),
        1 => Just(0u64),
        1 => (u64::MAX - 64)..=u64::MAX,
        1 => any::<u64>(),
    ]
}

/// Scales of `premul_sum`: whole and fractional, negative, NaN, infinite, the integer types'
/// range limits and their neighbours, and any `f64`.
pub(crate) fn scale() -> impl Strategy<Value = f64> {
    let limits = [
        0.0,
        -0.0,
        1.0,
        -1.0,
        0.5,
        -2.5,
        f64::NAN,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::MAX,
        f64::MIN_POSITIVE,
        2f64.powi(63),
        -(2f64.powi(63)),
        2f64.powi(64),
        2f64.powi(63) - 1024.0,
        2f64.powi(64) - 2048.0,
    ];
    prop_oneof![
        2 => prop::sample::select(limits.to_vec()),
        2 => (-1000i64..=1000).prop_map(|i| i as f64),
        1 => (-1000i64..=1000).prop_map(|i| i as f64 / 8.0),
        2 => any::<f64>(),
    ]
}

/// Every element type.
pub(crate) fn dtype() -> impl Strategy<Value = DataType> {
    prop::sample::select(DataType::ALL)
}

/// Every operator, `premul_sum` with any [`scale`].
pub(crate) fn op() -> impl Strategy<Value = ReduceOp> {
    prop_oneof![
        prop::sample::select(ReduceOp::BASIC.to_vec()),
        scale().prop_map(ReduceOp::PreMulSum),
    ]
}

/// Every collective.
pub(crate) fn collective() -> impl Strategy<Value = Collective> {
    prop::sample::select(Collective::ALL.to_vec())
}

/// Strings a person might type, and a few that nobody would: names with junk around them,
/// other cases, separators, and any Unicode.
pub(crate) fn text(words: &'static [&'static str]) -> impl Strategy<Value = String> {
    let word = prop::sample::select(words);
    prop_oneof![
        3 => word.clone().prop_map(String::from),
        2 => (word.clone(), prop::sample::select(&[" ", "-", "_", "(", ")", "=", ",", "\t", "é", "0", "K"][..]), any::<bool>())
            .prop_map(|(w, junk, before)| if before { format!("{junk}{w}") } else { format!("{w}{junk}") }),
        1 => word.prop_map(|w| w.to_ascii_uppercase()),
        2 => "\\PC{0,12}",
        1 => "[a-z_=,0-9() .+-]{0,16}",
    ]
}

/// Whether `e` is an [`Error::InvalidArgument`] naming one of `args`.
pub(crate) fn names_arg(e: &Error, args: &[&str]) -> bool {
    matches!(e, Error::InvalidArgument { arg, .. } if args.contains(arg))
}

/// The scale rule of `premul_sum`, stated on its own: finite; for integers a whole number
/// that converts exactly to the 64-bit integer the kernels compute in; for floats other than
/// f64, which compute in f32, 0 or of a magnitude f32 holds (from its least subnormal, half
/// of which rounds up to it, to its largest, and what rounds down to it).
fn scale_fits(dtype: DataType, s: f64) -> bool {
    let two63 = 9_223_372_036_854_775_808f64;
    let least = f64::from(f32::from_bits(1)) / 2.0;
    let most =
        f64::from(f32::MAX) + f64::from(f32::MAX - f32::from_bits(f32::MAX.to_bits() - 1)) / 2.0;
    s.is_finite()
        && match dtype.kind() {
            ElementKind::Signed => s.trunc() == s && (-two63..two63).contains(&s),
            ElementKind::Unsigned => s.trunc() == s && (0.0..2.0 * two63).contains(&s),
            ElementKind::Float if dtype == DataType::F64 => true,
            ElementKind::Float => s == 0.0 || (least < s.abs() && s.abs() < most),
            ElementKind::Bool => true,
        }
}

fn check_op(op: ReduceOp, dtype: DataType) -> Result<()> {
    op.check_for("all_reduce", dtype)
}

proptest! {
    #![proptest_config(config())]

    /// An operator is accepted for a type exactly when the type's kind has it and (for
    /// `premul_sum`) the scale suits the type; a refusal names `op`.
    #[test]
    fn operators_are_accepted_exactly_where_defined(op in op(), dtype in dtype()) {
        let kind = dtype.kind();
        let want = op.applies_to(kind)
            && match op {
                ReduceOp::PreMulSum(s) => scale_fits(dtype, s),
                _ => true,
            };
        match check_op(op, dtype) {
            Ok(()) => prop_assert!(want, "{op} of {dtype} accepted"),
            Err(e) => {
                prop_assert!(!want, "{op} of {dtype} refused: {e}");
                prop_assert!(names_arg(&e, &["op"]), "{e:?}");
            }
        }
        // What `supports` offers can run: it never says yes where the call refuses.
        if op.supports_type(dtype) {
            prop_assert!(check_op(op, dtype).is_ok());
        }
    }

    /// Parsing an operator: `Ok` or an error naming `op`; what parses prints back to itself.
    #[test]
    fn operators_parse_or_say_why(s in prop_oneof![
        text(&["sum", "prod", "product", "min", "max", "and", "or", "xor", "avg", "mean", "band", "premul_sum", "premulsum("]),
        scale().prop_map(|s| format!("premul_sum({s})")),
        (scale(), "[ \t]{0,2}").prop_map(|(s, w)| format!("{w}PREMULSUM({w}{s:e}{w}){w}")),
    ]) {
        match s.parse::<ReduceOp>() {
            Ok(op) => {
                if let ReduceOp::PreMulSum(x) = op {
                    prop_assert!(x.is_finite(), "{s:?} gave {op}");
                }
                prop_assert_eq!(op.to_string().parse::<ReduceOp>().ok(), Some(op));
            }
            Err(e) => prop_assert!(names_arg(&e, &["op"]), "{e:?}"),
        }
    }

    /// The other names a program or its environment gives: collectives, comparisons, element
    /// types. Each parses or is refused with an error naming the argument, and round-trips.
    #[test]
    fn names_parse_or_say_why(
        coll in text(&["all_reduce", "allreduce", "all-gather", "MPI_Gather", "reduce_scatter", "sync_all", "team_sync"]),
        cmp in text(&["eq", "ne", "gt", "ge", "lt", "le", "==", "!=", ">", ">=", "<", "<="]),
        ty in text(&["f32", "bf16", "f8e4m3", "u64", "bool8", "i8", "half", "float"]),
    ) {
        match coll.parse::<Collective>() {
            Ok(c) => prop_assert_eq!(c.name().parse::<Collective>().ok(), Some(c)),
            Err(e) => prop_assert!(names_arg(&e, &["collective"]), "{e:?}"),
        }
        match cmp.parse::<rma::Cmp>() {
            Ok(c) => prop_assert_eq!(c.to_string().parse::<rma::Cmp>().ok(), Some(c)),
            Err(e) => prop_assert!(names_arg(&e, &["cmp"]), "{e:?}"),
        }
        match ty.parse::<DataType>() {
            Ok(d) => prop_assert_eq!(d.name().parse::<DataType>().ok(), Some(d)),
            Err(e) => prop_assert!(names_arg(&e, &["type"]), "{e:?}"),
        }
    }

    /// put and get: refused exactly when the lengths differ (naming `src`, checked first) or
    /// `pe` is not a PE of the job (naming `pe`).
    #[test]
    fn put_and_get_need_equal_lengths_and_a_pe_of_the_job(
        src in size(), dst in size(), pe in size(), n in 1usize..=8,
    ) {
        match rma::rma_args("put", src, dst, pe, n) {
            Ok(()) => prop_assert!(src == dst && pe < n),
            Err(e) if src != dst => prop_assert!(names_arg(&e, &["src"]), "{e:?}"),
            Err(e) => prop_assert!(pe >= n && names_arg(&e, &["pe"]), "{e:?}"),
        }
    }

    /// A signal word is one of its array's.
    #[test]
    fn signal_words_are_inside_their_array(index in size(), len in size()) {
        match rma::signal_index(index, len) {
            Ok(()) => prop_assert!(index < len),
            Err(e) => prop_assert!(index >= len && names_arg(&e, &["index"]), "{e:?}"),
        }
    }
}
