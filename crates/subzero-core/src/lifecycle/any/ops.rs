//! The requests on an [`AnyChild`]: each takes `&mut self` (or `&self`), dispatches to
//! the typed transition for the child's state, and on refusal leaves the child exactly
//! as it was.

use serde::{Deserialize, Serialize};

use super::super::step::RunMove;
use super::{ActiveChild, AnyChild, AnyRun};
use crate::budget::BudgetReached;
use crate::ids::RunId;
use crate::lifecycle::child::Compaction;
use crate::lifecycle::child::{self, Child, Interrupted, Ready, Settled};
use crate::lifecycle::error::{
    ChildBusy, ChildInterrupted, LifecycleError, NotRunning, StaleRun, StopNotRequested,
    UnsupportedSteer,
};
use crate::lifecycle::proof::{
    Checkpoint, CompactionReported, LeafRecorded, ObservedLeaf, StopConfirmed, WorkerCapabilities,
};
use crate::lifecycle::run::{Failure, Stopped};
use crate::state::ChildState;

/// How a follow-up was delivered (`delivery` on the wire).
#[derive(Clone, Copy, PartialEq, Eq, Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "delivery")]
pub enum Delivery {
    /// The child was idle; the run started now.
    Started,
    /// The run waits behind the active run at this 1-based position.
    Queued {
        /// 1-based position in the queue.
        position: usize,
    },
}

/// The answer to an accepted stop.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct StopReceipt {
    /// The run whose stop is requested.
    pub run: RunId,
    /// False when a stop of this run was already requested (nothing changed).
    pub newly_requested: bool,
    /// Queued follow-ups the stop cleared (their status is now `stopped`).
    pub withdrawn: Vec<RunId>,
    /// The run statuses the stop changed, as its typed steps made them.
    pub moves: Vec<RunMove>,
}

/// What the worker reports when a run ends on its own.
#[derive(Debug)]
pub enum RunReport {
    /// The run completed and its leaf was recorded.
    Completed(LeafRecorded),
    /// The run reached a budget; its handoff summary's leaf was recorded.
    Exhausted(LeafRecorded, BudgetReached),
    /// The run failed.
    Failed {
        /// The run the report is about; must be the active run.
        run: RunId,
        /// Why.
        failure: Failure,
    },
}

/// A settled run and what followed.
#[derive(Debug)]
pub struct Settlement {
    /// The terminal run.
    pub run: AnyRun,
    /// Queued runs withdrawn with it (status `stopped`).
    pub withdrawn: Vec<AnyRun>,
    /// The queued run that started next, if any.
    pub started: Option<RunId>,
    /// The run statuses the settlement changed, as its typed steps made them.
    pub moves: Vec<RunMove>,
}

/// The outcome of a lost worker.
#[derive(Debug)]
pub struct WorkerLost {
    /// The interrupted active run.
    pub run: AnyRun,
    /// Queued runs interrupted with it.
    pub abandoned: Vec<AnyRun>,
    /// The run statuses the loss changed, as its typed steps made them.
    pub moves: Vec<RunMove>,
}

/// The outcome of a resume.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Resumed {
    /// `ready` without a message, `running` with one.
    pub state: ChildState,
    /// The new run, when a message was given.
    pub run: Option<RunId>,
}

impl RunReport {
    /// The run the report is about.
    fn run(&self) -> RunId {
        match self {
            RunReport::Completed(proof) | RunReport::Exhausted(proof, _) => proof.run(),
            RunReport::Failed { run, .. } => *run,
        }
    }
}

/// What a transition leaves behind: the child now, and the answer to the request.
type Step<T> = (AnyChild, Result<T, LifecycleError>);

