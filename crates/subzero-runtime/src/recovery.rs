//! Startup recovery: settle what a dead owner left behind, using only kernel proof.
//!
//! For each child whose row claims an owner or an active run:
//! - owned by this broker, or by a broker whose liveness lock is still held → left alone;
//! - child lock free (we take it) → active run `interrupted` with the reason, queued
//!   runs cancelled, child `interrupted`, ownership cleared;
//! - child lock still held (an orphaned worker or tool process) → `recovery_required`
//!   and the holders are reported; a later pass recovers it once the lock frees.
//!
//! Blocking: call at startup before serving, or from `spawn_blocking`.

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
                    "the owning broker ({token}) exited and no process holds the child any more; nothing was retried"
                ),
                None => {
                    "the child was left running without an owner; nothing was retried".to_owned()
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
