//! Documents read from the store: the contract's types, or the error body of a stored value
//! the contract refuses (`subzero_runtime::broker::child_snapshot` and its kin). `--json`
//! prints either as it serializes.

use serde::Serialize;
use subzero_core::ErrorCode;
use subzero_protocol as p;

use super::InspectError;

/// A document as read: the typed document, or why the contract refuses what is stored.
pub type Read<T> = Result<T, p::ErrorBody>;

/// A [`Read`] as JSON shows it: the document, or the error body in its place.
#[derive(Debug, Serialize)]
#[serde(untagged)]
pub enum Shown<'a, T> {
    /// What the contract accepts.
    Document(&'a T),
    /// The error body `{code, message}` instead.
    Refused(&'a p::ErrorBody),
}

impl<'a, T> From<&'a Read<T>> for Shown<'a, T> {
    fn from(read: &'a Read<T>) -> Self {
        match read {
            Ok(doc) => Shown::Document(doc),
            Err(body) => Shown::Refused(body),
        }
    }
}

/// `value` as compact JSON.
pub fn json(value: &impl Serialize) -> Result<String, InspectError> {
    serde_json::to_string(value).map_err(|e| {
        InspectError::new(
            ErrorCode::Internal,
            format!("cannot encode the document: {e}"),
        )
    })
}
