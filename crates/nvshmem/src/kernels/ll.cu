// One-shot LL ("low latency") collectives for small messages over NVLink, and the team
// barrier. Compiled as `prefix + ops.cuh + common.cuh + ll.cu` (PROTOCOL.md):
//   - with a type/operator prefix (NVR_T ... NVR_OP): the reductions nvr_ll_all_reduce,
//     nvr_ll_reduce, nvr_ll_reduce_scatter;
//   - with no prefix: the data-movement kernels nvr_ll_broadcast (and, relayed through the
//     non-roots, nvr_ll_broadcast_relay), nvr_ll_fcollect, nvr_ll_alltoall, nvr_ll_gather,
//     nvr_ll_scatter (bytes, any length and alignment) and nvr_barrier.
//
// How they work: every PE pushes its payload to the PEs that need it as LL packets (8 bytes of
// payload + the epoch twice, one 16-byte store) into their channel's LL regions, and polls its
// own regions for what it needs; so a call is one NVLink crossing plus the launch, with no
// barrier before or after. Before a block ends, it has seen every peer's arrival of its run
// (nvr_quiesce_staged: PROTOCOL.md, "Quiescence"), usually long since there; so when the next run
// starts, every peer has finished reading the packets of the run before this one, and a sender
// writes into peer k's region at once, checking that arrival after its stores
// (nvr_ll_peer_was_ready; PROTOCOL.md, "LL packets").
//
// Work split (the same on every PE, so sender and reader agree on slots): `x` is the payload
// per (sender, receiver) pair (all_reduce, reduce, broadcast: the whole buffer; the others: one
// block). It is cut into packets of 8 bytes, packet i holding bytes [8i, 8i + 8) of the buffer
// (the last one may be shorter). Block b of a grid of g takes packets [b * ppb, (b + 1) * ppb),
// ppb = ceil(ceil(x / 8) / g), and packet i travels in slot i - b * ppb of region (e & 1, sender,
// b). Inside a block, a PE that talks to several peers gives each packet a group of G lanes
// (G = the team size rounded up to 1, 2, 4 or 8), lane k of the group handling team PE k, so
// the packets to and from all peers move in parallel and a reduction combines the group's lanes
// with warp shuffles in team order; a PE that talks to one peer only (non-roots of rooted
// collectives) gives each thread its own packets. nvr_ll_fcollect_peers and
// nvr_ll_alltoall_peers give lanes to the peers only (G = n - 1 rounded up, nvr_ll_peer_lanes),
// lane 0 making this PE's own copy as it sends.
//
// LAUNCH RULE (the host computes it, `collective/algo/nvlink.rs` `ll_shape`; grid must be equal
// on every member, the block size is free but this is the one intended):
//   x    = per-pair payload bytes: all_reduce/reduce: count * sizeof(T); broadcast: bytes;
//          reduce_scatter: count * sizeof(T) (one block); fcollect/alltoall/gather/scatter:
//          bytes (one block)
//   gmax = min(nvr_ll_blocks(n), max_blocks)  (64 for 2 PEs, 21 for 3 ... 8 for 8; Residency)
//   grid = min(gmax, max(1, ceil(x / bpb)))   (bpb = 1 KiB a block on 1-2 PEs, 2 KiB on more)
//   ppb  = ceil(ceil(x / 8) / grid)                      (packets per block)
//   G    = 1, 2, 4, 8 for n = 1, 2, 3-4, 5-8 (the _peers kernels: for n - 1 = 0-1, 2, 3-4, 5-7)
//   block = min(512, roundup32(ppb * G) + 32)           (one extra warp for the flag stores)
//   barrier: grid 1, block 64.
// LIMITS: ll_bytes a multiple of 16 and at least 8192; grid <= nvr_ll_blocks(n); ppb * 16 <=
// ll_bytes (one region a block), that is x <= grid * ll_bytes / 2 (the host takes nothing
// larger to LL: gmax * ll_bytes / 2, 1 MiB a pair for 2 PEs with the default 32 KiB regions,
// 256 KiB on 4). A launch that breaks the limits records
// status NVR_FAIL_LIMITS and returns (its peers then wait until abort/timeout).

typedef unsigned char nvr_byte;

// ---- byte packing ---------------------------------------------------------------------------

// The nb (1..8) bytes at p as a little-endian payload: one load for a whole aligned packet and
// for the 4 aligned bytes of a block of one f32 a PE (the smallest fcollect, alltoall,
// reduce-scatter, gather and scatter), else byte loads, unrolled so that all are in flight
// before any is used. A rolled byte loop waited for each load in turn, and those calls took
// 0.2-0.6 us longer than their 8-byte siblings (docs/performance.md, "Short packets"). Kept
// this small on purpose: every inlined copy adds to each LL kernel (scripts/check-sass.sh). The
// rare shapes out of line cost a device call, 0.2-0.3 us, each time they ran; loads in words of
// the element's size (no byte path in an f32 reduction) made the smallest f32 reduce-scatter
// and bf16 all-reduce 0.2-0.3 us slower, not faster. So a buffer that is not 8-aligned takes
// the byte loads for every packet.
__device__ __forceinline__ nvr_u64 nvr_ld8(const nvr_byte *p, unsigned int nb) {
    const nvr_u64 a = (nvr_u64)p;
    if (nb == 8 && (a & 7) == 0) return *(const nvr_u64 *)p;
    if (nb == 4 && (a & 3) == 0) return *(const unsigned int *)p;
    nvr_u64 b[8];
#pragma unroll
    for (unsigned int k = 0; k < 8; ++k) b[k] = k < nb ? (nvr_u64)p[k] : 0;
    nvr_u64 v = 0;
#pragma unroll
    for (unsigned int k = 0; k < 8; ++k) v |= b[k] << (8 * k);
    return v;
}

