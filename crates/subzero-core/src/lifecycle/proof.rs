//! Capability tokens: values that carry proof that something happened.
//!
//! * [`StopConfirmed`] — the worker confirmed cancellation and its process tree is
//!   gone. Only a [`Supervisor`] mints it.
//! * [`LeafRecorded`] — a completed run's transcript leaf was persisted. Only a
//!   [`Supervisor`] mints it; the next queued run cannot dispatch without it.
//! * [`ObservedLeaf`] — a leaf (id and digest) as read from a child's transcript on
//!   disk. Only a [`Supervisor`] mints it.
//! * [`CompactionReported`] — the worker of a child compacted its active run's transcript
//!   into a new branch. Only a [`Supervisor`] mints it, from the worker's `compacted`
//!   line: nothing outside the worker compacts a running child's transcript.
//! * [`Checkpoint`] — the recorded last completed leaf was verified against an
//!   [`ObservedLeaf`] of the same child. Only [`Checkpoint::verify`] (or
//!   [`Child::checkpoint`](super::Child)) makes one.
//! * [`Steering`] — the worker advertised steering. Only
//!   [`WorkerCapabilities::steering`] makes one, and only a [`Supervisor`] makes
//!   [`WorkerCapabilities`] (from the worker's parsed `hello`).
//!
//! All have private fields, no `Default`, no `Clone` (a proof is spent once), no
//! `Deserialize` and no public constructor other than the ones named above.
//!
//! # One minting authority, taken once
//! Rust cannot restrict a constructor to one module of *another* crate, yet the evidence
//! these tokens stand for is observed in the runtime: a worker's control line parsed by
//! its driver, a transcript read from disk. So the minting authority is a capability that
//! exists once per process, taken the way a HAL hands out its peripherals:
//! [`Supervisor::take`] gives it to the first caller and `None` to every later one. The
//! runtime takes it when its broker starts and lends it, by reference, to the code that
//! observes the evidence (the worker driver, the checkpoint verification); nothing else in
//! the process can mint, because nothing else can get it. `tests/testsuite/capabilities.rs` pins
//! where `take` is called. The authority is not `Clone` and has no public constructor:
//! a second one does not compile (the ui-tests show each path that is closed).

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};

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

/// The authority to mint [`StopConfirmed`], [`LeafRecorded`], [`ObservedLeaf`],
/// [`CompactionReported`] and [`WorkerCapabilities`].
///
/// Exists once per process: [`Supervisor::take`] hands it to its first caller. Not
/// `Clone`, no `Default`, no public field; code that observes evidence borrows it.
#[derive(Debug)]
pub struct Supervisor {
    _private: (),
}

/// Whether the one [`Supervisor`] of this process was taken.
static SUPERVISOR_TAKEN: AtomicBool = AtomicBool::new(false);

