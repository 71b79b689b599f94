//! The one place a decided transition becomes SQL.
//!
//! Every write of a child's lifecycle columns (state, phase, ownership, owner token,
//! claim generation, active run, interrupt reason, last leaf) and of a run's status
//! happens here, and only from a [`Decided`] value — which only the core makes. [`apply`]
//! writes the child as the core left it over the row it was decided from (`UPDATE …
//! WHERE state = ? AND generation = ?`, exactly one row or the whole transaction fails),
//! moves each run the decision moved from the status the core saw to the one it decided,
//! and inserts the run it admitted; [`insert`] writes a spawned child. There is no
//! function here that takes a status, a state or a custody by itself. Their values are
//! bound from the typed enums; no SQL text in the runtime spells one
//! (`tests/testsuite/sql_literals.rs`).

use rusqlite::{Connection, params};
use subzero_core::lifecycle::{Admitted, Commit, RunMove, Spawned};
use subzero_core::{AnyChild, ArtifactId, BudgetReached, ChildId, ErrorCode, RunStatus};

use super::rows::{ErrorDetails, NewChild, RunUsage, Timestamp};
use super::sql::{Sql, int};
use crate::error::{RuntimeError, RuntimeResult};

fn expect_one(changed: usize, what: &str) -> RuntimeResult<()> {
    if changed == 1 {
        Ok(())
    } else {
        Err(RuntimeError::Internal(format!(
            "{what}: expected to change 1 row, changed {changed}; nothing was written"
        )))
    }
}

/// What a run's row records when it ends, besides its status.
#[derive(Default)]
pub(super) struct RunEnd<'a> {
    pub reason: Option<&'a str>,
    pub preview: Option<&'a str>,
    pub preview_truncated: bool,
    pub artifact_id: Option<ArtifactId>,
    pub error_code: Option<ErrorCode>,
    pub error_message: Option<&'a str>,
    /// What the run used, as its worker reported it (kept as stored when `None`).
    pub usage: Option<RunUsage>,
    /// The budget a `budget_exhausted` run reached.
    pub budget: Option<BudgetReached>,
    /// A failed run's error details.
    pub error_details: Option<&'a ErrorDetails>,
}

/// What the store records with a decision, besides what the core decided: how the run
/// that ended ended, why the queued runs it took out were taken out, and the admitted
/// run's request id.
#[derive(Default)]
pub(super) struct Details<'a> {
    /// The run that ended (the active run's move to a terminal status).
    pub ended: RunEnd<'a>,
    /// Why queued runs moved to a terminal status.
    pub withdrawn: Option<&'a str>,
    /// The caller's requestId of the admitted run.
    pub request_id: Option<&'a str>,
}

/// The lifecycle columns of a child as the core left it.
struct Columns {
    active_run: Option<String>,
    interrupt_reason: Option<String>,
    leaf_id: Option<String>,
    leaf_digest: Option<String>,
}

fn columns(after: &AnyChild) -> Columns {
    let record = after.record();
    Columns {
        active_run: record.active_run.map(|r| r.id.to_string()),
        interrupt_reason: record.interruption_reason,
        leaf_id: record.last_leaf.as_ref().map(|l| l.leaf_id().to_owned()),
        leaf_digest: record.last_leaf.as_ref().map(|l| l.digest().to_string()),
    }
}

