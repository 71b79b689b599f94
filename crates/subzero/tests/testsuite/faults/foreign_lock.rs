//! A process outside Subzero holds a child's lock file (`locks/children/<childId>.lock`,
//! opened read-only, `flock(LOCK_EX)`). The test process itself plays that stranger.
//! Every refusal it causes — `busy`, `recovery_required` — changes nothing: not the
//! child's row (state, phase, owner generation), not its runs, events or queue, and no
//! receipt is stored. The answers a ready or interrupted child gets regardless of its
//! lock (`not_running`, `ready`) change nothing else either. Once the stranger lets go,
//! the child works again: a followup completes, a stop is confirmed, a resume runs.

use std::fs::File;
use std::time::Duration;

use crate::support::faults::{
    Proc, Reaper, alive, descendants, eventually, read_proc, running_in, sigkill, wait_for,
};
use crate::support::mcp::*;
use nix::fcntl::{Flock, FlockArg};
use rusqlite::types::ValueRef;
use serde_json::{Value, json};
use subzero_testkit::Reply;
use subzero_testkit::mcp_client::McpSession;

/// The stranger: this test process takes the child's lock through a read-only descriptor,
/// once nothing of Subzero holds it (a killed broker's lock holder lets go only when the
/// worker's namespace is gone, and it is outside the broker's tree by then).
fn hold_child_lock(env: &Env, child: &str) -> Flock<File> {
    let path = env
        .state_dir()
        .join("locks/children")
        .join(format!("{child}.lock"));
    let mut held_by = Vec::new();
    let taken = wait_for(Duration::from_secs(10), || {
        let file = File::open(&path).unwrap_or_else(|e| panic!("open {}: {e}", path.display()));
        match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
            Ok(lock) => Some(lock),
            Err((_, nix::errno::Errno::EAGAIN)) => {
                held_by = holder_processes(&path);
                None
            }
            Err((_, e)) => panic!("flock {}: {e}", path.display()),
        }
    });
    if !held_by.is_empty() {
        eprintln!("the child's lock was still held by {held_by:?}");
    }
    taken.unwrap_or_else(|| panic!("the child's lock was never free: held by {held_by:?}"))
}

/// The processes with `path` open: pid, parent and command line.
fn holder_processes(path: &std::path::Path) -> Vec<(u32, Option<u32>, Vec<String>)> {
    subzero_runtime::locks::holders(path)
        .into_iter()
        .map(|h| {
            let p = read_proc(h.pid);
            (
                h.pid,
                p.as_ref().map(|p| p.ppid),
                p.map(|p| p.argv).unwrap_or_default(),
            )
        })
        .collect()
}

/// Every stored row that belongs to a child, table by table, and every receipt.
#[derive(Debug, PartialEq)]
struct Stored {
    children: Value,
    runs: Value,
    followups: Value,
    events: Value,
    receipts: Value,
}

