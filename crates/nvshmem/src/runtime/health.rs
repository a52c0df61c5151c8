//! Noticing that the job is broken, so that no PE waits for ever.
//!
//! A PE learns that a peer will never arrive in four ways, all watched here:
//! - A wait of this crate's kernels (the NVLink collectives, and the stream's wait for a
//!   signal word) lasts longer than the timeout
//!   ([`RuntimeBuilder::timeout`](crate::RuntimeBuilder::timeout), [`TIMEOUT_VAR`], default
//!   [`DEFAULT_TIMEOUT`]): the kernel records what it waited for (the team's channel, the team
//!   PE, the epoch; or the signal word, the comparison, the value and the last value seen) in
//!   the status record and returns.
//! - A wait inside NVSHMEM's own kernels that this crate queued (its collectives on a team
//!   that is not peer-mapped, or forced; its quiet) lasts longer than the timeout: each such
//!   call is framed on the stream by two writes into host-mapped memory (a *progress ring*,
//!   [`Health::nvshmem_begin`]), so the watchdog sees when the stream reached the call and
//!   whether it has left it, and the bound counts from when the wait started, not from when
//!   it was queued behind other work. Nothing can end such a wait: the watchdog records the
//!   failure and ends the process [`GRACE`] later, printing what waited for what.
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
//! The status record is read whole: the kernel that claims it writes its ready word last,
//! with a release, and the watchdog reads that word first, with an acquire, and reads nothing
//! until it is set (the next poll retries).
//!
//! On a failure a watchdog thread sets the abort word, so every wait of this crate's kernels
//! ends at its next poll (and any started later ends at its first), and records the failure:
//! every later call on the runtime returns it ([`Error::PeerFailed`] or
//! [`Error::CollectiveFailed`]), and [`Runtime::async_error`](crate::Runtime::async_error) reports it. NVSHMEM's own
//! kernels and host calls (teams that are not peer-mapped, allocation, team creation) cannot
//! be ended from outside: if the program has not been handed the failure within [`GRACE`] of
//! its detection, or a call it queued is still inside one of NVSHMEM's kernels then (the
//! progress ring says so, and a stream stuck there can never be synchronised), it is stuck,
//! and the watchdog prints the failure and ends the process with status 1. Once failed, the runtime is not finalised when dropped (finalising
//! is collective and would wait for the dead peer); the process exits with NVSHMEM as it is,
//! as `nvshmem_global_exit` would leave it. If a call it framed is then still unfinished
//! inside NVSHMEM (or queued before it), the watchdog outlives the drop and ends the process
//! [`GRACE`] after the failure, naming that call: the process's exit handlers could otherwise
//! wait for it for ever.
use std::{
    os::raw::c_int,
    sync::{
        atomic::{AtomicBool, AtomicU32, Ordering},
        Arc, Mutex, OnceLock,
    },
    thread::JoinHandle,
    time::{Duration, Instant},
};

use cudarc::driver::sys;

use crate::{cmp::Cmp, Error, Result};

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
/// (`kernels/PROTOCOL.md`, "Waits"), then the progress ring of NVSHMEM's calls (begin and end
/// word of each slot), so the host can set the word whatever the GPU is doing and read what a
/// kernel recorded, and where a stream is, without a CUDA call.
struct Control {
    host: *mut u32,
    device: u64,
}

// SAFETY: the pointer is to pinned host memory owned by this struct for its whole life; the
// host only writes the abort word (volatile), reads the status record's ready word with an
// acquire and the rest of the record and the progress ring with volatile reads.
unsafe impl Send for Control {}
// SAFETY: as above.
unsafe impl Sync for Control {}

