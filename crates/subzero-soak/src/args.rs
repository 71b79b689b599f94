//! The arguments of each call: the schedule's call with its children, runs, cursors and
//! artifacts resolved from the ledger at the moment it is sent, and the invalid calls with
//! the codes a broker may refuse them with.

use serde_json::{Value, json};
use subzero_protocol::ErrorCode;

use crate::ledger::{Ledger, UNKNOWN_ARTIFACT, UNKNOWN_CHILD};
use crate::plan::{Ending, Plan};
use crate::schedule::{Cursor, Invalid, Landing, Op};

/// A run id no broker ever made.
const UNKNOWN_RUN: &str = "run_00000000000000000000000000";

/// The tool, the arguments and the `waitMs` of `op`.
pub fn arguments(op: &Op, ledger: &Ledger, model: Value) -> (&'static str, Value, u64) {
    let tool = op.tool();
    let (args, wait_ms) = match op {
        Op::Spawn {
            coder,
            isolated,
            plan,
            request,
            budget,
            ..
        } => (spawn(*coder, *isolated, plan, request, *budget, model), 0),
        Op::Followup {
            slot,
            plan,
            request,
            compact,
        } => (
            followup(&ledger.child_id(*slot), plan, request, *compact),
            0,
        ),
        Op::Steer { slot } => (
            json!({"childId": ledger.child_id(*slot), "mode": "steer",
                   "message": "soak steer: keep going, then answer as planned"}),
            0,
        ),
        Op::Stop {
            slot,
            stale,
            wait_ms,
        } => (
            stop(ledger, &ledger.child_id(*slot), *stale, *wait_ms),
            *wait_ms,
        ),
        Op::Resume {
            slot,
            plan,
            request,
        } => (
            resume(&ledger.child_id(*slot), plan.as_ref(), request, model),
            0,
        ),
        Op::Get {
            slot,
            wait_ms,
            cursor,
            wait_for_event,
        } => (
            get(
                ledger,
                &ledger.child_id(*slot),
                *wait_ms,
                *cursor,
                *wait_for_event,
            ),
            *wait_ms,
        ),
        Op::List { limit } => (json!({"limit": limit}), 0),
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
                json!({"artifactId": artifact, "offset": offset, "length": length}),
                0,
            )
        }
        Op::Apply { slot, how, .. } => (apply(&ledger.child_id(*slot), *how), 0),
        Op::Info | Op::Invalid(_) | Op::Retry { .. } => (json!({}), 0),
    };
    (tool, args, wait_ms)
}

fn spawn(
    coder: bool,
    isolated: bool,
    plan: &Plan,
    request: &Option<String>,
    budget: bool,
    model: Value,
) -> Value {
    let mut args = json!({
        "prompt": plan.prompt(),
        "templateId": if coder { "coder" } else { "researcher" },
        "model": model,
    });
    if isolated {
        args["isolation"] = json!("checkout");
    }
    if budget {
        args["budget"] = json!({"maxTurns": 6, "deadlineMs": 20000, "toolTimeoutMs": 3000});
    }
    with_request(args, request)
}

fn followup(child: &str, plan: &Plan, request: &Option<String>, compact: bool) -> Value {
    let mut args = json!({"childId": child, "mode": "followup", "message": plan.prompt()});
    if compact {
        args["compact"] = json!(true);
    }
    with_request(args, request)
}

/// A stop naming the child's active run (else another of its runs), or with `stale` a run
/// that is not the active one.
fn stop(ledger: &Ledger, child: &str, stale: bool, wait_ms: u64) -> Value {
    let run = if stale {
        ledger.other_run(child)
    } else {
        ledger.active_run(child).or_else(|| ledger.other_run(child))
    };
    let run = run.unwrap_or_else(|| UNKNOWN_RUN.to_owned());
    json!({"childId": child, "expectedRunId": run, "waitMs": wait_ms})
}

fn resume(child: &str, plan: Option<&Plan>, request: &Option<String>, model: Value) -> Value {
    let mut args = json!({"childId": child, "model": model});
    if let Some(plan) = plan {
        args["message"] = json!(plan.prompt());
    }
    with_request(args, request)
}

