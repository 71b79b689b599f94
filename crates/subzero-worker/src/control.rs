//! Worker control protocol (broker ⇄ `subzero worker`), one JSON object per line.
//!
//! These types follow `docs/protocol.md` ("Worker control protocol"). They live in this one
//! module so they can be swapped for the generated `subzero-protocol` types at integration.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Version of the control protocol spoken by this worker.
pub const CONTROL_VERSION: u32 = 1;

/// A line read from the worker's stdin.
#[derive(Debug, Clone, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Inbound {
    StartRun(Box<StartRun>),
    Steer(Steer),
    Cancel(Cancel),
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StartRun {
    /// Required by the schema; used only for log context here.
    #[serde(default)]
    pub child_id: Option<String>,
    pub run_id: String,
    pub prompt: String,
    pub model: ModelSpec,
    pub snapshot: GrantSnapshot,
    pub workspace_root: String,
    pub transcript_path: String,
    #[serde(default)]
    pub from_leaf: Option<String>,
    #[serde(default)]
    pub expected_digest: Option<String>,
    #[serde(default)]
    pub recovery_notice: Option<String>,
    #[serde(default)]
    pub secrets: Vec<String>,
}

/// The model endpoint; `key` appears only in `start_run`.
#[derive(Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ModelSpec {
    pub url: String,
    pub model: String,
    #[serde(default = "default_api")]
    pub api: String,
    pub key: String,
}

impl std::fmt::Debug for ModelSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModelSpec")
            .field("url", &self.url)
            .field("model", &self.model)
            .field("api", &self.api)
            .field("key", &"<redacted>")
            .finish()
    }
}

fn default_api() -> String {
    "openai-completions".to_owned()
}

/// The frozen grant snapshot of a child (`GrantSnapshot` in the protocol).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GrantSnapshot {
    #[serde(default)]
    pub template_id: String,
    #[serde(default)]
    pub description: String,
    #[serde(default)]
    pub instructions: String,
    #[serde(default)]
    pub tools: Vec<String>,
    #[serde(default)]
    pub skills: Vec<Skill>,
    #[serde(default)]
    pub mcp_servers: Vec<McpServer>,
    #[serde(default)]
    pub write_capable: bool,
    #[serde(default)]
    pub limits: RunLimits,
    #[serde(default)]
    pub digest: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Skill {
    pub name: String,
    pub content: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct McpServer {
    pub name: String,
    pub command: String,
    #[serde(default)]
    pub args: Vec<String>,
    #[serde(default)]
    pub env_refs: std::collections::BTreeMap<String, String>,
    #[serde(default)]
    pub allowed_tools: Vec<String>,
}

/// Per-run limits; absent fields take the protocol defaults.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct RunLimits {
    pub max_turns: u32,
    pub deadline_ms: u64,
    pub tool_timeout_ms: u64,
    pub max_output_tokens: u32,
    pub token_budget: Option<u64>,
}

impl Default for RunLimits {
    fn default() -> Self {
        Self {
            max_turns: 48,
            deadline_ms: 1_800_000,
            tool_timeout_ms: 180_000,
            max_output_tokens: 8192,
            token_budget: None,
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Steer {
    pub run_id: String,
    pub steer_id: String,
    #[serde(default)]
    pub request_id: Option<String>,
    pub message: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Cancel {
    pub run_id: String,
}

/// A line written to the worker's stdout.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Outbound {
    #[serde(rename_all = "camelCase")]
    Hello {
        name: String,
        version: String,
        transcript_version: u32,
        control_version: u32,
        protocols: Vec<String>,
        steering: bool,
    },
    #[serde(rename_all = "camelCase")]
    Event { run_id: String, event: WorkerEvent },
    #[serde(rename_all = "camelCase")]
    LeafCommitted {
        run_id: String,
        leaf_id: String,
        digest: String,
    },
    #[serde(rename_all = "camelCase")]
    RunSettled {
        run_id: String,
        status: RunStatus,
        result: Option<String>,
        error: Option<ErrorBody>,
        usage: Usage,
    },
    #[serde(rename_all = "camelCase")]
    CancelConfirmed { run_id: String, reaped: u32 },
}

#[derive(Debug, Clone, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum WorkerEvent {
    TurnStarted {
        turn: u32,
    },
    Text {
        text: String,
    },
    Tool {
        name: String,
        state: ToolState,
    },
    #[serde(rename_all = "camelCase")]
    SteerApplied {
        steer_id: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        request_id: Option<String>,
    },
    #[serde(rename_all = "camelCase")]
    SteerDiscarded {
        steer_id: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        request_id: Option<String>,
        reason: DiscardReason,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolState {
    Started,
    Finished,
    Failed,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DiscardReason {
    Stopped,
    Failed,
    Limit,
    Interrupted,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    Completed,
    Failed,
    Stopped,
}

#[derive(Debug, Clone, Serialize)]
pub struct ErrorBody {
    pub code: String,
    pub message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub details: Option<Value>,
}

impl ErrorBody {
    pub fn new(code: &str, message: impl Into<String>) -> Self {
        Self {
            code: code.to_owned(),
            message: message.into(),
            details: None,
        }
    }

    pub fn with_details(mut self, details: Value) -> Self {
        self.details = Some(details);
        self
    }
}

#[derive(Debug, Clone, Copy, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub turns: u32,
}
