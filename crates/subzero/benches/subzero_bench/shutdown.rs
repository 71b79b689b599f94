//! Shutdown with 4 coder children running `bash` trees → the broker's exit, for each way a
//! host ends it: SIGINT (what Claude Code sends first: SIGTERM follows 100 ms later and
//! SIGKILL at 500 ms), SIGTERM and stdin EOF. A fast exit counts only if it is a clean
//! one: exit status 0, every run recorded `stopped` and no `sleep` of the trees left.
//!
//! The broker is spoken to over raw JSON-RPC lines, so the bench alone decides when
//! stdin closes; after a signal stdin stays open, as hosts keep it.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::{Value, json};
use subzero_testkit::Reply;

use crate::Fail;
use crate::env::{BenchEnv, mcp_command};
use crate::procs::{eventually, sigkill, sleeps_in, sleeps_under};
use crate::stats::{Samples, ms_since};

/// Coder children whose trees run when the broker is ended.
const CHILDREN: usize = 4;
/// `sleep`s in each tree: a background job, a `setsid` escapee and a foreground one.
const SLEEPS_PER_TREE: usize = 3;
const LONG: Duration = Duration::from_secs(20);

/// How the host ends the broker.
#[derive(Clone, Copy, Debug)]
pub enum Ending {
    Sigint,
    Sigterm,
    StdinEof,
}

impl Ending {
    pub const ALL: [Ending; 3] = [Ending::Sigint, Ending::Sigterm, Ending::StdinEof];

    pub fn label(self) -> &'static str {
        match self {
            Ending::Sigint => "SIGINT",
            Ending::Sigterm => "SIGTERM",
            Ending::StdinEof => "stdin EOF",
        }
    }

    /// How the figure's note describes the ending.
    pub fn how(self) -> &'static str {
        match self {
            Ending::Sigint | Ending::Sigterm => "stdin kept open, as hosts keep it",
            Ending::StdinEof => "no signal",
        }
    }
}

pub struct ShutdownFigures {
    /// Signal sent (or stdin closed) → the broker process has exited.
    pub exit_ms: Samples,
    /// Runs recorded as anything but `stopped`, over all rounds (should be 0).
    pub not_stopped: usize,
    /// `sleep` processes of the trees alive after the exit (should be 0).
    pub leftovers: usize,
    /// Rounds whose broker did not exit with status 0 (should be 0).
    pub unclean_exits: usize,
}

/// One fresh broker per round: 4 coder children each start
/// `sleep 1000 & setsid sleep 1000 & sleep 1000`, then the broker is ended.
pub fn shutdown_with_trees(
    exe: &Path,
    runs: usize,
    ending: Ending,
) -> Result<ShutdownFigures, Fail> {
    let mut out = ShutdownFigures {
        exit_ms: Samples::default(),
        not_stopped: 0,
        leftovers: 0,
        unclean_exits: 0,
    };
    for _ in 0..runs {
        let env = trees_env(exe)?;
        let mut broker = RawBroker::start(&env)?;
        let pid = broker.child.id();
        start_trees(&mut broker, &env)?;

        let start = Instant::now();
        match ending {
            Ending::Sigint => signal(pid, Signal::SIGINT),
            Ending::Sigterm => signal(pid, Signal::SIGTERM),
            Ending::StdinEof => drop(broker.stdin.take()),
        }
        let status = broker.child.wait()?;
        out.exit_ms.push(ms_since(start));
        if status.code() != Some(0) {
            out.unclean_exits += 1;
        }

        let left = sleeps_in(&env.workspace());
        out.leftovers += left.len();
        left.into_iter().for_each(sigkill);
        out.not_stopped += runs_not_stopped(&env.state_dir().join("subzero.db"), CHILDREN)?;
    }
    Ok(out)
}

