//! Logs go to stderr or a file, never stdout (stdout is the MCP channel).

use std::path::Path;

use tracing_subscriber::filter::Targets;
use tracing_subscriber::fmt::writer::BoxMakeWriter;
use tracing_subscriber::prelude::*;

/// The filter when `SUBZERO_LOG` is unset: quiet. Hosts show a server's stderr to the
/// user (Claude Code records every line as `[ERROR] … Server stderr`), so only what needs
/// attention is written.
pub const DEFAULT_LEVEL: tracing::Level = tracing::Level::WARN;

/// Install the global subscriber. `SUBZERO_LOG` sets the filter (default [`DEFAULT_LEVEL`]):
/// a level, or `target=level` directives separated by commas (`warn,subzero_runtime=debug`).
/// Target filters, not `EnvFilter`'s span and field filters: those bring a regex engine
/// and its Unicode tables into the binary, whose relocation alone was a sixth of the
/// broker's cold start.
pub fn init(file: Option<&Path>) -> Result<(), String> {
    let filter = match std::env::var("SUBZERO_LOG") {
        Ok(directives) => directives.parse::<Targets>().unwrap_or_else(|e| {
            eprintln!(
                "subzero: SUBZERO_LOG={directives:?} is not a level or `target=level` list ({e}); logging at {DEFAULT_LEVEL}"
            );
            Targets::new().with_default(DEFAULT_LEVEL)
        }),
        Err(_) => Targets::new().with_default(DEFAULT_LEVEL),
    };
    let writer = match file {
        Some(path) => {
            let file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .map_err(|e| format!("cannot open log file {}: {e}", path.display()))?;
            BoxMakeWriter::new(std::sync::Mutex::new(file))
        }
        None => BoxMakeWriter::new(std::io::stderr),
    };
    let layer = tracing_subscriber::fmt::layer()
        .with_ansi(false)
        .log_internal_errors(false)
        .with_writer(writer);
    tracing_subscriber::registry()
        .with(layer.with_filter(filter))
        .try_init()
        .map_err(|e| format!("cannot install logging: {e}"))
}
