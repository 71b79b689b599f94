//! User-template MCP servers: the worker starts exactly the configured server, declares only
//! the allowed tools (as `<server>__<tool>`), refuses the rest, and leaves no server behind.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::support::fake_mcp::fake_server;

use crate::support::worker::ControlLines;
use crate::support::worker::{
    RunSpec, WorkerProc, researcher, tool_results, with_filesystem, with_mcp_servers,
};
use serde_json::{Value, json};
use subzero_protocol::{ErrorCode, RunSettledStatus};
use subzero_testkit::{Reply, ScriptedServer};

/// `snapshot` with the fake MCP server offering `tools`, `allowed` of them granted, its
/// environment references `env_refs`, recording into `record`.
fn with_server(
    snapshot: Value,
    tools: &str,
    allowed: &[&str],
    record: &Path,
    env_refs: Value,
) -> Value {
    // The server records what it saw into `record`: under Landlock a read-only grant would
    // refuse that (`grants/landlock.rs`), so these tests grant writing exactly there.
    let snapshot = with_filesystem(
        snapshot,
        json!({
            "access": "workspace",
            "writablePaths": [record],
            "requireEnforcement": false,
        }),
    );
    with_mcp_servers(
        snapshot,
        json!([{
            "name": "fake",
            "command": fake_server(),
            "args": ["--tools", tools, "--record", record, "--grandchild"],
            "envRefs": env_refs,
            "allowedTools": allowed,
        }]),
    )
}

fn pid_in(path: &Path) -> u32 {
    std::fs::read_to_string(path)
        .expect("pid file")
        .trim()
        .parse()
        .expect("pid")
}

/// A live process, not a zombie waiting for its parent.
fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        stat.rsplit(')')
            .next()
            .and_then(|rest| rest.split_whitespace().next())
            .is_some_and(|state| state != "Z")
    })
}

fn assert_gone(pids: &[u32]) {
    let end = Instant::now() + Duration::from_secs(2);
    while pids.iter().any(|p| alive(*p)) && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(20));
    }
    for pid in pids {
        assert!(!alive(*pid), "process {pid} survived the run");
    }
}

