//! One run: grant checks, transcript, the model loop with tools and steering, limits.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use crate::calls::{self, answer_unrun};
use crate::compact::Compactor;
use crate::context::{ContextMeter, exhausted};
use crate::control::BudgetName;
use crate::control::{
    Compaction, ErrorBody, ErrorBodyExt, ErrorCode, RunUsage, StartRun, WorkerEvent,
};
use crate::emit;
use crate::failure::model_failed;
pub(crate) use crate::failure::transcript_error;
use crate::handoff::{
    HANDOFF_MAX_BYTES, HANDOFF_MAX_OUTPUT_TOKENS, HANDOFF_TIMEOUT, Reached, cut_summary,
};
use crate::model::{
    Learned, ModelClient, ModelError, ModelTurn, PROTOCOLS, Request, ToolChoice, ToolSpec,
};
use crate::prompt::{conversation, system_prompt};
use crate::redact::redact;
use crate::steering::SteerQueue;
use crate::text_events::TextEvents;
use crate::tools::mcp::{McpTools, ServerSpec};
use crate::tools::{self, ToolContext};
use crate::transcript::{Entry, EntryType, EntryUsage, ToolCallRecord, Transcript};
use crate::usage::TurnTokens;

/// What the run has produced so far; survives the run future being dropped (cancel, deadline).
#[derive(Debug, Default)]
pub struct Progress {
    /// The current turn's text, unredacted: redact before reporting it.
    pub text: String,
    pub usage: RunUsage,
}

pub type SharedProgress = Arc<Mutex<Progress>>;

pub(crate) fn lock_progress(p: &SharedProgress) -> std::sync::MutexGuard<'_, Progress> {
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
    /// What the model is told before the prompt: the checkout's setup command failed.
    pub setup_note: Option<String>,
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
///
/// Each pass is one turn: the steers that arrived are applied, the turn budget checked,
/// the model asked ([`Run::ask`]), and its answer recorded and acted on
/// ([`Run::after_answer`]: the final answer, the token budget, the tool round). A reached
/// budget ends the run through [`Run::handoff`].
pub async fn drive(ctx: RunContext, mut transcript: Transcript) -> Result<Completed, ErrorBody> {
    let run = Run::new(&ctx)?;
    if run.start().compact == Some(true) {
        // The parent asked: compact what the child has so far, before its new prompt.
        let projected = run.compactor().projected(&transcript);
        run.compactor().compact(&mut transcript, projected).await?;
    }
    run.record_prompt(&mut transcript)?;
    let mut turn: u32 = 0;
    loop {
        run.apply_steers(&mut transcript)?;
        if let Some(reached) = run.turns_reached(turn) {
            return run.handoff(transcript, turn, reached).await;
        }
        turn += 1;
        run.turn_started(turn);
        let Some(answer) = run.ask(&mut transcript).await? else {
            return run.handoff(transcript, turn, run.past_deadline()).await;
        };
        match run.after_answer(&mut transcript, answer).await? {
            Next::Done(completed) => return Ok(completed),
            Next::Turn => {}
            Next::Handoff(reached) => return run.handoff(transcript, turn, reached).await,
        }
    }
}

/// What one run's turns share.
struct Run<'a> {
    ctx: &'a RunContext,
    client: ModelClient,
    granted: Vec<String>,
    /// The built-in and MCP tools the model is offered.
    declared: Vec<ToolSpec>,
    system: String,
    /// When the run started (its deadline less `deadlineMs`).
    started: tokio::time::Instant,
    /// The prompt size of each request against the model's context window.
    meter: ContextMeter,
}

/// What one request came to.
enum Asked {
    /// The answer, or `None` when the run's deadline came first.
    Answer(Option<ModelTurn>),
    /// The endpoint refused the prompt as too long; its projected prompt tokens.
    Refused(ModelError, u64),
}

/// Where an answer leads.
enum Next {
    Done(Completed),
    /// Another turn: tools were run, or a steer waits to be answered.
    Turn,
    Handoff(Reached),
}

