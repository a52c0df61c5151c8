// The kernel of examples/ping_pong.rs: a token goes round a ring of PEs by put-with-signal,
// `laps` times. Compiled at run time by nvshmem::device; scripts/check-kernels.sh compiles and
// links it in CI.
#include <nvshmem_rs.cuh>

// One thread per PE. PE 0 starts each lap: it puts the lap number into the next PE's `token`
// and adds 1 to its signal word; every other PE waits for its word to reach the lap, then
// passes the value it received on the same way; PE 0 waits for the token to come back before
// the next lap. With one PE the token goes to itself. `seen[lap - 1]` records, on every PE, the
// value that arrived in each lap (the host checks it), and `sig` ends at `laps` everywhere.
extern "C" __global__ void ping_pong(nvrs_array<unsigned long long> token,
                                     nvrs_array<unsigned long long> seen, nvrs_signals sig,
                                     unsigned long long laps) {
    if (blockIdx.x != 0 || threadIdx.x != 0) return;
    const int me = nvshmem_my_pe(), npes = nvshmem_n_pes();
    const int next = (me + 1) % npes;
    unsigned long long *t = token.at(0);
    for (unsigned long long lap = 1; lap <= laps; lap++) {
        if (me == 0) {
            *t = lap;
            nvshmem_putmem_signal_nbi(t, t, sizeof(*t), sig.at(0), 1, NVSHMEM_SIGNAL_ADD, next);
            nvrs_wait_ge(sig.at(0), lap);
        } else {
            nvrs_wait_ge(sig.at(0), lap);
            nvshmem_putmem_signal_nbi(t, t, sizeof(*t), sig.at(0), 1, NVSHMEM_SIGNAL_ADD, next);
        }
        *seen.at(lap - 1) = *(volatile unsigned long long *)t;
    }
    nvshmem_quiet();
}
