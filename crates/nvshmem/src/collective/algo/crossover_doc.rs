//! The crossover table ([`crossover::ROWS`]) as the documentation shows it: rendered into
//! `README.md` and `docs/performance.md` between marker comments, and checked by a test that
//! fails when either file differs from the table (`UPDATE_DOCS=1` rewrites them), so that no
//! threshold is written by hand anywhere but in the table.
//!
//! A new field of [`Row`] that readers should see is one more entry in [`COLUMNS`].
use std::ops::RangeInclusive;

use super::crossover::{self, Basis, Row};

/// The documents that show the table, relative to the workspace root.
const DOCS: [&str; 2] = ["README.md", "docs/performance.md"];
/// The markers around the rendered table in each document.
const BEGIN: &str = "<!-- crossover-table: generated from crates/nvshmem/src/collective/algo/crossover.rs; UPDATE_DOCS=1 cargo test -p nvshmem --lib crossover_doc rewrites it -->";
const END: &str = "<!-- crossover-table: end -->";

/// One column of the rendered table: its header and what a row shows in it.
struct Column {
    header: &'static str,
    cell: fn(&Row) -> String,
}

/// The columns, left to right.
const COLUMNS: &[Column] = &[
    Column {
        header: "collective",
        cell: |r| r.coll.name().to_string(),
    },
    Column {
        header: "PEs",
        cell: |r| match (r.pes.start(), r.pes.end()) {
            (a, b) if a == b => a.to_string(),
            (a, b) => format!("{a}-{b}"),
        },
    },
    Column {
        header: "GPU",
        cell: |r| r.arch.map_or("any".to_string(), |a| a.to_string()),
    },
    Column {
        header: "LL up to",
        cell: |r| size(r.ll),
    },
    Column {
        header: "Lamport (float reductions, copies)",
        cell: |r| band(&r.lamport),
    },
    Column {
        header: "direct kernels",
        cell: |r| {
            let band = band(&r.direct);
            if r.direct_where_nvshmem_lacks {
                format!("{band}; any size for reductions NVSHMEM lacks (fp8, avg, premul_sum)")
            } else {
                band
            }
        },
    },
    Column {
        header: "copy engines",
        cell: |r| band(&r.ce),
    },
    Column {
        header: "basis",
        cell: |r| match r.basis {
            Basis::Measured { .. } => "measured".to_string(),
            Basis::Assumed(_) => "not measured (conservative)".to_string(),
        },
    },
];

/// A block size in the units people read (`32 KiB`, `16 MiB`, `100 B`).
fn size(b: usize) -> String {
    const UNITS: [(&str, usize); 3] = [("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)];
    for (unit, n) in UNITS {
        if b >= n && b % n == 0 {
            return format!("{} {unit}", b / n);
        }
    }
    format!("{b} B")
}

/// A band of block sizes in words.
fn band(r: &RangeInclusive<usize>) -> String {
    let (lo, hi) = (*r.start(), *r.end());
    match (lo, hi) {
        _ if r.is_empty() => "never".to_string(),
        (0, usize::MAX) => "every size".to_string(),
        (0, hi) => format!("up to {}", size(hi)),
        (lo, usize::MAX) => format!("past {}", size(lo - 1)),
        // A band that starts at a power of two (the Lamport rows) reads from there.
        (lo, hi) if lo.is_power_of_two() => format!("{} to {}", size(lo), size(hi)),
        (lo, hi) => format!("past {}, up to {}", size(lo - 1), size(hi)),
    }
}

/// The table in Markdown, with the markers.
fn render(rows: &[Row]) -> String {
    let line = |cells: Vec<String>| format!("| {} |\n", cells.join(" | "));
    let mut s = format!("{BEGIN}\n\n");
    s += &line(COLUMNS.iter().map(|c| c.header.to_string()).collect());
    s += &line(COLUMNS.iter().map(|_| "---".to_string()).collect());
    for r in rows {
        s += &line(COLUMNS.iter().map(|c| (c.cell)(r)).collect());
    }
    s + "\n" + END
}

/// `doc` with what lies between its markers replaced by `table`; `None` without the markers.
fn splice(doc: &str, table: &str) -> Option<String> {
    let a = doc.find(BEGIN)?;
    let b = a + doc[a..].find(END)? + END.len();
    Some(format!("{}{table}{}", &doc[..a], &doc[b..]))
}

#[test]
fn the_docs_show_the_crossover_table() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let table = render(crossover::ROWS);
    let update = std::env::var_os("UPDATE_DOCS").is_some_and(|v| v == "1");
    let mut stale = Vec::new();
    for doc in DOCS {
        let path = root.join(doc);
        let text =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let fresh = splice(&text, &table)
            .unwrap_or_else(|| panic!("{doc} has no crossover-table markers ({BEGIN} ... {END})"));
        if fresh != text {
            if update {
                std::fs::write(&path, fresh).unwrap_or_else(|e| panic!("{doc}: {e}"));
            } else {
                stale.push(doc);
            }
        }
    }
    assert!(
        stale.is_empty(),
        "{stale:?} differ from the crossover table (crossover.rs): regenerate them with \
         `UPDATE_DOCS=1 cargo test -p nvshmem --lib crossover_doc`"
    );
}

#[test]
fn sizes_and_bands_read_as_words() {
    assert_eq!(size(32 << 10), "32 KiB");
    assert_eq!(size(16 << 20), "16 MiB");
    assert_eq!(size(1000), "1000 B");
    assert_eq!(band(&RangeInclusive::new(1, 0)), "never");
    assert_eq!(band(&(0..=usize::MAX)), "every size");
    assert_eq!(band(&(0..=16 << 20)), "up to 16 MiB");
    assert_eq!(band(&((256 << 10) + 1..=usize::MAX)), "past 256 KiB");
    assert_eq!(
        band(&((512 << 10) + 1..=16 << 20)),
        "past 512 KiB, up to 16 MiB"
    );
    // Every row renders with one cell a column, and a change to the table shows.
    let table = render(crossover::ROWS);
    assert_eq!(table.lines().count(), crossover::ROWS.len() + 6);
    assert_eq!(band(&(64 << 10..=1 << 20)), "64 KiB to 1 MiB");
    assert!(table.contains(
        "| all_reduce | 2 | sm_90 | 32 KiB | past 1 KiB, up to 2 MiB | past 256 KiB | never | measured |"
    ));
    let doc = format!("a\n{BEGIN}\nold\n{END}\nb\n");
    assert_eq!(splice(&doc, &table).unwrap(), format!("a\n{table}\nb\n"));
    assert!(splice("no markers", &table).is_none());
}
