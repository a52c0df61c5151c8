// Probe: this crate's Lamport all-reduce (crates/nvshmem/src/kernels/lamport.cu, compiled here
// as it is, f32 sum) beside a plain Lamport kernel, between the two GPUs of one process.
//
// Why: on 2 x H200 the library's Lamport all-reduce loses rate past 512 KiB a pair (4.82 us at
// 512 KiB, 7.57 at 1 MiB, 11.69 at 2 MiB: docs/performance.md, "The Lamport reductions from
// 512 KiB a pair up"), where a plain one-process Lamport kernel took 3.61 / 5.05 / 8.61
// (../shared/anchors.md, "The mid band"). Five changes to the kernel did not explain it. This
// probe runs the crate's kernel itself outside the library (no NVSHMEM, no second process,
// cudaMalloc memory): if it is slow here too, the kernel is the cause and the plain variants
// bisect it; if it is fast here, the cause is the library's setting (its heap, two processes).
//
//   nvcc -O3 -std=c++17 -arch=sm_90 tools/probes/lamport.cu -o /tmp/lamport -lcuda
//   /tmp/lamport [ITERS [VARIANTS [SIZES]]]   (default 300 calls a graph; VARIANTS a
//                                      comma-separated list of names, default all; SIZES one
//                                      of bytes, default 64 KiB to 2 MiB)
//
// Variants (every one an out-of-place f32 sum all-reduce of x bytes on both GPUs):
//   crate          nvr_lamport_all_reduce, launched as the library launches it (its `shape`:
//                  one block per 2 KiB, at most 128, a thread per vector up to 512, plus the
//                  control warp; programmatic dependent launch; fingerprints checked);
//   crate-nocheck  the same with the call check off (t.check = 0);
//   crate-nopdl    the same without programmatic dependent launch;
//   plain          a Lamport kernel with nothing but the data path (each thread sends its
//                  vectors, polls them, adds, stores, and re-fills its vectors of the buffer it
//                  read in the call before; the buffer index is a launch argument), in the
//                  crate's grid without the control warp, with programmatic dependent launch;
//   plain-512      the plain kernel with 512 threads a block, one vector a thread, at most 132
//                  blocks (the anchor's shape);
//   plain-ctl      the plain kernel in the crate's block shape: the last warp moves no data and
//                  re-fills the previous buffer instead of the data threads;
//   bis, bis-*     the crate's kernel rebuilt here from lamport.cu's own helpers, as is (bis) and
//                  with one piece replaced each (bis_all_reduce below: the re-fill of 717ce5f,
//                  no quiescence wait, no end barrier, a bare spin for the receive, the last
//                  three together, the spin with no block barrier at the start, or that with
//                  the buffer index read by each warp from a word of its block's), to find
//                  what costs the time the plain kernel does not spend. (Variants bis-cnt-*
//                  and bis-nofence, which ordered the block's count and the header's update
//                  otherwise, were in this file at commit 101451d: what they found is in the
//                  crate, lamport.cu's HEADER, and tools/probes/README.md.)
// (Until 2026-11-28 the bis kernels waited with nvr_quiesce, which checks a fingerprint in every
// block, where only block 0 publishes one since the crate's nvr_quiesce_staged: every other
// block waited out its timeout, and `bis` did not finish its first point within 240 s. They
// now wait as the crate's kernel does, and with its team loops for a pair.)
// Each point: a CUDA graph of ITERS back-to-back calls per GPU (both launched at once), one
// warm-up replay and 5 timed; µs a call is the median replay's slower GPU over ITERS. Every
// point's output of the last replay is checked element by element (inputs are small integers,
// so the sum is exact) and the crate's status words must be 0.
//
// Output: `VARIANT x=BYTES grid G block B: T us (R GB/s a direction), ok|WRONG`, then
// `probe: done, N wrong`.

#include "probe.cuh"

#include "f32_sum.cuh" // the crate's headers, as for an f32 sum
#include "../../crates/nvshmem/src/kernels/lamport.cu"

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

static const unsigned LL_BYTES = 32 << 10;  // the library's default LL region
static const size_t SLOT = 2 << 20;         // the library's default 2-PE slot
static const size_t AREA = NVR_LAM_HEADER + 3 * SLOT;

