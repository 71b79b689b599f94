//! Chat Completions (`openai-completions`) against the request and stream shapes real
//! servers document, through the real worker: the output-token field (chosen, or learned from
//! OpenAI's typed 400), reasoning deltas kept out of text, and replays of OpenAI, vLLM,
//! llama.cpp's server and Ollama (`subzero_testkit::model_chat_shapes`). The last test runs
//! the field choice end to end through the broker.

use std::path::Path;
use std::time::Duration;

use crate::support::worker::{
    ControlLines, RETRY, RunSpec, WorkerProc, edit_model, researcher, snapshot_of, tool_results,
    with_limits,
};
use serde_json::{Value, json};
use subzero_protocol::{
    ErrorCode, OutputTokensParam, RunSettledStatus, TerminalRunStatus, ToolState, UsageSource,
};
use subzero_testkit::model_chat_shapes::{llama_cpp, ollama, openai, vllm};
use subzero_testkit::model_requests::chat::Request;
use subzero_testkit::{Reply, ScriptedServer, Step};

fn run_id(n: u32) -> String {
    format!("run_{n:0>26}")
}

/// Starts run `n` on `worker` against `server`, with `model.outputTokensParam` when given.
fn start(
    worker: &mut WorkerProc,
    server: &ScriptedServer,
    n: u32,
    dirs: (&Path, &Path),
    output_tokens_param: Option<&str>,
) -> String {
    let id = run_id(n);
    let transcript = dirs.1.join("t.jsonl");
    let mut spec = RunSpec::new(&id, server.base_url(), researcher(), dirs.0, &transcript);
    spec.output_tokens_param = output_tokens_param;
    worker.send(&spec.message());
    id
}

fn bodies(server: &ScriptedServer) -> Vec<Request> {
    server.requests().iter().map(Request::of).collect()
}

/// The usage flag every request must carry.
fn asks_for_usage(body: &Request) -> bool {
    body.stream_options
        .as_ref()
        .and_then(|o| o.include_usage)
        .unwrap_or(false)
}

