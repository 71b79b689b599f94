//! What every [`ChildEvent`] carries, read without matching on its type: its sequence
//! number, its time, its `type` tag, its child and its run.

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
            | ChildEvent::StopRequested { seq, .. }
            | ChildEvent::StopConfirmed { seq, .. }
            | ChildEvent::Completed { seq, .. }
            | ChildEvent::BudgetExhausted { seq, .. }
            | ChildEvent::Failed { seq, .. }
            | ChildEvent::Interrupted { seq, .. }
            | ChildEvent::Gap { seq, .. } => seq.get(),
        }
    }

    /// When it was recorded.
    pub fn at(&self) -> &Timestamp {
        match self {
            ChildEvent::RunQueued { at, .. }
            | ChildEvent::RunStarted { at, .. }
            | ChildEvent::Text { at, .. }
            | ChildEvent::Tool { at, .. }
            | ChildEvent::SteerApplied { at, .. }
            | ChildEvent::SteerDiscarded { at, .. }
            | ChildEvent::Compacted { at, .. }
            | ChildEvent::StopRequested { at, .. }
            | ChildEvent::StopConfirmed { at, .. }
            | ChildEvent::Completed { at, .. }
            | ChildEvent::BudgetExhausted { at, .. }
            | ChildEvent::Failed { at, .. }
            | ChildEvent::Interrupted { at, .. }
            | ChildEvent::Gap { at, .. } => at,
        }
    }

    /// The child it belongs to.
    pub fn child_id(&self) -> &ChildId {
        match self {
            ChildEvent::RunQueued { child_id, .. }
            | ChildEvent::RunStarted { child_id, .. }
            | ChildEvent::Text { child_id, .. }
            | ChildEvent::Tool { child_id, .. }
            | ChildEvent::SteerApplied { child_id, .. }
            | ChildEvent::SteerDiscarded { child_id, .. }
            | ChildEvent::Compacted { child_id, .. }
            | ChildEvent::StopRequested { child_id, .. }
            | ChildEvent::StopConfirmed { child_id, .. }
            | ChildEvent::Completed { child_id, .. }
            | ChildEvent::BudgetExhausted { child_id, .. }
            | ChildEvent::Failed { child_id, .. }
            | ChildEvent::Interrupted { child_id, .. }
            | ChildEvent::Gap { child_id, .. } => child_id,
        }
    }

    /// The run it belongs to (none for a gap, or an interruption outside a run).
    pub fn run_id(&self) -> Option<&RunId> {
        match self {
            ChildEvent::RunQueued { run_id, .. }
            | ChildEvent::RunStarted { run_id, .. }
            | ChildEvent::Text { run_id, .. }
            | ChildEvent::Tool { run_id, .. }
            | ChildEvent::SteerApplied { run_id, .. }
            | ChildEvent::SteerDiscarded { run_id, .. }
            | ChildEvent::Compacted { run_id, .. }
            | ChildEvent::StopRequested { run_id, .. }
            | ChildEvent::StopConfirmed { run_id, .. }
            | ChildEvent::Completed { run_id, .. }
            | ChildEvent::BudgetExhausted { run_id, .. }
            | ChildEvent::Failed { run_id, .. } => Some(run_id),
            ChildEvent::Interrupted { run_id, .. } => run_id.as_ref(),
            ChildEvent::Gap { .. } => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::ChildEvent;

    #[test]
    fn the_kind_is_the_type_tag_serde_writes() {
        let event: ChildEvent = serde_json::from_value(serde_json::json!({
            "type": "gap", "at": "2026-11-29T20:05:36.123Z",
            "childId": "ch_01JH8Z6Q2V3W4X5Y6Z7A8B9C0D", "oldest": 9, "requested": 2, "seq": 9
        }))
        .expect("a gap event");
        assert_eq!(event.kind(), "gap");
        assert_eq!(event.seq(), 9);
        assert_eq!(event.at().as_str(), "2026-11-29T20:05:36.123Z");
        assert_eq!(event.run_id(), None);
        assert_eq!(event.child_id().as_str(), "ch_01JH8Z6Q2V3W4X5Y6Z7A8B9C0D");
        let json = serde_json::to_value(&event).expect("encodes");
        assert_eq!(json["type"], event.kind());
    }
}
