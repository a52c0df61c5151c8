//! Command-line interface. Flags follow nccl-tests where it has one (`-b -e -f -i -n -w -c -d
//! -o -r -G -C`); see `nvshmem-perf --help`.
use clap::{Parser, ValueEnum};

use crate::{coll::Collective, dtype::DType, dtype::RedOp};

/// The implementations that can be compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, ValueEnum, serde::Serialize)]
pub enum ImplKind {
    /// This library's safe collectives (`Team::all_reduce` and friends).
    #[value(name = "nvshmem-rs")]
    #[serde(rename = "nvshmem-rs")]
    NvshmemRs,
    /// NVSHMEM's `nvshmemx_*_on_stream` called raw through `nvshmem-sys`.
    #[value(name = "nvshmem")]
    #[serde(rename = "nvshmem")]
    Nvshmem,
    /// NCCL's C API, loaded at run time.
    #[value(name = "nccl")]
    #[serde(rename = "nccl")]
    Nccl,
}

impl ImplKind {
    /// The name in tables and files.
    pub fn name(self) -> &'static str {
        match self {
            ImplKind::NvshmemRs => "nvshmem-rs",
            ImplKind::Nvshmem => "nvshmem",
            ImplKind::Nccl => "nccl",
        }
    }
}

/// The team collectives run over.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum TeamKind {
    /// Every PE.
    World,
    /// The PEs that can load and store each other's memory.
    Shared,
    /// The PEs of this node.
    Node,
}

const AFTER_HELP: &str = "\
Launch one process per GPU, like any nvshmem-rs program:
  mpirun -np 2 -x NVSHMEM_DISABLE_NVLS=1 -x NCCL_NVLS_ENABLE=0 \\
      nvshmem-perf all_reduce broadcast -b 8 -e 256M -f 2 --json out.jsonl

Sizes take K, M, G suffixes (powers of 1024). A size is nccl-tests' size: the larger of one
PE's input and output in bytes; for fcollect/alltoall/reduce_scatter/gather/scatter it is
rounded down to whole elements per PE. busbw uses nccl-tests' factors: all_reduce 2(n-1)/n;
reduce_scatter, fcollect, alltoall, gather, scatter (n-1)/n; broadcast, reduce 1.

Spelling differences from nccl-tests: collectives are positional (or --collective), because
-c is nccl-tests' check flag and keeps that meaning here. -G and -C take an optional 0/1.

NCCL has no barrier: its barrier row is a one-element f32 all-reduce (marked in the table).
NCCL is looked up in --nccl-lib, $NCCL_LIBRARY, $NCCL_HOME/lib, the loader path, then the
Python wheel nvidia-nccl-cu13 (site-packages/nvidia/nccl/lib); if none loads, the nccl
implementation is reported as skipped.";

/// Barrier and collective microbenchmark: nvshmem-rs, raw NVSHMEM and NCCL side by side.
#[derive(Debug, Parser)]
#[command(name = "nvshmem-perf", version, after_help = AFTER_HELP, args_override_self = true)]
pub struct Args {
    /// Collectives to run (comma or space separated, or `all`): barrier, sync, all_reduce,
    /// broadcast, fcollect (all_gather), alltoall, reduce_scatter, reduce, gather, scatter.
    #[arg(value_name = "COLLECTIVE")]
    pub positional: Vec<String>,

    /// Same as the positional collectives.
    #[arg(long = "collective", alias = "coll", value_name = "LIST")]
    pub collective: Vec<String>,

    /// Smallest size in bytes (K/M/G suffixes).
    #[arg(short = 'b', long = "minbytes", default_value = "8", value_parser = parse_size)]
    pub min_bytes: u64,

    /// Largest size in bytes (K/M/G suffixes).
    #[arg(short = 'e', long = "maxbytes", default_value = "128M", value_parser = parse_size)]
    pub max_bytes: u64,

