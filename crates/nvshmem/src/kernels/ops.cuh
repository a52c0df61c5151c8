// The operators of this crate's reduction kernels, shared by every kernel source that reduces
// (reduce.cu, ll.cu, direct.cu).
//
// The Rust side prepends a prefix that defines, for a reduction kernel,
//   NVR_T          the element's C type
//   NVR_ACC        the type arithmetic is done in (float for 16- and 8-bit floats,
//                  64-bit for integers so avg and premulsum cannot overflow midway)
//   NVR_LOAD(x)    NVR_T -> NVR_ACC
//   NVR_STORE(a)   NVR_ACC -> NVR_T (round to nearest even; fp8 saturates to finite)
//   NVR_IS_FLOAT   1 for floating-point types, else 0
//   NVR_OP         one of the NVR_OP_* values below
// and the fp16/bf16/fp8 headers where the type needs them. Data-movement kernels are compiled
// without NVR_OP (and without NVR_T), so everything typed below is under #ifdef NVR_OP.

#define NVR_OP_SUM 0
#define NVR_OP_MIN 1
#define NVR_OP_MAX 2
#define NVR_OP_AND 3
#define NVR_OP_OR 4
#define NVR_OP_AVG 5
#define NVR_OP_PREMULSUM 6
// Product: numbers only (NVSHMEM keeps prod for its own path; the LL kernels have it too).
// Integers multiply in 64 bits and wrap on the store, which equals wrapping in the narrow type.
#define NVR_OP_PROD 7
// Bitwise xor: integers only.
#define NVR_OP_XOR 8

#ifdef NVR_OP
__device__ __forceinline__ NVR_ACC nvr_combine(NVR_ACC a, NVR_ACC b) {
#if NVR_OP == NVR_OP_SUM || NVR_OP == NVR_OP_AVG || NVR_OP == NVR_OP_PREMULSUM
    return a + b;
#elif NVR_OP == NVR_OP_PROD
    return a * b;
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
    return scale * x;
#else
    (void)scale;
    return x;
#endif
}

// What the combination of all n members becomes before it is stored: avg divides by n
// (integers truncate toward zero).
__device__ __forceinline__ NVR_ACC nvr_post(NVR_ACC a, int n) {
#if NVR_OP == NVR_OP_AVG
    return a / (NVR_ACC)n;
#else
    (void)n;
    return a;
#endif
}
#endif // NVR_OP
