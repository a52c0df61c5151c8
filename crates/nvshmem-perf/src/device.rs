//! `nvshmem-perf device`: device-initiated put latency and bandwidth, and a put-with-signal
//! ping-pong, in the manner of NVSHMEM's perftest (`shmem_put_latency`, `shmem_put_bw`). The
//! kernels (kernels/device_perf.cu) run as nvshmem::device builds them, by both routes
//! (`rdc`, `lto`), and, given `--reference`, as nvcc built the same source against NVSHMEM the
//! usual way (`-rdc=true`, linked with libnvshmem_device.a): every variant in this one process,
//! timed alike (CUDA events around one launch of many iterations, the median of `--reps`), so
//! the table's ratios compare the builds and nothing else.
//!
//! PE 0 puts to PE 1 (to itself when alone); the ping-pong runs between PE 0 and PE 1; the
//! other PEs only join the barriers. With PEs sharing one GPU (MPS) the figures are
//! same-GPU copies, not NVLink ones.
use std::ffi::OsString;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::Parser;
use cudarc::driver::{sys::CUevent_flags, CudaStream, LaunchConfig};
use nvshmem::device::{Args as KArgs, DeviceImage, DeviceModule, DeviceSource, Route};
use nvshmem::{Runtime, SymArray};

/// The kernels, as the repository keeps them (the nvcc reference compiles the same file).
pub const SOURCE: &str = include_str!("../kernels/device_perf.cu");

/// nvshmem-perf device: device-initiated put latency, bandwidth and put-with-signal
/// round trip, ours beside an nvcc-built reference.
#[derive(Debug, Parser)]
#[command(name = "nvshmem-perf device")]
struct DeviceArgs {
    /// The same kernels built by nvcc and nvlink against NVSHMEM (a linked cubin).
    #[arg(long)]
    reference: Option<std::path::PathBuf>,
    /// As --reference, but relocatable (`nvcc -rdc=true -cubin`): linked here with nvJitLink.
    #[arg(long, conflicts_with = "reference")]
    reference_relocatable: Option<std::path::PathBuf>,
    /// Iterations inside each latency and ping-pong launch.
    #[arg(long, default_value_t = 500)]
    iters: i32,
    /// Iterations inside each bandwidth launch.
    #[arg(long, default_value_t = 20)]
    bw_iters: i32,
    /// Timed launches per point; the table reports their median.
    #[arg(long, default_value_t = 5)]
    reps: usize,
    /// Blocks of the bandwidth kernel.
    #[arg(long, default_value_t = 32)]
    bw_blocks: u32,
    /// Threads per block of the block-scoped kernels.
    #[arg(long, default_value_t = 512)]
    threads: u32,
    /// Also write every point as JSON lines here.
    #[arg(long)]
    json: Option<std::path::PathBuf>,
    /// Which of our builds to run: rdc, lto (comma-separated).
    #[arg(long, default_value = "rdc,lto", value_parser = parse_routes)]
    routes: Routes,
}

/// The routes `--routes` names.
#[derive(Debug, Clone)]
struct Routes(Vec<Route>);

fn parse_routes(s: &str) -> Result<Routes, String> {
    s.split(',')
        .filter(|r| !r.trim().is_empty())
        .map(|r| match r.trim() {
            "rdc" => Ok(Route::Relocatable),
            "lto" => Ok(Route::Lto),
            other => Err(format!("unknown route {other:?}: expected rdc or lto")),
        })
        .collect::<Result<Vec<_>, _>>()
        .map(Routes)
}

/// One build of the kernels.
struct Variant {
    name: String,
    module: DeviceModule,
}

/// Entry point of `nvshmem-perf device ...` (`args` starts with `device`).
pub fn main(args: impl Iterator<Item = OsString>) -> std::process::ExitCode {
    let args = DeviceArgs::parse_from(args);
    match run(&args) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("nvshmem-perf device: error: {e:#}");
            std::process::exit(1)
        }
    }
}

