//! A small hand-written SVG plot: for each collective, time (log-log) and busbw (log x)
//! against size, one line per implementation. Hand-written rather than plotters so the
//! binary needs no font or image libraries and the output is plain text that diffs well.
use std::fmt::Write as _;

use crate::report::Row;

const W: f64 = 460.0;
const H: f64 = 260.0;
const M: f64 = 55.0;
const COLORS: [&str; 6] = [
    "#d62728", "#1f77b4", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b",
];

/// An SVG document plotting `rows` (only measured rows with bytes > 0).
pub fn plot(rows: &[Row], impls: &[&str]) -> String {
    let mut colls: Vec<&str> = Vec::new();
    for r in rows.iter().filter(|r| r.ok() && r.bytes > 0) {
        if !colls.contains(&r.collective.as_str()) {
            colls.push(&r.collective);
        }
    }
    let total_h = (colls.len().max(1) as f64) * (H + 20.0) + 40.0;
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{}" height="{total_h}" font-family="sans-serif" font-size="11">"#,
        2.0 * W + 20.0
    );
    let _ = writeln!(s, r#"<rect width="100%" height="100%" fill="white"/>"#);
    for (k, i) in impls.iter().enumerate() {
        let x = 20.0 + k as f64 * 140.0;
        let c = COLORS[k % COLORS.len()];
        let _ = writeln!(
            s,
            r#"<line x1="{x}" y1="18" x2="{}" y2="18" stroke="{c}" stroke-width="2"/><text x="{}" y="22">{i}</text>"#,
            x + 20.0,
            x + 25.0
        );
    }
    for (ci, coll) in colls.iter().enumerate() {
        let y0 = 40.0 + ci as f64 * (H + 20.0);
        let pts = |imp: &str, f: &dyn Fn(&Row) -> f64| -> Vec<(f64, f64)> {
            let mut v: Vec<(f64, f64)> = rows
                .iter()
                .filter(|r| {
                    r.ok() && r.bytes > 0 && r.collective == *coll && r.implementation == imp
                })
                .map(|r| (r.bytes as f64, f(r)))
                .collect();
            v.sort_by(|a, b| a.0.total_cmp(&b.0));
            v
        };
        let series_t: Vec<Vec<(f64, f64)>> = impls.iter().map(|i| pts(i, &|r| r.time_us)).collect();
        let series_b: Vec<Vec<(f64, f64)>> =
            impls.iter().map(|i| pts(i, &|r| r.busbw_gbs)).collect();
        panel(
            &mut s,
            0.0,
            y0,
            &format!("{coll}: time (µs)"),
            &series_t,
            true,
        );
        panel(
            &mut s,
            W + 20.0,
            y0,
            &format!("{coll}: busbw (GB/s)"),
            &series_b,
            false,
        );
    }
    s.push_str("</svg>\n");
    s
}

fn panel(s: &mut String, x0: f64, y0: f64, title: &str, series: &[Vec<(f64, f64)>], log_y: bool) {
    let all: Vec<(f64, f64)> = series.iter().flatten().copied().collect();
    if all.is_empty() {
        return;
    }
    let (xmin, xmax) = bounds(all.iter().map(|p| p.0.log2()));
    let ty = |v: f64| if log_y { v.max(1e-3).log10() } else { v };
    let (mut ymin, ymax) = bounds(all.iter().map(|p| ty(p.1)));
    if !log_y {
        ymin = 0.0;
    }
    let (pw, ph) = (W - M - 10.0, H - M);
    let px = |x: f64| x0 + M + (x.log2() - xmin) / (xmax - xmin).max(1e-9) * pw;
    let py = |y: f64| y0 + 20.0 + ph - (ty(y) - ymin) / (ymax - ymin).max(1e-9) * ph;
    let _ = writeln!(
        s,
        r#"<text x="{}" y="{}" font-weight="bold">{}</text>"#,
        x0 + M,
        y0 + 12.0,
        esc(title)
    );
    let _ = writeln!(
        s,
        r##"<rect x="{}" y="{}" width="{pw}" height="{ph}" fill="none" stroke="#888"/>"##,
        x0 + M,
        y0 + 20.0
    );
    // x ticks at powers of 4 bytes
    let mut e = xmin.ceil() as i32;
    while f64::from(e) <= xmax {
        if e % 2 == 0 || xmax - xmin < 6.0 {
            let x = x0 + M + (f64::from(e) - xmin) / (xmax - xmin).max(1e-9) * pw;
            let _ = writeln!(
                s,
                r#"<text x="{x}" y="{}" text-anchor="middle">{}</text>"#,
                y0 + 20.0 + ph + 14.0,
                human(2f64.powi(e))
            );
        }
        e += 1;
    }
    for k in 0..=4 {
        let v = ymin + (ymax - ymin) * f64::from(k) / 4.0;
        let label = if log_y { 10f64.powf(v) } else { v };
        let y = y0 + 20.0 + ph - f64::from(k) / 4.0 * ph;
        let _ = writeln!(
            s,
            r#"<text x="{}" y="{}" text-anchor="end">{}</text>"#,
            x0 + M - 4.0,
            y + 4.0,
            short(label)
        );
    }
    for (k, pts) in series.iter().enumerate() {
        if pts.is_empty() {
            continue;
        }
        let p: Vec<String> = pts
            .iter()
            .map(|(x, y)| format!("{:.1},{:.1}", px(*x), py(*y)))
            .collect();
        let _ = writeln!(
            s,
            r#"<polyline fill="none" stroke="{}" stroke-width="1.5" points="{}"/>"#,
            COLORS[k % COLORS.len()],
            p.join(" ")
        );
    }
}

fn bounds(it: impl Iterator<Item = f64>) -> (f64, f64) {
    let (lo, hi) = it.fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), v| {
        (a.min(v), b.max(v))
    });
    if hi > lo {
        (lo, hi)
    } else {
        (lo - 1.0, hi + 1.0)
    }
}

fn human(b: f64) -> String {
    let b = b as u64;
    match b {
        _ if b >= 1 << 30 => format!("{}G", b >> 30),
        _ if b >= 1 << 20 => format!("{}M", b >> 20),
        _ if b >= 1 << 10 => format!("{}K", b >> 10),
        _ => b.to_string(),
    }
}

fn short(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 1.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

fn esc(t: &str) -> String {
    t.replace('&', "&amp;").replace('<', "&lt;")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::tests::row;

    #[test]
    fn plot_is_svg_with_a_line_per_implementation_and_panel() {
        let rows = vec![
            row("nvshmem", 8, 10.0),
            row("nvshmem", 1 << 20, 20.0),
            row("nccl", 8, 5.0),
            row("nccl", 1 << 20, 15.0),
        ];
        let s = plot(&rows, &["nvshmem", "nccl"]);
        assert!(s.starts_with("<svg"));
        assert!(s.trim_end().ends_with("</svg>"));
        assert_eq!(s.matches("<polyline").count(), 4);
        assert!(s.contains("all_reduce: busbw (GB/s)"));
        assert!(s.contains(">1M<"));
        assert!(!s.contains("NaN"));
    }

    #[test]
    fn empty_plot_is_valid() {
        let s = plot(&[], &["nccl"]);
        assert!(s.starts_with("<svg") && s.contains("</svg>"));
    }
}
