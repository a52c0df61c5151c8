//! Noticing that the job is broken, so that no PE waits for ever.
//!
//! A PE learns that a peer will never arrive in three ways, all watched here:
//! - A wait of this crate's NVLink kernels lasts longer than the timeout
//!   ([`RuntimeBuilder::timeout`](crate::RuntimeBuilder::timeout), [`TIMEOUT_VAR`], default
//!   [`DEFAULT_TIMEOUT`]): the kernel records which team PE it waited for and returns.
//! - A peer on the same host has exited (its process is gone, or a zombie): seen within
//!   [`POLL`], whatever launched the job (`nvshmem-run`, `mpirun`, Hydra, or by hand).
//! - A peer on the same host has been stopped (`SIGSTOP`, a debugger) for longer than the
//!   timeout.
//!
//! Why the process table rather than a heartbeat in symmetric memory: a heartbeat needs a
//! host thread putting into every peer through NVSHMEM, racing with the program's own use of
//! NVSHMEM, or a kernel that occupies part of the GPU for the whole job; and it cannot tell a
//! dead peer from a slow one before a timeout. `/proc` answers "is it alive" exactly and at
//! no cost to the GPU. It sees only this host: across hosts the kernels' timeout ends the
//! waits (and `mpirun` or Slurm end a job one of whose processes died).
//!
//! On a failure a watchdog thread sets the abort word, so every wait of this crate's kernels
//! ends at its next poll (and any started later ends at its first), and records the failure:
//! every later call on the runtime returns it ([`Error::PeerFailed`] or
//! [`Error::CollectiveFailed`]), and [`Runtime::async_error`] reports it. NVSHMEM's own
//! kernels and host calls (teams that are not peer-mapped, allocation, team creation) cannot
//! be ended from outside: if the program has not been handed the failure within [`GRACE`] of
//! its detection, it is stuck in one of them, and the watchdog prints the failure and ends the
//! process with status 1. Once failed, the runtime is not finalised when dropped (finalising
//! is collective and would wait for the dead peer); the process exits with NVSHMEM as it is,
//! as `nvshmem_global_exit` would leave it.
use std::{
    os::raw::c_int,
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc, Mutex, OnceLock,
    },
    thread::JoinHandle,
    time::{Duration, Instant},
};

use cudarc::driver::sys;

use crate::{Error, Result};

/// The environment variable that sets the timeout: seconds (`30`, `2.5`), or with a unit
/// (`500ms`, `30s`, `5m`); `0` or `never` waits for ever. It overrides
/// [`RuntimeBuilder::timeout`](crate::RuntimeBuilder::timeout).
///
/// ```
/// assert_eq!(nvshmem::runtime::TIMEOUT_VAR, "NVSHMEM_RS_TIMEOUT");
/// ```
pub const TIMEOUT_VAR: &str = "NVSHMEM_RS_TIMEOUT";

/// How long a wait for a peer may last before the job counts as broken, by default: five
/// minutes, long enough for a PE that computes for a while before joining a collective.
///
/// ```
/// assert_eq!(nvshmem::runtime::DEFAULT_TIMEOUT.as_secs(), 300);
/// ```
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(300);

/// How often the watchdog looks.
///
/// ```
/// assert!(nvshmem::runtime::POLL.as_millis() <= 100);
/// ```
pub const POLL: Duration = Duration::from_millis(50);

/// How long after a failure the program has to be handed it (through an error of any call, or
/// [`Runtime::async_error`](crate::Runtime::async_error)) before the watchdog ends the
/// process.
///
/// ```
/// assert_eq!(nvshmem::runtime::GRACE.as_secs(), 5);
/// ```
pub const GRACE: Duration = Duration::from_secs(5);

