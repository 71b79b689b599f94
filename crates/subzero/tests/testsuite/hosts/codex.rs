//! Codex, as installed from npm (`tests/hosts/codex`, pinned in its package-lock.json), set
//! up by `subzero hosts install codex --trust` alone and run headless (`codex exec`) against
//! the Responses API stand-in on loopback (a `model_providers` entry with
//! `wire_api = "responses"`, the user's own model setup, written by the test):
//!
//! - the 8 tools load as `mcp__subzero__subzero_*`, and the children's key reaches the broker
//!   only through the `env_vars` that install wrote;
//! - spawn → get (waitMs) → a final answer that holds the child's result;
//! - a second `codex exec` lists that child, sends it a followup, waits for it and reads the
//!   answer with `subzero_output`;
//! - Codex quitting (SIGINT) while a `subzero_get` waits on a child running a `bash`
//!   tool leaves no broker, worker or tool process, and the run is recorded `stopped`.
//!
//! `cargo xtask test` installs it and runs it; alone:
//! `cargo test -p subzero --test testsuite hosts::codex`
//! (after `(cd crates/subzero/tests/hosts/codex && npm ci)`).

use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::AtomicUsize;
use std::time::Duration;

use crate::support::faults::Reaper;
use crate::support::hosts::*;
use serde_json::{Value, json};
use subzero_testkit::Reply;
use subzero_testkit::parent::{Exchange, ParentServer};

/// The version `tests/hosts/codex/package.json` pins.
const VERSION: &str = "0.171.0";
/// One `codex exec` run; the slowest step is a `subzero_get` of a few seconds.
const RUN_LIMIT: Duration = Duration::from_secs(90);

/// Codex's name for a Subzero tool.
fn tool(name: &str) -> String {
    format!("mcp__subzero__{name}")
}

struct Codex {
    bin: PathBuf,
    env: HostEnv,
    parent: ParentServer,
}

impl Codex {
    fn new(children: Vec<Reply>) -> Option<Codex> {
        let bin = host_binary("codex", "codex")?;
        let env = HostEnv::new(children);
        let parent = subzero_testkit::responses::start(brain(
            env.child_model(),
            |seen: &Exchange, name: &str| {
                seen.tools
                    .iter()
                    .find(|t| t.ends_with(name))
                    .cloned()
                    .unwrap_or_else(|| tool(name))
            },
            |_: &Exchange| None,
            Arc::new(AtomicUsize::new(0)),
        ))
        .expect("parent model");
        // The user's own model setup: a provider at the stand-in, no login.
        let codex_home = env.home().join(".codex");
        std::fs::create_dir_all(&codex_home).expect("codex home");
        std::fs::write(
            codex_home.join("config.toml"),
            format!(
                "model = \"testkit\"\nmodel_provider = \"testkit\"\n\
                 check_for_update_on_startup = false\n\n\
                 [model_providers.testkit]\nname = \"testkit\"\n\
                 base_url = \"{}/v1\"\nwire_api = \"responses\"\n\
                 env_key = \"TESTKIT_PARENT_KEY\"\nrequest_max_retries = 0\n\
                 stream_max_retries = 0\n",
                parent.origin()
            ),
        )
        .expect("codex config");
        Some(Codex { bin, env, parent })
    }

    fn command(&self, prompt: &str) -> Command {
        let mut cmd = self.env.command(&self.bin);
        cmd.args([
            "exec",
            "--json",
            "--skip-git-repo-check",
            "--dangerously-bypass-approvals-and-sandbox",
            prompt,
        ])
        .env("TESTKIT_PARENT_KEY", "sk-parent-host-test");
        cmd
    }

    /// One headless run to its end; its last agent message.
    fn run(&self, prompt: &str) -> String {
        let out = run_bounded(self.command(prompt), RUN_LIMIT);
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success(),
            "codex exec failed ({}):\n{stdout}\n{stderr}",
            out.status
        );
        stdout
            .lines()
            .rev()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|e| e.pointer("/item/type") == Some(&json!("agent_message")))
            .filter_map(|e| {
                e.pointer("/item/text")
                    .and_then(Value::as_str)
                    .map(str::to_owned)
            })
            .next()
            .unwrap_or_else(|| panic!("codex exec printed no agent message:\n{stdout}\n{stderr}"))
    }

    fn version(&self) -> String {
        self.env.version(&self.bin)
    }
}

#[test]
fn codex_delegates_follows_up_and_a_second_process_lists_the_child() {
    let Some(codex) = Codex::new(vec![
        Reply::text(CHILD_ANSWER),
        Reply::text(FOLLOWUP_ANSWER),
    ]) else {
        return;
    };
    assert!(
        codex.version().ends_with(VERSION),
        "tests/hosts/codex installed {:?}, not {VERSION}",
        codex.version()
    );
    let _reaper = Reaper::new(codex.env.dir.path());
    let printed = codex.env.install("codex", &["--trust"]);
    assert!(printed.contains(KEY_VAR), "{printed}");

    let answer = codex.run(&format!(
        "{DELEGATE}: summarise README.md with a subzero child."
    ));
    assert_eq!(answer, format!("The child answered: {CHILD_ANSWER}"));
    let turns = codex.parent.exchanges();
    assert_tools_loaded(&turns, tool);
    let child = spawned_child(&turns);

    let answer = codex.run(&format!("{FOLLOW_UP}: ask the child a followup."));
    assert!(
        answer.starts_with("Child listed.") && answer.contains(FOLLOWUP_ANSWER),
        "{answer}"
    );
    assert_followed_up(&codex.parent, &codex.env, &child, "codex", VERSION);
}

#[test]
fn codex_quitting_mid_run_leaves_nothing_running_and_records_stopped() {
    let Some(codex) = Codex::new(Vec::new()) else {
        return;
    };
    quitting_mid_run_leaves_nothing_running_and_records_stopped(&QuitCase {
        env: &codex.env,
        parent: &codex.parent,
        install: ("codex", &["--trust"]),
        exe: "codex",
        product: "Codex",
        command: &|prompt| codex.command(prompt),
    });
}
