//! What the parent has been told: children by slot, runs with their plans and terminal
//! statuses, every event sequence number seen, the artifacts read back, the receipts of
//! calls that carried a `requestId`. Every answer passes through here, and the checks that
//! compare an answer with an earlier one (events, terminal statuses, receipts) happen as
//! it is recorded.

use std::collections::{BTreeMap, HashMap};

use serde_json::Value;
use subzero_protocol::{ChildEvent, ChildSnapshot, RunId};

use crate::plan::Plan;
use crate::verdict::{Invariant, Violation};

/// A well-formed child id no broker ever made (ULIDs of the year 1970).
pub const UNKNOWN_CHILD: &str = "ch_00000000000000000000000000";
/// A well-formed artifact id no broker ever made.
pub const UNKNOWN_ARTIFACT: &str = "art_00000000000000000000000000";

#[derive(Debug, Default)]
pub struct Ledger {
    slots: HashMap<usize, String>,
    children: BTreeMap<String, ChildLog>,
    runs: BTreeMap<String, RunLog>,
    /// Calls that carried a `requestId`, by step: the tool and the exact arguments.
    sent: HashMap<usize, (String, Value)>,
    /// The first ok answer of each such call (or of its retries), by step.
    receipts: HashMap<usize, Value>,
    /// Every `subzero_apply` answer that tells something, by child.
    applies: BTreeMap<String, ApplyLog>,
    /// Isolated spawns cut by a broker kill: each may have left a checkout directory whose
    /// child was never stored.
    cut_isolated_spawns: u64,
}

/// What the `subzero_apply` calls of one child were answered.
#[derive(Clone, Debug, Default)]
pub struct ApplyLog {
    /// The steps whose call succeeded, with the state it answered.
    pub ok: Vec<(usize, String)>,
    /// Whether a call was cut by a broker kill (it may have landed the change before the
    /// ledger heard of it).
    pub cut: bool,
    /// Refusals, by code.
    pub refused: BTreeMap<String, u64>,
}

#[derive(Debug, Default)]
struct ChildLog {
    /// The next cursor the last answer gave.
    cursor: u64,
    /// Every event seen: seq → (type, run).
    events: BTreeMap<u64, (&'static str, Option<String>)>,
    active_run: Option<String>,
    runs: Vec<String>,
    artifacts: Vec<String>,
}

/// One run as the parent learned of it.
#[derive(Clone, Debug, Default)]
pub struct RunLog {
    pub child: String,
    pub plan: Option<Plan>,
    /// The terminal status first reported, and the artifact with it.
    pub status: Option<String>,
    pub artifact: Option<String>,
    /// The artifact as first read back in full: bytes and SHA-256.
    pub digest: Option<(u64, String)>,
}

impl Ledger {
    /// The child a slot's spawn made, once its answer came.
    pub fn child_of(&self, slot: Option<usize>) -> Option<String> {
        self.slots.get(&slot?).cloned()
    }

    /// The id to use for `slot`: its child, or one nobody has.
    pub fn child_id(&self, slot: Option<usize>) -> String {
        self.child_of(slot)
            .unwrap_or_else(|| UNKNOWN_CHILD.to_owned())
    }

    pub fn record_spawn(&mut self, slot: usize, child: &str, run: &str, plan: &Plan) {
        self.slots.entry(slot).or_insert_with(|| child.to_owned());
        self.record_run(child, run, Some(plan));
    }

    pub fn record_run(&mut self, child: &str, run: &str, plan: Option<&Plan>) {
        let log = self.children.entry(child.to_owned()).or_default();
        if !log.runs.iter().any(|r| r == run) {
            log.runs.push(run.to_owned());
        }
        let entry = self.runs.entry(run.to_owned()).or_default();
        entry.child = child.to_owned();
        if entry.plan.is_none() {
            entry.plan = plan.cloned();
        }
    }

    pub fn cursor(&self, child: &str) -> u64 {
        self.children.get(child).map_or(0, |c| c.cursor)
    }

    pub fn active_run(&self, child: &str) -> Option<String> {
        self.children.get(child)?.active_run.clone()
    }

    /// A run of the child that is not its active one, if the parent knows one.
    pub fn other_run(&self, child: &str) -> Option<String> {
        let log = self.children.get(child)?;
        log.runs
            .iter()
            .find(|r| Some(*r) != log.active_run.as_ref())
            .cloned()
    }

    /// The newest artifact of the child the parent learned of.
    pub fn artifact(&self, child: &str) -> Option<String> {
        self.children.get(child)?.artifacts.last().cloned()
    }

    pub fn children(&self) -> Vec<String> {
        self.children.keys().cloned().collect()
    }