/// Parses [`TIMEOUT_VAR`]'s syntax (also the bootstrap's timeout's); `None` is "never".
pub(crate) fn parse_timeout(s: &str) -> std::result::Result<Option<Duration>, String> {
    let s = s.trim().to_ascii_lowercase();
    if s == "never" {
        return Ok(None);
    }
    let (number, unit) = match s.find(|c: char| c.is_ascii_alphabetic()) {
        Some(i) => s.split_at(i),
        None => (s.as_str(), "s"),
    };
    let scale = match unit.trim() {
        "ms" => 1e-3,
        "s" => 1.0,
        "m" | "min" => 60.0,
        "h" => 3600.0,
        u => return Err(format!("unknown unit {u:?}: use ms, s, m or h")),
    };
    let n: f64 = number
        .trim()
        .parse()
        .map_err(|_| format!("{number:?} is not a number"))?;
    let secs = n * scale;
    if secs == 0.0 {
        return Ok(None);
    }
    // Below a nanosecond would round to 0, which means "never".
    (0.0..=1e9)
        .contains(&secs)
        .then(|| Duration::try_from_secs_f64(secs).ok())
        .flatten()
        .filter(|d| !d.is_zero())
        .map(Some)
        .ok_or_else(|| format!("{s:?} is not a duration between 1 ns and 10^9 s"))
}

/// Host memory the GPU maps: the abort word, then the kernels' status record
/// (`kernels/PROTOCOL.md`), so the host can set the word whatever the GPU is doing and read
/// what a kernel recorded without a CUDA call.
struct Control {
    host: *mut u32,
    device: u64,
}

// SAFETY: the pointer is to pinned host memory owned by this struct for its whole life; the
// host only writes the abort word and reads the status with volatile accesses.
unsafe impl Send for Control {}
// SAFETY: as above.
unsafe impl Sync for Control {}

/// Words of the control block: abort, then the four of the status record, then what a
/// mismatch records (`kernels/PROTOCOL.md`, "Fingerprints"): the peer's fingerprint, this
/// PE's, and this PE's team index.
const CONTROL_WORDS: usize = 1 + 4 + MISMATCH_WORDS;

/// Status words after the first four that a mismatch (code 4) fills.
const MISMATCH_WORDS: usize = 4 + 4 + 1;

/// The status code of a mismatch (`NVR_FAIL_MISMATCH`).
const FAIL_MISMATCH: u32 = 4;

impl Control {
    /// Allocates the block in the current context.
    fn new() -> Result<Self> {
        let mut host = std::ptr::null_mut();
        let flags = sys::CU_MEMHOSTALLOC_DEVICEMAP | sys::CU_MEMHOSTALLOC_PORTABLE;
        // SAFETY: a fresh pinned allocation of the control words, owned by `Control`.
        unsafe { sys::cuMemHostAlloc(&mut host, CONTROL_WORDS * 4, flags) }
            .result()
            .map_err(Error::cuda("cuMemHostAlloc (abort word)"))?;
        let host = host.cast::<u32>();
        // SAFETY: `host` holds CONTROL_WORDS words, just allocated.
        unsafe { std::ptr::write_bytes(host, 0, CONTROL_WORDS) };
        let mut device = 0;
        // SAFETY: `host` is mapped pinned memory of the current context.
        let mapped = unsafe { sys::cuMemHostGetDevicePointer_v2(&mut device, host.cast(), 0) };
        let control = Control { host, device };
        mapped
            .result()
            .map_err(Error::cuda("cuMemHostGetDevicePointer (abort word)"))?;
        Ok(control)
    }

    fn abort(&self) {
        // SAFETY: the abort word is live pinned memory; a volatile store is what the kernels'
        // polls see.
        unsafe { std::ptr::write_volatile(self.host, 1) };
    }

    /// What a mismatch recorded after the status record's first four words: (the peer's
    /// fingerprint, this PE's, this PE's team index). Read after the code (written last).
    fn mismatch(&self) -> ([u64; 2], [u64; 2], u32) {
        // SAFETY: the words are live pinned memory within CONTROL_WORDS, written by a kernel
        // before it published the code; volatile reads see what it wrote.
        let w: [u32; MISMATCH_WORDS] =
            std::array::from_fn(|i| unsafe { std::ptr::read_volatile(self.host.add(5 + i)) });
        let pair = |a: usize| {
            [
                u64::from(w[a]) | u64::from(w[a + 1]) << 32,
                u64::from(w[a + 2]) | u64::from(w[a + 3]) << 32,
            ]
        };
        (pair(0), pair(4), w[8])
    }

    /// The status record: (code, team PE waited for, epoch, what), code 0 while none failed.
    fn status(&self) -> [u32; 4] {
        // SAFETY: the record is live pinned memory, written by kernels with atomics; volatile
        // reads see what they wrote.
        std::array::from_fn(|i| unsafe { std::ptr::read_volatile(self.host.add(1 + i)) })
    }
}

