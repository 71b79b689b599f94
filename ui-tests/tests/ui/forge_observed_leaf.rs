// Rule: only the supervisor mints ObservedLeaf, where the transcript is read; its fields
// are private.
use subzero_core::lifecycle::{Checkpoint, LeafRef, ObservedLeaf};
use subzero_core::Sha256Digest;
use subzero_ui_tests::interrupted;

fn main() {
    let child = interrupted();
    let observed = ObservedLeaf {
        child: child.id(),
        leaf: LeafRef::new("leaf-1", Sha256Digest::of(b"t")).unwrap(),
    };
    let _ = Checkpoint::verify(child.id(), Some(observed.leaf()), Some(&observed));
}
