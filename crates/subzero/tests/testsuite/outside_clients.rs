//! Outside MCP clients against the real `subzero mcp`: the official Python SDK (which
//! validates structured content against the advertised output schemas and receives
//! progress notifications), raw JSON-RPC `initialize` for each protocol version current
//! hosts send, and every client SDK — rmcp, Python, TypeScript 1.x and 2.x — reading the
//! error code of each case in `tests/clients/error_cases.json`. Ajv 2020 in strict mode
//! compiles every published schema (`tests/clients/ts/strict_schemas.mjs`).

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use crate::support;
use crate::support::mcp::*;
use serde::Deserialize;
use serde_json::{Map, Value, json};
use subzero_runtime::mcp::TOOL_NAMES;
use subzero_testkit::{Reply, Step};

/// The Python SDK client's report (`tests/clients/python_sdk_client.py`).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct PythonReport {
    protocol_version: String,
    server: String,
    tools: Vec<String>,
    state: p::ChildState,
    last_run: p::LastRun,
    progress: Vec<Value>,
    bad_is_error: bool,
    bad_structured: bool,
    bad_code: Option<String>,
    info_text: String,
}

/// One step of `tests/clients/error_cases.json`.
#[derive(Debug, Deserialize)]
struct Case {
    tool: String,
    arguments: Value,
    /// `ok` or the error code the step must end with.
    expect: String,
}

/// `tests/clients/error_cases.json`.
#[derive(Debug, Deserialize)]
struct Cases {
    steps: Vec<Case>,
}

/// What a client read of one step.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct CaseRow {
    got: String,
    is_error: bool,
    structured: bool,
}

/// An error-case script's report: the client, and what it read of each step.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ClientReport {
    sdk: Option<String>,
    version: Option<String>,
    tools: Option<Vec<Value>>,
    schema_warnings: Option<Vec<Value>>,
    results: Vec<CaseRow>,
}

/// The Ajv strict-mode report (`tests/clients/ts/strict_schemas.mjs`).
#[derive(Debug, Deserialize)]
struct AjvReport {
    failures: Vec<Value>,
    warnings: Vec<Value>,
    tools: u64,
    files: u64,
    sources: u64,
    compiled: u64,
}

/// A JSON-RPC response as far as the raw exchange reads it.
#[derive(Debug, Deserialize)]
struct RpcReply<T> {
    result: T,
}

/// The group of the Python SDK cases.
const PYTHON_SDK: &str = "outside_clients:python-sdk";
/// The group of the TypeScript SDK and Ajv cases.
const TYPESCRIPT_SDKS: &str = "outside_clients:typescript-sdks";

/// Whether the Python SDK is installed (else the test is skipped, or fails in strict mode).
fn python_sdk_available() -> bool {
    if support::prereq::python_runs("import mcp") {
        support::prereq::present(PYTHON_SDK);
        return true;
    }
    support::prereq::missing(
        PYTHON_SDK,
        "the Python MCP SDK (mcp 2.x)",
        "python3 -m pip install 'mcp==2.3.0'",
    );
    false
}

