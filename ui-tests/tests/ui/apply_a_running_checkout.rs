// Rule: a checkout is applied only once its run settled with a recorded change; a checkout
// a run is still active in has no apply.
use subzero_ui_tests::{checkout_in_use, oid, supervisor};

fn main() {
    let checkout = checkout_in_use();
    let landed = supervisor().landing_seen(checkout.child(), oid('c'));
    let _ = checkout.apply(landed);
}