impl Drop for Control {
    fn drop(&mut self) {
        // SAFETY: allocated by cuMemHostAlloc in `Control::new`, freed once; a healthy runtime
        // closes after the GPU is idle, and a failed one leaks its health (see `Health`).
        unsafe { sys::cuMemFreeHost(self.host.cast()) };
    }
}

/// Who a process is, as its peers on the same host can check it: the host's boot id and PID
/// namespace (so a PID means the same process to both), the PID and the process's start
/// time (so a reused PID is not taken for the peer).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Identity {
    pub(crate) words: [u64; Identity::WORDS],
}

impl Identity {
    /// Words of an identity, as the PEs exchange them.
    pub(crate) const WORDS: usize = 5;

    /// This process's identity (all zero where `/proc` cannot say: then no peer checks it).
    pub(crate) fn own() -> Self {
        let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
            .ok()
            .and_then(|s| u128::from_str_radix(&s.trim().replace('-', ""), 16).ok())
            .unwrap_or(0);
        let ns = std::fs::read_link("/proc/self/ns/pid")
            .ok()
            .and_then(|p| {
                let s = p.to_string_lossy().into_owned();
                s.strip_prefix("pid:[")?.strip_suffix(']')?.parse().ok()
            })
            .unwrap_or(0u64);
        let pid = std::process::id();
        let start = read_stat(pid).map_or(0, |s| s.start);
        if boot == 0 || ns == 0 || start == 0 {
            return Identity::default();
        }
        Identity {
            words: [(boot >> 64) as u64, boot as u64, ns, pid.into(), start],
        }
    }

    fn pid(&self) -> u32 {
        self.words[3] as u32
    }

    fn start(&self) -> u64 {
        self.words[4]
    }

    /// Whether `other`'s PID can be looked up from this process.
    fn same_host(&self, other: &Identity) -> bool {
        self.words[0..3] == other.words[0..3] && self.words[..3] != [0; 3]
    }
}

/// What `/proc/PID/stat` says of a process.
struct Stat {
    /// The state letter: `R`, `S`, `D`, `T` (stopped), `t` (traced), `Z` (zombie), ...
    state: char,
    /// Its start time, in clock ticks after boot.
    start: u64,
}

fn read_stat(pid: u32) -> Option<Stat> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name is in parentheses and may hold spaces and parentheses: the fields
    // after it start after the last ')'. They are fields 3 (state) ... 22 (start time).
    let rest = &text[text.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace();
    let state = fields.next()?.chars().next()?;
    let start = fields.nth(18)?.parse().ok()?;
    Some(Stat { state, start })
}

/// What the watchdog sees of a peer on this host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PeerState {
    Alive,
    Stopped,
    Gone,
}

fn peer_state(id: &Identity) -> PeerState {
    match read_stat(id.pid()) {
        Some(s) if s.start == id.start() => match s.state {
            'Z' | 'X' | 'x' => PeerState::Gone,
            'T' | 't' => PeerState::Stopped,
            _ => PeerState::Alive,
        },
        // No such process, or another one that got its PID.
        _ => PeerState::Gone,
    }
}

