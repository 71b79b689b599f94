//! `subzero mcp`: serve one host over stdio until it closes stdin or signals the broker.
//!
//! stdout carries only MCP frames; logs go to stderr (or `--log-file`). stdin EOF, SIGINT
//! (Claude Code's first signal), SIGTERM and SIGHUP (a closed terminal) all lead to the
//! same clean shutdown: active runs are stopped, queues cleared, every stop confirmed by
//! its worker (tool tree killed and reaped) and recorded, then the process exits 0 at
//! once. Further signals during that shutdown are logged and ignored, so a host that
//! follows SIGINT with SIGTERM does not cut the recording short.
//!
//! Tool processes of children run as the same OS user as the broker, so before it reads
//! any secret the broker makes itself non-dumpable (its `/proc/<pid>/environ`, `mem` and
//! `fd` become root's), and before it starts any thread it captures the secrets its
//! configuration names and scrubs them from its environment.

use std::path::{Path, PathBuf};

use clap::Args;
use subzero_runtime::broker::BrokerOptions;
use subzero_runtime::config::Config;
use subzero_runtime::mcp::{McpServer, OpeningBroker};
use subzero_runtime::paths::{PathEnv, resolve_config_path, resolve_state_dir};
use subzero_runtime::secret_env::SecretEnv;
use subzero_runtime::supervisor::reap;
use tokio::signal::unix::{Signal, SignalKind, signal};

use crate::logging;

/// What `subzero mcp` does, in `subzero --help` and `subzero mcp --help`.
pub const ABOUT: &str = "Serve one MCP host over stdio (what a host's config starts)";

/// Flags of `subzero mcp`.
#[derive(Debug, Args, PartialEq, Eq)]
pub struct McpArgs {
    /// The workspace children run in (default: the current directory).
    #[arg(long, value_name = "DIR")]
    pub workspace: Option<PathBuf>,
    /// The state directory (default: $SUBZERO_STATE_DIR, else $XDG_STATE_HOME/subzero).
    #[arg(long, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
    /// The configuration file (default: $SUBZERO_CONFIG, else $XDG_CONFIG_HOME/subzero/config.toml).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Write logs to this file instead of stderr.
    #[arg(long, value_name = "FILE")]
    pub log_file: Option<PathBuf>,
}

/// Run the broker. Returns the process exit code.
pub fn run(args: McpArgs) -> u8 {
    // First of all: a same-user process may read a dumpable process's environment and
    // memory through /proc. Exec'd tool processes are dumpable again, which is fine.
    let dumpable =
        rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::NotDumpable);
    if let Err(e) = logging::init(args.log_file.as_deref()) {
        eprintln!("subzero mcp: {e}");
        return 2;
    }
    if let Err(e) = dumpable {
        tracing::warn!(%e, "could not make the broker non-dumpable; processes of this user can read its memory");
    }
    // Still the only thread: the environment may be changed only now.
    let options = match broker_options(&args) {
        Ok(options) => options,
        Err(e) => {
            tracing::error!("{e}");
            eprintln!("subzero mcp: {e}");
            return 1;
        }
    };
    // One runtime thread whatever the machine: the broker's work is waiting (on workers, the
    // host, SQLite's writer thread), what blocks runs on the blocking pool, and with the
    // host's pipes on the same reactor (`mcp::stdio`) a frame is read, served and answered
    // without waking another thread — which, on a VM whose other CPU sleeps, was most of the
    // first reply's time. Each thread more would also cost a stack and a malloc arena.
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("subzero mcp: cannot start the async runtime: {e}");
            return 1;
        }
    };
    // On the heap: the whole broker's future is tens of KiB, and each page of stack it
    // would take (with every copy of it on the way into `block_on`) is a page fault at start.
    let outcome = runtime.block_on(Box::pin(serve(options)));
    // Everything is recorded and the store is closed by now. Do not wait for tokio's
    // blocking stdin reader (stdin a terminal or a file, `mcp::stdio`): after a signal the
    // host keeps our stdin open, that read never returns, and waiting for it was most of the
    // exit time (hosts SIGKILL after 500 ms).
    runtime.shutdown_background();
    match outcome {
        Ok(()) => 0,
        Err(e) => {
            tracing::error!("{e}");
            eprintln!("subzero mcp: {e}");
            1
        }
    }
}

