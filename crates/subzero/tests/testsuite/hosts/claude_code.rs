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
//! `cargo xtask test` installs it and runs it; alone:
//! `cargo test -p subzero --test testsuite hosts::claude_code`
//! (after `(cd crates/subzero/tests/hosts/claude-code && npm ci)`).

use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::AtomicUsize;
use std::time::Duration;

use crate::support::faults::Reaper;
use crate::support::hosts::*;
use serde_json::{Value, json};
use subzero_testkit::Reply;
use subzero_testkit::parent::{Act, Exchange, ParentServer};

/// The version `tests/hosts/claude-code/package.json` pins.
pub(super) const VERSION: &str = "2.1.332";
/// One `claude -p` run; the slowest step is a `subzero_get` of a few seconds.
const RUN_LIMIT: Duration = Duration::from_secs(90);

pub(super) fn tool(name: &str) -> String {
    format!("mcp__subzero__{name}")
}

/// Claude Code defers MCP tools: the parent loads them with `ToolSearch` first.
pub(super) fn load_tools(seen: &Exchange) -> Option<Act> {
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

/// The key Claude Code is given for the scripted parent (its first-run prompt approves it).
pub(super) const API_KEY: &str = "sk-ant-host-test";

/// Claude Code (`bin`) in `env`, talking to `parent`, with its updater, telemetry, error
/// reports and other outside traffic off.
pub(super) fn claude_command(
    env: &HostEnv,
    bin: &std::path::Path,
    parent: &ParentServer,
) -> Command {
    let mut cmd = env.command(bin);
    cmd.env("ANTHROPIC_BASE_URL", parent.origin())
        .env("ANTHROPIC_API_KEY", API_KEY)
        .env("DISABLE_AUTOUPDATER", "1")
        .env("DISABLE_TELEMETRY", "1")
        .env("DISABLE_ERROR_REPORTING", "1")
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1");
    cmd
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
        let mut cmd = claude_command(&self.env, &self.bin, &self.parent);
        cmd.args(["-p", prompt, "--output-format", "json"]);
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
        self.env.version(&self.bin)
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
    assert_tools_loaded(&turns, tool);
    let child = spawned_child(&turns);

    let second = claude.run(&format!("{FOLLOW_UP}: ask the child a followup."));
    let answer = second["result"].as_str().unwrap_or_default();
    assert!(
        answer.starts_with("Child listed.") && answer.contains(FOLLOWUP_ANSWER),
        "{second:#}"
    );
    assert_followed_up(&claude.parent, &claude.env, &child, "claude-code", VERSION);
}

#[test]
fn claude_code_quitting_mid_run_leaves_nothing_running_and_records_stopped() {
    let Some(claude) = Claude::new(Vec::new()) else {
        return;
    };
    quitting_mid_run_leaves_nothing_running_and_records_stopped(&QuitCase {
        env: &claude.env,
        parent: &claude.parent,
        install: ("claude-code", &["--allow-tools", "--trust"]),
        exe: "claude",
        product: "Claude Code",
        command: &|prompt| claude.command(prompt),
    });
}
