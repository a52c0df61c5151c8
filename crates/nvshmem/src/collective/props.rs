//! Property tests of the collectives' checks and of the algorithm choice: every argument set
//! a public call can pass (two buffers or one in place, any lengths, addresses, shapes, root,
//! element type and operator, forced algorithm, reserved scratch) is judged as each PE of a
//! team of 1 to 8 would judge it, from [`check_call`] to the scratch check that `algo::run`
//! makes before it queues anything. Every PE must reach the same decision (the same error,
//! or the same algorithm, scratch and collective steps): one that went ahead alone would wait
//! for the others forever.
use proptest::prelude::*;

use super::{
    algo::{
        choose, registry,
        tests::{collective_steps, team},
        ForcedTable, Step,
    },
    check::{self, shape::Rule, Span},
    check_call, Args, Bufs, Collective,
};
use crate::{
    channel::MAX_TEAM,
    kernels::{Launch, TeamDescriptor},
    memory::check_scratch,
    props::{address, collective, config, dtype, names_arg, op, size},
    team::TeamShape,
    DataType, Error, ReduceOp, Result,
};

/// Where a two-buffer call's `dst` lies relative to its `src`.
#[derive(Debug, Clone, Copy)]
enum Placement {
    /// Right after `src`, `gap` bytes on.
    Apart(u64),
    /// At the same address.
    Same,
    /// `src` is block `k` of `dst` (as the in-place form of fcollect and gather has it on PE `k`).
    SrcIsBlock(usize),
    /// `dst` is block `k` of `src` (reduce-scatter's and scatter's in-place form on PE `k`).
    DstIsBlock(usize),
    /// `shift` bytes after `src`: a partial, maybe misaligned, overlap.
    Shifted(u64),
    /// Anywhere.
    At(u64),
}

/// A shape a buffer carries.
#[derive(Debug, Clone)]
enum ShapeKind {
    None,
    /// `[len]`.
    Flat,
    /// `[len / d, d]`, where `d` divides `len` (else `[len]`).
    Rows(usize),
    /// Any dimensions.
    Any(Vec<usize>),
}

impl ShapeKind {
    fn of(&self, len: usize) -> Option<Vec<usize>> {
        match self {
            ShapeKind::None => None,
            ShapeKind::Flat => Some(vec![len]),
            ShapeKind::Rows(d) if len.checked_rem(*d) == Some(0) => Some(vec![len / d, *d]),
            ShapeKind::Rows(_) => Some(vec![len]),
            ShapeKind::Any(dims) => Some(dims.clone()),
        }
    }
}

/// One call, as every PE of the team makes it.
#[derive(Debug, Clone)]
struct Case {
    coll: Collective,
    /// The in-place form (only where the collective has one).
    in_place: bool,
    dtype: DataType,
    op: Option<ReduceOp>,
    root: Option<usize>,
    /// Two buffers: `src`, `dst`. In place: `src` is the buffer.
    src: Span,
    dst: Span,
    src_shape: Option<Vec<usize>>,
    dst_shape: Option<Vec<usize>>,
    n: usize,
    /// Every member peer-mapped.
    mapped: bool,
    /// The LL capacity of the team's channel, when it has one.
    channel: Option<u32>,
    /// Index into the collective's registry of the algorithm forced.
    forced: Option<usize>,
    /// Bytes of collective scratch reserved.
    reserved: usize,
}

impl Case {
    fn args(&self) -> Args<'_> {
        let bufs = match self.coll {
            Collective::Barrier | Collective::Sync => Bufs::None,
            _ if self.in_place => Bufs::InPlace {
                buf: self.src,
                shape: self.src_shape.as_deref(),
            },
            _ => Bufs::Two {
                src: self.src,
                src_shape: self.src_shape.as_deref(),
                dst: self.dst,
                dst_shape: self.dst_shape.as_deref(),
            },
        };
        Args {
            coll: self.coll,
            name: self.coll.name(),
            dtype: self.dtype,
            op: self.op,
            root: self.root,
            bufs,
        }
    }
}

/// What a PE decides for a call it accepts.
#[derive(Debug, PartialEq)]
struct Decision {
    algorithm: &'static str,
    count: usize,
    in_place: bool,
    scratch: usize,
    /// NVSHMEM's collectives and barriers it queues, in order.
    steps: Vec<String>,
}

