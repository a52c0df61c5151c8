//! What a collective call would run, asked without making it: [`Team::plan_of`], a read-only
//! query of the algorithm layer (its choice and its scratch), for benchmarks and reports that
//! want to name the algorithm behind a figure, and for programs that size their scratch.
use super::{
    algo::{self, Algorithm, Collective, Geometry},
    check::Span,
    check_call, Args, Bufs, CallKind,
};
use crate::{team::TeamShape, DataType, Error, ReduceOp, Result, Team};

/// A collective call described at run time, for [`Team::plan_of`]: the call's collective,
/// element type, size, operator, root and whether it is in place, without its buffers. It is
/// a [`CallKind`] (the call a [`Team::collective`] makes) with an element type and a size
/// standing in for the buffers ([`CallSpec::of`], [`CallSpec::kind`]).
///
/// `count` is the elements of one block, as [`Geometry::lengths`] takes it: the whole input
/// of an all-reduce, reduce or broadcast; one PE's input of an all-gather or gather; one PE's
/// output of a reduce-scatter or scatter; one destination's share of an alltoall; unused by
/// barrier and sync. A reduction's operator defaults to sum, a rooted call's root to 0.
///
/// ```
/// use nvshmem::{collective::{CallSpec, Collective}, DataType, ReduceOp};
/// let spec = CallSpec::new(Collective::ReduceScatter, DataType::BF16, 1 << 20)
///     .op(ReduceOp::Avg)
///     .in_place(true);
/// assert_eq!(spec.collective(), Collective::ReduceScatter);
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CallSpec {
    kind: CallKind,
    dtype: DataType,
    count: usize,
}

impl CallSpec {
    /// `coll` on `count` elements a block of `dtype`, out of place, by sum, from root 0.
    ///
    /// ```
    /// use nvshmem::{collective::{CallSpec, Collective}, DataType};
    /// let spec = CallSpec::new(Collective::Fcollect, DataType::F32, 4096);
    /// assert_eq!(spec.count(), 4096);
    /// ```
    pub fn new(coll: Collective, dtype: DataType, count: usize) -> Self {
        CallSpec::of(CallKind::new(coll), dtype, count)
    }

    /// The call `kind` on `count` elements a block of `dtype`.
    ///
    /// ```
    /// use nvshmem::{collective::{CallKind, CallSpec, Collective}, DataType};
    /// let kind = CallKind::new(Collective::Gather).root(1);
    /// assert_eq!(CallSpec::of(kind, DataType::F32, 8).kind(), kind);
    /// ```
    pub fn of(kind: CallKind, dtype: DataType, count: usize) -> Self {
        CallSpec { kind, dtype, count }
    }

    /// The call it describes, without its size.
    ///
    /// ```
    /// use nvshmem::{collective::{CallKind, CallSpec, Collective}, DataType};
    /// let spec = CallSpec::new(Collective::Fcollect, DataType::U8, 4).in_place(true);
    /// assert_eq!(spec.kind(), CallKind::new(Collective::Fcollect).in_place(true));
    /// ```
    pub fn kind(&self) -> CallKind {
        self.kind
    }

    /// The operator of a reduction (ignored by the other collectives).
    ///
    /// ```
    /// use nvshmem::{collective::{CallSpec, Collective}, DataType, ReduceOp};
    /// let spec = CallSpec::new(Collective::AllReduce, DataType::F32, 8).op(ReduceOp::Max);
    /// assert_eq!(spec.operator(), ReduceOp::Max);
    /// ```
    pub fn op(mut self, op: ReduceOp) -> Self {
        self.kind = self.kind.op(op);
        self
    }

    /// The root of a rooted collective (ignored by the others).
    ///
    /// ```
    /// use nvshmem::{collective::{CallSpec, Collective}, DataType};
    /// let spec = CallSpec::new(Collective::Gather, DataType::U8, 64).root(1);
    /// assert_eq!(spec.root_pe(), 1);
    /// ```
    pub fn root(mut self, root: usize) -> Self {
        self.kind = self.kind.root(root);
        self
    }

