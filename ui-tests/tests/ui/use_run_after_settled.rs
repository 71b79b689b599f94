// Rule: a settled run is gone: its transitions consumed it (and the child that held it).
use subzero_ui_tests::{failure, running};

fn main() {
    let child = running();
    let run = child.active_run().id();
    let _settled = child.fail(run, failure());
    let _ = child.stop(run);
}
