//! What a host connects to `subzero mcp`'s stdin and stdout: pipes (Python, Rust hosts),
//! Unix socket pairs (Node's libuv), or plain files (`subzero mcp < requests > replies`). The
//! broker serves each one whole: every request answered, EOF the end of the session.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::support;
use crate::support::mcp::Env;
use serde_json::{Value, json};
use subzero_testkit::Reply;

fn requests() -> String {
    [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "stdio-kinds", "version": "0"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
            "params": {"name": "subzero_list", "arguments": {}}}),
    ]
    .iter()
    .map(|m| format!("{m}\n"))
    .collect()
}

/// `subzero mcp` on `env`, stdin and stdout set by each test.
fn broker(env: &Env) -> Command {
    support::faults::mcp_command(&env.command("broker"))
}

/// The three answers, by id, from the broker's output lines.
fn answered(lines: &[Value]) {
    let by_id = |id: u64| {
        lines
            .iter()
            .find(|m| m["id"] == id)
            .unwrap_or_else(|| panic!("no answer to {id}: {lines:#?}"))
    };
    assert_eq!(by_id(1)["result"]["serverInfo"]["name"], "subzero");
    assert_eq!(
        by_id(2)["result"]["tools"].as_array().map(Vec::len),
        Some(subzero_runtime::mcp::TOOL_NAMES.len()),
        "{lines:#?}"
    );
    assert_eq!(
        by_id(3)["result"]["structuredContent"]["children"],
        json!([]),
        "{lines:#?}"
    );
}

fn parse(text: &str) -> Vec<Value> {
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect()
}

#[test]
fn a_broker_on_unix_socket_pairs_serves_the_session_to_its_end() {
    let env = Env::new(vec![Reply::text("unused")]);
    let (mut host_in, broker_in) = UnixStream::pair().expect("stdin pair");
    let (host_out, broker_out) = UnixStream::pair().expect("stdout pair");
    let mut child = broker(&env)
        .stdin(Stdio::from(std::os::fd::OwnedFd::from(broker_in)))
        .stdout(Stdio::from(std::os::fd::OwnedFd::from(broker_out)))
        .spawn()
        .expect("subzero mcp starts");
    host_out
        .set_read_timeout(Some(Duration::from_secs(30)))
        .expect("timeout");
    host_in
        .write_all(requests().as_bytes())
        .expect("write requests");
    let mut reader = BufReader::new(host_out);
    let mut lines = Vec::new();
    while lines.len() < 3 {
        let mut line = String::new();
        let n = reader.read_line(&mut line).expect("read an answer");
        assert!(n > 0, "the broker closed stdout early: {lines:#?}");
        lines.push(serde_json::from_str::<Value>(&line).expect("JSON"));
    }
    answered(&lines);
    // EOF on the socket ends the session.
    host_in
        .shutdown(std::net::Shutdown::Write)
        .expect("shutdown");
    let status = child.wait().expect("the broker exits");
    assert!(status.success(), "{status:?}");
}

#[test]
fn a_broker_reading_and_writing_plain_files_answers_every_request() {
    let env = Env::new(vec![Reply::text("unused")]);
    let input = env.dir.path().join("requests.jsonl");
    let output = env.dir.path().join("replies.jsonl");
    std::fs::write(&input, requests()).expect("requests");
    let status = broker(&env)
        .stdin(std::fs::File::open(&input).expect("open requests"))
        .stdout(std::fs::File::create(&output).expect("create replies"))
        .status()
        .expect("subzero mcp runs");
    assert!(status.success(), "{status:?}");
    let text = std::fs::read_to_string(&output).expect("replies");
    answered(&parse(&text));
}

#[test]
fn a_broker_on_pipes_answers_every_request_and_ends_at_eof() {
    // The broker makes its pipe ends non-blocking (they are its own open files); the host's
    // ends are untouched: it reads every answer, then EOF.
    let env = Env::new(vec![Reply::text("unused")]);
    let mut child = broker(&env)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("subzero mcp starts");
    let mut stdin = child.stdin.take().expect("stdin");
    stdin.write_all(requests().as_bytes()).expect("requests");
    drop(stdin);
    let mut text = String::new();
    std::io::Read::read_to_string(&mut child.stdout.take().expect("stdout"), &mut text)
        .expect("the host's end reads to EOF");
    assert!(child.wait().expect("exit").success());
    answered(&parse(&text));
}
