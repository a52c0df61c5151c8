//! `nvshmem-perf ratios`: one implementation's time over the faster of the others, read from
//! saved results (their `--json` files), as the markdown tables that `docs/perf/*/README.md`
//! quote: the range over the collectives at each of a few sizes, and the range over a band of
//! sizes for each collective, one column a file (e.g. graph and stream mode side by side).
use std::{collections::BTreeMap, ffi::OsString, process::ExitCode};

use clap::Parser;

use crate::{
    cli::{parse_impl, parse_size, ImplKind},
    report::Row,
    summary::{named, point, read_one, Point},
};

#[derive(Parser, Debug)]
#[command(
    name = "nvshmem-perf ratios",
    bin_name = "nvshmem-perf ratios",
    about = "One implementation's time over the faster of the others, from saved results, as \
markdown tables",
    after_help = "At each point (a collective, type, operator, root, placement, size, PE count \
and mode) the ratio is the implementation's time over the least time of any other implementation there \
(below 1 is faster); points where either side has no figure are left out. The first table has \
a row per --sizes entry (the range over every point of that size: each collective, type, \
operator, root and placement in the file; the collective with the highest ratio in brackets) and \
one for barrier and for sync; the second a row per collective (the range over its points of the \
--band sizes), and with --at-most RATIO a last row counting, in each column, the band's points at or under that ratio. A row whose check failed (WRONG) is never a figure: it is named on stderr \
and the exit status is 3; a point where any implementation's row is WRONG (ours or another: the \
next fastest other does not stand in) shows WRONG in the cells it falls in, naming the \
collectives or sizes, and counts as not met under --at-most. With --spread PCT, a point where either side's median repetition is \
more than PCT % slower than its fastest (so that most repetitions were slowed: one slow \
repetition does not move a median) is left out of the ranges as noisy: named on stderr and \
counted under the tables."
)]
pub struct RatioArgs {
    /// JSON-lines result files, as written by `--json`, one column each; NAME=FILE heads that
    /// column NAME (default: the file's name without its folder and `.jsonl`).
    #[arg(value_name = "[NAME=]FILE.jsonl", required = true)]
    pub files: Vec<String>,

    /// The implementation whose ratio is shown, spelt as the main command's --impl takes it
    /// (nvshmem-rs, nvshmem_rs, NCCL, ...); every file must have rows of it.
    #[arg(long = "impl", value_name = "IMPL", default_value = "nvshmem-rs", value_parser = parse_impl)]
    pub ours: ImplKind,

    /// The sizes of the first table's rows.
    #[arg(long, value_delimiter = ',', value_parser = parse_size,
          default_value = "8,64K,128K,256K,512K,1M,2M")]
    pub sizes: Vec<u64>,

    /// The sizes of the second table, LOW-HIGH (both included).
    #[arg(long, value_name = "LOW-HIGH", value_parser = parse_band, default_value = "64K-1M")]
    pub band: (u64, u64),

    /// Leave out points where either side's median repetition is more than PCT % above its
    /// fastest: a noisy host's figures, not the kernels'. Needs `--reps` of 3 or more.
    #[arg(long, value_name = "PCT")]
    pub spread: Option<f64>,

    /// Count, in each column, the --band points (every collective, type, operator, root and
    /// placement there) whose ratio is at or under RATIO, as a target such as issue 31's 0.45
    /// is judged: a last row `at or under RATIO | N of M`.
    #[arg(long, value_name = "RATIO")]
    pub at_most: Option<f64>,
}

fn parse_band(s: &str) -> Result<(u64, u64), String> {
    let (lo, hi) = s
        .split_once('-')
        .ok_or_else(|| format!("`{s}`: expected LOW-HIGH, as 64K-1M"))?;
    let (lo, hi) = (parse_size(lo)?, parse_size(hi)?);
    if lo > hi {
        return Err(format!("`{s}`: LOW is above HIGH"));
    }
    Ok((lo, hi))
}

