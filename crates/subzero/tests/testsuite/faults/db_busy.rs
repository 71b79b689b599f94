//! The database held busy by another process's long write transaction (longer than the
//! store's 5 s busy timeout): a spawn fails with the typed `busy`, reads keep working,
//! and after the lock is released nothing is lost and a new spawn works.

use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::support;
use crate::support::faults::Reaper;
use crate::support::mcp::*;
use serde_json::json;
use subzero_testkit::Reply;

/// How long the foreign transaction holds the write lock (the store waits 5 s).
const HOLD: Duration = Duration::from_secs(7);

/// Hold `BEGIN IMMEDIATE` on the database for `hold` on another thread (its own
/// connection, as another process would); returns once the lock is taken.
fn hold_write_lock(db: std::path::PathBuf, hold: Duration) -> std::thread::JoinHandle<()> {
    let (taken, rx) = mpsc::channel();
    let holder = std::thread::spawn(move || {
        let conn = rusqlite::Connection::open(&db).expect("open the database");
        conn.execute_batch("BEGIN IMMEDIATE")
            .expect("take the write lock");
        taken.send(()).expect("signal");
        std::thread::sleep(hold);
        conn.execute_batch("ROLLBACK")
            .expect("release the write lock");
    });
    rx.recv_timeout(Duration::from_secs(10))
        .expect("the write lock was taken");
    holder
}

#[tokio::test(flavor = "multi_thread")]

async fn a_database_held_by_another_writer_gives_busy_and_loses_nothing() {
    let env = Env::new(vec![
        Reply::text("First result."),
        Reply::text("After the lock."),
    ]);
    let mut reaper = Reaper::new(env.dir.path());
    let s = env.broker("broker").await;
    reaper.broker(s.pid());
    let (first, _) = spawn(&s, &env, "researcher", "First").await;
    let before = settled(&s, &first, Duration::from_secs(30)).await;
    assert_eq!(
        last_status(&before),
        Some(p::TerminalRunStatus::Completed),
        "{before:#?}"
    );

    let holder = hold_write_lock(env.state_dir().join("subzero.db"), HOLD);
    let started = Instant::now();
    let args = json!({"prompt": "Second", "templateId": "researcher", "model": env.model()});
    let reply = call(&s, "subzero_spawn", args).await;
    let waited = started.elapsed();
    assert!(
        reply.is_error,
        "spawn succeeded while the database was locked: {}",
        reply.text
    );
    assert!(
        waited < HOLD,
        "spawn waited for the lock to be released ({waited:?})"
    );
    // Reads do not need the write lock (WAL): list and get still answer.
    let during = list(&s, json!({})).await;
    assert_eq!(
        during.children.first().map(|c| c.child_id.as_str()),
        Some(first.as_str()),
        "{during:#?}"
    );
    holder.join().expect("lock holder");

    // Nothing lost, nothing half-made: the first child is as it was, no other child
    // appeared (or, if one did, it is not stuck running), and no model call was made.
    let after = snapshot(&s, &first).await;
    assert_eq!(without_wait(after), without_wait(before));
    let listed = list(&s, json!({})).await;
    for child in listed.children.iter() {
        assert_ne!(child.state, p::ChildState::Running, "{listed:#?}");
    }
    assert_eq!(listed.children.len(), 1, "{listed:#?}");
    assert_eq!(env.server.requests().len(), 1);

    let (third, _) = spawn(&s, &env, "researcher", "Third").await;
    let snap = settled(&s, &third, Duration::from_secs(30)).await;
    assert_eq!(
        last(&snap).status,
        p::TerminalRunStatus::Completed,
        "{snap:#?}"
    );
    assert_eq!(last(&snap).preview.as_str(), "After the lock.", "{snap:#?}");
    s.close().await.expect("close");
    // Last, so everything above is checked whatever code the broker chose.
    assert_eq!(
        reply.code(),
        Some("busy"),
        "spawn under a foreign write lock: {}",
        reply.text
    );
}

#[tokio::test(flavor = "multi_thread")]

