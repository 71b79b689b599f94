//! The key and configured secrets never reach events, transcript or logs — also split across
//! stream deltas, inside tool arguments, and as a JSON property name.

use crate::support::worker::ControlLines;
use crate::support::worker::{RunSpec, WorkerProc, researcher};
use subzero_protocol::{ErrorCode, RunSettledStatus};
use subzero_testkit::{Reply, ScriptedServer, Step};

const KEY: &str = "sk-live-SPLITME-9f8e7d6c5b4a";
const SECRET: &str = "hunter2-configured-value";

#[test]
fn key_split_across_deltas_in_arguments_and_as_property_name_is_redacted() {
    let ws = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        ws.path().join("config.txt"),
        format!("password = {SECRET}\n"),
    )
    .expect("seed");
    let state = tempfile::tempdir().expect("tempdir");
    let transcript = state.path().join("t.jsonl");
    let arguments = format!(r#"{{"path":"config.txt","{KEY}":"{KEY}"}}"#);
    let (a1, a2) = arguments.split_at(20);
    let server = ScriptedServer::start(vec![
        Reply::Sse(vec![
            Step::text("the key is sk-live-SPL"),
            Step::text("ITME-9f8e7d6c5b4a, right?"),
            Step::tool_delta(Some(0), Some("c1"), Some("read"), a1),
            Step::tool_delta(Some(0), None, None, a2),
            Step::finish("tool_calls"),
            Step::done(),
        ]),
        Reply::text_deltas(&[
            "final: sk-live-SPLITME",
            "-9f8e7d6c5b4a and ",
            "hunter2-configured-value",
        ]),
    ])
    .expect("server");
    let mut worker = WorkerProc::spawn();
    let mut spec = RunSpec::new(
        "run_0000000000000000000000006B",
        server.base_url(),
        researcher(),
        ws.path(),
        &transcript,
    );
    spec.key = KEY;
    spec.secrets = vec![SECRET];
    worker.send(&spec.message());
    let settled = worker.run_settled("run_0000000000000000000000006B");
    assert_eq!(settled.status, RunSettledStatus::Completed, "{settled}");
    assert_eq!(settled.result(), "final: [REDACTED] and [REDACTED]");

    let requests = server.requests();
    assert_eq!(
        requests[0].header("authorization"),
        Some(format!("Bearer {KEY}").as_str()),
        "the key does reach the model endpoint"
    );
    let stdout = worker.stdout_text();
    let stderr = worker.stderr_text();
    let file = std::fs::read_to_string(&transcript).expect("transcript");
    for (name, text) in [
        ("events", &stdout),
        ("logs", &stderr),
        ("transcript", &file),
    ] {
        assert!(!text.contains(KEY), "{name} leaked the key:\n{text}");
        assert!(
            !text.contains("9f8e7d6c5b4a"),
            "{name} leaked part of the key:\n{text}"
        );
        assert!(
            !text.contains(SECRET),
            "{name} leaked a configured secret:\n{text}"
        );
    }
    assert!(stdout.contains("the key is [REDACTED], right?"), "{stdout}");
    assert!(file.contains(r#"\"[REDACTED]\":\"[REDACTED]\""#), "{file}");
}

#[test]
fn an_http_error_body_echoing_the_key_is_redacted_and_401_is_never_completed() {
    let ws = tempfile::tempdir().expect("tempdir");
    let state = tempfile::tempdir().expect("tempdir");
    let transcript = state.path().join("t.jsonl");
    let body = format!(r#"{{"error":{{"message":"Incorrect API key provided: {KEY}"}}}}"#);
    let server = ScriptedServer::start(vec![Reply::status(401, &body)]).expect("server");
    let mut worker = WorkerProc::spawn();
    let mut spec = RunSpec::new(
        "run_00000000000000000000343031",
        server.base_url(),
        researcher(),
        ws.path(),
        &transcript,
    );
    spec.key = KEY;
    worker.send(&spec.message());
    let settled = worker.run_settled("run_00000000000000000000343031");
    assert_eq!(settled.status, RunSettledStatus::Failed);
    assert_eq!(settled.code(), ErrorCode::ModelRequestFailed);
    assert_eq!(settled.details().status, Some(401));
    let excerpt = settled.details().excerpt.expect("excerpt");
    assert!(
        excerpt.contains("Incorrect API key provided: [REDACTED]"),
        "{excerpt}"
    );
    assert!(!worker.stdout_text().contains(KEY));
    assert!(!worker.stderr_text().contains(KEY));
    assert!(
        worker
            .stdout_text()
            .lines()
            .all(|l| !l.contains("leaf_committed"))
    );
}
