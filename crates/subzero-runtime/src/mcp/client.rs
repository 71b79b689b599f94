//! The parent's side: an MCP client that starts `subzero mcp` and talks to it over stdio
//! (rmcp's client and child-process transport), as `subzero demo`, `subzero watch` (to stop
//! a run through a broker), the tests and the soak use it.
//!
//! Tool results are returned whole: whether it was a tool error, its structured content
//! (for a tool error, the error body its text carries) and its text, so callers can assert
//! on codes and measure what a parent would read.

use std::ffi::OsString;
use std::path::PathBuf;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CancelTaskParams, ClientCapabilities,
    ClientConfig, GetTaskParams, GetTaskResult, Implementation, Tool,
};
use rmcp::service::RunningService;
use rmcp::transport::{ConfigureCommandExt, TokioChildProcess};
use rmcp::{RoleClient, ServiceExt};
use serde_json::Value;

/// How to start `subzero mcp`.
#[derive(Debug, Clone)]
pub struct BrokerCommand {
    /// The `subzero` executable.
    pub exe: PathBuf,
    /// Workspace directory (`--workspace`).
    pub workspace: PathBuf,
    /// State directory (`--state-dir`).
    pub state_dir: PathBuf,
    /// Configuration file (`--config`).
    pub config: PathBuf,
    /// Extra environment (e.g. the variable a credential reference names).
    pub env: Vec<(OsString, OsString)>,
    /// Where the broker's stderr goes (a log file), or inherited when `None`.
    pub log_file: Option<PathBuf>,
}

/// The OS user to run a broker as, instead of the caller's (switching needs root). The
/// broker then has no supplementary groups.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunAs {
    /// The user id.
    pub uid: u32,
    /// The group id.
    pub gid: u32,
}

/// The outcome of one tool call.
#[derive(Debug, Clone)]
pub struct ToolReply {
    /// True for a tool error.
    pub is_error: bool,
    /// The typed output (the structured content); for a tool error, the error body
    /// `{code, message, details?}` read from its text, which is that body as compact JSON.
    pub structured: Value,
    /// Whether the result carried `structuredContent` at all (a tool error must not: the
    /// TypeScript SDK 1.x would validate it against the tool's output schema and throw).
    pub has_structured_content: bool,
    /// The text content, concatenated.
    pub text: String,
    /// Bytes a parent model would read: the text blocks.
    pub bytes: usize,
}

impl ToolReply {
    /// The error code of a tool error, if it is one.
    pub fn code(&self) -> Option<&str> {
        if self.is_error {
            self.structured.get("code").and_then(Value::as_str)
        } else {
            None
        }
    }
}

/// A connected MCP session with one broker process.
pub struct McpSession {
    service: RunningService<RoleClient, ClientConfig>,
    pid: Option<u32>,
}

impl std::fmt::Debug for McpSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpSession")
            .field("pid", &self.pid)
            .finish()
    }
}

/// Errors of the client helper.
pub type ClientError = Box<dyn std::error::Error + Send + Sync>;

impl McpSession {
    /// Start `subzero mcp` and complete the MCP handshake.
    pub async fn start(cmd: &BrokerCommand) -> Result<Self, ClientError> {
        McpSession::start_as(cmd, None).await
    }

    /// Start `subzero mcp` as `user` (when given) and complete the MCP handshake. The
    /// executable, workspace, state directory and config must be usable by that user.
    pub async fn start_as(cmd: &BrokerCommand, user: Option<RunAs>) -> Result<Self, ClientError> {
        McpSession::start_with(cmd, user, ClientConfig::default()).await
    }

    /// Start `subzero mcp` for a client that declares the MCP Tasks extension: a call
    /// that starts a run answers with a task ([`McpSession::call_once`]).
    pub async fn start_with_tasks(cmd: &BrokerCommand) -> Result<Self, ClientError> {
        let config = ClientConfig::new(
            ClientCapabilities::builder().enable_tasks().build(),
            Implementation::new("subzero-tasks-client", env!("CARGO_PKG_VERSION")),
        );
        McpSession::start_with(cmd, None, config).await
    }

    async fn start_with(
        cmd: &BrokerCommand,
        user: Option<RunAs>,
        config: ClientConfig,
    ) -> Result<Self, ClientError> {
        let stderr = match &cmd.log_file {
            Some(path) => std::process::Stdio::from(std::fs::File::create(path)?),
            None => std::process::Stdio::inherit(),
        };
        let command = tokio::process::Command::new(&cmd.exe).configure(|c| {
            c.arg("mcp")
                .arg("--workspace")
                .arg(&cmd.workspace)
                .arg("--state-dir")
                .arg(&cmd.state_dir)
                .arg("--config")
                .arg(&cmd.config);
            for (k, v) in &cmd.env {
                c.env(k, v);
            }
            if let Some(user) = user {
                c.gid(user.gid).uid(user.uid);
            }
        });
        let (transport, _) = TokioChildProcess::builder(command).stderr(stderr).spawn()?;
        let pid = transport.id();
        let service = config.serve(transport).await?;
        Ok(McpSession { service, pid })
    }

    /// The broker's process id.
    pub fn pid(&self) -> Option<u32> {
        self.pid
    }

    /// `tools/list`.
    pub async fn list_tools(&self) -> Result<Vec<Tool>, ClientError> {
        Ok(self.service.list_all_tools().await?)
    }

    /// `tools/call` with JSON arguments (an object).
    pub async fn call(&self, name: &str, arguments: Value) -> Result<ToolReply, ClientError> {
        let mut params = CallToolRequestParams::new(name.to_owned());
        if let Value::Object(map) = arguments {
            params = params.with_arguments(map);
        }
        let result: CallToolResult = self.service.call_tool(params).await?;
        let text: String = result
            .content
            .iter()
            .filter_map(|c| c.as_text().map(|t| t.text.clone()))
            .collect::<Vec<_>>()
            .join("\n");
        let is_error = result.is_error.unwrap_or(false);
        let has_structured_content = result.structured_content.is_some();
        let structured = match result.structured_content {
            Some(value) => value,
            None if is_error => serde_json::from_str(&text).unwrap_or(Value::Null),
            None => Value::Null,
        };
        Ok(ToolReply {
            is_error,
            structured,
            has_structured_content,
            bytes: text.len(),
            text,
        })
    }

    /// `tools/call` as it is answered: a result, or (to a client with the Tasks
    /// extension) a task.
    pub async fn call_once(
        &self,
        name: &str,
        arguments: Value,
    ) -> Result<CallToolResponse, ClientError> {
        let mut params = CallToolRequestParams::new(name.to_owned());
        if let Value::Object(map) = arguments {
            params = params.with_arguments(map);
        }
        Ok(self.service.call_tool_once(params).await?)
    }

    /// `tasks/get`.
    pub async fn get_task(&self, task_id: &str) -> Result<GetTaskResult, ClientError> {
        Ok(self.service.get_task(GetTaskParams::new(task_id)).await?)
    }

    /// `tasks/cancel`.
    pub async fn cancel_task(&self, task_id: &str) -> Result<(), ClientError> {
        Ok(self
            .service
            .cancel_task(CancelTaskParams::new(task_id))
            .await?)
    }

    /// Close stdin and wait for the broker to exit.
    pub async fn close(self) -> Result<(), ClientError> {
        self.service.cancel().await?;
        Ok(())
    }
}