/// Words of the status record (`NVR_STATUS_WORDS` in `kernels/common.cuh`).
pub(crate) const STATUS_WORDS: usize = 26;
/// Where the status record keeps what (`NVR_ST_*` in `kernels/common.cuh`).
mod st {
    pub(super) const CODE: usize = 0;
    pub(super) const PEER: usize = 1;
    pub(super) const EPOCH: usize = 2;
    pub(super) const WHAT: usize = 3;
    pub(super) const WHERE: usize = 5;
    pub(super) const CMP: usize = 7;
    pub(super) const VALUE: usize = 8;
    pub(super) const SEEN: usize = 10;
    pub(super) const INDEX: usize = 12;
    pub(super) const READY: usize = 15;
    /// Four 64-bit words: the peer's fingerprint, then this PE's (a mismatch's record).
    pub(super) const FP: usize = 16;
    /// This PE's team index (a mismatch's record).
    pub(super) const ME: usize = 24;
}
/// `NVR_WAIT_SIGNAL`: the record is a signal wait's.
const WAIT_SIGNAL: u32 = 5;
/// Slots of the progress ring: NVSHMEM calls queued and not yet reached beyond this many on
/// one slot's turn are not watched (a slot is reused by the call `PROGRESS_SLOTS` later).
const PROGRESS_SLOTS: usize = 256;
/// The first word of the progress ring: a cache line of its own, after the abort word and
/// the status record, so that the GPU's writes of the ring never evict what the host reads
/// of the record.
const PROGRESS_AT: usize = 32;
const _: () = assert!(PROGRESS_AT > STATUS_WORDS && PROGRESS_AT % 16 == 0);
/// Words of the control block: abort, the status record, the progress ring.
const CONTROL_WORDS: usize = PROGRESS_AT + 2 * PROGRESS_SLOTS;
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
            .map_err(Error::cuda("cuMemHostAlloc (control block)"))?;
        let host = host.cast::<u32>();
        // SAFETY: `host` holds CONTROL_WORDS words, just allocated.
        unsafe { std::ptr::write_bytes(host, 0, CONTROL_WORDS) };
        let mut device = 0;
        // SAFETY: `host` is mapped pinned memory of the current context.
        let mapped = unsafe { sys::cuMemHostGetDevicePointer_v2(&mut device, host.cast(), 0) };
        let control = Control { host, device };
        mapped
            .result()
            .map_err(Error::cuda("cuMemHostGetDevicePointer (control block)"))?;
        Ok(control)
    }

    fn abort(&self) {
        // SAFETY: the abort word is live pinned memory; a volatile store is what the kernels'
        // polls see.
        unsafe { std::ptr::write_volatile(self.host, 1) };
    }

    /// The status record once a kernel has written it whole; `None` while none failed, or
    /// while the one that failed is still writing it (its ready word, written last with a
    /// release, is still 0: read again later).
    fn status(&self) -> Option<[u32; STATUS_WORDS]> {
        let record = self.host.wrapping_add(1);
        // SAFETY: the record is live pinned memory of the control block (STATUS_WORDS words
        // from word 1), aligned to 4 bytes; the GPU writes it with atomics and stores, the
        // host only reads it. An acquire load of the ready word orders the reads after it.
        let ready = unsafe { AtomicU32::from_ptr(record.add(st::READY)) }.load(Ordering::Acquire);
        if ready == 0 {
            return None;
        }
        // SAFETY: as above; volatile reads see what the kernel wrote before its release.
        Some(std::array::from_fn(|i| unsafe {
            std::ptr::read_volatile(record.add(i))
        }))
    }

    /// Slot `i`'s (begin, end) words of the progress ring.
    fn progress(&self, i: usize) -> (u32, u32) {
        let at = self.host.wrapping_add(PROGRESS_AT + 2 * i);
        // SAFETY: i < PROGRESS_SLOTS, so both words lie in the live control block; the GPU
        // writes them with stream memory operations, the host only reads them.
        unsafe {
            (
                std::ptr::read_volatile(at),
                std::ptr::read_volatile(at.add(1)),
            )
        }
    }

    /// The device address of slot `i`'s begin word (its end word follows).
    fn progress_device(&self, i: usize) -> u64 {
        self.device + 4 * (PROGRESS_AT + 2 * i) as u64
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
    /// One of this crate's kernels recorded a failure (status record: a wait, a launch check
    /// or another call's fingerprint), with the team whose channel it names, if known.
    Kernel {
        record: Recorded,
        team: Option<TeamName>,
        describe_call: DescribeCall,
    },
    /// A call this crate queued waited inside NVSHMEM's own kernels for longer than the
    /// timeout (seen in the progress ring): `what` is NVSHMEM's function, `team` the team it
    /// ran on (none for a quiet).
    InNvshmem {
        call: &'static str,
        what: &'static str,
        team: Option<Arc<str>>,
        after: Duration,
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
            Failure::Kernel {
                ref record,
                ref team,
                describe_call,
            } => record.error(team.as_ref(), describe_call),
            Failure::InNvshmem {
                call,
                what,
                ref team,
                after,
            } => Error::WaitTimedOut {
                call,
                waiting_for: match team {
                    Some(team) => format!(
                        "{team} inside NVSHMEM ({what}): a member never arrived, or this PE's \
                         puts never completed; nothing can end a wait inside NVSHMEM, so the \
                         process ends"
                    ),
                    None => format!(
                        "this PE's puts to complete inside NVSHMEM ({what}); nothing can end a \
                         wait inside NVSHMEM, so the process ends"
                    ),
                },
                after,
            },
            Failure::Aborted => Error::CollectiveFailed {
                failure: "aborted",
                team_pe: None,
                pe: None,
                team: String::new(),
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

/// A team as failure reports name it: its label ("the team of world PEs [0, 1]") and its
/// members' world PEs, by team index.
#[derive(Debug, Clone)]
pub(crate) struct TeamName {
    pub(crate) label: Arc<str>,
    pub(crate) world: Arc<[usize]>,
}

/// A status record, decoded.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Recorded {
    /// A wait (or a launch check) of an NVLink kernel.
    Collective {
        failure: &'static str,
        team_pe: Option<usize>,
        epoch: u32,
        waiting_for: &'static str,
        /// The team's channel (local address); 0 when the kernel had none to give.
        chan: u64,
    },
    /// A peer published another call's fingerprint (`kernels/PROTOCOL.md`, "Fingerprints"):
    /// this PE's team index and fingerprint, the peer's.
    Mismatch {
        me: u32,
        mine: [u64; 2],
        peer: u32,
        theirs: [u64; 2],
    },
    /// The stream's wait for a signal word (`wait.cu`).
    Signal {
        failure: &'static str,
        address: u64,
        index: u64,
        cmp: Option<Cmp>,
        value: u64,
        seen: u64,
    },
}

/// What a record's code says happened.
/// The status code of a peer found behind where the protocol guarantees it is
/// (`NVR_FAIL_ORDER`: an LL sender checks, after its stores, that the receiver had started the
/// run before; kernels/PROTOCOL.md, "LL packets").
const FAIL_ORDER: u32 = 5;

fn failure_name(code: u32) -> &'static str {
    match code {
        1 => "aborted",
        2 => "timed out",
        FAIL_ORDER => "broke the channel protocol (a peer was a run behind)",
        _ => "launched outside its limits",
    }
}

impl Recorded {
    /// Decodes a whole record (its ready word set); `None` for a record with no failure.
    pub(crate) fn decode(r: &[u32; STATUS_WORDS]) -> Option<Recorded> {
        let code = r[st::CODE];
        if code == 0 || r[st::READY] == 0 {
            return None;
        }
        let wide = |i: usize| u64::from(r[i]) | (u64::from(r[i + 1]) << 32);
        let failure = failure_name(code);
        if code == FAIL_MISMATCH {
            return Some(Recorded::Mismatch {
                me: r[st::ME],
                mine: [wide(st::FP + 4), wide(st::FP + 6)],
                peer: r[st::PEER],
                theirs: [wide(st::FP), wide(st::FP + 2)],
            });
        }
        if r[st::WHAT] == WAIT_SIGNAL {
            return Some(Recorded::Signal {
                failure,
                address: wide(st::WHERE),
                index: wide(st::INDEX),
                cmp: Cmp::from_raw(r[st::CMP]),
                value: wide(st::VALUE),
                seen: wide(st::SEEN),
            });
        }
        Some(Recorded::Collective {
            failure,
            team_pe: (r[st::PEER] != u32::MAX).then_some(r[st::PEER] as usize),
            epoch: r[st::EPOCH],
            waiting_for: match r[st::WHAT] {
                1 if code == FAIL_ORDER => "its arrival of the run before",
                1 => "its arrival",
                2 => "its departure",
                3 => "its data",
                4 => "its acknowledgement",
                _ => "it",
            },
            chan: wide(st::WHERE),
        })
    }

    /// The channel the record names, if any.
    fn chan(&self) -> Option<u64> {
        match *self {
            Recorded::Collective { chan, .. } if chan != 0 => Some(chan),
            _ => None,
        }
    }

    /// The error that reports it, the team (whose channel it names) known or not, a call's
    /// fingerprint read by `describe_call`.
    fn error(&self, team: Option<&TeamName>, describe_call: DescribeCall) -> Error {
        match *self {
            Recorded::Collective {
                failure,
                team_pe,
                epoch,
                waiting_for,
                ..
            } => Error::CollectiveFailed {
                failure,
                team_pe,
                pe: team_pe.and_then(|p| team.and_then(|t| t.world.get(p).copied())),
                team: team.map_or_else(String::new, |t| t.label.to_string()),
                waiting_for,
                epoch,
            },
            Recorded::Mismatch {
                me,
                mine,
                peer,
                theirs,
            } => Error::CallMismatch {
                team_pe: me as usize,
                mine: describe_call(mine),
                peer: peer as usize,
                theirs: describe_call(theirs),
            },
            Recorded::Signal {
                failure,
                address,
                index,
                cmp,
                value,
                seen,
            } => Error::SignalWaitFailed {
                failure,
                index,
                address,
                cmp,
                value,
                seen,
            },
        }
    }
}

/// A team's label in failure reports: its members' world PEs (the first 16 of a larger team).
pub(crate) fn team_label(world: &[usize], job: usize) -> String {
    if world.len() == job && world.iter().enumerate().all(|(i, &w)| i == w) {
        return format!("the team of every PE (world PEs 0..{job})");
    }
    let shown: Vec<String> = world.iter().take(16).map(|w| w.to_string()).collect();
    let more = if world.len() > 16 { ", ..." } else { "" };
    format!("the team of world PEs [{}{more}]", shown.join(", "))
}

/// What the host keeps of a slot of the progress ring: the call framed there last.
#[derive(Debug, Clone, Default)]
struct Slot {
    seq: u32,
    call: &'static str,
    what: &'static str,
    team: Option<Arc<str>>,
}

/// An NVSHMEM call framed on a stream ([`Health::nvshmem_begin`]): its slot and sequence
/// number, for [`Health::nvshmem_end`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct Framed {
    slot: usize,
    seq: u32,
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
    /// The failed runtime was dropped with a framed NVSHMEM call unfinished: the watchdog
    /// goes on, to end the process once that call is stuck (see [`Health::stop`]).
    dropped_stuck: AtomicBool,
    watchdog: Mutex<Option<JoinHandle<()>>>,
    /// The teams of the channels, by channel address, for failure reports.
    channels: Mutex<Vec<(u64, TeamName)>>,
    /// The next sequence number of the progress ring (0 is never used: a slot never written).
    next_seq: AtomicU32,
    /// What was framed in each slot of the progress ring.
    slots: Box<[Mutex<Slot>]>,
    /// Whether the driver refused a frame's write: NVSHMEM's calls go unframed since.
    unframed: AtomicBool,
    describe_call: DescribeCall,
}