impl<'a> Run<'a> {
    fn new(ctx: &'a RunContext) -> Result<Self, ErrorBody> {
        let start = &ctx.start;
        let client = ModelClient::new(&start.model, start.stream_bounds, &ctx.learned)
            .map_err(|e| model_failed(&e))?;
        let granted = start.granted_tools();
        let mut declared = tools::declarations(&granted);
        declared.extend(ctx.mcp.declarations().iter().cloned());
        let deadline_ms = start.snapshot.limits.deadline_ms.get();
        let started = ctx
            .deadline
            .checked_sub(Duration::from_millis(deadline_ms))
            .unwrap_or_else(tokio::time::Instant::now);
        Ok(Self {
            ctx,
            client,
            granted,
            declared,
            system: system_prompt(start),
            started,
            meter: ContextMeter::new(
                start
                    .model
                    .context_window
                    .as_ref()
                    .and_then(|w| u64::try_from(w.0).ok()),
            ),
        })
    }

    fn start(&self) -> &StartRun {
        &self.ctx.start
    }

    /// An entry of this run.
    fn entry(&self, kind: EntryType, role: &str, content: Option<String>) -> Entry {
        let mut entry = Entry::new(kind, role);
        entry.content = content;
        entry.run_id = Some(self.start().run_id.to_string());
        entry
    }