// Stores the first nb (1..8) bytes of payload v at p, in nvr_ld8's shapes (stores need not
// wait for one another, so the bytes stay a loop).
__device__ __forceinline__ void nvr_st8(nvr_byte *p, nvr_u64 v, unsigned int nb) {
    const nvr_u64 a = (nvr_u64)p;
    if (nb == 8 && (a & 7) == 0) {
        *(nvr_u64 *)p = v;
        return;
    }
    if (nb == 4 && (a & 3) == 0) {
        *(unsigned int *)p = (unsigned int)v;
        return;
    }
    for (unsigned int k = 0; k < nb; ++k) p[k] = (nvr_byte)(v >> (8 * k));
}

// ---- the work split -------------------------------------------------------------------------

// Payload bytes and packet indices of one call, in 32 bits: nvr_ll_check bounds the payload by
// 32 regions of half their bytes (at most 32 MiB of payload each), so x <= 2^30 and 8 * (any
// packet index) fits. 64-bit index arithmetic took two instructions for one and a 64-bit
// division, and the small calls are bound by the length of that chain (docs/performance.md,
// "The small kernels' path").
typedef unsigned int nvr_pk;
#define NVR_LL_MAX_REGION (1u << 26) // most region bytes a launch may have (ll_bytes: the
                                     // default 32 KiB)

struct nvr_ll_ctx {
    unsigned int e; // this block's epoch of this run
    int b;          // block index
    nvr_pk x;       // payload bytes per (sender, receiver) pair
    nvr_pk p0, p1;  // this block's packets [p0, p1)
};

__device__ __forceinline__ nvr_pk nvr_ll_ppb(nvr_pk x) {
    const nvr_pk packets = (x + 7) / 8;
    return gridDim.x == 1 ? packets : (packets + gridDim.x - 1) / gridDim.x;
}

// Bytes of packet i of a payload of x bytes.
__device__ __forceinline__ unsigned int nvr_ll_nb(nvr_pk x, nvr_pk i) {
    const nvr_pk r = x - 8 * i;
    return r < 8 ? r : 8u;
}

// Lanes per packet for a PE that talks to every team member: n rounded up to 1, 2, 4 or 8,
// as its log2 (threads are split into groups by shifts, not divisions).
__device__ __forceinline__ int nvr_ll_group_log2(int n) {
    return n <= 1 ? 0 : n <= 2 ? 1 : n <= 4 ? 2 : 3;
}

// Whether an LL launch keeps its limits (see LIMITS above), from the launch's arguments alone.
// Every thread computes the same answer, so a refused block returns as a whole.
__device__ __forceinline__ bool nvr_ll_check(const nvr_team &t, nvr_u64 x, int root) {
    return t.n >= 1 && t.n <= NVR_MAX_TEAM && t.me >= 0 && t.me < t.n && root >= 0 &&
           root < t.n && gridDim.x <= (unsigned int)nvr_ll_blocks(t.n) &&
           (blockDim.x & 31u) == 0 && (t.ll_bytes & 15u) == 0 && t.ll_bytes <= NVR_LL_MAX_REGION &&
           x <= (nvr_u64)gridDim.x * (t.ll_bytes / 2); // ppb * 16 <= region bytes
}

// Start of an LL block: its epoch and packets.
// (x has passed nvr_ll_check, so it fits nvr_pk; of one that has not, the packets are unused.)
__device__ __forceinline__ nvr_ll_ctx nvr_ll_begin(nvr_u64 x, unsigned int e) {
    nvr_ll_ctx c;
    c.e = e;
    c.b = (int)blockIdx.x;
    c.x = (nvr_pk)x;
    const nvr_pk packets = (c.x + 7) / 8, ppb = nvr_ll_ppb(c.x);
    c.p0 = min((nvr_pk)c.b * ppb, packets);
    c.p1 = min(c.p0 + ppb, packets);
    return c;
}

// What every LL kernel does first. From the launch's arguments alone, before
// griddepcontrol.wait (nvr_launch_begin), so while the kernel before it may still run: the
// launch check and the block's packets (into c). Then the wait, and: a refused launch recorded
// (false: the block returns whole), the block's epoch read, and the arrival at every peer.
// Checked after the wait, the launch's check and packet split (a division) cost every small
// call 0.16-0.21 us (2 x H200, tools/probes/llpath.cu, `bis-early`).
// `fits`: the kernel's own further limits, from launch arguments alike.
__device__ __forceinline__ bool nvr_ll_start(const nvr_team &t, nvr_u64 x, int root,
                                             nvr_ll_ctx &c, bool fits = true) {
    const bool ok = fits && nvr_ll_check(t, x, root);
    c = nvr_ll_begin(x, 0u);
    if (!nvr_launch_checked(t, ok)) return false;
    c.e = nvr_begin(t);
    nvr_arrive(t, c.e);
    return true;
}

// ---- moving packets -------------------------------------------------------------------------

// Packets a thread keeps in flight, in the rooted copies. A thread's packets are otherwise one
// dependent round trip each (a sender's load, then the store that needs it; a receiver's poll,
// then its next poll), so LL time grew with the packets a thread carries. Where a block's
// packets are whole and the buffer 8-aligned (every packet one 8-byte word), a batched step
// issues the loads or polls of B packets before it uses any; other buffers go one packet at a
// time, and so does a batch with a packet not yet arrived (waited for one by one, the next
// batch batched again). The batched body is plain loads and stores, without a wait of its own:
// unrolled copies of the waits made the kernels five times larger and every call slower.
// Measured on 2 PEs, H200 (2026-11-27, docs/performance.md "LL packets in flight"): batches
// of 4 took gather 1 MiB from 7.4 to 5.2 us, scatter from 6.5 to 5.3, broadcast 512 KiB from
// 5.7 to 5.2; batched alike, fcollect and alltoall (every thread both sends and receives) were
// up to 0.8 us slower at 1 MiB. So broadcast, gather and scatter batch (NVR_LL_BATCH); fcollect
// and alltoall batch their receives in their peer-lane kernels (nvr_ll_peer_lanes: 0.03-0.12
// us faster than one at a time from 4 KiB on 2 PEs, 2026-11-27); the reductions do not (B = 1
// compiles to the one-at-a-time loop alone).
#ifndef NVR_LL_BATCH
#define NVR_LL_BATCH 4
#endif

