//! The run lifecycle: `Run<Queued>` → `Run<Running>` → `Run<StopRequested>` → a
//! terminal outcome ([`Completed`] — with a result, or with the handoff summary of a run
//! that reached a budget —, [`Failed`], [`Stopped`], [`Interrupted`]).
//!
//! Transitions consume the run, so a settled run cannot be used again; terminal
//! outcomes are plain values with no transition methods at all. Only a child starts
//! a queued run (see [`Child::start`](super::Child)), because only the child knows that
//! no other run is active.

#![allow(
    clippy::result_large_err,
    reason = "fallible transitions give `self` back by value; boxing would allocate on every refusal"
)]

use serde::{Deserialize, Serialize};

use super::error::StaleRun;
use super::proof::{LeafRecorded, LeafRef, StopConfirmed};
use super::sealed::Sealed;
use crate::budget::BudgetReached;
use crate::error_code::ErrorCode;
use crate::ids::{ChildId, RunId};
use crate::state::RunStatus;

/// A run state marker. Sealed: the set of states is closed.
pub trait RunPhase: Sealed {
    /// The stored and wire status of this state.
    const STATUS: RunStatus;
}

/// A state in which the run is the child's active run (running or stop requested).
pub trait ActivePhase: RunPhase {}

/// Waiting behind the active run; carries the prompt it will run with.
#[derive(Debug)]
pub struct Queued {
    prompt: String,
}

/// Being processed by the worker.
#[derive(Debug)]
pub struct Running {
    _private: (),
}

/// A matching stop was accepted; the worker has not confirmed yet.
#[derive(Debug)]
pub struct StopRequested {
    _private: (),
}

impl Sealed for Queued {}
impl Sealed for Running {}
impl Sealed for StopRequested {}
impl RunPhase for Queued {
    const STATUS: RunStatus = RunStatus::Queued;
}
impl RunPhase for Running {
    const STATUS: RunStatus = RunStatus::Running;
}
impl RunPhase for StopRequested {
    const STATUS: RunStatus = RunStatus::StopRequested;
}
impl ActivePhase for Running {}
impl ActivePhase for StopRequested {}

/// One attempt to process one prompt in a child, in state `S`.
#[derive(Debug)]
pub struct Run<S: RunPhase> {
    id: RunId,
    child: ChildId,
    state: S,
}

impl<S: RunPhase> Run<S> {
    /// The run's id.
    pub fn id(&self) -> RunId {
        self.id
    }

    /// The child the run belongs to.
    pub fn child(&self) -> ChildId {
        self.child
    }

    /// The stored and wire status.
    pub fn status(&self) -> RunStatus {
        S::STATUS
    }

    fn stale(&self, named: RunId) -> StaleRun {
        StaleRun {
            child: self.child,
            expected: named,
            active: Some(self.id),
        }
    }

    fn with<T: RunPhase>(self, state: T) -> Run<T> {
        Run {
            id: self.id,
            child: self.child,
            state,
        }
    }
}

impl Run<Queued> {
    /// A new run waiting to be started by its child.
    pub fn queued(child: ChildId, id: RunId, prompt: String) -> Self {
        Run {
            id,
            child,
            state: Queued { prompt },
        }
    }

    /// The prompt the run will process.
    pub fn prompt(&self) -> &str {
        &self.state.prompt
    }

    /// Start the run. Crate-private: only a child that has no active run calls it.
    pub(crate) fn start(self) -> Run<Running> {
        self.with(Running { _private: () })
    }

    /// Leave the queue without ever starting (a stop or a failure cleared it).
    pub(crate) fn withdraw(self) -> Stopped {
        Stopped {
            id: self.id,
            child: self.child,
            reaped: None,
        }
    }

    /// Leave the queue because the worker was lost.
    pub(crate) fn abandon(self, reason: &str) -> Interrupted {
        Interrupted {
            id: self.id,
            child: self.child,
            reason: reason.to_owned(),
        }
    }
}

