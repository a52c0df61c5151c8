// Probe: two-shot reductions between the two GPUs of one process, f32 sum: SM loads (this
// crate's direct kernels), SM stores only (pushes), and copy engines.
//
// Issue 31's 128 MiB targets (all-reduce and reduce-scatter at least 360 GB/s bus bandwidth,
// the rooted reduce at least NCCL's 353) against this crate's SM two-shot (336 / 322 / 295 on
// 2 x H200, docs/performance.md). A copy engine moves 388-395 GB/s a direction where SM stores
// reach 361-368 (../shared/anchors.md), so the question is whether a pipeline of copy-engine
// pulls, a local SM reduction and copy-engine pushes, chunk by chunk, keeps both directions of
// the link busy enough to beat that. On 2 x H100 (2026-11-27) they did not (321 GB/s at best
// against the SM two-shot's 330 at 128 MiB: every chunk's cross-stream event costs about 15 us),
// so the push variants ask the other question: the SM two-shot loads half of what crosses each
// direction; do SM stores alone (each GPU stores the peer's share of its input straight into the
// peer's output, which is free until the sum lands there, then stores the sum) get closer to the
// store ceiling? One process, peer access, plain CUDA runtime; no NVSHMEM.
//
//   nvcc -O3 -std=c++17 -arch=sm_90 tools/probes/two_shot.cu -o /tmp/two_shot
//   /tmp/two_shot [ITERS [VARIANTS]]   (default 20 timed calls a point, after 2 warm-up calls;
//                                       VARIANTS a comma-separated list of names, default all)
//
// Variants, for GPU i of 2 (its half H_i of the buffer is the block it reduces):
//   sm-two-shot  one kernel a GPU: load H_i from both GPUs, store the sum to both (the plain
//                SM two-shot, for comparison in the same run);
//   ce-all-reduce   per chunk of H_i: pull the peer's chunk into scratch (copy engine), add
//                it to the own chunk into dst (SM), push the sum into the peer's dst (copy
//                engine); pulls, sums and pushes of different chunks overlap;
//   ce-reduce-scatter  the same without the push (dst is H_i's sum, N/2 bytes);
//   ce-reduce    GPU 0 (the root) pulls the whole of GPU 1's buffer chunk by chunk and adds;
//                GPU 1 does nothing but take part in the start and end.
//   sm-reduce-scatter, sm-reduce  the SM loads of this crate's direct kernels: H_i of the peer's
//                input loaded and added to the own into dst; the root loads all of GPU 1's.
//   push-all-reduce  one kernel a GPU, block b of G owning part b of each half, in `chunks`
//                pieces: store the peer's half of the own input into the peer's dst (out of
//                place, that region of the peer's output is free until its sum lands there),
//                raise the peer's flag for the piece; then per piece wait for the own flag, add
//                the own input to what the peer stored in dst, store the sum to both dsts.
//                Every byte that crosses the link is a store.
//   push-reduce-scatter  the same into the peer's dst (its block), then a local add.
//   push-reduce  GPU 1 stores its whole input into the root's dst piece by piece, flagged; the
//                root adds its own input in place as the pieces arrive.
//   flag-reduce-scatter  the copy engine pushes the peer's half of the own input into the
//                peer's scratch chunk by chunk, each chunk followed by a flag in the peer's
//                memory (cuStreamWriteValue32, which fences the copy before it); one kernel a
//                GPU, started at once beside it, waits for each chunk's flag and adds it to
//                the own half into dst. No cross-stream event but the start's and the end's.
//   flag-all-reduce  the same, the kernel also storing each sum into the peer's dst (SM
//                stores), so each direction carries one half by copy engine and one by SM.
// For the push variants `chunks` is the pieces a block's part is cut into (flags a block).
// Each call starts when both GPUs have finished the previous one (cross-device event waits:
// a barrier) and ends when both have finished this one, as a library call would.
//
// Output: one line a point, `VARIANT SIZE chunks C: T us, busbw B GB/s, ok|WRONG`, with
// nccl-tests' bus bandwidth for 2 ranks (all-reduce: size / time; reduce-scatter: size / time
// / 2, size being the whole input; reduce: size / time). Inputs are small integers, so every
// sum is exact and each point's result is checked element by element once before timing.
#include "probe.cuh"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

