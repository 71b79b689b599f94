//! The child lifecycle: `Child<Ready>`, `Child<Running>` (its active run running),
//! `Child<Stopping>` (= `Child<Running<StopRequested>>`, still `running` on the wire)
//! and `Child<Interrupted>`.
//!
//! A running child owns its active [`Run`] and its [`FollowUpQueue`], so "at most one
//! active run" and "queued runs only behind an active one" hold by construction. Each
//! state's methods live in their own `impl` block: `steer` is simply absent from
//! `Child<Ready>`.

#![allow(
    clippy::result_large_err,
    reason = "fallible transitions give `self` back by value; boxing would allocate on every refusal"
)]

use super::error::{CheckpointIncompatible, ForeignRun, StaleRun};
use super::proof::{
    Checkpoint, CompactionReported, LeafRecorded, LeafRef, ObservedLeaf, Steering, StopConfirmed,
};
use super::run::{
    self, ActivePhase, Completed, Failed, Failure, Queued, Run, StopRequested, Stopped,
};
use super::sealed::Sealed;
use super::step::RunMove;
use crate::budget::BudgetReached;
use crate::events::EventBody;
use crate::ids::{ChildId, RunId};
use crate::limits::LimitExceeded;
use crate::queue::FollowUpQueue;
use crate::state::ChildState;

/// A child state marker. Sealed: the set of states is closed.
pub trait ChildPhase: Sealed {
    /// The stored and wire state.
    const STATE: ChildState;
}

/// No active run and no worker; the transcript rests at its last completed leaf.
#[derive(Debug)]
pub struct Ready {
    _private: (),
}

/// A run is active (in run state `R`) and more may wait in the queue.
#[derive(Debug)]
pub struct Running<R: ActivePhase = run::Running> {
    active: Run<R>,
    queue: FollowUpQueue,
}

/// A running child whose active run has a stop requested.
pub type Stopping = Running<run::StopRequested>;

/// Execution ended without a confirmed terminal result; only `resume` continues.
#[derive(Debug)]
pub struct Interrupted {
    run: Option<RunId>,
    reason: String,
}

impl Sealed for Ready {}
impl<R: ActivePhase> Sealed for Running<R> {}
impl Sealed for Interrupted {}
impl ChildPhase for Ready {
    const STATE: ChildState = ChildState::Ready;
}
impl<R: ActivePhase> ChildPhase for Running<R> {
    const STATE: ChildState = ChildState::Running;
}
impl ChildPhase for Interrupted {
    const STATE: ChildState = ChildState::Interrupted;
}

/// A persistent child session in state `S`.
#[derive(Debug)]
pub struct Child<S: ChildPhase> {
    id: ChildId,
    queue_capacity: u32,
    last_leaf: Option<LeafRef>,
    state: S,
}

/// What a settled run leaves behind: the idle child, or the child running the next
/// queued run.
#[derive(Debug)]
pub enum Next {
    /// Nothing was queued; the worker may close.
    Idle(Child<Ready>),
    /// The head of the queue started.
    Started(Child<Running>),
}

/// A settled active run: its terminal outcome, queued runs withdrawn with it, and the
/// child afterwards.
#[derive(Debug)]
#[must_use = "the outcome and withdrawn runs must be stored, and `next` is the child now"]
pub struct Settled<O> {
    /// The terminal outcome of the run that was active.
    pub outcome: O,
    /// Queued runs that will never start (a failure clears the queue).
    pub withdrawn: Vec<Stopped>,
    /// The child afterwards.
    pub next: Next,
    /// Every run status this settlement changed, as its typed steps made them: the active
    /// run's end, the withdrawn runs, the run that started next.
    pub moves: Vec<RunMove>,
}

/// A compaction the core accepted: the `compacted` event to record. Only
/// [`Child::compacted`] makes one.
#[derive(Debug, PartialEq, Eq)]
pub struct Compaction {
    event: EventBody,
}

impl Compaction {
    /// The `compacted` event.
    pub fn event(&self) -> &EventBody {
        &self.event
    }
}

/// An accepted stop: the stopping child and the queued runs it cleared.
#[derive(Debug)]
#[must_use = "`child` is the stopping child and `withdrawn` must be stored as stopped"]
pub struct StopAccepted {
    /// The child, waiting for the supervisor's confirmation.
    pub child: Child<Stopping>,
    /// Queued follow-ups cleared by the stop, oldest first.
    pub withdrawn: Vec<Stopped>,
    /// The run statuses the stop changed (the active run asked to stop, the queue
    /// withdrawn), as its typed steps made them.
    pub moves: Vec<RunMove>,
}

