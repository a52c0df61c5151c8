// Lamport one-shot reductions and copies for the mid band (64 KiB - 2 MiB) over NVLink: every PE
// pushes its input with 16-byte stores into receive buffers in its peers' channels that were
// filled with a sentinel beforehand, and polls its own receive buffers until no word is the
// sentinel. The data is its own flag (like LL packets, but at full payload), so there is no
// barrier before or after and no separate flag per vector. Compiled as `prefix + ops.cuh +
// common.cuh + lamport.cu` with a float type's reduction prefix (types.rs): nvr_lamport_all_reduce,
// nvr_lamport_reduce_scatter, nvr_lamport_reduce; and without one (type-free): the copies
// nvr_lamport_broadcast, _fcollect, _alltoall, _gather and _scatter (COPIES, at the end).
// PROTOCOL.md, "Lamport buffers", is the contract; the gist:
//
// SENTINEL. Every 32-bit word of an unwritten receive buffer is 0x80000000 (f32's -0.0). The
// host fills the buffers so (cuMemsetD32) whenever it zeroes a channel; the kernels refill what
// they used (ROTATION). A sender rewrites every element that is -0.0 to +0.0 before sending, and
// pads the tail of the last vector with zero bytes; then no 32-bit word of what it sends is
// 0x80000000 for f32, f16, bf16 or fp8 (for 16- and 8-bit types the word 0x80000000 holds a -0.0
// in its top element). So a reader may take every word that is not the sentinel as this run's
// data: each word is written once, by a store that carries its final value. (f64 is not served:
// its -0.0 is not that word pattern, and any 64-bit pattern of the fill is a valid double.) The
// reader's own input is read the same way (-0.0 as +0.0), so every PE combines the same values
// and gets the same bits; the sign of a zero result may differ from other algorithms (e.g. a
// product with a -0.0 factor is +0.0 here), nothing else does.
//
// ROTATION. Three buffers rotate: a PE's run r (its r-th Lamport run on this channel) receives
// into buffer r % 3 on every peer, and re-fills with the sentinel buffer (r - 1) % 3 (the one it
// read in run r - 1), over the bytes it received there (the channel's header keeps them). Why
// this is safe without a barrier:
//   - Nothing still writes buffer (r - 1) % 3 when run r clears it: every peer's stores of run
//     r - 1 into it had landed before this PE's run r - 1 ended (it waited for every word), and
//     run r starts after run r - 1 ended (stream order).
//   - Nothing writes it again before the clear is done: peers write into it next at their run
//     r + 2 ((r - 1) % 3 == (r + 2) % 3). A peer starts run r + 2 only after its run r + 1 ended,
//     and every block of a run waits at its end for every peer's arrival at that run
//     (nvr_quiesce_staged), so the peer's run r + 1 ended after this PE arrived at run r + 1,
//     which it does only after its run r (clear included) has completed and its writes are visible
//     (griddepcontrol.wait / stream order). Not "after it received this PE's data of run
//     r + 1": a rooted reduce's root sends none, and the arrival bounds a non-root all the same.
//   - Buffer r % 3 holds only the sentinel when run r's stores arrive: it was last written at run
//     r - 3 (all landed before this PE's run r - 3 ended) and cleared at run r - 2; a peer writes
//     it at its run r, which starts after its run r - 1 ended, so after this PE arrived at run
//     r - 1, after its run r - 2 had completed.
// (Clearing the buffer of run r - 2 in run r instead, i.e. buffer (r + 1) % 3, would race: a peer
// may start run r + 1 once this PE has arrived at run r and sent its data, and write into that
// buffer while this PE is still clearing it, unless the clear were fenced before the arrival.)
// Two buffers cannot work: the one cleared in run r would be written at run r + 1. The run
// index lives in the channel (HEADER: `rot` in the word `state`), advanced once per run by the
// last block of the launch to count itself (the count `done` in the same word), so it depends
// neither on the epochs (whose wrap 0xFFFFFFFE -> 1 would break e % 3) nor on the grid: every
// Lamport launch on a channel, of any size, advances it by one, on every member alike (every
// member runs the same calls on the channel).
//
// HEADER. {u32 state = rot << 16 | done, u32 clear[3]}: clear[k] is what the run of buffer k
// re-fills, the bytes a slot that the run before it received (into buffer (k + 2) % 3). At a
// block's start the lane that reads for the block loads all four words at once and then counts
// the block (a relaxed add of 1 to `state`); the block counted last (it read done == grid - 1)
// writes, at its end, clear[(rot + 1) % 3] and then state = (rot + 1) % 3 << 16. No fence is
// needed: the update of `state` follows, in the order of that one word, every count of the
// run (the last count read them all, and a thread's later store to a word follows its own
// add), and each count follows its block's read of the word, so no block of the run reads the
// update (per-word coherence); the clear word written is not the one this run uses; and the
// next run reads the header after this launch has completed. (Until 2026-11-28 `rot` and
// `done` were two words, so the count had to be a release and the update follow a
// `fence.acq_rel.gpu`: the release held the block's arrival back behind it, and 16-64 KiB
// all-reduces took 0.2-0.4 us longer, tools/probes/lamport.cu's `bis-cnt-*`.)
//
// PROTOCOL. Like an LL kernel otherwise: every block arrives at every peer (relaxed) and waits
// before it ends for every peer's arrival of this run, block 0 with the call's fingerprint
// published and checked (nvr_arrive, nvr_quiesce_staged); every poll goes through nvr_wait
// (abort word, timeout, fingerprint scan every 256 polls). The receive buffers are written by
// peers only in the way above, so no writer waits for anything.
//
// CONTROL WARP. A block's last warp moves no data: its lanes j < n are the flag lanes (arrive,
// quiescence), its lane 31 reads the epoch and the header for the block and counts it
// (HEADER), and all its lanes re-fill the block's share of the previous buffer. Threads
// [0, blockDim.x - 32) move data. So no data thread waits for a flag, a fingerprint, the count
// or a re-fill (at the end of every block they cost a few tenths of a microsecond a call:
// docs/performance.md, "The mid band").
//
// LAYOUT (from nvr_lam_area(t) = chan + nvr_chan_bytes(ll_bytes)): a 256-byte header
// (HEADER; its first 16 bytes used), then buf[3][n - 1][slot]: buffer k, slot s holds what team PE
// s (s < me) or s + 1 (s >= me) sent. `slot` (bytes, a multiple of 16) is a launch argument, the
// same on every member (the host derives it from the area's size and the team size).
//
// LAUNCH RULE: x = count * sizeof(T) payload bytes per (sender, receiver) pair (all_reduce and
// reduce: the buffer; reduce_scatter: one block); V = ceil(x / 16) vectors; grid g =
// clamp(ceil(x / 2 KiB), 1, min(128, max_blocks)) (collective/algo/lamport.rs, `shape`: a
// tuning choice; sender and receiver need not split alike, vector i lives at byte 16 i of its
// slot whoever moves it, but the grid must be equal on every member for the epochs), block b
// takes vectors [b * vpb, (b + 1) * vpb), vpb = ceil(V / g); block size any multiple of 32 (at
// least 64: one data warp and the control warp; at most 544), the host takes 32 +
// clamp(roundup32(vpb), 32, 512). LIMITS: ceil(x/16)*16 <= slot, slot % 16 == 0, 256 + 3 (n - 1) slot <= lam_bytes,
// g <= NVR_FP_BLOCKS; else NVR_FAIL_LIMITS and return.