// Whether this block's packets of a buffer at p are whole 8-byte words (the batched path).
__device__ __forceinline__ bool nvr_ll_words(const nvr_ll_ctx &c, const void *p) {
    return ((nvr_u64)p & 7u) == 0 && 8 * c.p1 <= c.x;
}

// Loads words i, i + step, ... (B of them, those below c.p1) of w, all issued before any is used.
template <int B>
__device__ __forceinline__ void nvr_ll_load_words(const nvr_ll_ctx &c, const nvr_u64 *w,
                                                  nvr_pk i, nvr_pk step, nvr_u64 *v) {
#pragma unroll
    for (int m = 0; m < B; ++m) {
        const nvr_pk im = i + (nvr_pk)m * step;
        v[m] = im < c.p1 ? w[im] : 0;
    }
}

// Whether team PE k had started the run before c.e on this block (`seen`: its arrival word,
// loaded before the first packet was stored), as the protocol guarantees: the end of that run
// here waited for it (nvr_quiesce_staged; PROTOCOL.md, "LL packets"). Checked after the stores, not
// waited for before them: a wait cost every small call the flag's load latency. Records
// NVR_FAIL_ORDER (the call fails; its packets may have overwritten unread ones) when not.
__device__ __forceinline__ bool nvr_ll_peer_was_ready(const nvr_team &t, const nvr_ll_ctx &c,
                                                      int k, unsigned int seen) {
    if (nvr_reached(seen, nvr_prev_epoch(c.e))) return true;
    nvr_fail_at(t.status, NVR_FAIL_ORDER, k, c.e, NVR_WAIT_ARRIVE, t.chan);
    return false;
}

// Sends this thread's packets of `src` (x bytes) to team PE k: packets p0 + q, p0 + q + step,
// ... without waiting for k: k is done reading this parity's region (its run two before e),
// which nvr_ll_peer_was_ready checks once the stores have left. Does nothing for k == me or k
// outside the team.
// With `cd` it also copies the same packets locally into cd: from `cs`, or (cs null) the
// packet sent, so that a thread's local copy rides on its sends' loads and stores (fcollect,
// alltoall) instead of being a lane's chain of its own; one packet at a time then.
template <int B>
__device__ __forceinline__ bool nvr_ll_send(const nvr_team &t, const nvr_ll_ctx &c, int k,
                                            nvr_pk q, nvr_pk step, const nvr_byte *src,
                                            const nvr_byte *cs = nullptr,
                                            nvr_byte *cd = nullptr) {
    if (k < 0 || k >= t.n || k == t.me) return true;
    nvr_pk i = c.p0 + q;
    if (i >= c.p1) return true;
    const unsigned int *flag = nvr_arrive_word(t, c.b, k);
    char *r = nvr_peer(t, nvr_ll_region(t, c.e, t.me, c.b), k);
    if (B > 1 && cd == nullptr && nvr_ll_words(c, src)) {
        const nvr_u64 *w = (const nvr_u64 *)src;
        nvr_u64 v[B];
        nvr_ll_load_words<B>(c, w, i, step, v);
        const unsigned int seen = nvr_ld_relaxed(flag);
        for (;;) {
#pragma unroll
            for (int m = 0; m < B; ++m) {
                const nvr_pk im = i + (nvr_pk)m * step;
                if (im < c.p1) nvr_ll_store(r + NVR_LL_PACKET * (im - c.p0), v[m], c.e);
            }
            i += (nvr_pk)B * step;
            if (i >= c.p1) return nvr_ll_peer_was_ready(t, c, k, seen);
            nvr_ll_load_words<B>(c, w, i, step, v);
        }
    }
    nvr_u64 v = nvr_ld8(src + 8 * i, nvr_ll_nb(c.x, i));
    nvr_u64 u = cd != nullptr && cs != nullptr ? nvr_ld8(cs + 8 * i, nvr_ll_nb(c.x, i)) : v;
    const unsigned int seen = nvr_ld_relaxed(flag);
    for (;;) {
        nvr_ll_store(r + NVR_LL_PACKET * (i - c.p0), v, c.e);
        if (cd != nullptr) nvr_st8(cd + 8 * i, u, nvr_ll_nb(c.x, i));
        i += step;
        if (i >= c.p1) break;
        v = nvr_ld8(src + 8 * i, nvr_ll_nb(c.x, i));
        u = cd != nullptr && cs != nullptr ? nvr_ld8(cs + 8 * i, nvr_ll_nb(c.x, i)) : v;
    }
    return nvr_ll_peer_was_ready(t, c, k, seen);
}

// Polls packets i, i + step, ... (B of them, those below c.p1) of region r once, all issued
// before any is used: whether every one was there (payloads in v; 0 past c.p1).
template <int B>
__device__ __forceinline__ bool nvr_ll_poll_batch(const nvr_ll_ctx &c, const char *r, nvr_pk i,
                                                  nvr_pk step, nvr_u64 *v) {
    bool all = true;
#pragma unroll
    for (int m = 0; m < B; ++m) {
        const nvr_pk im = i + (nvr_pk)m * step;
        v[m] = 0;
        all &= im >= c.p1 || nvr_ll_poll(r + NVR_LL_PACKET * (im - c.p0), c.e, v[m]);
    }
    return all;
}

