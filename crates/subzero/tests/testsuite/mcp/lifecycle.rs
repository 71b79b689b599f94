//! The nine tools end to end: the real `subzero mcp` binary over stdio, a real MCP
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
    let snap = settled(&s, &child, Duration::from_secs(30)).await;
    assert_eq!(snap.state, p::ChildState::Ready, "{snap:#?}");
    let last_run = last(&snap);
    assert_eq!(last_run.run_id.as_str(), run);
    assert_eq!(last_run.status, p::TerminalRunStatus::Completed);
    assert_eq!(
        last_run.preview.as_str(),
        "The README describes a small demo project."
    );
    let artifact = last_run.artifact_id.clone().expect("artifact");
    let chunk = read_output(
        &s,
        json!({"artifactId": artifact, "offset": 0, "length": 10}),
    )
    .await;
    assert_eq!(chunk.text.as_str(), "The README");
    assert!(!chunk.eof);
    let rest = read_output(
        &s,
        json!({"artifactId": artifact, "offset": chunk.next_offset}),
    )
    .await;
    assert!(rest.eof);
    let kinds = kinds(&snap);
    assert!(
        kinds.contains(&"run_started") && kinds.contains(&"tool") && kinds.contains(&"completed"),
        "{kinds:?}"
    );
    let listed = list(&s, json!({})).await;
    assert_eq!(listed.children[0].child_id.as_str(), child);
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
    let second = send(
        &s,
        json!({"childId": child, "mode": "followup", "message": "two"}),
    )
    .await;
    let third = send(
        &s,
        json!({"childId": child, "mode": "followup", "message": "three"}),
    )
    .await;
    assert_eq!(second.delivery, p::SendOutputDelivery::Queued);
    assert_eq!(third.delivery, p::SendOutputDelivery::Queued);
    let running = snapshot(&s, &child).await;
    assert_eq!(running.active_run_id.as_deref(), Some(&first));
    assert_eq!(
        *running.queued_runs,
        vec![second.run_id.clone(), third.run_id.clone()]
    );
    let snap = settled(&s, &child, Duration::from_secs(30)).await;
    assert_eq!(last(&snap).run_id, third.run_id);
    assert_eq!(last(&snap).preview.as_str(), "third answer");
    let started: Vec<&str> = snap
        .events
        .iter()
        .filter(|e| matches!(e, p::ChildEvent::RunStarted { .. }))
        .filter_map(|e| e.run_in(snap.last_run.as_ref().map(|r| &r.run_id)))
        .map(|r| r.as_str())
        .collect();
    assert_eq!(
        started,
        vec![
            first.as_str(),
            second.run_id.as_str(),
            third.run_id.as_str()
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
    let fourth = send(
        &s,
        json!({"childId": child, "mode": "followup", "message": "four"}),
    )
    .await;
    assert_eq!(fourth.delivery, p::SendOutputDelivery::Started);
    let snap = settled(&s, &child, Duration::from_secs(30)).await;
    assert_eq!(last(&snap).preview.as_str(), "fourth answer");
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
    let steer = send(
        &s,
        json!({"childId": idle_check, "mode": "steer", "message": "focus on tests", "requestId": "steer-1"}),
    )
    .await;
    assert_eq!(steer.delivery, p::SendOutputDelivery::Steered);
    let steer_id = steer.steer_id.expect("steerId");
    // The same requestId and message is the same receipt, not a second steer.
    let again = send(
        &s,
        json!({"childId": idle_check, "mode": "steer", "message": "focus on tests", "requestId": "steer-1"}),
    )
    .await;
    assert_eq!(again.steer_id.as_ref(), Some(&steer_id));
    let conflict = err(
        &s,
        "subzero_send",
        json!({"childId": idle_check, "mode": "steer", "message": "something else", "requestId": "steer-1"}),
    )
    .await;
    assert_eq!(conflict, "request_conflict");
    let snap = settled(&s, &idle_check, Duration::from_secs(30)).await;
    let applied: Vec<_> = snap
        .events
        .iter()
        .filter_map(|e| match e {
            p::ChildEvent::SteerApplied {
                steer_id,
                request_id,
                ..
            } => Some((steer_id, request_id.as_deref().map(String::as_str))),
            _ => None,
        })
        .collect();
    assert_eq!(applied, [(&steer_id, Some("steer-1"))], "{snap:#?}");
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
    let queued = send(
        &s,
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
    let unchanged = snapshot(&s, &child).await;
    assert_eq!(unchanged.active_run_id.as_deref(), Some(&run));
    assert_eq!(*unchanged.queued_runs, vec![queued.run_id]);
    assert!(env.server.wait_for_requests(1, Duration::from_secs(10)));
    let stopped = stop(
        &s,
        json!({"childId": child, "expectedRunId": run, "waitMs": 10000}),
    )
    .await;
    assert!(stopped.requested);
    assert!(stopped.confirmed);
    assert_eq!(stopped.status, p::RunStatus::Stopped);
    let snap = get(&s, json!({"childId": child, "eventLimit": 50})).await;
    assert_eq!(snap.state, p::ChildState::Ready);
    assert!(snap.queued_runs.is_empty());
    let kinds = kinds(&snap);
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
async fn tools_list_advertises_exactly_the_nine_tools_with_the_exported_schemas() {
    let env = Env::new(vec![]);
    let s = env.broker("broker").await;
    let tools = s.list_tools().await.expect("tools/list");
    let mut names: Vec<String> = tools.iter().map(|t| t.name.to_string()).collect();
    names.sort();
    assert_eq!(
        names,
        [
            "subzero_apply",
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
        let stem = format!("tool-{short}-input");
        assert_eq!(
            input,
            subzero_protocol::advertised::advertised_input(&stem, &read(&stem)),
            "input schema of {} (the exported one, compacted)",
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