/// Write `decided` over the row it was decided from: the child, each run move, the
/// admitted run. One child row changes, or nothing does and the transaction fails. A
/// decision that changes nothing writes nothing. Only [`Decided::commit`]
/// (`subzero_core::lifecycle::Decided`) lends a [`Commit`], once per decision.
pub(super) fn apply<T>(
    conn: &Connection,
    decided: Commit<'_, T>,
    details: &Details<'_>,
    at: &Timestamp,
) -> RuntimeResult<()> {
    if !decided.changes() {
        return Ok(());
    }
    let Some(origin) = decided.origin() else {
        return Err(RuntimeError::Internal(format!(
            "child {} was decided without a stored row to write over; a new child is inserted",
            decided.child().id()
        )));
    };
    let child = origin.child();
    let (c, custody) = (columns(decided.child()), decided.custody());
    let changed = conn.execute(
        "UPDATE children SET state = ?4, phase = ?5, ownership = ?6, owner_token = ?7, \
         owner_generation = ?8, active_run_id = ?9, interrupt_reason = ?10, last_leaf_id = ?11, \
         last_leaf_digest = ?12, updated_at = ?13, generation = generation + 1 \
         WHERE child_id = ?1 AND state = ?2 AND generation = ?3",
        params![
            Sql(child),
            Sql(origin.state()),
            int(origin.version()),
            Sql(decided.child().state()),
            Sql(decided.phase()),
            Sql(custody.ownership()),
            custody.owner(),
            int(custody.generation()),
            c.active_run,
            c.interrupt_reason,
            c.leaf_id,
            c.leaf_digest,
            Sql(at)
        ],
    )?;
    expect_one(changed, &format!("write child {child}"))?;
    for moved in decided.moves() {
        move_run(conn, child, moved, details, at)?;
    }
    if let Some(admitted) = decided.admitted() {
        insert_run(conn, child, admitted, details.request_id, at)?;
    }
    Ok(())
}

/// Insert the child `decided` spawned (`new` says what it is), with its custody, phase
/// and first run.
pub(super) fn insert(
    conn: &Connection,
    new: &NewChild,
    decided: Commit<'_, Spawned>,
    request_id: Option<&str>,
    at: &Timestamp,
) -> RuntimeResult<()> {
    let spawned = decided.child();
    if decided.origin().is_some() || spawned.id() != new.child_id {
        return Err(RuntimeError::Internal(format!(
            "child {} is not the new child {} the spawn decided; nothing was written",
            new.child_id,
            spawned.id()
        )));
    }
    let (c, custody) = (columns(spawned), decided.custody());
    let snapshot = serde_json::to_string(&new.snapshot)
        .map_err(|e| RuntimeError::Internal(format!("snapshot: {e}")))?;
    conn.execute(
        "INSERT INTO children (child_id, scope_key, scope_uid, workspace_root, scope_dev, scope_ino, \
         template_id, snapshot_json, write_capable, model_url, model_name, model_api, credential_ref, \
         state, phase, ownership, owner_token, owner_generation, active_run_id, created_at, updated_at, \
         model_context_window, label) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?20, ?21, ?22)",
        params![
            Sql(new.child_id),
            new.scope.key(),
            new.scope.uid(),
            new.scope.root().to_string_lossy(),
            new.scope.dev() as i64,
            new.scope.ino() as i64,
            new.template_id,
            snapshot,
            new.write_capable,
            new.model.url,
            new.model.model,
            Sql(new.model.api),
            new.model.credential_ref,
            Sql(spawned.state()),
            Sql(decided.phase()),
            Sql(custody.ownership()),
            custody.owner(),
            int(custody.generation()),
            c.active_run,
            Sql(at),
            new.model.context_window,
            new.label,
        ],
    )?;
    for moved in decided.moves() {
        move_run(conn, new.child_id, moved, &Details::default(), at)?;
    }
    if let Some(admitted) = decided.admitted() {
        insert_run(conn, new.child_id, admitted, request_id, at)?;
    }
    Ok(())
}

