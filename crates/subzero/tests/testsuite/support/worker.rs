//! Drives a real `subzero-worker worker` process over pipes.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

pub const WAIT: Duration = Duration::from_secs(20);

pub struct WorkerProc {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<Value>,
    seen: Vec<Value>,
    stdout: Arc<Mutex<String>>,
    stderr: Arc<Mutex<String>>,
}

impl WorkerProc {
    pub fn spawn() -> Self {
        Self::spawn_with_args(&[])
    }

    /// `subzero-worker worker ARGS…`.
    pub fn spawn_with_args(args: &[&str]) -> Self {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_subzero-worker"));
        cmd.arg("worker").args(args);
        Self::spawn_command(cmd)
    }

    /// Starts the worker through bash with `lock` open (without close-on-exec) as fd 9.
    pub fn spawn_with_lock_fd(lock: &Path) -> Self {
        let mut cmd = Command::new("bash");
        cmd.arg("-c")
            .arg("exec 9>>\"$1\"; exec \"$2\" worker --lock-fd 9")
            .arg("bash")
            .arg(lock)
            .arg(env!("CARGO_BIN_EXE_subzero-worker"));
        Self::spawn_command(cmd)
    }

    pub fn spawn_command(mut cmd: Command) -> Self {
        let mut child = cmd
            .env_clear()
            .env("SUBZERO_LOG", "debug")
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn subzero-worker");
        let stdout = child.stdout.take().expect("stdout");
        let mut stderr = child.stderr.take().expect("stderr");
        let (tx, lines) = channel();
        let out_text = Arc::new(Mutex::new(String::new()));
        let err_text = Arc::new(Mutex::new(String::new()));
        let out_copy = out_text.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                out_copy.lock().expect("lock").push_str(&line);
                out_copy.lock().expect("lock").push('\n');
                let value: Value = serde_json::from_str(&line)
                    .unwrap_or_else(|e| panic!("stdout carried a non-JSON line ({e}): {line}"));
                if tx.send(value).is_err() {
                    break;
                }
            }
        });
        let err_copy = err_text.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = stderr.read(&mut buf) {
                if n == 0 {
                    break;
                }
                err_copy
                    .lock()
                    .expect("lock")
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
        let stdin = child.stdin.take();
        Self {
            child,
            stdin,
            lines,
            seen: Vec::new(),
            stdout: out_text,
            stderr: err_text,
        }
    }

    pub fn send(&mut self, message: &Value) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        writeln!(stdin, "{message}").expect("write to worker");
        stdin.flush().expect("flush");
    }

    /// The next line matching `pred` (every line read is kept in `seen`).
    pub fn expect(&mut self, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
        if let Some(found) = self.seen.iter().find(|v| pred(v)) {
            return found.clone();
        }
        let end = Instant::now() + WAIT;
        loop {
            let left = end.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(value) => {
                    self.seen.push(value.clone());
                    if pred(&value) {
                        return value;
                    }
                }
                Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => panic!(
                    "timed out waiting for {what}; lines so far: {:#?}\nstderr:\n{}",
                    self.seen,
                    self.stderr_text()
                ),
            }
        }
    }

    pub fn expect_type(&mut self, kind: &str, run_id: &str) -> Value {
        self.expect(kind, |v| v["type"] == kind && v["runId"] == run_id)
    }

    pub fn settled(&mut self, run_id: &str) -> Value {
        self.expect_type("run_settled", run_id)
    }

    /// Events of a run seen so far.
    pub fn events(&self, run_id: &str) -> Vec<Value> {
        self.seen
            .iter()
            .filter(|v| v["type"] == "event" && v["runId"] == run_id)
            .map(|v| v["event"].clone())
            .collect()
    }

    pub fn close_stdin(&mut self) {
        self.stdin.take();
    }

    pub fn wait_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let end = Instant::now() + timeout;
        while Instant::now() < end {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        None
    }

    pub fn stdout_text(&self) -> String {
        self.stdout.lock().expect("lock").clone()
    }

    pub fn stderr_text(&self) -> String {
        self.stderr.lock().expect("lock").clone()
    }
}

