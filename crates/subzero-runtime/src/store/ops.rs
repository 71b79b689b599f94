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

/// Spawn admission: a new child with its first run, already claimed by the caller.
#[derive(Clone, Debug)]
pub struct AdmitSpawn {
    /// The child to create.
    pub child: NewChild,
    /// Id of its first run.
    pub run_id: RunId,
    /// The prompt.
    pub prompt: String,
    /// The caller's broker token (it holds the child lock and the slots).
    pub owner_token: String,
    /// Idempotency receipt, if the caller passed a requestId.
    pub receipt: Option<ReceiptInput>,
}

/// Result of a spawn admission.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Admission {
    /// The child.
    pub child_id: ChildId,
    /// Its first run, now `running`.
    pub run_id: RunId,
    /// Owner generation after the claim (1).
    pub owner_generation: u64,
}

/// A follow-up message for an existing child.
#[derive(Clone, Debug)]
pub struct AdmitFollowup {
    /// The child.
    pub child_id: ChildId,
    /// Id for the new run.
    pub run_id: RunId,
    /// The message.
    pub prompt: String,
    /// The caller's broker token.
    pub owner_token: String,
    /// Idempotency receipt.
    pub receipt: Option<ReceiptInput>,
}

/// How a follow-up was admitted.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum FollowupDelivery {
    /// The child was ready and claimed by the caller: the run is now active.
    Started,
    /// The child is running: the run is queued at this 1-based position.
    Queued {
        /// Position in the follow-up queue.
        position: u64,
    },
}

/// A successful claim.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Claim {
    /// The child.
    pub child_id: ChildId,
    /// The new owner generation.
    pub owner_generation: u64,
    /// The child's state at the claim.
    pub state: ChildState,
}

/// A stop that was accepted.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct StopBegun {
    /// The active run, now `stop_requested`.
    pub run_id: RunId,
    /// Queued runs that were cleared (now `stopped`).
    pub cleared: Vec<RunId>,
    /// The stop had already been requested; nothing changed.
    pub already_requested: bool,
}

/// An artifact file to register.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct NewArtifact {
    /// Id.
    pub artifact_id: ArtifactId,
    /// File name under the child's artifact directory.
    pub file_name: String,
    /// Size.
    pub total_bytes: u64,
}

/// The partial output of a failed run, kept like a completed run's result.
#[derive(Debug)]
pub struct PartialResult {
    /// Bounded preview.
    pub preview: String,
    /// Whether the preview is shorter than the partial result.
    pub preview_truncated: bool,
    /// The full partial result file.
    pub artifact: Option<NewArtifact>,
}

/// How the active run ended, as reported by the worker (or the supervisor).
///
/// `Completed` and `Stopped` carry the supervisor's capability tokens (minted in
/// `crate::supervisor::proof`), so neither can be recorded without its proof.
#[derive(Debug)]
pub enum Settlement {
    /// Finished; the transcript leaf is committed.
    Completed {
        /// Bounded preview.
        preview: String,
        /// Whether the preview is shorter than the result.
        preview_truncated: bool,
        /// The full result file.
        artifact: Option<NewArtifact>,
        /// The committed leaf, as the supervisor's proof for this child and run.
        leaf: LeafRecorded,
    },
    /// Finished with an error.
    Failed {
        /// Stable code.
        code: ErrorCode,
        /// Message (bounded by the caller).
        message: String,
        /// What the run produced before it failed (e.g. text up to a response cap).
        partial: Option<PartialResult>,
    },
    /// The worker confirmed cancellation and its tree is gone.
    Stopped {
        /// The supervisor's proof (names the child, the run and the processes reaped).
        confirmed: StopConfirmed,
    },
    /// Ended without a confirmed result.
    Interrupted {
        /// Why.
        reason: String,
        /// Whether the worker's process tree is proven gone (child lock free).
        tree_gone: bool,
    },
}

/// The next queued run dispatched by a settlement.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct NextRun {
    /// Run id, now `running`.
    pub run_id: RunId,
    /// Its message.
    pub prompt: String,
}

/// Result of a settlement.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Settled {
    /// The child's state afterwards.
    pub child_state: ChildState,
    /// The run dispatched next, if any (only after `completed`).
    pub next: Option<NextRun>,
    /// Queued runs cancelled because the run did not complete.
    pub cancelled: Vec<RunId>,
}

/// What a recovery observed about the child lock.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum LockObservation {
    /// The lock was taken by the recovering broker: nothing of the old owner lives.
    Free,
    /// Some process still holds the lock.
    Held,
}

/// What recovery did.
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum RecoveryOutcome {
    /// Active run interrupted, queue cancelled, child interrupted, ownership cleared.
    Interrupted {
        /// The interrupted run, if one was active.
        run_id: Option<RunId>,
        /// Cancelled queued runs.
        cancelled: Vec<RunId>,
    },
    /// The child was idle; only the stale ownership was cleared.
    Released,
    /// The lock is still held: marked `recovery_required`.
    MarkedRecoveryRequired,
    /// The row changed since it was observed (someone else acted); nothing done.
    Changed,
}

/// What a resume commits: the (possibly new) model, what the transcript holds at the
/// recorded leaf, the first run when the resume carries a message, and the receipt.
#[derive(Debug)]
pub struct ResumeCommit {
    /// The model the child runs against from now on (never a key).
    pub model: ModelRow,
    /// The transcript's leaf at the recorded checkpoint, as the broker read it; the core
    /// checks it against the leaf recorded in the same transaction.
    pub observed: Option<subzero_core::lifecycle::ObservedLeaf>,
    /// The run started with the resume message, if any.
    pub first: Option<(RunId, String)>,
    /// Idempotency receipt.
    pub receipt: Option<ReceiptInput>,
}

/// Result of a resume.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Resumed {
    /// State afterwards (`ready` or `running`).
    pub state: ChildState,
    /// The run started with the resume message, if any.
    pub run_id: Option<RunId>,
    /// Owner generation.
    pub owner_generation: u64,
}