/// A lost worker: the interrupted child, its interrupted active run, and the queued runs
/// that will never start.
#[derive(Debug)]
#[must_use = "`child` is the interrupted child and the runs must be stored as interrupted"]
pub struct LostWorker {
    /// The child, now interrupted.
    pub child: Child<Interrupted>,
    /// The run that was active.
    pub run: run::Interrupted,
    /// Queued runs, interrupted with it (never started, never replayed).
    pub abandoned: Vec<run::Interrupted>,
    /// The run statuses the loss changed, as its typed steps made them.
    pub moves: Vec<RunMove>,
}

impl<S: ChildPhase> Child<S> {
    /// The child's id.
    pub fn id(&self) -> ChildId {
        self.id
    }

    /// The stored and wire state.
    pub fn state(&self) -> ChildState {
        S::STATE
    }

    /// The last completed transcript leaf, `None` if no run ever completed.
    pub fn last_leaf(&self) -> Option<&LeafRef> {
        self.last_leaf.as_ref()
    }

    /// The bound on queued follow-ups.
    pub fn queue_capacity(&self) -> u32 {
        self.queue_capacity
    }

    fn with<T: ChildPhase>(self, state: T) -> Child<T> {
        Child {
            id: self.id,
            queue_capacity: self.queue_capacity,
            last_leaf: self.last_leaf,
            state,
        }
    }

    fn run_with(self, run: Run<Queued>) -> Child<Running> {
        let queue = FollowUpQueue::new(self.queue_capacity);
        self.with(Running {
            active: run.start(),
            queue,
        })
    }

    fn check(&self, checkpoint: &Checkpoint) -> Result<(), CheckpointIncompatible> {
        let reason = if checkpoint.child() != self.id {
            format!("the checkpoint belongs to child {}", checkpoint.child())
        } else if checkpoint.leaf() != self.last_leaf.as_ref() {
            "the checkpoint is not the child's last completed leaf".to_owned()
        } else {
            return Ok(());
        };
        Err(CheckpointIncompatible {
            child: self.id,
            reason,
        })
    }

    /// Verify this child's recorded last completed leaf against the leaf observed in its
    /// transcript under that id; see [`Checkpoint::verify`].
    pub fn checkpoint(
        &self,
        observed: Option<&ObservedLeaf>,
    ) -> Result<Checkpoint, CheckpointIncompatible> {
        Checkpoint::verify(self.id, self.last_leaf.as_ref(), observed)
    }
}

impl Child<Running> {
    /// Spawn: a new child and its first run, already running.
    pub fn spawn(id: ChildId, first: RunId, prompt: String, queue_capacity: u32) -> Self {
        let ready = Child {
            id,
            queue_capacity,
            last_leaf: None,
            state: Ready { _private: () },
        };
        ready.run_with(Run::queued(id, first, prompt))
    }

    /// Steer the active run. Needs the worker's [`Steering`] capability; without it the
    /// caller answers `unsupported_steer` and never turns the message into a follow-up.
    /// Returns the steered run.
    pub fn steer(&self, steering: Steering) -> RunId {
        let _spent = steering;
        self.state.active.id()
    }

    /// Request a stop of the active run. `expected` must be its id: otherwise
    /// `stale_run` and the child comes back unchanged. A matching stop clears every
    /// queued follow-up.
    pub fn stop(self, expected: RunId) -> Result<StopAccepted, (Self, StaleRun)> {
        let Running { active, mut queue } = self.state;
        match active.request_stop(expected) {
            Ok(stopping) => {
                let mut moves = vec![RunMove::step::<Run<run::Running>, _>(
                    stopping.id(),
                    &stopping,
                )];
                let withdrawn = withdraw_all(&mut queue, &mut moves);
                let child = Child {
                    id: self.id,
                    queue_capacity: self.queue_capacity,
                    last_leaf: self.last_leaf,
                    state: Running {
                        active: stopping,
                        queue,
                    },
                };
                Ok(StopAccepted {
                    child,
                    withdrawn,
                    moves,
                })
            }
            Err((active, err)) => {
                let back = Child {
                    id: self.id,
                    queue_capacity: self.queue_capacity,
                    last_leaf: self.last_leaf,
                    state: Running { active, queue },
                };
                Err((back, err))
            }
        }
    }
}

impl Child<Stopping> {
    /// The supervisor confirmed the stop: the run is `stopped`, and follow-ups queued
    /// after the stop request dispatch.
    pub fn confirm_stop(self, proof: StopConfirmed) -> Result<Settled<Stopped>, (Self, StaleRun)> {
        let (child, Running { active, queue }) = self.split();
        match active.confirm_stop(proof) {
            Ok(outcome) => {
                let ended = RunMove::step::<Run<StopRequested>, _>(outcome.id(), &outcome);
                Ok(child.dispatch(outcome, queue, ended))
            }
            Err((active, err)) => Err((child.with(Running { active, queue }), err)),
        }
    }
}

