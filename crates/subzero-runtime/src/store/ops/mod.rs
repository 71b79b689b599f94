//! The store's atomic operations. Each public method is one `BEGIN IMMEDIATE`
//! transaction on the writer thread. Lifecycle transitions are decided by the core
//! (`super::lifecycle` loads the row into an `AnyChild` and calls its operation); the
//! store then writes the decision as `UPDATE … WHERE state = ?` statements whose row
//! counts are checked, and any error rolls the whole operation back (rows, queue,
//! events, receipts). Ownership (who may write) stays the store's own check.

use rusqlite::{Connection, OptionalExtension, params};
use serde_json::{Value, json};
use subzero_core::lifecycle::{
    Delivery, Failure, LeafRecorded, RunReport, Settlement as CoreSettlement, StopConfirmed,
};
use subzero_core::{
    AnyChild, AnyRun, ArtifactId, ChildId, ChildState, ErrorCode, EventSeq, LifecycleError, RunId,
    RunStatus,
};

use super::events;
use super::lifecycle::{self, refused};
use super::rows::{
    ARTIFACT_COLUMNS, Admit, ArtifactRow, CHILD_COLUMNS, ChildRow, ModelRow, NewChild, Ownership,
    Phase, RUN_COLUMNS, ReceiptInput, RunRow, WorkerInfo, artifact_from_row, child_from_row,
    run_from_row,
};
use super::{Store, StoreOptions, now};
use crate::error::{RuntimeError, RuntimeResult};
use crate::scope::WorkspaceScope;

mod admit;
mod claim;
mod reads;
mod recover;
mod resume;
mod settle;
mod stop;
mod worker_writes;

pub use admit::{Admission, AdmitFollowup, AdmitSpawn, FollowupDelivery};
pub use claim::Claim;
pub use recover::{LockObservation, RecoveryOutcome};
pub use resume::{ResumeCommit, Resumed};
use settle::insert_artifact;
pub use settle::{NewArtifact, NextRun, PartialResult, Settled, Settlement};
pub use stop::StopBegun;