__global__ void add_kernel(float4 *dst, const float4 *a, const float4 *b, size_t n) {
    for (size_t j = blockIdx.x * (size_t)blockDim.x + threadIdx.x; j < n;
         j += (size_t)gridDim.x * blockDim.x) {
        const float4 x = a[j], y = b[j];
        dst[j] = make_float4(x.x + y.x, x.y + y.y, x.z + y.z, x.w + y.w);
    }
}

// The SM two-shot: this GPU's half from both inputs, the sum stored into both outputs.
__global__ void two_shot_kernel(float4 *d_own, float4 *d_peer, const float4 *a_own,
                                const float4 *a_peer, size_t n) {
    for (size_t j = blockIdx.x * (size_t)blockDim.x + threadIdx.x; j < n;
         j += (size_t)gridDim.x * blockDim.x) {
        const float4 x = a_own[j], y = a_peer[j];
        const float4 s = make_float4(x.x + y.x, x.y + y.y, x.z + y.z, x.w + y.w);
        d_own[j] = s;
        d_peer[j] = s;
    }
}

static int g_sms = 132;

// PROBE_ALLOC=vmm: the buffers from the driver's virtual memory calls, as NVSHMEM builds its
// symmetric heap (cuMemCreate, cuMemAddressReserve, cuMemMap, then read-write access for both
// GPUs), instead of cudaMalloc and peer access: whether the 32-64 MiB one-way moves that are
// slow on NVSHMEM's heap and not here (tools/probes/README.md) are slow on such memory.
// PROBE_GRANULARITY (bytes, default the driver's recommended) rounds each allocation up, as
// NVSHMEM_CUMEM_GRANULARITY does for the heap's chunks.
static bool g_vmm = false;

static void *alloc(int dev, size_t bytes) { return probe_alloc(dev, bytes, g_vmm); }

static void add(cudaStream_t s, float *dst, const float *a, const float *b, size_t floats) {
    const size_t n = floats / 4;
    const unsigned grid = (unsigned)std::min<size_t>((n + 511) / 512, (size_t)2 * g_sms);
    add_kernel<<<grid, 512, 0, s>>>((float4 *)dst, (const float4 *)a, (const float4 *)b, n);
    CK(cudaGetLastError());
}

// The SM loads of the rooted reduce and reduce-scatter: dst = own + peer's, n vectors.
__global__ void pull_add_kernel(float4 *dst, const float4 *own, const float4 *peer, size_t n) {
    for (size_t j = blockIdx.x * (size_t)blockDim.x + threadIdx.x; j < n;
         j += (size_t)gridDim.x * blockDim.x) {
        const float4 x = own[j], y = peer[j];
        dst[j] = make_float4(x.x + y.x, x.y + y.y, x.z + y.z, x.w + y.w);
    }
}

// Piece k of block b's part of a range of n vectors cut into G parts of `pieces` pieces.
struct Piece {
    size_t lo, hi;
};
__device__ __forceinline__ Piece piece(size_t n, int pieces, int k) {
    const size_t part = (n + gridDim.x - 1) / gridDim.x, at = blockIdx.x * part;
    const size_t end = min(n, at + part), step = (part + pieces - 1) / pieces;
    const size_t lo = min(end, at + k * step);
    return {lo, min(end, lo + step)};
}

__device__ __forceinline__ void copy_piece(float4 *to, const float4 *from, Piece p) {
    for (size_t j = p.lo + threadIdx.x; j < p.hi; j += blockDim.x) to[j] = from[j];
}