#define NVR_LAM_HEADER 256ull
#define NVR_LAM_SENTINEL 0x80000000u
#define NVR_LAM_MAX_GRID NVR_FP_BLOCKS

// Payload bytes, vector indices and re-fill offsets of one call, in 32 bits: nvr_lam_check
// bounds the payload by NVR_LAM_MAX_BYTES, so 16 * (any vector index) + 16 fits. As in the LL
// kernels (ll.cu, nvr_pk), 64-bit index arithmetic and a 64-bit division lengthened every
// thread's path to its first store (docs/performance.md, "The small kernels' path").
typedef unsigned int nvr_lv;
#define NVR_LAM_MAX_BYTES 1073741824u // 1 GiB: channel/lamport.rs, MAX_SLOT

// Bytes of a slot that a copy of x bytes a pair uses (COPIES, LAYOUT): its vectors, then one
// mask packet a line of 32 of them. The host computes the same (lamport.rs, `copy_need`).
__device__ __forceinline__ nvr_u64 nvr_lamc_need(nvr_u64 x) {
    const nvr_u64 v = (x + 15) / 16;
    return 16 * (v + (v + 31) / 32);
}

struct nvr_lam_head {
    unsigned int state;    // rot << 16 | done: this run's buffer index (0..2) and the blocks of
                           // the current run that have counted themselves
    unsigned int clear[3]; // clear[k]: bytes per slot that the run of buffer k re-fills
};
#define NVR_LAM_DONE_BITS 16u
static_assert(NVR_LAM_MAX_GRID < (1 << NVR_LAM_DONE_BITS), "done must not carry into rot");

// Threads that move data: all but the block's last warp (CONTROL WARP).
__device__ __forceinline__ unsigned int nvr_lam_data_threads() { return blockDim.x - 32u; }
__device__ __forceinline__ bool nvr_lam_is_control() { return threadIdx.x >= blockDim.x - 32u; }
// The first team PE but me (a reduce_scatter's first block sent, prefetched).
__device__ __forceinline__ int nvr_lam_first_peer(const nvr_team &t) { return t.me == 0 ? 1 : 0; }

// The control warp's lane 31, which counts the block (never a flag lane: n <= 8).
__device__ __forceinline__ bool nvr_lam_is_counter() { return threadIdx.x == blockDim.x - 1u; }

__device__ __forceinline__ char *nvr_lam_area(const nvr_team &t) {
    return (char *)(t.chan + nvr_chan_bytes(t.ll_bytes));
}

// Buffer k's slot for team PE j, in the channel of the receiver `me` (local address).
__device__ __forceinline__ char *nvr_lam_slot(char *area, unsigned int k, int j, int me, int n,
                                              nvr_u64 slot) {
    const int s = j < me ? j : j - 1;
    return area + NVR_LAM_HEADER + ((nvr_u64)k * (nvr_u64)(n - 1) + (nvr_u64)s) * slot;
}

// One poll of a received vector: true (and the vector in v) when no word is the sentinel.
__device__ __forceinline__ bool nvr_lam_poll(const char *p, uint4 &v) {
    asm volatile("ld.volatile.global.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "l"(p)
                 : "memory");
    return v.x != NVR_LAM_SENTINEL && v.y != NVR_LAM_SENTINEL && v.z != NVR_LAM_SENTINEL &&
           v.w != NVR_LAM_SENTINEL;
}

__device__ __forceinline__ void nvr_lam_st16(char *p, uint4 v) {
    asm volatile("st.volatile.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(v.x),
                 "r"(v.y), "r"(v.z), "r"(v.w)
                 : "memory");
}

struct nvr_lam_ctx {
    unsigned int e;    // this block's epoch
    unsigned int rot;  // this run's buffer
    unsigned int before; // the counter lane: blocks counted before this one (others: 0)
    nvr_lv x;          // payload bytes per (sender, receiver) pair
    nvr_lv clear;      // bytes per slot to re-fill in buffer (rot + 2) % 3
    nvr_lv v0, v1;     // this block's vectors [v0, v1)
    char *area;
};

// Whether the launch keeps its limits (LIMITS above), from its arguments alone. Every thread
// computes the same answer, so a refused block returns whole.
__device__ __forceinline__ bool nvr_lam_check(const nvr_team &t, nvr_u64 x, nvr_u64 need,
                                              nvr_u64 slot, int root) {
    return t.n >= 1 && t.n <= NVR_MAX_TEAM && t.me >= 0 && t.me < t.n && root >= 0 &&
           root < t.n && gridDim.x <= NVR_LAM_MAX_GRID && blockDim.x >= 64 &&
           (blockDim.x & 31u) == 0 && (slot & 15u) == 0 && x <= NVR_LAM_MAX_BYTES &&
           need <= slot && NVR_LAM_HEADER + 3ull * (nvr_u64)(t.n - 1) * slot <= t.lam_bytes;
}

// What the counter lane reads at a block's start for the whole block: the epoch, this run's
// buffer and what it re-fills (HEADER). One thread reads, the rest take it from here after the
// block barrier: with every thread reading, a 1 MiB launch sent some 2,000 loads of one line
// to one L2 slice, and the barrier made every block wait for the last of them (1 MiB
// all-reduce 7.7 us against 7.2 before the barrier, 2 x H200).
__shared__ unsigned int nvr_lam_sh[3];

