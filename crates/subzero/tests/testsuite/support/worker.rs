//! Drives a real `subzero-worker worker` process over pipes.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use subzero_protocol::{
    BudgetReached, ChildEvent, ChildSnapshot, ErrorBody, ErrorCode, LastRun, ModelApi, ModelRef,
    RunCut, RunCutLimit, RunSettledStatus, RunUsage, SteerDiscardReason, ToolState, UsageSource,
    WorkerEvent, WorkerMessage,
};
use subzero_testkit::RecordedRequest;
use subzero_testkit::model_requests::chat;

pub const WAIT: Duration = Duration::from_secs(20);

/// How long a test waits for a request that must not come (a retry) before it concludes
/// none will.
pub const RETRY: Duration = Duration::from_millis(200);

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

impl ControlLines for WorkerProc {
    fn next_line(&mut self, what: &str, pred: &dyn Fn(&Value) -> bool) -> Value {
        self.expect(what, pred)
    }

    fn lines(&self) -> &[Value] {
        &self.seen
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
    pub workspace: PathBuf,
    pub transcript: PathBuf,
    pub from_leaf: Option<&'a str>,
    pub expected_digest: Option<&'a str>,
    pub recovery_notice: Option<&'a str>,
    pub secrets: Vec<&'a str>,
    /// `model.api`.
    pub api: &'a str,
    /// `model.outputTokensParam`, when given.
    pub output_tokens_param: Option<&'a str>,
    /// `model.contextWindow`, when given.
    pub context_window: Option<u64>,
    /// `streamLimits`, when given.
    pub stream_limits: Option<Value>,
    /// `compact`, when given.
    pub compact: Option<bool>,
    /// `mcpEnv`, when given.
    pub mcp_env: Option<Value>,
}

/// The `model` of a `start_run`.
#[derive(Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct StartModel<'a> {
    url: &'a str,
    model: &'a str,
    api: &'a str,
    key: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    output_tokens_param: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    context_window: Option<u64>,
}

impl<'a> RunSpec<'a> {
    pub fn new(
        run_id: &'a str,
        url: String,
        snapshot: Value,
        workspace: &Path,
        transcript: &Path,
    ) -> Self {
        Self {
            run_id,
            prompt: "do the task",
            url,
            key: "sk-test-key-0000",
            snapshot,
            workspace: workspace.to_path_buf(),
            transcript: transcript.to_path_buf(),
            from_leaf: None,
            expected_digest: None,
            recovery_notice: None,
            secrets: Vec::new(),
            api: "openai-completions",
            output_tokens_param: None,
            context_window: None,
            stream_limits: None,
            compact: None,
            mcp_env: None,
        }
    }

    pub fn message(&self) -> Value {
        let mut message = self.base_message();
        let extra = [
            ("streamLimits", self.stream_limits.clone()),
            ("compact", self.compact.map(Value::Bool)),
            ("mcpEnv", self.mcp_env.clone()),
        ];
        let members = message.as_object_mut().expect("an object");
        for (name, value) in extra {
            if let Some(value) = value {
                members.insert(name.to_owned(), value);
            }
        }
        message
    }

