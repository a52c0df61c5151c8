//! Plots of the results, drawn with plotters and written as SVG and PNG: one chart per
//! collective (per element type, operator and in-place setting, where a run has several),
//! each implementation a line: bus bandwidth against size (log scale), with the link's
//! ceiling as a dashed line, and beside it time against size, log-log.
//!
//! Nothing outside Rust is involved: plotters' SVG backend writes text, its bitmap backend
//! draws into a buffer that the `png` crate encodes, and text is laid out and rasterised by
//! `ab_glyph` (plotters' pure-Rust font feature) from DejaVu Sans, compiled in from the `dejavu`
//! crate, so neither fontconfig, freetype nor a system font is needed.
//!
//! `nvshmem-perf plot FILE.jsonl... --out DIR` draws saved results again, without a GPU.
use std::{
    ffi::OsString,
    ops::Range,
    path::{Path, PathBuf},
    process::ExitCode,
    sync::Once,
};

use anyhow::{anyhow, bail, Context, Result};
use clap::Parser;
use plotters::{
    coord::{types::RangedCoordf64, Shift},
    prelude::*,
    style::FontStyle,
};
use serde::Deserialize;

use crate::report::Row;

/// Width of an image, pixels.
const WIDTH: u32 = 1200;
/// Height of one collective's row of charts, pixels.
const ROW_HEIGHT: u32 = 380;
/// Line colours, by implementation in plotting order (nvshmem-rs, nvshmem, nccl, others).
const COLORS: [RGBColor; 8] = [
    RGBColor(0xd6, 0x27, 0x28),
    RGBColor(0x1f, 0x77, 0xb4),
    RGBColor(0x2c, 0xa0, 0x2c),
    RGBColor(0x94, 0x67, 0xbd),
    RGBColor(0xff, 0x7f, 0x0e),
    RGBColor(0x8c, 0x56, 0x4b),
    RGBColor(0xe3, 0x77, 0xc2),
    RGBColor(0x7f, 0x7f, 0x7f),
];
/// The font family every text is drawn in (registered once, from the `dejavu` crate).
const FONT: &str = "sans-serif";

/// One result row, as much of it as a plot needs: built from a [`Row`] or read back from the
/// JSON lines that `--json` writes.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Point {
    /// Collective name.
    pub collective: String,
    /// Implementation name.
    pub implementation: String,
    /// Element type.
    #[serde(default)]
    pub dtype: String,
    /// Operator, for reductions.
    #[serde(default)]
    pub op: String,
    /// Whether it ran in place.
    #[serde(default)]
    pub in_place: bool,
    /// PEs in the team.
    #[serde(default)]
    pub n_pes: usize,
    /// Whether the calls were replayed from a CUDA graph.
    #[serde(default)]
    pub graph: bool,
    /// nccl-tests' size, bytes.
    pub bytes: u64,
    /// Median µs per call (`null` in the JSON of a point that did not run).
    pub time_us: Option<f64>,
    /// Bus bandwidth, GB/s.
    #[serde(default)]
    pub busbw_gbs: f64,
    /// `ok`, or why the point was skipped.
    pub status: String,
    /// Wrong elements the check found (-1: not checked, also in files written before).
    #[serde(default = "not_checked")]
    pub wrong: i64,
}

fn not_checked() -> i64 {
    -1
}

impl From<&Row> for Point {
    fn from(r: &Row) -> Self {
        Point {
            collective: r.collective.clone(),
            implementation: r.implementation.clone(),
            dtype: r.dtype.clone(),
            op: r.op.clone(),
            in_place: r.in_place,
            n_pes: r.n_pes,
            graph: r.graph,
            bytes: r.bytes,
            time_us: Some(r.time_us),
            busbw_gbs: r.busbw_gbs,
            status: r.status.clone(),
            wrong: r.wrong,
        }
    }
}

impl Point {
    /// Whether the point can be drawn: measured, with a size and a time, and not found wrong
    /// (a wrong result's time and bandwidth are of something else than the collective).
    fn drawable(&self) -> bool {
        self.status == "ok"
            && self.wrong <= 0
            && self.bytes > 0
            && self.time_us.is_some_and(|t| t.is_finite() && t > 0.0)
            && self.busbw_gbs.is_finite()
    }
}