// ---- the plain kernel ------------------------------------------------------------------------

__device__ __forceinline__ bool plain_ready(const uint4 &v) {
    return v.x != NVR_LAM_SENTINEL && v.y != NVR_LAM_SENTINEL && v.z != NVR_LAM_SENTINEL &&
           v.w != NVR_LAM_SENTINEL;
}

// CTL: the block's last warp moves no data and re-fills the previous buffer (all of it, spread
// over the grid's last warps); else every data thread re-fills its own vectors of it. A bound on
// the polls (2^26 per vector) sets *err instead of hanging the probe.
template <bool CTL>
__global__ void __launch_bounds__(544, 1)
    plain_all_reduce(const uint4 *src, uint4 *dst, char *area, char *peer_area, unsigned rot,
                     size_t vectors, int *err) {
#if __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
    const unsigned data = CTL ? blockDim.x - 32 : blockDim.x;
    uint4 *to = (uint4 *)(peer_area + NVR_LAM_HEADER + rot * SLOT);
    const uint4 *from = (const uint4 *)(area + NVR_LAM_HEADER + rot * SLOT);
    uint4 *prev = (uint4 *)(area + NVR_LAM_HEADER + ((rot + 2) % 3) * SLOT);
    const uint4 s = make_uint4(NVR_LAM_SENTINEL, NVR_LAM_SENTINEL, NVR_LAM_SENTINEL,
                               NVR_LAM_SENTINEL);
    if (CTL && threadIdx.x >= data) {
        const size_t stride = 32ull * gridDim.x;
        for (size_t w = 32ull * blockIdx.x + (threadIdx.x - data); w < vectors; w += stride)
            prev[w] = s;
        return;
    }
    const size_t vpb = (vectors + gridDim.x - 1) / gridDim.x;
    const size_t v0 = min((size_t)blockIdx.x * vpb, vectors), v1 = min(v0 + vpb, vectors);
    for (size_t i = v0 + threadIdx.x; i < v1; i += data) {
        uint4 v = src[i];
        v.x = v.x == NVR_LAM_SENTINEL ? 0 : v.x;
        v.y = v.y == NVR_LAM_SENTINEL ? 0 : v.y;
        v.z = v.z == NVR_LAM_SENTINEL ? 0 : v.z;
        v.w = v.w == NVR_LAM_SENTINEL ? 0 : v.w;
        nvr_lam_st16((char *)(to + i), v);
    }
    for (size_t i = v0 + threadIdx.x; i < v1; i += data) {
        uint4 r;
        long spins = 0;
        while (!nvr_lam_poll((const char *)(from + i), r))
            if (++spins > (1L << 26)) {
                atomicExch(err, 1);
                return;
            }
        const float4 a = ((const float4 *)src)[i];
        const float4 b = *(float4 *)&r;
        ((float4 *)dst)[i] = make_float4(a.x + b.x, a.y + b.y, a.z + b.z, a.w + b.w);
        if (!CTL) prev[i] = s;
    }
}

// ---- the crate's kernel, piece by piece --------------------------------------------------------

// nvr_lamport_all_reduce composed of the crate's own helpers as lamport.cu composes it, with
// pieces replaced (bits of B): BIS_OLDREFILL the re-fill of commit 717ce5f (the slot and offset
// of every vector by a 64-bit division); BIS_NOQUIESCE the control warp re-fills only (no wait
// for the peer's arrival); BIS_NOEND no block barrier at the end (thread 0 stores the epoch, the
// last block's counter lane the header); BIS_SPIN the receive a bare spin on
// the peer's vector (2 PEs only) instead of the crate's team loop and nvr_wait.
#define BIS_OLDREFILL 1
#define BIS_NOQUIESCE 2
#define BIS_NOEND 4
#define BIS_SPIN 8
#define BIS_NOSTART 16 // with BIS_SPIN only: the data threads take the buffer index from a launch
                       // argument and start at once (no block barrier at the start); the
                       // control warp reads the epoch and the header, counts and arrives alone
#define BIS_WARPROT 32 // with BIS_NOSTART: the data warps read the buffer index from their
                       // block's own word rotb[b] (one lane a warp, shuffled; 128 bytes apart),
                       // which each block advances at its end and the last block advances for
                       // the blocks past this grid, instead of a launch argument
