//! User-template MCP servers: the worker is their MCP client.
//!
//! Each configured server is started exactly as configured (command and arguments), in its own
//! process group, in the workspace root, with a cleared environment plus only the configured
//! variables, inheriting the child's lock descriptor like every tool process. The worker lists
//! its tools and declares to the model only the allowed ones, as `<server>__<tool>`. A granted
//! tool the server does not list, a server that does not start, or a name clash fails the run
//! with `unsupported_grant` before any model call.
//!
//! The worker spawns the servers itself (not through rmcp's child-process transport): it reaps
//! every child with `waitpid(-1)`, and killing belongs to [`crate::containment`], which tears
//! the servers' trees down with the rest of the tool tree when the run settles or is cancelled.

use std::collections::BTreeMap;
use std::process::{Command, Stdio};
use std::time::Duration;

use rmcp::model::{CallToolRequestParams, CallToolResult, ContentBlock};
use rmcp::service::RunningService;
use rmcp::{RoleClient, ServiceExt};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader};

use super::{MAX_RESULT_BYTES, ToolContext, ToolOutput, cap};
use crate::model::ToolSpec;

/// Separates the server name from the tool name in the names declared to the model.
pub const SEPARATOR: &str = "__";
/// Lines of a server's stderr logged while it starts; later output is only counted, since it
/// may echo tool arguments.
const STARTUP_LOG_LINES: usize = 20;
/// Longest stderr line logged.
const LOG_LINE_MAX: usize = 512;

/// One configured server, as the grant snapshot names it.
#[derive(Debug, Clone)]
pub struct ServerSpec {
    pub name: String,
    pub command: String,
    pub args: Vec<String>,
    /// `NAME → env:VAR` references.
    pub env_refs: BTreeMap<String, String>,
    pub allowed_tools: Vec<String>,
}

/// Why a server grant cannot be satisfied; becomes `unsupported_grant`.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct GrantError(String);

/// A tool the model may call, routed to its server.
#[derive(Debug)]
struct Route {
    server: usize,
    tool: String,
}

struct Server {
    name: String,
    client: RunningService<RoleClient, ()>,
}

/// The running servers of one run and the allowed tools they serve. Dropping it closes the
/// sessions; the processes are killed by the containment sweep at settlement.
#[derive(Default)]
pub struct McpTools {
    servers: Vec<Server>,
    routes: BTreeMap<String, Route>,
    declarations: Vec<ToolSpec>,
}

impl std::fmt::Debug for McpTools {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpTools")
            .field(
                "servers",
                &self.servers.iter().map(|s| &s.name).collect::<Vec<_>>(),
            )
            .field("tools", &self.routes.keys().collect::<Vec<_>>())
            .finish()
    }
}

/// The name a server's tool is declared under.
pub fn exposed_name(server: &str, tool: &str) -> String {
    format!("{server}{SEPARATOR}{tool}")
}

impl McpTools {
    /// Starts every server, lists its tools and keeps the allowed ones. `env_values` holds the
    /// values the broker resolved for `env:VAR` references; a reference without a value fails
    /// the grant. `startup` bounds start + initialize + list per server.
    pub async fn start(
        ctx: &ToolContext,
        specs: &[ServerSpec],
        env_values: &BTreeMap<String, String>,
        startup: Duration,
    ) -> Result<Self, GrantError> {
        let mut tools = Self::default();
        for spec in specs {
            let env = resolve_env(spec, env_values)?;
            let client = tokio::time::timeout(startup, connect(ctx, spec, env))
                .await
                .map_err(|_| {
                    GrantError(format!(
                        "unsupported_grant: MCP server {} did not initialize within {} ms",
                        spec.name,
                        startup.as_millis()
                    ))
                })??;
            let listed = tokio::time::timeout(startup, client.peer().list_all_tools())
                .await
                .map_err(|_| {
                    GrantError(format!(
                        "unsupported_grant: MCP server {} did not list its tools within {} ms",
                        spec.name,
                        startup.as_millis()
                    ))
                })?
                .map_err(|e| {
                    GrantError(format!(
                        "unsupported_grant: MCP server {} could not list its tools: {e}",
                        spec.name
                    ))
                })?;
            let index = tools.servers.len();
            for allowed in &spec.allowed_tools {
                let Some(tool) = listed.iter().find(|t| t.name == allowed.as_str()) else {
                    let names: Vec<&str> = listed.iter().map(|t| t.name.as_ref()).collect();
                    return Err(GrantError(format!(
                        "unsupported_grant: MCP server {} has no tool named {allowed:?} (it lists: {}); fix allowed_tools in the template",
                        spec.name,
                        names.join(", ")
                    )));
                };
                let exposed = exposed_name(&spec.name, allowed);
                if super::BUILTIN.contains(&exposed.as_str()) || tools.routes.contains_key(&exposed)
                {
                    return Err(GrantError(format!(
                        "unsupported_grant: the MCP tool name {exposed} is granted twice; rename a server"
                    )));
                }
                tools.declarations.push(ToolSpec {
                    name: exposed.clone(),
                    description: tool.description.as_deref().unwrap_or_default().to_owned(),
                    parameters: Value::Object((*tool.input_schema).clone()),
                });
                tools.routes.insert(
                    exposed,
                    Route {
                        server: index,
                        tool: allowed.clone(),
                    },
                );
            }
            tracing::info!(server = %spec.name, allowed = spec.allowed_tools.len(), "MCP server ready");
            tools.servers.push(Server {
                name: spec.name.clone(),
                client,
            });
        }
        Ok(tools)
    }

