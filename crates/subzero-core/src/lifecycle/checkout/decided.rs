//! Decided checkout transitions: what the ledger writes.
//!
//! Every transition of a [`Checkout`] returns a [`CheckoutDecided`]: the checkout before
//! (its [`CheckoutOrigin`]: state and row version) and after. Its fields are private and
//! it has no public constructor, so only a transition makes one; the store's write takes
//! it by value and writes it through [`CheckoutDecided::commit`], which consumes it, so a
//! decision is written at most once and a state change nobody decided — an in-use
//! checkout straight to `applied` — cannot be handed to the store.

use super::record::CheckoutRecord;
use super::{Checkout, CheckoutPhase};
use crate::ids::ChildId;
use crate::state::CheckoutState;

/// What a checkout decision was made from: the stored checkout as it was read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CheckoutOrigin {
    child: ChildId,
    state: CheckoutState,
    version: u64,
}

impl CheckoutOrigin {
    /// The child whose checkout it is.
    pub fn child(&self) -> ChildId {
        self.child
    }
    /// Its state when it was read.
    pub fn state(&self) -> CheckoutState {
        self.state
    }
    /// The version of the row it was read from.
    pub fn version(&self) -> u64 {
        self.version
    }
}

/// A checkout transition the core decided: the checkout before and after.
#[derive(Debug)]
#[must_use = "a decision changes nothing until the store writes it"]
pub struct CheckoutDecided<S: CheckoutPhase> {
    origin: Option<CheckoutOrigin>,
    after: Checkout<S>,
}

/// The decision that moves `before` (at `version`) to `after`; `None` for a new checkout.
pub(super) fn decided<S: CheckoutPhase>(
    before: Option<(ChildId, CheckoutState, u64)>,
    after: Checkout<S>,
) -> CheckoutDecided<S> {
    let origin = before.map(|(child, state, version)| CheckoutOrigin {
        child,
        state,
        version,
    });
    CheckoutDecided { origin, after }
}

impl<S: CheckoutPhase> CheckoutDecided<S> {
    /// What the checkout was decided from; `None` for a checkout just prepared.
    pub fn origin(&self) -> Option<CheckoutOrigin> {
        self.origin
    }

    /// The checkout afterwards.
    pub fn checkout(&self) -> &Checkout<S> {
        &self.after
    }

    /// Writes the decision with `write` (the store's writer: the row over the row it was
    /// decided from, or a new row) and gives back the checkout as written. Consumes the
    /// decision, so it is written at most once.
    pub fn commit<E>(
        self,
        write: impl FnOnce(CheckoutCommit) -> Result<(), E>,
    ) -> Result<Checkout<S>, E> {
        write(CheckoutCommit {
            origin: self.origin,
            record: self.after.record(),
        })?;
        Ok(self.after)
    }
}

/// A checkout decision lent to the store for its one write. Only
/// [`CheckoutDecided::commit`] makes one.
#[derive(Debug)]
pub struct CheckoutCommit {
    origin: Option<CheckoutOrigin>,
    record: CheckoutRecord,
}

impl CheckoutCommit {
    /// What the checkout was decided from; `None` for a checkout just prepared.
    pub fn origin(&self) -> Option<CheckoutOrigin> {
        self.origin
    }

    /// The checkout afterwards, as the row is to hold it (its version is the row's next).
    pub fn record(&self) -> &CheckoutRecord {
        &self.record
    }
}