    /// The deadline as a reached budget.
    fn past_deadline(&self) -> Reached {
        Reached {
            budget: BudgetName::DeadlineMs,
            limit: self.start().snapshot.limits.deadline_ms.get(),
            reached: u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX),
        }
    }

    /// The recovery notice (after an interruption), the failed setup's note and the prompt.
    fn record_prompt(&self, transcript: &mut Transcript) -> Result<(), ErrorBody> {
        let start = self.start();
        if let Some(notice) = &start.recovery_notice {
            let entry = self.entry(EntryType::RecoveryNotice, "user", Some(notice.clone()));
            transcript.append(entry).map_err(transcript_error)?;
        }
        if let Some(note) = &self.ctx.setup_note {
            let entry = self.entry(EntryType::SetupNotice, "user", Some(note.clone()));
            transcript.append(entry).map_err(transcript_error)?;
        }
        let prompt = self.entry(EntryType::Prompt, "user", Some(start.prompt.to_string()));
        transcript.append(prompt).map_err(transcript_error)?;
        Ok(())
    }

    /// Steers that arrived since the last turn, in order, each confirmed as applied.
    fn apply_steers(&self, transcript: &mut Transcript) -> Result<(), ErrorBody> {
        for steer in self.ctx.steers.take() {
            let mut entry = self.entry(EntryType::Steer, "user", Some(steer.message.clone()));
            entry.steer_id = Some(steer.steer_id.to_string());
            transcript.append(entry).map_err(transcript_error)?;
            emit::event(
                &self.start().run_id,
                WorkerEvent::SteerApplied {
                    steer_id: steer.steer_id,
                    request_id: steer.request_id,
                },
            );
        }
        Ok(())
    }

    /// `maxTurns`, when `turns` turns have been taken.
    fn turns_reached(&self, turns: u32) -> Option<Reached> {
        let max = self.start().snapshot.limits.max_turns.get();
        (u64::from(turns) >= max).then(|| Reached {
            budget: BudgetName::MaxTurns,
            limit: max,
            reached: u64::from(turns),
        })
    }

    fn turn_started(&self, turn: u32) {
        lock_progress(&self.ctx.progress).usage.turns = turn;
        if let Some(turn) = std::num::NonZeroU64::new(u64::from(turn)) {
            emit::event(&self.start().run_id, WorkerEvent::TurnStarted { turn });
        }
    }

    /// Asks the model for the next answer, its text streamed as events; `None` when the
    /// run's deadline came first. The answer's tokens are counted.
    ///
    /// Before a request that would pass [`crate::context::COMPACT_AT_PERCENT`] of a known
    /// window, and once after the endpoint refused a prompt as too long, the transcript is
    /// compacted first ([`Run::fit`]); a refusal after that is `context_exhausted`.
    async fn ask(&self, transcript: &mut Transcript) -> Result<Option<ModelTurn>, ErrorBody> {
        let projected = self.compactor().projected(transcript);
        if self
            .meter
            .threshold()
            .is_some_and(|limit| projected > limit)
        {
            self.fit(transcript, projected, None).await?;
        }
        match self.request(transcript).await? {
            Asked::Refused(err, prompt) => {
                self.fit(transcript, prompt, Some(&err)).await?;
                match self.request(transcript).await? {
                    Asked::Refused(err, prompt) => {
                        Err(exhausted(Some(&err), "", &self.meter, prompt))
                    }
                    Asked::Answer(answer) => Ok(answer),
                }
            }
            Asked::Answer(answer) => Ok(answer),
        }
    }

    /// The compaction of this run's transcript.
    fn compactor(&self) -> Compactor<'_> {
        Compactor {
            client: &self.client,
            start: self.start(),
            system: &self.system,
            declared: &self.declared,
            meter: &self.meter,
            progress: &self.ctx.progress,
            deadline: self.ctx.deadline,
        }
    }

    /// Compacts the transcript, whose next request takes `prompt` tokens (or was refused
    /// as too long, `refused`): `context_exhausted` when the child was spawned with
    /// `compaction: "off"`, or when there is nothing earlier to summarise.
    async fn fit(
        &self,
        transcript: &mut Transcript,
        prompt: u64,
        refused: Option<&ModelError>,
    ) -> Result<(), ErrorBody> {
        if self.start().snapshot.compaction == Some(Compaction::Off) {
            let why = format!(
                "the next request takes about {prompt} prompt tokens, past {}% of the context window, and this child was spawned with compaction: \"off\"",
                crate::context::COMPACT_AT_PERCENT
            );
            return Err(exhausted(refused, &why, &self.meter, prompt));
        }
        match self.compactor().compact(transcript, prompt).await? {
            Some(_) => Ok(()),
            None if refused.is_none() => Ok(()),
            None => Err(exhausted(refused, "", &self.meter, prompt)),
        }
    }

    /// One request for the next answer, its text streamed as events: the answer (`None`
    /// when the run's deadline came first), or the endpoint's refusal of the prompt as too
    /// long with its projected size. The answer's tokens are counted.
    async fn request(&self, transcript: &Transcript) -> Result<Asked, ErrorBody> {
        let limits = &self.start().snapshot.limits;
        let conversation = conversation(&self.system, transcript);
        let request = Request {
            conversation: &conversation,
            tools: &self.declared,
            tool_choice: ToolChoice::Auto,
            max_output_tokens: u32::try_from(limits.max_output_tokens.get()).unwrap_or(u32::MAX),
            max_text_bytes: None,
        };
        let prompt = self.meter.project(self.client.body_bytes(&request));
        let mut text_events = TextEvents::new(&self.start().run_id, self.ctx.progress.clone());
        let result = tokio::time::timeout_at(
            self.ctx.deadline,
            self.client
                .complete(request, &mut |delta| text_events.push(delta)),
        )
        .await;
        text_events.finish();
        let Ok(result) = result else {
            return Ok(Asked::Answer(None));
        };
        let answer = match result {
            Ok(answer) => answer,
            Err(err @ ModelError::ContextExhausted { .. }) => {
                lock_progress(&self.ctx.progress).usage.context_tokens = Some(prompt);
                return Ok(Asked::Refused(err, prompt));
            }
            Err(err) => {
                if let ModelError::TooLarge { max } = &err {
                    // The partial result keeps the text up to the cap and says so.
                    lock_progress(&self.ctx.progress).text.push_str(&format!(
                        "\n[cut: the model response passed {max} bytes (model_response_bytes)]"
                    ));
                }
                return Err(model_failed(&err));
            }
        };
        self.meter.record(&answer);
        let mut progress = lock_progress(&self.ctx.progress);
        progress.usage.add(TurnTokens::of(&answer));
        progress.usage.context_tokens = Some(TurnTokens::of(&answer).input);
        progress.text.clone_from(&answer.text);
        Ok(Asked::Answer(Some(answer)))
    }

    /// Records `answer` and acts on it: the run completes with a final answer (when no
    /// steer waits), hands off past its token budget, or runs the answer's tool calls.
    async fn after_answer(
        &self,
        transcript: &mut Transcript,
        answer: ModelTurn,
    ) -> Result<Next, ErrorBody> {
        self.record_answer(transcript, &answer)?;
        // Cut at maxOutputTokens: a text answer is kept (and marked when it ends the run);
        // a call cut mid-arguments is answered with a tool error (`calls`).
        let limits = &self.start().snapshot.limits;
        let cut_at = (answer.finish_reason.as_deref() == Some("length"))
            .then(|| limits.max_output_tokens.get());
        let final_answer = answer.tool_calls.is_empty();
        if final_answer && self.ctx.steers.close_if_empty() {
            let (leaf_id, digest) = transcript.commit().map_err(transcript_error)?;
            return Ok(Next::Done(Completed {
                result: redact(&answer.text),
                leaf_id,
                digest,
                budget: None,
                cut: cut_at,
            }));
        }
        // The run would go on (tools to run, or a steer to answer): not past its tokens.
        if let Some(reached) = self.tokens_reached() {
            answer_unrun(transcript, self.start(), &answer.tool_calls, &reached)?;
            return Ok(Next::Handoff(reached));
        }
        if final_answer {
            return Ok(Next::Turn);
        }
        let past_deadline = || self.past_deadline();
        let round = calls::Turn {
            granted: &self.granted,
            cut_at,
            past_deadline: &past_deadline,
        };
        let reached = calls::run_all(self.ctx, transcript, &answer.tool_calls, &round).await?;
        Ok(reached.map_or(Next::Turn, Next::Handoff))
    }

    /// The answer as an assistant entry: its text, its calls and its tokens.
    fn record_answer(
        &self,
        transcript: &mut Transcript,
        answer: &ModelTurn,
    ) -> Result<(), ErrorBody> {
        let tokens = TurnTokens::of(answer);
        let text = (!answer.text.is_empty()).then(|| answer.text.clone());
        let mut entry = self.entry(EntryType::Assistant, "assistant", text);
        entry.usage = Some(EntryUsage {
            input_tokens: tokens.input,
            output_tokens: tokens.output,
        });
        entry.tool_calls = answer
            .tool_calls
            .iter()
            .map(|c| ToolCallRecord {
                id: c.id.clone(),
                name: c.name.clone(),
                arguments: c.arguments.clone(),
            })
            .collect();
        transcript.append(entry).map_err(transcript_error)?;
        Ok(())
    }

    /// `tokenBudget`, when the run's tokens reached it.
    fn tokens_reached(&self) -> Option<Reached> {
        let budget = self.start().snapshot.limits.token_budget?.get();
        let used = lock_progress(&self.ctx.progress).usage.tokens();
        (used >= budget).then_some(Reached {
            budget: BudgetName::TokenBudget,
            limit: budget,
            reached: used,
        })
    }

    /// The run reached `reached` after `turns` turns: ask for the summary without tools
    /// (bounded by [`HANDOFF_MAX_OUTPUT_TOKENS`], [`HANDOFF_TIMEOUT`] and
    /// [`HANDOFF_MAX_BYTES`], where the stream stops being read), commit the transcript and
    /// end `budget_exhausted` with the summary — or, when none came, with the worker's note
    /// saying why — as the result.
    async fn handoff(
        &self,
        mut transcript: Transcript,
        turns: u32,
        reached: Reached,
    ) -> Result<Completed, ErrorBody> {
        let start = self.start();
        tracing::info!(run_id = %start.run_id.as_str(), budget = %reached.budget, limit = reached.limit, reached = reached.reached, "budget reached; asking for a handoff summary");
        let last_text = lock_progress(&self.ctx.progress).text.clone();
        let notice = self.entry(EntryType::BudgetNotice, "user", Some(reached.notice()));
        transcript.append(notice).map_err(transcript_error)?;
        self.turn_started(turns.saturating_add(1));
        let answered = self.ask_summary(&transcript).await;
        let summary = match answered {
            Ok(Ok(answer)) if !answer.text.trim().is_empty() => {
                // Only the text is kept (a tool call here was forbidden and is dropped), and
                // no more of it than the byte cap.
                let summary = cut_summary(answer.text.clone(), answer.text_capped);
                let answer = ModelTurn {
                    text: summary.clone(),
                    tool_calls: Vec::new(),
                    ..answer
                };
                self.record_answer(&mut transcript, &answer)?;
                summary
            }
            Ok(Ok(_)) => reached.fallback("the child answered with no text", &last_text),
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

    /// The summary request: no tool may be called; its answer's tokens are counted.
    async fn ask_summary(
        &self,
        transcript: &Transcript,
    ) -> Result<Result<ModelTurn, ModelError>, tokio::time::error::Elapsed> {
        let start = self.start();
        let conversation = conversation(&self.system, transcript);
        let max_output_tokens = u32::try_from(start.snapshot.limits.max_output_tokens.get())
            .unwrap_or(u32::MAX)
            .min(HANDOFF_MAX_OUTPUT_TOKENS);
        let request = Request {
            conversation: &conversation,
            tools: &self.declared,
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
        if let Ok(Ok(answer)) = &answered {
            lock_progress(&self.ctx.progress)
                .usage
                .add(TurnTokens::of(answer));
        }
        answered
    }
}
