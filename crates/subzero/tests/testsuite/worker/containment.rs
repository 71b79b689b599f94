//! Background, `setsid` and double-forked tool processes are all gone after cancel and after
//! stdin EOF, and the confirmation counts them.

use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::support::worker::ControlLines;
use crate::support::worker::{RunSpec, WAIT, WorkerProc, coder};
use serde_json::json;
use subzero_protocol::RunSettledStatus;
use subzero_testkit::{Reply, ScriptedServer};

/// Live processes whose command line contains `marker`.
fn marked(marker: &str) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .map(|c| String::from_utf8_lossy(&c).contains(marker))
                .unwrap_or(false)
        })
        .collect()
}

fn unique_marker(tag: &str) -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    format!("szmark-{tag}-{}-{nanos}", std::process::id())
}

/// Starts a run whose bash call leaves three kinds of stragglers, then the model hangs.
fn start_stragglers(
    worker: &mut WorkerProc,
    server: &ScriptedServer,
    ws: &Path,
    transcript: &Path,
    run_id: &str,
    marker: &str,
) {
    let command = format!(
        "ln -s \"$(command -v sleep)\" ./{marker}; \
         ./{marker} 1000 & \
         setsid ./{marker} 1001 & \
         ( ./{marker} 1002 & ) ; \
         sh -c '( ./{marker} 1003 & ) &' ; \
         echo started"
    );
    server.push(Reply::tool_call(
        "c1",
        "bash",
        &json!({ "command": command }).to_string(),
    ));
    server.push(Reply::Hang);
    let spec = RunSpec::new(run_id, server.base_url(), coder(), ws, transcript);
    worker.send(&spec.message());
    assert!(
        server.wait_for_requests(2, WAIT),
        "the run reached its second model call"
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while marked(marker).len() < 4 && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(marked(marker).len(), 4, "all four stragglers are running");
}

#[test]
fn cancel_kills_background_setsid_and_double_forked_processes() {
    let ws = tempfile::tempdir().expect("tempdir");
    let state = tempfile::tempdir().expect("tempdir");
    let transcript = state.path().join("t.jsonl");
    let marker = unique_marker("cancel");
    let server = ScriptedServer::start(vec![]).expect("server");
    let mut worker = WorkerProc::spawn();
    start_stragglers(
        &mut worker,
        &server,
        ws.path(),
        &transcript,
        "run_00000000000000000000000063",
        &marker,
    );

    worker.send(&json!({ "type": "cancel", "runId": "run_00000000000000000000000063" }));
    let settled = worker.run_settled("run_00000000000000000000000063");
    assert_eq!(settled.status, RunSettledStatus::Stopped);
    let confirmed = worker.cancel_confirmed("run_00000000000000000000000063");
    assert!(marked(&marker).is_empty(), "no straggler survives cancel");
    let reaped = confirmed;
    assert!(
        reaped >= 4,
        "the confirmation counts the stragglers: {confirmed}"
    );
}

#[test]
fn stdin_eof_kills_the_tool_tree_and_exits_within_a_second() {
    let ws = tempfile::tempdir().expect("tempdir");
    let state = tempfile::tempdir().expect("tempdir");
    let transcript = state.path().join("t.jsonl");
    let marker = unique_marker("eof");
    let server = ScriptedServer::start(vec![]).expect("server");
    let mut worker = WorkerProc::spawn();
    start_stragglers(
        &mut worker,
        &server,
        ws.path(),
        &transcript,
        "run_00000000000000000000000065",
        &marker,
    );

    let closed = std::time::Instant::now();
    worker.close_stdin();
    let status = worker
        .wait_exit(Duration::from_secs(3))
        .expect("worker exits");
    assert!(
        closed.elapsed() < Duration::from_millis(1500),
        "took {:?}",
        closed.elapsed()
    );
    assert!(status.success(), "{status:?}");
    assert!(
        marked(&marker).is_empty(),
        "no straggler survives stdin EOF"
    );
    let confirmed = worker.cancel_confirmed("run_00000000000000000000000065");
    assert!(confirmed >= 4, "{confirmed}");
}

#[test]
fn sigterm_tears_down_like_eof() {
    let ws = tempfile::tempdir().expect("tempdir");
    let state = tempfile::tempdir().expect("tempdir");
    let transcript = state.path().join("t.jsonl");
    let marker = unique_marker("term");
    let server = ScriptedServer::start(vec![]).expect("server");
    let mut worker = WorkerProc::spawn();
    start_stragglers(
        &mut worker,
        &server,
        ws.path(),
        &transcript,
        "run_00000000000000000000000074",
        &marker,
    );
    worker.terminate();
    assert!(worker.wait_exit(Duration::from_secs(3)).is_some());
    assert!(marked(&marker).is_empty(), "no straggler survives SIGTERM");
}