fn get(ledger: &Ledger, child: &str, wait_ms: u64, cursor: Cursor, wait_for_event: bool) -> Value {
    let cursor = match cursor {
        Cursor::Next => ledger.cursor(child),
        Cursor::Zero => 0,
        Cursor::Beyond => ledger.cursor(child) + 100_000,
    };
    let wait_for = if wait_for_event { "event" } else { "settled" };
    json!({"childId": child, "waitMs": wait_ms, "cursor": cursor, "eventLimit": 50,
           "waitFor": wait_for})
}

/// The commit message a `Landing::Commit` of `child` gives.
pub fn commit_message(child: &str) -> String {
    format!("soak: the change of {child}")
}

fn apply(child: &str, how: Landing) -> Value {
    match how {
        Landing::Edits => json!({"childId": child}),
        Landing::Commit => json!({"childId": child, "commitMessage": commit_message(child)}),
        Landing::Discard => json!({"childId": child, "discard": true}),
    }
}

/// The codes `subzero_apply` may refuse with (docs/protocol.md): no change to land
/// (running, settled without one, landed or discarded already, a shared child), a change
/// that does not land whole, the child held by another process, an unknown child, and the
/// store or broker going away.
pub const APPLY_REFUSALS: [ErrorCode; 7] = [
    ErrorCode::ChangeUnavailable,
    ErrorCode::ChangeConflict,
    ErrorCode::Busy,
    ErrorCode::NotFound,
    ErrorCode::RecoveryRequired,
    ErrorCode::StorageUnavailable,
    ErrorCode::RuntimeShuttingDown,
];

fn with_request(mut args: Value, request: &Option<String>) -> Value {
    if let Some(id) = request {
        args["requestId"] = json!(id);
    }
    args
}

/// The arguments of an invalid call and the codes it may be refused with.
pub fn invalid(invalid: Invalid, model: Value, some_child: &str) -> (Value, Vec<ErrorCode>) {
    invalid_spawn(invalid, &model).unwrap_or_else(|| invalid_other(invalid, some_child))
}

/// A spawn with one argument wrong.
fn invalid_spawn(invalid: Invalid, model: &Value) -> Option<(Value, Vec<ErrorCode>)> {
    use ErrorCode::*;
    let plan = Plan {
        tag: "invalid".into(),
        turns: vec![],
        ending: Ending::Text { bytes: 10 },
        pace_ms: 0,
    };
    let spawn = |extra: Value| {
        let mut args =
            json!({"prompt": plan.prompt(), "templateId": "researcher", "model": model.clone()});
        if let (Value::Object(base), Value::Object(extra)) = (&mut args, extra) {
            base.extend(extra);
        }
        args
    };
    let model_with = |key: &str, value: &str| {
        let mut model = model.clone();
        model[key] = json!(value);
        json!({ "model": model })
    };
    Some(match invalid {
        Invalid::UnknownTemplate => (
            spawn(json!({"templateId": "no-such-template"})),
            vec![TemplateNotFound],
        ),
        Invalid::EmptyPrompt => (spawn(json!({"prompt": ""})), vec![InvalidRequest]),
        Invalid::OversizePrompt => (
            spawn(json!({"prompt": "x".repeat(70_000)})),
            vec![LimitExceeded, InvalidRequest],
        ),
        Invalid::UnknownCredential => (
            spawn(model_with("credentialRef", "nobody-configured-this")),
            vec![CredentialsRequired, InvalidRequest],
        ),
        Invalid::BadModelUrl => (
            spawn(model_with("url", "ftp://127.0.0.1/v1")),
            vec![InvalidRequest],
        ),
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
        _ => return None,
    })
}

/// Another tool's call with one argument wrong.
fn invalid_other(invalid: Invalid, some_child: &str) -> (Value, Vec<ErrorCode>) {
    use ErrorCode::*;
    match invalid {
        Invalid::UnknownChild => (json!({"childId": UNKNOWN_CHILD}), vec![NotFound]),
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
        // The spawn cases are `invalid_spawn`'s.
        _ => (json!({}), vec![InvalidRequest]),
    }
}
