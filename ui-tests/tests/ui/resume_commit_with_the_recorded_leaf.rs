// Rule: the store commits a resume only against the leaf the broker observed in the
// transcript, never against a LeafRef such as the stored one.
use subzero_core::lifecycle::LeafRef;
use subzero_runtime::store::{ModelRow, ResumeCommit};

fn commit(model: ModelRow, recorded: LeafRef) -> ResumeCommit {
    ResumeCommit {
        model,
        observed: Some(recorded),
        first: None,
        receipt: None,
    }
}

fn main() {
    let _ = commit;
}
