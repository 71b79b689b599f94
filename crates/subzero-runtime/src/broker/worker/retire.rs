//! Retiring a worker before its child is recorded idle.
//!
//! The worker process holds the child's workspace slots (and, with its tools, the child
//! lock). Recording a run's end first and closing the worker after left a window in which a
//! caller saw the child `ready` (or the run terminal) while the exiting worker still held
//! the writer slot, so the next followup or spawn got `workspace_busy`. When nothing is
//! queued, the driver therefore retires the worker first — detaches it, closes its pipe,
//! waits for it and its tree to exit, clears the slot mirror — and records the settlement
//! after. A follow-up that was queued meanwhile (it saw the child still `running`) is
//! dispatched by that settlement and starts on a fresh worker.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use super::driver::Driver;
use super::{FirstRun, StartFrom};
use crate::broker::BrokerError;
use crate::store::NextRun;

/// How long a retiring worker may take to exit before its tree is killed.
const RETIRE_EXIT: Duration = Duration::from_secs(3);

impl Driver {
    /// Retire the worker when nothing else is waiting for it; returns whether it did.
    pub(super) async fn retire_if_idle(&mut self) -> bool {
        if !self.nothing_queued().await {
            return false;
        }
        {
            // Under the live lock, as `send` hands runs to a live worker under it: either a
            // run was handed over already (keep the worker) or no one can hand one now.
            let mut live = self.broker.workers.live();
            if !self.rx.is_empty() {
                return false;
            }
            if let Some(entry) = live.get_mut(&self.child) {
                entry.worker = None;
            }
        }
        self.conn.close();
        if !self.conn.wait_exit(RETIRE_EXIT).await {
            self.kill_leftovers(false).await;
        }
        let slots = std::mem::take(&mut self.slots);
        self.broker.unmirror(&self.scope, &slots).await;
        true
    }

    /// Whether the child's follow-up queue is empty (an unreadable queue counts as not
    /// empty: keeping the worker is the old, safe behaviour).
    async fn nothing_queued(&self) -> bool {
        match self.broker.store.queued_runs(&self.scope, self.child).await {
            Ok(queued) => queued.is_empty(),
            Err(e) => {
                tracing::warn!(child = %self.child, %e, "could not read the queue before retiring the worker");
                false
            }
        }
    }

    /// Start `next` (dispatched by the settlement just recorded) on a new worker, in a task
    /// of its own (this driver ends). When no worker can be had — the slot was taken
    /// meanwhile — the run fails with that reason, so nothing is left `running` without a
    /// worker.
    pub(super) fn restart_for(&mut self, next: NextRun) {
        let broker = std::sync::Arc::clone(&self.broker);
        let (child, scope) = (self.child, self.scope.clone());
        // Boxed as `dyn Send`: the new worker's driver runs this same code, and a future
        // that (indirectly) contains itself needs its type erased.
        let restart: Pin<Box<dyn Future<Output = ()> + Send>> = Box::pin(async move {
            let started: Result<(), BrokerError> = async {
                let row = broker.store.child(&scope, child).await?;
                let writes = broker.writes_workspace(child, row.write_capable).await?;
                let slots = broker.take_slots(&scope, writes)?;
                let child_lock = broker.acquire_child_lock(child).await?;
                let from = StartFrom {
                    leaf: row.last_leaf.map(|l| (l.leaf_id, l.digest)),
                    recovery_notice: None,
                };
                let first = FirstRun {
                    run: next.run_id,
                    prompt: next.prompt,
                    from,
                };
                broker
                    .start_worker(child, &scope, child_lock, slots, first)
                    .await
            }
            .await;
            if let Err(err) = started {
                // `start_worker` records its own failures (a second record is refused and
                // logged); this records the ones before it.
                broker.record_failed_start(child, next.run_id, &err).await;
            }
        });
        tokio::spawn(restart);
    }
}