/// Shared by both active states: complete with a recorded leaf (`budget`: the run ended
/// because it reached this budget, and its result is the handoff summary).
pub(crate) fn complete_active<S: ActivePhase>(
    run: Run<S>,
    proof: LeafRecorded,
    budget: Option<BudgetReached>,
) -> Result<Completed, (Run<S>, StaleRun)> {
    if proof.run() != run.id || proof.child() != run.child {
        let err = run.stale(proof.run());
        return Err((run, err));
    }
    Ok(Completed {
        id: run.id,
        child: run.child,
        leaf: proof.into_leaf(),
        budget,
    })
}

pub(crate) fn fail_active<S: ActivePhase>(run: Run<S>, failure: Failure) -> Failed {
    Failed {
        id: run.id,
        child: run.child,
        failure,
    }
}

pub(crate) fn interrupt_active<S: ActivePhase>(run: Run<S>, reason: &str) -> Interrupted {
    Interrupted {
        id: run.id,
        child: run.child,
        reason: reason.to_owned(),
    }
}

impl Run<Running> {
    /// The worker finished the run and its transcript leaf was recorded.
    /// A proof for another run is `stale_run` and gives the run back unchanged.
    pub fn complete(self, proof: LeafRecorded) -> Result<Completed, (Self, StaleRun)> {
        complete_active(self, proof, None)
    }

    /// The run reached `budget` and its handoff summary's leaf was recorded.
    pub fn exhaust(
        self,
        proof: LeafRecorded,
        budget: BudgetReached,
    ) -> Result<Completed, (Self, StaleRun)> {
        complete_active(self, proof, Some(budget))
    }

    /// The run ended with an error.
    pub fn fail(self, failure: Failure) -> Failed {
        fail_active(self, failure)
    }

    /// Ask the worker to stop. `expected` must be this run's id; otherwise `stale_run`
    /// and nothing changes.
    pub fn request_stop(self, expected: RunId) -> Result<Run<StopRequested>, (Self, StaleRun)> {
        if expected != self.id {
            let err = self.stale(expected);
            return Err((self, err));
        }
        Ok(self.with(StopRequested { _private: () }))
    }

    /// The worker was lost before a terminal result was confirmed.
    pub fn interrupt(self, reason: &str) -> Interrupted {
        interrupt_active(self, reason)
    }
}

impl Run<StopRequested> {
    /// The supervisor confirmed cancellation and process-tree exit for this run.
    /// A confirmation for another run is `stale_run` and changes nothing.
    pub fn confirm_stop(self, proof: StopConfirmed) -> Result<Stopped, (Self, StaleRun)> {
        if proof.run() != self.id || proof.child() != self.child {
            let err = self.stale(proof.run());
            return Err((self, err));
        }
        Ok(Stopped {
            id: self.id,
            child: self.child,
            reaped: Some(proof.reaped()),
        })
    }

    /// The run completed before the cancellation reached it.
    pub fn complete(self, proof: LeafRecorded) -> Result<Completed, (Self, StaleRun)> {
        complete_active(self, proof, None)
    }

    /// The run reached a budget before the cancellation reached it.
    pub fn exhaust(
        self,
        proof: LeafRecorded,
        budget: BudgetReached,
    ) -> Result<Completed, (Self, StaleRun)> {
        complete_active(self, proof, Some(budget))
    }

    /// The run failed before the cancellation reached it.
    pub fn fail(self, failure: Failure) -> Failed {
        fail_active(self, failure)
    }

    /// The worker was lost before it confirmed the stop: interrupted, not stopped.
    pub fn interrupt(self, reason: &str) -> Interrupted {
        interrupt_active(self, reason)
    }
}

/// Why a run failed, as reported by the worker or the runtime.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct Failure {
    /// The stable code (e.g. `model_request_failed`, `limit_exceeded`).
    pub code: ErrorCode,
    /// A human-readable message.
    pub message: String,
}

