// Rule: only the supervisor mints LeafRecorded; a recorded leaf cannot be asserted by hand.
use subzero_core::lifecycle::{LeafRecorded, LeafRef};
use subzero_core::Sha256Digest;
use subzero_ui_tests::running;

fn main() {
    let child = running();
    let proof = LeafRecorded {
        child: child.id(),
        run: child.active_run().id(),
        leaf: LeafRef::new("leaf-1", Sha256Digest::of(b"t")).unwrap(),
    };
    let _ = child.complete(proof);
}
