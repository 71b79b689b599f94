//! How many times each scenario runs, and how large the populated store is.

/// Repetition counts: the full run, or a `--quick` smoke run.
#[derive(Debug)]
pub struct Plan {
    pub runs: usize,
    pub real_model_runs: usize,
    pub hostile_runs: usize,
    pub parent_cost_runs: usize,
    /// Checkouts and worktrees of the 10,000-file isolation fixture, and records and
    /// applies of its change: each run writes 10,000 files.
    pub checkout_runs: usize,
    pub children: usize,
    pub events_per_child: usize,
    pub waiters: usize,
    pub wake_samples: usize,
}

impl Plan {
    pub fn new(quick: bool) -> Plan {
        if quick {
            Plan {
                runs: 3,
                real_model_runs: 1,
                hostile_runs: 1,
                parent_cost_runs: 1,
                checkout_runs: 3,
                children: 1_000,
                events_per_child: 100,
                waiters: 1_000,
                wake_samples: 40,
            }
        } else {
            Plan {
                runs: 20,
                real_model_runs: 3,
                hostile_runs: 5,
                parent_cost_runs: 5,
                checkout_runs: 10,
                children: 10_000,
                events_per_child: 100,
                waiters: 1_000,
                wake_samples: 200,
            }
        }
    }
}