/// Runs `nvshmem-perf ratios ARGS` (`args` starts with `ratios`).
pub fn main(args: impl IntoIterator<Item = OsString>) -> ExitCode {
    let args = RatioArgs::parse_from(args);
    let mut columns = Vec::new();
    for spec in &args.files {
        match read_one(spec) {
            Ok((name, rows)) => {
                let name = if name.is_empty() {
                    let path = std::path::Path::new(named(spec).1);
                    path.file_stem()
                        .map_or_else(|| spec.clone(), |s| s.to_string_lossy().into_owned())
                } else {
                    name
                };
                columns.push((name, rows));
            }
            Err(e) => {
                eprintln!("nvshmem-perf ratios: error: {e:#}");
                return ExitCode::FAILURE;
            }
        }
    }
    if let Some(e) = without(args.ours, &columns) {
        eprintln!("nvshmem-perf ratios: error: {e}");
        return ExitCode::from(2);
    }
    let wrong = wrong_rows(&columns);
    for line in tables(&args, &columns) {
        println!("{line}");
    }
    for n in noisy_points(&args, &columns) {
        eprintln!("nvshmem-perf ratios: noisy, left out: {n}");
    }
    if wrong.is_empty() {
        return ExitCode::SUCCESS;
    }
    for w in &wrong {
        eprintln!("nvshmem-perf ratios: WRONG row, not a figure: {w}");
    }
    ExitCode::from(3)
}

/// Why `ours` cannot be compared in `columns`: the files with no row of it (a name spelt
/// wrong, or a run without it), each with the implementations it has; `None` when every file
/// has rows of it. An empty table would read as a run with nothing to say.
fn without(ours: ImplKind, columns: &[(String, Vec<Row>)]) -> Option<String> {
    let missing: Vec<String> = columns
        .iter()
        .filter(|(_, rows)| !rows.iter().any(|r| r.implementation == ours.name()))
        .map(|(name, rows)| {
            let mut has: Vec<&str> = Vec::new();
            for r in rows {
                if !has.contains(&r.implementation.as_str()) {
                    has.push(&r.implementation);
                }
            }
            let has = if has.is_empty() {
                "no rows".to_string()
            } else {
                has.join(", ")
            };
            format!("{name} ({has})")
        })
        .collect();
    (!missing.is_empty()).then(|| {
        format!(
            "no rows of {} in {}: --impl names one of the files' implementations",
            ours.name(),
            missing.join("; ")
        )
    })
}

/// The rows whose check failed, one line each: `FILE: COLLECTIVE BYTES B IMPL`.
fn wrong_rows(columns: &[(String, Vec<Row>)]) -> Vec<String> {
    columns
        .iter()
        .flat_map(|(name, rows)| {
            rows.iter().filter(|r| r.is_wrong()).map(move |r| {
                format!(
                    "{name}: {} {} B {}",
                    r.collective, r.bytes, r.implementation
                )
            })
        })
        .collect()
}

/// Collectives without a payload: a row each in the first table, not part of its ranges.
const FLAGS_ONLY: [&str; 2] = ["barrier", "sync"];

/// One point's ratio: the collective, its type and size, ours and the best other's time, and
/// the larger of the two rows' spreads (`spread`); or, where any implementation's row at the
/// point was found wrong (`wrong`), no figure at all.
struct Ratio {
    collective: String,
    dtype: String,
    bytes: u64,
    ours: f64,
    best: f64,
    spread: f64,
    wrong: bool,
}

impl Ratio {
    fn value(&self) -> f64 {
        self.ours / self.best
    }

    /// Whether `--spread` leaves the point out: never a wrong one, which must show.
    fn noisy(&self, args: &RatioArgs) -> bool {
        !self.wrong && args.spread.is_some_and(|pct| self.spread * 100.0 > pct)
    }

    /// Whether the point meets `--at-most target`: a wrong one never does.
    fn meets(&self, target: f64) -> bool {
        !self.wrong && self.value() <= target
    }
}

