//! The same figures for the peers, in the same run, on the same machine:
//!
//! - the Node reference MCP server, `@modelcontextprotocol/server-everything` over stdio,
//!   from `crates/subzero/benches/peers` (pinned by its lockfile, with the Node 22 Pi needs);
//! - Pi's own worker process, `pi --mode rpc --no-session`, from the npm lockfile the host
//!   tests use (`crates/subzero/tests/hosts/pi`), its model a scripted OpenAI-compatible
//!   provider on loopback in an isolated `~/.pi/agent/models.json`.
//!
//! `cargo xtask bench` installs both (`npm ci`); a peer that is not installed is reported as
//! a failed scenario, never skipped silently.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::json;
use subzero_testkit::{Reply, ScriptedServer};
use tempfile::TempDir;

use crate::Fail;
use crate::footprint::{Memory, tree_memory, tree_of};
use crate::stats::{Samples, ms_since};

/// The peers' npm project, relative to the repository root.
pub const PEERS: &str = "crates/subzero/benches/peers";
/// The Pi host test's npm project, relative to the repository root.
pub const PI: &str = "crates/subzero/tests/hosts/pi";

/// A peer's start → first answer and its memory then (or while waiting on its model).
#[derive(Default)]
pub struct PeerFigures {
    pub start_ms: Samples,
    pub rss: Samples,
    pub pss: Samples,
    pub hwm: Samples,
}

impl PeerFigures {
    fn record(&mut self, memory: Memory) {
        self.rss.push(memory.rss);
        self.pss.push(memory.pss);
        self.hwm.push(memory.hwm);
    }
}

fn installed(path: PathBuf, how: &str) -> Result<PathBuf, Fail> {
    if path.exists() {
        Ok(path)
    } else {
        Err(format!("{} is not installed: {how}", path.display()).into())
    }
}

/// The Node reference server: spawn → its `initialize` reply (raw JSON-RPC lines over
/// stdio), then its memory 200 ms later, `runs` times.
pub fn node_reference_server(root: &Path, runs: usize) -> Result<PeerFigures, Fail> {
    let project = root.join(PEERS);
    let how = format!("npm ci --prefix {PEERS} (cargo xtask bench does)");
    let node = installed(project.join("node_modules/.bin/node"), &how)?;
    let server = installed(
        project.join("node_modules/@modelcontextprotocol/server-everything/dist/index.js"),
        &how,
    )?;
    let mut out = PeerFigures::default();
    for round in 0..=runs {
        let started = Instant::now();
        let mut child = Command::new(&node)
            .arg(&server)
            .arg("stdio")
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()?;
        let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "subzero-bench", "version": "1"}}});
        answer_of(&mut child, &format!("{initialize}\n"), "\"id\":1")?;
        let ms = ms_since(started);
        std::thread::sleep(Duration::from_millis(200));
        let memory = Memory::of(child.id());
        end(child);
        // The first start warms the page cache; it is not counted.
        if round > 0 {
            out.start_ms.push(ms);
            out.record(memory.ok_or("the server exited")?);
        }
    }
    Ok(out)
}