impl Drop for WorkerProc {
    fn drop(&mut self) {
        self.stdin.take();
        if self.wait_exit(Duration::from_secs(3)).is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

pub fn snapshot(template: &str, tools: &[&str], write_capable: bool) -> Value {
    json!({
        "templateId": template,
        "description": "test template",
        "instructions": "You are a test child.",
        "tools": tools,
        "skills": [],
        "mcpServers": [],
        "writeCapable": write_capable,
        "limits": { "maxTurns": 48, "deadlineMs": 1800000, "toolTimeoutMs": 180000, "maxOutputTokens": 8192 },
        "digest": "sha256:0000000000000000000000000000000000000000000000000000000000000000"
    })
}

pub fn researcher() -> Value {
    snapshot("researcher", &["read", "grep", "find", "ls"], false)
}

pub fn coder() -> Value {
    snapshot(
        "coder",
        &["read", "grep", "find", "ls", "write", "edit", "bash"],
        true,
    )
}

pub struct RunSpec<'a> {
    pub run_id: &'a str,
    pub prompt: &'a str,
    pub url: String,
    pub key: &'a str,
    pub snapshot: Value,
    pub workspace: &'a Path,
    pub transcript: &'a Path,
    pub from_leaf: Option<&'a str>,
    pub expected_digest: Option<&'a str>,
    pub recovery_notice: Option<&'a str>,
    pub secrets: Vec<&'a str>,
}

impl<'a> RunSpec<'a> {
    pub fn new(
        run_id: &'a str,
        url: String,
        snapshot: Value,
        workspace: &'a Path,
        transcript: &'a Path,
    ) -> Self {
        Self {
            run_id,
            prompt: "do the task",
            url,
            key: "sk-test-key-0000",
            snapshot,
            workspace,
            transcript,
            from_leaf: None,
            expected_digest: None,
            recovery_notice: None,
            secrets: Vec::new(),
        }
    }

    pub fn message(&self) -> Value {
        json!({
            "type": "start_run",
            "childId": "ch_01JDZ8Q4W3V9K2M5N7P8R0S1T2",
            "runId": self.run_id,
            "prompt": self.prompt,
            "model": { "url": self.url, "model": "test-model", "api": "openai-completions", "key": self.key },
            "snapshot": self.snapshot,
            "workspaceRoot": self.workspace,
            "transcriptPath": self.transcript,
            "fromLeaf": self.from_leaf,
            "expectedDigest": self.expected_digest,
            "recoveryNotice": self.recovery_notice,
            "secrets": self.secrets,
        })
    }
}

/// The `role: tool` message contents of a recorded request body.
pub fn tool_messages(body: &Value) -> Vec<String> {
    body["messages"]
        .as_array()
        .map(|m| {
            m.iter()
                .filter(|m| m["role"] == "tool")
                .map(|m| m["content"].as_str().unwrap_or_default().to_owned())
                .collect()
        })
        .unwrap_or_default()
}

impl WorkerProc {
    /// Sends SIGTERM (what the parent-death signal delivers).
    pub fn terminate(&self) {
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(self.child.id().to_string())
            .status();
    }
}

/// The workspace's `README.md` in the `worker_protocol_*` runs.
pub const README: &str = "# Demo\nA small project.\n";

/// A workspace and a state directory.
pub fn dirs() -> (tempfile::TempDir, tempfile::TempDir) {
    (
        tempfile::tempdir().expect("tempdir"),
        tempfile::tempdir().expect("tempdir"),
    )
}

/// Runs of the researcher on one model protocol through a real worker: what the
/// `worker_protocol_*` tests share.
#[derive(Debug, Clone, Copy)]
pub struct OnProtocol {
    /// `model.api`.
    pub api: &'static str,
    /// Two letters that keep each file's run ids apart.
    pub tag: &'static str,
}

impl OnProtocol {
    /// A valid run id, distinct per `n`.
    pub fn run_id(&self, n: u8) -> String {
        format!("run_0000000000000000000000{}{n:02}", self.tag)
    }

    /// The `start_run` message of `run` on `url`, for `snapshot`.
    pub fn message(
        &self,
        url: String,
        run: &str,
        snapshot: Value,
        ws: &Path,
        transcript: &Path,
    ) -> Value {
        let mut message = RunSpec::new(run, url, snapshot, ws, transcript).message();
        message["model"]["api"] = json!(self.api);
        message
    }

    /// Starts one run of the researcher on `url`.
    pub fn run(&self, url: String, run: &str, ws: &Path, transcript: &Path) -> WorkerProc {
        let mut worker = WorkerProc::spawn();
        worker.send(&self.message(url, run, researcher(), ws, transcript));
        worker
    }

