//! The store's atomic operations. Each public method is one `BEGIN IMMEDIATE`
//! transaction on the writer thread. Every transition is decided by the core:
//! `super::lifecycle` loads the row (with its custody) into a `Loaded`, the core's request
//! on it returns a `Decided` value, and `super::write` — the only code that writes
//! lifecycle columns, and only from such a value — persists it. Any error rolls the
//! whole operation back (rows, queue, events, receipts).

use rusqlite::{Connection, OptionalExtension, params};
use serde_json::Value;
use subzero_core::lifecycle::Activity;
use subzero_core::{AnyChild, ArtifactId, ChildId, ChildState, EventSeq, RunId, RunStatus};

use super::events;
use super::lifecycle;
use super::rows::{
    Admit, ArtifactRow, ChildRow, ModelRow, NewChild, Ownership, ReceiptInput, ReceiptRow, RunRow,
    Timestamp, WorkerInfo,
};
use super::sql::{RowExt, Sql, int};
use super::write::{self, Details, RunEnd};
use super::{Store, StoreOptions, now};
use crate::error::{RuntimeError, RuntimeResult};
use crate::scope::WorkspaceScope;

pub(in crate::store) mod admit;
mod claim;
mod reads;
mod recover;
mod resume;
pub(super) mod settle;
mod stop;
mod tasks;
mod worker_writes;

pub use admit::{Admission, AdmitFollowup, AdmitSpawn, FollowupDelivery};
pub use claim::Claim;
pub use reads::{ChildFilter, ChildView};
pub use recover::RecoveryOutcome;
pub use resume::{ResumeCommit, Resumed};
use settle::insert_artifact;
pub use settle::{NewArtifact, NextRun, PartialResult, Settled, Settlement};
pub use stop::StopBegun;
pub use subzero_core::lifecycle::LockObservation;
pub use tasks::{TASK_TOOLS, TaskRow};

pub(crate) fn load_child(conn: &Connection, child: ChildId) -> RuntimeResult<ChildRow> {
    conn.query_row(
        &format!(
            "SELECT {} FROM children WHERE child_id = ?1",
            ChildRow::columns()
        ),
        params![Sql(child)],
        ChildRow::from_row,
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
        &format!(
            "SELECT {} FROM children WHERE child_id = ?1 AND scope_key = ?2",
            ChildRow::columns()
        ),
        params![Sql(child), scope.key()],
        ChildRow::from_row,
    )
    .optional()?
    .ok_or_else(|| RuntimeError::not_found("child", child))
}

pub(super) fn queued_ids(conn: &Connection, child: ChildId) -> RuntimeResult<Vec<RunId>> {
    let mut stmt =
        conn.prepare_cached("SELECT run_id FROM followups WHERE child_id = ?1 ORDER BY position")?;
    let ids = stmt
        .query_map(params![Sql(child)], |r| r.col::<RunId>("run_id"))?
        .collect::<Result<Vec<RunId>, _>>()?;
    Ok(ids)
}

/// Check a receipt inside the transaction: `Some(receipt)` = replay, conflict = error.
pub(super) fn existing_receipt(
    conn: &Connection,
    scope_key: &str,
    receipt: &ReceiptInput,
) -> RuntimeResult<Option<Value>> {
    let found = conn
        .query_row(
            &format!(
                "SELECT {} FROM receipts WHERE scope_key = ?1 AND tool = ?2 AND request_id = ?3",
                ReceiptRow::columns()
            ),
            params![scope_key, receipt.tool, receipt.request_id],
            ReceiptRow::from_row,
        )
        .optional()?;
    match found {
        None => Ok(None),
        Some(stored) if stored.args_digest != receipt.args_digest => {
            Err(RuntimeError::RequestConflict {
                tool: receipt.tool.clone(),
                request_id: receipt.request_id.clone(),
            })
        }
        Some(stored) => Ok(Some(stored.receipt)),
    }
}

pub(super) fn insert_receipt(
    conn: &Connection,
    scope_key: &str,
    receipt: &ReceiptInput,
    at: &Timestamp,
) -> RuntimeResult<()> {
    conn.execute(
        "INSERT INTO receipts (scope_key, tool, request_id, args_digest, receipt_json, created_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        params![
            scope_key,
            receipt.tool,
            receipt.request_id,
            receipt.args_digest,
            receipt.receipt.to_string(),
            Sql(at)
        ],
    )?;
    Ok(())
}

/// The child row of `child`, if `owner_token` holds it (the core's custody check).
pub(super) fn require_owner(
    conn: &Connection,
    child: ChildId,
    owner_token: &str,
) -> RuntimeResult<ChildRow> {
    let row = load_child(conn, child)?;
    lifecycle::custody(&row)?.check_owner(owner_token)?;
    Ok(row)
}
