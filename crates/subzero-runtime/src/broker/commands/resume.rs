//! `subzero_resume`: a ready or interrupted child continued at its verified checkpoint,
//! optionally with a new run, after recovering it from a previous owner when needed.

use std::sync::Arc;

use subzero_core::{ChildId, ChildState, ErrorCode, RunId};
use subzero_protocol as p;

use super::{Command, Context};
use crate::broker::admit::model_row;
use crate::broker::checkpoint;
use crate::broker::engines::{Asked, worker_of};
use crate::broker::live::Live;
use crate::broker::receipts::{Receipt, replayed};
use crate::broker::worker::{FirstRun, StartFrom};
use crate::broker::{Broker, BrokerError};
use crate::locks::{ChildLock, SlotGuard};
use crate::scope::WorkspaceScope;
use crate::store::{Admit, ChildRow, Ownership, ResumeCommit};

/// `subzero_resume`.
impl Command for p::ResumeInput {
    const TOOL: &'static str = "subzero_resume";
    type Output = p::ResumeOutput;

    async fn execute(
        self,
        broker: &Arc<Broker>,
        _ctx: Context,
    ) -> Result<p::ResumeOutput, BrokerError> {
        let input = self;
        broker.gate.check_open()?;
        let (child, message) = broker.resume_request(&input)?;
        let scope = broker.child_scope(child).await?;
        let receipt = Receipt::prepare(
            "subzero_resume",
            input.request_id.as_deref().map(String::as_str),
            &input,
        )?;
        if let Some(replayed) = broker.replay(&scope, receipt.as_ref()).await? {
            return Ok(replayed);
        }
        let model = broker.policy.credential(&input.model)?;
        let (row, snapshot, verified) = broker.resumable(&scope, child).await?;
        broker
            .check_worker(
                worker_of(&snapshot),
                Asked {
                    tools: snapshot.tools.iter().map(ToString::to_string).collect(),
                    mcp_servers: snapshot.mcp_servers.len(),
                    compact: input.compact == Some(true),
                    model: &model,
                },
            )
            .await?;
        let run = message.as_ref().map(|_| RunId::generate());
        let (slots, child_lock) = broker.resume_locks(&scope, &row, run.is_some()).await?;
        let output = resumed(child, run);
        let first = run.zip(message.clone());
        let admitted = broker
            .store
            .claim_and_resume(
                &scope,
                child,
                broker.owner_token(),
                ResumeCommit {
                    model: model_row(&model),
                    observed: verified.observed,
                    first: first.clone(),
                    receipt: receipt.map(|r| r.with_output(&output)).transpose()?,
                },
            )
            .await?;
        if let Admit::Replayed(stored) = admitted {
            return replayed("subzero_resume", stored);
        }
        broker
            .workers
            .live()
            .insert(child, Live::new(model, snapshot));
        if let (Some(run), Some(true)) = (run, input.compact) {
            broker.compact_before(child, run);
        }
        if let (Some((run, prompt)), Some(child_lock)) = (first, child_lock) {
            let notice = (row.state == ChildState::Interrupted)
                .then(|| recovery_notice(row.interrupt_reason.as_deref()));
            let from = StartFrom {
                leaf: verified.start,
                recovery_notice: notice,
            };
            let first = FirstRun { run, prompt, from };
            broker
                .start_worker(child, &scope, child_lock, slots, first)
                .await?;
        }
        Ok(output)
    }
}

/// The answer to a resume: `running` with the new run when a message was given.
fn resumed(child: ChildId, run: Option<RunId>) -> p::ResumeOutput {
    p::ResumeOutput {
        child_id: child.into(),
        run_id: run.map(Into::into),
        state: match run {
            Some(_) => p::ResumeOutputState::Running,
            None => p::ResumeOutputState::Ready,
        },
        checkout: None,
        run: None,
    }
}

impl Broker {
    /// The child a resume names and its new run's message, checked before anything is
    /// read: a message within the prompt limit, and `compact` only with a message.
    fn resume_request(
        &self,
        input: &p::ResumeInput,
    ) -> Result<(ChildId, Option<String>), BrokerError> {
        let child = ChildId::parse(input.child_id.as_str())?;
        let message = input.message.as_ref().map(|m| m.to_string());
        if let Some(m) = &message {
            self.policy.limits.check_prompt(m)?;
        }
        if input.compact == Some(true) && message.is_none() {
            return Err(BrokerError::invalid(
                "compact",
                "compact needs a message: the compaction happens before the new run's first request; resume with a message and compact: true",
            ));
        }
        Ok((child, message))
    }