/// Move one run as decided: a run that starts gets `started_at` and leaves the queue,
/// one that ends gets `ended_at` and what `details` records for it.
fn move_run(
    conn: &Connection,
    child: ChildId,
    moved: &RunMove,
    details: &Details<'_>,
    at: &Timestamp,
) -> RuntimeResult<()> {
    let (from, to) = (moved.from(), moved.to());
    let withdrawn;
    let end = match (from, to.is_terminal()) {
        (RunStatus::Queued, true) => {
            withdrawn = RunEnd {
                reason: details.withdrawn,
                ..RunEnd::default()
            };
            &withdrawn
        }
        (_, true) => &details.ended,
        (_, false) => &RunEnd::default(),
    };
    let started = (to == RunStatus::Running).then_some(Sql(at));
    let ended = to.is_terminal().then_some(Sql(at));
    let error_details = end
        .error_details
        .filter(|d| !d.is_empty())
        .map(serde_json::to_string)
        .transpose()
        .map_err(|e| RuntimeError::Internal(format!("cannot encode the error's details: {e}")))?;
    let budget = end
        .budget
        .as_ref()
        .map(serde_json::to_string)
        .transpose()
        .map_err(|e| RuntimeError::Internal(format!("cannot encode the budget reached: {e}")))?;
    let usage = end.usage;
    let changed = conn.execute(
        "UPDATE runs SET status = ?4, started_at = COALESCE(?5, started_at), ended_at = ?6, \
         reason = ?7, preview = ?8, preview_truncated = ?9, artifact_id = ?10, error_code = ?11, \
         error_message = ?12, input_tokens = COALESCE(?13, input_tokens), \
         output_tokens = COALESCE(?14, output_tokens), turns = COALESCE(?15, turns), budget = ?16, \
         usage_source = COALESCE(?17, usage_source), \
         cut_max_output_tokens = CASE WHEN ?17 IS NULL THEN cut_max_output_tokens ELSE ?18 END, \
         error_details = ?19, context_tokens = COALESCE(?20, context_tokens) \
         WHERE run_id = ?1 AND child_id = ?2 AND status = ?3",
        params![
            Sql(moved.run()),
            Sql(child),
            Sql(from),
            Sql(to),
            started,
            ended,
            end.reason,
            end.preview,
            end.preview_truncated,
            end.artifact_id.map(Sql),
            end.error_code.map(Sql),
            end.error_message,
            usage.map(|u| int(u.input_tokens)),
            usage.map(|u| int(u.output_tokens)),
            usage.map(|u| int(u.turns)),
            budget,
            usage.map(|u| Sql(u.source)),
            usage.and_then(|u| u.cut_max_output_tokens).map(int),
            error_details,
            usage.and_then(|u| u.context_tokens).map(int)
        ],
    )?;
    expect_one(
        changed,
        &format!("move run {} from {from} to {to}", moved.run()),
    )?;
    if from == RunStatus::Queued {
        let changed = conn.execute(
            "DELETE FROM followups WHERE run_id = ?1 AND child_id = ?2",
            params![Sql(moved.run()), Sql(child)],
        )?;
        expect_one(changed, &format!("dequeue run {}", moved.run()))?;
    }
    Ok(())
}

/// Insert the run a decision admitted (`running` or `queued`); a queued run also takes
/// the last place in the child's follow-up queue.
fn insert_run(
    conn: &Connection,
    child: ChildId,
    admitted: &Admitted,
    request_id: Option<&str>,
    at: &Timestamp,
) -> RuntimeResult<()> {
    let ordinal: i64 = conn.query_row(
        "SELECT COALESCE(MAX(ordinal), 0) + 1 AS next FROM runs WHERE child_id = ?1",
        params![Sql(child)],
        |r| r.get("next"),
    )?;
    let status = admitted.status();
    let started = (status == RunStatus::Running).then_some(Sql(at));
    conn.execute(
        "INSERT INTO runs (run_id, child_id, ordinal, status, prompt, request_id, created_at, started_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
        params![
            Sql(admitted.run()),
            Sql(child),
            ordinal,
            Sql(status),
            admitted.prompt(),
            request_id,
            Sql(at),
            started
        ],
    )?;
    if status == RunStatus::Queued {
        let position: i64 = conn.query_row(
            "SELECT COALESCE(MAX(position), 0) + 1 AS next FROM followups WHERE child_id = ?1",
            params![Sql(child)],
            |r| r.get("next"),
        )?;
        conn.execute(
            "INSERT INTO followups (child_id, position, run_id) VALUES (?1, ?2, ?3)",
            params![Sql(child), position, Sql(admitted.run())],
        )?;
    }
    Ok(())
}
