//! Worker control protocol (broker ⇄ `subzero-worker worker`), one JSON object per line.
//!
//! The wire types are the generated `subzero-protocol` types: a line read from stdin is a
//! [`BrokerMessage`] checked with [`Validate`]; every line written is a [`WorkerMessage`].
//! This module is the thin I/O layer between those and the worker: it unpacks the broker's
//! messages into the shapes the worker keeps ([`StartRun`], [`Steer`]) and builds wire values
//! (errors, usage) from what the worker produces.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::containment::{Refused, wire};
use crate::model::StreamBounds;
pub use subzero_protocol::{
    BrokerMessage, BudgetName, BudgetReached, ChildId, Compaction, Digest, ErrorBody, ErrorCode,
    ErrorMessage, EventText, GrantSnapshot, InvalidRequest, LeafId, ModelApi, PromptText,
    RequestId, RunCut, RunCutLimit, RunId, RunSettledStatus as RunStatus,
    SteerDiscardReason as DiscardReason, SteerId, ToolName, ToolState, Validate, WorkerEvent,
    WorkerMessage as Outbound, WorkerModel,
};

/// Version of the control protocol spoken by this worker.
pub const CONTROL_VERSION: u64 = 1;
/// Longest error message the contract allows (characters).
const ERROR_MESSAGE_MAX: usize = 4096;

/// A line read from the worker's stdin, unpacked.
#[derive(Debug, Clone)]
pub enum Inbound {
    StartRun(Box<StartRun>),
    Steer(Steer),
    Cancel(Cancel),
}

/// The fields of a `start_run`.
#[derive(Clone)]
pub struct StartRun {
    pub child_id: ChildId,
    pub run_id: RunId,
    pub prompt: PromptText,
    pub model: WorkerModel,
    pub snapshot: GrantSnapshot,
    pub workspace_root: String,
    pub transcript_path: String,
    pub from_leaf: Option<String>,
    pub expected_digest: Option<String>,
    pub recovery_notice: Option<String>,
    pub secrets: Vec<String>,
    /// Values of the snapshot's `env:VAR` references, keyed by reference; redacted like the key.
    pub mcp_env: std::collections::BTreeMap<String, String>,
    /// What one model response may cost (`streamLimits`, else the defaults).
    pub stream_bounds: StreamBounds,
    /// The parent asked for compaction before the run's first request.
    pub compact: Option<bool>,
    /// The snapshot's setup command, when this run is the first in its checkout: it runs
    /// before the run's first request.
    pub setup: Option<String>,
}

impl std::fmt::Debug for StartRun {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the key, the prompt or the secrets.
        f.debug_struct("StartRun")
            .field("child_id", &self.child_id)
            .field("run_id", &self.run_id)
            .field("model", &self.model.model)
            .field("template", &self.snapshot.template_id)
            .finish_non_exhaustive()
    }
}

impl StartRun {
    /// The granted built-in tool names.
    pub fn granted_tools(&self) -> Vec<String> {
        self.snapshot
            .tools
            .iter()
            .map(ToString::to_string)
            .collect()
    }
}

/// The fields of a `steer`.
#[derive(Debug, Clone)]
pub struct Steer {
    pub run_id: RunId,
    pub steer_id: SteerId,
    pub request_id: Option<RequestId>,
    pub message: String,
}

/// The fields of a `cancel`.
#[derive(Debug, Clone)]
pub struct Cancel {
    pub run_id: RunId,
}

/// Why a control line was not accepted.
#[derive(Debug)]
pub enum LineError {
    /// Not a broker message at all (the serde error says where, never what).
    Malformed(serde_json::Error),
    /// A broker message that breaks a bound of the contract.
    Invalid(InvalidRequest),
}