    /// The in-place form (`Team::*_in_place`), with its one buffer laid out as that form's
    /// docs say.
    ///
    /// ```
    /// use nvshmem::{collective::{CallSpec, Collective}, DataType};
    /// assert!(CallSpec::new(Collective::Scatter, DataType::F64, 2).in_place(true).is_in_place());
    /// ```
    pub fn in_place(mut self, in_place: bool) -> Self {
        self.kind = self.kind.in_place(in_place);
        self
    }

    /// The collective.
    ///
    /// ```
    /// use nvshmem::{collective::{CallSpec, Collective}, DataType};
    /// assert_eq!(CallSpec::new(Collective::Sync, DataType::U8, 0).collective(), Collective::Sync);
    /// ```
    pub fn collective(&self) -> Collective {
        self.kind.coll
    }

    /// The element type.
    ///
    /// ```
    /// use nvshmem::{collective::{CallSpec, Collective}, DataType};
    /// assert_eq!(CallSpec::new(Collective::Broadcast, DataType::I8, 3).dtype(), DataType::I8);
    /// ```
    pub fn dtype(&self) -> DataType {
        self.dtype
    }

    /// Elements of one block.
    ///
    /// ```
    /// use nvshmem::{collective::{CallSpec, Collective}, DataType};
    /// assert_eq!(CallSpec::new(Collective::Alltoall, DataType::U16, 7).count(), 7);
    /// ```
    pub fn count(&self) -> usize {
        self.count
    }

    /// The operator (sum unless [`CallSpec::op`] set another).
    ///
    /// ```
    /// use nvshmem::{collective::{CallSpec, Collective}, DataType, ReduceOp};
    /// assert_eq!(CallSpec::new(Collective::Reduce, DataType::F32, 1).operator(), ReduceOp::Sum);
    /// ```
    pub fn operator(&self) -> ReduceOp {
        self.kind.op
    }

    /// The root (0 unless [`CallSpec::root`] set another).
    ///
    /// ```
    /// use nvshmem::{collective::{CallSpec, Collective}, DataType};
    /// assert_eq!(CallSpec::new(Collective::Scatter, DataType::F32, 1).root_pe(), 0);
    /// ```
    pub fn root_pe(&self) -> usize {
        self.kind.root
    }

    /// Whether it describes the in-place form.
    ///
    /// ```
    /// use nvshmem::{collective::{CallSpec, Collective}, DataType};
    /// assert!(!CallSpec::new(Collective::AllReduce, DataType::F32, 1).is_in_place());
    /// ```
    pub fn is_in_place(&self) -> bool {
        self.kind.in_place
    }
}

/// What a call would run ([`Team::plan_of`]): the algorithm the automatic choice takes, or
/// the one forced for its collective, and the collective scratch that algorithm needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct CallPlan {
    /// The algorithm's name, one of [`Collective::algorithms`].
    pub algorithm: &'static str,
    /// Bytes of collective scratch it needs ([`Runtime::reserve_scratch`](crate::Runtime::reserve_scratch));
    /// 0 for a call with no elements, which queues nothing.
    pub scratch_bytes: usize,
    /// Whether the algorithm is forced ([`Runtime::set_algorithm`](crate::Runtime::set_algorithm),
    /// [`ALGORITHMS_VAR`](super::ALGORITHMS_VAR)) rather than chosen.
    pub forced: bool,
}

/// Symmetric addresses standing in for a described call's buffers: apart, so that only an
/// in-place call overlaps itself. Only plans read buffer addresses, and none is made here.
const SRC: u64 = 1 << 32;
const DST: u64 = 1 << 62;

/// The plan of the call `spec` describes, as PE `team.my_pe` of `team` would choose it with
/// `forced` forced for its collective: the same checks, the same choice and the same scratch
/// as the call itself ([`super::algo::run`], [`super::algo::prepare`]).
/// `room` is the collective scratch reserved now, which the automatic choice weighs as the
/// call does; `heap_size` the symmetric heap's size, which the call's arrays fit in.
pub(crate) fn plan_with_room(
    spec: &CallSpec,
    team: &TeamShape,
    forced: Option<&'static dyn Algorithm>,
    room: usize,
    heap_size: usize,
) -> Result<CallPlan> {
    let mut call = described(spec, team, heap_size)?;
    call.room = room;
    let alg = algo::choose(&call, forced)?;
    Ok(CallPlan {
        algorithm: alg.name(),
        scratch_bytes: if call.is_empty() {
            0
        } else {
            alg.scratch(&call)
        },
        forced: forced.is_some(),
    })
}

