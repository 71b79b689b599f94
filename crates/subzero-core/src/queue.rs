//! The per-child follow-up queue: FIFO and bounded.
//!
//! Subzero owns this queue (the worker never keeps its own copy). A follow-up sent
//! while a run is active waits here; the child dispatches the head only after the
//! active run settled. The bound is a policy limit (`queued_followups`): a full queue
//! refuses with `limit_exceeded` rather than dropping anything.

use std::collections::VecDeque;

use crate::ids::RunId;
use crate::lifecycle::run::{Queued, Run};
use crate::limits::{LimitExceeded, LimitName};

/// A bounded FIFO of queued runs.
#[derive(Debug)]
pub struct FollowUpQueue {
    runs: VecDeque<Run<Queued>>,
    capacity: u32,
}

impl FollowUpQueue {
    /// An empty queue holding at most `capacity` runs.
    pub fn new(capacity: u32) -> Self {
        Self {
            runs: VecDeque::new(),
            capacity,
        }
    }

    /// Append at the tail; returns the 1-based position. A full queue gives the run back.
    pub fn push(&mut self, run: Run<Queued>) -> Result<usize, (Run<Queued>, LimitExceeded)> {
        let next = self.runs.len().saturating_add(1);
        if next > self.capacity as usize {
            let err = LimitExceeded {
                limit: LimitName::QueuedFollowups,
                max: u64::from(self.capacity),
                actual: next as u64,
                what: "queued follow-ups (with this one)",
            };
            return Err((run, err));
        }
        self.runs.push_back(run);
        Ok(next)
    }

    /// Remove the head, the oldest queued run.
    pub fn pop(&mut self) -> Option<Run<Queued>> {
        self.runs.pop_front()
    }

    /// Remove every queued run, oldest first.
    pub fn drain(&mut self) -> Vec<Run<Queued>> {
        self.runs.drain(..).collect()
    }

    /// Queued runs, oldest first.
    pub fn iter(&self) -> impl Iterator<Item = &Run<Queued>> {
        self.runs.iter()
    }

    /// Ids of the queued runs, oldest first.
    pub fn ids(&self) -> Vec<RunId> {
        self.runs.iter().map(Run::id).collect()
    }

    /// How many runs wait.
    pub fn len(&self) -> usize {
        self.runs.len()
    }

    /// Whether nothing waits.
    pub fn is_empty(&self) -> bool {
        self.runs.is_empty()
    }

    /// The bound.
    pub fn capacity(&self) -> u32 {
        self.capacity
    }

    /// Whether `run` waits here.
    pub fn contains(&self, run: RunId) -> bool {
        self.runs.iter().any(|r| r.id() == run)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::ChildId;

    fn queued(child: ChildId, n: u8) -> Run<Queued> {
        Run::queued(child, RunId::generate(), format!("prompt {n}"))
    }

    #[test]
    fn the_queue_is_fifo() {
        let child = ChildId::generate();
        let mut q = FollowUpQueue::new(4);
        let a = queued(child, 1);
        let b = queued(child, 2);
        let (ida, idb) = (a.id(), b.id());
        assert_eq!(q.push(a).ok(), Some(1));
        assert_eq!(q.push(b).ok(), Some(2));
        assert_eq!(q.pop().map(|r| r.id()), Some(ida));
        assert_eq!(q.pop().map(|r| r.id()), Some(idb));
        assert!(q.pop().is_none());
    }

    #[test]
    fn a_full_queue_refuses_and_gives_the_run_back() {
        let child = ChildId::generate();
        let mut q = FollowUpQueue::new(1);
        assert!(q.push(queued(child, 1)).is_ok());
        let extra = queued(child, 2);
        let id = extra.id();
        let (back, err) = q.push(extra).unwrap_err();
        assert_eq!(back.id(), id);
        assert_eq!(err.limit, LimitName::QueuedFollowups);
        assert_eq!(q.len(), 1);
    }
}
