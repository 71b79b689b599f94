//! Claude Code as a host of the MCP Tasks extension: interactive Claude Code (in a real
//! pseudo-terminal) declares the extension on its calls, so `subzero_spawn` answers with the
//! run as a task; Claude Code moves it to the background, polls `tasks/get` itself, and
//! wakes its model with the settled run — the parent never calls `subzero_get`.
//!
//! Headless Claude Code (`claude -p`, the other tests) declares no extension: its calls are
//! answered as before. Both facts are recorded in docs/compatibility.md.

use std::time::Duration;

use serde_json::{Value, json};
use subzero_testkit::Reply;
use subzero_testkit::parent::{Act, Exchange, ParentServer};

use super::claude_code::{API_KEY, VERSION, claude_command, load_tools, tool};
use crate::support::faults::Reaper;
use crate::support::hosts::*;
use crate::support::pty::Terminal;

/// What the parent says while its child works in the background.
const WAITING: &str = "Waiting for the child in the background.";

/// The parent of this test: load the tools, spawn once, wait (ending its turn) until a
/// task notification brings the child's answer, then repeat that answer.
fn brain(child_model: Value) -> subzero_testkit::parent::Brain {
    std::sync::Arc::new(move |seen: &Exchange| {
        if let Some(act) = load_tools(seen) {
            return act;
        }
        if seen.count_of("subzero_spawn") == 0 {
            return Act::call(
                &tool("subzero_spawn"),
                json!({"prompt": "Summarise README.md in one sentence.",
                       "templateId": "researcher", "model": child_model}),
            );
        }
        if seen.prompt.contains("<task-notification>") && seen.prompt.contains(CHILD_ANSWER) {
            return Act::Say(format!("The child answered: {CHILD_ANSWER}"));
        }
        Act::say(WAITING)
    })
}

/// The user's first-run answers, as a person gives them once: onboarding done, the
/// environment's API key accepted, the project's `.mcp.json` server enabled.
pub(super) fn first_run_answers(env: &HostEnv) {
    let path = env.home().join(".claude.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|_| "{}".into());
    let mut state: Value = serde_json::from_str(&text).expect("~/.claude.json is JSON");
    state["hasCompletedOnboarding"] = json!(true);
    state["customApiKeyResponses"] = json!({"approved": [API_KEY], "rejected": []});
    let project = env.workspace().to_string_lossy().into_owned();
    state["projects"][&project]["enabledMcpjsonServers"] = json!(["subzero"]);
    std::fs::write(&path, state.to_string()).expect("write ~/.claude.json");
}

/// The `<task-notification>` blocks the parent's last request carries.
fn notifications(parent: &ParentServer) -> Vec<String> {
    let Some(last) = parent
        .requests()
        .into_iter()
        .rev()
        .find(|r| r.body.contains("messages"))
    else {
        return Vec::new();
    };
    let body = last.body.replace("\\n", "\n").replace("\\\"", "\"");
    body.match_indices("<task-notification>")
        .filter_map(|(at, _)| {
            let rest = &body[at..];
            let end = rest.find("</task-notification>")?;
            Some(rest[..end + "</task-notification>".len()].to_owned())
        })
        .collect()
}

/// Interactive Claude Code in a pseudo-terminal, started with `prompt`, until its screen
/// shows `answer`; then it is quit (Ctrl-C twice). Returns the screen.
pub(super) fn interactive(
    env: &HostEnv,
    bin: &std::path::Path,
    parent: &ParentServer,
    prompt: &str,
    answer: &str,
) -> String {
    let mut cmd = claude_command(env, bin, parent);
    cmd.arg(prompt).env("TERM", "xterm-256color");
    let mut term = Terminal::spawn(cmd, 140, 50);
    let screen = term.wait_text(answer, Duration::from_secs(90));
    term.send("\x03\x03");
    let _ = term.finish(Duration::from_secs(20));
    screen
}

#[test]
fn interactive_claude_code_runs_a_spawn_as_a_task_and_is_woken_with_its_result() {
    let Some(bin) = host_binary("claude-code", "claude") else {
        return;
    };
    let env = HostEnv::new(vec![Reply::text(CHILD_ANSWER)]);
    let parent = subzero_testkit::messages::start(brain(env.child_model())).expect("parent");
    let _reaper = Reaper::new(env.dir.path());
    assert!(env.version(&bin).starts_with(VERSION));
    env.install("claude-code", &["--allow-tools", "--trust"]);
    first_run_answers(&env);

    let prompt = format!("{DELEGATE}: summarise README.md with a subzero child.");
    let answer = format!("The child answered: {CHILD_ANSWER}");
    let screen = interactive(&env, &bin, &parent, &prompt, &answer);

    let turns = parent.exchanges();
    let spawned = turns
        .iter()
        .rev()
        .find_map(|t| t.last_of("subzero_spawn").cloned())
        .expect("the parent spawned");
    let run = spawned.id("run_").expect("the task names its run");
    assert!(
        spawned.text.contains("task") && spawned.text.contains(&run),
        "Claude Code answered the spawn with its task: {}",
        spawned.text
    );
    assert!(
        turns.iter().all(|t| t.count_of("subzero_get") == 0),
        "the parent never polled"
    );
    let woken = notifications(&parent);
    let result = woken
        .iter()
        .find(|n| n.contains(&run))
        .unwrap_or_else(|| panic!("no notification of {run}: {woken:?}\n{screen}"));
    assert!(
        result.contains(CHILD_ANSWER) && result.contains("ch_"),
        "{result}"
    );
    let runs = env.runs();
    assert!(runs.len() == 1 && runs[0].2 == "completed", "{runs:?}");
    eprintln!(
        "Claude Code {VERSION} with Tasks: the spawn's answer {} bytes, the wake-up {} bytes",
        spawned.text.len(),
        result.len()
    );
}