/// The call `spec` describes on `team`, its stand-in buffers checked as a call's arrays are,
/// and refused where they need more than `heap_size` bytes ([`fits_the_heap`]).
fn described<'t>(spec: &CallSpec, team: &'t TeamShape, heap_size: usize) -> Result<algo::Call<'t>> {
    let name = spec.kind.call_name("Team::plan_of", "spec")?;
    let (coll, in_place) = (spec.kind.coll, spec.kind.in_place);
    let elem = spec.dtype.size();
    let Some((src_len, dst_len)) = coll.geometry().lengths(spec.count, team.n_pes) else {
        return Err(Error::arg(
            name,
            "count",
            format_args!("{} PEs x {} elements overflow", team.n_pes, spec.count),
        ));
    };
    let bufs = match coll.geometry() {
        Geometry::None => Bufs::None,
        _ if in_place => Bufs::InPlace {
            buf: Span::new(SRC, src_len.max(dst_len), elem),
            shape: None,
        },
        _ => Bufs::Two {
            src: Span::new(SRC, src_len, elem),
            src_shape: None,
            dst: Span::new(DST, dst_len, elem),
            dst_shape: None,
        },
    };
    let args = Args {
        coll,
        name,
        dtype: spec.dtype,
        op: spec.kind.op_arg(),
        root: spec.kind.root_arg(),
        bufs,
    };
    let call = check_call(&args, team)?;
    fits_the_heap(name, spec, &args.bufs, heap_size)?;
    Ok(call)
}

/// Refuses a description whose buffers need more bytes than the symmetric heap has. A call
/// takes symmetric arrays, all of them in the heap, so no call of that size can be made; and
/// the algorithms plan for arrays that exist (NVSHMEM's 16-bit integer reductions queue one
/// step per 1 MiB, which for a count no heap holds is more steps than the host's memory).
fn fits_the_heap(name: &'static str, spec: &CallSpec, bufs: &Bufs, heap_size: usize) -> Result<()> {
    let bytes = match bufs {
        Bufs::None => 0,
        Bufs::InPlace { buf, .. } => buf.bytes(),
        Bufs::Two { src, dst, .. } => src.bytes() + dst.bytes(),
    };
    if bytes <= heap_size as u128 {
        return Ok(());
    }
    Err(Error::arg(
        name,
        "count",
        format_args!(
            "blocks of {} elements of {} need {bytes} bytes of arrays, more than the symmetric \
             heap's {heap_size} bytes hold (RuntimeBuilder::heap_size)",
            spec.count, spec.dtype
        ),
    ))
}

impl Team {
    /// What the call `spec` describes would run on this PE's team, now: the algorithm (the
    /// automatic choice, or the one forced for its collective) and the collective scratch it
    /// needs. Queues nothing, allocates nothing, and gives the answer every member gets (the
    /// choice depends only on what every member passes alike). The arguments are checked as
    /// the call checks them, so a call that would be refused is refused here with the same
    /// error ([`Error::AlgorithmRefused`] for a forced algorithm that cannot run it,
    /// [`Error::Unsupported`] when none can). A size whose buffers need more bytes than the
    /// symmetric heap has ([`RuntimeInfo::heap_size`](crate::RuntimeInfo::heap_size)), which no
    /// call can have, is refused with [`Error::InvalidArgument`] naming `count`.
    ///
    /// ```no_run
    /// use nvshmem::{collective::{CallSpec, Collective}, DataType, ReduceOp, Runtime};
    /// let rt = Runtime::init()?;
    /// let team = rt.world();
    /// let spec = CallSpec::new(Collective::AllReduce, DataType::BF16, 16 << 20)
    ///     .op(ReduceOp::Avg)
    ///     .in_place(true);
    /// let plan = team.plan_of(&spec)?;
    /// rt.reserve_scratch(plan.scratch_bytes)?; // collective: every PE gets the same plan
    /// println!("an in-place bf16 avg of 32 MiB runs as {}", plan.algorithm);
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    pub fn plan_of(&self, spec: &CallSpec) -> Result<CallPlan> {
        let rt = self.runtime();
        // Resolved as the calls resolve it.
        let forced = rt.forced_algorithms().forced(spec.kind.coll);
        plan_with_room(
            spec,
            self.shape(),
            forced,
            rt.scratch_bytes(),
            rt.heap().size(),
        )
    }
}

