//! Outside MCP clients against the real `subzero mcp`: the official Python SDK (which
//! validates structured content against the advertised output schemas and receives
//! progress notifications), and raw JSON-RPC `initialize` for each protocol version
//! current hosts send.

mod mcp_support;

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::Duration;

use mcp_support::*;
use serde_json::{Value, json};
use subzero_testkit::{Reply, Step};

fn python_sdk_available() -> bool {
    Command::new("python3")
        .args(["-c", "import mcp"])
        .status()
        .is_ok_and(|s| s.success())
}

#[test]
fn the_python_sdk_client_delegates_and_validates_every_result() {
    if !python_sdk_available() {
        // .ci/run installs it (`pip install mcp`); a bare checkout without it cannot run this.
        assert!(
            std::env::var_os("CI").is_none(),
            "CI must install the Python MCP SDK (see .ci/run)"
        );
        eprintln!("skipped: the Python `mcp` package is not installed (pip install mcp)");
        return;
    }
    let slow_tool_turn = Reply::Sse(vec![
        Step::delay_ms(300),
        Step::tool_delta(Some(0), Some("c1"), Some("read"), r#"{"path":"README.md"}"#),
        Step::finish("tool_calls"),
        Step::done(),
    ]);
    let env = Env::new(vec![slow_tool_turn, Reply::text("It is a demo project.")]);
    let script =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/clients/python_sdk_client.py");
    let output = Command::new("python3")
        .arg(script)
        .arg(env!("CARGO_BIN_EXE_subzero"))
        .arg(env.workspace())
        .arg(env.state_dir())
        .arg(env.config())
        .arg(env.server.base_url())
        .env("SUBZERO_TEST_KEY", KEY)
        .output()
        .expect("python3 runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "python client failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let report: Value =
        serde_json::from_str(stdout.lines().last().unwrap_or_default()).expect("report");
    assert_eq!(report["server"], "subzero");
    assert_eq!(report["tools"].as_array().map(Vec::len), Some(8));
    assert_eq!(report["state"], "ready", "{report:#}");
    assert_eq!(report["lastRun"]["status"], "completed");
    assert_eq!(report["lastRun"]["preview"], "It is a demo project.");
    assert_eq!(report["badIsError"], true);
    assert_eq!(report["badCode"], "invalid_request");
    assert_eq!(report["infoText"], "1");
    let progress: Vec<&str> = report["progress"]
        .as_array()
        .expect("progress")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(
        progress.iter().any(|m| m.contains("tool read")),
        "no tool progress reached the client: {progress:?}"
    );
    eprintln!(
        "python sdk: protocol {} progress {progress:?}",
        report["protocolVersion"]
    );
}

/// One raw JSON-RPC exchange: initialize with `version`, then tools/list.
fn initialize_with(env: &Env, version: &str) -> (Value, Value) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_subzero"))
        .args(["mcp", "--workspace"])
        .arg(env.workspace())
        .arg("--state-dir")
        .arg(env.state_dir())
        .arg("--config")
        .arg(env.config())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("broker starts");
    let mut stdin = child.stdin.take().expect("stdin");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}});
    writeln!(stdin, "{init}").expect("write");
    let reply: Value =
        serde_json::from_str(&lines.next().expect("a reply").expect("read")).expect("json");
    writeln!(
        stdin,
        "{}",
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"})
    )
    .expect("write");
    writeln!(
        stdin,
        "{}",
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
    )
    .expect("write");
    let tools: Value =
        serde_json::from_str(&lines.next().expect("a reply").expect("read")).expect("json");
    drop(stdin);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while child.try_wait().ok().flatten().is_none() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
    (reply, tools)
}

#[test]
fn every_protocol_version_current_hosts_send_is_accepted() {
    let env = Env::new(vec![]);
    for version in ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"] {
        let (reply, tools) = initialize_with(&env, version);
        assert_eq!(reply["result"]["protocolVersion"], version, "{reply:#}");
        assert_eq!(reply["result"]["serverInfo"]["name"], "subzero");
        assert_eq!(
            tools["result"]["tools"].as_array().map(Vec::len),
            Some(8),
            "{tools:#}"
        );
    }
}
