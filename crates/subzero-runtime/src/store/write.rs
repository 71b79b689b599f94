//! The one place a decided transition becomes SQL.
//!
//! Every write of a child's lifecycle columns (state, phase, ownership, owner token,
//! claim generation, active run, interrupt reason, last leaf) and of a run's status
//! happens here, from what the core returned: [`child`] writes the child as the core
//! left it (its [`AnyChild`], its [`Custody`], its [`Phase`]) over the row it was
//! decided from — `UPDATE … WHERE state = ? AND generation = ?`, exactly one row or the
//! whole transaction fails — and [`run`] moves one run from the status the core saw to
//! the one it decided. State, status, phase and ownership values are bound from the
//! typed enums; no SQL text in the runtime spells one (`tests/sql_literals.rs`).

use rusqlite::{Connection, params};
use subzero_core::lifecycle::Custody;
use subzero_core::{AnyChild, ChildId, Phase, RunId, RunStatus};

use super::rows::{ChildRow, NewChild};
use crate::error::{RuntimeError, RuntimeResult};

fn i64_of(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

fn expect_one(changed: usize, what: &str) -> RuntimeResult<()> {
    if changed == 1 {
        Ok(())
    } else {
        Err(RuntimeError::Internal(format!(
            "{what}: expected to change 1 row, changed {changed}; nothing was written"
        )))
    }
}

/// The lifecycle columns of a child as the core left it.
struct Columns {
    state: &'static str,
    phase: &'static str,
    ownership: &'static str,
    owner: Option<String>,
    generation: i64,
    active_run: Option<String>,
    interrupt_reason: Option<String>,
    leaf_id: Option<String>,
    leaf_digest: Option<String>,
}

fn columns(after: &AnyChild, custody: &Custody, phase: Phase) -> RuntimeResult<Columns> {
    // The state is the child's (`after`); the custody contributes who holds it.
    if custody.child != after.id() {
        return Err(RuntimeError::Internal(format!(
            "the custody of child {} was paired with child {}; nothing was written",
            custody.child,
            after.id()
        )));
    }
    let record = after.record();
    Ok(Columns {
        state: after.state().as_str(),
        phase: phase.as_str(),
        ownership: custody.ownership.as_str(),
        owner: custody.owner.clone(),
        generation: i64_of(custody.generation),
        active_run: record.active_run.map(|r| r.id.to_string()),
        interrupt_reason: record.interruption_reason,
        leaf_id: record.last_leaf.as_ref().map(|l| l.leaf_id().to_owned()),
        leaf_digest: record.last_leaf.as_ref().map(|l| l.digest().to_string()),
    })
}

/// Write the child `after` (with its custody and phase) over `before`, the row it was
/// decided from: one row changes, or nothing does and the transaction fails.
pub(super) fn child(
    conn: &Connection,
    before: &ChildRow,
    after: &AnyChild,
    custody: &Custody,
    phase: Phase,
    at: &str,
) -> RuntimeResult<()> {
    let c = columns(after, custody, phase)?;
    let changed = conn.execute(
        "UPDATE children SET state = ?4, phase = ?5, ownership = ?6, owner_token = ?7, \
         owner_generation = ?8, active_run_id = ?9, interrupt_reason = ?10, last_leaf_id = ?11, \
         last_leaf_digest = ?12, updated_at = ?13, generation = generation + 1 \
         WHERE child_id = ?1 AND state = ?2 AND generation = ?3",
        params![
            before.child_id.to_string(),
            before.state.as_str(),
            i64_of(before.generation),
            c.state,
            c.phase,
            c.ownership,
            c.owner,
            c.generation,
            c.active_run,
            c.interrupt_reason,
            c.leaf_id,
            c.leaf_digest,
            at
        ],
    )?;
    expect_one(changed, &format!("write child {}", before.child_id))
}

/// [`child`] with the phase the core gives a child that reports no work of its own:
/// `starting`, `stopping`, `idle` or `recovery_required` (`Custody::phase_of`).
pub(super) fn child_at_rest(
    conn: &Connection,
    before: &ChildRow,
    after: &AnyChild,
    custody: &Custody,
    at: &str,
) -> RuntimeResult<()> {
    child(conn, before, after, custody, custody.phase_of(after), at)
}

/// Insert a new child as the core spawned it, with its custody and phase.
pub(super) fn new_child(
    conn: &Connection,
    new: &NewChild,
    spawned: &AnyChild,
    custody: &Custody,
    phase: Phase,
    at: &str,
) -> RuntimeResult<()> {
    let c = columns(spawned, custody, phase)?;
    let snapshot = serde_json::to_string(&new.snapshot)
        .map_err(|e| RuntimeError::Internal(format!("snapshot: {e}")))?;
    conn.execute(
        "INSERT INTO children (child_id, scope_key, scope_uid, workspace_root, scope_dev, scope_ino, \
         template_id, snapshot_json, write_capable, model_url, model_name, model_api, credential_ref, \
         state, phase, ownership, owner_token, owner_generation, active_run_id, created_at, updated_at) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?20)",
        params![
            new.child_id.to_string(),
            new.scope.key(),
            i64::from(new.scope.uid()),
            new.scope.root().to_string_lossy(),
            new.scope.dev() as i64,
            new.scope.ino() as i64,
            new.template_id,
            snapshot,
            new.write_capable,
            new.model.url,
            new.model.model,
            new.model.api,
            new.model.credential_ref,
            c.state,
            c.phase,
            c.ownership,
            c.owner,
            c.generation,
            c.active_run,
            at,
        ],
    )?;
    Ok(())
}

/// What a run's row records when it ends, besides its status.
#[derive(Default)]
pub(super) struct RunEnd<'a> {
    pub reason: Option<&'a str>,
    pub preview: Option<&'a str>,
    pub preview_truncated: bool,
    pub artifact_id: Option<String>,
    pub error_code: Option<&'a str>,
    pub error_message: Option<&'a str>,
    /// What the run used, as its worker reported it (kept as stored when `None`).
    pub usage: Option<RunUsage>,
    /// The budget a `budget_exhausted` run reached, as JSON.
    pub budget: Option<String>,
    /// A failed run's error details, as a JSON object.
    pub error_details: Option<String>,
}

