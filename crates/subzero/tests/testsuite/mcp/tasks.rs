//! The MCP Tasks extension through the real `subzero mcp` and rmcp's client: a client that
//! declares it gets a task for each call that starts a run, reads the settled run inline
//! from `tasks/get` (also after a broker restart), and cancels a run with `tasks/cancel`,
//! answered once the stop is confirmed. A client that does not declare it is answered as
//! before.

use std::time::{Duration, Instant};

use rmcp::model::{CallToolResponse, CreateTaskResult, DetailedTask, TaskPayload, TaskStatus};
use serde_json::{Value, json};
use subzero_runtime::mcp::client::McpSession;
use subzero_testkit::Reply;

use crate::support::mcp::*;

async fn tasks_broker(env: &Env, log: &str) -> McpSession {
    McpSession::start_with_tasks(&env.command(log))
        .await
        .expect("broker starts")
}

/// The task a call answered with (panics on a direct answer).
async fn task_of(s: &McpSession, tool: &str, args: Value) -> CreateTaskResult {
    match s.call_once(tool, args).await.expect("tools/call") {
        CallToolResponse::Task(task) => task,
        other => panic!("{tool} answered without a task: {other:?}"),
    }
}

/// Polls `tasks/get` (at the interval the task asks for) until the task has ended.
async fn until_terminal(s: &McpSession, task_id: &str) -> DetailedTask {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let got = s.get_task(task_id).await.expect("tasks/get").task;
        if got.status().is_terminal() {
            return got;
        }
        assert!(
            Instant::now() < deadline,
            "task {task_id} never ended: {got:?}"
        );
        let poll = got.task.poll_interval_ms.expect("a poll interval");
        tokio::time::sleep(Duration::from_millis(poll.min(200))).await;
    }
}

