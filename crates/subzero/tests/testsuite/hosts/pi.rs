//! Pi 1.x, the real host: `@earendil-works/pi-coding-agent` and the Node it needs (`node` from
//! npm, >= 22.19) from `tests/hosts/pi/package-lock.json`, set up by `subzero hosts install pi`
//! alone, run headless (`pi -p`) against the scripted parent on loopback through a custom
//! `openai-completions` provider in `~/.pi/agent/models.json`.
//!
//! Pi reads a project's `.pi/mcp.json` only once the project is trusted, so each run passes
//! `--approve` (the one-run trust the install message names) and `pi mcp list`, which has no
//! such flag, runs after the trust decision is saved the way Pi's own prompt saves it.
//!
//! `cargo xtask test` installs it and runs it; alone:
//! `cargo test -p subzero --test testsuite hosts::pi` after
//! `npm ci` in `crates/subzero/tests/hosts/pi` (without it the test is skipped, loudly, and
//! fails in strict mode).

use std::time::Duration;

use crate::support::chat_hosts::*;
use nix::sys::signal::Signal;
use serde_json::json;

const PI: HostSpec = HostSpec {
    name: "pi",
    package: "@earendil-works/pi-coding-agent",
    bin: ".bin/pi",
    // Pi names an MCP tool `mcp__<server>__<tool>`.
    tool_prefix: "mcp__subzero__",
};

/// No catalog refresh, version check or telemetry; what is left fails at the dead proxy.
const QUIET: &[(&str, &str)] = &[
    ("PI_OFFLINE", "1"),
    ("PI_SKIP_VERSION_CHECK", "1"),
    ("PI_TELEMETRY", "0"),
];

const RUN_LIMIT: Duration = Duration::from_secs(120);

/// A rig whose `~/.pi/agent/models.json` points Pi at the scripted parent, with Subzero
/// installed in the project by `subzero hosts install pi`; `None` when Pi is not installed.
fn rig() -> Option<Rig> {
    let rig = Rig::new(PI, PI.binary()?);
    let models = json!({
        "providers": {
            "scripted": {
                "baseUrl": rig.parent_url(),
                "api": "openai-completions",
                "apiKey": "sk-parent-unused",
                "models": [{"id": "parent", "name": "Scripted parent"}]
            }
        }
    });
    rig.write(
        ".pi/agent/models.json",
        &serde_json::to_string_pretty(&models).expect("json"),
    );
    let installed = rig.install_subzero();
    for step in [
        "--approve",
        "trust.json",
        "pi mcp list",
        "mcp__subzero__subzero_spawn",
    ] {
        assert!(
            installed.contains(step),
            "install does not mention {step}: {installed}"
        );
    }
    Some(rig)
}

fn prompt_args(prompt: &str) -> Vec<&str> {
    vec!["-p", "--approve", "--model", "scripted/parent", prompt]
}

#[test]
fn pi_node_is_the_one_pi_needs() {
    let Some(rig) = rig() else { return };
    let node = PI.project().join("node_modules/.bin/node");
    let out = rig.command(&node).arg("--version").output().expect("node");
    let version = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    let parts: Vec<u64> = version
        .trim_start_matches('v')
        .split('.')
        .filter_map(|p| p.parse().ok())
        .collect();
    assert!(
        parts.as_slice() >= [22, 19].as_slice(),
        "Pi 1.x needs Node >= 22.19, the npm project has {version}"
    );
    let pi = rig.run(&["--version"], QUIET, RUN_LIMIT);
    assert_eq!(
        String::from_utf8_lossy(&pi.stdout).trim(),
        PI.installed_version(),
        "{}",
        text(&pi)
    );
}