/// Why the runtime stopped working.
#[derive(Debug, Clone)]
enum Failure {
    /// A peer's process ended.
    Died { pe: usize, pid: u32 },
    /// A peer's process has been stopped for longer than the timeout.
    Stopped { pe: usize, pid: u32, for_: Duration },
    /// One of this crate's kernels recorded a failure (status record).
    Kernel([u32; 4]),
    /// One of this crate's kernels found that a peer made another call (its fingerprint
    /// differed): this PE's team index and fingerprint, the peer's.
    Mismatch {
        me: u32,
        mine: [u64; 2],
        peer: u32,
        theirs: [u64; 2],
    },
    /// [`Runtime::abort`](crate::Runtime::abort) was called.
    Aborted,
    /// A host-side wait for the other PEs (an agreement: allocating, making a team, ...)
    /// lasted longer than the timeout.
    HostWait {
        call: &'static str,
        team: String,
        after: Duration,
    },
    /// The PEs' symmetric heaps or calls diverged in a way that cannot be undone.
    Diverged { call: &'static str, detail: String },
}

impl Failure {
    fn error(&self) -> Error {
        match *self {
            Failure::Died { pe, pid } => Error::PeerFailed {
                pe: Some(pe),
                what: format!("exited (its process {pid} is gone)"),
            },
            Failure::Stopped { pe, pid, for_ } => Error::PeerFailed {
                pe: Some(pe),
                what: format!(
                    "has been stopped (process {pid}: SIGSTOP or a debugger) for {:.1} s, longer than the timeout",
                    for_.as_secs_f64()
                ),
            },
            Failure::Kernel([code, pe, epoch, what]) => Error::CollectiveFailed {
                failure: match code {
                    1 => "aborted",
                    2 => "timed out",
                    _ => "launched outside its limits",
                },
                team_pe: (pe != u32::MAX).then_some(pe as usize),
                waiting_for: match what {
                    1 => "its arrival",
                    2 => "its departure",
                    3 => "its data",
                    _ => "it",
                },
                epoch,
            },
            Failure::Mismatch {
                me,
                mine,
                peer,
                theirs,
            } => {
                use crate::collective::algo::fingerprint::Fingerprint;
                Error::CallMismatch {
                    team_pe: me as usize,
                    mine: Fingerprint(mine).to_string(),
                    peer: peer as usize,
                    theirs: Fingerprint(theirs).to_string(),
                }
            }
            Failure::Aborted => Error::CollectiveFailed {
                failure: "aborted",
                team_pe: None,
                waiting_for: "it",
                epoch: 0,
            },
            Failure::HostWait {
                call,
                ref team,
                after,
            } => Error::WaitTimedOut {
                call,
                waiting_for: format!("the other PEs of {team}"),
                after,
            },
            Failure::Diverged { call, ref detail } => Error::OutOfStep {
                call,
                detail: format!("{detail}; this runtime cannot run collectives any more"),
            },
        }
    }
}

/// A runtime's health: the control block its kernels poll, the peers it watches, and the
/// first failure seen.
pub(crate) struct Health {
    control: Control,
    timeout: Option<Duration>,
    /// Every PE's identity, by world PE, once exchanged.
    peers: OnceLock<Box<[Identity]>>,
    my_pe: usize,
    failure: OnceLock<(Failure, Instant)>,
    /// Whether the program has been handed the failure.
    delivered: AtomicBool,
    closing: AtomicBool,
    watchdog: Mutex<Option<JoinHandle<()>>>,
}

impl Health {
    /// The health of a starting runtime (its context current), with its watchdog running.
    pub(crate) fn start(my_pe: usize, timeout: Option<Duration>) -> Result<Arc<Self>> {
        let health = Arc::new(Health {
            control: Control::new()?,
            timeout,
            peers: OnceLock::new(),
            my_pe,
            failure: OnceLock::new(),
            delivered: AtomicBool::new(false),
            closing: AtomicBool::new(false),
            watchdog: Mutex::new(None),
        });
        let watched = Arc::clone(&health);
        let thread = std::thread::Builder::new()
            .name("nvshmem-rs watchdog".into())
            .spawn(move || watched.watch())
            .map_err(|e| Error::arg("Runtime::init", "watchdog", e.to_string()))?;
        *health.watchdog.lock().unwrap_or_else(|p| p.into_inner()) = Some(thread);
        Ok(health)
    }

    /// The device addresses of the abort word and of the status record.
    pub(crate) fn device_words(&self) -> (u64, u64) {
        (self.control.device, self.control.device + 4)
    }

    /// The kernels' wait limit in nanoseconds (0: none).
    pub(crate) fn timeout_ns(&self) -> u64 {
        self.timeout.map_or(0, |t| {
            u64::try_from(t.as_nanos()).unwrap_or(u64::MAX).max(1)
        })
    }

    pub(crate) fn timeout(&self) -> Option<Duration> {
        self.timeout
    }

    /// Starts watching the processes of the PEs on this host (`ids` by world PE).
    pub(crate) fn watch_peers(&self, ids: Box<[Identity]>) {
        let _ = self.peers.set(ids);
    }

    /// The failure, as an error handed to the program (so the watchdog leaves it to the
    /// program to end), if the runtime has failed.
    #[inline]
    pub(crate) fn check(&self) -> Result<()> {
        match self.failure.get() {
            None => Ok(()),
            Some((f, _)) => Err(self.deliver(f)),
        }
    }

