//! A dead broker's children are not stuck for the brokers that survive it: once the dead
//! broker's locks are free, any live broker recovers such a child on first access —
//! `get` shows it `interrupted` (reason `broker_lost`), `stop` answers as for any
//! interrupted child, and `resume` runs it there at once — without a broker restart.

use std::time::Duration;

use crate::support::faults::{Reaper, alive, descendants, eventually, running_in, sigkill};
use crate::support::mcp::*;
use serde_json::json;
use subzero_testkit::Reply;

#[tokio::test(flavor = "multi_thread")]
async fn a_surviving_broker_recovers_and_resumes_the_children_of_a_killed_one() {
    let env = Env::new(vec![Reply::Hang, Reply::Hang]);
    let mut reaper = Reaper::new(env.dir.path());
    let a = env.broker("broker-a").await;
    let a_pid = reaper.broker(a.pid());
    let b = env.broker("broker-b").await;
    reaper.broker(b.pid());

    let (first, first_run) = spawn(&a, &env, "researcher", "Work on it").await;
    let (second, second_run) = spawn(&a, &env, "researcher", "Work on that").await;
    assert!(env.server.wait_for_requests(2, Duration::from_secs(20)));
    // Before the kill, B sees A's children running and cannot take them over.
    let seen = get(&b, json!({"childId": first})).await;
    assert_eq!(seen.state, p::ChildState::Running, "{seen:#?}");

    let tree = descendants(a_pid);
    sigkill(a_pid);
    assert!(
        eventually(Duration::from_secs(5), || tree
            .iter()
            .all(|p| !alive(p.pid))
            && running_in(&env.workspace()).is_empty()),
        "the killed broker's workers survived"
    );

    // B, alive throughout, recovers on first access: no restart.
    let snap = get(&b, json!({"childId": first})).await;
    assert_eq!(snap.state, p::ChildState::Interrupted, "{snap:#?}");
    assert_eq!(last(&snap).run_id.as_str(), first_run.as_str(), "{snap:#?}");
    assert_eq!(
        last_status(&snap),
        Some(p::TerminalRunStatus::Interrupted),
        "{snap:#?}"
    );
    let message = last(&snap)
        .error
        .as_ref()
        .map(|e| e.message.as_str())
        .unwrap_or_default();
    assert!(message.contains("broker_lost"), "{snap:#?}");

    // stop of the other child answers as for any child that is no longer running.
    let stopped = call(
        &b,
        "subzero_stop",
        json!({"childId": second, "expectedRunId": second_run}),
    )
    .await;
    assert_ne!(
        stopped.code(),
        Some("busy"),
        "stop of a dead broker's child is still busy: {}",
        stopped.text
    );
    let snap = get(&b, json!({"childId": second})).await;
    assert_eq!(snap.state, p::ChildState::Interrupted, "{snap:#?}");

    // resume runs it here at once.
    env.server.push(Reply::text("Picked up again."));
    let resumed = resume(
        &b,
        json!({"childId": first, "model": env.model(), "message": "Carry on"}),
    )
    .await;
    assert_eq!(resumed.state, p::ResumeOutputState::Running, "{resumed:#?}");
    let snap = settled(&b, &first, Duration::from_secs(30)).await;
    assert_eq!(
        last_status(&snap),
        Some(p::TerminalRunStatus::Completed),
        "{snap:#?}"
    );
    b.close().await.expect("close");
}

#[tokio::test(flavor = "multi_thread")]
async fn listing_is_a_first_access_too_and_shows_a_dead_brokers_child_interrupted() {
    let env = Env::new(vec![Reply::Hang]);
    let mut reaper = Reaper::new(env.dir.path());
    let a = env.broker("broker-a").await;
    let a_pid = reaper.broker(a.pid());
    let b = env.broker("broker-b").await;
    reaper.broker(b.pid());

    let (child, _run) = spawn(&a, &env, "researcher", "Work on it").await;
    assert!(env.server.wait_for_requests(1, Duration::from_secs(20)));
    let tree = descendants(a_pid);
    sigkill(a_pid);
    assert!(
        eventually(Duration::from_secs(5), || tree
            .iter()
            .all(|p| !alive(p.pid))
            && !alive(a_pid)),
        "the killed broker or its workers survived"
    );

    // The first thing B does with the child is list it: it is shown as it now is.
    let listed = list(&b, json!({})).await;
    let entry = &listed.children[0];
    assert_eq!(entry.child_id.as_str(), child, "{listed:#?}");
    assert_eq!(entry.state, p::ChildState::Interrupted, "{listed:#?}");
    b.close().await.expect("close");
}
