//! Timing and checking one point with one implementation.
use std::{sync::Arc, time::Instant};

use anyhow::{Context, Result};
use cudarc::driver::{sys, CudaContext, CudaStream};

use crate::{
    check::{count_wrong, make_input},
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
    /// Wrong elements summed over PEs, when checked.
    pub wrong: Option<u64>,
}

/// `calls` calls of `imp` captured into one graph, through the runtime's capture (which every
/// implementation's calls go into alike, and which keeps what nvshmem-rs's calls use alive).
fn capture(
    imp: &mut dyn Implementation,
    rt: &nvshmem::Runtime,
    stream: &Arc<CudaStream>,
    calls: usize,
) -> Result<nvshmem::Graph> {
    let graph = rt
        .capture(stream, |s| {
            (0..calls).try_for_each(|_| imp.run_once(s))?;
            Ok::<(), anyhow::Error>(())
        })
        .context("capturing the calls")?;
    graph.upload()?;
    Ok(graph)
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
    let result = time_prepared(imp, spec, t, ctx, stream, rt);
    imp.release();
    result
}

fn time_prepared(
    imp: &mut dyn Implementation,
    spec: &Spec,
    t: Timing,
    ctx: &Arc<CudaContext>,
    stream: &Arc<CudaStream>,
    rt: &nvshmem::Runtime,
) -> Result<Measured> {
    let wrong = if t.check && !spec.coll.is_sync_only() {
        imp.fill_input(&make_input(spec), stream)?;
        pe::line_up(stream)?;
        imp.run_once(stream)?;
        let out = imp.read_output(stream)?;
        Some(pe::sum_over_pes(rt, count_wrong(spec, &out), stream)?)
    } else {
        None
    };

    for _ in 0..t.warmup {
        imp.run_once(stream)?;
    }
    stream.synchronize().context("warm-up")?;
    let (graph_n, graph_1) = if t.graph {
        (
            Some(capture(imp, rt, stream, t.iters)?),
            Some(capture(imp, rt, stream, 1)?),
        )
    } else {
        (None, None)
    };

    let timing_event = || ctx.new_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT));
    let (start, end) = (timing_event()?, timing_event()?);
    let mut reps_us = Vec::with_capacity(t.reps);
    let mut cpu_total = 0.0;
    for _ in 0..t.reps {
        pe::line_up(stream)?;
        start.record(stream)?;
        let host = Instant::now();
        match &graph_n {
            Some(g) => g.launch()?,
            None => {
                for _ in 0..t.iters {
                    imp.run_once(stream)?;
                }
            }
        }
        cpu_total += host.elapsed().as_secs_f64() * 1e6 / t.iters as f64;
        end.record(stream)?;
        let ms = start.elapsed_ms(&end)?;
        reps_us.push(f64::from(ms) * 1000.0 / t.iters as f64);
    }

    // Each call between its own pair of events: the spread of single calls.
    let events = (0..=t.iters)
        .map(|_| timing_event())
        .collect::<Result<Vec<_>, _>>()?;
    pe::line_up(stream)?;
    events[0].record(stream)?;
    for e in &events[1..] {
        match &graph_1 {
            Some(g) => g.launch()?,
            None => imp.run_once(stream)?,
        }
        e.record(stream)?;
    }
    let mut iters_us = Vec::with_capacity(t.iters);
    for w in events.windows(2) {
        iters_us.push(f64::from(w[0].elapsed_ms(&w[1])?) * 1000.0);
    }
    stream.synchronize()?;
    Ok(Measured {
        reps_us,
        iters_us,
        cpu_us: t.cpu_time.then(|| cpu_total / t.reps as f64),
        wrong,
    })
}