impl<R: ActivePhase> Child<Running<R>> {
    /// The active run.
    pub fn active_run(&self) -> &Run<R> {
        &self.state.active
    }

    /// The worker compacted the active run's transcript into a new branch, as `report`
    /// proves; the child's state does not move (its checkpoint names the new branch's leaf
    /// once the run completes). A report about another run or child is `stale_run`.
    pub fn compacted(&self, report: CompactionReported) -> Result<Compaction, StaleRun> {
        let active = self.state.active.id();
        if report.run() != active || report.child() != self.id {
            return Err(StaleRun {
                child: self.id,
                expected: report.run(),
                active: Some(active),
            });
        }
        let (tokens_before, tokens_after) = report.tokens();
        Ok(Compaction {
            event: EventBody::Compacted {
                run_id: active,
                tokens_before,
                tokens_after,
                branch_from: report.branch_from().to_owned(),
            },
        })
    }

    /// The follow-up queue.
    pub fn queue(&self) -> &FollowUpQueue {
        &self.state.queue
    }

    /// Queue a follow-up behind the active run; returns its 1-based position. A full
    /// queue is `limit_exceeded` and changes nothing.
    pub fn followup(
        mut self,
        run: RunId,
        prompt: String,
    ) -> Result<(Self, usize), (Self, LimitExceeded)> {
        match self.state.queue.push(Run::queued(self.id, run, prompt)) {
            Ok(position) => Ok((self, position)),
            Err((_, err)) => Err((self, err)),
        }
    }

    /// The worker finished the active run and its leaf was recorded; the next queued
    /// run starts. A proof for another run is `stale_run`.
    pub fn complete(self, proof: LeafRecorded) -> Result<Settled<Completed>, (Self, StaleRun)> {
        self.complete_with(proof, None)
    }

    /// The active run reached `budget`; its handoff summary's leaf was recorded and the
    /// next queued run starts, as after a completion.
    pub fn exhaust(
        self,
        proof: LeafRecorded,
        budget: BudgetReached,
    ) -> Result<Settled<Completed>, (Self, StaleRun)> {
        self.complete_with(proof, Some(budget))
    }

    fn complete_with(
        self,
        proof: LeafRecorded,
        budget: Option<BudgetReached>,
    ) -> Result<Settled<Completed>, (Self, StaleRun)> {
        let (child, Running { active, queue }) = self.split();
        match run::complete_active(active, proof, budget) {
            Ok(outcome) => {
                let ended = RunMove::step::<Run<R>, _>(outcome.id(), &outcome);
                let mut child = child;
                child.last_leaf = Some(outcome.leaf().clone());
                Ok(child.dispatch(outcome, queue, ended))
            }
            Err((active, err)) => Err((child.with(Running { active, queue }), err)),
        }
    }

    /// The active run `run` failed. Queued follow-ups are withdrawn (they were written
    /// against a result that never came). Another run id is `stale_run`.
    pub fn fail(self, run: RunId, failure: Failure) -> Result<Settled<Failed>, (Self, StaleRun)> {
        if run != self.state.active.id() {
            let err = StaleRun {
                child: self.id,
                expected: run,
                active: Some(self.state.active.id()),
            };
            return Err((self, err));
        }
        let (child, Running { active, mut queue }) = self.split();
        let outcome = run::fail_active(active, failure);
        let mut moves = vec![RunMove::step::<Run<R>, _>(outcome.id(), &outcome)];
        let withdrawn = withdraw_all(&mut queue, &mut moves);
        let ready = child.with(Ready { _private: () });
        Ok(Settled {
            outcome,
            withdrawn,
            next: Next::Idle(ready),
            moves,
        })
    }

    /// The worker is gone without confirming a terminal result: the active run and the
    /// child are interrupted, queued runs with them. Nothing is retried.
    pub fn lose_worker(self, reason: &str) -> LostWorker {
        let (child, Running { active, mut queue }) = self.split();
        let run_id = active.id();
        let run = run::interrupt_active(active, reason);
        let mut moves = vec![RunMove::step::<Run<R>, _>(run.id(), &run)];
        let abandoned: Vec<run::Interrupted> = queue
            .drain()
            .into_iter()
            .map(|r| r.abandon(reason))
            .collect();
        moves.extend(
            abandoned
                .iter()
                .map(|a| RunMove::step::<Run<Queued>, _>(a.id(), a)),
        );
        let child = child.with(Interrupted {
            run: Some(run_id),
            reason: reason.to_owned(),
        });
        LostWorker {
            child,
            run,
            abandoned,
            moves,
        }
    }

    fn split(self) -> (Child<Ready>, Running<R>) {
        let Child {
            id,
            queue_capacity,
            last_leaf,
            state,
        } = self;
        let shell = Child {
            id,
            queue_capacity,
            last_leaf,
            state: Ready { _private: () },
        };
        (shell, state)
    }
}

