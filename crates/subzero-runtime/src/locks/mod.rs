//! Kernel-held locks: the only proof of liveness Subzero trusts.
//!
//! Every lock is an exclusive `flock` on a file under `<state>/locks/`. A `flock`
//! belongs to the open file description, so it stays held while any descriptor that
//! refers to it is open in any process — the broker hands its descriptor to the worker,
//! the worker's tool processes inherit it, and the lock frees the moment the last of
//! them exits (also on SIGKILL). There is no PID file and no TTL lease anywhere.
//!
//! Dropping a [`HeldLock`] only closes this process's descriptor; it never calls
//! `LOCK_UN`, because that would release the lock for every process sharing it.

mod holders;
mod slots;

use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use rustix::fs::{FlockOperation, flock};
use subzero_core::ChildId;

use crate::error::{RuntimeError, RuntimeResult};
use crate::paths::StatePaths;

pub use holders::{LockHolder, holders, holders_by_inode};
pub use slots::{SlotGuard, SlotKind, try_take_slot};

/// An exclusive `flock` held through this process's descriptor.
#[derive(Debug)]
pub struct HeldLock {
    file: File,
    path: PathBuf,
}

impl HeldLock {
    /// Try once to take the exclusive lock on `path` (creating the file, mode 0600).
    /// `Ok(None)` means another open file description holds it.
    pub fn try_exclusive(path: &Path) -> RuntimeResult<Option<HeldLock>> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(path)
            .map_err(|e| RuntimeError::io_at("cannot open lock file", path, e))?;
        match flock(&file, FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => Ok(Some(HeldLock {
                file,
                path: path.to_path_buf(),
            })),
            Err(errno) if errno == rustix::io::Errno::WOULDBLOCK => Ok(None),
            Err(errno) => Err(RuntimeError::io(
                format!("cannot flock {}", path.display()),
                io::Error::from(errno),
            )),
        }
    }

    /// The lock file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Give up this handle and return its descriptor, still close-on-exec: no process the
    /// broker starts inherits it, except the one worker whose spawner places it at a fixed
    /// number between fork and exec (`dup2`, which clears close-on-exec in that child only;
    /// `supervisor/spawn.rs`). The lock stays held while that descriptor, or any copy a
    /// descendant inherits, is open. The caller closes its copy after spawning.
    pub fn into_fd(self) -> OwnedFd {
        OwnedFd::from(self.file)
    }
}

impl AsFd for HeldLock {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.file.as_fd()
    }
}

/// Whether the lock file at `path` is free right now (takes and drops it).
pub fn is_free(path: &Path) -> RuntimeResult<bool> {
    Ok(HeldLock::try_exclusive(path)?.is_some())
}

/// The per-child lock. Holding it is the only permission to run the child's worker.
#[derive(Debug)]
pub struct ChildLock {
    child: ChildId,
    lock: HeldLock,
}

impl ChildLock {
    /// Try once to take the child's lock; `busy` (naming the holders) when it is held.
    pub fn try_acquire(paths: &StatePaths, child: ChildId) -> RuntimeResult<ChildLock> {
        let path = paths.child_lock(child);
        match HeldLock::try_exclusive(&path)? {
            Some(lock) => Ok(ChildLock { child, lock }),
            None => Err(RuntimeError::Busy(format!(
                "child {child} is held by another process ({}); wait for its run to settle or check subzero doctor",
                describe_holders(&path)
            ))),
        }
    }

    /// The child.
    pub fn child(&self) -> ChildId {
        self.child
    }

    /// The lock file.
    pub fn path(&self) -> &Path {
        self.lock.path()
    }

    /// Hand the lock to a worker: see [`HeldLock::into_fd`].
    pub fn into_fd(self) -> OwnedFd {
        self.lock.into_fd()
    }
}

/// One broker instance's liveness lock. Its token is written as the owner of every
/// child the broker claims; recovery treats an owner whose lock is free as dead.
#[derive(Debug)]
pub struct BrokerIdentity {
    token: String,
    _lock: HeldLock,
}

impl BrokerIdentity {
    /// Create a fresh token and hold its lock for the life of this value.
    pub fn acquire(paths: &StatePaths) -> RuntimeResult<BrokerIdentity> {
        let token = format!("bk_{}", ulid::Ulid::new());
        let path = paths.owner_lock(&token);
        match HeldLock::try_exclusive(&path)? {
            Some(lock) => Ok(BrokerIdentity { token, _lock: lock }),
            None => Err(RuntimeError::Internal(format!(
                "fresh owner lock {} is already held",
                path.display()
            ))),
        }
    }

    /// The owner token stored in claimed rows.
    pub fn token(&self) -> &str {
        &self.token
    }
}

/// Whether the broker that wrote `token` is still running. A dead owner's lock file
/// is removed as a side effect.
pub fn owner_is_alive(paths: &StatePaths, token: &str) -> RuntimeResult<bool> {
    let valid = token.len() <= 64
        && token
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if !valid {
        return Ok(false);
    }
    let path = paths.owner_lock(token);
    if !path.exists() {
        return Ok(false);
    }
    match HeldLock::try_exclusive(&path)? {
        Some(lock) => {
            let _ = std::fs::remove_file(lock.path());
            Ok(false)
        }
        None => Ok(true),
    }
}

pub(crate) fn describe_holders(path: &Path) -> String {
    let found = holders(path);
    if found.is_empty() {
        "holder not visible in /proc".to_owned()
    } else {
        let names: Vec<String> = found
            .iter()
            .map(|h| format!("pid {} {}", h.pid, h.command))
            .collect();
        format!("held by {}", names.join(", "))
    }
}