/// A fresh environment whose model answers each of the `CHILDREN` coder children with
/// the bash tree, and a writer slot for each.
fn trees_env(exe: &Path) -> Result<BenchEnv, Fail> {
    let env = BenchEnv::new(exe, Vec::new())?;
    // Four write-capable runs at once need four writer slots.
    let config = env.dir.path().join("config.toml");
    let text = std::fs::read_to_string(&config)?;
    std::fs::write(
        &config,
        format!("{text}\n[limits]\nwrite_runs_per_workspace = {CHILDREN}\n"),
    )?;
    let tree = json!({"command": "sleep 1000 & setsid sleep 1000 & sleep 1000"}).to_string();
    for n in 0..CHILDREN {
        env.server
            .push(Reply::tool_call(&format!("call_{n}"), "bash", &tree));
    }
    Ok(env)
}

/// Spawn the `CHILDREN` coder children and wait until every tree's `sleep`s run.
fn start_trees(broker: &mut RawBroker, env: &BenchEnv) -> Result<(), Fail> {
    let pid = broker.child.id();
    for n in 0..CHILDREN {
        broker.call(
            "subzero_spawn",
            json!({"prompt": format!("Start server {n}."), "templateId": "coder", "model": env.model()}),
        )?;
    }
    if !eventually(LONG, Duration::from_millis(5), || {
        sleeps_under(pid).len() >= CHILDREN * SLEEPS_PER_TREE
    }) {
        return Err(format!(
            "the bash trees never all started ({} sleeps)",
            sleeps_under(pid).len()
        )
        .into());
    }
    Ok(())
}

fn signal(pid: u32, signal: Signal) {
    if let Ok(pid) = i32::try_from(pid) {
        let _ = kill(Pid::from_raw(pid), signal);
    }
}

/// Runs of the database not recorded `stopped`, counting missing runs as not stopped.
fn runs_not_stopped(db: &Path, expected: usize) -> Result<usize, Fail> {
    let conn =
        rusqlite::Connection::open_with_flags(db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)?;
    let stopped: i64 = conn.query_row(
        "SELECT count(*) FROM runs WHERE status = ?1",
        [subzero_core::RunStatus::Stopped.as_str()],
        |r| r.get(0),
    )?;
    Ok(expected.saturating_sub(usize::try_from(stopped).unwrap_or(0)))
}

/// `subzero mcp` over raw JSON-RPC lines; the bench owns its stdin.
struct RawBroker {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::Receiver<Value>,
    next_id: u64,
}

impl RawBroker {
    fn start(env: &BenchEnv) -> Result<RawBroker, Fail> {
        let cmd = env.command();
        let log = std::fs::File::create(env.dir.path().join("broker.log"))?;
        let mut child = mcp_command(&cmd).stderr(log).spawn()?;
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().ok_or("no stdout")?;
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let Ok(value) = serde_json::from_str::<Value>(&line) else {
                    continue;
                };
                if tx.send(value).is_err() {
                    break;
                }
            }
        });
        let mut broker = RawBroker {
            child,
            stdin,
            lines,
            next_id: 0,
        };
        broker.request(
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "subzero-bench", "version": "0"}}),
        )?;
        broker.write(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))?;
        Ok(broker)
    }

    fn write(&mut self, message: &Value) -> Result<(), Fail> {
        let stdin = self.stdin.as_mut().ok_or("stdin is closed")?;
        writeln!(stdin, "{message}")?;
        stdin.flush()?;
        Ok(())
    }

    /// Send a request and wait for its response.
    fn request(&mut self, method: &str, params: Value) -> Result<Value, Fail> {
        self.next_id += 1;
        let id = self.next_id;
        self.write(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))?;
        let deadline = Instant::now() + LONG;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let message = self
                .lines
                .recv_timeout(left)
                .map_err(|_| format!("no answer to {method}"))?;
            if message["id"] == id {
                return Ok(message);
            }
        }
    }

    /// `tools/call` that must succeed.
    fn call(&mut self, tool: &str, arguments: Value) -> Result<Value, Fail> {
        let reply = self.request("tools/call", json!({"name": tool, "arguments": arguments}))?;
        if reply.get("error").is_some() || reply["result"]["isError"] == true {
            return Err(format!("{tool} failed: {reply}").into());
        }
        Ok(reply["result"]["structuredContent"].clone())
    }
}

impl Drop for RawBroker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
