//! The typed transitions, one `impl` block per state: `apply` exists only on
//! `Checkout<Settled<Changed>>`, `remove` only where no unapplied change would be lost.

use super::error::WrongEvidence;
use super::{
    Applied, ChangeKind, ChangeRecord, Changed, Checkout, CheckoutDecided, CheckoutSite, Discarded,
    InUse, LandingSeen, Prepared, RecordedChange, RecordedNoChange, Removed, Settled, Unchanged,
    decided,
};
use crate::ids::ChildId;

impl Checkout<Prepared> {
    /// A checkout just created on disk for `child`: the decision inserts its row
    /// (version 1).
    pub fn prepare(child: ChildId, site: CheckoutSite) -> CheckoutDecided<Prepared> {
        let prepared = Checkout {
            child,
            site,
            version: 1,
            state: Prepared { _private: () },
        };
        decided(None, prepared)
    }

    /// The child's first run starts in it.
    pub fn start_run(self) -> CheckoutDecided<InUse> {
        self.decide(InUse { _private: () })
    }

    /// Its child went (discarded or collected) before any run used it: nothing to keep.
    pub fn remove(self) -> CheckoutDecided<Removed> {
        self.decide(Removed { _private: () })
    }
}

impl Checkout<InUse> {
    /// The run settled and its change was committed and measured (`change`, minted where
    /// it was recorded). Refused, giving the checkout back, when the evidence is about
    /// another child or another base, or names the base as its head (that is no change).
    pub fn settle(
        self,
        change: RecordedChange,
    ) -> Result<CheckoutDecided<Settled<Changed>>, (Self, WrongEvidence)> {
        let refused = if change.child() != self.child {
            Some(format!(
                "the change was recorded for child {}",
                change.child()
            ))
        } else if change.base() != &self.site.base {
            Some(format!(
                "the change was measured against {}, not the checkout's base {}",
                change.base(),
                self.site.base
            ))
        } else if change.head() == &self.site.base || !change.head().same_kind(&self.site.base) {
            Some(format!(
                "head {} is not a change of base {}; settle it unchanged",
                change.head(),
                self.site.base
            ))
        } else {
            None
        };
        if let Some(reason) = refused {
            return Err(self.refuse(reason));
        }
        let (head, stats) = change.into_parts();
        let kind = Changed {
            change: ChangeRecord { head, stats },
        };
        Ok(self.decide(Settled { kind }))
    }

    /// The run settled and the checkout was found to hold no change (`proof`).
    pub fn settle_unchanged(
        self,
        proof: RecordedNoChange,
    ) -> Result<CheckoutDecided<Settled<Unchanged>>, (Self, WrongEvidence)> {
        if proof.child() != self.child {
            let reason = format!("the comparison was made for child {}", proof.child());
            return Err(self.refuse(reason));
        }
        if proof.base() != &self.site.base {
            let reason = format!(
                "the checkout was compared with {}, not its base {}",
                proof.base(),
                self.site.base
            );
            return Err(self.refuse(reason));
        }
        let kind = Unchanged { _private: () };
        Ok(self.decide(Settled { kind }))
    }

    fn refuse(self, reason: String) -> (Self, WrongEvidence) {
        let child = self.child;
        (self, WrongEvidence { child, reason })
    }
}

impl<C: ChangeKind> Checkout<Settled<C>> {
    /// A follow-up or a resume runs again in the same checkout.
    pub fn start_run(self) -> CheckoutDecided<InUse> {
        self.decide(InUse { _private: () })
    }
}

impl Checkout<Settled<Changed>> {
    /// The change landed in the main checkout (`landed`, minted where the landing was
    /// seen). Consumes the checkout: a change lands once. Refused, giving the checkout
    /// back, when the landing is of another child's checkout or of another head.
    pub fn apply(
        self,
        landed: LandingSeen,
    ) -> Result<CheckoutDecided<Applied>, (Self, WrongEvidence)> {
        let head = &self.state.kind.change.head;
        let reason = if landed.child() != self.child {
            format!(
                "the landing seen was of child {}'s checkout",
                landed.child()
            )
        } else if landed.head() != head {
            format!(
                "the main checkout holds {}, not the recorded head {head}",
                landed.head()
            )
        } else {
            let change = self.state.kind.change.clone();
            return Ok(self.decide(Applied { change }));
        };
        let child = self.child;
        Err((self, WrongEvidence { child, reason }))
    }

    /// Throw the change away on purpose (the checkout goes with it); the row keeps
    /// what was thrown away.
    pub fn discard(self) -> CheckoutDecided<Discarded> {
        let change = self.state.kind.change.clone();
        self.decide(Discarded { change })
    }

    /// The recorded change.
    pub fn recorded(&self) -> &ChangeRecord {
        &self.state.kind.change
    }
}

impl Checkout<Settled<Unchanged>> {
    /// Its child went (discarded or collected) and it holds no change: remove it.
    pub fn remove(self) -> CheckoutDecided<Removed> {
        self.decide(Removed { _private: () })
    }
}

impl Checkout<Applied> {
    /// The change that landed.
    pub fn landed(&self) -> &ChangeRecord {
        &self.state.change
    }
}