#[test]
fn pi_delegates_follows_up_and_a_second_process_lists_the_child() {
    let Some(rig) = rig() else { return };
    // Untrusted, Pi skips the project's mcp.json (and says so).
    let untrusted = rig.run(&["mcp", "list"], QUIET, RUN_LIMIT);
    assert!(
        String::from_utf8_lossy(&untrusted.stdout).contains("not trusted"),
        "{}",
        text(&untrusted)
    );
    // The user's "Trust" answer, as Pi saves it.
    rig.write(
        ".pi/agent/trust.json",
        &json!({ rig.workspace.to_str().expect("utf-8"): true }).to_string(),
    );
    let listed = rig.run(&["mcp", "list"], QUIET, RUN_LIMIT);
    assert!(
        listed.status.success()
            && String::from_utf8_lossy(&listed.stdout).contains(&format!(
                "subzero: connected, {} tools (direct, project)",
                subzero_runtime::mcp::TOOL_NAMES.len()
            )),
        "`pi mcp list` does not show subzero connected with direct tools: {}",
        text(&listed)
    );
    let run = |prompt: &str| rig.run(&prompt_args(prompt), QUIET, RUN_LIMIT);
    let child = delegate_and_follow_up(&rig, &run);
    // The parent read each run's end with subzero_get: the wake extension brings none again.
    assert!(
        rig.turns()
            .iter()
            .all(|t| !t.prompt.contains("Subzero: a run of child")),
        "a result the parent had read was delivered again"
    );
    a_second_process_lists(&rig, &run, &child);
}

#[test]
fn pi_quitting_mid_run_leaves_no_process_and_records_the_run_stopped() {
    let Some(rig) = rig() else { return };
    let start = |prompt: &str| rig.start(&prompt_args(prompt), QUIET);
    quitting_mid_run_stops_the_run(&rig, &start, Signal::SIGTERM);
}

/// The wake extension `install` writes: the parent spawns and ends its turn; the child's
/// result comes back as a follow-up turn, and the parent never calls `subzero_get`.
#[test]
fn pi_is_woken_with_its_childs_result_and_never_polls() {
    let Some(rig) = rig() else { return };
    let wake = rig.workspace.join(".pi/extensions/subzero-wake.ts");
    assert!(wake.is_file(), "install writes the wake extension");
    rig.child
        .push(crate::support::mcp::slow_reply(FIRST_ANSWER, 1500));
    let out = rig.run(
        &prompt_args(&format!("{WAKE}: delegate, then wait.")),
        QUIET,
        RUN_LIMIT,
    );
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains(&format!("Woken with: {FIRST_ANSWER}")),
        "{}",
        text(&out)
    );
    let turns = rig.turns();
    assert!(
        turns
            .iter()
            .all(|t| !t.results.iter().any(|r| r.tool.ends_with("subzero_get"))),
        "the parent never polled"
    );
    let woken = rig.last_turn(WAKE);
    assert!(
        woken.prompt.contains("Subzero: a run of child"),
        "{}",
        woken.prompt
    );
    assert!(rig.leftovers().is_empty(), "{:?}", rig.leftovers());
}

/// The same in a long-lived session (`--mode rpc`, as an IDE runs Pi): the parent's turn
/// ends, and the child's result arrives later as a follow-up that starts a turn of its own.
#[test]
fn a_long_lived_pi_session_gets_its_childs_result_as_a_follow_up_turn() {
    use std::io::Write;
    let Some(rig) = rig() else { return };
    rig.child
        .push(crate::support::mcp::slow_reply(FIRST_ANSWER, 1500));
    let mut pi = rig.command(&rig.bin);
    pi.args([
        "--mode",
        "rpc",
        "--no-session",
        "--approve",
        "--model",
        "scripted/parent",
    ])
    .stdin(std::process::Stdio::piped())
    .stdout(std::process::Stdio::null())
    .stderr(std::process::Stdio::null());
    for (k, v) in QUIET {
        pi.env(k, v);
    }
    let mut pi = pi.spawn().expect("pi --mode rpc");
    let prompt = json!({"id": "p1", "type": "prompt", "message": format!("{WAKE}: delegate.")});
    let mut stdin = pi.stdin.take().expect("stdin");
    writeln!(stdin, "{prompt}").expect("send the prompt");
    let woken = eventually(RUN_LIMIT, || {
        rig.turns()
            .iter()
            .any(|t| t.prompt.contains(WAKE) && t.prompt.contains(FIRST_ANSWER))
    });
    drop(stdin);
    let _ = wait_exit(&mut pi, Duration::from_secs(20), "pi --mode rpc");
    assert!(woken, "the child's result never reached the parent");
    let turns = rig.turns();
    assert!(
        turns
            .iter()
            .all(|t| !t.results.iter().any(|r| r.tool.ends_with("subzero_get"))),
        "the parent never polled"
    );
    let woken = rig.last_turn(WAKE);
    assert!(
        woken.prompt.contains("Subzero: a run of child") && woken.results.len() == 1,
        "the result came as the wake extension's message, after the spawn alone: {woken:?}"
    );
    assert!(rig.leftovers().is_empty(), "{:?}", rig.leftovers());
}