/// A row's spread over its repetitions: how far its median (the figure) lies above its
/// fastest, over the median; 0 for one repetition (or none recorded). The slowest repetition
/// is left out on purpose: a median of three stands one slow outlier (a job's first point
/// often has one), not two.
fn spread(r: &Row) -> f64 {
    let s = (r.time_us - r.time_min_us) / r.time_us;
    if s.is_finite() {
        s.max(0.0)
    } else {
        0.0
    }
}

/// What one point holds: ours, the fastest other that stands, whether any other was
/// measured, and whether any row there was found wrong.
#[derive(Default)]
struct Sides<'a> {
    ours: Option<&'a Row>,
    best: Option<&'a Row>,
    other_measured: bool,
    wrong: bool,
}

/// The points of one file where `ours` and some other implementation were both measured: a
/// ratio, or where any row there was found wrong, a wrong point (a wrong other is not passed
/// over for the next fastest, nor is a wrong row of ours left out of a count).
fn ratios(ours: &str, rows: &[Row]) -> Vec<Ratio> {
    let mut points: BTreeMap<Point, Sides> = BTreeMap::new();
    let mut order = Vec::new();
    for r in rows.iter().filter(|r| r.ok()) {
        let key = point(r);
        let e = points.entry(key).or_insert_with(|| {
            order.push(key);
            Sides::default()
        });
        e.wrong |= r.is_wrong();
        if r.implementation == ours {
            e.ours = Some(r);
        } else {
            e.other_measured = true;
            if r.counts() && e.best.is_none_or(|b| r.time_us < b.time_us) {
                e.best = Some(r);
            }
        }
    }
    order
        .into_iter()
        .filter_map(|key| {
            let p = &points[&key];
            let o = p.ours?;
            let at = |ours: f64, best: f64, spread: f64, wrong: bool| Ratio {
                collective: key.0.to_string(),
                dtype: o.dtype.clone(),
                bytes: key.5,
                ours,
                best,
                spread,
                wrong,
            };
            match p.best {
                _ if p.wrong && p.other_measured => Some(at(f64::NAN, f64::NAN, 0.0, true)),
                Some(b) if !p.wrong && b.time_us > 0.0 => {
                    Some(at(o.time_us, b.time_us, spread(o).max(spread(b)), false))
                }
                _ => None,
            }
        })
        .collect()
}

/// The points `--spread` leaves out, one line each: `FILE: COLLECTIVE TYPE SIZE (spread S %)`.
fn noisy_points(args: &RatioArgs, columns: &[(String, Vec<Row>)]) -> Vec<String> {
    columns
        .iter()
        .flat_map(|(name, rows)| {
            ratios(args.ours.name(), rows)
                .into_iter()
                .filter(|r| r.noisy(args))
                .map(move |r| {
                    format!(
                        "{name}: {} {} {} (spread {:.0} %)",
                        r.collective,
                        r.dtype,
                        size_label(r.bytes),
                        r.spread * 100.0
                    )
                })
        })
        .collect()
}

/// `WRONG (NAMES)` where any of `of` is a wrong point, `name` naming them (each once);
/// `None` where none is.
fn wrong_cell<'a>(
    of: impl Iterator<Item = &'a Ratio>,
    name: impl Fn(&Ratio) -> String,
) -> Option<String> {
    let mut names: Vec<String> = Vec::new();
    for r in of.filter(|r| r.wrong) {
        let n = name(r);
        if !names.contains(&n) {
            names.push(n);
        }
    }
    (!names.is_empty()).then(|| format!("WRONG ({})", names.join(", ")))
}

/// `0.44-0.47`, or one figure when the range is one value; `-` for none. (Wrong points are
/// [`wrong_cell`]'s.)
fn range<'a>(of: impl Iterator<Item = &'a Ratio>) -> (String, Option<&'a Ratio>) {
    let v: Vec<&Ratio> = of.filter(|r| !r.wrong).collect();
    let Some(hi) = v
        .iter()
        .copied()
        .max_by(|a, b| a.value().total_cmp(&b.value()))
    else {
        return ("-".into(), None);
    };
    let lo = v.iter().map(|r| r.value()).fold(f64::INFINITY, f64::min);
    let text = if format!("{lo:.2}") == format!("{:.2}", hi.value()) {
        format!("{lo:.2}")
    } else {
        format!("{lo:.2}-{:.2}", hi.value())
    };
    (text, Some(hi))
}

