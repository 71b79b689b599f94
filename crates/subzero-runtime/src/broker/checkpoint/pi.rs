//! The Pi worker's transcript: Pi's own session file (`workers/pi/src/transcript.js`).
//!
//! JSONL: the first line is the `session` header (`version`, no `id` in the tree), then
//! entries with `id` and `parentId` (`null` for a root). The digest of a leaf is the SHA-256
//! of the header line followed by the lines on the path from its root to the leaf, each with
//! its newline. A line that is not JSON — the half-written end a crash leaves, which Pi
//! terminates with a newline when it next opens the file — is in no path.

use std::collections::HashMap;

use serde::Deserialize;
use subzero_core::lifecycle::{Checkpoint, LeafRef, Supervisor};
use subzero_core::{ChildId, Sha256Digest};

use super::Verified;
use crate::broker::BrokerError;
use crate::store::LeafRef as StoredLeaf;

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

/// A Pi session file's tree.
struct Session<'t> {
    header: &'t str,
    version: Option<u64>,
    /// The first root entry (the start of the file's first branch).
    root: Option<String>,
    lines: super::Lines<'t>,
}

impl<'t> Session<'t> {
    fn parse(text: &'t str) -> Result<Self, String> {
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
        Ok(Session {
            header,
            version,
            root,
            lines,
        })
    }

    fn digest_of(&self, leaf: &str) -> Option<Sha256Digest> {
        super::digest_of_path(&self.lines, leaf, None, self.header)
    }
}

/// Verifies the recorded leaf of a Pi transcript (or, with none recorded, its first root).
pub(super) fn verify(
    supervisor: &Supervisor,
    child: ChildId,
    text: &str,
    recorded: Option<&StoredLeaf>,
    transcript_version: u64,
    incompatible: &dyn Fn(String) -> BrokerError,
) -> Result<Verified, BrokerError> {
    let session = Session::parse(text).map_err(|e| incompatible(e.to_owned()))?;
    if session.version != Some(transcript_version) {
        return Err(incompatible(format!(
            "the transcript is Pi session version {:?} but this worker reads version {transcript_version}; it is never migrated",
            session.version
        )));
    }
    let recorded = recorded
        .map(|l| {
            let digest = Sha256Digest::parse(&l.digest)
                .map_err(|e| incompatible(format!("the recorded digest is malformed ({e})")))?;
            LeafRef::new(&l.leaf_id, digest).map_err(|e| incompatible(e.to_string()))
        })
        .transpose()?;
    let Some(target) = recorded
        .as_ref()
        .map(|l| l.leaf_id().to_owned())
        .or_else(|| session.root.clone())
    else {
        // A header and nothing else: nothing to branch from.
        return Ok(Verified::default());
    };
    let observed = session
        .digest_of(&target)
        .map(|d| LeafRef::new(&target, d))
        .transpose()
        .map_err(|e| incompatible(e.to_string()))?;
    // Mint point: `session` was parsed from `child`'s transcript, read from disk by the
    // caller, and `digest_of` computed this leaf's digest from the lines on its root→leaf
    // path.
    let observed = observed.map(|leaf| supervisor.observed_leaf(child, leaf));
    let checkpoint = Checkpoint::verify(child, recorded.as_ref(), observed.as_ref())
        .map_err(|e| incompatible(e.to_string()))?;
    let start = match checkpoint.leaf() {
        Some(leaf) => (leaf.leaf_id().to_owned(), leaf.digest().to_string()),
        None => {
            let digest = session
                .digest_of(&target)
                .ok_or_else(|| incompatible("the transcript's first entry has no path".into()))?;
            (target, digest.to_string())
        }
    };
    Ok(Verified {
        start: Some(start),
        observed: recorded.and(observed),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

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

    fn refuse(why: String) -> BrokerError {
        BrokerError::new(subzero_core::ErrorCode::CheckpointIncompatible, why)
    }

    #[test]
    fn a_leafs_digest_covers_the_header_and_its_path_only() {
        let text = format!("{HEADER}{A}{B}{D}{C}not json, a crash's half line\n");
        let session = Session::parse(&text).expect("parses");
        let expected = Sha256Digest::of(format!("{HEADER}{A}{B}{C}").as_bytes());
        assert_eq!(session.digest_of("c"), Some(expected));
        // Another branch does not change it.
        let straight = format!("{HEADER}{A}{B}{C}");
        let other = Session::parse(&straight).expect("parses");
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
        let verified =
            verify(authority(), child(), &text, Some(&recorded), 3, &refuse).expect("verified");
        assert_eq!(verified.start, Some(("c".to_owned(), digest)));
        let tampered = text.replace(
            "\"b\",\"parentId\":\"a\"",
            "\"b\",\"parentId\":\"a\",\"x\":1",
        );
        let err = verify(authority(), child(), &tampered, Some(&recorded), 3, &refuse)
            .expect_err("refused");
        assert_eq!(err.code(), subzero_core::ErrorCode::CheckpointIncompatible);
    }

    #[test]
    fn an_unknown_session_version_is_refused_never_migrated() {
        let text = format!("{}{A}", HEADER.replace("\"version\":3", "\"version\":4"));
        let err = verify(authority(), child(), &text, None, 3, &refuse).expect_err("refused");
        assert!(
            err.message().contains("never migrated"),
            "{}",
            err.message()
        );
    }

    #[test]
    fn without_a_recorded_leaf_a_resume_starts_at_the_first_root() {
        let text = format!("{HEADER}{A}{B}");
        let verified = verify(authority(), child(), &text, None, 3, &refuse).expect("verified");
        let digest = Sha256Digest::of(format!("{HEADER}{A}").as_bytes()).to_string();
        assert_eq!(verified.start, Some(("a".to_owned(), digest)));
    }
}
