//! Sequential coder work is never refused by mistake: the moment `subzero_get` shows a
//! coder run completed and the child `ready`, the writer slot is free — a followup, a new
//! coder spawn in the same broker, and one in another broker all start at once
//! (0 `workspace_busy` in 200 tries each).

use std::time::Duration;

use crate::support::faults::Reaper;
use crate::support::mcp::*;
use serde_json::json;
use subzero_testkit::Reply;
use subzero_testkit::mcp_client::McpSession;

const TRIES: usize = 200;

/// Waits (long-polling) until `child` is no longer running; the snapshot then.
async fn until_ready(s: &McpSession, child: &str) -> p::ChildSnapshot {
    let snap = settled(s, child, Duration::from_secs(30)).await;
    assert_eq!(snap.state, p::ChildState::Ready, "{snap:#?}");
    assert_eq!(
        last_status(&snap),
        Some(p::TerminalRunStatus::Completed),
        "{snap:#?}"
    );
    snap
}

fn answers(n: usize) -> Vec<Reply> {
    (0..n).map(|i| Reply::text(&format!("done {i}"))).collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_followup_sent_the_moment_a_coder_is_ready_always_starts() {
    let env = Env::new(answers(TRIES + 1));
    let mut reaper = Reaper::new(env.dir.path());
    let s = env.broker("broker").await;
    reaper.broker(s.pid());
    let (child, _) = spawn(&s, &env, "coder", "first").await;
    let mut refused = Vec::new();
    for i in 0..TRIES {
        until_ready(&s, &child).await;
        let reply = call(
            &s,
            "subzero_send",
            json!({"childId": child, "mode": "followup", "message": format!("next {i}")}),
        )
        .await;
        if reply.is_error {
            refused.push(reply.text.clone());
            assert_eq!(reply.code(), Some("workspace_busy"), "{}", reply.text);
            continue;
        }
        let sent: p::SendOutput = parse("subzero_send", &reply.structured);
        assert_eq!(
            sent.delivery,
            p::SendOutputDelivery::Started,
            "{}",
            reply.text
        );
    }
    assert!(
        refused.is_empty(),
        "{} of {TRIES} followups were refused: {:?}",
        refused.len(),
        refused.first()
    );
    until_ready(&s, &child).await;
    s.close().await.expect("close");
}

/// Runs `TRIES` rounds: wait until the last coder child is ready in the broker that owns
/// it, then spawn the next coder at once in the next broker of `brokers` (round robin).
/// Returns how many spawns were refused (`workspace_busy`, nothing else).
async fn spawn_each_coder_the_moment_the_last_is_ready(
    env: &Env,
    brokers: &[&McpSession],
) -> usize {
    let (mut child, _) = spawn(brokers[0], env, "coder", "first").await;
    let mut owner = 0;
    let mut refused = 0;
    for i in 0..TRIES {
        until_ready(brokers[owner], &child).await;
        let next = (owner + 1) % brokers.len();
        let reply = call(
            brokers[next],
            "subzero_spawn",
            json!({"prompt": format!("task {i}"), "templateId": "coder", "model": env.model()}),
        )
        .await;
        if reply.is_error {
            assert_eq!(reply.code(), Some("workspace_busy"), "{}", reply.text);
            refused += 1;
            continue;
        }
        child = Some(
            parse::<p::SpawnOutput>("subzero_spawn", &reply.structured)
                .child_id
                .to_string(),
        )
        .as_deref()
        .expect("childId")
        .to_owned();
        owner = next;
    }
    until_ready(brokers[owner], &child).await;
    refused
}

#[tokio::test(flavor = "multi_thread")]
async fn a_coder_spawned_the_moment_the_previous_one_is_ready_always_starts() {
    let env = Env::new(answers(TRIES + 1));
    let mut reaper = Reaper::new(env.dir.path());
    let s = env.broker("broker").await;
    reaper.broker(s.pid());
    let refused = spawn_each_coder_the_moment_the_last_is_ready(&env, &[&s]).await;
    assert_eq!(refused, 0, "{refused} of {TRIES} spawns were refused");
    s.close().await.expect("close");
}

#[tokio::test(flavor = "multi_thread")]
async fn another_broker_spawns_a_coder_the_moment_one_is_ready() {
    let env = Env::new(answers(2 * TRIES + 2));
    let mut reaper = Reaper::new(env.dir.path());
    let a = env.broker("broker-a").await;
    reaper.broker(a.pid());
    let b = env.broker("broker-b").await;
    reaper.broker(b.pid());
    let refused = spawn_each_coder_the_moment_the_last_is_ready(&env, &[&a, &b]).await;
    assert_eq!(
        refused, 0,
        "{refused} of {TRIES} spawns in the other broker were refused"
    );
    a.close().await.expect("close");
    b.close().await.expect("close");
}
