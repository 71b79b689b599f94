//! The MCP Tasks extension (`io.modelcontextprotocol/tasks`) in the extension's shapes.
//!
//! A client that declares the extension on a call that starts a run (`subzero_spawn`, a
//! followup `subzero_send`, `subzero_resume` with a message) gets a task handle instead
//! of the call's answer; `tasks/get` reads the task (the call's answer with the settled
//! run, inline, once it ended), `tasks/cancel` stops its run and answers once the stop is
//! confirmed. Clients that do not declare it get the answer, as before.

use rmcp::ErrorData;
use rmcp::model::{
    CallToolResult, ContentBlock, CreateTaskResult, DetailedTask, JsonObject, Task, TaskPayload,
    TaskStatus as WireStatus,
};
use serde_json::{Value, json};
use subzero_core::ErrorCode;
use subzero_core::task::TaskStatus;

use crate::broker::{BrokerError, TaskView};

/// The handle a call answers with.
pub(super) fn created(view: &TaskView) -> CreateTaskResult {
    CreateTaskResult::new(task(view))
}

/// A task as `tasks/get` answers it.
pub(super) fn detailed(view: TaskView) -> Result<DetailedTask, ErrorData> {
    let base = task(&view);
    let payload = match (view.status, view.result) {
        (TaskStatus::Working, _) => TaskPayload::Working,
        (TaskStatus::Cancelled, _) => TaskPayload::Cancelled,
        (TaskStatus::Completed, Some(structured)) => TaskPayload::Completed {
            result: tool_result(structured)?,
        },
        (TaskStatus::Completed, None) => {
            return Err(ErrorData::internal_error(
                format!("task {} completed without a result", view.task_id),
                None,
            ));
        }
    };
    Ok(DetailedTask::new(base, payload))
}

/// The base fields of a task.
fn task(view: &TaskView) -> Task {
    let status = match view.status {
        TaskStatus::Working => WireStatus::Working,
        TaskStatus::Completed => WireStatus::Completed,
        TaskStatus::Cancelled => WireStatus::Cancelled,
    };
    Task::new(
        view.task_id.clone(),
        status,
        view.created_at.clone(),
        view.last_updated_at.clone(),
    )
    .with_status_message(view.status_message.clone())
    .with_ttl_ms(view.ttl_ms)
    .with_poll_interval_ms(view.poll_interval_ms)
}

/// The call's result as a `CallToolResult` object: structured content and the same
/// object as compact JSON text, as a direct answer carries them.
fn tool_result(structured: Value) -> Result<JsonObject, ErrorData> {
    let mut result = CallToolResult::success(vec![ContentBlock::text(structured.to_string())]);
    result.structured_content = Some(structured);
    match serde_json::to_value(result) {
        Ok(Value::Object(object)) => Ok(object),
        _ => Err(ErrorData::internal_error(
            "could not encode a task's result",
            None,
        )),
    }
}

/// A failed `tasks/*` request: an id that names no task is invalid params (the extension
/// says so), as is a cancel the run's state refuses; anything else is an internal error. Either carries the error body
/// (`{code, message, details?}`) as `data`, so a client can branch on the stable code.
pub(super) fn error(err: BrokerError) -> ErrorData {
    let body = serde_json::to_value(err.to_error_body()).unwrap_or_else(|_| json!({}));
    let message = err.message().to_owned();
    match err.code() {
        ErrorCode::NotFound
        | ErrorCode::InvalidRequest
        | ErrorCode::NotRunning
        | ErrorCode::StaleRun => ErrorData::invalid_params(message, Some(body)),
        _ => ErrorData::internal_error(message, Some(body)),
    }
}
