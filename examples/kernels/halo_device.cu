// The kernels of examples/halo_device.rs: a 1-D halo exchange on a ring of PEs where the stencil
// kernel moves its own edge cells. Compiled at run time by nvshmem::device (NVRTC + nvJitLink
// with NVSHMEM's device library); scripts/check-kernels.sh compiles and links it in CI.
#include <nvshmem_rs.cuh>
#include <cooperative_groups.h>

namespace cg = cooperative_groups;

// One persistent kernel runs every iteration (a collective launch: all blocks resident, so
// the grid can synchronise). Per iteration `it` (1-based):
//  1. block 0's thread 0 sends this PE's first element to the left neighbour's right ghost and
//     its last element to the right neighbour's left ghost, each a put-with-signal that adds 1
//     to the receiving side's signal word;
//  2. every thread smooths its elements, 0.25 * left + 0.5 * centre + 0.25 * right, into the
//     other buffer; the thread of element 0 first waits until the left ghost's word reads `it`,
//     the thread of element n - 1 until the right ghost's does (the words count puts and are
//     never reset; which block holds element n - 1 depends on the grid);
//  3. the grid synchronises and the buffers swap roles.
// Ghosts come in two sets used by iteration parity: a neighbour may be one iteration ahead (its
// puts for it + 1 land in the other set), never two (its puts for it + 2 follow its wait for
// this PE's puts of it + 1, which this PE sends only after the grid synchronised at the end of
// iteration it, when no block reads this iteration's set any more).
//
// u0, u1: the two buffers, n elements each (the result is in u0 after an even number of
// iterations, else in u1); ghosts: [left, right] for even iterations, then for odd ones;
// arrived: [left, right] signal words.
extern "C" __global__ void halo_device(nvrs_array<float> u0, nvrs_array<float> u1,
                                       nvrs_array<float> ghosts, nvrs_signals arrived,
                                       unsigned long long iters) {
    cg::grid_group grid = cg::this_grid();
    const int me = nvshmem_my_pe(), npes = nvshmem_n_pes();
    const int left = (me + npes - 1) % npes, right = (me + 1) % npes;
    const unsigned long long n = u0.len;
    const unsigned long long tid = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
    const unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    float *cur = u0.ptr, *next = u1.ptr;
    for (unsigned long long it = 1; it <= iters; it++) {
        float *g = ghosts.ptr + 2 * (it % 2);
        if (blockIdx.x == 0 && threadIdx.x == 0) {
            // My first element is the left neighbour's right ghost (index 1), my last the
            // right neighbour's left ghost (index 0).
            nvshmem_putmem_signal_nbi(g + 1, cur, sizeof(float), arrived.at(1), 1,
                                      NVSHMEM_SIGNAL_ADD, left);
            nvshmem_putmem_signal_nbi(g + 0, cur + n - 1, sizeof(float), arrived.at(0), 1,
                                      NVSHMEM_SIGNAL_ADD, right);
        }
        for (unsigned long long i = tid; i < n; i += stride) {
            // The threads of the two edge elements wait for their ghost themselves (the wait
            // orders the ghost's read after the neighbour's put), whichever block they are in.
            float l, r;
            if (i == 0) {
                nvrs_wait_ge(arrived.at(0), it);
                l = *(volatile float *)&g[0];
            } else {
                l = cur[i - 1];
            }
            if (i == n - 1) {
                nvrs_wait_ge(arrived.at(1), it);
                r = *(volatile float *)&g[1];
            } else {
                r = cur[i + 1];
            }
            next[i] = 0.25f * l + 0.5f * cur[i] + 0.25f * r;
        }
        // Every element of `next` written (and this iteration's ghosts read) before the next
        // iteration reads `next` or sends its edges.
        grid.sync();
        float *t = cur;
        cur = next;
        next = t;
    }
    // The puts of the last iteration are complete before the kernel ends (the host then reads
    // the peers' arrays only after a barrier).
    if (blockIdx.x == 0 && threadIdx.x == 0) nvshmem_quiet();
}

// The host-initiated variant's stencil (as examples/halo.rs): one iteration, ghosts given.
extern "C" __global__ void smooth(const float *u, float *out, const float *ghosts, unsigned n) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float l = i == 0 ? ghosts[0] : u[i - 1];
    float r = i == n - 1 ? ghosts[1] : u[i + 1];
    out[i] = 0.25f * l + 0.5f * u[i] + 0.25f * r;
}
