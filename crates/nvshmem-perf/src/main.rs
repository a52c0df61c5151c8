//! `nvshmem-perf`: barrier and collective microbenchmarks, nvshmem-rs, raw NVSHMEM and NCCL
//! side by side. Run `nvshmem-perf --help`; see the crate's README. `nvshmem-perf plot
//! FILE.jsonl --out DIR` draws saved results again, without a GPU; `nvshmem-perf device` times
//! device-initiated puts (kernels that call NVSHMEM themselves) beside an nvcc-built reference;
//! `nvshmem-perf summarize [NAME=]FILE.jsonl...` prints saved results side by side, a line a point;
//! `nvshmem-perf ratios [NAME=]FILE.jsonl...` prints one implementation's time over the faster of
//! the others as markdown tables.
use std::{fs::File, io::BufWriter, process::ExitCode};

use anyhow::{bail, Context, Result};
use clap::Parser;
use nvshmem::collective::Collective;

mod bench;
mod check;
mod cli;
mod coll;
mod device;
mod impls;
mod plot;
mod ratios;
mod report;
mod stats;
mod summary;

use cli::{Args, ImplKind, Plan, TeamKind};
use coll::CollectiveExt;
use impls::{Implementation, Spec};
use report::Row;

/// An implementation, or why it cannot run at all.
enum Slot {
    Ready(Box<dyn Implementation>),
    Missing(&'static str, String),
}

fn main() -> ExitCode {
    // A subcommand in front of the positional collectives: `plot` is no collective's name.
    if std::env::args_os().nth(1).is_some_and(|a| a == "plot") {
        return plot::main(std::env::args_os().skip(1));
    }
    // `summarize`: saved results side by side, a line a point (src/summary.rs).
    if std::env::args_os().nth(1).is_some_and(|a| a == "summarize") {
        return summary::main(std::env::args_os().skip(1));
    }
    // `ratios`: one implementation over the faster of the others, markdown (src/ratios.rs).
    if std::env::args_os().nth(1).is_some_and(|a| a == "ratios") {
        return ratios::main(std::env::args_os().skip(1));
    }
    // `device`: device-initiated put latency and bandwidth (src/device.rs).
    if std::env::args_os().nth(1).is_some_and(|a| a == "device") {
        return device::main(std::env::args_os().skip(1));
    }
    let args = Args::parse();
    let plan = match args.plan() {
        Ok(p) => p,
        Err(e) => {
            eprintln!("nvshmem-perf: {e}");
            return ExitCode::from(2);
        }
    };
    if !(args.ceiling.is_finite() && args.ceiling >= 0.0) {
        eprintln!(
            "nvshmem-perf: --ceiling {}: expected GB/s, 0 or more",
            args.ceiling
        );
        return ExitCode::from(2);
    }
    match run(&args, &plan) {
        Ok(outcome) => outcome.exit_code(),
        Err(e) => {
            eprintln!("nvshmem-perf: error: {e:#}");
            // A failing PE exits without finalising, so the launcher ends the job.
            std::process::exit(1)
        }
    }
}

/// The exit status of a run that measured every point: 0, or [`WRONG_EXIT`] when a check
/// found wrong elements.
const WRONG_EXIT: u8 = 3;

/// How a run that got to its end went: which rows were wrong, the same on every PE (each
/// row's wrong elements are summed over all PEs).
#[derive(Debug, PartialEq)]
struct Outcome {
    /// One line per wrong row ([`report::wrong_rows`]).
    wrong: Vec<String>,
    /// Whether this PE says so (PE 0; the others exit alike, silently).
    lead: bool,
}

impl Outcome {
    fn of(rows: &[Row], lead: bool) -> Self {
        Outcome {
            wrong: report::wrong_rows(rows),
            lead,
        }
    }

    /// What the message says and the process exits with.
    fn exit_status(&self) -> (Option<String>, u8) {
        if self.wrong.is_empty() {
            return (None, 0);
        }
        let mut msg = format!(
            "nvshmem-perf: {} rows had wrong results (shown as WRONG, left out of ratios and \
             plots):",
            self.wrong.len()
        );
        for w in &self.wrong {
            msg += &format!("\n  {w}");
        }
        (self.lead.then_some(msg), WRONG_EXIT)
    }

