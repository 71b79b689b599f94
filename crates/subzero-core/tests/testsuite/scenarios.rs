//! Replays every lifecycle trace in `fixtures/scenarios/` against subzero-core.
//!
//! A trace names children, runs and leaves symbolically (`"r1"`, `"l1"`); the replayer
//! maps names to fresh ids, runs each step, renders the outcome back with the same
//! names, and compares it with the step's `expect`: `{"ok": {...}}` matches when every
//! key given is equal (objects partially, arrays element by element), `{"error": code}`
//! when the step fails with that code. After every step it also checks that the child
//! survives a `record` → `load` round trip, and after a refused step that nothing
//! changed. Every trace is validated against `scenario.schema.json` first.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::testsuite::support::{storage_key, supervisor};
use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use serde::Deserialize as _;
use serde_json::{Value, json};
use subzero_core::events::{EventBody, EventLog, Retention};
use subzero_core::lifecycle::any::{
    ActiveRunRecord, QueuedRunRecord, RunReport, Settlement, WorkerLost,
};
use subzero_core::lifecycle::{
    AnyChild, AnyRun, Checkpoint, ChildRecord, Failure, LeafRef, LifecycleError, Supervisor,
};
use subzero_core::limits::{LimitName, Limits};
use subzero_core::template::{GrantSnapshot, RunLimits, Template, TemplateId, Templates};
use subzero_core::{
    ChildId, ChildState, Coded, ErrorCode, EventSeq, RunId, RunStatus, Sha256Digest,
};

#[path = "scenarios/log_and_contract.rs"]
mod log_and_contract;
#[path = "scenarios/trace.rs"]
mod trace;

use trace::{ChildRecordSpec, Expect, LeafSpec, Op, Trace};

fn scenario_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/scenarios")
}

/// The configuration file's contract, as exported (self-contained).
fn config_contract() -> jsonschema::Validator {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../generated/schemas/config.schema.json");
    let schema: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    jsonschema::draft202012::new(&schema).unwrap()
}

/// Symbolic names ↔ real ids for one trace.
#[derive(Default)]
struct Names {
    runs: BTreeMap<String, RunId>,
    children: BTreeMap<String, ChildId>,
}

impl Names {
    fn run(&mut self, name: &str) -> RunId {
        *self
            .runs
            .entry(name.to_owned())
            .or_insert_with(RunId::generate)
    }
    fn child(&mut self, name: &str) -> ChildId {
        *self
            .children
            .entry(name.to_owned())
            .or_insert_with(ChildId::generate)
    }
    fn run_name(&self, id: RunId) -> String {
        self.runs
            .iter()
            .find(|(_, v)| **v == id)
            .map_or_else(|| format!("<unnamed {id}>"), |(k, _)| k.clone())
    }
}

struct Replay {
    names: Names,
    child: Option<AnyChild>,
    checkpoint: Option<Checkpoint>,
    events: EventLog,
    supervisor: &'static Supervisor,
    limits: Limits,
}

type StepResult = Result<Value, ErrorCode>;

fn leaf(spec: &LeafSpec) -> LeafRef {
    let digest = Sha256Digest::of(spec.digest_of.as_bytes());
    LeafRef::new(&spec.leaf_id, digest).unwrap()
}

fn leaf_name(leaf: Option<&LeafRef>) -> Value {
    leaf.map_or(Value::Null, |l| json!(l.leaf_id()))
}

fn code(e: &dyn Coded) -> ErrorCode {
    e.code()
}

impl Replay {
    fn new(trace: &Trace) -> Self {
        let mut limits = Limits::default();
        if let Some(cap) = trace.queue_capacity {
            limits.queued_followups = cap;
        }
        let retention = match &trace.event_retention {
            Some(r) => Retention {
                max_events: r.max_events,
                max_bytes: r.max_bytes.unwrap_or(u64::MAX),
            },
            None => Retention::from_limits(&limits),
        };
        let mut names = Names::default();
        let child = names.child("c");
        Replay {
            names,
            child: None,
            checkpoint: None,
            events: EventLog::new(child, retention),
            // SAFETY: test; a trace's steps are the worker reports and transcript reads.
            supervisor: supervisor(),
            limits,
        }
    }

    /// The child a step names (default `c`).
    fn child_id(&mut self, name: Option<&str>) -> ChildId {
        self.names.child(name.unwrap_or("c"))
    }

