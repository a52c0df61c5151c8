// Element-wise reductions over peer-mapped buffers, and scaling.
//
// Compiled as `prefix + ops.cuh + reduce.cu` (ops.cuh holds the operators and nvr_combine,
// shared with the NVLink kernels). One source for every (type, operator): the prefix defines
//   NVR_T          the element's C type
//   NVR_ACC        the type arithmetic is done in (float for 16- and 8-bit floats,
//                  64-bit for integers so avg and premulsum cannot overflow midway)
//   NVR_LOAD(x)    NVR_T -> NVR_ACC
//   NVR_STORE(a)   NVR_ACC -> NVR_T (round to nearest even; fp8 saturates to finite)
//   NVR_IS_FLOAT   1 for floating-point types, else 0
//   NVR_OP         one of the NVR_OP_* values of ops.cuh (reduce kernel)
//   NVR_MAP        one of the NVR_MAP_* values below (map kernel)
// and the fp16/bf16/fp8 headers where the type needs them.

#define NVR_MAP_MUL 0
#define NVR_MAP_DIV 1

// Must match MAX_PEERS in kernels/mod.rs. Passed by value as a kernel parameter (1 KiB,
// within the 4 KiB parameter limit), so a launch needs no device-side pointer table.
#define NVR_MAX_PEERS 128

struct nvr_peers {
    const NVR_T *p[NVR_MAX_PEERS];
};

typedef unsigned long long nvr_size;

__device__ __forceinline__ nvr_size nvr_first() {
    return (nvr_size)blockIdx.x * blockDim.x + threadIdx.x;
}

__device__ __forceinline__ nvr_size nvr_step() {
    return (nvr_size)gridDim.x * blockDim.x;
}

#ifdef NVR_OP
// Every PE runs this with the peers in the same (team) order, so every PE computes the
// same bits: the sum is not reassociated.
extern "C" __global__ void nvr_reduce(nvr_peers src, int n_src, NVR_T *dst, nvr_size len,
                                      double scale) {
#if NVR_OP == NVR_OP_PREMULSUM
    const NVR_ACC s = (NVR_ACC)scale;
#define NVR_PRE(x) (s * (x))
#else
    (void)scale;
#define NVR_PRE(x) (x)
#endif
    for (nvr_size i = nvr_first(); i < len; i += nvr_step()) {
        NVR_ACC a = NVR_PRE(NVR_LOAD(src.p[0][i]));
        for (int p = 1; p < n_src; ++p) {
            a = nvr_combine(a, NVR_PRE(NVR_LOAD(src.p[p][i])));
        }
#if NVR_OP == NVR_OP_AVG
        a = a / (NVR_ACC)n_src;
#endif
        dst[i] = NVR_STORE(a);
    }
#undef NVR_PRE
}
#endif // NVR_OP

#ifdef NVR_MAP
// dst[i] = src[i] * s (or / s); dst may equal src.
extern "C" __global__ void nvr_map(const NVR_T *src, NVR_T *dst, nvr_size len, double s) {
    const NVR_ACC f = (NVR_ACC)s;
    for (nvr_size i = nvr_first(); i < len; i += nvr_step()) {
#if NVR_MAP == NVR_MAP_MUL
        dst[i] = NVR_STORE(NVR_LOAD(src[i]) * f);
#elif NVR_MAP == NVR_MAP_DIV
        dst[i] = NVR_STORE(NVR_LOAD(src[i]) / f);
#else
#error "unknown NVR_MAP"
#endif
    }
}
#endif // NVR_MAP
