//! Command-line interface. Flags follow nccl-tests where it has one (`-b -e -f -i -n -w -c -d
//! -o -r -G -C`); see `nvshmem-perf --help`.
use clap::{Parser, ValueEnum};
use nvshmem::{collective::Collective, DataType, ReduceOp};

use crate::coll::{self, reason, TABLE_ORDER};

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
    // Collectives to run (help: `collectives_help`).
    #[arg(value_name = "COLLECTIVE", value_parser = parse_collectives, help = collectives_help())]
    pub positional: Vec<List<Collective>>,

    /// Same as the positional collectives.
    #[arg(long = "collective", alias = "coll", value_name = "LIST", value_parser = parse_collectives)]
    pub collective: Vec<List<Collective>>,

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

    /// Add this many bytes between steps instead of multiplying (K/M/G suffixes; at most 4096
    /// sizes).
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

    /// Check results (0 or 1): fill inputs with a per-PE pattern, compare with the host's answer
    /// (in graph mode, of one launch of the captured call, after timing).
    #[arg(short = 'c', long = "check", default_value = "1", num_args = 0..=1, default_missing_value = "1", value_parser = parse_bool01)]
    pub check: bool,

    // Element types (help: `dtype_help`, from the library's list).
    #[arg(short = 'd', long = "datatype", default_value = "f32", value_parser = parse_dtypes, help = dtype_help())]
    pub dtype: List<DataType>,

    // Reduction operators (help: `op_help`, from the library's list).
    #[arg(short = 'o', long = "op", default_value = "sum", value_parser = parse_ops, help = op_help())]
    pub op: List<ReduceOp>,

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
    #[arg(long = "impl", default_value = "nvshmem-rs,nvshmem,nccl", value_parser = parse_impls)]
    pub impls: List<ImplKind>,

    // Algorithms forced on nvshmem-rs (help: `algo_long_help`, from the library's registries).
    #[arg(long = "algo", value_name = "LIST", value_parser = parse_algos, help = ALGO_HELP, long_help = algo_long_help())]
    pub algo: Option<List<(Collective, &'static str)>>,

    /// Path of libnccl.so.2 to use (else $NCCL_LIBRARY, $NCCL_HOME, loader path, wheel).
    #[arg(long = "nccl-lib", value_name = "PATH")]
    pub nccl_lib: Option<std::path::PathBuf>,

    /// Write one JSON object per result line to this file, each as its point ends (a run that
    /// never ends leaves the points it finished).
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
    pub dtypes: Vec<DataType>,
    /// Operators.
    pub ops: Vec<ReduceOp>,
    /// Implementations.
    pub impls: Vec<ImplKind>,
    /// Sizes in bytes.
    pub sizes: Vec<u64>,
}

