// Rule: the store writes only Decided values, and only a core transition makes one; a
// decision cannot be assembled from a child and a custody by hand.
use subzero_core::lifecycle::{AnyChild, Decided};
use subzero_ui_tests::running;

fn main() {
    let child = AnyChild::from(running());
    let _forged: Decided<()> = Decided {
        child,
        outcome: (),
    };
}