async fn a_database_held_busy_while_a_run_settles_does_not_leave_the_child_running() {
    // The answer arrives while another writer holds the database for longer than the
    // busy timeout: the broker cannot record the settlement in time. Whatever it does
    // then, the child must not stay `running` with no worker behind it.
    let env = Env::new(vec![
        Reply::Sse(vec![
            subzero_testkit::Step::delay_ms(500),
            subzero_testkit::Step::text("Done under pressure."),
            subzero_testkit::Step::finish("stop"),
            subzero_testkit::Step::done(),
        ]),
        Reply::text("Next one."),
    ]);
    let mut reaper = Reaper::new(env.dir.path());
    let s = env.broker("broker").await;
    let broker = reaper.broker(s.pid());
    let (child, run) = spawn(&s, &env, "researcher", "Work").await;
    assert!(env.server.wait_for_requests(1, Duration::from_secs(20)));
    // Long enough that the queued event writes time out one after the other and the
    // settlement itself does too.
    let holder = hold_write_lock(env.state_dir().join("subzero.db"), Duration::from_secs(16));
    holder.join().expect("lock holder");
    // Give the broker a bounded time to notice, then the worker must be gone and the
    // child must not be running.
    let snap = settled(&s, &child, Duration::from_secs(15)).await;
    if std::env::var_os("FAULTS_KEEP_LOG").is_some() {
        eprintln!(
            "{}",
            std::fs::read_to_string(env.log("broker")).unwrap_or_default()
        );
    }
    assert_ne!(
        snap.state,
        p::ChildState::Running,
        "stuck running after the lock was released: {snap:#?}"
    );
    assert_eq!(last(&snap).run_id.as_str(), run, "{snap:#?}");
    assert!(
        support::faults::eventually(Duration::from_secs(5), || support::faults::workers_of(
            broker
        )
        .is_empty()),
        "workers left: {:?}",
        support::faults::workers_of(broker)
    );
    s.close().await.expect("close");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_steer_that_lands_while_a_failed_run_settles_does_not_keep_its_worker() {
    // Found by the fault soak (a worker alive 20 s after its child settled): a run fails
    // with a follow-up queued (so the worker is kept for it), the settlement waits for
    // the database, and a steer reaches the driver meanwhile. The failure withdraws the
    // follow-up; the driver must still close the worker once the steer is passed on.
    let env = Env::new(vec![Reply::Sse(vec![
        subzero_testkit::Step::delay_ms(300),
        subzero_testkit::Step::text("partial "),
        subzero_testkit::Step::Cut,
    ])]);
    let mut reaper = Reaper::new(env.dir.path());
    let s = env.broker("broker").await;
    let broker = reaper.broker(s.pid());
    let (child, run) = spawn(&s, &env, "researcher", "Work").await;
    let queued = send(
        &s,
        json!({"childId": child, "mode": "followup", "message": "and then"}),
    )
    .await;
    assert_eq!(
        queued.delivery,
        p::SendOutputDelivery::Queued,
        "{queued:#?}"
    );
    let holder = hold_write_lock(env.state_dir().join("subzero.db"), Duration::from_secs(3));
    // The worker reported the failure; the driver's settlement now waits for the lock.
    let log = env.log("broker");
    assert!(
        support::faults::eventually(Duration::from_secs(20), || {
            std::fs::read_to_string(&log).is_ok_and(|l| l.contains("status=Failed"))
        }),
        "the worker never reported the failed run"
    );
    let steered = send(
        &s,
        json!({"childId": child, "mode": "steer", "message": "also look at the tests"}),
    )
    .await;
    assert_eq!(
        steered.delivery,
        p::SendOutputDelivery::Steered,
        "{steered:#?}"
    );
    holder.join().expect("lock holder");
    let snap = settled(&s, &child, Duration::from_secs(30)).await;
    assert_eq!(snap.state, p::ChildState::Ready, "{snap:#?}");
    assert_eq!(last(&snap).run_id.as_str(), run, "{snap:#?}");
    assert_eq!(
        last(&snap).status,
        p::TerminalRunStatus::Failed,
        "{snap:#?}"
    );
    assert!(
        support::faults::eventually(Duration::from_secs(10), || support::faults::workers_of(
            broker
        )
        .is_empty()),
        "the worker of a settled child is still alive: {:?}",
        support::faults::workers_of(broker)
    );
    s.close().await.expect("close");
}
