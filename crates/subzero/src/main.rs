//! The `subzero` binary: one `Command` per subcommand, dispatched in `main`.

mod build_info;
mod demo;
mod doctor;
mod gc;
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
    version = build_info::VERSION_LINE,
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
    /// Check this machine's setup: state, database, locks, checkouts, credentials, worker, kernel.
    Doctor(doctor::DoctorArgs),
    /// Remove what finished isolated checkouts left behind (a dry run unless --apply).
    Gc(gc::GcArgs),
    /// List children (all workspaces unless --workspace).
    Ls(inspect::LsArgs),
    /// Show one child's snapshot.
    Show(inspect::ShowArgs),
    /// Print a child's events; --follow keeps reading.
    Logs(inspect::LogsArgs),
    /// Print an artifact (a run's full result).
    Output(inspect::OutputArgs),
    /// Wait until a child's run has ended, then print it as JSON.
    Wait(inspect::WaitArgs),
    /// Watch the workspace's children live: state, phase, turns, tokens, tool, last event.
    Watch(watch::WatchArgs),
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
        Command::Gc(args) => gc::run(args),
        Command::Ls(args) => inspect::ls(args),
        Command::Show(args) => inspect::show(args),
        Command::Logs(args) => inspect::logs(args),
        Command::Output(args) => inspect::output(args),
        Command::Wait(args) => inspect::wait(args),
        Command::Watch(args) => watch::run(args),
    };
    std::process::ExitCode::from(code)
}