fn i64_of(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

fn expect_one(changed: usize, what: &str) -> RuntimeResult<()> {
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

fn queued_ids(conn: &Connection, child: ChildId) -> RuntimeResult<Vec<RunId>> {
    let mut stmt =
        conn.prepare_cached("SELECT run_id FROM followups WHERE child_id = ?1 ORDER BY position")?;
    let ids = stmt
        .query_map(params![child.to_string()], |r| super::rows::id_col(r, 0))?
        .collect::<Result<Vec<RunId>, _>>()?;
    Ok(ids)
}

/// Check a receipt inside the transaction: `Some(receipt)` = replay, conflict = error.
fn existing_receipt(
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

fn insert_receipt(
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

fn next_ordinal(conn: &Connection, child: ChildId) -> RuntimeResult<i64> {
    Ok(conn.query_row(
        "SELECT COALESCE(MAX(ordinal), 0) + 1 FROM runs WHERE child_id = ?1",
        params![child.to_string()],
        |r| r.get(0),
    )?)
}

fn insert_run(
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
fn withdraw(
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

fn terminal(runs: &[AnyRun]) -> Vec<(RunId, RunStatus)> {
    runs.iter().map(|r| (r.id(), r.status())).collect()
}

fn ownership_error(row: &ChildRow, owner_token: &str) -> RuntimeError {
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

fn admit_spawn_tx(
    conn: &Connection,
    options: &StoreOptions,
    input: &AdmitSpawn,
) -> RuntimeResult<Admit<Admission>> {
    let scope_key = input.child.scope.key();
    if let Some(receipt) = &input.receipt
        && let Some(stored) = existing_receipt(conn, &scope_key, receipt)?
    {
        return Ok(Admit::Replayed(stored));
    }
    let at = now(conn)?;
    let child = &input.child;
    let spawned = AnyChild::spawn(
        child.child_id,
        input.run_id,
        input.prompt.clone(),
        options.queued_followups,
    );
    let Some((first, first_status)) = spawned.active_run() else {
        return Err(RuntimeError::Internal(format!(
            "a spawned child {} has no active run",
            child.child_id
        )));
    };
    let snapshot = serde_json::to_string(&child.snapshot)
        .map_err(|e| RuntimeError::Internal(format!("snapshot: {e}")))?;
    conn.execute(
        "INSERT INTO children (child_id, scope_key, scope_uid, workspace_root, scope_dev, scope_ino, \
         template_id, snapshot_json, write_capable, model_url, model_name, model_api, credential_ref, \
         state, phase, ownership, owner_token, owner_generation, active_run_id, created_at, updated_at) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?17, 'starting', 'owned', ?14, 1, ?15, ?16, ?16)",
        params![
            child.child_id.to_string(),
            scope_key,
            i64::from(child.scope.uid()),
            child.scope.root().to_string_lossy(),
            child.scope.dev() as i64,
            child.scope.ino() as i64,
            child.template_id,
            snapshot,
            child.write_capable,
            child.model.url,
            child.model.model,
            child.model.api,
            child.model.credential_ref,
            input.owner_token,
            first.to_string(),
            at,
            spawned.state().as_str(),
        ],
    )?;
    let request_id = input.receipt.as_ref().map(|r| r.request_id.as_str());
    insert_run(
        conn,
        child.child_id,
        first,
        first_status,
        &input.prompt,
        request_id,
        &at,
    )?;
    if let Some(receipt) = &input.receipt {
        insert_receipt(conn, &scope_key, receipt, &at)?;
    }
    events::append(
        conn,
        options,
        child.child_id,
        Some(input.run_id),
        "run_started",
        &json!({}),
    )?;
    Ok(Admit::New(Admission {
        child_id: child.child_id,
        run_id: input.run_id,
        owner_generation: 1,
    }))
}

fn admit_followup_tx(
    conn: &Connection,
    options: &StoreOptions,
    scope: &WorkspaceScope,
    input: &AdmitFollowup,
) -> RuntimeResult<Admit<FollowupDelivery>> {
    let row = load_child_in(conn, scope, input.child_id)?;
    let scope_key = scope.key();
    if let Some(receipt) = &input.receipt
        && let Some(stored) = existing_receipt(conn, &scope_key, receipt)?
    {
        return Ok(Admit::Replayed(stored));
    }
    let mut decided = lifecycle::load(conn, options, &row)?;
    let delivery = decided
        .followup(input.run_id, input.prompt.clone())
        .map_err(refused)?;
    let at = now(conn)?;
    let request_id = input.receipt.as_ref().map(|r| r.request_id.as_str());
    let child = input.child_id.to_string();
    let delivery = match delivery {
        Delivery::Queued { position } => {
            if row.ownership != Ownership::Owned {
                return Err(ownership_error(&row, &input.owner_token));
            }
            insert_run(
                conn,
                input.child_id,
                input.run_id,
                RunStatus::Queued,
                &input.prompt,
                request_id,
                &at,
            )?;
            let slot: i64 = conn.query_row(
                "SELECT COALESCE(MAX(position), 0) + 1 FROM followups WHERE child_id = ?1",
                params![child],
                |r| r.get(0),
            )?;
            conn.execute(
                "INSERT INTO followups (child_id, position, run_id) VALUES (?1, ?2, ?3)",
                params![child, slot, input.run_id.to_string()],
            )?;
            let active = row.active_run_id.map(|r| r.to_string());
            let changed = conn.execute(
                "UPDATE children SET updated_at = ?3 WHERE child_id = ?1 AND state = 'running' AND active_run_id = ?2",
                params![child, active, at],
            )?;
            expect_one(changed, "touch running child")?;
            events::append(
                conn,
                options,
                input.child_id,
                Some(input.run_id),
                "run_queued",
                &json!({ "position": position }),
            )?;
            FollowupDelivery::Queued {
                position: u64::try_from(position).unwrap_or(u64::MAX),
            }
        }
        Delivery::Started => {
            let changed = conn.execute(
                "UPDATE children SET state = ?5, phase = 'starting', active_run_id = ?3, updated_at = ?4 \
                 WHERE child_id = ?1 AND state = ?6 AND ownership = 'owned' AND owner_token = ?2",
                params![
                    child,
                    input.owner_token,
                    input.run_id.to_string(),
                    at,
                    decided.state().as_str(),
                    row.state.as_str()
                ],
            )?;
            if changed != 1 {
                return Err(ownership_error(&row, &input.owner_token));
            }
            insert_run(
                conn,
                input.child_id,
                input.run_id,
                RunStatus::Running,
                &input.prompt,
                request_id,
                &at,
            )?;
            events::append(
                conn,
                options,
                input.child_id,
                Some(input.run_id),
                "run_started",
                &json!({}),
            )?;
            FollowupDelivery::Started
        }
    };
    if let Some(receipt) = &input.receipt {
        insert_receipt(conn, &scope_key, receipt, &at)?;
    }
    Ok(Admit::New(delivery))
}

fn claim_tx(
    conn: &Connection,
    scope: &WorkspaceScope,
    child: ChildId,
    owner_token: &str,
) -> RuntimeResult<Claim> {
    let row = load_child_in(conn, scope, child)?;
    let at = now(conn)?;
    let changed = conn.execute(
        "UPDATE children SET ownership = 'owned', owner_token = ?2, owner_generation = owner_generation + 1, updated_at = ?3 \
         WHERE child_id = ?1 AND ownership = 'none' AND state IN ('ready', 'interrupted')",
        params![child.to_string(), owner_token, at],
    )?;
    if changed != 1 {
        return Err(match (row.ownership, row.state) {
            (Ownership::RecoveryRequired, _) => ownership_error(&row, owner_token),
            (Ownership::Owned, _) if row.owner_token.as_deref() == Some(owner_token) => {
                RuntimeError::Busy(format!("child {child} is already claimed by this broker"))
            }
            (Ownership::Owned, _) => ownership_error(&row, owner_token),
            (Ownership::None, _) => RuntimeError::RecoveryRequired(format!(
                "child {child} is recorded as running without an owner; run startup recovery first"
            )),
        });
    }
    Ok(Claim {
        child_id: child,
        owner_generation: row.owner_generation + 1,
        state: row.state,
    })
}

fn begin_stop_tx(
    conn: &Connection,
    options: &StoreOptions,
    scope: &WorkspaceScope,
    child: ChildId,
    expected: RunId,
    owner_token: &str,
) -> RuntimeResult<StopBegun> {
    let row = load_child_in(conn, scope, child)?;
    let mut decided = lifecycle::load(conn, options, &row)?;
    let receipt = match decided.stop(expected) {
        Ok(receipt) => receipt,
        // The core says `stale_run` for a child with no active run; when the caller
        // names a run of this child that already ended, the broker has always said
        // `not_running` (its callers rely on it).
        Err(LifecycleError::StaleRun(e))
            if e.active.is_none() && lifecycle::is_run_of(conn, child, expected)? =>
        {
            return Err(RuntimeError::NotRunning {
                child: child.to_string(),
                hint: "the run already ended; read its result with subzero_get",
            });
        }
        Err(e) => return Err(refused(e)),
    };
    if row.ownership != Ownership::Owned || row.owner_token.as_deref() != Some(owner_token) {
        return Err(ownership_error(&row, owner_token));
    }
    if !receipt.newly_requested {
        return Ok(StopBegun {
            run_id: expected,
            cleared: Vec::new(),
            already_requested: true,
        });
    }
    let at = now(conn)?;
    let changed = conn.execute(
        "UPDATE runs SET status = 'stop_requested' WHERE run_id = ?1 AND child_id = ?2 AND status = 'running'",
        params![expected.to_string(), child.to_string()],
    )?;
    expect_one(changed, "request stop of the active run")?;
    let withdrawn: Vec<(RunId, RunStatus)> = receipt
        .withdrawn
        .iter()
        .map(|run| (*run, RunStatus::Stopped))
        .collect();
    let cleared = withdraw(conn, child, &withdrawn, "cleared by stop", &at)?;
    let changed = conn.execute(
        "UPDATE children SET phase = 'stopping', updated_at = ?3 WHERE child_id = ?1 AND state = 'running' AND active_run_id = ?2",
        params![child.to_string(), expected.to_string(), at],
    )?;
    expect_one(changed, "mark child stopping")?;
    events::append(
        conn,
        options,
        child,
        Some(expected),
        "stop_requested",
        &json!({ "clearedQueued": cleared.len() }),
    )?;
    Ok(StopBegun {
        run_id: expected,
        cleared,
        already_requested: false,
    })
}

/// A settlement once its proofs were handed to the core: what the store writes.
enum Written {
    Completed {
        preview: String,
        preview_truncated: bool,
        artifact: Option<NewArtifact>,
        leaf_id: String,
        leaf_digest: String,
    },
    Failed {
        code: ErrorCode,
        message: String,
        partial: Option<PartialResult>,
    },
    Stopped {
        reaped: u32,
    },
    Interrupted {
        reason: String,
        tree_gone: bool,
    },
}

/// What the core decided about the settled run and its queue.
struct Decision {
    /// The settled run's terminal status.
    status: RunStatus,
    /// Queued runs taken out with it, and their terminal status.
    withdrawn: Vec<(RunId, RunStatus)>,
    /// The queued run that starts next.
    started: Option<RunId>,
}

impl From<CoreSettlement> for Decision {
    fn from(s: CoreSettlement) -> Self {
        Decision {
            status: s.run.status(),
            withdrawn: terminal(&s.withdrawn),
            started: s.started,
        }
    }
}

fn proof_mismatch(what: &str, proof: (ChildId, RunId), settled: (ChildId, RunId)) -> RuntimeError {
    RuntimeError::InvalidRequest(format!(
        "the {what} is about run {} of child {}, not run {} of child {}",
        proof.1, proof.0, settled.1, settled.0
    ))
}

/// Hand `settlement` (and its proofs) to the core, which decides whether `run` may
/// settle that way and what happens to the queue.
fn decide_settlement(
    decided: &mut AnyChild,
    child: ChildId,
    run: RunId,
    settlement: Settlement,
) -> RuntimeResult<(Written, Decision)> {
    match settlement {
        Settlement::Completed {
            preview,
            preview_truncated,
            artifact,
            leaf,
        } => {
            if (leaf.child(), leaf.run()) != (child, run) {
                return Err(proof_mismatch(
                    "recorded leaf",
                    (leaf.child(), leaf.run()),
                    (child, run),
                ));
            }
            let written = Written::Completed {
                preview,
                preview_truncated,
                artifact,
                leaf_id: leaf.leaf().leaf_id().to_owned(),
                leaf_digest: leaf.leaf().digest().to_string(),
            };
            let settled = decided
                .settle(RunReport::Completed(leaf))
                .map_err(refused)?;
            Ok((written, settled.into()))
        }
        Settlement::Failed {
            code,
            message,
            partial,
        } => {
            let failure = Failure {
                code,
                message: message.clone(),
            };
            let settled = decided
                .settle(RunReport::Failed { run, failure })
                .map_err(refused)?;
            let written = Written::Failed {
                code,
                message,
                partial,
            };
            Ok((written, settled.into()))
        }
        Settlement::Stopped { confirmed } => {
            if (confirmed.child(), confirmed.run()) != (child, run) {
                return Err(proof_mismatch(
                    "stop confirmation",
                    (confirmed.child(), confirmed.run()),
                    (child, run),
                ));
            }
            let reaped = confirmed.reaped();
            let settled = decided.confirm_stop(confirmed).map_err(refused)?;
            Ok((Written::Stopped { reaped }, settled.into()))
        }
        Settlement::Interrupted { reason, tree_gone } => {
            // The core's `lose_worker` is about whatever run is active; the report
            // names one, so it must be that one.
            if let Some((active, _)) = decided.active_run()
                && active != run
            {
                return Err(RuntimeError::StaleRun {
                    child: child.to_string(),
                    expected: run.to_string(),
                    active: active.to_string(),
                });
            }
            let lost = decided.lose_worker(&reason).map_err(refused)?;
            let decision = Decision {
                status: lost.run.status(),
                withdrawn: terminal(&lost.abandoned),
                started: None,
            };
            Ok((Written::Interrupted { reason, tree_gone }, decision))
        }
    }
}

fn settle_tx(
    conn: &Connection,
    options: &StoreOptions,
    child: ChildId,
    run: RunId,
    owner_token: &str,
    settlement: Settlement,
) -> RuntimeResult<Settled> {
    let row = load_child(conn, child)?;
    let mut decided = lifecycle::load(conn, options, &row)?;
    let from = decided.active_run().map(|(_, status)| status);
    let (written, decision) = decide_settlement(&mut decided, child, run, settlement)?;
    let Some(from) = from else {
        return Err(RuntimeError::Internal(format!(
            "run {run} settled on child {child}, which has no active run"
        )));
    };
    if row.owner_token.as_deref() != Some(owner_token) || row.ownership != Ownership::Owned {
        return Err(ownership_error(&row, owner_token));
    }
    let at = now(conn)?;
    let status = decision.status;
    let (preview, truncated, artifact, code, message, reason) = match &written {
        Written::Completed {
            preview,
            preview_truncated,
            artifact,
            ..
        } => (
            Some(preview.as_str()),
            *preview_truncated,
            artifact.as_ref().map(|a| a.artifact_id.to_string()),
            None,
            None,
            None,
        ),
        Written::Failed {
            code,
            message,
            partial,
        } => (
            partial.as_ref().map(|p| p.preview.as_str()),
            partial.as_ref().is_some_and(|p| p.preview_truncated),
            partial
                .as_ref()
                .and_then(|p| p.artifact.as_ref())
                .map(|a| a.artifact_id.to_string()),
            Some(code.as_str()),
            Some(message.as_str()),
            None,
        ),
        Written::Stopped { .. } => (None, false, None, None, None, Some("stopped by request")),
        Written::Interrupted { reason, .. } => {
            (None, false, None, None, None, Some(reason.as_str()))
        }
    };
    let changed = conn.execute(
        "UPDATE runs SET status = ?3, ended_at = ?4, preview = ?5, preview_truncated = ?6, artifact_id = ?7, \
         error_code = ?8, error_message = ?9, reason = ?10 WHERE run_id = ?1 AND child_id = ?2 AND status = ?11",
        params![
            run.to_string(),
            child.to_string(),
            status.as_str(),
            at,
            preview,
            truncated,
            artifact,
            code,
            message,
            reason,
            from.as_str()
        ],
    )?;
    expect_one(changed, "settle the active run")?;
    if let Written::Failed {
        partial:
            Some(PartialResult {
                artifact: Some(artifact),
                ..
            }),
        ..
    } = &written
    {
        insert_artifact(conn, child, Some(run), artifact, &at)?;
    }
    if let Written::Completed {
        artifact,
        leaf_id,
        leaf_digest,
        ..
    } = &written
    {
        if let Some(artifact) = artifact {
            insert_artifact(conn, child, Some(run), artifact, &at)?;
        }
        let changed = conn.execute(
            "UPDATE children SET last_leaf_id = ?2, last_leaf_digest = ?3 WHERE child_id = ?1 AND state = 'running'",
            params![child.to_string(), leaf_id, leaf_digest],
        )?;
        expect_one(changed, "record completed leaf")?;
    }

    let why = match &written {
        Written::Interrupted { .. } => "cancelled: the active run was interrupted",
        _ => "cancelled: the active run did not complete",
    };
    let cancelled = withdraw(conn, child, &decision.withdrawn, why, &at)?;

    let next = match decision.started {
        Some(next) => Some(dispatch(conn, child, run, next, &at)?),
        None => None,
    };
    let child_state = decided.state();
    if next.is_none() {
        let (ownership, phase, interrupt_reason) = match &written {
            Written::Interrupted { reason, tree_gone } => (
                if *tree_gone {
                    Ownership::None
                } else {
                    Ownership::RecoveryRequired
                },
                if *tree_gone {
                    Phase::Idle
                } else {
                    Phase::RecoveryRequired
                },
                Some(reason.as_str()),
            ),
            _ => (Ownership::None, Phase::Idle, None),
        };
        let keep_token = ownership == Ownership::RecoveryRequired;
        let changed = conn.execute(
            "UPDATE children SET state = ?3, ownership = ?4, phase = ?5, interrupt_reason = ?6, active_run_id = NULL, \
             owner_token = CASE WHEN ?7 THEN owner_token ELSE NULL END, updated_at = ?8 \
             WHERE child_id = ?1 AND state = 'running' AND active_run_id = ?2",
            params![
                child.to_string(),
                run.to_string(),
                child_state.as_str(),
                ownership.as_str(),
                phase.as_str(),
                interrupt_reason,
                keep_token,
                at
            ],
        )?;
        expect_one(changed, "settle child")?;
    }

    let (kind, payload) = match &written {
        Written::Completed {
            preview,
            preview_truncated,
            artifact,
            ..
        } => (
            "completed",
            json!({
                "artifactId": artifact.as_ref().map(|a| a.artifact_id.to_string()),
                "preview": preview,
                "previewTruncated": preview_truncated,
            }),
        ),
        Written::Failed { code, message, .. } => (
            "failed",
            json!({ "code": code.as_str(), "message": events::short_text(message) }),
        ),
        Written::Stopped { reaped } => ("stop_confirmed", json!({ "reaped": reaped })),
        Written::Interrupted { reason, .. } => (
            "interrupted",
            json!({ "reason": events::short_text(reason) }),
        ),
    };
    events::append(conn, options, child, Some(run), kind, &payload)?;
    if let Some(next) = &next {
        events::append(
            conn,
            options,
            child,
            Some(next.run_id),
            "run_started",
            &json!({}),
        )?;
    }
    Ok(Settled {
        child_state,
        next,
        cancelled,
    })
}

/// Start the queued run `next` the core chose to follow `settled`.
fn dispatch(
    conn: &Connection,
    child: ChildId,
    settled: RunId,
    next: RunId,
    at: &str,
) -> RuntimeResult<NextRun> {
    let prompt: String = conn.query_row(
        "SELECT prompt FROM runs WHERE run_id = ?1 AND child_id = ?2",
        params![next.to_string(), child.to_string()],
        |r| r.get(0),
    )?;
    let changed = conn.execute(
        "UPDATE runs SET status = 'running', started_at = ?2 WHERE run_id = ?1 AND status = 'queued'",
        params![next.to_string(), at],
    )?;
    expect_one(changed, "dispatch queued run")?;
    let changed = conn.execute(
        "DELETE FROM followups WHERE run_id = ?1",
        params![next.to_string()],
    )?;
    expect_one(changed, "dequeue dispatched run")?;
    let changed = conn.execute(
        "UPDATE children SET active_run_id = ?3, phase = 'starting', updated_at = ?4 \
         WHERE child_id = ?1 AND state = 'running' AND active_run_id = ?2",
        params![child.to_string(), settled.to_string(), next.to_string(), at],
    )?;
    expect_one(changed, "advance active run")?;
    Ok(NextRun {
        run_id: next,
        prompt,
    })
}

fn insert_artifact(
    conn: &Connection,
    child: ChildId,
    run: Option<RunId>,
    artifact: &NewArtifact,
    at: &str,
) -> RuntimeResult<()> {
    conn.execute(
        "INSERT INTO artifacts (artifact_id, child_id, run_id, file_name, total_bytes, created_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        params![
            artifact.artifact_id.to_string(),
            child.to_string(),
            run.map(|r| r.to_string()),
            artifact.file_name,
            i64_of(artifact.total_bytes),
            at
        ],
    )?;
    Ok(())
}

fn recover_tx(
    conn: &Connection,
    options: &StoreOptions,
    child: ChildId,
    observed_generation: u64,
    lock: LockObservation,
    reason: &str,
) -> RuntimeResult<RecoveryOutcome> {
    let row = load_child(conn, child)?;
    let needs = row.ownership != Ownership::None || row.state == ChildState::Running;
    if row.owner_generation != observed_generation || !needs {
        return Ok(RecoveryOutcome::Changed);
    }
    let at = now(conn)?;
    let generation = i64_of(observed_generation);
    if lock == LockObservation::Held {
        let changed = conn.execute(
            "UPDATE children SET ownership = 'recovery_required', phase = 'recovery_required', updated_at = ?3 \
             WHERE child_id = ?1 AND owner_generation = ?2 AND ownership IN ('owned', 'none', 'recovery_required')",
            params![child.to_string(), generation, at],
        )?;
        expect_one(changed, "mark recovery_required")?;
        return Ok(RecoveryOutcome::MarkedRecoveryRequired);
    }
    if row.state != ChildState::Running {
        let changed = conn.execute(
            "UPDATE children SET ownership = 'none', owner_token = NULL, phase = 'idle', updated_at = ?3 \
             WHERE child_id = ?1 AND owner_generation = ?2 AND state IN ('ready', 'interrupted')",
            params![child.to_string(), generation, at],
        )?;
        expect_one(changed, "release stale owner")?;
        return Ok(RecoveryOutcome::Released);
    }
    let mut decided = lifecycle::load(conn, options, &row)?;
    let from = decided.active_run().map(|(_, status)| status);
    let lost = decided.lose_worker(reason).map_err(refused)?;
    let (run, from) = match from {
        Some(from) => (lost.run.id(), from),
        None => {
            return Err(RuntimeError::Internal(format!(
                "child {child} lost its worker without an active run"
            )));
        }
    };
    let changed = conn.execute(
        "UPDATE runs SET status = ?2, ended_at = ?3, reason = ?4 WHERE run_id = ?1 AND status = ?5",
        params![
            run.to_string(),
            lost.run.status().as_str(),
            at,
            reason,
            from.as_str()
        ],
    )?;
    expect_one(changed, "interrupt active run")?;
    let cancelled = withdraw(
        conn,
        child,
        &terminal(&lost.abandoned),
        "cancelled: the active run was interrupted",
        &at,
    )?;
    let changed = conn.execute(
        "UPDATE children SET state = ?5, phase = 'idle', ownership = 'none', owner_token = NULL, \
         active_run_id = NULL, interrupt_reason = ?3, updated_at = ?4 \
         WHERE child_id = ?1 AND owner_generation = ?2 AND state = 'running'",
        params![
            child.to_string(),
            generation,
            reason,
            at,
            decided.state().as_str()
        ],
    )?;
    expect_one(changed, "interrupt child")?;
    events::append(
        conn,
        options,
        child,
        Some(run),
        "interrupted",
        &json!({ "reason": events::short_text(reason) }),
    )?;
    Ok(RecoveryOutcome::Interrupted {
        run_id: Some(run),
        cancelled,
    })
}

#[allow(clippy::too_many_arguments)]
fn resume_tx(
    conn: &Connection,
    options: &StoreOptions,
    scope: &WorkspaceScope,
    child: ChildId,
    owner_token: &str,
    model: &ModelRow,
    observed: Option<&subzero_core::lifecycle::ObservedLeaf>,
    first: Option<&(RunId, String)>,
    receipt: Option<&ReceiptInput>,
) -> RuntimeResult<Admit<Resumed>> {
    let row = load_child_in(conn, scope, child)?;
    let scope_key = scope.key();
    if let Some(receipt) = receipt
        && let Some(stored) = existing_receipt(conn, &scope_key, receipt)?
    {
        return Ok(Admit::Replayed(stored));
    }
    let mut decided = lifecycle::load(conn, options, &row)?;
    // `observed` is what the transcript holds at the recorded leaf, read by the broker
    // (`broker::checkpoint`); the core checks it against the leaf recorded in this very
    // transaction, so a leaf recorded in between is refused, not resumed past.
    let checkpoint = decided.checkpoint(observed).map_err(refused)?;
    let resumed = decided
        .resume(checkpoint, first.cloned())
        .map_err(refused)?;
    let at = now(conn)?;
    let state = resumed.state;
    let (ownership, phase, active) = match resumed.run {
        Some(run) => ("owned", Phase::Starting, Some(run.to_string())),
        None => ("none", Phase::Idle, None),
    };
    let changed = conn.execute(
        "UPDATE children SET state = ?3, ownership = ?4, phase = ?5, active_run_id = ?6, \
         owner_token = CASE WHEN ?4 = 'owned' THEN owner_token ELSE NULL END, interrupt_reason = NULL, \
         model_url = ?7, model_name = ?8, model_api = ?9, credential_ref = ?10, updated_at = ?11 \
         WHERE child_id = ?1 AND ownership = 'owned' AND owner_token = ?2 AND state = ?12",
        params![
            child.to_string(),
            owner_token,
            state.as_str(),
            ownership,
            phase.as_str(),
            active,
            model.url,
            model.model,
            model.api,
            model.credential_ref,
            at,
            row.state.as_str()
        ],
    )?;
    if changed != 1 {
        return Err(ownership_error(&row, owner_token));
    }
    if let Some((run, prompt)) = first {
        insert_run(
            conn,
            child,
            *run,
            RunStatus::Running,
            prompt,
            receipt.map(|r| r.request_id.as_str()),
            &at,
        )?;
        events::append(conn, options, child, Some(*run), "run_started", &json!({}))?;
    }
    if let Some(receipt) = receipt {
        insert_receipt(conn, &scope_key, receipt, &at)?;
    }
    Ok(Admit::New(Resumed {
        state,
        run_id: first.map(|(r, _)| *r),
        owner_generation: row.owner_generation,
    }))
}

fn require_owner(conn: &Connection, child: ChildId, owner_token: &str) -> RuntimeResult<ChildRow> {
    let row = load_child(conn, child)?;
    if row.ownership != Ownership::Owned || row.owner_token.as_deref() != Some(owner_token) {
        return Err(ownership_error(&row, owner_token));
    }
    Ok(row)
}

impl Store {
    /// Admission of a spawn: creates the child (`running`, owned by `owner_token`,
    /// generation 1), its first run (`running`), a `run_started` event and the receipt —
    /// all or nothing. A known requestId with the same digest replays its receipt;
    /// with another digest it is `request_conflict`. The caller holds the child lock
    /// and the workspace slots before calling.
    pub async fn admit_spawn(&self, input: AdmitSpawn) -> RuntimeResult<Admit<Admission>> {
        self.transact(move |tx, o| admit_spawn_tx(tx, o, &input))
            .await
    }

    /// Admission of a follow-up. A `running` child (owned by any broker) gets the run
    /// queued at the end of its ordered queue with a `run_queued` event; a `ready` child
    /// claimed by `owner_token` starts it at once (`run_started`). `interrupted` →
    /// `interrupted`; not owned by the caller → `busy` / `recovery_required`.
    pub async fn admit_followup(
        &self,
        scope: &WorkspaceScope,
        input: AdmitFollowup,
    ) -> RuntimeResult<Admit<FollowupDelivery>> {
        let scope = scope.clone();
        self.transact(move |tx, o| admit_followup_tx(tx, o, &scope, &input))
            .await
    }

    /// Record ownership of an idle (`ready` or `interrupted`) child whose kernel lock
    /// the caller holds: bumps the owner generation. Fails with `busy` when another
    /// broker owns it and `recovery_required` when a previous owner's processes hold it.
    pub async fn claim(
        &self,
        scope: &WorkspaceScope,
        child: ChildId,
        owner_token: &str,
    ) -> RuntimeResult<Claim> {
        let scope = scope.clone();
        let token = owner_token.to_owned();
        self.transact(move |tx, _| claim_tx(tx, &scope, child, &token))
            .await
    }

    /// Give up ownership of an idle child (e.g. a claim whose follow-up failed).
    pub async fn release(&self, child: ChildId, owner_token: &str) -> RuntimeResult<()> {
        let token = owner_token.to_owned();
        self.transact(move |tx, _| {
            let at = now(tx)?;
            let changed = tx.execute(
                "UPDATE children SET ownership = 'none', owner_token = NULL, updated_at = ?3 \
                 WHERE child_id = ?1 AND owner_token = ?2 AND ownership = 'owned' AND state IN ('ready', 'interrupted')",
                params![child.to_string(), token, at],
            )?;
            if changed == 1 {
                Ok(())
            } else {
                Err(ownership_error(&load_child(tx, child)?, &token))
            }
        })
        .await
    }

    /// Begin a stop of the active run: `expected` must be the active run (`stale_run`
    /// otherwise, `not_running` when nothing is active). Sets it `stop_requested`, clears
    /// the queue (those runs become `stopped`), phase `stopping`, and appends
    /// `stop_requested` — atomically. A repeated stop is reported as already requested.
    pub async fn begin_stop(
        &self,
        scope: &WorkspaceScope,
        child: ChildId,
        expected: RunId,
        owner_token: &str,
    ) -> RuntimeResult<StopBegun> {
        let scope = scope.clone();
        let token = owner_token.to_owned();
        self.transact(move |tx, o| begin_stop_tx(tx, o, &scope, child, expected, &token))
            .await
    }

    /// Settle the active run. `completed` records the leaf, the artifact and dispatches
    /// the next queued run (same transaction); so does `stopped` for follow-ups sent
    /// after the stop was requested (the stop itself cleared the earlier ones);
    /// `failed` withdraws the queue (`stopped`) and `interrupted` abandons it.
    /// With nothing next the child becomes `ready` (or `interrupted`) and ownership is
    /// released (or `recovery_required` when an interrupted tree is not proven gone).
    /// `stopped` is only accepted after `begin_stop`.
    pub async fn settle_run(
        &self,
        child: ChildId,
        run: RunId,
        owner_token: &str,
        settlement: Settlement,
    ) -> RuntimeResult<Settled> {
        let token = owner_token.to_owned();
        self.transact_durable(move |tx, o| settle_tx(tx, o, child, run, &token, settlement))
            .await
    }

    /// Recovery of one child whose owner is gone, conditional on the generation the
    /// caller observed. With the lock `Free` (the caller holds it): the active run
    /// becomes `interrupted` with `reason`, queued runs are cancelled (`interrupted`),
    /// the child is `interrupted` and unowned, and an `interrupted` event is appended.
    /// With the lock `Held`: the child is marked `recovery_required`, runs untouched.
    pub async fn recover_child(
        &self,
        child: ChildId,
        observed_generation: u64,
        lock: LockObservation,
        reason: &str,
    ) -> RuntimeResult<RecoveryOutcome> {
        let reason = reason.to_owned();
        self.transact(move |tx, o| recover_tx(tx, o, child, observed_generation, lock, &reason))
            .await
    }

    /// Blocking twin of [`Store::recover_child`] for startup.
    pub fn recover_child_blocking(
        &self,
        child: ChildId,
        observed_generation: u64,
        lock: LockObservation,
        reason: &str,
    ) -> RuntimeResult<RecoveryOutcome> {
        let reason = reason.to_owned();
        self.transact_blocking(move |tx, o| {
            recover_tx(tx, o, child, observed_generation, lock, &reason)
        })
    }

    /// Commit a resume of a `ready`/`interrupted` child claimed by `owner_token`:
    /// rewrites the model metadata; with a message it starts a run (`running`), without
    /// one the child is `ready` and ownership is released.
    pub async fn commit_resume(
        &self,
        scope: &WorkspaceScope,
        child: ChildId,
        owner_token: &str,
        resume: ResumeCommit,
    ) -> RuntimeResult<Admit<Resumed>> {
        let scope = scope.clone();
        let token = owner_token.to_owned();
        self.transact(move |tx, o| {
            resume_tx(
                tx,
                o,
                &scope,
                child,
                &token,
                &resume.model,
                resume.observed.as_ref(),
                resume.first.as_ref(),
                resume.receipt.as_ref(),
            )
        })
        .await
    }

    /// Append a worker event (`text`, `tool`, `steer_*`, …) to an owned child and mark
    /// progress. Payload ≤ 8 KiB (`limit_exceeded` otherwise).
    pub async fn append_event(
        &self,
        child: ChildId,
        run: Option<RunId>,
        owner_token: &str,
        kind: &str,
        payload: Value,
    ) -> RuntimeResult<EventSeq> {
        let token = owner_token.to_owned();
        let kind = kind.to_owned();
        self.transact_durable(move |tx, o| {
            require_owner(tx, child, &token)?;
            let at = now(tx)?;
            tx.execute(
                "UPDATE children SET last_progress_at = ?2, updated_at = ?2 WHERE child_id = ?1",
                params![child.to_string(), at],
            )?;
            events::append(tx, o, child, run, &kind, &payload)
        })
        .await
    }

    /// Append several worker events in one transaction (a burst from the worker):
    /// all are stored, or none. Returns the last sequence number.
    pub async fn append_events(
        &self,
        child: ChildId,
        owner_token: &str,
        batch: Vec<(Option<RunId>, String, Value)>,
    ) -> RuntimeResult<EventSeq> {
        let token = owner_token.to_owned();
        self.transact_durable(move |tx, o| {
            let row = require_owner(tx, child, &token)?;
            let at = now(tx)?;
            tx.execute(
                "UPDATE children SET last_progress_at = ?2, updated_at = ?2 WHERE child_id = ?1",
                params![child.to_string(), at],
            )?;
            let mut last = EventSeq::new(row.next_event_seq.get().saturating_sub(1));
            for (run, kind, payload) in &batch {
                last = events::append(tx, o, child, *run, kind, payload)?;
            }
            Ok(last)
        })
        .await
    }

    /// Set the display phase of an owned, running child and mark progress.
    pub async fn set_phase(
        &self,
        child: ChildId,
        owner_token: &str,
        phase: Phase,
    ) -> RuntimeResult<()> {
        let token = owner_token.to_owned();
        self.transact_durable(move |tx, _| {
            let at = now(tx)?;
            let changed = tx.execute(
                "UPDATE children SET phase = ?3, last_progress_at = ?4, updated_at = ?4 \
                 WHERE child_id = ?1 AND owner_token = ?2 AND ownership = 'owned' AND state = 'running'",
                params![child.to_string(), token, phase.as_str(), at],
            )?;
            if changed == 1 {
                Ok(())
            } else {
                Err(ownership_error(&load_child(tx, child)?, &token))
            }
        })
        .await
    }

    /// Record the identity the worker announced in `hello`.
    pub async fn record_worker(
        &self,
        child: ChildId,
        owner_token: &str,
        worker: WorkerInfo,
    ) -> RuntimeResult<()> {
        let token = owner_token.to_owned();
        self.transact(move |tx, _| {
            require_owner(tx, child, &token)?;
            tx.execute(
                "UPDATE children SET worker_name = ?2, worker_version = ?3, transcript_version = ?4 WHERE child_id = ?1",
                params![
                    child.to_string(),
                    worker.name,
                    worker.version,
                    i64::from(worker.transcript_version)
                ],
            )?;
            Ok(())
        })
        .await
    }

    /// Register an artifact file written for an owned child outside a settlement (e.g.
    /// an event payload too large for the log).
    pub async fn register_artifact(
        &self,
        child: ChildId,
        run: Option<RunId>,
        owner_token: &str,
        artifact: NewArtifact,
    ) -> RuntimeResult<()> {
        let token = owner_token.to_owned();
        self.transact(move |tx, _| {
            require_owner(tx, child, &token)?;
            let at = now(tx)?;
            insert_artifact(tx, child, run, &artifact, &at)
        })
        .await
    }

    /// Mirror a held workspace slot in the database (display only; the lock is the truth).
    pub async fn mirror_slot(
        &self,
        scope: &WorkspaceScope,
        kind: crate::locks::SlotKind,
        index: u32,
        child: ChildId,
        owner_token: &str,
    ) -> RuntimeResult<()> {
        let key = scope.key();
        let token = owner_token.to_owned();
        self.transact(move |tx, _| {
            let at = now(tx)?;
            tx.execute(
                "INSERT OR REPLACE INTO slots (scope_key, kind, slot_index, child_id, owner_token, taken_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                params![key, kind.as_str(), i64::from(index), child.to_string(), token, at],
            )?;
            Ok(())
        })
        .await
    }

    /// Remove a slot mirror row.
    pub async fn unmirror_slot(
        &self,
        scope: &WorkspaceScope,
        kind: crate::locks::SlotKind,
        index: u32,
    ) -> RuntimeResult<()> {
        let key = scope.key();
        self.transact(move |tx, _| {
            tx.execute(
                "DELETE FROM slots WHERE scope_key = ?1 AND kind = ?2 AND slot_index = ?3",
                params![key, kind.as_str(), i64::from(index)],
            )?;
            Ok(())
        })
        .await
    }

    // ---- reads -------------------------------------------------------------------

    /// One child of `scope` (`not_found` for another scope's child).
    pub async fn child(&self, scope: &WorkspaceScope, child: ChildId) -> RuntimeResult<ChildRow> {
        let scope = scope.clone();
        self.read(move |c| load_child_in(c, &scope, child)).await
    }

    /// The child as the core sees it (row, active run and queue through `AnyChild::load`),
    /// for requests the core decides without writing anything (a steer).
    pub async fn lifecycle(&self, scope: &WorkspaceScope, child: ChildId) -> RuntimeResult<AnyChild> {
        let scope = scope.clone();
        let options = self.options().clone();
        self.read(move |c| {
            let row = load_child_in(c, &scope, child)?;
            lifecycle::load(c, &options, &row)
        })
        .await
    }

    /// Children of `scope` ordered by id, after `after`, at most `limit`.
    pub async fn list_children(
        &self,
        scope: &WorkspaceScope,
        limit: u32,
        after: Option<ChildId>,
    ) -> RuntimeResult<Vec<ChildRow>> {
        let key = scope.key();
        self.read(move |c| {
            let mut stmt = c.prepare_cached(&format!(
                "SELECT {CHILD_COLUMNS} FROM children WHERE scope_key = ?1 AND child_id > ?2 ORDER BY child_id LIMIT ?3"
            ))?;
            let after = after.map(|a| a.to_string()).unwrap_or_default();
            let rows = stmt
                .query_map(params![key, after, i64::from(limit.max(1))], child_from_row)?
                .collect::<Result<Vec<_>, _>>()?;
            Ok(rows)
        })
        .await
    }

    /// Every run of a child of `scope`, oldest first.
    pub async fn runs(&self, scope: &WorkspaceScope, child: ChildId) -> RuntimeResult<Vec<RunRow>> {
        let scope = scope.clone();
        self.read(move |c| {
            load_child_in(c, &scope, child)?;
            let mut stmt = c.prepare_cached(&format!(
                "SELECT {RUN_COLUMNS} FROM runs WHERE child_id = ?1 ORDER BY ordinal"
            ))?;
            let rows = stmt
                .query_map(params![child.to_string()], run_from_row)?
                .collect::<Result<Vec<_>, _>>()?;
            Ok(rows)
        })
        .await
    }

    /// The follow-up queue of a child, in dispatch order.
    pub async fn queued_runs(
        &self,
        scope: &WorkspaceScope,
        child: ChildId,
    ) -> RuntimeResult<Vec<RunId>> {
        let scope = scope.clone();
        self.read(move |c| {
            load_child_in(c, &scope, child)?;
            queued_ids(c, child)
        })
        .await
    }

    /// An artifact of `scope` (`not_found` for another scope's artifact).
    pub async fn artifact(
        &self,
        scope: &WorkspaceScope,
        artifact: ArtifactId,
    ) -> RuntimeResult<ArtifactRow> {
        let key = scope.key();
        self.read(move |c| {
            c.query_row(
                &format!(
                    "SELECT {} FROM artifacts a JOIN children c ON c.child_id = a.child_id \
                     WHERE a.artifact_id = ?1 AND c.scope_key = ?2",
                    ARTIFACT_COLUMNS
                        .split(", ")
                        .map(|col| format!("a.{col}"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                params![artifact.to_string(), key],
                artifact_from_row,
            )
            .optional()?
            .ok_or_else(|| RuntimeError::not_found("artifact", artifact))
        })
        .await
    }

    /// The stored receipt for a request, if any: same digest → `Some(receipt)`,
    /// another digest → `request_conflict`.
    pub async fn find_receipt(
        &self,
        scope: &WorkspaceScope,
        probe: ReceiptInput,
    ) -> RuntimeResult<Option<Value>> {
        let key = scope.key();
        self.read(move |c| existing_receipt(c, &key, &probe)).await
    }

    /// Children whose row claims an owner or an active run (for startup recovery).
    pub fn children_needing_recovery_blocking(&self) -> RuntimeResult<Vec<ChildRow>> {
        self.read_blocking(|c| {
            let mut stmt = c.prepare(&format!(
                "SELECT {CHILD_COLUMNS} FROM children WHERE ownership != 'none' OR state = 'running' ORDER BY child_id"
            ))?;
            let rows = stmt
                .query_map([], child_from_row)?
                .collect::<Result<Vec<_>, _>>()?;
            Ok(rows)
        })
    }
}
