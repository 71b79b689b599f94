//! Branch/resume: the interrupted branch is preserved, the recovery notice is present, a wrong
//! digest or an unknown version is refused with the file untouched.

use crate::support::worker::{ControlLines, RunSpec, WAIT, WorkerProc, researcher};
use serde_json::json;
use subzero_protocol::{ErrorCode, RunSettledStatus};
use subzero_testkit::worker_transcript::{entries, first};
use subzero_testkit::{Reply, ScriptedServer};

#[test]
fn resume_branches_from_the_leaf_keeps_the_interrupted_branch_and_refuses_a_wrong_digest() {
    let ws = tempfile::tempdir().expect("tempdir");
    let state = tempfile::tempdir().expect("tempdir");
    let transcript = state.path().join("child.jsonl");
    let server = ScriptedServer::start(vec![Reply::text("first done")]).expect("server");
    let mut worker = WorkerProc::spawn();

    // Run 1 completes: leaf + digest.
    let mut spec = RunSpec::new(
        "run_00000000000000000000000031",
        server.base_url(),
        researcher(),
        ws.path(),
        &transcript,
    );
    spec.prompt = "first prompt";
    worker.send(&spec.message());
    let leaf = worker.leaf_committed("run_00000000000000000000000031");
    assert_eq!(
        worker.run_settled("run_00000000000000000000000031").status,
        RunSettledStatus::Completed
    );
    let leaf_id = leaf.leaf_id.as_str().to_owned();
    let digest = leaf.digest.as_str().to_owned();
    assert!(digest.starts_with("sha256:"));

    // Run 2 is interrupted while the model hangs.
    server.push(Reply::Hang);
    let mut spec = RunSpec::new(
        "run_00000000000000000000000032",
        server.base_url(),
        researcher(),
        ws.path(),
        &transcript,
    );
    spec.prompt = "interrupted prompt";
    spec.from_leaf = Some(&leaf_id);
    spec.expected_digest = Some(&digest);
    worker.send(&spec.message());
    assert!(server.wait_for_requests(2, WAIT));
    worker.send(&json!({ "type": "cancel", "runId": "run_00000000000000000000000032" }));
    assert_eq!(
        worker.run_settled("run_00000000000000000000000032").status,
        RunSettledStatus::Stopped
    );

    // A wrong digest is refused and the file is untouched.
    let before = std::fs::read(&transcript).expect("read");
    let mut spec = RunSpec::new(
        "run_00000000000000000000626164",
        server.base_url(),
        researcher(),
        ws.path(),
        &transcript,
    );
    spec.from_leaf = Some(&leaf_id);
    spec.expected_digest =
        Some("sha256:ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff");
    worker.send(&spec.message());
    let settled = worker.run_settled("run_00000000000000000000626164");
    assert_eq!(settled.code(), ErrorCode::CheckpointIncompatible);
    let mut spec = RunSpec::new(
        "run_0000000000006D697373696E67",
        server.base_url(),
        researcher(),
        ws.path(),
        &transcript,
    );
    spec.from_leaf = Some("e_NOSUCHLEAF");
    worker.send(&spec.message());
    assert_eq!(
        worker.run_settled("run_0000000000006D697373696E67").code(),
        ErrorCode::CheckpointIncompatible
    );
    assert_eq!(
        before,
        std::fs::read(&transcript).expect("read"),
        "file untouched"
    );
    assert_eq!(
        server.requests().len(),
        2,
        "no model call for refused checkpoints"
    );

    // Run 3 resumes from run 1's leaf with a recovery notice.
    server.push(Reply::text("resumed done"));
    let mut spec = RunSpec::new(
        "run_00000000000000000000000033",
        server.base_url(),
        researcher(),
        ws.path(),
        &transcript,
    );
    spec.prompt = "resumed prompt";
    spec.from_leaf = Some(&leaf_id);
    spec.expected_digest = Some(&digest);
    spec.recovery_notice = Some(
        "Recovery: the previous run was interrupted; the working tree may contain interrupted changes.",
    );
    worker.send(&spec.message());
    assert_eq!(
        worker.run_settled("run_00000000000000000000000033").status,
        RunSettledStatus::Completed
    );

    let all = entries(&transcript);
    assert_eq!(all[0].kind, "header");
    assert_eq!(all[0].version, Some(1));
    let interrupted = all
        .iter()
        .find(|e| e.text() == "interrupted prompt")
        .expect("interrupted branch kept");
    assert_eq!(interrupted.parent_id.as_deref(), Some(leaf_id.as_str()));
    let notice = first(&all, "recovery_notice");
    assert_eq!(notice.parent_id.as_deref(), Some(leaf_id.as_str()));
    assert!(notice.text().contains("interrupted changes"));
    let resumed = all
        .iter()
        .find(|e| e.text() == "resumed prompt")
        .expect("resumed");
    assert_eq!(resumed.parent_id.as_ref(), Some(&notice.id));

    let body = server.requests()[2].body.clone();
    assert!(body.contains("first prompt") && body.contains("first done"));
    assert!(body.contains("interrupted changes"));
    assert!(
        !body.contains("interrupted prompt"),
        "the interrupted branch is not on the path"
    );
}

#[test]
fn the_root_counts_as_a_leaf_and_an_unknown_version_is_refused() {
    let ws = tempfile::tempdir().expect("tempdir");
    let state = tempfile::tempdir().expect("tempdir");
    let transcript = state.path().join("child.jsonl");
    let server =
        ScriptedServer::start(vec![Reply::Hang, Reply::text("from root")]).expect("server");
    let mut worker = WorkerProc::spawn();
    worker.send(
        &RunSpec::new(
            "run_00000000000000000000000061",
            server.base_url(),
            researcher(),
            ws.path(),
            &transcript,
        )
        .message(),
    );
    assert!(server.wait_for_requests(1, WAIT));
    worker.send(&json!({ "type": "cancel", "runId": "run_00000000000000000000000061" }));
    assert_eq!(
        worker.run_settled("run_00000000000000000000000061").status,
        RunSettledStatus::Stopped
    );

    let root = entries(&transcript)[0].id.clone();
    let mut spec = RunSpec::new(
        "run_00000000000000000000000062",
        server.base_url(),
        researcher(),
        ws.path(),
        &transcript,
    );
    spec.from_leaf = Some(&root);
    spec.recovery_notice = Some("interrupted during the first run");
    worker.send(&spec.message());
    assert_eq!(
        worker.run_settled("run_00000000000000000000000062").status,
        RunSettledStatus::Completed
    );

    let other = state.path().join("future.jsonl");
    std::fs::write(
        &other,
        "{\"type\":\"header\",\"id\":\"e_X\",\"parentId\":null,\"version\":99,\"at\":\"x\"}\n",
    )
    .expect("write");
    let before = std::fs::read(&other).expect("read");
    worker.send(
        &RunSpec::new(
            "run_00000000000000000000000076",
            server.base_url(),
            researcher(),
            ws.path(),
            &other,
        )
        .message(),
    );
    assert_eq!(
        worker.run_settled("run_00000000000000000000000076").code(),
        ErrorCode::CheckpointIncompatible
    );
    assert_eq!(before, std::fs::read(&other).expect("read"));
}
