//! The one error type of this crate, and what each misuse of the API gets.
//!
//! ## Misuse
//!
//! Every argument is checked before anything is queued or any collective is entered. The
//! checks of a collective call (a collective, an allocation, a team split, reserving
//! scratch) depend only on what every PE passes alike and on state every PE keeps alike (the
//! team, the heap's ledger, the scratch reserved, the algorithm forced), so every PE refuses
//! the same call with the same error, and none is left waiting for another: property tests
//! judge generated argument sets, the hostile ones included, as every PE of teams of 1 to 8,
//! and check that. Two refusals can differ between PEs, because what they look at does: the
//! stream (a stream of another device passed on one PE only is refused on that PE alone),
//! and NVSHMEM itself refusing an allocation the ledger allowed. `{call}` is the public call
//! (`all_reduce`, `fcollect_in_place`, ...); `InvalidArgument`'s message is
//! `{call}: invalid {arg}: {reason}`.
//!
//! | misuse | error | the message says |
//! |---|---|---|
//! | **Collectives** ([`Team`](crate::Team)'s methods) | | |
//! | an array or view of another runtime | [`InvalidArgument`](Error::InvalidArgument) `src`, `dst` or `buf` | "belongs to another NVSHMEM runtime" |
//! | a stream of another device (or context) | [`InvalidArgument`](Error::InvalidArgument) `stream` | "belongs to CUDA device {d} but this PE's NVSHMEM runs on device {e}" |
//! | `dst` shorter or longer than `src` (all-reduce, reduce, broadcast, alltoall) | [`InvalidArgument`](Error::InvalidArgument) `dst` | "has {got} elements but needs {want} (as many as src)" |
//! | destination shorter (or longer) than the collective needs: fcollect's or gather's `dst` not `n_pes` x `src` | [`InvalidArgument`](Error::InvalidArgument) `dst` | "has {got} elements but needs {want} (the team's PEs x src's length)", or "{n} PEs x {count} elements overflow" |
//! | reduce-scatter's or scatter's `src` not `n_pes` x `dst` | [`InvalidArgument`](Error::InvalidArgument) `src` | "has {got} elements but needs {want} (the team's PEs x dst's length)" |
//! | alltoall's length, or an in-place blocked buffer's, not a multiple of the team size | [`InvalidArgument`](Error::InvalidArgument) `src` or `buf` | "has {len} elements, not a multiple of the team's {n} PEs (one equal block per PE)" |
//! | source and destination overlap (not the in-place form) | [`InvalidArgument`](Error::InvalidArgument) `dst` | "overlaps src (src {addr}+{bytes} B, dst ...); " and the rule: "in place means src and dst are the same array", "only the in-place form (fcollect_in_place, gather_in_place) may pass this PE's block of dst as src" (reduce-scatter, scatter alike), "alltoall cannot run in place" |
//! | root ≥ team size | [`InvalidArgument`](Error::InvalidArgument) `root` | "{root} is not a PE of the team, which has {n} PEs (0..{n})" |
//! | an operator the element type does not define (`Xor` of `f32`, `Sum` of `Bool8`) | [`InvalidArgument`](Error::InvalidArgument) `op` | "{op} is not defined for {type} (bitwise operators need an integer type)" or "(truth values have and, or, min and max)" |
//! | `PreMulSum` with a NaN or infinite scale | [`InvalidArgument`](Error::InvalidArgument) `op` | "premul_sum's scale must be finite, not {s}" |
//! | `PreMulSum` of a float type but `f64` with a scale f32 cannot hold (the kernels scale those types in f32): beyond ±3.4028235e38, or not 0 but below 1e-45 | [`InvalidArgument`](Error::InvalidArgument) `op` | "premul_sum's scale {s} becomes {inf or 0} in f32, the type {type} is scaled in: it must be 0 or of a magnitude from 1e-45 to 3.4028235e38" |
//! | `PreMulSum` with a non-integer (or out of range, or negative for unsigned) scale on an integer type | [`InvalidArgument`](Error::InvalidArgument) `op` | "premul_sum's scale {s} must be a whole number in -2^63..2^63 for {type} (integer data is scaled by an integer)" (`0..2^64` for unsigned types) |
//! | shapes that break the call's rule ([`collective`](crate::collective), "Shapes") | [`InvalidArgument`](Error::InvalidArgument) `src`, `dst` or `buf` | "has shape {d} but src has {s} (the same shape is needed)", "has shape {d} but needs {want} (src's shape {s} with its leading dimension times the team's {n} PEs)" (or "divided by"), "leading dimension {d0} (shape {s}) is not a multiple of the team's {n} PEs (one block of whole rows per PE)", "the team's {n} PEs x leading dimension {d0} (shape {s}) overflow" |
//! | a buffer past the end of the address space (no array is: hostile input only) | [`InvalidArgument`](Error::InvalidArgument) `src`, `dst` or `buf` | "{len} elements of {size} bytes from {addr} run past the end of the address space" |
//! | a [`CallSpec`](crate::collective::CallSpec) whose arrays need more bytes than the symmetric heap has ([`Team::plan_of`](crate::Team::plan_of)) | [`InvalidArgument`](Error::InvalidArgument) `count` | "blocks of {count} elements of {type} need {bytes} bytes of arrays, more than the symmetric heap's {size} bytes hold (RuntimeBuilder::heap_size)" |
//! | a reduction no algorithm can run (fp8 on a team without peer access) | [`Unsupported`](Error::Unsupported) | "{collective} of {type} by {op} (no algorithm accepts it; {algorithm}: {why}; ...) is not supported yet" |
//! | a forced algorithm that refuses the call | [`AlgorithmRefused`](Error::AlgorithmRefused) | "the forced algorithm {name} cannot run this call: {why}" |
//! | too little collective scratch reserved (reduce, premul_sum reduce-scatter, fp8 all-reduce in place) | [`ScratchTooSmall`](Error::ScratchTooSmall) | "{call} needs {n} bytes of collective scratch but {r} are reserved: call Runtime::reserve_scratch({n}) on every PE first" |
//! | **Graphs** ([`Runtime::capture`](crate::Runtime::capture)) | | |
//! | a call queued on a stream that a capture this crate did not start holds (cudarc's `begin_capture`) | [`CaptureNotTracked`](Error::CaptureNotTracked) | "the stream is being captured into a CUDA graph that nvshmem did not start: capture with Runtime::capture, ..." |
//! | a copy between host memory and a symmetric array, or a put or get on registered memory, in a capture | [`Unsupported`](Error::Unsupported) | "a copy between host memory and a symmetric array in a CUDA graph ...", "registered memory in a CUDA graph ..." |
//! | capturing a stream that is already being captured | [`InvalidArgument`](Error::InvalidArgument) `stream` | "is already being captured" |
//! | **Agreements between PEs** (allocating, freeing, making a team, starting, finalising) | | |
//! | PEs making different collective calls at one point (one allocates, another makes a team), or allocating different sizes | [`OutOfStep`](Error::OutOfStep) | "the PEs are out of step: PE {pe} made allocation {k} of {b} bytes where this PE made allocation {k} of {c} bytes: ...", "PE {pe} (of the team) was making a team at this point, not an allocation: ..." |
//! | members passing different arguments to a team-making call | [`OutOfStep`](Error::OutOfStep) | "parent PE {pe} passed {args} where this PE passed {args}: every member must pass the same arguments" |
//! | a PE that never arrives within the timeout | [`WaitTimedOut`](Error::WaitTimedOut) (the runtime fails) | "{call}: timed out after {t} waiting for the other PEs of {team}; ..." |
//! | **Waits on a stream** (every one ends within the timeout, counted from when the stream reaches it) | | |
//! | a member that never joins a collective of this crate's kernels | [`CollectiveFailed`](Error::CollectiveFailed) (the runtime fails) | "a collective timed out on team PE {p} (world PE {w}) of {team} while waiting for {its arrival, its data, ...} (epoch {e}): ..." |
//! | a signal that is never sent ([`Runtime::signal_wait_until`](crate::Runtime::signal_wait_until)) | [`SignalWaitFailed`](Error::SignalWaitFailed) (the runtime fails; the copy to the host after it returns it) | "signal_wait_until timed out waiting for signal word {i} (at {addr}) to be {cmp} {value}; its last value seen was {seen} ..." |
//! | a member that never joins one of NVSHMEM's collectives, a put that never completes in NVSHMEM's quiet | [`WaitTimedOut`](Error::WaitTimedOut), printed, and the process ends with status 1 [`GRACE`](crate::runtime::GRACE) later (nothing can end a wait inside NVSHMEM) | "{call}: timed out after {t} waiting for {team} inside NVSHMEM ({function}): ..." |
//! | **Forcing algorithms** | | |
//! | an unknown algorithm name ([`Runtime::set_algorithm`](crate::Runtime::set_algorithm), [`RuntimeBuilder::algorithm`](crate::RuntimeBuilder::algorithm)) | [`InvalidArgument`](Error::InvalidArgument) `algorithm` | "{collective} has no algorithm \"{name}\"; it has auto, {names}" |
//! | the same, or a pair that is not `collective=algorithm`, in `NVSHMEM_RS_ALGORITHMS` | [`Environment`](Error::Environment) | the variable, its value, and the reason above, or "\"{pair}\" is not collective=algorithm", or the unknown collective |
//! | `NVSHMEM_RS_PDL` other than `1`/`on`/`true`/`yes` or `0`/`off`/`false`/`no` | [`Environment`](Error::Environment) | the variable, its value, and what it expects |
//! | an unknown collective name ([`Collective`](crate::collective::Collective)'s `from_str`) | [`InvalidArgument`](Error::InvalidArgument) `collective` | "\"{name}\": expected one of all_reduce, reduce, ..." |
//! | **Memory** | | |
//! | heap exhausted (allocating, [`Runtime::reserve_scratch`](crate::Runtime::reserve_scratch)) | [`OutOfHeap`](Error::OutOfHeap) | "symmetric heap exhausted: {n} bytes requested, {used} of {size} bytes in use" |
//! | a length whose bytes overflow a `usize` | [`InvalidArgument`](Error::InvalidArgument) `len` (call `alloc`) | "{len} elements of {type} overflow the address space" |
//! | a shape that does not hold the array's elements ([`SymArray::with_shape`](crate::SymArray::with_shape), [`SymArray::reshape`](crate::SymArray::reshape)) | [`InvalidArgument`](Error::InvalidArgument) `shape` | "{shape} has {n} elements but the array has {len}", "[] has no dimensions; ...", "{shape} has more elements than a usize counts ..." |
//! | a view's range outside the array | [`InvalidArgument`](Error::InvalidArgument) `range` (call `view`) | "{start}..{end} is outside 0..{len}" |
//! | a host slice of another length (`copy_from_host`, `copy_to_host`) | [`InvalidArgument`](Error::InvalidArgument) `src` or `dst` | "has {got} elements but needs {len} (the array's length)" |
//! | **RMA** ([`rma`](crate::rma)) | | |
//! | put or get with lengths that differ | [`InvalidArgument`](Error::InvalidArgument) `src` | "has {got} elements but needs {want} (dst's length)" |
//! | a PE outside the job (put, get, signals, `peer_ptr`) | [`InvalidArgument`](Error::InvalidArgument) `pe` | "{pe} is not a PE of the job, which has {n} PEs (0..{n})" |
//! | a signal word outside its array | [`InvalidArgument`](Error::InvalidArgument) `index` (call `signal`) | "{i} is outside the signal array of {len} words" |
//! | a signal word or `to` team of another runtime | [`InvalidArgument`](Error::InvalidArgument) `signal` or `to` | "belongs to another NVSHMEM runtime" |
//! | **Teams** ([`team`](crate::team)) | | |
//! | `split_strided` with stride or size 0, a start outside, or a last PE outside the team | [`InvalidArgument`](Error::InvalidArgument) `stride`, `size` or `start` | "must be at least 1", "PE {start} is outside the parent team of {n} PEs", "{size} PEs from PE {start} with stride {stride} end at PE {last}, outside the parent team of {n} PEs" |
//! | `split_2d` with `xrange` 0 | [`InvalidArgument`](Error::InvalidArgument) `xrange` | "must be at least 1" |
//! | `from_pes` with an empty list, a PE outside the team, a PE twice | [`InvalidArgument`](Error::InvalidArgument) `pes` | "the list is empty", "entry {i} is PE {pe}, outside the parent team of {n} PEs", "PE {pe} is listed twice (again at entry {i})" |
//! | `translate_pe` with a PE outside the team | [`InvalidArgument`](Error::InvalidArgument) `pe` | "{pe} is not a PE of the team, which has {n} PEs (0..{n})" |
//! | **Starting and stopping** ([`runtime`](crate::runtime)) | | |
//! | `RuntimeBuilder::heap_size(0)` | [`InvalidArgument`](Error::InvalidArgument) `bytes` | "must be above 0" |
//! | `RuntimeBuilder::device` past the visible devices | [`InvalidArgument`](Error::InvalidArgument) `device` | "{d} is not below the {count} visible devices" |
//! | `NVSHMEM_SYMMETRIC_SIZE` that is not a size | [`Environment`](Error::Environment) | "expected a byte count such as 1073741824, 512M or 2G" |
//! | `NVSHMEM_RS_BOOTSTRAP` (or a bootstrap name) unknown | [`Environment`](Error::Environment) | "expected one of: auto, mpi, pmi, pmi2, pmix, env, single" |
//! | a launcher variable (`RANK`, `WORLD_SIZE`, `LOCAL_RANK`, ...) that is not a number | [`Environment`](Error::Environment) | "expected a non-negative integer" |
//! | `RANK` ≥ `WORLD_SIZE`, a bad `MASTER_PORT`, a bad `NVSHMEM_RS_BOOTSTRAP_TIMEOUT` | [`Environment`](Error::Environment) | "must be below WORLD_SIZE={n}, which must be at least 1", "expected a TCP port, 1 to 65535", "expected seconds, from 1e-9 to below 2^64" |
//! | the env bootstrap without `RANK`, `WORLD_SIZE`, `MASTER_ADDR` or `MASTER_PORT` | [`Bootstrap`](Error::Bootstrap) | "{var} is not set (the env bootstrap needs RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT)" |
//! | a second runtime in the process | [`AlreadyInitialized`](Error::AlreadyInitialized) | "NVSHMEM is already initialised in this process ({why}); it can be initialised only once" |
//! | [`Runtime::finalize`](crate::Runtime::finalize) while arrays, teams or clones still use it | [`RuntimeInUse`](Error::RuntimeInUse) | "the runtime cannot be finalised while {n} other handles (arrays, teams, timers) still use it" |
//! | no NVIDIA GPU or driver | [`NoGpu`](Error::NoGpu) | "this program needs an NVIDIA GPU and its driver: {why}" |
//! | more PEs on a node than GPUs, not a multiple of them (PE `local rank % GPUs` on each) | [`UnevenGpuSharing`](Error::UnevenGpuSharing) | "{n} PEs on this node over {g} GPUs put {most} PEs on some GPUs and {fewest} on others, where NVSHMEM never returns from its start ..." |
//! | several PEs on one GPU without CUDA MPS | [`GpuSharedWithoutMps`](Error::GpuSharedWithoutMps) | "{n} PEs share CUDA device {d} without CUDA MPS, where NVSHMEM cannot run collectives: start the MPS control daemon ..." |
//! | PEs whose symmetric heaps differ in size | [`OutOfStep`](Error::OutOfStep) | "PE {pe} has a symmetric heap of {a} bytes and PE {me} one of {b}: every PE needs the same ..." |
//!
//! ```
//! use nvshmem::{DataType, Error, ReduceOp};
//! // Parsing is one of the checks that needs no GPU.
//! let e = "premul_sum(inf)".parse::<ReduceOp>().unwrap_err();
//! assert!(matches!(e, Error::InvalidArgument { arg: "op", .. }));
//! let e = "f31".parse::<DataType>().unwrap_err();
//! assert!(e.to_string().starts_with("DataType::from_str: invalid type: \"f31\""));
//! ```
use std::fmt;

