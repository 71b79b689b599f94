//! `subzero ls | show | logs | output | wait`: the state database read by a human at a
//! terminal (and, `wait`, by Pi's wake extension).
//!
//! What callers may rely on:
//! - They are read-only: the store is opened with `Store::open_read_only` (SQLite
//!   `OPEN_READ_ONLY` and `query_only` connections, WAL readers), so they never create,
//!   migrate or write anything and never wait for a broker that is writing. A missing
//!   state directory or database means no children yet (`ls` lists none; `show`, `logs`
//!   and `output` answer `not_found`); a database at another schema version is refused
//!   with a message that says what to do (`subzero mcp` upgrades an older one).
//! - Children are found by id in every workspace of the state directory (a human
//!   debugging one child should not need to know which host started it).
//! - `--json` prints the wire documents of `docs/protocol.md` (`ChildSummary`,
//!   `ChildSnapshot`, `ChildEvent`, the `subzero_output` chunk); without it, a table
//!   with colors on a terminal and tab-separated lines otherwise.
//! - On a terminal, what children, models and tools wrote is shown with its control
//!   characters and bidi overrides escaped; a pipe, or `--raw`, gets it as it is (see
//!   `crate::terminal_text`).
//! - A failure prints `error[code]: message` on stderr and exits 1.

pub(crate) mod change;
pub(crate) mod document;
pub(crate) mod events;
mod logs;
mod ls;
mod output;
mod show;
pub(crate) mod state;
pub(crate) mod table;
mod wait;

use std::fmt;
use std::io::Write;
use std::path::PathBuf;

use subzero_core::{Described, ErrorCode};
use subzero_runtime::RuntimeError;

pub use logs::LogsArgs;
pub use ls::LsArgs;
pub use output::OutputArgs;
pub use show::ShowArgs;
pub use wait::WaitArgs;

/// `--state-dir`, shared by every inspection command.
#[derive(Debug, Clone, clap::Args)]
pub struct StateDirArg {
    /// The state directory (default: $SUBZERO_STATE_DIR, else $XDG_STATE_HOME/subzero).
    #[arg(long, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
}

/// Why an inspection command failed: a stable code and what to do next.
#[derive(Debug)]
pub struct InspectError {
    code: ErrorCode,
    message: String,
}

impl InspectError {
    pub(crate) fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        InspectError {
            code,
            message: message.into(),
        }
    }

    /// The stable error code.
    pub fn code(&self) -> &'static str {
        self.code.as_str()
    }
}

impl fmt::Display for InspectError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl From<RuntimeError> for InspectError {
    fn from(e: RuntimeError) -> Self {
        // The message without its code: the `error[code]` prefix already says it.
        InspectError {
            code: e.code(),
            message: e.message(),
        }
    }
}

/// How a command ended early (also `subzero watch`'s).
#[derive(Debug)]
pub enum Failure {
    /// The reader of stdout went away (`| head`, a closed pipe): a clean end.
    StdoutClosed,
    /// A real failure, printed as `error[code]: message`.
    Error(InspectError),
}

impl From<InspectError> for Failure {
    fn from(e: InspectError) -> Self {
        Failure::Error(e)
    }
}

impl From<RuntimeError> for Failure {
    fn from(e: RuntimeError) -> Self {
        Failure::Error(e.into())
    }
}

/// The end of a command.
pub(crate) type Outcome = Result<(), Failure>;

/// Map a write to stdout: a closed pipe ends the command quietly, anything else fails it.
pub(crate) fn written(result: std::io::Result<()>) -> Outcome {
    match result {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Err(Failure::StdoutClosed),
        Err(e) => Err(Failure::Error(InspectError::new(
            ErrorCode::Internal,
            format!("cannot write to stdout: {e}"),
        ))),
    }
}

/// A single-threaded runtime for the store's async reads.
pub(crate) fn runtime() -> Result<tokio::runtime::Runtime, InspectError> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| {
            InspectError::new(
                ErrorCode::Internal,
                format!("cannot start the async runtime: {e}"),
            )
        })
}

/// Print a command's failure as `error[code]: message` and map it to an exit code.
pub fn exit_code(outcome: Outcome) -> u8 {
    match outcome {
        Ok(()) | Err(Failure::StdoutClosed) => 0,
        Err(Failure::Error(e)) => {
            let _ = writeln!(std::io::stderr(), "error[{}]: {e}", e.code());
            1
        }
    }
}

/// `subzero ls`.
pub fn ls(args: LsArgs) -> u8 {
    exit_code(ls::run(args))
}

/// `subzero show`.
pub fn show(args: ShowArgs) -> u8 {
    exit_code(show::run(args))
}

/// `subzero logs`.
pub fn logs(args: LogsArgs) -> u8 {
    exit_code(logs::run(args))
}

/// `subzero output`.
pub fn output(args: OutputArgs) -> u8 {
    exit_code(output::run(args))
}

/// `subzero wait`.
pub fn wait(args: WaitArgs) -> u8 {
    exit_code(wait::run(args))
}
