//! Checkouts in each state, built by legal transitions with proofs the fixture
//! supervisor mints; each decision is "written" by a writer that records nothing.

use std::convert::Infallible;
use std::path::PathBuf;

use subzero_core::ChildId;
use subzero_core::lifecycle::checkout::{
    Changed, CheckoutPhase, InUse, Prepared, Settled, Unchanged,
};
use subzero_core::lifecycle::{Checkout, CheckoutDecided, CheckoutSite, DiffStats, GitOid};

use crate::supervisor;

/// A git object id of 40 `c` digits (`'a'`: the base every fixture checkout has).
pub fn oid(c: char) -> GitOid {
    GitOid::parse(&c.to_string().repeat(40)).unwrap_or_else(|e| panic!("fixture: {e}"))
}

fn written<S: CheckoutPhase>(decided: CheckoutDecided<S>) -> Checkout<S> {
    match decided.commit(|_| Ok::<(), Infallible>(())) {
        Ok(checkout) => checkout,
        Err(never) => match never {},
    }
}

/// A checkout just prepared for a child of its own.
pub fn prepared_checkout() -> Checkout<Prepared> {
    let site = CheckoutSite {
        path: PathBuf::from("/state/checkouts/fixture"),
        base: oid('a'),
        workspace_head: oid('b'),
        dirty: false,
        carried: false,
    };
    written(Checkout::prepare(ChildId::generate(), site))
}

/// A checkout a run of its child is active in.
pub fn checkout_in_use() -> Checkout<InUse> {
    written(prepared_checkout().start_run())
}

/// A checkout settled with a recorded change at head `c…c`.
pub fn changed_checkout() -> Checkout<Settled<Changed>> {
    let checkout = checkout_in_use();
    let stats = DiffStats {
        files_changed: 1,
        insertions: 1,
        deletions: 0,
    };
    let proof = supervisor().change_recorded(checkout.child(), oid('a'), oid('c'), stats);
    match checkout.settle(proof) {
        Ok(decided) => written(decided),
        Err((_, e)) => panic!("fixture: {e}"),
    }
}

/// A checkout settled without a change.
pub fn unchanged_checkout() -> Checkout<Settled<Unchanged>> {
    let checkout = checkout_in_use();
    let proof = supervisor().no_change_recorded(checkout.child(), oid('a'));
    match checkout.settle_unchanged(proof) {
        Ok(decided) => written(decided),
        Err((_, e)) => panic!("fixture: {e}"),
    }
}