/// What went wrong. Every fallible call of this crate returns it; variants carry the call,
/// the argument and the numbers involved, so a message says what to change.
///
/// ```
/// use nvshmem::Error;
/// let e = Error::InvalidArgument { call: "split_strided", arg: "stride", reason: "must not be 0".into() };
/// assert_eq!(e.to_string(), "split_strided: invalid stride: must not be 0");
/// ```
///
/// `Debug` prints the same sentence as `Display`, so that `fn main() -> Result<(), Error>`
/// ends with a message a person can read rather than the variant's fields. cudarc's driver
/// errors convert into it, so `?` works on a program's own cudarc calls:
///
/// ```no_run
/// fn main() -> Result<(), nvshmem::Error> {
///     let rt = nvshmem::Runtime::init()?;
///     rt.stream().synchronize()?; // a cudarc call
///     Ok(())
/// }
/// ```
#[derive(thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// NVSHMEM's host library could not be found or loaded.
    #[error(transparent)]
    Load(#[from] nvshmem_sys::LoadError),

    /// The process has no usable NVIDIA GPU or CUDA driver.
    #[error("this program needs an NVIDIA GPU and its driver: {0}")]
    NoGpu(String),

    /// A CUDA driver call failed.
    #[error("CUDA error in {call}: {source}")]
    Cuda {
        /// What was being done.
        call: &'static str,
        /// The driver's error.
        #[source]
        source: cudarc::driver::DriverError,
    },

    /// An NVSHMEM call returned a non-zero status.
    #[error("NVSHMEM error in {call}: status {status}{}", describe_status(*.status))]
    Nvshmem {
        /// The NVSHMEM function.
        call: &'static str,
        /// Its return value.
        status: i32,
    },

    /// An MPI call failed.
    #[error("MPI error in {call}: {detail}")]
    Mpi {
        /// What was being done.
        call: &'static str,
        /// What MPI said.
        detail: String,
    },

    /// Bootstrapping NVSHMEM (finding rank, size, exchanging the unique id) failed.
    #[error("bootstrap ({bootstrap}) failed: {detail}")]
    Bootstrap {
        /// The bootstrap in use.
        bootstrap: String,
        /// What failed.
        detail: String,
    },

    /// NVSHMEM was already initialised in this process (by us or by someone else).
    #[error(
        "NVSHMEM is already initialised in this process ({0}); it can be initialised only once"
    )]
    AlreadyInitialized(&'static str),

    /// The runtime was finalised explicitly while handles still used it.
    #[error("the runtime cannot be finalised while {0} other handles (arrays, teams, timers) still use it")]
    RuntimeInUse(usize),

    /// The symmetric heap has no room for an allocation.
    #[error("symmetric heap exhausted: {requested} bytes requested, {in_use} of {heap_size} bytes in use")]
    OutOfHeap {
        /// Bytes asked for.
        requested: usize,
        /// Bytes already allocated through this runtime.
        in_use: usize,
        /// The heap size the runtime was started with.
        heap_size: usize,
    },

    /// An argument is out of range or inconsistent with another.
    #[error("{call}: invalid {arg}: {reason}")]
    InvalidArgument {
        /// The call that refused it.
        call: &'static str,
        /// The argument's name.
        arg: &'static str,
        /// Why, with the numbers.
        reason: String,
    },

    /// The operation is valid but no algorithm for it is available yet (for example an
    /// operator NVSHMEM lacks, before a run-time compiled kernel provides it).
    #[error("{call}: {what} is not supported yet")]
    Unsupported {
        /// The call that refused it.
        call: &'static str,
        /// What is missing, with the type and operator.
        what: String,
    },

    /// A collective needs more of the runtime's collective scratch than is reserved.
    #[error("{call} needs {needed} bytes of collective scratch but {reserved} are reserved: call Runtime::reserve_scratch({needed}) on every PE first")]
    ScratchTooSmall {
        /// The call that needs it.
        call: &'static str,
        /// Bytes it needs.
        needed: usize,
        /// Bytes reserved now.
        reserved: usize,
    },

    /// A collective was forced to use an algorithm ([`RuntimeBuilder::algorithm`],
    /// [`Runtime::set_algorithm`] or `NVSHMEM_RS_ALGORITHMS`) that cannot run this call.
    ///
    /// [`RuntimeBuilder::algorithm`]: crate::RuntimeBuilder::algorithm
    /// [`Runtime::set_algorithm`]: crate::Runtime::set_algorithm
    #[error("{call}: the forced algorithm {algorithm} cannot run this call: {reason}")]
    AlgorithmRefused {
        /// The call.
        call: &'static str,
        /// The algorithm forced.
        algorithm: &'static str,
        /// Why it cannot.
        reason: String,
    },

    /// A peer PE failed: its process ended, or it has been stopped for longer than the
    /// timeout. Every later call on the runtime returns this; see
    /// [Health](crate::runtime#health).
    #[error("PE {} {what}; this runtime cannot run collectives any more", pe.map_or("?".to_string(), |p| p.to_string()))]
    PeerFailed {
        /// The world PE that failed, when known.
        pe: Option<usize>,
        /// What happened to it.
        what: String,
    },

    /// One of this crate's NVLink kernels stopped waiting: [`Runtime::abort`] was called, a
    /// wait timed out, or a launch broke its limits. Reported by [`Runtime::async_error`], and
    /// by every call on the runtime after it.
    ///
    /// ```
    /// let e = nvshmem::Error::CollectiveFailed {
    ///     failure: "timed out",
    ///     team_pe: Some(1),
    ///     pe: Some(3),
    ///     team: "the team of world PEs [2, 3]".into(),
    ///     waiting_for: "its arrival",
    ///     epoch: 7,
    /// };
    /// assert!(e.to_string().starts_with(
    ///     "a collective timed out on team PE 1 (world PE 3) of the team of world PEs [2, 3] \
    ///      while waiting for its arrival (epoch 7)"
    /// ));
    /// ```
    ///
    /// [`Runtime::abort`]: crate::Runtime::abort
    /// [`Runtime::async_error`]: crate::Runtime::async_error
    #[error("a collective {failure}{} while waiting for {waiting_for} (epoch {epoch}){}", collective_who(*team_pe, *pe, team), timeout_cause(failure))]
    CollectiveFailed {
        /// What happened: "aborted", "timed out", "launched outside its limits", or "broke
        /// the channel protocol (a peer was a run behind)" (a sender found its receiver
        /// behind where the protocol guarantees it is: a bug of this crate, reported rather
        /// than risking a wrong result).
        failure: &'static str,
        /// The team PE the kernel was waiting for, if it was waiting for one.
        team_pe: Option<usize>,
        /// That PE's number in the world, when the team is known.
        pe: Option<usize>,
        /// The team the call ran on ("the team of world PEs [0, 1]"); empty when unknown.
        team: String,
        /// What it was waiting for.
        waiting_for: &'static str,
        /// The channel epoch of the call.
        epoch: u32,
    },

    /// A stream's wait for a signal word ([`Runtime::signal_wait_until`]) ended without the
    /// word comparing true: it timed out (no PE sent the signal within the runtime's timeout)
    /// or was aborted. The runtime has failed: every later call returns this.
    ///
    /// ```
    /// use nvshmem::rma::Cmp;
    /// let e = nvshmem::Error::SignalWaitFailed {
    ///     failure: "timed out",
    ///     index: 0,
    ///     address: 0x1000,
    ///     cmp: Some(Cmp::Ge),
    ///     value: 1,
    ///     seen: 0,
    /// };
    /// assert!(e.to_string().starts_with(
    ///     "signal_wait_until timed out waiting for signal word 0 (at 0x1000) to be ge 1; its \
    ///      last value seen was 0"
    /// ));
    /// ```
    ///
    /// [`Runtime::signal_wait_until`]: crate::Runtime::signal_wait_until
    #[error("signal_wait_until {failure} waiting for signal word {index} (at {address:#x}) to be {} {value}; its last value seen was {seen}{}; this runtime cannot run collectives any more", cmp.map_or("compared with".to_string(), |c| c.to_string()), signal_cause(failure))]
    SignalWaitFailed {
        /// What happened: "timed out" or "aborted".
        failure: &'static str,
        /// The word's index in the array it was named from ([`SignalArray::signal`](crate::rma::SignalArray::signal)).
        index: u64,
        /// The word's device address on this PE.
        address: u64,
        /// The comparison waited for.
        cmp: Option<crate::cmp::Cmp>,
        /// The value it compared with.
        value: u64,
        /// The word's last value the wait read.
        seen: u64,
    },

    /// The PEs of a team made different collective calls at the same point (another
    /// collective, element type, operator, count, root, in-place form, or a call on a team the
    /// others have dropped), as this crate's NVLink kernels found by comparing the calls'
    /// fingerprints ([`RuntimeBuilder::check_calls`](crate::RuntimeBuilder::check_calls)).
    /// Every PE whose kernels met the other call gets it, each naming both calls as it saw
    /// them; results of the call are undefined, and the runtime has failed: every later call
    /// returns this error (the kernels' flags can no longer be trusted to pair calls).
    ///
    /// ```
    /// let e = nvshmem::Error::CallMismatch {
    ///     team_pe: 0,
    ///     mine: "all_reduce of f32 sum, 1048576 elements on team 0x1".into(),
    ///     peer: 1,
    ///     theirs: "all_reduce of f32 sum, 1048577 elements on team 0x1".into(),
    /// };
    /// assert!(e.to_string().contains("team PE 1 called all_reduce of f32 sum, 1048577"));
    /// ```
    #[error("mismatched collective calls: team PE {team_pe} (this PE) called {mine}; team PE {peer} called {theirs}; this runtime cannot run collectives any more")]
    CallMismatch {
        /// This PE's index in the team.
        team_pe: usize,
        /// This PE's call, decoded from its fingerprint.
        mine: String,
        /// The team PE whose call differed.
        peer: usize,
        /// That PE's call, decoded from the fingerprint it published.
        theirs: String,
    },

    /// The PEs did not make the same collective call at the same point (one allocated where
    /// another made a team, or with another size), or their symmetric heaps came apart. Every
    /// PE of the call gets it alike. Where the heaps came apart the runtime fails too.
    #[error("{call}: the PEs are out of step: {detail}")]
    OutOfStep {
        /// The call.
        call: &'static str,
        /// Which PE did what.
        detail: String,
    },

    /// A host-side wait for other PEs (an allocation, a team being made, finalising) lasted
    /// longer than the runtime's timeout ([`RuntimeBuilder::timeout`](crate::RuntimeBuilder::timeout)).
    /// The runtime has failed: every later call returns this.
    #[error("{call}: timed out after {after:.1?} waiting for {waiting_for}; this runtime cannot run collectives any more")]
    WaitTimedOut {
        /// The call that waited.
        call: &'static str,
        /// What it waited for.
        waiting_for: String,
        /// How long it waited.
        after: std::time::Duration,
    },

    /// A call was queued on a stream being captured into a CUDA graph that this crate did not
    /// start. Such a graph could run after the arrays, teams or scratch it uses are gone; capture
    /// with [`Runtime::capture`](crate::Runtime::capture), whose [`Graph`](crate::Graph) keeps
    /// them alive.
    #[error("{call}: the stream is being captured into a CUDA graph that nvshmem did not start: capture with Runtime::capture, whose graph keeps alive what its calls use")]
    CaptureNotTracked {
        /// The call.
        call: &'static str,
    },

    /// Several PEs share this PE's GPU without CUDA MPS: NVSHMEM then runs in a limited mode
    /// in which collectives end the process. Start the MPS control daemon and give each PE a
    /// share (the README's "Launching"), or run one PE per GPU.
    #[error("{pes} PEs share CUDA device {device} without CUDA MPS, where NVSHMEM cannot run collectives: start the MPS control daemon (nvidia-cuda-mps-control -d) with CUDA_MPS_ACTIVE_THREAD_PERCENTAGE at most 100/{pes} for each PE, or run one PE per GPU")]
    GpuSharedWithoutMps {
        /// PEs on the device.
        pes: usize,
        /// The device.
        device: usize,
    },

    /// The node's PEs would share its GPUs unevenly (PE `local rank % GPUs` on each: some
    /// GPUs with `most` PEs, others with `fewest`), where NVSHMEM 3.4.5's start never returns:
    /// each PE decides alone whether its GPU is shared, and those that decide differently
    /// wait for each other. Run a multiple of the GPU count, make fewer GPUs visible
    /// (`CUDA_VISIBLE_DEVICES`), or choose each PE's device with
    /// [`RuntimeBuilder::device`](crate::RuntimeBuilder::device); `NVSHMEM_RS_ALLOW_UNEVEN_SHARING=1`
    /// starts all the same (for an NVSHMEM that can).
    #[error("{pes} PEs on this node over {gpus} GPUs put {most} PEs on some GPUs and {fewest} on others, where NVSHMEM never returns from its start (the PEs that share a GPU take another start-up path than those alone on theirs): run a multiple of {gpus} PEs, make fewer GPUs visible (CUDA_VISIBLE_DEVICES), or choose each PE's device (RuntimeBuilder::device); NVSHMEM_RS_ALLOW_UNEVEN_SHARING=1 starts all the same")]
    UnevenGpuSharing {
        /// PEs on this node.
        pes: usize,
        /// Visible GPUs.
        gpus: usize,
        /// The fewest PEs a GPU gets.
        fewest: usize,
        /// The most PEs a GPU gets.
        most: usize,
    },

    /// NVRTC, or the CUDA headers its kernels include, could not be found.
    #[error("run-time kernel compilation is unavailable: {0}")]
    Nvrtc(String),

    /// NVRTC refused one of this crate's kernels (a bug in the crate or an NVRTC too old
    /// or too new for it).
    #[error("NVRTC failed to compile kernel {kernel}:\n{log}")]
    Compile {
        /// The kernel instantiation, e.g. `reduce_f8e4m3_sum`.
        kernel: String,
        /// NVRTC's log and the options used.
        log: String,
    },

    /// nvJitLink could not link a device-initiated kernel with NVSHMEM's device library
    /// ([`device`](crate::device)): an undefined symbol, a library of another architecture.
    #[error("nvJitLink failed to link {module} with NVSHMEM's device library:\n{log}")]
    Link {
        /// The source's name.
        module: String,
        /// nvJitLink's error log.
        log: String,
    },

    /// A collective launch ([`device`](crate::device)) asked for more blocks than can be
    /// resident on this PE's GPU at once: its blocks would wait for each other's peers for
    /// ever. `resident` is what fits (0: not even one block of that size).
    #[error("collective launch of {kernel}: {grid} blocks requested but at most {resident} can be resident at once on this GPU (blocks of {block} threads, {shared_bytes} bytes of shared memory)")]
    CollectiveLaunch {
        /// The kernel.
        kernel: String,
        /// The blocks asked for.
        grid: u64,
        /// The most that can be resident at once.
        resident: u64,
        /// Threads per block.
        block: u32,
        /// Dynamic shared memory per block.
        shared_bytes: u32,
    },

    /// An environment variable has a value that cannot be used.
    #[error("environment variable {var}={value:?}: {reason}")]
    Environment {
        /// The variable.
        var: String,
        /// Its value.
        value: String,
        /// Why it cannot be used.
        reason: String,
    },
}

