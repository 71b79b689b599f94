//! The Responses stream's events as read: lenient serde structs holding the union of the
//! fields the events [`super::stream`] uses carry.

use serde::Deserialize;

use super::super::wire::{ProviderError, lenient};

/// One stream event as read: the union of the fields the events this reader uses carry.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct Event {
    #[serde(rename = "type", deserialize_with = "lenient")]
    pub kind: String,
    #[serde(deserialize_with = "lenient")]
    pub delta: Option<String>,
    #[serde(deserialize_with = "lenient")]
    pub item_id: Option<String>,
    #[serde(deserialize_with = "lenient")]
    pub output_index: Option<u64>,
    #[serde(deserialize_with = "lenient")]
    pub arguments: Option<String>,
    #[serde(deserialize_with = "lenient")]
    pub item: Option<OutputItem>,
    #[serde(deserialize_with = "lenient")]
    pub response: Response,
    pub error: Option<ProviderError>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct OutputItem {
    #[serde(rename = "type", deserialize_with = "lenient")]
    pub kind: Option<String>,
    #[serde(deserialize_with = "lenient")]
    pub id: Option<String>,
    #[serde(deserialize_with = "lenient")]
    pub call_id: Option<String>,
    #[serde(deserialize_with = "lenient")]
    pub name: Option<String>,
    #[serde(deserialize_with = "lenient")]
    pub arguments: Option<String>,
    #[serde(deserialize_with = "lenient")]
    pub content: Vec<ContentPart>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct ContentPart {
    #[serde(deserialize_with = "lenient")]
    pub text: Option<String>,
    #[serde(deserialize_with = "lenient")]
    pub refusal: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct Response {
    #[serde(deserialize_with = "lenient")]
    pub usage: Option<Usage>,
    #[serde(deserialize_with = "lenient")]
    pub output: Vec<OutputItem>,
    #[serde(deserialize_with = "lenient")]
    pub incomplete_details: Option<IncompleteDetails>,
    pub error: Option<ProviderError>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct IncompleteDetails {
    #[serde(deserialize_with = "lenient")]
    pub reason: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct Usage {
    #[serde(deserialize_with = "lenient")]
    pub input_tokens: u64,
    #[serde(deserialize_with = "lenient")]
    pub output_tokens: u64,
}
