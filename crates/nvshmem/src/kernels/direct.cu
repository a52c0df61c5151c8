// Large-message collectives over peer-mapped symmetric memory ("direct" algorithms of
// PROTOCOL.md): every kernel loads from and stores to its peers' user buffers over NVLink, with
// no staging, framed by the per-block arrive/depart flags of common.cuh.
//
// Compiled as  prefix + ops.cuh + common.cuh + direct.cu  (no #include of our own headers).
//   With NVR_OP defined (a reduction prefix of types.rs): the reductions
//     nvr_direct_all_reduce, nvr_direct_reduce_scatter, nvr_direct_reduce, and
//     nvr_direct_combine2 (the local step of the copy-engine reductions of 2-PE teams).
//   Without NVR_OP: the type-free data movement
//     nvr_direct_broadcast, nvr_direct_fcollect, nvr_direct_alltoall, nvr_direct_gather,
//     nvr_direct_scatter. (The copy-engine collectives are framed by ll.cu's nvr_barrier.)
//
// Launch: NVR_D_THREADS (512) threads per block; the grid is a pure function of (collective,
// bytes, team size, the team's max_blocks), the same on every member, at most 128 blocks and at
// most the blocks every member keeps resident (PROTOCOL.md, "Residency"):
//
//     W = bytes each PE moves over its links:
//         all_reduce, reduce:            count * size / n      (this PE's share)
//         reduce_scatter:                count * size          (one block)
//         broadcast:                     bytes
//         fcollect, alltoall, gather,
//         scatter:                       bytes * max(n - 1, 1) (bytes = one PE's block)
//     grid = clamp(ceil(W / 16 KiB), 1, min(128, max_blocks))
//
// (`direct_grid` in crates/nvshmem/src/collective/algo/nvlink.rs computes it; the rule is a
// tuning choice.)
//
// Compile-time knobs (all optional; the defaults are the library's choice):
//   NVR_D_INFLIGHT   16-byte vectors each thread loads before its first store (default 8)
//   NVR_D_BCAST      broadcast: 0 push when n == 2 else pull-and-forward (default), 1 push,
//                    2 pull, 3 pull-and-forward
//
// Algorithms, and what crosses each link per direction for n PEs (S = nccl-tests' bytes):
//   all_reduce      two-shot: PE i loads share i (S/n) from every member, combines in team
//                   order, stores the result to every member; (n-1)/n S loaded plus (n-1)/n S
//                   stored per PE, both directions.
//   reduce_scatter  PE i loads its block from every member; (n-1)/n S loaded per PE.
//   reduce          two-shot to the root (nvr_direct_reduce), as all_reduce but results
//                   stored to the root only: 2 (n-1)/n S into the root (1.5 S at n = 4).
//                   The non-roots' split (nvr_direct_reduce_split): non-root k of the n - 1
//                   loads share k (S/(n-1)) from every member, the root included, and stores
//                   the result into the root's dst; the root computes nothing, and every link
//                   carries at most S each way (the root: S of results in, its src out once).
//                   The root's pull (nvr_direct_reduce_pull): the root loads everything
//                   ((n-1) S into the root: on a pair, S, as the split, but with nothing
//                   stored over the link).
//   broadcast       n == 2: the root stores to the peer (S one way). n > 2: pull-and-forward,
//                   non-root r loads share r of the root's src once and stores it to every
//                   non-root, so the root's link carries S once (not (n-1) S).
//   fcollect        every PE stores its block to every member ((n-1) S/n out per PE).
//   alltoall        block j of my src stored into PE j's dst.
//   gather/scatter  the data's owner stores (non-roots into the root / the root into
//                   everyone).
// (The data movement had a pull mode, the receiver loading, behind a compile-time knob that
// nothing set and no test ran; it was removed when its in-place gather was found reading each
// peer's block at the root's index.)
// Entry and exit per block (nvr_d_enter/nvr_d_exit): a PE waits for the arrival of the peers
// whose buffers it touches and, at exit, for the departure of the peers that touch its own and
// the arrival of the others (quiescence: PROTOCOL.md).
//
// Memory access. The body of every buffer is moved in 16-byte vectors: loads are aligned to 16
// bytes on the source side (every member's copy of a symmetric buffer has the same alignment,
// since peer offsets are multiples of 16), stores use the widest word that the destination's
// alignment relative to the source allows (16 when src and dst share 16-byte alignment, the
// fast path; else 8, 4, 2 or 1-byte pieces of the same vector). The head before the first
// aligned vector and the tail after the last (under 16 bytes each) go element by element
// (reductions) or byte by byte (data movement). Each thread first loads NVR_D_INFLIGHT vectors
// (from one or several members), then combines and stores them, so many loads are in flight
// per thread.

#ifndef NVR_D_INFLIGHT
#define NVR_D_INFLIGHT 8
#endif

