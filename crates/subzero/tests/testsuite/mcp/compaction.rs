//! A child that outgrows its context window, through the real `subzero mcp` binary and
//! its workers, against a scripted Chat Completions server that refuses every prompt past
//! N tokens (⌈body bytes / 4⌉): the overflow is `context_exhausted` and the child stays
//! `ready`; `compact: true` on a followup compacts it; with the window known the child
//! compacts on its own, reports `compacted` end to end, and a followup and a resume after
//! a broker restart continue from the compacted branch.

use std::time::Duration;

use crate::support::mcp::*;
use serde_json::json;
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
    send(s, args).await;
}

/// A context window as a number of tokens.
fn window_of(window: Option<&p::ContextWindow>) -> Option<u64> {
    window.map(|w| u64::try_from(w.0).expect("a positive window"))
}

/// The `compacted` events of a snapshot: (tokensBefore, tokensAfter) of each.
fn compactions(snap: &p::ChildSnapshot) -> Vec<(u64, u64)> {
    snap.events
        .iter()
        .filter_map(|e| match e {
            p::ChildEvent::Compacted {
                tokens_before,
                tokens_after,
                ..
            } => Some((*tokens_before, *tokens_after)),
            _ => None,
        })
        .collect()
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
    let spawned = typed::<p::SpawnOutput>(&s, "subzero_spawn",
        json!({"prompt": "read the readme", "templateId": "researcher", "model": env.model(), "compaction": "off"}),
    )
    .await;
    let child = spawned.child_id.as_str().to_owned();
    assert_eq!(
        last_status(&settled(&s, &child, LIMIT).await),
        Some(p::TerminalRunStatus::Completed)
    );

    followup(&s, &child, &long_prompt(), false).await;
    let snap = settled(&s, &child, LIMIT).await;
    assert_eq!(snap.state, p::ChildState::Ready, "{snap:#?}");
    assert_eq!(
        last_status(&snap),
        Some(p::TerminalRunStatus::Failed),
        "{snap:#?}"
    );
    assert_eq!(
        last(&snap).error.as_ref().map(|e| e.code),
        Some(p::ErrorCode::ContextExhausted),
        "{snap:#?}"
    );
    // The context use shown is the refused prompt's; no window was given.
    assert!(snap.context_tokens.is_some_and(|t| t > WINDOW), "{snap:#?}");
    assert!(snap.context_window.is_none(), "{snap:#?}");
    assert_eq!(
        env.server.requests().len(),
        2,
        "off: no summary request, nothing retried"
    );

    // The parent asks: the child compacts, then answers on the new branch.
    followup(&s, &child, "PROMPT-SHORT go on", true).await;
    let snap = get(&s, json!({"childId": child, "waitMs": 0})).await;
    let snap = if snap.state == p::ChildState::Running {
        settled(&s, &child, LIMIT).await
    } else {
        snap
    };
    assert_eq!(
        last_status(&snap),
        Some(p::TerminalRunStatus::Completed),
        "{snap:#?}"
    );
    let all = get(&s, json!({"childId": child, "eventLimit": 50})).await;
    let compacted = compactions(&all);
    assert_eq!(compacted.len(), 1, "{all:#?}");
    assert!(compacted[0].0 > compacted[0].1, "{all:#?}");
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
    let spawned = typed::<p::SpawnOutput>(
        &s,
        "subzero_spawn",
        json!({"prompt": "read the readme", "templateId": "researcher", "model": model}),
    )
    .await;
    let child = spawned.child_id.as_str().to_owned();
    assert_eq!(
        last_status(&settled(&s, &child, LIMIT).await),
        Some(p::TerminalRunStatus::Completed)
    );

    followup(&s, &child, &long_prompt(), false).await;
    let snap = settled(&s, &child, LIMIT).await;
    assert_eq!(
        last_status(&snap),
        Some(p::TerminalRunStatus::Completed),
        "{snap:#?}"
    );
    let all = get(&s, json!({"childId": child, "eventLimit": 50})).await;
    let compacted = compactions(&all);
    assert_eq!(compacted.len(), 1, "{all:#?}");
    let (before, after) = compacted[0];
    assert!(before > after, "{all:#?}");
    // get shows the compacted context use against the window; a list entry leaves it to get.
    assert_eq!(
        window_of(snap.context_window.as_ref()),
        Some(WINDOW),
        "{snap:#?}"
    );
    let used = snap.context_tokens.expect("contextTokens");
    assert!(used > 0 && used < WINDOW * 80 / 100, "{snap:#?}");
    let listed = list(&s, json!({})).await;
    let item = &listed.children[0];
    assert!(
        item.context_window.is_none() && item.context_tokens.is_none(),
        "{listed:#?}"
    );
    assert_eq!(
        env.server.requests().len(),
        3,
        "run 1, the summary, the compacted turn: no refusal"
    );

    followup(&s, &child, "and then?", false).await;
    assert_eq!(
        last_status(&settled(&s, &child, LIMIT).await),
        Some(p::TerminalRunStatus::Completed)
    );
    let third = last_body(&env);
    assert!(
        third.contains("SUMMARY-TOKEN") && !third.contains("ANSWER-ONE"),
        "{third}"
    );
    s.close().await.expect("close");

    // A new broker resumes from the checkpoint, which names the compacted branch's leaf.
    let s = env.broker("broker-2").await;
    resume(
        &s,
        json!({"childId": child, "model": model, "message": "after the restart"}),
    )
    .await;
    let snap = settled(&s, &child, LIMIT).await;
    assert_eq!(
        last_status(&snap),
        Some(p::TerminalRunStatus::Completed),
        "{snap:#?}"
    );
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
    let info = broker_info(&s).await;
    assert_eq!(
        info.limits.compact_at_percent.as_ref().map(|p| p.0.get()),
        Some(80),
        "{info:#?}"
    );
    assert_eq!(
        window_of(info.limits.context_window.as_ref()),
        Some(4096),
        "{info:#?}"
    );

    let spawned = typed::<p::SpawnOutput>(
        &s,
        "subzero_spawn",
        json!({"prompt": "hello", "templateId": "researcher", "model": env.model()}),
    )
    .await;
    let child = spawned.child_id.as_str().to_owned();
    let snap = settled(&s, &child, LIMIT).await;
    assert_eq!(
        window_of(snap.context_window.as_ref()),
        Some(4096),
        "{snap:#?}"
    );
    assert!(snap.context_tokens.is_some_and(|t| t > 0), "{snap:#?}");

    let mut model = env.model();
    model["contextWindow"] = json!(8192);
    let spawned = typed::<p::SpawnOutput>(
        &s,
        "subzero_spawn",
        json!({"prompt": "hello", "templateId": "researcher", "model": model}),
    )
    .await;
    let other = spawned.child_id.as_str().to_owned();
    assert_eq!(
        window_of(settled(&s, &other, LIMIT).await.context_window.as_ref()),
        Some(8192)
    );

    // `compact` belongs to a followup, and to a resume that starts a run.
    let steer = json!({"childId": other, "mode": "steer", "message": "x", "compact": true});
    assert_eq!(err(&s, "subzero_send", steer).await, "invalid_request");
    let resume = json!({"childId": other, "model": model, "compact": true});
    assert_eq!(err(&s, "subzero_resume", resume).await, "invalid_request");
    s.close().await.expect("close");
}
