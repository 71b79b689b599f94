//! Turning a tool call's raw JSON arguments into typed input, or into an
//! `invalid_request` that names the offending field.

use serde::de::DeserializeOwned;
use serde_json::Value;
use subzero_protocol::Validate;

use crate::broker::BrokerError;

/// Arguments that are absent or an object, never `null`: `budget: null` would read as
/// "no budget", but an absent budget means the configured defaults, so a `null` (at the
/// top or for one of its fields) is refused instead of silently becoming them.
const NEVER_NULL: [&str; 1] = ["budget"];

/// Deserialize and validate tool arguments.
pub(super) fn parse<T: DeserializeOwned + Validate>(arguments: Value) -> Result<T, BrokerError> {
    refuse_null(&arguments)?;
    let input: T = serde_path_to_error::deserialize(arguments).map_err(|err| {
        let path = err.path().to_string();
        let inner = err.into_inner().to_string();
        let field = field_of(&path, &inner);
        BrokerError::invalid(&field, describe(&field, &inner))
    })?;
    input
        .validate()
        .map_err(|bad| BrokerError::invalid(bad.field(), bad.to_string()))?;
    Ok(input)
}

/// `invalid_request` for a [`NEVER_NULL`] argument, or a field of one, that is `null`.
fn refuse_null(arguments: &Value) -> Result<(), BrokerError> {
    for name in NEVER_NULL {
        let field = match arguments.get(name) {
            Some(Value::Null) => name.to_owned(),
            Some(Value::Object(fields)) => match fields.iter().find(|(_, v)| v.is_null()) {
                Some((key, _)) => format!("{name}.{key}"),
                None => continue,
            },
            _ => continue,
        };
        return Err(BrokerError::invalid(
            &field,
            format!(
                "argument `{field}` is null; leave it out to take the configured default (optional arguments are absent, never null; `subzero_info.budgets` shows the defaults)"
            ),
        ));
    }
    Ok(())
}

/// The dotted path of the field serde complained about. For a missing field serde
/// reports the enclosing object, so the field's own name is taken from the message.
fn field_of(path: &str, message: &str) -> String {
    let parent = if path == "." { "" } else { path };
    match backticked(message, "missing field `") {
        Some(name) if parent.is_empty() => name.to_owned(),
        Some(name) => format!("{parent}.{name}"),
        None => parent.to_owned(),
    }
}

fn backticked<'m>(message: &'m str, lead: &str) -> Option<&'m str> {
    let rest = &message[message.find(lead)? + lead.len()..];
    Some(&rest[..rest.find('`')?])
}

fn describe(field: &str, message: &str) -> String {
    if field.is_empty() {
        format!("the arguments are malformed: {message}; see the tool's input schema")
    } else {
        format!("argument `{field}` is invalid: {message}; see the tool's input schema")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use subzero_core::ErrorCode;
    use subzero_protocol::{GetInput, SpawnInput};

    #[test]
    fn a_missing_field_is_named() {
        let err = parse::<SpawnInput>(serde_json::json!({"templateId": "researcher"})).unwrap_err();
        assert_eq!(err.code(), ErrorCode::InvalidRequest);
        assert!(
            err.message().contains("`model`") || err.message().contains("`prompt`"),
            "{}",
            err.message()
        );
    }

    #[test]
    fn a_nested_bad_field_is_named_by_path() {
        let err = parse::<SpawnInput>(serde_json::json!({
            "prompt": "hi", "templateId": "researcher",
            "model": {"url": "http://127.0.0.1:1/v1", "model": "m"}
        }))
        .unwrap_err();
        assert!(
            err.message().contains("model.credentialRef"),
            "{}",
            err.message()
        );
    }

    #[test]
    fn a_bound_serde_cannot_check_is_still_refused() {
        let err = parse::<GetInput>(serde_json::json!({
            "childId": "ch_01JDZ8Q4W3V9K2M5N7P8R0S1T2", "waitMs": 30001
        }))
        .unwrap_err();
        assert_eq!(err.code(), ErrorCode::InvalidRequest);
        assert!(err.message().contains("waitMs"), "{}", err.message());
    }

    #[test]
    fn a_null_budget_or_budget_field_is_refused_naming_it() {
        let spawn = |budget: Value| {
            parse::<SpawnInput>(serde_json::json!({
                "prompt": "hi", "templateId": "researcher", "budget": budget,
                "model": {"url": "http://127.0.0.1:1/v1", "model": "m", "credentialRef": "c"}
            }))
        };
        let err = spawn(Value::Null).unwrap_err();
        assert_eq!(err.code(), ErrorCode::InvalidRequest);
        assert_eq!(err.details()["field"], "budget");
        let err = spawn(serde_json::json!({"maxTurns": null})).unwrap_err();
        assert_eq!(err.details()["field"], "budget.maxTurns");
        assert!(spawn(serde_json::json!({"maxTurns": 3})).is_ok());
    }

    #[test]
    fn an_unknown_field_is_refused() {
        let err = parse::<GetInput>(serde_json::json!({
            "childId": "ch_01JDZ8Q4W3V9K2M5N7P8R0S1T2", "bogus": 1
        }))
        .unwrap_err();
        assert!(err.message().contains("bogus"), "{}", err.message());
    }
}
