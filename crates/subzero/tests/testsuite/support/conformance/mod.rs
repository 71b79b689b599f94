//! One conformance suite, both workers: each case drives a real worker process over the
//! control protocol (`start_run`, `steer`, `cancel`, EOF; `hello`, events, `leaf_committed`,
//! `run_settled`, `cancel_confirmed`) against a scripted model on loopback, once per engine:
//! - `Engine::Rust`: `subzero-worker worker` (the broker's worker binary);
//! - `Engine::Pi`: `subzero-worker worker … --engine pi …`, the init that confines Node running
//!   `workers/pi` (needs `npm ci` there: `cargo xtask test` does it; a plain `cargo test`
//!   without it records the group as skipped, see `support::prereq`).
//!
//! Both are started as the broker starts them (`conn`): by the runtime's `Spawner`, into
//! their own PID namespace where the kernel gives one, holding the child lock, the state
//! directory hidden from their tools, every line read through `WorkerConn`. Run as root,
//! each case then runs again as `nobody` (`unprivileged`): the workers are then in a user +
//! PID namespace, as under an unprivileged broker.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::support::{prereq, worker};

pub mod conn;
mod logs;
pub mod unprivileged;

pub use conn::Conn;
pub use worker::{ControlLines, RETRY, WAIT, coder, researcher};

/// The two worker implementations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Engine {
    Rust,
    Pi,
}

/// The skipped-group name of the Pi half of the suite.
const PI_GROUP: &str = "worker_conformance_pi";

/// The checkout's Pi worker folder.
pub fn pi_dir() -> PathBuf {
    prereq::workspace_root()
        .join("workers/pi")
        .canonicalize()
        .unwrap_or_else(|_| prereq::workspace_root().join("workers/pi"))
}

/// The Node `npm ci` installed into the Pi worker's folder.
pub fn pi_node() -> PathBuf {
    pi_dir().join("node_modules/node/bin/node")
}

impl Engine {
    /// Whether this engine can run here; the Pi engine without `npm ci` is recorded as
    /// skipped (or fails, in strict mode).
    pub fn ready(self) -> bool {
        if self == Engine::Rust {
            return true;
        }
        let installed = pi_dir()
            .join("node_modules/@earendil-works/pi-coding-agent/package.json")
            .is_file()
            && pi_node().is_file();
        if installed {
            prereq::present(PI_GROUP);
        } else {
            prereq::missing(
                PI_GROUP,
                "the Pi worker's node_modules (npm ci in workers/pi)",
                "npm ci --prefix workers/pi",
            );
        }
        installed
    }

    /// The engine arguments the broker appends for a child of this engine with `grant`,
    /// its transcript at `transcript`, working in `workspace` (`broker/engines.rs`
    /// `engine_for`); none for the Rust worker.
    pub fn args(
        self,
        grant: &Value,
        workspace: &Path,
        transcript: &Path,
    ) -> Vec<std::ffi::OsString> {
        match self {
            Engine::Rust => Vec::new(),
            Engine::Pi => {
                let mut jail = json!({
                    "tools": grant["tools"],
                    "writeCapable": grant["writeCapable"],
                    "filesystem": grant.get("filesystem").cloned().unwrap_or(Value::Null),
                });
                if let Some(limits) = grant.get("toolLimits") {
                    jail["toolLimits"] = limits.clone();
                }
                vec![
                    "--engine".into(),
                    "pi".into(),
                    "--pi-dir".into(),
                    pi_dir().into(),
                    "--pi-node".into(),
                    pi_node().into(),
                    "--pi-grant".into(),
                    jail.to_string().into(),
                    "--pi-transcript".into(),
                    transcript.into(),
                    "--pi-workspace".into(),
                    workspace.into(),
                ]
            }
        }
    }

    /// A valid run id, distinct per engine and `n`.
    pub fn run_id(self, n: u8) -> String {
        let tag = match self {
            Engine::Rust => "RS",
            Engine::Pi => "PX",
        };
        format!("run_0000000000000000000000{tag}{n:02}")
    }