// This run's buffer and what it re-fills, from the header in one 16-byte load (HEADER; a
// `clear` word holds a payload that passed nvr_lam_check, or 0).
struct nvr_lam_read {
    unsigned int rot;
    nvr_lv clear;
};
__device__ __forceinline__ nvr_lam_read nvr_lam_read_header(const char *area) {
    unsigned int state, c0, c1, c2;
    asm volatile("ld.volatile.global.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(state), "=r"(c0), "=r"(c1), "=r"(c2)
                 : "l"(area)
                 : "memory");
    const unsigned int rot = state >> NVR_LAM_DONE_BITS;
    return {rot, rot == 0 ? c0 : rot == 1 ? c1 : c2};
}

// Counts the calling block into this run (HEADER): the blocks counted before it. Relaxed: it
// follows the caller's read of the same word (nvr_lam_read_header), which is all the order
// the rotation needs.
__device__ __forceinline__ unsigned int nvr_lam_count_block(char *area) {
    unsigned int old;
    asm volatile("atom.relaxed.gpu.global.add.u32 %0, [%1], 1;"
                 : "=r"(old)
                 : "l"(area)
                 : "memory");
    return old & ((1u << NVR_LAM_DONE_BITS) - 1u);
}

// The last block's update of the header (nvr_lam_finish): the bytes a slot this run received
// (`got`), which the next run re-fills, then the next run's buffer with no block counted.
__device__ __forceinline__ void nvr_lam_advance(char *area, unsigned int rot, nvr_lv got) {
    volatile nvr_lam_head *h = (volatile nvr_lam_head *)area;
    const unsigned int next = (rot + 1) % 3;
    h->clear[next] = got;
    h->state = next << NVR_LAM_DONE_BITS;
}

// Start of a block. From the launch's arguments alone, before griddepcontrol.wait
// (nvr_launch_begin), so while the kernel before it may still run: the launch check and the
// block's vectors (as nvr_ll_start). Then the wait, and: a refused launch recorded (false: the
// block returns whole); the counter lane reads the block's epoch and the header (this run's
// buffer, what to clear), counts the block (the count's result is needed only at the block's
// end) and leaves what it read in nvr_lam_sh. Then (nvr_lam_arrive) the block takes them and
// arrives; the kernels load their first vector in between, so that its load and the header's
// overlap.
// `lines`: a copy's (COPIES): blocks take whole lines of 32 vectors, and the slot holds
// nvr_lamc_need(bytes).
__device__ __forceinline__ bool nvr_lam_start(const nvr_team &t, nvr_u64 bytes, nvr_u64 slot,
                                              int root, nvr_lam_ctx &c, bool lines = false) {
    const bool ok = nvr_lam_check(t, bytes, lines ? nvr_lamc_need(bytes) : (bytes + 15) / 16 * 16,
                                  slot, root);
    c.area = nvr_lam_area(t);
    c.x = (nvr_lv)bytes;
    const nvr_lv vectors = (c.x + 15) / 16;
    nvr_lv vpb = gridDim.x == 1 ? vectors : (vectors + gridDim.x - 1) / gridDim.x;
    if (lines) vpb = (vpb + 31) / 32 * 32;
    c.v0 = min(blockIdx.x * vpb, vectors);
    c.v1 = min(c.v0 + vpb, vectors);
    c.before = 0;
    if (!nvr_launch_checked(t, ok)) return false;
    if (nvr_lam_is_counter()) {
        const unsigned int e = nvr_begin(t);
        const nvr_lam_read h = nvr_lam_read_header(c.area);
        c.before = nvr_lam_count_block(c.area);
        nvr_lam_sh[0] = e;
        nvr_lam_sh[1] = h.rot;
        nvr_lam_sh[2] = h.clear;
    }
    return true;
}

// The block takes what the counter lane read and arrives (relaxed, with the fingerprint).
__device__ __forceinline__ void nvr_lam_arrive(const nvr_team &t, nvr_lam_ctx &c) {
    __syncthreads();
    c.e = nvr_lam_sh[0];
    c.rot = nvr_lam_sh[1];
    c.clear = nvr_lam_sh[2];
    nvr_arrive(t, c.e);
}

// Re-fills with the sentinel buffer (rot + 2) % 3 over c.clear bytes of every slot; the work is
// spread over the control warps of the grid (consecutive vectors to consecutive lanes), slot by
// slot. (Not one loop over every slot's vectors with the slot and offset of vector w as w / per
// and w % per: those 64-bit divisions, dozens of instructions each, made every block's end wait
// for its control warp; the 1 MiB all-reduce took 7.43 us that way against 6.63, 2 x H200,
// tools/probes/lamport.cu's `bis-oldrefill` and `bis`.)
__device__ __forceinline__ void nvr_lam_refill(const nvr_team &t, const nvr_lam_ctx &c,
                                               nvr_u64 slot) {
    if (c.clear == 0 || t.n < 2) return;
    const nvr_lv bytes = (c.clear + 15) / 16 * 16;
    char *buf = c.area + NVR_LAM_HEADER + (nvr_u64)((c.rot + 2) % 3) * (nvr_u64)(t.n - 1) * slot;
    const uint4 s = make_uint4(NVR_LAM_SENTINEL, NVR_LAM_SENTINEL, NVR_LAM_SENTINEL,
                               NVR_LAM_SENTINEL);
    const nvr_lv first = 16u * (32u * blockIdx.x + (threadIdx.x & 31u)),
                 stride = 16u * 32u * gridDim.x;
    for (int k = 0; k < t.n - 1; ++k, buf += slot)
        for (nvr_lv o = first; o < bytes; o += stride) *(uint4 *)(buf + o) = s;
}

// The control warp's part of a run: its share of the re-fill, then every peer's arrival at this
// run (Quiescence, the fingerprint checked, by the flag lanes). Whether its waits succeeded.
__device__ __forceinline__ bool nvr_lam_control(const nvr_team &t, const nvr_lam_ctx &c,
                                                nvr_u64 slot) {
    nvr_lam_refill(t, c, slot);
    return nvr_quiesce_staged(t, c.e, nvr_all_peers(t), true);
}

// End of a block: the block counted last (HEADER) advances the channel's run index and records
// what this run received (`got` bytes per slot) for the next run to clear; the next Lamport
// launch reads it only after this one has completed. Then the protocol's end (epoch). Done even
// when a wait failed: a failed run's channel is re-made (header included) before reuse. The
// wait for every peer's arrival of this run (the control warp's nvr_quiesce_staged, all peers,
// whatever this PE received) is what keeps a peer from running two Lamport runs ahead
// (ROTATION): it must not be narrowed.
__device__ __forceinline__ void nvr_lam_finish(const nvr_team &t, const nvr_lam_ctx &c,
                                               nvr_lv got, bool ok) {
    if (nvr_lam_is_counter() && c.before == gridDim.x - 1) nvr_lam_advance(c.area, c.rot, got);
    nvr_end(t, c.e, ok);
}

