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

    /// The object as JSON text.
    pub fn raw(&self) -> String {
        self.0.to_string()
    }
}

/// `text` as a failed stream, redacted.
pub fn failed(text: &str) -> ModelError {
    ModelError::Stream(redact(text))
}