    /// The digest a broker recomputes for `leaf` of this engine's transcript `text`.
    pub fn digest(self, text: &str, leaf: &str) -> Option<String> {
        let mut header = None;
        let mut lines = std::collections::HashMap::new();
        for raw in text.split_inclusive('\n') {
            let Ok(line) = serde_json::from_str::<Value>(raw.trim_end()) else {
                continue;
            };
            let is_header = match self {
                Engine::Rust => line["type"] == "header",
                Engine::Pi => line["type"] == "session",
            };
            if is_header && header.is_none() {
                header = Some(raw);
                if self == Engine::Pi {
                    continue;
                }
            }
            if let Some(id) = line["id"].as_str() {
                lines.insert(
                    id.to_owned(),
                    (line["parentId"].as_str().map(str::to_owned), raw),
                );
            }
        }
        let mut path = Vec::new();
        let mut cursor = Some(leaf.to_owned());
        while let Some(id) = cursor {
            let (parent, raw) = lines.get(&id)?;
            path.push(*raw);
            cursor = parent.clone();
        }
        let mut hash = Sha256::new();
        if self == Engine::Pi {
            hash.update(header?.as_bytes());
        }
        for raw in path.iter().rev() {
            hash.update(raw.as_bytes());
        }
        Some(format!("sha256:{:x}", hash.finalize()))
    }
}

/// One conformance case's place: a workspace with a README, a state directory (hidden from
/// tools) and the transcript path in it.
pub struct Place {
    /// Declared first: dropped before the directories, after every worker of the case.
    broker: conn::Broker,
    pub ws: tempfile::TempDir,
    pub state: tempfile::TempDir,
}

impl Place {
    pub fn new() -> Place {
        let ws = tempfile::tempdir().expect("workspace");
        std::fs::write(ws.path().join("README.md"), worker::README).expect("readme");
        let state = tempfile::tempdir().expect("state");
        let broker = conn::Broker::new(state.path());
        Place { broker, ws, state }
    }

    pub fn workspace(&self) -> PathBuf {
        self.ws.path().canonicalize().expect("workspace")
    }

    pub fn transcript(&self) -> PathBuf {
        self.state.path().join("transcripts/child.jsonl")
    }

    /// A worker of `engine` for `grant` in this place, started as the broker starts it.
    pub fn worker(&self, engine: Engine, grant: &Value) -> Conn {
        std::fs::create_dir_all(self.state.path().join("transcripts")).expect("transcripts");
        let args = engine.args(grant, &self.workspace(), &self.transcript());
        self.broker.start(&self.workspace(), args)
    }

    /// The `start_run` message of run `id` on `url` with `grant`.
    pub fn start(&self, id: &str, url: String, grant: Value, prompt: &str) -> Value {
        self.start_with(id, url, grant, prompt, |_| {})
    }

    /// [`Self::start`], with `edit` setting more of the message.
    pub fn start_with<'a>(
        &self,
        id: &'a str,
        url: String,
        grant: Value,
        prompt: &'a str,
        edit: impl FnOnce(&mut worker::RunSpec<'a>),
    ) -> Value {
        let transcript = self.transcript();
        let workspace = self.workspace();
        let mut spec = worker::RunSpec::new(id, url, grant, &workspace, &transcript);
        spec.prompt = prompt;
        edit(&mut spec);
        spec.message()
    }

    pub fn transcript_text(&self) -> String {
        std::fs::read_to_string(self.transcript()).unwrap_or_default()
    }
}

/// Runs `case` for each engine that is ready here; run as root, then again as `nobody`.
pub fn each_engine(case: impl Fn(Engine)) {
    on_engines(&[Engine::Rust, Engine::Pi], case);
}

/// Runs `case` for each of `engines` that is ready here; run as root, then again as
/// `nobody` (`unprivileged::again`).
pub fn on_engines(engines: &[Engine], case: impl Fn(Engine)) {
    for &engine in engines {
        if engine.ready() {
            eprintln!(
                "conformance case on the {engine:?} worker as uid {}",
                nix::unistd::geteuid()
            );
            case(engine);
        }
    }
    unprivileged::again();
}

/// The text of every request body the scripted server recorded.
pub fn bodies(requests: &[subzero_testkit::RecordedRequest]) -> Vec<String> {
    requests
        .iter()
        .map(|r| r.json().map(|v| v.to_string()).unwrap_or_default())
        .collect()
}
