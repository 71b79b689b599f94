// Rule: an interrupted child has no run to stop; only resume continues it.
use subzero_core::RunId;
use subzero_ui_tests::interrupted;

fn main() {
    let child = interrupted();
    let _ = child.stop(RunId::generate());
}