// Receives this thread's packets from team PE k into dst (x bytes). Does nothing for k == me
// or k outside the team.
template <int B>
__device__ __forceinline__ bool nvr_ll_recv(const nvr_team &t, const nvr_ll_ctx &c, int k,
                                            nvr_pk q, nvr_pk step, nvr_byte *dst) {
    if (k < 0 || k >= t.n || k == t.me) return true;
    const char *r = nvr_ll_region(t, c.e, k, c.b);
    nvr_pk i = c.p0 + q;
    if (B > 1 && nvr_ll_words(c, dst)) {
        nvr_u64 *w = (nvr_u64 *)dst;
        for (; i < c.p1; i += (nvr_pk)B * step) {
            nvr_u64 v[B];
            if (nvr_ll_poll_batch<B>(c, r, i, step, v)) {
#pragma unroll
                for (int m = 0; m < B; ++m) {
                    const nvr_pk im = i + (nvr_pk)m * step;
                    if (im < c.p1) w[im] = v[m];
                }
                continue;
            }
            // Not all there yet: this batch one packet at a time (polled again).
#pragma unroll 1
            for (int m = 0; m < B; ++m) {
                const nvr_pk im = i + (nvr_pk)m * step;
                if (im >= c.p1) break;
                nvr_u64 u;
                if (!nvr_ll_wait(t, r + NVR_LL_PACKET * (im - c.p0), c.e, k, u)) return false;
                w[im] = u;
            }
        }
        return true;
    }
    for (; i < c.p1; i += step) {
        nvr_u64 v;
        if (!nvr_ll_wait(t, r + NVR_LL_PACKET * (i - c.p0), c.e, k, v)) return false;
        nvr_st8(dst + 8 * i, v, nvr_ll_nb(c.x, i));
    }
    return true;
}

// Forwards this thread's packets of what team PE `from` sends this PE (c's packets, in this
// PE's region of `from`) to team PE k, each as it arrives, into k's region of this PE
// (nvr_ll_broadcast_relay). B packets polled at once where all are there, as nvr_ll_recv; a
// packet keeps its payload and epoch. Does nothing for k == me or k outside the team.
template <int B>
__device__ __forceinline__ bool nvr_ll_relay(const nvr_team &t, const nvr_ll_ctx &c, int from,
                                             int k, nvr_pk q, nvr_pk step) {
    if (k < 0 || k >= t.n || k == t.me) return true;
    nvr_pk i = c.p0 + q;
    if (i >= c.p1) return true;
    const char *in = nvr_ll_region(t, c.e, from, c.b);
    char *out = nvr_peer(t, nvr_ll_region(t, c.e, t.me, c.b), k);
    const unsigned int seen = nvr_ld_relaxed(nvr_arrive_word(t, c.b, k));
    for (; i < c.p1; i += (nvr_pk)B * step) {
        nvr_u64 v[B];
        const bool all = nvr_ll_poll_batch<B>(c, in, i, step, v);
#pragma unroll 1
        for (int m = 0; m < B; ++m) {
            const nvr_pk im = i + (nvr_pk)m * step;
            if (im >= c.p1) break;
            if (!all && !nvr_ll_wait(t, in + NVR_LL_PACKET * (im - c.p0), c.e, from, v[m]))
                return false;
            nvr_ll_store(out + NVR_LL_PACKET * (im - c.p0), v[m], c.e);
        }
    }
    return nvr_ll_peer_was_ready(t, c, k, seen);
}

// Copies this thread's packets of src to dst locally (nothing when they are the same buffer).
template <int B>
__device__ __forceinline__ void nvr_ll_copy(const nvr_ll_ctx &c, nvr_pk q, nvr_pk step,
                                            const nvr_byte *src, nvr_byte *dst) {
    if (src == dst) return;
    nvr_pk i = c.p0 + q;
    if (B > 1 && nvr_ll_words(c, src) && nvr_ll_words(c, dst)) {
        nvr_u64 *d = (nvr_u64 *)dst;
        for (; i < c.p1; i += (nvr_pk)B * step) {
            nvr_u64 v[B];
            nvr_ll_load_words<B>(c, (const nvr_u64 *)src, i, step, v);
#pragma unroll
            for (int m = 0; m < B; ++m) {
                const nvr_pk im = i + (nvr_pk)m * step;
                if (im < c.p1) d[im] = v[m];
            }
        }
        return;
    }
    for (; i < c.p1; i += step) {
        const unsigned int nb = nvr_ll_nb(c.x, i);
        nvr_st8(dst + 8 * i, nvr_ld8(src + 8 * i, nb), nb);
    }
}

// A thread's place in G-lane groups: lane k (the team PE it handles), group q, groups per block.
struct nvr_lanes {
    int G, k;
    nvr_pk q, groups;
};

// Lanes of G = 1 << lg a group.
__device__ __forceinline__ nvr_lanes nvr_ll_lanes_of(int lg) {
    nvr_lanes l;
    l.G = 1 << lg;
    l.k = (int)(threadIdx.x & (unsigned int)(l.G - 1));
    l.q = threadIdx.x >> lg;
    l.groups = blockDim.x >> lg;
    return l;
}

__device__ __forceinline__ nvr_lanes nvr_ll_lanes(int n) {
    return nvr_ll_lanes_of(nvr_ll_group_log2(n));
}