impl AnyChild {
    /// Run `op` on the owned child and put whatever it returns back in place. Every
    /// typed transition gives the child back on failure, so `self` is always whole.
    fn transition<T>(&mut self, op: impl FnOnce(AnyChild) -> Step<T>) -> Result<T, LifecycleError> {
        let placeholder = AnyChild::Ready(child::restore::ready(
            self.id(),
            self.queue_capacity(),
            None,
        ));
        let owned = std::mem::replace(self, placeholder);
        let (next, result) = op(owned);
        *self = next;
        result
    }

    fn not_running(&self, what: &'static str, advice: &'static str) -> LifecycleError {
        let run = match self {
            AnyChild::Active(ActiveChild::Stopping(c)) => Some(c.active_run().id()),
            _ => None,
        };
        NotRunning {
            child: self.id(),
            state: self.state(),
            run,
            what,
            advice,
        }
        .into()
    }

    /// The refusal of `what` (e.g. a stop) naming a run of this child that already
    /// ended — the store knows a child's finished runs, the core only its active one:
    /// `not_running`, pointing at the run's result.
    pub fn ended_run(&self, what: &'static str) -> LifecycleError {
        self.not_running(
            what,
            "the run already ended; read its result with subzero_get",
        )
    }

    /// `send(followup)`: on a ready child the run starts; behind an active run it queues
    /// (a full queue is `limit_exceeded`); an interrupted child is `interrupted`.
    pub fn followup(&mut self, run: RunId, prompt: String) -> Result<Delivery, LifecycleError> {
        self.transition(|this| match this {
            AnyChild::Ready(c) => (c.followup(run, prompt).into(), Ok(Delivery::Started)),
            AnyChild::Active(a) => each_phase!(a, |c| match c.followup(run, prompt) {
                Ok((c, position)) => (c.into(), Ok(Delivery::Queued { position })),
                Err(refused) => given_back(refused),
            }),
            AnyChild::Interrupted(c) => refuse_interrupted(c, "follow-up"),
        })
    }

    /// `send(steer)`: only a running child whose worker advertises steering; returns the
    /// steered run. Never turned into a follow-up. A stopping child is `not_running`.
    pub fn steer(&self, capabilities: &WorkerCapabilities) -> Result<RunId, LifecycleError> {
        match self {
            AnyChild::Active(ActiveChild::Running(c)) => match capabilities.steering() {
                Some(steering) => Ok(c.steer(steering)),
                None => Err(UnsupportedSteer {
                    child: c.id(),
                    run: c.active_run().id(),
                }
                .into()),
            },
            AnyChild::Active(ActiveChild::Stopping(_)) => Err(self.not_running(
                "steer",
                "wait for the stop to be confirmed, then send mode \"followup\"",
            )),
            AnyChild::Ready(_) => {
                Err(self.not_running("steer", "send mode \"followup\" to start a new run"))
            }
            AnyChild::Interrupted(c) => Err(interrupted(c, "steer")),
        }
    }

    /// The worker reported compacting the active run's transcript: a running or stopping
    /// child accepts it (its state does not move); a report about a run that is not
    /// active is `stale_run`, and an interrupted child takes none.
    pub fn compacted(&self, report: CompactionReported) -> Result<Compaction, LifecycleError> {
        match self {
            AnyChild::Active(ActiveChild::Running(c)) => Ok(c.compacted(report)?),
            AnyChild::Active(ActiveChild::Stopping(c)) => Ok(c.compacted(report)?),
            AnyChild::Ready(c) => Err(StaleRun {
                child: c.id(),
                expected: report.run(),
                active: None,
            }
            .into()),
            AnyChild::Interrupted(c) => Err(interrupted(c, "a compaction report")),
        }
    }

