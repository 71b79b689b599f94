//! The value-level twins of the typestate lifecycles, for storage and the wire.
//!
//! A stored row becomes an [`AnyChild`] through one checked [`AnyChild::load`]; from
//! there the runtime either matches and goes up with `TryFrom`, or calls the
//! operations, which dispatch to the typed transitions. A request that is illegal in
//! the current state is a typed [`LifecycleError`](super::LifecycleError), never a
//! panic, and a refused request leaves the child exactly as it was.
//!
//! A child with an active run is one [`AnyChild::Active`] arm: running and stopping
//! are both `Child<Running<R>>`, so what the two phases share is written once (with
//! `each_phase!`) and only what differs — `steer`, `stop`, `confirm_stop` — names the
//! phase.
//!
//! Here: the twins and the conversions between them and the typed values. `load`: the
//! stored records of a child, in and out. `ops`: the requests. `run`: [`AnyRun`].

use std::fmt;

use super::child::{Child, Interrupted, Next, Ready, Running, Stopping};
use super::proof::LeafRef;
use crate::error_code::{Coded, ErrorCode};
use crate::ids::{ChildId, RunId};
use crate::queue::FollowUpQueue;
use crate::state::{ChildState, RunStatus};

/// `$body` with `$c` bound to the typed child inside an [`ActiveChild`], whichever
/// phase it is in. The body is written once and type-checked for `Child<Running>` and
/// for `Child<Stopping>`, so it calls the typed transitions both phases have.
macro_rules! each_phase {
    ($active:expr, |$c:ident| $body:expr) => {
        match $active {
            $crate::lifecycle::any::ActiveChild::Running($c) => $body,
            $crate::lifecycle::any::ActiveChild::Stopping($c) => $body,
        }
    };
}

/// `$body` with `$c` bound to the typed child inside an [`AnyChild`], whatever its
/// state; for what every `Child<S>` has.
macro_rules! each_state {
    ($child:expr, |$c:ident| $body:expr) => {
        match $child {
            $crate::lifecycle::any::AnyChild::Ready($c) => $body,
            $crate::lifecycle::any::AnyChild::Active(active) => each_phase!(active, |$c| $body),
            $crate::lifecycle::any::AnyChild::Interrupted($c) => $body,
        }
    };
}

/// `TryFrom<$any>` for one typed value: the value if the pattern matches it, else
/// [`WrongState`] with the value untouched.
macro_rules! try_from_any {
    ($any:ident :: $variant:ident => $target:ty, $expected:literal) => {
        try_from_any!($any, $any::$variant(inner) => inner, $target, $expected);
    };
    ($any:ty, $pattern:pat => $inner:ident, $target:ty, $expected:literal) => {
        impl TryFrom<$any> for $target {
            type Error = WrongState<$any>;
            fn try_from(value: $any) -> Result<Self, Self::Error> {
                match value {
                    $pattern => Ok($inner),
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

mod load;
mod ops;
mod run;

pub use load::{ActiveRunRecord, ChildRecord, QueuedRunRecord};
pub use ops::{Delivery, Resumed, RunReport, Settlement, StopReceipt, WorkerLost};
pub use run::{AnyRun, RunRecord};

/// A child in any state.
#[derive(Debug)]
pub enum AnyChild {
    /// Idle, no worker.
    Ready(Child<Ready>),
    /// A run is active: running, or stopping (still `running` on the wire).
    Active(ActiveChild),
    /// Interrupted; only resume continues.
    Interrupted(Child<Interrupted>),
}

/// A child with an active run, in the phase of that run. The phase stays a type, so
/// the typed `steer` and `stop` are reachable only from `Running` and `confirm_stop`
/// only from `Stopping`.
#[derive(Debug)]
pub enum ActiveChild {
    /// Its active run is running.
    Running(Child<Running>),
    /// Its active run has a stop requested (still `running` on the wire).
    Stopping(Child<Stopping>),
}

impl From<Child<Ready>> for AnyChild {
    fn from(c: Child<Ready>) -> Self {
        AnyChild::Ready(c)
    }
}
impl From<Child<Running>> for AnyChild {
    fn from(c: Child<Running>) -> Self {
        AnyChild::Active(ActiveChild::Running(c))
    }
}
impl From<Child<Stopping>> for AnyChild {
    fn from(c: Child<Stopping>) -> Self {
        AnyChild::Active(ActiveChild::Stopping(c))
    }
}
impl From<ActiveChild> for AnyChild {
    fn from(c: ActiveChild) -> Self {
        AnyChild::Active(c)
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
            "invalid_request: expected a {} value but it is {}; read subzero_get for the current state",
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

try_from_any!(AnyChild::Ready => Child<Ready>, "ready child");
try_from_any!(
    AnyChild,
    AnyChild::Active(ActiveChild::Running(c)) => c,
    Child<Running>,
    "running child"
);
try_from_any!(
    AnyChild,
    AnyChild::Active(ActiveChild::Stopping(c)) => c,
    Child<Stopping>,
    "stopping child"
);
try_from_any!(AnyChild::Interrupted => Child<Interrupted>, "interrupted child");

impl AnyChild {
    /// A new child and its first, running run.
    pub fn spawn(id: ChildId, first: RunId, prompt: String, queue_capacity: u32) -> Self {
        Child::spawn(id, first, prompt, queue_capacity).into()
    }

    /// The child's id.
    pub fn id(&self) -> ChildId {
        each_state!(self, |c| c.id())
    }

    /// The stored and wire state.
    pub fn state(&self) -> ChildState {
        each_state!(self, |c| c.state())
    }

    /// The active run and its status, if any.
    pub fn active_run(&self) -> Option<(RunId, RunStatus)> {
        match self {
            AnyChild::Active(a) => Some(a.active_run()),
            AnyChild::Ready(_) | AnyChild::Interrupted(_) => None,
        }
    }

    /// Queued run ids, oldest first.
    pub fn queued(&self) -> Vec<RunId> {
        self.queue().map_or_else(Vec::new, FollowUpQueue::ids)
    }

    /// The last completed transcript leaf.
    pub fn last_leaf(&self) -> Option<&LeafRef> {
        each_state!(self, |c| c.last_leaf())
    }

    /// The follow-up queue bound.
    pub fn queue_capacity(&self) -> u32 {
        each_state!(self, |c| c.queue_capacity())
    }

    fn queue(&self) -> Option<&FollowUpQueue> {
        match self {
            AnyChild::Active(a) => Some(a.queue()),
            AnyChild::Ready(_) | AnyChild::Interrupted(_) => None,
        }
    }

    fn kind(&self) -> &'static str {
        match self {
            AnyChild::Ready(_) => "ready child",
            AnyChild::Active(ActiveChild::Running(_)) => "running child",
            AnyChild::Active(ActiveChild::Stopping(_)) => "stopping child",
            AnyChild::Interrupted(_) => "interrupted child",
        }
    }
}

impl ActiveChild {
    fn id(&self) -> ChildId {
        each_phase!(self, |c| c.id())
    }

    fn active_run(&self) -> (RunId, RunStatus) {
        each_phase!(self, |c| (c.active_run().id(), c.active_run().status()))
    }

    fn queue(&self) -> &FollowUpQueue {
        each_phase!(self, |c| c.queue())
    }
}
