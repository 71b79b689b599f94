//! The runtime's error boundary: every failure carries a stable [`ErrorCode`] and a
//! message that tells the caller what to do next.

use std::fmt;
use std::path::PathBuf;

use subzero_core::lifecycle::CustodyRefused;
use subzero_core::{CheckoutState, ChildId, Coded, Described, ErrorCode, LifecycleError};

/// Result alias for runtime operations.
pub type RuntimeResult<T> = Result<T, RuntimeError>;

/// Everything the runtime adapters can fail with.
#[derive(Debug)]
pub enum RuntimeError {
    /// A caller argument is malformed or out of bounds.
    InvalidRequest(String),
    /// A well-formed id names nothing in this workspace scope.
    NotFound {
        /// What kind of thing (`child`, `run`, `artifact`).
        what: &'static str,
        /// The id as given.
        id: String,
    },
    /// A credential reference could not be resolved for this model URL.
    CredentialsRequired(String),
    /// The workspace's worker or writer slots are all taken.
    WorkspaceBusy(String),
    /// Another broker or process holds the child.
    Busy(String),
    /// The previous owner's processes may still be alive.
    RecoveryRequired(String),
    /// The core refused the transition (stale run, not running, interrupted, busy,
    /// custody, …); its code and message pass through unchanged. Nothing was written.
    Lifecycle(LifecycleError),
    /// A `requestId` was reused with different arguments.
    RequestConflict {
        /// The tool.
        tool: String,
        /// The request id.
        request_id: String,
    },
    /// A policy limit was hit.
    LimitExceeded(String),
    /// An artifact file is missing or unreadable.
    ArtifactUnavailable(String),
    /// The configuration file is unreadable or malformed.
    Config {
        /// The file.
        path: PathBuf,
        /// What is wrong and where.
        message: String,
    },
    /// The store's writer thread is gone (the broker is shutting down).
    ShuttingDown,
    /// The transcript does not match the recorded checkpoint; nothing changed.
    CheckpointIncompatible(String),
    /// The database was locked by another process past the busy timeout; nothing changed.
    Locked(String),
    /// The state database cannot be used for writing: deleted or replaced under this
    /// process, or the file system refuses the write (full, read-only, I/O error).
    /// Nothing was written.
    StorageUnavailable {
        /// The file that cannot be used.
        path: PathBuf,
        /// What happened to it, naming the path, and what to do next.
        problem: String,
    },
    /// SQLite failed (other than by being locked, which is `busy`).
    Sqlite(rusqlite::Error),
    /// A file-system operation failed.
    Io {
        /// What was being done.
        context: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// A stored value violates an invariant.
    Internal(String),
    /// A checkout decision was made from a ledger row that another broker wrote (or
    /// created) since; nothing was written.
    CheckoutChanged {
        /// The child whose checkout it is.
        child: ChildId,
        /// The state and row version the decision was made from; `None` for a new
        /// checkout.
        decided_from: Option<(CheckoutState, u64)>,
        /// The state and row version stored now; `None` when there is no row.
        stored: Option<(CheckoutState, u64)>,
    },
}

impl From<rusqlite::Error> for RuntimeError {
    /// A database held locked by another process past the busy timeout is `busy`: the
    /// transaction was rolled back, nothing changed, and a retry can succeed.
    fn from(err: rusqlite::Error) -> Self {
        let locked = matches!(
            err.sqlite_error_code(),
            Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked)
        );
        if locked {
            RuntimeError::Locked(
                "the state database is locked by another process (a long transaction held past the busy timeout); nothing was changed — retry shortly, and if it persists find the holder with `subzero doctor`".to_owned(),
            )
        } else {
            RuntimeError::Sqlite(err)
        }
    }
}

impl From<CustodyRefused> for RuntimeError {
    fn from(err: CustodyRefused) -> Self {
        RuntimeError::Lifecycle(err.into())
    }
}

impl RuntimeError {
    /// The stable code for this error.
    pub fn code(&self) -> ErrorCode {
        match self {
            RuntimeError::InvalidRequest(_) | RuntimeError::Config { .. } => {
                ErrorCode::InvalidRequest
            }
            RuntimeError::NotFound { .. } => ErrorCode::NotFound,
            RuntimeError::CredentialsRequired(_) => ErrorCode::CredentialsRequired,
            RuntimeError::WorkspaceBusy(_) => ErrorCode::WorkspaceBusy,
            RuntimeError::Busy(_)
            | RuntimeError::Locked(_)
            | RuntimeError::CheckoutChanged { .. } => ErrorCode::Busy,
            RuntimeError::CheckpointIncompatible(_) => ErrorCode::CheckpointIncompatible,
            RuntimeError::RecoveryRequired(_) => ErrorCode::RecoveryRequired,
            RuntimeError::Lifecycle(e) => e.code(),
            RuntimeError::RequestConflict { .. } => ErrorCode::RequestConflict,
            RuntimeError::LimitExceeded(_) => ErrorCode::LimitExceeded,
            RuntimeError::ArtifactUnavailable(_) => ErrorCode::ArtifactUnavailable,
            RuntimeError::ShuttingDown => ErrorCode::RuntimeShuttingDown,
            RuntimeError::StorageUnavailable { .. } => ErrorCode::StorageUnavailable,
            RuntimeError::Sqlite(_) | RuntimeError::Io { .. } | RuntimeError::Internal(_) => {
                ErrorCode::Internal
            }
        }
    }

