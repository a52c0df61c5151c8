//! The dynamic entry point: a collective chosen at run time ([`CallKind`]) made on buffers
//! ([`Team::collective`]) or prepared on them ([`Team::prepare_collective`]), through the
//! same checks and the same path as the typed methods (`Team::all_reduce`,
//! `Team::prepare_fcollect_in_place`...), which stay the API to write by hand. It serves code
//! that holds a collective as a value: test matrices, benchmarks, bindings.
use std::sync::Arc;

use cudarc::driver::CudaStream;

use super::{rootless_args, Collective, Geometry, Prepared, ReduceOp};
use crate::{
    memory::{SymBuffer, SymBufferMut},
    Element, Error, Result, Team,
};

/// Which collective call to make, as a value: the collective, whether in place, its root
/// and its operator. The one description of a call's kind: [`Team::collective`] and
/// [`Team::prepare_collective`] make it on buffers, and a [`CallSpec`](super::CallSpec)
/// ([`Team::plan_of`]) is one with an element type and a size instead of buffers.
///
/// It is one type, not one per collective, so that a collective picked at run time (from a
/// command line, a test table, [`Collective::ALL`]) reaches its call through one `match` in
/// the library instead of one in every caller. The root is used by rooted collectives only,
/// the operator by reductions only; a reduction's operator defaults to sum, a root to 0.
///
/// ```
/// use nvshmem::{collective::{CallKind, Collective}, ReduceOp};
/// let what = CallKind::new(Collective::AllReduce).op(ReduceOp::Max).in_place(true);
/// assert_eq!((what.collective(), what.operator()), (Collective::AllReduce, ReduceOp::Max));
/// assert!(what.is_in_place());
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CallKind {
    pub(super) coll: Collective,
    pub(super) op: ReduceOp,
    pub(super) root: usize,
    pub(super) in_place: bool,
}

impl CallKind {
    /// `coll`, out of place, by sum, from root 0.
    ///
    /// ```
    /// use nvshmem::collective::{CallKind, Collective};
    /// assert!(!CallKind::new(Collective::Gather).is_in_place());
    /// ```
    pub const fn new(coll: Collective) -> Self {
        CallKind {
            coll,
            op: ReduceOp::Sum,
            root: 0,
            in_place: false,
        }
    }

    /// The operator of a reduction (ignored by the other collectives).
    ///
    /// ```
    /// use nvshmem::{collective::{CallKind, Collective}, ReduceOp};
    /// let what = CallKind::new(Collective::ReduceScatter).op(ReduceOp::Avg);
    /// assert_eq!(what.operator(), ReduceOp::Avg);
    /// ```
    pub const fn op(mut self, op: ReduceOp) -> Self {
        self.op = op;
        self
    }

    /// The root of a rooted collective (ignored by the others).
    ///
    /// ```
    /// use nvshmem::collective::{CallKind, Collective};
    /// assert_eq!(CallKind::new(Collective::Broadcast).root(1).root_pe(), 1);
    /// ```
    pub const fn root(mut self, root: usize) -> Self {
        self.root = root;
        self
    }

    /// The in-place form (`Team::*_in_place`), with its one buffer laid out as that form's
    /// docs say.
    ///
    /// ```
    /// use nvshmem::collective::{CallKind, Collective};
    /// assert!(CallKind::new(Collective::Scatter).in_place(true).is_in_place());
    /// ```
    pub const fn in_place(mut self, in_place: bool) -> Self {
        self.in_place = in_place;
        self
    }

    /// The collective.
    ///
    /// ```
    /// use nvshmem::collective::{CallKind, Collective};
    /// assert_eq!(CallKind::new(Collective::Sync).collective(), Collective::Sync);
    /// ```
    pub const fn collective(&self) -> Collective {
        self.coll
    }

    /// The operator (sum unless [`CallKind::op`] set another).
    ///
    /// ```
    /// use nvshmem::{collective::{CallKind, Collective}, ReduceOp};
    /// assert_eq!(CallKind::new(Collective::Reduce).operator(), ReduceOp::Sum);
    /// ```
    pub const fn operator(&self) -> ReduceOp {
        self.op
    }

    /// The root (0 unless [`CallKind::root`] set another).
    ///
    /// ```
    /// use nvshmem::collective::{CallKind, Collective};
    /// assert_eq!(CallKind::new(Collective::Scatter).root_pe(), 0);
    /// ```
    pub const fn root_pe(&self) -> usize {
        self.root
    }

