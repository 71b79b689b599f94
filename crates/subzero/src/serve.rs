//! `subzero mcp`: serve one host over stdio until it closes stdin or sends SIGTERM.
//!
//! stdout carries only MCP frames; logs go to stderr (or `--log-file`). On stdin EOF or
//! SIGTERM the broker shuts down cleanly: active runs are stopped, queues cleared, and
//! workers given a bounded time to confirm before their state is recorded.
//!
//! Tool processes of children run as the same OS user as the broker, so before it reads
//! any secret the broker makes itself non-dumpable (its `/proc/<pid>/environ`, `mem` and
//! `fd` become root's), and before it starts any thread it captures the secrets its
//! configuration names and scrubs them from its environment.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use clap::Args;
use subzero_runtime::broker::{Broker, BrokerOptions};
use subzero_runtime::config::Config;
use subzero_runtime::mcp::McpServer;
use subzero_runtime::paths::{PathEnv, resolve_config_path, resolve_state_dir};
use subzero_runtime::secret_env::SecretEnv;
use subzero_runtime::supervisor::reap;

use crate::logging;

/// Flags of `subzero mcp`.
#[derive(Debug, Args)]
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
    let dumpable = nix::sys::prctl::set_dumpable(false);
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
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("subzero mcp: cannot start the async runtime: {e}");
            return 1;
        }
    };
    let outcome = runtime.block_on(serve(options));
    // Everything is recorded by now. Do not wait for tokio's blocking stdin reader: after
    // a signal the host may keep our stdin open, and that read would never return.
    runtime.shutdown_timeout(std::time::Duration::from_millis(200));
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
    let worker_exe = std::env::current_exe()
        .map_err(|e| format!("cannot locate the subzero executable: {e}"))?;
    let secrets = capture_secrets(&config_path);
    Ok(BrokerOptions {
        workspace,
        state_dir,
        config_path,
        worker_exe,
        worker_log: std::env::var("SUBZERO_LOG").ok(),
        secrets,
    })
}

/// The secrets the configuration names, removed from this process's environment and from
/// what `/proc/<pid>/environ` shows. A configuration that cannot be loaded captures nothing
/// here; `Broker::open` reports it. When the scrub is refused the values are still
/// captured, and the variables stay visible to processes of this user.
fn capture_secrets(config_path: &Path) -> SecretEnv {
    let Ok(config) = Config::load(config_path) else {
        return SecretEnv::default();
    };
    match SecretEnv::capture_and_scrub(&config) {
        Ok(secrets) => secrets,
        Err(e) => {
            tracing::warn!(%e, "secret variables stay in the broker's environment");
            SecretEnv::capture(&config)
        }
    }
}

async fn serve(options: BrokerOptions) -> Result<(), String> {
    // Orphans of a worker that dies come back to us, so nothing escapes containment.
    if let Err(e) = reap::become_subreaper() {
        tracing::warn!(%e, "could not become a child subreaper; escaped processes of a crashed worker may survive");
    }
    let broker = Broker::open(options).await.map_err(|e| e.to_string())?;
    tracing::info!("subzero mcp ready");
    let served = serve_until_signal(Arc::clone(&broker)).await;
    broker.shutdown().await;
    tracing::info!("subzero mcp stopped");
    served
}

async fn serve_until_signal(broker: Arc<Broker>) -> Result<(), String> {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .map_err(|e| format!("cannot watch SIGTERM: {e}"))?;
    tokio::select! {
        served = McpServer::serve_stdio(broker) => served.map_err(|e| format!("MCP session failed: {e}")),
        _ = term.recv() => {
            tracing::info!("SIGTERM: shutting down");
            Ok(())
        }
        _ = tokio::signal::ctrl_c() => {
            tracing::info!("SIGINT: shutting down");
            Ok(())
        }
    }
}
