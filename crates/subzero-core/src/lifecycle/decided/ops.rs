//! The requests on a stored child, each deciding a whole [`Decided`] value: the lifecycle
//! transition (`AnyChild`'s operations), the custody check and the custody after
//! ([`Custody`]'s decisions), the phase, and every run move they imply. A refusal is a
//! typed [`LifecycleError`] and nothing was decided.

use super::{Decided, decision};
use crate::budget::BudgetReached;
use crate::ids::{ChildId, RunId};
use crate::lifecycle::any::{
    AnyChild, AnyRun, Delivery, Resumed, RunReport, Settlement, StopReceipt, WorkerLost,
};
use crate::lifecycle::child::Compaction;
use crate::lifecycle::custody::{Activity, Custody, LockObservation, Recovery};
use crate::lifecycle::error::{LifecycleError, LoadError, StaleRun};
use crate::lifecycle::proof::{CompactionReported, LeafRecorded, ObservedLeaf, StopConfirmed};
use crate::lifecycle::run::Failure;
use crate::lifecycle::storage::Loaded;
use crate::state::{Phase, RunStatus};

/// A new child and its first run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Spawned {
    /// The child.
    pub child: ChildId,
    /// Its first run, running.
    pub run: RunId,
}

/// What the store knows of a run id a stop names, beyond the active run (which is all
/// the core knows).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NamedRun {
    /// A run of this child (one that already ended, when it is not the active run).
    OfThisChild,
    /// No run this child ever had.
    Unknown,
}

/// How the active run ended, with the proof each ending needs.
#[derive(Debug)]
pub enum RunEnding {
    /// Completed; its leaf was recorded.
    Completed(LeafRecorded),
    /// Reached a budget; its handoff summary's leaf was recorded.
    Exhausted(LeafRecorded, BudgetReached),
    /// Failed.
    Failed {
        /// The run the report is about; must be the active run.
        run: RunId,
        /// Why.
        failure: Failure,
    },
    /// The supervisor confirmed the stop.
    Stopped(StopConfirmed),
    /// The worker was lost without a confirmed result.
    Lost {
        /// The run the report is about; must be the active run.
        run: RunId,
        /// Why.
        reason: String,
        /// Whether the worker's process tree is proven gone (the child lock is free).
        tree_gone: bool,
    },
}

/// A settled active run and what followed it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SettledRun {
    /// The run that ended.
    pub run: RunId,
    /// Its terminal status.
    pub status: RunStatus,
    /// Queued runs taken out with it (never started).
    pub withdrawn: Vec<RunId>,
    /// The queued run that starts next.
    pub started: Option<RunId>,
}

/// What recovery of a child whose owner is gone decided.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Recovered {
    /// The record changed since it was observed, or needs nothing.
    Unchanged,
    /// A process still holds the child: it waits as `recovery_required`.
    Held,
    /// An idle child's stale owner was cleared.
    Released,
    /// The active run's worker is gone: the run, its queue and the child are interrupted.
    Interrupted {
        /// The interrupted run.
        run: RunId,
        /// Queued runs interrupted with it.
        abandoned: Vec<RunId>,
    },
}

/// The internal error for a settled run that the child had no active run for.
fn no_active_run(child: ChildId, what: &str) -> LifecycleError {
    LoadError {
        subject: child.to_string(),
        reason: format!("{what} on a child without an active run"),
    }
    .into()
}

impl Decided<Spawned> {
    /// Spawn: a new child with its first run running, held by `owner` (whose broker took
    /// the child's lock before admitting it).
    pub fn spawn(
        id: ChildId,
        first: RunId,
        prompt: String,
        queue_capacity: u32,
        owner: &str,
    ) -> Decided<Spawned> {
        let child = AnyChild::spawn(id, first, prompt.clone(), queue_capacity);
        let custody = Custody::spawned(&child, owner);
        let phase = custody.phase_of(&child);
        let spawned = Spawned {
            child: id,
            run: first,
        };
        decision(None, child, custody, phase, spawned).admitting(first, RunStatus::Running, prompt)
    }
}

