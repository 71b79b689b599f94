//! Settling a run with what the worker reported (and the proofs it needs), and dispatching
//! the next queued run.

use super::*;

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

/// The `details` object of an error body.
pub type ErrorDetails = serde_json::Map<String, serde_json::Value>;

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

/// A settlement once its proofs were handed to the core: what the store writes.
pub(super) enum Written {
    Completed {
        preview: String,
        preview_truncated: bool,
        artifact: Option<NewArtifact>,
        budget: Option<BudgetReached>,
    },
    Failed {
        code: ErrorCode,
        message: String,
        partial: Option<PartialResult>,
        details: Option<ErrorDetails>,
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
pub(super) struct Decision {
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

pub(super) fn proof_mismatch(
    what: &str,
    proof: (ChildId, RunId),
    settled: (ChildId, RunId),
) -> RuntimeError {
    RuntimeError::InvalidRequest(format!(
        "the {what} is about run {} of child {}, not run {} of child {}",
        proof.1, proof.0, settled.1, settled.0
    ))
}

/// Hand `settlement` (and its proofs) to the core, which decides whether `run` may
/// settle that way and what happens to the queue.
pub(super) fn decide_settlement(
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
            budget,
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
                budget,
            };
            let report = match budget {
                Some(budget) => RunReport::Exhausted(leaf, budget),
                None => RunReport::Completed(leaf),
            };
            let settled = decided.settle(report)?;
            Ok((written, settled.into()))
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
            let settled = decided.settle(RunReport::Failed { run, failure })?;
            let written = Written::Failed {
                code,
                message,
                partial,
                details,
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
            let settled = decided.confirm_stop(confirmed)?;
            Ok((Written::Stopped { reaped }, settled.into()))
        }
        Settlement::Interrupted { reason, tree_gone } => {
            // The core's `lose_worker` is about whatever run is active; the report
            // names one, so it must be that one.
            if let Some((active, _)) = decided.active_run()
                && active != run
            {
                return Err(
                    LifecycleError::from(subzero_core::lifecycle::error::StaleRun {
                        child,
                        expected: run,
                        active: Some(active),
                    })
                    .into(),
                );
            }
            let lost = decided.lose_worker(&reason)?;
            let decision = Decision {
                status: lost.run.status(),
                withdrawn: terminal(&lost.abandoned),
                started: None,
            };
            Ok((Written::Interrupted { reason, tree_gone }, decision))
        }
    }
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
    let mut decided = lifecycle::load(conn, options, &row)?;
    let from = decided.active_run().map(|(_, status)| status);
    let (written, decision) = decide_settlement(&mut decided, child, run, settlement)?;
    let Some(from) = from else {
        return Err(RuntimeError::Internal(format!(
            "run {run} settled on child {child}, which has no active run"
        )));
    };
    let custody = row.custody();
    custody.check_owner(owner_token)?;
    let at = now(conn)?;
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
            ..
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
    let budget = match &written {
        Written::Completed {
            budget: Some(budget),
            ..
        } => Some(serde_json::to_string(budget).map_err(|e| {
            RuntimeError::Internal(format!("cannot encode the budget reached: {e}"))
        })?),
        _ => None,
    };
    let error_details = match &written {
        Written::Failed {
            details: Some(details),
            ..
        } if !details.is_empty() => Some(serde_json::to_string(details).map_err(|e| {
            RuntimeError::Internal(format!("cannot encode the error's details: {e}"))
        })?),
        _ => None,
    };
    let end = RunEnd {
        reason,
        preview,
        preview_truncated: truncated,
        artifact_id: artifact,
        error_code: code,
        error_message: message,
        usage,
        budget,
        error_details,
    };
    write::run(conn, child, run, from, decision.status, &end, &at)?;
    let artifact = match &written {
        Written::Completed { artifact, .. } => artifact.as_ref(),
        Written::Failed { partial, .. } => partial.as_ref().and_then(|p| p.artifact.as_ref()),
        Written::Stopped { .. } | Written::Interrupted { .. } => None,
    };
    if let Some(artifact) = artifact {
        insert_artifact(conn, child, Some(run), artifact, &at)?;
    }

    let why = match &written {
        Written::Interrupted { .. } => "cancelled: the active run was interrupted",
        _ => "cancelled: the active run did not complete",
    };
    let cancelled = write::withdraw(conn, child, &decision.withdrawn, why, &at)?;

    let next = match decision.started {
        Some(next) => Some(dispatch(conn, child, next, &at)?),
        None => None,
    };
    let child_state = decided.state();
    // With a next run the holder keeps the child; otherwise it comes to rest — free,
    // or `recovery_required` while an interrupted worker's tree is not proven gone.
    let custody = match (&next, &written) {
        (Some(_), _) => custody,
        (None, Written::Interrupted { tree_gone, .. }) => custody.at_rest(child_state, *tree_gone),
        (None, _) => custody.at_rest(child_state, true),
    };
    write::child_at_rest(conn, &row, &decided, &custody, &at)?;

    let (kind, payload) = match &written {
        Written::Completed {
            preview,
            preview_truncated,
            artifact,
            budget: None,
        } => (
            "completed",
            json!({
                "artifactId": artifact.as_ref().map(|a| a.artifact_id.to_string()),
                "preview": preview,
                "previewTruncated": preview_truncated,
            }),
        ),
        Written::Completed {
            preview,
            preview_truncated,
            artifact,
            budget: Some(budget),
        } => (
            "budget_exhausted",
            json!({
                "artifactId": artifact.as_ref().map(|a| a.artifact_id.to_string()),
                "preview": preview,
                "previewTruncated": preview_truncated,
                "budgetReached": budget,
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

/// Start the queued run `next` the core chose to follow the settled one.
fn dispatch(conn: &Connection, child: ChildId, next: RunId, at: &str) -> RuntimeResult<NextRun> {
    let prompt: String = conn.query_row(
        "SELECT prompt FROM runs WHERE run_id = ?1 AND child_id = ?2",
        params![next.to_string(), child.to_string()],
        |r| r.get(0),
    )?;
    write::run(
        conn,
        child,
        next,
        RunStatus::Queued,
        RunStatus::Running,
        &RunEnd::default(),
        at,
    )?;
    write::dequeue(conn, child, next)?;
    Ok(NextRun {
        run_id: next,
        prompt,
    })
}

pub(super) fn insert_artifact(
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
