//! Capability tokens: values that carry proof that something happened.
//!
//! * [`StopConfirmed`] — the worker confirmed cancellation and its process tree is
//!   gone. Only a [`Supervisor`] mints it.
//! * [`LeafRecorded`] — a completed run's transcript leaf was persisted. Only a
//!   [`Supervisor`] mints it; the next queued run cannot dispatch without it.
//! * [`Checkpoint`] — the recorded last completed leaf was verified against what the
//!   transcript holds. Only [`Checkpoint::verify`] (or
//!   [`Child::checkpoint`](super::Child)) makes one.
//! * [`Steering`] — the worker advertised steering. Only
//!   [`WorkerCapabilities::steering`] makes one.
//!
//! All have private fields, no `Default`, no `Clone` (a proof is spent once) and no
//! public constructor other than the ones named above.
//!
//! # Why `Supervisor` has a named escape hatch
//! Rust cannot restrict a constructor to one module of *another* crate. The runtime's
//! supervisor module (`crates/subzero-runtime/src/supervisor`) must mint stop
//! confirmations, so the choice is between a runtime-checked singleton (awkward in
//! tests, and still forgeable by whoever calls it first) and one loudly named,
//! unsafe-free constructor, [`Supervisor::designate_for_runtime_supervisor`], whose
//! callers are policed by a test (`tests/capabilities.rs`) that fails if the name
//! appears anywhere in the workspace outside the supervisor module, subzero-core and
//! its tests. Everything else — `StopConfirmed`, `LeafRecorded` — has no public
//! constructor at all, which the ui-tests show.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::error::CheckpointIncompatible;
use crate::digest::Sha256Digest;
use crate::ids::{ChildId, RunId};

/// Why a leaf id is not acceptable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "invalid_request: leaf id must be 1..=128 printable ASCII characters, got {len} characters"
)]
pub struct LeafIdError {
    len: usize,
}

/// A transcript leaf: the worker's entry id and the digest of the transcript up to it.
/// Deserializing validates the id like [`LeafRef::new`].
#[derive(Clone, PartialEq, Eq, Hash, Debug, Serialize, Deserialize)]
#[serde(try_from = "LeafRefWire", into = "LeafRefWire")]
pub struct LeafRef {
    leaf_id: String,
    digest: Sha256Digest,
}

#[derive(Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct LeafRefWire {
    leaf_id: String,
    digest: Sha256Digest,
}

impl TryFrom<LeafRefWire> for LeafRef {
    type Error = LeafIdError;
    fn try_from(wire: LeafRefWire) -> Result<Self, Self::Error> {
        LeafRef::new(&wire.leaf_id, wire.digest)
    }
}

impl From<LeafRef> for LeafRefWire {
    fn from(leaf: LeafRef) -> Self {
        LeafRefWire {
            leaf_id: leaf.leaf_id,
            digest: leaf.digest,
        }
    }
}

impl LeafRef {
    /// A leaf reference; the id is 1..=128 printable ASCII characters.
    pub fn new(leaf_id: &str, digest: Sha256Digest) -> Result<Self, LeafIdError> {
        let len = leaf_id.chars().count();
        if !(1..=128).contains(&len) || !leaf_id.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(LeafIdError { len });
        }
        Ok(Self {
            leaf_id: leaf_id.to_owned(),
            digest,
        })
    }

    /// The worker's transcript entry id.
    pub fn leaf_id(&self) -> &str {
        &self.leaf_id
    }

    /// The digest of the transcript up to this leaf.
    pub fn digest(&self) -> Sha256Digest {
        self.digest
    }
}

impl fmt::Display for LeafRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "leaf {} ({})", self.leaf_id, self.digest)
    }
}

/// The authority to mint [`StopConfirmed`] and [`LeafRecorded`].
///
/// Hold one in the runtime's supervisor module, where worker confirmations and leaf
/// commits arrive. See the module docs for why its constructor is a named escape hatch.
#[derive(Debug)]
pub struct Supervisor {
    _private: (),
}

impl Supervisor {
    /// The one way to obtain the authority. Call it only from
    /// `crates/subzero-runtime/src/supervisor` (and core's own tests); a test fails the
    /// build's checks if this name appears anywhere else.
    pub fn designate_for_runtime_supervisor() -> Self {
        Self { _private: () }
    }

    /// The worker sent `cancel_confirmed` for `run` and every process of its tree is
    /// gone (`reaped` processes were killed). Only then may a run become `stopped`.
    pub fn confirm_stop(&self, child: ChildId, run: RunId, reaped: u32) -> StopConfirmed {
        StopConfirmed { child, run, reaped }
    }

    /// The worker committed (fsynced) `leaf` for the completed `run`, and the store
    /// recorded it as the child's last completed leaf.
    pub fn leaf_recorded(&self, child: ChildId, run: RunId, leaf: LeafRef) -> LeafRecorded {
        LeafRecorded { child, run, leaf }
    }
}