/// Turns and tokens one run used, as its worker reported them: whether the tokens were
/// reported by the endpoint or estimated, and the output-token cap that cut its final
/// answer (a completed run's `cut`).
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct RunUsage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub turns: u64,
    pub source: UsageSource,
    /// `maxOutputTokens` of the run when it cut the final answer.
    pub cut_max_output_tokens: Option<u64>,
}

/// Where a run's token counts come from (`runs.usage_source`).
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub enum UsageSource {
    /// Every model request reported its usage (or none was made).
    #[default]
    Reported,
    /// At least one request reported none; its tokens were estimated from bytes.
    Estimated,
}

impl UsageSource {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Reported => "reported",
            Self::Estimated => "estimated",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "reported" => Some(Self::Reported),
            "estimated" => Some(Self::Estimated),
            _ => None,
        }
    }
}

impl rusqlite::ToSql for UsageSource {
    fn to_sql(&self) -> rusqlite::Result<rusqlite::types::ToSqlOutput<'_>> {
        Ok(self.as_str().into())
    }
}

impl rusqlite::types::FromSql for UsageSource {
    fn column_result(value: rusqlite::types::ValueRef<'_>) -> rusqlite::types::FromSqlResult<Self> {
        let text = value.as_str()?;
        Self::parse(text).ok_or_else(|| {
            rusqlite::types::FromSqlError::Other(format!("unknown usage source {text:?}").into())
        })
    }
}

