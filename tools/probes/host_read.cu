// Probe: what does a GPU's load of a word in pinned host memory cost, alone and while a large
// move runs over NVLink? Every wait of this crate's kernels read the runtime's abort word (host
// memory) every 256 polls, and the one-way direct moves whose wait outlasted that were 1.3-2 x
// slower (docs/performance.md, "Waits and the abort word"): this separates the load's own
// latency from what it does to the move.
//
//   nvcc -O3 -std=c++17 -arch=sm_90 tools/probes/host_read.cu -o /tmp/host_read
//   /tmp/host_read
//
// Two GPUs of one process, peer access, cudaMalloc for the move, cudaHostAlloc (mapped,
// portable) for the word. The move: GPU 0 stores 256 MiB into GPU 1 (a grid-stride uint4 copy,
// 128 blocks of 512 threads, as the crate's direct kernels). The reader: R blocks of one
// thread, each loading the host word (volatile) `reads` times, `gap` ns apart, each load timed
// by %globaltimer. Cases:
//   idle   the reader alone (on GPU 0 and on GPU 1)
//   recv   the reader on GPU 1 (the receiver) while the move runs
//   send   the reader on GPU 0 (the sender, another stream) while the move runs
// Output: `probe: CASE gpu G blocks R: load median M us, max X us; move T us` (the move's time
// by events on its stream; `-` when none), then `probe: move alone T us`. The move's output is
// checked (sampled) every time: `probe: done, N wrong`.
#include "probe.cuh"

#include <algorithm>
#include <cstdio>
#include <vector>

__device__ __forceinline__ unsigned long long gtimer() {
    unsigned long long v;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(v));
    return v;
}

__global__ void __launch_bounds__(512, 1) push(uint4 *dst, const uint4 *src, size_t n) {
    for (size_t j = blockIdx.x * (size_t)blockDim.x + threadIdx.x; j < n;
         j += (size_t)gridDim.x * blockDim.x)
        dst[j] = src[j];
}

// Block b: `reads` loads of *w, each timed, `gap` ns apart; out[b * reads + i] = ns.
__global__ void reader(const volatile unsigned *w, unsigned long long *out, int reads,
                       unsigned long long gap, unsigned *sink) {
    unsigned acc = 0;
    for (int i = 0; i < reads; ++i) {
        const unsigned long long t0 = gtimer();
        acc += *w;
        // The sum is used before the second timer read, so the load has completed.
        asm volatile("" ::"r"(acc));
        const unsigned long long t1 = gtimer();
        out[(size_t)blockIdx.x * reads + i] = t1 - t0;
        while (gtimer() - t1 < gap) {
        }
    }
    if (acc == 0xFFFFFFFFu) *sink = acc;
}

static const size_t BYTES = 256ull << 20;
static const int READS = 40;

struct Bufs {
    uint4 *src = nullptr, *dst = nullptr;
    unsigned *word = nullptr, *sink[2] = {nullptr, nullptr};
    unsigned long long *out[2] = {nullptr, nullptr};
};

static int check(const Bufs &b) {
    std::vector<uint4> s(4096), d(4096);
    int wrong = 0;
    for (size_t off : {(size_t)0, BYTES / 2, BYTES - sizeof(uint4) * 4096}) {
        CK(cudaSetDevice(0));
        CK(cudaMemcpy(s.data(), (char *)b.src + off, s.size() * sizeof(uint4),
                      cudaMemcpyDeviceToHost));
        CK(cudaSetDevice(1));
        CK(cudaMemcpy(d.data(), (char *)b.dst + off, d.size() * sizeof(uint4),
                      cudaMemcpyDeviceToHost));
        for (size_t i = 0; i < s.size(); ++i)
            wrong += s[i].x != d[i].x || s[i].y != d[i].y || s[i].z != d[i].z || s[i].w != d[i].w;
    }
    CK(cudaSetDevice(1));
    CK(cudaMemset(b.dst, 0, BYTES));
    CK(cudaDeviceSynchronize());
    return wrong;
}

