//! Typed views of the model request bodies a [`ScriptedServer`](crate::ScriptedServer)
//! recorded, one module per protocol: the fields tests assert on, read once at the edge
//! ([`view`]) so assertions read `request.messages[1].role`, not JSON paths.
//!
//! The views that stand for a whole value a test compares (a Messages content block, a
//! Responses input item) refuse unknown fields, so comparing them stays as strict as
//! comparing the JSON was.
//!
//! ```no_run
//! # let server = subzero_testkit::ScriptedServer::start(vec![]).expect("server");
//! use subzero_testkit::model_requests::chat;
//! let sent = chat::Request::of(&server.requests()[0]);
//! assert_eq!(sent.messages[0].role, "system");
//! ```

use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::RecordedRequest;

pub mod chat;
pub mod messages;
pub mod responses;

/// `request`'s body read as `T`; panics with the body when it is not JSON of that shape.
pub fn view<T: DeserializeOwned>(request: &RecordedRequest) -> T {
    let body: Value = serde_json::from_str(&request.body)
        .unwrap_or_else(|e| panic!("the request body is not JSON ({e}): {}", request.body));
    from_json(&body)
}

/// The body of `request` read as `T`, after `check` (the API's own acceptance check,
/// named `api` in the panic) accepted it; panics with the body otherwise.
pub fn checked<T: DeserializeOwned>(
    request: &RecordedRequest,
    api: &str,
    check: fn(&Value) -> Result<(), String>,
) -> T {
    let body = request.json().unwrap_or_else(|| {
        panic!("the request body is not JSON: {}", request.body);
    });
    if let Err(refused) = check(&body) {
        panic!("the {api} API would refuse this request ({refused}): {body:#}");
    }
    from_json(&body)
}

/// `value` read as `T`; panics with the JSON when it does not fit.
pub fn from_json<T: DeserializeOwned>(value: &Value) -> T {
    T::deserialize(value)
        .unwrap_or_else(|e| panic!("not a {} ({e}): {value:#}", std::any::type_name::<T>()))
}

/// Text content as a request carries it: a string, or content parts whose `text`s
/// are joined (as some clients send it). Derefs to the text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContentText(String);

impl std::ops::Deref for ContentText {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl<'de> Deserialize<'de> for ContentText {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        /// One content part; only its text is read.
        #[derive(Deserialize)]
        struct Part {
            text: Option<String>,
        }
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Shape {
            Text(String),
            Parts(Vec<Part>),
        }
        Ok(ContentText(match Shape::deserialize(deserializer)? {
            Shape::Text(text) => text,
            Shape::Parts(parts) => parts.into_iter().filter_map(|p| p.text).collect(),
        }))
    }
}

impl std::fmt::Display for ContentText {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}
