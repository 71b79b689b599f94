//! Verifying a child's recorded checkpoint against its transcript before a resume.
//!
//! Each worker writes its own transcript format, chosen by the child's worker (frozen in its
//! snapshot, recorded with the transcript version from the worker's hello):
//! - the Rust worker's append-only JSONL tree: a header line (the root, with `version`) and
//!   entries with `id` and `parentId`; the digest of a leaf is the SHA-256 of the lines on
//!   the path from the root to that leaf, each with its newline;
//! - the Pi worker's: Pi's own session file ([`pi`]).
//!
//! Either way the digest is the one the worker reports in `leaf_committed`. Verification
//! reads the file and changes nothing; a resume then branches from the verified leaf (or
//! from the root when no run of the child ever completed). An unknown version is refused,
//! never migrated.

mod pi;

use std::collections::HashMap;
use std::path::Path;

use serde::Deserialize;
use subzero_core::lifecycle::{Checkpoint, LeafRef, ObservedLeaf, Supervisor};
use subzero_core::{ChildId, ErrorCode, Sha256Digest};

use super::BrokerError;
use crate::store::LeafRef as StoredLeaf;

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

/// What a resume learned from the transcript.
#[derive(Debug, Default)]
pub(super) struct Verified {
    /// `(leafId, digest)` a resumed run starts from; `None` when the child has no
    /// transcript yet (it was interrupted before its worker wrote anything).
    pub start: Option<(String, String)>,
    /// The transcript's own digest at the recorded leaf, for the store to check against
    /// the leaf it has recorded when it commits the resume.
    pub observed: Option<ObservedLeaf>,
}

/// Which worker wrote the transcript, so which format it is in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Format {
    /// The Rust worker's tree.
    Rust,
    /// Pi's session file.
    Pi,
}

/// Verify the recorded leaf (or, with none recorded, the transcript root).
pub(super) fn verify(
    supervisor: &Supervisor,
    child: ChildId,
    transcript: &Path,
    recorded: Option<&StoredLeaf>,
    transcript_version: u64,
    format: Format,
) -> Result<Verified, BrokerError> {
    let incompatible = |why: String| {
        BrokerError::new(
            ErrorCode::CheckpointIncompatible,
            format!(
                "child {child}'s checkpoint cannot be resumed: {why}; its stored state was left unchanged"
            ),
        )
    };
    let text = match std::fs::read_to_string(transcript) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && recorded.is_none() => {
            return Ok(Verified::default());
        }
        Err(e) => {
            return Err(incompatible(format!(
                "its transcript {} cannot be read ({e})",
                transcript.display()
            )));
        }
    };
    if format == Format::Pi {
        return pi::verify(
            supervisor,
            child,
            &text,
            recorded,
            transcript_version,
            &incompatible,
        );
    }
    let tree = Tree::parse(&text).map_err(&incompatible)?;
    if tree.version != Some(transcript_version) {
        return Err(incompatible(format!(
            "the transcript is version {:?} but this worker reads version {transcript_version}",
            tree.version
        )));
    }
    let recorded = recorded
        .map(|l| {
            let digest = Sha256Digest::parse(&l.digest)
                .map_err(|e| incompatible(format!("the recorded digest is malformed ({e})")))?;
            LeafRef::new(&l.leaf_id, digest).map_err(|e| incompatible(e.to_string()))
        })
        .transpose()?;
    let target = recorded
        .as_ref()
        .map_or(tree.root.as_str(), |l| l.leaf_id());
    let observed = tree
        .digest_of(target)
        .map(|d| LeafRef::new(target, d))
        .transpose()
        .map_err(|e| incompatible(e.to_string()))?;
    // Mint point: `tree` was parsed from `child`'s transcript, read from disk above, and
    // `digest_of` computed this leaf's digest from the lines on its root→leaf path.
    let observed = observed.map(|leaf| supervisor.observed_leaf(child, leaf));
    let checkpoint = Checkpoint::verify(child, recorded.as_ref(), observed.as_ref())
        .map_err(|e| incompatible(e.to_string()))?;
    let start = match checkpoint.leaf() {
        Some(leaf) => (leaf.leaf_id().to_owned(), leaf.digest().to_string()),
        None => {
            let digest = tree
                .digest_of(&tree.root)
                .ok_or_else(|| incompatible("the transcript has no root".into()))?;
            (tree.root.clone(), digest.to_string())
        }
    };
    Ok(Verified {
        start: Some(start),
        observed: recorded.and(observed),
    })
}

/// A transcript's lines by id: each with its parent's id and the raw line (newline kept).
type Lines<'t> = HashMap<String, (Option<String>, &'t str)>;

/// The digest of the path from a root to `leaf` (with `root`, from that root), after
/// `prefix`: the protocol's one definition (`subzero_protocol::transcript::path_digest`),
/// the same the worker computes; `None` when the path is broken.
fn digest_of_path(
    lines: &Lines<'_>,
    leaf: &str,
    root: Option<&str>,
    prefix: &str,
) -> Option<Sha256Digest> {
    let digest =
        subzero_protocol::transcript::path_digest(leaf, root, prefix, lines.len(), |id| {
            lines.get(id).map(|(parent, raw)| (parent.as_deref(), *raw))
        })?;
    Sha256Digest::parse(&digest).ok()
}

struct Tree<'t> {
    root: String,
    version: Option<u64>,
    lines: Lines<'t>,
}

impl<'t> Tree<'t> {
    fn parse(text: &'t str) -> Result<Self, String> {
        let mut lines = HashMap::new();
        let mut root = None;
        let mut version = None;
        for raw in text.split_inclusive('\n') {
            // A half-written last line (no newline) is what a crash leaves: not part of the tree.
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
        let root = root.ok_or("the transcript has no header")?;
        Ok(Tree {
            root,
            version,
            lines,
        })
    }

    /// Digest of the root→`leaf` path, or `None` when `leaf` is not in the tree or its
    /// path does not reach the root.
    fn digest_of(&self, leaf: &str) -> Option<Sha256Digest> {
        digest_of_path(&self.lines, leaf, Some(&self.root), "")
    }
}
