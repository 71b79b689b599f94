//! The driver of one live worker: it sends the runs, records what the worker reports,
//! settles each run and closes the worker when nothing is queued.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use subzero_core::lifecycle::Activity;
use subzero_core::{ChildId, RunId};
use subzero_protocol::{self as p, RunSettledStatus, WorkerEvent, WorkerMessage};
use tokio::sync::mpsc;

use crate::broker::Broker;
use crate::broker::live::ToWorker;
use crate::broker::wire::events;
use crate::locks::{self, SlotKind};
use crate::scope::WorkspaceScope;
use crate::supervisor::{WorkerConn, cgroup, reap};

use super::phase::{ActiveRun, Phase, completed, exhausted, failed, run_usage};
use super::settle::Ended;
use super::start::StartFrom;

pub(super) struct Driver {
    pub(super) broker: Arc<Broker>,
    pub(super) child: ChildId,
    pub(super) scope: WorkspaceScope,
    pub(super) conn: WorkerConn,
    pub(super) rx: mpsc::UnboundedReceiver<ToWorker>,
    pub(super) slots: Vec<(SlotKind, u32)>,
    pub(super) lock_path: PathBuf,
    /// What the worker is doing, with what that phase has.
    pub(super) phase: Phase,
}

/// What the driver loop decided.
enum Next {
    Continue,
    Close,
    Lost(String),
}

impl Driver {
    pub(super) async fn run(mut self, mut from: StartFrom) {
        loop {
            let next = tokio::select! {
                message = self.rx.recv() => match message {
                    Some(m) => self.handle_command(m, &mut from).await,
                    // The broker dropped the link (shutdown). A run still active has not
                    // confirmed its stop: closing the pipe ends it, and it is recorded as
                    // interrupted, not stopped.
                    None if !self.idle() => {
                        Next::Lost("the broker shut down before the run settled".into())
                    }
                    None => Next::Close,
                },
                line = self.conn.recv() => match line {
                    Some(Ok(message)) => self.handle_report(message).await,
                    Some(Err(bad)) => Next::Lost(format!("the worker broke the control protocol: {bad}")),
                    None => Next::Lost("the worker exited unexpectedly".into()),
                },
            };
            match next {
                // A close refused for a pending message (a steer or a cancel that reached
                // the driver as its run ended) is tried again once that message is passed
                // on, or the worker of an idle child would live on until the broker exits.
                Next::Continue if matches!(self.phase, Phase::Idle { closing: true }) => {
                    if self.try_close() {
                        break;
                    }
                }
                Next::Continue => {}
                Next::Close => {
                    if self.try_close() {
                        break;
                    }
                    self.phase = Phase::Idle { closing: true };
                }
                Next::Lost(reason) => {
                    self.lost(&reason).await;
                    break;
                }
            }
        }
        self.finish().await;
    }

    async fn handle_command(&mut self, message: ToWorker, from: &mut StartFrom) -> Next {
        match message {
            ToWorker::Control(message) => match self.conn.send(*message).await {
                Ok(()) => Next::Continue,
                Err(e) => Next::Lost(format!("the worker's control pipe failed: {e}")),
            },
            ToWorker::Start { run, prompt } => {
                let start = std::mem::take(from);
                let built =
                    self.broker
                        .start_run_message(self.child, &self.scope, run, &prompt, &start);
                let message = match built {
                    Ok(m) => m,
                    Err(err) => {
                        self.settle(
                            ActiveRun::new(run),
                            Ended::Failed {
                                code: err.code(),
                                message: err.message().to_owned(),
                                partial: None,
                                artifact: None,
                            },
                        )
                        .await;
                        return Next::Close;
                    }
                };
                self.phase = Phase::Running(ActiveRun::new(run));
                match self.conn.send(message).await {
                    Ok(()) => Next::Continue,
                    Err(e) => Next::Lost(format!("the worker's control pipe failed: {e}")),
                }
            }
        }
    }