/// `8 B`, `64 KiB`, `1 MiB`: the largest unit that divides the size whole.
fn size_label(b: u64) -> String {
    if b >= 1 << 20 && b.is_multiple_of(1 << 20) {
        format!("{} MiB", b >> 20)
    } else if b >= 1 << 10 && b.is_multiple_of(1 << 10) {
        format!("{} KiB", b >> 10)
    } else {
        format!("{b} B")
    }
}

/// The two markdown tables, one column a file.
fn tables(args: &RatioArgs, columns: &[(String, Vec<Row>)]) -> Vec<String> {
    let mut left_out = 0;
    let all: Vec<(&str, Vec<Ratio>)> = columns
        .iter()
        .map(|(n, rows)| {
            let (noisy, kept): (Vec<Ratio>, Vec<Ratio>) = ratios(args.ours.name(), rows)
                .into_iter()
                .partition(|r| r.noisy(args));
            left_out += noisy.len();
            (n.as_str(), kept)
        })
        .collect();
    let head = |first: &str| {
        let names: Vec<&str> = all.iter().map(|(n, _)| *n).collect();
        [
            format!("| {first} | {} |", names.join(" | ")),
            format!("|---|{}", "---|".repeat(names.len())),
        ]
    };
    let mut out = vec![format!(
        "{} over the faster of the others (below 1 is faster):",
        args.ours.name()
    )];
    out.push(String::new());
    out.extend(head("size"));
    for &b in &args.sizes {
        let cells: Vec<String> = all
            .iter()
            .map(|(_, rs)| {
                let at_size = || {
                    rs.iter()
                        .filter(|r| r.bytes == b && !FLAGS_ONLY.contains(&r.collective.as_str()))
                };
                if let Some(w) = wrong_cell(at_size(), |r| r.collective.clone()) {
                    return w;
                }
                let (text, hi) = range(at_size());
                match hi {
                    Some(h) => format!("{text} ({})", h.collective),
                    None => text,
                }
            })
            .collect();
        out.push(format!("| {} | {} |", size_label(b), cells.join(" | ")));
    }
    for flag in FLAGS_ONLY {
        let cells: Vec<String> = all
            .iter()
            .map(|(_, rs)| match rs.iter().find(|r| r.collective == flag) {
                Some(r) if r.wrong => "WRONG".into(),
                Some(r) => format!("{:.2} ({:.2} µs against {:.2})", r.value(), r.ours, r.best),
                None => "-".into(),
            })
            .collect();
        if cells.iter().any(|c| c != "-") {
            out.push(format!("| {flag} | {} |", cells.join(" | ")));
        }
    }
    out.push(String::new());
    let (lo, hi) = args.band;
    out.extend(head(&format!(
        "collective, {} to {}",
        size_label(lo),
        size_label(hi)
    )));
    let mut colls: Vec<&str> = Vec::new();
    for (_, rs) in &all {
        for r in rs {
            if !FLAGS_ONLY.contains(&r.collective.as_str())
                && !colls.contains(&r.collective.as_str())
            {
                colls.push(&r.collective);
            }
        }
    }
    for c in colls {
        let cells: Vec<String> = all
            .iter()
            .map(|(_, rs)| {
                let band = || {
                    rs.iter()
                        .filter(|r| r.collective == c && (lo..=hi).contains(&r.bytes))
                };
                wrong_cell(band(), |r| size_label(r.bytes)).unwrap_or_else(|| range(band()).0)
            })
            .collect();
        out.push(format!("| {c} | {} |", cells.join(" | ")));
    }
    if let Some(target) = args.at_most {
        let cells: Vec<String> = all
            .iter()
            .map(|(_, rs)| {
                let band: Vec<&Ratio> = rs
                    .iter()
                    .filter(|r| {
                        !FLAGS_ONLY.contains(&r.collective.as_str()) && (lo..=hi).contains(&r.bytes)
                    })
                    .collect();
                let met = band.iter().filter(|r| r.meets(target)).count();
                match band.iter().filter(|r| r.wrong).count() {
                    0 => format!("{met} of {}", band.len()),
                    w => format!("{met} of {} ({w} WRONG)", band.len()),
                }
            })
            .collect();
        out.push(format!("| at or under {target} | {} |", cells.join(" | ")));
    }
    if let Some(pct) = args.spread {
        out.push(String::new());
        out.push(format!(
            "Noisy points left out: {left_out} (a median over {pct} % above its fastest repetition)."
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::tests::row;

    fn at(coll: &str, imp: &str, bytes: u64, t: f64) -> Row {
        let mut r = row(imp, bytes, t);
        r.collective = coll.into();
        r
    }

    fn args(extra: &[&str]) -> RatioArgs {
        let mut v = vec!["ratios", "x.jsonl"];
        v.extend_from_slice(extra);
        RatioArgs::parse_from(v)
    }

    #[test]
    fn ranges_over_collectives_and_over_the_band() {
        let graph = vec![
            at("all_reduce", "nvshmem-rs", 8, 2.0),
            at("all_reduce", "nccl", 8, 5.0),
            at("all_reduce", "nvshmem", 8, 4.0), // the faster other
            at("reduce", "nvshmem-rs", 8, 2.5),
            at("reduce", "nccl", 8, 5.0),
            at("all_reduce", "nvshmem-rs", 65536, 3.0),
            at("all_reduce", "nccl", 65536, 6.0),
            at("all_reduce", "nvshmem-rs", 1 << 20, 6.0),
            at("all_reduce", "nccl", 1 << 20, 10.0),
            at("all_reduce", "nvshmem-rs", 2 << 20, 1.0), // past the band
            at("all_reduce", "nccl", 2 << 20, 10.0),
            at("barrier", "nvshmem-rs", 0, 2.6),
            at("barrier", "nvshmem", 0, 4.4),
            at("barrier", "nccl", 0, 6.0),
        ];
        let mut stream = vec![
            at("all_reduce", "nvshmem-rs", 8, 4.0),
            at("all_reduce", "nccl", 8, 10.0),
        ];
        // Skipped and wrong rows are never figures.
        let mut skipped = at("reduce", "nccl", 8, f64::NAN);
        skipped.status = "skipped: no NCCL".into();
        stream.push(skipped);
        let mut wrong = at("reduce", "nvshmem-rs", 8, 0.1);
        wrong.wrong = 2;
        stream.push(wrong);
        let columns = [("graph".into(), graph), ("stream".into(), stream)];
        assert_eq!(wrong_rows(&columns), ["stream: reduce 8 B nvshmem-rs"]);
        let lines = tables(&args(&["--sizes", "8,64K,4K"]), &columns);
        assert_eq!(
            lines,
            [
                "nvshmem-rs over the faster of the others (below 1 is faster):",
                "",
                "| size | graph | stream |",
                "|---|---|---|",
                "| 8 B | 0.50 (reduce) | 0.40 (all_reduce) |",
                "| 64 KiB | 0.50 (all_reduce) | - |",
                "| 4 KiB | - | - |",
                "| barrier | 0.59 (2.60 µs against 4.40) | - |",
                "",
                "| collective, 64 KiB to 1 MiB | graph | stream |",
                "|---|---|---|",
                "| all_reduce | 0.50-0.60 | - |",
                "| reduce | - | - |",
            ]
        );
    }

    /// Found by an audit: a wrong other row was passed over, so the next fastest other (here
    /// the slower NCCL) silently made the ratio; a wrong row of ours left the --at-most count.
    /// Both points are WRONG now, and not met.
    #[test]
    fn wrong_points_show_wrong_and_are_never_met() {
        let mut rows = vec![
            at("all_reduce", "nvshmem-rs", 65536, 2.0),
            at("all_reduce", "nccl", 65536, 5.0),
            at("all_reduce", "nvshmem", 65536, 1.0), // the fastest other, but wrong
            at("broadcast", "nvshmem-rs", 65536, 1.0), // ours, wrong
            at("broadcast", "nccl", 65536, 5.0),
            at("broadcast", "nvshmem-rs", 1 << 20, 4.0),
            at("broadcast", "nccl", 1 << 20, 10.0), // 0.40: met
            at("barrier", "nvshmem-rs", 0, 1.0),
            at("barrier", "nccl", 0, 5.0),
        ];
        rows[2].wrong = 7;
        rows[3].wrong = 1;
        rows[7].wrong = 1;
        let columns = [("graph".to_string(), rows)];
        let lines = tables(
            &args(&["--sizes", "64K,1M", "--at-most", "0.45", "--spread", "1"]),
            &columns,
        );
        assert_eq!(
            lines,
            [
                "nvshmem-rs over the faster of the others (below 1 is faster):",
                "",
                "| size | graph |",
                "|---|---|",
                "| 64 KiB | WRONG (all_reduce, broadcast) |",
                "| 1 MiB | 0.40 (broadcast) |",
                "| barrier | WRONG |",
                "",
                "| collective, 64 KiB to 1 MiB | graph |",
                "|---|---|",
                "| all_reduce | WRONG (64 KiB) |",
                "| broadcast | WRONG (64 KiB) |",
                "| at or under 0.45 | 1 of 3 (2 WRONG) |",
                "",
                "Noisy points left out: 0 (a median over 1 % above its fastest repetition).",
            ]
        );
        assert_eq!(wrong_rows(&columns).len(), 3);
    }

    #[test]
    fn spread_leaves_noisy_points_out_and_names_them() {
        let mut rows = vec![
            at("all_reduce", "nvshmem-rs", 65536, 3.0),
            at("all_reduce", "nccl", 65536, 6.0),
            at("all_reduce", "nvshmem-rs", 131072, 25.5),
            at("all_reduce", "nccl", 131072, 19.6),
        ];
        // The 128 KiB point: the other's one slow repetition does not count; ours, two slowed
        // of three (15.1, 25.5, 26.6), does: 41 %.
        rows[3].time_min_us = 19.0;
        rows[3].time_max_us = 60.0;
        rows[2].time_min_us = 15.1;
        rows[2].time_max_us = 26.6;
        let columns = [("stream".to_string(), rows)];
        let band = |extra: &[&str]| {
            let mut a = vec!["--sizes", "64K"];
            a.extend_from_slice(extra);
            tables(&args(&a), &columns)
        };
        // Without --spread every point counts, and the tables end with the band.
        let plain = band(&[]);
        assert_eq!(plain.last().unwrap(), "| all_reduce | 0.50-1.30 |");
        let kept = band(&["--spread", "60"]);
        assert_eq!(kept[kept.len() - 3], "| all_reduce | 0.50-1.30 |");
        assert_eq!(
            kept.last().unwrap(),
            "Noisy points left out: 0 (a median over 60 % above its fastest repetition)."
        );
        let cut = band(&["--spread", "25"]);
        assert_eq!(cut[cut.len() - 3], "| all_reduce | 0.50 |");
        assert_eq!(
            cut.last().unwrap(),
            "Noisy points left out: 1 (a median over 25 % above its fastest repetition)."
        );
        assert_eq!(
            noisy_points(&args(&["--spread", "25"]), &columns),
            ["stream: all_reduce f32 128 KiB (spread 41 %)"]
        );
    }

    #[test]
    fn at_most_counts_the_band_points_that_meet_a_target() {
        let rows = vec![
            at("all_reduce", "nvshmem-rs", 65536, 2.0),
            at("all_reduce", "nccl", 65536, 5.0), // 0.40: met
            at("broadcast", "nvshmem-rs", 65536, 2.3),
            at("broadcast", "nccl", 65536, 5.0), // 0.46: not
            at("broadcast", "nvshmem-rs", 1 << 20, 4.5),
            at("broadcast", "nccl", 1 << 20, 10.0), // 0.45: met (at, not only under)
            at("broadcast", "nvshmem-rs", 8, 1.0),
            at("broadcast", "nccl", 8, 5.0), // below the band: not counted
            at("barrier", "nvshmem-rs", 0, 1.0),
            at("barrier", "nccl", 0, 5.0), // no payload: not counted
        ];
        let columns = [("graph".to_string(), rows)];
        let lines = tables(&args(&["--sizes", "8", "--at-most", "0.45"]), &columns);
        assert_eq!(lines.last().unwrap(), "| at or under 0.45 | 2 of 3 |");
        let lines = tables(&args(&["--sizes", "8"]), &columns);
        assert!(!lines.iter().any(|l| l.contains("at or under")));
    }

    /// Another PE count or mode is another point: ours on 2 PEs is not set against NCCL on 4,
    /// nor a graph time against a stream time.
    #[test]
    fn only_rows_of_one_pe_count_and_mode_are_compared() {
        let mut nccl4 = at("all_reduce", "nccl", 8, 5.0);
        nccl4.n_pes = 4;
        let mut graph = at("all_reduce", "nccl", 8, 4.0);
        graph.graph = true;
        let rows = vec![at("all_reduce", "nvshmem-rs", 8, 2.0), nccl4, graph];
        assert!(ratios("nvshmem-rs", &rows).is_empty());
        let mut rows = rows;
        rows.push(at("all_reduce", "nccl", 8, 10.0));
        let r = ratios("nvshmem-rs", &rows);
        assert_eq!(r.len(), 1);
        assert_eq!(r[0].value(), 0.2);
    }

    #[test]
    fn sizes_and_bands_parse() {
        assert_eq!(parse_band("64K-1M"), Ok((65536, 1 << 20)));
        assert!(parse_band("1M-64K").is_err());
        assert!(parse_band("64K").is_err());
        assert_eq!(size_label(8), "8 B");
        assert_eq!(size_label(3 << 19), "1536 KiB");
        assert_eq!(args(&[]).sizes.len(), 7);
        assert_eq!(args(&["--impl", "nccl"]).ours, ImplKind::Nccl);
    }

    /// Found by an audit: `--impl nvshmem_rs` (the main command's spelling too) printed empty
    /// tables and exited 0. The main command's spellings are taken, and a name no file has
    /// rows of is an error that says what the files have.
    #[test]
    fn impl_takes_the_main_command_s_spellings_and_must_have_rows() {
        for spelt in ["nvshmem_rs", "NVSHMEM-RS", " nvshmem-rs"] {
            assert_eq!(
                args(&["--impl", spelt]).ours,
                ImplKind::NvshmemRs,
                "{spelt}"
            );
        }
        let e = RatioArgs::try_parse_from(["ratios", "x.jsonl", "--impl", "nvshmemrs"])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("unknown implementation `nvshmemrs` (one of: nvshmem-rs, nvshmem, nccl)"),
            "{e}"
        );
        let rows = vec![
            at("all_reduce", "nccl", 8, 1.0),
            at("all_reduce", "nvshmem", 8, 1.0),
        ];
        let ours = vec![at("all_reduce", "nvshmem-rs", 8, 1.0)];
        let columns = [
            ("graph".to_string(), ours.clone()),
            ("stream".to_string(), rows),
            ("empty".to_string(), Vec::new()),
        ];
        assert_eq!(
            without(ImplKind::NvshmemRs, &columns).unwrap(),
            "no rows of nvshmem-rs in stream (nccl, nvshmem); empty (no rows): --impl names one \
             of the files' implementations"
        );
        assert_eq!(without(ImplKind::NvshmemRs, &columns[..1]), None);
        assert!(without(ImplKind::Nccl, &columns[..1]).is_some());
    }
}
