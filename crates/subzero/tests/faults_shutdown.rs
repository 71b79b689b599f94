//! The host closes the broker's stdin while 50 `subzero_get` calls wait (waitMs 30000)
//! on children whose model hangs: the broker exits promptly, its workers and their
//! descendants are gone, and the database says stopped or interrupted, never running.
//!
//! The broker is driven over raw JSON-RPC lines so the test alone decides when stdin
//! closes and nothing else (no SIGTERM from a client library) helps it exit.

mod faults_support;
mod mcp_support;

use std::path::Path;
use std::time::{Duration, Instant};

use faults_support::{
    Proc, RawBroker, Reaper, alive, descendants, eventually, running_in, workers_of,
};
use mcp_support::*;
use serde_json::json;
use subzero_testkit::Reply;

const CHILDREN: usize = 2;
const WAITERS: usize = 50;

/// (child state, run status) of every run, straight from the database.
fn durable_states(db: &Path) -> Vec<(String, String, String)> {
    let conn =
        rusqlite::Connection::open_with_flags(db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .expect("open the database");
    let mut stmt = conn
        .prepare("SELECT c.child_id, c.state, r.status FROM runs r JOIN children c ON c.child_id = r.child_id")
        .expect("query");
    stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .expect("rows")
        .collect::<Result<_, _>>()
        .expect("rows")
}

#[test]
fn closing_stdin_while_50_gets_wait_exits_promptly_and_leaves_nothing_running() {
    let env = Env::new((0..CHILDREN).map(|_| Reply::Hang).collect());
    let mut reaper = Reaper::new(env.dir.path());
    let mut broker = RawBroker::start(&env.command("broker"));
    let pid = reaper.broker(Some(broker.pid()));

    let children: Vec<String> = (0..CHILDREN)
        .map(|n| {
            let out = broker.ok(
                "subzero_spawn",
                json!({"prompt": format!("Task {n}"), "templateId": "researcher", "model": env.model()}),
            );
            out["childId"].as_str().expect("childId").to_owned()
        })
        .collect();
    assert!(
        env.server
            .wait_for_requests(CHILDREN, Duration::from_secs(20)),
        "the model was not called"
    );
    assert!(
        eventually(Duration::from_secs(5), || workers_of(pid).len() == CHILDREN),
        "expected {CHILDREN} workers: {:?}",
        workers_of(pid)
    );
    let waiting: Vec<u64> = (0..WAITERS)
        .map(|n| {
            broker.call_async(
                "subzero_get",
                json!({"childId": children[n % CHILDREN], "waitMs": 30000}),
            )
        })
        .collect();
    // Let every get reach its wait (none can return: nothing settles).
    let early = broker.drain(Duration::from_millis(500));
    assert!(
        early
            .iter()
            .all(|m| !waiting.iter().any(|id| m["id"] == *id)),
        "a get returned before anything settled: {early:?}"
    );
    let tree: Vec<Proc> = descendants(pid);
    assert!(tree.len() >= CHILDREN, "{tree:?}");

    let closed = Instant::now();
    broker.close_stdin();
    let exit = broker.wait_exit(Duration::from_secs(10));
    let took = closed.elapsed();
    assert!(
        exit.is_some(),
        "the broker was still running {took:?} after stdin closed"
    );
    eprintln!("broker exited {took:?} after stdin EOF with {WAITERS} gets waiting: {exit:?}");
    if std::env::var_os("FAULTS_KEEP_LOG").is_some() {
        eprintln!(
            "{}",
            std::fs::read_to_string(env.log("broker")).unwrap_or_default()
        );
    }
    let answered = broker.drain(Duration::from_millis(100));
    eprintln!(
        "{} of {WAITERS} gets were answered before the exit",
        answered
            .iter()
            .filter(|m| waiting.iter().any(|id| m["id"] == *id))
            .count()
    );

    assert!(
        eventually(Duration::from_secs(5), || tree
            .iter()
            .all(|p| !alive(p.pid))
            && running_in(env.dir.path()).is_empty()),
        "processes survived the broker: {:?} / in the workspace: {:?}",
        tree.iter().filter(|p| alive(p.pid)).collect::<Vec<_>>(),
        running_in(env.dir.path())
    );

    let states = durable_states(&env.state_dir().join("subzero.db"));
    assert_eq!(states.len(), CHILDREN, "{states:?}");
    for (child, state, status) in &states {
        assert!(
            (state == "ready" && status == "stopped")
                || (state == "interrupted" && status == "interrupted"),
            "child {child} left {state} with its run {status}"
        );
    }
}
