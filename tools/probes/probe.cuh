// What every probe of this folder shares: error checks for the runtime and driver calls, the
// two GPUs they all need, the timing of calls in CUDA graphs on both, and the flags' ordered
// loads and stores.
#pragma once
#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#define CK(x)                                                                                  \
    do {                                                                                       \
        cudaError_t e_ = (x);                                                                  \
        if (e_ != cudaSuccess) {                                                               \
            fprintf(stderr, "%s failed: %s (%s:%d)\n", #x, cudaGetErrorString(e_), __FILE__,   \
                    __LINE__);                                                                 \
            exit(1);                                                                           \
        }                                                                                      \
    } while (0)

#define CU(x)                                                                                  \
    do {                                                                                       \
        CUresult r_ = (x);                                                                     \
        if (r_ != CUDA_SUCCESS) {                                                              \
            const char *m_ = nullptr;                                                          \
            cuGetErrorString(r_, &m_);                                                         \
            fprintf(stderr, "%s failed: %s (%s:%d)\n", #x, m_ ? m_ : "?", __FILE__, __LINE__);  \
            exit(1);                                                                           \
        }                                                                                      \
    } while (0)

// GPU 0's properties, after making sure there are two GPUs (else the probe ends, status 1).
static cudaDeviceProp two_gpus() {
    int devices = 0;
    CK(cudaGetDeviceCount(&devices));
    if (devices < 2) {
        fprintf(stderr, "needs 2 GPUs, found %d\n", devices);
        exit(1);
    }
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    return prop;
}

// Which of `count` variants (named `names`) a comma-separated list names: all when it is empty.
static std::vector<bool> chosen(const std::string &list, const char *const *names, int count) {
    std::vector<bool> on(count, list.empty());
    for (int v = 0; v < count && !list.empty(); ++v)
        on[v] = ("," + list + ",").find("," + std::string(names[v]) + ",") != std::string::npos;
    return on;
}

// Times `calls` calls a GPU in CUDA graphs on both GPUs: launch(i, c) enqueues call c on GPU
// i's stream streams[i] (GPU i current). Each GPU's calls are captured into one graph; both
// graphs are launched together `replays` times, the first a warm-up. Returns the median timed
// replay's slower GPU over `calls`, in us a call, after the last replay has finished (so its
// outputs can be read); the graphs and events are gone by then.
template <class Launch>
static double graph_us_a_call(const cudaStream_t streams[2], int calls, Launch launch,
                              int replays = 6) {
    cudaGraphExec_t exec[2];
    cudaEvent_t ev[2][2];
    for (int i = 0; i < 2; ++i) {
        CK(cudaSetDevice(i));
        cudaGraph_t graph;
        CK(cudaStreamBeginCapture(streams[i], cudaStreamCaptureModeThreadLocal));
        for (int c = 0; c < calls; ++c) launch(i, c);
        CK(cudaStreamEndCapture(streams[i], &graph));
        CK(cudaGraphInstantiate(&exec[i], graph, 0));
        CK(cudaGraphDestroy(graph));
        CK(cudaEventCreate(&ev[i][0]));
        CK(cudaEventCreate(&ev[i][1]));
    }
    std::vector<double> t;
    for (int rep = 0; rep < replays; ++rep) {
        for (int i = 0; i < 2; ++i) {
            CK(cudaSetDevice(i));
            CK(cudaEventRecord(ev[i][0], streams[i]));
            CK(cudaGraphLaunch(exec[i], streams[i]));
            CK(cudaEventRecord(ev[i][1], streams[i]));
        }
        double worst = 0;
        for (int i = 0; i < 2; ++i) {
            CK(cudaSetDevice(i));
            CK(cudaEventSynchronize(ev[i][1]));
            float ms = 0;
            CK(cudaEventElapsedTime(&ms, ev[i][0], ev[i][1]));
            worst = std::max(worst, (double)ms);
        }
        if (rep > 0) t.push_back(worst * 1e3 / calls);
    }
    for (int i = 0; i < 2; ++i) {
        CK(cudaSetDevice(i));
        CK(cudaGraphExecDestroy(exec[i]));
        CK(cudaEventDestroy(ev[i][0]));
        CK(cudaEventDestroy(ev[i][1]));
    }
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
}

// A flag's system-scope acquire load and release store, as the crate's kernels order theirs.
__device__ __forceinline__ unsigned ld_acquire(const unsigned *p) {
    unsigned v;
    asm volatile("ld.acquire.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}

__device__ __forceinline__ void st_release(unsigned *p, unsigned v) {
    asm volatile("st.release.sys.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

// `bytes` of GPU dev's memory, readable and writable by both GPUs: by cudaMalloc (peer access
// enabled by the caller), or with `vmm` by the driver's virtual memory calls, as NVSHMEM builds
// its symmetric heap (cuMemCreate, cuMemAddressReserve, cuMemMap, then read-write access for
// both GPUs). PROBE_GRANULARITY (bytes, default the driver's recommended) rounds a `vmm`
// allocation up, as NVSHMEM_CUMEM_GRANULARITY does for the heap's chunks.
static void *probe_alloc(int dev, size_t bytes, bool vmm) {
    if (!vmm) {
        void *p = nullptr;
        CK(cudaSetDevice(dev));
        CK(cudaMalloc(&p, bytes));
        return p;
    }
    CUmemAllocationProp prop = {};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = dev;
    size_t gran = 0;
    CU(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED));
    if (const char *g = getenv("PROBE_GRANULARITY")) gran = std::max(gran, (size_t)atoll(g));
    const size_t size = (bytes + gran - 1) / gran * gran;
    CUmemGenericAllocationHandle h;
    CU(cuMemCreate(&h, size, &prop, 0));
    CUdeviceptr p = 0;
    CU(cuMemAddressReserve(&p, size, gran, 0, 0));
    CU(cuMemMap(p, size, 0, h, 0));
    CUmemAccessDesc access[2] = {};
    for (int d = 0; d < 2; ++d) {
        access[d].location.type = CU_MEM_LOCATION_TYPE_DEVICE;
        access[d].location.id = d;
        access[d].flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    }
    CU(cuMemSetAccess(p, size, access, 2));
    return (void *)p;
}