pub(super) fn i64_of(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

pub(super) fn expect_one(changed: usize, what: &str) -> RuntimeResult<()> {
    if changed == 1 {
        Ok(())
    } else {
        Err(RuntimeError::Internal(format!(
            "{what}: expected to change 1 row, changed {changed}"
        )))
    }
}

pub(crate) fn load_child(conn: &Connection, child: ChildId) -> RuntimeResult<ChildRow> {
    conn.query_row(
        &format!("SELECT {CHILD_COLUMNS} FROM children WHERE child_id = ?1"),
        params![child.to_string()],
        child_from_row,
    )
    .optional()?
    .ok_or_else(|| RuntimeError::not_found("child", child))
}

pub(crate) fn load_child_in(
    conn: &Connection,
    scope: &WorkspaceScope,
    child: ChildId,
) -> RuntimeResult<ChildRow> {
    conn.query_row(
        &format!("SELECT {CHILD_COLUMNS} FROM children WHERE child_id = ?1 AND scope_key = ?2"),
        params![child.to_string(), scope.key()],
        child_from_row,
    )
    .optional()?
    .ok_or_else(|| RuntimeError::not_found("child", child))
}

pub(super) fn queued_ids(conn: &Connection, child: ChildId) -> RuntimeResult<Vec<RunId>> {
    let mut stmt =
        conn.prepare_cached("SELECT run_id FROM followups WHERE child_id = ?1 ORDER BY position")?;
    let ids = stmt
        .query_map(params![child.to_string()], |r| super::rows::id_col(r, 0))?
        .collect::<Result<Vec<RunId>, _>>()?;
    Ok(ids)
}

/// Check a receipt inside the transaction: `Some(receipt)` = replay, conflict = error.
pub(super) fn existing_receipt(
    conn: &Connection,
    scope_key: &str,
    receipt: &ReceiptInput,
) -> RuntimeResult<Option<Value>> {
    let found: Option<(String, String)> = conn
        .query_row(
            "SELECT args_digest, receipt_json FROM receipts WHERE scope_key = ?1 AND tool = ?2 AND request_id = ?3",
            params![scope_key, receipt.tool, receipt.request_id],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .optional()?;
    match found {
        None => Ok(None),
        Some((digest, _)) if digest != receipt.args_digest => Err(RuntimeError::RequestConflict {
            tool: receipt.tool.clone(),
            request_id: receipt.request_id.clone(),
        }),
        Some((_, json)) => serde_json::from_str(&json)
            .map(Some)
            .map_err(|e| RuntimeError::Internal(format!("stored receipt is not JSON: {e}"))),
    }
}

pub(super) fn insert_receipt(
    conn: &Connection,
    scope_key: &str,
    receipt: &ReceiptInput,
    at: &str,
) -> RuntimeResult<()> {
    conn.execute(
        "INSERT INTO receipts (scope_key, tool, request_id, args_digest, receipt_json, created_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        params![
            scope_key,
            receipt.tool,
            receipt.request_id,
            receipt.args_digest,
            receipt.receipt.to_string(),
            at
        ],
    )?;
    Ok(())
}

pub(super) fn next_ordinal(conn: &Connection, child: ChildId) -> RuntimeResult<i64> {
    Ok(conn.query_row(
        "SELECT COALESCE(MAX(ordinal), 0) + 1 FROM runs WHERE child_id = ?1",
        params![child.to_string()],
        |r| r.get(0),
    )?)
}

pub(super) fn insert_run(
    conn: &Connection,
    child: ChildId,
    run: RunId,
    status: RunStatus,
    prompt: &str,
    request_id: Option<&str>,
    at: &str,
) -> RuntimeResult<()> {
    let ordinal = next_ordinal(conn, child)?;
    let started = (status == RunStatus::Running).then_some(at);
    conn.execute(
        "INSERT INTO runs (run_id, child_id, ordinal, status, prompt, request_id, created_at, started_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
        params![
            run.to_string(),
            child.to_string(),
            ordinal,
            status.as_str(),
            prompt,
            request_id,
            at,
            started
        ],
    )?;
    Ok(())
}

/// Mark the queued runs the core took out of the queue (withdrawn by a stop or a
/// failure, abandoned with a lost worker) terminal with their new `status` and
/// `reason`, and remove them from the queue. Each must still be `queued`.
pub(super) fn withdraw(
    conn: &Connection,
    child: ChildId,
    runs: &[(RunId, RunStatus)],
    reason: &str,
    at: &str,
) -> RuntimeResult<Vec<RunId>> {
    for (run, status) in runs {
        let changed = conn.execute(
            "UPDATE runs SET status = ?3, ended_at = ?4, reason = ?5 WHERE run_id = ?1 AND child_id = ?2 AND status = 'queued'",
            params![run.to_string(), child.to_string(), status.as_str(), at, reason],
        )?;
        expect_one(changed, "withdraw queued run")?;
        let changed = conn.execute(
            "DELETE FROM followups WHERE run_id = ?1 AND child_id = ?2",
            params![run.to_string(), child.to_string()],
        )?;
        expect_one(changed, "dequeue withdrawn run")?;
    }
    Ok(runs.iter().map(|(run, _)| *run).collect())
}

pub(super) fn terminal(runs: &[AnyRun]) -> Vec<(RunId, RunStatus)> {
    runs.iter().map(|r| (r.id(), r.status())).collect()
}

pub(super) fn ownership_error(row: &ChildRow, owner_token: &str) -> RuntimeError {
    match row.ownership {
        Ownership::RecoveryRequired => RuntimeError::RecoveryRequired(format!(
            "child {} is still held by processes of a previous owner; wait for them to exit (subzero doctor names them), then retry",
            row.child_id
        )),
        Ownership::Owned if row.owner_token.as_deref() != Some(owner_token) => {
            RuntimeError::Busy(format!(
                "child {} is owned by another broker; wait for its run to settle, then retry",
                row.child_id
            ))
        }
        _ => RuntimeError::Busy(format!(
            "child {} is not claimed by this broker; claim it first",
            row.child_id
        )),
    }
}

pub(super) fn require_owner(
    conn: &Connection,
    child: ChildId,
    owner_token: &str,
) -> RuntimeResult<ChildRow> {
    let row = load_child(conn, child)?;
    if row.ownership != Ownership::Owned || row.owner_token.as_deref() != Some(owner_token) {
        return Err(ownership_error(&row, owner_token));
    }
    Ok(row)
}