// Raises flag (b, k) on the peer once every thread of the block has stored its part.
__device__ __forceinline__ void raise(unsigned *peer_flags, int pieces, int k, unsigned epoch) {
    __syncthreads();
    if (threadIdx.x == 0) {
        __threadfence_system();
        st_release(peer_flags + blockIdx.x * pieces + k, epoch);
    }
}

// Waits until `flag` holds this epoch; a bound ends it (and says so) rather than hang the probe.
__device__ __forceinline__ void await_flag(const unsigned *flag, unsigned epoch, int *err) {
    if (threadIdx.x == 0) {
        long spins = 0;
        while (ld_acquire(flag) != epoch)
            if (++spins > (1L << 28)) {
                atomicExch(err, 1);
                break;
            }
    }
    __syncthreads();
}

// Waits until the peer raised flag (b, k) for this epoch.
__device__ __forceinline__ void await(const unsigned *flags, int pieces, int k, unsigned epoch,
                                      int *err) {
    await_flag(flags + blockIdx.x * pieces + k, epoch, err);
}

// push-all-reduce and push-reduce-scatter (both = 1: the sum also goes to the peer's dst).
// Vectors of the own half start at mine, of the peer's at theirs; in the peer's dst the
// pushed input lands at `into` + the peer half's offset (all-reduce: the same as in the own
// buffer; reduce-scatter: 0, the peer's dst is one block).
__global__ void push_two_shot_kernel(float4 *dst, float4 *peer_dst, const float4 *src,
                                     size_t half, size_t mine, size_t theirs, size_t mine_dst,
                                     size_t theirs_dst, int both, unsigned *flags,
                                     unsigned *peer_flags, unsigned epoch, int pieces, int *err) {
    for (int k = 0; k < pieces; ++k) {
        const Piece p = piece(half, pieces, k);
        copy_piece(peer_dst + theirs_dst, src + theirs, p);
        raise(peer_flags, pieces, k, epoch);
    }
    for (int k = 0; k < pieces; ++k) {
        await(flags, pieces, k, epoch, err);
        const Piece p = piece(half, pieces, k);
        for (size_t j = p.lo + threadIdx.x; j < p.hi; j += blockDim.x) {
            const float4 x = src[mine + j], y = dst[mine_dst + j];
            const float4 s = make_float4(x.x + y.x, x.y + y.y, x.z + y.z, x.w + y.w);
            dst[mine_dst + j] = s;
            if (both) peer_dst[mine_dst + j] = s;
        }
    }
}

// push-reduce: the non-root stores its input into the root's dst; the root adds in place.
__global__ void push_reduce_kernel(float4 *dst, float4 *peer_dst, const float4 *src, size_t n,
                                   int root, unsigned *flags, unsigned *peer_flags,
                                   unsigned epoch, int pieces, int *err) {
    for (int k = 0; k < pieces; ++k) {
        const Piece p = piece(n, pieces, k);
        if (!root) {
            copy_piece(peer_dst, src, p);
            raise(peer_flags, pieces, k, epoch);
            continue;
        }
        await(flags, pieces, k, epoch, err);
        for (size_t j = p.lo + threadIdx.x; j < p.hi; j += blockDim.x) {
            const float4 x = src[j], y = dst[j];
            dst[j] = make_float4(x.x + y.x, x.y + y.y, x.z + y.z, x.w + y.w);
        }
    }
}