impl Child<Ready> {
    /// Start `run` on this idle child (a follow-up while idle starts immediately).
    /// A run created for another child is refused and given back.
    pub fn start(
        self,
        run: Run<Queued>,
    ) -> Result<Child<Running>, (Self, Run<Queued>, ForeignRun)> {
        if run.child() != self.id {
            let err = ForeignRun {
                child: self.id,
                run: run.id(),
                owner: run.child(),
            };
            return Err((self, run, err));
        }
        Ok(self.run_with(run))
    }

    /// A follow-up on an idle child: a new run that starts immediately.
    pub fn followup(self, run: RunId, prompt: String) -> Child<Running> {
        let queued = Run::queued(self.id, run, prompt);
        self.run_with(queued)
    }

    /// Resume without a message (after a broker restart): stays ready at the verified
    /// checkpoint; starts no run.
    pub fn resume(
        self,
        checkpoint: Checkpoint,
    ) -> Result<Child<Ready>, (Self, CheckpointIncompatible)> {
        match self.check(&checkpoint) {
            Ok(()) => Ok(self),
            Err(err) => Err((self, err)),
        }
    }

    /// Resume with a message: a new run from the verified checkpoint.
    pub fn resume_with(
        self,
        checkpoint: Checkpoint,
        run: RunId,
        prompt: String,
    ) -> Result<Child<Running>, (Self, CheckpointIncompatible)> {
        match self.check(&checkpoint) {
            Ok(()) => Ok(self.followup(run, prompt)),
            Err(err) => Err((self, err)),
        }
    }

    /// Settle into this idle shell after the active run's `ended` step: start the queue's
    /// head if there is one.
    fn dispatch<O>(self, outcome: O, mut queue: FollowUpQueue, ended: RunMove) -> Settled<O> {
        let mut moves = vec![ended];
        let next = match queue.pop() {
            None => Next::Idle(self),
            Some(head) => {
                let active = head.start();
                moves.push(RunMove::step::<Run<Queued>, _>(active.id(), &active));
                Next::Started(self.with(Running { active, queue }))
            }
        };
        Settled {
            outcome,
            withdrawn: Vec::new(),
            next,
            moves,
        }
    }
}

/// Withdraws every queued run (never started), recording each step in `moves`.
fn withdraw_all(queue: &mut FollowUpQueue, moves: &mut Vec<RunMove>) -> Vec<Stopped> {
    let withdrawn: Vec<Stopped> = queue.drain().into_iter().map(Run::withdraw).collect();
    moves.extend(
        withdrawn
            .iter()
            .map(|w| RunMove::step::<Run<Queued>, _>(w.id(), w)),
    );
    withdrawn
}

impl Child<Interrupted> {
    /// The run that was active when the worker was lost.
    pub fn interrupted_run(&self) -> Option<RunId> {
        self.state.run
    }

    /// Why execution ended.
    pub fn reason(&self) -> &str {
        &self.state.reason
    }

    /// Resume without a message: a ready child at the verified checkpoint; no run, no
    /// worker.
    pub fn resume(
        self,
        checkpoint: Checkpoint,
    ) -> Result<Child<Ready>, (Self, CheckpointIncompatible)> {
        match self.check(&checkpoint) {
            Ok(()) => Ok(self.with(Ready { _private: () })),
            Err(err) => Err((self, err)),
        }
    }

    /// Resume with a message: a running child with a new run branched from the verified
    /// checkpoint. The interrupted prompt is never replayed.
    pub fn resume_with(
        self,
        checkpoint: Checkpoint,
        run: RunId,
        prompt: String,
    ) -> Result<Child<Running>, (Self, CheckpointIncompatible)> {
        match self.check(&checkpoint) {
            Ok(()) => Ok(self.with(Ready { _private: () }).followup(run, prompt)),
            Err(err) => Err((self, err)),
        }
    }
}

/// Rebuild typed children from storage; only `AnyChild::load` calls these.
pub(crate) mod restore {
    use super::*;

    pub(crate) fn ready(
        id: ChildId,
        queue_capacity: u32,
        last_leaf: Option<LeafRef>,
    ) -> Child<Ready> {
        Child {
            id,
            queue_capacity,
            last_leaf,
            state: Ready { _private: () },
        }
    }

    pub(crate) fn running<R: ActivePhase>(
        shell: Child<Ready>,
        active: Run<R>,
        queue: FollowUpQueue,
    ) -> Child<Running<R>> {
        shell.with(Running { active, queue })
    }

    pub(crate) fn interrupted(
        shell: Child<Ready>,
        run: Option<RunId>,
        reason: String,
    ) -> Child<Interrupted> {
        shell.with(Interrupted { run, reason })
    }
}
