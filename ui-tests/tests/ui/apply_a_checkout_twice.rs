// Rule: a change lands once: apply consumes the settled checkout, so it cannot be applied
// a second time.
use subzero_ui_tests::{changed_checkout, oid, supervisor};

fn main() {
    let checkout = changed_checkout();
    let child = checkout.child();
    let _ = checkout.apply(supervisor().landing_seen(child, oid('c')));
    let _ = checkout.apply(supervisor().landing_seen(child, oid('c')));
}
