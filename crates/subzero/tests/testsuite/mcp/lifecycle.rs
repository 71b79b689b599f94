//! The eight tools end to end: the real `subzero mcp` binary over stdio, a real MCP
//! client, real workers, a scripted model on loopback.

use std::time::Duration;

use crate::support::mcp::*;
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
    assert_eq!(
        snap["lastRun"]["preview"],
        "The README describes a small demo project."
    );
    let artifact = snap["lastRun"]["artifactId"]
        .as_str()
        .expect("artifact")
        .to_owned();
    let chunk = ok(
        &s,
        "subzero_output",
        json!({"artifactId": artifact, "offset": 0, "length": 10}),
    )
    .await;
    assert_eq!(chunk["text"], "The README");
    assert_eq!(chunk["eof"], false);
    let rest = ok(
        &s,
        "subzero_output",
        json!({"artifactId": artifact, "offset": chunk["nextOffset"]}),
    )
    .await;
    assert_eq!(rest["eof"], true);
    let kinds: Vec<&str> = snap["events"]
        .as_array()
        .expect("events")
        .iter()
        .filter_map(|e| e["type"].as_str())
        .collect();
    assert!(
        kinds.contains(&"run_started") && kinds.contains(&"tool") && kinds.contains(&"completed"),
        "{kinds:?}"
    );
    let listed = ok(&s, "subzero_list", json!({})).await;
    assert_eq!(listed["children"][0]["childId"], child.as_str());
    s.close().await.expect("close");
    assert!(
        env.files_containing(KEY).is_empty(),
        "key found on disk: {:?}",
        env.files_containing(KEY)
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn followups_run_in_order_each_after_the_previous_settled() {
    let env = Env::new(vec![
        slow_reply("first answer", 300),
        Reply::text("second answer"),
        Reply::text("third answer"),
    ]);
    let s = env.broker("broker").await;
    let (child, first) = spawn(&s, &env, "researcher", "one").await;
    let second = ok(
        &s,
        "subzero_send",
        json!({"childId": child, "mode": "followup", "message": "two"}),
    )
    .await;
    let third = ok(
        &s,
        "subzero_send",
        json!({"childId": child, "mode": "followup", "message": "three"}),
    )
    .await;
    assert_eq!(second["delivery"], "queued");
    assert_eq!(third["delivery"], "queued");
    let running = ok(&s, "subzero_get", json!({"childId": child})).await;
    assert_eq!(running["activeRunId"], first.as_str());
    assert_eq!(
        running["queuedRuns"],
        json!([second["runId"], third["runId"]])
    );
    let snap = settle(&s, &child, Duration::from_secs(30)).await;
    assert_eq!(snap["lastRun"]["runId"], third["runId"]);
    assert_eq!(snap["lastRun"]["preview"], "third answer");
    let started: Vec<&str> = snap["events"]
        .as_array()
        .expect("events")
        .iter()
        .filter(|e| e["type"] == "run_started")
        .filter_map(|e| e["runId"].as_str())
        .collect();
    assert_eq!(
        started,
        vec![
            first.as_str(),
            second["runId"].as_str().unwrap(),
            third["runId"].as_str().unwrap()
        ]
    );
    // Each later run saw the earlier answers: its request carried the conversation so far.
    let bodies: Vec<String> = env
        .server
        .requests()
        .iter()
        .map(|r| r.json().unwrap_or_default().to_string())
        .collect();
    assert!(
        bodies[2].contains("first answer") && bodies[2].contains("second answer"),
        "{}",
        bodies[2]
    );
    // A followup on the idle child starts at once.
    env.server.push(Reply::text("fourth answer"));
    let fourth = ok(
        &s,
        "subzero_send",
        json!({"childId": child, "mode": "followup", "message": "four"}),
    )
    .await;
    assert_eq!(fourth["delivery"], "started");
    let snap = settle(&s, &child, Duration::from_secs(30)).await;
    assert_eq!(snap["lastRun"]["preview"], "fourth answer");
    s.close().await.expect("close");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_steer_is_delivered_with_a_receipt_and_is_never_a_followup() {
    let env = Env::new(vec![
        slow_reply("working", 600),
        Reply::text("steered answer"),
    ]);
    let s = env.broker("broker").await;
    let idle_check = {
        let (child, _) = spawn(&s, &env, "researcher", "task").await;
        child
    };
    let steer = ok(
        &s,
        "subzero_send",
        json!({"childId": idle_check, "mode": "steer", "message": "focus on tests", "requestId": "steer-1"}),
    )
    .await;
    assert_eq!(steer["delivery"], "steered");
    let steer_id = steer["steerId"].as_str().expect("steerId").to_owned();
    // The same requestId and message is the same receipt, not a second steer.
    let again = ok(
        &s,
        "subzero_send",
        json!({"childId": idle_check, "mode": "steer", "message": "focus on tests", "requestId": "steer-1"}),
    )
    .await;
    assert_eq!(again["steerId"], steer_id.as_str());
    let conflict = err(
        &s,
        "subzero_send",
        json!({"childId": idle_check, "mode": "steer", "message": "something else", "requestId": "steer-1"}),
    )
    .await;
    assert_eq!(conflict, "request_conflict");
    let snap = settle(&s, &idle_check, Duration::from_secs(30)).await;
    let applied: Vec<_> = snap["events"]
        .as_array()
        .expect("events")
        .iter()
        .filter(|e| e["type"] == "steer_applied")
        .collect();
    assert_eq!(applied.len(), 1, "{snap:#}");
    assert_eq!(applied[0]["steerId"], steer_id.as_str());
    assert_eq!(applied[0]["requestId"], "steer-1");
    // The steer reached the model in the request that followed its delivery.
    let requests = env.server.requests();
    assert!(
        requests.iter().any(|r| r
            .json()
            .unwrap_or_default()
            .to_string()
            .contains("focus on tests")),
        "no request carried the steer"
    );
    // On an idle child a steer is refused, never turned into a followup.
    let code = err(
        &s,
        "subzero_send",
        json!({"childId": idle_check, "mode": "steer", "message": "late"}),
    )
    .await;
    assert_eq!(code, "not_running");
    assert_eq!(
        env.server.requests().len(),
        requests.len(),
        "a refused steer must not reach the model"
    );
    s.close().await.expect("close");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_stale_stop_changes_nothing_and_a_matching_stop_is_confirmed() {
    let env = Env::new(vec![Reply::Hang]);
    let s = env.broker("broker").await;
    let (child, run) = spawn(&s, &env, "researcher", "never ends").await;
    let queued = ok(
        &s,
        "subzero_send",
        json!({"childId": child, "mode": "followup", "message": "later"}),
    )
    .await;
    let stale = format!("run_{}", "0".repeat(26));
    assert_eq!(
        err(
            &s,
            "subzero_stop",
            json!({"childId": child, "expectedRunId": stale})
        )
        .await,
        "stale_run"
    );
    let unchanged = ok(&s, "subzero_get", json!({"childId": child})).await;
    assert_eq!(unchanged["activeRunId"], run.as_str());
    assert_eq!(unchanged["queuedRuns"], json!([queued["runId"]]));
    assert!(env.server.wait_for_requests(1, Duration::from_secs(10)));
    let stopped = ok(
        &s,
        "subzero_stop",
        json!({"childId": child, "expectedRunId": run, "waitMs": 10000}),
    )
    .await;
    assert_eq!(stopped["requested"], true);
    assert_eq!(stopped["confirmed"], true);
    assert_eq!(stopped["status"], "stopped");
    let snap = ok(
        &s,
        "subzero_get",
        json!({"childId": child, "eventLimit": 50}),
    )
    .await;
    assert_eq!(snap["state"], "ready");
    assert_eq!(snap["queuedRuns"], json!([]));
    let kinds: Vec<&str> = snap["events"]
        .as_array()
        .expect("events")
        .iter()
        .filter_map(|e| e["type"].as_str())
        .collect();
    assert!(
        kinds.contains(&"stop_requested") && kinds.contains(&"stop_confirmed"),
        "{kinds:?}"
    );
    // A stop after the run ended is not_running; nothing changes.
    assert_eq!(
        err(
            &s,
            "subzero_stop",
            json!({"childId": child, "expectedRunId": run})
        )
        .await,
        "not_running"
    );
    s.close().await.expect("close");
}

#[tokio::test(flavor = "multi_thread")]
async fn tools_list_advertises_exactly_the_eight_tools_with_the_exported_schemas() {
    let env = Env::new(vec![]);
    let s = env.broker("broker").await;
    let tools = s.list_tools().await.expect("tools/list");
    let mut names: Vec<String> = tools.iter().map(|t| t.name.to_string()).collect();
    names.sort();
    assert_eq!(
        names,
        [
            "subzero_get",
            "subzero_info",
            "subzero_list",
            "subzero_output",
            "subzero_resume",
            "subzero_send",
            "subzero_spawn",
            "subzero_stop"
        ]
    );
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../generated/schemas");
    let output_stem = |tool: &str| match tool {
        "info" => "info".to_owned(),
        "get" => "child-snapshot".to_owned(),
        "output" => "artifact-chunk".to_owned(),
        other => format!("tool-{other}-output"),
    };
    for tool in &tools {
        let short = tool.name.trim_start_matches("subzero_");
        let read = |stem: &str| -> serde_json::Value {
            serde_json::from_str(
                &std::fs::read_to_string(root.join(format!("{stem}.schema.json")))
                    .expect("exported schema"),
            )
            .expect("json")
        };
        let input = serde_json::Value::Object((*tool.input_schema).clone());
        assert_eq!(
            input,
            read(&format!("tool-{short}-input")),
            "input schema of {}",
            tool.name
        );
        let output = serde_json::Value::Object(
            (**tool.output_schema.as_ref().expect("output schema")).clone(),
        );
        assert_eq!(
            output,
            read(&output_stem(short)),
            "output schema of {}",
            tool.name
        );
        assert!(
            tool.description.as_ref().is_some_and(|d| d.len() > 80),
            "{} needs a teaching description",
            tool.name
        );
    }
    s.close().await.expect("close");
}
