//! A `subzero_get` is one moment of the child: its row, runs and events come from one read.
//! Read apart, a run settled between the reads showed as both the active run and the last
//! one (`activeRunId` == `lastRun.runId`), a state that never existed; a scenario replay
//! caught it under CI's load. Here gets race a chain of queued follow-ups that settle and
//! dispatch back to back, and every snapshot must be a state the child was in.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use crate::support::mcp::*;
use serde_json::json;
use subzero_testkit::Reply;

const FOLLOWUPS: usize = 12;

/// Whether `snap` is a state the child can have been in; why not, if it is not.
fn impossible(snap: &p::ChildSnapshot) -> Option<String> {
    let active = snap.active_run_id.as_deref();
    let last = snap.last_run.as_ref().map(|run| &run.run_id);
    if active.is_some() && active == last.map(|r| &**r) {
        return Some(format!("run {} is both active and the last ended", active?));
    }
    if let Some(last) = last
        && snap.queued_runs.contains(last)
    {
        return Some(format!("run {} is both queued and ended", last.as_str()));
    }
    if (snap.state == p::ChildState::Running) != active.is_some() {
        return Some(format!("state {} with activeRunId {active:?}", snap.state));
    }
    None
}

#[tokio::test(flavor = "multi_thread")]
async fn every_get_is_one_moment_while_followups_settle_back_to_back() {
    let mut script = vec![Reply::text("answer 0")];
    script.extend((1..=FOLLOWUPS).map(|i| Reply::text(&format!("answer {i}"))));
    let env = Env::new(script);
    let s = env.broker("broker").await;
    let (child, _) = spawn(&s, &env, "researcher", "answer 0").await;
    let mut runs = HashSet::new();
    for i in 1..=FOLLOWUPS {
        let sent = send(
            &s,
            json!({"childId": child, "mode": "followup", "message": format!("answer {i}")}),
        )
        .await;
        runs.insert(sent.run_id.to_string());
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut seen = 0usize;
    loop {
        let (a, b) = tokio::join!(
            snapshot(&s, &child),
            get(&s, json!({"childId": child, "eventLimit": 1})),
        );
        for snap in [&a, &b] {
            seen += 1;
            if let Some(why) = impossible(snap) {
                panic!("snapshot {seen} shows a state that never was: {why}\n{snap:#?}");
            }
        }
        if a.state != p::ChildState::Running {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the follow-ups never settled: {a:#?}"
        );
    }
    let snap = settled(&s, &child, Duration::from_secs(30)).await;
    assert_eq!(snap.state, p::ChildState::Ready, "{snap:#?}");
    let ended = last(&snap);
    assert_eq!(
        ended.preview.as_str(),
        format!("answer {FOLLOWUPS}"),
        "{snap:#?}"
    );
    assert!(runs.contains(ended.run_id.as_str()), "{snap:#?}");
}