/// Resolve where the broker works and capture its secrets. Must run before any thread
/// starts, because it removes the captured variables from the process environment.
fn broker_options(args: &McpArgs) -> Result<BrokerOptions, String> {
    let env = PathEnv::from_process();
    let state_dir =
        resolve_state_dir(args.state_dir.as_deref(), &env).map_err(|e| e.to_string())?;
    let config_path =
        resolve_config_path(args.config.as_deref(), &env).map_err(|e| e.to_string())?;
    let workspace = match &args.workspace {
        Some(dir) => dir.clone(),
        None => std::env::current_dir()
            .map_err(|e| format!("cannot read the current directory: {e}"))?,
    };
    let exe = std::env::current_exe()
        .map_err(|e| format!("cannot locate the subzero executable: {e}"))?;
    let worker_exe = subzero_runtime::supervisor::worker_executable(&exe);
    let secrets = capture_secrets(&config_path);
    Ok(BrokerOptions {
        workspace,
        state_dir,
        config_path,
        worker_exe,
        worker_log: std::env::var("SUBZERO_LOG").ok(),
        secrets,
        host_adapters: crate::hosts::host_adapters(),
        build: Some(subzero_runtime::broker::BuildFacts {
            commit: crate::build_info::COMMIT.to_owned(),
            target: crate::build_info::TARGET.to_owned(),
        }),
    })
}

/// The secrets the configuration names, removed from this process's environment and from
/// what `/proc/<pid>/environ` shows. A configuration that cannot be loaded captures nothing
/// here; `Broker::open` reports it. When the scrub is refused the values are still
/// captured, and the variables stay visible to processes of this user.
fn capture_secrets(config_path: &Path) -> SecretEnv {
    // What the broker will serve: a broken entry is left out there, so its variable is not
    // captured here either.
    let Ok(loaded) = Config::load_lenient(config_path) else {
        return SecretEnv::default();
    };
    let config = loaded.config;
    match SecretEnv::capture_and_scrub(&config) {
        Ok(secrets) => secrets,
        Err(e) => {
            tracing::warn!(%e, "secret variables stay in the broker's environment");
            SecretEnv::capture(&config)
        }
    }
}

async fn serve(options: BrokerOptions) -> Result<(), String> {
    // Before anything that takes time: from here on a signal means a clean shutdown, not
    // the default action (which would leave runs `interrupted`).
    let mut signals = HostSignals::watch()?;
    // Orphans of a worker that dies come back to us, so nothing escapes containment.
    if let Err(e) = reap::become_subreaper() {
        tracing::warn!(%e, "could not become a child subreaper; escaped processes of a crashed worker may survive");
    }
    // The state is opened, recovered and probed once the host's `initialize` is answered
    // (or at the first use); every tool call waits for it (`OpeningBroker`).
    let opening = OpeningBroker::open(options);
    tokio::spawn(report_a_failed_open(opening.clone()));
    let served = tokio::select! {
        served = McpServer::serve_stdio(opening.clone()) => {
            served.map_err(|e| format!("MCP session failed: {e}"))
        }
        name = signals.next() => {
            tracing::info!("{name}: shutting down");
            Ok(())
        }
    };
    let broker = opening.get().await.map_err(|e| e.to_string())?;
    let shutdown = broker.shutdown();
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            () = &mut shutdown => break,
            name = signals.next() => {
                tracing::info!("{name} during shutdown: already stopping runs and recording them");
            }
        }
    }
    tracing::info!("subzero mcp stopped");
    served
}

/// Says at once on stderr (a host shows it) when the broker could not open; the session
/// goes on answering every tool call with the reason, and the process exits 1 at its end.
async fn report_a_failed_open(opening: OpeningBroker) {
    match opening.opened().await {
        Ok(_) => tracing::info!("subzero mcp ready"),
        Err(e) => {
            tracing::error!("{e}");
            eprintln!("subzero mcp: {e}");
        }
    }
}

/// The signals a host (or a closing terminal) ends the broker with. Their handlers stay
/// installed for the life of the process, so none of them can kill it mid-shutdown.
struct HostSignals {
    interrupt: Signal,
    terminate: Signal,
    hangup: Signal,
}

impl HostSignals {
    fn watch() -> Result<HostSignals, String> {
        let watch = |kind: SignalKind, name: &str| {
            signal(kind).map_err(|e| format!("cannot watch {name}: {e}"))
        };
        Ok(HostSignals {
            interrupt: watch(SignalKind::interrupt(), "SIGINT")?,
            terminate: watch(SignalKind::terminate(), "SIGTERM")?,
            hangup: watch(SignalKind::hangup(), "SIGHUP")?,
        })
    }

    /// The name of the next signal that arrives (never returns once the runtime is gone).
    async fn next(&mut self) -> &'static str {
        tokio::select! {
            Some(()) = self.interrupt.recv() => "SIGINT",
            Some(()) = self.terminate.recv() => "SIGTERM",
            Some(()) = self.hangup.recv() => "SIGHUP",
            else => std::future::pending().await,
        }
    }
}
