// Probe: where does this crate's LL all-reduce spend the microsecond that a plain 8-byte LL
// exchange does not? In nvshmem-perf the 8-byte all-reduce takes 2.28-2.47 us a call in a CUDA
// graph (2 x H200), a plain LL exchange 1.35 (floor.cu, one process, PDL on), and the same
// gap (about 1 us) separates the crate's Lamport kernel from a plain one at 64 KiB (lamport.cu).
// This probe runs crates/nvshmem/src/kernels/ll.cu's nvr_ll_all_reduce as it is (f32 sum)
// outside the library, between the two GPUs of one process, beside the kernel rebuilt from
// ll.cu's own helpers with pieces taken out, and a plain kernel on the same channel layout.
//
//   nvcc -O3 -std=c++17 -arch=sm_90 tools/probes/llpath.cu -o /tmp/llpath -lcuda
//   /tmp/llpath [CALLS [VARIANTS]]   (default 500 calls a graph; VARIANTS comma-separated)
//
// Variants (each an out-of-place f32 sum all-reduce on both GPUs, in the crate's LL launch
// shape: `ll_shape`, one block per 2 KiB up to 32, a lane per (packet, team PE) plus the flag
// warp, programmatic dependent launch on):
//   crate          nvr_ll_all_reduce as built (fingerprints checked)
//   crate-nocheck  the same with t.check = 0
//   crate-nopdl    the same without programmatic dependent launch
//   crate-1warp    the same in one warp (block 32: the flag lanes are data lanes too; 8 B only)
//   bis            the kernel rebuilt from ll.cu's helpers as ll.cu composes it, with two
//                  timestamps (below); the bis-* variants take one piece out each:
//   bis-noq        no quiescence (the end's wait for every peer's arrival of this run)
//   bis-noend      no block barrier at the end (thread 0 stores the epoch at once)
//   bis-nochk      no launch check (nvr_ll_check)
//   bis-spin       the receive a bare spin on the packet instead of nvr_wait (2 PEs)
//   bis-all        all of the above out
//   bis-1warp      bis in one warp (8 B only)
//   bis-nofp       the quiescence without block 0's fingerprint check
// and candidate changes that keep the protocol, one at a time and together:
//   bis-relaxq     the quiescence's arrival loads relaxed, not acquire (LL arrivals are
//                  relaxed stores, so an acquire pairs with nothing)
//   bis-early      the launch check, the block's packets and lanes worked out before
//                  griddepcontrol.wait (from launch arguments only; a refusal is recorded
//                  after it), while the kernel before still runs
//   bis-fast       the receive of whole 8-aligned packets by plain word loads and stores
//                  (nvr_ld8 and nvr_st8 take every shape), with the crate's bounded wait
//   bis-cand       bis-relaxq, bis-early and bis-fast together
//   bis-fastna     bis-fast without the warp vote (__all_sync) before the store
//   bis-fastv      bis-fast with a wait whose clock is passed to and returned from its slow
//                  path by value (nvr_wait_slow takes it by reference, so it lives in local
//                  memory)
//   plain          every thread stores its packets to the peer, spins for the peer's, adds and
//                  stores; the epoch read by every thread and stored by thread 0 after a block
//                  barrier (what the protocol cannot do without)
// Sizes: 8 B and 64 KiB. Each point: a CUDA graph of CALLS calls a GPU, both GPUs launched
// together, one warm-up replay and 5 timed; us a call is the median replay's slower GPU. The
// last replay's output is checked element by element and the status words must be 0.
// The bis and plain kernels also record, in block 0, %globaltimer after griddepcontrol.wait
// and at the end, and the SM clock between them: "in kernel" is the mean of end - start, "gap"
// the mean of start(call c + 1) - end(call c) (ns, both GPUs averaged, calls 10 .. CALLS - 2).
//
// Output: `VARIANT x=BYTES grid G block B: T us a call, in kernel K ns (C cycles), gap P ns,
// ok|WRONG`, then `probe: done, N wrong`.

#include "probe.cuh"

#include "f32_sum.cuh" // the crate's headers, as for an f32 sum
#include "../../crates/nvshmem/src/kernels/ll.cu"

#include <cstring>
#include <string>
#include <vector>

static const unsigned LL_BYTES = 32 << 10; // the library's default LL region
static const size_t MAXX = 64 << 10;       // the largest size timed
#define STAMPS 4096                         // stamp slots a GPU (calls, by epoch)

