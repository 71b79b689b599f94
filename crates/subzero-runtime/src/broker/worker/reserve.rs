//! Disk space set aside for settlements, so a full disk cannot keep a child `running`.
//!
//! A run's end is recorded by one small SQLite transaction, but on a full state directory
//! even that is refused, and the child would show `running` with no worker until someone
//! frees space. So the state directory holds a reserve: a file of [`RESERVE_BYTES`]
//! zeros (`<state>/space.reserve`, shared by the brokers of the directory). A settlement
//! the file system refuses releases it (the file is deleted) and is tried again at once,
//! and it then fits. The reserve is made again, at a worker's start, once the file system
//! has room for it several times over — never by taking the last free space.
//!
//! It is best effort: a writer of another child (an event, a spawn) may take the space
//! before the settlement does, and on a read-only or failing disk there is nothing to
//! release. The settlement is then retried as before, until the store takes writes.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// The size of the reserve: room for a settlement's WAL frames many times over (one
/// settlement writes a few dozen 4 KiB pages at most).
pub(super) const RESERVE_BYTES: u64 = 512 * 1024;

/// The reserve is made only when the file system has this many times its size free, so
/// making it never leaves less free than it holds.
const HEADROOM: u64 = 2;

/// The reserve file of one state directory.
#[derive(Debug, Clone)]
pub(super) struct SpaceReserve {
    path: PathBuf,
}

impl SpaceReserve {
    /// The reserve of the state directory `root`.
    pub(super) fn of(root: &Path) -> Self {
        Self {
            path: root.join("space.reserve"),
        }
    }

    /// Make the reserve unless it exists, or the file system has less than
    /// [`HEADROOM`] times its size free. Best effort: a failure is logged and left.
    pub(super) fn ensure(&self) {
        if self.path.metadata().is_ok_and(|m| m.len() == RESERVE_BYTES) {
            return;
        }
        let Some(dir) = self.path.parent() else {
            return;
        };
        let free = match rustix::fs::statvfs(dir) {
            Ok(fs) => fs.f_bavail.saturating_mul(fs.f_frsize),
            Err(e) => {
                tracing::debug!(%e, dir = %dir.display(), "cannot measure the free space of the state directory");
                return;
            }
        };
        if free < RESERVE_BYTES.saturating_mul(HEADROOM) {
            tracing::debug!(
                free,
                "not making the space reserve: the state directory has too little room"
            );
            return;
        }
        if let Err(e) = self.write() {
            let _ = std::fs::remove_file(&self.path);
            tracing::warn!(%e, path = %self.path.display(), "could not make the space reserve");
        }
    }

    /// Zeros, really written (a sparse file would reserve nothing), then synced.
    fn write(&self) -> std::io::Result<()> {
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&self.path)?;
        let block = vec![0u8; 64 * 1024];
        let mut left = RESERVE_BYTES;
        while left > 0 {
            let n = usize::try_from(left.min(block.len() as u64)).unwrap_or(block.len());
            file.write_all(&block[..n])?;
            left -= n as u64;
        }
        file.sync_all()
    }

    /// Give the reserved space back to the file system; whether there was any.
    pub(super) fn release(&self) -> bool {
        match std::fs::remove_file(&self.path) {
            Ok(()) => {
                tracing::warn!(path = %self.path.display(), bytes = RESERVE_BYTES, "released the space reserve to record a run's end on a full disk");
                true
            }
            Err(_) => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reserve_is_made_once_and_released_once() {
        let dir = tempfile::tempdir().expect("tempdir");
        let reserve = SpaceReserve::of(dir.path());
        reserve.ensure();
        let made = dir.path().join("space.reserve");
        assert_eq!(made.metadata().expect("made").len(), RESERVE_BYTES);
        reserve.ensure();
        assert!(reserve.release());
        assert!(!made.exists());
        assert!(!reserve.release(), "nothing left to release");
    }
}
