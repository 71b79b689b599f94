//! Typed view of the Rust worker's transcript (a JSONL tree: a `header` line, then entries
//! with `id` and `parentId`), for tests that read the file the worker wrote.

use std::path::Path;

use serde::Deserialize;

/// One line of the transcript.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Entry {
    /// `header`, `prompt`, `assistant`, `tool_result`, `summary`, `recovery_notice`, …
    #[serde(rename = "type")]
    pub kind: String,
    pub id: String,
    pub parent_id: Option<String>,
    /// The transcript version (on the header).
    pub version: Option<u32>,
    pub role: Option<String>,
    pub content: Option<String>,
}

impl Entry {
    /// The entry's text (empty without one).
    pub fn text(&self) -> &str {
        self.content.as_deref().unwrap_or_default()
    }
}

/// Every line of the transcript at `path`; panics when it cannot be read or a line is not
/// an entry.
pub fn entries(path: &Path) -> Vec<Entry> {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("transcript {} unreadable: {e}", path.display()));
    text.lines()
        .map(|line| {
            serde_json::from_str(line)
                .unwrap_or_else(|e| panic!("not a transcript entry ({e}): {line}"))
        })
        .collect()
}

/// The first entry of `kind`; panics when there is none.
pub fn first<'a>(entries: &'a [Entry], kind: &str) -> &'a Entry {
    entries
        .iter()
        .find(|e| e.kind == kind)
        .unwrap_or_else(|| panic!("no {kind} entry in {entries:#?}"))
}
