//! Admitting work: the steps `subzero_spawn`, `subzero_send` and `subzero_resume` share (their
//! commands are in `commands/`).
//!
//! Each validates everything it can before touching state (arguments, template,
//! credentials, checkpoint), then takes the kernel-held locks it needs, then commits
//! one store transaction, and only then starts a worker. It returns as soon as the
//! worker has the run; it never waits for the model.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use subzero_core::lifecycle::{ActiveChild, WorkerCapabilities};
use subzero_core::template::{GrantSnapshot, RunLimits, Skill, TemplateId};
use subzero_core::{AnyChild, ChildId, ErrorCode, RunId};
use subzero_protocol as p;

use super::live::{ModelKey, ToWorker};
use super::receipts::{Receipt, replayed};
use super::wire::wire;
use super::worker::{FirstRun, StartFrom};
use super::{Broker, BrokerError};
use crate::locks::{ChildLock, SlotGuard, SlotKind, try_take_slot};
use crate::scope::WorkspaceScope;
use crate::store::{Admit, AdmitFollowup, ChildRow, FollowupDelivery, ModelRow};

/// How long a new run waits for the previous worker of the same child to finish
/// exiting (it has already settled and closed its pipe) before the child is `busy`.
pub(super) const LOCK_HANDOVER: Duration = Duration::from_secs(3);

impl Broker {
    /// The grant a spawn freezes: its template's, within the run budgets it asks for,
    /// without compaction when it turns compaction off.
    pub(super) fn spawn_grant(&self, input: &p::SpawnInput) -> Result<GrantSnapshot, BrokerError> {
        let run_limits = self
            .policy
            .budgets
            .resolve(&budget_request(input.budget.as_ref()))?;
        let snapshot = self.freeze(input.template_id.as_str(), run_limits)?;
        if input.compaction == Some(p::Compaction::Off) {
            return Ok(snapshot.with_compaction(subzero_core::template::CompactionMode::Off)?);
        }
        Ok(snapshot)
    }

    /// A follow-up that starts a run on a ready child. Every lock comes before the first
    /// write — the workspace slots, then the child's lock — and the claim and the
    /// admission are one transaction, so any refusal (`workspace_busy`, `busy`,
    /// `recovery_required`) leaves the child, its runs, events and receipts as they were;
    /// what was taken is given back by dropping it.
    pub(super) async fn followup_on_ready(
        self: &Arc<Self>,
        child: ChildId,
        scope: &WorkspaceScope,
        row: &ChildRow,
        run: RunId,
        message: String,
        receipt: Option<Receipt>,
    ) -> Result<p::SendOutput, BrokerError> {
        let writes = self.writes_workspace(child, row.write_capable).await?;
        let slots = self.take_slots(scope, writes)?;
        let child_lock = self.acquire_child_lock(child).await?;
        let output = delivered(run, p::SendOutputDelivery::Started);
        let admitted = self
            .store
            .start_followup(
                scope,
                AdmitFollowup {
                    child_id: child,
                    run_id: run,
                    prompt: message.clone(),
                    owner_token: self.owner_token().to_owned(),
                    receipt: receipt.map(|r| r.with_output(&output)).transpose()?,
                },
            )
            .await?;
        match admitted {
            Admit::Replayed(stored) => replayed("subzero_send", stored),
            // A claimed idle child starts the run; the core never queues on one.
            Admit::New(FollowupDelivery::Queued { .. }) => {
                Ok(delivered(run, p::SendOutputDelivery::Queued))
            }
            Admit::New(FollowupDelivery::Started) => {
                self.start_admitted(child, scope, child_lock, slots, run, message)
                    .await?;
                Ok(output)
            }
        }
    }

    /// Start the worker of a run just admitted on a child this broker claimed, holding
    /// its lock and slots. Whatever fails from here on settles the run `failed` with the
    /// reason, so nothing is left `running` without a worker and the child takes the
    /// next follow-up.
    pub(super) async fn start_admitted(
        self: &Arc<Self>,
        child: ChildId,
        scope: &WorkspaceScope,
        child_lock: ChildLock,
        slots: Vec<SlotGuard>,
        run: RunId,
        prompt: String,
    ) -> Result<(), BrokerError> {
        // Read after the claim: the leaf cannot move while this broker holds the lock.
        let leaf = match self.store.child(scope, child).await {
            Ok(row) => row.last_leaf.map(|l| (l.leaf_id, l.digest)),
            Err(e) => {
                let err = BrokerError::from(e);
                self.record_failed_start(child, run, &err).await;
                return Err(err);
            }
        };
        let from = StartFrom {
            leaf,
            recovery_notice: None,
        };
        self.start_worker(
            child,
            scope,
            child_lock,
            slots,
            FirstRun { run, prompt, from },
        )
        .await
    }

