//! A worker SIGKILLed mid-run, while its bash tool runs `sleep`s: the run and the child
//! become `interrupted`, the tool processes die with it (no orphan), and
//! `subzero_resume` with a message runs to completion.

use std::time::Duration;

use crate::support::faults::{
    Reaper, eventually, marked, sigkill, unique_mark, wait_for, workers_of,
};
use crate::support::mcp::*;
use serde_json::json;
use subzero_testkit::Reply;

#[tokio::test(flavor = "multi_thread")]
async fn a_killed_worker_interrupts_the_run_leaves_no_orphan_and_resume_completes() {
    let env = Env::new(Vec::new());
    let mark = unique_mark(env.dir.path());
    let command = format!("export {mark}; sleep 1000 & sleep 1000");
    env.server.push(Reply::tool_call(
        "call_1",
        "bash",
        &json!({"command": command}).to_string(),
    ));
    env.server.push(Reply::text("Resumed and done."));
    let mut reaper = Reaper::new(env.dir.path());
    reaper.mark(&mark);
    let s = env.broker("broker").await;
    let broker = reaper.broker(s.pid());

    let (child, run) = spawn(&s, &env, "coder", "Run the long job").await;
    let sleeps = wait_for(Duration::from_secs(20), || {
        let found = marked(&mark);
        (found.len() >= 2).then_some(found)
    })
    .expect("the bash tool started its sleeps");
    let worker = workers_of(broker);
    assert_eq!(worker.len(), 1, "one worker under the broker: {worker:?}");
    sigkill(worker[0]);

    let snap = until_snap(&s, &child, Duration::from_secs(15), |v| {
        v.state != p::ChildState::Running
    })
    .await;
    assert_eq!(snap.state, p::ChildState::Interrupted, "{snap:#?}");
    assert_eq!(snap.active_run_id, None, "{snap:#?}");
    assert_eq!(last(&snap).run_id.as_str(), run.as_str(), "{snap:#?}");
    assert_eq!(
        last_status(&snap),
        Some(p::TerminalRunStatus::Interrupted),
        "{snap:#?}"
    );
    let listed = list(&s, json!({})).await;
    assert_eq!(
        listed.children[0].state,
        p::ChildState::Interrupted,
        "{listed:#?}"
    );
    assert_eq!(
        listed.children[0].last_run_status,
        Some(p::TerminalRunStatus::Interrupted),
        "{listed:#?}"
    );

    assert!(
        eventually(Duration::from_secs(5), || marked(&mark).is_empty()),
        "the bash tool's sleeps {sleeps:?} outlived their worker: {:?}",
        marked(&mark)
    );
    assert!(
        workers_of(broker).is_empty(),
        "workers left: {:?}",
        workers_of(broker)
    );

    // Nothing was retried; a followup without resume is refused, resume with a message runs.
    assert_eq!(env.server.requests().len(), 1);
    let refused = err(
        &s,
        "subzero_send",
        json!({"childId": child, "mode": "followup", "message": "More"}),
    )
    .await;
    assert_eq!(refused, "interrupted");
    let resumed = resume(
        &s,
        json!({"childId": child, "model": env.model(), "message": "Carry on"}),
    )
    .await;
    assert_eq!(resumed.state, p::ResumeOutputState::Running, "{resumed:#?}");
    let snap = settled(&s, &child, Duration::from_secs(30)).await;
    assert_eq!(snap.state, p::ChildState::Ready, "{snap:#?}");
    assert_resumed_run_completed(&snap, &resumed);
    assert_eq!(
        last(&snap).preview.as_str(),
        "Resumed and done.",
        "{snap:#?}"
    );
    s.close().await.expect("close");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_killed_worker_with_a_queued_followup_leaves_nothing_queued_or_running() {
    let env = Env::new(Vec::new());
    let mark = unique_mark(env.dir.path());
    let command = format!("export {mark}; setsid sleep 1000 & sleep 1000");
    env.server.push(Reply::tool_call(
        "call_1",
        "bash",
        &json!({"command": command}).to_string(),
    ));
    env.server.push(Reply::text("Resumed and done."));
    let mut reaper = Reaper::new(env.dir.path());
    reaper.mark(&mark);
    let s = env.broker("broker").await;
    let broker = reaper.broker(s.pid());

    let (child, run) = spawn(&s, &env, "coder", "Run the long job").await;
    let sent = send(
        &s,
        json!({"childId": child, "mode": "followup", "message": "Then this"}),
    )
    .await;
    assert_eq!(sent.delivery, p::SendOutputDelivery::Queued, "{sent:#?}");
    wait_for(Duration::from_secs(20), || {
        let found = marked(&mark);
        (found.len() >= 2).then_some(found)
    })
    .expect("the bash tool started its sleeps");
    let worker = workers_of(broker);
    assert_eq!(worker.len(), 1, "{worker:?}");
    sigkill(worker[0]);

    let snap = until_snap(&s, &child, Duration::from_secs(15), |v| {
        v.state != p::ChildState::Running
    })
    .await;
    assert_eq!(snap.state, p::ChildState::Interrupted, "{snap:#?}");
    // Both the active run and the queued followup end interrupted (the followup is the
    // later run, so it is the one `lastRun` shows).
    assert!(
        last(&snap).run_id.as_str() == run || last(&snap).run_id == sent.run_id,
        "{snap:#?}"
    );
    assert_eq!(
        last_status(&snap),
        Some(p::TerminalRunStatus::Interrupted),
        "{snap:#?}"
    );
    assert!(
        snap.queued_runs.is_empty(),
        "the queued followup survived the interruption: {snap:#?}"
    );
    assert!(
        eventually(Duration::from_secs(5), || marked(&mark).is_empty()),
        "tool processes (including a setsid escapee) outlived their worker: {:?}",
        marked(&mark)
    );
    // No run is left queued or running in the database; nothing was replayed.
    let conn = rusqlite::Connection::open_with_flags(
        env.state_dir().join("subzero.db"),
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
    )
    .expect("open the database");
    let open: i64 = conn
        .query_row(
            "SELECT count(*) FROM runs WHERE child_id = ?1 AND status IN ('queued', 'running', 'stop_requested')",
            [&child],
            |r| r.get(0),
        )
        .expect("count");
    assert_eq!(open, 0, "runs left open after the interruption");
    let interrupted: i64 = conn
        .query_row(
            "SELECT count(*) FROM runs WHERE child_id = ?1 AND status = 'interrupted'",
            [&child],
            |r| r.get(0),
        )
        .expect("count");
    assert_eq!(
        interrupted, 2,
        "the active run and the queued followup end interrupted"
    );
    assert_eq!(
        env.server.requests().len(),
        1,
        "the queued followup was dispatched to a dead child"
    );

    let resumed = resume(
        &s,
        json!({"childId": child, "model": env.model(), "message": "Carry on"}),
    )
    .await;
    let snap = settled(&s, &child, Duration::from_secs(30)).await;
    assert_resumed_run_completed(&snap, &resumed);
    s.close().await.expect("close");
}