// flag-reduce-scatter and flag-all-reduce: chunk k of the own half (n vectors, `chunks` equal
// chunks) is summed once the peer's copy engine has put its part into scratch and raised
// flags[k]; the sum goes to dst, and with peer_dst also there.
__global__ void flag_sum_kernel(float4 *dst, float4 *peer_dst, const float4 *own,
                                const float4 *scratch, size_t n, int chunks,
                                const unsigned *flags, unsigned epoch, int *err) {
    const size_t chunk = n / chunks;
    for (int k = 0; k < chunks; ++k) {
        await_flag(flags + k, epoch, err);
        for (size_t j = k * chunk + blockIdx.x * (size_t)blockDim.x + threadIdx.x;
             j < (k + 1) * chunk; j += (size_t)gridDim.x * blockDim.x) {
            const float4 x = own[j], y = scratch[j];
            const float4 s = make_float4(x.x + y.x, x.y + y.y, x.z + y.z, x.w + y.w);
            dst[j] = s;
            if (peer_dst) peer_dst[j] = s;
        }
    }
}

static const size_t FLAG_AT = 1000 * 64; // the flag variants' flags, past the push variants'

// The loop shapes of this crate's direct kernels (direct.cu: 512 threads, at most 128 blocks,
// each thread loading U vectors before it stores them) against others, for the one-way moves
// that run slowly there at 32-64 MiB (2 x H200, 2026-11-27: a broadcast, gather or 2-PE
// rooted reduce of 32 MiB took about 195 us, of 16 MiB 54). A tile is U x the grid's threads
// vectors; strided (BLOCKED false, direct.cu's): vector u of a thread is u x the grid's
// threads away from its first; blocked: each block takes U x 512 consecutive vectors.
// dst = a + b when b is given (the 2-PE reduce's root: a its own input, b the peer's), else a.
template <int U, bool BLOCKED>
__global__ void shape_kernel(float4 *dst, const float4 *a, const float4 *b, size_t n) {
    const size_t T = blockDim.x, G = gridDim.x * T;
    for (size_t t0 = 0; t0 < n; t0 += U * G) {
        float4 x[U], y[U];
#pragma unroll
        for (int u = 0; u < U; ++u) {
            const size_t i = BLOCKED ? t0 + blockIdx.x * U * T + u * T + threadIdx.x
                                     : t0 + u * G + blockIdx.x * T + threadIdx.x;
            if (i < n) {
                x[u] = a[i];
                if (b) y[u] = b[i];
            }
        }
#pragma unroll
        for (int u = 0; u < U; ++u) {
            const size_t i = BLOCKED ? t0 + blockIdx.x * U * T + u * T + threadIdx.x
                                     : t0 + u * G + blockIdx.x * T + threadIdx.x;
            if (i < n)
                dst[i] = b ? make_float4(x[u].x + y[u].x, x[u].y + y[u].y, x[u].z + y[u].z,
                                         x[u].w + y[u].w)
                           : x[u];
        }
    }
}

enum Variant {
    SM_TWO_SHOT,
    CE_ALL_REDUCE,
    CE_REDUCE_SCATTER,
    CE_REDUCE,
    SM_REDUCE_SCATTER,
    SM_REDUCE,
    PUSH_ALL_REDUCE,
    PUSH_REDUCE_SCATTER,
    PUSH_REDUCE,
    FLAG_REDUCE_SCATTER,
    FLAG_ALL_REDUCE,
    SHAPE_REDUCE, // the 2-PE rooted reduce's root loading the peer's input (shape below)
    SHAPE_PUSH,   // GPU 0 storing its input into GPU 1's dst (a broadcast)
    SHAPE_PULL,   // GPU 1 loading GPU 0's input into its dst
    VARIANTS
};
static const char *NAMES[] = {"sm-two-shot",    "ce-all-reduce",      "ce-reduce-scatter",
                              "ce-reduce",      "sm-reduce-scatter",  "sm-reduce",
                              "push-all-reduce", "push-reduce-scatter", "push-reduce",
                              "flag-reduce-scatter", "flag-all-reduce",
                              "shape-reduce",    "shape-push",          "shape-pull"};
