//! `subzero_stop` and the broker's clean shutdown.

use std::collections::HashSet;
use std::time::Duration;

use subzero_core::{ChildId, RunId, RunStatus};
use subzero_protocol as p;

use super::live::ToWorker;
use super::{Broker, BrokerError};
use crate::scope::WorkspaceScope;

/// How long a clean shutdown waits for workers to confirm their stops.
pub(super) const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);
/// How long the drivers of workers that did not confirm get, once closed, to record
/// their runs as interrupted.
pub(super) const CLOSE_GRACE: Duration = Duration::from_secs(3);
/// How often a shutdown looks for workers started after it began.
pub(super) const LINK_RESCAN: Duration = Duration::from_millis(50);

impl Broker {
    pub(super) fn send_cancel(&self, child: ChildId, run: RunId) {
        let link = self
            .workers
            .live()
            .get(&child)
            .and_then(|l| l.worker.clone());
        match link {
            Some(link) => {
                let cancel = p::BrokerMessage::Cancel { run_id: run.into() };
                if link.tx.send(ToWorker::Control(Box::new(cancel))).is_err() {
                    tracing::warn!(%child, %run, "worker closed before the cancel reached it");
                }
            }
            None => {
                tracing::warn!(%child, %run, "stop requested for a child without a live worker in this broker")
            }
        }
    }

    /// Wait up to `wait` for `run` to reach a terminal status; returns its status then.
    pub(super) async fn wait_run_ended(
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

    /// Clean shutdown (stdin EOF or a signal): refuse new work, stop every active run of
    /// this broker at once, clear queues, wait (bounded) until every worker has confirmed
    /// its stop — its tool tree killed and reaped — had it recorded and exited, then
    /// close the store. A worker that does not confirm in time is closed; its driver
    /// records the run as interrupted. Returns once nothing of this broker runs.
    pub async fn shutdown(&self) {
        let started = tokio::time::Instant::now();
        self.begin_shutdown();
        let mut asked = HashSet::new();
        let confirmed = self
            .wait_for_drivers(started + SHUTDOWN_GRACE, Some(&mut asked))
            .await;
        if !confirmed {
            // Dropping the links closes the drivers' queues: each closes its worker's
            // pipe, which makes the worker cancel, kill its tree and exit.
            for live in self.workers.live().values_mut() {
                live.worker = None;
            }
            let closed = tokio::time::Instant::now() + CLOSE_GRACE;
            if !self.wait_for_drivers(closed, None).await {
                tracing::warn!(
                    drivers = self.workers.drivers_running(),
                    "workers still running at shutdown; their runs are recovered by the next broker"
                );
            }
        }
        self.store.close();
        tracing::info!(
            workers = asked.len(),
            confirmed,
            ms = started.elapsed().as_millis() as u64,
            "shutdown recorded"
        );
    }

    /// Wait until no worker driver runs or `deadline` passes; true if none runs. With
    /// `stop`, every child that has a worker gets its active run stopped first, and so
    /// does any worker that starts meanwhile (an admission that was already under way).
    pub(super) async fn wait_for_drivers(
        &self,
        deadline: tokio::time::Instant,
        mut stop: Option<&mut HashSet<ChildId>>,
    ) -> bool {
        loop {
            // Armed before looking, so a driver that ends in between still wakes us.
            let gone = self.workers.driver_gone();
            tokio::pin!(gone);
            gone.as_mut().enable();
            if let Some(asked) = stop.as_deref_mut() {
                self.stop_new_workers(asked).await;
            }
            if self.workers.drivers_running() == 0 {
                return true;
            }
            let now = tokio::time::Instant::now();
            if now >= deadline {
                return false;
            }
            let _ = tokio::time::timeout_at(deadline.min(now + LINK_RESCAN), gone).await;
        }
    }

    /// Request the stop of the active run of every child with a worker that is not in
    /// `asked` yet, all at once: each worker starts tearing its tree down as soon as its
    /// own stop is recorded, not after the others'.
    pub(super) async fn stop_new_workers(&self, asked: &mut HashSet<ChildId>) {
        let new: Vec<ChildId> = self
            .workers
            .live()
            .iter()
            .filter(|(child, live)| live.worker.is_some() && !asked.contains(*child))
            .map(|(child, _)| *child)
            .collect();
        asked.extend(new.iter().copied());
        futures::future::join_all(new.into_iter().map(|child| self.stop_at_shutdown(child))).await;
    }

    pub(super) async fn stop_at_shutdown(&self, child: ChildId) {
        let scope = match self.child_scope(child).await {
            Ok(scope) => scope,
            Err(e) => {
                tracing::warn!(%child, %e, "could not find a child at shutdown");
                return;
            }
        };
        let active = match self.store.child(&scope, child).await {
            Ok(row) => row.active_run_id,
            Err(e) => {
                tracing::warn!(%child, %e, "could not read a child at shutdown");
                return;
            }
        };
        let Some(active) = active else { return };
        match self
            .store
            .begin_stop(&scope, child, active, self.owner_token())
            .await
        {
            Ok(begun) if !begun.already_requested => self.send_cancel(child, begun.run_id),
            Ok(_) => {}
            Err(e) => tracing::warn!(%child, %e, "could not stop a run at shutdown"),
        }
    }
}
