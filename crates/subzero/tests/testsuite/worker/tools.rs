//! Each tool on a temp workspace, and bad inputs giving tool errors rather than crashes.

use crate::support::worker::ControlLines;
use crate::support::worker::{RunSpec, WorkerProc, coder, tool_results};
use serde_json::json;
use subzero_protocol::RunSettledStatus;
use subzero_testkit::{Reply, ScriptedServer};

#[test]
fn every_tool_works_and_bad_inputs_are_tool_errors() {
    let ws = tempfile::tempdir().expect("tempdir");
    let root = ws.path();
    std::fs::write(root.join("notes.txt"), "alpha\nbeta\ngamma\nbeta\n").expect("seed");
    std::fs::write(root.join("blob.bin"), [0u8, 1, 2, 3, 0, 255]).expect("seed");
    std::fs::create_dir(root.join("src")).expect("seed");
    std::fs::write(root.join("src/lib.rs"), "fn needle() {}\n").expect("seed");
    std::fs::write(root.join(".gitignore"), "ignored/\n").expect("seed");
    std::fs::create_dir(root.join("ignored")).expect("seed");
    std::fs::write(root.join("ignored/lib.rs"), "fn needle() {}\n").expect("seed");
    let state = tempfile::tempdir().expect("tempdir");
    let transcript = state.path().join("t.jsonl");

    let calls: Vec<(String, &str, String)> = vec![
        (
            "c0",
            "write",
            json!({"path": "out/new.txt", "content": "hello world"}),
        ),
        ("c1", "read", json!({"path": "out/new.txt"})),
        (
            "c2",
            "edit",
            json!({"path": "out/new.txt", "oldText": "world", "newText": "there"}),
        ),
        (
            "c3",
            "read",
            json!({"path": "out/new.txt", "offset": 6, "limit": 3}),
        ),
        ("c4", "ls", json!({})),
        ("c5", "find", json!({"pattern": "*.rs"})),
        ("c6", "grep", json!({"pattern": "needle"})),
        ("c7", "bash", json!({"command": "echo from-bash; exit 3"})),
        ("c8", "read", json!({"path": "missing.txt"})),
        ("c9", "read", json!({"path": "blob.bin"})),
        (
            "c10",
            "edit",
            json!({"path": "notes.txt", "oldText": "beta", "newText": "x"}),
        ),
        (
            "c11",
            "bash",
            json!({"command": "head -c 300000 /dev/zero | tr '\\0' a"}),
        ),
        ("c12", "read", json!({"path": "../outside.txt"})),
        (
            "c13",
            "read",
            json!({"path": "notes.txt", "bogus": true, "offset": "x"}),
        ),
    ]
    .into_iter()
    .map(|(id, name, args)| (id.to_owned(), name, args.to_string()))
    .collect();
    let call_refs: Vec<(&str, &str, &str)> = calls
        .iter()
        .map(|(id, name, args)| (id.as_str(), *name, args.as_str()))
        .collect();
    let server = ScriptedServer::start(vec![
        Reply::tool_calls(&call_refs),
        Reply::text("all tools ran"),
    ])
    .expect("server");

    let mut worker = WorkerProc::spawn();
    let spec = RunSpec::new(
        "run_0000000000000000746F6F6C73",
        server.base_url(),
        coder(),
        root,
        &transcript,
    );
    worker.send(&spec.message());
    let settled = worker.run_settled("run_0000000000000000746F6F6C73");
    assert_eq!(settled.status, RunSettledStatus::Completed, "{settled}");
    assert_eq!(settled.result(), "all tools ran");

    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    let results = tool_results(&requests[1]);
    assert_eq!(results.len(), calls.len(), "{results:#?}");
    assert!(results[0].contains("wrote 11 bytes"), "{}", results[0]);
    assert_eq!(results[1], "hello world");
    assert!(results[2].contains("edited"), "{}", results[2]);
    assert!(results[3].starts_with("the"), "{}", results[3]);
    assert!(results[3].contains("bytes 6..9 of 11"), "{}", results[3]);
    assert!(
        results[4].contains("notes.txt") && results[4].contains("src/"),
        "{}",
        results[4]
    );
    assert!(
        results[5].contains("src/lib.rs") && !results[5].contains("ignored"),
        "{}",
        results[5]
    );
    assert!(
        results[6].contains("src/lib.rs:1:fn needle()"),
        "{}",
        results[6]
    );
    assert!(
        !results[6].contains("ignored/"),
        "grep respects .gitignore: {}",
        results[6]
    );
    assert!(
        results[7].contains("exit code: 3") && results[7].contains("from-bash"),
        "{}",
        results[7]
    );
    assert!(results[8].starts_with("error:"), "{}", results[8]);
    assert!(results[9].contains("binary"), "{}", results[9]);
    assert!(results[10].contains("occurs 2 times"), "{}", results[10]);
    assert!(
        results[11].contains("bytes omitted"),
        "huge output is capped"
    );
    assert!(results[11].len() < 64 * 1024, "capped output stays small");
    assert!(
        results[12].contains("outside the workspace"),
        "{}",
        results[12]
    );
    assert!(
        results[13].starts_with("error: invalid arguments"),
        "{}",
        results[13]
    );
    assert_eq!(
        std::fs::read_to_string(root.join("out/new.txt")).expect("written"),
        "hello there"
    );
    assert_eq!(
        std::fs::read_to_string(root.join("notes.txt")).expect("untouched"),
        "alpha\nbeta\ngamma\nbeta\n",
        "a non-unique edit changes nothing"
    );
    let tool_events = worker.tool_activity("run_0000000000000000746F6F6C73");
    assert_eq!(tool_events.len(), calls.len() * 2);
}

#[test]
fn a_command_that_writes_past_the_cap_and_exits_at_once_is_an_overflow() {
    // 20 MB written in one go by a command that exits before the worker's next look: its
    // size, not the moment it was seen, makes it an overflow (it used to come back as
    // `exit code: 0` after the worker read all 20 MB to show 48 KiB of it).
    let ws = tempfile::tempdir().expect("tempdir");
    let state = tempfile::tempdir().expect("tempdir");
    let transcript = state.path().join("t.jsonl");
    let server = ScriptedServer::start(vec![
        Reply::tool_call(
            "c0",
            "bash",
            &json!({"command": "head -c 20000000 /dev/zero; echo done"}).to_string(),
        ),
        Reply::text("over the cap"),
    ])
    .expect("server");
    let mut worker = WorkerProc::spawn();
    let run = "run_00000000000000000000CAPPED";
    let spec = RunSpec::new(run, server.base_url(), coder(), ws.path(), &transcript);
    worker.send(&spec.message());
    let settled = worker.run_settled(run);
    assert_eq!(settled.status, RunSettledStatus::Completed, "{settled}");
    let requests = server.requests();
    let results = tool_results(&requests[1]);
    assert!(
        results[0].contains("wrote more than 16777216 bytes"),
        "{}",
        &results[0][..results[0].len().min(200)]
    );
    assert!(results[0].contains("bytes omitted"), "the output is cut");
    assert!(
        results[0].len() < 64 * 1024,
        "what the model reads stays small"
    );
}
