//! `subzero-worker`: one child's worker, started by `subzero mcp` (`subzero-worker worker
//! …`), and the Pi worker's `tool-exec`.
//!
//! It is the worker half of `subzero` in a binary of its own: a child waiting on its model
//! maps and touches only the worker's code, so it starts faster and weighs less than the
//! whole `subzero` binary re-run as `subzero worker` (which still works, and is what the
//! broker falls back to where this binary is not installed next to `subzero`).

fn main() -> std::process::ExitCode {
    let code = subzero_worker::cli::main(std::env::args_os().skip(1));
    std::process::ExitCode::from(u8::try_from(code).unwrap_or(1))
}
