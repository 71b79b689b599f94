//! The evidence a checkout's transitions need, minted by the one [`Supervisor`].
//!
//! * [`RecordedChange`] — the checkout's change was committed and measured: its base,
//!   its head commit and the diff stats between them.
//! * [`RecordedNoChange`] — the checkout was compared with its base and holds no change.
//! * [`LandingSeen`] — the recorded head landed in the main checkout.
//!
//! Like every proof in [`proof`](crate::lifecycle::proof): private fields, no `Default`,
//! no `Clone`, no `Deserialize`, and no constructor but the [`Supervisor`]'s, which
//! exists once per process and is lent to the code that observes the evidence (the git
//! engine that commits, measures and lands a checkout).

use super::record::{DiffStats, GitOid};
use crate::ids::ChildId;
use crate::lifecycle::proof::Supervisor;

impl Supervisor {
    /// The checkout of `child` was committed at `head` and measured against `base`
    /// (`stats`). Only then may it settle as changed.
    pub fn change_recorded(
        &self,
        child: ChildId,
        base: GitOid,
        head: GitOid,
        stats: DiffStats,
    ) -> RecordedChange {
        RecordedChange {
            child,
            base,
            head,
            stats,
        }
    }

    /// The checkout of `child` was compared with `base` and holds no change. Only then
    /// may it settle as unchanged.
    pub fn no_change_recorded(&self, child: ChildId, base: GitOid) -> RecordedNoChange {
        RecordedNoChange { child, base }
    }

    /// The main checkout now holds `head`, the recorded change of `child`'s checkout.
    pub fn landing_seen(&self, child: ChildId, head: GitOid) -> LandingSeen {
        LandingSeen { child, head }
    }
}

/// Proof that a checkout's change was committed and measured.
#[derive(Debug, PartialEq, Eq)]
pub struct RecordedChange {
    child: ChildId,
    base: GitOid,
    head: GitOid,
    stats: DiffStats,
}

impl RecordedChange {
    /// The child whose checkout changed.
    pub fn child(&self) -> ChildId {
        self.child
    }
    /// What the change is measured against.
    pub fn base(&self) -> &GitOid {
        &self.base
    }
    /// The commit that holds the change.
    pub fn head(&self) -> &GitOid {
        &self.head
    }
    /// Its size.
    pub fn stats(&self) -> DiffStats {
        self.stats
    }
    pub(super) fn into_parts(self) -> (GitOid, DiffStats) {
        (self.head, self.stats)
    }
}

/// Proof that a checkout holds no change against its base.
#[derive(Debug, PartialEq, Eq)]
pub struct RecordedNoChange {
    child: ChildId,
    base: GitOid,
}

impl RecordedNoChange {
    /// The child whose checkout is unchanged.
    pub fn child(&self) -> ChildId {
        self.child
    }
    /// The base it was compared with.
    pub fn base(&self) -> &GitOid {
        &self.base
    }
}

/// Proof that a checkout's recorded head landed in the main checkout.
#[derive(Debug, PartialEq, Eq)]
pub struct LandingSeen {
    child: ChildId,
    head: GitOid,
}

impl LandingSeen {
    /// The child whose change landed.
    pub fn child(&self) -> ChildId {
        self.child
    }
    /// The commit seen in the main checkout.
    pub fn head(&self) -> &GitOid {
        &self.head
    }
}
