//! The store's bridge to the core lifecycle.
//!
//! Every state transition is decided by `subzero_core`: a transaction reads the child's
//! row, its active run and its follow-up queue into a [`StoredChild`], goes up through
//! the one checked [`Loaded::load`] with the store's key, calls the core request, and
//! hands the [`Decided`](subzero_core::lifecycle::Decided) value it returns to
//! `super::write`. A refusal is the core's own typed error (its code and message reach
//! the caller unchanged), and nothing was written.

use rusqlite::{Connection, OptionalExtension, params};
use subzero_core::lifecycle::{
    ActiveRunRecord, ChildRecord, Custody, CustodyRecord, LeafRef as CoreLeaf, Loaded,
    QueuedRunRecord, StoredChild,
};
use subzero_core::{AnyChild, ChildId, ChildState, RunId, RunStatus, Sha256Digest};

use super::rows::{ChildRow, LeafRef, QueuedRow};
use super::sql::{RowExt, Sql};
use super::{StoreOptions, storage_key};
use crate::error::{RuntimeError, RuntimeResult};

/// Load `row` (with its active run and queue) into the core. A row that describes no
/// legal lifecycle state is `internal` and is neither loaded nor changed.
pub(crate) fn load(
    conn: &Connection,
    options: &StoreOptions,
    row: &ChildRow,
) -> RuntimeResult<Loaded> {
    let stored = StoredChild {
        record: record_of(conn, options, row)?,
        custody: custody_record(row),
        phase: row.phase,
        version: row.generation,
    };
    Loaded::load(stored, storage_key()?).map_err(|e| RuntimeError::Lifecycle(e.into()))
}

/// The lifecycle of `row` alone, for requests the core decides without writing.
pub(crate) fn load_child(
    conn: &Connection,
    options: &StoreOptions,
    row: &ChildRow,
) -> RuntimeResult<AnyChild> {
    let record = record_of(conn, options, row)?;
    AnyChild::load(record, storage_key()?).map_err(|e| RuntimeError::Lifecycle(e.into()))
}

/// Who holds `row`'s child, as the core's [`Custody`] (for the owner checks of writes
/// that change no lifecycle column: events, worker identity, artifacts).
pub(crate) fn custody(row: &ChildRow) -> RuntimeResult<Custody> {
    Ok(Custody::load(
        row.child_id,
        row.state,
        custody_record(row),
        storage_key()?,
    ))
}

fn custody_record(row: &ChildRow) -> CustodyRecord {
    CustodyRecord {
        ownership: row.ownership,
        owner: row.owner_token.clone(),
        generation: row.owner_generation,
    }
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
            let status = conn
                .query_row(
                    "SELECT status FROM runs WHERE run_id = ?1 AND child_id = ?2",
                    params![Sql(run), Sql(child)],
                    |r| r.col::<RunStatus>("status"),
                )
                .optional()?
                .ok_or_else(|| {
                    RuntimeError::Internal(format!(
                        "stored state of {child} is inconsistent: its active run {run} has no row"
                    ))
                })?;
            Some(ActiveRunRecord { id: run, status })
        }
    };
    let queued = queued_records(conn, child)?;
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

/// The follow-up queue of `child`, oldest first, with each run's prompt.
pub(crate) fn queued_rows(conn: &Connection, child: ChildId) -> RuntimeResult<Vec<QueuedRow>> {
    let mut stmt = conn.prepare_cached(
        "SELECT f.run_id AS run_id, r.prompt AS prompt FROM followups f \
         JOIN runs r ON r.run_id = f.run_id WHERE f.child_id = ?1 ORDER BY f.position",
    )?;
    let queued = stmt
        .query_map(params![Sql(child)], QueuedRow::from_row)?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(queued)
}

fn queued_records(conn: &Connection, child: ChildId) -> RuntimeResult<Vec<QueuedRunRecord>> {
    Ok(queued_rows(conn, child)?
        .into_iter()
        .map(|q| QueuedRunRecord {
            id: q.run_id,
            prompt: q.prompt,
        })
        .collect())
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

/// Whether `run` is a run of `child`, for telling "the run already ended" from "that id
/// was never this child's".
pub(crate) fn is_run_of(conn: &Connection, child: ChildId, run: RunId) -> RuntimeResult<bool> {
    Ok(conn
        .query_row(
            "SELECT 1 AS found FROM runs WHERE run_id = ?1 AND child_id = ?2",
            params![Sql(run), Sql(child)],
            |_| Ok(()),
        )
        .optional()?
        .is_some())
}