/// Every stored row that belongs to `child` (its row, runs, queue, events) and every
/// receipt, as the database holds them: a refusal must leave all of it as it was.
fn stored(env: &Env, child: &str) -> Stored {
    let db = env.state_dir().join("subzero.db");
    let conn =
        rusqlite::Connection::open_with_flags(&db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .expect("open the database read-only");
    let of_child = |table| rows(&conn, table, "WHERE child_id = ?1", child);
    Stored {
        children: of_child("children"),
        runs: of_child("runs"),
        followups: of_child("followups"),
        events: of_child("events"),
        receipts: rows(&conn, "receipts", "WHERE ?1 IS NOT NULL", child),
    }
}

fn rows(conn: &rusqlite::Connection, table: &str, filter: &str, child: &str) -> Value {
    let mut stmt = conn
        .prepare(&format!("SELECT * FROM {table} {filter} ORDER BY rowid"))
        .expect("prepare");
    let names: Vec<String> = stmt.column_names().map(str::to_owned).collect();
    let found = stmt
        .query_map([child], |row| {
            let mut record = serde_json::Map::new();
            for (i, name) in names.iter().enumerate() {
                let value = match row.get_ref(i)? {
                    ValueRef::Null => Value::Null,
                    ValueRef::Integer(n) => json!(n),
                    ValueRef::Real(x) => json!(x),
                    ValueRef::Text(t) => json!(String::from_utf8_lossy(t)),
                    ValueRef::Blob(b) => json!(format!("{} bytes", b.len())),
                };
                record.insert(name.clone(), value);
            }
            Ok(Value::Object(record))
        })
        .expect("query")
        .collect::<Result<Vec<_>, _>>()
        .expect("rows");
    Value::Array(found)
}

/// What a parent sees: the whole snapshot with every event, but for `waited`.
async fn seen(s: &McpSession, child: &str) -> p::ChildSnapshot {
    without_wait(get(s, json!({"childId": child, "eventLimit": 50})).await)
}

/// The child as stored and as seen; equal before and after a call that changed nothing.
async fn observe(s: &McpSession, env: &Env, child: &str) -> (Stored, p::ChildSnapshot) {
    (stored(env, child), seen(s, child).await)
}

/// A refused call: its code, and its message names the stranger's pid.
async fn refused_naming_us(s: &McpSession, tool: &str, args: Value) -> String {
    let reply = call(s, tool, args).await;
    assert!(
        reply.is_error,
        "{tool} unexpectedly succeeded: {}",
        reply.text
    );
    let pid = format!("pid {}", std::process::id());
    assert!(
        reply.text.contains(&pid),
        "{tool}'s refusal does not name the holder ({pid}): {}",
        reply.text
    );
    reply.code().expect("error body has a code").to_owned()
}

fn assert_unchanged(
    before: &(Stored, p::ChildSnapshot),
    after: &(Stored, p::ChildSnapshot),
    what: &str,
) {
    assert_eq!(before.0, after.0, "{what} changed what is stored");
    assert_eq!(before.1, after.1, "{what} changed what get shows");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_stranger_holding_a_ready_childs_lock_makes_send_stop_and_resume_change_nothing() {
    let env = Env::new(vec![
        Reply::text("First answer."),
        Reply::text("Second answer."),
        Reply::Hang,
        Reply::text("Resumed answer."),
    ]);
    let mut reaper = Reaper::new(env.dir.path());
    let s = env.broker("broker").await;
    reaper.broker(s.pid());
    let (child, first_run) = spawn(&s, &env, "researcher", "Look around").await;
    let done = settled(&s, &child, Duration::from_secs(30)).await;
    assert_eq!(done.state, p::ChildState::Ready, "{done:#?}");
    assert_eq!(
        last_status(&done),
        Some(p::TerminalRunStatus::Completed),
        "{done:#?}"
    );

    let held = hold_child_lock(&env, &child);
    let before = observe(&s, &env, &child).await;

    let followup = json!({
        "childId": child, "mode": "followup", "message": "Look again", "requestId": "send-1"
    });
    let code = refused_naming_us(&s, "subzero_send", followup.clone()).await;
    assert_eq!(code, "busy");
    assert_unchanged(&before, &observe(&s, &env, &child).await, "a busy followup");

    let stop_first = json!({"childId": child, "expectedRunId": first_run, "waitMs": 1000});
    assert_eq!(err(&s, "subzero_stop", stop_first).await, "not_running");
    assert_unchanged(
        &before,
        &observe(&s, &env, &child).await,
        "a stop of a ready child",
    );

    let carry_on = json!({
        "childId": child, "model": env.model(), "message": "Carry on", "requestId": "resume-1"
    });
    let code = refused_naming_us(&s, "subzero_resume", carry_on.clone()).await;
    assert_eq!(code, "busy");
    assert_unchanged(&before, &observe(&s, &env, &child).await, "a busy resume");

    // Without a message nothing needs the lock: a ready child answers ready, and only its
    // model record is rewritten (to the same model).
    let resumed = resume(&s, json!({"childId": child, "model": env.model()})).await;
    assert_eq!(resumed.state, p::ResumeOutputState::Ready, "{resumed:#?}");
    let after = observe(&s, &env, &child).await;
    let (was, now) = (&before.0, &after.0);
    assert_eq!(was.runs, now.runs, "resume changed runs");
    assert_eq!(was.followups, now.followups, "resume changed followups");
    assert_eq!(was.events, now.events, "resume changed events");
    let (was, now) = (&before.1, &after.1);
    assert_eq!(was.state, now.state, "resume changed state");
    assert_eq!(was.phase, now.phase, "resume changed phase");
    assert_eq!(
        was.active_run_id, now.active_run_id,
        "resume changed activeRunId"
    );
    assert_eq!(was.last_run, now.last_run, "resume changed lastRun");
    assert_eq!(was.events, now.events, "resume changed events");
    assert_eq!(
        was.next_cursor, now.next_cursor,
        "resume changed nextCursor"
    );
    assert_eq!(was.model, now.model, "resume changed model");
    assert_eq!(env.server.requests().len(), 1, "the model was called again");

    // The stranger lets go: the same requestId is a new call (no receipt was stored).
    drop(held);
    let sent = send(&s, followup).await;
    assert_eq!(sent.delivery, p::SendOutputDelivery::Started, "{sent:#?}");
    let snap = settled(&s, &child, Duration::from_secs(30)).await;
    assert_eq!(last(&snap).run_id, sent.run_id, "{snap:#?}");
    assert_eq!(
        last(&snap).status,
        p::TerminalRunStatus::Completed,
        "{snap:#?}"
    );
    assert_eq!(last(&snap).preview.as_str(), "Second answer.", "{snap:#?}");

    let long = send(
        &s,
        json!({"childId": child, "mode": "followup", "message": "Think forever"}),
    )
    .await;
    assert_eq!(long.delivery, p::SendOutputDelivery::Started, "{long:#?}");
    assert!(env.server.wait_for_requests(3, Duration::from_secs(20)));
    let stopped = stop(
        &s,
        json!({"childId": child, "expectedRunId": long.run_id, "waitMs": 10000}),
    )
    .await;
    assert!(stopped.confirmed, "{stopped:#?}");
    assert_eq!(stopped.status, p::RunStatus::Stopped, "{stopped:#?}");

    let resumed = resume(&s, carry_on).await;
    assert_eq!(resumed.state, p::ResumeOutputState::Running, "{resumed:#?}");
    let snap = settled(&s, &child, Duration::from_secs(30)).await;
    assert_resumed_run_completed(&snap, &resumed);
    assert_eq!(last(&snap).preview.as_str(), "Resumed answer.", "{snap:#?}");
    s.close().await.expect("close");
}

/// SIGKILL the broker and wait until every process it started is gone.
fn kill_broker(env: &Env, broker: u32) {
    let tree: Vec<Proc> = descendants(broker);
    sigkill(broker);
    let gone = eventually(Duration::from_secs(5), || {
        tree.iter().all(|p| !alive(p.pid)) && running_in(env.dir.path()).is_empty()
    });
    assert!(gone, "processes of the killed broker survived");
}

/// A child whose broker was SIGKILLed mid-run (its worker tree gone with it).
async fn orphaned_mid_run(env: &Env, reaper: &mut Reaper) -> String {
    let s = env.broker("broker1").await;
    let broker = reaper.broker(s.pid());
    let (child, _run) = spawn(&s, env, "researcher", "Slow work").await;
    assert!(env.server.wait_for_requests(1, Duration::from_secs(20)));
    kill_broker(env, broker);
    drop(s);
    child
}

/// The stranger has let go: resume with a message runs and completes.
async fn resume_works(s: &McpSession, env: &Env, child: &str) {
    let resumed = resume(
        s,
        json!({"childId": child, "model": env.model(), "message": "Carry on"}),
    )
    .await;
    assert_eq!(resumed.state, p::ResumeOutputState::Running, "{resumed:#?}");
    let snap = settled(s, child, Duration::from_secs(30)).await;
    assert_resumed_run_completed(&snap, &resumed);
}

/// Both resumes of a child held by the stranger are refused naming it, with nothing
/// changed; the codes they answered.
async fn resumes_refused(s: &McpSession, env: &Env, child: &str) -> Vec<String> {
    let before = observe(s, env, child).await;
    let mut codes = Vec::new();
    for message in [Some("Carry on"), None] {
        let args = match message {
            Some(m) => json!({
                "childId": child, "model": env.model(), "requestId": "resume-1", "message": m
            }),
            None => json!({"childId": child, "model": env.model(), "requestId": "resume-1"}),
        };
        codes.push(refused_naming_us(s, "subzero_resume", args).await);
        let what = format!("a refused resume (message: {message:?})");
        assert_unchanged(&before, &observe(s, env, child).await, &what);
    }
    codes
}

#[tokio::test(flavor = "multi_thread")]
async fn a_stranger_holding_an_interrupted_childs_lock_makes_resume_refuse_with_nothing_changed() {
    let env = Env::new(vec![Reply::Hang, Reply::text("Resumed.")]);
    let mut reaper = Reaper::new(env.dir.path());
    let child = orphaned_mid_run(&env, &mut reaper).await;
    let s = env.broker("broker2").await;
    reaper.broker(s.pid());
    let snap = snapshot(&s, &child).await;
    assert_eq!(snap.state, p::ChildState::Interrupted, "{snap:#?}");

    let held = hold_child_lock(&env, &child);
    for code in resumes_refused(&s, &env, &child).await {
        assert!(code == "busy" || code == "recovery_required", "{code}");
    }
    drop(held);
    resume_works(&s, &env, &child).await;
    s.close().await.expect("close");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_stranger_holding_a_dead_brokers_child_makes_resume_recovery_required_with_nothing_changed()
 {
    let env = Env::new(vec![Reply::Hang, Reply::text("Resumed.")]);
    let mut reaper = Reaper::new(env.dir.path());
    let child = orphaned_mid_run(&env, &mut reaper).await;
    // The stranger takes the lock before any broker recovers the child.
    let held = hold_child_lock(&env, &child);
    let s = env.broker("broker2").await;
    reaper.broker(s.pid());
    let snap = snapshot(&s, &child).await;
    assert_eq!(snap.phase, p::Phase::RecoveryRequired, "{snap:#?}");

    for code in resumes_refused(&s, &env, &child).await {
        assert_eq!(code, "recovery_required");
    }
    drop(held);
    resume_works(&s, &env, &child).await;
    s.close().await.expect("close");
}
