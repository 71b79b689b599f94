//! The store's atomic operations. Each public method is one `BEGIN IMMEDIATE`
//! transaction on the writer thread. Every transition is decided by the core:
//! `super::lifecycle` loads the row into an `AnyChild` and calls its operation, and
//! the row's `Custody` decides claims, releases, owner checks and recoveries; then
//! `super::write` — the only code that writes lifecycle columns — persists what the
//! core returned. Any error rolls the whole operation back (rows, queue, events,
//! receipts).

use rusqlite::{Connection, OptionalExtension, params};
use serde_json::{Value, json};
use subzero_core::lifecycle::{
    Activity, Delivery, Failure, LeafRecorded, Recovery, RunReport, Settlement as CoreSettlement,
    StopConfirmed,
};
use subzero_core::{
    AnyChild, AnyRun, ArtifactId, BudgetReached, ChildId, ChildState, ErrorCode, EventSeq,
    LifecycleError, RunId, RunStatus,
};

use super::events;
use super::lifecycle;
use super::rows::{
    ARTIFACT_COLUMNS, Admit, ArtifactRow, CHILD_COLUMNS, ChildRow, ModelRow, NewChild, Ownership,
    RUN_COLUMNS, ReceiptInput, RunRow, WorkerInfo, artifact_from_row, child_from_row, run_from_row,
};
use super::write::{self, RunEnd, RunUsage};
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
pub use recover::RecoveryOutcome;
pub use resume::{ResumeCommit, Resumed};
use settle::insert_artifact;
pub use settle::{ErrorDetails, NewArtifact, NextRun, PartialResult, Settled, Settlement};
pub use stop::StopBegun;
pub use subzero_core::lifecycle::LockObservation;

pub(super) fn i64_of(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
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

pub(super) fn terminal(runs: &[AnyRun]) -> Vec<(RunId, RunStatus)> {
    runs.iter().map(|r| (r.id(), r.status())).collect()
}

/// The child row of `child`, if `owner_token` holds it (the core's custody check).
pub(super) fn require_owner(
    conn: &Connection,
    child: ChildId,
    owner_token: &str,
) -> RuntimeResult<ChildRow> {
    let row = load_child(conn, child)?;
    row.custody().check_owner(owner_token)?;
    Ok(row)
}
