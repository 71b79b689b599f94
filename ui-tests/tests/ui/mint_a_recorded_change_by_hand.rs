// Rule: a checkout settles only with the evidence that its change was recorded; only the
// supervisor mints a RecordedChange (its fields are private), so it cannot be asserted by
// hand.
use subzero_core::lifecycle::{DiffStats, RecordedChange};
use subzero_ui_tests::{checkout_in_use, oid};

fn main() {
    let checkout = checkout_in_use();
    let change = RecordedChange {
        child: checkout.child(),
        base: oid('a'),
        head: oid('c'),
        stats: DiffStats::default(),
    };
    let _ = checkout.settle(change);
}