    /// Multiply the size by this factor between steps.
    #[arg(
        short = 'f',
        long = "stepfactor",
        default_value_t = 2,
        conflicts_with = "step_bytes"
    )]
    pub step_factor: u64,

    /// Add this many bytes between steps instead of multiplying (K/M/G suffixes).
    #[arg(short = 'i', long = "stepbytes", value_parser = parse_size)]
    pub step_bytes: Option<u64>,

    /// Timed iterations per repetition.
    #[arg(short = 'n', long = "iters", default_value_t = 20)]
    pub iters: usize,

    /// Warm-up iterations before timing each size.
    #[arg(
        short = 'w',
        long = "warmup_iters",
        alias = "warmup",
        default_value_t = 5
    )]
    pub warmup: usize,

    /// Repetitions of the timed loop; the table reports their median, the files all of them.
    #[arg(long = "reps", default_value_t = 5)]
    pub reps: usize,

    /// Check results (0 or 1): fill inputs with a per-PE pattern, compare with the host's answer.
    #[arg(short = 'c', long = "check", default_value = "1", num_args = 0..=1, default_missing_value = "1", value_parser = parse_bool01)]
    pub check: bool,

    /// Element types (list or `all`).
    #[arg(short = 'd', long = "datatype", default_value = "f32")]
    pub dtype: String,

    /// Reduction operators (list or `all`): sum, prod, min, max.
    #[arg(short = 'o', long = "op", default_value = "sum")]
    pub op: String,

    /// Root PE for broadcast, reduce, gather and scatter.
    #[arg(short = 'r', long = "root", default_value_t = 0)]
    pub root: usize,

    /// Team to run over (NCCL runs over the world only).
    #[arg(long = "team", value_enum, default_value = "world")]
    pub team: TeamKind,

    /// Run in place (output buffer = input buffer) where the collective allows it.
    #[arg(long = "in-place")]
    pub in_place: bool,

    /// CUDA-graph mode (0 or 1): capture the timed iterations once, replay the graph.
    #[arg(short = 'G', long = "cudagraph", default_value = "0", num_args = 0..=1, default_missing_value = "1", value_parser = parse_bool01)]
    pub graph: bool,

    /// Report host CPU time per call (0 or 1): the time to enqueue, not to complete.
    #[arg(short = 'C', long = "report_cputime", default_value = "0", num_args = 0..=1, default_missing_value = "1", value_parser = parse_bool01)]
    pub cpu_time: bool,

    /// Implementations to compare (list).
    #[arg(long = "impl", default_value = "nvshmem-rs,nvshmem,nccl")]
    pub impls: String,

    /// Path of libnccl.so.2 to use (else $NCCL_LIBRARY, $NCCL_HOME, loader path, wheel).
    #[arg(long = "nccl-lib", value_name = "PATH")]
    pub nccl_lib: Option<std::path::PathBuf>,

    /// Write one JSON object per result line to this file.
    #[arg(long = "json", value_name = "FILE")]
    pub json: Option<std::path::PathBuf>,

    /// Write the results as CSV to this file.
    #[arg(long = "csv", value_name = "FILE")]
    pub csv: Option<std::path::PathBuf>,

    /// Plot busbw and time against size, one chart per collective: FILE.svg and FILE.png
    /// beside it (`nvshmem-perf plot FILE.jsonl --out DIR` plots saved --json results again).
    #[arg(long = "plot", value_name = "FILE.svg")]
    pub plot: Option<std::path::PathBuf>,

    /// The link's bandwidth in GB/s, a dashed line on the plot's busbw charts (0: none).
    #[arg(long = "ceiling", value_name = "GBPS", default_value_t = 0.0)]
    pub ceiling: f64,

    /// Write the tables as markdown to this file.
    #[arg(long = "markdown", value_name = "FILE.md")]
    pub markdown: Option<std::path::PathBuf>,

    /// No progress bar.
    #[arg(long = "no-progress")]
    pub no_progress: bool,
}

/// What the arguments resolve to, validated.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// Collectives, in the order given.
    pub collectives: Vec<Collective>,
    /// Element types.
    pub dtypes: Vec<DType>,
    /// Operators.
    pub ops: Vec<RedOp>,
    /// Implementations.
    pub impls: Vec<ImplKind>,
    /// Sizes in bytes.
    pub sizes: Vec<u64>,
}

