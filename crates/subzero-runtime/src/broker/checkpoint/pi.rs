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

#[cfg(test)]
mod tests {
    use subzero_core::lifecycle::Supervisor;
    use subzero_core::{ChildId, Sha256Digest};

    use super::super::{Format, verify_text};
    use super::*;
    use crate::store::LeafRef as StoredLeaf;

    /// The process's minting authority (no broker runs in this test process).
    fn authority() -> &'static Supervisor {
        crate::supervisor::proof::authority().expect("the runtime takes the authority")
    }

    const HEADER: &str =
        "{\"type\":\"session\",\"version\":3,\"id\":\"s\",\"timestamp\":\"t\",\"cwd\":\"/w\"}\n";
    const A: &str = "{\"type\":\"model_change\",\"id\":\"a\",\"parentId\":null}\n";
    const B: &str = "{\"type\":\"message\",\"id\":\"b\",\"parentId\":\"a\"}\n";
    const C: &str = "{\"type\":\"message\",\"id\":\"c\",\"parentId\":\"b\"}\n";
    const D: &str = "{\"type\":\"message\",\"id\":\"d\",\"parentId\":\"a\"}\n";

    fn child() -> ChildId {
        ChildId::parse("ch_01JDZ8Q4W3V9K2M5N7P8R0S1T2").expect("id")
    }

    #[test]
    fn a_leafs_digest_covers_the_header_and_its_path_only() {
        let text = format!("{HEADER}{A}{B}{D}{C}not json, a crash's half line\n");
        let session = parse(&text).expect("parses");
        let expected = Sha256Digest::of(format!("{HEADER}{A}{B}{C}").as_bytes());
        assert_eq!(session.digest_of("c"), Some(expected));
        // Another branch does not change it.
        let straight = format!("{HEADER}{A}{B}{C}");
        let other = parse(&straight).expect("parses");
        assert_eq!(other.digest_of("c"), Some(expected));
        assert_eq!(session.digest_of("missing"), None);
    }

    #[test]
    fn a_recorded_leaf_verifies_and_a_changed_line_is_refused() {
        let text = format!("{HEADER}{A}{B}{C}");
        let digest = Sha256Digest::of(text.as_bytes()).to_string();
        let recorded = StoredLeaf {
            leaf_id: "c".to_owned(),
            digest: digest.clone(),
        };
        let verified = verify_text(authority(), child(), &text, Some(&recorded), 3, Format::Pi)
            .expect("verified");
        assert_eq!(verified.start, Some(("c".to_owned(), digest)));
        let tampered = text.replace(
            "\"b\",\"parentId\":\"a\"",
            "\"b\",\"parentId\":\"a\",\"x\":1",
        );
        let err = verify_text(
            authority(),
            child(),
            &tampered,
            Some(&recorded),
            3,
            Format::Pi,
        )
        .expect_err("refused");
        assert_eq!(err.code(), subzero_core::ErrorCode::CheckpointIncompatible);
    }

    #[test]
    fn an_unknown_session_version_is_refused_never_migrated() {
        let text = format!("{}{A}", HEADER.replace("\"version\":3", "\"version\":4"));
        let err =
            verify_text(authority(), child(), &text, None, 3, Format::Pi).expect_err("refused");
        assert!(
            err.message().contains("never migrated"),
            "{}",
            err.message()
        );
    }

    #[test]
    fn without_a_recorded_leaf_a_resume_starts_at_the_first_root() {
        let text = format!("{HEADER}{A}{B}");
        let verified =
            verify_text(authority(), child(), &text, None, 3, Format::Pi).expect("verified");
        let digest = Sha256Digest::of(format!("{HEADER}{A}").as_bytes()).to_string();
        assert_eq!(verified.start, Some(("a".to_owned(), digest)));
    }
}