// Vector i (bytes [16i, 16i + 16) of a payload of x bytes) of the buffer at p: one 16-byte load
// where aligned and whole, else element by element (E bytes each, p E-aligned: the reductions'
// element type, 1 for the type-free copies), zero past x.
template <int E>
__device__ __forceinline__ uint4 nvr_lam_ld(const char *p, nvr_lv i, nvr_lv x) {
    const char *q = p + 16 * i;
    if ((((nvr_u64)q) & 15u) == 0 && 16 * i + 16 <= x) return *(const uint4 *)q;
    unsigned char b[16];
#pragma unroll
    for (int k = 0; k < 16; ++k) b[k] = 0;
    const nvr_lv nb = min((nvr_lv)16, x - 16 * i);
    // Unrolled with constant offsets, so that b stays in registers.
#pragma unroll
    for (int k = 0; k < 16; k += E)
        if ((nvr_lv)k < nb) memcpy(b + k, q + k, E);
    uint4 v;
    memcpy(&v, b, 16);
    return v;
}

// Stores vector i of a payload of x bytes at p (the bytes below x only; E as nvr_lam_ld).
template <int E>
__device__ __forceinline__ void nvr_lam_st(char *p, nvr_lv i, nvr_lv x, uint4 v) {
    char *q = p + 16 * i;
    if ((((nvr_u64)q) & 15u) == 0 && 16 * i + 16 <= x) {
        *(uint4 *)q = v;
        return;
    }
    unsigned char b[16];
    memcpy(b, &v, 16);
    const nvr_lv nb = min((nvr_lv)16, x - 16 * i);
#pragma unroll
    for (int k = 0; k < 16; k += E)
        if ((nvr_lv)k < nb) memcpy(q + k, b + k, E);
}

#ifdef NVR_OP
static_assert(sizeof(NVR_T) <= 4, "Lamport kernels serve 32-, 16- and 8-bit floats only");
#define NVR_LAM_EPV (16 / (int)sizeof(NVR_T)) // elements per vector

// -0.0 of the element type as +0.0, element by element (a word then never equals the sentinel).
__device__ __forceinline__ unsigned int nvr_lam_clean(unsigned int w) {
#if NVR_IS_FLOAT
    if (sizeof(NVR_T) == 4) return w == 0x80000000u ? 0u : w;
    if (sizeof(NVR_T) == 2) {
        const unsigned int lo = (w & 0xffffu) == 0x8000u ? 0u : (w & 0xffffu);
        const unsigned int hi = (w >> 16) == 0x8000u ? 0u : (w >> 16);
        return lo | (hi << 16);
    }
    unsigned int r = 0;
#pragma unroll
    for (int k = 0; k < 4; ++k) {
        const unsigned int b = (w >> (8 * k)) & 0xffu;
        r |= (b == 0x80u ? 0u : b) << (8 * k);
    }
    return r;
#else
    return w;
#endif
}

__device__ __forceinline__ uint4 nvr_lam_clean4(uint4 v) {
    v.x = nvr_lam_clean(v.x);
    v.y = nvr_lam_clean(v.y);
    v.z = nvr_lam_clean(v.z);
    v.w = nvr_lam_clean(v.w);
    return v;
}

__device__ __forceinline__ NVR_T nvr_lam_elem(const uint4 &v, int m) {
    NVR_T x;
    memcpy(&x, (const unsigned char *)&v + m * sizeof(NVR_T), sizeof(NVR_T));
    return x;
}

// acc (team PE j's vector folded in, in team order: j == 0 starts it).
__device__ __forceinline__ void nvr_lam_fold(NVR_ACC *acc, const uint4 &v, int j, NVR_ACC s) {
#pragma unroll
    for (int m = 0; m < NVR_LAM_EPV; ++m) {
        const NVR_ACC a = nvr_pre(NVR_LOAD(nvr_lam_elem(v, m)), s);
        acc[m] = j == 0 ? a : nvr_combine(acc[m], a);
    }
}

__device__ __forceinline__ uint4 nvr_lam_out(const NVR_ACC *acc, int n) {
    unsigned char b[16];
#pragma unroll
    for (int m = 0; m < NVR_LAM_EPV; ++m) {
        const NVR_T y = NVR_STORE(nvr_post(acc[m], n));
        memcpy(b + m * sizeof(NVR_T), &y, sizeof(NVR_T));
    }
    uint4 v;
    memcpy(&v, b, 16);
    return v;
}

// A data thread's first vector of src (x bytes), cleaned, loaded before the block barrier
// (`have`: whether the thread has one).
struct nvr_lam_first {
    bool have;
    uint4 v;
};
__device__ __forceinline__ nvr_lam_first nvr_lam_prefetch(const nvr_lam_ctx &c, const char *src,
                                                          nvr_lv x) {
    nvr_lam_first f;
    const nvr_lv i = c.v0 + threadIdx.x;
    f.have = !nvr_lam_is_control() && i < c.v1;
    f.v = f.have ? nvr_lam_clean4(nvr_lam_ld<sizeof(NVR_T)>(src, i, x))
                 : make_uint4(0, 0, 0, 0);
    return f;
}

// Sends vectors [v0, v1) of src (x bytes), cleaned, to team PE k's buffer c.rot, slot of me
// (the thread's first vector from f when f.have: prefetched from this src).
__device__ __forceinline__ void nvr_lam_send(const nvr_team &t, const nvr_lam_ctx &c, int k,
                                             const char *src, nvr_lv x, nvr_u64 slot,
                                             const nvr_lam_first &f) {
    char *to = nvr_peer(t, nvr_lam_slot(c.area, c.rot, t.me, k, t.n, slot), k);
    nvr_lv i = c.v0 + threadIdx.x;
    if (f.have) {
        nvr_lam_st16(to + 16 * i, f.v);
        i += nvr_lam_data_threads();
    }
    for (; i < c.v1; i += nvr_lam_data_threads())
        nvr_lam_st16(to + 16 * i, nvr_lam_clean4(nvr_lam_ld<sizeof(NVR_T)>(src, i, x)));
}

// TEAM LOOPS. The loops over the team below are unrolled over M members (every index a
// constant, so the arrays stay in registers): nvr_lam_send_all and nvr_lam_reduce_recv take the
// smallest M in {2, 4, 8} that holds the team (NVR_TEAM_DISPATCH). A pair run through loops of
// 8 paid for the seven empty members on every vector: on 2 x H200 the all-reduce took 6.64 us
// at 1 MiB and 10.47 at 2 MiB that way against 6.29 and 9.76 (tools/probes/lamport.cu, `bis`
// against `crate`).

