//! The fake MCP server answers the handshake and lists exactly the tools it was given.
//! (Having an integration test also makes `cargo test -p subzero-testkit` build the binary
//! that the worker's MCP tests start.)

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};

use serde_json::{Value, json};

fn request(stdin: &mut impl Write, message: &Value) {
    writeln!(stdin, "{message}").expect("write");
    stdin.flush().expect("flush");
}

#[test]
fn the_fake_server_lists_exactly_its_tools() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_fake-mcp-server"))
        .args(["--tools", "lookup,fail"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn");
    let mut stdin = child.stdin.take().expect("stdin");
    let mut stdout = BufReader::new(child.stdout.take().expect("stdout")).lines();
    request(
        &mut stdin,
        &json!({ "jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": { "name": "test", "version": "0" } } }),
    );
    let init: Value =
        serde_json::from_str(&stdout.next().expect("line").expect("read")).expect("json");
    assert_eq!(init["id"], 1, "{init}");
    request(
        &mut stdin,
        &json!({ "jsonrpc": "2.0", "method": "notifications/initialized" }),
    );
    request(
        &mut stdin,
        &json!({ "jsonrpc": "2.0", "id": 2, "method": "tools/list" }),
    );
    let listed: Value =
        serde_json::from_str(&stdout.next().expect("line").expect("read")).expect("json");
    let names: Vec<&str> = listed["result"]["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert_eq!(names, ["lookup", "fail"]);
    drop(stdin);
    let status = child.wait().expect("wait");
    assert!(status.success(), "{status}");
}