/// What a kernel's timeout can mean, for [`Error::CollectiveFailed`]'s message: the peer's
/// kernel ran late or not at all, and one way that happens is its blocks not being resident
/// (`kernels/PROTOCOL.md`, "Residency").
fn timeout_cause(failure: &str) -> &'static str {
    if failure == "timed out" {
        ": that PE's kernel did not get there in time: it is stopped, stuck or slow, or its \
         blocks could not be resident on its GPU beside the work holding the SMs (other \
         kernels, or PEs sharing the GPU without CUDA MPS thread shares: see the README, \
         Launching)"
    } else {
        ""
    }
}

/// Who a failed collective waited for: " on team PE {p} (world PE {w}) of {team}", each part
/// only when known.
fn collective_who(team_pe: Option<usize>, pe: Option<usize>, team: &str) -> String {
    let mut s = String::new();
    if let Some(p) = team_pe {
        s += &format!(" on team PE {p}");
        if let Some(w) = pe {
            s += &format!(" (world PE {w})");
        }
    }
    if !team.is_empty() {
        s += if team_pe.is_some() { " of " } else { " on " };
        s += team;
    }
    s
}

/// What a signal wait's timeout means.
fn signal_cause(failure: &str) -> &'static str {
    if failure == "timed out" {
        " (no PE sent it within the runtime's timeout)"
    } else {
        ""
    }
}

