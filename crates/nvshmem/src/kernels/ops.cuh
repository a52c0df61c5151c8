// The operators of this crate's reduction kernels, shared by every kernel source that reduces
// (reduce.cu, ll.cu, direct.cu).
//
// The Rust side prepends a prefix that defines, for a reduction kernel,
//   NVR_T          the element's C type
//   NVR_ACC        the type arithmetic is done in: float for 16- and 8-bit floats, the type
//                  itself for f32 and f64, 64-bit integers for integers (signed for signed
//                  types), and nvr_i128 for an integer avg (the exact sum of every member)
//   NVR_LOAD(x)    NVR_T -> NVR_ACC
//   NVR_STORE(a)   NVR_ACC -> NVR_T (round to nearest even; fp8 saturates to finite; integers
//                  keep the low bits)
//   NVR_IS_FLOAT   1 for floating-point types, else 0
//   NVR_IS_SIGNED  1 for signed integer types, else 0
//   NVR_OP         one of the NVR_OP_* values (defined ahead of this file, see below)
// and the fp16/bf16/fp8 headers where the type needs them. Data-movement kernels are compiled
// without NVR_OP (and without NVR_T), so everything typed below is under #ifdef NVR_OP.
//
// Integer arithmetic never overflows a signed type (undefined in C++): sum, prod and
// premul_sum add and multiply in unsigned 64 bits (wrapping modulo 2^64, and so modulo 2^bits
// once stored), min and max compare as the type does (signed or not), and avg sums exactly in
// 128 bits and divides truncating toward zero.

// The NVR_OP_* values are defined ahead of this file by kernels/types.rs, one per row of the
// operator table (op.rs); each has its branch in nvr_combine below.

typedef unsigned long long nvr_wrap_t;

// Two's complement 128-bit integer: the exact sum of up to 2^63 64-bit integers (an integer
// avg's accumulator). Only what avg needs: build, add, divide by the team size, low bits.
struct nvr_i128 {
    unsigned long long lo, hi;
    __device__ __forceinline__ nvr_i128() : lo(0), hi(0) {}
    // The (unused) scale argument of the kernels converts to the accumulator type.
    __device__ __forceinline__ explicit nvr_i128(double) : lo(0), hi(0) {}
    __device__ __forceinline__ static nvr_i128 of_signed(long long x) {
        nvr_i128 r;
        r.lo = (unsigned long long)x;
        r.hi = x < 0 ? ~0ull : 0ull;
        return r;
    }
    __device__ __forceinline__ static nvr_i128 of_unsigned(unsigned long long x) {
        nvr_i128 r;
        r.lo = x;
        r.hi = 0;
        return r;
    }
};

__device__ __forceinline__ nvr_i128 nvr_add(nvr_i128 a, nvr_i128 b) {
    nvr_i128 r;
    r.lo = a.lo + b.lo;
    r.hi = a.hi + b.hi + (r.lo < a.lo ? 1ull : 0ull);
    return r;
}

// a / n truncated toward zero (n >= 1): the magnitude divided limb by limb (32 bits at a time,
// so each step's dividend fits in 64 bits), the sign put back.
__device__ __forceinline__ nvr_i128 nvr_div_n(nvr_i128 a, int n) {
    const bool neg = (a.hi >> 63) != 0;
    if (neg) {
        a.lo = ~a.lo + 1ull;
        a.hi = ~a.hi + (a.lo == 0 ? 1ull : 0ull);
    }
    const unsigned long long d = (unsigned long long)n;
    unsigned long long limb[4] = {a.hi >> 32, a.hi & 0xffffffffull, a.lo >> 32,
                                  a.lo & 0xffffffffull};
    unsigned long long r = 0;
#pragma unroll
    for (int k = 0; k < 4; ++k) {
        const unsigned long long cur = (r << 32) | limb[k];
        limb[k] = cur / d;
        r = cur % d;
    }
    nvr_i128 q;
    q.hi = (limb[0] << 32) | limb[1];
    q.lo = (limb[2] << 32) | limb[3];
    if (neg) {
        q.lo = ~q.lo + 1ull;
        q.hi = ~q.hi + (q.lo == 0 ? 1ull : 0ull);
    }
    return q;
}

// Sum and product: IEEE for floats; integers wrap in unsigned 64 bits (the conversion back to a
// signed type keeps the bits: two's complement in CUDA).
__device__ __forceinline__ float nvr_add(float a, float b) { return a + b; }
__device__ __forceinline__ double nvr_add(double a, double b) { return a + b; }
__device__ __forceinline__ long long nvr_add(long long a, long long b) {
    return (long long)((nvr_wrap_t)a + (nvr_wrap_t)b);
}
__device__ __forceinline__ unsigned long long nvr_add(unsigned long long a, unsigned long long b) {
    return a + b;
}
__device__ __forceinline__ float nvr_mul(float a, float b) { return a * b; }
__device__ __forceinline__ double nvr_mul(double a, double b) { return a * b; }
__device__ __forceinline__ long long nvr_mul(long long a, long long b) {
    return (long long)((nvr_wrap_t)a * (nvr_wrap_t)b);
}
__device__ __forceinline__ unsigned long long nvr_mul(unsigned long long a, unsigned long long b) {
    return a * b;
}
__device__ __forceinline__ float nvr_div_n(float a, int n) { return a / (float)n; }
__device__ __forceinline__ double nvr_div_n(double a, int n) { return a / (double)n; }

#ifdef NVR_OP
__device__ __forceinline__ NVR_ACC nvr_combine(NVR_ACC a, NVR_ACC b) {
#if NVR_OP == NVR_OP_SUM || NVR_OP == NVR_OP_AVG || NVR_OP == NVR_OP_PREMULSUM
    return nvr_add(a, b);
#elif NVR_OP == NVR_OP_PROD
    return nvr_mul(a, b);
#elif NVR_OP == NVR_OP_MIN
#if NVR_IS_FLOAT
    return fmin(a, b); // IEEE minNum: a NaN operand is ignored, as NVSHMEM's fmin-based min
#else
    return b < a ? b : a;
#endif
#elif NVR_OP == NVR_OP_MAX
#if NVR_IS_FLOAT
    return fmax(a, b);
#else
    return b > a ? b : a;
#endif
#elif NVR_OP == NVR_OP_AND
    return a & b;
#elif NVR_OP == NVR_OP_OR
    return a | b;
#elif NVR_OP == NVR_OP_XOR
    return a ^ b;
#else
#error "unknown NVR_OP"
#endif
}

// What one member's input becomes before it is combined: premul_sum scales it.
__device__ __forceinline__ NVR_ACC nvr_pre(NVR_ACC x, NVR_ACC scale) {
#if NVR_OP == NVR_OP_PREMULSUM
    return nvr_mul(scale, x);
#else
    (void)scale;
    return x;
#endif
}

// What the combination of all n members becomes before it is stored: avg divides by n
// (integers: the exact sum, truncated toward zero).
__device__ __forceinline__ NVR_ACC nvr_post(NVR_ACC a, int n) {
#if NVR_OP == NVR_OP_AVG
    return nvr_div_n(a, n);
#else
    (void)n;
    return a;
#endif
}
#endif // NVR_OP
