//! One run: grant checks, transcript, the model loop with tools and steering, limits.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use serde_json::json;

use crate::calls::{self, answer_unrun};
use crate::control::BudgetName;
use crate::control::{
    ErrorBody, ErrorBodyExt, ErrorCode, EventText, RunId, RunUsage, StartRun, WorkerEvent,
};
use crate::emit;
use crate::handoff::{
    HANDOFF_MAX_BYTES, HANDOFF_MAX_OUTPUT_TOKENS, HANDOFF_TIMEOUT, Reached, cut_summary,
};
use crate::model::{
    Call, Conversation, Item, Learned, ModelClient, ModelError, PROTOCOLS, Request, ToolChoice,
    ToolSpec,
};
use crate::redact::{StreamRedactor, redact};
use crate::steering::SteerQueue;
use crate::tools::mcp::{McpTools, ServerSpec};
use crate::tools::{self, ToolContext};
use crate::transcript::{
    Entry, EntryType, EntryUsage, ToolCallRecord, Transcript, TranscriptError,
};
use crate::usage::TurnTokens;

/// Text events are coalesced: at most one per this interval within a turn (plus turn ends).
const TEXT_EVENT_INTERVAL: Duration = Duration::from_secs(2);
/// Largest `text` event payload (`EventText` in the schema).
const TEXT_EVENT_MAX: usize = 4096;
/// Pending text is flushed once it reaches this size, even within the interval, so a fast
/// stream never holds a second copy of the whole answer.
const TEXT_PENDING_MAX: usize = 16 * TEXT_EVENT_MAX;

/// What the run has produced so far; survives the run future being dropped (cancel, deadline).
#[derive(Debug, Default)]
pub struct Progress {
    /// The current turn's text, unredacted: redact before reporting it.
    pub text: String,
    pub usage: RunUsage,
}

pub type SharedProgress = Arc<Mutex<Progress>>;

fn lock_progress(p: &SharedProgress) -> std::sync::MutexGuard<'_, Progress> {
    p.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A completed run.
#[derive(Debug)]
pub struct Completed {
    pub result: String,
    pub leaf_id: String,
    pub digest: String,
    /// The budget the run reached (`budget_exhausted`; `result` is the handoff summary).
    pub budget: Option<Reached>,
    /// The final answer was cut at `maxOutputTokens` (this value): `result` is its text up
    /// to the cut.
    pub cut: Option<u64>,
}

/// Checks what can be checked before the transcript or the model is touched.
pub fn check_grant(start: &StartRun) -> Result<(), ErrorBody> {
    let api = start.model.api.to_string();
    if !PROTOCOLS.contains(&api.as_str()) {
        return Err(ErrorBody::new(
            ErrorCode::WorkerIncompatible,
            format!(
                "worker_incompatible: this worker speaks {:?}, not {:?}; pick a supported api",
                PROTOCOLS, start.model.api
            ),
        ));
    }
    let snapshot = &start.snapshot;
    if let Some(unknown) = snapshot
        .tools
        .iter()
        .find(|t| !tools::BUILTIN.contains(&t.to_string().as_str()))
    {
        return Err(ErrorBody::new(
            ErrorCode::UnsupportedGrant,
            format!("unsupported_grant: this worker has no tool named {unknown:?}"),
        ));
    }
    // A template marked read-only may grant `bash` without being write-capable: its
    // filesystem is then read-only by the kernel (`containment::landlock::prepare` refuses
    // the run where the kernel cannot), never by the absence of write tools alone.
    let read_only_bash = crate::containment::landlock::Grant::of(snapshot).marked_read_only;
    if !snapshot.write_capable
        && let Some(writer) = snapshot.tools.iter().find(|t| {
            let name = t.to_string();
            tools::WRITING.contains(&name.as_str()) && !(read_only_bash && name == "bash")
        })
    {
        return Err(ErrorBody::new(
            ErrorCode::UnsupportedGrant,
            format!("unsupported_grant: tool {writer:?} needs a write-capable grant"),
        ));
    }
    Ok(())
}