// The lanes of nvr_ll_fcollect_peers and nvr_ll_alltoall_peers: only the peers get one, G =
// n - 1 rounded up to 1, 2, 4 or 8, lane j handling team PE (me + 1 + j) % n (none, k = -1,
// past n - 2), lane 0 also making this PE's own copy from its sends' loads. Where n - 1 rounds
// up to fewer lanes than n (2, 3, 5 PEs) every thread then sends and receives its own packets
// instead of half the threads doing that for twice the packets while the others copy (2 PEs:
// fcollect 1 MiB 9.00 -> 6.67 us, 64 KiB 3.51 -> 3.15; 3 PEs, 4 KiB 4.52 -> 3.61; 2 x and
// 3 x H200, 2026-11-27, docs/perf/peerlanes-2026-11-27). They are kernels of their own, so
// that the plain ones carry none of this code: with both layouts in one kernel, 4 PEs (plain
// layout) were 0.3-0.6 us slower up to 256 KiB and 2 PEs' small calls up to 0.3 (the size of
// a kernel costs every call, NVR_LL_BATCH).
__device__ __forceinline__ nvr_lanes nvr_ll_peer_lanes(const nvr_team &t) {
    nvr_lanes l = nvr_ll_lanes_of(nvr_ll_group_log2(t.n - 1));
    const int j = l.k, k = t.me + 1 + j;
    l.k = j < t.n - 1 ? (k < t.n ? k : k - t.n) : -1;
    return l;
}

// Lanes by whole warps, for kernels whose lanes of different peers wait in different loops
// (nvr_ll_broadcast_relay): segment k of blockDim.x / 32 / G warps handles team PE k (threads
// past G whole segments get k = G: none). Lanes of one warp that spin in different loops take
// turns (the warp runs one path at a time): a relayed broadcast with its roles split by lane,
// as nvr_ll_lanes does, took 2 us longer than the one-shot from 32 KiB on 4 x H200, where a
// second crossing costs about 1. Needs blockDim.x >= 32 * G (nvr_ll_warp_lanes_fit).
__device__ __forceinline__ nvr_lanes nvr_ll_warp_lanes(int G) {
    nvr_lanes l;
    l.G = G;
    const unsigned int seg = (blockDim.x >> 5) / (unsigned int)G * 32u;
    l.k = (int)(threadIdx.x / seg);
    l.q = threadIdx.x - (unsigned int)l.k * seg;
    l.groups = seg;
    return l;
}

__device__ __forceinline__ bool nvr_ll_warp_lanes_fit(int G) {
    return (blockDim.x >> 5) >= (unsigned int)G;
}

// Lane 0 of a group in the peer layout.
__device__ __forceinline__ bool nvr_ll_first_lane(const nvr_lanes &l) {
    return (threadIdx.x & (unsigned int)(l.G - 1)) == 0;
}

#ifdef NVR_OP
// ---- reductions -----------------------------------------------------------------------------

#define NVR_EPP (8 / (int)sizeof(NVR_T)) // elements per packet

template <int S> struct nvr_bits_of;
template <> struct nvr_bits_of<1> { typedef unsigned char type; };
template <> struct nvr_bits_of<2> { typedef unsigned short type; };
template <> struct nvr_bits_of<4> { typedef unsigned int type; };
template <> struct nvr_bits_of<8> { typedef unsigned long long type; };
typedef nvr_bits_of<sizeof(NVR_T)>::type nvr_bits;

// Element m of a payload.
__device__ __forceinline__ NVR_T nvr_elem(nvr_u64 v, int m) {
    const nvr_bits bits = (nvr_bits)(v >> (8 * sizeof(NVR_T) * m));
    NVR_T x;
    memcpy(&x, &bits, sizeof(NVR_T));
    return x;
}

// The payload's bits of element m.
__device__ __forceinline__ nvr_u64 nvr_elem_bits(NVR_T x, int m) {
    nvr_bits bits;
    memcpy(&bits, &x, sizeof(NVR_T));
    return (nvr_u64)bits << (8 * sizeof(NVR_T) * m);
}

// Combines the payloads of lanes 0..n-1 of this thread's group (lane j holding team PE j's) in
// team order, element by element, in NVR_ACC; every lane of the warp must call it (it
// shuffles), and every lane of a group gets the same result.
__device__ __forceinline__ nvr_u64 nvr_group_reduce(nvr_u64 v, int G, int n, NVR_ACC s) {
    const int base = (int)(threadIdx.x & 31u) & ~(G - 1);
    NVR_ACC acc[NVR_EPP];
    for (int j = 0; j < n; ++j) {
        const nvr_u64 w = __shfl_sync(0xffffffffu, v, base + j);
#pragma unroll
        for (int m = 0; m < NVR_EPP; ++m) {
            const NVR_ACC a = nvr_pre(NVR_LOAD(nvr_elem(w, m)), s);
            acc[m] = j == 0 ? a : nvr_combine(acc[m], a);
        }
    }
    nvr_u64 out = 0;
#pragma unroll
    for (int m = 0; m < NVR_EPP; ++m) {
        const NVR_T y = NVR_STORE(nvr_post(acc[m], n));
        out |= nvr_elem_bits(y, m);
    }
    return out;
}

// The receiving half of a reduction: for each of this block's packets, lane k of its group
// takes team PE k's payload (its own from `own` when k == me, else from the LL region) and the
// group's lane 0 stores the combination into dst. Rounds are warp-uniform (shuffles); after a
// failed wait a lane skips its remaining waits, and a warp with a failed lane stores nothing.
__device__ __forceinline__ bool nvr_ll_reduce_recv(const nvr_team &t, const nvr_ll_ctx &c,
                                                   const nvr_lanes &l, const nvr_byte *own,
                                                   nvr_byte *dst, NVR_ACC s, bool ok) {
    const char *r = nvr_ll_region(t, c.e, l.k, c.b);
    for (nvr_pk base = c.p0; base < c.p1; base += l.groups) {
        const nvr_pk i = base + l.q;
        const bool live = i < c.p1;
        const unsigned int nb = live ? nvr_ll_nb(c.x, i) : 0u;
        nvr_u64 v = 0;
        if (live && l.k < t.n) {
            if (l.k == t.me) {
                v = nvr_ld8(own + 8 * i, nb);
            } else if (ok) {
                ok = nvr_ll_wait(t, r + NVR_LL_PACKET * (i - c.p0), c.e, l.k, v);
            }
        }
        const nvr_u64 out = nvr_group_reduce(v, l.G, t.n, s);
        if (__all_sync(0xffffffffu, ok) && live && l.k == 0) nvr_st8(dst + 8 * i, out, nb);
    }
    return ok;
}

