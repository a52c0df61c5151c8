// The protocol pieces that direct algorithms (direct.cu) need: per-block entry (arrive, then
// wait for the peers this PE touches) and exit (release, depart to the peers touched, wait for
// the peers that touch this PE), on the channel layout of PROTOCOL.md.
//
// Concatenated after common.cuh and before direct.cu (no #include of our own headers). Names
// carry the `nvr_d_` prefix so they cannot clash with common.cuh's.

typedef unsigned long long nvr_d_u64;

// Threads per block of every direct kernel. The host launches exactly this many.
#define NVR_D_THREADS 512

// ---- channel words (PROTOCOL.md, "Channels") ----

__device__ __forceinline__ unsigned *nvr_d_epoch(const nvr_team &t, int b) {
    return (unsigned *)t.chan + b;
}

// arrive[b][j] in this PE's channel.
__device__ __forceinline__ unsigned *nvr_d_arrive(const nvr_team &t, int b, int j) {
    return (unsigned *)(t.chan + 4ull * NVR_MAX_BLOCKS) + b * NVR_MAX_TEAM + j;
}

// depart[b][j] in this PE's channel.
__device__ __forceinline__ unsigned *nvr_d_depart(const nvr_team &t, int b, int j) {
    return (unsigned *)(t.chan + 4ull * NVR_MAX_BLOCKS * (1 + NVR_MAX_TEAM)) + b * NVR_MAX_TEAM +
           j;
}

// The same word in team PE j's copy of a symmetric object.
template <typename P> __device__ __forceinline__ P *nvr_d_peer(const nvr_team &t, P *p, int j) {
    return (P *)((char *)p + t.off[j]);
}

// ---- memory operations ----

__device__ __forceinline__ void nvr_d_st_release_sys(unsigned *p, unsigned v) {
    asm volatile("st.release.sys.global.u32 [%0], %1;" ::"l"(__cvta_generic_to_global(p)), "r"(v)
                 : "memory");
}

__device__ __forceinline__ unsigned nvr_d_ld_acquire_sys(const unsigned *p) {
    unsigned v;
    asm volatile("ld.acquire.sys.global.u32 %0, [%1];"
                 : "=r"(v)
                 : "l"(__cvta_generic_to_global(p))
                 : "memory");
    return v;
}

__device__ __forceinline__ nvr_d_u64 nvr_d_globaltimer() {
    nvr_d_u64 t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

// ---- waits (PROTOCOL.md, "Waits") ----

#define NVR_D_WAIT_ARRIVE 1
#define NVR_D_WAIT_DEPART 2

// Records the first failure in the host-mapped status words; returns false.
// Not inlined (cold); takes the status pointer by value, as a reference to the team would
// copy the whole parameter struct to local memory.
__device__ __noinline__ bool nvr_d_fail(unsigned *status, unsigned code, int peer, unsigned e,
                                        unsigned what) {
    if (atomicCAS_system(status, 0u, code) == 0u) {
        ((volatile unsigned *)status)[1] = (unsigned)peer;
        ((volatile unsigned *)status)[2] = e;
        ((volatile unsigned *)status)[3] = what;
        __threadfence_system();
    }
    return false;
}

// Waits until `*flag - e >= 0` (wrap-safe); false on abort or timeout (recorded in status).
// Called by one thread.
__device__ __forceinline__ bool nvr_d_wait(const nvr_team &t, const unsigned *flag, unsigned e,
                                           int peer, unsigned what) {
    if ((int)(nvr_d_ld_acquire_sys(flag) - e) >= 0)
        return true;
    const nvr_d_u64 t0 = t.timeout_ns ? nvr_d_globaltimer() : 0;
    for (unsigned polls = 1;; ++polls) {
        if ((int)(nvr_d_ld_acquire_sys(flag) - e) >= 0)
            return true;
        if ((polls & 255u) == 0u) {
            if (*t.abort)
                return nvr_d_fail(t.status, 1, peer, e, what);
            if (t.timeout_ns && nvr_d_globaltimer() - t0 > t.timeout_ns)
                return nvr_d_fail(t.status, 2, peer, e, what);
        }
    }
}

// Bit j set for every team PE other than this one.
__device__ __forceinline__ unsigned nvr_d_others(const nvr_team &t) {
    return ((1u << t.n) - 1u) & ~(1u << t.me);
}

// ---- entry and exit of a direct algorithm (PROTOCOL.md, "Arrive and depart") ----

// Every thread of the block calls this. Thread 0 takes the block's next epoch, stores it into
// arrive[b][me] of every peer, and waits until every peer in `touch` (a bit mask of team
// indices whose buffers this PE will load or store) has arrived. Returns false (for every
// thread) when the wait was aborted; the block must then return at once.
__device__ __forceinline__ bool nvr_d_enter(const nvr_team &t, unsigned touch, unsigned *e_out) {
    __shared__ unsigned s_e;
    __shared__ int s_ok;
    if (threadIdx.x == 0) {
        const int b = blockIdx.x;
        const unsigned e = *nvr_d_epoch(t, b) + 1u;
        for (int j = 0; j < t.n; ++j)
            if (j != t.me)
                nvr_d_st_release_sys(nvr_d_peer(t, nvr_d_arrive(t, b, t.me), j), e);
        int ok = 1;
        for (int j = 0; j < t.n && ok; ++j)
            if ((touch >> j) & 1u)
                ok = nvr_d_wait(t, nvr_d_arrive(t, b, j), e, j, NVR_D_WAIT_ARRIVE);
        s_e = e;
        s_ok = ok;
    }
    __syncthreads();
    *e_out = s_e;
    return s_ok != 0;
}

// Every thread of the block calls this after its last access to peers' buffers. Thread 0, once
// the whole block is past that point (bar.sync), makes the block's accesses visible system-wide
// (fence.sc.sys, cumulative over the barrier), stores `e` into depart[b][me] of every peer in
// `touch`, waits for depart[b][j] >= e from every peer j in `touched_by` (those that load or
// store this PE's buffers), then advances the block's epoch. After the kernel ends no peer
// still reads this PE's src or writes its dst.
__device__ __forceinline__ void nvr_d_exit(const nvr_team &t, unsigned e, unsigned touch,
                                           unsigned touched_by) {
    __syncthreads();
    if (threadIdx.x == 0) {
        const int b = blockIdx.x;
        __threadfence_system();
        for (int j = 0; j < t.n; ++j)
            if ((touch >> j) & 1u)
                nvr_d_st_release_sys(nvr_d_peer(t, nvr_d_depart(t, b, t.me), j), e);
        for (int j = 0; j < t.n; ++j)
            if ((touched_by >> j) & 1u)
                if (!nvr_d_wait(t, nvr_d_depart(t, b, j), e, j, NVR_D_WAIT_DEPART))
                    return; // aborted: the epoch stays behind; the host resets the channel
        *nvr_d_epoch(t, b) = e;
    }
}
