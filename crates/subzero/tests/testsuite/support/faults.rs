//! Breaking things on purpose: process-table inspection, signals, a guard that kills
//! whatever a test leaves behind, and a raw stdio MCP client whose stdin the test owns.
//!
//! Processes of one test are recognised by their working directory (workers and their
//! tools run in the test's temporary workspace) or by a marker variable a bash tool
//! exported, so a check or a cleanup never touches anything outside the test — not even
//! after a broker died and its orphans were re-parented.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use subzero_protocol as p;
use subzero_testkit::mcp_client::BrokerCommand;

/// A JSON-RPC message from the broker, as far as the tests read it.
#[derive(Debug, Deserialize)]
pub struct Message {
    /// The request id it answers (`null` included); none for a notification.
    #[serde(default, deserialize_with = "present")]
    pub id: Option<Value>,
    /// Set on a notification or a request from the broker.
    pub method: Option<String>,
    /// A response's result.
    pub result: Option<Value>,
    /// A protocol-level error.
    pub error: Option<rmcp::model::ErrorData>,
}

/// Reads a member that is there, `null` included, as `Some`.
fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(d).map(Some)
}

impl Message {
    /// Reads a raw JSON-RPC message, panicking with it when it is not one.
    pub fn parse(raw: &Value) -> Message {
        serde_json::from_value(raw.clone())
            .unwrap_or_else(|e| panic!("not a JSON-RPC message ({e}): {raw}"))
    }

    /// The result read as a tool call's answer; none for an error or another result.
    pub fn tool_result(&self) -> Option<rmcp::model::CallToolResult> {
        serde_json::from_value(self.result.clone()?).ok()
    }

    /// Whether this message is a response (it has an id and no method).
    pub fn is_response(&self) -> bool {
        self.id.is_some() && self.method.is_none()
    }
}

pub use subzero_testkit::procs::*;

/// Live processes whose environment contains `mark` (e.g. `SZ_FAULT_MARK=<unique>`).
pub fn marked(mark: &str) -> Vec<u32> {
    let me = std::process::id();
    processes()
        .into_iter()
        .filter(|p| p.pid != me)
        .filter(|p| {
            std::fs::read(format!("/proc/{}/environ", p.pid))
                .is_ok_and(|env| env.split(|b| *b == 0).any(|var| var == mark.as_bytes()))
        })
        .map(|p| p.pid)
        .collect()
}

