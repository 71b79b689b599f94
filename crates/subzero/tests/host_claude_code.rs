//! Claude Code, as installed from npm (`tests/hosts/claude-code`, pinned in its
//! package-lock.json), set up by `subzero hosts install claude-code --allow-tools` alone and
//! run headless (`claude -p`) against the Messages API stand-in on loopback:
//!
//! - the 8 tools load as `mcp__subzero__subzero_*` (through Claude Code's `ToolSearch`);
//! - spawn → get (waitMs) → a final answer that holds the child's result;
//! - a second `claude -p` lists that child, sends it a followup, waits for it and reads the
//!   answer with `subzero_output`;
//! - Claude Code quitting (SIGINT) while a `subzero_get` waits on a child running a `bash`
//!   tool leaves no broker, worker or tool process, and the run is recorded `stopped`.
//!
//! Run alone: `cargo test -p subzero --test host_claude_code` (after
//! `(cd crates/subzero/tests/hosts/claude-code && npm ci)`).

mod faults_support;
mod hosts_support;

use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::AtomicUsize;
use std::time::Duration;

use faults_support::{Reaper, eventually, marked, running_in, unique_mark};
use hosts_support::*;
use serde_json::{Value, json};
use subzero_testkit::Reply;
use subzero_testkit::parent::{Act, Exchange, ParentServer};

/// The version `tests/hosts/claude-code/package.json` pins.
const VERSION: &str = "2.1.332";
/// One `claude -p` run; the slowest step is a `subzero_get` of a few seconds.
const RUN_LIMIT: Duration = Duration::from_secs(90);

fn tool(name: &str) -> String {
    format!("mcp__subzero__{name}")
}

/// Claude Code defers MCP tools: the parent loads them with `ToolSearch` first.
fn load_tools(seen: &Exchange) -> Option<Act> {
    let loaded = seen.declares(&tool("subzero_spawn"));
    if loaded || seen.count_of("ToolSearch") > 0 || !seen.declares("ToolSearch") {
        return None;
    }
    let all: Vec<String> = TOOLS.iter().map(|t| tool(t)).collect();
    Some(Act::call(
        "ToolSearch",
        json!({"query": format!("select:{}", all.join(",")), "max_results": 8}),
    ))
}

struct Claude {
    bin: PathBuf,
    env: HostEnv,
    parent: ParentServer,
}

impl Claude {
    fn new(children: Vec<Reply>) -> Option<Claude> {
        let bin = host_binary("claude-code", "claude")?;
        let env = HostEnv::new(children);
        let parent = subzero_testkit::messages::start(brain(
            env.child_model(),
            |_: &Exchange, name: &str| tool(name),
            load_tools,
            Arc::new(AtomicUsize::new(0)),
        ))
        .expect("parent model");
        Some(Claude { bin, env, parent })
    }

    fn command(&self, prompt: &str) -> Command {
        let mut cmd = self.env.command(&self.bin);
        cmd.args(["-p", prompt, "--output-format", "json"])
            .env("ANTHROPIC_BASE_URL", self.parent.origin())
            .env("ANTHROPIC_API_KEY", "sk-ant-host-test")
            .env("DISABLE_AUTOUPDATER", "1")
            .env("DISABLE_TELEMETRY", "1")
            .env("DISABLE_ERROR_REPORTING", "1")
            .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1");
        cmd
    }

    /// One headless run to its end; its JSON result.
    fn run(&self, prompt: &str) -> Value {
        let out = run_bounded(self.command(prompt), RUN_LIMIT);
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success(),
            "claude -p failed ({}):\n{stdout}\n{stderr}",
            out.status
        );
        serde_json::from_str(stdout.trim()).unwrap_or_else(|e| {
            panic!("claude -p did not print one JSON result ({e}):\n{stdout}\n{stderr}")
        })
    }

    fn version(&self) -> String {
        let out = self
            .env
            .command(&self.bin)
            .arg("--version")
            .output()
            .expect("runs");
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }
}

