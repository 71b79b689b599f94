//! The worker conformance suite, part 4: the two other model protocols, `openai-responses` and
//! `anthropic-messages`, on both workers as the broker starts them (`support::conformance`): a
//! run with a tool call, its usage as the endpoint reported it, the key redacted, and every
//! request one the API would accept (`subzero_testkit::model_responses::check_request`,
//! `model_messages::check_request`) with what docs/protocol.md says each protocol sends.

use crate::support::conformance::*;
use serde_json::{Value, json};
use subzero_testkit::model_messages as ms;
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
) -> (Value, Vec<RecordedRequest>, Conn, Place) {
    let place = Place::new();
    let server = ScriptedServer::start(script).expect("server");
    let id = engine.run_id(n);
    let mut worker = place.worker(engine, &researcher());
    let mut start = place.start(
        &id,
        server.base_url(),
        researcher(),
        "What is this project?",
    );
    start["model"]["api"] = json!(api);
    worker.send(&start);
    let settled = worker.settled(&id);
    (settled, server.requests(), worker, place)
}

/// The key is nowhere in what the worker said or wrote.
fn redacted(engine: Engine, worker: &Conn, place: &Place, settled: &Value) {
    let result = settled["result"].as_str().expect("result");
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
        assert_eq!(settled["status"], "completed", "{engine:?}: {settled}");
        assert_eq!(requests.len(), 2, "{engine:?}");
        for request in &requests {
            assert_eq!(request.path, "/v1/responses", "{engine:?}");
            assert_eq!(
                request.header("authorization"),
                Some(format!("Bearer {KEY}").as_str()),
                "{engine:?}"
            );
            let body = request.json().expect("json body");
            if let Err(refused) = rs::check_request(&body) {
                panic!("{engine:?}: the Responses API would refuse ({refused}): {body:#}");
            }
            assert_eq!(body["stream"], true, "{engine:?}");
            assert_eq!(
                body["store"], false,
                "{engine:?}: nothing kept at the provider: {body:#}"
            );
            assert!(body.get("previous_response_id").is_none(), "{engine:?}");
            assert_eq!(body["max_output_tokens"], 8192, "{engine:?}: {body:#}");
            for item in body["input"].as_array().expect("input") {
                assert!(
                    item.get("id").is_none(),
                    "{engine:?}: an input item with an id: {body:#}"
                );
            }
        }
        let second = requests[1].json().expect("json");
        let outputs = rs::input_items(&second, "function_call_output");
        assert_eq!(outputs.len(), 1, "{engine:?}: {second:#}");
        assert_eq!(outputs[0]["call_id"], "call_1", "{engine:?}: {second:#}");
        assert!(
            outputs[0]["output"]
                .to_string()
                .contains("A small project."),
            "{engine:?}: the read ran: {second:#}"
        );
        let calls = rs::input_items(&second, "function_call");
        assert_eq!(calls[0]["call_id"], "call_1", "{engine:?}");
        assert_eq!(settled["usage"]["turns"], 2, "{engine:?}: {settled}");
        assert_eq!(
            settled["usage"]["source"], "reported",
            "{engine:?}: {settled}"
        );
        let input = settled["usage"]["inputTokens"]
            .as_u64()
            .expect("input tokens");
        let output = settled["usage"]["outputTokens"]
            .as_u64()
            .expect("output tokens");
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
        assert_eq!(settled["status"], "completed", "{engine:?}: {settled}");
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
            let body = request.json().expect("json body");
            if let Err(refused) = ms::check_request(&body) {
                panic!("{engine:?}: the Messages API would refuse ({refused}): {body:#}");
            }
            assert_eq!(body["stream"], true, "{engine:?}");
            assert_eq!(body["max_tokens"], 8192, "{engine:?}: {body:#}");
            assert!(
                !body.to_string().contains("PRIVATE-THOUGHT-7d3"),
                "{engine:?}: {body:#}"
            );
        }
        let second = requests[1].json().expect("json");
        let results: Vec<&Value> = second["messages"]
            .as_array()
            .expect("messages")
            .iter()
            .flat_map(|m| m["content"].as_array().into_iter().flatten())
            .filter(|b| b["type"] == "tool_result")
            .collect();
        assert_eq!(results.len(), 1, "{engine:?}: {second:#}");
        assert_eq!(results[0]["tool_use_id"], "toolu_1", "{engine:?}");
        assert!(
            results[0]["content"]
                .to_string()
                .contains("A small project."),
            "{engine:?}: the read ran: {second:#}"
        );
        assert_eq!(settled["usage"]["turns"], 2, "{engine:?}: {settled}");
        assert_eq!(
            settled["usage"]["source"], "reported",
            "{engine:?}: {settled}"
        );
        let input = settled["usage"]["inputTokens"]
            .as_u64()
            .expect("input tokens");
        let output = settled["usage"]["outputTokens"]
            .as_u64()
            .expect("output tokens");
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
        let mut grant = researcher();
        grant["limits"]["maxTurns"] = json!(1);
        let id = engine.run_id(43);
        let mut worker = place.worker(engine, &grant);
        let mut start = place.start(&id, server.base_url(), grant.clone(), "List.");
        start["model"]["api"] = json!("openai-responses");
        worker.send(&start);
        let settled = worker.settled(&id);
        assert_eq!(
            settled["status"], "budget_exhausted",
            "{engine:?}: {settled}"
        );
        assert_eq!(settled["result"], "Handoff: listed the files.");
        let handoff = server.requests()[1].json().expect("json");
        if let Err(refused) = rs::check_request(&handoff) {
            panic!("{engine:?}: the Responses API would refuse ({refused}): {handoff:#}");
        }
        assert_eq!(handoff["tool_choice"], "none", "{engine:?}: {handoff:#}");
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
        let mut grant = researcher();
        grant["limits"]["maxTurns"] = json!(1);
        let id = engine.run_id(44);
        let mut worker = place.worker(engine, &grant);
        let mut start = place.start(&id, server.base_url(), grant.clone(), "List.");
        start["model"]["api"] = json!("anthropic-messages");
        worker.send(&start);
        let settled = worker.settled(&id);
        assert_eq!(
            settled["status"], "budget_exhausted",
            "{engine:?}: {settled}"
        );
        assert_eq!(settled["result"], "Handoff: listed the files.");
        let handoff = server.requests()[1].json().expect("json");
        if let Err(refused) = ms::check_request(&handoff) {
            panic!("{engine:?}: the Messages API would refuse ({refused}): {handoff:#}");
        }
        assert_eq!(
            handoff["tool_choice"],
            json!({"type": "none"}),
            "{engine:?}: {handoff:#}"
        );
        assert!(
            handoff["tools"].as_array().is_some_and(|t| !t.is_empty()),
            "{engine:?}: the tools stay declared: {handoff:#}"
        );
    });
}

