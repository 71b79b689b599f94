//! Two brokers of one user on one state directory: the per-workspace caps hold across
//! them (kernel-held slots), waits see the other broker's events, and pruned history
//! is reported as an explicit cursor gap.

use std::time::Duration;

use crate::support::mcp::*;
use serde_json::json;
use subzero_testkit::{Reply, Step};

fn limits(env: &Env, extra: &str) {
    std::fs::write(
        env.config(),
        format!(
            "[credentials.{CRED}]\nenv = \"SUBZERO_TEST_KEY\"\norigins = [\"{}\"]\n\n[limits]\n{extra}\n",
            env.origin()
        ),
    )
    .expect("config");
}

#[tokio::test(flavor = "multi_thread")]
async fn worker_and_writer_caps_hold_across_brokers() {
    let env = Env::new(vec![Reply::Hang, Reply::Hang, Reply::Hang]);
    limits(
        &env,
        "active_workers_per_workspace = 2\nwrite_runs_per_workspace = 1",
    );
    let a = env.broker("a").await;
    let b = env.broker("b").await;

    // One write-capable run per workspace, whichever broker asks.
    let (coder, coder_run) = spawn(&a, &env, "coder", "edit things").await;
    let second_writer = call(
        &b,
        "subzero_spawn",
        json!({"prompt": "edit too", "templateId": "coder", "model": env.model()}),
    )
    .await;
    assert_eq!(
        second_writer.code(),
        Some("workspace_busy"),
        "{}",
        second_writer.text
    );
    assert!(
        second_writer.text.contains("write-capable"),
        "{}",
        second_writer.text
    );

    // Two workers per workspace (this config), whichever broker asks.
    let (reader, _) = spawn(&b, &env, "researcher", "read things").await;
    let third = call(
        &b,
        "subzero_spawn",
        json!({"prompt": "read more", "templateId": "researcher", "model": env.model()}),
    )
    .await;
    assert_eq!(third.code(), Some("workspace_busy"), "{}", third.text);
    let third_from_a = call(
        &a,
        "subzero_spawn",
        json!({"prompt": "read more", "templateId": "researcher", "model": env.model()}),
    )
    .await;
    assert_eq!(third_from_a.code(), Some("workspace_busy"));

    // Broker b sees broker a's child and its events.
    let seen = snapshot(&b, &coder).await;
    assert_eq!(
        seen.active_run_id.as_deref().map(String::as_str),
        Some(coder_run.as_str()),
        "{seen:#?}"
    );
    // Only the owner can steer or stop it.
    assert_eq!(
        err(
            &b,
            "subzero_send",
            json!({"childId": coder, "mode": "steer", "message": "x"})
        )
        .await,
        "busy"
    );

    // Stopping the coder frees the writer slot at once for the other broker.
    let stopped = stop(
        &a,
        json!({"childId": coder, "expectedRunId": coder_run, "waitMs": 10000}),
    )
    .await;
    assert!(stopped.confirmed, "{stopped:#?}");
    assert!(
        wait_slots_free(&env, &b).await,
        "the writer slot was not freed"
    );
    // The refused spawns left nothing behind: the two first children and the new coder.
    let listed = list(&a, json!({})).await;
    assert_eq!(listed.children.len(), 3, "{listed:#?}");
    let _ = reader;
    a.close().await.expect("close a");
    b.close().await.expect("close b");
}

/// Once the stopped coder's worker has exited, b can start a write-capable child.
async fn wait_slots_free(env: &Env, b: &subzero_testkit::mcp_client::McpSession) -> bool {
    for _ in 0..100 {
        let reply = call(
            b,
            "subzero_spawn",
            json!({"prompt": "now", "templateId": "coder", "model": env.model()}),
        )
        .await;
        if !reply.is_error {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    false
}

#[tokio::test(flavor = "multi_thread")]
async fn a_wait_on_one_broker_wakes_on_the_other_brokers_events() {
    let env = Env::new(vec![Reply::Sse(vec![
        Step::delay_ms(300),
        Step::text("late"),
        Step::finish("stop"),
        Step::done(),
    ])]);
    let a = env.broker("a").await;
    let b = env.broker("b").await;
    let (child, run) = spawn(&a, &env, "researcher", "slow").await;
    let snap = get(&b, json!({"childId": child, "waitMs": 20000})).await;
    assert_eq!(snap.state, p::ChildState::Ready, "{snap:#?}");
    assert_eq!(last(&snap).run_id.as_str(), run, "{snap:#?}");
    assert_eq!(snap.waited.reason, p::WaitedReason::Settled, "{snap:#?}");
    a.close().await.expect("close a");
    b.close().await.expect("close b");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_cursor_below_the_retained_history_reports_an_explicit_gap() {
    let calls: Vec<Reply> = (0..12)
        .map(|i| Reply::tool_call(&format!("c{i}"), "ls", r#"{"path":"."}"#))
        .chain(std::iter::once(Reply::text("done")))
        .collect();
    let env = Env::new(calls);
    limits(&env, "event_retention = 16");
    let s = env.broker("broker").await;
    let (child, _) = spawn(&s, &env, "researcher", "look around").await;
    let snap = settled(&s, &child, Duration::from_secs(30)).await;
    assert_eq!(
        last_status(&snap),
        Some(p::TerminalRunStatus::Completed),
        "{snap:#?}"
    );
    let from_start = get(&s, json!({"childId": child, "cursor": 0})).await;
    let oldest = from_start.oldest_cursor;
    assert!(oldest > 0, "{from_start:#?}");
    assert_eq!(
        from_start.gap,
        Some(p::CursorGap {
            requested: 0,
            oldest
        }),
        "{from_start:#?}"
    );
    // The retained 16, after the gap event that reports the pruned stretch in-band.
    let events = &from_start.events;
    assert!(events.len() <= 17, "{from_start:#?}");
    assert_eq!(kind(&events[0]), "gap", "{from_start:#?}");
    assert_eq!(seq(&events[0]), oldest, "{from_start:#?}");
    // Reading from the oldest retained cursor has no gap.
    let from_oldest = get(&s, json!({"childId": child, "cursor": oldest})).await;
    assert_eq!(from_oldest.gap, None, "{from_oldest:#?}");
    s.close().await.expect("close");
}
