//! Compaction: when a child's conversation outgrows its model's context window, one
//! tools-off summary request, then a new transcript branch from the root whose first
//! entries are the summary and the most recent turns (copied as they were: no tool call is
//! run again). The branch left behind stays in the file, whole; the run's commit then names
//! the new branch's leaf, so the checkpoint, a followup and a resume after a broker restart
//! all continue from the compacted conversation.
//!
//! Bounded like the handoff: at most [`SUMMARY_MAX_OUTPUT_TOKENS`] output tokens and
//! [`SUMMARY_MAX_BYTES`] of summary text (the stream is not read past it) — less for a
//! small window: [`SUMMARY_PERCENT`] of it — and in time by the run's deadline (at least
//! [`HANDOFF_TIMEOUT`]). A summary request that fails, times out or answers no text leaves
//! the transcript as it was and ends the run `context_exhausted`, saying why.

use crate::context::{ContextMeter, exhausted};
use crate::control::{ErrorBody, LeafId, StartRun, WorkerEvent};
use crate::emit;
use crate::handoff::HANDOFF_TIMEOUT;
use crate::model::{Conversation, Item, ModelClient, ModelTurn, Request, ToolChoice, ToolSpec};
use crate::prompt::items;
use crate::run::{SharedProgress, lock_progress, transcript_error};
use crate::text_events::TextEvents;
use crate::transcript::{Entry, EntryType, Transcript};
use crate::usage::{BYTES_PER_TOKEN, TurnTokens};

/// Output tokens of the summary request (or less, when the run's `maxOutputTokens` is).
pub const SUMMARY_MAX_OUTPUT_TOKENS: u32 = 1024;
/// Bytes of summary kept; the stream is not read past them.
pub const SUMMARY_MAX_BYTES: usize = 8 * 1024;
/// The share of the window (percent) the recent turns kept may take; of the refused
/// prompt's size when the window is unknown.
const KEEP_PERCENT: u64 = 25;
/// The share of the window (percent) the summary may take, within [`SUMMARY_MAX_BYTES`]
/// and [`SUMMARY_MAX_OUTPUT_TOKENS`], so that a small window keeps room for what follows.
const SUMMARY_PERCENT: u64 = 20;

/// The request that asks for the summary (the last user message of that request; it is
/// not kept in the transcript).
pub const SUMMARY_REQUEST: &str = "Your conversation is about to outgrow your context window and will be compacted. Write a summary of everything above that you will need to continue: the task and its constraints, anything the user asked you to remember (word for word), what you found (files, names, facts), what you did and its results, and what is left to do. Be concise and concrete. Do not call any tool.";

/// The line that opens a summary entry.
pub const SUMMARY_HEADER: &str = "[Summary of the earlier conversation, written by you when it was compacted to fit the context window; the full earlier branch is kept in the transcript.]";

/// What one compaction needs of its run.
pub(crate) struct Compactor<'a> {
    pub client: &'a ModelClient,
    pub start: &'a StartRun,
    pub system: &'a str,
    pub declared: &'a [ToolSpec],
    pub meter: &'a ContextMeter,
    pub progress: &'a SharedProgress,
    /// When the run's `deadlineMs` is reached.
    pub deadline: tokio::time::Instant,
}

/// How long a summary request may take when started at `now`: until the run's `deadline`,
/// and at least [`HANDOFF_TIMEOUT`] (so a summary started just before the deadline still
/// ends within the worker's backstop, `deadline` + [`HANDOFF_TIMEOUT`]).
fn summary_bound(now: tokio::time::Instant, deadline: tokio::time::Instant) -> std::time::Duration {
    deadline.saturating_duration_since(now).max(HANDOFF_TIMEOUT)
}

