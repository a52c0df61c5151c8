// NVSHMEM's own on-stream collectives, called raw (no Rust, no nvshmem-rs), on the layouts and
// sizes where nvshmem-rs saw wrong results at 3 PEs and more: in-place reduce-scatter in NCCL's
// layout (this PE's result at `me * count` inside the input), in-place fcollect, in-place
// all-reduce, and large broadcasts. Each case fills the inputs, poisons the outputs, lines the
// PEs up with nvshmemx_barrier_all_on_stream, makes the one call, synchronises, and compares
// every element with what the collective defines. PE 0 prints one line per case:
//
//   repro: <case> n=<PEs>: ok
//   repro: <case> n=<PEs>: WRONG on PEs 2 3 (PE 2: 4099 of 4099 wrong, first [0] = ..., want ...)
//
// and a last line `repro: done, N cases, M wrong`. The exit status is 0 whatever NVSHMEM
// returned (the cases are findings, not tests of this program); a CUDA or NVSHMEM error, or a
// failed initialisation, exits 1.
//
// Host code only (NVSHMEM's host library, as nvshmem-rs uses it): build and run as README.md
// beside this file says (scripts/gpu-check.sh's `repro` suite does both).
#include <cuda.h>
#include <cuda_runtime.h>
#define OMPI_SKIP_MPICXX 1 // the C API only
#include <mpi.h>
#include <nvshmem_host.h>

#ifdef REPRO_NCCL
#include <nccl.h>
#endif

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

static int g_me = 0, g_n = 1;
static cudaStream_t g_stream;
static int g_cases = 0, g_wrong_cases = 0;

