// nvshmem_rs.cuh: the one file a device-initiated kernel of nvshmem-rs includes.
//
// It includes NVSHMEM's device API (<nvshmem.h>, <nvshmemx.h>) after the few fixes NVRTC needs
// with NVSHMEM 3.4 to 3.8, and adds what such kernels need beside it: the device view of a
// symmetric array (what `nvshmem::device::Args::array` passes) and short signal helpers. The same file
// compiles with nvcc (crates/nvshmem-perf's reference build), where the NVRTC fixes are left out.
//
//   #include <nvshmem_rs.cuh>
//   extern "C" __global__ void ring(nvrs_array<int> buf, nvrs_signals sig) {
//       int right = (nvshmem_my_pe() + 1) % nvshmem_n_pes();
//       nvshmem_putmem_signal_nbi(buf.ptr, buf.ptr, sizeof(int), sig.at(0), 1,
//                                 NVSHMEM_SIGNAL_ADD, right);
//       nvrs_wait_ge(sig.at(0), 1);
//   }
#ifndef NVSHMEM_RS_CUH
#define NVSHMEM_RS_CUH

#include <non_abi/nvshmem_build_options.h>
#include <non_abi/nvshmem_version.h>

#if defined(__CUDACC_RTC__) && NVSHMEM_VENDOR_MAJOR_VERSION == 3 && NVSHMEM_VENDOR_MINOR_VERSION < 5
// NVSHMEM 3.4's device headers name std::is_integral and friends, which NVRTC provides only
// as cuda::std (from CCCL, whose include folder the crate passes to NVRTC). From 3.5 on the
// headers use cuda::std under NVRTC themselves (checked with 3.5.21, 3.6.5, 3.7.2 and 3.8.0).
#include <cuda/std/type_traits>
namespace std {
using cuda::std::enable_if;
using cuda::std::false_type;
using cuda::std::is_empty;
using cuda::std::is_floating_point;
using cuda::std::is_integral;
using cuda::std::is_same;
using cuda::std::is_signed;
using cuda::std::is_unsigned;
using cuda::std::true_type;
}  // namespace std
#endif

// NVSHMEM's device library (libnvshmem_device.a) was built by nvcc on Linux, where uint64_t is
// `unsigned long`; under NVRTC (CCCL's <cuda/std/cstdint>) it is `unsigned long long`. The one
// out-of-line transfer function with a raw uint64_t parameter, the proxy/IBGDA path of
// put-with-signal, therefore gets a different mangled name in an NVRTC-compiled kernel than in
// the library, and any put-with-signal (every scope) would not link. These specialisations
// forward the NVRTC name to the library's. (Peers reached by load/store, the NVLink and
// same-GPU case, never call it: their put-with-signal is inline.) The function's name and
// parameters differ by release, as the headers of each declare it:
//   3.4:       nvshmemi_transfer_put_signal<SCOPE>(rptr, lptr, bytes, sig, signal, op, pe, is_nbi)
//   3.5 - 3.7: the same with a last `nvshmemx_qp_handle_t qp_index` (an int)
//   3.8:       renamed nvshmemi_transfer_put_signal_dispatch<SCOPE>, parameters as 3.5's; the old
//              name is now an inline wrapper over it
// The library instantiates it for the thread, warp and block scopes in each. A release not
// listed here gets no bridge: its headers must be read first (a put-with-signal would then fail
// to link with an undefined nvshmemi_transfer_put_signal..., not run wrongly).
#if defined(__CUDACC_RTC__) && NVSHMEM_VENDOR_MAJOR_VERSION == 3 && \
    NVSHMEM_VENDOR_MINOR_VERSION >= 4 && NVSHMEM_VENDOR_MINOR_VERSION <= 8
#include <non_abi/device/pt-to-pt/nvshmemi_transfer_api.cuh>
#if NVSHMEM_VENDOR_MINOR_VERSION == 4
#define NVRS_PUT_SIGNAL_FN nvshmemi_transfer_put_signal
#define NVRS_PUT_SIGNAL_QP_PARAM
#define NVRS_PUT_SIGNAL_QP_ARG
#else
#if NVSHMEM_VENDOR_MINOR_VERSION == 8
#define NVRS_PUT_SIGNAL_FN nvshmemi_transfer_put_signal_dispatch
#else
#define NVRS_PUT_SIGNAL_FN nvshmemi_transfer_put_signal
#endif
#define NVRS_PUT_SIGNAL_QP_PARAM , nvshmemx_qp_handle_t qp_index
#define NVRS_PUT_SIGNAL_QP_ARG , qp_index
#endif
// The library's spelling (an overload: `unsigned long` where NVRTC's uint64_t is not).
template <threadgroup_t SCOPE>
__device__ void NVRS_PUT_SIGNAL_FN(void *rptr, void *lptr, size_t bytes, void *sig_addr,
                                   unsigned long signal, nvshmemi_amo_t sig_op, int pe,
                                   bool is_nbi NVRS_PUT_SIGNAL_QP_PARAM);
