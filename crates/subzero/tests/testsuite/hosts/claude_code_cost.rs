//! What delegating costs a parent's context in Claude Code (real host, scripted parent
//! model): the bytes of its requests to its model that the delegation caused
//! (`support::host_cost`), for one short task and for one that outlives about twenty waits —
//! through Subzero by polling `subzero_get` (headless `claude -p`), through Subzero with MCP
//! Tasks (interactive Claude Code), and the short one through Claude Code's own `Agent`.
//!
//! The long child answers after 5 s and the polling parent waits 250 ms per `subzero_get`:
//! about twenty waits, as a ten-minute child costs a parent that waits the 30 s the instructions
//! ask for. With `SUBZERO_HOST_COST_OUT` set, the figures are written there as JSON for
//! `cargo xtask bench` (docs/benchmarks.md), which runs it; the test asserts what they must
//! show. It is a measurement, so the test command leaves it to the bench (`#[ignore]`);
//! `cargo test -p subzero --test testsuite hosts::claude_code_cost -- --ignored` runs it alone.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::json;
use subzero_testkit::parent::{Act, Exchange, ParentServer};
use subzero_testkit::{Reply, Step};

use super::claude_code::{VERSION, claude_command, load_tools, tool};
use super::claude_code_tasks::{first_run_answers, interactive};
use crate::support::faults::Reaper;
use crate::support::host_cost::{Cost, Delegation, cost};
use crate::support::hosts::*;

/// The child's task, as both delegations give it.
const CHILD_PROMPT: &str = "Summarise README.md in one sentence.";
/// What the parent says while its child works in the background.
const WAITING: &str = "Waiting for the child in the background.";
/// How long the long child works, and how long each of the polling parent's waits is.
const LONG_CHILD: Duration = Duration::from_secs(5);
const SHORT_WAIT_MS: u64 = 250;

/// One scenario: its marker (the plan word in the user's prompt) and how it delegates.
#[derive(Clone, Copy)]
struct Plan {
    marker: &'static str,
    how: Delegation,
    /// Poll with `subzero_get` (else wait for a task notification).
    polls: bool,
    long: bool,
}

const PLANS: [Plan; 5] = [
    Plan {
        marker: "PLAN-AGENT-ONE",
        how: Delegation::Agent,
        polls: false,
        long: false,
    },
    Plan {
        marker: "PLAN-POLL-ONE",
        how: Delegation::Subzero,
        polls: true,
        long: false,
    },
    Plan {
        marker: "PLAN-TASKS-ONE",
        how: Delegation::Subzero,
        polls: false,
        long: false,
    },
    Plan {
        marker: "PLAN-POLL-LONG",
        how: Delegation::Subzero,
        polls: true,
        long: true,
    },
    Plan {
        marker: "PLAN-TASKS-LONG",
        how: Delegation::Subzero,
        polls: false,
        long: true,
    },
];

fn final_answer() -> String {
    format!("The child answered: {CHILD_ANSWER}")
}

/// The parent of every plan; a built-in subagent's requests (no plan marker) answer
/// as the child.
fn brain(child_model: serde_json::Value) -> subzero_testkit::parent::Brain {
    std::sync::Arc::new(move |seen: &Exchange| {
        let Some(plan) = PLANS.iter().find(|p| seen.prompt.contains(p.marker)) else {
            return Act::Say(CHILD_ANSWER.to_owned());
        };
        if seen.prompt.contains("<task-notification>") && seen.prompt.contains(CHILD_ANSWER) {
            return Act::Say(final_answer());
        }
        if let Delegation::Agent = plan.how {
            if seen.count_of("Agent") == 0 {
                return Act::call(
                    "Agent",
                    json!({"description": "Summarise the README", "prompt": CHILD_PROMPT,
                           "subagent_type": "general-purpose"}),
                );
            }
            return Act::say(WAITING);
        }
        if let Some(act) = load_tools(seen) {
            return act;
        }
        if seen.count_of("subzero_spawn") == 0 {
            return Act::call(
                &tool("subzero_spawn"),
                json!({"prompt": CHILD_PROMPT, "templateId": "researcher", "model": child_model}),
            );
        }
        if !plan.polls {
            return Act::say(WAITING);
        }
        poll(seen, plan)
    })
}