/// Reads the rows of a JSON-lines file written by `--json`.
pub fn read_jsonl(path: &Path) -> Result<Vec<Point>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            serde_json::from_str(l).with_context(|| format!("{} line {}", path.display(), i + 1))
        })
        .collect()
}

/// The points that share one chart: a collective with one type, operator and placement.
struct Group<'a> {
    title: String,
    points: Vec<&'a Point>,
}

fn groups(points: &[Point]) -> Vec<Group<'_>> {
    type Key<'a> = (&'a str, &'a str, &'a str, bool);
    let mut keyed: Vec<(Key<'_>, Vec<&Point>)> = Vec::new();
    for p in points.iter().filter(|p| p.drawable()) {
        let k = (
            p.collective.as_str(),
            p.dtype.as_str(),
            p.op.as_str(),
            p.in_place,
        );
        match keyed.iter_mut().find(|(g, _)| *g == k) {
            Some((_, v)) => v.push(p),
            None => keyed.push((k, vec![p])),
        }
    }
    keyed
        .into_iter()
        .map(|((coll, dtype, op, in_place), points)| {
            let mut title = format!("{coll}  {dtype}");
            if !op.is_empty() {
                title += &format!(" {op}");
            }
            if in_place {
                title += ", in place";
            }
            let n = points[0].n_pes;
            if n > 0 {
                title += &format!(", {n} PEs");
            }
            if points.iter().any(|p| p.graph) {
                title += ", CUDA graph";
            }
            Group { title, points }
        })
        .collect()
}

/// The implementations to draw, in legend and colour order: those of `preferred` that have
/// points, then any others in the order they first appear.
pub fn implementations(points: &[Point], preferred: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = preferred
        .iter()
        .filter(|i| points.iter().any(|p| p.implementation == **i))
        .map(|i| i.to_string())
        .collect();
    for p in points {
        if !v.contains(&p.implementation) {
            v.push(p.implementation.clone());
        }
    }
    v
}

/// Registers DejaVu Sans as plotters' sans-serif font (ab_glyph has no system fonts).
fn register_font() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // A failure (impossible for this font) shows as plotters' FontUnavailable error.
        let _ = plotters::style::register_font(FONT, FontStyle::Normal, dejavu::sans::regular());
    });
}

/// What to draw: the points, the implementations in order, the link ceiling (0: none).
struct Figure<'a> {
    groups: Vec<Group<'a>>,
    impls: &'a [String],
    ceiling: f64,
}

