//! `subzero_stop` and the broker's clean shutdown.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use serde_json::json;
use subzero_core::{ChildId, RunId, RunStatus};
use subzero_protocol as p;

use super::live::ToWorker;
use super::{Broker, BrokerError, lock, typed};
use crate::scope::WorkspaceScope;

/// How long a clean shutdown waits for workers to confirm their stops.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

impl Broker {
    /// `subzero_stop`: a stale `expectedRunId` changes nothing; a matching one clears the
    /// queue and requests the stop at once. `confirmed` is true once the run has ended
    /// and every process of its worker tree is gone; `waitMs` waits (bounded) for that.
    pub async fn stop(self: &Arc<Self>, input: p::StopInput) -> Result<p::StopOutput, BrokerError> {
        let child = ChildId::parse(input.child_id.as_str())?;
        let expected = RunId::parse(input.expected_run_id.as_str())?;
        let wait = Duration::from_millis(u64::try_from(input.wait_ms_or_default()).unwrap_or(0));
        let scope = self.child_scope(child).await?;
        let begun = self
            .store
            .begin_stop(&scope, child, expected, self.owner_token())
            .await?;
        if !begun.already_requested {
            self.send_cancel(child, begun.run_id);
        }
        let status = self
            .wait_run_ended(&scope, child, begun.run_id, wait)
            .await?;
        typed(
            json!({
                "requested": true,
                "confirmed": status.is_terminal(),
                "runId": begun.run_id.to_string(),
                "status": status.as_str(),
            }),
            "stop",
        )
    }

    fn send_cancel(&self, child: ChildId, run: RunId) {
        let link = lock(&self.live).get(&child).and_then(|l| l.worker.clone());
        match link {
            Some(link) => {
                let cancel = json!({"type": "cancel", "runId": run.to_string()});
                if link.tx.send(ToWorker::Control(cancel)).is_err() {
                    tracing::warn!(%child, %run, "worker closed before the cancel reached it");
                }
            }
            None => {
                tracing::warn!(%child, %run, "stop requested for a child without a live worker in this broker")
            }
        }
    }

    /// Wait up to `wait` for `run` to reach a terminal status; returns its status then.
    async fn wait_run_ended(
        &self,
        scope: &WorkspaceScope,
        child: ChildId,
        run: RunId,
        wait: Duration,
    ) -> Result<RunStatus, BrokerError> {
        let deadline = tokio::time::Instant::now() + wait;
        let mut commits = self.store.commits();
        loop {
            commits.borrow_and_update();
            let status = self
                .store
                .runs(scope, child)
                .await?
                .into_iter()
                .find(|r| r.run_id == run)
                .map_or(RunStatus::StopRequested, |r| r.status);
            let now = tokio::time::Instant::now();
            if status.is_terminal() || now >= deadline {
                return Ok(status);
            }
            let nap = (deadline - now).min(self.store.options().poll_interval);
            let _ = tokio::time::timeout(nap, commits.changed()).await;
        }
    }

    /// Clean shutdown (stdin EOF or SIGTERM): refuse new work, stop every active run of
    /// this broker, clear queues, wait (bounded) for the workers to confirm, then close
    /// them. Whatever did not confirm is recorded as interrupted by its driver.
    pub async fn shutdown(&self) {
        self.begin_shutdown();
        let children: Vec<ChildId> = lock(&self.live)
            .iter()
            .filter(|(_, l)| l.worker.is_some())
            .map(|(c, _)| *c)
            .collect();
        for child in &children {
            let Ok(scope) = self.child_scope(*child).await else {
                continue;
            };
            let Ok(row) = self.store.child(&scope, *child).await else {
                continue;
            };
            if let Some(active) = row.active_run_id {
                match self
                    .store
                    .begin_stop(&scope, *child, active, self.owner_token())
                    .await
                {
                    Ok(begun) if !begun.already_requested => self.send_cancel(*child, begun.run_id),
                    Ok(_) => {}
                    Err(e) => tracing::warn!(%child, %e, "could not stop a run at shutdown"),
                }
            }
        }
        let deadline = tokio::time::Instant::now() + SHUTDOWN_GRACE;
        loop {
            let remaining = lock(&self.live)
                .values()
                .filter(|l| l.worker.is_some())
                .count();
            if remaining == 0 || tokio::time::Instant::now() >= deadline {
                break;
            }
            let _ =
                tokio::time::timeout(Duration::from_millis(50), self.worker_gone.notified()).await;
        }
        // Dropping the links closes the drivers' queues: each closes its worker's pipe,
        // which makes the worker cancel, kill its tree and exit.
        for live in lock(&self.live).values_mut() {
            live.worker = None;
        }
        let deadline = tokio::time::Instant::now() + Duration::from_secs(3);
        while self.drivers.load(Ordering::SeqCst) > 0 && tokio::time::Instant::now() < deadline {
            let _ =
                tokio::time::timeout(Duration::from_millis(50), self.worker_gone.notified()).await;
        }
        self.store.close();
    }

    pub(super) fn notify_settled(&self, _child: ChildId) {
        self.worker_gone.notify_waiters();
    }
}
