//! Every device-initiated kernel the repository ships (the examples' and nvshmem-perf's)
//! compiles with NVRTC and links with NVSHMEM's device library through nvJitLink, by both
//! routes, for sm_90: no GPU needed. `#[ignore]`d in a plain `cargo test` because they need
//! NVRTC, nvJitLink and NVSHMEM's device headers and library; scripts/check-kernels.sh
//! installs those (scripts/setup.sh) and runs them with the kernel cache off, so each really
//! compiles, once for each NVSHMEM release it installs (3.4.5 and 3.8.0: `NVSHMEM_HOME` names
//! the one a run builds against). With `NVSHMEM_RS_KERNEL_CACHE` set to a folder they fill that cache instead
//! (scripts/gpu-check.sh stage), so the GPU machine compiles nothing.
use nvshmem::device::{DeviceSource, Route};
use nvshmem::Error;

const ARCH: &str = "sm_90";

/// Builds `source` by both routes and checks that each image holds `kernels`.
fn builds(name: &str, code: &str, kernels: &[&str]) {
    for route in [Route::Relocatable, Route::Lto] {
        let image = DeviceSource::new(name, code)
            .route(route)
            .build(ARCH)
            .unwrap_or_else(|e| panic!("{name} ({}): {e}", route.name()));
        let found = image.kernel_names();
        for k in kernels {
            assert!(
                found.iter().any(|f| f == k),
                "{name} ({}): no kernel {k} in {found:?}",
                route.name()
            );
        }
        let t = image.times();
        println!(
            "{name} ({}): {} bytes, compile {:.2} s, link {:.3} s{}",
            route.name(),
            image.cubin().len(),
            t.compile.as_secs_f64(),
            t.link.as_secs_f64(),
            if t.cached { " (from the cache)" } else { "" }
        );
    }
}

#[test]
#[ignore = "needs NVRTC, nvJitLink and NVSHMEM's device library: run scripts/check-kernels.sh"]
fn halo_device_kernels_link() {
    builds(
        "halo_device",
        include_str!("../examples/kernels/halo_device.cu"),
        &["halo_device", "smooth"],
    );
}

#[test]
#[ignore = "needs NVRTC, nvJitLink and NVSHMEM's device library: run scripts/check-kernels.sh"]
fn ping_pong_kernel_links() {
    builds(
        "ping_pong",
        include_str!("../examples/kernels/ping_pong.cu"),
        &["ping_pong"],
    );
}

#[test]
#[ignore = "needs NVRTC, nvJitLink and NVSHMEM's device library: run scripts/check-kernels.sh"]
fn device_perf_kernels_link() {
    builds(
        "device_perf",
        include_str!("../crates/nvshmem-perf/kernels/device_perf.cu"),
        &[
            "put_latency_thread",
            "put_latency_block",
            "put_bw",
            "put_signal_ping_pong",
        ],
    );
}

/// Every scope of put-with-signal links: NVSHMEM's library names its out-of-line
/// put-with-signal with `unsigned long` where NVRTC has `unsigned long long`, which the crate's
/// header bridges (without it, this fails with an undefined nvshmemi_transfer_put_signal in
/// 3.4 to 3.7, nvshmemi_transfer_put_signal_dispatch in 3.8).
#[test]
#[ignore = "needs NVRTC, nvJitLink and NVSHMEM's device library: run scripts/check-kernels.sh"]
fn put_with_signal_links_at_every_scope() {
    builds(
        "put_signal_scopes",
        r#"
        #include <nvshmem_rs.cuh>
        extern "C" __global__ void scopes(nvrs_array<char> d, nvrs_signals s, int pe) {
            nvshmem_putmem_signal_nbi(d.ptr, d.ptr, d.len, s.at(0), 1, NVSHMEM_SIGNAL_ADD, pe);
            nvshmemx_putmem_signal_nbi_warp(d.ptr, d.ptr, d.len, s.at(0), 1, NVSHMEM_SIGNAL_ADD, pe);
            nvshmemx_putmem_signal_nbi_block(d.ptr, d.ptr, d.len, s.at(0), 1, NVSHMEM_SIGNAL_SET, pe);
            nvshmemx_putmem_signal_block(d.ptr, d.ptr, d.len, s.at(0), 1, NVSHMEM_SIGNAL_SET, pe);
            nvshmem_signal_wait_until(s.at(0), NVSHMEM_CMP_GE, 1);
            nvshmem_barrier_all();
            nvshmemx_barrier_all_block();
            nvshmem_int_p((int *)d.ptr, 1, pe);
            nvshmem_quiet();
            int team_pe = nvshmem_team_my_pe(NVSHMEM_TEAM_WORLD);
            if (nvshmem_ptr(d.ptr, team_pe) == nullptr) __trap();
        }
        "#,
        &["scopes"],
    );
}

#[test]
#[ignore = "needs NVRTC, nvJitLink and NVSHMEM's device library: run scripts/check-kernels.sh"]
fn a_compile_error_carries_nvrtcs_log() {
    let e = DeviceSource::new(
        "broken",
        "#include <nvshmem_rs.cuh>\nextern \"C\" __global__ void k() { not_declared(); }",
    )
    .build(ARCH)
    .unwrap_err();
    match &e {
        Error::Compile { kernel, log } => {
            assert_eq!(kernel, "broken");
            assert!(log.contains("not_declared"), "{log}");
        }
        other => panic!("expected a compile error, got {other}"),
    }
}

#[test]
#[ignore = "needs NVRTC, nvJitLink and NVSHMEM's device library: run scripts/check-kernels.sh"]
fn a_link_error_carries_nvjitlinks_log() {
    let e = DeviceSource::new(
        "unresolved",
        "#include <nvshmem_rs.cuh>\nextern __device__ int defined_nowhere(int);\nextern \"C\" __global__ void k(int *x) { *x = defined_nowhere(*x); }",
    )
    .build(ARCH)
    .unwrap_err();
    match &e {
        Error::Link { module, log } => {
            assert_eq!(module, "unresolved");
            assert!(log.contains("defined_nowhere"), "{log}");
        }
        other => panic!("expected a link error, got {other}"),
    }
    let e = DeviceSource::new("virtual", "")
        .build("compute_90")
        .unwrap_err();
    assert!(e.to_string().contains("not a real architecture"), "{e}");
}
