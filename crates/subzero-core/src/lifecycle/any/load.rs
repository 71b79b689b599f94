//! A child as stored: the plain record, the one checked way in ([`AnyChild::load`])
//! and the way out ([`AnyChild::record`]).

use std::collections::HashSet;

use serde::{Deserialize, Serialize};

use super::{ActiveChild, AnyChild};
use crate::ids::{ChildId, RunId};
use crate::lifecycle::child;
use crate::lifecycle::error::LoadError;
use crate::lifecycle::proof::LeafRef;
use crate::lifecycle::run::{self, Run};
use crate::lifecycle::storage::StorageKey;
use crate::queue::FollowUpQueue;
use crate::state::{ChildState, RunStatus};

/// A child as stored: plain data, checked by [`AnyChild::load`] (which needs the store's
/// key; a record alone materialises nothing).
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ChildRecord {
    /// The child's id.
    pub id: ChildId,
    /// Its state.
    pub state: ChildState,
    /// The active run (running or stop_requested); only for a running child.
    pub active_run: Option<ActiveRunRecord>,
    /// Queued follow-ups, oldest first; only behind an active run.
    #[serde(default)]
    pub queued: Vec<QueuedRunRecord>,
    /// The last completed transcript leaf.
    pub last_leaf: Option<LeafRef>,
    /// The run that was active when the child was interrupted.
    pub interrupted_run: Option<RunId>,
    /// Why the child was interrupted.
    pub interruption_reason: Option<String>,
    /// The follow-up queue bound in force for this child.
    pub queue_capacity: u32,
}

/// The active run of a stored running child.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ActiveRunRecord {
    /// The run's id.
    pub id: RunId,
    /// `running` or `stop_requested`.
    pub status: RunStatus,
}

/// A stored queued follow-up.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct QueuedRunRecord {
    /// The run's id.
    pub id: RunId,
    /// The prompt it will run with.
    pub prompt: String,
}

fn load_error(id: ChildId, reason: impl Into<String>) -> LoadError {
    LoadError {
        subject: id.to_string(),
        reason: reason.into(),
    }
}

impl AnyChild {
    /// The one checked way from stored data to a child, with the store's key. Refuses
    /// (with `internal`) any record that describes no legal state: an active run on a
    /// ready child, a queue without an active run, duplicate run ids, a queue over its
    /// bound, an active run whose status is not `running`/`stop_requested`, …
    pub fn load(record: ChildRecord, _key: &StorageKey) -> Result<AnyChild, LoadError> {
        let ChildRecord {
            id,
            state,
            active_run,
            queued,
            last_leaf,
            interrupted_run,
            interruption_reason,
            queue_capacity,
        } = record;
        let shell = child::restore::ready(id, queue_capacity, last_leaf);
        if state != ChildState::Running {
            if let Some(active) = active_run {
                return Err(load_error(
                    id,
                    format!("a {state} child has an active run {}", active.id),
                ));
            }
            if !queued.is_empty() {
                return Err(load_error(
                    id,
                    format!("a {state} child has {} queued runs", queued.len()),
                ));
            }
        }
        if state != ChildState::Interrupted
            && (interrupted_run.is_some() || interruption_reason.is_some())
        {
            return Err(load_error(
                id,
                format!("a {state} child carries interruption data"),
            ));
        }
        match state {
            ChildState::Ready => Ok(AnyChild::Ready(shell)),
            ChildState::Interrupted => Ok(AnyChild::Interrupted(child::restore::interrupted(
                shell,
                interrupted_run,
                interruption_reason.unwrap_or_default(),
            ))),
            ChildState::Running => {
                let Some(active) = active_run else {
                    return Err(load_error(id, "a running child has no active run"));
                };
                let queue = load_queue(id, active.id, queued, queue_capacity)?;
                let child = match active.status {
                    RunStatus::Running => ActiveChild::Running(child::restore::running(
                        shell,
                        run::restore::running(id, active.id),
                        queue,
                    )),
                    RunStatus::StopRequested => ActiveChild::Stopping(child::restore::running(
                        shell,
                        run::restore::stop_requested(id, active.id),
                        queue,
                    )),
                    other => {
                        return Err(load_error(
                            id,
                            format!("the active run {} is {other}", active.id),
                        ));
                    }
                };
                Ok(AnyChild::Active(child))
            }
        }
    }

    /// The plain data to store; [`AnyChild::load`] of it gives the same child back.
    pub fn record(&self) -> ChildRecord {
        let active_run = self
            .active_run()
            .map(|(id, status)| ActiveRunRecord { id, status });
        let (interrupted_run, interruption_reason) = match self {
            AnyChild::Interrupted(c) => (c.interrupted_run(), Some(c.reason().to_owned())),
            AnyChild::Ready(_) | AnyChild::Active(_) => (None, None),
        };
        ChildRecord {
            id: self.id(),
            state: self.state(),
            active_run,
            queued: self.queue().map_or_else(Vec::new, queued_records),
            last_leaf: self.last_leaf().cloned(),
            interrupted_run,
            interruption_reason,
            queue_capacity: self.queue_capacity(),
        }
    }
}

fn queued_records(queue: &FollowUpQueue) -> Vec<QueuedRunRecord> {
    queue
        .iter()
        .map(|r| QueuedRunRecord {
            id: r.id(),
            prompt: r.prompt().to_owned(),
        })
        .collect()
}

fn load_queue(
    id: ChildId,
    active: RunId,
    queued: Vec<QueuedRunRecord>,
    capacity: u32,
) -> Result<FollowUpQueue, LoadError> {
    let mut seen = HashSet::from([active]);
    let mut queue = FollowUpQueue::new(capacity);
    for q in queued {
        if !seen.insert(q.id) {
            return Err(load_error(id, format!("run {} appears twice", q.id)));
        }
        if let Err((run, _)) = queue.push(Run::queued(id, q.id, q.prompt)) {
            return Err(load_error(
                id,
                format!("run {} exceeds the queue bound of {capacity}", run.id()),
            ));
        }
    }
    Ok(queue)
}
