//! Every JSON-RPC frame a host (or a broken one) sends gets an answer, and the broker keeps
//! serving: −32700 for a frame that is not JSON (or not UTF-8), −32600 for an invalid
//! request (no `jsonrpc`, too deep, too large, a batch), −32602 for params of the wrong
//! shape (arrays included); a lone UTF-16 surrogate — which JavaScript hosts send when a
//! string is cut inside an emoji — is read as U+FFFD and the call proceeds.

use std::time::Duration;

use crate::support::faults::RawBroker;
use crate::support::mcp::Env;
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(10);

/// Sends `frame` (one line) and returns the answer carrying `id`.
fn answer(broker: &mut RawBroker, frame: &[u8], id: &Value) -> Value {
    let mut line = frame.to_vec();
    line.push(b'\n');
    broker.write_raw(&line);
    broker.response_to(id, WAIT).unwrap_or_else(|| {
        panic!(
            "no answer to {:?}",
            String::from_utf8_lossy(&frame[..frame.len().min(200)])
        )
    })
}

fn error_code(reply: &Value) -> i64 {
    reply["error"]["code"]
        .as_i64()
        .unwrap_or_else(|| panic!("not an error: {reply}"))
}

/// The broker still answers a normal call after whatever came before.
fn still_serving(broker: &mut RawBroker) {
    let id = broker.call_async("subzero_list", json!({}));
    let reply = broker.response(id, WAIT).expect("the broker still serves");
    assert!(reply.get("result").is_some(), "{reply}");
}

fn broker() -> (Env, RawBroker) {
    let env = Env::new(Vec::new());
    let broker = RawBroker::start(&env.command("broker"));
    (env, broker)
}

#[test]
fn a_frame_that_is_not_json_gets_a_parse_error() {
    let (_env, mut b) = broker();
    // A frame cut short still names its id: the answer carries it, so the caller's wait ends.
    let reply = answer(
        &mut b,
        br#"{"jsonrpc":"2.0","id":7,"method":"tools/list""#,
        &json!(7),
    );
    assert_eq!(error_code(&reply), -32700, "{reply}");
    let reply = answer(&mut b, br#"{"jsonrpc" "2.0"}"#, &Value::Null);
    assert_eq!(error_code(&reply), -32700, "{reply}");
    let reply = answer(&mut b, b"\xff\xfe{not utf-8}", &Value::Null);
    assert_eq!(error_code(&reply), -32700, "{reply}");
    still_serving(&mut b);
}

#[test]
fn invalid_utf8_inside_a_request_gets_a_parse_error() {
    let (_env, mut b) = broker();
    let mut frame =
        br#"{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"subzero_list","arguments":{"workspaceRoot":""#
            .to_vec();
    frame.extend_from_slice(b"\xc3\x28");
    frame.extend_from_slice(br#""}}}"#);
    let reply = answer(&mut b, &frame, &json!(8));
    assert_eq!(error_code(&reply), -32700, "{reply}");
    still_serving(&mut b);
}

#[test]
fn a_request_without_jsonrpc_gets_invalid_request_with_its_id() {
    let (_env, mut b) = broker();
    let reply = answer(
        &mut b,
        br#"{"id":"abc","method":"tools/list"}"#,
        &json!("abc"),
    );
    assert_eq!(error_code(&reply), -32600, "{reply}");
    assert_eq!(reply["jsonrpc"], "2.0");
    let reply = answer(
        &mut b,
        br#"{"jsonrpc":"1.0","id":9,"method":"tools/list"}"#,
        &json!(9),
    );
    assert_eq!(error_code(&reply), -32600, "{reply}");
    let reply = answer(&mut b, br#"[1,2,3]"#, &Value::Null);
    assert_eq!(error_code(&reply), -32600, "{reply}");
    let reply = answer(&mut b, br#""just a string""#, &Value::Null);
    assert_eq!(error_code(&reply), -32600, "{reply}");
    still_serving(&mut b);
}

#[test]
fn nesting_deeper_than_128_levels_gets_invalid_request_with_its_id() {
    let (_env, mut b) = broker();
    let deep = format!(
        r#"{{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{{"name":"subzero_list","arguments":{{"x":{}1{}}}}}}}"#,
        "[".repeat(200),
        "]".repeat(200)
    );
    let reply = answer(&mut b, deep.as_bytes(), &json!(10));
    assert_eq!(error_code(&reply), -32600, "{reply}");
    still_serving(&mut b);
}

#[test]
fn a_frame_over_16_mib_gets_invalid_request_and_is_skipped() {
    let (_env, mut b) = broker();
    let big = format!(
        r#"{{"jsonrpc":"2.0","id":11,"method":"tools/call","params":{{"name":"subzero_list","arguments":{{"pad":"{}"}}}}}}"#,
        "a".repeat(17 * 1024 * 1024)
    );
    let reply = answer(&mut b, big.as_bytes(), &json!(11));
    assert_eq!(error_code(&reply), -32600, "{reply}");
    let message = reply["error"]["message"].as_str().unwrap_or("");
    assert!(message.contains("16777216"), "{reply}");
    still_serving(&mut b);
}

#[test]
fn params_of_the_wrong_shape_get_invalid_params() {
    let (_env, mut b) = broker();
    let reply = answer(
        &mut b,
        br#"{"jsonrpc":"2.0","id":12,"method":"tools/call","params":["subzero_list",{}]}"#,
        &json!(12),
    );
    assert_eq!(error_code(&reply), -32602, "{reply}");
    let reply = answer(
        &mut b,
        br#"{"jsonrpc":"2.0","id":13,"method":"tools/call","params":{"name":"subzero_list","arguments":[1]}}"#,
        &json!(13),
    );
    assert_eq!(error_code(&reply), -32602, "{reply}");
    still_serving(&mut b);
}

#[test]
fn a_lone_surrogate_is_read_as_a_replacement_character() {
    let (env, mut b) = broker();
    let frame = format!(
        r#"{{"jsonrpc":"2.0","id":14,"method":"tools/call","params":{{"name":"subzero_list","arguments":{{"workspaceRoot":"{}\ud800"}}}}}}"#,
        env.workspace().display()
    );
    let reply = answer(&mut b, frame.as_bytes(), &json!(14));
    // Answered as a tool call (the path with U+FFFD is simply not a workspace), never dropped.
    assert!(reply.get("result").is_some(), "{reply}");
    still_serving(&mut b);
}
