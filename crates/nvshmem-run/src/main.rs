//! `nvshmem-run`: starts one copy of a program per GPU of this node, as NVSHMEM PEs.
//!
//! ```text
//! nvshmem-run [-n N] [--port P] [--] PROGRAM [ARGS...]
//! ```
//!
//! Each copy gets `RANK`, `WORLD_SIZE`, `LOCAL_RANK`, `LOCAL_WORLD_SIZE`, `MASTER_ADDR`,
//! `MASTER_PORT` and `NVSHMEM_RS_BOOTSTRAP=env` (so `Runtime::init` rendezvouses over TCP),
//! with NVLink multicast switched off (`NVSHMEM_DISABLE_NVLS=1`, `NCCL_NVLS_ENABLE=0`). Every
//! output line is prefixed with `[PE i] `, stdout to stdout and stderr to stderr. When a copy
//! fails (non-zero exit or a signal), the others are ended (SIGTERM, then SIGKILL after a
//! grace period), and the launcher exits with the failing copy's code (or 128 + signal).
//! Ctrl-C or SIGTERM to the launcher ends every copy too.
use std::{
    ffi::OsString,
    io::{BufRead, BufReader, Read, Write},
    os::unix::process::{CommandExt, ExitStatusExt},
    process::{Child, Command, ExitStatus, Stdio},
    sync::atomic::{AtomicI32, Ordering},
    thread::JoinHandle,
    time::{Duration, Instant},
};

use clap::Parser;

/// How long children get between SIGTERM and SIGKILL.
const GRACE: Duration = Duration::from_secs(3);
/// How often the launcher looks at its children.
const POLL: Duration = Duration::from_millis(20);

/// Starts one copy of PROGRAM per GPU of this node, as the PEs of one NVSHMEM job.
#[derive(Debug, Parser)]
#[command(name = "nvshmem-run", version)]
struct Args {
    /// Number of PEs [default: the number of visible GPUs]
    #[arg(short = 'n', long = "npes", value_parser = clap::value_parser!(u32).range(1..))]
    n: Option<u32>,
    /// TCP port for the PEs' rendezvous [default: a free port]
    #[arg(long)]
    port: Option<u16>,
    /// The program to run, and its arguments
    #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
    command: Vec<OsString>,
}

/// The signal (SIGINT or SIGTERM) the launcher received, or 0.
static RECEIVED: AtomicI32 = AtomicI32::new(0);

extern "C" fn on_signal(sig: libc::c_int) {
    // Only an atomic store: the one thing a signal handler may safely do here.
    RECEIVED.store(sig, Ordering::SeqCst);
}

fn main() {
    let args = Args::parse();
    std::process::exit(run(args));
}

fn run(args: Args) -> i32 {
    let n = match args.n {
        Some(n) => n as usize,
        None => match count_gpus() {
            Some(n) => n,
            None => {
                eprintln!(
                    "nvshmem-run: no GPU found (CUDA_VISIBLE_DEVICES, nvidia-smi -L and \
                     /proc/driver/nvidia/gpus tell nothing); say how many PEs with -n N"
                );
                return 2;
            }
        },
    };
    let port = match args.port {
        Some(p) => p,
        None => match free_port() {
            Ok(p) => p,
            Err(e) => {
                eprintln!("nvshmem-run: cannot find a free TCP port ({e}); give one with --port");
                return 2;
            }
        },
    };
    // SAFETY: installs a handler that only stores to an atomic.
    unsafe {
        libc::signal(libc::SIGINT, on_signal as *const () as libc::sighandler_t);
        libc::signal(libc::SIGTERM, on_signal as *const () as libc::sighandler_t);
    }

    let mut pes: Vec<Pe> = Vec::with_capacity(n);
    for rank in 0..n {
        match spawn(&args.command, rank, n, port) {
            Ok(pe) => pes.push(pe),
            Err(e) => {
                eprintln!(
                    "nvshmem-run: cannot start {:?} for PE {rank}: {e}",
                    args.command[0]
                );
                end_all(&mut pes);
                finish(pes);
                return 127;
            }
        }
    }
    let code = supervise(&mut pes);
    finish(pes);
    code
}

/// One running copy: the child and the threads copying its output.
struct Pe {
    rank: usize,
    child: Child,
    status: Option<ExitStatus>,
    readers: Vec<JoinHandle<()>>,
}

