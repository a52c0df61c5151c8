//! Result rows and their forms: nccl-tests-like tables (text or markdown), JSON lines, CSV.
use std::{collections::BTreeMap, fmt::Write as _, io::Write};

use serde::{Deserialize, Serialize};

/// One measured (or skipped) point: a collective at one size by one implementation. Reads
/// back from the JSON lines and CSV it is written to, also from files written before a field
/// existed (`algo`: empty).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Row {
    /// Collective name.
    pub collective: String,
    /// Implementation name.
    pub implementation: String,
    /// The algorithm that ran, for implementations with a choice (nvshmem-rs: the one the
    /// library's choice took, or `--algo` forced, as `Team::plan_of` reports it); `-` for the
    /// others (files written before this held `auto` for the library's own choice).
    #[serde(default)]
    pub algo: String,
    /// What the implementation ran when it differs from the name (NCCL's barrier).
    pub note: String,
    /// PEs in the team.
    pub n_pes: usize,
    /// nccl-tests' size: the larger of one PE's input and output, bytes.
    pub bytes: u64,
    /// Elements in that buffer.
    pub count: usize,
    /// Element type.
    pub dtype: String,
    /// Operator, for reductions (`premul_sum(S)` with its scale).
    pub op: String,
    /// Root, for rooted collectives (-1 otherwise).
    pub root: i64,
    /// Whether it ran in place.
    pub in_place: bool,
    /// Whether the iterations were replayed from a CUDA graph.
    pub graph: bool,
    /// Median over repetitions of the mean time per call, µs.
    #[serde(deserialize_with = "f64_or_nan")]
    pub time_us: f64,
    /// Fastest repetition, µs per call.
    #[serde(deserialize_with = "f64_or_nan")]
    pub time_min_us: f64,
    /// Slowest repetition, µs per call.
    #[serde(deserialize_with = "f64_or_nan")]
    pub time_max_us: f64,
    /// Each call timed alone: fastest, µs.
    #[serde(deserialize_with = "f64_or_nan")]
    pub iter_min_us: f64,
    /// Each call timed alone: median, µs.
    #[serde(deserialize_with = "f64_or_nan")]
    pub iter_p50_us: f64,
    /// Each call timed alone: 99th percentile, µs.
    #[serde(deserialize_with = "f64_or_nan")]
    pub iter_p99_us: f64,
    /// Algorithm bandwidth, GB/s (bytes / time).
    #[serde(deserialize_with = "f64_or_nan")]
    pub algbw_gbs: f64,
    /// Bus bandwidth, GB/s (algbw times nccl-tests' factor).
    #[serde(deserialize_with = "f64_or_nan")]
    pub busbw_gbs: f64,
    /// Wrong elements summed over PEs; -1 when not checked.
    pub wrong: i64,
    /// Host time to enqueue one call, µs; -1 when not measured.
    #[serde(deserialize_with = "f64_or_nan")]
    pub cpu_us: f64,
    /// Each repetition's µs per call, `;`-separated.
    pub reps_us: String,
    /// `ok`, or why the point was skipped or failed.
    pub status: String,
}

/// An `f64` that JSON wrote as `null` (serde_json's NaN: skipped points have no time) reads
/// back as NaN.
fn f64_or_nan<'de, D: serde::Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::NAN))
}

impl Row {
    /// Whether the point was measured.
    pub fn ok(&self) -> bool {
        self.status == "ok"
    }

    /// Whether the point was measured and its check found a wrong element: its figures time
    /// something that did not do the collective, so tables show `WRONG` instead, and ratios,
    /// averages and plots leave it out.
    pub fn is_wrong(&self) -> bool {
        self.ok() && self.wrong > 0
    }

    /// Whether the point's figures stand: measured, and not found wrong (or not checked).
    pub fn counts(&self) -> bool {
        self.ok() && !self.is_wrong()
    }