    fn exit_code(&self) -> ExitCode {
        let (msg, code) = self.exit_status();
        if let Some(m) = msg {
            eprintln!("{m}");
        }
        ExitCode::from(code)
    }
}

fn run(args: &Args, plan: &Plan) -> Result<Outcome> {
    let rt = nvshmem::Runtime::init().context("starting NVSHMEM")?;
    // On every PE alike, before any collective runs.
    for &(coll, algo) in args.algo.iter().flat_map(|l| &l.0) {
        rt.set_algorithm(coll, Some(algo))
            .with_context(|| format!("--algo {coll}={algo}"))?;
    }
    let (me, n) = (rt.my_pe(), rt.n_pes());
    let team = match args.team {
        TeamKind::World => rt.world(),
        TeamKind::Shared => rt.shared(),
        TeamKind::Node => rt.node(),
    };
    let (team_me, team_n) = (team.my_pe(), team.n_pes());
    if plan.collectives.iter().any(|c| c.is_rooted()) && args.root >= team_n {
        bail!("-r {} is not below the team's {team_n} PEs", args.root);
    }
    let ctx = rt.context().clone();
    let stream = ctx.new_stream().context("creating the benchmark stream")?;
    let lead = me == 0;
    // NCCL refuses two ranks on one GPU ("Duplicate GPU detected"), so where any PE shares its
    // GPU with another (several PEs on one GPU under CUDA MPS, a correctness route whose times
    // mean nothing) NCCL's rows are left out, on every PE alike.
    let gpus_shared = plan.impls.contains(&ImplKind::Nccl)
        && impls::pe::sum_over_pes(&rt, u64::from(rt.info().pes_on_device > 1), &stream)? > 0;

    let mut slots: Vec<Slot> = Vec::new();
    for k in &plan.impls {
        slots.push(match k {
            ImplKind::NvshmemRs => Slot::Ready(Box::new(impls::nvshmem_rs::NvshmemRs::new(
                rt.clone(),
                match args.team {
                    TeamKind::World => rt.world(),
                    TeamKind::Shared => rt.shared(),
                    TeamKind::Node => rt.node(),
                },
            ))),
            ImplKind::Nvshmem => {
                match impls::nvshmem_raw::NvshmemRaw::new(rt.clone(), team.raw()) {
                    Ok(i) => Slot::Ready(Box::new(i)),
                    Err(e) => Slot::Missing("nvshmem", format!("{e:#}")),
                }
            }
            ImplKind::Nccl if args.team != TeamKind::World => {
                Slot::Missing("nccl", "NCCL runs over the world team only".into())
            }
            ImplKind::Nccl if gpus_shared => Slot::Missing(
                "nccl",
                "skipped: PEs share a GPU here (CUDA MPS), and NCCL refuses two ranks on one GPU"
                    .into(),
            ),
            ImplKind::Nccl => {
                let lib = impls::nccl_lib::Nccl::load(args.nccl_lib.as_deref());
                if let (true, Ok(l)) = (lead, &lib) {
                    println!("# NCCL {} from {}", l.version_string(), l.path.display());
                }
                match impls::nccl::NcclImpl::new(&rt, lib, &stream) {
                    Ok(i) => Slot::Ready(Box::new(i)),
                    Err(e) => Slot::Missing("nccl", format!("skipped: {e:#}")),
                }
            }
        });
    }
    if lead {
        let info = rt.info();
        println!(
            "# nvshmem-perf: {n} PEs, team {:?} ({team_n} PEs), GPU {} on PE 0, NVSHMEM {} from {}",
            args.team,
            info.device,
            info.version,
            info.library.display()
        );
        println!(
            "# iters {} warm-up {} reps {} graph {} check {} in-place {}",
            args.iters, args.warmup, args.reps, args.graph, args.check, args.in_place
        );
        let forced: Vec<String> = Collective::ALL
            .into_iter()
            .filter_map(|c| rt.forced_algorithm(c).map(|a| format!("{c}={a}")))
            .collect();
        if !forced.is_empty() {
            println!("# nvshmem-rs algorithms forced: {}", forced.join(","));
        }
        for s in &slots {
            if let Slot::Missing(name, why) = s {
                println!("# {name}: {why}");
            }
        }
        let undefined = undefined_pairs(plan);
        if !undefined.is_empty() {
            println!("# not run, undefined: {}", undefined.join(", "));
        }
    }

    let specs = points(args, plan, team_me, team_n);
    let progress = (lead && !args.no_progress).then(|| {
        let pb = indicatif::ProgressBar::new((specs.len() * slots.len()) as u64);
        pb.set_style(
            indicatif::ProgressStyle::with_template("{bar:40} {pos}/{len} {msg} [{elapsed}<{eta}]")
                .expect("valid template"),
        );
        pb
    });
    let timing = bench::Timing {
        iters: args.iters,
        warmup: args.warmup,
        reps: args.reps,
        graph: args.graph,
        cpu_time: args.cpu_time,
        check: args.check,
    };
    // The JSON lines are written as each point ends (the lead PE's), so that a run that never
    // ends (the graph-mode hang of docs/performance.md) leaves the points it finished.
    let mut journal = match (&args.json, lead) {
        (Some(p), true) => {
            Some(report::Journal::create(p).with_context(|| format!("creating {}", p.display()))?)
        }
        _ => None,
    };
    let mut rows = Vec::new();
    for spec in &specs {
        for slot in slots.iter_mut() {
            if let Some(pb) = &progress {
                pb.set_message(format!(
                    "{} {} B",
                    spec.coll.name(),
                    spec.count * spec.dtype.size()
                ));
                pb.inc(1);
            }
            let row = match slot {
                Slot::Missing(name, why) => skipped_row(name, "-", spec, args, why),
                // The algorithm is asked for after the point ran: what it runs may depend on
                // the scratch its preparation reserved.
                Slot::Ready(imp) => match imp.unsupported(spec) {
                    Some(why) => skipped_row(imp.name(), &imp.algorithm(spec), spec, args, &why),
                    None => match bench::measure(imp.as_mut(), spec, timing, &ctx, &stream, &rt) {
                        Ok(m) => {
                            let algo = imp.algorithm(spec);
                            measured_row(imp.as_ref(), &algo, spec, args, &m)
                        }
                        Err(e) => match refusal(&e) {
                            Some(why) => {
                                let algo = imp.algorithm(spec);
                                skipped_row(imp.name(), &algo, spec, args, &why)
                            }
                            None => {
                                return Err(e.context(format!(
                                    "{} {} count {}",
                                    imp.name(),
                                    spec.coll.name(),
                                    spec.count
                                )))
                            }
                        },
                    },
                },
            };
            if let Some(j) = journal.as_mut() {
                j.push(&row)?;
            }
            rows.push(row);
        }
    }
    if let Some(pb) = progress {
        pb.finish_and_clear();
    }
    // Drop the implementations (collective frees, NCCL comm) before the runtime.
    drop(slots);
    if lead {
        write_outputs(args, plan, &rows)?;
    }
    Ok(Outcome::of(&rows, lead))
}

/// Why the library refused to run a point, when it did so before queuing anything: a forced
/// algorithm that cannot run it, or no algorithm for it. The choice depends only on what every
/// PE passes alike, so every PE refuses the same point, and the benchmark goes on.
fn refusal(e: &anyhow::Error) -> Option<String> {
    e.chain()
        .find_map(|c| match c.downcast_ref::<nvshmem::Error>()? {
            err
            @ (nvshmem::Error::AlgorithmRefused { .. } | nvshmem::Error::Unsupported { .. }) => {
                Some(format!("refused: {err}"))
            }
            _ => None,
        })
}

/// Whether `op` is defined for `dtype` at all (bitwise operators need integers, truth values
/// have and, or, min and max); points where it is not are left out, for every implementation.
fn defined(dtype: nvshmem::DataType, op: nvshmem::ReduceOp) -> bool {
    op.applies_to(dtype.kind())
}

/// The `op on dtype` pairs of the plan that are left out, if a reduction is run.
fn undefined_pairs(plan: &Plan) -> Vec<String> {
    if !plan.collectives.iter().any(|c| c.reduces()) {
        return Vec::new();
    }
    let mut v = Vec::new();
    for &dtype in &plan.dtypes {
        for &op in &plan.ops {
            if !defined(dtype, op) {
                v.push(format!("{op} on {dtype}"));
            }
        }
    }
    v
}

fn points(args: &Args, plan: &Plan, me: usize, n: usize) -> Vec<Spec> {
    let mut v = Vec::new();
    for &coll in &plan.collectives {
        let dtypes = if coll.is_sync_only() {
            &plan.dtypes[..1]
        } else {
            &plan.dtypes[..]
        };
        let ops = if coll.reduces() {
            &plan.ops[..]
        } else {
            &plan.ops[..1]
        };
        for &dtype in dtypes {
            for &op in ops {
                if coll.reduces() && !defined(dtype, op) {
                    continue;
                }
                let sizes: Vec<u64> = if coll.is_sync_only() {
                    vec![0]
                } else {
                    plan.sizes.clone()
                };
                // Sizes that round to the count of the one before are that point again: a
                // duplicate row (-i below an element, or below n elements where chunked).
                let mut last = None;
                for bytes in sizes {
                    let count = coll.count_for(bytes as usize, dtype.size(), n);
                    if (count == 0 && !coll.is_sync_only()) || last == Some(count) {
                        continue;
                    }
                    last = Some(count);
                    v.push(Spec {
                        coll,
                        dtype,
                        op,
                        root: args.root,
                        count,
                        layout: coll.layout(count, n),
                        in_place: args.in_place,
                        my_pe: me,
                        n_pes: n,
                    });
                }
            }
        }
    }
    v
}

fn base_row(name: &str, algo: &str, spec: &Spec, args: &Args) -> Row {
    Row {
        collective: spec.coll.name().into(),
        implementation: name.into(),
        algo: algo.into(),
        note: String::new(),
        n_pes: spec.n_pes,
        bytes: (spec.count * spec.dtype.size()) as u64,
        count: spec.count,
        dtype: if spec.coll.is_sync_only() {
            "-".into()
        } else {
            spec.dtype.name().into()
        },
        op: if spec.coll.reduces() {
            spec.op.to_string()
        } else {
            String::new()
        },
        root: if spec.coll.is_rooted() {
            spec.root as i64
        } else {
            -1
        },
        in_place: spec.in_place,
        graph: args.graph,
        time_us: f64::NAN,
        time_min_us: f64::NAN,
        time_max_us: f64::NAN,
        iter_min_us: f64::NAN,
        iter_p50_us: f64::NAN,
        iter_p99_us: f64::NAN,
        algbw_gbs: 0.0,
        busbw_gbs: 0.0,
        wrong: -1,
        cpu_us: -1.0,
        reps_us: String::new(),
        status: "ok".into(),
    }
}

fn skipped_row(name: &str, algo: &str, spec: &Spec, args: &Args, why: &str) -> Row {
    Row {
        status: why.to_string(),
        ..base_row(name, algo, spec, args)
    }
}

fn measured_row(
    imp: &dyn Implementation,
    algo: &str,
    spec: &Spec,
    args: &Args,
    m: &bench::Measured,
) -> Row {
    let mut r = base_row(imp.name(), algo, spec, args);
    let (min, med, max) = stats::min_med_max(&m.reps_us);
    r.note = imp.note(spec);
    r.time_us = med;
    r.time_min_us = min;
    r.time_max_us = max;
    r.iter_min_us = stats::percentile(&m.iters_us, 0.0);
    r.iter_p50_us = stats::percentile(&m.iters_us, 50.0);
    r.iter_p99_us = stats::percentile(&m.iters_us, 99.0);
    r.algbw_gbs = report::algbw(r.bytes, med);
    r.busbw_gbs = r.algbw_gbs * spec.coll.busbw_factor(spec.n_pes);
    r.wrong = m.wrong.map_or(-1, |w| w as i64);
    r.cpu_us = m.cpu_us.unwrap_or(-1.0);
    r.reps_us = m
        .reps_us
        .iter()
        .map(|t| format!("{t:.3}"))
        .collect::<Vec<_>>()
        .join(";");
    r
}

/// nccl-tests' last line, `# Out of bounds values : N OK|FAILED` (scripts take it for the end
/// of a run): the wrong elements of every row, or, where no row was checked, that the results
/// were not checked rather than a 0 that reads as a pass.
fn out_of_bounds(rows: &[Row], check: bool) -> String {
    let total_wrong: i64 = rows.iter().filter(|r| r.ok()).map(|r| r.wrong.max(0)).sum();
    let checked = rows.iter().any(|r| r.ok() && r.wrong >= 0);
    let verdict = match (total_wrong, check, checked) {
        (w, _, _) if w > 0 => format!("{w} FAILED"),
        (_, false, _) => "not checked (-c 0)".into(),
        (_, true, false) => "not checked (no point measured moves data)".into(),
        _ => "0 OK".into(),
    };
    format!("# Out of bounds values : {verdict}")
}

fn write_outputs(args: &Args, plan: &Plan, rows: &[Row]) -> Result<()> {
    let names: Vec<&str> = plan.impls.iter().map(|i| i.name()).collect();
    print!("{}", report::format_tables(rows, &names, false));
    println!("{}", out_of_bounds(rows, args.check));
    for w in report::wrong_rows(rows) {
        println!("# WRONG: {w}");
    }
    let create = |p: &std::path::Path| -> Result<BufWriter<File>> {
        Ok(BufWriter::new(
            File::create(p).with_context(|| format!("creating {}", p.display()))?,
        ))
    };
    // (The JSON lines were written as the points ended.)
    if let Some(p) = &args.csv {
        report::write_csv(rows, create(p)?)?;
    }
    if let Some(p) = &args.plot {
        let (svg, png) = plot::paths(p);
        let points: Vec<plot::Point> = rows.iter().map(plot::Point::from).collect();
        plot::write(&points, &names, args.ceiling, &svg, &png)?;
    }
    if let Some(p) = &args.markdown {
        std::fs::write(p, report::format_tables(rows, &names, true))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use nvshmem::{DataType, ReduceOp};

    #[test]
    fn pairs_no_type_defines_are_left_out_of_reductions_only() {
        let args = Args::try_parse_from([
            "nvshmem-perf",
            "all_reduce,broadcast",
            "-d",
            "f32,i32,bool8",
            "-o",
            "sum,xor,and",
            "-b",
            "64",
            "-e",
            "64",
        ])
        .unwrap();
        let plan = args.plan().unwrap();
        let pts = points(&args, &plan, 0, 2);
        let reductions: Vec<(DataType, ReduceOp)> = pts
            .iter()
            .filter(|s| s.coll == Collective::AllReduce)
            .map(|s| (s.dtype, s.op))
            .collect();
        assert_eq!(
            reductions,
            [
                (DataType::F32, ReduceOp::Sum),
                (DataType::I32, ReduceOp::Sum),
                (DataType::I32, ReduceOp::Xor),
                (DataType::I32, ReduceOp::And),
                (DataType::Bool8, ReduceOp::And),
            ]
        );
        // Data movement runs every type, with the first operator (unused).
        let moves: Vec<DataType> = pts
            .iter()
            .filter(|s| s.coll == Collective::Broadcast)
            .map(|s| s.dtype)
            .collect();
        assert_eq!(moves, [DataType::F32, DataType::I32, DataType::Bool8]);
        assert_eq!(
            undefined_pairs(&plan),
            ["xor on f32", "and on f32", "sum on bool8", "xor on bool8"]
        );
    }

    /// Found by an audit: sizes that round to one element count (`-b 1 -i 1`: 4 to 7 bytes
    /// are one f32) each made a point, the same rows again. One point a count now.
    #[test]
    fn sizes_of_one_element_count_make_one_point() {
        let args = Args::try_parse_from([
            "nvshmem-perf",
            "all_reduce,fcollect,barrier",
            "-d",
            "f32,f64,u8",
            "-b",
            "1",
            "-i",
            "1",
            "-e",
            "64",
        ])
        .unwrap();
        let plan = args.plan().unwrap();
        for n in [1, 2, 3] {
            let pts = points(&args, &plan, 0, n);
            for coll in [Collective::AllReduce, Collective::Fcollect] {
                for dtype in [DataType::F32, DataType::F64, DataType::U8] {
                    let counts: Vec<usize> = pts
                        .iter()
                        .filter(|s| s.coll == coll && s.dtype == dtype)
                        .map(|s| s.count)
                        .collect();
                    let step = if coll == Collective::Fcollect { n } else { 1 };
                    let want: Vec<usize> =
                        (1..=64 / dtype.size() / step).map(|k| k * step).collect();
                    assert_eq!(counts, want, "{coll} {dtype} n {n}");
                }
            }
            assert_eq!(
                pts.iter().filter(|s| s.coll == Collective::Barrier).count(),
                1
            );
        }
    }

    #[test]
    fn a_wrong_row_makes_the_run_fail_and_says_which() {
        let right = report::tests::row("nccl", 8, 1.0);
        let mut unchecked = report::tests::row("nvshmem", 8, 1.0);
        unchecked.wrong = -1;
        let mut skipped = report::tests::row("nvshmem", 16, f64::NAN);
        skipped.status = "NVSHMEM has no rooted reduce".into();
        let fine = [right.clone(), unchecked, skipped];
        for lead in [true, false] {
            assert_eq!(Outcome::of(&fine, lead).exit_status(), (None, 0));
        }
        let mut wrong = report::tests::row("nvshmem-rs", 1 << 20, 1.0);
        wrong.collective = "fcollect".into();
        wrong.in_place = true;
        wrong.wrong = 12;
        let rows = [right, wrong.clone()];
        let (msg, code) = Outcome::of(&rows, true).exit_status();
        assert_eq!(code, WRONG_EXIT);
        assert_ne!(code, 0);
        let msg = msg.unwrap();
        assert!(
            msg.starts_with("nvshmem-perf: 1 rows had wrong results"),
            "{msg}"
        );
        assert!(msg.ends_with(&format!("\n  {}", wrong.describe())), "{msg}");
        assert!(
            msg.contains("fcollect") && msg.contains("in place"),
            "{msg}"
        );
        // The other PEs exit alike, without repeating the message.
        assert_eq!(Outcome::of(&rows, false).exit_status(), (None, WRONG_EXIT));
    }

    /// Found by an audit: under -c 0 the last line said `0 OK`, a pass for results nobody
    /// checked.
    #[test]
    fn the_last_line_says_when_nothing_was_checked() {
        let mut unchecked = report::tests::row("nvshmem-rs", 8, 1.0);
        unchecked.wrong = -1;
        let rows = [unchecked.clone(), unchecked.clone()];
        assert_eq!(
            out_of_bounds(&rows, false),
            "# Out of bounds values : not checked (-c 0)"
        );
        // Barrier and sync only: -c 1, nothing to check.
        let mut barrier = unchecked.clone();
        barrier.collective = "barrier".into();
        assert_eq!(
            out_of_bounds(&[barrier.clone()], true),
            "# Out of bounds values : not checked (no point measured moves data)"
        );
        let right = report::tests::row("nccl", 8, 1.0);
        assert_eq!(
            out_of_bounds(&[barrier, right.clone()], true),
            "# Out of bounds values : 0 OK"
        );
        let mut wrong = right;
        wrong.wrong = 5;
        assert_eq!(
            out_of_bounds(&[unchecked, wrong], true),
            "# Out of bounds values : 5 FAILED"
        );
    }

    #[test]
    fn refusals_by_the_library_become_skipped_points() {
        let refused = anyhow::Error::new(nvshmem::Error::AlgorithmRefused {
            call: "all_reduce",
            algorithm: "peer_kernel",
            reason: "PE 1 is not peer-accessible".into(),
        })
        .context("nvshmem-rs all_reduce count 8");
        let why = refusal(&refused).unwrap();
        assert!(
            why.starts_with("refused: all_reduce: the forced algorithm peer_kernel"),
            "{why}"
        );
        let other = anyhow::Error::new(nvshmem::Error::NoGpu("none".into()));
        assert_eq!(refusal(&other), None);
        assert_eq!(refusal(&anyhow::anyhow!("NCCL failed")), None);
    }
}
