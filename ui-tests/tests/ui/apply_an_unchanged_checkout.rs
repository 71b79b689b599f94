// Rule: an unchanged checkout has nothing to land; apply exists only on a checkout settled
// with a recorded change.
use subzero_ui_tests::{oid, supervisor, unchanged_checkout};

fn main() {
    let checkout = unchanged_checkout();
    let landed = supervisor().landing_seen(checkout.child(), oid('c'));
    let _ = checkout.apply(landed);
}
