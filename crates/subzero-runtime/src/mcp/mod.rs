//! The MCP face of the broker: exactly eight tools over stdio.
//!
//! Arguments are taken as raw JSON and deserialized here, so a malformed or missing
//! argument becomes a *tool error* `invalid_request` naming the field — which hosts show
//! to the model — rather than a JSON-RPC protocol error, which they hide. Every result
//! carries structured content (the typed output) and the same object as compact JSON
//! text; every failure (`isError: true`) carries only the text: the error body
//! `{code, message, details?}` as compact JSON.

mod args;
pub mod client;
pub mod descriptions;
mod eof;
pub mod frames;
mod stdio;
mod tasks;
mod tools;

use std::sync::Arc;

use futures::FutureExt;
use futures::future::{BoxFuture, Shared};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CancelTaskParams, ContentBlock,
    GetTaskParams, GetTaskResult, Implementation, ListToolsResult, PaginatedRequestParams,
    ProgressNotificationParam, ServerCapabilities, ServerConfig, UpdateTaskParams,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use serde::Serialize;
use serde_json::Value;
use tokio::sync::mpsc;

use crate::broker::{Broker, BrokerError, BrokerOptions, Command, Context, StartsRun, TaskView};
use subzero_protocol as p;

pub use tools::{TOOL_NAMES, tool_list};

/// What the server tells a host about itself at `initialize`.
const INSTRUCTIONS: &str = "Subzero runs child agents for you in the background, each in its \
own process: researchers that read and answer, coders that write and run commands (several at \
once, each in its own git checkout). Delegate a self-contained task with subzero_spawn and keep \
working; wait for its result with subzero_get (waitMs=30000) instead of polling with short \
waits. Read the full result with subzero_output only when the preview is truncated.";

/// The broker as it opens. `initialize` and `tools/list` need nothing of it, so the host
/// is answered before the state is opened and recovered: the opening starts once the host
/// says it has the `initialize` reply (`notifications/initialized`), or at the first use,
/// whichever comes first, so it takes nothing from the reply. Every tool call waits for [`Broker::open`] to finish, so
/// what it sees is what it would have seen had the server answered only afterwards. A
/// broker that could not open answers every call with the reason.
#[derive(Clone)]
pub struct OpeningBroker {
    start: Arc<tokio::sync::Notify>,
    opened: Shared<BoxFuture<'static, Result<Arc<Broker>, BrokerError>>>,
}

impl std::fmt::Debug for OpeningBroker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpeningBroker")
            .field("opened", &self.opened.peek().map(Result::is_ok))
            .finish()
    }
}

impl OpeningBroker {
    /// A broker that opens on a task of its own once [`OpeningBroker::start`] is called (or
    /// [`OpeningBroker::get`]). Must be called inside a Tokio runtime.
    pub fn open(options: BrokerOptions) -> OpeningBroker {
        let start = Arc::new(tokio::sync::Notify::new());
        let task = {
            let start = Arc::clone(&start);
            tokio::spawn(async move {
                start.notified().await;
                Broker::open(options).await
            })
        };
        let opened = async move {
            task.await.unwrap_or_else(|e| {
                Err(BrokerError::internal(format!(
                    "opening the broker stopped: {e}"
                )))
            })
        };
        OpeningBroker {
            start,
            opened: opened.boxed().shared(),
        }
    }

    /// A broker that is open already.
    pub fn ready(broker: Arc<Broker>) -> OpeningBroker {
        OpeningBroker {
            start: Arc::new(tokio::sync::Notify::new()),
            opened: futures::future::ready(Ok(broker)).boxed().shared(),
        }
    }

    /// Starts opening, if it has not started (a later call changes nothing).
    pub fn start(&self) {
        // `notify_one` keeps a permit for a waiter that has not polled yet.
        self.start.notify_one();
    }

    /// The broker once it is open, or why it could not be (starting it first).
    pub async fn get(&self) -> Result<Arc<Broker>, BrokerError> {
        self.start();
        self.opened().await
    }