    /// Runs `script` to the end; the settled line, what the server saw, and the worker.
    pub fn settle(
        &self,
        script: Vec<subzero_testkit::Reply>,
        n: u8,
    ) -> (Value, Vec<subzero_testkit::RecordedRequest>, WorkerProc) {
        self.settle_limited(script, n, json!({}))
    }

    /// [`Self::settle`] with the snapshot's `limits` members in `limits` replaced.
    pub fn settle_limited(
        &self,
        script: Vec<subzero_testkit::Reply>,
        n: u8,
        limits: Value,
    ) -> (Value, Vec<subzero_testkit::RecordedRequest>, WorkerProc) {
        let (ws, state) = dirs();
        std::fs::write(ws.path().join("README.md"), README).expect("readme");
        let server = subzero_testkit::ScriptedServer::start(script).expect("server");
        let id = self.run_id(n);
        let mut snapshot = researcher();
        if let Some(limits) = limits.as_object() {
            for (name, value) in limits {
                snapshot["limits"][name] = value.clone();
            }
        }
        let transcript = state.path().join("t.jsonl");
        let message = self.message(server.base_url(), &id, snapshot, ws.path(), &transcript);
        let mut worker = WorkerProc::spawn();
        worker.send(&message);
        let settled = worker.settled(&id);
        // Nothing is retried: give a retry the time it would need to show up.
        std::thread::sleep(Duration::from_millis(150));
        (settled, server.requests(), worker)
    }

    /// A researcher at `maxTurns: 1` calls a tool (`tool_round`), then its handoff summary
    /// streams `opening` and 3 MB of `flood` that never ends: the summary is cut at 16 KiB
    /// and the stream not read further (read to its end, the handoff would wait for its
    /// timeout). The settled line.
    pub fn flooded_handoff(
        &self,
        tool_round: subzero_testkit::Reply,
        mut opening: Vec<subzero_testkit::Step>,
        flood: String,
        n: u8,
    ) -> Value {
        const CUT_MARKER: &str = "\n[… handoff summary cut at 16384 bytes]";
        opening.extend([
            subzero_testkit::Step::Repeat {
                raw: flood,
                times: 2700,
            },
            subzero_testkit::Step::Hang,
        ]);
        let started = std::time::Instant::now();
        let (settled, requests, _worker) = self.settle_limited(
            vec![tool_round, subzero_testkit::Reply::Sse(opening)],
            n,
            json!({"maxTurns": 1}),
        );
        assert!(started.elapsed() < WAIT, "{:?}", started.elapsed());
        assert_eq!(settled["status"], "budget_exhausted", "{settled}");
        let result = settled["result"].as_str().expect("result");
        assert_eq!(result.len(), 16 * 1024 + CUT_MARKER.len());
        assert!(result.starts_with("Handoff: xxx") && result.ends_with(CUT_MARKER));
        assert_eq!(requests.len(), 2);
        settled
    }

    /// Run `n` on an endpoint that streams `steps` and holds the stream open; cancelled
    /// mid-stream, the run is `stopped`, confirmed, and the endpoint sees its connection
    /// closed. The request must start with `request_line`. The settled line.
    pub fn cancel_mid_stream(
        &self,
        steps: Vec<subzero_testkit::Step>,
        n: u8,
        request_line: &str,
    ) -> Value {
        let (ws, state) = dirs();
        let held = subzero_testkit::held::HeldStream::start(steps).expect("held stream");
        let id = self.run_id(n);
        let transcript = state.path().join("t.jsonl");
        let mut worker = self.run(held.base_url(), &id, ws.path(), &transcript);
        let request = held.wait_for_request(WAIT).expect("the request arrived");
        assert!(request.starts_with(request_line), "{request}");
        // Let the worker read the start of the answer: the cancel lands mid-stream.
        assert!(
            !held.wait_closed(Duration::from_millis(300)),
            "the stream is open while the run waits for more"
        );
        worker.send(&json!({"type": "cancel", "runId": id}));
        assert!(
            held.wait_closed(Duration::from_secs(5)),
            "the model server never saw the connection close"
        );
        worker.expect_type("cancel_confirmed", &id);
        let settled = worker.settled(&id);
        assert_eq!(settled["status"], "stopped", "{settled}");
        settled
    }
}
