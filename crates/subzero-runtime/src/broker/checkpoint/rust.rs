//! The Rust worker's transcript: an append-only JSONL tree. A header line (the root, with
//! `version`) and entries with `id` and `parentId`; the digest of a leaf is the SHA-256 of
//! the lines on the path from the root to that leaf, each with its newline. A half-written
//! last line (no newline) is what a crash leaves, and is not part of the tree; any other
//! line that is not an entry is refused.

use std::collections::HashMap;

use serde::Deserialize;

use super::Parsed;

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Line {
    id: String,
    #[serde(default)]
    parent_id: Option<String>,
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    version: Option<u64>,
}

/// The tree of a Rust worker's transcript.
pub(super) fn parse(text: &str) -> Result<Parsed<'_>, String> {
    let mut lines = HashMap::new();
    let mut root = None;
    let mut version = None;
    for raw in text.split_inclusive('\n') {
        if !raw.ends_with('\n') || raw.trim().is_empty() {
            continue;
        }
        let line: Line = serde_json::from_str(raw.trim_end())
            .map_err(|e| format!("a transcript line is malformed ({e})"))?;
        if line.kind == "header" && root.is_none() {
            root = Some(line.id.clone());
            version = line.version;
        }
        lines.insert(line.id, (line.parent_id, raw));
    }
    let root: String = root.ok_or("the transcript has no header")?;
    Ok(Parsed {
        version,
        first_root: Some(root.clone()),
        lines,
        path_root: Some(root),
        prefix: "",
        rootless: "the transcript has no root",
    })
}