typedef nvr_u64 nvr_d_u64;

// Threads per block of every direct kernel (the host launches exactly this many).
#define NVR_D_THREADS 512

// ---- entry and exit of a direct algorithm (PROTOCOL.md, "Arrive and depart") ----
// `touch`: bit j set when this PE loads from or stores to team PE j's buffers in this call;
// `touched_by`: bit j set when PE j loads from or stores to this PE's buffers.

// Every thread of the block calls this. Arrive on every peer, then wait (flag lanes, then a
// block barrier) until every peer this PE touches has started this epoch: its earlier work is
// done, its inputs written, its outputs free. False when a wait was aborted or timed out (the
// status record says which); the block must then return at once (its epoch stays behind; the
// host zeroes the channel).
__device__ __forceinline__ bool nvr_d_enter(const nvr_team &t, unsigned touch, unsigned *e_out) {
    if (!nvr_team_ok(t))
        return false;
    const unsigned e = nvr_arrive_ordered(t, NVR_ARRIVE_RELEASE);
    const bool ok = nvr_wait_arrivals(t, e, e, touch);
    *e_out = e;
    return nvr_block_ok(ok);
}

// Whether `root` names a team member; records NVR_FAIL_LIMITS otherwise (every block returns,
// on every member alike, so no one waits).
__device__ __forceinline__ bool nvr_d_root_ok(const nvr_team &t, int root) {
    const bool ok = root >= 0 && root < t.n;
    if (!ok && threadIdx.x == 0)
        nvr_fail_at(t.status, NVR_FAIL_LIMITS, -1, 0, 0, t.chan); // no PE was waited for
    return ok;
}

// Every thread of the block calls this after its last access to peers' buffers: depart to the
// peers touched (a block barrier, then fence.sc.sys and a relaxed store per peer), wait until
// every peer that touches this PE has departed, and until every peer has arrived (those it
// touches were waited for at entry; the others' arrival stores must have landed before the
// block ends: quiescence, PROTOCOL.md), advance the epoch. Once every block has passed it, no
// peer still reads this PE's src or writes its dst, and nothing more lands in its channel.
__device__ __forceinline__ void nvr_d_exit(const nvr_team &t, unsigned e, unsigned touch,
                                           unsigned touched_by) {
    nvr_depart(t, e, touch);
    const bool ok = nvr_wait_departs(t, e, touched_by);
    nvr_end(t, e, nvr_quiesce(t, e, nvr_all_peers(t) & ~touch, ok));
}

__device__ __forceinline__ uint4 nvr_d_ld16(const char *p) {
    uint4 v;
    asm volatile("ld.global.v4.u32 {%0,%1,%2,%3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "l"(__cvta_generic_to_global(p))
                 : "memory");
    return v;
}

__device__ __forceinline__ void nvr_d_st16(char *p, uint4 v) {
    asm volatile("st.global.v4.u32 [%0], {%1,%2,%3,%4};" ::"l"(__cvta_generic_to_global(p)),
                 "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w)
                 : "memory");
}

// Stores vector `v` at `p`, which is aligned to `w` (16, 8, 4, 2 or 1) bytes. `w` is the same
// for every thread of a call, so the branch does not diverge.
__device__ __forceinline__ void nvr_d_st(char *p, uint4 v, int w) {
    if (w == 16) {
        nvr_d_st16(p, v);
    } else if (w == 8) {
        unsigned long long *q = (unsigned long long *)p;
        q[0] = ((unsigned long long)v.y << 32) | v.x;
        q[1] = ((unsigned long long)v.w << 32) | v.z;
    } else if (w == 4) {
        unsigned *q = (unsigned *)p;
        q[0] = v.x;
        q[1] = v.y;
        q[2] = v.z;
        q[3] = v.w;
    } else {
        const unsigned u[4] = {v.x, v.y, v.z, v.w};
        if (w == 2) {
            unsigned short *q = (unsigned short *)p;
#pragma unroll
            for (int k = 0; k < 8; ++k)
                q[k] = (unsigned short)(u[k >> 1] >> (16 * (k & 1)));
        } else {
#pragma unroll
            for (int k = 0; k < 16; ++k)
                p[k] = (char)(u[k >> 2] >> (8 * (k & 3)));
        }
    }
}

// The widest word (16, 8, 4, 2, 1) that stores at dst can use when loads at src are 16-byte
// aligned.
__device__ __forceinline__ int nvr_d_store_width(const void *src, const void *dst) {
    const unsigned d = (unsigned)((nvr_d_u64)dst - (nvr_d_u64)src) & 15u;
    return d == 0 ? 16 : (int)(d & (0u - d));
}

