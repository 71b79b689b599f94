//! `subzero-soak`: the seeded fault soak; `cargo xtask soak` builds and runs it. The soak
//! itself is [`subzero_soak::cli`].

use std::process::ExitCode;

use subzero_soak::cli;

fn main() -> ExitCode {
    let args = match cli::parse(std::env::args().skip(1)) {
        Ok(args) => args,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("subzero-soak: no runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(async {
        // Interrupted, the soak's future is dropped, and with it each world: its processes
        // are killed and its tmpfs unmounted (a SIGKILL leaves both behind).
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(term) => term,
                Err(e) => {
                    eprintln!("subzero-soak: cannot watch SIGTERM: {e}");
                    return ExitCode::FAILURE;
                }
            };
        tokio::select! {
            passed = cli::soak(args) => if passed { ExitCode::SUCCESS } else { ExitCode::FAILURE },
            _ = tokio::signal::ctrl_c() => interrupted("SIGINT"),
            _ = term.recv() => interrupted("SIGTERM"),
        }
    })
}

fn interrupted(signal: &str) -> ExitCode {
    eprintln!("subzero-soak: {signal}: the running world is torn down; no verdict");
    ExitCode::from(130)
}
