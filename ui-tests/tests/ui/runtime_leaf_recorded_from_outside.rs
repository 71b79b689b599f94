// Rule: the runtime exposes no function that mints LeafRecorded; only its worker driver
// mints one, on the worker's leaf_committed for the completed run.
use subzero_core::lifecycle::LeafRef;
use subzero_core::{ChildId, RunId, Sha256Digest};
use subzero_runtime::supervisor::proof;

fn main() {
    let leaf = LeafRef::new("leaf-1", Sha256Digest::of(b"t")).unwrap();
    let _ = proof::leaf_recorded(ChildId::generate(), RunId::generate(), leaf);
}