    /// An I/O error on a file of the state directory: the file system refusing for now
    /// (full, quota, read-only, I/O error) is `storage_unavailable` naming `path`; anything
    /// else is [`RuntimeError::io`] with `what` and the path.
    pub fn io_at(what: &str, path: &std::path::Path, source: std::io::Error) -> Self {
        let shown = path.display();
        use rustix::io::Errno;
        let hint = match Errno::from_io_error(&source) {
            Some(Errno::NOSPC | Errno::DQUOT) => "free space on that file system",
            Some(Errno::ROFS) => "the file system is read-only: remount it writable (or repair it)",
            Some(Errno::IO) => "check the disk and the file system (dmesg, fsck)",
            _ => return RuntimeError::io(format!("{what} {shown}"), source),
        };
        RuntimeError::StorageUnavailable {
            path: path.to_path_buf(),
            problem: format!("{what} {shown}: {source}; nothing was written — {hint}, then retry"),
        }
    }

    /// Wrap an I/O error with what was being done.
    pub fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        RuntimeError::Io {
            context: context.into(),
            source,
        }
    }

    pub(crate) fn not_found(what: &'static str, id: impl ToString) -> Self {
        RuntimeError::NotFound {
            what,
            id: id.to_string(),
        }
    }
}

impl Coded for RuntimeError {
    fn code(&self) -> ErrorCode {
        RuntimeError::code(self)
    }
}

impl Described for RuntimeError {
    fn describe(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RuntimeError::InvalidRequest(m)
            | RuntimeError::CredentialsRequired(m)
            | RuntimeError::WorkspaceBusy(m)
            | RuntimeError::Busy(m)
            | RuntimeError::RecoveryRequired(m)
            | RuntimeError::LimitExceeded(m)
            | RuntimeError::ArtifactUnavailable(m)
            | RuntimeError::CheckpointIncompatible(m)
            | RuntimeError::Locked(m)
            | RuntimeError::Internal(m) => f.write_str(m),
            RuntimeError::NotFound { what, id } => write!(
                f,
                "{what} {id} does not exist in this workspace; list children with subzero_list"
            ),
            RuntimeError::Lifecycle(e) => e.describe(f),
            RuntimeError::RequestConflict { tool, request_id } => write!(
                f,
                "requestId {request_id} was already used for {tool} with different arguments; use a new requestId"
            ),
            RuntimeError::Config { path, message } => {
                write!(f, "configuration file {}: {message}", path.display())
            }
            RuntimeError::ShuttingDown => {
                f.write_str("the store is closed; no new work is accepted")
            }
            RuntimeError::StorageUnavailable { problem, .. } => f.write_str(problem),
            RuntimeError::Sqlite(e) => write!(f, "database error: {e}"),
            RuntimeError::Io { context, source } => write!(f, "{context}: {source}"),
            RuntimeError::CheckoutChanged {
                child,
                decided_from,
                stored,
            } => describe_checkout_changed(f, *child, *decided_from, *stored),
        }
    }
}

/// The message of [`RuntimeError::CheckoutChanged`].
fn describe_checkout_changed(
    f: &mut fmt::Formatter<'_>,
    child: ChildId,
    decided_from: Option<(CheckoutState, u64)>,
    stored: Option<(CheckoutState, u64)>,
) -> fmt::Result {
    let shown = |at: Option<(CheckoutState, u64)>, none: &'static str| match at {
        Some((state, version)) => format!("{state} at version {version}"),
        None => none.to_owned(),
    };
    write!(
        f,
        "the checkout of child {child} changed meanwhile (decided from {}, stored now: {}); another broker wrote it and nothing was written — read the checkout again and decide from what it is now",
        shown(decided_from, "no checkout"),
        shown(stored, "no checkout"),
    )
}

subzero_core::coded_display!(RuntimeError);

impl std::error::Error for RuntimeError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            RuntimeError::Io { source, .. } => Some(source),
            RuntimeError::Lifecycle(e) => e.source(),
            _ => None,
        }
    }
}

impl From<LifecycleError> for RuntimeError {
    fn from(err: LifecycleError) -> Self {
        RuntimeError::Lifecycle(err)
    }
}
