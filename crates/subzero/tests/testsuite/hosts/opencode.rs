//! OpenCode, the real host: `opencode-ai`'s Linux x64 build from
//! `tests/hosts/opencode/package-lock.json`, set up by `subzero hosts install opencode` alone,
//! run headless (`opencode run`) against the scripted parent on loopback through the bundled
//! `@ai-sdk/openai-compatible` provider.
//!
//! `cargo xtask test` installs it and runs it; alone:
//! `cargo test -p subzero --test testsuite hosts::opencode` after
//! `npm ci` in `crates/subzero/tests/hosts/opencode` (without it the test is skipped, loudly, and
//! fails in strict mode).

use std::time::Duration;

use crate::support::chat_hosts::*;
use nix::sys::signal::Signal;
use serde_json::json;

/// `opencode-linux-x64` is the build `opencode-ai` installs on Linux x64 and runs as its
/// `bin/opencode` (see `tests/hosts/opencode/package.json` for why the suite installs it
/// directly).
const OPENCODE: HostSpec = HostSpec {
    name: "opencode",
    package: "opencode-linux-x64",
    bin: "opencode-linux-x64/bin/opencode",
    // OpenCode names an MCP tool `<server>_<tool>`.
    tool_prefix: "subzero_",
};

/// Everything OpenCode would fetch from outside, switched off; what is left fails at the dead
/// proxy at once.
pub(crate) const QUIET: &[(&str, &str)] = &[
    ("OPENCODE_DISABLE_MODELS_FETCH", "1"),
    ("OPENCODE_DISABLE_AUTOUPDATE", "1"),
    ("OPENCODE_DISABLE_LSP_DOWNLOAD", "1"),
    ("OPENCODE_DISABLE_DEFAULT_PLUGINS", "1"),
    ("OPENCODE_DISABLE_SHARE", "1"),
    ("OPENCODE_DISABLE_CLAUDE_CODE", "1"),
];

/// One host run's limit: OpenCode starts in a few seconds here.
pub(crate) const RUN_LIMIT: Duration = Duration::from_secs(120);

/// A rig whose user config points OpenCode at the scripted parent, with Subzero installed in
/// the project by `subzero hosts install opencode`; `None` when OpenCode is not installed.
fn rig() -> Option<Rig> {
    let rig = configured()?;
    let installed = rig.install_subzero();
    assert!(
        installed.contains("subzero_subzero_spawn"),
        "install names the tools as OpenCode shows them: {installed}"
    );
    Some(rig)
}

/// A rig whose user config points OpenCode at the scripted parent, Subzero not yet installed
/// (`install::npm` installs it with `--npx`); `None` when OpenCode is not installed.
pub(crate) fn configured() -> Option<Rig> {
    let rig = Rig::new(OPENCODE, OPENCODE.binary()?);
    let user_config = json!({
        "$schema": "https://opencode.ai/config.json",
        "provider": {
            "scripted": {
                "npm": "@ai-sdk/openai-compatible",
                "name": "Scripted parent",
                "options": {"baseURL": rig.parent_url(), "apiKey": "sk-parent-unused"},
                "models": {"parent": {"name": "Scripted parent", "tool_call": true}}
            }
        },
        "model": "scripted/parent",
        "small_model": "scripted/parent",
        "autoupdate": false,
        "share": "disabled"
    });
    rig.write(
        ".config/opencode/opencode.json",
        &serde_json::to_string_pretty(&user_config).expect("json"),
    );
    Some(rig)
}

fn run_on(rig: &Rig) -> impl Fn(&str) -> std::process::Output + '_ {
    move |prompt| rig.run(&["run", prompt], QUIET, RUN_LIMIT)
}

#[test]
fn opencode_delegates_follows_up_and_a_second_process_lists_the_child() {
    let Some(rig) = rig() else { return };
    let listed = rig.run(&["mcp", "list"], QUIET, RUN_LIMIT);
    let shown = String::from_utf8_lossy(&listed.stdout).into_owned();
    assert!(
        listed.status.success() && shown.contains("subzero") && shown.contains("connected"),
        "`opencode mcp list` does not show subzero connected: {}",
        text(&listed)
    );
    let run = run_on(&rig);
    let child = delegate_and_follow_up(&rig, &run);
    a_second_process_lists(&rig, &run, &child);
}

#[test]
fn opencode_quitting_mid_run_leaves_no_process_and_records_the_run_stopped() {
    let Some(rig) = rig() else { return };
    let start = |prompt: &str| rig.start(&["run", prompt], QUIET);
    quitting_mid_run_stops_the_run(&rig, &start, Signal::SIGTERM);
}
