//! Logs go to stderr or a file, never stdout (stdout is the MCP channel).

use std::path::Path;

use tracing_subscriber::EnvFilter;

/// The filter when `SUBZERO_LOG` is unset: quiet. Hosts show a server's stderr to the
/// user (Claude Code records every line as `[ERROR] … Server stderr`), so only what needs
/// attention is written.
pub const DEFAULT_FILTER: &str = "warn";

/// Install the global subscriber. `SUBZERO_LOG` sets the filter (default [`DEFAULT_FILTER`]).
pub fn init(file: Option<&Path>) -> Result<(), String> {
    let filter =
        EnvFilter::try_from_env("SUBZERO_LOG").unwrap_or_else(|_| EnvFilter::new(DEFAULT_FILTER));
    // A log line that cannot be written (the host closed our stderr) is dropped: tracing
    // would otherwise report it with eprintln!, which panics on a closed stderr.
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(false)
        .log_internal_errors(false);
    let installed = match file {
        Some(path) => {
            let file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .map_err(|e| format!("cannot open log file {}: {e}", path.display()))?;
            builder.with_writer(std::sync::Mutex::new(file)).try_init()
        }
        None => builder.with_writer(std::io::stderr).try_init(),
    };
    installed.map_err(|e| format!("cannot install logging: {e}"))
}
