//! Chat Completions (`openai-completions`) against the request and stream shapes real
//! servers document, through the real worker: the output-token field (chosen, or learned from
//! OpenAI's typed 400), reasoning deltas kept out of text, and replays of OpenAI, vLLM,
//! llama.cpp's server and Ollama (`subzero_testkit::model_chat_shapes`). The last test runs
//! the field choice end to end through the broker.

use std::path::Path;
use std::time::Duration;

use crate::support;
use crate::support::worker::{RunSpec, WorkerProc, researcher};
use serde_json::{Value, json};
use subzero_testkit::model_chat_shapes::{llama_cpp, ollama, openai, vllm};
use subzero_testkit::{RecordedRequest, Reply, ScriptedServer, Step};

fn run_id(n: u32) -> String {
    format!("run_{n:0>26}")
}

/// Starts run `n` on `worker` against `server`; `model` adjusts the `model` object.
fn start(
    worker: &mut WorkerProc,
    server: &ScriptedServer,
    n: u32,
    dirs: (&Path, &Path),
    model: impl FnOnce(&mut Value),
) -> String {
    let id = run_id(n);
    let transcript = dirs.1.join("t.jsonl");
    let mut message =
        RunSpec::new(&id, server.base_url(), researcher(), dirs.0, &transcript).message();
    model(&mut message["model"]);
    worker.send(&message);
    id
}

fn bodies(server: &ScriptedServer) -> Vec<Value> {
    server
        .requests()
        .iter()
        .map(|r: &RecordedRequest| r.json().expect("a JSON request body"))
        .collect()
}

/// Which field carried the cap, and its value.
fn cap(body: &Value) -> (&'static str, Value) {
    match (body.get("max_tokens"), body.get("max_completion_tokens")) {
        (Some(v), None) => ("max_tokens", v.clone()),
        (None, Some(v)) => ("max_completion_tokens", v.clone()),
        other => panic!("the cap must travel in exactly one field: {other:?} in {body}"),
    }
}

#[test]
fn a_typed_max_tokens_refusal_is_sent_again_once_with_max_completion_tokens_and_remembered() {
    let (ws, state) = (
        tempfile::tempdir().expect("ws"),
        tempfile::tempdir().expect("state"),
    );
    let server = ScriptedServer::start(vec![
        openai::refuses_max_tokens(),
        openai::text("first answer", (11, 3)),
        openai::text("second answer", (12, 4)),
    ])
    .expect("server");
    let mut worker = WorkerProc::spawn();
    let first = start(&mut worker, &server, 1, (ws.path(), state.path()), |_| {});
    let settled = worker.settled(&first);
    assert_eq!(settled["status"], "completed", "{settled}");
    assert_eq!(settled["result"], "first answer");
    assert_eq!(settled["usage"]["inputTokens"], 11);
    // The next run of the same worker starts with the learned field.
    let second = start(&mut worker, &server, 2, (ws.path(), state.path()), |_| {});
    let settled = worker.settled(&second);
    assert_eq!(settled["result"], "second answer", "{settled}");

    let sent = bodies(&server);
    assert_eq!(sent.len(), 3, "one repeat, no other request: {sent:#?}");
    assert_eq!(cap(&sent[0]), ("max_tokens", json!(8192)));
    assert_eq!(cap(&sent[1]), ("max_completion_tokens", json!(8192)));
    assert_eq!(cap(&sent[2]), ("max_completion_tokens", json!(8192)));
    // Every request asks for usage, the repeat included.
    for body in &sent {
        assert_eq!(body["stream_options"]["include_usage"], true, "{body:#}");
    }
    // The repeat is the same request with the field renamed.
    let mut renamed = sent[0].clone();
    let value = renamed
        .as_object_mut()
        .and_then(|o| o.remove("max_tokens"))
        .expect("max_tokens");
    renamed["max_completion_tokens"] = value;
    assert_eq!(renamed, sent[1]);
    assert!(
        worker
            .stderr_text()
            .contains("sending max_completion_tokens"),
        "the switch is logged"
    );
}

