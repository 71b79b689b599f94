//! The one place a decided checkout transition becomes SQL.
//!
//! Every write of a checkout's lifecycle columns (state, head commit, diff stats,
//! generation) happens here, and only from a [`CheckoutCommit`] — which only
//! [`CheckoutDecided::commit`](subzero_core::lifecycle::CheckoutDecided::commit) lends,
//! once per decision. [`update`] writes over the row the decision was made from
//! (`UPDATE … WHERE state = ? AND generation = ?`): no row changed means another broker
//! wrote it since, a typed [`RuntimeError::CheckoutChanged`], and nothing is written.
//! [`insert`] writes a prepared checkout for a child of the scope.

use rusqlite::{Connection, OptionalExtension, params};
use subzero_core::lifecycle::{CheckoutCommit, CheckoutRecord};
use subzero_core::{CheckoutState, ChildId};

use crate::error::{RuntimeError, RuntimeResult};
use crate::scope::WorkspaceScope;
use crate::store::rows::Timestamp;
use crate::store::sql::{RowExt, Sql, int};

/// The state and row version stored for `child`'s checkout, if it has one.
pub(super) fn stored_at(
    conn: &Connection,
    child: ChildId,
) -> RuntimeResult<Option<(CheckoutState, u64)>> {
    Ok(conn
        .query_row(
            "SELECT state, generation FROM checkouts WHERE child_id = ?1",
            params![Sql(child)],
            |r| Ok((r.col("state")?, r.col("generation")?)),
        )
        .optional()?)
}

/// The columns a change fills (all `NULL` without one).
fn change_columns(record: &CheckoutRecord) -> [Option<i64>; 3] {
    let stats = record.change.as_ref().map(|c| c.stats);
    [
        stats.map(|s| int(s.files_changed)),
        stats.map(|s| int(s.insertions)),
        stats.map(|s| int(s.deletions)),
    ]
}

/// Insert the checkout `decided` prepared, for a child of `scope`, measured at
/// `size_bytes`. A child of another scope is `not_found`; a child that already has a
/// checkout is [`RuntimeError::CheckoutChanged`].
pub(super) fn insert(
    conn: &Connection,
    scope: &WorkspaceScope,
    decided: CheckoutCommit,
    size_bytes: u64,
    at: &Timestamp,
) -> RuntimeResult<()> {
    let record = decided.record();
    let child = record.child;
    if decided.origin().is_some() || record.state != CheckoutState::Prepared {
        return Err(RuntimeError::Internal(format!(
            "the checkout of {child} is not newly prepared ({}); a transition is written over its row",
            record.state
        )));
    }
    if let Some(stored) = stored_at(conn, child)? {
        return Err(RuntimeError::CheckoutChanged {
            child,
            decided_from: None,
            stored: Some(stored),
        });
    }
    let [files, insertions, deletions] = change_columns(record);
    let site = &record.site;
    let inserted = conn.execute(
        "INSERT INTO checkouts (child_id, scope_key, path, base_commit, head_commit, workspace_head, \
         dirty, carried, state, files_changed, insertions, deletions, size_bytes, generation, \
         created_at, updated_at) \
         SELECT child_id, scope_key, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?15 \
         FROM children WHERE child_id = ?1 AND scope_key = ?2",
        params![
            Sql(child),
            scope.key(),
            site.path.to_string_lossy(),
            Sql(&site.base),
            record.change.as_ref().map(|c| Sql(&c.head)),
            Sql(&site.workspace_head),
            site.dirty,
            site.carried,
            Sql(record.state),
            files,
            insertions,
            deletions,
            int(size_bytes),
            int(record.version),
            Sql(at),
        ],
    )?;
    if inserted == 0 {
        return Err(RuntimeError::not_found("child", child));
    }
    Ok(())
}

/// Write `decided` over the row it was decided from. Exactly one row changes, or
/// nothing does: [`RuntimeError::CheckoutChanged`] when another write got there first,
/// `not_found` when the row is gone. A removed checkout holds no bytes.
pub(super) fn update(
    conn: &Connection,
    decided: CheckoutCommit,
    at: &Timestamp,
) -> RuntimeResult<()> {
    let record = decided.record();
    let child = record.child;
    let Some(origin) = decided.origin().filter(|o| o.child() == child) else {
        return Err(RuntimeError::Internal(format!(
            "the checkout of {child} was decided without its stored row; a new checkout is inserted"
        )));
    };
    let [files, insertions, deletions] = change_columns(record);
    let changed = conn.execute(
        "UPDATE checkouts SET state = ?4, head_commit = ?5, files_changed = ?6, insertions = ?7, \
         deletions = ?8, generation = ?9, updated_at = ?10, \
         diff_artifact = CASE WHEN head_commit IS ?5 THEN diff_artifact END, \
         size_bytes = CASE WHEN ?11 THEN 0 ELSE size_bytes END \
         WHERE child_id = ?1 AND state = ?2 AND generation = ?3",
        params![
            Sql(child),
            Sql(origin.state()),
            int(origin.version()),
            Sql(record.state),
            record.change.as_ref().map(|c| Sql(&c.head)),
            files,
            insertions,
            deletions,
            int(record.version),
            Sql(at),
            record.state == CheckoutState::Removed,
        ],
    )?;
    if changed == 1 {
        return Ok(());
    }
    match stored_at(conn, child)? {
        None => Err(RuntimeError::not_found("checkout", child)),
        stored => Err(RuntimeError::CheckoutChanged {
            child,
            decided_from: Some((origin.state(), origin.version())),
            stored,
        }),
    }
}