// One case: the reader on GPU `rg` with `blocks` blocks, the move with it or not. Returns the
// wrong vectors of the move (0 when none ran).
static int run(const char *name, Bufs &b, cudaStream_t mover, cudaStream_t rs[2], int rg,
               int blocks, bool move) {
    cudaEvent_t e0, e1;
    CK(cudaSetDevice(0));
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    CK(cudaSetDevice(rg));
    // 10 us apart, so the reads span the move (about 700 us).
    reader<<<blocks, 1, 0, rs[rg]>>>(b.word, b.out[rg], READS, 10000ull, b.sink[rg]);
    CK(cudaGetLastError());
    if (move) {
        CK(cudaSetDevice(0));
        CK(cudaEventRecord(e0, mover));
        push<<<128, 512, 0, mover>>>(b.dst, b.src, BYTES / sizeof(uint4));
        CK(cudaGetLastError());
        CK(cudaEventRecord(e1, mover));
    }
    for (int g = 0; g < 2; ++g) {
        CK(cudaSetDevice(g));
        CK(cudaDeviceSynchronize());
    }
    float ms = 0;
    CK(cudaSetDevice(0));
    if (move) CK(cudaEventElapsedTime(&ms, e0, e1));
    std::vector<unsigned long long> ns((size_t)blocks * READS);
    CK(cudaSetDevice(rg));
    CK(cudaMemcpy(ns.data(), b.out[rg], ns.size() * 8, cudaMemcpyDeviceToHost));
    std::sort(ns.begin(), ns.end());
    char moved[32] = "-";
    if (move) snprintf(moved, sizeof moved, "%.1f us", ms * 1e3);
    printf("probe: %s gpu %d blocks %d: load median %.2f us, max %.2f us; move %s\n", name, rg,
           blocks, ns[ns.size() / 2] / 1e3, ns.back() / 1e3, moved);
    CK(cudaSetDevice(0));
    CK(cudaEventDestroy(e0));
    CK(cudaEventDestroy(e1));
    return move ? check(b) : 0;
}

int main() {
    two_gpus();
    Bufs b;
    cudaStream_t mover, rs[2];
    for (int g = 0; g < 2; ++g) {
        CK(cudaSetDevice(g));
        CK(cudaDeviceEnablePeerAccess(1 - g, 0));
        CK(cudaStreamCreateWithFlags(&rs[g], cudaStreamNonBlocking));
        CK(cudaMalloc(&b.out[g], 128 * READS * 8));
        CK(cudaMalloc(&b.sink[g], 4));
    }
    CK(cudaSetDevice(0));
    CK(cudaStreamCreateWithFlags(&mover, cudaStreamNonBlocking));
    CK(cudaMalloc(&b.src, BYTES));
    {
        std::vector<unsigned> h(BYTES / 4);
        for (size_t i = 0; i < h.size(); ++i) h[i] = (unsigned)(i * 2654435761u);
        CK(cudaMemcpy(b.src, h.data(), BYTES, cudaMemcpyHostToDevice));
    }
    CK(cudaHostAlloc(&b.word, 64, cudaHostAllocMapped | cudaHostAllocPortable));
    *b.word = 0;
    CK(cudaSetDevice(1));
    CK(cudaMalloc(&b.dst, BYTES));
    CK(cudaMemset(b.dst, 0, BYTES));

    // Warm-up: the move once, the readers once.
    int wrong = run("warmup", b, mover, rs, 1, 1, true);
    float alone = 0;
    {
        cudaEvent_t e0, e1;
        CK(cudaSetDevice(0));
        CK(cudaEventCreate(&e0));
        CK(cudaEventCreate(&e1));
        std::vector<float> t;
        for (int r = 0; r < 5; ++r) {
            CK(cudaEventRecord(e0, mover));
            push<<<128, 512, 0, mover>>>(b.dst, b.src, BYTES / sizeof(uint4));
            CK(cudaEventRecord(e1, mover));
            CK(cudaEventSynchronize(e1));
            float ms;
            CK(cudaEventElapsedTime(&ms, e0, e1));
            t.push_back(ms);
        }
        std::sort(t.begin(), t.end());
        alone = t[2];
        wrong += check(b);
    }
    for (int g = 0; g < 2; ++g) wrong += run("idle", b, mover, rs, g, 1, false);
    wrong += run("idle", b, mover, rs, 1, 128, false);
    for (int blocks : {1, 128}) {
        wrong += run("recv", b, mover, rs, 1, blocks, true);
        wrong += run("send", b, mover, rs, 0, blocks, true);
    }
    printf("probe: move alone %.1f us (median of 5)\n", alone * 1e3);
    printf("probe: done, %d wrong\n", wrong);
    return 0;
}