// Stamps of one call: [0] globaltimer after griddepcontrol.wait, [1] at the end, [2] SM clock
// cycles between them, [3] unused.
__device__ __forceinline__ void stamp(nvr_u64 *stamps, unsigned e, nvr_u64 g0, nvr_u64 c0) {
    const nvr_u64 c1 = clock64(), g1 = nvr_globaltimer();
    nvr_u64 *s = stamps + 4 * (e % STAMPS);
    s[0] = g0;
    s[1] = g1;
    s[2] = c1 - c0;
}

#define BIS_NOQ 1
#define BIS_NOEND 4
#define BIS_NOCHK 8
#define BIS_SPIN 16
#define BIS_RELAXQ 32
#define BIS_EARLY 64
#define BIS_FAST 128
#define BIS_NOFP 256
#define BIS_FASTNA 512
#define BIS_FASTV 1024
#define BIS_ALL (BIS_NOQ | BIS_NOEND | BIS_NOCHK | BIS_SPIN)
#define BIS_CAND (BIS_RELAXQ | BIS_EARLY | BIS_FAST)

// nvr_quiesce_staged with relaxed loads of the arrival word (BIS_RELAXQ). The crate's own since
// f7e617e; a copy, so that the variant still times it against kernel sources from before then
// (built beside these as tools/probes/README.md says), whose quiescence loads with acquire.
__device__ __forceinline__ bool bis_quiesce_relaxed(const nvr_team &t, unsigned int e, bool ok) {
    if (!ok) return false;
    const int j = nvr_flag_peer(t);
    if (j < 0) return true;
    const unsigned int *flag = nvr_arrive_word(t, blockIdx.x, j);
    if (blockIdx.x != 0 || !nvr_fp_on(t))
        return nvr_wait(
            t, [=] { return nvr_reached(nvr_ld_relaxed(flag), e); }, j, e, NVR_WAIT_ARRIVE);
    const char *s = nvr_fp_slot(t, e, blockIdx.x, j);
    const nvr_u64 m0 = t.fp[0], m1 = t.fp[1];
    unsigned int *status = t.status;
    const int me = t.me;
    int r = 0;
    const bool w = nvr_wait(
        t,
        [&] {
            nvr_u64 w0, w1;
            const bool p0 = nvr_ll_poll(s, e, w0);
            const bool p1 = nvr_ll_poll(s + NVR_LL_PACKET, e, w1);
            const bool arrived = nvr_reached(nvr_ld_relaxed(flag), e);
            r = nvr_fp_judge(p0, p1, w0, w1, e, j, m0, m1, status, me);
            return r < 0 || (r > 0 && arrived);
        },
        j, e, NVR_WAIT_ARRIVE);
    return w && r > 0;
}

// nvr_wait's clock by value: the slow path's verdict rides in `start` (0 after a failure).
struct bis_clock {
    nvr_u64 start, abort_at;
};
__device__ __noinline__ bis_clock bis_wait_slow(const nvr_team &t, int peer, unsigned int e,
                                               unsigned int what, bis_clock c) {
    nvr_wait_clock k = {c.start, c.abort_at};
    const bool go = nvr_wait_slow(t, peer, e, what, k);
    return bis_clock{go ? (k.start != 0 ? k.start : 1) : 0, k.abort_at};
}
__device__ __forceinline__ bool bis_ll_wait_v(const nvr_team &t, const void *p, unsigned int e,
                                              int peer, nvr_u64 &v) {
    unsigned int polls = 0;
    bis_clock c = {0, 0}; // start 0: the first slow step starts the clock (nvr_abort_due)
    while (!nvr_ll_poll(p, e, v)) {
        if ((++polls & 255u) != 0) continue;
        c = bis_wait_slow(t, peer, e, NVR_WAIT_LL, c);
        if (c.start == 0) return false;
    }
    return true;
}

