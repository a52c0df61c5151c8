//! Generates `crates/nvshmem-sys/src/bindings.rs`.
//!
//! Usage: `nvshmem-sys-generator NVSHMEM_INCLUDE CUDA_INCLUDE EXPORTED_SYMBOLS OUT`
//!
//! `EXPORTED_SYMBOLS` is the output of `nm -D --defined-only libnvshmem_host.so.3`, one
//! symbol a line. Only functions that are both declared in `nvshmem_host.h` and exported by
//! the library are bound: the headers also declare inline-only functions (`nvshmem_init`,
//! `nvshmem_finalize`, ...) that the shared library does not export, and binding those would
//! make loading fail on a symbol that can never be there.
use std::{collections::BTreeSet, env, fs};

/// Exported, but never to be used by this project: NVLink multicast can take a shared host's
/// GPUs down (DEVELOPERS.md), so the binding is left out altogether.
const FORBIDDEN: &[&str] = &["nvshmemx_mc_ptr"];

fn main() {
    let args: Vec<String> = env::args().collect();
    let [_, nvshmem_inc, cuda_inc, symbols, out] = args.as_slice() else {
        eprintln!("usage: {} NVSHMEM_INCLUDE CUDA_INCLUDE EXPORTED_SYMBOLS OUT", args[0]);
        std::process::exit(2);
    };
    let exported: BTreeSet<String> = fs::read_to_string(symbols)
        .expect("read the exported-symbol list")
        .lines()
        .map(|l| l.split('@').next().unwrap_or("").trim().to_string())
        .filter(|s| s.starts_with("nvshmem") && !FORBIDDEN.contains(&s.as_str()))
        .collect();
    let allow = exported.iter().cloned().collect::<Vec<_>>().join("|");

    let bindings = bindgen::Builder::default()
        .header(format!("{nvshmem_inc}/nvshmem_host.h"))
        .clang_args(["-x", "c++", "-std=c++17"])
        .clang_arg(format!("-I{nvshmem_inc}"))
        .clang_arg(format!("-I{cuda_inc}"))
        .allowlist_function(format!("^({allow})$"))
        .allowlist_type("nvshmemx_init_attr_t|nvshmemx_uniqueid_t|nvshmem_team_config_t")
        .allowlist_type("nvshmemx_team_uniqueid_t|nvshmem_team_t")
        .allowlist_item("NVSHMEMX?_.*")
        .allowlist_type("flags|nvshmemx_status|nvshmemi_cmp_type|nvshmemx_signal_op_t")
        // cudarc's CUstream is the same opaque pointer as cudaStream_t, so a cudarc stream's
        // handle passes straight through with no cast.
        .blocklist_type("cudaStream_t|CUstream_st|CUstream")
        .raw_line("pub use cudarc::driver::sys::CUstream as cudaStream_t;")
        .blocklist_type("CUmodule|CUmod_st|CUlibrary|CUlib_st")
        .raw_line("pub use cudarc::driver::sys::{CUlibrary, CUmodule};")
        .dynamic_library_name("NvshmemLib")
        .dynamic_link_require_all(true)
        .layout_tests(true)
        .derive_default(true)
        .prepend_enum_name(false)
        .generate_comments(false)
        .generate()
        .expect("bindgen failed");
    bindings.write_to_file(out).expect("write bindings");
}