__device__ __forceinline__ void bis_old_refill(const nvr_team &t, const nvr_lam_ctx &c,
                                               nvr_u64 slot) {
    if (c.clear == 0 || t.n < 2) return;
    const nvr_u64 per = (c.clear + 15) / 16, all = per * (nvr_u64)(t.n - 1);
    char *buf = c.area + NVR_LAM_HEADER + (nvr_u64)((c.rot + 2) % 3) * (nvr_u64)(t.n - 1) * slot;
    const uint4 s = make_uint4(NVR_LAM_SENTINEL, NVR_LAM_SENTINEL, NVR_LAM_SENTINEL,
                               NVR_LAM_SENTINEL);
    const nvr_u64 lane = threadIdx.x & 31u, stride = 32ull * gridDim.x;
    for (nvr_u64 w = 32ull * blockIdx.x + lane; w < all; w += stride)
        *(uint4 *)(buf + (w / per) * slot + 16 * (w % per)) = s;
}

__device__ __forceinline__ bool bis_spin_recv(const nvr_team &t, const nvr_lam_ctx &c,
                                              const char *own, char *dst, nvr_u64 x,
                                              nvr_u64 slot) {
    const int peer = 1 - t.me;
    const char *from = nvr_lam_slot(c.area, c.rot, peer, t.me, t.n, slot);
    for (nvr_lv i = c.v0 + threadIdx.x; i < c.v1; i += nvr_lam_data_threads()) {
        uint4 r;
        long spins = 0;
        while (!nvr_lam_poll(from + 16 * i, r))
            if (++spins > (1L << 26)) return false;
        const float4 a = *(const float4 *)(own + 16 * i);
        const float4 b = *(float4 *)&r;
        *(float4 *)(dst + 16 * i) = make_float4(a.x + b.x, a.y + b.y, a.z + b.z, a.w + b.w);
    }
    return true;
}

// BIS_NOSTART's start: every control lane reads the epoch and the header itself.
__device__ __forceinline__ nvr_lam_ctx bis_start(const nvr_team &t, nvr_u64 x, unsigned rot) {
    nvr_lam_ctx c;
    c.area = nvr_lam_area(t);
    c.x = (nvr_lv)x;
    const nvr_lv vectors = (c.x + 15) / 16;
    const nvr_lv vpb = (vectors + gridDim.x - 1) / gridDim.x;
    c.v0 = min(blockIdx.x * vpb, vectors);
    c.v1 = min(c.v0 + vpb, vectors);
    c.before = 0;
    c.rot = rot;
    c.e = 0;
    c.clear = 0;
    if (nvr_lam_is_control()) {
        const nvr_lam_read h = nvr_lam_read_header(c.area);
        c.e = nvr_begin(t);
        c.rot = h.rot;
        c.clear = h.clear;
        if (nvr_lam_is_counter()) c.before = nvr_lam_count_block(c.area);
        nvr_arrive(t, c.e);
    }
    return c;
}