#[test]
fn an_allowed_tool_is_declared_and_called_and_an_unlisted_one_is_refused() {
    let ws = tempfile::tempdir().expect("tempdir");
    let state = tempfile::tempdir().expect("tempdir");
    let record = tempfile::tempdir().expect("tempdir");
    let transcript = state.path().join("t.jsonl");
    let model = ScriptedServer::start(vec![
        Reply::tool_calls(&[
            ("c1", "fake__lookup", r#"{"text":"hi"}"#),
            ("c2", "fake__secret", "{}"),
        ]),
        Reply::text("done"),
    ])
    .expect("model server");
    let mut worker = WorkerProc::spawn();
    let snapshot = with_server(
        researcher(),
        "lookup,secret",
        &["lookup"],
        record.path(),
        json!({}),
    );
    worker.send(
        &RunSpec::new(
            "run_00000000000000000000000061",
            model.base_url(),
            snapshot,
            ws.path(),
            &transcript,
        )
        .message(),
    );
    let settled = worker.run_settled("run_00000000000000000000000061");
    assert_eq!(settled.status, RunSettledStatus::Completed, "{settled}");

    let requests = model.requests();
    assert_eq!(
        requests[0].tool_names(),
        ["read", "grep", "find", "ls", "fake__lookup"]
    );
    let results = tool_results(&requests[1]);
    assert!(
        results[0].contains(r#"lookup ok: {"text":"hi"}"#),
        "{results:?}"
    );
    assert!(results[1].contains("not granted"), "{results:?}");
    let calls = std::fs::read_to_string(record.path().join("calls")).expect("calls");
    assert_eq!(
        calls, "lookup\n",
        "the disallowed tool must never reach the server"
    );

    let events = worker.tool_activity("run_00000000000000000000000061");
    let tool_event = |name: &str, state: &str| {
        events
            .iter()
            .any(|(n, s)| n == name && s.to_string() == state)
    };
    assert!(tool_event("fake__lookup", "started"));
    assert!(tool_event("fake__lookup", "finished"));
    assert!(tool_event("fake__secret", "failed"));

    assert_gone(&[
        pid_in(&record.path().join("pid")),
        pid_in(&record.path().join("grandchild-pid")),
    ]);
}

#[test]
fn a_granted_tool_the_server_does_not_list_fails_before_any_model_call() {
    let ws = tempfile::tempdir().expect("tempdir");
    let state = tempfile::tempdir().expect("tempdir");
    let record = tempfile::tempdir().expect("tempdir");
    let transcript = state.path().join("t.jsonl");
    let model = ScriptedServer::start(vec![Reply::text("never")]).expect("model server");
    let mut worker = WorkerProc::spawn();
    let snapshot = with_server(
        researcher(),
        "lookup",
        &["lookup", "missing"],
        record.path(),
        json!({}),
    );
    worker.send(
        &RunSpec::new(
            "run_0000000000000000000000006D",
            model.base_url(),
            snapshot,
            ws.path(),
            &transcript,
        )
        .message(),
    );
    let settled = worker.run_settled("run_0000000000000000000000006D");
    assert_eq!(settled.status, RunSettledStatus::Failed, "{settled}");
    assert_eq!(settled.code(), ErrorCode::UnsupportedGrant, "{settled}");
    let message = settled.message();
    assert!(message.contains("missing"), "{message}");
    assert!(model.requests().is_empty(), "no model request may be made");
    assert!(!transcript.exists(), "the transcript is not touched");
    assert_gone(&[
        pid_in(&record.path().join("pid")),
        pid_in(&record.path().join("grandchild-pid")),
    ]);
}

#[test]
fn the_server_environment_is_cleared_and_never_holds_the_key() {
    let ws = tempfile::tempdir().expect("tempdir");
    let state = tempfile::tempdir().expect("tempdir");
    let record = tempfile::tempdir().expect("tempdir");
    let transcript = state.path().join("t.jsonl");
    let model = ScriptedServer::start(vec![Reply::text("done")]).expect("model server");
    let mut worker = WorkerProc::spawn();
    let snapshot = with_server(
        researcher(),
        "lookup",
        &["lookup"],
        record.path(),
        json!({}),
    );
    let spec = RunSpec::new(
        "run_00000000000000000000000065",
        model.base_url(),
        snapshot,
        ws.path(),
        &transcript,
    );
    worker.send(&spec.message());
    let settled = worker.run_settled("run_00000000000000000000000065");
    assert_eq!(settled.status, RunSettledStatus::Completed, "{settled}");
    let env = std::fs::read_to_string(record.path().join("env")).expect("env");
    assert!(
        !env.contains(spec.key),
        "the key reached the server's environment"
    );
    // The worker itself runs with PATH and SUBZERO_LOG; none of it is inherited.
    assert_eq!(env, "", "only configured references may reach the server");
}

#[test]
fn an_env_reference_without_a_value_in_start_run_is_refused() {
    let ws = tempfile::tempdir().expect("tempdir");
    let state = tempfile::tempdir().expect("tempdir");
    let record = tempfile::tempdir().expect("tempdir");
    let transcript = state.path().join("t.jsonl");
    let model = ScriptedServer::start(vec![Reply::text("never")]).expect("model server");
    let mut worker = WorkerProc::spawn();
    let snapshot = with_server(
        researcher(),
        "lookup",
        &["lookup"],
        record.path(),
        json!({ "TOKEN": "env:PATH" }),
    );
    worker.send(
        &RunSpec::new(
            "run_00000000000000000000000072",
            model.base_url(),
            snapshot,
            ws.path(),
            &transcript,
        )
        .message(),
    );
    let settled = worker.run_settled("run_00000000000000000000000072");
    assert_eq!(settled.code(), ErrorCode::UnsupportedGrant, "{settled}");
    assert!(model.requests().is_empty());
    assert!(
        !record.path().join("pid").exists(),
        "the server is not started without its environment"
    );
}

#[test]
fn env_references_get_exactly_the_values_the_broker_resolved() {
    let ws = tempfile::tempdir().expect("tempdir");
    let state = tempfile::tempdir().expect("tempdir");
    let record = tempfile::tempdir().expect("tempdir");
    let transcript = state.path().join("t.jsonl");
    let model = ScriptedServer::start(vec![Reply::text("done")]).expect("model server");
    let mut worker = WorkerProc::spawn();
    let snapshot = with_server(
        researcher(),
        "lookup",
        &["lookup"],
        record.path(),
        json!({ "TOKEN": "env:MCP_TOKEN" }),
    );
    let mut spec = RunSpec::new(
        "run_00000000000000000000000073",
        model.base_url(),
        snapshot,
        ws.path(),
        &transcript,
    );
    spec.mcp_env = Some(json!({ "env:MCP_TOKEN": "tok-mcp-secret-5521" }));
    worker.send(&spec.message());
    let settled = worker.run_settled("run_00000000000000000000000073");
    assert_eq!(settled.status, RunSettledStatus::Completed, "{settled}");
    let env = std::fs::read_to_string(record.path().join("env")).expect("env");
    assert!(env.contains("TOKEN=tok-mcp-secret-5521"), "{env:?}");
    assert_eq!(
        env.lines().count(),
        1,
        "only the configured reference: {env:?}"
    );
}

#[test]
fn cancel_kills_the_server_tree_and_counts_it() {
    let ws = tempfile::tempdir().expect("tempdir");
    let state = tempfile::tempdir().expect("tempdir");
    let record = tempfile::tempdir().expect("tempdir");
    let transcript = state.path().join("t.jsonl");
    let model = ScriptedServer::start(vec![Reply::Hang]).expect("model server");
    let mut worker = WorkerProc::spawn();
    let snapshot = with_server(
        researcher(),
        "lookup",
        &["lookup"],
        record.path(),
        json!({}),
    );
    worker.send(
        &RunSpec::new(
            "run_00000000000000000000000063",
            model.base_url(),
            snapshot,
            ws.path(),
            &transcript,
        )
        .message(),
    );
    assert!(
        model.wait_for_requests(1, Duration::from_secs(20)),
        "the model is asked once the server is up"
    );
    let pids = [
        pid_in(&record.path().join("pid")),
        pid_in(&record.path().join("grandchild-pid")),
    ];
    assert!(pids.iter().all(|p| alive(*p)));
    worker.send(&json!({ "type": "cancel", "runId": "run_00000000000000000000000063" }));
    let confirmed = worker.cancel_confirmed("run_00000000000000000000000063");
    // The server may exit by itself when its session closes (stdin EOF) before the sweep;
    // the idle grandchild never does, so it is always killed and counted.
    assert!(confirmed >= 1, "{confirmed}");
    assert_gone(&pids);
}
