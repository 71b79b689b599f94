//! The lifecycle of a child's isolated checkout: `Checkout<Prepared>` (on disk, no run
//! yet) → `Checkout<InUse>` (a run of its child is active in it) → `Checkout<Settled<C>>`
//! (no active run; its change recorded, `C` = [`Changed`] or [`Unchanged`]) → back to
//! `InUse` for the next run, or to one of the final states: `Applied` (the change landed
//! in the main checkout), `Discarded` (the change thrown away on purpose), `Removed` (a
//! checkout with no change, removed with its child). The stored spellings are the
//! contract's `CheckoutState`.
//!
//! What cannot be written: applying a checkout that is in use or only prepared, applying
//! an unchanged one, applying twice (`apply` consumes the checkout), removing one whose
//! change was neither applied nor discarded, and settling without the [`RecordedChange`]
//! or [`RecordedNoChange`] the [`Supervisor`](super::Supervisor) mints when the change
//! was recorded. Every transition returns a [`CheckoutDecided`], the only thing the
//! store's ledger writes; [`AnyCheckout`] is the value-level twin at the storage boundary.

#![allow(
    clippy::result_large_err,
    reason = "fallible transitions give `self` back by value; boxing would allocate on every refusal"
)]

mod any;
mod decided;
mod error;
mod proof;
mod record;

pub use any::AnyCheckout;
pub use decided::{CheckoutCommit, CheckoutDecided, CheckoutOrigin};
pub use error::{CheckoutNotAllowed, CheckoutRefused, WrongEvidence};
pub use proof::{LandingSeen, RecordedChange, RecordedNoChange};
pub use record::{ChangeRecord, CheckoutRecord, CheckoutSite, DiffStats, GitOid, GitOidError};

use crate::ids::ChildId;
use crate::state::CheckoutState;
use decided::decided;
use sealed::Sealed;

mod sealed {
    /// Seals the checkout's state traits: no state can be added outside this crate. Its
    /// own seal, apart from the child's and the run's, so each closed set names only its
    /// own states.
    pub trait Sealed {}
}

/// A checkout state marker. Sealed: the set of states is closed.
pub trait CheckoutPhase: Sealed {
    /// The stored state.
    const STATE: CheckoutState;
    /// The change this state carries, if any.
    fn change(&self) -> Option<&ChangeRecord>;
}

/// What a settled checkout holds: [`Changed`] or [`Unchanged`]. Sealed.
pub trait ChangeKind: Sealed {
    /// The stored state of a checkout settled with this kind.
    const STATE: CheckoutState;
    /// The recorded change, if any.
    fn change(&self) -> Option<&ChangeRecord>;
}

/// Created on disk; no run has used it yet.
#[derive(Debug)]
pub struct Prepared {
    _private: (),
}

/// A run of its child is active in it.
#[derive(Debug)]
pub struct InUse {
    _private: (),
}

/// No active run; what the last run left was recorded.
#[derive(Debug)]
pub struct Settled<C: ChangeKind> {
    kind: C,
}

/// The settled checkout holds a recorded change (a head commit and its stats).
#[derive(Debug)]
pub struct Changed {
    change: ChangeRecord,
}

/// The settled checkout holds no change against its base.
#[derive(Debug)]
pub struct Unchanged {
    _private: (),
}

/// The change landed in the main checkout. Final.
#[derive(Debug)]
pub struct Applied {
    change: ChangeRecord,
}

/// Its change was thrown away on purpose (and the checkout with it). Final.
#[derive(Debug)]
pub struct Discarded {
    change: ChangeRecord,
}

/// An unchanged checkout, removed with its child. Final.
#[derive(Debug)]
pub struct Removed {
    _private: (),
}

macro_rules! phase {
    ($($ty:ty => $state:ident, |$s:ident| $change:expr;)+) => {$(
        impl Sealed for $ty {}
        impl CheckoutPhase for $ty {
            const STATE: CheckoutState = CheckoutState::$state;
            fn change(&self) -> Option<&ChangeRecord> {
                let $s = self;
                $change
            }
        }
    )+};
}

phase! {
    Prepared => Prepared, |_s| None;
    InUse => InUse, |_s| None;
    Applied => Applied, |s| Some(&s.change);
    Discarded => Discarded, |s| Some(&s.change);
    Removed => Removed, |_s| None;
}

impl Sealed for Changed {}
impl Sealed for Unchanged {}
impl<C: ChangeKind> Sealed for Settled<C> {}
impl ChangeKind for Changed {
    const STATE: CheckoutState = CheckoutState::SettledChanged;
    fn change(&self) -> Option<&ChangeRecord> {
        Some(&self.change)
    }
}
impl ChangeKind for Unchanged {
    const STATE: CheckoutState = CheckoutState::SettledUnchanged;
    fn change(&self) -> Option<&ChangeRecord> {
        None
    }
}
impl<C: ChangeKind> CheckoutPhase for Settled<C> {
    const STATE: CheckoutState = C::STATE;
    fn change(&self) -> Option<&ChangeRecord> {
        self.kind.change()
    }
}

/// A child's isolated checkout in state `S`.
#[derive(Debug)]
pub struct Checkout<S: CheckoutPhase> {
    child: ChildId,
    site: CheckoutSite,
    version: u64,
    state: S,
}

mod transitions;

impl<S: CheckoutPhase> Checkout<S> {
    /// The child it belongs to.
    pub fn child(&self) -> ChildId {
        self.child
    }

    /// Where it is and what it was made from.
    pub fn site(&self) -> &CheckoutSite {
        &self.site
    }

    /// Its stored state.
    pub fn state(&self) -> CheckoutState {
        S::STATE
    }

    /// The version of the row this value was read from or written as.
    pub fn version(&self) -> u64 {
        self.version
    }

    /// The change it carries, if its state carries one.
    pub fn change(&self) -> Option<&ChangeRecord> {
        self.state.change()
    }

    /// The checkout as stored.
    pub fn record(&self) -> CheckoutRecord {
        CheckoutRecord {
            child: self.child,
            state: S::STATE,
            site: self.site.clone(),
            change: self.change().cloned(),
            version: self.version,
        }
    }

    /// The decision that moves this checkout to `state`, one row version on.
    fn decide<T: CheckoutPhase>(self, state: T) -> CheckoutDecided<T> {
        let before = (self.child, S::STATE, self.version);
        let after = Checkout {
            child: self.child,
            site: self.site,
            version: self.version + 1,
            state,
        };
        decided(Some(before), after)
    }
}