    /// Every lock a resume needs, taken before its first write so a refusal changes
    /// nothing. A new run needs the slots and the child's lock. So does an interrupted
    /// child without one: it comes back `ready` — free for the next run — only when
    /// nothing holds its lock. A ready child without a run needs neither: nothing will
    /// run, only its model record is rewritten.
    async fn resume_locks(
        &self,
        scope: &WorkspaceScope,
        row: &ChildRow,
        new_run: bool,
    ) -> Result<(Vec<SlotGuard>, Option<ChildLock>), BrokerError> {
        let slots = if new_run {
            let writes = self
                .writes_workspace(row.child_id, row.write_capable)
                .await?;
            self.take_slots(scope, writes)?
        } else {
            Vec::new()
        };
        let child_lock = if new_run || row.state == ChildState::Interrupted {
            Some(self.acquire_child_lock(row.child_id).await?)
        } else {
            None
        };
        Ok((slots, child_lock))
    }

    /// The child as a resume continues it: recovered from a previous owner when needed,
    /// not running, its transcript readable by this worker, its stored grant, and its
    /// checkpoint verified against the transcript.
    async fn resumable(
        &self,
        scope: &WorkspaceScope,
        child: ChildId,
    ) -> Result<(ChildRow, p::GrantSnapshot, checkpoint::Verified), BrokerError> {
        let mut row = self.store.child(scope, child).await?;
        // First: a run whose previous owner's processes may live is `recovery_required`
        // (naming them) even though its row still says `running`.
        if row.ownership == Ownership::RecoveryRequired {
            row = self.recover(scope, &row).await?;
        }
        if row.state == ChildState::Running {
            return Err(BrokerError::new(
                ErrorCode::Busy,
                format!(
                    "child {child} is running; resume applies to ready or interrupted children (stop it first, or send a followup)"
                ),
            ));
        }
        // The frozen grant as `start_run` will carry it; the store holds what spawn wrote.
        let snapshot: p::GrantSnapshot = row.snapshot.grant().cloned().map_err(|e| {
            BrokerError::internal(format!(
                "child {child}'s stored grant snapshot breaks the contract: {e}"
            ))
        })?;
        let kind = worker_of(&snapshot);
        let hello = self.hello_for(kind).await?;
        if let Some(worker) = &row.worker
            && (u64::from(worker.transcript_version) != hello.transcript_version
                || worker.name != hello.name)
        {
            return Err(BrokerError::new(
                ErrorCode::WorkerIncompatible,
                format!(
                    "child {child}'s transcript was written by worker `{}` (transcript version {}) but its {kind} worker here is `{}` reading version {}; resume it with a Subzero release that has that worker (a transcript is never migrated)",
                    worker.name, worker.transcript_version, hello.name, hello.transcript_version
                ),
            ));
        }
        self.check_stored_filesystem(&snapshot).await?;
        self.check_stored_network(&snapshot).await?;
        let format = self.workers.engines.transcript_format(kind)?;
        let verified = checkpoint::verify(
            self.supervisor,
            child,
            &self.transcript_path(child),
            row.last_leaf.as_ref(),
            hello.transcript_version,
            format,
        )?;
        Ok((row, snapshot, verified))
    }

    /// Retry recovery of a child whose previous owner may still be alive.
    async fn recover(
        &self,
        scope: &WorkspaceScope,
        row: &ChildRow,
    ) -> Result<ChildRow, BrokerError> {
        let (store, paths, token, observed) = (
            self.store.clone(),
            self.paths.clone(),
            self.owner_token().to_owned(),
            row.clone(),
        );
        tokio::task::spawn_blocking(move || {
            crate::recovery::recover_child(&store, &paths, &observed, &token)
        })
        .await
        .map_err(|e| BrokerError::internal(format!("recovery panicked: {e}")))??;
        let fresh = self.store.child(scope, row.child_id).await?;
        if fresh.ownership == Ownership::RecoveryRequired {
            let holders = crate::locks::holders(&self.paths.child_lock(row.child_id));
            let names: Vec<String> = holders
                .iter()
                .map(|h| format!("pid {} ({})", h.pid, h.command))
                .collect();
            return Err(BrokerError::new(
                ErrorCode::RecoveryRequired,
                format!(
                    "child {} may still have live processes from its previous owner ({}); they must exit before it can be resumed — stop them or run `subzero doctor`",
                    row.child_id,
                    if names.is_empty() { "unknown".to_owned() } else { names.join(", ") }
                ),
            )
            .with_detail("holders", holders.iter().map(|h| h.pid).collect::<Vec<_>>()));
        }
        Ok(fresh)
    }
}

fn recovery_notice(reason: Option<&str>) -> String {
    format!(
        "Recovery notice: the previous run of this conversation was interrupted ({}) and was not completed or retried. The working tree may contain changes from that interrupted run; check the files you rely on before continuing.",
        reason.unwrap_or("reason unknown")
    )
}