    /// `stop(expectedRunId)`: `expected` must name the active run, otherwise
    /// `stale_run` and nothing changes. A matching stop clears the queue. Repeating the
    /// stop of a run already stopping is accepted and changes nothing.
    pub fn stop(&mut self, expected: RunId) -> Result<StopReceipt, LifecycleError> {
        self.transition(|this| match this {
            AnyChild::Active(ActiveChild::Running(c)) => {
                c.stop(expected).map_or_else(given_back, |accepted| {
                    let receipt = StopReceipt {
                        run: expected,
                        newly_requested: true,
                        withdrawn: accepted.withdrawn.iter().map(Stopped::id).collect(),
                        moves: accepted.moves,
                    };
                    (accepted.child.into(), Ok(receipt))
                })
            }
            AnyChild::Active(ActiveChild::Stopping(c)) => {
                let active = c.active_run().id();
                let result = if active == expected {
                    Ok(StopReceipt {
                        run: expected,
                        newly_requested: false,
                        withdrawn: Vec::new(),
                        moves: Vec::new(),
                    })
                } else {
                    Err(StaleRun {
                        child: c.id(),
                        expected,
                        active: Some(active),
                    }
                    .into())
                };
                (c.into(), result)
            }
            AnyChild::Ready(c) => refuse_idle(c, expected),
            AnyChild::Interrupted(c) => refuse_interrupted(c, "stop"),
        })
    }

    /// The supervisor's stop confirmation: only for a stopping child and its active run.
    pub fn confirm_stop(&mut self, proof: StopConfirmed) -> Result<Settlement, LifecycleError> {
        self.transition(|this| match this {
            AnyChild::Active(ActiveChild::Stopping(c)) => c
                .confirm_stop(proof)
                .map_or_else(given_back, |settled| settle_into(settled, AnyRun::Stopped)),
            AnyChild::Active(ActiveChild::Running(c)) => {
                let active = c.active_run().id();
                let err: LifecycleError = if proof.run() == active && proof.child() == c.id() {
                    StopNotRequested {
                        child: c.id(),
                        run: active,
                    }
                    .into()
                } else {
                    StaleRun {
                        child: c.id(),
                        expected: proof.run(),
                        active: Some(active),
                    }
                    .into()
                };
                (c.into(), Err(err))
            }
            AnyChild::Ready(c) => refuse_idle(c, proof.run()),
            AnyChild::Interrupted(c) => refuse_interrupted(c, "stop confirmation"),
        })
    }

    /// The worker settled the active run on its own (completed with a recorded leaf, or
    /// failed). A report about another run is `stale_run` and changes nothing.
    pub fn settle(&mut self, report: RunReport) -> Result<Settlement, LifecycleError> {
        self.transition(|this| match this {
            AnyChild::Active(a) => each_phase!(a, |c| match report {
                RunReport::Completed(proof) => c
                    .complete(proof)
                    .map_or_else(given_back, |s| settle_into(s, AnyRun::Completed)),
                RunReport::Exhausted(proof, budget) => c
                    .exhaust(proof, budget)
                    .map_or_else(given_back, |s| settle_into(s, AnyRun::Completed)),
                RunReport::Failed { run, failure } => c
                    .fail(run, failure)
                    .map_or_else(given_back, |s| settle_into(s, AnyRun::Failed)),
            }),
            AnyChild::Ready(c) => refuse_idle(c, report.run()),
            AnyChild::Interrupted(c) => refuse_interrupted(c, "run report"),
        })
    }

    /// The worker is gone without a confirmed result: the active run and the child
    /// become interrupted, queued runs too. A child without a worker is `not_running`.
    pub fn lose_worker(&mut self, reason: &str) -> Result<WorkerLost, LifecycleError> {
        self.transition(|this| match this {
            AnyChild::Active(a) => each_phase!(a, |c| lost_into(c.lose_worker(reason))),
            AnyChild::Ready(_) => {
                let err = this.not_running(
                    "a lost worker",
                    "a ready child has no worker; nothing to interrupt",
                );
                (this, Err(err))
            }
            AnyChild::Interrupted(c) => refuse_interrupted(c, "lost-worker report"),
        })
    }

    /// Verify this child's recorded last completed leaf against the transcript's.
    pub fn checkpoint(
        &self,
        observed: Option<&ObservedLeaf>,
    ) -> Result<Checkpoint, LifecycleError> {
        Checkpoint::verify(self.id(), self.last_leaf(), observed).map_err(Into::into)
    }

