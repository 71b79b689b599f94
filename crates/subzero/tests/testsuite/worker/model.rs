//! Model loop behaviour: no retries on HTTP errors, steering, limits, lenient streams.

use crate::support::worker::{
    ControlLines, RETRY, RunSpec, WAIT, WorkerProc, researcher, with_limits,
};
use serde_json::json;
use subzero_protocol::{
    BudgetName, BudgetReached, ErrorCode, RunSettledStatus, SteerDiscardReason,
};
use subzero_testkit::{Reply, ScriptedServer, Step};

fn dirs() -> (tempfile::TempDir, tempfile::TempDir) {
    (
        tempfile::tempdir().expect("tempdir"),
        tempfile::tempdir().expect("tempdir"),
    )
}

#[test]
fn a_503_makes_exactly_one_request_and_fails_the_run() {
    let (ws, state) = dirs();
    let transcript = state.path().join("t.jsonl");
    let server = ScriptedServer::start(vec![
        Reply::status(503, "overloaded, try later"),
        Reply::text("should never be asked for"),
    ])
    .expect("server");
    let mut worker = WorkerProc::spawn();
    worker.send(
        &RunSpec::new(
            "run_00000000000000000000353033",
            server.base_url(),
            researcher(),
            ws.path(),
            &transcript,
        )
        .message(),
    );
    let settled = worker.run_settled("run_00000000000000000000353033");
    assert_eq!(settled.status, RunSettledStatus::Failed);
    assert_eq!(settled.code(), ErrorCode::ModelRequestFailed);
    assert_eq!(settled.details().status, Some(503));
    assert_eq!(
        settled.details().excerpt.as_deref(),
        Some("overloaded, try later")
    );
    server.wait_for_requests(2, RETRY);
    assert_eq!(server.requests().len(), 1, "no retry");
}

#[test]
fn a_steer_sent_mid_run_appears_in_the_next_request() {
    let (ws, state) = dirs();
    let transcript = state.path().join("t.jsonl");
    let server = ScriptedServer::start(vec![
        Reply::Sse(vec![
            Step::delay_ms(600),
            Step::tool_delta(Some(0), Some("c1"), Some("ls"), "{}"),
            Step::finish("tool_calls"),
            Step::done(),
        ]),
        Reply::text("steered answer"),
    ])
    .expect("server");
    let mut worker = WorkerProc::spawn();
    worker.send(
        &RunSpec::new(
            "run_00000000000000000000000073",
            server.base_url(),
            researcher(),
            ws.path(),
            &transcript,
        )
        .message(),
    );
    assert!(server.wait_for_requests(1, WAIT));
    worker.send(
        &json!({ "type": "steer", "runId": "run_00000000000000000000000073", "steerId": "st_00000000000000000000000031", "requestId": "req-1",
                         "message": "focus on the README please" }),
    );
    let settled = worker.run_settled("run_00000000000000000000000073");
    assert_eq!(settled.status, RunSettledStatus::Completed, "{settled}");
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    assert!(!requests[0].body.contains("focus on the README"));
    assert!(requests[1].body.contains("focus on the README please"));
    let applied = worker.steer("steer_applied", "run_00000000000000000000000073", |s| {
        s.reason.is_none()
    });
    assert_eq!(applied.steer_id, "st_00000000000000000000000031");
    assert_eq!(applied.request_id.as_deref(), Some("req-1"));
    let file = std::fs::read_to_string(&transcript).expect("transcript");
    assert!(file.contains("focus on the README please"));
}

#[test]
fn a_steer_pending_at_the_final_answer_gets_one_more_turn() {
    let (ws, state) = dirs();
    let transcript = state.path().join("t.jsonl");
    let server = ScriptedServer::start(vec![
        Reply::Sse(vec![
            Step::delay_ms(600),
            Step::text("first answer"),
            Step::finish("stop"),
            Step::done(),
        ]),
        Reply::text("second answer"),
    ])
    .expect("server");
    let mut worker = WorkerProc::spawn();
    worker.send(
        &RunSpec::new(
            "run_00000000000000000000000066",
            server.base_url(),
            researcher(),
            ws.path(),
            &transcript,
        )
        .message(),
    );
    assert!(server.wait_for_requests(1, WAIT));
    worker.send(&json!({ "type": "steer", "runId": "run_00000000000000000000000066", "steerId": "st_00000000000000000000000032", "message": "also mention tests" }));
    let settled = worker.run_settled("run_00000000000000000000000066");
    assert_eq!(settled.result(), "second answer");
    assert_eq!(settled.usage.turns, 2);
    assert!(server.requests()[1].body.contains("also mention tests"));
}

