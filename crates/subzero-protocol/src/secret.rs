//! Secrets as they travel in `start_run`, the only place they are on the wire: the model API
//! key and the other values the worker must redact (MCP environment references, extra
//! secrets). Each is a [`SecretString`] (zeroed when dropped); `Debug` never shows it and
//! there is no `Display`. They serialize only because `start_run` must carry them.

use std::borrow::Cow;
use std::fmt;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use secrecy::{ExposeSecret, SecretString};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::validate::{InvalidRequest, Validate};

/// Bounds of every secret, as in `schema-src/v1/control-broker-to-worker.schema.json`.
const MAX_CHARS: usize = 4096;

/// A secret string of 1..4096 characters; the two wire types below wrap it.
#[derive(Clone)]
struct Secret(SecretString);

impl Secret {
    fn new(value: String, field: &str) -> Result<Self, InvalidRequest> {
        let chars = value.chars().count();
        if chars == 0 || chars > MAX_CHARS {
            return Err(InvalidRequest::new(field, "must be 1..=4096 characters"));
        }
        Ok(Self(SecretString::from(value)))
    }

    fn expose(&self) -> &str {
        self.0.expose_secret()
    }
}

/// Declares a wire type around [`Secret`] with its schema name and description.
macro_rules! secret_type {
    ($(#[$doc:meta])* $name:ident, $schema_name:literal, $field:literal, $description:literal) => {
        $(#[$doc])*
        #[derive(Clone)]
        pub struct $name(Secret);

        impl $name {
            #[doc = concat!("Wrap a value; fails when it is empty or longer than 4096 characters (field `", $field, "`).")]
            pub fn new(value: impl Into<String>) -> Result<Self, InvalidRequest> {
                Secret::new(value.into(), $field).map(Self)
            }

            /// The secret itself. Never log, store or echo it.
            pub fn expose(&self) -> &str {
                self.0.expose()
            }
        }

        impl PartialEq for $name {
            fn eq(&self, other: &Self) -> bool {
                self.expose() == other.expose()
            }
        }

        impl Eq for $name {}

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(concat!(stringify!($name), "(<redacted>)"))
            }
        }

        impl Serialize for $name {
            fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.serialize_str(self.expose())
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                let value = String::deserialize(deserializer)?;
                // The message names the rule, never the value.
                $name::new(value).map_err(|e| serde::de::Error::custom(e.message()))
            }
        }

        impl JsonSchema for $name {
            fn schema_name() -> Cow<'static, str> {
                Cow::Borrowed($schema_name)
            }

            fn json_schema(_: &mut SchemaGenerator) -> Schema {
                json_schema!({
                    "type": "string",
                    "minLength": 1,
                    "maxLength": MAX_CHARS,
                    "description": $description
                })
            }
        }

        impl Validate for $name {
            fn validate_at(&self, _path: &str) -> Result<(), InvalidRequest> {
                Ok(())
            }
        }
    };
}

secret_type!(
    /// An API key. Read it with [`ApiKey::expose`] at the single place that puts it into an
    /// HTTP header.
    ApiKey,
    "WorkerModelKey",
    "model.key",
    "The API key, in memory only; never logged, stored or echoed."
);

secret_type!(
    /// A value the worker redacts like the key: an MCP server's environment value or an
    /// extra secret of `start_run`.
    SecretText,
    "SecretText",
    "secret",
    "A secret value (1..4096 characters), in memory only; never logged, stored or echoed."
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_never_shows_the_secret() {
        let key = ApiKey::new("sk-very-secret").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(format!("{key:?}"), "ApiKey(<redacted>)");
        assert_eq!(key.expose(), "sk-very-secret");
        let text = SecretText::new("tok-very-secret").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(format!("{text:?}"), "SecretText(<redacted>)");
        assert_eq!(
            serde_json::to_string(&text).ok().as_deref(),
            Some("\"tok-very-secret\"")
        );
    }

    #[test]
    fn an_empty_key_is_rejected_without_echoing_anything() {
        let err = serde_json::from_str::<ApiKey>("\"\"")
            .err()
            .map(|e| e.to_string());
        assert_eq!(err.as_deref(), Some("must be 1..=4096 characters"));
    }
}