fn run(args: &DeviceArgs) -> Result<()> {
    if args.iters < 1 || args.bw_iters < 1 || args.reps == 0 || args.bw_blocks == 0 {
        bail!("--iters, --bw-iters, --reps and --bw-blocks must be at least 1");
    }
    let rt = Runtime::init().context("starting NVSHMEM")?;
    let (me, n) = (rt.my_pe(), rt.n_pes());
    let lead = me == 0;
    let peer = if n > 1 { 1 } else { 0 };
    let stream = rt.context().new_stream()?;
    let arch = {
        let (major, minor) = rt.context().compute_capability()?;
        format!("sm_{major}{minor}")
    };

    let mut variants = Vec::new();
    for &route in &args.routes.0 {
        let image = DeviceSource::new("device_perf", SOURCE)
            .route(route)
            .build(&arch)
            .with_context(|| format!("building the kernels ({})", route.name()))?;
        let t = image.times();
        if lead {
            println!(
                "# ours-{}: {} bytes, {}",
                route.name(),
                image.cubin().len(),
                if t.cached {
                    "from the kernel cache".to_string()
                } else {
                    format!(
                        "NVRTC {:.2} s + nvJitLink {:.3} s",
                        t.compile.as_secs_f64(),
                        t.link.as_secs_f64()
                    )
                }
            );
        }
        variants.push(Variant {
            name: format!("ours-{}", route.name()),
            module: DeviceModule::load(&rt, &image)?,
        });
    }
    let reference = match (&args.reference, &args.reference_relocatable) {
        (Some(p), _) => Some(DeviceImage::from_linked_cubin(
            "nvcc",
            arch.clone(),
            std::fs::read(p).with_context(|| format!("reading {}", p.display()))?,
        )),
        (_, Some(p)) => Some(DeviceImage::link_relocatable(
            "nvcc",
            &arch,
            &std::fs::read(p).with_context(|| format!("reading {}", p.display()))?,
        )?),
        _ => None,
    };
    if let Some(image) = reference {
        if lead {
            println!(
                "# nvcc: {} bytes ({})",
                image.cubin().len(),
                if args.reference.is_some() {
                    "nvcc -rdc=true, nvlink with libnvshmem_device.a"
                } else {
                    "nvcc -rdc=true, linked here by nvJitLink with libnvshmem_device.a"
                }
            );
        }
        variants.push(Variant {
            name: "nvcc".into(),
            module: DeviceModule::load(&rt, &image)?,
        });
    }

    let max_bytes = 64usize << 20;
    let mut data = rt.alloc_zeroed::<u8>(max_bytes)?;
    let mut sig = rt.alloc_zeroed::<u64>(1)?;
    let mut rows: Vec<Row> = Vec::new();
    let one = |threads: u32, blocks: u32| LaunchConfig {
        grid_dim: (blocks, 1, 1),
        block_dim: (threads, 1, 1),
        shared_mem_bytes: 0,
    };

    // Latency: one thread (messages up to 4 KiB: one thread copies 1 MiB in about 6 ms), then
    // one block, `iters` put + quiet each (a tenth of them from 64 KiB on).
    let thread_sizes = [8usize, 64, 512, 4 << 10];
    let block_sizes = [8usize, 64, 512, 4 << 10, 32 << 10, 256 << 10, 1 << 20];
    for (kernel, threads, sizes) in [
        ("put_latency_thread", 1, &thread_sizes[..]),
        ("put_latency_block", args.threads, &block_sizes[..]),
    ] {
        for &bytes in sizes {
            let iters = if bytes >= 64 << 10 {
                (args.iters / 10).max(1)
            } else {
                args.iters
            };
            let mut row = Row::new(kernel, bytes, "us");
            for v in &variants {
                progress(lead, kernel, bytes, &v.name);
                let k = v.module.kernel(kernel)?;
                let t = time(&rt, &stream, args.reps, lead, |s| {
                    let a = KArgs::new()
                        .ptr_mut(&mut data)
                        .value(bytes as u64)
                        .value(peer as i32)
                        .value(iters);
                    // SAFETY: (char*, size_t, int, int): puts `bytes` (at most the array's
                    // length) of `data` to the same place on `peer`, which allocated it alike.
                    unsafe { k.launch(one(threads, 1), s, a) }?;
                    Ok(())
                })?;
                row.push(&v.name, t.map(|d| d.as_secs_f64() * 1e6 / iters as f64));
            }
            rows.push(row);
        }
    }
    // Bandwidth: `bw_blocks` blocks each put their share `bw_iters` times.
    for bytes in [
        64usize << 10,
        256 << 10,
        1 << 20,
        4 << 20,
        16 << 20,
        64 << 20,
    ] {
        let mut row = Row::new("put_bw", bytes, "GB/s");
        for v in &variants {
            progress(lead, "put_bw", bytes, &v.name);
            let k = v.module.kernel("put_bw")?;
            let t = time(&rt, &stream, args.reps, lead, |s| {
                let a = KArgs::new()
                    .ptr_mut(&mut data)
                    .value(bytes as u64)
                    .value(peer as i32)
                    .value(args.bw_iters);
                // SAFETY: as above; each block puts bytes / blocks of its own part.
                unsafe { k.launch(one(args.threads, args.bw_blocks), s, a) }?;
                Ok(())
            })?;
            row.push(
                &v.name,
                t.map(|d| bytes as f64 * args.bw_iters as f64 / d.as_secs_f64() / 1e9),
            );
        }
        rows.push(row);
    }
    // Put-with-signal round trip between PE 0 and `peer`.
    for bytes in [8usize, 512, 4 << 10] {
        let mut row = Row::new("put_signal_ping_pong", bytes, "us");
        for v in &variants {
            progress(lead, "put_signal_ping_pong", bytes, &v.name);
            let k = v.module.kernel("put_signal_ping_pong")?;
            let player = me == 0 || me == peer;
            let t = time_pingpong(&rt, &stream, args.reps, player, lead, &mut sig, |s, sig| {
                let a = KArgs::new()
                    .ptr_mut(&mut data)
                    .value(bytes as u64)
                    .ptr(sig)
                    .value(if me == 0 { peer as i32 } else { 0 })
                    .value(args.iters);
                // SAFETY: (char*, size_t, uint64_t*, int, int): PE 0 and `peer` put `bytes`
                // of `data` and signal word 0 to each other; both launch it, collectively.
                unsafe { k.launch_collective(one(1, 1), s, a) }?;
                Ok(())
            })?;
            row.push(
                &v.name,
                t.map(|d| d.as_secs_f64() * 1e6 / args.iters as f64),
            );
        }
        rows.push(row);
    }

    if lead {
        print_table(&rows, n);
        if let Some(path) = &args.json {
            let mut out = String::new();
            for r in &rows {
                for (name, v) in &r.values {
                    out.push_str(&format!(
                        "{{\"test\":\"{}\",\"bytes\":{},\"variant\":\"{}\",\"{}\":{},\"pes\":{}}}\n",
                        r.test,
                        r.bytes,
                        name,
                        r.unit.replace('/', "_per_"),
                        v.map_or("null".into(), |x| format!("{x:.4}")),
                        n
                    ));
                }
            }
            std::fs::write(path, out).with_context(|| format!("writing {}", path.display()))?;
        }
    }
    rt.barrier_all(&stream)?;
    stream.synchronize()?;
    Ok(())
}

