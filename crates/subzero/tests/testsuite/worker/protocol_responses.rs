//! `model.api = "openai-responses"`: the real worker against scripted Responses streams
//! (text, calls split across argument deltas, parallel calls, usage, every error class,
//! cancellation, steering, exact grants), then a child on the real broker over MCP, and
//! children resumed across protocols (Chat Completions → Responses → Chat Completions) with
//! their earlier tool turns carried over.

use crate::support::worker::{
    ControlLines, OnProtocol, WAIT, dirs, estimated_usage, max_output_cut,
};
use serde_json::json;
use subzero_protocol::{ErrorCode, RunSettledStatus, ToolState, UsageSource};
use subzero_testkit::model_requests::responses::{Call, Item, Request};
use subzero_testkit::model_responses as rs;
use subzero_testkit::{Reply, ScriptedServer, Step};

const KEY: &str = "sk-test-key-0000";

/// The researcher's runs over `openai-responses`.
const ON: OnProtocol = OnProtocol {
    api: "openai-responses",
    tag: "RS",
};

fn run_id(n: u8) -> String {
    ON.run_id(n)
}

/// The `started`/`finished`/`failed` states of the tool events of `run`, in order.
fn tool_states(worker: &impl ControlLines, run: &str) -> Vec<ToolState> {
    worker
        .tool_activity(run)
        .into_iter()
        .map(|(_, state)| state)
        .collect()
}

#[test]
fn text_streams_with_usage_from_v1_responses_and_sends_no_server_state() {
    let mut events = vec![rs::created(), rs::in_progress()];
    events.extend(rs::reasoning(0, "rs_1", "private chain of thought"));
    events.extend(rs::message_events(
        1,
        "msg_1",
        "The README describes a demo.",
    ));
    events.push(json!({"type": "response.some_future_event", "item_id": "msg_1"}));
    events.push(rs::completed(vec![], 42, 7));
    let (settled, requests, worker) = ON.settle(vec![Reply::Sse(rs::steps(events))], 1);
    assert_eq!(settled.status, RunSettledStatus::Completed, "{settled}");
    assert_eq!(settled.result(), "The README describes a demo.");
    assert_eq!(settled.usage.input_tokens, 42);
    assert_eq!(settled.usage.output_tokens, 7);
    assert_eq!(
        worker.streamed_text(&run_id(1)),
        "The README describes a demo."
    );
    assert!(!worker.stdout_text().contains("private chain of thought"));

    assert_eq!(requests.len(), 1);
    let request = &requests[0];
    assert_eq!(request.method, "POST");
    assert_eq!(request.path, "/v1/responses");
    assert_eq!(
        request.header("authorization"),
        Some(format!("Bearer {KEY}").as_str())
    );
    let body = Request::of(request);
    assert_eq!(body.model, "test-model");
    assert_eq!(body.stream, Some(true));
    assert_eq!(
        body.store,
        Some(false),
        "the transcript is ours, not the provider's"
    );
    assert_eq!(body.max_output_tokens, Some(8192));
    assert!(body.previous_response_id.is_none());
    assert!(
        body.instructions
            .as_deref()
            .is_some_and(|i| i.contains("You are a test child.")),
        "{body:#?}"
    );
    assert_eq!(body.input, [Item::user("do the task")]);
    assert_eq!(body.tool_names(), ["read", "grep", "find", "ls"]);
    assert_eq!(body.tools[0].kind, "function");
    assert_eq!(body.tools[0].strict, Some(false));
    assert!(body.tools[0].parameters.is_object());
    assert!(body.tool_choice.is_none());
}