#define NVRS_PUT_SIGNAL_BRIDGE(SCOPE)                                                             \
    template <>                                                                                   \
    __device__ __noinline__ void NVRS_PUT_SIGNAL_FN<SCOPE>(                                       \
        void *rptr, void *lptr, size_t bytes, void *sig_addr, unsigned long long signal,          \
        nvshmemi_amo_t sig_op, int pe, bool is_nbi NVRS_PUT_SIGNAL_QP_PARAM) {                    \
        NVRS_PUT_SIGNAL_FN<SCOPE>(rptr, lptr, bytes, sig_addr, (unsigned long)signal, sig_op, pe, \
                                  is_nbi NVRS_PUT_SIGNAL_QP_ARG);                                 \
    }
NVRS_PUT_SIGNAL_BRIDGE(NVSHMEMI_THREADGROUP_THREAD)
NVRS_PUT_SIGNAL_BRIDGE(NVSHMEMI_THREADGROUP_WARP)
NVRS_PUT_SIGNAL_BRIDGE(NVSHMEMI_THREADGROUP_BLOCK)
#undef NVRS_PUT_SIGNAL_BRIDGE
#undef NVRS_PUT_SIGNAL_FN
#undef NVRS_PUT_SIGNAL_QP_PARAM
#undef NVRS_PUT_SIGNAL_QP_ARG
#endif

#include <nvshmem.h>
#include <nvshmemx.h>

// The device view of a symmetric array or view, as `nvshmem::device::Args::array` passes it:
// this PE's address of element 0 (a symmetric address, valid as the target of puts to any PE)
// and the number of elements. Layout: two 8-byte words, matching the crate's `DeviceArray`.
template <typename T>
struct nvrs_array {
    T *ptr;
    unsigned long long len;
    __device__ __forceinline__ T &operator[](unsigned long long i) const { return ptr[i]; }
    __device__ __forceinline__ unsigned long long size() const { return len; }
    // Element i, or a trap (the kernel ends with an error the host sees) when out of range.
    __device__ __forceinline__ T *at(unsigned long long i) const {
        if (i >= len) __trap();
        return ptr + i;
    }
    // PE `pe`'s copy of element i when this GPU can load and store it directly, else null.
    __device__ __forceinline__ T *on_pe(unsigned long long i, int pe) const {
        return static_cast<T *>(nvshmem_ptr(at(i), pe));
    }
};

// An array of signal words (`SymArray<u64>`).
typedef nvrs_array<uint64_t> nvrs_signals;

// Adds `v` to PE `pe`'s copy of the signal word `sig` (NVSHMEM_SIGNAL_ADD).
__device__ __forceinline__ void nvrs_signal_add(uint64_t *sig, uint64_t v, int pe) {
    nvshmemx_signal_op(sig, v, NVSHMEM_SIGNAL_ADD, pe);
}

// Sets PE `pe`'s copy of `sig` to `v` (NVSHMEM_SIGNAL_SET).
__device__ __forceinline__ void nvrs_signal_set(uint64_t *sig, uint64_t v, int pe) {
    nvshmemx_signal_op(sig, v, NVSHMEM_SIGNAL_SET, pe);
}

// Waits until this PE's `sig` is at least `v`; returns the value seen.
__device__ __forceinline__ uint64_t nvrs_wait_ge(uint64_t *sig, uint64_t v) {
    return nvshmem_signal_wait_until(sig, NVSHMEM_CMP_GE, v);
}

// Waits until this PE's `sig` equals `v`; returns the value seen.
__device__ __forceinline__ uint64_t nvrs_wait_eq(uint64_t *sig, uint64_t v) {
    return nvshmem_signal_wait_until(sig, NVSHMEM_CMP_EQ, v);
}

#endif  // NVSHMEM_RS_CUH