// Bytes from p to the next 16-byte boundary.
__device__ __forceinline__ nvr_d_u64 nvr_d_head(const void *p) {
    return (16u - ((unsigned)(nvr_d_u64)p & 15u)) & 15u;
}

__device__ __forceinline__ nvr_d_u64 nvr_d_gtid() {
    return (nvr_d_u64)blockIdx.x * blockDim.x + threadIdx.x;
}

__device__ __forceinline__ nvr_d_u64 nvr_d_gsize() {
    return (nvr_d_u64)gridDim.x * blockDim.x;
}

#define NVR_D_BIT(m, j) (((m) >> (j)) & 1u)

// Vectors each thread loads per member and iteration when loading from up to NMAX members.
template <int NMAX> struct nvr_d_unroll {
    static constexpr int u = NVR_D_INFLIGHT / NMAX > 0 ? NVR_D_INFLIGHT / NMAX : 1;
};

#ifdef NVR_OP
// ============================== reductions ==============================

#define NVR_D_E ((int)(16 / sizeof(NVR_T)))

union nvr_d_pack {
    uint4 v;
    NVR_T e[NVR_D_E];
};

// The reduction of vector r[0..n) element by element, members combined in team order (so every
// PE computes the same bits), in NVR_ACC.
template <int NMAX>
__device__ __forceinline__ uint4 nvr_d_combine16(const uint4 (&r)[NMAX], int n, NVR_ACC sc) {
    nvr_d_pack in[NMAX];
#pragma unroll
    for (int j = 0; j < NMAX; ++j)
        in[j].v = r[j];
    nvr_d_pack out;
#pragma unroll
    for (int k = 0; k < NVR_D_E; ++k) {
        NVR_ACC a = nvr_pre(NVR_LOAD(in[0].e[k]), sc);
#pragma unroll
        for (int j = 1; j < NMAX; ++j)
            if (j < n)
                a = nvr_combine(a, nvr_pre(NVR_LOAD(in[j].e[k]), sc));
        out.e[k] = NVR_STORE(nvr_post(a, n));
    }
    return out.v;
}

// One reduction job: element i of the result is the combination of src[j][i] over members
// j < n, stored at dst[j][i] for every j < nd. src[j], dst[j] are byte addresses of element 0.
// Every src[j] has the same alignment modulo 16. The vectors are split into `parts` equal
// ranges, of which this PE does range `part`; the head and tail elements go to part 0.
template <int NMAX>
__device__ __forceinline__ void nvr_d_reduce_job(const char *const (&src)[NMAX], int n,
                                                 char *const (&dst)[NMAX], int nd,
                                                 nvr_d_u64 count, int part, int parts,
                                                 NVR_ACC sc) {
    constexpr int U = nvr_d_unroll<NMAX>::u;
    const nvr_d_u64 s = sizeof(NVR_T);
    nvr_d_u64 head = nvr_d_head(src[0]) / s;
    if (head > count)
        head = count;
    const nvr_d_u64 nvec = (count - head) * s / 16;
    const nvr_d_u64 body = nvec * NVR_D_E;
    const nvr_d_u64 tail = count - head - body;
    const int w = nvr_d_store_width(src[0], dst[0]);
    const nvr_d_u64 G = nvr_d_gsize();
    const nvr_d_u64 v0 = nvec * (nvr_d_u64)part / (nvr_d_u64)parts;
    const nvr_d_u64 v1 = nvec * (nvr_d_u64)(part + 1) / (nvr_d_u64)parts;
    const nvr_d_u64 hb = head * s;

    for (nvr_d_u64 base = v0 + nvr_d_gtid(); base < v1; base += U * G) {
        uint4 r[U][NMAX];
#pragma unroll
        for (int u = 0; u < U; ++u) {
            const nvr_d_u64 i = base + u * G;
            if (i < v1) {
#pragma unroll
                for (int j = 0; j < NMAX; ++j)
                    if (j < n)
                        r[u][j] = nvr_d_ld16(src[j] + hb + 16 * i);
            }
        }
#pragma unroll
        for (int u = 0; u < U; ++u) {
            const nvr_d_u64 i = base + u * G;
            if (i < v1) {
                const uint4 o = nvr_d_combine16<NMAX>(r[u], n, sc);
#pragma unroll
                for (int j = 0; j < NMAX; ++j)
                    if (j < nd)
                        nvr_d_st(dst[j] + hb + 16 * i, o, w);
            }
        }
    }

    if (part == 0) {
        // At most 2 * 15 elements: no need for speed.
        for (nvr_d_u64 k = nvr_d_gtid(); k < head + tail; k += G) {
            const nvr_d_u64 el = k < head ? k : k + body;
            NVR_ACC a = nvr_pre(NVR_LOAD(((const NVR_T *)src[0])[el]), sc);
#pragma unroll
            for (int j = 1; j < NMAX; ++j)
                if (j < n)
                    a = nvr_combine(a, nvr_pre(NVR_LOAD(((const NVR_T *)src[j])[el]), sc));
            const NVR_T o = NVR_STORE(nvr_post(a, n));
#pragma unroll
            for (int j = 0; j < NMAX; ++j)
                if (j < nd)
                    ((NVR_T *)dst[j])[el] = o;
        }
    }
}

