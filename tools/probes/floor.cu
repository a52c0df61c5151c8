// Probe: what is the floor of an 8-byte collective or a barrier in a CUDA graph on two GPUs?
// Issue 31 asks for a barrier of 1.5 us and an 8-byte all-reduce of 2.0 us; this library's
// take 1.9-2.3 and 2.6 (docs/performance.md, "The 8-byte floor"). This separates what any
// kernel-per-call collective pays from what the library adds: a graph node's own cost, the
// link's one-way latency, and the plainest barrier and LL all-reduce built on them.
//
//   nvcc -O3 -std=c++17 -arch=sm_90 tools/probes/floor.cu -o /tmp/floor
//   /tmp/floor [CALLS]
//
// Two GPUs of one process, peer access, cudaMalloc. Each graph case captures CALLS (default
// 1000) kernels of one block on one stream per GPU; both GPUs' graphs are launched together and
// both synchronized; the time a call is the median of 7 replays over CALLS. "pdl" cases launch
// every kernel with programmatic stream serialization, as the library does: each kernel waits
// for the one before it (griddepcontrol.wait) and lets the next be scheduled at once
// (griddepcontrol.launch_dependents). Cases:
//   empty      a kernel that does nothing but that (one GPU's graph only, then both)
//   pingpong   one kernel a GPU: GPU 0 stores i into GPU 1's flag, GPU 1 answers with i into
//              GPU 0's, 20000 times; half a round trip is the link's one-way latency
//   barrier    each call: thread 0 takes the next epoch from a local counter, stores it into
//              the peer's flag (st.release.sys), polls its own flag until it holds the epoch
//              (ld.acquire.sys); "fence" puts fence.sc.sys before the store, as a barrier
//              that orders earlier writes must; "acqrel" fence.acq_rel.sys and a relaxed
//              store (this crate's checked sync); "relaxed" a relaxed store alone (no order:
//              what the release itself costs, measured apart; not a barrier anyone may use)
//   ll8        an 8-byte all-reduce (two f32): thread 0 loads the input, stores it with the
//              epoch twice in one 16-byte packet into the peer's slot (epoch parity), polls its
//              own slot until both epochs are there, stores the sum; checked every call
//              against the host's sum of the inputs, which change with the epoch
// With PROBE_ALLOC=vmm the flags and slots are mapped as NVSHMEM maps its heap (cuMemCreate,
// cuMemMap: probe.cuh's probe_alloc), not cudaMalloc'ed; the cases' names then begin "vmm".
// With a second argument `ipc` the barrier cases and ll8 run in two processes instead,
// one a GPU (forked before CUDA starts), the flags and slots shared by CUDA IPC handles passed
// through pipes: what two processes add to the same kernels (this library runs one PE a
// process).
// Output: `probe: CASE [pdl]: X us a call` (for pingpong: `one-way X us`; in two processes
// `probe: two processes CASE [pdl]: ...`, GPU 0's time), then `probe: done, N wrong`.
#include "probe.cuh"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

__device__ __forceinline__ void pdl_begin() {
    asm volatile("griddepcontrol.wait;" ::: "memory");
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
}

__global__ void k_empty() { pdl_begin(); }

// GPU `me` of the ping-pong: 0 serves, 1 answers.
__global__ void k_pingpong(unsigned *mine, unsigned *peer, int me, int rounds) {
    for (int i = 1; i <= rounds; ++i) {
        if (me == 0) {
            st_release(peer, (unsigned)i);
            while (ld_acquire(mine) != (unsigned)i) {
            }
        } else {
            while (ld_acquire(mine) != (unsigned)i) {
            }
            st_release(peer, (unsigned)i);
        }
    }
}

