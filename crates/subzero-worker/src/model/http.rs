//! The one way a model request leaves the worker: an HTTP POST that stays at its origin and
//! a response body read within bounds.
//!
//! - **Origin-bound.** reqwest's own redirect policy is off. A same-origin redirect is
//!   followed by hand (at most [`MAX_REDIRECTS`] hops, the same POST and body each time:
//!   a model API has no GET form); a redirect to any other origin (scheme, host, port) ends
//!   the request before anything is sent there. The key and the prompt therefore reach only
//!   the origin of `model.url`, which the broker checked against the credential's
//!   `origins`.
//! - **Bounded.** Waiting for headers and every gap between body chunks is bounded by the
//!   idle timeout; the body as a whole by `max_response_bytes`. Error bodies are read up to
//!   a small cap only.

use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use reqwest::Url;
use reqwest::header::{HeaderMap, LOCATION};

use super::{ModelError, StreamBounds};
use crate::redact::redact;

/// Same-origin redirects followed before the request fails.
pub const MAX_REDIRECTS: usize = 3;
/// Bytes of an error body read (the excerpt shown is shorter still).
const ERROR_BODY_READ: usize = 16 * 1024;
/// Bytes of an error body kept (after redaction) in `model_request_failed`.
const EXCERPT_BYTES: usize = 512;

/// A client for one model endpoint: its URL, its origin and the stream bounds.
#[derive(Clone)]
pub struct OriginBound {
    http: reqwest::Client,
    endpoint: Url,
    bounds: StreamBounds,
}

impl std::fmt::Debug for OriginBound {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OriginBound")
            .field("origin", &self.endpoint.origin().ascii_serialization())
            .field("bounds", &self.bounds)
            .finish_non_exhaustive()
    }
}

impl OriginBound {
    /// `endpoint` is the full URL requests go to.
    pub fn new(endpoint: &str, bounds: StreamBounds) -> Result<Self, ModelError> {
        let endpoint = Url::parse(endpoint)
            .map_err(|e| ModelError::Transport(format!("the model url is not a URL ({e})")))?;
        let mut builder = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(30))
            .redirect(reqwest::redirect::Policy::none())
            // A fresh connection per request: a kept-alive one the server has since closed
            // (llama.cpp's server does, between a run's turns) fails the next turn with
            // "error sending request" before anything reached the model. One connect per
            // model turn costs nothing next to the turn.
            .pool_max_idle_per_host(0);
        if endpoint.scheme() == "http" {
            // Every request stays at this origin, scheme included, so no TLS connection is
            // ever made: the system's root certificates (which the platform verifier would
            // read and parse now, ~150 of them) are not loaded.
            builder = builder.tls_certs_only(std::iter::empty());
        }
        let http = builder
            .build()
            .map_err(|e| ModelError::Transport(redact(&e.to_string())))?;
        Ok(Self {
            http,
            endpoint,
            bounds,
        })
    }

    /// POSTs `body` with `headers` and returns a successful response's body reader.
    /// A non-2xx answer is [`ModelError::Http`] with a short, redacted excerpt.
    pub async fn post(&self, headers: HeaderMap, body: Vec<u8>) -> Result<Body, ModelError> {
        let body = Bytes::from(body);
        let mut url = self.endpoint.clone();
        let mut hops = 0;
        loop {
            let request = self
                .http
                .post(url.clone())
                .headers(headers.clone())
                .header(reqwest::header::CONTENT_TYPE, "application/json")
                .body(body.clone())
                .send();
            let response = tokio::time::timeout(self.bounds.idle, request)
                .await
                .map_err(|_| self.idle_error("waiting for the response headers"))?
                .map_err(|e| ModelError::Transport(redact(&e.without_url().to_string())))?;
            let status = response.status();
            if status.is_redirection()
                && let Some(location) = response.headers().get(LOCATION)
            {
                url = self.follow(&url, location.as_bytes(), hops)?;
                hops += 1;
                continue;
            }
            if !status.is_success() {
                let (excerpt, overflow) = self.excerpt(response).await;
                let status = status.as_u16();
                return Err(if overflow && status < 500 {
                    ModelError::ContextExhausted {
                        status: Some(status),
                        excerpt,
                    }
                } else {
                    ModelError::Http { status, excerpt }
                });
            }
            return Ok(Body {
                response,
                bounds: self.bounds,
                received: 0,
            });
        }
    }

    /// The next URL of a redirect from `from`, when it stays at the endpoint's origin.
    fn follow(&self, from: &Url, location: &[u8], hops: usize) -> Result<Url, ModelError> {
        let location = std::str::from_utf8(location).map_err(|_| {
            ModelError::Transport("the model endpoint redirected to an unreadable Location".into())
        })?;
        let target = from.join(location).map_err(|_| {
            ModelError::Transport("the model endpoint redirected to an invalid Location".into())
        })?;
        let allowed = self.endpoint.origin();
        if target.origin() != allowed {
            return Err(ModelError::Redirect {
                target: origin_text(&target),
                allowed: origin_text(&self.endpoint),
            });
        }
        if hops >= MAX_REDIRECTS {
            return Err(ModelError::Transport(format!(
                "the model endpoint redirected more than {MAX_REDIRECTS} times; set model.url to the final endpoint"
            )));
        }
        Ok(target)
    }

    fn idle_error(&self, what: &str) -> ModelError {
        ModelError::Idle {
            what: what.to_owned(),
            ms: u64::try_from(self.bounds.idle.as_millis()).unwrap_or(u64::MAX),
        }
    }

    /// At most [`ERROR_BODY_READ`] bytes of an error body, within the idle timeout,
    /// redacted and cut to [`EXCERPT_BYTES`]; and whether the whole body read is a
    /// provider's context-overflow refusal ([`super::wire::overflows`]).
    async fn excerpt(&self, response: reqwest::Response) -> (String, bool) {
        let mut stream = response.bytes_stream();
        let mut body = Vec::new();
        while body.len() < ERROR_BODY_READ {
            match tokio::time::timeout(self.bounds.idle.min(Duration::from_secs(5)), stream.next())
                .await
            {
                Ok(Some(Ok(chunk))) => body.extend_from_slice(&chunk),
                _ => break,
            }
        }
        body.truncate(ERROR_BODY_READ);
        let raw = String::from_utf8_lossy(&body);
        let overflow = super::wire::overflows(&raw);
        let text = redact(&raw);
        let mut cut = text.len().min(EXCERPT_BYTES);
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        (text[..cut].to_owned(), overflow)
    }
}