// Two-shot all-reduce (reduce-scatter by loads, all-gather by stores): this PE reduces the
// me-th share of the vectors from every member's src and stores the result into every member's
// dst. In place (src == dst) works: each element is read and then written by the same thread.
template <int NMAX>
__device__ void nvr_d_all_reduce(const nvr_team &t, const NVR_T *src, NVR_T *dst,
                                 nvr_d_u64 count, NVR_ACC sc) {
    const char *s[NMAX];
    char *d[NMAX];
#pragma unroll
    for (int j = 0; j < NMAX; ++j) {
        s[j] = (const char *)src + (j < t.n ? t.off[j] : 0);
        d[j] = (char *)dst + (j < t.n ? t.off[j] : 0);
    }
    nvr_d_reduce_job<NMAX>(s, t.n, d, t.n, count, t.me, t.n, sc);
}

// This PE's block me of the members' src, reduced into its own dst (count elements).
template <int NMAX>
__device__ void nvr_d_reduce_scatter(const nvr_team &t, const NVR_T *src, NVR_T *dst,
                                     nvr_d_u64 count, NVR_ACC sc) {
    const char *s[NMAX];
    char *d[NMAX];
    const nvr_d_u64 blk = (nvr_d_u64)t.me * count * sizeof(NVR_T);
#pragma unroll
    for (int j = 0; j < NMAX; ++j) {
        s[j] = (const char *)src + blk + (j < t.n ? t.off[j] : 0);
        d[j] = (char *)dst;
    }
    nvr_d_reduce_job<NMAX>(s, t.n, d, 1, count, 0, 1, sc);
}

// The rooted reduce's ways (the header's table). Every way combines in team order.
#define NVR_D_TWO_SHOT 0 // every PE reduces its share into the root's dst
#define NVR_D_PULL 1     // the root reduces everything alone
#define NVR_D_SPLIT 2    // the non-roots share the work; the root computes nothing

template <int NMAX>
__device__ void nvr_d_reduce(const nvr_team &t, int root, const NVR_T *src, NVR_T *dst,
                             nvr_d_u64 count, NVR_ACC sc, int way) {
    const char *s[NMAX];
    char *d[NMAX];
#pragma unroll
    for (int j = 0; j < NMAX; ++j) {
        s[j] = (const char *)src + (j < t.n ? t.off[j] : 0);
        d[j] = (char *)dst + t.off[root];
    }
    if (way == NVR_D_TWO_SHOT)
        nvr_d_reduce_job<NMAX>(s, t.n, d, 1, count, t.me, t.n, sc);
    else if (way == NVR_D_PULL && t.me == root)
        nvr_d_reduce_job<NMAX>(s, t.n, d, 1, count, 0, 1, sc);
    else if (way == NVR_D_SPLIT && t.me != root)
        nvr_d_reduce_job<NMAX>(s, t.n, d, 1, count, t.me < root ? t.me : t.me - 1, t.n - 1, sc);
}

// Every PE: dst[i] = combine over members j (team order) of src_j[i], i < count. Every member
// loads from and stores to every member.
extern "C" __global__ void __launch_bounds__(NVR_D_THREADS, 1)
    nvr_direct_all_reduce(const __grid_constant__ nvr_team t, const NVR_T *src, NVR_T *dst,
                          nvr_d_u64 count, double scale) {
    nvr_launch_begin();
    const unsigned all = nvr_all_peers(t);
    unsigned e;
    if (!nvr_d_enter(t, all, &e))
        return;
    NVR_TEAM_DISPATCH(t.n, nvr_d_all_reduce, t, src, dst, count, (NVR_ACC)scale);
    nvr_d_exit(t, e, all, all);
}

// Every PE: dst[i] = combine over members j of src_j[me * count + i], i < count (NCCL's
// reduce-scatter; count is the elements of one block = dst). In place: dst == src + me * count.
extern "C" __global__ void __launch_bounds__(NVR_D_THREADS, 1)
    nvr_direct_reduce_scatter(const __grid_constant__ nvr_team t, const NVR_T *src, NVR_T *dst,
                              nvr_d_u64 count, double scale) {
    nvr_launch_begin();
    const unsigned all = nvr_all_peers(t);
    unsigned e;
    if (!nvr_d_enter(t, all, &e))
        return;
    NVR_TEAM_DISPATCH(t.n, nvr_d_reduce_scatter, t, src, dst, count, (NVR_ACC)scale);
    nvr_d_exit(t, e, all, all);
}