/// Poll `check` every 20 ms until it holds or `limit` passes; true if it held.
pub fn eventually(limit: Duration, mut check: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    loop {
        if check() {
            return true;
        }
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Poll `find` every 20 ms until it returns something or `limit` passes.
pub fn wait_for<T>(limit: Duration, mut find: impl FnMut() -> Option<T>) -> Option<T> {
    let mut found = None;
    eventually(limit, || {
        found = find();
        found.is_some()
    });
    found
}

/// Kills, when dropped, every process a test may have left behind: the brokers it
/// registered, everything running in its temp dir, and everything carrying its marks.
/// Runs on assertion failures too, so a failed test never leaks a `sleep 1000`.
#[derive(Debug)]
pub struct Reaper {
    dir: PathBuf,
    brokers: Vec<u32>,
    marks: Vec<String>,
}

impl Reaper {
    pub fn new(dir: &Path) -> Reaper {
        Reaper {
            dir: dir.to_path_buf(),
            brokers: Vec::new(),
            marks: Vec::new(),
        }
    }

    /// Kill this broker (and its descendants) at the end of the test.
    pub fn broker(&mut self, pid: Option<u32>) -> u32 {
        let pid = pid.expect("the broker has a pid");
        self.brokers.push(pid);
        pid
    }

    /// Kill processes whose environment holds `mark` at the end of the test.
    pub fn mark(&mut self, mark: &str) {
        self.marks.push(mark.to_owned());
    }
}

impl Drop for Reaper {
    fn drop(&mut self) {
        let mut doomed: Vec<u32> = Vec::new();
        for broker in &self.brokers {
            let is_ours = read_proc(*broker).is_some_and(|p| {
                p.argv
                    .iter()
                    .any(|a| a.starts_with(&*self.dir.to_string_lossy()))
            });
            if is_ours {
                doomed.push(*broker);
                doomed.extend(descendants(*broker).iter().map(|p| p.pid));
            }
        }
        doomed.extend(running_in(&self.dir).iter().map(|p| p.pid));
        for mark in &self.marks {
            doomed.extend(marked(mark));
        }
        for pid in doomed {
            sigkill(pid);
        }
    }
}

/// A unique marker for a test's tool processes.
pub fn unique_mark(dir: &Path) -> String {
    let tail = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    format!(
        "SZ_FAULT_MARK={}{}",
        tail.trim_start_matches('.'),
        std::process::id()
    )
}

/// `subzero mcp` spoken to over raw JSON-RPC lines, so the test owns the broker's stdin
/// and can close it at a moment of its choosing (the rmcp client's close also sends
/// SIGTERM after 3 s, which would hide a broker that ignores EOF).
pub struct RawBroker {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::Receiver<Value>,
    next_id: u64,
    /// Responses read while waiting for another id.
    early: Vec<Value>,
}

/// `subzero mcp` as `cmd` describes it, with piped stdin and stdout and stderr to the log
/// file (or inherited), not yet started.
pub fn mcp_command(cmd: &BrokerCommand) -> Command {
    let mut command = Command::new(&cmd.exe);
    command
        .arg("mcp")
        .arg("--workspace")
        .arg(&cmd.workspace)
        .arg("--state-dir")
        .arg(&cmd.state_dir)
        .arg("--config")
        .arg(&cmd.config)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped());
    for (k, v) in &cmd.env {
        command.env(k, v);
    }
    match &cmd.log_file {
        Some(path) => command.stderr(std::fs::File::create(path).expect("log file")),
        None => command.stderr(Stdio::inherit()),
    };
    command
}

impl RawBroker {
    /// Start the broker and complete the MCP handshake.
    pub fn start(cmd: &BrokerCommand) -> RawBroker {
        let mut broker = RawBroker::initialize(cmd);
        broker.write(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        broker
    }

    /// Start the broker and have its `initialize` answered, without saying
    /// `notifications/initialized` (see [`RawBroker::initialized`]).
    pub fn initialize(cmd: &BrokerCommand) -> RawBroker {
        let mut command = mcp_command(cmd);
        let mut child = command.spawn().expect("subzero mcp starts");
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().expect("stdout");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                match serde_json::from_str::<Value>(&line) {
                    Ok(v) => {
                        if tx.send(v).is_err() {
                            break;
                        }
                    }
                    Err(e) => panic!("the broker wrote a non-JSON line on stdout ({e}): {line}"),
                }
            }
        });
        let mut broker = RawBroker {
            child,
            stdin,
            lines,
            next_id: 0,
            early: Vec::new(),
        };
        let id = broker.send_request(
            "initialize",
            json!({
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "faults", "version": "0"},
            }),
        );
        broker
            .response(id, Duration::from_secs(20))
            .expect("initialize answered");
        broker
    }

    /// Say `notifications/initialized` (after [`RawBroker::initialize`]).
    pub fn initialized(&mut self) {
        self.write(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Write these bytes to the broker's stdin as they are (a malformed frame, say).
    pub fn write_raw(&mut self, bytes: &[u8]) {
        let stdin = self.stdin.as_mut().expect("stdin is open");
        stdin.write_all(bytes).expect("write to the broker");
        stdin.flush().expect("flush");
    }

    /// The next message with this id — a response or an error — in `limit`, as for
    /// [`RawBroker::response`], but for ids that are not numbers (or `null`).
    pub fn response_to(&mut self, id: &Value, limit: Duration) -> Option<Value> {
        let answers = |m: &Value| {
            let m = Message::parse(m);
            m.is_response() && m.id.as_ref() == Some(id)
        };
        if let Some(at) = self.early.iter().position(answers) {
            return Some(self.early.remove(at));
        }
        let deadline = Instant::now() + limit;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let message = self.lines.recv_timeout(left).ok()?;
            if answers(&message) {
                return Some(message);
            }
            if Message::parse(&message).is_response() {
                self.early.push(message);
            }
        }
    }

    fn write(&mut self, message: &Value) {
        let stdin = self.stdin.as_mut().expect("stdin is open");
        writeln!(stdin, "{message}").expect("write to the broker");
        stdin.flush().expect("flush");
    }

    fn send_request(&mut self, method: &str, params: Value) -> u64 {
        self.next_id += 1;
        let id = self.next_id;
        self.write(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        id
    }

    /// Send `tools/call` without waiting; returns the request id.
    /// Sends `ping` and waits (bounded) for its answer: the broker has read and handled
    /// everything written before it.
    pub fn ping(&mut self) -> Option<Value> {
        let id = self.send_request("ping", json!({}));
        self.response(id, Duration::from_secs(10))
    }

    pub fn call_async(&mut self, tool: &str, arguments: Value) -> u64 {
        self.send_request("tools/call", json!({"name": tool, "arguments": arguments}))
    }

    /// The response to request `id` (its `result` or `error` member), if it comes in time.
    pub fn response(&mut self, id: u64, limit: Duration) -> Option<Value> {
        let answers = |m: &Value| Message::parse(m).id == Some(json!(id));
        if let Some(at) = self.early.iter().position(answers) {
            return Some(self.early.remove(at));
        }
        let deadline = Instant::now() + limit;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let message = self.lines.recv_timeout(left).ok()?;
            if answers(&message) {
                return Some(message);
            }
            if Message::parse(&message).is_response() {
                self.early.push(message);
            }
        }
    }

    /// A tool call that must fail: its error body (the tool error's text, as compact JSON).
    pub fn refused(&mut self, tool: &str, arguments: Value) -> Value {
        let id = self.call_async(tool, arguments);
        let reply = self
            .response(id, Duration::from_secs(30))
            .unwrap_or_else(|| panic!("{tool} was never answered"));
        let result = Message::parse(&reply).tool_result();
        assert!(
            result.as_ref().is_some_and(|r| r.is_error == Some(true)),
            "{tool} unexpectedly succeeded: {reply}"
        );
        let text = result
            .and_then(|r| r.content.into_iter().next())
            .and_then(|c| c.as_text().map(|t| t.text.clone()))
            .unwrap_or_default();
        serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("{tool}: error text is not JSON ({e}): {reply}"))
    }

    /// A tool call that must fail: its error body, read as the protocol's type.
    pub fn refused_with(&mut self, tool: &str, arguments: Value) -> p::ErrorBody {
        let body = self.refused(tool, arguments);
        serde_json::from_value(body.clone())
            .unwrap_or_else(|e| panic!("{tool}: not an error body ({e}): {body}"))
    }

    /// `tools/call` and its structured result; panics on a tool or protocol error.
    pub fn ok(&mut self, tool: &str, arguments: Value) -> Value {
        let id = self.call_async(tool, arguments);
        let reply = self
            .response(id, Duration::from_secs(40))
            .expect("tool call answered");
        let message = Message::parse(&reply);
        let result = message
            .tool_result()
            .filter(|r| message.error.is_none() && r.is_error != Some(true))
            .unwrap_or_else(|| panic!("{tool} failed: {reply}"));
        result.structured_content.unwrap_or(Value::Null)
    }

    /// `tools/call` read as the protocol's output type `T`; panics on a tool or protocol
    /// error, or when the output does not match `T`.
    pub fn typed<T: DeserializeOwned>(&mut self, tool: &str, arguments: Value) -> T {
        let out = self.ok(tool, arguments);
        serde_json::from_value(out.clone())
            .unwrap_or_else(|e| panic!("{tool} does not match its protocol type ({e}): {out:#?}"))
    }

    /// Every response or notification read so far or arriving within `limit`.
    pub fn drain(&mut self, limit: Duration) -> Vec<Value> {
        let mut all = std::mem::take(&mut self.early);
        let deadline = Instant::now() + limit;
        while let Ok(m) = self
            .lines
            .recv_timeout(deadline.saturating_duration_since(Instant::now()))
        {
            all.push(m);
        }
        all
    }

    /// Close the broker's stdin (the host went away).
    pub fn close_stdin(&mut self) {
        self.stdin.take();
    }

    /// Wait (bounded) for the broker to exit.
    pub fn wait_exit(&mut self, limit: Duration) -> Option<ExitStatus> {
        let mut status = None;
        eventually(limit, || {
            status = self.child.try_wait().ok().flatten();
            status.is_some()
        });
        status
    }
}

impl Drop for RawBroker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
