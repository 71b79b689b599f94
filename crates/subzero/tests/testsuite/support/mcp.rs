//! A real broker (`subzero mcp`) with a scripted model, driven by a real MCP client.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::de::DeserializeOwned;
use serde_json::{Value, json};
pub use subzero_protocol as p;
use subzero_testkit::mcp_client::{BrokerCommand, McpSession, ToolReply};
use subzero_testkit::{Reply, ScriptedServer};
use tempfile::TempDir;

/// The key the scripted model is called with; tests search for it everywhere.
pub const KEY: &str = "sk-subzero-test-9f3c2a7e51d04b8c";
/// The credential reference configured for the scripted model.
pub const CRED: &str = "test";

/// A workspace, a state dir, a config and a scripted model, shared by the brokers of one test.
pub struct Env {
    pub dir: TempDir,
    pub server: ScriptedServer,
}

impl Env {
    pub fn new(script: Vec<Reply>) -> Env {
        let dir = tempfile::tempdir().expect("temp dir");
        std::fs::create_dir_all(dir.path().join("workspace")).expect("workspace");
        std::fs::write(
            dir.path().join("workspace/README.md"),
            "# Demo project\n\nA small project for Subzero's tests.\n",
        )
        .expect("readme");
        let server = ScriptedServer::start(script).expect("scripted model");
        let env = Env { dir, server };
        env.write_config(&env.origin());
        env
    }

    /// The scripted model's origin (`http://127.0.0.1:PORT`).
    pub fn origin(&self) -> String {
        let url = self.server.base_url();
        url.trim_end_matches("/v1").to_owned()
    }

    pub fn write_config(&self, origin: &str) {
        std::fs::write(
            self.config(),
            format!("[credentials.{CRED}]\nenv = \"SUBZERO_TEST_KEY\"\norigins = [\"{origin}\"]\n"),
        )
        .expect("config");
    }

    pub fn workspace(&self) -> PathBuf {
        self.dir
            .path()
            .join("workspace")
            .canonicalize()
            .expect("workspace path")
    }

    pub fn state_dir(&self) -> PathBuf {
        self.dir.path().join("state")
    }

    pub fn config(&self) -> PathBuf {
        self.dir.path().join("config.toml")
    }

    pub fn log(&self, name: &str) -> PathBuf {
        self.dir.path().join(format!("{name}.log"))
    }

    pub fn command(&self, log: &str) -> BrokerCommand {
        BrokerCommand {
            exe: PathBuf::from(env!("CARGO_BIN_EXE_subzero")),
            workspace: self.workspace(),
            state_dir: self.state_dir(),
            config: self.config(),
            env: vec![
                ("SUBZERO_TEST_KEY".into(), KEY.into()),
                ("SUBZERO_LOG".into(), "debug".into()),
            ],
            log_file: Some(self.log(log)),
        }
    }

    pub async fn broker(&self, log: &str) -> McpSession {
        McpSession::start(&self.command(log))
            .await
            .expect("broker starts")
    }

    /// The model argument of spawn/resume.
    pub fn model(&self) -> Value {
        json!({"url": self.server.base_url(), "model": "scripted", "credentialRef": CRED})
    }

    /// Every file under the temp dir whose bytes contain `needle`.
    pub fn files_containing(&self, needle: &str) -> Vec<PathBuf> {
        let mut found = Vec::new();
        walk(self.dir.path(), &mut |p| {
            if let Ok(bytes) = std::fs::read(p)
                && bytes.windows(needle.len()).any(|w| w == needle.as_bytes())
            {
                found.push(p.to_path_buf());
            }
        });
        found
    }
}

fn walk(dir: &Path, f: &mut dyn FnMut(&Path)) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            walk(&path, f);
        } else {
            f(&path);
        }
    }
}

pub async fn call(s: &McpSession, tool: &str, args: Value) -> ToolReply {
    s.call(tool, args)
        .await
        .unwrap_or_else(|e| panic!("{tool} call failed at the protocol level: {e}"))
}

pub async fn ok(s: &McpSession, tool: &str, args: Value) -> Value {
    let reply = call(s, tool, args).await;
    assert!(!reply.is_error, "{tool} failed: {}", reply.text);
    reply.structured
}

pub async fn err(s: &McpSession, tool: &str, args: Value) -> String {
    let reply = call(s, tool, args).await;
    assert!(
        reply.is_error,
        "{tool} unexpectedly succeeded: {}",
        reply.text
    );
    reply.code().expect("error body has a code").to_owned()
}

pub async fn spawn(s: &McpSession, env: &Env, template: &str, prompt: &str) -> (String, String) {
    let out: p::SpawnOutput = typed(
        s,
        "subzero_spawn",
        json!({"prompt": prompt, "templateId": template, "model": env.model()}),
    )
    .await;
    (out.child_id.to_string(), out.run_id.to_string())
}

