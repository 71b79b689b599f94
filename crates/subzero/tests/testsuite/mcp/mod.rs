//! The MCP tools through the real `subzero mcp`: lifecycle, budgets, contract cases and gaps,
//! recovery, scenarios, two brokers.

mod budgets;
mod budgets_bounded;
mod compact_answers;
mod compaction;
mod contract_cases;
mod contract_gaps;
mod get_wakes;
mod info;
mod inputs;
mod labels;
mod lifecycle;
mod opening;
mod parent_cost;
pub(crate) mod pi_worker;
mod recorded_fixtures;
mod recovery;
mod scenarios;
mod snapshot_consistency;
mod stdio_kinds;
mod steer_while_stopping;
mod tasks;
mod tool_limits;
mod two_brokers;
