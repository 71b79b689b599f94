//! A child's context window, through the real worker on each protocol: an endpoint that
//! refuses a prompt past its window (each provider's own overflow answer, from a scripted
//! server that refuses past N prompt tokens) ends the run `context_exhausted`, typed, with
//! the prompt size measured; nothing is retried, and the worker takes the child's next run.

use crate::support::worker::{
    ControlLines, OnProtocol, README, RETRY, RunSpec, Settled, WorkerProc, dirs, researcher,
};
use serde_json::json;
use subzero_protocol::{ErrorCode, RunSettledStatus};
use subzero_testkit::{
    Reply, ScriptedServer, model_messages as mm, model_responses as rs, overflow,
};

const CHAT: OnProtocol = OnProtocol {
    api: "openai-completions",
    tag: "CC",
};
const RESPONSES: OnProtocol = OnProtocol {
    api: "openai-responses",
    tag: "CR",
};
const MESSAGES: OnProtocol = OnProtocol {
    api: "anthropic-messages",
    tag: "CM",
};

/// Run 1 against a server that refuses every prompt past 16 tokens with `refusal`; then,
/// with the window lifted, run 2 of the same worker answers `next`. Both settled lines and
/// how many requests the server saw during run 1.
fn overflow_then_next(
    on: OnProtocol,
    refusal: Reply,
    next: Reply,
    window: Option<u64>,
) -> (Settled, usize, Settled) {
    let (ws, state) = dirs();
    std::fs::write(ws.path().join("README.md"), README).expect("readme");
    let server = ScriptedServer::start(vec![next]).expect("server");
    server.refuse_past(16, refusal);
    let transcript = state.path().join("t.jsonl");
    let mut worker = WorkerProc::spawn();
    let first = on.run_id(1);
    let mut spec = RunSpec::new(
        &first,
        server.base_url(),
        researcher(),
        ws.path(),
        &transcript,
    );
    spec.api = on.api;
    spec.context_window = window;
    worker.send(&spec.message());
    let settled = worker.run_settled(&first);
    // Nothing is retried: a retry would show up as one more request within this time.
    let made = server.requests().len();
    server.wait_for_requests(made + 1, RETRY);
    let refused = server.requests().len();
    server.refuse_past(u64::MAX, Reply::status(500, "unused"));
    let second = on.run_id(2);
    worker.send(&on.message(
        server.base_url(),
        &second,
        researcher(),
        ws.path(),
        &transcript,
    ));
    let next = worker.run_settled(&second);
    (settled, refused, next)
}

/// What every overflow answer must come to: `context_exhausted` with the prompt measured,
/// one request, and a worker that runs the next run to completion.
fn assert_exhausted(settled: &Settled, refused: usize, next: &Settled, status: Option<u16>) {
    assert_eq!(settled.status, RunSettledStatus::Failed, "{settled}");
    assert_eq!(settled.code(), ErrorCode::ContextExhausted, "{settled}");
    let details = settled.details();
    assert!(details.context_tokens.is_some_and(|t| t > 16), "{settled}");
    assert_eq!(details.status, status, "{settled}");
    assert!(
        settled.message().contains("compact"),
        "the message names the next step: {settled}"
    );
    assert_eq!(refused, 1, "an overflow is never retried");
    assert_eq!(
        next.status,
        RunSettledStatus::Completed,
        "the worker takes the next run: {next}"
    );
}

#[test]
fn an_openai_chat_context_length_exceeded_ends_the_run_context_exhausted() {
    let (settled, refused, next) =
        overflow_then_next(CHAT, overflow::openai_chat(), Reply::text("fits now"), None);
    assert_exhausted(&settled, refused, &next, Some(400));
    assert!(
        settled
            .details()
            .excerpt
            .is_some_and(|e| e.contains("context_length_exceeded")),
        "{settled}"
    );
    assert_eq!(next.result(), "fits now");
}

#[test]
fn a_llama_cpp_exceed_context_size_error_ends_the_run_context_exhausted() {
    let (settled, refused, next) = overflow_then_next(
        CHAT,
        overflow::llama_cpp(),
        Reply::text("fits now"),
        Some(2048),
    );
    assert_exhausted(&settled, refused, &next, Some(400));
    assert_eq!(settled.details().context_window, Some(2048), "{settled}");
}

#[test]
fn an_anthropic_prompt_is_too_long_ends_the_run_context_exhausted() {
    let (settled, refused, next) =
        overflow_then_next(MESSAGES, overflow::anthropic(), mm::text("fits now"), None);
    assert_exhausted(&settled, refused, &next, Some(400));
    assert!(
        settled.message().contains("prompt is too long"),
        "{settled}"
    );
}

#[test]
fn a_responses_context_length_exceeded_ends_the_run_context_exhausted() {
    let (settled, refused, next) = overflow_then_next(
        RESPONSES,
        overflow::openai_responses(),
        rs::text("fits now"),
        None,
    );
    assert_exhausted(&settled, refused, &next, Some(400));
}

#[test]
fn a_responses_failed_event_for_the_context_ends_the_run_context_exhausted() {
    let (settled, refused, next) = overflow_then_next(
        RESPONSES,
        overflow::openai_responses_failed_event(),
        rs::text("fits now"),
        None,
    );
    assert_exhausted(&settled, refused, &next, None);
}

#[test]
fn other_refusals_still_fail_model_request_failed() {
    let (settled, _, _) = overflow_then_next(
        MESSAGES,
        mm::status(400, "invalid_request_error", "max_tokens: Field required"),
        mm::text("fits now"),
        None,
    );
    assert_eq!(settled.code(), ErrorCode::ModelRequestFailed, "{settled}");
}

#[test]
fn an_overflow_as_a_stream_error_event_is_context_exhausted_on_chat_and_messages() {
    // A proxy that answers 200 and then reports the overflow in the stream.
    let chat_error = Reply::Sse(vec![subzero_testkit::Step::Data(
        json!({"error": {"message": "This model's maximum context length is 8192 tokens.",
                         "type": "invalid_request_error", "code": "context_length_exceeded"}})
        .to_string(),
    )]);
    let (settled, refused, next) =
        overflow_then_next(CHAT, chat_error, Reply::text("fits now"), None);
    assert_exhausted(&settled, refused, &next, None);
    let messages_error = Reply::Sse(vec![
        mm::message_start(0),
        mm::error_event(
            "invalid_request_error",
            "prompt is too long: 9120 tokens > 8192 maximum",
        ),
    ]);
    let (settled, refused, next) =
        overflow_then_next(MESSAGES, messages_error, mm::text("fits now"), None);
    assert_exhausted(&settled, refused, &next, None);
}
