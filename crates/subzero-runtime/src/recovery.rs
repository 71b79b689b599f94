//! Startup recovery: settle what a dead owner left behind, using only kernel proof.
//!
//! For each child whose row claims an owner or an active run:
//! - owned by this broker, or by a broker whose liveness lock is still held → left alone;
//! - child lock free (we take it) → active run `interrupted` with the reason, queued
//!   runs cancelled, child `interrupted`, ownership cleared;
//! - child lock still held (an orphaned worker or tool process) → `recovery_required`
//!   and the holders are reported; a later pass recovers it once the lock frees.
//!
//! [`reclaim_scratch`] does the same for the workers' scratch directories: a directory whose
//! flock can be taken belongs to no live worker and is removed.
//!
//! Blocking: call at startup before serving, or from `spawn_blocking`.

use std::ffi::{CStr, CString};
use std::io;
use std::os::fd::{AsFd, OwnedFd};

use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use rustix::fs::{AtFlags, Dir, FlockOperation, Mode, OFlags};
use rustix::io::Errno;
use subzero_core::ChildId;

use crate::error::RuntimeResult;
use crate::locks::{HeldLock, LockHolder, holders, owner_is_alive};
use crate::paths::StatePaths;
use crate::store::{ChildRow, LockObservation, RecoveryOutcome, Store};

/// What one recovery pass did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RecoveryReport {
    /// Children whose active run was interrupted.
    pub interrupted: Vec<ChildId>,
    /// Idle children whose stale ownership was cleared.
    pub released: Vec<ChildId>,
    /// Children still held by processes, with the holders found in `/proc`.
    pub recovery_required: Vec<(ChildId, Vec<LockHolder>)>,
    /// Children owned by a live broker (or by us) and left alone.
    pub live_owner: Vec<ChildId>,
}

/// Run one recovery pass over every child that needs it.
pub fn recover_at_startup(
    store: &Store,
    paths: &StatePaths,
    self_token: &str,
) -> RuntimeResult<RecoveryReport> {
    let mut report = RecoveryReport::default();
    for row in store.children_needing_recovery_blocking()? {
        recover_one(store, paths, &row, self_token, &mut report)?;
    }
    Ok(report)
}

/// Recover a single child row (e.g. when `get` finds it `recovery_required`).
pub fn recover_child(
    store: &Store,
    paths: &StatePaths,
    row: &ChildRow,
    self_token: &str,
) -> RuntimeResult<RecoveryReport> {
    let mut report = RecoveryReport::default();
    recover_one(store, paths, row, self_token, &mut report)?;
    Ok(report)
}

fn recover_one(
    store: &Store,
    paths: &StatePaths,
    row: &ChildRow,
    self_token: &str,
    report: &mut RecoveryReport,
) -> RuntimeResult<()> {
    let child = row.child_id;
    if let Some(token) = row.owner_token.as_deref()
        && (token == self_token || owner_is_alive(paths, token)?)
        && row.ownership == crate::store::Ownership::Owned
    {
        report.live_owner.push(child);
        return Ok(());
    }
    let lock_path = paths.child_lock(child);
    let outcome = match HeldLock::try_exclusive(&lock_path)? {
        Some(_lock) => {
            let reason = match row.owner_token.as_deref() {
                Some(token) => format!(
                    "broker_lost: the owning broker ({token}) exited and no process holds the child any more; nothing was retried"
                ),
                None => {
                    "broker_lost: the child was left running without an owner; nothing was retried"
                        .to_owned()
                }
            };
            store.recover_child_blocking(
                child,
                row.owner_generation,
                LockObservation::Free,
                &reason,
            )?
        }
        None => store.recover_child_blocking(
            child,
            row.owner_generation,
            LockObservation::Held,
            "the previous owner's processes still hold the child",
        )?,
    };
    match outcome {
        RecoveryOutcome::Interrupted { .. } => {
            tracing::info!(child_id = %child, "recovery interrupted an orphaned run");
            report.interrupted.push(child);
        }
        RecoveryOutcome::Released => report.released.push(child),
        RecoveryOutcome::MarkedRecoveryRequired => {
            let found = holders(&lock_path);
            tracing::warn!(child_id = %child, holders = found.len(), "child lock still held; recovery required");
            report.recovery_required.push((child, found));
        }
        RecoveryOutcome::Changed => {}
    }
    Ok(())
}

/// What one scratch sweep did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ScratchSweep {
    /// Entries removed: dead workers' directories and anything that is not a directory.
    pub removed: usize,
    /// Directories left in place because a live worker holds their lock.
    pub live: usize,
    /// Entries that could not be removed (each is logged with its path).
    pub failed: usize,
}