// Sends the whole src to every peer (all_reduce), one load of src per vector serving them all.
// f: the thread's first vector of src, prefetched. M: TEAM LOOPS (t.n <= M).
template <int M>
__device__ __forceinline__ void nvr_lam_send_whole(const nvr_team &t, const nvr_lam_ctx &c,
                                                   const char *src, nvr_lv x, nvr_u64 slot,
                                                   const nvr_lam_first &f) {
    char *to[M];
#pragma unroll
    for (int k = 0; k < M; ++k)
        to[k] = k < t.n && k != t.me
                    ? nvr_peer(t, nvr_lam_slot(c.area, c.rot, t.me, k, t.n, slot), k)
                    : nullptr;
    for (nvr_lv i = c.v0 + threadIdx.x; i < c.v1; i += nvr_lam_data_threads()) {
        const uint4 v = f.have && i == c.v0 + threadIdx.x
                            ? f.v
                            : nvr_lam_clean4(nvr_lam_ld<sizeof(NVR_T)>(src, i, x));
#pragma unroll
        for (int k = 0; k < M; ++k)
            if (to[k] != nullptr) nvr_lam_st16(to[k] + 16 * i, v);
    }
}

// Sends every peer its part: all_reduce the whole src, reduce_scatter block k of src to PE k.
// f: the thread's first vector, prefetched (all_reduce: of src; reduce_scatter: of the block
// of the first peer).
__device__ __forceinline__ void nvr_lam_send_all(const nvr_team &t, const nvr_lam_ctx &c,
                                                 const char *src, nvr_lv x, nvr_u64 slot,
                                                 bool per_peer_block, const nvr_lam_first &f) {
    if (!per_peer_block) {
        NVR_TEAM_DISPATCH(t.n, nvr_lam_send_whole, t, c, src, x, slot, f);
        return;
    }
    for (int k = 0; k < t.n; ++k)
        if (k != t.me) {
            // A copy whose `have` says whether it serves k, not `k == first ? f : none` (a
            // choice between two objects, which put both in local memory).
            nvr_lam_first g = f;
            g.have = f.have && k == nvr_lam_first_peer(t);
            nvr_lam_send(t, c, k, src + (nvr_u64)k * x, x, slot, g);
        }
}

// Receives and reduces vectors [v0, v1): own src (cleaned) and every peer's from buffer c.rot,
// combined in team order, into dst. After a failed wait the thread stores nothing more. M: TEAM
// LOOPS (t.n <= M); nvr_lam_reduce_recv chooses it.
template <int M>
__device__ __forceinline__ bool nvr_lam_reduce_recv_over(const nvr_team &t, const nvr_lam_ctx &c,
                                                    const char *own, char *dst, nvr_lv x,
                                                    nvr_u64 slot, NVR_ACC s) {
    const char *from[M];
#pragma unroll
    for (int j = 0; j < M; ++j)
        from[j] = j < t.n && j != t.me ? nvr_lam_slot(c.area, c.rot, j, t.me, t.n, slot)
                                       : nullptr;
    for (nvr_lv i = c.v0 + threadIdx.x; i < c.v1; i += nvr_lam_data_threads()) {
        uint4 v[M];
        bool got[M];
        // Every peer's vector polled once, the loads in flight together; then the late ones,
        // all in one wait (every array index a constant once unrolled, so they stay in
        // registers), which names a peer still missing when it fails: not the first found
        // late, whose data may have come since (a PE held up by an absent peer is late too).
        bool all = true;
#pragma unroll
        for (int j = 0; j < M; ++j) {
            got[j] = from[j] == nullptr || nvr_lam_poll(from[j] + 16 * i, v[j]);
            all = all && got[j];
        }
        const uint4 mine = nvr_lam_clean4(nvr_lam_ld<sizeof(NVR_T)>(own, i, x));
        if (!all && !nvr_wait_for(
                        t,
                        [&] {
                            bool done = true;
#pragma unroll
                            for (int j = 0; j < M; ++j) {
                                if (!got[j]) got[j] = nvr_lam_poll(from[j] + 16 * i, v[j]);
                                done = done && got[j];
                            }
                            return done;
                        },
                        [&] {
                            int missing = -1;
#pragma unroll
                            for (int j = M - 1; j >= 0; --j)
                                if (!got[j]) missing = j;
                            return missing;
                        },
                        c.e, NVR_WAIT_LL))
            return false;
        NVR_ACC acc[NVR_LAM_EPV];
#pragma unroll
        for (int j = 0; j < M; ++j)
            if (j < t.n) {
                // A copy, not `j == me ? mine : v[j]` (an lvalue whose address would put v in
                // local memory).
                uint4 w = v[j];
                if (j == t.me) w = mine;
                nvr_lam_fold(acc, w, j, s);
            }
        nvr_lam_st<sizeof(NVR_T)>(dst, i, x, nvr_lam_out(acc, t.n));
    }
    return true;
}

// nvr_lam_reduce_recv_over with the team loops of TEAM LOOPS for t.n.
__device__ __forceinline__ bool nvr_lam_reduce_recv(const nvr_team &t, const nvr_lam_ctx &c,
                                                    const char *own, char *dst, nvr_lv x,
                                                    nvr_u64 slot, NVR_ACC s) {
    return NVR_TEAM_DISPATCH(t.n, nvr_lam_reduce_recv_over, t, c, own, dst, x, slot, s);
}

// every dst = the reduction of every member's src (count elements).
extern "C" __global__ void __launch_bounds__(544, 1)
    nvr_lamport_all_reduce(const __grid_constant__ nvr_team t, const NVR_T *src, NVR_T *dst,
                           unsigned long long count, double scale, unsigned long long slot) {
    nvr_lam_ctx c;
    if (!nvr_lam_start(t, count * sizeof(NVR_T), slot, 0, c)) return;
    const nvr_lv x = c.x;
    const nvr_lam_first f = nvr_lam_prefetch(c, (const char *)src, x);
    nvr_lam_arrive(t, c);
    bool ok;
    if (nvr_lam_is_control()) {
        ok = nvr_lam_control(t, c, slot);
    } else {
        nvr_lam_send_all(t, c, (const char *)src, x, slot, false, f);
        ok = nvr_lam_reduce_recv(t, c, (const char *)src, (char *)dst, x, slot, (NVR_ACC)scale);
    }
    nvr_lam_finish(t, c, x, ok);
}