#[test]
fn a_second_refusal_after_the_switch_fails_the_run_without_a_third_request() {
    let (ws, state) = (
        tempfile::tempdir().expect("ws"),
        tempfile::tempdir().expect("state"),
    );
    let server = ScriptedServer::start(vec![
        openai::refuses_max_tokens(),
        openai::refuses_max_tokens(),
        Reply::text("never asked for"),
    ])
    .expect("server");
    let mut worker = WorkerProc::spawn();
    let id = start(&mut worker, &server, 3, (ws.path(), state.path()), |_| {});
    let settled = worker.settled(&id);
    assert_eq!(settled["status"], "failed");
    assert_eq!(settled["error"]["code"], "model_request_failed");
    assert_eq!(settled["error"]["details"]["status"], 400);
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(server.requests().len(), 2);
}

#[test]
fn an_untyped_400_about_max_tokens_is_not_sent_again() {
    let (ws, state) = (
        tempfile::tempdir().expect("ws"),
        tempfile::tempdir().expect("state"),
    );
    let server = ScriptedServer::start(vec![
        Reply::status(
            400,
            r#"{"error":{"message":"Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.","code":"invalid_request_body"}}"#,
        ),
        Reply::text("never asked for"),
    ])
    .expect("server");
    let mut worker = WorkerProc::spawn();
    let id = start(&mut worker, &server, 4, (ws.path(), state.path()), |_| {});
    let settled = worker.settled(&id);
    assert_eq!(
        settled["error"]["code"], "model_request_failed",
        "{settled}"
    );
    assert_eq!(settled["error"]["details"]["status"], 400);
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(
        server.requests().len(),
        1,
        "no repeat without the typed body"
    );
}

#[test]
fn an_explicit_max_tokens_is_kept_even_when_refused() {
    let (ws, state) = (
        tempfile::tempdir().expect("ws"),
        tempfile::tempdir().expect("state"),
    );
    let server = ScriptedServer::start(vec![
        openai::refuses_max_tokens(),
        Reply::text("never asked for"),
    ])
    .expect("server");
    let mut worker = WorkerProc::spawn();
    let id = start(&mut worker, &server, 5, (ws.path(), state.path()), |m| {
        m["outputTokensParam"] = json!("max_tokens");
    });
    let settled = worker.settled(&id);
    assert_eq!(settled["error"]["details"]["status"], 400, "{settled}");
    std::thread::sleep(Duration::from_millis(200));
    let sent = bodies(&server);
    assert_eq!(sent.len(), 1);
    assert_eq!(cap(&sent[0]).0, "max_tokens");
}

#[test]
fn an_explicit_max_completion_tokens_is_sent_from_the_first_request() {
    let (ws, state) = (
        tempfile::tempdir().expect("ws"),
        tempfile::tempdir().expect("state"),
    );
    let server = ScriptedServer::start(vec![
        openai::tool_call("call_x", "ls", r#"{"path":"."}"#, (20, 6)),
        openai::text("done", (30, 2)),
    ])
    .expect("server");
    let mut worker = WorkerProc::spawn();
    let id = start(&mut worker, &server, 6, (ws.path(), state.path()), |m| {
        m["outputTokensParam"] = json!("max_completion_tokens");
    });
    let settled = worker.settled(&id);
    assert_eq!(settled["status"], "completed", "{settled}");
    let sent = bodies(&server);
    assert_eq!(sent.len(), 2);
    for body in &sent {
        assert_eq!(cap(body).0, "max_completion_tokens");
    }
}

/// One tool-using task replayed in a server's shapes: a tool call, then the answer.
struct Replay {
    name: &'static str,
    call: Reply,
    answer: Reply,
    call_id: &'static str,
    arguments: &'static str,
    text: &'static str,
    /// Summed `(inputTokens, outputTokens)` the run must report; `(0, 0)`: the stream
    /// reports none and the run's usage is the estimate from bytes.
    usage: (u64, u64),
    /// Reasoning text that must appear nowhere the child's output goes.
    hidden: &'static [&'static str],
}