impl Loaded {
    /// `send(followup)`: behind an active run it queues (any holder's worker serves it);
    /// on a ready child it starts, which only the child's holder `owner` may do.
    pub fn followup(
        mut self,
        run: RunId,
        prompt: String,
        owner: &str,
    ) -> Result<Decided<Delivery>, LifecycleError> {
        let delivery = self.child.followup(run, prompt.clone())?;
        let (status, phase) = match delivery {
            Delivery::Queued { .. } => {
                self.custody.check_held()?;
                // The child is unchanged but for its queue: it keeps the phase its worker
                // reported.
                (RunStatus::Queued, self.phase)
            }
            Delivery::Started => {
                self.custody.check_owner(owner)?;
                (RunStatus::Running, self.custody.phase_of(&self.child))
            }
        };
        let decided = decision(Some(self.origin), self.child, self.custody, phase, delivery);
        Ok(decided.admitting(run, status, prompt))
    }

    /// `stop(expectedRunId)` by the child's holder `owner`: the active run becomes
    /// `stop_requested` and the queue is withdrawn; a repeated stop changes nothing. A
    /// stop on a ready child naming one of its runs (`named`) is `not_running` — that
    /// run already ended — and any other id `stale_run`.
    pub fn stop(
        mut self,
        expected: RunId,
        named: NamedRun,
        owner: &str,
    ) -> Result<Decided<StopReceipt>, LifecycleError> {
        let receipt = match self.child.stop(expected) {
            Ok(receipt) => receipt,
            Err(LifecycleError::StaleRun(e))
                if e.active.is_none() && named == NamedRun::OfThisChild =>
            {
                return Err(self.child.ended_run("stop"));
            }
            Err(e) => return Err(e),
        };
        self.custody.check_owner(owner)?;
        let phase = self.custody.phase_of(&self.child);
        let newly = receipt.newly_requested;
        let moves = receipt.moves.clone();
        let decided = decision(Some(self.origin), self.child, self.custody, phase, receipt);
        if !newly {
            return Ok(decided.unchanged());
        }
        Ok(decided.moved(moves))
    }

    /// The active run ended as `ending` says (with its proof), reported to its holder
    /// `owner`. The next queued run starts after a completion or a confirmed stop; a
    /// failure withdraws the queue and a lost worker abandons it. With nothing next the
    /// child comes to rest: free, or `recovery_required` while a lost worker's tree is
    /// not proven gone.
    pub fn settle(
        mut self,
        ending: RunEnding,
        owner: &str,
    ) -> Result<Decided<SettledRun>, LifecycleError> {
        let id = self.child.id();
        let before = self.child.active_run();
        let (settled, tree_gone) = match ending {
            RunEnding::Completed(proof) => (self.child.settle(RunReport::Completed(proof))?, true),
            RunEnding::Exhausted(proof, budget) => (
                self.child.settle(RunReport::Exhausted(proof, budget))?,
                true,
            ),
            RunEnding::Failed { run, failure } => {
                (self.child.settle(RunReport::Failed { run, failure })?, true)
            }
            RunEnding::Stopped(proof) => (self.child.confirm_stop(proof)?, true),
            RunEnding::Lost {
                run,
                reason,
                tree_gone,
            } => {
                // The core's `lose_worker` is about whatever run is active; the report
                // names one, so it must be that one.
                if let Some((active, _)) = before
                    && active != run
                {
                    return Err(StaleRun {
                        child: id,
                        expected: run,
                        active: Some(active),
                    }
                    .into());
                }
                (lost(self.child.lose_worker(&reason)?), tree_gone)
            }
        };
        if before.is_none() {
            return Err(no_active_run(id, "a settlement"));
        }
        self.custody.check_owner(owner)?;
        let state = self.child.state();
        let custody = match settled.started {
            Some(_) => self.custody,
            None => self.custody.at_rest(state, tree_gone),
        };
        let phase = custody.phase_of(&self.child);
        let outcome = SettledRun {
            run: settled.run.id(),
            status: settled.run.status(),
            withdrawn: settled.withdrawn.iter().map(AnyRun::id).collect(),
            started: settled.started,
        };
        Ok(decision(Some(self.origin), self.child, custody, phase, outcome).moved(settled.moves))
    }