/// The completed task's `CallToolResult` as JSON, and its structured content.
fn completed(task: &DetailedTask) -> (Value, Value) {
    let TaskPayload::Completed { result } = &task.payload else {
        panic!("not completed: {task:?}");
    };
    let result = Value::Object(result.clone());
    let structured = result["structuredContent"].clone();
    let text = result["content"][0]["text"].as_str().expect("a text block");
    assert_eq!(
        serde_json::from_str::<Value>(text).expect("the text is JSON"),
        structured,
        "the text block is the structured content as compact JSON"
    );
    assert_eq!(result["isError"], json!(false), "{result}");
    (result, structured)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_spawn_and_a_followup_are_tasks_whose_results_carry_the_settled_run() {
    let env = Env::new(vec![
        Reply::text("first answer"),
        Reply::text("second answer"),
    ]);
    let s = tasks_broker(&env, "tasks").await;
    let created = task_of(
        &s,
        "subzero_spawn",
        json!({"prompt": "Answer.", "templateId": "researcher", "model": env.model()}),
    )
    .await;
    let task = &created.task;
    assert!(
        task.task_id.starts_with("run_"),
        "the task is its run: {task:?}"
    );
    assert_eq!(task.status, TaskStatus::Working);
    assert!(
        task.ttl_ms.is_some_and(|ttl| ttl >= 24 * 3600 * 1000),
        "{task:?}"
    );
    assert!(task.poll_interval_ms.is_some(), "{task:?}");
    let wire = serde_json::to_value(&created).unwrap();
    assert_eq!(wire["resultType"], "task", "{wire}");

    let done = until_terminal(&s, &task.task_id).await;
    assert_eq!(done.status(), TaskStatus::Completed);
    assert_eq!(done.task.created_at, task.created_at);
    let (result, spawned) = completed(&done);
    let spawned: p::SpawnOutput = parse("spawn task result", &spawned);
    assert_eq!(spawned.run_id.as_str(), task.task_id);
    let run = spawned.run.as_ref().expect("the settled run");
    assert_eq!(run.status, p::TerminalRunStatus::Completed);
    assert_eq!(run.preview.as_str(), "first answer");
    let bytes = result.to_string().len();
    assert!(
        bytes <= 2 * 1024,
        "a settled task's result is {bytes} bytes: {result}"
    );
    let child = spawned.child_id.to_string();

    // The child is ready; a followup is a task too, and a plain get is answered as before.
    let followup = task_of(
        &s,
        "subzero_send",
        json!({"childId": child, "mode": "followup", "message": "Again."}),
    )
    .await;
    let done = until_terminal(&s, &followup.task.task_id).await;
    let (_, sent) = completed(&done);
    let sent: p::SendOutput = parse("send task result", &sent);
    assert_eq!(sent.delivery, p::SendOutputDelivery::Started);
    assert_eq!(
        sent.run.as_ref().map(|r| r.preview.as_str()),
        Some("second answer")
    );
    let snap = get(&s, json!({"childId": child})).await;
    assert_eq!(snap.state, p::ChildState::Ready);
    s.close().await.expect("close");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_client_without_the_extension_is_answered_as_before_and_cannot_poll() {
    let env = Env::new(vec![Reply::text("done")]);
    let s = env.broker("plain").await;
    let reply = call(
        &s,
        "subzero_spawn",
        json!({"prompt": "Answer.", "templateId": "researcher", "model": env.model()}),
    )
    .await;
    assert!(!reply.is_error, "{}", reply.text);
    let spawned: p::SpawnOutput = parse("spawn", &reply.structured);
    assert!(spawned.run.is_none(), "a direct answer has no settled run");
    let refused = s
        .get_task(spawned.run_id.as_str())
        .await
        .expect_err("tasks/get needs the extension");
    assert!(refused.to_string().contains("-32021"), "{refused}");
    s.close().await.expect("close");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_task_survives_a_broker_restart_and_unknown_ids_are_invalid_params() {
    let env = Env::new(vec![Reply::text("kept")]);
    let s = tasks_broker(&env, "first").await;
    let created = task_of(
        &s,
        "subzero_spawn",
        json!({"prompt": "Answer.", "templateId": "researcher", "model": env.model()}),
    )
    .await;
    let before = until_terminal(&s, &created.task.task_id).await;
    s.close().await.expect("close");

    let s = tasks_broker(&env, "second").await;
    let after = s
        .get_task(&created.task.task_id)
        .await
        .expect("tasks/get after a restart")
        .task;
    assert_eq!(after, before, "the same task, read from the store");
    let missing = s
        .get_task(&format!("run_{}", "0".repeat(26)))
        .await
        .expect_err("an unknown task");
    assert!(missing.to_string().contains("-32602"), "{missing}");
    let malformed = s.get_task("nonsense").await.expect_err("a malformed id");
    assert!(malformed.to_string().contains("-32602"), "{malformed}");
    // Cancelling a task that already ended leaves it as it ended.
    s.cancel_task(&created.task.task_id)
        .await
        .expect("cancel of an ended task is acknowledged");
    let still = s.get_task(&created.task.task_id).await.unwrap().task;
    assert_eq!(still.status(), TaskStatus::Completed);
    s.close().await.expect("close");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_cancel_stops_exactly_its_run_and_answers_once_the_stop_is_confirmed() {
    let env = Env::new(vec![Reply::Hang]);
    let s = tasks_broker(&env, "cancel").await;
    let created = task_of(
        &s,
        "subzero_spawn",
        json!({"prompt": "Never ends.", "templateId": "researcher", "model": env.model()}),
    )
    .await;
    let id = created.task.task_id.clone();
    let working = s.get_task(&id).await.expect("tasks/get").task;
    assert_eq!(working.status(), TaskStatus::Working);
    let (child, _) = {
        let list = list(&s, json!({})).await;
        let entry = list.children.first().expect("the child").clone();
        (entry.child_id.to_string(), entry)
    };
    // A followup queued behind it is a task that cannot be cancelled alone.
    let queued = task_of(
        &s,
        "subzero_send",
        json!({"childId": child, "mode": "followup", "message": "later"}),
    )
    .await;
    let refused = s
        .cancel_task(&queued.task.task_id)
        .await
        .expect_err("a queued run is not stopped alone");
    assert!(
        refused.to_string().contains("not_running"),
        "the error carries its code: {refused}"
    );
    assert!(env.server.wait_for_requests(1, Duration::from_secs(10)));

    s.cancel_task(&id).await.expect("tasks/cancel");
    // Answered only once the stop is confirmed: the run is already stopped.
    let snap = get(&s, json!({"childId": child, "eventLimit": 50})).await;
    assert_eq!(snap.state, p::ChildState::Ready, "{snap:#?}");
    assert!(
        kinds(&snap).contains(&"stop_confirmed"),
        "{:?}",
        kinds(&snap)
    );
    let cancelled = s.get_task(&id).await.expect("tasks/get").task;
    assert_eq!(cancelled.status(), TaskStatus::Cancelled);
    // The stop cleared the queue: the queued run's task ended as cancelled too.
    let cleared = s.get_task(&queued.task.task_id).await.unwrap().task;
    assert_eq!(cleared.status(), TaskStatus::Cancelled);
    s.close().await.expect("close");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_resume_with_a_message_is_a_task_and_one_without_answers_directly() {
    let env = Env::new(vec![Reply::text("first"), Reply::text("resumed answer")]);
    let s = env.broker("plain").await;
    let (child, _) = spawn(&s, &env, "researcher", "Answer.").await;
    settled(&s, &child, Duration::from_secs(30)).await;
    s.close().await.expect("close");

    // A new broker holds no key for the child: resume re-arms it.
    let s = tasks_broker(&env, "tasks").await;
    let rearmed = s
        .call_once(
            "subzero_resume",
            json!({"childId": child, "model": env.model()}),
        )
        .await
        .expect("tools/call");
    assert!(
        matches!(rearmed, CallToolResponse::Complete(_)),
        "a resume without a message starts no run: {rearmed:?}"
    );
    let created = task_of(
        &s,
        "subzero_resume",
        json!({"childId": child, "model": env.model(), "message": "Once more."}),
    )
    .await;
    let done = until_terminal(&s, &created.task.task_id).await;
    let (_, resumed) = completed(&done);
    let resumed: p::ResumeOutput = parse("resume task result", &resumed);
    assert_eq!(resumed.state, p::ResumeOutputState::Running);
    assert_eq!(
        resumed.run.as_ref().map(|r| r.preview.as_str()),
        Some("resumed answer")
    );
    s.close().await.expect("close");
}

#[tokio::test(flavor = "multi_thread")]
async fn another_workspaces_broker_cannot_read_or_cancel_a_task() {
    let env = Env::new(vec![Reply::Hang]);
    let s = tasks_broker(&env, "owner").await;
    let created = task_of(
        &s,
        "subzero_spawn",
        json!({"prompt": "Never ends.", "templateId": "researcher", "model": env.model()}),
    )
    .await;
    let elsewhere = env.dir.path().join("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    let mut command = env.command("other");
    command.workspace = elsewhere.canonicalize().unwrap();
    let other = McpSession::start_with_tasks(&command)
        .await
        .expect("broker");
    let id = &created.task.task_id;
    let read = other.get_task(id).await.expect_err("not its workspace");
    assert!(read.to_string().contains("-32602"), "{read}");
    let cancel = other.cancel_task(id).await.expect_err("not its workspace");
    assert!(cancel.to_string().contains("-32602"), "{cancel}");
    let still = s.get_task(id).await.expect("tasks/get").task;
    assert_eq!(still.status(), TaskStatus::Working);
    s.cancel_task(id).await.expect("its own broker cancels it");
    other.close().await.expect("close");
    s.close().await.expect("close");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_repeated_call_names_the_same_task_and_a_killed_broker_leaves_it_answerable() {
    let env = Env::new(vec![Reply::Hang]);
    let s = tasks_broker(&env, "first").await;
    let spawn = json!({"prompt": "Never ends.", "templateId": "researcher",
                       "model": env.model(), "requestId": "once"});
    let first = task_of(&s, "subzero_spawn", spawn.clone()).await;
    // The parent calling again at once, with the same requestId: the same run, the same task.
    let again = task_of(&s, "subzero_spawn", spawn).await;
    assert_eq!(again.task.task_id, first.task.task_id);
    assert_eq!(again.task.created_at, first.task.created_at);
    assert!(env.server.wait_for_requests(1, Duration::from_secs(10)));
    // The broker is killed mid-run (its worker dies with it).
    sigkill(s.pid().expect("the broker's pid"));
    drop(s);
    let s = tasks_broker(&env, "second").await;
    let ended = until_terminal(&s, &first.task.task_id).await;
    let (_, answer) = completed(&ended);
    let answer: p::SpawnOutput = parse("spawn task result", &answer);
    let run = answer.run.expect("the settled run");
    assert_eq!(run.status, p::TerminalRunStatus::Interrupted, "{run:?}");
    let error = run.error.expect("why it ended");
    assert_eq!(error.code, p::ErrorCode::Interrupted);
    assert!(
        error.message.as_str().contains("subzero_resume"),
        "{error:?}"
    );
    s.close().await.expect("close");
}
