//! One wire `ChildEvent` as one human-readable line.

use subzero_protocol::ChildEvent;

use super::table::{Tone, paint};
use crate::terminal_text::Printing;

/// Longest text shown inline; `subzero output` has the whole result.
const INLINE_TEXT: usize = 160;

/// `seq  at  type  details` (tab-separated when not on a terminal); the time, type and
/// details are one-line fields of `printing`. An event the contract refuses (`None`)
/// shows as type `?` with nothing else.
pub fn line(event: Option<&ChildEvent>, color: bool, printing: Printing) -> String {
    let (seq, at, kind, details) = match event {
        Some(event) => (
            event.seq(),
            event.at().map_or("", |at| at.as_str()),
            event.kind(),
            details(event),
        ),
        None => (0, "", "?", String::new()),
    };
    let tone = match kind {
        "completed" => Tone::Green,
        "failed" | "gap" => Tone::Red,
        "interrupted" | "stop_requested" | "stop_confirmed" | "steer_discarded" => Tone::Yellow,
        "text" => Tone::Dim,
        _ => Tone::Plain,
    };
    let details = printing.field(&details);
    let at = printing.field(at);
    let kind = printing.field(kind);
    if color {
        format!(
            "{seq:>5}  {}  {:<15} {details}",
            paint(&at, Tone::Dim, true),
            paint(&kind, tone, true)
        )
    } else {
        format!("{seq}\t{at}\t{kind}\t{details}")
    }
}

fn details(event: &ChildEvent) -> String {
    let run = event.run_id().map_or("", |r| r.as_str());
    let text = match event {
        ChildEvent::Text { text, .. } => shorten(text),
        ChildEvent::Tool { name, state, .. } => format!("{} {state}", name.as_str()),
        ChildEvent::NetworkRefused { host, port, .. } => format!("{}:{port}", host.as_str()),
        ChildEvent::Completed {
            preview,
            artifact_id,
            ..
        } => format!(
            "{}  [{}]",
            shorten(preview.as_ref().map_or("", |p| p.as_str())),
            artifact_id.as_str()
        ),
        ChildEvent::Failed { code, message, .. } => format!("{code}: {}", message.as_str()),
        ChildEvent::Interrupted { reason, .. } => reason.as_str().to_owned(),
        ChildEvent::RunQueued { position, .. } => format!("position {position}"),
        ChildEvent::StopRequested { cleared_queued, .. } => {
            format!("cleared {cleared_queued} queued")
        }
        ChildEvent::StopConfirmed { reaped, .. } => format!("reaped {reaped}"),
        ChildEvent::SteerApplied { steer_id, .. } => steer_id.as_str().to_owned(),
        ChildEvent::Compacted {
            tokens_before,
            tokens_after,
            branch_from,
            ..
        } => format!(
            "{tokens_before} → {tokens_after} prompt tokens; the earlier branch is kept, ending at {}",
            branch_from.as_str()
        ),
        ChildEvent::SteerDiscarded {
            steer_id, reason, ..
        } => format!("{} ({reason})", steer_id.as_str()),
        ChildEvent::Gap {
            requested, oldest, ..
        } => format!(
            "events after cursor {requested} were pruned; oldest retained cursor is {oldest}"
        ),
        ChildEvent::RunStarted { .. } | ChildEvent::BudgetExhausted { .. } => String::new(),
    };
    match (run.is_empty(), text.is_empty()) {
        (true, _) => text,
        (false, true) => run.to_owned(),
        (false, false) => format!("{run}  {text}"),
    }
}

fn shorten(text: &str) -> String {
    let cut = text.floor_char_boundary(INLINE_TEXT);
    if cut < text.len() {
        format!("{}…", &text[..cut])
    } else {
        text.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    #[test]
    fn a_compaction_shows_its_tokens_and_the_branch_it_kept() {
        let event = json!({"seq": 9, "at": "2026-11-29T20:05:36.123Z", "type": "compacted",
            "childId": "ch_01JH8Z6Q2V3W4X5Y6Z7A8B9C0D", "runId": "run_01JH8Z6Q2V3W4X5Y6Z7A8B9C0D",
            "tokensBefore": 1712, "tokensAfter": 418, "branchFrom": "e_9"});
        let event = serde_json::from_value(event).expect("a compacted event");
        let line = super::line(Some(&event), false, crate::terminal_text::Printing::Piped);
        assert!(
            line.ends_with(
                "run_01JH8Z6Q2V3W4X5Y6Z7A8B9C0D  1712 → 418 prompt tokens; the earlier branch is kept, ending at e_9"
            ),
            "{line}"
        );
    }
}
