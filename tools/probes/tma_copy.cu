// Probe: can an SM kernel move data over NVLink at the copy engines' rate by the Hopper bulk
// copy unit (TMA: cp.async.bulk from global memory into shared memory, then from shared memory
// to the peer's global memory), where plain SM stores reach 361-368 GB/s a direction and copy
// engines 383-395 (docs/performance.md, "The link's ceiling")? A copy engine call pays 14-16 us
// of kernel-to-copy-engine transitions in a stream or graph (tools/probes/ce_frame.cu), so a
// kernel at the engines' rate would carry the 128 MiB copies without them.
//
//   nvcc -O3 -std=c++17 -arch=sm_90 tools/probes/tma_copy.cu -o /tmp/tma_copy
//   /tmp/tma_copy
//
// Two GPUs of one process, peer access, cudaMalloc. For each size (16, 64 and 256 MiB) and
// direction (one way: GPU 0 to GPU 1; both: each GPU to the other at once), each mover copies
// its src into the peer's dst (push) or the peer's src into its own dst (pull):
//   ce          cudaMemcpyAsync (copy engine)
//   sm          a grid-stride uint4 copy kernel, 2 blocks of 512 threads an SM
//   tma C/S/G   one thread a block drives S stages of C bytes of shared memory: bulk loads
//               (mbarrier-completed) and bulk stores, G blocks. (With 66 and 132 blocks, run
//               once on 2 x H200, every 64 MiB move came out wrong and every move was slower
//               than with 32, 272-324 GB/s; the cause was not looked for, those grids are
//               left out.)
// Output: `probe: MOVER WAY SIZE: T us, X GB/s a direction, ok|WRONG`, T the median of 5 timed
// calls (after one warm-up), the slower GPU's; every output is checked (sampled) after.
#include "probe.cuh"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

__global__ void sm_copy(uint4 *dst, const uint4 *src, size_t n) {
    for (size_t j = blockIdx.x * (size_t)blockDim.x + threadIdx.x; j < n;
         j += (size_t)gridDim.x * blockDim.x)
        dst[j] = src[j];
}

__device__ __forceinline__ unsigned smem(const void *p) {
    return (unsigned)__cvta_generic_to_shared(p);
}

// Block b copies bytes [b * per, min(bytes, (b + 1) * per)) of src to dst in chunks of c bytes
// (bytes, per and c multiples of 16), through `stages` buffers of shared memory.
__global__ void tma_copy(char *dst, const char *src, size_t bytes, size_t per, unsigned c,
                         int stages) {
    extern __shared__ __align__(128) char buf[];
    __shared__ __align__(8) unsigned long long bar[8];
    if (threadIdx.x != 0) return;
    const size_t lo = min(bytes, (size_t)blockIdx.x * per), hi = min(bytes, lo + per);
    const size_t n = (hi - lo + c - 1) / c;
    for (int s = 0; s < stages; ++s)
        asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(smem(&bar[s])));
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    auto load = [&](size_t k) {
        const int s = (int)(k % stages);
        const unsigned len = (unsigned)min((size_t)c, hi - (lo + k * c));
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(
                         smem(&bar[s])),
                     "r"(len)
                     : "memory");
        asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], "
                     "[%1], %2, [%3];" ::"r"(smem(buf + (size_t)s * c)),
                     "l"(src + lo + k * c), "r"(len), "r"(smem(&bar[s]))
                     : "memory");
    };
    for (size_t k = 0; k < n && k < (size_t)stages; ++k) load(k);
    for (size_t k = 0; k < n; ++k) {
        const int s = (int)(k % stages);
        const unsigned parity = (unsigned)((k / stages) & 1);
        const unsigned len = (unsigned)min((size_t)c, hi - (lo + k * c));
        asm volatile("{\n .reg .pred p;\n W: mbarrier.try_wait.parity.shared::cta.b64 p, [%0], "
                     "%1;\n @!p bra W;\n}" ::"r"(smem(&bar[s])),
                     "r"(parity)
                     : "memory");
        asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"(
                         dst + lo + k * c),
                     "r"(smem(buf + (size_t)s * c)), "r"(len)
                     : "memory");
        asm volatile("cp.async.bulk.commit_group;" ::: "memory");
        if (k + stages < n) {
            // Stage s is free once the store just issued has read it.
            asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
            load(k + stages);
        }
    }
    asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
}

struct Gpu {
    char *src, *dst;
    cudaStream_t s;
    cudaEvent_t t0, t1;
};

static int g_sms = 132;

struct Mover {
    std::string name;
    int kind; // 0 ce, 1 sm, 2 tma
    unsigned c;
    int stages, grid;
};