// A failed call ends the job: the PE, the call, what its library said, where.
static void die(const char *call, const char *said, const char *file, int line) {
    fprintf(stderr, "PE %d: %s failed: %s (%s:%d)\n", g_me, call, said, file, line);
    MPI_Abort(MPI_COMM_WORLD, 1);
}
// CUDA runtime calls; NVSHMEM's host calls that return a status (0: success).
#define CUDA(x)                                                                               \
    do {                                                                                      \
        cudaError_t e_ = (x);                                                                 \
        if (e_ != cudaSuccess) die(#x, cudaGetErrorString(e_), __FILE__, __LINE__);           \
    } while (0)
#define NV(x)                                                                                 \
    do {                                                                                      \
        int s_ = (x);                                                                         \
        if (s_ != 0) die(#x, ("status " + std::to_string(s_)).c_str(), __FILE__, __LINE__);   \
    } while (0)

// Element i of block k of PE p's input, in case `c`: well mixed, so a wrong combination shows.
static uint32_t val(uint32_t c, int p, size_t k, size_t i) {
    uint64_t z = (uint64_t)c * 0x9e3779b97f4a7c15ull ^ (uint64_t)(p + 1) * 0xbf58476d1ce4e5b9ull ^
                 (uint64_t)(k + 1) * 0x94d049bb133111ebull ^ (uint64_t)(i + 1) * 0x2545f4914f6cdd1dull;
    z ^= z >> 31;
    z *= 0x9e3779b97f4a7c15ull;
    z ^= z >> 29;
    return (uint32_t)z & 0x7fffffffu;
}

static const uint32_t POISON = 0x5a5a5a5au;

static void line_up() {
    nvshmemx_barrier_all_on_stream(g_stream);
    CUDA(cudaStreamSynchronize(g_stream));
}

static void put_words(uint32_t *dev, const std::vector<uint32_t> &host) {
    CUDA(cudaMemcpy(dev, host.data(), host.size() * 4, cudaMemcpyHostToDevice));
}

static std::vector<uint32_t> get_words(const uint32_t *dev, size_t n) {
    std::vector<uint32_t> v(n);
    CUDA(cudaMemcpy(v.data(), dev, n * 4, cudaMemcpyDeviceToHost));
    return v;
}

// Compares `got` with want(i) over [0, len); gathers the verdict on PE 0, which prints it.
template <class Want>
static void verdict(const std::string &name, const std::vector<uint32_t> &got, size_t len,
                    Want want) {
    long wrong = 0, first = -1;
    uint32_t first_got = 0, first_want = 0;
    for (size_t i = 0; i < len; ++i) {
        const uint32_t w = want(i);
        if (got[i] != w) {
            if (first < 0) {
                first = (long)i;
                first_got = got[i];
                first_want = w;
            }
            ++wrong;
        }
    }
    std::vector<long long> all(3 * g_n);
    const unsigned long long pair = ((unsigned long long)first_got << 32) | first_want;
    long long mine[3] = {wrong, first, (long long)pair};
    MPI_Gather(mine, 3, MPI_LONG_LONG, all.data(), 3, MPI_LONG_LONG, 0, MPI_COMM_WORLD);
    ++g_cases;
    if (g_me != 0) return;
    std::string bad, detail;
    for (int p = 0; p < g_n; ++p) {
        if (all[3 * p] == 0) continue;
        bad += " " + std::to_string(p);
        if (detail.empty()) {
            char b[256];
            const unsigned long long gw = (unsigned long long)all[3 * p + 2];
            snprintf(b, sizeof b,
                     " (PE %d: %lld of %zu wrong, first [%lld] = %#x, want %#x%s)", p,
                     all[3 * p], len, all[3 * p + 1], (unsigned)(gw >> 32), (unsigned)gw,
                     (uint32_t)(gw >> 32) == POISON ? ": never written" : "");
            detail = b;
        }
    }
    if (bad.empty()) {
        printf("repro: %-44s n=%d: ok\n", name.c_str(), g_n);
    } else {
        ++g_wrong_cases;
        printf("repro: %-44s n=%d: WRONG on PEs%s%s\n", name.c_str(), g_n, bad.c_str(),
               detail.c_str());
    }
    fflush(stdout);
}

// Reduce-scatter of `count` int32 per block, xor or sum. In place: NCCL's layout, dest = this
// PE's block of the input (`src + me * count`), which overlaps the input.
static void reduce_scatter(uint32_t c, size_t count, bool xor_, bool in_place) {
    const size_t n = g_n;
    uint32_t *src = (uint32_t *)nvshmem_malloc(n * count * 4);
    uint32_t *out = in_place ? nullptr : (uint32_t *)nvshmem_malloc(count * 4);
    std::vector<uint32_t> in(n * count);
    for (size_t k = 0; k < n; ++k)
        for (size_t i = 0; i < count; ++i) in[k * count + i] = val(c, g_me, k, i);
    put_words(src, in);
    uint32_t *dst = in_place ? src + g_me * count : out;
    if (!in_place) put_words(out, std::vector<uint32_t>(count, POISON));
    line_up();
    if (xor_)
        NV(nvshmemx_int32_xor_reducescatter_on_stream(NVSHMEM_TEAM_WORLD, (int32_t *)dst,
                                                      (const int32_t *)src, count, g_stream));
    else
        NV(nvshmemx_int32_sum_reducescatter_on_stream(NVSHMEM_TEAM_WORLD, (int32_t *)dst,
                                                      (const int32_t *)src, count, g_stream));
    CUDA(cudaStreamSynchronize(g_stream));
    auto got = get_words(dst, count);
    verdict(std::string("reducescatter int32 ") + (xor_ ? "xor " : "sum ") +
                (in_place ? "in place (NCCL layout)" : "out of place") + " x" +
                std::to_string(count),
            got, count, [&](size_t i) {
                uint32_t a = 0;
                for (int p = 0; p < g_n; ++p) a = xor_ ? a ^ val(c, p, g_me, i) : a + val(c, p, g_me, i);
                return a;
            });
    line_up();
    if (out) nvshmem_free(out);
    nvshmem_free(src);
}

// All-reduce of `count` int32, xor or sum; in place: dest == source.
static void all_reduce(uint32_t c, size_t count, bool xor_, bool in_place) {
    uint32_t *src = (uint32_t *)nvshmem_malloc(count * 4);
    uint32_t *out = in_place ? src : (uint32_t *)nvshmem_malloc(count * 4);
    std::vector<uint32_t> in(count);
    for (size_t i = 0; i < count; ++i) in[i] = val(c, g_me, 0, i);
    put_words(src, in);
    if (!in_place) put_words(out, std::vector<uint32_t>(count, POISON));
    line_up();
    if (xor_)
        NV(nvshmemx_int32_xor_reduce_on_stream(NVSHMEM_TEAM_WORLD, (int32_t *)out,
                                               (const int32_t *)src, count, g_stream));
    else
        NV(nvshmemx_int32_sum_reduce_on_stream(NVSHMEM_TEAM_WORLD, (int32_t *)out,
                                               (const int32_t *)src, count, g_stream));
    CUDA(cudaStreamSynchronize(g_stream));
    auto got = get_words(out, count);
    verdict(std::string("all-reduce int32 ") + (xor_ ? "xor " : "sum ") +
                (in_place ? "in place" : "out of place") + " x" + std::to_string(count),
            got, count, [&](size_t i) {
                uint32_t a = 0;
                for (int p = 0; p < g_n; ++p) a = xor_ ? a ^ val(c, p, 0, i) : a + val(c, p, 0, i);
                return a;
            });
    line_up();
    if (!in_place) nvshmem_free(out);
    nvshmem_free(src);
}

// fcollect of `count` 32-bit words a PE: nvshmemx_fcollectmem_on_stream (bytes, what
// nvshmem-rs calls) or the typed int32 form. In place: source = this PE's block of dest.
static void fcollect(uint32_t c, size_t count, bool typed, bool in_place) {
    const size_t n = g_n;
    uint32_t *dst = (uint32_t *)nvshmem_malloc(n * count * 4);
    uint32_t *own = in_place ? nullptr : (uint32_t *)nvshmem_malloc(count * 4);
    std::vector<uint32_t> mine(count), before(n * count, POISON);
    for (size_t i = 0; i < count; ++i) mine[i] = val(c, g_me, 0, i);
    if (in_place)
        memcpy(&before[g_me * count], mine.data(), count * 4);
    else
        put_words(own, mine);
    put_words(dst, before);
    const uint32_t *src = in_place ? dst + g_me * count : own;
    line_up();
    if (typed)
        NV(nvshmemx_int32_fcollect_on_stream(NVSHMEM_TEAM_WORLD, (int32_t *)dst,
                                             (const int32_t *)src, count, g_stream));
    else
        NV(nvshmemx_fcollectmem_on_stream(NVSHMEM_TEAM_WORLD, dst, src, count * 4, g_stream));
    CUDA(cudaStreamSynchronize(g_stream));
    auto got = get_words(dst, n * count);
    verdict(std::string("fcollect ") + (typed ? "int32 " : "mem ") +
                (in_place ? "in place" : "out of place") + " x" + std::to_string(count) + " words",
            got, n * count, [&](size_t i) { return val(c, (int)(i / count), 0, i % count); });
    line_up();
    if (own) nvshmem_free(own);
    nvshmem_free(dst);
}

// broadcastmem of `count` words from `root`, out of place, `reps` times with new data.
static void broadcast(uint32_t c, size_t count, int root, int reps) {
    uint32_t *src = (uint32_t *)nvshmem_malloc(count * 4);
    uint32_t *dst = (uint32_t *)nvshmem_malloc(count * 4);
    for (int r = 0; r < reps; ++r) {
        std::vector<uint32_t> in(count);
        for (size_t i = 0; i < count; ++i) in[i] = val(c + r, g_me, 0, i);
        put_words(src, in);
        put_words(dst, std::vector<uint32_t>(count, POISON));
        line_up();
        NV(nvshmemx_broadcastmem_on_stream(NVSHMEM_TEAM_WORLD, dst, src, count * 4, root, g_stream));
        CUDA(cudaStreamSynchronize(g_stream));
        auto got = get_words(dst, count);
        char name[128];
        snprintf(name, sizeof name, "broadcastmem %zu bytes from PE %d, run %d", count * 4, root,
                 r + 1);
        verdict(name, got, count, [&](size_t i) { return val(c + r, root, 0, i); });
        line_up();
    }
    nvshmem_free(dst);
    nvshmem_free(src);
}


// A float whose sums over up to 16 PEs are exact in any order (a multiple of 1/256 in
// [-8, 8)), from one of `val`'s words.
static float small_float(uint32_t v) { return (float)(int)(v & 0xfff) / 256.0f - 8.0f; }

// Element i of PE p's input in case c, as the words `team_all_reduce` puts: `val` itself for
// int32, the bits of `small_float` of it for f32.
static uint32_t word(uint32_t c, int p, size_t i, bool f32) {
    if (!f32) return val(c, p, 0, i);
    const float f = small_float(val(c, p, 0, i));
    uint32_t w;
    memcpy(&w, &f, 4);
    return w;
}

// Out-of-place int32 (or, with `f32`, float) sum all-reduce over `team` (this PE is its member
// `idx`, -1 if none, whose members are world PEs `members`), on disjoint buffers: what
// nvshmem-rs hands NVSHMEM. Non-members only take part in the world barriers.
static void team_all_reduce(uint32_t c, nvshmem_team_t team, const char *tname,
                            const std::vector<int> &members, int idx, size_t count,
                            bool f32 = false) {
    uint32_t *src = (uint32_t *)nvshmem_malloc(count * 4);
    uint32_t *dst = (uint32_t *)nvshmem_malloc(count * 4);
    std::vector<uint32_t> in(count);
    for (size_t i = 0; i < count; ++i) in[i] = word(c, g_me, i, f32);
    put_words(src, in);
    put_words(dst, std::vector<uint32_t>(count, POISON));
    line_up();
    if (idx >= 0 && f32)
        NV(nvshmemx_float_sum_reduce_on_stream(team, (float *)dst, (const float *)src, count,
                                               g_stream));
    else if (idx >= 0)
        NV(nvshmemx_int32_sum_reduce_on_stream(team, (int32_t *)dst, (const int32_t *)src, count,
                                               g_stream));
    CUDA(cudaStreamSynchronize(g_stream));
    std::vector<uint32_t> got = idx >= 0 ? get_words(dst, count) : std::vector<uint32_t>(count);
    verdict(std::string("all-reduce ") + (f32 ? "f32" : "int32") + " sum on " + tname + " x" +
                std::to_string(count),
            got, count, [&](size_t i) {
                if (idx < 0) return got[i];
                if (!f32) {
                    uint32_t a = 0;
                    for (int p : members) a += val(c, p, 0, i);
                    return a;
                }
                float a = 0;
                for (int p : members) a += small_float(val(c, p, 0, i));
                uint32_t w;
                memcpy(&w, &a, 4);
                return w;
            });
    line_up();
    nvshmem_free(dst);
    nvshmem_free(src);
}

// NVSHMEM's all-reduce on teams other than NVSHMEM_TEAM_WORLD, as nvshmem-rs makes them: a
// duplicate of the world (split_strided), its two halves (split_strided of the duplicate),
// and the world in reverse order (nvshmemx_team_init from a unique id).
static void teams(uint32_t &c) {
    const int n = g_n;
    nvshmem_team_t dup = NVSHMEM_TEAM_INVALID, lo = NVSHMEM_TEAM_INVALID,
                   hi = NVSHMEM_TEAM_INVALID, rev = NVSHMEM_TEAM_INVALID;
    NV(nvshmem_team_split_strided(NVSHMEM_TEAM_WORLD, 0, 1, n, nullptr, 0, &dup));
    NV(nvshmem_team_split_strided(dup, 0, 1, n / 2, nullptr, 0, &lo));
    NV(nvshmem_team_split_strided(dup, n / 2, 1, n - n / 2, nullptr, 0, &hi));
    nvshmemx_team_uniqueid_t id = 0;
    if (g_me == 0) NV(nvshmemx_team_get_uniqueid(&id));
    MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
    nvshmem_team_config_t config;
    memset(&config, 0, sizeof config);
    config.version = (2 << 16) + 64;
    config.num_contexts = -1;
    config.uniqueid = id;
    NV(nvshmemx_team_init(&rev, &config, NVSHMEM_TEAM_CONFIG_MASK_UNIQUEID, n, n - 1 - g_me));
    std::vector<int> all, low, high, reversed;
    for (int p = 0; p < n; ++p) {
        all.push_back(p);
        reversed.push_back(n - 1 - p);
        (p < n / 2 ? low : high).push_back(p);
    }
    const bool in_lo = g_me < n / 2;
    for (size_t count : {(size_t)1, (size_t)4099, (size_t)70001}) {
        team_all_reduce(c++, NVSHMEM_TEAM_WORLD, "the world", all, g_me, count);
        team_all_reduce(c++, dup, "a split duplicate of the world", all, g_me, count);
        // Both halves at once, each on its own members.
        team_all_reduce(c++, in_lo ? lo : hi, "the half of this PE (split)", in_lo ? low : high,
                        in_lo ? g_me : g_me - n / 2, count);
        team_all_reduce(c++, rev, "the world reversed (team_init)", reversed, n - 1 - g_me, count);
    }
}

// The team of the even world PEs, split_strided(world, 0, 2, n / 2), made collectively by
// every PE; `idx` is this PE's index in it, -1 for the odd PEs (who get no handle).
static nvshmem_team_t even_team(std::vector<int> &members, int &idx) {
    nvshmem_team_t team = NVSHMEM_TEAM_INVALID;
    NV(nvshmem_team_split_strided(NVSHMEM_TEAM_WORLD, 0, 2, g_n / 2, nullptr, 0, &team));
    members.clear();
    for (int p = 0; p < g_n; p += 2) members.push_back(p);
    idx = g_me % 2 == 0 ? g_me / 2 : -1;
    return team;
}

// What the collectives matrix saw once under MPS (4 PEs on 2 GPUs, 2026-11-27): NVSHMEM's sum
// all-reduce of one f32 on the team split_strided(world, 0, 2, n / 2) gave a wrong result on
// PE 0; with 4 PEs on 2 GPUs that team's two members share GPU 0. Here the same team, out of
// place, int32 and f32, 1, 2 and 4099 elements, 4 times each, with the non-members waiting in
// the world barriers as the matrix's do.
static void strided(uint32_t &c) {
    if (g_n < 4) return;
    std::vector<int> members;
    int idx;
    const nvshmem_team_t team = even_team(members, idx);
    const char *name = "the even PEs (split_strided 0,2)";
    for (size_t count : {(size_t)1, (size_t)2, (size_t)4099}) {
        for (int rep = 0; rep < 4; ++rep) {
            team_all_reduce(c++, team, name, members, idx, count);
            team_all_reduce(c++, team, name, members, idx, count, true);
        }
    }
    if (team != NVSHMEM_TEAM_INVALID) nvshmem_team_destroy(team);
}

// The strided team's call many times, as the collectives matrix makes it: inputs copied on
// the stream, an on-stream barrier with no host wait, the members' call, another barrier,
// then a synchronize; between rounds a large NVSHMEM all-reduce on the world by every PE (the
// matrix's earlier cases), and every `fresh` rounds a new team (split, used, destroyed), so
// that first calls on a team come often. One line: rounds, wrong rounds, the first.
static void strided_stress(uint32_t &c, int rounds, int fresh, bool world, bool host_sync) {
    const int n = g_n;
    if (n < 4) return;
    const size_t big = 1 << 16;
    float *wsrc = (float *)nvshmem_malloc(big * 4), *wdst = (float *)nvshmem_malloc(big * 4);
    float *src = (float *)nvshmem_malloc(64), *dst = (float *)nvshmem_malloc(64);
    std::vector<float> w(big, 1.0f);
    CUDA(cudaMemcpy(wsrc, w.data(), big * 4, cudaMemcpyHostToDevice));
    std::vector<int> members;
    int idx = -1;
    nvshmem_team_t team = NVSHMEM_TEAM_INVALID;
    long wrong = 0, first = -1;
    float first_got = 0, first_want = 0;
    for (int r = 0; r < rounds; ++r) {
        // Every PE splits, member or not (the split is collective over the world); a
        // non-member's team stays NVSHMEM_TEAM_INVALID, so `r == 0` decides, not the handle.
        if (r == 0 || (fresh > 0 && r % fresh == 0)) {
            if (team != NVSHMEM_TEAM_INVALID) nvshmem_team_destroy(team);
            team = even_team(members, idx);
        }
        if (world)
            NV(nvshmemx_float_sum_reduce_on_stream(NVSHMEM_TEAM_WORLD, wdst, wsrc, big, g_stream));
        const uint32_t cc = c++;
        float in = small_float(val(cc, g_me, 0, 0)), poison;
        memcpy(&poison, &POISON, 4);
        CUDA(cudaMemcpyAsync(src, &in, 4, cudaMemcpyHostToDevice, g_stream));
        CUDA(cudaMemcpyAsync(dst, &poison, 4, cudaMemcpyHostToDevice, g_stream));
        nvshmemx_barrier_all_on_stream(g_stream);
        if (host_sync) CUDA(cudaStreamSynchronize(g_stream));
        float got = 0;
        if (idx >= 0) {
            NV(nvshmemx_float_sum_reduce_on_stream(team, dst, src, 1, g_stream));
            CUDA(cudaMemcpyAsync(&got, dst, 4, cudaMemcpyDeviceToHost, g_stream));
        }
        nvshmemx_barrier_all_on_stream(g_stream);
        CUDA(cudaStreamSynchronize(g_stream));
        if (idx >= 0) {
            float want = 0;
            for (int p : members) want += small_float(val(cc, p, 0, 0));
            if (got != want) {
                if (first < 0) first = r, first_got = got, first_want = want;
                ++wrong;
            }
        }
        if (g_me == 0 && (r + 1) % 50 == 0) {
            printf("repro: stress round %d done\n", r + 1);
            fflush(stdout);
        }
    }
    long all = 0;
    MPI_Reduce(&wrong, &all, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    ++g_cases;
    if (all) ++g_wrong_cases;
    if (g_me == 0) {
        printf("repro: strided stress, %d rounds, a new team every %d, %s, %s, n=%d: %ld wrong "
               "member results%s", rounds, fresh,
               world ? "world all-reduces between" : "nothing between",
               host_sync ? "host waits after the barrier" : "no host wait", n, all,
               all ? "" : "\n");
        if (all && first >= 0)
            printf(" (PE 0 first in round %ld: %g, want %g)\n", first, first_got, first_want);
        else if (all)
            printf(" (not on PE 0)\n");
        fflush(stdout);
    }
    line_up();
    if (team != NVSHMEM_TEAM_INVALID) nvshmem_team_destroy(team);
    nvshmem_free(dst);
    nvshmem_free(src);
    nvshmem_free(wdst);
    nvshmem_free(wsrc);
}

// Waits for the stream, at most `secs` seconds: a hang then says where it is and ends the job
// (MPI_Abort) rather than wait for ever.
static void sync_within(const char *what, size_t bytes, int secs) {
    const double end = MPI_Wtime() + secs;
    cudaError_t e;
    while ((e = cudaStreamQuery(g_stream)) == cudaErrorNotReady) {
        if (MPI_Wtime() > end) {
            printf("repro: PE %d: HUNG in %s at %zu B a PE (stream not done after %d s)\n",
                   g_me, what, bytes, secs);
            fflush(stdout);
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
    }
    CUDA(e);
}

// The graph-mode hang of nvshmem-perf (docs/performance.md, "Where it is slower"): an alltoall
// captured into CUDA graphs, point after point, as nvshmem-perf -G 1 times it: for each size (4
// KiB to 256 MiB a call, by 2), allocate input and output, three calls on the stream, capture 20
// calls into one graph and 1 into another (relaxed capture mode, as nvshmem-rs's
// Runtime::capture), launch the first 3 times and the second 20 times, each launch after
// nvshmemx_barrier_all_on_stream and a stream synchronisation, destroy both graphs, free both
// buffers. `keep`: allocate once, at the largest size, instead (whether reusing heap addresses
// across points matters). Prints a line per size; a stream not done within 30 s prints where
// and aborts the job. Whose alltoall, on what memory:
enum class A2a {
    Nvshmem,   // NVSHMEM's (nvshmemx_alltoallmem_on_stream), on its symmetric heap
    NcclHeap,  // NCCL's own (grouped ncclSend/ncclRecv on a communicator of this program's),
               // on NVSHMEM's symmetric heap: NVSHMEM only allocates
    NcclCuda,  // NCCL's own on cudaMalloc buffers (as nvshmem-perf --impl nccl)
    NcclMem,   // NCCL's own on ncclMemAlloc buffers (NCCL's allocator, made for registration):
               // no NVSHMEM memory at all
    NcclVmm,   // NCCL's own on buffers this program maps itself (cuMemCreate, POSIX file
               // descriptor handles, cuMemMap), as NVSHMEM's heap is made, without NVSHMEM
    NcclVmmSplit, // the same, each buffer across the seam of two physical allocations mapped
                  // side by side (as a large buffer of NVSHMEM's heap, mapped in chunks)
};
static const char *a2a_name(A2a how) {
    switch (how) {
    case A2a::Nvshmem: return "NVSHMEM's alltoall";
    case A2a::NcclHeap: return "NCCL's alltoall on NVSHMEM's heap";
    case A2a::NcclCuda: return "NCCL's alltoall on cudaMalloc";
    case A2a::NcclMem: return "NCCL's alltoall on ncclMemAlloc";
    case A2a::NcclVmm: return "NCCL's alltoall on cuMemCreate/cuMemMap";
    default: return "NCCL's alltoall on two cuMemCreate chunks mapped side by side";
    }
}

#ifdef REPRO_NCCL
static ncclComm_t g_nccl = nullptr;
#define NCCL(x)                                                                               \
    do {                                                                                      \
        ncclResult_t r_ = (x);                                                                \
        if (r_ != ncclSuccess) die(#x, ncclGetErrorString(r_), __FILE__, __LINE__);           \
    } while (0)

// This program's own NCCL communicator over the MPI world (unique id from rank 0).
static void nccl_init() {
    if (g_nccl) return;
    ncclUniqueId id;
    if (g_me == 0) NCCL(ncclGetUniqueId(&id));
    MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
    NCCL(ncclCommInitRank(&g_nccl, g_n, id, g_me));
    int v = 0;
    NCCL(ncclGetVersion(&v));
    if (g_me == 0) printf("repro: NCCL %d linked, own communicator of %d ranks\n", v, g_n);
}
#endif

// One alltoall of `per` bytes to each PE, on the stream.
static void a2a_call(A2a how, char *dst, char *src, size_t per) {
    if (how == A2a::Nvshmem) {
        NV(nvshmemx_alltoallmem_on_stream(NVSHMEM_TEAM_WORLD, dst, src, per, g_stream));
        return;
    }
#ifdef REPRO_NCCL
    NCCL(ncclGroupStart());
    for (int p = 0; p < g_n; ++p) {
        NCCL(ncclSend(src + p * per, per, ncclChar, p, g_nccl, g_stream));
        NCCL(ncclRecv(dst + p * per, per, ncclChar, p, g_nccl, g_stream));
    }
    NCCL(ncclGroupEnd());
#else
    (void)dst; (void)src; (void)per;
    fprintf(stderr, "PE %d: built without NCCL (build.sh found no nccl.h)\n", g_me);
    MPI_Abort(MPI_COMM_WORLD, 1);
#endif
}

// CUDA driver calls.
#define CU(x)                                                                                 \
    do {                                                                                      \
        CUresult r_ = (x);                                                                    \
        if (r_ != CUDA_SUCCESS) die(#x, ("CUresult " + std::to_string((int)r_)).c_str(),      \
                                    __FILE__, __LINE__);                                      \
    } while (0)

// A buffer of the NcclVmm kinds: physical memory of this GPU (POSIX file descriptor handles, as
// NVSHMEM's heap on one host), mapped at a reserved range with read and write access; `split`:
// two allocations of the buffer's size (rounded up to the granularity) mapped side by side, the
// buffer straddling the seam between them.
struct Vmm {
    char *user;  // what the case uses
    CUdeviceptr base;
    size_t size; // of the reserved range
    std::vector<CUmemGenericAllocationHandle> handles;
};
static std::vector<Vmm> g_vmm;

static char *vmm_alloc(size_t bytes, bool split) {
    int dev = 0;
    CUDA(cudaGetDevice(&dev));
    CUmemAllocationProp prop = {};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = dev;
    prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    size_t gran = 0;
    CU(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED));
    const size_t chunk = (bytes + gran - 1) / gran * gran, chunks = split ? 2 : 1;
    Vmm v = {};
    v.size = chunk * chunks;
    CU(cuMemAddressReserve(&v.base, v.size, gran, 0, 0));
    for (size_t k = 0; k < chunks; ++k) {
        CUmemGenericAllocationHandle h;
        CU(cuMemCreate(&h, chunk, &prop, 0));
        CU(cuMemMap(v.base + k * chunk, chunk, 0, h, 0));
        v.handles.push_back(h);
    }
    CUmemAccessDesc access = {};
    access.location = prop.location;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    CU(cuMemSetAccess(v.base, v.size, &access, 1));
    // Split: half the buffer (rounded down to 4 KiB) before the seam.
    v.user = (char *)v.base + (split ? chunk - (bytes / 2) / 4096 * 4096 : 0);
    g_vmm.push_back(v);
    return v.user;
}

static void vmm_free(char *p) {
    for (size_t i = 0; i < g_vmm.size(); ++i)
        if (g_vmm[i].user == p) {
            Vmm &v = g_vmm[i];
            const size_t chunk = v.size / v.handles.size();
            for (size_t k = 0; k < v.handles.size(); ++k) {
                CU(cuMemUnmap(v.base + k * chunk, chunk));
                CU(cuMemRelease(v.handles[k]));
            }
            CU(cuMemAddressFree(v.base, v.size));
            g_vmm.erase(g_vmm.begin() + i);
            return;
        }
}

static char *a2a_alloc(A2a how, size_t bytes) {
    void *p = nullptr;
    switch (how) {
    case A2a::NcclCuda: CUDA(cudaMalloc(&p, bytes)); return (char *)p;
#ifdef REPRO_NCCL
    case A2a::NcclMem: NCCL(ncclMemAlloc(&p, bytes)); return (char *)p;
#endif
    case A2a::NcclVmm: return vmm_alloc(bytes, false);
    case A2a::NcclVmmSplit: return vmm_alloc(bytes, true);
    default: return (char *)nvshmem_malloc(bytes);
    }
}

static void a2a_free(A2a how, char *p) {
    switch (how) {
    case A2a::NcclCuda: CUDA(cudaFree(p)); return;
#ifdef REPRO_NCCL
    case A2a::NcclMem: NCCL(ncclMemFree(p)); return;
#endif
    case A2a::NcclVmm:
    case A2a::NcclVmmSplit: vmm_free(p); return;
    default: nvshmem_free(p);
    }
}

static void graph_alltoall(bool keep, A2a how) {
#ifdef REPRO_NCCL
    if (how != A2a::Nvshmem) nccl_init();
#endif
    const size_t most = 256u << 20;
    const char *name = a2a_name(how);
    char *src = nullptr, *dst = nullptr;
    if (keep) {
        src = a2a_alloc(how, most);
        dst = a2a_alloc(how, most);
    }
    for (size_t call = 4096; call <= most; call *= 2) {
        const size_t per = call / g_n; // bytes to each PE
        if (!keep) {
            src = a2a_alloc(how, call);
            dst = a2a_alloc(how, call);
        }
        if (!src || !dst) {
            fprintf(stderr, "PE %d: allocating %zu B failed\n", g_me, call);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        CUDA(cudaMemset(src, 1, call));
        CUDA(cudaMemset(dst, 0, call));
        CUDA(cudaDeviceSynchronize());
        for (int w = 0; w < 3; ++w) a2a_call(how, dst, src, per);
        sync_within("the warm-up calls", per, 30);
        cudaGraph_t g[2];
        cudaGraphExec_t x[2];
        const int calls[2] = {20, 1};
        for (int k = 0; k < 2; ++k) {
            CUDA(cudaStreamBeginCapture(g_stream, cudaStreamCaptureModeRelaxed));
            for (int i = 0; i < calls[k]; ++i) a2a_call(how, dst, src, per);
            CUDA(cudaStreamEndCapture(g_stream, &g[k]));
            CUDA(cudaGraphInstantiate(&x[k], g[k], 0));
            CUDA(cudaGraphUpload(x[k], g_stream));
        }
        for (int r = 0; r < 3; ++r) {
            nvshmemx_barrier_all_on_stream(g_stream);
            sync_within("the barrier before a launch", per, 30);
            CUDA(cudaGraphLaunch(x[0], g_stream));
            sync_within("a launch of the 20-call graph", per, 30);
        }
        nvshmemx_barrier_all_on_stream(g_stream);
        for (int i = 0; i < 20; ++i) CUDA(cudaGraphLaunch(x[1], g_stream));
        sync_within("the launches of the 1-call graph", per, 30);
        for (int k = 0; k < 2; ++k) {
            CUDA(cudaGraphExecDestroy(x[k]));
            CUDA(cudaGraphDestroy(g[k]));
        }
        if (!keep) {
            a2a_free(how, dst);
            a2a_free(how, src);
        }
        if (g_me == 0) {
            printf("repro: graph alltoall, %s %s, %zu B a call: done\n", name, keep ? "(buffers kept)" : "(buffers per size)", call);
            fflush(stdout);
        }
    }
    if (keep) {
        a2a_free(how, dst);
        a2a_free(how, src);
    }
    if (g_me == 0) printf("repro: graph alltoall, %s %s: every size done, no hang\n", name, keep ? "(buffers kept)" : "(buffers per size)");
}

// What the collectives matrix saw once with 3 PEs on 3 GPUs (2026-11-27, one PE a GPU):
// NVSHMEM's int64 `and` reduce-scatter of 1001 elements a block, on a duplicate of the world
// made by split_strided, wrong in element 0 on PE 0 (0 where -1 & 5 & 7 = 5 was due), not seen
// again in four reruns. NVSHMEM runs bitwise reductions in its own kernels (NCCL has none).
// Here that call many times, as the matrix makes it: inputs and poisoned outputs copied on the
// stream, an on-stream barrier, the call, another barrier, a synchronize, every element of the
// block checked; rounds alternate and, or, xor and int32, int64, so each call finds the
// team's scratch holding the last call's other data. One line: rounds, wrong rounds, the first.
template <typename T>
static bool bitwise_rs_round(uint32_t c, nvshmem_team_t team, int op, size_t count, T *src,
                             T *dst, std::string &first) {
    const int n = g_n;
    auto elem = [&](int p, size_t k, size_t i) {
        const uint64_t hi = val(c, p, k, i), lo = val(c + 7777, p, k, i);
        return (T)(sizeof(T) == 8 ? (hi << 33) ^ lo ^ (uint64_t)(p % 2 ? 0 : -1) : hi ^ lo);
    };
    std::vector<T> in(n * count), poison(count);
    for (int k = 0; k < n; ++k)
        for (size_t i = 0; i < count; ++i) in[k * count + i] = elem(g_me, k, i);
    memset(poison.data(), 0x5a, count * sizeof(T));
    CUDA(cudaMemcpyAsync(src, in.data(), in.size() * sizeof(T), cudaMemcpyHostToDevice, g_stream));
    CUDA(cudaMemcpyAsync(dst, poison.data(), count * sizeof(T), cudaMemcpyHostToDevice, g_stream));
    nvshmemx_barrier_all_on_stream(g_stream);
    int rc;
    if (sizeof(T) == 8) {
        auto d = (int64_t *)dst;
        auto s = (const int64_t *)src;
        rc = op == 0 ? nvshmemx_int64_and_reducescatter_on_stream(team, d, s, count, g_stream)
           : op == 1 ? nvshmemx_int64_or_reducescatter_on_stream(team, d, s, count, g_stream)
                     : nvshmemx_int64_xor_reducescatter_on_stream(team, d, s, count, g_stream);
    } else {
        auto d = (int32_t *)dst;
        auto s = (const int32_t *)src;
        rc = op == 0 ? nvshmemx_int32_and_reducescatter_on_stream(team, d, s, count, g_stream)
           : op == 1 ? nvshmemx_int32_or_reducescatter_on_stream(team, d, s, count, g_stream)
                     : nvshmemx_int32_xor_reducescatter_on_stream(team, d, s, count, g_stream);
    }
    NV(rc);
    nvshmemx_barrier_all_on_stream(g_stream);
    CUDA(cudaStreamSynchronize(g_stream));
    std::vector<T> got(count);
    CUDA(cudaMemcpy(got.data(), dst, count * sizeof(T), cudaMemcpyDeviceToHost));
    long bad = 0;
    for (size_t i = 0; i < count; ++i) {
        T want = elem(0, g_me, i);
        for (int p = 1; p < n; ++p) {
            const T x = elem(p, g_me, i);
            want = op == 0 ? (T)(want & x) : op == 1 ? (T)(want | x) : (T)(want ^ x);
        }
        if (got[i] != want && bad++ == 0 && first.empty()) {
            char line[200];
            snprintf(line, sizeof line, "PE %d, %s %s, element %zu: %lld, want %lld", g_me,
                     sizeof(T) == 8 ? "int64" : "int32", op == 0 ? "and" : op == 1 ? "or" : "xor",
                     i, (long long)got[i], (long long)want);
            first = line;
        }
    }
    return bad == 0;
}

static void bitwise_rs(uint32_t &c, int rounds) {
    const size_t count = 1001;
    nvshmem_team_t team = NVSHMEM_TEAM_INVALID;
    NV(nvshmem_team_split_strided(NVSHMEM_TEAM_WORLD, 0, 1, g_n, nullptr, 0, &team));
    void *src = nvshmem_malloc(g_n * count * 8), *dst = nvshmem_malloc(count * 8);
    long wrong = 0;
    std::string first;
    for (int r = 0; r < rounds; ++r) {
        const int op = r % 3;
        const bool ok = (r / 3) % 2 ? bitwise_rs_round<int64_t>(c++, team, op, count, (int64_t *)src, (int64_t *)dst, first)
                                    : bitwise_rs_round<int32_t>(c++, team, op, count, (int32_t *)src, (int32_t *)dst, first);
        if (!ok) {
            ++wrong;
            printf("repro: PE %d: bitwise reduce-scatter round %d wrong: %s\n", g_me, r, first.c_str());
            fflush(stdout);
        }
    }
    long all = 0;
    MPI_Reduce(&wrong, &all, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    ++g_cases;
    if (all) ++g_wrong_cases;
    if (g_me == 0)
        printf("repro: bitwise reduce-scatter on a split duplicate of the world, %d rounds, n=%d: "
               "%ld wrong PE results\n", rounds, g_n, all);
    line_up();
    nvshmem_free(dst);
    nvshmem_free(src);
    nvshmem_team_destroy(team);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_me);
    MPI_Comm_size(MPI_COMM_WORLD, &g_n);
    // Which cases: a comma-separated list of rs, ar, fc, bc, teams, strided, stress (default
    // all of these), bitwise, graph_alltoall, graph_alltoall_keep, graph_nccl_cuda,
    // graph_nccl_mem, graph_nccl_vmm, graph_nccl_vmm_split, graph_nccl_heap (only when named).
    const char *only = getenv("REPRO_CASES");
    auto want = [&](const char *k) { return !only || strstr(only, k) != nullptr; };

    int devices = 0;
    CUDA(cudaGetDeviceCount(&devices));
    const char *lr = getenv("OMPI_COMM_WORLD_LOCAL_RANK");
    CUDA(cudaSetDevice((lr ? atoi(lr) : g_me) % devices));
    CUDA(cudaStreamCreateWithFlags(&g_stream, cudaStreamNonBlocking));

    // Unique-id bootstrap over MPI, as nvshmem-rs's runtime does it.
    nvshmemx_uniqueid_t uid;
    memset(&uid, 0, sizeof uid);
    if (g_me == 0) NV(nvshmemx_get_uniqueid(&uid));
    MPI_Bcast(&uid, sizeof uid, MPI_BYTE, 0, MPI_COMM_WORLD);
    nvshmemx_init_attr_t attr = NVSHMEMX_INIT_ATTR_INITIALIZER;
    NV(nvshmemx_set_attr_uniqueid_args(g_me, g_n, &uid, &attr));
    NV(nvshmemx_hostlib_init_attr(NVSHMEMX_INIT_WITH_UNIQUEID, &attr));
    if (g_me == 0) {
        int status = nvshmemx_init_status();
        printf("repro: NVSHMEM %d.%d.%d, %d PEs on %d GPU(s), init status %d%s\n",
               NVSHMEM_VENDOR_MAJOR_VERSION, NVSHMEM_VENDOR_MINOR_VERSION,
               NVSHMEM_VENDOR_PATCH_VERSION, g_n, devices, status,
               status == NVSHMEM_STATUS_FULL_MPG      ? " (full MPG: PEs share a GPU under MPS)"
               : status == NVSHMEM_STATUS_LIMITED_MPG ? " (limited MPG)"
                                                      : "");
        fflush(stdout);
    }

    uint32_t c = 1;
    // A block of 4099 int32 a PE: past nvshmem-rs's LL range, so its automatic choice hands
    // these to NVSHMEM.
    const size_t odd = 4099;
    if (want("rs")) {
        reduce_scatter(c++, odd, true, false);
        reduce_scatter(c++, odd, true, true);
        reduce_scatter(c++, odd, false, true);
        reduce_scatter(c++, 1, true, true);
    }
    if (want("fc")) {
        fcollect(c++, odd, false, false);
        fcollect(c++, odd, false, true);
        fcollect(c++, odd + 1, true, true);
        fcollect(c++, (1 << 20) / 4, false, true);
    }
    if (want("ar")) {
        all_reduce(c++, odd, true, true);
        all_reduce(c++, (1 << 20) / 4, true, false);
        all_reduce(c++, (1 << 20) / 4, true, true);
        all_reduce(c++, (1 << 20) / 4, false, true);
    }
    if (want("bc")) {
        broadcast(c++, 2, g_n - 1, 1);
        broadcast(c++, odd, g_n - 1, 1);
        broadcast(c++, (1 << 20) / 4, 0, 2);
        broadcast(c++, (64 << 20) / 4, g_n - 1, 3);
        c += 3;
    }
    // Opt-in only: REPRO_CASES=bitwise (REPRO_ROUNDS rounds, default 300).
    if (only && strstr(only, "bitwise")) {
        const char *r = getenv("REPRO_ROUNDS");
        bitwise_rs(c, r ? atoi(r) : 300);
    }
    // Opt-in only (they may hang by design): REPRO_CASES=graph_alltoall or graph_alltoall_keep
    // (NVSHMEM's), graph_nccl_cuda, graph_nccl_mem, graph_nccl_vmm, graph_nccl_vmm_split,
    // graph_nccl_heap (NCCL's own on cudaMalloc, ncclMemAlloc, this program's cuMemMap of one
    // allocation or across two, NVSHMEM's heap; the build needs
    // NCCL), each run when named, in this order (a hang ends the job: name one to a job).
    if (only && strstr(only, "graph_alltoall_keep")) graph_alltoall(true, A2a::Nvshmem);
    else if (only && strstr(only, "graph_alltoall")) graph_alltoall(false, A2a::Nvshmem);
    if (only && strstr(only, "graph_nccl_cuda")) graph_alltoall(false, A2a::NcclCuda);
    if (only && strstr(only, "graph_nccl_mem")) graph_alltoall(false, A2a::NcclMem);
    if (only && strstr(only, "graph_nccl_vmm_split")) graph_alltoall(false, A2a::NcclVmmSplit);
    else if (only && strstr(only, "graph_nccl_vmm")) graph_alltoall(false, A2a::NcclVmm);
    if (only && strstr(only, "graph_nccl_heap")) graph_alltoall(false, A2a::NcclHeap);
    if (want("teams")) teams(c);
    if (want("strided")) strided(c);
    if (want("stress")) {
        const char *r = getenv("REPRO_ROUNDS");
        const int rounds = r ? atoi(r) : 500;
        // REPRO_STRESS: which variant, as "FRESH,WORLD,HOSTSYNC" (default 0,1,0).
        int fresh = 0, world = 1, host_sync = 0;
        if (const char *v = getenv("REPRO_STRESS")) sscanf(v, "%d,%d,%d", &fresh, &world, &host_sync);
        if (g_me == 0) printf("repro: stress variant fresh=%d world=%d host_sync=%d\n", fresh, world, host_sync);
        strided_stress(c, rounds, fresh, world != 0, host_sync != 0);
    }
    if (g_me == 0) printf("repro: done, %d cases, %d wrong\n", g_cases, g_wrong_cases);
    line_up();
#ifdef REPRO_NCCL
    if (g_nccl) NCCL(ncclCommDestroy(g_nccl));
#endif
    CUDA(cudaStreamDestroy(g_stream));
    nvshmemx_hostlib_finalize();
    MPI_Finalize();
    return 0;
}