fn spawn(command: &[OsString], rank: usize, n: usize, port: u16) -> std::io::Result<Pe> {
    let mut child = Command::new(&command[0])
        .args(&command[1..])
        .env("RANK", rank.to_string())
        .env("WORLD_SIZE", n.to_string())
        .env("LOCAL_RANK", rank.to_string())
        .env("LOCAL_WORLD_SIZE", n.to_string())
        .env("MASTER_ADDR", "127.0.0.1")
        .env("MASTER_PORT", port.to_string())
        .env("NVSHMEM_RS_BOOTSTRAP", "env")
        .env("NVSHMEM_DISABLE_NVLS", "1")
        .env("NCCL_NVLS_ENABLE", "0")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // Its own process group, so ending it ends whatever it started.
        .process_group(0)
        .spawn()?;
    let out = child.stdout.take().expect("stdout was piped");
    let err = child.stderr.take().expect("stderr was piped");
    let readers = vec![
        prefix_lines(out, rank, false),
        prefix_lines(err, rank, true),
    ];
    Ok(Pe {
        rank,
        child,
        status: None,
        readers,
    })
}

/// Copies `from` line by line to our stdout (or stderr), each line prefixed with `[PE i] `.
fn prefix_lines(from: impl Read + Send + 'static, rank: usize, stderr: bool) -> JoinHandle<()> {
    std::thread::spawn(move || {
        let mut from = BufReader::new(from);
        let prefix = format!("[PE {rank}] ");
        let mut line = Vec::new();
        loop {
            line.clear();
            match from.read_until(b'\n', &mut line) {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
            if !line.ends_with(b"\n") {
                line.push(b'\n');
            }
            // One write per line under the stream's lock, so lines of PEs never interleave.
            let mut buf = prefix.clone().into_bytes();
            buf.extend_from_slice(&line);
            let _ = if stderr {
                std::io::stderr().lock().write_all(&buf)
            } else {
                std::io::stdout().lock().write_all(&buf)
            };
        }
    })
}

/// Waits until every PE succeeds (0), one fails, or the launcher is signalled; returns the
/// launcher's exit code. Every PE has exited when it returns.
fn supervise(pes: &mut [Pe]) -> i32 {
    loop {
        let sig = RECEIVED.load(Ordering::SeqCst);
        if sig != 0 {
            eprintln!("nvshmem-run: received signal {sig}; ending the PEs");
            end_all(pes);
            return 128 + sig;
        }
        let mut running = 0;
        for i in 0..pes.len() {
            if pes[i].status.is_some() {
                continue;
            }
            match pes[i].child.try_wait() {
                Ok(Some(status)) => {
                    pes[i].status = Some(status);
                    if !status.success() {
                        let rank = pes[i].rank;
                        end_all(pes);
                        eprintln!("nvshmem-run: PE {rank} {}", describe(status));
                        return exit_code(status);
                    }
                }
                Ok(None) => running += 1,
                Err(e) => {
                    let rank = pes[i].rank;
                    eprintln!("nvshmem-run: cannot wait for PE {rank}: {e}");
                    end_all(pes);
                    return 1;
                }
            }
        }
        if running == 0 {
            return 0;
        }
        std::thread::sleep(POLL);
    }
}

/// Ends every PE still running: SIGTERM to its process group, SIGKILL after the grace period;
/// waits for all of them.
fn end_all(pes: &mut [Pe]) {
    signal_groups(pes, libc::SIGTERM);
    let deadline = Instant::now() + GRACE;
    loop {
        let mut running = false;
        for pe in pes.iter_mut().filter(|pe| pe.status.is_none()) {
            match pe.child.try_wait() {
                Ok(Some(status)) => pe.status = Some(status),
                _ => running = true,
            }
        }
        if !running || Instant::now() >= deadline {
            break;
        }
        std::thread::sleep(POLL);
    }
    signal_groups(pes, libc::SIGKILL);
    for pe in pes.iter_mut().filter(|pe| pe.status.is_none()) {
        pe.status = pe.child.wait().ok();
    }
}

/// Sends `sig` to the process group of every PE (including exited ones, whose background
/// processes may remain).
fn signal_groups(pes: &[Pe], sig: libc::c_int) {
    for pe in pes {
        let Ok(pgid) = libc::pid_t::try_from(pe.child.id()) else {
            continue;
        };
        // SAFETY: kill has no memory-safety preconditions; the group was created for this
        // PE (a group lives while any member does, and the leader is not reaped before this
        // for running PEs). ESRCH (nothing left) is fine.
        unsafe { libc::kill(-pgid, sig) };
    }
}

/// After the PEs have exited: ends what they left in their groups, then drains the output.
fn finish(mut pes: Vec<Pe>) {
    signal_groups(&pes, libc::SIGKILL);
    for pe in &mut pes {
        for reader in pe.readers.drain(..) {
            let _ = reader.join();
        }
    }
}

fn describe(status: ExitStatus) -> String {
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exited with status {code}"),
        (None, Some(sig)) => format!("was killed by signal {sig} ({})", signal_name(sig)),
        _ => format!("ended with {status}"),
    }
}

