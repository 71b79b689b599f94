//! The `subzero` binary: one `Command` per subcommand, dispatched in `main`.

use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(
    name = "subzero",
    version,
    about = "Delegate work to persistent child agents"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run one child's worker (started by the broker; speaks JSON lines on stdin/stdout).
    #[command(hide = true)]
    Worker {
        /// An inherited descriptor (the child's lock file) kept open for tool processes.
        #[arg(long)]
        lock_fd: Option<i32>,
    },
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let code = match cli.command {
        Command::Worker { lock_fd } => {
            subzero_worker::run(subzero_worker::WorkerOptions { lock_fd })
        }
    };
    std::process::ExitCode::from(u8::try_from(code).unwrap_or(1))
}
