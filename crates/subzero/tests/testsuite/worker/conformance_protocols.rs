//! The worker conformance suite, part 4: the two other model protocols, `openai-responses` and
//! `anthropic-messages`, on both workers as the broker starts them (`support::conformance`): a
//! run with a tool call, its usage as the endpoint reported it, the key redacted, and every
//! request one the API would accept (`subzero_testkit::model_responses::check_request`,
//! `model_messages::check_request`) with what docs/protocol.md says each protocol sends.

use crate::support::conformance::*;
use crate::support::worker::{Settled, with_limits};
use serde_json::{Value, json};
use subzero_protocol::{ErrorCode, RunSettledStatus, UsageSource};
use subzero_testkit::model_messages as ms;
use subzero_testkit::model_requests::{chat, messages, responses};
use subzero_testkit::model_responses as rs;
use subzero_testkit::{RecordedRequest, Reply, ScriptedServer};

const KEY: &str = "sk-test-key-0000";

/// Runs a researcher on `api` against `script` to its end: the settled line, the requests,
/// the worker and its place.
fn run(
    engine: Engine,
    api: &str,
    script: Vec<Reply>,
    n: u8,
) -> (Settled, Vec<RecordedRequest>, Conn, Place) {
    let place = Place::new();
    let server = ScriptedServer::start(script).expect("server");
    let id = engine.run_id(n);
    let mut worker = place.worker(engine, &researcher());
    let start = place.start_with(
        &id,
        server.base_url(),
        researcher(),
        "What is this project?",
        |spec| spec.api = api,
    );
    worker.send(&start);
    let settled = worker.run_settled(&id);
    (settled, server.requests(), worker, place)
}

/// The key is nowhere in what the worker said or wrote.
fn redacted(engine: Engine, worker: &Conn, place: &Place, settled: &Settled) {
    let result = settled.result();
    assert!(
        result.contains("[REDACTED]") && !result.contains(KEY),
        "{engine:?}: {result}"
    );
    assert!(
        !worker.stdout_text().contains(KEY),
        "{engine:?}: key in a control line"
    );
    assert!(
        !worker.stderr_text().contains(KEY),
        "{engine:?}: key in the log"
    );
    assert!(
        !place.transcript_text().contains(KEY),
        "{engine:?}: key in the transcript"
    );
}

#[test]
fn openai_responses_runs_a_tool_call_reports_usage_and_redacts_the_key() {
    each_engine(|engine| {
        let mut answer = vec![rs::created(), rs::in_progress()];
        // The key split across two deltas of one message.
        answer.extend([
            rs::item_added(0, json!({"type": "message", "id": "msg_1", "role": "assistant", "status": "in_progress", "content": []})),
            rs::text_delta(0, "msg_1", "A demo; the key is sk-test-"),
            rs::text_delta(0, "msg_1", "key-0000."),
            rs::item_done(0, rs::message_item("msg_1", "A demo; the key is sk-test-key-0000.")),
        ]);
        answer.push(rs::completed(
            vec![rs::message_item(
                "msg_1",
                "A demo; the key is sk-test-key-0000.",
            )],
            120,
            9,
        ));
        // The call comes after a reasoning item, which is never sent back nor kept.
        let mut call = vec![rs::created(), rs::in_progress()];
        call.extend(rs::reasoning(0, "rs_1", "PRIVATE-THOUGHT-5e2"));
        call.extend(rs::call_events(
            1,
            "fc_1",
            "call_1",
            "read",
            r#"{"path":"README.md"}"#,
        ));
        call.push(rs::completed(
            vec![rs::call_item(
                "fc_1",
                "call_1",
                "read",
                r#"{"path":"README.md"}"#,
            )],
            20,
            5,
        ));
        let script = vec![Reply::Sse(rs::steps(call)), Reply::Sse(rs::steps(answer))];
        let (settled, requests, worker, place) = run(engine, "openai-responses", script, 41);
        assert_eq!(
            settled.status,
            RunSettledStatus::Completed,
            "{engine:?}: {settled}"
        );
        assert_eq!(requests.len(), 2, "{engine:?}");
        for request in &requests {
            assert_eq!(request.path, "/v1/responses", "{engine:?}");
            assert_eq!(
                request.header("authorization"),
                Some(format!("Bearer {KEY}").as_str()),
                "{engine:?}"
            );
            // Checked as the API would check it; an input item with an `id` is refused by the
            // view (its items take no unknown field).
            let body = responses::Request::of(request);
            assert_eq!(body.stream, Some(true), "{engine:?}");
            assert_eq!(
                body.store,
                Some(false),
                "{engine:?}: nothing kept at the provider: {body:#?}"
            );
            assert!(body.previous_response_id.is_none(), "{engine:?}");
            assert_eq!(body.max_output_tokens, Some(8192), "{engine:?}: {body:#?}");
        }
        let second = responses::Request::of(&requests[1]);
        let outputs = second.outputs();
        assert_eq!(outputs.len(), 1, "{engine:?}: {second:#?}");
        assert_eq!(outputs[0].call_id, "call_1", "{engine:?}: {second:#?}");
        assert!(
            outputs[0].output.contains("A small project."),
            "{engine:?}: the read ran: {second:#?}"
        );
        assert_eq!(second.calls()[0].call_id, "call_1", "{engine:?}");
        assert_eq!(settled.usage.turns, 2, "{engine:?}: {settled}");
        assert_eq!(
            settled.usage.source,
            UsageSource::Reported,
            "{engine:?}: {settled}"
        );
        let input = settled.usage.input_tokens;
        let output = settled.usage.output_tokens;
        assert!(
            input >= 120 && output >= 9,
            "{engine:?}: reported usage: {settled}"
        );
        redacted(engine, &worker, &place, &settled);
        assert!(
            !place.transcript_text().contains("PRIVATE-THOUGHT-5e2"),
            "{engine:?}: reasoning kept in the transcript"
        );
    });
}