impl Compactor<'_> {
    /// A request over `conversation` as a turn of the run sends it.
    fn turn_request<'c>(&self, conversation: &'c Conversation) -> Request<'c>
    where
        Self: 'c,
    {
        Request {
            conversation,
            tools: self.declared,
            tool_choice: ToolChoice::Auto,
            max_output_tokens: u32::try_from(self.start.snapshot.limits.max_output_tokens.get())
                .unwrap_or(u32::MAX),
            max_text_bytes: None,
        }
    }

    /// The prompt tokens the next turn over `transcript` would take.
    pub fn projected(&self, transcript: &Transcript) -> u64 {
        let conversation = Conversation {
            system: self.system.to_owned(),
            items: items(transcript.path()),
        };
        self.meter
            .project(self.client.body_bytes(&self.turn_request(&conversation)))
    }

    /// Compacts `transcript` (whose next turn would take `before` prompt tokens) and
    /// reports it; `Ok(None)` when there is nothing earlier to summarise (a transcript of
    /// one turn). The prompt tokens after.
    pub async fn compact(
        &self,
        transcript: &mut Transcript,
        before: u64,
    ) -> Result<Option<u64>, ErrorBody> {
        let path: Vec<Entry> = transcript
            .path()
            .into_iter()
            .filter(|e| e.kind != EntryType::Header)
            .cloned()
            .collect();
        let Some(cut) = cut_at(&path, self.keep_bytes(before)) else {
            return Ok(None);
        };
        tracing::info!(run_id = %self.start.run_id.as_str(), before, summarised = cut, kept = path.len() - cut, "compacting the transcript");
        let summary = self.summarise(&path[..cut], before).await?;
        tracing::debug!(run_id = %self.start.run_id.as_str(), bytes = summary.len(), "summary received");
        let branch_from = transcript.branch_from_root();
        let mut opening = Entry::new(EntryType::Summary, "user");
        opening.content = Some(format!("{SUMMARY_HEADER}\n\n{summary}"));
        opening.run_id = Some(self.start.run_id.to_string());
        transcript.append(opening).map_err(transcript_error)?;
        for entry in &path[cut..] {
            transcript.append(entry.clone()).map_err(transcript_error)?;
        }
        let after = self.projected(transcript);
        lock_progress(self.progress).usage.context_tokens = Some(after);
        if let Ok(branch_from) = LeafId::try_from(branch_from) {
            emit::event(
                &self.start.run_id,
                WorkerEvent::Compacted {
                    branch_from,
                    tokens_after: after,
                    tokens_before: before,
                },
            );
        }
        Ok(Some(after))
    }

    /// Bytes of the most recent turns a new branch keeps: [`KEEP_PERCENT`] of the
    /// window, or of the `before` prompt tokens when the window is unknown.
    fn keep_bytes(&self, before: u64) -> u64 {
        let tokens = self.meter.window().unwrap_or(before);
        tokens.saturating_mul(BYTES_PER_TOKEN) * KEEP_PERCENT / 100
    }

    /// The summary's caps, bytes and output tokens: [`SUMMARY_PERCENT`] of the window (or
    /// of the `before` prompt tokens when it is unknown), at most [`SUMMARY_MAX_BYTES`] and
    /// [`SUMMARY_MAX_OUTPUT_TOKENS`] (and the run's `maxOutputTokens`).
    fn summary_caps(&self, before: u64) -> (usize, u32) {
        let tokens = self.meter.window().unwrap_or(before);
        let share = tokens.saturating_mul(BYTES_PER_TOKEN) * SUMMARY_PERCENT / 100;
        let bytes = usize::try_from(share)
            .unwrap_or(usize::MAX)
            .clamp(256, SUMMARY_MAX_BYTES);
        let out = u32::try_from((bytes as u64).div_ceil(BYTES_PER_TOKEN))
            .unwrap_or(u32::MAX)
            .min(SUMMARY_MAX_OUTPUT_TOKENS)
            .min(
                u32::try_from(self.start.snapshot.limits.max_output_tokens.get())
                    .unwrap_or(u32::MAX),
            );
        (bytes, out)
    }

    /// The summary of `earlier`, from one request with no tool allowed, bounded; a
    /// failure is `context_exhausted` naming it.
    async fn summarise(&self, earlier: &[Entry], before: u64) -> Result<String, ErrorBody> {
        let conversation = self.summary_conversation(earlier);
        let (max_bytes, max_output_tokens) = self.summary_caps(before);
        let request = Request {
            conversation: &conversation,
            tools: self.declared,
            tool_choice: ToolChoice::None,
            max_output_tokens,
            max_text_bytes: Some(max_bytes),
        };
        let mut text_events = TextEvents::new(&self.start.run_id, self.progress.clone());
        // A slow local model may take minutes to summarise a full window: the run's own
        // deadline bounds it, as it bounds every other request of the run.
        let bound = summary_bound(tokio::time::Instant::now(), self.deadline);
        let answered = tokio::time::timeout(
            bound,
            self.client
                .complete(request, &mut |delta| text_events.push(delta)),
        )
        .await;
        text_events.finish();
        let failed = |why: String| exhausted(None, &why, self.meter, before);
        let answer: ModelTurn = match answered {
            Err(_) => {
                return Err(failed(format!(
                    "compacting failed: the summary request took longer than {} s",
                    bound.as_secs()
                )));
            }
            Ok(Err(err)) => return Err(failed(format!("compacting failed: {err}"))),
            Ok(Ok(answer)) => answer,
        };
        lock_progress(self.progress)
            .usage
            .add(TurnTokens::of(&answer));
        let text = answer.text.trim();
        if text.is_empty() {
            return Err(failed(
                "compacting failed: the summary request answered no text".to_owned(),
            ));
        }
        let cut = text.floor_char_boundary(max_bytes);
        Ok(text[..cut].to_owned())
    }

    /// `earlier` and the request for its summary; when the window is known, the oldest
    /// turns that would not let that request fit are left out.
    fn summary_conversation(&self, earlier: &[Entry]) -> Conversation {
        let mut from = 0;
        loop {
            let mut items = items(&earlier[from..]);
            items.push(Item::User(SUMMARY_REQUEST.to_owned()));
            let conversation = Conversation {
                system: self.system.to_owned(),
                items,
            };
            let bytes = self.client.body_bytes(&self.turn_request(&conversation));
            let next = (from + 1..earlier.len()).find(|&i| is_turn_start(&earlier[i]));
            match next {
                Some(next) if self.meter.would_pass(bytes) => from = next,
                _ => return conversation,
            }
        }
    }
}