    /// `resume(checkpoint, message?)` on a ready or interrupted child: without a
    /// message the child is ready (no run, no worker); with one a new run starts from
    /// the checkpoint. A running child is `busy`; a wrong checkpoint is
    /// `checkpoint_incompatible` and nothing changes.
    pub fn resume(
        &mut self,
        checkpoint: Checkpoint,
        message: Option<(RunId, String)>,
    ) -> Result<Resumed, LifecycleError> {
        self.transition(|this| match (this, message) {
            (AnyChild::Ready(c), None) => c.resume(checkpoint).map_or_else(given_back, resumed),
            (AnyChild::Ready(c), Some((run, prompt))) => c
                .resume_with(checkpoint, run, prompt)
                .map_or_else(given_back, resumed),
            (AnyChild::Interrupted(c), None) => {
                c.resume(checkpoint).map_or_else(given_back, resumed)
            }
            (AnyChild::Interrupted(c), Some((run, prompt))) => c
                .resume_with(checkpoint, run, prompt)
                .map_or_else(given_back, resumed),
            (AnyChild::Active(a), _) => refuse_busy(a),
        })
    }
}

/// A refused typed transition: the child it gave back, and its error.
fn given_back<C, E, T>((child, err): (C, E)) -> Step<T>
where
    AnyChild: From<C>,
    LifecycleError: From<E>,
{
    (child.into(), Err(err.into()))
}

fn interrupted(c: &Child<Interrupted>, what: &'static str) -> LifecycleError {
    ChildInterrupted {
        child: c.id(),
        run: c.interrupted_run(),
        what,
    }
    .into()
}

/// Refuse `what` on an interrupted child, handing the child back unchanged.
fn refuse_interrupted<T>(c: Child<Interrupted>, what: &'static str) -> Step<T> {
    let err = interrupted(&c, what);
    (c.into(), Err(err))
}

/// Refuse a request about run `expected` on a ready child: no run is active.
fn refuse_idle<T>(c: Child<Ready>, expected: RunId) -> Step<T> {
    let err = StaleRun {
        child: c.id(),
        expected,
        active: None,
    };
    (c.into(), Err(err.into()))
}

/// Refuse a resume of a child with an active run, handing it back unchanged.
fn refuse_busy(c: ActiveChild) -> Step<Resumed> {
    let (active, _) = c.active_run();
    let err = ChildBusy {
        child: c.id(),
        active,
    };
    (c.into(), Err(err.into()))
}

/// A resumed child: ready, or running the new run.
fn resumed<C>(child: C) -> Step<Resumed>
where
    AnyChild: From<C>,
{
    let child = AnyChild::from(child);
    let resumed = Resumed {
        state: child.state(),
        run: child.active_run().map(|(run, _)| run),
    };
    (child, Ok(resumed))
}

fn settle_into<O>(settled: Settled<O>, wrap: impl FnOnce(O) -> AnyRun) -> Step<Settlement> {
    let Settled {
        outcome,
        withdrawn,
        next,
        moves,
    } = settled;
    let started = match &next {
        child::Next::Started(c) => Some(c.active_run().id()),
        child::Next::Idle(_) => None,
    };
    let settlement = Settlement {
        run: wrap(outcome),
        withdrawn: withdrawn.into_iter().map(AnyRun::Stopped).collect(),
        started,
        moves,
    };
    (next.into(), Ok(settlement))
}

fn lost_into(lost: child::LostWorker) -> Step<WorkerLost> {
    let report = WorkerLost {
        run: AnyRun::Interrupted(lost.run),
        abandoned: lost
            .abandoned
            .into_iter()
            .map(AnyRun::Interrupted)
            .collect(),
        moves: lost.moves,
    };
    (lost.child.into(), Ok(report))
}
