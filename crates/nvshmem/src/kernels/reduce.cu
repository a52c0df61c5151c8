// Element-wise reductions over peer-mapped buffers, and scaling.
//
// Compiled as `prefix + ops.cuh + reduce.cu` (ops.cuh holds the operators and nvr_combine,
// shared with the NVLink kernels). One source for every (type, operator): the prefix defines
// what ops.cuh lists (NVR_T, NVR_ACC, NVR_LOAD, NVR_STORE, NVR_IS_FLOAT, NVR_IS_SIGNED), and
//   NVR_OP         one of the NVR_OP_* values of ops.cuh (reduce kernel)
//   NVR_MAP        one of the NVR_MAP_* values below (map kernel)
// and the fp16/bf16/fp8 headers where the type needs them.

// dst = src * s, in NVR_ACC (premul_sum's scaling on NVSHMEM's path, one-PE teams).
#define NVR_MAP_MUL 0
// dst = src / s (avg's last step on NVSHMEM's path for f32 and f64).
#define NVR_MAP_DIV 1
// NVR_T -> the wide form NVSHMEM sums (NVSHMEM's path of avg and premul_sum, where the type's
// own sum would round or overflow where this crate's kernels do not): floats -> NVR_ACC (f32),
// times s; integers -> the pair (q, r) of NVR_ACC with x = q * s + r, 0 <= r < s (s = the team
// size), whose sums over the team cannot overflow 64 bits.
#define NVR_MAP_WIDEN 2
// The wide sum -> NVR_T: floats: sum / s, rounded once; integers: the pair's exact mean
// (Q + R / s, truncated toward zero).
#define NVR_MAP_NARROW 3

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
    const NVR_ACC s = (NVR_ACC)scale;
    for (nvr_size i = nvr_first(); i < len; i += nvr_step()) {
        NVR_ACC a = nvr_pre(NVR_LOAD(src.p[0][i]), s);
        for (int p = 1; p < n_src; ++p) {
            a = nvr_combine(a, nvr_pre(NVR_LOAD(src.p[p][i]), s));
        }
        dst[i] = NVR_STORE(nvr_post(a, n_src));
    }
}
#endif // NVR_OP

#ifdef NVR_MAP
#if NVR_MAP == NVR_MAP_WIDEN
typedef NVR_T nvr_map_in;
typedef NVR_ACC nvr_map_out;
#elif NVR_MAP == NVR_MAP_NARROW
typedef NVR_ACC nvr_map_in;
typedef NVR_T nvr_map_out;
#else
typedef NVR_T nvr_map_in;
typedef NVR_T nvr_map_out;
#endif

// Element i of src mapped into dst (NVR_MAP above); dst may equal src for MUL and DIV.
extern "C" __global__ void nvr_map(const nvr_map_in *src, nvr_map_out *dst, nvr_size len,
                                   double s) {
    const NVR_ACC f = (NVR_ACC)s;
    for (nvr_size i = nvr_first(); i < len; i += nvr_step()) {
#if NVR_MAP == NVR_MAP_MUL
        dst[i] = NVR_STORE(nvr_mul(NVR_LOAD(src[i]), f));
#elif NVR_MAP == NVR_MAP_DIV
        dst[i] = NVR_STORE(NVR_LOAD(src[i]) / f);
#elif NVR_MAP == NVR_MAP_WIDEN && NVR_IS_FLOAT
        dst[i] = nvr_mul(NVR_LOAD(src[i]), f);
#elif NVR_MAP == NVR_MAP_WIDEN
        // Floor division: q * f + r == x with 0 <= r < f, so every r is small and every q at
        // most the type's limit over f: n of them sum within 64 bits.
        const NVR_ACC x = NVR_LOAD(src[i]);
        NVR_ACC q = x / f, r = x % f;
#if NVR_IS_SIGNED
        if (r < 0) {
            q -= 1;
            r += f;
        }
#endif
        dst[2 * i] = q;
        dst[2 * i + 1] = r;
#elif NVR_MAP == NVR_MAP_NARROW && NVR_IS_FLOAT
        dst[i] = NVR_STORE(src[i] / f);
#elif NVR_MAP == NVR_MAP_NARROW
        // The mean is Q + R / f exactly: t = Q + floor(R / f) is its floor, which truncation
        // toward zero raises by one where the mean is negative and not whole. t lies between
        // the inputs' least and greatest, so it does not overflow.
        const NVR_ACC q = src[2 * i], r = src[2 * i + 1];
        NVR_ACC t = nvr_add(q, r / f);
#if NVR_IS_SIGNED
        if (r % f != 0 && t < 0)
            t += 1;
#endif
        dst[i] = NVR_STORE(t);
#else
#error "unknown NVR_MAP"
#endif
    }
}
#endif // NVR_MAP