static bool is_push(Variant v) { return v >= PUSH_ALL_REDUCE && v <= PUSH_REDUCE; }
static bool flagged(Variant v) { return v == FLAG_REDUCE_SCATTER || v == FLAG_ALL_REDUCE; }
static bool scatters(Variant v) {
    return v == CE_REDUCE_SCATTER || v == SM_REDUCE_SCATTER || v == PUSH_REDUCE_SCATTER ||
           v == FLAG_REDUCE_SCATTER;
}
static bool rooted(Variant v) {
    return v == CE_REDUCE || v == SM_REDUCE || v == PUSH_REDUCE || v == SHAPE_REDUCE;
}
static bool copies(Variant v) { return v == SHAPE_PUSH || v == SHAPE_PULL; }
static bool shaped(Variant v) { return v >= SHAPE_REDUCE; }
// The shape variants' loop: `chunks` 0..7 = unroll (4, 8) x (strided, blocked) x grid (128,
// 2 per SM).
static const char *shape_name(int c) {
    static char buf[64];
    snprintf(buf, sizeof buf, "U%d %s grid %s", c & 1 ? 8 : 4, c & 2 ? "blocked" : "strided",
             c & 4 ? "2/SM" : "128");
    return buf;
}
static int g_grid = 128; // the push kernels' blocks: this crate's direct kernels' most

struct Gpu {
    float *src, *dst, *scratch;
    unsigned *flags; // the push variants': G x MAX_CHUNKS, raised by the peer
    int *err;        // set by a wait that reached its bound
    cudaStream_t main, pull, sum, push;
    cudaEvent_t start, done, t0, t1;
    std::vector<cudaEvent_t> pulled, summed, pushed;
};

static const int MAX_CHUNKS = 64;

// Queues one call of `v` on both GPUs: N floats a GPU, in `chunks` chunks of each GPU's work.
static unsigned g_epoch = 0; // the push variants' flag value for this call