#[test]
fn anthropic_messages_runs_a_tool_call_reports_usage_and_redacts_the_key() {
    each_engine(|engine| {
        let answer = vec![
            ms::message_start(130),
            ms::text_start(0),
            ms::text_delta(0, "A demo; the key is sk-test-"),
            ms::text_delta(0, "key-0000."),
            ms::block_stop(0),
            ms::message_delta("end_turn", 11),
            ms::message_stop(),
        ];
        // The call comes after a thinking block, which is never sent back nor kept.
        let mut call = vec![ms::message_start(20)];
        call.extend(ms::thinking(0, "PRIVATE-THOUGHT-7d3"));
        call.extend(ms::tool_use_steps(
            1,
            &[("toolu_1", "read", r#"{"path":"README.md"}"#)],
        ));
        call.extend([ms::message_delta("tool_use", 5), ms::message_stop()]);
        let script = vec![Reply::Sse(call), Reply::Sse(answer)];
        let (settled, requests, worker, place) = run(engine, "anthropic-messages", script, 42);
        assert_eq!(
            settled.status,
            RunSettledStatus::Completed,
            "{engine:?}: {settled}"
        );
        assert_eq!(requests.len(), 2, "{engine:?}");
        for request in &requests {
            assert_eq!(request.path, "/v1/messages", "{engine:?}");
            assert_eq!(request.header("x-api-key"), Some(KEY), "{engine:?}");
            assert_eq!(
                request.header("anthropic-version"),
                Some("2023-06-01"),
                "{engine:?}"
            );
            assert!(
                request.header("authorization").is_none(),
                "{engine:?}: no Bearer token"
            );
            let body = messages::Request::of(request);
            assert_eq!(body.stream, Some(true), "{engine:?}");
            assert_eq!(body.max_tokens, 8192, "{engine:?}: {body:#?}");
            assert!(
                !request.body.contains("PRIVATE-THOUGHT-7d3"),
                "{engine:?}: {body:#?}"
            );
        }
        let second = messages::Request::of(&requests[1]);
        let results = second.tool_results();
        assert_eq!(results.len(), 1, "{engine:?}: {second:#?}");
        assert_eq!(results[0].tool_use_id, "toolu_1", "{engine:?}");
        assert!(
            results[0].content.contains("A small project."),
            "{engine:?}: the read ran: {second:#?}"
        );
        assert_eq!(settled.usage.turns, 2, "{engine:?}: {settled}");
        assert_eq!(
            settled.usage.source,
            UsageSource::Reported,
            "{engine:?}: {settled}"
        );
        let input = settled.usage.input_tokens;
        let output = settled.usage.output_tokens;
        assert!(
            input >= 140 && output >= 16,
            "{engine:?}: reported usage: {settled}"
        );
        redacted(engine, &worker, &place, &settled);
    });
}

#[test]
fn a_responses_handoff_keeps_the_tools_declared_and_forbids_new_calls() {
    each_engine(|engine| {
        let place = Place::new();
        let server = ScriptedServer::start(vec![
            rs::tool_call("call_1", "ls", "{}"),
            rs::text("Handoff: listed the files."),
        ])
        .expect("server");
        let grant = with_limits(researcher(), &json!({"maxTurns": 1}));
        let id = engine.run_id(43);
        let mut worker = place.worker(engine, &grant);
        let start = place.start_with(&id, server.base_url(), grant.clone(), "List.", |spec| {
            spec.api = "openai-responses";
        });
        worker.send(&start);
        let settled = worker.run_settled(&id);
        assert_eq!(
            settled.status,
            RunSettledStatus::BudgetExhausted,
            "{engine:?}: {settled}"
        );
        assert_eq!(settled.result(), "Handoff: listed the files.");
        let handoff = responses::Request::of(&server.requests()[1]);
        assert_eq!(
            handoff.tool_choice,
            Some(json!("none")),
            "{engine:?}: {handoff:#?}"
        );
    });
}

#[test]
fn an_anthropic_handoff_keeps_the_tools_declared_and_forbids_new_calls() {
    each_engine(|engine| {
        let place = Place::new();
        let server = ScriptedServer::start(vec![
            ms::tool_use("toolu_1", "ls", "{}"),
            ms::text("Handoff: listed the files."),
        ])
        .expect("server");
        let grant = with_limits(researcher(), &json!({"maxTurns": 1}));
        let id = engine.run_id(44);
        let mut worker = place.worker(engine, &grant);
        let start = place.start_with(&id, server.base_url(), grant.clone(), "List.", |spec| {
            spec.api = "anthropic-messages";
        });
        worker.send(&start);
        let settled = worker.run_settled(&id);
        assert_eq!(
            settled.status,
            RunSettledStatus::BudgetExhausted,
            "{engine:?}: {settled}"
        );
        assert_eq!(settled.result(), "Handoff: listed the files.");
        let handoff = messages::Request::of(&server.requests()[1]);
        assert_eq!(
            handoff.tool_choice,
            Some(json!({"type": "none"})),
            "{engine:?}: {handoff:#?}"
        );
        assert!(
            !handoff.tools.is_empty(),
            "{engine:?}: the tools stay declared: {handoff:#?}"
        );
    });
}

#[test]
fn a_typed_max_tokens_refusal_is_sent_again_once_with_max_completion_tokens_and_remembered() {
    use subzero_testkit::model_chat_shapes::openai;
    each_engine(|engine| {
        let place = Place::new();
        let server = ScriptedServer::start(vec![
            openai::refuses_max_tokens(),
            openai::text("first answer", (11, 3)),
            openai::text("second answer", (12, 4)),
        ])
        .expect("server");
        let (first, second) = (engine.run_id(45), engine.run_id(46));
        let mut worker = place.worker(engine, &researcher());
        worker.send(&place.start(&first, server.base_url(), researcher(), "One."));
        let leaf = worker.leaf_committed(&first);
        let settled = worker.run_settled(&first);
        assert_eq!(
            settled.status,
            RunSettledStatus::Completed,
            "{engine:?}: {settled}"
        );
        assert_eq!(settled.result(), "first answer");
        let next = place.start_with(&second, server.base_url(), researcher(), "Two.", |spec| {
            spec.from_leaf = Some(&leaf.leaf_id);
            spec.expected_digest = Some(&leaf.digest);
        });
        worker.send(&next);
        let settled = worker.run_settled(&second);
        assert_eq!(settled.result(), "second answer", "{engine:?}: {settled}");
        let requests = server.requests();
        let sent: Vec<chat::Request> = requests.iter().map(chat::Request::of).collect();
        assert_eq!(sent.len(), 3, "{engine:?}: one repeat, no other request");
        assert_eq!(sent[0].cap(), ("max_tokens", 8192), "{engine:?}");
        assert_eq!(sent[1].cap(), ("max_completion_tokens", 8192), "{engine:?}");
        assert_eq!(sent[2].cap(), ("max_completion_tokens", 8192), "{engine:?}");
        let raw: Vec<Value> = requests
            .iter()
            .map(|r| r.json().expect("a JSON body"))
            .collect();
        let mut renamed = raw[0].as_object().expect("an object").clone();
        let value = renamed.remove("max_tokens").expect("max_tokens");
        renamed.insert("max_completion_tokens".to_owned(), value);
        assert_eq!(
            Value::Object(renamed),
            raw[1],
            "{engine:?}: the repeat is the same request"
        );
    });
}

#[test]
fn a_second_max_tokens_refusal_after_the_switch_fails_the_run_without_a_third_request() {
    use subzero_testkit::model_chat_shapes::openai;
    each_engine(|engine| {
        let place = Place::new();
        let server = ScriptedServer::start(vec![
            openai::refuses_max_tokens(),
            openai::refuses_max_tokens(),
            Reply::text("never asked for"),
        ])
        .expect("server");
        let id = engine.run_id(47);
        let mut worker = place.worker(engine, &researcher());
        worker.send(&place.start(&id, server.base_url(), researcher(), "One."));
        let settled = worker.run_settled(&id);
        assert_eq!(
            settled.status,
            RunSettledStatus::Failed,
            "{engine:?}: {settled}"
        );
        assert_eq!(settled.code(), ErrorCode::ModelRequestFailed, "{engine:?}");
        assert_eq!(settled.details().status, Some(400), "{engine:?}: {settled}");
        server.wait_for_requests(3, RETRY);
        assert_eq!(server.requests().len(), 2, "{engine:?}");
    });
}
