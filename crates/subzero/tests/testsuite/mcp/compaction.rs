//! A child that outgrows its context window, through the real `subzero mcp` binary and
//! its workers, against a scripted Chat Completions server that refuses every prompt past
//! N tokens (⌈body bytes / 4⌉): the overflow is `context_exhausted` and the child stays
//! `ready`; `compact: true` on a followup compacts it; with the window known the child
//! compacts on its own, reports `compacted` end to end, and a followup and a resume after
//! a broker restart continue from the compacted branch.

use std::time::Duration;

use crate::support::mcp::{Env, err, ok, settle};
use serde_json::{Value, json};
use subzero_testkit::{RecordedRequest, overflow};

const API: &str = "openai-completions";
const WINDOW: u64 = 3_750;
const SUMMARY: &str = "SUMMARY-TOKEN: run one found a lot; run two asks for more.";
const LIMIT: Duration = Duration::from_secs(30);

fn long_answer() -> String {
    format!("ANSWER-ONE {}", "the first run found a lot. ".repeat(300))
}

fn long_prompt() -> String {
    format!("PROMPT-TWO {}", "now look further into it. ".repeat(300))
}

fn last_body(env: &Env) -> String {
    let requests: Vec<RecordedRequest> = env.server.requests();
    requests.last().map(|r| r.body.clone()).unwrap_or_default()
}

async fn followup(
    s: &subzero_testkit::mcp_client::McpSession,
    child: &str,
    message: &str,
    compact: bool,
) {
    let mut args = json!({"childId": child, "mode": "followup", "message": message});
    if compact {
        args["compact"] = json!(true);
    }
    ok(s, "subzero_send", args).await;
}

