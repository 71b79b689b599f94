//! A turn's text as `text` events: coalesced (one per [`TEXT_EVENT_INTERVAL`] within a
//! turn, plus the turn's end), redacted as a stream, cut into schema-sized pieces, and kept
//! whole in the run's progress for a partial result.

use std::time::{Duration, Instant};

use crate::control::{EventText, RunId, WorkerEvent};
use crate::emit;
use crate::redact::StreamRedactor;
use crate::run::{SharedProgress, lock_progress};

/// Text events are coalesced: at most one per this interval within a turn (plus turn ends).
const TEXT_EVENT_INTERVAL: Duration = Duration::from_secs(2);
/// Largest `text` event payload (`EventText` in the schema).
const TEXT_EVENT_MAX: usize = 4096;
/// Pending text is flushed once it reaches this size, even within the interval, so a fast
/// stream never holds a second copy of the whole answer.
const TEXT_PENDING_MAX: usize = 16 * TEXT_EVENT_MAX;

/// Coalesces text deltas into `text` events (per turn, or every 2 s), redacted as a stream.
pub struct TextEvents<'a> {
    run_id: &'a RunId,
    redactor: StreamRedactor,
    pending: String,
    last: Instant,
    progress: SharedProgress,
}

impl<'a> TextEvents<'a> {
    pub fn new(run_id: &'a RunId, progress: SharedProgress) -> Self {
        lock_progress(&progress).text.clear();
        Self {
            run_id,
            redactor: StreamRedactor::new(),
            pending: String::new(),
            last: Instant::now(),
            progress,
        }
    }

    pub fn push(&mut self, delta: &str) {
        // Progress keeps the raw text (redacted whole when reported); events get the
        // stream-redacted text.
        lock_progress(&self.progress).text.push_str(delta);
        let safe = self.redactor.push(delta);
        self.pending.push_str(&safe);
        if self.last.elapsed() >= TEXT_EVENT_INTERVAL || self.pending.len() >= TEXT_PENDING_MAX {
            self.flush();
        }
    }

    fn flush(&mut self) {
        self.last = Instant::now();
        let pending = std::mem::take(&mut self.pending);
        for piece in text_pieces(&pending) {
            match EventText::try_from(piece) {
                Ok(text) => emit::event(self.run_id, WorkerEvent::Text { text }),
                Err(err) => tracing::error!(%err, "a text piece broke the contract"),
            }
        }
    }

    pub fn finish(&mut self) {
        let rest = self.redactor.finish();
        self.pending.push_str(&rest);
        self.flush();
    }
}

/// Splits text into pieces of at most `TEXT_EVENT_MAX` bytes at char boundaries.
fn text_pieces(mut text: &str) -> Vec<&str> {
    let mut pieces = Vec::new();
    while text.len() > TEXT_EVENT_MAX {
        let mut cut = TEXT_EVENT_MAX;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        let (head, rest) = text.split_at(cut);
        pieces.push(head);
        text = rest;
    }
    if !text.is_empty() {
        pieces.push(text);
    }
    pieces
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_text_is_split_at_char_boundaries() {
        let text = "é".repeat(3000);
        let pieces = text_pieces(&text);
        assert!(pieces.iter().all(|p| p.len() <= TEXT_EVENT_MAX));
        assert_eq!(pieces.concat(), text);
    }
}