/// Whether a new branch (or a summary request) may start at `entry`: any entry but a
/// tool result, which must follow the call it answers.
fn is_turn_start(entry: &Entry) -> bool {
    entry.kind != EntryType::ToolResult && entry.kind != EntryType::Header
}

/// Whether `entry` is a message of the user side (a prompt, steer, notice or summary).
fn is_user_turn(entry: &Entry) -> bool {
    matches!(
        entry.kind,
        EntryType::Prompt
            | EntryType::Steer
            | EntryType::RecoveryNotice
            | EntryType::SetupNotice
            | EntryType::BudgetNotice
            | EntryType::Summary
    )
}

/// Where `path` is cut: entries before it are summarised, the rest kept on the new
/// branch. The earliest turn start (past the first entry) whose tail fits `keep_bytes`;
/// when none fits, the last turn start if it is a user message (the question the child is
/// answering stays as it was asked), else the end (everything is summarised). `None` for
/// a path of one entry: nothing earlier to summarise.
fn cut_at(path: &[Entry], keep_bytes: u64) -> Option<usize> {
    if path.len() < 2 {
        return None;
    }
    let size = |e: &Entry| serde_json::to_vec(e).map_or(0, |b| b.len() as u64);
    let mut tail = 0u64;
    let mut fits = None;
    for i in (1..path.len()).rev() {
        tail += size(&path[i]);
        if tail > keep_bytes {
            break;
        }
        if is_turn_start(&path[i]) {
            fits = Some(i);
        }
    }
    let last_start = (1..path.len()).rev().find(|&i| is_turn_start(&path[i]));
    Some(match (fits, last_start) {
        (Some(i), _) => i,
        (None, Some(i)) if is_user_turn(&path[i]) => i,
        _ => path.len(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(kind: EntryType, content: &str) -> Entry {
        let mut e = Entry::new(kind, "user");
        e.content = Some(content.to_owned());
        e
    }

    #[test]
    fn a_summary_may_take_until_the_deadline_and_at_least_the_handoff_bound() {
        let now = tokio::time::Instant::now();
        let far = now + std::time::Duration::from_secs(1_500);
        assert_eq!(
            summary_bound(now, far),
            std::time::Duration::from_secs(1_500)
        );
        let near = now + std::time::Duration::from_secs(5);
        assert_eq!(summary_bound(now, near), HANDOFF_TIMEOUT);
        assert_eq!(summary_bound(far, now), HANDOFF_TIMEOUT);
    }

    #[test]
    fn the_cut_never_separates_a_tool_result_from_its_call() {
        let path = vec![
            entry(EntryType::Prompt, "task"),
            entry(EntryType::Assistant, "calling"),
            entry(EntryType::ToolResult, &"x".repeat(4000)),
            entry(EntryType::ToolResult, "y"),
            entry(EntryType::Assistant, "done"),
        ];
        let cut = cut_at(&path, 1000).expect("a cut");
        assert_eq!(cut, 4, "only the last answer fits");
        let cut = cut_at(&path, 100_000).expect("a cut");
        assert_eq!(cut, 1, "everything but the first entry fits");
        let cut = cut_at(&path[..4], 10).expect("a cut");
        assert_eq!(cut, 4, "a call and its results are summarised together");
    }

    #[test]
    fn a_transcript_of_one_entry_has_nothing_to_summarise() {
        assert_eq!(cut_at(&[entry(EntryType::Prompt, "task")], 10), None);
        assert_eq!(cut_at(&[], 10), None);
    }

    #[test]
    fn when_nothing_fits_the_pending_question_is_kept_alone() {
        let path = vec![
            entry(EntryType::Prompt, &"a".repeat(500)),
            entry(EntryType::Assistant, &"b".repeat(500)),
            entry(EntryType::Prompt, &"c".repeat(500)),
        ];
        assert_eq!(cut_at(&path, 10), Some(2));
        assert_eq!(cut_at(&path[..2], 10), Some(2), "an answer is summarised");
    }
}
