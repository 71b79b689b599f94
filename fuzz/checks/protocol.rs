//! The checks behind the `tool_arguments` and `control_lines` fuzz targets.
//!
//! Shared by the fuzz targets (`fuzz/fuzz_targets/`) and the seed replay in
//! `crates/subzero-protocol/tests/testsuite/fuzz_smoke.rs`, which includes this file by path, so CI runs
//! the same assertions on stable without libFuzzer. Each check takes raw bytes, must never
//! panic except on a broken invariant, and is deterministic.

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use subzero_protocol::{
    ApplyInput, BrokerMessage, GetInput, InfoInput, ListInput, OutputInput, ResumeInput, SendInput,
    SpawnInput, StopInput, Validate, WorkerMessage,
};

/// (a) MCP tool arguments: the bytes as one JSON document, read as each of the nine tool
/// inputs the way the broker does (a `Value` first, then the typed input, then `Validate`).
pub fn tool_arguments(data: &[u8]) {
    let Ok(arguments) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    accepts_consistently::<InfoInput>(&arguments);
    accepts_consistently::<SpawnInput>(&arguments);
    accepts_consistently::<GetInput>(&arguments);
    accepts_consistently::<ListInput>(&arguments);
    accepts_consistently::<SendInput>(&arguments);
    accepts_consistently::<StopInput>(&arguments);
    accepts_consistently::<ResumeInput>(&arguments);
    accepts_consistently::<OutputInput>(&arguments);
    accepts_consistently::<ApplyInput>(&arguments);
}

/// (b) Worker control lines: the bytes as one JSON line, read as a [`BrokerMessage`] (the
/// worker's stdin) and as a [`WorkerMessage`] (its stdout), each followed by `Validate`.
pub fn control_line(data: &[u8]) {
    if let Ok(message) = serde_json::from_slice::<BrokerMessage>(data) {
        validated_round_trip(&message);
    }
    if let Ok(message) = serde_json::from_slice::<WorkerMessage>(data) {
        validated_round_trip(&message);
    }
}

/// Reads `T` from `arguments`; an accepted value must survive [`validated_round_trip`].
fn accepts_consistently<T>(arguments: &Value)
where
    T: DeserializeOwned + Serialize + Validate,
{
    if let Ok(input) = serde_json::from_value::<T>(arguments.clone()) {
        validated_round_trip(&input);
    }
}

/// A value that passes `Validate` serializes to one line, and reads back to a value that
/// passes `Validate` and serializes the same; a value that fails names a wire error body.
fn validated_round_trip<T>(value: &T)
where
    T: DeserializeOwned + Serialize + Validate,
{
    if let Err(invalid) = value.validate() {
        let body = invalid.to_error_body();
        assert!(
            serde_json::to_string(&body).is_ok(),
            "the invalid_request body of {invalid} does not serialize"
        );
        return;
    }
    let line = serde_json::to_string(value).expect("a validated value serializes");
    assert!(
        !line.contains('\n'),
        "a serialized value spans lines: {line}"
    );
    let first = serde_json::to_value(value).expect("a validated value serializes");
    let again: T = serde_json::from_value(first.clone())
        .unwrap_or_else(|err| panic!("a validated value does not read back ({err}): {first}"));
    if let Err(invalid) = again.validate() {
        panic!("a validated value fails Validate after a round trip ({invalid}): {first}");
    }
    let second = serde_json::to_value(&again).expect("a validated value serializes");
    assert_eq!(first, second, "a round trip changed the value");
}