/// Reads one control line: a [`BrokerMessage`] that passes [`Validate`].
pub fn parse_line(line: &str) -> Result<Inbound, LineError> {
    let message: BrokerMessage = serde_json::from_str(line).map_err(LineError::Malformed)?;
    message.validate().map_err(LineError::Invalid)?;
    Ok(match message {
        BrokerMessage::StartRun {
            child_id,
            compact,
            expected_digest,
            from_leaf,
            mcp_env,
            model,
            prompt,
            recovery_notice,
            run_id,
            secrets,
            setup,
            snapshot,
            stream_limits,
            transcript_path,
            workspace_root,
        } => Inbound::StartRun(Box::new(StartRun {
            setup: setup
                .unwrap_or(false)
                .then(|| snapshot.setup.as_ref().map(|s| s.to_string()))
                .flatten(),
            child_id,
            run_id,
            prompt,
            model,
            snapshot,
            workspace_root: workspace_root.to_string(),
            transcript_path: transcript_path.to_string(),
            from_leaf: from_leaf.map(String::from),
            expected_digest: expected_digest.map(String::from),
            recovery_notice: recovery_notice.map(String::from),
            secrets: secrets.0.iter().map(|s| s.expose().to_owned()).collect(),
            mcp_env: mcp_env
                .into_iter()
                .map(|(k, v)| (k, v.expose().to_owned()))
                .collect(),
            stream_bounds: stream_limits.map_or(StreamBounds::DEFAULT, |l| StreamBounds {
                max_response_bytes: l.max_response_bytes.get(),
                max_tool_argument_bytes: l.max_tool_argument_bytes.get(),
                idle: std::time::Duration::from_millis(l.idle_timeout_ms.get()),
            }),
            compact,
        })),
        BrokerMessage::Steer {
            message,
            request_id,
            run_id,
            steer_id,
        } => Inbound::Steer(Steer {
            run_id,
            steer_id,
            request_id,
            message: message.to_string(),
        }),
        BrokerMessage::Cancel { run_id } => Inbound::Cancel(Cancel { run_id }),
    })
}

/// Builds wire error bodies from the worker's messages.
pub trait ErrorBodyExt {
    /// An error with `code`; the message is cut to the contract's 4096 characters.
    fn new(code: ErrorCode, message: impl Into<String>) -> Self;
    /// Adds the members of `details` (an object; anything else is ignored).
    fn with_details(self, details: Value) -> Self;
}

impl ErrorBodyExt for ErrorBody {
    fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        let mut message: String = message.into();
        if let Some((cut, _)) = message.char_indices().nth(ERROR_MESSAGE_MAX) {
            message.truncate(cut);
        }
        if message.is_empty() {
            message = code.to_string();
        }
        let message = ErrorMessage::try_from(message)
            .or_else(|_| ErrorMessage::try_from(code.to_string()))
            .or_else(|_| ErrorMessage::try_from("error"));
        ErrorBody {
            code,
            details: serde_json::Map::new(),
            message: match message {
                Ok(m) => m,
                // 1..4096 characters always converts; keep a total function anyway.
                Err(_) => return internal_fallback(code),
            },
        }
    }

    fn with_details(mut self, details: Value) -> Self {
        if let Value::Object(map) = details {
            self.details.extend(map);
        }
        self
    }
}

fn internal_fallback(code: ErrorCode) -> ErrorBody {
    let message = serde_json::from_value(Value::String("error".to_owned()));
    ErrorBody {
        code,
        details: serde_json::Map::new(),
        message: message.unwrap_or_else(|_| unreachable!("`error` is a valid message")),
    }
}

/// Token and turn counts of a run, as the worker accumulates them (`crate::usage`).
#[derive(Debug, Clone, Copy, Default)]
pub struct RunUsage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub turns: u32,
    /// A turn's stream reported no usage and its tokens were estimated.
    pub estimated: bool,
    /// Prompt tokens of the last request (after a compaction: of the compacted
    /// conversation), `crate::context`.
    pub context_tokens: Option<u64>,
}

impl From<RunUsage> for subzero_protocol::RunUsage {
    fn from(u: RunUsage) -> Self {
        subzero_protocol::RunUsage {
            input_tokens: u.input_tokens,
            output_tokens: u.output_tokens,
            source: if u.estimated {
                subzero_protocol::UsageSource::Estimated
            } else {
                subzero_protocol::UsageSource::Reported
            },
            turns: u64::from(u.turns),
            context_tokens: u.context_tokens,
        }
    }
}

