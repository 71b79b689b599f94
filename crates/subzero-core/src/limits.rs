//! Policy limits with the seed's defaults, and the checks that enforce them.
//!
//! These are policy limits, not transport maxima: every check returns a typed
//! [`LimitExceeded`] (`limit_exceeded`) that names the limit, its value and what was
//! asked, so nothing is ever silently truncated.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::error_code::{Coded, Described, ErrorCode};

/// The name of one policy limit, spelled as in the configuration file.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LimitName {
    /// Active worker processes per workspace.
    ActiveWorkersPerWorkspace,
    /// Write-capable runs per workspace, across brokers.
    WriteRunsPerWorkspace,
    /// UTF-8 bytes of a prompt or message.
    PromptBytes,
    /// UTF-8 bytes of template instructions.
    InstructionsBytes,
    /// Tools granted to one child (built-in plus MCP tools).
    GrantedTools,
    /// Serialized bytes of one event payload.
    EventPayloadBytes,
    /// Milliseconds a `get` may wait.
    GetWaitMs,
    /// Bytes of one `subzero_output` chunk.
    OutputChunkBytes,
    /// Events retained per child.
    EventRetention,
    /// Follow-up runs queued behind the active run of one child.
    QueuedFollowups,
    /// Bytes of one model response body as the worker receives it.
    ModelResponseBytes,
    /// Bytes of one tool call's arguments from the model.
    ToolArgumentBytes,
    /// Milliseconds a model endpoint may stay silent.
    ModelIdleTimeoutMs,
    /// A spawn's `budget.maxTurns` (maximum: `[budgets.max] max_turns`).
    MaxTurns,
    /// A spawn's `budget.deadlineMs`.
    DeadlineMs,
    /// A spawn's `budget.toolTimeoutMs`.
    ToolTimeoutMs,
    /// A spawn's `budget.maxOutputTokens`.
    MaxOutputTokens,
    /// A spawn's `budget.tokenBudget`.
    TokenBudget,
}

impl LimitName {
    /// The configuration-file spelling.
    pub const fn as_str(self) -> &'static str {
        match self {
            LimitName::ActiveWorkersPerWorkspace => "active_workers_per_workspace",
            LimitName::WriteRunsPerWorkspace => "write_runs_per_workspace",
            LimitName::PromptBytes => "prompt_bytes",
            LimitName::InstructionsBytes => "instructions_bytes",
            LimitName::GrantedTools => "granted_tools",
            LimitName::EventPayloadBytes => "event_payload_bytes",
            LimitName::GetWaitMs => "get_wait_ms",
            LimitName::OutputChunkBytes => "output_chunk_bytes",
            LimitName::EventRetention => "event_retention",
            LimitName::QueuedFollowups => "queued_followups",
            LimitName::ModelResponseBytes => "model_response_bytes",
            LimitName::ToolArgumentBytes => "tool_argument_bytes",
            LimitName::ModelIdleTimeoutMs => "model_idle_timeout_ms",
            LimitName::MaxTurns => "max_turns",
            LimitName::DeadlineMs => "deadline_ms",
            LimitName::ToolTimeoutMs => "tool_timeout_ms",
            LimitName::MaxOutputTokens => "max_output_tokens",
            LimitName::TokenBudget => "token_budget",
        }
    }

    /// What the caller can do about it; part of every message.
    const fn advice(self) -> &'static str {
        match self {
            LimitName::ActiveWorkersPerWorkspace | LimitName::WriteRunsPerWorkspace => {
                "wait for a running child to settle or stop one, then retry"
            }
            LimitName::PromptBytes | LimitName::InstructionsBytes => {
                "shorten the text or put the bulk in a workspace file and reference it"
            }
            LimitName::GrantedTools => "grant fewer tools",
            LimitName::EventPayloadBytes => "store the payload as an artifact and reference it",
            LimitName::GetWaitMs => "pass a smaller waitMs and poll again",
            LimitName::OutputChunkBytes => "read the artifact in smaller chunks",
            LimitName::EventRetention => "lower the retention",
            LimitName::QueuedFollowups => {
                "wait for the queued runs to start (poll get()) or stop the active run"
            }
            LimitName::ModelResponseBytes | LimitName::ToolArgumentBytes => {
                "ask for a shorter answer, or raise the limit in [limits] of the config"
            }
            LimitName::ModelIdleTimeoutMs => {
                "check the endpoint, or raise the limit in [limits] of the config"
            }
            LimitName::MaxTurns
            | LimitName::DeadlineMs
            | LimitName::ToolTimeoutMs
            | LimitName::MaxOutputTokens
            | LimitName::TokenBudget => {
                "ask for a smaller budget (subzero_info shows the maxima), or raise it in [budgets.max] of the config"
            }
        }
    }
}

