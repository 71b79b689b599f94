//! The storage boundary: the one dynamic door from stored records into the lifecycle.
//!
//! Every typed value — a child in a state, a run in a status, a custody — is made by a
//! transition, except when the store reads one back. That door is
//! [`AnyChild::load`](super::AnyChild::load), [`AnyRun::load`](super::AnyRun::load),
//! [`Custody::load`] and [`Loaded::load`], and each takes the store's [`StorageKey`]:
//! code that is not the store cannot materialise a state (say a completed run with a
//! recorded leaf, or a custody naming itself the owner) from plain records.
//!
//! # The key is taken once
//! As with the capability tokens ([`Supervisor`](super::Supervisor)), Rust cannot limit a
//! constructor to one module of another crate, and the store lives in the runtime. So the
//! key exists once per process: [`StorageKey::take`] hands it to its first caller, the
//! store (`crates/subzero-runtime/src/store/mod.rs`), which keeps it; `tests/testsuite/capabilities.rs`
//! fails when another production file takes it.

use std::sync::atomic::{AtomicBool, Ordering};

use super::any::{AnyChild, ChildRecord};
use super::custody::{Custody, CustodyRecord};
use super::error::LoadError;
use crate::ids::ChildId;
use crate::state::{ChildState, Phase};

/// The store's authority to load lifecycle values from stored records.
///
/// Exists once per process: [`StorageKey::take`] hands it to its first caller. Not
/// `Clone`, no `Default`, no public field: the store keeps the one it took.
#[derive(Debug)]
pub struct StorageKey {
    _private: (),
}

/// Whether the one [`StorageKey`] of this process was taken.
static KEY_TAKEN: AtomicBool = AtomicBool::new(false);

impl StorageKey {
    /// The key, for the first caller in this process; `None` after. The store takes it
    /// before it reads a record; every load borrows it.
    pub fn take() -> Option<StorageKey> {
        (!KEY_TAKEN.swap(true, Ordering::SeqCst)).then_some(StorageKey { _private: () })
    }
}

/// A child as the store holds it: its lifecycle record, its custody, the phase it shows
/// and the version of the row it was read from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredChild {
    /// The lifecycle.
    pub record: ChildRecord,
    /// Who holds it.
    pub custody: CustodyRecord,
    /// The phase it shows.
    pub phase: Phase,
    /// The version of the stored row (bumped by every write of it), so a decision
    /// applies only to the row it was made from.
    pub version: u64,
}

/// What a decision was made from: the stored child as it was read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Origin {
    child: ChildId,
    state: ChildState,
    version: u64,
}

impl Origin {
    /// The child.
    pub fn child(&self) -> ChildId {
        self.child
    }

    /// Its state when it was read.
    pub fn state(&self) -> ChildState {
        self.state
    }

    /// The version of the row it was read from.
    pub fn version(&self) -> u64 {
        self.version
    }
}

/// A stored child loaded into the lifecycle, with its custody and phase: what every
/// decision on an existing child starts from (see [`Decided`](super::Decided)).
#[derive(Debug)]
pub struct Loaded {
    pub(super) origin: Origin,
    pub(super) child: AnyChild,
    pub(super) custody: Custody,
    pub(super) phase: Phase,
}

impl Loaded {
    /// The one checked way from a stored child to a decision: [`AnyChild::load`] of its
    /// record and its custody, which must be about the same child in the same state.
    pub fn load(stored: StoredChild, key: &StorageKey) -> Result<Loaded, LoadError> {
        let StoredChild {
            record,
            custody,
            phase,
            version,
        } = stored;
        let (id, state) = (record.id, record.state);
        let child = AnyChild::load(record, key)?;
        Ok(Loaded {
            origin: Origin {
                child: id,
                state,
                version,
            },
            custody: Custody::load(id, state, custody, key),
            child,
            phase,
        })
    }

    /// The child's lifecycle.
    pub fn child(&self) -> &AnyChild {
        &self.child
    }

    /// Who holds it.
    pub fn custody(&self) -> &Custody {
        &self.custody
    }

    /// The phase it shows.
    pub fn phase(&self) -> Phase {
        self.phase
    }

    /// What it was read as.
    pub fn origin(&self) -> Origin {
        self.origin
    }

    /// The lifecycle alone, for requests that decide without writing (a steer).
    pub fn into_child(self) -> AnyChild {
        self.child
    }
}
