//! `model.api = "anthropic-messages"`: the real worker against scripted Messages streams
//! (text, tool_use blocks split across `input_json_delta`s, usage, every error class,
//! headers, cancellation, steering), then a child on the real broker over MCP, and a child
//! resumed onto Messages after a Chat Completions run that used a tool.

use crate::support::worker::{OnProtocol, RunSpec, WAIT, WorkerProc, dirs, researcher};
use serde_json::{Value, json};
use subzero_testkit::model_messages::{self as mm, check_request};
use subzero_testkit::{RecordedRequest, Reply, ScriptedServer, Step};

const KEY: &str = "sk-test-key-0000";

/// The researcher's runs over `anthropic-messages`.
const ON: OnProtocol = OnProtocol {
    api: "anthropic-messages",
    tag: "AM",
};

fn run_id(n: u8) -> String {
    ON.run_id(n)
}

fn body(request: &RecordedRequest) -> Value {
    request.json().expect("a JSON request body")
}

/// The blocks of the last message of a request body.
fn last_blocks(request: &RecordedRequest) -> Vec<Value> {
    body(request)["messages"]
        .as_array()
        .and_then(|m| m.last())
        .and_then(|m| m["content"].as_array().cloned())
        .unwrap_or_default()
}

#[test]
fn text_streams_with_usage_to_v1_messages_with_the_anthropic_headers() {
    let mut steps = vec![mm::message_start(42)];
    steps.extend(mm::thinking(0, "private chain of thought"));
    steps.extend([
        mm::text_start(1),
        mm::text_delta(1, "The answer "),
        mm::ping(),
        mm::text_delta(1, "is 4."),
        mm::block_stop(1),
        mm::message_delta("end_turn", 17),
        mm::message_stop(),
    ]);
    let (settled, requests, worker) = ON.settle(vec![Reply::Sse(steps)], 1);
    assert_eq!(settled["status"], "completed", "{settled}");
    assert_eq!(settled["result"], "The answer is 4.");
    assert_eq!(settled["usage"]["inputTokens"], 42);
    assert_eq!(settled["usage"]["outputTokens"], 17);
    let streamed: String = worker
        .events(&run_id(1))
        .iter()
        .filter(|e| e["kind"] == "text")
        .filter_map(|e| e["text"].as_str())
        .collect();
    assert_eq!(streamed, "The answer is 4.");
    assert!(!worker.stdout_text().contains("private chain of thought"));

    assert_eq!(requests.len(), 1);
    let request = &requests[0];
    assert_eq!(request.method, "POST");
    assert_eq!(request.path, "/v1/messages");
    assert_eq!(request.header("x-api-key"), Some(KEY));
    assert_eq!(request.header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(request.header("content-type"), Some("application/json"));
    assert_eq!(request.header("authorization"), None, "no Bearer token");
    let sent = body(request);
    assert_eq!(check_request(&sent), Ok(()), "{sent:#}");
    assert_eq!(sent["model"], "test-model");
    assert_eq!(sent["max_tokens"], 8192);
    assert_eq!(sent["stream"], true);
    assert_eq!(sent["system"], "You are a test child.");
    assert_eq!(
        sent["messages"],
        json!([{"role": "user", "content": [{"type": "text", "text": "do the task"}]}])
    );
    let mut tools: Vec<&str> = sent["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    tools.sort_unstable();
    assert_eq!(tools, ["find", "grep", "ls", "read"], "exactly the grant");
    assert!(sent["tools"][0]["input_schema"].is_object());
    assert!(sent.get("tool_choice").is_none());
}

/// Two tool_use blocks in one message, inputs split across deltas; one names a tool the
/// researcher is not granted and is answered with a tool error, never run.
#[test]
fn two_tool_uses_in_one_message_are_run_and_answered_by_id() {
    let mut first = vec![mm::message_start(30), mm::text_start(0)];
    first.push(mm::text_delta(0, "Let me look."));
    first.push(mm::block_stop(0));
    first.extend(mm::tool_use_steps(
        1,
        &[
            ("toolu_01read", "read", r#"{"path":"README.md"}"#),
            ("toolu_02bash", "bash", r#"{"command":"touch pwned"}"#),
        ],
    ));
    first.extend([mm::message_delta("tool_use", 20), mm::message_stop()]);
    let (settled, requests, _worker) = ON.settle(vec![Reply::Sse(first), mm::text("Read it.")], 2);
    assert_eq!(settled["status"], "completed", "{settled}");
    assert_eq!(settled["result"], "Read it.");
    assert_eq!(settled["usage"]["inputTokens"], 40);
    assert_eq!(settled["usage"]["outputTokens"], 25);
    assert_eq!(settled["usage"]["turns"], 2);
    assert_eq!(requests.len(), 2);
    let second = body(&requests[1]);
    assert_eq!(check_request(&second), Ok(()), "{second:#}");
    let assistant = &second["messages"][1];
    assert_eq!(assistant["role"], "assistant");
    assert_eq!(
        assistant["content"],
        json!([
            {"type": "text", "text": "Let me look."},
            {"type": "tool_use", "id": "toolu_01read", "name": "read", "input": {"path": "README.md"}},
            {"type": "tool_use", "id": "toolu_02bash", "name": "bash", "input": {"command": "touch pwned"}},
        ])
    );
    let results = last_blocks(&requests[1]);
    assert_eq!(results.len(), 2);
    assert_eq!(results[0]["tool_use_id"], "toolu_01read");
    assert_eq!(results[0]["is_error"], false);
    assert!(
        results[0]["content"]
            .as_str()
            .is_some_and(|c| c.contains("# Demo")),
        "{results:#?}"
    );
    assert_eq!(results[1]["tool_use_id"], "toolu_02bash");
    assert_eq!(results[1]["is_error"], true);
    assert!(
        results[1]["content"]
            .as_str()
            .is_some_and(|c| c.contains("not granted")),
        "{results:#?}"
    );
}

#[test]
fn http_401_429_500_and_529_fail_once_with_the_status_and_the_error_message() {
    let cases = [
        (401, "authentication_error", "invalid x-api-key"),
        (
            429,
            "rate_limit_error",
            "Number of request tokens has exceeded your rate limit",
        ),
        (500, "api_error", "Internal server error"),
        (529, "overloaded_error", "Overloaded"),
    ];
    for (n, (status, kind, message)) in (10..).zip(cases) {
        let (settled, requests, _worker) = ON.settle(
            vec![
                mm::status(status, kind, message),
                mm::text("never asked for"),
            ],
            n,
        );
        assert_eq!(settled["status"], "failed", "{status}: {settled}");
        assert_eq!(settled["error"]["code"], "model_request_failed");
        assert_eq!(settled["error"]["details"]["status"], status);
        assert_eq!(
            settled["error"]["details"]["excerpt"],
            format!("{kind}: {message}"),
            "{settled}"
        );
        assert_eq!(requests.len(), 1, "{status}: no retry");
    }
}

#[test]
fn the_key_in_an_error_message_is_redacted() {
    let (settled, _, worker) = ON.settle(
        vec![mm::status(
            401,
            "authentication_error",
            &format!("invalid x-api-key: {KEY}"),
        )],
        14,
    );
    assert_eq!(settled["error"]["details"]["status"], 401);
    let shown = settled.to_string();
    assert!(
        !shown.contains(KEY) && shown.contains("[REDACTED]"),
        "{shown}"
    );
    assert!(!worker.stdout_text().contains(KEY));
    assert!(!worker.stderr_text().contains(KEY));
}

#[test]
fn an_overloaded_error_event_mid_stream_fails_the_run_with_its_message() {
    let (settled, requests, _worker) = ON.settle(
        vec![
            Reply::Sse(vec![
                mm::message_start(5),
                mm::text_start(0),
                mm::text_delta(0, "partial "),
                mm::error_event("overloaded_error", &format!("Overloaded {KEY}")),
            ]),
            mm::text("never asked for"),
        ],
        20,
    );
    assert_eq!(settled["status"], "failed", "{settled}");
    assert_eq!(settled["error"]["code"], "model_request_failed");
    assert_eq!(settled["error"]["details"]["status"], Value::Null);
    let message = settled["error"]["message"].as_str().expect("message");
    assert!(
        message.contains("overloaded_error: Overloaded [REDACTED]"),
        "{message}"
    );
    assert_eq!(settled["result"], "partial ");
    assert_eq!(requests.len(), 1, "no retry");
}

#[test]
fn a_stream_cut_or_ended_before_the_stop_reason_fails_and_never_completes() {
    let open = || {
        vec![
            mm::message_start(5),
            mm::text_start(0),
            mm::text_delta(0, "half an ans"),
        ]
    };
    let mut cut = open();
    cut.push(Step::Cut);
    let mut ended = open();
    ended.push(mm::block_stop(0));
    for (n, steps) in [(21, cut), (22, ended)] {
        let (settled, requests, _worker) = ON.settle(vec![Reply::Sse(steps)], n);
        assert_eq!(settled["status"], "failed", "{settled}");
        assert_eq!(settled["error"]["code"], "model_request_failed");
        assert_eq!(requests.len(), 1);
    }
}

#[test]
fn a_stream_that_ends_after_the_stop_reason_without_message_stop_completes() {
    let (settled, _, _worker) = ON.settle(
        vec![Reply::Sse(vec![
            mm::message_start(5),
            mm::text_start(0),
            mm::text_delta(0, "whole"),
            mm::block_stop(0),
            mm::message_delta("end_turn", 2),
        ])],
        23,
    );
    assert_eq!(settled["status"], "completed", "{settled}");
    assert_eq!(settled["result"], "whole");
}

#[test]
fn non_json_data_fails_the_run() {
    let (settled, _, _worker) = ON.settle(
        vec![Reply::Sse(vec![
            mm::message_start(5),
            Step::Raw("event: content_block_delta\ndata: {not json\n\n".into()),
            mm::message_stop(),
        ])],
        24,
    );
    assert_eq!(settled["status"], "failed", "{settled}");
    assert_eq!(settled["error"]["code"], "model_request_failed");
    assert!(
        settled["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("not JSON")),
        "{settled}"
    );
}

#[test]
fn max_tokens_keeps_the_text_and_marks_the_cut() {
    let (settled, _, _worker) = ON.settle(
        vec![Reply::Sse(vec![
            mm::message_start(5),
            mm::text_start(0),
            mm::text_delta(0, "a long"),
            mm::message_delta("max_tokens", 8192),
            mm::message_stop(),
        ])],
        25,
    );
    assert_eq!(settled["status"], "completed", "{settled}");
    assert_eq!(settled["result"], "a long");
    assert_eq!(
        settled["cut"],
        json!({"limit": "maxOutputTokens", "value": 8192})
    );
    assert_eq!(settled["error"], Value::Null);
}

/// The handoff request after a budget keeps the tool declarations (Anthropic refuses tool
/// blocks without them) and forbids new calls with `tool_choice: none`.
#[test]
fn the_handoff_after_max_turns_keeps_the_tools_and_forbids_calls() {
    let (ws, state) = dirs();
    let server = ScriptedServer::start(vec![
        mm::tool_use("toolu_ls", "ls", "{}"),
        mm::text("Summary: listed the workspace."),
    ])
    .expect("server");
    let mut snapshot = researcher();
    snapshot["limits"]["maxTurns"] = json!(1);
    let id = run_id(26);
    let transcript = state.path().join("t.jsonl");
    let mut message =
        RunSpec::new(&id, server.base_url(), snapshot, ws.path(), &transcript).message();
    message["model"]["api"] = json!("anthropic-messages");
    let mut worker = WorkerProc::spawn();
    worker.send(&message);
    let settled = worker.settled(&id);
    assert_eq!(settled["status"], "budget_exhausted", "{settled:#}");
    assert_eq!(settled["result"], "Summary: listed the workspace.");
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    let handoff = body(&requests[1]);
    assert_eq!(check_request(&handoff), Ok(()), "{handoff:#}");
    assert_eq!(handoff["tool_choice"], json!({"type": "none"}));
    assert!(
        handoff["tools"].as_array().is_some_and(|t| !t.is_empty()),
        "{handoff:#}"
    );
    let blocks = last_blocks(&requests[1]);
    assert_eq!(blocks[0]["tool_use_id"], "toolu_ls", "{blocks:#?}");
    assert_eq!(blocks.last().map(|b| &b["type"]), Some(&json!("text")));
}

#[test]
fn a_steer_joins_the_tool_results_in_the_next_user_message() {
    let (ws, state) = dirs();
    let mut slow = vec![Step::delay_ms(600), mm::message_start(5)];
    slow.extend(mm::tool_use_steps(0, &[("toolu_ls", "ls", "{}")]));
    slow.extend([mm::message_delta("tool_use", 3), mm::message_stop()]);
    let server =
        ScriptedServer::start(vec![Reply::Sse(slow), mm::text("steered answer")]).expect("server");
    let id = run_id(30);
    let mut worker = ON.run(
        server.base_url(),
        &id,
        ws.path(),
        &state.path().join("t.jsonl"),
    );
    assert!(server.wait_for_requests(1, WAIT));
    worker.send(
        &json!({"type": "steer", "runId": id, "steerId": "st_0000000000000000000000AM30",
                        "message": "focus on the README please"}),
    );
    let settled = worker.settled(&id);
    assert_eq!(settled["status"], "completed", "{settled}");
    assert_eq!(settled["result"], "steered answer");
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    assert!(!requests[0].body.contains("focus on the README"));
    let second = body(&requests[1]);
    assert_eq!(check_request(&second), Ok(()), "{second:#}");
    let blocks = last_blocks(&requests[1]);
    assert_eq!(blocks.len(), 2, "{blocks:#?}");
    assert_eq!(blocks[0]["type"], "tool_result");
    assert_eq!(blocks[0]["tool_use_id"], "toolu_ls");
    assert_eq!(
        blocks[1],
        json!({"type": "text", "text": "focus on the README please"})
    );
}

#[test]
fn cancel_mid_stream_closes_the_connection_the_server_sees_it() {
    let steps = vec![
        mm::message_start(5),
        mm::text_start(0),
        mm::text_delta(0, "working"),
    ];
    let settled = ON.cancel_mid_stream(steps, 40, "POST /v1/messages ");
    assert_eq!(settled["result"], "working", "the stream was being read");
}

mod broker {
    //! Through the real broker over MCP.

    use super::mm::{self, check_request};
    use crate::support::mcp::*;
    use serde_json::{Value, json};
    use std::time::Duration;
    use subzero_testkit::Reply;

    fn on_messages(env: &Env) -> Value {
        let mut model = env.model();
        model["api"] = json!("anthropic-messages");
        model
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn a_child_on_anthropic_messages_completes_a_tool_using_task() {
        let env = Env::new(vec![
            mm::tool_use("toolu_01", "read", r#"{"path":"README.md"}"#),
            mm::text("The README describes a small demo project."),
        ]);
        let s = env.broker("broker").await;
        let info = ok(&s, "subzero_info", json!({})).await;
        assert!(
            info["worker"]["protocols"]
                .as_array()
                .is_some_and(|p| p.contains(&json!("anthropic-messages"))),
            "{info:#}"
        );
        let out = ok(
            &s,
            "subzero_spawn",
            json!({"prompt": "Summarize README.md", "templateId": "researcher",
                   "model": on_messages(&env)}),
        )
        .await;
        let child = out["childId"].as_str().expect("childId").to_owned();
        let snap = settle(&s, &child, Duration::from_secs(30)).await;
        assert_eq!(snap["lastRun"]["status"], "completed", "{snap:#}");
        assert_eq!(
            snap["lastRun"]["preview"],
            "The README describes a small demo project."
        );
        assert_eq!(snap["model"]["api"], "anthropic-messages");
        let requests = env.server.requests();
        assert_eq!(requests.len(), 2);
        for request in &requests {
            assert_eq!(request.path, "/v1/messages");
            assert_eq!(request.header("x-api-key"), Some(KEY));
            assert_eq!(request.header("authorization"), None);
            let body = request.json().expect("json");
            assert_eq!(check_request(&body), Ok(()), "{body:#}");
        }
        let second = requests[1].json().expect("json");
        let result = &second["messages"][2]["content"][0];
        assert_eq!(result["tool_use_id"], "toolu_01");
        assert!(
            result["content"]
                .as_str()
                .is_some_and(|c| c.contains("Demo project")),
            "{second:#}"
        );
        s.close().await.expect("close");
        assert!(
            env.files_containing(KEY).is_empty(),
            "key on disk: {:?}",
            env.files_containing(KEY)
        );
    }

    /// A child that used a tool on Chat Completions (with an id Anthropic would refuse) is
    /// resumed on Messages: its history arrives as valid alternating messages whose
    /// tool_use and tool_result ids match, and it completes another tool-using run.
    #[tokio::test(flavor = "multi_thread")]
    async fn a_completions_child_resumed_on_anthropic_messages_completes() {
        let env = Env::new(vec![
            Reply::tool_call("call:0.ls", "ls", "{}"),
            Reply::text("First run: the workspace holds a README."),
            mm::tool_use("toolu_02", "read", r#"{"path":"README.md"}"#),
            mm::text("Second run: the README names a demo project."),
        ]);
        let s = env.broker("broker").await;
        let (child, _) = spawn(&s, &env, "researcher", "What is in the workspace?").await;
        let first = settle(&s, &child, Duration::from_secs(30)).await;
        assert_eq!(first["lastRun"]["status"], "completed", "{first:#}");
        assert_eq!(first["model"]["api"], "openai-completions");

        let resumed = ok(
            &s,
            "subzero_resume",
            json!({"childId": child, "model": on_messages(&env),
                   "message": "Now read the README."}),
        )
        .await;
        assert_eq!(resumed["state"], "running", "{resumed:#}");
        let after = settle(&s, &child, Duration::from_secs(30)).await;
        assert_eq!(after["lastRun"]["status"], "completed", "{after:#}");
        assert_eq!(
            after["lastRun"]["preview"],
            "Second run: the README names a demo project."
        );
        assert_eq!(after["model"]["api"], "anthropic-messages");

        let requests = env.server.requests();
        assert_eq!(requests.len(), 4);
        assert_eq!(requests[1].path, "/v1/chat/completions");
        assert_eq!(requests[2].path, "/v1/messages");
        assert_eq!(requests[2].header("authorization"), None);
        let resumed_body = requests[2].json().expect("json");
        assert_eq!(check_request(&resumed_body), Ok(()), "{resumed_body:#}");
        let messages = resumed_body["messages"].as_array().expect("messages");
        let roles: Vec<&str> = messages.iter().filter_map(|m| m["role"].as_str()).collect();
        assert_eq!(roles, ["user", "assistant", "user", "assistant", "user"]);
        let call = &messages[1]["content"][0];
        assert_eq!(call["type"], "tool_use");
        assert_eq!(call["name"], "ls");
        let id = call["id"].as_str().expect("id");
        assert_ne!(id, "call:0.ls", "the Chat Completions id was mapped");
        assert_eq!(messages[2]["content"][0]["tool_use_id"], id);
        assert!(
            messages[2]["content"][0]["content"]
                .as_str()
                .is_some_and(|c| c.contains("README.md")),
            "{resumed_body:#}"
        );
        assert_eq!(
            messages[3]["content"],
            json!([{"type": "text", "text": "First run: the workspace holds a README."}])
        );
        assert_eq!(
            messages[4]["content"],
            json!([{"type": "text", "text": "Now read the README."}])
        );
        // The next Messages request answers its own call by the id the stream gave.
        let last = requests[3].json().expect("json");
        assert_eq!(check_request(&last), Ok(()), "{last:#}");
        let closing = last["messages"]
            .as_array()
            .and_then(|m| m.last())
            .expect("last");
        assert_eq!(closing["content"][0]["tool_use_id"], "toolu_02");
        s.close().await.expect("close");
    }
}

#[test]
fn a_tool_use_cut_mid_input_is_not_run_and_the_model_is_asked_for_a_smaller_one() {
    let (settled, requests, worker) = ON.settle_limited(
        vec![
            Reply::Sse(vec![
                mm::message_start(5),
                mm::tool_use_start(0, "toolu_1", "read"),
                mm::input_delta(0, "{\"path\":\"REA"),
                mm::message_delta("max_tokens", 64),
                mm::message_stop(),
            ]),
            mm::text("Smaller now."),
        ],
        50,
        json!({"maxOutputTokens": 64}),
    );
    assert_eq!(settled["status"], "completed", "{settled}");
    assert_eq!(settled["result"], "Smaller now.");
    assert!(settled.get("cut").is_none(), "{settled}");
    let sent = body(&requests[1]);
    assert_eq!(check_request(&sent), Ok(()), "{sent:#}");
    let result = &last_blocks(&requests[1])[0];
    assert_eq!(result["type"], "tool_result");
    assert_eq!(result["tool_use_id"], "toolu_1");
    assert_eq!(result["is_error"], true);
    let content = result["content"].as_str().unwrap_or_default();
    assert!(
        content.contains("cut at the output-token cap of 64 tokens before its arguments were complete; make a smaller call"),
        "{content}"
    );
    let states: Vec<Value> = worker
        .events(&run_id(50))
        .into_iter()
        .filter(|e| e["kind"] == "tool")
        .map(|e| e["state"].clone())
        .collect();
    assert_eq!(states, [json!("started"), json!("failed")]);
}

#[test]
fn a_tool_use_cut_before_its_input_began_is_not_run_as_an_empty_call() {
    let (settled, requests, _worker) = ON.settle_limited(
        vec![
            Reply::Sse(vec![
                mm::message_start(5),
                mm::tool_use_start(0, "toolu_1", "ls"),
                mm::message_delta("max_tokens", 64),
                mm::message_stop(),
            ]),
            mm::text("Smaller now."),
        ],
        53,
        json!({"maxOutputTokens": 64}),
    );
    assert_eq!(settled["status"], "completed", "{settled}");
    let result = &last_blocks(&requests[1])[0];
    assert_eq!(result["is_error"], true, "{result}");
    assert!(
        result["content"]
            .as_str()
            .is_some_and(|c| c.contains("make a smaller call")),
        "{result}"
    );
}

#[test]
fn a_handoff_summary_is_cut_at_16_kib_and_its_stream_not_read_further() {
    let Step::Raw(flood) = mm::text_delta(0, &"x".repeat(1000)) else {
        unreachable!("mm events are raw")
    };
    let opening = vec![
        mm::message_start(10),
        mm::text_start(0),
        mm::text_delta(0, "Handoff: "),
    ];
    let tool_round = mm::tool_use("toolu_1", "ls", r#"{"path":"."}"#);
    ON.flooded_handoff(tool_round, opening, flood, 51);
}

#[test]
fn usage_is_estimated_from_the_bytes_when_the_stream_reports_none() {
    let steps = vec![
        mm::event(&json!({"type": "message_start", "message": {
            "id": "msg_1", "type": "message", "role": "assistant", "model": "m",
            "content": [], "stop_reason": null}})),
        mm::text_start(0),
        mm::text_delta(0, "No usage here."),
        mm::block_stop(0),
        mm::event(&json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"}})),
        mm::message_stop(),
    ];
    let streamed: u64 = steps
        .iter()
        .map(|step| match step {
            Step::Raw(raw) => raw.len() as u64,
            _ => 0,
        })
        .sum();
    let (settled, requests, _worker) = ON.settle(vec![Reply::Sse(steps)], 52);
    assert_eq!(settled["status"], "completed", "{settled}");
    assert_eq!(
        settled["usage"],
        json!({"inputTokens": (requests[0].body.len() as u64).div_ceil(4),
               "outputTokens": streamed.div_ceil(4), "turns": 1, "source": "estimated",
               // The context use is the one request's prompt, estimated the same way.
               "contextTokens": (requests[0].body.len() as u64).div_ceil(4)})
    );
    // With usage it is reported.
    let (settled, _, _worker) = ON.settle(vec![mm::text("With usage.")], 54);
    assert_eq!(settled["usage"]["source"], "reported", "{settled}");
    assert_eq!(settled["usage"]["inputTokens"], 10);
}