    /// Whether it is the in-place form.
    ///
    /// ```
    /// use nvshmem::collective::{CallKind, Collective};
    /// assert!(!CallKind::new(Collective::AllReduce).is_in_place());
    /// ```
    pub const fn is_in_place(&self) -> bool {
        self.in_place
    }

    /// The public call it names (`all_reduce`, `fcollect_in_place`), as that call names
    /// itself in errors; an in-place form the collective lacks is refused as argument `arg`
    /// of `call`.
    pub(super) fn call_name(&self, call: &'static str, arg: &'static str) -> Result<&'static str> {
        if !self.in_place {
            return Ok(self.coll.name());
        }
        self.coll.in_place_name().ok_or_else(|| {
            Error::arg(
                call,
                arg,
                format_args!("{} has no in-place form", self.coll),
            )
        })
    }

    /// The operator as the call passes it: a reduction's only.
    pub(super) fn op_arg(&self) -> Option<ReduceOp> {
        self.coll.reduces().then_some(self.op)
    }

    /// The root as the call passes it: a rooted collective's only.
    pub(super) fn root_arg(&self) -> Option<usize> {
        self.coll.is_rooted().then_some(self.root)
    }

    /// How the call takes its buffers, and its name: barrier and sync take none (whatever
    /// `in_place` says, as they have one form), the others two, or one in place. `call` is
    /// the entry point, named in the error for an in-place form the collective lacks.
    fn form(&self, call: &'static str) -> Result<(Form, &'static str)> {
        if self.coll.geometry() == Geometry::None {
            return Ok((Form::Rootless, self.coll.name()));
        }
        let name = self.call_name(call, "what")?;
        Ok((
            if self.in_place {
                Form::InPlace
            } else {
                Form::Two
            },
            name,
        ))
    }

    /// The error for a source that does not fit the form: missing out of place, passed in
    /// place (where the input is `dst`: a source would be ignored, so it is refused).
    fn bad_src(name: &'static str, form: Form) -> Error {
        let reason = match form {
            Form::Two => "is None, but the call reads it (only the in-place form has no src)",
            _ => "must be None in place: the in-place form's input is dst",
        };
        Error::arg(name, "src", reason)
    }
}

/// How a call takes its buffers ([`CallKind::form`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Form {
    /// None (barrier, sync).
    Rootless,
    /// `src` and `dst`.
    Two,
    /// `dst` alone.
    InPlace,
}

impl Team {
    /// Makes the call `what` describes, as its typed method would (the same checks, errors
    /// and algorithm, and the same plan kept for a repeated call): out of place from `src`
    /// into `dst`, or in place in `dst` alone with `src` `None`. Barrier and sync take no
    /// buffers: `src`, `dst` and `in_place` are ignored. Collective, as every call: every PE
    /// of the team makes the same call.
    ///
    /// A combination no call has is [`Error::InvalidArgument`], with nothing queued:
    /// an in-place form the collective lacks (alltoall; argument `what`), a `src` missing
    /// out of place or passed in place (argument `src`).
    ///
    /// ```no_run
    /// use nvshmem::{collective::{CallKind, Collective}, ReduceOp, Runtime, SymArray};
    /// # let rt = Runtime::init()?; let stream = rt.stream().clone(); let team = rt.world();
    /// let src = rt.alloc_from(&[1.0f32; 1024])?;
    /// let mut dst = rt.alloc_zeroed::<f32>(1024)?;
    /// for coll in [Collective::AllReduce, Collective::Reduce, Collective::Broadcast] {
    ///     let what = CallKind::new(coll).op(ReduceOp::Max).root(0);
    ///     team.collective(what, Some(&src), &mut dst, &stream)?;
    ///     // The in-place form: the one buffer is dst.
    ///     team.collective(what.in_place(true), None::<&SymArray<f32>>, &mut dst, &stream)?;
    /// }
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    pub fn collective<T: Element>(
        &self,
        what: CallKind,
        src: Option<&impl SymBuffer<T>>,
        dst: &mut impl SymBufferMut<T>,
        stream: &Arc<CudaStream>,
    ) -> Result<()> {
        let (form, name) = what.form("Team::collective")?;
        let (coll, op, root) = (what.coll, what.op_arg(), what.root_arg());
        match (form, src) {
            (Form::Rootless, _) => self.rootless(coll, name, stream),
            (Form::Two, Some(src)) => self.two(coll, name, op, root, src, &*dst, stream),
            (Form::InPlace, None) => self.in_place(coll, name, op, root, dst, stream),
            (form, _) => Err(CallKind::bad_src(name, form)),
        }
    }

