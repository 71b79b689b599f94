//! The one model client: any [`Protocol`] over one HTTP/SSE driver. The request leaves
//! through [`OriginBound`] (origin policy, idle timeout, response byte cap), its body is
//! split into events by [`SseParser`], and the protocol's [`Assembler`] reads them; the
//! client stops at the protocol's end event, at the request's text cap, or at the end of
//! the body, where the assembler says whether the answer is whole. Nothing is retried; the
//! one repeated request is a protocol adapting to a typed refusal of its shape
//! ([`Protocol::adapts_to`]), which generated nothing.

use reqwest::header::{AUTHORIZATION, HeaderMap, HeaderName, HeaderValue};
use subzero_protocol::ApiKey;

use super::http::{Body, OriginBound};
use super::protocol::{Assembler, Flow, OnText, Protocol};
use super::sse::SseParser;
use super::{ModelError, ModelTurn, Request, StreamBounds};

/// One endpoint of protocol `P`. `Debug` shows the origin, model and protocol, never the key.
#[derive(Clone)]
pub struct Client<P> {
    http: OriginBound,
    model: String,
    key: ApiKey,
    bounds: StreamBounds,
    protocol: P,
}

impl<P: Protocol> std::fmt::Debug for Client<P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("http", &self.http)
            .field("model", &self.model)
            .field("protocol", &self.protocol)
            .finish_non_exhaustive()
    }
}

impl<P: Protocol> Client<P> {
    /// A client for `url` (a base URL or the protocol's full endpoint).
    pub fn new(
        url: &str,
        model: &str,
        key: ApiKey,
        bounds: StreamBounds,
        protocol: P,
    ) -> Result<Self, ModelError> {
        Ok(Self {
            http: OriginBound::new(&P::endpoint(url), bounds)?,
            model: model.to_owned(),
            key,
            bounds,
            protocol,
        })
    }

    /// Sends one streaming request; `on_text` sees each text delta as it arrives.
    pub async fn complete(
        &self,
        request: Request<'_>,
        on_text: &mut OnText<'_>,
    ) -> Result<ModelTurn, ModelError> {
        let (response, sent) = match self.send(&request).await {
            Err(error) if self.protocol.adapts_to(&error) => self.send(&request).await?,
            other => other?,
        };
        self.read(&request, response, sent, on_text).await
    }

    /// Bytes of the body `request` would be sent as now.
    pub fn body_bytes(&self, request: &Request<'_>) -> u64 {
        serde_json::to_vec(&self.protocol.body(&self.model, request))
            .map_or(0, |body| u64::try_from(body.len()).unwrap_or(u64::MAX))
    }

    /// POSTs the request as the protocol shapes it now; the body reader and the bytes sent.
    async fn send(&self, request: &Request<'_>) -> Result<(Body, usize), ModelError> {
        let body = serde_json::to_vec(&self.protocol.body(&self.model, request))
            .map_err(|e| ModelError::Transport(format!("cannot encode the request: {e}")))?;
        let sent = body.len();
        let headers = self.protocol.headers(&self.key)?;
        let response = self
            .http
            .post(headers, body)
            .await
            .map_err(|e| self.protocol.explain(e))?;
        Ok((response, sent))
    }

    /// Reads the event stream of a successful response into one turn.
    async fn read(
        &self,
        request: &Request<'_>,
        mut response: Body,
        sent: usize,
        on_text: &mut OnText<'_>,
    ) -> Result<ModelTurn, ModelError> {
        // The body is already cut at `max_response_bytes`, so no line can pass this cap
        // here; it keeps the parser bounded on its own terms.
        let mut parser = SseParser::with_max_line(
            usize::try_from(self.bounds.max_response_bytes).unwrap_or(usize::MAX),
        );
        let mut assembler = P::Assembler::new(self.bounds.max_tool_argument_bytes);
        while let Some(chunk) = response.chunk().await? {
            for data in parser.feed(&chunk)? {
                if assembler.feed(&data, on_text)? == Flow::Done {
                    return Ok(assembler
                        .finish()
                        .sent_and_received(sent, response.received()));
                }
                if request.text_cap_reached(assembler.text_len()) {
                    let turn = assembler.finish();
                    return Ok(turn.sent_and_received(sent, response.received()).capped());
                }
            }
        }
        for data in parser.finish()? {
            if assembler.feed(&data, on_text)? == Flow::Done {
                return Ok(assembler
                    .finish()
                    .sent_and_received(sent, response.received()));
            }
        }
        let turn = assembler.end()?;
        Ok(turn.sent_and_received(sent, response.received()))
    }
}

/// `Authorization: Bearer <key>`, marked sensitive (never shown in `Debug`).
pub fn bearer(key: &ApiKey) -> Result<HeaderMap, ModelError> {
    let mut headers = HeaderMap::new();
    headers.insert(
        AUTHORIZATION,
        sensitive(&format!("Bearer {}", key.expose()))?,
    );
    Ok(headers)
}

/// `name: key`, marked sensitive.
pub fn key_header(name: &'static str, key: &ApiKey) -> Result<HeaderMap, ModelError> {
    let mut headers = HeaderMap::new();
    headers.insert(HeaderName::from_static(name), sensitive(key.expose())?);
    Ok(headers)
}

fn sensitive(value: &str) -> Result<HeaderValue, ModelError> {
    let mut value = HeaderValue::from_str(value)
        .map_err(|_| ModelError::Transport("the key is not a valid header value".into()))?;
    value.set_sensitive(true);
    Ok(value)
}

/// `url` with `path` appended, unless it already ends in it (a base URL or the full
/// endpoint; trailing slashes ignored).
pub fn joined(url: &str, path: &str) -> String {
    let trimmed = url.trim_end_matches('/');
    if trimmed.ends_with(path) {
        trimmed.to_owned()
    } else {
        format!("{trimmed}{path}")
    }
}
