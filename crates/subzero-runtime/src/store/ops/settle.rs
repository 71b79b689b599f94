//! Settling a run with what the worker reported (and the proofs it needs), and dispatching
//! the next queued run.

use subzero_core::events::EventBody;
use subzero_core::lifecycle::{Failure, LeafRecorded, RunEnding, SettledRun, StopConfirmed};
use subzero_core::{BudgetReached, ErrorCode};

use super::*;
use crate::store::rows::{ErrorDetails, RunUsage};

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
/// `Completed` and `Stopped` carry the supervisor's capability tokens (minted in the
/// worker driver where the evidence arrives), so neither can be recorded without its
/// proof.
#[derive(Debug)]
pub enum Settlement {
    /// Finished; the transcript leaf is committed.
    Completed {
        /// Bounded preview.
        preview: String,
        /// Whether the preview is shorter than the result.
        preview_truncated: bool,
        /// The full result file.
        artifact: NewArtifact,
        /// The committed leaf, as the supervisor's proof for this child and run.
        leaf: LeafRecorded,
        /// The budget the run reached (`budget_exhausted`; the result is the handoff
        /// summary), or `None` for a plain completion.
        budget: Option<BudgetReached>,
    },
    /// Finished with an error.
    Failed {
        /// Stable code.
        code: ErrorCode,
        /// Message (bounded by the caller).
        message: String,
        /// What the run produced before it failed (e.g. text up to a response cap).
        partial: Option<PartialResult>,
        /// Machine-readable details of the error (`status` of an HTTP failure, `limit`
        /// of a limit, …), shown as `lastRun.error.details`.
        details: Option<ErrorDetails>,
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

/// What the store records of a settlement besides the core's decision: the run's end,
/// its artifact and its event.
struct Record {
    preview: Option<String>,
    preview_truncated: bool,
    artifact: Option<NewArtifact>,
    code: Option<ErrorCode>,
    message: Option<String>,
    reason: Option<String>,
    budget: Option<BudgetReached>,
    details: Option<ErrorDetails>,
    /// Why queued runs taken out with it were cancelled.
    withdrawn: &'static str,
}

impl Record {
    fn new(withdrawn: &'static str) -> Record {
        Record {
            preview: None,
            preview_truncated: false,
            artifact: None,
            code: None,
            message: None,
            reason: None,
            budget: None,
            details: None,
            withdrawn,
        }
    }
}

const NOT_COMPLETED: &str = "cancelled: the active run did not complete";
const INTERRUPTED: &str = "cancelled: the active run was interrupted";

fn proof_mismatch(what: &str, proof: (ChildId, RunId), settled: (ChildId, RunId)) -> RuntimeError {
    RuntimeError::InvalidRequest(format!(
        "the {what} is about run {} of child {}, not run {} of child {}",
        proof.1, proof.0, settled.1, settled.0
    ))
}

/// `settlement` as the core's [`RunEnding`] (with its proofs) and what the store records
/// besides. A proof about another run or child is refused here, before the core sees it.
fn ending(
    child: ChildId,
    run: RunId,
    settlement: Settlement,
) -> RuntimeResult<(RunEnding, Record)> {
    Ok(match settlement {
        Settlement::Completed {
            preview,
            preview_truncated,
            artifact,
            leaf,
            budget,
        } => {
            if (leaf.child(), leaf.run()) != (child, run) {
                let proof = (leaf.child(), leaf.run());
                return Err(proof_mismatch("recorded leaf", proof, (child, run)));
            }
            let record = Record {
                preview: Some(preview),
                preview_truncated,
                artifact: Some(artifact),
                budget,
                ..Record::new(NOT_COMPLETED)
            };
            let ending = match budget {
                Some(budget) => RunEnding::Exhausted(leaf, budget),
                None => RunEnding::Completed(leaf),
            };
            (ending, record)
        }
        Settlement::Failed {
            code,
            message,
            partial,
            details,
        } => {
            let failure = Failure {
                code,
                message: message.clone(),
            };
            let (preview, preview_truncated, artifact) = match partial {
                Some(p) => (Some(p.preview), p.preview_truncated, p.artifact),
                None => (None, false, None),
            };
            let record = Record {
                preview,
                preview_truncated,
                artifact,
                code: Some(code),
                message: Some(message),
                details,
                ..Record::new(NOT_COMPLETED)
            };
            (RunEnding::Failed { run, failure }, record)
        }
        Settlement::Stopped { confirmed } => {
            if (confirmed.child(), confirmed.run()) != (child, run) {
                let proof = (confirmed.child(), confirmed.run());
                return Err(proof_mismatch("stop confirmation", proof, (child, run)));
            }
            let record = Record {
                reason: Some("stopped by request".to_owned()),
                ..Record::new(NOT_COMPLETED)
            };
            (RunEnding::Stopped(confirmed), record)
        }
        Settlement::Interrupted { reason, tree_gone } => {
            let record = Record {
                reason: Some(reason.clone()),
                ..Record::new(INTERRUPTED)
            };
            let ending = RunEnding::Lost {
                run,
                reason,
                tree_gone,
            };
            (ending, record)
        }
    })
}

/// The event that tells how `settled` ended.
fn settled_event(
    settled: &SettledRun,
    record: &Record,
    reaped: Option<u32>,
) -> RuntimeResult<EventBody> {
    let run_id = settled.run;
    let artifact = record.artifact.as_ref().map(|a| a.artifact_id);
    let preview = record.preview.clone().unwrap_or_default();
    let preview_truncated = record.preview_truncated;
    Ok(match (settled.status, artifact, record.budget) {
        (RunStatus::BudgetExhausted, Some(artifact_id), Some(budget_reached)) => {
            EventBody::BudgetExhausted {
                run_id,
                artifact_id,
                preview,
                preview_truncated,
                budget_reached,
            }
        }
        (RunStatus::Completed, Some(artifact_id), None) => EventBody::Completed {
            run_id,
            artifact_id,
            preview,
            preview_truncated,
        },
        (RunStatus::Stopped, _, _) => EventBody::StopConfirmed {
            run_id,
            reaped: reaped.unwrap_or(0),
        },
        (RunStatus::Failed, _, _) => EventBody::Failed {
            run_id,
            code: record.code.unwrap_or(ErrorCode::Internal),
            message: events::short_text(record.message.as_deref().unwrap_or_default()),
        },
        (RunStatus::Interrupted, _, _) => EventBody::Interrupted {
            run_id: Some(run_id),
            reason: events::short_text(record.reason.as_deref().unwrap_or_default()),
        },
        (status, _, _) => {
            return Err(RuntimeError::Internal(format!(
                "run {run_id} settled as {status} without what that status records"
            )));
        }
    })
}

pub(super) fn settle_tx(
    conn: &Connection,
    options: &StoreOptions,
    child: ChildId,
    run: RunId,
    owner_token: &str,
    settlement: Settlement,
    usage: Option<RunUsage>,
) -> RuntimeResult<Settled> {
    let row = load_child(conn, child)?;
    let loaded = lifecycle::load(conn, options, &row)?;
    let reaped = match &settlement {
        Settlement::Stopped { confirmed } => Some(confirmed.reaped()),
        _ => None,
    };
    let (ending, record) = ending(child, run, settlement)?;
    let decided = loaded.settle(ending, owner_token)?;
    let at = now(conn)?;
    let details = Details {
        ended: RunEnd {
            reason: record.reason.as_deref(),
            preview: record.preview.as_deref(),
            preview_truncated: record.preview_truncated,
            artifact_id: record.artifact.as_ref().map(|a| a.artifact_id),
            error_code: record.code,
            error_message: record.message.as_deref(),
            usage,
            budget: record.budget,
            error_details: record.details.as_ref(),
        },
        withdrawn: Some(record.withdrawn),
        request_id: None,
    };
    let child_state = decided.child().state();
    let settled = decided.commit(|c| write::apply(conn, c, &details, &at))?;
    if let Some(artifact) = &record.artifact {
        insert_artifact(conn, child, Some(run), artifact, &at)?;
    }
    let settled = &settled;
    events::append(
        conn,
        options,
        child,
        &settled_event(settled, &record, reaped)?,
    )?;
    let next = match settled.started {
        Some(next) => {
            events::append(
                conn,
                options,
                child,
                &EventBody::RunStarted { run_id: next },
            )?;
            Some(NextRun {
                run_id: next,
                prompt: prompt_of(conn, child, next)?,
            })
        }
        None => None,
    };
    Ok(Settled {
        child_state,
        next,
        cancelled: settled.withdrawn.clone(),
    })
}

/// The prompt of the run the core started next.
fn prompt_of(conn: &Connection, child: ChildId, run: RunId) -> RuntimeResult<String> {
    Ok(conn.query_row(
        "SELECT prompt FROM runs WHERE run_id = ?1 AND child_id = ?2",
        params![Sql(run), Sql(child)],
        |r| r.col("prompt"),
    )?)
}

pub(in crate::store) fn insert_artifact(
    conn: &Connection,
    child: ChildId,
    run: Option<RunId>,
    artifact: &NewArtifact,
    at: &Timestamp,
) -> RuntimeResult<()> {
    conn.execute(
        "INSERT INTO artifacts (artifact_id, child_id, run_id, file_name, total_bytes, created_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        params![
            Sql(artifact.artifact_id),
            Sql(child),
            run.map(Sql),
            artifact.file_name,
            int(artifact.total_bytes),
            Sql(at)
        ],
    )?;
    Ok(())
}

impl Store {
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
        self.settle_run_with_usage(child, run, owner_token, settlement, None)
            .await
    }

    /// [`Store::settle_run`], recording in the same transaction what the run used as its
    /// worker reported it (`None` keeps what is stored).
    pub async fn settle_run_with_usage(
        &self,
        child: ChildId,
        run: RunId,
        owner_token: &str,
        settlement: Settlement,
        usage: Option<RunUsage>,
    ) -> RuntimeResult<Settled> {
        let token = owner_token.to_owned();
        self.transact_durable(move |tx, o| settle_tx(tx, o, child, run, &token, settlement, usage))
            .await
    }
}