    /// The child's lock, waiting briefly ([`LOCK_HANDOVER`]) for this broker's own
    /// previous worker of the child to finish exiting; `busy`, naming the holders, when
    /// it is still held then. Taken before any write that depends on it.
    pub(super) async fn acquire_child_lock(
        &self,
        child: ChildId,
    ) -> Result<ChildLock, BrokerError> {
        let deadline = tokio::time::Instant::now() + LOCK_HANDOVER;
        loop {
            match ChildLock::try_acquire(&self.paths, child) {
                Ok(lock) => return Ok(lock),
                Err(e) if tokio::time::Instant::now() >= deadline => return Err(e.into()),
                Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
            }
        }
    }

    pub(super) async fn steer(
        &self,
        child: ChildId,
        scope: &WorkspaceScope,
        request_id: Option<&str>,
        message: String,
    ) -> Result<p::SendOutput, BrokerError> {
        // The core decides whether this child's run can be steered now: a ready child has
        // no run, an interrupted one none that lives, and a stopping one a run that is
        // ending (`not_running`); without the capability it is `unsupported_steer`.
        let decided = self.store.lifecycle(scope, child).await?;
        if let Some(id) = request_id
            && let Some(previous) = self.steer_receipt(child, id, &message)?
        {
            return Ok(previous);
        }
        let link = self
            .workers
            .live()
            .get(&child)
            .and_then(|l| l.worker.clone());
        let running_here = matches!(&decided, AnyChild::Active(ActiveChild::Running(_)));
        let steered = match &link {
            Some(link) => decided.steer(&link.capabilities),
            None if running_here => {
                return Err(BrokerError::new(
                    ErrorCode::Busy,
                    format!(
                        "child {child} is running under another broker; steer it from there or wait for the run to settle"
                    ),
                ));
            }
            None => decided.steer(&WorkerCapabilities::none()),
        };
        let active = steered.map_err(BrokerError::from)?;
        let Some(link) = link else {
            return Err(BrokerError::internal(format!(
                "the core let child {child} be steered without a worker"
            )));
        };
        let steer_id: p::SteerId = wire(format!("st_{}", ulid::Ulid::new()), STEER, "steerId")?;
        let control = p::BrokerMessage::Steer {
            message: wire(message.as_str(), STEER, "message")?,
            request_id: request_id
                .map(|id| wire(id, STEER, "requestId"))
                .transpose()?,
            run_id: active.into(),
            steer_id: steer_id.clone(),
        };
        link.tx
            .send(ToWorker::Control(Box::new(control)))
            .map_err(|_| {
                BrokerError::new(
                    ErrorCode::NotRunning,
                    format!("child {child}'s worker has just closed; read subzero_get"),
                )
            })?;
        let output = p::SendOutput {
            delivery: p::SendOutputDelivery::Steered,
            run_id: active.into(),
            steer_id: Some(steer_id),
            checkout: None,
            run: None,
        };
        if let Some(id) = request_id {
            self.remember_steer(child, id, &message, output.clone());
        }
        Ok(output)
    }

    /// Take a worker slot and, for a write-capable child, the writer slot.
    pub(super) fn take_slots(
        &self,
        scope: &WorkspaceScope,
        write_capable: bool,
    ) -> Result<Vec<SlotGuard>, BrokerError> {
        let mut slots = vec![try_take_slot(
            &self.paths,
            scope,
            SlotKind::Worker,
            self.workers.worker_slots,
        )?];
        if write_capable {
            slots.push(try_take_slot(
                &self.paths,
                scope,
                SlotKind::Writer,
                self.workers.writer_slots,
            )?);
        }
        Ok(slots)
    }

    /// The scope a child lives in, among those this broker answers for.
    pub(super) async fn child_scope(&self, child: ChildId) -> Result<WorkspaceScope, BrokerError> {
        for scope in self.scopes.all() {
            match self.store.child(&scope, child).await {
                Ok(row) => {
                    self.recover_if_orphaned(&scope, &row).await?;
                    return Ok(scope);
                }
                Err(e) if e.code() == ErrorCode::NotFound => continue,
                Err(e) => return Err(e.into()),
            }
        }
        Err(BrokerError::new(
            ErrorCode::NotFound,
            format!(
                "child {child} does not exist in this workspace; list children with subzero_list"
            ),
        ))
    }