fn replay(n: u32, case: Replay) {
    let (ws, state) = (
        tempfile::tempdir().expect("ws"),
        tempfile::tempdir().expect("state"),
    );
    let server = ScriptedServer::start(vec![case.call, case.answer]).expect("server");
    let mut worker = WorkerProc::spawn();
    let id = start(&mut worker, &server, n, (ws.path(), state.path()), |_| {});
    let settled = worker.settled(&id);
    let name = case.name;
    assert_eq!(settled["status"], "completed", "{name}: {settled}");
    assert_eq!(settled["result"], case.text, "{name}");
    if case.usage == (0, 0) {
        // No usage chunk: the tokens are estimated, the input from the bytes sent.
        assert_eq!(settled["usage"]["source"], "estimated", "{name}: {settled}");
        let sent: u64 = server
            .requests()
            .iter()
            .map(|r| (r.body.len() as u64).div_ceil(4))
            .sum();
        assert_eq!(settled["usage"]["inputTokens"], sent, "{name}: {settled}");
        assert!(
            settled["usage"]["outputTokens"].as_u64() > Some(0),
            "{name}: {settled}"
        );
    } else {
        assert_eq!(settled["usage"]["source"], "reported", "{name}: {settled}");
        assert_eq!(
            (
                settled["usage"]["inputTokens"].as_u64(),
                settled["usage"]["outputTokens"].as_u64()
            ),
            (Some(case.usage.0), Some(case.usage.1)),
            "{name}: {settled}"
        );
    }
    assert_eq!(settled["usage"]["turns"], 2, "{name}");
    let events = worker.events(&id);
    assert!(
        events
            .iter()
            .any(|e| e["kind"] == "tool" && e["name"] == "ls" && e["state"] == "finished"),
        "{name}: the tool ran: {events:#?}"
    );
    let streamed: String = events
        .iter()
        .filter(|e| e["kind"] == "text")
        .filter_map(|e| e["text"].as_str())
        .collect();
    assert_eq!(streamed, case.text, "{name}: only the answer is streamed");

    let sent = bodies(&server);
    assert_eq!(sent.len(), 2, "{name}");
    let assistant = sent[1]["messages"]
        .as_array()
        .and_then(|m| m.iter().find(|m| m["role"] == "assistant"))
        .cloned()
        .unwrap_or_else(|| panic!("{name}: no assistant turn in {}", sent[1]));
    assert_eq!(assistant["tool_calls"][0]["id"], case.call_id, "{name}");
    assert_eq!(
        assistant["tool_calls"][0]["function"]["arguments"], case.arguments,
        "{name}"
    );
    assert_eq!(support::worker::tool_messages(&sent[1]).len(), 1, "{name}");
    let transcript = std::fs::read_to_string(state.path().join("t.jsonl")).expect("transcript");
    for hidden in case.hidden {
        assert!(
            !sent[1].to_string().contains(hidden),
            "{name}: reasoning went back to the model"
        );
        assert!(
            !transcript.contains(hidden),
            "{name}: reasoning reached the transcript"
        );
        assert!(
            !worker.stdout_text().contains(hidden),
            "{name}: reasoning reached the control stream"
        );
    }
}

