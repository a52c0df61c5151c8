//! The README's quick start is `examples/quick_start.rs`, word for word, so that the program a
//! newcomer copies first is one that compiles (cargo builds every example before its tests)
//! and, with `?` on a cudarc call, converts cudarc's errors; and an error ending `main` reads
//! as a sentence, not as the variant's fields.
use nvshmem::cudarc::driver::{sys::CUresult, DriverError};
use nvshmem::Error;

#[test]
fn readme_quick_start_is_the_example() {
    let readme = include_str!("../README.md");
    let example = include_str!("../examples/quick_start.rs");
    let block = readme
        .split("```rust\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .expect("the README has a rust code block");
    assert_eq!(
        block, example,
        "the README's first rust block differs from examples/quick_start.rs"
    );
}

#[test]
fn cudarc_errors_convert_and_read_as_sentences() {
    fn users_code() -> Result<(), Error> {
        Err(DriverError(CUresult::CUDA_ERROR_INVALID_VALUE))?
    }
    let e = users_code().unwrap_err();
    assert!(matches!(e, Error::Cuda { .. }), "{e}");
    // What `fn main() -> Result<(), Error>` prints is Debug: the same sentence as Display.
    let e = Error::NoGpu("no driver".into());
    assert_eq!(format!("{e:?}"), e.to_string());
    assert_eq!(
        format!("{e:?}"),
        "this program needs an NVIDIA GPU and its driver: no driver"
    );
}
