// Rule: the runtime records a completion only with LeafRecorded and makes none from a
// LeafRef; only its worker driver mints one, on the worker's leaf_committed for the
// completed run.
use subzero_core::lifecycle::LeafRef;
use subzero_runtime::store::{NewArtifact, Settlement};

fn completed(leaf: LeafRef, artifact: NewArtifact) -> Settlement {
    Settlement::Completed {
        preview: String::new(),
        preview_truncated: false,
        artifact,
        leaf: leaf.into(),
        budget: None,
    }
}

fn main() {
    let _ = completed;
}