/// Starts the snapshot's MCP servers and checks every allowed tool against their lists.
pub async fn start_mcp(start: &StartRun, tools: &ToolContext) -> Result<McpTools, ErrorBody> {
    let specs: Vec<ServerSpec> = start
        .snapshot
        .mcp_servers
        .iter()
        .map(|s| ServerSpec {
            name: s.name.to_string(),
            command: s.command.to_string(),
            args: s.args.iter().map(|a| a.as_str().to_owned()).collect(),
            env_refs: crate::control::env_refs(&s.env_refs),
            allowed_tools: s
                .allowed_tools
                .iter()
                .map(|t| t.as_str().to_owned())
                .collect(),
        })
        .collect();
    if specs.is_empty() {
        return Ok(McpTools::default());
    }
    // The worker's own environment is cleared by the broker; `env:VAR` references are
    // resolved by the broker and arrive in `start_run` (a reference without a value
    // refuses the server rather than starting it without it).
    let env_values = &start.mcp_env;
    let startup = Duration::from_millis(start.snapshot.limits.tool_timeout_ms.get());
    McpTools::start(tools, &specs, env_values, startup)
        .await
        .map_err(|e| ErrorBody::new(ErrorCode::UnsupportedGrant, e.to_string()))
}

fn limit(name: &str, message: String) -> ErrorBody {
    ErrorBody::new(ErrorCode::LimitExceeded, message).with_details(json!({ "limit": name }))
}

fn model_failed(err: &ModelError) -> ErrorBody {
    if let ModelError::TooLarge { .. } = err {
        return limit("model_response_bytes", format!("limit_exceeded: {err}"));
    }
    let details = match err {
        ModelError::Http { status, excerpt } => json!({ "status": status, "excerpt": excerpt }),
        ModelError::Redirect { target, .. } => json!({ "status": null, "redirect": target }),
        ModelError::Idle { ms, .. } => json!({ "status": null, "idleTimeoutMs": ms }),
        _ => json!({ "status": null }),
    };
    ErrorBody::new(
        ErrorCode::ModelRequestFailed,
        redact(&format!("model_request_failed: {err}")),
    )
    .with_details(details)
}

pub(crate) fn transcript_error(err: TranscriptError) -> ErrorBody {
    match err {
        TranscriptError::Incompatible(msg) => {
            ErrorBody::new(ErrorCode::CheckpointIncompatible, msg)
        }
        // The disk refused the transcript (full, read-only, gone): the state directory's
        // storage, not a bug; the run ends and the child takes a followup once it has room.
        TranscriptError::Io(e) => ErrorBody::new(
            ErrorCode::StorageUnavailable,
            format!(
                "storage_unavailable: the child's transcript could not be written ({e}); free space in the state directory (or make it writable), then send a followup"
            ),
        ),
    }
}

/// The run's inputs that outlive the future.
#[derive(Debug, Clone)]
pub struct RunContext {
    pub start: Arc<StartRun>,
    pub tools: ToolContext,
    pub steers: Arc<SteerQueue>,
    pub progress: SharedProgress,
    /// The run's MCP servers and their allowed tools.
    pub mcp: Arc<McpTools>,
    /// What the child's endpoints taught this worker in earlier runs.
    pub learned: Arc<Learned>,
    /// When the run's `deadlineMs` is reached (counted from the run's start).
    pub deadline: tokio::time::Instant,
}

/// Opens the transcript (refusing an incompatible checkpoint before any model call).
pub fn open_transcript(start: &StartRun) -> Result<Transcript, ErrorBody> {
    Transcript::open(
        &PathBuf::from(&start.transcript_path),
        start.from_leaf.as_deref(),
        start.expected_digest.as_deref(),
    )
    .map_err(transcript_error)
}

