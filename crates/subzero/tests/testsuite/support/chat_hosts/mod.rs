//! A real host that calls its model over Chat Completions (OpenCode, Pi), installed from
//! `tests/hosts/<host>/package-lock.json`, configured with `subzero hosts install` alone and run
//! headless against a scripted parent model on loopback; its children run against the
//! Chat Completions `ScriptedServer`.
//!
//! The parent ([`parent`]) reads each request's conversation and plays one of three scenarios,
//! named in the prompt: [`DELEGATE`] (info, spawn, get, a followup, get, output, then an answer
//! quoting the child), [`LIST`] (a second host process lists the children) and [`QUIT`] (spawn
//! a coder whose `bash` sleeps, wait on it with `subzero_get`, and the test ends the host).
//!
//! Everything a host run touches lives in one temporary directory: `home/` (HOME, so the
//! host's config, Subzero's config at `~/.config/subzero/config.toml` and its state at
//! `~/.local/state/subzero` are all the test's) and `work/` (the workspace). The host gets a
//! cleared environment; outside origins go to a proxy address on loopback that refuses at once,
//! so a host that tries one fails fast instead of hanging.

mod parent;
mod scenarios;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use subzero_testkit::ScriptedServer;
use subzero_testkit::parent::{Exchange, ParentServer};
use subzero_testkit::procs::{Proc, running_in, sigkill};
use tempfile::TempDir;

pub use crate::support::real_host::{CRED, TOOLS};
use crate::support::real_host::{
    credential_config, host_project, installed, isolated_command, output_within, processes_naming,
    write_demo_workspace,
};
use parent::parent;
pub use scenarios::*;

/// The key the children's scripted model is called with.
pub const KEY: &str = "sk-subzero-chat-host-test-3c9d41";
/// The variable Subzero's config reads that key from.
pub const KEY_VAR: &str = "SUBZERO_CHAT_HOST_TEST_KEY";
/// Scenario words the parent looks for in the prompt.
pub const DELEGATE: &str = "scenario-delegate";
pub const LIST: &str = "scenario-list";
pub const QUIT: &str = "scenario-quit";
pub const WAKE: &str = "scenario-wake";

/// What the child answers to its first prompt and to the followup.
pub const FIRST_ANSWER: &str = "CHILD-ANSWER-ONE: the README describes a demo project.";
pub const FOLLOWUP_ANSWER: &str = "CHILD-ANSWER-TWO: it has no license file.";

/// Where any outside origin is sent: a loopback port nothing listens on.
pub const DEAD_PROXY: &str = "http://127.0.0.1:9";

/// One host under test.
#[derive(Debug, Clone, Copy)]
pub struct HostSpec {
    /// The `subzero hosts` name, also the directory under `tests/hosts/`.
    pub name: &'static str,
    /// The npm package the host comes from.
    pub package: &'static str,
    /// The host's executable, relative to the project's `node_modules`.
    pub bin: &'static str,
    /// What the host puts before an MCP tool's name (`subzero_` for OpenCode).
    pub tool_prefix: &'static str,
}

impl HostSpec {
    /// `tests/hosts/<name>`: the host's npm project.
    pub fn project(&self) -> PathBuf {
        host_project(self.name)
    }

    /// The host's executable, or `None` after saying loudly why the test is skipped. In strict
    /// mode (`cargo xtask test`, CI) a missing host fails the test.
    pub fn binary(&self) -> Option<PathBuf> {
        let how = format!(
            "(cd {} && npm ci --prefer-offline --no-audit --no-fund)",
            self.project().display()
        );
        installed(
            self.name,
            self.project().join("node_modules").join(self.bin),
            &how,
        )
    }

    /// The version the lockfile pins (what `npm ci` installs).
    pub fn pinned_version(&self) -> String {
        let lock = read_json(&self.project().join("package-lock.json"));
        let key = format!("node_modules/{}", self.package);
        lock["packages"][key.as_str()]["version"]
            .as_str()
            .unwrap_or_else(|| panic!("package-lock.json pins no {}", self.package))
            .to_owned()
    }

    /// The version installed in `node_modules`.
    pub fn installed_version(&self) -> String {
        let manifest = read_json(
            &self
                .project()
                .join("node_modules")
                .join(self.package)
                .join("package.json"),
        );
        manifest["version"]
            .as_str()
            .expect("installed package.json has a version")
            .to_owned()
    }

    /// The host's own name for a Subzero tool.
    pub fn tool(&self, name: &str) -> String {
        format!("{}{name}", self.tool_prefix)
    }
}

fn read_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{} is not JSON: {e}", path.display()))
}

/// The temporary home and workspace, the parent and the children's models.
pub struct Rig {
    pub spec: HostSpec,
    pub bin: PathBuf,
    pub dir: TempDir,
    pub home: PathBuf,
    pub workspace: PathBuf,
    pub parent: ParentServer,
    pub child: ScriptedServer,
}

impl Rig {
    /// Everything but the host's own model configuration, which [`Rig::write`] adds.
    pub fn new(spec: HostSpec, bin: PathBuf) -> Rig {
        let dir = tempfile::tempdir().expect("temp dir");
        let root = dir.path().canonicalize().expect("canonical temp dir");
        let home = root.join("home");
        let workspace = root.join("work");
        std::fs::create_dir_all(&home).expect("home");
        std::fs::create_dir_all(&workspace).expect("workspace");
        write_demo_workspace(&workspace);
        let child = ScriptedServer::start(Vec::new()).expect("child model");
        let child_model = json!({
            "url": child.base_url(),
            "model": "scripted-child",
            "credentialRef": CRED,
        });
        let parent = subzero_testkit::chat::start(parent(spec, child_model)).expect("parent");
        let rig = Rig {
            spec,
            bin,
            dir,
            home,
            workspace,
            parent,
            child,
        };
        // Subzero's user config, where the README says it lives.
        rig.write(
            ".config/subzero/config.toml",
            &credential_config(KEY_VAR, &rig.child),
        );
        rig
    }