    /// The message without the optional members.
    fn base_message(&self) -> Value {
        json!({
            "type": "start_run",
            "childId": "ch_01JDZ8Q4W3V9K2M5N7P8R0S1T2",
            "runId": self.run_id,
            "prompt": self.prompt,
            "model": StartModel {
                url: &self.url,
                model: "test-model",
                api: self.api,
                key: self.key,
                output_tokens_param: self.output_tokens_param,
                context_window: self.context_window,
            },
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

/// The `role: tool` message contents of a Chat Completions request body.
pub fn tool_messages(body: &Value) -> Vec<String> {
    subzero_testkit::model_requests::from_json::<chat::Request>(body)
        .tool_results()
        .into_iter()
        .map(str::to_owned)
        .collect()
}

/// The `role: tool` message contents of a recorded Chat Completions request.
pub fn tool_results(request: &RecordedRequest) -> Vec<String> {
    chat::Request::of(request)
        .tool_results()
        .into_iter()
        .map(str::to_owned)
        .collect()
}

/// `snapshot` with the members of its `limits` given in `limits` (an object) replaced.
pub fn with_limits(mut snapshot: Value, limits: &Value) -> Value {
    let members = limits.as_object().expect("limits is an object").clone();
    let to = snapshot
        .get_mut("limits")
        .and_then(Value::as_object_mut)
        .expect("a snapshot has limits");
    to.extend(members);
    snapshot
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
        let mut spec = RunSpec::new(run, url, snapshot, ws, transcript);
        spec.api = self.api;
        spec.message()
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
    ) -> (Settled, Vec<subzero_testkit::RecordedRequest>, WorkerProc) {
        self.settle_limited(script, n, json!({}))
    }

    /// [`Self::settle`] with the snapshot's `limits` members in `limits` replaced.
    pub fn settle_limited(
        &self,
        script: Vec<subzero_testkit::Reply>,
        n: u8,
        limits: Value,
    ) -> (Settled, Vec<subzero_testkit::RecordedRequest>, WorkerProc) {
        let (ws, state) = dirs();
        std::fs::write(ws.path().join("README.md"), README).expect("readme");
        let server = subzero_testkit::ScriptedServer::start(script).expect("server");
        let id = self.run_id(n);
        let snapshot = with_limits(researcher(), &limits);
        let transcript = state.path().join("t.jsonl");
        let message = self.message(server.base_url(), &id, snapshot, ws.path(), &transcript);
        let mut worker = WorkerProc::spawn();
        worker.send(&message);
        let settled = worker.run_settled(&id);
        // Nothing is retried: a retry would show up as one more request within this time.
        let made = server.requests().len();
        server.wait_for_requests(made + 1, RETRY);
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
    ) -> Settled {
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
        assert_eq!(
            settled.status,
            RunSettledStatus::BudgetExhausted,
            "{settled}"
        );
        let result = settled.result();
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
    ) -> Settled {
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
        worker.cancel_confirmed(&id);
        let settled = worker.run_settled(&id);
        assert_eq!(settled.status, RunSettledStatus::Stopped, "{settled}");
        settled
    }
}

/// A worker's stdout line as the protocol's type; `None` when it is not one.
pub fn as_message(line: &Value) -> Option<WorkerMessage> {
    WorkerMessage::deserialize(line).ok()
}

/// A worker's stdout line as the protocol's type; panics with the line when it is not one.
pub fn message(line: &Value) -> WorkerMessage {
    WorkerMessage::deserialize(line)
        .unwrap_or_else(|e| panic!("not a worker control line ({e}): {line}"))
}

/// Reading a worker's control lines ([`WorkerProc`], the conformance `Conn`) as the
/// protocol's types: settlements, commits, events.
pub trait ControlLines {
    /// The next line matching `pred`, as received (every line read is kept).
    fn next_line(&mut self, what: &str, pred: &dyn Fn(&Value) -> bool) -> Value;

    /// Every line read so far.
    fn lines(&self) -> &[Value];

    /// The next control line matching `pred`.
    fn next_message(&mut self, what: &str, pred: impl Fn(&WorkerMessage) -> bool) -> WorkerMessage
    where
        Self: Sized,
    {
        message(&self.next_line(what, &|v| as_message(v).is_some_and(|m| pred(&m))))
    }

    /// The `hello` line.
    fn hello_line(&mut self) -> WorkerMessage
    where
        Self: Sized,
    {
        self.next_message("hello", |m| matches!(m, WorkerMessage::Hello { .. }))
    }

    /// The `run_settled` line of `run`.
    fn run_settled(&mut self, run: &str) -> Settled
    where
        Self: Sized,
    {
        let line = self.next_line("run_settled", &|v| {
            matches!(as_message(v), Some(WorkerMessage::RunSettled { run_id, .. }) if *run_id == run)
        });
        Settled::from_line(&line)
    }

    /// The next `leaf_committed` of `run`.
    fn leaf_committed(&mut self, run: &str) -> Leaf
    where
        Self: Sized,
    {
        match self.next_message(
            "leaf_committed",
            |m| matches!(m, WorkerMessage::LeafCommitted { run_id, .. } if **run_id == run),
        ) {
            WorkerMessage::LeafCommitted {
                leaf_id, digest, ..
            } => Leaf {
                leaf_id: leaf_id.to_string(),
                digest: digest.to_string(),
            },
            other => unreachable!("matched a leaf_committed: {other:?}"),
        }
    }

    /// The number of tool processes the `cancel_confirmed` of `run` reaped.
    fn cancel_confirmed(&mut self, run: &str) -> u64
    where
        Self: Sized,
    {
        match self.next_message(
            "cancel_confirmed",
            |m| matches!(m, WorkerMessage::CancelConfirmed { run_id, .. } if **run_id == run),
        ) {
            WorkerMessage::CancelConfirmed { reaped, .. } => reaped,
            other => unreachable!("matched a cancel_confirmed: {other:?}"),
        }
    }

    /// The next event of `run` matching `pred`.
    fn next_event(
        &mut self,
        what: &str,
        run: &str,
        pred: impl Fn(&WorkerEvent) -> bool,
    ) -> WorkerEvent
    where
        Self: Sized,
    {
        match self.next_message(what, |m| {
            matches!(m, WorkerMessage::Event { run_id, event } if **run_id == run && pred(event))
        }) {
            WorkerMessage::Event { event, .. } => event,
            other => unreachable!("matched an event: {other:?}"),
        }
    }

    /// The next `steer_applied` or `steer_discarded` of `run` whose steer matches `pred`.
    fn steer(&mut self, what: &str, run: &str, pred: impl Fn(&Steer) -> bool) -> Steer
    where
        Self: Sized,
    {
        let event = self.next_event(what, run, |e| Steer::of(e).is_some_and(|s| pred(&s)));
        Steer::of(&event).unwrap_or_else(|| unreachable!("matched a steer: {event:?}"))
    }

    /// The next `tool` event of `run` for `name` in `state`.
    fn tool_event(&mut self, run: &str, name: &str, state: ToolState)
    where
        Self: Sized,
    {
        self.next_event(
            &format!("{name} {state}"),
            run,
            |e| matches!(e, WorkerEvent::Tool { name: n, state: s } if **n == name && *s == state),
        );
    }

    /// Events of `run` seen so far.
    fn events(&self, run: &str) -> Vec<WorkerEvent> {
        self.lines()
            .iter()
            .filter_map(as_message)
            .filter_map(|m| match m {
                WorkerMessage::Event { run_id, event } if *run_id == run => Some(event),
                _ => None,
            })
            .collect()
    }

    /// The text `run` streamed so far, its `text` events joined.
    fn streamed_text(&self, run: &str) -> String {
        self.events(run)
            .iter()
            .filter_map(|e| match e {
                WorkerEvent::Text { text } => Some(text.to_string()),
                _ => None,
            })
            .collect()
    }

    /// The `tool` events of `run` so far: (tool name, state).
    fn tool_activity(&self, run: &str) -> Vec<(String, ToolState)> {
        self.events(run)
            .iter()
            .filter_map(|e| match e {
                WorkerEvent::Tool { name, state } => Some((name.to_string(), *state)),
                _ => None,
            })
            .collect()
    }

    /// Whether `run` reported `name` in `state` so far.
    fn tool_was(&self, run: &str, name: &str, state: ToolState) -> bool {
        self.tool_activity(run)
            .iter()
            .any(|(n, s)| n == name && *s == state)
    }

    /// The `compacted` events of `run` so far.
    fn compactions(&self, run: &str) -> Vec<Compacted> {
        self.events(run)
            .iter()
            .filter_map(|e| match e {
                WorkerEvent::Compacted {
                    branch_from,
                    tokens_after,
                    tokens_before,
                } => Some(Compacted {
                    branch_from: branch_from.to_string(),
                    tokens_before: *tokens_before,
                    tokens_after: *tokens_after,
                }),
                _ => None,
            })
            .collect()
    }
}

/// A `leaf_committed` line's leaf.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Leaf {
    pub leaf_id: String,
    pub digest: String,
}

/// A `compacted` event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Compacted {
    pub branch_from: String,
    pub tokens_before: u64,
    pub tokens_after: u64,
}

/// A `steer_applied` (`reason` is `None`) or `steer_discarded` event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Steer {
    pub steer_id: String,
    pub request_id: Option<String>,
    /// Why it was discarded; `None` when it was applied.
    pub reason: Option<SteerDiscardReason>,
}