#[test]
fn a_call_split_across_argument_deltas_runs_and_its_output_goes_back_by_call_id() {
    let (settled, requests, worker) = ON.settle(
        vec![
            rs::tool_call("call_read_1", "read", r#"{"path":"README.md"}"#),
            rs::text("It is a demo."),
        ],
        2,
    );
    assert_eq!(settled.status, RunSettledStatus::Completed, "{settled}");
    assert_eq!(settled.result(), "It is a demo.");
    assert_eq!(settled.usage.turns, 2);
    assert_eq!(
        settled.usage.input_tokens,
        2 * rs::INPUT_TOKENS,
        "usage adds up over the turns"
    );
    assert_eq!(
        tool_states(&worker, &run_id(2)),
        [ToolState::Started, ToolState::Finished]
    );
    let second = Request::of(&requests[1]);
    let input = &second.input;
    assert_eq!(input.len(), 3, "{second:#?}");
    assert_eq!(
        input[1],
        Item::FunctionCall(Call {
            call_id: "call_read_1".into(),
            name: "read".into(),
            arguments: r#"{"path":"README.md"}"#.into(),
        })
    );
    let Item::FunctionCallOutput(output) = &input[2] else {
        panic!("not a function_call_output: {:?}", input[2]);
    };
    assert_eq!(output.call_id, "call_read_1");
    assert!(output.output.contains("A small project."), "{output:?}");
}

#[test]
fn two_parallel_calls_with_interleaved_deltas_are_both_answered_in_order() {
    let events = vec![
        rs::created(),
        rs::call_added(0, "fc_a", "call_a", "read"),
        rs::call_added(1, "fc_b", "call_b", "ls"),
        rs::arguments_delta(0, "fc_a", "{\"pa"),
        rs::arguments_delta(1, "fc_b", "{\"path\":"),
        rs::arguments_delta(0, "fc_a", "th\":\"READ"),
        rs::arguments_delta(1, "fc_b", "\".\"}"),
        rs::arguments_delta(0, "fc_a", "ME.md\"}"),
        rs::item_done(
            0,
            rs::call_item("fc_a", "call_a", "read", r#"{"path":"README.md"}"#),
        ),
        rs::item_done(1, rs::call_item("fc_b", "call_b", "ls", r#"{"path":"."}"#)),
        rs::completed(vec![], 3, 4),
    ];
    let (settled, requests, _worker) = ON.settle(
        vec![Reply::Sse(rs::steps(events)), rs::text("Both done.")],
        3,
    );
    assert_eq!(settled.status, RunSettledStatus::Completed, "{settled}");
    let second = Request::of(&requests[1]);
    let calls = second.calls();
    let outputs = second.outputs();
    let call_ids: Vec<&str> = calls.iter().map(|c| c.call_id.as_str()).collect();
    let output_ids: Vec<&str> = outputs.iter().map(|o| o.call_id.as_str()).collect();
    assert_eq!(call_ids, ["call_a", "call_b"]);
    assert_eq!(output_ids, ["call_a", "call_b"]);
    assert_eq!(calls[0].arguments, r#"{"path":"README.md"}"#);
    assert_eq!(calls[1].arguments, r#"{"path":"."}"#);
    assert!(outputs[0].output.contains("A small project."));
    assert!(outputs[1].output.contains("README.md"));
}

#[test]
fn a_call_of_an_ungranted_tool_is_answered_with_a_tool_error() {
    let (settled, requests, _worker) = ON.settle(
        vec![
            rs::tool_call("call_bash", "bash", r#"{"command":"touch /tmp/x"}"#),
            rs::text("Could not."),
        ],
        4,
    );
    assert_eq!(settled.status, RunSettledStatus::Completed, "{settled}");
    let second = Request::of(&requests[1]);
    let outputs = second.outputs();
    assert_eq!(outputs[0].call_id, "call_bash");
    let output = &outputs[0].output;
    assert!(output.contains("not granted"), "{output}");
}

#[test]
fn http_401_429_and_500_fail_once_with_the_status_and_the_error_excerpt() {
    for (n, status) in [(10u8, 401u16), (11, 429), (12, 500)] {
        let error = format!(r#"{{"error":{{"message":"status {status} from the provider"}}}}"#);
        let (settled, requests, _worker) =
            ON.settle(vec![Reply::status(status, &error), rs::text("never")], n);
        assert_eq!(settled.status, RunSettledStatus::Failed, "{settled}");
        assert_eq!(settled.code(), ErrorCode::ModelRequestFailed);
        assert_eq!(settled.details().status, Some(status));
        assert!(
            settled
                .details()
                .excerpt
                .is_some_and(|e| e.contains(&format!("status {status} from the provider"))),
            "{settled}"
        );
        assert_eq!(requests.len(), 1, "no retry after HTTP {status}");
    }
}

#[test]
fn an_error_event_mid_stream_fails_with_the_provider_message_and_the_key_redacted() {
    let mut events = vec![rs::created()];
    events.extend(rs::message_events(0, "msg_1", "Half an ans"));
    events.push(rs::error(
        "rate_limit_exceeded",
        &format!("Rate limit reached for key {KEY}; slow down"),
    ));
    let (settled, requests, worker) = ON.settle(vec![Reply::Sse(rs::steps(events))], 20);
    assert_eq!(settled.status, RunSettledStatus::Failed, "{settled}");
    assert_eq!(settled.code(), ErrorCode::ModelRequestFailed);
    let message = settled.message();
    assert!(
        message.contains("rate_limit_exceeded: Rate limit reached for key [REDACTED]"),
        "{message}"
    );
    assert!(
        !worker.stdout_text().contains(KEY),
        "the key reached stdout"
    );
    assert!(
        !worker.stderr_text().contains(KEY),
        "the key reached the log"
    );
    assert_eq!(requests.len(), 1);
}

#[test]
fn response_failed_fails_with_its_error_message() {
    let events = vec![
        rs::created(),
        rs::failed("server_error", "The model had an internal error"),
    ];
    let (settled, requests, _worker) = ON.settle(vec![Reply::Sse(rs::steps(events))], 21);
    assert_eq!(settled.status, RunSettledStatus::Failed, "{settled}");
    assert_eq!(settled.code(), ErrorCode::ModelRequestFailed);
    let message = settled.message();
    assert!(
        message.contains("server_error: The model had an internal error"),
        "{message}"
    );
    assert_eq!(requests.len(), 1);
}

#[test]
fn a_stream_cut_or_ended_before_response_completed_fails_and_never_completes() {
    let half = || {
        let mut events = vec![rs::created()];
        events.extend(rs::message_events(0, "msg_1", "Half an answer"));
        rs::steps(events)
    };
    let mut cut = half();
    cut.extend([Step::delay_ms(50), Step::Cut]);
    let mut ended = half();
    ended.push(Step::Data("[DONE]".into()));
    for (n, steps) in [(30u8, cut), (31, ended), (32, half())] {
        let (settled, requests, _worker) = ON.settle(vec![Reply::Sse(steps), rs::text("never")], n);
        assert_eq!(settled.status, RunSettledStatus::Failed, "{settled}");
        assert_eq!(settled.code(), ErrorCode::ModelRequestFailed);
        assert_eq!(requests.len(), 1, "no retry");
    }
}

#[test]
fn non_json_data_fails_the_run() {
    let mut steps = rs::steps(vec![rs::created()]);
    steps.push(Step::Raw(
        "event: response.output_text.delta\ndata: {\"type\": \"response.output_text.del\n\n".into(),
    ));
    steps.extend(rs::steps(vec![rs::completed(vec![], 1, 1)]));
    let (settled, requests, _worker) = ON.settle(vec![Reply::Sse(steps)], 33);
    assert_eq!(settled.status, RunSettledStatus::Failed, "{settled}");
    assert_eq!(settled.code(), ErrorCode::ModelRequestFailed);
    let message = settled.message();
    assert!(message.contains("not JSON"), "{message}");
    assert_eq!(requests.len(), 1);
}

#[test]
fn incomplete_at_max_output_tokens_keeps_the_text_and_marks_the_cut() {
    let mut events = vec![rs::created()];
    events.extend(rs::message_events(0, "msg_1", "A long answer that"));
    events.push(rs::incomplete("max_output_tokens", 9, 8192));
    let (settled, _requests, _worker) = ON.settle(vec![Reply::Sse(rs::steps(events))], 34);
    assert_eq!(settled.status, RunSettledStatus::Completed, "{settled}");
    assert_eq!(settled.result(), "A long answer that");
    assert_eq!(settled.cut, Some(max_output_cut(8192)));
    assert_eq!(settled.error, None);
    assert_eq!(settled.usage.output_tokens, 8192);
    assert_eq!(settled.usage.source, UsageSource::Reported);
}

#[test]
fn a_steer_reaches_the_next_request_as_a_user_input_item() {
    let (ws, state) = dirs();
    let mut first = vec![Step::delay_ms(600)];
    first.extend(rs::steps(
        [
            vec![rs::created()],
            rs::call_events(0, "fc_1", "call_ls", "ls", "{}"),
            vec![rs::completed(vec![], 1, 1)],
        ]
        .concat(),
    ));
    let server =
        ScriptedServer::start(vec![Reply::Sse(first), rs::text("steered answer")]).expect("server");
    let id = run_id(40);
    let mut worker = ON.run(
        server.base_url(),
        &id,
        ws.path(),
        &state.path().join("t.jsonl"),
    );
    assert!(server.wait_for_requests(1, WAIT));
    worker.send(
        &json!({"type": "steer", "runId": id, "steerId": "st_00000000000000000000000R51",
                        "message": "focus on the README please"}),
    );
    let settled = worker.run_settled(&id);
    assert_eq!(settled.status, RunSettledStatus::Completed, "{settled}");
    assert_eq!(settled.result(), "steered answer");
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    assert!(!requests[0].body.contains("focus on the README"));
    let second = Request::of(&requests[1]);
    let input = &second.input;
    assert_eq!(
        input.last(),
        Some(&Item::user("focus on the README please")),
        "{second:#?}"
    );
    assert_eq!(input[input.len() - 2].kind(), "function_call_output");
    assert_eq!(
        second.user_texts(),
        ["do the task", "focus on the README please"]
    );
    worker.steer("steer_applied", &id, |s| s.reason.is_none());
}

#[test]
fn cancel_mid_stream_closes_the_connection_the_server_sees_it() {
    let mut events = vec![rs::created()];
    events.extend(rs::message_events(0, "msg_1", "thinking out loud")[..3].to_vec());
    ON.cancel_mid_stream(rs::steps(events), 50, "POST /v1/responses ");
}

mod over_mcp {
    use std::time::Duration;

    use serde_json::{Value, json};
    use subzero_protocol::{
        ChildEvent, Info, ModelApi, ResumeOutput, ResumeOutputState, SpawnOutput, TerminalRunStatus,
    };
    use subzero_testkit::Reply;
    use subzero_testkit::model_requests::{chat, responses};
    use subzero_testkit::model_responses as rs;

    use crate::support::mcp::*;
    use crate::support::worker::{Shown, on_api, snapshot_of};
    use subzero_testkit::mcp_client::McpSession;

    fn on(api: ModelApi, env: &Env) -> Value {
        on_api(&env.model(), api)
    }

    fn checked(env: &Env, n: usize) -> responses::Request {
        let request = &env.server.requests()[n];
        assert_eq!(request.path, "/v1/responses");
        responses::Request::of(request)
    }

    /// Spawns a researcher on `api` with `prompt`; its child id.
    async fn spawn_on(s: &McpSession, env: &Env, api: ModelApi, prompt: &str) -> String {
        let spawned: Shown<SpawnOutput> = Shown::new(
            &ok(
                s,
                "subzero_spawn",
                json!({"prompt": prompt, "templateId": "researcher", "model": on(api, env)}),
            )
            .await,
        );
        spawned.child_id.to_string()
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn a_child_on_openai_responses_completes_a_tool_using_task() {
        let env = Env::new(vec![
            rs::tool_call("call_r1", "read", r#"{"path":"README.md"}"#),
            rs::text("The README describes a small demo project."),
        ]);
        let s = env.broker("broker").await;
        let info: Shown<Info> = Shown::new(&ok(&s, "subzero_info", json!({})).await);
        assert!(
            info.worker.protocols.contains(&ModelApi::OpenaiResponses),
            "{info:#}"
        );
        let child = spawn_on(&s, &env, ModelApi::OpenaiResponses, "Summarize README.md").await;
        let snap = snapshot_of(&settle(&s, &child, Duration::from_secs(30)).await);
        assert_eq!(snap.last().status, TerminalRunStatus::Completed, "{snap:#}");
        assert_eq!(
            *snap.last().preview,
            "The README describes a small demo project."
        );
        assert_eq!(snap.model.api, ModelApi::OpenaiResponses);
        assert!(
            snap.events
                .iter()
                .any(|e| matches!(e, ChildEvent::Tool { .. })),
            "{snap:#}"
        );
        let second = checked(&env, 1);
        let output = second.outputs()[0];
        assert_eq!(output.call_id, "call_r1");
        assert!(output.output.contains("Demo project"), "{output:?}");
        s.close().await.expect("close");
        assert!(
            env.files_containing(KEY).is_empty(),
            "key found on disk: {:?}",
            env.files_containing(KEY)
        );
    }

    /// Chat Completions turns (a call and its result) resumed on Responses, then the
    /// Responses turns resumed on Chat Completions: each protocol gets every earlier turn,
    /// calls paired with their results by id.
    #[tokio::test(flavor = "multi_thread")]
    async fn a_child_resumed_across_protocols_keeps_its_tool_turns_paired() {
        let env = Env::new(vec![
            Reply::tool_call("call_chat_1", "read", r#"{"path":"README.md"}"#),
            Reply::text("First: a demo project."),
        ]);
        let s = env.broker("broker").await;
        let child = spawn_on(&s, &env, ModelApi::OpenaiCompletions, "Summarize README.md").await;
        let snap = snapshot_of(&settle(&s, &child, Duration::from_secs(30)).await);
        assert_eq!(snap.last().status, TerminalRunStatus::Completed, "{snap:#}");
        assert_eq!(env.server.requests()[0].path, "/v1/chat/completions");

        env.server
            .push(rs::tool_call("call_resp_2", "ls", r#"{"path":"."}"#));
        env.server.push(rs::text("Second: it holds a README."));
        let resumed: Shown<ResumeOutput> = Shown::new(
            &ok(
                &s,
                "subzero_resume",
                json!({"childId": child, "model": on(ModelApi::OpenaiResponses, &env),
                       "message": "Now list the files."}),
            )
            .await,
        );
        assert_eq!(resumed.state, ResumeOutputState::Running, "{resumed:#}");
        let snap = snapshot_of(&settle(&s, &child, Duration::from_secs(30)).await);
        assert_eq!(snap.last().status, TerminalRunStatus::Completed, "{snap:#}");
        assert_eq!(*snap.last().preview, "Second: it holds a README.");
        assert_eq!(snap.model.api, ModelApi::OpenaiResponses);

        let first_on_responses = checked(&env, 2);
        let input = &first_on_responses.input;
        let shape: Vec<(&str, &str)> = input
            .iter()
            .map(|i| {
                let who = match i {
                    responses::Item::Message(m) => m.role.as_str(),
                    responses::Item::FunctionCall(c) => c.call_id.as_str(),
                    responses::Item::FunctionCallOutput(o) => o.call_id.as_str(),
                };
                (i.kind(), who)
            })
            .collect();
        assert_eq!(
            shape,
            [
                ("message", "user"),
                ("function_call", "call_chat_1"),
                ("function_call_output", "call_chat_1"),
                ("message", "assistant"),
                ("message", "user"),
            ],
            "{first_on_responses:#?}"
        );
        let call = first_on_responses.calls()[0];
        assert_eq!(call.name, "read");
        assert_eq!(call.arguments, r#"{"path":"README.md"}"#);
        let output = first_on_responses.outputs()[0];
        assert!(output.output.contains("Demo project"), "{output:?}");
        let responses::Item::Message(answer) = &input[3] else {
            panic!("not a message: {:?}", input[3]);
        };
        assert_eq!(answer.text(), "First: a demo project.");
        assert_eq!(
            first_on_responses.user_texts(),
            ["Summarize README.md", "Now list the files."]
        );
        let second_on_responses = checked(&env, 3);
        assert_eq!(second_on_responses.outputs()[1].call_id, "call_resp_2");

        // And back: the Responses call is a Chat Completions tool call with the same id.
        env.server.push(Reply::text("Third: back on chat."));
        ok(
            &s,
            "subzero_resume",
            json!({"childId": child, "model": on(ModelApi::OpenaiCompletions, &env),
                   "message": "Wrap up."}),
        )
        .await;
        let snap = snapshot_of(&settle(&s, &child, Duration::from_secs(30)).await);
        assert_eq!(*snap.last().preview, "Third: back on chat.", "{snap:#}");
        assert_eq!(env.server.requests()[4].path, "/v1/chat/completions");
        let chat = chat::Request::of(&env.server.requests()[4]);
        assert_eq!(chat.call_ids(), ["call_chat_1", "call_resp_2"]);
        assert_eq!(chat.answered_ids(), ["call_chat_1", "call_resp_2"]);
        s.close().await.expect("close");
    }
}

#[test]
fn a_call_cut_mid_arguments_is_not_run_and_the_model_is_asked_for_a_smaller_one() {
    let events = vec![
        rs::created(),
        rs::call_added(0, "fc_1", "call_1", "read"),
        rs::arguments_delta(0, "fc_1", "{\"path\":\"REA"),
        rs::incomplete("max_output_tokens", 9, 64),
    ];
    let (settled, requests, worker) = ON.settle_limited(
        vec![Reply::Sse(rs::steps(events)), rs::text("Smaller now.")],
        50,
        json!({"maxOutputTokens": 64}),
    );
    assert_eq!(settled.status, RunSettledStatus::Completed, "{settled}");
    assert_eq!(settled.result(), "Smaller now.");
    assert!(
        settled.cut.is_none(),
        "the final answer was whole: {settled}"
    );
    let second = Request::of(&requests[1]);
    let outputs = second.outputs();
    assert_eq!(outputs.len(), 1, "{second:#?}");
    assert_eq!(outputs[0].call_id, "call_1");
    let output = &outputs[0].output;
    assert!(
        output.contains("cut at the output-token cap of 64 tokens before its arguments were complete; make a smaller call"),
        "{output}"
    );
    assert_eq!(
        tool_states(&worker, &run_id(50)),
        [ToolState::Started, ToolState::Failed]
    );
}

#[test]
fn a_handoff_summary_is_cut_at_16_kib_and_its_stream_not_read_further() {
    let flood = rs::step(&rs::text_delta(0, "msg_h", &"x".repeat(1000)));
    let Step::Raw(flood) = flood else {
        unreachable!("rs::step is raw")
    };
    let opening = rs::steps(vec![
        rs::created(),
        rs::item_added(0, rs::message_item("msg_h", "")),
        rs::text_delta(0, "msg_h", "Handoff: "),
    ]);
    let tool_round = rs::tool_call("call_1", "ls", r#"{"path":"."}"#);
    let settled = ON.flooded_handoff(tool_round, opening, flood, 51);
    assert_eq!(settled.usage.source, UsageSource::Estimated, "{settled}");
}

#[test]
fn usage_is_estimated_from_the_bytes_when_the_stream_reports_none() {
    let mut events = vec![rs::created()];
    events.extend(rs::message_events(0, "msg_1", "No usage here."));
    events.push(json!({"type": "response.completed",
                       "response": {"id": "resp_1", "status": "completed", "output": [],
                                    "usage": null}}));
    let steps = rs::steps(events);
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
}