    async fn handle_report(&mut self, message: WorkerMessage) -> Next {
        self.keep_error_details(&message);
        match message {
            WorkerMessage::Hello { .. } => Next::Continue,
            WorkerMessage::Event { run_id, event } => {
                if let Some(run) = self.our_run(run_id.as_str()).map(|a| a.run) {
                    self.record_event(run, event).await;
                }
                Next::Continue
            }
            WorkerMessage::LeafCommitted {
                run_id,
                leaf_id,
                digest,
            } => {
                if let Some(active) = self.our_run(run_id.as_str()) {
                    active.leaf = Some((leaf_id.to_string(), digest.to_string()));
                }
                Next::Continue
            }
            WorkerMessage::RunSettled {
                run_id,
                status,
                result,
                error,
                budget,
                cut,
                usage,
            } => {
                if self.our_run(run_id.as_str()).is_none() {
                    return Next::Continue;
                }
                let (Phase::Running(mut active) | Phase::Stopped(mut active)) =
                    std::mem::replace(&mut self.phase, Phase::Idle { closing: false })
                else {
                    return Next::Continue;
                };
                active.usage = Some(run_usage(&usage, status, cut.as_ref()));
                let ended = match status {
                    RunSettledStatus::Completed => {
                        completed(&mut active, result.unwrap_or_default(), None)
                    }
                    RunSettledStatus::BudgetExhausted => {
                        exhausted(&mut active, result, budget.as_ref())
                    }
                    RunSettledStatus::Failed => failed(result, error.as_ref()),
                    RunSettledStatus::Stopped => {
                        // `stopped` is recorded only with the cancel confirmation that follows.
                        self.phase = Phase::Stopped(active);
                        return Next::Continue;
                    }
                };
                self.settle_and_dispatch(active, ended).await
            }
            WorkerMessage::CancelConfirmed { run_id, reaped } => {
                let Ok(run) = RunId::parse(run_id.as_str()) else {
                    return Next::Continue;
                };
                match std::mem::replace(&mut self.phase, Phase::Idle { closing: false }) {
                    Phase::Stopped(active) if active.run == run => {
                        let reaped = u32::try_from(reaped).unwrap_or(u32::MAX);
                        self.settle_and_dispatch(active, Ended::Stopped { reaped })
                            .await
                    }
                    other => {
                        self.phase = other;
                        Next::Continue
                    }
                }
            }
        }
    }

    /// Keep the `details` of the error in the active run's `run_settled` (an HTTP
    /// failure's `status`, a limit's name, a refused redirect's origin) for its settlement.
    fn keep_error_details(&mut self, message: &WorkerMessage) {
        if let WorkerMessage::RunSettled {
            run_id,
            error: Some(body),
            ..
        } = message
            && !body.details.is_empty()
            && let Some(active) = self.our_run(run_id.as_str())
        {
            active.error_details = Some(body.details.clone());
        }
    }

    /// The active run, when `text` names it.
    fn our_run(&mut self, text: &str) -> Option<&mut ActiveRun> {
        let run = RunId::parse(text).ok()?;
        self.phase.active().filter(|active| active.run == run)
    }

    async fn record_event(&mut self, run: RunId, event: WorkerEvent) {
        let store = &self.broker.store;
        let token = self.broker.owner_token();
        let activity = match &event {
            WorkerEvent::TurnStarted { .. } => {
                self.report(Activity::Model).await;
                return;
            }
            WorkerEvent::Text { .. } => Some(Activity::Model),
            WorkerEvent::Tool {
                state: p::ToolState::Started,
                ..
            } => Some(Activity::Tool),
            WorkerEvent::Tool { .. } => Some(Activity::Model),
            WorkerEvent::SteerApplied { .. }
            | WorkerEvent::SteerDiscarded { .. }
            | WorkerEvent::NetworkRefused { .. } => None,
            WorkerEvent::Compacted {
                branch_from,
                tokens_after,
                tokens_before,
            } => {
                // Mint point: this is the worker's parsed `compacted` line for `run`, the
                // run it works on; the tokens and the branch left behind are from that line.
                let report = self.broker.supervisor.compaction_reported(
                    self.child,
                    run,
                    (*tokens_before, *tokens_after),
                    branch_from.to_string(),
                );
                if let Err(e) = store.record_compaction(self.child, token, report).await {
                    tracing::warn!(child = %self.child, %run, %e, "could not record a compaction");
                }
                return;
            }
        };
        if let Some(body) = events::recorded(run, &event)
            && let Err(e) = store.append_event(self.child, token, body).await
        {
            tracing::warn!(child = %self.child, %run, %e, "could not record a worker event");
        }
        if let Some(activity) = activity {
            self.report(activity).await;
        }
    }

    /// Tell the store what the worker does now, when it changed; the core decides the
    /// phase it shows.
    async fn report(&mut self, activity: Activity) {
        let Some(active) = self.phase.active() else {
            return;
        };
        if active.activity == Some(activity) {
            return;
        }
        let token = self.broker.owner_token();
        match self
            .broker
            .store
            .report_activity(self.child, token, activity)
            .await
        {
            Ok(()) => {
                if let Some(active) = self.phase.active() {
                    active.activity = Some(activity);
                }
            }
            Err(e) => tracing::debug!(child = %self.child, %e, "worker activity not recorded"),
        }
    }

