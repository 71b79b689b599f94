//! One wire `ChildEvent` as one human-readable line.

use serde_json::Value;

use super::table::{Tone, paint};
use crate::terminal_text::Printing;

/// Longest text shown inline; `subzero output` has the whole result.
const INLINE_TEXT: usize = 160;

/// `seq  at  type  details` (tab-separated when not on a terminal); the time, type and
/// details are one-line fields of `printing`.
pub fn line(event: &Value, color: bool, printing: Printing) -> String {
    let kind = event["type"].as_str().unwrap_or("?");
    let tone = match kind {
        "completed" => Tone::Green,
        "failed" | "gap" => Tone::Red,
        "interrupted" | "stop_requested" | "stop_confirmed" | "steer_discarded" => Tone::Yellow,
        "text" => Tone::Dim,
        _ => Tone::Plain,
    };
    let seq = event["seq"].as_u64().unwrap_or(0);
    let details = details(kind, event);
    let details = printing.field(&details);
    let at = printing.field(event["at"].as_str().unwrap_or(""));
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

fn details(kind: &str, e: &Value) -> String {
    let s = |key: &str| e[key].as_str().unwrap_or("").to_owned();
    let run = s("runId");
    let text = match kind {
        "text" => shorten(&s("text")),
        "tool" => format!("{} {}", s("name"), s("state")),
        "completed" => {
            let artifact = s("artifactId");
            format!("{}  [{artifact}]", shorten(&s("preview")))
        }
        "failed" => format!("{}: {}", s("code"), s("message")),
        "interrupted" => s("reason"),
        "run_queued" => format!("position {}", e["position"]),
        "stop_requested" => format!("cleared {} queued", e["clearedQueued"]),
        "stop_confirmed" => format!("reaped {}", e["reaped"]),
        "steer_applied" => s("steerId"),
        "compacted" => format!(
            "{} → {} prompt tokens; the earlier branch is kept, ending at {}",
            e["tokensBefore"],
            e["tokensAfter"],
            s("branchFrom")
        ),
        "steer_discarded" => format!("{} ({})", s("steerId"), s("reason")),
        "gap" => format!(
            "events after cursor {} were pruned; oldest retained cursor is {}",
            e["requested"], e["oldest"]
        ),
        _ => String::new(),
    };
    match (run.is_empty(), text.is_empty()) {
        (true, _) => text,
        (false, true) => run,
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
            "runId": "run_1", "tokensBefore": 1712, "tokensAfter": 418, "branchFrom": "e_9"});
        let line = super::line(&event, false, crate::terminal_text::Printing::Piped);
        assert!(
            line.ends_with(
                "run_1  1712 → 418 prompt tokens; the earlier branch is kept, ending at e_9"
            ),
            "{line}"
        );
    }
}