// nvr_ll_reduce_recv with whole 8-aligned packets by word loads and stores (BIS_FAST, and with
// BIS_FASTNA or BIS_FASTV).
template <int B>
__device__ __forceinline__ bool bis_fast_recv(const nvr_team &t, const nvr_ll_ctx &c,
                                              const nvr_lanes &l, const nvr_byte *own,
                                              nvr_byte *dst, bool ok) {
    if (!nvr_ll_words(c, own) || !nvr_ll_words(c, dst))
        return nvr_ll_reduce_recv(t, c, l, own, dst, (NVR_ACC)1.0, ok);
    const char *r = nvr_ll_region(t, c.e, l.k, c.b);
    const nvr_u64 *o = (const nvr_u64 *)own;
    nvr_u64 *d = (nvr_u64 *)dst;
    for (nvr_pk base = c.p0; base < c.p1; base += l.groups) {
        const nvr_pk i = base + l.q;
        const bool live = i < c.p1;
        nvr_u64 v = 0;
        if (live && l.k < t.n) {
            if (l.k == t.me) v = o[i];
            else if (ok && (B & BIS_FASTV))
                ok = bis_ll_wait_v(t, r + NVR_LL_PACKET * (i - c.p0), c.e, l.k, v);
            else if (ok) ok = nvr_ll_wait(t, r + NVR_LL_PACKET * (i - c.p0), c.e, l.k, v);
        }
        const nvr_u64 out = nvr_group_reduce(v, l.G, t.n, (NVR_ACC)1.0);
        if ((B & BIS_FASTNA) ? ok : __all_sync(0xffffffffu, ok))
            if (live && l.k == 0) d[i] = out;
    }
    return ok;
}

// nvr_ll_reduce_recv with a bare spin for the peer's packet (2 PEs, 8-aligned whole packets).
__device__ __forceinline__ bool bis_spin_recv(const nvr_team &t, const nvr_ll_ctx &c,
                                              const nvr_lanes &l, const nvr_byte *own,
                                              nvr_byte *dst) {
    const char *r = nvr_ll_region(t, c.e, l.k, c.b);
    bool ok = true;
    for (nvr_pk base = c.p0; base < c.p1; base += l.groups) {
        const nvr_pk i = base + l.q;
        const bool live = i < c.p1;
        nvr_u64 v = 0;
        if (live && l.k < t.n) {
            if (l.k == t.me) {
                v = *(const nvr_u64 *)(own + 8 * i);
            } else {
                long spins = 0;
                while (ok && !nvr_ll_poll(r + NVR_LL_PACKET * (i - c.p0), c.e, v))
                    if (++spins > (1L << 26)) ok = false;
            }
        }
        const nvr_u64 out = nvr_group_reduce(v, l.G, t.n, (NVR_ACC)1.0);
        if (live && l.k == 0) *(nvr_u64 *)(dst + 8 * i) = out;
    }
    return ok;
}

template <int B>
__global__ void __launch_bounds__(512, 1)
    bis_all_reduce(const __grid_constant__ nvr_team t, const float *src, float *dst,
                   unsigned long long count, nvr_u64 *stamps) {
    const nvr_u64 x = count * sizeof(float);
    bool pre = true;
    nvr_ll_ctx c;
    nvr_lanes l;
    if (B & BIS_EARLY) {
        pre = nvr_ll_check(t, x, 0);
        c = nvr_ll_begin(x, 0);
        l = nvr_ll_lanes(t.n);
    }
    nvr_launch_begin();
    const nvr_u64 g0 = nvr_globaltimer(), c0 = clock64();
    const unsigned int e = nvr_begin(t);
    if (B & BIS_EARLY) {
        if (!pre) {
            if (threadIdx.x == 0) nvr_fail(t.status, NVR_FAIL_LIMITS, -1, 0, 0);
            return;
        }
        c.e = e;
    } else {
        if (!(B & BIS_NOCHK) && !nvr_ll_check(t, x, 0)) return;
        c = nvr_ll_begin(x, e);
    }
    nvr_arrive(t, c.e);
    if (!(B & BIS_EARLY)) l = nvr_ll_lanes(t.n);
    const nvr_byte *s = (const nvr_byte *)src;
    bool ok = nvr_ll_send<1>(t, c, l.k, l.q, l.groups, s);
    if (B & BIS_SPIN) ok = bis_spin_recv(t, c, l, s, (nvr_byte *)dst) && ok;
    else if (B & (BIS_FAST | BIS_FASTNA | BIS_FASTV))
        ok = bis_fast_recv<B>(t, c, l, s, (nvr_byte *)dst, ok);
    else ok = nvr_ll_reduce_recv(t, c, l, s, (nvr_byte *)dst, (NVR_ACC)1.0, ok);
    if (B & BIS_RELAXQ) ok = bis_quiesce_relaxed(t, c.e, ok);
    else if (B & BIS_NOFP) ok = nvr_quiesce(t, c.e, nvr_all_peers(t), ok, false);
    else if (!(B & BIS_NOQ)) ok = nvr_quiesce_staged(t, c.e, nvr_all_peers(t), ok);
    if (B & BIS_NOEND) {
        if (threadIdx.x == 0) *(volatile unsigned int *)nvr_epoch(t, blockIdx.x) = c.e;
    } else {
        nvr_end(t, c.e, ok);
    }
    if (blockIdx.x == 0 && threadIdx.x == 0) stamp(stamps, c.e, g0, c0);
}

