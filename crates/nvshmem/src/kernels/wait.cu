// The stream's wait for a signal word (Runtime::signal_wait_until): one thread polls this PE's
// word with system-scope acquire loads (so data put together with the signal, before it, is
// visible to every kernel after this one) until it compares true with `value`, reading the
// runtime's abort word and %globaltimer as every wait of PROTOCOL.md does (nvr_wait_slow).
// NVSHMEM's own nvshmemx_signal_wait_until_on_stream is not used: nothing could end it.
//
// Compiled as `common.cuh + wait.cu` (the status record, the memory operations). On abort or
// timeout it records NVR_WAIT_SIGNAL with the word's address and index, the comparison, the
// value and the last value seen, and returns: the work after it on the stream then runs, and
// the host reports the record as an error at the next call (or at once, after a
// synchronising copy to the host).

// The comparisons, numbered as NVSHMEM's NVSHMEM_CMP_* (the host passes its own numbering).
#define NVR_CMP_EQ 0
#define NVR_CMP_NE 1
#define NVR_CMP_GT 2
#define NVR_CMP_LE 3
#define NVR_CMP_LT 4
#define NVR_CMP_GE 5

__device__ __forceinline__ nvr_u64 nvr_ld_acquire64(const nvr_u64 *p) {
    nvr_u64 v;
    asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return v;
}

__device__ __forceinline__ bool nvr_cmp(int cmp, nvr_u64 a, nvr_u64 b) {
    switch (cmp) {
    case NVR_CMP_EQ: return a == b;
    case NVR_CMP_NE: return a != b;
    case NVR_CMP_GT: return a > b;
    case NVR_CMP_LE: return a <= b;
    case NVR_CMP_LT: return a < b;
    default: return a >= b; // NVR_CMP_GE (the host passes nothing else)
    }
}

// Records a failed signal wait (the first failure of this PE only), ready word last.
__device__ __noinline__ void nvr_fail_signal(unsigned int *status, unsigned int code,
                                             const nvr_u64 *sig, int cmp, nvr_u64 value,
                                             nvr_u64 seen, nvr_u64 index) {
    if (atomicCAS(status, 0u, code) == 0u) {
        volatile unsigned int *s = status;
        s[NVR_ST_PEER] = 0xFFFFFFFFu;
        s[NVR_ST_EPOCH] = 0;
        s[NVR_ST_WHAT] = NVR_WAIT_SIGNAL;
        s[NVR_ST_BLOCK] = 0;
        nvr_status64(s, NVR_ST_WHERE, (nvr_u64)sig);
        s[NVR_ST_CMP] = (unsigned int)cmp;
        nvr_status64(s, NVR_ST_VALUE, value);
        nvr_status64(s, NVR_ST_SEEN, seen);
        nvr_status64(s, NVR_ST_INDEX, index);
        nvr_status_ready(status, code);
    }
}

// Grid 1, block 32: thread 0 waits, the others return.
extern "C" __global__ void __launch_bounds__(32)
    nvr_signal_wait(const nvr_u64 *sig, int cmp, unsigned long long value,
                    unsigned long long index, unsigned int *control,
                    unsigned long long timeout_ns) {
    if (threadIdx.x != 0) return;
    // The runtime's host-mapped control block: the abort word, then the status record.
    const unsigned int *abort = control;
    unsigned int *status = control + 1;
    unsigned int polls = 0;
    nvr_wait_clock clock = {0, 0};
    nvr_u64 seen = nvr_ld_acquire64(sig);
    while (!nvr_cmp(cmp, seen, value)) {
        if ((++polls & 255u) == 0) {
            const nvr_u64 now = nvr_globaltimer();
            if (nvr_abort_due(clock, now) && *(volatile const unsigned int *)abort != 0) {
                nvr_fail_signal(status, NVR_FAIL_ABORT, sig, cmp, value, seen, index);
                return;
            }
            if (timeout_ns != 0 && now - clock.start >= timeout_ns) {
                nvr_fail_signal(status, NVR_FAIL_TIMEOUT, sig, cmp, value, seen, index);
                return;
            }
        }
        seen = nvr_ld_acquire64(sig);
    }
}