/// How a call's fingerprint (`kernels/PROTOCOL.md`, "Fingerprints") reads in an error: the
/// collective layer's decoding, handed to [`Health::start`] because the runtime, below that
/// layer, does not know the collectives.
pub(crate) type DescribeCall = fn([u64; 2]) -> String;

impl Health {
    /// The health of a starting runtime (its context current), with its watchdog running.
    pub(crate) fn start(
        my_pe: usize,
        timeout: Option<Duration>,
        describe_call: DescribeCall,
    ) -> Result<Arc<Self>> {
        let health = Arc::new(Health {
            control: Control::new()?,
            timeout,
            peers: OnceLock::new(),
            my_pe,
            failure: OnceLock::new(),
            delivered: AtomicBool::new(false),
            closing: AtomicBool::new(false),
            dropped_stuck: AtomicBool::new(false),
            watchdog: Mutex::new(None),
            channels: Mutex::new(Vec::new()),
            next_seq: AtomicU32::new(1),
            slots: (0..PROGRESS_SLOTS).map(|_| Mutex::default()).collect(),
            unframed: AtomicBool::new(false),
            describe_call,
        });
        let watched = Arc::clone(&health);
        let thread = std::thread::Builder::new()
            .name("nvshmem-rs watchdog".into())
            .spawn(move || watched.watch())
            .map_err(|e| Error::arg("Runtime::init", "watchdog", e.to_string()))?;
        *health.watchdog.lock().unwrap_or_else(|p| p.into_inner()) = Some(thread);
        Ok(health)
    }

