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
    let seen = ok(&b, "subzero_get", json!({"childId": first})).await;
    assert_eq!(seen["state"], "running", "{seen:#}");

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
    let snap = ok(&b, "subzero_get", json!({"childId": first})).await;
    assert_eq!(snap["state"], "interrupted", "{snap:#}");
    assert_eq!(snap["lastRun"]["runId"], first_run.as_str(), "{snap:#}");
    assert_eq!(snap["lastRun"]["status"], "interrupted", "{snap:#}");
    let message = snap["lastRun"]["error"]["message"]
        .as_str()
        .unwrap_or_default();
    assert!(message.contains("broker_lost"), "{snap:#}");

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
    let snap = ok(&b, "subzero_get", json!({"childId": second})).await;
    assert_eq!(snap["state"], "interrupted", "{snap:#}");

    // resume runs it here at once.
    env.server.push(Reply::text("Picked up again."));
    let resumed = ok(
        &b,
        "subzero_resume",
        json!({"childId": first, "model": env.model(), "message": "Carry on"}),
    )
    .await;
    assert_eq!(resumed["state"], "running", "{resumed:#}");
    let snap = settle(&b, &first, Duration::from_secs(30)).await;
    assert_eq!(snap["lastRun"]["status"], "completed", "{snap:#}");
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
    let listed = ok(&b, "subzero_list", json!({})).await;
    let entry = &listed["children"][0];
    assert_eq!(entry["childId"], child.as_str(), "{listed:#}");
    assert_eq!(entry["state"], "interrupted", "{listed:#}");
    b.close().await.expect("close");
}
