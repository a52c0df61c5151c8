// Probe: can a copy carry 120 bytes of every 128 over NVLink with its flag in the same line,
// and how fast does it move 64 KiB-2 MiB between two GPUs in a CUDA graph? Issue 31's copies
// miss 0.45 x NCCL past 256 KiB: this crate's LL carries 8 data bytes a 16-byte packet, so a
// 1 MiB broadcast moves 2 MiB over the link, and its direct kernels pay two flag exchanges
// (docs/performance.md, "Where it is slower"). NCCL's LL128 stores each 128-byte line with 8
// lanes of one warp in one instruction, the line's last 8 bytes its flag, and relies on the
// line reaching the peer whole; this probe counts the lines that did not.
//
//   nvcc -O3 -std=c++17 -arch=sm_90 tools/probes/ll128.cu -o /tmp/ll128 -lcuda
//   /tmp/ll128 [CALLS] [VARIANTS]
//
// Two GPUs of one process, peer access, cudaMalloc. VARIANTS (comma-separated, default all):
//   ll       16-byte packets {data lo, epoch, data hi, epoch}: 8 data bytes each
//   ll128    128-byte lines: lane j (0-7) of a group of 8 stores 16 bytes of the line, lane 7's
//            last 8 the epoch; 120 data bytes a line. The receiver loads the line the same way
//            and takes it when lane 7's word holds the epoch (all 4 groups of a warp together)
//   ll128p   ll128 with a receiver that keeps 4 groups of 4 lines a warp in flight (PIPE)
//   direct   the receiver raises "ready" (its buffer is free), the sender waits for it, stores
//            the data straight into the receiver's output, fences (fence.sc.sys) and raises
//            "done"; the receiver waits for that (this crate's direct kernels' two exchanges)
// each one way ("bcast": GPU 0 sends, GPU 1 receives) and both ways ("both": each GPU sends its
// block and receives the peer's, as a 2-PE fcollect). Sizes: the bytes one GPU sends, 64 KiB
// to 2 MiB. Each graph case captures CALLS (default 200) calls a GPU; both GPUs' graphs are
// launched together; the time a call is the slower GPU's, median of 7 replays. Word w of call e
// is f(w) + e: the LL and LL128 receivers check every word they take (a wrong word in a line
// whose flag said call e counts that line as torn), and the direct receiver's output is
// checked after the last replay. Blocks: PROBE_BLOCKS (default: ll and ll128 one per 2 KiB, at
// most 32, as this crate's LL; direct one per 16 KiB, at most 128); 512 threads a block.
// Output: `probe: VARIANT MODE SIZE: X us a call, W wrong words, T torn lines`, then
// `probe: done, N wrong` (N counts wrong words of every case).
#include "probe.cuh"

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

typedef unsigned long long u64;

#define MAX_BLOCKS 128
#define THREADS 512
#define LINE_WORDS 15 // data words of a 128-byte line