    fn view(&self) -> Value {
        let Some(child) = &self.child else {
            return Value::Null;
        };
        json!({
            "state": child.state().as_str(),
            "activeRun": child.active_run().map(|(r, _)| self.names.run_name(r)),
            "activeStatus": child.active_run().map(|(_, s)| s.as_str()),
            "queued": child.queued().into_iter().map(|r| self.names.run_name(r)).collect::<Vec<_>>(),
            "lastLeaf": leaf_name(child.last_leaf()),
        })
    }

    fn any_run(&self, run: &AnyRun) -> Value {
        json!({ "run": self.names.run_name(run.id()), "status": run.status().as_str() })
    }

    fn settlement(&self, s: &Settlement) -> Value {
        json!({
            "settled": self.any_run(&s.run),
            "withdrawn": s.withdrawn.iter().map(|r| self.names.run_name(r.id())).collect::<Vec<_>>(),
            "started": s.started.map(|r| self.names.run_name(r)),
        })
    }

    fn lost(&self, l: &WorkerLost) -> Value {
        json!({
            "interrupted": self.any_run(&l.run),
            "abandoned": l.abandoned.iter().map(|r| self.names.run_name(r.id())).collect::<Vec<_>>(),
        })
    }

    fn child_mut(&mut self) -> &mut AnyChild {
        self.child
            .as_mut()
            .expect("the trace must spawn or load a child first")
    }

    fn step(&mut self, op: &Op) -> StepResult {
        match op {
            Op::Spawn(_) | Op::Load { .. } | Op::Followup(_) | Op::Steer { .. } | Op::Stop(_) => {
                self.request(op)
            }
            Op::ConfirmStop(_)
            | Op::Complete(_)
            | Op::Fail(_)
            | Op::LoseWorker { .. }
            | Op::Compacted(_) => self.report(op),
            Op::Checkpoint(_) | Op::Resume(_) => self.resumption(op),
            Op::EventAppend(_) | Op::EventRead(_) => self.event(op),
            Op::FreezeTemplate(_) | Op::CheckLimit(_) => self.contract(op),
        }
    }

    /// A step of the requests a caller makes.
    fn request(&mut self, op: &Op) -> StepResult {
        match op {
            Op::Spawn(input) => {
                let id = self.child_id(input.child.as_deref());
                let run = self.names.run(&input.run);
                let prompt = input.prompt.clone();
                self.limits.check_prompt(&prompt).map_err(|e| code(&e))?;
                let capacity = self.limits.queued_followups;
                self.child = Some(AnyChild::spawn(id, run, prompt, capacity));
                Ok(json!({}))
            }
            Op::Load { record } => {
                let record = self.record_from(record);
                self.child = Some(AnyChild::load(record, storage_key()).map_err(|e| code(&e))?);
                Ok(json!({}))
            }
            Op::Followup(input) => {
                let run = self.names.run(&input.run);
                let prompt = input.prompt.clone();
                self.limits.check_prompt(&prompt).map_err(|e| code(&e))?;
                let delivery = self
                    .child_mut()
                    .followup(run, prompt)
                    .map_err(|e| code(&e))?;
                Ok(serde_json::to_value(delivery).unwrap())
            }
            Op::Steer { steering } => {
                let caps = self.supervisor.capabilities(*steering);
                let run = self.child_mut().steer(&caps).map_err(|e| code(&e))?;
                Ok(json!({ "delivery": "steered", "run": self.names.run_name(run) }))
            }
            Op::Stop(input) => {
                let name = input.expected_run.as_str();
                let known = self.names.runs.contains_key(name);
                let expected = self.names.run(name);
                let receipt = match self.child_mut().stop(expected) {
                    Ok(receipt) => receipt,
                    // The store knows a child's ended runs, the core only its active one:
                    // a stop naming a run of this child that already ended is not_running.
                    Err(LifecycleError::StaleRun(e)) if e.active.is_none() && known => {
                        return Err(ErrorCode::NotRunning);
                    }
                    Err(e) => return Err(code(&e)),
                };
                Ok(json!({
                    "run": self.names.run_name(receipt.run),
                    "newlyRequested": receipt.newly_requested,
                    "withdrawn": receipt.withdrawn.iter().map(|r| self.names.run_name(*r)).collect::<Vec<_>>(),
                }))
            }
            other => unreachable!("{} is not a step of this group", other.name()),
        }
    }