/// The team's channel as the kernels see it on PE `team.my_pe`.
fn channel(team: &TeamShape, ll_bytes: u32) -> Option<TeamDescriptor> {
    let offsets = team.peer_offsets.as_ref()?;
    if team.n_pes > MAX_TEAM {
        return None;
    }
    let mut off = [0i64; MAX_TEAM];
    off[..offsets.len()].copy_from_slice(offsets);
    Some(TeamDescriptor {
        off,
        n: team.n_pes as i32,
        me: team.my_pe as i32,
        chan: 0x7e00_0000_0000,
        ll_bytes,
        check: 0,
        abort: 0x1000,
        status: 0x1004,
        timeout_ns: 0,
        fp: [0; 2],
        lam_bytes: 0,
    })
}

/// Everything PE `me` decides for `case` before it queues anything: the checks, the
/// algorithm, the scratch, and (for calls short enough to plan quickly) its plan.
fn decide(case: &Case, me: usize) -> Result<Decision> {
    let team = team(case.n, me, case.mapped);
    let args = case.args();
    let mut call = check_call(&args, &team)?;
    call.descriptor = case.channel.and_then(|ll| channel(&team, ll));
    call.room = case.reserved;
    let forced = case.forced.map(|i| {
        let algorithms = registry(case.coll);
        algorithms[i % algorithms.len()]
    });
    let alg = choose(&call, forced)?;
    let mut d = Decision {
        algorithm: alg.name(),
        count: call.count,
        in_place: call.in_place,
        scratch: 0,
        steps: Vec::new(),
    };
    if call.is_empty() {
        return Ok(d);
    }
    d.scratch = alg.scratch(&call);
    if d.scratch > 0 {
        check_scratch(call.name, d.scratch, case.reserved)?;
    }
    // A 16-bit reduction is planned in 1 MiB chunks: longer calls would only be slow to plan.
    if call.count <= 1 << 24 {
        call.scratch = 0x7d00_0000_0000;
        let mut steps = Vec::new();
        alg.plan(&call, &mut steps);
        d.steps = collective_steps(&steps);
    }
    Ok(d)
}

/// The decision of every PE of the team, errors as their messages.
fn decide_everywhere(case: &Case) -> Vec<std::result::Result<Decision, String>> {
    (0..case.n)
        .map(|me| decide(case, me).map_err(|e| e.to_string()))
        .collect()
}

/// The lengths a call of `count` elements a part needs: (src, dst).
fn right_lengths(coll: Collective, n: usize, count: usize) -> (usize, usize) {
    let all = n.saturating_mul(count);
    match coll {
        Collective::Fcollect | Collective::Gather => (count, all),
        Collective::ReduceScatter | Collective::Scatter => (all, count),
        Collective::Alltoall => (all, all),
        Collective::Barrier | Collective::Sync => (0, 0),
        _ => (count, count),
    }
}

/// Elements a part: mostly a few, sometimes any size.
fn count() -> impl Strategy<Value = usize> {
    prop_oneof![4 => 0usize..=40, 1 => size()]
}

/// How far a length is from the right one: mostly not at all.
fn delta() -> impl Strategy<Value = isize> {
    prop_oneof![6 => Just(0isize), 1 => Just(1), 1 => Just(-1), 1 => any::<isize>()]
}

fn placement() -> impl Strategy<Value = Placement> {
    prop_oneof![
        4 => (0u64..4096).prop_map(Placement::Apart),
        1 => Just(Placement::Same),
        2 => (0usize..=9).prop_map(Placement::SrcIsBlock),
        2 => (0usize..=9).prop_map(Placement::DstIsBlock),
        1 => (1u64..=64).prop_map(Placement::Shifted),
        1 => address().prop_map(Placement::At),
    ]
}

fn shape_kind() -> impl Strategy<Value = ShapeKind> {
    prop_oneof![
        4 => Just(ShapeKind::None),
        2 => Just(ShapeKind::Flat),
        2 => (1usize..=6).prop_map(ShapeKind::Rows),
        1 => prop::collection::vec(size(), 0..=3).prop_map(ShapeKind::Any),
    ]
}

/// A root: `(in range, raw)`; in range it is `raw % n`, else at or past `n`.
fn root_of(n: usize, in_range: bool, raw: usize) -> usize {
    if in_range {
        raw % n
    } else {
        n.saturating_add(raw % 3).max(raw)
    }
}