/// The model loop. Runs until the final answer (with no steer pending) or an error; the
/// caller enforces the deadline and cancellation by dropping this future.
pub async fn drive(ctx: RunContext, mut transcript: Transcript) -> Result<Completed, ErrorBody> {
    let start = ctx.start.clone();
    let limits = &start.snapshot.limits;
    let client = ModelClient::new(&start.model, start.stream_bounds, &ctx.learned)
        .map_err(|e| model_failed(&e))?;
    let granted = start.granted_tools();
    let mut declared = tools::declarations(&granted);
    declared.extend(ctx.mcp.declarations().iter().cloned());
    let system = system_prompt(&start);
    let deadline = ctx.deadline;
    let deadline_ms = limits.deadline_ms.get();
    let started = deadline
        .checked_sub(Duration::from_millis(deadline_ms))
        .unwrap_or_else(tokio::time::Instant::now);
    let past_deadline = || Reached {
        budget: BudgetName::DeadlineMs,
        limit: deadline_ms,
        reached: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
    };
    let handoff = Handoff {
        ctx: &ctx,
        client: &client,
        system: &system,
        declared: &declared,
    };

    if let Some(notice) = &start.recovery_notice {
        let mut entry = Entry::new(EntryType::RecoveryNotice, "user");
        entry.content = Some(notice.clone());
        entry.run_id = Some(start.run_id.to_string());
        transcript.append(entry).map_err(transcript_error)?;
    }
    let mut prompt = Entry::new(EntryType::Prompt, "user");
    prompt.content = Some(start.prompt.to_string());
    prompt.run_id = Some(start.run_id.to_string());
    transcript.append(prompt).map_err(transcript_error)?;

    let mut turn: u32 = 0;
    loop {
        for steer in ctx.steers.take() {
            let mut entry = Entry::new(EntryType::Steer, "user");
            entry.content = Some(steer.message.clone());
            entry.run_id = Some(start.run_id.to_string());
            entry.steer_id = Some(steer.steer_id.to_string());
            transcript.append(entry).map_err(transcript_error)?;
            emit::event(
                &start.run_id,
                WorkerEvent::SteerApplied {
                    steer_id: steer.steer_id,
                    request_id: steer.request_id,
                },
            );
        }
        if u64::from(turn) >= limits.max_turns.get() {
            let reached = Reached {
                budget: BudgetName::MaxTurns,
                limit: limits.max_turns.get(),
                reached: u64::from(turn),
            };
            return handoff.run(transcript, turn, reached).await;
        }
        turn += 1;
        lock_progress(&ctx.progress).usage.turns = turn;
        if let Some(turn) = std::num::NonZeroU64::new(u64::from(turn)) {
            emit::event(&start.run_id, WorkerEvent::TurnStarted { turn });
        }

        let conversation = conversation(&system, &transcript);
        let model_turn = {
            let mut text_events = TextEvents::new(&start.run_id, ctx.progress.clone());
            let request = Request {
                conversation: &conversation,
                tools: &declared,
                tool_choice: ToolChoice::Auto,
                max_output_tokens: u32::try_from(limits.max_output_tokens.get())
                    .unwrap_or(u32::MAX),
                max_text_bytes: None,
            };
            let result = tokio::time::timeout_at(
                deadline,
                client.complete(request, &mut |delta| text_events.push(delta)),
            )
            .await;
            text_events.finish();
            let Ok(result) = result else {
                return handoff.run(transcript, turn, past_deadline()).await;
            };
            match result {
                Ok(turn) => turn,
                Err(err) => {
                    if let ModelError::TooLarge { max } = &err {
                        // The partial result keeps the text up to the cap and says so.
                        lock_progress(&ctx.progress).text.push_str(&format!(
                            "\n[cut: the model response passed {max} bytes (model_response_bytes)]"
                        ));
                    }
                    return Err(model_failed(&err));
                }
            }
        };
        let tokens = TurnTokens::of(&model_turn);
        {
            let mut p = lock_progress(&ctx.progress);
            p.usage.add(tokens);
            p.text.clone_from(&model_turn.text);
        }

        let mut entry = Entry::new(EntryType::Assistant, "assistant");
        entry.content = (!model_turn.text.is_empty()).then(|| model_turn.text.clone());
        entry.run_id = Some(start.run_id.to_string());
        entry.usage = Some(EntryUsage {
            input_tokens: tokens.input,
            output_tokens: tokens.output,
        });
        entry.tool_calls = model_turn
            .tool_calls
            .iter()
            .map(|c| ToolCallRecord {
                id: c.id.clone(),
                name: c.name.clone(),
                arguments: c.arguments.clone(),
            })
            .collect();
        transcript.append(entry).map_err(transcript_error)?;

        // Cut at maxOutputTokens: a text answer is kept (and marked when it ends the run);
        // a call cut mid-arguments is answered with a tool error (`calls`).
        let cut_at = (model_turn.finish_reason.as_deref() == Some("length"))
            .then(|| limits.max_output_tokens.get());

        let final_answer = model_turn.tool_calls.is_empty();
        if final_answer && ctx.steers.close_if_empty() {
            let (leaf_id, digest) = transcript.commit().map_err(transcript_error)?;
            return Ok(Completed {
                result: redact(&model_turn.text),
                leaf_id,
                digest,
                budget: None,
                cut: cut_at,
            });
        }
        // The run would go on (tools to run, or a steer to answer): not past its tokens.
        if let Some(budget) = limits.token_budget.map(std::num::NonZeroU64::get) {
            let used = lock_progress(&ctx.progress).usage.tokens();
            if used >= budget {
                let reached = Reached {
                    budget: BudgetName::TokenBudget,
                    limit: budget,
                    reached: used,
                };
                answer_unrun(&mut transcript, &start, &model_turn.tool_calls, &reached)?;
                return handoff.run(transcript, turn, reached).await;
            }
        }
        if final_answer {
            continue;
        }

        let calls_turn = calls::Turn {
            granted: &granted,
            cut_at,
            past_deadline: &past_deadline,
        };
        if let Some(reached) =
            calls::run_all(&ctx, &mut transcript, &model_turn.tool_calls, &calls_turn).await?
        {
            return handoff.run(transcript, turn, reached).await;
        }
    }
}

