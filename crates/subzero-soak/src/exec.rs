//! Turning a schedule's calls into MCP calls and their answers into the ledger.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use subzero_protocol::{
    ArtifactChunk, ChildSnapshot, ErrorCode, Info, ListOutput, ResumeOutput, SendOutput,
    SpawnOutput, StopOutput,
};

use crate::ledger::{Ledger, UNKNOWN_ARTIFACT};
use crate::plan::Plan;
use crate::schedule::{Action, Cursor, Invalid, Op, Schedule};
use crate::stats::Stats;
use crate::verdict::{Invariant, Verdicts};
use crate::world::{Answer, World};

/// A run id no broker ever made.
const UNKNOWN_RUN: &str = "run_00000000000000000000000000";
/// How long past its own `waitMs` a call may take before it counts as unanswered.
const ANSWER_BOUND: Duration = Duration::from_secs(60);

/// Everything one soak run shares.
#[derive(Debug)]
pub struct Ctx {
    pub world: Arc<World>,
    pub schedule: Schedule,
    pub ledger: Mutex<Ledger>,
    pub verdicts: Arc<Verdicts>,
    pub stats: Mutex<Stats>,
    /// Steps started so far.
    pub step: Arc<AtomicUsize>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Ctx {
    pub fn ledger(&self) -> std::sync::MutexGuard<'_, Ledger> {
        lock(&self.ledger)
    }