// every dst = the reduction of every member's src (count elements).
extern "C" __global__ void __launch_bounds__(512, 1)
    nvr_ll_all_reduce(const __grid_constant__ nvr_team t, const NVR_T *src, NVR_T *dst,
                      unsigned long long count, double scale) {
    nvr_ll_ctx c;
    if (!nvr_ll_start(t, count * sizeof(NVR_T), 0, c)) return;
    const nvr_lanes l = nvr_ll_lanes(t.n);
    const nvr_byte *s = (const nvr_byte *)src;
    bool ok = nvr_ll_send<1>(t, c, l.k, l.q, l.groups, s);
    ok = nvr_ll_reduce_recv(t, c, l, s, (nvr_byte *)dst, (NVR_ACC)scale, ok);
    nvr_end(t, c.e, nvr_quiesce_staged(t, c.e, nvr_all_peers(t), ok));
}

// root's dst = the reduction of every member's src; other members' dst untouched.
extern "C" __global__ void __launch_bounds__(512, 1)
    nvr_ll_reduce(const __grid_constant__ nvr_team t, int root, const NVR_T *src, NVR_T *dst,
                  unsigned long long count, double scale) {
    nvr_ll_ctx c;
    if (!nvr_ll_start(t, count * sizeof(NVR_T), root, c)) return;
    const nvr_byte *s = (const nvr_byte *)src;
    bool ok;
    if (t.me == root) {
        const nvr_lanes l = nvr_ll_lanes(t.n);
        ok = nvr_ll_reduce_recv(t, c, l, s, (nvr_byte *)dst, (NVR_ACC)scale, true);
    } else {
        ok = nvr_ll_send<1>(t, c, root, threadIdx.x, blockDim.x, s);
    }
    nvr_end(t, c.e, nvr_quiesce_staged(t, c.e, nvr_all_peers(t), ok));
}

// src: n blocks of count elements; PE i's dst = the reduction of block i over every member.
extern "C" __global__ void __launch_bounds__(512, 1)
    nvr_ll_reduce_scatter(const __grid_constant__ nvr_team t, const NVR_T *src, NVR_T *dst,
                          unsigned long long count, double scale) {
    nvr_ll_ctx c;
    if (!nvr_ll_start(t, count * sizeof(NVR_T), 0, c)) return;
    const nvr_lanes l = nvr_ll_lanes(t.n);
    const nvr_byte *s = (const nvr_byte *)src;
    bool ok = nvr_ll_send<1>(t, c, l.k, l.q, l.groups, s + (nvr_u64)l.k * c.x);
    ok = nvr_ll_reduce_recv(t, c, l, s + (nvr_u64)t.me * c.x, (nvr_byte *)dst, (NVR_ACC)scale, ok);
    nvr_end(t, c.e, nvr_quiesce_staged(t, c.e, nvr_all_peers(t), ok));
}

#else // !NVR_OP
// ---- data movement and the barrier (type-free) ----------------------------------------------

// every dst = root's src (bytes).
extern "C" __global__ void __launch_bounds__(512, 1)
    nvr_ll_broadcast(const __grid_constant__ nvr_team t, int root, const void *src, void *dst,
                     unsigned long long bytes) {
    nvr_ll_ctx c;
    if (!nvr_ll_start(t, bytes, root, c)) return;
    const nvr_byte *s = (const nvr_byte *)src;
    nvr_byte *d = (nvr_byte *)dst;
    bool ok;
    if (t.me == root) {
        const nvr_lanes l = nvr_ll_lanes(t.n);
        ok = nvr_ll_send<NVR_LL_BATCH>(t, c, l.k, l.q, l.groups, s);
        if (l.k == t.me) nvr_ll_copy<NVR_LL_BATCH>(c, l.q, l.groups, s, d);
    } else {
        ok = nvr_ll_recv<NVR_LL_BATCH>(t, c, root, threadIdx.x, blockDim.x, d);
    }
    nvr_end(t, c.e, nvr_quiesce_staged(t, c.e, nvr_all_peers(t), ok));
}

// ---- the relayed broadcast (teams of 3 or more) --------------------------------------------

// Bytes of each of a relayed broadcast's chunks (the last may be shorter, or empty): the buffer
// cut into one chunk a non-root, rounded up to whole packets so that every chunk but the last
// is whole packets and starts as aligned as the buffer does up to 8 bytes. One chunk, the
// whole buffer, on 1 and 2 PEs. The host computes the same (nvlink.rs, `ll_relay_chunk`).
__device__ __forceinline__ nvr_u64 nvr_ll_relay_chunk(nvr_u64 bytes, int n) {
    if (n <= 2) return bytes;
    const nvr_u64 c = (bytes + (nvr_u64)(n - 2)) / (nvr_u64)(n - 1);
    return (c + 7) & ~7ull;
}

// The chunk of a relayed broadcast that team PE k (a non-root) is first sent: the non-roots in
// team order, the root skipped.
__device__ __forceinline__ int nvr_ll_relay_of(int k, int root) { return k < root ? k : k - 1; }

// The packets of chunk m (bytes [m * c.x, m * c.x + x_m) of a buffer of `bytes`), in c's
// block: x_m is c.x but for the last chunk, and the block's packets are c's clipped to the
// chunk, so that a packet keeps its slot (i - c.p0) in every chunk.
__device__ __forceinline__ nvr_ll_ctx nvr_ll_chunk(const nvr_ll_ctx &c, nvr_u64 bytes, int m) {
    nvr_ll_ctx d = c;
    const nvr_u64 at = (nvr_u64)m * c.x;
    d.x = at >= bytes ? 0u : (nvr_pk)min((nvr_u64)c.x, bytes - at);
    d.p1 = min(c.p1, (d.x + 7) / 8);
    d.p0 = min(c.p0, d.p1);
    return d;
}

