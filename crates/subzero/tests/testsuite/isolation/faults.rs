//! Isolated children under the faults the rest of the suite throws at shared ones: the
//! broker SIGKILLed mid-run, two brokers racing for one change, a template that isolates
//! its children by default.

use std::path::Path;
use std::time::Duration;

use serde_json::json;
use subzero_testkit::procs::{alive, descendants, running_in, sigkill};

use super::support::*;
use crate::support::faults::eventually;

#[tokio::test(flavor = "multi_thread")]
async fn a_broker_killed_mid_run_resumes_in_the_same_checkout_and_loses_nothing() {
    let g = GitEnv::new();
    let mut reaper = Reaper::new(g.env.dir.path());
    let s = g.broker("broker1", &mut reaper).await;
    let child = g
        .isolated_coder(&s, "PLAN bash echo first > a.txt; sleep 600")
        .await;
    // Mid-run: the tool has written its checkout and is still running.
    let snap = snapshot(&s, &child).await;
    let path = checkout(&snap).path.clone();
    assert_eq!(checkout(&snap).state, p::CheckoutState::InUse, "{snap:#?}");
    assert!(
        eventually(Duration::from_secs(30), || Path::new(&path)
            .join("a.txt")
            .exists()),
        "the tool never wrote its checkout"
    );
    let broker = s.pid().expect("the broker has a pid");
    let tree = descendants(broker);
    sigkill(broker);
    assert!(
        eventually(Duration::from_secs(10), || tree
            .iter()
            .all(|p| !alive(p.pid))
            && running_in(g.env.dir.path()).is_empty()),
        "processes of the killed broker survived"
    );
    drop(s);

    let s = g.broker("broker2", &mut reaper).await;
    let resumed = resume(
        &s,
        json!({"childId": child, "model": g.model_arg(), "message": "PLAN write b.txt second\\n"}),
    )
    .await;
    assert_eq!(resumed.state, p::ResumeOutputState::Running, "{resumed:#?}");
    let snap = settled_child(&s, &child).await;
    let co = checkout(&snap);
    assert_eq!(co.path, path, "the resumed run works in the same checkout");
    assert_eq!(co.state, p::CheckoutState::SettledChanged, "{co:#?}");
    let change = co.change.as_ref().expect("a change");
    assert_eq!(
        change.files_changed, 2,
        "both runs' files are the change: {co:#?}"
    );
    s.close().await.expect("close");
}

#[tokio::test(flavor = "multi_thread")]
async fn two_brokers_racing_to_apply_one_change_land_it_once() {
    let g = GitEnv::new();
    let mut reaper = Reaper::new(g.env.dir.path());
    let a = g.broker("broker1", &mut reaper).await;
    let child = g.isolated_coder(&a, "PLAN write raced.txt once\\n").await;
    settled_child(&a, &child).await;
    let b = g.broker("broker2", &mut reaper).await;
    let args = json!({"childId": child});
    let (first, second) = tokio::join!(apply(&a, args.clone()), apply(&b, args));
    let outcomes = [&first, &second];
    let landed = outcomes.iter().filter(|r| !r.is_error).count();
    assert_eq!(landed, 1, "{} / {}", first.text, second.text);
    let refused = outcomes.iter().find(|r| r.is_error).expect("one refused");
    assert!(
        matches!(refused.code(), Some("change_unavailable" | "busy")),
        "{}",
        refused.text
    );
    assert_eq!(
        std::fs::read_to_string(g.workspace().join("raced.txt")).expect("landed"),
        "once\n"
    );
    let snap = snapshot(&b, &child).await;
    assert_eq!(
        checkout(&snap).state,
        p::CheckoutState::Applied,
        "{snap:#?}"
    );
    a.close().await.expect("close");
    b.close().await.expect("close");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_template_that_isolates_by_default_gives_each_spawn_a_checkout() {
    let g = GitEnv::new();
    let config = std::fs::read_to_string(g.env.config()).expect("config");
    std::fs::write(
        g.env.config(),
        format!(
            "{config}\n[templates.isolated]\ndescription = \"Codes in its own checkout\"\ninstructions = \"Code.\"\ntools = [\"write\"]\nisolation = \"checkout\"\n"
        ),
    )
    .expect("config");
    let mut reaper = Reaper::new(g.env.dir.path());
    let s = g.broker("broker", &mut reaper).await;
    let out: p::SpawnOutput = typed(
        &s,
        "subzero_spawn",
        json!({"prompt": "PLAN write t.txt from the template\\n", "templateId": "isolated", "model": g.model_arg()}),
    )
    .await;
    let child = out.child_id.to_string();
    let snap = settled_child(&s, &child).await;
    assert_eq!(
        checkout(&snap).state,
        p::CheckoutState::SettledChanged,
        "{snap:#?}"
    );
    assert!(!g.workspace().join("t.txt").exists());
    // The call's own choice wins over the template's.
    let out: p::SpawnOutput = typed(
        &s,
        "subzero_spawn",
        json!({"prompt": "PLAN write u.txt shared\\n", "templateId": "isolated", "model": g.model_arg(), "isolation": "shared"}),
    )
    .await;
    let snap = settled_child(&s, out.child_id.as_str()).await;
    assert!(snap.checkout.is_none(), "{snap:#?}");
    assert!(g.workspace().join("u.txt").exists());
    s.close().await.expect("close");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_change_that_landed_while_the_state_disk_was_full_is_answered_applied_and_recorded() {
    let g = GitEnv::new();
    let Some(disk) = crate::support::tmpfs::Tmpfs::mount(&g.env.state_dir()) else {
        return;
    };
    disk.grow();
    let mut reaper = Reaper::new(g.env.dir.path());
    let s = g.broker("broker", &mut reaper).await;
    let child = g
        .isolated_coder(&s, "PLAN write landed.txt on a full disk\\n")
        .await;
    settled_child(&s, &child).await;
    // The workspace's disk has room; the state directory's has none.
    disk.fill();
    let reply = apply(
        &s,
        json!({"childId": child, "commitMessage": "from the child"}),
    )
    .await;
    assert!(
        !reply.is_error,
        "the change landed, so the answer must say so: {}",
        reply.text
    );
    let out: p::ApplyOutput = parse("subzero_apply", &reply.structured);
    assert_eq!(out.state, p::CheckoutState::Applied);
    let commit = out.commit.expect("a commit").to_string();
    assert_eq!(git(&g.workspace(), &["rev-parse", "HEAD"]).trim(), commit);
    // A second apply while the ledger is behind must not land it again.
    let again = apply(&s, json!({"childId": child})).await;
    assert!(again.is_error, "{}", again.text);
    // Space returns: the landing is recorded and the checkout removed.
    disk.free();
    let snap = until_snap(&s, &child, std::time::Duration::from_secs(20), |snap| {
        snap.checkout
            .as_ref()
            .is_some_and(|c| c.state == p::CheckoutState::Applied)
    })
    .await;
    let co = checkout(&snap);
    assert_eq!(co.state, p::CheckoutState::Applied, "{snap:#?}");
    assert!(
        crate::support::faults::eventually(std::time::Duration::from_secs(10), || {
            !std::path::Path::new(&co.path).exists()
        }),
        "the checkout was not removed"
    );
    assert_eq!(
        std::fs::read_to_string(g.workspace().join("landed.txt")).expect("landed"),
        "on a full disk\n"
    );
    s.close().await.expect("close");
}
