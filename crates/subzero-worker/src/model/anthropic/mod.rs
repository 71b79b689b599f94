//! Streaming Anthropic Messages (`anthropic-messages`): `POST …/v1/messages` with
//! `x-api-key` and `anthropic-version: 2023-06-01`, never a Bearer token.
//!
//! `model.url` is the API base, as the Anthropic SDKs take it (`https://api.anthropic.com`):
//! `/v1/messages` is appended; a base that already ends in `/v1` gets `/messages`; a URL
//! that already ends in `/messages` is used as it is. A stream is whole at `message_stop`,
//! or at its end after a `message_delta` with a `stop_reason`; a stream cut before both, an
//! `error` event, or a `data:` payload that is not JSON fails the request. An HTTP error
//! body `{"type":"error","error":{"type","message"}}` is shown as `type: message`.

mod encode;
mod stream;

use reqwest::Url;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use subzero_protocol::ApiKey;

use super::ModelError;
use super::Request;
use super::client::key_header;
use super::protocol::Protocol;
pub use stream::MessagesStream;

/// The Messages API version this client speaks (request and stream shapes).
pub const ANTHROPIC_VERSION: &str = "2023-06-01";

/// The Messages protocol.
#[derive(Debug, Clone, Copy)]
pub struct Messages;

impl Protocol for Messages {
    const PATH: &'static str = "/v1/messages";
    type Body<'a> = encode::Body<'a>;
    type Assembler = MessagesStream;

    /// The request URL for `url`: a base (`https://api.anthropic.com`, `…/v1`) or already
    /// the full `…/messages` endpoint. A query string is kept.
    fn endpoint(url: &str) -> String {
        let Ok(mut parsed) = Url::parse(url) else {
            // OriginBound reports the URL as invalid.
            return url.to_owned();
        };
        let path = parsed.path().trim_end_matches('/').to_owned();
        let path = if path.ends_with("/messages") {
            path
        } else if path.ends_with("/v1") {
            format!("{path}/messages")
        } else {
            format!("{path}/v1/messages")
        };
        parsed.set_path(&path);
        parsed.to_string()
    }

    /// `x-api-key` (marked sensitive, so it is never shown) and `anthropic-version`.
    fn headers(&self, key: &ApiKey) -> Result<HeaderMap, ModelError> {
        let mut headers = key_header("x-api-key", key)?;
        headers.insert(
            HeaderName::from_static("anthropic-version"),
            HeaderValue::from_static(ANTHROPIC_VERSION),
        );
        Ok(headers)
    }

    fn body<'a>(&self, model: &'a str, request: &Request<'a>) -> encode::Body<'a> {
        encode::body(model, request)
    }

    /// An HTTP error whose body is an Anthropic error object keeps only `type: message`.
    fn explain(&self, error: ModelError) -> ModelError {
        match error {
            ModelError::Http { status, excerpt } => ModelError::Http {
                status,
                excerpt: stream::error_text(&excerpt).unwrap_or(excerpt),
            },
            ModelError::ContextExhausted { status, excerpt } => ModelError::ContextExhausted {
                status,
                excerpt: stream::error_text(&excerpt).unwrap_or(excerpt),
            },
            other => other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoint_from_a_base_a_v1_base_or_the_full_url() {
        assert_eq!(
            Messages::endpoint("https://api.anthropic.com"),
            "https://api.anthropic.com/v1/messages"
        );
        assert_eq!(
            Messages::endpoint("https://api.anthropic.com/"),
            "https://api.anthropic.com/v1/messages"
        );
        assert_eq!(
            Messages::endpoint("http://h:8/v1/"),
            "http://h:8/v1/messages"
        );
        assert_eq!(
            Messages::endpoint("https://proxy.example/anthropic"),
            "https://proxy.example/anthropic/v1/messages"
        );
        assert_eq!(
            Messages::endpoint("https://h/v1/messages?beta=true"),
            "https://h/v1/messages?beta=true"
        );
    }

    #[test]
    fn an_anthropic_error_body_becomes_its_type_and_message() {
        let body = r#"{"type":"error","error":{"type":"rate_limit_error","message":"Number of request tokens has exceeded your per-minute rate limit"},"request_id":"req_1"}"#;
        let err = Messages.explain(ModelError::Http {
            status: 429,
            excerpt: body.to_owned(),
        });
        assert_eq!(
            err.to_string(),
            "model endpoint answered HTTP 429: rate_limit_error: Number of request tokens has exceeded your per-minute rate limit"
        );
        let err = Messages.explain(ModelError::Http {
            status: 502,
            excerpt: "Bad Gateway".to_owned(),
        });
        assert_eq!(
            err.to_string(),
            "model endpoint answered HTTP 502: Bad Gateway"
        );
    }

    #[test]
    fn the_key_travels_only_in_a_sensitive_x_api_key() {
        let key = ApiKey::new("sk-ant-do-not-print").expect("key");
        let headers = Messages.headers(&key).expect("headers");
        assert!(headers["x-api-key"].is_sensitive());
        assert!(format!("{headers:?}").contains("Sensitive"));
        assert!(!format!("{headers:?}").contains("sk-ant-do-not-print"));
        assert!(headers.get("authorization").is_none());
        assert_eq!(headers["anthropic-version"], ANTHROPIC_VERSION);
    }
}