    /// One line naming the point, for the list of wrong rows.
    pub fn describe(&self) -> String {
        let mut s = format!("{} {}", self.implementation, self.collective);
        if self.dtype != "-" {
            s += &format!(" {}", self.dtype);
        }
        if !self.op.is_empty() {
            s += &format!(" {}", self.op);
        }
        if self.root >= 0 {
            s += &format!(" root {}", self.root);
        }
        if self.in_place {
            s += " in place";
        }
        if has_algo(self) {
            s += &format!(" algo {}", self.algo);
        }
        s + &format!(
            ", {} B on {} PEs: {} wrong elements",
            self.bytes, self.n_pes, self.wrong
        )
    }
}

/// The rows whose check found wrong elements, one line each ([`Row::describe`]).
pub fn wrong_rows(rows: &[Row]) -> Vec<String> {
    rows.iter()
        .filter(|r| r.is_wrong())
        .map(Row::describe)
        .collect()
}

/// Algorithm bandwidth in GB/s of `bytes` moved in `time_us`.
pub fn algbw(bytes: u64, time_us: f64) -> f64 {
    if time_us > 0.0 {
        bytes as f64 / (time_us * 1e-6) / 1e9
    } else {
        0.0
    }
}

/// Writes rows as JSON lines.
pub fn write_json(rows: &[Row], mut w: impl Write) -> std::io::Result<()> {
    for r in rows {
        serde_json::to_writer(&mut w, r)?;
        w.write_all(b"\n")?;
    }
    Ok(())
}

/// JSON lines written as the rows come, each flushed at once: a run that never ends leaves
/// the points it finished (`--json`).
pub struct Journal(std::io::BufWriter<std::fs::File>);

impl Journal {
    /// Creates (or empties) the file at `path`.
    pub fn create(path: &std::path::Path) -> std::io::Result<Self> {
        Ok(Self(std::io::BufWriter::new(std::fs::File::create(path)?)))
    }

    /// Appends `row` as one JSON line and flushes it to the file.
    pub fn push(&mut self, row: &Row) -> std::io::Result<()> {
        write_json(std::slice::from_ref(row), &mut self.0)?;
        self.0.flush()
    }
}

/// Writes rows as CSV with a header.
pub fn write_csv(rows: &[Row], w: impl Write) -> csv::Result<()> {
    let mut c = csv::Writer::from_writer(w);
    for r in rows {
        c.serialize(r)?;
    }
    c.flush()?;
    Ok(())
}

/// What one table shares: collective, type, op, root, in place.
type TableKey = (String, String, String, i64, bool);

/// The key one table groups by: everything but the size and the implementation.
fn table_key(r: &Row) -> TableKey {
    (
        r.collective.clone(),
        r.dtype.clone(),
        r.op.clone(),
        r.root,
        r.in_place,
    )
}

/// Formats nccl-tests-like tables, one per collective/type/op/root, with a column group per
/// implementation (in `impls` order), time ratios against NCCL, and a footer.
pub fn format_tables(rows: &[Row], impls: &[&str], markdown: bool) -> String {
    let mut groups: Vec<(TableKey, Vec<&Row>)> = Vec::new();
    for r in rows {
        let k = table_key(r);
        match groups.iter_mut().find(|(g, _)| *g == k) {
            Some((_, v)) => v.push(r),
            None => groups.push((k, vec![r])),
        }
    }
    let mut out = String::new();
    for ((coll, dtype, op, root, in_place), group) in groups {
        let n = group.first().map(|r| r.n_pes).unwrap_or(0);
        let graph = group.iter().any(|r| r.graph);
        let _ = writeln!(
            out,
            "{}# {coll}  type {dtype}  op {op}  root {}  {}  {} PEs{}",
            if markdown { "#" } else { "" },
            if root < 0 {
                "-".to_string()
            } else {
                root.to_string()
            },
            if in_place { "in-place" } else { "out-of-place" },
            n,
            if graph { "  (CUDA graph)" } else { "" },
        );
        out.push_str(&format_one(&group, impls, markdown));
        out.push('\n');
    }
    out
}

/// Whether `r` names an algorithm (rows of implementations without a choice say `-`; rows
/// of older files say nothing).
pub(crate) fn has_algo(r: &Row) -> bool {
    !matches!(r.algo.as_str(), "" | "-")
}

