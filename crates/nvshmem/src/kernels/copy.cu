// Gather to one buffer from peer-mapped buffers, and scatter from one buffer to them.
//
// The Rust side prepends `#define NVR_W <word type>`: the widest word (1, 2, 4, 8 or 16
// bytes) that divides every pointer and the block size, so the copy is vectorised when it can be.

// Must match MAX_PEERS in kernels/mod.rs.
#define NVR_MAX_PEERS 128

struct __align__(16) nvr_w16 {
    unsigned long long lo, hi;
};

struct nvr_wpeers {
    NVR_W *p[NVR_MAX_PEERS];
};

typedef unsigned long long nvr_size;

// dst[b * words + i] = src.p[b][i] for every block b < n and word i < words.
extern "C" __global__ void nvr_gather(nvr_wpeers src, int n, NVR_W *dst, nvr_size words) {
    const nvr_size total = (nvr_size)n * words;
    for (nvr_size k = (nvr_size)blockIdx.x * blockDim.x + threadIdx.x; k < total;
         k += (nvr_size)gridDim.x * blockDim.x) {
        const nvr_size b = k / words;
        dst[k] = src.p[b][k - b * words];
    }
}

// dst.p[b][i] = src[b * words + i] for every block b < n and word i < words.
extern "C" __global__ void nvr_scatter(const NVR_W *src, nvr_wpeers dst, int n, nvr_size words) {
    const nvr_size total = (nvr_size)n * words;
    for (nvr_size k = (nvr_size)blockIdx.x * blockDim.x + threadIdx.x; k < total;
         k += (nvr_size)gridDim.x * blockDim.x) {
        const nvr_size b = k / words;
        dst.p[b][k - b * words] = src[k];
    }
}