    /// The device addresses of the abort word and of the status record (which follows it:
    /// the abort word's address is the control block's, as `nvr_signal_wait` takes it).
    pub(crate) fn device_words(&self) -> (u64, u64) {
        (self.control.device, self.control.device + 4)
    }

    /// Names the team whose NVLink kernels use the channel at `chan`, for failure reports
    /// (replacing the team that held it before).
    pub(crate) fn name_channel(&self, chan: u64, team: TeamName) {
        let mut channels = self.channels.lock().unwrap_or_else(|p| p.into_inner());
        channels.retain(|(c, _)| *c != chan);
        channels.push((chan, team));
    }

    fn channel_team(&self, chan: u64) -> Option<TeamName> {
        let channels = self.channels.lock().unwrap_or_else(|p| p.into_inner());
        channels
            .iter()
            .find(|(c, _)| *c == chan)
            .map(|(_, t)| t.clone())
    }

    /// A failure recorded in the status record, if any (whole: see [`Control::status`]).
    fn recorded(&self) -> Option<Failure> {
        let record = Recorded::decode(&self.control.status()?)?;
        let team = record.chan().and_then(|c| self.channel_team(c));
        Some(Failure::Kernel {
            record,
            team,
            describe_call: self.describe_call,
        })
    }

    /// [`Health::check`], after also reading the status record now rather than at the
    /// watchdog's next look: for a call that has just waited for the GPU (a copy to the host),
    /// so that what a kernel before it recorded is the call's error.
    pub(crate) fn check_now(&self) -> Result<()> {
        if self.failure.get().is_none() {
            if let Some(f) = self.recorded() {
                self.fail(f);
            }
        }
        self.check()
    }

