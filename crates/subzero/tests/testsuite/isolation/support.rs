//! A git workspace, a directed model and a broker for the isolation tests.
//!
//! A child's prompt is its plan: `PLAN write PATH CONTENT` (the `write` tool), `PLAN bash
//! COMMAND`, or `PLAN none`. The model calls that tool once, then answers `done`, so any
//! number of children may run at once in any order.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use subzero_testkit::directed::DirectedServer;
use subzero_testkit::mcp_client::{McpSession, ToolReply};
use subzero_testkit::{RecordedRequest, Reply};

pub use crate::support::faults::Reaper;
pub use crate::support::mcp::*;

/// A broker environment whose workspace is a git repository with one commit.
pub struct GitEnv {
    pub env: Env,
    pub model: DirectedServer,
}

impl GitEnv {
    pub fn new() -> GitEnv {
        GitEnv::with_model(Arc::new(answer))
    }

    /// A workspace whose children's model answers with `model` (see [`plan_answer`]).
    pub fn with_model(model: subzero_testkit::directed::Responder) -> GitEnv {
        let env = Env::new(Vec::new());
        let model = DirectedServer::start(model).expect("directed model");
        env.write_config(&model.origin());
        let ws = env.workspace();
        git(&ws, &["init", "-q", "-b", "main"]);
        std::fs::write(ws.join("shared.txt"), "one\ntwo\nthree\n").expect("shared.txt");
        std::fs::write(ws.join(".gitignore"), "ignored/\n").expect(".gitignore");
        git(&ws, &["add", "-A"]);
        git(&ws, &["commit", "-q", "-m", "init"]);
        GitEnv { env, model }
    }

    pub fn workspace(&self) -> PathBuf {
        self.env.workspace()
    }

    pub fn model_arg(&self) -> Value {
        json!({"url": self.model.base_url(), "model": "directed", "credentialRef": CRED})
    }

    pub async fn broker(&self, name: &str, reaper: &mut Reaper) -> McpSession {
        let s = self.env.broker(name).await;
        reaper.broker(s.pid());
        s
    }

    /// Spawns a coder in its own checkout on `plan`; its child id.
    pub async fn isolated_coder(&self, s: &McpSession, plan: &str) -> String {
        let out: p::SpawnOutput = typed(
            s,
            "subzero_spawn",
            json!({"prompt": plan, "templateId": "coder", "model": self.model_arg(), "isolation": "checkout"}),
        )
        .await;
        out.child_id.to_string()
    }

    /// Adds `[templates.<id>]` with these TOML lines to the broker's configuration.
    pub fn add_template(&self, id: &str, lines: &str) {
        let config = std::fs::read_to_string(self.env.config()).expect("config");
        std::fs::write(
            self.env.config(),
            format!("{config}\n[templates.{id}]\n{lines}\n"),
        )
        .expect("config");
    }
}

/// The directed model's answer to `request`: the plan's one tool call, then `done`.
pub fn plan_answer(request: &RecordedRequest) -> Reply {
    answer(request)
}

/// The directed model: the plan's one tool call, then `done`.
fn answer(request: &RecordedRequest) -> Reply {
    let body = request.json().unwrap_or_default();
    let messages = body["messages"].as_array().cloned().unwrap_or_default();
    // The run's own prompt is the last user message with a plan (a resumed child's
    // conversation holds its earlier runs too); its tool was called once it has a result.
    let Some(at) = messages
        .iter()
        .rposition(|m| m["role"] == "user" && plan_of(m).is_some())
    else {
        return Reply::text("done");
    };
    if messages[at..].iter().any(|m| m["role"] == "tool") {
        return Reply::text("done");
    }
    let plan = plan_of(&messages[at]).unwrap_or_default();
    let mut words = plan.splitn(3, ' ');
    match (words.next(), words.next(), words.next()) {
        (Some("write"), Some(path), Some(content)) => Reply::tool_call(
            "c1",
            "write",
            &json!({"path": path, "content": content.replace("\\n", "\n")}).to_string(),
        ),
        (Some("bash"), Some(first), rest) => {
            let command = format!("{first} {}", rest.unwrap_or_default());
            Reply::tool_call("c1", "bash", &json!({"command": command}).to_string())
        }
        _ => Reply::text("done"),
    }
}

/// The `PLAN …` line of a message.
fn plan_of(message: &Value) -> Option<String> {
    let text = match &message["content"] {
        Value::String(text) => text.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        _ => return None,
    };
    text.lines()
        .find_map(|l| l.strip_prefix("PLAN "))
        .map(str::to_owned)
}

/// Runs git in `dir`; its stdout.
pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .current_dir(dir)
        .args(["-c", "user.name=Test", "-c", "user.email=test@example.com"])
        .args(args)
        .output()
        .expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Every file of the workspace (its `.git` included) with its bytes, and git's status: a
/// refused apply must leave all of it as it was.
pub fn fingerprint(ws: &Path) -> (BTreeMap<PathBuf, Vec<u8>>, String) {
    let mut files = BTreeMap::new();
    collect(ws, ws, &mut files);
    // The index's stat cache may be refreshed by a read; its entries must not change.
    files.remove(Path::new(".git/index"));
    // A merge computed off to the side leaves unreferenced loose objects, which no ref,
    // index entry or file names (git's gc prunes them): refs, HEAD, index and files are
    // what a refused apply must leave as they were.
    files.retain(|path, _| !path.starts_with(".git/objects"));
    let status = git(ws, &["status", "--porcelain=v2", "-z"]);
    let staged = git(ws, &["ls-files", "-s"]);
    (files, format!("{status}\n{staged}"))
}

fn collect(root: &Path, dir: &Path, out: &mut BTreeMap<PathBuf, Vec<u8>>) {
    for entry in std::fs::read_dir(dir).expect("read_dir").flatten() {
        let path = entry.path();
        let meta = std::fs::symlink_metadata(&path).expect("lstat");
        if meta.is_dir() {
            collect(root, &path, out);
        } else if let Ok(bytes) = std::fs::read(&path) {
            out.insert(
                path.strip_prefix(root).expect("under root").to_path_buf(),
                bytes,
            );
        }
    }
}

/// The paths whose bytes differ between two fingerprints, and whether the status differs.
pub fn differences(
    a: &(BTreeMap<PathBuf, Vec<u8>>, String),
    b: &(BTreeMap<PathBuf, Vec<u8>>, String),
) -> (Vec<PathBuf>, bool) {
    let paths =
        a.0.keys()
            .chain(b.0.keys())
            .filter(|p| a.0.get(*p) != b.0.get(*p))
            .cloned()
            .collect();
    (paths, a.1 != b.1)
}

/// Waits until `child` has settled; its snapshot.
pub async fn settled_child(s: &McpSession, child: &str) -> p::ChildSnapshot {
    let snap = settled(s, child, Duration::from_secs(60)).await;
    assert_eq!(snap.state, p::ChildState::Ready, "{snap:#?}");
    snap
}

/// The checkout a settled isolated child reports.
pub fn checkout(snap: &p::ChildSnapshot) -> &p::Checkout {
    snap.checkout
        .as_ref()
        .expect("an isolated child reports its checkout")
}

/// `subzero_apply` with these arguments.
pub async fn apply(s: &McpSession, args: Value) -> ToolReply {
    call(s, "subzero_apply", args).await
}