/// Terminal: the run finished with a result and its leaf is recorded. With a budget it
/// ended because it reached that budget (status `budget_exhausted`).
#[derive(Debug, PartialEq, Eq)]
pub struct Completed {
    id: RunId,
    child: ChildId,
    leaf: LeafRef,
    budget: Option<BudgetReached>,
}

/// Terminal: the run ended with an error.
#[derive(Debug, PartialEq, Eq)]
pub struct Failed {
    id: RunId,
    child: ChildId,
    failure: Failure,
}

/// Terminal: stopped — confirmed by the supervisor, or withdrawn from the queue before
/// it ever started.
#[derive(Debug, PartialEq, Eq)]
pub struct Stopped {
    id: RunId,
    child: ChildId,
    reaped: Option<u32>,
}

/// Terminal: execution ended without a confirmed terminal result.
#[derive(Debug, PartialEq, Eq)]
pub struct Interrupted {
    id: RunId,
    child: ChildId,
    reason: String,
}

macro_rules! outcome_accessors {
    ($($ty:ident),+) => {$(
        impl $ty {
            /// The run's id.
            pub fn id(&self) -> RunId { self.id }
            /// The child the run belonged to.
            pub fn child(&self) -> ChildId { self.child }
        }
    )+};
}

outcome_accessors!(Completed, Failed, Stopped, Interrupted);

impl Completed {
    /// The recorded transcript leaf.
    pub fn leaf(&self) -> &LeafRef {
        &self.leaf
    }

    /// The budget the run reached, when it ended on one.
    pub fn budget(&self) -> Option<&BudgetReached> {
        self.budget.as_ref()
    }

    /// `completed`, or `budget_exhausted` when the run ended on a budget.
    pub fn status(&self) -> RunStatus {
        if self.budget.is_some() {
            RunStatus::BudgetExhausted
        } else {
            RunStatus::Completed
        }
    }
}

impl Failed {
    /// The terminal status.
    pub fn status(&self) -> RunStatus {
        RunStatus::Failed
    }
}

impl Stopped {
    /// The terminal status.
    pub fn status(&self) -> RunStatus {
        RunStatus::Stopped
    }
}

impl Interrupted {
    /// The terminal status.
    pub fn status(&self) -> RunStatus {
        RunStatus::Interrupted
    }
}

impl Failed {
    /// Why it failed.
    pub fn failure(&self) -> &Failure {
        &self.failure
    }
}

impl Stopped {
    /// Tool processes killed, or `None` when the run was withdrawn before it started.
    pub fn reaped(&self) -> Option<u32> {
        self.reaped
    }
}

impl Interrupted {
    /// Why execution ended.
    pub fn reason(&self) -> &str {
        &self.reason
    }
}

/// Rebuild values from storage; only `AnyRun::load` calls these.
pub(crate) mod restore {
    use super::*;

    pub(crate) fn running(child: ChildId, id: RunId) -> Run<Running> {
        Run {
            id,
            child,
            state: Running { _private: () },
        }
    }
    pub(crate) fn stop_requested(child: ChildId, id: RunId) -> Run<StopRequested> {
        Run {
            id,
            child,
            state: StopRequested { _private: () },
        }
    }
    pub(crate) fn completed(
        child: ChildId,
        id: RunId,
        leaf: LeafRef,
        budget: Option<BudgetReached>,
    ) -> Completed {
        Completed {
            id,
            child,
            leaf,
            budget,
        }
    }
    pub(crate) fn failed(child: ChildId, id: RunId, failure: Failure) -> Failed {
        Failed { id, child, failure }
    }
    pub(crate) fn stopped(child: ChildId, id: RunId, reaped: Option<u32>) -> Stopped {
        Stopped { id, child, reaped }
    }
    pub(crate) fn interrupted(child: ChildId, id: RunId, reason: String) -> Interrupted {
        Interrupted { id, child, reason }
    }
}
