// Rule: the expected run id of a stop is a RunId, never an Option ("stop whatever runs").
use subzero_ui_tests::running;

fn main() {
    let child = running();
    let expected = Some(child.active_run().id());
    let _ = child.stop(expected);
}
