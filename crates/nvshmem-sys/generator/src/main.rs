//! Generates `crates/nvshmem-sys/src/bindings.rs`.
//!
//! Usage: `nvshmem-sys-generator NVSHMEM_INCLUDE CUDA_INCLUDE EXPORTED_SYMBOLS OUT`
//!
//! `EXPORTED_SYMBOLS` is the output of `nm -D --defined-only libnvshmem_host.so.3`, one
//! symbol a line. Only functions that are both declared in `nvshmem_host.h` and exported by
//! the library are bound: the headers also declare inline-only functions (`nvshmem_init`,
//! `nvshmem_finalize`, ...) that the shared library does not export, and binding those would
//! make loading fail on a symbol that can never be there.
use std::{collections::BTreeSet, env, fs, process::Command};

/// Exported, but never to be used by this project: NVLink multicast can take a shared host's
/// GPUs down (DEVELOPERS.md), so the binding is left out altogether.
const FORBIDDEN: &[&str] = &["nvshmemx_mc_ptr"];

fn main() {
    let args: Vec<String> = env::args().collect();
    let [_, nvshmem_inc, cuda_inc, symbols, out] = args.as_slice() else {
        eprintln!(
            "usage: {} NVSHMEM_INCLUDE CUDA_INCLUDE EXPORTED_SYMBOLS OUT",
            args[0]
        );
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
    let text = fs::read_to_string(out).expect("read the bindings back");
    fs::write(out, typed_loader(&text)).expect("write bindings");
    let fmt = Command::new("rustfmt")
        .args(["--edition", "2021", out])
        .status();
    assert!(fmt.is_ok_and(|s| s.success()), "rustfmt {out} failed");
}

/// Rewrites bindgen's `NvshmemLib::from_library` so that rustc checks it quickly.
///
/// bindgen binds each symbol to a `let` (`let f = __library.get(b"f\0").map(|sym| *sym)?;`)
/// whose type rustc learns only from the struct literal at the end, so type inference holds
/// all ~1500 of them open at once: that one function took ~35 s of the crate's ~40 s to
/// type-check, twice in a workspace test build (the library and its unit tests). Here every
/// field of the literal loads its own symbol through a typed helper, in the same order and
/// with the same error on the first missing symbol, and takes its type from its field at once
/// (the crate then builds in ~4 s). `Symbol`s are not kept across fields, which would make
/// the borrow checker as slow.
fn typed_loader(src: &str) -> String {
    const LETS: &str = "        let __library = library.into();\n";
    const LITERAL: &str = "        Ok(NvshmemLib {\n";
    const END: &str = "        })\n";
    const IMPL: &str = "impl NvshmemLib {\n";
    let start = src.find(LETS).expect("bindgen's from_library") + LETS.len();
    let literal = start
        + src[start..]
            .find(LITERAL)
            .expect("from_library's struct literal");
    let end = literal + src[literal..].find(END).expect("the literal's end") + END.len();
    let mut names = Vec::new();
    let mut fields = String::from(LITERAL);
    for stmt in src[start..literal]
        .split(";\n")
        .filter(|s| !s.trim().is_empty())
    {
        let flat: String = stmt.chars().filter(|c| !c.is_whitespace()).collect();
        let name = flat
            .strip_prefix("let")
            .and_then(|s| s.split_once('='))
            .map(|(n, _)| n.to_string())
            .unwrap_or_default();
        assert_eq!(
            flat,
            format!("let{name}=__library.get(b\"{name}\\0\").map(|sym|*sym)?"),
            "bindgen's loader has changed: update typed_loader"
        );
        fields += &format!("            {name}: __symbol(&__library, b\"{name}\\0\")?,\n");
        names.push(name);
    }
    let mut listed: Vec<String> = src[literal + LITERAL.len()..end - END.len()]
        .split(',')
        .map(|f| f.trim().to_string())
        .filter(|f| !f.is_empty() && f != "__library")
        .collect();
    listed.sort();
    names.sort();
    assert_eq!(
        listed, names,
        "the literal's fields are not the loaded symbols"
    );
    fields += "            __library,\n";
    fields += END;
    let helper =
        "/// One symbol of the library, copied out of its `Symbol` (a function pointer).\n\
                  unsafe fn __symbol<T: Copy>(\n\
                  library: &::libloading::Library,\n\
                  name: &[u8],\n\
                  ) -> Result<T, ::libloading::Error> {\n\
                  Ok(*library.get::<T>(name)?)\n\
                  }\n";
    let at = src.find(IMPL).expect("impl NvshmemLib");
    assert!(at < start, "the loader is not in the first impl NvshmemLib");
    format!(
        "{}{helper}{}{fields}{}",
        &src[..at],
        &src[at..start],
        &src[end..]
    )
}
