//! Per-spawn budgets end to end: the real broker over MCP, real workers, a scripted model.
//! A run that reaches a turn, token or deadline budget asks the child once, without tools,
//! for a handoff summary and ends `budget_exhausted` with it; a budget past its maximum is
//! refused at spawn; `info` shows the defaults and maxima; `get` and `list` show usage.

use std::time::Duration;

use crate::support::chat_request::ChatRequest;
use crate::support::mcp::*;
use serde_json::{Value, json};
use subzero_testkit::mcp_client::McpSession;
use subzero_testkit::{Reply, Step};

const SUMMARY: &str = "Handoff: I read README.md; the demo project is small; nothing remains.";

async fn spawn_with(s: &McpSession, env: &Env, budget: Value) -> (String, String) {
    let out = typed::<p::SpawnOutput>(
        s,
        "subzero_spawn",
        json!({"prompt": "Survey the project", "templateId": "researcher",
               "model": env.model(), "budget": budget}),
    )
    .await;
    (out.child_id.to_string(), out.run_id.to_string())
}

async fn result_text(s: &McpSession, snap: &p::ChildSnapshot) -> String {
    let artifact = last(snap).artifact_id.clone().expect("artifact");
    let chunk = read_output(s, json!({"artifactId": artifact})).await;
    chunk.text.to_string()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_turn_budget_ends_with_the_childs_handoff_summary() {
    let env = Env::new(vec![
        Reply::tool_call("call_1", "read", r#"{"path":"README.md"}"#),
        Reply::tool_call("call_2", "ls", r#"{"path":"."}"#),
        Reply::text(SUMMARY),
    ]);
    let s = env.broker("broker").await;
    let (child, run) = spawn_with(&s, &env, json!({"maxTurns": 2})).await;
    let snap = settled(&s, &child, Duration::from_secs(30)).await;
    assert_eq!(snap.state, p::ChildState::Ready, "{snap:#?}");
    let last_run = last(&snap);
    assert_eq!(last_run.run_id.as_str(), run);
    assert_eq!(
        last_run.status,
        p::TerminalRunStatus::BudgetExhausted,
        "{snap:#?}"
    );
    assert_eq!(
        json!(last_run.budget_reached),
        json!({"budget": "maxTurns", "limit": 2, "reached": 2})
    );
    assert_eq!(last_run.preview.as_str(), SUMMARY);
    assert_eq!(result_text(&s, &snap).await, SUMMARY);
    // Two turns and the handoff, 10 + 5 tokens each as the scripted model reports them.
    assert_eq!(
        json!(last_run.usage),
        json!({"inputTokens": 30, "outputTokens": 15, "turns": 3, "source": "reported",
               // The last turn's prompt (the handoff request is not a turn of the child's).
               "contextTokens": 10})
    );
    assert!(kinds(&snap).contains(&"budget_exhausted"), "{snap:#?}");

    let requests = env.server.requests();
    assert_eq!(requests.len(), 3, "two turns and the handoff");
    let handoff = ChatRequest::of(&requests[2]);
    assert!(
        handoff.tools.is_none(),
        "the handoff offers no tools: {handoff:#?}"
    );
    let notice = handoff.messages.last().expect("a last message");
    assert_eq!(notice.role, "user");
    let notice = notice.content.as_str().expect("notice text");
    assert!(
        notice.contains("maxTurns") && notice.contains("handoff summary"),
        "{notice}"
    );
    assert!(handoff.max_tokens.expect("max_tokens") <= 1024);

    let listed = list(&s, json!({})).await;
    let item = &listed.children[0];
    assert_eq!(
        item.last_run_status,
        Some(p::TerminalRunStatus::BudgetExhausted)
    );
    // The usage is `get`'s to show; a list entry stays short.
    assert!(item.last_run_usage.is_none(), "{item:#?}");
    let snap = snapshot(&s, item.child_id.as_str()).await;
    assert_eq!(snap.last_run.as_ref().map(|r| r.usage.turns), Some(3));

    // The child is ready: a followup continues from the summary.
    s.close().await.expect("close");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_token_budget_stops_before_the_next_tool_and_leaves_no_call_unanswered() {
    // The first turn reports 80 + 30 tokens, past a budget of 100: its tool call is not run.
    let env = Env::new(vec![
        Reply::Sse(vec![
            Step::tool_delta(
                Some(0),
                Some("call_1"),
                Some("read"),
                r#"{"path":"README.md"}"#,
            ),
            Step::finish("tool_calls"),
            Step::usage(80, 30),
            Step::done(),
        ]),
        Reply::text(SUMMARY),
    ]);
    let s = env.broker("broker").await;
    let (child, _) = spawn_with(&s, &env, json!({"tokenBudget": 100})).await;
    let snap = settled(&s, &child, Duration::from_secs(30)).await;
    assert_eq!(
        last_status(&snap),
        Some(p::TerminalRunStatus::BudgetExhausted),
        "{snap:#?}"
    );
    assert_eq!(
        json!(last(&snap).budget_reached),
        json!({"budget": "tokenBudget", "limit": 100, "reached": 110})
    );
    assert_eq!(last(&snap).preview.as_str(), SUMMARY);
    assert!(
        !kinds(&snap).contains(&"tool"),
        "no tool ran past the budget: {snap:#?}"
    );
    let requests = env.server.requests();
    assert_eq!(requests.len(), 2);
    let handoff = ChatRequest::of(&requests[1]);
    let answered = handoff.tool_results();
    assert_eq!(
        answered.len(),
        1,
        "the unrun call is answered: {handoff:#?}"
    );
    assert_eq!(answered[0].tool_call_id.as_deref(), Some("call_1"));
    assert!(
        answered[0]
            .content
            .as_str()
            .is_some_and(|c| c.starts_with("not run")),
        "{handoff:#?}"
    );
    s.close().await.expect("close");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_deadline_cuts_a_hanging_turn_and_still_hands_off() {
    let env = Env::new(vec![
        Reply::Sse(vec![Step::text("Reading the project… "), Step::Hang]),
        Reply::text(SUMMARY),
    ]);
    let s = env.broker("broker").await;
    let (child, _) = spawn_with(&s, &env, json!({"deadlineMs": 1500})).await;
    let snap = settled(&s, &child, Duration::from_secs(30)).await;
    let last_run = last(&snap);
    assert_eq!(
        last_run.status,
        p::TerminalRunStatus::BudgetExhausted,
        "{snap:#?}"
    );
    let reached = last_run.budget_reached.as_ref().expect("budgetReached");
    assert_eq!(reached.budget, p::BudgetName::DeadlineMs);
    assert_eq!(reached.limit.get(), 1500);
    assert!(reached.reached >= 1500);
    assert_eq!(last_run.preview.as_str(), SUMMARY);
    s.close().await.expect("close");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_failed_handoff_still_gives_the_parent_a_result() {
    let env = Env::new(vec![
        Reply::Sse(vec![
            Step::text("The README says it is a demo. "),
            Step::tool_delta(Some(0), Some("call_1"), Some("ls"), "{}"),
            Step::finish("tool_calls"),
            Step::usage(10, 5),
            Step::done(),
        ]),
        Reply::status(503, r#"{"error":{"message":"overloaded"}}"#),
    ]);
    let s = env.broker("broker").await;
    let (child, _) = spawn_with(&s, &env, json!({"maxTurns": 1})).await;
    let snap = settled(&s, &child, Duration::from_secs(30)).await;
    assert_eq!(
        last_status(&snap),
        Some(p::TerminalRunStatus::BudgetExhausted),
        "{snap:#?}"
    );
    let text = result_text(&s, &snap).await;
    assert!(
        text.contains("maxTurns") && text.contains("503") && text.contains("demo"),
        "{text}"
    );
    s.close().await.expect("close");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_budget_past_its_maximum_is_refused_before_anything_exists() {
    let env = Env::new(vec![]);
    std::fs::write(
        env.config(),
        format!(
            "{}\n[budgets.max]\nmax_turns = 5\ntoken_budget = 50000\n",
            std::fs::read_to_string(env.config()).expect("config")
        ),
    )
    .expect("config");
    let s = env.broker("broker").await;
    let info = broker_info(&s).await;
    let (maxima, defaults) = (&info.budgets.maxima, &info.budgets.defaults);
    assert_eq!(
        maxima.max_turns.as_ref().map(|t| t.get()),
        Some(5),
        "{info:#?}"
    );
    assert_eq!(maxima.token_budget.as_ref().map(|t| t.get()), Some(50000));
    assert_eq!(
        defaults.max_turns.as_ref().map(|t| t.get()),
        Some(5),
        "a default left out follows a lowered maximum"
    );
    assert_eq!(
        defaults.token_budget.as_ref().map(|t| t.get()),
        Some(50000),
        "a maximum without a default bounds every run"
    );
    assert!(
        json!(info.worker.protocols)
            .as_array()
            .expect("protocols")
            .contains(&json!("openai-completions"))
    );

    for budget in [json!({"maxTurns": 6}), json!({"tokenBudget": 50001})] {
        let reply = call(
            &s,
            "subzero_spawn",
            json!({"prompt": "p", "templateId": "researcher", "model": env.model(),
                   "budget": budget}),
        )
        .await;
        assert!(reply.is_error, "{}", reply.text);
        assert_eq!(reply.code(), Some("limit_exceeded"), "{}", reply.text);
        let name = budget
            .as_object()
            .expect("object")
            .keys()
            .next()
            .expect("key");
        assert!(reply.text.contains(name.as_str()), "{}", reply.text);
    }
    let listed = list(&s, json!({})).await;
    assert!(listed.children.is_empty(), "nothing was created");
    assert!(env.server.requests().is_empty(), "no model call");
    s.close().await.expect("close");
}

#[test]
fn a_default_past_its_maximum_is_a_config_error() {
    let dir = tempfile::tempdir().expect("temp dir");
    let config = dir.path().join("config.toml");
    std::fs::write(
        &config,
        "[budgets.default]\nmax_turns = 80\n[budgets.max]\nmax_turns = 50\n",
    )
    .expect("config");
    let workspace = dir.path().join("ws");
    std::fs::create_dir(&workspace).expect("workspace");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_subzero"))
        .arg("mcp")
        .arg("--workspace")
        .arg(&workspace)
        .arg("--state-dir")
        .arg(dir.path().join("state"))
        .arg("--config")
        .arg(&config)
        .stdin(std::process::Stdio::null())
        .output()
        .expect("subzero mcp runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "the broker started: {stderr}");
    assert!(
        stderr.contains("[budgets]") && stderr.contains("maxTurns") && stderr.contains("50"),
        "the refusal names the budget and its maximum: {stderr}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_spawns_output_token_budget_is_the_cap_each_request_carries() {
    let env = Env::new(vec![
        Reply::tool_call("call_1", "read", r#"{"path":"README.md"}"#),
        Reply::text("Done."),
    ]);
    let s = env.broker("broker").await;
    let (child, _) = spawn_with(&s, &env, json!({"maxOutputTokens": 321})).await;
    let snap = settled(&s, &child, Duration::from_secs(30)).await;
    assert_eq!(
        last_status(&snap),
        Some(p::TerminalRunStatus::Completed),
        "{snap:#?}"
    );
    let requests = env.server.requests();
    assert_eq!(requests.len(), 2);
    for request in &requests {
        let body = ChatRequest::of(request);
        assert_eq!(body.max_tokens, Some(321), "{body:#?}");
    }
    s.close().await.expect("close");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_spawns_tool_timeout_bounds_each_tool_call_and_the_run_goes_on() {
    let env = Env::new(vec![
        Reply::tool_call("call_1", "bash", r#"{"command":"sleep 20"}"#),
        Reply::text("Done without it."),
    ]);
    let s = env.broker("broker").await;
    let out = typed::<p::SpawnOutput>(
        &s,
        "subzero_spawn",
        json!({"prompt": "Wait", "templateId": "coder", "model": env.model(),
               "budget": {"toolTimeoutMs": 400}}),
    )
    .await;
    let child = out.child_id.as_str().to_owned();
    let snap = settled(&s, &child, Duration::from_secs(30)).await;
    let last_run = last(&snap);
    assert_eq!(
        last_run.status,
        p::TerminalRunStatus::Completed,
        "{snap:#?}"
    );
    assert_eq!(last_run.preview.as_str(), "Done without it.");
    let requests = env.server.requests();
    assert_eq!(requests.len(), 2, "the run went on after the tool");
    let body = ChatRequest::of(&requests[1]);
    let answered = body.tool_results();
    let text = answered[0].content.as_str().expect("tool result");
    assert!(
        text.contains("bash timed out after 400 ms (toolTimeoutMs)"),
        "{text}"
    );
    s.close().await.expect("close");
}