/// Shorthand for this crate's results.
///
/// ```
/// use nvshmem::{Bootstrap, Result};
/// fn bootstrap(name: &str) -> Result<Bootstrap> {
///     name.parse()
/// }
/// assert_eq!(bootstrap("pmix")?, Bootstrap::Pmix);
/// assert!(bootstrap("carrier-pigeon").is_err());
/// # Ok::<(), nvshmem::Error>(())
/// ```
pub type Result<T, E = Error> = std::result::Result<T, E>;

fn describe_status(status: i32) -> &'static str {
    match status as u32 {
        nvshmem_sys::NVSHMEMX_ERROR_INVALID_VALUE => " (invalid value)",
        nvshmem_sys::NVSHMEMX_ERROR_OUT_OF_MEMORY => " (out of memory)",
        nvshmem_sys::NVSHMEMX_ERROR_NOT_SUPPORTED => " (not supported)",
        nvshmem_sys::NVSHMEMX_ERROR_SYMMETRY => " (symmetry violated)",
        nvshmem_sys::NVSHMEMX_ERROR_GPU_NOT_SELECTED => " (no GPU selected)",
        nvshmem_sys::NVSHMEMX_ERROR_COLLECTIVE_LAUNCH_FAILED => " (collective launch failed)",
        nvshmem_sys::NVSHMEMX_ERROR_INTERNAL => " (internal error)",
        _ => "",
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// A cudarc driver call of the user's own, outside this crate: `?` turns it into
/// [`Error::Cuda`].
impl From<cudarc::driver::DriverError> for Error {
    fn from(source: cudarc::driver::DriverError) -> Self {
        Error::Cuda {
            call: "a CUDA driver call",
            source,
        }
    }
}

impl Error {
    /// Shorthand for [`Error::InvalidArgument`].
    pub(crate) fn arg(call: &'static str, arg: &'static str, reason: impl fmt::Display) -> Self {
        Error::InvalidArgument {
            call,
            arg,
            reason: reason.to_string(),
        }
    }

    /// The value of environment variable `var` read by `parse`, `None` when it is not set;
    /// a value `parse` refuses becomes [`Error::Environment`] with `parse`'s reason. The one
    /// way the runtime reads its variables.
    pub(crate) fn from_env<T>(
        var: &str,
        parse: impl FnOnce(&str) -> std::result::Result<T, String>,
    ) -> Result<Option<T>> {
        match std::env::var(var) {
            Err(_) => Ok(None),
            Ok(value) => match parse(&value) {
                Ok(v) => Ok(Some(v)),
                Err(reason) => Err(Error::Environment {
                    var: var.into(),
                    value,
                    reason,
                }),
            },
        }
    }

    /// The same error, attributed to `call` when it names one (an NVSHMEM status returned
    /// inside a public call is reported under that call's name).
    pub(crate) fn in_call(self, call: &'static str) -> Self {
        match self {
            Error::Nvshmem { status, .. } => Error::Nvshmem { call, status },
            e => e,
        }
    }

    /// Wraps a CUDA driver error with the call it came from.
    pub(crate) fn cuda(call: &'static str) -> impl FnOnce(cudarc::driver::DriverError) -> Self {
        move |source| Error::Cuda { call, source }
    }
}

/// Refuses a length other than `want`: `arg` of `call` has `got` elements; `why` says where
/// `want` comes from. The one length check of the crate.
pub(crate) fn check_len(
    call: &'static str,
    arg: &'static str,
    got: usize,
    want: usize,
    why: &str,
) -> Result<()> {
    if got == want {
        Ok(())
    } else {
        Err(Error::arg(
            call,
            arg,
            format_args!("has {got} elements but needs {want} ({why})"),
        ))
    }
}

/// Refuses a PE index `pe` not below `n`, the size of `group` ("the team", "the job"). The one
/// PE range check of the crate.
pub(crate) fn check_pe(
    call: &'static str,
    arg: &'static str,
    pe: usize,
    n: usize,
    group: &str,
) -> Result<()> {
    if pe < n {
        Ok(())
    } else {
        Err(Error::arg(
            call,
            arg,
            format_args!("{pe} is not a PE of {group}, which has {n} PEs (0..{n})"),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lengths_and_pes_are_checked_in_one_place() {
        assert!(check_len("get", "src", 3, 3, "dst's length").is_ok());
        assert_eq!(
            check_len("get", "src", 3, 4, "dst's length")
                .unwrap_err()
                .to_string(),
            "get: invalid src: has 3 elements but needs 4 (dst's length)"
        );
        assert!(check_pe("put", "pe", 1, 2, "the job").is_ok());
        assert_eq!(
            check_pe("put", "pe", 2, 2, "the job")
                .unwrap_err()
                .to_string(),
            "put: invalid pe: 2 is not a PE of the job, which has 2 PEs (0..2)"
        );
    }

    /// A timeout names the peer, what was waited for, and what can keep a peer's kernel from
    /// getting there (residency among them); an abort says only what it was.
    #[test]
    fn a_kernel_timeout_names_its_possible_causes() {
        let e = Error::CollectiveFailed {
            failure: "timed out",
            team_pe: Some(2),
            pe: None,
            team: String::new(),
            waiting_for: "its arrival",
            epoch: 7,
        }
        .to_string();
        assert!(
            e.starts_with(
                "a collective timed out on team PE 2 while waiting for its arrival (epoch 7): "
            ),
            "{e}"
        );
        assert!(
            e.contains("could not be resident") && e.contains("thread shares"),
            "{e}"
        );
        let e = Error::CollectiveFailed {
            failure: "aborted",
            team_pe: None,
            pe: None,
            team: String::new(),
            waiting_for: "it",
            epoch: 0,
        };
        assert_eq!(
            e.to_string(),
            "a collective aborted while waiting for it (epoch 0)"
        );
        let e = Error::CollectiveFailed {
            failure: "aborted",
            team_pe: None,
            pe: None,
            team: "the team of every PE (world PEs 0..2)".into(),
            waiting_for: "it",
            epoch: 0,
        };
        assert_eq!(
            e.to_string(),
            "a collective aborted on the team of every PE (world PEs 0..2) while waiting for it (epoch 0)"
        );
    }

    #[test]
    fn out_of_heap_gives_the_numbers() {
        let e = Error::OutOfHeap {
            requested: 10,
            in_use: 20,
            heap_size: 25,
        };
        assert_eq!(
            e.to_string(),
            "symmetric heap exhausted: 10 bytes requested, 20 of 25 bytes in use"
        );
    }
}