/// Which Chat Completions field carried the cap, and its value.
fn cap(body: &Value) -> (&'static str, Value) {
    match (body.get("max_tokens"), body.get("max_completion_tokens")) {
        (Some(v), None) => ("max_tokens", v.clone()),
        (None, Some(v)) => ("max_completion_tokens", v.clone()),
        other => panic!("the cap must travel in exactly one field: {other:?} in {body}"),
    }
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
        let leaf = worker.expect_type("leaf_committed", &first);
        let settled = worker.settled(&first);
        assert_eq!(settled["status"], "completed", "{engine:?}: {settled}");
        assert_eq!(settled["result"], "first answer");
        let mut next = place.start(&second, server.base_url(), researcher(), "Two.");
        next["fromLeaf"] = leaf["leafId"].clone();
        next["expectedDigest"] = leaf["digest"].clone();
        worker.send(&next);
        let settled = worker.settled(&second);
        assert_eq!(settled["result"], "second answer", "{engine:?}: {settled}");
        let sent: Vec<Value> = server
            .requests()
            .iter()
            .map(|r| r.json().expect("json"))
            .collect();
        assert_eq!(sent.len(), 3, "{engine:?}: one repeat, no other request");
        assert_eq!(cap(&sent[0]), ("max_tokens", json!(8192)), "{engine:?}");
        assert_eq!(
            cap(&sent[1]),
            ("max_completion_tokens", json!(8192)),
            "{engine:?}"
        );
        assert_eq!(
            cap(&sent[2]),
            ("max_completion_tokens", json!(8192)),
            "{engine:?}"
        );
        let mut renamed = sent[0].clone();
        let value = renamed
            .as_object_mut()
            .and_then(|o| o.remove("max_tokens"))
            .expect("max_tokens");
        renamed["max_completion_tokens"] = value;
        assert_eq!(
            renamed, sent[1],
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
        let settled = worker.settled(&id);
        assert_eq!(settled["status"], "failed", "{engine:?}: {settled}");
        assert_eq!(
            settled["error"]["code"], "model_request_failed",
            "{engine:?}"
        );
        assert_eq!(
            settled["error"]["details"]["status"], 400,
            "{engine:?}: {settled}"
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
        assert_eq!(server.requests().len(), 2, "{engine:?}");
    });
}
