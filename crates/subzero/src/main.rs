//! The `subzero` binary: one `Command` per subcommand, dispatched in `main`.

mod demo;
mod doctor;
mod hosts;
mod inspect;
mod logging;
mod serve;
mod watch;

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
    /// Serve one MCP host over stdio (what a host's config starts).
    Mcp(serve::McpArgs),
    /// Show Subzero working end to end, offline, with a scripted model.
    Demo(demo::DemoArgs),
    /// Print or install Subzero's MCP server entry for a host.
    Hosts(hosts::HostsCommand),
    /// Check this machine's setup: state, database, locks, credentials, worker, kernel.
    Doctor(doctor::DoctorArgs),
    /// List children (all workspaces unless --workspace).
    Ls(inspect::LsArgs),
    /// Show one child's snapshot.
    Show(inspect::ShowArgs),
    /// Print a child's events; --follow keeps reading.
    Logs(inspect::LogsArgs),
    /// Print an artifact (a run's full result).
    Output(inspect::OutputArgs),
    /// Watch the workspace's children live: state, phase, turns, tokens, tool, last event.
    Watch(watch::WatchArgs),
    /// Run one child's worker (started by the broker; speaks JSON lines on stdin/stdout).
    /// The same as `subzero-worker worker …`, which the broker runs where it is installed.
    #[command(hide = true, disable_help_flag = true)]
    Worker {
        /// The worker's arguments (`subzero_worker::cli`).
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<std::ffi::OsString>,
    },
    /// Run one command of the Pi worker's bash in a nested Landlock domain with every
    /// descriptor above 2 closed (started by the Pi worker).
    #[command(hide = true, disable_help_flag = true)]
    ToolExec {
        /// The options and the program with its arguments (`subzero_worker::cli`).
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<std::ffi::OsString>,
    },
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let code: u8 = match cli.command {
        Command::Mcp(args) => serve::run(args),
        Command::Demo(args) => demo::run(args),
        Command::Hosts(cmd) => match hosts::run(cmd, &mut std::io::stdout()) {
            Ok(()) => 0,
            Err(e) => {
                eprintln!("error[{}]: {e}", e.code());
                1
            }
        },
        Command::Doctor(args) => doctor::run(args),
        Command::Ls(args) => inspect::ls(args),
        Command::Show(args) => inspect::show(args),
        Command::Logs(args) => inspect::logs(args),
        Command::Output(args) => inspect::output(args),
        Command::Watch(args) => watch::run(args),
        Command::Worker { args } => u8::try_from(subzero_worker::cli::worker(args)).unwrap_or(1),
        Command::ToolExec { args } => {
            u8::try_from(subzero_worker::cli::tool_exec(args)).unwrap_or(126)
        }
    };
    std::process::ExitCode::from(code)
}