/// One point of the table: each variant's median.
struct Row {
    test: &'static str,
    bytes: usize,
    unit: &'static str,
    values: Vec<(String, Option<f64>)>,
}

impl Row {
    fn new(test: &'static str, bytes: usize, unit: &'static str) -> Self {
        Row {
            test,
            bytes,
            unit,
            values: Vec::new(),
        }
    }
    fn push(&mut self, name: &str, v: Option<f64>) {
        self.values.push((name.to_string(), v));
    }
}

/// Times `launch` on PE 0 (the others only join the barriers): a warm-up launch, then `reps`
/// launches each between two events; the median on PE 0, `None` elsewhere.
fn time(
    rt: &Runtime,
    stream: &Arc<CudaStream>,
    reps: usize,
    lead: bool,
    mut launch: impl FnMut(&Arc<CudaStream>) -> Result<()>,
) -> Result<Option<Duration>> {
    let mut samples = Vec::new();
    for rep in 0..=reps {
        rt.barrier_all(stream)?;
        if lead {
            let start = stream.record_event(Some(CUevent_flags::CU_EVENT_DEFAULT))?;
            launch(stream)?;
            let end = stream.record_event(Some(CUevent_flags::CU_EVENT_DEFAULT))?;
            let ms = start.elapsed_ms(&end)?;
            if rep > 0 {
                samples.push(ms as f64);
            }
        }
        stream.synchronize()?;
    }
    Ok(lead.then(|| Duration::from_secs_f64(median(&mut samples) / 1e3)))
}