impl Figure<'_> {
    fn size(&self) -> (u32, u32) {
        (WIDTH, ROW_HEIGHT * self.groups.len().max(1) as u32)
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<()> {
        let err = |e: DrawingAreaErrorKind<DB::ErrorType>| anyhow!("drawing the plot: {e}");
        root.fill(&WHITE).map_err(err)?;
        if self.groups.is_empty() {
            root.draw(&Text::new(
                "no measured points with a size",
                (20, 20),
                (FONT, 16).into_font(),
            ))
            .map_err(err)?;
            return Ok(());
        }
        let rows = root.split_evenly((self.groups.len(), 1));
        for (area, g) in rows.iter().zip(&self.groups) {
            let (left, right) = area.split_horizontally(WIDTH / 2);
            self.busbw_chart(&left, g).map_err(err)?;
            self.time_chart(&right, g).map_err(err)?;
        }
        root.present().map_err(err)
    }

    /// The lines of one group: per implementation (with its colour), the sorted points.
    fn series(&self, g: &Group, y: fn(&Point) -> f64) -> Vec<(usize, Vec<(f64, f64)>)> {
        let mut out = Vec::new();
        for (k, imp) in self.impls.iter().enumerate() {
            let mut pts: Vec<(f64, f64)> = g
                .points
                .iter()
                .filter(|p| p.implementation == *imp)
                .map(|p| ((p.bytes as f64).log2(), y(p)))
                .collect();
            pts.sort_by(|a, b| a.0.total_cmp(&b.0));
            if !pts.is_empty() {
                out.push((k, pts));
            }
        }
        out
    }

    fn busbw_chart<DB: DrawingBackend>(
        &self,
        area: &DrawingArea<DB, Shift>,
        g: &Group,
    ) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
        let series = self.series(g, |p| p.busbw_gbs);
        let x = x_range(&series);
        let top = series
            .iter()
            .flat_map(|(_, s)| s.iter().map(|p| p.1))
            .fold(self.ceiling, f64::max);
        let mut chart = ChartBuilder::on(area)
            .caption(format!("{}: bus bandwidth", g.title), (FONT, 16))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d(x.clone(), 0f64..(top * 1.1).max(1.0))?;
        chart
            .configure_mesh()
            .x_desc("size (bytes)")
            .y_desc("busbw (GB/s)")
            .x_labels(x_label_count(&x))
            .x_label_formatter(&|v| size_label(*v))
            .y_label_formatter(&|v| number_label(*v))
            .max_light_lines(1)
            .label_style((FONT, 12))
            .axis_desc_style((FONT, 13))
            .draw()?;
        for (k, pts) in series {
            draw_line(&mut chart, k, &self.impls[k], pts)?;
        }
        if self.ceiling > 0.0 {
            let c = self.ceiling;
            chart
                .draw_series(DashedLineSeries::new(
                    vec![(x.start, c), (x.end, c)],
                    8,
                    5,
                    BLACK.stroke_width(1),
                ))?
                .label(format!("link ceiling {c} GB/s"))
                .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], BLACK));
        }
        // Bandwidth rises with size: the lower right is where the lines are not.
        legend(&mut chart, SeriesLabelPosition::LowerRight)
    }

    fn time_chart<DB: DrawingBackend>(
        &self,
        area: &DrawingArea<DB, Shift>,
        g: &Group,
    ) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
        // log10 of the time on a linear axis, labelled in µs: at the powers of ten where the
        // range has two or more, else at every tick.
        let series = self.series(g, |p| p.time_us.unwrap_or(f64::NAN).log10());
        let x = x_range(&series);
        let (lo, hi) = series
            .iter()
            .flat_map(|(_, s)| s.iter().map(|p| p.1))
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), v| {
                (a.min(v), b.max(v))
            });
        let y = lo - 0.1..hi + 0.1;
        let decades = (y.end.floor() - y.start.ceil()) as i64 + 1;
        let every = decades < 2;
        let mut chart = ChartBuilder::on(area)
            .caption(format!("{}: time", g.title), (FONT, 16))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d(x.clone(), y)?;
        chart
            .configure_mesh()
            .x_desc("size (bytes)")
            .y_desc("time (µs, log scale)")
            .x_labels(x_label_count(&x))
            .x_label_formatter(&|v| size_label(*v))
            .y_labels(if every { 6 } else { 2 * decades as usize + 1 })
            .y_label_formatter(&|v| time_label(*v, every))
            .max_light_lines(1)
            .label_style((FONT, 12))
            .axis_desc_style((FONT, 13))
            .draw()?;
        for (k, pts) in series {
            draw_line(&mut chart, k, &self.impls[k], pts)?;
        }
        legend(&mut chart, SeriesLabelPosition::UpperLeft)
    }
}

/// A chart: x the log2 of the size, y busbw or the log10 of the time.
type Chart<'a, DB> = ChartContext<'a, DB, Cartesian2d<RangedCoordf64, RangedCoordf64>>;

/// One implementation's line, with a dot at each point and a legend entry.
fn draw_line<'a, DB: DrawingBackend + 'a>(
    chart: &mut Chart<'a, DB>,
    k: usize,
    name: &str,
    pts: Vec<(f64, f64)>,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    let color = COLORS[k % COLORS.len()];
    chart.draw_series(pts.iter().map(|&p| Circle::new(p, 3, color.filled())))?;
    chart
        .draw_series(LineSeries::new(pts, color.stroke_width(2)))?
        .label(name)
        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2)));
    Ok(())
}

fn legend<'a, DB: DrawingBackend + 'a>(
    chart: &mut Chart<'a, DB>,
    position: SeriesLabelPosition,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    chart
        .configure_series_labels()
        .position(position)
        .label_font((FONT, 13))
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK.mix(0.4))
        .draw()
}

