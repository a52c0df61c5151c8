//! The `main` of every example: logging from `RUST_LOG`, then the example's body, whose error
//! is printed as one plain line (`hello: needs an NVIDIA GPU ...`: an answer, not a bug, so no
//! backtrace) with a non-zero exit status.

/// Runs an example's body, printing its error (with `name`) and exiting non-zero on failure.
pub fn main(name: &str, body: fn() -> anyhow::Result<()>) -> std::process::ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .init();
    match body() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{name}: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
