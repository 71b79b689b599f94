//! A broker that dies mid-run: the next broker on the same state sees the child
//! interrupted, refuses new work until resume supplies credentials, and resumes from
//! the last completed checkpoint — on a different model if asked — without replaying.

use std::time::Duration;

use crate::support::mcp::*;
use serde_json::json;
use subzero_testkit::{Reply, ScriptedServer};

#[tokio::test(flavor = "multi_thread")]
async fn a_killed_broker_leaves_an_interrupted_child_that_resumes_from_its_checkpoint() {
    let env = Env::new(vec![
        Reply::text("first answer: the project is a demo"),
        Reply::Hang,
    ]);
    let other = ScriptedServer::start(vec![Reply::text("resumed answer")]).expect("second model");
    let other_origin = other.base_url().trim_end_matches("/v1").to_owned();
    std::fs::write(
        env.config(),
        format!(
            "[credentials.{CRED}]\nenv = \"SUBZERO_TEST_KEY\"\norigins = [\"{}\", \"{other_origin}\"]\n",
            env.origin()
        ),
    )
    .expect("config");

    let first = env.broker("first").await;
    let (child, _) = spawn(&first, &env, "researcher", "What is this project?").await;
    let done = settled(&first, &child, Duration::from_secs(30)).await;
    assert_eq!(
        last_status(&done),
        Some(p::TerminalRunStatus::Completed),
        "{done:#?}"
    );
    let interrupted_prompt = "INTERRUPTED-PROMPT-7c1e: look deeper";
    let running = send(
        &first,
        json!({"childId": child, "mode": "followup", "message": interrupted_prompt}),
    )
    .await;
    assert_eq!(
        running.delivery,
        p::SendOutputDelivery::Started,
        "{running:#?}"
    );
    assert!(
        env.server.wait_for_requests(2, Duration::from_secs(10)),
        "the second run never reached the model"
    );

    sigkill(first.pid().expect("broker pid"));
    assert!(
        wait_no_workers(&env.workspace(), Duration::from_secs(5)),
        "workers survived their broker: {:?}",
        workers_in(&env.workspace())
    );
    drop(first);

    let second = env.broker("second").await;
    let listed = list(&second, json!({})).await;
    let first_listed = listed.children.first().expect("a child is listed");
    assert_eq!(first_listed.child_id.as_str(), child, "{listed:#?}");
    assert_eq!(
        first_listed.state,
        p::ChildState::Interrupted,
        "{listed:#?}"
    );
    let snap = snapshot(&second, &child).await;
    assert_eq!(last(&snap).run_id, running.run_id, "{snap:#?}");
    assert_eq!(
        last(&snap).status,
        p::TerminalRunStatus::Interrupted,
        "{snap:#?}"
    );

    // No key in this broker's memory: work continues only through resume.
    let code = err(
        &second,
        "subzero_send",
        json!({"childId": child, "mode": "followup", "message": "go on"}),
    )
    .await;
    assert_eq!(code, "credentials_required");

    let other_model = json!({"url": other.base_url(), "model": "other", "credentialRef": CRED});
    let resumed = resume(
        &second,
        json!({"childId": child, "model": other_model, "message": "Continue from where you were."}),
    )
    .await;
    assert_eq!(resumed.state, p::ResumeOutputState::Running, "{resumed:#?}");
    let after = settled(&second, &child, Duration::from_secs(30)).await;
    assert_eq!(
        Some(&last(&after).run_id),
        resumed.run_id.as_ref(),
        "{after:#?}"
    );
    assert_eq!(
        last(&after).preview.as_str(),
        "resumed answer",
        "{after:#?}"
    );
    assert_eq!(after.model.url.as_str(), other.base_url(), "{after:#?}");

    // The resumed run started from the checkpoint: it saw the completed first run and a
    // recovery notice, and the interrupted prompt was not replayed.
    let body = other.requests()[0].json().unwrap_or_default().to_string();
    assert!(
        body.contains("first answer: the project is a demo"),
        "{body}"
    );
    assert!(body.contains("Recovery notice"), "{body}");
    assert!(!body.contains("INTERRUPTED-PROMPT-7c1e"), "{body}");
    assert_eq!(
        env.server.requests().len(),
        2,
        "nothing was retried against the first model"
    );
    second.close().await.expect("close");
    assert!(
        env.files_containing(KEY).is_empty(),
        "key on disk: {:?}",
        env.files_containing(KEY)
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn resume_without_a_message_makes_the_child_ready_and_starts_nothing() {
    let env = Env::new(vec![Reply::text("answer"), Reply::text("after resume")]);
    let first = env.broker("first").await;
    let (child, _) = spawn(&first, &env, "researcher", "q").await;
    settle(&first, &child, Duration::from_secs(30)).await;
    first.close().await.expect("close");

    let second = env.broker("second").await;
    let resumed = resume(&second, json!({"childId": child, "model": env.model()})).await;
    assert_eq!(resumed.state, p::ResumeOutputState::Ready, "{resumed:#?}");
    assert_eq!(resumed.run_id, None, "{resumed:#?}");
    assert!(
        workers_in(&env.workspace()).is_empty(),
        "resume without a message started a worker"
    );
    assert_eq!(env.server.requests().len(), 1);
    let sent = send(
        &second,
        json!({"childId": child, "mode": "followup", "message": "more"}),
    )
    .await;
    assert_eq!(sent.delivery, p::SendOutputDelivery::Started, "{sent:#?}");
    let snap = settled(&second, &child, Duration::from_secs(30)).await;
    assert_eq!(last(&snap).preview.as_str(), "after resume", "{snap:#?}");
    second.close().await.expect("close");
}

#[tokio::test(flavor = "multi_thread")]
async fn sigterm_stops_active_runs_clears_queues_and_records_the_outcome() {
    let env = Env::new(vec![Reply::Hang]);
    let first = env.broker("first").await;
    let (child, run) = spawn(&first, &env, "researcher", "never ends").await;
    let queued = send(
        &first,
        json!({"childId": child, "mode": "followup", "message": "later"}),
    )
    .await;
    assert!(env.server.wait_for_requests(1, Duration::from_secs(10)));
    let pid = first.pid().expect("broker pid");
    let _ = std::process::Command::new("kill")
        .arg("-TERM")
        .arg(pid.to_string())
        .status();
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    while std::path::Path::new(&format!("/proc/{pid}/stat")).exists()
        && std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| !s.contains(") Z "))
        && std::time::Instant::now() < deadline
    {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        std::time::Instant::now() < deadline,
        "the broker did not exit within 15 s of SIGTERM"
    );
    assert!(
        wait_no_workers(&env.workspace(), Duration::from_secs(5)),
        "workers outlived a clean shutdown"
    );
    drop(first);
    let second = env.broker("second").await;
    let snap = get(&second, json!({"childId": child, "eventLimit": 50})).await;
    assert_ne!(snap.state, p::ChildState::Running, "{snap:#?}");
    assert!(snap.queued_runs.is_empty(), "{snap:#?}");
    let runs: Vec<(&str, &str)> = snap
        .events
        .iter()
        .filter(|e| matches!(kind(e), "stop_confirmed" | "interrupted"))
        .map(|e| {
            let last = snap.last_run.as_ref().map(|r| &r.run_id);
            (kind(e), e.run_in(last).map_or("", |r| r.as_str()))
        })
        .collect();
    assert!(
        runs.iter().any(|(_, r)| *r == run),
        "the active run's end was not recorded: {runs:?}"
    );
    assert_eq!(last(&snap).run_id.as_str(), run, "{snap:#?}");
    let _ = queued;
    second.close().await.expect("close");
}
