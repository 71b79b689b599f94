//! How many requests the MCP server has in hand at once, so a host that pipelines
//! thousands of requests and reads the answers late cannot make the broker hold them all.
//!
//! rmcp starts a task per request as soon as it reads it and keeps every answer until the
//! host reads it, so the framing layer meters what it passes on: a request takes one of
//! [`Window::SIZE`] places before it goes to the server, and gives it back when its
//! answer has been written to stdout (or the host cancelled it; rmcp answers no cancelled
//! request). When every place is taken, stdin is not read, and the host's writes block in
//! the pipe — the memory held stays bounded by the window, not by the burst.
//!
//! A tool call that waits (`waitMs` > 0: `subzero_get` for events, `subzero_stop` for
//! the confirmation) takes no place: it parks on the broker, costs nothing until it
//! wakes, and many of them may wait at once.

use std::collections::HashSet;
use std::sync::Mutex;

use serde_json::Value;
use tokio::sync::Semaphore;

/// The requests in the server's hands.
pub(super) struct Window {
    places: Semaphore,
    /// The ids (as JSON text) holding a place.
    open: Mutex<HashSet<String>>,
}

/// What a frame passed to the server means for the window.
#[derive(Debug, PartialEq)]
pub(super) enum Metered {
    /// A request that holds a place until answered: its id.
    Request(Value),
    /// A cancellation of the request with this id.
    Cancels(Value),
    /// Neither (a notification, a call that waits, a response to the server).
    Free,
}

impl Window {
    /// Requests in hand at once.
    pub(super) const SIZE: usize = 64;

    pub(super) fn new() -> Self {
        Window {
            places: Semaphore::new(Self::SIZE),
            open: Mutex::new(HashSet::new()),
        }
    }

    fn open(&self) -> std::sync::MutexGuard<'_, HashSet<String>> {
        self.open
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Wait for a place for the request `id`. A second request with an id already in
    /// hand takes no second place (the server answers the id once).
    pub(super) async fn admit(&self, id: &Value) {
        if self.open().contains(&id.to_string()) {
            return;
        }
        if let Ok(place) = self.places.acquire().await {
            place.forget();
        }
        if !self.open().insert(id.to_string()) {
            self.places.add_permits(1);
        }
    }

    /// The request `id` ended without an answer to come (cancelled) or with one written.
    pub(super) fn release(&self, id: &Value) {
        if self.open().remove(&id.to_string()) {
            self.places.add_permits(1);
        }
    }

    /// One line the server wrote: a response gives its request's place back.
    pub(super) fn written(&self, line: &[u8]) {
        let found = super::scan::scan(line);
        let id = found.id(line);
        if !id.is_null() {
            self.release(&id);
        }
    }
}

/// How a frame about to go to the server is metered.
pub(super) fn metered(frame: &Value) -> Metered {
    let Some(method) = frame.get("method").and_then(Value::as_str) else {
        return Metered::Free;
    };
    if method == "notifications/cancelled" {
        return frame
            .pointer("/params/requestId")
            .cloned()
            .map_or(Metered::Free, Metered::Cancels);
    }
    let Some(id) = frame.get("id").filter(|id| !id.is_null()) else {
        return Metered::Free;
    };
    let waits = method == "tools/call"
        && frame
            .pointer("/params/arguments/waitMs")
            .and_then(Value::as_u64)
            .is_some_and(|ms| ms > 0);
    if waits {
        Metered::Free
    } else {
        Metered::Request(id.clone())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn requests_are_metered_and_waiting_gets_and_notifications_are_not() {
        assert_eq!(
            metered(&json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list"})),
            Metered::Request(json!(3))
        );
        let get = |wait: u64| {
            json!({"jsonrpc": "2.0", "id": "g", "method": "tools/call",
                "params": {"name": "subzero_get", "arguments": {"childId": "c", "waitMs": wait}}})
        };
        assert_eq!(metered(&get(0)), Metered::Request(json!("g")));
        assert_eq!(metered(&get(500)), Metered::Free);
        assert_eq!(
            metered(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"})),
            Metered::Free
        );
        assert_eq!(
            metered(
                &json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                "params": {"requestId": 7}})
            ),
            Metered::Cancels(json!(7))
        );
        assert_eq!(
            metered(&json!({"jsonrpc": "2.0", "id": 1, "result": {}})),
            Metered::Free
        );
    }

    #[tokio::test]
    async fn a_place_comes_back_with_the_answer_or_the_cancellation() {
        let window = Window::new();
        for id in 0..Window::SIZE {
            window.admit(&json!(id)).await;
        }
        assert_eq!(window.places.available_permits(), 0);
        // The same id again takes no second place.
        window.admit(&json!(0)).await;
        window.written(br#"{"jsonrpc":"2.0","id":0,"result":{}}"#);
        assert_eq!(window.places.available_permits(), 1);
        window.release(&json!(1));
        window.release(&json!(1));
        assert_eq!(window.places.available_permits(), 2);
        // A notification line gives nothing back.
        window.written(br#"{"jsonrpc":"2.0","method":"notifications/message"}"#);
        assert_eq!(window.places.available_permits(), 2);
    }
}
