//! A run as stored ([`RunRecord`]) and in any state ([`AnyRun`]): the value-level
//! twin of `Run<S>` and its terminal outcomes.

use serde::{Deserialize, Serialize};

use super::WrongState;
use crate::budget::BudgetReached;
use crate::ids::{ChildId, RunId};
use crate::lifecycle::error::LoadError;
use crate::lifecycle::proof::LeafRef;
use crate::lifecycle::run::{
    self, Completed, Failed, Failure, Queued, Run, StopRequested, Stopped,
};
use crate::lifecycle::storage::StorageKey;
use crate::state::RunStatus;

/// A run as stored: plain data, checked by [`AnyRun::load`].
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RunRecord {
    /// The run's id.
    pub id: RunId,
    /// Its child.
    pub child: ChildId,
    /// Its status.
    pub status: RunStatus,
    /// The prompt; required while queued, optional afterwards.
    pub prompt: Option<String>,
    /// The recorded leaf; required for, and only for, `completed` and `budget_exhausted`.
    pub leaf: Option<LeafRef>,
    /// The budget reached; required for, and only for, `budget_exhausted`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<BudgetReached>,
    /// Why it failed; required for, and only for, `failed`.
    pub failure: Option<Failure>,
    /// Processes reaped; only for `stopped` (`None`: withdrawn before it started).
    pub reaped: Option<u32>,
    /// Why it was interrupted; only for `interrupted`.
    pub reason: Option<String>,
}

/// A run in any state. Terminal variants have no transitions.
#[derive(Debug)]
pub enum AnyRun {
    /// Waiting behind the active run.
    Queued(Run<Queued>),
    /// Being processed.
    Running(Run<run::Running>),
    /// Stop requested, not yet confirmed.
    StopRequested(Run<StopRequested>),
    /// Terminal.
    Completed(Completed),
    /// Terminal.
    Failed(Failed),
    /// Terminal.
    Stopped(Stopped),
    /// Terminal.
    Interrupted(run::Interrupted),
}

impl From<Run<Queued>> for AnyRun {
    fn from(r: Run<Queued>) -> Self {
        AnyRun::Queued(r)
    }
}
impl From<Run<run::Running>> for AnyRun {
    fn from(r: Run<run::Running>) -> Self {
        AnyRun::Running(r)
    }
}
impl From<Run<StopRequested>> for AnyRun {
    fn from(r: Run<StopRequested>) -> Self {
        AnyRun::StopRequested(r)
    }
}
impl From<Completed> for AnyRun {
    fn from(r: Completed) -> Self {
        AnyRun::Completed(r)
    }
}
impl From<Failed> for AnyRun {
    fn from(r: Failed) -> Self {
        AnyRun::Failed(r)
    }
}
impl From<Stopped> for AnyRun {
    fn from(r: Stopped) -> Self {
        AnyRun::Stopped(r)
    }
}
impl From<run::Interrupted> for AnyRun {
    fn from(r: run::Interrupted) -> Self {
        AnyRun::Interrupted(r)
    }
}

try_from_any!(AnyRun::Queued => Run<Queued>, "queued run");
try_from_any!(AnyRun::Running => Run<run::Running>, "running run");
try_from_any!(AnyRun::StopRequested => Run<StopRequested>, "stop-requested run");
try_from_any!(AnyRun::Completed => Completed, "completed run");
try_from_any!(AnyRun::Failed => Failed, "failed run");
try_from_any!(AnyRun::Stopped => Stopped, "stopped run");
try_from_any!(AnyRun::Interrupted => run::Interrupted, "interrupted run");

