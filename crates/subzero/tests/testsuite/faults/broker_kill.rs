//! A broker SIGKILLed during admission and during settle. The exact moment cannot be
//! chosen, so each case is approximated (right after spawn returns, while the spawn call
//! is in flight, around the end of the model's last streamed reply) and tried at a few
//! offsets. Whatever the moment: every worker descendant of the dead broker goes away,
//! a second broker on the same state dir never shows the child `running`, and resume
//! works.

use std::time::Duration;

use crate::support::faults::{
    Proc, Reaper, alive, descendants, eventually, marked, running_in, sigkill, unique_mark,
    wait_for,
};
use crate::support::mcp::*;
use serde_json::json;
use subzero_testkit::mcp_client::McpSession;
use subzero_testkit::{Reply, Step};

/// SIGKILL the broker; every process it started (and its tools) must be gone soon.
fn kill_broker(env: &Env, broker: u32) {
    let tree: Vec<Proc> = descendants(broker);
    sigkill(broker);
    let gone = eventually(Duration::from_secs(5), || {
        tree.iter().all(|p| !alive(p.pid)) && running_in(env.dir.path()).is_empty()
    });
    assert!(
        gone,
        "processes of the killed broker survived: {:?} / in the workspace: {:?}",
        tree.iter().filter(|p| alive(p.pid)).collect::<Vec<_>>(),
        running_in(env.dir.path())
    );
}

/// A second broker on the same state dir: the child is not `running`; resume with a
/// message completes. Returns the snapshot the second broker saw first.
async fn second_broker_recovers(env: &Env, reaper: &mut Reaper, child: &str) -> p::ChildSnapshot {
    let s = env.broker("broker2").await;
    reaper.broker(s.pid());
    let listed = list(&s, json!({})).await;
    let summary = listed
        .children
        .iter()
        .find(|c| c.child_id.as_str() == child)
        .unwrap_or_else(|| panic!("child {child} lost: {listed:#?}"));
    assert_ne!(summary.state, p::ChildState::Running, "{summary:#?}");
    assert_eq!(summary.active_run_id, None, "{summary:#?}");
    let first = snapshot(&s, child).await;
    assert_eq!(first.state, summary.state, "{first:#?}");
    match first.state {
        p::ChildState::Interrupted => {
            assert_eq!(
                last_status(&first),
                Some(p::TerminalRunStatus::Interrupted),
                "{first:#?}"
            );
        }
        p::ChildState::Ready => {
            // The settle committed before the kill: its result is whole and readable.
            let ended = last(&first);
            assert_eq!(ended.status, p::TerminalRunStatus::Completed, "{first:#?}");
            let artifact = ended.artifact_id.as_ref().expect("artifact");
            let out = read_output(&s, json!({"artifactId": artifact})).await;
            assert!(out.eof, "{out:#?}");
            assert_eq!(out.text.as_str(), ended.preview.as_str(), "{out:#?}");
        }
        other => panic!("unexpected state {other:?}: {first:#?}"),
    }
    let resumed = resume(
        &s,
        json!({"childId": child, "model": env.model(), "message": "Carry on"}),
    )
    .await;
    assert_eq!(resumed.state, p::ResumeOutputState::Running, "{resumed:#?}");
    let snap = settled(&s, child, Duration::from_secs(30)).await;
    assert_eq!(snap.state, p::ChildState::Ready, "{snap:#?}");
    assert_resumed_run_completed(&snap, &resumed);
    s.close().await.expect("close");
    first
}