/// Proof that the worker confirmed cancellation of one run and its tree exited.
#[derive(Debug, PartialEq, Eq)]
pub struct StopConfirmed {
    child: ChildId,
    run: RunId,
    reaped: u32,
}

impl StopConfirmed {
    /// The child whose run stopped.
    pub fn child(&self) -> ChildId {
        self.child
    }
    /// The run that stopped.
    pub fn run(&self) -> RunId {
        self.run
    }
    /// How many tool processes were killed.
    pub fn reaped(&self) -> u32 {
        self.reaped
    }
}

/// Proof that a completed run's transcript leaf was recorded.
#[derive(Debug, PartialEq, Eq)]
pub struct LeafRecorded {
    child: ChildId,
    run: RunId,
    leaf: LeafRef,
}

impl LeafRecorded {
    /// The child.
    pub fn child(&self) -> ChildId {
        self.child
    }
    /// The completed run.
    pub fn run(&self) -> RunId {
        self.run
    }
    /// The recorded leaf.
    pub fn leaf(&self) -> &LeafRef {
        &self.leaf
    }
    pub(crate) fn into_leaf(self) -> LeafRef {
        self.leaf
    }
}

/// A verified resume point: the child's recorded last completed leaf, confirmed to be
/// present in the transcript with the same digest (or the transcript root when no run
/// ever completed).
#[derive(Debug, PartialEq, Eq)]
pub struct Checkpoint {
    child: ChildId,
    leaf: Option<LeafRef>,
}

impl Checkpoint {
    /// Verify the `recorded` last completed leaf (from the store) against the leaf the
    /// transcript `observed` under that id. With no recorded leaf the checkpoint is the
    /// transcript root and `observed` is not consulted.
    pub fn verify(
        child: ChildId,
        recorded: Option<&LeafRef>,
        observed: Option<&LeafRef>,
    ) -> Result<Checkpoint, CheckpointIncompatible> {
        let Some(recorded) = recorded else {
            return Ok(Checkpoint { child, leaf: None });
        };
        let reason = match observed {
            None => format!("the transcript has no entry {}", recorded.leaf_id),
            Some(o) if o.leaf_id != recorded.leaf_id => format!(
                "the transcript offered leaf {} but the recorded last completed leaf is {}",
                o.leaf_id, recorded.leaf_id
            ),
            Some(o) if o.digest != recorded.digest => format!(
                "leaf {} has digest {} in the transcript but {} was recorded",
                recorded.leaf_id, o.digest, recorded.digest
            ),
            Some(_) => {
                return Ok(Checkpoint {
                    child,
                    leaf: Some(recorded.clone()),
                });
            }
        };
        Err(CheckpointIncompatible { child, reason })
    }

    /// The child this checkpoint belongs to.
    pub fn child(&self) -> ChildId {
        self.child
    }

    /// The leaf to branch from; `None` is the transcript root.
    pub fn leaf(&self) -> Option<&LeafRef> {
        self.leaf.as_ref()
    }
}

/// What a worker advertised in its `hello`.
#[derive(Clone, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkerCapabilities {
    /// Whether the worker can deliver steering between model turns.
    pub steering: bool,
}

impl WorkerCapabilities {
    /// The steering capability, present only when the worker advertised it.
    pub fn steering(&self) -> Option<Steering> {
        self.steering.then_some(Steering { _private: () })
    }
}

/// Proof that the current worker advertised steering.
#[derive(Debug)]
pub struct Steering {
    _private: (),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leaf_refs_validate_when_deserialized() {
        let digest = Sha256Digest::of(b"t");
        let good = serde_json::json!({"leafId": "e-1", "digest": digest.to_string()});
        let leaf: LeafRef = serde_json::from_value(good.clone()).unwrap();
        assert_eq!(serde_json::to_value(&leaf).unwrap(), good);
        let empty = serde_json::json!({"leafId": "", "digest": digest.to_string()});
        assert!(serde_json::from_value::<LeafRef>(empty).is_err());
        let spaced = serde_json::json!({"leafId": "a b", "digest": digest.to_string()});
        assert!(serde_json::from_value::<LeafRef>(spaced).is_err());
    }

    #[test]
    fn a_checkpoint_needs_the_recorded_leaf_with_the_same_digest() {
        let child = ChildId::generate();
        let recorded = LeafRef::new("e-9", Sha256Digest::of(b"a")).unwrap();
        let other_digest = LeafRef::new("e-9", Sha256Digest::of(b"b")).unwrap();
        assert!(Checkpoint::verify(child, Some(&recorded), Some(&recorded)).is_ok());
        assert!(Checkpoint::verify(child, Some(&recorded), Some(&other_digest)).is_err());
        assert!(Checkpoint::verify(child, Some(&recorded), None).is_err());
        let root = Checkpoint::verify(child, None, Some(&recorded)).unwrap();
        assert_eq!(root.leaf(), None);
    }
}