impl fmt::Display for LimitName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A policy limit was hit; nothing happened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LimitExceeded {
    /// Which limit.
    pub limit: LimitName,
    /// The limit's value.
    pub max: u64,
    /// What was asked (a size, or the count it would have become).
    pub actual: u64,
    /// A short noun for the thing measured, e.g. "prompt (bytes)".
    pub what: &'static str,
}

impl Coded for LimitExceeded {
    fn code(&self) -> ErrorCode {
        ErrorCode::LimitExceeded
    }
}

impl Described for LimitExceeded {
    fn describe(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let LimitExceeded {
            limit,
            max,
            actual,
            what,
        } = self;
        let advice = limit.advice();
        write!(
            f,
            "{what} is {actual}, over the {limit} limit of {max}; {advice}"
        )
    }
}

crate::coded_display!(LimitExceeded);

impl std::error::Error for LimitExceeded {}

/// The policy limits in force. `Default` is the seed's initial policy.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Limits {
    /// Active worker processes per workspace (seed: 4). Not checked here: the runtime's
    /// kernel-held slots count live workers across brokers (`workspace_busy`).
    pub active_workers_per_workspace: u32,
    /// Write-capable runs per workspace across brokers (seed: 1); held like the worker
    /// slots.
    pub write_runs_per_workspace: u32,
    /// UTF-8 bytes of a prompt or message (seed: 64 KiB).
    pub prompt_bytes: u32,
    /// UTF-8 bytes of template instructions (seed: 64 KiB).
    pub instructions_bytes: u32,
    /// Granted tools per child (seed: 64).
    pub granted_tools: u32,
    /// Bytes per event payload (seed: 8 KiB); larger output goes to artifacts.
    pub event_payload_bytes: u32,
    /// Longest `get` wait in milliseconds (30 s): a protocol bound (`waitMs` maximum,
    /// `invalid_request`), reported here, not a policy check.
    pub get_wait_ms: u32,
    /// Largest `subzero_output` chunk in bytes (64 KiB): a protocol bound (`length`
    /// maximum, `invalid_request`), reported here, not a policy check.
    pub output_chunk_bytes: u32,
    /// Events retained per child (1000).
    pub event_retention: u32,
    /// Follow-ups queued behind one child's active run (16).
    pub queued_followups: u32,
    /// Bytes of one model response body as the worker receives it (8 MiB).
    pub model_response_bytes: u32,
    /// Bytes of one tool call's arguments (1 MiB); larger calls get a short tool error.
    pub tool_argument_bytes: u32,
    /// Longest silence of a model endpoint, before the headers and between chunks (180 s).
    pub model_idle_timeout_ms: u32,
}

impl Default for Limits {
    fn default() -> Self {
        Self::SEED
    }
}

impl Limits {
    /// The seed's initial policy.
    pub const SEED: Limits = Limits {
        active_workers_per_workspace: 4,
        write_runs_per_workspace: 1,
        prompt_bytes: 64 * 1024,
        instructions_bytes: 64 * 1024,
        granted_tools: 64,
        event_payload_bytes: 8 * 1024,
        get_wait_ms: 30_000,
        output_chunk_bytes: 64 * 1024,
        event_retention: 1000,
        queued_followups: 16,
        model_response_bytes: 8 * 1024 * 1024,
        tool_argument_bytes: 1024 * 1024,
        model_idle_timeout_ms: 180_000,
    };