    /// The parent's base URL, as a Chat Completions provider takes it.
    pub fn parent_url(&self) -> String {
        format!("{}/v1", self.parent.origin())
    }

    /// Writes `text` to `rel` under HOME.
    pub fn write(&self, rel: &str, text: &str) {
        let path = self.home.join(rel);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("dir");
        std::fs::write(&path, text).expect("write");
    }

    /// A command with the environment every process of the test gets: HOME, a PATH whose
    /// first entry is the host's `node_modules/.bin` (Pi's `node` comes from there), the
    /// children's key, and proxies that refuse every origin but loopback.
    pub fn command(&self, program: &Path) -> Command {
        let bin_dir = self.spec.project().join("node_modules/.bin");
        let path =
            std::env::join_paths([bin_dir.as_path(), Path::new("/usr/bin"), Path::new("/bin")])
                .expect("PATH");
        let mut cmd = isolated_command(program, &self.home, path, DEAD_PROXY);
        cmd.current_dir(&self.workspace)
            .env("NO_COLOR", "1")
            .env("CI", "true")
            .env(KEY_VAR, KEY);
        cmd
    }

    /// `subzero hosts install <host>` run in the workspace, as a user would; returns stdout.
    pub fn install_subzero(&self) -> String {
        self.install_subzero_with(&[])
    }

    /// [`Rig::install_subzero`] with more flags (`--npx`).
    pub fn install_subzero_with(&self, flags: &[&str]) -> String {
        let out = self
            .command(Path::new(env!("CARGO_BIN_EXE_subzero")))
            .args(["hosts", "install", self.spec.name])
            .args(flags)
            .output()
            .expect("run subzero hosts install");
        assert!(out.status.success(), "install failed: {}", text(&out));
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Runs the host to completion (at most `limit`); fails the test on a timeout.
    pub fn run(&self, args: &[&str], extra_env: &[(&str, &str)], limit: Duration) -> Output {
        let mut cmd = self.command(&self.bin);
        cmd.args(args).stdout(Stdio::piped()).stderr(Stdio::piped());
        for (k, v) in extra_env {
            cmd.env(k, v);
        }
        let child = cmd.spawn().expect("start the host");
        match output_within(child, limit, sigkill) {
            Ok(out) => out,
            Err(out) => panic!(
                "{} {args:?} did not finish within {limit:?}; output: {}",
                self.spec.name,
                out.as_ref().map(text).unwrap_or_default()
            ),
        }
    }

    /// Starts the host and returns at once (for the quit scenario).
    pub fn start(&self, args: &[&str], extra_env: &[(&str, &str)]) -> Child {
        let mut cmd = self.command(&self.bin);
        cmd.args(args).stdout(Stdio::piped()).stderr(Stdio::piped());
        for (k, v) in extra_env {
            cmd.env(k, v);
        }
        cmd.spawn().expect("start the host")
    }

    /// `subzero ls --json` with the test's HOME: the children the state directory holds.
    pub fn children(&self) -> Vec<Value> {
        let out = self
            .command(Path::new(env!("CARGO_BIN_EXE_subzero")))
            .args(["ls", "--json"])
            .output()
            .expect("run subzero ls");
        assert!(out.status.success(), "subzero ls failed: {}", text(&out));
        let listed: Value = serde_json::from_slice(&out.stdout).expect("ls --json is JSON");
        listed["children"].as_array().cloned().unwrap_or_default()
    }

    /// Processes this test started that are still alive: anything running in the temp dir
    /// (host helpers, the broker, workers, tool processes) or a `subzero` whose arguments name
    /// it. The test process itself is left out.
    pub fn leftovers(&self) -> Vec<Proc> {
        let root = self.dir.path().canonicalize().expect("temp dir");
        let root_text = root.to_string_lossy().into_owned();
        let mut found = running_in(&root);
        for p in processes_naming(&root_text) {
            if !found.iter().any(|f| f.pid == p.pid) {
                found.push(p);
            }
        }
        found
    }

    /// The exchanges the parent has seen that carried the Subzero tools (model turns of the
    /// main agent, not title or summary requests).
    pub fn turns(&self) -> Vec<Exchange> {
        let spawn = self.spec.tool("subzero_spawn");
        self.parent
            .exchanges()
            .into_iter()
            .filter(|e| e.declares(&spawn))
            .collect()
    }

    /// The subzero tool results the newest turn of `scenario` carries.
    pub fn last_turn(&self, scenario: &str) -> Exchange {
        self.turns()
            .into_iter()
            .rev()
            .find(|e| e.prompt.contains(scenario))
            .unwrap_or_else(|| panic!("no turn of {scenario} reached the parent"))
    }
}

impl Drop for Rig {
    fn drop(&mut self) {
        // A failed test must not leave its host, broker or workers behind.
        for p in self.leftovers() {
            sigkill(p.pid);
        }
    }
}

/// stdout and stderr of a finished process, for failure messages.
pub fn text(out: &Output) -> String {
    format!(
        "status {:?}\n--- stdout\n{}\n--- stderr\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        tail(&String::from_utf8_lossy(&out.stderr), 60)
    )
}

fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// Polls `check` every 50 ms until it holds or `limit` passes.
pub fn eventually(limit: Duration, mut check: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + limit;
    loop {
        if check() {
            return true;
        }
        if Instant::now() >= end {
            return false;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}