static void call(Gpu *g, Variant v, size_t N, int chunks) {
    ++g_epoch;
    // The barrier at the start: each GPU waits for the other's end of the previous call.
    for (int i = 0; i < 2; ++i) {
        CK(cudaSetDevice(i));
        CK(cudaStreamWaitEvent(g[i].main, g[1 - i].done, 0));
        CK(cudaEventRecord(g[i].start, g[i].main));
    }
    for (int i = 0; i < 2; ++i) {
        CK(cudaSetDevice(i));
        Gpu &me = g[i], &peer = g[1 - i];
        const size_t half = N / 2, off = i * half;
        if (v == SM_TWO_SHOT) {
            const size_t n = half / 4;
            const unsigned grid = (unsigned)std::min<size_t>((n + 511) / 512, (size_t)2 * g_sms);
            two_shot_kernel<<<grid, 512, 0, me.main>>>((float4 *)(me.dst + off),
                                                       (float4 *)(peer.dst + off),
                                                       (const float4 *)(me.src + off),
                                                       (const float4 *)(peer.src + off), n);
            CK(cudaGetLastError());
            continue;
        }
        if (v == SM_REDUCE_SCATTER || (v == SM_REDUCE && i == 0)) {
            const size_t n = (v == SM_REDUCE ? N : half) / 4, at = v == SM_REDUCE ? 0 : off;
            const unsigned grid = (unsigned)std::min<size_t>((n + 511) / 512, (size_t)2 * g_sms);
            pull_add_kernel<<<grid, 512, 0, me.main>>>((float4 *)me.dst, (const float4 *)(me.src + at),
                                                       (const float4 *)(peer.src + at), n);
            CK(cudaGetLastError());
            continue;
        }
        if (shaped(v)) {
            // Who works: the root (GPU 0) for the reduce and the push, GPU 1 for the pull.
            if ((v == SHAPE_PULL) != (i == 1)) continue;
            const size_t n = N / 4;
            float4 *to = (float4 *)(v == SHAPE_PUSH ? peer.dst : me.dst);
            const float4 *a = (const float4 *)(v == SHAPE_PULL ? peer.src : me.src);
            const float4 *b = v == SHAPE_REDUCE ? (const float4 *)peer.src : nullptr;
            const unsigned grid = chunks & 4 ? 2 * g_sms : 128;
            switch (chunks & 3) {
            case 0: shape_kernel<4, false><<<grid, 512, 0, me.main>>>(to, a, b, n); break;
            case 1: shape_kernel<8, false><<<grid, 512, 0, me.main>>>(to, a, b, n); break;
            case 2: shape_kernel<4, true><<<grid, 512, 0, me.main>>>(to, a, b, n); break;
            default: shape_kernel<8, true><<<grid, 512, 0, me.main>>>(to, a, b, n); break;
            }
            CK(cudaGetLastError());
            continue;
        }
        if (is_push(v)) {
            const size_t h4 = half / 4, mine = i * h4, theirs = (1 - i) * h4;
            const bool rs = v == PUSH_REDUCE_SCATTER;
            if (v == PUSH_REDUCE)
                push_reduce_kernel<<<g_grid, 512, 0, me.main>>>(
                    (float4 *)me.dst, (float4 *)peer.dst, (const float4 *)me.src, N / 4, i == 0,
                    me.flags, peer.flags, g_epoch, chunks, me.err);
            else
                push_two_shot_kernel<<<g_grid, 512, 0, me.main>>>(
                    (float4 *)me.dst, (float4 *)peer.dst, (const float4 *)me.src, h4, mine,
                    theirs, rs ? 0 : mine, rs ? 0 : theirs, !rs, me.flags, peer.flags, g_epoch,
                    chunks, me.err);
            CK(cudaGetLastError());
            continue;
        }
        if (flagged(v)) {
            const size_t h4 = half / 4, chunk = half / chunks;
            const float *theirs = me.src + (1 - i) * half; // the peer's half of the own input
            CK(cudaStreamWaitEvent(me.pull, me.start, 0));
            for (int k = 0; k < chunks; ++k) {
                CK(cudaMemcpyAsync(peer.scratch + k * chunk, theirs + k * chunk, chunk * 4,
                                   cudaMemcpyDefault, me.pull));
                CU(cuStreamWriteValue32(me.pull, (CUdeviceptr)(peer.flags + FLAG_AT + k),
                                        g_epoch, 0));
            }
            const bool all = v == FLAG_ALL_REDUCE;
            float *out = all ? me.dst + off : me.dst;
            flag_sum_kernel<<<2 * g_sms, 512, 0, me.main>>>(
                (float4 *)out, all ? (float4 *)(peer.dst + off) : nullptr,
                (const float4 *)(me.src + off), (const float4 *)me.scratch, h4, chunks,
                me.flags + FLAG_AT, g_epoch, me.err);
            CK(cudaGetLastError());
            CK(cudaEventRecord(me.pushed[0], me.pull));
            CK(cudaStreamWaitEvent(me.main, me.pushed[0], 0));
            continue;
        }
        if (v == SM_REDUCE || (v == CE_REDUCE && i == 1)) continue; // the root does it all
        const size_t work = v == CE_REDUCE ? N : half, base = v == CE_REDUCE ? 0 : off;
        const size_t chunk = work / chunks;
        CK(cudaStreamWaitEvent(me.pull, me.start, 0));
        for (int k = 0; k < chunks; ++k) {
            const size_t at = base + k * chunk;
            float *scr = me.scratch + (at - base);
            // The peer's chunk, pulled over the link by this GPU's copy engine.
            CK(cudaMemcpyAsync(scr, peer.src + at, chunk * 4, cudaMemcpyDefault, me.pull));
            CK(cudaEventRecord(me.pulled[k], me.pull));
            CK(cudaStreamWaitEvent(me.sum, me.pulled[k], 0));
            float *out = v == CE_REDUCE_SCATTER ? me.dst + (at - base) : me.dst + at;
            add(me.sum, out, me.src + at, scr, chunk);
            CK(cudaEventRecord(me.summed[k], me.sum));
            if (v == CE_ALL_REDUCE) {
                CK(cudaStreamWaitEvent(me.push, me.summed[k], 0));
                CK(cudaMemcpyAsync(peer.dst + at, out, chunk * 4, cudaMemcpyDefault, me.push));
            }
        }
        CK(cudaEventRecord(me.summed[MAX_CHUNKS], me.sum));
        CK(cudaStreamWaitEvent(me.main, me.summed[MAX_CHUNKS], 0));
        if (v == CE_ALL_REDUCE) {
            CK(cudaEventRecord(me.pushed[0], me.push));
            CK(cudaStreamWaitEvent(me.main, me.pushed[0], 0));
        }
    }
    // The end: both GPUs' work (pushes into this GPU included: the next call's start waits
    // for the peer's `done`, and the timing below for both).
    for (int i = 0; i < 2; ++i) {
        CK(cudaSetDevice(i));
        CK(cudaEventRecord(g[i].done, g[i].main));
    }
}

