//! The real-model tier with a small window: one child on a real llama.cpp `llama-server`
//! whose slot holds 2,048 tokens, through the real `subzero mcp`, taking followup after
//! followup past that window. It must never die of it: every run ends `completed` (or in a
//! budget handoff), never `context_exhausted` or `model_request_failed`, and the child
//! compacts on its way (`compacted` events, each with fewer tokens after than before).
//! What the model says is not asserted beyond that (a real model is not deterministic);
//! whether the fact given in the first prompt survived the summaries is printed.

use std::time::Duration;

use crate::support;
use crate::support::llama_cpp::{Tier, Timed};
use crate::support::mcp::ok;
use crate::support::worker::{Compacted, Shown, Snapshot, edit_model, snapshot_of};
use serde_json::json;
use subzero_protocol::{ChildEvent, ChildState, ContextWindow, SpawnOutput, TerminalRunStatus};

/// The server's context, and the window the child is told.
const CONTEXT: u32 = 2048;
/// Followups after the first run: the bar, 20 without dying (each one past the window costs
/// the suite seconds of a real model, so no more than the bar).
const FOLLOWUPS: usize = 20;
/// Output-token cap of every run: keeps each followup to a second or two on 2 cores. The
/// answers are asked short: generating is what costs (a followup's prompt is mostly the
/// server's cached prefix), and twenty short exchanges still pass the window.
const MAX_OUTPUT_TOKENS: u64 = 96;
const STEP_LIMIT: Duration = Duration::from_secs(240);

const TOPICS: [&str; 12] = [
    "a linked list",
    "a hash map",
    "a binary search tree",
    "a priority queue",
    "a mutex",
    "a TCP handshake",
    "a B-tree",
    "garbage collection",
    "a bloom filter",
    "copy-on-write",
    "a trie",
    "consistent hashing",
];

#[tokio::test(flavor = "multi_thread")]
async fn a_child_takes_followups_past_a_small_real_window_by_compacting() {
    let Some(tier) = Tier::start_with_context(CONTEXT) else {
        return;
    };
    let s = tier.broker("broker").await;
    let window = ContextWindow::from(i64::from(CONTEXT));
    let model = edit_model(&tier.model(), |m| m.context_window = Some(window));
    let spawned: Shown<SpawnOutput> = Shown::new(
        &ok(
            &s,
            "subzero_spawn",
            json!({
                "prompt": "Remember this codename for later: BLUEFINCH. Do not use any tool. In two sentences, what is a stack?",
                "templateId": "researcher",
                "model": model,
                "budget": {"maxOutputTokens": MAX_OUTPUT_TOKENS, "maxTurns": 3},
            }),
        )
        .await,
    );
    let child = spawned.child_id.to_string();
    let mut cursor = 0u64;
    let mut compactions = Vec::new();
    let first = Timed::start("first run");
    settle(&tier, &s, &child, &mut cursor, &mut compactions).await;
    first.done();
    for (i, topic) in TOPICS.iter().cycle().enumerate().take(FOLLOWUPS) {
        let step = Timed::start("followup");
        let message = format!(
            "Question {}: do not use any tool. In two sentences, what is {topic} and when is it used?",
            i + 1
        );
        ok(
            &s,
            "subzero_send",
            json!({"childId": child, "mode": "followup", "message": message}),
        )
        .await;
        let snap = settle(&tier, &s, &child, &mut cursor, &mut compactions).await;
        step.done();
        let known = |n: Option<String>| n.unwrap_or_else(|| "null".to_owned());
        eprintln!(
            "   context {}/{} tokens, {} compactions so far",
            known(snap.context_tokens.map(|t| t.to_string())),
            known(snap.context_window.as_ref().map(|w| w.to_string())),
            compactions.len()
        );
    }
    ok(
        &s,
        "subzero_send",
        json!({"childId": child, "mode": "followup",
               "message": "Without using any tool: what codename did I ask you to remember at the start?"}),
    )
    .await;
    let snap = settle(&tier, &s, &child, &mut cursor, &mut compactions).await;
    let remembered = snap.last().preview.to_lowercase().contains("bluefinch");
    eprintln!(
        "{} compactions over {} runs; the codename {} the summaries",
        compactions.len(),
        FOLLOWUPS + 2,
        if remembered {
            "survived"
        } else {
            "did not survive"
        }
    );
    assert!(
        !compactions.is_empty(),
        "{} followups past a {CONTEXT}-token window and no compaction: {}",
        FOLLOWUPS,
        tier.diagnostics()
    );
    // The branches left behind are kept whole: the first prompt is still in the file, and
    // it holds one summary per compaction.
    let transcripts = std::fs::read_dir(tier.dir.path().join("state/transcripts"))
        .expect("transcripts")
        .flatten()
        .map(|e| std::fs::read_to_string(e.path()).expect("transcript"))
        .collect::<Vec<_>>();
    assert_eq!(transcripts.len(), 1, "one child, one transcript");
    assert!(transcripts[0].contains("Remember this codename for later: BLUEFINCH"));
    assert_eq!(
        transcripts[0].matches("\"type\":\"summary\"").count(),
        compactions.len(),
        "one summary entry per compaction"
    );
    for event in &compactions {
        let (before, after) = (event.tokens_before, event.tokens_after);
        assert!(after < before && after < u64::from(CONTEXT), "{event:?}");
    }
    s.close().await.expect("close");
}

/// Waits for the child's run to end, collects its `compacted` events, and checks that the
/// run did not die of its context.
async fn settle(
    tier: &Tier,
    s: &subzero_testkit::mcp_client::McpSession,
    child: &str,
    cursor: &mut u64,
    compactions: &mut Vec<Compacted>,
) -> Snapshot {
    let snap = snapshot_of(&support::mcp::settle(s, child, STEP_LIMIT).await);
    assert_ne!(
        snap.state,
        ChildState::Running,
        "still running: {}",
        tier.diagnostics()
    );
    loop {
        let page = snapshot_of(
            &ok(
                s,
                "subzero_get",
                json!({"childId": child, "cursor": *cursor, "eventLimit": 50}),
            )
            .await,
        );
        compactions.extend(page.events.iter().filter_map(|e| match e {
            ChildEvent::Compacted {
                branch_from,
                tokens_before,
                tokens_after,
                ..
            } => Some(Compacted {
                branch_from: branch_from.to_string(),
                tokens_before: *tokens_before,
                tokens_after: *tokens_after,
            }),
            _ => None,
        }));
        let next = page.next_cursor;
        if next == *cursor || page.events.is_empty() {
            break;
        }
        *cursor = next;
    }
    let status = snap.last().status;
    assert!(
        matches!(
            status,
            TerminalRunStatus::Completed | TerminalRunStatus::BudgetExhausted
        ),
        "a run died: {snap:#}\n{}",
        tier.diagnostics()
    );
    snap
}
