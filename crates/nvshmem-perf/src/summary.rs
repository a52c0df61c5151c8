//! `nvshmem-perf summarize`: saved results (their `--json` files) side by side, one line per
//! point, every implementation's time on it: what scripts/gpu-check.sh prints after a run,
//! read from the rows themselves rather than by cutting columns out of the text tables.
use std::{ffi::OsString, path::Path, process::ExitCode};

use anyhow::{Context, Result};
use clap::Parser;

use crate::report::{has_algo, Row};

#[derive(Parser, Debug)]
#[command(
    name = "nvshmem-perf summarize",
    bin_name = "nvshmem-perf summarize",
    about = "Saved results (their --json files) side by side, one line per point, without a GPU",
    after_help = "Each line: LABEL, the collective, its type, `in-place` when it ran in place, \
the size in bytes, then for every file and implementation `[NAME:]IMPL TIME` (µs a call, the \
algorithm that ran in brackets), `skip` for a skipped point or `WRONG` for one whose check \
failed. A point is a collective, type, operator, root, placement, size, PE count and mode \
(stream or graph): rows of another PE count or mode are never paired, and where the files mix \
them each line names its own. Points keep the order in which the files first give them."
)]
pub struct SummaryArgs {
    /// JSON-lines result files, as written by `--json`; NAME=FILE puts NAME: before the
    /// implementations of that file (to tell runs of the same implementation apart).
    #[arg(value_name = "[NAME=]FILE.jsonl", required = true)]
    pub files: Vec<String>,

    /// Text at the start of every line (e.g. the mode of the run).
    #[arg(long, value_name = "TEXT", default_value = "")]
    pub label: String,
}

/// Runs `nvshmem-perf summarize ARGS` (`args` starts with `summarize`). A file that cannot be
/// read (a run that ended before writing it) is named on stderr and the others summarized;
/// the exit status then says so.
pub fn main(args: impl IntoIterator<Item = OsString>) -> ExitCode {
    let args = SummaryArgs::parse_from(args);
    let mut files = Vec::new();
    let mut status = ExitCode::SUCCESS;
    for spec in &args.files {
        match read_one(spec) {
            Ok(f) => files.push(f),
            Err(e) => {
                eprintln!("nvshmem-perf summarize: error: {e:#}");
                status = ExitCode::FAILURE;
            }
        }
    }
    for line in summarize(&args.label, &files) {
        println!("{line}");
    }
    status
}

/// `[NAME=]FILE` split into its name ("" without one) and path. A path may hold `=` itself:
/// only a name without `/` before it counts as one. (`summarize` and `plot` read files so.)
pub fn named(spec: &str) -> (String, &str) {
    match spec.split_once('=') {
        Some((n, p)) if !n.is_empty() && !n.contains('/') => (n.to_string(), p),
        _ => (String::new(), spec),
    }
}

/// `[NAME=]FILE` read: its name ("" without one) and rows.
pub(crate) fn read_one(spec: &str) -> Result<(String, Vec<Row>)> {
    let (name, path) = named(spec);
    let text =
        std::fs::read_to_string(Path::new(path)).with_context(|| format!("reading {path}"))?;
    let rows = text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| serde_json::from_str(l).with_context(|| format!("{path} line {}", i + 1)))
        .collect::<Result<Vec<Row>>>()?;
    Ok((name, rows))
}

/// What makes rows the same point, across implementations and files: collective, type,
/// operator, root, placement, size, PE count and mode (graph or not). Times of another PE
/// count or mode are another measurement, never the same point's.
pub(crate) type Point<'a> = (&'a str, &'a str, &'a str, i64, bool, u64, usize, bool);

/// The point of row `r`.
pub(crate) fn point(r: &Row) -> Point<'_> {
    (
        &r.collective,
        &r.dtype,
        &r.op,
        r.root,
        r.in_place,
        r.bytes,
        r.n_pes,
        r.graph,
    )
}

/// One cell: a row's time (with its algorithm), `skip` or `WRONG`.
fn cell(r: &Row) -> String {
    if r.is_wrong() {
        "WRONG".into()
    } else if !r.ok() {
        "skip".into()
    } else if has_algo(r) {
        format!("{:.2} ({})", r.time_us, r.algo)
    } else {
        format!("{:.2}", r.time_us)
    }
}