// The rooted reduce's kernels' body: the root's dst[i] = combine over members of src_j[i];
// other PEs' dst untouched.
__device__ __forceinline__ void nvr_d_reduce_run(const nvr_team &t, int root, const NVR_T *src,
                                                 NVR_T *dst, nvr_d_u64 count, double scale,
                                                 int way) {
    if (!nvr_d_root_ok(t, root))
        return;
    const unsigned all = nvr_all_peers(t), root_bit = 1u << root;
    // Two-shot: everyone loads from everyone. Pull: only the root loads, from everyone. Split:
    // the non-roots load from everyone and store into the root; the root touches nothing.
    unsigned touch = all, touched_by = all;
    if (way == NVR_D_PULL) {
        touch = t.me == root ? all : 0u;
        touched_by = t.me == root ? 0u : root_bit;
    } else if (way == NVR_D_SPLIT) {
        touch = t.me == root ? 0u : all;
        touched_by = t.me == root ? all : all & ~root_bit;
    }
    unsigned e;
    if (!nvr_d_enter(t, touch, &e))
        return;
    NVR_TEAM_DISPATCH(t.n, nvr_d_reduce, t, root, src, dst, count, (NVR_ACC)scale, way);
    nvr_d_exit(t, e, touch, touched_by);
}

// Rooted reduce, two-shot; the host takes it below REDUCE_PULL_FROM on pairs and below
// REDUCE_SPLIT_FROM on larger teams (nvlink.rs).
extern "C" __global__ void __launch_bounds__(NVR_D_THREADS, 1)
    nvr_direct_reduce(const __grid_constant__ nvr_team t, int root, const NVR_T *src, NVR_T *dst,
                      nvr_d_u64 count, double scale) {
    nvr_launch_begin();
    nvr_d_reduce_run(t, root, src, dst, count, scale, NVR_D_TWO_SHOT);
}

// Rooted reduce, the root's pull; the host takes it on pairs for large calls only (nvlink.rs,
// REDUCE_PULL_FROM).
extern "C" __global__ void __launch_bounds__(NVR_D_THREADS, 1)
    nvr_direct_reduce_pull(const __grid_constant__ nvr_team t, int root, const NVR_T *src,
                           NVR_T *dst, nvr_d_u64 count, double scale) {
    nvr_launch_begin();
    nvr_d_reduce_run(t, root, src, dst, count, scale, NVR_D_PULL);
}

// Rooted reduce, the non-roots' split; the host takes it from 3 PEs for large calls only
// (nvlink.rs, REDUCE_SPLIT_FROM).
extern "C" __global__ void __launch_bounds__(NVR_D_THREADS, 1)
    nvr_direct_reduce_split(const __grid_constant__ nvr_team t, int root, const NVR_T *src,
                            NVR_T *dst, nvr_d_u64 count, double scale) {
    nvr_launch_begin();
    nvr_d_reduce_run(t, root, src, dst, count, scale, NVR_D_SPLIT);
}

// dst[i] = post(combine(pre(a[i]), pre(b[i])), 2) for i < count, all three local (dst may be
// a or b). The reduction step of the copy-engine reductions of 2-PE teams: a copy engine has
// brought the peer's contribution next to this PE's, and `a` is team PE 0's, `b` PE 1's, so
// the bits equal the direct kernels'. No flags: the host orders it with events.
extern "C" __global__ void __launch_bounds__(NVR_D_THREADS, 1)
    nvr_direct_combine2(const NVR_T *a, const NVR_T *b, NVR_T *dst, nvr_d_u64 count,
                        double scale) {
    nvr_launch_begin();
    const NVR_ACC sc = (NVR_ACC)scale;
    const char *s[2] = {(const char *)a, (const char *)b};
    char *d[2] = {(char *)dst, (char *)dst};
    if ((((nvr_d_u64)a ^ (nvr_d_u64)b) & 15u) == 0) {
        nvr_d_reduce_job<2>(s, 2, d, 1, count, 0, 1, sc);
        return;
    }
    // a and b differ in 16-byte alignment: element by element.
    for (nvr_d_u64 i = nvr_d_gtid(); i < count; i += nvr_d_gsize()) {
        const NVR_ACC x = nvr_pre(NVR_LOAD(a[i]), sc);
        dst[i] = NVR_STORE(nvr_post(nvr_combine(x, nvr_pre(NVR_LOAD(b[i]), sc)), 2));
    }
}

#else // !NVR_OP
// ============================== data movement ==============================

