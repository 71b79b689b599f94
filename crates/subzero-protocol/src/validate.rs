//! Boundary validation for what the generated types cannot enforce while deserializing.
//!
//! typify turns patterns and string lengths into checked newtypes, but it ignores integer
//! maxima (and minima other than 0 and 1) and knows nothing of byte lengths. Every
//! generated type implements [`Validate`]; call it right after deserializing anything
//! from outside the process (tool arguments, control lines, the configuration file):
//!
//! ```
//! use subzero_protocol::{GetInput, Validate};
//! let input: GetInput = serde_json::from_str(
//!     r#"{"childId":"ch_01JDZ8Q4W3V9K2M5N7P8R0S1T2","waitMs":30001}"#,
//! ).unwrap();
//! let err = input.validate().unwrap_err();
//! assert_eq!(err.field(), "waitMs");
//! assert_eq!(err.code(), "invalid_request");
//! ```

use std::collections::BTreeMap;
use std::fmt;
use std::num::NonZeroU64;

use crate::{ErrorBody, ErrorCode, ErrorMessage};

/// A value broke a bound of the contract. Maps to the `invalid_request` error code.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InvalidRequest {
    field: String,
    message: String,
}

impl InvalidRequest {
    /// A violation at `field` (a dotted JSON path such as `model.url` or `queuedRuns[2]`).
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            message: message.into(),
        }
    }

    /// The JSON path of the offending field (empty for the value itself).
    pub fn field(&self) -> &str {
        &self.field
    }

    /// What is wrong with it.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The stable error code: always `invalid_request`.
    pub fn code(&self) -> &'static str {
        "invalid_request"
    }

    /// The wire error body: `{code: invalid_request, message, details: {field}}`.
    pub fn to_error_body(&self) -> ErrorBody {
        let text = self.to_string();
        let message = ErrorMessage::try_from(text.as_str())
            .or_else(|_| ErrorMessage::try_from("invalid request"))
            .unwrap_or_else(|_| unreachable_message());
        let mut details = serde_json::Map::new();
        details.insert(
            "field".to_string(),
            serde_json::Value::String(self.field.clone()),
        );
        ErrorBody {
            code: ErrorCode::InvalidRequest,
            message,
            details: details.into_iter().collect(),
        }
    }
}

/// `"invalid request"` is a valid [`ErrorMessage`]; this only exists to avoid a panic path.
fn unreachable_message() -> ErrorMessage {
    serde_json::from_value(serde_json::Value::String("invalid request".into()))
        .unwrap_or_else(|_| unreachable!("a 15-character message is within 1..4096"))
}

impl fmt::Display for InvalidRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.field.is_empty() {
            write!(f, "invalid_request: {}", self.message)
        } else {
            write!(
                f,
                "invalid_request: {} {}; fix the argument and call again",
                self.field, self.message
            )
        }
    }
}

impl std::error::Error for InvalidRequest {}

/// Checks the bounds that deserialization does not.
pub trait Validate {
    /// Validate `self`, reporting fields relative to `path`.
    fn validate_at(&self, path: &str) -> Result<(), InvalidRequest>;

    /// Validate `self` as a whole document.
    fn validate(&self) -> Result<(), InvalidRequest> {
        self.validate_at("")
    }
}

/// `path` + `.field` (or `field` at the top).
pub fn join(path: &str, field: &str) -> String {
    if path.is_empty() {
        field.to_string()
    } else {
        format!("{path}.{field}")
    }
}

/// An integer type the generated code range-checks.
pub trait Integer: Copy {
    /// The value, widened.
    fn widen(self) -> i128;
}

macro_rules! integer {
    ($($t:ty),*) => {$(
        impl Integer for $t {
            fn widen(self) -> i128 {
                i128::from(self)
            }
        }
        impl Validate for $t {
            fn validate_at(&self, _path: &str) -> Result<(), InvalidRequest> {
                Ok(())
            }
        }
    )*};
}
integer!(i8, i16, i32, i64, u8, u16, u32, u64);

impl Integer for NonZeroU64 {
    fn widen(self) -> i128 {
        i128::from(self.get())
    }
}

/// `min <= value <= max`, else an error naming `path`.
pub fn check_range<N: Integer>(
    path: &str,
    value: &N,
    min: i64,
    max: i64,
) -> Result<(), InvalidRequest> {
    let v = value.widen();
    if v < i128::from(min) || v > i128::from(max) {
        return Err(InvalidRequest::new(
            path,
            format!("must be within {min}..={max}, got {v}"),
        ));
    }
    Ok(())
}

/// At most `max` UTF-8 bytes, else an error naming `path`.
pub fn check_max_bytes(path: &str, value: &str, max: usize) -> Result<(), InvalidRequest> {
    if value.len() > max {
        return Err(InvalidRequest::new(
            path,
            format!("must be at most {max} UTF-8 bytes, got {}", value.len()),
        ));
    }
    Ok(())
}

/// Between `min` and `max` items, else an error naming `path`.
pub fn check_items(path: &str, len: usize, min: i64, max: i64) -> Result<(), InvalidRequest> {
    let n = i128::try_from(len).unwrap_or(i128::MAX);
    if n < i128::from(min) || n > i128::from(max) {
        return Err(InvalidRequest::new(
            path,
            format!("must have {min}..={max} items, got {len}"),
        ));
    }
    Ok(())
}

macro_rules! leaf {
    ($($t:ty),*) => {$(
        impl Validate for $t {
            fn validate_at(&self, _path: &str) -> Result<(), InvalidRequest> {
                Ok(())
            }
        }
    )*};
}
leaf!(NonZeroU64, bool, f64, String, serde_json::Value, serde_json::Map<String, serde_json::Value>, ());

