//! The worker's control messages the tests read, as the protocol's types: what a `hello`
//! reports and how a `run_settled` ended.

use serde_json::Value;
use subzero_protocol as p;

/// Reads a line of the worker's stdout as a control message, panicking with it when it is not one.
pub fn message(line: &Value) -> p::WorkerMessage {
    serde_json::from_value(line.clone())
        .unwrap_or_else(|e| panic!("not a worker message ({e}): {line}"))
}

/// Whether a line of the worker's stdout is its `hello`.
pub fn is_hello(line: &Value) -> bool {
    matches!(message(line), p::WorkerMessage::Hello { .. })
}

/// The containment a worker's `hello` reports.
pub fn hello_containment(line: &Value) -> p::ContainmentSupport {
    match message(line) {
        p::WorkerMessage::Hello {
            containment: Some(containment),
            ..
        } => containment,
        _ => panic!("not a hello with containment: {line}"),
    }
}

/// How a run ended: a `run_settled` message's status and error.
#[derive(Debug)]
pub struct Settled {
    pub status: p::RunSettledStatus,
    pub error: Option<p::ErrorBody>,
}

/// Reads a `run_settled` message.
pub fn run_settled(line: &Value) -> Settled {
    match message(line) {
        p::WorkerMessage::RunSettled { status, error, .. } => Settled { status, error },
        _ => panic!("not run_settled: {line}"),
    }
}