impl Args {
    /// Resolves lists and the size sweep; an error message for bad input.
    pub fn plan(&self) -> Result<Plan, String> {
        let coll_args: Vec<&String> = self.positional.iter().chain(&self.collective).collect();
        let collectives = if coll_args.is_empty() {
            Collective::all().to_vec()
        } else {
            let mut v = Vec::new();
            for a in coll_args {
                v.extend(parse_list::<Collective>(a, "collective")?);
            }
            v
        };
        let impls = parse_list::<ImplKind>(&self.impls, "implementation")?;
        let dtypes = parse_list::<DType>(&self.dtype, "datatype")?;
        let ops = parse_list::<RedOp>(&self.op, "op")?;
        if self.iters == 0 {
            return Err("-n/--iters must be at least 1".into());
        }
        if self.reps == 0 {
            return Err("--reps must be at least 1".into());
        }
        let sizes = sweep(
            self.min_bytes,
            self.max_bytes,
            self.step_factor,
            self.step_bytes,
        )?;
        Ok(Plan {
            collectives: dedup(collectives),
            dtypes: dedup(dtypes),
            ops: dedup(ops),
            impls: dedup(impls),
            sizes,
        })
    }
}

fn dedup<T: PartialEq + Copy>(v: Vec<T>) -> Vec<T> {
    let mut out: Vec<T> = Vec::new();
    for x in v {
        if !out.contains(&x) {
            out.push(x);
        }
    }
    out
}

/// Parses a comma-separated list of enum values, or `all`.
pub fn parse_list<T: ValueEnum + Clone>(s: &str, what: &str) -> Result<Vec<T>, String> {
    let mut out = Vec::new();
    for item in s.split(',').map(str::trim).filter(|x| !x.is_empty()) {
        if item.eq_ignore_ascii_case("all") {
            out.extend(T::value_variants().iter().cloned());
            continue;
        }
        // nccl-tests and NVSHMEM spell names with underscores (all_reduce), clap with hyphens.
        let parsed =
            T::from_str(item, true).or_else(|_| T::from_str(&item.replace('_', "-"), true));
        out.push(parsed.map_err(|_| {
            let names: Vec<String> = T::value_variants()
                .iter()
                .filter_map(|v| v.to_possible_value().map(|p| p.get_name().to_string()))
                .collect();
            format!(
                "unknown {what} `{item}` (one of: {}, all)",
                names.join(", ")
            )
        })?);
    }
    if out.is_empty() {
        return Err(format!("no {what} given"));
    }
    Ok(out)
}

/// A byte count with an optional K, M or G suffix (powers of 1024; a trailing B is allowed).
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let t = t.strip_suffix(['B', 'b']).unwrap_or(t);
    let (digits, shift) = match t.chars().last().map(|c| c.to_ascii_uppercase()) {
        Some('K') => (&t[..t.len() - 1], 10),
        Some('M') => (&t[..t.len() - 1], 20),
        Some('G') => (&t[..t.len() - 1], 30),
        _ => (t, 0),
    };
    let n: u64 = digits
        .trim()
        .parse()
        .map_err(|_| format!("`{s}` is not a size (like 8, 64K, 1M, 2G)"))?;
    n.checked_mul(1 << shift)
        .ok_or_else(|| format!("`{s}` is too large"))
}

fn parse_bool01(s: &str) -> Result<bool, String> {
    match s {
        "1" | "true" | "yes" => Ok(true),
        "0" | "false" | "no" => Ok(false),
        _ => Err(format!("`{s}`: expected 0 or 1")),
    }
}