/// The polling parent's next move: another `subzero_get` from where the last one ended,
/// or the answer once the child is ready.
fn poll(seen: &Exchange, plan: &Plan) -> Act {
    let last = seen.last_of("subzero_get").map(|r| r.text.clone());
    if let Some(text) = &last
        && text.contains(r#""state":"ready""#)
    {
        return Act::Say(if text.contains(CHILD_ANSWER) {
            final_answer()
        } else {
            format!("The child gave no answer: {text}")
        });
    }
    let child = seen
        .last_of("subzero_spawn")
        .and_then(|r| r.id("ch_"))
        .unwrap_or_default();
    let cursor = last
        .as_deref()
        .and_then(json_in)
        .and_then(|s| s["nextCursor"].as_u64())
        .unwrap_or(0);
    let wait = if plan.long { SHORT_WAIT_MS } else { 30_000 };
    Act::call(
        &tool("subzero_get"),
        json!({"childId": child, "waitMs": wait, "cursor": cursor}),
    )
}

/// The child's model: at once, or after [`LONG_CHILD`].
fn child_reply(long: bool) -> Reply {
    let Reply::Sse(mut steps) = Reply::text(CHILD_ANSWER) else {
        unreachable!("a text reply streams");
    };
    if long {
        steps.insert(0, Step::delay_ms(LONG_CHILD.as_millis() as u64));
    }
    Reply::Sse(steps)
}

/// Runs one plan in Claude Code and measures it.
fn measure(bin: &std::path::Path, plan: &Plan) -> Cost {
    let env = HostEnv::new(vec![child_reply(plan.long)]);
    let parent: ParentServer =
        subzero_testkit::messages::start(brain(env.child_model())).expect("parent model");
    let _reaper = Reaper::new(env.dir.path());
    env.install("claude-code", &["--allow-tools", "--trust"]);
    let prompt = format!("{}: summarise README.md by delegating it.", plan.marker);
    let headless = plan.polls || matches!(plan.how, Delegation::Agent);
    if headless {
        let mut cmd = claude_command(&env, bin, &parent);
        cmd.args(["-p", &prompt, "--output-format", "json"]);
        let out = run_bounded(cmd, Duration::from_secs(120));
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            stdout.contains(&final_answer()),
            "{}: {stdout}\n{}",
            plan.marker,
            String::from_utf8_lossy(&out.stderr)
        );
    } else {
        first_run_answers(&env);
        interactive(&env, bin, &parent, &prompt, &final_answer());
    }
    cost(&parent.requests(), plan.marker, plan.how)
}

#[test]
#[ignore = "a measurement: `cargo xtask bench` runs it (`--ignored`) and reports its figures"]
fn tasks_spare_a_claude_code_parent_the_polling_turns() {
    let Some(bin) = host_binary("claude-code", "claude") else {
        return;
    };
    let env = HostEnv::new(Vec::new());
    assert!(env.version(&bin).starts_with(VERSION));
    // The scenarios are independent (a directory, a parent and a child model each).
    let costs: BTreeMap<&str, Cost> = std::thread::scope(|scope| {
        let runs: Vec<_> = PLANS
            .iter()
            .map(|plan| (plan.marker, scope.spawn(|| measure(&bin, plan))))
            .collect();
        runs.into_iter()
            .map(|(marker, run)| (marker, run.join().expect("the scenario ran")))
            .collect()
    });
    for (marker, cost) in &costs {
        eprintln!("{marker}: {cost:?}");
    }
    let of = |m: &str| costs[m].clone();
    // A polling parent pays one call and one turn per wait; with Tasks only the spawn.
    assert!(
        of("PLAN-POLL-LONG").calls >= 15,
        "{:?}",
        of("PLAN-POLL-LONG")
    );
    assert_eq!(
        of("PLAN-TASKS-LONG").calls,
        1,
        "{:?}",
        of("PLAN-TASKS-LONG")
    );
    assert!(of("PLAN-TASKS-LONG").total * 4 < of("PLAN-POLL-LONG").total);
    // Spawn and get, as Claude Code declares them, weigh less than its own `Agent`.
    let tasks = of("PLAN-TASKS-ONE");
    assert!(
        tasks.spawn_get > 0 && tasks.spawn_get <= tasks.agent,
        "{tasks:?}"
    );
    // However long the child works, a task costs the same.
    assert!(
        of("PLAN-TASKS-LONG")
            .exchange
            .abs_diff(of("PLAN-TASKS-ONE").exchange)
            < 64
    );
    if let Some(out) = std::env::var_os("SUBZERO_HOST_COST_OUT") {
        let figures = json!({"host": format!("Claude Code {VERSION}"), "costs": costs});
        std::fs::write(out, serde_json::to_string_pretty(&figures).unwrap()).unwrap();
    }
}
