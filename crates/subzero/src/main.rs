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
    #[command(hide = true)]
    Worker {
        /// An inherited descriptor (the child's lock file, then its workspace slots) the
        /// worker holds while it lives; repeat it for each.
        #[arg(long)]
        lock_fd: Vec<i32>,
        /// Where to make the worker's private scratch directory (the broker passes its state
        /// directory's `scratch/`); without it, a fresh one in the system temp directory.
        #[arg(long)]
        scratch_parent: Option<std::path::PathBuf>,
        /// Why the worker is not init of a PID namespace (reported in its hello).
        #[arg(long)]
        process_containment_reason: Option<String>,
        /// `off`: apply no Landlock ruleset to tool processes, as on a kernel without it.
        #[arg(long, value_parser = ["auto", "off"])]
        landlock: Option<String>,
        /// The cgroup the broker started the worker in; tool processes go into its `tools`.
        #[arg(long, value_name = "DIR")]
        cgroup: Option<std::path::PathBuf>,
        /// A path no tool process may see (the state directory, the configuration, a
        /// credential file); repeat it for each.
        #[arg(long, value_name = "PATH")]
        hide: Vec<std::path::PathBuf>,
        /// A cgroup that bounds the tool tree (`pids=DIR`, `memory=DIR`); repeat it.
        #[arg(long, value_name = "CONTROLLER=DIR")]
        limits_cgroup: Vec<String>,
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
        Command::Worker {
            lock_fd,
            scratch_parent,
            process_containment_reason,
            landlock,
            cgroup,
            hide,
            limits_cgroup,
        } => u8::try_from(subzero_worker::run(subzero_worker::WorkerOptions {
            lock_fds: lock_fd,
            scratch_parent,
            process_containment_reason,
            landlock_off: landlock.as_deref() == Some("off"),
            cgroup,
            hide,
            limits_cgroups: limits_cgroup,
        }))
        .unwrap_or(1),
    };
    std::process::ExitCode::from(code)
}
