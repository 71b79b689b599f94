//! One behaviour per case (docs/decisions.md, "One behaviour per case"): the cases where
//! the live server, the docs, the fixtures and the traces used to disagree, on the real
//! binary over MCP.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use crate::support::live::*;
use serde_json::{Value, json};
use subzero_testkit::Reply;

const PATIENCE: Duration = Duration::from_secs(30);

async fn spawn(
    s: &subzero_testkit::mcp_client::McpSession,
    env: &LiveEnv,
    prompt: &str,
) -> Result<Value, String> {
    outcome(
        s,
        "subzero_spawn",
        json!({"prompt": prompt, "templateId": "researcher", "model": env.model()}),
    )
    .await
}

/// Trace 029's rules on the live event log: retention prunes, a pruned cursor reports
/// the gap in the `gap` field and as the first event, the oldest cursor reads without a
/// gap, the last seq reads nothing, and a cursor past it is refused.
#[tokio::test(flavor = "multi_thread")]
async fn an_event_log_past_its_retention_reports_the_gap_in_band() {
    let mut env = LiveEnv::new();
    env.configure("[limits]\nevent_retention = 16\n");
    let s = env.start().await.expect("broker starts");
    let child = spawn(&s, &env, "look around").await.unwrap()["childId"]
        .as_str()
        .unwrap()
        .to_owned();
    for i in 0..12 {
        assert!(env.gate.answer(
            &Reply::tool_call(&format!("c{i}"), "ls", r#"{"path":"."}"#),
            PATIENCE
        ));
        assert!(env.gate.wait_bodies(i + 2, PATIENCE));
    }
    assert!(env.gate.answer(&Reply::text("done"), PATIENCE));
    until(&s, &child, PATIENCE, |snap| snap["state"] == "ready").await;

    let from_start = ok(
        &s,
        "subzero_get",
        json!({"childId": child, "cursor": 0, "eventLimit": 5}),
    )
    .await;
    let oldest = from_start["oldestCursor"].as_u64().unwrap();
    assert!(oldest > 0, "nothing was pruned: {from_start:#}");
    assert_eq!(from_start["gap"], json!({"requested": 0, "oldest": oldest}));
    let events = from_start["events"].as_array().unwrap();
    assert_eq!(events.len(), 5, "the gap event takes a place of the batch");
    assert_eq!(events[0]["type"], "gap", "{from_start:#}");
    assert_eq!(events[0]["seq"], oldest);
    assert_eq!(events[0]["requested"], 0);
    assert_eq!(events[0]["oldest"], oldest);
    assert_eq!(
        events[1]["seq"],
        oldest + 1,
        "reading goes on at the oldest retained event"
    );
    assert_eq!(from_start["nextCursor"], events[4]["seq"]);

    let from_oldest = ok(
        &s,
        "subzero_get",
        json!({"childId": child, "cursor": oldest, "eventLimit": 50}),
    )
    .await;
    assert_eq!(from_oldest["gap"], Value::Null);
    let retained = from_oldest["events"].as_array().unwrap();
    assert!(retained.iter().all(|e| e["type"] != "gap"));
    assert_eq!(retained.len(), 16, "event_retention = 16 keeps 16");
    let seqs: Vec<u64> = retained
        .iter()
        .map(|e| e["seq"].as_u64().unwrap())
        .collect();
    assert!(seqs.windows(2).all(|w| w[1] == w[0] + 1), "{seqs:?}");
    let last = *seqs.last().unwrap();
    assert_eq!(from_oldest["nextCursor"], last);

    let at_the_end = ok(&s, "subzero_get", json!({"childId": child, "cursor": last})).await;
    assert_eq!(at_the_end["events"], json!([]));
    assert_eq!(at_the_end["gap"], Value::Null);
    assert_eq!(at_the_end["nextCursor"], last);

    let future = call(
        &s,
        "subzero_get",
        json!({"childId": child, "cursor": last + 1}),
    )
    .await;
    assert_eq!(future.code(), Some("invalid_request"), "{}", future.text);
    assert_eq!(future.structured["details"]["field"], "cursor");
    assert!(
        future.text.contains(&format!("seq {last}")),
        "{}",
        future.text
    );
    s.close().await.expect("close");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_configured_prompt_limit_decides_in_bytes_with_limit_exceeded() {
    let mut env = LiveEnv::new();
    // The default: 65,536 bytes, whatever the characters.
    let s = env.start().await.expect("broker starts");
    assert_eq!(
        spawn(&s, &env, &"x".repeat(65_537)).await.unwrap_err(),
        "limit_exceeded"
    );
    assert_eq!(
        spawn(&s, &env, &"é".repeat(32_769)).await.unwrap_err(),
        "limit_exceeded"
    );
    s.close().await.expect("close");

    env.configure("[limits]\nprompt_bytes = 200000\n");
    let s = env.start().await.expect("broker starts");
    let info = ok(&s, "subzero_info", json!({})).await;
    assert_eq!(info["limits"]["promptBytes"], 200_000);
    let long = spawn(&s, &env, &"x".repeat(150_000))
        .await
        .expect("a prompt within the configured limit");
    assert!(
        env.gate.wait_held(PATIENCE),
        "the long prompt never reached the model"
    );
    let sent = env.gate.bodies().pop().unwrap().to_string();
    assert!(
        sent.contains(&"x".repeat(150_000)),
        "the prompt reached the model whole"
    );
    let over = call(
        &s,
        "subzero_spawn",
        json!({"prompt": "x".repeat(200_001), "templateId": "researcher", "model": env.model()}),
    )
    .await;
    assert_eq!(over.code(), Some("limit_exceeded"), "{}", over.text);
    assert!(
        over.text.contains("prompt_bytes") && over.text.contains("200000"),
        "{}",
        over.text
    );
    ok(
        &s,
        "subzero_stop",
        json!({"childId": long["childId"], "expectedRunId": long["runId"], "waitMs": 10000}),
    )
    .await;
    s.close().await.expect("close");
}

#[tokio::test(flavor = "multi_thread")]
async fn templates_the_config_cannot_grant_are_left_out_and_refused_by_name() {
    let mut env = LiveEnv::new();
    env.configure(&format!(
        "[templates.fetcher]\ndescription = \"Fetches\"\ninstructions = \"x\"\ntools = [\"read\", \"web_fetch\"]\n\n[templates.long]\ndescription = \"Long\"\ninstructions = \"{}\"\ntools = [\"read\"]\n",
        "x".repeat(65_537)
    ));
    let s = env
        .start()
        .await
        .expect("the broker starts and serves the rest");
    let info = ok(&s, "subzero_info", json!({})).await;
    let problems = info["configProblems"].to_string();
    assert!(
        problems.contains("templates.fetcher.tools[1]") && problems.contains("web_fetch"),
        "the problem names the template's key and the tool: {problems}"
    );
    for (template, code, says) in [
        ("fetcher", "invalid_request", "web_fetch"),
        ("long", "limit_exceeded", "instructions_bytes"),
    ] {
        let refused = call(
            &s,
            "subzero_spawn",
            json!({"prompt": "x", "templateId": template, "model": env.model()}),
        )
        .await;
        assert_eq!(refused.code(), Some(code), "{}", refused.text);
        assert!(
            refused.text.contains(&format!("`{template}`")) && refused.text.contains(says),
            "{}",
            refused.text
        );
    }
    s.close().await.expect("close");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_stop_after_the_run_ended_is_not_running_and_a_stop_of_an_unknown_run_stale() {
    let mut env = LiveEnv::new();
    let s = env.start().await.expect("broker starts");
    let spawned = spawn(&s, &env, "one").await.unwrap();
    let child = spawned["childId"].as_str().unwrap();
    assert!(env.gate.answer(&Reply::text("done"), PATIENCE));
    until(&s, child, PATIENCE, |snap| snap["state"] == "ready").await;
    let ended = call(
        &s,
        "subzero_stop",
        json!({"childId": child, "expectedRunId": spawned["runId"]}),
    )
    .await;
    assert_eq!(ended.code(), Some("not_running"), "{}", ended.text);
    assert!(ended.text.contains("subzero_get"), "{}", ended.text);
    let unknown = call(
        &s,
        "subzero_stop",
        json!({"childId": child, "expectedRunId": subzero_core::RunId::generate().to_string()}),
    )
    .await;
    assert_eq!(unknown.code(), Some("stale_run"), "{}", unknown.text);
    s.close().await.expect("close");
}