// The payload word w of every call before its epoch is added: any fixed function of w.
__host__ __device__ __forceinline__ u64 payload(u64 w) {
    u64 z = w + 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

// What one GPU holds: what its peer stores into (buf, ack, ready, done) and its own.
struct Side {
    unsigned *ctr;   // [MAX_BLOCKS] this GPU's epoch a block (local)
    char *buf;       // LL/LL128 receive buffer, two parities of `cap` bytes (the peer stores)
    unsigned *ack;   // [MAX_BLOCKS] the last call whose data block b of the peer took in full
    unsigned *ready; // [MAX_BLOCKS] direct: the peer's output is free for call e
    unsigned *done;  // [MAX_BLOCKS] direct: the peer's data of call e is stored here
    const u64 *src;  // the payload, f(w) (local)
    u64 *dst;        // what this GPU received
    unsigned *wrong; // [2] wrong words, torn lines
};

enum Variant { LL, LL128, LL128P, DIRECT };

__device__ __forceinline__ bool reached(unsigned v, unsigned e) { return (int)(v - e) >= 0; }

// This block's epoch for the call, shared by thread 0's read.
__device__ __forceinline__ unsigned block_epoch(const Side &me) {
    __shared__ unsigned e_sh;
    if (threadIdx.x == 0) e_sh = me.ctr[blockIdx.x] + 1;
    __syncthreads();
    return e_sh;
}

__device__ __forceinline__ void block_end(const Side &me, unsigned e) {
    __syncthreads();
    if (threadIdx.x == 0) me.ctr[blockIdx.x] = e;
}

// [lo, hi) of n items for this block.
__device__ __forceinline__ void share(u64 n, u64 &lo, u64 &hi) {
    lo = n * blockIdx.x / gridDim.x;
    hi = n * (blockIdx.x + 1) / gridDim.x;
}

__device__ __forceinline__ void miss(const Side &me, u64 got, u64 want) {
    if (got != want) atomicAdd(&me.wrong[0], 1u);
}

// ---- LL: one u64 a 16-byte packet ----

__device__ void ll_send(const Side &peer, const Side &me, u64 words, u64 cap, unsigned e) {
    u64 lo, hi;
    share(words, lo, hi);
    char *to = peer.buf + (e & 1) * cap;
    for (u64 w = lo + threadIdx.x; w < hi; w += blockDim.x) {
        const u64 d = me.src[w] + e;
        asm volatile("st.volatile.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(to + 16 * w),
                     "r"((unsigned)d), "r"(e), "r"((unsigned)(d >> 32)), "r"(e)
                     : "memory");
    }
}

__device__ void ll_recv(const Side &me, u64 words, u64 cap, unsigned e) {
    u64 lo, hi;
    share(words, lo, hi);
    const char *from = me.buf + (e & 1) * cap;
    // Four packets a thread in flight, then each one polled until it is there.
    for (u64 w0 = lo + threadIdx.x; w0 < hi; w0 += 4 * (u64)blockDim.x) {
        uint4 p[4];
#pragma unroll
        for (int k = 0; k < 4; ++k) {
            const u64 w = w0 + (u64)k * blockDim.x;
            if (w < hi)
                asm volatile("ld.volatile.global.v4.u32 {%0, %1, %2, %3}, [%4];"
                             : "=r"(p[k].x), "=r"(p[k].y), "=r"(p[k].z), "=r"(p[k].w)
                             : "l"(from + 16 * w)
                             : "memory");
        }
#pragma unroll
        for (int k = 0; k < 4; ++k) {
            const u64 w = w0 + (u64)k * blockDim.x;
            if (w >= hi) continue;
            while (p[k].y != e || p[k].w != e)
                asm volatile("ld.volatile.global.v4.u32 {%0, %1, %2, %3}, [%4];"
                             : "=r"(p[k].x), "=r"(p[k].y), "=r"(p[k].z), "=r"(p[k].w)
                             : "l"(from + 16 * w)
                             : "memory");
            const u64 d = ((u64)p[k].z << 32) | p[k].x;
            miss(me, d, payload(w) + e);
            me.dst[w] = d;
        }
    }
}

// ---- LL128: 15 data words and the epoch a 128-byte line ----

// Word k (0-15) of line l: data word l * 15 + k (k < 15), or the flag (k == 15).
__device__ __forceinline__ u64 line_word(const Side &me, u64 words, u64 l, int k, unsigned e) {
    if (k == 15) return e;
    const u64 w = l * LINE_WORDS + k;
    return w < words ? me.src[w] + e : 0;
}

__device__ void ll128_send(const Side &peer, const Side &me, u64 words, u64 cap, unsigned e) {
    const u64 lines = (words + LINE_WORDS - 1) / LINE_WORDS;
    u64 lo, hi;
    share(lines, lo, hi);
    char *to = peer.buf + (e & 1) * cap;
    const int lane = threadIdx.x & 31, j = lane & 7;
    const u64 warps = blockDim.x / 32, warp = threadIdx.x / 32;
    // Every lane of the warp stores in the same instruction: 4 whole lines.
    for (u64 base = lo + 4 * warp; base < hi; base += 4 * warps) {
        const u64 l = base + (lane >> 3);
        if (l >= hi) continue;
        const u64 a = line_word(me, words, l, 2 * j, e), b = line_word(me, words, l, 2 * j + 1, e);
        asm volatile("st.volatile.global.v2.u64 [%0], {%1, %2};" ::"l"(to + 128 * l + 16 * j),
                     "l"(a), "l"(b)
                     : "memory");
    }
}

__device__ void ll128_recv(const Side &me, u64 words, u64 cap, unsigned e) {
    const u64 lines = (words + LINE_WORDS - 1) / LINE_WORDS;
    u64 lo, hi;
    share(lines, lo, hi);
    const char *from = me.buf + (e & 1) * cap;
    const int lane = threadIdx.x & 31, j = lane & 7, group = lane >> 3;
    const u64 warps = blockDim.x / 32, warp = threadIdx.x / 32;
    for (u64 base = lo + 4 * warp; base < hi; base += 4 * warps) {
        const u64 l = base + group;
        const bool active = l < hi;
        u64 a = 0, b = 0;
        bool there;
        do {
            if (active)
                asm volatile("ld.volatile.global.v2.u64 {%0, %1}, [%2];"
                             : "=l"(a), "=l"(b)
                             : "l"(from + 128 * l + 16 * j)
                             : "memory");
            there = !active || j != 7 || b == e;
        } while (!__all_sync(0xffffffffu, there));
        // Every line of the warp has its flag: check each word the line carried.
        bool bad = false;
        if (active) {
            const u64 w = l * LINE_WORDS + 2 * j;
            if (w < words) {
                bad |= a != payload(w) + e;
                me.dst[w] = a;
            }
            if (j < 7 && w + 1 < words) {
                bad |= b != payload(w + 1) + e;
                me.dst[w + 1] = b;
            }
        }
        const unsigned lines_bad = __ballot_sync(0xffffffffu, bad);
        if (bad) atomicAdd(&me.wrong[0], 1u);
        if (active && j == 0 && ((lines_bad >> (8 * group)) & 0xffu) != 0)
            atomicAdd(&me.wrong[1], 1u);
    }
}

// LL128 with PIPE groups of 4 lines a warp in flight: every group's load is issued before any
// is checked, then each group whose flag has not come is loaded again (all 8 lanes of a line
// together, so a line's data always comes from the load that saw its flag), until all have.
// The sender is ll128_send: the line layout is the same.
#define PIPE 4
__device__ void ll128p_recv(const Side &me, u64 words, u64 cap, unsigned e) {
    const u64 lines = (words + LINE_WORDS - 1) / LINE_WORDS;
    u64 lo, hi;
    share(lines, lo, hi);
    const char *from = me.buf + (e & 1) * cap;
    const int lane = threadIdx.x & 31, j = lane & 7, group = lane >> 3, flag_lane = (lane & ~7) | 7;
    const u64 warps = blockDim.x / 32, warp = threadIdx.x / 32;
    for (u64 base = lo + 4 * PIPE * warp; base < hi; base += 4 * PIPE * warps) {
        u64 a[PIPE], b[PIPE];
        bool have[PIPE];
#pragma unroll
        for (int k = 0; k < PIPE; ++k) {
            const u64 l = base + 4 * k + group;
            a[k] = b[k] = 0;
            if (l < hi)
                asm volatile("ld.volatile.global.v2.u64 {%0, %1}, [%2];"
                             : "=l"(a[k]), "=l"(b[k])
                             : "l"(from + 128 * l + 16 * j)
                             : "memory");
        }
        bool all;
        do {
            all = true;
#pragma unroll
            for (int k = 0; k < PIPE; ++k) {
                const u64 l = base + 4 * k + group;
                // The line's flag, as its lane 7 loaded it, for all 8 lanes of the line.
                // Every lane shuffles (a full-mask shuffle must not diverge).
                const bool flag = __shfl_sync(0xffffffffu, b[k] == e, flag_lane);
                have[k] = l >= hi || flag;
                all &= have[k];
            }
            if (__all_sync(0xffffffffu, all)) break;
#pragma unroll
            for (int k = 0; k < PIPE; ++k) {
                const u64 l = base + 4 * k + group;
                if (!have[k])
                    asm volatile("ld.volatile.global.v2.u64 {%0, %1}, [%2];"
                                 : "=l"(a[k]), "=l"(b[k])
                                 : "l"(from + 128 * l + 16 * j)
                                 : "memory");
            }
        } while (true);
#pragma unroll
        for (int k = 0; k < PIPE; ++k) {
            const u64 l = base + 4 * k + group;
            bool bad = false;
            if (l < hi) {
                const u64 w = l * LINE_WORDS + 2 * j;
                if (w < words) {
                    bad |= a[k] != payload(w) + e;
                    me.dst[w] = a[k];
                }
                if (j < 7 && w + 1 < words) {
                    bad |= b[k] != payload(w + 1) + e;
                    me.dst[w + 1] = b[k];
                }
            }
            const unsigned lines_bad = __ballot_sync(0xffffffffu, bad);
            if (bad) atomicAdd(&me.wrong[0], 1u);
            if (l < hi && j == 0 && ((lines_bad >> (8 * group)) & 0xffu) != 0)
                atomicAdd(&me.wrong[1], 1u);
        }
    }
}

// ---- direct: the data into the peer's output, framed by ready and done ----

__device__ void direct_send(const Side &peer, const Side &me, u64 words, unsigned e) {
    const u64 vecs = words / 2; // 16 bytes each; sizes are multiples of 16
    u64 lo, hi;
    share(vecs, lo, hi);
    for (u64 v = lo + threadIdx.x; v < hi; v += blockDim.x) {
        const u64 d0 = me.src[2 * v] + e, d1 = me.src[2 * v + 1] + e;
        asm volatile("st.global.v2.u64 [%0], {%1, %2};" ::"l"(peer.dst + 2 * v), "l"(d0), "l"(d1)
                     : "memory");
    }
}

__global__ void __launch_bounds__(THREADS, 1)
    k_copy(Side me, Side peer, int variant, int send, int recv, u64 words, u64 cap) {
    const unsigned e = block_epoch(me);
    const int b = blockIdx.x;
    if (variant == DIRECT) {
        if (threadIdx.x == 0) {
            if (recv) st_release(&peer.ready[b], e);
            if (send)
                while (!reached(ld_acquire(&me.ready[b]), e)) {
                }
        }
        __syncthreads();
        if (send) direct_send(peer, me, words, e);
        __syncthreads();
        if (threadIdx.x == 0) {
            if (send) {
                asm volatile("fence.sc.sys;" ::: "memory");
                st_release(&peer.done[b], e);
            }
            if (recv)
                while (!reached(ld_acquire(&me.done[b]), e)) {
                }
        }
        block_end(me, e);
        return;
    }
    // LL and LL128: a sender reuses a parity's region once the receiver's block has taken the
    // call two before (its ack), which it has almost always done long before.
    if (send && threadIdx.x == 0)
        while (!reached(ld_acquire(&me.ack[b]), e - 2)) {
        }
    __syncthreads();
    if (send) {
        if (variant == LL) ll_send(peer, me, words, cap, e);
        else ll128_send(peer, me, words, cap, e);
    }
    if (recv) {
        if (variant == LL) ll_recv(me, words, cap, e);
        else if (variant == LL128) ll128_recv(me, words, cap, e);
        else ll128p_recv(me, words, cap, e);
        __syncthreads();
        if (threadIdx.x == 0) st_release(&peer.ack[b], e);
    }
    block_end(me, e);
}

// After a direct case, with its grid: the words of dst that are not those of the last call,
// each block checking the share its namesake sent (whose epoch is this block's: both GPUs run
// every grid alike, so their per-block epochs agree).
__global__ void k_check(Side me, u64 words) {
    const unsigned e = me.ctr[blockIdx.x];
    u64 lo, hi;
    share(words / 2, lo, hi);
    for (u64 v = lo + threadIdx.x; v < hi; v += blockDim.x) {
        miss(me, me.dst[2 * v], payload(2 * v) + e);
        miss(me, me.dst[2 * v + 1], payload(2 * v + 1) + e);
    }
}

__global__ void k_fill(u64 *src, u64 words) {
    for (u64 w = blockIdx.x * (u64)blockDim.x + threadIdx.x; w < words;
         w += (u64)gridDim.x * blockDim.x)
        src[w] = payload(w);
}

struct Gpu {
    cudaStream_t s;
    Side side;
};

static int grid_for(Variant v, u64 bytes) {
    if (const char *g = getenv("PROBE_BLOCKS")) return std::max(1, std::min(MAX_BLOCKS, atoi(g)));
    if (v == DIRECT) return (int)std::max<u64>(1, std::min<u64>(MAX_BLOCKS, bytes / 16384));
    return (int)std::max<u64>(1, std::min<u64>(32, bytes / 2048));
}

// CALLS calls of (variant, both) on the two GPUs captured, replayed 8 times (the first not
// counted); the slower GPU's median time a call, us.
static double graph_case(Gpu *gs, Variant v, bool both, u64 bytes, u64 cap, int calls) {
    const u64 words = bytes / 8;
    const int grid = grid_for(v, bytes);
    cudaGraphExec_t ex[2];
    for (int d = 0; d < 2; ++d) {
        CK(cudaSetDevice(d));
        CK(cudaMemset(gs[d].side.buf, 0, 2 * cap)); // no flag of another case's layout
        // Every call so far taken: a GPU that only sent in the cases before has no acks of
        // its own calls (every per-block epoch is the same on both GPUs).
        CK(cudaMemcpy(gs[d].side.ack, gs[d].side.ctr, MAX_BLOCKS * 4, cudaMemcpyDeviceToDevice));
        CK(cudaDeviceSynchronize());
        const int send = both || d == 0, recv = both || d == 1;
        cudaGraph_t graph;
        CK(cudaStreamBeginCapture(gs[d].s, cudaStreamCaptureModeThreadLocal));
        for (int i = 0; i < calls; ++i)
            k_copy<<<grid, THREADS, 0, gs[d].s>>>(gs[d].side, gs[1 - d].side, (int)v, send, recv,
                                                  words, cap);
        CK(cudaStreamEndCapture(gs[d].s, &graph));
        CK(cudaGraphInstantiate(&ex[d], graph, 0));
        CK(cudaGraphDestroy(graph));
    }
    std::vector<double> t;
    for (int r = 0; r < 8; ++r) {
        cudaEvent_t e0[2], e1[2];
        for (int d = 0; d < 2; ++d) {
            CK(cudaSetDevice(d));
            CK(cudaEventCreate(&e0[d]));
            CK(cudaEventCreate(&e1[d]));
            CK(cudaEventRecord(e0[d], gs[d].s));
            CK(cudaGraphLaunch(ex[d], gs[d].s));
            CK(cudaEventRecord(e1[d], gs[d].s));
        }
        double worst = 0;
        for (int d = 0; d < 2; ++d) {
            CK(cudaSetDevice(d));
            CK(cudaStreamSynchronize(gs[d].s));
            float ms = 0;
            CK(cudaEventElapsedTime(&ms, e0[d], e1[d]));
            worst = std::max(worst, ms * 1e3 / calls);
            CK(cudaEventDestroy(e0[d]));
            CK(cudaEventDestroy(e1[d]));
        }
        if (r > 0) t.push_back(worst);
    }
    for (int d = 0; d < 2; ++d) {
        CK(cudaSetDevice(d));
        CK(cudaGraphExecDestroy(ex[d]));
        if (v == DIRECT && (both || d == 1)) {
            k_check<<<grid, THREADS, 0, gs[d].s>>>(gs[d].side, words);
            CK(cudaStreamSynchronize(gs[d].s));
        }
    }
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
}

int main(int argc, char **argv) {
    const int calls = argc > 1 ? atoi(argv[1]) : 200;
    const std::string want = argc > 2 ? argv[2] : "";
    two_gpus();
    const u64 max_bytes = 2 << 20;
    // LL's packets take twice the payload; LL128's lines 128/120 of it.
    const u64 cap = 2 * max_bytes + 4096;
    Gpu gs[2];
    for (int d = 0; d < 2; ++d) {
        CK(cudaSetDevice(d));
        CK(cudaDeviceEnablePeerAccess(1 - d, 0));
        CK(cudaStreamCreateWithFlags(&gs[d].s, cudaStreamNonBlocking));
        Side &s = gs[d].side;
        u64 *src = nullptr;
        CK(cudaMalloc(&s.ctr, MAX_BLOCKS * 4));
        CK(cudaMalloc(&s.ack, MAX_BLOCKS * 4));
        CK(cudaMalloc(&s.ready, MAX_BLOCKS * 4));
        CK(cudaMalloc(&s.done, MAX_BLOCKS * 4));
        CK(cudaMalloc(&s.wrong, 2 * 4));
        CK(cudaMalloc(&s.buf, 2 * cap));
        CK(cudaMalloc(&src, max_bytes));
        CK(cudaMalloc(&s.dst, max_bytes));
        s.src = src;
        for (unsigned *p : {s.ctr, s.ack, s.ready, s.done}) CK(cudaMemset(p, 0, MAX_BLOCKS * 4));
        CK(cudaMemset(s.wrong, 0, 2 * 4));
        k_fill<<<132, THREADS, 0, gs[d].s>>>(src, max_bytes / 8);
        CK(cudaStreamSynchronize(gs[d].s));
    }
    const struct {
        Variant v;
        const char *name;
    } variants[] = {{LL, "ll"}, {LL128, "ll128"}, {LL128P, "ll128p"}, {DIRECT, "direct"}};
    unsigned total = 0;
    for (const auto &var : variants) {
        if (!want.empty() && ("," + want + ",").find("," + std::string(var.name) + ",") == std::string::npos)
            continue;
        for (bool both : {false, true})
            for (u64 bytes = 64 << 10; bytes <= max_bytes; bytes *= 2) {
                unsigned before[2][2], after[2][2];
                for (int d = 0; d < 2; ++d) {
                    CK(cudaSetDevice(d));
                    CK(cudaMemcpy(before[d], gs[d].side.wrong, 8, cudaMemcpyDeviceToHost));
                }
                const double t = graph_case(gs, var.v, both, bytes, cap, calls);
                for (int d = 0; d < 2; ++d) {
                    CK(cudaSetDevice(d));
                    CK(cudaMemcpy(after[d], gs[d].side.wrong, 8, cudaMemcpyDeviceToHost));
                }
                const unsigned wrong = after[0][0] - before[0][0] + after[1][0] - before[1][0];
                const unsigned torn = after[0][1] - before[0][1] + after[1][1] - before[1][1];
                total += wrong;
                printf("probe: %s %s %llu KiB: %.2f us a call, %u wrong words, %u torn lines\n",
                       var.name, both ? "both" : "bcast", bytes >> 10, t, wrong, torn);
                fflush(stdout);
            }
    }
    printf("probe: done, %u wrong\n", total);
    return total == 0 ? 0 : 1;
}