    /// Waits for the opening without starting it.
    pub async fn opened(&self) -> Result<Arc<Broker>, BrokerError> {
        self.opened.clone().await
    }
}

/// The MCP server: a thin translation layer over [`Broker`].
#[derive(Clone, Debug)]
pub struct McpServer {
    broker: OpeningBroker,
}

impl McpServer {
    /// Serve one host over this process's stdin/stdout until the host closes stdin.
    pub async fn serve_stdio(broker: OpeningBroker) -> anyhow::Result<()> {
        let (stdin, stdout) = stdio::open();
        // Every frame is checked (and a bad one answered) before the server sees it.
        let framed = frames::frame(stdin, stdout);
        // The host closing stdin is the end of the session: tell the broker at once, so
        // waiting `get` calls return now instead of holding the shutdown for their wait.
        let on_eof = {
            let broker = broker.clone();
            move || {
                let broker = broker.clone();
                tokio::spawn(async move {
                    if let Ok(broker) = broker.get().await {
                        broker.begin_shutdown();
                    }
                });
            }
        };
        let input = eof::WatchEof::new(framed.reader, on_eof);
        let server = McpServer { broker };
        let running = server.serve((input, framed.writer)).await?;
        running.waiting().await?;
        // Every answer is on stdout before the session counts as over.
        let _ = tokio::time::timeout(std::time::Duration::from_millis(200), framed.done).await;
        Ok(())
    }

    async fn dispatch(
        &self,
        name: &str,
        arguments: Value,
        progress: Option<mpsc::UnboundedSender<String>>,
        tasks: bool,
    ) -> Result<Answer, BrokerError> {
        let b = &self.broker.get().await?;
        let ctx = Context { progress };
        match name {
            p::InfoInput::TOOL => run::<p::InfoInput>(b, arguments, ctx).await,
            p::SpawnInput::TOOL => starts::<p::SpawnInput>(b, arguments, ctx, tasks).await,
            p::GetInput::TOOL => run::<p::GetInput>(b, arguments, ctx).await,
            p::ListInput::TOOL => run::<p::ListInput>(b, arguments, ctx).await,
            p::SendInput::TOOL => starts::<p::SendInput>(b, arguments, ctx, tasks).await,
            p::StopInput::TOOL => run::<p::StopInput>(b, arguments, ctx).await,
            p::ApplyInput::TOOL => run::<p::ApplyInput>(b, arguments, ctx).await,
            p::ResumeInput::TOOL => starts::<p::ResumeInput>(b, arguments, ctx, tasks).await,
            p::OutputInput::TOOL => run::<p::OutputInput>(b, arguments, ctx).await,
            other => Err(BrokerError::invalid(
                "name",
                format!(
                    "there is no tool `{other}`; the tools are {}",
                    TOOL_NAMES.join(", ")
                ),
            )),
        }
    }
}

/// What a tool call answers: its result, or (to a client with the Tasks extension) the
/// task that is the run it started.
enum Answer {
    /// Structured content and its text rendering.
    Done(Value, String),
    /// The handle of the run the call started.
    Task(TaskView),
}

/// Runs a call that may start a run (`C`): to a client that declared the Tasks extension,
/// a call that started one answers with its task. Should keeping the task fail, the
/// call's own answer goes back instead (its run is started either way, and the client
/// must take either), so no started run goes unreported.
async fn starts<C: Command>(
    broker: &Arc<Broker>,
    arguments: Value,
    ctx: Context,
    tasks: bool,
) -> Result<Answer, BrokerError>
where
    C::Output: StartsRun,
{
    let command: C = args::parse(arguments)?;
    let output = broker.execute(command, ctx).await?;
    if tasks {
        match broker.open_task(C::TOOL, &output).await {
            Ok(Some(task)) => return Ok(Answer::Task(task)),
            Ok(None) => {}
            Err(e) => tracing::warn!(error = %e, "could not keep a task; answering directly"),
        }
    }
    finish(Ok(output))
}