// The plain kernel on the crate's layout: no check, arrival, fingerprints or bounded waits.
__global__ void __launch_bounds__(512, 1)
    plain_all_reduce(const __grid_constant__ nvr_team t, const float *src, float *dst,
                     unsigned long long count, nvr_u64 *stamps) {
    nvr_launch_begin();
    const nvr_u64 g0 = nvr_globaltimer(), c0 = clock64();
    const unsigned int e = nvr_begin(t);
    const nvr_ll_ctx c = nvr_ll_begin(count * sizeof(float), e);
    const int k = 1 - t.me;
    const nvr_u64 *w = (const nvr_u64 *)src;
    char *to = nvr_peer(t, nvr_ll_region(t, c.e, t.me, c.b), k);
    const char *from = nvr_ll_region(t, c.e, k, c.b);
    for (nvr_pk i = c.p0 + threadIdx.x; i < c.p1; i += blockDim.x)
        nvr_ll_store(to + NVR_LL_PACKET * (i - c.p0), w[i], c.e);
    for (nvr_pk i = c.p0 + threadIdx.x; i < c.p1; i += blockDim.x) {
        nvr_u64 v;
        long spins = 0;
        while (!nvr_ll_poll(from + NVR_LL_PACKET * (i - c.p0), c.e, v))
            if (++spins > (1L << 26)) break;
        const nvr_u64 a = w[i];
        const float s0 = __uint_as_float((unsigned)a) + __uint_as_float((unsigned)v);
        const float s1 =
            __uint_as_float((unsigned)(a >> 32)) + __uint_as_float((unsigned)(v >> 32));
        float2 *d = (float2 *)dst + i;
        *d = make_float2(s0, s1);
    }
    __syncthreads();
    if (threadIdx.x == 0) *(volatile unsigned int *)nvr_epoch(t, blockIdx.x) = c.e;
    if (blockIdx.x == 0 && threadIdx.x == 0) stamp(stamps, c.e, g0, c0);
}

// ---- host ------------------------------------------------------------------------------------

enum Variant {
    CRATE,
    CRATE_NOCHECK,
    CRATE_NOPDL,
    CRATE_1WARP,
    V_BIS,
    V_BIS_NOQ,
    V_BIS_NOEND,
    V_BIS_NOCHK,
    V_BIS_SPIN,
    V_BIS_ALL,
    V_BIS_1WARP,
    V_BIS_NOFP,
    V_BIS_RELAXQ,
    V_BIS_EARLY,
    V_BIS_FAST,
    V_BIS_CAND,
    V_BIS_FASTNA,
    V_BIS_FASTV,
    PLAIN,
    VARIANTS
};
static const char *NAMES[] = {"crate",      "crate-nocheck", "crate-nopdl", "crate-1warp",
                              "bis",        "bis-noq",       "bis-noend",   "bis-nochk",
                              "bis-spin",   "bis-all",       "bis-1warp",   "bis-nofp",
                              "bis-relaxq", "bis-early",     "bis-fast",    "bis-cand",
                              "bis-fastna", "bis-fastv",     "plain"};

static int bis_bits(Variant v) {
    switch (v) {
    case V_BIS_NOQ: return BIS_NOQ;
    case V_BIS_NOEND: return BIS_NOEND;
    case V_BIS_NOCHK: return BIS_NOCHK;
    case V_BIS_SPIN: return BIS_SPIN;
    case V_BIS_ALL: return BIS_ALL;
    case V_BIS_NOFP: return BIS_NOFP;
    case V_BIS_RELAXQ: return BIS_RELAXQ;
    case V_BIS_EARLY: return BIS_EARLY;
    case V_BIS_FAST: return BIS_FAST;
    case V_BIS_CAND: return BIS_CAND;
    case V_BIS_FASTNA: return BIS_FASTNA;
    case V_BIS_FASTV: return BIS_FASTV;
    default: return 0;
    }
}

