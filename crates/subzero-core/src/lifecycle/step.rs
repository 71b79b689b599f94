//! A run's change of status, derived from the typed transition that makes it.
//!
//! The store writes a run's new status only from a [`RunMove`], and a move exists only as
//! a step of the lifecycle: [`RunMove::step`] takes the step as types, `From → To`, and
//! only the pairs below implement [`StepTo`] (sealed). The child's transitions make the
//! moves as they move their runs, and hand them out with what they return; the decisions
//! pass them on. A move nobody's transition made — a completed run back to `running` — is
//! a type error (`ui-tests/tests/ui/move_a_run_by_hand.rs`).

use super::run::{
    ActivePhase, Completed, Failed, Interrupted, Queued, Run, Running, StopRequested, Stopped,
};
use super::sealed::Sealed;
use crate::ids::RunId;
use crate::state::RunStatus;

/// Where a step lands: a run state, or a terminal outcome (whose status may depend on the
/// value: a completion that reached a budget is `budget_exhausted`).
pub trait Landing: Sealed {
    /// The status the run has after the step.
    fn landing(&self) -> RunStatus;
}

/// A step of a run's lifecycle from this type to `To`. Sealed: the list below is closed.
pub trait StepTo<To: Landing>: Sealed {
    /// The status the run had before the step.
    const FROM: RunStatus;
}

impl<P: super::run::RunPhase> Sealed for Run<P> {}
impl Sealed for Completed {}
impl Sealed for Failed {}
impl Sealed for Stopped {}
impl Sealed for Interrupted {}

impl<P: super::run::RunPhase> Landing for Run<P> {
    fn landing(&self) -> RunStatus {
        self.status()
    }
}

macro_rules! landings {
    ($($ty:ty),+) => {$(
        impl Landing for $ty {
            fn landing(&self) -> RunStatus {
                self.status()
            }
        }
    )+};
}
landings!(Completed, Failed, Stopped, Interrupted);

macro_rules! steps {
    ($($from:ty => $($to:ty),+;)+) => {$($(
        impl StepTo<$to> for $from {
            const FROM: RunStatus = <$from>::FROM_STATUS;
        }
    )+)+};
}

impl<P: super::run::RunPhase> Run<P> {
    const FROM_STATUS: RunStatus = P::STATUS;
}

steps! {
    // Started by its child; withdrawn by a stop or a failure; abandoned with a lost worker.
    Run<Queued> => Run<Running>, Stopped, Interrupted;
    // Asked to stop.
    Run<Running> => Run<StopRequested>;
    // Confirmed stopped.
    Run<StopRequested> => Stopped;
}

// An active run (running, or stop requested) ends on its own: completed (or with its
// budget reached), failed, or interrupted with its worker.
macro_rules! active_endings {
    ($($to:ty),+) => {$(
        impl<R: ActivePhase> StepTo<$to> for Run<R> {
            const FROM: RunStatus = R::STATUS;
        }
    )+};
}
active_endings!(Completed, Failed, Interrupted);

/// One run's change of status, as a transition of the lifecycle made it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RunMove {
    run: RunId,
    from: RunStatus,
    to: RunStatus,
}

impl RunMove {
    /// The move of `run` by the step `From → To` that just landed at `to`. Only steps of
    /// the lifecycle compile.
    pub fn step<From: StepTo<To>, To: Landing>(run: RunId, to: &To) -> RunMove {
        RunMove {
            run,
            from: From::FROM,
            to: to.landing(),
        }
    }

    /// The run.
    pub fn run(&self) -> RunId {
        self.run
    }

    /// Its status before the step.
    pub fn from(&self) -> RunStatus {
        self.from
    }

    /// Its status after.
    pub fn to(&self) -> RunStatus {
        self.to
    }
}