/// Move `run` of `child` from `from` (what the core loaded) to `to` (what it decided):
/// a run that starts gets `started_at`, one that ends gets `ended_at` and `end`.
pub(super) fn run(
    conn: &Connection,
    child: ChildId,
    run: RunId,
    from: RunStatus,
    to: RunStatus,
    end: &RunEnd<'_>,
    at: &str,
) -> RuntimeResult<()> {
    let started = (to == RunStatus::Running).then_some(at);
    let ended = to.is_terminal().then_some(at);
    let changed = conn.execute(
        "UPDATE runs SET status = ?4, started_at = COALESCE(?5, started_at), ended_at = ?6, \
         reason = ?7, preview = ?8, preview_truncated = ?9, artifact_id = ?10, error_code = ?11, \
         error_message = ?12, input_tokens = COALESCE(?13, input_tokens), \
         output_tokens = COALESCE(?14, output_tokens), turns = COALESCE(?15, turns), budget = ?16, \
         usage_source = COALESCE(?17, usage_source), \
         cut_max_output_tokens = CASE WHEN ?17 IS NULL THEN cut_max_output_tokens ELSE ?18 END, \
         error_details = ?19 WHERE run_id = ?1 AND child_id = ?2 AND status = ?3",
        params![
            run.to_string(),
            child.to_string(),
            from.as_str(),
            to.as_str(),
            started,
            ended,
            end.reason,
            end.preview,
            end.preview_truncated,
            end.artifact_id,
            end.error_code,
            end.error_message,
            end.usage.map(|u| i64_of(u.input_tokens)),
            end.usage.map(|u| i64_of(u.output_tokens)),
            end.usage.map(|u| i64_of(u.turns)),
            end.budget,
            end.usage.map(|u| u.source),
            end.usage.and_then(|u| u.cut_max_output_tokens).map(i64_of),
            end.error_details
        ],
    )?;
    expect_one(changed, &format!("move run {run} from {from} to {to}"))
}

/// Insert a run the core admitted with `status` (`running` or `queued`); a queued run
/// also takes the last place in the child's follow-up queue.
pub(super) fn new_run(
    conn: &Connection,
    child: ChildId,
    run: RunId,
    status: RunStatus,
    prompt: &str,
    request_id: Option<&str>,
    at: &str,
) -> RuntimeResult<()> {
    let ordinal: i64 = conn.query_row(
        "SELECT COALESCE(MAX(ordinal), 0) + 1 FROM runs WHERE child_id = ?1",
        params![child.to_string()],
        |r| r.get(0),
    )?;
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
    if status == RunStatus::Queued {
        let position: i64 = conn.query_row(
            "SELECT COALESCE(MAX(position), 0) + 1 FROM followups WHERE child_id = ?1",
            params![child.to_string()],
            |r| r.get(0),
        )?;
        conn.execute(
            "INSERT INTO followups (child_id, position, run_id) VALUES (?1, ?2, ?3)",
            params![child.to_string(), position, run.to_string()],
        )?;
    }
    Ok(())
}

/// Take `run` out of the follow-up queue (it started, or the core withdrew it).
pub(super) fn dequeue(conn: &Connection, child: ChildId, run: RunId) -> RuntimeResult<()> {
    let changed = conn.execute(
        "DELETE FROM followups WHERE run_id = ?1 AND child_id = ?2",
        params![run.to_string(), child.to_string()],
    )?;
    expect_one(changed, &format!("dequeue run {run}"))
}

/// Queued runs the core took out of the queue (withdrawn by a stop or a failure,
/// abandoned with a lost worker): each moves from `queued` to its decided status with
/// `reason` and leaves the queue.
pub(super) fn withdraw(
    conn: &Connection,
    child: ChildId,
    runs: &[(RunId, RunStatus)],
    reason: &str,
    at: &str,
) -> RuntimeResult<Vec<RunId>> {
    let end = RunEnd {
        reason: Some(reason),
        ..RunEnd::default()
    };
    for (id, status) in runs {
        run(conn, child, *id, RunStatus::Queued, *status, &end, at)?;
        dequeue(conn, child, *id)?;
    }
    Ok(runs.iter().map(|(run, _)| *run).collect())
}
