//! The worker conformance suite, part 1: runs, steering, followups, checkpoints, redaction,
//! budgets and hostile streams — each case on the Rust worker and on the Pi worker, over the
//! control protocol, against a scripted model on loopback (`support::conformance`).

use crate::support::conformance::*;
use crate::support::worker::{with_compaction_off, with_limits};
use serde_json::json;
use subzero_protocol::{BudgetName, ErrorCode, RunSettledStatus, SteerDiscardReason, WorkerEvent};
use subzero_testkit::model_requests::chat;
use subzero_testkit::{Reply, ScriptedServer, Step};

/// Each event as its `kind` (`tool:<name>:<state>` for tool events).
fn kinds(events: &[WorkerEvent]) -> Vec<String> {
    events
        .iter()
        .map(|e| match e {
            WorkerEvent::Tool { name, state } => format!("tool:{}:{state}", name.as_str()),
            WorkerEvent::TurnStarted { .. } => "turn_started".to_owned(),
            WorkerEvent::Text { .. } => "text".to_owned(),
            WorkerEvent::SteerApplied { .. } => "steer_applied".to_owned(),
            WorkerEvent::SteerDiscarded { .. } => "steer_discarded".to_owned(),
            WorkerEvent::Compacted { .. } => "compacted".to_owned(),
            WorkerEvent::NetworkRefused { .. } => "network_refused".to_owned(),
        })
        .collect()
}