    /// `resume(checkpoint, message?)` by the child's holder `owner`: `observed` is the
    /// leaf the transcript holds at the recorded one (read by the caller), checked
    /// against the leaf recorded in this very load; with a message a new run starts.
    pub fn resume(
        mut self,
        observed: Option<&ObservedLeaf>,
        message: Option<(RunId, String)>,
        owner: &str,
    ) -> Result<Decided<Resumed>, LifecycleError> {
        let checkpoint = self.child.checkpoint(observed)?;
        self.custody.check_owner(owner)?;
        let admitted = message.clone();
        let resumed = self.child.resume(checkpoint, message)?;
        let custody = self.custody.resumed(resumed.state);
        let phase = custody.phase_of(&self.child);
        let decided = decision(Some(self.origin), self.child, custody, phase, resumed);
        Ok(match admitted {
            Some((run, prompt)) => decided.admitting(run, RunStatus::Running, prompt),
            None => decided,
        })
    }

    /// `owner` (whose broker holds the child's kernel lock) claims the idle child.
    pub fn claim(self, owner: &str) -> Result<Decided<()>, LifecycleError> {
        let custody = self.custody.claim(owner)?;
        Ok(self.with_custody(custody))
    }

    /// `owner` gives back its claim on the idle child.
    pub fn release(self, owner: &str) -> Result<Decided<()>, LifecycleError> {
        let custody = self.custody.release(owner)?;
        Ok(self.with_custody(custody))
    }

    fn with_custody(self, custody: Custody) -> Decided<()> {
        let phase = custody.phase_of(&self.child);
        decision(Some(self.origin), self.child, custody, phase, ())
    }

    /// Recovery of a child whose owner is gone, observed at `observed_generation` with
    /// its lock as `lock`; a freed lock interrupts the active run with `reason`.
    pub fn recover(
        mut self,
        observed_generation: u64,
        lock: LockObservation,
        reason: &str,
    ) -> Result<Decided<Recovered>, LifecycleError> {
        let custody = match self.custody.recover(observed_generation, lock) {
            Recovery::Unchanged => {
                let (custody, phase) = (self.custody.clone(), self.phase);
                return Ok(self
                    .decide(custody, phase, Recovered::Unchanged)
                    .unchanged());
            }
            Recovery::Hold(held) => {
                let phase = held.phase_of(&self.child);
                // Already marked: every access to such a child re-checks it, and none may
                // look like a change.
                let marked = held == self.custody && phase == self.phase;
                let decided = self.decide(held, phase, Recovered::Held);
                return Ok(if marked { decided.unchanged() } else { decided });
            }
            Recovery::Release(freed) => {
                let phase = freed.phase_of(&self.child);
                return Ok(self.decide(freed, phase, Recovered::Released));
            }
            Recovery::LoseWorker(custody) => custody,
        };
        let Some((run, _)) = self.child.active_run() else {
            return Err(no_active_run(self.child.id(), "a lost worker"));
        };
        let lost = self.child.lose_worker(reason)?;
        let phase = custody.phase_of(&self.child);
        let outcome = Recovered::Interrupted {
            run,
            abandoned: lost.abandoned.iter().map(AnyRun::id).collect(),
        };
        Ok(self.decide(custody, phase, outcome).moved(lost.moves))
    }

    fn decide<T>(self, custody: Custody, phase: Phase, outcome: T) -> Decided<T> {
        decision(Some(self.origin), self.child, custody, phase, outcome)
    }

    /// The worker of the child held by `owner` compacted the active run's transcript
    /// (`report`): the core accepts it for the active run and decides the `compacted` event;
    /// nothing else moves.
    pub fn record_compaction(
        self,
        report: CompactionReported,
        owner: &str,
    ) -> Result<Decided<Compaction>, LifecycleError> {
        self.custody.check_owner(owner)?;
        let compaction = self.child.compacted(report)?;
        let (custody, phase) = (self.custody.clone(), self.phase);
        Ok(self.decide(custody, phase, compaction).unchanged())
    }

    /// The worker of the child held by `owner` reports `activity`; the core decides the
    /// phase it shows (a stopping child stays `stopping`).
    pub fn report_activity(
        self,
        activity: Activity,
        owner: &str,
    ) -> Result<Decided<Phase>, LifecycleError> {
        self.custody.check_owner(owner)?;
        let phase = self.child.report_activity(activity)?;
        let unchanged = phase == self.phase;
        let custody = self.custody.clone();
        let decided = self.decide(custody, phase, phase);
        Ok(if unchanged {
            decided.unchanged()
        } else {
            decided
        })
    }
}

/// A lost worker as a settlement: the interrupted run and the abandoned queue.
fn lost(lost: WorkerLost) -> Settlement {
    Settlement {
        run: lost.run,
        withdrawn: lost.abandoned,
        started: None,
        moves: lost.moves,
    }
}
