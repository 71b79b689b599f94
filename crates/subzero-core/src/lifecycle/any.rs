//! The value-level twins of the typestate lifecycles, for storage and the wire.
//!
//! A stored row becomes an [`AnyChild`] through one checked [`AnyChild::load`]; from
//! there the runtime either matches and goes up with `TryFrom`, or calls the
//! operations below, which dispatch to the typed transitions. A request that is
//! illegal in the current state is a typed [`LifecycleError`], never a panic, and a
//! refused request leaves the child exactly as it was.

use std::collections::HashSet;
use std::fmt;

use serde::{Deserialize, Serialize};

use super::child::{self, Child, Interrupted, Next, Ready, Running, Settled, Stopping};
use super::error::{
    ChildBusy, ChildInterrupted, LifecycleError, LoadError, NotRunning, StaleRun, StopNotRequested,
    UnsupportedSteer,
};
use super::proof::{Checkpoint, LeafRecorded, LeafRef, StopConfirmed, WorkerCapabilities};
use super::run::{
    self, ActivePhase, Completed, Failed, Failure, Queued, Run, RunPhase, StopRequested, Stopped,
};
use crate::error_code::{Coded, ErrorCode};
use crate::ids::{ChildId, RunId};
use crate::queue::FollowUpQueue;
use crate::state::{ChildState, RunStatus};

/// A child as stored: plain data, checked by [`AnyChild::load`].
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

/// A child in any state.
#[derive(Debug)]
pub enum AnyChild {
    /// Idle, no worker.
    Ready(Child<Ready>),
    /// Its active run is running.
    Running(Child<Running>),
    /// Its active run has a stop requested (still `running` on the wire).
    Stopping(Child<Stopping>),
    /// Interrupted; only resume continues.
    Interrupted(Child<Interrupted>),
}

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
}

/// What the worker reports when a run ends on its own.
#[derive(Debug)]
pub enum RunReport {
    /// The run completed and its leaf was recorded.
    Completed(LeafRecorded),
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
}

/// The outcome of a lost worker.
#[derive(Debug)]
pub struct WorkerLost {
    /// The interrupted active run.
    pub run: AnyRun,
    /// Queued runs interrupted with it.
    pub abandoned: Vec<AnyRun>,
}

/// The outcome of a resume.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Resumed {
    /// `ready` without a message, `running` with one.
    pub state: ChildState,
    /// The new run, when a message was given.
    pub run: Option<RunId>,
}

impl From<Child<Ready>> for AnyChild {
    fn from(c: Child<Ready>) -> Self {
        AnyChild::Ready(c)
    }
}
impl From<Child<Running>> for AnyChild {
    fn from(c: Child<Running>) -> Self {
        AnyChild::Running(c)
    }
}
impl From<Child<Stopping>> for AnyChild {
    fn from(c: Child<Stopping>) -> Self {
        AnyChild::Stopping(c)
    }
}
impl From<Child<Interrupted>> for AnyChild {
    fn from(c: Child<Interrupted>) -> Self {
        AnyChild::Interrupted(c)
    }
}
impl From<Next> for AnyChild {
    fn from(next: Next) -> Self {
        match next {
            Next::Idle(c) => c.into(),
            Next::Started(c) => c.into(),
        }
    }
}

/// A value was not in the state asked for; the value comes back untouched.
#[derive(Debug)]
pub struct WrongState<T> {
    /// The value, unchanged.
    pub value: T,
    /// The state asked for.
    pub expected: &'static str,
    /// The state it is in.
    pub found: &'static str,
}

impl<T> fmt::Display for WrongState<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "invalid_request: expected a {} value but it is {}; read get() for the current state",
            self.expected, self.found
        )
    }
}

impl<T: fmt::Debug> std::error::Error for WrongState<T> {}

impl<T> Coded for WrongState<T> {
    fn code(&self) -> ErrorCode {
        ErrorCode::InvalidRequest
    }
}

