//! Budgets that bound what they promise (issue 23, items 3–5), end to end: the real broker
//! over MCP, real workers, a scripted Chat Completions model on loopback.
//! - The handoff summary is bounded in bytes (16 KiB, cut and marked), and its stream is no
//!   longer read once the cap is reached.
//! - `tokenBudget` holds on an endpoint that never reports usage: the worker estimates
//!   (bytes sent + received, / 4, rounded up) and says so in `lastRun.usage.source`.
//! - A tool call past `toolTimeoutMs` is a tool error (its process tree killed, an MCP
//!   request cancelled) and the run goes on; a text answer cut at `maxOutputTokens` is kept
//!   and marked `lastRun.cut`.
//!
//! Protocol-level twins (Responses, Messages) are in `worker_protocol_*.rs`.

use std::time::{Duration, Instant};

use crate::support::fake_mcp::fake_server;

use crate::support::chat_request::ChatRequest;
use crate::support::mcp::*;
use serde_json::{Value, json};
use subzero_testkit::mcp_client::McpSession;
use subzero_testkit::{Reply, Step};

/// The handoff summary's byte cap and the line that marks a cut one.
const CAP: usize = 16 * 1024;
const MARKER: &str = "\n[… handoff summary cut at 16384 bytes]";

async fn spawn_with(s: &McpSession, env: &Env, template: &str, budget: Value) -> (String, String) {
    let out = typed::<p::SpawnOutput>(
        s,
        "subzero_spawn",
        json!({"prompt": "Survey the project", "templateId": template,
               "model": env.model(), "budget": budget}),
    )
    .await;
    (out.child_id.to_string(), out.run_id.to_string())
}

/// The whole result of the last run and its `totalBytes`.
async fn result(s: &McpSession, snap: &p::ChildSnapshot) -> (String, u64) {
    let artifact = last(snap).artifact_id.clone().expect("artifact");
    let mut text = String::new();
    let mut offset = 0u64;
    loop {
        let chunk = read_output(s, json!({"artifactId": artifact, "offset": offset})).await;
        text.push_str(chunk.text.as_str());
        offset = chunk.next_offset;
        if chunk.eof {
            return (text, chunk.total_bytes);
        }
    }
}

/// A 1000-byte text delta, `times` times: about 1.1 MB of stream per 1,000.
fn flood(times: u64) -> Step {
    let Step::Data(payload) = Step::text(&"x".repeat(1000)) else {
        unreachable!("Step::text is one data event")
    };
    Step::repeat_data(&payload, times)
}