#[tokio::test(flavor = "multi_thread")]
async fn a_broker_killed_right_after_spawn_returns_leaves_an_interrupted_child() {
    let env = Env::new(vec![
        Reply::Sse(vec![
            Step::delay_ms(2000),
            Step::text("Too late."),
            Step::finish("stop"),
            Step::done(),
        ]),
        Reply::text("Resumed."),
        Reply::text("Resumed."),
    ]);
    let mut reaper = Reaper::new(env.dir.path());
    let s = env.broker("broker1").await;
    let broker = reaper.broker(s.pid());
    let started = std::time::Instant::now();
    let (child, _run) = spawn(&s, &env, "researcher", "Slow work").await;
    eprintln!("spawn took {:?}", started.elapsed());
    kill_broker(&env, broker);
    drop(s);
    let first = second_broker_recovers(&env, &mut reaper, &child).await;
    assert_eq!(first.state, p::ChildState::Interrupted, "{first:#?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_broker_killed_while_spawn_is_in_flight_never_leaves_a_running_child() {
    for delay_ms in [0u64, 10, 20, 30, 45, 70] {
        let env = Env::new(vec![
            Reply::Sse(vec![
                Step::delay_ms(2000),
                Step::text("Too late."),
                Step::finish("stop"),
                Step::done(),
            ]),
            Reply::text("Resumed."),
            Reply::text("Resumed."),
        ]);
        let mut reaper = Reaper::new(env.dir.path());
        let s = env.broker("broker1").await;
        let broker = reaper.broker(s.pid());
        let args = json!({"prompt": "Slow work", "templateId": "researcher", "model": env.model()});
        let (reply, ()) = tokio::join!(s.call("subzero_spawn", args), async {
            tokio::time::sleep(Duration::from_millis(delay_ms)).await;
            kill_broker(&env, broker);
        });
        drop(s);
        // Whether or not the reply made it out, the child (if any) must be recoverable.
        let child = match reply {
            Ok(r) if !r.is_error => {
                let out: p::SpawnOutput = parse("subzero_spawn", &r.structured);
                Some(out.child_id.to_string())
            }
            _ => None,
        };
        let child = match child {
            Some(c) => Some(c),
            None => listed_child(&env, &mut reaper).await,
        };
        match child {
            Some(child) => {
                let first = second_broker_recovers(&env, &mut reaper, &child).await;
                eprintln!(
                    "killed {delay_ms} ms into spawn: the child was {}",
                    first.state
                );
            }
            None => eprintln!("killed {delay_ms} ms into spawn: no child was admitted"),
        }
    }
}

/// The one child a second broker lists, if any (none when the kill beat the admission).
async fn listed_child(env: &Env, reaper: &mut Reaper) -> Option<String> {
    let s: McpSession = env.broker("broker-list").await;
    reaper.broker(s.pid());
    let listed = list(&s, json!({})).await;
    s.close().await.expect("close");
    assert!(listed.children.len() <= 1, "{listed:#?}");
    listed.children.first().map(|c| c.child_id.to_string())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_broker_killed_around_settle_leaves_a_ready_or_interrupted_child() {
    // The last reply streams for ~300 ms after the request lands; the kill comes at or
    // just after its end, when the worker commits its leaf and the broker settles.
    for late_ms in [290u64, 300, 310, 325, 350] {
        let env = Env::new(vec![
            Reply::Sse(vec![
                Step::text("Almost"),
                Step::delay_ms(300),
                Step::text(" there."),
                Step::finish("stop"),
                Step::usage(10, 5),
                Step::done(),
            ]),
            Reply::text("Resumed."),
        ]);
        let mut reaper = Reaper::new(env.dir.path());
        let s = env.broker("broker1").await;
        let broker = reaper.broker(s.pid());
        let (child, _run) = spawn(&s, &env, "researcher", "Finish up").await;
        assert!(env.server.wait_for_requests(1, Duration::from_secs(20)));
        tokio::time::sleep(Duration::from_millis(late_ms)).await;
        kill_broker(&env, broker);
        drop(s);
        let first = second_broker_recovers(&env, &mut reaper, &child).await;
        eprintln!(
            "killed {late_ms} ms after the request: the child was {}",
            first.state
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_broker_killed_mid_tool_takes_the_whole_tool_tree_with_it() {
    let env = Env::new(Vec::new());
    let mark = unique_mark(env.dir.path());
    let command = format!("export {mark}; sleep 1000 & setsid sleep 1000 & sleep 1000");
    env.server.push(Reply::tool_call(
        "call_1",
        "bash",
        &json!({"command": command}).to_string(),
    ));
    env.server.push(Reply::text("Resumed."));
    let mut reaper = Reaper::new(env.dir.path());
    reaper.mark(&mark);
    let s = env.broker("broker1").await;
    let broker = reaper.broker(s.pid());
    let (child, _run) = spawn(&s, &env, "coder", "Run the long job").await;
    let sleeps = wait_for(Duration::from_secs(20), || {
        let found = marked(&mark);
        (found.len() >= 3).then_some(found)
    });
    assert!(
        sleeps.is_some(),
        "the bash tool did not start its sleeps: {:?}",
        marked(&mark)
    );
    kill_broker(&env, broker);
    drop(s);
    assert!(
        eventually(Duration::from_secs(5), || marked(&mark).is_empty()),
        "tool processes (including a setsid escapee) outlived the broker: {:?}",
        marked(&mark)
    );
    let first = second_broker_recovers(&env, &mut reaper, &child).await;
    assert_eq!(first.state, p::ChildState::Interrupted, "{first:#?}");
}