/// Removes what dead workers (or anyone else) left in the state directory's `scratch/`:
/// every directory whose flock can be taken (a live worker holds its own) and every entry
/// that is not a directory. Nothing is followed: a link is removed as a link, its target
/// untouched. Failures are logged and counted, never fatal: a broker works without the sweep.
pub fn reclaim_scratch(paths: &StatePaths) -> ScratchSweep {
    let mut sweep = ScratchSweep::default();
    let root = paths.scratch_dir();
    let listed =
        open_dir(rustix::fs::CWD, root.as_path()).and_then(|dir| Ok((entry_names(&dir)?, dir)));
    let (names, dir) = match listed {
        Ok(listed) => listed,
        Err(err) => {
            tracing::warn!(path = %root.display(), %err, "cannot sweep the scratch directory");
            sweep.failed += 1;
            return sweep;
        }
    };
    for name in names {
        match reclaim_entry(&root, &dir, &name) {
            Ok(Reclaimed::Removed) => sweep.removed += 1,
            Ok(Reclaimed::Live) => sweep.live += 1,
            Err(err) => {
                let path = root.join(name.to_string_lossy().as_ref());
                tracing::warn!(path = %path.display(), %err, "cannot remove a stale scratch entry");
                sweep.failed += 1;
            }
        }
    }
    sweep
}

enum Reclaimed {
    Removed,
    Live,
}

fn reclaim_entry(root: &Path, scratch: &OwnedFd, name: &CStr) -> io::Result<Reclaimed> {
    let entry = match open_dir(scratch, name) {
        Ok(entry) => entry,
        Err(err) => {
            return match Errno::from_io_error(&err) {
                Some(Errno::LOOP | Errno::NOTDIR) => {
                    rustix::fs::unlinkat(scratch, name, AtFlags::empty())?;
                    Ok(Reclaimed::Removed)
                }
                Some(Errno::NOENT) => Ok(Reclaimed::Removed),
                _ => Err(err),
            };
        }
    };
    match rustix::fs::flock(&entry, FlockOperation::NonBlockingLockExclusive) {
        Ok(()) => {}
        Err(Errno::WOULDBLOCK) => return Ok(Reclaimed::Live),
        Err(e) => return Err(e.into()),
    }
    // Held: no worker uses it. `remove_dir_all` never follows a link, so even an entry
    // swapped for a link meanwhile only loses the link.
    std::fs::remove_dir_all(root.join(std::ffi::OsStr::from_bytes(name.to_bytes())))?;
    Ok(Reclaimed::Removed)
}

/// Opens a directory without following a link in its last component.
fn open_dir(at: impl AsFd, name: impl rustix::path::Arg) -> io::Result<OwnedFd> {
    Ok(rustix::fs::openat(
        at,
        name,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )?)
}

fn entry_names(dir: &OwnedFd) -> io::Result<Vec<CString>> {
    let mut names = Vec::new();
    for entry in Dir::read_from(dir)? {
        let name = entry?.file_name().to_owned();
        if name.as_bytes() != b"." && name.as_bytes() != b".." {
            names.push(name);
        }
    }
    Ok(names)
}

#[cfg(test)]
mod scratch_tests {
    use std::os::unix::fs::symlink;

    use super::*;

    #[test]
    fn the_sweep_removes_unlocked_entries_and_links_but_not_their_targets() {
        let dir = tempfile::tempdir().expect("tempdir");
        let victim = dir.path().join("victim");
        std::fs::create_dir(&victim).expect("victim");
        std::fs::write(victim.join("keep.txt"), "keep").expect("seed");
        let paths = StatePaths::create(dir.path().join("state")).expect("state");
        let scratch = paths.scratch_dir();
        symlink(&victim, scratch.join("link")).expect("link");
        std::fs::create_dir_all(scratch.join("dead/sub")).expect("dead");
        symlink(&victim, scratch.join("dead/sub/up")).expect("inner link");
        std::fs::write(scratch.join("dead/bash-0.out"), "raw").expect("output");
        std::fs::create_dir(scratch.join("live")).expect("live");
        let live = std::fs::File::open(scratch.join("live")).expect("open");
        rustix::fs::flock(&live, FlockOperation::NonBlockingLockExclusive).expect("lock");

        let sweep = reclaim_scratch(&paths);
        assert_eq!(
            sweep,
            ScratchSweep {
                removed: 2,
                live: 1,
                failed: 0
            }
        );
        assert!(scratch.join("live").is_dir());
        assert!(!scratch.join("dead").exists());
        assert!(std::fs::symlink_metadata(scratch.join("link")).is_err());
        assert_eq!(
            std::fs::read_to_string(victim.join("keep.txt"))
                .ok()
                .as_deref(),
            Some("keep")
        );
        drop(live);
        assert_eq!(
            reclaim_scratch(&paths).removed,
            1,
            "a released lock frees it"
        );
    }
}