#[test]
fn the_python_sdk_client_delegates_and_validates_every_result() {
    if !python_sdk_available() {
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
    let output = Command::new(support::prereq::python())
        .arg(script)
        .arg(env!("CARGO_BIN_EXE_subzero"))
        .arg(env.workspace())
        .arg(env.state_dir())
        .arg(env.config())
        .arg(env.server.base_url())
        .env("SUBZERO_TEST_KEY", KEY)
        .output()
        .expect("python runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "python client failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let report: PythonReport =
        serde_json::from_str(stdout.lines().last().unwrap_or_default()).expect("report");
    assert_eq!(report.server, "subzero");
    assert_eq!(report.tools.len(), TOOL_NAMES.len());
    assert_eq!(report.state, p::ChildState::Ready, "{report:#?}");
    assert_eq!(report.last_run.status, p::TerminalRunStatus::Completed);
    assert_eq!(report.last_run.preview.as_str(), "It is a demo project.");
    assert!(report.bad_is_error);
    assert!(!report.bad_structured);
    assert_eq!(report.bad_code.as_deref(), Some("invalid_request"));
    assert_eq!(report.info_text, "1");
    let progress: Vec<&str> = report.progress.iter().filter_map(Value::as_str).collect();
    assert!(
        progress.iter().any(|m| m.contains("tool read")),
        "no tool progress reached the client: {progress:?}"
    );
    eprintln!(
        "python sdk: protocol {} progress {progress:?}",
        report.protocol_version
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
        let init: RpcReply<rmcp::model::InitializeResult> =
            serde_json::from_value(reply.clone()).unwrap_or_else(|e| panic!("{e}: {reply:#?}"));
        assert_eq!(
            init.result.protocol_version.to_string(),
            version,
            "{reply:#?}"
        );
        assert_eq!(init.result.server_info.name, "subzero");
        let listed: RpcReply<rmcp::model::ListToolsResult> =
            serde_json::from_value(tools.clone()).unwrap_or_else(|e| panic!("{e}: {tools:#?}"));
        assert_eq!(listed.result.tools.len(), TOOL_NAMES.len(), "{tools:#?}");
    }
}

/// `tests/clients/`.
fn clients_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/clients")
}

/// The steps every client makes: `tests/clients/error_cases.json`.
fn error_cases() -> Vec<Case> {
    let text = std::fs::read_to_string(clients_dir().join("error_cases.json")).expect("cases");
    let cases: Cases = serde_json::from_str(&text).expect("cases are JSON");
    cases.steps
}

/// A broker environment for the error cases: the first spawn's turn takes a minute, so
/// its child is running until the case that stops it.
fn error_case_env() -> Env {
    Env::new(vec![slow_reply("Done.", 60_000)])
}

/// The variables the scripts read to start `subzero mcp` in `env`.
fn broker_vars(env: &Env) -> Vec<(&'static str, std::ffi::OsString)> {
    vec![
        ("SUBZERO_EXE", env!("CARGO_BIN_EXE_subzero").into()),
        ("SUBZERO_WORKSPACE", env.workspace().into()),
        ("SUBZERO_STATE_DIR", env.state_dir().into()),
        ("SUBZERO_CONFIG", env.config().into()),
        ("SUBZERO_MODEL_URL", env.server.base_url().into()),
        ("SUBZERO_TEST_KEY", KEY.into()),
    ]
}

/// A script's report (its last stdout line), after it exited successfully.
fn report_of<T: serde::de::DeserializeOwned>(client: &str, output: &Output) -> T {
    let stdout = String::from_utf8_lossy(&output.stdout);
    let report = stdout
        .lines()
        .last()
        .and_then(|line| serde_json::from_str::<T>(line).ok());
    match report {
        Some(report) if output.status.success() => report,
        _ => panic!(
            "{client} failed ({}):\n{stdout}\n{}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        ),
    }
}

/// Every step's outcome is what the case file says, and every error arrived as a tool
/// error with its code in the text and no structured content.
fn assert_every_case(client: &str, rows: &[CaseRow]) {
    let steps = error_cases();
    assert_eq!(rows.len(), steps.len(), "{client}: {rows:#?}");
    for (step, row) in steps.iter().zip(rows) {
        assert_eq!(row.got, step.expect, "{client}: {row:?}");
        let failed = step.expect != "ok";
        assert_eq!(row.is_error, failed, "{client}: {row:?}");
        assert_eq!(row.structured, !failed, "{client}: {row:?}");
    }
    let codes: std::collections::BTreeSet<&str> = rows
        .iter()
        .map(|r| r.got.as_str())
        .filter(|c| *c != "ok")
        .collect();
    eprintln!("{client}: read {} error codes: {codes:?}", codes.len());
}

/// `"$name"` strings replaced by their binding, recursively.
fn substitute(value: &Value, bindings: &Map<String, Value>) -> Value {
    match value {
        Value::String(s) if s.starts_with('$') => bindings
            .get(&s[1..])
            .cloned()
            .unwrap_or_else(|| panic!("no binding for {s}")),
        Value::Array(items) => items.iter().map(|v| substitute(v, bindings)).collect(),
        Value::Object(map) => map
            .iter()
            .map(|(k, v)| (k.clone(), substitute(v, bindings)))
            .collect(),
        other => other.clone(),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn rmcp_reads_every_error_code() {
    let env = error_case_env();
    let session = env.broker("rmcp-errors").await;
    let mut bindings = Map::new();
    bindings.insert("modelUrl".into(), env.server.base_url().into());
    bindings.insert("oversizePrompt".into(), "é".repeat(33 * 1024).into());
    let mut results = Vec::new();
    for step in error_cases() {
        let tool = step.tool.as_str();
        let reply = call(&session, tool, substitute(&step.arguments, &bindings)).await;
        if !reply.is_error
            && let Some(fields) = reply.structured.as_object()
        {
            bindings.extend(
                fields
                    .iter()
                    .filter(|(_, v)| v.is_string())
                    .map(|(k, v)| (k.clone(), v.clone())),
            );
        }
        results.push(CaseRow {
            got: reply
                .code()
                .unwrap_or(if reply.is_error { "?" } else { "ok" })
                .to_owned(),
            is_error: reply.is_error,
            structured: reply.has_structured_content,
        });
    }
    session.close().await.expect("close");
    assert_every_case("rmcp", &results);
}

#[test]
fn the_python_sdk_reads_every_error_code() {
    if !python_sdk_available() {
        return;
    }
    let env = error_case_env();
    let output = Command::new(support::prereq::python())
        .arg(clients_dir().join("python_sdk_error_cases.py"))
        .envs(broker_vars(&env))
        .output()
        .expect("python runs");
    let report: ClientReport = report_of("the Python SDK", &output);
    let client = format!("mcp {}", report.version.as_deref().unwrap_or("?"));
    assert_every_case(&client, &report.results);
}

/// `tests/clients/ts/` with its node modules installed (once per test run, from the
/// lockfile; `cargo xtask test` installs them before the tests), or `None` without Node
/// (outside strict mode).
fn node_project() -> Option<PathBuf> {
    static PROJECT: OnceLock<Option<PathBuf>> = OnceLock::new();
    PROJECT
        .get_or_init(|| {
            if !support::prereq::node_available() {
                support::prereq::missing(TYPESCRIPT_SDKS, "Node 20 and npm", "install Node 20");
                return None;
            }
            support::prereq::present(TYPESCRIPT_SDKS);
            let dir = clients_dir().join("ts");
            support::prereq::npm_installed(&dir, &[]);
            Some(dir)
        })
        .clone()
}

/// Runs `error_cases.mjs` with one TypeScript SDK major version.
fn typescript_sdk_reads_every_error_code(sdk: &str) {
    let Some(dir) = node_project() else {
        return;
    };
    let env = error_case_env();
    let output = Command::new("node")
        .arg(dir.join("error_cases.mjs"))
        .arg(sdk)
        .envs(broker_vars(&env))
        .output()
        .expect("node runs");
    let report: ClientReport = report_of(&format!("the TypeScript SDK ({sdk})"), &output);
    let client = format!(
        "{} {}",
        report.sdk.as_deref().unwrap_or("?"),
        report.version.as_deref().unwrap_or("?")
    );
    assert_eq!(
        report.tools.as_ref().map(Vec::len),
        Some(TOOL_NAMES.len()),
        "{report:#?}"
    );
    assert_eq!(
        report.schema_warnings.as_deref(),
        Some(&[][..]),
        "{client}: {report:#?}"
    );
    assert_every_case(&client, &report.results);
}

#[test]
fn the_typescript_sdk_1_reads_every_error_code() {
    typescript_sdk_reads_every_error_code("sdk1");
}

#[test]
fn the_typescript_sdk_2_reads_every_error_code() {
    typescript_sdk_reads_every_error_code("sdk2");
}

#[test]
fn ajv_strict_compiles_every_published_schema() {
    let Some(dir) = node_project() else {
        return;
    };
    let env = Env::new(vec![]);
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let output = Command::new("node")
        .arg(dir.join("strict_schemas.mjs"))
        .arg(root.join("generated/schemas"))
        .arg(root.join("schema-src/v1"))
        .envs(broker_vars(&env))
        .output()
        .expect("node runs");
    let report: AjvReport = report_of("Ajv strict", &output);
    assert!(report.failures.is_empty(), "{report:#?}");
    assert!(report.warnings.is_empty(), "{report:#?}");
    // Every file of both directories, and an input and an output schema for each tool.
    assert_eq!(report.tools as usize, TOOL_NAMES.len(), "{report:#?}");
    let (files, sources) = (report.files, report.sources);
    assert!(files >= 24 && sources > files, "{report:#?}");
    assert_eq!(
        report.compiled as usize,
        files as usize + sources as usize + 2 * TOOL_NAMES.len(),
        "{report:#?}"
    );
}

/// The reference TypeScript Tasks package (`@modelcontextprotocol/ext-tasks`, its 2026-07-28
/// schemas) judges every Tasks message `subzero mcp` answers a 2026-07-28 client with.
#[test]
fn the_typescript_tasks_package_accepts_every_tasks_message() {
    let Some(dir) = node_project() else {
        return;
    };
    let answer = "Answered at once.";
    let env = Env::new(vec![Reply::text(answer), Reply::Hang]);
    let output = Command::new("node")
        .arg(dir.join("tasks_v2.mjs"))
        .envs(broker_vars(&env))
        .env("SUBZERO_ANSWER", answer)
        .output()
        .expect("node runs");
    let report: Value = report_of("the TypeScript Tasks package", &output);
    let checks = report["checks"].as_array().expect("checks");
    assert!(checks.len() >= 7, "{report:#}");
    for check in checks {
        assert_eq!(check["ok"], true, "{check:#}");
    }
}
