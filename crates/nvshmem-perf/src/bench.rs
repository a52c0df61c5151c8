//! Timing and checking one point with one implementation.
//!
//! The steps (fill, call, capture, time, check) are written once, over [`Machine`]: the GPU's
//! ([`measure`]) in the benchmark, a host fake in the unit tests, so that what is checked, and
//! when, is tested without a GPU.
use std::{sync::Arc, time::Instant};

use anyhow::{Context, Result};
use cudarc::driver::{sys, CudaContext, CudaEvent, CudaStream};

use crate::{
    check::{count_wrong, make_input, make_output},
    coll::CollectiveExt,
    impls::{pe, Implementation, Spec},
};

/// How to time.
#[derive(Debug, Clone, Copy)]
pub struct Timing {
    /// Timed iterations per repetition.
    pub iters: usize,
    /// Warm-up iterations.
    pub warmup: usize,
    /// Repetitions.
    pub reps: usize,
    /// Replay the iterations from a CUDA graph.
    pub graph: bool,
    /// Measure host time per call.
    pub cpu_time: bool,
    /// Check the result.
    pub check: bool,
}

/// What one point measured.
#[derive(Debug, Clone)]
pub struct Measured {
    /// µs per call, one entry per repetition.
    pub reps_us: Vec<f64>,
    /// µs of each call timed alone (a separate pass).
    pub iters_us: Vec<f64>,
    /// Host µs to enqueue one call (mean over the repetitions), when asked.
    pub cpu_us: Option<f64>,
    /// Wrong elements summed over PEs, when checked: of a call on the stream before timing, or
    /// in graph mode of a launch of the captured call after timing. `None`: not checked.
    pub wrong: Option<u64>,
}

/// What measuring a point does, one step a method; every step but the timing marks acts on
/// the implementation under test, or on every PE alike.
pub trait Machine {
    /// A captured graph of calls.
    type Graph;
    /// A point of the stream's work that device time is measured between (a CUDA event).
    type Mark;
    /// Copies `input` into the input buffer ([`Implementation::fill_input`]); returns once
    /// copied.
    fn fill_input(&mut self, input: &[u8]) -> Result<()>;
    /// Copies `output` into the output buffer ([`Implementation::fill_output`]); returns once
    /// copied.
    fn fill_output(&mut self, output: &[u8]) -> Result<()>;
    /// Enqueues the collective once.
    fn run_once(&mut self) -> Result<()>;
    /// Waits for the stream, then reads the output back ([`Implementation::read_output`]).
    fn read_output(&mut self) -> Result<Vec<u8>>;
    /// `calls` calls captured into one graph, not run.
    fn capture(&mut self, calls: usize) -> Result<Self::Graph>;
    /// Enqueues one launch of `graph`.
    fn launch(&mut self, graph: &Self::Graph) -> Result<()>;
    /// A barrier over all PEs, waited for on the host.
    fn line_up(&mut self) -> Result<()>;
    /// The sum of `value` over all PEs.
    fn sum_over_pes(&mut self, value: u64) -> Result<u64>;
    /// Waits for all the stream's work.
    fn synchronize(&mut self) -> Result<()>;
    /// `k` new marks, made before they are recorded so that making one costs no time between
    /// calls.
    fn marks(&mut self, k: usize) -> Result<Vec<Self::Mark>>;
    /// Records `mark` at this point of the stream.
    fn record(&mut self, mark: &Self::Mark) -> Result<()>;
    /// µs of device time from `from` to `to`, both recorded (waits for `to`).
    fn elapsed_us(&mut self, from: &Self::Mark, to: &Self::Mark) -> Result<f64>;
}

/// The GPU: `imp`'s calls on `stream`, timed by CUDA events, captured through the runtime's
/// capture (which every implementation's calls go into alike, and which keeps what
/// nvshmem-rs's calls use alive).
struct Gpu<'a> {
    imp: &'a mut dyn Implementation,
    ctx: &'a Arc<CudaContext>,
    stream: &'a Arc<CudaStream>,
    rt: &'a nvshmem::Runtime,
}