    /// Resolve and freeze a template into the immutable grant snapshot, with its tool
    /// limits resolved now (template, else `[tool_limits]`, else shipped): a resume reuses
    /// them as frozen.
    pub(super) fn freeze(
        &self,
        template_id: &str,
        run_limits: RunLimits,
    ) -> Result<GrantSnapshot, BrokerError> {
        if let Some(problem) = self.policy.config_problem("templates", template_id) {
            return Err(BrokerError::new(
                problem.code,
                format!(
                    "template `{template_id}` is configured but broken, so this broker left it out: {}; fix the file and restart the MCP server (subzero doctor lists every problem); nothing was spawned",
                    problem.describe()
                ),
            ));
        }
        let (id, template): (TemplateId, _) = self.policy.templates.resolve(template_id)?;
        let base = self
            .policy
            .config_path()
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_default();
        let skills = template
            .skills
            .iter()
            .map(|s| load_skill(&base, &s.name, Path::new(&s.path)))
            .collect::<Result<Vec<_>, _>>()?;
        let tool_limits = self.policy.templates.tool_limits(&template);
        Ok(GrantSnapshot::freeze(
            id,
            &template,
            skills,
            run_limits,
            tool_limits,
            &self.policy.limits,
        )?)
    }

    /// A followup's `compact: true` on a child whose worker cannot compact is refused
    /// (`unsupported_grant`) before anything is queued or started.
    pub(super) async fn check_compact(&self, child: ChildId) -> Result<(), BrokerError> {
        let worker = self
            .workers
            .live()
            .get(&child)
            .map(|entry| super::engines::worker_of(&entry.snapshot));
        let Some(kind) = worker else {
            return Ok(());
        };
        let hello = self.hello_for(kind).await?;
        if hello.capabilities.as_ref().is_some_and(|c| !c.compaction) {
            return Err(BrokerError::new(
                ErrorCode::UnsupportedGrant,
                format!(
                    "unsupported_grant: child {child} runs on the {kind} worker, which does not compact a transcript; send without compact"
                ),
            ));
        }
        Ok(())
    }
}

pub(super) fn load_skill(base: &Path, name: &str, path: &Path) -> Result<Skill, BrokerError> {
    let full: PathBuf = if path.is_absolute() {
        path.to_path_buf()
    } else {
        base.join(path)
    };
    let content = std::fs::read_to_string(&full).map_err(|e| {
        BrokerError::new(
            ErrorCode::UnsupportedGrant,
            format!("skill `{name}` cannot be loaded from {}: {e}; fix the template, nothing was spawned", full.display()),
        )
    })?;
    Ok(Skill {
        name: name.to_owned(),
        content,
    })
}

pub(super) fn model_row(model: &ModelKey) -> ModelRow {
    ModelRow {
        url: model.url.clone(),
        model: model.model.clone(),
        api: model.api,
        credential_ref: model.credential_ref.clone(),
        context_window: model.context_window,
    }
}

/// The steer control message, as error messages name it.
pub(super) const STEER: &str = "steer message";

/// The `subzero_send` answer for a follow-up run.
pub(super) fn delivered(run: RunId, delivery: p::SendOutputDelivery) -> p::SendOutput {
    p::SendOutput {
        delivery,
        run_id: run.into(),
        steer_id: None,
        checkout: None,
        run: None,
    }
}

pub(super) fn interrupted(child: ChildId) -> BrokerError {
    BrokerError::new(
        ErrorCode::Interrupted,
        format!(
            "child {child} is interrupted; call subzero_resume with a model (and optionally a message) before sending more work"
        ),
    )
}

/// A spawn's `budget` as the core's request (absent fields take the defaults).
pub(super) fn budget_request(budget: Option<&p::RunBudget>) -> subzero_core::BudgetRequest {
    let Some(b) = budget else {
        return subzero_core::BudgetRequest::default();
    };
    subzero_core::BudgetRequest {
        max_turns: b.max_turns.as_ref().map(|v| v.get()),
        deadline_ms: b.deadline_ms.as_ref().map(|v| v.get()),
        tool_timeout_ms: b.tool_timeout_ms.as_ref().map(|v| v.get()),
        max_output_tokens: b.max_output_tokens.as_ref().map(|v| v.get()),
        token_budget: b.token_budget.as_ref().map(|v| v.get()),
    }
}

/// A frozen grant in its wire form, as a worker receives it.
pub(super) fn wire_grant(snapshot: &GrantSnapshot) -> Result<p::GrantSnapshot, BrokerError> {
    p::GrantSnapshot::try_from(snapshot).map_err(|e| {
        BrokerError::internal(format!(
            "the grant snapshot of template {} breaks the contract at {e}",
            snapshot.template_id().as_str()
        ))
    })
}