#[test]
fn openai_streams_replay_to_the_right_text_calls_and_usage() {
    replay(
        10,
        Replay {
            name: "openai",
            call: openai::tool_call("call_q9WvQ8uA", "ls", r#"{"path":"."}"#, (120, 18)),
            answer: openai::text("The workspace is empty.", (160, 9)),
            call_id: "call_q9WvQ8uA",
            arguments: r#"{"path":"."}"#,
            text: "The workspace is empty.",
            usage: (280, 27),
            hidden: &[],
        },
    );
}

#[test]
fn vllm_streams_with_reasoning_content_replay_without_the_reasoning() {
    replay(
        11,
        Replay {
            name: "vllm reasoning_content",
            call: vllm::reasoning_then_tool_call(
                "reasoning_content",
                "SECRET-PLAN-A: list the directory first.",
                ("chatcmpl-tool-8f2c", "ls", r#"{"path": "."}"#),
                (90, 40),
            ),
            answer: vllm::reasoning_then_text(
                "reasoning_content",
                "SECRET-PLAN-B: nothing is there.",
                "Nothing to list.",
                (140, 30),
            ),
            call_id: "chatcmpl-tool-8f2c",
            arguments: r#"{"path": "."}"#,
            text: "Nothing to list.",
            usage: (230, 70),
            hidden: &["SECRET-PLAN-A", "SECRET-PLAN-B"],
        },
    );
}

#[test]
fn vllm_streams_with_reasoning_replay_without_the_reasoning() {
    replay(
        12,
        Replay {
            name: "vllm reasoning",
            call: vllm::reasoning_then_tool_call(
                "reasoning",
                "SECRET-PLAN-C",
                ("chatcmpl-tool-1a", "ls", "{}"),
                (5, 5),
            ),
            answer: vllm::reasoning_then_text("reasoning", "SECRET-PLAN-D", "Empty.", (6, 6)),
            call_id: "chatcmpl-tool-1a",
            arguments: "{}",
            text: "Empty.",
            usage: (11, 11),
            hidden: &["SECRET-PLAN-C", "SECRET-PLAN-D"],
        },
    );
}

#[test]
fn llama_server_streams_replay_with_null_content_timings_and_usage() {
    replay(
        13,
        Replay {
            name: "llama-server",
            call: llama_cpp::reasoning_then_tool_call(
                "SECRET-PLAN-E: call ls.",
                ("Jx1tY0bQ7qzV", "ls", r#"{"path":"."}"#),
                Some((236, 35)),
            ),
            answer: llama_cpp::reasoning_then_text(
                "SECRET-PLAN-F",
                "There are no files.",
                Some((300, 12)),
            ),
            call_id: "Jx1tY0bQ7qzV",
            arguments: r#"{"path":"."}"#,
            text: "There are no files.",
            usage: (536, 47),
            hidden: &["SECRET-PLAN-E", "SECRET-PLAN-F"],
        },
    );
}

#[test]
fn llama_server_streams_without_a_usage_chunk_complete_with_estimated_usage() {
    replay(
        14,
        Replay {
            name: "llama-server without usage",
            call: llama_cpp::reasoning_then_tool_call("SECRET-PLAN-G", ("a1", "ls", "{}"), None),
            answer: llama_cpp::text("No files.", None),
            call_id: "a1",
            arguments: "{}",
            text: "No files.",
            usage: (0, 0),
            hidden: &["SECRET-PLAN-G"],
        },
    );
}

#[test]
fn ollama_streams_replay_with_whole_tool_calls_and_either_finish_reason() {
    for (n, finish) in [(15, "tool_calls"), (16, "stop")] {
        replay(
            n,
            Replay {
                name: if n == 15 {
                    "ollama tool_calls"
                } else {
                    "ollama stop"
                },
                call: ollama::tool_calls(
                    &[("call_u4k1", "ls", r#"{"path":"."}"#)],
                    finish,
                    (48, 21),
                ),
                answer: ollama::text(Some("SECRET-PLAN-H"), "It is empty.", (80, 7)),
                call_id: "call_u4k1",
                arguments: r#"{"path":"."}"#,
                text: "It is empty.",
                usage: (128, 28),
                hidden: &["SECRET-PLAN-H"],
            },
        );
    }
}

#[test]
fn ollama_parallel_calls_in_one_chunk_are_each_answered() {
    let (ws, state) = (
        tempfile::tempdir().expect("ws"),
        tempfile::tempdir().expect("state"),
    );
    let server = ScriptedServer::start(vec![
        ollama::tool_calls(
            &[
                ("call_a", "ls", r#"{"path":"."}"#),
                ("call_b", "find", r#"{"pattern":"*.md"}"#),
            ],
            "tool_calls",
            (10, 10),
        ),
        ollama::text(None, "Both ran.", (20, 3)),
    ])
    .expect("server");
    let mut worker = WorkerProc::spawn();
    let id = start(&mut worker, &server, 17, (ws.path(), state.path()), |_| {});
    let settled = worker.settled(&id);
    assert_eq!(settled["result"], "Both ran.", "{settled}");
    let sent = bodies(&server);
    let answered: Vec<&str> = sent[1]["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .filter(|m| m["role"] == "tool")
        .filter_map(|m| m["tool_call_id"].as_str())
        .collect();
    assert_eq!(answered, ["call_a", "call_b"]);
}

/// End to end: `outputTokensParam` given to `subzero_spawn` reaches every model request
/// of the child's tool-using run.
#[tokio::test(flavor = "multi_thread")]
async fn output_tokens_param_travels_from_spawn_to_every_request() {
    use crate::support::mcp::{Env, ok, settle};
    let env = Env::new(vec![
        openai::tool_call("call_1", "read", r#"{"path":"README.md"}"#, (50, 10)),
        openai::text("The README describes a demo project.", (70, 8)),
    ]);
    let s = env.broker("broker").await;
    let mut model = env.model();
    model["outputTokensParam"] = json!("max_completion_tokens");
    let out = ok(
        &s,
        "subzero_spawn",
        json!({"prompt": "Summarize README.md", "templateId": "researcher", "model": model}),
    )
    .await;
    let child = out["childId"].as_str().expect("childId").to_owned();
    let snap = settle(&s, &child, Duration::from_secs(30)).await;
    assert_eq!(snap["lastRun"]["status"], "completed", "{snap:#}");
    assert_eq!(
        snap["lastRun"]["preview"],
        "The README describes a demo project."
    );
    let sent = bodies(&env.server);
    assert_eq!(sent.len(), 2);
    for body in &sent {
        assert_eq!(cap(body).0, "max_completion_tokens", "{body}");
    }
    s.close().await.expect("close");
}

#[test]
fn a_call_cut_at_the_output_cap_mid_arguments_is_not_run_and_the_run_goes_on() {
    let (ws, state) = (
        tempfile::tempdir().expect("ws"),
        tempfile::tempdir().expect("state"),
    );
    let server = ScriptedServer::start(vec![
        Reply::Sse(vec![
            Step::text("Let me read it. "),
            Step::tool_delta(Some(0), Some("call_1"), Some("read"), "{\"path\":\"REA"),
            Step::finish("length"),
            Step::usage(30, 64),
            Step::done(),
        ]),
        Reply::text("Smaller now."),
    ])
    .expect("server");
    let mut snapshot = researcher();
    snapshot["limits"]["maxOutputTokens"] = json!(64);
    let id = run_id(50);
    let transcript = state.path().join("t.jsonl");
    let mut worker = WorkerProc::spawn();
    worker.send(&RunSpec::new(&id, server.base_url(), snapshot, ws.path(), &transcript).message());
    let settled = worker.settled(&id);
    assert_eq!(settled["status"], "completed", "{settled}");
    assert_eq!(settled["result"], "Smaller now.");
    assert!(settled.get("cut").is_none(), "{settled}");
    let sent = bodies(&server);
    assert_eq!(sent.len(), 2);
    let answered = support::worker::tool_messages(&sent[1]);
    assert_eq!(answered.len(), 1, "{:#}", sent[1]);
    assert!(
        answered[0].contains(
            "cut at the output-token cap of 64 tokens before its arguments were complete; make a smaller call"
        ),
        "{}",
        answered[0]
    );
    for body in &sent {
        assert_eq!(body["stream_options"]["include_usage"], true, "{body:#}");
    }
}