impl Args {
    /// Resolves lists and the size sweep; an error message for bad input.
    pub fn plan(&self) -> Result<Plan, String> {
        let mut collectives: Vec<Collective> = self
            .positional
            .iter()
            .chain(&self.collective)
            .flat_map(|l| l.0.iter().copied())
            .collect();
        if collectives.is_empty() {
            collectives = TABLE_ORDER.to_vec();
        }
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
            dtypes: dedup(self.dtype.0.clone()),
            ops: dedup(self.op.0.clone()),
            impls: dedup(self.impls.0.clone()),
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

/// A comma-separated list from the command line, `all` expanded.
#[derive(Debug, Clone, PartialEq)]
pub struct List<T>(pub Vec<T>);

/// Parses a comma-separated list with `parse`; the item `all` stands for every value of `all`.
fn parse_list<T: Clone>(
    s: &str,
    what: &str,
    all: &[T],
    parse: impl Fn(&str) -> Result<T, String>,
) -> Result<List<T>, String> {
    let mut out = Vec::new();
    for item in s.split(',').map(str::trim).filter(|x| !x.is_empty()) {
        if item.eq_ignore_ascii_case("all") {
            out.extend_from_slice(all);
        } else {
            out.push(parse(item)?);
        }
    }
    if out.is_empty() {
        return Err(format!("no {what} given"));
    }
    Ok(List(out))
}

/// Collectives by any name the library knows (`allreduce`, `all_gather`, `MPI_Bcast`, ...).
pub fn parse_collectives(s: &str) -> Result<List<Collective>, String> {
    parse_list(s, "collective", &TABLE_ORDER, coll::parse)
}

/// Element types by the library's names or nccl-tests' (`float`, `half`, `int32`, ...).
pub fn parse_dtypes(s: &str) -> Result<List<DataType>, String> {
    parse_list(s, "datatype", DataType::ALL, |x| x.parse().map_err(reason))
}

/// Operators by the library's names; `all` is every operator but premul_sum, which needs `S`.
pub fn parse_ops(s: &str) -> Result<List<ReduceOp>, String> {
    parse_list(s, "op", &ReduceOp::BASIC, |x| x.parse().map_err(reason))
}

fn parse_impls(s: &str) -> Result<List<ImplKind>, String> {
    parse_list(s, "implementation", ImplKind::value_variants(), |x| {
        impl_by_name(x).ok_or_else(|| {
            format!(
                "unknown implementation `{x}` (one of: {}, all)",
                impl_names()
            )
        })
    })
}

/// One implementation by name, as `--impl` takes it: any case, and underscores for hyphens
/// (clap spells the names with hyphens, nvshmem-rs; `nvshmem_rs` is what a hand types).
pub fn parse_impl(x: &str) -> Result<ImplKind, String> {
    impl_by_name(x)
        .ok_or_else(|| format!("unknown implementation `{x}` (one of: {})", impl_names()))
}

fn impl_by_name(x: &str) -> Option<ImplKind> {
    let x = x.trim();
    ImplKind::from_str(x, true)
        .or_else(|_| ImplKind::from_str(&x.replace('_', "-"), true))
        .ok()
}

/// `nvshmem-rs, nvshmem, nccl`.
fn impl_names() -> String {
    let names: Vec<&str> = ImplKind::value_variants()
        .iter()
        .map(|i| i.name())
        .collect();
    names.join(", ")
}

/// `collective=algorithm` pairs, comma separated, as `NVSHMEM_RS_ALGORITHMS` takes them: any
/// name of a collective the library knows, and one of its algorithms or `auto`. A later pair
/// for the same collective replaces an earlier one.
pub fn parse_algos(s: &str) -> Result<List<(Collective, &'static str)>, String> {
    let mut out: Vec<(Collective, &'static str)> = Vec::new();
    for pair in s.split(',').map(str::trim).filter(|x| !x.is_empty()) {
        let (c, a) = pair
            .split_once('=')
            .ok_or_else(|| format!("`{pair}` is not collective=algorithm"))?;
        let coll: Collective = c.parse().map_err(reason)?;
        let a = a.trim();
        let known = coll.algorithms();
        let name = match known.iter().find(|k| **k == a) {
            Some(k) => *k,
            None if a == "auto" => "auto",
            None => {
                return Err(format!(
                    "{coll} has no algorithm `{a}` (it has auto, {})",
                    known.join(", ")
                ))
            }
        };
        out.retain(|(c, _)| *c != coll);
        out.push((coll, name));
    }
    if out.is_empty() {
        return Err("no collective=algorithm pair given".into());
    }
    Ok(List(out))
}

fn collectives_help() -> String {
    let names: Vec<&str> = TABLE_ORDER.iter().map(|c| c.name()).collect();
    format!(
        "Collectives to run (comma or space separated, or `all`): {}; NCCL's and MPI's names \
         (allreduce, all_gather, bcast, MPI_Allgather, ...) work too",
        names.join(", ")
    )
}

fn dtype_help() -> String {
    let names: Vec<&str> = DataType::ALL.iter().map(|d| d.name()).collect();
    format!(
        "Element types (list or `all`): {}; nccl-tests' names (float, half, bfloat16, int32, \
         ...) work too",
        names.join(", ")
    )
}

fn op_help() -> String {
    let names: Vec<&str> = ReduceOp::BASIC.iter().map(|o| o.name()).collect();
    format!(
        "Reduction operators (list, or `all`: every one but premul_sum): {}, premul_sum(S)",
        names.join(", ")
    )
}

const ALGO_HELP: &str = "Force nvshmem-rs's algorithms: collective=algorithm pairs, comma \
                         separated, as NVSHMEM_RS_ALGORITHMS (which this overrides)";

fn algo_long_help() -> String {
    let mut h = format!(
        "{ALGO_HELP}. `auto` is the library's automatic choice, the default. Every nvshmem-rs \
         row records the algorithm that ran (forced, or the one the automatic choice took). A \
         forced algorithm that cannot run a point makes it skipped, with the reason. The \
         algorithms, in the order the automatic choice tries them:"
    );
    for c in Collective::ALL {
        h.push_str(&format!("\n  {c}: {}", c.algorithms().join(", ")));
    }
    h
}

/// A byte count with an optional K, M, G or T suffix (powers of 1024; a trailing B is
/// allowed): the library's [`nvshmem::runtime::parse_size`], plus 0, which a sweep stepped by
/// -i may start from (the library, sizing heaps, refuses it).
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let t = t.strip_suffix(['B', 'b']).unwrap_or(t);
    let digits = t
        .strip_suffix(['K', 'k', 'M', 'm', 'G', 'g', 'T', 't'])
        .unwrap_or(t);
    if digits.trim().parse::<u64>() == Ok(0) {
        return Ok(0);
    }
    nvshmem::runtime::parse_size(t)
        .map(|n| n as u64)
        .ok_or_else(|| format!("`{s}` is not a size (like 8, 64K, 1M, 2G, 1T) or is too large"))
}

fn parse_bool01(s: &str) -> Result<bool, String> {
    match s {
        "1" | "true" | "yes" => Ok(true),
        "0" | "false" | "no" => Ok(false),
        _ => Err(format!("`{s}`: expected 0 or 1")),
    }
}

/// The most sizes a sweep may have: more is a mistake of -i (`-b 1 -i 1 -e 1M` is a million
/// points, `-b 0 -i 1 -e 4G` more than memory holds), and would run for days.
pub const MAX_SIZES: u64 = 4096;

/// The sizes from `min` to `max`: multiplied by `factor`, or stepped by `step` when given; an
/// error past [`MAX_SIZES`], found before any is listed.
pub fn sweep(min: u64, max: u64, factor: u64, step: Option<u64>) -> Result<Vec<u64>, String> {
    if min > max {
        return Err(format!("-b ({min}) must not be above -e ({max})"));
    }
    let mut sizes = vec![min];
    let mut cur = min;
    match step {
        Some(0) => return Err("-i/--stepbytes must be above 0".into()),
        Some(step) => {
            let count = u128::from((max - min) / step) + 1;
            if count > u128::from(MAX_SIZES) {
                return Err(format!(
                    "-b {min} -e {max} -i {step} is {count} sizes, more than {MAX_SIZES}: step \
                     by more (-i) or by a factor (-f)"
                ));
            }
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
        // Scripts append to a fixed command line (a later -c wins).
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
        // Beyond the library's parser: 0 (a sweep from 0 by -i) and a trailing B; and its T.
        assert_eq!(parse_size("0"), Ok(0));
        assert_eq!(parse_size("0K"), Ok(0));
        assert_eq!(parse_size(" 4 kB "), Ok(4 << 10));
        assert_eq!(parse_size("1T"), Ok(1 << 40));
        assert!(parse_size("").is_err());
        assert!(parse_size("B").is_err());
        assert!(parse_size("-1").is_err());
        assert_eq!(
            args(&["-b", "0", "-i", "1M", "-e", "2M"])
                .plan()
                .unwrap()
                .sizes
                .len(),
            3
        );
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

    /// Found by an audit: `-b 0 -i 1 -e 4G` listed four billion sizes (the allocation
    /// aborted the run), `-b 1 -i 1 -e 1M` a million. Past MAX_SIZES the sweep is an error
    /// that says why, before anything is listed.
    #[test]
    fn a_sweep_of_too_many_sizes_is_an_error() {
        let e = sweep(0, 4 << 30, 2, Some(1)).unwrap_err();
        assert_eq!(
            e,
            "-b 0 -e 4294967296 -i 1 is 4294967297 sizes, more than 4096: step by more (-i) or \
             by a factor (-f)"
        );
        assert!(sweep(1, 1 << 20, 2, Some(1)).is_err());
        assert!(sweep(0, u64::MAX, 2, Some(1)).is_err());
        assert_eq!(sweep(1, MAX_SIZES, 2, Some(1)).unwrap().len(), 4096);
        assert!(sweep(0, MAX_SIZES, 2, Some(1)).is_err());
        let plan = args(&["-b", "1", "-i", "1", "-e", "1M"]).plan();
        assert!(plan.unwrap_err().contains("1048576 sizes"));
    }

    #[test]
    fn defaults() {
        let a = args(&[]);
        let p = a.plan().unwrap();
        assert_eq!(p.collectives, TABLE_ORDER);
        assert_eq!(
            p.impls,
            vec![ImplKind::NvshmemRs, ImplKind::Nvshmem, ImplKind::Nccl]
        );
        assert_eq!(p.dtypes, vec![DataType::F32]);
        assert_eq!(p.ops, vec![ReduceOp::Sum]);
        assert_eq!(a.algo, None);
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
        assert_eq!(p.dtypes, vec![DataType::F16, DataType::F32]);
        assert_eq!(p.ops, ReduceOp::BASIC);
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
        // Every alias the library knows.
        let a = args(&[
            "MPI_Allgather",
            "bcast",
            "--collective",
            "allreduce,Reduce-Scatter",
        ]);
        assert_eq!(
            a.plan().unwrap().collectives,
            vec![
                Collective::Fcollect,
                Collective::Broadcast,
                Collective::AllReduce,
                Collective::ReduceScatter
            ]
        );
    }

    #[test]
    fn types_and_operators_are_the_library_s() {
        let p = args(&["-d", "all", "-o", "all"]).plan().unwrap();
        assert_eq!(p.dtypes, DataType::ALL);
        assert_eq!(p.ops, ReduceOp::BASIC);
        let a = args(&[
            "-d",
            "bfloat16,int32,f8e4m3,bool8,u16",
            "-o",
            "avg,premul_sum(0.5),xor",
        ]);
        assert_eq!(
            a.dtype.0,
            [
                DataType::BF16,
                DataType::I32,
                DataType::F8E4M3,
                DataType::Bool8,
                DataType::U16
            ]
        );
        assert_eq!(
            a.op.0,
            [ReduceOp::Avg, ReduceOp::PreMulSum(0.5), ReduceOp::Xor]
        );
        // Results files keep today's spellings of the twelve types -d had before.
        let old = [
            "f32", "f64", "f16", "bf16", "i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64",
        ];
        for name in old {
            let d: DataType = name.parse().unwrap();
            assert_eq!(d.name(), name);
        }
        for (name, op) in [
            ("sum", ReduceOp::Sum),
            ("prod", ReduceOp::Prod),
            ("min", ReduceOp::Min),
            ("max", ReduceOp::Max),
        ] {
            assert_eq!(op.name(), name);
        }
    }

    #[test]
    fn the_help_lists_the_library_s_names() {
        use clap::CommandFactory;
        let help = Args::command().render_long_help().to_string();
        for d in DataType::ALL {
            assert!(help.contains(d.name()), "{d}");
        }
        for needle in [
            "bool8, f8e4m3, f8e5m2",
            "xor, avg, premul_sum(S)",
            "MPI_Allgather",
        ] {
            assert!(help.contains(needle), "{needle}: {help}");
        }
        for c in Collective::ALL {
            let line = format!("{c}: {}", c.algorithms().join(", "));
            assert!(help.contains(&line), "{line}");
        }
    }

    #[test]
    fn forced_algorithms() {
        let a = args(&["--algo", "all_reduce=nvshmem, MPI_Gather=peer_copy"]);
        assert_eq!(
            a.algo.unwrap().0,
            [
                (Collective::AllReduce, "nvshmem"),
                (Collective::Gather, "peer_copy")
            ]
        );
        // As NVSHMEM_RS_ALGORITHMS: auto restores the choice; the last pair for one wins.
        let a = args(&[
            "--algo",
            "allreduce=peer_kernel,all_reduce=auto,gather=rooted_get",
        ]);
        assert_eq!(
            a.algo.unwrap().0,
            [
                (Collective::AllReduce, "auto"),
                (Collective::Gather, "rooted_get")
            ]
        );
        // A later flag replaces an earlier one, like every other flag.
        let a = args(&["--algo", "gather=peer_copy", "--algo", "scatter=peer_copy"]);
        assert_eq!(a.algo.unwrap().0, [(Collective::Scatter, "peer_copy")]);
        let err = |v: &str| parse_algos(v).unwrap_err();
        assert_eq!(
            err("gather=carrier_pigeon"),
            "gather has no algorithm `carrier_pigeon` (it has auto, local, nvlink_ll, nvlink_lamport, nvlink_ce, nvlink_direct, rooted_get, peer_copy)"
        );
        assert!(err("gathr=rooted_get").contains("\"gathr\": expected one of all_reduce"));
        assert_eq!(err("gather"), "`gather` is not collective=algorithm");
        assert_eq!(err(" , "), "no collective=algorithm pair given");
        let e = Args::try_parse_from(["nvshmem-perf", "--algo", "broadcast=peer_copy"])
            .unwrap_err()
            .to_string();
        assert!(e.contains("broadcast has no algorithm `peer_copy`"), "{e}");
    }

    #[test]
    fn bad_input_is_an_error_not_a_panic() {
        assert!(args(&["-n", "0"]).plan().is_err());
        let parse = |v: &[&str]| {
            Args::try_parse_from(std::iter::once("nvshmem-perf").chain(v.iter().copied()))
        };
        // Names are checked as the command line is parsed, with the names accepted.
        let msg = |v: &[&str]| parse(v).unwrap_err().to_string();
        assert!(msg(&["nonsense"]).contains("\"nonsense\": expected one of all_reduce"));
        assert!(msg(&["--impl", "mpi"]).contains("unknown implementation `mpi`"));
        assert!(msg(&["-d", "f128"]).contains("\"f128\": expected one of f32, f64"));
        assert!(msg(&["-o", "median"]).contains("premul_sum(S)"));
        assert!(msg(&["-o", "premul_sum(x)"]).contains("must be a number"));
        assert!(msg(&["-d", ","]).contains("no datatype given"));
        assert_eq!(
            args(&["--impl", "nvshmem_rs"]).impls.0,
            [ImplKind::NvshmemRs]
        );
        assert!(parse(&["-f", "2", "-i", "8"]).is_err());
        assert!(parse(&["-b", "x"]).is_err());
        assert!(parse(&["-G", "2"]).is_err());
    }
}
