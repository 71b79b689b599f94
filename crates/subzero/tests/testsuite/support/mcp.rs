//! A real broker (`subzero mcp`) with a scripted model, driven by a real MCP client.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
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
    let out = ok(
        s,
        "subzero_spawn",
        json!({"prompt": prompt, "templateId": template, "model": env.model()}),
    )
    .await;
    (
        out["childId"].as_str().expect("childId").to_owned(),
        out["runId"].as_str().expect("runId").to_owned(),
    )
}

/// get with a long wait until the child is not running (bounded by `limit`).
pub async fn settle(s: &McpSession, child: &str, limit: Duration) -> Value {
    let deadline = Instant::now() + limit;
    loop {
        let snap = ok(s, "subzero_get", json!({"childId": child, "waitMs": 10000})).await;
        if snap["state"] != "running" || Instant::now() > deadline {
            return snap;
        }
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