// every dst = root's src (bytes), through the non-roots: the root sends chunk m
// (nvr_ll_relay_chunk) to the m-th non-root alone, which forwards it to every other non-root as
// its packets arrive (nvr_ll_relay) and receives theirs. nvr_ll_broadcast sends the whole
// buffer to every non-root, so the root's link carries n - 1 copies of it; here one, and each
// other link about 2 (n - 2) / (n - 1) of it, for a second crossing. The launch rule's x is a
// chunk (the host takes it on teams of 3 or more past a size: nvlink.rs, `ll_relay`). Lanes by
// whole warps (nvr_ll_warp_lanes): segment k handles team PE k; on a non-root, segment `root`
// receives this PE's chunk, and every other peer's segment forwards it to that peer, then
// receives that peer's chunk. LAUNCH RULE as LL's with x = the chunk, but block = n * min(
// roundup32(ppb), rounddown32(512 / n)) (nvlink.rs, `ll_relay_shape`; at least 32 * n).
extern "C" __global__ void __launch_bounds__(512, 1)
    nvr_ll_broadcast_relay(const __grid_constant__ nvr_team t, int root, const void *src,
                           void *dst, unsigned long long bytes) {
    const int G = t.n; // a segment each, unrounded (G = 3 on 3 PEs: none idle)
    nvr_ll_ctx c;
    if (!nvr_ll_start(t, nvr_ll_relay_chunk(bytes, t.n), root, c, nvr_ll_warp_lanes_fit(G)))
        return;
    const nvr_byte *s = (const nvr_byte *)src;
    nvr_byte *d = (nvr_byte *)dst;
    const nvr_lanes l = nvr_ll_warp_lanes(G);
    const int chunks = t.n > 1 ? t.n - 1 : 1;
    bool ok = true;
    if (t.me == root) {
        if (l.k == t.me) {
            for (int m = 0; m < chunks; ++m) {
                const nvr_u64 at = (nvr_u64)m * c.x;
                nvr_ll_copy<NVR_LL_BATCH>(nvr_ll_chunk(c, bytes, m), l.q, l.groups, s + at,
                                          d + at);
            }
        } else if (l.k < t.n) {
            const int m = nvr_ll_relay_of(l.k, root);
            ok = nvr_ll_send<NVR_LL_BATCH>(t, nvr_ll_chunk(c, bytes, m), l.k, l.q, l.groups,
                                           s + (nvr_u64)m * c.x);
        }
    } else if (l.k < t.n && l.k != t.me) {
        // Lane `root` receives this PE's chunk; another peer's lane forwards it, then receives
        // that peer's chunk (one receive site: each inlined copy makes the kernel larger).
        const int mine = nvr_ll_relay_of(t.me, root);
        const int m = l.k == root ? mine : nvr_ll_relay_of(l.k, root);
        if (l.k != root)
            ok = nvr_ll_relay<NVR_LL_BATCH>(t, nvr_ll_chunk(c, bytes, mine), root, l.k, l.q,
                                            l.groups);
        if (ok)
            ok = nvr_ll_recv<NVR_LL_BATCH>(t, nvr_ll_chunk(c, bytes, m), l.k, l.q, l.groups,
                                           d + (nvr_u64)m * c.x);
    }
    nvr_end(t, c.e, nvr_quiesce_staged(t, c.e, nvr_all_peers(t), ok));
}

// fcollect and alltoall (`src_blocks`: team PE k gets block k of src, else all of src), each
// PE's block landing in block me of every dst (`bytes` a block).
__device__ __forceinline__ void nvr_ll_exchange(const nvr_team &t, bool src_blocks,
                                                const void *src, void *dst, nvr_u64 bytes) {
    nvr_ll_ctx c;
    if (!nvr_ll_start(t, bytes, 0, c)) return;
    const nvr_lanes l = nvr_ll_lanes(t.n);
    const nvr_byte *s = (const nvr_byte *)src;
    nvr_byte *d = (nvr_byte *)dst;
    const nvr_u64 ss = src_blocks ? bytes : 0;
    bool ok = nvr_ll_send<1>(t, c, l.k, l.q, l.groups, s + (nvr_u64)l.k * ss);
    if (l.k == t.me)
        nvr_ll_copy<1>(c, l.q, l.groups, s + (nvr_u64)t.me * ss, d + (nvr_u64)t.me * bytes);
    if (ok) ok = nvr_ll_recv<1>(t, c, l.k, l.q, l.groups, d + (nvr_u64)l.k * bytes);
    nvr_end(t, c.e, nvr_quiesce_staged(t, c.e, nvr_all_peers(t), ok));
}

