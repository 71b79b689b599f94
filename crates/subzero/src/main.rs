//! The `subzero` binary: one `Command` per subcommand, dispatched in `main`.

mod demo;
mod doctor;
mod hosts;
mod inspect;
mod logging;
mod serve;
mod terminal_text;
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
    #[command(about = serve::ABOUT)]
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
}

fn main() -> std::process::ExitCode {
    // `subzero mcp` is what hosts start, and a host waits for it: its flags are parsed
    // without building every other command's parser first (a fifth of its time to answer).
    // (`cargo xtask bench --only machinery` builds a binary without it, to show what it pays.)
    if cfg!(not(subzero_without_mcp_args))
        && std::env::args_os().nth(1).is_some_and(|word| word == "mcp")
    {
        return std::process::ExitCode::from(serve::run(serve::McpArgs::from_command_line()));
    }
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
    };
    std::process::ExitCode::from(code)
}