/// [`plan_with_room`] with unlimited scratch on an unlimited heap, as the algorithm layer's
/// tests describe calls.
#[cfg(test)]
fn plan_for(
    spec: &CallSpec,
    team: &TeamShape,
    forced: Option<&'static dyn Algorithm>,
) -> Result<CallPlan> {
    plan_with_room(spec, team, forced, usize::MAX, usize::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collective::algo::{
        crossover,
        queue::{execute, record::Recorder},
        tests::{call, team, with_channel},
    };

    /// The operators the plan tests cover: a plain one, two that NVSHMEM cannot compute
    /// itself, and a bitwise one.
    const OPS: [ReduceOp; 4] = [
        ReduceOp::Sum,
        ReduceOp::Avg,
        ReduceOp::PreMulSum(2.0),
        ReduceOp::Xor,
    ];

    /// A team of `n` as [`team`] makes it, with a channel (the NVLink kernels' view) when
    /// `mapped`, as a peer-mapped team of up to 8 gets one.
    fn shape(n: usize, me: usize, mapped: bool) -> TeamShape {
        let mut t = team(n, me, mapped);
        if mapped {
            let d = with_channel(call(
                &t,
                Collective::Barrier,
                DataType::U8,
                ReduceOp::Sum,
                0,
                false,
                0,
            ))
            .descriptor;
            t.descriptor = d;
        }
        t
    }

    /// What `alg`'s plan for `c` queues, recorded, with the scratch at `scratch`.
    fn recorded(alg: &dyn Algorithm, c: &algo::Call, scratch: u64) -> Vec<algo::Step> {
        let mut c = c.clone();
        c.scratch = scratch;
        let mut steps = Vec::new();
        alg.plan(&c, &mut steps);
        let mut q = Recorder::default();
        execute(&steps, &mut q).expect("the recorder fails nothing");
        q.queued
    }

    #[test]
    fn calls_are_named_as_the_public_calls_name_themselves() {
        let named = |c, in_place| {
            CallSpec::new(c, DataType::F32, 1)
                .in_place(in_place)
                .kind()
                .call_name("Team::plan_of", "spec")
                .ok()
        };
        let in_place = [
            "all_reduce_in_place",
            "reduce_in_place",
            "broadcast_in_place",
            "fcollect_in_place",
            "reduce_scatter_in_place",
            "gather_in_place",
            "scatter_in_place",
        ];
        for c in Collective::ALL {
            assert_eq!(named(c, false), Some(c.name()));
            let expected = in_place
                .iter()
                .find(|n| n.strip_suffix("_in_place") == Some(c.name()))
                .copied();
            assert_eq!(named(c, true), expected, "{c}");
        }
        for c in [Collective::Alltoall, Collective::Barrier, Collective::Sync] {
            assert_eq!(named(c, true), None, "{c}");
        }
    }

    /// The query describes the call a real one makes (`tests::call` lays out its buffers as
    /// the public calls do), chooses as the call chooses, and names the scratch the chosen plan
    /// uses: its recorded steps move with the scratch's address exactly when the query says
    /// the call needs scratch.
    #[test]
    fn the_plan_of_a_call_is_what_the_call_runs() {
        let types = [
            DataType::F32,
            DataType::BF16,
            DataType::I16,
            DataType::F8E4M3,
        ];
        // Algorithms the automatic choice took; and any, forced ones included.
        let (mut chosen, mut seen) = (
            std::collections::BTreeSet::new(),
            std::collections::BTreeSet::new(),
        );
        let mut with_scratch = 0;
        for n in [1, 2, 3, 8] {
            for mapped in [false, true] {
                for me in [0, n - 1] {
                    let t = shape(n, me, mapped);
                    for coll in Collective::ALL {
                        for dtype in types {
                            for op in OPS {
                                if coll.reduces() && op.check_for("t", dtype).is_err() {
                                    continue;
                                }
                                for count in [0, 1, 4099, 1 << 20] {
                                    for in_place in [false, true] {
                                        if in_place && !coll.geometry().has_in_place() {
                                            continue;
                                        }
                                        let root = n - 1;
                                        let spec = CallSpec::new(coll, dtype, count)
                                            .op(op)
                                            .root(root)
                                            .in_place(in_place);
                                        let what = format!("{coll} {dtype} {op} x{count} in place {in_place} n {n} me {me} mapped {mapped}");
                                        let op = if coll.reduces() { op } else { ReduceOp::Sum };
                                        let root = if coll.is_rooted() { root } else { 0 };
                                        let count = if coll.geometry() == Geometry::None {
                                            0
                                        } else {
                                            count
                                        };
                                        let mut c =
                                            call(&t, coll, dtype, op, count, in_place, root);
                                        c.descriptor = t.descriptor;
                                        c.arch = Some(crossover::Arch::SM90);
                                        // The automatic choice, then each algorithm forced.
                                        let registry = algo::registry(coll).iter().copied();
                                        for forced in
                                            std::iter::once(None).chain(registry.map(Some))
                                        {
                                            let what = format!("{what} forced {forced:?}");
                                            let got = plan_for(&spec, &t, forced);
                                            let (got, alg) = match (got, algo::choose(&c, forced)) {
                                                (Ok(g), Ok(a)) => (g, a),
                                                (Err(_), Err(_)) => continue,
                                                (g, w) => panic!(
                                                    "{what}: {g:?} vs {:?}",
                                                    w.map(|a| a.name())
                                                ),
                                            };
                                            assert_eq!(got.algorithm, alg.name(), "{what}");
                                            assert_eq!(got.forced, forced.is_some());
                                            if forced.is_none() {
                                                chosen.insert(got.algorithm);
                                            }
                                            seen.insert(got.algorithm);
                                            if c.is_empty() {
                                                assert_eq!(got.scratch_bytes, 0, "{what}");
                                                continue;
                                            }
                                            assert_eq!(
                                                got.scratch_bytes,
                                                alg.scratch(&c),
                                                "{what}"
                                            );
                                            let a = recorded(alg, &c, 0x4000_0000);
                                            let b = recorded(alg, &c, 0x5000_0000);
                                            assert_eq!(
                                                got.scratch_bytes > 0,
                                                a != b,
                                                "{what}: {a:?}"
                                            );
                                            with_scratch += usize::from(got.scratch_bytes > 0);
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
        // The cases reach every algorithm, most by the automatic choice, and calls that need
        // scratch.
        for a in [
            "local",
            "nvlink_ll",
            "nvlink_direct",
            "nvshmem",
            "nvlink",
            "rooted_get",
            "sum_then_div",
            "scale_then_sum",
        ] {
            assert!(chosen.contains(a), "{a} never chosen: {chosen:?}");
        }
        for coll in Collective::ALL {
            for a in coll.algorithms() {
                assert!(seen.contains(a), "{a} never planned: {seen:?}");
            }
        }
        assert!(with_scratch > 0);
    }

    #[test]
    fn a_forced_algorithm_is_reported_or_refused_as_the_call_would_be() {
        let t = shape(2, 1, false);
        let spec = CallSpec::new(Collective::AllReduce, DataType::F32, 4).op(ReduceOp::Avg);
        let forced = algo::registry(Collective::AllReduce)
            .iter()
            .copied()
            .find(|a| a.name() == "sum_then_div");
        let got = plan_for(&spec, &t, forced).unwrap();
        assert_eq!(
            (got.algorithm, got.scratch_bytes, got.forced),
            ("sum_then_div", 0, true)
        );
        let native = algo::registry(Collective::AllReduce)
            .iter()
            .copied()
            .find(|a| a.name() == "nvshmem");
        let e = plan_for(&spec, &t, native).unwrap_err();
        assert_eq!(
            e.to_string(),
            "all_reduce: the forced algorithm nvshmem cannot run this call: NVSHMEM has no avg reduction of f32"
        );
        // A rooted reduction on NVSHMEM's path needs the result's bytes of scratch.
        let spec = CallSpec::new(Collective::Reduce, DataType::F64, 16)
            .op(ReduceOp::Max)
            .root(1);
        let got = plan_for(&spec, &t, None).unwrap();
        assert_eq!(
            (got.algorithm, got.scratch_bytes),
            ("nvshmem", 128),
            "{got:?}"
        );
    }

    /// A size whose arrays no heap holds is refused before anything is planned. An i16
    /// all-reduce of 2^50 elements on a team that is not peer-mapped and was made by
    /// nvshmemx_team_init had NVSHMEM's plan made only to be looked at, one step per 2^19
    /// elements: 2^31 steps, and the process aborted for want of memory.
    #[test]
    fn a_size_whose_arrays_no_heap_holds_is_refused() {
        let mut t = shape(2, 0, false);
        t.nvshmem_collectives = false;
        let heap = 1 << 30;
        let plan = |count, in_place| {
            let spec = CallSpec::new(Collective::AllReduce, DataType::I16, count);
            plan_with_room(&spec.in_place(in_place), &t, None, 0, heap)
        };
        let e = plan(1 << 50, false).unwrap_err();
        assert!(
            matches!(e, Error::InvalidArgument { arg: "count", .. }),
            "{e:?}"
        );
        assert_eq!(
            e.to_string(),
            "all_reduce: invalid count: blocks of 1125899906842624 elements of i16 need \
             4503599627370496 bytes of arrays, more than the symmetric heap's 1073741824 bytes \
             hold (RuntimeBuilder::heap_size)"
        );
        // Two arrays of half the heap each, or one of all of it in place, are planned.
        assert_eq!(plan(heap / 4, false).unwrap().algorithm, "nvshmem");
        assert!(plan(heap / 4 + 1, false).is_err());
        assert_eq!(plan(heap / 2, true).unwrap().scratch_bytes, heap);
        assert!(plan(heap / 2 + 1, true).is_err());
        // The arrays of the gathering and scattering collectives count whole.
        let fcollect = CallSpec::new(Collective::Fcollect, DataType::U8, heap / 3);
        assert!(plan_with_room(&fcollect, &t, None, 0, heap).is_ok());
        let fcollect = CallSpec::new(Collective::Fcollect, DataType::U8, heap / 3 + 1);
        assert!(plan_with_room(&fcollect, &t, None, 0, heap).is_err());
    }

    /// Counts near the most the stand-in buffers can hold, through every collective, type,
    /// operator, kind of team, forced algorithm and reserved scratch, with no heap to bound
    /// them: the query answers (a plan or a typed error), and every algorithm that accepts
    /// such a call sizes its scratch and plans it, without an overflow. The offset of
    /// NVSHMEM's staged input (`Staging::staged_at`) and the scratch address after it
    /// overflowed: a panic in a debug build, a wrapped address in release.
    #[test]
    fn counts_near_the_largest_buffers_never_overflow() {
        use std::panic::{catch_unwind, AssertUnwindSafe};
        // The largest buffers each stand-in address has room for, and round sizes near them.
        let most = [u64::MAX - SRC, u64::MAX - DST, 1 << 63, 3 << 61, u64::MAX];
        let mut failed = Vec::new();
        let mut planned = 0;
        for n in [1, 2, 3, 8] {
            for (mapped, avoid) in [(false, 0), (true, 0), (true, 1), (false, 2)] {
                let mut t = shape(n, n - 1, mapped);
                t.shares_gpu = avoid == 1;
                t.nvshmem_collectives = avoid != 2;
                for coll in Collective::ALL {
                    for &dtype in DataType::ALL {
                        // NVSHMEM's 16-bit integer reductions are planned one step per 2^19
                        // elements: where the choice looks at that plan (avoid), only a heap's
                        // worth (a_size_whose_arrays_no_heap_holds_is_refused), and such plans
                        // are not made below.
                        let chunked =
                            coll.reduces() && crate::ffi::max_reduce_count(dtype) < usize::MAX;
                        let heap = if chunked && avoid > 0 {
                            1 << 40
                        } else {
                            usize::MAX
                        };
                        let ops = if coll.reduces() { &OPS[..] } else { &OPS[..1] };
                        for &op in ops {
                            if coll.reduces() && op.check_for("t", dtype).is_err() {
                                continue;
                            }
                            let e = dtype.size() as u64;
                            let counts = most.iter().flat_map(|&b| {
                                [b / e, b / e - 1, b / e / n as u64, b / e / n as u64 - 1]
                            });
                            for count in counts {
                                for in_place in [false, true] {
                                    let spec = CallSpec::new(coll, dtype, count as usize)
                                        .op(op)
                                        .root(n - 1)
                                        .in_place(in_place);
                                    let what = format!(
                                        "{coll} {dtype} {op} x{count} in place {in_place} n {n} \
                                         mapped {mapped} avoid {avoid}"
                                    );
                                    let registry = algo::registry(coll).iter().copied();
                                    for forced in std::iter::once(None).chain(registry.map(Some)) {
                                        for room in [0, 1 << 30, usize::MAX] {
                                            let r = catch_unwind(AssertUnwindSafe(|| {
                                                plan_with_room(&spec, &t, forced, room, heap)
                                            }));
                                            if r.is_err() {
                                                failed.push(format!(
                                                    "{what} forced {forced:?} room {room}"
                                                ));
                                            }
                                        }
                                    }
                                    // Each algorithm that accepts the call, planned as the
                                    // call would plan it with its scratch reserved.
                                    let Ok(mut c) = described(&spec, &t, usize::MAX) else {
                                        continue;
                                    };
                                    c.room = usize::MAX;
                                    for &a in algo::registry(coll) {
                                        let chunks = chunked
                                            && matches!(a.name(), "nvshmem" | "scale_then_sum");
                                        let r = catch_unwind(AssertUnwindSafe(|| {
                                            if a.refuses(&c).is_some() {
                                                return false;
                                            }
                                            let mut c = c.clone();
                                            c.scratch = 1 << 40;
                                            let _ = a.scratch(&c);
                                            if !chunks {
                                                a.plan(&c, &mut Vec::new());
                                            }
                                            true
                                        }));
                                        planned += usize::from(matches!(r, Ok(true)));
                                        if r.is_err() {
                                            failed.push(format!("{what}: {a:?}'s plan"));
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
        assert!(
            failed.is_empty(),
            "{} panicked: {:#?}",
            failed.len(),
            &failed[..failed.len().min(20)]
        );
        assert!(planned > 1000, "{planned}");
    }

    #[test]
    fn bad_descriptions_are_refused_as_the_calls_refuse_them() {
        let t = shape(2, 0, true);
        let e = plan_for(
            &CallSpec::new(Collective::Alltoall, DataType::F32, 4).in_place(true),
            &t,
            None,
        )
        .unwrap_err();
        assert!(
            e.to_string().contains("alltoall has no in-place form"),
            "{e}"
        );
        let e = plan_for(
            &CallSpec::new(Collective::Gather, DataType::F32, 4).root(2),
            &t,
            None,
        )
        .unwrap_err();
        assert!(e.to_string().starts_with("gather:"), "{e}");
        let e = plan_for(
            &CallSpec::new(Collective::AllReduce, DataType::F32, 4).op(ReduceOp::Xor),
            &t,
            None,
        )
        .unwrap_err();
        assert!(e.to_string().contains("op"), "{e}");
        let e = plan_for(
            &CallSpec::new(Collective::Fcollect, DataType::F32, usize::MAX),
            &t,
            None,
        )
        .unwrap_err();
        assert!(e.to_string().contains("overflow"), "{e}");
        // The operator and root of collectives that have none are ignored, as the calls have
        // no such argument.
        let a = plan_for(
            &CallSpec::new(Collective::Fcollect, DataType::F32, 4),
            &t,
            None,
        )
        .unwrap();
        let b = plan_for(
            &CallSpec::new(Collective::Fcollect, DataType::F32, 4)
                .op(ReduceOp::Xor)
                .root(9),
            &t,
            None,
        )
        .unwrap();
        assert_eq!(a, b);
    }
}