    /// Frames the NVSHMEM call `what` of `call` (on `team`, or none for a quiet) that is about
    /// to be queued on `stream`: a write of its sequence number into its slot's begin word,
    /// which the watchdog reads as "the stream has reached the call" until the end word
    /// ([`Health::nvshmem_end`], queued after the call) equals it. Not for a stream being
    /// captured: a graph would write the same numbers at every launch. `None` where the
    /// driver refuses the write (stream memory operations unsupported): the call then goes
    /// unframed, its wait unbounded, as before this ring existed, and a warning says so once.
    ///
    /// # Safety
    /// `stream` is live and its context (the runtime's) current.
    pub(crate) unsafe fn nvshmem_begin(
        &self,
        stream: sys::CUstream,
        call: &'static str,
        what: &'static str,
        team: Option<&Arc<str>>,
    ) -> Option<Framed> {
        if self.unframed.load(Ordering::Relaxed) {
            return None;
        }
        let mut seq = self.next_seq.fetch_add(1, Ordering::Relaxed);
        if seq == 0 {
            seq = self.next_seq.fetch_add(1, Ordering::Relaxed);
        }
        let slot = seq as usize % PROGRESS_SLOTS;
        // The record goes in before the write is queued, so that the watchdog never reads a
        // begin word the stream has written without its record.
        *self.slots[slot].lock().unwrap_or_else(|p| p.into_inner()) = Slot {
            seq,
            call,
            what,
            team: team.cloned(),
        };
        let framed = Framed { slot, seq };
        // SAFETY: the begin word is in the runtime's mapped control block, which outlives
        // every stream's work (a healthy runtime closes after the GPU is idle; a failed one
        // leaks it); the caller guarantees the stream.
        match unsafe { self.write_progress(stream, framed, 0) } {
            Ok(()) => Some(framed),
            Err(e) => {
                // No begin word was queued, so no end word will come: a record left here
                // would read as unfinished for ever (and the watchdog blame a call that never
                // ran). The slot is emptied, unless a later call has claimed it since.
                let mut kept = self.slots[slot].lock().unwrap_or_else(|p| p.into_inner());
                if kept.seq == seq {
                    *kept = Slot::default();
                }
                drop(kept);
                if !self.unframed.swap(true, Ordering::Relaxed) {
                    tracing::warn!(
                        pe = self.my_pe,
                        "{e}: waits inside NVSHMEM's calls are not bounded by the timeout"
                    );
                }
                None
            }
        }
    }

