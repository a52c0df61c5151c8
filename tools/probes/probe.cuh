// What every probe of this folder shares: error checks for the runtime and driver calls, and
// the two GPUs they all need, and the flags' ordered loads and stores.
#pragma once
#include <cuda.h>
#include <cuda_runtime.h>

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