fn format_one(group: &[&Row], impls: &[&str], markdown: bool) -> String {
    let has_nccl = impls.contains(&"nccl");
    let others: Vec<&str> = impls.iter().copied().filter(|i| *i != "nccl").collect();
    // An algorithm column for each implementation that reports one.
    let algo_of: Vec<bool> = impls
        .iter()
        .map(|i| group.iter().any(|r| r.implementation == *i && has_algo(r)))
        .collect();
    let mut header: Vec<String> = ["size(B)", "count", "type", "op", "root"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    for (i, algo) in impls.iter().zip(&algo_of) {
        for c in ["time(us)", "algbw", "busbw", "#wrong"] {
            header.push(format!("{i} {c}"));
        }
        if *algo {
            header.push(format!("{i} algo"));
        }
    }
    if has_nccl {
        for o in &others {
            header.push(format!("{o}/nccl time"));
        }
    }
    // Sizes in order of first appearance, one line each.
    let mut by_size: BTreeMap<u64, BTreeMap<&str, &Row>> = BTreeMap::new();
    for r in group {
        by_size
            .entry(r.bytes)
            .or_default()
            .insert(r.implementation.as_str(), *r);
    }
    let mut lines: Vec<Vec<String>> = Vec::new();
    let mut notes: Vec<String> = Vec::new();
    for (bytes, per_impl) in &by_size {
        let any = per_impl.values().next().expect("non-empty");
        let mut cells = vec![
            bytes.to_string(),
            any.count.to_string(),
            any.dtype.clone(),
            if any.op.is_empty() {
                "-".into()
            } else {
                any.op.clone()
            },
            if any.root < 0 {
                "-".into()
            } else {
                any.root.to_string()
            },
        ];
        for (i, algo) in impls.iter().zip(&algo_of) {
            match per_impl.get(i) {
                Some(r) if r.is_wrong() => {
                    cells.extend(["WRONG", "WRONG", "WRONG"].map(String::from));
                    cells.push(r.wrong.to_string());
                }
                Some(r) if r.ok() => {
                    cells.push(format!("{:.2}", r.time_us));
                    cells.push(format!("{:.2}", r.algbw_gbs));
                    cells.push(format!("{:.2}", r.busbw_gbs));
                    cells.push(if r.wrong < 0 {
                        "N/A".into()
                    } else {
                        r.wrong.to_string()
                    });
                    if !r.note.is_empty() && !notes.contains(&format!("{i}: {}", r.note)) {
                        notes.push(format!("{i}: {}", r.note));
                    }
                }
                Some(r) => {
                    cells.extend(["skip", "", "", ""].map(String::from));
                    let note = format!("{i}: {}", r.status);
                    if !notes.contains(&note) {
                        notes.push(note);
                    }
                }
                None => cells.extend(["-", "", "", ""].map(String::from)),
            }
            if *algo {
                cells.push(per_impl.get(i).map_or("", |r| r.algo.as_str()).to_string());
            }
        }
        if has_nccl {
            let nccl = per_impl.get("nccl").filter(|r| r.counts());
            for o in &others {
                let cell = match (per_impl.get(o).filter(|r| r.counts()), nccl) {
                    (Some(a), Some(b)) if b.time_us > 0.0 => {
                        format!("{:.2}", a.time_us / b.time_us)
                    }
                    _ => "-".into(),
                };
                cells.push(cell);
            }
        }
        lines.push(cells);
    }
    let mut footer = Vec::new();
    for i in impls {
        let ok: Vec<&&Row> = group
            .iter()
            .filter(|r| r.implementation == *i && r.ok())
            .collect();
        if ok.is_empty() {
            continue;
        }
        // Wrong rows count in the wrong total, not in the average bandwidth.
        let right: Vec<f64> = ok
            .iter()
            .filter(|r| r.counts())
            .map(|r| r.busbw_gbs)
            .collect();
        let avg = match right.len() {
            0 => "-".to_string(),
            k => format!("{:.2}", right.iter().sum::<f64>() / k as f64),
        };
        let wrong: i64 = ok.iter().map(|r| r.wrong.max(0)).sum();
        let wrong_rows = ok.iter().filter(|r| r.is_wrong()).count();
        let checked = ok.iter().any(|r| r.wrong >= 0);
        footer.push(format!(
            "{i}: avg busbw {avg} GB/s, {}",
            if !checked {
                "not checked".to_string()
            } else if wrong_rows > 0 {
                format!("{wrong} wrong in {wrong_rows} rows (WRONG)")
            } else {
                format!("{wrong} wrong")
            }
        ));
    }
    render(&header, &lines, markdown, &footer, &notes)
}

fn render(
    header: &[String],
    lines: &[Vec<String>],
    markdown: bool,
    footer: &[String],
    notes: &[String],
) -> String {
    let mut out = String::new();
    if markdown {
        let _ = writeln!(out, "| {} |", header.join(" | "));
        // Names left, numbers right.
        let text = |h: &str| matches!(h, "type" | "op" | "root") || h.ends_with(" algo");
        let sep: Vec<&str> = header
            .iter()
            .map(|h| if text(h) { "---" } else { "---:" })
            .collect();
        let _ = writeln!(out, "|{}|", sep.join("|"));
        for l in lines {
            let _ = writeln!(out, "| {} |", l.join(" | "));
        }
        out.push('\n');
        for f in footer.iter().chain(notes) {
            let _ = writeln!(out, "- {f}");
        }
    } else {
        let widths: Vec<usize> = (0..header.len())
            .map(|c| {
                lines
                    .iter()
                    .map(|l| l[c].len())
                    .chain([header[c].len()])
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        let fmt_line = |cells: &[String]| {
            let parts: Vec<String> = cells
                .iter()
                .zip(&widths)
                .map(|(c, w)| format!("{c:>w$}"))
                .collect();
            parts.join("  ")
        };
        let _ = writeln!(out, "#{}", fmt_line(header));
        for l in lines {
            let _ = writeln!(out, " {}", fmt_line(l));
        }
        for f in footer {
            let _ = writeln!(out, "# {f}");
        }
        for n in notes {
            let _ = writeln!(out, "# note: {n}");
        }
    }
    out
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn row(imp: &str, bytes: u64, time_us: f64) -> Row {
        Row {
            collective: "all_reduce".into(),
            implementation: imp.into(),
            algo: if imp == "nvshmem-rs" { "auto" } else { "-" }.into(),
            note: String::new(),
            n_pes: 2,
            bytes,
            count: (bytes / 4) as usize,
            dtype: "f32".into(),
            op: "sum".into(),
            root: -1,
            in_place: false,
            graph: false,
            time_us,
            time_min_us: time_us,
            time_max_us: time_us,
            iter_min_us: time_us,
            iter_p50_us: time_us,
            iter_p99_us: time_us,
            algbw_gbs: algbw(bytes, time_us),
            busbw_gbs: algbw(bytes, time_us),
            wrong: 0,
            cpu_us: -1.0,
            reps_us: format!("{time_us}"),
            status: "ok".into(),
        }
    }

    #[test]
    fn bandwidth_in_gb_per_s() {
        assert_eq!(algbw(1_000_000_000, 1e6), 1.0);
        assert_eq!(algbw(8, 0.0), 0.0);
        assert!((algbw(134217728, 471.6) - 284.6).abs() < 0.1);
    }

    #[test]
    fn table_has_groups_ratios_and_footer() {
        let mut skipped = row("nvshmem-rs", 8, 0.0);
        skipped.status = "not wired yet".into();
        let rows = vec![
            row("nvshmem", 8, 10.0),
            row("nccl", 8, 5.0),
            skipped,
            row("nvshmem", 1 << 20, 20.0),
            row("nccl", 1 << 20, 20.0),
        ];
        let t = format_tables(&rows, &["nvshmem-rs", "nvshmem", "nccl"], false);
        assert!(t.starts_with("# all_reduce  type f32  op sum  root -  out-of-place  2 PEs"));
        assert!(t.contains("nvshmem/nccl time"), "{t}");
        assert!(t.contains("nvshmem-rs/nccl time"));
        let line8 = t
            .lines()
            .find(|l| l.trim_start().starts_with("8 "))
            .unwrap();
        assert!(line8.contains("skip") && line8.contains("10.00") && line8.contains("2.00"));
        assert!(t.contains("# nccl: avg busbw"));
        assert!(t.contains("0 wrong"));
        assert!(t.contains("note: nvshmem-rs: not wired yet"));
        let md = format_tables(&rows, &["nvshmem-rs", "nvshmem", "nccl"], true);
        assert!(md.contains("| size(B) | count |"));
        assert!(md.contains("|---:|---:|---|---|---|"));
    }

    #[test]
    fn the_algorithm_has_a_column_where_there_is_one() {
        let mut forced = row("nvshmem-rs", 8, 4.0);
        forced.algo = "peer_kernel".into();
        let rows = vec![forced, row("nvshmem", 8, 5.0), row("nccl", 8, 6.0)];
        let impls = ["nvshmem-rs", "nvshmem", "nccl"];
        let t = format_tables(&rows, &impls, false);
        let header = t.lines().nth(1).unwrap();
        assert!(
            header.contains("nvshmem-rs #wrong  nvshmem-rs algo  nvshmem time(us)"),
            "{t}"
        );
        assert!(
            !header.contains("nvshmem algo") && !header.contains("nccl algo"),
            "{t}"
        );
        let line = t.lines().nth(2).unwrap();
        assert!(line.contains("peer_kernel"), "{t}");
        let md = format_tables(&rows, &impls, true);
        assert!(
            md.contains("|---:|---:|---|---|---|---:|---:|---:|---:|---|---:|"),
            "{md}"
        );
        // No implementation with a choice, no column.
        let t = format_tables(&rows[1..], &impls[1..], false);
        assert!(!t.contains("algo"), "{t}");
    }

    /// What nvshmem-perf wrote on 2 x H200 on 2026-11-22 (graph mode, before rows named
    /// their algorithm), kept as a fixture.
    #[test]
    fn results_written_before_still_read() {
        let jsonl = include_str!("../tests/data/graph-2026-11-22.jsonl");
        let mut n = 0;
        for line in jsonl.lines() {
            let r: Row = serde_json::from_str(line).unwrap();
            assert_eq!(r.algo, "");
            assert_eq!(r.ok(), !r.time_us.is_nan(), "{line}");
            // The names of today's lists read them.
            assert!(crate::coll::parse(&r.collective).is_ok(), "{line}");
            if r.dtype != "-" {
                let d: nvshmem::DataType = r.dtype.parse().unwrap();
                assert_eq!(d.name(), r.dtype);
            }
            if !r.op.is_empty() {
                let op: nvshmem::ReduceOp = r.op.parse().unwrap();
                assert_eq!(op.to_string(), r.op);
            }
            n += 1;
        }
        assert!(n > 0);
        let csv = include_str!("../tests/data/graph-2026-11-22.csv");
        let rows: Vec<Row> = csv::Reader::from_reader(csv.as_bytes())
            .deserialize()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(rows.len(), n);
        // And what is written now reads back whole.
        let mut new = row("nvshmem-rs", 8, 4.0);
        new.op = "premul_sum(0.5)".into();
        let mut j = Vec::new();
        write_json(std::slice::from_ref(&new), &mut j).unwrap();
        let back: Row = serde_json::from_slice(&j).unwrap();
        assert_eq!(back, new);
    }

    #[test]
    fn wrong_rows_show_wrong_and_stay_out_of_ratios_and_averages() {
        // nvshmem-rs fast but wrong (the in-place fcollect of 2026-11 on 2 x H200), NCCL right.
        let mut wrong = row("nvshmem-rs", 1 << 20, 1.0);
        wrong.wrong = 4096;
        let right = row("nvshmem-rs", 8, 4.0);
        let rows = vec![
            wrong.clone(),
            row("nccl", 1 << 20, 10.0),
            right.clone(),
            row("nccl", 8, 2.0),
        ];
        assert!(wrong.is_wrong() && !wrong.counts());
        assert!(!right.is_wrong() && right.counts());
        let t = format_tables(&rows, &["nvshmem-rs", "nccl"], false);
        let line = t
            .lines()
            .find(|l| l.trim_start().starts_with("1048576 "))
            .unwrap();
        let cells: Vec<&str> = line.split_whitespace().collect();
        // size count type op root | time algbw busbw #wrong algo | nccl x4 | ratio
        assert_eq!(&cells[5..9], ["WRONG", "WRONG", "WRONG", "4096"], "{t}");
        assert!(
            !line.contains("1048.58"),
            "no bandwidth of a wrong row: {line}"
        );
        assert_eq!(
            *cells.last().unwrap(),
            "-",
            "no ratio for a wrong row: {line}"
        );
        let line8 = t
            .lines()
            .find(|l| l.trim_start().starts_with("8 "))
            .unwrap();
        assert!(line8.trim_end().ends_with("2.00"), "{line8}");
        // The average is the right row's alone; the wrong row counts in the wrong total.
        let avg = format!("avg busbw {:.2} GB/s", right.busbw_gbs);
        assert!(
            t.contains(&format!(
                "# nvshmem-rs: {avg}, 4096 wrong in 1 rows (WRONG)"
            )),
            "{t}"
        );
        let md = format_tables(&rows, &["nvshmem-rs", "nccl"], true);
        assert!(md.contains("| WRONG | WRONG | WRONG | 4096 |"), "{md}");
        // Every row wrong: no average at all.
        let t = format_tables(&rows[..2], &["nvshmem-rs", "nccl"], false);
        assert!(
            t.contains("# nvshmem-rs: avg busbw - GB/s, 4096 wrong in 1 rows"),
            "{t}"
        );

        assert_eq!(wrong_rows(&rows), [wrong.describe()]);
        assert_eq!(
            wrong.describe(),
            "nvshmem-rs all_reduce f32 sum algo auto, 1048576 B on 2 PEs: 4096 wrong elements"
        );
        // Unchecked (-1), skipped and right rows are not wrong.
        let mut skipped = row("nccl", 8, f64::NAN);
        skipped.status = "not here".into();
        skipped.wrong = 7;
        let mut unchecked = row("nccl", 8, 1.0);
        unchecked.wrong = -1;
        assert!(wrong_rows(&[skipped, unchecked, right]).is_empty());
    }

    #[test]
    fn a_journal_holds_each_row_as_soon_as_it_is_pushed() {
        let path =
            std::env::temp_dir().join(format!("nvshmem-perf-journal-{}.jsonl", std::process::id()));
        let rows = [row("nvshmem-rs", 8, 2.5), row("nccl", 8, 5.5)];
        let mut j = Journal::create(&path).unwrap();
        j.push(&rows[0]).unwrap();
        // Before the next row (and with the journal still open), the first is in the file.
        let mut first = Vec::new();
        write_json(&rows[..1], &mut first).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), first);
        j.push(&rows[1]).unwrap();
        drop(j);
        let mut both = Vec::new();
        write_json(&rows, &mut both).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), both);
        let _ = std::fs::remove_file(&path);
    }

    #[test]
    fn json_lines_and_csv() {
        let rows = vec![row("nccl", 8, 5.0), row("nvshmem", 8, 6.0)];
        let mut j = Vec::new();
        write_json(&rows, &mut j).unwrap();
        let j = String::from_utf8(j).unwrap();
        assert_eq!(j.lines().count(), 2);
        let v: serde_json::Value = serde_json::from_str(j.lines().next().unwrap()).unwrap();
        assert_eq!(v["implementation"], "nccl");
        assert_eq!(v["bytes"], 8);
        assert_eq!(v["time_us"], 5.0);
        let mut c = Vec::new();
        write_csv(&rows, &mut c).unwrap();
        let c = String::from_utf8(c).unwrap();
        let mut lines = c.lines();
        let header = lines.next().unwrap();
        assert!(header.starts_with("collective,implementation,algo,note,n_pes,bytes,count"));
        assert_eq!(lines.count(), 2);
    }
}
