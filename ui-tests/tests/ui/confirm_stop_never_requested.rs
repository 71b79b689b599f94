// Rule: a stop can be confirmed only after it was requested (`Child<Stopping>`).
use subzero_ui_tests::{running, supervisor};

fn main() {
    let child = running();
    let run = child.active_run().id();
    let proof = supervisor().confirm_stop(child.id(), run, 0);
    let _ = child.confirm_stop(proof);
}
