// Rule: a Checkpoint is verified against the leaf observed in the transcript
// (ObservedLeaf), never against a LeafRef the caller supplies.
use subzero_core::lifecycle::{Checkpoint, LeafRef};
use subzero_core::{ChildId, Sha256Digest};

fn main() {
    let leaf = LeafRef::new("leaf-1", Sha256Digest::of(b"t")).unwrap();
    let _ = Checkpoint::verify(ChildId::generate(), Some(&leaf), Some(&leaf));
}