    pub fn stats(&self) -> std::sync::MutexGuard<'_, Stats> {
        lock(&self.stats)
    }

    pub fn now(&self) -> usize {
        self.step.load(Ordering::SeqCst)
    }

    pub fn violation(&self, invariant: Invariant, detail: impl Into<String>) {
        self.verdicts.add(invariant, self.now(), detail);
    }

    /// One call, counted in the stats; answers outside the contract are violations.
    pub async fn call(&self, broker: usize, tool: &str, args: Value, wait_ms: u64) -> Answer {
        let limit = Duration::from_millis(wait_ms) + ANSWER_BOUND;
        let answer = self.world.call(broker, tool, args.clone(), limit).await;
        let outcome = match &answer {
            Answer::Ok(_) => "ok".to_owned(),
            Answer::Refused(code, _) => code.to_string(),
            Answer::Broken(_) => "broken".to_owned(),
            Answer::Lost => "lost (broker killed)".to_owned(),
            Answer::Unanswered => "unanswered".to_owned(),
        };
        self.stats().call(tool, &outcome);
        match &answer {
            Answer::Refused(ErrorCode::Internal, message) => self.violation(
                Invariant::TypedAnswers,
                format!("{tool} answered `internal`: {message} (arguments {args})"),
            ),
            Answer::Broken(detail) => self.violation(Invariant::TypedAnswers, detail.clone()),
            Answer::Unanswered => self.violation(
                Invariant::TypedAnswers,
                format!("{tool} was not answered within {limit:?} (arguments {args})"),
            ),
            _ => {}
        }
        answer
    }

    /// The ok answer read as the tool's output type; anything else is a violation.
    pub fn parse<T: DeserializeOwned>(&self, tool: &str, value: &Value) -> Option<T> {
        match serde_json::from_value(value.clone()) {
            Ok(typed) => Some(typed),
            Err(e) => {
                self.violation(
                    Invariant::TypedAnswers,
                    format!("{tool} answered something that is not its output type ({e}): {value}"),
                );
                None
            }
        }
    }

    /// Runs the call of step `index`.
    pub async fn run_call(&self, index: usize, broker: usize, op: &Op) {
        match op {
            Op::Retry { of } => self.retry(index, broker, *of).await,
            Op::Invalid(invalid) => self.invalid(broker, *invalid).await,
            _ => {
                let (tool, args, wait_ms) = self.arguments(op);
                if has_request_id(&args) {
                    self.ledger().record_sent(index, tool, &args);
                }
                let answer = self.call(broker, tool, args.clone(), wait_ms).await;
                self.absorb(index, op, &args, &answer);
            }
        }
    }

    /// The tool, arguments and `waitMs` of a call, with children resolved now.
    fn arguments(&self, op: &Op) -> (&'static str, Value, u64) {
        let ledger = self.ledger();
        let model = self.world.model_ref();
        let tool = op.tool();
        match op {
            Op::Spawn {
                coder,
                plan,
                request,
                budget,
                ..
            } => {
                let mut args = json!({
                    "prompt": plan.prompt(),
                    "templateId": if *coder { "coder" } else { "researcher" },
                    "model": model,
                });
                if *budget {
                    args["budget"] =
                        json!({"maxTurns": 6, "deadlineMs": 20000, "toolTimeoutMs": 3000});
                }
                with_request(&mut args, request);
                (tool, args, 0)
            }
            Op::Followup {
                slot,
                plan,
                request,
                compact,
            } => {
                let mut args = json!({
                    "childId": ledger.child_id(*slot),
                    "mode": "followup",
                    "message": plan.prompt(),
                });
                if *compact {
                    args["compact"] = json!(true);
                }
                with_request(&mut args, request);
                (tool, args, 0)
            }
            Op::Steer { slot } => (
                tool,
                json!({"childId": ledger.child_id(*slot), "mode": "steer",
                       "message": "soak steer: keep going, then answer as planned"}),
                0,
            ),
            Op::Stop {
                slot,
                stale,
                wait_ms,
            } => {
                let child = ledger.child_id(*slot);
                let run = if *stale {
                    ledger.other_run(&child)
                } else {
                    ledger
                        .active_run(&child)
                        .or_else(|| ledger.other_run(&child))
                };
                let run = run.unwrap_or_else(|| UNKNOWN_RUN.to_owned());
                (
                    tool,
                    json!({"childId": child, "expectedRunId": run, "waitMs": wait_ms}),
                    *wait_ms,
                )
            }
            Op::Resume {
                slot,
                plan,
                request,
            } => {
                let mut args = json!({"childId": ledger.child_id(*slot), "model": model});
                if let Some(plan) = plan {
                    args["message"] = json!(plan.prompt());
                }
                with_request(&mut args, request);
                (tool, args, 0)
            }
            Op::Get {
                slot,
                wait_ms,
                cursor,
                wait_for_event,
            } => {
                let child = ledger.child_id(*slot);
                let cursor = match cursor {
                    Cursor::Next => ledger.cursor(&child),
                    Cursor::Zero => 0,
                    Cursor::Beyond => ledger.cursor(&child) + 100_000,
                };
                let wait_for = if *wait_for_event { "event" } else { "settled" };
                (
                    tool,
                    json!({"childId": child, "waitMs": wait_ms, "cursor": cursor,
                           "eventLimit": 50, "waitFor": wait_for}),
                    *wait_ms,
                )
            }
            Op::List { limit } => (tool, json!({"limit": limit}), 0),
            Op::Output {
                slot,
                offset,
                length,
            } => {
                let artifact = ledger
                    .child_of(*slot)
                    .and_then(|c| ledger.artifact(&c))
                    .unwrap_or_else(|| UNKNOWN_ARTIFACT.to_owned());
                (
                    tool,
                    json!({"artifactId": artifact, "offset": offset, "length": length}),
                    0,
                )
            }
            Op::Info | Op::Invalid(_) | Op::Retry { .. } => (tool, json!({}), 0),
        }
    }

    /// Records what an answer says; checks that it is the tool's output type.
    fn absorb(&self, index: usize, op: &Op, args: &Value, answer: &Answer) {
        let Answer::Ok(value) = answer else {
            return;
        };
        let tool = op.tool();
        if has_request_id(args)
            && let Some(detail) = self.ledger().record_receipt(index, value)
        {
            self.violation(Invariant::IdempotentRetries, detail);
        }
        let child = args["childId"].as_str().unwrap_or_default().to_owned();
        match op {
            Op::Spawn { slot, plan, .. } => {
                if let Some(out) = self.parse::<SpawnOutput>(tool, value) {
                    self.ledger()
                        .record_spawn(*slot, &out.child_id, &out.run_id, plan);
                }
            }
            Op::Followup { plan, .. } => {
                if let Some(out) = self.parse::<SendOutput>(tool, value) {
                    self.ledger().record_run(&child, &out.run_id, Some(plan));
                }
            }
            Op::Steer { .. } => {
                self.parse::<SendOutput>(tool, value);
            }
            Op::Stop { .. } => {
                if let Some(out) = self.parse::<StopOutput>(tool, value)
                    && out.confirmed
                {
                    self.tree_gone(&out.run_id);
                }
            }
            Op::Resume { plan, .. } => {
                if let Some(out) = self.parse::<ResumeOutput>(tool, value)
                    && let Some(run) = &out.run_id
                {
                    self.ledger().record_run(&child, run, plan.as_ref());
                }
            }
            Op::Get { .. } => {
                if let Some(snapshot) = self.parse::<ChildSnapshot>(tool, value) {
                    self.observe(args["cursor"].as_u64().unwrap_or(0), &snapshot);
                }
            }
            Op::List { .. } => {
                self.parse::<ListOutput>(tool, value);
            }
            Op::Output { .. } => {
                self.parse::<ArtifactChunk>(tool, value);
            }
            Op::Info => {
                self.parse::<Info>(tool, value);
            }
            Op::Invalid(_) | Op::Retry { .. } => {}
        }
    }

    /// Records a snapshot in the ledger; what it breaks is a violation.
    pub fn observe(&self, requested: u64, snapshot: &ChildSnapshot) {
        let (found, ended) = self.ledger().observe_snapshot(requested, snapshot);
        for v in found {
            self.violation(v.invariant, v.detail);
        }
        for run in ended {
            self.tree_gone(&run);
        }
    }

    /// A run reported ended has no tool process left: its worker kills the run's tree
    /// before it reports the end (and a stop is recorded only after that confirmation).
    pub fn tree_gone(&self, run: &str) {
        let Some(tag) = self.ledger().tag_of(run) else {
            return;
        };
        let left: Vec<u32> = crate::kernel::tagged(&self.world.workspace)
            .into_iter()
            .filter(|(_, t)| *t == tag)
            .map(|(pid, _)| pid)
            .collect();
        if !left.is_empty() {
            self.violation(
                Invariant::NoLeftoverProcess,
                format!(
                    "run {run} ({tag}) is reported ended, yet its tool processes {left:?} still run"
                ),
            );
        }
    }

    /// The call of step `of`, sent again with the same arguments.
    async fn retry(&self, index: usize, broker: usize, of: usize) {
        let Some((tool, args)) = self.ledger().sent(of) else {
            self.stats()
                .call("retry", "skipped (the first call was never sent)");
            return;
        };
        let answer = self.call(broker, &tool, args.clone(), 0).await;
        let Some(Action::Call { op, .. }) = self.schedule.step(of).map(|s| &s.action) else {
            return;
        };
        let _ = index;
        self.absorb(of, op, &args, &answer);
    }

    /// A call the broker must refuse, with the codes it may refuse it with.
    async fn invalid(&self, broker: usize, invalid: Invalid) {
        let (args, expected) = self.invalid_arguments(invalid);
        let tool = invalid.tool();
        let answer = self.call(broker, tool, args.clone(), 0).await;
        match answer {
            Answer::Ok(value) => self.violation(
                Invariant::TypedAnswers,
                format!("{tool} accepted an invalid call ({invalid:?}, arguments {args}): {value}"),
            ),
            Answer::Refused(code, message)
                if !expected.contains(&code)
                    && !matches!(
                        code,
                        ErrorCode::StorageUnavailable | ErrorCode::RuntimeShuttingDown
                    ) =>
            {
                self.violation(
                    Invariant::TypedAnswers,
                    format!(
                        "{tool} refused {invalid:?} with `{code}` ({message}); expected one of {expected:?}"
                    ),
                )
            }
            _ => {}
        }
    }

    fn invalid_arguments(&self, invalid: Invalid) -> (Value, Vec<ErrorCode>) {
        use ErrorCode::*;
        let model = self.world.model_ref();
        let plan = Plan {
            tag: "invalid".into(),
            turns: vec![],
            ending: crate::plan::Ending::Text { bytes: 10 },
            pace_ms: 0,
        };
        let spawn = |extra: Value| {
            let mut args = json!({"prompt": plan.prompt(), "templateId": "researcher",
                                  "model": model.clone()});
            if let (Value::Object(base), Value::Object(extra)) = (&mut args, extra) {
                base.extend(extra);
            }
            args
        };
        let some_child = self
            .ledger()
            .children()
            .first()
            .cloned()
            .unwrap_or_else(|| crate::ledger::UNKNOWN_CHILD.to_owned());
        match invalid {
            Invalid::UnknownTemplate => (
                spawn(json!({"templateId": "no-such-template"})),
                vec![TemplateNotFound],
            ),
            Invalid::EmptyPrompt => (spawn(json!({"prompt": ""})), vec![InvalidRequest]),
            Invalid::OversizePrompt => (
                spawn(json!({"prompt": "x".repeat(70_000)})),
                vec![LimitExceeded, InvalidRequest],
            ),
            Invalid::UnknownCredential => {
                let mut model = model.clone();
                model["credentialRef"] = json!("nobody-configured-this");
                (
                    spawn(json!({"model": model})),
                    vec![CredentialsRequired, InvalidRequest],
                )
            }
            Invalid::BadModelUrl => {
                let mut model = model.clone();
                model["url"] = json!("ftp://127.0.0.1/v1");
                (spawn(json!({"model": model})), vec![InvalidRequest])
            }
            Invalid::NullBudget => (spawn(json!({"budget": null})), vec![InvalidRequest]),
            Invalid::BudgetPastMaximum => (
                spawn(json!({"budget": {"maxTurns": 100000}})),
                vec![LimitExceeded],
            ),
            Invalid::BadRequestId => (
                spawn(json!({"requestId": "not a valid id!"})),
                vec![InvalidRequest],
            ),
            Invalid::MissingArguments => (json!({}), vec![InvalidRequest]),
            Invalid::UnknownChild => (
                json!({"childId": crate::ledger::UNKNOWN_CHILD}),
                vec![NotFound],
            ),
            Invalid::MalformedChildId => (json!({"childId": "ch_bogus"}), vec![InvalidRequest]),
            Invalid::WaitPastMaximum => (
                json!({"childId": some_child, "waitMs": 30001}),
                vec![InvalidRequest],
            ),
            Invalid::BadSendMode => (
                json!({"childId": some_child, "mode": "shout", "message": "hello"}),
                vec![InvalidRequest],
            ),
            Invalid::UnknownArtifact => (
                json!({"artifactId": UNKNOWN_ARTIFACT}),
                vec![NotFound, ArtifactUnavailable],
            ),
            Invalid::OutputPastMaximum => (
                json!({"artifactId": UNKNOWN_ARTIFACT, "length": 65537}),
                vec![InvalidRequest],
            ),
            Invalid::ListUnknownWorkspace => (
                json!({"workspaceRoot": "/nonexistent/subzero-soak"}),
                vec![InvalidRequest, NotFound],
            ),
        }
    }
}

fn has_request_id(args: &Value) -> bool {
    args.get("requestId").is_some()
}

fn with_request(args: &mut Value, request: &Option<String>) {
    if let Some(id) = request {
        args["requestId"] = json!(id);
    }
}
