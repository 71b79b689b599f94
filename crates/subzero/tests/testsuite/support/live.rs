//! A real broker (`subzero mcp`) whose model is the gated endpoint of `support::gate`,
//! for tests that must decide when each run answers: the live scenario replay and the
//! recorded fixtures.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use subzero_testkit::mcp_client::{BrokerCommand, McpSession, ToolReply};
use tempfile::TempDir;

use crate::support::gate::Gate;

/// The key the gated model is called with.
pub const KEY: &str = "sk-subzero-live-5b1e7c0a93d24f68";
/// The credential reference configured for it.
pub const CRED: &str = "live";

/// A workspace, a state dir, a config and a gated model.
pub struct LiveEnv {
    pub dir: TempDir,
    pub gate: Gate,
    starts: usize,
}

impl LiveEnv {
    pub fn new() -> LiveEnv {
        let dir = tempfile::tempdir().expect("temp dir");
        std::fs::create_dir_all(dir.path().join("workspace")).expect("workspace");
        std::fs::write(
            dir.path().join("workspace/README.md"),
            "# Demo project\n\nA small project for Subzero's tests.\n",
        )
        .expect("readme");
        let env = LiveEnv {
            dir,
            gate: Gate::start(),
            starts: 0,
        };
        env.configure("");
        env
    }

    /// Write the config: the gated model's credential, then `extra` TOML.
    pub fn configure(&self, extra: &str) {
        std::fs::write(
            self.config(),
            format!(
                "[credentials.{CRED}]\nenv = \"SUBZERO_LIVE_KEY\"\norigins = [\"{}\"]\n\n{extra}",
                self.gate.origin()
            ),
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

    pub fn config(&self) -> PathBuf {
        self.dir.path().join("config.toml")
    }

    fn command(&self, log: &std::path::Path) -> BrokerCommand {
        BrokerCommand {
            exe: PathBuf::from(env!("CARGO_BIN_EXE_subzero")),
            workspace: self.workspace(),
            state_dir: self.dir.path().join("state"),
            config: self.config(),
            env: vec![
                ("SUBZERO_LIVE_KEY".into(), KEY.into()),
                ("SUBZERO_LOG".into(), "debug".into()),
            ],
            log_file: Some(log.to_path_buf()),
        }
    }

    /// Start a broker; when it refuses to start, the error code its log names.
    pub async fn start(&mut self) -> Result<McpSession, String> {
        self.starts += 1;
        let log = self.dir.path().join(format!("broker-{}.log", self.starts));
        match McpSession::start(&self.command(&log)).await {
            Ok(session) => Ok(session),
            Err(e) => {
                let text = std::fs::read_to_string(&log).unwrap_or_default();
                Err(refusal_code(&text).unwrap_or_else(|| panic!("broker failed: {e}\n{text}")))
            }
        }
    }

    /// The model argument of spawn/resume.
    pub fn model(&self) -> Value {
        json!({"url": self.gate.base_url(), "model": "gated", "credentialRef": CRED})
    }

    /// Pids of the `subzero-worker worker` processes working in the workspace.
    pub fn workers(&self) -> Vec<u32> {
        subzero_testkit::procs::running_in(&self.workspace())
            .into_iter()
            .filter(|p| p.argv.get(1).is_some_and(|a| a == "worker"))
            .map(|p| p.pid)
            .collect()
    }
}

/// The code of the error a refusing broker logged: `ERROR subzero::serve: <code>: …`.
fn refusal_code(log: &str) -> Option<String> {
    let line = log.lines().find(|l| l.contains(" ERROR "))?;
    let rest = &line[line.find("serve: ")? + "serve: ".len()..];
    Some(rest[..rest.find(':')?].to_owned())
}

pub async fn call(s: &McpSession, tool: &str, args: Value) -> ToolReply {
    s.call(tool, args)
        .await
        .unwrap_or_else(|e| panic!("{tool} failed at the protocol level: {e}"))
}

/// The structured content of a call, or its error code.
pub async fn outcome(s: &McpSession, tool: &str, args: Value) -> Result<Value, String> {
    let reply = call(s, tool, args).await;
    if reply.is_error {
        Err(reply
            .code()
            .unwrap_or_else(|| panic!("{tool}: error without a code: {}", reply.text))
            .to_owned())
    } else {
        Ok(reply.structured)
    }
}

pub async fn ok(s: &McpSession, tool: &str, args: Value) -> Value {
    outcome(s, tool, args)
        .await
        .unwrap_or_else(|code| panic!("{tool} failed with {code}"))
}

/// Poll `subzero_get` until `pred` holds; the last snapshot either way.
pub async fn until(
    s: &McpSession,
    child: &str,
    limit: Duration,
    pred: impl Fn(&Value) -> bool,
) -> Value {
    let deadline = Instant::now() + limit;
    loop {
        let snap = ok(s, "subzero_get", json!({"childId": child})).await;
        if pred(&snap) || Instant::now() > deadline {
            return snap;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// Send `signal` to `pid`.
pub fn signal(pid: u32, signal: nix::sys::signal::Signal) {
    let pid = nix::unistd::Pid::from_raw(i32::try_from(pid).expect("pid"));
    let _ = nix::sys::signal::kill(pid, signal);
}