/// The x axis (log2 of the size) over every point, widened when there is one size only.
fn x_range(series: &[(usize, Vec<(f64, f64)>)]) -> Range<f64> {
    let (lo, hi) = series
        .iter()
        .flat_map(|(_, s)| s.iter().map(|p| p.0))
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), v| {
            (a.min(v), b.max(v))
        });
    if hi > lo {
        lo..hi
    } else {
        lo - 1.0..hi + 1.0
    }
}

/// Enough labels that plotters can put one on every second power of two, or every one when
/// the range is short.
fn x_label_count(x: &Range<f64>) -> usize {
    let span = (x.end - x.start).round() as usize;
    if span <= 12 {
        span + 1
    } else {
        span / 2 + 1
    }
}

/// A size label for an axis position (log2 of bytes): 8, 1K, 64M, ...; none between powers.
fn size_label(log2: f64) -> String {
    if (log2 - log2.round()).abs() > 1e-6 || log2 < 0.0 {
        return String::new();
    }
    let b = 1u64 << (log2.round() as u32).min(63);
    match b {
        _ if b >= 1 << 30 => format!("{}G", b >> 30),
        _ if b >= 1 << 20 => format!("{}M", b >> 20),
        _ if b >= 1 << 10 => format!("{}K", b >> 10),
        _ => b.to_string(),
    }
}

/// A time label for an axis position (log10 of µs): every one, or at powers of ten only.
fn time_label(log10: f64, every: bool) -> String {
    if every || (log10 - log10.round()).abs() < 1e-6 {
        number_label(10f64.powf(log10))
    } else {
        String::new()
    }
}

fn number_label(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 1.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

fn figure<'a>(points: &'a [Point], impls: &'a [String], ceiling: f64) -> Figure<'a> {
    register_font();
    Figure {
        groups: groups(points),
        impls,
        ceiling,
    }
}

/// The plot as an SVG document.
pub fn svg(points: &[Point], impls: &[String], ceiling: f64) -> Result<String> {
    let f = figure(points, impls, ceiling);
    let mut s = String::new();
    f.draw(&SVGBackend::with_string(&mut s, f.size()).into_drawing_area())?;
    Ok(s)
}

/// The plot as a PNG image.
pub fn png(points: &[Point], impls: &[String], ceiling: f64) -> Result<Vec<u8>> {
    let f = figure(points, impls, ceiling);
    let (w, h) = f.size();
    let mut rgb = vec![0u8; (w * h * 3) as usize];
    f.draw(&BitMapBackend::with_buffer(&mut rgb, (w, h)).into_drawing_area())?;
    let mut out = Vec::new();
    let mut enc = png::Encoder::new(&mut out, w, h);
    enc.set_color(png::ColorType::Rgb);
    enc.set_depth(png::BitDepth::Eight);
    enc.set_compression(png::Compression::High);
    let mut writer = enc.write_header().context("encoding the PNG")?;
    writer.write_image_data(&rgb).context("encoding the PNG")?;
    writer.finish().context("encoding the PNG")?;
    Ok(out)
}

/// Where `--plot FILE` puts the two images: FILE and FILE with the other extension
/// (`out.svg` and `out.png`; given `out.png`, `out.svg` beside it).
pub fn paths(file: &Path) -> (PathBuf, PathBuf) {
    if file
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("png"))
    {
        (file.with_extension("svg"), file.to_path_buf())
    } else {
        (file.to_path_buf(), file.with_extension("png"))
    }
}

/// Writes the plot of `points` as SVG and PNG; implementations in `preferred` order first.
pub fn write(
    points: &[Point],
    preferred: &[&str],
    ceiling: f64,
    svg_path: &Path,
    png_path: &Path,
) -> Result<()> {
    if !(ceiling.is_finite() && ceiling >= 0.0) {
        bail!("--ceiling {ceiling}: expected GB/s, 0 or more");
    }
    let impls = implementations(points, preferred);
    std::fs::write(svg_path, svg(points, &impls, ceiling)?)
        .with_context(|| format!("writing {}", svg_path.display()))?;
    std::fs::write(png_path, png(points, &impls, ceiling)?)
        .with_context(|| format!("writing {}", png_path.display()))?;
    Ok(())
}

/// The implementations of a run, in the order tables use.
const USUAL_ORDER: [&str; 3] = ["nvshmem-rs", "nvshmem", "nccl"];