    /// The tag of a run's plan, when the parent knows it.
    pub fn tag_of(&self, run: &str) -> Option<String> {
        Some(self.runs.get(run)?.plan.as_ref()?.tag.clone())
    }

    /// Runs reported terminal, with what was reported.
    pub fn terminal_runs(&self) -> Vec<(String, RunLog)> {
        self.runs
            .iter()
            .filter(|(_, r)| r.status.is_some())
            .map(|(id, r)| (id.clone(), r.clone()))
            .collect()
    }

    /// Records the digest of a full read; a different one than before is a violation.
    pub fn record_digest(&mut self, run: &str, digest: (u64, String)) -> Option<String> {
        let log = self.runs.get_mut(run)?;
        match &log.digest {
            None => {
                log.digest = Some(digest);
                None
            }
            Some(first) if *first == digest => None,
            Some(first) => Some(format!(
                "artifact {} of run {run} read back as {} bytes sha256 {}, first read as {} bytes sha256 {}",
                log.artifact.as_deref().unwrap_or("?"),
                digest.0,
                digest.1,
                first.0,
                first.1
            )),
        }
    }

    /// An isolated spawn cut by a broker kill.
    pub fn note_cut_isolated_spawn(&mut self) {
        self.cut_isolated_spawns += 1;
    }

    pub fn cut_isolated_spawns(&self) -> u64 {
        self.cut_isolated_spawns
    }

    /// A successful `subzero_apply` of `child` at `step`; an earlier one is returned as a
    /// violation (a change lands or is thrown away once).
    pub fn record_apply(&mut self, child: &str, step: usize, state: &str) -> Option<String> {
        let log = self.applies.entry(child.to_owned()).or_default();
        let earlier = log.ok.first().cloned();
        log.ok.push((step, state.to_owned()));
        earlier.map(|(first, was)| {
            format!(
                "subzero_apply of child {child} succeeded twice: at step {first} ({was}), then at step {step} ({state})"
            )
        })
    }

    /// A `subzero_apply` of `child` cut by a broker kill.
    pub fn note_apply_cut(&mut self, child: &str) {
        self.applies.entry(child.to_owned()).or_default().cut = true;
    }

    /// A `subzero_apply` of `child` refused with `code`.
    pub fn note_apply_refused(&mut self, child: &str, code: &str) {
        *self
            .applies
            .entry(child.to_owned())
            .or_default()
            .refused
            .entry(code.to_owned())
            .or_default() += 1;
    }

    /// What `child`'s applies were answered (nothing when none was sent).
    pub fn applies_of(&self, child: &str) -> ApplyLog {
        self.applies.get(child).cloned().unwrap_or_default()
    }

    /// A call with a `requestId` as it was sent at `step`.
    pub fn record_sent(&mut self, step: usize, tool: &str, args: &Value) {
        self.sent
            .entry(step)
            .or_insert_with(|| (tool.to_owned(), args.clone()));
    }

    pub fn sent(&self, step: usize) -> Option<(String, Value)> {
        self.sent.get(&step).cloned()
    }

    /// An ok answer of the call first sent at `step`: the first is kept, a later one must
    /// equal it.
    pub fn record_receipt(&mut self, step: usize, answer: &Value) -> Option<String> {
        match self.receipts.get(&step) {
            None => {
                self.receipts.insert(step, answer.clone());
                None
            }
            Some(first) if first == answer => None,
            Some(first) => Some(format!(
                "the call of step {step} sent again with its requestId answered {answer}, first {first}"
            )),
        }
    }

    /// Records a snapshot that answered a `get` from `requested`; returns what it breaks and
    /// the runs it shows ended for the first time.
    pub fn observe_snapshot(
        &mut self,
        requested: u64,
        snapshot: &ChildSnapshot,
    ) -> (Vec<Violation>, Vec<String>) {
        let child = snapshot.child_id.to_string();
        let mut found: Vec<Violation> = self
            .check_events(&child, requested, snapshot)
            .into_iter()
            .map(|detail| Violation {
                invariant: Invariant::EventsOnlyGrow,
                step: 0,
                detail,
            })
            .collect();
        let log = self.children.entry(child.clone()).or_default();
        log.cursor = log.cursor.max(snapshot.next_cursor);
        log.active_run = snapshot.active_run_id.as_ref().map(|r| r.to_string());
        let mut terminals: Vec<(String, String, Option<String>)> = snapshot
            .events
            .iter()
            .filter_map(|e| EventFact::of(e, last_run_of(snapshot)).terminal)
            .collect();
        if let Some(last_run) = &snapshot.last_run {
            terminals.push((
                last_run.run_id.to_string(),
                last_run.status.to_string(),
                last_run.artifact_id.as_ref().map(|a| a.to_string()),
            ));
        }
        let mut ended = Vec::new();
        for (run, status, artifact) in terminals {
            let first = self.runs.get(&run).is_none_or(|r| r.status.is_none());
            if let Some(detail) = self.note_terminal(&child, &run, &status, artifact) {
                found.push(Violation {
                    invariant: Invariant::ResultsKept,
                    step: 0,
                    detail,
                });
            } else if first {
                ended.push(run);
            }
        }
        (found, ended)
    }

