//! Why a lifecycle request was refused.
//!
//! Each refusal is its own small type so a typed transition can say exactly what it
//! may fail with (`Result<Next, (Self, StaleRun)>`); [`LifecycleError`] gathers them
//! for the value-level [`AnyChild`](super::AnyChild) operations. Every error has a
//! stable [`ErrorCode`] and a message that starts with that code and says what to do
//! next. A refused request never changed anything.

use std::fmt;

use super::custody::CustodyRefused;
use crate::error_code::{Coded, Described, ErrorCode};
use crate::ids::{ChildId, RunId};
use crate::limits::LimitExceeded;
use crate::state::ChildState;

/// Renders an optional active run for messages.
struct ActiveShown(Option<RunId>);

impl fmt::Display for ActiveShown {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(run) => write!(f, "active: {run}"),
            None => f.write_str("no active run"),
        }
    }
}

/// The named run is not the child's active run; nothing changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StaleRun {
    /// The child asked about.
    pub child: ChildId,
    /// The run the caller named.
    pub expected: RunId,
    /// The child's actual active run, if any.
    pub active: Option<RunId>,
}

/// The operation needs an active run and the child has none (or it is stopping).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotRunning {
    /// The child asked about.
    pub child: ChildId,
    /// The child's state.
    pub state: ChildState,
    /// The active run when it is stopping, `None` when there is none.
    pub run: Option<RunId>,
    /// The refused operation, e.g. "steer".
    pub what: &'static str,
    /// What to do instead.
    pub advice: &'static str,
}

/// The worker does not advertise steering; the message was not queued either.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnsupportedSteer {
    /// The child asked about.
    pub child: ChildId,
    /// Its active run.
    pub run: RunId,
}

/// A stop confirmation arrived for a run whose stop was never requested.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StopNotRequested {
    /// The child asked about.
    pub child: ChildId,
    /// Its active run.
    pub run: RunId,
}

/// The child is interrupted; only `resume` continues it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChildInterrupted {
    /// The child asked about.
    pub child: ChildId,
    /// The run that was interrupted, if one was active.
    pub run: Option<RunId>,
    /// The refused operation.
    pub what: &'static str,
}

/// The child has an active run, so it cannot be resumed now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChildBusy {
    /// The child asked about.
    pub child: ChildId,
    /// Its active run.
    pub active: RunId,
}

/// The recorded checkpoint does not match what was presented.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckpointIncompatible {
    /// The child asked about.
    pub child: ChildId,
    /// What did not match.
    pub reason: String,
}

/// A run value belongs to another child.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ForeignRun {
    /// The child asked to take the run.
    pub child: ChildId,
    /// The run.
    pub run: RunId,
    /// The child the run was created for.
    pub owner: ChildId,
}

/// Stored data does not describe a legal state; it was not loaded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadError {
    /// The child or run id, as text.
    pub subject: String,
    /// What is inconsistent.
    pub reason: String,
}

macro_rules! coded {
    ($($ty:ident => $code:ident),+ $(,)?) => {
        $(impl Coded for $ty {
            fn code(&self) -> ErrorCode {
                ErrorCode::$code
            }
        }
        crate::coded_display!($ty);
        impl std::error::Error for $ty {})+
    };
}

impl Described for StaleRun {
    fn describe(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let StaleRun {
            child,
            expected,
            active,
        } = self;
        let shown = ActiveShown(*active);
        write!(
            f,
            "run {expected} is not the active run of child {child} ({shown}); read subzero_get and retry with that id"
        )
    }
}

impl Described for NotRunning {
    fn describe(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let NotRunning {
            child,
            state,
            run,
            what,
            advice,
        } = self;
        let run_shown = match run {
            Some(r) => format!(" (run {r} is stopping)"),
            None => String::new(),
        };
        write!(
            f,
            "{what} needs a running run, but child {child} is {state}{run_shown}; {advice}"
        )
    }
}

impl Described for UnsupportedSteer {
    fn describe(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let UnsupportedSteer { child, run } = self;
        write!(
            f,
            "the worker of child {child} does not advertise steering, so run {run} was not steered and nothing was queued; send mode \"followup\" to add the message as a new run"
        )
    }
}

impl Described for StopNotRequested {
    fn describe(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let StopNotRequested { child, run } = self;
        write!(
            f,
            "run {run} of child {child} has no stop request to confirm; request the stop with stop(expectedRunId) first"
        )
    }
}