#[test]
fn a_run_with_a_tool_call_completes_and_commits_a_leaf_whose_digest_the_broker_recomputes() {
    each_engine(|engine| {
        let place = Place::new();
        let server = ScriptedServer::start(vec![
            Reply::tool_call("call_1", "read", r#"{"path":"README.md"}"#),
            Reply::text("The project is a demo."),
        ])
        .expect("server");
        let id = engine.run_id(1);
        let mut worker = place.worker(engine, &researcher());
        let hello = worker.hello();
        assert_eq!(hello.control_version, 1);
        assert!(hello.steering);
        worker.send(&place.start(
            &id,
            server.base_url(),
            researcher(),
            "What is this project?",
        ));
        let leaf = worker.leaf_committed(&id);
        let settled = worker.run_settled(&id);
        assert_eq!(
            settled.status,
            RunSettledStatus::Completed,
            "{engine:?}: {settled}"
        );
        assert_eq!(settled.result(), "The project is a demo.");
        assert_eq!(settled.usage.turns, 2, "{settled}");
        let events = kinds(&worker.events(&id));
        for wanted in [
            "turn_started",
            "tool:read:started",
            "tool:read:finished",
            "text",
        ] {
            assert!(
                events.contains(&wanted.to_owned()),
                "{engine:?} events: {events:?}"
            );
        }
        assert_eq!(
            engine.digest(&place.transcript_text(), &leaf.leaf_id),
            Some(leaf.digest),
            "{engine:?}: the committed digest is not the transcript's"
        );
        let bodies = bodies(&server.requests());
        assert_eq!(bodies.len(), 2);
        assert!(
            bodies[1].contains("A small project."),
            "{engine:?}: the tool result reached the model: {}",
            bodies[1]
        );
    });
}

#[test]
fn a_steer_is_applied_between_turns_with_a_receipt_and_one_after_the_answer_is_discarded() {
    each_engine(|engine| {
        let place = Place::new();
        let server = ScriptedServer::start(vec![
            Reply::Sse(vec![
                Step::tool_delta(Some(0), Some("call_1"), Some("ls"), "{}"),
                Step::delay_ms(1500),
                Step::finish("tool_calls"),
                Step::usage(10, 5),
                Step::done(),
            ]),
            Reply::text("Steered: looking at docs now."),
        ])
        .expect("server");
        let id = engine.run_id(2);
        let mut worker = place.worker(engine, &researcher());
        worker.send(&place.start(&id, server.base_url(), researcher(), "List the files."));
        worker.next_event("turn 1", &id, |e| {
            matches!(e, WorkerEvent::TurnStarted { .. })
        });
        assert!(
            server.wait_for_requests(1, WAIT),
            "the first request never came"
        );
        worker.send(&json!({"type": "steer", "runId": id, "steerId": "st_01JDZ8Q4W3V9K2M5N7P8R0S1T2", "requestId": "steer-1", "message": "STEER-5b1: look at docs/ first"}));
        let applied = worker.steer("steer_applied", &id, |s| s.reason.is_none());
        assert_eq!(applied.steer_id, "st_01JDZ8Q4W3V9K2M5N7P8R0S1T2");
        assert_eq!(applied.request_id.as_deref(), Some("steer-1"));
        let settled = worker.run_settled(&id);
        assert_eq!(
            settled.status,
            RunSettledStatus::Completed,
            "{engine:?}: {settled}"
        );
        let bodies = bodies(&server.requests());
        assert!(
            bodies[1].contains("STEER-5b1"),
            "{engine:?}: the steer reached the next request: {}",
            bodies[1]
        );
        // After the final answer: refused with a receipt, nothing sent.
        worker.send(&json!({"type": "steer", "runId": id, "steerId": "st_01JDZ8Q4W3V9K2M5N7P8R0S1T3", "message": "too late"}));
        let late = worker.steer("late steer", &id, |s| {
            s.steer_id == "st_01JDZ8Q4W3V9K2M5N7P8R0S1T3"
        });
        assert_eq!(late.reason, Some(SteerDiscardReason::NotActive), "{late:?}");
        assert_eq!(server.requests().len(), 2);
    });
}

#[test]
fn a_followup_continues_from_the_committed_leaf_with_the_earlier_turns() {
    each_engine(|engine| {
        let place = Place::new();
        let server = ScriptedServer::start(vec![
            Reply::text("FIRST-ANSWER-91c: a demo."),
            Reply::text("Second answer."),
        ])
        .expect("server");
        let (first, second) = (engine.run_id(3), engine.run_id(4));
        let mut worker = place.worker(engine, &researcher());
        worker.send(&place.start(&first, server.base_url(), researcher(), "What is it?"));
        let leaf = worker.leaf_committed(&first);
        worker.run_settled(&first);
        let next = place.start_with(
            &second,
            server.base_url(),
            researcher(),
            "FOLLOWUP-2d7: and then?",
            |spec| {
                spec.from_leaf = Some(&leaf.leaf_id);
                spec.expected_digest = Some(&leaf.digest);
            },
        );
        worker.send(&next);
        let settled = worker.run_settled(&second);
        assert_eq!(
            settled.status,
            RunSettledStatus::Completed,
            "{engine:?}: {settled}"
        );
        let bodies = bodies(&server.requests());
        assert!(
            bodies[1].contains("FIRST-ANSWER-91c") && bodies[1].contains("FOLLOWUP-2d7"),
            "{engine:?}: {}",
            bodies[1]
        );
    });
}

#[test]
fn a_wrong_expected_digest_is_refused_before_any_request() {
    each_engine(|engine| {
        let place = Place::new();
        let server =
            ScriptedServer::start(vec![Reply::text("one"), Reply::text("two")]).expect("server");
        let (first, second) = (engine.run_id(5), engine.run_id(6));
        let mut worker = place.worker(engine, &researcher());
        worker.send(&place.start(&first, server.base_url(), researcher(), "first"));
        let leaf = worker.leaf_committed(&first);
        worker.run_settled(&first);
        let wrong = format!("sha256:{}", "ab".repeat(32));
        let next = place.start_with(&second, server.base_url(), researcher(), "second", |spec| {
            spec.from_leaf = Some(&leaf.leaf_id);
            spec.expected_digest = Some(&wrong);
        });
        worker.send(&next);
        let settled = worker.run_settled(&second);
        assert_eq!(settled.status, RunSettledStatus::Failed);
        assert_eq!(
            settled.code(),
            ErrorCode::CheckpointIncompatible,
            "{engine:?}: {settled}"
        );
        assert_eq!(
            server.requests().len(),
            1,
            "{engine:?}: nothing was sent for the refused run"
        );
    });
}

#[test]
fn an_unknown_transcript_version_is_refused_never_migrated() {
    each_engine(|engine| {
        let place = Place::new();
        std::fs::create_dir_all(place.transcript().parent().expect("dir")).expect("dir");
        let foreign = match engine {
            Engine::Rust => "{\"type\":\"header\",\"id\":\"h0\",\"version\":99}\n",
            Engine::Pi => {
                "{\"type\":\"session\",\"version\":9,\"id\":\"s\",\"timestamp\":\"t\",\"cwd\":\"/\"}\n"
            }
        };
        std::fs::write(place.transcript(), foreign).expect("transcript");
        let server = ScriptedServer::start(vec![Reply::text("never")]).expect("server");
        let id = engine.run_id(7);
        let mut worker = place.worker(engine, &researcher());
        worker.send(&place.start(&id, server.base_url(), researcher(), "hello"));
        let settled = worker.run_settled(&id);
        assert_eq!(
            settled.status,
            RunSettledStatus::Failed,
            "{engine:?}: {settled}"
        );
        assert!(
            server.requests().is_empty(),
            "{engine:?}: a request was made"
        );
        assert_eq!(
            place.transcript_text(),
            foreign,
            "{engine:?}: the transcript was changed"
        );
    });
}

#[test]
fn the_key_is_redacted_in_events_results_and_the_transcript_even_split_across_deltas() {
    each_engine(|engine| {
        let place = Place::new();
        let server = ScriptedServer::start(vec![Reply::text_deltas(&[
            "the key is sk-test-",
            "key-0000 and ",
            "done",
        ])])
        .expect("server");
        let id = engine.run_id(8);
        let mut worker = place.worker(engine, &researcher());
        worker.send(&place.start(&id, server.base_url(), researcher(), "echo the key"));
        let settled = worker.run_settled(&id);
        assert_eq!(
            settled.status,
            RunSettledStatus::Completed,
            "{engine:?}: {settled}"
        );
        assert!(settled.result().contains("[REDACTED]"), "{settled}");
        let out = worker.stdout_text();
        assert!(
            !out.contains("sk-test-key-0000"),
            "{engine:?}: key on stdout: {out}"
        );
        assert!(
            !place.transcript_text().contains("sk-test-key-0000"),
            "{engine:?}: key in the transcript"
        );
        assert!(
            !worker.stderr_text().contains("sk-test-key-0000"),
            "{engine:?}: key in the log"
        );
    });
}

#[test]
fn max_turns_runs_the_last_turns_calls_then_hands_off_with_a_tools_off_summary() {
    each_engine(|engine| {
        let place = Place::new();
        let server = ScriptedServer::start(vec![
            Reply::tool_call("call_1", "read", r#"{"path":"README.md"}"#),
            Reply::text("Handoff: read nothing yet; continue with README.md."),
        ])
        .expect("server");
        let grant = with_limits(researcher(), &json!({"maxTurns": 1}));
        let id = engine.run_id(9);
        let mut worker = place.worker(engine, &grant);
        worker.send(&place.start(&id, server.base_url(), grant.clone(), "Read everything."));
        let leaf = worker.leaf_committed(&id);
        let settled = worker.run_settled(&id);
        assert_eq!(
            settled.status,
            RunSettledStatus::BudgetExhausted,
            "{engine:?}: {settled}"
        );
        assert_eq!(
            settled.budget.as_ref().map(|b| b.budget),
            Some(BudgetName::MaxTurns)
        );
        assert_eq!(settled.budget.as_ref().map(|b| b.limit.get()), Some(1));
        assert_eq!(
            settled.result(),
            "Handoff: read nothing yet; continue with README.md."
        );
        let bodies = bodies(&server.requests());
        assert_eq!(bodies.len(), 2, "{engine:?}: one turn, one handoff");
        assert!(
            bodies[1].contains("Do not call any tool"),
            "{engine:?}: {}",
            bodies[1]
        );
        assert!(
            bodies[1].contains("A small project."),
            "{engine:?}: the last turn's call ran: {}",
            bodies[1]
        );
        let handoff = chat::Request::of(&server.requests()[1]);
        assert!(
            handoff.tools.is_none() || handoff.tool_choice == Some(json!("none")),
            "{engine:?}: tools off: {handoff:#?}"
        );
        let text = place.transcript_text();
        assert!(
            text.contains("Do not call any tool") && text.contains("Handoff: read nothing yet")
        );
        assert!(engine.digest(&text, &leaf.leaf_id).is_some());
    });
}

#[test]
fn a_flooded_handoff_summary_is_cut_at_16_kib_and_not_read_further() {
    each_engine(|engine| {
        const MARKER: &str = "\n[… handoff summary cut at 16384 bytes]";
        let place = Place::new();
        let flood = format!(
            "data: {}\n\n",
            json!({"id": "x", "object": "chat.completion.chunk", "created": 0, "model": "m", "choices": [{"index": 0, "delta": {"content": "x".repeat(1100)}, "finish_reason": null}]})
        );
        let server = ScriptedServer::start(vec![
            Reply::tool_call("call_1", "ls", "{}"),
            Reply::Sse(vec![
                Step::text("Handoff: "),
                Step::Repeat {
                    raw: flood,
                    times: 2700,
                },
                Step::Hang,
            ]),
        ])
        .expect("server");
        let grant = with_limits(researcher(), &json!({"maxTurns": 1}));
        let id = engine.run_id(10);
        let started = std::time::Instant::now();
        let mut worker = place.worker(engine, &grant);
        worker.send(&place.start(&id, server.base_url(), grant.clone(), "List."));
        let settled = worker.run_settled(&id);
        assert!(started.elapsed() < WAIT);
        assert_eq!(
            settled.status,
            RunSettledStatus::BudgetExhausted,
            "{engine:?}: {settled}"
        );
        let result = settled.result();
        assert_eq!(result.len(), 16 * 1024 + MARKER.len(), "{engine:?}");
        assert!(result.starts_with("Handoff: xxx") && result.ends_with(MARKER));
    });
}

#[test]
fn a_response_past_max_response_bytes_fails_the_run_typed() {
    each_engine(|engine| {
        let place = Place::new();
        let chunk = format!(
            "data: {}\n\n",
            json!({"id": "x", "object": "chat.completion.chunk", "created": 0, "model": "m", "choices": [{"index": 0, "delta": {"content": "y".repeat(1000)}, "finish_reason": null}]})
        );
        let server = ScriptedServer::start(vec![Reply::Sse(vec![
            Step::Repeat {
                raw: chunk,
                times: 5000,
            },
            Step::finish("stop"),
            Step::done(),
        ])])
        .expect("server");
        let id = engine.run_id(11);
        let mut worker = place.worker(engine, &researcher());
        let start = place.start_with(&id, server.base_url(), researcher(), "Say a lot.", |spec| {
            spec.stream_limits = Some(json!({"maxResponseBytes": 65536, "maxToolArgumentBytes": 1048576, "idleTimeoutMs": 180000}));
        });
        worker.send(&start);
        let settled = worker.run_settled(&id);
        assert_eq!(
            settled.status,
            RunSettledStatus::Failed,
            "{engine:?}: {settled}"
        );
        assert_eq!(
            settled.code(),
            ErrorCode::LimitExceeded,
            "{engine:?}: {settled}"
        );
        assert_eq!(
            settled.details().limit.as_deref(),
            Some("model_response_bytes"),
            "{engine:?}: {settled}"
        );
        server.wait_for_requests(2, RETRY);
        assert_eq!(server.requests().len(), 1, "{engine:?}: nothing is retried");
    });
}

#[test]
fn a_prompt_refused_as_too_long_ends_the_run_context_exhausted_without_compaction() {
    each_engine(|engine| {
        let place = Place::new();
        let refusal = json!({"error": {"message": "This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens.", "type": "invalid_request_error", "param": "messages", "code": "context_length_exceeded"}});
        let server =
            ScriptedServer::start(vec![Reply::status(400, &refusal.to_string())]).expect("server");
        let grant = with_compaction_off(researcher());
        let id = engine.run_id(12);
        let mut worker = place.worker(engine, &grant);
        worker.send(&place.start(&id, server.base_url(), grant.clone(), "A long prompt."));
        let settled = worker.run_settled(&id);
        assert_eq!(
            settled.status,
            RunSettledStatus::Failed,
            "{engine:?}: {settled}"
        );
        assert_eq!(
            settled.code(),
            ErrorCode::ContextExhausted,
            "{engine:?}: {settled}"
        );
        server.wait_for_requests(2, RETRY);
        assert_eq!(server.requests().len(), 1, "{engine:?}: nothing is retried");
    });
}
