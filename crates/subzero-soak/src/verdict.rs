//! The invariants a soak checks, and what it reports when one does not hold.

use std::fmt;

/// The properties checked after every fault (and, for the kernel's view, all the time).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Invariant {
    /// Every child settles (ready or interrupted, no active run) within the bound once a
    /// broker is back.
    Settles,
    /// No run reported terminal (completed above all) is lost or changes status, and a
    /// completed run's artifact reads back in full, the same bytes every time.
    ResultsKept,
    /// At no moment do two workers of one child run (the process table and the child lock
    /// descriptors they hold).
    OneWorkerPerChild,
    /// At no moment do two write-capable runs of one write scope run (the process table,
    /// the writer-slot descriptors and the children's templates). The workspace is one
    /// scope for every shared coder; an isolated coder's checkout is a scope of its own.
    OneWriterPerScope,
    /// Each child's event sequence only grows: a sequence number once seen always names the
    /// same event, and no cursor goes back.
    EventsOnlyGrow,
    /// Every interrupted child resumes.
    InterruptedResumes,
    /// No process of a stopped or settled child remains.
    NoLeftoverProcess,
    /// `PRAGMA integrity_check` answers `ok`.
    DatabaseIntact,
    /// Every answer is either ok (and of the tool's output type) or a documented typed error;
    /// every call is answered unless its broker was killed under it; a bad call is refused.
    TypedAnswers,
    /// A call sent again with the same `requestId` and arguments gets the same receipt.
    IdempotentRetries,
    /// The model key is in no file the soak's brokers, workers and tools could write.
    KeyNeverOnDisk,
    /// Every checkout the ledger holds unfinished still has its directory, and a recorded
    /// change not applied or discarded still has its ref `refs/subzero/children/<child>` at
    /// its head commit; no checkout directory is unknown to the ledger, save one a spawn
    /// cut by a broker kill left before its child was stored.
    CheckoutsKept,
    /// A change lands at most once: of all `subzero_apply` calls of one child at most one
    /// succeeds, every line an applied change added is in the workspace exactly once, a
    /// discarded change's lines are not there, and no line a tool wrote is there twice.
    ChangesLandOnce,
}

impl Invariant {
    pub const ALL: [Invariant; 13] = [
        Invariant::Settles,
        Invariant::ResultsKept,
        Invariant::OneWorkerPerChild,
        Invariant::OneWriterPerScope,
        Invariant::EventsOnlyGrow,
        Invariant::InterruptedResumes,
        Invariant::NoLeftoverProcess,
        Invariant::DatabaseIntact,
        Invariant::TypedAnswers,
        Invariant::IdempotentRetries,
        Invariant::KeyNeverOnDisk,
        Invariant::CheckoutsKept,
        Invariant::ChangesLandOnce,
    ];

    pub fn name(&self) -> &'static str {
        match self {
            Invariant::Settles => "children-settle",
            Invariant::ResultsKept => "results-kept",
            Invariant::OneWorkerPerChild => "one-worker-per-child",
            Invariant::OneWriterPerScope => "one-writer-per-scope",
            Invariant::EventsOnlyGrow => "events-only-grow",
            Invariant::InterruptedResumes => "interrupted-children-resume",
            Invariant::NoLeftoverProcess => "no-leftover-process",
            Invariant::DatabaseIntact => "database-intact",
            Invariant::TypedAnswers => "typed-answers",
            Invariant::IdempotentRetries => "idempotent-retries",
            Invariant::KeyNeverOnDisk => "key-never-on-disk",
            Invariant::CheckoutsKept => "checkouts-kept",
            Invariant::ChangesLandOnce => "changes-land-once",
        }
    }
}

impl fmt::Display for Invariant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One invariant that did not hold, and where.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    pub invariant: Invariant,
    /// Steps of the schedule started when it was seen.
    pub step: usize,
    pub detail: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} (after step {}): {}",
            self.invariant, self.step, self.detail
        )
    }
}

/// The violations of one run, shared by the calls, the checks and the kernel monitor.
#[derive(Debug, Default)]
pub struct Verdicts(std::sync::Mutex<Vec<Violation>>);

impl Verdicts {
    /// Records a violation (once: the same invariant with the same detail is kept once).
    pub fn add(&self, invariant: Invariant, step: usize, detail: impl Into<String>) {
        let detail = detail.into();
        let mut all = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if !all
            .iter()
            .any(|v| v.invariant == invariant && v.detail == detail)
        {
            all.push(Violation {
                invariant,
                step,
                detail,
            });
        }
    }

    pub fn all(&self) -> Vec<Violation> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    pub fn is_empty(&self) -> bool {
        self.all().is_empty()
    }
}
