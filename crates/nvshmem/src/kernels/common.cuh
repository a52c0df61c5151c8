// The on-device protocol of PROTOCOL.md, in code: the team descriptor, channel layout, per-block
// epochs, arrive/depart flags, LL packets and the one wait helper. Every kernel source of the
// NVLink collectives is compiled as `prefix + ops.cuh + common.cuh + <kernel>.cu`, so nothing
// here includes anything, and nothing here depends on the element type (NVR_T).
//
// Conventions: `b` is the block index (blockIdx.x) and `e` the block's epoch of this run.
// Flags are 32-bit and compared wrap-safe (nvr_reached). A kernel launched with a team must be
// launched with the same grid on every member (PROTOCOL.md, "Epochs"); its block size is free
// (any multiple of 32 up to the kernel's launch bound).

#define NVR_MAX_TEAM 8    // most PEs a fast-path team may have
#define NVR_MAX_BLOCKS 512 // most blocks one launch on a channel may have
#define NVR_LL_BLOCKS 64  // most blocks an LL launch may have (teams of 1 and 2: nvr_ll_blocks)
#define NVR_LL_REGIONS 64 // LL regions per epoch parity, shared out among the team's senders
#define NVR_FP_BLOCKS 128 // blocks that publish and check call fingerprints (every launch's:
                          // direct grids are at most 128, LL grids 64, barriers 1)

// Channel layout, in bytes from nvr_team::chan.
#define NVR_CHAN_EPOCH 0ull
#define NVR_CHAN_ARRIVE (4ull * NVR_MAX_BLOCKS)
#define NVR_CHAN_DEPART (4ull * NVR_MAX_BLOCKS * (1 + NVR_MAX_TEAM))
#define NVR_CHAN_FP (4ull * NVR_MAX_BLOCKS * (1 + 2 * NVR_MAX_TEAM))
#define NVR_FP_SLOT 32 // bytes of one fingerprint slot: two LL packets
#define NVR_CHAN_HEADER (NVR_CHAN_FP + 2ull * NVR_FP_BLOCKS * NVR_MAX_TEAM * NVR_FP_SLOT)

#define NVR_LL_PACKET 16 // bytes of one LL packet {d0, e, d1, e}
#define NVR_LL_PAYLOAD 8 // payload bytes of one LL packet

// status[0]: what failed (the first failure only; 0 while none).
#define NVR_FAIL_ABORT 1   // the host set the abort word
#define NVR_FAIL_TIMEOUT 2 // a wait exceeded timeout_ns
#define NVR_FAIL_LIMITS 3  // the launch broke the call's limits (grid, block, sizes, root, team)
#define NVR_FAIL_MISMATCH 4 // a peer published another call's fingerprint (see nvr_fp_check)
#define NVR_FAIL_ORDER 5    // a peer was found behind where the protocol guarantees it is
// status[3]: what was waited for.
#define NVR_WAIT_ARRIVE 1
#define NVR_WAIT_DEPART 2
#define NVR_WAIT_LL 3
#define NVR_WAIT_ACK 4
#define NVR_WAIT_SIGNAL 5 // a signal word (wait.cu's nvr_signal_wait)
#define NVR_WAIT_CALL 6   // a peer's call fingerprint

// The status record (PROTOCOL.md, "Waits"): NVR_STATUS_WORDS 32-bit words, written once, by
// the thread whose atomicCAS claimed status[0]; status[NVR_ST_READY] is written last, with a
// system-scope release, so a reader that sees it non-zero (acquire) reads the rest whole.
#define NVR_STATUS_WORDS 26
#define NVR_ST_CODE 0
#define NVR_ST_PEER 1    // team PE waited for, or -1
#define NVR_ST_EPOCH 2
#define NVR_ST_WHAT 3    // NVR_WAIT_*
#define NVR_ST_BLOCK 4   // the block of the failing wait
#define NVR_ST_WHERE 5   // 2 words: the team's channel address (NVLink kernels) or the signal
                         // word's address (NVR_WAIT_SIGNAL)
#define NVR_ST_CMP 7     // NVR_WAIT_SIGNAL: the comparison (NVSHMEM_CMP_*)
#define NVR_ST_VALUE 8   // 2 words: NVR_WAIT_SIGNAL: the value compared with
#define NVR_ST_SEEN 10   // 2 words: NVR_WAIT_SIGNAL: the word's last value seen
#define NVR_ST_INDEX 12  // 2 words: NVR_WAIT_SIGNAL: the word's index in its array
#define NVR_ST_READY 15  // = the code, written last
#define NVR_ST_FP 16     // 8 words: NVR_FAIL_MISMATCH: the peer's fingerprint, then this PE's
                         // (two 64-bit words each, low word first)
#define NVR_ST_ME 24     // NVR_FAIL_MISMATCH: this PE's team index

typedef unsigned long long nvr_u64;

// fn<M>(...) with the smallest M in {2, 4, NVR_MAX_TEAM} that holds a team of n, as one
// expression (fn may return void). Team loops unrolled over M keep every array indexed by
// member in registers (constant indices); a smaller M spares the empty members' iterations on
// every vector (lamport.cu, TEAM LOOPS, has what that saved).
#define NVR_TEAM_DISPATCH(n, fn, ...)                                                          \
    ((n) <= 2 ? fn<2>(__VA_ARGS__) : (n) <= 4 ? fn<4>(__VA_ARGS__) : fn<NVR_MAX_TEAM>(__VA_ARGS__))

