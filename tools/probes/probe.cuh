// What every probe of this folder shares: error checks for the runtime and driver calls, and
// the two GPUs they all need, and the flags' ordered loads and stores.
#pragma once
#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

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