/// `nvshmem-perf plot`: draws saved results again (no GPU, no NVSHMEM needed).
#[derive(Debug, Parser)]
#[command(
    name = "nvshmem-perf plot",
    bin_name = "nvshmem-perf plot",
    about = "Draw the results of earlier runs (their --json files) as SVG and PNG, without a GPU",
    after_help = "Each FILE.jsonl gives DIR/FILE.svg and DIR/FILE.png: one chart per \
collective, busbw and time against size, a line per implementation. With --into NAME, every \
file goes into the one pair DIR/NAME.svg and DIR/NAME.png (e.g. runs with an algorithm forced \
beside the automatic choice: `nvshmem-perf plot --into sweep auto.jsonl ll=ll.jsonl \
direct=direct.jsonl`)."
)]
pub struct PlotArgs {
    /// JSON-lines result files, as written by `--json`; NAME=FILE draws that file's
    /// implementations as NAME:IMPL (to tell runs of the same implementation apart).
    #[arg(value_name = "[NAME=]FILE.jsonl", required = true)]
    pub files: Vec<String>,

    /// Draw every file into one pair of plots, DIR/NAME.svg and DIR/NAME.png (DIR: --out, or
    /// the first file's folder).
    #[arg(long = "into", value_name = "NAME")]
    pub into: Option<String>,

    /// Folder for the plots (created if missing); default: beside each file.
    #[arg(short = 'o', long = "out", value_name = "DIR")]
    pub out: Option<PathBuf>,

    /// The link's bandwidth in GB/s, drawn as a dashed line on the busbw charts (0: none).
    #[arg(long = "ceiling", value_name = "GBPS", default_value_t = 0.0)]
    pub ceiling: f64,
}

