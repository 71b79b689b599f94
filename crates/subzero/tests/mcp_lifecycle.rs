//! The eight tools end to end: the real `subzero mcp` binary over stdio, a real MCP
//! client, real workers, a scripted model on loopback.

mod mcp_support;

use std::time::Duration;

use mcp_support::*;
use serde_json::json;
use subzero_testkit::Reply;

#[tokio::test(flavor = "multi_thread")]
async fn spawn_runs_to_completion_and_the_result_is_readable() {
    let env = Env::new(vec![
        Reply::tool_call("call_1", "read", r#"{"path":"README.md"}"#),
        Reply::text("The README describes a small demo project."),
    ]);
    let s = env.broker("broker").await;
    let (child, run) = spawn(&s, &env, "researcher", "Summarize README.md").await;
    let snap = settle(&s, &child, Duration::from_secs(30)).await;
    assert_eq!(snap["state"], "ready", "{snap:#}");
    assert_eq!(snap["lastRun"]["runId"], run.as_str());
    assert_eq!(snap["lastRun"]["status"], "completed");
    assert_eq!(snap["lastRun"]["preview"], "The README describes a small demo project.");
    let artifact = snap["lastRun"]["artifactId"].as_str().expect("artifact").to_owned();
    let chunk = ok(&s, "subzero_output", json!({"artifactId": artifact, "offset": 0, "length": 10})).await;
    assert_eq!(chunk["text"], "The README");
    assert_eq!(chunk["eof"], false);
    let rest = ok(&s, "subzero_output", json!({"artifactId": artifact, "offset": chunk["nextOffset"]})).await;
    assert_eq!(rest["eof"], true);
    let kinds: Vec<&str> = snap["events"].as_array().expect("events").iter().filter_map(|e| e["type"].as_str()).collect();
    assert!(kinds.contains(&"run_started") && kinds.contains(&"tool") && kinds.contains(&"completed"), "{kinds:?}");
    let listed = ok(&s, "subzero_list", json!({})).await;
    assert_eq!(listed["children"][0]["childId"], child.as_str());
    s.close().await.expect("close");
    assert!(env.files_containing(KEY).is_empty(), "key found on disk: {:?}", env.files_containing(KEY));
}