    /// A step of the reports a worker or the supervisor makes.
    fn report(&mut self, op: &Op) -> StepResult {
        match op {
            Op::ConfirmStop(input) => {
                let child = self.child_id(input.child.as_deref());
                let run = self.names.run(&input.run);
                let proof = self.supervisor.confirm_stop(child, run, input.reaped);
                let s = self.child_mut().confirm_stop(proof).map_err(|e| code(&e))?;
                Ok(self.settlement(&s))
            }
            Op::Complete(input) => {
                let child = self.child_id(input.child.as_deref());
                let run = self.names.run(&input.run);
                let proof = self.supervisor.leaf_recorded(child, run, leaf(&input.leaf));
                let s = self
                    .child_mut()
                    .settle(RunReport::Completed(proof))
                    .map_err(|e| code(&e))?;
                Ok(self.settlement(&s))
            }
            Op::Fail(input) => {
                let run = self.names.run(&input.run);
                let failure = Failure {
                    code: ErrorCode::parse(&input.code).unwrap(),
                    message: input.message.clone(),
                };
                let s = self
                    .child_mut()
                    .settle(RunReport::Failed { run, failure })
                    .map_err(|e| code(&e))?;
                Ok(self.settlement(&s))
            }
            Op::Compacted(input) => {
                let child = self.child_id(input.child.as_deref());
                let run = self.names.run(&input.run);
                let tokens = (input.tokens_before, input.tokens_after);
                let branch = input.branch_from.clone();
                let report = self
                    .supervisor
                    .compaction_reported(child, run, tokens, branch);
                let compaction = self.child_mut().compacted(report).map_err(|e| code(&e))?;
                let EventBody::Compacted {
                    run_id,
                    tokens_before,
                    tokens_after,
                    branch_from,
                } = compaction.event()
                else {
                    panic!("a compaction decides a compacted event");
                };
                Ok(json!({"event": {
                    "type": "compacted",
                    "run": self.names.run_name(*run_id),
                    "tokensBefore": tokens_before,
                    "tokensAfter": tokens_after,
                    "branchFrom": branch_from,
                }}))
            }
            Op::LoseWorker { reason } => {
                let l = self.child_mut().lose_worker(reason).map_err(|e| code(&e))?;
                Ok(self.lost(&l))
            }
            other => unreachable!("{} is not a step of this group", other.name()),
        }
    }

    /// A step of checkpoint and resume.
    fn resumption(&mut self, op: &Op) -> StepResult {
        match op {
            Op::Checkpoint(input) => {
                let checkpoint = if let Some(other) = &input.child {
                    // A checkpoint verified for another child (nothing recorded there).
                    let other = self.names.child(other);
                    Checkpoint::verify(other, None, None).map_err(|e| code(&e))?
                } else {
                    let child = self.child_mut().id();
                    let observed = input
                        .observed
                        .as_ref()
                        .map(|v| self.supervisor.observed_leaf(child, leaf(v)));
                    self.child_mut()
                        .checkpoint(observed.as_ref())
                        .map_err(|e| code(&e))?
                };
                let out = json!({ "leaf": leaf_name(checkpoint.leaf()) });
                self.checkpoint = Some(checkpoint);
                Ok(out)
            }
            Op::Resume(input) => {
                let checkpoint = self
                    .checkpoint
                    .take()
                    .expect("resume needs a prior checkpoint step");
                let message = input
                    .message
                    .as_ref()
                    .map(|m| (self.names.run(&m.run), m.prompt.clone()));
                let resumed = self
                    .child_mut()
                    .resume(checkpoint, message)
                    .map_err(|e| code(&e))?;
                Ok(json!({
                    "state": resumed.state.as_str(),
                    "run": resumed.run.map(|r| self.names.run_name(r)),
                }))
            }
            other => unreachable!("{} is not a step of this group", other.name()),
        }
    }

    fn record_from(&mut self, r: &ChildRecordSpec) -> ChildRecord {
        let id = self.child_id(r.child.as_deref());
        let active_run = r.active_run.as_ref().map(|a| ActiveRunRecord {
            id: self.names.run(&a.run),
            status: RunStatus::parse(&a.status).unwrap(),
        });
        let queued = r
            .queued
            .iter()
            .map(|item| QueuedRunRecord {
                id: self.names.run(&item.run),
                prompt: item.prompt.clone(),
            })
            .collect();
        ChildRecord {
            id,
            state: ChildState::parse(&r.state).unwrap(),
            active_run,
            queued,
            last_leaf: r.last_leaf.as_ref().map(leaf),
            interrupted_run: r.interrupted_run.as_deref().map(|n| self.names.run(n)),
            interruption_reason: r.interruption_reason.clone(),
            queue_capacity: r.queue_capacity.unwrap_or(self.limits.queued_followups),
        }
    }
}

/// `actual` matches `expected` when every key of an expected object matches, arrays
/// match element by element, and scalars are equal.
fn matches(expected: &Value, actual: &Value) -> bool {
    match (expected, actual) {
        (Value::Object(e), Value::Object(a)) => e
            .iter()
            .all(|(k, v)| a.get(k).is_some_and(|av| matches(v, av))),
        (Value::Array(e), Value::Array(a)) => {
            e.len() == a.len() && e.iter().zip(a).all(|(x, y)| matches(x, y))
        }
        _ => expected == actual,
    }
}

