//! Verifying a child's recorded checkpoint against its transcript before a resume.
//!
//! Each worker writes its own transcript format, chosen by the child's worker (frozen in its
//! snapshot, recorded with the transcript version from the worker's hello). One pipeline
//! verifies both; only the parser is the format's own:
//! - the Rust worker's append-only JSONL tree ([`rust`]);
//! - the Pi worker's: Pi's own session file ([`pi`]).
//!
//! Either way the digest is the one the worker reports in `leaf_committed`, computed by the
//! protocol's one definition (`subzero_protocol::transcript::path_digest`). Verification
//! reads the file and changes nothing; a resume then branches from the verified leaf (or
//! from the transcript's first root when no run of the child ever completed). An unknown
//! version is refused, never migrated.

mod pi;
mod rust;

use std::collections::HashMap;
use std::path::Path;

use subzero_core::lifecycle::{Checkpoint, LeafRef, Supervisor};
use subzero_core::{ChildId, ErrorCode, Sha256Digest};

use super::BrokerError;
use crate::store::LeafRef as StoredLeaf;

/// What a resume learned from the transcript.
#[derive(Debug, Default)]
pub(super) struct Verified {
    /// `(leafId, digest)` a resumed run starts from; `None` when the child has no
    /// transcript yet (it was interrupted before its worker wrote anything).
    pub start: Option<(String, String)>,
    /// The transcript's own digest at the recorded leaf, for the store to check against
    /// the leaf it has recorded when it commits the resume.
    pub observed: Option<subzero_core::lifecycle::ObservedLeaf>,
}

/// Which worker wrote the transcript, so which format it is in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Format {
    /// The Rust worker's tree.
    Rust,
    /// Pi's session file.
    Pi,
}

impl Format {
    /// The transcript parsed by this format's parser.
    fn parse(self, text: &str) -> Result<Parsed<'_>, String> {
        match self {
            Format::Rust => rust::parse(text),
            Format::Pi => pi::parse(text),
        }
    }

    /// Why a transcript of `found` version is refused by a worker that reads `wanted`.
    fn version_refused(self, found: Option<u64>, wanted: u64) -> String {
        match self {
            Format::Rust => format!(
                "the transcript is version {found:?} but this worker reads version {wanted}"
            ),
            Format::Pi => format!(
                "the transcript is Pi session version {found:?} but this worker reads version {wanted}; it is never migrated"
            ),
        }
    }
}

/// A transcript's lines by id: each with its parent's id and the raw line (newline kept).
type Lines<'t> = HashMap<String, (Option<String>, &'t str)>;

/// A transcript as its format's parser read it: all the one pipeline needs.
struct Parsed<'t> {
    /// The version its header names.
    version: Option<u64>,
    /// Where a resume with no recorded leaf starts: the first root; `None` when there is
    /// nothing to branch from.
    first_root: Option<String>,
    lines: Lines<'t>,
    /// The root every digested path must reach (`None`: any root).
    path_root: Option<String>,
    /// What every digest covers before the path (Pi's header line).
    prefix: &'t str,
    /// Why the first root has no digest, when it has none.
    rootless: &'static str,
}

impl Parsed<'_> {
    /// The digest of the path from a root to `leaf`, after the prefix; `None` when `leaf`
    /// is not in the transcript or its path is broken.
    fn digest_of(&self, leaf: &str) -> Option<Sha256Digest> {
        let lines = &self.lines;
        let digest = subzero_protocol::transcript::path_digest(
            leaf,
            self.path_root.as_deref(),
            self.prefix,
            lines.len(),
            |id| lines.get(id).map(|(parent, raw)| (parent.as_deref(), *raw)),
        )?;
        Sha256Digest::parse(&digest).ok()
    }
}

/// Verify the recorded leaf (or, with none recorded, the transcript's first root).
pub(super) fn verify(
    supervisor: &Supervisor,
    child: ChildId,
    transcript: &Path,
    recorded: Option<&StoredLeaf>,
    transcript_version: u64,
    format: Format,
) -> Result<Verified, BrokerError> {
    let incompatible = |why: String| incompatible(child, why);
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
    verify_text(
        supervisor,
        child,
        &text,
        recorded,
        transcript_version,
        format,
    )
}

/// Verify the recorded leaf of a transcript's `text`: the pipeline every format shares.
fn verify_text(
    supervisor: &Supervisor,
    child: ChildId,
    text: &str,
    recorded: Option<&StoredLeaf>,
    transcript_version: u64,
    format: Format,
) -> Result<Verified, BrokerError> {
    let incompatible = |why: String| incompatible(child, why);
    let parsed = format.parse(text).map_err(incompatible)?;
    if parsed.version != Some(transcript_version) {
        return Err(incompatible(
            format.version_refused(parsed.version, transcript_version),
        ));
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
        .or_else(|| parsed.first_root.clone())
    else {
        // A header and nothing else: nothing to branch from.
        return Ok(Verified::default());
    };
    let observed = parsed
        .digest_of(&target)
        .map(|d| LeafRef::new(&target, d))
        .transpose()
        .map_err(|e| incompatible(e.to_string()))?;
    // Mint point: `parsed` was read from `child`'s transcript, read from disk by `verify`,
    // and `digest_of` computed this leaf's digest from the lines on its root→leaf path.
    let observed = observed.map(|leaf| supervisor.observed_leaf(child, leaf));
    let checkpoint = Checkpoint::verify(child, recorded.as_ref(), observed.as_ref())
        .map_err(|e| incompatible(e.to_string()))?;
    let start = match checkpoint.leaf() {
        Some(leaf) => (leaf.leaf_id().to_owned(), leaf.digest().to_string()),
        None => {
            let digest = parsed
                .digest_of(&target)
                .ok_or_else(|| incompatible(parsed.rootless.into()))?;
            (target, digest.to_string())
        }
    };
    Ok(Verified {
        start: Some(start),
        observed: recorded.and(observed),
    })
}

/// The refusal of a checkpoint that cannot be resumed, saying `why`.
fn incompatible(child: ChildId, why: String) -> BrokerError {
    BrokerError::new(
        ErrorCode::CheckpointIncompatible,
        format!(
            "child {child}'s checkpoint cannot be resumed: {why}; its stored state was left unchanged"
        ),
    )
}

#[cfg(test)]
/// The Pi session file through the one pipeline.
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

    #[test]
    fn a_leafs_digest_covers_the_header_and_its_path_only() {
        let text = format!("{HEADER}{A}{B}{D}{C}not json, a crash's half line\n");
        let session = pi::parse(&text).expect("parses");
        let expected = Sha256Digest::of(format!("{HEADER}{A}{B}{C}").as_bytes());
        assert_eq!(session.digest_of("c"), Some(expected));
        // Another branch does not change it.
        let straight = format!("{HEADER}{A}{B}{C}");
        let other = pi::parse(&straight).expect("parses");
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