    async fn settle_and_dispatch(&mut self, active: ActiveRun, ended: Ended) -> Next {
        // A settlement that leaves the child idle is recorded only once this worker is gone
        // with its tree and locks: a caller that reads `ready` may start the next run at once.
        let retired = self.retire_if_idle().await;
        if retired {
            // Nothing of the child runs now: what its checkout holds is its change, recorded
            // before the child reads `ready`.
            self.record_checkout().await;
        }
        let Some(settled) = self.settle(active, ended).await else {
            return Next::Close;
        };
        match settled.next {
            // A follow-up queued while the worker was retiring: it starts on a new worker.
            Some(next) if retired => {
                self.restart_for(next);
                Next::Close
            }
            Some(next) => {
                let mut from = StartFrom::default();
                match self.broker.store.child(&self.scope, self.child).await {
                    Ok(row) => {
                        from.leaf = row.last_leaf.map(|l| (l.leaf_id, l.digest));
                    }
                    Err(e) => tracing::warn!(%e, "could not read the leaf to continue from"),
                }
                self.handle_command(
                    ToWorker::Start {
                        run: next.run_id,
                        prompt: next.prompt,
                    },
                    &mut from,
                )
                .await
            }
            None => Next::Close,
        }
    }

    /// Record the change an isolated child's checkout holds (its worker's tree is gone).
    /// A child whose runs work in the workspace has nothing to record: no store read.
    async fn record_checkout(&self) {
        let isolated = (self.broker.workers.live().get(&self.child))
            .is_some_and(|entry| entry.workdir.is_some());
        if !isolated {
            return;
        }
        if let Err(e) = self.broker.settle_checkout(&self.scope, self.child).await {
            tracing::warn!(child = %self.child, error = %e.message(), "the checkout's change was not recorded; subzero_apply records it");
        }
    }

    /// No run is active and no stop awaits its confirmation.
    fn idle(&self) -> bool {
        matches!(self.phase, Phase::Idle { .. })
    }

    /// Close unless a run was handed to this worker in the meantime. Removing the link
    /// under the live lock makes the choice race-free with `send`.
    fn try_close(&mut self) -> bool {
        let mut live = self.broker.workers.live();
        if !self.rx.is_empty() || !self.idle() {
            return false;
        }
        if let Some(entry) = live.get_mut(&self.child) {
            entry.worker = None;
        }
        true
    }

    /// The worker died or broke the protocol mid-run: end its tree and record the run
    /// as interrupted. Nothing is retried.
    async fn lost(&mut self, reason: &str) {
        {
            let mut live = self.broker.workers.live();
            if let Some(entry) = live.get_mut(&self.child) {
                entry.worker = None;
            }
        }
        tracing::warn!(child = %self.child, reason, "worker lost");
        self.conn.close();
        let exited = self.conn.wait_exit(Duration::from_millis(500)).await;
        let tree_gone = self.kill_leftovers(exited).await;
        if tree_gone {
            self.record_checkout().await;
        }
        if let Phase::Running(active) | Phase::Stopped(active) =
            std::mem::replace(&mut self.phase, Phase::Idle { closing: false })
        {
            self.settle(
                active,
                Ended::Interrupted {
                    reason: reason.to_owned(),
                    tree_gone,
                },
            )
            .await;
        }
    }

    /// Kill whatever of the worker's tree is left (the worker itself if it did not exit,
    /// every process still holding the child lock, orphans of the tree re-parented to the
    /// broker, and — on the cgroup path — everything still in the worker's cgroup).
    /// Returns whether the lock is free.
    pub(super) async fn kill_leftovers(&mut self, worker_exited: bool) -> bool {
        let mut pids: BTreeSet<i32> = locks::holders(&self.lock_path)
            .iter()
            .filter_map(|h| i32::try_from(h.pid).ok())
            .collect();
        let table = reap::process_table();
        pids.extend(reap::descendants(&table, self.conn.pid()));
        // Tool processes that left the worker's subtree are still in its limit cgroups, or
        // (the worker dead) orphans re-parented to this broker.
        pids.extend(self.conn.limit_cgroup_members());
        if worker_exited {
            pids.extend(crate::supervisor::strays());
        }
        let mut not_mine = BTreeSet::new();
        if !worker_exited {
            pids.insert(self.conn.pid());
            not_mine.insert(self.conn.pid());
        }
        pids.remove(&(std::process::id() as i32));
        reap::terminate(&pids, &not_mine, Duration::from_millis(200)).await;
        if let Some(dir) = self.conn.cgroup() {
            match cgroup::kill(dir, Duration::from_secs(1)).await {
                Ok(true) => {}
                Ok(false) => {
                    tracing::warn!(child = %self.child, cgroup = %dir.display(), "the worker's cgroup did not empty within 1 s")
                }
                Err(err) => {
                    tracing::warn!(child = %self.child, cgroup = %dir.display(), %err, "cannot kill the worker's cgroup")
                }
            }
        }
        if !worker_exited {
            self.conn.wait_exit(Duration::from_secs(1)).await;
        }
        locks::is_free(&self.lock_path).unwrap_or(false)
    }

    async fn finish(mut self) {
        self.conn.close();
        if !self.conn.wait_exit(Duration::from_secs(3)).await {
            self.kill_leftovers(false).await;
        }
        self.broker.unmirror(&self.scope, &self.slots).await;
        self.broker.workers.driver_finished();
    }
}
