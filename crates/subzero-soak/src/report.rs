//! The soak's report: what ran, what was injected, what was checked, what broke.

use std::fmt::Write;

use crate::stats::Stats;
use crate::verdict::{Invariant, Violation};

/// The markdown report of a soak (one or many runs).
pub fn markdown(
    title: &str,
    stats: &Stats,
    violations: &[(u64, Violation)],
    minutes: f64,
) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "## {title}\n");
    let _ = writeln!(
        out,
        "{} runs (seeds), {} epochs, {} scheduled steps, {} MCP calls in {minutes:.1} min; \
         the kernel monitor took {} samples of the process table. **{} violations.**\n",
        stats.runs,
        stats.epochs,
        stats.steps,
        stats.total_calls(),
        stats.samples,
        violations.len()
    );
    let _ = writeln!(
        out,
        "| fault | injected | no target at that moment |\n|---|---:|---:|"
    );
    for (kind, (injected, skipped)) in &stats.faults {
        let _ = writeln!(out, "| {kind} | {injected} | {skipped} |");
    }
    if let Some((min, median, p90, max)) = stats.settle_distribution() {
        let _ = writeln!(
            out,
            "\nSettle time (every broker back → every child settled), over {} checkpoints: \
             min {min} ms, median {median} ms, p90 {p90} ms, max {max} ms.\n",
            stats.settle_ms.len()
        );
    }
    let ended: Vec<String> = stats
        .runs_ended
        .iter()
        .map(|(status, n)| format!("{n} {status}"))
        .collect();
    let _ = writeln!(
        out,
        "Runs seen to end: {}; {} results read back in full and compared; {} interrupted \
         children resumed at checkpoints.\n",
        if ended.is_empty() {
            "none".to_owned()
        } else {
            ended.join(", ")
        },
        stats.artifacts_checked,
        stats.resumed
    );
    let checkouts: Vec<String> = stats
        .checkouts
        .iter()
        .map(|(state, n)| format!("{n} {state}"))
        .collect();
    let _ = writeln!(
        out,
        "Isolated checkouts at each run's end: {}; {} lines of recorded changes looked for in \
         the workspace; {} directories left by isolated spawns cut by a broker kill.\n",
        if checkouts.is_empty() {
            "none".to_owned()
        } else {
            checkouts.join(", ")
        },
        stats.landed_lines,
        stats.orphans
    );
    calls_and_invariants(&mut out, stats, violations);
    out
}

/// The answers by tool, each invariant's verdict, and the violations.
fn calls_and_invariants(out: &mut String, stats: &Stats, violations: &[(u64, Violation)]) {
    let _ = writeln!(out, "| tool | answers |\n|---|---|");
    for (tool, outcomes) in &stats.calls {
        let list: Vec<String> = outcomes.iter().map(|(o, n)| format!("{o} {n}")).collect();
        let _ = writeln!(out, "| `{tool}` | {} |", list.join(", "));
    }
    let _ = writeln!(
        out,
        "\nInvariants checked after every fault (and, for the kernel's view, every 15 ms):\n"
    );
    for invariant in Invariant::ALL {
        let broken = violations
            .iter()
            .filter(|(_, v)| v.invariant == invariant)
            .count();
        let _ = writeln!(
            out,
            "- `{invariant}`: {}",
            if broken == 0 {
                "held".to_owned()
            } else {
                format!("**{broken} violations**")
            }
        );
    }
    if !violations.is_empty() {
        let _ = writeln!(out, "\nViolations:\n");
        for (seed, v) in violations {
            let _ = writeln!(out, "- seed {seed}: {v}");
        }
    }
}
