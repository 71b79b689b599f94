//! The broker's error boundary: what a tool call fails with.
//!
//! Every failure is a stable code, a message that tells the caller what to do next,
//! and optional machine-readable details. Lower layers' errors convert into it with their
//! code and their message apart ([`Described`]), so the code is never repeated in the
//! message.

use std::fmt;

use serde_json::{Map, Value};
use subzero_core::{Coded, Described, ErrorCode};
use subzero_protocol as p;

use crate::RuntimeError;

/// A typed failure of a broker operation.
#[derive(Debug, Clone, PartialEq)]
pub struct BrokerError {
    code: ErrorCode,
    message: String,
    details: Map<String, Value>,
}

impl BrokerError {
    /// A failure with `code` and an actionable `message`.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            details: Map::new(),
        }
    }

    /// `invalid_request` about one argument, named by its JSON path.
    pub fn invalid(field: &str, message: impl Into<String>) -> Self {
        let mut err = Self::new(ErrorCode::InvalidRequest, message);
        if !field.is_empty() {
            err.details
                .insert("field".into(), Value::String(field.into()));
        }
        err
    }

    /// An unexpected failure after which state is still consistent.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::Internal, message)
    }

    /// Attach a machine-readable detail.
    #[must_use]
    pub fn with_detail(mut self, key: &str, value: impl Into<Value>) -> Self {
        self.details.insert(key.into(), value.into());
        self
    }

    /// The stable code.
    pub fn code(&self) -> ErrorCode {
        self.code
    }

    /// What went wrong and what to do next.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// Machine-readable context.
    pub fn details(&self) -> &Map<String, Value> {
        &self.details
    }

    /// The wire error body `{code, message, details?}` (schema `error.schema.json`), as the
    /// generated type.
    pub fn to_error_body(&self) -> p::ErrorBody {
        let message = bounded(&self.message);
        p::ErrorBody {
            code: self.code.into(),
            // `bounded` keeps a message within the schema's 1..4096 characters.
            message: message.parse().unwrap_or_else(|_| {
                "(the error had no message)"
                    .parse()
                    .expect("a constant message is within 1..4096 characters")
            }),
            details: self.details.clone(),
        }
    }

    /// [`BrokerError::to_error_body`] as compact JSON, the text of a tool error.
    pub fn to_error_text(&self) -> String {
        serde_json::to_string(&self.to_error_body())
            .unwrap_or_else(|_| format!(r#"{{"code":"{}","message":"(unencodable)"}}"#, self.code))
    }
}

/// Error messages are bounded on the wire; cut on a character boundary and say so.
fn bounded(message: &str) -> String {
    const MAX: usize = 4000;
    if message.len() <= MAX {
        return message.to_owned();
    }
    let mut cut = MAX - 20;
    while !message.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{} … (message cut)", &message[..cut])
}

impl fmt::Display for BrokerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

impl std::error::Error for BrokerError {}

impl From<RuntimeError> for BrokerError {
    fn from(err: RuntimeError) -> Self {
        let path = match &err {
            RuntimeError::StorageUnavailable { path, .. } => Some(path.display().to_string()),
            _ => None,
        };
        let body = Self::new(err.code(), err.message());
        match path {
            Some(path) => body.with_detail("path", path),
            None => body,
        }
    }
}

impl From<subzero_core::LifecycleError> for BrokerError {
    fn from(err: subzero_core::LifecycleError) -> Self {
        Self::new(err.code(), err.message())
    }
}

impl From<subzero_core::lifecycle::CheckoutRefused> for BrokerError {
    fn from(err: subzero_core::lifecycle::CheckoutRefused) -> Self {
        Self::new(err.code(), err.message())
    }
}

impl From<subzero_core::LimitExceeded> for BrokerError {
    fn from(err: subzero_core::LimitExceeded) -> Self {
        Self::new(err.code(), err.message())
    }
}

impl From<subzero_core::template::TemplateError> for BrokerError {
    fn from(err: subzero_core::template::TemplateError) -> Self {
        Self::new(err.code(), err.message())
    }
}

impl From<subzero_core::IdParseError> for BrokerError {
    fn from(err: subzero_core::IdParseError) -> Self {
        Self::invalid(err.kind(), err.to_string())
    }
}
