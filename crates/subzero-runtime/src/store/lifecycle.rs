//! The store's bridge to the core lifecycle.
//!
//! Every state transition is decided by `subzero_core`: a transaction loads the
//! child's row, its active run and its follow-up queue into a [`ChildRecord`], goes up
//! through the one checked [`AnyChild::load`], calls the core operation, and only then
//! `super::write` persists what the core returned. A refusal is the core's own typed
//! error (its code and message reach the caller unchanged), and nothing was written.

use rusqlite::{Connection, OptionalExtension, params};
use subzero_core::lifecycle::{ActiveRunRecord, ChildRecord, LeafRef as CoreLeaf, QueuedRunRecord};
use subzero_core::{AnyChild, ChildState, RunId, RunStatus, Sha256Digest};

use super::StoreOptions;
use super::rows::{ChildRow, LeafRef};
use crate::error::{RuntimeError, RuntimeResult};

/// Load `row` (with its active run and queue) into the core. A row that describes no
/// legal lifecycle state is `internal` and is neither loaded nor changed.
pub(crate) fn load(
    conn: &Connection,
    options: &StoreOptions,
    row: &ChildRow,
) -> RuntimeResult<AnyChild> {
    let record = record_of(conn, options, row)?;
    AnyChild::load(record).map_err(|e| RuntimeError::Lifecycle(e.into()))
}

fn record_of(
    conn: &Connection,
    options: &StoreOptions,
    row: &ChildRow,
) -> RuntimeResult<ChildRecord> {
    let child = row.child_id;
    let active_run = match row.active_run_id {
        None => None,
        Some(run) => {
            let status: Option<String> = conn
                .query_row(
                    "SELECT status FROM runs WHERE run_id = ?1 AND child_id = ?2",
                    params![run.to_string(), child.to_string()],
                    |r| r.get(0),
                )
                .optional()?;
            let status = status
                .as_deref()
                .and_then(RunStatus::parse)
                .ok_or_else(|| {
                    RuntimeError::Internal(format!(
                        "stored state of {child} is inconsistent: its active run {run} has no valid row"
                    ))
                })?;
            Some(ActiveRunRecord { id: run, status })
        }
    };
    let queued = queued_records(conn, row)?;
    // The bound never makes an already stored queue unloadable; it refuses new entries.
    let queue_capacity = options
        .queued_followups
        .max(u32::try_from(queued.len()).unwrap_or(u32::MAX));
    let interrupted = row.state == ChildState::Interrupted;
    Ok(ChildRecord {
        id: child,
        state: row.state,
        active_run,
        queued,
        last_leaf: row.last_leaf.as_ref().map(core_leaf).transpose()?,
        interrupted_run: None,
        interruption_reason: interrupted.then(|| row.interrupt_reason.clone().unwrap_or_default()),
        queue_capacity,
    })
}

fn queued_records(conn: &Connection, row: &ChildRow) -> RuntimeResult<Vec<QueuedRunRecord>> {
    let mut stmt = conn.prepare_cached(
        "SELECT f.run_id, r.prompt FROM followups f JOIN runs r ON r.run_id = f.run_id \
         WHERE f.child_id = ?1 ORDER BY f.position",
    )?;
    let queued = stmt
        .query_map(params![row.child_id.to_string()], |r| {
            Ok(QueuedRunRecord {
                id: super::rows::id_col(r, 0)?,
                prompt: r.get(1)?,
            })
        })?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(queued)
}

/// A stored leaf as the core's validated [`CoreLeaf`].
pub(crate) fn core_leaf(stored: &LeafRef) -> RuntimeResult<CoreLeaf> {
    let digest = Sha256Digest::parse(&stored.digest).map_err(|e| {
        RuntimeError::Internal(format!(
            "the recorded leaf {} has a malformed digest: {e}",
            stored.leaf_id
        ))
    })?;
    CoreLeaf::new(&stored.leaf_id, digest).map_err(|e| RuntimeError::Internal(e.to_string()))
}

/// Whether `run` is a (finished) run of `child`, for telling "the run already ended"
/// from "that id was never this child's".
pub(crate) fn is_run_of(
    conn: &Connection,
    child: subzero_core::ChildId,
    run: RunId,
) -> RuntimeResult<bool> {
    Ok(conn
        .query_row(
            "SELECT 1 FROM runs WHERE run_id = ?1 AND child_id = ?2",
            params![run.to_string(), child.to_string()],
            |_| Ok(()),
        )
        .optional()?
        .is_some())
}