static float in(int gpu, size_t j) { return (float)((j * 7 + gpu * 3) % 64); }

// Whether the last call left the variant's result on every GPU that has one.
static bool check(Gpu *g, Variant v, size_t N) {
    std::vector<float> host(N);
    for (int i = 0; i < 2; ++i) { // both first: each GPU's pushes write the other's output
        CK(cudaSetDevice(i));
        CK(cudaDeviceSynchronize());
    }
    for (int i = 0; i < 2; ++i) {
        if ((rooted(v) && i == 1) || (copies(v) && i == 0)) continue;
        CK(cudaSetDevice(i));
        int err = 0;
        CK(cudaMemcpy(&err, g[i].err, sizeof err, cudaMemcpyDeviceToHost));
        if (err) {
            fprintf(stderr, "%s: GPU %d: a flag wait reached its bound\n", NAMES[v], i);
            return false;
        }
        const size_t len = scatters(v) ? N / 2 : N;
        const size_t from = scatters(v) ? i * (N / 2) : 0;
        CK(cudaMemcpy(host.data(), g[i].dst, len * 4, cudaMemcpyDeviceToHost));
        for (size_t j = 0; j < len; ++j) {
            const float want = copies(v) ? in(0, j) : in(0, from + j) + in(1, from + j);
            if (host[j] != want) {
                fprintf(stderr, "%s: GPU %d element %zu is %g, want %g\n", NAMES[v], i, j, host[j],
                        want);
                return false;
            }
        }
    }
    return true;
}

