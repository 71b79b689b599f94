// Rule: a queued run starts only on an idle child; while a run is active it must wait.
use subzero_ui_tests::{queued_run, running};

fn main() {
    let child = running();
    let _ = child.start(queued_run());
}
