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

use crate::support::{storage_key, supervisor};
use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};

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

fn str_field<'a>(input: &'a Value, key: &str) -> &'a str {
    input[key]
        .as_str()
        .unwrap_or_else(|| panic!("input needs string `{key}`: {input}"))
}

fn leaf(input: &Value) -> LeafRef {
    let digest = Sha256Digest::of(str_field(input, "digestOf").as_bytes());
    LeafRef::new(str_field(input, "leafId"), digest).unwrap()
}

fn leaf_name(leaf: Option<&LeafRef>) -> Value {
    leaf.map_or(Value::Null, |l| json!(l.leaf_id()))
}

fn code(e: &dyn Coded) -> ErrorCode {
    e.code()
}

impl Replay {
    fn new(trace: &Value) -> Self {
        let mut limits = Limits::default();
        if let Some(cap) = trace["queueCapacity"].as_u64() {
            limits.queued_followups = u32::try_from(cap).unwrap();
        }
        let retention = match trace.get("eventRetention") {
            Some(r) => Retention {
                max_events: u32::try_from(r["maxEvents"].as_u64().unwrap()).unwrap(),
                max_bytes: r["maxBytes"].as_u64().unwrap_or(u64::MAX),
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

    fn child_id(&mut self, input: &Value) -> ChildId {
        let name = input["child"].as_str().unwrap_or("c");
        self.names.child(name)
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

    fn step(&mut self, op: &str, input: &Value) -> StepResult {
        match op {
            "spawn" | "load" | "followup" | "steer" | "stop" => self.request(op, input),
            "confirm_stop" | "complete" | "fail" | "lose_worker" | "compacted" => {
                self.report(op, input)
            }
            "checkpoint" | "resume" => self.resumption(op, input),
            "event_append" | "event_read" => self.event(op, input),
            "freeze_template" | "check_limit" => self.contract(op, input),
            other => panic!("unknown op `{other}`"),
        }
    }

    /// A step of the requests a caller makes.
    fn request(&mut self, op: &str, input: &Value) -> StepResult {
        match op {
            "spawn" => {
                let id = self.child_id(input);
                let run = self.names.run(str_field(input, "run"));
                let prompt = str_field(input, "prompt").to_owned();
                self.limits.check_prompt(&prompt).map_err(|e| code(&e))?;
                let capacity = self.limits.queued_followups;
                self.child = Some(AnyChild::spawn(id, run, prompt, capacity));
                Ok(json!({}))
            }
            "load" => {
                let record = self.record_from(&input["record"]);
                self.child = Some(AnyChild::load(record, storage_key()).map_err(|e| code(&e))?);
                Ok(json!({}))
            }
            "followup" => {
                let run = self.names.run(str_field(input, "run"));
                let prompt = str_field(input, "prompt").to_owned();
                self.limits.check_prompt(&prompt).map_err(|e| code(&e))?;
                let delivery = self
                    .child_mut()
                    .followup(run, prompt)
                    .map_err(|e| code(&e))?;
                Ok(serde_json::to_value(delivery).unwrap())
            }
            "steer" => {
                let caps = self
                    .supervisor
                    .capabilities(input["steering"].as_bool().unwrap());
                let run = self.child_mut().steer(&caps).map_err(|e| code(&e))?;
                Ok(json!({ "delivery": "steered", "run": self.names.run_name(run) }))
            }
            "stop" => {
                let name = str_field(input, "expectedRun");
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
            other => unreachable!("{other} is not a step of this group"),
        }
    }

    /// A step of the reports a worker or the supervisor makes.
    fn report(&mut self, op: &str, input: &Value) -> StepResult {
        match op {
            "confirm_stop" => {
                let child = self.child_id(input);
                let run = self.names.run(str_field(input, "run"));
                let reaped = u32::try_from(input["reaped"].as_u64().unwrap_or(0)).unwrap();
                let proof = self.supervisor.confirm_stop(child, run, reaped);
                let s = self.child_mut().confirm_stop(proof).map_err(|e| code(&e))?;
                Ok(self.settlement(&s))
            }
            "complete" => {
                let child = self.child_id(input);
                let run = self.names.run(str_field(input, "run"));
                let proof = self
                    .supervisor
                    .leaf_recorded(child, run, leaf(&input["leaf"]));
                let s = self
                    .child_mut()
                    .settle(RunReport::Completed(proof))
                    .map_err(|e| code(&e))?;
                Ok(self.settlement(&s))
            }
            "fail" => {
                let run = self.names.run(str_field(input, "run"));
                let failure = Failure {
                    code: ErrorCode::parse(str_field(input, "code")).unwrap(),
                    message: str_field(input, "message").to_owned(),
                };
                let s = self
                    .child_mut()
                    .settle(RunReport::Failed { run, failure })
                    .map_err(|e| code(&e))?;
                Ok(self.settlement(&s))
            }
            "compacted" => {
                let child = self.child_id(input);
                let run = self.names.run(str_field(input, "run"));
                let tokens = (
                    input["tokensBefore"].as_u64().unwrap(),
                    input["tokensAfter"].as_u64().unwrap(),
                );
                let branch = str_field(input, "branchFrom").to_owned();
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
            "lose_worker" => {
                let reason = str_field(input, "reason").to_owned();
                let l = self
                    .child_mut()
                    .lose_worker(&reason)
                    .map_err(|e| code(&e))?;
                Ok(self.lost(&l))
            }
            other => unreachable!("{other} is not a step of this group"),
        }
    }

    /// A step of checkpoint and resume.
    fn resumption(&mut self, op: &str, input: &Value) -> StepResult {
        match op {
            "checkpoint" => {
                let checkpoint = if input.get("child").is_some() {
                    // A checkpoint verified for another child (nothing recorded there).
                    let other = self.child_id(input);
                    Checkpoint::verify(other, None, None).map_err(|e| code(&e))?
                } else {
                    let child = self.child_mut().id();
                    let observed = match &input["observed"] {
                        Value::Null => None,
                        v => Some(self.supervisor.observed_leaf(child, leaf(v))),
                    };
                    self.child_mut()
                        .checkpoint(observed.as_ref())
                        .map_err(|e| code(&e))?
                };
                let out = json!({ "leaf": leaf_name(checkpoint.leaf()) });
                self.checkpoint = Some(checkpoint);
                Ok(out)
            }
            "resume" => {
                let checkpoint = self
                    .checkpoint
                    .take()
                    .expect("resume needs a prior checkpoint step");
                let message = match &input["message"] {
                    Value::Null => None,
                    m => Some((
                        self.names.run(str_field(m, "run")),
                        str_field(m, "prompt").to_owned(),
                    )),
                };
                let resumed = self
                    .child_mut()
                    .resume(checkpoint, message)
                    .map_err(|e| code(&e))?;
                Ok(json!({
                    "state": resumed.state.as_str(),
                    "run": resumed.run.map(|r| self.names.run_name(r)),
                }))
            }
            other => unreachable!("{other} is not a step of this group"),
        }
    }

    fn record_from(&mut self, r: &Value) -> ChildRecord {
        let id = self.names.child(r["child"].as_str().unwrap_or("c"));
        let active_run = match &r["activeRun"] {
            Value::Null => None,
            a => Some(ActiveRunRecord {
                id: self.names.run(str_field(a, "run")),
                status: RunStatus::parse(str_field(a, "status")).unwrap(),
            }),
        };
        let queued = r["queued"]
            .as_array()
            .map(|q| {
                q.iter()
                    .map(|item| QueuedRunRecord {
                        id: self.names.run(str_field(item, "run")),
                        prompt: str_field(item, "prompt").to_owned(),
                    })
                    .collect()
            })
            .unwrap_or_default();
        let default_capacity = u64::from(self.limits.queued_followups);
        ChildRecord {
            id,
            state: ChildState::parse(str_field(r, "state")).unwrap(),
            active_run,
            queued,
            last_leaf: match &r["lastLeaf"] {
                Value::Null => None,
                l => Some(leaf(l)),
            },
            interrupted_run: r["interruptedRun"].as_str().map(|n| self.names.run(n)),
            interruption_reason: r["interruptionReason"].as_str().map(str::to_owned),
            queue_capacity: u32::try_from(r["queueCapacity"].as_u64().unwrap_or(default_capacity))
                .unwrap(),
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

fn load_traces() -> Vec<(String, Value)> {
    let mut traces: Vec<(String, Value)> = std::fs::read_dir(scenario_dir())
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
            let trace =
                serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            (name, trace)
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
    for (name, trace) in &traces {
        let errors: Vec<String> = validator
            .iter_errors(trace)
            .map(|e| e.to_string())
            .collect();
        assert!(
            errors.is_empty(),
            "{name} does not match scenario.schema.json: {errors:?}"
        );
        let mut replay = Replay::new(trace);
        for (i, step) in trace["steps"].as_array().unwrap().iter().enumerate() {
            let op = step["op"].as_str().unwrap();
            *ops_seen.entry(op.to_owned()).or_default() += 1;
            let before = replay.child.as_ref().map(AnyChild::record);
            let outcome = replay.step(op, &step["input"]);
            let at = format!("{name} step {} ({op})", i + 1);
            match (&step["expect"], outcome) {
                (expect, Ok(mut value)) if expect.get("ok").is_some() => {
                    if let Value::Object(map) = &mut value {
                        map.insert("child".to_owned(), replay.view());
                    }
                    assert!(
                        matches(&expect["ok"], &value),
                        "{at}: expected {}, got {value}",
                        expect["ok"]
                    );
                }
                (expect, Err(code)) if expect.get("error").is_some() => {
                    assert_eq!(expect["error"], code.as_str(), "{at}: wrong error code");
                    *codes_seen.entry(code.as_str().to_owned()).or_default() += 1;
                    let after = replay.child.as_ref().map(AnyChild::record);
                    if op != "load" {
                        assert_eq!(before, after, "{at}: a refused request changed the child");
                    }
                }
                (expect, got) => panic!("{at}: expected {expect}, got {got:?}"),
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