/// Reads a tool's structured output (or error body) as its protocol type `T`, panicking with
/// the raw JSON when it does not match: the shape itself is part of the contract.
pub fn parse<T: DeserializeOwned>(what: &str, value: &Value) -> T {
    serde_json::from_value(value.clone())
        .unwrap_or_else(|e| panic!("{what} does not match its protocol type: {e}\n{value:#?}"))
}

/// Calls `tool`, asserts it succeeded and reads its output as the protocol type `T`.
pub async fn typed<T: DeserializeOwned>(s: &McpSession, tool: &str, args: Value) -> T {
    parse(tool, &ok(s, tool, args).await)
}

/// `subzero_get` with these arguments.
pub async fn get(s: &McpSession, args: Value) -> p::ChildSnapshot {
    typed(s, "subzero_get", args).await
}

/// `subzero_get` of `child` without waiting.
pub async fn snapshot(s: &McpSession, child: &str) -> p::ChildSnapshot {
    get(s, json!({"childId": child})).await
}

/// `subzero_get` of `child` with its containment receipt (`containment: true`): a snapshot
/// carries it only when asked.
pub async fn receipts(s: &McpSession, child: &str) -> p::ChildSnapshot {
    get(s, json!({"childId": child, "containment": true})).await
}

/// `subzero_send` with these arguments.
pub async fn send(s: &McpSession, args: Value) -> p::SendOutput {
    typed(s, "subzero_send", args).await
}

/// `subzero_stop` with these arguments.
pub async fn stop(s: &McpSession, args: Value) -> p::StopOutput {
    typed(s, "subzero_stop", args).await
}

/// `subzero_resume` with these arguments.
pub async fn resume(s: &McpSession, args: Value) -> p::ResumeOutput {
    typed(s, "subzero_resume", args).await
}

/// `subzero_list` with these arguments.
pub async fn list(s: &McpSession, args: Value) -> p::ListOutput {
    typed(s, "subzero_list", args).await
}

/// `subzero_output` with these arguments.
pub async fn read_output(s: &McpSession, args: Value) -> p::ArtifactChunk {
    typed(s, "subzero_output", args).await
}

/// `subzero_info`.
pub async fn broker_info(s: &McpSession) -> p::Info {
    typed(s, "subzero_info", json!({})).await
}

/// The last run of a snapshot, panicking with the snapshot when it has none.
pub fn last(snap: &p::ChildSnapshot) -> &p::LastRun {
    snap.last_run
        .as_ref()
        .unwrap_or_else(|| panic!("no lastRun: {snap:#?}"))
}

/// The worker `name` as `subzero_info` lists it.
pub fn worker_named<'a>(info: &'a p::Info, name: &str) -> &'a p::WorkerAvailability {
    info.workers
        .iter()
        .flat_map(|w| w.iter())
        .find(|w| w.name.to_string() == name)
        .unwrap_or_else(|| panic!("worker {name} not listed: {info:#?}"))
}

/// The template `id` as `subzero_info` lists it.
pub fn template_named<'a>(info: &'a p::Info, id: &str) -> &'a p::TemplateInfo {
    info.templates
        .iter()
        .find(|t| t.template_id.as_str() == id)
        .unwrap_or_else(|| panic!("template {id} not listed: {info:#?}"))
}

/// Whether the snapshot's events hold a `tool` event for `name` (in `state`, if given).
pub fn has_tool_event(snap: &p::ChildSnapshot, name: &str, state: Option<p::ToolState>) -> bool {
    snap.events.iter().any(|e| match e {
        p::ChildEvent::Tool {
            name: tool,
            state: now,
            ..
        } => tool.as_str() == name && state.is_none_or(|s| s == *now),
        _ => false,
    })
}

/// The status of a snapshot's last run, if it has one.
pub fn last_status(snap: &p::ChildSnapshot) -> Option<p::TerminalRunStatus> {
    snap.last_run.as_ref().map(|run| run.status)
}

/// The wire name of an event's type (its `type` tag).
pub fn kind(event: &p::ChildEvent) -> &'static str {
    event.kind()
}

/// Asserts that `snap`'s last run is the run `resumed` started, and that it completed.
#[track_caller]
pub fn assert_resumed_run_completed(snap: &p::ChildSnapshot, resumed: &p::ResumeOutput) {
    assert_eq!(
        Some(&last(snap).run_id),
        resumed.run_id.as_ref(),
        "{snap:#?}"
    );
    assert_eq!(
        last_status(snap),
        Some(p::TerminalRunStatus::Completed),
        "{snap:#?}"
    );
}