/// The tool messages of a recorded Chat Completions request.
fn tool_messages(body: &ChatRequest) -> Vec<String> {
    body.tool_results()
        .into_iter()
        .map(|m| m.text().to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_handoff_that_ignores_its_token_cap_is_cut_at_16_kib_and_marked() {
    // The model ignores the 1,024-token cap of the handoff and streams 3 MB.
    let mut handoff = vec![Step::text("Handoff: ")];
    handoff.extend([
        flood(2700),
        Step::finish("stop"),
        Step::usage(10, 5),
        Step::done(),
    ]);
    let env = Env::new(vec![
        Reply::tool_call("call_1", "ls", r#"{"path":"."}"#),
        Reply::Sse(handoff),
    ]);
    let s = env.broker("broker").await;
    let (child, _) = spawn_with(&s, &env, "researcher", json!({"maxTurns": 1})).await;
    let snap = settled(&s, &child, Duration::from_secs(30)).await;
    let last_run = last(&snap);
    assert_eq!(
        last_run.status,
        p::TerminalRunStatus::BudgetExhausted,
        "{snap:#?}"
    );
    let (text, total) = result(&s, &snap).await;
    assert!(
        total <= (CAP + MARKER.len()) as u64,
        "the summary passed its byte cap: {total} bytes"
    );
    assert_eq!(total, text.len() as u64);
    assert!(text.starts_with("Handoff: xxxx"), "{}", &text[..64]);
    assert!(text.ends_with(MARKER), "{}", &text[text.len() - 80..]);
    assert_eq!(snap.state, p::ChildState::Ready);
    s.close().await.expect("close");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_handoff_stream_is_not_read_past_the_cap() {
    // 3 MB and then nothing, never an end: a worker that read to the end would wait for the
    // handoff's 60 s timeout. It stops at 16 KiB instead.
    let env = Env::new(vec![
        Reply::tool_call("call_1", "ls", r#"{"path":"."}"#),
        Reply::Sse(vec![Step::text("Handoff: "), flood(2700), Step::Hang]),
    ]);
    let s = env.broker("broker").await;
    let started = Instant::now();
    let (child, _) = spawn_with(&s, &env, "researcher", json!({"maxTurns": 1})).await;
    let snap = settled(&s, &child, Duration::from_secs(30)).await;
    assert_eq!(
        last_status(&snap),
        Some(p::TerminalRunStatus::BudgetExhausted),
        "{snap:#?}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "took {:?}",
        started.elapsed()
    );
    let (text, total) = result(&s, &snap).await;
    assert_eq!(total, (CAP + MARKER.len()) as u64);
    assert!(text.ends_with(MARKER));
    // The first turn reported its usage, the stopped handoff could not: estimated.
    assert_eq!(
        last(&snap).usage.source,
        p::UsageSource::Estimated,
        "{snap:#?}"
    );
    s.close().await.expect("close");
}

/// `reply` with its usage chunk left out, as many OpenAI-compatible servers stream.
fn without_usage(reply: Reply) -> Reply {
    let Reply::Sse(steps) = reply else {
        return reply;
    };
    Reply::Sse(
        steps
            .into_iter()
            .filter(|step| !matches!(step, Step::Data(data) if data.contains("\"usage\"")))
            .collect(),
    )
}

/// Bytes of the SSE body a scripted reply streams.
fn streamed_bytes(reply: &Reply) -> u64 {
    let Reply::Sse(steps) = reply else { return 0 };
    steps
        .iter()
        .map(|step| match step {
            Step::Data(data) => format!("data: {data}\n\n").len() as u64,
            Step::Raw(raw) => raw.len() as u64,
            _ => 0,
        })
        .sum()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_token_budget_holds_on_an_endpoint_that_never_reports_usage() {
    // No reply carries usage. The second reply is text with a call: as a turn the call runs,
    // as the handoff (tools forbidden) its text is the summary.
    let turns = vec![
        Reply::tool_call("call_1", "ls", r#"{"path":"."}"#),
        Reply::Sse(vec![
            Step::text("Handoff: listed the project."),
            Step::tool_delta(Some(0), Some("call_2"), Some("ls"), "{}"),
            Step::finish("tool_calls"),
            Step::done(),
        ]),
        Reply::tool_call("call_3", "ls", r#"{"path":"."}"#),
        Reply::text("Handoff after three turns."),
    ]
    .into_iter()
    .map(without_usage)
    .collect::<Vec<_>>();
    let sizes: Vec<u64> = turns.iter().map(streamed_bytes).collect();
    let env = Env::new(turns);
    let s = env.broker("broker").await;
    let (child, _) = spawn_with(
        &s,
        &env,
        "researcher",
        json!({"maxTurns": 3, "tokenBudget": 100}),
    )
    .await;
    let snap = settled(&s, &child, Duration::from_secs(30)).await;
    let last_run = last(&snap);
    assert_eq!(
        last_run.status,
        p::TerminalRunStatus::BudgetExhausted,
        "{snap:#?}"
    );
    assert_eq!(
        last_run.budget_reached.as_ref().map(|b| b.budget),
        Some(p::BudgetName::TokenBudget),
        "the run went on to another budget: {snap:#?}"
    );
    assert_eq!(
        last_run.usage.source,
        p::UsageSource::Estimated,
        "{snap:#?}"
    );
    assert_eq!(last_run.preview.as_str(), "Handoff: listed the project.");

    // The estimate: each request body's bytes / 4 and each streamed body's bytes / 4, both
    // rounded up, summed over the run (one turn and the handoff).
    let requests = env.server.requests();
    assert_eq!(requests.len(), 2, "one turn and the handoff");
    let input: u64 = requests
        .iter()
        .map(|r| (r.body.len() as u64).div_ceil(4))
        .sum();
    let output: u64 = sizes[..2].iter().map(|b| b.div_ceil(4)).sum();
    assert_eq!(last_run.usage.input_tokens, input, "{snap:#?}");
    assert_eq!(last_run.usage.output_tokens, output, "{snap:#?}");
    assert_eq!(last_run.usage.turns, 2);
    let first_turn = (requests[0].body.len() as u64).div_ceil(4) + sizes[0].div_ceil(4);
    assert_eq!(
        json!(last_run.budget_reached),
        json!({"budget": "tokenBudget", "limit": 100, "reached": first_turn})
    );
    // Every request still asked for usage.
    for request in &requests {
        let body = ChatRequest::of(request);
        assert_eq!(
            body.stream_options.as_ref().and_then(|o| o.include_usage),
            Some(true),
            "{body:#?}"
        );
    }
    let listed = list(&s, json!({})).await;
    let snap = snapshot(&s, listed.children[0].child_id.as_str()).await;
    assert_eq!(
        snap.last_run.as_ref().map(|r| r.usage.source),
        Some(p::UsageSource::Estimated),
        "{listed:#?}"
    );
    s.close().await.expect("close");
}

#[tokio::test(flavor = "multi_thread")]
async fn usage_every_request_reported_is_reported() {
    let env = Env::new(vec![
        Reply::tool_call("call_1", "ls", r#"{"path":"."}"#),
        Reply::text("Done."),
    ]);
    let s = env.broker("broker").await;
    let (child, _) = spawn_with(&s, &env, "researcher", json!({})).await;
    let snap = settled(&s, &child, Duration::from_secs(30)).await;
    assert_eq!(
        last_status(&snap),
        Some(p::TerminalRunStatus::Completed),
        "{snap:#?}"
    );
    assert_eq!(
        json!(last(&snap).usage),
        json!({"inputTokens": 20, "outputTokens": 10, "turns": 2, "source": "reported",
               "contextTokens": 10})
    );
    assert!(last(&snap).cut.is_none(), "{snap:#?}");
    s.close().await.expect("close");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_bash_call_past_its_timeout_is_a_tool_error_its_tree_killed_and_the_run_goes_on() {
    // The shell runs a foreground sleep in its group and a `setsid` one outside it, and
    // double-forks a third that the worker only finds as a re-parented orphan.
    let command = "setsid sleep 300.25 & (setsid sleep 300.75 &) ; sleep 300.5";
    let env = Env::new(vec![
        Reply::tool_call("call_1", "bash", &json!({ "command": command }).to_string()),
        Reply::Sse(vec![
            Step::delay_ms(1500),
            Step::text("Carried on without it."),
            Step::finish("stop"),
            Step::usage(10, 5),
            Step::done(),
        ]),
    ]);
    let s = env.broker("broker").await;
    let (child, _) = spawn_with(&s, &env, "coder", json!({"toolTimeoutMs": 600})).await;
    assert!(
        env.server.wait_for_requests(2, Duration::from_secs(20)),
        "the run did not go on to a second turn: {:#?}",
        settled(&s, &child, Duration::from_secs(1)).await
    );
    // The second request is being answered (slowly): the run is alive, and none of the
    // call's processes is.
    let sleeps = || {
        subzero_testkit::procs::running_in(&env.workspace())
            .into_iter()
            .filter(|p| p.argv.iter().any(|a| a.starts_with("300.")))
            .map(|p| p.argv.join(" "))
            .collect::<Vec<_>>()
    };
    let end = Instant::now() + Duration::from_secs(1);
    while !sleeps().is_empty() && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(sleeps(), Vec::<String>::new(), "the call's tree survived");
    let requests = env.server.requests();
    let answered = tool_messages(&ChatRequest::of(&requests[1]));
    assert_eq!(answered.len(), 1, "{answered:?}");
    assert!(
        answered[0]
            .contains("bash timed out after 600 ms (toolTimeoutMs); its processes were killed"),
        "{}",
        answered[0]
    );

    let snap = settled(&s, &child, Duration::from_secs(30)).await;
    let last_run = last(&snap);
    assert_eq!(
        last_run.status,
        p::TerminalRunStatus::Completed,
        "{snap:#?}"
    );
    assert_eq!(last_run.preview.as_str(), "Carried on without it.");
    let failed: Vec<_> = snap
        .events
        .iter()
        .filter(|e| {
            matches!(
                e,
                p::ChildEvent::Tool {
                    state: p::ToolState::Failed,
                    ..
                }
            )
        })
        .collect();
    assert_eq!(failed.len(), 1, "{snap:#?}");
    s.close().await.expect("close");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_mcp_call_past_its_timeout_is_a_tool_error_the_request_cancelled() {
    let env = Env::new(vec![
        Reply::tool_call("call_1", "fake__slow", "{}"),
        Reply::text("Moved on."),
    ]);
    let config = std::fs::read_to_string(env.config()).expect("config");
    std::fs::write(
        env.config(),
        format!(
            "{config}\n[templates.waiter]\ndescription = \"waits\"\ninstructions = \"Wait.\"\ntools = [\"read\"]\n\n[[templates.waiter.mcp_servers]]\nname = \"fake\"\ncommand = \"{}\"\nargs = [\"--tools\", \"slow\"]\nallowed_tools = [\"slow\"]\n",
            fake_server().display()
        ),
    )
    .expect("config");
    let s = env.broker("broker").await;
    let started = Instant::now();
    let (child, _) = spawn_with(&s, &env, "waiter", json!({"toolTimeoutMs": 700})).await;
    let snap = settled(&s, &child, Duration::from_secs(30)).await;
    assert_eq!(
        last_status(&snap),
        Some(p::TerminalRunStatus::Completed),
        "{snap:#?}"
    );
    assert_eq!(last(&snap).preview.as_str(), "Moved on.");
    assert!(started.elapsed() < Duration::from_secs(30));
    let requests = env.server.requests();
    assert_eq!(requests.len(), 2);
    let answered = tool_messages(&ChatRequest::of(&requests[1]));
    assert!(
        answered[0].contains("fake__slow timed out after 700 ms (toolTimeoutMs)")
            && answered[0].contains("cancelled"),
        "{answered:?}"
    );
    s.close().await.expect("close");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_text_answer_cut_at_max_output_tokens_is_kept_and_marked() {
    let env = Env::new(vec![Reply::Sse(vec![
        Step::text("The project is a small demo, and its"),
        Step::finish("length"),
        Step::usage(10, 64),
        Step::done(),
    ])]);
    let s = env.broker("broker").await;
    let (child, _) = spawn_with(&s, &env, "researcher", json!({"maxOutputTokens": 64})).await;
    let snap = settled(&s, &child, Duration::from_secs(30)).await;
    let last_run = last(&snap);
    assert_eq!(
        last_run.status,
        p::TerminalRunStatus::Completed,
        "{snap:#?}"
    );
    assert_eq!(
        last_run.preview.as_str(),
        "The project is a small demo, and its"
    );
    assert_eq!(
        json!(last_run.cut),
        json!({"limit": "maxOutputTokens", "value": 64}),
        "{snap:#?}"
    );
    assert!(last_run.error.is_none(), "{snap:#?}");
    assert_eq!(snap.state, p::ChildState::Ready);
    s.close().await.expect("close");
}
