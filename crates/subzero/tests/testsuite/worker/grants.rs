//! Exact grants: only granted tools are declared; a call to anything else is refused.

use crate::support::worker::{RunSpec, WorkerProc, researcher, tool_messages};
use serde_json::json;
use subzero_testkit::{Reply, ScriptedServer};

#[test]
fn hello_comes_first_and_advertises_the_protocol() {
    let mut worker = WorkerProc::spawn();
    let hello = worker.expect("hello", |v| v["type"] == "hello");
    assert_eq!(hello["name"], "subzero-worker");
    assert_eq!(hello["transcriptVersion"], 1);
    assert_eq!(hello["controlVersion"], 1);
    assert_eq!(
        hello["protocols"],
        json!([
            "openai-completions",
            "openai-responses",
            "anthropic-messages"
        ])
    );
    assert_eq!(hello["steering"], true);
}

#[test]
fn researcher_declares_only_read_tools_and_an_ungranted_call_is_never_executed() {
    let ws = tempfile::tempdir().expect("tempdir");
    let state = tempfile::tempdir().expect("tempdir");
    let transcript = state.path().join("t.jsonl");
    let marker = ws.path().join("executed");
    let command = format!("touch {}", marker.display());
    let server = ScriptedServer::start(vec![
        Reply::tool_call("c1", "bash", &json!({ "command": command }).to_string()),
        Reply::text("ok"),
    ])
    .expect("server");
    let mut worker = WorkerProc::spawn();
    let spec = RunSpec::new(
        "run_00000000000000000000000072",
        server.base_url(),
        researcher(),
        ws.path(),
        &transcript,
    );
    worker.send(&spec.message());
    let settled = worker.settled("run_00000000000000000000000072");
    assert_eq!(settled["status"], "completed", "{settled}");

    let requests = server.requests();
    assert_eq!(requests[0].tool_names(), ["read", "grep", "find", "ls"]);
    let results = tool_messages(&requests[1].json().expect("json"));
    assert!(results[0].contains("not granted"), "{results:?}");
    assert!(!marker.exists(), "the ungranted bash call must not run");
    assert!(
        worker
            .events("run_00000000000000000000000072")
            .iter()
            .any(|e| e["kind"] == "tool" && e["name"] == "bash" && e["state"] == "failed")
    );
}

#[test]
fn mcp_servers_and_unknown_tools_fail_before_any_model_call() {
    let ws = tempfile::tempdir().expect("tempdir");
    let state = tempfile::tempdir().expect("tempdir");
    let transcript = state.path().join("t.jsonl");
    let server = ScriptedServer::start(vec![]).expect("server");
    let mut worker = WorkerProc::spawn();

    let mut snapshot = researcher();
    snapshot["mcpServers"] = json!([{ "name": "x", "command": "true", "args": [], "envRefs": {}, "allowedTools": ["a"] }]);
    worker.send(
        &RunSpec::new(
            "run_0000000000000000000000006D",
            server.base_url(),
            snapshot,
            ws.path(),
            &transcript,
        )
        .message(),
    );
    let settled = worker.settled("run_0000000000000000000000006D");
    assert_eq!(settled["status"], "failed");
    assert_eq!(settled["error"]["code"], "unsupported_grant");

    let mut snapshot = researcher();
    snapshot["tools"] = json!(["read", "teleport"]);
    worker.send(
        &RunSpec::new(
            "run_00000000000000000000000075",
            server.base_url(),
            snapshot,
            ws.path(),
            &transcript,
        )
        .message(),
    );
    let settled = worker.settled("run_00000000000000000000000075");
    assert_eq!(settled["error"]["code"], "unsupported_grant");

    let mut snapshot = researcher();
    snapshot["tools"] = json!(["read", "bash"]);
    worker.send(
        &RunSpec::new(
            "run_00000000000000000000000077",
            server.base_url(),
            snapshot,
            ws.path(),
            &transcript,
        )
        .message(),
    );
    let settled = worker.settled("run_00000000000000000000000077");
    assert_eq!(settled["error"]["code"], "unsupported_grant");

    assert!(server.requests().is_empty(), "no model call was made");
    assert!(!transcript.exists(), "no transcript was started");
}