fn signal_name(sig: i32) -> &'static str {
    match sig {
        libc::SIGHUP => "SIGHUP",
        libc::SIGINT => "SIGINT",
        libc::SIGQUIT => "SIGQUIT",
        libc::SIGILL => "SIGILL",
        libc::SIGABRT => "SIGABRT",
        libc::SIGBUS => "SIGBUS",
        libc::SIGFPE => "SIGFPE",
        libc::SIGKILL => "SIGKILL",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGPIPE => "SIGPIPE",
        libc::SIGTERM => "SIGTERM",
        _ => "signal",
    }
}

fn exit_code(status: ExitStatus) -> i32 {
    match (status.code(), status.signal()) {
        (Some(code), _) if code != 0 => code,
        (None, Some(sig)) => 128 + sig,
        _ => 1,
    }
}

/// The number of GPUs this process can see, if anything says.
fn count_gpus() -> Option<usize> {
    if let Ok(v) = std::env::var("CUDA_VISIBLE_DEVICES") {
        return Some(count_visible_devices(&v)).filter(|&n| n > 0);
    }
    if let Ok(out) = Command::new("nvidia-smi")
        .arg("-L")
        .stderr(Stdio::null())
        .output()
    {
        let n = String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter(|l| l.starts_with("GPU "))
            .count();
        if out.status.success() && n > 0 {
            return Some(n);
        }
    }
    let n = std::fs::read_dir("/proc/driver/nvidia/gpus").ok()?.count();
    (n > 0).then_some(n)
}

/// The devices `CUDA_VISIBLE_DEVICES` lists. CUDA stops at the first invalid entry (such as
/// `-1`), so counting does too.
fn count_visible_devices(v: &str) -> usize {
    v.split(',')
        .map(str::trim)
        .take_while(|d| !d.is_empty() && !d.starts_with('-'))
        .count()
}

/// Ports tried first: below Linux's ephemeral range (32768-60999), which the PEs' own
/// outgoing connections (NVSHMEM's and NCCL's bootstraps) draw their source ports from. A
/// port the system handed out as free (`bind(0)`) lies in that range, and another process's
/// connection took it between this check and rank 0's bind in about one job in fifteen on
/// 2 x H200 (`Address already in use`, 2026-11-26).
const PORTS: std::ops::Range<u16> = 20000..32768;

fn free_port() -> std::io::Result<u16> {
    // The port is free now; rank 0 binds it moments later. Starting from a point that differs
    // between launches (the clock's nanoseconds and this process's id), so that jobs started
    // together do not all try the same ports.
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos())
        ^ std::process::id().wrapping_mul(2_654_435_761);
    let span = u32::from(PORTS.end - PORTS.start);
    for i in 0..64 {
        let port = PORTS.start + ((seed.wrapping_add(i * 7919)) % span) as u16;
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return Ok(port);
        }
    }
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_free_port_is_below_the_ephemeral_range_and_bindable() {
        let p = free_port().unwrap();
        assert!(PORTS.contains(&p), "{p}");
        std::net::TcpListener::bind(("127.0.0.1", p)).unwrap();
    }

    #[test]
    fn visible_devices_are_counted_like_cuda() {
        assert_eq!(count_visible_devices("0,1,2,3"), 4);
        assert_eq!(count_visible_devices("2"), 1);
        assert_eq!(count_visible_devices("GPU-abc,GPU-def"), 2);
        assert_eq!(count_visible_devices(""), 0);
        assert_eq!(count_visible_devices("0,-1,2"), 1);
        assert_eq!(count_visible_devices("-1"), 0);
    }

    #[test]
    fn arguments_parse() {
        let a = Args::try_parse_from(["nvshmem-run", "-n", "4", "--", "prog", "-x", "y"]).unwrap();
        assert_eq!(a.n, Some(4));
        assert_eq!(a.command, ["prog", "-x", "y"]);
        let a = Args::try_parse_from(["nvshmem-run", "--port", "1234", "prog", "--flag"]).unwrap();
        assert_eq!((a.n, a.port), (None, Some(1234)));
        assert_eq!(a.command, ["prog", "--flag"]);
        assert!(Args::try_parse_from(["nvshmem-run", "-n", "0", "prog"]).is_err());
        assert!(Args::try_parse_from(["nvshmem-run", "-n", "2"]).is_err());
    }

    #[test]
    fn exit_codes() {
        assert_eq!(exit_code(ExitStatus::from_raw(3 << 8)), 3);
        assert_eq!(exit_code(ExitStatus::from_raw(libc::SIGKILL)), 137);
        assert_eq!(
            describe(ExitStatus::from_raw(libc::SIGSEGV)),
            "was killed by signal 11 (SIGSEGV)"
        );
        assert_eq!(
            describe(ExitStatus::from_raw(101 << 8)),
            "exited with status 101"
        );
    }
}
