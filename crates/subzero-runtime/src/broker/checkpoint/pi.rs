//! The Pi worker's transcript: Pi's own session file (`workers/pi/src/transcript.js`).
//!
//! JSONL: the first line is the `session` header (`version`, no `id` in the tree), then
//! entries with `id` and `parentId` (`null` for a root). The digest of a leaf is the SHA-256
//! of the header line followed by the lines on the path from its root to the leaf, each with
//! its newline. A line that is not JSON — the half-written end a crash leaves, which Pi
//! terminates with a newline when it next opens the file — is in no path.

use std::collections::HashMap;

use serde::Deserialize;

use super::Parsed;

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Line {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    parent_id: Option<String>,
    #[serde(default)]
    version: Option<u64>,
}

/// A Pi session file's tree; its first root is the start of the file's first branch.
pub(super) fn parse(text: &str) -> Result<Parsed<'_>, String> {
    let mut header = None;
    let mut root = None;
    let mut lines = HashMap::new();
    for raw in text.split_inclusive('\n') {
        if !raw.ends_with('\n') || raw.trim().is_empty() {
            continue;
        }
        let Ok(line) = serde_json::from_str::<Line>(raw.trim_end()) else {
            continue;
        };
        if line.kind == "session" && header.is_none() {
            header = Some((raw, line.version));
            continue;
        }
        let Some(id) = line.id else { continue };
        if line.parent_id.is_none() && root.is_none() {
            root = Some(id.clone());
        }
        lines.insert(id, (line.parent_id, raw));
    }
    let (header, version) = header.ok_or("the transcript has no Pi session header")?;
    Ok(Parsed {
        version,
        first_root: root,
        lines,
        path_root: None,
        prefix: header,
        rootless: "the transcript's first entry has no path",
    })
}