struct Gpu {
    char *chan;
    float *src, *dst;
    nvr_u64 *stamps;
    unsigned *abort_word, *status; // host-mapped
    cudaStream_t s;
};

// The crate's LL launch rule for an all-reduce of x bytes on 2 PEs (ll_shape; 2 lanes a packet).
static void crate_shape(size_t x, unsigned *grid, unsigned *block) {
    const size_t g = std::min<size_t>(std::max<size_t>((x + 2047) / 2048, 1), 32);
    const size_t ppb = ((x + 7) / 8 + g - 1) / g;
    *grid = (unsigned)g;
    *block = (unsigned)std::min<size_t>((ppb * 2 + 31) / 32 * 32 + 32, 512);
}

static void reset(Gpu *g) {
    for (int i = 0; i < 2; ++i) {
        CK(cudaSetDevice(i));
        CK(cudaDeviceSynchronize());
        CK(cudaMemset(g[i].chan, 0, nvr_chan_bytes(LL_BYTES)));
        CK(cudaMemset(g[i].dst, 0, MAXX));
        CK(cudaMemset(g[i].stamps, 0, 4 * STAMPS * sizeof(nvr_u64)));
        memset(g[i].status, 0, 32 * sizeof(unsigned));
        CK(cudaDeviceSynchronize());
    }
}

static void launch(Gpu *g, int i, Variant v, size_t x, unsigned *grid_out, unsigned *block_out) {
    Gpu &me = g[i], &peer = g[1 - i];
    unsigned grid, block;
    crate_shape(x, &grid, &block);
    if ((v == CRATE_1WARP || v == V_BIS_1WARP) && grid == 1) block = 32;
    if (v == PLAIN) block = std::max(32u, block - 32);
    *grid_out = grid;
    *block_out = block;
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(grid);
    cfg.blockDim = dim3(block);
    cfg.stream = me.s;
    cudaLaunchAttribute attr;
    attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr.val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = &attr;
    cfg.numAttrs = v == CRATE_NOPDL ? 0 : 1;
    nvr_team t;
    memset(&t, 0, sizeof t);
    t.off[i] = 0;
    t.off[1 - i] = (long long)(peer.chan - me.chan);
    t.n = 2;
    t.me = i;
    t.chan = (unsigned long long)me.chan;
    t.ll_bytes = LL_BYTES;
    t.check = v == CRATE_NOCHECK ? 0 : 1;
    t.abort = me.abort_word;
    t.status = me.status;
    t.timeout_ns = 5000000000ull;
    t.fp[0] = 0x1234567ull + x;
    t.fp[1] = 0x89abcdefull;
    t.lam_bytes = 0;
    const unsigned long long count = x / 4;
    if (v == PLAIN) {
        CK(cudaLaunchKernelEx(&cfg, plain_all_reduce, t, (const float *)me.src, me.dst, count,
                              me.stamps));
        return;
    }
    if (v < V_BIS) {
        CK(cudaLaunchKernelEx(&cfg, nvr_ll_all_reduce, t, (const float *)me.src, me.dst, count,
                              1.0));
        return;
    }
    switch (bis_bits(v)) {
#define BIS_CASE(b)                                                                            \
    case b:                                                                                    \
        CK(cudaLaunchKernelEx(&cfg, bis_all_reduce<b>, t, (const float *)me.src, me.dst, count, \
                              me.stamps));                                                     \
        break;
        BIS_CASE(0)
        BIS_CASE(BIS_NOQ)
        BIS_CASE(BIS_NOEND)
        BIS_CASE(BIS_NOCHK)
        BIS_CASE(BIS_SPIN)
        BIS_CASE(BIS_ALL)
        BIS_CASE(BIS_NOFP)
        BIS_CASE(BIS_RELAXQ)
        BIS_CASE(BIS_EARLY)
        BIS_CASE(BIS_FAST)
        BIS_CASE(BIS_CAND)
        BIS_CASE(BIS_FASTNA)
        BIS_CASE(BIS_FASTV)
#undef BIS_CASE
    default: fprintf(stderr, "no bis kernel for %d\n", bis_bits(v)); exit(1);
    }
}

