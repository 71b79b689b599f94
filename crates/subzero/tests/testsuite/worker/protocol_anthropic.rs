//! `model.api = "anthropic-messages"`: the real worker against scripted Messages streams
//! (text, tool_use blocks split across `input_json_delta`s, usage, every error class,
//! headers, cancellation, steering), then a child on the real broker over MCP, and a child
//! resumed onto Messages after a Chat Completions run that used a tool.

use crate::support::worker::{
    ControlLines, OnProtocol, RunSpec, WAIT, WorkerProc, dirs, estimated_usage, max_output_cut,
    researcher, with_limits,
};
use serde_json::json;
use subzero_protocol::{ErrorCode, RunSettledStatus, ToolState, UsageSource};
use subzero_testkit::model_messages as mm;
use subzero_testkit::model_requests::messages::{Block, Request, System};
use subzero_testkit::{Reply, ScriptedServer, Step};

const KEY: &str = "sk-test-key-0000";

/// The researcher's runs over `anthropic-messages`.
const ON: OnProtocol = OnProtocol {
    api: "anthropic-messages",
    tag: "AM",
};

fn run_id(n: u8) -> String {
    ON.run_id(n)
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
    assert_eq!(settled.status, RunSettledStatus::Completed, "{settled}");
    assert_eq!(settled.result(), "The answer is 4.");
    assert_eq!(settled.usage.input_tokens, 42);
    assert_eq!(settled.usage.output_tokens, 17);
    assert_eq!(worker.streamed_text(&run_id(1)), "The answer is 4.");
    assert!(!worker.stdout_text().contains("private chain of thought"));

    assert_eq!(requests.len(), 1);
    let request = &requests[0];
    assert_eq!(request.method, "POST");
    assert_eq!(request.path, "/v1/messages");
    assert_eq!(request.header("x-api-key"), Some(KEY));
    assert_eq!(request.header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(request.header("content-type"), Some("application/json"));
    assert_eq!(request.header("authorization"), None, "no Bearer token");
    let sent = Request::of(request);
    assert_eq!(sent.model, "test-model");
    assert_eq!(sent.max_tokens, 8192);
    assert_eq!(sent.stream, Some(true));
    assert_eq!(
        sent.system,
        Some(System::Text("You are a test child.".to_owned()))
    );
    assert_eq!(sent.messages.len(), 1, "{sent:#?}");
    assert_eq!(sent.messages[0].role, "user");
    assert_eq!(sent.messages[0].content, [Block::text("do the task")]);
    let mut tools = sent.tool_names();
    tools.sort_unstable();
    assert_eq!(tools, ["find", "grep", "ls", "read"], "exactly the grant");
    assert!(sent.tools[0].input_schema.is_object());
    assert!(sent.tool_choice.is_none());
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
    assert_eq!(settled.status, RunSettledStatus::Completed, "{settled}");
    assert_eq!(settled.result(), "Read it.");
    assert_eq!(settled.usage.input_tokens, 40);
    assert_eq!(settled.usage.output_tokens, 25);
    assert_eq!(settled.usage.turns, 2);
    assert_eq!(requests.len(), 2);
    let second = Request::of(&requests[1]);
    let assistant = &second.messages[1];
    assert_eq!(assistant.role, "assistant");
    assert_eq!(
        assistant.content,
        [
            Block::text("Let me look."),
            Block::tool_use("toolu_01read", "read", json!({"path": "README.md"})),
            Block::tool_use("toolu_02bash", "bash", json!({"command": "touch pwned"})),
        ]
    );
    let results: Vec<_> = second
        .last_blocks()
        .iter()
        .map(Block::tool_result)
        .collect();
    assert_eq!(results.len(), 2);
    assert_eq!(results[0].tool_use_id, "toolu_01read");
    assert_eq!(results[0].is_error, Some(false));
    assert!(results[0].content.contains("# Demo"), "{results:#?}");
    assert_eq!(results[1].tool_use_id, "toolu_02bash");
    assert_eq!(results[1].is_error, Some(true));
    assert!(results[1].content.contains("not granted"), "{results:#?}");
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
        assert_eq!(
            settled.status,
            RunSettledStatus::Failed,
            "{status}: {settled}"
        );
        assert_eq!(settled.code(), ErrorCode::ModelRequestFailed);
        assert_eq!(settled.details().status, Some(status));
        assert_eq!(
            settled.details().excerpt,
            Some(format!("{kind}: {message}")),
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
    assert_eq!(settled.details().status, Some(401));
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
    assert_eq!(settled.status, RunSettledStatus::Failed, "{settled}");
    assert_eq!(settled.code(), ErrorCode::ModelRequestFailed);
    assert_eq!(settled.details().status, None);
    let message = settled.message();
    assert!(
        message.contains("overloaded_error: Overloaded [REDACTED]"),
        "{message}"
    );
    assert_eq!(settled.result(), "partial ");
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
        assert_eq!(settled.status, RunSettledStatus::Failed, "{settled}");
        assert_eq!(settled.code(), ErrorCode::ModelRequestFailed);
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
    assert_eq!(settled.status, RunSettledStatus::Completed, "{settled}");
    assert_eq!(settled.result(), "whole");
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
    assert_eq!(settled.status, RunSettledStatus::Failed, "{settled}");
    assert_eq!(settled.code(), ErrorCode::ModelRequestFailed);
    assert!(settled.message().contains("not JSON"), "{settled}");
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
    assert_eq!(settled.status, RunSettledStatus::Completed, "{settled}");
    assert_eq!(settled.result(), "a long");
    assert_eq!(settled.cut, Some(max_output_cut(8192)));
    assert_eq!(settled.error, None);
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
    let snapshot = with_limits(researcher(), &json!({"maxTurns": 1}));
    let id = run_id(26);
    let transcript = state.path().join("t.jsonl");
    let mut spec = RunSpec::new(&id, server.base_url(), snapshot, ws.path(), &transcript);
    spec.api = "anthropic-messages";
    let mut worker = WorkerProc::spawn();
    worker.send(&spec.message());
    let settled = worker.run_settled(&id);
    assert_eq!(
        settled.status,
        RunSettledStatus::BudgetExhausted,
        "{settled:#}"
    );
    assert_eq!(settled.result(), "Summary: listed the workspace.");
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    let handoff = Request::of(&requests[1]);
    assert_eq!(handoff.tool_choice, Some(json!({"type": "none"})));
    assert!(!handoff.tools.is_empty(), "{handoff:#?}");
    let blocks = handoff.last_blocks();
    assert_eq!(
        blocks[0].tool_result().tool_use_id,
        "toolu_ls",
        "{blocks:#?}"
    );
    assert!(
        matches!(blocks.last(), Some(Block::Text { .. })),
        "{blocks:#?}"
    );
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
    let settled = worker.run_settled(&id);
    assert_eq!(settled.status, RunSettledStatus::Completed, "{settled}");
    assert_eq!(settled.result(), "steered answer");
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    assert!(!requests[0].body.contains("focus on the README"));
    let second = Request::of(&requests[1]);
    let blocks = second.last_blocks();
    assert_eq!(blocks.len(), 2, "{blocks:#?}");
    assert_eq!(blocks[0].tool_result().tool_use_id, "toolu_ls");
    assert_eq!(blocks[1], Block::text("focus on the README please"));
}

#[test]
fn cancel_mid_stream_closes_the_connection_the_server_sees_it() {
    let steps = vec![
        mm::message_start(5),
        mm::text_start(0),
        mm::text_delta(0, "working"),
    ];
    let settled = ON.cancel_mid_stream(steps, 40, "POST /v1/messages ");
    assert_eq!(settled.result(), "working", "the stream was being read");
}

mod broker {
    //! Through the real broker over MCP.

    use super::mm;
    use crate::support::mcp::*;
    use crate::support::worker::{Shown, on_api, snapshot_of};
    use serde_json::{Value, json};
    use std::time::Duration;
    use subzero_protocol::{
        Info, ModelApi, ResumeOutput, ResumeOutputState, SpawnOutput, TerminalRunStatus,
    };
    use subzero_testkit::Reply;
    use subzero_testkit::model_requests::messages::{Block, Request};

    fn on_messages(env: &Env) -> Value {
        on_api(&env.model(), ModelApi::AnthropicMessages)
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn a_child_on_anthropic_messages_completes_a_tool_using_task() {
        let env = Env::new(vec![
            mm::tool_use("toolu_01", "read", r#"{"path":"README.md"}"#),
            mm::text("The README describes a small demo project."),
        ]);
        let s = env.broker("broker").await;
        let info: Shown<Info> = Shown::new(&ok(&s, "subzero_info", json!({})).await);
        assert!(
            info.worker.protocols.contains(&ModelApi::AnthropicMessages),
            "{info:#}"
        );
        let out: Shown<SpawnOutput> = Shown::new(
            &ok(
                &s,
                "subzero_spawn",
                json!({"prompt": "Summarize README.md", "templateId": "researcher",
                       "model": on_messages(&env)}),
            )
            .await,
        );
        let child = out.child_id.to_string();
        let snap = snapshot_of(&settle(&s, &child, Duration::from_secs(30)).await);
        assert_eq!(snap.last().status, TerminalRunStatus::Completed, "{snap:#}");
        assert_eq!(
            *snap.last().preview,
            "The README describes a small demo project."
        );
        assert_eq!(snap.model.api, ModelApi::AnthropicMessages);
        let requests = env.server.requests();
        assert_eq!(requests.len(), 2);
        for request in &requests {
            assert_eq!(request.path, "/v1/messages");
            assert_eq!(request.header("x-api-key"), Some(KEY));
            assert_eq!(request.header("authorization"), None);
            Request::of(request);
        }
        let second = Request::of(&requests[1]);
        let result = second.messages[2].content[0].tool_result();
        assert_eq!(result.tool_use_id, "toolu_01");
        assert!(result.content.contains("Demo project"), "{second:#?}");
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
        let first = snapshot_of(&settle(&s, &child, Duration::from_secs(30)).await);
        assert_eq!(
            first.last().status,
            TerminalRunStatus::Completed,
            "{first:#}"
        );
        assert_eq!(first.model.api, ModelApi::OpenaiCompletions);

        let resumed: Shown<ResumeOutput> = Shown::new(
            &ok(
                &s,
                "subzero_resume",
                json!({"childId": child, "model": on_messages(&env),
                       "message": "Now read the README."}),
            )
            .await,
        );
        assert_eq!(resumed.state, ResumeOutputState::Running, "{resumed:#}");
        let after = snapshot_of(&settle(&s, &child, Duration::from_secs(30)).await);
        assert_eq!(
            after.last().status,
            TerminalRunStatus::Completed,
            "{after:#}"
        );
        assert_eq!(
            *after.last().preview,
            "Second run: the README names a demo project."
        );
        assert_eq!(after.model.api, ModelApi::AnthropicMessages);

        let requests = env.server.requests();
        assert_eq!(requests.len(), 4);
        assert_eq!(requests[1].path, "/v1/chat/completions");
        assert_eq!(requests[2].path, "/v1/messages");
        assert_eq!(requests[2].header("authorization"), None);
        let resumed_body = Request::of(&requests[2]);
        assert_eq!(
            resumed_body.roles(),
            ["user", "assistant", "user", "assistant", "user"]
        );
        let messages = &resumed_body.messages;
        let Block::ToolUse { id, name, .. } = &messages[1].content[0] else {
            panic!("not a tool_use: {:?}", messages[1].content[0]);
        };
        assert_eq!(name, "ls");
        assert_ne!(id, "call:0.ls", "the Chat Completions id was mapped");
        let result = messages[2].content[0].tool_result();
        assert_eq!(result.tool_use_id, id);
        assert!(result.content.contains("README.md"), "{resumed_body:#?}");
        assert_eq!(
            messages[3].content,
            [Block::text("First run: the workspace holds a README.")]
        );
        assert_eq!(messages[4].content, [Block::text("Now read the README.")]);
        // The next Messages request answers its own call by the id the stream gave.
        let last = Request::of(&requests[3]);
        assert_eq!(last.last_blocks()[0].tool_result().tool_use_id, "toolu_02");
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
    assert_eq!(settled.status, RunSettledStatus::Completed, "{settled}");
    assert_eq!(settled.result(), "Smaller now.");
    assert!(settled.cut.is_none(), "{settled}");
    let sent = Request::of(&requests[1]);
    let result = sent.last_blocks()[0].tool_result();
    assert_eq!(result.tool_use_id, "toolu_1");
    assert_eq!(result.is_error, Some(true));
    let content = result.content;
    assert!(
        content.contains("cut at the output-token cap of 64 tokens before its arguments were complete; make a smaller call"),
        "{content}"
    );
    let states: Vec<ToolState> = worker
        .tool_activity(&run_id(50))
        .into_iter()
        .map(|(_, state)| state)
        .collect();
    assert_eq!(states, [ToolState::Started, ToolState::Failed]);
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
    assert_eq!(settled.status, RunSettledStatus::Completed, "{settled}");
    let sent = Request::of(&requests[1]);
    let result = sent.last_blocks()[0].tool_result();
    assert_eq!(result.is_error, Some(true), "{result:?}");
    assert!(result.content.contains("make a smaller call"), "{result:?}");
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
    assert_eq!(settled.status, RunSettledStatus::Completed, "{settled}");
    assert_eq!(settled.usage, estimated_usage(&requests[0], streamed));
    // With usage it is reported.
    let (settled, _, _worker) = ON.settle(vec![mm::text("With usage.")], 54);
    assert_eq!(settled.usage.source, UsageSource::Reported, "{settled}");
    assert_eq!(settled.usage.input_tokens, 10);
}