static void move(const Mover &m, char *dst, const char *src, size_t bytes, cudaStream_t s) {
    if (m.kind == 0) {
        CK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, s));
    } else if (m.kind == 1) {
        sm_copy<<<2 * g_sms, 512, 0, s>>>((uint4 *)dst, (const uint4 *)src, bytes / 16);
    } else {
        const size_t per = (bytes / m.grid + 15) / 16 * 16;
        tma_copy<<<m.grid, 32, (size_t)m.c * m.stages, s>>>(dst, src, bytes, per, m.c, m.stages);
    }
    CK(cudaGetLastError());
}

int main() {
    const cudaDeviceProp prop = two_gpus();
    g_sms = prop.multiProcessorCount;
    printf("probe: %s x 2, %d SMs\n", prop.name, g_sms);
    const size_t max_b = (size_t)256 << 20;
    Gpu g[2];
    for (int i = 0; i < 2; ++i) {
        CK(cudaSetDevice(i));
        CK(cudaDeviceEnablePeerAccess(1 - i, 0));
        CK(cudaFuncSetAttribute(tma_copy, cudaFuncAttributeMaxDynamicSharedMemorySize, 200 << 10));
        CK(cudaMalloc(&g[i].src, max_b));
        CK(cudaMalloc(&g[i].dst, max_b));
        std::vector<unsigned char> h(max_b);
        for (size_t k = 0; k < max_b; ++k) h[k] = (unsigned char)(k * 7 + i * 13 + 1);
        CK(cudaMemcpy(g[i].src, h.data(), max_b, cudaMemcpyHostToDevice));
        CK(cudaStreamCreateWithFlags(&g[i].s, cudaStreamNonBlocking));
        CK(cudaEventCreate(&g[i].t0));
        CK(cudaEventCreate(&g[i].t1));
    }
    std::vector<Mover> movers = {{"ce", 0, 0, 0, 0}, {"sm", 1, 0, 0, 0}};
    for (unsigned c : {16u << 10, 32u << 10})
        for (int stages : {4, 6})
            for (int grid : {16, 32}) {
                if ((size_t)c * stages > (200u << 10)) continue;
                movers.push_back({"tma " + std::to_string(c >> 10) + "K/" + std::to_string(stages) +
                                      "/" + std::to_string(grid),
                                  2, c, stages, grid});
            }
    int wrong = 0;
    for (size_t mib : {16, 64, 256}) {
        const size_t bytes = mib << 20;
        for (const Mover &m : movers)
            for (int way = 0; way < 4; ++way) { // push one, push both, pull one, pull both
                const bool both = way & 1, pull = way & 2;
                const int movers_n = both ? 2 : 1;
                for (int i = 0; i < 2; ++i) {
                    CK(cudaSetDevice(i));
                    CK(cudaMemset(g[i].dst, 0, bytes));
                    CK(cudaDeviceSynchronize());
                }
                std::vector<double> t;
                for (int rep = 0; rep < 6; ++rep) {
                    for (int i = 0; i < movers_n; ++i) {
                        CK(cudaSetDevice(i));
                        CK(cudaEventRecord(g[i].t0, g[i].s));
                        // Push: src here into the peer's dst; pull: the peer's src into dst here.
                        if (pull) move(m, g[i].dst, g[1 - i].src, bytes, g[i].s);
                        else move(m, g[1 - i].dst, g[i].src, bytes, g[i].s);
                        CK(cudaEventRecord(g[i].t1, g[i].s));
                    }
                    double worst = 0;
                    for (int i = 0; i < movers_n; ++i) {
                        CK(cudaSetDevice(i));
                        CK(cudaEventSynchronize(g[i].t1));
                        float ms = 0;
                        CK(cudaEventElapsedTime(&ms, g[i].t0, g[i].t1));
                        worst = std::max(worst, 1e3 * ms);
                    }
                    if (rep > 0) t.push_back(worst);
                }
                std::sort(t.begin(), t.end());
                bool ok = true;
                for (int i = 0; i < 2; ++i) {
                    // Which GPUs' dst were written, and from whom: push one: GPU 1 from 0;
                    // pull one: GPU 0 from 1; both: each from the other.
                    const bool written = both || (pull ? i == 0 : i == 1);
                    if (!written) continue;
                    CK(cudaSetDevice(i));
                    std::vector<unsigned char> out(bytes);
                    CK(cudaMemcpy(out.data(), g[i].dst, bytes, cudaMemcpyDeviceToHost));
                    for (size_t k = 0; k < bytes; k += 4093)
                        ok &= out[k] == (unsigned char)(k * 7 + (1 - i) * 13 + 1);
                    ok &= out[bytes - 1] == (unsigned char)((bytes - 1) * 7 + (1 - i) * 13 + 1);
                }
                wrong += !ok;
                printf("probe: %-14s %s %-4s %4zu MiB: %9.1f us, %6.1f GB/s a direction%s\n",
                       m.name.c_str(), pull ? "pull" : "push", both ? "both" : "one", mib, t[2],
                       bytes / (t[2] * 1e3), ok ? "" : "  WRONG");
                fflush(stdout);
            }
    }
    printf("probe: done, %d wrong\n", wrong);
    return wrong != 0;
}