#[test]
fn claude_code_delegates_follows_up_and_a_second_process_lists_the_child() {
    let Some(claude) = Claude::new(vec![
        Reply::text(CHILD_ANSWER),
        Reply::text(FOLLOWUP_ANSWER),
    ]) else {
        return;
    };
    assert!(
        claude.version().starts_with(VERSION),
        "tests/hosts/claude-code installed {:?}, not {VERSION}",
        claude.version()
    );
    let _reaper = Reaper::new(claude.env.dir.path());
    let printed = claude
        .env
        .install("claude-code", &["--allow-tools", "--trust"]);
    assert!(printed.contains("mcp__subzero"), "{printed}");

    let first = claude.run(&format!(
        "{DELEGATE}: summarise README.md with a subzero child."
    ));
    let answer = first["result"].as_str().unwrap_or_default();
    assert_eq!(
        answer,
        format!("The child answered: {CHILD_ANSWER}"),
        "{first:#}"
    );
    let turns = claude.parent.exchanges();
    let loaded = turns
        .iter()
        .find(|t| t.declares(&tool("subzero_spawn")))
        .expect("a turn declares the Subzero tools");
    for name in TOOLS {
        assert!(
            loaded.declares(&tool(name)),
            "{name} missing: {:?}",
            loaded.tools
        );
    }
    let spawned = turns
        .iter()
        .rev()
        .find_map(|t| t.last_of("subzero_spawn").cloned())
        .expect("spawn ran");
    let child = spawned.id("ch_").expect("spawn answered a child id");

    let second = claude.run(&format!("{FOLLOW_UP}: ask the child a followup."));
    let answer = second["result"].as_str().unwrap_or_default();
    assert!(
        answer.starts_with("Child listed.") && answer.contains(FOLLOWUP_ANSWER),
        "{second:#}"
    );
    let last = claude.parent.exchanges().pop().expect("turns");
    let listed = last.last_of("subzero_list").expect("list ran");
    assert!(listed.text.contains(&child), "{}", listed.text);
    assert!(
        reports_tested(&last, "claude-code", VERSION),
        "subzero_info.hostAdapters lacks claude-code {VERSION}: {:?}",
        last.last_of("subzero_info")
    );
    let sent = last.last_of("subzero_send").expect("send ran");
    assert_eq!(sent.arguments["childId"], json!(child));
    assert_eq!(claude.env.children.requests().len(), 2, "two child runs");
}

#[test]
fn claude_code_quitting_mid_run_leaves_nothing_running_and_records_stopped() {
    let Some(claude) = Claude::new(Vec::new()) else {
        return;
    };
    let mark = unique_mark(claude.env.dir.path());
    claude.env.children.push(Reply::tool_call(
        "call_1",
        "bash",
        &json!({"command": format!("export {mark}; sleep 1000")}).to_string(),
    ));
    let mut reaper = Reaper::new(claude.env.dir.path());
    reaper.mark(&mark);
    claude
        .env
        .install("claude-code", &["--allow-tools", "--trust"]);

    let mut host = Running::start(claude.command(&format!("{HANG}: start a coder child.")));
    let waiting = eventually(Duration::from_secs(60), || {
        !marked(&mark).is_empty()
            && claude
                .parent
                .exchanges()
                .iter()
                .any(|t| t.count_of("subzero_spawn") > 0)
    });
    assert!(waiting, "the child's bash tool never started");
    // The parent's `subzero_get` (waitMs 30000) is now in flight.
    std::thread::sleep(Duration::from_millis(500));
    let dir = claude.env.dir.path().to_string_lossy().into_owned();
    assert!(!processes_naming(&dir).is_empty(), "no broker is running");

    host.signal(nix::sys::signal::Signal::SIGINT);
    let exit = host.wait(Duration::from_secs(30));
    assert!(exit.is_some(), "claude did not exit after SIGINT");
    let clean = eventually(Duration::from_secs(10), || {
        processes_naming(&dir).is_empty()
            && marked(&mark).is_empty()
            && running_in(claude.env.dir.path()).is_empty()
    });
    assert!(
        clean,
        "left running after Claude Code quit: brokers/workers {:?}, tools {:?}, in the workspace {:?}",
        processes_naming(&dir),
        marked(&mark),
        running_in(claude.env.dir.path())
    );
    let runs = claude.env.runs();
    assert_eq!(runs.len(), 1, "{runs:?}");
    assert_eq!(
        runs[0].2,
        "stopped",
        "{runs:?}\n{}",
        claude.env.subzero_ls()
    );
}