/// The parts of a [`Case`] that a call's author chooses.
type CallParts = (Collective, usize, bool, DataType, ReduceOp, (bool, usize));
/// Its buffers: count, length deltas, address, placement, shapes.
type BufferParts = (
    usize,
    (isize, isize),
    u64,
    Placement,
    (ShapeKind, ShapeKind),
);
/// Its runtime: mapped, channel, forced algorithm, reserved scratch.
type RuntimeParts = (bool, Option<u32>, Option<usize>, usize);

fn call_parts() -> impl Strategy<Value = CallParts> {
    (
        collective(),
        1usize..=8,
        any::<bool>(),
        dtype(),
        op(),
        (prop::bool::weighted(0.8), size()),
    )
}

fn buffer_parts() -> impl Strategy<Value = BufferParts> {
    (
        count(),
        (delta(), delta()),
        address(),
        placement(),
        (shape_kind(), shape_kind()),
    )
}

fn runtime_parts() -> impl Strategy<Value = RuntimeParts> {
    (
        any::<bool>(),
        prop::option::of(prop::sample::select(vec![16u32 << 10, 1 << 10, 64 << 10])),
        prop::option::of(0usize..8),
        prop_oneof![Just(0usize), size(), Just(usize::MAX)],
    )
}

fn build((c, b, r): (CallParts, BufferParts, RuntimeParts)) -> Case {
    let (coll, n, in_place, dtype, op, (root_in_range, root_raw)) = c;
    let (count, (d_src, d_dst), base, placement, (src_shape, dst_shape)) = b;
    let (mapped, channel, forced, reserved) = r;
    let in_place = in_place && coll.geometry().has_in_place();
    let el = dtype.size();
    let (src_len, dst_len) = right_lengths(coll, n, count);
    let (src_len, dst_len) = (
        src_len.wrapping_add_signed(d_src),
        dst_len.wrapping_add_signed(d_dst),
    );
    let block = |k: usize| (k.wrapping_mul(count).wrapping_mul(el)) as u64;
    let (src_ptr, dst_ptr) = match placement {
        Placement::Apart(gap) => {
            let bytes = (src_len as u64).wrapping_mul(el as u64);
            (base, base.wrapping_add(bytes).wrapping_add(gap))
        }
        Placement::Same => (base, base),
        Placement::SrcIsBlock(k) => (base.wrapping_add(block(k)), base),
        Placement::DstIsBlock(k) => (base, base.wrapping_add(block(k))),
        Placement::Shifted(s) => (base, base.wrapping_add(s)),
        Placement::At(a) => (base, a),
    };
    // In place, the buffer is the whole of it: the blocked output or input, else either.
    let src_len = match coll {
        Collective::Fcollect | Collective::Gather if in_place => dst_len,
        _ => src_len,
    };
    Case {
        coll,
        in_place,
        dtype,
        op: coll.reduces().then_some(op),
        root: coll
            .is_rooted()
            .then(|| root_of(n, root_in_range, root_raw)),
        src: Span::new(src_ptr, src_len, el),
        dst: Span::new(dst_ptr, dst_len, el),
        src_shape: src_shape.of(src_len),
        dst_shape: dst_shape.of(dst_len),
        n,
        mapped,
        channel,
        forced,
        reserved,
    }
}

fn case() -> impl Strategy<Value = Case> {
    (call_parts(), buffer_parts(), runtime_parts()).prop_map(build)
}

/// A call every rule accepts, with its part length: right lengths, buffers apart (or the
/// in-place form), a root in the team, an operator the type has, shapes absent or consistent.
fn well_formed() -> impl Strategy<Value = (Case, usize)> {
    well_formed_of(call_parts())
}

/// [`well_formed`] from the given call parts (a team size of the caller's).
fn well_formed_of(parts: impl Strategy<Value = CallParts>) -> impl Strategy<Value = (Case, usize)> {
    (
        parts,
        0usize..=4096,
        1u64..4096,
        0usize..=4,
        runtime_parts(),
    )
        .prop_map(|(c, count, gap, rows, r)| {
            let (coll, n, in_place, dtype, op, (_, root)) = c;
            let op = match op.check_for("t", dtype) {
                Ok(()) => op,
                // Defined for every kind.
                Err(_) => ReduceOp::Max,
            };
            let shape = match rows {
                0 => ShapeKind::None,
                d if count.checked_rem(d) == Some(0) => ShapeKind::Rows(d),
                _ => ShapeKind::Flat,
            };
            let b = (
                count,
                (0, 0),
                0x7f00_0000_0000,
                Placement::Apart(gap),
                (shape.clone(), shape),
            );
            let case = build(((coll, n, in_place, dtype, op, (true, root)), b, r));
            let count = match coll {
                Collective::Barrier | Collective::Sync => 0,
                _ => count,
            };
            (case, count)
        })
}