/// Runs `nvshmem-perf plot ARGS` (`args` starts with `plot`).
pub fn main(args: impl IntoIterator<Item = OsString>) -> ExitCode {
    let args = PlotArgs::parse_from(args);
    match plot_files(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("nvshmem-perf plot: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn plot_files(args: &PlotArgs) -> Result<()> {
    if let Some(dir) = &args.out {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    // With --into: every file's points, and the folder of the first.
    let (mut together, mut together_dir) = (Vec::new(), None);
    for spec in &args.files {
        let (name, path) = crate::summary::named(spec);
        let file = Path::new(path);
        let mut points = read_jsonl(file)?;
        if !name.is_empty() {
            for p in &mut points {
                p.implementation = format!("{name}:{}", p.implementation);
            }
        }
        let dir = match &args.out {
            Some(d) => d.clone(),
            None => file.parent().map(Path::to_path_buf).unwrap_or_default(),
        };
        if args.into.is_some() {
            together_dir.get_or_insert(dir);
            together.extend(points);
            continue;
        }
        let stem = file
            .file_stem()
            .ok_or_else(|| anyhow!("{}: no file name", file.display()))?;
        draw(
            &points,
            args.ceiling,
            &dir.join(stem),
            &file.display().to_string(),
        )?;
    }
    if let Some(into) = &args.into {
        draw(
            &together,
            args.ceiling,
            &together_dir.unwrap_or_default().join(into),
            &format!("{} files", args.files.len()),
        )?;
    }
    Ok(())
}

/// Writes `base`.svg and `base`.png of `points` and says so (`what`: where they came from).
fn draw(points: &[Point], ceiling: f64, base: &Path, what: &str) -> Result<()> {
    let (svg_path, png_path) = paths(&base.with_extension("svg"));
    write(points, &USUAL_ORDER, ceiling, &svg_path, &png_path)?;
    println!(
        "{what}: {} rows -> {}, {}",
        points.len(),
        svg_path.display(),
        png_path.display()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::{tests::row, write_json};

    /// A folder of its own under the system's temporary folder, removed when dropped.
    struct TempDir(PathBuf);
    impl TempDir {
        fn new(name: &str) -> Self {
            let p = std::env::temp_dir().join(format!(
                "nvshmem-perf-{name}-{}-{:?}",
                std::process::id(),
                std::time::SystemTime::now()
            ));
            std::fs::create_dir_all(&p).unwrap();
            TempDir(p)
        }
    }
    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    /// The text of every `<text>` element of an SVG document, trimmed.
    fn texts(svg: &str) -> Vec<String> {
        svg.split("<text")
            .skip(1)
            .filter_map(|t| {
                let body = t.split_once('>')?.1.split_once("</text>")?.0;
                Some(body.trim().to_string())
            })
            .collect()
    }

    fn rows() -> Vec<Row> {
        let mut v = Vec::new();
        for (imp, scale) in [
            ("nvshmem-rs", 1.0),
            ("nvshmem", 1.05),
            ("nccl", 0.9),
            ("mscclpp", 1.2),
        ] {
            for bytes in [8u64, 1 << 10, 1 << 20, 128 << 20] {
                v.push(row(imp, bytes, scale * (5.0 + bytes as f64 / 300e3)));
                let mut b = row(imp, bytes, scale * (4.0 + bytes as f64 / 350e3));
                b.collective = "broadcast".into();
                v.push(b);
            }
        }
        let mut skipped = row("nccl", 8, f64::NAN);
        skipped.collective = "reduce".into();
        skipped.status = "not here".into();
        v.push(skipped);
        v
    }

    #[test]
    fn svg_and_png_files_name_every_implementation() {
        let dir = TempDir::new("plot");
        let points: Vec<Point> = rows().iter().map(Point::from).collect();
        let (svg_path, png_path) = paths(&dir.0.join("out.svg"));
        write(&points, &USUAL_ORDER, 361.0, &svg_path, &png_path).unwrap();

        let svg = std::fs::read_to_string(&svg_path).unwrap();
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        assert!(!svg.contains("NaN"));
        let texts = texts(&svg);
        let has = |t: &str| texts.iter().any(|x| x == t);
        for name in ["nvshmem-rs", "nvshmem", "nccl", "mscclpp"] {
            // In the legend of each of the four charts.
            let n = texts.iter().filter(|x| *x == name).count();
            assert_eq!(n, 4, "{name} in {n} legends, not 4: {texts:?}");
        }
        // One chart per collective, busbw and time; the skipped collective has none.
        assert!(
            has("all_reduce  f32 sum, 2 PEs: bus bandwidth"),
            "{texts:?}"
        );
        assert!(has("broadcast  f32 sum, 2 PEs: time"));
        assert!(!texts.iter().any(|t| t.starts_with("reduce ")));
        assert!(has("link ceiling 361 GB/s"));
        assert!(has("64M") && has("1K") && has("size (bytes)"));

        let png = std::fs::read(&png_path).unwrap();
        assert!(png.len() > 10_000, "PNG of {} bytes", png.len());
        assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
        let (w, h) = (
            u32::from_be_bytes(png[16..20].try_into().unwrap()),
            u32::from_be_bytes(png[20..24].try_into().unwrap()),
        );
        assert_eq!((w, h), (WIDTH, 2 * ROW_HEIGHT));
    }

    #[test]
    fn saved_json_lines_plot_like_the_run() {
        let rows = rows();
        let dir = TempDir::new("replot");
        let file = dir.0.join("run.jsonl");
        write_json(&rows, std::fs::File::create(&file).unwrap()).unwrap();
        let read = read_jsonl(&file).unwrap();
        assert_eq!(read.len(), rows.len());
        assert_eq!(read[0], Point::from(&rows[0]));
        assert_eq!(read.last().unwrap().time_us, None); // NaN was written as null

        let out = dir.0.join("plots");
        let args = PlotArgs::try_parse_from([
            "plot",
            file.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
            "--ceiling",
            "361",
        ])
        .unwrap();
        plot_files(&args).unwrap();
        let impls = implementations(&read, &USUAL_ORDER);
        assert_eq!(impls, ["nvshmem-rs", "nvshmem", "nccl", "mscclpp"]);
        assert_eq!(
            std::fs::read_to_string(out.join("run.svg")).unwrap(),
            svg(&read, &impls, 361.0).unwrap()
        );
        assert!(std::fs::metadata(out.join("run.png")).unwrap().len() > 0);
    }

    /// Named files draw their implementations as NAME:IMPL, and --into puts every file into
    /// one pair of plots.
    #[test]
    fn named_files_plot_into_one_chart_set() {
        let dir = TempDir::new("into");
        let auto = dir.0.join("auto.jsonl");
        let forced = dir.0.join("ll.jsonl");
        write_json(&rows(), std::fs::File::create(&auto).unwrap()).unwrap();
        write_json(
            &[row("nvshmem-rs", 1 << 10, 3.0)],
            std::fs::File::create(&forced).unwrap(),
        )
        .unwrap();
        let args = PlotArgs::try_parse_from([
            "plot",
            "--into",
            "sweep",
            auto.to_str().unwrap(),
            &format!("ll={}", forced.to_str().unwrap()),
        ])
        .unwrap();
        plot_files(&args).unwrap();
        let texts = texts(&std::fs::read_to_string(dir.0.join("sweep.svg")).unwrap());
        assert!(texts.iter().any(|t| t == "ll:nvshmem-rs"), "{texts:?}");
        assert!(texts.iter().any(|t| t == "nccl"));
        assert!(dir.0.join("sweep.png").exists());
        assert!(!dir.0.join("auto.svg").exists() && !dir.0.join("ll.svg").exists());
    }

    /// A wrong row (the in-place fcollect of 2026-11 at 614 GB/s, far above the link) is
    /// drawn nowhere: not as a point, not as the top of the axis.
    #[test]
    fn wrong_rows_are_not_drawn() {
        let mut rows = rows();
        let mut wrong = row("nvshmem-rs", 64 << 20, 100.0);
        wrong.collective = "fcollect".into();
        wrong.busbw_gbs = 614.0;
        wrong.wrong = 1 << 20;
        let mut fast_wrong = row("nvshmem-rs", 128 << 20, 1.0);
        fast_wrong.wrong = 1;
        rows.extend([wrong, fast_wrong]);
        let points: Vec<Point> = rows.iter().map(Point::from).collect();
        let n = points.len();
        assert!(!points[n - 1].drawable() && !points[n - 2].drawable());
        assert!(points[0].drawable());
        let drawn: Vec<&Point> = groups(&points).into_iter().flat_map(|g| g.points).collect();
        assert!(drawn.iter().all(|p| p.wrong <= 0));
        assert_eq!(drawn.len(), points.iter().filter(|p| p.drawable()).count());
        let texts = texts(&svg(&points, &implementations(&points, &USUAL_ORDER), 0.0).unwrap());
        assert!(
            !texts.iter().any(|t| t.starts_with("fcollect")),
            "{texts:?}"
        );
        // Read back from JSON lines, the field keeps them out as well; older files have none.
        let mut j = Vec::new();
        write_json(&rows, &mut j).unwrap();
        let back: Point =
            serde_json::from_str(std::str::from_utf8(&j).unwrap().lines().last().unwrap()).unwrap();
        assert_eq!(back.wrong, 1);
        assert!(!back.drawable());
        let old: Point = serde_json::from_str(
            r#"{"collective":"all_reduce","implementation":"nccl","bytes":8,"time_us":1.0,"busbw_gbs":0.1,"status":"ok"}"#,
        )
        .unwrap();
        assert_eq!(old.wrong, -1);
        assert!(old.drawable());
    }

    #[test]
    fn nothing_to_draw_is_still_an_image() {
        let s = svg(&[], &[], 0.0).unwrap();
        assert!(s.starts_with("<svg"));
        assert_eq!(texts(&s), ["no measured points with a size"]);
        assert!(!png(&[], &[], 0.0).unwrap().is_empty());
        let dir = TempDir::new("bad");
        assert!(write(&[], &[], -1.0, &dir.0.join("a.svg"), &dir.0.join("a.png")).is_err());
    }

    #[test]
    fn labels_and_paths() {
        assert_eq!(size_label(3.0), "8");
        assert_eq!(size_label(10.0), "1K");
        assert_eq!(size_label(27.0), "128M");
        assert_eq!(size_label(31.0), "2G");
        assert_eq!(size_label(3.5), "");
        assert_eq!(
            paths(Path::new("d/out.svg")),
            ("d/out.svg".into(), "d/out.png".into())
        );
        assert_eq!(
            paths(Path::new("d/out.png")),
            ("d/out.svg".into(), "d/out.png".into())
        );
    }
}