int main(int argc, char **argv) {
    const int iters = argc > 1 ? atoi(argv[1]) : 20;
    const std::string only = argc > 2 && argv[2][0] ? std::string(",") + argv[2] + "," : "";
    if (const char *grid = getenv("PROBE_GRID")) g_grid = std::min(1024, atoi(grid));
    g_vmm = getenv("PROBE_ALLOC") && strcmp(getenv("PROBE_ALLOC"), "vmm") == 0;
    const cudaDeviceProp prop = two_gpus();
    g_sms = prop.multiProcessorCount;
    printf("probe: %s x 2, %d SMs, %d copy engines (asyncEngineCount), buffers by %s\n",
           prop.name, g_sms, prop.asyncEngineCount, g_vmm ? "cuMemCreate/cuMemMap" : "cudaMalloc");
    const size_t max_n = (size_t)256 << 20 >> 2; // 256 MiB of f32
    Gpu g[2];
    for (int i = 0; i < 2; ++i) {
        CK(cudaSetDevice(i));
        CK(cudaDeviceEnablePeerAccess(1 - i, 0));
        g[i].src = (float *)alloc(i, max_n * 4);
        g[i].dst = (float *)alloc(i, max_n * 4);
        g[i].scratch = (float *)alloc(i, max_n * 4);
        CK(cudaMalloc(&g[i].flags, 1024 * MAX_CHUNKS * sizeof(unsigned)));
        CK(cudaMemset(g[i].flags, 0, 1024 * MAX_CHUNKS * sizeof(unsigned)));
        CK(cudaMalloc(&g[i].err, sizeof(int)));
        CK(cudaMemset(g[i].err, 0, sizeof(int)));
        std::vector<float> h(max_n);
        for (size_t j = 0; j < max_n; ++j) h[j] = in(i, j);
        CK(cudaMemcpy(g[i].src, h.data(), max_n * 4, cudaMemcpyHostToDevice));
        for (cudaStream_t *s : {&g[i].main, &g[i].pull, &g[i].sum, &g[i].push})
            CK(cudaStreamCreateWithFlags(s, cudaStreamNonBlocking));
        for (cudaEvent_t *e : {&g[i].start, &g[i].done})
            CK(cudaEventCreateWithFlags(e, cudaEventDisableTiming));
        CK(cudaEventCreate(&g[i].t0));
        CK(cudaEventCreate(&g[i].t1));
        for (auto *list : {&g[i].pulled, &g[i].summed, &g[i].pushed}) {
            list->resize(MAX_CHUNKS + 1);
            for (auto &e : *list) CK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
        }
    }
    for (int i = 0; i < 2; ++i) { // `done` recorded once, so the first call's waits are met
        CK(cudaSetDevice(i));
        CK(cudaEventRecord(g[i].done, g[i].main));
    }
    int wrong = 0;
    for (size_t mib : {16, 32, 64, 128, 256}) {
        const size_t N = mib << 20 >> 2;
        for (int vi = 0; vi < VARIANTS; ++vi) {
            const Variant v = (Variant)vi;
            if (!only.empty() && only.find(std::string(",") + NAMES[v] + ",") == std::string::npos)
                continue;
            // One launch shape: 1; pipelines: their chunks; the loop shapes: all eight.
            const bool single = v == SM_TWO_SHOT || v == SM_REDUCE_SCATTER || v == SM_REDUCE;
            const std::vector<int> points = shaped(v) ? std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7}
                                            : single  ? std::vector<int>{1}
                                                      : std::vector<int>{1, 2, 4, 8, 16, 32};
            for (int chunks : points) {
                for (int i = 0; i < 2; ++i) { // NaN everywhere, so nothing left over passes
                    CK(cudaSetDevice(i));
                    CK(cudaMemset(g[i].dst, 0xff, N * 4));
                    CK(cudaDeviceSynchronize());
                }
                call(g, v, N, chunks);
                call(g, v, N, chunks);
                const bool ok = check(g, v, N);
                wrong += !ok;
                CK(cudaSetDevice(0));
                CK(cudaStreamWaitEvent(g[0].main, g[1].done, 0));
                CK(cudaEventRecord(g[0].t0, g[0].main));
                for (int r = 0; r < iters; ++r) call(g, v, N, chunks);
                CK(cudaSetDevice(0));
                CK(cudaStreamWaitEvent(g[0].main, g[1].done, 0));
                CK(cudaEventRecord(g[0].t1, g[0].main));
                CK(cudaEventSynchronize(g[0].t1));
                float ms = 0;
                CK(cudaEventElapsedTime(&ms, g[0].t0, g[0].t1));
                const double us = 1e3 * ms / iters, bytes = (double)N * 4;
                const double bus = (scatters(v) ? bytes / 2 : bytes) / (us * 1e3);
                char what[64];
                if (shaped(v)) snprintf(what, sizeof what, "%s", shape_name(chunks));
                else snprintf(what, sizeof what, "chunks %2d", chunks);
                printf("probe: %-18s %4zu MiB %s: %9.1f us, busbw %6.1f GB/s, %s\n", NAMES[v],
                       mib, what, us, bus, ok ? "ok" : "WRONG");
                fflush(stdout);
            }
        }
    }
    printf("probe: done, %d wrong\n", wrong);
    return wrong ? 1 : 0;
}
