//! Nothing a model endpoint sends can exhaust the machine: one response is bounded in bytes
//! (`model_response_bytes`: the run fails with `limit_exceeded` and keeps the partial text,
//! saying it was cut), one tool call's arguments are bounded (`tool_argument_bytes`: a
//! short tool error, the arguments are dropped, not sent back), silence is bounded
//! (`model_idle_timeout_ms`: `model_request_failed`), and error bodies are read only up to
//! a small cap. Real broker and worker, scripted hostile servers on loopback; the limits
//! come from `[limits]` of the broker's config, so the whole path is exercised.

use std::path::Path;
use std::time::Duration;

use crate::support::faults::Reaper;
use crate::support::mcp::*;
use crate::support::worker::{Shown, Snapshot, snapshot_of, tool_results};
use serde_json::json;
use subzero_protocol::{
    ArtifactChunk, ErrorCode, Info, SendOutput, SendOutputDelivery, TerminalRunStatus, ToolState,
};
use subzero_testkit::mcp_client::McpSession;
use subzero_testkit::{Reply, Step};

/// Writes the test credential plus `limits` as the `[limits]` table.
fn configure(env: &Env, limits: &str) {
    std::fs::write(
        env.config(),
        format!(
            "[credentials.{CRED}]\nenv = \"SUBZERO_TEST_KEY\"\norigins = [\"{}\"]\n\n[limits]\n{limits}\n",
            env.origin()
        ),
    )
    .expect("config");
}

/// Spawns one researcher run and returns its settled snapshot, plus the session for more
/// calls (closed by the caller).
async fn spawn_and_settle(env: &Env) -> (McpSession, String, Snapshot) {
    let s = env.broker("broker").await;
    let (child, _run) = spawn(&s, env, "researcher", "Answer at length").await;
    let snap = snapshot_of(&settle(&s, &child, Duration::from_secs(60)).await);
    (s, child, snap)
}

/// `length` bytes of `artifact` from `offset` (`subzero_output`).
async fn output(s: &McpSession, artifact: &str, offset: u64, length: u64) -> Shown<ArtifactChunk> {
    Shown::new(
        &ok(
            s,
            "subzero_output",
            json!({"artifactId": artifact, "offset": offset, "length": length}),
        )
        .await,
    )
}

/// Total bytes of the regular files below `dir`.
fn bytes_under(dir: &Path) -> u64 {
    let mut total = 0;
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            total += bytes_under(&path);
        } else if let Ok(meta) = path.metadata() {
            total += meta.len();
        }
    }
    total
}

