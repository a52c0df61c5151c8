// Probe: what a copy-engine collective call costs beyond its copy, and which way of queueing it
// costs least. Two GPUs of one process, peer access, plain CUDA runtime; no NVSHMEM.
//
// This crate's `nvlink_ce` plan (collective/algo/ce.rs) for a 2-PE fcollect is, on each PE's
// stream: a flag barrier kernel; a fork to the side stream, where the own block is copied
// locally by copy engine; the block copied into the peer's output by copy engine; the join;
// a second flag barrier. In nvshmem-perf a 1 MiB call takes 16-20 us and 128 MiB calls run
// about 20 us over the copy engine's rate (docs/performance.md), which keeps fcollect, alltoall,
// gather, scatter and broadcast short of issue 31's 128 MiB targets. Which part costs it?
//
//   nvcc -O3 -std=c++17 -arch=sm_90 tools/probes/ce_frame.cu -o /tmp/ce_frame -lcuda
//   /tmp/ce_frame [VARIANTS]   (a comma-separated list of names, default all)
//
// Variants, per GPU and call (B bytes a block; "remote" is the CE copy of the own block into
// the peer's output, "local" the own block into the own output):
//   full      barrier; fork; side: local (CE); remote (CE); join; barrier  (this crate's plan)
//   signal    fork; one kernel: barrier, go = 1, wait for done = 1, barrier; the side stream
//             waits for go (cuStreamWaitValue32), copies remote and local, stores done = 1
//             (cuStreamWriteValue32); join. The copies then wait for a flag, not for a kernel
//             to end, and the closing barrier does not wait for the copies' stream to end.
//   smlocal   as full, the local copy by an SM kernel on the side stream
//   early     fork before the first barrier (side: local by CE); barrier; remote; barrier; join
//   serial    barrier; remote; local (both CE, one stream); barrier
//   localfirst  local (CE); barrier; remote; barrier  (the local copy needs no barrier)
//   smfirst   local by an SM kernel; barrier; remote; barrier
//   remote    barrier; remote; barrier  (no local copy: the framing alone)
//   barriers  barrier; barrier
//   copyonly  remote (no barrier: the copy engine's own rate and launch)
//   membarriers, memremote, memserial, memfull: barriers, remote, serial and full with each
//             barrier made of stream memory operations alone, no kernel: the peer's flag set
//             (cuStreamWriteValue32 to its memory, which fences the stream's earlier work
//             first), this GPU's flag waited for (cuStreamWaitValue32) and reset. Constant
//             values serve every replay: the peer sets a flag again only after its next
//             barrier, which waits for this GPU's next arrival, queued after the reset.
//             (membarriers hung in a graph at 64 KiB the one time it ran, 2 x H200, 2026-11-28;
//             the cause was not looked for, so the four stay last and off by default.)
// (A `pull` variant, the peer's block copied in by this GPU's copy engine, hung in a graph at
// 64 KiB the one time it ran, 2 x H200, 2026-11-27; it was removed, the cause not looked for.)
// Each mode (graph: the calls captured once per GPU and the graph launched; stream: queued
// directly) and block size gets a line: `probe: MODE VARIANT B: T us a call, X GB/s a
// direction`, T the median of 3 timed runs of `calls` calls, the slower GPU's. The barrier is a
// one-warp kernel like nvr_barrier: read the epoch, fence.sc.sys, store it to the peer's flag,
// wait for the peer's (bounded: a wait past 2^24 polls sets the error word and the run says
// WRONG). After the timed runs the output of every GPU is checked once.
#include "probe.cuh"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