// Copies `bytes` from src[j] to dst[j] for every j in `act` (a bit mask over 0..K). When
// ONE_SRC, every pair reads src0 instead (loaded once, stored to every dst[j]).
template <int K, bool ONE_SRC>
__device__ void nvr_d_copy_joint(const char *src0, const char *const (&src)[K],
                                 char *const (&dst)[K], unsigned act, nvr_d_u64 bytes) {
    constexpr int L = ONE_SRC ? 1 : K;
    constexpr int U = nvr_d_unroll<L>::u;
    const char *first = src0;
#pragma unroll
    for (int j = K - 1; j >= 0; --j)
        if (!ONE_SRC && NVR_D_BIT(act, j))
            first = src[j];
    nvr_d_u64 head = nvr_d_head(first);
    if (head > bytes)
        head = bytes;
    const nvr_d_u64 nvec = (bytes - head) / 16;
    const nvr_d_u64 body = 16 * nvec;
    const nvr_d_u64 tail = bytes - head - body;
    const nvr_d_u64 G = nvr_d_gsize();
    int w[K];
#pragma unroll
    for (int j = 0; j < K; ++j)
        w[j] = nvr_d_store_width(ONE_SRC ? src0 : src[j], dst[j]);

    for (nvr_d_u64 base = nvr_d_gtid(); base < nvec; base += U * G) {
        uint4 r[U][L];
#pragma unroll
        for (int u = 0; u < U; ++u) {
            const nvr_d_u64 i = base + u * G;
            if (i < nvec) {
#pragma unroll
                for (int j = 0; j < L; ++j)
                    if (ONE_SRC || NVR_D_BIT(act, j))
                        r[u][j] = nvr_d_ld16((ONE_SRC ? src0 : src[j]) + head + 16 * i);
            }
        }
#pragma unroll
        for (int u = 0; u < U; ++u) {
            const nvr_d_u64 i = base + u * G;
            if (i < nvec) {
#pragma unroll
                for (int j = 0; j < K; ++j)
                    if (NVR_D_BIT(act, j))
                        nvr_d_st(dst[j] + head + 16 * i, r[u][ONE_SRC ? 0 : j], w[j]);
            }
        }
    }

    // Under 16 bytes at each end, per pair.
#pragma unroll
    for (int j = 0; j < K; ++j) {
        if (NVR_D_BIT(act, j)) {
            const char *s = ONE_SRC ? src0 : src[j];
            for (nvr_d_u64 k = nvr_d_gtid(); k < head + tail; k += G) {
                const nvr_d_u64 b = k < head ? k : k + body;
                dst[j][b] = s[b];
            }
        }
    }
}

// One pair.
__device__ __forceinline__ void nvr_d_copy1(const char *src, char *dst, nvr_d_u64 bytes) {
    const char *s[1] = {src};
    char *d[1] = {dst};
    nvr_d_copy_joint<1, true>(src, s, d, 1u, bytes);
}

// Copies `bytes` from src[j] to dst[j] for every j in `act`: all pairs in one loop when their
// sources share 16-byte alignment (so one vector index addresses every pair), else pair after
// pair.
template <int K>
__device__ void nvr_d_copy_pairs(const char *const (&src)[K], char *const (&dst)[K],
                                 unsigned act, nvr_d_u64 bytes) {
    if (act == 0u || bytes == 0)
        return;
    unsigned lo = 16u, mis = 0u;
#pragma unroll
    for (int j = 0; j < K; ++j) {
        if (NVR_D_BIT(act, j)) {
            const unsigned a = (unsigned)(nvr_d_u64)src[j] & 15u;
            if (lo == 16u)
                lo = a;
            mis |= a ^ lo;
        }
    }
    if (mis == 0u) {
        nvr_d_copy_joint<K, false>(nullptr, src, dst, act, bytes);
    } else {
#pragma unroll
        for (int j = 0; j < K; ++j)
            if (NVR_D_BIT(act, j))
                nvr_d_copy1(src[j], dst[j], bytes);
    }
}

// Copies `bytes` from src to dst[j] for every j in `act`, loading src once.
template <int K>
__device__ void nvr_d_copy_bcast(const char *src, char *const (&dst)[K], unsigned act,
                                 nvr_d_u64 bytes) {
    if (act == 0u || bytes == 0)
        return;
    const char *s[K];
#pragma unroll
    for (int j = 0; j < K; ++j)
        s[j] = src;
    nvr_d_copy_joint<K, true>(src, s, dst, act, bytes);
}

#ifndef NVR_D_BCAST
#define NVR_D_BCAST 0
#endif

#define NVR_D_BCAST_PUSH 1
#define NVR_D_BCAST_PULL 2
#define NVR_D_BCAST_FWD 3

__device__ __forceinline__ int nvr_d_bcast_algo(int n) {
    return NVR_D_BCAST != 0 ? NVR_D_BCAST : (n <= 2 ? NVR_D_BCAST_PUSH : NVR_D_BCAST_FWD);
}