// src: n blocks of count elements; PE i's dst = the reduction of block i over every member.
extern "C" __global__ void __launch_bounds__(544, 1)
    nvr_lamport_reduce_scatter(const __grid_constant__ nvr_team t, const NVR_T *src, NVR_T *dst,
                               unsigned long long count, double scale, unsigned long long slot) {
    nvr_lam_ctx c;
    if (!nvr_lam_start(t, count * sizeof(NVR_T), slot, 0, c)) return;
    const nvr_lv x = c.x;
    const char *s = (const char *)src;
    const nvr_lam_first f =
        t.n >= 2 ? nvr_lam_prefetch(c, s + (nvr_u64)nvr_lam_first_peer(t) * x, x)
                 : nvr_lam_first{false, make_uint4(0, 0, 0, 0)};
    nvr_lam_arrive(t, c);
    bool ok;
    if (nvr_lam_is_control()) {
        ok = nvr_lam_control(t, c, slot);
    } else {
        nvr_lam_send_all(t, c, s, x, slot, true, f);
        ok = nvr_lam_reduce_recv(t, c, s + (nvr_u64)t.me * x, (char *)dst, x, slot,
                                 (NVR_ACC)scale);
    }
    nvr_lam_finish(t, c, x, ok);
}

// root's dst = the reduction of every member's src; other members' dst untouched.
extern "C" __global__ void __launch_bounds__(544, 1)
    nvr_lamport_reduce(const __grid_constant__ nvr_team t, int root, const NVR_T *src,
                       NVR_T *dst, unsigned long long count, double scale,
                       unsigned long long slot) {
    nvr_lam_ctx c;
    if (!nvr_lam_start(t, count * sizeof(NVR_T), slot, root, c)) return;
    const nvr_lv x = c.x;
    const nvr_lam_first none = {false, make_uint4(0, 0, 0, 0)};
    const nvr_lam_first f = t.me != root ? nvr_lam_prefetch(c, (const char *)src, x) : none;
    nvr_lam_arrive(t, c);
    bool ok = true;
    if (nvr_lam_is_control())
        ok = nvr_lam_control(t, c, slot);
    else if (t.me == root)
        ok = nvr_lam_reduce_recv(t, c, (const char *)src, (char *)dst, x, slot, (NVR_ACC)scale);
    else
        nvr_lam_send(t, c, root, (const char *)src, x, slot, f);
    // A non-root received nothing: the next run has nothing of this one to clear.
    nvr_lam_finish(t, c, t.me == root ? x : 0u, ok);
}
#else // !NVR_OP
// ---- data movement (type-free): COPIES -------------------------------------------------------
//
// broadcast, fcollect, alltoall, gather and scatter move bytes, which take every value: no
// rewrite keeps the sentinel out of them, as the reductions' does. So a copy's data words are
// 64-bit (a 16-byte vector stored as two, each of which lands whole, as each 32-bit word of a
// reduction's does), a word not yet written holds NVR_LAMC_EMPTY (two sentinel words: the fill),
// and every line of 32 vectors (512 bytes, one warp's stores) has a mask packet that says which
// of its words are NVR_LAMC_EMPTY in the data itself: four 32-bit words, word k holding in bit m
// (low word) and bit 8 + m (high word) those of vector 32 q + 8 k + m. A mask word is below
// 2^16, never the sentinel, so it is its own flag too. A receiver takes a data word once it is
// not NVR_LAMC_EMPTY, or once its mask word has come and says the data is that value: what the
// slot holds is then the data. Nothing waits for anything but data, as in the reductions; the
// masks cost 16 bytes a 512 on the link, and each poll a second load, issued beside the data's
// (one after the other made every poll of a wait two loads long: 2 x H200, 2026-11-28, with the
// prefetch below, the broadcast of 1 MiB 5.11 -> 4.71 us, fcollect and alltoall 0.2 faster).
// As in the reductions, a sender's first lines are loaded before the block barrier
// (nvr_lamc_load), so that their loads overlap the header's.
//
// LAYOUT of a copy's slot (x bytes a pair, V = ceil(x / 16) vectors): vectors [0, V), then the
// mask packet of line q at 16 (V + q), ceil(V / 32) of them: nvr_lamc_need(x) bytes, which the
// launch check bounds by the slot. A receiver's run records all of them as received (`got`), so
// the next run re-fills the masks with the sentinel too (ROTATION).
//
// SPLIT. The blocks take whole lines (vpb a multiple of 32, nvr_lam_start's `lines`) and the
// senders step by whole warps, so each line's vectors and mask are one warp's. Receivers need
// no such split (vector i and its mask are at fixed places whoever reads them).
//
// WHO. A copy is given by who sends to whom (`who`: NVR_LAMC_ALL, every PE to every other;
// NVR_LAMC_FROM_ROOT, the root to the others; NVR_LAMC_TO_ROOT, the others to the root), the
// bytes each sends PE k (src + k * x for alltoall and scatter, src for the rest) and where the
// bytes from PE j go (dst + j * x for fcollect, alltoall and gather, dst for the rest); a PE's
// own part is copied locally (every PE, or the root alone in a rooted copy), skipped where it is
// already in place (fcollect's and gather's own block is then src itself, which no receive
// writes; alltoall is never in place). A data thread sends its vectors to every receiver, then
// copies, then receives the same vectors.
//
// LAUNCH RULE as the reductions' with x = the bytes a pair, and vpb rounded up to 32 (the host
// rounds the block's data threads alike). LIMITS: nvr_lamc_need(x) <= slot, the rest as the
// reductions'. Measured on 2 x H200 (2026-11-28, graph, 100 calls): against LL, first faster
// from 192-384 KiB blocks (LL's half payload). Since the header became one word (HEADER), the
// rooted copies' floor fell by 0.2-0.5 us; fcollect's and alltoall's, where every PE both sends
// and receives, did not (2.7 us at 16 KiB against the all-reduce's 2.3) until NVR_LAMC_BATCH
// went from 4 to 1 (its spills). Since then faster from 16-128 KiB blocks, by copy;
// collective/algo/crossover.rs has the bands.