macro_rules! try_from_any {
    ($any:ident :: $variant:ident => $target:ty, $expected:literal) => {
        impl TryFrom<$any> for $target {
            type Error = WrongState<$any>;
            fn try_from(value: $any) -> Result<Self, Self::Error> {
                match value {
                    $any::$variant(inner) => Ok(inner),
                    other => {
                        let found = other.kind();
                        Err(WrongState {
                            value: other,
                            expected: $expected,
                            found,
                        })
                    }
                }
            }
        }
    };
}

try_from_any!(AnyChild::Ready => Child<Ready>, "ready child");
try_from_any!(AnyChild::Running => Child<Running>, "running child");
try_from_any!(AnyChild::Stopping => Child<Stopping>, "stopping child");
try_from_any!(AnyChild::Interrupted => Child<Interrupted>, "interrupted child");

fn load_error(id: ChildId, reason: impl Into<String>) -> LoadError {
    LoadError {
        subject: id.to_string(),
        reason: reason.into(),
    }
}

impl AnyChild {
    /// A new child and its first, running run.
    pub fn spawn(id: ChildId, first: RunId, prompt: String, queue_capacity: u32) -> Self {
        Child::spawn(id, first, prompt, queue_capacity).into()
    }

    /// The one checked way from stored data to a child. Refuses (with `internal`) any
    /// record that describes no legal state: an active run on a ready child, a queue
    /// without an active run, duplicate run ids, a queue over its bound, an active run
    /// whose status is not `running`/`stop_requested`, …
    pub fn load(record: ChildRecord) -> Result<AnyChild, LoadError> {
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
                match active.status {
                    RunStatus::Running => Ok(AnyChild::Running(child::restore::running(
                        shell,
                        run::restore::running(id, active.id),
                        queue,
                    ))),
                    RunStatus::StopRequested => Ok(AnyChild::Stopping(child::restore::running(
                        shell,
                        run::restore::stop_requested(id, active.id),
                        queue,
                    ))),
                    other => Err(load_error(
                        id,
                        format!("the active run {} is {other}", active.id),
                    )),
                }
            }
        }
    }

    /// The plain data to store; [`AnyChild::load`] of it gives the same child back.
    pub fn record(&self) -> ChildRecord {
        let (active_run, queued) = match self {
            AnyChild::Running(c) => (
                Some(active_record(c.active_run())),
                queued_records(c.queue()),
            ),
            AnyChild::Stopping(c) => (
                Some(active_record(c.active_run())),
                queued_records(c.queue()),
            ),
            AnyChild::Ready(_) | AnyChild::Interrupted(_) => (None, Vec::new()),
        };
        let (interrupted_run, interruption_reason) = match self {
            AnyChild::Interrupted(c) => (c.interrupted_run(), Some(c.reason().to_owned())),
            _ => (None, None),
        };
        ChildRecord {
            id: self.id(),
            state: self.state(),
            active_run,
            queued,
            last_leaf: self.last_leaf().cloned(),
            interrupted_run,
            interruption_reason,
            queue_capacity: self.queue_capacity(),
        }
    }

    /// The child's id.
    pub fn id(&self) -> ChildId {
        self.shared(|c| c.0)
    }

    /// The stored and wire state.
    pub fn state(&self) -> ChildState {
        match self {
            AnyChild::Ready(_) => ChildState::Ready,
            AnyChild::Running(_) | AnyChild::Stopping(_) => ChildState::Running,
            AnyChild::Interrupted(_) => ChildState::Interrupted,
        }
    }

    /// The active run and its status, if any.
    pub fn active_run(&self) -> Option<(RunId, RunStatus)> {
        match self {
            AnyChild::Running(c) => Some((c.active_run().id(), c.active_run().status())),
            AnyChild::Stopping(c) => Some((c.active_run().id(), c.active_run().status())),
            AnyChild::Ready(_) | AnyChild::Interrupted(_) => None,
        }
    }

    /// Queued run ids, oldest first.
    pub fn queued(&self) -> Vec<RunId> {
        match self {
            AnyChild::Running(c) => c.queue().ids(),
            AnyChild::Stopping(c) => c.queue().ids(),
            AnyChild::Ready(_) | AnyChild::Interrupted(_) => Vec::new(),
        }
    }

    /// The last completed transcript leaf.
    pub fn last_leaf(&self) -> Option<&LeafRef> {
        match self {
            AnyChild::Ready(c) => c.last_leaf(),
            AnyChild::Running(c) => c.last_leaf(),
            AnyChild::Stopping(c) => c.last_leaf(),
            AnyChild::Interrupted(c) => c.last_leaf(),
        }
    }

    /// The follow-up queue bound.
    pub fn queue_capacity(&self) -> u32 {
        self.shared(|c| c.1)
    }

    fn shared<T>(&self, f: impl Fn((ChildId, u32)) -> T) -> T {
        match self {
            AnyChild::Ready(c) => f((c.id(), c.queue_capacity())),
            AnyChild::Running(c) => f((c.id(), c.queue_capacity())),
            AnyChild::Stopping(c) => f((c.id(), c.queue_capacity())),
            AnyChild::Interrupted(c) => f((c.id(), c.queue_capacity())),
        }
    }

    fn kind(&self) -> &'static str {
        match self {
            AnyChild::Ready(_) => "ready child",
            AnyChild::Running(_) => "running child",
            AnyChild::Stopping(_) => "stopping child",
            AnyChild::Interrupted(_) => "interrupted child",
        }
    }

    fn not_running(&self, what: &'static str, advice: &'static str) -> LifecycleError {
        let run = match self {
            AnyChild::Stopping(c) => Some(c.active_run().id()),
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

    /// Run `op` on the owned child and put whatever it returns back in place. Every
    /// typed transition gives the child back on failure, so `self` is always whole.
    fn transition<T>(
        &mut self,
        op: impl FnOnce(AnyChild) -> (AnyChild, Result<T, LifecycleError>),
    ) -> Result<T, LifecycleError> {
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

    /// `send(followup)`: on a ready child the run starts; behind an active run it queues
    /// (a full queue is `limit_exceeded`); an interrupted child is `interrupted`.
    pub fn followup(&mut self, run: RunId, prompt: String) -> Result<Delivery, LifecycleError> {
        self.transition(|this| match this {
            AnyChild::Ready(c) => (c.followup(run, prompt).into(), Ok(Delivery::Started)),
            AnyChild::Running(c) => match c.followup(run, prompt) {
                Ok((c, position)) => (c.into(), Ok(Delivery::Queued { position })),
                Err((c, e)) => (c.into(), Err(e.into())),
            },
            AnyChild::Stopping(c) => match c.followup(run, prompt) {
                Ok((c, position)) => (c.into(), Ok(Delivery::Queued { position })),
                Err((c, e)) => (c.into(), Err(e.into())),
            },
            AnyChild::Interrupted(c) => refuse_interrupted(c, "follow-up"),
        })
    }

    /// `send(steer)`: only a running child whose worker advertises steering; returns the
    /// steered run. Never turned into a follow-up.
    pub fn steer(&self, capabilities: &WorkerCapabilities) -> Result<RunId, LifecycleError> {
        match self {
            AnyChild::Running(c) => match capabilities.steering() {
                Some(steering) => Ok(c.steer(steering)),
                None => Err(UnsupportedSteer {
                    child: c.id(),
                    run: c.active_run().id(),
                }
                .into()),
            },
            AnyChild::Interrupted(c) => Err(interrupted(c, "steer")),
            AnyChild::Ready(_) => {
                Err(self.not_running("steer", "send mode \"followup\" to start a new run"))
            }
            AnyChild::Stopping(_) => Err(self.not_running(
                "steer",
                "wait for the stop to be confirmed, then send mode \"followup\"",
            )),
        }
    }

    /// `stop(expectedRunId)`: `expected` must name the active run, otherwise
    /// `stale_run` and nothing changes. A matching stop clears the queue. Repeating the
    /// stop of a run already stopping is accepted and changes nothing.
    pub fn stop(&mut self, expected: RunId) -> Result<StopReceipt, LifecycleError> {
        self.transition(|this| match this {
            AnyChild::Running(c) => match c.stop(expected) {
                Ok(accepted) => {
                    let receipt = StopReceipt {
                        run: expected,
                        newly_requested: true,
                        withdrawn: accepted.withdrawn.iter().map(Stopped::id).collect(),
                    };
                    (accepted.child.into(), Ok(receipt))
                }
                Err((c, e)) => (c.into(), Err(e.into())),
            },
            AnyChild::Stopping(c) => {
                let active = c.active_run().id();
                let result = if active == expected {
                    Ok(StopReceipt {
                        run: expected,
                        newly_requested: false,
                        withdrawn: Vec::new(),
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
            AnyChild::Ready(_) => {
                let err = StaleRun {
                    child: this.id(),
                    expected,
                    active: None,
                };
                (this, Err(err.into()))
            }
            AnyChild::Interrupted(c) => refuse_interrupted(c, "stop"),
        })
    }

    /// The supervisor's stop confirmation: only for a stopping child and its active run.
    pub fn confirm_stop(&mut self, proof: StopConfirmed) -> Result<Settlement, LifecycleError> {
        self.transition(|this| match this {
            AnyChild::Stopping(c) => match c.confirm_stop(proof) {
                Ok(settled) => settle_into(settled, AnyRun::Stopped),
                Err((c, e)) => (c.into(), Err(e.into())),
            },
            AnyChild::Running(c) => {
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
            AnyChild::Ready(_) => {
                let err = StaleRun {
                    child: this.id(),
                    expected: proof.run(),
                    active: None,
                };
                (this, Err(err.into()))
            }
            AnyChild::Interrupted(c) => refuse_interrupted(c, "stop confirmation"),
        })
    }

    /// The worker settled the active run on its own (completed with a recorded leaf, or
    /// failed). A report about another run is `stale_run` and changes nothing.
    pub fn settle(&mut self, report: RunReport) -> Result<Settlement, LifecycleError> {
        self.transition(|this| match (this, report) {
            (AnyChild::Running(c), RunReport::Completed(proof)) => match c.complete(proof) {
                Ok(s) => settle_into(s, AnyRun::Completed),
                Err((c, e)) => (c.into(), Err(e.into())),
            },
            (AnyChild::Stopping(c), RunReport::Completed(proof)) => match c.complete(proof) {
                Ok(s) => settle_into(s, AnyRun::Completed),
                Err((c, e)) => (c.into(), Err(e.into())),
            },
            (AnyChild::Running(c), RunReport::Failed { run, failure }) => {
                match c.fail(run, failure) {
                    Ok(s) => settle_into(s, AnyRun::Failed),
                    Err((c, e)) => (c.into(), Err(e.into())),
                }
            }
            (AnyChild::Stopping(c), RunReport::Failed { run, failure }) => {
                match c.fail(run, failure) {
                    Ok(s) => settle_into(s, AnyRun::Failed),
                    Err((c, e)) => (c.into(), Err(e.into())),
                }
            }
            (this @ AnyChild::Ready(_), report) => {
                let expected = match &report {
                    RunReport::Completed(p) => p.run(),
                    RunReport::Failed { run, .. } => *run,
                };
                let err = StaleRun {
                    child: this.id(),
                    expected,
                    active: None,
                };
                (this, Err(err.into()))
            }
            (AnyChild::Interrupted(c), _) => refuse_interrupted(c, "run report"),
        })
    }

    /// The worker is gone without a confirmed result: the active run and the child
    /// become interrupted, queued runs too. A child without a worker is `not_running`.
    pub fn lose_worker(&mut self, reason: &str) -> Result<WorkerLost, LifecycleError> {
        self.transition(|this| match this {
            AnyChild::Running(c) => lost_into(c.lose_worker(reason)),
            AnyChild::Stopping(c) => lost_into(c.lose_worker(reason)),
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
    pub fn checkpoint(&self, observed: Option<&LeafRef>) -> Result<Checkpoint, LifecycleError> {
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
            (AnyChild::Ready(c), None) => match c.resume(checkpoint) {
                Ok(c) => (
                    c.into(),
                    Ok(Resumed {
                        state: ChildState::Ready,
                        run: None,
                    }),
                ),
                Err((c, e)) => (c.into(), Err(e.into())),
            },
            (AnyChild::Ready(c), Some((run, prompt))) => {
                match c.resume_with(checkpoint, run, prompt) {
                    Ok(c) => (
                        c.into(),
                        Ok(Resumed {
                            state: ChildState::Running,
                            run: Some(run),
                        }),
                    ),
                    Err((c, e)) => (c.into(), Err(e.into())),
                }
            }
            (AnyChild::Interrupted(c), None) => match c.resume(checkpoint) {
                Ok(c) => (
                    c.into(),
                    Ok(Resumed {
                        state: ChildState::Ready,
                        run: None,
                    }),
                ),
                Err((c, e)) => (c.into(), Err(e.into())),
            },
            (AnyChild::Interrupted(c), Some((run, prompt))) => {
                match c.resume_with(checkpoint, run, prompt) {
                    Ok(c) => (
                        c.into(),
                        Ok(Resumed {
                            state: ChildState::Running,
                            run: Some(run),
                        }),
                    ),
                    Err((c, e)) => (c.into(), Err(e.into())),
                }
            }
            (AnyChild::Running(c), _) => refuse_busy(c),
            (AnyChild::Stopping(c), _) => refuse_busy(c),
        })
    }
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
fn refuse_interrupted<T>(
    c: Child<Interrupted>,
    what: &'static str,
) -> (AnyChild, Result<T, LifecycleError>) {
    let err = interrupted(&c, what);
    (c.into(), Err(err))
}

/// Refuse a resume of a child with an active run, handing it back unchanged.
fn refuse_busy<R: ActivePhase>(c: Child<Running<R>>) -> (AnyChild, Result<Resumed, LifecycleError>)
where
    AnyChild: From<Child<Running<R>>>,
{
    let err = ChildBusy {
        child: c.id(),
        active: c.active_run().id(),
    };
    (c.into(), Err(err.into()))
}

fn settle_into<O>(
    settled: Settled<O>,
    wrap: impl FnOnce(O) -> AnyRun,
) -> (AnyChild, Result<Settlement, LifecycleError>) {
    let Settled {
        outcome,
        withdrawn,
        next,
    } = settled;
    let started = match &next {
        Next::Started(c) => Some(c.active_run().id()),
        Next::Idle(_) => None,
    };
    let settlement = Settlement {
        run: wrap(outcome),
        withdrawn: withdrawn.into_iter().map(AnyRun::Stopped).collect(),
        started,
    };
    (next.into(), Ok(settlement))
}

fn lost_into(lost: child::LostWorker) -> (AnyChild, Result<WorkerLost, LifecycleError>) {
    let report = WorkerLost {
        run: AnyRun::Interrupted(lost.run),
        abandoned: lost
            .abandoned
            .into_iter()
            .map(AnyRun::Interrupted)
            .collect(),
    };
    (lost.child.into(), Ok(report))
}

fn active_record<R: RunPhase>(run: &Run<R>) -> ActiveRunRecord {
    ActiveRunRecord {
        id: run.id(),
        status: run.status(),
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
    /// The recorded leaf; required for, and only for, `completed`.
    pub leaf: Option<LeafRef>,
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
    /// The one checked way from stored data to a run.
    pub fn load(record: RunRecord) -> Result<AnyRun, LoadError> {
        let RunRecord {
            id,
            child,
            status,
            prompt,
            leaf,
            failure,
            reaped,
            reason,
        } = record;
        let bad = |why: &str| LoadError {
            subject: id.to_string(),
            reason: format!("a {status} run {why}"),
        };
        if leaf.is_some() && status != RunStatus::Completed {
            return Err(bad("carries a transcript leaf"));
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
            RunStatus::Completed => {
                let leaf = leaf.ok_or_else(|| bad("has no recorded leaf"))?;
                AnyRun::Completed(run::restore::completed(child, id, leaf))
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
            failure: None,
            reaped: None,
            reason: None,
        };
        match self {
            AnyRun::Queued(r) => record.prompt = Some(r.prompt().to_owned()),
            AnyRun::Completed(r) => record.leaf = Some(r.leaf().clone()),
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