// Start of share k of `parts` over `bytes`, in whole 16-byte units.
__device__ __forceinline__ nvr_d_u64 nvr_d_share(nvr_d_u64 bytes, int k, int parts) {
    const nvr_d_u64 units = (bytes + 15) / 16;
    const nvr_d_u64 u = units * (nvr_d_u64)k / (nvr_d_u64)parts;
    return u * 16 < bytes ? u * 16 : bytes;
}

template <int K>
__device__ void nvr_d_broadcast(const nvr_team &t, int root, const char *src, char *dst,
                                nvr_d_u64 bytes, int algo) {
    const bool local = src != dst; // the root's own copy (none in place)
    char *d[K];
#pragma unroll
    for (int j = 0; j < K; ++j)
        d[j] = dst + (j < t.n ? t.off[j] : 0);
    if (algo == NVR_D_BCAST_PUSH) {
        if (t.me == root) {
            unsigned act = (1u << t.n) - 1u;
            if (!local)
                act &= ~(1u << t.me);
            nvr_d_copy_bcast<K>(src, d, act, bytes);
        }
    } else if (algo == NVR_D_BCAST_PULL) {
        if (t.me != root)
            nvr_d_copy1(src + t.off[root], dst, bytes);
        else if (local)
            nvr_d_copy1(src, dst, bytes);
    } else {
        // Pull-and-forward: non-root number r (of n - 1) loads share r of the root's src once
        // and stores it to every non-root's dst, so the root's link carries each byte once.
        if (t.me != root) {
            const int r = t.me < root ? t.me : t.me - 1;
            const nvr_d_u64 a = nvr_d_share(bytes, r, t.n - 1);
            const nvr_d_u64 b = nvr_d_share(bytes, r + 1, t.n - 1);
            char *ds[K];
#pragma unroll
            for (int j = 0; j < K; ++j)
                ds[j] = d[j] + a;
            nvr_d_copy_bcast<K>(src + t.off[root] + a, ds, ((1u << t.n) - 1u) & ~(1u << root),
                                b - a);
        } else if (local) {
            nvr_d_copy1(src, dst, bytes);
        }
    }
}

// Every PE's dst = the root's src (bytes). In place: the root's src == its dst.
extern "C" __global__ void __launch_bounds__(NVR_D_THREADS, 1)
    nvr_direct_broadcast(const __grid_constant__ nvr_team t, int root, const void *src, void *dst,
                         nvr_d_u64 bytes) {
    nvr_launch_begin();
    if (!nvr_d_root_ok(t, root))
        return;
    const unsigned all = nvr_all_peers(t);
    const int algo = nvr_d_bcast_algo(t.n);
    const bool is_root = t.me == root;
    const unsigned rbit = 1u << root;
    unsigned touch, touched_by;
    if (algo == NVR_D_BCAST_PUSH) {
        touch = is_root ? all : 0u;
        touched_by = is_root ? 0u : rbit;
    } else if (algo == NVR_D_BCAST_PULL) {
        touch = is_root ? 0u : rbit;
        touched_by = is_root ? all : 0u;
    } else {
        touch = is_root ? 0u : all;                   // the root's src, the others' dst
        touched_by = is_root ? all : (all & ~rbit);   // non-roots read the root / store here
    }
    unsigned e;
    if (!nvr_d_enter(t, touch, &e))
        return;
    NVR_TEAM_DISPATCH(t.n, nvr_d_broadcast, t, root, (const char *)src, (char *)dst, bytes,
                      algo);
    nvr_d_exit(t, e, touch, touched_by);
}

// All-gather by team index: every PE's dst[me * bytes ..] = my src. In place: src == my block
// of dst. I store my block into every member's dst.
template <int K>
__device__ void nvr_d_fcollect(const nvr_team &t, const char *src, char *dst, nvr_d_u64 bytes) {
    const char *mine = dst + (nvr_d_u64)t.me * bytes;
    const bool local = src != mine;
    unsigned act = (1u << t.n) - 1u;
    if (!local)
        act &= ~(1u << t.me);
    char *d[K];
#pragma unroll
    for (int j = 0; j < K; ++j)
        d[j] = dst + (nvr_d_u64)t.me * bytes + (j < t.n ? t.off[j] : 0);
    nvr_d_copy_bcast<K>(src, d, act, bytes);
}

extern "C" __global__ void __launch_bounds__(NVR_D_THREADS, 1)
    nvr_direct_fcollect(const __grid_constant__ nvr_team t, const void *src, void *dst,
                        nvr_d_u64 bytes) {
    nvr_launch_begin();
    const unsigned all = nvr_all_peers(t);
    unsigned e;
    if (!nvr_d_enter(t, all, &e))
        return;
    NVR_TEAM_DISPATCH(t.n, nvr_d_fcollect, t, (const char *)src, (char *)dst, bytes);
    nvr_d_exit(t, e, all, all);
}