impl Machine for Gpu<'_> {
    type Graph = nvshmem::Graph;
    type Mark = CudaEvent;

    fn fill_input(&mut self, input: &[u8]) -> Result<()> {
        self.imp.fill_input(input, self.stream)
    }
    fn fill_output(&mut self, output: &[u8]) -> Result<()> {
        self.imp.fill_output(output, self.stream)
    }
    fn run_once(&mut self) -> Result<()> {
        self.imp.run_once(self.stream)
    }
    fn read_output(&mut self) -> Result<Vec<u8>> {
        self.imp.read_output(self.stream)
    }
    fn capture(&mut self, calls: usize) -> Result<nvshmem::Graph> {
        let imp = &mut *self.imp;
        let graph = self
            .rt
            .capture(self.stream, |s| {
                (0..calls).try_for_each(|_| imp.run_once(s))?;
                Ok::<(), anyhow::Error>(())
            })
            .context("capturing the calls")?;
        graph.upload()?;
        Ok(graph)
    }
    fn launch(&mut self, graph: &nvshmem::Graph) -> Result<()> {
        Ok(graph.launch()?)
    }
    fn line_up(&mut self) -> Result<()> {
        pe::line_up(self.stream)
    }
    fn sum_over_pes(&mut self, value: u64) -> Result<u64> {
        pe::sum_over_pes(self.rt, value, self.stream)
    }
    fn synchronize(&mut self) -> Result<()> {
        Ok(self.stream.synchronize()?)
    }
    fn marks(&mut self, k: usize) -> Result<Vec<CudaEvent>> {
        let flags = Some(sys::CUevent_flags::CU_EVENT_DEFAULT);
        Ok((0..k)
            .map(|_| self.ctx.new_event(flags))
            .collect::<Result<Vec<_>, _>>()?)
    }
    fn record(&mut self, mark: &CudaEvent) -> Result<()> {
        Ok(mark.record(self.stream)?)
    }
    fn elapsed_us(&mut self, from: &CudaEvent, to: &CudaEvent) -> Result<f64> {
        Ok(f64::from(from.elapsed_ms(to)?) * 1000.0)
    }
}

/// Runs one point: prepare, check, warm up, time, release.
pub fn measure(
    imp: &mut dyn Implementation,
    spec: &Spec,
    t: Timing,
    ctx: &Arc<CudaContext>,
    stream: &Arc<CudaStream>,
    rt: &nvshmem::Runtime,
) -> Result<Measured> {
    imp.prepare(spec, stream)?;
    let result = {
        let mut gpu = Gpu {
            imp: &mut *imp,
            ctx,
            stream,
            rt,
        };
        time_prepared(&mut gpu, spec, t)
    };
    imp.release();
    result
}

/// One checked call made by `call`: the input written again (earlier calls may have changed
/// it: in place, or a graph replayed), the output filled with poison where the call must write
/// it (so an output it never wrote is counted wrong, not taken for a right answer left by an
/// earlier call), the PEs lined up, the call, and its output read back and compared. The wrong
/// elements, summed over PEs.
fn checked<M: Machine>(
    m: &mut M,
    spec: &Spec,
    call: impl FnOnce(&mut M) -> Result<()>,
) -> Result<u64> {
    m.fill_input(&make_input(spec))?;
    if let Some(poison) = make_output(spec) {
        m.fill_output(&poison)?;
    }
    m.line_up()?;
    call(m)?;
    let out = m.read_output()?;
    m.sum_over_pes(count_wrong(spec, &out))
}