/// A text chunk carrying `text`, as one SSE event payload.
fn text_chunk(text: &str) -> String {
    json!({"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": null}]})
        .to_string()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_200_mb_answer_fails_at_the_response_cap_and_keeps_the_partial_text() {
    let piece = "x".repeat(16 * 1024);
    let env = Env::new(vec![Reply::Sse(vec![
        Step::repeat_data(&text_chunk(&piece), 200 * 64),
        Step::finish("stop"),
        Step::done(),
    ])]);
    configure(&env, "model_response_bytes = 1048576");
    let mut reaper = Reaper::new(env.dir.path());
    let (s, child, snap) = spawn_and_settle(&env).await;
    reaper.broker(s.pid());

    let last = snap.last();
    assert_eq!(last.status, TerminalRunStatus::Failed, "{snap:#}");
    assert_eq!(snap.last_error().code, ErrorCode::LimitExceeded, "{snap:#}");
    let message = snap.last_error().message.as_str();
    assert!(
        message.contains("passed 1048576 bytes") && message.contains("model_response_bytes"),
        "the error names the limit: {message}"
    );
    // The partial text is kept as the run's artifact and says where it was cut.
    let artifact = last
        .artifact_id
        .as_ref()
        .expect("a partial-result artifact");
    let head = output(&s, artifact, 0, 65536).await;
    let total = head.total_bytes;
    assert!(
        total > 512 * 1024 && total <= 1024 * 1024 + 256,
        "partial text up to the cap: {total} bytes"
    );
    assert!(head.text.starts_with("xxxx"));
    let tail = output(&s, artifact, total - 100, 100).await;
    assert!(
        tail.text
            .ends_with("[cut: the model response passed 1048576 bytes (model_response_bytes)]"),
        "{tail:#}"
    );
    // Disk growth follows from the cap: artifacts ≈ the partial text, transcripts tiny.
    let state = env.state_dir();
    assert!(bytes_under(&state.join("artifacts")) <= 1024 * 1024 + 4096);
    assert!(bytes_under(&state.join("transcripts")) < 64 * 1024);
    assert_eq!(env.server.requests().len(), 1, "nothing is retried");

    // The child stays usable.
    env.server.push(Reply::text("Short this time."));
    let sent: Shown<SendOutput> = Shown::new(
        &ok(
            &s,
            "subzero_send",
            json!({"childId": child, "mode": "followup", "message": "Shorter, please"}),
        )
        .await,
    );
    assert_eq!(sent.delivery, SendOutputDelivery::Started, "{sent}");
    let snap = snapshot_of(&settle(&s, &child, Duration::from_secs(30)).await);
    assert_eq!(snap.last().status, TerminalRunStatus::Completed, "{snap:#}");
    s.close().await.expect("close");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_default_response_cap_is_16_mib() {
    let piece = "y".repeat(64 * 1024);
    let env = Env::new(vec![Reply::Sse(vec![
        Step::repeat_data(&text_chunk(&piece), 400),
        Step::finish("stop"),
        Step::done(),
    ])]);
    let mut reaper = Reaper::new(env.dir.path());
    let (s, _child, snap) = spawn_and_settle(&env).await;
    reaper.broker(s.pid());
    assert_eq!(snap.last_error().code, ErrorCode::LimitExceeded, "{snap:#}");
    let message = snap.last_error().message.as_str();
    assert!(message.contains("passed 8388608 bytes"), "{message}");
    let info: Shown<Info> = Shown::new(&ok(&s, "subzero_info", json!({})).await);
    let limits = &info.limits;
    let value = |limit: Option<std::num::NonZeroU64>| limit.map(std::num::NonZeroU64::get);
    assert_eq!(
        value(limits.model_response_bytes),
        Some(8 * 1024 * 1024),
        "{info}"
    );
    assert_eq!(
        value(limits.tool_argument_bytes),
        Some(1024 * 1024),
        "{info}"
    );
    assert_eq!(value(limits.model_idle_timeout_ms), Some(180_000), "{info}");
    s.close().await.expect("close");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_endless_stream_of_empty_deltas_ends_at_the_response_cap() {
    let empty = json!({"choices": [{"index": 0, "delta": {}, "finish_reason": null}]}).to_string();
    let env = Env::new(vec![Reply::Sse(vec![Step::repeat_data(
        &empty,
        100_000_000,
    )])]);
    configure(&env, "model_response_bytes = 65536");
    let mut reaper = Reaper::new(env.dir.path());
    let (s, _child, snap) = spawn_and_settle(&env).await;
    reaper.broker(s.pid());
    assert_eq!(snap.last().status, TerminalRunStatus::Failed, "{snap:#}");
    assert_eq!(snap.last_error().code, ErrorCode::LimitExceeded, "{snap:#}");
    s.close().await.expect("close");
}

#[tokio::test(flavor = "multi_thread")]
async fn ten_megabytes_of_tool_arguments_get_a_short_tool_error_and_are_not_sent_back() {
    let filler = "z".repeat(8 * 1024);
    let env = Env::new(vec![
        Reply::Sse(vec![
            Step::tool_delta(Some(0), Some("call_big"), Some("read"), "{\"path\":\""),
            Step::Repeat {
                raw: format!(
                    "data: {}\n\n",
                    json!({"choices": [{"index": 0, "delta": {"tool_calls": [
                        {"index": 0, "function": {"arguments": filler}}]}}]})
                ),
                times: 1280,
            },
            Step::tool_delta(Some(0), None, None, "\"}"),
            Step::finish("tool_calls"),
            Step::done(),
        ]),
        Reply::text("Understood, smaller next time."),
    ]);
    // The response cap is raised so the 10 MB of arguments arrive whole: the argument cap
    // is what answers them.
    configure(
        &env,
        "tool_argument_bytes = 65536\nmodel_response_bytes = 33554432",
    );
    let mut reaper = Reaper::new(env.dir.path());
    let (s, _child, snap) = spawn_and_settle(&env).await;
    reaper.broker(s.pid());
    assert_eq!(snap.last().status, TerminalRunStatus::Completed, "{snap:#}");

    let requests = env.server.requests();
    assert_eq!(requests.len(), 2);
    let second = &requests[1];
    assert!(
        second.body.len() < 64 * 1024,
        "the dropped arguments were sent back to the model ({} bytes)",
        second.body.len()
    );
    let results = tool_results(second);
    assert_eq!(results.len(), 1, "{results:?}");
    assert!(
        results[0].len() < 512
            && results[0].contains("over the 65536-byte cap (tool_argument_bytes)"),
        "a short tool error naming the cap: {}",
        results[0]
    );
    assert!(
        snap.tool_activity()
            .iter()
            .any(|(_, state)| *state == ToolState::Failed),
        "the oversized call is reported as a failed tool: {snap:#}"
    );
    s.close().await.expect("close");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_endpoint_silent_mid_stream_fails_after_the_idle_timeout() {
    let env = Env::new(vec![Reply::Sse(vec![
        Step::text("The answer begins"),
        Step::Hang,
    ])]);
    configure(&env, "model_idle_timeout_ms = 500");
    let mut reaper = Reaper::new(env.dir.path());
    let (s, _child, snap) = spawn_and_settle(&env).await;
    reaper.broker(s.pid());
    assert_eq!(snap.last().status, TerminalRunStatus::Failed, "{snap:#}");
    assert_eq!(snap.last_error().code, ErrorCode::ModelRequestFailed);
    let message = snap.last_error().message.as_str();
    assert!(
        message.contains("sent nothing for 500 ms") && message.contains("model_idle_timeout_ms"),
        "{message}"
    );
    assert_eq!(*snap.last().preview, "The answer begins", "{snap:#}");
    s.close().await.expect("close");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_endpoint_that_never_answers_fails_after_the_idle_timeout() {
    let env = Env::new(vec![Reply::Hang]);
    configure(&env, "model_idle_timeout_ms = 500");
    let mut reaper = Reaper::new(env.dir.path());
    let (s, _child, snap) = spawn_and_settle(&env).await;
    reaper.broker(s.pid());
    assert_eq!(snap.last_error().code, ErrorCode::ModelRequestFailed);
    let message = snap.last_error().message.as_str();
    assert!(
        message.contains("waiting for the response headers"),
        "{message}"
    );
    s.close().await.expect("close");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_huge_error_body_is_read_only_up_to_a_small_cap() {
    let env = Env::new(vec![Reply::status(401, &"e".repeat(50 * 1024 * 1024))]);
    let mut reaper = Reaper::new(env.dir.path());
    let (s, _child, snap) = spawn_and_settle(&env).await;
    reaper.broker(s.pid());
    let error = snap.last_error();
    assert_eq!(error.code, ErrorCode::ModelRequestFailed, "{snap:#}");
    let message = error.message.as_str();
    assert!(message.len() < 1024, "{} bytes", message.len());
    s.close().await.expect("close");
}