struct nvr_team {
    long long off[NVR_MAX_TEAM];  // add to a local symmetric address to get team PE j's copy
                                  // (off[me] == 0); peer j's `x` is (char*)x + off[j]
    int n;                        // team size, 1..NVR_MAX_TEAM
    int me;                       // this PE's index in the team
    unsigned long long chan;      // local address of this (team, stream)'s channel
    unsigned int ll_bytes;        // bytes of one of the channel's LL regions (one a (parity,
                                  // sender, block))
    unsigned int check;           // 1: publish and check call fingerprints (fp)
    volatile unsigned int *abort; // host-mapped word: non-zero means "stop waiting now"
    unsigned int *status;         // host-mapped record of the first failure (see Waits)
    unsigned long long timeout_ns;// 0: wait for ever (until abort)
    unsigned long long fp[2];     // this call's fingerprint (PROTOCOL.md, "Fingerprints")
    unsigned long long lam_bytes; // bytes of the channel's Lamport area after the LL regions
                                  // (0: none; PROTOCOL.md, "Lamport buffers")
};

// ---- addresses ------------------------------------------------------------------------------

// Bytes of a channel whose LL regions hold `ll_bytes` each.
__host__ __device__ __forceinline__ nvr_u64 nvr_chan_bytes(unsigned int ll_bytes) {
    return NVR_CHAN_HEADER + 2ull * NVR_LL_REGIONS * (nvr_u64)ll_bytes;
}

// Team PE j's copy of the local symmetric address p.
template <class T> __device__ __forceinline__ T *nvr_peer(const nvr_team &t, T *p, int j) {
    return (T *)((char *)p + t.off[j]);
}

// epoch[b]: this PE's epoch of block b.
__device__ __forceinline__ unsigned int *nvr_epoch(const nvr_team &t, int b) {
    return (unsigned int *)(t.chan + NVR_CHAN_EPOCH) + b;
}

// arrive[b][j]: the last epoch block b of team PE j started (written by PE j).
__device__ __forceinline__ unsigned int *nvr_arrive_word(const nvr_team &t, int b, int j) {
    return (unsigned int *)(t.chan + NVR_CHAN_ARRIVE) + b * NVR_MAX_TEAM + j;
}

// depart[b][j]: the last epoch block b of team PE j finished touching this PE's buffers.
__device__ __forceinline__ unsigned int *nvr_depart_word(const nvr_team &t, int b, int j) {
    return (unsigned int *)(t.chan + NVR_CHAN_DEPART) + b * NVR_MAX_TEAM + j;
}

// Fingerprint slot (parity of e, b, j): the fingerprint team PE j published for block b's run
// of epoch e, as two LL packets (written by PE j).
__device__ __forceinline__ char *nvr_fp_slot(const nvr_team &t, unsigned int e, int b, int j) {
    const nvr_u64 r = ((nvr_u64)(e & 1u) * NVR_FP_BLOCKS + (nvr_u64)b) * NVR_MAX_TEAM + (nvr_u64)j;
    return (char *)(t.chan + NVR_CHAN_FP + r * NVR_FP_SLOT);
}

// Most blocks an LL launch on a team of n may have: each parity's NVR_LL_REGIONS regions are
// shared out among the team's senders, one region a block. A receiver on 2 PEs has one sender,
// which so takes all 64 (and a lone PE, which sends nothing, launches as many); larger teams
// index regions by sender, n of them (64 / n: 21 for 3, 16 for 4, 8 for 8), so a PE's own
// index is never written in its channel. A team of 8 gets the layout of 8 regions a sender that
// every team had before issue 31.
__host__ __device__ __forceinline__ int nvr_ll_blocks(int n) {
#ifdef __CUDA_ARCH__
    // The same figures from a table in one word (byte n - 1 for n = 1..8; n is clamped, as
    // the formula's n < 1 is), not a run-time division: every LL block computes this on its
    // way to its first packet (nvr_ll_region), and a division is some 15 dependent steps.
    const unsigned int k = (unsigned int)(n < 1 ? 1 : n > NVR_MAX_TEAM ? NVR_MAX_TEAM : n) - 1u;
    return (int)((0x08090A0C10154040ull >> (8u * k)) & 0xFFu);
#else
    return n <= 2 ? NVR_LL_BLOCKS : NVR_LL_REGIONS / (n > NVR_MAX_TEAM ? NVR_MAX_TEAM : n);
#endif
}

// LL region (parity of e, j, b): packets from team PE j for block b at epochs of e's parity,
// ll_bytes long. Regions of j < n, b < nvr_ll_blocks(n) are disjoint: region j *
// nvr_ll_blocks(n) + b < 64, or on 2 PEs (one sender a receiver, whatever j) region b < 64.
// (Until 2026-11-28 a 2-PE block took regions 2b and 2b + 1 as one, 32 blocks of 64 KiB: the
// same 1 MiB of payload a pair; 64 blocks move 256 KiB-1 MiB 5-10 % faster, PROTOCOL.md,
// "Channels".)
__device__ __forceinline__ char *nvr_ll_region(const nvr_team &t, unsigned int e, int j, int b) {
    const int i = t.n == 2 ? b : j * nvr_ll_blocks(t.n) + b;
    const unsigned int r = (e & 1u) * NVR_LL_REGIONS + (unsigned int)i;
    return (char *)(t.chan + NVR_CHAN_HEADER + (nvr_u64)r * t.ll_bytes);
}

