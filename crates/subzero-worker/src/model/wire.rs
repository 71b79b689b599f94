//! Reading provider stream events leniently, for every protocol: wire structs are serde
//! structs with `#[serde(default)]` whose unknown fields are ignored, and a field whose
//! value has an unexpected type reads as absent ([`lenient`]) rather than failing the
//! stream. Only a payload that is not JSON at all fails it.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer};

use super::ModelError;
use crate::redact::redact;

/// A field that reads as its default when its value has another type than expected (a
/// number where a string was documented, `null`, an object…).
pub fn lenient<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: DeserializeOwned + Default,
{
    let value = serde_json::Value::deserialize(deserializer)?;
    Ok(serde_json::from_value(value).unwrap_or_default())
}

/// One `data:` payload as `T`. JSON of another shape (an array, a number) reads as
/// `T::default()`, which holds nothing; a payload that is not JSON is a broken stream.
pub fn event<T: DeserializeOwned + Default>(data: &str) -> Result<T, ModelError> {
    match serde_json::from_str::<T>(data) {
        Ok(event) => Ok(event),
        Err(error) if error.is_data() => Ok(T::default()),
        Err(_) => Err(ModelError::Stream(format!(
            "a stream event of {} bytes was not JSON",
            data.len()
        ))),
    }
}

/// A provider's error object (`{"message", "code", "type"}`, any of them missing), kept
/// whole so that one without a message can still be shown.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(transparent)]
pub struct ProviderError(serde_json::Value);

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct ErrorFields {
    #[serde(deserialize_with = "lenient")]
    message: Option<String>,
    #[serde(deserialize_with = "lenient")]
    code: Option<String>,
    #[serde(rename = "type", deserialize_with = "lenient")]
    kind: Option<String>,
}

impl ProviderError {
    fn fields(&self) -> ErrorFields {
        ErrorFields::deserialize(&self.0).unwrap_or_default()
    }

    /// Whether the provider sent an object (`"error": null` is no error).
    pub fn is_object(&self) -> bool {
        self.0.is_object()
    }

    pub fn message(&self) -> Option<String> {
        self.fields().message.filter(|m| !m.is_empty())
    }

    pub fn code(&self) -> Option<String> {
        self.fields().code.filter(|c| !c.is_empty())
    }

    pub fn kind(&self) -> Option<String> {
        self.fields().kind
    }

    /// Whether this is the provider refusing a prompt longer than the model's context
    /// window, in any of the shapes the three protocols' servers send: OpenAI's
    /// `code: context_length_exceeded` (Chat Completions and Responses), llama.cpp's
    /// `type: exceed_context_size_error`, Anthropic's `invalid_request_error` whose message
    /// starts `prompt is too long`.
    pub fn is_context_overflow(&self) -> bool {
        let fields = self.fields();
        let code = fields.code.as_deref();
        let kind = fields.kind.as_deref();
        let message = fields.message.unwrap_or_default().to_ascii_lowercase();
        code == Some("context_length_exceeded")
            || kind == Some("context_length_exceeded")
            || kind == Some("exceed_context_size_error")
            || (kind == Some("invalid_request_error") && message.contains("prompt is too long"))
    }

    /// The object as JSON text.
    pub fn raw(&self) -> String {
        self.0.to_string()
    }
}

/// The error object of an HTTP error body or an error event: `{"error": {…}}` (OpenAI,
/// llama.cpp, Anthropic's `{"type": "error", "error": {…}}`).
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Envelope {
    error: Option<ProviderError>,
}

/// Whether `body` (an HTTP error body or an error event's payload) is a context overflow
/// ([`ProviderError::is_context_overflow`]).
pub fn overflows(body: &str) -> bool {
    serde_json::from_str::<Envelope>(body)
        .ok()
        .and_then(|e| e.error)
        .is_some_and(|e| e.is_object() && e.is_context_overflow())
}

/// `text` as the model's refusal of a too long prompt, redacted.
pub fn exhausted(text: &str) -> ModelError {
    ModelError::ContextExhausted {
        status: None,
        excerpt: redact(text),
    }
}

/// `text` as a failed stream, redacted.
pub fn failed(text: &str) -> ModelError {
    ModelError::Stream(redact(text))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_providers_overflow_shape_reads_as_an_overflow() {
        for body in [
            r#"{"error":{"message":"This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}"#,
            r#"{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 208310 tokens > 200000 maximum"}}"#,
            r#"{"error":{"code":400,"message":"the request exceeds the available context size, try increasing it","type":"exceed_context_size_error","n_prompt_tokens":2100,"n_ctx":2048}}"#,
        ] {
            assert!(overflows(body), "{body}");
        }
    }

    #[test]
    fn other_refusals_are_not_overflows() {
        for body in [
            r#"{"error":{"message":"Unsupported parameter: 'max_tokens'","type":"invalid_request_error","param":"max_tokens","code":"unsupported_parameter"}}"#,
            r#"{"type":"error","error":{"type":"invalid_request_error","message":"max_tokens: Field required"}}"#,
            r#"{"type":"error","error":{"type":"rate_limit_error","message":"Number of request tokens has exceeded your per-minute rate limit"}}"#,
            "Bad Gateway",
            r#"{"error":null}"#,
        ] {
            assert!(!overflows(body), "{body}");
        }
    }
}
