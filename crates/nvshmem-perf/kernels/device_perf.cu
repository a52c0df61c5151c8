// Device-initiated put latency and bandwidth, in the manner of NVSHMEM's perftest
// (perftest/device/pt-to-pt/shmem_put_latency.cu, shmem_put_bw.cu), and a put-with-signal
// ping-pong. `nvshmem-perf device` runs these kernels twice in one process: as nvshmem::device
// builds them (NVRTC + nvJitLink), and as nvcc builds them the usual way (-rdc=true, linked with
// libnvshmem_device.a; scripts/gpu-check.sh's `device` suite builds that on the GPU machine).
// Plain NVSHMEM C apart from the include, so both compilers take it unchanged.
#include <nvshmem_rs.cuh>

// One thread: `iters` blocking puts of `bytes` to `peer` (put, then quiet), as
// shmem_put_latency's thread variant.
extern "C" __global__ void put_latency_thread(char *data, size_t bytes, int peer, int iters) {
    if (threadIdx.x != 0 || blockIdx.x != 0) return;
    for (int i = 0; i < iters; i++) {
        nvshmem_putmem_nbi(data, data, bytes, peer);
        nvshmem_quiet();
    }
}

// One block: the same, each put by the whole block (shmem_put_latency's block variant).
extern "C" __global__ void put_latency_block(char *data, size_t bytes, int peer, int iters) {
    if (blockIdx.x != 0) return;
    for (int i = 0; i < iters; i++) {
        nvshmemx_putmem_nbi_block(data, data, bytes, peer);
        if (threadIdx.x == 0) nvshmem_quiet();
        __syncthreads();
    }
}

// Every block puts its share of `bytes` (a multiple of the grid size) `iters` times, without
// waiting in between; one quiet at the end (shmem_put_bw with the block scope).
extern "C" __global__ void put_bw(char *data, size_t bytes, int peer, int iters) {
    size_t share = bytes / gridDim.x;
    char *mine = data + blockIdx.x * share;
    for (int i = 0; i < iters; i++) nvshmemx_putmem_nbi_block(mine, mine, share, peer);
    if (threadIdx.x == 0) nvshmem_quiet();
}

// PE 0 and `peer` bounce `bytes` `iters` times by put-with-signal; each round trip is one put
// each way. With one PE, `peer` is PE 0 itself and each round trip is one put to itself and
// the wait for it. `sig` counts arrivals (never reset).
extern "C" __global__ void put_signal_ping_pong(char *data, size_t bytes, uint64_t *sig, int peer,
                                                int iters) {
    if (threadIdx.x != 0 || blockIdx.x != 0) return;
    int me = nvshmem_my_pe();
    for (int i = 1; i <= iters; i++) {
        if (me == 0) {
            nvshmem_putmem_signal_nbi(data, data, bytes, sig, 1, NVSHMEM_SIGNAL_ADD, peer);
            nvshmem_signal_wait_until(sig, NVSHMEM_CMP_GE, (uint64_t)i);
        } else {
            nvshmem_signal_wait_until(sig, NVSHMEM_CMP_GE, (uint64_t)i);
            nvshmem_putmem_signal_nbi(data, data, bytes, sig, 1, NVSHMEM_SIGNAL_ADD, 0);
        }
    }
    nvshmem_quiet();
}