/// Parses a call's `arguments` into the command `C` and runs it.
async fn run<C: Command>(
    broker: &Arc<Broker>,
    arguments: Value,
    ctx: Context,
) -> Result<Answer, BrokerError> {
    let command: C = args::parse(arguments)?;
    finish(broker.execute(command, ctx).await)
}

/// Structured content plus its text rendering. The text is the same object as compact
/// JSON: many hosts hand only the text blocks to the model, so it must be complete, and
/// compact JSON is both the shortest complete rendering and one models read reliably.
fn finish<T: Serialize>(outcome: Result<T, BrokerError>) -> Result<Answer, BrokerError> {
    let output = outcome?;
    let value = serde_json::to_value(&output)
        .map_err(|e| BrokerError::internal(format!("could not encode the result: {e}")))?;
    let text = value.to_string();
    Ok(Answer::Done(value, text))
}

impl ServerHandler for McpServer {
    async fn initialize(
        &self,
        request: rmcp::model::InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::InitializeResult, ErrorData> {
        context.peer.set_peer_info(request.clone());
        // Nothing else: the state opens once the host has the reply (`initialized`).
        self.negotiate_initialize(&request)
    }

    async fn on_initialized(&self, _context: rmcp::service::NotificationContext<RoleServer>) {
        // The host has our reply: the state opens while it asks for the tool list.
        self.broker.start();
    }

    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tasks()
                .build(),
        )
        .with_server_info(Implementation::new("subzero", env!("CARGO_PKG_VERSION")))
        .with_instructions(INSTRUCTIONS)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult {
            tools: tool_list().to_vec(),
            ..Default::default()
        })
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let arguments = Value::Object(request.arguments.unwrap_or_default());
        let progress = context.meta.get_progress_token().map(|token| {
            let (tx, mut rx) = mpsc::unbounded_channel::<String>();
            let peer = context.peer.clone();
            tokio::spawn(async move {
                let mut step = 0.0;
                while let Some(message) = rx.recv().await {
                    step += 1.0;
                    let param =
                        ProgressNotificationParam::new(token.clone(), step).with_message(message);
                    if peer.notify_progress(param).await.is_err() {
                        break;
                    }
                }
            });
            tx
        });
        let tasks = context
            .client_capabilities()
            .is_some_and(|caps| caps.supports_tasks());
        let result = match self
            .dispatch(&request.name, arguments, progress, tasks)
            .await
        {
            Ok(Answer::Task(task)) => return Ok(CallToolResponse::Task(tasks::created(&task))),
            Ok(Answer::Done(structured, text)) => {
                let mut ok = CallToolResult::success(vec![ContentBlock::text(text)]);
                ok.structured_content = Some(structured);
                ok
            }
            // No structured content: it would have to match the tool's `outputSchema`, and
            // the TypeScript SDK 1.x validates it even on an error (and throws, losing the
            // code). The error body is the text, as compact JSON, which every SDK hands over.
            Err(err) => CallToolResult::error(vec![ContentBlock::text(err.to_error_text())]),
        };
        Ok(result.into())
    }

    async fn get_task(
        &self,
        request: GetTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, ErrorData> {
        let broker = self.broker.get().await.map_err(tasks::error)?;
        let view = broker.task(&request.task_id).await.map_err(tasks::error)?;
        Ok(GetTaskResult::new(tasks::detailed(view)?))
    }

    async fn update_task(
        &self,
        request: UpdateTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        // A child never asks its parent for input, so no task has a request outstanding:
        // responses are ignored (as the extension says for keys not outstanding), but
        // the task must exist.
        let broker = self.broker.get().await.map_err(tasks::error)?;
        broker.task(&request.task_id).await.map_err(tasks::error)?;
        Ok(())
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let broker = self.broker.get().await.map_err(tasks::error)?;
        broker
            .cancel_task(&request.task_id)
            .await
            .map_err(tasks::error)
    }
}