/// Waits the time a repeat would need, then asserts the server saw `n` requests in all.
fn assert_requests(server: &ScriptedServer, n: usize, why: &str) {
    server.wait_for_requests(n + 1, RETRY);
    assert_eq!(server.requests().len(), n, "{why}");
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
    let first = start(&mut worker, &server, 1, (ws.path(), state.path()), None);
    let settled = worker.run_settled(&first);
    assert_eq!(settled.status, RunSettledStatus::Completed, "{settled}");
    assert_eq!(settled.result(), "first answer");
    assert_eq!(settled.usage.input_tokens, 11);
    // The next run of the same worker starts with the learned field.
    let second = start(&mut worker, &server, 2, (ws.path(), state.path()), None);
    let settled = worker.run_settled(&second);
    assert_eq!(settled.result(), "second answer", "{settled}");

    let sent = bodies(&server);
    assert_eq!(sent.len(), 3, "one repeat, no other request: {sent:#?}");
    assert_eq!(sent[0].cap(), ("max_tokens", 8192));
    assert_eq!(sent[1].cap(), ("max_completion_tokens", 8192));
    assert_eq!(sent[2].cap(), ("max_completion_tokens", 8192));
    // Every request asks for usage, the repeat included.
    for body in &sent {
        assert!(asks_for_usage(body), "{body:#?}");
    }
    // The repeat is the same request with the field renamed.
    let raw: Vec<Value> = server
        .requests()
        .iter()
        .map(|r| r.json().expect("a JSON body"))
        .collect();
    let mut renamed = raw[0].as_object().expect("an object").clone();
    let value = renamed.remove("max_tokens").expect("max_tokens");
    renamed.insert("max_completion_tokens".to_owned(), value);
    assert_eq!(Value::Object(renamed), raw[1]);
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
    let id = start(&mut worker, &server, 3, (ws.path(), state.path()), None);
    let settled = worker.run_settled(&id);
    assert_eq!(settled.status, RunSettledStatus::Failed);
    assert_eq!(settled.code(), ErrorCode::ModelRequestFailed);
    assert_eq!(settled.details().status, Some(400));
    assert_requests(&server, 2, "no third request");
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
    let id = start(&mut worker, &server, 4, (ws.path(), state.path()), None);
    let settled = worker.run_settled(&id);
    assert_eq!(settled.code(), ErrorCode::ModelRequestFailed, "{settled}");
    assert_eq!(settled.details().status, Some(400));
    assert_requests(&server, 1, "no repeat without the typed body");
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
    let id = start(
        &mut worker,
        &server,
        5,
        (ws.path(), state.path()),
        Some("max_tokens"),
    );
    let settled = worker.run_settled(&id);
    assert_eq!(settled.details().status, Some(400), "{settled}");
    assert_requests(&server, 1, "the explicit field is not switched");
    let sent = bodies(&server);
    assert_eq!(sent[0].cap().0, "max_tokens");
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
    let id = start(
        &mut worker,
        &server,
        6,
        (ws.path(), state.path()),
        Some("max_completion_tokens"),
    );
    let settled = worker.run_settled(&id);
    assert_eq!(settled.status, RunSettledStatus::Completed, "{settled}");
    let sent = bodies(&server);
    assert_eq!(sent.len(), 2);
    for body in &sent {
        assert_eq!(body.cap().0, "max_completion_tokens");
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
    let id = start(&mut worker, &server, n, (ws.path(), state.path()), None);
    let settled = worker.run_settled(&id);
    let name = case.name;
    assert_eq!(
        settled.status,
        RunSettledStatus::Completed,
        "{name}: {settled}"
    );
    assert_eq!(settled.result(), case.text, "{name}");
    if case.usage == (0, 0) {
        // No usage chunk: the tokens are estimated, the input from the bytes sent.
        assert_eq!(
            settled.usage.source,
            UsageSource::Estimated,
            "{name}: {settled}"
        );
        let sent: u64 = server
            .requests()
            .iter()
            .map(|r| (r.body.len() as u64).div_ceil(4))
            .sum();
        assert_eq!(settled.usage.input_tokens, sent, "{name}: {settled}");
        assert!(
            Some(settled.usage.output_tokens) > Some(0),
            "{name}: {settled}"
        );
    } else {
        assert_eq!(
            settled.usage.source,
            UsageSource::Reported,
            "{name}: {settled}"
        );
        assert_eq!(
            (
                Some(settled.usage.input_tokens),
                Some(settled.usage.output_tokens)
            ),
            (Some(case.usage.0), Some(case.usage.1)),
            "{name}: {settled}"
        );
    }
    assert_eq!(settled.usage.turns, 2, "{name}");
    assert!(
        worker.tool_was(&id, "ls", ToolState::Finished),
        "{name}: the tool ran: {:#?}",
        worker.events(&id)
    );
    assert_eq!(
        worker.streamed_text(&id),
        case.text,
        "{name}: only the answer is streamed"
    );

    let requests = server.requests();
    let sent = bodies(&server);
    assert_eq!(sent.len(), 2, "{name}");
    let assistant = sent[1]
        .assistant()
        .unwrap_or_else(|| panic!("{name}: no assistant turn in {:#?}", sent[1]));
    assert_eq!(assistant.tool_calls[0].id, case.call_id, "{name}");
    assert_eq!(
        assistant.tool_calls[0].function.arguments, case.arguments,
        "{name}"
    );
    assert_eq!(tool_results(&requests[1]).len(), 1, "{name}");
    let transcript = std::fs::read_to_string(state.path().join("t.jsonl")).expect("transcript");
    for hidden in case.hidden {
        assert!(
            !requests[1].body.contains(hidden),
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
    let id = start(&mut worker, &server, 17, (ws.path(), state.path()), None);
    let settled = worker.run_settled(&id);
    assert_eq!(settled.result(), "Both ran.", "{settled}");
    let sent = bodies(&server);
    assert_eq!(sent[1].answered_ids(), ["call_a", "call_b"]);
}

/// End to end: `outputTokensParam` given to `subzero_spawn` reaches every model request
/// of the child's tool-using run.
#[tokio::test(flavor = "multi_thread")]
async fn output_tokens_param_travels_from_spawn_to_every_request() {
    use crate::support::mcp::{Env, ok, settle};
    use crate::support::worker::Shown;
    use subzero_protocol::SpawnOutput;
    let env = Env::new(vec![
        openai::tool_call("call_1", "read", r#"{"path":"README.md"}"#, (50, 10)),
        openai::text("The README describes a demo project.", (70, 8)),
    ]);
    let s = env.broker("broker").await;
    let model = edit_model(&env.model(), |m| {
        m.output_tokens_param = Some(OutputTokensParam::MaxCompletionTokens);
    });
    let out: Shown<SpawnOutput> = Shown::new(
        &ok(
            &s,
            "subzero_spawn",
            json!({"prompt": "Summarize README.md", "templateId": "researcher", "model": model}),
        )
        .await,
    );
    let snap = snapshot_of(&settle(&s, &out.child_id, Duration::from_secs(30)).await);
    assert_eq!(snap.last().status, TerminalRunStatus::Completed, "{snap:#}");
    assert_eq!(*snap.last().preview, "The README describes a demo project.");
    let sent = bodies(&env.server);
    assert_eq!(sent.len(), 2);
    for body in &sent {
        assert_eq!(body.cap().0, "max_completion_tokens", "{body:#?}");
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
    let snapshot = with_limits(researcher(), &json!({"maxOutputTokens": 64}));
    let id = run_id(50);
    let transcript = state.path().join("t.jsonl");
    let mut worker = WorkerProc::spawn();
    worker.send(&RunSpec::new(&id, server.base_url(), snapshot, ws.path(), &transcript).message());
    let settled = worker.run_settled(&id);
    assert_eq!(settled.status, RunSettledStatus::Completed, "{settled}");
    assert_eq!(settled.result(), "Smaller now.");
    assert!(settled.cut.is_none(), "{settled}");
    let sent = bodies(&server);
    assert_eq!(sent.len(), 2);
    let answered = sent[1].tool_results();
    assert_eq!(answered.len(), 1, "{:#?}", sent[1]);
    assert!(
        answered[0].contains(
            "cut at the output-token cap of 64 tokens before its arguments were complete; make a smaller call"
        ),
        "{}",
        answered[0]
    );
    for body in &sent {
        assert!(asks_for_usage(body), "{body:#?}");
    }
}
