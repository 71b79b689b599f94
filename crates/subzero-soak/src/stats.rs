//! What a soak did: calls by tool and outcome, faults by kind, settle times. Runs merge, so
//! a long soak reports all of its seeds together.

use std::collections::BTreeMap;

#[derive(Clone, Debug, Default)]
pub struct Stats {
    pub runs: u64,
    pub epochs: u64,
    pub steps: u64,
    /// tool → outcome (`ok`, an error code, `lost`) → count.
    pub calls: BTreeMap<String, BTreeMap<String, u64>>,
    /// fault kind → (injected, skipped for want of a target).
    pub faults: BTreeMap<String, (u64, u64)>,
    /// Milliseconds from a checkpoint's start (every broker back) until every child settled.
    pub settle_ms: Vec<u64>,
    /// Runs seen to end, by terminal status.
    pub runs_ended: BTreeMap<String, u64>,
    /// Artifacts read back in full and compared.
    pub artifacts_checked: u64,
    /// Interrupted children resumed at checkpoints.
    pub resumed: u64,
    /// Kernel samples the monitor took.
    pub samples: u64,
    /// Isolated checkouts by state, at the last checkpoint.
    pub checkouts: BTreeMap<String, u64>,
    /// Lines of recorded changes looked for in the workspace at the last checkpoint.
    pub landed_lines: u64,
    /// Checkout directories of never-stored children (spawns cut by a broker kill) at the
    /// last checkpoint.
    pub orphans: u64,
}

impl Stats {
    pub fn call(&mut self, tool: &str, outcome: &str) {
        *self
            .calls
            .entry(tool.to_owned())
            .or_default()
            .entry(outcome.to_owned())
            .or_default() += 1;
    }

    pub fn fault(&mut self, kind: &str, injected: bool) {
        let entry = self.faults.entry(kind.to_owned()).or_default();
        if injected {
            entry.0 += 1;
        } else {
            entry.1 += 1;
        }
    }

    pub fn total_calls(&self) -> u64 {
        self.calls.values().flat_map(BTreeMap::values).sum()
    }

    pub fn merge(&mut self, other: &Stats) {
        self.runs += other.runs;
        self.epochs += other.epochs;
        self.steps += other.steps;
        for (tool, outcomes) in &other.calls {
            for (outcome, n) in outcomes {
                *self
                    .calls
                    .entry(tool.clone())
                    .or_default()
                    .entry(outcome.clone())
                    .or_default() += n;
            }
        }
        for (kind, (a, b)) in &other.faults {
            let entry = self.faults.entry(kind.clone()).or_default();
            entry.0 += a;
            entry.1 += b;
        }
        self.settle_ms.extend(&other.settle_ms);
        for (status, n) in &other.runs_ended {
            *self.runs_ended.entry(status.clone()).or_default() += n;
        }
        self.artifacts_checked += other.artifacts_checked;
        self.resumed += other.resumed;
        self.samples += other.samples;
        for (state, n) in &other.checkouts {
            *self.checkouts.entry(state.clone()).or_default() += n;
        }
        self.landed_lines += other.landed_lines;
        self.orphans += other.orphans;
    }

    /// `(min, median, p90, max)` of the settle times, in milliseconds.
    pub fn settle_distribution(&self) -> Option<(u64, u64, u64, u64)> {
        let mut sorted = self.settle_ms.clone();
        sorted.sort_unstable();
        let at = |q: f64| sorted[((sorted.len() - 1) as f64 * q).round() as usize];
        (!sorted.is_empty()).then(|| (sorted[0], at(0.5), at(0.9), sorted[sorted.len() - 1]))
    }
}