template <int B>
__global__ void __launch_bounds__(544, 1)
    bis_all_reduce(const __grid_constant__ nvr_team t, const float *src, float *dst,
                   unsigned long long count, double scale, unsigned long long slot,
                   unsigned rot_arg, unsigned *rotb) {
    const nvr_u64 x = count * sizeof(float);
    nvr_lam_ctx c;
    nvr_lam_first f;
    if (B & BIS_NOSTART) {
        nvr_launch_begin();
        if (!nvr_lam_check(t, x, (x + 15) / 16 * 16, slot, 0)) return;
        c = bis_start(t, x, rot_arg);
        f = nvr_lam_prefetch(c, (const char *)src, x);
        if ((B & BIS_WARPROT) && !nvr_lam_is_control()) {
            unsigned r = 0;
            if ((threadIdx.x & 31u) == 0)
                asm volatile("ld.volatile.global.u32 %0, [%1];"
                             : "=r"(r)
                             : "l"(rotb + 32 * blockIdx.x)
                             : "memory");
            c.rot = __shfl_sync(0xffffffffu, r, 0);
        }
    } else {
        if (!nvr_lam_start(t, x, slot, 0, c)) return;
        f = nvr_lam_prefetch(c, (const char *)src, c.x);
        nvr_lam_arrive(t, c);
    }
    bool ok;
    if (nvr_lam_is_control()) {
        if (B & BIS_OLDREFILL) bis_old_refill(t, c, slot);
        else nvr_lam_refill(t, c, slot);
        ok = (B & BIS_NOQUIESCE) ? true : nvr_quiesce_staged(t, c.e, nvr_all_peers(t), true);
    } else {
        nvr_lam_send_all(t, c, (const char *)src, x, slot, false, f);
        ok = (B & BIS_SPIN) ? bis_spin_recv(t, c, (const char *)src, (char *)dst, x, slot)
                            : nvr_lam_reduce_recv(t, c, (const char *)src, (char *)dst, x, slot,
                                                  (NVR_ACC)scale);
    }
    if (B & BIS_NOSTART) {
        // nvr_lam_finish, but the epoch stored by the counter lane (thread 0 has no epoch).
        if (nvr_lam_is_counter() && c.before == gridDim.x - 1) nvr_lam_advance(c.area, c.rot, x);
        if ((B & BIS_WARPROT) && nvr_lam_is_counter() && c.before == gridDim.x - 1)
            for (unsigned b = gridDim.x; b < NVR_LAM_MAX_GRID; ++b)
                *(volatile unsigned *)(rotb + 32 * b) = (c.rot + 1) % 3;
        if (__syncthreads_or(!ok)) return;
        if (nvr_lam_is_counter()) {
            *(volatile unsigned int *)nvr_epoch(t, blockIdx.x) = c.e;
            if (B & BIS_WARPROT) *(volatile unsigned *)(rotb + 32 * blockIdx.x) = (c.rot + 1) % 3;
        }
        return;
    }
    if (!(B & BIS_NOEND)) {
        nvr_lam_finish(t, c, x, ok);
        return;
    }
    if (nvr_lam_is_counter() && c.before == gridDim.x - 1) nvr_lam_advance(c.area, c.rot, x);
    if (threadIdx.x == 0) *(volatile unsigned int *)nvr_epoch(t, blockIdx.x) = c.e;
}

// ---- host ------------------------------------------------------------------------------------

enum Variant {
    CRATE,
    CRATE_NOCHECK,
    CRATE_NOPDL,
    V_BIS,
    V_BIS_OLD,
    V_BIS_OLD_NOQ,
    V_BIS_NOQ,
    V_BIS_NOEND,
    V_BIS_SPIN,
    V_BIS_ALL,
    V_BIS_NOSTART,
    V_BIS_WARPROT,
    PLAIN, // the plain kernels last (launch tests v >= PLAIN)
    PLAIN_512,
    PLAIN_CTL,
    VARIANTS
};
static const char *NAMES[] = {"crate",    "crate-nocheck", "crate-nopdl", "bis",
                              "bis-oldrefill", "bis-oldrefill-noquiesce", "bis-noquiesce",
                              "bis-noend", "bis-spin",    "bis-all",     "bis-nostart-spin", "bis-warprot-spin", "plain",
                              "plain-512", "plain-ctl"};
