//! What each provider answers to a prompt longer than its model's context window, as the
//! providers document and send them: the refusals [`crate::ScriptedServer::refuse_past`]
//! answers with.

use serde_json::json;

use crate::{Reply, Step, model_messages as mm, model_responses as rs};

/// OpenAI Chat Completions: HTTP 400, `code: context_length_exceeded`.
pub fn openai_chat() -> Reply {
    Reply::status(
        400,
        &json!({ "error": {
            "message": "This model's maximum context length is 8192 tokens. However, your messages resulted in 9120 tokens. Please reduce the length of the messages.",
            "type": "invalid_request_error",
            "param": "messages",
            "code": "context_length_exceeded"
        }})
        .to_string(),
    )
}

/// OpenAI Responses API: HTTP 400, `code: context_length_exceeded`, `param: input`.
pub fn openai_responses() -> Reply {
    Reply::status(
        400,
        &json!({ "error": {
            "message": "Your input exceeds the context window of this model. Please adjust your input and try again.",
            "type": "invalid_request_error",
            "param": "input",
            "code": "context_length_exceeded"
        }})
        .to_string(),
    )
}

/// The Responses API refusing in the stream: `response.failed` with the same code.
pub fn openai_responses_failed_event() -> Reply {
    Reply::Sse(vec![Step::event(&json!({
        "type": "response.failed",
        "response": { "id": "resp_testkit", "status": "failed", "error": {
            "code": "context_length_exceeded",
            "message": "Your input exceeds the context window of this model."
        }}
    }))])
}

/// Anthropic Messages: HTTP 400, `invalid_request_error`, "prompt is too long".
pub fn anthropic() -> Reply {
    Reply::status(
        400,
        &json!({ "type": "error", "error": {
            "type": "invalid_request_error",
            "message": "prompt is too long: 208310 tokens > 200000 maximum"
        }})
        .to_string(),
    )
}

/// llama.cpp's server: HTTP 400, `type: exceed_context_size_error`, with its counts.
pub fn llama_cpp() -> Reply {
    Reply::status(
        400,
        &json!({ "error": {
            "code": 400,
            "message": "the request exceeds the available context size, try increasing it",
            "type": "exceed_context_size_error",
            "n_prompt_tokens": 2260,
            "n_ctx": 2048
        }})
        .to_string(),
    )
}

/// A text answer on `api` (`openai-completions`, `openai-responses`, `anthropic-messages`)
/// that reports no prompt tokens, so the worker measures the prompt by its own estimate —
/// what a scripted server that counts ⌈bytes / 4⌉ as its window needs.
pub fn unmetered_text(api: &str, text: &str) -> Reply {
    match api {
        "openai-responses" => rs::text_unmetered(text),
        "anthropic-messages" => Reply::Sse(vec![
            mm::message_start(0),
            mm::text_start(0),
            mm::text_delta(0, text),
            mm::block_stop(0),
            mm::message_delta("end_turn", 0),
            mm::message_stop(),
        ]),
        _ => Reply::Sse(vec![Step::text(text), Step::finish("stop"), Step::done()]),
    }
}

/// The refusal a server of `api` sends for a prompt past its window.
pub fn refusal(api: &str) -> Reply {
    match api {
        "openai-responses" => openai_responses(),
        "anthropic-messages" => anthropic(),
        _ => openai_chat(),
    }
}