// Block j of my src -> block me of PE j's dst. Not in place (src and dst must not overlap).
template <int K>
__device__ void nvr_d_alltoall(const nvr_team &t, const char *src, char *dst, nvr_d_u64 bytes) {
    const char *s[K];
    char *d[K];
#pragma unroll
    for (int j = 0; j < K; ++j) {
        const long long o = j < t.n ? t.off[j] : 0;
        s[j] = src + (nvr_d_u64)j * bytes;
        d[j] = dst + o + (nvr_d_u64)t.me * bytes;
    }
    nvr_d_copy_pairs<K>(s, d, (1u << t.n) - 1u, bytes);
}

extern "C" __global__ void __launch_bounds__(NVR_D_THREADS, 1)
    nvr_direct_alltoall(const __grid_constant__ nvr_team t, const void *src, void *dst,
                        nvr_d_u64 bytes) {
    nvr_launch_begin();
    const unsigned all = nvr_all_peers(t);
    unsigned e;
    if (!nvr_d_enter(t, all, &e))
        return;
    NVR_TEAM_DISPATCH(t.n, nvr_d_alltoall, t, (const char *)src, (char *)dst, bytes);
    nvr_d_exit(t, e, all, all);
}

// The root's dst[j * bytes ..] = PE j's src; other PEs' dst untouched. In place: the root's
// src == its block of dst. Every PE stores its block into the root.
template <int K>
__device__ void nvr_d_gather(const nvr_team &t, int root, const char *src, char *dst,
                             nvr_d_u64 bytes) {
    const bool is_root = t.me == root;
    const bool local = src != dst + (nvr_d_u64)t.me * bytes;
    if (is_root) {
        if (local)
            nvr_d_copy1(src, dst + (nvr_d_u64)t.me * bytes, bytes);
    } else {
        nvr_d_copy1(src, dst + t.off[root] + (nvr_d_u64)t.me * bytes, bytes);
    }
}

extern "C" __global__ void __launch_bounds__(NVR_D_THREADS, 1)
    nvr_direct_gather(const __grid_constant__ nvr_team t, int root, const void *src, void *dst,
                      nvr_d_u64 bytes) {
    nvr_launch_begin();
    if (!nvr_d_root_ok(t, root))
        return;
    const unsigned all = nvr_all_peers(t);
    const bool is_root = t.me == root;
    const unsigned rbit = 1u << root;
    const unsigned touch = is_root ? 0u : rbit;
    const unsigned touched_by = is_root ? all : 0u;
    unsigned e;
    if (!nvr_d_enter(t, touch, &e))
        return;
    NVR_TEAM_DISPATCH(t.n, nvr_d_gather, t, root, (const char *)src, (char *)dst, bytes);
    nvr_d_exit(t, e, touch, touched_by);
}

// PE j's dst = the root's src[j * bytes ..]; the root's src is untouched. In place: the root's
// dst == its block of src. The root stores every block.
template <int K>
__device__ void nvr_d_scatter(const nvr_team &t, int root, const char *src, char *dst,
                              nvr_d_u64 bytes) {
    const bool is_root = t.me == root;
    const bool local = dst != src + (nvr_d_u64)t.me * bytes;
    if (is_root) {
        // Member j's output: dst, the same symmetric address everywhere; in place (every member
        // alike, so the root's own case says it) member j's own block j of the buffer.
        const char *s[K];
        char *d[K];
#pragma unroll
        for (int j = 0; j < K; ++j) {
            s[j] = src + (nvr_d_u64)j * bytes;
            char *out = local ? dst : (char *)src + (nvr_d_u64)j * bytes;
            d[j] = out + (j < t.n ? t.off[j] : 0);
        }
        unsigned act = (1u << t.n) - 1u;
        if (!local)
            act &= ~(1u << t.me);
        nvr_d_copy_pairs<K>(s, d, act, bytes);
    }
}

extern "C" __global__ void __launch_bounds__(NVR_D_THREADS, 1)
    nvr_direct_scatter(const __grid_constant__ nvr_team t, int root, const void *src, void *dst,
                       nvr_d_u64 bytes) {
    nvr_launch_begin();
    if (!nvr_d_root_ok(t, root))
        return;
    const unsigned all = nvr_all_peers(t);
    const bool is_root = t.me == root;
    const unsigned rbit = 1u << root;
    const unsigned touch = is_root ? all : 0u;
    const unsigned touched_by = is_root ? 0u : rbit;
    unsigned e;
    if (!nvr_d_enter(t, touch, &e))
        return;
    NVR_TEAM_DISPATCH(t.n, nvr_d_scatter, t, root, (const char *)src, (char *)dst, bytes);
    nvr_d_exit(t, e, touch, touched_by);
}

#endif // NVR_OP