impl Steer {
    /// `event` as a steer outcome, when it is one.
    pub fn of(event: &WorkerEvent) -> Option<Steer> {
        match event {
            WorkerEvent::SteerApplied {
                steer_id,
                request_id,
            } => Some(Steer {
                steer_id: steer_id.to_string(),
                request_id: request_id.as_ref().map(|r| r.to_string()),
                reason: None,
            }),
            WorkerEvent::SteerDiscarded {
                steer_id,
                request_id,
                reason,
            } => Some(Steer {
                steer_id: steer_id.to_string(),
                request_id: request_id.as_ref().map(|r| r.to_string()),
                reason: Some(*reason),
            }),
            _ => None,
        }
    }
}

/// A `run_settled` line, typed; shown (`{}`) as the JSON line it was.
#[derive(Debug, Clone)]
pub struct Settled {
    pub status: RunSettledStatus,
    pub result: Option<String>,
    pub error: Option<ErrorBody>,
    pub usage: RunUsage,
    pub cut: Option<RunCut>,
    pub budget: Option<BudgetReached>,
    line: Value,
}

impl Settled {
    /// `line` as a `run_settled`; panics with it when it is not one.
    pub fn from_line(line: &Value) -> Settled {
        match message(line) {
            WorkerMessage::RunSettled {
                budget,
                cut,
                error,
                result,
                status,
                usage,
                ..
            } => Settled {
                status,
                result,
                error,
                usage,
                cut,
                budget,
                line: line.clone(),
            },
            other => panic!("not a run_settled: {other:?}"),
        }
    }

