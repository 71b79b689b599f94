//! The inherited lock descriptor reaches tool processes; nothing else the worker opened does.

use crate::support::worker::ControlLines;
use crate::support::worker::{RunSpec, WorkerProc, coder, tool_results};
use serde_json::json;
use subzero_protocol::RunSettledStatus;
use subzero_testkit::{Reply, ScriptedServer};

#[test]
fn tool_processes_inherit_the_lock_fd_and_no_other_worker_descriptor() {
    let ws = tempfile::tempdir().expect("tempdir");
    let state = tempfile::tempdir().expect("tempdir");
    let transcript = state.path().join("t.jsonl");
    let lock = state.path().join("child.lock");
    // `exec` so the listing shows exactly what the tool process inherited (ls's own directory
    // descriptor aside).
    let command = "exec ls -l /proc/self/fd";
    let server = ScriptedServer::start(vec![
        Reply::tool_call("c1", "bash", &json!({ "command": command }).to_string()),
        Reply::text("done"),
    ])
    .expect("server");
    let mut worker = WorkerProc::spawn_with_lock_fd(&lock);
    worker.send(
        &RunSpec::new(
            "run_00000000000000000000006664",
            server.base_url(),
            coder(),
            ws.path(),
            &transcript,
        )
        .message(),
    );
    assert_eq!(
        worker.run_settled("run_00000000000000000000006664").status,
        RunSettledStatus::Completed
    );
    let listing = tool_results(&server.requests()[1])[0].clone();
    assert!(
        listing.contains(&format!(" 9 -> {}", lock.display())),
        "lock fd inherited: {listing}"
    );
    assert!(
        !listing.contains("socket:"),
        "no model connection leaks: {listing}"
    );
    assert!(
        !listing.contains("t.jsonl"),
        "no transcript fd leaks: {listing}"
    );
    let fds: Vec<&str> = listing
        .lines()
        .filter(|l| l.contains(" -> ") && !l.contains("/proc/"))
        .collect();
    assert_eq!(
        fds.len(),
        4,
        "only stdin, stdout, stderr and the lock: {listing}"
    );
}
