//! `subzero-worker`: one child's worker, started by `subzero mcp` (`subzero-worker worker
//! …`), and the Pi worker's `tool-exec`.
//!
//! The worker's code lives in this binary alone: a child waiting on its model maps and
//! touches only the worker's code, and `subzero` (the broker) carries none of it, nor the
//! regex engine its tools bring, so it starts faster. The broker finds this binary next to
//! its own executable.

#[path = "../build_info.rs"]
mod build_info;

fn main() -> std::process::ExitCode {
    let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    if build_info::print_if_asked("subzero-worker", &args) {
        return std::process::ExitCode::SUCCESS;
    }
    let code = subzero_worker::cli::main(args.into_iter());
    std::process::ExitCode::from(u8::try_from(code).unwrap_or(1))
}
