//! Tasks of the MCP Tasks extension: the run a call started, handed to a client that
//! declared the extension instead of the call's answer.
//!
//! A task is its run (`subzero_core::task`): the store keeps the handle (the call, its
//! answer, when), and every read derives the status from the run. Once the run has ended
//! the task's result is the call's answer with the settled run (`run`, as `lastRun`
//! shows it) and, for an isolated child, its checkout as it is now. `cancel` is the
//! guarded stop of exactly that run, answered once the stop is confirmed.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use subzero_core::task::{POLL_INTERVAL_MS, TaskStatus};
use subzero_core::{ChildId, ErrorCode, RunId, RunStatus};
use subzero_protocol as p;

use super::wire::snapshot::settled_run;
use super::{Broker, BrokerError, Context};
use crate::store::{RunRow, TASK_TOOLS, TaskRow};

/// How long a cancel waits for the worker to confirm the stop before it fails.
const CANCEL_CONFIRM: Duration = Duration::from_secs(60);

/// An answer that may have started a run: the calls that can hand out a task.
pub trait StartsRun: serde::Serialize {
    /// The run the call started, if it started one (a steer or a resume without a
    /// message starts none).
    fn started_run(&self) -> Option<RunId>;
}

impl StartsRun for p::SpawnOutput {
    fn started_run(&self) -> Option<RunId> {
        RunId::parse(self.run_id.as_str()).ok()
    }
}

impl StartsRun for p::SendOutput {
    fn started_run(&self) -> Option<RunId> {
        match self.delivery {
            p::SendOutputDelivery::Steered => None,
            p::SendOutputDelivery::Queued | p::SendOutputDelivery::Started => {
                RunId::parse(self.run_id.as_str()).ok()
            }
        }
    }
}

impl StartsRun for p::ResumeOutput {
    fn started_run(&self) -> Option<RunId> {
        RunId::parse(self.run_id.as_ref()?.as_str()).ok()
    }
}

/// A task as a client reads it (the MCP layer puts it in the extension's shape).
#[derive(Clone, Debug, PartialEq)]
pub struct TaskView {
    /// The task's id: its run's.
    pub task_id: String,
    /// Its status.
    pub status: TaskStatus,
    /// What it is doing or how it ended, in a line.
    pub status_message: String,
    /// When the handle was given (RFC 3339).
    pub created_at: String,
    /// When its run last changed (RFC 3339).
    pub last_updated_at: String,
    /// How long it is kept from `created_at`.
    pub ttl_ms: u64,
    /// How often to poll it.
    pub poll_interval_ms: u64,
    /// Once it completed: the call's answer with the settled run (structured content).
    pub result: Option<Value>,
}

impl Broker {
    /// Keeps the task for the run `answer` started (by `tool`) and returns it.
    pub async fn open_task<T: StartsRun>(
        &self,
        tool: &'static str,
        answer: &T,
    ) -> Result<Option<TaskView>, BrokerError> {
        let Some(run) = answer.started_run() else {
            return Ok(None);
        };
        if !TASK_TOOLS.contains(&tool) {
            return Err(BrokerError::internal(format!("{tool} hands out no task")));
        }
        let answer = serde_json::to_string(answer)
            .map_err(|e| BrokerError::internal(format!("could not encode the answer: {e}")))?;
        let child = self.run_child(run).await?;
        let scope = self.child_scope(child).await?;
        let row = self.store.open_task(&scope, run, tool, answer).await?;
        self.view(row).await.map(Some)
    }

    /// The task `task_id` as it is now (`not_found` for an id this broker's scopes never
    /// handed out, or one that expired).
    pub async fn task(&self, task_id: &str) -> Result<TaskView, BrokerError> {
        let row = self.task_row(task_id).await?;
        self.view(row).await
    }

    /// Cancels task `task_id`: the guarded stop of its run, answered once the worker
    /// confirmed it (its process tree gone). A task that already ended is left as it
    /// ended; a queued run cannot be stopped alone.
    pub async fn cancel_task(self: &Arc<Self>, task_id: &str) -> Result<(), BrokerError> {
        let row = self.task_row(task_id).await?;
        if row.run_status.is_terminal() {
            return Ok(());
        }
        if row.run_status == RunStatus::Queued {
            return Err(BrokerError::new(
                ErrorCode::NotRunning,
                format!(
                    "task {task_id}'s run is queued behind the active run of child {} and has not started; a queued run is not stopped alone: cancel the active run's task (or subzero_stop it), which also clears the queue",
                    row.child_id
                ),
            ));
        }
        let stop = p::StopInput {
            child_id: row.child_id.into(),
            expected_run_id: row.run_id.into(),
            wait_ms: Some(p::WaitMs(30_000)),
        };
        let stopped = match self.execute(stop, Context::default()).await {
            Ok(stopped) => stopped.confirmed,
            // The run ended between the read and the stop: the task is left as it ended.
            Err(e) if matches!(e.code(), ErrorCode::NotRunning | ErrorCode::StaleRun) => {
                if self.task_row(task_id).await?.run_status.is_terminal() {
                    return Ok(());
                }
                return Err(e);
            }
            Err(e) => return Err(e),
        };
        if stopped {
            return Ok(());
        }
        let scope = self.child_scope(row.child_id).await?;
        let status = self
            .wait_run_ended(&scope, row.child_id, row.run_id, CANCEL_CONFIRM)
            .await?;
        if status.is_terminal() {
            return Ok(());
        }
        Err(BrokerError::internal(format!(
            "the stop of task {task_id}'s run was requested but its worker did not confirm it within {} s; tasks/get shows when it ends",
            (CANCEL_CONFIRM + Duration::from_secs(30)).as_secs()
        )))
    }

