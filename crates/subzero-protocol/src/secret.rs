//! The model API key as it travels in `start_run`: the only place a key is on the wire.

use std::borrow::Cow;
use std::fmt;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::validate::{InvalidRequest, Validate};

/// Bounds of the key, as in `schema-src/v1/control-broker-to-worker.schema.json`.
const MAX_CHARS: usize = 4096;

/// An API key (1..4096 characters). `Debug` and `Display` never show it; read it with
/// [`ApiKey::expose`] at the single place that puts it into an HTTP header.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey(String);

impl ApiKey {
    /// Wrap a key; fails when it is empty or longer than 4096 characters.
    pub fn new(key: impl Into<String>) -> Result<Self, InvalidRequest> {
        let key = key.into();
        let chars = key.chars().count();
        if chars == 0 || chars > MAX_CHARS {
            return Err(InvalidRequest::new(
                "model.key",
                "must be 1..=4096 characters",
            ));
        }
        Ok(Self(key))
    }

    /// The key itself. Never log, store or echo it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ApiKey(<redacted>)")
    }
}

impl Serialize for ApiKey {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for ApiKey {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let key = String::deserialize(deserializer)?;
        // The message names the rule, never the value.
        ApiKey::new(key).map_err(|e| serde::de::Error::custom(e.message()))
    }
}

impl JsonSchema for ApiKey {
    fn schema_name() -> Cow<'static, str> {
        Cow::Borrowed("WorkerModelKey")
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "type": "string",
            "minLength": 1,
            "maxLength": MAX_CHARS,
            "description": "The API key, in memory only; never logged, stored or echoed."
        })
    }
}

impl Validate for ApiKey {
    fn validate_at(&self, _path: &str) -> Result<(), InvalidRequest> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_never_shows_the_key() {
        let key = ApiKey::new("sk-very-secret").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(format!("{key:?}"), "ApiKey(<redacted>)");
        assert_eq!(key.expose(), "sk-very-secret");
    }

    #[test]
    fn an_empty_key_is_rejected_without_echoing_anything() {
        let err = serde_json::from_str::<ApiKey>("\"\"")
            .err()
            .map(|e| e.to_string());
        assert_eq!(err.as_deref(), Some("must be 1..=4096 characters"));
    }
}
