//! Model endpoint faults seen through the real broker: an HTTP error before the first
//! byte, a stream that breaks mid-way, malformed SSE. Each fails the run with
//! `model_request_failed` after exactly one request (nothing is retried), keeps the text
//! streamed before the break as the run's artifact, leaves the child `ready`, and the
//! next followup works.

use std::time::Duration;

use crate::support::faults::Reaper;
use crate::support::mcp::*;
use serde_json::json;
use subzero_testkit::{Reply, Step};

/// The text a broken reply streamed before it broke (what the run keeps as partial output).
fn partial_text(reply: &Reply) -> Option<String> {
    let Reply::Sse(steps) = reply else {
        return None;
    };
    let text: String = steps
        .iter()
        .filter_map(|step| match step {
            Step::Data(payload) => serde_json::from_str::<serde_json::Value>(payload)
                .ok()
                .and_then(|v| {
                    v.pointer("/choices/0/delta/content")?
                        .as_str()
                        .map(str::to_owned)
                }),
            _ => None,
        })
        .collect();
    (!text.is_empty()).then_some(text)
}

async fn a_broken_reply_fails_the_run_once_and_the_child_stays_usable(broken: Reply) {
    let env = Env::new(vec![broken.clone(), Reply::text("Second time lucky.")]);
    let mut reaper = Reaper::new(env.dir.path());
    let s = env.broker("broker").await;
    reaper.broker(s.pid());

    let (child, run) = spawn(&s, &env, "researcher", "Say hello").await;
    let snap = settled(&s, &child, Duration::from_secs(30)).await;
    assert_eq!(snap.state, p::ChildState::Ready, "{snap:#?}");
    assert_eq!(snap.active_run_id, None, "{snap:#?}");
    assert_eq!(last(&snap).run_id.as_str(), run.as_str(), "{snap:#?}");
    assert_eq!(
        last_status(&snap),
        Some(p::TerminalRunStatus::Failed),
        "{snap:#?}"
    );
    assert_eq!(
        last(&snap).error.as_ref().map(|e| e.code),
        Some(p::ErrorCode::ModelRequestFailed),
        "{snap:#?}"
    );
    // What the run produced before it broke is kept as its artifact, and nothing else.
    let partial = partial_text(&broken);
    match partial {
        None => assert!(
            last(&snap).artifact_id.is_none(),
            "a failed run without output has no artifact: {snap:#?}"
        ),
        Some(text) => {
            assert_eq!(last(&snap).preview.as_str(), text, "{snap:#?}");
            let artifact = last(&snap)
                .artifact_id
                .as_deref()
                .map(String::as_str)
                .expect("artifact");
            let chunk = read_output(
                &s,
                json!({"artifactId": artifact, "offset": 0, "length": 1024}),
            )
            .await;
            assert_eq!(chunk.text.as_str(), text, "{chunk:#?}");
        }
    }
    let failed: Vec<p::ErrorCode> = snap
        .events
        .iter()
        .filter_map(|e| match e {
            p::ChildEvent::Failed { code, .. } => Some(*code),
            _ => None,
        })
        .collect();
    assert_eq!(failed, [p::ErrorCode::ModelRequestFailed], "{snap:#?}");
    // The run settled after the worker gave up, so a retry would already be logged.
    assert_eq!(
        env.server.requests().len(),
        1,
        "the failed request was retried"
    );

    let sent = send(
        &s,
        json!({"childId": child, "mode": "followup", "message": "Try again"}),
    )
    .await;
    assert_eq!(sent.delivery, p::SendOutputDelivery::Started, "{sent:#?}");
    let snap = settled(&s, &child, Duration::from_secs(30)).await;
    assert_eq!(snap.state, p::ChildState::Ready, "{snap:#?}");
    assert_eq!(last(&snap).run_id, sent.run_id, "{snap:#?}");
    assert_eq!(
        last_status(&snap),
        Some(p::TerminalRunStatus::Completed),
        "{snap:#?}"
    );
    assert_eq!(
        last(&snap).preview.as_str(),
        "Second time lucky.",
        "{snap:#?}"
    );
    assert_eq!(env.server.requests().len(), 2);
    s.close().await.expect("close");
    assert!(
        env.files_containing(KEY).is_empty(),
        "key on disk: {:?}",
        env.files_containing(KEY)
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn http_500_before_the_first_byte_fails_the_run_without_retry() {
    a_broken_reply_fails_the_run_once_and_the_child_stays_usable(Reply::status(
        500,
        r#"{"error":{"message":"boom"}}"#,
    ))
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn http_401_before_the_first_byte_fails_the_run_without_retry() {
    a_broken_reply_fails_the_run_once_and_the_child_stays_usable(Reply::status(
        401,
        r#"{"error":{"message":"bad key"}}"#,
    ))
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn http_503_before_the_first_byte_fails_the_run_without_retry() {
    a_broken_reply_fails_the_run_once_and_the_child_stays_usable(Reply::status(
        503,
        "overloaded, try later",
    ))
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn http_429_with_retry_after_fails_the_run_without_retry() {
    a_broken_reply_fails_the_run_once_and_the_child_stays_usable(Reply::status(
        429,
        r#"{"error":{"message":"rate limited; retry after 1s"}}"#,
    ))
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_connection_cut_mid_stream_fails_the_run_without_retry() {
    a_broken_reply_fails_the_run_once_and_the_child_stays_usable(Reply::Sse(vec![
        Step::text("Half an ans"),
        Step::delay_ms(50),
        Step::Cut,
    ]))
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn garbage_mid_stream_fails_the_run_without_retry() {
    a_broken_reply_fails_the_run_once_and_the_child_stays_usable(Reply::Sse(vec![
        Step::text("Half an ans"),
        Step::delay_ms(50),
        Step::Raw("HTTP/1.1 500 Internal Server Error\r\n\r\n<html>oops</html>\n\n".into()),
        Step::Cut,
    ]))
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn an_error_event_mid_stream_fails_the_run_without_retry() {
    // What OpenAI-compatible servers send when they fail after the headers went out.
    a_broken_reply_fails_the_run_once_and_the_child_stays_usable(Reply::Sse(vec![
        Step::text("Half an ans"),
        Step::Data(
            r#"{"error":{"message":"internal server error","type":"server_error","code":500}}"#
                .into(),
        ),
    ]))
    .await;
}

#[tokio::test(flavor = "multi_thread")]

async fn malformed_sse_fails_the_run_without_retry() {
    a_broken_reply_fails_the_run_once_and_the_child_stays_usable(Reply::Sse(vec![
        Step::Raw("data: {\"choices\": [{\"delta\": {\"content\": \"unterminated\n\n".into()),
        Step::done(),
    ]))
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_stream_that_ends_without_finishing_fails_the_run_without_retry() {
    // A clean end of body, but no finish_reason and no [DONE]: the answer is incomplete.
    a_broken_reply_fails_the_run_once_and_the_child_stays_usable(Reply::Sse(vec![Step::text(
        "Half an ans",
    )]))
    .await;
}