// The BIS_* pieces of each bis variant.
static int bis_bits(Variant v) {
    switch (v) {
    case V_BIS_OLD: return BIS_OLDREFILL;
    case V_BIS_OLD_NOQ: return BIS_OLDREFILL | BIS_NOQUIESCE;
    case V_BIS_NOQ: return BIS_NOQUIESCE;
    case V_BIS_NOEND: return BIS_NOEND;
    case V_BIS_SPIN: return BIS_SPIN;
    case V_BIS_ALL: return BIS_NOQUIESCE | BIS_NOEND | BIS_SPIN;
    case V_BIS_NOSTART: return BIS_NOSTART | BIS_SPIN;
    case V_BIS_WARPROT: return BIS_NOSTART | BIS_SPIN | BIS_WARPROT;
    default: return 0;
    }
}
// One instantiation per bits value used above.
static void launch_bis(cudaLaunchConfig_t *cfg, int bits, const nvr_team &t, const float *src,
                       float *dst, unsigned long long count, unsigned long long slot,
                       unsigned rot, unsigned *rotb) {
    switch (bits) {
#define BIS_CASE(b)                                                                            \
    case b: CK(cudaLaunchKernelEx(cfg, bis_all_reduce<b>, t, src, dst, count, 1.0, slot, rot, rotb)); break;
        BIS_CASE(0)
        BIS_CASE(BIS_OLDREFILL)
        BIS_CASE(BIS_OLDREFILL | BIS_NOQUIESCE)
        BIS_CASE(BIS_NOQUIESCE)
        BIS_CASE(BIS_NOEND)
        BIS_CASE(BIS_SPIN)
        BIS_CASE(BIS_NOQUIESCE | BIS_NOEND | BIS_SPIN)
        BIS_CASE(BIS_NOSTART | BIS_SPIN)
        BIS_CASE(BIS_NOSTART | BIS_SPIN | BIS_WARPROT)
#undef BIS_CASE
    default: fprintf(stderr, "no bis kernel for %d\n", bits); exit(1);
    }
}

struct Gpu {
    char *chan;
    float *src, *dst;
    int *err;
    unsigned *rotb; // BIS_WARPROT's per-block buffer indices, 128 bytes apart
    unsigned *abort_word, *status; // host-mapped
    cudaStream_t s;
};

// The crate's launch rule (collective/algo/lamport.rs, `shape`) on 132 SMs.
static void crate_shape(size_t x, unsigned *grid, unsigned *block) {
    const size_t g = std::min<size_t>(std::max<size_t>((x + 2047) / 2048, 1), 128);
    const size_t vpb = ((x + 15) / 16 + g - 1) / g;
    *grid = (unsigned)g;
    *block = (unsigned)std::min<size_t>(std::max<size_t>((vpb + 31) / 32 * 32, 32), 512) + 32;
}

// A fresh channel on both GPUs: zeroed, the Lamport buffers filled with the sentinel.
static void reset(Gpu *g) {
    for (int i = 0; i < 2; ++i) {
        CK(cudaSetDevice(i));
        CK(cudaDeviceSynchronize());
        const size_t lam = nvr_chan_bytes(LL_BYTES);
        CK(cudaMemset(g[i].chan, 0, lam + AREA));
        CU(cuMemsetD32((CUdeviceptr)(g[i].chan + lam + NVR_LAM_HEADER), NVR_LAM_SENTINEL,
                       3 * SLOT / 4));
        CK(cudaMemset(g[i].dst, 0, SLOT));
        CK(cudaMemset(g[i].err, 0, sizeof(int)));
        CK(cudaMemset(g[i].rotb, 0, 32 * NVR_LAM_MAX_GRID * sizeof(unsigned)));
        memset(g[i].status, 0, 32 * sizeof(unsigned));
        CK(cudaDeviceSynchronize());
    }
}

static void launch(Gpu *g, int i, Variant v, size_t x, unsigned call, unsigned *grid_out,
                   unsigned *block_out) {
    Gpu &me = g[i], &peer = g[1 - i];
    const size_t vectors = (x + 15) / 16;
    unsigned grid, block;
    crate_shape(x, &grid, &block);
    if (v == PLAIN) block -= 32;
    if (v == PLAIN_512) {
        block = 512;
        grid = (unsigned)std::min<size_t>((vectors + 511) / 512, 132);
    }
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
    if (v >= PLAIN) {
        char *area = me.chan + nvr_chan_bytes(LL_BYTES),
             *peer_area = peer.chan + nvr_chan_bytes(LL_BYTES);
        if (v == PLAIN_CTL)
            CK(cudaLaunchKernelEx(&cfg, plain_all_reduce<true>, (const uint4 *)me.src,
                                  (uint4 *)me.dst, area, peer_area, call % 3, vectors, me.err));
        else
            CK(cudaLaunchKernelEx(&cfg, plain_all_reduce<false>, (const uint4 *)me.src,
                                  (uint4 *)me.dst, area, peer_area, call % 3, vectors, me.err));
        return;
    }
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
    t.lam_bytes = AREA;
    if (v >= V_BIS)
        launch_bis(&cfg, bis_bits(v), t, (const float *)me.src, me.dst,
                   (unsigned long long)(x / 4), (unsigned long long)SLOT, call % 3, me.rotb);
    else
        CK(cudaLaunchKernelEx(&cfg, nvr_lamport_all_reduce, t, (const float *)me.src, me.dst,
                              (unsigned long long)(x / 4), 1.0, (unsigned long long)SLOT));
}