/// The sizes from `min` to `max`: multiplied by `factor`, or stepped by `step` when given.
pub fn sweep(min: u64, max: u64, factor: u64, step: Option<u64>) -> Result<Vec<u64>, String> {
    if min > max {
        return Err(format!("-b ({min}) must not be above -e ({max})"));
    }
    let mut sizes = vec![min];
    let mut cur = min;
    match step {
        Some(0) => return Err("-i/--stepbytes must be above 0".into()),
        Some(step) => {
            while let Some(next) = cur.checked_add(step).filter(|n| *n <= max) {
                sizes.push(next);
                cur = next;
            }
        }
        None => {
            if factor < 2 {
                return Err("-f/--stepfactor must be at least 2 (use -i for steps)".into());
            }
            if min == 0 {
                return Err("-b must be above 0 with -f (use -i to step from 0)".into());
            }
            while let Some(next) = cur.checked_mul(factor).filter(|n| *n <= max) {
                sizes.push(next);
                cur = next;
            }
        }
    }
    Ok(sizes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(v: &[&str]) -> Args {
        Args::try_parse_from(std::iter::once("nvshmem-perf").chain(v.iter().copied())).unwrap()
    }

    #[test]
    fn a_later_flag_overrides_an_earlier_one() {
        // Scripts append to a fixed command line (graph mode turns the check off).
        let a = args(&["all", "-c", "1", "-G", "1", "-c", "0"]);
        assert!(!a.check);
        assert!(a.graph);
    }

    #[test]
    fn sizes_with_suffixes() {
        assert_eq!(parse_size("8"), Ok(8));
        assert_eq!(parse_size("64K"), Ok(64 << 10));
        assert_eq!(parse_size("256m"), Ok(256 << 20));
        assert_eq!(parse_size("2G"), Ok(2 << 30));
        assert_eq!(parse_size("1MB"), Ok(1 << 20));
        assert!(parse_size("lots").is_err());
        assert!(parse_size("99999999999G").is_err());
    }

    #[test]
    fn factor_and_step_sweeps() {
        assert_eq!(sweep(8, 64, 2, None), Ok(vec![8, 16, 32, 64]));
        assert_eq!(sweep(8, 100, 4, None), Ok(vec![8, 32]));
        assert_eq!(sweep(0, 30, 2, Some(10)), Ok(vec![0, 10, 20, 30]));
        assert_eq!(sweep(5, 5, 2, None), Ok(vec![5]));
        assert!(sweep(64, 8, 2, None).is_err());
        assert!(sweep(8, 64, 1, None).is_err());
        assert!(sweep(8, 64, 2, Some(0)).is_err());
        assert_eq!(
            sweep(1 << 30, u64::MAX, 1 << 33, None).unwrap(),
            vec![1 << 30, 1 << 63]
        );
    }

    #[test]
    fn defaults() {
        let a = args(&[]);
        let p = a.plan().unwrap();
        assert_eq!(p.collectives, Collective::all());
        assert_eq!(
            p.impls,
            vec![ImplKind::NvshmemRs, ImplKind::Nvshmem, ImplKind::Nccl]
        );
        assert_eq!(p.dtypes, vec![DType::F32]);
        assert_eq!(p.ops, vec![RedOp::Sum]);
        assert!(a.check && !a.graph && !a.cpu_time && !a.in_place);
        assert_eq!((a.iters, a.warmup, a.reps, a.root), (20, 5, 5, 0));
        assert_eq!(*p.sizes.first().unwrap(), 8);
        assert_eq!(*p.sizes.last().unwrap(), 128 << 20);
    }

    #[test]
    fn nccl_tests_flags() {
        let a = args(&[
            "allreduce",
            "-b",
            "1K",
            "-e",
            "1M",
            "-f",
            "4",
            "-n",
            "100",
            "-w",
            "2",
            "-c",
            "0",
            "-d",
            "half,float",
            "-o",
            "all",
            "-r",
            "1",
            "-G",
            "-C",
            "1",
            "--reps",
            "3",
            "--impl",
            "nccl",
            "--in-place",
        ]);
        let p = a.plan().unwrap();
        assert_eq!(p.collectives, vec![Collective::AllReduce]);
        assert_eq!(p.sizes, vec![1024, 4096, 16384, 65536, 262144, 1 << 20]);
        assert_eq!(p.dtypes, vec![DType::F16, DType::F32]);
        assert_eq!(p.ops.len(), 4);
        assert_eq!(p.impls, vec![ImplKind::Nccl]);
        assert!(!a.check && a.graph && a.cpu_time && a.in_place);
        assert_eq!((a.iters, a.warmup, a.reps, a.root), (100, 2, 3, 1));
    }

    #[test]
    fn collectives_positional_and_flag() {
        let a = args(&["barrier,sync", "--collective", "all_gather", "scatter"]);
        let p = a.plan().unwrap();
        assert_eq!(
            p.collectives,
            vec![
                Collective::Barrier,
                Collective::Sync,
                Collective::Scatter,
                Collective::Fcollect
            ]
        );
        let a = args(&["-c", "--", "all"]);
        assert!(a.check);
        assert_eq!(a.plan().unwrap().collectives.len(), 10);
    }

    #[test]
    fn bad_input_is_an_error_not_a_panic() {
        assert!(args(&["nonsense"]).plan().is_err());
        assert!(args(&["--impl", "mpi"]).plan().is_err());
        assert!(args(&["-n", "0"]).plan().is_err());
        let parse = |v: &[&str]| {
            Args::try_parse_from(std::iter::once("nvshmem-perf").chain(v.iter().copied()))
        };
        assert!(parse(&["-f", "2", "-i", "8"]).is_err());
        assert!(parse(&["-b", "x"]).is_err());
        assert!(parse(&["-G", "2"]).is_err());
    }
}