    /// The snapshot's events against every event seen of the child before: each answer's
    /// sequence numbers grow past the requested cursor, and a number names one event for
    /// good. Returns what breaks that.
    fn check_events(
        &mut self,
        child: &str,
        requested: u64,
        snapshot: &ChildSnapshot,
    ) -> Vec<String> {
        let mut found = Vec::new();
        let mut last = requested;
        let log = self.children.entry(child.to_owned()).or_default();
        for fact in snapshot
            .events
            .iter()
            .map(|e| EventFact::of(e, last_run_of(snapshot)))
        {
            if fact.kind == "gap" {
                continue;
            }
            if fact.seq <= last {
                found.push(format!(
                    "child {child}: event #{} ({}) came after #{last} in an answer to cursor {requested}",
                    fact.seq, fact.kind
                ));
            }
            last = fact.seq;
            let seen = (fact.kind, fact.run.clone());
            match log.events.get(&fact.seq) {
                Some(before) if *before != seen => found.push(format!(
                    "child {child}: event #{} was {} of run {:?}, now {} of run {:?}",
                    fact.seq, before.0, before.1, seen.0, seen.1
                )),
                Some(_) => {}
                None => {
                    log.events.insert(fact.seq, seen);
                }
            }
        }
        if snapshot.next_cursor < requested && snapshot.gap.is_none() {
            found.push(format!(
                "child {child}: nextCursor {} is before the requested cursor {requested}",
                snapshot.next_cursor
            ));
        }
        found
    }

    /// Records a run's terminal status; a different one than reported before is returned.
    fn note_terminal(
        &mut self,
        child: &str,
        run: &str,
        status: &str,
        artifact: Option<String>,
    ) -> Option<String> {
        self.record_run(child, run, None);
        let log = self.runs.get_mut(run)?;
        if let Some(before) = &log.status {
            if before != status {
                return Some(format!(
                    "run {run} of child {child} was reported {before}, now {status}"
                ));
            }
            if artifact.is_some() && log.artifact.is_some() && artifact != log.artifact {
                return Some(format!(
                    "run {run} of child {child} had artifact {:?}, now {:?}",
                    log.artifact, artifact
                ));
            }
            if log.artifact.is_some() || artifact.is_none() {
                return None;
            }
        }
        log.status = Some(status.to_owned());
        log.artifact.clone_from(&artifact);
        if let Some(artifact) = artifact {
            let child_log = self.children.entry(child.to_owned()).or_default();
            if !child_log.artifacts.contains(&artifact) {
                child_log.artifacts.push(artifact);
            }
        }
        None
    }
}

/// What the soak reads of one event.
/// The run a snapshot's `lastRun` describes.
fn last_run_of(snapshot: &ChildSnapshot) -> Option<&RunId> {
    snapshot.last_run.as_ref().map(|run| &run.run_id)
}

struct EventFact {
    seq: u64,
    kind: &'static str,
    run: Option<String>,
    /// (run, terminal status, artifact) for an event that ends a run.
    terminal: Option<(String, String, Option<String>)>,
}

impl EventFact {
    /// The facts of one event of a snapshot whose `lastRun` is `last_run` (a snapshot's
    /// events of that run leave their run id out).
    fn of(event: &ChildEvent, last_run: Option<&RunId>) -> EventFact {
        let run = event.run_in(last_run).map(|r| r.to_string());
        let ended = match event {
            ChildEvent::StopConfirmed { .. } => Some(("stopped", None)),
            ChildEvent::Completed { artifact_id, .. } => {
                Some(("completed", Some(artifact_id.to_string())))
            }
            ChildEvent::BudgetExhausted { artifact_id, .. } => {
                Some(("budget_exhausted", Some(artifact_id.to_string())))
            }
            ChildEvent::Failed { .. } => Some(("failed", None)),
            ChildEvent::Interrupted { .. } => Some(("interrupted", None)),
            _ => None,
        };
        EventFact {
            seq: event.seq(),
            kind: event.kind(),
            terminal: ended.and_then(|(status, artifact)| {
                run.clone().map(|run| (run, status.to_owned(), artifact))
            }),
            run,
        }
    }
}