impl Supervisor {
    /// The minting authority, for the first caller in this process; `None` after.
    ///
    /// The runtime takes it when its broker starts (`supervisor::proof`), before any
    /// worker runs, and lends it to the points that observe each token's evidence: a
    /// parsed worker control line (`hello` for [`WorkerCapabilities`], `leaf_committed`
    /// for [`LeafRecorded`], `cancel_confirmed` of a run the worker reported stopped for
    /// [`StopConfirmed`], `compacted` for [`CompactionReported`]) or a transcript leaf
    /// read from disk for [`ObservedLeaf`].
    pub fn take() -> Option<Supervisor> {
        (!SUPERVISOR_TAKEN.swap(true, Ordering::SeqCst)).then_some(Supervisor { _private: () })
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

    /// `child`'s transcript, as just read from disk, holds `leaf`: an entry with that id
    /// whose root→leaf path has that digest.
    pub fn observed_leaf(&self, child: ChildId, leaf: LeafRef) -> ObservedLeaf {
        ObservedLeaf { child, leaf }
    }

    /// The worker reported `compacted` for `run`: it summarised the transcript into a
    /// new branch, leaving the branch that ends at `branch_from` whole.
    pub fn compaction_reported(
        &self,
        child: ChildId,
        run: RunId,
        tokens: (u64, u64),
        branch_from: String,
    ) -> CompactionReported {
        CompactionReported {
            child,
            run,
            tokens_before: tokens.0,
            tokens_after: tokens.1,
            branch_from,
        }
    }

    /// What the worker's parsed `hello` advertised.
    pub fn capabilities(&self, steering: bool) -> WorkerCapabilities {
        WorkerCapabilities { steering }
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

/// Proof that the worker of a child compacted its active run's transcript (it reported
/// `compacted`): the prompt tokens before and after, and the last entry of the branch it
/// left, which stays in the transcript.
#[derive(Debug, PartialEq, Eq)]
pub struct CompactionReported {
    child: ChildId,
    run: RunId,
    tokens_before: u64,
    tokens_after: u64,
    branch_from: String,
}

impl CompactionReported {
    /// The child.
    pub fn child(&self) -> ChildId {
        self.child
    }
    /// The run that compacted.
    pub fn run(&self) -> RunId {
        self.run
    }
    /// Prompt tokens before and after.
    pub fn tokens(&self) -> (u64, u64) {
        (self.tokens_before, self.tokens_after)
    }
    /// The last entry of the branch left behind.
    pub fn branch_from(&self) -> &str {
        &self.branch_from
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

/// A leaf as read from a child's transcript on disk: the entry id found there and the
/// digest of its root→leaf path, computed from the file. Only a [`Supervisor`] mints it,
/// where the transcript was read; a [`LeafRef`] the caller holds (the store's record,
/// say) is not an observation.
#[derive(Debug, PartialEq, Eq)]
pub struct ObservedLeaf {
    child: ChildId,
    leaf: LeafRef,
}

impl ObservedLeaf {
    /// The child whose transcript was read.
    pub fn child(&self) -> ChildId {
        self.child
    }
    /// The leaf the transcript holds.
    pub fn leaf(&self) -> &LeafRef {
        &self.leaf
    }
}

/// A verified resume point: the child's recorded last completed leaf, confirmed to be
/// present in the child's transcript with the same digest (or the transcript root when
/// no run ever completed).
#[derive(Debug, PartialEq, Eq)]
pub struct Checkpoint {
    child: ChildId,
    leaf: Option<LeafRef>,
}

impl Checkpoint {
    /// Verify the `recorded` last completed leaf (from the store) against the leaf
    /// `observed` under that id in `child`'s transcript. With no recorded leaf the
    /// checkpoint is the transcript root and `observed` is not consulted: a root
    /// checkpoint asserts nothing about a transcript, and a resume accepts it only for a
    /// child with no recorded leaf.
    pub fn verify(
        child: ChildId,
        recorded: Option<&LeafRef>,
        observed: Option<&ObservedLeaf>,
    ) -> Result<Checkpoint, CheckpointIncompatible> {
        let Some(recorded) = recorded else {
            return Ok(Checkpoint { child, leaf: None });
        };
        let reason = match observed {
            None => format!("the transcript has no entry {}", recorded.leaf_id),
            Some(o) if o.child != child => format!(
                "leaf {} was read from the transcript of child {}",
                o.leaf.leaf_id, o.child
            ),
            Some(ObservedLeaf { leaf: o, .. }) if o.leaf_id != recorded.leaf_id => format!(
                "the transcript offered leaf {} but the recorded last completed leaf is {}",
                o.leaf_id, recorded.leaf_id
            ),
            Some(ObservedLeaf { leaf: o, .. }) if o.digest != recorded.digest => format!(
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

/// What a worker advertised in its `hello`. Only a [`Supervisor`] makes one
/// ([`Supervisor::capabilities`]), from the parsed `hello`; the field is private and
/// nothing deserializes it, so a caller cannot claim a capability the worker never
/// advertised.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct WorkerCapabilities {
    steering: bool,
}

impl WorkerCapabilities {
    /// A worker that advertised nothing: what a broker knows of a worker it does not drive.
    /// It grants no capability, so it proves nothing and may be made anywhere.
    pub fn none() -> Self {
        Self { steering: false }
    }

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
    fn a_checkpoint_needs_the_recorded_leaf_observed_with_the_same_digest() {
        let child = ChildId::generate();
        let observed = |child, leaf: &LeafRef| ObservedLeaf {
            child,
            leaf: leaf.clone(),
        };
        let recorded = LeafRef::new("e-9", Sha256Digest::of(b"a")).unwrap();
        let other_digest = LeafRef::new("e-9", Sha256Digest::of(b"b")).unwrap();
        let other_id = LeafRef::new("e-8", Sha256Digest::of(b"a")).unwrap();
        let seen = observed(child, &recorded);
        let checkpoint = Checkpoint::verify(child, Some(&recorded), Some(&seen)).unwrap();
        assert_eq!(checkpoint.leaf(), Some(&recorded));
        for wrong in [
            observed(child, &other_digest),
            observed(child, &other_id),
            observed(ChildId::generate(), &recorded),
        ] {
            assert!(Checkpoint::verify(child, Some(&recorded), Some(&wrong)).is_err());
        }
        assert!(Checkpoint::verify(child, Some(&recorded), None).is_err());
        let root = Checkpoint::verify(child, None, Some(&seen)).unwrap();
        assert_eq!(root.leaf(), None);
    }

    #[test]
    fn capabilities_give_steering_only_when_advertised() {
        assert!(WorkerCapabilities { steering: true }.steering().is_some());
        assert!(WorkerCapabilities { steering: false }.steering().is_none());
    }
}