/// As [`time`], for the ping-pong, which PE 0 and its peer (`player`) both launch, with the
/// signal word zeroed on every PE before each launch.
fn time_pingpong(
    rt: &Runtime,
    stream: &Arc<CudaStream>,
    reps: usize,
    player: bool,
    lead: bool,
    sig: &mut SymArray<u64>,
    mut launch: impl FnMut(&Arc<CudaStream>, &SymArray<u64>) -> Result<()>,
) -> Result<Option<Duration>> {
    let mut samples = Vec::new();
    for rep in 0..=reps {
        sig.copy_from_host(&[0])?;
        rt.barrier_all(stream)?;
        let start = stream.record_event(Some(CUevent_flags::CU_EVENT_DEFAULT))?;
        if player {
            launch(stream, sig)?;
        }
        let end = stream.record_event(Some(CUevent_flags::CU_EVENT_DEFAULT))?;
        let ms = start.elapsed_ms(&end)?;
        if rep > 0 && lead {
            samples.push(ms as f64);
        }
        rt.barrier_all(stream)?;
        stream.synchronize()?;
    }
    Ok(lead.then(|| Duration::from_secs_f64(median(&mut samples) / 1e3)))
}

/// Says on stderr which point runs now, so a log shows where a run stopped.
fn progress(lead: bool, test: &str, bytes: usize, variant: &str) {
    if lead {
        eprintln!("[device] {test} {} {variant}", size(bytes));
    }
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn size(bytes: usize) -> String {
    match bytes {
        b if b >= 1 << 20 => format!("{}M", b >> 20),
        b if b >= 1 << 10 => format!("{}K", b >> 10),
        b => b.to_string(),
    }
}

fn print_table(rows: &[Row], n: usize) {
    let names: Vec<&str> = rows[0].values.iter().map(|(n, _)| n.as_str()).collect();
    let reference = names.iter().position(|&n| n == "nvcc");
    println!("# device-initiated, {n} PEs; latency and round trip in us (lower is better), bandwidth in GB/s");
    let mut header = format!("{:<22} {:>6} {:>6}", "test", "bytes", "unit");
    for name in &names {
        header.push_str(&format!(" {name:>10}"));
    }
    if reference.is_some() {
        for name in names.iter().filter(|&&n| n != "nvcc") {
            header.push_str(&format!(" {:>12}", format!("{name}/nvcc")));
        }
    }
    println!("{header}");
    for r in rows {
        let mut line = format!("{:<22} {:>6} {:>6}", r.test, size(r.bytes), r.unit);
        for (_, v) in &r.values {
            line.push_str(&match v {
                Some(x) => format!(" {x:>10.3}"),
                None => format!(" {:>10}", "-"),
            });
        }
        if let Some(ri) = reference {
            let base = r.values[ri].1;
            for (i, (_, v)) in r.values.iter().enumerate() {
                if i == ri {
                    continue;
                }
                line.push_str(&match (v, base) {
                    (Some(x), Some(b)) if b > 0.0 => format!(" {:>12.3}", x / b),
                    _ => format!(" {:>12}", "-"),
                });
            }
        }
        println!("{line}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_print_short() {
        assert_eq!(size(8), "8");
        assert_eq!(size(4096), "4K");
        assert_eq!(size(64 << 20), "64M");
    }

    #[test]
    fn the_median_is_the_middle_sample() {
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&mut [5.0]), 5.0);
    }

    #[test]
    fn device_arguments_parse() {
        let a = DeviceArgs::parse_from(["device", "--reference", "r.cubin", "--iters", "10"]);
        assert_eq!(a.iters, 10);
        assert!(a.reference.is_some());
        assert!(DeviceArgs::try_parse_from([
            "device",
            "--reference",
            "a",
            "--reference-relocatable",
            "b"
        ])
        .is_err());
    }
}