    /// Ends the frame of [`Health::nvshmem_begin`]: queued after the NVSHMEM call.
    ///
    /// # Safety
    /// As for [`Health::nvshmem_begin`].
    pub(crate) unsafe fn nvshmem_end(&self, stream: sys::CUstream, framed: Framed) -> Result<()> {
        // SAFETY: as in `nvshmem_begin`.
        unsafe { self.write_progress(stream, framed, 1) }
    }

    /// Queues the write of `framed`'s number into word `which` (0 begin, 1 end) of its slot.
    ///
    /// # Safety
    /// As for [`Health::nvshmem_begin`].
    unsafe fn write_progress(
        &self,
        stream: sys::CUstream,
        framed: Framed,
        which: u64,
    ) -> Result<()> {
        let at = self.control.progress_device(framed.slot) + 4 * which;
        // SAFETY: `at` is a word of the mapped control block (live as said in
        // `nvshmem_begin`); the caller guarantees a live stream in the current context.
        unsafe { sys::cuStreamWriteValue32_v2(stream, at, framed.seq, 0) }
            .result()
            .map_err(Error::cuda(
                "cuStreamWriteValue32 (progress of an NVSHMEM call)",
            ))
    }

    /// Whether a call framed in the progress ring has not been left by its stream yet (queued,
    /// or inside NVSHMEM): the stream will still write into the control block.
    pub(crate) fn framed_unfinished(&self) -> bool {
        self.unfinished().is_some()
    }

    /// Whether a stream is inside one of NVSHMEM's calls framed by this crate now.
    fn in_nvshmem(&self) -> bool {
        (0..PROGRESS_SLOTS).any(|i| {
            let (begin, end) = self.control.progress(i);
            begin != 0 && begin != end
        })
    }

