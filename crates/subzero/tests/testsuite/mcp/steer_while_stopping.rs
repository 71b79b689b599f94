//! A steer sent while a stop is pending answers `not_running`, decided by the core's
//! lifecycle (`docs/lifecycle.md`, `ui-tests/tests/ui/steer_while_stopping.rs`): the run
//! the steer would modify is already being stopped. The worker is frozen (SIGSTOP) so the
//! stop stays requested, unconfirmed, for as long as the test needs.

use std::process::Command;
use std::time::Duration;

use crate::support::faults::Reaper;
use crate::support::mcp::*;
use serde_json::json;
use subzero_testkit::Reply;

fn signal(pid: u32, name: &str) {
    let status = Command::new("kill")
        .arg(format!("-{name}"))
        .arg(pid.to_string())
        .status()
        .expect("kill");
    assert!(status.success());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_steer_on_a_child_whose_stop_is_pending_is_not_running_and_not_delivered() {
    let env = Env::new(vec![Reply::Hang]);
    let mut reaper = Reaper::new(env.dir.path());
    let s = env.broker("broker").await;
    reaper.broker(s.pid());
    let (child, run) = spawn(&s, &env, "researcher", "Take your time").await;
    assert!(env.server.wait_for_requests(1, Duration::from_secs(20)));
    let workers = workers_in(&env.workspace());
    assert_eq!(workers.len(), 1, "{workers:?}");
    signal(workers[0], "STOP");

    let stop = stop(&s, json!({"childId": child, "expectedRunId": run})).await;
    assert!(!stop.confirmed, "{stop:#?}");
    let snap = get(&s, json!({"childId": child})).await;
    assert_eq!(snap.state, p::ChildState::Running, "{snap:#?}");

    let reply = call(
        &s,
        "subzero_send",
        json!({"childId": child, "mode": "steer", "message": "one more thing"}),
    )
    .await;
    signal(workers[0], "CONT");
    assert!(
        reply.is_error,
        "a steer during a pending stop was accepted: {}",
        reply.text
    );
    assert_eq!(reply.code(), Some("not_running"), "{}", reply.text);
    assert!(
        reply.text.contains("stopping"),
        "the core's message says why: {}",
        reply.text
    );

    let snap = settled(&s, &child, Duration::from_secs(20)).await;
    assert_eq!(
        last_status(&snap),
        Some(p::TerminalRunStatus::Stopped),
        "{snap:#?}"
    );
    let kinds = kinds(&snap);
    assert!(
        !kinds.iter().any(|k| k.starts_with("steer")),
        "the steer reached the worker: {kinds:?}"
    );
    s.close().await.expect("close");
}