/// For a `start_run` that did not parse: the error the broker should see. An `api` the worker
/// does not speak is `worker_incompatible` and a tool name it does not know is
/// `unsupported_grant` (the schema makes both parse errors); anything else is
/// `invalid_request`, located by line and column only (the line may hold a key).
pub fn start_run_rejection(
    raw: &Value,
    protocols: &[&str],
    tools: &[&str],
    err: &str,
) -> ErrorBody {
    let api = raw
        .pointer("/model/api")
        .and_then(Value::as_str)
        .unwrap_or("openai-completions");
    if !protocols.contains(&api) {
        return ErrorBody::new(
            ErrorCode::WorkerIncompatible,
            format!(
                "worker_incompatible: this worker speaks {protocols:?}, not {api:?}; pick a supported api"
            ),
        );
    }
    let unknown = raw
        .pointer("/snapshot/tools")
        .and_then(Value::as_array)
        .and_then(|t| {
            t.iter()
                .filter_map(Value::as_str)
                .find(|name| !tools.contains(name))
        });
    if let Some(unknown) = unknown {
        return ErrorBody::new(
            ErrorCode::UnsupportedGrant,
            format!("unsupported_grant: this worker has no tool named {unknown:?}"),
        );
    }
    ErrorBody::new(
        ErrorCode::InvalidRequest,
        format!("invalid_request: start_run is malformed: {err}"),
    )
}

/// The first line: who this worker is, what it speaks, and which containment the kernel
/// gave it (`containment`, built by [`crate::containment::support`]).
pub fn hello(
    version: &str,
    transcript_version: u32,
    protocols: &[&str],
    containment: subzero_protocol::ContainmentSupport,
) -> Result<Outbound, Refused> {
    let positive = |n: u64, field: &str| {
        std::num::NonZeroU64::new(n).ok_or_else(|| Refused::new(field, "must be at least 1"))
    };
    let protocols = protocols
        .iter()
        .map(|api| wire::<ModelApi>(*api, "protocols"))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Outbound::Hello {
        capabilities: None,
        containment: Some(containment),
        control_version: positive(CONTROL_VERSION, "controlVersion")?,
        name: wire("subzero-worker", "name")?,
        protocols: subzero_protocol::HelloProtocols(protocols),
        steering: true,
        transcript_version: positive(u64::from(transcript_version), "transcriptVersion")?,
        version: wire(version, "version")?,
    })
}

/// `text` cut to the contract's `ShortText` (512 bytes) at a character boundary.
pub fn short_text(text: &str) -> String {
    const MAX: usize = 512;
    if text.len() <= MAX {
        return text.to_owned();
    }
    let mut end = MAX - 3;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &text[..end])
}

/// Parses a run id for a reply to a line that did not parse.
pub fn run_id_of(raw: &Value) -> Option<RunId> {
    raw.get("runId")
        .and_then(Value::as_str)
        .and_then(|r| RunId::try_from(r).ok())
}

/// `NAME → env:VAR` references of a server, as plain strings.
pub fn env_refs(refs: &BTreeMap<String, subzero_protocol::EnvRef>) -> BTreeMap<String, String> {
    refs.iter()
        .map(|(name, reference)| (name.clone(), reference.to_string()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const FIXTURE: &str = include_str!(
        "../../../fixtures/v1/control-broker-to-worker/valid/start-run-with-stream-limits.json"
    );

    /// Every secret of the fixture's `start_run`.
    const SECRETS: [&str; 3] = [
        "sk-test-not-a-real-key",
        "tok-extra-secret",
        "ghp-not-a-real-token",
    ];

    #[test]
    fn formatting_any_start_run_type_never_shows_a_secret() {
        let wire: BrokerMessage = serde_json::from_str(FIXTURE).expect("fixture parses");
        let model = match &wire {
            BrokerMessage::StartRun { model, .. } => model.clone(),
            other => panic!("not a start_run: {other:?}"),
        };
        let inbound = parse_line(&FIXTURE.replace('\n', " ")).expect("line parses");
        let Inbound::StartRun(start) = &inbound else {
            panic!("not a start_run");
        };
        let shown = [
            format!("{wire:?} {wire:#?}"),
            format!("{model:?} {model:#?}"),
            format!("{:?}", model.key),
            format!("{inbound:?} {inbound:#?}"),
            format!("{start:?}"),
        ];
        for text in &shown {
            for secret in SECRETS {
                assert!(!text.contains(secret), "{secret} shown in {text}");
            }
        }
        // The values are still there for the one place that uses them.
        assert_eq!(start.model.key.expose(), SECRETS[0]);
        assert_eq!(start.secrets, [SECRETS[1]]);
        assert_eq!(start.stream_bounds.max_tool_argument_bytes, 1024 * 1024);
    }
}