    /// [`Team::collective`], prepared ([`Prepared`]), as its typed `prepare_` method would
    /// prepare it: every check, the algorithm's choice and its plan done now, once; `src`
    /// and `dst` stay borrowed while the result lives. The same arguments and errors as
    /// [`Team::collective`].
    ///
    /// ```no_run
    /// use nvshmem::{collective::{CallKind, Collective}, Runtime, SymArray};
    /// # let rt = Runtime::init()?; let stream = rt.stream().clone(); let team = rt.world();
    /// let mut buf = rt.alloc_zeroed::<i32>(4 * team.n_pes())?;
    /// let what = CallKind::new(Collective::Fcollect).in_place(true);
    /// let step = team.prepare_collective(what, None::<&SymArray<i32>>, &mut buf)?;
    /// step.start(&stream)?;
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
    pub fn prepare_collective<'a, T: Element>(
        &self,
        what: CallKind,
        src: Option<&'a impl SymBuffer<T>>,
        dst: &'a mut impl SymBufferMut<T>,
    ) -> Result<Prepared<'a>> {
        let (form, name) = what.form("Team::prepare_collective")?;
        let (coll, op, root) = (what.coll, what.op_arg(), what.root_arg());
        match (form, src) {
            (Form::Rootless, _) => self.prepared(rootless_args(coll, name), &[]),
            (Form::Two, Some(src)) => self.prepare_two(coll, name, op, root, src, dst),
            (Form::InPlace, None) => self.prepare_one(coll, name, op, root, dst),
            (form, _) => Err(CallKind::bad_src(name, form)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every collective's kinds name the call the typed method makes, and only the
    /// combinations no call has are refused, as typed errors.
    #[test]
    fn every_kind_names_its_call_or_is_refused() {
        for c in Collective::ALL {
            let out = CallKind::new(c);
            let (form, name) = out.form("Team::collective").unwrap();
            assert_eq!(name, c.name());
            let inp = out.in_place(true).form("Team::collective");
            match c.geometry() {
                Geometry::None => {
                    assert_eq!(form, Form::Rootless);
                    assert_eq!(inp.unwrap(), (Form::Rootless, c.name()));
                }
                g if g.has_in_place() => {
                    assert_eq!(form, Form::Two);
                    let want = format!("{}_in_place", c.name());
                    assert_eq!(inp.unwrap(), (Form::InPlace, want.as_str()));
                }
                _ => {
                    assert_eq!(form, Form::Two);
                    let e = inp.unwrap_err();
                    assert!(
                        matches!(
                            &e,
                            Error::InvalidArgument { call: "Team::collective", arg: "what", reason }
                                if reason == &format!("{c} has no in-place form")
                        ),
                        "{e}"
                    );
                }
            }
        }
        let e = CallKind::bad_src("all_reduce", Form::Two);
        assert!(matches!(
            e,
            Error::InvalidArgument {
                call: "all_reduce",
                arg: "src",
                ..
            }
        ));
        let e = CallKind::bad_src("fcollect_in_place", Form::InPlace);
        assert!(e.to_string().contains("must be None in place"), "{e}");
    }

    /// The operator reaches reductions only, the root rooted collectives only, as the typed
    /// methods pass them.
    #[test]
    fn op_and_root_reach_only_the_calls_that_take_them() {
        let what = |c| CallKind::new(c).op(ReduceOp::Min).root(2);
        assert_eq!(what(Collective::Reduce).op_arg(), Some(ReduceOp::Min));
        assert_eq!(what(Collective::Reduce).root_arg(), Some(2));
        assert_eq!(what(Collective::AllReduce).root_arg(), None);
        assert_eq!(what(Collective::Gather).op_arg(), None);
        assert_eq!(what(Collective::Gather).root_arg(), Some(2));
        assert_eq!(what(Collective::Fcollect).op_arg(), None);
        assert_eq!(what(Collective::Fcollect).root_arg(), None);
    }
}