/// Every trace file, by name: its JSON (for the schema) and the trace it reads as.
fn load_traces() -> Vec<(String, Value, Trace)> {
    let mut traces: Vec<(String, Value, Trace)> = std::fs::read_dir(scenario_dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.extension().is_some_and(|x| x == "json")
                && p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.as_bytes()[0].is_ascii_digit())
        })
        .map(|p| {
            let text = std::fs::read_to_string(&p).unwrap();
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            let json: Value =
                serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            let trace = Trace::deserialize(&json)
                .unwrap_or_else(|e| panic!("{}: not a trace: {e}", p.display()));
            (name, json, trace)
        })
        .collect();
    traces.sort_by(|a, b| a.0.cmp(&b.0));
    traces
}

/// Every state a trace reaches survives a `record` → `load` round trip.
fn assert_round_trips(child: Option<&AnyChild>, at: &str) {
    if let Some(child) = child {
        let record = child.record();
        let reloaded = AnyChild::load(record.clone(), storage_key())
            .unwrap_or_else(|e| panic!("{at}: reload failed: {e}"));
        assert_eq!(
            reloaded.record(),
            record,
            "{at}: record/load round trip changed the child"
        );
    }
}

#[test]
fn every_scenario_replays_as_recorded() {
    let schema_text = std::fs::read_to_string(scenario_dir().join("scenario.schema.json")).unwrap();
    let schema: Value = serde_json::from_str(&schema_text).unwrap();
    let validator = jsonschema::draft202012::new(&schema).unwrap();
    let traces = load_traces();
    let mut steps = 0usize;
    let mut codes_seen = BTreeMap::<String, usize>::new();
    let mut ops_seen = BTreeMap::<String, usize>::new();
    for (name, json, trace) in &traces {
        let errors: Vec<String> = validator.iter_errors(json).map(|e| e.to_string()).collect();
        assert!(
            errors.is_empty(),
            "{name} does not match scenario.schema.json: {errors:?}"
        );
        let mut replay = Replay::new(trace);
        for (i, step) in trace.steps.iter().enumerate() {
            let op = step.op.name();
            *ops_seen.entry(op.to_owned()).or_default() += 1;
            let before = replay.child.as_ref().map(AnyChild::record);
            let outcome = replay.step(&step.op);
            let at = format!("{name} step {} ({op})", i + 1);
            match (&step.expect, outcome) {
                (Expect::Ok(expect), Ok(mut value)) => {
                    if let Value::Object(map) = &mut value {
                        map.insert("child".to_owned(), replay.view());
                    }
                    assert!(
                        matches(expect, &value),
                        "{at}: expected {expect}, got {value}"
                    );
                }
                (Expect::Error(expect), Err(code)) => {
                    assert_eq!(expect, code.as_str(), "{at}: wrong error code");
                    *codes_seen.entry(code.as_str().to_owned()).or_default() += 1;
                    let after = replay.child.as_ref().map(AnyChild::record);
                    if op != "load" {
                        assert_eq!(before, after, "{at}: a refused request changed the child");
                    }
                }
                (expect, got) => panic!("{at}: expected {expect:?}, got {got:?}"),
            }
            assert_round_trips(replay.child.as_ref(), &at);
            steps += 1;
        }
    }
    assert!(traces.len() >= 20, "only {} scenarios", traces.len());
    for op in [
        "spawn",
        "load",
        "followup",
        "steer",
        "stop",
        "confirm_stop",
        "complete",
        "fail",
        "lose_worker",
        "compacted",
        "checkpoint",
        "resume",
        "event_append",
        "event_read",
        "freeze_template",
        "check_limit",
    ] {
        assert!(ops_seen.contains_key(op), "no scenario exercises `{op}`");
    }
    for code in [
        "invalid_request",
        "template_not_found",
        "unsupported_grant",
        "limit_exceeded",
        "busy",
        "stale_run",
        "not_running",
        "unsupported_steer",
        "checkpoint_incompatible",
        "interrupted",
        "internal",
    ] {
        assert!(
            codes_seen.contains_key(code),
            "no scenario produces `{code}`"
        );
    }
    // Written to the stderr handle, not through `println!`, so libtest does not
    // capture it and every run shows the count.
    let mut err = std::io::stderr();
    writeln!(err, "replayed {} scenarios, {steps} steps", traces.len()).unwrap();
}
