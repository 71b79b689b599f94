// Rule: a run completes (and the next queued run dispatches) only with proof that its
// transcript leaf was recorded — a bare LeafRef is not that proof.
use subzero_core::lifecycle::LeafRef;
use subzero_core::Sha256Digest;
use subzero_ui_tests::running;

fn main() {
    let child = running();
    let leaf = LeafRef::new("leaf-1", Sha256Digest::of(b"t")).unwrap();
    let _ = child.complete(leaf);
}
