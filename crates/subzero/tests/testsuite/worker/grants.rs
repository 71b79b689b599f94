//! Exact grants: only granted tools are declared; a call to anything else is refused.

use crate::support::worker::{
    ControlLines, RunSpec, WorkerProc, researcher, tool_results, with_mcp_servers, with_tools,
};
use serde_json::json;
use subzero_protocol::{ErrorCode, ModelApi, RunSettledStatus, ToolState, WorkerMessage};
use subzero_testkit::{Reply, ScriptedServer};

#[test]
fn hello_comes_first_and_advertises_the_protocol() {
    let mut worker = WorkerProc::spawn();
    let WorkerMessage::Hello {
        name,
        transcript_version,
        control_version,
        protocols,
        steering,
        ..
    } = worker.hello_line()
    else {
        unreachable!("hello_line returns a hello");
    };
    assert_eq!(*name, "subzero-worker");
    assert_eq!(transcript_version.get(), 1);
    assert_eq!(control_version.get(), 1);
    assert_eq!(
        *protocols,
        [
            ModelApi::OpenaiCompletions,
            ModelApi::OpenaiResponses,
            ModelApi::AnthropicMessages
        ]
    );
    assert!(steering);
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
    let settled = worker.run_settled("run_00000000000000000000000072");
    assert_eq!(settled.status, RunSettledStatus::Completed, "{settled}");

    let requests = server.requests();
    assert_eq!(requests[0].tool_names(), ["read", "grep", "find", "ls"]);
    let results = tool_results(&requests[1]);
    assert!(results[0].contains("not granted"), "{results:?}");
    assert!(!marker.exists(), "the ungranted bash call must not run");
    assert!(
        worker
            .tool_activity("run_00000000000000000000000072")
            .iter()
            .any(|(n, s)| n == "bash" && *s == ToolState::Failed)
    );
}

#[test]
fn mcp_servers_and_unknown_tools_fail_before_any_model_call() {
    let ws = tempfile::tempdir().expect("tempdir");
    let state = tempfile::tempdir().expect("tempdir");
    let transcript = state.path().join("t.jsonl");
    let server = ScriptedServer::start(vec![]).expect("server");
    let mut worker = WorkerProc::spawn();

    let snapshot = with_mcp_servers(
        researcher(),
        json!([{ "name": "x", "command": "true", "args": [], "envRefs": {}, "allowedTools": ["a"] }]),
    );
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
    let settled = worker.run_settled("run_0000000000000000000000006D");
    assert_eq!(settled.status, RunSettledStatus::Failed);
    assert_eq!(settled.code(), ErrorCode::UnsupportedGrant);

    let snapshot = with_tools(researcher(), &["read", "teleport"]);
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
    let settled = worker.run_settled("run_00000000000000000000000075");
    assert_eq!(settled.code(), ErrorCode::UnsupportedGrant);

    let snapshot = with_tools(researcher(), &["read", "bash"]);
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
    let settled = worker.run_settled("run_00000000000000000000000077");
    assert_eq!(settled.code(), ErrorCode::UnsupportedGrant);

    assert!(server.requests().is_empty(), "no model call was made");
    assert!(!transcript.exists(), "no transcript was started");
}