    /// Out of line: every call checks, and the check's code stays small.
    #[cold]
    fn deliver(&self, f: &Failure) -> Error {
        self.delivered.store(true, Ordering::Relaxed);
        f.error()
    }

    /// Whether the runtime has failed (then nothing collective may be attempted).
    pub(crate) fn failed(&self) -> bool {
        self.failure.get().is_some()
    }

    /// [`Runtime::abort`](crate::Runtime::abort): the program knows, so the watchdog never
    /// ends the process for it.
    pub(crate) fn abort(&self) {
        self.delivered.store(true, Ordering::Relaxed);
        self.fail(Failure::Aborted);
    }

    fn fail(&self, failure: Failure) {
        self.control.abort();
        if self.failure.set((failure, Instant::now())).is_ok() {
            let (f, _) = self.failure.get().expect("just set");
            tracing::error!(pe = self.my_pe, "{}", f.error());
        }
    }

    /// Fails the runtime because a host-side wait for the PEs of `team` in `call` lasted
    /// `after`: the error to return.
    pub(crate) fn host_wait_timed_out(
        &self,
        call: &'static str,
        team: &str,
        after: Duration,
    ) -> Error {
        self.delivered.store(true, Ordering::Relaxed);
        self.fail(Failure::HostWait {
            call,
            team: team.to_string(),
            after,
        });
        self.failure.get().map_or_else(
            || Error::WaitTimedOut {
                call,
                waiting_for: format!("the other PEs of {team}"),
                after,
            },
            |(f, _)| f.error(),
        )
    }

    /// Fails the runtime because the PEs diverged in `call` beyond repair (their heaps differ):
    /// the error to return.
    pub(crate) fn diverged(&self, call: &'static str, detail: String) -> Error {
        self.delivered.store(true, Ordering::Relaxed);
        self.fail(Failure::Diverged { call, detail });
        self.failure
            .get()
            .map(|(f, _)| f.error())
            .expect("just failed")
    }

    /// Stops the watchdog (the runtime is closing).
    pub(crate) fn stop(&self) {
        self.closing.store(true, Ordering::Relaxed);
        let thread = self
            .watchdog
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let Some(t) = thread {
            t.thread().unpark();
            let _ = t.join();
        }
    }

    fn watch(&self) {
        let mut stopped_since: Vec<Option<Instant>> = Vec::new();
        while !self.closing.load(Ordering::Relaxed) {
            std::thread::park_timeout(POLL);
            if !self.failed() {
                if let Some(f) = self.look(&mut stopped_since) {
                    self.fail(f);
                }
            }
            if let Some((f, when)) = self.failure.get() {
                if !self.delivered.load(Ordering::Relaxed) && when.elapsed() >= GRACE {
                    eprintln!(
                        "nvshmem-rs: PE {}: {}; the program did not return to this library \
                         within {} s (it waits inside NVSHMEM, which cannot be ended): exiting \
                         with status 1",
                        self.my_pe,
                        f.error(),
                        GRACE.as_secs()
                    );
                    exit_now(1);
                }
            }
        }
    }