impl<T: Validate> Validate for Option<T> {
    fn validate_at(&self, path: &str) -> Result<(), InvalidRequest> {
        self.as_ref().map_or(Ok(()), |v| v.validate_at(path))
    }
}

impl<T: Validate> Validate for Vec<T> {
    fn validate_at(&self, path: &str) -> Result<(), InvalidRequest> {
        self.iter()
            .enumerate()
            .try_for_each(|(i, item)| item.validate_at(&format!("{path}[{i}]")))
    }
}

impl<T: Validate> Validate for Box<T> {
    fn validate_at(&self, path: &str) -> Result<(), InvalidRequest> {
        T::validate_at(self, path)
    }
}

impl<K: Validate + serde::Serialize, V: Validate> Validate for BTreeMap<K, V> {
    fn validate_at(&self, path: &str) -> Result<(), InvalidRequest> {
        self.iter().try_for_each(|(k, v)| {
            let key = match serde_json::to_value(k) {
                Ok(serde_json::Value::String(key)) => key,
                _ => String::from("<key>"),
            };
            let at = join(path, &key);
            k.validate_at(&at)?;
            v.validate_at(&at)
        })
    }
}

/// Checks a rule between the properties of `value` — the `if`/`then`/`else` its schema
/// states, as the JSON text `rule` (codegen copies it from `schema-src/`). The failing
/// branch's `description` is the message.
///
/// Rules use a small part of JSON Schema, and only that part is evaluated: `properties`,
/// `required`, `const`, `type`, `not`, `anyOf`, `allOf` and boolean schemas. Anything
/// else in a rule fails closed, so a rule this code cannot read is noticed by the
/// fixtures rather than silently passed.
pub fn check_rule<T: serde::Serialize>(
    path: &str,
    value: &T,
    rule: &str,
) -> Result<(), InvalidRequest> {
    let broken = |why: &str| InvalidRequest::new(path, why.to_string());
    let rule: serde_json::Value =
        serde_json::from_str(rule).map_err(|e| broken(&format!("has an unreadable rule: {e}")))?;
    let value = serde_json::to_value(value).map_err(|e| broken(&e.to_string()))?;
    let branch = match rule.get("if") {
        Some(condition) if holds(condition, &value) => rule.get("then"),
        Some(_) => rule.get("else"),
        None => None,
    };
    match branch {
        Some(schema) if !holds(schema, &value) => Err(broken(
            schema
                .get("description")
                .and_then(serde_json::Value::as_str)
                .unwrap_or("breaks a rule between its properties"),
        )),
        _ => Ok(()),
    }
}

/// Whether `value` satisfies the rule subschema `schema` (see [`check_rule`]).
fn holds(schema: &serde_json::Value, value: &serde_json::Value) -> bool {
    use serde_json::Value;
    let map = match schema {
        Value::Bool(b) => return *b,
        Value::Object(map) => map,
        _ => return false,
    };
    map.iter().all(|(key, expected)| match key.as_str() {
        "description" | "$comment" => true,
        "const" => value == expected,
        "type" => expected.as_str().is_some_and(|t| type_is(t, value)),
        "not" => !holds(expected, value),
        "anyOf" => expected
            .as_array()
            .is_some_and(|all| all.iter().any(|s| holds(s, value))),
        "allOf" => expected
            .as_array()
            .is_some_and(|all| all.iter().all(|s| holds(s, value))),
        "required" => expected.as_array().is_some_and(|names| {
            names.iter().all(|name| {
                name.as_str()
                    .is_some_and(|n| value.as_object().is_some_and(|o| o.contains_key(n)))
            })
        }),
        "properties" => expected.as_object().is_some_and(|props| {
            props.iter().all(|(name, sub)| {
                value
                    .as_object()
                    .and_then(|o| o.get(name))
                    .is_none_or(|v| holds(sub, v))
            })
        }),
        _ => false,
    })
}

fn type_is(name: &str, value: &serde_json::Value) -> bool {
    use serde_json::Value;
    match (name, value) {
        ("null", Value::Null)
        | ("boolean", Value::Bool(_))
        | ("string", Value::String(_))
        | ("array", Value::Array(_))
        | ("object", Value::Object(_)) => true,
        ("number", Value::Number(_)) => true,
        ("integer", Value::Number(n)) => n.is_i64() || n.is_u64(),
        _ => false,
    }
}

#[cfg(test)]
mod rule_tests {
    use serde_json::json;

    use super::check_rule;

    const EXACTLY_ONE: &str = r#"{"if":{"properties":{"env":true},"required":["env"]},
        "then":{"description":"not both","not":{"properties":{"file":true},"required":["file"]}},
        "else":{"description":"one of env and file","properties":{"file":true},"required":["file"]}}"#;

    #[test]
    fn a_rule_names_its_failing_branch() {
        assert!(check_rule("", &json!({"env": "K"}), EXACTLY_ONE).is_ok());
        assert!(check_rule("", &json!({"file": "/k"}), EXACTLY_ONE).is_ok());
        let both = check_rule("c", &json!({"env": "K", "file": "/k"}), EXACTLY_ONE);
        assert_eq!(
            both.map_err(|e| e.to_string()),
            Err("invalid_request: c not both; fix the argument and call again".into())
        );
        let neither = check_rule("c", &json!({}), EXACTLY_ONE).expect_err("neither");
        assert_eq!(neither.message(), "one of env and file");
    }

    #[test]
    fn a_keyword_the_evaluator_does_not_know_fails_closed() {
        let rule = r#"{"if":true,"then":{"description":"?","pattern":"^a"}}"#;
        assert!(check_rule("", &json!("a"), rule).is_err());
    }
}