/// `scheme://host:port` with the port always written, never a path or query.
fn origin_text(url: &Url) -> String {
    let host = url.host_str().unwrap_or("?");
    match url.port_or_known_default() {
        Some(port) => format!("{}://{host}:{port}", url.scheme()),
        None => format!("{}://{host}", url.scheme()),
    }
}

/// A successful response's body, read chunk by chunk within the bounds.
#[derive(Debug)]
pub struct Body {
    response: reqwest::Response,
    bounds: StreamBounds,
    received: u64,
}

impl Body {
    /// The next chunk; `None` at the end of the body. Fails when nothing arrives within
    /// the idle timeout, or when the body passes `max_response_bytes`.
    pub async fn chunk(&mut self) -> Result<Option<Bytes>, ModelError> {
        let next = tokio::time::timeout(self.bounds.idle, self.response.chunk())
            .await
            .map_err(|_| ModelError::Idle {
                what: "in the middle of the response stream".to_owned(),
                ms: u64::try_from(self.bounds.idle.as_millis()).unwrap_or(u64::MAX),
            })?
            .map_err(|e| ModelError::Transport(redact(&e.without_url().to_string())))?;
        if let Some(chunk) = &next {
            self.received = self
                .received
                .saturating_add(u64::try_from(chunk.len()).unwrap_or(u64::MAX));
            if self.received > self.bounds.max_response_bytes {
                return Err(ModelError::TooLarge {
                    max: self.bounds.max_response_bytes,
                });
            }
        }
        Ok(next)
    }

    /// Bytes of the body received so far.
    pub fn received(&self) -> u64 {
        self.received
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins_always_name_the_port() {
        let url = Url::parse("https://api.example.com/v1/x?token=secret").expect("url");
        assert_eq!(origin_text(&url), "https://api.example.com:443");
        let url = Url::parse("http://127.0.0.1:8080/").expect("url");
        assert_eq!(origin_text(&url), "http://127.0.0.1:8080");
    }
}