/// The lines of `files` (name, rows) side by side, each starting with `label`.
///
/// ```text
/// graph all_reduce      f32         8  nvshmem-rs 2.31 (nvlink_ll)  nvshmem 4.02  nccl 5.10
/// ```
pub fn summarize(label: &str, files: &[(String, Vec<Row>)]) -> Vec<String> {
    let mut keys = Vec::new();
    for (_, rows) in files {
        for r in rows {
            if !keys.contains(&point(r)) {
                keys.push(point(r));
            }
        }
    }
    // Lines name their PE count and mode where the files mix them (else the label does).
    let pes_vary = keys.iter().any(|k| k.6 != keys[0].6);
    let modes_vary = keys.iter().any(|k| k.7 != keys[0].7);
    keys.iter()
        .map(|key| {
            let (coll, dtype, _, _, in_place, bytes, n_pes, graph) = *key;
            let mut line = if label.is_empty() {
                String::new()
            } else {
                format!("{label} ")
            };
            line += &format!("{coll:<15} {dtype:<5}");
            if in_place {
                line += " in-place";
            }
            if pes_vary {
                line += &format!(" {n_pes} PEs");
            }
            if modes_vary {
                line += if graph { " graph" } else { " stream" };
            }
            line += &format!(" {bytes:>10}");
            for (name, rows) in files {
                for r in rows.iter().filter(|r| point(r) == *key) {
                    let prefix = if name.is_empty() {
                        String::new()
                    } else {
                        format!("{name}:")
                    };
                    line += &format!("  {prefix}{} {}", r.implementation, cell(r));
                }
            }
            line
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::tests::row;

    #[test]
    fn points_side_by_side_across_files() {
        let mut auto = vec![
            row("nvshmem-rs", 8, 2.314),
            row("nccl", 8, 5.1),
            row("nvshmem-rs", 4096, 3.0),
        ];
        auto[0].algo = "nvlink_ll".into();
        let mut skipped = row("nccl", 4096, f64::NAN);
        skipped.status = "skipped: no NCCL".into();
        auto.push(skipped);
        let mut forced = vec![row("nvshmem-rs", 8, 2.0), row("nvshmem-rs", 4096, 9.0)];
        forced[0].algo = "nvlink_ce".into();
        forced[1].wrong = 3;
        let lines = summarize(
            "graph",
            &[(String::new(), auto), ("ce".into(), forced.clone())],
        );
        assert_eq!(
            lines,
            [
                "graph all_reduce      f32            8  nvshmem-rs 2.31 (nvlink_ll)  nccl 5.10  ce:nvshmem-rs 2.00 (nvlink_ce)",
                "graph all_reduce      f32         4096  nvshmem-rs 3.00 (auto)  nccl skip  ce:nvshmem-rs WRONG",
            ]
        );
        // Another type, placement or root is another point; no label, no prefix.
        let mut other = forced;
        other[0].dtype = "bf16".into();
        other[1].in_place = true;
        other[1].wrong = 0;
        other[1].algo = "-".into();
        let lines = summarize("", &[(String::new(), other)]);
        assert_eq!(
            lines,
            [
                "all_reduce      bf16           8  nvshmem-rs 2.00 (nvlink_ce)",
                "all_reduce      f32   in-place       4096  nvshmem-rs 9.00",
            ]
        );
    }

    /// Found by an audit: rows were paired without regard to PE count or mode, so a 2-PE
    /// stream time sat on one line with a 4-PE or graph time, as if measured alike.
    #[test]
    fn rows_of_another_pe_count_or_mode_are_another_point() {
        let two = row("nvshmem-rs", 8, 2.0);
        let mut four = row("nccl", 8, 5.0);
        four.n_pes = 4;
        let lines = summarize("", &[(String::new(), vec![two.clone(), four])]);
        assert_eq!(
            lines,
            [
                "all_reduce      f32   2 PEs          8  nvshmem-rs 2.00 (auto)",
                "all_reduce      f32   4 PEs          8  nccl 5.00",
            ]
        );
        let mut graph = row("nvshmem-rs", 8, 1.5);
        graph.graph = true;
        let lines = summarize(
            "",
            &[
                ("stream".into(), vec![two.clone()]),
                ("graph".into(), vec![graph]),
            ],
        );
        assert_eq!(
            lines,
            [
                "all_reduce      f32   stream          8  stream:nvshmem-rs 2.00 (auto)",
                "all_reduce      f32   graph          8  graph:nvshmem-rs 1.50 (auto)",
            ]
        );
        // One PE count and mode: lines as before.
        let lines = summarize("", &[(String::new(), vec![two, row("nccl", 8, 5.0)])]);
        assert_eq!(
            lines,
            ["all_reduce      f32            8  nvshmem-rs 2.00 (auto)  nccl 5.00"]
        );
    }

    #[test]
    fn reads_named_files_and_names_a_bad_line() {
        let dir = std::env::temp_dir().join(format!("nvshmem-perf-summary-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let good = dir.join("a=b.jsonl");
        let mut text = Vec::new();
        crate::report::write_json(&[row("nvshmem", 64, 1.5)], &mut text).unwrap();
        std::fs::write(&good, &text).unwrap();
        let bad = dir.join("bad.jsonl");
        std::fs::write(&bad, "{\"collective\": 1}\n").unwrap();
        let good = good.to_str().unwrap().to_string();
        // A path holding `=` is a path, not NAME=PATH.
        let files = vec![
            read_one(&format!("raw={good}")).unwrap(),
            read_one(&good).unwrap(),
        ];
        assert_eq!(files[0].0, "raw");
        assert_eq!(files[1].0, "");
        assert_eq!(
            summarize("x", &files),
            ["x all_reduce      f32           64  raw:nvshmem 1.50  nvshmem 1.50"]
        );
        let e = read_one(bad.to_str().unwrap()).unwrap_err();
        assert!(format!("{e:#}").contains("bad.jsonl line 1"), "{e:#}");
        let e = read_one(dir.join("none.jsonl").to_str().unwrap()).unwrap_err();
        assert!(format!("{e:#}").contains("none.jsonl"), "{e:#}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