// flags[0]: this GPU's epoch; flags[1]: what the peer stored (its epoch); flags[2], flags[3]:
// the signal variant's go and done; flags[4], flags[5]: the memory-operation barriers' flags.
__device__ void barrier_kernel_body(unsigned *flags, unsigned *peer_flags, int *err) {
    if (threadIdx.x != 0) return;
    const unsigned e = *(volatile unsigned *)flags + 1;
    const bool failed = *(volatile int *)err != 0; // then no wait: one hang, not one per call
    asm volatile("fence.sc.sys;" ::: "memory");
    asm volatile("st.relaxed.sys.global.u32 [%0], %1;" ::"l"(peer_flags + 1), "r"(e) : "memory");
    long spins = 0;
    for (;;) {
        unsigned v;
        asm volatile("ld.acquire.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(flags + 1) : "memory");
        if ((int)(v - e) >= 0 || failed) break;
        if (++spins > (1L << 24)) {
            atomicExch(err, 1);
            break;
        }
    }
    *(volatile unsigned *)flags = e;
}

__global__ void barrier_kernel(unsigned *flags, unsigned *peer_flags, int *err) {
    barrier_kernel_body(flags, peer_flags, err);
}

// The `signal` variant's kernel: the opening barrier, then go = 1 for the side stream (whose
// copies wait for it with cuStreamWaitValue32), then the wait for its done = 1 (reset to 0),
// then the closing barrier. go and done alternate between this kernel and the side stream of
// the same GPU only, so constant values serve every replay of a graph.
__global__ void signal_kernel(unsigned *flags, unsigned *peer_flags, int *err) {
    barrier_kernel_body(flags, peer_flags, err);
    if (threadIdx.x != 0) return;
    asm volatile("st.relaxed.sys.global.u32 [%0], %1;" ::"l"(flags + 2), "r"(1u) : "memory");
    long spins = 0;
    for (;;) {
        unsigned v;
        asm volatile("ld.acquire.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(flags + 3) : "memory");
        if (v == 1u || *(volatile int *)err) break;
        if (++spins > (1L << 24)) {
            atomicExch(err, 2);
            break;
        }
    }
    *(volatile unsigned *)(flags + 3) = 0;
    barrier_kernel_body(flags, peer_flags, err);
}

__global__ void copy_kernel(uint4 *dst, const uint4 *src, size_t n) {
    for (size_t j = blockIdx.x * (size_t)blockDim.x + threadIdx.x; j < n;
         j += (size_t)gridDim.x * blockDim.x)
        dst[j] = src[j];
}

enum Variant {
    BARRIERS, COPYONLY, REMOTE, FULL, SIGNAL, SMLOCAL, SERIAL, LOCALFIRST, SMFIRST, EARLY,
    MEMBARRIERS, MEMREMOTE, MEMSERIAL, MEMFULL, VARIANTS
};
static const char *NAMES[VARIANTS] = {"barriers", "copyonly",  "remote",    "full",
                                      "signal",   "smlocal",   "serial",    "localfirst",
                                      "smfirst",  "early",     "membarriers", "memremote",
                                      "memserial", "memfull"};

struct Gpu {
    char *src, *dst; // src: this GPU's block; dst: 2 blocks (fcollect's output)
    unsigned *flags;
    int *err;
    cudaStream_t main, side;
    cudaEvent_t fork, join, t0, t1;
};

static int g_sms = 132;

static void sm_copy(cudaStream_t s, char *dst, const char *src, size_t bytes) {
    const size_t n = bytes / 16;
    const unsigned grid = (unsigned)std::min<size_t>((n + 511) / 512, (size_t)2 * g_sms);
    copy_kernel<<<grid, 512, 0, s>>>((uint4 *)dst, (const uint4 *)src, n);
    CK(cudaGetLastError());
}

// Queues one call of variant v on GPU i (the current device).
static void call(Gpu *g, int i, Variant v, size_t B) {
    Gpu &me = g[i], &peer = g[1 - i];
    char *mine = me.dst + (size_t)i * B;       // the own block in the own output
    char *theirs = peer.dst + (size_t)i * B;   // the own block in the peer's output
    auto barrier = [&] {
        barrier_kernel<<<1, 32, 0, me.main>>>(me.flags, peer.flags, me.err);
        CK(cudaGetLastError());
    };
    auto ce = [&](cudaStream_t s, char *d, const char *from) {
        CK(cudaMemcpyAsync(d, from, B, cudaMemcpyDeviceToDevice, s));
    };
    // A barrier of stream memory operations; `k` picks the flag pair (opening 4, closing 5).
    auto memop_barrier = [&](int k) {
        CU(cuStreamWriteValue32(me.main, (CUdeviceptr)(peer.flags + k), 1, 0));
        CU(cuStreamWaitValue32(me.main, (CUdeviceptr)(me.flags + k), 1, CU_STREAM_WAIT_VALUE_EQ));
        CU(cuStreamWriteValue32(me.main, (CUdeviceptr)(me.flags + k), 0, 0));
    };
    auto fork = [&] {
        CK(cudaEventRecord(me.fork, me.main));
        CK(cudaStreamWaitEvent(me.side, me.fork, 0));
    };
    auto join = [&] {
        CK(cudaEventRecord(me.join, me.side));
        CK(cudaStreamWaitEvent(me.main, me.join, 0));
    };
    switch (v) {
    case SIGNAL: {
        fork();
        signal_kernel<<<1, 32, 0, me.main>>>(me.flags, peer.flags, me.err);
        CK(cudaGetLastError());
        CU(cuStreamWaitValue32(me.side, (CUdeviceptr)(me.flags + 2), 1, CU_STREAM_WAIT_VALUE_EQ));
        CU(cuStreamWriteValue32(me.side, (CUdeviceptr)(me.flags + 2), 0, 0));
        ce(me.side, theirs, me.src);
        ce(me.side, mine, me.src);
        CU(cuStreamWriteValue32(me.side, (CUdeviceptr)(me.flags + 3), 1, 0));
        join();
        break;
    }
    case FULL:
        barrier(), fork(), ce(me.side, mine, me.src), ce(me.main, theirs, me.src), join(), barrier();
        break;
    case SMLOCAL:
        barrier(), fork(), sm_copy(me.side, mine, me.src, B), ce(me.main, theirs, me.src), join(),
            barrier();
        break;
    case EARLY:
        fork(), ce(me.side, mine, me.src), barrier(), ce(me.main, theirs, me.src), barrier(), join();
        break;
    case SERIAL:
        barrier(), ce(me.main, theirs, me.src), ce(me.main, mine, me.src), barrier();
        break;
    case LOCALFIRST:
        ce(me.main, mine, me.src), barrier(), ce(me.main, theirs, me.src), barrier();
        break;
    case SMFIRST:
        sm_copy(me.main, mine, me.src, B), barrier(), ce(me.main, theirs, me.src), barrier();
        break;
    case REMOTE:
        barrier(), ce(me.main, theirs, me.src), barrier();
        break;
    case BARRIERS:
        barrier(), barrier();
        break;
    case MEMBARRIERS:
        memop_barrier(4), memop_barrier(5);
        break;
    case MEMREMOTE:
        memop_barrier(4), ce(me.main, theirs, me.src), memop_barrier(5);
        break;
    case MEMSERIAL:
        memop_barrier(4), ce(me.main, theirs, me.src), ce(me.main, mine, me.src), memop_barrier(5);
        break;
    case MEMFULL:
        memop_barrier(4), fork(), ce(me.side, mine, me.src), ce(me.main, theirs, me.src), join(),
            memop_barrier(5);
        break;
    case COPYONLY:
        ce(me.main, theirs, me.src);
        break;
    default:
        break;
    }
}

// What GPU i's output must hold after variant v: both blocks (block j is GPU j's src), except
// where the variant writes fewer.
static bool check(Gpu *g, Variant v, size_t B) {
    if (v == BARRIERS || v == MEMBARRIERS) return true;
    for (int i = 0; i < 2; ++i) {
        CK(cudaSetDevice(i));
        std::vector<unsigned char> out(2 * B);
        CK(cudaMemcpy(out.data(), g[i].dst, 2 * B, cudaMemcpyDeviceToHost));
        for (int j = 0; j < 2; ++j) {
            const bool written = j != i || (v != REMOTE && v != COPYONLY && v != MEMREMOTE);
            if (!written) continue;
            for (size_t k = 0; k < B; k += 4093)
                if (out[(size_t)j * B + k] != (unsigned char)(k * 7 + j * 13 + 1)) return false;
        }
        int err = 0;
        CK(cudaMemcpy(&err, g[i].err, sizeof(int), cudaMemcpyDeviceToHost));
        if (err) return false;
    }
    return true;
}

int main(int argc, char **argv) {
    const std::string only = argc > 1 && argv[1][0] ? std::string(",") + argv[1] + "," : "";
    const cudaDeviceProp prop = two_gpus();
    g_sms = prop.multiProcessorCount;
    printf("probe: %s x 2, %d SMs, %d copy engines (asyncEngineCount)\n", prop.name, g_sms,
           prop.asyncEngineCount);
    const size_t max_b = (size_t)64 << 20;
    Gpu g[2];
    for (int i = 0; i < 2; ++i) {
        CK(cudaSetDevice(i));
        CK(cudaDeviceEnablePeerAccess(1 - i, 0));
        CK(cudaMalloc(&g[i].src, max_b));
        CK(cudaMalloc(&g[i].dst, 2 * max_b));
        CK(cudaMalloc(&g[i].flags, 8 * sizeof(unsigned)));
        CK(cudaMemset(g[i].flags, 0, 8 * sizeof(unsigned)));
        CK(cudaMalloc(&g[i].err, sizeof(int)));
        CK(cudaMemset(g[i].err, 0, sizeof(int)));
        std::vector<unsigned char> h(max_b);
        for (size_t k = 0; k < max_b; ++k) h[k] = (unsigned char)(k * 7 + i * 13 + 1);
        CK(cudaMemcpy(g[i].src, h.data(), max_b, cudaMemcpyHostToDevice));
        CK(cudaStreamCreateWithFlags(&g[i].main, cudaStreamNonBlocking));
        CK(cudaStreamCreateWithFlags(&g[i].side, cudaStreamNonBlocking));
        CK(cudaEventCreateWithFlags(&g[i].fork, cudaEventDisableTiming));
        CK(cudaEventCreateWithFlags(&g[i].join, cudaEventDisableTiming));
        CK(cudaEventCreate(&g[i].t0));
        CK(cudaEventCreate(&g[i].t1));
    }
    int wrong = 0;
    for (const char *mode : {"graph", "stream"}) {
        const bool graph = mode[0] == 'g';
        for (size_t B : {(size_t)64 << 10, (size_t)512 << 10, (size_t)8 << 20, (size_t)64 << 20}) {
            const int calls = B <= (512 << 10) ? 200 : B <= (8 << 20) ? 50 : 20;
            for (int vi = 0; vi < VARIANTS; ++vi) {
                const Variant v = (Variant)vi;
                const bool named = only.find(std::string(",") + NAMES[v] + ",") != std::string::npos;
                if (only.empty() ? v >= MEMBARRIERS : !named) continue;
                for (int i = 0; i < 2; ++i) {
                    CK(cudaSetDevice(i));
                    CK(cudaMemset(g[i].dst, 0, 2 * B));
                    CK(cudaDeviceSynchronize());
                }
                cudaGraphExec_t exec[2] = {nullptr, nullptr};
                if (graph)
                    for (int i = 0; i < 2; ++i) {
                        CK(cudaSetDevice(i));
                        CK(cudaStreamBeginCapture(g[i].main, cudaStreamCaptureModeThreadLocal));
                        for (int c = 0; c < calls; ++c) call(g, i, v, B);
                        cudaGraph_t gr;
                        CK(cudaStreamEndCapture(g[i].main, &gr));
                        CK(cudaGraphInstantiate(&exec[i], gr, 0));
                        CK(cudaGraphDestroy(gr));
                    }
                std::vector<double> t;
                for (int rep = 0; rep < 4; ++rep) { // the first is warm-up
                    for (int i = 0; i < 2; ++i) {
                        CK(cudaSetDevice(i));
                        CK(cudaEventRecord(g[i].t0, g[i].main));
                        if (graph) CK(cudaGraphLaunch(exec[i], g[i].main));
                        else
                            for (int c = 0; c < calls; ++c) call(g, i, v, B);
                        CK(cudaEventRecord(g[i].t1, g[i].main));
                    }
                    double worst = 0;
                    for (int i = 0; i < 2; ++i) {
                        CK(cudaSetDevice(i));
                        CK(cudaEventSynchronize(g[i].t1));
                        float ms = 0;
                        CK(cudaEventElapsedTime(&ms, g[i].t0, g[i].t1));
                        worst = std::max(worst, 1e3 * ms / calls);
                    }
                    if (rep > 0) t.push_back(worst);
                }
                std::sort(t.begin(), t.end());
                const bool ok = check(g, v, B);
                wrong += !ok;
                printf("probe: %s %-10s %8zu KiB: %8.2f us a call, %6.1f GB/s a direction%s\n", mode,
                       NAMES[v], B >> 10, t[1], B / (t[1] * 1e3), ok ? "" : "  WRONG");
                fflush(stdout);
                for (int i = 0; i < 2; ++i)
                    if (exec[i]) {
                        CK(cudaSetDevice(i));
                        CK(cudaGraphExecDestroy(exec[i]));
                    }
            }
        }
    }
    printf("probe: done, %d wrong\n", wrong);
    return wrong != 0;
}
