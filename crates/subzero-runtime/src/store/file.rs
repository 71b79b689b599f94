//! The database file the store has open, and the storage failures writing to it can meet.
//!
//! SQLite keeps writing through its open descriptor when the path is unlinked or renamed
//! over, so a database deleted or replaced under a running broker would silently take
//! that broker's writes into an orphan no later broker opens. The store therefore
//! remembers the file's identity (device and inode) when it opens it, and checks the
//! path against it — one `stat` — inside every write transaction, before anything is
//! written.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use crate::error::{RuntimeError, RuntimeResult};

/// The state database as opened: its path and the file that path named then.
#[derive(Debug, Clone)]
pub(crate) struct DatabaseFile {
    path: PathBuf,
    dev: u64,
    ino: u64,
}

/// What a restart fixes, said once for every "the file is not ours any more" answer.
const RESTART: &str = "nothing was written — restart the host's Subzero MCP server (or close and reopen the host) so it opens the database now at that path";

impl DatabaseFile {
    /// Record the identity of the file at `path` (just opened by the store).
    pub(crate) fn identify(path: &Path) -> RuntimeResult<DatabaseFile> {
        let meta = std::fs::metadata(path).map_err(|e| unavailable(path, &e))?;
        Ok(DatabaseFile {
            path: path.to_path_buf(),
            dev: meta.dev(),
            ino: meta.ino(),
        })
    }

    /// The database path.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// `Ok` while the path still names the file the store opened; otherwise the typed
    /// refusal that names the path and says to restart.
    pub(crate) fn check(&self) -> RuntimeResult<()> {
        let shown = self.path.display();
        match std::fs::metadata(&self.path) {
            Ok(meta) if meta.dev() == self.dev && meta.ino() == self.ino => Ok(()),
            Ok(meta) => Err(RuntimeError::StorageUnavailable {
                path: self.path.clone(),
                problem: format!(
                    "the state database {shown} was replaced by another file while this broker had it open (opened: device {} inode {}; now: device {} inode {}); {RESTART}",
                    self.dev,
                    self.ino,
                    meta.dev(),
                    meta.ino()
                ),
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                Err(RuntimeError::StorageUnavailable {
                    path: self.path.clone(),
                    problem: format!(
                        "the state database {shown} was deleted while this broker had it open ({e}); {RESTART}"
                    ),
                })
            }
            Err(e) => Err(unavailable(&self.path, &e)),
        }
    }
}

fn unavailable(path: &Path, e: &std::io::Error) -> RuntimeError {
    RuntimeError::StorageUnavailable {
        path: path.to_path_buf(),
        problem: format!(
            "the state database {} cannot be checked: {e}; nothing was written — check that the state directory is yours and readable, then retry",
            path.display()
        ),
    }
}

/// A write that failed because the file system refused it (full, read-only, I/O error,
/// cannot open) becomes `storage_unavailable` naming the path; any other error is kept.
pub(crate) fn storage_failure(err: RuntimeError, path: &Path) -> RuntimeError {
    let RuntimeError::Sqlite(sqlite) = &err else {
        return err;
    };
    let hint = match sqlite.sqlite_error_code() {
        Some(rusqlite::ErrorCode::DiskFull) => "free space on that file system",
        Some(rusqlite::ErrorCode::ReadOnly | rusqlite::ErrorCode::PermissionDenied) => {
            "make the file and its directory writable by you (mode 0600 / 0700)"
        }
        Some(rusqlite::ErrorCode::SystemIoFailure | rusqlite::ErrorCode::CannotOpen) => {
            "check the file system (dmesg, df) and the file's permissions"
        }
        _ => return err,
    };
    RuntimeError::StorageUnavailable {
        path: path.to_path_buf(),
        problem: format!(
            "the state database {} cannot be written: {sqlite}; nothing was written — {hint}, then retry",
            path.display()
        ),
    }
}