/// The steps of one prepared point. A check checks what is timed: on a stream the call, made
/// once before timing; in graph mode a launch of the captured call, after timing (the graph
/// exists only then, and replaying it is what the row's figures time).
fn time_prepared<M: Machine>(m: &mut M, spec: &Spec, t: Timing) -> Result<Measured> {
    let check = t.check && !spec.coll.is_sync_only();
    let mut wrong = None;
    if check && !t.graph {
        wrong = Some(checked(m, spec, |m| m.run_once())?);
    }

    // A capture cannot record a first call's own work (the library compiles a collective's
    // kernel then): in graph mode one call at least comes before it.
    let warmup = if t.graph { t.warmup.max(1) } else { t.warmup };
    for _ in 0..warmup {
        m.run_once()?;
    }
    m.synchronize().context("warm-up")?;
    let graphs = if t.graph {
        Some((m.capture(t.iters)?, m.capture(1)?))
    } else {
        None
    };

    let marks = m.marks(2)?;
    let (start, end) = (&marks[0], &marks[1]);
    let mut reps_us = Vec::with_capacity(t.reps);
    let mut cpu_total = 0.0;
    for _ in 0..t.reps {
        m.line_up()?;
        m.record(start)?;
        let host = Instant::now();
        match &graphs {
            Some((g, _)) => m.launch(g)?,
            None => {
                for _ in 0..t.iters {
                    m.run_once()?;
                }
            }
        }
        cpu_total += host.elapsed().as_secs_f64() * 1e6 / t.iters as f64;
        m.record(end)?;
        reps_us.push(m.elapsed_us(start, end)? / t.iters as f64);
    }

    // Each call between its own pair of marks: the spread of single calls.
    let events = m.marks(t.iters + 1)?;
    m.line_up()?;
    m.record(&events[0])?;
    for e in &events[1..] {
        match &graphs {
            Some((_, g)) => m.launch(g)?,
            None => m.run_once()?,
        }
        m.record(e)?;
    }
    let mut iters_us = Vec::with_capacity(t.iters);
    for w in events.windows(2) {
        iters_us.push(m.elapsed_us(&w[0], &w[1])?);
    }
    m.synchronize()?;

    if let (true, Some((_, one))) = (check, &graphs) {
        wrong = Some(checked(m, spec, |m| m.launch(one))?);
    }
    Ok(Measured {
        reps_us,
        iters_us,
        cpu_us: t.cpu_time.then(|| cpu_total / t.reps as f64),
        wrong,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use nvshmem::{
        collective::Collective,
        testing::{decode, encode},
        DataType, ReduceOp,
    };

    /// One PE on the host, as a collective over a team of one computes: the output is the
    /// input (premul_sum's scaled), in place the buffer changed where it lies. A graph is its
    /// count of calls, which a launch makes again, unless `broken_graph`: then it writes
    /// nothing, as a graph that lost its kernels would. Every step is logged.
    struct Host {
        spec: Spec,
        buffer: Vec<u8>,
        output: Vec<u8>,
        broken_graph: bool,
        log: Vec<String>,
    }

    impl Host {
        fn new(spec: Spec, broken_graph: bool) -> Self {
            assert_eq!(spec.n_pes, 1);
            Host {
                buffer: vec![0; spec.filled_bytes()],
                output: if spec.in_place {
                    Vec::new()
                } else {
                    vec![0; spec.out_bytes()]
                },
                spec,
                broken_graph,
                log: Vec::new(),
            }
        }

        fn call(&mut self) {
            let sz = self.spec.dtype.size();
            let scale = match (self.spec.coll.reduces(), self.spec.op) {
                (true, ReduceOp::PreMulSum(s)) => s,
                _ => 1.0,
            };
            let mut out = self.buffer.clone();
            if scale != 1.0 {
                for e in out.chunks_exact_mut(sz) {
                    let v = decode(self.spec.dtype, e);
                    encode(self.spec.dtype, v * scale, e);
                }
            }
            if self.spec.in_place {
                self.buffer = out;
            } else {
                self.output = out;
            }
        }
    }

    impl Machine for Host {
        type Graph = usize;
        type Mark = ();
        fn fill_input(&mut self, input: &[u8]) -> Result<()> {
            self.log.push("fill_input".into());
            self.buffer.copy_from_slice(input);
            Ok(())
        }
        fn fill_output(&mut self, output: &[u8]) -> Result<()> {
            self.log.push("fill_output".into());
            self.output.copy_from_slice(output);
            Ok(())
        }
        fn run_once(&mut self) -> Result<()> {
            self.log.push("run_once".into());
            self.call();
            Ok(())
        }
        fn read_output(&mut self) -> Result<Vec<u8>> {
            self.log.push("read_output".into());
            Ok(if self.spec.in_place {
                self.buffer.clone()
            } else {
                self.output.clone()
            })
        }
        fn capture(&mut self, calls: usize) -> Result<usize> {
            self.log.push(format!("capture {calls}"));
            Ok(calls)
        }
        fn launch(&mut self, graph: &usize) -> Result<()> {
            self.log.push(format!("launch {graph}"));
            if !self.broken_graph {
                (0..*graph).for_each(|_| self.call());
            }
            Ok(())
        }
        fn line_up(&mut self) -> Result<()> {
            self.log.push("line_up".into());
            Ok(())
        }
        fn sum_over_pes(&mut self, value: u64) -> Result<u64> {
            self.log.push(format!("sum {value}"));
            Ok(value)
        }
        fn synchronize(&mut self) -> Result<()> {
            Ok(())
        }
        fn marks(&mut self, k: usize) -> Result<Vec<()>> {
            Ok(vec![(); k])
        }
        fn record(&mut self, _: &()) -> Result<()> {
            Ok(())
        }
        fn elapsed_us(&mut self, _: &(), _: &()) -> Result<f64> {
            Ok(1.0)
        }
    }

    fn spec(coll: Collective, dtype: DataType, op: ReduceOp, in_place: bool) -> Spec {
        Spec {
            in_place,
            ..crate::check::tests::spec_of(coll, dtype, op, 0, 1)
        }
    }

    fn timing(graph: bool, check: bool) -> Timing {
        Timing {
            iters: 5,
            warmup: 2,
            reps: 3,
            graph,
            cpu_time: false,
            check,
        }
    }

    fn wrong_of(host: &mut Host, t: Timing) -> Option<u64> {
        time_prepared(host, &host.spec.clone(), t).unwrap().wrong
    }

    /// Found by an audit: graph mode checked one call on the stream before capturing, never the
    /// graph it timed. A graph that writes nothing is all wrong now, though its stream calls
    /// are right.
    #[test]
    fn graph_mode_checks_a_launch_of_the_graph() {
        let s = spec(Collective::AllReduce, DataType::F32, ReduceOp::Sum, false);
        let all = s.layout.out_elems as u64;
        assert_eq!(
            wrong_of(&mut Host::new(s, true), timing(false, true)),
            Some(0)
        );
        assert_eq!(
            wrong_of(&mut Host::new(s, true), timing(true, true)),
            Some(all)
        );
        assert_eq!(
            wrong_of(&mut Host::new(s, false), timing(true, true)),
            Some(0)
        );
        // An output all zeros is premul_sum(0)'s answer: only the poison tells a graph that
        // wrote nothing from one that wrote it.
        let zero = spec(
            Collective::AllReduce,
            DataType::F32,
            ReduceOp::PreMulSum(0.0),
            false,
        );
        let n = zero.layout.out_elems as u64;
        assert_eq!(
            wrong_of(&mut Host::new(zero, true), timing(true, true)),
            Some(n)
        );
        let copy = spec(Collective::Fcollect, DataType::BF16, ReduceOp::Sum, false);
        let n = copy.layout.out_elems as u64;
        assert_eq!(
            wrong_of(&mut Host::new(copy, true), timing(true, true)),
            Some(n)
        );
    }

    /// The timed replays changed an in-place buffer (premul_sum by 2 doubles it every call):
    /// the check writes the input again before its launch.
    #[test]
    fn graph_mode_restores_the_input_before_its_check() {
        for coll in [Collective::AllReduce, Collective::Reduce] {
            let s = spec(coll, DataType::F32, ReduceOp::PreMulSum(2.0), true);
            assert_eq!(
                wrong_of(&mut Host::new(s, false), timing(true, true)),
                Some(0)
            );
            assert_eq!(
                wrong_of(&mut Host::new(s, false), timing(false, true)),
                Some(0)
            );
        }
    }

    #[test]
    fn the_check_comes_after_timing_in_graph_mode_and_before_on_a_stream() {
        let s = spec(Collective::Broadcast, DataType::I32, ReduceOp::Sum, false);
        let check = [
            "fill_input",
            "fill_output",
            "line_up",
            "launch 1",
            "read_output",
            "sum 0",
        ];
        let mut h = Host::new(s, false);
        time_prepared(&mut h, &s, timing(true, true)).unwrap();
        assert_eq!(h.log[h.log.len() - check.len()..], check, "{:?}", h.log);
        // Nothing but the warm-up runs on the stream: what is checked is the graph.
        let captured = h.log.iter().position(|l| l == "capture 5").unwrap();
        assert!(
            !h.log[captured..].iter().any(|l| l == "run_once"),
            "{:?}",
            h.log
        );
        assert_eq!(h.log[captured + 1], "capture 1");

        let mut h = Host::new(s, false);
        time_prepared(&mut h, &s, timing(false, true)).unwrap();
        let stream_check = [
            "fill_input",
            "fill_output",
            "line_up",
            "run_once",
            "read_output",
            "sum 0",
        ];
        assert_eq!(h.log[..stream_check.len()], stream_check, "{:?}", h.log);
        assert!(!h.log.iter().any(|l| l.starts_with("launch")));
    }

    #[test]
    fn unchecked_points_say_so() {
        let s = spec(Collective::AllReduce, DataType::F32, ReduceOp::Sum, false);
        for graph in [false, true] {
            let mut h = Host::new(s, false);
            assert_eq!(wrong_of(&mut h, timing(graph, false)), None);
            assert!(!h.log.iter().any(|l| l.starts_with("fill")), "{:?}", h.log);
            let b = spec(Collective::Barrier, DataType::F32, ReduceOp::Sum, false);
            assert_eq!(
                wrong_of(&mut Host::new(b, false), timing(graph, true)),
                None
            );
        }
    }

    /// A capture cannot record a first call's kernel compile: graph mode makes one call before
    /// capturing even with no warm-up asked for (the check's call did it before the check
    /// moved after timing).
    #[test]
    fn graph_mode_calls_once_before_capturing() {
        let s = spec(Collective::AllReduce, DataType::F32, ReduceOp::Sum, false);
        let mut h = Host::new(s, false);
        let t = Timing {
            warmup: 0,
            ..timing(true, true)
        };
        time_prepared(&mut h, &s, t).unwrap();
        let first_capture = h.log.iter().position(|l| l.starts_with("capture")).unwrap();
        assert!(
            h.log[..first_capture].iter().any(|l| l == "run_once"),
            "{:?}",
            h.log
        );
    }
}