// ctr: this GPU's epoch counter (local); mine: the flag the peer stores into; peer: the peer's.
// fence: 0 release store, 1 fence.sc.sys and release store, 2 fence.acq_rel.sys and relaxed
// store, 3 relaxed store alone.
__global__ void k_barrier(unsigned *ctr, unsigned *mine, unsigned *peer, int fence) {
    pdl_begin();
    if (threadIdx.x != 0) return;
    const unsigned e = *ctr + 1;
    *ctr = e;
    if (fence == 1) asm volatile("fence.sc.sys;" ::: "memory");
    if (fence == 2) asm volatile("fence.acq_rel.sys;" ::: "memory");
    if (fence >= 2)
        asm volatile("st.relaxed.sys.global.u32 [%0], %1;" ::"l"(peer), "r"(e) : "memory");
    else
        st_release(peer, e);
    while ((int)(ld_acquire(mine) - e) < 0) {
    }
}

// slots: this GPU's two packets (parity); pslots: the peer's. in: 2 f32 at base + epoch
// (written by the kernel itself, so every call's inputs differ); out: the sum, and wrong counts
// the calls whose sum is not the expected one.
__global__ void k_ll8(unsigned *ctr, uint4 *slots, uint4 *pslots, float *in, int me,
                      unsigned *wrong) {
    pdl_begin();
    if (threadIdx.x != 0) return;
    const unsigned e = *ctr + 1;
    *ctr = e;
    // This GPU's input of run e: (me + 1) * e and e + me, known to both sides.
    in[0] = (float)((me + 1) * (e & 1023));
    in[1] = (float)((e & 1023) + me);
    const float a0 = in[0], a1 = in[1];
    uint4 p;
    p.x = __float_as_uint(a0);
    p.y = e;
    p.z = __float_as_uint(a1);
    p.w = e;
    uint4 *dst = pslots + (e & 1);
    asm volatile("st.volatile.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(dst), "r"(p.x),
                 "r"(p.y), "r"(p.z), "r"(p.w)
                 : "memory");
    uint4 q;
    do {
        asm volatile("ld.volatile.global.v4.u32 {%0, %1, %2, %3}, [%4];"
                     : "=r"(q.x), "=r"(q.y), "=r"(q.z), "=r"(q.w)
                     : "l"(slots + (e & 1))
                     : "memory");
    } while (q.y != e || q.w != e);
    const float s0 = a0 + __uint_as_float(q.x), s1 = a1 + __uint_as_float(q.z);
    in[2] = s0;
    in[3] = s1;
    const float w0 = (float)(3 * (e & 1023)), w1 = (float)(2 * (e & 1023) + 1);
    if (s0 != w0 || s1 != w1) atomicAdd(wrong, 1u);
}

struct Gpu {
    cudaStream_t s;
    unsigned *ctr, *flag, *wrong;
    uint4 *slots;
    float *in;
};

enum Case { EMPTY, BARRIER, FENCE, ACQREL, RELAXED, LL8 };