#define NVR_LAMC_EMPTY 0x8000000080000000ull
#define NVR_LAMC_ALL 0
#define NVR_LAMC_FROM_ROOT 1
#define NVR_LAMC_TO_ROOT 2
// Lines a warp sends, or vectors a thread receives, at once: their loads in flight together.
// 1, not more: a block of up to 544 threads gets at most 96 registers a thread, and with 4 the
// copies spilled 40-48 bytes to local memory (ptxas -v); fcollect and alltoall, whose threads
// both send and receive, paid most. On 2 x H200 (2026-11-28, graph, 100 calls, Lamport forced,
// one call), 4 -> 2 made fcollect and alltoall 0.28-0.37 us faster at every size from 16 KiB
// to 1 MiB (fcollect of 16 KiB 2.79 -> 2.44 us, of 512 KiB 3.75 -> 3.39), and 2 -> 1 (68-78
// registers) fcollect and alltoall another 0.04-0.2 (fcollect 2.35 and 3.31 us) and gather
// 0.1-0.15; broadcast and scatter moved 0.02-0.1 either way. The loops keep the batch a
// constant, so that another GPU or a later kernel can try more again.
#define NVR_LAMC_BATCH 1

__device__ __forceinline__ nvr_u64 nvr_lamc_lo(const uint4 &v) {
    return v.x | ((nvr_u64)v.y << 32);
}
__device__ __forceinline__ nvr_u64 nvr_lamc_hi(const uint4 &v) {
    return v.z | ((nvr_u64)v.w << 32);
}

// Byte offset of the mask packet of the line holding vector i, in a slot of V vectors.
__device__ __forceinline__ nvr_lv nvr_lamc_mask_at(nvr_lv V, nvr_lv i) {
    return 16 * (V + i / 32);
}

// The first line a warp sends: its loop below starts there.
__device__ __forceinline__ nvr_lv nvr_lamc_first_line(const nvr_lam_ctx &c) {
    return c.v0 + threadIdx.x - (threadIdx.x & 31u);
}

// Loads the thread's vectors of the NVR_LAMC_BATCH lines from `base` of src (c.x bytes) into v.
__device__ __forceinline__ void nvr_lamc_load(const nvr_lam_ctx &c, const char *src, nvr_lv base,
                                              uint4 (&v)[NVR_LAMC_BATCH]) {
    const nvr_lv D = nvr_lam_data_threads(), lane = threadIdx.x & 31u;
#pragma unroll
    for (int b = 0; b < NVR_LAMC_BATCH; ++b) {
        const nvr_lv i = base + b * D + lane;
        v[b] = i < c.v1 ? nvr_lam_ld<1>(src, i, c.x) : make_uint4(0, 0, 0, 0);
    }
}

// Sends vectors [v0, v1) of src (c.x bytes) into team PE k's buffer c.rot, slot of me, with
// each line's mask packet (SPLIT: whole warps, the loop warp-uniform for the ballots). v: the
// first lines' vectors when `loaded` (nvr_lamc_load, before the block barrier: their loads
// then overlap the header's, as the reductions' first vector does).
__device__ __forceinline__ void nvr_lamc_send(const nvr_team &t, const nvr_lam_ctx &c, int k,
                                              const char *src, nvr_u64 slot,
                                              uint4 (&v)[NVR_LAMC_BATCH], bool loaded) {
    char *to = nvr_peer(t, nvr_lam_slot(c.area, c.rot, t.me, k, t.n, slot), k);
    const nvr_lv lane = threadIdx.x & 31u, D = nvr_lam_data_threads(), V = (c.x + 15) / 16;
    for (nvr_lv base = nvr_lamc_first_line(c); base < c.v1; base += NVR_LAMC_BATCH * D) {
        if (!loaded) nvr_lamc_load(c, src, base, v);
        loaded = false;
#pragma unroll
        for (int b = 0; b < NVR_LAMC_BATCH; ++b) {
            const nvr_lv line = base + b * D; // a multiple of 32, the same on every lane
            if (line >= c.v1) break;
            const nvr_lv i = line + lane;
            const bool have = i < c.v1;
            const unsigned int lo = __ballot_sync(~0u, have && nvr_lamc_lo(v[b]) == NVR_LAMC_EMPTY);
            const unsigned int hi = __ballot_sync(~0u, have && nvr_lamc_hi(v[b]) == NVR_LAMC_EMPTY);
            if (have)
                asm volatile("st.volatile.global.v2.u64 [%0], {%1, %2};" ::"l"(to + 16 * i),
                             "l"(nvr_lamc_lo(v[b])), "l"(nvr_lamc_hi(v[b]))
                             : "memory");
            if (lane == 0) {
                uint4 m;
                m.x = (lo & 0xffu) | ((hi & 0xffu) << 8);
                m.y = ((lo >> 8) & 0xffu) | (((hi >> 8) & 0xffu) << 8);
                m.z = ((lo >> 16) & 0xffu) | (((hi >> 16) & 0xffu) << 8);
                m.w = (lo >> 24) | ((hi >> 24) << 8);
                nvr_lam_st16(to + nvr_lamc_mask_at(V, line), m);
            }
        }
    }
}

// One poll of vector i of a slot of V vectors at `from`: true (and the vector in v) once both
// its words have come (COPIES). The mask word is loaded beside the data, not after it: a
// wait's polls would otherwise take two loads' latency each.
__device__ __forceinline__ bool nvr_lamc_poll(const char *from, nvr_lv V, nvr_lv i, uint4 &v) {
    nvr_u64 lo, hi;
    unsigned int w;
    asm volatile("ld.volatile.global.v2.u64 {%0, %1}, [%2];"
                 : "=l"(lo), "=l"(hi)
                 : "l"(from + 16 * i)
                 : "memory");
    asm volatile("ld.volatile.global.u32 %0, [%1];"
                 : "=r"(w)
                 : "l"(from + nvr_lamc_mask_at(V, i) + 4 * ((i & 31u) >> 3))
                 : "memory");
    v = make_uint4((unsigned int)lo, (unsigned int)(lo >> 32), (unsigned int)hi,
                   (unsigned int)(hi >> 32));
    if (lo != NVR_LAMC_EMPTY && hi != NVR_LAMC_EMPTY) return true;
    if (w == NVR_LAM_SENTINEL) return false;
    const unsigned int m = i & 7u;
    return (lo != NVR_LAMC_EMPTY || ((w >> m) & 1u)) && (hi != NVR_LAMC_EMPTY || ((w >> (8 + m)) & 1u));
}