/// The floor under every cold start on this machine, measured the same way: spawn `head -n 1`
/// (coreutils, a small C program), write the `initialize` line, read it back; then the same
/// 200 ms pause before the next round as for the broker and the Node server, so the CPUs idle
/// between starts as they do for them.
pub fn line_echo_floor(runs: usize) -> Result<Samples, Fail> {
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "subzero-bench", "version": "1"}}});
    let mut out = Samples::default();
    for round in 0..=runs {
        let started = Instant::now();
        let mut child = Command::new("head")
            .args(["-n", "1"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()?;
        answer_of(&mut child, &format!("{initialize}\n"), "\"id\":1")?;
        let ms = ms_since(started);
        end(child);
        std::thread::sleep(Duration::from_millis(200));
        if round > 0 {
            out.push(ms);
        }
    }
    Ok(out)
}

/// Pi's worker process: spawn → the answer to its first command (`get_state`), then a
/// prompt to a model that never answers, and the memory of its whole process tree while it
/// waits, `runs` times.
pub async fn pi_rpc(root: &Path, runs: usize) -> Result<PeerFigures, Fail> {
    let project = root.join(PI);
    let how = format!("npm ci --prefix {PI} (cargo xtask bench does)");
    let node = installed(project.join("node_modules/.bin/node"), &how)?;
    let cli = installed(
        project.join("node_modules/@earendil-works/pi-coding-agent/dist/bundle/cli.js"),
        &how,
    )?;
    let model = ScriptedServer::start(Vec::new())?;
    let home = pi_home(&model)?;
    let path = format!(
        "{}:{}",
        node.parent()
            .map(|p| p.display().to_string())
            .unwrap_or_default(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut out = PeerFigures::default();
    for round in 0..=runs {
        model.push(Reply::Hang);
        let before = model.requests().len();
        let started = Instant::now();
        let mut child = pi_command(&node, &cli, home.path(), &path).spawn()?;
        let mut stdout = BufReader::new(child.stdout.take().ok_or("no stdout")?);
        let mut stdin = child.stdin.take().ok_or("no stdin")?;
        writeln!(stdin, "{}", json!({"id": "state", "type": "get_state"}))?;
        wait_for_line(&mut stdout, "\"id\":\"state\"")?;
        let ms = ms_since(started);
        writeln!(
            stdin,
            "{}",
            json!({"id": "p", "type": "prompt", "message": "Look around."})
        )?;
        let deadline = Instant::now() + Duration::from_secs(30);
        while model.requests().len() <= before {
            if Instant::now() >= deadline {
                end(child);
                return Err("Pi never reached its model".into());
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
        let (_, sum) = tree_memory(&tree_of(child.id()));
        drop(stdin);
        end(child);
        if round > 0 {
            out.start_ms.push(ms);
            out.record(sum);
        }
    }
    Ok(out)
}

/// A home directory for Pi whose `models.json` names `model` as the provider `scripted`.
fn pi_home(model: &ScriptedServer) -> Result<TempDir, Fail> {
    let home = tempfile::tempdir()?;
    let models = json!({"providers": {"scripted": {
        "baseUrl": model.base_url(), "api": "openai-completions", "apiKey": "sk-bench-unused",
        "models": [{"id": "parent", "name": "Scripted"}]}}});
    std::fs::create_dir_all(home.path().join(".pi/agent"))?;
    std::fs::write(
        home.path().join(".pi/agent/models.json"),
        models.to_string(),
    )?;
    Ok(home)
}

/// `pi --mode rpc` on the scripted model in `home`: offline, no telemetry, nothing of this
/// process's environment but `path`; stdin and stdout piped.
fn pi_command(node: &Path, cli: &Path, home: &Path, path: &str) -> Command {
    let mut command = Command::new(node);
    command
        .arg(cli)
        .args([
            "--mode",
            "rpc",
            "--no-session",
            "--model",
            "scripted/parent",
        ])
        .current_dir(home)
        .env_clear()
        .env("PATH", path)
        .env("HOME", home)
        .env("PI_OFFLINE", "1")
        .env("PI_SKIP_VERSION_CHECK", "1")
        .env("PI_TELEMETRY", "0")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    command
}

/// Writes `request` and reads stdout until a line containing `marker`.
fn answer_of(child: &mut Child, request: &str, marker: &str) -> Result<(), Fail> {
    child
        .stdin
        .as_mut()
        .ok_or("no stdin")?
        .write_all(request.as_bytes())?;
    let stdout = child.stdout.as_mut().ok_or("no stdout")?;
    wait_for_line(&mut BufReader::new(stdout), marker)
}

fn wait_for_line(reader: &mut impl BufRead, marker: &str) -> Result<(), Fail> {
    let mut line = String::new();
    loop {
        line.clear();
        if reader.read_line(&mut line)? == 0 {
            return Err(format!("the process closed stdout before answering ({marker})").into());
        }
        if line.contains(marker) {
            return Ok(());
        }
    }
}

fn end(mut child: Child) {
    let _ = child.kill();
    let _ = child.wait();
}