    /// Function declarations of the allowed tools, in snapshot order.
    pub fn declarations(&self) -> &[ToolSpec] {
        &self.declarations
    }

    /// Whether `name` is an allowed MCP tool of this run.
    pub fn allows(&self, name: &str) -> bool {
        self.routes.contains_key(name)
    }

    /// The declared names, for messages to the model.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.routes.keys().map(String::as_str)
    }

    /// Calls an allowed tool within `timeout` (`toolTimeoutMs`). The caller has checked
    /// [`Self::allows`]. Past the timeout the request is dropped, which sends the server
    /// `notifications/cancelled` for it, and the call is a tool error; the server keeps
    /// running (it may serve other calls, and its processes are the run's).
    pub async fn call(&self, name: &str, arguments: &str, timeout: Duration) -> ToolOutput {
        let Some(route) = self.routes.get(name) else {
            return ToolOutput::error(format!("unknown tool {name}"));
        };
        let Some(server) = self.servers.get(route.server) else {
            return ToolOutput::error(format!("unknown tool {name}"));
        };
        let arguments = if arguments.trim().is_empty() {
            "{}"
        } else {
            arguments
        };
        let arguments = match serde_json::from_str::<Value>(arguments) {
            Ok(Value::Object(map)) => map,
            Ok(_) => return ToolOutput::error("invalid arguments: expected a JSON object"),
            Err(e) => return ToolOutput::error(format!("invalid arguments: {e}")),
        };
        let params = CallToolRequestParams::new(route.tool.clone()).with_arguments(arguments);
        match tokio::time::timeout(timeout, server.client.peer().call_tool(params)).await {
            Ok(Ok(result)) => render(result),
            Ok(Err(e)) => ToolOutput::error(format!("MCP server {} failed: {e}", server.name)),
            Err(_) => super::timed_out(
                name,
                timeout,
                "the request was cancelled (notifications/cancelled); the MCP server keeps running",
            ),
        }
    }

    /// Closes every session (servers see EOF on stdin). Their processes are killed by the
    /// containment sweep that follows every run.
    pub async fn close(mut self) {
        for server in &mut self.servers {
            let _ = tokio::time::timeout(Duration::from_millis(100), server.client.close()).await;
        }
    }
}

/// Builds the server's environment from its references only.
fn resolve_env(
    spec: &ServerSpec,
    env_values: &BTreeMap<String, String>,
) -> Result<Vec<(String, String)>, GrantError> {
    spec.env_refs
        .iter()
        .map(|(name, reference)| match env_values.get(reference) {
            Some(value) => Ok((name.clone(), value.clone())),
            None => Err(GrantError(format!(
                "unsupported_grant: MCP server {} needs {name} from {reference}, but the broker passed no value for it (start_run carries no resolved environment); remove the env entry or run without it",
                spec.name
            ))),
        })
        .collect()
}

