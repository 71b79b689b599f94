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

use super::http::OriginBound;
use super::sse::SseParser;
use super::{ModelError, ModelTurn, Request, StreamBounds};
pub use stream::Assembler;

/// The Messages API version this client speaks (request and stream shapes).
pub const ANTHROPIC_VERSION: &str = "2023-06-01";

/// One Messages endpoint. `Debug` shows the origin and model, never the key.
#[derive(Clone)]
pub struct MessagesClient {
    http: OriginBound,
    model: String,
    key: ApiKey,
    bounds: StreamBounds,
}

impl std::fmt::Debug for MessagesClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MessagesClient")
            .field("http", &self.http)
            .field("model", &self.model)
            .finish_non_exhaustive()
    }
}

impl MessagesClient {
    pub fn new(
        url: &str,
        model: &str,
        key: ApiKey,
        bounds: StreamBounds,
    ) -> Result<Self, ModelError> {
        Ok(Self {
            http: OriginBound::new(&endpoint(url), bounds)?,
            model: model.to_owned(),
            key,
            bounds,
        })
    }

    /// Sends one streaming request; `on_text` sees each text delta as it arrives.
    pub async fn complete(
        &self,
        request: Request<'_>,
        on_text: &mut (dyn FnMut(&str) + Send),
    ) -> Result<ModelTurn, ModelError> {
        let body = serde_json::to_vec(&encode::body(&self.model, &request))
            .map_err(|e| ModelError::Transport(format!("cannot encode the request: {e}")))?;
        let sent = body.len();
        let mut response = self
            .http
            .post(self.headers()?, body)
            .await
            .map_err(explain_http)?;
        // The body is already cut at `max_response_bytes`; this keeps the parser bounded
        // on its own terms.
        let mut parser = SseParser::with_max_line(
            usize::try_from(self.bounds.max_response_bytes).unwrap_or(usize::MAX),
        );
        let mut assembler = Assembler::new(self.bounds.max_tool_argument_bytes);
        while let Some(chunk) = response.chunk().await? {
            for data in parser.feed(&chunk)? {
                if assembler.event(&data, on_text)? {
                    return Ok(assembler
                        .finish()
                        .sent_and_received(sent, response.received()));
                }
                if request.text_cap_reached(assembler.text_len()) {
                    let turn = assembler
                        .finish()
                        .sent_and_received(sent, response.received());
                    return Ok(turn.capped());
                }
            }
        }
        for data in parser.finish()? {
            if assembler.event(&data, on_text)? {
                return Ok(assembler
                    .finish()
                    .sent_and_received(sent, response.received()));
            }
        }
        if !assembler.saw_anything() {
            return Err(ModelError::Stream(
                "the stream ended without a single event".to_owned(),
            ));
        }
        // Without `message_stop` only a stop_reason says the answer is whole; a stream cut
        // before either is a failed request, never a completed (truncated) one.
        if !assembler.stopped() {
            return Err(ModelError::Stream(
                "the stream ended before the model finished (no message_stop and no stop_reason)"
                    .to_owned(),
            ));
        }
        Ok(assembler
            .finish()
            .sent_and_received(sent, response.received()))
    }

    /// `x-api-key` (marked sensitive, so it is never shown) and `anthropic-version`;
    /// `content-type` is set by [`OriginBound::post`].
    fn headers(&self) -> Result<HeaderMap, ModelError> {
        let mut headers = HeaderMap::new();
        let mut key = HeaderValue::from_str(self.key.expose())
            .map_err(|_| ModelError::Transport("the key is not a valid header value".into()))?;
        key.set_sensitive(true);
        headers.insert(HeaderName::from_static("x-api-key"), key);
        headers.insert(
            HeaderName::from_static("anthropic-version"),
            HeaderValue::from_static(ANTHROPIC_VERSION),
        );
        Ok(headers)
    }
}

/// An HTTP error whose body is an Anthropic error object keeps only `type: message`.
fn explain_http(error: ModelError) -> ModelError {
    match error {
        ModelError::Http { status, excerpt } => {
            let explained = serde_json::from_str(&excerpt)
                .ok()
                .and_then(|body| stream::error_text(&body));
            ModelError::Http {
                status,
                excerpt: explained.unwrap_or(excerpt),
            }
        }
        other => other,
    }
}

/// The request URL for `url`: a base (`https://api.anthropic.com`, `…/v1`) or already the
/// full `…/messages` endpoint. A query string is kept.
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoint_from_a_base_a_v1_base_or_the_full_url() {
        assert_eq!(
            endpoint("https://api.anthropic.com"),
            "https://api.anthropic.com/v1/messages"
        );
        assert_eq!(
            endpoint("https://api.anthropic.com/"),
            "https://api.anthropic.com/v1/messages"
        );
        assert_eq!(endpoint("http://h:8/v1/"), "http://h:8/v1/messages");
        assert_eq!(
            endpoint("https://proxy.example/anthropic"),
            "https://proxy.example/anthropic/v1/messages"
        );
        assert_eq!(
            endpoint("https://h/v1/messages?beta=true"),
            "https://h/v1/messages?beta=true"
        );
    }

    #[test]
    fn an_anthropic_error_body_becomes_its_type_and_message() {
        let body = r#"{"type":"error","error":{"type":"rate_limit_error","message":"Number of request tokens has exceeded your per-minute rate limit"},"request_id":"req_1"}"#;
        let err = explain_http(ModelError::Http {
            status: 429,
            excerpt: body.to_owned(),
        });
        assert_eq!(
            err.to_string(),
            "model endpoint answered HTTP 429: rate_limit_error: Number of request tokens has exceeded your per-minute rate limit"
        );
        let err = explain_http(ModelError::Http {
            status: 502,
            excerpt: "Bad Gateway".to_owned(),
        });
        assert_eq!(
            err.to_string(),
            "model endpoint answered HTTP 502: Bad Gateway"
        );
    }

    #[test]
    fn formatting_a_client_never_shows_the_key() {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let key = ApiKey::new("sk-ant-do-not-print").expect("key");
        let client = MessagesClient::new("http://127.0.0.1:9", "m", key, StreamBounds::DEFAULT)
            .expect("client");
        let shown = format!("{client:?} {client:#?}");
        assert!(!shown.contains("sk-ant-do-not-print"), "{shown}");
        let headers = client.headers().expect("headers");
        assert!(headers["x-api-key"].is_sensitive());
        assert!(format!("{headers:?}").contains("Sensitive"));
        assert!(!format!("{headers:?}").contains("sk-ant-do-not-print"));
        assert!(headers.get("authorization").is_none());
    }
}
