//! A workspace, a state dir, a config and a scripted model for one scenario, plus the
//! `subzero mcp` command that serves them. Everything stays on loopback.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::{Value, json};
use subzero_testkit::mcp_client::{BrokerCommand, McpSession, ToolReply};
use subzero_testkit::{Reply, ScriptedServer};
use tempfile::TempDir;

use crate::Fail;

/// The credential reference configured for the scripted model, and its key.
const CRED: &str = "bench";
const KEY: &str = "sk-subzero-bench-0000000000000000";

pub struct BenchEnv {
    pub dir: TempDir,
    pub server: ScriptedServer,
    exe: PathBuf,
}

impl BenchEnv {
    pub fn new(exe: &Path, script: Vec<Reply>) -> Result<BenchEnv, Fail> {
        let dir = tempfile::tempdir()?;
        std::fs::create_dir_all(dir.path().join("workspace"))?;
        std::fs::write(
            dir.path().join("workspace/README.md"),
            "# Bench project\n\nA small project for Subzero's benchmarks.\n",
        )?;
        let server = ScriptedServer::start(script)?;
        let origin = server.base_url().trim_end_matches("/v1").to_owned();
        std::fs::write(
            dir.path().join("config.toml"),
            format!(
                "[credentials.{CRED}]\nenv = \"SUBZERO_BENCH_KEY\"\norigins = [\"{origin}\"]\n"
            ),
        )?;
        Ok(BenchEnv {
            dir,
            server,
            exe: exe.to_path_buf(),
        })
    }

    /// Adds `text` (TOML) to the configuration a broker started later reads.
    pub fn append_config(&self, text: &str) -> Result<(), Fail> {
        use std::io::Write;
        let mut file = std::fs::OpenOptions::new()
            .append(true)
            .open(self.dir.path().join("config.toml"))?;
        writeln!(file, "\n{text}")?;
        Ok(())
    }

    pub fn workspace(&self) -> PathBuf {
        let path = self.dir.path().join("workspace");
        path.canonicalize().unwrap_or(path)
    }

    pub fn state_dir(&self) -> PathBuf {
        self.dir.path().join("state")
    }

    pub fn command(&self) -> BrokerCommand {
        BrokerCommand {
            exe: self.exe.clone(),
            workspace: self.workspace(),
            state_dir: self.state_dir(),
            config: self.dir.path().join("config.toml"),
            env: vec![("SUBZERO_BENCH_KEY".into(), KEY.into())],
            log_file: Some(self.dir.path().join("broker.log")),
        }
    }

    pub async fn broker(&self) -> Result<McpSession, Fail> {
        McpSession::start(&self.command()).await
    }

    /// The model argument of spawn/resume.
    pub fn model(&self) -> Value {
        json!({"url": self.server.base_url(), "model": "scripted", "credentialRef": CRED})
    }

    /// Spawn a child; returns (childId, runId).
    pub async fn spawn(
        &self,
        s: &McpSession,
        template: &str,
        prompt: &str,
    ) -> Result<(String, String), Fail> {
        let out = ok(
            s,
            "subzero_spawn",
            json!({"prompt": prompt, "templateId": template, "model": self.model()}),
        )
        .await?;
        Ok((string(&out, "childId")?, string(&out, "runId")?))
    }
}

/// `subzero mcp` as a host starts it on `cmd`'s workspace, state and config, stdin and
/// stdout piped; the caller says where stderr goes.
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
        .envs(cmd.env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped());
    command
}

/// A tool call that must succeed; its structured result.
pub async fn ok(s: &McpSession, tool: &str, args: Value) -> Result<Value, Fail> {
    let reply = call(s, tool, args).await?;
    if reply.is_error {
        return Err(format!("{tool} failed: {}", reply.text).into());
    }
    Ok(reply.structured)
}

pub async fn call(s: &McpSession, tool: &str, args: Value) -> Result<ToolReply, Fail> {
    s.call(tool, args).await
}

pub fn string(v: &Value, key: &str) -> Result<String, Fail> {
    v[key]
        .as_str()
        .map(str::to_owned)
        .ok_or_else(|| format!("no {key} in {v}").into())
}

/// `subzero_get` with a long wait until the child is no longer running.
pub async fn settle(s: &McpSession, child: &str) -> Result<Value, Fail> {
    for _ in 0..20 {
        let snap = ok(s, "subzero_get", json!({"childId": child, "waitMs": 30000})).await?;
        if snap["state"] != "running" {
            return Ok(snap);
        }
    }
    Err(format!("child {child} never settled").into())
}