impl Described for ChildInterrupted {
    fn describe(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ChildInterrupted { child, run, what } = self;
        let run_shown = match run {
            Some(r) => format!(" during run {r}"),
            None => String::new(),
        };
        write!(
            f,
            "child {child} was interrupted{run_shown} and accepts no {what}; call subzero_resume (with a model, and optionally a message) first"
        )
    }
}

impl Described for ChildBusy {
    fn describe(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ChildBusy { child, active } = self;
        write!(
            f,
            "child {child} is running run {active}; resume applies to a ready or interrupted child: wait for the run to settle or stop it with expectedRunId {active}"
        )
    }
}

impl Described for CheckpointIncompatible {
    fn describe(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let CheckpointIncompatible { child, reason } = self;
        write!(
            f,
            "child {child}: {reason}; stored state was preserved, nothing was resumed"
        )
    }
}

impl Described for ForeignRun {
    fn describe(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ForeignRun { child, run, owner } = self;
        write!(
            f,
            "run {run} belongs to child {owner}, not to child {child}"
        )
    }
}

impl Described for LoadError {
    fn describe(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let LoadError { subject, reason } = self;
        write!(
            f,
            "stored state of {subject} is inconsistent: {reason}; it was not loaded or changed"
        )
    }
}

coded!(
    StaleRun => StaleRun,
    NotRunning => NotRunning,
    UnsupportedSteer => UnsupportedSteer,
    StopNotRequested => InvalidRequest,
    ChildInterrupted => Interrupted,
    ChildBusy => Busy,
    CheckpointIncompatible => CheckpointIncompatible,
    ForeignRun => InvalidRequest,
    LoadError => Internal,
);

/// Every refusal a lifecycle operation can produce.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LifecycleError {
    /// See [`StaleRun`].
    #[error(transparent)]
    StaleRun(#[from] StaleRun),
    /// See [`NotRunning`].
    #[error(transparent)]
    NotRunning(#[from] NotRunning),
    /// See [`UnsupportedSteer`].
    #[error(transparent)]
    UnsupportedSteer(#[from] UnsupportedSteer),
    /// See [`StopNotRequested`].
    #[error(transparent)]
    StopNotRequested(#[from] StopNotRequested),
    /// See [`ChildInterrupted`].
    #[error(transparent)]
    Interrupted(#[from] ChildInterrupted),
    /// See [`ChildBusy`].
    #[error(transparent)]
    Busy(#[from] ChildBusy),
    /// See [`CheckpointIncompatible`].
    #[error(transparent)]
    CheckpointIncompatible(#[from] CheckpointIncompatible),
    /// See [`ForeignRun`].
    #[error(transparent)]
    ForeignRun(#[from] ForeignRun),
    /// The follow-up queue is full (or another policy limit).
    #[error(transparent)]
    LimitExceeded(#[from] LimitExceeded),
    /// See [`LoadError`].
    #[error(transparent)]
    Load(#[from] LoadError),
    /// See [`CustodyRefused`].
    #[error(transparent)]
    Custody(#[from] CustodyRefused),
}

impl Described for LifecycleError {
    fn describe(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LifecycleError::StaleRun(e) => e.describe(f),
            LifecycleError::NotRunning(e) => e.describe(f),
            LifecycleError::UnsupportedSteer(e) => e.describe(f),
            LifecycleError::StopNotRequested(e) => e.describe(f),
            LifecycleError::Interrupted(e) => e.describe(f),
            LifecycleError::Busy(e) => e.describe(f),
            LifecycleError::CheckpointIncompatible(e) => e.describe(f),
            LifecycleError::ForeignRun(e) => e.describe(f),
            LifecycleError::LimitExceeded(e) => e.describe(f),
            LifecycleError::Load(e) => e.describe(f),
            LifecycleError::Custody(e) => e.describe(f),
        }
    }
}

impl Coded for LifecycleError {
    fn code(&self) -> ErrorCode {
        match self {
            LifecycleError::StaleRun(e) => e.code(),
            LifecycleError::NotRunning(e) => e.code(),
            LifecycleError::UnsupportedSteer(e) => e.code(),
            LifecycleError::StopNotRequested(e) => e.code(),
            LifecycleError::Interrupted(e) => e.code(),
            LifecycleError::Busy(e) => e.code(),
            LifecycleError::CheckpointIncompatible(e) => e.code(),
            LifecycleError::ForeignRun(e) => e.code(),
            LifecycleError::LimitExceeded(e) => e.code(),
            LifecycleError::Load(e) => e.code(),
            LifecycleError::Custody(e) => e.code(),
        }
    }
}
