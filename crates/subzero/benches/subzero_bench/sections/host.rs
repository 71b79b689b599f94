//! What delegating costs a parent in a real host: the figures of the Claude Code scenarios
//! (`crates/subzero/tests/testsuite/hosts/claude_code_cost.rs`), which `cargo xtask bench`
//! runs and hands over as JSON (`--host-cost`): bytes of Claude Code's requests to its
//! model that the delegation caused, for one short task and one that outlives about twenty
//! waits (a child that works 5 s, polled with `waitMs` 250, as a ten-minute child is at
//! 30 s), through Subzero by polling, through Subzero with MCP Tasks, and through Claude
//! Code's own `Agent`.

use std::path::Path;

use serde_json::Value;

use crate::report::{Target, num};
use crate::sink::Sink;

const HOST: &str = "Parent-facing cost in Claude Code";

/// The scenarios as the test names them, and how the report does.
const SCENARIOS: [(&str, &str); 5] = [
    (
        "PLAN-AGENT-ONE",
        "one task through Claude Code's own `Agent`",
    ),
    (
        "PLAN-POLL-ONE",
        "one task through Subzero, polling (`claude -p`)",
    ),
    (
        "PLAN-TASKS-ONE",
        "one task through Subzero with MCP Tasks (interactive)",
    ),
    (
        "PLAN-POLL-LONG",
        "a long child (~20 waits of `subzero_get`), polling",
    ),
    ("PLAN-TASKS-LONG", "the same long child, with MCP Tasks"),
];

pub fn measure(figures: Option<&Path>, sink: &mut Sink) {
    let Some(path) = figures else {
        sink.notes
            .push("The Claude Code figures were not measured (no `--host-cost`).".into());
        return;
    };
    let parsed = std::fs::read_to_string(path)
        .map_err(|e| e.to_string())
        .and_then(|t| serde_json::from_str::<Value>(&t).map_err(|e| e.to_string()));
    let figures = match parsed {
        Ok(v) => v,
        Err(e) => {
            sink.failed(
                "Claude Code cost",
                &format!("{}: {e}", path.display()).into(),
            );
            return;
        }
    };
    let host = figures["host"].as_str().unwrap_or("Claude Code");
    let cost = |scenario: &str, field: &str| {
        figures["costs"][scenario][field]
            .as_f64()
            .unwrap_or(f64::NAN)
    };
    let one = crate::sink::one;
    let agent = cost("PLAN-TASKS-ONE", "agent");
    sink.add(
        HOST,
        "`subzero_spawn` + `subzero_get` as the host declares them",
        "bytes",
        one(cost("PLAN-TASKS-ONE", "spawn_get")),
        Some(Target::MaxAtMost(agent)),
        &format!("{host}'s request to its model after `ToolSearch` loaded them; target: its own `Agent` tool in the same request, {} bytes", num(agent)),
    );
    for (scenario, what) in SCENARIOS {
        sink.add(
            HOST,
            &format!("{what}: caused bytes over all requests"),
            "bytes",
            one(cost(scenario, "total")),
            long_target(scenario, &cost),
            &format!(
                "{} requests to the model, {} calls of the delegating tools; in each request {} bytes of their definitions and instructions; in the last, {} bytes of calls, results and notifications",
                num(cost(scenario, "requests")),
                num(cost(scenario, "calls")),
                num(cost(scenario, "definitions")),
                num(cost(scenario, "exchange")),
            ),
        );
    }
}

/// With Tasks, a long child must cost its parent no more than a short one does by polling.
fn long_target(scenario: &str, cost: &dyn Fn(&str, &str) -> f64) -> Option<Target> {
    (scenario == "PLAN-TASKS-LONG").then(|| Target::MaxAtMost(cost("PLAN-POLL-ONE", "total")))
}