/// The types of a snapshot's events, in order.
pub fn kinds(snap: &p::ChildSnapshot) -> Vec<&'static str> {
    snap.events.iter().map(kind).collect()
}

/// An event's per-child sequence number.
pub fn seq(event: &p::ChildEvent) -> u64 {
    event.seq()
}

/// The child an event belongs to ("" where the document leaves it out: `subzero_get`).
pub fn event_child(event: &p::ChildEvent) -> &str {
    event.child_id().map_or("", |child| child.as_str())
}

/// get with a long wait until the child is not running (bounded by `limit`).
pub async fn settle(s: &McpSession, child: &str, limit: Duration) -> Value {
    let deadline = Instant::now() + limit;
    loop {
        let snap = ok(s, "subzero_get", json!({"childId": child, "waitMs": 10000})).await;
        if parse::<p::ChildSnapshot>("subzero_get", &snap).state != p::ChildState::Running
            || Instant::now() > deadline
        {
            return snap;
        }
    }
}

/// [`settle`], read as the protocol's snapshot.
pub async fn settled(s: &McpSession, child: &str, limit: Duration) -> p::ChildSnapshot {
    parse("subzero_get", &settle(s, child, limit).await)
}

/// Poll get until `pred` holds of the typed snapshot (bounded); returns the last snapshot.
pub async fn until_snap(
    s: &McpSession,
    child: &str,
    limit: Duration,
    pred: impl Fn(&p::ChildSnapshot) -> bool,
) -> p::ChildSnapshot {
    let deadline = Instant::now() + limit;
    loop {
        let snap = get(
            s,
            json!({"childId": child, "waitMs": 500, "waitFor": "event", "eventLimit": 50}),
        )
        .await;
        if pred(&snap) || Instant::now() > deadline {
            return snap;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Poll get until `pred` holds (bounded).
pub async fn until(
    s: &McpSession,
    child: &str,
    limit: Duration,
    pred: impl Fn(&Value) -> bool,
) -> Value {
    let deadline = Instant::now() + limit;
    loop {
        let snap = ok(
            s,
            "subzero_get",
            json!({"childId": child, "waitMs": 500, "waitFor": "event", "eventLimit": 50}),
        )
        .await;
        if pred(&snap) || Instant::now() > deadline {
            return snap;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

pub fn slow_reply(text: &str, delay_ms: u64) -> Reply {
    use subzero_testkit::Step;
    Reply::Sse(vec![
        Step::delay_ms(delay_ms),
        Step::text(text),
        Step::finish("stop"),
        Step::done(),
    ])
}

#[allow(unused_imports)]
pub use subzero_testkit::procs::sigkill;

/// Pids of `subzero-worker worker` processes working in `workspace`.
pub fn workers_in(workspace: &Path) -> Vec<u32> {
    subzero_testkit::procs::running_in(workspace)
        .into_iter()
        .filter(|p| p.argv.get(1).is_some_and(|a| a == "worker"))
        .map(|p| p.pid)
        .collect()
}

/// Wait (bounded) until no worker runs in `workspace`; returns whether none is left.
pub fn wait_no_workers(workspace: &Path, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if workers_in(workspace).is_empty() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    workers_in(workspace).is_empty()
}

/// The members of an error body's free-form `details` that the tests read, as the docs name
/// them; any other member is ignored.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Details {
    /// The invalid argument's path (`invalid_request`).
    pub field: Option<String>,
    /// The model's HTTP status (`model_request_failed`).
    pub status: Option<u64>,
    /// The start of the model's error body (`model_request_failed`).
    pub excerpt: Option<String>,
    /// The refused redirect's origin (`model_request_failed`).
    pub redirect: Option<String>,
    /// The limit that was hit (`limit_exceeded`).
    pub limit: Option<String>,
}

/// An error body's `details`, read as [`Details`] (panicking with the body on a mismatch).
pub fn details(body: &p::ErrorBody) -> Details {
    serde_json::from_value(Value::Object(body.details.clone()))
        .unwrap_or_else(|e| panic!("details do not match ({e}): {body:#?}"))
}

/// The error of a snapshot's last run, panicking with the snapshot when it has none.
pub fn last_error(snap: &p::ChildSnapshot) -> &p::ErrorBody {
    last(snap)
        .error
        .as_ref()
        .unwrap_or_else(|| panic!("the last run has no error: {snap:#?}"))
}

/// A snapshot with `waited` — which describes the call, not the child — set to one fixed
/// value, so that two snapshots of an unchanged child compare equal.
pub fn without_wait(mut snap: p::ChildSnapshot) -> p::ChildSnapshot {
    snap.waited = p::Waited {
        ms: p::WaitMs(0),
        reason: p::WaitedReason::Immediate,
    };
    snap
}
