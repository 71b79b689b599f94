//! Decided values: what a transition returns, and the only thing the store writes.
//!
//! A request on a stored child starts from a [`Loaded`](super::Loaded) (the store's
//! checked load) and returns a [`Decided`]: the child before (its [`Origin`]) and after,
//! its custody and phase after, every run status change ([`RunMove`]) and the run it
//! admits ([`Admitted`]), plus the answer to the request. Every field is private and no
//! constructor is public, so a value exists only where the core made the decision; the
//! runtime's `store/write.rs` takes nothing else. A status move nobody decided — say a
//! completed run back to `running` — has no way to be expressed, let alone written.
//!
//! Here: the values. `ops`: the requests that make them.

use super::any::AnyChild;
use super::custody::Custody;
pub use super::step::RunMove;
use super::storage::Origin;
use crate::ids::RunId;
use crate::state::{Phase, RunStatus};

mod ops;

pub use ops::{NamedRun, Recovered, RunEnding, SettledRun, Spawned};

/// A run the decision adds: started at once (`running`) or queued behind the active run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Admitted {
    run: RunId,
    status: RunStatus,
    prompt: String,
}

impl Admitted {
    /// The new run.
    pub fn run(&self) -> RunId {
        self.run
    }

    /// `running` or `queued`.
    pub fn status(&self) -> RunStatus {
        self.status
    }

    /// The prompt it runs with.
    pub fn prompt(&self) -> &str {
        &self.prompt
    }
}

/// A transition the core decided on a child: before and after, and the answer `T`.
///
/// The store writes it as a whole (the child row over the row it was decided from, each
/// run move, the admitted run) or not at all.
#[derive(Debug)]
#[must_use = "a decision changes nothing until the store writes it"]
pub struct Decided<T> {
    origin: Option<Origin>,
    child: AnyChild,
    custody: Custody,
    phase: Phase,
    moves: Vec<RunMove>,
    admitted: Option<Admitted>,
    changes: bool,
    outcome: T,
}

/// A decision that leaves `child` with `custody` and `phase`, answering `outcome`. A free
/// function, not an associated one: nothing about `Decided` hints at a constructor.
fn decision<T>(
    origin: Option<Origin>,
    child: AnyChild,
    custody: Custody,
    phase: Phase,
    outcome: T,
) -> Decided<T> {
    let custody = custody.in_state(child.state());
    Decided {
        origin,
        child,
        custody,
        phase,
        moves: Vec::new(),
        admitted: None,
        changes: true,
        outcome,
    }
}

impl<T> Decided<T> {
    /// The moves the child's transition made, in the order it made them.
    fn moved(mut self, moves: Vec<RunMove>) -> Self {
        self.moves.extend(moves);
        self
    }

    fn admitting(mut self, run: RunId, status: RunStatus, prompt: String) -> Self {
        self.admitted = Some(Admitted {
            run,
            status,
            prompt,
        });
        self
    }

    fn unchanged(mut self) -> Self {
        self.changes = false;
        self
    }

    /// What the child was decided from; `None` for a child that did not exist (spawn).
    pub fn origin(&self) -> Option<Origin> {
        self.origin
    }

    /// The child afterwards.
    pub fn child(&self) -> &AnyChild {
        &self.child
    }

    /// Who holds it afterwards.
    pub fn custody(&self) -> &Custody {
        &self.custody
    }

    /// The phase it shows afterwards.
    pub fn phase(&self) -> Phase {
        self.phase
    }

    /// The runs whose status changes, in the order the store applies them.
    pub fn moves(&self) -> &[RunMove] {
        &self.moves
    }

    /// The run the decision adds, if any.
    pub fn admitted(&self) -> Option<&Admitted> {
        self.admitted.as_ref()
    }

    /// Whether anything is to be written (a repeated stop, say, changes nothing).
    pub fn changes(&self) -> bool {
        self.changes
    }

    /// The answer to the request.
    pub fn outcome(&self) -> &T {
        &self.outcome
    }

    /// The answer, once the decision is written.
    pub fn into_outcome(self) -> T {
        self.outcome
    }

    /// Writes the decision with `write` (the store's writer: the child row over the row it
    /// was decided from, each run move, the admitted run) and gives back its answer.
    /// Consumes the decision, so it is written at most once: a second `commit` of the same
    /// value does not compile.
    pub fn commit<E>(self, write: impl FnOnce(Commit<'_, T>) -> Result<(), E>) -> Result<T, E> {
        write(Commit { decided: &self })?;
        Ok(self.outcome)
    }
}

/// A decision lent to the store for its one write. Only [`Decided::commit`] makes one, so
/// the store's write function, which takes nothing else, runs once per decision.
#[derive(Debug)]
pub struct Commit<'a, T> {
    decided: &'a Decided<T>,
}

impl<'a, T> Commit<'a, T> {
    /// What the child was decided from; `None` for a child that did not exist (spawn).
    pub fn origin(&self) -> Option<Origin> {
        self.decided.origin
    }

    /// The child afterwards.
    pub fn child(&self) -> &'a AnyChild {
        &self.decided.child
    }

    /// Who holds it afterwards.
    pub fn custody(&self) -> &'a Custody {
        &self.decided.custody
    }

    /// The phase it shows afterwards.
    pub fn phase(&self) -> Phase {
        self.decided.phase
    }

    /// The runs whose status changes, in the order the store applies them.
    pub fn moves(&self) -> &'a [RunMove] {
        &self.decided.moves
    }

    /// The run the decision adds, if any.
    pub fn admitted(&self) -> Option<&'a Admitted> {
        self.decided.admitted.as_ref()
    }

    /// Whether anything is to be written.
    pub fn changes(&self) -> bool {
        self.decided.changes
    }

    /// The answer the decision gives once written.
    pub fn outcome(&self) -> &'a T {
        &self.decided.outcome
    }
}
