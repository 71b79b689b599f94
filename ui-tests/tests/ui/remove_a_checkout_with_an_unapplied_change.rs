// Rule: a checkout whose recorded change was neither applied nor discarded cannot be
// removed; only a prepared or unchanged checkout is removed with its child.
use subzero_ui_tests::changed_checkout;

fn main() {
    let checkout = changed_checkout();
    let _ = checkout.remove();
}