fn events_of(snap: &Value, kind: &str) -> Vec<Value> {
    snap["events"]
        .as_array()
        .map(|e| e.iter().filter(|e| e["type"] == kind).cloned().collect())
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread")]
async fn an_overflow_ends_the_run_context_exhausted_the_child_stays_ready_and_compact_true_recovers()
 {
    let env = Env::new(vec![
        overflow::unmetered_text(API, &long_answer()),
        overflow::unmetered_text(API, SUMMARY),
        overflow::unmetered_text(API, "answered on the compacted branch"),
    ]);
    env.server.refuse_past(WINDOW, overflow::openai_chat());
    let s = env.broker("broker").await;
    let spawned = ok(
        &s,
        "subzero_spawn",
        json!({"prompt": "read the readme", "templateId": "researcher", "model": env.model(), "compaction": "off"}),
    )
    .await;
    let child = spawned["childId"].as_str().expect("childId").to_owned();
    assert_eq!(
        settle(&s, &child, LIMIT).await["lastRun"]["status"],
        "completed"
    );

    followup(&s, &child, &long_prompt(), false).await;
    let snap = settle(&s, &child, LIMIT).await;
    assert_eq!(snap["state"], "ready", "{snap:#}");
    assert_eq!(snap["lastRun"]["status"], "failed", "{snap:#}");
    assert_eq!(
        snap["lastRun"]["error"]["code"], "context_exhausted",
        "{snap:#}"
    );
    // The context use shown is the refused prompt's; no window was given.
    assert!(
        snap["contextTokens"].as_u64().is_some_and(|t| t > WINDOW),
        "{snap:#}"
    );
    assert!(snap.get("contextWindow").is_none(), "{snap:#}");
    assert_eq!(
        env.server.requests().len(),
        2,
        "off: no summary request, nothing retried"
    );

    // The parent asks: the child compacts, then answers on the new branch.
    followup(&s, &child, "PROMPT-SHORT go on", true).await;
    let snap = ok(&s, "subzero_get", json!({"childId": child, "waitMs": 0})).await;
    let snap = if snap["state"] == "running" {
        settle(&s, &child, LIMIT).await
    } else {
        snap
    };
    assert_eq!(snap["lastRun"]["status"], "completed", "{snap:#}");
    let all = ok(
        &s,
        "subzero_get",
        json!({"childId": child, "eventLimit": 50}),
    )
    .await;
    let compacted = events_of(&all, "compacted");
    assert_eq!(compacted.len(), 1, "{all:#}");
    assert!(
        compacted[0]["branchFrom"].is_string()
            && compacted[0]["tokensBefore"].as_u64() > compacted[0]["tokensAfter"].as_u64()
    );
    let last = last_body(&env);
    assert!(
        last.contains("SUMMARY-TOKEN")
            && last.contains("PROMPT-SHORT")
            && !last.contains("ANSWER-ONE"),
        "{last}"
    );
    s.close().await.expect("close");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_child_with_a_known_window_compacts_on_its_own_and_resumes_compacted_after_a_restart() {
    let env = Env::new(vec![
        overflow::unmetered_text(API, &long_answer()),
        overflow::unmetered_text(API, SUMMARY),
        overflow::unmetered_text(API, "done after compaction"),
        overflow::unmetered_text(API, "third run answered"),
        overflow::unmetered_text(API, "answered after the restart"),
    ]);
    env.server.refuse_past(WINDOW, overflow::openai_chat());
    let mut model = env.model();
    model["contextWindow"] = json!(WINDOW);
    let s = env.broker("broker").await;
    let spawned = ok(
        &s,
        "subzero_spawn",
        json!({"prompt": "read the readme", "templateId": "researcher", "model": model}),
    )
    .await;
    let child = spawned["childId"].as_str().expect("childId").to_owned();
    assert_eq!(
        settle(&s, &child, LIMIT).await["lastRun"]["status"],
        "completed"
    );

    followup(&s, &child, &long_prompt(), false).await;
    let snap = settle(&s, &child, LIMIT).await;
    assert_eq!(snap["lastRun"]["status"], "completed", "{snap:#}");
    let all = ok(
        &s,
        "subzero_get",
        json!({"childId": child, "eventLimit": 50}),
    )
    .await;
    let compacted = events_of(&all, "compacted");
    assert_eq!(compacted.len(), 1, "{all:#}");
    let event = &compacted[0];
    assert!(
        event["tokensBefore"].as_u64() > event["tokensAfter"].as_u64(),
        "{event}"
    );
    assert!(
        event["runId"].is_string() && event["branchFrom"].is_string(),
        "{event}"
    );
    // get and list show the compacted context use against the window.
    assert_eq!(snap["contextWindow"], WINDOW, "{snap:#}");
    let used = snap["contextTokens"].as_u64().expect("contextTokens");
    assert!(used > 0 && used < WINDOW * 80 / 100, "{snap:#}");
    let listed = ok(&s, "subzero_list", json!({})).await;
    let item = &listed["children"][0];
    assert_eq!(item["contextWindow"], WINDOW, "{listed:#}");
    assert_eq!(item["contextTokens"], used, "{listed:#}");
    assert_eq!(
        env.server.requests().len(),
        3,
        "run 1, the summary, the compacted turn: no refusal"
    );

    followup(&s, &child, "and then?", false).await;
    assert_eq!(
        settle(&s, &child, LIMIT).await["lastRun"]["status"],
        "completed"
    );
    let third = last_body(&env);
    assert!(
        third.contains("SUMMARY-TOKEN") && !third.contains("ANSWER-ONE"),
        "{third}"
    );
    s.close().await.expect("close");

    // A new broker resumes from the checkpoint, which names the compacted branch's leaf.
    let s = env.broker("broker-2").await;
    ok(
        &s,
        "subzero_resume",
        json!({"childId": child, "model": model, "message": "after the restart"}),
    )
    .await;
    let snap = settle(&s, &child, LIMIT).await;
    assert_eq!(snap["lastRun"]["status"], "completed", "{snap:#}");
    let resumed = last_body(&env);
    assert!(
        resumed.contains("SUMMARY-TOKEN")
            && resumed.contains("after the restart")
            && !resumed.contains("ANSWER-ONE"),
        "{resumed}"
    );
    s.close().await.expect("close");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_configured_window_is_the_default_a_spawn_overrides_it_and_info_documents_both() {
    let env = Env::new(vec![
        overflow::unmetered_text(API, "a short answer"),
        overflow::unmetered_text(API, "another short answer"),
    ]);
    let mut config = std::fs::read_to_string(env.config()).expect("config");
    config.push_str("\n[limits]\ncontext_window = 4096\n");
    std::fs::write(env.config(), config).expect("config");
    let s = env.broker("broker").await;
    let info = ok(&s, "subzero_info", json!({})).await;
    assert_eq!(info["limits"]["compactAtPercent"], 80, "{info:#}");
    assert_eq!(info["limits"]["contextWindow"], 4096, "{info:#}");

    let spawned = ok(
        &s,
        "subzero_spawn",
        json!({"prompt": "hello", "templateId": "researcher", "model": env.model()}),
    )
    .await;
    let child = spawned["childId"].as_str().expect("childId").to_owned();
    let snap = settle(&s, &child, LIMIT).await;
    assert_eq!(snap["contextWindow"], 4096, "{snap:#}");
    assert!(
        snap["contextTokens"].as_u64().is_some_and(|t| t > 0),
        "{snap:#}"
    );

    let mut model = env.model();
    model["contextWindow"] = json!(8192);
    let spawned = ok(
        &s,
        "subzero_spawn",
        json!({"prompt": "hello", "templateId": "researcher", "model": model}),
    )
    .await;
    let other = spawned["childId"].as_str().expect("childId").to_owned();
    assert_eq!(settle(&s, &other, LIMIT).await["contextWindow"], 8192);

    // `compact` belongs to a followup, and to a resume that starts a run.
    let steer = json!({"childId": other, "mode": "steer", "message": "x", "compact": true});
    assert_eq!(err(&s, "subzero_send", steer).await, "invalid_request");
    let resume = json!({"childId": other, "model": model, "compact": true});
    assert_eq!(err(&s, "subzero_resume", resume).await, "invalid_request");
    s.close().await.expect("close");
}
