//! How a host ends a broker, and what is left afterwards.
//!
//! - The host closes the broker's stdin while 50 `subzero_get` calls wait (waitMs 30000)
//!   on children whose model hangs: the broker exits promptly, its workers and their
//!   descendants are gone, and the database says stopped or interrupted, never running.
//! - SIGINT (what Claude Code sends first), SIGTERM, SIGHUP (a closed terminal) and stdin
//!   EOF each end in the same clean shutdown while 4 coder children run `bash` trees of
//!   sleeps: the broker exits 0 by itself, every run is recorded `stopped` (a confirmed
//!   stop, not `interrupted`) and no process of the test is left. A second signal during
//!   that shutdown (the host's SIGTERM 100 ms after its SIGINT) changes nothing.
//!
//! The broker is driven over raw JSON-RPC lines so the test alone decides when stdin
//! closes and nothing else (no SIGTERM from a client library) helps it exit. After a
//! signal the test keeps stdin open, as hosts do. How fast the exit is, is measured by
//! `cargo xtask bench`, not asserted here.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::support::faults::{
    Proc, RawBroker, Reaper, alive, descendants, eventually, marked, read_proc, running_in,
    unique_mark, wait_for, workers_of,
};
use crate::support::mcp::*;
use nix::sys::signal::Signal;
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
            let out = broker.typed::<p::SpawnOutput>(
                "subzero_spawn",
                json!({"prompt": format!("Task {n}"), "templateId": "researcher", "model": env.model()}),
            );
            out.child_id.as_str().to_owned()
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

/// Coder children running `bash` trees when the host ends the broker.
const BUSY_CODERS: usize = 4;
/// Sleeps in each child's tree: a background job, a `setsid` escapee, a foreground one.
const SLEEPS_PER_TREE: usize = 3;

/// How the host ends the session.
#[derive(Clone, Copy, Debug)]
enum Ending {
    /// One signal; stdin stays open.
    Signal(Signal),
    /// The host closes stdin.
    StdinEof,
    /// SIGINT, then at once SIGTERM, SIGINT and SIGHUP while the broker shuts down.
    SignalStorm,
}

fn signal(pid: u32, signal: Signal) {
    let pid = nix::unistd::Pid::from_raw(i32::try_from(pid).expect("pid fits"));
    // The broker is our child and not yet waited for: its pid cannot be reused.
    let _ = nix::sys::signal::kill(pid, signal);
}

/// Live processes of this test running `sleep`.
fn sleeps(mark: &str) -> Vec<u32> {
    marked(mark)
        .into_iter()
        .filter(|pid| {
            read_proc(*pid).is_some_and(|p| {
                p.argv
                    .first()
                    .is_some_and(|a| Path::new(a).file_name().is_some_and(|n| n == "sleep"))
            })
        })
        .collect()
}

fn ending_the_broker_with_4_busy_coders_stops_every_run(ending: Ending) {
    let env = Env::new(Vec::new());
    // Four write-capable runs at once need four writer slots.
    let config = std::fs::read_to_string(env.config()).expect("config");
    std::fs::write(
        env.config(),
        format!("{config}\n[limits]\nwrite_runs_per_workspace = {BUSY_CODERS}\n"),
    )
    .expect("config");
    let mark = unique_mark(env.dir.path());
    let command = format!("export {mark}; sleep 1000 & setsid sleep 1000 & sleep 1000");
    for n in 0..BUSY_CODERS {
        env.server.push(Reply::tool_call(
            &format!("call_{n}"),
            "bash",
            &json!({"command": command}).to_string(),
        ));
    }
    let mut reaper = Reaper::new(env.dir.path());
    reaper.mark(&mark);
    let mut broker = RawBroker::start(&env.command("broker"));
    let pid = reaper.broker(Some(broker.pid()));

    for n in 0..BUSY_CODERS {
        broker.typed::<p::SpawnOutput>(
            "subzero_spawn",
            json!({"prompt": format!("Start server {n}"), "templateId": "coder", "model": env.model()}),
        );
    }
    let trees = wait_for(Duration::from_secs(30), || {
        let found = sleeps(&mark);
        (found.len() >= BUSY_CODERS * SLEEPS_PER_TREE).then_some(found)
    });
    assert!(
        trees.is_some(),
        "the bash trees did not all start: {:?} sleeps, workers {:?}",
        sleeps(&mark),
        workers_of(pid)
    );
    let workers = workers_of(pid);
    assert_eq!(workers.len(), BUSY_CODERS, "{workers:?}");
    let tree: Vec<Proc> = descendants(pid);

    let ended = Instant::now();
    match ending {
        Ending::Signal(sig) => signal(pid, sig),
        Ending::StdinEof => broker.close_stdin(),
        Ending::SignalStorm => {
            signal(pid, Signal::SIGINT);
            for sig in [Signal::SIGTERM, Signal::SIGINT, Signal::SIGHUP] {
                std::thread::sleep(Duration::from_millis(2));
                signal(pid, sig);
            }
        }
    }
    let exit = broker.wait_exit(Duration::from_secs(30));
    let took = ended.elapsed();
    eprintln!("{ending:?} with {BUSY_CODERS} busy coders: exit {exit:?} after {took:?}");
    if std::env::var_os("FAULTS_KEEP_LOG").is_some() {
        eprintln!(
            "{}",
            std::fs::read_to_string(env.log("broker")).unwrap_or_default()
        );
    }
    let exit =
        exit.unwrap_or_else(|| panic!("the broker was still running {took:?} after {ending:?}"));
    assert_eq!(
        exit.code(),
        Some(0),
        "the broker did not exit 0 by itself after {ending:?}: {exit:?}"
    );

    // Stops were confirmed before the exit: nothing of the trees is left, not even briefly.
    assert!(
        sleeps(&mark).is_empty() && marked(&mark).is_empty(),
        "tool processes outlived the broker: {:?}",
        marked(&mark)
    );
    assert!(
        tree.iter().all(|p| !alive(p.pid)) && running_in(env.dir.path()).is_empty(),
        "processes outlived the broker: {:?} / in the workspace: {:?}",
        tree.iter().filter(|p| alive(p.pid)).collect::<Vec<_>>(),
        running_in(env.dir.path())
    );

    let runs = durable_states(&env.state_dir().join("subzero.db"));
    assert_eq!(runs.len(), BUSY_CODERS, "{runs:?}");
    for (child, state, status) in &runs {
        assert!(
            state == "ready" && status == "stopped",
            "after {ending:?}, child {child} was left {state} with its run {status} (expected a confirmed stop: ready / stopped)"
        );
    }
}

#[test]
fn sigint_with_4_busy_coders_stops_every_run_and_exits_0() {
    ending_the_broker_with_4_busy_coders_stops_every_run(Ending::Signal(Signal::SIGINT));
}

#[test]
fn sigterm_with_4_busy_coders_stops_every_run_and_exits_0() {
    ending_the_broker_with_4_busy_coders_stops_every_run(Ending::Signal(Signal::SIGTERM));
}

#[test]
fn stdin_eof_with_4_busy_coders_stops_every_run_and_exits_0() {
    ending_the_broker_with_4_busy_coders_stops_every_run(Ending::StdinEof);
}

#[test]
fn sighup_with_4_busy_coders_stops_every_run_and_exits_0() {
    ending_the_broker_with_4_busy_coders_stops_every_run(Ending::Signal(Signal::SIGHUP));
}

#[test]
fn more_signals_during_the_shutdown_do_not_cut_it_short() {
    ending_the_broker_with_4_busy_coders_stops_every_run(Ending::SignalStorm);
}
