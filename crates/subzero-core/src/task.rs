//! A task of the MCP Tasks extension is a view of one run.
//!
//! The call that starts a run (a spawn, a followup, a resume with a message) may answer a
//! client that declared the extension with a task handle instead of its result; the task
//! is that run. It has no state of its own to move: its status is the run's, read through
//! [`TaskStatus::of`], so nothing but the run's own (core-decided) transitions can change
//! it, and a restarted broker answers for it from the store. What is kept is the handle
//! that was given (the answer the call would have returned) and when; how long it is
//! kept is [`TaskClock`]'s rule.
//!
//! A task never asks its client for input: children never ask their parent anything, so
//! the extension's `input_required` status has no counterpart here.

use crate::state::RunStatus;

/// How long a settled task is kept after its run ended (one day).
pub const SETTLED_TTL_MS: u64 = 24 * 60 * 60 * 1000;

/// How often a client should poll a working task.
pub const POLL_INTERVAL_MS: u64 = 1000;

/// A task's status as the extension names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TaskStatus {
    /// The run is queued, running, or its stop was requested.
    Working,
    /// The run ended with a result to read (completed, a budget's handoff summary, failed,
    /// or interrupted): the result says which. A run's failure is not a protocol failure,
    /// so the extension's `failed` (a JSON-RPC error) is not used for it.
    Completed,
    /// The run was stopped.
    Cancelled,
}

impl TaskStatus {
    /// The status of the task whose run has status `run`.
    pub const fn of(run: RunStatus) -> TaskStatus {
        match run {
            RunStatus::Queued | RunStatus::Running | RunStatus::StopRequested => {
                TaskStatus::Working
            }
            RunStatus::Stopped => TaskStatus::Cancelled,
            RunStatus::Completed
            | RunStatus::BudgetExhausted
            | RunStatus::Failed
            | RunStatus::Interrupted => TaskStatus::Completed,
        }
    }

    /// The extension's spelling.
    pub const fn as_str(self) -> &'static str {
        match self {
            TaskStatus::Working => "working",
            TaskStatus::Completed => "completed",
            TaskStatus::Cancelled => "cancelled",
        }
    }

    /// Whether the task's run has ended.
    pub const fn is_terminal(self) -> bool {
        !matches!(self, TaskStatus::Working)
    }
}

/// The time a task has been kept, as the store measured it (milliseconds).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TaskClock {
    /// From the task's creation to its run's end, or to now while it works.
    pub active_ms: u64,
    /// From its run's end to now; `None` while it works.
    pub settled_for_ms: Option<u64>,
}

impl TaskClock {
    /// The task's time to live from its creation: its active time plus
    /// [`SETTLED_TTL_MS`]. It grows while the run works (the extension lets it change), so a
    /// task never expires before its run has ended.
    pub const fn ttl_ms(self) -> u64 {
        self.active_ms.saturating_add(SETTLED_TTL_MS)
    }

    /// Whether the task may be forgotten: its run ended more than [`SETTLED_TTL_MS`] ago.
    pub const fn expired(self) -> bool {
        match self.settled_for_ms {
            Some(ms) => ms > SETTLED_TTL_MS,
            None => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_run_status_has_one_task_status() {
        for run in RunStatus::ALL {
            let task = TaskStatus::of(*run);
            assert_eq!(task.is_terminal(), run.is_terminal(), "{run}");
            assert_eq!(task == TaskStatus::Cancelled, *run == RunStatus::Stopped);
        }
    }

    #[test]
    fn a_task_expires_only_a_day_after_its_run_ended() {
        let working = TaskClock {
            active_ms: 10 * SETTLED_TTL_MS,
            settled_for_ms: None,
        };
        assert!(!working.expired());
        assert_eq!(working.ttl_ms(), 11 * SETTLED_TTL_MS);
        let fresh = TaskClock {
            active_ms: 5,
            settled_for_ms: Some(SETTLED_TTL_MS),
        };
        assert!(!fresh.expired());
        assert_eq!(fresh.ttl_ms(), SETTLED_TTL_MS + 5);
        let old = TaskClock {
            active_ms: 5,
            settled_for_ms: Some(SETTLED_TTL_MS + 1),
        };
        assert!(old.expired());
    }
}
