//! What `Runtime::init` judges before NVSHMEM starts (no GPU needed): a bad setting or variable
//! is refused before anything is started, so it never leaves NVSHMEM initialised. Each case
//! sets a variable of the process, so they run one after the other in this test binary of
//! their own.
use nvshmem::{Error, Runtime};

fn refused_before_start(var: &str, value: &str) {
    std::env::set_var(var, value);
    let got = Runtime::builder().init();
    std::env::remove_var(var);
    match got {
        Err(Error::Environment { var: v, .. }) => assert_eq!(v, var),
        other => panic!(
            "{var}={value}: expected Error::Environment before anything starts, got {other:?}"
        ),
    }
}

#[test]
fn bad_variables_are_refused_before_nvshmem_starts() {
    // The launcher's variables must not send the runtime to a bootstrap that needs a launcher.
    std::env::set_var("NVSHMEM_RS_BOOTSTRAP", "single");
    refused_before_start("NVSHMEM_RS_ALGORITHMS", "all_reduce=carrier_pigeon");
    refused_before_start("NVSHMEM_RS_ALGORITHMS", "not_a_pair");
    refused_before_start("NVSHMEM_RS_TIMEOUT", "5 parsecs");
    refused_before_start("NVSHMEM_RS_PDL", "sometimes");
    refused_before_start("NVSHMEM_RS_CHECK_CALLS", "maybe");
    refused_before_start("NVSHMEM_SYMMETRIC_SIZE", "lots");
    // A forced algorithm that does not exist, from the builder: refused before starting too.
    let got = Runtime::builder()
        .algorithm(nvshmem::collective::Collective::Gather, "carrier_pigeon")
        .init();
    assert!(
        matches!(
            got,
            Err(Error::InvalidArgument {
                arg: "algorithm",
                ..
            })
        ),
        "{got:?}"
    );
}
