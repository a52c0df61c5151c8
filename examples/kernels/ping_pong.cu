// The kernel of examples/ping_pong.rs: a token goes round a ring of PEs by put-with-signal.
// Compiled at run time by nvshmem::device; scripts/check-kernels.sh compiles and links it in CI.
#include <nvshmem_rs.cuh>

__device__ __forceinline__ unsigned long long now_ns() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

// One thread per PE, `seen.len` laps. PE 0 starts each lap: it puts the lap number into the
// next PE's `token` and adds 1 to that PE's signal word; every other PE waits for its word to
// reach the lap, then passes the value it received on the same way; PE 0 waits for the token to
// come back before the next lap. With one PE the token goes to itself. `seen[lap - 1]` records,
// on every PE, the value that arrived in each lap (the host checks it); `sig` ends at the
// number of laps everywhere. `elapsed[0]` gets the nanoseconds (GPU global timer) from the end
// of lap `warmup` to the end of the last lap: the timed laps, without the launches' skew.
extern "C" __global__ void ping_pong(nvrs_array<unsigned long long> token,
                                     nvrs_array<unsigned long long> seen, nvrs_signals sig,
                                     nvrs_array<unsigned long long> elapsed,
                                     unsigned long long warmup) {
    if (blockIdx.x != 0 || threadIdx.x != 0) return;
    const int me = nvshmem_my_pe(), npes = nvshmem_n_pes();
    const int next = (me + 1) % npes;
    unsigned long long *t = token.at(0);
    unsigned long long start = now_ns();
    for (unsigned long long lap = 1; lap <= seen.len; lap++) {
        if (me == 0) {
            *t = lap;
            nvshmem_putmem_signal_nbi(t, t, sizeof(*t), sig.at(0), 1, NVSHMEM_SIGNAL_ADD, next);
            nvrs_wait_ge(sig.at(0), lap);
        } else {
            nvrs_wait_ge(sig.at(0), lap);
            nvshmem_putmem_signal_nbi(t, t, sizeof(*t), sig.at(0), 1, NVSHMEM_SIGNAL_ADD, next);
        }
        seen[lap - 1] = *(volatile unsigned long long *)t;
        if (lap == warmup) start = now_ns();
    }
    *elapsed.at(0) = now_ns() - start;
    nvshmem_quiet();
}