    /// The result text; panics when there is none.
    pub fn result(&self) -> &str {
        self.result
            .as_deref()
            .unwrap_or_else(|| panic!("no result: {self}"))
    }

    /// The error; panics when there is none.
    pub fn error(&self) -> &ErrorBody {
        self.error
            .as_ref()
            .unwrap_or_else(|| panic!("no error: {self}"))
    }

    /// The error's code; panics when there is no error.
    pub fn code(&self) -> ErrorCode {
        self.error().code
    }

    /// The error's message; panics when there is no error.
    pub fn message(&self) -> &str {
        &self.error().message
    }

    /// The error's details; panics when there is no error.
    pub fn details(&self) -> FailureDetails {
        FailureDetails::of(self.error())
    }
}

impl std::fmt::Display for Settled {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if f.alternate() {
            write!(f, "{:#}", self.line)
        } else {
            write!(f, "{}", self.line)
        }
    }
}

/// The free-form `details` of a run's error, as the worker fills them (see `ErrorBody`).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FailureDetails {
    /// `model_request_failed`: the HTTP status (null without one).
    pub status: Option<u16>,
    /// `model_request_failed`: the redacted excerpt of the error body.
    pub excerpt: Option<String>,
    /// `model_request_failed`: the refused origin of a cross-origin redirect.
    pub redirect: Option<String>,
    /// `model_request_failed`: the idle timeout that passed.
    pub idle_timeout_ms: Option<u64>,
    /// `limit_exceeded`: the limit's name.
    pub limit: Option<String>,
    /// `context_exhausted`: the prompt's measured tokens.
    pub context_tokens: Option<u64>,
    /// `context_exhausted`: the known context window.
    pub context_window: Option<u64>,
}

impl FailureDetails {
    /// The details of `error`; panics with them when they do not fit.
    pub fn of(error: &ErrorBody) -> FailureDetails {
        FailureDetails::deserialize(&Value::Object(error.details.clone()))
            .unwrap_or_else(|e| panic!("unexpected error details ({e}): {error:?}"))
    }
}

/// A protocol value read from JSON, kept with that JSON to show it (`{}`, `{:#}`) in
/// assertion messages; derefs to the value.
#[derive(Debug, Clone)]
pub struct Shown<T> {
    value: T,
    json: Value,
}

impl<T: DeserializeOwned> Shown<T> {
    /// `json` as `T`; panics with it when it does not fit.
    pub fn new(json: &Value) -> Self {
        Shown {
            value: subzero_testkit::model_requests::from_json(json),
            json: json.clone(),
        }
    }
}

impl<T> std::ops::Deref for Shown<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.value
    }
}

