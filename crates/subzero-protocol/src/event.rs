//! What every [`ChildEvent`] carries, read without matching on its type: its sequence
//! number, its time, its `type` tag, its child and its run; and the compact form a
//! `subzero_get` snapshot shows.

use crate::{ChildEvent, ChildId, RunId, Timestamp};

impl ChildEvent {
    /// The `type` tag, as the wire spells it.
    pub fn kind(&self) -> &'static str {
        match self {
            ChildEvent::RunQueued { .. } => "run_queued",
            ChildEvent::RunStarted { .. } => "run_started",
            ChildEvent::Text { .. } => "text",
            ChildEvent::Tool { .. } => "tool",
            ChildEvent::SteerApplied { .. } => "steer_applied",
            ChildEvent::SteerDiscarded { .. } => "steer_discarded",
            ChildEvent::Compacted { .. } => "compacted",
            ChildEvent::NetworkRefused { .. } => "network_refused",
            ChildEvent::StopRequested { .. } => "stop_requested",
            ChildEvent::StopConfirmed { .. } => "stop_confirmed",
            ChildEvent::Completed { .. } => "completed",
            ChildEvent::BudgetExhausted { .. } => "budget_exhausted",
            ChildEvent::Failed { .. } => "failed",
            ChildEvent::Interrupted { .. } => "interrupted",
            ChildEvent::Gap { .. } => "gap",
        }
    }

    /// The per-child sequence number.
    pub fn seq(&self) -> u64 {
        match self {
            ChildEvent::RunQueued { seq, .. }
            | ChildEvent::RunStarted { seq, .. }
            | ChildEvent::Text { seq, .. }
            | ChildEvent::Tool { seq, .. }
            | ChildEvent::SteerApplied { seq, .. }
            | ChildEvent::SteerDiscarded { seq, .. }
            | ChildEvent::Compacted { seq, .. }
            | ChildEvent::NetworkRefused { seq, .. }
            | ChildEvent::StopRequested { seq, .. }
            | ChildEvent::StopConfirmed { seq, .. }
            | ChildEvent::Completed { seq, .. }
            | ChildEvent::BudgetExhausted { seq, .. }
            | ChildEvent::Failed { seq, .. }
            | ChildEvent::Interrupted { seq, .. }
            | ChildEvent::Gap { seq, .. } => seq.get(),
        }
    }

    /// When it was recorded (absent in a `subzero_get` snapshot).
    pub fn at(&self) -> Option<&Timestamp> {
        match self {
            ChildEvent::RunQueued { at, .. }
            | ChildEvent::RunStarted { at, .. }
            | ChildEvent::Text { at, .. }
            | ChildEvent::Tool { at, .. }
            | ChildEvent::SteerApplied { at, .. }
            | ChildEvent::SteerDiscarded { at, .. }
            | ChildEvent::Compacted { at, .. }
            | ChildEvent::NetworkRefused { at, .. }
            | ChildEvent::StopRequested { at, .. }
            | ChildEvent::StopConfirmed { at, .. }
            | ChildEvent::Completed { at, .. }
            | ChildEvent::BudgetExhausted { at, .. }
            | ChildEvent::Failed { at, .. }
            | ChildEvent::Interrupted { at, .. }
            | ChildEvent::Gap { at, .. } => at.as_ref(),
        }
    }

    /// The child it belongs to (absent in a `subzero_get` snapshot).
    pub fn child_id(&self) -> Option<&ChildId> {
        match self {
            ChildEvent::RunQueued { child_id, .. }
            | ChildEvent::RunStarted { child_id, .. }
            | ChildEvent::Text { child_id, .. }
            | ChildEvent::Tool { child_id, .. }
            | ChildEvent::SteerApplied { child_id, .. }
            | ChildEvent::SteerDiscarded { child_id, .. }
            | ChildEvent::Compacted { child_id, .. }
            | ChildEvent::NetworkRefused { child_id, .. }
            | ChildEvent::StopRequested { child_id, .. }
            | ChildEvent::StopConfirmed { child_id, .. }
            | ChildEvent::Completed { child_id, .. }
            | ChildEvent::BudgetExhausted { child_id, .. }
            | ChildEvent::Failed { child_id, .. }
            | ChildEvent::Interrupted { child_id, .. }
            | ChildEvent::Gap { child_id, .. } => child_id.as_ref(),
        }
    }

    /// The run it belongs to (none for a gap, an interruption outside a run, or, in a
    /// `subzero_get` snapshot, an event of the run its `lastRun` describes).
    pub fn run_id(&self) -> Option<&RunId> {
        match self {
            ChildEvent::RunQueued { run_id, .. }
            | ChildEvent::RunStarted { run_id, .. }
            | ChildEvent::Text { run_id, .. }
            | ChildEvent::Tool { run_id, .. }
            | ChildEvent::SteerApplied { run_id, .. }
            | ChildEvent::SteerDiscarded { run_id, .. }
            | ChildEvent::Compacted { run_id, .. }
            | ChildEvent::NetworkRefused { run_id, .. }
            | ChildEvent::StopRequested { run_id, .. }
            | ChildEvent::StopConfirmed { run_id, .. }
            | ChildEvent::Completed { run_id, .. }
            | ChildEvent::BudgetExhausted { run_id, .. }
            | ChildEvent::Failed { run_id, .. }
            | ChildEvent::Interrupted { run_id, .. } => run_id.as_ref(),
            ChildEvent::Gap { .. } => None,
        }
    }

    /// The run it belongs to in a `subzero_get` snapshot whose `lastRun` is `last_run`:
    /// its own `runId`, else (an event of that run, which leaves it out) `last_run`; none
    /// for a gap or an interruption outside a run.
    pub fn run_in<'a>(&'a self, last_run: Option<&'a RunId>) -> Option<&'a RunId> {
        match self {
            ChildEvent::Gap { .. } | ChildEvent::Interrupted { .. } => self.run_id(),
            _ => self.run_id().or(last_run),
        }
    }

    /// The event as a `subzero_get` snapshot shows it to a parent's model: without its
    /// child and time (the snapshot names the child once, and `lastProgressAt` says when it
    /// last moved), and, for the run `last_run` names, without the run id and the preview
    /// `lastRun` already carries (read it back with [`ChildEvent::run_in`]).
    pub fn compact(&mut self, last_run: Option<&RunId>) {
        match self {
            ChildEvent::RunQueued { at, child_id, .. }
            | ChildEvent::RunStarted { at, child_id, .. }
            | ChildEvent::Text { at, child_id, .. }
            | ChildEvent::Tool { at, child_id, .. }
            | ChildEvent::SteerApplied { at, child_id, .. }
            | ChildEvent::SteerDiscarded { at, child_id, .. }
            | ChildEvent::Compacted { at, child_id, .. }
            | ChildEvent::NetworkRefused { at, child_id, .. }
            | ChildEvent::StopRequested { at, child_id, .. }
            | ChildEvent::StopConfirmed { at, child_id, .. }
            | ChildEvent::Completed { at, child_id, .. }
            | ChildEvent::BudgetExhausted { at, child_id, .. }
            | ChildEvent::Failed { at, child_id, .. }
            | ChildEvent::Interrupted { at, child_id, .. }
            | ChildEvent::Gap { at, child_id, .. } => {
                *at = None;
                *child_id = None;
            }
        }
        // Interrupted keeps its run: without one it says it happened outside a run.
        let ours = last_run.is_some()
            && self.run_id() == last_run
            && !matches!(self, ChildEvent::Interrupted { .. });
        if !ours {
            return;
        }
        self.leave_out_run();
        if let ChildEvent::Completed {
            preview,
            preview_truncated,
            ..
        }
        | ChildEvent::BudgetExhausted {
            preview,
            preview_truncated,
            ..
        } = self
        {
            *preview = None;
            *preview_truncated = None;
        }
    }

    /// Leaves out `runId` (an interruption's and a gap's are not touched).
    fn leave_out_run(&mut self) {
        match self {
            ChildEvent::RunQueued { run_id, .. }
            | ChildEvent::RunStarted { run_id, .. }
            | ChildEvent::Text { run_id, .. }
            | ChildEvent::Tool { run_id, .. }
            | ChildEvent::SteerApplied { run_id, .. }
            | ChildEvent::SteerDiscarded { run_id, .. }
            | ChildEvent::Compacted { run_id, .. }
            | ChildEvent::NetworkRefused { run_id, .. }
            | ChildEvent::StopRequested { run_id, .. }
            | ChildEvent::StopConfirmed { run_id, .. }
            | ChildEvent::Completed { run_id, .. }
            | ChildEvent::BudgetExhausted { run_id, .. }
            | ChildEvent::Failed { run_id, .. } => *run_id = None,
            ChildEvent::Interrupted { .. } | ChildEvent::Gap { .. } => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::{ChildEvent, RunId};

    #[test]
    fn the_kind_is_the_type_tag_serde_writes() {
        let event: ChildEvent = serde_json::from_value(serde_json::json!({
            "type": "gap", "at": "2026-11-29T20:05:36.123Z",
            "childId": "ch_01JH8Z6Q2V3W4X5Y6Z7A8B9C0D", "oldest": 9, "requested": 2, "seq": 9
        }))
        .expect("a gap event");
        assert_eq!(event.kind(), "gap");
        assert_eq!(event.seq(), 9);
        assert_eq!(
            event.at().map(|at| at.as_str()),
            Some("2026-11-29T20:05:36.123Z")
        );
        assert_eq!(event.run_id(), None);
        assert_eq!(
            event.child_id().map(|id| id.as_str()),
            Some("ch_01JH8Z6Q2V3W4X5Y6Z7A8B9C0D")
        );
        let json = serde_json::to_value(&event).expect("encodes");
        assert_eq!(json["type"], event.kind());
    }

    #[test]
    fn a_compact_event_drops_its_child_time_and_the_run_and_preview_last_run_carries() {
        let completed = |run: &str| -> ChildEvent {
            serde_json::from_value(serde_json::json!({
                "type": "completed", "at": "2026-11-29T20:05:36.123Z",
                "childId": "ch_01JH8Z6Q2V3W4X5Y6Z7A8B9C0D", "seq": 4, "runId": run,
                "artifactId": "art_01JH8Z6Q2V3W4X5Y6Z7A8B9C0E", "preview": "done",
                "previewTruncated": false
            }))
            .expect("a completed event")
        };
        let last: RunId = "run_01JH8Z6Q2V3W4X5Y6Z7A8B9C0F".parse().expect("a run id");
        let mut settled = completed(last.as_str());
        settled.compact(Some(&last));
        assert_eq!(
            serde_json::to_value(&settled).expect("encodes"),
            serde_json::json!({"type": "completed", "seq": 4,
                "artifactId": "art_01JH8Z6Q2V3W4X5Y6Z7A8B9C0E"})
        );
        assert_eq!(settled.run_in(Some(&last)), Some(&last));
        let mut earlier = completed("run_01JH8Z6Q2V3W4X5Y6Z7A8B9C0G");
        earlier.compact(Some(&last));
        let json = serde_json::to_value(&earlier).expect("encodes");
        assert_eq!(
            json["preview"], "done",
            "an earlier run keeps its preview: {json}"
        );
        assert!(
            json.get("at").is_none() && json.get("childId").is_none(),
            "{json}"
        );
    }
}