proptest! {
    #![proptest_config(config())]

    /// The main property: for any call, every PE of the team reaches the same decision, and
    /// a refusal is one of the errors the validation layer gives (never a panic).
    #[test]
    fn every_pe_decides_alike_and_refusals_are_typed(case in case()) {
        let decisions = decide_everywhere(&case);
        prop_assert!(
            decisions.windows(2).all(|w| w[0] == w[1]),
            "PEs disagree on {case:?}: {decisions:#?}"
        );
        if let Err(e) = decide(&case, 0) {
            match &e {
                Error::InvalidArgument { arg, .. } => prop_assert!(
                    ["src", "dst", "buf", "root", "op"].contains(arg),
                    "{e:?}"
                ),
                Error::Unsupported { .. } => prop_assert!(case.forced.is_none(), "{e:?}"),
                Error::AlgorithmRefused { .. } => prop_assert!(case.forced.is_some(), "{e:?}"),
                Error::ScratchTooSmall { needed, reserved, .. } => {
                    prop_assert!(needed > reserved, "{e:?}")
                }
                _ => prop_assert!(false, "an error no check gives: {e:?}"),
            }
        }
    }

    /// What every rule allows passes the checks on every PE, with the part length and the
    /// in-place flag the call's form says.
    #[test]
    fn well_formed_calls_pass_the_checks((case, count) in well_formed()) {
        for me in 0..case.n {
            let team = team(case.n, me, case.mapped);
            let call = check_call(&case.args(), &team);
            prop_assert!(call.is_ok(), "PE {me}: {case:?}: {:?}", call.err());
            let call = call.unwrap();
            prop_assert_eq!(call.count, count);
            let in_place = case.in_place
                && (count > 0 || matches!(case.coll, Collective::AllReduce | Collective::Reduce | Collective::Broadcast));
            prop_assert_eq!(call.in_place, in_place, "{:?}", case);
        }
    }

    /// On a team of one PE the automatic choice takes `local` for every well-formed call: no
    /// scratch, and at most one step: a copy of the call's bytes between disjoint buffers
    /// (out of place), the scaling kernel in its place where a copy would not give the
    /// kernels' bits (premul_sum other than 1, fp8), the quiet for a barrier, else nothing.
    #[test]
    fn one_pe_calls_take_local_and_cost_one_copy_or_nothing(
        (case, count) in well_formed_of(call_parts().prop_map(|mut c| {
            c.1 = 1;
            c
        }))
    ) {
        let team = team(1, 0, case.mapped);
        let mut call = check_call(&case.args(), &team)?;
        call.descriptor = case.channel.and_then(|ll| channel(&team, ll));
        let alg = choose(&call, None)?;
        prop_assert_eq!(alg.name(), "local");
        prop_assert_eq!(alg.scratch(&call), 0);
        let mut steps = Vec::new();
        alg.plan(&call, &mut steps);
        let fp8 = matches!(case.dtype, DataType::F8E4M3 | DataType::F8E5M2);
        let scaled = case.coll.reduces()
            && (fp8 || matches!(case.op, Some(ReduceOp::PreMulSum(s)) if s != 1.0));
        let bytes = count * case.dtype.size();
        match (case.coll, steps.as_slice()) {
            (Collective::Barrier, [Step::Quiet]) | (Collective::Sync, []) => {}
            // Nothing to do: in place, or nothing to move (found by this property: an empty
            // fcollect out of place).
            (_, []) => prop_assert!((call.in_place || bytes == 0) && !scaled, "{case:?}"),
            (_, [Step::Copy { dst, src, bytes: b }]) => {
                prop_assert!(!call.in_place && !scaled, "{case:?}");
                prop_assert_eq!((*src, *dst, *b), (call.src.ptr, call.dst.ptr, bytes));
                prop_assert!(!call.src.overlaps(&call.dst) || bytes == 0, "{case:?}");
            }
            (_, [Step::Kernel(Launch::Map { src, dst, len, kind: crate::kernels::MapKind::Mul, .. })]) => {
                prop_assert!(scaled, "{case:?}");
                prop_assert_eq!((*src, *dst, *len), (call.src.ptr, call.dst.ptr, count));
            }
            (_, s) => prop_assert!(false, "{case:?}: {s:?}"),
        }
        if call.in_place {
            prop_assert_eq!(call.src.ptr, call.dst.ptr);
        }
    }

    /// A length off by any amount is refused on every PE, naming the buffer.
    #[test]
    fn a_wrong_length_is_refused_naming_the_buffer(
        (case, _) in well_formed(),
        d in prop_oneof![Just(1isize), Just(-1), any::<isize>()].prop_filter("not 0", |d| *d != 0),
        which in any::<bool>(),
    ) {
        // In place, any length of a same-shape call is right, and a blocked one's is wrong only
        // when it does not divide: the two-buffer form is where lengths relate.
        prop_assume!(!case.in_place && !matches!(case.coll, Collective::Barrier | Collective::Sync));
        let mut case = case;
        case.src_shape = None;
        case.dst_shape = None;
        if which {
            case.src.len = case.src.len.wrapping_add_signed(d);
        } else {
            case.dst.len = case.dst.len.wrapping_add_signed(d);
        }
        for me in 0..case.n {
            let e = check_call(&case.args(), &team(case.n, me, case.mapped)).err();
            prop_assert!(
                e.as_ref().is_some_and(|e| names_arg(e, &["src", "dst", "buf"])),
                "PE {me}: {case:?}: {e:?}"
            );
        }
    }

    /// A root outside the team is refused on every PE, naming `root`.
    #[test]
    fn a_root_outside_the_team_is_refused((case, _) in well_formed(), past in size()) {
        prop_assume!(case.root.is_some());
        let mut case = case;
        case.root = Some(case.n.saturating_add(past));
        for me in 0..case.n {
            let e = check_call(&case.args(), &team(case.n, me, case.mapped)).err();
            prop_assert!(
                e.as_ref().is_some_and(|e| names_arg(e, &["root"])),
                "PE {me}: {case:?}: {e:?}"
            );
        }
    }

    /// The span checks on their own, for any spans (any address, length and element size,
    /// any team size, 0 included, any PE index): an answer, never a panic; refusals are
    /// `InvalidArgument`. Overlap is symmetric and means sharing a byte.
    #[test]
    fn the_span_checks_are_total(
        (a_ptr, a_len, a_el) in (address(), size(), prop_oneof![0usize..=16, size()]),
        (b_ptr, b_len, b_el) in (address(), size(), prop_oneof![0usize..=16, size()]),
        n in prop_oneof![0usize..=9, size()],
        own in prop::option::of(size()),
        root in size(),
    ) {
        let (a, b) = (Span::new(a_ptr, a_len, a_el), Span::new(b_ptr, b_len, b_el));
        let bytes = |s: &Span| s.len as u128 * s.elem as u128;
        let shared = bytes(&a) > 0
            && bytes(&b) > 0
            && (a.ptr as u128) < b.ptr as u128 + bytes(&b)
            && (b.ptr as u128) < a.ptr as u128 + bytes(&a);
        prop_assert_eq!(a.overlaps(&b), shared);
        prop_assert_eq!(b.overlaps(&a), shared);
        let results = [
            check::span("c", "src", &a),
            check::root("c", root, n),
            check::same_shape("c", &a, &b),
            check::fcollect("c", n, own, &a, &b).map(drop),
            check::reduce_scatter("c", n, own, &a, &b).map(drop),
            check::alltoall("c", n, &a, &b).map(drop),
            check::divisible("c", "buf", a.len, n).map(drop),
            check::own_block("c", n, own.unwrap_or(0), &a, None).map(drop),
        ];
        for r in results {
            if let Err(e) = r {
                prop_assert!(matches!(e, Error::InvalidArgument { .. }), "{e:?}");
            }
        }
        // A span fits the address space exactly when its bytes do.
        let fits = bytes(&a) <= usize::MAX as u128 && a.ptr as u128 + bytes(&a) <= u64::MAX as u128;
        prop_assert_eq!(check::span("c", "src", &a).is_ok(), fits);
    }

    /// The shape rules for any shapes and team size: never a panic; `Same` wants equal shapes
    /// where both carry one; `Concat` wants `dst` to be `n` of `src` stacked.
    #[test]
    fn shape_rules_hold(
        src in prop::option::of(prop::collection::vec(size(), 0..=3)),
        dst in prop::option::of(prop::collection::vec(size(), 0..=3)),
        n in prop_oneof![0usize..=9, size()],
        rule in prop::sample::select(vec![Rule::Same, Rule::Concat, Rule::Split, Rule::Exchange]),
    ) {
        let got = check::shape::pair("c", rule, n, src.as_deref(), dst.as_deref());
        if let Err(e) = &got {
            prop_assert!(names_arg(e, &["src", "dst"]), "{e:?}");
        }
        let lead = |s: &Option<Vec<usize>>| s.as_ref().and_then(|s| s.split_first().map(|(&d, t)| (d, t.to_vec())));
        match rule {
            Rule::Same => {
                let differ = matches!((&src, &dst), (Some(s), Some(d)) if s != d);
                prop_assert_eq!(got.is_ok(), !differ);
            }
            Rule::Concat => {
                if let (Some((s0, st)), Some((d0, dt))) = (lead(&src), lead(&dst)) {
                    let want = s0.checked_mul(n);
                    prop_assert_eq!(got.is_ok(), want == Some(d0) && st == dt);
                }
            }
            Rule::Split | Rule::Exchange => {
                // The blocked side's leading dimension must divide by the team size.
                if let Some((s0, _)) = lead(&src) {
                    if s0.checked_rem(n) != Some(0) {
                        prop_assert!(got.is_err());
                    }
                }
            }
        }
    }

    /// Forcing algorithms (`NVSHMEM_RS_ALGORITHMS`, `RuntimeBuilder::algorithm`): any string
    /// is applied or refused with a reason, never a panic; it is applied exactly when every
    /// pair names a collective and one of its algorithms (or `auto`), and then the last pair
    /// for a collective is the one in force.
    #[test]
    fn forcing_strings_apply_exactly_when_every_pair_is_known(pairs in prop::collection::vec(
        (
            prop_oneof![
                3 => collective().prop_map(|c| c.name().to_string()),
                1 => prop::sample::select(vec!["AllReduce", " all-gather ", "MPI_Bcast", "sync_all", "everything", ""]).prop_map(String::from),
                1 => "\\PC{0,6}",
            ],
            prop_oneof![
                4 => any::<prop::sample::Index>().prop_map(|i| {
                    let all: Vec<_> = Collective::ALL.iter().flat_map(|c| c.algorithms()).collect();
                    i.get(&all).to_string()
                }),
                1 => prop::sample::select(vec!["auto", " nvshmem ", "NVSHMEM", "carrier_pigeon", ""]).prop_map(String::from),
                1 => "\\PC{0,6}",
            ],
            prop_oneof![4 => Just("="), 1 => Just(""), 1 => Just("=="), 1 => Just(":")],
        ),
        0..=4,
    ), sep in prop::sample::select(vec![",", ", ", " ,", ",,"])) {
        let list = pairs
            .iter()
            .map(|(c, a, eq)| format!("{c}{eq}{a}"))
            .collect::<Vec<_>>()
            .join(sep);
        // The same judgement, stated on its own.
        let mut want = Some(Vec::new());
        for piece in list.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let known = piece.split_once('=').and_then(|(c, a)| {
                let c: Collective = c.parse().ok()?;
                let a = a.trim();
                (a == "auto" || c.algorithms().contains(&a)).then(|| (c, (a != "auto").then(|| a.to_string())))
            });
            match (known, want.as_mut()) {
                (Some(pair), Some(w)) => w.push(pair),
                _ => want = None,
            }
        }
        let forced = ForcedTable::default();
        let got = forced.apply(&list);
        prop_assert_eq!(got.is_ok(), want.is_some(), "{:?}: {:?}", list, got);
        if let Some(pairs) = want {
            for c in Collective::ALL {
                let last = pairs.iter().rev().find(|(pc, _)| *pc == c).and_then(|(_, a)| a.clone());
                prop_assert_eq!(forced.get(c).map(|a| a.name().to_string()), last, "{}", c);
            }
        }
    }
}