// ---- memory operations ----------------------------------------------------------------------

// Wrap-safe "a has reached b".
__device__ __forceinline__ bool nvr_reached(unsigned int a, unsigned int b) {
    return (int)(a - b) >= 0;
}

__device__ __forceinline__ unsigned int nvr_ld_acquire(const unsigned int *p) {
    unsigned int v;
    asm volatile("ld.acquire.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}

__device__ __forceinline__ unsigned int nvr_ld_relaxed(const unsigned int *p) {
    unsigned int v;
    asm volatile("ld.relaxed.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}

// An arrival word's load: with acquire where the writer released (direct kernels, barrier,
// sync), relaxed where it did not (the staging kernels' arrivals, nvr_arrive: an acquire there
// pairs with nothing, and its L1 invalidation cost each quiescence 0.12 us at 8 B,
// tools/probes/llpath.cu). `acquire` is a constant at every call site.
__device__ __forceinline__ unsigned int nvr_ld_flag(const unsigned int *p, bool acquire) {
    return acquire ? nvr_ld_acquire(p) : nvr_ld_relaxed(p);
}

__device__ __forceinline__ void nvr_st_release(unsigned int *p, unsigned int v) {
    asm volatile("st.release.sys.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

__device__ __forceinline__ void nvr_st_relaxed(unsigned int *p, unsigned int v) {
    asm volatile("st.relaxed.sys.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

__device__ __forceinline__ void nvr_red_add_release(unsigned int *p, unsigned int v) {
    asm volatile("red.release.sys.global.add.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

__device__ __forceinline__ void nvr_red_add_relaxed(unsigned int *p, unsigned int v) {
    asm volatile("red.relaxed.sys.global.add.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

__device__ __forceinline__ void nvr_fence_sc_sys() {
    asm volatile("fence.sc.sys;" ::: "memory");
}

__device__ __forceinline__ void nvr_fence_acq_rel_sys() {
    asm volatile("fence.acq_rel.sys;" ::: "memory");
}

__device__ __forceinline__ nvr_u64 nvr_globaltimer() {
    nvr_u64 v;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(v));
    return v;
}

// ---- programmatic dependent launch ----------------------------------------------------------

// Called by every kernel of these files before it touches memory (PROTOCOL.md, "Launch"):
// before it, a kernel works from its launch arguments alone. The host launches
// them with programmatic stream serialization (sm_90 and later), which lets a kernel be
// scheduled while the kernel before it on the stream still runs. griddepcontrol.wait then holds
// every thread until that kernel has finished and its writes are visible, so nothing after it
// reads or writes sooner than plain stream order allows; launch_dependents lets the next kernel
// be scheduled now, so its launch latency is spent while this one waits for its peers. Without
// the attribute (or on an older GPU) both are no-ops.
__device__ __forceinline__ void nvr_launch_begin() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// ---- failures and the wait helper -----------------------------------------------------------

// Stores the 64-bit v into status words i, i + 1 (low word first).
__device__ __forceinline__ void nvr_status64(volatile unsigned int *s, int i, nvr_u64 v) {
    s[i] = (unsigned int)v;
    s[i + 1] = (unsigned int)(v >> 32);
}

// Marks a claimed status record whole: every word written before is visible system-wide
// before the ready word, which the host reads first (acquire) and retries while it is 0.
__device__ __forceinline__ void nvr_status_ready(unsigned int *status, unsigned int code) {
    __threadfence_system();
    asm volatile("st.release.sys.global.u32 [%0], %1;" ::"l"(status + NVR_ST_READY), "r"(code)
                 : "memory");
}

// Records the first failure of this PE: status[0] = code by atomicCAS, then the team PE waited
// for, the epoch, what was waited for, the block and the team's channel (`chan`, 0 when
// unknown), and last the ready word. Only the CAS winner writes the rest.
// (Takes the status pointer and the channel, not the team, so no address of the kernel
// parameter escapes.)
__device__ __noinline__ void nvr_fail_at(unsigned int *status, unsigned int code, int peer,
                                         unsigned int e, unsigned int what, nvr_u64 chan) {
    if (atomicCAS(status, 0u, code) == 0u) {
        volatile unsigned int *s = status;
        s[NVR_ST_PEER] = (unsigned int)peer;
        s[NVR_ST_EPOCH] = e;
        s[NVR_ST_WHAT] = what;
        s[NVR_ST_BLOCK] = blockIdx.x;
        nvr_status64(s, NVR_ST_WHERE, chan);
        nvr_status_ready(status, code);
    }
}

// nvr_fail_at without the channel (launch-limit checks that have no usable team).
__device__ __forceinline__ void nvr_fail(unsigned int *status, unsigned int code, int peer,
                                         unsigned int e, unsigned int what) {
    nvr_fail_at(status, code, peer, e, what, 0ull);
}

// The wait for the kernel before (nvr_launch_begin) of a kernel whose launch check `fits` was
// computed before it, from launch arguments alone, so while that kernel may still run; then a
// refused launch recorded (NVR_FAIL_LIMITS). Returns `fits`: false, the block returns whole.
// Checked after the wait, a launch's check cost every small call 0.16-0.21 us (2 x H200,
// tools/probes/llpath.cu, `bis-early`). The channel is recorded as the launch names it: the
// failure is the launch's, no PE was waited for. The refused path returns on its own, never
// rejoining the kernel's: where the recording call's path merged back into it (`if (!fits &&
// tid == 0) record; return fits;`), the compiler kept the memory descriptor out of the uniform
// registers, which a call may clobber, and reloaded it before every access: every LL and
// Lamport kernel 10-16 % larger in SASS and 0.1-0.2 us slower a call (2 x H200, 2026-11-28;
// scripts/check-sass.sh now fails on that).
__device__ __forceinline__ bool nvr_launch_checked(const nvr_team &t, bool fits) {
    nvr_launch_begin();
    if (fits) return true;
    if (threadIdx.x == 0) nvr_fail_at(t.status, NVR_FAIL_LIMITS, -1, 0, 0, t.chan);
    return false;
}

// The one wait: polls ready() (which must load with acquire where what it waits for orders
// later reads, or carry its data with its flag as LL packets do) until it returns true. Every
// 256 polls it reads %globaltimer (the clock starts at the first such check, so a wait lasts
// at least timeout_ns) and, once the wait has lasted NVR_ABORT_EVERY_NS, the host's abort
// word, then again every NVR_ABORT_EVERY_NS. On abort or timeout it records the failure and
// returns false; the caller then skips its remaining waits and the block exits at nvr_end.
__device__ __forceinline__ bool nvr_fp_scan(const nvr_team &t, unsigned int e);
__device__ __forceinline__ void nvr_fp_publish_to(const nvr_team &t, unsigned int e, int j);
__device__ __forceinline__ bool nvr_fp_on(const nvr_team &t);
__device__ __forceinline__ bool nvr_fp_wait_arrival(const nvr_team &t, const unsigned int *flag,
                                                    unsigned int e, int j, bool check,
                                                    bool acquire);

// How long a wait goes between reads of the host's abort word (and before its first). The word
// is in host memory, and reading it in the middle of a large move held the move up: read every
// 256 polls (about 60 us of polling), it made every one-way move whose wait outlasted that
// 1.3-2 x slower, and read every 16 polls, 8.6 x at 8 MiB (2 x H200, 2026-11-27: a 2-PE direct
// broadcast of 32 MiB took 193 us, 98 without the read; docs/performance.md, "Waits and the
// abort word"). The watchdog looks every 50 ms, so a wait that sees the word up to a
// millisecond later changes nothing.
#ifndef NVR_ABORT_EVERY_NS
#define NVR_ABORT_EVERY_NS 1000000ull
#endif

// The clock of one wait: when it started (0: not yet) and when the abort word is next read.
struct nvr_wait_clock {
    nvr_u64 start;
    nvr_u64 abort_at;
};

// One tick of a wait's clock at `now` (the first starts it): whether the abort word is due.
__device__ __forceinline__ bool nvr_abort_due(nvr_wait_clock &c, nvr_u64 now) {
    if (c.start == 0) {
        c.start = now != 0 ? now : 1;
        c.abort_at = c.start + NVR_ABORT_EVERY_NS;
        return false;
    }
    if (now < c.abort_at) return false;
    c.abort_at = now + NVR_ABORT_EVERY_NS;
    return true;
}

// What nvr_wait does every 256 polls, out of line: every wait site would otherwise carry it,
// and the size of the kernels costs every call (ll.cu, NVR_LL_BATCH). True to go on waiting,
// false once the wait has failed (recorded).
__device__ __noinline__ bool nvr_wait_slow(const nvr_team &t, int peer, unsigned int e,
                                           unsigned int what, nvr_wait_clock &c) {
    // A peer that made another call may never send what this wait wants: its fingerprint
    // says so (Fingerprints), and ends the wait with a mismatch rather than a timeout.
    if (t.check != 0 && !nvr_fp_scan(t, e)) return false;
    const nvr_u64 now = nvr_globaltimer();
    if (nvr_abort_due(c, now) && *t.abort != 0) {
        nvr_fail_at(t.status, NVR_FAIL_ABORT, peer, e, what, t.chan);
        return false;
    }
    if (t.timeout_ns == 0 || now - c.start < t.timeout_ns) return true;
    // A peer that has arrived but not departed may itself be held by one that never came
    // (a direct kernel's non-root that waits at entry for an absent peer never departs
    // from the root): its departure gets a quarter more time, so that the wait for the
    // absent peer fails first and the record names it, not the one it held up.
    const bool arrived = what == NVR_WAIT_DEPART &&
                         nvr_reached(nvr_ld_acquire(nvr_arrive_word(t, blockIdx.x, peer)), e);
    if (arrived && now - c.start < t.timeout_ns + t.timeout_ns / 4) return true;
    nvr_fail_at(t.status, NVR_FAIL_TIMEOUT, peer, e, what, t.chan);
    return false;
}

// nvr_wait for a wait on several peers at once: who() names the peer a failure would record,
// asked again every 256 polls, so that it can name one still missing rather than the first
// that was late (which may have come since).
template <class Ready, class Who>
__device__ __forceinline__ bool nvr_wait_for(const nvr_team &t, Ready ready, Who who,
                                             unsigned int e, unsigned int what) {
    unsigned int polls = 0;
    nvr_wait_clock clock = {0, 0};
    while (!ready()) {
        if ((++polls & 255u) != 0) continue;
        if (!nvr_wait_slow(t, who(), e, what, clock)) return false;
    }
    return true;
}

template <class Ready>
__device__ __forceinline__ bool nvr_wait(const nvr_team &t, Ready ready, int peer, unsigned int e,
                                         unsigned int what) {
    return nvr_wait_for(t, ready, [=] { return peer; }, e, what);
}

// Waits until *flag (local, written by team PE `peer`) reaches `want`, loading it with acquire
// or relaxed (nvr_ld_flag).
__device__ __forceinline__ bool nvr_wait_flag(const nvr_team &t, const unsigned int *flag,
                                              unsigned int want, int peer, unsigned int e,
                                              unsigned int what, bool acquire = true) {
    return nvr_wait(
        t, [=] { return nvr_reached(nvr_ld_flag(flag, acquire), want); }, peer, e, what);
}

// ---- per-block epochs -----------------------------------------------------------------------

// Live epochs are 1 .. NVR_EPOCH_LAST (PROTOCOL.md, "Epochs"). 0 is a zeroed channel's state,
// never a live epoch, so a zeroed flag or LL slot never passes for a run; 0xFFFFFFFF is skipped
// too, so that consecutive runs always differ in parity (the LL regions alternate by e & 1)
// and the run after NVR_EPOCH_LAST is 1.
#define NVR_EPOCH_LAST 0xFFFFFFFEu

// The epoch of the run after the one of epoch e (e = 0: a zeroed channel's first run).
__host__ __device__ __forceinline__ unsigned int nvr_next_epoch(unsigned int e) {
    return e >= NVR_EPOCH_LAST ? 1u : e + 1u;
}

// The epoch of the run before the one of (live) epoch e.
__host__ __device__ __forceinline__ unsigned int nvr_prev_epoch(unsigned int e) {
    return e <= 1u ? NVR_EPOCH_LAST : e - 1u;
}

// Start of block b's run: every thread reads epoch[b] and gets this run's
// e = nvr_next_epoch(epoch[b]). (Every thread reads it, so no barrier is needed here;
// nvr_end's barrier orders all these reads before thread 0 stores e back.)
__device__ __forceinline__ unsigned int nvr_begin(const nvr_team &t) {
    return nvr_next_epoch(*(volatile const unsigned int *)nvr_epoch(t, blockIdx.x));
}

// End of block b's run: if any thread of the block failed, the whole block exits without
// advancing its epoch (the channel must then be zeroed on every member before reuse);
// otherwise thread 0 stores e into epoch[b]. Every thread of the block must call it.
__device__ __forceinline__ void nvr_end(const nvr_team &t, unsigned int e, bool ok) {
    if (__syncthreads_or(!ok)) return;
    if (threadIdx.x == 0) *(volatile unsigned int *)nvr_epoch(t, blockIdx.x) = e;
}

// Flags are stored and waited for by the lanes of the block's last warp, lane j for team PE j,
// so that the data path (from warp 0 on) does not wait behind their fences. Returns the team
// PE this thread handles, or -1.
__device__ __forceinline__ int nvr_flag_peer(const nvr_team &t) {
    const int j = (int)threadIdx.x - (int)(blockDim.x - 32u);
    return (j >= 0 && j < t.n && j != t.me) ? j : -1;
}

// Peer j's word arrive[b][me]: where block b of this PE arrives at team PE j.
__device__ __forceinline__ unsigned int *nvr_arrival_at(const nvr_team &t, int j) {
    return nvr_peer(t, nvr_arrive_word(t, blockIdx.x, t.me), j);
}

// How an ordered arrival (nvr_arrive_ordered) is ordered before the peers see it
// (PROTOCOL.md, "Arrive and depart"). LL kernels arrive relaxed (nvr_arrive).
#define NVR_ARRIVE_RELEASE 0 // system-scope release: direct kernels (peers then use this PE's
                             // buffers) and sync
#define NVR_ARRIVE_FENCE 1   // fence.sc.sys first: barrier's meaning (this PE's earlier writes,
                             // RMA included, are visible system-wide before any peer passes)

// Relaxed arrival (LL and Lamport kernels, whose arrival only tells a writer that this PE has
// finished reading its packets of two runs ago): the flag lanes store e into arrive[b][me] of
// every peer; in block 0 they then publish this call's fingerprint beside it (the flag leaves
// first: its readers check the fingerprint only at the block's end). The other blocks publish
// none: see nvr_quiesce_staged.
__device__ __forceinline__ void nvr_arrive(const nvr_team &t, unsigned int e) {
    const int j = nvr_flag_peer(t);
    if (j < 0) return;
    nvr_st_relaxed(nvr_arrival_at(t, j), e);
    if (blockIdx.x == 0) nvr_fp_publish_to(t, e, j);
}

// Arrive before knowing the epoch: add 1 to arrive[b][me] of every peer (`order`: release or
// fence), so the flag can travel while the epoch is read. An add needs no
// epoch and leaves the same value as a store of e, since every run of a block arrives once at
// every peer (arrive follows the runs: PROTOCOL.md); across the wrap it leaves
// NVR_EPOCH_LAST + 1, not 1, so follow it with nvr_arrive_wrap once the epoch is known.
__device__ __forceinline__ void nvr_arrive_add(const nvr_team &t, int order) {
    const int j = nvr_flag_peer(t);
    if (j < 0) return;
    unsigned int *w = nvr_arrival_at(t, j);
    if (order == NVR_ARRIVE_FENCE) nvr_fence_sc_sys();
    if (order == NVR_ARRIVE_RELEASE) nvr_red_add_release(w, 1u);
    else nvr_red_add_relaxed(w, 1u);
}

// After nvr_arrive_add, in the run of epoch e: the run that wraps (e == 1 after
// NVR_EPOCH_LAST, where the add left NVR_EPOCH_LAST + 1) stores e itself, with a release (the
// add before it in program order carried the arrival's ordering; a peer that reads 1 reads
// this store). A zeroed channel's first run (e == 1 too) stores the 1 the add left. Peers read
// the word in between as a run not yet arrived (wrap-safe: NVR_EPOCH_LAST + 1 and 0 are behind
// 1), so nothing waits on the passing value.
__device__ __forceinline__ void nvr_arrive_wrap(const nvr_team &t, unsigned int e) {
    const int j = nvr_flag_peer(t);
    if (j < 0 || e != 1u) return;
    nvr_st_release(nvr_arrival_at(t, j), e);
}

// Ordered arrival (direct kernels, barrier, sync), as `order` says; returns this run's epoch.
// Thread 0 (in the first warp) reads the epoch while the flag lanes (the last warp) fence, so
// the load runs under the fence instead of before it (a load the flag lanes issued first would
// hold their fence back). Then, where the block checks fingerprints (nvr_fp_on), the flag
// lanes take the epoch from thread 0 (a block barrier) and store the fingerprint packets and
// then the epoch: the packets lead the flag, so a peer that sees the flag mostly finds them at
// the same look, and they leave after the fence, which so does not wait for them to reach the
// peer. Where it does not check, the flag lanes add 1 right after the fence, without waiting
// for the epoch (nvr_arrive_add; nvr_arrive_wrap fixes the wrap). Measured on 2 x H200
// (2026-11-27, docs/performance.md): checked barrier 2.28-2.30 us, against 2.38-2.40 with
// the epoch read before the fence, and 2.61 with the packets stored by the first warp during
// the fence (a fence waits for stores that other warps of the block have in flight). Every
// thread must call it.
__device__ __forceinline__ unsigned int nvr_arrive_ordered(const nvr_team &t, int order) {
    __shared__ unsigned int nvr_arrive_e;
    if (threadIdx.x == 0) nvr_arrive_e = nvr_begin(t);
    const bool fp = nvr_fp_on(t);
    if (!fp) nvr_arrive_add(t, order);
    const int j = nvr_flag_peer(t);
    if (fp && j >= 0) {
        if (order == NVR_ARRIVE_FENCE) nvr_fence_sc_sys();
        else nvr_fence_acq_rel_sys();
    }
    __syncthreads();
    const unsigned int e = nvr_arrive_e;
    if (!fp) {
        nvr_arrive_wrap(t, e);
    } else if (j >= 0) {
        nvr_fp_publish_to(t, e, j);
        nvr_st_relaxed(nvr_arrival_at(t, j), e);
    }
    return e;
}

// Waits (by the flag lanes) until every peer in `peers` (bit j for team PE j) has arrived at
// `want` on this block; returns whether this thread's wait succeeded. An arrival of this run
// (want == e) is accepted only with the peer's fingerprint equal to this call's
// (nvr_fp_wait_arrival), unless `check` is false (nvr_quiesce_staged).
// No block barrier: callers that need the whole block to know follow it with one
// (nvr_block_ok).
__device__ __forceinline__ bool nvr_wait_arrivals(const nvr_team &t, unsigned int e,
                                                  unsigned int want, unsigned int peers,
                                                  bool check = true, bool acquire = true) {
    const int j = nvr_flag_peer(t);
    if (j < 0 || !((peers >> j) & 1u)) return true;
    const unsigned int *flag = nvr_arrive_word(t, blockIdx.x, j);
    if (want == e) return nvr_fp_wait_arrival(t, flag, e, j, check, acquire);
    return nvr_wait_flag(t, flag, want, j, e, NVR_WAIT_ARRIVE, acquire);
}

// Depart (direct algorithms): after every thread of the block has made its last access to
// peers' buffers, the flag lanes store e into depart[b][me] of every peer in `peers` with a
// system-scope release (fence.sc.sys, which also orders the block's stores that the barrier
// made this thread's, then a relaxed store: one fence, not a second one in a release store).
// Contains a block barrier; every thread must call it.
__device__ __forceinline__ void nvr_depart(const nvr_team &t, unsigned int e, unsigned int peers) {
    __syncthreads();
    const int j = nvr_flag_peer(t);
    if (j < 0 || !((peers >> j) & 1u)) return;
    nvr_fence_sc_sys();
    nvr_st_relaxed(nvr_peer(t, nvr_depart_word(t, blockIdx.x, t.me), j), e);
}

// Quiescence (PROTOCOL.md): before block b of run e ends, it has seen every store its peers
// make into this PE's channel for that run. Arrivals are the one store a kernel may not
// otherwise wait for (a peer that this PE does not touch, or an LL receiver that never
// writes back): the flag lanes wait (one load each, nearly always already satisfied) until
// every peer in `peers` has arrived at e. `ok`: this thread's waits so far succeeded (after a
// failure the block exits without waiting more). `acquire`: as nvr_ld_flag.
__device__ __forceinline__ bool nvr_quiesce(const nvr_team &t, unsigned int e, unsigned int peers,
                                            bool ok, bool check = true, bool acquire = true) {
    return ok && nvr_wait_arrivals(t, e, e, peers, check, acquire);
}

// Quiescence in the staging kernels (LL and Lamport, which write nothing of a peer's but its
// channel, and which arrive with nvr_arrive): block 0 checks every peer's fingerprint with its
// arrival, as nvr_quiesce; the other blocks wait for the arrival alone. Every launch has a block
// 0, so block 0's runs pair the two PEs' calls on the channel one for one, and a mismatch is
// found there; the watchdog's abort then ends the other blocks' waits (PROTOCOL.md,
// "Fingerprints"). Checking in every block cost a 64 KiB Lamport all-reduce (32 blocks) about
// 0.2 us (docs/performance.md, "The mid band"). (The same wait as nvr_quiesce's with the check
// off, not a wait of its own: a second wait site grew every LL module's PTX by 4 %.) The
// arrivals are relaxed stores, so they are loaded relaxed (nvr_ld_flag).
__device__ __forceinline__ bool nvr_quiesce_staged(const nvr_team &t, unsigned int e,
                                                   unsigned int peers, bool ok) {
    return nvr_quiesce(t, e, peers, ok, blockIdx.x == 0, false);
}

// Waits (by the flag lanes) until every peer in `peers` has departed epoch e from this PE's
// buffers.
__device__ __forceinline__ bool nvr_wait_departs(const nvr_team &t, unsigned int e,
                                                 unsigned int peers) {
    const int j = nvr_flag_peer(t);
    if (j < 0 || !((peers >> j) & 1u)) return true;
    return nvr_wait_flag(t, nvr_depart_word(t, blockIdx.x, j), e, j, e, NVR_WAIT_DEPART);
}

// Whether every thread of the block is still ok (a block barrier).
__device__ __forceinline__ bool nvr_block_ok(bool ok) {
    return !__syncthreads_or(!ok);
}

// Every team PE but me, as a peer mask.
__device__ __forceinline__ unsigned int nvr_all_peers(const nvr_team &t) {
    return ((1u << t.n) - 1u) & ~(1u << t.me);
}

// Whether the team descriptor is usable at all; records NVR_FAIL_LIMITS otherwise.
__device__ __forceinline__ bool nvr_team_ok(const nvr_team &t) {
    const bool ok = t.n >= 1 && t.n <= NVR_MAX_TEAM && t.me >= 0 && t.me < t.n &&
                    gridDim.x <= NVR_MAX_BLOCKS && (blockDim.x & 31u) == 0;
    if (!ok && threadIdx.x == 0) nvr_fail_at(t.status, NVR_FAIL_LIMITS, -1, 0, 0, t.chan);
    return ok;
}

// ---- LL packets -----------------------------------------------------------------------------

// One packet {d0, e, d1, e}: 8 bytes of payload, each 4 paired with the epoch, in one 16-byte
// store (a reader sees each 8-byte half whole, so both flags equal e means both data words are
// this epoch's).
__device__ __forceinline__ void nvr_ll_store(void *p, nvr_u64 v, unsigned int e) {
    asm volatile("st.volatile.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(p),
                 "r"((unsigned int)v), "r"(e), "r"((unsigned int)(v >> 32)), "r"(e)
                 : "memory");
}

// One poll of a packet: true (and the payload in v) when both flags equal e.
__device__ __forceinline__ bool nvr_ll_poll(const void *p, unsigned int e, nvr_u64 &v) {
    unsigned int d0, f0, d1, f1;
    asm volatile("ld.volatile.global.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(d0), "=r"(f0), "=r"(d1), "=r"(f1)
                 : "l"(p)
                 : "memory");
    v = (nvr_u64)d0 | ((nvr_u64)d1 << 32);
    return f0 == e && f1 == e;
}

// Waits for the packet at p (from team PE `peer`) of epoch e; its payload in v.
__device__ __forceinline__ bool nvr_ll_wait(const nvr_team &t, const void *p, unsigned int e,
                                            int peer, nvr_u64 &v) {
    return nvr_wait(
        t, [&] { return nvr_ll_poll(p, e, v); }, peer, e, NVR_WAIT_LL);
}

// ---- call fingerprints (PROTOCOL.md, "Fingerprints") ----------------------------------------

// Records a mismatch with peer j (status code NVR_FAIL_MISMATCH), in the status record's
// layout (NVR_ST_*): the peer, the epoch, NVR_WAIT_CALL, the block, both fingerprints
// and this PE's team index, then the ready word last. Only the CAS winner writes
// the rest. (Takes values, not the team, so no address of the kernel parameter escapes, as
// nvr_fail.)
__device__ __noinline__ void nvr_fail_mismatch(unsigned int *status, int j, unsigned int e,
                                               nvr_u64 w0, nvr_u64 w1, nvr_u64 m0, nvr_u64 m1,
                                               int me) {
    if (atomicCAS(status, 0u, NVR_FAIL_MISMATCH) == 0u) {
        volatile unsigned int *s = status;
        s[NVR_ST_PEER] = (unsigned int)j;
        s[NVR_ST_EPOCH] = e;
        s[NVR_ST_WHAT] = NVR_WAIT_CALL;
        s[NVR_ST_BLOCK] = blockIdx.x;
        nvr_status64(s, NVR_ST_WHERE, 0ull); // the fingerprints name the team
        nvr_status64(s, NVR_ST_FP, w0);
        nvr_status64(s, NVR_ST_FP + 2, w1);
        nvr_status64(s, NVR_ST_FP + 4, m0);
        nvr_status64(s, NVR_ST_FP + 6, m1);
        s[NVR_ST_ME] = (unsigned int)me;
        nvr_status_ready(status, NVR_FAIL_MISMATCH);
    }
}

// Whether this block publishes and checks fingerprints.
__device__ __forceinline__ bool nvr_fp_on(const nvr_team &t) {
    return t.check != 0 && blockIdx.x < NVR_FP_BLOCKS;
}

// The publication of this call's fingerprint for block b's run of epoch e into peer j's slot
// (e, b, me), by one thread for each peer: two LL packets, so a reader knows them whole and of
// this run by their flags, however the stores are ordered against the arrival.
__device__ __forceinline__ void nvr_fp_publish_to(const nvr_team &t, unsigned int e, int j) {
    if (!nvr_fp_on(t)) return;
    char *s = nvr_peer(t, nvr_fp_slot(t, e, blockIdx.x, t.me), j);
    nvr_ll_store(s, t.fp[0], e);
    nvr_ll_store(s + NVR_LL_PACKET, t.fp[1], e);
}

// The verdict on peer j's fingerprint slot for run e, its two packets loaded (p0, p1: their
// flags were e): 1 when published and equal to (m0, m1), -1 (mismatch recorded) when
// published and different, 0 when not yet there.
__device__ __forceinline__ int nvr_fp_judge(bool p0, bool p1, nvr_u64 w0, nvr_u64 w1,
                                            unsigned int e, int j, nvr_u64 m0, nvr_u64 m1,
                                            unsigned int *status, int me) {
    if (!p0 || !p1) return 0;
    if (w0 == m0 && w1 == m1) return 1;
    nvr_fail_mismatch(status, j, e, w0, w1, m0, m1, me);
    return -1;
}

// One look at the fingerprint slot s of peer j for run e (nvr_fp_judge's verdict). Both
// packets are loaded before either is tested, so the two loads are in flight together.
__device__ __forceinline__ int nvr_fp_look(const char *s, unsigned int e, int j, nvr_u64 m0,
                                           nvr_u64 m1, unsigned int *status, int me) {
    nvr_u64 w0, w1;
    const bool p0 = nvr_ll_poll(s, e, w0);
    const bool p1 = nvr_ll_poll(s + NVR_LL_PACKET, e, w1);
    return nvr_fp_judge(p0, p1, w0, w1, e, j, m0, m1, status, me);
}

// The slow path's look at every peer's slot of block b's run e (slots: peer 0's; one slot per
// peer after it): false (mismatch recorded) when some peer published another call's
// fingerprint. Peers not yet there are skipped: only what a peer published is judged.
__device__ __noinline__ bool nvr_fp_scan_slots(const char *slots, unsigned int e, int n, int me,
                                               nvr_u64 m0, nvr_u64 m1, unsigned int *status) {
    for (int j = 0; j < n && j < NVR_MAX_TEAM; ++j)
        if (j != me && nvr_fp_look(slots + j * NVR_FP_SLOT, e, j, m0, m1, status, me) < 0)
            return false;
    return true;
}

__device__ __forceinline__ bool nvr_fp_scan(const nvr_team &t, unsigned int e) {
    if (blockIdx.x >= NVR_FP_BLOCKS) return true;
    return nvr_fp_scan_slots(nvr_fp_slot(t, e, blockIdx.x, 0), e, t.n, t.me, t.fp[0], t.fp[1],
                             t.status);
}

// Waits for peer j's arrival at this run's epoch e on *flag (local) and, where this block
// checks (nvr_fp_on, and `check`), for its fingerprint of run e, which must equal this call's.
// Each poll loads both fingerprint packets and then the flag (nvr_ld_flag), all three in
// flight at once: the packets carry their own flags, so they need no ordering after the
// arrival, and the check adds no load latency after the arrival is seen. False on a mismatch
// (recorded), abort or timeout.
__device__ __forceinline__ bool nvr_fp_wait_arrival(const nvr_team &t, const unsigned int *flag,
                                                    unsigned int e, int j, bool check,
                                                    bool acquire) {
    if (!check || !nvr_fp_on(t))
        return nvr_wait_flag(t, flag, e, j, e, NVR_WAIT_ARRIVE, acquire);
    const char *s = nvr_fp_slot(t, e, blockIdx.x, j);
    const nvr_u64 m0 = t.fp[0], m1 = t.fp[1];
    unsigned int *status = t.status;
    const int me = t.me;
    int r = 0;
    const bool ok = nvr_wait(
        t,
        [&] {
            nvr_u64 w0, w1;
            const bool p0 = nvr_ll_poll(s, e, w0);
            const bool p1 = nvr_ll_poll(s + NVR_LL_PACKET, e, w1);
            const bool arrived = nvr_reached(nvr_ld_flag(flag, acquire), e);
            r = nvr_fp_judge(p0, p1, w0, w1, e, j, m0, m1, status, me);
            return r < 0 || (r > 0 && arrived);
        },
        j, e, NVR_WAIT_ARRIVE);
    return ok && r > 0;
}