// nvr_ll_exchange with the peer lanes (nvr_ll_peer_lanes): the host takes it on 2, 3 and 5 PEs
// for blocks past 1 KiB (collective/algo/nvlink.rs, `ll_peer_lanes`); right on any team.
__device__ __forceinline__ void nvr_ll_exchange_peers(const nvr_team &t, bool src_blocks,
                                                      const void *src, void *dst,
                                                      nvr_u64 bytes) {
    nvr_ll_ctx c;
    if (!nvr_ll_start(t, bytes, 0, c)) return;
    const nvr_lanes l = nvr_ll_peer_lanes(t);
    const nvr_byte *s = (const nvr_byte *)src;
    nvr_byte *d = (nvr_byte *)dst;
    const nvr_u64 ss = src_blocks ? bytes : 0;
    const nvr_byte *mine = s + (nvr_u64)t.me * ss;
    nvr_byte *own = d + (nvr_u64)t.me * bytes; // == mine in place (fcollect): no copy then
    bool ok = true;
    if (l.k >= 0) {
        // The first lane's local copy rides on its sends (nvr_ll_send's cd): from the packets
        // sent (fcollect) or from this PE's own block of src (alltoall).
        nvr_byte *cd = nvr_ll_first_lane(l) && own != mine ? own : nullptr;
        ok = nvr_ll_send<1>(t, c, l.k, l.q, l.groups, s + (nvr_u64)l.k * ss,
                            src_blocks ? mine : nullptr, cd);
        if (ok) ok = nvr_ll_recv<NVR_LL_BATCH>(t, c, l.k, l.q, l.groups, d + (nvr_u64)l.k * bytes);
    } else if (t.n == 1 && own != mine) {
        nvr_ll_copy<1>(c, l.q, l.groups, mine, own);
    }
    nvr_end(t, c.e, nvr_quiesce_staged(t, c.e, nvr_all_peers(t), ok));
}

// dst = n blocks of `bytes`, block j = PE j's src.
extern "C" __global__ void __launch_bounds__(512, 1)
    nvr_ll_fcollect(const __grid_constant__ nvr_team t, const void *src, void *dst,
                    unsigned long long bytes) {
    nvr_ll_exchange(t, false, src, dst, bytes);
}

// fcollect with the peer lanes.
extern "C" __global__ void __launch_bounds__(512, 1)
    nvr_ll_fcollect_peers(const __grid_constant__ nvr_team t, const void *src, void *dst,
                          unsigned long long bytes) {
    nvr_ll_exchange_peers(t, false, src, dst, bytes);
}

// block j of my src goes to block me of PE j's dst (never in place).
extern "C" __global__ void __launch_bounds__(512, 1)
    nvr_ll_alltoall(const __grid_constant__ nvr_team t, const void *src, void *dst,
                    unsigned long long bytes) {
    nvr_ll_exchange(t, true, src, dst, bytes);
}

// alltoall with the peer lanes.
extern "C" __global__ void __launch_bounds__(512, 1)
    nvr_ll_alltoall_peers(const __grid_constant__ nvr_team t, const void *src, void *dst,
                          unsigned long long bytes) {
    nvr_ll_exchange_peers(t, true, src, dst, bytes);
}

// root's dst block j = PE j's src; other members' dst untouched.
extern "C" __global__ void __launch_bounds__(512, 1)
    nvr_ll_gather(const __grid_constant__ nvr_team t, int root, const void *src, void *dst,
                  unsigned long long bytes) {
    nvr_ll_ctx c;
    if (!nvr_ll_start(t, bytes, root, c)) return;
    const nvr_byte *s = (const nvr_byte *)src;
    nvr_byte *d = (nvr_byte *)dst;
    bool ok;
    if (t.me == root) {
        const nvr_lanes l = nvr_ll_lanes(t.n);
        if (l.k == t.me)
            nvr_ll_copy<NVR_LL_BATCH>(c, l.q, l.groups, s, d + (nvr_u64)t.me * bytes);
        ok = nvr_ll_recv<NVR_LL_BATCH>(t, c, l.k, l.q, l.groups, d + (nvr_u64)l.k * bytes);
    } else {
        ok = nvr_ll_send<NVR_LL_BATCH>(t, c, root, threadIdx.x, blockDim.x, s);
    }
    nvr_end(t, c.e, nvr_quiesce_staged(t, c.e, nvr_all_peers(t), ok));
}

// PE j's dst = block j of root's src.
extern "C" __global__ void __launch_bounds__(512, 1)
    nvr_ll_scatter(const __grid_constant__ nvr_team t, int root, const void *src, void *dst,
                   unsigned long long bytes) {
    nvr_ll_ctx c;
    if (!nvr_ll_start(t, bytes, root, c)) return;
    const nvr_byte *s = (const nvr_byte *)src;
    nvr_byte *d = (nvr_byte *)dst;
    bool ok;
    if (t.me == root) {
        const nvr_lanes l = nvr_ll_lanes(t.n);
        ok = nvr_ll_send<NVR_LL_BATCH>(t, c, l.k, l.q, l.groups, s + (nvr_u64)l.k * bytes);
        if (l.k == t.me)
            nvr_ll_copy<NVR_LL_BATCH>(c, l.q, l.groups, s + (nvr_u64)t.me * bytes, d);
    } else {
        ok = nvr_ll_recv<NVR_LL_BATCH>(t, c, root, threadIdx.x, blockDim.x, d);
    }
    nvr_end(t, c.e, nvr_quiesce_staged(t, c.e, nvr_all_peers(t), ok));
}

// barrier (fence = 1: fence.sc.sys first, so this PE's earlier writes are visible system-wide
// before any peer passes) or sync (fence = 0): arrive on block 0 (nvr_arrive_ordered), then
// wait until every peer has arrived at the same epoch. Grid 1, block 64: two warps, so that
// the epoch is read by the first while the flag warp fences (with one warp, which read it
// first, a checked barrier took 2.38-2.40 us on 2 x H200; with two, 2.28-2.30).
extern "C" __global__ void __launch_bounds__(64)
    nvr_barrier(const __grid_constant__ nvr_team t, int fence) {
    const bool fits = t.n >= 1 && t.n <= NVR_MAX_TEAM && t.me >= 0 && t.me < t.n &&
                      gridDim.x == 1 && blockDim.x == 64;
    if (!nvr_launch_checked(t, fits)) return;
    const unsigned int e =
        nvr_arrive_ordered(t, fence != 0 ? NVR_ARRIVE_FENCE : NVR_ARRIVE_RELEASE);
    nvr_end(t, e, nvr_wait_arrivals(t, e, e, nvr_all_peers(t)));
}
#endif // NVR_OP