static void launch(const Gpu &g, const Gpu &peer, int me, Case c, bool pdl) {
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(1);
    cfg.blockDim = dim3(32);
    cfg.stream = g.s;
    cudaLaunchAttribute at[1];
    at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    at[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = at;
    cfg.numAttrs = pdl ? 1 : 0;
    switch (c) {
    case EMPTY:
        CK(cudaLaunchKernelEx(&cfg, k_empty));
        break;
    case BARRIER:
    case FENCE:
    case ACQREL:
    case RELAXED:
        CK(cudaLaunchKernelEx(&cfg, k_barrier, g.ctr, g.flag, peer.flag,
                              c == FENCE ? 1 : c == ACQREL ? 2 : c == RELAXED ? 3 : 0));
        break;
    case LL8:
        CK(cudaLaunchKernelEx(&cfg, k_ll8, g.ctr, g.slots, peer.slots, g.in, me, g.wrong));
        break;
    }
}

// Captures `calls` kernels of case c on the GPUs `gpus` (1: GPU 0 only; 2: both), replays the
// graphs 7 times after one warm-up replay; returns the median time a call, us.
static double graph_case(Gpu *gs, int gpus, Case c, bool pdl, int calls) {
    cudaGraphExec_t ex[2];
    for (int d = 0; d < gpus; ++d) {
        CK(cudaSetDevice(d));
        cudaGraph_t graph;
        CK(cudaStreamBeginCapture(gs[d].s, cudaStreamCaptureModeThreadLocal));
        for (int i = 0; i < calls; ++i) launch(gs[d], gs[1 - d], d, c, pdl);
        CK(cudaStreamEndCapture(gs[d].s, &graph));
        CK(cudaGraphInstantiate(&ex[d], graph, 0));
        CK(cudaGraphDestroy(graph));
    }
    std::vector<double> t;
    for (int r = 0; r < 8; ++r) {
        cudaEvent_t e0, e1;
        CK(cudaSetDevice(0));
        CK(cudaEventCreate(&e0));
        CK(cudaEventCreate(&e1));
        CK(cudaEventRecord(e0, gs[0].s));
        for (int d = 0; d < gpus; ++d) {
            CK(cudaSetDevice(d));
            CK(cudaGraphLaunch(ex[d], gs[d].s));
        }
        CK(cudaSetDevice(0));
        CK(cudaEventRecord(e1, gs[0].s));
        for (int d = 0; d < gpus; ++d) {
            CK(cudaSetDevice(d));
            CK(cudaStreamSynchronize(gs[d].s));
        }
        float ms = 0;
        CK(cudaEventElapsedTime(&ms, e0, e1));
        if (r > 0) t.push_back(ms * 1e3 / calls);
        CK(cudaEventDestroy(e0));
        CK(cudaEventDestroy(e1));
    }
    for (int d = 0; d < gpus; ++d) {
        CK(cudaSetDevice(d));
        CK(cudaGraphExecDestroy(ex[d]));
    }
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
}

static void xwrite(int fd, const void *p, size_t n) {
    if (write(fd, p, n) != (ssize_t)n) {
        perror("probe: write");
        exit(1);
    }
}

static void xread(int fd, void *p, size_t n) {
    for (size_t got = 0; got < n;) {
        const ssize_t r = read(fd, (char *)p + got, n - got);
        if (r <= 0) {
            perror("probe: read");
            exit(1);
        }
        got += (size_t)r;
    }
}

// One case in one process of two: `calls` kernels captured on this GPU's stream, both
// processes told the other is ready (pipes), the graph replayed 8 times (the first not
// counted; the kernels pace the two processes' replays); the median time a call, us.
static double ipc_case(const Gpu &g, const Gpu &peer, int me, Case c, bool pdl, int calls,
                       int rfd, int wfd) {
    cudaGraph_t graph;
    cudaGraphExec_t ex;
    CK(cudaStreamBeginCapture(g.s, cudaStreamCaptureModeThreadLocal));
    for (int i = 0; i < calls; ++i) launch(g, peer, me, c, pdl);
    CK(cudaStreamEndCapture(g.s, &graph));
    CK(cudaGraphInstantiate(&ex, graph, 0));
    CK(cudaGraphDestroy(graph));
    char b = 1;
    xwrite(wfd, &b, 1);
    xread(rfd, &b, 1);
    std::vector<double> t;
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    for (int r = 0; r < 8; ++r) {
        CK(cudaEventRecord(e0, g.s));
        CK(cudaGraphLaunch(ex, g.s));
        CK(cudaEventRecord(e1, g.s));
        CK(cudaStreamSynchronize(g.s));
        float ms = 0;
        CK(cudaEventElapsedTime(&ms, e0, e1));
        if (r > 0) t.push_back(ms * 1e3 / calls);
    }
    CK(cudaEventDestroy(e0));
    CK(cudaEventDestroy(e1));
    CK(cudaGraphExecDestroy(ex));
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
}

// The `ipc` mode: the barrier cases and ll8 in two processes, GPU 0's and GPU 1's.
static int ipc_main(int calls) {
    int p01[2], p10[2];
    if (pipe(p01) != 0 || pipe(p10) != 0) {
        perror("probe: pipe");
        return 1;
    }
    const pid_t pid = fork(); // before any CUDA call: a forked child cannot use its parent's
    if (pid < 0) {
        perror("probe: fork");
        return 1;
    }
    const int me = pid == 0 ? 1 : 0;
    const int rfd = me == 0 ? p10[0] : p01[0], wfd = me == 0 ? p01[1] : p10[1];
    // The other ends closed, so that a process that dies ends its peer's reads (EOF).
    close(me == 0 ? p10[1] : p01[1]);
    close(me == 0 ? p01[0] : p10[0]);
    int devices = 0;
    CK(cudaGetDeviceCount(&devices));
    if (devices < 2) {
        fprintf(stderr, "needs 2 GPUs, found %d\n", devices);
        exit(1);
    }
    CK(cudaSetDevice(me));
    Gpu g;
    char *base = nullptr;
    CK(cudaStreamCreateWithFlags(&g.s, cudaStreamNonBlocking));
    CK(cudaMalloc(&g.ctr, 4));
    CK(cudaMalloc(&g.wrong, 4));
    CK(cudaMalloc(&g.in, 4 * sizeof(float)));
    CK(cudaMalloc(&base, 512)); // the flag at 0, the slots at 256: what the peer writes
    g.flag = (unsigned *)base;
    g.slots = (uint4 *)(base + 256);
    CK(cudaMemset(g.ctr, 0, 4));
    CK(cudaMemset(g.wrong, 0, 4));
    CK(cudaMemset(g.flag, 0, 4));
    CK(cudaMemset(g.slots, 0xFF, 2 * sizeof(uint4)));
    CK(cudaDeviceSynchronize());
    cudaIpcMemHandle_t mine, theirs;
    CK(cudaIpcGetMemHandle(&mine, base));
    xwrite(wfd, &mine, sizeof mine);
    xread(rfd, &theirs, sizeof theirs);
    void *pb = nullptr;
    CK(cudaIpcOpenMemHandle(&pb, theirs, cudaIpcMemLazyEnablePeerAccess));
    Gpu peer;
    memset(&peer, 0, sizeof peer);
    peer.flag = (unsigned *)pb;
    peer.slots = (uint4 *)((char *)pb + 256);
    const struct {
        Case c;
        const char *name;
    } cases[] = {{BARRIER, "barrier"},
                 {FENCE, "barrier fence"},
                 {ACQREL, "barrier acqrel"},
                 {RELAXED, "barrier relaxed"},
                 {LL8, "ll8"}};
    for (bool pdl : {false, true})
        for (const auto &k : cases) {
            const double t = ipc_case(g, peer, me, k.c, pdl, calls, rfd, wfd);
            if (me == 0)
                printf("probe: two processes %s%s: %.3f us a call\n", k.name, pdl ? " pdl" : "",
                       t);
        }
    unsigned w = 0, pw = 0;
    CK(cudaMemcpy(&w, g.wrong, 4, cudaMemcpyDeviceToHost));
    // Both processes are past their last kernel; the peer's memory is not used again.
    CK(cudaIpcCloseMemHandle(pb));
    if (me == 1) {
        xwrite(wfd, &w, sizeof w);
        char b = 0;
        xread(rfd, &b, 1); // GPU 0 has read it: now this buffer may go
        return 0;
    }
    xread(rfd, &pw, sizeof pw);
    const char b = 1;
    xwrite(wfd, &b, 1);
    int status = 0;
    waitpid(pid, &status, 0);
    printf("probe: done, %u wrong\n", w + pw);
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}

int main(int argc, char **argv) {
    const int calls = argc > 1 ? atoi(argv[1]) : 1000;
    if (argc > 2 && strcmp(argv[2], "ipc") == 0) return ipc_main(calls);
    two_gpus();
    const bool vmm = getenv("PROBE_ALLOC") && strcmp(getenv("PROBE_ALLOC"), "vmm") == 0;
    const char *m = vmm ? "vmm " : "";
    Gpu gs[2];
    for (int d = 0; d < 2; ++d) {
        CK(cudaSetDevice(d));
        CK(cudaDeviceEnablePeerAccess(1 - d, 0));
        CK(cudaStreamCreateWithFlags(&gs[d].s, cudaStreamNonBlocking));
        CK(cudaMalloc(&gs[d].ctr, 4));
        CK(cudaMalloc(&gs[d].wrong, 4));
        CK(cudaMalloc(&gs[d].in, 4 * sizeof(float)));
        // What the peer writes: the flag at 0, the slots at 256.
        char *base = (char *)probe_alloc(d, 512, vmm);
        CK(cudaSetDevice(d));
        gs[d].flag = (unsigned *)base;
        gs[d].slots = (uint4 *)(base + 256);
        CK(cudaMemset(gs[d].ctr, 0, 4));
        CK(cudaMemset(gs[d].flag, 0, 4));
        CK(cudaMemset(gs[d].wrong, 0, 4));
        CK(cudaMemset(gs[d].slots, 0xFF, 2 * sizeof(uint4)));
        CK(cudaDeviceSynchronize());
    }
    for (bool pdl : {false, true}) {
        const char *p = pdl ? " pdl" : "";
        printf("probe: %sempty one gpu%s: %.3f us a call\n", m, p, graph_case(gs, 1, EMPTY, pdl, calls));
        printf("probe: %sempty both gpus%s: %.3f us a call\n", m, p,
               graph_case(gs, 2, EMPTY, pdl, calls));
    }
    {
        const int rounds = 20000;
        for (int d = 0; d < 2; ++d) {
            CK(cudaSetDevice(d));
            CK(cudaMemset(gs[d].flag, 0, 4));
            CK(cudaDeviceSynchronize());
        }
        cudaEvent_t e0, e1;
        CK(cudaSetDevice(0));
        CK(cudaEventCreate(&e0));
        CK(cudaEventCreate(&e1));
        CK(cudaSetDevice(1));
        k_pingpong<<<1, 1, 0, gs[1].s>>>(gs[1].flag, gs[0].flag, 1, rounds);
        CK(cudaGetLastError());
        CK(cudaSetDevice(0));
        CK(cudaEventRecord(e0, gs[0].s));
        k_pingpong<<<1, 1, 0, gs[0].s>>>(gs[0].flag, gs[1].flag, 0, rounds);
        CK(cudaGetLastError());
        CK(cudaEventRecord(e1, gs[0].s));
        for (int d = 0; d < 2; ++d) {
            CK(cudaSetDevice(d));
            CK(cudaDeviceSynchronize());
        }
        float ms = 0;
        CK(cudaEventElapsedTime(&ms, e0, e1));
        printf("probe: %spingpong: one-way %.3f us (%d round trips)\n", m,
               ms * 1e3 / rounds / 2, rounds);
        for (int d = 0; d < 2; ++d) {
            CK(cudaSetDevice(d));
            CK(cudaMemset(gs[d].flag, 0, 4));
            CK(cudaMemset(gs[d].ctr, 0, 4));
            CK(cudaDeviceSynchronize());
        }
    }
    for (bool pdl : {false, true}) {
        const char *p = pdl ? " pdl" : "";
        printf("probe: %sbarrier%s: %.3f us a call\n", m, p,
               graph_case(gs, 2, BARRIER, pdl, calls));
        printf("probe: %sbarrier fence%s: %.3f us a call\n", m, p,
               graph_case(gs, 2, FENCE, pdl, calls));
        printf("probe: %sbarrier acqrel%s: %.3f us a call\n", m, p,
               graph_case(gs, 2, ACQREL, pdl, calls));
        printf("probe: %sbarrier relaxed%s: %.3f us a call\n", m, p,
               graph_case(gs, 2, RELAXED, pdl, calls));
        printf("probe: %sll8%s: %.3f us a call\n", m, p, graph_case(gs, 2, LL8, pdl, calls));
    }
    unsigned wrong = 0;
    for (int d = 0; d < 2; ++d) {
        unsigned w = 0;
        CK(cudaSetDevice(d));
        CK(cudaMemcpy(&w, gs[d].wrong, 4, cudaMemcpyDeviceToHost));
        wrong += w;
    }
    printf("probe: done, %u wrong\n", wrong);
    return 0;
}