/// What the handoff request needs from the run.
struct Handoff<'a> {
    ctx: &'a RunContext,
    client: &'a ModelClient,
    system: &'a str,
    declared: &'a [ToolSpec],
}

impl Handoff<'_> {
    /// The run reached `reached` after `turns` turns: ask for the summary without tools
    /// (bounded by [`HANDOFF_MAX_OUTPUT_TOKENS`], [`HANDOFF_TIMEOUT`] and
    /// [`HANDOFF_MAX_BYTES`], where the stream stops being read), commit the transcript and
    /// end `budget_exhausted` with the summary — or, when none came, with the worker's note
    /// saying why — as the result.
    async fn run(
        &self,
        mut transcript: Transcript,
        turns: u32,
        reached: Reached,
    ) -> Result<Completed, ErrorBody> {
        let start = &self.ctx.start;
        tracing::info!(run_id = %start.run_id.as_str(), budget = %reached.budget, limit = reached.limit, reached = reached.reached, "budget reached; asking for a handoff summary");
        let last_text = lock_progress(&self.ctx.progress).text.clone();
        let mut notice = Entry::new(EntryType::BudgetNotice, "user");
        notice.content = Some(reached.notice());
        notice.run_id = Some(start.run_id.to_string());
        transcript.append(notice).map_err(transcript_error)?;
        let turn = turns.saturating_add(1);
        lock_progress(&self.ctx.progress).usage.turns = turn;
        if let Some(turn) = std::num::NonZeroU64::new(u64::from(turn)) {
            emit::event(&start.run_id, WorkerEvent::TurnStarted { turn });
        }
        let conversation = conversation(self.system, &transcript);
        let max_output_tokens = u32::try_from(start.snapshot.limits.max_output_tokens.get())
            .unwrap_or(u32::MAX)
            .min(HANDOFF_MAX_OUTPUT_TOKENS);
        let request = Request {
            conversation: &conversation,
            tools: self.declared,
            tool_choice: ToolChoice::None,
            max_output_tokens,
            max_text_bytes: Some(HANDOFF_MAX_BYTES),
        };
        let mut text_events = TextEvents::new(&start.run_id, self.ctx.progress.clone());
        let answered = tokio::time::timeout(
            HANDOFF_TIMEOUT,
            self.client
                .complete(request, &mut |delta| text_events.push(delta)),
        )
        .await;
        text_events.finish();
        let summary = match answered {
            Ok(Ok(answer)) if !answer.text.trim().is_empty() => {
                let tokens = TurnTokens::of(&answer);
                lock_progress(&self.ctx.progress).usage.add(tokens);
                // Only the text is kept (a tool call here was forbidden and is dropped), and
                // no more of it than the byte cap.
                let summary = cut_summary(answer.text, answer.text_capped);
                let mut entry = Entry::new(EntryType::Assistant, "assistant");
                entry.content = Some(summary.clone());
                entry.run_id = Some(start.run_id.to_string());
                entry.usage = Some(EntryUsage {
                    input_tokens: tokens.input,
                    output_tokens: tokens.output,
                });
                transcript.append(entry).map_err(transcript_error)?;
                summary
            }
            Ok(Ok(answer)) => {
                lock_progress(&self.ctx.progress)
                    .usage
                    .add(TurnTokens::of(&answer));
                reached.fallback("the child answered with no text", &last_text)
            }
            Ok(Err(err)) => reached.fallback(&redact(&err.to_string()), &last_text),
            Err(_) => reached.fallback(
                &format!(
                    "the summary request took longer than {} s",
                    HANDOFF_TIMEOUT.as_secs()
                ),
                &last_text,
            ),
        };
        let (leaf_id, digest) = transcript.commit().map_err(transcript_error)?;
        Ok(Completed {
            result: redact(&summary),
            leaf_id,
            digest,
            budget: Some(reached),
            cut: None,
        })
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

/// Snapshot instructions plus explicit skills.
fn system_prompt(start: &StartRun) -> String {
    let mut system = start.snapshot.instructions.to_string();
    for skill in start.snapshot.skills.iter() {
        if !system.is_empty() {
            system.push_str("\n\n");
        }
        system.push_str(&format!(
            "## Skill: {}\n\n{}",
            skill.name.as_str(),
            skill.content.as_str()
        ));
    }
    system
}

/// The conversation for the model: the system prompt and the root→leaf path.
fn conversation(system: &str, transcript: &Transcript) -> Conversation {
    let mut items = Vec::new();
    for entry in transcript.path() {
        let content = entry.content.clone().unwrap_or_default();
        match entry.kind {
            EntryType::Header => {}
            EntryType::Prompt
            | EntryType::Steer
            | EntryType::RecoveryNotice
            | EntryType::BudgetNotice => {
                items.push(Item::User(content));
            }
            EntryType::Assistant => items.push(Item::Assistant {
                text: entry.content.clone(),
                calls: entry
                    .tool_calls
                    .iter()
                    .map(|c| Call {
                        id: c.id.clone(),
                        name: c.name.clone(),
                        arguments: c.arguments.clone(),
                    })
                    .collect(),
            }),
            EntryType::ToolResult => items.push(Item::ToolResult {
                call_id: entry.tool_call_id.clone().unwrap_or_default(),
                name: entry.name.clone().unwrap_or_default(),
                content,
                is_error: entry.is_error.unwrap_or(false),
            }),
        }
    }
    Conversation {
        system: system.to_owned(),
        items,
    }
}

/// Coalesces text deltas into `text` events (per turn, or every 2 s), redacted as a stream.
struct TextEvents<'a> {
    run_id: &'a RunId,
    redactor: StreamRedactor,
    pending: String,
    last: Instant,
    progress: SharedProgress,
}

impl<'a> TextEvents<'a> {
    fn new(run_id: &'a RunId, progress: SharedProgress) -> Self {
        lock_progress(&progress).text.clear();
        Self {
            run_id,
            redactor: StreamRedactor::new(),
            pending: String::new(),
            last: Instant::now(),
            progress,
        }
    }

    fn push(&mut self, delta: &str) {
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

    fn finish(&mut self) {
        let rest = self.redactor.finish();
        self.pending.push_str(&rest);
        self.flush();
    }
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