#[test]
fn a_steer_is_discarded_with_a_receipt_when_the_run_fails() {
    let (ws, state) = dirs();
    let transcript = state.path().join("t.jsonl");
    let server = ScriptedServer::start(vec![Reply::Sse(vec![
        Step::delay_ms(600),
        Step::Raw("HTTP garbage\n".into()),
    ])])
    .expect("server");
    let mut worker = WorkerProc::spawn();
    worker.send(
        &RunSpec::new(
            "run_00000000000000000000000064",
            server.base_url(),
            researcher(),
            ws.path(),
            &transcript,
        )
        .message(),
    );
    assert!(server.wait_for_requests(1, WAIT));
    worker.send(&json!({ "type": "steer", "runId": "run_00000000000000000000000064", "steerId": "st_00000000000000000000000033", "message": "x" }));
    let settled = worker.run_settled("run_00000000000000000000000064");
    assert_eq!(
        settled.status,
        RunSettledStatus::Failed,
        "a malformed stream fails the run"
    );
    assert_eq!(settled.code(), ErrorCode::ModelRequestFailed);
    let discarded = worker.steer("steer_discarded", "run_00000000000000000000000064", |s| {
        s.reason.is_some()
    });
    assert_eq!(discarded.steer_id, "st_00000000000000000000000033");
    assert_eq!(discarded.reason, Some(SteerDiscardReason::Failed));
}

#[test]
fn max_turns_ends_budget_exhausted_keeping_usage_and_the_last_text() {
    let (ws, state) = dirs();
    let transcript = state.path().join("t.jsonl");
    let server = ScriptedServer::start(vec![Reply::Sse(vec![
        Step::text("partial words"),
        Step::tool_delta(None, Some("c1"), Some("ls"), "{}"),
        Step::finish("tool_calls"),
        Step::usage(7, 3),
        Step::done(),
    ])])
    .expect("server");
    let snapshot = with_limits(researcher(), &json!({"maxTurns": 1}));
    let mut worker = WorkerProc::spawn();
    worker.send(
        &RunSpec::new(
            "run_0000000000000000000000006C",
            server.base_url(),
            snapshot,
            ws.path(),
            &transcript,
        )
        .message(),
    );
    // The handoff request finds the script exhausted (HTTP 500): the result is the
    // worker's note, with the child's last text.
    let settled = worker.run_settled("run_0000000000000000000000006C");
    assert_eq!(
        settled.status,
        RunSettledStatus::BudgetExhausted,
        "{settled:#}"
    );
    assert_eq!(
        settled.budget,
        Some(BudgetReached {
            budget: BudgetName::MaxTurns,
            limit: std::num::NonZeroU64::MIN,
            reached: 1,
        })
    );
    let result = settled.result();
    assert!(
        result.contains("maxTurns") && result.contains("partial words"),
        "{result}"
    );
    assert_eq!(settled.usage.input_tokens, 7);
    assert_eq!(settled.usage.output_tokens, 3);
    assert_eq!(settled.usage.turns, 2, "the turn and the handoff");
}

#[test]
fn a_hanging_model_hits_the_deadline_and_the_run_hands_off() {
    let (ws, state) = dirs();
    let transcript = state.path().join("t.jsonl");
    let server = ScriptedServer::start(vec![Reply::Sse(vec![Step::text("thinking"), Step::Hang])])
        .expect("server");
    let snapshot = with_limits(researcher(), &json!({"deadlineMs": 700}));
    let mut worker = WorkerProc::spawn();
    worker.send(
        &RunSpec::new(
            "run_00000000000000000000000068",
            server.base_url(),
            snapshot,
            ws.path(),
            &transcript,
        )
        .message(),
    );
    let settled = worker.run_settled("run_00000000000000000000000068");
    assert_eq!(
        settled.status,
        RunSettledStatus::BudgetExhausted,
        "{settled:#}"
    );
    assert_eq!(
        settled.budget.as_ref().map(|b| b.budget),
        Some(BudgetName::DeadlineMs)
    );
    assert_eq!(settled.budget.as_ref().map(|b| b.limit.get()), Some(700));
    let result = settled.result();
    assert!(result.contains("deadlineMs"), "{result}");
}

#[test]
fn an_unadvertised_api_is_refused() {
    let (ws, state) = dirs();
    let transcript = state.path().join("t.jsonl");
    let server = ScriptedServer::start(vec![]).expect("server");
    let mut worker = WorkerProc::spawn();
    let mut spec = RunSpec::new(
        "run_00000000000000000000617069",
        server.base_url(),
        researcher(),
        ws.path(),
        &transcript,
    );
    spec.api = "gemini-generate-content";
    worker.send(&spec.message());
    let settled = worker.run_settled("run_00000000000000000000617069");
    assert_eq!(settled.code(), ErrorCode::WorkerIncompatible);
    assert!(server.requests().is_empty());
}