impl AnyRun {
    /// The one checked way from stored data to a run, with the store's key.
    pub fn load(record: RunRecord, _key: &StorageKey) -> Result<AnyRun, LoadError> {
        let RunRecord {
            id,
            child,
            status,
            prompt,
            leaf,
            budget,
            failure,
            reaped,
            reason,
        } = record;
        let bad = |why: &str| LoadError {
            subject: id.to_string(),
            reason: format!("a {status} run {why}"),
        };
        let with_leaf = matches!(status, RunStatus::Completed | RunStatus::BudgetExhausted);
        if leaf.is_some() && !with_leaf {
            return Err(bad("carries a transcript leaf"));
        }
        if budget.is_some() != (status == RunStatus::BudgetExhausted) {
            return Err(bad(if budget.is_some() {
                "carries a budget"
            } else {
                "names no budget"
            }));
        }
        if failure.is_some() && status != RunStatus::Failed {
            return Err(bad("carries a failure"));
        }
        if reaped.is_some() && status != RunStatus::Stopped {
            return Err(bad("carries a reaped count"));
        }
        if reason.is_some() && status != RunStatus::Interrupted {
            return Err(bad("carries an interruption reason"));
        }
        Ok(match status {
            RunStatus::Queued => {
                let prompt = prompt.ok_or_else(|| bad("has no prompt"))?;
                AnyRun::Queued(Run::queued(child, id, prompt))
            }
            RunStatus::Running => AnyRun::Running(run::restore::running(child, id)),
            RunStatus::StopRequested => {
                AnyRun::StopRequested(run::restore::stop_requested(child, id))
            }
            RunStatus::Completed | RunStatus::BudgetExhausted => {
                let leaf = leaf.ok_or_else(|| bad("has no recorded leaf"))?;
                AnyRun::Completed(run::restore::completed(child, id, leaf, budget))
            }
            RunStatus::Failed => {
                let failure = failure.ok_or_else(|| bad("has no failure"))?;
                AnyRun::Failed(run::restore::failed(child, id, failure))
            }
            RunStatus::Stopped => AnyRun::Stopped(run::restore::stopped(child, id, reaped)),
            RunStatus::Interrupted => AnyRun::Interrupted(run::restore::interrupted(
                child,
                id,
                reason.unwrap_or_default(),
            )),
        })
    }

    /// The plain data to store (the prompt only while queued).
    pub fn record(&self) -> RunRecord {
        let mut record = RunRecord {
            id: self.id(),
            child: self.child(),
            status: self.status(),
            prompt: None,
            leaf: None,
            budget: None,
            failure: None,
            reaped: None,
            reason: None,
        };
        match self {
            AnyRun::Queued(r) => record.prompt = Some(r.prompt().to_owned()),
            AnyRun::Completed(r) => {
                record.leaf = Some(r.leaf().clone());
                record.budget = r.budget().copied();
            }
            AnyRun::Failed(r) => record.failure = Some(r.failure().clone()),
            AnyRun::Stopped(r) => record.reaped = r.reaped(),
            AnyRun::Interrupted(r) => record.reason = Some(r.reason().to_owned()),
            AnyRun::Running(_) | AnyRun::StopRequested(_) => {}
        }
        record
    }

    /// The run's id.
    pub fn id(&self) -> RunId {
        match self {
            AnyRun::Queued(r) => r.id(),
            AnyRun::Running(r) => r.id(),
            AnyRun::StopRequested(r) => r.id(),
            AnyRun::Completed(r) => r.id(),
            AnyRun::Failed(r) => r.id(),
            AnyRun::Stopped(r) => r.id(),
            AnyRun::Interrupted(r) => r.id(),
        }
    }

    /// The child it belongs to.
    pub fn child(&self) -> ChildId {
        match self {
            AnyRun::Queued(r) => r.child(),
            AnyRun::Running(r) => r.child(),
            AnyRun::StopRequested(r) => r.child(),
            AnyRun::Completed(r) => r.child(),
            AnyRun::Failed(r) => r.child(),
            AnyRun::Stopped(r) => r.child(),
            AnyRun::Interrupted(r) => r.child(),
        }
    }

    /// The stored and wire status.
    pub fn status(&self) -> RunStatus {
        match self {
            AnyRun::Queued(r) => r.status(),
            AnyRun::Running(r) => r.status(),
            AnyRun::StopRequested(r) => r.status(),
            AnyRun::Completed(r) => r.status(),
            AnyRun::Failed(r) => r.status(),
            AnyRun::Stopped(r) => r.status(),
            AnyRun::Interrupted(r) => r.status(),
        }
    }

    /// Whether no transition leaves this run.
    pub fn is_terminal(&self) -> bool {
        self.status().is_terminal()
    }

    fn kind(&self) -> &'static str {
        match self {
            AnyRun::Queued(_) => "queued run",
            AnyRun::Running(_) => "running run",
            AnyRun::StopRequested(_) => "stop-requested run",
            AnyRun::Completed(_) => "completed run",
            AnyRun::Failed(_) => "failed run",
            AnyRun::Stopped(_) => "stopped run",
            AnyRun::Interrupted(_) => "interrupted run",
        }
    }
}