/// Spawns the server and completes the MCP handshake.
async fn connect(
    ctx: &ToolContext,
    spec: &ServerSpec,
    env: Vec<(String, String)>,
) -> Result<RunningService<RoleClient, ()>, GrantError> {
    let start_failed = |what: String| {
        GrantError(format!(
            "unsupported_grant: MCP server {} could not be started: {what}",
            spec.name
        ))
    };
    let mut cmd = Command::new(&spec.command);
    cmd.args(&spec.args)
        .current_dir(&ctx.root)
        .env_clear()
        .envs(env)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    crate::containment::tool::confine(&mut cmd, &ctx.jail);
    let mut child = cmd.spawn().map_err(|e| start_failed(e.to_string()))?;
    ctx.containment.register_group(child.id());
    let (Some(stdin), Some(stdout), Some(stderr)) =
        (child.stdin.take(), child.stdout.take(), child.stderr.take())
    else {
        return Err(start_failed("its stdio was not piped".to_owned()));
    };
    // The worker reaps its children itself (see containment); the handle is not waited on.
    drop(child);
    let stdin =
        tokio::process::ChildStdin::from_std(stdin).map_err(|e| start_failed(e.to_string()))?;
    let stdout =
        tokio::process::ChildStdout::from_std(stdout).map_err(|e| start_failed(e.to_string()))?;
    let stderr =
        tokio::process::ChildStderr::from_std(stderr).map_err(|e| start_failed(e.to_string()))?;
    drain_stderr(spec.name.clone(), stderr);
    ().serve((stdout, stdin))
        .await
        .map_err(|e| start_failed(format!("the MCP handshake failed: {e}")))
}

/// Reads the server's stderr to its end (a full pipe would stall it). The first lines are
/// logged (start-up diagnostics); after that only the byte count, since later output may echo
/// tool arguments.
fn drain_stderr(server: String, stderr: tokio::process::ChildStderr) {
    tokio::spawn(async move {
        let mut lines = BufReader::new(stderr).lines();
        let mut logged = 0usize;
        let mut unlogged_bytes = 0usize;
        while let Ok(Some(line)) = lines.next_line().await {
            if logged < STARTUP_LOG_LINES {
                logged += 1;
                let shown = cap(line, LOG_LINE_MAX);
                tracing::debug!(server = %server, line = %shown, "MCP server stderr");
            } else {
                unlogged_bytes += line.len() + 1;
            }
        }
        if unlogged_bytes > 0 {
            tracing::debug!(server = %server, bytes = unlogged_bytes, "MCP server stderr (not logged)");
        }
    });
}

/// The tool result as text for the model.
fn render(result: CallToolResult) -> ToolOutput {
    let mut parts: Vec<String> = result
        .content
        .iter()
        .map(|block| match block {
            ContentBlock::Text(text) => text.text.clone(),
            ContentBlock::Image(_) => "[image content omitted]".to_owned(),
            ContentBlock::Audio(_) => "[audio content omitted]".to_owned(),
            ContentBlock::Resource(_) => "[embedded resource omitted]".to_owned(),
            ContentBlock::ResourceLink(link) => format!("[resource link: {}]", link.uri),
            _ => "[content omitted]".to_owned(),
        })
        .collect();
    if parts.is_empty()
        && let Some(structured) = &result.structured_content
    {
        parts.push(structured.to_string());
    }
    let text = cap(parts.join("\n"), MAX_RESULT_BYTES);
    if result.is_error == Some(true) {
        ToolOutput::error(text)
    } else {
        ToolOutput::ok(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(refs: &[(&str, &str)]) -> ServerSpec {
        ServerSpec {
            name: "gh".to_owned(),
            command: "gh-mcp".to_owned(),
            args: Vec::new(),
            env_refs: refs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            allowed_tools: vec!["search".to_owned()],
        }
    }

    #[test]
    fn an_env_reference_without_a_value_is_an_unsupported_grant() {
        let err = resolve_env(&spec(&[("TOKEN", "env:GH_TOKEN")]), &BTreeMap::new())
            .expect_err("no value");
        assert!(err.to_string().starts_with("unsupported_grant:"), "{err}");
    }

    #[test]
    fn only_referenced_values_reach_the_server() {
        let values = BTreeMap::from([
            ("env:GH_TOKEN".to_owned(), "t0k".to_owned()),
            ("env:OTHER".to_owned(), "nope".to_owned()),
        ]);
        let env = resolve_env(&spec(&[("TOKEN", "env:GH_TOKEN")]), &values).expect("resolved");
        assert_eq!(env, vec![("TOKEN".to_owned(), "t0k".to_owned())]);
    }

    #[test]
    fn names_are_prefixed_with_the_server() {
        assert_eq!(exposed_name("gh", "search"), "gh__search");
    }
}
