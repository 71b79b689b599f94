//! What the live replay cannot drive over MCP, with the reason, and the outcome keys MCP
//! does not show.

use serde_json::Value;

/// Steps the live broker cannot be driven to over MCP, with the reason; everything else
/// in every trace is replayed live.
pub(crate) const CORE_ONLY: &[(&str, usize, &str)] = &[
    ("006", 2, STEERLESS),
    ("007", 4, STEERLESS),
    ("012", 2, UNASKED_CONFIRMATION),
    ("012", 3, UNASKED_CONFIRMATION),
    ("012", 5, UNASKED_CONFIRMATION),
    ("014", 3, RACE),
    ("016", 2, FOREIGN_REPORT),
    ("016", 3, FOREIGN_REPORT),
    ("016", 4, FOREIGN_REPORT),
    ("016", 6, FOREIGN_REPORT),
    ("016", 7, FOREIGN_REPORT),
    ("020", 5, TRANSCRIPT),
    ("020", 6, TRANSCRIPT),
    ("020", 7, TRANSCRIPT),
    ("021", 3, FOREIGN_CHECKPOINT),
    ("021", 4, FOREIGN_CHECKPOINT),
    ("024", 5, UNASKED_CONFIRMATION),
    ("024", 6, NO_WORKER),
    ("026", 1, STORAGE),
    ("026", 2, STORAGE),
    ("026", 3, STORAGE),
    ("026", 4, STORAGE),
    ("026", 5, STORAGE),
    ("026", 6, STORAGE),
    ("026", 7, STORAGE),
    ("027", 5, UNASKED_CONFIRMATION),
    ("028", 2, TRANSCRIPT),
    ("029", 0, EVENT_LOG),
    ("031", 5, MCP_GRANTS),
    ("031", 6, MCP_GRANTS),
    ("031", 7, WORKER_EVENTS),
    ("031", 8, WORKER_EVENTS),
    ("032", 3, FOREIGN_REPORT),
    ("032", 4, FOREIGN_REPORT),
    ("032", 5, UNASKED_CONFIRMATION),
    ("032", 6, NO_WORKER),
    ("033", 2, COMPACTION),
    ("033", 3, COMPACTION),
    ("033", 4, COMPACTION),
    ("033", 6, COMPACTION),
];

pub(crate) const STEERLESS: &str = "the real worker always advertises steering";
pub(crate) const UNASKED_CONFIRMATION: &str =
    "a worker confirms only the stop the broker asked it for, of its active run";
pub(crate) const RACE: &str = "a run completing before its stop lands is a race MCP cannot order (the worker sees the cancel first)";
pub(crate) const FOREIGN_REPORT: &str = "a worker reports only about its own active run; a report naming another run, another child or a settled run cannot be sent";
pub(crate) const TRANSCRIPT: &str = "the transcript the broker verifies a checkpoint against is the worker's; MCP cannot make it differ";
pub(crate) const FOREIGN_CHECKPOINT: &str = "a checkpoint is verified inside subzero_resume for the named child; one of another child cannot be passed";
pub(crate) const NO_WORKER: &str =
    "no worker runs for a ready or interrupted child, so none can be lost";
pub(crate) const STORAGE: &str = "an inconsistent stored record cannot be produced over MCP";
pub(crate) const EVENT_LOG: &str = "the whole trace: events are appended by the broker, never by a caller, and their numbers depend on what the worker emitted; `an_event_log_past_its_retention_reports_the_gap_in_band` replays its rules live";
pub(crate) const MCP_GRANTS: &str = "64 distinct tools take MCP servers; the bound is checked when such a child is frozen (worker_mcp tests)";
pub(crate) const COMPACTION: &str = "a compaction is the worker's report, made when a model's context window fills, about its own active run; mcp_compaction and worker_compaction drive it live";
pub(crate) const WORKER_EVENTS: &str = "event payloads are written by the broker from worker events; the worker cuts text at 4,096 bytes before that";

/// Outcome keys MCP does not show, per op.
pub(crate) const UNOBSERVABLE: &[(&str, &str, &str)] = &[
    (
        "*",
        "lastLeaf",
        "leaf ids are the transcript's, never on the wire",
    ),
    (
        "stop",
        "newlyRequested",
        "subzero_stop reports the run and its status, not whether this call was the first",
    ),
    (
        "stop",
        "withdrawn",
        "withdrawn runs leave the queue (checked through `child.queued`)",
    ),
    (
        "confirm_stop",
        "withdrawn",
        "withdrawn runs leave the queue (checked through `child.queued`)",
    ),
    (
        "complete",
        "withdrawn",
        "withdrawn runs leave the queue (checked through `child.queued`)",
    ),
    (
        "fail",
        "withdrawn",
        "withdrawn runs leave the queue (checked through `child.queued`)",
    ),
    (
        "lose_worker",
        "abandoned",
        "abandoned runs leave the queue (checked through `child.queued`)",
    ),
    (
        "checkpoint",
        "leaf",
        "leaf ids are the transcript's, never on the wire",
    ),
];

/// A trace a whole-trace reason keeps off the live broker (step 0 in `CORE_ONLY`).
pub(crate) fn whole_trace(number: &str, trace: &Value) -> Option<&'static str> {
    if trace.get("eventRetention").is_some() {
        return Some(EVENT_LOG);
    }
    CORE_ONLY
        .iter()
        .find(|(n, step, _)| *n == number && *step == 0)
        .map(|(_, _, why)| *why)
}
