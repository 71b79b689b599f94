//! A model that never answers, then `subzero_stop`: the stop is confirmed, the run is
//! `stopped`, and no worker process of the broker is left.

use std::time::Duration;

use crate::support::faults::{
    Reaper, eventually, marked, running_in, unique_mark, wait_for, workers_of,
};
use crate::support::mcp::*;
use serde_json::json;
use subzero_testkit::{Reply, Step};

async fn a_hanging_model_is_stopped_with_confirmation(hang: Reply) {
    let env = Env::new(vec![hang, Reply::text("After the stop.")]);
    let mut reaper = Reaper::new(env.dir.path());
    let s = env.broker("broker").await;
    let broker = reaper.broker(s.pid());

    let (child, run) = spawn(&s, &env, "researcher", "Think hard").await;
    assert!(
        env.server.wait_for_requests(1, Duration::from_secs(20)),
        "the model was never called"
    );
    let worker = wait_for(Duration::from_secs(5), || {
        workers_of(broker).first().copied()
    });
    assert!(worker.is_some(), "no worker process under the broker");

    let stop = stop(
        &s,
        json!({"childId": child, "expectedRunId": run, "waitMs": 10000}),
    )
    .await;
    assert!(stop.requested, "{stop:#?}");
    assert!(stop.confirmed, "{stop:#?}");
    assert_eq!(stop.status, p::RunStatus::Stopped, "{stop:#?}");
    assert_eq!(stop.run_id.as_str(), run);

    let snap = get(&s, json!({"childId": child})).await;
    assert_eq!(snap.state, p::ChildState::Ready, "{snap:#?}");
    assert_eq!(snap.active_run_id, None, "{snap:#?}");
    assert_eq!(
        last_status(&snap),
        Some(p::TerminalRunStatus::Stopped),
        "{snap:#?}"
    );
    let kinds = kinds(&snap);
    assert!(
        kinds.contains(&"stop_requested") && kinds.contains(&"stop_confirmed"),
        "{kinds:?}"
    );

    // The worker closes once nothing is queued; confirmation already means its tree is gone.
    assert!(
        eventually(Duration::from_secs(5), || workers_of(broker).is_empty()),
        "worker processes left under the broker: {:?}",
        workers_of(broker)
    );
    assert!(
        running_in(env.dir.path()).is_empty(),
        "processes left in the workspace: {:?}",
        running_in(env.dir.path())
    );

    // Nothing was retried, and the child still works.
    assert_eq!(env.server.requests().len(), 1);
    let sent = send(
        &s,
        json!({"childId": child, "mode": "followup", "message": "Again"}),
    )
    .await;
    assert_eq!(sent.delivery, p::SendOutputDelivery::Started, "{sent:#?}");
    let snap = settled(&s, &child, Duration::from_secs(30)).await;
    assert_eq!(
        last_status(&snap),
        Some(p::TerminalRunStatus::Completed),
        "{snap:#?}"
    );
    assert_eq!(last(&snap).preview.as_str(), "After the stop.", "{snap:#?}");
    s.close().await.expect("close");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_model_that_never_sends_headers_is_stopped_with_confirmation() {
    a_hanging_model_is_stopped_with_confirmation(Reply::Hang).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_model_that_hangs_mid_stream_is_stopped_with_confirmation() {
    a_hanging_model_is_stopped_with_confirmation(Reply::Sse(vec![
        Step::text("Let me think"),
        Step::Hang,
    ]))
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_stop_is_confirmed_only_after_the_whole_tool_tree_is_gone() {
    // A bash tool with a background job, a `setsid` escapee and a foreground sleep.
    let env = Env::new(Vec::new());
    let mark = unique_mark(env.dir.path());
    let command = format!("export {mark}; sleep 1000 & setsid sleep 1000 & sleep 1000");
    env.server.push(Reply::tool_call(
        "call_1",
        "bash",
        &json!({"command": command}).to_string(),
    ));
    env.server.push(Reply::text("After the stop."));
    let mut reaper = Reaper::new(env.dir.path());
    reaper.mark(&mark);
    let s = env.broker("broker").await;
    let broker = reaper.broker(s.pid());

    let (child, run) = spawn(&s, &env, "coder", "Run the long job").await;
    let sleeps = wait_for(Duration::from_secs(20), || {
        let found = marked(&mark);
        (found.len() >= 3).then_some(found)
    });
    assert!(
        sleeps.is_some(),
        "the bash tool did not start its sleeps: {:?}",
        marked(&mark)
    );

    let stop = stop(
        &s,
        json!({"childId": child, "expectedRunId": run, "waitMs": 10000}),
    )
    .await;
    assert!(stop.confirmed, "{stop:#?}");
    assert_eq!(stop.status, p::RunStatus::Stopped, "{stop:#?}");
    // Confirmed means gone: no grace period here.
    assert!(
        marked(&mark).is_empty(),
        "tool processes alive after a confirmed stop: {:?}",
        marked(&mark)
    );
    assert!(
        eventually(Duration::from_secs(5), || workers_of(broker).is_empty()),
        "workers left: {:?}",
        workers_of(broker)
    );
    let snap = get(&s, json!({"childId": child})).await;
    assert_eq!(snap.state, p::ChildState::Ready, "{snap:#?}");
    assert_eq!(
        last_status(&snap),
        Some(p::TerminalRunStatus::Stopped),
        "{snap:#?}"
    );
    s.close().await.expect("close");
}