impl<T> std::fmt::Display for Shown<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if f.alternate() {
            write!(f, "{:#}", self.json)
        } else {
            write!(f, "{}", self.json)
        }
    }
}

/// `snapshot` with its member `name` set to `value`.
fn with_member(mut snapshot: Value, name: &str, value: Value) -> Value {
    snapshot
        .as_object_mut()
        .expect("a snapshot is an object")
        .insert(name.to_owned(), value);
    snapshot
}

/// `snapshot` with `compaction: "off"`.
pub fn with_compaction_off(snapshot: Value) -> Value {
    with_member(snapshot, "compaction", json!("off"))
}

/// `snapshot` with these `toolLimits`.
pub fn with_tool_limits(snapshot: Value, limits: Value) -> Value {
    with_member(snapshot, "toolLimits", limits)
}

/// `snapshot` granting exactly `tools` (names the worker may not know included).
pub fn with_tools(snapshot: Value, tools: &[&str]) -> Value {
    with_member(snapshot, "tools", json!(tools))
}

/// `snapshot` with these `mcpServers`.
pub fn with_mcp_servers(snapshot: Value, servers: Value) -> Value {
    with_member(snapshot, "mcpServers", servers)
}

/// `snapshot` writable, with this `filesystem` grant.
pub fn with_filesystem(snapshot: Value, filesystem: Value) -> Value {
    with_member(
        with_member(snapshot, "writeCapable", json!(true)),
        "filesystem",
        filesystem,
    )
}

/// A `model` argument of `subzero_spawn`/`subzero_resume` (JSON) changed by `edit`.
pub fn edit_model(model: &Value, edit: impl FnOnce(&mut ModelRef)) -> Value {
    let mut typed: ModelRef = subzero_testkit::model_requests::from_json(model);
    edit(&mut typed);
    serde_json::to_value(typed).expect("a model as JSON")
}

/// A `model` argument (JSON) on `api`.
pub fn on_api(model: &Value, api: ModelApi) -> Value {
    edit_model(model, |m| m.api = Some(api))
}

/// The usage of a one-request run whose stream reported none: estimated from the bytes of
/// `request` and the `streamed` bytes, the context use being that request's prompt.
pub fn estimated_usage(request: &RecordedRequest, streamed: u64) -> RunUsage {
    let prompt = (request.body.len() as u64).div_ceil(4);
    RunUsage {
        input_tokens: prompt,
        output_tokens: streamed.div_ceil(4),
        turns: 1,
        source: UsageSource::Estimated,
        context_tokens: Some(prompt),
    }
}

/// The `cut` of a final answer cut at `maxOutputTokens: value`.
pub fn max_output_cut(value: u64) -> RunCut {
    RunCut {
        limit: RunCutLimit::MaxOutputTokens,
        value: std::num::NonZeroU64::new(value).expect("a cap above 0"),
    }
}

/// A broker's child snapshot (`subzero_get`), typed.
pub type Snapshot = Shown<ChildSnapshot>;

/// `json` as a child snapshot; panics with it when it is not one.
pub fn snapshot_of(json: &Value) -> Snapshot {
    Shown::new(json)
}

impl Shown<ChildSnapshot> {
    /// The last run; panics with the snapshot when there is none.
    pub fn last(&self) -> &LastRun {
        self.last_run
            .as_ref()
            .unwrap_or_else(|| panic!("no last run: {self:#}"))
    }

    /// The last run's error; panics with the snapshot when there is none.
    pub fn last_error(&self) -> &ErrorBody {
        self.last()
            .error
            .as_ref()
            .unwrap_or_else(|| panic!("the last run has no error: {self:#}"))
    }

    /// The `tool` events in the snapshot's page: (tool name, state).
    pub fn tool_activity(&self) -> Vec<(String, ToolState)> {
        self.events
            .iter()
            .filter_map(|e| match e {
                ChildEvent::Tool { name, state, .. } => Some((name.to_string(), *state)),
                _ => None,
            })
            .collect()
    }

    /// Whether the snapshot's page holds a `text` event.
    pub fn has_text(&self) -> bool {
        self.events
            .iter()
            .any(|e| matches!(e, ChildEvent::Text { .. }))
    }
}