    /// A call framed in the progress ring that the stream has not left (inside NVSHMEM now,
    /// or queued and not reached yet): the record of the first such slot by slot index (not
    /// necessarily the oldest call), if any.
    fn unfinished(&self) -> Option<Slot> {
        (0..PROGRESS_SLOTS).find_map(|i| {
            let slot = self.slots[i].lock().unwrap_or_else(|p| p.into_inner());
            let (_, end) = self.control.progress(i);
            (slot.seq != 0 && end != slot.seq).then(|| slot.clone())
        })
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

    /// Stops the watchdog (the runtime is closing), unless the runtime has failed with a
    /// call it framed still unfinished inside NVSHMEM (or queued before it): nothing can end
    /// that call, and the process's exit (CUDA's and NVSHMEM's exit handlers) may wait for it
    /// for ever, so the watchdog goes on, detached, and ends the process [`GRACE`] after the
    /// failure, naming the call, as it would have without the drop.
    pub(crate) fn stop(&self) {
        if self.failed() && self.unfinished().is_some() {
            self.dropped_stuck.store(true, Ordering::Relaxed);
            let thread = self
                .watchdog
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .take();
            drop(thread); // detached: it holds its own reference to this health
            return;
        }
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
        let mut waits = vec![(0u32, Instant::now()); PROGRESS_SLOTS];
        while !self.closing.load(Ordering::Relaxed) {
            std::thread::park_timeout(POLL);
            if self.dropped_stuck.load(Ordering::Relaxed) && self.unfinished().is_none() {
                return; // the call it stayed for has ended after all
            }
            if !self.failed() {
                if let Some(f) = self
                    .look(&mut stopped_since)
                    .or_else(|| self.look_in_nvshmem(&mut waits))
                {
                    self.fail(f);
                }
            }
            if let Some((f, when)) = self.failure.get() {
                // Handed to the program, but a stream still inside NVSHMEM's kernels: the
                // program cannot synchronise it, nor end it; it is stuck as surely.
                // Dropped with such a call unfinished: the exit may wait for it.
                let stuck = !self.delivered.load(Ordering::Relaxed)
                    || self.in_nvshmem()
                    || (self.dropped_stuck.load(Ordering::Relaxed) && self.unfinished().is_some());
                if stuck && when.elapsed() >= GRACE {
                    let waiting = match self.unfinished() {
                        Some(slot) => format!(
                            "; {} still waits inside NVSHMEM ({}){}",
                            slot.call,
                            slot.what,
                            slot.team.map_or(String::new(), |t| format!(" on {t}"))
                        ),
                        None => String::new(),
                    };
                    eprintln!(
                        "nvshmem-rs: PE {}: {}{waiting}; the program did not return to this \
                         library within {} s, or still waits inside NVSHMEM, which cannot be \
                         ended: exiting with status 1",
                        self.my_pe,
                        f.error(),
                        GRACE.as_secs()
                    );
                    exit_now(1);
                }
            }
        }
    }

    /// A call framed in the progress ring that has been inside NVSHMEM for longer than the
    /// timeout, counted from when this watchdog first saw the stream there (within [`POLL`]
    /// of its arrival). `waits` keeps, per slot, the number seen in flight and since when.
    fn look_in_nvshmem(&self, waits: &mut [(u32, Instant)]) -> Option<Failure> {
        let timeout = self.timeout?;
        for (i, seen) in waits.iter_mut().enumerate() {
            let (begin, end) = self.control.progress(i);
            if begin == 0 || begin == end {
                seen.0 = 0;
                continue;
            }
            if seen.0 != begin {
                *seen = (begin, Instant::now());
                continue;
            }
            let after = seen.1.elapsed();
            if after < timeout {
                continue;
            }
            let slot = self.slots[i]
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clone();
            let (call, what, team) = if slot.seq == begin {
                (slot.call, slot.what, slot.team)
            } else {
                ("a collective", "an NVSHMEM call", None)
            };
            return Some(Failure::InNvshmem {
                call,
                what,
                team,
                after,
            });
        }
        None
    }

    /// A failure seen now, if any.
    fn look(&self, stopped_since: &mut Vec<Option<Instant>>) -> Option<Failure> {
        if let Some(f) = self.recorded() {
            return Some(f);
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

    /// The collective layer's decoding, as the runtime hands it to [`Health::start`].
    fn described(words: [u64; 2]) -> String {
        crate::collective::algo::fingerprint::describe(words)
    }

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
        let e = Recorded::Mismatch {
            me: 0,
            mine: fp(1048576),
            peer: 1,
            theirs: fp(1048577),
        }
        .error(None, described);
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

    /// A record as a kernel writes it (common.cuh's NVR_ST_* layout, wait.cu's signal words).
    fn record(code: u32, what: u32, words: &[(usize, u64)]) -> [u32; STATUS_WORDS] {
        let mut r = [0u32; STATUS_WORDS];
        r[st::CODE] = code;
        r[st::WHAT] = what;
        for &(i, v) in words {
            r[i] = v as u32;
            if matches!(i, st::WHERE | st::VALUE | st::SEEN | st::INDEX) {
                r[i + 1] = (v >> 32) as u32;
            }
        }
        r[st::READY] = code;
        r
    }

    #[test]
    fn a_record_is_read_only_once_its_ready_word_is_set() {
        let mut r = record(2, 1, &[(st::PEER, 1), (st::EPOCH, 7)]);
        assert!(Recorded::decode(&r).is_some());
        // The code claimed, the rest still being written: nothing yet (the watchdog's next
        // poll reads it again), never a report of PE 0 at epoch 0.
        r[st::READY] = 0;
        assert_eq!(Recorded::decode(&r), None);
        assert_eq!(Recorded::decode(&[0; STATUS_WORDS]), None);
    }

    /// The failure codes the host decodes are the kernels' own.
    #[test]
    fn the_failure_codes_are_the_kernels_own() {
        use crate::kernels::common_define;
        assert_eq!(common_define("NVR_FAIL_MISMATCH"), FAIL_MISMATCH as usize);
        assert_eq!(common_define("NVR_FAIL_ORDER"), FAIL_ORDER as usize);
        assert_eq!(common_define("NVR_STATUS_WORDS"), STATUS_WORDS);
    }

    /// A sender that found its receiver a run behind (which the protocol rules out) fails
    /// the call with an error that says so, never a result reported as good.
    #[test]
    fn a_peer_out_of_order_is_reported_as_such() {
        let r = record(FAIL_ORDER, 1, &[(st::PEER, 1), (st::EPOCH, 9)]);
        let rec = Recorded::decode(&r).unwrap();
        assert_eq!(
            rec,
            Recorded::Collective {
                failure: "broke the channel protocol (a peer was a run behind)",
                team_pe: Some(1),
                epoch: 9,
                waiting_for: "its arrival of the run before",
                chan: 0,
            }
        );
        let e = rec.error(None, described).to_string();
        assert!(
            e.starts_with(
                "a collective broke the channel protocol (a peer was a run behind) on team PE \
                 1 while waiting for its arrival of the run before (epoch 9)"
            ),
            "{e}"
        );
    }

    #[test]
    fn a_collective_record_names_the_pe_the_epoch_and_the_team() {
        let chan = 0x7f00_0000_1000u64;
        let r = record(2, 3, &[(st::PEER, 1), (st::EPOCH, 41), (st::WHERE, chan)]);
        let rec = Recorded::decode(&r).unwrap();
        assert_eq!(
            rec,
            Recorded::Collective {
                failure: "timed out",
                team_pe: Some(1),
                epoch: 41,
                waiting_for: "its data",
                chan,
            }
        );
        assert_eq!(rec.chan(), Some(chan));
        let team = TeamName {
            label: team_label(&[2, 5], 8).into(),
            world: Arc::from([2usize, 5]),
        };
        let e = rec.error(Some(&team), described).to_string();
        assert!(
            e.starts_with(
                "a collective timed out on team PE 1 (world PE 5) of the team of world PEs \
                 [2, 5] while waiting for its data (epoch 41)"
            ),
            "{e}"
        );
        // A launch check names no PE and, without a channel, no team.
        let r = record(3, 0, &[(st::PEER, u32::MAX as u64)]);
        let rec = Recorded::decode(&r).unwrap();
        assert_eq!(rec.chan(), None);
        assert_eq!(
            rec.error(None, described).to_string(),
            "a collective launched outside its limits while waiting for it (epoch 0)"
        );
    }

    #[test]
    fn a_signal_record_names_the_word_the_comparison_and_the_values() {
        let r = record(
            2,
            WAIT_SIGNAL,
            &[
                (st::WHERE, 0x7f00_0000_2008),
                (st::CMP, 5),
                (st::VALUE, 1 << 40),
                (st::SEEN, 3),
                (st::INDEX, 1),
            ],
        );
        let rec = Recorded::decode(&r).unwrap();
        assert_eq!(
            rec,
            Recorded::Signal {
                failure: "timed out",
                address: 0x7f00_0000_2008,
                index: 1,
                cmp: Some(Cmp::Ge),
                value: 1 << 40,
                seen: 3,
            }
        );
        let e = rec.error(None, described).to_string();
        assert!(
            e.starts_with(
                "signal_wait_until timed out waiting for signal word 1 (at 0x7f0000002008) to be \
                 ge 1099511627776; its last value seen was 3"
            ),
            "{e}"
        );
    }

    #[test]
    fn teams_are_labelled_by_their_world_pes() {
        assert_eq!(
            team_label(&[0, 1, 2], 3),
            "the team of every PE (world PEs 0..3)"
        );
        assert_eq!(team_label(&[0, 2], 4), "the team of world PEs [0, 2]");
        assert_eq!(team_label(&[1, 0], 2), "the team of world PEs [1, 0]");
        let big: Vec<usize> = (0..40).rev().collect();
        assert!(team_label(&big, 40).ends_with("24, ...]"));
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