    /// A failure seen now, if any.
    fn look(&self, stopped_since: &mut Vec<Option<Instant>>) -> Option<Failure> {
        let status = self.control.status();
        if status[0] == FAIL_MISMATCH {
            // The kernel writes the rest of the record after the code (the code's CAS decides
            // which failure is recorded): a moment for those stores to land.
            std::thread::sleep(Duration::from_millis(1));
            let (theirs, mine, me) = self.control.mismatch();
            return Some(Failure::Mismatch {
                me,
                mine,
                peer: status[1],
                theirs,
            });
        }
        if status[0] != 0 {
            return Some(Failure::Kernel(status));
        }
        let peers = self.peers.get()?;
        let me = peers.get(self.my_pe)?;
        stopped_since.resize(peers.len(), None);
        for (pe, id) in peers.iter().enumerate() {
            if pe == self.my_pe || !me.same_host(id) {
                continue;
            }
            match peer_state(id) {
                PeerState::Alive => stopped_since[pe] = None,
                PeerState::Gone => return Some(Failure::Died { pe, pid: id.pid() }),
                PeerState::Stopped => {
                    let since = *stopped_since[pe].get_or_insert_with(Instant::now);
                    if self.timeout.is_some_and(|t| since.elapsed() >= t) {
                        return Some(Failure::Stopped {
                            pe,
                            pid: id.pid(),
                            for_: since.elapsed(),
                        });
                    }
                }
            }
        }
        None
    }
}

/// Ends the process at once, without the exit handlers: NVSHMEM's would wait for the peer
/// that failed.
fn exit_now(status: c_int) -> ! {
    extern "C" {
        fn _exit(status: c_int) -> !;
    }
    // SAFETY: `_exit` is async-signal-safe and takes any status; nothing runs after it.
    unsafe { _exit(status) }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A kernel's mismatch record becomes an error naming both calls, decoded.
    #[test]
    fn a_mismatch_names_both_calls() {
        use crate::{
            collective::{algo::fingerprint::Fingerprint, Collective},
            DataType, ReduceOp,
        };
        let fp = |count| {
            Fingerprint::new(
                Collective::AllReduce,
                DataType::F32,
                Some(ReduceOp::Sum),
                count,
                false,
                0,
                7,
            )
            .0
        };
        let e = Failure::Mismatch {
            me: 0,
            mine: fp(1048576),
            peer: 1,
            theirs: fp(1048577),
        }
        .error();
        assert!(matches!(
            e,
            Error::CallMismatch {
                team_pe: 0,
                peer: 1,
                ..
            }
        ));
        assert_eq!(
            e.to_string(),
            "mismatched collective calls: team PE 0 (this PE) called all_reduce of f32 sum, \
             1048576 elements on team 0x00000007; team PE 1 called all_reduce of f32 sum, \
             1048577 elements on team 0x00000007; this runtime cannot run collectives any more"
        );
    }

    #[test]
    fn timeouts_parse_with_and_without_units() {
        assert_eq!(parse_timeout("30"), Ok(Some(Duration::from_secs(30))));
        assert_eq!(parse_timeout("2.5"), Ok(Some(Duration::from_millis(2500))));
        assert_eq!(parse_timeout("500ms"), Ok(Some(Duration::from_millis(500))));
        assert_eq!(parse_timeout(" 5m "), Ok(Some(Duration::from_secs(300))));
        assert_eq!(parse_timeout("1h"), Ok(Some(Duration::from_secs(3600))));
        assert_eq!(parse_timeout("0"), Ok(None));
        assert_eq!(parse_timeout("never"), Ok(None));
        for bad in ["", "-1", "5 parsecs", "nan", "inf", "1e12", "s"] {
            assert!(parse_timeout(bad).is_err(), "{bad:?} was accepted");
        }
    }

    #[test]
    fn this_process_is_alive_and_a_dead_child_is_gone() {
        let me = Identity::own();
        assert_ne!(
            me,
            Identity::default(),
            "/proc gives this process an identity"
        );
        assert_eq!(me.pid(), std::process::id());
        assert!(me.same_host(&me));
        assert_eq!(peer_state(&me), PeerState::Alive);

        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        let start = read_stat(pid).map(|s| s.start);
        child.wait().unwrap();
        let mut id = me;
        id.words[3] = pid.into();
        id.words[4] = start.unwrap_or(1);
        assert_eq!(peer_state(&id), PeerState::Gone);
    }

    #[test]
    fn a_reused_pid_is_not_the_peer() {
        let mut other = Identity::own();
        other.words[4] += 1; // this PID, started at another time
        assert_eq!(peer_state(&other), PeerState::Gone);
    }

    #[test]
    fn a_stopped_process_is_seen_stopped() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let pid = child.id();
        let status = std::process::Command::new("kill")
            .args(["-STOP", &pid.to_string()])
            .status()
            .unwrap();
        assert!(status.success());
        let mut id = Identity::own();
        id.words[3] = pid.into();
        id.words[4] = read_stat(pid).unwrap().start;
        let deadline = Instant::now() + Duration::from_secs(5);
        while peer_state(&id) != PeerState::Stopped && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(peer_state(&id), PeerState::Stopped);
        child.kill().unwrap();
        child.wait().unwrap();
        assert_eq!(peer_state(&id), PeerState::Gone);
    }

    #[test]
    fn identities_of_other_hosts_are_not_checked() {
        let me = Identity::own();
        let mut far = me;
        far.words[0] ^= 1;
        assert!(!me.same_host(&far));
        assert!(!Identity::default().same_host(&Identity::default()));
    }
}