    /// The child run `run` belongs to.
    async fn run_child(&self, run: RunId) -> Result<ChildId, BrokerError> {
        self.store
            .run_child(run)
            .await?
            .ok_or_else(|| BrokerError::internal(format!("run {run} has no child")))
    }

    /// The kept task `task_id` of a child in this broker's scopes.
    async fn task_row(&self, task_id: &str) -> Result<TaskRow, BrokerError> {
        let unknown = || {
            BrokerError::new(
                ErrorCode::NotFound,
                format!("no task {task_id} in the workspaces this broker answers for"),
            )
        };
        let run = RunId::parse(task_id).map_err(|_| unknown())?;
        let row = self.store.task(run).await?.ok_or_else(unknown)?;
        self.child_scope(row.child_id)
            .await
            .map_err(|e| match e.code() {
                ErrorCode::NotFound => unknown(),
                _ => e,
            })?;
        if row.clock.expired() {
            self.store.forget_task(run).await?;
            return Err(BrokerError::new(
                ErrorCode::NotFound,
                format!(
                    "task {task_id} expired a day after its run ended; the run's result is still in subzero_get of child {}",
                    row.child_id
                ),
            ));
        }
        Ok(row)
    }

    /// The task as a client reads it.
    async fn view(&self, row: TaskRow) -> Result<TaskView, BrokerError> {
        let status = row.status();
        let (status_message, result) = match status {
            TaskStatus::Working => (
                format!(
                    "child {} works on run {} ({})",
                    row.child_id, row.run_id, row.run_status
                ),
                None,
            ),
            TaskStatus::Cancelled => (
                format!("run {} of child {} was stopped", row.run_id, row.child_id),
                None,
            ),
            TaskStatus::Completed => (
                format!(
                    "run {} of child {} {}",
                    row.run_id, row.child_id, row.run_status
                ),
                Some(self.settled_answer(&row).await?),
            ),
        };
        Ok(TaskView {
            task_id: row.run_id.to_string(),
            status,
            status_message,
            created_at: row.created_at.to_string(),
            last_updated_at: row.last_updated_at.to_string(),
            ttl_ms: row.clock.ttl_ms(),
            poll_interval_ms: POLL_INTERVAL_MS,
            result,
        })
    }

    /// The call's kept answer with its settled run and the child's checkout as it is now.
    async fn settled_answer(&self, row: &TaskRow) -> Result<Value, BrokerError> {
        let scope = self.child_scope(row.child_id).await?;
        let runs = self.store.runs(&scope, row.child_id).await?;
        let run: &RunRow = runs
            .iter()
            .find(|r| r.run_id == row.run_id)
            .ok_or_else(|| BrokerError::internal(format!("run {} is gone", row.run_id)))?;
        let preview = usize::try_from(p::defaults::PREVIEW_LIMIT).unwrap_or(1024);
        let settled = Some(settled_run(run, preview)?);
        let checkout = self.checkout_view(row.child_id).await?;
        let kept = |e: serde_json::Error| {
            BrokerError::internal(format!(
                "task {}'s kept answer is unreadable: {e}",
                row.run_id
            ))
        };
        let answer = match row.call.as_str() {
            "subzero_spawn" => {
                let mut out: p::SpawnOutput = serde_json::from_str(&row.answer).map_err(kept)?;
                out.run = settled;
                out.checkout = checkout.or(out.checkout);
                serde_json::to_value(out)
            }
            "subzero_send" => {
                let mut out: p::SendOutput = serde_json::from_str(&row.answer).map_err(kept)?;
                out.run = settled;
                out.checkout = checkout;
                serde_json::to_value(out)
            }
            _ => {
                let mut out: p::ResumeOutput = serde_json::from_str(&row.answer).map_err(kept)?;
                out.run = settled;
                out.checkout = checkout;
                serde_json::to_value(out)
            }
        };
        answer.map_err(|e| BrokerError::internal(format!("could not encode the result: {e}")))
    }
}