int main(int argc, char **argv) {
    const cudaDeviceProp prop = two_gpus();
    const int iters = argc > 1 ? std::max(20, atoi(argv[1])) : 500;
    const std::vector<bool> on = chosen(argc > 2 ? argv[2] : "", NAMES, VARIANTS);
    printf("probe: llpath, %s x2, %d calls a graph\n", prop.name, iters);
    Gpu g[2];
    for (int i = 0; i < 2; ++i) {
        CK(cudaSetDevice(i));
        CK(cudaDeviceEnablePeerAccess(1 - i, 0));
        CK(cudaMalloc(&g[i].chan, nvr_chan_bytes(LL_BYTES)));
        CK(cudaMalloc(&g[i].src, MAXX));
        CK(cudaMalloc(&g[i].dst, MAXX));
        CK(cudaMalloc(&g[i].stamps, 4 * STAMPS * sizeof(nvr_u64)));
        CK(cudaHostAlloc(&g[i].abort_word, sizeof(unsigned), cudaHostAllocMapped));
        CK(cudaHostAlloc(&g[i].status, 32 * sizeof(unsigned), cudaHostAllocMapped));
        *g[i].abort_word = 0;
        CK(cudaStreamCreateWithFlags(&g[i].s, cudaStreamNonBlocking));
        std::vector<float> h(MAXX / 4);
        for (size_t k = 0; k < h.size(); ++k) h[k] = (float)((int)(k % 251) - 100 + 7 * i);
        CK(cudaMemcpy(g[i].src, h.data(), MAXX, cudaMemcpyHostToDevice));
    }
    const size_t sizes[] = {8, 64 << 10};
    int wrong = 0, points = 0;
    for (size_t x : sizes) {
        for (int vi = 0; vi < VARIANTS; ++vi) {
            if (!on[vi]) continue;
            const Variant v = (Variant)vi;
            if ((v == CRATE_1WARP || v == V_BIS_1WARP) && x > 8) continue;
            reset(g);
            unsigned grid = 0, block = 0;
            const cudaStream_t streams[2] = {g[0].s, g[1].s};
            const double us = graph_us_a_call(
                streams, iters, [&](int i, int) { launch(g, i, v, x, &grid, &block); });
            bool ok = true;
            double in_ns = 0, cycles = 0, gap_ns = 0;
            int stamped = 0;
            for (int i = 0; i < 2; ++i) {
                CK(cudaSetDevice(i));
                std::vector<float> out(x / 4);
                CK(cudaMemcpy(out.data(), g[i].dst, x, cudaMemcpyDeviceToHost));
                if (g[i].status[0] != 0) {
                    printf("GPU %d status %u (peer %d, what %u)\n", i, g[i].status[0],
                           (int)g[i].status[NVR_ST_PEER], g[i].status[NVR_ST_WHAT]);
                    ok = false;
                }
                for (size_t k = 0; k < out.size() && ok; ++k)
                    if (out[k] != (float)(2 * ((int)(k % 251) - 100) + 7)) ok = false;
                // The last replay's epochs are 5 * iters + 1 .. 6 * iters (six replays).
                std::vector<nvr_u64> st(4 * STAMPS);
                CK(cudaMemcpy(st.data(), g[i].stamps, st.size() * sizeof(nvr_u64),
                              cudaMemcpyDeviceToHost));
                const unsigned first = 5u * iters + 1;
                for (int c = 10; c + 1 < iters && c + 1 < STAMPS; ++c) {
                    const nvr_u64 *a = &st[4 * ((first + c) % STAMPS)];
                    const nvr_u64 *b = &st[4 * ((first + c + 1) % STAMPS)];
                    if (a[1] == 0 || b[0] == 0) continue;
                    in_ns += (double)(a[1] - a[0]);
                    cycles += (double)a[2];
                    gap_ns += (double)(int64_t)(b[0] - a[1]);
                    ++stamped;
                }
            }
            wrong += !ok;
            ++points;
            if (stamped > 0)
                printf("%-13s x=%6zu grid %2u block %3u: %6.2f us a call, in kernel %6.0f ns "
                       "(%5.0f cycles), gap %6.0f ns, %s\n",
                       NAMES[v], x, grid, block, us, in_ns / stamped, cycles / stamped,
                       gap_ns / stamped, ok ? "ok" : "WRONG");
            else
                printf("%-13s x=%6zu grid %2u block %3u: %6.2f us a call, %s\n", NAMES[v], x,
                       grid, block, us, ok ? "ok" : "WRONG");
            fflush(stdout);
        }
    }
    if (points == 0) {
        fprintf(stderr, "no variant named in '%s'\n", argv[2]);
        return 1;
    }
    printf("probe: done, %d wrong\n", wrong);
    return wrong != 0;
}