    /// A prompt or message fits `prompt_bytes` (UTF-8 bytes, not characters).
    pub fn check_prompt(&self, text: &str) -> Result<(), LimitExceeded> {
        check(
            LimitName::PromptBytes,
            self.prompt_bytes,
            text.len(),
            "prompt (bytes)",
        )
    }

    /// Template instructions fit `instructions_bytes`.
    pub fn check_instructions(&self, text: &str) -> Result<(), LimitExceeded> {
        check(
            LimitName::InstructionsBytes,
            self.instructions_bytes,
            text.len(),
            "instructions (bytes)",
        )
    }

    /// A grant of `count` tools fits `granted_tools`.
    pub fn check_granted_tools(&self, count: usize) -> Result<(), LimitExceeded> {
        check(
            LimitName::GrantedTools,
            self.granted_tools,
            count,
            "granted tools",
        )
    }

    /// One serialized event payload of `bytes` fits `event_payload_bytes`.
    pub fn check_event_payload(&self, bytes: usize) -> Result<(), LimitExceeded> {
        check(
            LimitName::EventPayloadBytes,
            self.event_payload_bytes,
            bytes,
            "event payload (bytes)",
        )
    }

    /// One more follow-up fits behind `queued` already queued runs.
    pub fn check_queue(&self, queued: usize) -> Result<(), LimitExceeded> {
        check(
            LimitName::QueuedFollowups,
            self.queued_followups,
            queued.saturating_add(1),
            "queued follow-ups (with this one)",
        )
    }
}

fn check(
    limit: LimitName,
    max: u32,
    actual: usize,
    what: &'static str,
) -> Result<(), LimitExceeded> {
    check_u64(limit, max, u64::try_from(actual).unwrap_or(u64::MAX), what)
}

fn check_u64(
    limit: LimitName,
    max: u32,
    actual: u64,
    what: &'static str,
) -> Result<(), LimitExceeded> {
    if actual <= u64::from(max) {
        Ok(())
    } else {
        Err(LimitExceeded {
            limit,
            max: u64::from(max),
            actual,
            what,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seed_defaults_match_the_spec() {
        let l = Limits::default();
        assert_eq!(l.active_workers_per_workspace, 4);
        assert_eq!(l.write_runs_per_workspace, 1);
        assert_eq!(l.prompt_bytes, 65_536);
        assert_eq!(l.instructions_bytes, 65_536);
        assert_eq!(l.granted_tools, 64);
        assert_eq!(l.event_payload_bytes, 8_192);
        assert_eq!(l.get_wait_ms, 30_000);
        assert_eq!(l.output_chunk_bytes, 65_536);
        assert_eq!(l.event_retention, 1000);
    }

    #[test]
    fn a_prompt_over_the_limit_is_limit_exceeded_naming_the_limit() {
        let l = Limits::default();
        assert!(l.check_prompt(&"é".repeat(32 * 1024)).is_ok());
        let err = l.check_prompt(&"é".repeat(32 * 1024 + 1)).unwrap_err();
        assert_eq!(err.code(), ErrorCode::LimitExceeded);
        assert_eq!(err.limit, LimitName::PromptBytes);
        let text = err.to_string();
        assert!(
            text.starts_with("limit_exceeded: prompt (bytes) is 65538"),
            "{text}"
        );
        assert!(text.contains("prompt_bytes"), "{text}");
    }

    #[test]
    fn a_check_counts_the_new_one() {
        let l = Limits::default();
        assert!(l.check_queue(15).is_ok());
        assert!(l.check_queue(16).is_err());
        assert!(l.check_event_payload(8_192).is_ok());
        assert!(l.check_event_payload(8_193).is_err());
        assert!(l.check_granted_tools(64).is_ok());
        assert!(l.check_granted_tools(65).is_err());
    }
}
