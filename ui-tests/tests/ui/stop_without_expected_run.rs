// Rule: stop requires the id of the run the caller means to stop (expectedRunId); there is
// no default run to stop.
use subzero_ui_tests::running;

fn main() {
    let child = running();
    let _ = child.stop(Default::default());
}