// Receives vectors [v0, v1) of team PE j's slot in buffer c.rot into dst (c.x bytes),
// NVR_LAMC_BATCH at once. After a failed wait the thread stores nothing more.
__device__ __forceinline__ bool nvr_lamc_recv(const nvr_team &t, const nvr_lam_ctx &c, int j,
                                              nvr_u64 slot, char *dst) {
    const char *from = nvr_lam_slot(c.area, c.rot, j, t.me, t.n, slot);
    const nvr_lv D = nvr_lam_data_threads(), V = (c.x + 15) / 16;
    for (nvr_lv i0 = c.v0 + threadIdx.x; i0 < c.v1; i0 += NVR_LAMC_BATCH * D) {
        uint4 v[NVR_LAMC_BATCH];
        bool got[NVR_LAMC_BATCH];
        bool all = true;
#pragma unroll
        for (int b = 0; b < NVR_LAMC_BATCH; ++b) {
            const nvr_lv i = i0 + b * D;
            got[b] = i >= c.v1 || nvr_lamc_poll(from, V, i, v[b]);
            all = all && got[b];
        }
        if (!all && !nvr_wait(
                        t,
                        [&] {
                            bool done = true;
#pragma unroll
                            for (int b = 0; b < NVR_LAMC_BATCH; ++b) {
                                if (!got[b]) got[b] = nvr_lamc_poll(from, V, i0 + b * D, v[b]);
                                done = done && got[b];
                            }
                            return done;
                        },
                        j, c.e, NVR_WAIT_LL))
            return false;
#pragma unroll
        for (int b = 0; b < NVR_LAMC_BATCH; ++b) {
            const nvr_lv i = i0 + b * D;
            if (i < c.v1) nvr_lam_st<1>(dst, i, c.x, v[b]);
        }
    }
    return true;
}

// Copies vectors [v0, v1) of src to dst (c.x bytes); nothing where they are one place.
__device__ __forceinline__ void nvr_lamc_copy(const nvr_lam_ctx &c, const char *src, char *dst) {
    if (src == dst) return;
    for (nvr_lv i = c.v0 + threadIdx.x; i < c.v1; i += nvr_lam_data_threads())
        nvr_lam_st<1>(dst, i, c.x, nvr_lam_ld<1>(src, i, c.x));
}

// Every copy (WHO): `who`, and whether PE k's bytes are src's block k (`src_blocks`) and PE j's
// go to dst's block j (`dst_blocks`); x bytes a pair.
__device__ __forceinline__ void nvr_lamc_run(const nvr_team &t, int root, int who,
                                             bool src_blocks, bool dst_blocks, const void *src,
                                             void *dst, unsigned long long bytes,
                                             unsigned long long slot) {
    nvr_lam_ctx c;
    if (!nvr_lam_start(t, bytes, slot, root, c, true)) return;
    const char *s = (const char *)src;
    char *d = (char *)dst;
    const nvr_u64 ss = src_blocks ? c.x : 0, ds = dst_blocks ? c.x : 0;
    const bool all = who == NVR_LAMC_ALL, am_root = t.me == root;
    const bool sends = all || (who == NVR_LAMC_FROM_ROOT) == am_root;
    const bool receives = all || (who == NVR_LAMC_TO_ROOT) == am_root;
    // The first PE this one sends to (the root, from a non-root of a gather; else the first
    // other), whose first lines are loaded before the block barrier.
    const int first = who == NVR_LAMC_TO_ROOT ? root : t.me == 0 ? 1 : 0;
    uint4 v[NVR_LAMC_BATCH];
    const bool pre = sends && t.n > 1 && !nvr_lam_is_control();
    if (pre) nvr_lamc_load(c, s + (nvr_u64)first * ss, nvr_lamc_first_line(c), v);
    nvr_lam_arrive(t, c);
    bool ok = true;
    if (nvr_lam_is_control()) {
        ok = nvr_lam_control(t, c, slot);
    } else {
        if (sends)
            for (int k = 0; k < t.n; ++k)
                if (k != t.me && (all || who == NVR_LAMC_FROM_ROOT || k == root))
                    nvr_lamc_send(t, c, k, s + (nvr_u64)k * ss, slot, v, pre && k == first);
        if (all || am_root) nvr_lamc_copy(c, s + (nvr_u64)t.me * ss, d + (nvr_u64)t.me * ds);
        if (receives)
            for (int j = 0; j < t.n && ok; ++j)
                if (j != t.me && (all || who == NVR_LAMC_TO_ROOT || j == root))
                    ok = nvr_lamc_recv(t, c, j, slot, d + (nvr_u64)j * ds);
    }
    // A PE that received nothing leaves nothing of this run to re-fill.
    nvr_lam_finish(t, c, receives && t.n > 1 ? (nvr_lv)nvr_lamc_need(c.x) : 0u, ok);
}

// every dst = root's src (bytes).
extern "C" __global__ void __launch_bounds__(544, 1)
    nvr_lamport_broadcast(const __grid_constant__ nvr_team t, int root, const void *src,
                          void *dst, unsigned long long bytes, unsigned long long slot) {
    nvr_lamc_run(t, root, NVR_LAMC_FROM_ROOT, false, false, src, dst, bytes, slot);
}

// dst = n blocks of `bytes`, block j = PE j's src.
extern "C" __global__ void __launch_bounds__(544, 1)
    nvr_lamport_fcollect(const __grid_constant__ nvr_team t, const void *src, void *dst,
                         unsigned long long bytes, unsigned long long slot) {
    nvr_lamc_run(t, 0, NVR_LAMC_ALL, false, true, src, dst, bytes, slot);
}

// block j of my src goes to block me of PE j's dst.
extern "C" __global__ void __launch_bounds__(544, 1)
    nvr_lamport_alltoall(const __grid_constant__ nvr_team t, const void *src, void *dst,
                         unsigned long long bytes, unsigned long long slot) {
    nvr_lamc_run(t, 0, NVR_LAMC_ALL, true, true, src, dst, bytes, slot);
}

// root's dst block j = PE j's src; other members' dst untouched.
extern "C" __global__ void __launch_bounds__(544, 1)
    nvr_lamport_gather(const __grid_constant__ nvr_team t, int root, const void *src, void *dst,
                       unsigned long long bytes, unsigned long long slot) {
    nvr_lamc_run(t, root, NVR_LAMC_TO_ROOT, false, true, src, dst, bytes, slot);
}

// PE j's dst = block j of root's src.
extern "C" __global__ void __launch_bounds__(544, 1)
    nvr_lamport_scatter(const __grid_constant__ nvr_team t, int root, const void *src, void *dst,
                        unsigned long long bytes, unsigned long long slot) {
    nvr_lamc_run(t, root, NVR_LAMC_FROM_ROOT, true, false, src, dst, bytes, slot);
}
#endif // NVR_OP
