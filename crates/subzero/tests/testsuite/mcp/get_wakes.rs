//! A waiting `subzero_get` wakes for the event it waits for however many events land
//! before it: a steer receipt after 60 tool events, and (`waitFor: event`) the first
//! non-text event after a long run of text events.

use std::time::Duration;

use crate::support::faults::Reaper;
use crate::support::mcp::*;
use serde_json::json;
use subzero_testkit::{Reply, Step};

/// One response with `n` `ls` calls (each logs a started and a finished `tool` event).
fn many_tool_calls(n: usize) -> Reply {
    let ids: Vec<String> = (0..n).map(|i| format!("call_{i}")).collect();
    let calls: Vec<(&str, &str, &str)> = ids.iter().map(|id| (id.as_str(), "ls", "{}")).collect();
    let Reply::Sse(mut steps) = Reply::tool_calls(&calls) else {
        unreachable!("tool_calls streams")
    };
    steps.insert(0, Step::delay_ms(500));
    Reply::Sse(steps)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_steer_receipt_after_sixty_events_ends_the_wait() {
    let env = Env::new(vec![
        many_tool_calls(30),
        Reply::tool_call("call_sleep", "bash", r#"{"command":"sleep 2"}"#),
        Reply::Hang,
    ]);
    let mut reaper = Reaper::new(env.dir.path());
    let s = env.broker("broker").await;
    reaper.broker(s.pid());
    let (child, run) = spawn(&s, &env, "coder", "Look around, then run the command").await;

    // The wait starts before any of the 60 tool events; the steer goes in once they are
    // in and the bash call runs.
    let waiting = call(
        &s,
        "subzero_get",
        json!({"childId": child, "waitMs": 20000, "eventLimit": 10}),
    );
    let steering = async {
        for _ in 0..1000 {
            if env.server.requests().len() >= 2 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(env.server.requests().len() >= 2, "the second turn started");
        send(
            &s,
            json!({"childId": child, "mode": "steer", "message": "also check the tests"}),
        )
        .await
    };
    let (reply, steer) = tokio::join!(waiting, steering);
    assert_eq!(steer.delivery, p::SendOutputDelivery::Steered, "{steer:#?}");
    assert!(!reply.is_error, "{}", reply.text);
    let snap: p::ChildSnapshot = parse("subzero_get", &reply.structured);
    assert_eq!(
        snap.waited.reason,
        p::WaitedReason::Event,
        "the wait missed the steer receipt: {snap:#?}"
    );
    assert_eq!(snap.state, p::ChildState::Running, "{snap:#?}");
    let mut kinds: Vec<&str> = Vec::new();
    let mut cursor = 0;
    loop {
        let page = get(
            &s,
            json!({"childId": child, "cursor": cursor, "eventLimit": 50}),
        )
        .await;
        if page.events.is_empty() {
            break;
        }
        kinds.extend(page.events.iter().map(kind));
        cursor = page.next_cursor;
    }
    let tools = kinds.iter().filter(|k| **k == "tool").count();
    assert!(tools >= 60, "{kinds:?}");
    assert!(kinds.contains(&"steer_applied"), "{kinds:?}");

    stop(
        &s,
        json!({"childId": child, "expectedRunId": run, "waitMs": 5000}),
    )
    .await;
    s.close().await.expect("close");
}

#[tokio::test(flavor = "multi_thread")]
async fn waiting_for_an_event_sees_past_a_long_run_of_text_events() {
    // 60 text events (each turn's text is flushed as its own event), then a tool call.
    let mut script: Vec<Reply> = Vec::new();
    let first = Reply::Sse(vec![
        Step::delay_ms(300),
        Step::text(&"t".repeat(60 * 4096)),
        Step::tool_delta(Some(0), Some("call_ls"), Some("ls"), "{}"),
        Step::finish("tool_calls"),
        Step::done(),
    ]);
    script.push(first);
    script.push(Reply::Hang);
    let env = Env::new(script);
    let mut reaper = Reaper::new(env.dir.path());
    let s = env.broker("broker").await;
    reaper.broker(s.pid());
    let (child, run) = spawn(&s, &env, "researcher", "Think aloud, then list").await;
    let cursor = snapshot(&s, &child).await.next_cursor;
    let snap = get(
        &s,
        json!({"childId": child, "cursor": cursor, "waitMs": 20000, "waitFor": "event", "eventLimit": 10}),
    )
    .await;
    assert_eq!(
        snap.waited.reason,
        p::WaitedReason::Event,
        "the wait missed the tool event: {snap:#?}"
    );
    stop(
        &s,
        json!({"childId": child, "expectedRunId": run, "waitMs": 5000}),
    )
    .await;
    s.close().await.expect("close");
}
