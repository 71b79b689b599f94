//! One conformance suite, both workers: each case drives a real worker process over the
//! control protocol (`start_run`, `steer`, `cancel`, EOF; `hello`, events, `leaf_committed`,
//! `run_settled`, `cancel_confirmed`) against a scripted model on loopback, once per engine:
//! - `Engine::Rust`: `subzero worker`;
//! - `Engine::Pi`: `subzero worker … --engine pi …`, the init that confines Node running
//!   `workers/pi` (needs `npm ci` there: `cargo xtask test` does it; a plain `cargo test`
//!   without it records the group as skipped, see `prereq_support`).
//!
//! Both run as the broker runs them on its subreaper fallback (no PID namespace: the broker
//! makes that one); `mcp_pi_worker.rs` runs the Pi worker in the broker's namespace.
#![allow(dead_code, unused_imports)]

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

#[path = "../prereq_support/mod.rs"]
mod prereq_support;
#[path = "../worker_support/mod.rs"]
pub mod worker_support;

pub use worker_support::{WAIT, WorkerProc, coder, researcher, snapshot};

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
    prereq_support::workspace_root()
        .join("workers/pi")
        .canonicalize()
        .unwrap_or_else(|_| prereq_support::workspace_root().join("workers/pi"))
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
            prereq_support::present(PI_GROUP);
        } else {
            prereq_support::missing(
                PI_GROUP,
                "the Pi worker's node_modules (npm ci in workers/pi)",
                "npm ci --prefix workers/pi",
            );
        }
        installed
    }

    /// A worker of this engine for a child with `grant`, its transcript at `transcript`,
    /// working in `workspace`; `hide` is hidden from its tools (the state directory).
    pub fn start(
        self,
        grant: &Value,
        workspace: &Path,
        transcript: &Path,
        hide: &Path,
    ) -> WorkerProc {
        match self {
            Engine::Rust => WorkerProc::spawn_with_args(&["--hide", &hide.to_string_lossy()]),
            Engine::Pi => {
                let mut cmd = Command::new(env!("CARGO_BIN_EXE_subzero"));
                let jail = json!({
                    "tools": grant["tools"],
                    "writeCapable": grant["writeCapable"],
                    "filesystem": grant.get("filesystem").cloned().unwrap_or(Value::Null),
                });
                cmd.args(["worker", "--hide"])
                    .arg(hide)
                    .args(["--engine", "pi", "--pi-dir"])
                    .arg(pi_dir())
                    .arg("--pi-node")
                    .arg(pi_node())
                    .arg("--pi-grant")
                    .arg(jail.to_string())
                    .arg("--pi-transcript")
                    .arg(transcript)
                    .arg("--pi-workspace")
                    .arg(workspace)
                    .current_dir(workspace);
                WorkerProc::spawn_command(cmd)
            }
        }
    }

    /// A valid run id, distinct per engine and `n`.
    pub fn run_id(self, n: u8) -> String {
        let tag = match self {
            Engine::Rust => "RS",
            Engine::Pi => "PI",
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
    pub ws: tempfile::TempDir,
    pub state: tempfile::TempDir,
}

impl Place {
    pub fn new() -> Place {
        let ws = tempfile::tempdir().expect("workspace");
        std::fs::write(ws.path().join("README.md"), worker_support::README).expect("readme");
        let state = tempfile::tempdir().expect("state");
        Place { ws, state }
    }

    pub fn workspace(&self) -> PathBuf {
        self.ws.path().canonicalize().expect("workspace")
    }

    pub fn transcript(&self) -> PathBuf {
        self.state.path().join("transcripts/child.jsonl")
    }

    /// A worker of `engine` for `grant` in this place.
    pub fn worker(&self, engine: Engine, grant: &Value) -> WorkerProc {
        std::fs::create_dir_all(self.state.path().join("transcripts")).expect("transcripts");
        engine.start(
            grant,
            &self.workspace(),
            &self.transcript(),
            self.state.path(),
        )
    }

    /// The `start_run` message of run `id` on `url` with `grant`.
    pub fn start(&self, id: &str, url: String, grant: Value, prompt: &str) -> Value {
        let transcript = self.transcript();
        let mut spec = worker_support::RunSpec::new(id, url, grant, self.ws.path(), &transcript);
        spec.prompt = prompt;
        let mut message = spec.message();
        message["workspaceRoot"] = json!(self.workspace());
        message["transcriptPath"] = json!(self.transcript());
        message
    }

    pub fn transcript_text(&self) -> String {
        std::fs::read_to_string(self.transcript()).unwrap_or_default()
    }
}

/// Runs `case` for each engine that is ready here.
pub fn each_engine(case: impl Fn(Engine)) {
    for engine in [Engine::Rust, Engine::Pi] {
        if engine.ready() {
            eprintln!("conformance case on the {engine:?} worker");
            case(engine);
        }
    }
}

/// The text of every request body the scripted server recorded.
pub fn bodies(requests: &[subzero_testkit::RecordedRequest]) -> Vec<String> {
    requests
        .iter()
        .map(|r| r.json().map(|v| v.to_string()).unwrap_or_default())
        .collect()
}
