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
        /// `pi`: be the init of the Pi SDK worker (Node running `workers/pi`) instead of
        /// running the Rust model loop.
        #[arg(long, value_parser = ["rust", "pi"])]
        engine: Option<String>,
        /// The Pi worker's folder (with `node_modules`).
        #[arg(long, value_name = "DIR")]
        pi_dir: Option<std::path::PathBuf>,
        /// The Node that runs the Pi worker.
        #[arg(long, value_name = "PATH")]
        pi_node: Option<std::path::PathBuf>,
        /// What the Pi worker's jail needs of the child's grant (JSON; nothing secret).
        #[arg(long, value_name = "JSON")]
        pi_grant: Option<String>,
        /// The child's transcript, opened before the tools' view hides it.
        #[arg(long, value_name = "PATH")]
        pi_transcript: Option<std::path::PathBuf>,
        /// The child's workspace root.
        #[arg(long, value_name = "DIR")]
        pi_workspace: Option<std::path::PathBuf>,
    },
    /// Run one command of the Pi worker's bash in a nested Landlock domain with every
    /// descriptor above 2 closed (started by the Pi worker).
    #[command(hide = true)]
    ToolExec {
        /// `read-only` or `workspace`.
        #[arg(long, value_parser = ["read-only", "workspace"])]
        access: String,
        /// The workspace root.
        #[arg(long, value_name = "DIR")]
        root: std::path::PathBuf,
        /// The worker's scratch directory.
        #[arg(long, value_name = "DIR")]
        scratch: std::path::PathBuf,
        /// A writable path of the grant; repeat it.
        #[arg(long, value_name = "PATH")]
        writable: Vec<std::path::PathBuf>,
        /// The program and its arguments.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, required = true)]
        command: Vec<std::ffi::OsString>,
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
            engine,
            pi_dir,
            pi_node,
            pi_grant,
            pi_transcript,
            pi_workspace,
        } => {
            let options = subzero_worker::WorkerOptions {
                lock_fds: lock_fd,
                scratch_parent,
                process_containment_reason,
                landlock_off: landlock.as_deref() == Some("off"),
                cgroup,
                hide,
                limits_cgroups: limits_cgroup,
            };
            let code = if engine.as_deref() == Some("pi") {
                let pi = subzero_worker::PiOptions {
                    dir: pi_dir.unwrap_or_default(),
                    node: pi_node.unwrap_or_else(|| "node".into()),
                    grant: pi_grant,
                    transcript: pi_transcript,
                    workspace: pi_workspace,
                };
                subzero_worker::run_pi(options, pi)
            } else {
                subzero_worker::run(options)
            };
            u8::try_from(code).unwrap_or(1)
        }
        Command::ToolExec {
            access,
            root,
            scratch,
            writable,
            command,
        } => u8::try_from(subzero_worker::tool_exec(subzero_worker::ToolExecOptions {
            access,
            root,
            scratch,
            writable,
            command,
        }))
        .unwrap_or(126),
    };
    std::process::ExitCode::from(code)
}