int main(int argc, char **argv) {
    const cudaDeviceProp prop = two_gpus();
    const int iters = argc > 1 ? std::max(3, atoi(argv[1]) / 3 * 3) : 300;
    const std::vector<bool> on = chosen(argc > 2 ? argv[2] : "", NAMES, VARIANTS);
    printf("probe: lamport, %s x2, %d calls a graph\n", prop.name, iters);
    Gpu g[2];
    for (int i = 0; i < 2; ++i) {
        CK(cudaSetDevice(i));
        CK(cudaDeviceEnablePeerAccess(1 - i, 0));
        CK(cudaMalloc(&g[i].chan, nvr_chan_bytes(LL_BYTES) + AREA));
        CK(cudaMalloc(&g[i].src, SLOT));
        CK(cudaMalloc(&g[i].dst, SLOT));
        CK(cudaMalloc(&g[i].err, sizeof(int)));
        CK(cudaMalloc(&g[i].rotb, 32 * NVR_LAM_MAX_GRID * sizeof(unsigned)));
        CK(cudaHostAlloc(&g[i].abort_word, sizeof(unsigned), cudaHostAllocMapped));
        CK(cudaHostAlloc(&g[i].status, 32 * sizeof(unsigned), cudaHostAllocMapped));
        *g[i].abort_word = 0;
        CK(cudaStreamCreateWithFlags(&g[i].s, cudaStreamNonBlocking));
        std::vector<float> h(SLOT / 4);
        for (size_t k = 0; k < h.size(); ++k) h[k] = (float)((int)(k % 251) - 100 + 7 * i);
        CK(cudaMemcpy(g[i].src, h.data(), SLOT, cudaMemcpyHostToDevice));
    }
    std::vector<size_t> sizes = {64 << 10, 256 << 10, 512 << 10, 768 << 10, 1 << 20, 1536 << 10, 2 << 20};
    if (argc > 3) { // SIZES: a comma-separated list of bytes, each a multiple of 4 up to SLOT
        sizes.clear();
        for (const char *p = argv[3]; *p;) {
            char *end;
            const size_t x = strtoull(p, &end, 10);
            if (end == p || x == 0 || x % 4 != 0 || x > SLOT) {
                fprintf(stderr, "bad size list '%s'\n", argv[3]);
                return 1;
            }
            sizes.push_back(x);
            p = *end == ',' ? end + 1 : end;
        }
    }
    int wrong = 0, points = 0;
    for (size_t x : sizes) {
        for (int vi = 0; vi < VARIANTS; ++vi) {
            if (!on[vi]) continue;
            const Variant v = (Variant)vi;
            reset(g);
            unsigned grid = 0, block = 0;
            const cudaStream_t streams[2] = {g[0].s, g[1].s};
            const double us = graph_us_a_call(streams, iters, [&](int i, int c) {
                launch(g, i, v, x, (unsigned)c, &grid, &block);
            });
            bool ok = true;
            for (int i = 0; i < 2; ++i) {
                CK(cudaSetDevice(i));
                std::vector<float> out(x / 4);
                CK(cudaMemcpy(out.data(), g[i].dst, x, cudaMemcpyDeviceToHost));
                int err = 0;
                CK(cudaMemcpy(&err, g[i].err, sizeof err, cudaMemcpyDeviceToHost));
                if (err != 0 || g[i].status[0] != 0) ok = false;
                for (size_t k = 0; k < out.size() && ok; ++k)
                    if (out[k] != (float)(2 * ((int)(k % 251) - 100) + 7)) ok = false;
            }
            wrong += !ok;
            ++points;
            printf("%-13s x=%8zu grid %3u block %3u: %7.2f us (%6.1f GB/s a direction), %s\n",
                   NAMES[v], x, grid, block, us, x / us / 1e3, ok ? "ok" : "WRONG");
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
